/* fbc_cupti: the one module that talks to CUPTI's activity API, used two ways
 * (docs/DESIGN.md "Profiling"):
 *
 *  (a) in-process, for the native engine's CUDA backend: fbc_session.h opens a
 *      session, wraps one profiled iteration in begin/end and summarizes its
 *      records into a variant result (DRAM bytes: fbc_range.h);
 *  (b) by the injection library (fbc_inject.c), which streams every record of
 *      any CUDA process to a file (fbc_activity_* with a file sink).
 *
 * Records: CONCURRENT_KERNEL (never the KERNEL kind, which serializes kernels),
 * MEMCPY, MEMSET, MEMORY2 (allocation/free → peak memory) and
 * EXTERNAL_CORRELATION (range attribution).  Buffers are bounded in size and
 * number; records CUPTI had to drop are counted (cuptiActivityGetNumDroppedRecords)
 * and reported.
 *
 * Range markers: begin pushes an external correlation id (kind CUSTOM0) so every
 * API call until end — and the kernels, copies and graph launches they start —
 * are mapped to it; begin and end also record CUPTI timestamps after a device
 * synchronize, the window used where no correlation is recorded.
 *
 * CUPTI is a process-wide singleton: one session at a time.  Another profiler
 * that already holds CUPTI (Nsight Systems/Compute, a second injection) makes
 * open fail with FB_EUNAVAIL and a message naming the cause. */
#ifndef FBC_CUPTI_H
#define FBC_CUPTI_H

#include <stdbool.h>
#include <stdint.h>

#include <cupti.h>

#include "fb_err.h"
#include "fb_result.h"
#include "fbc_analysis.h"

#define FBC_BUFFER_BYTES (4u << 20) /* one activity buffer */
#define FBC_MAX_BUFFERS  64         /* outstanding buffers: 256 MiB at most */

/* The one conversion of CUptiResult into fb_code (what: the call that failed). */
fb_code fbc_cupti_code(CUptiResult r, const char *what, fb_err *err);

/* Receives every converted record, from CUPTI's buffer-completion thread or the
 * flushing thread, one call at a time (fbc holds a lock around it). */
typedef void (*fbc_sink_fn)(void *ud, const fbc_rec *r);

/* An iteration to profile (the engine's run of one variant).  A failing run's
 * code is returned as is by the functions that call it. */
typedef fb_code (*fbc_run_fn)(void *ud, fb_err *err);

/* Subscribes (detecting a profiler already holding CUPTI), registers the buffer
 * callbacks and enables the record kinds.  marks: also the runtime and driver
 * API kinds, without which CUPTI records no range or launch mark (external
 * correlation) at all; they cost host time on every API call, so a caller
 * that can window by time alone (the injection library around a job's
 * timed iterations) leaves them off.  FB_EUNAVAIL when another client holds
 * CUPTI; FB_EDEVICE for other CUPTI errors. */
FB_MUSTCHECK fb_code fbc_activity_start(fbc_sink_fn sink, void *ud, bool marks, fb_err *err);
/* Delivers every completed and pending record to the sink now. */
FB_MUSTCHECK fb_code fbc_activity_flush(fb_err *err);
/* Flushes, disables the kinds and unsubscribes.  Safe to call twice. */
void fbc_activity_stop(void);
/* Records lost so far: CUPTI's drop counts plus buffers we refused (limit). */
uint64_t fbc_activity_dropped(void);
/* CUPTI's clock (ns), the one activity records use; 0 on failure. */
uint64_t fbc_now(void);

/* Range markers: push/pop an external correlation id for the calling thread
 * (recorded only when the activity was started with marks; a range without
 * them is windowed by its times). */
FB_MUSTCHECK fb_code fbc_mark_push(uint64_t id, fb_err *err);
FB_MUSTCHECK fb_code fbc_mark_pop(fb_err *err);

/* Launch marks (kind CUSTOM1, a stack of its own beside the range's): what
 * the calling thread enqueues between push(i + 1) and pop is launch i's, for
 * fbc_launch_times (FBC_LAUNCH records; the activity started with marks). */
FB_MUSTCHECK fb_code fbc_launch_push(uint64_t id, fb_err *err);
FB_MUSTCHECK fb_code fbc_launch_pop(fb_err *err);

#endif
