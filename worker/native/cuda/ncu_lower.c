/* ncu_lower: lowers a pattern's CPU plan into a CUDA plan of the same shape.
 * Each CPU launch fn has one lowering here: our kernels take the launch as it
 * is (same i[] and f[], device pointers in p[]); GEMMs, batched GEMMs and
 * convolutions become cuBLASLt and cuDNN calls; a CPU kernel the GPU does
 * differently is split or merged here, with the choice written beside it.  A
 * CPU fn with no lowering makes the workload unsupported on CUDA (by name). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_log.h"
#include "nat_kern_cpu.h"
#include "ncu_int.h"

/* The .cu files use ncu_int.h's copies of the CPU op codes. */
_Static_assert((int)NAT_ADD == NCU_ADD && (int)NAT_SUB == NCU_SUB && (int)NAT_MUL == NCU_MUL &&
                   (int)NAT_DIV == NCU_DIV,
               "binary op codes");
_Static_assert((int)NAT_BC_FULL == NCU_BC_FULL && (int)NAT_BC_COL == NCU_BC_COL &&
                   (int)NAT_BC_ROW == NCU_BC_ROW && (int)NAT_BC_SCALAR == NCU_BC_SCALAR &&
                   (int)NAT_BC_TILE == NCU_BC_TILE,
               "broadcast codes");
_Static_assert((int)NAT_RELU == NCU_RELU && (int)NAT_GELU == NCU_GELU &&
                   (int)NAT_SIGMOID == NCU_SIGMOID && (int)NAT_EXP == NCU_EXP &&
                   (int)NAT_RSQRT == NCU_RSQRT,
               "unary op codes");
_Static_assert((int)NAT_RMAX == NCU_RMAX && (int)NAT_RSUM == NCU_RSUM &&
                   (int)NAT_RMEAN == NCU_RMEAN,
               "reduction codes");
_Static_assert((int)NAT_ACT_NONE == NCU_ACT_NONE && (int)NAT_ACT_RELU == NCU_ACT_RELU &&
                   (int)NAT_ACT_GELU == NCU_ACT_GELU,
               "activation codes");

#define BIT(v) (1u << (v))

void ncu_launch_fail(ncu_ctx *ctx, fb_code code, const fb_err *e)
{
    if (ctx->launch_err.code != FB_OK)
        return;
    ctx->launch_err = *e;
    ctx->launch_err.code = code;
}

fb_code ncu_ws_reserve(ncu_ctx *ctx, size_t bytes, unsigned mask, fb_err *err)
{
    if (bytes > ctx->ws_bytes) {
        unsigned old_mask = 0;
        for (int i = 0; i < ctx->mem.n; i++)
            if (ctx->mem.a[i].ptr == ctx->ws)
                old_mask = ctx->mem.a[i].mask;
        if (ctx->ws)
            ncu_mem_free(&ctx->mem, ctx->ws);
        ctx->ws = NULL;
        ctx->ws_bytes = 0;
        fb_code rc =
            ncu_mem_alloc(&ctx->mem, bytes, old_mask | mask, "library.workspace", &ctx->ws, err);
        if (rc)
            return rc;
        ctx->ws_bytes = bytes;
    }
    if (ctx->ws)
        ncu_mem_use(&ctx->mem, ctx->ws, mask);
    return FB_OK;
}

/* ---- device buffers ---- */

/* Copies host buffer b to dev in the ctx dtype and rounds the host copy in
 * place to what the device holds (so references see the GPU's inputs). */
static fb_code upload(ncu_ctx *ctx, nat_buf *b, void *dev, fb_err *err)
{
    size_t bytes = b->n * sizeof(float);
    cudaStream_t s = ctx->stream; /* non-blocking: every copy goes on it, in order */
    if (ctx->dtype == NCU_F32) {
        fb_code rc = ncu_cuda_check(cudaMemcpyAsync(dev, b->data, bytes, cudaMemcpyHostToDevice, s),
                                    "upload", err);
        return rc ? rc : ncu_cuda_check(cudaStreamSynchronize(s), "upload", err);
    }
    float *stage = NULL;
    fb_code rc = ncu_cuda_check(cudaMalloc((void **)&stage, bytes), "upload staging", err);
    if (!rc)
        rc = ncu_cuda_check(cudaMemcpyAsync(stage, b->data, bytes, cudaMemcpyHostToDevice, s),
                            "upload", err);
    if (!rc)
        rc = ncu_cuda_check(ncu_convert_to(stage, dev, ctx->dtype, b->n, ctx->stream), "convert",
                            err);
    if (!rc)
        rc = ncu_cuda_check(ncu_convert_from(dev, stage, ctx->dtype, b->n, ctx->stream),
                            "convert back", err);
    if (!rc)
        rc = ncu_cuda_check(cudaStreamSynchronize(ctx->stream), "upload", err);
    if (!rc)
        rc = ncu_cuda_check(cudaMemcpyAsync(b->data, stage, bytes, cudaMemcpyDeviceToHost, s),
                            "round host copy", err);
    if (!rc)
        rc = ncu_cuda_check(cudaStreamSynchronize(s), "round host copy", err);
    if (stage)
        (void)cudaFree(stage);
    return rc;
}

fb_code ncu_dev_ptr(ncu_ctx *ctx, int v, const float *p, float **out, fb_err *err)
{
    *out = NULL;
    if (!p)
        return FB_OK;
    nat_ctx *h = ctx->host;
    for (int i = 0; i < h->n_bufs; i++) {
        nat_buf *b = &h->bufs[i];
        if (p < b->data || p >= b->data + b->n)
            continue;
        size_t esz = ncu_dtype_size(ctx->dtype);
        if (!ctx->dev[i]) {
            fb_code rc =
                ncu_mem_alloc(&ctx->mem, b->n * esz, b->variants, b->name, &ctx->dev[i], err);
            if (!rc)
                rc = upload(ctx, b, ctx->dev[i], err);
            if (rc)
                return rc;
        }
        ncu_mem_use(&ctx->mem, ctx->dev[i], BIT(v));
        *out = (float *)((char *)ctx->dev[i] + (size_t)(p - b->data) * esz);
        return FB_OK;
    }
    return fb_err_set(err, FB_EINTERNAL, NULL, "a launch argument is in no host buffer");
}

/* ---- emitting launches ---- */

/* Appends a launch to lowered plan v copying src's metadata (name, category,
 * ops, i[], f[], rule, kind); p[] and fn are the caller's.  ops, when not NULL,
 * replaces src's (NULL-terminated, static strings). */
static fb_code emit(ncu_ctx *ctx, int v, const nat_launch *src, const char *name,
                    const char *const *ops, nat_launch **out, fb_err *err)
{
    nat_plan *plan = &ctx->plans[v];
    if (plan->n >= plan->cap)
        return fb_err_set(err, FB_EINTERNAL, NULL, "lowered plan is full (%d launches)", plan->cap);
    nat_launch *l = &plan->launches[plan->n];
    ncu_lstate *st = &ctx->ls[v][plan->n];
    plan->n++;
    *l = *src;
    memset(l->p, 0, sizeof l->p);
    l->name = name ? name : src->name;
    if (ops) {
        l->n_ops = 0;
        for (int k = 0; k < NAT_MAX_OPS && ops[k]; k++) {
            l->ops[k] = ops[k];
            l->n_ops = k + 1;
        }
    }
    memset(st, 0, sizeof *st);
    st->ctx = ctx;
    l->aux = st;
    *out = l;
    return FB_OK;
}

/* Our kernel for src as it is: p[0..np) mapped to the device. */
static fb_code lower_same(ncu_ctx *ctx, int v, const nat_launch *src, nat_kernel_fn fn, int np,
                          fb_err *err)
{
    nat_launch *l = NULL;
    fb_code rc = emit(ctx, v, src, NULL, NULL, &l, err);
    if (rc)
        return rc;
    l->fn = fn;
    for (int j = 0; j < np && !rc; j++)
        rc = ncu_dev_ptr(ctx, v, src->p[j], &l->p[j], err);
    return rc;
}

/* A unary launch out = op(x) over n elements (in place when x == out). */
static fb_code emit_unary(ncu_ctx *ctx, int v, const nat_launch *src, const char *name,
                          const char *const *ops, int op, float *x, float *out, int64_t n,
                          fb_err *err)
{
    nat_launch *l = NULL;
    fb_code rc = emit(ctx, v, src, name, ops, &l, err);
    if (rc)
        return rc;
    l->category = FB_KC_ELEMENTWISE;
    memset(l->i, 0, sizeof l->i);
    l->i[0] = op;
    l->i[1] = n;
    l->p[0] = x;
    l->p[1] = out;
    l->fn = ncu_k_unary;
    return FB_OK;
}

/* A cuBLASLt launch of g, named name with ops (NULL: src's). */
static fb_code emit_gemm(ncu_ctx *ctx, int v, const nat_launch *src, const char *name,
                         const char *const *ops, const ncu_gemm_args *g, fb_err *err)
{
    nat_launch *l = NULL;
    fb_code rc = emit(ctx, v, src, name, ops, &l, err);
    if (!rc)
        rc = ncu_gemm_setup(ctx, (ncu_lstate *)l->aux, l, g, err);
    if (!rc)
        rc = ncu_ws_reserve(ctx, ((ncu_lstate *)l->aux)->ws_bytes, BIT(v), err);
    return rc;
}

/* ---- GEMMs ---- */

static fb_code lower_sgemm(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err)
{
    ncu_gemm_args g = {.m = src->i[0], .n = src->i[1], .k = src->i[2], .nb = 1};
    fb_code rc = ncu_dev_ptr(ctx, v, src->p[0], &g.a, err);
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, src->p[1], &g.bm, err);
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, src->p[2], &g.c, err);
    return rc ? rc : emit_gemm(ctx, v, src, "cublaslt_gemm", NULL, &g, err);
}

static fb_code lower_bmm(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err)
{
    ncu_gemm_args g = {
        .nb = src->i[0], .m = src->i[1], .n = src->i[2], .k = src->i[3], .trans_b = src->i[4] != 0};
    fb_code rc = ncu_dev_ptr(ctx, v, src->p[0], &g.a, err);
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, src->p[1], &g.bm, err);
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, src->p[2], &g.c, err);
    return rc ? rc : emit_gemm(ctx, v, src, "cublaslt_bmm", NULL, &g, err);
}

/* c = act(a b + bias) in as few launches as cuBLASLt allows.  cuBLASLt's GELU
 * epilogue is the tanh form (|diff| <= 4.7e-4 from the exact erf GELU): inside
 * the 1e-2 tolerance of float16/bfloat16, not the 1e-4 of float32; so float32
 * takes the BIAS epilogue plus our exact GELU kernel (in place), unless
 * params.gelu_epilogue=1 asks for the single launch. */
static fb_code gemm_act(ncu_ctx *ctx, int v, const nat_launch *src, ncu_gemm_args *g, int act,
                        const char *const *ops_single, const char *const *ops_gemm,
                        const char *const *ops_act, fb_err *err)
{
    static const char *const ops_gelu[] = {"gelu", NULL};
    bool split_gelu = act == NCU_ACT_GELU && ctx->dtype == NCU_F32 && !ctx->gelu_epilogue;
    if (!g->bias) {
        g->epi = NCU_EPI_NONE;
    } else if (act == NCU_ACT_RELU) {
        g->epi = NCU_EPI_RELU_BIAS;
    } else if (act == NCU_ACT_GELU && !split_gelu) {
        g->epi = NCU_EPI_GELU_BIAS;
    } else {
        g->epi = NCU_EPI_BIAS;
    }
    static const char *const names[] = {"cublaslt_gemm", "cublaslt_gemm_bias",
                                        "cublaslt_gemm_relu_bias", "cublaslt_gemm_gelu_bias"};
    bool extra = act != NCU_ACT_NONE && (split_gelu || !g->bias);
    fb_code rc = emit_gemm(ctx, v, src, names[g->epi], extra ? ops_gemm : ops_single, g, err);
    if (!rc && extra)
        rc = emit_unary(ctx, v, src, act == NCU_ACT_RELU ? "relu" : "gelu",
                        act == NCU_ACT_RELU ? ops_act : (ops_act ? ops_act : ops_gelu),
                        act == NCU_ACT_RELU ? NCU_RELU : NCU_GELU, g->c, g->c, g->m * g->n, err);
    return rc;
}

static fb_code lower_gemm_epi(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err)
{
    static const char *const ops_lb[] = {"linear", "bias", NULL};
    static const char *const ops_l[] = {"linear", NULL};
    static const char *const ops_relu[] = {"relu", NULL};
    static const char *const ops_gelu[] = {"gelu", NULL};
    ncu_gemm_args g = {.m = src->i[0], .n = src->i[1], .k = src->i[2], .nb = 1};
    int act = (int)src->i[3];
    if (act != NCU_ACT_NONE && act != NCU_ACT_RELU && act != NCU_ACT_GELU)
        return fb_err_set(err, FB_EUNSUPPORTED, NULL, "no CUDA epilogue for activation %d", act);
    fb_code rc = ncu_dev_ptr(ctx, v, src->p[0], &g.a, err);
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, src->p[1], &g.bm, err);
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, src->p[2], &g.bias, err);
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, src->p[3], &g.c, err);
    if (rc)
        return rc;
    return gemm_act(ctx, v, src, &g, act, NULL, g.bias ? ops_lb : ops_l,
                    act == NCU_ACT_RELU ? ops_relu : ops_gelu, err);
}

/* The CPU's one-pass MLP (row blocks through a per-thread workspace) has no
 * library form on the GPU; the best the libraries allow is two cuBLASLt calls
 * with epilogues: hidden = gelu(x w1 + b1) (GELU_BIAS; float32: BIAS + our
 * GELU, see gemm_act), out = hidden w2 + b2 (BIAS).  The [m, h] hidden tensor
 * goes through memory once instead of three times as in eager. */
static fb_code lower_mlp(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err)
{
    static const char *const ops1[] = {"linear", "bias", "gelu", NULL};
    static const char *const ops1_split[] = {"linear", "bias", NULL};
    static const char *const ops_gelu[] = {"gelu", NULL};
    static const char *const ops2[] = {"linear", "bias", NULL};
    int64_t m = src->i[0], d = src->i[1], h = src->i[2];
    ncu_gemm_args g1 = {.m = m, .n = h, .k = d, .nb = 1}, g2 = {.m = m, .n = d, .k = h, .nb = 1};
    void *hid = NULL;
    fb_code rc = ncu_mem_alloc(&ctx->mem, (size_t)(m * h) * ncu_dtype_size(ctx->dtype), BIT(v),
                               "fused.hidden", &hid, err);
    const float *const hp[] = {src->p[0], src->p[1], src->p[2], src->p[3], src->p[4], src->p[5]};
    float *dp[6] = {0};
    for (int j = 0; j < 6 && !rc; j++)
        rc = ncu_dev_ptr(ctx, v, hp[j], &dp[j], err);
    if (rc)
        return rc;
    g1.a = dp[0], g1.bm = dp[1], g1.bias = dp[2], g1.c = hid;
    g2.a = hid, g2.bm = dp[3], g2.bias = dp[4], g2.c = dp[5], g2.epi = NCU_EPI_BIAS;
    rc = gemm_act(ctx, v, src, &g1, NCU_ACT_GELU, ops1, ops1_split, ops_gelu, err);
    if (!rc)
        rc = emit_gemm(ctx, v, src, "cublaslt_gemm_bias", ops2, &g2, err);
    return rc;
}

/* ---- convolutions ---- */

/* After a bare convolution: bias (+ activation) by our kernel on out, in place.
 * With no bias, an activation alone is a unary kernel. */
static fb_code conv_epilogue(ncu_ctx *ctx, int v, const nat_launch *src, float *bias, float *out,
                             int act, const char *const *ops, fb_err *err)
{
    int64_t n = src->i[0], co = src->i[4], ho = src->i[2] + 2 * src->i[6] - src->i[5] + 1;
    int64_t wo = src->i[3] + 2 * src->i[6] - src->i[5] + 1, total = n * co * ho * wo;
    if (!bias)
        return act == NCU_ACT_NONE
                   ? FB_OK
                   : emit_unary(ctx, v, src, act == NCU_ACT_RELU ? "relu" : "gelu", ops,
                                act == NCU_ACT_RELU ? NCU_RELU : NCU_GELU, out, out, total, err);
    nat_launch *l = NULL;
    fb_code rc = emit(ctx, v, src, act == NCU_ACT_NONE ? "bias_add" : "bias_act", ops, &l, err);
    if (rc)
        return rc;
    l->category = FB_KC_ELEMENTWISE;
    memset(l->i, 0, sizeof l->i);
    l->i[0] = total;
    l->i[1] = co;
    l->i[2] = ho * wo;
    l->i[3] = act;
    l->p[0] = out;
    l->p[1] = bias;
    l->p[2] = out;
    l->fn = ncu_k_bias_act;
    return FB_OK;
}

/* A convolution launch (cuDNN), fused with bias+act when asked and possible. */
static fb_code emit_conv(ncu_ctx *ctx, int v, const nat_launch *src, float *const *dp, bool fused,
                         int act, const char *const *ops, fb_err *err)
{
    nat_launch *l = NULL;
    fb_code rc = emit(ctx, v, src, fused ? "cudnn_conv_bias_act" : "cudnn_conv", ops, &l, err);
    if (rc)
        return rc;
    for (int j = 0; j < 4; j++)
        l->p[j] = dp[j];
    rc = ncu_conv_setup(ctx, (ncu_lstate *)l->aux, l, fused, act, err);
    if (!rc)
        rc = ncu_ws_reserve(ctx, ((ncu_lstate *)l->aux)->ws_bytes, BIT(v), err);
    if (rc && fused) { /* undo, so the caller can fall back */
        ncu_conv_destroy((ncu_lstate *)l->aux);
        ctx->plans[v].n--;
        (void)cudaGetLastError();
    }
    return rc;
}

/* Eager (PyTorch's cudnn path): cuDNN convolution, then a bias kernel.  Fused:
 * cudnnConvolutionBiasActivationForward, one launch; where cuDNN refuses the
 * dtype, a bare convolution plus our bias+activation kernel (named so). */
static fb_code lower_conv(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err)
{
    static const char *const ops_conv[] = {"conv2d", NULL};
    static const char *const ops_bias[] = {"bias", NULL};
    float *dp[4] = {0};
    int act = (int)src->i[7];
    if (act != NCU_ACT_NONE && act != NCU_ACT_RELU)
        return fb_err_set(err, FB_EUNSUPPORTED, NULL, "no CUDA conv for activation %d", act);
    fb_code rc = FB_OK;
    for (int j = 0; j < 4 && !rc; j++)
        rc = ncu_dev_ptr(ctx, v, src->p[j], &dp[j], err);
    if (rc)
        return rc;
    if (v == NAT_FUSED && dp[2]) {
        fb_err local;
        fb_err_clear(&local);
        rc = emit_conv(ctx, v, src, dp, true, act, NULL, &local);
        if (rc == FB_OK || rc == FB_EOOM)
            return rc == FB_OK ? FB_OK : fb_err_set(err, rc, NULL, "%s", local.msg);
        /* Any refusal of the fused call (cuDNN reports some as BAD_PARAM):
         * fall back, and say so where a person will read it. */
        fb_warn("cuda %s: fused cuDNN conv refused (%s); using conv + bias_act", src->name,
                local.msg);
    }
    bool single = src->n_ops <= 1 && !dp[2] && act == NCU_ACT_NONE;
    rc = emit_conv(ctx, v, src, dp, false, NCU_ACT_NONE, single ? NULL : ops_conv, err);
    if (!rc && (dp[2] || act != NCU_ACT_NONE))
        rc = conv_epilogue(ctx, v, src, dp[2], dp[3], act,
                           v == NAT_FUSED && src->n_ops > 1 ? &src->ops[1] : ops_bias, err);
    return rc;
}

/* ---- attention ---- */

static fb_code lower_attention(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err)
{
    if (src->i[2] > NCU_ATTN_MAX_D || src->i[0] > 65535)
        return fb_err_set(err, FB_EUNSUPPORTED, "params.head_dim",
                          "fused CUDA attention takes head_dim <= %d and batch*heads <= 65535",
                          NCU_ATTN_MAX_D);
    return lower_same(ctx, v, src, ncu_k_attention, 4, err);
}

/* ---- the table ---- */

static fb_code lower_one(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err)
{
    static const struct {
        nat_kernel_fn cpu, gpu;
        int np;
    } same[] = {
        {nat_k_binary, ncu_k_binary, 3},         {nat_k_unary, ncu_k_unary, 2},
        {nat_k_row_reduce, ncu_k_row_reduce, 2}, {nat_k_softmax, ncu_k_softmax, 2},
        {nat_k_layernorm, ncu_k_layernorm, 5},   {nat_k_elem_chain, ncu_k_elem_chain, 3},
        {nat_k_batchnorm, ncu_k_batchnorm, 6},
    };
    if ((src->fn == nat_k_unary && (src->i[0] < 0 || src->i[0] >= NCU_UNOP_COUNT)) ||
        (src->fn == nat_k_binary && (src->i[0] < 0 || src->i[0] > NCU_DIV)))
        return fb_err_set(err, FB_EUNSUPPORTED, NULL, "no CUDA kernel for %s op %lld", src->name,
                          (long long)src->i[0]);
    for (size_t j = 0; j < sizeof same / sizeof same[0]; j++)
        if (src->fn == same[j].cpu)
            return lower_same(ctx, v, src, same[j].gpu, same[j].np, err);
    if (src->fn == nat_k_sgemm)
        return lower_sgemm(ctx, v, src, err);
    if (src->fn == nat_k_gemm_epi)
        return lower_gemm_epi(ctx, v, src, err);
    if (src->fn == nat_k_mlp_fused)
        return lower_mlp(ctx, v, src, err);
    if (src->fn == nat_k_bmm)
        return lower_bmm(ctx, v, src, err);
    if (src->fn == nat_k_conv2d)
        return lower_conv(ctx, v, src, err);
    if (src->fn == nat_k_attention)
        return lower_attention(ctx, v, src, err);
    return fb_err_set(err, FB_EUNSUPPORTED, NULL, "the CUDA backend has no lowering for kernel %s",
                      src->name);
}

/* A CPU launch becomes at most this many GPU launches (gemm + activation). */
#define LOWER_FANOUT 3

fb_code ncu_lower_plan(ncu_ctx *ctx, int v, fb_err *err)
{
    const nat_plan *cpu = &ctx->host->plans[v];
    nat_plan *gpu = &ctx->plans[v];
    int cap = cpu->n * LOWER_FANOUT + 1;
    gpu->launches = calloc((size_t)cap, sizeof *gpu->launches);
    ctx->ls[v] = calloc((size_t)cap, sizeof *ctx->ls[v]);
    if (!gpu->launches || !ctx->ls[v])
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate a lowered plan");
    gpu->cap = cap;
    fb_code rc = FB_OK;
    for (int j = 0; j < cpu->n && !rc; j++)
        rc = lower_one(ctx, v, &cpu->launches[j], err);
    float *out = NULL;
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, cpu->out, &out, err);
    gpu->out = out;
    gpu->out_n = cpu->out_n;
    return rc;
}
