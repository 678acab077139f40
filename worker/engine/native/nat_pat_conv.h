/* nat_pat_conv: what conv_bn_relu and conv_relu_conv share: the shape params, the
 * conv launch and a float64 direct convolution for references. */
#ifndef NAT_PAT_CONV_H
#define NAT_PAT_CONV_H

#include "nat_pat.h"

/* A square 3x3, pad 1, stride 1 convolution c -> c on an n x c x h x w input. */
typedef struct nat_pat_conv {
    int64_t n, c, h, w;
    int64_t ws_n; /* workspace floats of one conv */
    bool blas;    /* params.gemm "openblas" (nat_conv_shape.blas) */
} nat_pat_conv;

/* Reads channels, height, width (n = batch) and checks the sizes. */
FB_MUSTCHECK fb_code nat_pat_conv_dims(const nat_ctx *ctx, const fb_spec *spec, nat_pat_conv *d,
                                       fb_err *err);

/* Appends conv(in, w) + bias (may be NULL) with act, into out. */
FB_MUSTCHECK fb_code nat_pat_conv_add(nat_ctx *ctx, int v, const nat_pat_conv *d,
                                      const char *const *ops, float *in, float *w, float *bias,
                                      int act, float *out, float *ws, fb_err *err);

/* out = conv(in, w) + bias (bias may be NULL), float64, same-size output. */
void nat_pat_conv_ref(const double *in, const float *w, const float *bias, int64_t n, int64_t c,
                      int64_t h, int64_t wd, double *out);

/* The conv dims back from a conv launch made by nat_pat_conv_add. */
void nat_pat_conv_of(const nat_launch *l, nat_pat_conv *d);

#endif
