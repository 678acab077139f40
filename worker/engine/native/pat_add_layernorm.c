/* add_layernorm: residual add then LayerNorm, element + reduction (nat_pat_ln.c). */
#include "nat_pat_ln.h"

static fb_code build(nat_ctx *ctx, const fb_spec *spec, fb_err *err)
{
    return nat_pat_ln_build(ctx, spec, true, err);
}

const nat_pattern nat_pat_add_layernorm = {
    .info = NAT_PAT_INFO("add_layernorm", "LayerNorm(x + residual) from primitives (10 ops)",
                         "rows cols"),
    .build = build,
    .reference = nat_pat_ln_reference,
};
