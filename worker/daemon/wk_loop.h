/* wk_loop: the worker's life: connect, migrate, register, then claim and run
 * jobs until told to stop (DESIGN.md "Queue and reliability"). */
#ifndef WK_LOOP_H
#define WK_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"
#include "wk_opts.h"

typedef struct wk_ctx {
    const wk_config *cfg;
    db_conn *db;
    int64_t next_rescue_ms;
    int jobs_done;
    int64_t idle_deadline_ms; /* --exit-when-idle: exit when idle past this; 0 = never */
    const char *gpu_uuid;     /* --device cuda: the GPU this worker holds, else NULL */
} wk_ctx;

/* Runs the worker; returns the process exit status (0 after a clean stop or
 * --max-jobs, 1 when the database setup failed for good). */
int wk_loop_run(const wk_config *cfg);

/* True when a running job must be released now: a second SIGTERM/SIGINT, the
 * first one --drain-grace seconds ago, or the GPU lost to another worker. */
bool wk_loop_stopping(void);

/* True once the worker claims no more: a SIGTERM/SIGINT, an operator's drain
 * (wk_loop_drain_asked), or a stop. */
bool wk_loop_draining(void);

/* Records what a worker heartbeat read back: whether an operator asked for a
 * drain (sticky: a drain is not taken back). */
void wk_loop_drain_asked(bool asked);

/* Runs the rescuer when it is due (every few seconds), logging what it did. */
void wk_loop_rescue_maybe(wk_ctx *ctx);

/* Backoff for retries against an unreachable database: doubles up to cap_ms. */
int64_t wk_loop_backoff(int64_t cur_ms, int64_t cap_ms);

#endif
