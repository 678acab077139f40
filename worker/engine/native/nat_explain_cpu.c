/* nat_explain_cpu: the measurements behind a CPU job's explanation
 * (nat_explain.h): interleaved profiled rounds of the eager and fused plans,
 * launch by launch; the counterfactuals are nat_explain_cf.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <omp.h>

#include "fb_clock.h"
#include "gr_plan.h"
#include "nat_explain.h"

#define EX_ROUNDS_MIN 10
#define EX_ROUNDS_MAX 200

/* One round of p, each launch timed into t[0..n), the whole into *wall. */
static void timed_round(const nat_plan *p, double *t, double *wall)
{
    double t0 = fb_now_ms();
    for (int i = 0; i < p->n; i++) {
        double ts = fb_now_ms();
        p->launches[i].fn(&p->launches[i]);
        t[i] = fb_now_ms() - ts;
    }
    *wall = fb_now_ms() - t0;
}

/* One round of p, its wall time. */
static double wall_round(const nat_plan *p)
{
    double t0 = fb_now_ms();
    nat_plan_run(p);
    return fb_now_ms() - t0;
}

/* Profiled rounds of eager and fused, each launch by launch and plainly (the
 * plain runs re-measure the difference in this phase), in
 * nat_ex_round_step's order. */
static fb_code profile_rounds(const nat_ctx *ctx, double budget_s, nat_ex_samples *s, fb_err *err)
{
    const nat_plan *e = &ctx->plans[NAT_EAGER], *f = &ctx->plans[NAT_FUSED];
    double w0 = 2 * (wall_round(e) + wall_round(f)); /* warm, and the cost of a round */
    int R = nat_ex_rounds_for(budget_s, w0, EX_ROUNDS_MIN, EX_ROUNDS_MAX);
    fb_code rc = nat_ex_samples_alloc(s, R, e->n, f->n, err);
    if (rc)
        return rc;
    for (int r = 0; r < R; r++) {
        for (int k = 0; k < 4; k++) {
            nat_ex_step st = nat_ex_round_step(r, k);
            if (st.timed && st.fused)
                timed_round(f, s->tf + (size_t)r * f->n, &s->wf[r]);
            else if (st.timed)
                timed_round(e, s->te + (size_t)r * e->n, &s->we[r]);
            else if (st.fused)
                s->rf[r] = wall_round(f);
            else
                s->re[r] = wall_round(e);
        }
    }
    return FB_OK;
}

_Static_assert(NAT_EX_UNFUSE_MAX == GR_UNFUSE_MAX, "groups undone at once: one limit");

fb_code nat_explain_cpu(const nat_ex_builds *bs, nat_ctx *ctx, const double *eager_ms, int n_eager,
                        const double *fused_ms, int n_fused, double budget_s, cJSON **out,
                        fb_err *err)
{
    nat_ex_samples s;
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
        rc = nat_ex_counterfactuals(bs, budget_s / 2, &ex, err);
    if (!rc && !(*out = nat_ex_to_json(&ex, &in, ctx)))
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot describe the explanation");
    nat_ex_free(&ex);
    nat_ex_samples_free(&s);
    return rc;
}
