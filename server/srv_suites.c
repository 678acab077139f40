#include "srv_suites.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_results.h"
#include "fb_log.h"
#include "fb_spec.h"
#include "srv_jobs.h"
#include "srv_models.h"
#include "srv_catalog.h"
#include "srv_export.h"
#include "srv_jobres.h"
#include "srv_suite_explain.h"

#define SUITE_NAME_MAX 128
#define LIST_DEFAULT   20

/* Members of the suite body that are copied into every job spec. */
static const char *const job_fields[] = {"engine", "device",       "dtype",      "variants",
                                         "params", "warmup",       "iterations", "priority",
                                         "labels", "max_attempts", "timeout_s",  "explain"};

/* ---- POST ---- */

/* The workload names the body asks for: a list, a domain, or "all", resolved
 * against the catalog (and its engine when given).  New array, caller deletes;
 * NULL after answering 4xx. */
static cJSON *suite_workloads(srv_req *r, const cJSON *body, const cJSON *catalog)
{
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(body, "workloads"), *e;
    const cJSON *eng = cJSON_GetObjectItemCaseSensitive(body, "engine");
    cJSON *out = cJSON_CreateArray();

    if (cJSON_IsArray(w)) {
        cJSON_ArrayForEach(e, w)
        {
            if (!cJSON_IsString(e) ||
                (!fb_name_valid(e->valuestring) && !srv_models_is_job(e->valuestring))) {
                srv_reply_error(r, 400, "invalid_argument", "workloads", "not a workload name");
                cJSON_Delete(out);
                return NULL;
            }
            cJSON_AddItemToArray(out, cJSON_CreateString(e->valuestring));
        }
    } else if (cJSON_IsString(w)) {
        cJSON_ArrayForEach(e, catalog)
        {
            const cJSON *dom = cJSON_GetObjectItemCaseSensitive(e, "domain");
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
            const cJSON *en = cJSON_GetObjectItemCaseSensitive(e, "engine");
            bool dom_ok = strcmp(w->valuestring, "all") == 0 ||
                          (cJSON_IsString(dom) && strcmp(dom->valuestring, w->valuestring) == 0);
            bool eng_ok = !cJSON_IsString(eng) ||
                          (cJSON_IsString(en) && strcmp(en->valuestring, eng->valuestring) == 0);
            if (dom_ok && eng_ok && cJSON_IsString(nm))
                cJSON_AddItemToArray(out, cJSON_CreateString(nm->valuestring));
        }
    }
    int n = cJSON_GetArraySize(out);
    if (n == 0 || n > DB_SUITE_JOBS_MAX) {
        srv_reply_error(
            r, cJSON_IsString(w) ? 422 : 400,
            cJSON_IsString(w) ? "unknown_workload" : "invalid_argument", "workloads",
            n ? "too many workloads"
              : "workloads must be a non-empty list, a domain the catalog offers, or \"all\"");
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

/* Batch sizes from the body: a list of 1..SRV_SUITE_BATCHES_MAX integers, or
 * none (then 0: each workload's default).  false after answering 400. */
static bool suite_batches(srv_req *r, const cJSON *body, int *bs, int *n)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(body, "batch_sizes"), *e;
    *n = 0;
    if (!b) {
        bs[(*n)++] = 0;
        return true;
    }
    if (!cJSON_IsArray(b) || cJSON_GetArraySize(b) < 1 ||
        cJSON_GetArraySize(b) > SRV_SUITE_BATCHES_MAX) {
        srv_reply_error(r, 400, "invalid_argument", "batch_sizes",
                        "batch_sizes must be a list of 1..%d integers", SRV_SUITE_BATCHES_MAX);
        return false;
    }
    cJSON_ArrayForEach(e, b)
    {
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 1 ||
            e->valuedouble > 65536) {
            srv_reply_error(r, 400, "invalid_argument", "batch_sizes",
                            "batch sizes must be integers 1..65536");
            return false;
        }
        bs[(*n)++] = (int)e->valuedouble;
    }
    return true;
}

/* The spec text of one job of the suite: the shared fields, the workload, the
 * batch size (0: the default) and a "suite" label. */
static char *job_spec_text(const cJSON *body, const char *workload, int batch, const char *name)
{
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; o && i < sizeof job_fields / sizeof job_fields[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, job_fields[i]);
        if (v)
            cJSON_AddItemToObject(o, job_fields[i], cJSON_Duplicate(v, 1));
    }
    cJSON_AddStringToObject(o, "workload", workload);
    if (batch > 0)
        cJSON_AddNumberToObject(o, "batch_size", batch);
    if (name[0]) {
        cJSON *labels = cJSON_GetObjectItemCaseSensitive(o, "labels");
        if (!labels)
            labels = cJSON_AddObjectToObject(o, "labels");
        if (cJSON_IsObject(labels) && !cJSON_GetObjectItemCaseSensitive(labels, "suite"))
            cJSON_AddStringToObject(labels, "suite", name);
    }
    char *t = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return t;
}

/* One job: parse as POST /jobs does, resolve against the catalog, encode.
 * nj's strings point into *spec and *text (caller frees both). */
static fb_code build_job(srv_req *r, const char *in, const cJSON *catalog, const srv_user *u,
                         fb_spec *spec, char **text, db_new_job *nj, fb_err *err)
{
    srv_model_refusal why;
    fb_code rc = fb_spec_parse(in, strlen(in), spec, err);
    if (!rc && srv_models_is_job(spec->workload)) { /* an uploaded model */
        rc = srv_models_job(r, spec, &why, err);
    } else if (!rc) {
        srv_catalog_keep_params(catalog, spec); /* the suite's params its workload takes */
        rc = srv_catalog_resolve(catalog, spec, err);
    }
    if (!rc)
        rc = srv_jobs_admit(spec, u, err);
    if (rc)
        return rc;
    return srv_jobs_encode(spec, u, text, nj, err);
}

typedef struct suite_build {
    int n;
    fb_spec *specs;
    char **texts;
    db_new_job *jobs;
} suite_build;

static void build_free(suite_build *b)
{
    for (int i = 0; i < b->n; i++) {
        fb_spec_free(&b->specs[i]);
        free(b->texts[i]);
    }
    free(b->specs);
    free(b->texts);
    free(b->jobs);
}

/* Every job of the suite; a bad one answers with its index in the field. */
static bool build_all(srv_req *r, const cJSON *body, const cJSON *names, const int *bs, int n_bs,
                      const cJSON *catalog, const char *name, suite_build *b)
{
    int total = cJSON_GetArraySize(names) * n_bs, i = 0;
    const cJSON *w;
    fb_err err;

    fb_err_clear(&err);
    if (total > DB_SUITE_JOBS_MAX) {
        srv_reply_error(r, 400, "invalid_argument", "batch_sizes",
                        "the suite would hold %d jobs, at most %d", total, DB_SUITE_JOBS_MAX);
        return false;
    }
    b->specs = calloc((size_t)total, sizeof *b->specs);
    b->texts = calloc((size_t)total, sizeof *b->texts);
    b->jobs = calloc((size_t)total, sizeof *b->jobs);
    if (!b->specs || !b->texts || !b->jobs) {
        srv_reply_error(r, 500, "internal", NULL, "out of memory");
        return false;
    }
    cJSON_ArrayForEach(w, names)
    {
        for (int k = 0; k < n_bs; k++, i++) {
            char *in = job_spec_text(body, w->valuestring, bs[k], name);
            fb_spec_init(&b->specs[i]);
            b->n = i + 1;
            fb_code rc = in ? build_job(r, in, catalog, &r->user, &b->specs[i], &b->texts[i],
                                        &b->jobs[i], &err)
                            : fb_err_set(&err, FB_ENOMEM, NULL, "out of memory");
            free(in);
            if (rc) {
                int status = rc == FB_ENOTFOUND || rc == FB_EUNSUPPORTED  ? 422
                             : rc == FB_EFORBIDDEN                        ? 403
                             : rc == FB_ECONFLICT /* a model preparing */ ? 409
                                                                          : 400;
                srv_reply_error(r, rc == FB_ENOMEM ? 500 : status,
                                rc == FB_ENOTFOUND      ? "unknown_workload"
                                : rc == FB_EUNSUPPORTED ? "unsupported"
                                : rc == FB_EFORBIDDEN   ? "forbidden"
                                : rc == FB_ECONFLICT    ? "model_not_ready"
                                                        : "invalid_argument",
                                err.field, "%s (workload %s): %s", err.field[0] ? err.field : "job",
                                w->valuestring, err.msg);
                return false;
            }
        }
    }
    /* each job kept the params its workload takes (srv_catalog_keep_params);
     * one that none took would be ignored everywhere: refused */
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(body, "params"))
    {
        bool taken = false;
        for (int j = 0; j < b->n && !taken; j++)
            taken = cJSON_GetObjectItemCaseSensitive(b->specs[j].params, p->string) != NULL;
        if (!taken) {
            char field[FB_ERR_FIELD_MAX];
            snprintf(field, sizeof field, "params.%.60s", p->string);
            srv_reply_error(r, 400, "invalid_argument", field,
                            "%s is a parameter of none of the suite's workloads (GET "
                            "/api/v1/workloads lists each one's params)",
                            field);
            return false;
        }
    }
    return true;
}

static cJSON *load_catalog(srv_req *r)
{
    char *text = NULL;
    fb_err err;
    fb_err_clear(&err);
    if (db_workload_catalog(r->db, SRV_WORKER_STALE_S, &text, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return NULL;
    }
    cJSON *c = cJSON_Parse(text);
    free(text);
    if (!c)
        srv_reply_error(r, 500, "internal", NULL, "workload catalog is not JSON");
    return c;
}

static bool suite_name(srv_req *r, const cJSON *body, char *name)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(body, "name");
    name[0] = '\0';
    if (!n)
        return true;
    if (!cJSON_IsString(n) || strlen(n->valuestring) >= SUITE_NAME_MAX) {
        srv_reply_error(r, 400, "invalid_argument", "name", "name must be a string under %d bytes",
                        SUITE_NAME_MAX);
        return false;
    }
    snprintf(name, SUITE_NAME_MAX, "%s", n->valuestring);
    return true;
}

static void reply_suite(srv_req *r, int status, int64_t id);

/* The answer to a submit: the new suite (201, n jobs), the key's first one
 * (200, a replay) or 422 for another body under the key. */
static void answer_suite(srv_req *r, const srv_idem *idem, db_idem_outcome how, int64_t id, int n)
{
    char loc[64];

    if (how == DB_IDEM_MISMATCH) {
        srv_idem_mismatch(r, idem, "suite");
        return;
    }
    if (how == DB_IDEM_NEW)
        fb_info("suite %" PRId64 " queued: %d jobs", id, n);
    reply_suite(r, how == DB_IDEM_REPLAY ? 200 : 201, id);
    snprintf(loc, sizeof loc, "/api/v1/suites/%" PRId64, id);
    srv_reply_header(r, MHD_HTTP_HEADER_LOCATION, loc);
    if (how == DB_IDEM_REPLAY)
        srv_reply_header(r, "Idempotent-Replayed", "true");
}

/* Strict decoding, as for a job spec: a member the suite body does not define
 * is refused, naming it, so what is stored is only the decoded spec (junk
 * members once went into every suite list the dashboard fetches). */
static bool suite_fields_known(srv_req *r, const cJSON *body)
{
    static const char *const own[] = {"name", "workloads", "batch_sizes"};
    const cJSON *m;

    cJSON_ArrayForEach(m, body)
    {
        bool known = false;
        for (size_t i = 0; !known && i < sizeof own / sizeof own[0]; i++)
            known = strcmp(m->string, own[i]) == 0;
        for (size_t i = 0; !known && i < sizeof job_fields / sizeof job_fields[0]; i++)
            known = strcmp(m->string, job_fields[i]) == 0;
        if (!known) {
            srv_reply_error(r, 400, "invalid_argument", m->string,
                            "unknown field (a suite takes name, workloads, batch_sizes and the "
                            "job fields engine, device, dtype, variants, params, warmup, "
                            "iterations, priority, labels, max_attempts, timeout_s, explain)");
            return false;
        }
    }
    return true;
}

void srv_suites_create(srv_req *r)
{
    const char *ct =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    cJSON *body = NULL, *catalog = NULL, *names = NULL;
    suite_build b = {0};
    char name[SUITE_NAME_MAX], *spec_text = NULL;
    int bs[SRV_SUITE_BATCHES_MAX], n_bs = 0;
    int64_t id = 0;
    srv_idem idem;
    db_idem_outcome how = DB_IDEM_NEW;
    fb_err err;

    fb_err_clear(&err);
    if (!srv_idem_read(r, &idem))
        goto out;
    /* a resend of a keyed suite is answered before any limit: it creates nothing */
    if (idem.present) {
        fb_code rc = db_suite_find_idem(r->db, r->user.id, &idem.db, &id, &how, &err);
        if (rc != FB_ENOTFOUND) {
            if (rc != FB_OK)
                srv_reply_fb_err(r, &err);
            else
                answer_suite(r, &idem, how, id, 0);
            goto out;
        }
        how = DB_IDEM_NEW;
    }
    if (!srv_auth_submit_allowed(r, r->srv->ratelimit))
        goto out;
    if (!srv_content_type_is_json(ct)) {
        srv_reply_error(r, 415, "unsupported_media_type", NULL,
                        "Content-Type must be application/json");
        goto out;
    }
    if (fb_json_parse_body(r->body ? r->body : "", r->body_len, &body, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        goto out;
    }
    if (!cJSON_IsObject(body)) {
        srv_reply_error(r, 400, "invalid_json", NULL, "the body must be a JSON object");
        goto out;
    }
    if (!suite_fields_known(r, body) || !suite_name(r, body, name) ||
        !suite_batches(r, body, bs, &n_bs))
        goto out;
    catalog = load_catalog(r);
    names = catalog ? suite_workloads(r, body, catalog) : NULL;
    if (!names || !build_all(r, body, names, bs, n_bs, catalog, name, &b))
        goto out;
    spec_text = cJSON_PrintUnformatted(body);
    if (db_suite_insert(r->db, name, spec_text, b.jobs, b.n, idem.present ? &idem.db : NULL, &id,
                        &how, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        goto out;
    }
    answer_suite(r, &idem, how, id, b.n);
out:
    build_free(&b);
    free(spec_text);
    cJSON_Delete(names);
    cJSON_Delete(catalog);
    cJSON_Delete(body);
}

/* ---- summary ---- */

/* Accumulates one variant over the jobs.  The geomean's interval is its
 * measurement uncertainty: each job's 95% CI read as a normal interval on
 * log(speedup) (half-width / 1.96 = its standard error), combined over the
 * mean of logs; it says how sure the figure is, not how much the workloads
 * differ.  Only when every passed job has an interval. */
static cJSON *variant_summary(const srv_jobres *sj, int n, const char *variant)
{
    double log_sum = 0, var_sum = 0;
    int passed = 0, total = 0, unstable = 0, with_ci = 0;
    int changes[3] = {0, 0, 0}; /* faster, slower, no_difference */
    for (int i = 0; i < n; i++) {
        const srv_jobres *s = &sj[i];
        const fb_variant_result *v = fb_result_variant(&s->r, variant);
        const fb_variant_result *b = fb_result_variant(&s->r, s->r.baseline);
        double sp, kr, mr;
        if (s->state && (strcmp(s->state, "queued") == 0 || strcmp(s->state, "running") == 0))
            continue; /* not finished: neither passed nor failed yet */
        total++;
        if (!fb_result_against_baseline(&s->r, v, &sp, &kr, &mr) || !(sp > 0))
            continue; /* no result, or the baseline or the variant failed */
        passed++;
        log_sum += log(sp);
        unstable += b->unstable || v->unstable;
        if (v->speedup_lo > 0 && v->speedup_hi >= v->speedup_lo) { /* false for NaN */
            double se = (log(v->speedup_hi) - log(v->speedup_lo)) / (2 * 1.959963984540054);
            var_sum += se * se;
            with_ci++;
        }
        if (v->change != FB_CHANGE_UNKNOWN)
            changes[v->change == FB_CHANGE_FASTER ? 0 : v->change == FB_CHANGE_SLOWER ? 1 : 2]++;
    }
    cJSON *o = cJSON_CreateObject();
    double mean = passed ? log_sum / passed : NAN,
           half = 1.959963984540054 * sqrt(var_sum) / passed;
    cJSON_AddItemToObject(o, "geomean_speedup",
                          passed ? cJSON_CreateNumber(exp(mean)) : cJSON_CreateNull());
    if (passed && with_ci == passed) {
        double pair[2] = {exp(mean - half), exp(mean + half)};
        cJSON_AddItemToObject(o, "geomean_ci95", cJSON_CreateDoubleArray(pair, 2));
    } else {
        cJSON_AddNullToObject(o, "geomean_ci95");
    }
    cJSON_AddNumberToObject(o, "passed", passed);
    cJSON_AddNumberToObject(o, "total", total);
    cJSON_AddItemToObject(o, "pass_rate",
                          total ? cJSON_CreateNumber((double)passed / total) : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "unstable", unstable);
    cJSON_AddNumberToObject(o, "faster", changes[0]);
    cJSON_AddNumberToObject(o, "slower", changes[1]);
    cJSON_AddNumberToObject(o, "no_difference", changes[2]);
    return o;
}

/* The suite's explanation (srv_suite_explain.h) over its jobs'. */
static cJSON *explain_summary(const srv_jobres *sj, int n)
{
    const char **workloads = malloc(((size_t)n + 1) * sizeof *workloads);
    const cJSON **explains = malloc(((size_t)n + 1) * sizeof *explains);
    cJSON *o = NULL;
    if (workloads && explains) {
        for (int i = 0; i < n; i++) {
            workloads[i] = sj[i].workload;
            explains[i] = sj[i].r.explain;
        }
        o = srv_suite_explain(workloads, explains, n);
    }
    free(workloads);
    free(explains);
    return o;
}

/* The summary of a suite's jobs: per non-baseline variant the geometric mean
 * speedup over the jobs where the baseline and the variant both passed
 * (unclipped), the pass rate, and how many passed. */
static cJSON *suite_summary(const srv_jobres *sj, int n)
{
    cJSON *o = cJSON_CreateObject(), *vars = cJSON_AddObjectToObject(o, "variants");
    const char *baseline = NULL;
    if (!vars) {
        cJSON_Delete(o);
        return NULL;
    }
    /* Every variant any job ran, except each job's baseline. */
    for (int i = 0; i < n; i++) {
        const fb_result *r = &sj[i].r;
        if (r->baseline[0] && !baseline)
            baseline = r->baseline;
        for (int k = 0; k < r->n_variants; k++) {
            const char *name = r->variants[k].name;
            if (strcmp(name, r->baseline) != 0 && !cJSON_GetObjectItemCaseSensitive(vars, name))
                cJSON_AddItemToObject(vars, name, variant_summary(sj, n, name));
        }
    }
    cJSON_AddItemToObject(o, "baseline",
                          baseline ? cJSON_CreateString(baseline) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "explain", explain_summary(sj, n));
    return o;
}

/* ---- GET ---- */

/* {"total", "done", "fraction", "states": {...}} from the jobs. */
static cJSON *progress_json(const srv_jobres *sj, int n)
{
    cJSON *o = cJSON_CreateObject(), *st = cJSON_AddObjectToObject(o, "states");
    static const char *const states[] = {"queued", "running", "succeeded", "failed", "canceled"};
    int counts[5] = {0}, done;
    for (int i = 0; i < n; i++)
        for (int k = 0; sj[i].state && k < 5; k++)
            counts[k] += strcmp(sj[i].state, states[k]) == 0;
    for (int i = 0; i < 5; i++)
        cJSON_AddNumberToObject(st, states[i], counts[i]);
    done = counts[2] + counts[3] + counts[4];
    cJSON_AddNumberToObject(o, "total", n);
    cJSON_AddNumberToObject(o, "done", done);
    cJSON_AddNumberToObject(o, "fraction", n ? (double)done / n : 0.0);
    return o;
}

/* A variant's figures in a suite row, from the typed result: the comparison
 * against the baseline is null where the result has none (the baseline
 * itself, a failed side). */
static cJSON *row_variant(const fb_result *r, const fb_variant_result *v)
{
    double sp, kr, mr, pair[2] = {v->speedup_lo, v->speedup_hi};
    bool vs = fb_result_against_baseline(r, v, &sp, &kr, &mr);
    bool ci = vs && isfinite(pair[0]) && isfinite(pair[1]);
    const char *change = vs ? fb_change_name(v->change) : NULL;
    cJSON *o = cJSON_CreateObject();

    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "status", fb_vstatus_name(v->status));
    cJSON_AddItemToObject(o, "kernels", fb_json_int_or_null(v->kernels));
    cJSON_AddItemToObject(o, "fused_kernels", fb_json_int_or_null(v->fused_kernels));
    cJSON_AddItemToObject(o, "fused_ops", fb_json_int_or_null(v->fused_ops));
    cJSON_AddItemToObject(o, "peak_mem_bytes", fb_json_int_or_null(v->peak_mem_bytes));
    cJSON_AddItemToObject(o, "max_rel_error", fb_json_num_or_null(v->max_rel_error));
    if (v->n_fusion_groups > 0)
        cJSON_AddItemToObject(o, "fusion_groups", fb_fusion_groups_to_json(v));
    cJSON_AddItemToObject(o, "median_ms", fb_json_num_or_null(v->latency.median));
    cJSON_AddBoolToObject(o, "unstable", v->unstable);
    cJSON_AddItemToObject(o, "speedup", fb_json_num_or_null(sp));
    cJSON_AddItemToObject(o, "kernel_ratio", fb_json_num_or_null(kr));
    cJSON_AddItemToObject(o, "memory_ratio", fb_json_num_or_null(mr));
    cJSON_AddItemToObject(o, "speedup_ci95",
                          ci ? cJSON_CreateDoubleArray(pair, 2) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "change", change ? cJSON_CreateString(change) : cJSON_CreateNull());
    return o;
}

/* A per-workload row: the job's figures without raw samples. */
static cJSON *job_row(const srv_jobres *s)
{
    cJSON *row = cJSON_CreateObject(), *vars = cJSON_AddObjectToObject(row, "variants");
    static const char *const keep[] = {"job_id", "id",     "state",    "workload", "batch_size",
                                       "device", "engine", "progress", "error",    "finished_at"};
    for (size_t i = 0; vars && i < sizeof keep / sizeof keep[0]; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(s->job, keep[i]);
        if (x)
            cJSON_AddItemToObject(row, strcmp(keep[i], "id") ? keep[i] : "job_id",
                                  cJSON_Duplicate(x, 1));
    }
    for (int k = 0; vars && k < s->r.n_variants; k++)
        cJSON_AddItemToObject(vars, s->r.variants[k].name, row_variant(&s->r, &s->r.variants[k]));
    return row;
}

static cJSON *suite_json(cJSON *suite)
{
    cJSON *jobs = cJSON_DetachItemFromObjectCaseSensitive(suite, "jobs"), *rows, *env = NULL;
    int n;
    srv_jobres *sj = srv_jobres_decode(jobs, &n);
    if (!sj) {
        cJSON_Delete(jobs);
        cJSON_Delete(suite);
        return NULL;
    }
    cJSON_AddItemToObject(suite, "progress", progress_json(sj, n));
    cJSON_AddItemToObject(suite, "summary", suite_summary(sj, n));
    rows = cJSON_AddArrayToObject(suite, "rows");
    for (int i = 0; i < n; i++) {
        cJSON_AddItemToArray(rows, job_row(&sj[i]));
        if (sj[i].has && !env)
            env = fb_env_to_json(&sj[i].r.env);
    }
    cJSON_AddItemToObject(suite, "env", env ? env : cJSON_CreateNull());
    srv_jobres_free(sj, n);
    cJSON_Delete(jobs);
    return suite;
}

/* Flattened per (workload, variant) for CSV. */
static cJSON *csv_rows(const cJSON *rows)
{
    cJSON *out = cJSON_CreateArray();
    const cJSON *row, *v;
    cJSON_ArrayForEach(row, rows)
    {
        cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(row, "variants"))
        {
            cJSON *o = cJSON_Duplicate(v, 1);
            static const char *const keys[] = {"job_id", "workload", "batch_size", "state"};
            for (int i = 0; o && i < 4; i++) {
                const cJSON *x = cJSON_GetObjectItemCaseSensitive(row, keys[i]);
                if (x)
                    cJSON_AddItemToObject(o, keys[i], cJSON_Duplicate(x, 1));
            }
            cJSON_AddStringToObject(o, "variant", v->string);
            const cJSON *ci = cJSON_GetObjectItemCaseSensitive(v, "speedup_ci95");
            if (cJSON_GetArraySize(ci) == 2) { /* two columns: CSV cells hold numbers */
                cJSON_AddItemToObject(o, "speedup_ci95_lo",
                                      cJSON_Duplicate(cJSON_GetArrayItem(ci, 0), 1));
                cJSON_AddItemToObject(o, "speedup_ci95_hi",
                                      cJSON_Duplicate(cJSON_GetArrayItem(ci, 1), 1));
            }
            cJSON_AddItemToArray(out, o);
        }
    }
    return out;
}

static const char *const suite_cols[] = {
    "job_id",    "workload",      "batch_size",      "state",           "variant",     "status",
    "median_ms", "speedup",       "speedup_ci95_lo", "speedup_ci95_hi", "change",      "unstable",
    "kernels",   "fused_kernels", "kernel_ratio",    "peak_mem_bytes",  "memory_ratio"};

static void reply_suite_fmt(srv_req *r, int status, int64_t id, bool csv)
{
    char *text = NULL, fname[64];
    fb_err err;
    fb_err_clear(&err);
    if (db_suite_get(r->db, id, &text, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    cJSON *suite = cJSON_Parse(text);
    free(text);
    if (!suite) {
        srv_reply_error(r, 500, "internal", NULL, "stored suite is not JSON");
        return;
    }
    suite = suite_json(suite);
    if (!suite) {
        srv_reply_error(r, 500, "internal", NULL, "out of memory");
        return;
    }
    if (!csv) {
        srv_reply_json(r, status, suite);
        return;
    }
    cJSON *flat = csv_rows(cJSON_GetObjectItemCaseSensitive(suite, "rows"));
    snprintf(fname, sizeof fname, "suite-%" PRId64 ".csv", id);
    srv_export_csv(r, flat, suite_cols, sizeof suite_cols / sizeof suite_cols[0], fname);
    cJSON_Delete(flat);
    cJSON_Delete(suite);
}

static void reply_suite(srv_req *r, int status, int64_t id)
{
    reply_suite_fmt(r, status, id, false);
}

void srv_suites_get(srv_req *r)
{
    char buf[32];
    int64_t id;
    bool csv;
    if (!srv_export_format(r, &csv))
        return;
    if (!srv_req_cap(r, 0, buf, sizeof buf) || !srv_parse_id(buf, strlen(buf), &id)) {
        srv_reply_error(r, 404, "not_found", NULL, "no such suite");
        return;
    }
    reply_suite_fmt(r, 200, id, csv);
}

void srv_suites_list(srv_req *r)
{
    const char *limit = srv_req_query(r, "limit"), *cursor = srv_req_query(r, "cursor");
    const char *owner = srv_req_query(r, "owner");
    long lim = LIST_DEFAULT;
    int64_t before = 0, next = 0;
    char *items = NULL, *body, cur[24];
    fb_err err;

    fb_err_clear(&err);
    if (limit && !srv_parse_int_range(limit, 1, 200, &lim)) {
        srv_reply_error(r, 400, "invalid_argument", "limit", "limit must be 1..200");
        return;
    }
    if (cursor && !srv_parse_id(cursor, strlen(cursor), &before)) {
        srv_reply_error(r, 400, "invalid_argument", "cursor", "not a cursor from next_cursor");
        return;
    }
    if (owner && strcmp(owner, "me") != 0) {
        srv_reply_error(r, 400, "invalid_argument", "owner", "owner takes me (your own suites)");
        return;
    }
    if (owner && r->user.id == 0) {
        srv_reply_error(r, 400, "invalid_argument", "owner",
                        "owner=me needs a signed-in user: this server runs without tokens");
        return;
    }
    if (db_suite_list(r->db, (int)lim, before, owner ? r->user.id : 0, &items, &next, &err) !=
        FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    snprintf(cur, sizeof cur, "%" PRId64, next);
    size_t n = strlen(items) + 64;
    body = malloc(n);
    if (!body) {
        free(items);
        srv_reply_error(r, 500, "internal", NULL, "out of memory");
        return;
    }
    snprintf(body, n, "{\"items\":%s,\"next_cursor\":%s%s%s}", items, next ? "\"" : "",
             next ? cur : "null", next ? "\"" : "");
    free(items);
    srv_reply_owned(r, 200, "application/json", body, strlen(body));
}
