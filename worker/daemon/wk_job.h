/* wk_job: supervises one claimed job from fork to its final, fenced write. */
#ifndef WK_JOB_H
#define WK_JOB_H

#include "db.h"
#include "wk_ctx.h"

/* Runs cl in a child and settles it: complete, fail (timeout, crashed, the
 * child's error; never retried), mark canceled, release (on stop), or drop (when
 * fenced out: another worker owns the job now).  Errors are logged, not
 * returned: whatever happens the worker goes on. */
void wk_job_run(wk_ctx *ctx, const db_claim *cl, int64_t claim_sent_ms);

/* The worker's heartbeat while it holds job id: state "busy", or "draining"
 * once it claims no more; reads back an operator's drain.  Failures are logged. */
void wk_job_heartbeat_worker(wk_ctx *ctx, int64_t id);

#endif
