/* ncu: the CUDA backend of the native engine.
 *
 * A pattern builds its host ctx and CPU plans as on the CPU (nat.h); the CUDA
 * backend then *lowers* each CPU plan into a device plan of the same shape
 * (nat_plan of nat_launch): each launch keeps its name, category and graph ops,
 * its p[] become device pointers (of the ctx dtype: float, __half or
 * __nv_bfloat16, cast to float * as opaque handles), and its fn enqueues on the
 * ctx's stream (cuBLASLt, cuDNN or one of our kernels), reading its stream,
 * handles and descriptors from the launch's aux state.  So the plan machinery,
 * kernel counting and fusion counting are one for both backends.
 *
 * Host buffers stay as the host mirror: inputs are filled there with the same
 * deterministic generator, copied to the device in the ctx dtype, and rounded
 * back in place so the float64 references see exactly the values the GPU does.
 *
 * Device memory comes from ncu_mem (one cudaMalloc per buffer at prepare, never
 * in the timed loop, never managed memory), with a variant mask per buffer as on
 * the CPU, so a variant's peak bytes are the buffers it touches. */
#ifndef NCU_H
#define NCU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fb_engine.h"
#include "fb_err.h"
#include "nat.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ncu_dtype { NCU_F32 = 0, NCU_F16 = 1, NCU_BF16 = 2 } ncu_dtype;

/* Bytes of one element of dtype t. */
static inline size_t ncu_dtype_size(ncu_dtype t)
{
    return t == NCU_F32 ? 4u : 2u;
}

/* ---- error mapping (ncu_err.c): the one place for each library status ----
 * Each returns FB_OK for success, else sets err ("what: library message") and
 * returns FB_EOOM for out-of-memory statuses, FB_EUNSUPPORTED for the
 * library's not-supported statuses, FB_EDEVICE otherwise.  status is the
 * library's enum passed as int so this header needs no CUDA includes. */
FB_MUSTCHECK fb_code ncu_cuda_check(int status, const char *what, fb_err *err);
FB_MUSTCHECK fb_code ncu_cublas_check(int status, const char *what, fb_err *err);
FB_MUSTCHECK fb_code ncu_cudnn_check(int status, const char *what, fb_err *err);

/* ---- engine entry points (ncu_engine.c), used by nat_engine.c ---- */

/* The patterns and the model zoo as offered on "cuda": float32/float16/bfloat16
 * (the language models float32 only) and the variants eager, fused,
 * eager+graph, fused+graph; static storage. */
const fb_workload_info *ncu_catalog(int *n);

/* The workload of an uploaded model's jobs on cuda (gr_upload's, float32). */
const fb_workload_info *ncu_uploaded(void);

/* Builds a CUDA instance for spec (device "cuda"): host ctx, device buffers,
 * lowered plans, CUDA graphs.  FB_EUNSUPPORTED names the field for an unknown
 * dtype/variant; FB_EDEVICE when there is no usable device; FB_EOOM when device
 * memory runs out. */
FB_MUSTCHECK fb_code ncu_prepare(const fb_spec *spec, fb_instance **out, fb_err *err);

/* The current GPU's limits (ncu_roofline.c): a device-to-device copy's
 * bandwidth (GB/s, read + write) and cuBLASLt's float32 GEMM rate (GFLOP/s),
 * best of 5 each.  FB_EDEVICE / FB_EOOM as the CUDA calls fail. */
FB_MUSTCHECK fb_code ncu_roofline_measure(double *copy_gbps, double *gemm_gflops, fb_err *err);

/* Whether the lowering takes CPU launch src in dtype: a kernel or library
 * call for its kind and what the lowering checks of it before any device
 * work (ops, activations, shapes, token ids that survive the dtype).
 * FB_EUNSUPPORTED naming the launch otherwise.  Needs no device: the tests
 * check here that plans of either planner lower (issue 27). */
FB_MUSTCHECK fb_code ncu_lower_accepts(const nat_launch *src, ncu_dtype dtype, fb_err *err);

/* The host ctx of a CUDA instance (made by ncu_prepare): its inputs hold the
 * values the device holds (rounded to the dtype), so a pattern's reference()
 * on it is the float64 truth for the GPU's outputs.  For tests. */
const nat_ctx *ncu_instance_host(const fb_instance *inst);

#ifdef __cplusplus
}
#endif

#endif
