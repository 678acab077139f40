/* srv_workers: GET /api/v1/workers and POST /api/v1/workers/{id}/drain. */
#ifndef SRV_WORKERS_H
#define SRV_WORKERS_H

#include "srv_req.h"

void srv_workers_list(srv_req *r);

/* POST /api/v1/workers/{id}/drain: the route captures "{id}/drain", since a
 * worker id holds a slash ("host/gpu0"; a client may also send it as %2F). */
void srv_workers_action(srv_req *r);

#endif
