/* db_models: see db_models.h. */
#include "db_models.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "fb_log.h"

bool db_model_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > DB_MODEL_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        bool alnum =
            (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (!alnum && (i == 0 || (ch != '.' && ch != '_' && ch != '-')))
            return false;
    }
    return true;
}

/* ---- upload ---- */

/* The statements of an upload run in its transaction: never retried. */
static const db_stmt st_begin = {"model upload begin", "BEGIN", false};

/* $1 owner (0: no one), $2 name, $3 the server's default quota (-1: none).
 * One row: whether the name is taken, the owner's usage and quota. */
static const db_stmt st_check = {
    "model upload check",
    "SELECT EXISTS (SELECT 1 FROM models WHERE COALESCE(owner_id, 0) = $1::bigint AND name = $2),"
    "  fb_model_usage($1::bigint),"
    "  COALESCE((SELECT model_quota_bytes FROM users WHERE id = $1::bigint), $3::bigint)",
    false};

static const db_stmt st_savepoint = {"model upload savepoint", "SAVEPOINT fb_upload", false};

static const db_stmt st_blob_new = {"model blob new",
                                    "INSERT INTO model_blobs DEFAULT VALUES RETURNING id", false};

static const db_stmt st_chunk = {
    "model chunk",
    "INSERT INTO model_chunks (blob_id, seq, data) VALUES ($1::bigint, $2::integer, $3::bytea)",
    false};

/* Same bytes finishing at once wait for each other here (the first's commit),
 * so the second finds the first's blob. */
static const db_stmt st_sha_lock = {"model sha lock",
                                    "SELECT pg_advisory_xact_lock(('x' || substr(encode($1::bytea, "
                                    "'hex'), 1, 15))::bit(60)::bigint)",
                                    false};

static const db_stmt st_blob_find = {"model blob find",
                                     "SELECT id FROM model_blobs WHERE sha256 = $1::bytea", false};

static const db_stmt st_rollback_to = {"model upload dedupe", "ROLLBACK TO SAVEPOINT fb_upload",
                                       false};

static const db_stmt st_blob_seal = {
    "model blob seal",
    "UPDATE model_blobs SET sha256 = $2::bytea, size = $3::bigint WHERE id = $1::bigint", false};

/* $1 owner, $2 name, $3 visibility, $4 blob: the new model's id. */
static const db_stmt st_model_new = {
    "model new",
    "INSERT INTO models (owner_id, name, visibility, blob_id)"
    " VALUES (NULLIF($1::bigint, 0), $2, $3, $4::bigint) RETURNING id",
    false};

static const db_stmt st_usage = {
    "model usage",
    "SELECT fb_model_usage($1::bigint),"
    "  COALESCE((SELECT model_quota_bytes FROM users WHERE id = $1::bigint), $2::bigint)",
    false};

static const db_stmt st_commit = {"model upload commit", "COMMIT", false};

static fb_code run(db_conn *c, const db_stmt *st, int n, const char *const *params, PGresult **res,
                   fb_err *err)
{
    PGresult *r = NULL;
    fb_code rc = db_exec_bin(c, st, n, params, NULL, NULL, 0, &r, err);
    if (res)
        *res = r;
    else
        PQclear(r);
    return rc;
}

void db_model_upload_abort(db_conn *c)
{
    static const db_stmt st = {"model upload rollback", "ROLLBACK", false};
    fb_err ignored;
    PGresult *res = NULL;
    fb_err_clear(&ignored);
    if (PQstatus(c->pg) == CONNECTION_OK && PQtransactionStatus(c->pg) != PQTRANS_IDLE &&
        db_exec_bin(c, &st, 0, NULL, NULL, NULL, 0, &res, &ignored) != FB_OK)
        fb_warn("db: model upload rollback failed: %s", ignored.msg);
    PQclear(res);
}

static const char *quota_text(int64_t quota, char *buf, size_t cap)
{
    return db_i64_text(quota < 0 ? -1 : quota, buf, cap);
}

/* FB_ETOOBIG when usage + more is over quota (quota < 0: none). */
static fb_code quota_check(int64_t usage, int64_t more, int64_t quota, fb_err *err)
{
    if (quota < 0 || usage + more <= quota)
        return FB_OK;
    return fb_err_set(err, FB_ETOOBIG, "quota",
                      "this archive (%" PRId64 " bytes) would take your models' storage to %" PRId64
                      " bytes, over your quota of %" PRId64
                      " bytes: delete a model (fusionbench model rm) or ask an admin for more",
                      more, usage + more, quota);
}

/* In an upload's transaction (rolled back on any error): the savepoint the
 * dedupe returns to, and a new blob to write chunks to (u->blob_id). */
static fb_code blob_open(db_conn *c, db_model_upload *u, fb_err *err)
{
    PGresult *res = NULL;
    fb_code rc = run(c, &st_savepoint, 0, NULL, NULL, err);
    if (!rc)
        rc = run(c, &st_blob_new, 0, NULL, &res, err);
    if (!rc)
        rc = db_get_i64(res, 0, 0, &u->blob_id, err);
    PQclear(res);
    if (rc)
        db_model_upload_abort(c);
    return rc;
}

fb_code db_model_upload_begin(db_conn *c, db_model_upload *u, fb_err *err)
{
    char owner[24], quota[24];
    const char *params[] = {db_i64_text(u->owner_id, owner, sizeof owner), u->name,
                            quota_text(u->quota, quota, sizeof quota)};
    PGresult *res = NULL;
    int64_t usage = 0, limit = -1;
    fb_code rc;

    u->blob_id = 0;
    u->next_seq = 0;
    u->stored = 0;
    rc = run(c, &st_begin, 0, NULL, NULL, err);
    if (rc)
        return rc;
    rc = run(c, &st_check, 3, params, &res, err);
    if (!rc && PQgetvalue(res, 0, 0)[0] == 't')
        rc = fb_err_set(err, FB_ECONFLICT, "name",
                        "you have a model named %s already (delete it first, or pick another "
                        "name)",
                        u->name);
    if (!rc)
        rc = db_get_i64(res, 0, 1, &usage, err);
    if (!rc && !PQgetisnull(res, 0, 2))
        rc = db_get_i64(res, 0, 2, &limit, err);
    PQclear(res);
    if (!rc)
        rc = quota_check(usage, u->declared, limit, err);
    if (rc) {
        db_model_upload_abort(c);
        return rc;
    }
    return blob_open(c, u, err);
}

fb_code db_model_upload_chunk(db_conn *c, db_model_upload *u, const void *data, size_t n,
                              fb_err *err)
{
    char blob[24], seq[16];
    const char *params[] = {db_i64_text(u->blob_id, blob, sizeof blob), seq, data};
    const int lengths[] = {0, 0, (int)n};
    const int formats[] = {0, 0, 1};
    PGresult *res = NULL;
    fb_code rc;

    if (n > DB_MODEL_CHUNK)
        return fb_err_set(err, FB_EINTERNAL, NULL, "a chunk of %zu bytes", n);
    snprintf(seq, sizeof seq, "%d", u->next_seq);
    rc = db_exec_bin(c, &st_chunk, 3, params, lengths, formats, 0, &res, err);
    PQclear(res);
    if (rc)
        return rc;
    u->next_seq++;
    u->stored += (int64_t)n;
    return FB_OK;
}

static fb_code bytea_param(db_conn *c, const db_stmt *st, const unsigned char sha[DB_SHA256_LEN],
                           PGresult **res, fb_err *err)
{
    const char *params[] = {(const char *)sha};
    const int lengths[] = {DB_SHA256_LEN};
    const int formats[] = {1};
    return db_exec_bin(c, st, 1, params, lengths, formats, 0, res, err);
}

/* The blob's end in an upload's transaction: sealed with its digest, or,
 * when the same bytes are stored already, its chunks rolled back to the
 * savepoint and the old blob named in u->blob_id instead. */
static fb_code seal_or_dedupe(db_conn *c, db_model_upload *u,
                              const unsigned char sha[DB_SHA256_LEN], fb_err *err)
{
    char blob[24], size[24];
    PGresult *res = NULL;
    int64_t existing = 0;
    fb_code rc;

    rc = bytea_param(c, &st_sha_lock, sha, &res, err);
    PQclear(res);
    res = NULL;
    if (!rc)
        rc = bytea_param(c, &st_blob_find, sha, &res, err);
    if (!rc && PQntuples(res) == 1)
        rc = db_get_i64(res, 0, 0, &existing, err);
    PQclear(res);
    res = NULL;
    if (rc)
        return rc;
    if (existing) { /* stored before: these chunks go, the old blob is named */
        rc = run(c, &st_rollback_to, 0, NULL, NULL, err);
        u->blob_id = existing;
    } else {
        const char *params[] = {db_i64_text(u->blob_id, blob, sizeof blob), (const char *)sha,
                                db_i64_text(u->stored, size, sizeof size)};
        const int lengths[] = {0, DB_SHA256_LEN, 0};
        const int formats[] = {0, 1, 0};
        rc = db_exec_bin(c, &st_blob_seal, 3, params, lengths, formats, 0, &res, err);
        PQclear(res);
    }
    return rc;
}

static fb_code finish(db_conn *c, db_model_upload *u, const unsigned char sha[DB_SHA256_LEN],
                      char **json, fb_err *err)
{
    char owner[24], blob[24], quota[24];
    PGresult *res = NULL;
    int64_t id = 0, usage = 0, limit = -1;
    fb_code rc = seal_or_dedupe(c, u, sha, err);

    if (rc)
        return rc;
    const char *mp[] = {db_i64_text(u->owner_id, owner, sizeof owner), u->name, u->visibility,
                        db_i64_text(u->blob_id, blob, sizeof blob)};
    rc = run(c, &st_model_new, 4, mp, &res, err);
    if (rc == FB_ECONFLICT) /* the same name uploaded at the same time */
        return fb_err_set(err, FB_ECONFLICT, "name", "you have a model named %s already", u->name);
    if (rc == FB_EINVAL)
        return fb_err_set(err, FB_EINVAL, "name", "not a model name: %s", u->name);
    if (!rc)
        rc = db_get_i64(res, 0, 0, &id, err);
    PQclear(res);
    res = NULL;
    if (rc)
        return rc;
    const char *qp[] = {owner, quota_text(u->quota, quota, sizeof quota)};
    rc = run(c, &st_usage, 2, qp, &res, err);
    if (!rc)
        rc = db_get_i64(res, 0, 0, &usage, err);
    if (!rc && !PQgetisnull(res, 0, 1))
        rc = db_get_i64(res, 0, 1, &limit, err);
    PQclear(res);
    if (!rc && limit >= 0 && usage > limit)
        rc = quota_check(usage - u->stored, u->stored, limit, err);
    if (!rc)
        rc = run(c, &st_commit, 0, NULL, NULL, err);
    if (rc)
        return rc;
    db_model_viewer uploader = {.user_id = u->owner_id, .admin = true};
    return db_model_get(c, &uploader, id, json, err);
}

fb_code db_model_upload_finish(db_conn *c, db_model_upload *u,
                               const unsigned char sha[DB_SHA256_LEN], char **json, fb_err *err)
{
    *json = NULL;
    fb_code rc = finish(c, u, sha, json, err);
    if (rc && PQtransactionStatus(c->pg) != PQTRANS_IDLE)
        db_model_upload_abort(c);
    return rc;
}

/* ---- reading ---- */

/* What v may see: $1 the viewer's id (0: no one), $2 'true' for everything. */
#define VISIBLE "($2::boolean OR m.visibility = 'lab' OR COALESCE(m.owner_id, 0) = $1::bigint)"

#define MODEL_JSON                                                                                 \
    "jsonb_build_object('id', m.id, 'name', m.name, 'owner', u.name, 'visibility', m.visibility,"  \
    "  'status', m.status, 'error', m.error, 'format', m.format, 'size', b.size,"                  \
    "  'sha256', encode(b.sha256, 'hex'), 'info', m.info,"                                         \
    "  'mine', COALESCE(m.owner_id, 0) = $1::bigint,"                                              \
    "  'created_at', " DB_TS("m.created_at") ", 'updated_at', " DB_TS("m.updated_at") ")"

#define MODEL_FROM                                                                                 \
    " FROM models m JOIN model_blobs b ON b.id = m.blob_id LEFT JOIN users u ON u.id = m.owner_id"

static const db_stmt st_list = {
    "model list",
    "SELECT COALESCE(jsonb_agg(" MODEL_JSON
    " ORDER BY m.created_at DESC, m.id DESC), '[]'::jsonb)::text" MODEL_FROM " WHERE " VISIBLE,
    true};

static const db_stmt st_get = {
    "model get", "SELECT " MODEL_JSON "::text" MODEL_FROM " WHERE m.id = $3::bigint AND " VISIBLE,
    true};

static void viewer_params(const db_model_viewer *v, char *uid, size_t cap, const char **p)
{
    p[0] = db_i64_text(v->user_id, uid, cap);
    p[1] = v->admin || v->user_id == 0 ? "true" : "false";
}

fb_code db_model_list(db_conn *c, const db_model_viewer *v, char **json, fb_err *err)
{
    char uid[24];
    const char *params[2];
    PGresult *res = NULL;
    viewer_params(v, uid, sizeof uid, params);
    fb_code rc = db_exec(c, &st_list, 2, params, &res, err);
    *json = NULL;
    if (!rc)
        rc = db_get_text(res, 0, 0, json, err);
    PQclear(res);
    return rc;
}

fb_code db_model_get(db_conn *c, const db_model_viewer *v, int64_t id, char **json, fb_err *err)
{
    char uid[24], idt[24];
    const char *params[3];
    PGresult *res = NULL;
    viewer_params(v, uid, sizeof uid, params);
    params[2] = db_i64_text(id, idt, sizeof idt);
    fb_code rc = db_exec(c, &st_get, 3, params, &res, err);
    *json = NULL;
    if (!rc && PQntuples(res) == 0)
        rc = fb_err_set(err, FB_ENOTFOUND, NULL, "no model %" PRId64, id);
    if (!rc)
        rc = db_get_text(res, 0, 0, json, err);
    PQclear(res);
    return rc;
}

/* One statement: the model row (if v may change it) and then its blob when no
 * other model names it.  Row: (visible, deleted). */
/* $3 name, $4 owner's name ('' : the viewer's own, or without authentication
 * the owner-less ones). */
static const db_stmt st_find = {
    "model find",
    "SELECT " MODEL_JSON "::text" MODEL_FROM " WHERE m.name = $3 AND " VISIBLE
    "  AND CASE WHEN $4 = '' THEN COALESCE(m.owner_id, 0) = $1::bigint ELSE u.name = $4 END",
    true};

fb_code db_model_find(db_conn *c, const db_model_viewer *v, const char *owner, const char *name,
                      char **json, fb_err *err)
{
    char uid[24];
    const char *params[4];
    PGresult *res = NULL;
    viewer_params(v, uid, sizeof uid, params);
    params[2] = name;
    params[3] = owner ? owner : "";
    fb_code rc = db_exec(c, &st_find, 4, params, &res, err);
    *json = NULL;
    if (!rc && PQntuples(res) == 0)
        rc = fb_err_set(err, FB_ENOTFOUND, "workload", "no model %s%s%s that you may use",
                        owner ? owner : "", owner ? "/" : "", name);
    if (!rc)
        rc = db_get_text(res, 0, 0, json, err);
    PQclear(res);
    return rc;
}

static const db_stmt st_delete = {
    "model delete",
    "WITH t AS (SELECT m.id, m.blob_id, (m.owner_id IS NOT NULL AND m.owner_id = $1::bigint)"
    "    OR $2::boolean AS may FROM models m WHERE m.id = $3::bigint AND " VISIBLE "),"
    " d AS (DELETE FROM models m USING t WHERE m.id = t.id AND t.may"
    "    RETURNING m.blob_id, m.native_blob_id),"
    " g AS (DELETE FROM model_blobs b USING d WHERE (b.id = d.blob_id OR b.id = d.native_blob_id)"
    "    AND NOT EXISTS (SELECT 1 FROM models o WHERE (o.blob_id = b.id OR o.native_blob_id = b.id)"
    "    AND o.id <> $3::bigint))"
    " SELECT (SELECT count(*) FROM t), (SELECT count(*) FROM d)",
    false};

fb_code db_model_delete(db_conn *c, const db_model_viewer *v, int64_t id, fb_err *err)
{
    char uid[24], idt[24];
    const char *params[3];
    PGresult *res = NULL;
    int64_t seen = 0, gone = 0;
    viewer_params(v, uid, sizeof uid, params);
    /* Without authentication everyone may delete; an admin may always. */
    params[1] = v->admin || v->user_id == 0 ? "true" : "false";
    params[2] = db_i64_text(id, idt, sizeof idt);
    fb_code rc = db_exec(c, &st_delete, 3, params, &res, err);
    if (!rc)
        rc = db_get_i64(res, 0, 0, &seen, err);
    if (!rc)
        rc = db_get_i64(res, 0, 1, &gone, err);
    PQclear(res);
    if (rc)
        return rc;
    if (!seen)
        return fb_err_set(err, FB_ENOTFOUND, NULL, "no model %" PRId64, id);
    if (!gone)
        return fb_err_set(err, FB_EFORBIDDEN, NULL,
                          "model %" PRId64 " is another user's; only its owner or an admin may "
                          "delete it",
                          id);
    return FB_OK;
}

static const db_stmt st_blob_get = {
    "model blob get",
    "SELECT b.id, b.size, (SELECT count(*) FROM model_chunks k WHERE k.blob_id = b.id),"
    "  encode(b.sha256, 'hex'), m.name" MODEL_FROM " WHERE m.id = $3::bigint AND " VISIBLE,
    true};

fb_code db_model_blob_get(db_conn *c, const db_model_viewer *v, int64_t id, db_model_blob *out,
                          fb_err *err)
{
    char uid[24], idt[24];
    const char *params[3];
    PGresult *res = NULL;
    int64_t chunks = 0;
    viewer_params(v, uid, sizeof uid, params);
    params[2] = db_i64_text(id, idt, sizeof idt);
    memset(out, 0, sizeof *out);
    fb_code rc = db_exec(c, &st_blob_get, 3, params, &res, err);
    if (!rc && PQntuples(res) == 0)
        rc = fb_err_set(err, FB_ENOTFOUND, NULL, "no model %" PRId64, id);
    if (!rc)
        rc = db_get_i64(res, 0, 0, &out->blob_id, err);
    if (!rc)
        rc = db_get_i64(res, 0, 1, &out->size, err);
    if (!rc)
        rc = db_get_i64(res, 0, 2, &chunks, err);
    if (!rc)
        rc = db_get_buf(res, 0, 3, out->sha256, sizeof out->sha256, err);
    if (!rc)
        rc = db_get_buf(res, 0, 4, out->name, sizeof out->name, err);
    out->chunks = (int)chunks;
    PQclear(res);
    return rc;
}

static const db_stmt st_chunk_read = {
    "model chunk read",
    "SELECT data FROM model_chunks WHERE blob_id = $1::bigint AND seq = $2::integer", true};

fb_code db_model_chunk_read(db_conn *c, int64_t blob_id, int seq, void *buf, size_t cap, size_t *n,
                            fb_err *err)
{
    char blob[24], seqt[16];
    const char *params[] = {db_i64_text(blob_id, blob, sizeof blob), seqt};
    PGresult *res = NULL;
    snprintf(seqt, sizeof seqt, "%d", seq);
    *n = 0;
    fb_code rc = db_exec_bin(c, &st_chunk_read, 2, params, NULL, NULL, 1, &res, err);
    if (!rc && PQntuples(res) == 0)
        rc = fb_err_set(err, FB_ENOTFOUND, NULL, "the archive's chunk %d is gone", seq);
    if (!rc) {
        size_t len = (size_t)PQgetlength(res, 0, 0);
        if (len > cap)
            rc = fb_err_set(err, FB_EINTERNAL, NULL, "a stored chunk of %zu bytes", len);
        else {
            memcpy(buf, PQgetvalue(res, 0, 0), len);
            *n = len;
        }
    }
    PQclear(res);
    return rc;
}

/* ---- preparing ---- */

/* $1 worker, $2 stale seconds, $3 max attempts.  First the models whose last
 * attempt went stale end invalid; then the oldest claimable one is taken. */
static const db_stmt st_prep_claim = {
    "model prepare claim",
    "WITH dead AS (UPDATE models SET status = 'invalid', prepare_worker = NULL, updated_at = now(),"
    "    error = 'preparing did not finish after ' || prepare_attempt || ' attempts (the worker"
    " preparing it stopped or was cut off each time)'"
    "  WHERE status = 'preparing' AND prepare_attempt >= $3::integer"
    "    AND prepare_heartbeat_at < now() - make_interval(secs => $2::integer)),"
    " pick AS (SELECT id FROM models WHERE status = 'preparing' AND prepare_attempt < $3::integer"
    "    AND (prepare_worker IS NULL"
    "         OR prepare_heartbeat_at < now() - make_interval(secs => $2::integer))"
    "  ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)"
    " UPDATE models m SET prepare_worker = $1, prepare_attempt = m.prepare_attempt + 1,"
    "    prepare_heartbeat_at = now()"
    "  FROM pick, model_blobs b WHERE m.id = pick.id AND b.id = m.blob_id"
    " RETURNING m.id, m.prepare_attempt, b.id, b.size, encode(b.sha256, 'hex')",
    false};

#define PREP_FENCE                                                                                 \
    " WHERE id = $1::bigint AND prepare_attempt = $2::integer AND status = 'preparing'"            \
    " AND prepare_worker IS NOT NULL"

static const db_stmt st_prep_beat = {
    "model prepare heartbeat", "UPDATE models SET prepare_heartbeat_at = now()" PREP_FENCE, true};

static const db_stmt st_prep_finish = {
    "model prepare finish",
    "UPDATE models SET status = $3, error = left($4, 2000), info = $5::jsonb,"
    "    prepare_worker = NULL, updated_at = now()" PREP_FENCE,
    true};

/* A row (model id, attempt, blob id, size, hex digest) into out. */
static fb_code prep_row(PGresult *res, db_model_prep *out, fb_err *err)
{
    int64_t attempt = 0;
    fb_code rc = db_get_i64(res, 0, 0, &out->id, err);
    if (!rc)
        rc = db_get_i64(res, 0, 1, &attempt, err);
    if (!rc)
        rc = db_get_i64(res, 0, 2, &out->blob_id, err);
    if (!rc)
        rc = db_get_i64(res, 0, 3, &out->size, err);
    if (!rc)
        rc = db_get_buf(res, 0, 4, out->sha256, sizeof out->sha256, err);
    out->attempt = (int)attempt;
    return rc;
}

fb_code db_model_prepare_claim(db_conn *c, const char *worker_id, int stale_s, int max_attempts,
                               db_model_prep *out, fb_err *err)
{
    char st[16], mx[16];
    const char *params[] = {worker_id, st, mx};
    PGresult *res = NULL;
    snprintf(st, sizeof st, "%d", stale_s);
    snprintf(mx, sizeof mx, "%d", max_attempts);
    memset(out, 0, sizeof *out);
    fb_code rc = db_exec(c, &st_prep_claim, 3, params, &res, err);
    if (!rc && PQntuples(res) == 0)
        rc = fb_err_set(err, FB_ENOTFOUND, NULL, "no model to prepare");
    if (!rc)
        rc = prep_row(res, out, err);
    PQclear(res);
    return rc;
}

/* Runs a fenced statement; FB_ESTALE when it changed no row. */
static fb_code prep_fenced(db_conn *c, const db_stmt *stmt, int64_t id, int attempt, int n_more,
                           const char *const *more, fb_err *err)
{
    char idt[24], at[16];
    const char *params[5] = {db_i64_text(id, idt, sizeof idt), at};
    PGresult *res = NULL;
    snprintf(at, sizeof at, "%d", attempt);
    for (int i = 0; i < n_more && i < 3; i++)
        params[2 + i] = more[i];
    fb_code rc = db_exec(c, stmt, 2 + n_more, params, &res, err);
    if (!rc && strcmp(PQcmdTuples(res), "0") == 0)
        rc = fb_err_set(err, FB_ESTALE, NULL,
                        "model %" PRId64 " attempt %d is no longer this worker's", id, attempt);
    PQclear(res);
    return rc;
}

fb_code db_model_prepare_heartbeat(db_conn *c, int64_t id, int attempt, fb_err *err)
{
    return prep_fenced(c, &st_prep_beat, id, attempt, 0, NULL, err);
}

fb_code db_model_prepare_finish(db_conn *c, int64_t id, int attempt, bool ready, const char *error,
                                const char *info_json, fb_err *err)
{
    const char *more[] = {ready ? "ready" : "invalid", ready ? NULL : (error ? error : "invalid"),
                          ready ? info_json : NULL};
    return prep_fenced(c, &st_prep_finish, id, attempt, 3, more, err);
}

/* ---- the native form (worker side, migration 0013) ---- */

/* $1 model, $2 attempt: the row locked for the transaction, so that no other
 * worker claims it meanwhile (the claim skips locked rows). */
static const db_stmt st_form_lock = {"model form lock",
                                     "SELECT 1 FROM models" PREP_FENCE " FOR UPDATE", false};

fb_code db_model_form_begin(db_conn *c, db_model_upload *u, int64_t id, int attempt, fb_err *err)
{
    char idt[24], at[16];
    const char *params[] = {db_i64_text(id, idt, sizeof idt), at};
    PGresult *res = NULL;
    fb_code rc;

    snprintf(at, sizeof at, "%d", attempt);
    u->blob_id = 0;
    u->next_seq = 0;
    u->stored = 0;
    rc = run(c, &st_begin, 0, NULL, NULL, err);
    if (!rc)
        rc = db_exec(c, &st_form_lock, 2, params, &res, err);
    if (!rc && PQntuples(res) == 0)
        rc = fb_err_set(err, FB_ESTALE, NULL,
                        "model %" PRId64 " attempt %d is no longer this worker's", id, attempt);
    PQclear(res);
    if (rc) {
        db_model_upload_abort(c);
        return rc;
    }
    return blob_open(c, u, err);
}

/* $1 model, $2 attempt, $3 info, $4 the native form's blob. */
static const db_stmt st_form_finish = {
    "model form finish",
    "UPDATE models SET status = 'ready', error = NULL, info = $3::jsonb,"
    "    native_blob_id = $4::bigint, prepare_worker = NULL, updated_at = now()" PREP_FENCE,
    false};

fb_code db_model_form_finish(db_conn *c, db_model_upload *u, const unsigned char sha[DB_SHA256_LEN],
                             int64_t id, int attempt, const char *info_json, fb_err *err)
{
    char idt[24], at[16], blob[24];
    PGresult *res = NULL;
    fb_code rc = seal_or_dedupe(c, u, sha, err);

    snprintf(at, sizeof at, "%d", attempt);
    if (!rc) {
        const char *params[] = {db_i64_text(id, idt, sizeof idt), at, info_json,
                                db_i64_text(u->blob_id, blob, sizeof blob)};
        rc = db_exec(c, &st_form_finish, 4, params, &res, err);
    }
    if (!rc && strcmp(PQcmdTuples(res), "0") == 0)
        rc = fb_err_set(err, FB_ESTALE, NULL,
                        "model %" PRId64 " attempt %d is no longer this worker's", id, attempt);
    PQclear(res);
    if (!rc)
        rc = run(c, &st_commit, 0, NULL, NULL, err);
    if (rc && PQtransactionStatus(c->pg) != PQTRANS_IDLE)
        db_model_upload_abort(c);
    return rc;
}

static const db_stmt st_archive = {
    "model archive",
    "SELECT m.id, 0, b.id, b.size, encode(b.sha256, 'hex'), NULL"
    " FROM models m JOIN model_blobs b ON b.id = m.blob_id WHERE m.id = $1::bigint",
    true};

static const db_stmt st_form = {
    "model form",
    "SELECT m.id, 0, b.id, b.size, encode(b.sha256, 'hex'), m.info->'native'->>'why'"
    " FROM models m LEFT JOIN model_blobs b ON b.id = m.native_blob_id WHERE m.id = $1::bigint",
    true};

/* A model's file by st (st_archive, st_form): the blob, or why there is none. */
static fb_code model_file(db_conn *c, const db_stmt *st, int64_t id, db_model_prep *out,
                          fb_err *err)
{
    char idt[24];
    const char *params[] = {db_i64_text(id, idt, sizeof idt)};
    PGresult *res = NULL;
    memset(out, 0, sizeof *out);
    fb_code rc = db_exec(c, st, 1, params, &res, err);
    if (!rc && PQntuples(res) == 0)
        rc = fb_err_set(err, FB_ENOTFOUND, NULL, "model %" PRId64 " is gone", id);
    if (!rc && PQgetisnull(res, 0, 2))
        rc = fb_err_set(
            err, FB_EUNSUPPORTED, "engine", "model %" PRId64 " has no native form: %s", id,
            PQgetisnull(res, 0, 5) ? "it was prepared before the native engine ran uploaded models "
                                     "(upload it again)"
                                   : PQgetvalue(res, 0, 5));
    if (!rc)
        rc = prep_row(res, out, err);
    PQclear(res);
    return rc;
}

fb_code db_model_archive(db_conn *c, int64_t id, db_model_prep *out, fb_err *err)
{
    return model_file(c, &st_archive, id, out, err);
}

fb_code db_model_form(db_conn *c, int64_t id, db_model_prep *out, fb_err *err)
{
    return model_file(c, &st_form, id, out, err);
}
