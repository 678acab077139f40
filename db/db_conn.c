/* db_conn: connecting, resetting, running statements, converting libpq statuses
 * into fb_code (the one place), and reading result fields. */
#include "db_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_log.h"

/* Server notices ("relation already exists, skipping") go to the debug log, not
 * to stderr where libpq would print them. */
static void notice_to_log(void *arg, const char *message)
{
    (void)arg;
    fb_debug("db: notice: %s", message);
}

/* Flattens libpq's multi-line messages so they fit on one log line. */
static void copy_msg(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
    for (char *p = dst; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
    size_t len = strlen(dst);
    while (len > 0 && dst[len - 1] == ' ')
        dst[--len] = '\0';
}

fb_code db_connect(const char *conninfo, db_conn **out, fb_err *err)
{
    return db_connect_io(conninfo, DB_IO_TIMEOUT_MS, out, err);
}

fb_code db_connect_io(const char *conninfo, int io_timeout_ms, db_conn **out, fb_err *err)
{
    /* Our defaults come first: settings in conninfo (expanded in place of
     * dbname) override them.  A peer that stops answering (a partition, a host
     * gone) ends the session within about 1.5 io_timeout_ms instead of TCP's
     * quarter of an hour: sent data unacknowledged for io_timeout_ms
     * (tcp_user_timeout), and keepalive probes on a session waiting for an
     * answer.  Both are ignored on Unix sockets. */
    char user_to[16], idle[16], intvl[16];
    int ms = io_timeout_ms < 500 ? 500 : io_timeout_ms;
    const char *const keys[] = {"connect_timeout",
                                "fallback_application_name",
                                "keepalives",
                                "keepalives_idle",
                                "keepalives_interval",
                                "keepalives_count",
                                "tcp_user_timeout",
                                "dbname",
                                NULL};
    const char *const vals[] = {"10", "fusionbench", "1",      idle, intvl,
                                "2",  user_to,       conninfo, NULL};
    snprintf(user_to, sizeof user_to, "%d", ms);
    snprintf(idle, sizeof idle, "%d", ms / 2000 > 1 ? ms / 2000 : 1);
    snprintf(intvl, sizeof intvl, "%d", ms / 4000 > 1 ? ms / 4000 : 1);
    char msg[FB_ERR_MSG_MAX];
    fb_code rc = FB_OK;
    db_conn *c = NULL;

    *out = NULL;
    if (!conninfo || !*conninfo)
        return fb_err_set(err, FB_EINVAL, NULL, "no database URL given");
    c = calloc(1, sizeof *c);
    if (!c)
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    c->pg = PQconnectdbParams(keys, vals, 1);
    if (!c->pg) {
        rc = fb_err_set(err, FB_ENOMEM, NULL, "out of memory in libpq");
        goto out;
    }
    if (PQstatus(c->pg) != CONNECTION_OK) {
        copy_msg(msg, sizeof msg, PQerrorMessage(c->pg));
        rc = fb_err_set(err, FB_EUNAVAIL, NULL, "cannot connect to the database: %s", msg);
        goto out;
    }
    PQsetNoticeProcessor(c->pg, notice_to_log, NULL);
    *out = c;
    c = NULL;
out:
    db_close(c);
    return rc;
}

bool db_resent(const db_conn *c)
{
    return c && c->resent;
}

void db_close(db_conn *c)
{
    if (!c)
        return;
    PQfinish(c->pg);
    free(c);
}

/* PQreset keeps the conninfo; the new session has not LISTENed yet. */
static bool conn_reset(db_conn *c)
{
    c->listening = false;
    c->n_prepared = 0; /* prepared statements die with the old session */
    PQreset(c->pg);
    if (PQstatus(c->pg) != CONNECTION_OK) {
        char msg[FB_ERR_MSG_MAX];
        copy_msg(msg, sizeof msg, PQerrorMessage(c->pg));
        fb_warn("db: reconnect failed: %s", msg);
        return false;
    }
    PQsetNoticeProcessor(c->pg, notice_to_log, NULL);
    fb_info("db: reconnected");
    return true;
}

/* SQLSTATE classes that mean "the server went away or is going away". */
static bool sqlstate_unavailable(const char *st)
{
    return !strncmp(st, "08", 2) || !strncmp(st, "57P", 3) || !strcmp(st, "53300");
}

/* Whether the session is gone: libpq says so, or its socket no longer reads
 * ("server closed the connection unexpectedly" can come before libpq marks the
 * connection bad). */
static bool conn_gone(PGconn *pg)
{
    return PQstatus(pg) == CONNECTION_BAD || !PQconsumeInput(pg) || PQstatus(pg) == CONNECTION_BAD;
}

/* The one place libpq statuses become fb_code. */
static fb_code status_code(PGconn *pg, const PGresult *res)
{
    if (res) {
        ExecStatusType s = PQresultStatus(res);
        if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK)
            return FB_OK;
    }
    if (PQstatus(pg) == CONNECTION_BAD)
        return FB_EUNAVAIL;
    const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    /* No result, or an error of libpq's own (the server said nothing): a lost
     * connection, unless the socket still reads, when it is a client-side error
     * (out of memory, a malformed call) that a resend would only repeat. */
    if (!st)
        return conn_gone(pg) ? FB_EUNAVAIL : FB_EDB;
    if (sqlstate_unavailable(st))
        return FB_EUNAVAIL;
    /* data exception (bad JSON text, out of range), NOT NULL or CHECK violated:
     * the input was wrong, not the database. */
    if (!strncmp(st, "22", 2) || !strcmp(st, "23502") || !strcmp(st, "23514"))
        return FB_EINVAL;
    if (!strcmp(st, "23505")) /* unique violation */
        return FB_ECONFLICT;
    if (!strcmp(st, "57014")) /* canceled: statement_timeout (db_set_statement_timeout) */
        return FB_ETIMEOUT;
    return FB_EDB;
}

/* Converts res into an fb_code, logging the statement on failure, and clears res
 * unless it is handed to the caller (*keep). */
static fb_code check_result(db_conn *c, const char *name, const char *sql, PGresult *res,
                            PGresult **keep, fb_log_level level, fb_err *err)
{
    fb_code rc = status_code(c->pg, res);
    if (rc == FB_OK) {
        if (keep)
            *keep = res;
        else
            PQclear(res);
        return FB_OK;
    }
    char msg[FB_ERR_MSG_MAX];
    copy_msg(msg, sizeof msg, res ? PQresultErrorMessage(res) : PQerrorMessage(c->pg));
    if (!msg[0])
        copy_msg(msg, sizeof msg, PQerrorMessage(c->pg));
    const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    fb_log(level, "db: %s failed (%s, sqlstate %s): %s -- statement: %.400s", name,
           fb_code_name(rc), st ? st : "-", msg, sql);
    PQclear(res);
    /* The database's own words stay in the log: they can quote the input, the
     * schema or the server, and the error goes to clients.  Inputs are checked
     * before SQL; what slips through is answered in general terms. */
    if (rc == FB_EINVAL)
        return fb_err_set(err, rc, NULL, "a value was malformed or out of range (%s)", name);
    if (rc == FB_ECONFLICT)
        return fb_err_set(err, rc, NULL, "it already exists (%s)", name);
    if (rc == FB_ETIMEOUT)
        return fb_err_set(err, rc, NULL,
                          "%s ran past the server's time limit for a statement: ask for less "
                          "(fewer points, series or rows) or retry",
                          name);
    return fb_err_set(err, rc, NULL, "database error in %s (details in the server's log)", name);
}

/* Runs st once, prepared (prep) or not.  A statement is prepared on its first run
 * on this session; when the prepare fails its result is returned, so the caller
 * reports it like any failed statement.  When the cache is full st runs
 * unprepared. */
static PGresult *run_once(db_conn *c, const db_stmt *st, int n, const char *const *params,
                          bool prep)
{
    char name[16];
    int slot = -1;
    if (!prep)
        return PQexecParams(c->pg, st->sql, n, NULL, params, NULL, NULL, 0);
    for (int i = 0; i < c->n_prepared && slot < 0; i++)
        if (c->prepared[i] == st)
            slot = i;
    if (slot < 0 && c->n_prepared >= DB_PREPARED_MAX)
        return PQexecParams(c->pg, st->sql, n, NULL, params, NULL, NULL, 0);
    snprintf(name, sizeof name, "fb_p%d", slot < 0 ? c->n_prepared : slot);
    if (slot < 0) {
        PGresult *r = PQprepare(c->pg, name, st->sql, 0, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            return r;
        PQclear(r);
        c->prepared[c->n_prepared++] = st;
    }
    return PQexecPrepared(c->pg, name, n, params, NULL, NULL, 0);
}

static fb_code exec_stmt(db_conn *c, const db_stmt *st, int n, const char *const *params,
                         PGresult **res, bool prep, fb_err *err)
{
    fb_code rc;
    *res = NULL;
    c->resent = false;
    /* A connection known to be broken is reset before use; whatever ran on it
     * before is gone, so this is safe for any statement. */
    if (PQstatus(c->pg) == CONNECTION_BAD && !conn_reset(c))
        return fb_err_set(err, FB_EUNAVAIL, NULL, "database unreachable (%s)", st->name);
    PGresult *r = run_once(c, st, n, params, prep);
    /* Broken: libpq says so, or the statement failed without a word from the
     * server ("server closed the connection unexpectedly" can come before
     * libpq marks the connection bad), or the server is shutting down. */
    bool broken = PQstatus(c->pg) == CONNECTION_BAD || status_code(c->pg, r) == FB_EUNAVAIL;
    /* A statement about to be retried is worth a warning, not an error. */
    rc = check_result(c, st->name, st->sql, r, res,
                      broken && st->retry ? FB_LOG_WARN : FB_LOG_ERROR, err);
    if (rc == FB_OK || !broken)
        return rc;
    /* The connection broke under the statement (server restart, backend
     * terminated).  Reset now, so the next call works even when this one may
     * not run again. */
    if (!conn_reset(c) || !st->retry)
        return rc;
    fb_info("db: retrying %s after reconnect", st->name);
    fb_err_clear(err);
    c->resent = true;
    r = run_once(c, st, n, params, prep); /* prepares again on the new session */
    return check_result(c, st->name, st->sql, r, res, FB_LOG_ERROR, err);
}

fb_code db_exec(db_conn *c, const db_stmt *st, int n, const char *const *params, PGresult **res,
                fb_err *err)
{
    return exec_stmt(c, st, n, params, res, false, err);
}

fb_code db_exec_prep(db_conn *c, const db_stmt *st, int n, const char *const *params,
                     PGresult **res, fb_err *err)
{
    return exec_stmt(c, st, n, params, res, true, err);
}

fb_code db_exec_bin(db_conn *c, const db_stmt *st, int n, const char *const *params,
                    const int *lengths, const int *formats, int result_format, PGresult **res,
                    fb_err *err)
{
    *res = NULL;
    if (PQstatus(c->pg) == CONNECTION_BAD)
        return fb_err_set(err, FB_EUNAVAIL, NULL, "database unreachable (%s)", st->name);
    return check_result(
        c, st->name, st->sql,
        PQexecParams(c->pg, st->sql, n, NULL, params, lengths, formats, result_format), res,
        FB_LOG_ERROR, err);
}

fb_code db_exec_script(db_conn *c, const char *name, const char *sql, PGresult **res, fb_err *err)
{
    if (res)
        *res = NULL;
    if (PQstatus(c->pg) == CONNECTION_BAD && !conn_reset(c))
        return fb_err_set(err, FB_EUNAVAIL, NULL, "database unreachable (%s)", name);
    return check_result(c, name, sql, PQexec(c->pg, sql), res, FB_LOG_ERROR, err);
}

fb_code db_ping(db_conn *c, fb_err *err)
{
    static const db_stmt st = {"ping", "SELECT 1", true};
    PGresult *res = NULL;
    fb_code rc = db_exec(c, &st, 0, NULL, &res, err);
    PQclear(res);
    /* Whatever went wrong, for a caller of ping the database is not there. */
    if (rc != FB_OK && err)
        err->code = FB_EUNAVAIL;
    return rc == FB_OK ? FB_OK : FB_EUNAVAIL;
}

fb_code db_get_text(const PGresult *res, int row, int col, char **out, fb_err *err)
{
    *out = NULL;
    if (PQgetisnull(res, row, col))
        return FB_OK;
    size_t len = (size_t)PQgetlength(res, row, col);
    if (len > DB_TEXT_MAX)
        return fb_err_set(err, FB_ETOOBIG, NULL, "database value of %zu bytes is over %u", len,
                          DB_TEXT_MAX);
    char *s = malloc(len + 1);
    if (!s)
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    memcpy(s, PQgetvalue(res, row, col), len);
    s[len] = '\0';
    *out = s;
    return FB_OK;
}

fb_code db_get_i64(const PGresult *res, int row, int col, int64_t *out, fb_err *err)
{
    const char *s = PQgetvalue(res, row, col);
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (PQgetisnull(res, row, col) || errno || end == s || *end)
        return fb_err_set(err, FB_EINTERNAL, NULL, "database column %d is not an integer: '%s'",
                          col, s);
    *out = (int64_t)v;
    return FB_OK;
}

fb_code db_get_int(const PGresult *res, int row, int col, int *out, fb_err *err)
{
    int64_t v = 0;
    fb_code rc = db_get_i64(res, row, col, &v, err);
    if (rc)
        return rc;
    if (v < INT32_MIN || v > INT32_MAX)
        return fb_err_set(err, FB_EINTERNAL, NULL, "database column %d out of int range", col);
    *out = (int)v;
    return FB_OK;
}

fb_code db_get_buf(const PGresult *res, int row, int col, char *buf, size_t cap, fb_err *err)
{
    const char *s = PQgetisnull(res, row, col) ? "" : PQgetvalue(res, row, col);
    size_t len = strlen(s);
    if (len >= cap)
        return fb_err_set(err, FB_ETOOBIG, NULL, "database value '%.40s...' is over %zu bytes", s,
                          cap - 1);
    memcpy(buf, s, len + 1);
    return FB_OK;
}

const char *db_i64_text(int64_t v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%" PRId64, v);
    return buf;
}

static const db_stmt st_timeout = {"set statement_timeout",
                                   "SELECT set_config('statement_timeout', $1, false)", false};

fb_code db_set_statement_timeout(db_conn *c, int ms, fb_err *err)
{
    char v[24];
    const char *params[] = {v};
    PGresult *res = NULL;

    if (ms < 0)
        return fb_err_set(err, FB_EINVAL, "statement_timeout", "must be >= 0, got %d", ms);
    snprintf(v, sizeof v, "%d", ms);
    fb_code rc = db_exec(c, &st_timeout, 1, params, &res, err);
    PQclear(res);
    return rc;
}

fb_code db_idem_row(db_conn *c, const db_stmt *st, int64_t owner_id, const db_idem *idem,
                    int hash_col, PGresult **res, db_idem_outcome *how, fb_err *err)
{
    char owner[24];
    const char *k[] = {db_i64_text(owner_id, owner, sizeof owner), idem->key};
    fb_code rc = db_exec_prep(c, st, 2, k, res, err);

    if (!rc && PQntuples(*res) != 1)
        rc = FB_ENOTFOUND;
    if (!rc)
        *how = strcmp(PQgetvalue(*res, 0, hash_col), idem->hash) == 0 ? DB_IDEM_REPLAY
                                                                      : DB_IDEM_MISMATCH;
    return rc;
}
