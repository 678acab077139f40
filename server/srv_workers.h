/* srv_workers: GET /api/v1/workers. */
#ifndef SRV_WORKERS_H
#define SRV_WORKERS_H

#include "srv_http.h"

void srv_workers_list(srv_req *r);

#endif
