/* conv_relu_conv: conv3x3 (+bias) -> ReLU -> conv3x3 (+bias), tensor + element +
 * tensor.  Eager: conv, relu, conv (3 kernels; the bias belongs to the conv op, as
 * in PyTorch).  Fused: conv with a ReLU epilogue, then the second conv (2
 * kernels, one intermediate instead of two).  A single tile-fused
 * kernel would recompute each tile's halo of the first conv (at 56x56 with
 * 16-row tiles, ~12% more FLOPs) to save streaming one 800 KiB intermediate that
 * stays in L2/L3 anyway, so two launches it is (a reasoned choice, not a
 * measured one). */
#include <stdlib.h>

#include "nat_pat_conv.h"

#define EAGER (1u << NAT_EAGER)
#define FUSED (1u << NAT_FUSED)

typedef struct crc_t {
    nat_pat_conv d;
    float *in, *w1, *b1, *w2, *b2, *ws;
} crc_t;

static fb_code crc_inputs(nat_ctx *ctx, crc_t *t, fb_err *err)
{
    int64_t c = t->d.c, nin = t->d.n * c * t->d.h * t->d.w;
    fb_code rc = nat_pat_alloc(ctx, nin, NAT_ALL_VARIANTS, "in", &t->in, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, c * c * 9, NAT_ALL_VARIANTS, "w1", &t->w1, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, c, NAT_ALL_VARIANTS, "b1", &t->b1, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, c * c * 9, NAT_ALL_VARIANTS, "w2", &t->w2, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, c, NAT_ALL_VARIANTS, "b2", &t->b2, err);
    if (!rc && t->d.ws_n > 0)
        rc = nat_pat_alloc(ctx, t->d.ws_n, NAT_ALL_VARIANTS, "conv.workspace", &t->ws, err);
    if (rc)
        return rc;
    nat_fill_uniform(ctx, t->in, (size_t)nin, 1, -1.0f, 1.0f);
    nat_pat_fill_weight(ctx, t->w1, c * c * 9, 2, c * 9);
    nat_pat_fill_weight(ctx, t->b1, c, 3, c * 9);
    nat_pat_fill_weight(ctx, t->w2, c * c * 9, 4, c * 9);
    nat_pat_fill_weight(ctx, t->b2, c, 5, c * 9);
    return FB_OK;
}

static fb_code crc_eager(nat_ctx *ctx, const crc_t *t, fb_err *err)
{
    float *y1, *y2, *out;
    int64_t n = t->d.n * t->d.c * t->d.h * t->d.w;
    const char *const *conv = (const char *const[]){"conv2d", NULL};
    fb_code rc = nat_pat_alloc(ctx, n, EAGER, "eager.conv1", &y1, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, n, EAGER, "eager.relu", &y2, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, n, EAGER, "eager.out", &out, err);
    if (!rc)
        rc = nat_pat_conv_add(ctx, NAT_EAGER, &t->d, conv, t->in, t->w1, t->b1, NAT_ACT_NONE, y1,
                              t->ws, err);
    if (!rc)
        rc = nat_pat_unary(ctx, NAT_EAGER, "relu", NAT_RELU, y1, y2, n, err);
    if (!rc)
        rc = nat_pat_conv_add(ctx, NAT_EAGER, &t->d, conv, y2, t->w2, t->b2, NAT_ACT_NONE, out,
                              t->ws, err);
    ctx->plans[NAT_EAGER].out = out;
    ctx->plans[NAT_EAGER].out_n = (size_t)n;
    return rc;
}

static fb_code crc_fused(nat_ctx *ctx, const crc_t *t, fb_err *err)
{
    float *y, *out;
    int64_t n = t->d.n * t->d.c * t->d.h * t->d.w;
    fb_code rc = nat_pat_alloc(ctx, n, FUSED, "fused.conv1_relu", &y, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, n, FUSED, "fused.out", &out, err);
    if (!rc)
        rc = nat_pat_conv_add(ctx, NAT_FUSED, &t->d, (const char *const[]){"conv2d", "relu", NULL},
                              t->in, t->w1, t->b1, NAT_ACT_RELU, y, t->ws, err);
    if (!rc)
        rc = nat_pat_conv_add(ctx, NAT_FUSED, &t->d, (const char *const[]){"conv2d", NULL}, y,
                              t->w2, t->b2, NAT_ACT_NONE, out, t->ws, err);
    ctx->plans[NAT_FUSED].out = out;
    ctx->plans[NAT_FUSED].out_n = (size_t)n;
    return rc;
}

static fb_code build(nat_ctx *ctx, const fb_spec *spec, fb_err *err)
{
    crc_t t = {0};
    fb_code rc = nat_pat_conv_dims(ctx, spec, &t.d, err);
    if (!rc)
        rc = crc_inputs(ctx, &t, err);
    if (!rc)
        rc = crc_eager(ctx, &t, err);
    if (!rc)
        rc = crc_fused(ctx, &t, err);
    return rc;
}

static void reference(const nat_ctx *ctx, double *out)
{
    nat_pat_conv d;
    nat_pat_conv_of(nat_pat_first(ctx, NAT_EAGER), &d);
    int64_t n = d.n * d.c * d.h * d.w;
    const float *in = nat_pat_buf(ctx, "in");
    double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    if (a && b) {
        for (int64_t j = 0; j < n; j++)
            a[j] = in[j];
        nat_pat_conv_ref(a, nat_pat_buf(ctx, "w1"), nat_pat_buf(ctx, "b1"), d.n, d.c, d.h, d.w, b);
        for (int64_t j = 0; j < n; j++)
            b[j] = b[j] > 0 ? b[j] : 0;
        nat_pat_conv_ref(b, nat_pat_buf(ctx, "w2"), nat_pat_buf(ctx, "b2"), d.n, d.c, d.h, d.w,
                         out);
    }
    free(a);
    free(b);
}

const nat_pattern nat_pat_conv_relu_conv = {
    .info =
        NAT_PAT_INFO("conv_relu_conv", "conv3x3 -> ReLU -> conv3x3, NCHW", "channels height width"),
    .build = build,
    .reference = reference,
};
