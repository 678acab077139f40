#include "srv_jobs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_log.h"
#include "fb_spec.h"
#include "srv_catcache.h"
#include "srv_models.h"
#include "srv_submit.h"
#include "srv_token.h"

#define LIST_LIMIT_DEFAULT 50
#define LIST_LIMIT_MAX     200

/* ---- the job as JSON (docs/API.md "GET /api/v1/jobs/{id}") ---- */

/* Parses stored JSON text; text the database gave us is ours, so a parse failure
 * is a bug worth a log line, answered as null rather than a broken body. */
static cJSON *stored_json(const char *text, int64_t id, const char *what)
{
    cJSON *v;
    if (!text)
        return cJSON_CreateNull();
    v = cJSON_Parse(text);
    if (!v) {
        fb_error("job %" PRId64 ": stored %s is not JSON", id, what);
        return cJSON_CreateNull();
    }
    return v;
}

static cJSON *str_or_null(const char *s)
{
    return s[0] ? cJSON_CreateString(s) : cJSON_CreateNull();
}

cJSON *srv_job_json(const db_job *j)
{
    cJSON *o = cJSON_CreateObject();

    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "id", (double)j->id);
    cJSON_AddStringToObject(o, "state", j->state);
    cJSON_AddItemToObject(o, "spec", stored_json(j->spec_json, j->id, "spec"));
    cJSON_AddNumberToObject(o, "attempt", j->attempt);
    cJSON_AddNumberToObject(o, "max_attempts", j->max_attempts);
    cJSON_AddItemToObject(o, "progress", stored_json(j->progress_json, j->id, "progress"));
    cJSON_AddItemToObject(o, "worker", str_or_null(j->worker));
    cJSON_AddItemToObject(o, "created_at", str_or_null(j->created_at));
    cJSON_AddItemToObject(o, "started_at", str_or_null(j->started_at));
    cJSON_AddItemToObject(o, "finished_at", str_or_null(j->finished_at));
    cJSON_AddItemToObject(o, "error", stored_json(j->error_json, j->id, "error"));
    cJSON_AddItemToObject(o, "result", stored_json(j->result_json, j->id, "result"));
    cJSON_AddBoolToObject(o, "cancel_requested", j->cancel_requested);
    cJSON_AddItemToObject(o, "owner", str_or_null(j->owner));
    /* Every Add above allocates; one check at the end is enough to catch ENOMEM. */
    if (cJSON_GetArraySize(o) != 14) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Answers status with job id read back from the database. */
static void reply_job(srv_req *r, int status, int64_t id)
{
    db_job j;
    fb_err err;

    memset(&j, 0, sizeof j);
    fb_err_clear(&err);
    if (db_job_get(r->db, id, &j, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    srv_reply_json(r, status, srv_job_json(&j));
    db_job_free(&j);
}

bool srv_job_id(srv_req *r, int64_t *id)
{
    char buf[32];
    if (srv_req_cap(r, 0, buf, sizeof buf) && srv_parse_id(buf, strlen(buf), id))
        return true;
    srv_reply_error(r, 404, "not_found", NULL, "no such job");
    return false;
}

void srv_jobs_get(srv_req *r)
{
    int64_t id;
    if (srv_job_id(r, &id))
        reply_job(r, 200, id);
}

/* Only its owner or an admin changes a job; false after answering 403/404. */
static bool may_change(srv_req *r, int64_t id)
{
    db_job j;
    fb_err err;
    bool ok;

    if (r->user.role >= SRV_ROLE_ADMIN)
        return true;
    memset(&j, 0, sizeof j);
    fb_err_clear(&err);
    if (db_job_get(r->db, id, &j, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return false;
    }
    ok = j.owner_id != 0 && j.owner_id == r->user.id;
    if (!ok)
        srv_reply_error(r, 403, "forbidden", NULL,
                        "job %" PRId64 " is %s%s's; only its owner "
                        "or an admin may change it",
                        id, j.owner[0] ? "" : "no one", j.owner);
    db_job_free(&j);
    return ok;
}

void srv_jobs_cancel(srv_req *r)
{
    int64_t id;
    fb_err err;

    fb_err_clear(&err);
    if (!srv_job_id(r, &id) || !may_change(r, id))
        return;
    if (db_job_cancel(r->db, id, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    reply_job(r, 200, id);
}

void srv_jobs_kernels(srv_req *r)
{
    const char *variant = srv_req_query(r, "variant");
    char *rows = NULL;
    int64_t id;
    fb_err err;

    fb_err_clear(&err);
    if (!srv_job_id(r, &id))
        return;
    if (variant && !fb_name_valid(variant)) {
        srv_reply_error(r, 400, "invalid_argument", "variant", "not a variant name");
        return;
    }
    if (db_job_kernels(r->db, id, variant, &rows, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    srv_reply_items(r, rows);
}

/* ---- POST /api/v1/jobs ---- */

/* 422 for catalog misses, the usual mapping for the rest. */
static void reply_resolve_err(srv_req *r, const fb_err *err)
{
    if (err->code == FB_ENOTFOUND)
        srv_reply_error(r, 422, "unknown_workload", err->field, "%s", err->msg);
    else if (err->code == FB_EUNSUPPORTED)
        srv_reply_error(r, 422, "unsupported", err->field, "%s", err->msg);
    else
        srv_reply_fb_err(r, err);
}

/* srv_catcache's way to read the catalog: on the request's connection. */
static fb_code fetch_catalog(void *ctx, char **json, fb_err *err)
{
    return db_workload_catalog(ctx, SRV_WORKER_STALE_S, json, err);
}

/* Checks spec against what live workers offer and fills the defaults: against
 * the catalog cached in the process (read again when a second old, or when it
 * rejects the spec), so most submits make no catalog query. */
static fb_code resolve(srv_req *r, fb_spec *spec, fb_err *err)
{
    return srv_catcache_resolve(fetch_catalog, r->db, spec, err);
}

fb_code srv_jobs_admit(fb_spec *spec, const srv_user *u, fb_err *err)
{
    if (u->role >= SRV_ROLE_ADMIN)
        return FB_OK;
    if (spec->priority > 0)
        return fb_err_set(err, FB_EFORBIDDEN, "priority",
                          "a priority above 0 is for admins (%s is %s)", u->name,
                          srv_role_name(u->role));
    if (spec->timeout_s > SRV_USER_TIMEOUT_MAX)
        spec->timeout_s = SRV_USER_TIMEOUT_MAX;
    return FB_OK;
}

fb_code srv_jobs_encode(const fb_spec *spec, const srv_user *u, char **text, db_new_job *nj,
                        fb_err *err)
{
    cJSON *json = fb_spec_to_json(spec);
    *text = json ? cJSON_PrintUnformatted(json) : NULL;
    cJSON_Delete(json);
    if (!*text)
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory encoding the spec");
    *nj = (db_new_job){.spec_json = *text,
                       .workload = spec->workload,
                       .engine = spec->engine,
                       .device = spec->device,
                       .dtype = spec->dtype,
                       .batch_size = spec->batch_size,
                       .priority = spec->priority,
                       .max_attempts = spec->max_attempts,
                       .timeout_s = spec->timeout_s,
                       .owner_id = u->id};
    return FB_OK;
}

/* A submit waiting for its batch's commit (srv_submit): the batcher's item and
 * what the item's strings point into.  r->data from srv_jobs_create until the
 * request is freed. */
typedef struct create_wait {
    srv_submit_item item;
    fb_spec spec;
    char *text;
    srv_idem idem;
    db_idem_outcome how; /* of a keyed submit */
} create_wait;

static void create_wait_free(void *p)
{
    create_wait *w = p;
    db_job_free(&w->item.res.job);
    fb_spec_free(&w->spec);
    free(w->text);
    free(w);
}

/* The job was created (or not): 201 with the job and its Location, or the
 * job's own error.  After a batch, on an HTTP thread again. */
static void create_reply(srv_req *r)
{
    const create_wait *w = r->data;
    const db_job *job = &w->item.res.job;
    char location[64];

    if (w->item.res.rc != FB_OK) {
        srv_reply_fb_err(r, &w->item.res.err);
        return;
    }
    if (w->how == DB_IDEM_MISMATCH) {
        srv_idem_mismatch(r, &w->idem, "job");
        return;
    }
    if (w->how == DB_IDEM_NEW)
        fb_info("job %" PRId64 " queued: %s/%s/%s", job->id, w->spec.workload, w->spec.engine,
                w->spec.device);
    srv_reply_json(r, w->how == DB_IDEM_REPLAY ? 200 : 201, srv_job_json(job));
    snprintf(location, sizeof location, "/api/v1/jobs/%" PRId64, job->id);
    srv_reply_header(r, MHD_HTTP_HEADER_LOCATION, location);
    if (w->how == DB_IDEM_REPLAY)
        srv_reply_header(r, "Idempotent-Replayed", "true");
}

/* srv_submit_done_fn, on the batcher's thread. */
static void create_answered(srv_submit_item *item)
{
    srv_req_resume(item->arg);
}

/* Checks and resolves the spec in w; false when it answered. */
static bool create_prepare(srv_req *r, create_wait *w)
{
    const char *ct =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    fb_err err;

    fb_err_clear(&err);
    if (!srv_content_type_is_json(ct)) {
        srv_reply_error(r, 415, "unsupported_media_type", NULL,
                        "Content-Type must be application/json, got %s", ct ? ct : "none");
        return false;
    }
    if (fb_spec_parse(r->body ? r->body : "", r->body_len, &w->spec, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return false;
    }
    return srv_jobs_prepare(r, &w->spec, &w->text, &w->item.nj);
}

bool srv_jobs_prepare(srv_req *r, fb_spec *spec, char **text, db_new_job *nj)
{
    fb_err err;
    fb_err_clear(&err);
    if (srv_models_is_job(spec->workload)) {
        srv_model_refusal why;
        if (srv_models_job(r, spec, &why, &err) != FB_OK) {
            srv_reply_error(r, why.status, why.code, err.field[0] ? err.field : NULL, "%s",
                            err.msg);
            return false;
        }
    } else if (resolve(r, spec, &err) != FB_OK) {
        reply_resolve_err(r, &err);
        return false;
    }
    if (srv_jobs_admit(spec, &r->user, &err) != FB_OK ||
        srv_jobs_encode(spec, &r->user, text, nj, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return false;
    }
    return true;
}

/* A keyed submit whose key already has a job is answered with it (or 422 for
 * another body) before any limit: a resend creates nothing, so the rate limit
 * and the quota, which would answer 429, do not apply.  True when answered. */
static bool replayed(srv_req *r, create_wait *w)
{
    fb_code rc;

    if (!w->idem.present)
        return false;
    fb_err_clear(&w->item.res.err);
    rc = db_job_find_idem(r->db, r->user.id, &w->idem.db, &w->item.res.job, &w->how,
                          &w->item.res.err);
    if (rc == FB_ENOTFOUND) {
        w->how = DB_IDEM_NEW;
        return false;
    }
    w->item.res.rc = rc;
    create_reply(r);
    return true;
}

/* Validates here; creates the job on the request's connection when nothing
 * else is being committed, else hands it to the submit batcher and suspends
 * the request until its batch has committed (create_reply answers). */
void srv_jobs_create(srv_req *r)
{
    create_wait *w = calloc(1, sizeof *w);

    if (!w) {
        srv_reply_error(r, 500, "internal", NULL, "out of memory");
        return;
    }
    fb_spec_init(&w->spec);
    r->data = w;
    r->data_free = create_wait_free;
    if (!srv_idem_read(r, &w->idem) || replayed(r, w) ||
        !srv_auth_submit_allowed(r, r->srv->ratelimit) || !create_prepare(r, w))
        return;
    if (w->idem.present) { /* on this request's connection: a keyed insert is its own */
        w->item.res.rc = db_job_create_idem(r->db, &w->item.nj, &w->idem.db, &w->item.res.job,
                                            &w->how, &w->item.res.err);
        create_reply(r);
        return;
    }
    if (srv_submit_direct_begin(r->srv->submit)) {
        w->item.res.rc = db_job_create(r->db, &w->item.nj, &w->item.res.job, &w->item.res.err);
        srv_submit_direct_end(r->srv->submit);
        create_reply(r);
        return;
    }
    w->item.done = create_answered;
    w->item.arg = r;
    /* Suspend first: the batcher may answer before srv_submit_enqueue returns. */
    srv_req_suspend(r, create_reply);
    srv_submit_enqueue(r->srv->submit, &w->item);
}

/* ---- Idempotency-Key ---- */

bool srv_idem_read(srv_req *r, srv_idem *out)
{
    const char *v = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Idempotency-Key");
    unsigned char d[SRV_TOKEN_DIGEST_LEN];
    memset(out, 0, sizeof *out);
    if (!v)
        return true;
    if (!srv_parse_idem_key(v)) {
        srv_reply_error(r, 400, "invalid_argument", "Idempotency-Key",
                        "Idempotency-Key must be 1..%d visible ASCII characters", SRV_IDEM_KEY_MAX);
        return false;
    }
    if (!srv_token_digest(r->body ? r->body : "", r->body ? r->body_len : 0, d)) {
        srv_reply_error(r, 500, "internal", NULL, "cannot hash the request");
        return false;
    }
    snprintf(out->key, sizeof out->key, "%s", v);
    for (int i = 0; i < SRV_TOKEN_DIGEST_LEN; i++)
        snprintf(out->hash + 2 * i, 3, "%02x", d[i]);
    out->db = (db_idem){out->key, out->hash};
    out->present = true;
    return true;
}

void srv_idem_mismatch(srv_req *r, const srv_idem *idem, const char *what)
{
    srv_reply_error(r, 422, "idempotency_mismatch", "Idempotency-Key",
                    "Idempotency-Key %s was used for another request: a retry must send the "
                    "same body, a new %s a new key",
                    idem->key, what);
}

/* ---- GET /api/v1/jobs ---- */

/* A label filter's key and value: up to FB_LABEL_MAX - 1 characters each, as
 * the schema counts (a stored label has as many bytes at most, so a longer one
 * matches nothing). */
#define LABEL_QUERY_BYTES (4 * (FB_LABEL_MAX - 1) + 1)

typedef struct list_query {
    db_job_filter f;
    char label_key[LABEL_QUERY_BYTES], label_value[LABEL_QUERY_BYTES];
} list_query;

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

/* Reads and checks the query; false when it answered 400. */
static bool list_query_read(srv_req *r, list_query *q)
{
    const char *state = srv_req_query(r, "state"), *label = srv_req_query(r, "label");
    const char *limit = srv_req_query(r, "limit"), *cursor = srv_req_query(r, "cursor");
    const char *owner = srv_req_query(r, "owner");
    long lim = LIST_LIMIT_DEFAULT;

    memset(q, 0, sizeof *q);
    if (state && !srv_state_valid(state)) {
        srv_reply_error(r, 400, "invalid_argument", "state",
                        "state must be queued, running, succeeded, failed or canceled");
        return false;
    }
    if (!name_param(r, "workload", &q->f.workload) || !name_param(r, "engine", &q->f.engine) ||
        !name_param(r, "device", &q->f.device))
        return false;
    if (label && !srv_parse_label(label, FB_LABEL_MAX - 1, q->label_key, sizeof q->label_key,
                                  q->label_value, sizeof q->label_value)) {
        srv_reply_error(r, 400, "invalid_argument", "label",
                        "label must be key:value, each 1..%d characters", FB_LABEL_MAX - 1);
        return false;
    }
    if (limit && !srv_parse_int_range(limit, 1, LIST_LIMIT_MAX, &lim)) {
        srv_reply_error(r, 400, "invalid_argument", "limit", "limit must be 1..%d", LIST_LIMIT_MAX);
        return false;
    }
    if (cursor && !srv_parse_id(cursor, strlen(cursor), &q->f.before_id)) {
        srv_reply_error(r, 400, "invalid_argument", "cursor", "not a cursor from next_cursor");
        return false;
    }
    if (owner && strcmp(owner, "me") != 0) {
        srv_reply_error(r, 400, "invalid_argument", "owner", "owner takes me (your own jobs)");
        return false;
    }
    if (owner && r->user.id == 0) {
        srv_reply_error(r, 400, "invalid_argument", "owner",
                        "owner=me needs a signed-in user: this server runs without tokens");
        return false;
    }
    q->f.owner_id = owner ? r->user.id : 0;
    q->f.state = state;
    q->f.limit = (int)lim;
    if (label) {
        q->f.label_key = q->label_key;
        q->f.label_value = q->label_value;
    }
    return true;
}

/* {"items": [...], "next_cursor": "N" | null}; NULL on ENOMEM. */
static cJSON *page_json(const db_job *items, int n, int64_t next)
{
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "items");
    char cur[24];

    if (!arr) {
        cJSON_Delete(o);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        cJSON *j = srv_job_json(&items[i]);
        if (!j || !cJSON_AddItemToArray(arr, j)) {
            cJSON_Delete(j);
            cJSON_Delete(o);
            return NULL;
        }
    }
    snprintf(cur, sizeof cur, "%" PRId64, next);
    if (!cJSON_AddItemToObject(o, "next_cursor",
                               next > 0 ? cJSON_CreateString(cur) : cJSON_CreateNull())) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

void srv_jobs_list(srv_req *r)
{
    list_query q;
    db_job *items = NULL;
    int n = 0;
    int64_t next = 0;
    fb_err err;

    fb_err_clear(&err);
    if (!list_query_read(r, &q))
        return;
    if (db_job_list(r->db, &q.f, &items, &n, &next, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    srv_reply_json(r, 200, page_json(items, n, next));
    for (int i = 0; i < n; i++)
        db_job_free(&items[i]);
    free(items);
}
