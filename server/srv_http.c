/* srv_http: see srv_http.h. */
#include "srv_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fb_log.h"
#include "srv_metrics.h"
#include "srv_route.h"

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

static double elapsed_s(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
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
    srv_route_find(r);
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
        srv_route_dispatch(r);
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
    srv_route_dispatch(r);
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
