/* ncu_lower: lowers a pattern's CPU plan into a CUDA plan of the same shape.
 * Each CPU launch fn has one lowering here: our kernels take the launch as it
 * is (same descriptor, device pointers in p[]); GEMMs, batched GEMMs and
 * convolutions become cuBLASLt and cuDNN calls; a CPU kernel the GPU does
 * differently is split or merged here, with the choice written beside it.  A
 * CPU fn with no lowering makes the workload unsupported on CUDA (by name).
 * The same table lowers the pattern suite's launches (nat_kern_cpu.h) and the
 * model zoo's (graph/gr_kern.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_log.h"
#include "gr_kern.h"
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
_Static_assert((int)NAT_ACT_RELU6 == NCU_ACT_RELU6 && (int)NAT_ACT_SILU == NCU_ACT_SILU &&
                   (int)NAT_ACT_SIGMOID == NCU_ACT_SIGMOID &&
                   (int)NAT_ACT_HARDSWISH == NCU_ACT_HARDSWISH &&
                   (int)NAT_ACT_HARDSIGMOID == NCU_ACT_HARDSIGMOID &&
                   (int)NAT_ACT_TANH == NCU_ACT_TANH &&
                   (int)NAT_ACT_GELU_TANH == NCU_ACT_GELU_TANH &&
                   (int)NAT_ACT_GELU_TANH + 1 == NCU_ACT_COUNT,
               "the model zoo's activation codes");
_Static_assert((int)NAT_CH_ACT == NCU_CH_ACT && (int)NAT_CH_ADD == NCU_CH_ADD &&
                   (int)NAT_CH_MUL == NCU_CH_MUL && (int)NAT_CH_SCALE == NCU_CH_SCALE,
               "chain step codes");
_Static_assert((int)NAT_CH_FULL == NCU_CH_BC_FULL && (int)NAT_CH_COL == NCU_CH_BC_COL &&
                   (int)NAT_CH_ROW == NCU_CH_BC_ROW,
               "chain broadcast codes");
_Static_assert(NAT_CHAIN_MAX <= NCU_CHAIN_MAX, "the CUDA chain takes every CPU chain");
_Static_assert(NAT_PERMUTE_MAX_RANK == NCU_PERMUTE_MAX_RANK &&
                   NAT_CONCAT_MAX_IN == NCU_CONCAT_MAX_IN,
               "data movement limits");

static fb_code no_kernel(const nat_launch *src, const char *why, fb_err *err);

#define BIT(v) (1u << (v))

/* ---- emitting launches ---- */

/* Appends a launch to lowered plan v copying src's metadata (name, category,
 * ops, descriptor, rule, kind); p[] and fn are the caller's, and so is the
 * descriptor where the launch does something else than src (a library GEMM
 * of a fused MLP, an epilogue).  ops, when not NULL,
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
    /* A launch of one graph op is no fusion group, whatever formed its CPU
     * launch (a fused group the GPU runs as library call + epilogue). */
    if (l->n_ops < 2)
        l->rule = l->kind = NULL;
    l->impl = NAT_IMPL_CUDA; /* our kernel, unless a library call replaces it */
    memset(st, 0, sizeof *st);
    st->ctx = ctx;
    st->src = (int)(src - ctx->host->plans[v].launches);
    l->aux = st;
    *out = l;
    return FB_OK;
}

/* As emit, the launch's ops being src's ops [from, to) (its first op's
 * position kept in its state, for ncu_engine.c's node map). */
static fb_code emit_slice(ncu_ctx *ctx, int v, const nat_launch *src, const char *name, int from,
                          int to, nat_launch **out, fb_err *err)
{
    const char *ops[NAT_MAX_OPS + 1] = {0};
    from = from < 0 ? 0 : (from > src->n_ops ? src->n_ops : from);
    to = to < from ? from : (to > src->n_ops ? src->n_ops : to);
    for (int k = from; k < to; k++)
        ops[k - from] = src->ops[k];
    fb_code rc = emit(ctx, v, src, name, ops, out, err);
    if (!rc)
        ((ncu_lstate *)(*out)->aux)->op0 = from;
    return rc;
}

/* Our kernel for src as it is: the slots p[0..np) mapped to the device. */
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
    l->dk = NAT_D_ELEM;
    l->d.elem = (nat_elem_desc){.rows = 1, .cols = n, .op = op, .bcast = NAT_BC_SCALAR};
    l->p[NAT_ELEM_A] = x;
    l->p[NAT_ELEM_OUT] = out;
    l->fn = ncu_k_unary;
    return FB_OK;
}

/* Makes l (just emitted) the cuBLASLt call of g. */
static fb_code gemm_on(ncu_ctx *ctx, int v, nat_launch *l, const ncu_gemm_args *g, fb_err *err)
{
    l->impl = NAT_IMPL_CUBLASLT;
    fb_code rc = ncu_gemm_setup(ctx, (ncu_lstate *)l->aux, l, g, err);
    if (!rc)
        rc = ncu_ws_reserve(ctx, ((ncu_lstate *)l->aux)->ws_bytes, BIT(v), err);
    return rc;
}

/* A cuBLASLt launch of g, named name with ops (NULL: src's). */
static fb_code emit_gemm(ncu_ctx *ctx, int v, const nat_launch *src, const char *name,
                         const char *const *ops, const ncu_gemm_args *g, fb_err *err)
{
    nat_launch *l = NULL;
    fb_code rc = emit(ctx, v, src, name, ops, &l, err);
    return rc ? rc : gemm_on(ctx, v, l, g, err);
}

/* A cuBLASLt launch of g with src's ops [from, to). */
static fb_code emit_gemm_slice(ncu_ctx *ctx, int v, const nat_launch *src, const char *name,
                               int from, int to, const ncu_gemm_args *g, fb_err *err)
{
    nat_launch *l = NULL;
    fb_code rc = emit_slice(ctx, v, src, name, from, to, &l, err);
    return rc ? rc : gemm_on(ctx, v, l, g, err);
}

/* Our epilogue kernel out = act(x + bias + res) over n elements (bias[(idx /
 * inner) % c]), with src's ops [from, to), or ops when not NULL. */
typedef struct epi_args {
    float *x, *bias, *res, *out; /* device; bias and res may be NULL */
    int64_t n, c, inner;
    int act;
} epi_args;

static fb_code emit_epilogue(ncu_ctx *ctx, int v, const nat_launch *src, const char *name, int from,
                             int to, const char *const *ops, const epi_args *e, fb_err *err)
{
    nat_launch *l = NULL;
    fb_code rc = ops ? emit(ctx, v, src, name, ops, &l, err)
                     : emit_slice(ctx, v, src, name, from, to, &l, err);
    if (rc)
        return rc;
    l->category = FB_KC_ELEMENTWISE;
    l->dk = NAT_D_EPI;
    l->d.epi = (nat_epi_desc){.n = e->n, .c = e->c, .inner = e->inner, .act = e->act};
    l->p[NAT_EPI_X] = e->x;
    l->p[NAT_EPI_BIAS] = e->bias;
    l->p[NAT_EPI_RES] = e->res;
    l->p[NAT_EPI_OUT] = e->out;
    l->fn = ncu_k_epilogue;
    return FB_OK;
}

/* ---- GEMMs ---- */

static fb_code lower_sgemm(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err)
{
    const nat_gemm_desc *d = &src->d.gemm;
    ncu_gemm_args g = {.m = d->m, .n = d->n, .k = d->k, .nb = 1, .trans_b = d->b_trans};
    fb_code rc = ncu_dev_ptr(ctx, v, src->p[NAT_GEMM_A], &g.a, err);
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, src->p[NAT_GEMM_B], &g.bm, err);
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, src->p[NAT_GEMM_C], &g.c, err);
    return rc ? rc : emit_gemm(ctx, v, src, "cublaslt_gemm", NULL, &g, err);
}

static fb_code lower_bmm(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err)
{
    const nat_gemm_desc *d = &src->d.gemm;
    ncu_gemm_args g = {.nb = d->nb, .m = d->m, .n = d->n, .k = d->k, .trans_b = d->b_trans};
    fb_code rc = ncu_dev_ptr(ctx, v, src->p[NAT_GEMM_A], &g.a, err);
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, src->p[NAT_GEMM_B], &g.bm, err);
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, src->p[NAT_GEMM_C], &g.c, err);
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
    const nat_gemm_desc *d = &src->d.gemm;
    ncu_gemm_args g = {.m = d->m, .n = d->n, .k = d->k, .nb = 1, .trans_b = d->b_trans};
    int act = d->act;
    if (act != NCU_ACT_NONE && act != NCU_ACT_RELU && act != NCU_ACT_GELU)
        return fb_err_set(err, FB_EUNSUPPORTED, NULL, "no CUDA epilogue for activation %d", act);
    if (src->p[NAT_GEMM_RES])
        return no_kernel(src, "a residual on a pattern GEMM", err);
    fb_code rc = ncu_dev_ptr(ctx, v, src->p[NAT_GEMM_A], &g.a, err);
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, src->p[NAT_GEMM_B], &g.bm, err);
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, src->p[NAT_GEMM_BIAS], &g.bias, err);
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, src->p[NAT_GEMM_C], &g.c, err);
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
    const nat_mlp_desc *md = &src->d.mlp;
    int64_t m = md->m, d = md->d, h = md->h;
    ncu_gemm_args g1 = {.m = m, .n = h, .k = d, .nb = 1, .trans_b = md->w1_trans};
    ncu_gemm_args g2 = {.m = m, .n = d, .k = h, .nb = 1, .trans_b = md->w2_trans};
    void *hid = ctx->hidden[v]; /* ncu_lower_plan made it for the largest MLP */
    fb_code rc = hid ? FB_OK : fb_err_set(err, FB_EINTERNAL, NULL, "no hidden buffer for the MLP");
    if (!rc && (md->act != NCU_ACT_GELU || src->p[NAT_MLP_RES]))
        rc = no_kernel(src, "a pattern MLP other than GELU without residual", err);
    float *dp[NAT_MLP_OUT + 1] = {0}; /* NAT_MLP_X .. NAT_MLP_OUT */
    for (int j = 0; j <= NAT_MLP_OUT && !rc; j++)
        rc = ncu_dev_ptr(ctx, v, src->p[j], &dp[j], err);
    if (rc)
        return rc;
    g1.a = dp[NAT_MLP_X], g1.bm = dp[NAT_MLP_W1], g1.bias = dp[NAT_MLP_B1], g1.c = hid;
    g2.a = hid, g2.bm = dp[NAT_MLP_W2], g2.bias = dp[NAT_MLP_B2], g2.c = dp[NAT_MLP_OUT];
    g2.epi = NCU_EPI_BIAS;
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
    const nat_conv_shape *s = &src->d.conv.s;
    int64_t co = s->co, hw = (int64_t)s->ho * s->wo, total = (int64_t)s->n * co * hw;
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
    l->dk = NAT_D_EPI;
    l->d.epi = (nat_epi_desc){.n = total, .c = co, .inner = hw, .act = act};
    l->p[NAT_EPI_X] = out;
    l->p[NAT_EPI_BIAS] = bias;
    l->p[NAT_EPI_OUT] = out;
    l->fn = ncu_k_bias_act;
    return FB_OK;
}

/* A convolution launch (cuDNN), fused with bias+act when asked and possible;
 * dp: the device pointers at src's NAT_CONV_IN .. NAT_CONV_OUT slots. */
static fb_code emit_conv(ncu_ctx *ctx, int v, const nat_launch *src, float *const *dp, bool fused,
                         int act, const char *const *ops, fb_err *err)
{
    nat_launch *l = NULL;
    fb_code rc = emit(ctx, v, src, fused ? "cudnn_conv_bias_act" : "cudnn_conv", ops, &l, err);
    if (rc)
        return rc;
    l->p[NAT_CONV_IN] = dp[NAT_CONV_IN];
    l->p[NAT_CONV_W] = dp[NAT_CONV_W];
    l->p[NAT_CONV_BIAS] = dp[NAT_CONV_BIAS];
    l->p[NAT_CONV_OUT] = dp[NAT_CONV_OUT];
    l->d.conv.act = fused ? act : NAT_ACT_NONE;
    l->impl = NAT_IMPL_CUDNN;
    ncu_conv_geom g = ncu_conv_geom_of(&src->d.conv.s);
    rc = ncu_conv_setup_geom(ctx, (ncu_lstate *)l->aux, l, &g, fused, act, err);
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
    float *dp[NAT_CONV_OUT + 1] = {0};
    int act = src->d.conv.act;
    if (act != NCU_ACT_NONE && act != NCU_ACT_RELU)
        return fb_err_set(err, FB_EUNSUPPORTED, NULL, "no CUDA conv for activation %d", act);
    if (src->p[NAT_CONV_RES])
        return no_kernel(src, "a residual on a pattern conv", err);
    fb_code rc = FB_OK;
    for (int j = 0; j <= NAT_CONV_OUT && !rc; j++)
        rc = ncu_dev_ptr(ctx, v, src->p[j], &dp[j], err);
    if (rc)
        return rc;
    if (v == NAT_FUSED && dp[NAT_CONV_BIAS]) {
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
    bool single = src->n_ops <= 1 && !dp[NAT_CONV_BIAS] && act == NCU_ACT_NONE;
    rc = emit_conv(ctx, v, src, dp, false, NCU_ACT_NONE, single ? NULL : ops_conv, err);
    if (!rc && (dp[NAT_CONV_BIAS] || act != NCU_ACT_NONE))
        rc = conv_epilogue(ctx, v, src, dp[NAT_CONV_BIAS], dp[NAT_CONV_OUT], act,
                           v == NAT_FUSED && src->n_ops > 1 ? &src->ops[1] : ops_bias, err);
    return rc;
}

/* ---- attention ---- */

static fb_code lower_attention(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err)
{
    if (src->d.attn.d > NCU_ATTN_MAX_D || src->d.attn.bh > 65535)
        return fb_err_set(err, FB_EUNSUPPORTED, "params.head_dim",
                          "fused CUDA attention takes head_dim <= %d and batch*heads <= 65535",
                          NCU_ATTN_MAX_D);
    /* the first ask also sets the tensor-core kernel's shared memory, outside
     * any capture; its launches are named so in the kernel rows */
    bool tc = ctx->tc_attention && ncu_attention_tc_fits(ctx->dtype, (int)src->d.attn.d);
    /* params.tc_attention: 1 the checked kernel, 2 its cp.async tiles, 3
     * those and the split softmax (ncu_attn.cu) */
    static const struct {
        nat_kernel_fn fn;
        const char *name;
    } forms[] = {{ncu_k_attention_tc, "attention_wmma"},
                 {ncu_k_attention_tc_async, "attention_wmma_async"},
                 {ncu_k_attention_tc_split, "attention_wmma_split"}};
    int form = tc ? ctx->tc_attention - 1 : -1; /* read_params took 0..3 */
    fb_code rc = lower_same(ctx, v, src, form >= 0 ? forms[form].fn : ncu_k_attention, 4, err);
    if (!rc && form >= 0)
        ctx->plans[v].launches[ctx->plans[v].n - 1].name = forms[form].name;
    return rc;
}

/* ---- the model zoo (graph/gr_kern.h) ---- */

static fb_code no_kernel(const nat_launch *src, const char *why, fb_err *err)
{
    return fb_err_set(err, FB_EUNSUPPORTED, NULL, "no CUDA kernel for %s: %s", src->name, why);
}

static fb_code check_act(const nat_launch *src, int64_t act, fb_err *err)
{
    return act >= 0 && act < NCU_ACT_COUNT ? FB_OK : no_kernel(src, "unknown activation", err);
}

/* Whether cuBLASLt's epilogue takes activation act after the bias (never with
 * a residual, see ncu_gemm_args): ReLU always; GELU, exact or tanh form, where
 * its tanh-form GELU is within tolerance: float16/bfloat16, or float32 with
 * params.gelu_epilogue (gemm_act says why). */
static bool lt_takes_act(const ncu_ctx *ctx, int act, bool bias, bool res)
{
    if (!bias || res)
        return false;
    if (act == NCU_ACT_RELU)
        return true;
    return (act == NCU_ACT_GELU || act == NCU_ACT_GELU_TANH) &&
           (ctx->dtype != NCU_F32 || ctx->gelu_epilogue);
}

static int lt_epi(int act, bool lib_act, bool bias)
{
    if (lib_act && act != NCU_ACT_NONE)
        return act == NCU_ACT_RELU ? NCU_EPI_RELU_BIAS : NCU_EPI_GELU_BIAS;
    return bias ? NCU_EPI_BIAS : NCU_EPI_NONE;
}

static const char *lt_name(int epi, bool res)
{
    static const char *const names[] = {"cublaslt_gemm", "cublaslt_gemm_bias",
                                        "cublaslt_gemm_relu_bias", "cublaslt_gemm_gelu_bias"};
    if (res)
        return epi == NCU_EPI_BIAS ? "cublaslt_gemm_bias_res" : "cublaslt_gemm_res";
    return names[epi];
}

/* What lower_zoo_linear, lower_zoo_mlp and lower_zoo_conv refuse before any
 * device work (their entries' checks in the table below). */
static fb_code check_zoo_linear(ncu_dtype dtype, const nat_launch *src, fb_err *err)
{
    const nat_gemm_desc *d = &src->d.gemm;
    fb_code rc = check_act(src, d->act, err);
    return rc || (d->m >= 1 && d->n >= 1 && d->k >= 1) ? rc : no_kernel(src, "empty GEMM", err);
}

static fb_code check_zoo_mlp(ncu_dtype dtype, const nat_launch *src, fb_err *err)
{
    const nat_mlp_desc *md = &src->d.mlp;
    fb_code rc = check_act(src, md->act, err);
    return rc || (md->m >= 1 && md->d >= 1 && md->h >= 1) ? rc : no_kernel(src, "empty MLP", err);
}

static fb_code check_zoo_conv(ncu_dtype dtype, const nat_launch *src, fb_err *err)
{
    ncu_conv_geom g = ncu_conv_geom_of(&src->d.conv.s);
    int ho = 0, wo = 0;
    ncu_conv_out(&g, &ho, &wo);
    fb_code rc = check_act(src, src->d.conv.act, err);
    if (!rc &&
        (ho <= 0 || wo <= 0 || g.n < 1 || g.groups < 1 || g.ci % g.groups || g.co % g.groups))
        rc = no_kernel(src, "impossible convolution shape", err);
    return rc;
}

/* gr_k_linear: out = act(a w + bias + res), w as [n, k] (b_trans: PyTorch's
 * layout, cuBLASLt's transpose of A) or [k, n].  One cuBLASLt call takes the
 * bias and ReLU/GELU (lt_takes_act), or the bias and the residual (as C, beta
 * 1); any other activation follows by our epilogue kernel in place.  Eager
 * (one op) is that one call with its bias, as PyTorch's addmm.  The CPU's
 * packed weight (NAT_GEMM_PB) stays on the host. */
static fb_code lower_zoo_linear(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err)
{
    const nat_gemm_desc *d = &src->d.gemm;
    int act = d->act;
    ncu_gemm_args g = {.m = d->m, .n = d->n, .k = d->k, .nb = 1, .trans_b = d->b_trans};
    fb_code rc = FB_OK; /* checked by ncu_lower_accepts */
    float **dst[NAT_GEMM_C + 1] = {[NAT_GEMM_A] = &g.a,
                                   [NAT_GEMM_B] = &g.bm,
                                   [NAT_GEMM_BIAS] = &g.bias,
                                   [NAT_GEMM_RES] = &g.res,
                                   [NAT_GEMM_C] = &g.c};
    for (int j = 0; j <= NAT_GEMM_C && !rc; j++)
        rc = ncu_dev_ptr(ctx, v, src->p[j], dst[j], err);
    if (rc)
        return rc;
    bool lib_act = act == NCU_ACT_NONE || lt_takes_act(ctx, act, g.bias, g.res);
    g.epi = lt_epi(act, lib_act, g.bias != NULL);
    int n_lib = lib_act || src->n_ops < 2 ? src->n_ops : src->n_ops - 1; /* the act is last */
    rc = emit_gemm_slice(ctx, v, src, lt_name(g.epi, g.res), 0, n_lib, &g, err);
    if (rc || lib_act)
        return rc;
    epi_args e = {.x = g.c, .out = g.c, .n = g.m * g.n, .c = 1, .inner = 1, .act = act};
    return emit_epilogue(ctx, v, src, n_lib < src->n_ops ? src->ops[n_lib] : "activation", n_lib,
                         src->n_ops, NULL, &e, err);
}

/* gr_k_mlp: out = act(x w1 + b1) w2 + b2 [+ res] (act GELU, tanh GELU or
 * ReLU; each weight in either layout; res, added by the second GEMM as a
 * linear's residual is).  As lower_mlp: two cuBLASLt calls
 * through the plan's shared hidden buffer, the activation in the first one's
 * epilogue where cuBLASLt has it (lt_takes_act), else by our epilogue kernel
 * on the hidden tensor.  The CPU's workspace and packed weights stay on the
 * host. */
static fb_code lower_zoo_mlp(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err)
{
    const nat_mlp_desc *md = &src->d.mlp;
    int64_t m = md->m, d = md->d, h = md->h;
    int act = md->act;
    ncu_gemm_args g1 = {.m = m, .n = h, .k = d, .nb = 1, .trans_b = md->w1_trans};
    ncu_gemm_args g2 = {.m = m, .n = d, .k = h, .nb = 1, .trans_b = md->w2_trans};
    float *hid = ctx->hidden[v], *dp[NAT_MLP_OUT + 1] = {0}, *res = NULL;
    fb_code rc = FB_OK; /* checked by ncu_lower_accepts */
    if (!rc && !hid)
        rc = fb_err_set(err, FB_EINTERNAL, NULL, "no hidden buffer for the MLP");
    for (int j = 0; j <= NAT_MLP_OUT && !rc; j++)
        rc = ncu_dev_ptr(ctx, v, src->p[j], &dp[j], err);
    if (!rc) /* the residual of residual_epilogue, or NULL */
        rc = ncu_dev_ptr(ctx, v, src->p[NAT_MLP_RES], &res, err);
    if (rc)
        return rc;
    g1.a = dp[NAT_MLP_X], g1.bm = dp[NAT_MLP_W1], g1.bias = dp[NAT_MLP_B1], g1.c = hid;
    g2.a = hid, g2.bm = dp[NAT_MLP_W2], g2.bias = dp[NAT_MLP_B2], g2.c = dp[NAT_MLP_OUT];
    g2.res = res;
    bool lib_act = act == NCU_ACT_NONE || lt_takes_act(ctx, act, g1.bias, false);
    g1.epi = lt_epi(act, lib_act, g1.bias != NULL);
    g2.epi = g2.bias ? NCU_EPI_BIAS : NCU_EPI_NONE;
    rc = emit_gemm_slice(ctx, v, src, lt_name(g1.epi, false), 0, lib_act ? 2 : 1, &g1, err);
    if (!rc && !lib_act) {
        epi_args e = {.x = hid, .out = hid, .n = m * h, .c = 1, .inner = 1, .act = act};
        rc = emit_epilogue(ctx, v, src, src->n_ops > 1 ? src->ops[1] : "activation", 1, 2, NULL, &e,
                           err);
    }
    return rc ? rc : emit_gemm_slice(ctx, v, src, lt_name(g2.epi, false), 2, 3, &g2, err);
}

/* A cuDNN launch of a zoo conv: dp at src's conv slots (device).  Bare:
 * src's first op; fused (cudnnConvolutionBiasActivationForward with act and
 * the residual as z): all of them, undone on failure so the caller can fall
 * back. */
static fb_code emit_zoo_conv(ncu_ctx *ctx, int v, const nat_launch *src, float *const *dp,
                             const ncu_conv_geom *g, bool fused, int act, fb_err *err)
{
    nat_launch *l = NULL;
    fb_code rc = emit_slice(ctx, v, src, fused ? "cudnn_conv_bias_act" : "cudnn_conv", 0,
                            fused ? src->n_ops : 1, &l, err);
    if (rc)
        return rc;
    ncu_lstate *st = (ncu_lstate *)l->aux;
    l->p[NAT_CONV_IN] = dp[NAT_CONV_IN];
    l->p[NAT_CONV_W] = dp[NAT_CONV_W];
    l->p[NAT_CONV_BIAS] = dp[NAT_CONV_BIAS];
    l->p[NAT_CONV_OUT] = dp[NAT_CONV_OUT];
    l->p[NAT_CONV_RES] = fused ? dp[NAT_CONV_RES] : NULL;
    l->d.conv.act = fused ? act : NAT_ACT_NONE;
    l->impl = NAT_IMPL_CUDNN;
    rc = ncu_conv_setup_geom(ctx, st, l, g, fused, act, err);
    if (!rc)
        rc = ncu_ws_reserve(ctx, st->ws_bytes, BIT(v), err);
    if (rc && fused) {
        ncu_conv_destroy(st);
        ctx->plans[v].n--;
        (void)cudaGetLastError();
    }
    return rc;
}

/* gr_k_conv: out = act(conv(in, w) + bias + res), any stride, padding,
 * dilation and groups (depthwise included; 1-D as h = kh = 1).  Eager (one op):
 * the bare cuDNN convolution, then its bias by our kernel (PyTorch's cuDNN
 * path adds it in a separate kernel).  Fused: one
 * cudnnConvolutionBiasActivationForward where cuDNN can do the whole launch
 * (a bias, which BN folding always gives; ReLU or no activation; the residual
 * as z); else (ReLU6, SiLU, hardswish, GELU..., no bias, or cuDNN refusing)
 * the bare convolution plus our epilogue kernel: bias, residual and
 * activation in one pass over the output. */
static fb_code lower_zoo_conv(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err)
{
    static const char *const ops_bias[] = {"bias", NULL};
    ncu_conv_geom g = ncu_conv_geom_of(&src->d.conv.s);
    int act = src->d.conv.act, ho = 0, wo = 0;
    ncu_conv_out(&g, &ho, &wo);
    fb_code rc = FB_OK; /* checked by ncu_lower_accepts */
    float *dp[NAT_CONV_OUT + 1] = {0};
    for (int j = 0; j <= NAT_CONV_OUT && !rc; j++)
        rc = ncu_dev_ptr(ctx, v, src->p[j], &dp[j], err);
    if (rc)
        return rc;
    if (v == NAT_FUSED && dp[NAT_CONV_BIAS] && (act == NCU_ACT_NONE || act == NCU_ACT_RELU)) {
        fb_err local;
        fb_err_clear(&local);
        rc = emit_zoo_conv(ctx, v, src, dp, &g, true, act, &local);
        if (rc == FB_OK || rc == FB_EOOM)
            return rc == FB_OK ? FB_OK : fb_err_set(err, rc, NULL, "%s", local.msg);
        fb_warn("cuda %s: fused cuDNN conv refused (%s); using conv + conv_epilogue", src->name,
                local.msg);
    }
    rc = emit_zoo_conv(ctx, v, src, dp, &g, false, NCU_ACT_NONE, err);
    if (rc || (!dp[NAT_CONV_BIAS] && !dp[NAT_CONV_RES] && act == NCU_ACT_NONE))
        return rc;
    epi_args e = {.x = dp[NAT_CONV_OUT],
                  .bias = dp[NAT_CONV_BIAS],
                  .res = dp[NAT_CONV_RES],
                  .out = dp[NAT_CONV_OUT],
                  .n = (int64_t)g.n * g.co * ho * wo,
                  .c = g.co,
                  .inner = (int64_t)ho * wo,
                  .act = act};
    bool one = src->n_ops < 2;
    return emit_epilogue(ctx, v, src, one ? "bias_add" : "conv_epilogue", 1, src->n_ops,
                         one ? ops_bias : NULL, &e, err);
}

/* ---- checks of the launches our zoo kernels take as they are: a CPU launch
 * that is not what the kernel expects is refused at prepare, by name ---- */

typedef fb_code (*check_fn)(ncu_dtype dtype, const nat_launch *src, fb_err *err);

/* All of v[0 .. n) at least lo. */
static bool all_at_least(const int64_t *v, int n, int64_t lo)
{
    for (int k = 0; k < n; k++)
        if (v[k] < lo)
            return false;
    return true;
}

static fb_code check_chain(ncu_dtype dtype, const nat_launch *src, fb_err *err)
{
    const nat_chain_desc *ch = &src->d.chain;
    if (ch->n < 0 || ch->n_steps < 0 || ch->n_steps > NAT_CHAIN_MAX || ch->n_steps > NCU_CHAIN_MAX)
        return no_kernel(src, "too many steps", err);
    for (int s = 0; s < ch->n_steps; s++) {
        const nat_chain_step *st = &ch->steps[s];
        bool binary = st->op == NCU_CH_ADD || st->op == NCU_CH_MUL;
        if (st->op > NCU_CH_SCALE || st->act >= NCU_ACT_COUNT || st->bc > NCU_CH_BC_ROW)
            return no_kernel(src, "a step it does not know", err);
        if (binary &&
            (NAT_CHAIN_OPD + st->operand >= NAT_MAX_ARGS || !src->p[NAT_CHAIN_OPD + st->operand] ||
             (st->bc != NCU_CH_BC_FULL && st->size < 1)))
            return no_kernel(src, "a step without its operand", err);
    }
    return FB_OK;
}

/* gr_k_softmax and gr_k_causal: rows, cols. */
static fb_code check_rows(ncu_dtype dtype, const nat_launch *src, fb_err *err)
{
    return src->d.rows.rows >= 0 && src->d.rows.cols >= 1 ? FB_OK
                                                          : no_kernel(src, "empty rows", err);
}

static fb_code check_pool(ncu_dtype dtype, const nat_launch *src, fb_err *err)
{
    const nat_pool_desc *g = &src->d.pool;
    const int64_t pos[] = {g->planes, g->h, g->w, g->kh, g->kw, g->sh, g->sw, g->ho, g->wo};
    const int64_t pad[] = {g->ph, g->pw};
    bool ok = all_at_least(pos, 9, 1) && all_at_least(pad, 2, 0);
    return ok ? FB_OK : no_kernel(src, "impossible pool shape", err);
}

static fb_code check_apool(ncu_dtype dtype, const nat_launch *src, fb_err *err)
{
    const nat_pool_desc *g = &src->d.pool;
    const int64_t pos[] = {g->planes, g->h, g->w, g->ho, g->wo};
    return all_at_least(pos, 5, 1) ? FB_OK : no_kernel(src, "impossible pool shape", err);
}

/* Token ids are stored in the run's dtype: float16 holds every integer up to
 * 2048 exactly, bfloat16 up to 256; past that the ids would change. */
static fb_code check_embedding(ncu_dtype dtype, const nat_launch *src, fb_err *err)
{
    int64_t exact = dtype == NCU_F16 ? 2048 : (dtype == NCU_BF16 ? 256 : 1 << 24);
    const nat_embed_desc *e = &src->d.embed;
    if (e->n_ids < 0 || e->d < 1 || e->vocab < 1)
        return no_kernel(src, "impossible table", err);
    if (e->vocab - 1 > exact)
        return fb_err_set(err, FB_EUNSUPPORTED, "dtype",
                          "token ids up to %lld do not survive %s storage: use float32",
                          (long long)(e->vocab - 1), dtype == NCU_F16 ? "float16" : "bfloat16");
    return FB_OK;
}

static fb_code check_permute(ncu_dtype dtype, const nat_launch *src, fb_err *err)
{
    const nat_permute_desc *pd = &src->d.permute;
    int rank = pd->rank;
    unsigned seen = 0;
    if (rank < 1 || rank > NCU_PERMUTE_MAX_RANK || rank > NAT_PERMUTE_MAX_RANK ||
        !all_at_least(pd->dims, rank, 1))
        return no_kernel(src, "rank above 6", err);
    for (int d = 0; d < rank; d++) {
        int64_t p = pd->perm[d];
        if (p < 0 || p >= rank || (seen & (1u << p)))
            return no_kernel(src, "no permutation", err);
        seen |= 1u << p;
    }
    return FB_OK;
}

static fb_code check_concat(ncu_dtype dtype, const nat_launch *src, fb_err *err)
{
    const nat_concat_desc *c = &src->d.concat;
    int n_in = c->n_in;
    int64_t sum = 0;
    const int64_t pos[] = {c->outer, c->inner, c->out_axis};
    if (n_in < 1 || n_in > NCU_CONCAT_MAX_IN || n_in > NAT_CONCAT_MAX_IN ||
        !all_at_least(pos, 3, 1) || !src->p[NAT_CONCAT_OUT])
        return no_kernel(src, "more than 6 inputs", err);
    for (int k = 0; k < n_in; k++) {
        if (!src->p[k] || c->axis[k] < 0)
            return no_kernel(src, "a missing input", err);
        sum += c->axis[k];
    }
    return sum == c->out_axis ? FB_OK : no_kernel(src, "inputs do not fill the axis", err);
}

static fb_code check_slice(ncu_dtype dtype, const nat_launch *src, fb_err *err)
{
    const nat_slice_desc *sd = &src->d.slice;
    const int64_t v[] = {sd->outer, sd->axis_len, sd->start, sd->len, sd->inner};
    bool ok = all_at_least(v, 5, 0) && sd->start + sd->len <= sd->axis_len;
    return ok ? FB_OK : no_kernel(src, "a slice past its axis", err);
}

/* nat_k_unary and nat_k_binary: an op our kernels have. */
static fb_code check_unary(ncu_dtype dtype, const nat_launch *src, fb_err *err)
{
    return src->d.elem.op >= 0 && src->d.elem.op < NCU_UNOP_COUNT
               ? FB_OK
               : fb_err_set(err, FB_EUNSUPPORTED, NULL, "no CUDA kernel for %s op %d", src->name,
                            src->d.elem.op);
}

static fb_code check_binary(ncu_dtype dtype, const nat_launch *src, fb_err *err)
{
    return src->d.elem.op >= 0 && src->d.elem.op <= NCU_DIV
               ? FB_OK
               : fb_err_set(err, FB_EUNSUPPORTED, NULL, "no CUDA kernel for %s op %d", src->name,
                            src->d.elem.op);
}

/* ---- the table ---- */

typedef fb_code (*lower_fn)(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err);

/* Our kernel takes the launch as it is (slots p[0..np) to the device), after
 * its check. */
static const struct {
    nat_kernel_fn cpu, gpu;
    int np;
    check_fn check;
} same[] = {
    {nat_k_binary, ncu_k_binary, 3, check_binary},
    {nat_k_unary, ncu_k_unary, 3, check_unary},
    {nat_k_row_reduce, ncu_k_row_reduce, 2, NULL},
    {nat_k_softmax, ncu_k_softmax, 2, NULL},
    {nat_k_layernorm, ncu_k_layernorm, 5, NULL},
    {nat_k_elem_chain, ncu_k_elem_chain, 3, NULL},
    {nat_k_batchnorm, ncu_k_batchnorm, 6, NULL},
    {gr_k_chain, ncu_k_zoo_chain, NAT_MAX_ARGS, check_chain},
    {gr_k_softmax, ncu_k_zoo_softmax, 2, check_rows},
    {gr_k_causal, ncu_k_zoo_causal, 2, check_rows},
    {gr_k_maxpool, ncu_k_zoo_maxpool, 2, check_pool},
    {gr_k_avgpool, ncu_k_zoo_avgpool, 2, check_pool},
    {gr_k_adaptive_avgpool, ncu_k_zoo_adaptive_avgpool, 2, check_apool},
    {gr_k_embedding, ncu_k_zoo_embedding, 3, check_embedding},
    {gr_k_permute, ncu_k_zoo_permute, 2, check_permute},
    {gr_k_concat, ncu_k_zoo_concat, NAT_CONCAT_OUT + 1, check_concat},
    {gr_k_slice, ncu_k_zoo_slice, 2, check_slice},
};

/* Library calls, or launches split or merged on the GPU; check is what the
 * lowering refuses before any device work (NULL: nothing). */
static const struct {
    nat_kernel_fn cpu;
    lower_fn lower;
    check_fn check;
} special[] = {
    {nat_k_sgemm, lower_sgemm, NULL},
    {nat_k_gemm_epi, lower_gemm_epi, NULL},
    {nat_k_mlp_fused, lower_mlp, NULL},
    {nat_k_bmm, lower_bmm, NULL},
    {nat_k_conv2d, lower_conv, NULL},
    {nat_k_attention, lower_attention, NULL},
    {gr_k_conv, lower_zoo_conv, check_zoo_conv},
    {gr_k_linear, lower_zoo_linear, check_zoo_linear},
    {gr_k_mlp, lower_zoo_mlp, check_zoo_mlp},
};

static fb_code no_lowering(const nat_launch *src, fb_err *err)
{
    return fb_err_set(err, FB_EUNSUPPORTED, NULL, "the CUDA backend has no lowering for kernel %s",
                      src->name);
}

/* The entry of same (*sp) or special (*xp) for src's kernel; false if none. */
static bool find(const nat_launch *src, int *sp, int *xp)
{
    *sp = *xp = -1;
    for (size_t j = 0; j < sizeof same / sizeof same[0] && *sp < 0; j++)
        if (src->fn == same[j].cpu)
            *sp = (int)j;
    for (size_t j = 0; j < sizeof special / sizeof special[0] && *sp < 0 && *xp < 0; j++)
        if (src->fn == special[j].cpu)
            *xp = (int)j;
    return *sp >= 0 || *xp >= 0;
}

fb_code ncu_lower_accepts(const nat_launch *src, ncu_dtype dtype, fb_err *err)
{
    int sj, xj;
    if (!find(src, &sj, &xj))
        return no_lowering(src, err);
    check_fn check = sj >= 0 ? same[sj].check : special[xj].check;
    return check ? check(dtype, src, err) : FB_OK;
}

static fb_code lower_one(ncu_ctx *ctx, int v, const nat_launch *src, fb_err *err)
{
    int sj, xj;
    fb_code rc = ncu_lower_accepts(src, ctx->dtype, err);
    if (rc || !find(src, &sj, &xj))
        return rc;
    return sj >= 0 ? lower_same(ctx, v, src, same[sj].gpu, same[sj].np, err)
                   : special[xj].lower(ctx, v, src, err);
}

/* The hidden [m, h] buffer every fused MLP of plan v shares (sized for the
 * largest; they run one after another on the stream). */
static fb_code reserve_hidden(ncu_ctx *ctx, int v, fb_err *err)
{
    const nat_plan *cpu = &ctx->host->plans[v];
    int64_t most = 0;
    for (int j = 0; j < cpu->n; j++) {
        const nat_launch *l = &cpu->launches[j];
        if (l->dk == NAT_D_MLP && l->d.mlp.m * l->d.mlp.h > most)
            most = l->d.mlp.m * l->d.mlp.h;
    }
    if (most <= 0 || ctx->hidden[v])
        return FB_OK;
    return ncu_mem_alloc(&ctx->mem, (size_t)most * ncu_dtype_size(ctx->dtype), BIT(v),
                         "fused.hidden", &ctx->hidden[v], err);
}

/* A CPU launch becomes at most this many GPU launches (gemm + activation; a
 * fused MLP: gemm + activation + gemm). */
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
    fb_code rc = reserve_hidden(ctx, v, err);
    for (int j = 0; j < cpu->n && !rc; j++)
        rc = lower_one(ctx, v, &cpu->launches[j], err);
    float *out = NULL;
    if (!rc)
        rc = ncu_dev_ptr(ctx, v, cpu->out, &out, err);
    gpu->out = out;
    gpu->out_n = cpu->out_n;
    return rc;
}
