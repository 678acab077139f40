/* nat_roofline: this machine's limits, measured, on the threads the engine
 * runs on, so that a kernel's time can be set against the fastest the
 * machine allows.  Bandwidth: a STREAM-style triad
 * a[i] = b[i] + s c[i] over three arrays of 16 Mi floats
 * (192 MiB, far past any cache; 12 bytes moved per element, write-allocate
 * not counted, as STREAM does).  Compute: our best GEMM (nat_linear, weights
 * packed for the AVX-512 GEMM where the CPU has it, else OpenBLAS) on
 * 1024 x 1024 x 1024.  Best of 5 each; about half a second in all. */
#ifndef NAT_ROOFLINE_H
#define NAT_ROOFLINE_H

#include "fb_err.h"

typedef struct nat_roofline {
    double triad_gbps;  /* GB/s, 1e9 bytes */
    double gemm_gflops; /* 1e9 FLOP/s, 2 m n k per GEMM */
    int threads;
} nat_roofline;

/* Measures on threads OpenMP threads (< 1: the current setting).  FB_ENOMEM
 * when the arrays cannot be had. */
FB_MUSTCHECK fb_code nat_roofline_measure(int threads, nat_roofline *out, fb_err *err);

#endif
