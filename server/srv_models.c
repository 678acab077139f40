/* srv_models: see srv_models.h. */
#include "srv_models.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "db_models.h"
#include "fb_log.h"

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
    if (!declared_length(r, &declared))
        return false;
    if (declared > limit) {
        srv_reply_error(r, 413, "payload_too_large", NULL,
                        "the archive is %" PRId64 " bytes, over this server's limit of %" PRId64
                        " bytes (--max-model-bytes)",
                        declared, limit);
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
