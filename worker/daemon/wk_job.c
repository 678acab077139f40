/* wk_job: one claimed job, supervised (docs/DESIGN.md "Queue and reliability").
 *
 * The parent only watches: it polls the child's progress pipe, heartbeats the
 * job (fenced by attempt) every heartbeat-ms with the latest progress, and acts
 * on a cancel request, a lost fence, the job's timeout, a stop request, or the
 * child's exit.  The database going away does not stop the child at once:
 * heartbeats retry with backoff, and a job fenced out meanwhile is dropped.
 *
 * The lease.  The database may rescue the job once its heartbeat_at is
 * stale-s old (by the database's clock), and heartbeat_at is never older than
 * the moment this worker sent the heartbeat that set it.  So the worker keeps
 * a lease of stale-s / 2 from sending each heartbeat that was acknowledged
 * (the claim's, at first), on its monotonic clock, and when it runs out the
 * job process is SIGKILLed by a timer (ITIMER_REAL, whose handler signals the
 * child through a pidfd): however the worker is stuck, in a database call that
 * hangs on a dead network or frozen with its whole host, the job stops running
 * here before another worker can claim it.  The attempt then ends as "lost"
 * (retried), a write the fence refuses when the job was rescued meanwhile. */
#include "wk_job.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fb_log.h"
#include "wk_child.h"
#include "wk_model.h"
#include "wk_state.h"
#include "wk_time.h"

#define JOB_POLL_MS           100
#define JOB_BACKOFF_CAP_MS    5000
#define JOB_DEFAULT_TIMEOUT_S 600
#define JOB_STOP_TRIES        3 /* final writes tried while stopping, then left to the rescuer */

typedef struct job_run {
    wk_ctx *ctx;
    const db_claim *cl;
    wk_child ch;
    int64_t start_ms, deadline_ms, next_hb_ms, backoff_ms;
    int64_t lease_ms; /* the lease runs out at this monotonic time */
} job_run;

/* The lease timer.  The handler only signals the job process, through a pidfd
 * (never a pid the kernel may have given to another process since). */
static volatile sig_atomic_t lease_pidfd = -1, lease_fired;

static void on_lease_alarm(int sig)
{
    int saved = errno;
    (void)sig;
    if (lease_pidfd >= 0) {
        syscall(SYS_pidfd_send_signal, (int)lease_pidfd, SIGKILL, NULL, 0);
        lease_fired = 1;
    }
    errno = saved;
}

/* Arms the lease timer to fire in ms (at once when ms <= 0). */
static void lease_arm_timer(int64_t ms)
{
    struct itimerval it = {{0, 0}, {0, 1}};
    if (ms > 0) {
        it.it_value.tv_sec = (time_t)(ms / 1000);
        it.it_value.tv_usec = (suseconds_t)(ms % 1000) * 1000;
    }
    setitimer(ITIMER_REAL, &it, NULL);
}

/* Starts watching the lease of jr's child (pidfd -1: the child cannot be
 * watched, the lease is checked by the loop alone). */
static void lease_start(job_run *jr, int64_t sent_ms)
{
    struct sigaction sa;
    int fd = (int)syscall(SYS_pidfd_open, jr->ch.pid, 0);

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_lease_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    if (fd < 0)
        fb_warn("job %" PRId64 ": pidfd_open: %s; the lease is checked between database calls "
                "only",
                jr->cl->id, strerror(errno));
    lease_fired = 0;
    lease_pidfd = fd;
    jr->lease_ms = sent_ms + (int64_t)jr->ctx->cfg->stale_s * 1000 / 2;
    lease_arm_timer(jr->lease_ms - wk_time_now_ms());
}

/* A heartbeat sent at sent_ms was acknowledged: the lease runs from then. */
static void lease_renew(job_run *jr, int64_t sent_ms)
{
    if (lease_fired) /* too late: the job process is gone */
        return;
    jr->lease_ms = sent_ms + (int64_t)jr->ctx->cfg->stale_s * 1000 / 2;
    lease_arm_timer(jr->lease_ms - wk_time_now_ms());
}

static void lease_stop(void)
{
    struct itimerval off = {{0, 0}, {0, 0}};
    int fd = (int)lease_pidfd;

    lease_pidfd = -1; /* first: a timer firing now signals nothing */
    setitimer(ITIMER_REAL, &off, NULL);
    if (fd >= 0)
        close(fd);
}

/* The job process is gone (exited, or killed here): the end of this attempt's
 * run on this host, which tests/chaos reads from the log. */
static void log_ended(const job_run *jr, const char *how, int64_t at_ms)
{
    int64_t wall = wk_time_wall_ms(at_ms);
    time_t sec = (time_t)(wall / 1000);
    struct tm tm;
    char stamp[32];

    gmtime_r(&sec, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    fb_info("job %" PRId64 " attempt %d: job process ended (%s) at %s.%03dZ after %.3f s",
            jr->cl->id, jr->cl->attempt, how, stamp, (int)(wall % 1000),
            (at_ms - jr->start_ms) / 1000.0);
}

/* Ends the job process for why, unless the lease's timer did first: then it
 * ended, as "lost", when the lease ran out. */
static void stop_child(job_run *jr, const char *why)
{
    wk_child_kill(&jr->ch);
    if (lease_fired)
        log_ended(jr, "lost", jr->lease_ms);
    else
        log_ended(jr, why, wk_time_now_ms());
}

typedef enum { SETTLE_COMPLETE, SETTLE_FAIL, SETTLE_CANCELED, SETTLE_RELEASE } settle_kind;

typedef struct settle {
    settle_kind kind;
    const char *code, *message;             /* SETTLE_FAIL */
    bool retry;                             /* SETTLE_FAIL */
    const char *result_json, *kernels_json; /* SETTLE_COMPLETE */
} settle;

static const char *const settle_names[] = {"succeeded", "failed", "canceled", "released"};

static fb_code settle_once(job_run *jr, const settle *s, fb_err *err)
{
    db_conn *db = jr->ctx->db;
    int64_t id = jr->cl->id;
    int att = jr->cl->attempt;

    switch (s->kind) {
    case SETTLE_COMPLETE:
        return db_queue_complete(db, id, att, s->result_json, s->kernels_json, err);
    case SETTLE_FAIL:
        return db_queue_fail(db, id, att, s->code, s->message, s->retry, err);
    case SETTLE_CANCELED:
        return db_queue_mark_canceled(db, id, att, err);
    case SETTLE_RELEASE:
        return db_queue_release(db, id, att, err);
    }
    return fb_err_set(err, FB_EINTERNAL, NULL, "bad settle kind");
}

/* Whether this attempt's completion is what the database holds: a try whose
 * answer was lost may have committed (only this attempt can make the job
 * succeeded at this attempt number). */
static bool landed(job_run *jr)
{
    db_job j;
    fb_err err;
    bool yes;

    memset(&j, 0, sizeof j);
    fb_err_clear(&err);
    if (db_job_get(jr->ctx->db, jr->cl->id, &j, &err) != FB_OK)
        return false;
    yes = strcmp(j.state, "succeeded") == 0 && j.attempt == jr->cl->attempt &&
          strcmp(j.worker, jr->ctx->cfg->id) == 0;
    db_job_free(&j);
    return yes;
}

/* A result the database refused (not a lost connection) still ends the job. */
static void settle_store_failed(job_run *jr, const fb_err *why);

/* The job's last, fenced write.  An unreachable database is retried with
 * backoff (a few times only once stopping: the rescuer requeues the job after
 * stale-s anyway); a lost fence means another worker owns the job: drop it. */
static void settle_job(job_run *jr, const settle *s)
{
    int64_t backoff = 250;
    bool resent = false; /* a try before this one may have landed unanswered */
    fb_err err;

    for (int tries = 1;; tries++) {
        fb_code rc;
        fb_err_clear(&err);
        rc = settle_once(jr, s, &err);
        resent = resent || db_resent(jr->ctx->db);
        if (rc == FB_OK) {
            fb_info("job %" PRId64 " attempt %d: %s%s%s after %.1f s", jr->cl->id, jr->cl->attempt,
                    settle_names[s->kind], s->code ? " " : "", s->code ? s->code : "",
                    (wk_time_now_ms() - jr->start_ms) / 1000.0);
            return;
        }
        if (rc == FB_ESTALE && resent && s->kind == SETTLE_COMPLETE && landed(jr)) {
            fb_info("job %" PRId64 " attempt %d: succeeded after %.1f s (the first try landed; "
                    "its answer was lost with the connection)",
                    jr->cl->id, jr->cl->attempt, (wk_time_now_ms() - jr->start_ms) / 1000.0);
            return;
        }
        if (rc == FB_ESTALE) {
            fb_warn("job %" PRId64 " attempt %d: fenced out: its %s write was refused%s (%s); "
                    "dropping it",
                    jr->cl->id, jr->cl->attempt, settle_names[s->kind],
                    resent ? " when sent again after a lost connection (the first try may have "
                             "landed)"
                           : "",
                    err.msg);
            return;
        }
        if (rc != FB_EUNAVAIL) {
            fb_error("job %" PRId64 ": could not record %s: %s", jr->cl->id, settle_names[s->kind],
                     err.msg);
            if (s->kind == SETTLE_COMPLETE)
                settle_store_failed(jr, &err);
            return;
        }
        resent = true;
        if (wk_state_stopping() && tries >= JOB_STOP_TRIES) {
            fb_warn("job %" PRId64 ": database unreachable while stopping; the rescuer will "
                    "requeue it",
                    jr->cl->id);
            return;
        }
        fb_warn("job %" PRId64 ": database unreachable (%s); retrying in %" PRId64 " ms",
                jr->cl->id, err.msg, backoff);
        wk_time_sleep_ms(backoff);
        backoff = wk_time_backoff(backoff, JOB_BACKOFF_CAP_MS);
    }
}

static void settle_store_failed(job_run *jr, const fb_err *why)
{
    char msg[WK_MESSAGE_MAX];
    settle s = {.kind = SETTLE_FAIL, .code = "internal", .message = msg};

    snprintf(msg, sizeof msg, "the worker could not store the result: %s", why->msg);
    settle_job(jr, &s);
}

static void settle_fail(job_run *jr, const char *code, const char *message, bool retry)
{
    settle s = {.kind = SETTLE_FAIL, .code = code, .message = message, .retry = retry};
    settle_job(jr, &s);
}

static void settle_kind_only(job_run *jr, settle_kind kind)
{
    settle s = {.kind = kind};
    settle_job(jr, &s);
}

void wk_job_heartbeat_worker(wk_ctx *ctx, int64_t id)
{
    bool drain = false;
    fb_err err;

    fb_err_clear(&err);
    if (db_worker_heartbeat(ctx->db, ctx->cfg->id, wk_state_draining() ? "draining" : "busy", id,
                            &drain, &err) != FB_OK)
        fb_debug("worker heartbeat: %s", err.msg);
    wk_state_drain_asked(drain);
}

/* Job and worker heartbeat.  False when the job has ended here (canceled, or
 * fenced out and dropped). */
static bool heartbeat(job_run *jr)
{
    const char *prog = jr->ch.progress[0] ? jr->ch.progress : NULL;
    int64_t hb = jr->ctx->cfg->heartbeat_ms, now = wk_time_now_ms();
    bool cancel = false;
    fb_err err;
    fb_code rc;

    fb_err_clear(&err);
    rc = db_queue_heartbeat(jr->ctx->db, jr->cl->id, jr->cl->attempt, prog, &cancel, &err);
    if (rc == FB_OK) {
        lease_renew(jr, now);
        wk_job_heartbeat_worker(jr->ctx, jr->cl->id);
        jr->next_hb_ms = now + hb;
        jr->backoff_ms = hb;
        if (!cancel)
            return true;
        fb_info("job %" PRId64 ": cancel requested; stopping it", jr->cl->id);
        stop_child(jr, "canceled");
        settle_kind_only(jr, SETTLE_CANCELED);
        return false;
    }
    if (rc == FB_ESTALE) {
        stop_child(jr, "fenced out");
        fb_warn("job %" PRId64 " attempt %d: fenced out: its heartbeat write was refused (%s); "
                "dropping it",
                jr->cl->id, jr->cl->attempt, err.msg);
        return false;
    }
    fb_warn("job %" PRId64 ": heartbeat failed (%s); the job goes on, retrying in %" PRId64 " ms",
            jr->cl->id, err.msg, jr->backoff_ms);
    jr->next_hb_ms = now + jr->backoff_ms;
    jr->backoff_ms =
        wk_time_backoff(jr->backoff_ms, hb > JOB_BACKOFF_CAP_MS ? hb : JOB_BACKOFF_CAP_MS);
    return true;
}

/* The lease ran out and its timer killed the job process. */
static void lease_lost(job_run *jr)
{
    char msg[160];

    snprintf(msg, sizeof msg,
             "the worker lost its lease: no heartbeat acknowledged for %.1f s (stale-s %d)",
             (wk_time_now_ms() - (jr->lease_ms - (int64_t)jr->ctx->cfg->stale_s * 1000 / 2)) /
                 1000.0,
             jr->ctx->cfg->stale_s);
    fb_warn("job %" PRId64 " attempt %d: %s; its process was killed", jr->cl->id, jr->cl->attempt,
            msg);
    settle_fail(jr, "lost", msg, true);
}

/* The child exited by itself: store its result or its failure (never retried:
 * a workload that crashes or errs would do it again, except a process killed
 * from outside with SIGKILL: an operator, or the kernel's OOM killer). */
static void finish(job_run *jr)
{
    wk_outcome oc;

    wk_child_outcome(&jr->ch, &oc);
    if (!oc.ok && lease_fired && strcmp(oc.code, "killed") == 0) {
        /* killed by the lease's timer when the lease ran out (or, on a host
         * that was frozen, as it resumed: the process had not run since) */
        log_ended(jr, "lost", jr->lease_ms);
        wk_outcome_free(&oc);
        lease_lost(jr);
        return;
    }
    /* An exit seen after the lease ran out happened by the lease's end: the
     * timer kills the job process when it fires, and it fires late only when
     * this worker was stopped, its job process with it (a frozen host: the
     * process wrote its result before the freeze, and the freeze outlasted
     * the lease).  The write that follows meets the fence if the job was
     * rescued meanwhile. */
    int64_t now = wk_time_now_ms();
    log_ended(jr, oc.ok ? "result" : oc.code,
              lease_fired && jr->lease_ms < now ? jr->lease_ms : now);
    if (oc.ok) {
        settle s = {.kind = SETTLE_COMPLETE,
                    .result_json = oc.result_json,
                    .kernels_json = oc.kernels_json};
        settle_job(jr, &s);
    } else {
        const wk_config *cfg = jr->ctx->cfg;
        if (strcmp(oc.code, "crashed") == 0 && cfg->job_memory_mib > 0 &&
            strcmp(cfg->device, "cpu") == 0) {
            size_t n = strlen(oc.message);
            snprintf(oc.message + n, sizeof oc.message - n,
                     " (its memory budget was %d MiB: --job-memory-mib)", cfg->job_memory_mib);
        }
        fb_warn("job %" PRId64 ": %s: %s", jr->cl->id, oc.code, oc.message);
        settle_fail(jr, oc.code, oc.message, strcmp(oc.code, "killed") == 0);
    }
    wk_outcome_free(&oc);
}

static void supervise(job_run *jr)
{
    char msg[128];

    for (;;) {
        int64_t now = wk_time_now_ms(), wait = jr->next_hb_ms - now;
        wk_child_poll(&jr->ch, (int)(wait < 0 ? 0 : wait > JOB_POLL_MS ? JOB_POLL_MS : wait));
        now = wk_time_now_ms();
        if (wk_state_stopping()) { /* a drain's grace is over: give the job back */
            fb_info("job %" PRId64 ": releasing it (stop, or the drain's grace is over)",
                    jr->cl->id);
            stop_child(jr, "released");
            settle_kind_only(jr, SETTLE_RELEASE);
            return;
        }
        if (jr->ch.exited) {
            finish(jr);
            return;
        }
        if (lease_fired || now >= jr->lease_ms) { /* the timer killed it, or is about to */
            wk_child_kill(&jr->ch);
            log_ended(jr, "lost", jr->lease_ms);
            lease_lost(jr);
            return;
        }
        if (now >= jr->deadline_ms) {
            stop_child(jr, "timeout");
            snprintf(msg, sizeof msg, "the job ran over its timeout of %" PRId64 " s",
                     (jr->deadline_ms - jr->start_ms) / 1000);
            settle_fail(jr, "timeout", msg, false);
            return;
        }
        if (now >= jr->next_hb_ms && !heartbeat(jr))
            return;
        wk_ctx_rescue_maybe(jr->ctx);
    }
}

/* Between chunks of an archive copied before the job starts: the job's
 * heartbeat when due (no lease yet: the claim's heartbeat holds it). */
static void archive_tick(void *ud)
{
    job_run *jr = ud;
    int64_t now = wk_time_now_ms();
    bool cancel = false;
    fb_err err;

    if (now < jr->next_hb_ms)
        return;
    jr->next_hb_ms = now + jr->ctx->cfg->heartbeat_ms;
    fb_err_clear(&err);
    if (db_queue_heartbeat(jr->ctx->db, jr->cl->id, jr->cl->attempt, NULL, &cancel, &err) != FB_OK)
        fb_debug("job %" PRId64 " heartbeat while copying its model: %s", jr->cl->id, err.msg);
}

/* A job of an uploaded model (workload model.<id>, docs/API-EXTENSIONS.md):
 * the file its engine reads in this worker's model cache, named in a copy of
 * the spec (*spec_out): the archive for the inductor engine
 * (params.model.archive), the native form the model's preparing made for the
 * native engine (params.model.native).  The server replaced params.model at
 * submit, so only the worker sets these paths.  *spec_out stays NULL for any
 * other job.  False when the job was settled here (the model deleted since,
 * without a native form, its bytes damaged, or the copy failed: that one
 * retried). */
static bool job_archive(job_run *jr, char **spec_out)
{
    char path[WK_PATH_MAX + 80], msg[WK_MESSAGE_MAX];
    cJSON *spec = cJSON_Parse(jr->cl->spec_json);
    const char *w = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(spec, "workload"));
    cJSON *params = cJSON_GetObjectItemCaseSensitive(spec, "params");
    cJSON *ref = cJSON_GetObjectItemCaseSensitive(params, "model");
    const char *ref_name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ref, "name"));
    const char *engine = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(spec, "engine"));
    bool form = engine && strcmp(engine, "native") == 0;
    const char *key = form ? "native" : "archive";
    char name[80];
    char *end = NULL;
    long long id = w && strncmp(w, "model.", 6) == 0 ? strtoll(w + 6, &end, 10) : 0;
    fb_err err;
    fb_code rc;

    *spec_out = NULL;
    snprintf(name, sizeof name, "%s", ref_name ? ref_name : "?");
    if (id <= 0 || !end || *end) {
        cJSON_Delete(spec);
        return true;
    }
    fb_err_clear(&err);
    rc = wk_model_file_path(jr->ctx, id, form, archive_tick, jr, path, sizeof path, &err);
    if (rc == FB_OK && cJSON_IsObject(ref)) {
        cJSON_DeleteItemFromObjectCaseSensitive(ref, "archive");
        cJSON_DeleteItemFromObjectCaseSensitive(ref, "native");
        if (!cJSON_AddStringToObject(ref, key, path) || !(*spec_out = cJSON_PrintUnformatted(spec)))
            rc = fb_err_set(&err, FB_ENOMEM, NULL, "no memory for the job's spec");
    } else if (rc == FB_OK) {
        rc = fb_err_set(&err, FB_EINVAL, "params", "the job names no model in params.model");
    }
    cJSON_Delete(spec);
    if (rc == FB_OK)
        return true;
    fb_warn("job %" PRId64 ": the %s of model %lld: %s", jr->cl->id,
            form ? "native form" : "archive", id, err.msg);
    if (rc == FB_ENOTFOUND) {
        snprintf(msg, sizeof msg,
                 "model %s (id %lld) was deleted after this job was submitted; upload it again "
                 "and submit a new job",
                 name, id);
        settle_fail(jr, "model_deleted", msg, false);
    } else if (rc == FB_EUNSUPPORTED) {
        settle_fail(jr, "unsupported", err.msg, false);
    } else if (rc == FB_EINVAL || rc == FB_ETOOBIG) {
        settle_fail(jr, "invalid_model", err.msg, false);
    } else {
        settle_fail(jr, fb_code_name(rc), err.msg, true);
    }
    return false;
}

void wk_job_run(wk_ctx *ctx, const db_claim *cl, int64_t claim_sent_ms)
{
    job_run jr = {.ctx = ctx, .cl = cl};
    int timeout_s = cl->timeout_s > 0 ? cl->timeout_s : JOB_DEFAULT_TIMEOUT_S;
    fb_err err;

    jr.start_ms = wk_time_now_ms();
    jr.deadline_ms = jr.start_ms + (int64_t)timeout_s * 1000;
    jr.next_hb_ms = jr.start_ms + ctx->cfg->heartbeat_ms;
    jr.backoff_ms = ctx->cfg->heartbeat_ms;
    fb_info("job %" PRId64 " attempt %d: running (timeout %d s)", cl->id, cl->attempt, timeout_s);
    fb_err_clear(&err);
    char *spec = NULL;
    if (!job_archive(&jr, &spec))
        return;
    fb_code rc = wk_child_start(&jr.ch, ctx->cfg, spec ? spec : cl->spec_json, &err);
    cJSON_free(spec); /* the job process has its own copy */
    if (rc != FB_OK) {
        /* The worker's fault, not the job's: let another attempt have it. */
        fb_error("job %" PRId64 ": cannot start the job process: %s", cl->id, err.msg);
        settle_fail(&jr, fb_code_name(err.code), err.msg, true);
        return;
    }
    lease_start(&jr, claim_sent_ms);
    supervise(&jr);
    lease_stop();
    wk_child_close(&jr.ch);
}
