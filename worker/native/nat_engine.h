/* nat_engine: the native engine (fb_engine): the pattern suite and the model
 * zoo on the CPU, and on CUDA through native/cuda.  The top of the native
 * engine's libraries (worker/CMakeLists.txt): core <- graph <- cuda <- engine. */
#ifndef NAT_ENGINE_H
#define NAT_ENGINE_H

#include "fb_engine.h"

extern const fb_engine nat_engine;

/* The limits of device ("cpu": a triad's bandwidth and our GEMM's rate on
 * threads OpenMP threads, nat_roofline.h; "cuda": a device copy's bandwidth
 * and cuBLASLt's float32 GEMM rate, ncu.h) into *gbps, *gflops.
 * FB_EUNSUPPORTED for a device this build has no backend for. */
FB_MUSTCHECK fb_code nat_roofline_device(const char *device, int threads, double *gbps,
                                         double *gflops, fb_err *err);

#endif
