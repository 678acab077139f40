/* ind_explain: the inductor engine's explanation of a finished result
 * (spec.explain; docs/EXPLAIN.md): the ladder's rungs as the
 * counterfactuals, each fused Inductor kernel against eager's per-call times
 * of the ATen ops it merged. */
#ifndef IND_EXPLAIN_H
#define IND_EXPLAIN_H

#include <cjson/cJSON.h>

#include "fb_err.h"
#include "fb_result.h"

/* *out: the explanation (caller deletes).  FB_EUNSUPPORTED when eager or
 * inductor did not run cleanly. */
FB_MUSTCHECK fb_code ind_explain(const fb_result *r, cJSON **out, fb_err *err);

#endif
