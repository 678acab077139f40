/* nat_kern_reduce: row reductions (the eager building blocks) and the fused
 * row-wise normalizations: softmax and layernorm make two or three passes over
 * one row while it sits in L1/L2, and one pass over memory in all.  OpenMP
 * splits the rows. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "nat_kern_cpu.h"
#include "nat_vmath.h"

#ifdef NAT_VMATH
/* The row's max, sum and sum of squared deviations from mean on four
 * accumulators: one accumulator (what `omp simd reduction` makes) waits on
 * the last add's latency at every vector, and these passes run over a row
 * in L1, where that latency is their time. */
/* (x[j] > m ? x[j] : m): a NaN is passed over, as the scalar loop's */
float nat_row_max(const float *x, int64_t n)
{
    __m256 a = _mm256_set1_ps(-INFINITY), b = a, c = a, d = a;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        a = _mm256_max_ps(_mm256_loadu_ps(x + j), a);
        b = _mm256_max_ps(_mm256_loadu_ps(x + j + 8), b);
        c = _mm256_max_ps(_mm256_loadu_ps(x + j + 16), c);
        d = _mm256_max_ps(_mm256_loadu_ps(x + j + 24), d);
    }
    for (; j + 8 <= n; j += 8)
        a = _mm256_max_ps(_mm256_loadu_ps(x + j), a);
    float m = nat_hmax8(_mm256_max_ps(_mm256_max_ps(a, b), _mm256_max_ps(c, d)));
    for (; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

static float row_sum(const float *x, int64_t n)
{
    __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        a = _mm256_add_ps(a, _mm256_loadu_ps(x + j));
        b = _mm256_add_ps(b, _mm256_loadu_ps(x + j + 8));
        c = _mm256_add_ps(c, _mm256_loadu_ps(x + j + 16));
        d = _mm256_add_ps(d, _mm256_loadu_ps(x + j + 24));
    }
    for (; j + 8 <= n; j += 8)
        a = _mm256_add_ps(a, _mm256_loadu_ps(x + j));
    float s = nat_hsum8(_mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
    for (; j < n; j++)
        s += x[j];
    return s;
}

static float row_sq_dev(const float *x, float mean, int64_t n)
{
    const __m256 vm = _mm256_set1_ps(mean);
    __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        __m256 u = _mm256_sub_ps(_mm256_loadu_ps(x + j), vm);
        __m256 v = _mm256_sub_ps(_mm256_loadu_ps(x + j + 8), vm);
        __m256 w = _mm256_sub_ps(_mm256_loadu_ps(x + j + 16), vm);
        __m256 y = _mm256_sub_ps(_mm256_loadu_ps(x + j + 24), vm);
        a = _mm256_fmadd_ps(u, u, a);
        b = _mm256_fmadd_ps(v, v, b);
        c = _mm256_fmadd_ps(w, w, c);
        d = _mm256_fmadd_ps(y, y, d);
    }
    for (; j + 8 <= n; j += 8) {
        __m256 u = _mm256_sub_ps(_mm256_loadu_ps(x + j), vm);
        a = _mm256_fmadd_ps(u, u, a);
    }
    float s = nat_hsum8(_mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
    for (; j < n; j++)
        s += (x[j] - mean) * (x[j] - mean);
    return s;
}
#else
float nat_row_max(const float *x, int64_t n)
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

static float row_sq_dev(const float *x, float mean, int64_t n)
{
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int64_t j = 0; j < n; j++)
        v += (x[j] - mean) * (x[j] - mean);
    return v;
}
#endif

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
            out[r] = nat_row_max(row, cols);
        else if (op == NAT_RSUM)
            out[r] = row_sum(row, cols);
        else
            out[r] = row_sum(row, cols) / (float)cols;
    }
}

/* Rows of at most ROW_BUF floats (16 KiB) are worked on in a buffer on the
 * thread's stack, so that an output larger than the caches is written once,
 * streamed past them (nat_stream_out), and the next row is prefetched while
 * this one computes: a row of 1024 floats is one 4 KiB page, where the
 * hardware prefetcher stops. */
#define ROW_BUF 4096

#ifdef NAT_VMATH
/* o[j] = s[j] * a for j < n; o's 32-byte aligned part streamed. */
static void scale_stream(const float *s, float a, float *o, int64_t n)
{
    int64_t j = 0;
    for (; j < n && ((uintptr_t)(o + j) & 31); j++)
        o[j] = s[j] * a;
    const __m256 va = _mm256_set1_ps(a);
    for (; j + 8 <= n; j += 8)
        _mm256_stream_ps(o + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), va));
    for (; j < n; j++)
        o[j] = s[j] * a;
}
#endif

#ifdef NAT_VMATH
/* The exponentials exp(x[i] - m) of a row into e, and their sum, on 8 lanes
 * (as nat_exp_sum's), with two streams of other rows carried in the same
 * loop, so that the memory traffic overlaps the exponentials' arithmetic
 * instead of waiting before and after it: the next row's lines asked for
 * (next; NULL at the last row) and the previous row's output, p[j] * pinv,
 * streamed to po (NULL at a thread's first row). */
static float exp_sum_carry(const float *x, float m, float *e, int64_t n, const float *next,
                           const float *p, float pinv, float *po)
{
    int64_t j = 0; /* po's next index: its unaligned head first */
    if (po)
        for (; j < n && ((uintptr_t)(po + j) & 31); j++)
            po[j] = p[j] * pinv;
    const __m256 vm = _mm256_set1_ps(m), vp = _mm256_set1_ps(pinv);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        if (next && (i & 15) == 0)
            _mm_prefetch((const char *)(next + i), _MM_HINT_T0);
        __m256 v = nat_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(e + i, v);
        acc = _mm256_add_ps(acc, v);
        if (po && j + 8 <= n) {
            _mm256_stream_ps(po + j, _mm256_mul_ps(_mm256_loadu_ps(p + j), vp));
            j += 8;
        }
    }
    if (i < n) {
        __m256i mk = nat_lanes8(n - i);
        __m256 v = nat_exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, mk), vm));
        v = _mm256_and_ps(v, _mm256_castsi256_ps(mk));
        _mm256_maskstore_ps(e + i, mk, v);
        acc = _mm256_add_ps(acc, v);
    }
    if (po)
        scale_stream(p + j, pinv, po + j, n - j);
    return nat_hsum8(acc);
}
#endif

NAT_SIMD_CLONES void nat_k_softmax(const nat_launch *l)
{
    const float *x = l->p[NAT_ROWS_X];
    float *out = l->p[NAT_ROWS_OUT];
    int64_t rows = l->d.rows.rows, cols = l->d.rows.cols;
#ifdef NAT_VMATH
    if (cols <= ROW_BUF && nat_stream_out(out, rows * cols) && !nat_v16_available()) {
        /* 8 lanes: each row's output is streamed while the next row's
         * exponentials are computed (exp_sum_carry), from two row buffers */
#pragma omp parallel
        {
            float buf[2][ROW_BUF] __attribute__((aligned(64)));
            const float *pb = NULL;
            float pinv = 0.0f, *po = NULL;
            int cur = 0;
#pragma omp for schedule(static) nowait
            for (int64_t r = 0; r < rows; r++) {
                const float *xr = x + r * cols;
                float m = nat_row_max(xr, cols);
                float sum = exp_sum_carry(xr, m, buf[cur], cols, r + 1 < rows ? xr + cols : NULL,
                                          pb, pinv, po);
                pb = buf[cur];
                pinv = 1.0f / sum;
                po = out + r * cols;
                cur ^= 1;
            }
            if (po)
                scale_stream(pb, pinv, po, cols);
            _mm_sfence();
        }
        return;
    }
    if (cols <= ROW_BUF && nat_stream_out(out, rows * cols)) {
#pragma omp parallel
        {
            float buf[ROW_BUF] __attribute__((aligned(64)));
#pragma omp for schedule(static)
            for (int64_t r = 0; r < rows; r++) {
                const float *xr = x + r * cols;
                float m = nat_row_max(xr, cols);
                float inv =
                    1.0f / nat_exp_sum_pf(xr, 1.0f, m, buf, cols, r + 1 < rows ? xr + cols : NULL);
                scale_stream(buf, inv, out + r * cols, cols);
            }
            _mm_sfence();
        }
        return;
    }
#endif
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *o = out + r * cols;
        float m = nat_row_max(xr, cols);
        float inv = 1.0f / nat_exp_sum(xr, 1.0f, m, o, cols);
#pragma omp simd
        for (int64_t j = 0; j < cols; j++)
            o[j] *= inv;
    }
}

/* One row of layernorm: mean and variance from the row (two passes in cache,
 * numerically safer than E[x^2] - E[x]^2), then the affine write. */
static void ln_row(const float *x, const float *res, const float *g, const float *b, float *o,
                   int64_t n, float eps)
{
    if (res) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            o[j] = x[j] + res[j];
        x = o;
    }
    float mean = row_sum(x, n) / (float)n;
    float v = row_sq_dev(x, mean, n);
    float rstd = 1.0f / sqrtf(v / (float)n + eps);
#pragma omp simd
    for (int64_t j = 0; j < n; j++)
        o[j] = (x[j] - mean) * rstd * g[j] + b[j];
}

#ifdef NAT_VMATH
/* The row's sum (x + res into buf first, where res is given), asking for
 * the next row's lines (nx, nres; NULL at the last row) on the way. */
static float sum_row_pf(const float *x, const float *res, float *buf, int64_t n, const float *nx,
                        const float *nres)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m256 u = _mm256_loadu_ps(x + j), w = _mm256_loadu_ps(x + j + 8);
        if (nx)
            _mm_prefetch((const char *)(nx + j), _MM_HINT_T0);
        if (res) {
            if (nx)
                _mm_prefetch((const char *)(nres + j), _MM_HINT_T0);
            u = _mm256_add_ps(u, _mm256_loadu_ps(res + j));
            w = _mm256_add_ps(w, _mm256_loadu_ps(res + j + 8));
            _mm256_store_ps(buf + j, u);
            _mm256_store_ps(buf + j + 8, w);
        }
        a0 = _mm256_add_ps(a0, u);
        a1 = _mm256_add_ps(a1, w);
    }
    float t[8], s = 0.0f;
    _mm256_storeu_ps(t, _mm256_add_ps(a0, a1));
    for (int k = 0; k < 8; k++)
        s += t[k];
    for (; j < n; j++) {
        float u = res ? (buf[j] = x[j] + res[j]) : x[j];
        s += u;
    }
    return s;
}

/* ln_row for an output streamed past the caches (nat_stream_out): x + res
 * in buf (the row written once, not twice), the next row prefetched while
 * this one computes, o's 32-byte aligned part streamed. */
static void ln_row_stream(const float *x, const float *res, const float *g, const float *b,
                          float *o, int64_t n, float eps, const float *nx, const float *nres,
                          float *buf)
{
    float mean = sum_row_pf(x, res, buf, n, nx, nres) / (float)n;
    if (res)
        x = buf;
    float v = row_sq_dev(x, mean, n);
    float rstd = 1.0f / sqrtf(v / (float)n + eps);
    int64_t j = 0;
    for (; j < n && ((uintptr_t)(o + j) & 31); j++)
        o[j] = (x[j] - mean) * rstd * g[j] + b[j];
    const __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
    for (; j + 8 <= n; j += 8) {
        __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm), vr);
        _mm256_stream_ps(o + j, _mm256_fmadd_ps(t, _mm256_loadu_ps(g + j), _mm256_loadu_ps(b + j)));
    }
    for (; j < n; j++)
        o[j] = (x[j] - mean) * rstd * g[j] + b[j];
}
#endif

NAT_SIMD_CLONES void nat_k_layernorm(const nat_launch *l)
{
    const float *x = l->p[NAT_ROWS_X], *res = l->p[NAT_ROWS_RES];
    const float *g = l->p[NAT_ROWS_GAMMA], *b = l->p[NAT_ROWS_BETA];
    float *out = l->p[NAT_ROWS_OUT];
    int64_t rows = l->d.rows.rows, cols = l->d.rows.cols;
    float eps = l->d.rows.eps;
#ifdef NAT_VMATH
    if ((cols <= ROW_BUF || !res) && nat_stream_out(out, rows * cols)) {
#pragma omp parallel
        {
            float buf[ROW_BUF] __attribute__((aligned(64))); /* x + res */
#pragma omp for schedule(static)
            for (int64_t r = 0; r < rows; r++) {
                const float *xr = x + r * cols, *rr = res ? res + r * cols : NULL;
                bool more = r + 1 < rows;
                ln_row_stream(xr, rr, g, b, out + r * cols, cols, eps, more ? xr + cols : NULL,
                              more && rr ? rr + cols : NULL, buf);
            }
            _mm_sfence();
        }
        return;
    }
#endif
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        ln_row(x + r * cols, res ? res + r * cols : NULL, g, b, out + r * cols, cols, eps);
}
