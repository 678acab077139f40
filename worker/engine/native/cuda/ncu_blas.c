/* ncu_blas: GEMMs through cuBLASLt.  Our matrices are row-major; cuBLASLt is
 * column-major, so a row-major C = A B is computed as the column-major
 * C^T = B^T A^T: cuBLASLt's "A" is our b, its "B" is our a, and its D is our c
 * with n rows.  A bias on our columns is then a bias on D's rows, which is
 * exactly what the BIAS epilogues add.
 *
 * Everything is decided at prepare: descriptors, layouts and the algorithm
 * (the heuristic's first choice), so every timed run and the graph capture
 * use the same kernel. */
#include <stdint.h>
#include <string.h>

#include "ncu_int.h"

static cudaDataType_t lt_type(ncu_dtype t)
{
    return t == NCU_F16 ? CUDA_R_16F : (t == NCU_BF16 ? CUDA_R_16BF : CUDA_R_32F);
}

static cublasLtEpilogue_t lt_epilogue(int epi)
{
    switch (epi) {
    case NCU_EPI_BIAS:
        return CUBLASLT_EPILOGUE_BIAS;
    case NCU_EPI_RELU_BIAS:
        return CUBLASLT_EPILOGUE_RELU_BIAS;
    case NCU_EPI_GELU_BIAS:
        return CUBLASLT_EPILOGUE_GELU_BIAS;
    default:
        return CUBLASLT_EPILOGUE_DEFAULT;
    }
}

/* One column-major layout rows x cols (ld = rows), batched with stride. */
static fb_code lt_layout(cublasLtMatrixLayout_t *out, ncu_dtype t, int64_t rows, int64_t cols,
                         int64_t nb, fb_err *err)
{
    fb_code rc = ncu_cublas_check(
        cublasLtMatrixLayoutCreate(out, lt_type(t), (uint64_t)rows, (uint64_t)cols, rows),
        "cublasLtMatrixLayoutCreate", err);
    if (rc || nb <= 1)
        return rc;
    int32_t count = (int32_t)nb;
    int64_t stride = rows * cols;
    rc = ncu_cublas_check(cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                           &count, sizeof count),
                          "batch count", err);
    if (!rc)
        rc = ncu_cublas_check(
            cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                             &stride, sizeof stride),
            "batch stride", err);
    return rc;
}

/* The matmul descriptor: compute type, transposes, epilogue and bias. */
static fb_code lt_desc(ncu_ctx *ctx, ncu_lstate *st, const ncu_gemm_args *g, fb_err *err)
{
    cublasComputeType_t ct =
        ctx->dtype == NCU_F32 && ctx->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasOperation_t ta = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    cublasLtEpilogue_t epi = lt_epilogue(g->epi);
    cudaDataType_t bt = lt_type(ctx->dtype);
    fb_code rc = ncu_cublas_check(cublasLtMatmulDescCreate(&st->mm, ct, CUDA_R_32F),
                                  "cublasLtMatmulDescCreate", err);
    if (!rc)
        rc = ncu_cublas_check(
            cublasLtMatmulDescSetAttribute(st->mm, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
            "transa", err);
    if (!rc)
        rc = ncu_cublas_check(
            cublasLtMatmulDescSetAttribute(st->mm, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
            "transb", err);
    if (!rc)
        rc = ncu_cublas_check(
            cublasLtMatmulDescSetAttribute(st->mm, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
            "epilogue", err);
    if (!rc && g->epi != NCU_EPI_NONE)
        rc = ncu_cublas_check(cublasLtMatmulDescSetAttribute(st->mm,
                                                             CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                             &g->bias, sizeof g->bias),
                              "bias pointer", err);
    if (!rc && g->epi != NCU_EPI_NONE)
        rc = ncu_cublas_check(cublasLtMatmulDescSetAttribute(
                                  st->mm, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt),
                              "bias type", err);
    return rc;
}

/* The heuristic's best algorithm within NCU_LT_WS_MAX of workspace. */
static fb_code lt_algo(ncu_ctx *ctx, ncu_lstate *st, fb_err *err)
{
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    size_t ws = NCU_LT_WS_MAX;
    memset(&res, 0, sizeof res);
    fb_code rc = ncu_cublas_check(cublasLtMatmulPreferenceCreate(&pref),
                                  "cublasLtMatmulPreferenceCreate", err);
    if (!rc)
        rc = ncu_cublas_check(cublasLtMatmulPreferenceSetAttribute(
                                  pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
                              "workspace preference", err);
    if (!rc)
        rc = ncu_cublas_check(cublasLtMatmulAlgoGetHeuristic(ctx->lt, st->mm, st->la, st->lb,
                                                             st->lc, st->lc, pref, 1, &res, &found),
                              "cublasLtMatmulAlgoGetHeuristic", err);
    if (!rc && found < 1)
        rc = fb_err_set(err, FB_EUNSUPPORTED, NULL, "cuBLASLt has no algorithm for this GEMM");
    if (!rc) {
        st->algo = res.algo;
        st->ws_bytes = res.workspaceSize;
    }
    if (pref)
        (void)cublasLtMatmulPreferenceDestroy(pref);
    return rc;
}

fb_code ncu_gemm_setup(ncu_ctx *ctx, ncu_lstate *st, nat_launch *l, const ncu_gemm_args *g,
                       fb_err *err)
{
    /* Column-major: D (n x m) = op(A) B, A = our b (stored k x n when trans_b,
     * else n x k), B = our a (k x m). */
    if (g->res && g->epi != NCU_EPI_NONE && g->epi != NCU_EPI_BIAS)
        return fb_err_set(err, FB_EINTERNAL, NULL, "a GEMM residual takes no activation epilogue");
    fb_code rc = lt_desc(ctx, st, g, err);
    if (!rc)
        rc = g->trans_b ? lt_layout(&st->la, ctx->dtype, g->k, g->n, g->nb, err)
                        : lt_layout(&st->la, ctx->dtype, g->n, g->k, g->nb, err);
    if (!rc)
        rc = lt_layout(&st->lb, ctx->dtype, g->k, g->m, g->nb, err);
    if (!rc)
        rc = lt_layout(&st->lc, ctx->dtype, g->n, g->m, g->nb, err);
    if (!rc)
        rc = lt_algo(ctx, st, err);
    if (rc)
        return rc;
    l->fn = ncu_k_gemm;
    l->dk = NAT_D_GEMM;
    l->d.gemm = (nat_gemm_desc){
        .nb = g->nb, .m = g->m, .n = g->n, .k = g->k, .b_trans = g->trans_b, .act = NAT_ACT_NONE};
    if (g->epi == NCU_EPI_RELU_BIAS)
        l->d.gemm.act = NAT_ACT_RELU;
    else if (g->epi == NCU_EPI_GELU_BIAS)
        l->d.gemm.act = NAT_ACT_GELU_TANH; /* cuBLASLt's GELU is the tanh form */
    memset(l->p, 0, sizeof l->p);
    l->p[NAT_GEMM_A] = g->a;
    l->p[NAT_GEMM_B] = g->bm;
    l->p[NAT_GEMM_BIAS] = g->epi == NCU_EPI_NONE ? NULL : g->bias;
    l->p[NAT_GEMM_RES] = g->res;
    l->p[NAT_GEMM_C] = g->c;
    return FB_OK;
}

void ncu_gemm_destroy(ncu_lstate *st)
{
    if (st->mm)
        (void)cublasLtMatmulDescDestroy(st->mm);
    if (st->la)
        (void)cublasLtMatrixLayoutDestroy(st->la);
    if (st->lb)
        (void)cublasLtMatrixLayoutDestroy(st->lb);
    if (st->lc)
        (void)cublasLtMatrixLayoutDestroy(st->lc);
    st->mm = NULL;
    st->la = st->lb = st->lc = NULL;
}

/* NAT_D_GEMM slots, device pointers (res NULL: none, else cuBLASLt's C with
 * beta 1; the bias is in the matmul descriptor); enqueues one cublasLtMatmul
 * on the ctx stream. */
void ncu_k_gemm(const nat_launch *l)
{
    const ncu_lstate *st = (const ncu_lstate *)l->aux;
    ncu_ctx *ctx = st->ctx;
    const float *res = l->p[NAT_GEMM_RES], *c = l->p[NAT_GEMM_C];
    const float alpha = 1.0f, beta = res ? 1.0f : 0.0f;
    cublasStatus_t s =
        cublasLtMatmul(ctx->lt, st->mm, &alpha, l->p[NAT_GEMM_B], st->la, l->p[NAT_GEMM_A], st->lb,
                       &beta, res ? res : c, st->lc, l->p[NAT_GEMM_C], st->lc, &st->algo, ctx->ws,
                       ctx->ws_bytes, ctx->stream);
    if (s != CUBLAS_STATUS_SUCCESS) {
        fb_err e;
        fb_code code = ncu_cublas_check((int)s, "cublasLtMatmul", &e);
        ncu_launch_fail(ctx, code, &e);
    }
}
