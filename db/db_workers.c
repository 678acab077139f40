/* db_workers: worker registration and heartbeats, GET /workers and /workloads
 * bodies (built in SQL), and the figures /metrics reports. */
#include "db_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A worker is alive while it heartbeats within $1 seconds and has not stopped. */
#define LIVE "state <> 'stopped' AND last_heartbeat >= now() - $1::integer * interval '1 second'"
/* Whether a worker drains, asked to or on its own; a stopped one no longer does. */
#define DRAINING "(state <> 'stopped' AND (drain_requested OR state = 'draining'))"

static const db_stmt st_register = {
    "worker register",
    "INSERT INTO workers (id, host, device, engines, workloads, state, current_job,"
    "                     started_at, last_heartbeat)"
    " VALUES ($1, $2, $3::jsonb, $4::jsonb, $5::jsonb, 'idle', NULL, now(), now())"
    " ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, device = EXCLUDED.device,"
    "  engines = EXCLUDED.engines, workloads = EXCLUDED.workloads, state = 'idle',"
    "  current_job = NULL, started_at = now(), last_heartbeat = now(), drain_requested = false",
    true};

static const db_stmt st_heartbeat = {
    "worker heartbeat",
    "UPDATE workers SET state = $2, current_job = NULLIF($3::bigint, 0), last_heartbeat = now()"
    " WHERE id = $1 RETURNING drain_requested",
    true};

/* A stopped worker stays "stopped"; any other that went quiet is "lost". */
static const db_stmt st_list = {
    "worker list",
    "SELECT COALESCE(jsonb_agg(jsonb_build_object("
    "  'id', id, 'host', host, 'device', device, 'engines', engines,"
    "  'state', CASE WHEN state = 'stopped' OR " LIVE " THEN state ELSE 'lost' END,"
    "  'current_job', current_job, 'draining', " DRAINING ","
    "  'started_at', " DB_TS("started_at") ", 'last_heartbeat', " DB_TS(
        "last_heartbeat") ")"
                          "  ORDER BY id), '[]'::jsonb)::text FROM workers",
    true};

/* One entry per (name, engine) from every registration ever kept (workers'
 * rows stay after they stop) and the servers' built-in catalogs: the fields of
 * the best source's info (a live worker first, then the most recently heard),
 * and three device lists: "devices" over all sources, "registered_devices"
 * over workers only (the default device follows them, docs/API.md), "alive_devices"
 * over live workers.  A worker adds only its own device kind: a CPU worker
 * offers nothing on "cuda"; a built-in catalog names its devices itself.
 * "job_memory_bytes": per device, the most a job may use on the largest worker
 * that registered it (srv_catalog's admission; null when none said). */
#define CATALOG_DEVICES(cond)                                                                      \
    "COALESCE((SELECT jsonb_agg(DISTINCT d.dev ORDER BY d.dev) FROM d"                             \
    " WHERE d.name = g.name AND d.engine = g.engine" cond "), '[]'::jsonb)"
/* One clause a line reads better than clang-format's packing of the macros. */
/* clang-format off */
static const db_stmt st_catalog = {
    "workload catalog",
    "WITH s AS (SELECT l.id, l.last_heartbeat AS seen, l.device ->> 'kind' AS kind,"
    "    (" LIVE ") AS live, true AS reg, x.info,"
    "    CASE WHEN jsonb_typeof(l.device -> 'job_memory_bytes') = 'number'"
    "      THEN (l.device ->> 'job_memory_bytes')::float8 END AS budget"
    "  FROM workers l, jsonb_array_elements(l.workloads) x(info)"
    "  UNION ALL SELECT NULL, b.updated_at, NULL, false, false, x.info, NULL"
    "  FROM catalog_builtin b, jsonb_array_elements(b.workloads) x(info)),"
    " w AS (SELECT s.*, s.info ->> 'name' AS name, COALESCE(s.info ->> 'engine', '') AS engine"
    "  FROM s WHERE jsonb_typeof(s.info) = 'object' AND s.info ? 'name'),"
    " d AS (SELECT w.name, w.engine, w.live, w.reg, w.budget, dev.value AS dev FROM w,"
    "   jsonb_array_elements_text(CASE WHEN jsonb_typeof(w.info -> 'devices') = 'array'"
    "     THEN w.info -> 'devices' ELSE '[]'::jsonb END) dev(value)"
    "   WHERE w.kind IS NULL OR dev.value = w.kind),"
    " g AS (SELECT DISTINCT ON (name, engine) name, engine, info FROM w"
    "   ORDER BY name, engine, live DESC, reg DESC, seen DESC, id)"
    " SELECT COALESCE(jsonb_agg(g.info || jsonb_build_object("
    "   'devices', " CATALOG_DEVICES("") ","
    "   'registered_devices', " CATALOG_DEVICES(" AND d.reg") ","
    "   'alive_devices', " CATALOG_DEVICES(" AND d.live") ","
    "   'job_memory_bytes', (SELECT jsonb_object_agg(m.dev, m.budget) FROM"
    "     (SELECT d.dev, max(d.budget) AS budget FROM d WHERE d.name = g.name"
    "       AND d.engine = g.engine AND d.budget IS NOT NULL GROUP BY d.dev) m))"
    "   ORDER BY g.name, g.engine), '[]'::jsonb)::text FROM g",
    true};
/* clang-format on */

static const db_stmt st_stats = {
    "stats",
    "SELECT count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'running'),"
    " count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'failed'),"
    " count(*) FILTER (WHERE state = 'canceled'),"
    " COALESCE(EXTRACT(EPOCH FROM now() - min(created_at) FILTER (WHERE state = 'queued')),"
    "   0)::float8,"
    " (SELECT count(*) FROM workers WHERE " LIVE ")"
    " FROM jobs",
    true};

fb_code db_worker_register(db_conn *c, const db_worker_reg *w, fb_err *err)
{
    const char *params[] = {w->id, w->host, w->device_json, w->engines_json, w->workloads_json};
    PGresult *res = NULL;
    if (!w->id || !*w->id || !w->host || !w->device_json || !w->engines_json || !w->workloads_json)
        return fb_err_set(err, FB_EINVAL, NULL, "worker register: every field is required");
    fb_code rc = db_exec(c, &st_register, 5, params, &res, err);
    PQclear(res);
    return rc;
}

fb_code db_worker_heartbeat(db_conn *c, const char *id, const char *state, int64_t current_job,
                            bool *drain, fb_err *err)
{
    char job[24];
    const char *params[] = {id, state, db_i64_text(current_job, job, sizeof job)};
    PGresult *res = NULL;
    fb_code rc = db_exec(c, &st_heartbeat, 3, params, &res, err);
    if (!rc && PQntuples(res) == 0)
        rc = fb_err_set(err, FB_ENOTFOUND, NULL, "no worker '%s' (register first)", id);
    if (!rc && drain)
        *drain = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return rc;
}

/* Only a live worker can drain; the answer says which case a miss was. */
static const db_stmt st_drain = {
    "worker drain",
    "WITH u AS (UPDATE workers SET drain_requested = true WHERE id = $2 AND " LIVE " RETURNING id)"
    " SELECT (SELECT count(*) FROM u),"
    "  (SELECT CASE WHEN state = 'stopped' THEN 'stopped' ELSE 'lost' END"
    "   FROM workers WHERE id = $2)",
    true};

fb_code db_worker_drain(db_conn *c, const char *id, int stale_s, fb_err *err)
{
    char stale[16];
    const char *params[] = {stale, id};
    PGresult *res = NULL;
    fb_code rc;

    if (stale_s < 1)
        return fb_err_set(err, FB_EINVAL, "stale_s", "must be >= 1, got %d", stale_s);
    snprintf(stale, sizeof stale, "%d", stale_s);
    rc = db_exec(c, &st_drain, 2, params, &res, err);
    if (!rc && strcmp(PQgetvalue(res, 0, 0), "1") != 0) {
        if (PQgetisnull(res, 0, 1))
            rc = fb_err_set(err, FB_ENOTFOUND, NULL, "no worker '%s'", id);
        else
            rc = fb_err_set(err, FB_ECONFLICT, NULL, "worker '%s' is %s: there is nothing to drain",
                            id, PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    return rc;
}

static const db_stmt st_builtin = {
    "catalog builtin",
    "INSERT INTO catalog_builtin (source, workloads, updated_at) VALUES ($1, $2::jsonb, now())"
    " ON CONFLICT (source) DO UPDATE SET workloads = EXCLUDED.workloads, updated_at = now()",
    true};

fb_code db_catalog_builtin_put(db_conn *c, const char *source, const char *workloads_json,
                               fb_err *err)
{
    const char *params[] = {source, workloads_json};
    PGresult *res = NULL;
    fb_code rc = db_exec(c, &st_builtin, 2, params, &res, err);
    PQclear(res);
    return rc;
}

static const db_stmt st_lock_gpu = {
    "worker lock gpu", "SELECT pg_try_advisory_lock(hashtextextended('fusionbench-gpu:' || $1, 0))",
    true};

fb_code db_worker_lock_gpu(db_conn *c, const char *uuid, bool *got, fb_err *err)
{
    const char *params[] = {uuid};
    PGresult *res = NULL;
    *got = false;
    if (!uuid || !*uuid)
        return fb_err_set(err, FB_EINVAL, "uuid", "a GPU UUID is required");
    fb_code rc = db_exec(c, &st_lock_gpu, 1, params, &res, err);
    if (!rc)
        *got = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return rc;
}

/* Runs st (one text row, one column, $1 = stale_s) into *json. */
static fb_code json_query(db_conn *c, const db_stmt *st, int stale_s, char **json, fb_err *err)
{
    char stale[16];
    const char *params[] = {stale};
    PGresult *res = NULL;
    *json = NULL;
    if (stale_s < 1)
        return fb_err_set(err, FB_EINVAL, "stale_s", "must be >= 1, got %d", stale_s);
    snprintf(stale, sizeof stale, "%d", stale_s);
    fb_code rc = db_exec(c, st, 1, params, &res, err);
    if (!rc)
        rc = db_get_text(res, 0, 0, json, err);
    PQclear(res);
    return rc;
}

fb_code db_worker_list(db_conn *c, int stale_s, char **items_json, fb_err *err)
{
    return json_query(c, &st_list, stale_s, items_json, err);
}

fb_code db_workload_catalog(db_conn *c, int stale_s, char **items_json, fb_err *err)
{
    return json_query(c, &st_catalog, stale_s, items_json, err);
}

static fb_code get_double(const PGresult *res, int col, double *out, fb_err *err)
{
    const char *s = PQgetvalue(res, 0, col);
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end)
        return fb_err_set(err, FB_EINTERNAL, NULL, "stats column %d is not a number: '%s'", col, s);
    *out = v;
    return FB_OK;
}

fb_code db_get_stats(db_conn *c, int stale_s, db_stats *out, fb_err *err)
{
    char stale[16];
    const char *params[] = {stale};
    PGresult *res = NULL;
    memset(out, 0, sizeof *out);
    if (stale_s < 1)
        return fb_err_set(err, FB_EINVAL, "stale_s", "must be >= 1, got %d", stale_s);
    snprintf(stale, sizeof stale, "%d", stale_s);
    fb_code rc = db_exec(c, &st_stats, 1, params, &res, err);
    for (int i = 0; !rc && i < 5; i++)
        rc = db_get_i64(res, 0, i, &out->jobs_by_state[i], err);
    if (!rc)
        rc = get_double(res, 5, &out->oldest_queued_age_s, err);
    if (!rc)
        rc = db_get_i64(res, 0, 6, &out->workers_alive, err);
    PQclear(res);
    return rc;
}
