/* nat_roofline: see nat_roofline.h. */
#include "nat_roofline.h"

#include <omp.h>
#include <stdlib.h>
#include <time.h>

#include "nat.h"
#include "nat_kern.h"
#include "nat_kern_cpu.h"

#define TRIAD_N ((int64_t)16 << 20)
#define GEMM_N  1024
#define BEST_OF 5

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double triad(float *a, const float *b, const float *c, int64_t n)
{
    double best = 0;
    for (int r = 0; r < BEST_OF; r++) {
        double t0 = now_s();
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++)
            a[i] = b[i] + 3.0f * c[i];
        double t = now_s() - t0, gbps = 12.0 * (double)n / t / 1e9;
        if (gbps > best)
            best = gbps;
    }
    return best;
}

static double gemm(const float *a, nat_weight w, float *c)
{
    double best = 0;
    for (int r = 0; r < BEST_OF; r++) {
        double t0 = now_s();
        nat_linear(a, w, NULL, NULL, c, GEMM_N, GEMM_N, GEMM_N, 0);
        double t = now_s() - t0, gflops = 2.0 * GEMM_N * GEMM_N * GEMM_N / t / 1e9;
        if (gflops > best)
            best = gflops;
    }
    return best;
}

fb_code nat_roofline_measure(int threads, nat_roofline *out, fb_err *err)
{
    int64_t nn = (int64_t)GEMM_N * GEMM_N;
    /* the engine's own memory (huge pages), as the kernels it bounds */
    float *a = nat_mem_alloc((size_t)TRIAD_N * sizeof *a);
    float *b = nat_mem_alloc((size_t)TRIAD_N * sizeof *b);
    float *c = nat_mem_alloc((size_t)TRIAD_N * sizeof *c), *pw = NULL;
    int before = omp_get_max_threads();
    fb_code rc = FB_OK;

    out->triad_gbps = out->gemm_gflops = 0;
    if (!a || !b || !c) {
        rc = fb_err_set(err, FB_ENOMEM, NULL, "roofline: no memory for the triad's arrays");
        goto out;
    }
    if (threads > 0)
        omp_set_num_threads(threads);
    out->threads = omp_get_max_threads();
#pragma omp parallel for schedule(static) /* first touch by the threads that use it */
    for (int64_t i = 0; i < TRIAD_N; i++) {
        a[i] = 0;
        b[i] = 1.0f + (float)(i & 7);
        c[i] = 0.5f;
    }
    out->triad_gbps = triad(a, b, c, TRIAD_N);
    /* The GEMM reuses the triad's arrays: a, w and the output, 4 MiB each. */
    if (nat_pw_default()) {
        pw = malloc((size_t)nat_pw_floats(GEMM_N, GEMM_N) * sizeof *pw);
        if (pw)
            nat_pw_pack(b, false, GEMM_N, GEMM_N, pw);
    }
    out->gemm_gflops = gemm(b + nn, (nat_weight){.w = b, .pw = pw, .wt = false}, a);
out:
    if (threads > 0)
        omp_set_num_threads(before);
    free(pw);
    free(a);
    free(b);
    free(c);
    return rc;
}
