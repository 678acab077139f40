/* srv_http: the libmicrohttpd daemon and the request lifecycle (headers, body,
 * deadlines, metrics); each request goes to srv_route_dispatch (srv_route.h). */
#ifndef SRV_HTTP_H
#define SRV_HTTP_H

#include "fb_err.h"
#include "srv_req.h"

/* Starts the daemon on ctx->cfg (ctx is the caller's and must outlive the
 * daemon); sets ctx->daemon and ctx->bound_port. */
FB_MUSTCHECK fb_code srv_http_start(srv_ctx *ctx, fb_err *err);

/* Waits up to max_ms until every request that was suspended has finished
 * (its answer sent, or its client gone), so a stop does not cut off answers
 * that are ready.  For shutdown, once nothing resumes suspended requests any
 * more (srv_submit_stop). */
void srv_http_drain(srv_ctx *ctx, int max_ms);

/* Stops the daemon (waits for the threads) when it runs. */
void srv_http_stop(srv_ctx *ctx);

#endif
