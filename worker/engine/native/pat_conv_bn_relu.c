/* conv_bn_relu: conv3x3 (no bias) -> batch norm (inference) -> ReLU, tensor +
 * element.  Eager: conv, batch_norm, relu (3 kernels).  Fused: the batch norm is
 * folded into the conv's weights and a bias at build time (plan work, counted in
 * plan_ms), then one conv with a bias + ReLU epilogue. */
#include <math.h>
#include <stdlib.h>

#include "nat_pat_conv.h"

#define EAGER  (1u << NAT_EAGER)
#define FUSED  (1u << NAT_FUSED)
#define BN_EPS 1e-5f

typedef struct cbr_t {
    nat_pat_conv d;
    float *in, *w, *mean, *var, *gamma, *beta, *ws;
} cbr_t;

static fb_code cbr_inputs(nat_ctx *ctx, cbr_t *t, fb_err *err)
{
    int64_t c = t->d.c, nin = t->d.n * c * t->d.h * t->d.w;
    fb_code rc = nat_pat_alloc(ctx, nin, NAT_ALL_VARIANTS, "in", &t->in, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, c * c * 9, EAGER, "w", &t->w, err);
    float **bn[] = {&t->mean, &t->var, &t->gamma, &t->beta};
    static const char *const names[] = {"bn.mean", "bn.var", "bn.gamma", "bn.beta"};
    for (int j = 0; j < 4 && !rc; j++)
        rc = nat_pat_alloc(ctx, c, EAGER, names[j], bn[j], err);
    if (!rc && t->d.ws_n > 0)
        rc = nat_pat_alloc(ctx, t->d.ws_n, NAT_ALL_VARIANTS, "conv.workspace", &t->ws, err);
    if (rc)
        return rc;
    nat_fill_uniform(ctx, t->in, (size_t)nin, 1, -1.0f, 1.0f);
    nat_pat_fill_weight(ctx, t->w, c * c * 9, 2, c * 9);
    nat_fill_uniform(ctx, t->mean, (size_t)c, 3, -0.1f, 0.1f);
    nat_fill_uniform(ctx, t->var, (size_t)c, 4, 0.5f, 1.5f);
    nat_fill_uniform(ctx, t->gamma, (size_t)c, 5, 0.5f, 1.5f);
    nat_fill_uniform(ctx, t->beta, (size_t)c, 6, -0.1f, 0.1f);
    return FB_OK;
}

static fb_code cbr_eager(nat_ctx *ctx, const cbr_t *t, fb_err *err)
{
    float *y1, *y2, *out;
    nat_launch *l = NULL;
    int64_t n = t->d.n * t->d.c * t->d.h * t->d.w;
    fb_code rc = nat_pat_alloc(ctx, n, EAGER, "eager.conv", &y1, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, n, EAGER, "eager.bn", &y2, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, n, EAGER, "eager.out", &out, err);
    if (!rc)
        rc = nat_pat_conv_add(ctx, NAT_EAGER, &t->d, (const char *const[]){"conv2d", NULL}, t->in,
                              t->w, NULL, NAT_ACT_NONE, y1, t->ws, err);
    if (!rc)
        rc = nat_pat_add(ctx, NAT_EAGER, "batch_norm", FB_KC_REDUCTION,
                         (const char *const[]){"batch_norm", NULL}, nat_k_batchnorm, &l, err);
    if (rc)
        return rc;
    l->p[NAT_BN_X] = y1;
    l->p[NAT_BN_MEAN] = t->mean;
    l->p[NAT_BN_VAR] = t->var;
    l->p[NAT_BN_GAMMA] = t->gamma;
    l->p[NAT_BN_BETA] = t->beta;
    l->p[NAT_BN_OUT] = y2;
    l->dk = NAT_D_BN;
    l->d.bn = (nat_bn_desc){.n = t->d.n, .c = t->d.c, .hw = t->d.h * t->d.w, .eps = BN_EPS};
    rc = nat_pat_unary(ctx, NAT_EAGER, "relu", NAT_RELU, y2, out, n, err);
    ctx->plans[NAT_EAGER].out = out;
    ctx->plans[NAT_EAGER].out_n = (size_t)n;
    return rc;
}

/* w' = w * gamma / sqrt(var + eps) per output channel; b' = beta - mean * that. */
static void bn_fold(const cbr_t *t, float *wf, float *bf)
{
    int64_t per = t->d.c * 9;
    for (int64_t co = 0; co < t->d.c; co++) {
        float sc = t->gamma[co] / sqrtf(t->var[co] + BN_EPS);
        for (int64_t j = 0; j < per; j++)
            wf[co * per + j] = t->w[co * per + j] * sc;
        bf[co] = t->beta[co] - t->mean[co] * sc;
    }
}

static fb_code cbr_fused(nat_ctx *ctx, const cbr_t *t, fb_err *err)
{
    float *wf, *bf, *out;
    int64_t c = t->d.c, n = t->d.n * c * t->d.h * t->d.w;
    fb_code rc = nat_pat_alloc(ctx, c * c * 9, FUSED, "fused.w", &wf, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, c, FUSED, "fused.b", &bf, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, n, FUSED, "fused.out", &out, err);
    if (rc)
        return rc;
    bn_fold(t, wf, bf);
    rc = nat_pat_conv_add(ctx, NAT_FUSED, &t->d,
                          (const char *const[]){"conv2d", "batch_norm", "relu", NULL}, t->in, wf,
                          bf, NAT_ACT_RELU, out, t->ws, err);
    ctx->plans[NAT_FUSED].out = out;
    ctx->plans[NAT_FUSED].out_n = (size_t)n;
    return rc;
}

static fb_code build(nat_ctx *ctx, const fb_spec *spec, fb_err *err)
{
    cbr_t t = {0};
    fb_code rc = nat_pat_conv_dims(ctx, spec, &t.d, err);
    if (!rc)
        rc = cbr_inputs(ctx, &t, err);
    if (!rc)
        rc = cbr_eager(ctx, &t, err);
    if (!rc)
        rc = cbr_fused(ctx, &t, err);
    return rc;
}

static void reference(const nat_ctx *ctx, double *out)
{
    nat_pat_conv d;
    nat_pat_conv_of(nat_pat_first(ctx, NAT_EAGER), &d);
    int64_t plane = d.h * d.w, n = d.n * d.c * plane;
    const float *in = nat_pat_buf(ctx, "in"), *mean = nat_pat_buf(ctx, "bn.mean");
    const float *var = nat_pat_buf(ctx, "bn.var"), *g = nat_pat_buf(ctx, "bn.gamma");
    const float *b = nat_pat_buf(ctx, "bn.beta");
    double *ind = malloc((size_t)n * sizeof *ind);
    if (!ind)
        return;
    for (int64_t j = 0; j < n; j++)
        ind[j] = in[j];
    nat_pat_conv_ref(ind, nat_pat_buf(ctx, "w"), NULL, d.n, d.c, d.h, d.w, out);
    for (int64_t j = 0; j < n; j++) {
        int64_t ch = (j / plane) % d.c;
        double y = (out[j] - mean[ch]) / sqrt((double)var[ch] + BN_EPS) * g[ch] + b[ch];
        out[j] = y > 0 ? y : 0;
    }
    free(ind);
}

const nat_pattern nat_pat_conv_bn_relu = {
    .info = NAT_PAT_INFO("conv_bn_relu", "conv3x3 -> BatchNorm (inference) -> ReLU, NCHW",
                         "channels height width"),
    .build = build,
    .reference = reference,
};
