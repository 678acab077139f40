#include "srv_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fb_log.h"
#include "fb_spec.h"
#include "srv_explain.h"
#include "srv_jobs.h"
#include "srv_metrics.h"
#include "srv_ops.h"
#include "srv_static.h"
#include "srv_users.h"
#include "srv_workers.h"
#include "srv_workloads.h"
/* issue 6: suites, results, compare, exports, vendor files */
#include "srv_compare.h"
#include "srv_export.h"
#include "srv_results.h"
#include "srv_suites.h"
#include "srv_vendor.h"

/* Idle: no byte for this long closes a connection. */
#define SRV_CONN_TIMEOUT_S 30
/* Connections in all, and from one address: one client cannot hold the server
 * (a byte every 29 s once kept all 1,000 open). */
#define SRV_CONN_LIMIT  1000
#define SRV_CONN_PER_IP 64
/* Seconds from a request's headers to the end of its body. */
#define SRV_REQUEST_DEADLINE 60
/* HTTP threads beyond the database connections: with every connection held by
 * slow reads, these still serve /healthz, /readyz and the static files (and
 * answer 503 to what needs the database once the pool wait ends). */
#define SRV_SPARE_THREADS 2

/* The route table: API.md's endpoints, then operations, then the web files.
 * The first route whose pattern and method match wins. */
static const srv_route routes[] = {
    {"POST", "/api/v1/jobs", srv_jobs_create, true, SRV_ROLE_USER},
    {"GET", "/api/v1/jobs", srv_jobs_list, true, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/jobs/{id}", srv_jobs_get, true, SRV_ROLE_VIEWER},
    {"POST", "/api/v1/jobs/{id}/cancel", srv_jobs_cancel, true, SRV_ROLE_USER},
    {"GET", "/api/v1/jobs/{id}/kernels", srv_jobs_kernels, true, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/jobs/{id}/explain", srv_jobs_explain_get, true, SRV_ROLE_VIEWER},
    {"POST", "/api/v1/jobs/{id}/explain", srv_jobs_explain_post, true, SRV_ROLE_USER},
    {"GET", "/api/v1/workloads", srv_workloads_list, true, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/workers", srv_workers_list, true, SRV_ROLE_VIEWER},
    {"POST", "/api/v1/workers/{*}", srv_workers_action, true, SRV_ROLE_ADMIN},
    {"GET", "/api/v1/jobs/{id}/trace", srv_export_trace, true, SRV_ROLE_VIEWER},
    {"POST", "/api/v1/suites", srv_suites_create, true, SRV_ROLE_USER},
    {"GET", "/api/v1/suites", srv_suites_list, true, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/suites/{id}", srv_suites_get, true, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/results", srv_results_list, true, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/compare", srv_compare_get, true, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/users", srv_users_list, true, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/users/me", srv_users_me, true, SRV_ROLE_VIEWER},
    {"GET", "/api/v1/openapi.json", srv_static_openapi, false, SRV_ROLE_NONE},
    {"GET", "/healthz", srv_ops_healthz, false, SRV_ROLE_NONE},
    {"GET", "/readyz", srv_ops_readyz, false, SRV_ROLE_NONE},
    {"GET", "/metrics", srv_metrics_handle, false, SRV_ROLE_NONE},
    {"GET", "/", srv_static_index, false, SRV_ROLE_NONE},
    {"GET", "/static/vendor/{*}", srv_vendor_file, false, SRV_ROLE_NONE},
    {"GET", "/static/{*}", srv_static_file, false, SRV_ROLE_NONE},
};
#define N_ROUTES (sizeof routes / sizeof routes[0])

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

/* API.md's status and code for an error from a lower layer. */
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
    if (!r->resumed) /* counted once, however often it suspends */
        atomic_fetch_add(&r->srv->suspended, 1);
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

static double elapsed_s(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* ---- routing ---- */

/* HEAD is served by the GET route; MHD sends the headers only. */
static bool method_is(const srv_req *r, const char *m)
{
    return strcmp(r->method, m) == 0 || (strcmp(m, "GET") == 0 && strcmp(r->method, "HEAD") == 0);
}

/* Finds the route for the request; when only the method is wrong, route stays
 * NULL but route_label names the path's pattern (metrics). */
static void route_find(srv_req *r)
{
    r->route_label = "unmatched";
    for (size_t i = 0; i < N_ROUTES; i++) {
        srv_caps caps;
        if (!srv_path_match(routes[i].pattern, r->path, &caps))
            continue;
        if (strcmp(r->route_label, "unmatched") == 0)
            r->route_label = routes[i].pattern;
        if (method_is(r, routes[i].method)) {
            r->route = &routes[i];
            r->route_label = routes[i].pattern;
            r->caps = caps;
            return;
        }
    }
}

/* 404, or 405 with an Allow header listing the path's methods. */
static void route_miss(srv_req *r)
{
    char allow[64] = "";
    size_t len = 0;

    for (size_t i = 0; i < N_ROUTES; i++) {
        if (!srv_path_match(routes[i].pattern, r->path, NULL) || strstr(allow, routes[i].method))
            continue;
        len += (size_t)snprintf(allow + len, sizeof allow - len, "%s%s", len ? ", " : "",
                                routes[i].method);
        if (len >= sizeof allow)
            break;
    }
    if (!allow[0]) {
        srv_reply_error(r, 404, "not_found", NULL, "no route for %s", r->path);
        return;
    }
    srv_reply_error(r, 405, "method_not_allowed", NULL, "%s is not allowed on %s (allowed: %s)",
                    r->method, r->path, allow);
    srv_reply_header(r, MHD_HTTP_HEADER_ALLOW, allow);
}

static void no_connection(srv_req *r, const fb_err *err)
{
    fb_warn("%s %s: no database connection: %s", r->method, r->path, err->msg);
    srv_reply_error(r, 503, "unavailable", NULL, "the database is unavailable, retry later");
}

/* The handler on r->db, which goes back to the pool right after; with
 * authentication on, only for a token of the route's role. */
static void handle_with_db(srv_req *r)
{
    if (!r->srv->cfg.auth)
        r->user = (srv_user){.id = 0, .role = SRV_ROLE_ADMIN};
    if (!r->srv->cfg.auth || r->route->need == SRV_ROLE_NONE || srv_auth_request(r, r->route->need))
        r->route->handler(r);
    srv_pool_release(r->srv->pool, r->db, r->db_broken);
    r->db = NULL;
}

/* A slot came free for a queued request (any thread): wake its connection. */
static void pool_ready(srv_pool_waiter *w)
{
    srv_req *r = (srv_req *)((char *)w - offsetof(srv_req, pool_wait));
    srv_req_resume(r);
}

static void resumed_with_db(srv_req *r)
{
    fb_err err;

    fb_err_clear(&err);
    if (srv_pool_take(r->srv->pool, &r->pool_wait, &r->db, &err) != FB_OK) {
        no_connection(r, &err);
        return;
    }
    handle_with_db(r);
}

/* With every connection busy the request waits suspended, holding no HTTP
 * thread: the threads stay free for what needs no database (/healthz) and a
 * burst of slow reads cannot stall the server.  Each statement is bounded by
 * the pool's statement timeout, so a slot always comes free. */
static void run_with_db(srv_req *r)
{
    bool got = false;
    fb_err err;

    fb_err_clear(&err);
    if (!atomic_load(&r->srv->db_ready)) {
        srv_reply_error(r, 503, "unavailable", NULL, "the database is not ready yet");
        return;
    }
    if (srv_pool_try(r->srv->pool, &r->db, &got, &err) != FB_OK) {
        no_connection(r, &err);
        return;
    }
    if (got) {
        handle_with_db(r);
        return;
    }
    /* Suspended before queued: the slot may come free (and resume us) at once. */
    r->pool_wait.ready = pool_ready;
    srv_req_suspend(r, resumed_with_db);
    srv_pool_wait(r->srv->pool, &r->pool_wait);
}

/* A state-changing request must say it is an API call: a JSON content type
 * or the X-FusionBench-Client header.  A page elsewhere can send neither
 * without a CORS preflight, which this server never grants, so a form or an
 * <img> on another site cannot cancel jobs (CSRF). */
static bool csrf_safe(const srv_req *r)
{
    if (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0)
        return true;
    return srv_content_type_is_json(MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                                MHD_HTTP_HEADER_CONTENT_TYPE)) ||
           MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-FusionBench-Client") != NULL;
}

/* A query parameter no handler can take as text: a NUL (%00) would silently
 * cut its C string short, and bytes that are not UTF-8 the database refuses. */
typedef struct query_bad {
    const char *key;
    const char *why;
} query_bad;

static enum MHD_Result query_bad_it(void *cls, enum MHD_ValueKind kind, const char *key,
                                    size_t key_size, const char *value, size_t value_size)
{
    query_bad *b = cls;
    (void)kind;
    if (strlen(key) != key_size || !fb_utf8_valid(key)) {
        b->key = "";
        b->why = "a query parameter's name holds a NUL byte (%00) or is not UTF-8";
        return MHD_NO;
    }
    if (value && strlen(value) != value_size)
        b->why = "holds a NUL byte (%00)";
    else if (value && !fb_utf8_valid(value))
        b->why = "is not UTF-8";
    else
        return MHD_YES;
    b->key = key;
    return MHD_NO;
}

/* The first query parameter no handler can take (key "" when its name is the
 * trouble), or key NULL. */
static query_bad query_check(const srv_req *r)
{
    query_bad b = {NULL, NULL};
    MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, query_bad_it, &b);
    return b;
}

static void dispatch(srv_req *r)
{
    query_bad bad = {NULL, NULL};
    const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);

    if (r->body_too_big)
        srv_reply_error(r, 413, "payload_too_large", NULL, "request body over %zu bytes",
                        r->srv->cfg.max_body);
    else if (!srv_host_allowed(host, r->srv->cfg.allowed_hosts))
        srv_reply_error(r, 403, "forbidden", NULL,
                        "Host '%.100s' is not a name of this server (allowed: %s; see "
                        "--allowed-hosts)",
                        host ? host : "", r->srv->cfg.allowed_hosts);
    else if (!r->route)
        route_miss(r);
    else if ((bad = query_check(r)).key && !bad.key[0])
        srv_reply_error(r, 400, "invalid_argument", NULL, "%s", bad.why);
    else if (bad.key)
        srv_reply_error(r, 400, "invalid_argument", bad.key, "query parameter '%.100s' %s", bad.key,
                        bad.why);
    else if (!csrf_safe(r))
        srv_reply_error(r, 415, "unsupported_media_type", NULL,
                        "a %s needs Content-Type: application/json (or an X-FusionBench-Client "
                        "header)",
                        r->method);
    else if (r->route->needs_db)
        run_with_db(r);
    else
        r->route->handler(r);
    if (!r->resp && !r->suspended)
        srv_reply_error(r, 500, "internal", NULL, "handler set no response");
}

/* ---- request lifecycle ---- */

static srv_req *req_new(srv_ctx *ctx, struct MHD_Connection *conn, const char *url,
                        const char *method)
{
    srv_req *r = calloc(1, sizeof *r);

    if (!r)
        return NULL;
    r->srv = ctx;
    r->conn = conn;
    clock_gettime(CLOCK_MONOTONIC, &r->t0);
    snprintf(r->method, sizeof r->method, "%s", method);
    r->path = strndup(url, SRV_PATH_MAX + 1);
    if (!r->path) {
        free(r);
        return NULL;
    }
    route_find(r);
    return r;
}

static void req_free(srv_req *r)
{
    if (!r)
        return;
    if (r->resp)
        MHD_destroy_response(r->resp);
    if (r->data_free)
        r->data_free(r->data);
    if (r->resumed) /* was suspended: srv_http_drain counts it */
        atomic_fetch_sub(&r->srv->suspended, 1);
    free(r->body);
    free(r->path);
    free(r);
}

/* A declared Content-Length over the limit is refused before reading the body. */
static bool declared_too_big(const srv_req *r)
{
    const char *cl =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    int64_t n;

    if (!cl || strcmp(cl, "0") == 0)
        return false;
    return !srv_parse_id(cl, strlen(cl), &n) || (uint64_t)n > r->srv->cfg.max_body;
}

/* Appends a chunk of body; past max_body the rest is read and dropped (MHD cannot
 * answer in mid-upload), and the request ends with 413. */
static void body_append(srv_req *r, const char *data, size_t n)
{
    char *grown;

    if (r->body_too_big || n > r->srv->cfg.max_body - r->body_len) {
        r->body_too_big = true;
        return;
    }
    grown = realloc(r->body, r->body_len + n + 1);
    if (!grown) {
        r->body_too_big = true;
        return;
    }
    memcpy(grown + r->body_len, data, n);
    r->body = grown;
    r->body_len += n;
    r->body[r->body_len] = '\0';
}

static bool past_deadline(const srv_req *r)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec - r->t0.tv_sec > SRV_REQUEST_DEADLINE;
}

static enum MHD_Result queue_reply(srv_req *r)
{
    enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    srv_req *r = *req_cls;

    if (!r) {
        r = req_new(cls, conn, url, method);
        if (!r)
            return MHD_NO;
        *req_cls = r;
        if (!declared_too_big(r))
            return MHD_YES;
        r->body_too_big = true;
        dispatch(r);
        return queue_reply(r);
    }
    if (*upload_data_size > 0) {
        if (r->status) { /* answered early (413 on Content-Length): drop the rest */
            *upload_data_size = 0;
            return MHD_YES;
        }
        body_append(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        /* A body past the limit (chunked, or longer than declared) or one that
         * trickles past the deadline: close the connection rather than read on. */
        if (r->body_too_big || past_deadline(r)) {
            fb_warn("%s %s: %s; closing the connection", r->method, r->path,
                    r->body_too_big ? "body over the limit"
                                    : "body still arriving past the request deadline");
            return MHD_NO;
        }
        return MHD_YES;
    }
    if (r->suspended) { /* back after srv_req_resume: the handler finishes */
        r->suspended = false;
        r->resumed(r);
        if (r->suspended) /* suspended again (a queued request's handler did) */
            return MHD_YES;
        if (!r->resp)
            srv_reply_error(r, 500, "internal", NULL, "handler set no response");
        return queue_reply(r);
    }
    if (r->status) /* answered early (413 on Content-Length) */
        return MHD_YES;
    dispatch(r);
    if (r->suspended)
        return MHD_YES;
    return queue_reply(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    srv_req *r = *req_cls;

    if (!r)
        return;
    if (r->status) {
        double s = elapsed_s(&r->t0);
        srv_metrics_observe(r->route_label, r->method, r->status, s);
        fb_debug("%s %s %d %.3fms%s", r->method, r->path, r->status, s * 1e3,
                 toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)");
    }
    req_free(r);
    *req_cls = NULL;
}

__attribute__((format(printf, 2, 0))) static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    size_t n;

    vsnprintf(line, sizeof line, fmt, ap);
    n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    fb_warn("libmicrohttpd: %s", line);
}

/* ---- daemon ---- */

typedef union srv_sockaddr {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
} srv_sockaddr;

static fb_code bind_addr(const srv_config *cfg, srv_sockaddr *sa, unsigned *flags, fb_err *err)
{
    memset(sa, 0, sizeof *sa);
    if (inet_pton(AF_INET, cfg->bind_addr, &sa->in4.sin_addr) == 1) {
        sa->in4.sin_family = AF_INET;
        sa->in4.sin_port = htons((uint16_t)cfg->port);
        return FB_OK;
    }
    if (inet_pton(AF_INET6, cfg->bind_addr, &sa->in6.sin6_addr) == 1) {
        sa->in6.sin6_family = AF_INET6;
        sa->in6.sin6_port = htons((uint16_t)cfg->port);
        *flags |= MHD_USE_IPv6;
        return FB_OK;
    }
    return fb_err_set(err, FB_EINVAL, "bind", "not a numeric IPv4 or IPv6 address: %s",
                      cfg->bind_addr);
}

fb_code srv_http_start(srv_ctx *ctx, fb_err *err)
{
    /* A fixed thread pool: N threads each poll many connections (epoll), so the
     * thread count, and with it the database pool, stays N however many clients
     * connect; thread-per-connection would let slow clients cost a thread each.
     * Suspend/resume: a submit waits for its batch's commit (srv_submit) with
     * its connection suspended, not holding a thread. */
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    srv_sockaddr sa;
    const union MHD_DaemonInfo *info;
    fb_code rc = bind_addr(&ctx->cfg, &sa, &flags, err);

    if (rc)
        return rc;
    /* The logger must be the first option, or MHD logs the earlier ones itself. */
    ctx->daemon = MHD_start_daemon(
        flags, (uint16_t)ctx->cfg.port, NULL, NULL, on_request, ctx, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, &sa.sa, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)(ctx->cfg.threads + SRV_SPARE_THREADS), MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        ctx, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SRV_CONN_TIMEOUT_S,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)SRV_CONN_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)SRV_CONN_PER_IP, MHD_OPTION_END);
    if (!ctx->daemon)
        return fb_err_set(err, FB_EIO, NULL, "cannot listen on %s:%d", ctx->cfg.bind_addr,
                          ctx->cfg.port);
    info = MHD_get_daemon_info(ctx->daemon, MHD_DAEMON_INFO_BIND_PORT);
    ctx->bound_port = info ? info->port : ctx->cfg.port;
    return FB_OK;
}

void srv_http_drain(srv_ctx *ctx, int max_ms)
{
    struct timespec tick = {0, 10 * 1000000L};

    for (int waited = 0; waited < max_ms && atomic_load(&ctx->suspended) > 0; waited += 10)
        nanosleep(&tick, NULL);
    if (atomic_load(&ctx->suspended) > 0)
        fb_warn("stopping with %d request(s) not yet answered", atomic_load(&ctx->suspended));
}

void srv_http_stop(srv_ctx *ctx)
{
    if (!ctx->daemon)
        return;
    MHD_stop_daemon(ctx->daemon);
    ctx->daemon = NULL;
}
