/* srv_suites: POST/GET /api/v1/suites and GET /api/v1/suites/{id} — a set of
 * workloads x batch sizes submitted as one unit (one job each, all variants in
 * a job), its progress and its summary (METHOD.md "Suite summaries"). */
#ifndef SRV_SUITES_H
#define SRV_SUITES_H

#include "srv_req.h"

#define SRV_SUITE_BATCHES_MAX 16

void srv_suites_create(srv_req *r);
void srv_suites_get(srv_req *r);
void srv_suites_list(srv_req *r);

#endif
