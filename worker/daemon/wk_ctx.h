/* wk_ctx: what the worker's loop (wk_loop.c) and a running job (wk_job.c)
 * share: the configuration, the database session, the timers; and the rescuer,
 * which both run on its schedule. */
#ifndef WK_CTX_H
#define WK_CTX_H

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

/* Runs the rescuer when it is due (every stale-s/2, at most every 5 s and at
 * least every 200 ms), logging what it did. */
void wk_ctx_rescue_maybe(wk_ctx *ctx);

#endif
