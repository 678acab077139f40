/* srv_route: see srv_route.h. */
#include "srv_route.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "fb_log.h"
#include "fb_spec.h"
#include "srv_compare.h"
#include "srv_explain.h"
#include "srv_export.h"
#include "srv_jobs.h"
#include "srv_metrics.h"
#include "srv_models.h"
#include "srv_ops.h"
#include "srv_results.h"
#include "srv_static.h"
#include "srv_suites.h"
#include "srv_users.h"
#include "srv_vendor.h"
#include "srv_workers.h"
#include "srv_workloads.h"

/* The route table: docs/API.md's endpoints, then operations, then the web files.
 * The first route whose pattern and method match wins. */
static const srv_route routes[] = {
    {"POST", "/api/v1/jobs", srv_jobs_create, true, SRV_ROLE_USER, false, NULL},
    {"GET", "/api/v1/jobs", srv_jobs_list, true, SRV_ROLE_VIEWER, false, NULL},
    {"GET", "/api/v1/jobs/{id}", srv_jobs_get, true, SRV_ROLE_VIEWER, false, NULL},
    {"POST", "/api/v1/jobs/{id}/cancel", srv_jobs_cancel, true, SRV_ROLE_USER, false, NULL},
    {"GET", "/api/v1/jobs/{id}/kernels", srv_jobs_kernels, true, SRV_ROLE_VIEWER, false, NULL},
    {"GET", "/api/v1/jobs/{id}/explain", srv_jobs_explain_get, true, SRV_ROLE_VIEWER, false, NULL},
    {"POST", "/api/v1/jobs/{id}/explain", srv_jobs_explain_post, true, SRV_ROLE_USER, false, NULL},
    {"GET", "/api/v1/workloads", srv_workloads_list, true, SRV_ROLE_VIEWER, false, NULL},
    {"GET", "/api/v1/workers", srv_workers_list, true, SRV_ROLE_VIEWER, false, NULL},
    {"POST", "/api/v1/workers/{*}", srv_workers_action, true, SRV_ROLE_ADMIN, false, NULL},
    {"GET", "/api/v1/jobs/{id}/trace", srv_export_trace, true, SRV_ROLE_VIEWER, false, NULL},
    {"POST", "/api/v1/suites", srv_suites_create, true, SRV_ROLE_USER, false, NULL},
    {"GET", "/api/v1/suites", srv_suites_list, true, SRV_ROLE_VIEWER, false, NULL},
    {"GET", "/api/v1/suites/{id}", srv_suites_get, true, SRV_ROLE_VIEWER, false, NULL},
    {"GET", "/api/v1/results", srv_results_list, true, SRV_ROLE_VIEWER, false, NULL},
    {"GET", "/api/v1/compare", srv_compare_get, true, SRV_ROLE_VIEWER, false, NULL},
    {"POST", "/api/v1/models", NULL, true, SRV_ROLE_USER, false, &srv_models_upload},
    {"GET", "/api/v1/models", srv_models_list, true, SRV_ROLE_VIEWER, false, NULL},
    {"GET", "/api/v1/models/{id}", srv_models_get, true, SRV_ROLE_VIEWER, false, NULL},
    {"DELETE", "/api/v1/models/{id}", srv_models_delete, true, SRV_ROLE_USER, false, NULL},
    {"GET", "/api/v1/models/{id}/archive", srv_models_archive, true, SRV_ROLE_VIEWER, false, NULL},
    {"GET", "/api/v1/users", srv_users_list, true, SRV_ROLE_VIEWER, false, NULL},
    {"GET", "/api/v1/users/me", srv_users_me, true, SRV_ROLE_VIEWER, false, NULL},
    {"GET", "/api/v1/openapi.json", srv_static_openapi, false, SRV_ROLE_NONE, false, NULL},
    {"GET", "/healthz", srv_ops_healthz, false, SRV_ROLE_NONE, true, NULL},
    {"GET", "/readyz", srv_ops_readyz, false, SRV_ROLE_NONE, true, NULL},
    {"GET", "/metrics", srv_metrics_handle, false, SRV_ROLE_NONE, true, NULL},
    {"GET", "/", srv_static_index, false, SRV_ROLE_NONE, false, NULL},
    {"GET", "/static/vendor/{*}", srv_vendor_file, false, SRV_ROLE_NONE, false, NULL},
    {"GET", "/static/{*}", srv_static_file, false, SRV_ROLE_NONE, false, NULL},
};
#define N_ROUTES (sizeof routes / sizeof routes[0])

/* ---- routing ---- */

/* HEAD is served by the GET route; MHD sends the headers only. */
static bool method_is(const srv_req *r, const char *m)
{
    return strcmp(r->method, m) == 0 || (strcmp(m, "GET") == 0 && strcmp(r->method, "HEAD") == 0);
}

/* Finds the route for the request; when only the method is wrong, route stays
 * NULL but route_label names the path's pattern (metrics). */
void srv_route_find(srv_req *r)
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

/* The checks every request passes before its handler; false when one set the
 * reply. */
static bool checks_pass(srv_req *r)
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
    else
        return true;
    return false;
}

void srv_route_dispatch(srv_req *r)
{
    if (!checks_pass(r))
        return;
    if (r->route->needs_db)
        run_with_db(r);
    else
        r->route->handler(r);
    if (!r->resp && !r->suspended)
        srv_reply_error(r, 500, "internal", NULL, "handler set no response");
}

bool srv_route_stream_begin(srv_req *r)
{
    fb_err err;

    fb_err_clear(&err);
    if (!checks_pass(r))
        return false;
    if (!atomic_load(&r->srv->db_ready)) {
        srv_reply_error(r, 503, "unavailable", NULL, "the database is not ready yet");
        return false;
    }
    if (atomic_fetch_add(&r->srv->streams, 1) >= r->srv->cfg.max_streams) {
        atomic_fetch_sub(&r->srv->streams, 1);
        srv_reply_error(r, 503, "unavailable", NULL,
                        "%d uploads and downloads are under way, the server's most at once: "
                        "retry shortly",
                        r->srv->cfg.max_streams);
        srv_reply_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "5");
        return false;
    }
    r->stream_counted = true;
    if (db_connect_io(r->srv->cfg.database_url, DB_IO_TIMEOUT_MS, &r->own_db, &err) != FB_OK) {
        no_connection(r, &err);
        return false;
    }
    r->db = r->own_db;
    if (!r->srv->cfg.auth)
        r->user = (srv_user){.id = 0, .role = SRV_ROLE_ADMIN};
    else if (r->route->need != SRV_ROLE_NONE && !srv_auth_request(r, r->route->need))
        return false;
    if (!r->route->stream->begin(r)) {
        if (!r->resp)
            srv_reply_error(r, 500, "internal", NULL, "handler set no response");
        return false;
    }
    r->streaming = true;
    return true;
}
