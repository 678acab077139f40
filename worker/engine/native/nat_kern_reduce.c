/* nat_kern_reduce: row reductions (the eager building blocks) and the fused
 * row-wise normalizations: softmax and layernorm make two or three passes over
 * one row while it sits in L1/L2, and one pass over memory in all.  OpenMP
 * splits the rows. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "nat_kern_cpu.h"
#include "nat_vmath.h"

static float row_max(const float *x, int64_t n)
{
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

static float row_sum(const float *x, int64_t n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; j++)
        s += x[j];
    return s;
}

NAT_SIMD_CLONES void nat_k_row_reduce(const nat_launch *l)
{
    const float *x = l->p[NAT_ROWS_X];
    float *out = l->p[NAT_ROWS_OUT];
    int op = l->d.rows.op;
    int64_t rows = l->d.rows.rows, cols = l->d.rows.cols;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * cols;
        if (op == NAT_RMAX)
            out[r] = row_max(row, cols);
        else if (op == NAT_RSUM)
            out[r] = row_sum(row, cols);
        else
            out[r] = row_sum(row, cols) / (float)cols;
    }
}

NAT_SIMD_CLONES void nat_k_softmax(const nat_launch *l)
{
    const float *x = l->p[NAT_ROWS_X];
    float *out = l->p[NAT_ROWS_OUT];
    int64_t rows = l->d.rows.rows, cols = l->d.rows.cols;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *o = out + r * cols;
        float m = row_max(xr, cols);
        float inv = 1.0f / nat_exp_sum(xr, 1.0f, m, o, cols);
#pragma omp simd
        for (int64_t j = 0; j < cols; j++)
            o[j] *= inv;
    }
}

/* One row of layernorm: mean and variance from the row (two passes in cache,
 * numerically safer than E[x^2] - E[x]^2), then the affine write. */
static void ln_row(const float *x, const float *res, const float *g, const float *b, float *o,
                   int64_t n, float eps, bool stream)
{
    if (res) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            o[j] = x[j] + res[j];
        x = o;
    }
    float mean = row_sum(x, n) / (float)n;
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int64_t j = 0; j < n; j++)
        v += (x[j] - mean) * (x[j] - mean);
    float rstd = 1.0f / sqrtf(v / (float)n + eps);
#ifdef NAT_VMATH
    if (stream && ((uintptr_t)o & 31) == 0) { /* o written once: past the caches */
        const __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
        int64_t j = 0;
        for (; j + 8 <= n; j += 8) {
            __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm), vr);
            _mm256_stream_ps(o + j,
                             _mm256_fmadd_ps(t, _mm256_loadu_ps(g + j), _mm256_loadu_ps(b + j)));
        }
        for (; j < n; j++)
            o[j] = (x[j] - mean) * rstd * g[j] + b[j];
        _mm_sfence();
        return;
    }
#endif
#pragma omp simd
    for (int64_t j = 0; j < n; j++)
        o[j] = (x[j] - mean) * rstd * g[j] + b[j];
}

NAT_SIMD_CLONES void nat_k_layernorm(const nat_launch *l)
{
    const float *x = l->p[NAT_ROWS_X], *res = l->p[NAT_ROWS_RES];
    const float *g = l->p[NAT_ROWS_GAMMA], *b = l->p[NAT_ROWS_BETA];
    float *out = l->p[NAT_ROWS_OUT];
    int64_t rows = l->d.rows.rows, cols = l->d.rows.cols;
    float eps = l->d.rows.eps;
    /* without a residual the output is written once (with one, it holds
     * x + res first); large, it is streamed past the caches (nat_stream_out) */
#ifdef NAT_VMATH
    bool stream = !res && nat_stream_out(out, rows * cols);
#else
    bool stream = false;
#endif
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        ln_row(x + r * cols, res ? res + r * cols : NULL, g, b, out + r * cols, cols, eps, stream);
}
