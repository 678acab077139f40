/* softmax: softmax(x, dim=-1) written from primitives as a user would: amax, sub,
 * exp, sum, div (5 kernels, element + reduction).  Fused: one kernel that keeps
 * each row in cache for its max, exp-sum and scale passes. */
#include <math.h>
#include <stdlib.h>

#include "nat_pat.h"

#define EAGER (1u << NAT_EAGER)
#define FUSED (1u << NAT_FUSED)

static fb_code sm_eager(nat_ctx *ctx, float *x, int64_t rows, int64_t cols, fb_err *err)
{
    float *mx, *sub, *ex, *sum, *out;
    fb_code rc = nat_pat_alloc(ctx, rows, EAGER, "eager.amax", &mx, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, rows * cols, EAGER, "eager.sub", &sub, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, rows * cols, EAGER, "eager.exp", &ex, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, rows, EAGER, "eager.sum", &sum, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, rows * cols, EAGER, "eager.out", &out, err);
    if (!rc)
        rc = nat_pat_reduce(ctx, NAT_EAGER, "amax", NAT_RMAX, x, mx, rows, cols, err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "sub", NAT_SUB, NAT_BC_ROW, x, mx, 0, sub, rows, cols,
                            err);
    if (!rc)
        rc = nat_pat_unary(ctx, NAT_EAGER, "exp", NAT_EXP, sub, ex, rows * cols, err);
    if (!rc)
        rc = nat_pat_reduce(ctx, NAT_EAGER, "sum", NAT_RSUM, ex, sum, rows, cols, err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "div", NAT_DIV, NAT_BC_ROW, ex, sum, 0, out, rows, cols,
                            err);
    ctx->plans[NAT_EAGER].out = out;
    ctx->plans[NAT_EAGER].out_n = (size_t)(rows * cols);
    return rc;
}

static fb_code sm_fused(nat_ctx *ctx, float *x, int64_t rows, int64_t cols, fb_err *err)
{
    float *out;
    nat_launch *l = NULL;
    fb_code rc = nat_pat_alloc(ctx, rows * cols, FUSED, "fused.out", &out, err);
    if (!rc)
        rc = nat_pat_add(ctx, NAT_FUSED, "softmax", FB_KC_REDUCTION,
                         (const char *const[]){"amax", "sub", "exp", "sum", "div", NULL},
                         nat_k_softmax, &l, err);
    if (rc)
        return rc;
    l->p[NAT_ROWS_X] = x;
    l->p[NAT_ROWS_OUT] = out;
    l->dk = NAT_D_ROWS;
    l->d.rows = (nat_rows_desc){.rows = rows, .cols = cols, .scale = 1.0f};
    ctx->plans[NAT_FUSED].out = out;
    ctx->plans[NAT_FUSED].out_n = (size_t)(rows * cols);
    return FB_OK;
}

static fb_code build(nat_ctx *ctx, const fb_spec *spec, fb_err *err)
{
    int64_t rows = 0, cols = 0;
    float *x;
    fb_code rc = nat_pat_dim(spec, "rows", 4096, 1 << 24, &rows, err);
    if (!rc)
        rc = nat_pat_dim(spec, "cols", 1024, 1 << 24, &cols, err);
    if (!rc)
        rc = nat_pat_size("rows", rows, ctx->batch, cols, 1, err);
    if (rc)
        return rc;
    rows *= ctx->batch;
    rc = nat_pat_alloc(ctx, rows * cols, NAT_ALL_VARIANTS, "x", &x, err);
    if (rc)
        return rc;
    nat_fill_uniform(ctx, x, (size_t)(rows * cols), 1, -4.0f, 4.0f);
    rc = sm_eager(ctx, x, rows, cols, err);
    if (!rc)
        rc = sm_fused(ctx, x, rows, cols, err);
    return rc;
}

static void reference(const nat_ctx *ctx, double *out)
{
    const nat_launch *l = nat_pat_first(ctx, NAT_FUSED);
    int64_t rows = l->d.rows.rows, cols = l->d.rows.cols;
    const float *x = nat_pat_buf(ctx, "x");
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < cols; j++)
            m = xr[j] > m ? xr[j] : m;
        for (int64_t j = 0; j < cols; j++)
            s += exp(xr[j] - m);
        for (int64_t j = 0; j < cols; j++)
            out[r * cols + j] = exp(xr[j] - m) / s;
    }
}

const nat_pattern nat_pat_softmax = {
    .info = NAT_PAT_INFO("softmax",
                         "softmax over the last dim from primitives (amax, sub, exp, sum, div)",
                         "rows cols"),
    .build = build,
    .reference = reference,
};
