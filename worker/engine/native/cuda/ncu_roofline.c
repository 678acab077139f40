/* ncu_roofline: the GPU's limits, measured, so that a kernel's time can be
 * set against the fastest the device allows.  Bandwidth: a device-to-device cudaMemcpy of 512 MiB
 * (far past L2), counted as read plus write, 1 GiB moved per copy.  Compute: cuBLASLt's float32
 * GEMM (no TF32, as the engine runs by default) on 8192 x 8192 x 8192, the heuristic's first
 * algorithm.  Best of 5 each, timed with CUDA events; about a second in all. */
#include <string.h>

#include "ncu_int.h"

#define RF_COPY_BYTES ((size_t)512 << 20)
#define RF_GEMM_N     8192
#define RF_REPS       5

/* The timer: a stream and an event pair. */
typedef struct rf_timer {
    cudaStream_t s;
    cudaEvent_t e0, e1;
} rf_timer;

/* The best of RF_REPS runs of enqueue(ud) on the stream (after one that
 * warms), in ms into *best (0 when none took time). */
static fb_code best_ms(const rf_timer *t, fb_code (*enqueue)(void *ud, cudaStream_t s, fb_err *err),
                       void *ud, float *best, fb_err *err)
{
    fb_code rc = FB_OK;
    *best = 0;
    for (int r = 0; r <= RF_REPS && !rc; r++) {
        float ms = 0;
        rc = ncu_cuda_check(cudaEventRecord(t->e0, t->s), "cudaEventRecord", err);
        if (!rc)
            rc = enqueue(ud, t->s, err);
        if (!rc)
            rc = ncu_cuda_check(cudaEventRecord(t->e1, t->s), "cudaEventRecord", err);
        if (!rc)
            rc = ncu_cuda_check(cudaEventSynchronize(t->e1), "cudaEventSynchronize", err);
        if (!rc)
            rc = ncu_cuda_check(cudaEventElapsedTime(&ms, t->e0, t->e1), "cudaEventElapsedTime",
                                err);
        if (!rc && r > 0 && ms > 0 && (*best == 0 || ms < *best))
            *best = ms;
    }
    return rc;
}

typedef struct rf_copy {
    void *a, *b;
} rf_copy;

static fb_code enqueue_copy(void *ud, cudaStream_t s, fb_err *err)
{
    rf_copy *c = ud;
    return ncu_cuda_check(cudaMemcpyAsync(c->b, c->a, RF_COPY_BYTES, cudaMemcpyDeviceToDevice, s),
                          "cudaMemcpyAsync", err);
}

static fb_code best_copy(const rf_timer *t, double *gbps, fb_err *err)
{
    rf_copy c = {NULL, NULL};
    float best = 0;
    fb_code rc = ncu_cuda_check(cudaMalloc(&c.a, RF_COPY_BYTES), "roofline copy buffer", err);
    if (!rc)
        rc = ncu_cuda_check(cudaMalloc(&c.b, RF_COPY_BYTES), "roofline copy buffer", err);
    if (!rc)
        rc = ncu_cuda_check(cudaMemsetAsync(c.a, 1, RF_COPY_BYTES, t->s), "cudaMemsetAsync", err);
    if (!rc)
        rc = best_ms(t, enqueue_copy, &c, &best, err);
    if (!rc) /* read and written: twice the bytes */
        *gbps = best > 0 ? 2.0 * (double)RF_COPY_BYTES / (best * 1e-3) / 1e9 : 0;
    (void)cudaFree(c.a);
    (void)cudaFree(c.b);
    return rc;
}

typedef struct rf_gemm {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t mm;
    cublasLtMatrixLayout_t l;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t res;
    void *a, *b, *c, *ws;
} rf_gemm;

static fb_code gemm_setup(rf_gemm *g, cudaStream_t s, fb_err *err)
{
    const size_t bytes = (size_t)RF_GEMM_N * RF_GEMM_N * sizeof(float);
    size_t ws = NCU_LT_WS_MAX;
    int found = 0;
    fb_code rc = ncu_cublas_check(cublasLtCreate(&g->lt), "cublasLtCreate", err);
    if (!rc)
        rc = ncu_cublas_check(cublasLtMatmulDescCreate(&g->mm, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                              "cublasLtMatmulDescCreate", err);
    if (!rc)
        rc = ncu_cublas_check(
            cublasLtMatrixLayoutCreate(&g->l, CUDA_R_32F, RF_GEMM_N, RF_GEMM_N, RF_GEMM_N),
            "cublasLtMatrixLayoutCreate", err);
    if (!rc)
        rc = ncu_cublas_check(cublasLtMatmulPreferenceCreate(&g->pref),
                              "cublasLtMatmulPreferenceCreate", err);
    if (!rc)
        rc =
            ncu_cublas_check(cublasLtMatmulPreferenceSetAttribute(
                                 g->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
                             "workspace preference", err);
    if (!rc)
        rc = ncu_cublas_check(cublasLtMatmulAlgoGetHeuristic(g->lt, g->mm, g->l, g->l, g->l, g->l,
                                                             g->pref, 1, &g->res, &found),
                              "cublasLtMatmulAlgoGetHeuristic", err);
    if (!rc && found < 1)
        rc = fb_err_set(err, FB_EUNSUPPORTED, NULL, "cuBLASLt has no float32 GEMM algorithm");
    void **bufs[3] = {&g->a, &g->b, &g->c};
    for (int i = 0; i < 3 && !rc; i++) {
        rc = ncu_cuda_check(cudaMalloc(bufs[i], bytes), "roofline GEMM buffer", err);
        if (!rc)
            rc = ncu_cuda_check(cudaMemsetAsync(*bufs[i], 0, bytes, s), "cudaMemsetAsync", err);
    }
    if (!rc && g->res.workspaceSize > 0)
        rc = ncu_cuda_check(cudaMalloc(&g->ws, g->res.workspaceSize), "roofline workspace", err);
    return rc;
}

static void gemm_free(rf_gemm *g)
{
    (void)cudaFree(g->a), (void)cudaFree(g->b), (void)cudaFree(g->c), (void)cudaFree(g->ws);
    if (g->pref)
        (void)cublasLtMatmulPreferenceDestroy(g->pref);
    if (g->l)
        (void)cublasLtMatrixLayoutDestroy(g->l);
    if (g->mm)
        (void)cublasLtMatmulDescDestroy(g->mm);
    if (g->lt)
        (void)cublasLtDestroy(g->lt);
}

static fb_code enqueue_gemm(void *ud, cudaStream_t s, fb_err *err)
{
    const rf_gemm *g = ud;
    const float one = 1.0f, zero = 0.0f;
    return ncu_cublas_check(cublasLtMatmul(g->lt, g->mm, &one, g->a, g->l, g->b, g->l, &zero, g->c,
                                           g->l, g->c, g->l, &g->res.algo, g->ws,
                                           g->res.workspaceSize, s),
                            "cublasLtMatmul", err);
}

static fb_code best_gemm(const rf_timer *t, double *gflops, fb_err *err)
{
    rf_gemm g;
    float best = 0;
    memset(&g, 0, sizeof g);
    fb_code rc = gemm_setup(&g, t->s, err);
    if (!rc)
        rc = best_ms(t, enqueue_gemm, &g, &best, err);
    const double n = RF_GEMM_N;
    if (!rc)
        *gflops = best > 0 ? 2.0 * n * n * n / (best * 1e-3) / 1e9 : 0;
    gemm_free(&g);
    return rc;
}

fb_code ncu_roofline_measure(double *copy_gbps, double *gemm_gflops, fb_err *err)
{
    rf_timer t = {NULL, NULL, NULL};
    *copy_gbps = *gemm_gflops = 0;
    fb_code rc = ncu_cuda_check(cudaStreamCreate(&t.s), "cudaStreamCreate", err);
    if (!rc)
        rc = ncu_cuda_check(cudaEventCreate(&t.e0), "cudaEventCreate", err);
    if (!rc)
        rc = ncu_cuda_check(cudaEventCreate(&t.e1), "cudaEventCreate", err);
    if (!rc)
        rc = best_copy(&t, copy_gbps, err);
    if (!rc)
        rc = best_gemm(&t, gemm_gflops, err);
    if (t.e0)
        (void)cudaEventDestroy(t.e0);
    if (t.e1)
        (void)cudaEventDestroy(t.e1);
    if (t.s)
        (void)cudaStreamDestroy(t.s);
    return rc;
}
