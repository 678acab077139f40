/* srv_workloads: GET /api/v1/workloads, the catalog live workers offer. */
#ifndef SRV_WORKLOADS_H
#define SRV_WORKLOADS_H

#include "srv_req.h"

void srv_workloads_list(srv_req *r);

#endif
