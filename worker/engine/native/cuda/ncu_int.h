/* ncu_int: what the CUDA backend's files share: the device context, per-launch
 * state (stream, library descriptors), the allocator, the launch functions.
 * Internal to worker/engine/native/cuda/. */
#ifndef NCU_INT_H
#define NCU_INT_H

#include <cublasLt.h>
#include <cuda_runtime.h>
#ifdef NCU_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "nat_explain.h"
#include "ncu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- allocator (ncu_mem.c) ---- */

/* Device allocations a ctx may hold: its buffers, library workspaces, extras
 * (a hard maximum: the table grows up to it). */
#define NCU_MEM_MAX 200000

typedef struct ncu_alloc {
    void *ptr;
    size_t bytes;
    unsigned mask; /* bit v: variant v uses it */
    char name[32];
} ncu_alloc;

typedef struct ncu_mem {
    int n, cap;
    ncu_alloc *a;
    int64_t cur_bytes, peak_bytes; /* all of this ctx's live device memory */
} ncu_mem;

/* cudaMalloc of bytes (rounded up to 256), zeroed, tracked with its variant
 * mask; the ctx owns it until ncu_mem_release.  FB_EOOM when the device is out
 * of memory, FB_ETOOBIG when NCU_MEM_MAX allocations exist. */
FB_MUSTCHECK fb_code ncu_mem_alloc(ncu_mem *m, size_t bytes, unsigned mask, const char *name,
                                   void **out, fb_err *err);
/* Adds variants to the mask of the allocation at ptr (no-op when unknown). */
void ncu_mem_use(ncu_mem *m, const void *ptr, unsigned mask);
/* Bytes of the allocations variant v uses (its peak: all live during a run). */
int64_t ncu_mem_variant_bytes(const ncu_mem *m, int v);
/* Frees the allocation at ptr (no-op when unknown). */
void ncu_mem_free(ncu_mem *m, void *ptr);
/* Frees everything; m can be reused. */
void ncu_mem_release(ncu_mem *m);

/* ---- device context ---- */

typedef struct ncu_ctx ncu_ctx;

/* Per-launch state a lowered launch's aux points to. */
typedef struct ncu_lstate {
    ncu_ctx *ctx;
    /* cuBLASLt: D = epilogue(op(A) B) in column-major terms (ncu_blas.c). */
    cublasLtMatmulDesc_t mm;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
#ifdef NCU_HAVE_CUDNN
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnActivationDescriptor_t ad;
    cudnnConvolutionFwdAlgo_t calgo;
#endif
    size_t ws_bytes; /* library workspace this launch needs (from ctx->ws) */
    /* Where it came from: the index of its CPU launch in the host plan, and
     * the position of its first op among that launch's ops (the op list of a
     * lowered launch is a slice of its CPU launch's); maps graph nodes to
     * lowered launches for the result's node groups. */
    int src, op0;
} ncu_lstate;

struct ncu_ctx {
    nat_ctx *host; /* the pattern's host ctx and CPU plans */
    ncu_dtype dtype;
    bool tf32;          /* float32 GEMM/conv may use TF32 tensor cores */
    bool gelu_epilogue; /* float32 GELU through cuBLASLt's (tanh-form) epilogue */
    int tc_attention;   /* float16/bfloat16 attention on the tensor cores (ncu_attn.cu):
                         * 0 off, 1 on (the default), 2 on with cp.async tile copies,
                         * 3 with those and the softmax half a row a lane */
    cudaStream_t stream;
    cublasLtHandle_t lt;
#ifdef NCU_HAVE_CUDNN
    cudnnHandle_t dnn;
#endif
    ncu_mem mem;
    void **dev; /* [host->n_bufs]: device mirror of host buffer i, or NULL */
    /* Lowered plans (NAT_EAGER / NAT_FUSED): launches and their states are
     * allocated once at ncu_lower_plan's capacity (never moved: aux points in). */
    nat_plan plans[NAT_MAX_VARIANTS];
    ncu_lstate *ls[NAT_MAX_VARIANTS];
    void *ws; /* shared library workspace (variants run in turn) */
    size_t ws_bytes;
    /* Per variant: the hidden [m, h] tensor every fused MLP of the plan shares
     * (its launches run one after another on the stream), NULL when none. */
    void *hidden[NAT_MAX_VARIANTS];
    fb_err launch_err; /* first library failure inside a launch fn (sticky) */
};

/* ---- a device context's life (ncu_engine.c) ---- */

/* Makes ctx's stream, library handles and device buffer table for its host
 * ctx (ctx->host set, dtype and flags too). */
FB_MUSTCHECK fb_code ncu_ctx_open(ncu_ctx *ctx, fb_err *err);
/* Waits for the stream, frees the lowered plans, device memory, handles,
 * the host ctx (set ctx->host NULL to keep it) and ctx. */
void ncu_ctx_close(ncu_ctx *ctx);
/* What the launches enqueued since the last check reported: the last CUDA
 * error, else a library failure a launch fn recorded (ncu_launch_fail);
 * what: the step, for the message. */
FB_MUSTCHECK fb_code ncu_launch_status(ncu_ctx *ctx, const char *what, fb_err *err);

/* ---- the cost planner's device timer (ncu_cost.c) ---- */

/* Fills *t: the cost planner times a group's forms on the current device
 * with proto's dtype and flags (tf32, gelu_epilogue, tc_attention; proto outlives *t),
 * its device string naming the GPU, its compute capability, the driver and
 * those settings. */
FB_MUSTCHECK fb_code ncu_cost_timer(const ncu_ctx *proto, struct gr_cost_timer *t, fb_err *err);

/* Keeps the device busy for about ms (a one-thread kernel reading the
 * global timer), so that what the host enqueues after it queues up behind
 * it, and event pairs around each launch then time the device's work, not
 * the host's pace of enqueueing. */
void ncu_spin(cudaStream_t s, double ms);

/* ---- a plan timed launch by launch with CUDA events (ncu_events.c) ---- */

/* Event pairs: ev[2 * j] and ev[2 * j + 1] around launch j. */
typedef struct ncu_events {
    cudaEvent_t *ev;
    int n;
} ncu_events;

/* What ncu_events_run does with a launch. */
enum { NCU_EV_SKIP = 0, NCU_EV_RUN = 1, NCU_EV_TIME = 2 };

/* Makes the pairs for plans of up to n_launches launches. */
FB_MUSTCHECK fb_code ncu_events_make(ncu_events *e, int n_launches, fb_err *err);
/* Destroys them (a zeroed or freed set: nothing to do). */
void ncu_events_free(ncu_events *e);
/* Runs plan on ctx's stream: launch j timed between its pair when mask[j] is
 * NCU_EV_TIME, run untimed when NCU_EV_RUN, left out when NCU_EV_SKIP (mask
 * NULL: every launch timed); first a spin of lead_ms (0: none; from
 * ncu_events_lead), so the pairs time the device's work and not the host's
 * enqueueing.  Waits for the stream; a failure is reported under what. */
FB_MUSTCHECK fb_code ncu_events_run(ncu_ctx *ctx, const nat_plan *plan, const unsigned char *mask,
                                    double lead_ms, const ncu_events *e, const char *what,
                                    fb_err *err);
/* *ms between recorded events a and b of e (launch j: 2 * j, 2 * j + 1). */
FB_MUSTCHECK fb_code ncu_events_ms(const ncu_events *e, int a, int b, double *ms, fb_err *err);
/* Runs each of the n plans once, untimed (libraries pick and load their
 * kernels), and gives the lead that covers the host's longest enqueue of
 * one: 1.5 times it plus 0.05 ms, at most 200 ms. */
FB_MUSTCHECK fb_code ncu_events_lead(ncu_ctx *ctx, const nat_plan *const *plans, int n,
                                     const char *what, double *lead_ms, fb_err *err);

/* ---- shared by the lowering and the library calls (ncu_dev.c) ---- */

/* Records a failed library status from inside a launch fn (they return void);
 * the run checks ctx->launch_err after the plan.  Keeps the first failure. */
void ncu_launch_fail(ncu_ctx *ctx, fb_code code, const fb_err *e);

/* The device pointer for host pointer p inside one of the host buffers (p may
 * point into a buffer); allocates and uploads the buffer on first use with
 * mask bit v.  *out NULL for p NULL. */
FB_MUSTCHECK fb_code ncu_dev_ptr(ncu_ctx *ctx, int v, const float *p, float **out, fb_err *err);

/* Makes the shared library workspace (ctx->ws) at least bytes, used by the
 * variants in mask.  Launches read ctx->ws when they run, so growing it
 * before the graphs are captured is safe. */
FB_MUSTCHECK fb_code ncu_ws_reserve(ncu_ctx *ctx, size_t bytes, unsigned mask, fb_err *err);

/* ---- lowering (ncu_lower.c) ---- */

/* Lowers host plan v of ctx->host into ctx->plans[v]: device buffers, library
 * descriptors, launch fns. */
FB_MUSTCHECK fb_code ncu_lower_plan(ncu_ctx *ctx, int v, fb_err *err);

/* ---- profile (ncu_profile.c) ---- */

/* One profiled iteration of lowered plan (plan index pv, for its memory):
 * fills vr's kernel rows, counts, times and peak_mem_bytes. */
FB_MUSTCHECK fb_code ncu_profile_plan(ncu_ctx *ctx, const nat_plan *plan, int pv,
                                      fb_variant_result *vr, fb_err *err);

/* Each graph node's launch in lowered plan pv (ncu_engine.c): of the lowered
 * launches of its CPU launch, the one whose op slice holds the node's op.
 * host->n_graph_nodes entries, -1 for none; the caller frees; NULL on
 * ENOMEM. */
int *ncu_node_launches(const ncu_ctx *ctx, int pv);

/* ---- explain (ncu_explain.c) ---- */

/* The explanation of the job's variant vf (plan NAT_FUSED) against ve
 * (NAT_EAGER) of inst, whose ctx is ctx: profiled rounds within budget_s
 * (CUPTI launch marks, else event pairs), the analysis with the job's timed
 * samples of ev and fv, counterfactuals on fresh builds (bs). */
FB_MUSTCHECK fb_code ncu_explain_run(ncu_ctx *ctx, fb_instance *inst, int ve, int vf,
                                     const nat_ex_builds *bs, const fb_variant_result *ev,
                                     const fb_variant_result *fv, double budget_s, cJSON **out,
                                     fb_err *err);

/* ---- cuBLASLt (ncu_blas.c) ---- */

/* The most workspace one cuBLASLt call may ask for. */
#define NCU_LT_WS_MAX ((size_t)32 << 20)
/* The most workspace one cuDNN convolution may ask for. */
#define NCU_DNN_WS_MAX ((size_t)256 << 20)

enum { NCU_EPI_NONE, NCU_EPI_BIAS, NCU_EPI_RELU_BIAS, NCU_EPI_GELU_BIAS };

/* Row-major c[b] = a[b] (m x k) * op(bm[b]) (k x n, or n x k when trans_b) for
 * nb batches, with an epilogue on bias[n]; fills st and l (fn, its NAT_D_GEMM
 * descriptor and slots, device pointers).  Picks the algorithm now
 * (heuristic) so every run uses the same one. */
/* trans_b is also a linear's b_trans: a weight in PyTorch's nn.Linear layout
 * [n, k] (c = a w^T) is bm stored n x k.  res (may
 * be NULL): c = epilogue(a op(bm) + res) through cuBLASLt's C with beta 1; it
 * is only combined with the NONE and BIAS epilogues, so the order of bias,
 * C and activation inside cuBLASLt never matters. */
typedef struct ncu_gemm_args {
    int64_t m, n, k, nb;
    bool trans_b;
    int epi;
    float *a, *bm, *bias, *c; /* device */
    float *res;               /* device, [m, n] like c, or NULL */
} ncu_gemm_args;
FB_MUSTCHECK fb_code ncu_gemm_setup(ncu_ctx *ctx, ncu_lstate *st, nat_launch *l,
                                    const ncu_gemm_args *g, fb_err *err);
void ncu_gemm_destroy(ncu_lstate *st);
void ncu_k_gemm(const nat_launch *l);

/* ---- cuDNN (ncu_dnn.c) ---- */

/* A general NCHW convolution: stride, padding, dilation and groups per axis;
 * a 1-D convolution is h = kh = 1. */
typedef struct ncu_conv_geom {
    int n, ci, h, w, co, kh, kw;
    int sh, sw, ph, pw, dh, dw, groups;
} ncu_conv_geom;
/* The geometry of a conv descriptor's shape. */
ncu_conv_geom ncu_conv_geom_of(const nat_conv_shape *s);
/* Output height and width of g (<= 0 when the shape is impossible). */
void ncu_conv_out(const ncu_conv_geom *g, int *ho, int *wo);
/* A cuDNN convolution of geometry g into l, whose conv slots hold device
 * pointers: in, w, bias (may be NULL), out and, for fused, res: z, a
 * residual [n, co, ho, wo] (NULL: none) added before act.  fused: one
 * cudnnConvolutionBiasActivationForward, y = act(conv(x) + bias + z) (act
 * NAT_ACT_NONE or RELU); else a bare cudnnConvolutionForward.
 * FB_EUNSUPPORTED when the library (or this build) cannot; the caller falls
 * back. */
FB_MUSTCHECK fb_code ncu_conv_setup_geom(ncu_ctx *ctx, ncu_lstate *st, nat_launch *l,
                                         const ncu_conv_geom *g, bool fused, int act, fb_err *err);
void ncu_conv_destroy(ncu_lstate *st);

/* Op codes of the CPU launches' descriptors (nat_desc.h), repeated here for
 * the .cu files; ncu_lower.c static-asserts that they agree. */
enum { NCU_ADD, NCU_SUB, NCU_MUL, NCU_DIV };
enum { NCU_BC_FULL, NCU_BC_COL, NCU_BC_ROW, NCU_BC_SCALAR, NCU_BC_TILE };
enum { NCU_RELU, NCU_GELU, NCU_SIGMOID, NCU_EXP, NCU_RSQRT, NCU_UNOP_COUNT };
enum { NCU_RMAX, NCU_RSUM, NCU_RMEAN };
/* nat_act (nat_kern.h): every activation the zoo uses. */
enum {
    NCU_ACT_NONE,
    NCU_ACT_RELU,
    NCU_ACT_GELU,
    NCU_ACT_RELU6,
    NCU_ACT_SILU,
    NCU_ACT_SIGMOID,
    NCU_ACT_HARDSWISH,
    NCU_ACT_HARDSIGMOID,
    NCU_ACT_TANH,
    NCU_ACT_GELU_TANH,
    NCU_ACT_COUNT
};
/* The element chain's step codes (nat_chain_step). */
enum { NCU_CH_ACT, NCU_CH_ADD, NCU_CH_MUL, NCU_CH_SCALE };
enum { NCU_CH_BC_FULL, NCU_CH_BC_COL, NCU_CH_BC_ROW };

/* ---- our kernels (ncu_kern.cu, ncu_attn.cu): nat_kernel_fn launch fns that
 * read the descriptor and slots of their CPU twins in nat_kern_cpu.h ---- */
void ncu_k_binary(const nat_launch *l);
void ncu_k_unary(const nat_launch *l);
void ncu_k_row_reduce(const nat_launch *l);
void ncu_k_softmax(const nat_launch *l);
void ncu_k_layernorm(const nat_launch *l);
void ncu_k_elem_chain(const nat_launch *l);
void ncu_k_batchnorm(const nat_launch *l);
/* NAT_D_EPI without the residual: out = act(x + bias[(idx / inner) % c]) (a
 * GEMM's column bias: inner 1, c = cols; a conv's channel bias: inner h*w). */
void ncu_k_bias_act(const nat_launch *l);
/* NAT_D_ATTN: fused attention, head_dim <= NCU_ATTN_MAX_D. */
#define NCU_ATTN_MAX_D 128
void ncu_k_attention(const nat_launch *l);
/* The same on the tensor cores (k_attention_tc): the lowering's choice where
 * ncu_attention_tc_fits, made once per plan. */
void ncu_k_attention_tc(const nat_launch *l);
/* The same with its tiles copied by cp.async (params.tc_attention=2), and
 * with that and its softmax split half a row a lane (3). */
void ncu_k_attention_tc_async(const nat_launch *l);
void ncu_k_attention_tc_split(const nat_launch *l);
/* Whether attention of head dim d in dtype runs on the tensor cores when
 * ctx->tc_attention is set (16-bit storage, d a multiple of 16, compute
 * capability 8.0 or later, the shared memory to be had); the first call per
 * dtype sets the kernel's shared-memory limit, so the lowering calls it. */
bool ncu_attention_tc_fits(ncu_dtype dtype, int d);

/* ---- the model zoo's kernels (ncu_kern_zoo.cu): launch fns that read the
 * descriptor and slots of their CPU twins in graph/gr_kern.h, device
 * pointers in p[] ---- */

/* Steps of one element chain the kernel takes (its operands are at
 * p[NAT_CHAIN_OPD + operand], so at most NAT_MAX_ARGS - 2 of them). */
#define NCU_CHAIN_MAX (NAT_MAX_ARGS - 2)
void ncu_k_zoo_chain(const nat_launch *l);
void ncu_k_zoo_softmax(const nat_launch *l); /* with the descriptor's scale and causal */
void ncu_k_zoo_causal(const nat_launch *l);
void ncu_k_zoo_maxpool(const nat_launch *l);
void ncu_k_zoo_avgpool(const nat_launch *l);
void ncu_k_zoo_adaptive_avgpool(const nat_launch *l);
void ncu_k_zoo_embedding(const nat_launch *l);
#define NCU_PERMUTE_MAX_RANK 6
void ncu_k_zoo_permute(const nat_launch *l);
#define NCU_CONCAT_MAX_IN 6
void ncu_k_zoo_concat(const nat_launch *l);
void ncu_k_zoo_slice(const nat_launch *l);
/* The epilogue of a bare library convolution or GEMM, one pass:
 * out = act(x + bias[(idx / inner) % c] + res[idx]), any nat_act, bias and res
 * NULL for none (a conv's channel bias: inner = ho*wo, c = co; a GEMM's column
 * bias: inner 1, c = n).  May run in place (out == x).  NAT_D_EPI. */
void ncu_k_epilogue(const nat_launch *l);

/* dst[i] = (dtype) src[i] and back, on stream; return cudaError_t as int. */
int ncu_convert_to(const float *src, void *dst, ncu_dtype t, size_t n, cudaStream_t s);
int ncu_convert_from(const void *src, float *dst, ncu_dtype t, size_t n, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
