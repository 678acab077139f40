/* srv_req: see srv_req.h. */
#include "srv_req.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_log.h"
#include "fb_spec.h"

/* ---- responses ---- */

static bool reply_taken(srv_req *r)
{
    if (!r->resp)
        return false;
    fb_warn("%s %s: second reply ignored", r->method, r->path);
    return true;
}

static void reply_set(srv_req *r, int status, const char *content_type, struct MHD_Response *resp)
{
    if (!resp) {
        fb_error("%s %s: cannot create response", r->method, r->path);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    /* One policy on every response, API answers included (a JSON body opened as
     * a page must not run anything either): the dashboard loads only its own
     * files, has no <base> to hijack, posts no forms elsewhere, is framed by no
     * one.  No HSTS: the server speaks plain HTTP; the TLS proxy in front of it
     * sets that (docs/DEPLOY.md). */
    MHD_add_response_header(resp, "Content-Security-Policy", SRV_CSP);
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    r->resp = resp;
    r->status = status;
}

void srv_reply_response(srv_req *r, int status, const char *content_type, struct MHD_Response *resp)
{
    if (reply_taken(r)) {
        if (resp)
            MHD_destroy_response(resp);
        return;
    }
    reply_set(r, status, content_type, resp);
}

void srv_reply_owned(srv_req *r, int status, const char *content_type, char *body, size_t len)
{
    if (reply_taken(r)) {
        free(body);
        return;
    }
    reply_set(r, status, content_type ? content_type : "application/json",
              MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE));
    if (!r->resp)
        free(body);
}

void srv_reply_text(srv_req *r, int status, const char *content_type, const char *body, size_t len)
{
    if (reply_taken(r))
        return;
    reply_set(r, status, content_type ? content_type : "application/json",
              MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY));
}

void srv_reply_json(srv_req *r, int status, cJSON *json)
{
    char *text = json ? cJSON_PrintUnformatted(json) : NULL;

    cJSON_Delete(json);
    if (!text) {
        srv_reply_error(r, 500, "internal", NULL, "out of memory encoding the response");
        return;
    }
    srv_reply_owned(r, status, "application/json", text, strlen(text));
    if (r->resp)
        MHD_add_response_header(r->resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
}

void srv_reply_items(srv_req *r, char *items_json)
{
    static const char head[] = "{\"items\":";
    size_t n = strlen(items_json);
    char *body = malloc(sizeof head + n + 1);

    if (!body) {
        free(items_json);
        srv_reply_error(r, 500, "internal", NULL, "out of memory");
        return;
    }
    memcpy(body, head, sizeof head - 1);
    memcpy(body + sizeof head - 1, items_json, n);
    memcpy(body + sizeof head - 1 + n, "}", 2);
    free(items_json);
    srv_reply_owned(r, 200, "application/json", body, strlen(body));
    if (r->resp)
        MHD_add_response_header(r->resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
}

void srv_reply_error(srv_req *r, int status, const char *code, const char *field, const char *fmt,
                     ...)
{
    char msg[FB_ERR_MSG_MAX];
    cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fb_utf8_mend(msg); /* a JSON body is UTF-8, whatever was cut or echoed */
    if (e) {
        cJSON_AddStringToObject(e, "code", code);
        cJSON_AddStringToObject(e, "message", msg);
        if (field && field[0])
            cJSON_AddStringToObject(e, "field", field);
    }
    /* 503s come in floods while the database is down; the reconnect loop and
     * the db layer already say why, once. */
    if (status >= 500 && status != 503)
        fb_warn("%s %s: %d %s: %s", r->method, r->path, status, code, msg);
    /* A static fallback keeps the contract when even this allocation fails. */
    if (!e) {
        static const char oom[] =
            "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
        cJSON_Delete(root);
        srv_reply_text(r, 500, NULL, oom, sizeof oom - 1);
        return;
    }
    srv_reply_json(r, status, root);
}

void srv_reply_header(srv_req *r, const char *name, const char *value)
{
    if (r->resp)
        MHD_add_response_header(r->resp, name, value);
}

/* docs/API.md's status and code for an error from a lower layer. */
static int fb_code_status(fb_code c, const char **code)
{
    *code = fb_code_name(c);
    switch (c) {
    case FB_EJSON:
    case FB_EINVAL:
        return 400;
    case FB_ENOTFOUND:
        return 404;
    case FB_ECONFLICT:
        return 409;
    case FB_ETOOBIG:
        *code = "payload_too_large";
        return 413;
    case FB_EUNSUPPORTED:
        return 422;
    case FB_EUNAVAIL:
        return 503;
    case FB_ETIMEOUT:
        *code = "timeout";
        return 503;
    case FB_EFORBIDDEN:
        return 403;
    default:
        *code = "internal";
        return 500;
    }
}

void srv_reply_fb_err(srv_req *r, const fb_err *err)
{
    const char *code;
    int status = fb_code_status(err->code, &code);

    if (err->code == FB_EUNAVAIL)
        r->db_broken = true;
    if (status == 500)
        fb_error("%s %s: %s: %s", r->method, r->path, fb_code_name(err->code), err->msg);
    /* Server-side details (hosts, SQL) stay in the log: the db layer logged them. */
    srv_reply_error(r, status, code, err->field, "%s",
                    status == 500   ? "internal error (see the server log)"
                    : status == 503 ? "the database is unavailable, retry later"
                                    : err->msg);
}

/* ---- request helpers ---- */

bool srv_req_cap(const srv_req *r, int i, char *buf, size_t bufsz)
{
    if (i < 0 || i >= r->caps.n || r->caps.cap[i].len >= bufsz)
        return false;
    memcpy(buf, r->path + r->caps.cap[i].off, r->caps.cap[i].len);
    buf[r->caps.cap[i].len] = '\0';
    return true;
}

const char *srv_req_query(const srv_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

void srv_req_suspend(srv_req *r, void (*resumed)(srv_req *r))
{
    r->suspended = true;
    r->resumed = resumed;
    MHD_suspend_connection(r->conn);
}

void srv_req_resume(srv_req *r)
{
    /* MHD picks the connection up on its own thread (the daemon's inter-thread
     * channel wakes it) and calls on_request again. */
    MHD_resume_connection(r->conn);
}
