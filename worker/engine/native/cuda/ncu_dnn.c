/* ncu_dnn: convolutions through cuDNN's legacy (v7-style) API, which cuDNN 9
 * still ships: cudnnConvolutionForward for eager, and
 * cudnnConvolutionBiasActivationForward (y = act(conv(x) + bias [+ z])) for
 * fused.  We chose it over the graph (backend) API for now because it is a
 * single call, captures into CUDA graphs, and needs no engine-config search;
 * where it refuses a dtype (NOT_SUPPORTED at prepare), the caller falls back
 * to a bare convolution plus our bias+activation kernel and names the launch
 * so.  float32 without params.tf32 uses CUDNN_FMA_MATH, so no TF32.  The
 * model zoo's convolutions (any stride, padding, dilation and groups, 1-D as
 * h = kh = 1) share the setup, their residual going in as z. */
#include <string.h>

#include "ncu_int.h"

#ifdef NCU_HAVE_CUDNN

static cudnnDataType_t dnn_type(ncu_dtype t)
{
    return t == NCU_F16 ? CUDNN_DATA_HALF
                        : (t == NCU_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT);
}

static cudnnMathType_t dnn_math(const ncu_ctx *ctx)
{
    if (ctx->dtype == NCU_F32)
        return ctx->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    return CUDNN_TENSOR_OP_MATH;
}

/* x, w, conv and y descriptors for geometry g (cross-correlation, as
 * PyTorch; groups through the group count, the filter [co, ci/groups, kh, kw]). */
static fb_code dnn_descs(ncu_ctx *ctx, ncu_lstate *st, const ncu_conv_geom *g, fb_err *err)
{
    int yn = 0, yc = 0, yh = 0, yw = 0;
    cudnnDataType_t t = dnn_type(ctx->dtype);
    fb_code rc = ncu_cudnn_check(cudnnCreateTensorDescriptor(&st->xd), "x descriptor", err);
    if (!rc)
        rc = ncu_cudnn_check(cudnnCreateTensorDescriptor(&st->yd), "y descriptor", err);
    if (!rc)
        rc = ncu_cudnn_check(cudnnCreateFilterDescriptor(&st->wd), "w descriptor", err);
    if (!rc)
        rc = ncu_cudnn_check(cudnnCreateConvolutionDescriptor(&st->cd), "conv descriptor", err);
    if (!rc)
        rc = ncu_cudnn_check(
            cudnnSetTensor4dDescriptor(st->xd, CUDNN_TENSOR_NCHW, t, g->n, g->ci, g->h, g->w),
            "x shape", err);
    if (!rc)
        rc = ncu_cudnn_check(cudnnSetFilter4dDescriptor(st->wd, t, CUDNN_TENSOR_NCHW, g->co,
                                                        g->ci / g->groups, g->kh, g->kw),
                             "w shape", err);
    if (!rc)
        rc = ncu_cudnn_check(cudnnSetConvolution2dDescriptor(st->cd, g->ph, g->pw, g->sh, g->sw,
                                                             g->dh, g->dw, CUDNN_CROSS_CORRELATION,
                                                             CUDNN_DATA_FLOAT),
                             "conv shape", err);
    if (!rc && g->groups > 1)
        rc = ncu_cudnn_check(cudnnSetConvolutionGroupCount(st->cd, g->groups), "conv groups", err);
    if (!rc)
        rc = ncu_cudnn_check(cudnnSetConvolutionMathType(st->cd, dnn_math(ctx)), "math type", err);
    if (!rc)
        rc = ncu_cudnn_check(
            cudnnGetConvolution2dForwardOutputDim(st->cd, st->xd, st->wd, &yn, &yc, &yh, &yw),
            "output shape", err);
    if (!rc)
        rc = ncu_cudnn_check(
            cudnnSetTensor4dDescriptor(st->yd, CUDNN_TENSOR_NCHW, t, yn, yc, yh, yw), "y shape",
            err);
    return rc;
}

/* The heuristics' first successful, deterministic algorithm whose math type
 * we allow (no TF32 for float32 unless asked) and whose workspace fits. */
static fb_code dnn_algo(ncu_ctx *ctx, ncu_lstate *st, fb_err *err)
{
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    fb_code rc = ncu_cudnn_check(
        cudnnGetConvolutionForwardAlgorithm_v7(ctx->dnn, st->xd, st->wd, st->cd, st->yd,
                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf),
        "cudnnGetConvolutionForwardAlgorithm_v7", err);
    if (rc)
        return rc;
    bool fma_only = ctx->dtype == NCU_F32 && !ctx->tf32;
    for (int i = 0; i < found; i++) {
        const cudnnConvolutionFwdAlgoPerf_t *p = &perf[i];
        if (p->status != CUDNN_STATUS_SUCCESS || p->memory > NCU_DNN_WS_MAX ||
            p->determinism != CUDNN_DETERMINISTIC || (fma_only && p->mathType != CUDNN_FMA_MATH))
            continue;
        st->calgo = p->algo;
        st->ws_bytes = p->memory;
        return ncu_cudnn_check(cudnnSetConvolutionMathType(st->cd, p->mathType), "math type", err);
    }
    return fb_err_set(err, FB_EUNSUPPORTED, NULL, "cuDNN offers no convolution algorithm here");
}

/* The bias [1, co, 1, 1] and activation descriptors of the fused call.  With
 * no activation, cuDNN wants IMPLICIT_PRECOMP_GEMM. */
static fb_code dnn_fused_descs(ncu_ctx *ctx, ncu_lstate *st, const ncu_conv_geom *g, int act,
                               fb_err *err)
{
    cudnnActivationMode_t mode =
        act == NCU_ACT_RELU ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY;
    fb_code rc = ncu_cudnn_check(cudnnCreateTensorDescriptor(&st->bd), "bias descriptor", err);
    if (!rc)
        rc = ncu_cudnn_check(cudnnSetTensor4dDescriptor(st->bd, CUDNN_TENSOR_NCHW,
                                                        dnn_type(ctx->dtype), 1, g->co, 1, 1),
                             "bias shape", err);
    if (!rc)
        rc = ncu_cudnn_check(cudnnCreateActivationDescriptor(&st->ad), "activation", err);
    if (!rc)
        rc = ncu_cudnn_check(
            cudnnSetActivationDescriptor(st->ad, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0), "activation",
            err);
    if (!rc && mode == CUDNN_ACTIVATION_IDENTITY) {
        st->calgo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
        rc =
            ncu_cudnn_check(cudnnGetConvolutionForwardWorkspaceSize(
                                ctx->dnn, st->xd, st->wd, st->cd, st->yd, st->calgo, &st->ws_bytes),
                            "workspace size", err);
    }
    return rc;
}

static void k_conv(const nat_launch *l)
{
    const ncu_lstate *st = (const ncu_lstate *)l->aux;
    ncu_ctx *ctx = st->ctx;
    const float alpha = 1.0f, beta = 0.0f;
    cudnnStatus_t s = cudnnConvolutionForward(ctx->dnn, &alpha, st->xd, l->p[NAT_CONV_IN], st->wd,
                                              l->p[NAT_CONV_W], st->cd, st->calgo, ctx->ws,
                                              ctx->ws_bytes, &beta, st->yd, l->p[NAT_CONV_OUT]);
    if (s != CUDNN_STATUS_SUCCESS) {
        fb_err e;
        fb_code code = ncu_cudnn_check((int)s, "cudnnConvolutionForward", &e);
        ncu_launch_fail(ctx, code, &e);
    }
}

/* y = act(conv(x) + z + bias): z is the residual (NAT_CONV_RES) with alpha2 =
 * 1, or, with no residual (the patterns), y itself with alpha2 = 0. */
static cudnnStatus_t conv_fused_call(const nat_launch *l)
{
    const ncu_lstate *st = (const ncu_lstate *)l->aux;
    ncu_ctx *ctx = st->ctx;
    const float *res = l->p[NAT_CONV_RES], *y = l->p[NAT_CONV_OUT];
    const float alpha1 = 1.0f, alpha2 = res ? 1.0f : 0.0f;
    return cudnnConvolutionBiasActivationForward(
        ctx->dnn, &alpha1, st->xd, l->p[NAT_CONV_IN], st->wd, l->p[NAT_CONV_W], st->cd, st->calgo,
        ctx->ws, ctx->ws_bytes, &alpha2, st->yd, res ? res : y, st->bd, l->p[NAT_CONV_BIAS], st->ad,
        st->yd, l->p[NAT_CONV_OUT]);
}

static void k_conv_fused(const nat_launch *l)
{
    cudnnStatus_t s = conv_fused_call(l);
    if (s != CUDNN_STATUS_SUCCESS) {
        const ncu_lstate *st = (const ncu_lstate *)l->aux;
        fb_err e;
        fb_code code = ncu_cudnn_check((int)s, "cudnnConvolutionBiasActivationForward", &e);
        ncu_launch_fail(st->ctx, code, &e);
    }
}

fb_code ncu_conv_setup_geom(ncu_ctx *ctx, ncu_lstate *st, nat_launch *l, const ncu_conv_geom *g,
                            bool fused, int act, fb_err *err)
{
    int ho = 0, wo = 0;
    ncu_conv_out(g, &ho, &wo);
    if (ho <= 0 || wo <= 0 || g->groups < 1 || g->ci % g->groups || g->co % g->groups)
        return fb_err_set(err, FB_EINVAL, NULL, "impossible convolution shape");
    fb_code rc = dnn_descs(ctx, st, g, err);
    if (!rc)
        rc = fused && act == NCU_ACT_NONE ? FB_OK : dnn_algo(ctx, st, err);
    if (!rc && fused)
        rc = dnn_fused_descs(ctx, st, g, act, err);
    if (!rc)
        rc = ncu_ws_reserve(ctx, st->ws_bytes, 0, err);
    if (rc || !fused) {
        l->fn = k_conv;
        return rc;
    }
    /* One trial call now: cuDNN says NOT_SUPPORTED for a dtype/algo pair only
     * when called, and we want to fall back at prepare, not fail at run.  The
     * fused call supports fewer algorithms than the bare one: retry with
     * IMPLICIT_PRECOMP_GEMM, the one it always takes, before giving up. */
    l->fn = k_conv_fused;
    rc = ncu_cudnn_check((int)conv_fused_call(l), "cudnnConvolutionBiasActivationForward", err);
    if (rc && rc != FB_EOOM && st->calgo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) {
        st->calgo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
        rc =
            ncu_cudnn_check(cudnnGetConvolutionForwardWorkspaceSize(
                                ctx->dnn, st->xd, st->wd, st->cd, st->yd, st->calgo, &st->ws_bytes),
                            "workspace size", err);
        if (!rc)
            rc = ncu_ws_reserve(ctx, st->ws_bytes, 0, err);
        if (!rc)
            rc = ncu_cudnn_check((int)conv_fused_call(l), "cudnnConvolutionBiasActivationForward",
                                 err);
    }
    /* Zero the output again: a graph variant's first replay must be what
     * writes it (the tests rely on that to see that the graph ran). */
    size_t bytes =
        (size_t)g->n * (size_t)g->co * (size_t)ho * (size_t)wo * ncu_dtype_size(ctx->dtype);
    if (!rc)
        rc = ncu_cuda_check(cudaMemsetAsync(l->p[NAT_CONV_OUT], 0, bytes, ctx->stream),
                            "fused conv trial", err);
    if (!rc)
        rc = ncu_cuda_check(cudaStreamSynchronize(ctx->stream), "fused conv trial", err);
    return rc;
}

void ncu_conv_destroy(ncu_lstate *st)
{
    if (st->xd)
        (void)cudnnDestroyTensorDescriptor(st->xd);
    if (st->yd)
        (void)cudnnDestroyTensorDescriptor(st->yd);
    if (st->bd)
        (void)cudnnDestroyTensorDescriptor(st->bd);
    if (st->wd)
        (void)cudnnDestroyFilterDescriptor(st->wd);
    if (st->cd)
        (void)cudnnDestroyConvolutionDescriptor(st->cd);
    if (st->ad)
        (void)cudnnDestroyActivationDescriptor(st->ad);
    st->xd = st->yd = st->bd = NULL;
    st->wd = NULL;
    st->cd = NULL;
    st->ad = NULL;
}

#else /* built without cuDNN: convolutions are unsupported on CUDA */

fb_code ncu_conv_setup_geom(ncu_ctx *ctx, ncu_lstate *st, nat_launch *l, const ncu_conv_geom *g,
                            bool fused, int act, fb_err *err)
{
    return fb_err_set(err, FB_EUNSUPPORTED, NULL, "this build has no cuDNN: no convolutions");
}

void ncu_conv_destroy(ncu_lstate *st) {}

#endif

void ncu_conv_out(const ncu_conv_geom *g, int *ho, int *wo)
{
    int64_t nh = (int64_t)g->h + 2 * g->ph - (int64_t)g->dh * (g->kh - 1) - 1;
    int64_t nw = (int64_t)g->w + 2 * g->pw - (int64_t)g->dw * (g->kw - 1) - 1;
    /* A negative span is no output (C division would round it up to 0). */
    *ho = nh < 0 || g->sh < 1 ? 0 : (int)(nh / g->sh + 1);
    *wo = nw < 0 || g->sw < 1 ? 0 : (int)(nw / g->sw + 1);
}

ncu_conv_geom ncu_conv_geom_of(const nat_conv_shape *s)
{
    ncu_conv_geom g = {.n = s->n,
                       .ci = s->ci,
                       .h = s->h,
                       .w = s->w,
                       .co = s->co,
                       .kh = s->kh,
                       .kw = s->kw,
                       .sh = s->stride_h,
                       .sw = s->stride_w,
                       .ph = s->pad_h,
                       .pw = s->pad_w,
                       .dh = s->dil_h,
                       .dw = s->dil_w,
                       .groups = s->groups};
    return g;
}
