/* nat_kern_gemm: GEMM launches, bare and with fused epilogues, on OpenBLAS.
 *
 * Threading: Debian's OpenBLAS is the pthreads build, which knows nothing of
 * OpenMP, so calling it from inside a parallel region would oversubscribe the
 * cores.  Every GEMM here, bare or fused, splits the rows into blocks, runs the
 * blocks in an OpenMP loop and calls OpenBLAS single-threaded on each: eager
 * and fused then differ only by the epilogue, a fused block's epilogue runs on
 * the core that just produced it while it is in that core's cache, and
 * OpenBLAS's own thread pool never competes with OpenMP's.  Measured on the 2-core dev box
 * (m=512, k=n=1024): fused 4.2 ms against eager 7.7 ms (sgemm + bias + act).
 * Not measured: sequential blocks with a threaded OpenBLAS and an OpenMP
 * epilogue (two fork/joins per block, expected slower). */
#include <cblas.h>
#include <omp.h>

#include "nat_kern_cpu.h"

/* Rows per block: OpenBLAS packs the whole B operand on every call, so a block
 * must be tall enough to amortize that (at 32 rows, packing made the fused GEMM
 * 1.3x slower than eager); 256 rows x 1024 floats is 1 MiB, still in L2.  Blocks
 * shrink to give every thread one when m is small. */
#define GEMM_RB_MIN 32
#define GEMM_RB_MAX 256

static int64_t row_block(int64_t m)
{
    int64_t nt = omp_get_max_threads();
    int64_t rb = (m + nt - 1) / nt;
    rb = (rb + 7) / 8 * 8;
    return rb < GEMM_RB_MIN ? GEMM_RB_MIN : (rb > GEMM_RB_MAX ? GEMM_RB_MAX : rb);
}

static void gemm_rows(const float *a, const float *b, float *c, int64_t rows, int64_t n, int64_t k,
                      float beta)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)k, 1.0f, a,
                (int)k, b, (int)n, beta, c, (int)n);
}

static void epilogue(float *c, const float *bias, int64_t rows, int64_t n, int act)
{
    for (int64_t r = 0; r < rows; r++) {
        float *row = c + r * n;
        if (bias) {
#pragma omp simd
            for (int64_t j = 0; j < n; j++)
                row[j] += bias[j];
        }
        nat_act_vec(row, n, act); /* the row is still in L1 */
    }
}

/* OpenBLAS runs single-threaded for the duration of a blocked kernel; the
 * engine's thread count (OpenMP's) is restored after. */
static void blas_single(void)
{
    openblas_set_num_threads(1);
}

static void blas_restore(void)
{
    openblas_set_num_threads(1); /* the engine's setting: see nat_engine.c */
}

void nat_k_gemm_epi(const nat_launch *l)
{
    const float *a = l->p[0], *b = l->p[1], *bias = l->p[2];
    float *c = l->p[3];
    int64_t m = l->i[0], n = l->i[1], k = l->i[2];
    int act = (int)l->i[3];
    int64_t rb = row_block(m), nblk = (m + rb - 1) / rb;
    blas_single();
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t blk = 0; blk < nblk; blk++) {
        int64_t r0 = blk * rb;
        int64_t rows = m - r0 < rb ? m - r0 : rb;
        gemm_rows(a + r0 * k, b, c + r0 * n, rows, n, k, 0.0f);
        epilogue(c + r0 * n, bias, rows, n, act);
    }
    blas_restore();
}

void nat_k_sgemm(const nat_launch *l)
{
    const float *a = l->p[0], *b = l->p[1];
    float *c = l->p[2];
    int64_t m = l->i[0], n = l->i[1], k = l->i[2];
    int64_t rb = row_block(m), nblk = (m + rb - 1) / rb;
    blas_single();
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t blk = 0; blk < nblk; blk++) {
        int64_t r0 = blk * rb;
        int64_t rows = m - r0 < rb ? m - r0 : rb;
        gemm_rows(a + r0 * k, b, c + r0 * n, rows, n, k, 0.0f);
    }
    blas_restore();
}

int64_t nat_mlp_fused_ws(int64_t m, int64_t h, int64_t *rb, int64_t *slots)
{
    *rb = row_block(m);
    *slots = omp_get_max_threads();
    return *rb * *slots * h;
}

void nat_k_mlp_fused(const nat_launch *l)
{
    const float *x = l->p[0], *w1 = l->p[1], *b1 = l->p[2], *w2 = l->p[3], *b2 = l->p[4];
    float *out = l->p[5], *ws = l->p[6];
    int64_t m = l->i[0], d = l->i[1], h = l->i[2], rb = l->i[3], slots = l->i[4];
    int64_t nblk = (m + rb - 1) / rb;
    int nt = omp_get_max_threads() < slots ? omp_get_max_threads() : (int)slots;
    blas_single();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
    for (int64_t blk = 0; blk < nblk; blk++) {
        float *hid = ws + (int64_t)omp_get_thread_num() * rb * h;
        int64_t r0 = blk * rb;
        int64_t rows = m - r0 < rb ? m - r0 : rb;
        gemm_rows(x + r0 * d, w1, hid, rows, h, d, 0.0f);
        epilogue(hid, b1, rows, h, NAT_ACT_GELU);
        gemm_rows(hid, w2, out + r0 * d, rows, d, h, 0.0f);
        epilogue(out + r0 * d, b2, rows, d, NAT_ACT_NONE);
    }
    blas_restore();
}
