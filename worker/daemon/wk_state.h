/* wk_state: the worker process's stop and drain state, below the loop
 * (wk_loop.c) and the job supervisor (wk_job.c), which both read it.
 *
 * Stopping has two depths.  Draining: claim nothing more, let a running job go
 * on, exit when it is done (a SIGTERM/SIGINT, or an operator's drain read back
 * with a heartbeat).  Stopping: release the running job now.  A signal's drain
 * turns into a stop once the drain grace has passed since it came (at once with
 * a grace of 0), or at a second signal; an operator's drain never does. */
#ifndef WK_STATE_H
#define WK_STATE_H

#include <stdbool.h>
#include <stdint.h>

/* Installs the SIGTERM/SIGINT handlers (no SA_RESTART: a signal cuts poll,
 * select and sleeps short) and ignores SIGPIPE; grace_ms is --drain-grace. */
void wk_state_init(int64_t grace_ms);

/* True when a running job must be released now: a second SIGTERM/SIGINT, the
 * first one grace_ms ago, or wk_state_stop. */
bool wk_state_stopping(void);

/* True once the worker claims no more: a SIGTERM/SIGINT, an operator's drain
 * (wk_state_drain_asked), or a stop. */
bool wk_state_draining(void);

/* Records what a worker heartbeat read back: whether an operator asked for a
 * drain (sticky: a drain is not taken back). */
void wk_state_drain_asked(bool asked);

/* Stops the worker now (its GPU went to another worker). */
void wk_state_stop(void);

#endif
