/* Each point of a series is compared with the point before it (the previous
 * result of the same identity).  The size test needs only the medians, so raw
 * samples are read only for changes of 5% or more: a page of steady series
 * costs one query. */
#include "srv_results.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_results.h"
#include "fb_spec.h"
#include "srv_compare.h"
#include "srv_export.h"

#define POINTS_DEFAULT 20
#define LIMIT_DEFAULT  50

static bool name_param(srv_req *r, const char *key, const char **out)
{
    const char *v = srv_req_query(r, key);
    if (v && !fb_name_valid(v)) {
        srv_reply_error(r, 400, "invalid_argument", key, "not a valid %s name", key);
        return false;
    }
    *out = v;
    return true;
}

/* A device filter may be a kind ("cpu") or a device name ("NVIDIA H100 ..."). */
static bool device_param(srv_req *r, const char **out)
{
    const char *v = srv_req_query(r, "device");
    *out = v;
    /* 1..127 characters, as the document counts (a name longer in bytes than
     * any stored one matches nothing) */
    if (!v || (v[0] && srv_utf8_chars(v, strlen(v)) <= 127 && !strpbrk(v, "\"\\")))
        return true;
    srv_reply_error(r, 400, "invalid_argument", "device", "not a device kind or name");
    return false;
}

static bool int_param(srv_req *r, const char *key, long lo, long hi, long *out)
{
    const char *v = srv_req_query(r, key);
    if (!v || srv_parse_int_range(v, lo, hi, out))
        return true;
    srv_reply_error(r, 400, "invalid_argument", key, "%s must be %ld..%ld", key, lo, hi);
    return false;
}

/* A request's cost: the points it reads and encodes.  500 x 500 took seconds
 * of an HTTP thread; 25,000 is 50 series of 500 points, or 500 of 50. */
#define RESULTS_POINTS_TOTAL_MAX 25000

/* Reads the query into f; since_utc (SRV_TIME_MAX) holds f->since. */
static bool read_filter(srv_req *r, db_results_filter *f, char *since_utc)
{
    long bs = 0, pts = POINTS_DEFAULT, lim = LIMIT_DEFAULT;
    const char *cursor = srv_req_query(r, "cursor");
    memset(f, 0, sizeof *f);
    if (!name_param(r, "workload", &f->workload) || !name_param(r, "engine", &f->engine) ||
        !name_param(r, "dtype", &f->dtype) || !name_param(r, "variant", &f->variant) ||
        !device_param(r, &f->device) || !int_param(r, "batch_size", 1, 65536, &bs) ||
        !int_param(r, "points", 1, DB_RESULTS_POINTS_MAX, &pts) ||
        !int_param(r, "limit", 1, DB_RESULTS_LIMIT_MAX, &lim))
        return false;
    if (pts * lim > RESULTS_POINTS_TOTAL_MAX) {
        srv_reply_error(r, 400, "invalid_argument", "points",
                        "points x limit must be at most %d per request (asked %ld x %ld): page "
                        "through the series with cursor",
                        RESULTS_POINTS_TOTAL_MAX, pts, lim);
        return false;
    }
    const char *since = srv_req_query(r, "since");
    if (since && !srv_parse_rfc3339(since, since_utc, SRV_TIME_MAX)) {
        srv_reply_error(r, 400, "invalid_argument", "since",
                        "since must be a date (2026-11-22) or an RFC 3339 time "
                        "(2026-11-22T10:00:00Z) that exists");
        return false;
    }
    f->since = since ? since_utc : NULL;
    if (cursor && !srv_parse_id(cursor, strlen(cursor), &f->after)) {
        srv_reply_error(r, 400, "invalid_argument", "cursor", "not a cursor from next_cursor");
        return false;
    }
    f->batch_size = (int)bs;
    f->points = (int)pts;
    f->limit = (int)lim;
    return true;
}

static double pnum(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static bool point_ok(const cJSON *p)
{
    const char *st = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "status"));
    return st && strcmp(st, "ok") == 0 && pnum(p, "median_ms") > 0;
}

/* Raw samples are needed only for changes that pass the size test: the first
 * pass lists those pairs, one query reads all their samples, the second pass
 * flags every point. */
typedef struct pair_check {
    const cJSON *point; /* the later point of the pair */
    int ia, ib;         /* its two entries in samples */
} pair_check;

typedef struct flag_ctx {
    pair_check checks[SRV_RESULTS_SAMPLE_CHECKS];
    db_samples samples[2 * SRV_RESULTS_SAMPLE_CHECKS];
    int n_checks;
} flag_ctx;

static const char *series_variant(const cJSON *s)
{
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "variant"));
    return v ? v : "";
}

/* The size test alone: b / a - 1 when both points are ok, else NaN. */
static double size_change(const cJSON *a, const cJSON *b)
{
    if (!a || !point_ok(a) || !point_ok(b))
        return NAN;
    return pnum(b, "median_ms") / pnum(a, "median_ms") - 1.0;
}

/* First pass: the pairs of s whose change is large enough to need samples. */
static void collect_checks(flag_ctx *fx, const cJSON *s)
{
    const cJSON *p, *prev = NULL;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(s, "series"))
    {
        double ch = size_change(prev, p);
        if (isfinite(ch) && fabs(ch) >= SRV_CHANGE_MIN &&
            fx->n_checks < SRV_RESULTS_SAMPLE_CHECKS) {
            pair_check *c = &fx->checks[fx->n_checks];
            c->point = p;
            c->ia = 2 * fx->n_checks;
            c->ib = 2 * fx->n_checks + 1;
            fx->samples[c->ia] =
                (db_samples){.job_id = (int64_t)pnum(prev, "job_id"), .variant = series_variant(s)};
            fx->samples[c->ib] =
                (db_samples){.job_id = (int64_t)pnum(p, "job_id"), .variant = series_variant(s)};
            fx->n_checks++;
        }
        prev = p;
    }
}

/* Second pass for one pair. */
static void eval_point(const flag_ctx *fx, const cJSON *a, const cJSON *b, srv_change *ch,
                       bool *checked)
{
    *checked = false;
    srv_change_eval(NAN, NULL, 0, NAN, NULL, 0, ch);
    if (!a || !point_ok(a) || !point_ok(b))
        return;
    for (int i = 0; i < fx->n_checks; i++) {
        if (fx->checks[i].point != b)
            continue;
        const db_samples *sa = &fx->samples[fx->checks[i].ia], *sb = &fx->samples[fx->checks[i].ib];
        srv_change_eval(pnum(a, "median_ms"), sa->v, sa->n, pnum(b, "median_ms"), sb->v, sb->n, ch);
        *checked = true;
        return;
    }
    srv_change_eval(pnum(a, "median_ms"), NULL, 0, pnum(b, "median_ms"), NULL, 0, ch);
}

/* Adds "change" and "flag" to each point and "latest" and "regression" to s. */
static bool flag_series(const flag_ctx *fx, cJSON *s)
{
    cJSON *p, *prev = NULL;
    srv_change ch;
    bool checked = false;

    srv_change_eval(NAN, NULL, 0, NAN, NULL, 0, &ch);
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(s, "series"))
    {
        eval_point(fx, prev, p, &ch, &checked);
        cJSON_AddItemToObject(
            p, "change", isfinite(ch.change) ? cJSON_CreateNumber(ch.change) : cJSON_CreateNull());
        cJSON_AddItemToObject(p, "flag",
                              ch.flag ? cJSON_CreateString(ch.flag) : cJSON_CreateNull());
        prev = p;
    }
    /* The latest point against its predecessor: the series' regression verdict. */
    cJSON *reg = cJSON_CreateObject();
    if (!reg || !srv_change_put(reg, &ch) ||
        !cJSON_AddBoolToObject(reg, "samples_checked", checked)) {
        cJSON_Delete(reg);
        return false;
    }
    cJSON_AddItemToObject(s, "latest", prev ? cJSON_Duplicate(prev, 1) : cJSON_CreateNull());
    return cJSON_AddItemToObject(s, "regression", reg);
}

static fb_code flag_all(srv_req *r, cJSON *items, fb_err *err)
{
    flag_ctx *fx = calloc(1, sizeof *fx);
    cJSON *s;
    if (!fx)
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    cJSON_ArrayForEach(s, items) collect_checks(fx, s);
    fb_code rc = db_result_samples_many(r->db, fx->samples, 2 * fx->n_checks, err);
    cJSON_ArrayForEach(s, items)
    {
        if (!rc && !flag_series(fx, s))
            rc = fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    }
    for (int i = 0; i < 2 * fx->n_checks; i++)
        free(fx->samples[i].v);
    free(fx);
    return rc;
}

/* One CSV line per point, with its series' identity. */
static cJSON *csv_rows(const cJSON *items)
{
    cJSON *out = cJSON_CreateArray();
    const cJSON *s, *p;
    static const char *const keys[] = {"identity",    "workload", "engine",     "device",
                                       "device_name", "dtype",    "batch_size", "variant"};
    cJSON_ArrayForEach(s, items)
    {
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(s, "series"))
        {
            cJSON *o = cJSON_Duplicate(p, 1);
            for (size_t i = 0; o && i < sizeof keys / sizeof keys[0]; i++)
                cJSON_AddItemToObject(
                    o, keys[i], cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(s, keys[i]), 1));
            cJSON *ci = cJSON_GetObjectItemCaseSensitive(p, "ci95");
            cJSON_AddItemToObject(o, "ci95_lo", cJSON_Duplicate(cJSON_GetArrayItem(ci, 0), 1));
            cJSON_AddItemToObject(o, "ci95_hi", cJSON_Duplicate(cJSON_GetArrayItem(ci, 1), 1));
            cJSON_AddItemToArray(out, o);
        }
    }
    return out;
}

static const char *const result_cols[] = {
    "identity", "workload",      "engine",         "device",  "device_name",
    "dtype",    "batch_size",    "variant",        "job_id",  "created_at",
    "status",   "median_ms",     "ci95_lo",        "ci95_hi", "speedup",
    "kernels",  "fused_kernels", "peak_mem_bytes", "change",  "flag"};

static void reply_page(srv_req *r, cJSON *items, int64_t next, bool csv)
{
    char cur[24];
    if (csv) {
        cJSON *flat = csv_rows(items);
        srv_export_csv(r, flat, result_cols, sizeof result_cols / sizeof result_cols[0],
                       "results.csv");
        cJSON_Delete(flat);
        cJSON_Delete(items);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    snprintf(cur, sizeof cur, "%" PRId64, next);
    if (!o || !cJSON_AddItemToObject(o, "items", items)) {
        cJSON_Delete(items);
        cJSON_Delete(o);
        srv_reply_error(r, 500, "internal", NULL, "out of memory");
        return;
    }
    cJSON_AddItemToObject(o, "next_cursor", next ? cJSON_CreateString(cur) : cJSON_CreateNull());
    srv_reply_json(r, 200, o);
}

void srv_results_list(srv_req *r)
{
    db_results_filter f;
    char since_utc[SRV_TIME_MAX];
    char *text = NULL;
    int64_t next = 0;
    bool csv;
    cJSON *items = NULL;
    fb_err err;

    fb_err_clear(&err);
    if (!srv_export_format(r, &csv) || !read_filter(r, &f, since_utc))
        return;
    if (db_results_query(r->db, &f, &text, &next, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    items = cJSON_Parse(text);
    free(text);
    if (!items) {
        srv_reply_error(r, 500, "internal", NULL, "stored results are not JSON");
        return;
    }
    if (flag_all(r, items, &err) != FB_OK) {
        cJSON_Delete(items);
        srv_reply_fb_err(r, &err);
        return;
    }
    reply_page(r, items, next, csv);
}
