/* layernorm: LayerNorm over the last dim, element + reduction (nat_pat_ln.c). */
#include "nat_pat_ln.h"

static fb_code build(nat_ctx *ctx, const fb_spec *spec, fb_err *err)
{
    return nat_pat_ln_build(ctx, spec, false, err);
}

const nat_pattern nat_pat_layernorm = {
    .info = NAT_PAT_INFO("layernorm", "LayerNorm over the last dim from primitives (9 ops)",
                         "rows cols"),
    .build = build,
    .reference = nat_pat_ln_reference,
};
