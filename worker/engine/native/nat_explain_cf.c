/* nat_explain_cf: the counterfactuals of an explanation (nat_explain.h), on
 * any backend that builds instances of the job: each losing group undone in a
 * fresh build and timed against a fresh build of the fused plan, a placebo of
 * two such builds for what memory layout alone moves, and every losing group
 * undone at once.
 *
 * A counterfactual is a plan built anew, so its buffers sit elsewhere in
 * memory than the job's; on the dev box two builds of the very same plan
 * timed 0.34 ms (3.7%) apart on resnet18 at 112x112 (bench/explain.sh),
 * either way, build to build (memory layout moves timings: Mytkowicz et al.,
 * "Producing wrong data without doing anything obviously wrong").  So the
 * counterfactual is timed against a fresh build of the fused plan, not the
 * job's, and a placebo (a second fresh build of the same fused plan against
 * the first) measures what layout alone does: a counterfactual is confirmed
 * only when its whole interval of recovered time is past the placebo's
 * difference (nat_ex_cf_verdict). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fb_clock.h"
#include "fb_stats.h"
#include "nat_explain.h"

#define CF_ROUNDS_MIN 10
#define CF_ROUNDS_MAX 100
#define CF_LEVEL      0.95

/* A fresh build of the job and its spec (instances may keep a pointer to
 * it: it lives as long as they do); the spec's variants are the job's eager
 * and fused, in that order. */
typedef struct cf_build {
    fb_instance *inst;
    fb_spec spec; /* owns its params */
} cf_build;

enum { CF_EAGER = 0, CF_FUSED = 1 };

/* One plain iteration of variant v of inst, its time (ms): the engine's own
 * timer where it has one (a GPU: events on its stream), else the wall. */
static fb_code once(fb_instance *inst, int v, double *ms, fb_err *err)
{
    if (inst->ops->timed_run)
        return inst->ops->timed_run(inst, v, ms, err);
    double t0 = fb_now_ms();
    fb_code rc = inst->ops->run(inst, v, err);
    *ms = fb_now_ms() - t0;
    return rc;
}

static void build_free(cf_build *b)
{
    if (b->inst)
        b->inst->ops->destroy(b->inst);
    b->inst = NULL;
    cJSON_Delete(b->spec.params);
    b->spec.params = NULL;
}

/* A fresh build of the job with params.unfuse = ids[0 .. n) (none when n is
 * 0) and variants (eager, fused) as the job names them. */
static fb_code build(const nat_ex_builds *bs, const int *ids, int n, cf_build *out, fb_err *err)
{
    fb_spec *s = &out->spec;
    *s = *bs->spec;
    out->inst = NULL;
    s->n_variants = 2;
    snprintf(s->variants[CF_EAGER], sizeof s->variants[0], "%s", bs->eager_name);
    snprintf(s->variants[CF_FUSED], sizeof s->variants[0], "%s", bs->fused_name);
    s->params = bs->spec->params ? cJSON_Duplicate(bs->spec->params, true) : cJSON_CreateObject();
    cJSON *arr = n > 0 ? cJSON_CreateIntArray(ids, n) : NULL;
    if (!s->params || (n > 0 && !arr)) {
        cJSON_Delete(arr);
        build_free(out);
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot build a counterfactual");
    }
    cJSON_DeleteItemFromObjectCaseSensitive(s->params, "unfuse");
    if (arr)
        cJSON_AddItemToObject(s->params, "unfuse", arr);
    fb_code rc = bs->prepare(s, &out->inst, err);
    if (rc)
        build_free(out);
    else if (out->inst->graph) { /* the job's result has the graph already */
        cJSON_Delete(out->inst->graph);
        out->inst->graph = NULL;
    }
    return rc;
}

/* Variant va of a against vb of b, interleaved rounds within budget_s (the
 * order alternating): median(a) - median(b) with its CI into d[0..3)
 * (difference, lo, hi), the medians into ma, mb. */
static fb_code versus(fb_instance *a, int va, fb_instance *b, int vb, double budget_s, double d[3],
                      double *ma, double *mb, fb_err *err)
{
    double wa = 0, wb = 0;
    fb_code rc = once(a, va, &wa, err); /* warm, and the cost of a round */
    if (!rc)
        rc = once(b, vb, &wb, err);
    if (rc)
        return rc;
    int R = nat_ex_rounds_for(budget_s, wa + wb, CF_ROUNDS_MIN, CF_ROUNDS_MAX);
    double *ta = malloc((size_t)R * sizeof *ta), *tb = malloc((size_t)R * sizeof *tb);
    if (!ta || !tb) {
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate a counterfactual");
        goto out;
    }
    for (int r = 0; r < R && !rc; r++) {
        bool a_first = r % 2 == 0;
        if (a_first)
            rc = once(a, va, &ta[r], err);
        if (!rc)
            rc = once(b, vb, &tb[r], err);
        if (!rc && !a_first)
            rc = once(a, va, &ta[r], err);
    }
    if (!rc && !fb_stats_diff_ci(ta, R, tb, R, CF_LEVEL, &d[0], &d[1], &d[2]))
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot bootstrap a counterfactual");
    if (!rc) {
        fb_stats s;
        fb_stats_compute(ta, R, &s);
        *ma = s.median;
        fb_stats_compute(tb, R, &s);
        *mb = s.median;
    }
out:
    free(ta);
    free(tb);
    return rc;
}

/* Group grp undone (a graph-built workload's fused plan rebuilt with
 * params.unfuse; a pattern's eager plan) against the control's fused plan. */
static fb_code counterfactual(const nat_ex_builds *bs, cf_build *control, double budget_s,
                              double layout_ms, nat_ex_group *grp, fb_err *err)
{
    cf_build cf = {0};
    fb_instance *un = control->inst;
    int vu = CF_EAGER;
    fb_code rc = FB_OK;
    if (bs->by_group) {
        rc = build(bs, &grp->id, 1, &cf, err);
        un = cf.inst;
        vu = CF_FUSED;
    }
    double d[3];
    if (!rc)
        rc = versus(control->inst, CF_FUSED, un, vu, budget_s, d, &grp->cf_fused_ms,
                    &grp->cf_unfused_ms, err);
    if (!rc) {
        grp->cf_run = true;
        grp->cf_diff = d[0];
        grp->cf_lo = d[1];
        grp->cf_hi = d[2];
        grp->cf_verdict = nat_ex_cf_verdict(d[1], d[2], grp->delta, layout_ms);
    }
    build_free(&cf);
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
static fb_code placebo(const nat_ex_builds *bs, cf_build *control, double budget_s,
                       nat_ex_result *ex, fb_err *err)
{
    cf_build twin = {0};
    double d[3], ma, mb;
    fb_code rc = build(bs, NULL, 0, &twin, err);
    if (!rc)
        rc = versus(control->inst, CF_FUSED, twin.inst, CF_FUSED, budget_s, d, &ma, &mb, err);
    if (!rc)
        ex->layout_ms = fabs(d[0]);
    build_free(&twin);
    return rc;
}

/* Every group that lost undone at once (at most NAT_EX_UNFUSE_MAX, the
 * largest losses): a model's small losses, each below what one re-timing
 * resolves, add up to one that can be. */
static fb_code all_undone(const nat_ex_builds *bs, cf_build *control, double budget_s,
                          nat_ex_group *const *lost, int n, nat_ex_result *ex, fb_err *err)
{
    int ids[NAT_EX_UNFUSE_MAX];
    double loss = 0;
    n = n < NAT_EX_UNFUSE_MAX ? n : NAT_EX_UNFUSE_MAX;
    for (int k = 0; k < n; k++) {
        ids[k] = lost[k]->id;
        loss += lost[k]->delta;
    }
    cf_build cf = {0};
    double d[3];
    fb_code rc = build(bs, ids, n, &cf, err);
    if (!rc)
        rc = versus(control->inst, CF_FUSED, cf.inst, CF_FUSED, budget_s, d, &ex->all.fused_ms,
                    &ex->all.unfused_ms, err);
    if (!rc) {
        ex->all.n = n;
        ex->all.loss = loss;
        ex->all.diff = d[0];
        ex->all.lo = d[1];
        ex->all.hi = d[2];
        ex->all.verdict = nat_ex_cf_verdict(d[1], d[2], loss, ex->layout_ms);
    }
    build_free(&cf);
    return rc;
}

fb_code nat_ex_counterfactuals(const nat_ex_builds *bs, double budget_s, nat_ex_result *ex,
                               fb_err *err)
{
    nat_ex_group **lost = malloc(((size_t)ex->n_groups + 1) * sizeof *lost);
    cf_build control = {0};
    int n = 0;
    if (!lost)
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the counterfactuals");
    for (int k = 0; k < ex->n_groups; k++)
        if (ex->groups[k].verdict == NAT_EX_LOST)
            lost[n++] = &ex->groups[k];
    qsort(lost, (size_t)n, sizeof *lost, by_loss);
    fb_code rc = n > 0 ? build(bs, NULL, 0, &control, err) : FB_OK;
    if (!rc && n > 0)
        rc = placebo(bs, &control, budget_s, ex, err);
    for (int k = 0; !rc && k < n && k < NAT_EX_MAX_COUNTERFACTUALS; k++)
        rc = counterfactual(bs, &control, budget_s, ex->layout_ms, lost[k], err);
    if (!rc && n >= 2 && bs->by_group)
        rc = all_undone(bs, &control, budget_s, lost, n, ex, err);
    build_free(&control);
    free(lost);
    return rc;
}
