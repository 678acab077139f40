/* wk_gpu: the GPU worker's view of its GPU, learned without touching CUDA in
 * the worker's own process (docs/DESIGN.md: CUDA does not survive fork, and every
 * job is a forked child): a short-lived child queries the device and sends the
 * answer back through a pipe. */
#ifndef WK_GPU_H
#define WK_GPU_H

#include "fb_err.h"
#include "fb_gpu.h"

#define WK_GPU_PROBE_TIMEOUT_MS 60000 /* first CUDA init can be slow on big nodes */

/* Queries GPU index gpu (as CUDA_VISIBLE_DEVICES shows it to this process) in
 * a child process.  FB_EDEVICE with CUDA's message when the child could not
 * (no such GPU, no driver), FB_ETIMEOUT when it hung. */
FB_MUSTCHECK fb_code wk_gpu_probe(int gpu, fb_gpu *out, fb_err *err);

/* Pins every later CUDA user of this process tree (the job children) to the
 * GPU with this UUID: CUDA_VISIBLE_DEVICES=<uuid>, so it is their device 0. */
FB_MUSTCHECK fb_code wk_gpu_pin(const char *uuid, fb_err *err);

#endif
