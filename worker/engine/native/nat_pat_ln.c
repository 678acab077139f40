/* nat_pat_ln: layernorm (and residual add + layernorm) over the last dim, eps
 * 1e-5, with gamma and beta.  Eager is the primitive graph a user writes:
 * [add,] mean, sub, mul (square), mean, add eps, rsqrt, mul, mul gamma, add beta
 * — one kernel each, every one through memory.  Fused: one kernel per row. */
#include <math.h>

#include "nat_pat_ln.h"

#define EAGER  (1u << NAT_EAGER)
#define FUSED  (1u << NAT_FUSED)
#define LN_EPS 1e-5f

typedef struct ln_t {
    int64_t rows, cols;
    float *x, *res, *g, *b;
} ln_t;

/* Buffers of the eager graph, in op order. */
enum { T_SUM, T_MEAN, T_XC, T_SQ, T_VAR, T_VE, T_RSTD, T_XN, T_XG, T_OUT, T_N };

static fb_code ln_eager_bufs(nat_ctx *ctx, const ln_t *t, float **b, fb_err *err)
{
    static const char *const names[T_N] = {
        "eager.add",     "eager.mean", "eager.sub",  "eager.sq",    "eager.var",
        "eager.var_eps", "eager.rstd", "eager.norm", "eager.gamma", "eager.out"};
    static const bool per_row[T_N] = {
        [T_MEAN] = true, [T_VAR] = true, [T_VE] = true, [T_RSTD] = true};
    fb_code rc = FB_OK;
    for (int j = 0; j < T_N && !rc; j++) {
        if (j == T_SUM && !t->res)
            continue;
        rc = nat_pat_alloc(ctx, per_row[j] ? t->rows : t->rows * t->cols, EAGER, names[j], &b[j],
                           err);
    }
    return rc;
}

static fb_code ln_eager(nat_ctx *ctx, const ln_t *t, fb_err *err)
{
    float *b[T_N] = {0};
    int64_t r = t->rows, c = t->cols;
    fb_code rc = ln_eager_bufs(ctx, t, b, err);
    float *x = t->x;
    if (!rc && t->res) {
        rc = nat_pat_binary(ctx, NAT_EAGER, "add", NAT_ADD, NAT_BC_FULL, t->x, t->res, 0, b[T_SUM],
                            1, r * c, err);
        x = b[T_SUM];
    }
    if (!rc)
        rc = nat_pat_reduce(ctx, NAT_EAGER, "mean", NAT_RMEAN, x, b[T_MEAN], r, c, err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "sub", NAT_SUB, NAT_BC_ROW, x, b[T_MEAN], 0, b[T_XC], r,
                            c, err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "mul", NAT_MUL, NAT_BC_FULL, b[T_XC], b[T_XC], 0,
                            b[T_SQ], 1, r * c, err);
    if (!rc)
        rc = nat_pat_reduce(ctx, NAT_EAGER, "mean", NAT_RMEAN, b[T_SQ], b[T_VAR], r, c, err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "add", NAT_ADD, NAT_BC_SCALAR, b[T_VAR], NULL, LN_EPS,
                            b[T_VE], 1, r, err);
    if (!rc)
        rc = nat_pat_unary(ctx, NAT_EAGER, "rsqrt", NAT_RSQRT, b[T_VE], b[T_RSTD], r, err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "mul", NAT_MUL, NAT_BC_ROW, b[T_XC], b[T_RSTD], 0,
                            b[T_XN], r, c, err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "mul", NAT_MUL, NAT_BC_COL, b[T_XN], t->g, 0, b[T_XG],
                            r, c, err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "add", NAT_ADD, NAT_BC_COL, b[T_XG], t->b, 0, b[T_OUT],
                            r, c, err);
    ctx->plans[NAT_EAGER].out = b[T_OUT];
    ctx->plans[NAT_EAGER].out_n = (size_t)(r * c);
    return rc;
}

static fb_code ln_fused(nat_ctx *ctx, const ln_t *t, fb_err *err)
{
    float *out;
    nat_launch *l = NULL;
    static const char *const ops_ln[] = {"mean",  "sub", "mul", "mean", "add",
                                         "rsqrt", "mul", "mul", "add",  NULL};
    static const char *const ops_add_ln[] = {"add",   "mean", "sub", "mul", "mean", "add",
                                             "rsqrt", "mul",  "mul", "add", NULL};
    fb_code rc = nat_pat_alloc(ctx, t->rows * t->cols, FUSED, "fused.out", &out, err);
    if (!rc)
        rc = nat_pat_add(ctx, NAT_FUSED, t->res ? "add_layernorm" : "layernorm", FB_KC_REDUCTION,
                         t->res ? ops_add_ln : ops_ln, nat_k_layernorm, &l, err);
    if (rc)
        return rc;
    l->p[NAT_ROWS_X] = t->x;
    l->p[NAT_ROWS_RES] = t->res;
    l->p[NAT_ROWS_GAMMA] = t->g;
    l->p[NAT_ROWS_BETA] = t->b;
    l->p[NAT_ROWS_OUT] = out;
    l->dk = NAT_D_ROWS;
    l->d.rows = (nat_rows_desc){
        .rows = t->rows, .cols = t->cols, .op = NAT_ROW_LAYERNORM, .scale = 1.0f, .eps = LN_EPS};
    ctx->plans[NAT_FUSED].out = out;
    ctx->plans[NAT_FUSED].out_n = (size_t)(t->rows * t->cols);
    return FB_OK;
}

static fb_code ln_inputs(nat_ctx *ctx, ln_t *t, bool residual, fb_err *err)
{
    int64_t n = t->rows * t->cols;
    fb_code rc = nat_pat_alloc(ctx, n, NAT_ALL_VARIANTS, "x", &t->x, err);
    if (!rc && residual)
        rc = nat_pat_alloc(ctx, n, NAT_ALL_VARIANTS, "res", &t->res, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, t->cols, NAT_ALL_VARIANTS, "gamma", &t->g, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, t->cols, NAT_ALL_VARIANTS, "beta", &t->b, err);
    if (rc)
        return rc;
    /* An offset mean, so that centering matters. */
    nat_fill_uniform(ctx, t->x, (size_t)n, 1, -0.5f, 1.5f);
    if (residual)
        nat_fill_uniform(ctx, t->res, (size_t)n, 2, -1.0f, 1.0f);
    nat_fill_uniform(ctx, t->g, (size_t)t->cols, 3, 0.5f, 1.5f);
    nat_fill_uniform(ctx, t->b, (size_t)t->cols, 4, -0.5f, 0.5f);
    return FB_OK;
}

fb_code nat_pat_ln_build(nat_ctx *ctx, const fb_spec *spec, bool residual, fb_err *err)
{
    ln_t t = {0};
    fb_code rc = nat_pat_dim(spec, "rows", 4096, 1 << 24, &t.rows, err);
    if (!rc)
        rc = nat_pat_dim(spec, "cols", 768, 1 << 24, &t.cols, err);
    if (!rc)
        rc = nat_pat_size("rows", t.rows, ctx->batch, t.cols, 1, err);
    if (rc)
        return rc;
    t.rows *= ctx->batch;
    rc = ln_inputs(ctx, &t, residual, err);
    if (!rc)
        rc = ln_eager(ctx, &t, err);
    if (!rc)
        rc = ln_fused(ctx, &t, err);
    return rc;
}

void nat_pat_ln_reference(const nat_ctx *ctx, double *out)
{
    const nat_launch *l = nat_pat_first(ctx, NAT_FUSED);
    int64_t rows = l->d.rows.rows, cols = l->d.rows.cols;
    const float *x = l->p[NAT_ROWS_X], *res = l->p[NAT_ROWS_RES];
    const float *g = l->p[NAT_ROWS_GAMMA], *b = l->p[NAT_ROWS_BETA];
    for (int64_t r = 0; r < rows; r++) {
        double *o = out + r * cols, mean = 0, var = 0;
        for (int64_t j = 0; j < cols; j++) {
            o[j] = (double)x[r * cols + j] + (res ? res[r * cols + j] : 0.0);
            mean += o[j];
        }
        mean /= (double)cols;
        for (int64_t j = 0; j < cols; j++)
            var += (o[j] - mean) * (o[j] - mean);
        double rstd = 1.0 / sqrt(var / (double)cols + (double)LN_EPS);
        for (int64_t j = 0; j < cols; j++)
            o[j] = (o[j] - mean) * rstd * g[j] + b[j];
    }
}
