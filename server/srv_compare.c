#include "srv_compare.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_results.h"
#include "fb_stats.h"
#include "srv_export.h"
#include "srv_jobres.h"

#define REF_MAX 32

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

/* ---- GET /api/v1/compare?a=job:1&b=job:2 (or suite:N) ---- */

typedef struct cmp_side {
    bool suite;
    int64_t id;
    cJSON *jobs;    /* owned: array of {id, workload, batch_size, state, result} */
    srv_jobres *jr; /* owned: jobs with their results decoded, n of them */
    int n;
} cmp_side;

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
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(spec, "batch_size");
    side->jobs = cJSON_CreateArray();
    cJSON_AddNumberToObject(o, "id", (double)j.id);
    cJSON_AddStringToObject(o, "state", j.state);
    cJSON_AddStringToObject(o, "workload", str_at(spec, "workload"));
    cJSON_AddNumberToObject(o, "batch_size", cJSON_IsNumber(bs) ? bs->valuedouble : 0);
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
    fb_code rc;
    if (!side->suite) {
        rc = load_job(r, side, err);
    } else if ((rc = db_suite_get(r->db, side->id, &text, err)) == FB_OK) {
        cJSON *suite = cJSON_Parse(text);
        free(text);
        side->jobs = cJSON_DetachItemFromObjectCaseSensitive(suite, "jobs");
        cJSON_Delete(suite);
        if (!side->jobs)
            rc = fb_err_set(err, FB_EINTERNAL, NULL, "stored suite is not JSON");
    }
    if (rc == FB_OK && !(side->jr = srv_jobres_decode(side->jobs, &side->n)))
        rc = fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    return rc;
}

/* The job of a side with the same workload and batch size as want, or NULL. */
static const srv_jobres *match_job(const cmp_side *side, const srv_jobres *want)
{
    for (int i = 0; i < side->n; i++) {
        const srv_jobres *j = &side->jr[i];
        if (strcmp(j->workload ? j->workload : "", want->workload ? want->workload : "") == 0 &&
            j->batch_size == want->batch_size)
            return j;
    }
    return NULL;
}

/* One side of a row: {"job_id", "status", "median_ms", "speedup"}. */
static cJSON *side_json(const srv_jobres *job, const fb_variant_result *v)
{
    double sp, kr, mr;
    cJSON *o = cJSON_CreateObject();
    (void)fb_result_against_baseline(&job->r, v, &sp, &kr, &mr); /* NaN without */
    cJSON_AddNumberToObject(o, "job_id", (double)job->id);
    cJSON_AddStringToObject(o, "status", v ? fb_vstatus_name(v->status) : "missing");
    cJSON_AddItemToObject(o, "median_ms", num_or_null(v ? v->latency.median : NAN));
    cJSON_AddItemToObject(o, "speedup", num_or_null(sp));
    return o;
}

/* A row for one variant of a matched pair of jobs; NULL on ENOMEM. */
static cJSON *variant_row(const srv_jobres *ja, const srv_jobres *jb, const char *variant)
{
    const fb_variant_result *va = fb_result_variant(&ja->r, variant);
    const fb_variant_result *vb = fb_result_variant(&jb->r, variant);
    bool ok_a = va && va->status == FB_VS_OK, ok_b = vb && vb->status == FB_VS_OK;
    srv_change ch;

    srv_change_eval(ok_a ? va->latency.median : NAN, va ? va->samples_ms : NULL,
                    va ? va->n_samples : 0, ok_b ? vb->latency.median : NAN,
                    vb ? vb->samples_ms : NULL, vb ? vb->n_samples : 0, &ch);
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cJSON_AddStringToObject(o, "workload", ja->workload ? ja->workload : "") &&
              cJSON_AddNumberToObject(o, "batch_size", ja->batch_size) &&
              cJSON_AddStringToObject(o, "variant", variant) &&
              cJSON_AddItemToObject(o, "a", side_json(ja, va)) &&
              cJSON_AddItemToObject(o, "b", side_json(jb, vb)) && srv_change_put(o, &ch);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Rows for every variant of ja's result. */
static bool pair_rows(cJSON *rows, const srv_jobres *ja, const srv_jobres *jb)
{
    for (int i = 0; i < ja->r.n_variants; i++) {
        cJSON *row = variant_row(ja, jb, ja->r.variants[i].name);
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
    const cJSON *row;
    int unmatched = 0, reg = 0, imp = 0;

    cJSON_AddStringToObject(o, "a", ra);
    cJSON_AddStringToObject(o, "b", rb);
    for (int i = 0; i < a->n; i++) {
        /* Two jobs compare with each other whatever their workloads. */
        const srv_jobres *ja = &a->jr[i];
        const srv_jobres *jb = a->suite ? match_job(b, ja) : b->n > 0 ? &b->jr[0] : NULL;
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
    srv_jobres_free(a.jr, a.n);
    srv_jobres_free(b.jr, b.n);
    cJSON_Delete(a.jobs);
    cJSON_Delete(b.jobs);
}
