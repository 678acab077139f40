/* srv_metrics: request counters and latency histograms kept in process memory,
 * and GET /metrics in Prometheus text format (with queue figures from the db). */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include "srv_req.h"

/* Records one finished request.  route must be a string that lives for the
 * process (a route pattern or a literal); method is copied.  Thread-safe. */
void srv_metrics_observe(const char *route, const char *method, int status, double seconds);

/* GET /metrics. */
void srv_metrics_handle(srv_req *r);

#endif
