/* srv_compare: METHOD.md's regression rule, and GET /api/v1/compare (two jobs or
 * two suites side by side, workload by workload, changes flagged). */
#ifndef SRV_COMPARE_H
#define SRV_COMPARE_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "srv_req.h"

#define SRV_CHANGE_MIN 0.05 /* a change must be at least this large ... */
#define SRV_P_MAX      0.01 /* ... and significant: Mann-Whitney p below this, */
#define SRV_CI_LEVEL   0.99 /* or non-overlapping CIs of the median at this level */

/* One change of latency from a (before) to b (after). */
typedef struct srv_change {
    double change;    /* b / a - 1 of the medians; NaN when a median is missing */
    double p;         /* Mann-Whitney U two-sided p on the raw samples; NaN without */
    bool ci_overlap;  /* the 99% CIs of the medians overlap (true without samples) */
    const char *flag; /* "regression" (slower), "improvement" (faster), or NULL */
} srv_change;

/* Evaluates the rule for medians ma, mb and their raw samples (either may be
 * NULL / 0 long: then only the size is known and nothing is flagged). */
void srv_change_eval(double ma, const double *a, int na, double mb, const double *b, int nb,
                     srv_change *out);

/* Adds "change", "p", "ci99_overlap" and "flag" (null or string) to o. */
FB_MUSTCHECK bool srv_change_put(cJSON *o, const srv_change *c);

void srv_compare_get(srv_req *r);

#endif
