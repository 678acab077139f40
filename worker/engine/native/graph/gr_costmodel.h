/* gr_costmodel: the cost planner's prediction of a launch's time on this
 * machine, and how sure it is (docs/EXPLAIN.md "The cost planner").
 *
 * A launch's raw time is its roofline bound (nat_cost.h: compulsory bytes
 * over bandwidth, FLOPs over peak) on the limits the calibration was made
 * with.  Launches fall into classes by kernel (name and graph ops), who wrote
 * its code (nat_impl) and size (the raw time in steps of 4x).  A class
 * learns from measured launches: the log of measured over raw time, the last
 * GR_CM_SAMPLES of them.  A launch predicts as raw x exp(the class's median)
 * with an error, in log space, of the 90th percentile (fb_stats's, linearly
 * interpolated) of the class's distances from that median, at least
 * GR_CM_MIN_ERR; a class with fewer than GR_CM_MIN_SAMPLES samples predicts
 * nothing.
 *
 * A calibration belongs to one machine, build, thread count and GEMM mode
 * (gr_cost_context); the cost planner keeps it in its cache file beside the
 * decisions, so a build or machine change starts a new one. */
#ifndef GR_COSTMODEL_H
#define GR_COSTMODEL_H

#include <stdbool.h>

#include <cjson/cJSON.h>
#include "nat.h"

#define GR_CM_SAMPLES     32   /* kept per class, the newest */
#define GR_CM_MIN_SAMPLES 4    /* before a class predicts */
#define GR_CM_MIN_ERR     0.10 /* least error claimed, log space (about 10%) */
#define GR_CM_MAX_CLASSES 4096
#define GR_CM_KEY         96

typedef struct gr_cm_class {
    char key[GR_CM_KEY];
    int n, next; /* samples held (<= GR_CM_SAMPLES), where the next one goes */
    double lr[GR_CM_SAMPLES];
} gr_cm_class;

typedef struct gr_cm {
    double gbps, gflops; /* the limits raw times are computed on */
    int n, cap;
    gr_cm_class *c;
} gr_cm;

/* An empty calibration on these limits (<= 0: a nominal 20 GB/s and 50
 * GFLOP/s per thread of threads, the machine unmeasured). */
void gr_cm_init(gr_cm *m, double gbps, double gflops, int threads);
void gr_cm_free(gr_cm *m);

/* m from its JSON form (gr_cm_to_json); false (m left empty on the limits
 * given) when j is not one: a damaged file costs measurements, not a job. */
bool gr_cm_from_json(gr_cm *m, const cJSON *j, double gbps, double gflops, int threads);
/* NULL on ENOMEM. */
cJSON *gr_cm_to_json(const gr_cm *m);

/* l's roofline bound in ms on m's limits (float32 operands). */
double gr_cm_raw_ms(const gr_cm *m, const nat_launch *l);
/* l's class: "name:op+op:impl:b<size step>". */
void gr_cm_class_key(const gr_cm *m, const nat_launch *l, char *buf, size_t cap);
/* l's predicted time (*ms) and its error (*err, log space); false when its
 * class has too few samples. */
bool gr_cm_predict(const gr_cm *m, const nat_launch *l, double *ms, double *err);
/* Learns l's measured time (ms > 0).  False on ENOMEM or past
 * GR_CM_MAX_CLASSES (the sample is then dropped). */
bool gr_cm_add(gr_cm *m, const nat_launch *l, double ms);

#endif
