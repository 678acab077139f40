/* srv_http: see srv_http.h. */
#include "srv_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "fb_log.h"
#include "srv_metrics.h"
#include "srv_route.h"

/* Idle: no byte for this long closes a connection. */
#define SRV_CONN_TIMEOUT_S 30
/* Connections in all: past SRV_CONN_LIMIT, and past cfg.client_conn_limit
 * from one address (a byte every 29 s once kept all 1,000 open), a
 * connection's request is answered 503 with Retry-After and the connection
 * closed; it may wait SRV_OVER_TIMEOUT_S for its request.  SRV_CONN_HARD is
 * libmicrohttpd's own limit, where it closes new connections unanswered: the
 * descriptors run out there (srv_main raises RLIMIT_NOFILE above it). */
#define SRV_CONN_LIMIT     1000
#define SRV_CONN_HARD      4000
#define SRV_OVER_TIMEOUT_S 5
#define SRV_RETRY_AFTER    "1"
/* The admin listener: /healthz, /readyz and /metrics on a thread of its own. */
#define SRV_ADMIN_THREADS 1
/* Seconds from a request's headers to the end of its body. */
#define SRV_REQUEST_DEADLINE 60
/* A streamed upload refused after its size passed (drain_refused): the most
 * body read and dropped so that the answer is read, and the slowest it may
 * arrive at (bytes a second, past SRV_REQUEST_DEADLINE). */
#define SRV_DRAIN_MAX      (64LL << 20)
#define SRV_DRAIN_MIN_RATE (256 * 1024)
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

/* ---- connections and clients ---- */

/* A public connection: its peer, and why it is refused when over a cap. */
typedef struct srv_conn {
    char peer[SRV_CLIENT_MAX];
    bool counted; /* in srv->conns under peer */
    srv_cap over; /* the cap it is over, or SRV_CAP_NONE */
    /* In srv->unsettled: opened, or a request begun, and no answer finished
     * since.  Touched on the connection's own thread only. */
    bool unsettled;
} srv_conn;

static void conn_settle(srv_ctx *ctx, srv_conn *c, bool unsettled)
{
    if (!c || c->unsettled == unsettled)
        return;
    c->unsettled = unsettled;
    atomic_fetch_add(&ctx->unsettled, unsettled ? 1 : -1);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    srv_ctx *ctx = cls;
    srv_conn *c = *socket_context;

    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        atomic_fetch_sub(&ctx->open_conns, 1);
        conn_settle(ctx, c, false);
        if (c && c->counted)
            (void)srv_counts_add(ctx->conns, c->peer, -1);
        free(c);
        *socket_context = NULL;
        return;
    }
    int open = atomic_fetch_add(&ctx->open_conns, 1) + 1;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    *socket_context = c = calloc(1, sizeof *c);
    if (!c)
        return;
    conn_settle(ctx, c, true); /* its request may wait unread while its thread is busy */
    srv_addr_text(ci ? ci->client_addr : NULL, c->peer, sizeof c->peer);
    if (!srv_proxies_match(&ctx->cfg.proxies, c->peer)) { /* a proxy's clients are its own */
        int mine = srv_counts_add(ctx->conns, c->peer, 1);
        c->counted = mine > 0;
        if (mine < 0 || mine > ctx->cfg.client_conn_limit)
            c->over = SRV_CAP_ADDRESS;
    }
    if (open > SRV_CONN_LIMIT)
        c->over = SRV_CAP_ALL;
    if (c->over)
        (void)MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT,
                                        (unsigned)SRV_OVER_TIMEOUT_S);
}

/* Who sends r (srv_client.h), and whether a cap refuses it: its connection's,
 * or its client's requests in flight (not on the admin listener). */
static void req_client(srv_req *r)
{
    srv_ctx *ctx = r->srv;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    srv_conn *c = ci ? ci->socket_context : NULL;
    char peer[SRV_CLIENT_MAX];

    if (!r->admin) {
        r->sconn = c;
        conn_settle(ctx, c, true);
    }

    if (c) {
        snprintf(peer, sizeof peer, "%s", c->peer);
    } else {
        ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        srv_addr_text(ci ? ci->client_addr : NULL, peer, sizeof peer);
    }
    srv_client_of(&ctx->cfg.proxies, peer,
                  MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Forwarded-For"),
                  MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Forwarded"), r->client,
                  sizeof r->client);
    if (r->admin)
        return;
    if (c && c->over) {
        r->refuse = c->over;
        return;
    }
    int n = srv_counts_add(ctx->inflight, r->client, 1);
    r->inflight_counted = n > 0;
    if (n < 0 || n > ctx->cfg.client_conn_limit)
        r->refuse = SRV_CAP_CLIENT;
}

/* 503 with Retry-After for a request over a cap; the connection closes after
 * the answer (its body was read and dropped: no reset). */
static void reply_refused(srv_req *r)
{
    static const char *const what[] = {
        [SRV_CAP_ALL] = "open connections in all",
        [SRV_CAP_ADDRESS] = "open connections from your address",
        [SRV_CAP_CLIENT] = "requests in flight from you",
    };
    bool all = r->refuse == SRV_CAP_ALL;

    atomic_fetch_add(&r->srv->refused[all ? 0 : 1], 1);
    srv_reply_error(r, 503, "unavailable", NULL, "too many %s (%s, at most %d): retry after %s s",
                    what[r->refuse], r->client,
                    all ? SRV_CONN_LIMIT : r->srv->cfg.client_conn_limit, SRV_RETRY_AFTER);
    srv_reply_header(r, MHD_HTTP_HEADER_RETRY_AFTER, SRV_RETRY_AFTER);
    srv_reply_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    fb_debug("%s %s from %s: 503, over the cap on %s", r->method, r->path, r->client,
             what[r->refuse]);
}

/* A streamed upload its handler refused once the body's size had passed
 * (r->drain_refusal: a quota, a name): keeps the answer until the body is in,
 * read and dropped, then sends it.  Most clients send the whole body before
 * they read; answered at once, the connection closes under a client still
 * sending, whose next write fails (a broken pipe, a reset), and many give up
 * there without reading the answer (Python's urllib does).
 * Answered at once all the same: a client that asked "Expect: 100-continue"
 * (the answer takes the place of 100 Continue, the body never sent) and a body
 * over SRV_DRAIN_MAX.  The request's database connection and stream slot go
 * back now: dropping bytes needs neither. */
static bool drain_refused(srv_req *r)
{
    const char *cl =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *expect =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    int64_t n;

    if (!r->drain_refusal || (expect && strcasecmp(expect, "100-continue") == 0))
        return false;
    if (!cl || !srv_parse_id(cl, strlen(cl), &n) || n <= 0 || n > SRV_DRAIN_MAX)
        return false;
    if (r->data_free)
        r->data_free(r->data);
    r->data = NULL;
    r->data_free = NULL;
    if (r->own_db)
        db_close(r->own_db);
    r->own_db = r->db = NULL;
    if (r->stream_counted)
        atomic_fetch_sub(&r->srv->streams, 1);
    r->stream_counted = false;
    r->streaming = r->stream_failed = true;
    r->deadline_s = SRV_REQUEST_DEADLINE + (int)(n / SRV_DRAIN_MIN_RATE);
    return true;
}

/* ---- request lifecycle ---- */

static srv_req *req_new(srv_ctx *ctx, bool admin, struct MHD_Connection *conn, const char *url,
                        const char *method)
{
    srv_req *r = calloc(1, sizeof *r);

    if (!r)
        return NULL;
    r->srv = ctx;
    r->conn = conn;
    r->admin = admin;
    r->deadline_s = SRV_REQUEST_DEADLINE;
    clock_gettime(CLOCK_MONOTONIC, &r->t0);
    snprintf(r->method, sizeof r->method, "%s", method);
    r->path = strndup(url, SRV_PATH_MAX + 1);
    if (!r->path) {
        free(r);
        return NULL;
    }
    srv_route_find(r);
    req_client(r);
    atomic_fetch_add(&ctx->pending, 1);
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
    atomic_fetch_sub(&r->srv->pending, 1); /* counted by req_new */
    conn_settle(r->srv, r->sconn, false);
    if (r->own_db) /* after data_free, which may still use it (ROLLBACK) */
        db_close(r->own_db);
    if (r->stream_counted)
        atomic_fetch_sub(&r->srv->streams, 1);
    if (r->inflight_counted)
        (void)srv_counts_add(r->srv->inflight, r->client, -1);
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
    return now.tv_sec - r->t0.tv_sec > r->deadline_s;
}

static enum MHD_Result queue_reply(srv_req *r)
{
    enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    return ok;
}

static enum MHD_Result handle(srv_ctx *ctx, bool admin, struct MHD_Connection *conn,
                              const char *url, const char *method, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
    srv_req *r = *req_cls;

    if (!r) {
        r = req_new(ctx, admin, conn, url, method);
        if (!r)
            return MHD_NO;
        *req_cls = r;
        if (!r->refuse && !r->admin && r->route && r->route->stream) {
            if (srv_route_stream_begin(r) || drain_refused(r))
                return MHD_YES;
            return queue_reply(r);
        }
        if (r->refuse || !declared_too_big(r))
            return MHD_YES; /* a refused one's body is read and dropped, then answered */
        r->body_too_big = true;
        srv_route_dispatch(r);
        return queue_reply(r);
    }
    if (*upload_data_size > 0 && r->streaming) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (!r->stream_failed && !r->route->stream->data(r, upload_data, n))
            r->stream_failed = true;
        if (past_deadline(r)) {
            fb_warn("%s %s from %s: upload still arriving past its deadline (%d s); closing "
                    "the connection",
                    r->method, r->path, r->client, r->deadline_s);
            return MHD_NO;
        }
        return MHD_YES;
    }
    if (r->streaming) { /* the whole body is in */
        if (!r->stream_failed)
            r->route->stream->end(r);
        if (!r->resp)
            srv_reply_error(r, 500, "internal", NULL, "handler set no response");
        return queue_reply(r);
    }
    if (*upload_data_size > 0) {
        if (r->status || r->refuse) { /* answered early (413), or refused: drop the rest */
            *upload_data_size = 0;
            return past_deadline(r) ? MHD_NO : MHD_YES;
        }
        body_append(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        /* A body past the limit (chunked, or longer than declared) or one that
         * trickles past the deadline: close the connection rather than read on. */
        if (r->body_too_big || past_deadline(r)) {
            fb_warn("%s %s from %s: %s; closing the connection", r->method, r->path, r->client,
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
    if (r->refuse) {
        reply_refused(r);
        return queue_reply(r);
    }
    if (r->admin && !(r->route && r->route->admin)) {
        srv_reply_error(r, 404, "not_found", NULL,
                        "the admin listener serves /healthz, /readyz and /metrics");
        return queue_reply(r);
    }
    srv_route_dispatch(r);
    if (r->suspended)
        return MHD_YES;
    return queue_reply(r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    return handle(cls, false, conn, url, method, upload_data, upload_data_size, req_cls);
}

static enum MHD_Result on_admin_request(void *cls, struct MHD_Connection *conn, const char *url,
                                        const char *method, const char *version,
                                        const char *upload_data, size_t *upload_data_size,
                                        void **req_cls)
{
    return handle(cls, true, conn, url, method, upload_data, upload_data_size, req_cls);
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
        fb_debug("%s %s %s %d %.3fms%s", r->client, r->method, r->path, r->status, s * 1e3,
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

static fb_code bind_addr(const char *addr, int port, const char *field, srv_sockaddr *sa,
                         unsigned *flags, fb_err *err)
{
    memset(sa, 0, sizeof *sa);
    if (inet_pton(AF_INET, addr, &sa->in4.sin_addr) == 1) {
        sa->in4.sin_family = AF_INET;
        sa->in4.sin_port = htons((uint16_t)port);
        return FB_OK;
    }
    if (inet_pton(AF_INET6, addr, &sa->in6.sin6_addr) == 1) {
        sa->in6.sin6_family = AF_INET6;
        sa->in6.sin6_port = htons((uint16_t)port);
        *flags |= MHD_USE_IPv6;
        return FB_OK;
    }
    return fb_err_set(err, FB_EINVAL, field, "not a numeric IPv4 or IPv6 address: %s", addr);
}

/* The admin listener: no client caps, a thread of its own, so probes and
 * scrapers are answered however many clients hold the public one. */
static fb_code start_admin(srv_ctx *ctx, fb_err *err)
{
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    const union MHD_DaemonInfo *info;
    srv_sockaddr sa;
    fb_code rc;

    if (ctx->cfg.admin_port < 0)
        return FB_OK;
    rc = bind_addr(ctx->cfg.admin_bind ? ctx->cfg.admin_bind : "127.0.0.1", ctx->cfg.admin_port,
                   "admin-bind", &sa, &flags, err);
    if (rc)
        return rc;
    ctx->admin_daemon = MHD_start_daemon(
        flags, (uint16_t)ctx->cfg.admin_port, NULL, NULL, on_admin_request, ctx,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, &sa.sa,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)SRV_ADMIN_THREADS, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, ctx, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SRV_CONN_TIMEOUT_S,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)64, MHD_OPTION_END);
    if (!ctx->admin_daemon)
        return fb_err_set(err, FB_EIO, "admin-port", "cannot listen on %s:%d",
                          ctx->cfg.admin_bind ? ctx->cfg.admin_bind : "127.0.0.1",
                          ctx->cfg.admin_port);
    info = MHD_get_daemon_info(ctx->admin_daemon, MHD_DAEMON_INFO_BIND_PORT);
    ctx->admin_bound_port = info ? info->port : ctx->cfg.admin_port;
    return FB_OK;
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
    fb_code rc = bind_addr(ctx->cfg.bind_addr, ctx->cfg.port, "bind", &sa, &flags, err);

    if (rc)
        return rc;
    if (ctx->cfg.client_conn_limit < 1)
        ctx->cfg.client_conn_limit = 64;
    ctx->conns = srv_counts_new();
    ctx->inflight = srv_counts_new();
    if (!ctx->conns || !ctx->inflight)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for the connection counts");
    /* The logger must be the first option, or MHD logs the earlier ones itself. */
    ctx->daemon = MHD_start_daemon(
        flags, (uint16_t)ctx->cfg.port, NULL, NULL, on_request, ctx, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, &sa.sa, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)(ctx->cfg.threads + SRV_SPARE_THREADS), MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        ctx, MHD_OPTION_NOTIFY_CONNECTION, on_connection, ctx, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)SRV_CONN_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT, (unsigned)SRV_CONN_HARD,
        MHD_OPTION_END);
    if (!ctx->daemon)
        return fb_err_set(err, FB_EIO, NULL, "cannot listen on %s:%d", ctx->cfg.bind_addr,
                          ctx->cfg.port);
    info = MHD_get_daemon_info(ctx->daemon, MHD_DAEMON_INFO_BIND_PORT);
    ctx->bound_port = info ? info->port : ctx->cfg.port;
    return start_admin(ctx, err);
}

void srv_http_drain(srv_ctx *ctx, int max_ms)
{
    struct timespec tick = {0, 10 * 1000000L};

    for (int waited = 0;
         waited < max_ms && (atomic_load(&ctx->pending) > 0 || atomic_load(&ctx->unsettled) > 0);
         waited += 10)
        nanosleep(&tick, NULL);
    if (atomic_load(&ctx->pending) > 0)
        fb_warn("stopping with %d request(s) not yet answered", atomic_load(&ctx->pending));
    else if (atomic_load(&ctx->unsettled) > 0)
        fb_info("stopping with %d connection(s) that sent no request",
                atomic_load(&ctx->unsettled));
}

void srv_http_stop(srv_ctx *ctx)
{
    if (ctx->admin_daemon)
        MHD_stop_daemon(ctx->admin_daemon);
    ctx->admin_daemon = NULL;
    if (ctx->daemon)
        MHD_stop_daemon(ctx->daemon);
    ctx->daemon = NULL;
    srv_counts_free(ctx->conns);
    srv_counts_free(ctx->inflight);
    ctx->conns = ctx->inflight = NULL;
}
