/* srv_jobs: the /api/v1/jobs resource (create, get, list, cancel, kernels). */
#ifndef SRV_JOBS_H
#define SRV_JOBS_H

#include "srv_http.h"

void srv_jobs_create(srv_req *r);  /* POST /api/v1/jobs */
void srv_jobs_list(srv_req *r);    /* GET /api/v1/jobs */
void srv_jobs_get(srv_req *r);     /* GET /api/v1/jobs/{id} */
void srv_jobs_cancel(srv_req *r);  /* POST /api/v1/jobs/{id}/cancel */
void srv_jobs_kernels(srv_req *r); /* GET /api/v1/jobs/{id}/kernels */

#endif
