/* ncu_profile: one profiled iteration of a lowered plan, timed launch by
 * launch with CUDA events (a pair per launch, recorded around it on the
 * stream; ncu_events.c), with no lead: a launch the host is slow to enqueue
 * shows in its time and the gaps as the job's iteration sees them.  The engine's kernel count is
 * the plan's launch count: one per kernel of ours and one per library call (a cuBLASLt or cuDNN
 * call may run more than one kernel; CUPTI's records show which).  Never runs while timing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nat_cost.h"
#include "ncu_int.h"

/* Fills vr's rows, counts and times from the recorded events. */
static fb_code fill_result(const ncu_ctx *ctx, const nat_plan *plan, const ncu_events *ev,
                           fb_kernel_row *rows, fb_variant_result *vr, fb_err *err)
{
    int n_rows = 0;
    double kernel_ms = 0.0;
    double busy = 0.0;
    for (int c = 0; c < FB_KC_COUNT; c++)
        vr->categories_ms[c] = NAN;
    vr->fused_kernels = 0;
    vr->fused_ops = 0;
    for (int j = 0; j < plan->n; j++) {
        double ms = 0.0, start = 0.0;
        const nat_launch *l = &plan->launches[j];
        fb_code rc = ncu_events_ms(ev, 2 * j, 2 * j + 1, &ms, err);
        if (!rc)
            rc = ncu_events_ms(ev, 0, 2 * j, &start, err);
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
        fb_code rc = ncu_events_ms(ev, 0, 2 * plan->n - 1, &busy, err);
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
    ncu_events ev = {0};
    fb_kernel_row *rows = calloc((size_t)(plan->n > 0 ? plan->n : 1), sizeof *rows);
    fb_code rc = rows ? ncu_events_make(&ev, plan->n, err)
                      : fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate profile rows");
    if (!rc)
        rc = ncu_events_run(ctx, plan, NULL, 0.0, &ev, "profile", err);
    if (!rc)
        rc = fill_result(ctx, plan, &ev, rows, vr, err);
    if (rc)
        goto out;
    free(vr->kernel_rows);
    vr->kernel_rows = rows;
    rows = NULL;
    vr->peak_mem_bytes = ncu_mem_variant_bytes(&ctx->mem, pv);
out:
    ncu_events_free(&ev);
    free(rows);
    return rc;
}
