/* ncu_events: a lowered plan timed launch by launch with CUDA events, as the
 * profiled iteration (ncu_profile.c), the explanation's rounds without CUPTI
 * (ncu_explain.c) and the cost planner's timer (ncu_cost.c) time it.
 *
 * An event pair recorded around a launch on an idle device times the host's
 * enqueueing as much as the device's work: the first event completes at
 * once, the second only after the host has enqueued the launch and the
 * device has run it.  A lead (ncu_spin) keeps the device busy while the host
 * enqueues the whole plan, so the launches queue up behind it and each pair
 * times the device alone.  The lead is sized from the host's own enqueueing
 * of the plans, measured (ncu_events_lead). */
#include <stdlib.h>

#include "fb_clock.h"
#include "ncu_int.h"

/* The lead: this many times the host's longest enqueue of a plan, plus
 * LEAD_MS, at most LEAD_MAX_MS. */
#define LEAD_FACTOR 1.5
#define LEAD_MS     0.05
#define LEAD_MAX_MS 200.0

fb_code ncu_events_make(ncu_events *e, int n_launches, fb_err *err)
{
    int n = 2 * (n_launches > 0 ? n_launches : 0);
    e->n = 0;
    e->ev = calloc((size_t)n + 1, sizeof *e->ev);
    if (!e->ev)
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate CUDA events");
    fb_code rc = FB_OK;
    for (; e->n < n && !rc; e->n++)
        rc = ncu_cuda_check(cudaEventCreate(&e->ev[e->n]), "cudaEventCreate", err);
    if (rc)
        ncu_events_free(e);
    return rc;
}

void ncu_events_free(ncu_events *e)
{
    if (!e->ev)
        return;
    for (int i = 0; i < e->n; i++)
        if (e->ev[i])
            (void)cudaEventDestroy(e->ev[i]);
    free(e->ev);
    e->ev = NULL;
    e->n = 0;
}

fb_code ncu_events_run(ncu_ctx *ctx, const nat_plan *plan, const unsigned char *mask,
                       double lead_ms, const ncu_events *e, const char *what, fb_err *err)
{
    cudaStream_t s = ctx->stream;
    fb_code rc = FB_OK;
    if (2 * plan->n > e->n)
        return fb_err_set(err, FB_EINTERNAL, NULL, "%s: %d events for a plan of %d launches", what,
                          e->n, plan->n);
    ncu_spin(s, lead_ms);
    for (int j = 0; j < plan->n && !rc; j++) {
        unsigned char m = mask ? mask[j] : NCU_EV_TIME;
        if (m == NCU_EV_SKIP)
            continue;
        if (m == NCU_EV_TIME)
            rc = ncu_cuda_check(cudaEventRecord(e->ev[2 * j], s), "cudaEventRecord", err);
        plan->launches[j].fn(&plan->launches[j]);
        if (!rc && m == NCU_EV_TIME)
            rc = ncu_cuda_check(cudaEventRecord(e->ev[2 * j + 1], s), "cudaEventRecord", err);
    }
    if (!rc)
        rc = ncu_cuda_check(cudaStreamSynchronize(s), what, err);
    if (!rc)
        rc = ncu_launch_status(ctx, what, err);
    return rc;
}

fb_code ncu_events_ms(const ncu_events *e, int a, int b, double *ms, fb_err *err)
{
    float t = 0.0f;
    *ms = 0.0;
    if (a < 0 || b < 0 || a >= e->n || b >= e->n)
        return fb_err_set(err, FB_EINTERNAL, NULL, "event %d or %d out of %d", a, b, e->n);
    fb_code rc =
        ncu_cuda_check(cudaEventElapsedTime(&t, e->ev[a], e->ev[b]), "cudaEventElapsedTime", err);
    if (!rc)
        *ms = t;
    return rc;
}

fb_code ncu_events_lead(ncu_ctx *ctx, const nat_plan *const *plans, int n, const char *what,
                        double *lead_ms, fb_err *err)
{
    double most = 0.0;
    fb_code rc = FB_OK;
    for (int i = 0; i < n && !rc; i++) {
        double t0 = fb_now_ms();
        nat_plan_run(plans[i]);
        double enq = fb_now_ms() - t0;
        most = enq > most ? enq : most;
        rc = ncu_cuda_check(cudaStreamSynchronize(ctx->stream), what, err);
        if (!rc)
            rc = ncu_launch_status(ctx, what, err);
    }
    double lead = most * LEAD_FACTOR + LEAD_MS;
    *lead_ms = lead < LEAD_MAX_MS ? lead : LEAD_MAX_MS;
    return rc;
}
