/* nat_cost: what a launch costs by its descriptor (nat_desc.h), and who wrote
 * the code that runs it.
 *
 * Bytes are the compulsory traffic: every operand the launch reads once and
 * every output it writes once, at their shapes (a weight packed for our GEMM
 * counts as the weight; workspaces count nothing: they are meant to stay in
 * cache).  FLOPs: 2 per multiply-add of a GEMM or convolution, one per
 * element per graph op of elementwise work (an activation, exp and rsqrt
 * included, as roofline counts usually do), softmax and layernorm as their
 * eager decompositions count (nat_cost.c), none for data movement.  The same rules for eager and
 * fused launches, so a fusion's bytes saved are the intermediates it keeps out of memory.
 *
 * The roofline bound of a launch is max(bytes / bandwidth, FLOPs / peak) on
 * this machine's measured limits (nat_roofline.h); its share of the roofline
 * is that bound over its measured time. */
#ifndef NAT_COST_H
#define NAT_COST_H

#include <stdbool.h>

#include "fb_result.h"
#include "nat.h"

typedef struct nat_cost {
    double bytes_read, bytes_written;
    double flops;
} nat_cost;

/* The cost of l with elements of elem_bytes (4 for float32; the id operand of
 * an embedding is read as elements too). */
nat_cost nat_launch_cost(const nat_launch *l, int elem_bytes);

/* Units of parallel work l's kernel splits into by its shape: the CPU
 * kernels' parallel loops (rows, planes, tiles of 64 x 64 outputs, chunks of
 * elements).  An estimate, for the explainer's lost-parallelism rule. */
double nat_launch_units(const nat_launch *l);

/* Who wrote the kernel l runs: the backend's choice where it set l->impl,
 * else the CPU path its descriptor takes. */
nat_impl nat_launch_impl(const nat_launch *l);
/* "loop", "packed_gemm", "winograd", "openblas", "cublaslt", "cudnn", "cuda". */
const char *nat_impl_name(nat_impl i);
/* Whether i is a tuned GEMM-class kernel (a library's or our packed GEMM)
 * rather than a generic loop. */
bool nat_impl_is_library(nat_impl i);

/* The limits launches on the CPU (gpu false) or the GPU are held against from
 * now on (the worker sets them once at start, fusionbench-run with
 * --roofline); 0: unknown. */
void nat_roofline_use(bool gpu, double gbps, double gflops);
/* The limits set for that device into *gbps, *gflops; false when none is. */
bool nat_roofline_get(bool gpu, double *gbps, double *gflops);
/* The roofline bound of c in ms on that device, NaN when none is set. */
double nat_roofline_bound_ms(const nat_cost *c, bool gpu);

/* Adds one timed launch of a profiled iteration (started start_ms after the
 * iteration, ms long) to rows (one row per distinct name and ops; rows has
 * room for one per launch): count, times, the first launches' timeline,
 * bytes, FLOPs, implementation ("mixed" when a row's launches differ) and
 * roofline bound. */
void nat_kernel_row_add(fb_kernel_row *rows, int *n, const nat_launch *l, double start_ms,
                        double ms, int elem_bytes, bool gpu);

#endif
