/* ind_engine: the "inductor" engine — PyTorch eager against torch.compile,
 * measured by worker/engine/inductor/runner.py in a child process (docs/DESIGN.md engines,
 * docs/INDUCTOR_PROTOCOL.md).  The engine runs the whole benchmark in the runner
 * (fb_engine.run_whole) and converts its result line into an fb_result. */
#ifndef IND_ENGINE_H
#define IND_ENGINE_H

#include <cjson/cJSON.h>

#include "fb_engine.h"

extern const fb_engine ind_engine;

/* Fills out (initialized by the caller) from a runner result line (the parsed
 * object, not consumed): variants with statuses, samples and statistics, kernel
 * rows (a generated kernel's with its bytes, FLOPs and roofline bound on the
 * roofline out->env already holds, captured by the caller) and the per-variant
 * "inductor" object.  Exposed for unit tests. */
FB_MUSTCHECK fb_code ind_result_from_json(const cJSON *line, fb_result *out, fb_err *err);

/* The runner request for a spec (defaults applied), with the roofline of its
 * device the worker measured (fb_engine.roofline_use; null: none).  Caller
 * deletes. */
cJSON *ind_request_json(const fb_spec *spec);

#endif
