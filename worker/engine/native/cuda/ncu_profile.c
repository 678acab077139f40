/* ncu_profile: one profiled iteration of a lowered plan, timed launch by
 * launch with CUDA events (a pair per launch, recorded around it on the
 * stream).  The engine's kernel count is the plan's launch count: one per
 * kernel of ours and one per library call (a cuBLASLt or cuDNN call may run
 * more than one kernel; CUPTI's records show which).  Never runs while timing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nat_cost.h"
#include "ncu_int.h"

/* Runs plan with an event pair around each launch into ev[2 * j], ev[2 * j + 1]. */
static fb_code timed_launches(ncu_ctx *ctx, const nat_plan *plan, cudaEvent_t *ev, fb_err *err)
{
    fb_code rc = FB_OK;
    for (int j = 0; j < plan->n && !rc; j++) {
        rc = ncu_cuda_check(cudaEventRecord(ev[2 * j], ctx->stream), "cudaEventRecord", err);
        plan->launches[j].fn(&plan->launches[j]);
        if (!rc)
            rc =
                ncu_cuda_check(cudaEventRecord(ev[2 * j + 1], ctx->stream), "cudaEventRecord", err);
    }
    if (!rc)
        rc = ncu_cuda_check(cudaStreamSynchronize(ctx->stream), "profile", err);
    if (!rc)
        rc = ncu_cuda_check(cudaGetLastError(), "profile", err);
    if (!rc && ctx->launch_err.code != FB_OK) {
        rc = ctx->launch_err.code;
        *err = ctx->launch_err;
        fb_err_clear(&ctx->launch_err);
    }
    return rc;
}

/* Fills vr's rows, counts and times from the recorded events. */
static fb_code fill_result(const ncu_ctx *ctx, const nat_plan *plan, cudaEvent_t *ev,
                           fb_kernel_row *rows, fb_variant_result *vr, fb_err *err)
{
    int n_rows = 0;
    double kernel_ms = 0.0;
    float busy = 0.0f;
    for (int c = 0; c < FB_KC_COUNT; c++)
        vr->categories_ms[c] = NAN;
    vr->fused_kernels = 0;
    vr->fused_ops = 0;
    for (int j = 0; j < plan->n; j++) {
        float ms = 0.0f, start = 0.0f;
        const nat_launch *l = &plan->launches[j];
        fb_code rc = ncu_cuda_check(cudaEventElapsedTime(&ms, ev[2 * j], ev[2 * j + 1]),
                                    "cudaEventElapsedTime", err);
        if (!rc)
            rc = ncu_cuda_check(cudaEventElapsedTime(&start, ev[0], ev[2 * j]),
                                "cudaEventElapsedTime", err);
        if (rc)
            return rc;
        kernel_ms += ms;
        double *cat = &vr->categories_ms[l->category];
        *cat = isnan(*cat) ? ms : *cat + ms;
        nat_kernel_row_add(rows, &n_rows, l, start, ms, (int)ncu_dtype_size(ctx->dtype), true);
        if (l->n_ops >= 2) {
            vr->fused_kernels++;
            vr->fused_ops += l->n_ops;
        }
    }
    if (plan->n > 0) {
        fb_code rc = ncu_cuda_check(cudaEventElapsedTime(&busy, ev[0], ev[2 * plan->n - 1]),
                                    "cudaEventElapsedTime", err);
        if (rc)
            return rc;
    }
    vr->kernels = plan->n;
    vr->n_kernel_rows = n_rows;
    vr->kernel_time_ms = kernel_ms;
    vr->busy_ms = busy;
    vr->idle_ms = busy > kernel_ms ? busy - kernel_ms : 0.0;
    return FB_OK;
}

fb_code ncu_profile_plan(ncu_ctx *ctx, const nat_plan *plan, int pv, fb_variant_result *vr,
                         fb_err *err)
{
    int ne = 2 * plan->n, made = 0;
    cudaEvent_t *ev = calloc((size_t)(ne > 0 ? ne : 1), sizeof *ev);
    fb_kernel_row *rows = calloc((size_t)(plan->n > 0 ? plan->n : 1), sizeof *rows);
    fb_code rc = FB_OK;
    if (!ev || !rows) {
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate profile events");
        goto out;
    }
    for (; made < ne && !rc; made++)
        rc = ncu_cuda_check(cudaEventCreate(&ev[made]), "cudaEventCreate", err);
    if (!rc)
        rc = timed_launches(ctx, plan, ev, err);
    if (!rc)
        rc = fill_result(ctx, plan, ev, rows, vr, err);
    if (rc)
        goto out;
    free(vr->kernel_rows);
    vr->kernel_rows = rows;
    rows = NULL;
    vr->peak_mem_bytes = ncu_mem_variant_bytes(&ctx->mem, pv);
out:
    for (int j = 0; j < made; j++)
        if (ev[j])
            (void)cudaEventDestroy(ev[j]);
    free(ev);
    free(rows);
    return rc;
}
