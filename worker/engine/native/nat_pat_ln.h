/* nat_pat_ln: the shared builder of layernorm and add_layernorm. */
#ifndef NAT_PAT_LN_H
#define NAT_PAT_LN_H

#include <stdbool.h>

#include "nat_pat.h"

/* Params rows (x batch), cols; residual adds "x + res" before the norm. */
FB_MUSTCHECK fb_code nat_pat_ln_build(nat_ctx *ctx, const fb_spec *spec, bool residual,
                                      fb_err *err);
void nat_pat_ln_reference(const nat_ctx *ctx, double *out);

#endif
