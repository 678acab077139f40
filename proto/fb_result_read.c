/* fb_result_read: a result and its kernel rows decoded from JSON (see
 * fb_result.h), strictly.
 *
 * What fb_result_to_json always writes (env, variants, comparison; a variant's
 * name, status, latency_ms, samples_ms) must be there; the rest may be missing
 * (results stored by older versions lack what came later), and reads as
 * unknown.  A field that is there must have its type (null where the encoder
 * writes null for unknown), and an unknown field is an error, except one
 * object per variant: the engine's own (fb_variant_result.extra).  The error
 * names the field by its path ("variants[1].latency_ms.median"). */
#include "fb_result.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RD_PATH_MAX 96

/* A field's path and the error it fills. */
typedef struct rd {
    fb_err *err;
    const char *at; /* the enclosing object's path, "" at the top */
} rd;

static const char *jtype(const cJSON *j)
{
    if (!j)
        return "nothing";
    if (cJSON_IsNull(j))
        return "null";
    if (cJSON_IsBool(j))
        return "a boolean";
    if (cJSON_IsNumber(j))
        return "a number";
    if (cJSON_IsString(j))
        return "a string";
    if (cJSON_IsArray(j))
        return "an array";
    return "an object";
}

static void rd_path(const rd *d, const char *key, char *out, size_t n)
{
    snprintf(out, n, "%s%s%s", d->at, d->at[0] && key[0] && key[0] != '[' ? "." : "", key);
}

__attribute__((format(printf, 3, 4))) static bool rd_fail(const rd *d, const char *key,
                                                          const char *fmt, ...)
{
    char path[RD_PATH_MAX], msg[256];
    va_list ap;

    rd_path(d, key, path, sizeof path);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fb_err_set(d->err, FB_EINVAL, path, "result: %s%s%s", path, path[0] ? " " : "", msg);
    return false;
}

/* The member key of o; required: missing is an error. */
static bool rd_get(const rd *d, const cJSON *o, const char *key, bool required, const cJSON **out)
{
    *out = cJSON_GetObjectItemCaseSensitive(o, key);
    return *out || !required || rd_fail(d, key, "is missing");
}

/* Every member of o is in allowed (NULL-terminated); one other member that
 * is an object may be the engine's own (*extra, when extra is not NULL). */
static bool rd_keys(const rd *d, const cJSON *o, const char *const *allowed, const cJSON **extra)
{
    const cJSON *m;

    cJSON_ArrayForEach(m, o)
    {
        int i = 0;
        while (allowed[i] && strcmp(allowed[i], m->string) != 0)
            i++;
        if (allowed[i])
            continue;
        if (extra && !*extra && cJSON_IsObject(m)) {
            *extra = m;
            continue;
        }
        return rd_fail(d, m->string, "is not a field of a result here");
    }
    return true;
}

/* A number or null (NaN); missing: NaN unless required. */
static bool rd_num(const rd *d, const cJSON *o, const char *key, bool required, double *out)
{
    const cJSON *j;
    *out = NAN;
    if (!rd_get(d, o, key, required, &j))
        return false;
    if (!j || cJSON_IsNull(j))
        return true;
    if (!cJSON_IsNumber(j))
        return rd_fail(d, key, "must be a number or null, got %s", jtype(j));
    *out = j->valuedouble;
    return true;
}

/* A whole number in [lo, hi], or null (-1); missing: -1. */
static bool rd_int(const rd *d, const cJSON *o, const char *key, int64_t lo, int64_t hi,
                   int64_t *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = -1;
    if (!j || cJSON_IsNull(j))
        return true;
    if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) ||
        j->valuedouble < (double)lo || j->valuedouble > (double)hi)
        return rd_fail(d, key, "must be a whole number in %lld..%lld or null, got %s",
                       (long long)lo, (long long)hi, jtype(j));
    *out = (int64_t)j->valuedouble;
    return true;
}

/* A string of fewer than cap bytes, or null / missing (""). */
static bool rd_str(const rd *d, const cJSON *o, const char *key, bool required, char *out,
                   size_t cap)
{
    const cJSON *j;
    out[0] = '\0';
    if (!rd_get(d, o, key, required, &j))
        return false;
    if (!j || cJSON_IsNull(j))
        return !required || rd_fail(d, key, "must be a string, got null");
    if (!cJSON_IsString(j))
        return rd_fail(d, key, "must be a string, got %s", jtype(j));
    if (strlen(j->valuestring) >= cap)
        return rd_fail(d, key, "is longer than %zu bytes", cap - 1);
    memcpy(out, j->valuestring, strlen(j->valuestring) + 1);
    return true;
}

/* The object at key (missing: *out NULL unless required; null: NULL when
 * nullable). */
static bool rd_obj(const rd *d, const cJSON *o, const char *key, bool required, bool nullable,
                   const cJSON **out)
{
    if (!rd_get(d, o, key, required, out))
        return false;
    if (!*out || (nullable && cJSON_IsNull(*out))) {
        *out = NULL;
        return true;
    }
    return cJSON_IsObject(*out) ||
           rd_fail(d, key, "must be an object%s, got %s", nullable ? " or null" : "", jtype(*out));
}

/* [a, b] of numbers or nulls, or null. */
static bool rd_pair(const rd *d, const cJSON *o, const char *key, double *a, double *b)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    const cJSON *x = cJSON_GetArrayItem(j, 0), *y = cJSON_GetArrayItem(j, 1);
    *a = *b = NAN;
    if (!j || cJSON_IsNull(j))
        return true;
    if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != 2 ||
        !(cJSON_IsNumber(x) || cJSON_IsNull(x)) || !(cJSON_IsNumber(y) || cJSON_IsNull(y)))
        return rd_fail(d, key, "must be [number or null, number or null] or null, got %s",
                       jtype(j));
    *a = cJSON_IsNumber(x) ? x->valuedouble : NAN;
    *b = cJSON_IsNumber(y) ? y->valuedouble : NAN;
    return true;
}

/* A nested reader at the path of o's member key (or o's element i when key is
 * NULL). */
static rd rd_in(const rd *d, const char *key, int i, char *buf, size_t n)
{
    char k[40];
    if (key)
        snprintf(k, sizeof k, "%s", key);
    else
        snprintf(k, sizeof k, "[%d]", i);
    rd_path(d, k, buf, n);
    return (rd){d->err, buf};
}

/* ---- env, interference, repetition ---- */

static bool rd_env(const rd *d, const cJSON *o, fb_env *e)
{
    static const char *const keys[] = {"device_name", "device_uuid", "driver",  "cuda",
                                       "cudnn",       "cublas",      "torch",   "triton",
                                       "cpu",         "blas",        "threads", "fusionbench",
                                       "hostname",    "roofline",    NULL};
    char p[RD_PATH_MAX];
    rd in = rd_in(d, "env", 0, p, sizeof p);
    const cJSON *roof;
    int64_t threads;

    if (!rd_keys(&in, o, keys, NULL) ||
        !rd_str(&in, o, "device_name", false, e->device_name, sizeof e->device_name) ||
        !rd_str(&in, o, "device_uuid", false, e->device_uuid, sizeof e->device_uuid) ||
        !rd_str(&in, o, "driver", false, e->driver, sizeof e->driver) ||
        !rd_str(&in, o, "cuda", false, e->cuda, sizeof e->cuda) ||
        !rd_str(&in, o, "cudnn", false, e->cudnn, sizeof e->cudnn) ||
        !rd_str(&in, o, "cublas", false, e->cublas, sizeof e->cublas) ||
        !rd_str(&in, o, "torch", false, e->torch, sizeof e->torch) ||
        !rd_str(&in, o, "triton", false, e->triton, sizeof e->triton) ||
        !rd_str(&in, o, "cpu", false, e->cpu, sizeof e->cpu) ||
        !rd_str(&in, o, "blas", false, e->blas, sizeof e->blas) ||
        !rd_str(&in, o, "fusionbench", false, e->fusionbench, sizeof e->fusionbench) ||
        !rd_str(&in, o, "hostname", false, e->hostname, sizeof e->hostname) ||
        !rd_int(&in, o, "threads", 1, 1 << 20, &threads) ||
        !rd_obj(&in, o, "roofline", false, true, &roof))
        return false;
    e->threads = threads > 0 ? (int)threads : 0;
    if (!roof)
        return true;
    static const char *const rkeys[] = {"triad_gbps", "gemm_gflops", NULL};
    char rp[RD_PATH_MAX];
    rd r = rd_in(&in, "roofline", 0, rp, sizeof rp);
    return rd_keys(&r, roof, rkeys, NULL) &&
           rd_num(&r, roof, "triad_gbps", true, &e->roofline_gbps) &&
           rd_num(&r, roof, "gemm_gflops", true, &e->roofline_gflops);
}

/* The reasons' names back into NVML's bits ("bit_N" for an unnamed one). */
static bool rd_reasons(const rd *d, const cJSON *arr, uint64_t *bits)
{
    const cJSON *s;
    int i = 0;

    *bits = 0;
    if (!arr)
        return true;
    if (!cJSON_IsArray(arr))
        return rd_fail(d, "throttle_reasons", "must be an array, got %s", jtype(arr));
    cJSON_ArrayForEach(s, arr)
    {
        int b = 0, n = -1;
        while (cJSON_IsString(s) && fb_throttle_reason_name(b) &&
               strcmp(fb_throttle_reason_name(b), s->valuestring) != 0)
            b++;
        if (cJSON_IsString(s) && !fb_throttle_reason_name(b) &&
            (sscanf(s->valuestring, "bit_%d%n", &b, &n) != 1 || n != (int)strlen(s->valuestring) ||
             b < 0 || b > 63))
            b = -1;
        if (!cJSON_IsString(s) || b < 0) {
            char k[48];
            snprintf(k, sizeof k, "throttle_reasons[%d]", i);
            return rd_fail(d, k, "must be a throttle reason's name, got %s", jtype(s));
        }
        *bits |= (uint64_t)1 << b;
        i++;
    }
    return true;
}

static bool rd_gpu(const rd *d, const cJSON *o, fb_gpu_interference *g)
{
    static const char *const keys[] = {"samples",           "sm_clock_mhz",     "mem_clock_mhz",
                                       "max_temperature_c", "throttle_reasons", NULL};
    char p[RD_PATH_MAX];
    rd in = rd_in(d, "gpu", 0, p, sizeof p);
    int64_t n;

    if (!rd_keys(&in, o, keys, NULL) || !rd_int(&in, o, "samples", 1, INT32_MAX, &n) ||
        !rd_pair(&in, o, "sm_clock_mhz", &g->sm_mhz_min, &g->sm_mhz_max) ||
        !rd_pair(&in, o, "mem_clock_mhz", &g->mem_mhz_min, &g->mem_mhz_max) ||
        !rd_num(&in, o, "max_temperature_c", false, &g->temp_c_max) ||
        !rd_reasons(&in, cJSON_GetObjectItemCaseSensitive(o, "throttle_reasons"),
                    &g->throttle_reasons))
        return false;
    g->n_samples = n > 0 ? (int)n : 1;
    return true;
}

static bool rd_interference(const rd *d, const cJSON *o, fb_interference *f)
{
    static const char *const keys[] = {
        "timed_ms", "steal_ms", "involuntary_switches", "minor_faults", "major_faults",
        "gpu",      NULL};
    char p[RD_PATH_MAX];
    rd in = rd_in(d, "interference", 0, p, sizeof p);
    const cJSON *gpu;

    return rd_keys(&in, o, keys, NULL) && rd_num(&in, o, "timed_ms", false, &f->timed_ms) &&
           rd_num(&in, o, "steal_ms", false, &f->steal_ms) &&
           rd_int(&in, o, "involuntary_switches", 0, INT64_MAX / 2, &f->invol_switches) &&
           rd_int(&in, o, "minor_faults", 0, INT64_MAX / 2, &f->minor_faults) &&
           rd_int(&in, o, "major_faults", 0, INT64_MAX / 2, &f->major_faults) &&
           rd_obj(&in, o, "gpu", false, true, &gpu) && (!gpu || rd_gpu(&in, gpu, &f->gpu));
}

static bool rd_repetition(const rd *d, const cJSON *o, fb_repetition *p)
{
    static const char *const keys[] = {"rounds_requested", "rounds", "budget_s", "stop", NULL};
    char path[RD_PATH_MAX];
    rd in = rd_in(d, "repetition", 0, path, sizeof path);
    int64_t req, rounds;

    if (!rd_keys(&in, o, keys, NULL) || !rd_int(&in, o, "rounds_requested", 0, INT32_MAX, &req) ||
        !rd_int(&in, o, "rounds", 0, INT32_MAX, &rounds) ||
        !rd_num(&in, o, "budget_s", false, &p->budget_s) ||
        !rd_str(&in, o, "stop", true, p->stop, sizeof p->stop))
        return false;
    p->rounds_requested = req > 0 ? (int)req : 0;
    p->rounds = rounds > 0 ? (int)rounds : 0;
    return true;
}

/* ---- variants ---- */

static bool rd_latency(const rd *d, const cJSON *o, fb_stats *st)
{
    static const char *const keys[] = {"median", "mean", "stdev", "min", "max",
                                       "p90",    "cv",   "ci95",  NULL};
    char p[RD_PATH_MAX];
    rd in = rd_in(d, "latency_ms", 0, p, sizeof p);

    return rd_keys(&in, o, keys, NULL) && rd_num(&in, o, "median", true, &st->median) &&
           rd_num(&in, o, "mean", false, &st->mean) && rd_num(&in, o, "stdev", false, &st->stdev) &&
           rd_num(&in, o, "min", false, &st->min) && rd_num(&in, o, "max", false, &st->max) &&
           rd_num(&in, o, "p90", false, &st->p90) && rd_num(&in, o, "cv", false, &st->cv) &&
           rd_pair(&in, o, "ci95", &st->ci95_lo, &st->ci95_hi);
}

static bool rd_samples(const rd *d, const cJSON *arr, fb_variant_result *v)
{
    int n = cJSON_GetArraySize(arr), i = 0;
    const cJSON *x;

    if (!cJSON_IsArray(arr))
        return rd_fail(d, "samples_ms", "must be an array, got %s", jtype(arr));
    v->samples_ms = n ? malloc((size_t)n * sizeof *v->samples_ms) : NULL;
    if (n && !v->samples_ms)
        return fb_err_set(d->err, FB_ENOMEM, NULL, "no memory for a result's samples") == FB_OK;
    cJSON_ArrayForEach(x, arr)
    {
        if (!cJSON_IsNumber(x) && !cJSON_IsNull(x)) {
            char k[32];
            snprintf(k, sizeof k, "samples_ms[%d]", i);
            return rd_fail(d, k, "must be a number, got %s", jtype(x));
        }
        v->samples_ms[i++] = cJSON_IsNumber(x) ? x->valuedouble : NAN;
    }
    v->n_samples = n;
    return true;
}

static bool rd_status(const rd *d, const cJSON *o, fb_variant_result *v)
{
    char s[32];

    if (!rd_str(d, o, "status", true, s, sizeof s))
        return false;
    for (int k = FB_VS_OK; k <= FB_VS_ERROR; k++) {
        if (strcmp(fb_vstatus_name((fb_vstatus)k), s) == 0) {
            v->status = (fb_vstatus)k;
            return rd_str(d, o, "message", false, v->message, sizeof v->message);
        }
    }
    return rd_fail(d, "status",
                   "must be ok, accuracy_failed, unsupported, oom, timeout, crashed "
                   "or error, got \"%.40s\"",
                   s);
}

static bool rd_kcat(const char *s, fb_kcat *out)
{
    for (int c = 0; c < FB_KC_COUNT; c++) {
        if (strcmp(fb_kcat_name((fb_kcat)c), s) == 0) {
            *out = (fb_kcat)c;
            return true;
        }
    }
    return false;
}

static bool rd_categories(const rd *d, const cJSON *o, fb_variant_result *v)
{
    const cJSON *m;

    if (!o)
        return true;
    if (!cJSON_IsObject(o))
        return rd_fail(d, "categories_ms", "must be an object, got %s", jtype(o));
    cJSON_ArrayForEach(m, o)
    {
        fb_kcat c;
        char k[64];
        snprintf(k, sizeof k, "categories_ms.%.40s", m->string);
        if (!rd_kcat(m->string, &c))
            return rd_fail(d, k, "is not a kernel category");
        if (!cJSON_IsNumber(m))
            return rd_fail(d, k, "must be a number, got %s", jtype(m));
        v->categories_ms[c] = m->valuedouble;
    }
    return true;
}

/* ops: an array of at most FB_MAX_KERNEL_OPS names into ops[], *n. */
static bool rd_ops(const rd *d, const cJSON *arr, char (*ops)[FB_NAME_MAX], int *n)
{
    const cJSON *s;

    *n = 0;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > FB_MAX_KERNEL_OPS)
        return rd_fail(d, "ops", "must be an array of at most %d names, got %s", FB_MAX_KERNEL_OPS,
                       jtype(arr));
    cJSON_ArrayForEach(s, arr)
    {
        if (!cJSON_IsString(s) || strlen(s->valuestring) >= FB_NAME_MAX) {
            char k[32];
            snprintf(k, sizeof k, "ops[%d]", *n);
            return rd_fail(d, k, "must be a name of fewer than %d bytes", FB_NAME_MAX);
        }
        memcpy(ops[(*n)++], s->valuestring, strlen(s->valuestring) + 1);
    }
    return true;
}

static bool rd_group(const rd *d, const cJSON *o, fb_fusion_group *g)
{
    static const char *const keys[] = {"rule", "kind", "count", "ops", NULL};
    int64_t count;

    if (!cJSON_IsObject(o))
        return rd_fail(d, "", "must be an object, got %s", jtype(o));
    if (!rd_keys(d, o, keys, NULL) || !rd_str(d, o, "rule", true, g->rule, sizeof g->rule) ||
        !rd_str(d, o, "kind", true, g->kind, sizeof g->kind) ||
        !rd_int(d, o, "count", 0, INT32_MAX, &count))
        return false;
    g->count = count > 0 ? (int)count : 0;
    return rd_ops(d, cJSON_GetObjectItemCaseSensitive(o, "ops"), g->ops, &g->n_ops);
}

static bool rd_groups(const rd *d, const cJSON *arr, fb_variant_result *v)
{
    int n = cJSON_GetArraySize(arr), i = 0;
    const cJSON *g;

    if (!arr)
        return true;
    if (!cJSON_IsArray(arr))
        return rd_fail(d, "fusion_groups", "must be an array, got %s", jtype(arr));
    v->fusion_groups = n ? calloc((size_t)n, sizeof *v->fusion_groups) : NULL;
    if (n && !v->fusion_groups)
        return fb_err_set(d->err, FB_ENOMEM, NULL, "no memory for fusion groups") == FB_OK;
    v->n_fusion_groups = n;
    cJSON_ArrayForEach(g, arr)
    {
        char p[RD_PATH_MAX], k[32];
        snprintf(k, sizeof k, "fusion_groups[%d]", i);
        rd in = rd_in(d, k, 0, p, sizeof p);
        if (!rd_group(&in, g, &v->fusion_groups[i++]))
            return false;
    }
    return true;
}

static bool rd_node_groups(const rd *d, const cJSON *arr, fb_variant_result *v)
{
    int n = cJSON_GetArraySize(arr), i = 0;
    const cJSON *x;

    if (!arr)
        return true;
    if (!cJSON_IsArray(arr))
        return rd_fail(d, "node_groups", "must be an array, got %s", jtype(arr));
    v->node_groups = n ? malloc((size_t)n * sizeof *v->node_groups) : NULL;
    if (n && !v->node_groups)
        return fb_err_set(d->err, FB_ENOMEM, NULL, "no memory for node groups") == FB_OK;
    v->n_node_groups = n;
    cJSON_ArrayForEach(x, arr)
    {
        bool ok =
            cJSON_IsNull(x) || (cJSON_IsNumber(x) && x->valuedouble == floor(x->valuedouble) &&
                                x->valuedouble >= 0 && x->valuedouble < v->n_fusion_groups);
        if (!ok) {
            char k[32];
            snprintf(k, sizeof k, "node_groups[%d]", i);
            return rd_fail(d, k, "must be an index into fusion_groups or null");
        }
        v->node_groups[i++] = cJSON_IsNumber(x) ? (int)x->valuedouble : -1;
    }
    return true;
}

static const char *const variant_keys[] = {
    "name",           "status",          "message",         "latency_ms",
    "samples_ms",     "unstable",        "kernels",         "kernel_time_ms",
    "busy_ms",        "idle_ms",         "fused_kernels",   "fused_ops",
    "peak_mem_bytes", "max_rel_error",   "categories_ms",   "memcpy_ms",
    "memcpy_bytes",   "dropped_records", "dram_read_bytes", "dram_write_bytes",
    "dram_reason",    "fusion_groups",   "node_groups",     NULL};

static bool rd_variant_metrics(const rd *d, const cJSON *o, fb_variant_result *v)
{
    const int64_t big = INT64_MAX / 2;
    return rd_int(d, o, "kernels", 0, big, &v->kernels) &&
           rd_num(d, o, "kernel_time_ms", false, &v->kernel_time_ms) &&
           rd_num(d, o, "busy_ms", false, &v->busy_ms) &&
           rd_num(d, o, "idle_ms", false, &v->idle_ms) &&
           rd_int(d, o, "fused_kernels", 0, big, &v->fused_kernels) &&
           rd_int(d, o, "fused_ops", 0, big, &v->fused_ops) &&
           rd_int(d, o, "peak_mem_bytes", 0, big, &v->peak_mem_bytes) &&
           rd_num(d, o, "max_rel_error", false, &v->max_rel_error) &&
           rd_categories(d, cJSON_GetObjectItemCaseSensitive(o, "categories_ms"), v) &&
           rd_num(d, o, "memcpy_ms", false, &v->memcpy_ms) &&
           rd_int(d, o, "memcpy_bytes", 0, big, &v->memcpy_bytes) &&
           rd_int(d, o, "dropped_records", 0, big, &v->dropped_records) &&
           rd_int(d, o, "dram_read_bytes", 0, big, &v->dram_read_bytes) &&
           rd_int(d, o, "dram_write_bytes", 0, big, &v->dram_write_bytes) &&
           rd_str(d, o, "dram_reason", false, v->dram_reason, sizeof v->dram_reason) &&
           rd_groups(d, cJSON_GetObjectItemCaseSensitive(o, "fusion_groups"), v) &&
           rd_node_groups(d, cJSON_GetObjectItemCaseSensitive(o, "node_groups"), v);
}

static bool rd_variant(const rd *d, const cJSON *o, fb_variant_result *v)
{
    const cJSON *lat, *samples, *unstable, *extra = NULL;

    if (!cJSON_IsObject(o))
        return rd_fail(d, "", "must be an object, got %s", jtype(o));
    /* What must be there first: a renamed field is named as missing. */
    if (!rd_str(d, o, "name", true, v->name, sizeof v->name) || !rd_status(d, o, v) ||
        !rd_obj(d, o, "latency_ms", true, false, &lat) ||
        !rd_get(d, o, "samples_ms", true, &samples) || !rd_keys(d, o, variant_keys, &extra) ||
        !rd_latency(d, lat, &v->latency) || !rd_samples(d, samples, v))
        return false;
    v->latency.n = v->n_samples;
    unstable = cJSON_GetObjectItemCaseSensitive(o, "unstable");
    if (unstable && !cJSON_IsBool(unstable))
        return rd_fail(d, "unstable", "must be true or false, got %s", jtype(unstable));
    v->unstable = cJSON_IsTrue(unstable);
    if (!rd_variant_metrics(d, o, v))
        return false;
    if (extra) {
        if (strlen(extra->string) >= sizeof v->extra_key)
            return rd_fail(d, extra->string, "is not a field of a result here");
        snprintf(v->extra_key, sizeof v->extra_key, "%s", extra->string);
        v->extra = cJSON_Duplicate(extra, 1);
        if (!v->extra)
            return fb_err_set(d->err, FB_ENOMEM, NULL, "no memory for a variant") == FB_OK;
    }
    return true;
}

static bool rd_variants(const rd *d, const cJSON *arr, fb_result *r)
{
    const cJSON *v;

    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > FB_MAX_VARIANTS)
        return rd_fail(d, "variants", "must be an array of at most %d variants, got %s",
                       FB_MAX_VARIANTS, jtype(arr));
    cJSON_ArrayForEach(v, arr)
    {
        char p[RD_PATH_MAX], k[32];
        snprintf(k, sizeof k, "variants[%d]", r->n_variants);
        rd in = rd_in(d, k, 0, p, sizeof p);
        if (!rd_variant(&in, v, &r->variants[r->n_variants]))
            return false;
        for (int i = 0; i < r->n_variants; i++)
            if (strcmp(r->variants[i].name, r->variants[r->n_variants].name) == 0)
                return rd_fail(&in, "name", "is \"%s\", the name of variants[%d] too",
                               r->variants[i].name, i);
        r->n_variants++;
    }
    return true;
}

/* ---- comparison ---- */

static fb_variant_result *rd_find(fb_result *r, const char *name)
{
    for (int i = 0; i < r->n_variants; i++)
        if (strcmp(r->variants[i].name, name) == 0)
            return &r->variants[i];
    return NULL;
}

/* One map of the comparison: {variant: number} (ci95: [lo, hi]; change: a
 * name), each naming a variant of the result. */
static bool rd_map(const rd *d, const cJSON *o, const char *key, fb_result *r)
{
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(o, key), *m;

    if (!map)
        return true;
    if (!cJSON_IsObject(map))
        return rd_fail(d, key, "must be an object, got %s", jtype(map));
    cJSON_ArrayForEach(m, map)
    {
        char k[80];
        fb_variant_result *v = rd_find(r, m->string);
        bool ci = strcmp(key, "speedup_ci95") == 0, change = strcmp(key, "change") == 0;
        snprintf(k, sizeof k, "%s.%.40s", key, m->string);
        if (!v)
            return rd_fail(d, k, "names no variant of the result");
        if (ci) {
            const cJSON *lo = cJSON_GetArrayItem(m, 0), *hi = cJSON_GetArrayItem(m, 1);
            if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != 2 || !cJSON_IsNumber(lo) ||
                !cJSON_IsNumber(hi))
                return rd_fail(d, k, "must be [lo, hi] numbers, got %s", jtype(m));
            v->speedup_lo = lo->valuedouble;
            v->speedup_hi = hi->valuedouble;
        } else if (change) {
            int c = FB_CHANGE_FASTER;
            while (
                c <= FB_CHANGE_NONE &&
                !(cJSON_IsString(m) && strcmp(fb_change_name((fb_change)c), m->valuestring) == 0))
                c++;
            if (c > FB_CHANGE_NONE)
                return rd_fail(d, k, "must be faster, slower or no_difference");
            v->change = (fb_change)c;
        } else if (!cJSON_IsNumber(m)) {
            return rd_fail(d, k, "must be a number, got %s", jtype(m));
        } else if (strcmp(key, "speedup") == 0) {
            v->speedup = m->valuedouble;
        }
    }
    return true;
}

static bool rd_comparison(const rd *d, const cJSON *o, fb_result *r)
{
    static const char *const keys[] = {
        "baseline", "speedup", "kernel_ratio", "memory_ratio", "speedup_ci95", "change", NULL};
    char p[RD_PATH_MAX];
    rd in = rd_in(d, "comparison", 0, p, sizeof p);

    if (!rd_keys(&in, o, keys, NULL) ||
        !rd_str(&in, o, "baseline", false, r->baseline, sizeof r->baseline))
        return false;
    for (int i = 1; i < 6; i++)
        if (!rd_map(&in, o, keys[i], r))
            return false;
    return true;
}

/* ---- one name per member ---- */

static int rd_cmp_name(const void *a, const void *b)
{
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* *twice: the first member name of object o that appears twice, or NULL (the
 * decoder reads the first of two, a re-encoding would write both: a result
 * with a doubled name says two things, so it is refused).  False: no memory. */
static bool rd_doubled(const rd *d, const cJSON *o, const char **twice)
{
    const cJSON *m, **names;
    int n = cJSON_GetArraySize(o), i = 0;

    *twice = NULL;
    if (n < 2)
        return true;
    names = malloc((size_t)n * sizeof *names);
    if (!names)
        return fb_err_set(d->err, FB_ENOMEM, NULL, "no memory for the result") == FB_OK;
    cJSON_ArrayForEach(m, o) names[i++] = m;
    qsort(names, (size_t)n, sizeof *names, rd_cmp_name);
    for (i = 1; i < n && !*twice; i++)
        if (strcmp(names[i - 1]->string, names[i]->string) == 0)
            *twice = names[i]->string;
    free(names);
    return true;
}

/* Every object under j (j included) names each member once, and every number
 * is finite (cJSON reads 1e999 as infinity, which no encoder can write back);
 * the error names the object or number by its path ("variants[0].categories_ms"). */
static bool rd_sound(const rd *d, const cJSON *j)
{
    const cJSON *m;
    const char *twice = NULL;
    int i = 0;

    if (cJSON_IsNumber(j) && !isfinite(j->valuedouble))
        return rd_fail(d, "", "is a number beyond a double's range");
    if (cJSON_IsObject(j) && !rd_doubled(d, j, &twice))
        return false;
    if (twice)
        return rd_fail(d, "", "names \"%s\" twice", twice);
    cJSON_ArrayForEach(m, j)
    {
        char p[RD_PATH_MAX];
        rd in = rd_in(d, cJSON_IsObject(j) ? m->string : NULL, i++, p, sizeof p);
        if ((cJSON_IsObject(m) || cJSON_IsArray(m) || cJSON_IsNumber(m)) && !rd_sound(&in, m))
            return false;
    }
    return true;
}

/* ---- the result ---- */

/* An object kept as it is (the graph, the explanation), when there is one. */
static bool rd_opaque(const rd *d, const cJSON *o, const char *key, cJSON **out)
{
    const cJSON *j;

    if (!rd_obj(d, o, key, false, false, &j))
        return false;
    if (!j)
        return true;
    *out = cJSON_Duplicate(j, 1);
    return *out || fb_err_set(d->err, FB_ENOMEM, NULL, "no memory for the result") == FB_OK;
}

static bool rd_result(const rd *d, const cJSON *j, fb_result *r)
{
    static const char *const keys[] = {"env",     "interference", "repetition",
                                       "plan_ms", "variants",     "comparison",
                                       "graph",   "explain",      NULL};
    const cJSON *env, *intf, *rep, *cmp;

    if (!cJSON_IsObject(j))
        return fb_err_set(d->err, FB_EINVAL, "", "a result must be a JSON object, got %s",
                          jtype(j)) == FB_OK;
    return rd_obj(d, j, "env", true, false, &env) && rd_get(d, j, "variants", true, &intf) &&
           rd_obj(d, j, "comparison", true, false, &cmp) && rd_keys(d, j, keys, NULL) &&
           rd_env(d, env, &r->env) && rd_obj(d, j, "interference", false, true, &intf) &&
           (!intf || rd_interference(d, intf, &r->interference)) &&
           rd_obj(d, j, "repetition", false, true, &rep) &&
           (!rep || rd_repetition(d, rep, &r->repetition)) &&
           rd_num(d, j, "plan_ms", false, &r->plan_ms) &&
           rd_variants(d, cJSON_GetObjectItemCaseSensitive(j, "variants"), r) &&
           rd_comparison(d, cmp, r) && rd_opaque(d, j, "graph", &r->graph) &&
           rd_opaque(d, j, "explain", &r->explain);
}

fb_code fb_result_from_json(const cJSON *j, fb_result *out, fb_err *err)
{
    rd d = {err, ""};

    fb_err_clear(err);
    fb_result_init(out);
    if (rd_sound(&d, j) && rd_result(&d, j, out))
        return FB_OK;
    if (!err->code)
        fb_err_set(err, FB_EINTERNAL, NULL, "result: decoding failed without a reason");
    fb_result_free(out);
    fb_result_init(out);
    return err->code;
}

/* ---- kernel rows ---- */

static bool rd_dim3(const rd *d, const cJSON *o, const char *key, int out[3])
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key), *x;
    int i = 0;

    out[0] = out[1] = out[2] = 0;
    if (!a)
        return true;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 3)
        return rd_fail(d, key, "must be [x, y, z], got %s", jtype(a));
    cJSON_ArrayForEach(x, a)
    {
        if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > INT32_MAX)
            return rd_fail(d, key, "must be [x, y, z] of whole numbers");
        out[i++] = (int)x->valuedouble;
    }
    return true;
}

static bool rd_launches(const rd *d, const cJSON *a, fb_kernel_row *k)
{
    const cJSON *x;

    if (!a)
        return true;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > FB_KERNEL_LAUNCHES_MAX)
        return rd_fail(d, "launches", "must be an array of at most %d [start, duration]",
                       FB_KERNEL_LAUNCHES_MAX);
    cJSON_ArrayForEach(x, a)
    {
        const cJSON *s = cJSON_GetArrayItem(x, 0), *t = cJSON_GetArrayItem(x, 1);
        if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) != 2 || !cJSON_IsNumber(s) ||
            !cJSON_IsNumber(t))
            return rd_fail(d, "launches", "must be an array of [start, duration] numbers");
        k->launches_ms[k->n_launches][0] = (float)s->valuedouble;
        k->launches_ms[k->n_launches][1] = (float)t->valuedouble;
        k->n_launches++;
    }
    return true;
}

static bool rd_kernel_row(const rd *d, const cJSON *o, fb_kernel_row *k)
{
    static const char *const keys[] = {"name",  "category", "count",       "total_ms", "mean_ms",
                                       "grid",  "block",    "ops",         "launches", "impl",
                                       "bytes", "flops",    "roofline_ms", "variant",  NULL};
    char cat[24];
    int64_t count;

    memset(k, 0, sizeof *k);
    if (!cJSON_IsObject(o))
        return rd_fail(d, "", "must be an object, got %s", jtype(o));
    if (!rd_keys(d, o, keys, NULL) || !rd_str(d, o, "name", true, k->name, sizeof k->name) ||
        !rd_str(d, o, "category", true, cat, sizeof cat))
        return false;
    if (!rd_kcat(cat, &k->category))
        return rd_fail(d, "category", "is not a kernel category: \"%s\"", cat);
    if (!rd_int(d, o, "count", 0, INT32_MAX, &count) ||
        !rd_num(d, o, "total_ms", false, &k->total_ms) ||
        !rd_num(d, o, "mean_ms", false, &k->mean_ms) || !rd_dim3(d, o, "grid", k->grid) ||
        !rd_dim3(d, o, "block", k->block) ||
        !rd_ops(d, cJSON_GetObjectItemCaseSensitive(o, "ops"), k->ops, &k->n_ops) ||
        !rd_launches(d, cJSON_GetObjectItemCaseSensitive(o, "launches"), k) ||
        !rd_str(d, o, "impl", false, k->impl, sizeof k->impl) ||
        !rd_num(d, o, "bytes", false, &k->bytes) || !rd_num(d, o, "flops", false, &k->flops) ||
        !rd_num(d, o, "roofline_ms", false, &k->roof_ms))
        return false;
    k->count = count > 0 ? (int)count : 0;
    return true;
}

fb_code fb_kernel_rows_from_json(const cJSON *arr, const char *at, fb_variant_result *v,
                                 fb_err *err)
{
    rd d = {err, at ? at : ""};
    int n = cJSON_GetArraySize(arr), i = 0;
    const cJSON *row;

    fb_err_clear(err);
    if (!cJSON_IsArray(arr))
        return fb_err_set(err, FB_EINVAL, d.at, "kernel rows must be an array, got %s", jtype(arr));
    if (!rd_sound(&d, arr))
        return err->code;
    free(v->kernel_rows);
    v->n_kernel_rows = 0;
    v->kernel_rows = n ? calloc((size_t)n, sizeof *v->kernel_rows) : NULL;
    if (n && !v->kernel_rows)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for kernel rows");
    cJSON_ArrayForEach(row, arr)
    {
        char p[RD_PATH_MAX];
        rd in = rd_in(&d, NULL, i, p, sizeof p);
        if (!rd_kernel_row(&in, row, &v->kernel_rows[i]))
            return err->code;
        v->n_kernel_rows = ++i;
    }
    return FB_OK;
}
