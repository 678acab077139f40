/* gr_cost: the cost planner (gr_cost.h). */
#include "gr_cost.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fb_clock.h"
#include "fb_cpu.h"
#include "fb_log.h"
#include "fb_stats.h"
#include "gr_costmodel.h"
#include "nat_cost.h"
#include "nat_kern_cpu.h" /* nat_conv2d_impl */

#define ROUNDS 5 /* timed runs of each plan, alternating the order */
/* The GEMM choice (gr_gemm_choose) times each pair of plans ROUNDS times,
 * and more while they take under GEMM_MS (whisper_tiny at batch 8 on two
 * threads, 2.9 s an eager run, decided in 26.5 s on ROUNDS; a floor of 11
 * rounds would take about 11/5 of that), and compares least times: either GEMM computes the same
 * op, so the least of the runs is each kernel's own time, what a neighbour's load adds left out.
 * Medians decided nothing on the VM of an AMD EPYC 7003 (resnet50 on one core: the same launch's
 * times in 11 runs spread over 40% of their median, and a 1x1 conv whose least time was 20% lower
 * on ours had the higher median).  The other GEMM must be faster by GEMM_MARGIN, so that two
 * kernels as fast as each other keep the job's default. */
#define GEMM_MS     3000.0
#define GEMM_MARGIN 0.03
#define MAX_ROUNDS  50 /* and more while they take under MEASURE_MS */
#define MEASURE_MS  300.0
/* Another form must be faster than fused by the share the explanation calls
 * noise (METHOD.md), so that the planner keeps no group the explanation
 * would judge lost: at 3% it kept a depthwise 5x5 conv + SiLU that lost
 * 2.5-3% (tests/e2e/test_explain_cpu.py). */
#define MARGIN         FB_NOISE_THRESHOLD
#define MARGIN_MS      0.002      /* and by this much at least (2 us) */
#define CACHE_MAX      (16 << 20) /* bytes of cache file read */
#define CACHE_ENTRIES  50000      /* past this the cache starts afresh */
#define CACHE_CONTEXTS 64         /* calibrations kept (machines x builds x threads) */
#define SIG_MAX        8192

/* The plan variants of the measuring ctx. */
enum { V_EAGER = NAT_EAGER, V_FUSED = NAT_FUSED, V_SPLIT = 2 };

fb_code gr_planner_from_spec(const fb_spec *spec, bool device_timer, bool *cost, fb_err *err)
{
    const cJSON *j =
        spec->params ? cJSON_GetObjectItemCaseSensitive(spec->params, "planner") : NULL;
    const char *env = getenv("FUSIONBENCH_PLANNER");
    bool cpu = !spec->device[0] || strcmp(spec->device, "cpu") == 0;
    *cost = false;
    if (!j) { /* the default: $FUSIONBENCH_PLANNER, else cost where it can measure */
        if (env && env[0] && strcmp(env, "rules") != 0 && strcmp(env, "cost") != 0)
            return fb_err_set(err, FB_EINVAL, "FUSIONBENCH_PLANNER",
                              "must be \"rules\" or \"cost\" (the worker's environment)");
        *cost = (cpu || device_timer) && !(env && strcmp(env, "rules") == 0);
        return FB_OK;
    }
    if (!cJSON_IsString(j) ||
        (strcmp(j->valuestring, "rules") != 0 && strcmp(j->valuestring, "cost") != 0))
        return fb_err_set(err, FB_EINVAL, "params.planner", "must be \"rules\" or \"cost\"");
    *cost = strcmp(j->valuestring, "cost") == 0;
    if (*cost && !cpu && !device_timer)
        return fb_err_set(err, FB_EUNSUPPORTED, "params.planner",
                          "the cost planner cannot time launches on %s here; its jobs plan by "
                          "the rules",
                          spec->device);
    return FB_OK;
}

/* ---- keys ---- */

void gr_cost_key(const char *signature, const char *context, char key[17])
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a, 64 bits */
    for (const char *s = context; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    h = (h ^ '|') * 1099511628211ull;
    for (const char *s = signature; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    snprintf(key, 17, "%016llx", (unsigned long long)h);
}

/* The CPU's model name ("?" when /proc/cpuinfo does not say). */
static void cpu_model(char *buf, size_t cap)
{
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    snprintf(buf, cap, "?");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(buf, cap, "%s", colon + 2);
            buf[strcspn(buf, "\n")] = '\0';
            break;
        }
    }
    if (f)
        fclose(f);
}

void gr_cost_context(int threads, bool pack, const char *device, char *buf, size_t cap)
{
    char model[256], build[160];
    const char *id = getenv("FUSIONBENCH_BUILD_ID");
    struct stat st;
    cpu_model(model, sizeof model);
    if (id && id[0])
        snprintf(build, sizeof build, "%s", id);
    else if (stat("/proc/self/exe", &st) == 0)
        snprintf(build, sizeof build, "exe %llu:%llu %lld bytes at %lld.%09ld",
                 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                 (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    else
        snprintf(build, sizeof build, "?");
    if (device)
        snprintf(buf, cap, "v1|%s|%s", device, build);
    else
        snprintf(buf, cap, "v1|%s x%ld|%s|threads %d|%s|%s", model, sysconf(_SC_NPROCESSORS_ONLN),
                 build, threads, pack ? "packed" : "openblas",
                 fb_cpu_wide() ? "16 lanes" : "8 lanes"); /* FUSIONBENCH_NATIVE_ISA */
}

/* Appends to sig (cap SIG_MAX) printf-style; truncation only loses detail. */
static void sig_add(char *sig, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sig_add(char *sig, const char *fmt, ...)
{
    size_t n = strlen(sig);
    va_list ap;
    if (n + 1 >= SIG_MAX)
        return;
    va_start(ap, fmt);
    vsnprintf(sig + n, SIG_MAX - n, fmt, ap);
    va_end(ap);
}

static void sig_dims(char *sig, const gr_tensor *t)
{
    sig_add(sig, "[");
    for (int d = 0; d < t->rank; d++)
        sig_add(sig, "%s%lld", d ? "," : "", (long long)t->dims[d]);
    sig_add(sig, "]");
}

/* Appends what decides an op's cost: its name, operand and output shapes and
 * attributes, and the GEMM it was given (gr_gemm_choose) where it has one. */
static void node_signature(const gr_graph *g, const gr_node *nd, char *sig)
{
    const gr_attr *a = &nd->a;
    sig_add(sig, ";%s", gr_opk_name(nd->op));
    for (int i = 0; i < nd->n_in; i++)
        sig_dims(sig, &g->tensors[nd->in[i]]);
    sig_add(sig, "->");
    sig_dims(sig, &g->tensors[nd->out]);
    sig_add(sig, " s%d,%d p%d,%d d%d,%d k%d,%d g%d a%d %d:%d t%d c%d e%g al%g", a->stride[0],
            a->stride[1], a->pad[0], a->pad[1], a->dil[0], a->dil[1], a->kernel[0], a->kernel[1],
            a->groups, a->axis, a->start, a->end, a->trans_b, a->count_pad, (double)a->eps,
            (double)a->alpha);
    if (nd->op == GR_PERMUTE)
        for (int d = 0; d < GR_MAX_DIMS; d++)
            sig_add(sig, ",%d", a->perm[d]);
    if (nd->gemm != GR_GEMM_JOB)
        sig_add(sig, " gemm %s", nd->gemm == GR_GEMM_PACKED ? "packed" : "openblas");
    if (nd->gemm_fused != GR_GEMM_JOB)
        sig_add(sig, " fused gemm %s", nd->gemm_fused == GR_GEMM_PACKED ? "packed" : "openblas");
}

/* What decides a group's cost: its kind and rules, and its ops'. */
static void group_signature(const gr_graph *g, const gr_group *grp, char *sig)
{
    sig[0] = '\0';
    sig_add(sig, "kind %d rules %u", (int)grp->kind, grp->rules);
    for (int k = 0; k < grp->n; k++)
        node_signature(g, &g->nodes[grp->nodes[k]], sig);
}

/* ---- the cache file ---- */

/* $FUSIONBENCH_PLAN_CACHE ("off": none), else $XDG_CACHE_HOME/fusionbench/
 * plan-cache.json, else ~/.cache/fusionbench/plan-cache.json; false: none. */
static bool cache_path(char *buf, size_t cap)
{
    const char *env = getenv("FUSIONBENCH_PLAN_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (env)
        return env[0] && strcmp(env, "off") != 0 && (size_t)snprintf(buf, cap, "%s", env) < cap;
    if (xdg && xdg[0])
        return (size_t)snprintf(buf, cap, "%s/fusionbench/plan-cache.json", xdg) < cap;
    return home && home[0] &&
           (size_t)snprintf(buf, cap, "%s/.cache/fusionbench/plan-cache.json", home) < cap;
}

/* The cache file's document: {"version": 1, "entries": {key: decision},
 * "calibration": {context key: gr_cm JSON}}, both objects present (empty when
 * there is no file or it is not one of ours).  NULL on ENOMEM. */
static cJSON *cache_load(const char *path)
{
    cJSON *root = NULL;
    char *text = NULL;
    FILE *f = path[0] ? fopen(path, "rb") : NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n <= CACHE_MAX &&
        fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)n + 1)) != NULL &&
        fread(text, 1, (size_t)n, f) == (size_t)n) {
        text[n] = '\0';
        root = cJSON_Parse(text);
    }
    if (f)
        fclose(f);
    free(text);
    cJSON *e = cJSON_DetachItemFromObjectCaseSensitive(root, "entries");
    cJSON *c = cJSON_DetachItemFromObjectCaseSensitive(root, "calibration");
    cJSON_Delete(root);
    if (!cJSON_IsObject(e) || cJSON_GetArraySize(e) > CACHE_ENTRIES) {
        cJSON_Delete(e);
        e = cJSON_CreateObject();
    }
    if (!cJSON_IsObject(c) || cJSON_GetArraySize(c) > CACHE_CONTEXTS) {
        cJSON_Delete(c);
        c = cJSON_CreateObject();
    }
    root = cJSON_CreateObject();
    if (root && e && c && cJSON_AddNumberToObject(root, "version", 1) &&
        cJSON_AddItemToObject(root, "entries", e)) {
        e = NULL;
        if (cJSON_AddItemToObject(root, "calibration", c))
            return root;
    }
    cJSON_Delete(e);
    cJSON_Delete(c);
    cJSON_Delete(root);
    return NULL;
}

/* mkdir -p of path's folder. */
static void make_parent(const char *path)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf)
        return;
    *slash = '\0';
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            (void)mkdir(buf, 0700);
            *p = '/';
        }
    (void)mkdir(buf, 0700);
}

/* Writes entries and this context's calibration (ckey, cal; NULL: none)
 * merged over what is there now (another job may have added some) under a
 * temporary name, renamed over the file. */
static void cache_save(const char *path, const cJSON *entries, const char *ckey, cJSON *cal)
{
    char tmp[600];
    cJSON *root = cache_load(path);
    cJSON *now = cJSON_GetObjectItemCaseSensitive(root, "entries");
    cJSON *calib = cJSON_GetObjectItemCaseSensitive(root, "calibration");
    const cJSON *e;
    cJSON_ArrayForEach(e, entries)
    {
        cJSON_DeleteItemFromObjectCaseSensitive(now, e->string);
        cJSON_AddItemToObject(now, e->string, cJSON_Duplicate(e, 1));
    }
    if (calib && cal) {
        cJSON_DeleteItemFromObjectCaseSensitive(calib, ckey);
        cJSON_AddItemToObject(calib, ckey, cal);
        cal = NULL;
    }
    cJSON_Delete(cal);
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    make_parent(path);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = text ? fopen(tmp, "wb") : NULL;
    bool ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (ok && rename(tmp, path) != 0)
        ok = false;
    if (!ok) {
        fb_warn("the plan cache %s was not written: %s", path,
                text ? strerror(errno) : "no memory");
        (void)unlink(tmp);
    }
    free(text);
}

/* ---- measuring ---- */

/* One run of plan p, launch by launch, of the launches of the groups in want
 * and the launch before each (untimed: it warms the group's input as in a
 * job): each wanted group's launches' time in ms summed into acc[fid] (n of
 * them), each timed launch's time into lt[i] (others NaN). */
static void run_plan(const nat_plan *p, int n, const bool *want, double *acc, double *lt)
{
    for (int f = 0; f < n; f++)
        acc[f] = 0.0;
    for (int i = 0; i < p->n; i++) {
        const nat_launch *l = &p->launches[i];
        int g = l->group, next = i + 1 < p->n ? p->launches[i + 1].group : -1;
        bool timed = g >= 0 && g < n && want[g];
        lt[i] = NAN;
        if (!timed && !(next >= 0 && next < n && want[next]))
            continue;
        double t0 = fb_now_ms();
        l->fn(l);
        if (timed) {
            lt[i] = fb_now_ms() - t0;
            acc[g] += lt[i];
        }
    }
}

static fb_code nomem(fb_err *err)
{
    return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the cost planner's times");
}

/* Each wanted group's time in each form, measured where the group runs in
 * the model: the plan of each form (m's plans vs[0..nv-1], the forms k) runs
 * (run_plan) ROUNDS times or more in alternating order, each launch timed,
 * and a group's time in a round is its launches' sum, so its input comes
 * from the launch before it as in a job: into rs[(r * nv + k) * n + fid]
 * (*rounds of them, at most MAX_ROUNDS), the least over the rounds into
 * best[k * n + fid], each timed launch's least time into lbest[k][i] (NaN
 * where not timed, and all NaN with a device timer tm, whose run is run).
 * ROUNDS rounds at least, more up to MAX_ROUNDS while they took under ms (a
 * small model's least times not one lucky run's).  FB_ENOMEM, or what the
 * device's run failed with (err set). */
static fb_code measure_all(const nat_ctx *m, const gr_cost_timer *tm, void *run, int nv,
                           const int *vs, double ms, int n, const bool *want, double *rs,
                           int *rounds, double *best, double **lbest, fb_err *err)
{
    int most = 1;
    for (int k = 0; k < nv; k++)
        most = m->plans[vs[k]].n > most ? m->plans[vs[k]].n : most;
    double *acc = malloc(((size_t)n + 1) * sizeof *acc), *lt = malloc((size_t)most * sizeof *lt);
    if (!acc || !lt) {
        free(acc);
        free(lt);
        return nomem(err);
    }
    for (int i = 0; i < nv * n; i++)
        best[i] = INFINITY;
    for (int k = 0; k < nv; k++)
        for (int i = 0; i < m->plans[vs[k]].n; i++)
            lbest[k][i] = NAN;
    double t0 = fb_now_ms();
    /* ROUNDS at least; a small model more, up to ms or MAX_ROUNDS, so a
     * least time is not one lucky run's */
    int r = 0;
    fb_code rc = FB_OK;
    for (; !rc && (r < ROUNDS || (r < MAX_ROUNDS && fb_now_ms() - t0 < ms)); r++)
        for (int i = 0; !rc && i < nv; i++) {
            int k = r % 2 ? nv - 1 - i : i;
            const nat_plan *p = &m->plans[vs[k]];
            if (tm) { /* the device's times; no launch of the host's plan timed */
                rc = tm->run(run, vs[k], n, want, acc, err);
                for (int l = 0; l < p->n; l++)
                    lt[l] = NAN;
            } else {
                run_plan(p, n, want, acc, lt);
            }
            for (int f = 0; f < n; f++) {
                rs[((size_t)r * nv + k) * n + f] = acc[f];
                best[k * n + f] = acc[f] < best[k * n + f] ? acc[f] : best[k * n + f];
            }
            for (int l = 0; l < p->n; l++)
                if (!isnan(lt[l]) && !(lt[l] >= lbest[k][l]))
                    lbest[k][l] = lt[l];
        }
    *rounds = r;
    free(acc);
    free(lt);
    return rc;
}

/* Whether form k of group f beat form c in the rounds of rs (R of them, nv
 * forms each, as measure_all leaves them): the
 * distribution-free 95% interval of the median per-round difference (each
 * round ran every form) lies above MARGIN of c's median and that median above
 * MARGIN_MS, as the explanation judges a group lost: a median, which one round
 * a preemption stretched cannot carry.  buf: R of scratch. */
static bool beats(const double *rs, int R, int nv, int n, int f, int k, int c, double *buf)
{
    double lo, hi;
    for (int r = 0; r < R; r++)
        buf[r] = rs[((size_t)r * nv + c) * n + f];
    fb_stats st;
    fb_stats_compute(buf, R, &st);
    double med = st.median;
    for (int r = 0; r < R; r++)
        buf[r] = rs[((size_t)r * nv + c) * n + f] - rs[((size_t)r * nv + k) * n + f];
    fb_stats_compute(buf, R, &st);
    return fb_stats_median_ci(buf, R, 0.95, &lo, &hi) && lo > MARGIN * med && st.median > MARGIN_MS;
}

/* The measured choice for group f: fused unless the split form beats it,
 * then eager if it beats what is chosen (beats). */
static int decide_measured(const double *rs, int R, int n, int f, bool splits, double *buf)
{
    int c = GR_KEEP;
    if (splits && beats(rs, R, 3, n, f, 1, 0, buf))
        c = GR_SPLIT;
    if (beats(rs, R, 3, n, f, 2, c == GR_SPLIT ? 1 : 0, buf))
        c = GR_UNFUSE;
    return c;
}

/* The fastest form by predicted times: fused unless another is faster by
 * MARGIN and MARGIN_MS. */
static int decide(const double best[3])
{
    int c = GR_KEEP;
    double t = best[0];
    if (!isnan(best[1]) && best[1] < t * (1 - MARGIN) && t - best[1] > MARGIN_MS) {
        c = GR_SPLIT;
        t = best[1];
    }
    if (best[2] < t * (1 - MARGIN) && t - best[2] > MARGIN_MS)
        c = GR_UNFUSE;
    return c;
}

/* The measuring ctx: g's eager, fused (rules) and split plans lowered over
 * the weights and inputs its tensors hold, each run once where warm (untimed:
 * pages and caches warm; a device timer warms its own). */
static fb_code measuring_ctx(const nat_ctx *ctx, const gr_graph *g, unsigned off, bool pack,
                             const gr_groups *fused, bool warm, nat_ctx **out, fb_err *err)
{
    gr_groups eager = {0}, split = {0};
    gr_choices all = {0};
    int *node_group = gr_node_groups(g, fused, err);
    nat_ctx *m = calloc(1, sizeof *m);
    fb_code rc = node_group ? FB_OK : FB_ENOMEM;
    *out = NULL;
    all.n = gr_groups_fids(fused);
    all.c = malloc((size_t)all.n + 1);
    if (!rc && (!m || !all.c))
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the cost planner");
    if (!rc) {
        memset(all.c, GR_SPLIT, (size_t)all.n);
        m->seed = ctx->seed;
        m->batch = ctx->batch;
        rc = gr_plan_groups(g, false, off, NULL, NULL, &eager, err);
    }
    if (!rc)
        rc = gr_plan_groups(g, true, off, NULL, &all, &split, err);
    /* gr_lower keeps a weight's packed copy on its tensor (gr_tensor.packed)
     * for the next plan to share; those made here are m's buffers, freed
     * with m before the job's own plans are lowered, so the graph is given
     * back the pointers it had (the job's ctx packs its own). */
    float **had = rc ? NULL : malloc(((size_t)g->n_tensors + 1) * sizeof *had);
    if (!rc && !had)
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the cost planner");
    for (int t = 0; !rc && t < g->n_tensors; t++)
        had[t] = g->tensors[t].packed;
    if (!rc)
        rc = gr_lower(m, (gr_graph *)g, &eager, V_EAGER, pack, node_group, err);
    if (!rc)
        rc = gr_lower(m, (gr_graph *)g, fused, V_FUSED, pack, NULL, err);
    if (!rc)
        rc = gr_lower(m, (gr_graph *)g, &split, V_SPLIT, pack, node_group, err);
    for (int t = 0; had && t < g->n_tensors; t++)
        g->tensors[t].packed = had[t];
    free(had);
    for (int v = V_EAGER; !rc && warm && v <= V_SPLIT; v++)
        nat_plan_run(&m->plans[v]);
    gr_groups_free(&eager);
    gr_groups_free(&split);
    gr_choices_free(&all);
    free(node_group);
    if (rc)
        nat_ctx_free(m);
    else
        *out = m;
    return rc;
}

/* Each group's predicted time in each form (pred[k * n + fid], k as in
 * measure_all; NaN where a launch of it has no prediction or the form has no
 * launch) and its error (perr: the largest of its launches', log space). */
static void predict_all(const nat_ctx *m, const gr_cm *cm, int n, double *pred, double *perr)
{
    const int vs[3] = {V_FUSED, V_SPLIT, V_EAGER};
    for (int i = 0; i < 3 * n; i++) {
        pred[i] = NAN;
        perr[i] = 0.0;
    }
    for (int k = 0; k < 3; k++) {
        const nat_plan *p = &m->plans[vs[k]];
        bool *seen = calloc((size_t)n + 1, 1);
        for (int i = 0; seen && i < p->n; i++) {
            const nat_launch *l = &p->launches[i];
            double ms, e;
            int g = l->group;
            if (g < 0 || g >= n)
                continue;
            if (!seen[g]) {
                seen[g] = true;
                pred[k * n + g] = 0.0;
            }
            if (!gr_cm_predict(cm, l, &ms, &e)) {
                pred[k * n + g] = NAN;
                continue;
            }
            pred[k * n + g] += ms;
            perr[k * n + g] = e > perr[k * n + g] ? e : perr[k * n + g];
        }
        free(seen);
    }
}

/* The choice the predictions make sure of (every other form's prediction
 * differs from the chosen one's by more than both errors), -1 when unsure. */
static int predicted_choice(const double p[3], const double e[3], bool splits)
{
    double t[3] = {p[0], splits ? p[1] : NAN, p[2]};
    if (!(t[0] > 0) || !(t[2] > 0) || (splits && !(t[1] > 0)))
        return -1;
    int b = decide(t);
    for (int k = 0; k < 3; k++)
        if (k != b && !isnan(t[k]) && fabs(log(t[k]) - log(t[b])) <= e[k] + e[b])
            return -1;
    return b;
}

/* One decision's cache entry: the choice, by what, the group's rule and its
 * times per form (ms: measured, predicted_ms: predicted; null where none). */
static cJSON *entry(int choice, const char *by, const gr_group *grp, const char *field,
                    const double t[3])
{
    cJSON *e = cJSON_CreateObject(), *ms;
    cJSON_AddStringToObject(e, "choice", gr_choice_name(choice));
    cJSON_AddStringToObject(e, "by", by);
    cJSON_AddStringToObject(e, "group", gr_group_rule(grp) ? gr_group_rule(grp) : "?");
    if ((ms = cJSON_AddArrayToObject(e, field)) != NULL)
        for (int k = 0; k < 3; k++)
            cJSON_AddItemToArray(ms,
                                 isfinite(t[k]) ? cJSON_CreateNumber(t[k]) : cJSON_CreateNull());
    return e;
}

/* The model's accuracy over the (predicted, measured) pairs: rank
 * correlation and median relative error into rep. */
static void accuracy(const double *pr, const double *me, int np, gr_cost_report *rep)
{
    double *rel = malloc(((size_t)np + 1) * sizeof *rel);
    fb_stats st;
    rep->model_pairs = np;
    rep->rank_corr = fb_stats_spearman(pr, me, np);
    rep->median_err = NAN;
    if (rel && np > 0) {
        for (int i = 0; i < np; i++)
            rel[i] = fabs(pr[i] / me[i] - 1.0);
        fb_stats_compute(rel, np, &st);
        rep->median_err = st.median;
    }
    free(rel);
}

/* The groups still undecided (c[f] 0xff): predicted where the model is sure,
 * the rest measured (one of each signature: its twins are decided after);
 * every timed launch teaches cm.  Decisions into c and fresh. */
static fb_code predict_or_measure(const nat_ctx *m, const gr_cost_timer *tm, void *run, int n,
                                  const gr_group **by_fid, char (*keys)[17], gr_cm *cm,
                                  unsigned char *c, cJSON *fresh, gr_cost_report *rep, fb_err *err)
{
    const int vs[3] = {V_FUSED, V_SPLIT, V_EAGER};
    double *pred = malloc(3 * ((size_t)n + 1) * sizeof *pred);
    double *perr = malloc(3 * ((size_t)n + 1) * sizeof *perr);
    double *best = malloc(3 * ((size_t)n + 1) * sizeof *best);
    double *pr = malloc(3 * ((size_t)n + 1) * sizeof *pr),
           *me = malloc(3 * ((size_t)n + 1) * sizeof *me);
    double *lbest[3] = {NULL, NULL, NULL};
    bool *want = calloc((size_t)n + 1, sizeof *want);
    double *rs = NULL, buf[MAX_ROUNDS];
    int wanted = 0, np = 0, rounds = 0;
    bool ok = pred && perr && best && pr && me && want;
    for (int k = 0; ok && k < 3; k++)
        ok = (lbest[k] = malloc(((size_t)m->plans[vs[k]].n + 1) * sizeof *lbest[k])) != NULL;
    fb_code rc = ok ? FB_OK : nomem(err);
    if (!rc && !tm)
        predict_all(m, cm, n, pred, perr);
    for (int i = 0; !rc && tm && i < 3 * n; i++) { /* no model of the device's times */
        pred[i] = NAN;
        perr[i] = 0.0;
    }
    for (int f = 0; !rc && f < n; f++) {
        if (c[f] != 0xff || !by_fid[f])
            continue;
        double p[3] = {pred[f], pred[n + f], pred[2 * n + f]};
        double e[3] = {perr[f], perr[n + f], perr[2 * n + f]};
        int b = predicted_choice(p, e, gr_group_splits(by_fid[f]));
        if (b >= 0 && !cJSON_GetObjectItemCaseSensitive(fresh, keys[f])) {
            c[f] = (unsigned char)b;
            rep->predicted++;
            cJSON_AddItemToObject(fresh, keys[f],
                                  entry(b, "predicted", by_fid[f], "predicted_ms", p));
            continue;
        }
        bool twin = false;
        for (int t = 0; t < f && !twin; t++)
            twin = want[t] && strcmp(keys[t], keys[f]) == 0;
        want[f] = !twin && b < 0;
        wanted += want[f];
    }
    if (!rc && wanted && !(rs = malloc((size_t)MAX_ROUNDS * 3 * ((size_t)n + 1) * sizeof *rs)))
        rc = nomem(err);
    if (!rc && wanted) /* err says what failed */
        rc = measure_all(m, tm, run, 3, vs, MEASURE_MS, n, want, rs, &rounds, best, lbest, err);
    for (int f = 0; !rc && wanted && f < n; f++) {
        if (!want[f])
            continue;
        double t[3] = {best[f], gr_group_splits(by_fid[f]) ? best[n + f] : NAN, best[2 * n + f]};
        c[f] = (unsigned char)decide_measured(rs, rounds, n, f, gr_group_splits(by_fid[f]), buf);
        rep->measured++;
        cJSON_AddItemToObject(fresh, keys[f], entry(c[f], "measured", by_fid[f], "ms", t));
        for (int k = 0; k < 3; k++)
            if (isfinite(t[k]) && t[k] > 0 && pred[k * n + f] > 0) {
                pr[np] = pred[k * n + f];
                me[np++] = t[k];
            }
    }
    if (!rc)
        accuracy(pr, me, np, rep); /* predictions made before this job's samples */
    for (int k = 0; !rc && wanted && k < 3; k++)
        for (int i = 0; i < m->plans[vs[k]].n; i++)
            if (isfinite(lbest[k][i]))
                (void)gr_cm_add(cm, &m->plans[vs[k]].launches[i], lbest[k][i]);
    free(pred);
    free(perr);
    free(best);
    free(pr);
    free(me);
    free(want);
    free(rs);
    for (int k = 0; k < 3; k++)
        free(lbest[k]);
    return rc;
}

/* Test only: FB_TEST_PLANNER_CHOICE, a comma-separated list of choices
 * ("keep", "split", "unfuse"), decides group f by its (f mod n)th entry
 * without measuring or the cache, so that a test builds every form of a cost
 * plan without timing anything (unit.test_cuda_lower: the CUDA lowering takes
 * them).  false where unset; FB_EINVAL naming the variable for a bad list. */
static bool forced_choices(gr_choices *out, fb_code *rc, fb_err *err)
{
    const char *e = getenv("FB_TEST_PLANNER_CHOICE");
    unsigned char list[16];
    int n = 0;
    if (!e || !e[0])
        return false;
    for (const char *p = e; *p && n < 16;) {
        size_t len = strcspn(p, ",");
        int k = 0;
        while (k <= GR_UNFUSE &&
               (strlen(gr_choice_name(k)) != len || strncmp(p, gr_choice_name(k), len) != 0))
            k++;
        if (k > GR_UNFUSE) {
            *rc = fb_err_set(err, FB_EINVAL, "FB_TEST_PLANNER_CHOICE",
                             "must list \"keep\", \"split\" or \"unfuse\", comma-separated");
            return true;
        }
        list[n++] = (unsigned char)k;
        p += len + (p[len] == ',');
    }
    for (int f = 0; f < out->n; f++)
        out->c[f] = list[f % n];
    return true;
}

fb_code gr_cost_choose(const nat_ctx *ctx, const gr_graph *g, unsigned off, bool pack,
                       const gr_cost_timer *timer, gr_choices *out, gr_cost_report *rep,
                       fb_err *err)
{
    gr_groups fused = {0};
    char context[1024], ckey[17], path[512] = "", (*keys)[17] = NULL, *sig = malloc(SIG_MAX);
    const gr_group **by_fid = NULL;
    cJSON *cache = NULL, *fresh = cJSON_CreateObject();
    nat_ctx *m = NULL;
    void *run = NULL;
    gr_cm cm = {0};
    double t0 = fb_now_ms(), gbps = 0, gflops = 0;
    int threads = omp_get_max_threads();
    fb_code rc = sig && fresh ? FB_OK : fb_err_set(err, FB_ENOMEM, NULL, "no memory");

    memset(out, 0, sizeof *out);
    memset(rep, 0, sizeof *rep);
    rep->rank_corr = rep->median_err = NAN;
    snprintf(rep->timed_on, sizeof rep->timed_on, "%s", timer ? timer->device : "cpu");
    if (!rc)
        rc = gr_plan_groups(g, true, off, NULL, NULL, &fused, err);
    if (!rc)
        out->n = gr_groups_fids(&fused);
    if (!rc) {
        out->c = calloc((size_t)out->n + 1, 1);
        keys = calloc((size_t)out->n + 1, sizeof *keys);
        by_fid = calloc((size_t)out->n + 1, sizeof *by_fid);
        if (!out->c || !keys || !by_fid)
            rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the cost planner");
    }
    bool forced = !rc && forced_choices(out, &rc, err);
    if (!rc && !forced) {
        gr_cost_context(threads, pack, timer ? timer->device : NULL, context, sizeof context);
        gr_cost_key("calibration", context, ckey);
        if (cache_path(path, sizeof path))
            snprintf(rep->cache, sizeof rep->cache, "%s", path);
        if (!(cache = cache_load(rep->cache)))
            rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot read the plan cache");
    }
    const cJSON *entries = cJSON_GetObjectItemCaseSensitive(cache, "entries");
    for (int i = 0; !rc && !forced && i < fused.n; i++) {
        const gr_group *grp = &fused.g[i];
        if (grp->fid < 0)
            continue;
        by_fid[grp->fid] = grp;
        group_signature(g, grp, sig);
        gr_cost_key(sig, context, keys[grp->fid]);
        const cJSON *hit = cJSON_GetObjectItemCaseSensitive(entries, keys[grp->fid]);
        const char *c = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(hit, "choice"));
        int k = 0;
        while (c && k <= GR_UNFUSE && strcmp(c, gr_choice_name(k)) != 0)
            k++;
        out->c[grp->fid] = c && k <= GR_UNFUSE ? (unsigned char)k : 0xff; /* 0xff: decide */
        rep->cached += c && k <= GR_UNFUSE;
    }
    rep->groups = out->n;
    if (!rc && !forced && rep->cached < out->n) {
        if (!timer) { /* the CPU's cost model, calibrated on this machine */
            (void)nat_roofline_get(false, &gbps, &gflops);
            (void)gr_cm_from_json(&cm,
                                  cJSON_GetObjectItemCaseSensitive(
                                      cJSON_GetObjectItemCaseSensitive(cache, "calibration"), ckey),
                                  gbps, gflops, threads);
        }
        rc = measuring_ctx(ctx, g, off, pack, &fused, !timer, &m, err);
        if (!rc && timer)
            rc = timer->open(timer->arg, ctx, m, &run, err);
    }
    if (!rc && m)
        rc = predict_or_measure(m, timer, run, out->n, by_fid, keys, &cm, out->c, fresh, rep, err);
    if (run)
        timer->close(run);
    for (int f = 0; !rc && f < out->n; f++) {
        if (out->c[f] != 0xff || !by_fid[f])
            continue;
        /* a twin of a group decided just now: the same ops and shapes */
        const cJSON *twin = cJSON_GetObjectItemCaseSensitive(fresh, keys[f]);
        const char *tc = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(twin, "choice"));
        for (int k = 0; k <= GR_UNFUSE; k++)
            if (tc && strcmp(tc, gr_choice_name(k)) == 0)
                out->c[f] = (unsigned char)k;
        rep->cached += tc != NULL;
    }
    for (int f = 0; !rc && f < out->n; f++) {
        if (out->c[f] == 0xff)
            out->c[f] = GR_KEEP;
        rep->kept += out->c[f] == GR_KEEP;
        rep->split += out->c[f] == GR_SPLIT;
        rep->unfused += out->c[f] == GR_UNFUSE;
    }
    if (!rc && (rep->measured || rep->predicted) && rep->cache[0])
        cache_save(rep->cache, fresh, ckey, rep->measured && !timer ? gr_cm_to_json(&cm) : NULL);
    nat_ctx_free(m);
    gr_cm_free(&cm);
    cJSON_Delete(cache);
    cJSON_Delete(fresh);
    gr_groups_free(&fused);
    free(keys);
    free(by_fid);
    free(sig);
    if (rc)
        gr_choices_free(out);
    rep->ms = fb_now_ms() - t0;
    return rc;
}

/* ---- whose GEMM each convolution and linear runs on (params.gemm "auto") ---- */

/* Whether node n's launch depends on whose GEMM runs it: a linear, or a
 * convolution whose path differs between ours and OpenBLAS (not a depthwise
 * one: its direct kernel runs either way). */
static bool gemm_candidate(const gr_graph *g, const gr_node *n)
{
    nat_conv_shape ours, blas;
    if (n->op == GR_LINEAR)
        return true;
    return (n->op == GR_CONV2D || n->op == GR_CONV1D) && gr_conv_shape(g, n, false, &ours) &&
           gr_conv_shape(g, n, true, &blas) && nat_conv2d_impl(&ours) != nat_conv2d_impl(&blas);
}

/* The GEMM choice's measuring ctx: g's eager plan (groups es) and the rules'
 * fused plan (fs) lowered on both GEMMs, plans 0 and 1 the eager one on
 * OpenBLAS and on ours, 2 and 3 the fused one so; each launch's group is its
 * first node's item (ids[node] in the eager plans, heads[node] in the fused
 * ones; -1: none), each plan run once (warm).  g is given back as it was. */
static fb_code gemm_ctx(const nat_ctx *ctx, gr_graph *g, const gr_groups *es, const gr_groups *fs,
                        const int *ids, const int *heads, nat_ctx **out, fb_err *err)
{
    nat_ctx *m = calloc(1, sizeof *m);
    float **had = malloc(((size_t)g->n_tensors + 1) * sizeof *had);
    fb_code rc = m && had ? FB_OK : nomem(err);
    *out = NULL;
    for (int t = 0; !rc && t < g->n_tensors; t++) /* as measuring_ctx: m's packed copies */
        had[t] = g->tensors[t].packed;
    if (!rc) {
        m->seed = ctx->seed;
        m->batch = ctx->batch;
    }
    for (int v = 0; !rc && v < 4; v++) {
        unsigned char k = v % 2 ? GR_GEMM_PACKED : GR_GEMM_OPENBLAS;
        for (int i = 0; i < g->n_nodes; i++)
            g->nodes[i].gemm = g->nodes[i].gemm_fused = k;
        rc = gr_lower(m, g, v < 2 ? es : fs, v, v % 2 == 1, v < 2 ? ids : heads, err);
        if (!rc)
            nat_plan_run(&m->plans[v]);
    }
    for (int i = 0; i < g->n_nodes; i++)
        g->nodes[i].gemm = g->nodes[i].gemm_fused = GR_GEMM_JOB;
    for (int t = 0; had && m && t < g->n_tensors; t++)
        g->tensors[t].packed = had[t];
    free(had);
    if (rc)
        nat_ctx_free(m);
    else
        *out = m;
    return rc;
}

/* What is decided: items 0..ne-1 a convolution or linear running alone (a
 * node of each shape), ne..n-1 a fused group with one at its head (a group
 * of each signature); per item its cache key, the node named in the cache
 * and its choice (0 while undecided). */
typedef struct gemm_items {
    int n, ne;
    char (*keys)[17];
    const char **name;
    unsigned char *choice;
    bool *want; /* timed now */
} gemm_items;

/* Times the wanted items of plans a and a + 1 of m (on OpenBLAS, on ours),
 * items lo..hi-1, and decides each: the job's own (pack) unless the other's
 * least time is GEMM_MARGIN lower; each decision with its times into fresh. */
static fb_code gemm_measure(const nat_ctx *m, int a, int lo, int hi, bool pack, gemm_items *it,
                            cJSON *fresh, gr_gemm_report *rep, fb_err *err)
{
    const int vs[2] = {a, a + 1};
    int n = it->n, rounds = 0;
    double *rs = malloc((size_t)MAX_ROUNDS * 2 * ((size_t)n + 1) * sizeof *rs);
    double *best = malloc(2 * ((size_t)n + 1) * sizeof *best);
    double *lbest[2] = {malloc(((size_t)m->plans[a].n + 1) * sizeof(double)),
                        malloc(((size_t)m->plans[a + 1].n + 1) * sizeof(double))};
    bool *want = calloc((size_t)n + 1, sizeof *want), any = false;
    fb_code rc = rs && best && lbest[0] && lbest[1] && want ? FB_OK : nomem(err);
    for (int c = lo; !rc && c < hi; c++)
        any |= want[c] = it->want[c];
    if (!rc && any)
        rc = measure_all(m, NULL, NULL, 2, vs, GEMM_MS, n, want, rs, &rounds, best, lbest, err);
    for (int c = lo; !rc && any && c < hi; c++) {
        if (!want[c])
            continue;
        int def = pack ? 1 : 0, other = 1 - def;
        double tk = best[other * n + c], tc = best[def * n + c];
        bool flip = tk < tc * (1.0 - GEMM_MARGIN) && tc - tk > MARGIN_MS;
        it->choice[c] = (flip ? other : def) ? GR_GEMM_PACKED : GR_GEMM_OPENBLAS;
        rep->measured++;
        cJSON *e = cJSON_CreateObject(), *ms;
        cJSON_AddStringToObject(e, "choice",
                                it->choice[c] == GR_GEMM_PACKED ? "packed" : "openblas");
        cJSON_AddStringToObject(e, "by", "measured");
        cJSON_AddStringToObject(e, "group", c < it->ne ? "gemm" : "gemm fused");
        cJSON_AddStringToObject(e, "node", it->name[c]);    /* for a reader of the file */
        if ((ms = cJSON_AddArrayToObject(e, "ms")) != NULL) /* OpenBLAS, ours: least times */
            for (int k = 0; k < 2; k++)
                cJSON_AddItemToArray(ms, cJSON_CreateNumber(best[k * n + c]));
        cJSON_AddItemToObject(fresh, it->keys[c], e);
    }
    free(rs);
    free(best);
    free(lbest[0]);
    free(lbest[1]);
    free(want);
    return rc;
}

/* Item c's choice from the cache (entries) or from an item of the same key
 * before it; else marks it wanted.  Counts into rep. */
static void gemm_lookup(const cJSON *entries, gemm_items *it, int c, gr_gemm_report *rep)
{
    const char *hit = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(entries, it->keys[c]), "choice"));
    if (hit && (strcmp(hit, "packed") == 0 || strcmp(hit, "openblas") == 0)) {
        it->choice[c] = hit[0] == 'p' ? GR_GEMM_PACKED : GR_GEMM_OPENBLAS;
        rep->cached++;
        return;
    }
    bool twin = false; /* one of each key is timed; its twins take its choice */
    for (int t = 0; t < c && !twin; t++)
        twin = it->want[t] && strcmp(it->keys[t], it->keys[c]) == 0;
    it->want[c] = !twin;
}

fb_code gr_gemm_choose(const nat_ctx *ctx, gr_graph *g, unsigned off, bool pack,
                       gr_gemm_report *rep, fb_err *err)
{
    char context[1024], path[512] = "", *sig = malloc(SIG_MAX);
    int *ids = malloc(((size_t)g->n_nodes + 1) * sizeof *ids);       /* a node's item, -1: none */
    int *grp_of = malloc(((size_t)g->n_nodes + 1) * sizeof *grp_of); /* its fused item */
    gr_groups es = {0}, fs = {0};
    gemm_items it = {0};
    cJSON *cache = NULL, *fresh = cJSON_CreateObject();
    nat_ctx *m = NULL;
    double t0 = fb_now_ms();
    fb_code rc = sig && ids && grp_of && fresh ? FB_OK : nomem(err);
    memset(rep, 0, sizeof *rep);
    if (!rc)
        rc = gr_plan_groups(g, false, off, NULL, NULL, &es, err);
    if (!rc) /* the rules' groups: the cost planner decides their forms after */
        rc = gr_plan_groups(g, true, off, NULL, NULL, &fs, err);
    int cap = rc ? 0 : g->n_nodes + fs.n + 1;
    if (!rc) {
        it.keys = calloc((size_t)cap, sizeof *it.keys);
        it.name = calloc((size_t)cap, sizeof *it.name);
        it.choice = calloc((size_t)cap, 1);
        it.want = calloc((size_t)cap, sizeof *it.want);
        if (!it.keys || !it.name || !it.choice || !it.want)
            rc = nomem(err);
    }
    for (int i = 0; !rc && i < g->n_nodes; i++) {
        g->nodes[i].gemm = g->nodes[i].gemm_fused = GR_GEMM_JOB;
        grp_of[i] = -1;
        ids[i] = gemm_candidate(g, &g->nodes[i]) ? it.n++ : -1;
        if (ids[i] >= 0)
            it.name[ids[i]] = g->nodes[i].name;
    }
    it.ne = rep->nodes = it.n;
    /* a fused group headed by one (a tensor group, an MLP): an item of its own,
     * which every candidate in it takes */
    for (int k = 0; !rc && k < fs.n; k++) {
        const gr_group *grp = &fs.g[k];
        if (grp->kind == GR_G_SINGLE || ids[grp->nodes[0]] < 0)
            continue;
        for (int j = 0; j < grp->n; j++)
            if (ids[grp->nodes[j]] >= 0)
                grp_of[grp->nodes[j]] = it.n;
        it.name[it.n++] = g->nodes[grp->nodes[0]].name;
        rep->groups++;
    }
    if (!rc && it.n > 0) {
        gr_cost_context(omp_get_max_threads(), pack, NULL, context, sizeof context);
        if (cache_path(path, sizeof path))
            snprintf(rep->cache, sizeof rep->cache, "%s", path);
        if (!(cache = cache_load(rep->cache)))
            rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot read the plan cache");
    }
    const cJSON *entries = cJSON_GetObjectItemCaseSensitive(cache, "entries");
    for (int i = 0; !rc && i < g->n_nodes; i++) { /* each node alone */
        if (ids[i] < 0)
            continue;
        snprintf(sig, SIG_MAX, "gemm");
        node_signature(g, &g->nodes[i], sig);
        gr_cost_key(sig, context, it.keys[ids[i]]);
        gemm_lookup(entries, &it, ids[i], rep);
    }
    for (int k = 0, c = it.ne; !rc && k < fs.n; k++) { /* each group, items as numbered above */
        const gr_group *grp = &fs.g[k];
        if (grp->kind == GR_G_SINGLE || ids[grp->nodes[0]] < 0)
            continue;
        group_signature(g, grp, sig + snprintf(sig, SIG_MAX, "gemm fused;"));
        gr_cost_key(sig, context, it.keys[c]);
        gemm_lookup(entries, &it, c++, rep);
    }
    /* the measuring ctx's launches carry their item: a node's alone, a
     * group's head's in the fused plan */
    int *heads = rc ? NULL : malloc(((size_t)g->n_nodes + 1) * sizeof *heads);
    bool wanted = false;
    for (int c = 0; c < it.n; c++)
        wanted |= it.want[c];
    if (!rc && wanted && !heads)
        rc = nomem(err);
    for (int i = 0; !rc && wanted && i < g->n_nodes; i++)
        heads[i] = grp_of[i] >= 0 ? grp_of[i] : ids[i];
    if (!rc && wanted)
        rc = gemm_ctx(ctx, g, &es, &fs, ids, heads, &m, err);
    free(heads);
    if (!rc && wanted)
        rc = gemm_measure(m, 0, 0, it.ne, pack, &it, fresh, rep, err);
    if (!rc && wanted)
        rc = gemm_measure(m, 2, it.ne, it.n, pack, &it, fresh, rep, err);
    for (int c = 0; !rc && c < it.n; c++) /* a twin of one timed now */
        for (int t = 0; !it.choice[c] && t < c; t++)
            if (it.want[t] && strcmp(it.keys[t], it.keys[c]) == 0)
                it.choice[c] = it.choice[t];
    /* onto the nodes; the job's own GEMM is left unmarked, so that the
     * fusion groups' decisions keyed before this choice existed still hold */
    for (int i = 0; !rc && i < g->n_nodes; i++) {
        if (ids[i] < 0)
            continue;
        bool ours = it.choice[ids[i]] == GR_GEMM_PACKED;
        if (ours != pack)
            g->nodes[i].gemm = it.choice[ids[i]];
        rep->packed += ours;
        rep->openblas += !ours;
        if (grp_of[i] >= 0 && (it.choice[grp_of[i]] == GR_GEMM_PACKED) != pack)
            g->nodes[i].gemm_fused = it.choice[grp_of[i]];
    }
    for (int c = it.ne; !rc && c < it.n; c++)
        rep->groups_packed += it.choice[c] == GR_GEMM_PACKED;
    if (!rc && rep->measured && rep->cache[0])
        cache_save(rep->cache, fresh, NULL, NULL);
    if (rc)
        for (int i = 0; i < g->n_nodes; i++)
            g->nodes[i].gemm = g->nodes[i].gemm_fused = GR_GEMM_JOB;
    nat_ctx_free(m);
    gr_groups_free(&es);
    gr_groups_free(&fs);
    cJSON_Delete(cache);
    cJSON_Delete(fresh);
    free(sig);
    free(ids);
    free(grp_of);
    free(it.keys);
    free(it.name);
    free(it.choice);
    free(it.want);
    rep->ms = fb_now_ms() - t0;
    return rc;
}
