/* db_queue: the worker's side of the queue: claim, fenced writes, rescue, wait.
 *
 * Each write is one statement, so it is atomic without BEGIN/COMMIT and can be
 * run again after a reconnect: the fence (id, attempt, state = 'running') makes a
 * second run a no-op that reports FB_ESTALE. */
#include "db_int.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fb_log.h"

#define ENGINES_MAX     16
#define ENGINE_NAME_MAX 64

/* The fence every write of a worker carries. */
#define FENCE " WHERE id = $1::bigint AND attempt = $2::integer AND state = 'running'"
/* Backoff after a failed attempt: 2^attempt seconds, at most 300. */
#define BACKOFF "now() + LEAST(300, power(2, attempt)) * interval '1 second'"

static const db_stmt st_claim = {
    "queue claim",
    /* fb_claim_pick (migration 0003) is the SELECT ... ORDER BY priority DESC, id
     * LIMIT 1 FOR UPDATE SKIP LOCKED, planned as the ordered index scan whatever
     * the statistics say; the CTE runs it once, NULL (no row) when none. */
    "WITH c AS (SELECT fb_claim_pick($2::text[], $3::text) AS id)"
    " UPDATE jobs j SET state = 'running', attempt = j.attempt + 1, worker = $1,"
    "  started_at = now(), heartbeat_at = now(), finished_at = NULL, progress = NULL,"
    "  error = NULL"
    " FROM c WHERE j.id = c.id"
    " RETURNING j.id, j.attempt, j.timeout_s, j.spec::text",
    false}; /* a lost answer leaves a running job behind: the rescuer frees it */

static const db_stmt st_heartbeat = {"queue heartbeat",
                                     "UPDATE jobs SET heartbeat_at = now(),"
                                     " progress = COALESCE($3::jsonb, progress)" FENCE
                                     " RETURNING cancel_requested",
                                     true};

static const db_stmt st_complete = {
    "queue complete",
    "WITH j AS (UPDATE jobs SET state = 'succeeded', finished_at = now(),"
    "   heartbeat_at = now()" FENCE " RETURNING id, attempt),"
    " r AS (INSERT INTO results (job_id, attempt, result)"
    "   SELECT id, attempt, $3::jsonb FROM j RETURNING job_id),"
    " k AS (INSERT INTO kernels (job_id, variant, ord, row)"
    "   SELECT j.id, v.key, (e.ord - 1)::integer, e.krow"
    "   FROM j, jsonb_each(COALESCE($4::jsonb, '{}'::jsonb)) v,"
    "        jsonb_array_elements(v.value) WITH ORDINALITY e(krow, ord)"
    "   RETURNING 1)"
    " SELECT (SELECT count(*) FROM j), (SELECT count(*) FROM r), (SELECT count(*) FROM k)",
    true};

/* The next state of a running job that stops without a result: $5 = retry. */
#define FAIL_NEXT                                                                                  \
    "(CASE WHEN cancel_requested THEN 'canceled'"                                                  \
    " WHEN $5::boolean AND attempt < max_attempts THEN 'queued' ELSE 'failed' END)"

static const db_stmt st_fail = {
    "queue fail",
    "WITH u AS (UPDATE jobs SET state = " FAIL_NEXT ","
    "  not_before = CASE WHEN " FAIL_NEXT " = 'queued' THEN " BACKOFF " ELSE not_before END,"
    "  finished_at = CASE WHEN " FAIL_NEXT " = 'queued' THEN NULL ELSE now() END,"
    "  error = jsonb_build_object('code', $3::text, 'message', $4::text, 'attempt', attempt)" FENCE
    " RETURNING id, state),"
    " n AS (SELECT pg_notify('fb_jobs', id::text) FROM u WHERE state = 'queued')"
    " SELECT state, (SELECT count(*) FROM n) FROM u",
    true};

static const db_stmt st_release = {
    "queue release",
    "WITH u AS (UPDATE jobs SET"
    "  state = CASE WHEN cancel_requested THEN 'canceled' ELSE 'queued' END,"
    "  finished_at = CASE WHEN cancel_requested THEN now() ELSE NULL END,"
    "  attempt = CASE WHEN cancel_requested THEN attempt ELSE attempt - 1 END,"
    "  not_before = now(), progress = NULL" FENCE " RETURNING id, state),"
    " n AS (SELECT pg_notify('fb_jobs', id::text) FROM u WHERE state = 'queued')"
    " SELECT state, (SELECT count(*) FROM n) FROM u",
    true};

static const db_stmt st_canceled = {
    "queue mark canceled",
    "UPDATE jobs SET state = 'canceled', finished_at = now()" FENCE " RETURNING id", true};

/* The next state of a running job whose worker stopped answering. */
#define RESCUE_NEXT                                                                                \
    "(CASE WHEN j.cancel_requested THEN 'canceled'"                                                \
    " WHEN j.attempt < j.max_attempts THEN 'queued' ELSE 'failed' END)"

static const db_stmt st_rescue = {
    "queue rescue",
    "WITH s AS (SELECT id FROM jobs WHERE state = 'running'"
    "   AND heartbeat_at < now() - $1::integer * interval '1 second'"
    "   FOR UPDATE SKIP LOCKED),"
    " u AS (UPDATE jobs j SET state = " RESCUE_NEXT ","
    "   not_before = CASE WHEN " RESCUE_NEXT " = 'queued'"
    "     THEN now() + LEAST(300, power(2, j.attempt)) * interval '1 second'"
    "     ELSE j.not_before END,"
    "   finished_at = CASE WHEN " RESCUE_NEXT " = 'queued' THEN NULL ELSE now() END,"
    "   error = CASE WHEN j.cancel_requested THEN j.error ELSE jsonb_build_object("
    "     'code', 'lost', 'attempt', j.attempt, 'message', format("
    "     'worker %s sent no heartbeat for over %s s (attempt %s of %s)',"
    "     j.worker, $1::integer, j.attempt, j.max_attempts)) END"
    "  FROM s WHERE j.id = s.id RETURNING j.id, j.state),"
    " n AS (SELECT pg_notify('fb_jobs', id::text) FROM u WHERE state = 'queued')"
    " SELECT count(*) FILTER (WHERE state = 'queued'),"
    "  count(*) FILTER (WHERE state <> 'queued'), (SELECT count(*) FROM n) FROM u",
    true};

static const db_stmt st_listen = {"queue listen", "LISTEN fb_jobs", true};

void db_claim_free(db_claim *cl)
{
    if (!cl)
        return;
    free(cl->spec_json);
    cl->spec_json = NULL;
}

/* Appends s to the text[] literal in buf as a double-quoted element. */
static fb_code array_append(char *buf, size_t cap, size_t *len, const char *s, fb_err *err)
{
    size_t n = strnlen(s, ENGINE_NAME_MAX + 1);
    if (n == 0 || n > ENGINE_NAME_MAX)
        return fb_err_set(err, FB_EINVAL, "engines", "engine name empty or over %d bytes",
                          ENGINE_NAME_MAX);
    /* worst case: comma, two quotes, every byte escaped, closing brace, NUL */
    if (*len + 2 * n + 5 > cap)
        return fb_err_set(err, FB_ETOOBIG, "engines", "engine list too long");
    if (buf[*len - 1] != '{')
        buf[(*len)++] = ',';
    buf[(*len)++] = '"';
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\')
            buf[(*len)++] = '\\';
        buf[(*len)++] = s[i];
    }
    buf[(*len)++] = '"';
    buf[*len] = '\0';
    return FB_OK;
}

/* engines as a PostgreSQL text[] literal: {"native","inductor"}. */
static fb_code engines_literal(const char *const *engines, int n, char *buf, size_t cap,
                               fb_err *err)
{
    if (n < 1 || n > ENGINES_MAX)
        return fb_err_set(err, FB_EINVAL, "engines", "need 1..%d engines, got %d", ENGINES_MAX, n);
    size_t len = 1;
    buf[0] = '{';
    buf[1] = '\0';
    for (int i = 0; i < n; i++) {
        fb_code rc = array_append(buf, cap, &len, engines[i] ? engines[i] : "", err);
        if (rc)
            return rc;
    }
    buf[len++] = '}';
    buf[len] = '\0';
    return FB_OK;
}

fb_code db_queue_claim(db_conn *c, const char *worker_id, const char *const *engines, int n_engines,
                       const char *device, db_claim *out, fb_err *err)
{
    char list[ENGINES_MAX * (2 * ENGINE_NAME_MAX + 3) + 3];
    PGresult *res = NULL;
    memset(out, 0, sizeof *out);
    fb_code rc = engines_literal(engines, n_engines, list, sizeof list, err);
    if (rc)
        return rc;
    const char *params[] = {worker_id, list, device};
    rc = db_exec_prep(c, &st_claim, 3, params, &res, err);
    if (rc)
        goto out;
    if (PQntuples(res) == 0) {
        rc = fb_err_set(err, FB_ENOTFOUND, NULL, "no queued job for %s", device);
        goto out;
    }
    rc = db_get_i64(res, 0, 0, &out->id, err);
    if (!rc)
        rc = db_get_int(res, 0, 1, &out->attempt, err);
    if (!rc)
        rc = db_get_int(res, 0, 2, &out->timeout_s, err);
    if (!rc)
        rc = db_get_text(res, 0, 3, &out->spec_json, err);
    if (rc)
        db_claim_free(out);
out:
    PQclear(res);
    return rc;
}

/* Runs a fenced statement with params $1 = id, $2 = attempt and the rest; keeps
 * the result in *res; FB_ESTALE when no row matched the fence. */
static fb_code fenced(db_conn *c, const db_stmt *st, int64_t id, int attempt, int n_more,
                      const char *const *more, PGresult **res, fb_err *err)
{
    char idt[24], att[16];
    const char *params[6] = {db_i64_text(id, idt, sizeof idt), att};
    snprintf(att, sizeof att, "%d", attempt);
    for (int i = 0; i < n_more && i < 4; i++)
        params[2 + i] = more[i];
    fb_code rc = db_exec_prep(c, st, 2 + n_more, params, res, err);
    if (rc)
        return rc;
    if (PQntuples(*res) == 0) {
        PQclear(*res);
        *res = NULL;
        return fb_err_set(err, FB_ESTALE, NULL, "job %s attempt %d is no longer running here (%s)",
                          idt, attempt, st->name);
    }
    return FB_OK;
}

fb_code db_queue_heartbeat(db_conn *c, int64_t id, int attempt, const char *progress_json,
                           bool *cancel, fb_err *err)
{
    const char *more[] = {progress_json};
    PGresult *res = NULL;
    *cancel = false;
    fb_code rc = fenced(c, &st_heartbeat, id, attempt, 1, more, &res, err);
    if (!rc)
        *cancel = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    return rc;
}

fb_code db_queue_complete(db_conn *c, int64_t id, int attempt, const char *result_json,
                          const char *kernels_json, fb_err *err)
{
    const char *more[] = {result_json, kernels_json};
    PGresult *res = NULL;
    char idt[24];
    if (!result_json)
        return fb_err_set(err, FB_EINVAL, NULL, "complete needs a result");
    fb_code rc = fenced(c, &st_complete, id, attempt, 2, more, &res, err);
    if (rc)
        goto out;
    /* The aggregate row always exists: the first count says the fence held. */
    if (strcmp(PQgetvalue(res, 0, 0), "1") != 0)
        rc = fb_err_set(err, FB_ESTALE, NULL, "job %s attempt %d is no longer running here",
                        db_i64_text(id, idt, sizeof idt), attempt);
out:
    PQclear(res);
    return rc;
}

fb_code db_queue_fail(db_conn *c, int64_t id, int attempt, const char *code, const char *message,
                      bool retry, fb_err *err)
{
    const char *more[] = {code ? code : "failed", message ? message : "", retry ? "t" : "f"};
    PGresult *res = NULL;
    fb_code rc = fenced(c, &st_fail, id, attempt, 3, more, &res, err);
    if (!rc)
        fb_info("db: job %lld attempt %d failed (%s) -> %s", (long long)id, attempt, more[0],
                PQgetvalue(res, 0, 0));
    PQclear(res);
    return rc;
}

fb_code db_queue_release(db_conn *c, int64_t id, int attempt, fb_err *err)
{
    PGresult *res = NULL;
    fb_code rc = fenced(c, &st_release, id, attempt, 0, NULL, &res, err);
    PQclear(res);
    return rc;
}

fb_code db_queue_mark_canceled(db_conn *c, int64_t id, int attempt, fb_err *err)
{
    PGresult *res = NULL;
    fb_code rc = fenced(c, &st_canceled, id, attempt, 0, NULL, &res, err);
    PQclear(res);
    return rc;
}

fb_code db_queue_rescue(db_conn *c, int stale_s, int *requeued, int *failed, fb_err *err)
{
    char stale[16];
    const char *params[] = {stale};
    PGresult *res = NULL;
    int rq = 0, fl = 0;
    if (stale_s < 1)
        return fb_err_set(err, FB_EINVAL, "stale_s", "must be >= 1, got %d", stale_s);
    snprintf(stale, sizeof stale, "%d", stale_s);
    fb_code rc = db_exec(c, &st_rescue, 1, params, &res, err);
    if (!rc)
        rc = db_get_int(res, 0, 0, &rq, err);
    if (!rc)
        rc = db_get_int(res, 0, 1, &fl, err);
    if (!rc && rq + fl > 0)
        fb_warn("db: rescued stale jobs: %d requeued, %d failed or canceled", rq, fl);
    if (requeued)
        *requeued = rc ? 0 : rq;
    if (failed)
        *failed = rc ? 0 : fl;
    PQclear(res);
    return rc;
}

/* Milliseconds left until deadline (CLOCK_MONOTONIC), at least 0. */
static int ms_left(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long ms = (long long)(deadline->tv_sec - now.tv_sec) * 1000 +
                   (deadline->tv_nsec - now.tv_nsec) / 1000000;
    return ms < 0 ? 0 : (int)ms;
}

/* Takes every notification libpq holds (they wake once, together). */
static bool drain_notifies(db_conn *c)
{
    bool any = false;
    PGnotify *nf;
    while ((nf = PQnotifies(c->pg)) != NULL) {
        any = true;
        PQfreemem(nf);
    }
    return any;
}

static fb_code ensure_listening(db_conn *c, fb_err *err)
{
    if (c->listening)
        return FB_OK;
    PGresult *res = NULL;
    fb_code rc = db_exec(c, &st_listen, 0, NULL, &res, err);
    PQclear(res);
    if (!rc)
        c->listening = true;
    return rc;
}

/* Reads what the socket has; FB_EUNAVAIL when the connection broke. */
static fb_code consume(db_conn *c, fb_err *err)
{
    if (PQconsumeInput(c->pg))
        return FB_OK;
    c->listening = false;
    fb_warn("db: connection lost while waiting for a notification (status %d)",
            (int)PQstatus(c->pg));
    return fb_err_set(err, FB_EUNAVAIL, NULL, "database connection lost while waiting");
}

fb_code db_queue_wait(db_conn *c, int timeout_ms, bool *woken, fb_err *err)
{
    struct timespec deadline;
    *woken = false;
    fb_code rc = ensure_listening(c, err);
    if (rc)
        return rc;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000;
    }
    /* Notifications may have arrived with the answer to an earlier statement. */
    rc = consume(c, err);
    for (;;) {
        if (rc)
            return rc;
        *woken = drain_notifies(c);
        if (*woken)
            return FB_OK;
        int left = ms_left(&deadline);
        if (left == 0)
            return FB_OK;
        struct pollfd pfd = {.fd = PQsocket(c->pg), .events = POLLIN};
        if (pfd.fd < 0)
            return fb_err_set(err, FB_EUNAVAIL, NULL, "database connection has no socket");
        int n = poll(&pfd, 1, left);
        if (n < 0 && errno != EINTR)
            return fb_err_set(err, FB_EIO, NULL, "poll on database socket: %s", strerror(errno));
        if (n > 0)
            rc = consume(c, err);
    }
}
