/* srv_http: the libmicrohttpd daemon and the request lifecycle (headers, body,
 * deadlines, metrics); each request goes to srv_route_dispatch (srv_route.h). */
#ifndef SRV_HTTP_H
#define SRV_HTTP_H

#include "fb_err.h"
#include "srv_req.h"

/* Starts the daemon on ctx->cfg (ctx is the caller's and must outlive the
 * daemon); sets ctx->daemon and ctx->bound_port. */
FB_MUSTCHECK fb_code srv_http_start(srv_ctx *ctx, fb_err *err);

/* Waits up to max_ms until every request begun has finished (its answer sent,
 * or its client gone), so a stop does not cut off answers: one suspended for
 * the submit batcher, and one whose handler commits on its own connection
 * (a submit during the stop goes direct) alike; and every public connection
 * with no request read yet, which may be waiting for a thread busy with such
 * a commit (idle keep-alive connections do not count).  For shutdown, after
 * srv_submit_stop; the listener still accepts meanwhile. */
void srv_http_drain(srv_ctx *ctx, int max_ms);

/* Stops the daemon (waits for the threads) when it runs. */
void srv_http_stop(srv_ctx *ctx);

#endif
