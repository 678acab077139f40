/* srv_models: see srv_models.h. */
#include "srv_models.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "db_models.h"
#include "fb_log.h"
#include "srv_catalog.h"

/* An upload's body must arrive at least this fast (bytes per second) after a
 * first minute: a slow client cannot hold a database connection forever. */
#define UPLOAD_MIN_RATE (256 * 1024)

static db_model_viewer viewer_of(const srv_req *r)
{
    return (db_model_viewer){.user_id = r->user.id, .admin = r->user.role >= SRV_ROLE_ADMIN};
}

static bool model_id(srv_req *r, int64_t *id)
{
    char buf[32];
    if (srv_req_cap(r, 0, buf, sizeof buf) && srv_parse_id(buf, strlen(buf), id))
        return true;
    srv_reply_error(r, 404, "not_found", NULL, "no such model");
    return false;
}

/* ---- POST /api/v1/models: the upload, streamed ---- */

typedef struct upload {
    db_model_upload u;
    char name[DB_MODEL_NAME_MAX + 1];
    char visibility[8];
    EVP_MD_CTX *sha;
    unsigned char *buf; /* DB_MODEL_CHUNK bytes: what arrived since the last chunk */
    size_t fill;
    bool open; /* the upload's transaction is open on r->own_db */
    db_conn *db;
} upload;

static void upload_free(void *p)
{
    upload *up = p;
    if (!up)
        return;
    if (up->open) /* the client went away, or a chunk failed: nothing stays */
        db_model_upload_abort(up->db);
    EVP_MD_CTX_free(up->sha);
    free(up->buf);
    free(up);
}

/* The usual mapping, but a quota is not a body too large: its own code. */
static void reply_err(srv_req *r, const fb_err *err)
{
    if (err->code == FB_ETOOBIG && strcmp(err->field, "quota") == 0)
        srv_reply_error(r, 413, "storage_quota_exceeded", "quota", "%s", err->msg);
    else
        srv_reply_fb_err(r, err);
}

static void upload_failed(srv_req *r, upload *up, const fb_err *err)
{
    if (up->open) {
        db_model_upload_abort(up->db);
        up->open = false;
    }
    reply_err(r, err);
}

static bool declared_length(srv_req *r, int64_t *n)
{
    const char *cl =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!cl) {
        srv_reply_error(r, 411, "length_required", NULL,
                        "an upload needs a Content-Length (the archive's size, checked before "
                        "anything is stored)");
        return false;
    }
    if (!srv_parse_id(cl, strlen(cl), n) || *n <= 0) {
        srv_reply_error(r, 400, "invalid_argument", NULL, "an empty archive");
        return false;
    }
    return true;
}

static bool upload_begin(srv_req *r)
{
    const char *name = srv_req_query(r, "name"), *vis = srv_req_query(r, "visibility");
    int64_t declared = 0, limit = r->srv->cfg.max_model_bytes;
    fb_err err;
    upload *up;

    fb_err_clear(&err);
    if (!declared_length(r, &declared))
        return false;
    if (declared > limit) {
        srv_reply_error(r, 413, "payload_too_large", NULL,
                        "the archive is %" PRId64 " bytes, over this server's limit of %" PRId64
                        " bytes (--max-model-bytes)",
                        declared, limit);
        return false;
    }
    /* From here a refusal is sent after the body, read and dropped: a client
     * that sends the whole body before reading then reads the answer. */
    r->drain_refusal = true;
    if (!name || !db_model_name_valid(name)) {
        srv_reply_error(r, 400, "invalid_argument", "name",
                        "name: 1-64 letters, digits, '.', '_' or '-', starting with a letter or "
                        "digit (the query parameter ?name=)");
        return false;
    }
    if (vis && strcmp(vis, "private") != 0 && strcmp(vis, "lab") != 0) {
        srv_reply_error(r, 400, "invalid_argument", "visibility",
                        "visibility is private (only you and admins see it) or lab (everyone "
                        "signed in)");
        return false;
    }
    up = calloc(1, sizeof *up);
    if (up)
        up->buf = malloc(DB_MODEL_CHUNK);
    if (up)
        up->sha = EVP_MD_CTX_new();
    if (!up || !up->buf || !up->sha || EVP_DigestInit_ex(up->sha, EVP_sha256(), NULL) != 1) {
        upload_free(up);
        srv_reply_error(r, 503, "unavailable", NULL, "out of memory, retry later");
        return false;
    }
    r->data = up;
    r->data_free = upload_free;
    snprintf(up->name, sizeof up->name, "%s", name);
    snprintf(up->visibility, sizeof up->visibility, "%s", vis ? vis : "private");
    up->db = r->own_db;
    up->u = (db_model_upload){.owner_id = r->user.id,
                              .name = up->name,
                              .visibility = up->visibility,
                              .declared = declared,
                              .quota = r->srv->cfg.model_quota};
    if (db_model_upload_begin(up->db, &up->u, &err) != FB_OK) {
        reply_err(r, &err);
        return false;
    }
    up->open = true;
    int64_t secs = 60 + declared / UPLOAD_MIN_RATE;
    r->deadline_s = secs > INT32_MAX ? INT32_MAX : (int)secs;
    return true;
}

static bool flush(srv_req *r, upload *up)
{
    fb_err err;
    fb_err_clear(&err);
    if (up->fill == 0)
        return true;
    if (db_model_upload_chunk(up->db, &up->u, up->buf, up->fill, &err) != FB_OK) {
        upload_failed(r, up, &err);
        return false;
    }
    up->fill = 0;
    return true;
}

static bool upload_data(srv_req *r, const char *p, size_t n)
{
    upload *up = r->data;
    if (EVP_DigestUpdate(up->sha, p, n) != 1) {
        fb_err err;
        fb_err_set(&err, FB_EINTERNAL, NULL, "SHA-256 failed");
        upload_failed(r, up, &err);
        return false;
    }
    while (n > 0) {
        size_t take = DB_MODEL_CHUNK - up->fill;
        if (take > n)
            take = n;
        memcpy(up->buf + up->fill, p, take);
        up->fill += take;
        p += take;
        n -= take;
        if (up->fill == DB_MODEL_CHUNK && !flush(r, up))
            return false;
    }
    return true;
}

static void upload_end(srv_req *r)
{
    upload *up = r->data;
    unsigned char sha[DB_SHA256_LEN];
    unsigned int len = 0;
    char *json = NULL;
    char where[64];
    fb_err err;

    fb_err_clear(&err);
    if (!flush(r, up))
        return;
    if (up->u.stored != up->u.declared) { /* MHD stops at Content-Length; a bug otherwise */
        fb_err_set(&err, FB_EINVAL, NULL,
                   "the body had %" PRId64 " bytes, not the %" PRId64 " its Content-Length said",
                   up->u.stored, up->u.declared);
        upload_failed(r, up, &err);
        return;
    }
    if (EVP_DigestFinal_ex(up->sha, sha, &len) != 1 || len != DB_SHA256_LEN) {
        fb_err_set(&err, FB_EINTERNAL, NULL, "SHA-256 failed");
        upload_failed(r, up, &err);
        return;
    }
    up->open = false; /* finish commits, or rolls back itself */
    if (db_model_upload_finish(up->db, &up->u, sha, &json, &err) != FB_OK) {
        reply_err(r, &err);
        return;
    }
    fb_info("model %s uploaded by %s: %" PRId64 " bytes", up->name,
            r->user.name[0] ? r->user.name : "-", up->u.stored);
    cJSON *o = cJSON_Parse(json);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    where[0] = '\0';
    if (cJSON_IsNumber(id))
        snprintf(where, sizeof where, "/api/v1/models/%" PRId64, (int64_t)id->valuedouble);
    cJSON_Delete(o);
    srv_reply_owned(r, 201, "application/json", json, strlen(json));
    if (where[0])
        srv_reply_header(r, MHD_HTTP_HEADER_LOCATION, where);
}

const srv_stream srv_models_upload = {upload_begin, upload_data, upload_end};

/* ---- GET, DELETE ---- */

void srv_models_list(srv_req *r)
{
    db_model_viewer v = viewer_of(r);
    char *items = NULL;
    fb_err err;
    fb_err_clear(&err);
    if (db_model_list(r->db, &v, &items, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    srv_reply_items(r, items);
}

void srv_models_get(srv_req *r)
{
    db_model_viewer v = viewer_of(r);
    char *json = NULL;
    int64_t id;
    fb_err err;
    fb_err_clear(&err);
    if (!model_id(r, &id))
        return;
    if (db_model_get(r->db, &v, id, &json, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    srv_reply_owned(r, 200, "application/json", json, strlen(json));
}

void srv_models_delete(srv_req *r)
{
    db_model_viewer v = viewer_of(r);
    int64_t id;
    fb_err err;
    fb_err_clear(&err);
    if (!model_id(r, &id))
        return;
    if (db_model_delete(r->db, &v, id, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    /* 204: no body, so no Content-Type either */
    srv_reply_response(r, 204, NULL,
                       MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT));
}

/* ---- GET /api/v1/models/{id}/archive: the bytes, one chunk at a time ---- */

typedef struct download {
    srv_ctx *srv;
    db_conn *db; /* its own: the pool's goes back when the handler returns */
    db_model_blob blob;
    unsigned char *buf; /* the current chunk */
    size_t len;         /* its length */
    int seq;            /* its number (-1: none yet) */
} download;

static void download_free(void *cls)
{
    download *d = cls;
    db_close(d->db);
    free(d->buf);
    atomic_fetch_sub(&d->srv->streams, 1);
    free(d);
}

static ssize_t download_read(void *cls, uint64_t pos, char *out, size_t max)
{
    download *d = cls;
    int seq = (int)(pos / DB_MODEL_CHUNK);
    size_t off = (size_t)(pos % DB_MODEL_CHUNK);
    fb_err err;

    if ((int64_t)pos >= d->blob.size)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (seq != d->seq) {
        fb_err_clear(&err);
        if (db_model_chunk_read(d->db, d->blob.blob_id, seq, d->buf, DB_MODEL_CHUNK, &d->len,
                                &err) != FB_OK) {
            fb_warn("model archive %s, chunk %d: %s", d->blob.name, seq, err.msg);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        d->seq = seq;
    }
    if (off >= d->len)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (max > d->len - off)
        max = d->len - off;
    memcpy(out, d->buf + off, max);
    return (ssize_t)max;
}

void srv_models_archive(srv_req *r)
{
    db_model_viewer v = viewer_of(r);
    char disposition[DB_MODEL_NAME_MAX + 48];
    download *d;
    int64_t id;
    fb_err err;

    fb_err_clear(&err);
    if (!model_id(r, &id))
        return;
    d = calloc(1, sizeof *d);
    if (!d || !(d->buf = malloc(DB_MODEL_CHUNK))) {
        free(d);
        srv_reply_error(r, 503, "unavailable", NULL, "out of memory, retry later");
        return;
    }
    d->srv = r->srv;
    d->seq = -1;
    if (db_model_blob_get(r->db, &v, id, &d->blob, &err) != FB_OK) {
        free(d->buf);
        free(d);
        srv_reply_fb_err(r, &err);
        return;
    }
    if (atomic_fetch_add(&r->srv->streams, 1) >= r->srv->cfg.max_streams) {
        atomic_fetch_sub(&r->srv->streams, 1);
        free(d->buf);
        free(d);
        srv_reply_error(r, 503, "unavailable", NULL,
                        "%d uploads and downloads are under way, the server's most at once: "
                        "retry shortly",
                        r->srv->cfg.max_streams);
        srv_reply_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "5");
        return;
    }
    if (db_connect_io(r->srv->cfg.database_url, DB_IO_TIMEOUT_MS, &d->db, &err) != FB_OK) {
        d->db = NULL;
        download_free(d);
        srv_reply_fb_err(r, &err);
        return;
    }
    struct MHD_Response *resp = MHD_create_response_from_callback((uint64_t)d->blob.size, 64 * 1024,
                                                                  download_read, d, download_free);
    if (!resp) {
        download_free(d);
        srv_reply_error(r, 503, "unavailable", NULL, "out of memory, retry later");
        return;
    }
    srv_reply_response(r, 200, "application/octet-stream", resp);
    snprintf(disposition, sizeof disposition, "attachment; filename=\"%s.pt2\"", d->blob.name);
    srv_reply_header(r, "Content-Disposition", disposition);
    srv_reply_header(r, "X-Content-SHA256", d->blob.sha256);
}

/* ---- a job of an uploaded model ---- */

bool srv_models_is_job(const char *workload)
{
    char owner[FB_NAME_MAX], name[FB_NAME_MAX];
    const char *id = strncmp(workload, "model.", 6) == 0 ? workload + 6 : NULL;

    if (fb_model_ref_parse(workload, owner, name))
        return true;
    if (!id || !*id)
        return false;
    for (; *id; id++) {
        if (*id < '0' || *id > '9')
            return false;
    }
    return true;
}

/* A refusal of a job of an uploaded model: the HTTP status and error code
 * beside err's field and message. */
static fb_code refuse(srv_model_refusal *why, int status, const char *code, fb_err *err, fb_code rc,
                      const char *field, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

static fb_code refuse(srv_model_refusal *why, int status, const char *code, fb_err *err, fb_code rc,
                      const char *field, const char *fmt, ...)
{
    va_list ap;
    char msg[FB_ERR_MSG_MAX];

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    why->status = status;
    why->code = code;
    return fb_err_set(err, rc, field, "%s", msg);
}

/* The model a job names, as the caller may see it (cJSON, caller frees). */
static fb_code job_model(srv_req *r, const char *workload, cJSON **out, srv_model_refusal *why,
                         fb_err *err)
{
    db_model_viewer v = viewer_of(r);
    char owner[FB_NAME_MAX], name[FB_NAME_MAX], *json = NULL;
    int64_t id = 0;
    fb_code rc;

    *out = NULL;
    if (fb_model_ref_parse(workload, owner, name))
        rc = db_model_find(r->db, &v, owner[0] ? owner : NULL, name, &json, err);
    else if (!srv_parse_id(workload + 6, strlen(workload + 6), &id))
        rc = fb_err_set(err, FB_ENOTFOUND, "workload", "no model %s", workload);
    else
        rc = db_model_get(r->db, &v, id, &json, err);
    if (rc == FB_ENOTFOUND)
        return refuse(why, 422, "unknown_workload", err, rc, "workload", "%s", err->msg);
    if (rc != FB_OK)
        return refuse(why, 503, "unavailable", err, rc, NULL, "%s", err->msg);
    *out = cJSON_Parse(json);
    free(json);
    return *out ? FB_OK
                : refuse(why, 500, "internal", err, FB_EINTERNAL, NULL,
                         "a stored model did not parse");
}

/* The catalog entry of an uploaded model: an entry of the inductor engine (the
 * one with the most devices), renamed, its default batch the export's; as a
 * one-entry catalog (caller frees). */
static fb_code model_entry(srv_req *r, const char *workload, const char *engine, const cJSON *m,
                           int batch, cJSON **out, srv_model_refusal *why, fb_err *err)
{
    char *json = NULL, desc[160];
    const cJSON *e, *best = NULL;

    *out = NULL;
    if (db_workload_catalog(r->db, SRV_WORKER_STALE_S, &json, err) != FB_OK)
        return refuse(why, 503, "unavailable", err, err->code, NULL, "%s", err->msg);
    cJSON *cat = cJSON_Parse(json), *arr = cJSON_CreateArray(), *entry = NULL;
    free(json);
    cJSON_ArrayForEach(e, cat)
    {
        const char *eng = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "engine"));
        if (eng && strcmp(eng, engine) == 0 &&
            (!best || cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "devices")) >
                          cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(best, "devices"))))
            best = e;
    }
    if (best && arr && (entry = cJSON_Duplicate(best, 1)) != NULL) {
        const cJSON *owner = cJSON_GetObjectItemCaseSensitive(m, "owner");
        snprintf(desc, sizeof desc, "%s, uploaded by %s",
                 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "name")),
                 cJSON_IsString(owner) ? owner->valuestring : "no one");
        cJSON_ReplaceItemInObjectCaseSensitive(entry, "name", cJSON_CreateString(workload));
        cJSON_ReplaceItemInObjectCaseSensitive(entry, "domain", cJSON_CreateString("user"));
        cJSON_ReplaceItemInObjectCaseSensitive(entry, "description", cJSON_CreateString(desc));
        cJSON_ReplaceItemInObjectCaseSensitive(entry, "default_batch_size",
                                               cJSON_CreateNumber(batch));
        /* the zoo model's params are not the upload's: it takes any */
        cJSON_DeleteItemFromObjectCaseSensitive(entry, "params");
        cJSON_AddItemToArray(arr, entry);
    }
    cJSON_Delete(cat);
    if (!entry) {
        cJSON_Delete(arr);
        return refuse(why, 422, "unsupported", err, FB_EUNSUPPORTED, "engine",
                      "no live worker has the %s engine", engine);
    }
    *out = arr;
    return FB_OK;
}

/* The export's batch: the first input's first size (1 for a scalar input),
 * and whether every input's first dimension is dynamic. */
static int export_batch(const cJSON *info, bool *dynamic)
{
    const cJSON *in0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(info, "inputs"), 0);
    const cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(in0, "shape"), 0);
    *dynamic = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(info, "dynamic_batch"));
    return cJSON_IsNumber(d0) && d0->valuedouble >= 1 && d0->valuedouble <= FB_MAX_BATCH
               ? (int)d0->valuedouble
               : 1;
}

/* params.model: what the job names (set here, whatever was sent). */
static bool name_in_params(fb_spec *spec, const cJSON *m, int64_t id, const char *name)
{
    cJSON *ref = cJSON_CreateObject();
    const char *sha = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "sha256"));

    if (!ref || !cJSON_AddNumberToObject(ref, "id", (double)id) ||
        !cJSON_AddStringToObject(ref, "name", name) ||
        !cJSON_AddItemToObject(ref, "owner",
                               cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(m, "owner"), 1)) ||
        !cJSON_AddStringToObject(ref, "sha256", sha ? sha : "")) {
        cJSON_Delete(ref);
        return false;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(spec->params, "model");
    return cJSON_AddItemToObject(spec->params, "model", ref);
}

/* Whether engine (not inductor, which reads every ready model) runs model m:
 * the native engine does through the native form its preparing made
 * (info.native.form), else says why not (the operators it lacks). */
static fb_code native_check(const cJSON *m, const char *engine, const char *name,
                            srv_model_refusal *why, fb_err *err)
{
    const cJSON *nat =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "info"), "native");
    const char *cannot = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(nat, "why"));

    if (strcmp(engine, "native") != 0)
        return refuse(why, 422, "unsupported", err, FB_EUNSUPPORTED, "engine",
                      "the %s engine does not run uploaded models; the inductor and native "
                      "engines do",
                      engine);
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(nat, "ok")))
        return refuse(why, 422, "unsupported", err, FB_EUNSUPPORTED, "engine",
                      "the native engine cannot run model %s: %s; the inductor engine can "
                      "(engine: inductor)",
                      name, cannot ? cannot : "its preparing did not convert it");
    if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(nat, "form")))
        return refuse(why, 422, "unsupported", err, FB_EUNSUPPORTED, "engine",
                      "model %s was prepared before the native engine ran uploaded models, so "
                      "it has no native form: upload it again (the inductor engine runs it as "
                      "it is)",
                      name);
    return FB_OK;
}

fb_code srv_models_job(srv_req *r, fb_spec *spec, srv_model_refusal *why, fb_err *err)
{
    cJSON *m = NULL, *cat = NULL;
    const char *status, *name;
    char workload[FB_NAME_MAX];
    bool dynamic = false;
    fb_code rc = job_model(r, spec->workload, &m, why, err);
    int batch;

    if (rc != FB_OK)
        return rc;
    status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "status"));
    name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "name"));
    int64_t id = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "id"));
    if (!status || !name) {
        rc = refuse(why, 500, "internal", err, FB_EINTERNAL, NULL,
                    "a stored model lacks its status");
    } else if (strcmp(status, "preparing") == 0) {
        rc = refuse(why, 409, "model_not_ready", err, FB_ECONFLICT, "workload",
                    "model %s (id %" PRId64 ") is still being prepared: a worker with the "
                    "inductor engine reads it first; submit it once GET /api/v1/models/%" PRId64
                    " says ready",
                    name, id, id);
    } else if (strcmp(status, "ready") != 0) {
        const char *e = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "error"));
        rc = refuse(why, 422, "invalid_model", err, FB_EINVAL, "workload",
                    "model %s (id %" PRId64 ") is invalid: %s", name, id,
                    e ? e : "(no reason stored)");
    } else if (spec->engine[0] && strcmp(spec->engine, "inductor") != 0) {
        rc = native_check(m, spec->engine, name, why, err);
    }
    batch = rc == FB_OK ? export_batch(cJSON_GetObjectItemCaseSensitive(m, "info"), &dynamic) : 1;
    if (rc == FB_OK && !dynamic && spec->batch_size && spec->batch_size != batch)
        rc = refuse(why, 422, "unsupported", err, FB_EUNSUPPORTED, "batch_size",
                    "model %s was exported with a fixed batch of %d; submit batch_size %d, or "
                    "export it with a dynamic batch dimension (torch.export.Dim)",
                    name, batch, batch);
    if (rc == FB_OK) {
        snprintf(workload, sizeof workload, "model.%" PRId64, id);
        if (!spec->engine[0])
            snprintf(spec->engine, sizeof spec->engine, "inductor");
        rc = model_entry(r, workload, spec->engine, m, batch, &cat, why, err);
    }
    if (rc == FB_OK) {
        snprintf(spec->workload, sizeof spec->workload, "%s", workload);
        rc = srv_catalog_resolve(cat, spec, err);
        if (rc != FB_OK)
            rc = refuse(why, 422, "unsupported", err, rc, err->field, "%s", err->msg);
    }
    if (rc == FB_OK && !name_in_params(spec, m, id, name))
        rc = refuse(why, 500, "internal", err, FB_ENOMEM, NULL, "out of memory");
    cJSON_Delete(cat);
    cJSON_Delete(m);
    return rc;
}
