/* nat_pat_gemm: the shared builder of gemm_bias_relu and gemm_bias_gelu. */
#ifndef NAT_PAT_GEMM_H
#define NAT_PAT_GEMM_H

#include "nat_pat.h"

/* Params m (x batch), k, n; act is NAT_ACT_RELU or NAT_ACT_GELU. */
FB_MUSTCHECK fb_code nat_pat_gemm_build(nat_ctx *ctx, const fb_spec *spec, int act, fb_err *err);
void nat_pat_gemm_reference(const nat_ctx *ctx, int act, double *out);

/* Exact GELU in float64, for references. */
double nat_pat_gelu_ref(double x);

#endif
