/* fb_catalog: what a worker offers (workloads and its device) and how it is
 * encoded for GET /api/v1/workloads and GET /api/v1/workers. */
#ifndef FB_CATALOG_H
#define FB_CATALOG_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "fb_err.h"
#include "fb_spec.h"

#define FB_MAX_DTYPES  3
#define FB_MAX_DEVICES 2

typedef struct fb_workload_info {
    const char *name;        /* "gemm_bias_gelu" */
    const char *engine;      /* "native" */
    const char *domain;      /* "pattern", "vision", "nlp", "speech" */
    const char *description; /* one line */
    int default_batch_size;
    const char *devices[FB_MAX_DEVICES + 1];   /* NULL-terminated: "cpu", "cuda" */
    const char *dtypes[FB_MAX_DTYPES + 1];     /* NULL-terminated */
    const char *variants[FB_MAX_VARIANTS + 1]; /* NULL-terminated, baseline first */
    /* Every key of params a job of it may name, space-separated (its own and
     * its engine's), or NULL where the engine does not declare them (then
     * any key passes; the inductor engine's model builders). */
    const char *params;
} fb_workload_info;

/* The entry as JSON; "params" (an array of the names) only where declared. */
cJSON *fb_workload_info_to_json(const fb_workload_info *w);

/* The params a catalog entry (fb_workload_info_to_json's form, as a worker
 * registered it or the server built it in) declares against a job's params:
 * FB_EINVAL naming "params.KEY" for the first key it does not declare, its
 * message naming the workload and the params it takes.  FB_OK when the entry
 * declares none (no "params" array) or params is NULL. */
FB_MUSTCHECK fb_code fb_catalog_params_check(const cJSON *entry, const cJSON *params, fb_err *err);

/* fb_catalog_params_check against w (a worker's own catalog). */
FB_MUSTCHECK fb_code fb_workload_params_check(const fb_workload_info *w, const cJSON *params,
                                              fb_err *err);

/* Whether workload names an uploaded model's jobs: "model." and 1-18 digits
 * (its id; docs/API-EXTENSIONS.md, "Your own models"). */
bool fb_workload_is_upload(const char *workload);

typedef struct fb_device_info {
    char kind[16];  /* "cpu" or "cuda" */
    char name[128]; /* CPU model or GPU name */
    char uuid[64];  /* GPU UUID, or "" */
    int64_t memory_bytes;
    int64_t job_memory_bytes; /* the most one job may use (its memory cap, the GPU's memory) */
    char driver[64];
    char compute_capability[16]; /* "9.0", or "" on CPU */
    int threads;
} fb_device_info;

cJSON *fb_device_info_to_json(const fb_device_info *d);

#endif
