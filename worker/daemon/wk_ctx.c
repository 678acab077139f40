/* wk_ctx: see wk_ctx.h.  db_queue_rescue is safe to run from every worker at
 * once. */
#include "wk_ctx.h"

#include "fb_log.h"
#include "wk_time.h"

#define RESCUE_EVERY_MS 5000

void wk_ctx_rescue_maybe(wk_ctx *ctx)
{
    int64_t now = wk_time_now_ms(), every = (int64_t)ctx->cfg->stale_s * 1000 / 2;
    int requeued = 0, failed = 0;
    fb_err err;

    if (now < ctx->next_rescue_ms)
        return;
    if (every > RESCUE_EVERY_MS)
        every = RESCUE_EVERY_MS;
    ctx->next_rescue_ms = now + (every < 200 ? 200 : every);
    fb_err_clear(&err);
    if (db_queue_rescue(ctx->db, ctx->cfg->stale_s, &requeued, &failed, &err) != FB_OK)
        fb_debug("rescuer: %s", err.msg);
    else if (requeued || failed)
        fb_info("rescuer: requeued %d and failed %d stale job(s)", requeued, failed);
}
