/* elementwise_chain: out = relu(x * a + b) * sigmoid(y) + x, an element chain.
 * Eager: mul, add, relu, sigmoid, mul, add — six full passes over memory, five
 * intermediates.  Fused: one pass reading x and y and writing out. */
#include <math.h>

#include "nat_pat.h"

#define EAGER   (1u << NAT_EAGER)
#define FUSED   (1u << NAT_FUSED)
#define CHAIN_A 1.5f
#define CHAIN_B 0.25f

static fb_code chain_eager(nat_ctx *ctx, float *x, float *y, int64_t n, fb_err *err)
{
    float *t[6];
    static const char *const names[] = {"eager.mul",     "eager.add",  "eager.relu",
                                        "eager.sigmoid", "eager.mul2", "eager.out"};
    fb_code rc = FB_OK;
    for (int j = 0; j < 6 && !rc; j++)
        rc = nat_pat_alloc(ctx, n, EAGER, names[j], &t[j], err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "mul", NAT_MUL, NAT_BC_SCALAR, x, NULL, CHAIN_A, t[0],
                            1, n, err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "add", NAT_ADD, NAT_BC_SCALAR, t[0], NULL, CHAIN_B,
                            t[1], 1, n, err);
    if (!rc)
        rc = nat_pat_unary(ctx, NAT_EAGER, "relu", NAT_RELU, t[1], t[2], n, err);
    if (!rc)
        rc = nat_pat_unary(ctx, NAT_EAGER, "sigmoid", NAT_SIGMOID, y, t[3], n, err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "mul", NAT_MUL, NAT_BC_FULL, t[2], t[3], 0, t[4], 1, n,
                            err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "add", NAT_ADD, NAT_BC_FULL, t[4], x, 0, t[5], 1, n,
                            err);
    if (rc)
        return rc;
    ctx->plans[NAT_EAGER].out = t[5];
    ctx->plans[NAT_EAGER].out_n = (size_t)n;
    return FB_OK;
}

static fb_code chain_fused(nat_ctx *ctx, float *x, float *y, int64_t n, fb_err *err)
{
    float *out;
    nat_launch *l = NULL;
    fb_code rc = nat_pat_alloc(ctx, n, FUSED, "fused.out", &out, err);
    if (!rc)
        rc = nat_pat_add(ctx, NAT_FUSED, "elementwise_chain", FB_KC_ELEMENTWISE,
                         (const char *const[]){"mul", "add", "relu", "sigmoid", "mul", "add", NULL},
                         nat_k_elem_chain, &l, err);
    if (rc)
        return rc;
    l->p[NAT_ELEM_A] = x;
    l->p[NAT_ELEM_B] = y;
    l->p[NAT_ELEM_OUT] = out;
    l->dk = NAT_D_ELEM;
    l->d.elem = (nat_elem_desc){.rows = 1, .cols = n, .alpha = CHAIN_A, .beta = CHAIN_B};
    ctx->plans[NAT_FUSED].out = out;
    ctx->plans[NAT_FUSED].out_n = (size_t)n;
    return FB_OK;
}

static fb_code build(nat_ctx *ctx, const fb_spec *spec, fb_err *err)
{
    int64_t n = 0;
    float *x, *y;
    fb_code rc = nat_pat_dim(spec, "n", (int64_t)1 << 24, NAT_PAT_MAX_FLOATS, &n, err);
    if (!rc)
        rc = nat_pat_size("n", n, ctx->batch, 1, 1, err);
    if (rc)
        return rc;
    n *= ctx->batch;
    rc = nat_pat_alloc(ctx, n, NAT_ALL_VARIANTS, "x", &x, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, n, NAT_ALL_VARIANTS, "y", &y, err);
    if (rc)
        return rc;
    nat_fill_uniform(ctx, x, (size_t)n, 1, -1.0f, 1.0f);
    nat_fill_uniform(ctx, y, (size_t)n, 2, -3.0f, 3.0f);
    rc = chain_eager(ctx, x, y, n, err);
    if (!rc)
        rc = chain_fused(ctx, x, y, n, err);
    return rc;
}

static void reference(const nat_ctx *ctx, double *out)
{
    const float *x = nat_pat_buf(ctx, "x"), *y = nat_pat_buf(ctx, "y");
    int64_t n = nat_pat_first(ctx, NAT_FUSED)->d.elem.cols;
    for (int64_t j = 0; j < n; j++) {
        double t = (double)x[j] * CHAIN_A + CHAIN_B;
        t = t > 0 ? t : 0;
        out[j] = t / (1.0 + exp(-(double)y[j])) + x[j];
    }
}

const nat_pattern nat_pat_elementwise_chain = {
    .info = NAT_PAT_INFO("elementwise_chain", "relu(x * a + b) * sigmoid(y) + x: an element chain",
                         "n"),
    .build = build,
    .reference = reference,
};
