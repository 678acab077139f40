/* fb_gpu: what a CUDA device and its software stack are (METHOD.md: device and
 * software versions are part of a result's identity).  Used by fb_env_capture
 * in a job's process and by the GPU worker's short-lived query child (the
 * worker's parent never touches CUDA: docs/DESIGN.md).
 *
 * cuDNN and cuBLASLt versions come from the libraries the process would load
 * (dlopen of libcudnn.so.9 / libcublasLt.so.13), "" when absent, so that asking
 * links neither. */
#ifndef FB_GPU_H
#define FB_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "fb_err.h"

typedef struct fb_gpu {
    char name[128];
    char uuid[64]; /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
    int64_t memory_bytes;
    char compute_capability[16]; /* "9.0" */
    char driver[32];             /* "580.65.06", else "cuda 13.0" (what the driver supports) */
    char cuda[32];               /* runtime version, "13.0" */
    char cudnn[32], cublas[32];  /* "" when not loadable */
} fb_gpu;

/* Device index dev as this process sees it (CUDA_VISIBLE_DEVICES applies), or
 * the current device when dev < 0.
 * Initializes CUDA in the calling process.  FB_EUNSUPPORTED in a build without
 * CUDA; FB_EDEVICE (message from CUDA) when there is no such device. */
FB_MUSTCHECK fb_code fb_gpu_query(int dev, fb_gpu *out, fb_err *err);

/* The driver's version from the first line of /proc/driver/nvidia/version
 * ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release
 * Build ..." or "... Kernel Module  580.65.06  Sun ..."): the first word after
 * "Kernel Module" that starts with a digit and holds a dot; "" when none. */
void fb_gpu_driver_from_line(const char *line, char *dst, size_t cap);

#endif
