/* ncu_explain: a CUDA job's explanation (nat_explain.h, docs/EXPLAIN.md).
 *
 * Interleaved profiled rounds of the lowered eager and fused plans give each
 * launch's device time: from CUPTI's activity records, a launch mark around
 * each launch (fbc_launch_push/pop) and fbc_launch_times summing the kernels
 * each launch ran (a cuBLASLt or cuDNN call may run several); where CUPTI
 * cannot be had (a build without it, another profiler holding it) from a pair
 * of CUDA events around each launch behind a spin kernel (ncu_events.c),
 * which also counts the gaps between a launch's kernels; and from those
 * too when CUPTI opens but records no launch mark (FB_EUNAVAIL from
 * fbc_launch_times: the H100 and H200 runs explained every group as 0 ms
 * before the session enabled the API kinds that marks need).  The
 * explanation says which ("launch_times", and why not CUPTI in
 * "launch_times_why").  Each round also times both variants plainly,
 * as the job timed them (timed_run: CUDA events around the enqueue or the
 * graph replay).  The analysis and the counterfactuals are the CPU's
 * (nat_explain.c, nat_explain_cf.c), on fresh CUDA instances of the job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_log.h"
#include "ncu_int.h"
#ifdef FB_HAVE_CUPTI
#include "fbc_cupti.h"
#include "fbc_session.h"
#endif

#define EX_ROUNDS_MIN 10
#define EX_ROUNDS_MAX 200

typedef struct ex_timer {
    ncu_ctx *ctx;
#ifdef FB_HAVE_CUPTI
    fbc_session *cupti; /* NULL: events */
#endif
    ncu_events ev; /* 2 per launch of the larger plan */
    double lead_ms;
    int unmarked;             /* activity no launch mark named, over all rounds (CUPTI) */
    char why[FB_ERR_MSG_MAX]; /* why CUPTI was left for events, or "" */
} ex_timer;

/* One round of plan, launch by launch, with event pairs behind the lead:
 * t[j], *wall. */
static fb_code events_round(ex_timer *tm, const nat_plan *plan, double *t, double *wall,
                            fb_err *err)
{
    *wall = 0.0;
    fb_code rc = ncu_events_run(tm->ctx, plan, NULL, tm->lead_ms, &tm->ev, "explain round", err);
    for (int j = 0; j < plan->n && !rc; j++)
        rc = ncu_events_ms(&tm->ev, 2 * j, 2 * j + 1, &t[j], err);
    if (!rc && plan->n > 0)
        rc = ncu_events_ms(&tm->ev, 0, 2 * plan->n - 1, wall, err);
    return rc;
}

#ifdef FB_HAVE_CUPTI
/* One round of plan with a CUPTI launch mark around each launch. */
static fb_code cupti_round(ex_timer *tm, const nat_plan *plan, double *t, double *wall, fb_err *err)
{
    uint64_t id = 0;
    int unmarked = 0;
    fb_code rc = fbc_session_begin(tm->cupti, "explain", &id, err);
    for (int j = 0; j < plan->n && !rc; j++) {
        rc = fbc_launch_push((uint64_t)j + 1, err);
        plan->launches[j].fn(&plan->launches[j]);
        if (!rc)
            rc = fbc_launch_pop(err);
    }
    fb_err ignored;
    fb_code end = fbc_session_end(tm->cupti, rc ? &ignored : err);
    rc = rc ? rc : end;
    if (!rc)
        rc = ncu_launch_status(tm->ctx, "explain round", err);
    if (!rc)
        rc = fbc_session_launch_times(tm->cupti, id, plan->n, t, wall, &unmarked, err);
    tm->unmarked += unmarked;
    fbc_session_reset(tm->cupti);
    return rc;
}
#endif

static fb_code timed_round(ex_timer *tm, const nat_plan *plan, double *t, double *wall, fb_err *err)
{
#ifdef FB_HAVE_CUPTI
    if (tm->cupti) {
        fb_code rc = cupti_round(tm, plan, t, wall, err);
        if (rc != FB_EUNAVAIL)
            return rc;
        /* activity but no marks: the events for this round and the rest */
        fb_warn("explain: %s; timing launches with CUDA events", err->msg);
        snprintf(tm->why, sizeof tm->why, "%s", err->msg);
        fbc_session_close(tm->cupti);
        tm->cupti = NULL;
        tm->unmarked = 0;
    }
#endif
    return events_round(tm, plan, t, wall, err);
}

/* CUPTI when it opens, events otherwise (and for the events, always made,
 * with their lead: each plan run once, untimed). */
static fb_code timer_open(ex_timer *tm, ncu_ctx *ctx, fb_err *err)
{
    const nat_plan *plans[] = {&ctx->plans[NAT_EAGER], &ctx->plans[NAT_FUSED]};
    memset(tm, 0, sizeof *tm);
    tm->ctx = ctx;
    fb_code rc =
        ncu_events_make(&tm->ev, plans[0]->n > plans[1]->n ? plans[0]->n : plans[1]->n, err);
    if (!rc)
        rc = ncu_events_lead(ctx, plans, 2, "explain warm-up", &tm->lead_ms, err);
#ifdef FB_HAVE_CUPTI
    fb_err why;
    if (!rc && fbc_session_open(&tm->cupti, &why) != FB_OK) {
        fb_warn("explain: CUPTI unavailable (%s); timing launches with CUDA events", why.msg);
        snprintf(tm->why, sizeof tm->why, "%s", why.msg);
        tm->cupti = NULL;
    }
#endif
    return rc;
}

static void timer_close(ex_timer *tm)
{
#ifdef FB_HAVE_CUPTI
    fbc_session_close(tm->cupti);
    tm->cupti = NULL;
#endif
    ncu_events_free(&tm->ev);
}

static const char *timer_name(const ex_timer *tm)
{
#ifdef FB_HAVE_CUPTI
    if (tm->cupti)
        return "cupti_activity";
#endif
    (void)tm;
    return "cuda_events";
}

/* Rounds within budget_s, in nat_ex_round_step's order: each plan launch by
 * launch, and each variant plainly as the job timed it. */
static fb_code profile_rounds(ex_timer *tm, fb_instance *inst, int ve, int vf, double budget_s,
                              nat_ex_samples *s, fb_err *err)
{
    const nat_plan *e = &tm->ctx->plans[NAT_EAGER], *f = &tm->ctx->plans[NAT_FUSED];
    double a = 0, b = 0, c = 0, d = 0;
    memset(s, 0, sizeof *s);
    double *scratch = malloc((size_t)(e->n + f->n + 2) * sizeof *scratch);
    if (!scratch)
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the explanation's samples");
    fb_code rc = timed_round(tm, e, scratch, &a, err); /* warm, and the cost of a round */
    if (!rc)
        rc = timed_round(tm, f, scratch, &b, err);
    if (!rc)
        rc = inst->ops->timed_run(inst, ve, &c, err);
    if (!rc)
        rc = inst->ops->timed_run(inst, vf, &d, err);
    free(scratch);
    if (rc)
        return rc;
    /* + host marking, ~50 us a launch, and the events' leads */
    double per = 2 * (a + b + c + d + 2 * tm->lead_ms) + 0.05 * (e->n + f->n);
    rc = nat_ex_samples_alloc(s, nat_ex_rounds_for(budget_s, per, EX_ROUNDS_MIN, EX_ROUNDS_MAX),
                              e->n, f->n, err);
    if (rc)
        return rc;
    int R = s->rounds;
    for (int k = 0; k < R && !rc; k++) {
        for (int i = 0; i < 4 && !rc; i++) {
            nat_ex_step st = nat_ex_round_step(k, i);
            if (st.timed && st.fused)
                rc = timed_round(tm, f, s->tf + (size_t)k * f->n, &s->wf[k], err);
            else if (st.timed)
                rc = timed_round(tm, e, s->te + (size_t)k * e->n, &s->we[k], err);
            else
                rc = inst->ops->timed_run(inst, st.fused ? vf : ve,
                                          st.fused ? &s->rf[k] : &s->re[k], err);
        }
    }
    if (rc)
        nat_ex_samples_free(s);
    return rc;
}

fb_code ncu_explain_run(ncu_ctx *ctx, fb_instance *inst, int ve, int vf, const nat_ex_builds *bs,
                        const fb_variant_result *ev, const fb_variant_result *fv, double budget_s,
                        cJSON **out, fb_err *err)
{
    const nat_plan *e = &ctx->plans[NAT_EAGER], *f = &ctx->plans[NAT_FUSED];
    ex_timer tm;
    nat_ex_samples s = {0};
    nat_ex_result ex;
    bool analyzed = false;
    int sms = 0, dev = 0;
    int *nl = NULL;
    nat_ctx *view = NULL;
    *out = NULL;
    fb_code rc = timer_open(&tm, ctx, err);
    if (!rc)
        rc = profile_rounds(&tm, inst, ve, vf, budget_s, &s, err);
    if (!rc && cudaGetDevice(&dev) == cudaSuccess)
        (void)cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    const char *timer = timer_name(&tm);
    int unmarked = tm.unmarked;
    char why[sizeof tm.why];
    snprintf(why, sizeof why, "%s", tm.why);
    timer_close(&tm); /* CUPTI is process-wide: closed before anything else runs */
    if (rc)
        goto out;
    nat_ex_input in = {
        .eager = {e, s.te, s.we},
        .fused = {f, s.tf, s.wf},
        .rounds = s.rounds,
        .elem_bytes = (int)ncu_dtype_size(ctx->dtype),
        .gpu = true,
        .threads = sms > 0 ? sms : 1,
        .eager_ms = ev->samples_ms,
        .fused_ms = fv->samples_ms,
        .n_eager = ev->n_samples,
        .n_fused = fv->n_samples,
        .plain_eager = s.re,
        .plain_fused = s.rf,
    };
    rc = nat_ex_analyze(&in, &ex, err);
    analyzed = rc == FB_OK;
    if (!rc)
        rc = nat_ex_counterfactuals(bs, budget_s / 2, &ex, err);
    if (rc)
        goto out;
    /* the graph's nodes as the lowered fused plan holds them */
    if (ctx->host->node_launch[NAT_FUSED] && ctx->host->n_graph_nodes > 0) {
        nl = ncu_node_launches(ctx, NAT_FUSED);
        view = calloc(1, sizeof *view);
        if (!nl || !view) {
            rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot describe the explanation");
            goto out;
        }
        view->n_graph_nodes = ctx->host->n_graph_nodes;
        view->node_launch[NAT_FUSED] = nl;
        view->plans[NAT_FUSED] = *f;
    }
    *out = nat_ex_to_json(&ex, &in, view);
    if (!*out || !cJSON_AddStringToObject(*out, "launch_times", timer) ||
        !cJSON_AddNumberToObject(*out, "unmarked_activity", unmarked) ||
        (why[0] && !cJSON_AddStringToObject(*out, "launch_times_why", why))) {
        cJSON_Delete(*out);
        *out = NULL;
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot describe the explanation");
    }
out:
    if (analyzed)
        nat_ex_free(&ex);
    nat_ex_samples_free(&s);
    free(nl);
    free(view);
    return rc;
}
