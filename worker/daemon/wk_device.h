/* wk_device: what this worker tells the database about itself at registration:
 * its device (CPU model, threads, memory), engines, and the workloads it offers. */
#ifndef WK_DEVICE_H
#define WK_DEVICE_H

#include "db.h"
#include "fb_err.h"
#include "fb_gpu.h"
#include "wk_opts.h"

typedef struct wk_registration {
    char host[64];
    fb_gpu gpu;           /* --device cuda: from the query child; else zeros */
    char *device_json;    /* owned */
    char *engines_json;   /* owned */
    char *workloads_json; /* owned */
} wk_registration;

/* Builds the registration for cfg's device (for cuda: the GPU's name, UUID,
 * memory, compute capability, driver, CUDA, cuDNN and cuBLAS versions, asked
 * of a query child, never of this process).  *out is freed with
 * wk_registration_free even on error. */
FB_MUSTCHECK fb_code wk_device_registration(const wk_config *cfg, wk_registration *out,
                                            fb_err *err);
void wk_registration_free(wk_registration *r);

/* A db_worker_reg whose strings point into cfg and r (valid while both live). */
db_worker_reg wk_device_reg(const wk_config *cfg, const wk_registration *r);

/* MemTotal from /proc/meminfo in bytes, or -1 when unreadable. */
int64_t wk_device_mem_total(void);

/* Names of the engines compiled in (static storage, NULL-terminated) and count. */
const char *const *wk_device_engines(int *n);

#endif
