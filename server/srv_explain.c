/* srv_explain: GET and POST /api/v1/jobs/{id}/explain (docs/API-EXTENSIONS.md).
 *
 * An explanation is part of a result (spec.explain).  POST enqueues a job that
 * explains job {id}: its spec with "explain": true and the label explain_of
 * = {id}, owned by whoever asks (their quota, their rate).  GET answers the
 * job's own explanation, else that of the newest job explaining it. */
#include "srv_explain.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_spec.h"
#include "srv_auth.h"
#include "srv_jobs.h"

#define EXPLAIN_LABEL "explain_of"

/* The "explain" object of a stored result, or NULL (also when it says
 * "unavailable": *why then points into it). */
static cJSON *result_explain(const char *result_json, cJSON **root, const char **why)
{
    *root = result_json ? cJSON_Parse(result_json) : NULL;
    cJSON *ex = *root ? cJSON_GetObjectItemCaseSensitive(*root, "explain") : NULL;
    const cJSON *u = ex ? cJSON_GetObjectItemCaseSensitive(ex, "unavailable") : NULL;
    if (cJSON_IsString(u)) {
        *why = u->valuestring;
        return NULL;
    }
    return cJSON_IsObject(ex) ? ex : NULL;
}

/* Answers status with {"job_id", "explained_by", "state", "explain"}: job
 * id explained by job by, ex (NULL: null) moved out of the parsed result
 * root, which the caller deletes. */
static void reply_answer(srv_req *r, int status, int64_t id, const db_job *by, cJSON *root,
                         cJSON *ex)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cJSON_AddNumberToObject(o, "job_id", (double)id) &&
              cJSON_AddNumberToObject(o, "explained_by", (double)by->id) &&
              cJSON_AddStringToObject(o, "state", by->state);
    if (ok && !ex) {
        ok = cJSON_AddNullToObject(o, "explain") != NULL;
    } else if (ok) { /* the explanation moves from the stored result into the answer */
        cJSON_DetachItemViaPointer(root, ex);
        if (!cJSON_AddItemToObject(o, "explain", ex)) {
            cJSON_Delete(ex);
            ok = false;
        }
    }
    if (!ok) {
        cJSON_Delete(o);
        o = NULL;
    }
    srv_reply_json(r, status, o);
}

/* The newest job explaining id into *out (db_job_free it); false when none. */
static fb_code newest_explainer(srv_req *r, int64_t id, db_job *out, bool *found, fb_err *err)
{
    char value[32];
    db_job *items = NULL;
    int n = 0;
    int64_t next = 0;
    snprintf(value, sizeof value, "%" PRId64, id);
    db_job_filter f = {.label_key = EXPLAIN_LABEL, .label_value = value, .limit = 1};
    fb_code rc = db_job_list(r->db, &f, &items, &n, &next, err);
    *found = rc == FB_OK && n > 0;
    if (*found)
        *out = items[0];
    for (int i = *found ? 1 : 0; i < n; i++)
        db_job_free(&items[i]);
    free(items);
    return rc;
}

void srv_jobs_explain_get(srv_req *r)
{
    int64_t id;
    db_job j, by;
    fb_err err;
    bool found = false;
    memset(&j, 0, sizeof j);
    memset(&by, 0, sizeof by);
    fb_err_clear(&err);
    if (!srv_job_id(r, &id))
        return;
    if (db_job_get(r->db, id, &j, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    cJSON *root = NULL, *by_root = NULL;
    const char *why = NULL, *by_why = NULL;
    cJSON *own = result_explain(j.result_json, &root, &why), *theirs = NULL;
    if (own) {
        reply_answer(r, 200, id, &j, root, own);
    } else if (newest_explainer(r, id, &by, &found, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
    } else if (!found && why) { /* asked, and the engine said why not */
        srv_reply_error(r, 404, "not_found", NULL, "job %" PRId64 " has no explanation: %s", id,
                        why);
    } else if (!found) {
        srv_reply_error(r, 404, "not_found", NULL,
                        "job %" PRId64 " is not explained: POST /api/v1/jobs/%" PRId64
                        "/explain enqueues its explanation",
                        id, id);
    } else if (strcmp(by.state, "succeeded") != 0) {
        /* 202 while it waits or runs; a failed or canceled one says so */
        bool waiting = strcmp(by.state, "queued") == 0 || strcmp(by.state, "running") == 0;
        reply_answer(r, waiting ? 202 : 200, id, &by, NULL, NULL);
    } else if ((theirs = result_explain(by.result_json, &by_root, &by_why)) != NULL) {
        reply_answer(r, 200, id, &by, by_root, theirs);
    } else {
        srv_reply_error(r, 404, "not_found", NULL,
                        "job %" PRId64 " has no explanation: job %" PRId64 " made none%s%s", id,
                        by.id, by_why ? ": " : "", by_why ? by_why : "");
    }
    cJSON_Delete(by_root);
    cJSON_Delete(root);
    db_job_free(&j);
    db_job_free(&by);
}

/* Job j's spec, explaining: explain true, labeled explain_of = j's id. */
static fb_code explainer_spec(const db_job *j, fb_spec *spec, fb_err *err)
{
    fb_code rc = fb_spec_parse(j->spec_json, strlen(j->spec_json), spec, err);
    if (rc)
        return rc;
    spec->explain = true;
    int k = 0;
    while (k < spec->n_labels && strcmp(spec->labels[k].key, EXPLAIN_LABEL) != 0)
        k++;
    if (k == FB_MAX_LABELS)
        return fb_err_set(err, FB_EINVAL, "labels",
                          "job %" PRId64 " has %d labels: none left for %s", j->id, FB_MAX_LABELS,
                          EXPLAIN_LABEL);
    snprintf(spec->labels[k].key, sizeof spec->labels[k].key, "%s", EXPLAIN_LABEL);
    snprintf(spec->labels[k].value, sizeof spec->labels[k].value, "%" PRId64, j->id);
    spec->n_labels = k == spec->n_labels ? k + 1 : spec->n_labels;
    return FB_OK;
}

void srv_jobs_explain_post(srv_req *r)
{
    int64_t id;
    db_job j, made;
    db_new_job nj;
    fb_spec spec;
    char *text = NULL;
    fb_err err;
    memset(&j, 0, sizeof j);
    memset(&made, 0, sizeof made);
    fb_spec_init(&spec);
    fb_err_clear(&err);
    if (!srv_job_id(r, &id) || !srv_auth_submit_allowed(r, r->srv->ratelimit))
        return;
    fb_code rc = db_job_get(r->db, id, &j, &err);
    if (!rc)
        rc = explainer_spec(&j, &spec, &err);
    if (rc) {
        srv_reply_fb_err(r, &err);
        goto out;
    }
    if (!srv_jobs_prepare(r, &spec, &text, &nj))
        goto out;
    if (db_job_create(r->db, &nj, &made, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
    } else {
        char location[64];
        srv_reply_json(r, 202, srv_job_json(&made));
        snprintf(location, sizeof location, "/api/v1/jobs/%" PRId64 "/explain", id);
        srv_reply_header(r, MHD_HTTP_HEADER_LOCATION, location);
    }
out:
    free(text);
    fb_spec_free(&spec);
    db_job_free(&j);
    db_job_free(&made);
}
