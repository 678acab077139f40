/* srv_results: GET /api/v1/results (docs/API.md) — per result identity (METHOD.md)
 * the latest figures, a history series, and regression flags. */
#ifndef SRV_RESULTS_H
#define SRV_RESULTS_H

#include "srv_req.h"

#define SRV_RESULTS_SAMPLE_CHECKS 256 /* pairs checked on raw samples per request */

void srv_results_list(srv_req *r);

#endif
