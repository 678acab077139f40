/* srv_explain: the explanation of a job's fusion groups (spec.explain,
 * docs/EXPLAIN.md): GET /api/v1/jobs/{id}/explain answers it, POST enqueues a
 * job that makes it. */
#ifndef SRV_EXPLAIN_H
#define SRV_EXPLAIN_H

#include "srv_req.h"

void srv_jobs_explain_get(srv_req *r);  /* GET /api/v1/jobs/{id}/explain */
void srv_jobs_explain_post(srv_req *r); /* POST /api/v1/jobs/{id}/explain */

#endif
