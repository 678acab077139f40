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
} fb_workload_info;

cJSON *fb_workload_info_to_json(const fb_workload_info *w);

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
