/* ncu_dev: what the lowering and the library calls (ncu_blas.c, ncu_dnn.c)
 * share: a launch's first failure, the library workspace, and the device copy
 * of a host buffer (ncu_int.h).  Below ncu_lower.c, which calls into the
 * library files: dependencies run one way. */
#include "ncu_int.h"

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
