/* fbc_range: DRAM bytes per iteration through CUPTI's range profiler (CUDA 13
 * cupti_range_profiler.h + cupti_profiler_host.h). */
#ifndef FBC_RANGE_H
#define FBC_RANGE_H

#include "fb_err.h"
#include "fb_result.h"
#include "fbc_cupti.h"

/* Measures DRAM bytes read and written over one iteration (run(ud), replayed
 * as many times as the metrics need passes) with CUPTI's range profiler on the
 * current context.  Never fails the caller: on any refusal (counters restricted
 * to admins, unsupported chip or MIG, a CUPTI client holding the profiler) it
 * sets vr->dram_read_bytes/_write_bytes to -1 and vr->dram_reason, and returns
 * FB_OK; a failing run() is returned as is.  Must not overlap an activity
 * session's profiled iteration (replay would distort its times). */
FB_MUSTCHECK fb_code fbc_dram_measure(fbc_run_fn run, void *ud, fb_variant_result *vr, fb_err *err);

#endif
