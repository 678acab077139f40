/* fbc_analysis: records → per-iteration figures (see fbc_analysis.h). */
#include "fbc_analysis.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- store ---- */

void fbc_store_init(fbc_store *s, size_t max)
{
    memset(s, 0, sizeof *s);
    s->max = max ? max : FBC_STORE_MAX;
}

void fbc_store_free(fbc_store *s)
{
    free(s->recs);
    memset(s, 0, sizeof *s);
}

void fbc_store_clear(fbc_store *s)
{
    s->n = 0;
    s->overflow = 0;
}

bool fbc_store_add(fbc_store *s, const fbc_rec *r)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        fbc_rec *p;
        if (cap > s->max)
            cap = s->max;
        p = cap > s->cap ? realloc(s->recs, cap * sizeof *p) : NULL;
        if (!p) {
            s->overflow++;
            return false;
        }
        s->recs = p;
        s->cap = cap;
    }
    s->recs[s->n++] = *r;
    return true;
}

/* ---- classification ---- */

/* The one table of kernel-name patterns (docs/gpu/CUPTI.md shows it).  Rows
 * are tried in order against the lower-cased name; the first substring that
 * occurs decides.  Order matters: attention before GEMM (flash kernels contain
 * "gemm"-like tiles), GEMM's split-K reduction before reductions, specific
 * reductions (cuDNN batch norm) before the generic library prefixes, and
 * TorchInductor's triton_{poi,red,per,tem}_ prefixes where they belong. */
static const struct {
    fb_kcat cat;
    const char *pat;
} fbc_patterns[] = {
    {FB_KC_ATTENTION, "flash"},
    {FB_KC_ATTENTION, "fmha"},
    {FB_KC_ATTENTION, "attention"},
    {FB_KC_ATTENTION, "attn"},
    {FB_KC_ATTENTION, "sdpa"},
    {FB_KC_GEMM, "gemm"},
    {FB_KC_GEMM, "xmma"},
    {FB_KC_GEMM, "splitkreduce"},
    {FB_KC_GEMM, "matmul"},
    {FB_KC_GEMM, "conv"},
    {FB_KC_GEMM, "fprop"},
    {FB_KC_GEMM, "dgrad"},
    {FB_KC_GEMM, "wgrad"},
    {FB_KC_GEMM, "triton_tem_"},
    {FB_KC_REDUCTION, "softmax"},
    {FB_KC_REDUCTION, "norm"},
    {FB_KC_REDUCTION, "bn_fw"},
    {FB_KC_REDUCTION, "bn_bw"},
    {FB_KC_REDUCTION, "welford"},
    {FB_KC_REDUCTION, "reduce"},
    {FB_KC_REDUCTION, "reduction"},
    {FB_KC_REDUCTION, "triton_red_"},
    {FB_KC_REDUCTION, "triton_per_"},
    {FB_KC_GEMM, "cutlass"},
    {FB_KC_GEMM, "cublas"},
    {FB_KC_GEMM, "sm90_"},
    {FB_KC_GEMM, "sm80_"},
    {FB_KC_COPY, "memcpy"},
    {FB_KC_COPY, "copy"},
    {FB_KC_COPY, "transpose"},
    {FB_KC_COPY, "nchwtonhwc"},
    {FB_KC_COPY, "nhwctonchw"},
    {FB_KC_COPY, "cat_"},
    {FB_KC_ELEMENTWISE, "elementwise"},
    {FB_KC_ELEMENTWISE, "vectorized"},
    {FB_KC_ELEMENTWISE, "unrolled"},
    {FB_KC_ELEMENTWISE, "pointwise"},
    {FB_KC_ELEMENTWISE, "triton_poi_"},
    {FB_KC_ELEMENTWISE, "bias"},
    {FB_KC_ELEMENTWISE, "relu"},
    {FB_KC_ELEMENTWISE, "gelu"},
    {FB_KC_ELEMENTWISE, "silu"},
    {FB_KC_ELEMENTWISE, "sigmoid"},
    {FB_KC_ELEMENTWISE, "tanh"},
    {FB_KC_ELEMENTWISE, "activation"},
    {FB_KC_ELEMENTWISE, "add"},
    {FB_KC_ELEMENTWISE, "mul"},
    {FB_KC_ELEMENTWISE, "scale"},
    {FB_KC_ELEMENTWISE, "fill"},
    {FB_KC_ELEMENTWISE, "cast"},
};

fb_kcat fbc_classify(const char *name)
{
    char low[FBC_NAME_MAX];
    size_t i = 0;

    if (!name)
        return FB_KC_OTHER;
    for (; name[i] && i < sizeof low - 1; i++)
        low[i] = (char)tolower((unsigned char)name[i]);
    low[i] = '\0';
    for (size_t p = 0; p < sizeof fbc_patterns / sizeof fbc_patterns[0]; p++)
        if (strstr(low, fbc_patterns[p].pat))
            return fbc_patterns[p].cat;
    return FB_KC_OTHER;
}

/* ---- interval union ---- */

static int span_cmp(const void *a, const void *b)
{
    const fbc_span *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

uint64_t fbc_union_ns(fbc_span *spans, size_t n)
{
    uint64_t total = 0, cur_s = 0, cur_e = 0;
    bool open = false;

    if (n == 0) /* spans may be NULL then, and qsort's pointer must not be */
        return 0;
    qsort(spans, n, sizeof *spans, span_cmp);
    for (size_t i = 0; i < n; i++) {
        if (spans[i].end <= spans[i].start)
            continue;
        if (open && spans[i].start <= cur_e) {
            if (spans[i].end > cur_e)
                cur_e = spans[i].end;
            continue;
        }
        if (open)
            total += cur_e - cur_s;
        cur_s = spans[i].start;
        cur_e = spans[i].end;
        open = true;
    }
    return open ? total + (cur_e - cur_s) : total;
}

/* ---- windows ---- */

bool fbc_window_of_range(const fbc_store *s, uint64_t ext_id, fbc_window *w)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->recs[i].kind == FBC_RANGE && s->recs[i].ext_id == ext_id) {
            w->ext_id = ext_id;
            w->t0 = s->recs[i].start;
            w->t1 = s->recs[i].end;
            return true;
        }
    }
    return false;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorted correlation ids mapped to w->ext_id.  *ids NULL and *n 0 when none. */
static fb_code corr_set(const fbc_store *s, const fbc_window *w, uint32_t **ids, size_t *n,
                        fb_err *err)
{
    size_t k = 0;

    *ids = NULL;
    *n = 0;
    for (size_t i = 0; i < s->n; i++)
        k += s->recs[i].kind == FBC_EXTCORR && s->recs[i].ext_id == w->ext_id;
    if (k == 0)
        return FB_OK;
    *ids = malloc(k * sizeof **ids);
    if (!*ids)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for %zu correlation ids", k);
    for (size_t i = 0; i < s->n; i++)
        if (s->recs[i].kind == FBC_EXTCORR && s->recs[i].ext_id == w->ext_id)
            (*ids)[(*n)++] = s->recs[i].corr;
    qsort(*ids, *n, sizeof **ids, u32_cmp);
    return FB_OK;
}

typedef struct member_ctx {
    const fbc_window *w;
    const uint32_t *ids;
    size_t n_ids;
} member_ctx;

static bool in_window(const member_ctx *m, const fbc_rec *r)
{
    if (m->ids)
        return bsearch(&r->corr, m->ids, m->n_ids, sizeof *m->ids, u32_cmp) != NULL;
    return r->start >= m->w->t0 && r->end <= m->w->t1;
}

/* ---- summary ---- */

void fbc_summary_free(fbc_summary *s)
{
    free(s->rows);
    s->rows = NULL;
    s->n_rows = 0;
}

static void summary_init(fbc_summary *s, uint64_t dropped)
{
    memset(s, 0, sizeof *s);
    s->dropped = dropped;
}

typedef struct kern_list {
    const fbc_rec **k; /* kernels of the window, launch order */
    size_t n;
} kern_list;

static int rec_launch_cmp(const void *a, const void *b)
{
    const fbc_rec *x = *(const fbc_rec *const *)a, *y = *(const fbc_rec *const *)b;
    if (x->corr != y->corr)
        return x->corr < y->corr ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Adds one activity record of the window to the totals and its span. */
static void account(fbc_summary *out, const fbc_rec *r, fbc_span *spans, size_t *n_spans)
{
    uint64_t d = r->end > r->start ? r->end - r->start : 0;

    spans[(*n_spans)++] = (fbc_span){r->start, r->end};
    if (r->kind == FBC_KERNEL) {
        fb_kcat c = fbc_classify(r->name);
        out->kernels++;
        out->kernel_ns += d;
        out->category_ns[c] += d;
        out->category_seen[c] = true;
    } else if (r->kind == FBC_MEMCPY) {
        out->memcpys++;
        out->memcpy_ns += d;
        out->memcpy_bytes += r->bytes;
        out->category_ns[FB_KC_COPY] += d;
        out->category_seen[FB_KC_COPY] = true;
    } else {
        out->memsets++;
        out->memset_ns += d;
        out->category_ns[FB_KC_COPY] += d;
        out->category_seen[FB_KC_COPY] = true;
    }
}

/* Busy, span and idle from the activity spans; collects the kernels. */
static fb_code activity(const fbc_store *s, const member_ctx *m, fbc_summary *out, kern_list *kl,
                        fb_err *err)
{
    fbc_span *spans = malloc((s->n ? s->n : 1) * sizeof *spans);
    uint64_t first = UINT64_MAX, last = 0;
    size_t n_spans = 0;

    kl->k = malloc((s->n ? s->n : 1) * sizeof *kl->k);
    kl->n = 0;
    if (!spans || !kl->k) {
        free(spans);
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory to analyse %zu records", s->n);
    }
    for (size_t i = 0; i < s->n; i++) {
        const fbc_rec *r = &s->recs[i];
        if (r->kind > FBC_MEMSET || !in_window(m, r))
            continue;
        account(out, r, spans, &n_spans);
        if (r->kind == FBC_KERNEL)
            kl->k[kl->n++] = r;
        first = r->start < first ? r->start : first;
        last = r->end > last ? r->end : last;
    }
    out->busy_ns = fbc_union_ns(spans, n_spans);
    out->span_ns = n_spans && last > first ? last - first : 0;
    out->idle_ns = out->span_ns > out->busy_ns ? out->span_ns - out->busy_ns : 0;
    free(spans);
    qsort(kl->k, kl->n, sizeof *kl->k, rec_launch_cmp);
    return FB_OK;
}

/* ---- memory ---- */

static int mem_cmp(const void *a, const void *b)
{
    const fbc_rec *x = *(const fbc_rec *const *)a, *y = *(const fbc_rec *const *)b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Peak live bytes from allocation and free records, in timestamp order: over
 * the whole store up to t1, and in [t0, t1] over the value at t0.  With no
 * window (t1 == 0) the whole store counts. */
static fb_code memory(const fbc_store *s, const fbc_window *w, fbc_summary *out, fb_err *err)
{
    const fbc_rec **ev = malloc((s->n ? s->n : 1) * sizeof *ev);
    uint64_t t1 = w->t1 ? w->t1 : UINT64_MAX;
    int64_t live = 0, peak = 0, base = 0, wpeak = 0;
    bool base_set = false;
    size_t n = 0;

    if (!ev)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for memory events");
    for (size_t i = 0; i < s->n; i++)
        if (s->recs[i].kind == FBC_ALLOC || s->recs[i].kind == FBC_FREE)
            ev[n++] = &s->recs[i];
    qsort(ev, n, sizeof *ev, mem_cmp);
    for (size_t i = 0; i < n && ev[i]->start <= t1; i++) {
        if (!base_set && ev[i]->start >= w->t0) {
            base = wpeak = live;
            base_set = true;
        }
        live += ev[i]->kind == FBC_ALLOC ? (int64_t)ev[i]->bytes : -(int64_t)ev[i]->bytes;
        peak = live > peak ? live : peak;
        if (base_set && live > wpeak)
            wpeak = live;
    }
    free(ev);
    out->peak_bytes = peak;
    out->peak_delta_bytes = base_set ? wpeak - base : 0;
    return FB_OK;
}

/* ---- kernel rows ---- */

static int row_cmp(const void *a, const void *b)
{
    const fb_kernel_row *x = a, *y = b;
    return x->total_ms > y->total_ms ? -1 : x->total_ms < y->total_ms;
}

static void row_ops(fb_kernel_row *row, const fbc_label *lab)
{
    if (!lab || row->n_ops > 0)
        return;
    for (int o = 0; o < lab->n_ops && row->n_ops < FB_MAX_KERNEL_OPS; o++)
        if (lab->ops && lab->ops[o])
            snprintf(row->ops[row->n_ops++], FB_NAME_MAX, "%s", lab->ops[o]);
}

static fb_kernel_row *row_find(fb_kernel_row *rows, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strncmp(rows[i].name, name, FB_KERNEL_NAME_MAX - 1) == 0)
            return &rows[i];
    return NULL;
}

static void row_start(fb_kernel_row *row, const fbc_rec *r)
{
    memset(row, 0, sizeof *row);
    snprintf(row->name, sizeof row->name, "%s", r->name);
    row->category = fbc_classify(r->name);
    memcpy(row->grid, r->grid, sizeof row->grid);
    memcpy(row->block, r->block, sizeof row->block);
}

/* One row per kernel name, heaviest first, cut to FBC_TOP_MAX. */
static fb_code rows(const kern_list *kl, const fbc_label *labels, int n_labels, fbc_summary *out,
                    fb_err *err)
{
    bool use_labels = labels && n_labels > 0 && (size_t)n_labels == kl->n;
    fb_kernel_row *rw = calloc(kl->n ? kl->n : 1, sizeof *rw);
    int n = 0;

    if (!rw)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for %zu kernel rows", kl->n);
    for (size_t i = 0; i < kl->n; i++) {
        const fbc_rec *r = kl->k[i];
        fb_kernel_row *row = row_find(rw, n, r->name);
        if (!row)
            row_start(row = &rw[n++], r);
        row->count++;
        row->total_ms += (double)(r->end > r->start ? r->end - r->start : 0) / 1e6;
        row_ops(row, use_labels ? &labels[i] : NULL);
    }
    for (int i = 0; i < n; i++)
        rw[i].mean_ms = rw[i].total_ms / rw[i].count;
    qsort(rw, (size_t)n, sizeof *rw, row_cmp);
    out->rows = rw;
    out->n_rows = n > FBC_TOP_MAX ? FBC_TOP_MAX : n;
    return FB_OK;
}

fb_code fbc_summarize(const fbc_store *s, const fbc_window *w, const fbc_label *labels,
                      int n_labels, fbc_summary *out, fb_err *err)
{
    member_ctx m = {.w = w};
    uint32_t *ids = NULL;
    kern_list kl = {0};
    fb_code rc;

    summary_init(out, s->overflow);
    rc = corr_set(s, w, &ids, &m.n_ids, err);
    if (rc)
        goto out;
    m.ids = ids;
    rc = activity(s, &m, out, &kl, err);
    if (rc)
        goto out;
    rc = memory(s, w, out, err);
    if (rc)
        goto out;
    rc = rows(&kl, labels, n_labels, out, err);
out:
    free(ids);
    free(kl.k);
    return rc;
}

void fbc_summary_to_variant(fbc_summary *s, int64_t base_bytes, fb_variant_result *vr)
{
    vr->kernels = s->kernels;
    vr->kernel_time_ms = (double)s->kernel_ns / 1e6;
    vr->busy_ms = (double)s->busy_ns / 1e6;
    vr->idle_ms = (double)s->idle_ns / 1e6;
    vr->memcpy_ms = (double)s->memcpy_ns / 1e6;
    vr->memcpy_bytes = (int64_t)s->memcpy_bytes;
    vr->dropped_records = (int64_t)s->dropped;
    for (int c = 0; c < FB_KC_COUNT; c++)
        vr->categories_ms[c] = s->category_seen[c] ? (double)s->category_ns[c] / 1e6 : NAN;
    if (base_bytes >= 0)
        vr->peak_mem_bytes = base_bytes + s->peak_delta_bytes;
    free(vr->kernel_rows);
    vr->kernel_rows = s->rows;
    vr->n_kernel_rows = s->n_rows;
    s->rows = NULL;
    s->n_rows = 0;
}

/* ---- per-launch times ---- */

typedef struct corr_launch {
    uint32_t corr;
    int launch;
} corr_launch;

static int corr_launch_cmp(const void *a, const void *b)
{
    const corr_launch *x = a, *y = b;
    return x->corr < y->corr ? -1 : x->corr > y->corr;
}

fb_code fbc_launch_times(const fbc_store *s, const fbc_window *w, int n, double *t_ms,
                         double *wall_ms, int *unmarked, fb_err *err)
{
    member_ctx m = {.w = w};
    uint32_t *ids = NULL;
    corr_launch *marks = malloc((s->n ? s->n : 1) * sizeof *marks);
    size_t n_marks = 0;
    uint64_t first = UINT64_MAX, last = 0;
    size_t marked = 0;
    fb_code rc = marks ? corr_set(s, w, &ids, &m.n_ids, err)
                       : fb_err_set(err, FB_ENOMEM, NULL, "no memory for %zu launch marks", s->n);
    m.ids = ids;
    *unmarked = 0;
    *wall_ms = 0;
    for (int i = 0; i < n; i++)
        t_ms[i] = 0;
    if (rc)
        goto out;
    /* correlation ids are unique in a process: the store's marks, sorted */
    for (size_t i = 0; i < s->n; i++)
        if (s->recs[i].kind == FBC_LAUNCH)
            marks[n_marks++] = (corr_launch){s->recs[i].corr, (int)s->recs[i].ext_id - 1};
    qsort(marks, n_marks, sizeof *marks, corr_launch_cmp);
    for (size_t i = 0; i < s->n; i++) {
        const fbc_rec *r = &s->recs[i];
        if (r->kind > FBC_MEMSET || !in_window(&m, r))
            continue;
        corr_launch key = {r->corr, 0};
        const corr_launch *hit = bsearch(&key, marks, n_marks, sizeof *marks, corr_launch_cmp);
        if (hit && hit->launch >= 0 && hit->launch < n) {
            t_ms[hit->launch] += (double)(r->end > r->start ? r->end - r->start : 0) / 1e6;
            marked++;
        } else {
            ++*unmarked;
        }
        first = r->start < first ? r->start : first;
        last = r->end > last ? r->end : last;
    }
    if (last <= first)
        rc = fb_err_set(err, FB_EINVAL, NULL, "the profiled iteration recorded no device activity");
    else if (n > 0 && marked == 0)
        /* zeros for every launch would read as launches that took no time */
        rc = fb_err_set(err, FB_EUNAVAIL, NULL,
                        "CUPTI recorded none of the iteration's %d launch marks (%d activity "
                        "records unmarked): no external-correlation records",
                        n, *unmarked);
    else
        *wall_ms = (double)(last - first) / 1e6;
out:
    free(ids);
    free(marks);
    return rc;
}
