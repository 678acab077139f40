/* srv_route: the route table (method, path pattern, handler, whether it needs
 * a database connection, the least role) and the dispatch of a request to its
 * handler: the checks every request passes first (body size, Host, the query's
 * bytes, CSRF), authentication, and a pooled database connection, waited for
 * suspended.  Above the handlers (srv_jobs.c, ...), below the daemon. */
#ifndef SRV_ROUTE_H
#define SRV_ROUTE_H

#include "srv_req.h"

/* Sets r->route, r->caps and r->route_label (the pattern, for metrics) from
 * r->method and r->path; r->route stays NULL when nothing matches. */
void srv_route_find(srv_req *r);

/* Answers r: 413, 403 (Host), 404/405, 400 (query), 415 (CSRF), or the route's
 * handler, on a pooled database connection when the route needs one (the
 * request may be suspended meanwhile).  Sets a 500 when a handler set nothing. */
void srv_route_dispatch(srv_req *r);

/* For a streamed route (srv_stream), once the headers are in: the same checks,
 * a free stream slot (else 503), a database connection of the request's own,
 * authentication, then the route's begin.  True when the body is to be
 * streamed to the route; false when a reply was set instead. */
bool srv_route_stream_begin(srv_req *r);

#endif
