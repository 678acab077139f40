/* nat_pat_conv: shared pieces of the conv patterns (nat_pat_conv.h). */
#include "nat_pat_conv.h"

#define CONV_K   3
#define CONV_PAD 1

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
    rc = nat_spec_gemm_pack(spec, &pack, err);
    d->blas = !pack;
    if (!rc)
        rc = nat_pat_size("height", d->n, d->c, d->h, d->w, err);
    if (rc)
        return rc;
    nat_launch probe = {.i = {d->n, d->c, d->h, d->w, d->c, CONV_K, CONV_PAD, 0, d->blas}};
    nat_conv_shape s;
    if (!nat_conv_shape_of(&probe, &s))
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
    int64_t ints[] = {d->n, d->c, d->h, d->w, d->c, CONV_K, CONV_PAD, act, d->blas};
    for (int j = 0; j < 9; j++)
        l->i[j] = ints[j];
    l->p[0] = in;
    l->p[1] = w;
    l->p[2] = bias;
    l->p[3] = out;
    l->p[4] = ws;
    /* w made ready once (Winograd's kernels) where the path has that form */
    nat_conv_shape s;
    if (!nat_conv_shape_of(l, &s))
        return fb_err_set(err, FB_EINVAL, "params.height", "impossible convolution shape");
    size_t k = nat_conv2d_prep_floats(&s);
    if (k) {
        l->p[5] = nat_buf_new(ctx, k, 1u << v, "conv.prep", err);
        if (!l->p[5])
            return err->code;
        nat_conv2d_prepare(w, &s, l->p[5]);
    }
    return FB_OK;
}

void nat_pat_conv_of(const nat_launch *l, nat_pat_conv *d)
{
    d->n = l->i[0];
    d->c = l->i[1];
    d->h = l->i[2];
    d->w = l->i[3];
    d->ws_n = 0;
    d->blas = l->i[8] != 0;
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
