/* db_suites: suites of jobs submitted as one unit (db_results.h). */
#include "db_int.h"
#include "db_results.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define SUITE_LIST_MAX 200

/* $3 is a JSON array of jobs: {spec, workload, engine, device, dtype, batch_size,
 * priority, max_attempts, timeout_s}; $4 the owner (0 = none) of the suite and
 * every job; one statement, so all or nothing. */
static const db_stmt st_insert = {
    "suite insert",
    "WITH s AS (INSERT INTO suites (name, spec, owner_id, idem_key, idem_hash)"
    "  VALUES ($1, $2::jsonb, NULLIF($4::bigint, 0), $5, $6)"
    "  ON CONFLICT ((COALESCE(owner_id, 0)), idem_key) WHERE idem_key IS NOT NULL DO NOTHING"
    "  RETURNING id),"
    " j AS (INSERT INTO jobs (spec, workload, engine, device, dtype, batch_size, priority,"
    "                         max_attempts, timeout_s, suite_id, owner_id)"
    "  SELECT e -> 'spec', e ->> 'workload', e ->> 'engine', e ->> 'device', e ->> 'dtype',"
    "   (e ->> 'batch_size')::integer, (e ->> 'priority')::integer,"
    "   (e ->> 'max_attempts')::integer, (e ->> 'timeout_s')::integer, s.id,"
    "   NULLIF($4::bigint, 0)"
    "  FROM s, jsonb_array_elements($3::jsonb) WITH ORDINALITY x(e, ord) ORDER BY x.ord"
    "  RETURNING id)"
    " SELECT (SELECT id FROM s), (SELECT count(*) FROM j), pg_notify('fb_jobs', 'suite')",
    false}; /* a retry could insert the suite twice: only a key prevents it */

/* The suite an owner made under a key, and its request's hash. */
static const db_stmt st_get_idem = {"suite get idem",
                                    "SELECT id, idem_hash FROM suites"
                                    " WHERE COALESCE(owner_id, 0) = $1::bigint AND idem_key = $2",
                                    true};

static const db_stmt st_get = {
    "suite get",
    "SELECT jsonb_build_object('id', s.id, 'name', s.name, 'spec', s.spec,"
    "  'owner', (SELECT u.name FROM users u WHERE u.id = s.owner_id),"
    "  'created_at', " DB_TS(
        "s.created_at") ","
                        "  'jobs', COALESCE((SELECT jsonb_agg(jsonb_build_object("
                        "    'id', j.id, 'state', j.state, 'workload', j.workload, 'batch_size', "
                        "j.batch_size,"
                        "    'device', j.device, 'engine', j.engine, 'progress', j.progress, "
                        "'error', j.error,"
                        "    'result', r.result, 'created_at', " DB_TS(
                            "j.created_at") ","
                                            "    'finished_at', " DB_TS(
                                                "j.finished_at") ") ORDER BY j.id)"
                                                                 "   FROM jobs j LEFT JOIN results "
                                                                 "r ON r.job_id = j.id WHERE "
                                                                 "j.suite_id = s.id),"
                                                                 "   '[]'::jsonb))::text"
                                                                 " FROM suites s WHERE s.id = "
                                                                 "$1::bigint",
    true};

static const db_stmt st_list = {
    "suite list",
    "SELECT s.id, jsonb_build_object('id', s.id, 'name', s.name,"
    "  'owner', (SELECT u.name FROM users u WHERE u.id = s.owner_id),"
    "  'created_at', " DB_TS(
        "s.created_at") ", 'jobs', c.n, 'states', c.states,"
                        "  'device', COALESCE(s.spec ->> 'device',"
                        "   (SELECT device FROM jobs WHERE suite_id = s.id ORDER BY id LIMIT 1)), "
                        "'device_name', c.device_name)::text"
                        " FROM suites s, LATERAL (SELECT count(*) AS n,"
                        "   COALESCE((SELECT jsonb_object_agg(state, k) FROM (SELECT state, "
                        "count(*) AS k"
                        "     FROM jobs WHERE suite_id = s.id GROUP BY state) g), '{}'::jsonb) AS "
                        "states,"
                        "   (SELECT max(rs.device_name) FROM result_rows rr JOIN result_series rs"
                        "     ON rs.ident = rr.ident JOIN jobs jj ON jj.id = rr.job_id"
                        "     WHERE jj.suite_id = s.id) AS device_name"
                        "   FROM jobs WHERE suite_id = s.id) c"
                        " WHERE ($1::bigint = 0 OR s.id < $1::bigint)"
                        "   AND ($3::bigint = 0 OR s.owner_id = $3::bigint)"
                        " ORDER BY s.id DESC LIMIT $2::integer",
    true};

/* One job of a suite as the JSON element st_insert reads; false on ENOMEM. */
static bool job_element(cJSON *arr, const db_new_job *nj)
{
    cJSON *o = cJSON_CreateObject(), *spec = cJSON_Parse(nj->spec_json);
    if (!o || !spec || !cJSON_AddItemToObject(o, "spec", spec)) {
        cJSON_Delete(spec);
        cJSON_Delete(o);
        return false;
    }
    bool ok = cJSON_AddStringToObject(o, "workload", nj->workload) &&
              cJSON_AddStringToObject(o, "engine", nj->engine) &&
              cJSON_AddStringToObject(o, "device", nj->device) &&
              cJSON_AddStringToObject(o, "dtype", nj->dtype) &&
              cJSON_AddNumberToObject(o, "batch_size", nj->batch_size) &&
              cJSON_AddNumberToObject(o, "priority", nj->priority) &&
              cJSON_AddNumberToObject(o, "max_attempts", nj->max_attempts) &&
              cJSON_AddNumberToObject(o, "timeout_s", nj->timeout_s);
    if (!ok || !cJSON_AddItemToArray(arr, o)) {
        cJSON_Delete(o);
        return false;
    }
    return true;
}

/* The jobs as one JSON array text (caller frees). */
static fb_code jobs_text(const db_new_job *jobs, int n, char **out, fb_err *err)
{
    cJSON *arr = cJSON_CreateArray();
    *out = NULL;
    for (int i = 0; arr && i < n; i++) {
        if (!jobs[i].spec_json || !jobs[i].workload || !jobs[i].engine || !jobs[i].device ||
            !jobs[i].dtype) {
            cJSON_Delete(arr);
            return fb_err_set(err, FB_EINVAL, NULL, "suite job %d lacks a required field", i);
        }
        if (!job_element(arr, &jobs[i])) {
            cJSON_Delete(arr);
            arr = NULL;
        }
    }
    *out = arr ? cJSON_PrintUnformatted(arr) : NULL;
    cJSON_Delete(arr);
    return *out ? FB_OK : fb_err_set(err, FB_ENOMEM, NULL, "out of memory encoding suite jobs");
}

fb_code db_suite_find_idem(db_conn *c, int64_t owner_id, const db_idem *idem, int64_t *id,
                           db_idem_outcome *how, fb_err *err)
{
    PGresult *res = NULL;
    fb_code rc = db_idem_row(c, &st_get_idem, owner_id, idem, 1, &res, how, err);

    *id = 0;
    if (!rc)
        rc = db_get_i64(res, 0, 0, id, err);
    PQclear(res);
    return rc;
}

fb_code db_suite_insert(db_conn *c, const char *name, const char *spec_json, const db_new_job *jobs,
                        int n, const db_idem *idem, int64_t *id, db_idem_outcome *how, fb_err *err)
{
    char *arr = NULL;
    PGresult *res = NULL;
    fb_code rc;

    *how = DB_IDEM_NEW;
    *id = 0;
    if (n < 1 || n > DB_SUITE_JOBS_MAX)
        return fb_err_set(err, FB_EINVAL, NULL, "a suite holds 1..%d jobs, got %d",
                          DB_SUITE_JOBS_MAX, n);
    rc = jobs_text(jobs, n, &arr, err);
    if (rc)
        goto out;
    char owner[24];
    snprintf(owner, sizeof owner, "%" PRId64, jobs[0].owner_id);
    const char *params[] = {name ? name : "",        spec_json ? spec_json : "{}", arr, owner,
                            idem ? idem->key : NULL, idem ? idem->hash : NULL};
    rc = db_exec(c, &st_insert, 6, params, &res, err);
    if (!rc && !PQgetisnull(res, 0, 0)) {
        rc = db_get_i64(res, 0, 0, id, err);
        goto out;
    }
    PQclear(res);
    res = NULL;
    if (rc)
        goto out;
    /* the owner has the key: its first suite, the same request or not */
    rc = idem ? db_suite_find_idem(c, jobs[0].owner_id, idem, id, how, err) : FB_ENOTFOUND;
    if (rc == FB_ENOTFOUND)
        rc = fb_err_set(err, FB_EINTERNAL, NULL, "suite insert: key neither free nor found");
out:
    PQclear(res);
    free(arr);
    return rc;
}

fb_code db_suite_get(db_conn *c, int64_t id, char **json, fb_err *err)
{
    char idt[24];
    const char *params[] = {db_i64_text(id, idt, sizeof idt)};
    PGresult *res = NULL;
    *json = NULL;
    fb_code rc = db_exec(c, &st_get, 1, params, &res, err);
    if (rc)
        goto out;
    if (PQntuples(res) == 0) {
        rc = fb_err_set(err, FB_ENOTFOUND, NULL, "no suite %s", idt);
        goto out;
    }
    rc = db_get_text(res, 0, 0, json, err);
out:
    PQclear(res);
    return rc;
}

/* Joins the second column of the first n rows into a JSON array text. */
static fb_code rows_array(const PGresult *res, int n, int col, char **out, fb_err *err)
{
    size_t total = 3;
    for (int i = 0; i < n; i++)
        total += (size_t)PQgetlength(res, i, col) + 1;
    if (total > DB_TEXT_MAX)
        return fb_err_set(err, FB_ETOOBIG, NULL, "list over %u bytes", DB_TEXT_MAX);
    char *buf = malloc(total), *p = buf;
    if (!buf)
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    *p++ = '[';
    for (int i = 0; i < n; i++) {
        size_t len = (size_t)PQgetlength(res, i, col);
        if (i)
            *p++ = ',';
        memcpy(p, PQgetvalue(res, i, col), len);
        p += len;
    }
    *p++ = ']';
    *p = '\0';
    *out = buf;
    return FB_OK;
}

fb_code db_suite_list(db_conn *c, int limit, int64_t before, int64_t owner_id, char **items_json,
                      int64_t *next_before, fb_err *err)
{
    char bt[24], lt[16], ot[24];
    PGresult *res = NULL;
    *items_json = NULL;
    *next_before = 0;
    if (limit < 1 || limit > SUITE_LIST_MAX)
        return fb_err_set(err, FB_EINVAL, "limit", "must be 1..%d, got %d", SUITE_LIST_MAX, limit);
    snprintf(lt, sizeof lt, "%d", limit + 1);
    const char *params[] = {db_i64_text(before > 0 ? before : 0, bt, sizeof bt), lt,
                            db_i64_text(owner_id > 0 ? owner_id : 0, ot, sizeof ot)};
    fb_code rc = db_exec(c, &st_list, 3, params, &res, err);
    if (rc)
        goto out;
    int rows = PQntuples(res), take = rows > limit ? limit : rows;
    rc = rows_array(res, take, 1, items_json, err);
    if (!rc && rows > limit)
        rc = db_get_i64(res, take - 1, 0, next_before, err);
out:
    PQclear(res);
    return rc;
}
