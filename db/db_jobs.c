/* db_jobs: the server's side of jobs: insert (one, or many in one group commit),
 * get, list, cancel, kernel rows. */
#include "db_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_log.h"

#define LIST_MAX 200

/* Columns of a job, in the order row_to_job reads them. */
/* clang-format off */
#define JOB_COLUMNS                                                                                \
    "j.id, j.state, j.spec::text, j.attempt, j.max_attempts, j.progress::text,"                    \
    " COALESCE(j.worker, ''), " DB_TS("j.created_at") ", " DB_TS("j.started_at") ","               \
    " " DB_TS("j.finished_at") ", j.error::text, r.result::text, j.cancel_requested,"              \
    " COALESCE(j.owner_id, 0),"                                                                    \
    " COALESCE((SELECT u.name FROM users u WHERE u.id = j.owner_id), '')"
/* clang-format on */
#define JOB_FROM " FROM jobs j LEFT JOIN results r ON r.job_id = j.id "

static const db_stmt st_insert = {
    "job insert",
    "WITH ins AS ("
    " INSERT INTO jobs (spec, workload, engine, device, dtype, batch_size, priority,"
    "                   max_attempts, timeout_s, owner_id)"
    " VALUES ($1::jsonb, $2, $3, $4, $5, $6::integer, $7::integer, $8::integer, $9::integer,"
    "         NULLIF($10::bigint, 0))"
    " RETURNING id)"
    " SELECT id, pg_notify('fb_jobs', id::text) FROM ins",
    false}; /* a retry could insert the job twice */

/* The insert that answers with the whole new job (JOB_COLUMNS), so a submit is
 * one round trip.  A new job has no result yet: the join to results matches
 * nothing, it only gives JOB_COLUMNS its r.result. */
static const db_stmt st_create = {
    "job create",
    "WITH j AS ("
    " INSERT INTO jobs (spec, workload, engine, device, dtype, batch_size, priority,"
    "                   max_attempts, timeout_s, owner_id)"
    " VALUES ($1::jsonb, $2, $3, $4, $5, $6::integer, $7::integer, $8::integer, $9::integer,"
    "         NULLIF($10::bigint, 0))"
    " RETURNING *)"
    " SELECT " JOB_COLUMNS ", pg_notify('fb_jobs', j.id::text)"
    " FROM j LEFT JOIN results r ON false",
    false}; /* a retry could insert the job twice */

/* st_create under an Idempotency-Key: no row when the owner has the key. */
static const db_stmt st_create_idem = {
    "job create idem",
    "WITH j AS ("
    " INSERT INTO jobs (spec, workload, engine, device, dtype, batch_size, priority,"
    "                   max_attempts, timeout_s, owner_id, idem_key, idem_hash)"
    " VALUES ($1::jsonb, $2, $3, $4, $5, $6::integer, $7::integer, $8::integer, $9::integer,"
    "         NULLIF($10::bigint, 0), $11, $12)"
    " ON CONFLICT ((COALESCE(owner_id, 0)), idem_key) WHERE idem_key IS NOT NULL DO NOTHING"
    " RETURNING *)"
    " SELECT " JOB_COLUMNS ", pg_notify('fb_jobs', j.id::text)"
    " FROM j LEFT JOIN results r ON false",
    false}; /* a retry could insert the job twice: the caller's key is what prevents it */

/* The job an owner made under a key, and the hash of its request. */
static const db_stmt st_get_idem = {"job get idem",
                                    "SELECT " JOB_COLUMNS ", j.idem_hash" JOB_FROM
                                    "WHERE COALESCE(j.owner_id, 0) = $1::bigint"
                                    " AND j.idem_key = $2",
                                    true};

#define IDEM_HASH_COLUMN 15 /* after JOB_COLUMNS */

static const db_stmt st_get = {"job get", "SELECT " JOB_COLUMNS JOB_FROM "WHERE j.id = $1::bigint",
                               true};

static const db_stmt st_list = {
    "job list",
    "SELECT " JOB_COLUMNS JOB_FROM "WHERE ($1::text IS NULL OR j.state = $1)"
    " AND ($2::text IS NULL OR j.workload = $2)"
    " AND ($3::text IS NULL OR j.engine = $3)"
    " AND ($4::text IS NULL OR j.device = $4)"
    " AND ($5::text IS NULL OR j.spec -> 'labels' @> jsonb_build_object($5::text, $6::text))"
    " AND ($7::bigint = 0 OR j.id < $7::bigint)"
    " AND ($9::bigint = 0 OR j.owner_id = $9::bigint)"
    " ORDER BY j.id DESC LIMIT $8::integer",
    true};

/* The job's state before the cancel: NULL row when there is no such job. */
static const db_stmt st_cancel = {
    "job cancel",
    "WITH t AS (SELECT id, state FROM jobs WHERE id = $1::bigint FOR UPDATE),"
    " u AS (UPDATE jobs j SET"
    "   state = CASE WHEN t.state = 'queued' THEN 'canceled' ELSE j.state END,"
    "   finished_at = CASE WHEN t.state = 'queued' THEN now() ELSE j.finished_at END,"
    "   cancel_requested = true"
    "  FROM t WHERE j.id = t.id AND t.state IN ('queued', 'running') RETURNING j.id)"
    " SELECT t.state, (SELECT count(*) FROM u) FROM t",
    true};

static const db_stmt st_kernels = {
    "job kernels",
    "SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1::bigint),"
    " (SELECT COALESCE(jsonb_agg(k.row || jsonb_build_object('variant', k.variant)"
    "                            ORDER BY k.variant, k.ord), '[]'::jsonb)::text"
    "  FROM kernels k WHERE k.job_id = $1::bigint AND ($2::text IS NULL OR k.variant = $2))",
    true};

void db_job_free(db_job *j)
{
    if (!j)
        return;
    free(j->spec_json);
    free(j->progress_json);
    free(j->error_json);
    free(j->result_json);
    j->spec_json = j->progress_json = j->error_json = j->result_json = NULL;
}

/* Fills *j from row of res (JOB_COLUMNS).  On error *j owns nothing. */
static fb_code row_to_job(const PGresult *res, int row, db_job *j, fb_err *err)
{
    memset(j, 0, sizeof *j);
    fb_code rc = db_get_i64(res, row, 0, &j->id, err);
    if (!rc)
        rc = db_get_buf(res, row, 1, j->state, sizeof j->state, err);
    if (!rc)
        rc = db_get_text(res, row, 2, &j->spec_json, err);
    if (!rc)
        rc = db_get_int(res, row, 3, &j->attempt, err);
    if (!rc)
        rc = db_get_int(res, row, 4, &j->max_attempts, err);
    if (!rc)
        rc = db_get_text(res, row, 5, &j->progress_json, err);
    if (!rc)
        rc = db_get_buf(res, row, 6, j->worker, sizeof j->worker, err);
    if (!rc)
        rc = db_get_buf(res, row, 7, j->created_at, sizeof j->created_at, err);
    if (!rc)
        rc = db_get_buf(res, row, 8, j->started_at, sizeof j->started_at, err);
    if (!rc)
        rc = db_get_buf(res, row, 9, j->finished_at, sizeof j->finished_at, err);
    if (!rc)
        rc = db_get_text(res, row, 10, &j->error_json, err);
    if (!rc)
        rc = db_get_text(res, row, 11, &j->result_json, err);
    if (!rc)
        j->cancel_requested = PQgetvalue(res, row, 12)[0] == 't';
    if (!rc)
        rc = db_get_i64(res, row, 13, &j->owner_id, err);
    if (!rc)
        rc = db_get_buf(res, row, 14, j->owner, sizeof j->owner, err);
    if (rc)
        db_job_free(j);
    return rc;
}

/* The text parameters of st_insert and st_create; the numbers go into the
 * caller's buffers. */
typedef struct new_job_params {
    char batch[16], prio[16], maxa[16], tmo[16], owner[24];
    const char *v[10];
} new_job_params;

static fb_code new_job_params_fill(const db_new_job *nj, new_job_params *p, fb_err *err)
{
    if (!nj->spec_json || !nj->workload || !nj->engine || !nj->device || !nj->dtype)
        return fb_err_set(err, FB_EINVAL, NULL,
                          "job insert: spec, workload, engine, device "
                          "and dtype are required");
    snprintf(p->batch, sizeof p->batch, "%d", nj->batch_size);
    snprintf(p->prio, sizeof p->prio, "%d", nj->priority);
    snprintf(p->maxa, sizeof p->maxa, "%d", nj->max_attempts);
    snprintf(p->tmo, sizeof p->tmo, "%d", nj->timeout_s);
    snprintf(p->owner, sizeof p->owner, "%" PRId64, nj->owner_id);
    const char *v[] = {nj->spec_json, nj->workload, nj->engine, nj->device, nj->dtype,
                       p->batch,      p->prio,      p->maxa,    p->tmo,     p->owner};
    memcpy(p->v, v, sizeof v);
    return FB_OK;
}

fb_code db_job_insert(db_conn *c, const db_new_job *nj, int64_t *id, fb_err *err)
{
    new_job_params p;
    PGresult *res = NULL;
    fb_code rc = new_job_params_fill(nj, &p, err);

    if (!rc)
        rc = db_exec_prep(c, &st_insert, 10, p.v, &res, err);
    if (!rc)
        rc = db_get_i64(res, 0, 0, id, err);
    PQclear(res);
    return rc;
}

fb_code db_job_create(db_conn *c, const db_new_job *nj, db_job *out, fb_err *err)
{
    new_job_params p;
    PGresult *res = NULL;
    fb_code rc = new_job_params_fill(nj, &p, err);

    memset(out, 0, sizeof *out);
    if (!rc)
        rc = db_exec_prep(c, &st_create, 10, p.v, &res, err);
    if (!rc && PQntuples(res) != 1)
        rc = fb_err_set(err, FB_EINTERNAL, NULL, "job create returned %d rows", PQntuples(res));
    if (!rc)
        rc = row_to_job(res, 0, out, err);
    PQclear(res);
    return rc;
}

fb_code db_job_find_idem(db_conn *c, int64_t owner_id, const db_idem *idem, db_job *out,
                         db_idem_outcome *how, fb_err *err)
{
    PGresult *res = NULL;
    fb_code rc = db_idem_row(c, &st_get_idem, owner_id, idem, IDEM_HASH_COLUMN, &res, how, err);

    memset(out, 0, sizeof *out);
    if (!rc && *how == DB_IDEM_REPLAY)
        rc = row_to_job(res, 0, out, err);
    PQclear(res);
    return rc;
}

fb_code db_job_create_idem(db_conn *c, const db_new_job *nj, const db_idem *idem, db_job *out,
                           db_idem_outcome *how, fb_err *err)
{
    new_job_params p;
    PGresult *res = NULL;
    fb_code rc = new_job_params_fill(nj, &p, err);

    memset(out, 0, sizeof *out);
    *how = DB_IDEM_NEW;
    /* Twice at most: a key whose first job was rolled back between our
     * insert and our read is free again. */
    for (int pass = 0; !rc && pass < 2; pass++) {
        const char *v[12];
        memcpy(v, p.v, sizeof p.v);
        v[10] = idem->key;
        v[11] = idem->hash;
        rc = db_exec_prep(c, &st_create_idem, 12, v, &res, err);
        if (!rc && PQntuples(res) == 1) { /* made it */
            rc = row_to_job(res, 0, out, err);
            PQclear(res);
            return rc;
        }
        PQclear(res);
        res = NULL;
        if (rc)
            return rc;
        rc = db_job_find_idem(c, nj->owner_id, idem, out, how, err); /* the key's first job */
        if (rc != FB_ENOTFOUND)
            return rc;
        rc = FB_OK;
    }
    return rc ? rc
              : fb_err_set(err, FB_EINTERNAL, NULL, "job create: key %s neither free nor found",
                           idem->key);
}

/* ---- group commit (db_job_create_many) ---- */

/* The batch of st_create_many as PostgreSQL array literals ("{...}"), one per
 * column of db_new_job, all within DB_JOB_BATCH_BYTES together. */
#define BATCH_COLUMNS 10
typedef struct batch_arrays {
    char *a[BATCH_COLUMNS];
    size_t len[BATCH_COLUMNS], cap[BATCH_COLUMNS], total;
} batch_arrays;

static void batch_arrays_free(batch_arrays *b)
{
    for (int i = 0; i < BATCH_COLUMNS; i++)
        free(b->a[i]);
}

/* Makes room for more bytes in array i; FB_ETOOBIG past the batch limit. */
static fb_code arr_reserve(batch_arrays *b, int i, size_t more, fb_err *err)
{
    if (more > DB_JOB_BATCH_BYTES - b->total)
        return fb_err_set(err, FB_ETOOBIG, NULL, "job batch over %u bytes", DB_JOB_BATCH_BYTES);
    if (b->len[i] + more <= b->cap[i])
        return FB_OK;
    size_t cap = b->cap[i] ? b->cap[i] : 256;
    while (cap < b->len[i] + more)
        cap *= 2;
    char *grown = realloc(b->a[i], cap);
    if (!grown)
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    b->a[i] = grown;
    b->cap[i] = cap;
    return FB_OK;
}

/* Appends s to array i as a quoted element ('"' and '\' escaped), preceded by
 * c ('{' for the first element, else ','). */
static fb_code arr_put_text(batch_arrays *b, int i, char c, const char *s, fb_err *err)
{
    size_t n = strlen(s);
    fb_code rc = arr_reserve(b, i, 2 * n + 3, err);
    if (rc)
        return rc;
    char *o = b->a[i] + b->len[i], *start = o;
    *o++ = c;
    *o++ = '"';
    for (size_t k = 0; k < n; k++) {
        if (s[k] == '"' || s[k] == '\\')
            *o++ = '\\';
        *o++ = s[k];
    }
    *o++ = '"';
    b->len[i] += (size_t)(o - start);
    b->total += (size_t)(o - start);
    return FB_OK;
}

static fb_code arr_put_int(batch_arrays *b, int i, char c, int64_t v, fb_err *err)
{
    fb_code rc = arr_reserve(b, i, 24, err);
    if (rc)
        return rc;
    int w = snprintf(b->a[i] + b->len[i], 24, "%c%" PRId64, c, v);
    b->len[i] += (size_t)w;
    b->total += (size_t)w;
    return FB_OK;
}

/* Fills b with the m jobs nj[idx[0..m-1]], in that order, and closes the arrays. */
static fb_code batch_arrays_fill(batch_arrays *b, const db_new_job *const *nj, const int *idx,
                                 int m, fb_err *err)
{
    fb_code rc = FB_OK;
    memset(b, 0, sizeof *b);
    for (int k = 0; k < m && !rc; k++) {
        const db_new_job *j = nj[idx[k]];
        const char *texts[] = {j->spec_json, j->workload, j->engine, j->device, j->dtype};
        const int64_t ints[] = {j->batch_size, j->priority, j->max_attempts, j->timeout_s,
                                j->owner_id};
        char c = k ? ',' : '{';
        for (int i = 0; i < 5 && !rc; i++)
            rc = arr_put_text(b, i, c, texts[i], err);
        for (int i = 0; i < 5 && !rc; i++)
            rc = arr_put_int(b, 5 + i, c, ints[i], err);
    }
    for (int i = 0; i < BATCH_COLUMNS && !rc; i++) {
        rc = arr_reserve(b, i, 2, err);
        if (!rc)
            memcpy(b->a[i] + b->len[i], "}", 2); /* the NUL is not counted in len */
    }
    return rc;
}

/* The jobs of a batch in one statement.  Ids are drawn from the sequence in src
 * (materialized once), so each returned row names the input it came from (ord,
 * 1-based) whatever order INSERT ... RETURNING gives.  One NOTIFY for the batch:
 * n is a CTE with a volatile function, evaluated once. */
static const db_stmt st_create_many = {
    "job create many",
    "WITH src AS MATERIALIZED ("
    " SELECT nextval('jobs_id_seq') AS id, u.*"
    " FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],"
    "             $6::integer[], $7::integer[], $8::integer[], $9::integer[], $10::bigint[])"
    "  WITH ORDINALITY AS u(spec, workload, engine, device, dtype, batch_size, priority,"
    "                       max_attempts, timeout_s, owner_id, ord)),"
    " j AS ("
    " INSERT INTO jobs (id, spec, workload, engine, device, dtype, batch_size, priority,"
    "                   max_attempts, timeout_s, owner_id)"
    " SELECT id, spec::jsonb, workload, engine, device, dtype, batch_size, priority,"
    "        max_attempts, timeout_s, NULLIF(owner_id, 0) FROM src"
    " RETURNING *),"
    " n AS (SELECT pg_notify('fb_jobs', max(id)::text) FROM j)"
    " SELECT " JOB_COLUMNS ", src.ord"
    " FROM j JOIN src ON src.id = j.id LEFT JOIN results r ON false CROSS JOIN n"
    " ORDER BY src.ord",
    false}; /* a retry could insert the jobs twice */

#define ORD_COLUMN 15 /* after JOB_COLUMNS */

/* Reads the committed rows of st_create_many into out[idx[...]].  A row that
 * cannot be read fails alone; a job with no row fails with FB_EINTERNAL (it
 * may be stored: never insert it again). */
static void batch_read(const PGresult *res, const int *idx, int m, db_job_outcome *out)
{
    int rows = PQntuples(res);
    bool seen[DB_JOB_BATCH_MAX] = {false};

    for (int k = 0; k < rows; k++) {
        fb_err err;
        int ord = 0;
        if (db_get_int(res, k, ORD_COLUMN, &ord, &err) != FB_OK || ord < 1 || ord > m ||
            seen[ord - 1]) {
            fb_error("db: job create many: row %d has a bad ordinal", k);
            continue;
        }
        db_job_outcome *o = &out[idx[ord - 1]];
        seen[ord - 1] = true;
        o->rc = row_to_job(res, k, &o->job, &o->err);
    }
    for (int k = 0; k < m; k++)
        if (!seen[k])
            out[idx[k]].rc = fb_err_set(&out[idx[k]].err, FB_EINTERNAL, NULL,
                                        "job create many: no row for job %d of %d", k + 1, m);
}

/* The m jobs nj[idx[...]] in one statement.  FB_OK once it committed (each
 * outcome then set by batch_read); else the error that rolled it back (or kept
 * it from being sent), and no outcome is set. */
static fb_code create_batch(db_conn *c, const db_new_job *const *nj, const int *idx, int m,
                            db_job_outcome *out, fb_err *err)
{
    batch_arrays b;
    PGresult *res = NULL;
    fb_code rc = batch_arrays_fill(&b, nj, idx, m, err);

    if (!rc)
        rc = db_exec_prep(c, &st_create_many, BATCH_COLUMNS, (const char *const *)b.a, &res, err);
    if (!rc)
        batch_read(res, idx, m, out);
    PQclear(res);
    batch_arrays_free(&b);
    return rc;
}

/* Each job of nj[idx[...]] alone, in its own transaction.  Stops at a broken
 * connection: the jobs left get its error, and FB_EUNAVAIL is returned. */
static fb_code create_each(db_conn *c, const db_new_job *const *nj, const int *idx, int m,
                           db_job_outcome *out, fb_err *err)
{
    for (int k = 0; k < m; k++) {
        db_job_outcome *o = &out[idx[k]];
        o->rc = db_job_create(c, nj[idx[k]], &o->job, &o->err);
        if (o->rc != FB_EUNAVAIL)
            continue;
        for (int rest = k + 1; rest < m; rest++) {
            out[idx[rest]].rc = FB_EUNAVAIL;
            out[idx[rest]].err = o->err;
        }
        *err = o->err;
        return FB_EUNAVAIL;
    }
    return FB_OK;
}

fb_code db_job_create_many(db_conn *c, const db_new_job *const *nj, int n, db_job_outcome *out,
                           fb_err *err)
{
    int idx[DB_JOB_BATCH_MAX], m = 0;
    new_job_params p;
    fb_code rc;

    if (n < 1 || n > DB_JOB_BATCH_MAX)
        return fb_err_set(err, FB_EINVAL, NULL, "job create many: n must be 1..%d, got %d",
                          DB_JOB_BATCH_MAX, n);
    /* A job missing a field fails alone, before anything is sent. */
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].rc = new_job_params_fill(nj[i], &p, &out[i].err);
        if (!out[i].rc)
            idx[m++] = i;
    }
    if (m <= 1) /* one job (the usual case at low load) takes the one-row statement */
        return create_each(c, nj, idx, m, out, err);
    rc = create_batch(c, nj, idx, m, out, err);
    if (rc == FB_OK)
        return FB_OK;
    if (rc == FB_EUNAVAIL) {
        for (int k = 0; k < m; k++) {
            out[idx[k]].rc = rc;
            out[idx[k]].err = *err;
        }
        return rc;
    }
    /* Rolled back on some job's input (or too big to send as one): each alone,
     * so only the jobs at fault fail. */
    fb_warn("db: job create many: batch of %d failed (%s); creating each alone", m,
            fb_code_name(rc));
    fb_err_clear(err);
    return create_each(c, nj, idx, m, out, err);
}

fb_code db_job_get(db_conn *c, int64_t id, db_job *out, fb_err *err)
{
    char idt[24];
    const char *params[] = {db_i64_text(id, idt, sizeof idt)};
    PGresult *res = NULL;
    memset(out, 0, sizeof *out);
    fb_code rc = db_exec_prep(c, &st_get, 1, params, &res, err);
    if (rc)
        goto out;
    if (PQntuples(res) == 0) {
        rc = fb_err_set(err, FB_ENOTFOUND, NULL, "no job %s", idt);
        goto out;
    }
    rc = row_to_job(res, 0, out, err);
out:
    PQclear(res);
    return rc;
}

/* Copies the first n rows of res into a new array *items. */
static fb_code rows_to_jobs(const PGresult *res, int n, db_job **items, fb_err *err)
{
    fb_code rc = FB_OK;
    db_job *arr = calloc(n > 0 ? (size_t)n : 1, sizeof *arr);
    if (!arr)
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    int done = 0;
    for (; done < n && !rc; done++)
        rc = row_to_job(res, done, &arr[done], err);
    if (rc) {
        for (int i = 0; i < done; i++)
            db_job_free(&arr[i]);
        free(arr);
        return rc;
    }
    *items = arr;
    return FB_OK;
}

fb_code db_job_list(db_conn *c, const db_job_filter *f, db_job **items, int *n,
                    int64_t *next_before, fb_err *err)
{
    char before[24], limit[16], owner[24];
    PGresult *res = NULL;
    fb_code rc;

    *items = NULL;
    *n = 0;
    *next_before = 0;
    if (f->limit < 1 || f->limit > LIST_MAX)
        return fb_err_set(err, FB_EINVAL, "limit", "must be 1..%d, got %d", LIST_MAX, f->limit);
    if (!f->label_key != !f->label_value)
        return fb_err_set(err, FB_EINVAL, "label", "needs both a key and a value");
    /* One row more than asked tells whether another page exists. */
    snprintf(limit, sizeof limit, "%d", f->limit + 1);
    const char *params[] = {f->state,
                            f->workload,
                            f->engine,
                            f->device,
                            f->label_key,
                            f->label_value,
                            db_i64_text(f->before_id > 0 ? f->before_id : 0, before, sizeof before),
                            limit,
                            db_i64_text(f->owner_id > 0 ? f->owner_id : 0, owner, sizeof owner)};
    rc = db_exec(c, &st_list, 9, params, &res, err);
    if (rc)
        goto out;
    int rows = PQntuples(res);
    int take = rows > f->limit ? f->limit : rows;
    rc = rows_to_jobs(res, take, items, err);
    if (rc)
        goto out;
    *n = take;
    if (rows > f->limit)
        *next_before = (*items)[take - 1].id;
out:
    PQclear(res);
    return rc;
}

fb_code db_job_cancel(db_conn *c, int64_t id, fb_err *err)
{
    char idt[24];
    const char *params[] = {db_i64_text(id, idt, sizeof idt)};
    PGresult *res = NULL;
    fb_code rc = db_exec(c, &st_cancel, 1, params, &res, err);
    if (rc)
        goto out;
    if (PQntuples(res) == 0) {
        rc = fb_err_set(err, FB_ENOTFOUND, NULL, "no job %s", idt);
        goto out;
    }
    const char *state = PQgetvalue(res, 0, 0);
    if (strcmp(state, "queued") != 0 && strcmp(state, "running") != 0)
        rc = fb_err_set(err, FB_ECONFLICT, NULL, "job %s is %s already", idt, state);
out:
    PQclear(res);
    return rc;
}

fb_code db_job_kernels(db_conn *c, int64_t id, const char *variant, char **rows_json, fb_err *err)
{
    char idt[24];
    const char *params[] = {db_i64_text(id, idt, sizeof idt), variant};
    PGresult *res = NULL;
    *rows_json = NULL;
    fb_code rc = db_exec(c, &st_kernels, 2, params, &res, err);
    if (rc)
        goto out;
    if (PQgetvalue(res, 0, 0)[0] != 't') {
        rc = fb_err_set(err, FB_ENOTFOUND, NULL, "no job %s", idt);
        goto out;
    }
    rc = db_get_text(res, 0, 1, rows_json, err);
out:
    PQclear(res);
    return rc;
}
