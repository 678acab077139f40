/* nat_pat_gemm: what gemm_bias_relu and gemm_bias_gelu share: y = act(x w + b).
 * Eager: linear (sgemm), bias add, activation — three kernels, each writing a
 * full [m,n] tensor.  Fused: one tiled GEMM whose epilogue adds the bias and
 * applies the activation while each tile is in cache.  Both variants run the
 * same GEMM on the same weight, packed once at build (params.gemm). */
#include <math.h>

#include "nat_pat_gemm.h"

#define EAGER (1u << NAT_EAGER)
#define FUSED (1u << NAT_FUSED)

typedef struct gemm_dims {
    int64_t m, k, n;
} gemm_dims;

static fb_code gemm_dims_read(const nat_ctx *ctx, const fb_spec *spec, gemm_dims *d, fb_err *err)
{
    fb_code rc = nat_pat_dim(spec, "m", 512, 1 << 20, &d->m, err);
    if (!rc)
        rc = nat_pat_dim(spec, "k", 1024, 1 << 16, &d->k, err);
    if (!rc)
        rc = nat_pat_dim(spec, "n", 1024, 1 << 16, &d->n, err);
    if (rc)
        return rc;
    d->m *= ctx->batch;
    rc = nat_pat_size("m", d->m, d->k, 1, 1, err);
    if (!rc)
        rc = nat_pat_size("m", d->m, d->n, 1, 1, err);
    if (!rc)
        rc = nat_pat_size("k", d->k, d->n, 1, 1, err);
    return rc;
}

static fb_code gemm_eager(nat_ctx *ctx, const gemm_dims *d, float *x, float *w, float *wp, float *b,
                          int act, fb_err *err)
{
    float *y1, *y2, *out;
    nat_launch *l = NULL;
    fb_code rc = nat_pat_alloc(ctx, d->m * d->n, EAGER, "eager.linear", &y1, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, d->m * d->n, EAGER, "eager.bias", &y2, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, d->m * d->n, EAGER, "eager.out", &out, err);
    if (!rc)
        rc = nat_pat_add(ctx, NAT_EAGER, "sgemm", FB_KC_GEMM, (const char *const[]){"linear", NULL},
                         nat_k_sgemm, &l, err);
    if (rc)
        return rc;
    l->p[NAT_GEMM_A] = x;
    l->p[NAT_GEMM_B] = w;
    l->p[NAT_GEMM_C] = y1;
    l->p[NAT_GEMM_PB] = wp;
    l->dk = NAT_D_GEMM;
    l->d.gemm = (nat_gemm_desc){.nb = 1, .m = d->m, .n = d->n, .k = d->k};
    rc = nat_pat_binary(ctx, NAT_EAGER, "bias", NAT_ADD, NAT_BC_COL, y1, b, 0.0f, y2, d->m, d->n,
                        err);
    if (!rc)
        rc = nat_pat_unary(ctx, NAT_EAGER, act == NAT_ACT_RELU ? "relu" : "gelu",
                           act == NAT_ACT_RELU ? NAT_RELU : NAT_GELU, y2, out, d->m * d->n, err);
    ctx->plans[NAT_EAGER].out = out;
    ctx->plans[NAT_EAGER].out_n = (size_t)(d->m * d->n);
    return rc;
}

static fb_code gemm_fused(nat_ctx *ctx, const gemm_dims *d, float *x, float *w, float *wp, float *b,
                          int act, fb_err *err)
{
    float *out;
    nat_launch *l = NULL;
    const char *name = act == NAT_ACT_RELU ? "gemm_bias_relu" : "gemm_bias_gelu";
    const char *op = act == NAT_ACT_RELU ? "relu" : "gelu";
    fb_code rc = nat_pat_alloc(ctx, d->m * d->n, FUSED, "fused.out", &out, err);
    if (!rc)
        rc =
            nat_pat_add(ctx, NAT_FUSED, name, FB_KC_GEMM,
                        (const char *const[]){"linear", "bias", op, NULL}, nat_k_gemm_epi, &l, err);
    if (rc)
        return rc;
    l->p[NAT_GEMM_A] = x;
    l->p[NAT_GEMM_B] = w;
    l->p[NAT_GEMM_BIAS] = b;
    l->p[NAT_GEMM_C] = out;
    l->p[NAT_GEMM_PB] = wp;
    l->dk = NAT_D_GEMM;
    l->d.gemm = (nat_gemm_desc){.nb = 1, .m = d->m, .n = d->n, .k = d->k, .act = act};
    ctx->plans[NAT_FUSED].out = out;
    ctx->plans[NAT_FUSED].out_n = (size_t)(d->m * d->n);
    return FB_OK;
}

fb_code nat_pat_gemm_build(nat_ctx *ctx, const fb_spec *spec, int act, fb_err *err)
{
    gemm_dims d;
    float *x, *w, *b, *wp = NULL;
    fb_code rc = gemm_dims_read(ctx, spec, &d, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, d.m * d.k, NAT_ALL_VARIANTS, "x", &x, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, d.k * d.n, NAT_ALL_VARIANTS, "w", &w, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, d.n, NAT_ALL_VARIANTS, "b", &b, err);
    if (rc)
        return rc;
    nat_fill_uniform(ctx, x, (size_t)(d.m * d.k), 1, -1.0f, 1.0f);
    nat_pat_fill_weight(ctx, w, d.k * d.n, 2, d.k);
    nat_pat_fill_weight(ctx, b, d.n, 3, d.k);
    rc = nat_pat_pack(ctx, spec, w, d.k, d.n, "w", &wp, err);
    if (!rc)
        rc = gemm_eager(ctx, &d, x, w, wp, b, act, err);
    if (!rc)
        rc = gemm_fused(ctx, &d, x, w, wp, b, act, err);
    return rc;
}

double nat_pat_gelu_ref(double x)
{
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

void nat_pat_gemm_reference(const nat_ctx *ctx, int act, double *out)
{
    const nat_launch *l = nat_pat_first(ctx, NAT_FUSED);
    int64_t m = l->d.gemm.m, n = l->d.gemm.n, k = l->d.gemm.k;
    const float *x = nat_pat_buf(ctx, "x"), *w = nat_pat_buf(ctx, "w"), *b = nat_pat_buf(ctx, "b");
    for (int64_t r = 0; r < m; r++) {
        double *o = out + r * n;
        for (int64_t j = 0; j < n; j++)
            o[j] = b[j];
        for (int64_t p = 0; p < k; p++) {
            double xv = x[r * k + p];
            for (int64_t j = 0; j < n; j++)
                o[j] += xv * w[p * n + j];
        }
        for (int64_t j = 0; j < n; j++)
            o[j] = act == NAT_ACT_RELU ? (o[j] > 0 ? o[j] : 0) : nat_pat_gelu_ref(o[j]);
    }
}
