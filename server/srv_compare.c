#include "srv_compare.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_results.h"
#include "fb_stats.h"
#include "srv_export.h"

#define SAMPLES_JSON_MAX 100000 /* samples read from one stored variant */
#define REF_MAX          32

void srv_change_eval(double ma, const double *a, int na, double mb, const double *b, int nb,
                     srv_change *out)
{
    double alo, ahi, blo, bhi;

    out->change = (ma > 0.0 && isfinite(ma) && isfinite(mb)) ? mb / ma - 1.0 : NAN;
    out->p = NAN;
    out->ci_overlap = true;
    out->flag = NULL;
    if (isnan(out->change) || na < 1 || nb < 1)
        return;
    out->p = fb_mann_whitney_p(a, na, b, nb);
    if (fb_stats_median_ci(a, na, SRV_CI_LEVEL, &alo, &ahi) &&
        fb_stats_median_ci(b, nb, SRV_CI_LEVEL, &blo, &bhi))
        out->ci_overlap = !(ahi < blo || bhi < alo);
    /* Both large and significant (METHOD.md "Regressions"). */
    if (fabs(out->change) < SRV_CHANGE_MIN || (out->p >= SRV_P_MAX && out->ci_overlap))
        return;
    out->flag = out->change > 0 ? "regression" : "improvement";
}

static cJSON *num_or_null(double v)
{
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

bool srv_change_put(cJSON *o, const srv_change *c)
{
    return cJSON_AddItemToObject(o, "change", num_or_null(c->change)) &&
           cJSON_AddItemToObject(o, "p", num_or_null(c->p)) &&
           cJSON_AddBoolToObject(o, "ci99_overlap", c->ci_overlap) &&
           cJSON_AddItemToObject(o, "flag",
                                 c->flag ? cJSON_CreateString(c->flag) : cJSON_CreateNull());
}

double *srv_samples_from_json(const cJSON *variant, int *n)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(variant, "samples_ms"), *e;
    int size = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : 0, k = 0;
    double *s;

    *n = 0;
    if (size < 1 || size > SAMPLES_JSON_MAX)
        return NULL;
    s = malloc((size_t)size * sizeof *s);
    if (!s)
        return NULL;
    cJSON_ArrayForEach(e, arr)
    {
        if (cJSON_IsNumber(e))
            s[k++] = e->valuedouble;
    }
    *n = k;
    return s;
}

const cJSON *srv_result_variant(const cJSON *result, const char *name)
{
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(result, "variants"), *v;
    cJSON_ArrayForEach(v, vs)
    {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(v, "name");
        if (cJSON_IsString(nm) && strcmp(nm->valuestring, name) == 0)
            return v;
    }
    return NULL;
}

/* ---- GET /api/v1/compare?a=job:1&b=job:2 (or suite:N) ---- */

typedef struct cmp_side {
    bool suite;
    int64_t id;
    cJSON *jobs; /* owned: array of {id, workload, batch_size, result, ...} */
} cmp_side;

static double num_at(const cJSON *o, const char *k1, const char *k2)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k1);
    if (k2)
        v = cJSON_GetObjectItemCaseSensitive(v, k2);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str_at(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* Parses "job:N" or "suite:N". */
static bool parse_ref(const char *s, cmp_side *side)
{
    size_t n;
    memset(side, 0, sizeof *side);
    if (!s || strlen(s) > REF_MAX)
        return false;
    if (strncmp(s, "job:", 4) == 0)
        n = 4;
    else if (strncmp(s, "suite:", 6) == 0) {
        n = 6;
        side->suite = true;
    } else
        return false;
    return srv_parse_id(s + n, strlen(s + n), &side->id);
}

/* A job as the element of a side's jobs (the shape db_suite_get gives). */
static fb_code load_job(srv_req *r, cmp_side *side, fb_err *err)
{
    db_job j;
    fb_code rc = db_job_get(r->db, side->id, &j, err);
    if (rc)
        return rc;
    cJSON *o = cJSON_CreateObject(), *spec = cJSON_Parse(j.spec_json);
    cJSON *res = j.result_json ? cJSON_Parse(j.result_json) : cJSON_CreateNull();
    side->jobs = cJSON_CreateArray();
    cJSON_AddNumberToObject(o, "id", (double)j.id);
    cJSON_AddStringToObject(o, "state", j.state);
    cJSON_AddStringToObject(o, "workload", str_at(spec, "workload"));
    cJSON_AddNumberToObject(o, "batch_size", num_at(spec, "batch_size", NULL));
    if (!res || !cJSON_AddItemToObject(o, "result", res))
        cJSON_Delete(res);
    cJSON_Delete(spec);
    if (!side->jobs || !cJSON_AddItemToArray(side->jobs, o)) {
        cJSON_Delete(o);
        rc = fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    }
    db_job_free(&j);
    return rc;
}

static fb_code load_side(srv_req *r, cmp_side *side, fb_err *err)
{
    char *text = NULL;
    if (!side->suite)
        return load_job(r, side, err);
    fb_code rc = db_suite_get(r->db, side->id, &text, err);
    if (rc)
        return rc;
    cJSON *suite = cJSON_Parse(text);
    free(text);
    side->jobs = cJSON_DetachItemFromObjectCaseSensitive(suite, "jobs");
    cJSON_Delete(suite);
    return side->jobs ? FB_OK : fb_err_set(err, FB_EINTERNAL, NULL, "stored suite is not JSON");
}

/* The job of jobs with the same workload and batch size as want, or NULL. */
static const cJSON *match_job(const cJSON *jobs, const cJSON *want)
{
    const cJSON *j;
    cJSON_ArrayForEach(j, jobs)
    {
        if (strcmp(str_at(j, "workload"), str_at(want, "workload")) == 0 &&
            num_at(j, "batch_size", NULL) == num_at(want, "batch_size", NULL))
            return j;
    }
    return NULL;
}

/* One side of a row: {"job_id", "status", "median_ms", "speedup"}. */
static cJSON *side_json(const cJSON *job, const cJSON *v, const char *variant)
{
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(job, "result");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(res, "comparison"), "speedup");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "job_id", num_at(job, "id", NULL));
    cJSON_AddStringToObject(o, "status", v ? str_at(v, "status") : "missing");
    cJSON_AddItemToObject(o, "median_ms", num_or_null(num_at(v, "latency_ms", "median")));
    cJSON_AddItemToObject(o, "speedup", num_or_null(num_at(sp, variant, NULL)));
    return o;
}

/* A row for one variant of a matched pair of jobs; NULL on ENOMEM. */
static cJSON *variant_row(const cJSON *ja, const cJSON *jb, const char *variant)
{
    const cJSON *va = srv_result_variant(cJSON_GetObjectItemCaseSensitive(ja, "result"), variant);
    const cJSON *vb = srv_result_variant(cJSON_GetObjectItemCaseSensitive(jb, "result"), variant);
    int na = 0, nb = 0;
    double *sa = srv_samples_from_json(va, &na), *sb = srv_samples_from_json(vb, &nb);
    srv_change ch;
    bool ok_a = va && strcmp(str_at(va, "status"), "ok") == 0;
    bool ok_b = vb && strcmp(str_at(vb, "status"), "ok") == 0;

    srv_change_eval(ok_a ? num_at(va, "latency_ms", "median") : NAN, sa, na,
                    ok_b ? num_at(vb, "latency_ms", "median") : NAN, sb, nb, &ch);
    free(sa);
    free(sb);
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cJSON_AddStringToObject(o, "workload", str_at(ja, "workload")) &&
              cJSON_AddNumberToObject(o, "batch_size", num_at(ja, "batch_size", NULL)) &&
              cJSON_AddStringToObject(o, "variant", variant) &&
              cJSON_AddItemToObject(o, "a", side_json(ja, va, variant)) &&
              cJSON_AddItemToObject(o, "b", side_json(jb, vb, variant)) && srv_change_put(o, &ch);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Rows for every variant of ja's result that jb has too. */
static bool pair_rows(cJSON *rows, const cJSON *ja, const cJSON *jb)
{
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(ja, "result"), "variants"),
                *v;
    cJSON_ArrayForEach(v, vs)
    {
        cJSON *row = variant_row(ja, jb, str_at(v, "name"));
        if (!row || !cJSON_AddItemToArray(rows, row)) {
            cJSON_Delete(row);
            return false;
        }
    }
    return true;
}

/* {"a", "b", "rows": [...], "summary": {"rows", "regressions", "improvements",
 * "unmatched"}}. */
static cJSON *compare_json(const char *ra, const char *rb, const cmp_side *a, const cmp_side *b)
{
    cJSON *o = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(o, "rows"), *sum;
    const cJSON *ja, *row;
    int unmatched = 0, reg = 0, imp = 0;

    cJSON_AddStringToObject(o, "a", ra);
    cJSON_AddStringToObject(o, "b", rb);
    cJSON_ArrayForEach(ja, a->jobs)
    {
        /* Two jobs compare with each other whatever their workloads. */
        const cJSON *jb = a->suite ? match_job(b->jobs, ja) : cJSON_GetArrayItem(b->jobs, 0);
        if (!jb) {
            unmatched++;
            continue;
        }
        if (!pair_rows(rows, ja, jb)) {
            cJSON_Delete(o);
            return NULL;
        }
    }
    cJSON_ArrayForEach(row, rows)
    {
        const char *f = str_at(row, "flag");
        reg += strcmp(f, "regression") == 0;
        imp += strcmp(f, "improvement") == 0;
    }
    sum = cJSON_AddObjectToObject(o, "summary");
    if (!sum) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddNumberToObject(sum, "rows", cJSON_GetArraySize(rows));
    cJSON_AddNumberToObject(sum, "regressions", reg);
    cJSON_AddNumberToObject(sum, "improvements", imp);
    cJSON_AddNumberToObject(sum, "unmatched", unmatched);
    return o;
}

static const char *const compare_cols[] = {"workload", "batch_size",   "variant",   "a.job_id",
                                           "a.status", "a.median_ms",  "a.speedup", "b.job_id",
                                           "b.status", "b.median_ms",  "b.speedup", "change",
                                           "p",        "ci99_overlap", "flag"};

void srv_compare_get(srv_req *r)
{
    const char *ra = srv_req_query(r, "a"), *rb = srv_req_query(r, "b");
    cmp_side a = {0}, b = {0};
    bool csv = false;
    fb_err err;

    fb_err_clear(&err);
    if (!srv_export_format(r, &csv))
        return;
    if (!parse_ref(ra, &a) || !parse_ref(rb, &b) || a.suite != b.suite) {
        srv_reply_error(r, 400, "invalid_argument", parse_ref(ra, &a) ? "b" : "a",
                        "a and b must both be job:ID or both suite:ID");
        goto out;
    }
    if (load_side(r, &a, &err) != FB_OK || load_side(r, &b, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        goto out;
    }
    cJSON *body = compare_json(ra, rb, &a, &b);
    if (csv && body)
        srv_export_csv(r, cJSON_GetObjectItemCaseSensitive(body, "rows"), compare_cols,
                       sizeof compare_cols / sizeof compare_cols[0], "compare.csv");
    if (csv)
        cJSON_Delete(body);
    else
        srv_reply_json(r, 200, body);
out:
    cJSON_Delete(a.jobs);
    cJSON_Delete(b.jobs);
}
