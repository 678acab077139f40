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

#endif
