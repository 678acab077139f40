/* db_results: the results endpoint's series and the raw samples behind its
 * regression flags (db_results.h). */
#include "db_int.h"
#include "db_results.h"
#include "fb_spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLES_MAX 1000000 /* more samples than any job keeps */

/* The page of series: $1..$6 filters, $7 since, $8 points, $9 limit, $10 after.
 * The lateral subquery reads the newest points of each series through
 * result_rows_ident_idx, so a page costs (series x points) index reads however
 * long the history is.  json, not jsonb: the body is built once and sent, and
 * json_build_object skips jsonb's key sorting (half the statement's time). */
static const db_stmt st_query = {
    "results query",
    "WITH page AS (SELECT s.* FROM result_series s"
    "  WHERE ($1::text IS NULL OR s.workload = $1) AND ($2::text IS NULL OR s.engine = $2)"
    "   AND ($3::text IS NULL OR s.device = $3 OR s.device_name = $3)"
    "   AND ($4::text IS NULL OR s.dtype = $4) AND ($5::text IS NULL OR s.variant = $5)"
    "   AND ($6::integer = 0 OR s.batch_size = $6::integer)"
    "   AND s.id > $10::bigint"
    "  ORDER BY s.id LIMIT $9::integer + 1),"
    " numbered AS (SELECT p.*, row_number() OVER (ORDER BY p.id) AS rn FROM page p)"
    " SELECT COALESCE(json_agg(json_build_object('id', n.id, 'identity', n.ident,"
    "   'workload', n.workload, 'engine', n.engine, 'device', n.device,"
    "   'device_name', n.device_name, 'dtype', n.dtype, 'batch_size', n.batch_size,"
    "   'variant', n.variant, 'params', n.params, 'versions', n.versions,"
    "   'series', COALESCE(("
    "    SELECT json_agg(json_build_object('job_id', q.job_id,"
    "      'created_at', " DB_TS(
        "q.created_at") ", 'status', q.status,"
                        "      'median_ms', q.median_ms, 'ci95', json_build_array(q.ci95_lo, "
                        "q.ci95_hi),"
                        "      'speedup', q.speedup, 'kernels', q.kernels, 'fused_kernels', "
                        "q.fused_kernels,"
                        "      'peak_mem_bytes', q.peak_mem_bytes, 'owner', ou.name) ORDER BY "
                        "q.job_id)"
                        "    FROM (SELECT * FROM result_rows r WHERE r.ident = n.ident"
                        "      AND ($7::timestamptz IS NULL OR r.created_at >= $7::timestamptz)"
                        "      ORDER BY r.job_id DESC LIMIT $8::integer) q"
                        "    LEFT JOIN jobs oj ON oj.id = q.job_id"
                        "    LEFT JOIN users ou ON ou.id = oj.owner_id), '[]'::json))"
                        "   ORDER BY n.id) FILTER (WHERE n.rn <= $9::integer), '[]'::json)::text,"
                        "  CASE WHEN count(*) > $9::integer"
                        "   THEN max(n.id) FILTER (WHERE n.rn <= $9::integer) ELSE 0 END"
                        " FROM numbered n",
    true};

static const db_stmt st_samples = {
    "result samples",
    "SELECT array_length(samples, 1), array_to_string(samples, ',') FROM result_rows"
    " WHERE job_id = $1::bigint AND variant = $2",
    true};

static const db_stmt st_samples_many = {
    "result samples many",
    "SELECT u.ord - 1, array_length(r.samples, 1), array_to_string(r.samples, ',')"
    " FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY u(job_id, variant, ord)"
    " JOIN result_rows r ON r.job_id = u.job_id AND r.variant = u.variant",
    true};

fb_code db_results_query(db_conn *c, const db_results_filter *f, char **items_json,
                         int64_t *next_after, fb_err *err)
{
    char bs[16], pts[16], lim[16], after[24];
    PGresult *res = NULL;
    *items_json = NULL;
    *next_after = 0;
    if (f->points < 1 || f->points > DB_RESULTS_POINTS_MAX)
        return fb_err_set(err, FB_EINVAL, "points", "must be 1..%d", DB_RESULTS_POINTS_MAX);
    if (f->limit < 1 || f->limit > DB_RESULTS_LIMIT_MAX)
        return fb_err_set(err, FB_EINVAL, "limit", "must be 1..%d", DB_RESULTS_LIMIT_MAX);
    snprintf(bs, sizeof bs, "%d", f->batch_size > 0 ? f->batch_size : 0);
    snprintf(pts, sizeof pts, "%d", f->points);
    snprintf(lim, sizeof lim, "%d", f->limit);
    const char *params[] = {
        f->workload, f->engine, f->device, f->dtype, f->variant,
        bs,          f->since,  pts,       lim,      db_i64_text(f->after, after, sizeof after)};
    fb_code rc = db_exec(c, &st_query, 10, params, &res, err);
    if (!rc)
        rc = db_get_text(res, 0, 0, items_json, err);
    if (!rc)
        rc = db_get_i64(res, 0, 1, next_after, err);
    if (rc) {
        free(*items_json);
        *items_json = NULL;
    }
    PQclear(res);
    return rc;
}

/* Parses "v,v,..." (n values) into a new array. */
static fb_code parse_samples(const char *text, int n, double **out, fb_err *err)
{
    double *s = malloc((size_t)(n > 0 ? n : 1) * sizeof *s);
    const char *p = text;
    if (!s)
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    for (int i = 0; i < n; i++) {
        char *end;
        errno = 0;
        s[i] = strtod(p, &end);
        if (end == p || errno == ERANGE || (*end != ',' && *end != '\0')) {
            free(s);
            return fb_err_set(err, FB_EINTERNAL, NULL, "stored samples are not numbers");
        }
        p = *end ? end + 1 : end;
    }
    *out = s;
    return FB_OK;
}

fb_code db_result_samples(db_conn *c, int64_t job_id, const char *variant, double **samples, int *n,
                          fb_err *err)
{
    char idt[24];
    const char *params[] = {db_i64_text(job_id, idt, sizeof idt), variant};
    PGresult *res = NULL;
    *samples = NULL;
    *n = 0;
    fb_code rc = db_exec(c, &st_samples, 2, params, &res, err);
    if (rc)
        goto out;
    if (PQntuples(res) == 0) {
        rc = fb_err_set(err, FB_ENOTFOUND, NULL, "no result for job %s variant %s", idt, variant);
        goto out;
    }
    int count = 0;
    if (!PQgetisnull(res, 0, 0))
        rc = db_get_int(res, 0, 0, &count, err);
    if (!rc && (count < 0 || count > SAMPLES_MAX))
        rc = fb_err_set(err, FB_ETOOBIG, NULL, "%d samples", count);
    if (!rc && count > 0)
        rc = parse_samples(PQgetvalue(res, 0, 1), count, samples, err);
    if (!rc)
        *n = count;
out:
    PQclear(res);
    return rc;
}

/* Appends text to buf at *len (cap bytes in all); false when it does not fit. */
static bool put(char *buf, size_t cap, size_t *len, const char *a, const char *b, const char *c)
{
    int w = snprintf(buf + *len, cap - *len, "%s%s%s", a, b, c);
    if (w < 0 || (size_t)w >= cap - *len)
        return false;
    *len += (size_t)w;
    return true;
}

/* {id,...} and {"variant",...} literals for st_samples_many (caller frees both).
 * Variant names are valid names (no quote or backslash), checked here. */
static fb_code many_literals(const db_samples *items, int n, char **ids, char **vars, fb_err *err)
{
    size_t cap_i = (size_t)n * 24 + 3, cap_v = (size_t)n * (FB_NAME_MAX + 4) + 3, li = 0, lv = 0;
    char t[24];
    *ids = malloc(cap_i);
    *vars = malloc(cap_v);
    bool ok =
        *ids && *vars && put(*ids, cap_i, &li, "{", "", "") && put(*vars, cap_v, &lv, "{", "", "");
    for (int i = 0; ok && i < n; i++) {
        const char *sep = i ? "," : "";
        ok = items[i].variant && fb_name_valid(items[i].variant) &&
             put(*ids, cap_i, &li, sep, db_i64_text(items[i].job_id, t, sizeof t), "") &&
             put(*vars, cap_v, &lv, sep, "\"", items[i].variant) &&
             put(*vars, cap_v, &lv, "\"", "", "");
    }
    ok = ok && put(*ids, cap_i, &li, "}", "", "") && put(*vars, cap_v, &lv, "}", "", "");
    if (ok)
        return FB_OK;
    free(*ids);
    free(*vars);
    *ids = *vars = NULL;
    return fb_err_set(err, FB_EINVAL, NULL, "bad sample request (variant names must be valid)");
}

fb_code db_result_samples_many(db_conn *c, db_samples *items, int n, fb_err *err)
{
    char *ids = NULL, *vars = NULL;
    PGresult *res = NULL;
    for (int i = 0; i < n; i++) {
        items[i].v = NULL;
        items[i].n = 0;
    }
    if (n < 1)
        return FB_OK;
    if (n > DB_SAMPLES_MANY_MAX)
        return fb_err_set(err, FB_EINVAL, NULL, "at most %d sample rows at once",
                          DB_SAMPLES_MANY_MAX);
    fb_code rc = many_literals(items, n, &ids, &vars, err);
    if (rc)
        goto out;
    const char *params[] = {ids, vars};
    rc = db_exec(c, &st_samples_many, 2, params, &res, err);
    for (int r = 0; !rc && r < PQntuples(res); r++) {
        int idx = -1, count = 0;
        rc = db_get_int(res, r, 0, &idx, err);
        if (!rc && !PQgetisnull(res, r, 1))
            rc = db_get_int(res, r, 1, &count, err);
        if (!rc && (idx < 0 || idx >= n || count < 0 || count > SAMPLES_MAX))
            rc = fb_err_set(err, FB_EINTERNAL, NULL, "sample row out of range");
        if (!rc && count > 0 && !items[idx].v) {
            rc = parse_samples(PQgetvalue(res, r, 2), count, &items[idx].v, err);
            items[idx].n = rc ? 0 : count;
        }
    }
out:
    if (rc)
        for (int i = 0; i < n; i++) {
            free(items[i].v);
            items[i].v = NULL;
            items[i].n = 0;
        }
    PQclear(res);
    free(ids);
    free(vars);
    return rc;
}
