/* ncu_cost: the cost planner's timer on the GPU (gr_cost.h's gr_cost_timer).
 *
 * The cost planner (graph/gr_cost.c) builds a measuring ctx: the model's
 * eager plan, its fused plan under the rules and each group split, as host
 * plans.  Here those three are lowered onto the device as a job's plans are
 * (ncu_lower.c), and each run of one is timed launch by launch behind a
 * spin kernel (ncu_events.c), so that the event pair around each launch
 * times the device's work on it and not the host's pace (a plan of small
 * launches would otherwise read as slow as its enqueueing).  A group's time
 * is its launches' sum, as on the CPU; the launch before a timed one runs
 * untimed, so its input is where a job leaves it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr_cost.h"
#include "ncu_int.h"

/* The plans of the measuring ctx (gr_cost.c's V_EAGER, V_FUSED, V_SPLIT). */
#define COST_PLANS 3

typedef struct cost_run {
    /* host: view, the measuring ctx's plans over the buffers of both it and
     * the job's ctx (its weights and inputs), which the lowering looks a
     * launch's pointers up in (ncu_dev_ptr); neither is owned */
    ncu_ctx *ctx;
    nat_ctx view;
    ncu_events ev;       /* 2 per launch of the longest lowered plan */
    unsigned char *mask; /* a run's launches: NCU_EV_SKIP, _RUN or _TIME */
    double lead_ms;
} cost_run;

static void cost_close(void *p)
{
    cost_run *r = p;
    if (!r)
        return;
    ncu_events_free(&r->ev);
    free(r->mask);
    if (r->ctx) {
        r->ctx->host = NULL; /* the view: not a ctx of its own */
        ncu_ctx_close(r->ctx);
    }
    free(r->view.bufs);
    free(r);
}

/* r->view: m's plans and seed, the buffers of m then of job (shallow
 * copies: the data stays theirs).  Uploading a buffer in float16 or
 * bfloat16 rounds its host copy in place (ncu_dev.c), as the job's own
 * lowering does after: the same values either way. */
static fb_code make_view(cost_run *r, const nat_ctx *job, const nat_ctx *m, fb_err *err)
{
    int n = m->n_bufs + job->n_bufs;
    r->view = *m;
    r->view.bufs = calloc((size_t)n + 1, sizeof *r->view.bufs);
    if (!r->view.bufs)
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the cost timer");
    memcpy(r->view.bufs, m->bufs, (size_t)m->n_bufs * sizeof *m->bufs);
    memcpy(r->view.bufs + m->n_bufs, job->bufs, (size_t)job->n_bufs * sizeof *job->bufs);
    r->view.n_bufs = r->view.cap_bufs = n;
    return FB_OK;
}

static fb_code cost_open(void *arg, const nat_ctx *job, const nat_ctx *m, void **out, fb_err *err)
{
    const ncu_ctx *proto = arg;
    cost_run *r = calloc(1, sizeof *r);
    fb_code rc = r ? FB_OK : fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the cost timer");
    *out = NULL;
    if (!rc && !(r->ctx = calloc(1, sizeof *r->ctx)))
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the cost timer");
    if (!rc)
        rc = make_view(r, job, m, err);
    if (!rc) {
        r->ctx->host = &r->view;
        r->ctx->dtype = proto->dtype;
        r->ctx->tf32 = proto->tf32;
        r->ctx->gelu_epilogue = proto->gelu_epilogue;
        r->ctx->tc_attention = proto->tc_attention;
        rc = ncu_ctx_open(r->ctx, err);
    }
    for (int v = 0; !rc && v < COST_PLANS; v++)
        rc = ncu_lower_plan(r->ctx, v, err);
    if (!rc)
        rc = ncu_cuda_check(cudaStreamSynchronize(r->ctx->stream), "the cost planner's lowering",
                            err);
    if (!rc)
        rc = ncu_launch_status(r->ctx, "the cost planner's lowering", err);
    /* each plan once (libraries pick and load their kernels), and the lead */
    const nat_plan *plans[COST_PLANS];
    int most = 0;
    for (int v = 0; !rc && v < COST_PLANS; v++) {
        plans[v] = &r->ctx->plans[v];
        most = plans[v]->n > most ? plans[v]->n : most;
    }
    if (!rc)
        rc = ncu_events_lead(r->ctx, plans, COST_PLANS, "the cost planner's first run", &r->lead_ms,
                             err);
    if (!rc)
        rc = ncu_events_make(&r->ev, most, err);
    if (!rc && !(r->mask = calloc((size_t)most + 1, 1)))
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the cost timer");
    if (rc)
        cost_close(r);
    else
        *out = r;
    return rc;
}

static fb_code cost_run_plan(void *p, int v, int n, const bool *want, double *acc, fb_err *err)
{
    cost_run *r = p;
    const nat_plan *plan = &r->ctx->plans[v];
    for (int f = 0; f < n; f++)
        acc[f] = 0.0;
    /* a wanted group's launches timed, the launch before each run untimed */
    for (int i = 0; i < plan->n; i++) {
        int g = plan->launches[i].group, next = i + 1 < plan->n ? plan->launches[i + 1].group : -1;
        bool timed = g >= 0 && g < n && want[g];
        r->mask[i] = timed                                 ? NCU_EV_TIME
                     : next >= 0 && next < n && want[next] ? NCU_EV_RUN
                                                           : NCU_EV_SKIP;
    }
    fb_code rc = ncu_events_run(r->ctx, plan, r->mask, r->lead_ms, &r->ev,
                                "the cost planner's timed run", err);
    for (int i = 0; !rc && i < plan->n; i++) {
        double ms = 0.0;
        if (r->mask[i] != NCU_EV_TIME)
            continue;
        rc = ncu_events_ms(&r->ev, 2 * i, 2 * i + 1, &ms, err);
        acc[plan->launches[i].group] += ms;
    }
    return rc;
}

fb_code ncu_cost_timer(const ncu_ctx *proto, gr_cost_timer *t, fb_err *err)
{
    struct cudaDeviceProp prop;
    int dev = 0, driver = 0;
    static const char *const dtypes[] = {"float32", "float16", "bfloat16"};
    memset(t, 0, sizeof *t);
    fb_code rc = ncu_cuda_check(cudaGetDevice(&dev), "cudaGetDevice", err);
    if (!rc)
        rc = ncu_cuda_check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties", err);
    if (!rc)
        rc = ncu_cuda_check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion", err);
    if (rc)
        return rc;
    snprintf(t->device, sizeof t->device,
             "cuda %.120s sm_%d%d driver %d|%s|tf32 %d|gelu %d|tc attention %d", prop.name,
             prop.major, prop.minor, driver, dtypes[proto->dtype], proto->tf32,
             proto->gelu_epilogue, proto->tc_attention);
    t->arg = (void *)proto;
    t->open = cost_open;
    t->run = cost_run_plan;
    t->close = cost_close;
    return FB_OK;
}
