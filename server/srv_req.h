/* srv_req: one request and its answer, the bottom of the server's HTTP side.
 * Resource files (srv_jobs.c, ...) provide handlers; a handler reads what it
 * needs from the srv_req and sets exactly one response with one of the
 * srv_reply_* functions.  The route table (srv_route.c) sits above the
 * handlers, the daemon (srv_http.c) above the routes. */
#ifndef SRV_REQ_H
#define SRV_REQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "db.h"
#include "fb_err.h"
#include "srv_auth.h"
#include "srv_client.h"
#include "srv_parse.h"
#include "srv_pool.h"
#include "srv_submit.h"

#define SRV_WORKER_STALE_S 60 /* a worker silent this long is not offered/alive */
#define SRV_CSP                                                                                    \
    "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; "              \
    "frame-ancestors 'none'"

/* The connection caps a request can be over (srv_http.c). */
typedef enum srv_cap {
    SRV_CAP_NONE,
    SRV_CAP_ALL,     /* open connections in all */
    SRV_CAP_ADDRESS, /* open connections from one address */
    SRV_CAP_CLIENT,  /* requests in flight from one client */
} srv_cap;

typedef struct srv_config {
    const char *database_url; /* NULL: libpq's own defaults (PG* environment) */
    const char *bind_addr;    /* numeric IPv4 or IPv6 address */
    int port;                 /* 0 picks a free port */
    const char *web_dir;
    size_t max_body;
    int threads;
    /* Comma-separated names the Host header must match (DNS rebinding); NULL
     * or "" checks nothing.  Bound to a loopback address, the default is
     * localhost,127.0.0.1,::1. */
    const char *allowed_hosts;
    int statement_timeout_ms; /* a request's query runs at most this long (0 = no limit) */
    bool auth;                /* API routes need a token (srv_auth.h) */
    double submit_rate;       /* submits per second per token (0: no limit) */
    double submit_burst;      /* ... and at once */
    /* Open connections per address (not a trusted proxy's), and requests in
     * flight per client; past either, 503 with Retry-After (srv_http.c). */
    int client_conn_limit;
    srv_proxies proxies;     /* --trusted-proxies: their clients are told apart */
    const char *admin_bind;  /* the admin listener: /healthz, /readyz, /metrics, */
    int admin_port;          /* exempt from client caps; -1: none, 0: a free port */
    int64_t max_model_bytes; /* largest model archive; over it 413 before storing */
    int64_t model_quota;     /* a user's model storage in bytes when users.model_quota_bytes
                                is NULL; < 0: none */
    int max_streams;         /* uploads and archive downloads at once; past it 503 */
} srv_config;

/* Process-wide server state; lives from srv_http_start to srv_http_stop. */
typedef struct srv_ctx {
    srv_config cfg;
    srv_pool *pool;
    srv_submit *submit;              /* POST /jobs's group commit (srv_jobs.c) */
    struct srv_ratelimit *ratelimit; /* submits per token (srv_auth.c); NULL: none */
    atomic_bool db_ready;            /* set once migrations have been applied */
    atomic_int pending;              /* requests begun and not yet finished (answer sent or
                                        connection closed): the stop waits for them */
    atomic_int unsettled;            /* public connections opened or with a request begun
                                        and no answer finished since: the stop waits for
                                        them too (a request may sit unread while its
                                        connection's thread runs another's commit) */
    struct MHD_Daemon *daemon;
    int bound_port;
    struct MHD_Daemon *admin_daemon; /* NULL without --admin-port */
    int admin_bound_port;
    atomic_int open_conns;   /* on the public listener */
    srv_counts *conns;       /* open connections per peer address (untrusted peers) */
    srv_counts *inflight;    /* requests in flight per client */
    atomic_llong refused[2]; /* answered 503 for: [0] connections, [1] a client's cap */
    atomic_int streams;      /* streamed uploads and archive downloads open now */
} srv_ctx;

typedef struct srv_route srv_route;

/* One request, in MHD's *req_cls from the first callback to the completion
 * callback, which frees it (and everything it points to that it owns). */
typedef struct srv_req {
    srv_ctx *srv;
    struct MHD_Connection *conn;
    const srv_route *route;  /* NULL when no route matched */
    const char *route_label; /* static: the pattern, or "unmatched" (metrics) */
    char method[16];
    char *path;    /* owned copy of the (decoded) URL path */
    srv_caps caps; /* route pattern captures, spans into path */
    char *body;    /* owned, NUL-terminated; NULL when none */
    size_t body_len;
    bool body_too_big;
    db_conn *db;               /* borrowed from the pool for routes that need it */
    bool db_broken;            /* a call returned FB_EUNAVAIL: drop the connection */
    struct MHD_Response *resp; /* set by a srv_reply_* call, queued by srv_http */
    int status;
    struct timespec t0;
    /* A handler that waits for another thread suspends the request
     * (srv_req_suspend) and keeps its state here; data_free(data) runs when the
     * request is freed. */
    bool suspended;
    void (*resumed)(struct srv_req *r);
    void *data;
    void (*data_free)(void *data);
    srv_pool_waiter pool_wait;   /* while queued for a database connection */
    srv_user user;               /* who asks: set before an API handler runs */
    char client[SRV_CLIENT_MAX]; /* who sends it (srv_client.h): logs, caps, metrics */
    bool admin;                  /* came in on the admin listener */
    struct srv_conn *sconn;      /* its public connection's state (srv_http.c); NULL on
                                    the admin listener */
    bool inflight_counted;       /* counted in srv->inflight under client */
    srv_cap refuse;              /* over a cap: answered 503 (SRV_CAP_NONE: not) */
    int deadline_s;              /* the body must be in by t0 + this (an upload raises it) */
    /* A streamed route's (srv_stream): its body went to the handler as it came,
     * on a database connection of its own (own_db, closed with the request after
     * data_free), counted in srv->streams. */
    bool streaming, stream_failed, stream_counted;
    /* Set by a stream's begin once the body's size is known to be acceptable:
     * a refusal after it (a quota, a name) waits for the body, read and
     * dropped, before it is sent (srv_http.c, drain_refused). */
    bool drain_refusal;
    db_conn *own_db;
} srv_req;

/* A route whose body goes to its handler as it arrives instead of being
 * buffered (an upload).  begin runs once the headers are in and the route's
 * checks passed (Host, query, CSRF, authentication; r->db is then own_db, a
 * connection of the request's own: an upload may hold it for minutes, which
 * the pool's must not be); it sets a reply and returns false to refuse, and
 * the reply goes out at once, the body unread (or, once begin set
 * drain_refusal, after the body was read and dropped).  data gets each piece; false
 * stops it (a reply set), the rest is read and dropped.  end runs after the
 * last byte and sets the reply.  State lives in r->data/r->data_free, freed
 * with the request whatever happened (a client gone mid-upload included). */
typedef struct srv_stream {
    bool (*begin)(srv_req *r);
    bool (*data)(srv_req *r, const char *p, size_t n);
    void (*end)(srv_req *r);
} srv_stream;

typedef void (*srv_handler)(srv_req *r);

struct srv_route {
    const char *method;  /* "GET", "POST" */
    const char *pattern; /* srv_path_match pattern; also the metrics route label */
    srv_handler handler;
    bool needs_db;            /* srv_http borrows r->db first, or answers 503 (streamed: its own) */
    srv_role need;            /* with authentication on: the least role (SRV_ROLE_NONE: public) */
    bool admin;               /* also served on the admin listener (probes and scrapers) */
    const srv_stream *stream; /* non-NULL: the body is streamed to these (srv_stream) */
};

/* Capture i of the matched route as a NUL-terminated copy in buf; false when
 * missing or longer than bufsz - 1. */
FB_MUSTCHECK bool srv_req_cap(const srv_req *r, int i, char *buf, size_t bufsz);

/* A query argument (decoded) or NULL.  Points into MHD's memory for the request. */
const char *srv_req_query(const srv_req *r, const char *key);

/* Suspends the request's connection, from a handler: the handler returns with
 * no reply and the HTTP thread serves other connections meanwhile.  Once
 * srv_req_resume(r) is called (exactly once, from any thread, after
 * srv_req_suspend: even before the handler returned), resumed(r) runs on an
 * HTTP thread and sets the reply.
 * Until then the request, and r->data, stay where they are. */
void srv_req_suspend(srv_req *r, void (*resumed)(srv_req *r));
void srv_req_resume(srv_req *r);

/* Responses.  Each replaces nothing: the first reply of a request wins, later
 * ones are ignored (and logged), so error paths cannot leak a response. */

/* Takes ownership of json (deleted here in every case). */
void srv_reply_json(srv_req *r, int status, cJSON *json);

/* body is copied; content_type NULL means application/json. */
void srv_reply_text(srv_req *r, int status, const char *content_type, const char *body, size_t len);

/* Takes ownership of a malloc'd body (freed by MHD when sent). */
void srv_reply_owned(srv_req *r, int status, const char *content_type, char *body, size_t len);

/* 200 {"items": <items_json>} from a JSON array text the database built; takes
 * ownership of items_json (freed here), which is trusted to be valid JSON. */
void srv_reply_items(srv_req *r, char *items_json);

/* {"error": {"code", "message", "field"?}}; field may be NULL or "". */
void srv_reply_error(srv_req *r, int status, const char *code, const char *field, const char *fmt,
                     ...) FB_PRINTF(5, 6);

/* Maps an fb_err from a lower layer onto docs/API.md's status and code (FB_EUNAVAIL →
 * 503, FB_ENOTFOUND → 404, ...), and marks the db connection broken on EUNAVAIL. */
void srv_reply_fb_err(srv_req *r, const fb_err *err);

/* Takes ownership of a response built by the caller (e.g. from a file);
 * NULL resp is logged and leaves the request without a reply. */
void srv_reply_response(srv_req *r, int status, const char *content_type,
                        struct MHD_Response *resp);

/* Adds a header to the reply already set (no-op when none). */
void srv_reply_header(srv_req *r, const char *name, const char *value);

#endif
