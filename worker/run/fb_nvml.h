/* fb_nvml: a GPU's clocks, temperature and throttle reasons while it is timed
 * (docs/METHOD.md, "Unstable timings"), read through NVML.  libnvidia-ml.so.1
 * comes with the driver, not the toolkit: it is opened with dlopen, so a build
 * links nothing and a machine without it reports nothing (null, never 0). */
#ifndef FB_NVML_H
#define FB_NVML_H

#include <stddef.h>
#include <stdint.h>

#include "fb_result.h"

typedef struct fb_nvml fb_nvml;

/* NVML for the GPU with this UUID ("GPU-..."); NULL when NVML or the GPU is
 * not there. */
fb_nvml *fb_nvml_open(const char *uuid);

/* Folds one reading into g: clock ranges, the hottest temperature, the
 * throttle reasons seen (OR of NVML's bits), one more sample.  Readings NVML
 * refuses leave their fields as they were. */
void fb_nvml_sample(fb_nvml *n, fb_gpu_interference *g);

void fb_nvml_close(fb_nvml *n);

#endif
