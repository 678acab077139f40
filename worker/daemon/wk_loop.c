/* wk_loop: the worker's main loop (see wk_loop.h).
 *
 * Idle, the worker waits on LISTEN fb_jobs in short slices (so a stop request
 * and the heartbeat are never late) up to poll-ms, then tries to claim again:
 * NOTIFY wakes it early (a new job, or a new model to prepare: wk_model.c),
 * polling is the safety net.  The rescuer runs every few
 * seconds from every worker; db_queue_rescue is safe to run concurrently.
 *
 * Stopping and draining are wk_state's. */
#include "wk_loop.h"

#include <errno.h>
#include <inttypes.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "fb_log.h"
#include "fb_engines.h"
#include "fb_run.h"
#include "wk_ctx.h"
#include "wk_device.h"
#include "wk_gpu.h"
#include "wk_job.h"
#include "wk_model.h"
#include "wk_state.h"
#include "wk_time.h"

#define LOOP_WAIT_SLICE_MS    500
#define LOOP_BACKOFF_START_MS 250
#define LOOP_BACKOFF_CAP_MS   30000

static const char *idle_state(void)
{
    return wk_state_draining() ? "draining" : "idle";
}

/* Connects, retrying with backoff while the database does not answer.
 * FB_OK, or the error that ended it (a stop request: FB_EUNAVAIL). */
static fb_code connect_retry(wk_ctx *ctx)
{
    int64_t backoff = LOOP_BACKOFF_START_MS;
    fb_err err;

    for (;;) {
        fb_err_clear(&err);
        if (db_connect_io(ctx->cfg->database_url, wk_io_timeout_ms(ctx->cfg), &ctx->db, &err) ==
            FB_OK)
            return FB_OK;
        ctx->db = NULL;
        if (wk_state_stopping())
            return FB_EUNAVAIL;
        fb_warn("database: %s; retrying in %" PRId64 " ms", err.msg, backoff);
        wk_time_sleep_ms(backoff);
        backoff = wk_time_backoff(backoff, LOOP_BACKOFF_CAP_MS);
    }
}

/* Migrate and register, retrying while the database is unreachable. */
static fb_code setup(wk_ctx *ctx, const wk_registration *reg)
{
    db_worker_reg r = wk_device_reg(ctx->cfg, reg);
    int64_t backoff = LOOP_BACKOFF_START_MS;
    fb_err err;
    fb_code rc;

    for (;;) {
        fb_err_clear(&err);
        rc = db_migrate(ctx->db, &err);
        if (rc == FB_OK)
            rc = db_worker_register(ctx->db, &r, &err);
        if (rc == FB_OK || rc != FB_EUNAVAIL || wk_state_stopping())
            break;
        fb_warn("database: %s; retrying in %" PRId64 " ms", err.msg, backoff);
        wk_time_sleep_ms(backoff);
        backoff = wk_time_backoff(backoff, LOOP_BACKOFF_CAP_MS);
    }
    if (rc != FB_OK)
        fb_error("database setup failed: %s: %s", fb_code_name(rc), err.msg);
    return rc;
}

/* Takes (or, on a connection that was reset, takes again) the GPU's advisory
 * lock.  False only when another worker holds it: two benchmarks must never
 * share a device (docs/DESIGN.md), so this worker then stops. */
static bool hold_gpu(wk_ctx *ctx)
{
    bool got = false;
    fb_err err;

    if (!ctx->gpu_uuid)
        return true;
    fb_err_clear(&err);
    if (db_worker_lock_gpu(ctx->db, ctx->gpu_uuid, &got, &err) != FB_OK) {
        fb_debug("GPU lock: %s", err.msg); /* database away: retried next heartbeat */
        return true;
    }
    if (!got)
        fb_error("GPU %s is held by another worker; stopping", ctx->gpu_uuid);
    return got;
}

static void worker_heartbeat(wk_ctx *ctx, const char *state)
{
    bool drain = false;
    fb_err err;

    if (!hold_gpu(ctx))
        wk_state_stop();
    fb_err_clear(&err);
    if (db_worker_heartbeat(ctx->db, ctx->cfg->id, state, 0, &drain, &err) != FB_OK)
        fb_debug("worker heartbeat: %s", err.msg);
    wk_state_drain_asked(drain);
}

/* Waits up to poll-ms (or the --exit-when-idle deadline) for a NOTIFY, in
 * slices, keeping the worker heartbeat and the rescuer going.  Returns early on
 * a notification or a drain. */
static void idle_wait(wk_ctx *ctx, int64_t *next_hb)
{
    int64_t end = wk_time_now_ms() + ctx->cfg->poll_ms;

    if (ctx->idle_deadline_ms > 0 && ctx->idle_deadline_ms < end)
        end = ctx->idle_deadline_ms;
    while (!wk_state_draining()) {
        int64_t now = wk_time_now_ms(), left = end - now;
        bool woken = false;
        fb_err err;
        if (left <= 0)
            return;
        if (now >= *next_hb) {
            worker_heartbeat(ctx, "idle");
            *next_hb = now + ctx->cfg->heartbeat_ms;
            continue; /* the heartbeat may have brought a drain */
        }
        wk_ctx_rescue_maybe(ctx);
        fb_err_clear(&err);
        if (db_queue_wait(ctx->db, (int)(left < LOOP_WAIT_SLICE_MS ? left : LOOP_WAIT_SLICE_MS),
                          &woken, &err) != FB_OK) {
            fb_warn("waiting for jobs: %s", err.msg);
            wk_time_sleep_ms(left < 1000 ? left : 1000); /* the next claim reconnects */
            return;
        }
        if (woken)
            return;
    }
}

/* One claim attempt: runs a job when there is one.  Returns false when the
 * queue was empty or the database failed (the caller waits). */
static bool claim_and_run(wk_ctx *ctx, int64_t *backoff)
{
    int n_eng = 0;
    const char *const *eng = wk_device_engines(&n_eng);
    db_claim cl;
    fb_err err;
    fb_code rc;

    if (!hold_gpu(ctx)) { /* never claim for a GPU another worker holds */
        wk_state_stop();
        return false;
    }
    memset(&cl, 0, sizeof cl);
    fb_err_clear(&err);
    int64_t sent_ms = wk_time_now_ms(); /* the lease runs from here (wk_job.c) */
    rc = db_queue_claim(ctx->db, ctx->cfg->id, eng, n_eng, ctx->cfg->device, &cl, &err);
    if (rc == FB_ENOTFOUND)
        return false;
    if (rc != FB_OK) {
        fb_warn("claim: %s; retrying in %" PRId64 " ms", err.msg, *backoff);
        wk_time_sleep_ms(*backoff);
        *backoff = wk_time_backoff(*backoff, LOOP_BACKOFF_CAP_MS);
        return true; /* retry the claim itself, not the idle wait */
    }
    *backoff = LOOP_BACKOFF_START_MS;
    wk_job_heartbeat_worker(ctx, cl.id);
    wk_job_run(ctx, &cl, sent_ms);
    db_claim_free(&cl);
    ctx->jobs_done++;
    worker_heartbeat(ctx, idle_state());
    return true;
}

/* With --exit-when-idle: the time this worker gives up waiting, counted from
 * its start or its last job. */
static void idle_from_now(wk_ctx *ctx)
{
    if (ctx->cfg->exit_when_idle_s > 0)
        ctx->idle_deadline_ms = wk_time_now_ms() + (int64_t)ctx->cfg->exit_when_idle_s * 1000;
}

static void serve(wk_ctx *ctx)
{
    int64_t backoff = LOOP_BACKOFF_START_MS, next_hb = 0;

    idle_from_now(ctx);
    while (!wk_state_draining()) {
        if (ctx->cfg->max_jobs > 0 && ctx->jobs_done >= ctx->cfg->max_jobs) {
            fb_info("done %d job(s) (--max-jobs); exiting", ctx->jobs_done);
            return;
        }
        if (ctx->idle_deadline_ms > 0 && wk_time_now_ms() >= ctx->idle_deadline_ms) {
            fb_info("nothing to claim for %d s (--exit-when-idle); exiting",
                    ctx->cfg->exit_when_idle_s);
            return;
        }
        int done = ctx->jobs_done;
        wk_ctx_rescue_maybe(ctx);
        /* An uploaded model waiting to be read comes first: its owner waits on
         * it, and reading one takes seconds where a benchmark takes minutes. */
        bool prepared = wk_model_prepare_one(ctx);
        if (prepared) {
            worker_heartbeat(ctx, idle_state());
            idle_from_now(ctx);
        }
        bool again = claim_and_run(ctx, &backoff) || prepared;
        if (ctx->jobs_done != done)
            idle_from_now(ctx);
        if (!again)
            idle_wait(ctx, &next_hb);
    }
    fb_info("drained after %d job(s); exiting", ctx->jobs_done);
}

/* A worker measures its device's limits once (a CPU's on its threads, a
 * GPU's: device copy bandwidth and cuBLASLt's GEMM rate) before it registers
 * (in its device) and before any job (in each result's env).  In a
 * short-lived child: the measurement runs OpenMP threads or initializes CUDA,
 * and a parent that had done either would leave libgomp or the CUDA runtime
 * unusable in the job children it forks later (neither is fork-safe); the
 * parent stays single-threaded and CUDA-free. */
static void measure_roofline(const wk_config *cfg)
{
    double got[2] = {0, 0};
    int64_t t0 = wk_time_now_ms();
    int pfd[2], status = 0;
    pid_t pid;

    if (strcmp(cfg->device, "cpu") != 0 && strcmp(cfg->device, "cuda") != 0)
        return;
    if (pipe(pfd) != 0) {
        fb_warn("roofline not measured: pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        double out[2];
        fb_err err;
        fb_err_clear(&err);
        close(pfd[0]);
        (void)prctl(PR_SET_NAME, "fb-roofline"); /* ps tells it from a job child */
        if (fb_roofline_measure(cfg->device, cfg->threads, &out[0], &out[1], &err) == FB_OK) {
            if (write(pfd[1], out, sizeof out) != (ssize_t)sizeof out)
                _exit(1);
        } else {
            fb_warn("roofline: %s", err.msg);
        }
        _exit(0);
    }
    close(pfd[1]);
    if (pid < 0) {
        close(pfd[0]);
        fb_warn("roofline not measured: fork: %s", strerror(errno));
        return;
    }
    ssize_t n = read(pfd[0], got, sizeof got);
    close(pfd[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)sizeof got || !(got[0] > 0) || !(got[1] > 0)) {
        fb_warn("roofline not measured (the measuring child answered nothing)");
        return;
    }
    fb_env_set_roofline(cfg->device, got[0], got[1]);
    fb_info("roofline (%s): %s %.1f GB/s, GEMM %.1f GFLOP/s (%" PRId64 " ms)", cfg->device,
            strcmp(cfg->device, "cuda") == 0 ? "device copy" : "triad", got[0], got[1],
            wk_time_now_ms() - t0);
}

int wk_loop_run(const wk_config *cfg)
{
    wk_ctx ctx = {.cfg = cfg};
    wk_registration reg;
    fb_err err;
    int status = 1;

    wk_state_init((int64_t)cfg->drain_grace_s * 1000);
    fb_err_clear(&err);
    measure_roofline(cfg);
    if (wk_device_registration(cfg, &reg, &err) != FB_OK) {
        fb_error("registration: %s", err.msg);
        goto out;
    }
    if (connect_retry(&ctx) != FB_OK) {
        status = 0; /* stopped before the database answered */
        goto out;
    }
    if (reg.gpu.uuid[0]) {
        ctx.gpu_uuid = reg.gpu.uuid;
        if (wk_gpu_pin(reg.gpu.uuid, &err) != FB_OK) {
            fb_error("%s", err.msg);
            goto out;
        }
    }
    if (!hold_gpu(&ctx))
        goto out;
    if (setup(&ctx, &reg) != FB_OK)
        goto out;
    fb_info("worker %s ready on %s%s%s (heartbeat %d ms, stale %d s, poll %d ms, drain grace %d s)",
            cfg->id, cfg->device, ctx.gpu_uuid ? " " : "", ctx.gpu_uuid ? reg.gpu.name : "",
            cfg->heartbeat_ms, cfg->stale_s, cfg->poll_ms, cfg->drain_grace_s);
    serve(&ctx);
    worker_heartbeat(&ctx, "stopped");
    status = 0;
out:
    if (ctx.db)
        db_close(ctx.db);
    wk_registration_free(&reg);
    return status;
}
