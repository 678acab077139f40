/* nat_pat_conv: shared pieces of the conv patterns (nat_pat_conv.h). */
#include "nat_pat_conv.h"

#define CONV_K   3
#define CONV_PAD 1

/* The shape of d's convolution, finished; false when impossible. */
static bool conv_shape(const nat_pat_conv *d, nat_conv_shape *s)
{
    *s = (nat_conv_shape){.n = (int)d->n,
                          .ci = (int)d->c,
                          .h = (int)d->h,
                          .w = (int)d->w,
                          .co = (int)d->c,
                          .kh = CONV_K,
                          .kw = CONV_K,
                          .stride_h = 1,
                          .stride_w = 1,
                          .pad_h = CONV_PAD,
                          .pad_w = CONV_PAD,
                          .dil_h = 1,
                          .dil_w = 1,
                          .groups = 1,
                          .blas = d->blas};
    return nat_conv_shape_finish(s);
}

fb_code nat_pat_conv_dims(const nat_ctx *ctx, const fb_spec *spec, nat_pat_conv *d, fb_err *err)
{
    fb_code rc = nat_pat_dim(spec, "channels", 64, 4096, &d->c, err);
    if (!rc)
        rc = nat_pat_dim(spec, "height", 56, 8192, &d->h, err);
    if (!rc)
        rc = nat_pat_dim(spec, "width", 56, 8192, &d->w, err);
    if (rc)
        return rc;
    d->n = ctx->batch;
    bool pack;
    rc = nat_spec_gemm_pack(spec, &pack, NULL, err);
    d->blas = !pack;
    if (!rc)
        rc = nat_pat_size("height", d->n, d->c, d->h, d->w, err);
    if (rc)
        return rc;
    nat_conv_shape s;
    if (!conv_shape(d, &s))
        return fb_err_set(err, FB_EINVAL, "params.height", "impossible convolution shape");
    d->ws_n = (int64_t)nat_conv2d_workspace(&s, true); /* nat_pat_conv_add prepares */
    return nat_pat_size("height", d->ws_n, 1, 1, 1, err);
}

fb_code nat_pat_conv_add(nat_ctx *ctx, int v, const nat_pat_conv *d, const char *const *ops,
                         float *in, float *w, float *bias, int act, float *out, float *ws,
                         fb_err *err)
{
    nat_launch *l = NULL;
    const char *name = act == NAT_ACT_RELU ? "conv2d_relu" : "conv2d";
    fb_code rc = nat_pat_add(ctx, v, name, FB_KC_GEMM, ops, nat_k_conv2d, &l, err);
    if (rc)
        return rc;
    l->dk = NAT_D_CONV;
    l->d.conv.act = act;
    if (!conv_shape(d, &l->d.conv.s))
        return fb_err_set(err, FB_EINVAL, "params.height", "impossible convolution shape");
    l->p[NAT_CONV_IN] = in;
    l->p[NAT_CONV_W] = w;
    l->p[NAT_CONV_BIAS] = bias;
    l->p[NAT_CONV_OUT] = out;
    l->p[NAT_CONV_WS] = ws;
    /* w made ready once (Winograd's kernels) where the path has that form */
    size_t k = nat_conv2d_prep_floats(&l->d.conv.s);
    if (k) {
        l->p[NAT_CONV_PREP] = nat_buf_new(ctx, k, 1u << v, "conv.prep", err);
        if (!l->p[NAT_CONV_PREP])
            return err->code;
        nat_conv2d_prepare(w, &l->d.conv.s, l->p[NAT_CONV_PREP]);
    }
    return FB_OK;
}

void nat_pat_conv_of(const nat_launch *l, nat_pat_conv *d)
{
    const nat_conv_shape *s = &l->d.conv.s;
    d->n = s->n;
    d->c = s->ci;
    d->h = s->h;
    d->w = s->w;
    d->ws_n = 0;
    d->blas = s->blas;
}

/* One output plane (image, channel) of the reference convolution. */
static void ref_plane(const double *in, const float *w, double b, int64_t c, int64_t h, int64_t wd,
                      double *o)
{
    for (int64_t y = 0; y < h; y++) {
        for (int64_t x = 0; x < wd; x++) {
            double acc = b;
            for (int64_t ci = 0; ci < c; ci++) {
                for (int64_t ky = 0; ky < CONV_K; ky++) {
                    int64_t iy = y + ky - CONV_PAD;
                    for (int64_t kx = 0; kx < CONV_K && iy >= 0 && iy < h; kx++) {
                        int64_t ix = x + kx - CONV_PAD;
                        if (ix >= 0 && ix < wd)
                            acc +=
                                in[(ci * h + iy) * wd + ix] * w[(ci * CONV_K + ky) * CONV_K + kx];
                    }
                }
            }
            o[y * wd + x] = acc;
        }
    }
}

void nat_pat_conv_ref(const double *in, const float *w, const float *bias, int64_t n, int64_t c,
                      int64_t h, int64_t wd, double *out)
{
    int64_t plane = h * wd;
    for (int64_t b = 0; b < n; b++)
        for (int64_t co = 0; co < c; co++)
            ref_plane(in + b * c * plane, w + co * c * CONV_K * CONV_K, bias ? bias[co] : 0.0, c, h,
                      wd, out + (b * c + co) * plane);
}
