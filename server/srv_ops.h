/* srv_ops: liveness (GET /healthz) and readiness (GET /readyz). */
#ifndef SRV_OPS_H
#define SRV_OPS_H

#include "srv_req.h"

void srv_ops_healthz(srv_req *r);
void srv_ops_readyz(srv_req *r);

/* Closes /readyz's own database connection (at stop). */
void srv_ops_close(void);

#endif
