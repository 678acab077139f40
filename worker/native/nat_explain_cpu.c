/* nat_explain_cpu: the measurements behind a CPU job's explanation
 * (nat_explain.h): interleaved profiled rounds of the eager and fused plans,
 * launch by launch, and the counterfactual plans of the groups that lost.
 *
 * A counterfactual is a plan built anew, so its buffers sit elsewhere in
 * memory than the job's; on the dev box two builds of the very same plan
 * timed 0.34 ms (3.7%) apart on resnet18 at 112x112 (the placebo below,
 * bench/explain.sh), either way, build to build (memory layout moves timings: Mytkowicz et al.,
 * "Producing wrong data without doing anything obviously wrong").  So the counterfactual is timed
 * against a fresh build of the fused plan, not the job's, and a placebo (a second fresh build of
 * the same fused plan against the first) measures what layout alone does: a counterfactual is
 * confirmed only when its whole interval of recovered time is past the placebo's difference
 * (nat_ex_cf_verdict). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#include "fb_stats.h"
#include "gr_plan.h"
#include "gr_zoo.h"
#include "nat_explain.h"

#define EX_ROUNDS_MIN    10
#define EX_ROUNDS_MAX    200
#define EX_CF_ROUNDS_MIN 10
#define EX_CF_ROUNDS_MAX 100
#define EX_LEVEL         0.95

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One round of p, each launch timed into t[0..n), the whole into *wall. */
static void timed_round(const nat_plan *p, double *t, double *wall)
{
    double t0 = now_ms();
    for (int i = 0; i < p->n; i++) {
        double ts = now_ms();
        p->launches[i].fn(&p->launches[i]);
        t[i] = now_ms() - ts;
    }
    *wall = now_ms() - t0;
}

/* One round of p, its wall time. */
static double wall_round(const nat_plan *p)
{
    double t0 = now_ms();
    nat_plan_run(p);
    return now_ms() - t0;
}

/* Rounds that fit budget_s after a first round took first_ms, clamped. */
static int rounds_for(double budget_s, double first_ms, int lo, int hi)
{
    double r = first_ms > 0 ? budget_s * 1e3 / first_ms : hi;
    return r < lo ? lo : (r > hi ? hi : (int)r);
}

typedef struct ex_samples {
    int rounds;
    double *te, *tf, *we, *wf; /* per launch per round; walls */
    double *re, *rf;           /* the same rounds' plain runs (no per-launch timer) */
} ex_samples;

static void samples_free(ex_samples *s)
{
    free(s->te), free(s->tf), free(s->we), free(s->wf), free(s->re), free(s->rf);
}

/* Profiled rounds of eager and fused, alternating which goes first (a fixed
 * order measured one plan warmer than the other, METHOD.md); each round also
 * runs both plainly, as the job's timing does, for the difference re-measured
 * in this phase. */
static fb_code profile_rounds(const nat_ctx *ctx, double budget_s, ex_samples *s, fb_err *err)
{
    const nat_plan *e = &ctx->plans[NAT_EAGER], *f = &ctx->plans[NAT_FUSED];
    double w0 = 2 * (wall_round(e) + wall_round(f)); /* warm, and the cost of a round */
    int R = rounds_for(budget_s, w0, EX_ROUNDS_MIN, EX_ROUNDS_MAX);
    memset(s, 0, sizeof *s);
    s->te = malloc((size_t)R * (size_t)(e->n + 1) * sizeof *s->te);
    s->tf = malloc((size_t)R * (size_t)(f->n + 1) * sizeof *s->tf);
    s->we = malloc((size_t)R * sizeof *s->we);
    s->wf = malloc((size_t)R * sizeof *s->wf);
    s->re = malloc((size_t)R * sizeof *s->re);
    s->rf = malloc((size_t)R * sizeof *s->rf);
    if (!s->te || !s->tf || !s->we || !s->wf || !s->re || !s->rf) {
        samples_free(s);
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the explanation's samples");
    }
    s->rounds = R;
    for (int r = 0; r < R; r++) {
        bool eager_first = r % 2 == 0;
        for (int k = 0; k < 2; k++) {
            bool eager = (k == 0) == eager_first;
            if (eager)
                timed_round(e, s->te + (size_t)r * e->n, &s->we[r]);
            else
                timed_round(f, s->tf + (size_t)r * f->n, &s->wf[r]);
        }
        for (int k = 0; k < 2; k++) {
            if ((k == 0) != eager_first)
                s->rf[r] = wall_round(f);
            else
                s->re[r] = wall_round(e);
        }
    }
    return FB_OK;
}

/* A fresh build of spec, with params.unfuse = ids[0 .. n) when n > 0, into
 * *out. */
static fb_code build(const fb_spec *spec, const int *ids_in, int n, nat_ctx **out, fb_err *err)
{
    fb_spec s = *spec;
    s.params = spec->params ? cJSON_Duplicate(spec->params, true) : cJSON_CreateObject();
    cJSON *ids = n > 0 ? cJSON_CreateIntArray(ids_in, n) : NULL;
    if (!s.params || (n > 0 && !ids)) {
        cJSON_Delete(s.params);
        cJSON_Delete(ids);
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot build a counterfactual");
    }
    cJSON_DeleteItemFromObjectCaseSensitive(s.params, "unfuse");
    if (ids)
        cJSON_AddItemToObject(s.params, "unfuse", ids);
    fb_code rc = gr_ctx_build(&s, out, err);
    cJSON_Delete(s.params);
    return rc;
}

/* a against b, interleaved rounds within budget_s: median(a) - median(b)
 * with its CI into d[0..3) (difference, lo, hi), the medians into ma, mb. */
static fb_code versus(const nat_plan *a, const nat_plan *b, double budget_s, double d[3],
                      double *ma, double *mb, fb_err *err)
{
    double w0 = wall_round(a) + wall_round(b);
    int R = rounds_for(budget_s, w0, EX_CF_ROUNDS_MIN, EX_CF_ROUNDS_MAX);
    double *ta = malloc((size_t)R * sizeof *ta), *tb = malloc((size_t)R * sizeof *tb);
    fb_code rc = FB_OK;
    if (!ta || !tb) {
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate a counterfactual");
        goto out;
    }
    for (int r = 0; r < R; r++) {
        bool a_first = r % 2 == 0;
        if (a_first)
            ta[r] = wall_round(a);
        tb[r] = wall_round(b);
        if (!a_first)
            ta[r] = wall_round(a);
    }
    if (!fb_stats_diff_ci(ta, R, tb, R, EX_LEVEL, &d[0], &d[1], &d[2]))
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot bootstrap a counterfactual");
    fb_stats s;
    fb_stats_compute(ta, R, &s);
    *ma = s.median;
    fb_stats_compute(tb, R, &s);
    *mb = s.median;
out:
    free(ta);
    free(tb);
    return rc;
}

/* Group grp undone (a graph-built workload's fused plan rebuilt with
 * params.unfuse; a pattern's eager plan) against the control's fused plan:
 * confirmed when the whole interval of the time it recovers is past what
 * layout alone moves (layout_ms). */
static fb_code counterfactual(const fb_spec *spec, const nat_ctx *control, double budget_s,
                              double layout_ms, nat_ex_group *grp, fb_err *err)
{
    nat_ctx *cf = NULL;
    const nat_plan *un = &control->plans[NAT_EAGER];
    fb_code rc = FB_OK;
    if (control->node_launch[NAT_FUSED]) { /* graph-built; a pattern is one group */
        rc = build(spec, &grp->id, 1, &cf, err);
        un = cf ? &cf->plans[NAT_FUSED] : NULL;
    }
    double d[3];
    if (!rc)
        rc = versus(&control->plans[NAT_FUSED], un, budget_s, d, &grp->cf_fused_ms,
                    &grp->cf_unfused_ms, err);
    if (!rc) {
        grp->cf_run = true;
        grp->cf_diff = d[0];
        grp->cf_lo = d[1];
        grp->cf_hi = d[2];
        grp->cf_verdict = nat_ex_cf_verdict(d[1], d[2], grp->delta, layout_ms);
    }
    nat_ctx_free(cf);
    return rc;
}

static int by_loss(const void *x, const void *y)
{
    double a = (*(const nat_ex_group *const *)x)->delta;
    double b = (*(const nat_ex_group *const *)y)->delta;
    return (a > b) - (a < b); /* most negative first */
}

/* The placebo: two fresh builds of the fused plan against each other; what
 * memory layout alone moves, |median difference| (ms). */
static fb_code placebo(const fb_spec *spec, const nat_ctx *control, double budget_s,
                       nat_ex_result *ex, fb_err *err)
{
    nat_ctx *twin = NULL;
    double d[3], ma, mb;
    fb_code rc = build(spec, NULL, 0, &twin, err);
    if (!rc)
        rc =
            versus(&control->plans[NAT_FUSED], &twin->plans[NAT_FUSED], budget_s, d, &ma, &mb, err);
    if (!rc)
        ex->layout_ms = fabs(d[0]);
    nat_ctx_free(twin);
    return rc;
}

/* Every group that lost undone at once (at most GR_UNFUSE_MAX, the largest
 * losses): a model's small losses, each below what one re-timing resolves,
 * add up to one that can be. */
static fb_code all_undone(const fb_spec *spec, const nat_ctx *control, double budget_s,
                          nat_ex_group *const *lost, int n, nat_ex_result *ex, fb_err *err)
{
    int ids[GR_UNFUSE_MAX];
    double loss = 0;
    n = n < GR_UNFUSE_MAX ? n : GR_UNFUSE_MAX;
    for (int k = 0; k < n; k++) {
        ids[k] = lost[k]->id;
        loss += lost[k]->delta;
    }
    nat_ctx *cf = NULL;
    double d[3];
    fb_code rc = build(spec, ids, n, &cf, err);
    if (!rc)
        rc = versus(&control->plans[NAT_FUSED], &cf->plans[NAT_FUSED], budget_s, d,
                    &ex->all.fused_ms, &ex->all.unfused_ms, err);
    if (!rc) {
        ex->all.n = n;
        ex->all.loss = loss;
        ex->all.diff = d[0];
        ex->all.lo = d[1];
        ex->all.hi = d[2];
        ex->all.verdict = nat_ex_cf_verdict(d[1], d[2], loss, ex->layout_ms);
    }
    nat_ctx_free(cf);
    return rc;
}

/* Counterfactuals of the groups that lost, the largest losses first. */
static fb_code counterfactuals(const fb_spec *spec, double budget_s, nat_ex_result *ex, fb_err *err)
{
    nat_ex_group **lost = malloc(((size_t)ex->n_groups + 1) * sizeof *lost);
    nat_ctx *control = NULL;
    int n = 0;
    if (!lost)
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the counterfactuals");
    for (int k = 0; k < ex->n_groups; k++)
        if (ex->groups[k].verdict == NAT_EX_LOST)
            lost[n++] = &ex->groups[k];
    qsort(lost, (size_t)n, sizeof *lost, by_loss);
    fb_code rc = n > 0 ? build(spec, NULL, 0, &control, err) : FB_OK;
    if (!rc && n > 0)
        rc = placebo(spec, control, budget_s, ex, err);
    for (int k = 0; !rc && k < n && k < NAT_EX_MAX_COUNTERFACTUALS; k++)
        rc = counterfactual(spec, control, budget_s, ex->layout_ms, lost[k], err);
    if (!rc && n >= 2 && control->node_launch[NAT_FUSED])
        rc = all_undone(spec, control, budget_s, lost, n, ex, err);
    nat_ctx_free(control);
    free(lost);
    return rc;
}

fb_code nat_explain_cpu(const fb_spec *spec, nat_ctx *ctx, const double *eager_ms, int n_eager,
                        const double *fused_ms, int n_fused, double budget_s, cJSON **out,
                        fb_err *err)
{
    ex_samples s;
    nat_ex_result ex;
    *out = NULL;
    fb_code rc = profile_rounds(ctx, budget_s, &s, err);
    if (rc)
        return rc;
    nat_ex_input in = {
        .eager = {&ctx->plans[NAT_EAGER], s.te, s.we},
        .fused = {&ctx->plans[NAT_FUSED], s.tf, s.wf},
        .rounds = s.rounds,
        .elem_bytes = (int)sizeof(float),
        .gpu = false,
        .threads = omp_get_max_threads(),
        .eager_ms = eager_ms,
        .fused_ms = fused_ms,
        .n_eager = n_eager,
        .n_fused = n_fused,
        .plain_eager = s.re,
        .plain_fused = s.rf,
    };
    rc = nat_ex_analyze(&in, &ex, err);
    if (!rc)
        rc = counterfactuals(spec, budget_s / 2, &ex, err);
    if (!rc && !(*out = nat_ex_to_json(&ex, &in, ctx)))
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot describe the explanation");
    nat_ex_free(&ex);
    samples_free(&s);
    return rc;
}
