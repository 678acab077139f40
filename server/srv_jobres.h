/* srv_jobres: jobs as the database gives them (db_suite_get's "jobs", or one
 * job), each with its stored result decoded once into the typed fb_result
 * (proto/fb_result.h), for the resources that compute from results: suites
 * and compare.  The explanation stays JSON (r.explain, docs/EXPLAIN.md). */
#ifndef SRV_JOBRES_H
#define SRV_JOBRES_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "fb_result.h"

typedef struct srv_jobres {
    const cJSON *job;     /* the job's JSON: id, state, workload, batch_size, ... */
    int64_t id;           /* 0 when the job has none */
    const char *state;    /* NULL when the job has none */
    const char *workload; /* NULL when the job has none */
    int batch_size;       /* 0 when the job has none */
    bool has;             /* a stored result that decodes (else r is empty) */
    fb_result r;
} srv_jobres;

/* Decodes every job of the array jobs (which must outlive the array); *n set.
 * A stored result that does not decode is logged and left out (has false).
 * NULL on ENOMEM.  srv_jobres_free it. */
srv_jobres *srv_jobres_decode(const cJSON *jobs, int *n);

void srv_jobres_free(srv_jobres *jr, int n);

#endif
