/* gemm_bias_gelu: gelu(x w + b) — tensor + element fusion (nat_pat_gemm.c). */
#include "nat_pat_gemm.h"

static fb_code build(nat_ctx *ctx, const fb_spec *spec, fb_err *err)
{
    return nat_pat_gemm_build(ctx, spec, NAT_ACT_GELU, err);
}

static void reference(const nat_ctx *ctx, double *out)
{
    nat_pat_gemm_reference(ctx, NAT_ACT_GELU, out);
}

const nat_pattern nat_pat_gemm_bias_gelu = {
    .info = NAT_PAT_INFO("gemm_bias_gelu",
                         "gelu(x @ w + b): GEMM with a bias+GELU (exact, erf) epilogue", "m k n"),
    .build = build,
    .reference = reference,
};
