/* nat: the native engine's core: a workload is built into buffers and, per
 * variant, a *plan*: an ordered list of kernel launches.  Eager plans launch one
 * kernel per graph op, each reading and writing memory; fused plans merge ops
 * where a fusion rule allows.  Executing a plan runs its launches in order.
 *
 * The launch is the kernel abstraction a backend slots into: it carries a name,
 * a category, the graph ops it implements (so fusion groups are counted from the
 * plan), and the backend function with its arguments.  The CPU backend's
 * functions compute on host memory with OpenMP and OpenBLAS; a CUDA backend's
 * functions enqueue on a stream with the same plan shape.
 *
 * Memory: every buffer is allocated through nat_buf_new with a *variant mask*
 * (which variants use it), so a variant's peak memory is the sum of the buffers
 * it touches — a real figure for eager (intermediates) against fused (none). */
#ifndef NAT_H
#define NAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fb_engine.h"
#include "fb_err.h"
#include "fb_result.h"
#include "fb_spec.h"
#include "nat_desc.h"

#define NAT_MAX_VARIANTS 4
/* Plans and buffer tables grow on demand up to these hard maxima (a model has
 * thousands of launches; a request cannot make a plan grow without bound). */
#define NAT_MAX_BUFS     100000
#define NAT_MAX_LAUNCHES 100000
#define NAT_MAX_ARGS     16
#define NAT_MAX_OPS      16 /* = FB_MAX_KERNEL_OPS: add+layernorm fuses 10 primitive ops */

enum { NAT_EAGER = 0, NAT_FUSED = 1 };
#define NAT_ALL_VARIANTS 0xFu

typedef struct nat_buf {
    float *data;       /* 64-byte aligned, owned by the ctx */
    size_t n;          /* floats */
    unsigned variants; /* bit v set: variant v reads or writes it */
    char name[32];
} nat_buf;

struct nat_launch;
typedef void (*nat_kernel_fn)(const struct nat_launch *l);

/* Who wrote the code a launch runs (nat_cost.h names them). */
typedef enum nat_impl {
    NAT_IMPL_AUTO,        /* a CPU launch: by its descriptor (nat_launch_impl) */
    NAT_IMPL_LOOP,        /* our own loop kernel */
    NAT_IMPL_PACKED_GEMM, /* our packed-panel GEMM (nat_pw_gemm) */
    NAT_IMPL_WINOGRAD,    /* our Winograd F(2x2, 3x3) over packed GEMMs */
    NAT_IMPL_OPENBLAS,
    NAT_IMPL_CUBLASLT,
    NAT_IMPL_CUDNN,
    NAT_IMPL_CUDA, /* our CUDA kernel */
    NAT_IMPL_COUNT
} nat_impl;

typedef struct nat_launch {
    const char *name; /* kernel name: "sgemm", "bias_add", "fused_bias_gelu" */
    fb_kcat category;
    int n_ops;
    const char *ops[NAT_MAX_OPS]; /* graph ops it implements: "linear", "bias", "gelu" */
    nat_kernel_fn fn;
    float *p[NAT_MAX_ARGS]; /* buffers, at the slots of the descriptor's kind (nat_desc.h) */
    nat_dkind dk;           /* which member of d describes it */
    nat_desc d;             /* shapes, strides, epilogue, flags */
    nat_impl impl;          /* set by a backend that knows; AUTO on the CPU */
    const char *rule;       /* fusion rule that formed it (static string), NULL: none */
    const char *kind;       /* its docs/DESIGN.md taxonomy kind, NULL when not fused */
    /* The fusion group it belongs to (gr_group.fid), -1: none; in an eager
     * plan, the group of the fused plan that replaces it.  A pattern is one
     * group, 0, in both plans. */
    int group;
    void *aux; /* backend state: NULL on the CPU; on CUDA the launch's stream, handles
                * and descriptors (ncu_int.h), and then p[] are device pointers */
} nat_launch;

typedef struct nat_plan {
    int n, cap;
    nat_launch *launches; /* owned by the ctx; grows to NAT_MAX_LAUNCHES */
    const float *out;     /* the variant's output buffer */
    size_t out_n;
} nat_plan;

struct gr_cost_timer; /* graph/gr_cost.h */

typedef struct nat_ctx {
    int n_bufs, cap_bufs;
    nat_buf *bufs;                    /* owned; grows to NAT_MAX_BUFS */
    int64_t total_bytes;              /* of all bufs, against NAT_CTX_MAX_BYTES */
    nat_plan plans[NAT_MAX_VARIANTS]; /* NAT_EAGER, NAT_FUSED */
    uint64_t seed;                    /* from params.seed, default 42 */
    int batch;                        /* spec batch size */
    /* Graph-built workloads (the zoo): the compact graph for the result (owned,
     * NULL for patterns; the engine hands it to the result), the nodes it kept
     * (a prefix: it is capped), and, per variant, the index of the launch
     * computing each graph node (owned, one per graph node, -1: none, a view),
     * set by gr_lower. */
    cJSON *graph;
    int n_graph_nodes;
    int *node_launch[NAT_MAX_VARIANTS];
    /* An uploaded model (gr_zoo.c's native form): PyTorch eager's output for
     * the same weights and input, which the run library checks the eager
     * variant against (fb_instance_ops.reference), reference_n floats (owned,
     * NULL when the workload has none), and what it is. */
    float *reference;
    size_t reference_n;
    char reference_what[160];
    /* Where the cost planner times a model's groups while it is built: a
     * device backend's timer (graph/gr_cost.h), NULL on this CPU. */
    const struct gr_cost_timer *cost_timer;
} nat_ctx;

/* Allocates a zeroed buffer of n floats used by the variants in mask (use
 * NAT_ALL_VARIANTS for inputs, weights and the buffers every plan shares).
 * NULL on ENOMEM or when NAT_MAX_BUFS is reached (err set). */
float *nat_buf_new(nat_ctx *ctx, size_t n, unsigned mask, const char *name, fb_err *err);

/* bytes of memory for an engine's tensor (free() frees it; NULL on ENOMEM),
 * not zeroed: 64-byte aligned, and from NAT_HUGE_BYTES on aligned to 2 MiB
 * and asked of the kernel in transparent huge pages (madvise), so that a
 * kernel streaming a tensor larger than the caches misses the TLB once per
 * 2 MiB rather than once per 4 KiB page, which a virtual machine's nested
 * page walk makes dear.  PyTorch's CPU allocator does the same where
 * THP_MEM_ALLOC_ENABLE is set; the eager and fused variants and the
 * roofline's triad all take their memory from here. */
#define NAT_HUGE_BYTES ((size_t)2 << 20)
void *nat_mem_alloc(size_t bytes);

/* Fills with deterministic values from the ctx seed and a per-buffer stream id:
 * uniform in [lo, hi). */
void nat_fill_uniform(nat_ctx *ctx, float *data, size_t n, uint32_t stream, float lo, float hi);

/* Appends a launch to variant v's plan and returns it for the caller to fill
 * (its buffers p[] and descriptor dk, d); name, category, fn and ops are set from the arguments
 * (ops is a NULL-terminated list).  NULL when NAT_MAX_LAUNCHES is reached (err set). */
nat_launch *nat_plan_add(nat_ctx *ctx, int v, const char *name, fb_kcat cat, const char *const *ops,
                         nat_kernel_fn fn, fb_err *err);

/* Whether every launch of plan has a descriptor (dk set) and its buffers
 * where the kind needs them; false with the first bad launch's index in
 * *bad.  Tests run it on every plan they build. */
bool nat_plan_check(const nat_plan *plan, int *bad);

/* Runs variant v's plan on the CPU, in order. */
void nat_plan_run(const nat_plan *plan);

/* The params every native job may name, beyond its workload's own (the
 * catalog's "params"; any other key is refused: docs/API.md): the run's
 * (tf32, time_budget_s: fb_run.c), the engine's (threads, seed, planner,
 * disable_rules, unfuse, gemm) and the CUDA lowering's (gelu_epilogue,
 * tc_attention; no effect on the CPU). */
#define NAT_PARAMS_ENGINE                                                                          \
    "threads seed planner disable_rules unfuse gemm tf32 time_budget_s gelu_epilogue "             \
    "tc_attention"

/* A pattern of the suite.  build() reads params (shapes) from the spec with
 * fb_spec_param_int (so bad params name "params.<key>"), allocates buffers, fills
 * inputs and weights, and records the eager and fused plans and their outputs.
 * reference() computes the output in float64 from the same inputs and weights
 * (for tests), writing plan out_n doubles into out. */
typedef struct nat_pattern {
    fb_workload_info info;
    FB_MUSTCHECK fb_code (*build)(nat_ctx *ctx, const fb_spec *spec, fb_err *err);
    void (*reference)(const nat_ctx *ctx, double *out);
} nat_pattern;

/* All patterns, NULL-terminated (nat_registry.c). */
extern const nat_pattern *const nat_patterns[];
const nat_pattern *nat_pattern_find(const char *name);

/* Builds a ctx for spec with pat's builder (a pattern, or a model of the zoo:
 * gr_ctx_build finds either by name); the caller frees with nat_ctx_free. */
FB_MUSTCHECK fb_code nat_ctx_build_for(const nat_pattern *pat, const fb_spec *spec,
                                       const struct gr_cost_timer *timer, nat_ctx **out,
                                       fb_err *err);

/* params.gemm: "auto" (the default: nat_pw_default), "packed" (our packed
 * GEMM, on 16 or 8 lanes: the convolutions' im2col written into its panels,
 * constant linear weights packed once, when the plan is built) or
 * "openblas" (OpenBLAS everywhere, on the weights as stored, repacking them
 * on every call).  *pack: whether our GEMM runs (false for device "cuda",
 * whose lowering reads the weights as stored); the convolutions take
 * nat_conv_shape.blas = !*pack.  *per_shape (NULL: not asked): "auto" on the
 * CPU, where a model planned by the cost planner chooses per convolution and
 * linear shape, *pack its default (gr_gemm_choose). */
FB_MUSTCHECK fb_code nat_spec_gemm_pack(const fb_spec *spec, bool *pack, bool *per_shape,
                                        fb_err *err);
void nat_ctx_free(nat_ctx *ctx);

/* Bytes of the buffers variant v uses. */
int64_t nat_ctx_variant_bytes(const nat_ctx *ctx, int v);

#endif
