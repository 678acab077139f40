/* nat_explain: the explanation of a native job's fusion groups (nat_explain.h,
 * docs/EXPLAIN.md). */
#include "nat_explain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_stats.h"
#include "nat_cost.h"

#define EX_LEVEL 0.95

static const char *const reason_names[NAT_EX_COUNT] = {
    [NAT_EX_NONE] = "",
    [NAT_EX_LIBRARY_REPLACED] = "library_replaced",
    [NAT_EX_RECOMPUTE] = "recompute",
    [NAT_EX_MORE_BYTES] = "more_bytes",
    [NAT_EX_LOST_PARALLELISM] = "lost_parallelism",
    [NAT_EX_TOO_SMALL] = "too_small",
    [NAT_EX_KERNEL_SLOWDOWN] = "kernel_slowdown",
    [NAT_EX_UNKNOWN] = "unknown",
};

const char *nat_ex_reason_name(nat_ex_reason r)
{
    return r >= 0 && r < NAT_EX_COUNT ? reason_names[r] : "unknown";
}

nat_ex_reason nat_ex_reason_of(const nat_ex_facts *f)
{
    if (!(f->eager_ms >= 0) || !(f->fused_bytes > 0))
        return NAT_EX_UNKNOWN;
    if (f->eager_library && !f->fused_library)
        return NAT_EX_LIBRARY_REPLACED;
    if (f->fused_flops > 1.05 * f->eager_flops)
        return NAT_EX_RECOMPUTE;
    if (f->fused_bytes > f->eager_bytes)
        return NAT_EX_MORE_BYTES;
    if (f->fused_units < f->threads && f->eager_units_max > f->fused_units)
        return NAT_EX_LOST_PARALLELISM;
    if (f->eager_ms < (f->gpu ? NAT_EX_SMALL_MS_GPU : NAT_EX_SMALL_MS_CPU))
        return NAT_EX_TOO_SMALL;
    return NAT_EX_KERNEL_SLOWDOWN;
}

nat_ex_cf nat_ex_cf_verdict(double lo, double hi, double loss, double layout_ms)
{
    if (lo > (layout_ms > 0 ? layout_ms : 0))
        return NAT_EX_CF_CONFIRMED;
    if (hi < fabs(loss))
        return NAT_EX_CF_REFUTED;
    return NAT_EX_CF_INCONCLUSIVE;
}

const char *nat_ex_cf_name(nat_ex_cf v)
{
    return v == NAT_EX_CF_CONFIRMED ? "confirmed"
           : v == NAT_EX_CF_REFUTED ? "refuted"
                                    : "inconclusive";
}

/* ---- analysis ---- */

static double median_of(const double *x, int n)
{
    fb_stats s;
    fb_stats_compute(x, n, &s);
    return s.median;
}

/* The largest group id in p's launches, -1 none. */
static int max_group(const nat_plan *p)
{
    int m = -1;
    for (int i = 0; i < p->n; i++)
        m = p->launches[i].group > m ? p->launches[i].group : m;
    return m;
}

/* Per round, the sum over p's launches of group g (g -1: outside any group;
 * g -2: all of them) into out[rounds]. */
static void round_sums(const nat_ex_plan *p, int rounds, int g, double *out)
{
    for (int r = 0; r < rounds; r++) {
        double s = 0;
        for (int i = 0; i < p->plan->n; i++)
            if (g == -2 || p->plan->launches[i].group == g)
                s += p->t[(size_t)r * p->plan->n + i];
        out[r] = s;
    }
}

/* Costs, authors and parallelism of group g's launches in p. */
static void plan_facts(const nat_ex_input *in, const nat_ex_plan *p, int g, double *flops,
                       double *bytes, double *units_max, bool *any_lib, bool *all_lib, double *roof,
                       int *n)
{
    *flops = *bytes = *units_max = *roof = 0;
    *any_lib = false;
    *all_lib = true;
    *n = 0;
    for (int i = 0; i < p->plan->n; i++) {
        const nat_launch *l = &p->plan->launches[i];
        if (l->group != g)
            continue;
        nat_cost c = nat_launch_cost(l, in->elem_bytes);
        bool lib = nat_impl_is_library(nat_launch_impl(l));
        double u = nat_launch_units(l);
        *flops += c.flops;
        *bytes += c.bytes_read + c.bytes_written;
        *roof += nat_roofline_bound_ms(&c, in->gpu);
        *units_max = u > *units_max ? u : *units_max;
        *any_lib |= lib;
        *all_lib &= lib;
        (*n)++;
    }
}

static const nat_launch *first_of(const nat_plan *p, int g)
{
    for (int i = 0; i < p->n; i++)
        if (p->launches[i].group == g)
            return &p->launches[i];
    return NULL;
}

/* Fills group g from the per-round sums e and f (buf: rounds of scratch). */
static void analyze_group(const nat_ex_input *in, int g, const double *e, const double *f,
                          double *buf, nat_ex_group *grp)
{
    int R = in->rounds, ne, nf;
    bool lib_any, lib_all, f_any, f_all;
    double units, roof;
    nat_ex_facts *x = &grp->facts;
    grp->id = g;
    plan_facts(in, &in->eager, g, &x->eager_flops, &x->eager_bytes, &x->eager_units_max, &lib_any,
               &lib_all, &roof, &ne);
    plan_facts(in, &in->fused, g, &x->fused_flops, &x->fused_bytes, &units, &f_any, &f_all,
               &grp->roof_ms, &nf);
    x->eager_library = lib_any;
    x->fused_library = f_all && nf > 0;
    x->fused_units = units;
    x->threads = in->threads;
    x->gpu = in->gpu;
    grp->n_eager = ne;
    grp->n_fused = nf;
    grp->first_fused = first_of(in->fused.plan, g);
    grp->eager_med = median_of(e, R);
    grp->fused_med = median_of(f, R);
    x->eager_ms = grp->eager_med;
    for (int r = 0; r < R; r++)
        buf[r] = e[r] - f[r];
    /* the bar: the mean, so that the groups' bars add up to the rounds' difference */
    if (!fb_stats_mean_ci(buf, R, EX_LEVEL, &grp->delta, &grp->delta_lo, &grp->delta_hi))
        grp->delta_lo = grp->delta_hi = grp->delta = NAN;
    /* the verdict: the median, as the job's headline.  One round that a
     * preemption stretched by milliseconds widens the mean's interval past any
     * threshold (a depthwise group 56% slower by its medians came out within
     * noise on a 2-vCPU VM); the median's interval stays where the rounds are. */
    grp->med_delta = median_of(buf, R);
    if (!fb_stats_median_ci(buf, R, EX_LEVEL, &grp->med_lo, &grp->med_hi))
        grp->med_lo = grp->med_hi = grp->med_delta = NAN;
    /* the noise threshold of METHOD.md: 1% of what the group replaced */
    double thr = FB_NOISE_THRESHOLD * grp->eager_med;
    grp->verdict = grp->med_lo > thr ? NAT_EX_WON : grp->med_hi < -thr ? NAT_EX_LOST : NAT_EX_NOISE;
    grp->reason = grp->verdict == NAT_EX_LOST ? nat_ex_reason_of(x) : NAT_EX_NONE;
}

static double mean_of(const double *x, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return n > 0 ? s / n : NAN;
}

/* The waterfall's bars and the measured difference. */
static void waterfall(const nat_ex_input *in, double *e, double *f, nat_ex_result *ex)
{
    int R = in->rounds;
    for (int k = 0; k < ex->n_groups; k++) {
        const nat_ex_group *g = &ex->groups[k];
        double *bar = g->verdict == NAT_EX_WON    ? &ex->won
                      : g->verdict == NAT_EX_LOST ? &ex->lost
                                                  : &ex->noise;
        *bar += g->delta;
    }
    round_sums(&in->eager, R, -1, e);
    round_sums(&in->fused, R, -1, f);
    ex->outside = mean_of(e, R) - mean_of(f, R);
    ex->eager_wall = mean_of(in->eager.wall, R);
    ex->fused_wall = mean_of(in->fused.wall, R);
    round_sums(&in->eager, R, -2, e);
    round_sums(&in->fused, R, -2, f);
    ex->overhead = (ex->eager_wall - mean_of(e, R)) - (ex->fused_wall - mean_of(f, R));
    for (int r = 0; r < R; r++) /* the bars' sum, round by round */
        e[r] = in->eager.wall[r] - in->fused.wall[r];
    if (!fb_stats_mean_ci(e, R, EX_LEVEL, &ex->explained, &ex->explained_lo, &ex->explained_hi))
        ex->explained_lo = ex->explained_hi = NAN;
    ex->remeasured = ex->remeasured_lo = ex->remeasured_hi = NAN;
    for (int r = 0; in->plain_eager && in->plain_fused && r < R; r++)
        f[r] = in->plain_eager[r] - in->plain_fused[r];
    if (in->plain_eager && in->plain_fused &&
        !fb_stats_mean_ci(f, R, EX_LEVEL, &ex->remeasured, &ex->remeasured_lo, &ex->remeasured_hi))
        ex->remeasured = ex->remeasured_lo = ex->remeasured_hi = NAN;
    ex->measured = ex->eager_wall - ex->fused_wall;
    ex->measured_lo = ex->measured_hi = NAN;
    ex->eager_med = ex->eager_wall;
    ex->fused_med = ex->fused_wall;
    if (in->eager_ms && in->fused_ms &&
        fb_stats_diff_ci(in->eager_ms, in->n_eager, in->fused_ms, in->n_fused, EX_LEVEL,
                         &ex->measured, &ex->measured_lo, &ex->measured_hi)) {
        ex->eager_med = median_of(in->eager_ms, in->n_eager);
        ex->fused_med = median_of(in->fused_ms, in->n_fused);
    }
    ex->unexplained = ex->measured - (ex->won + ex->lost + ex->noise + ex->outside + ex->overhead);
}

fb_code nat_ex_analyze(const nat_ex_input *in, nat_ex_result *out, fb_err *err)
{
    memset(out, 0, sizeof *out);
    int R = in->rounds, top = max_group(in->fused.plan), n = 0;
    /* the ids with a fused launch: a planner may leave ids unused (the cost
     * planner's unfused groups keep no launch, the split ones keep their id) */
    bool *has = calloc((size_t)top + 2, sizeof *has);
    if (!has)
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the explanation");
    for (int i = 0; i < in->fused.plan->n; i++)
        if (in->fused.plan->launches[i].group >= 0)
            has[in->fused.plan->launches[i].group] = true;
    for (int g = 0; g <= top; g++)
        n += has[g];
    if (n <= 0) {
        free(has);
        return fb_err_set(err, FB_EINVAL, NULL, "the fused plan has no fusion group to explain");
    }
    if (R < 2) {
        free(has);
        return fb_err_set(err, FB_EINVAL, NULL, "an explanation needs 2 rounds or more");
    }
    double *e = malloc((size_t)R * sizeof *e), *f = malloc((size_t)R * sizeof *f);
    double *buf = malloc((size_t)R * sizeof *buf);
    out->groups = calloc((size_t)n, sizeof *out->groups);
    if (!e || !f || !buf || !out->groups) {
        free(e), free(f), free(buf), free(has);
        nat_ex_free(out);
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the explanation");
    }
    out->rounds = R;
    out->n_groups = n;
    out->layout_ms = NAN;
    for (int g = 0, k = 0; g <= top; g++) {
        if (!has[g])
            continue;
        round_sums(&in->eager, R, g, e);
        round_sums(&in->fused, R, g, f);
        analyze_group(in, g, e, f, buf, &out->groups[k++]);
    }
    waterfall(in, e, f, out);
    free(e), free(f), free(buf), free(has);
    return FB_OK;
}

void nat_ex_free(nat_ex_result *ex)
{
    if (!ex)
        return;
    free(ex->groups);
    memset(ex, 0, sizeof *ex);
}

/* ---- JSON ---- */

static cJSON *pair(double a, double b)
{
    cJSON *arr = cJSON_CreateArray();
    if (arr && (!cJSON_AddItemToArray(arr, fb_json_num_or_null(a)) ||
                !cJSON_AddItemToArray(arr, fb_json_num_or_null(b)))) {
        cJSON_Delete(arr);
        return NULL;
    }
    return arr;
}

static const char *verdict_name(nat_ex_verdict v)
{
    return v == NAT_EX_WON ? "won" : (v == NAT_EX_LOST ? "lost" : "within_noise");
}

/* The names of group g's kernels in p, and who wrote them. */
static cJSON *kernels_of(const nat_plan *p, int g, bool impl)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < p->n; i++) {
        const nat_launch *l = &p->launches[i];
        if (l->group != g)
            continue;
        const char *s = impl ? nat_impl_name(nat_launch_impl(l)) : l->name;
        if (!cJSON_AddItemToArray(arr, cJSON_CreateString(s))) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

/* The graph nodes group g computes (graph-built workloads), or NULL. */
static cJSON *nodes_of(const nat_ctx *ctx, int g)
{
    if (!ctx || !ctx->node_launch[NAT_FUSED]) /* a pattern: no graph */
        return NULL;
    const int *nl = ctx->node_launch[NAT_FUSED];
    const nat_plan *p = &ctx->plans[NAT_FUSED];
    cJSON *arr = cJSON_CreateArray();
    for (int n = 0; arr && n < ctx->n_graph_nodes; n++)
        if (nl[n] >= 0 && nl[n] < p->n && p->launches[nl[n]].group == g &&
            !cJSON_AddItemToArray(arr, cJSON_CreateNumber(n))) {
            cJSON_Delete(arr);
            return NULL;
        }
    return arr;
}

static const char *reason_text(nat_ex_reason r)
{
    switch (r) {
    case NAT_EX_LIBRARY_REPLACED:
        return "a tuned library or GEMM kernel of eager was replaced by a generic one";
    case NAT_EX_RECOMPUTE:
        return "the fused kernel does more FLOPs than the kernels it replaced (recompute)";
    case NAT_EX_MORE_BYTES:
        return "the fused kernel moves more bytes than the kernels it replaced";
    case NAT_EX_LOST_PARALLELISM:
        return "the fused kernel splits into fewer units of parallel work than there are "
               "workers, where one of its parts had more";
    case NAT_EX_TOO_SMALL:
        return "its kernels are too small for fusion to matter past launch overhead";
    case NAT_EX_KERNEL_SLOWDOWN:
        return "same code, fewer bytes, no fewer workers: the fused kernel's own schedule "
               "(its epilogue, its loop order) is slower than the kernels it replaced";
    default:
        return "the measured facts do not decide it";
    }
}

static cJSON *cf_json(const nat_ex_group *g)
{
    if (!g->cf_run)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    bool ok = o && fb_json_put(o, "fused_ms", fb_json_num_or_null(g->cf_fused_ms)) &&
              fb_json_put(o, "unfused_ms", fb_json_num_or_null(g->cf_unfused_ms)) &&
              fb_json_put(o, "recovered_ms", fb_json_num_or_null(g->cf_diff)) &&
              fb_json_put(o, "recovered_ci95", pair(g->cf_lo, g->cf_hi)) &&
              fb_json_put(o, "verdict", cJSON_CreateString(nat_ex_cf_name(g->cf_verdict)));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *reason_json(const nat_ex_group *g)
{
    if (g->reason == NAT_EX_NONE)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    if (o && (!fb_json_put(o, "code", cJSON_CreateString(nat_ex_reason_name(g->reason))) ||
              !fb_json_put(o, "text", cJSON_CreateString(reason_text(g->reason))))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *costs_json(const nat_ex_group *g)
{
    const nat_ex_facts *x = &g->facts;
    double ms = g->fused_med;
    cJSON *o = cJSON_CreateObject();
    bool ok =
        o && fb_json_put(o, "eager_bytes", fb_json_num_or_null(x->eager_bytes)) &&
        fb_json_put(o, "fused_bytes", fb_json_num_or_null(x->fused_bytes)) &&
        fb_json_put(o, "bytes_saved", fb_json_num_or_null(x->eager_bytes - x->fused_bytes)) &&
        fb_json_put(o, "eager_flops", fb_json_num_or_null(x->eager_flops)) &&
        fb_json_put(o, "fused_flops", fb_json_num_or_null(x->fused_flops)) &&
        fb_json_put(o, "flops_added", fb_json_num_or_null(x->fused_flops - x->eager_flops)) &&
        fb_json_put(o, "fused_gbps",
                    fb_json_num_or_null(ms > 0 ? x->fused_bytes / (ms * 1e6) : NAN)) &&
        fb_json_put(o, "fused_gflops",
                    fb_json_num_or_null(ms > 0 ? x->fused_flops / (ms * 1e6) : NAN)) &&
        fb_json_put(o, "roofline_share", fb_json_num_or_null(ms > 0 ? g->roof_ms / ms : NAN)) &&
        fb_json_put(o, "eager_units_max", fb_json_num_or_null(x->eager_units_max)) &&
        fb_json_put(o, "fused_units", fb_json_num_or_null(x->fused_units));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *group_json(const nat_ex_group *g, const nat_ex_input *in, const nat_ctx *ctx)
{
    const nat_launch *l = g->first_fused;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON *ops = cJSON_AddArrayToObject(o, "ops"), *nodes = nodes_of(ctx, g->id);
    bool ok = fb_json_put(o, "nodes", nodes ? nodes : cJSON_CreateNull()) && ops;
    for (int k = 0; ok && l && k < l->n_ops; k++)
        ok = cJSON_AddItemToArray(ops, cJSON_CreateString(l->ops[k] ? l->ops[k] : "?"));
    ok = ok && fb_json_put(o, "id", cJSON_CreateNumber(g->id)) &&
         fb_json_put(o, "rule", l && l->rule ? cJSON_CreateString(l->rule) : cJSON_CreateNull()) &&
         fb_json_put(o, "kind", l && l->kind ? cJSON_CreateString(l->kind) : cJSON_CreateNull()) &&
         fb_json_put(o, "eager_kernels", kernels_of(in->eager.plan, g->id, false)) &&
         fb_json_put(o, "eager_impl", kernels_of(in->eager.plan, g->id, true)) &&
         fb_json_put(o, "fused_kernels", kernels_of(in->fused.plan, g->id, false)) &&
         fb_json_put(o, "fused_impl", kernels_of(in->fused.plan, g->id, true)) &&
         fb_json_put(o, "eager_ms", fb_json_num_or_null(g->eager_med)) &&
         fb_json_put(o, "fused_ms", fb_json_num_or_null(g->fused_med)) &&
         fb_json_put(o, "delta_ms", fb_json_num_or_null(g->delta)) &&
         fb_json_put(o, "delta_ci95", pair(g->delta_lo, g->delta_hi)) &&
         fb_json_put(o, "median_delta_ms", fb_json_num_or_null(g->med_delta)) &&
         fb_json_put(o, "median_delta_ci95", pair(g->med_lo, g->med_hi)) &&
         fb_json_put(o, "verdict", cJSON_CreateString(verdict_name(g->verdict))) &&
         fb_json_put(o, "reason", reason_json(g)) && fb_json_put(o, "costs", costs_json(g)) &&
         fb_json_put(o, "counterfactual", cf_json(g));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* The counterfactual of every lost group at once, null when not run. */
static cJSON *all_json(const nat_ex_result *ex)
{
    if (ex->all.n < 1)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    bool ok = o && fb_json_put(o, "groups", cJSON_CreateNumber(ex->all.n)) &&
              fb_json_put(o, "lost_ms", fb_json_num_or_null(ex->all.loss)) &&
              fb_json_put(o, "fused_ms", fb_json_num_or_null(ex->all.fused_ms)) &&
              fb_json_put(o, "unfused_ms", fb_json_num_or_null(ex->all.unfused_ms)) &&
              fb_json_put(o, "recovered_ms", fb_json_num_or_null(ex->all.diff)) &&
              fb_json_put(o, "recovered_ci95", pair(ex->all.lo, ex->all.hi)) &&
              fb_json_put(o, "verdict", cJSON_CreateString(nat_ex_cf_name(ex->all.verdict)));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static int by_effect(const void *a, const void *b)
{
    double x = fabs((*(const nat_ex_group *const *)a)->delta);
    double y = fabs((*(const nat_ex_group *const *)b)->delta);
    return (y > x) - (y < x);
}

static cJSON *waterfall_json(const nat_ex_result *ex)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && fb_json_put(o, "eager_ms", fb_json_num_or_null(ex->eager_med)) &&
              fb_json_put(o, "won_ms", fb_json_num_or_null(ex->won)) &&
              fb_json_put(o, "lost_ms", fb_json_num_or_null(ex->lost)) &&
              fb_json_put(o, "within_noise_ms", fb_json_num_or_null(ex->noise)) &&
              fb_json_put(o, "outside_groups_ms", fb_json_num_or_null(ex->outside)) &&
              fb_json_put(o, "overhead_ms", fb_json_num_or_null(ex->overhead)) &&
              fb_json_put(o, "unexplained_ms", fb_json_num_or_null(ex->unexplained)) &&
              fb_json_put(o, "fused_ms", fb_json_num_or_null(ex->fused_med)) &&
              fb_json_put(o, "measured_ms", fb_json_num_or_null(ex->measured)) &&
              fb_json_put(o, "measured_ci95", pair(ex->measured_lo, ex->measured_hi)) &&
              fb_json_put(o, "explained_ms",
                          fb_json_num_or_null(ex->won + ex->lost + ex->noise + ex->outside +
                                              ex->overhead)) &&
              fb_json_put(o, "explained_ci95", pair(ex->explained_lo, ex->explained_hi)) &&
              fb_json_put(o, "remeasured_ms", fb_json_num_or_null(ex->remeasured)) &&
              fb_json_put(o, "remeasured_ci95", pair(ex->remeasured_lo, ex->remeasured_hi)) &&
              fb_json_put(o, "profiled_eager_ms", fb_json_num_or_null(ex->eager_wall)) &&
              fb_json_put(o, "profiled_fused_ms", fb_json_num_or_null(ex->fused_wall));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Counts of verdicts and reasons, and the fused kernels' time-weighted share
 * of the roofline. */
static cJSON *summary_json(const nat_ex_result *ex)
{
    int won = 0, lost = 0, noise = 0, reasons[NAT_EX_COUNT] = {0};
    double roof = 0, ms = 0;
    for (int k = 0; k < ex->n_groups; k++) {
        const nat_ex_group *g = &ex->groups[k];
        won += g->verdict == NAT_EX_WON;
        lost += g->verdict == NAT_EX_LOST;
        noise += g->verdict == NAT_EX_NOISE;
        reasons[g->reason]++;
        if (isfinite(g->roof_ms) && g->fused_med > 0) {
            roof += g->roof_ms;
            ms += g->fused_med;
        }
    }
    cJSON *o = cJSON_CreateObject(), *by = cJSON_CreateObject();
    bool ok = o && by && fb_json_put(o, "won", cJSON_CreateNumber(won)) &&
              fb_json_put(o, "lost", cJSON_CreateNumber(lost)) &&
              fb_json_put(o, "within_noise", cJSON_CreateNumber(noise)) &&
              fb_json_put(o, "fused_roofline_share", fb_json_num_or_null(ms > 0 ? roof / ms : NAN));
    for (int r = NAT_EX_NONE + 1; ok && r < NAT_EX_COUNT; r++)
        ok = !reasons[r] || fb_json_put(by, nat_ex_reason_name(r), cJSON_CreateNumber(reasons[r]));
    if (!ok || !fb_json_put(o, "lost_by_reason", by)) {
        cJSON_Delete(o);
        if (!ok)
            cJSON_Delete(by);
        return NULL;
    }
    return o;
}

/* {"gbps", "gflops"}: the limits the groups were held against, or null. */
static cJSON *limits_json(bool gpu)
{
    double gbps = 0, gflops = 0;
    return nat_roofline_get(gpu, &gbps, &gflops) ? fb_json_roofline(gbps, gflops)
                                                 : cJSON_CreateNull();
}

cJSON *nat_ex_to_json(const nat_ex_result *ex, const nat_ex_input *in, const nat_ctx *ctx)
{
    const nat_ex_group **order = malloc(((size_t)ex->n_groups + 1) * sizeof *order);
    cJSON *o = cJSON_CreateObject(), *groups = cJSON_CreateArray();
    bool ok = order && o && groups;
    for (int k = 0; ok && k < ex->n_groups; k++)
        order[k] = &ex->groups[k];
    if (ok)
        qsort(order, (size_t)ex->n_groups, sizeof *order, by_effect);
    for (int k = 0; ok && k < ex->n_groups; k++) {
        cJSON *g = group_json(order[k], in, ctx);
        ok = g && cJSON_AddItemToArray(groups, g);
        if (!ok)
            cJSON_Delete(g);
    }
    ok = ok && fb_json_put(o, "engine", cJSON_CreateString("native")) &&
         fb_json_put(o, "device", cJSON_CreateString(in->gpu ? "cuda" : "cpu")) &&
         fb_json_put(o, "rounds", cJSON_CreateNumber(ex->rounds)) &&
         fb_json_put(o, "noise_threshold", cJSON_CreateNumber(FB_NOISE_THRESHOLD)) &&
         fb_json_put(o, "layout_noise_ms", fb_json_num_or_null(ex->layout_ms)) &&
         fb_json_put(o, "roofline", limits_json(in->gpu)) &&
         fb_json_put(o, "waterfall", waterfall_json(ex)) &&
         fb_json_put(o, "summary", summary_json(ex)) &&
         fb_json_put(o, "all_lost_undone", all_json(ex));
    bool given = ok; /* fb_json_put() attaches groups or frees it */
    ok = ok && fb_json_put(o, "groups", groups);
    free(order);
    if (!ok) {
        cJSON_Delete(o);
        if (!given)
            cJSON_Delete(groups);
        return NULL;
    }
    return o;
}

/* ---- helpers the backends share ---- */

nat_ex_builds nat_ex_builds_of(const fb_spec *spec, int eager, int fused, bool by_group,
                               fb_code (*prepare)(const fb_spec *, fb_instance **, fb_err *))
{
    return (nat_ex_builds){
        .spec = spec,
        .eager_name = spec->n_variants > eager ? spec->variants[eager] : "eager",
        .fused_name = spec->n_variants > fused ? spec->variants[fused] : "fused",
        .by_group = by_group,
        .prepare = prepare,
    };
}

void nat_ex_samples_free(nat_ex_samples *s)
{
    free(s->te), free(s->tf), free(s->we), free(s->wf), free(s->re), free(s->rf);
    memset(s, 0, sizeof *s);
}

fb_code nat_ex_samples_alloc(nat_ex_samples *s, int rounds, int n_eager, int n_fused, fb_err *err)
{
    size_t r = (size_t)rounds;
    memset(s, 0, sizeof *s);
    s->te = malloc(r * (size_t)(n_eager + 1) * sizeof *s->te);
    s->tf = malloc(r * (size_t)(n_fused + 1) * sizeof *s->tf);
    s->we = malloc(r * sizeof *s->we);
    s->wf = malloc(r * sizeof *s->wf);
    s->re = malloc(r * sizeof *s->re);
    s->rf = malloc(r * sizeof *s->rf);
    if (!s->te || !s->tf || !s->we || !s->wf || !s->re || !s->rf) {
        nat_ex_samples_free(s);
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the explanation's samples");
    }
    s->rounds = rounds;
    return FB_OK;
}

nat_ex_step nat_ex_round_step(int round, int step)
{
    return (nat_ex_step){.fused = step >= 2, .timed = (step % 2 == 0) == (round % 2 == 0)};
}

int nat_ex_rounds_for(double budget_s, double round_ms, int lo, int hi)
{
    double r = round_ms > 0 ? budget_s * 1e3 / round_ms : hi;
    return r < lo ? lo : (r > hi ? hi : (int)r);
}
