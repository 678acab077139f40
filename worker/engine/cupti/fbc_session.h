/* fbc_session: CUPTI in-process, for the native engine's CUDA backend (the
 * first of fbc_cupti.h's two uses).  A session records into memory; begin/end
 * wrap one profiled iteration (METHOD.md: profiled iterations run after the
 * timed ones, never during them) and a summary reduces its records into a
 * variant result.
 *
 * Usage in an engine's profile(v):
 *     fbc_session *s;  rc = fbc_session_open(&s, err);
 *     rc = fbc_profile_iteration(s, "fused", run_variant, inst, labels, n, base, vr, err);
 *     fbc_session_close(s);
 *     rc = fbc_dram_measure(run_variant, inst, vr, err);   (fbc_range.h, after close)
 *
 * CUPTI is process-wide: one session at a time, opened and closed in the same
 * thread that runs the iterations. */
#ifndef FBC_SESSION_H
#define FBC_SESSION_H

#include <stdint.h>

#include "fb_err.h"
#include "fb_result.h"
#include "fbc_analysis.h"
#include "fbc_cupti.h"

typedef struct fbc_session fbc_session;

/* Opens the session (fbc_activity_start into an in-memory store).  *out is the
 * caller's, closed with fbc_session_close. */
FB_MUSTCHECK fb_code fbc_session_open(fbc_session **out, fb_err *err);

/* Starts a profiled iteration: synchronizes the device, stamps t0 and pushes a
 * new range id (*range_id).  label is copied (may be NULL). */
FB_MUSTCHECK fb_code fbc_session_begin(fbc_session *s, const char *label, uint64_t *range_id,
                                       fb_err *err);

/* Ends it: synchronizes (a CUDA error here, e.g. out of memory, is returned as
 * FB_EOOM / FB_EDEVICE), pops the id, stamps t1 and flushes the records. */
FB_MUSTCHECK fb_code fbc_session_end(fbc_session *s, fb_err *err);

/* Summarizes a range (see fbc_summarize); dropped includes CUPTI's drops. */
FB_MUSTCHECK fb_code fbc_session_summary(fbc_session *s, uint64_t range_id, const fbc_label *labels,
                                         int n_labels, fbc_summary *out, fb_err *err);

/* Per-launch device times of a range whose launches were marked
 * (fbc_launch_push/pop): fbc_launch_times over the session's records. */
FB_MUSTCHECK fb_code fbc_session_launch_times(fbc_session *s, uint64_t range_id, int n,
                                              double *t_ms, double *wall_ms, int *unmarked,
                                              fb_err *err);

/* Forgets the records collected so far (between variants). */
void fbc_session_reset(fbc_session *s);

void fbc_session_close(fbc_session *s);

/* One call for an engine's profile(): begin, run(ud) once, end, summarize into
 * vr (base_bytes as in fbc_summary_to_variant, labels optional).  A failing
 * run's code is returned as is. */
FB_MUSTCHECK fb_code fbc_profile_iteration(fbc_session *s, const char *label, fbc_run_fn run,
                                           void *ud, const fbc_label *labels, int n_labels,
                                           int64_t base_bytes, fb_variant_result *vr, fb_err *err);

#endif
