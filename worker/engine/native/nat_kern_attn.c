/* nat_kern_attn: fused (FlashAttention-style) attention and the eager path's
 * batched matmul, on the CPU.
 *
 * Fused attention walks, for each (bh, block of query rows), the key blocks in
 * order, keeping per query row a running max m, a running sum l and an
 * unnormalized output accumulator: a new score tile S = q k^T is turned into
 * P = exp(S - m_new), the old sum and accumulator are rescaled by
 * exp(m_old - m_new), and P v is added.  Only a Br x Bc score tile exists at a
 * time, in a per-thread stack buffer.  The scale rides in the score GEMM's
 * alpha; the exponentials are nat_exp_sum's, the eager softmax's.
 *
 * The two GEMMs of a block: where our GEMM is the default (nat_pw_default:
 * AVX-512; the attention takes no params.gemm), our packed GEMM
 * (nat_pw_gemm) on the key and value blocks packed into its panels by the
 * thread that uses them (the query block pre-scaled once); OpenBLAS packed
 * them again inside each of its calls (0.89x of torch.compile on the
 * attention pattern).  Elsewhere OpenBLAS, the pthreads build, so inside
 * OpenMP regions its thread count is set to 1 (and restored after); this
 * OpenBLAS (0.3.21) has no cblas_sgemm_batch. */
#include "nat_kern.h"
#include "nat_kern_cpu.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Tile sizes, measured on the 2-core dev machine (bh=8, d=64): taller query
 * blocks and wider key blocks amortize each small sgemm's packing and call
 * cost; 128 x 256 was within noise of 256 x 256 at a third of the stack
 * (the tile below is ~192 KiB per thread). */
#ifndef ATTN_BR
#define ATTN_BR 128 /* query rows per block */
#endif
#ifndef ATTN_BC
#define ATTN_BC 256 /* keys per block */
#endif
#ifndef ATTN_DMAX
#define ATTN_DMAX 128 /* accumulator columns held at once; wider heads loop */
#endif

/* A thread's tile state: scores/probabilities, accumulator, running stats;
 * for the packed GEMM, the scaled query block and the packed key and value
 * blocks (NULL: OpenBLAS). */
typedef struct attn_tile {
    float sc[ATTN_BR * ATTN_BC];
    float acc[ATTN_BR * ATTN_DMAX];
    float m[ATTN_BR];
    float l[ATTN_BR];
    float *qs, *pk, *pv;
} attn_tile;

/* One (bh) problem's pointers and sizes. */
typedef struct attn_prob {
    const float *q, *k, *v;
    float *o;
    int s, d;
    float alpha; /* the softmax scale */
    bool causal;
} attn_prob;

/* x[j] = exp(x[j] - m) for j < n, 0 for n <= j < nc; returns the sum. */
static float row_exp(float *x, int n, int nc, float m)
{
    float sum = nat_exp_sum(x, 1.0f, m, x, n);
    for (int j = n; j < nc; j++)
        x[j] = 0.0f;
    return sum;
}

/* Keys of block [j0, j0+nc) that query row i may see. */
static int visible(const attn_prob *p, int i, int j0, int nc)
{
    if (!p->causal)
        return nc;
    int n = i - j0 + 1;
    return n < 0 ? 0 : (n > nc ? nc : n);
}

/* Packs rows x cols of v (row stride ld) into nat_pw_gemm's panels: panel
 * columns are v's columns, k runs over its rows; the last panel zero-padded. */
static void pack_rows(const float *v, int64_t ld, int rows, int cols, float *dst)
{
    int panels = (cols + 31) / 32;
    for (int pn = 0; pn < panels; pn++) {
        int c0 = pn * 32, n = cols - c0 < 32 ? cols - c0 : 32;
        float *d = dst + (size_t)pn * rows * 32;
        for (int r = 0; r < rows; r++) {
            memcpy(d + (size_t)r * 32, v + (size_t)r * ld + c0, (size_t)n * sizeof(float));
            if (n < 32)
                memset(d + (size_t)r * 32 + n, 0, (size_t)(32 - n) * sizeof(float));
        }
    }
}

/* Online-softmax update of rows [i0, i0+nr) with the score tile of keys
 * [j0, j0+nc) (already in t->sc); rescales acc columns [0, dc).  The first
 * block (j0 == 0, where every row sees key 0) starts the running stats, so
 * there is nothing to rescale yet. */
static void attn_update(attn_tile *t, const attn_prob *p, int i0, int nr, int j0, int nc, int dc)
{
    for (int r = 0; r < nr; r++) {
        float *x = t->sc + (size_t)r * ATTN_BC;
        int n = visible(p, i0 + r, j0, nc);
        float mx = n > 0 ? nat_row_max(x, n) : -FLT_MAX;
        if (j0 == 0) {
            t->m[r] = mx;
            t->l[r] = row_exp(x, n, nc, mx);
            continue;
        }
        float m_new = mx > t->m[r] ? mx : t->m[r];
        float corr = nat_expf(t->m[r] - m_new);
        t->l[r] = t->l[r] * corr + row_exp(x, n, nc, m_new);
        t->m[r] = m_new;
        if (corr != 1.0f) {
            float *a = t->acc + (size_t)r * ATTN_DMAX;
#pragma omp simd
            for (int c = 0; c < dc; c++)
                a[c] *= corr;
        }
    }
}

/* Output columns [d0, d0+dc) of query rows [i0, i0+nr) of one problem. */
static void attn_block_cols(attn_tile *t, const attn_prob *p, int i0, int nr, int d0, int dc)
{
    int j_end = p->causal ? i0 + nr : p->s; /* later key blocks are fully masked */
    for (int j0 = 0; j0 < j_end; j0 += ATTN_BC) {
        int nc = j_end - j0 < ATTN_BC ? j_end - j0 : ATTN_BC;
        if (t->pk) {
            /* scores = (alpha q) k^T: keys as panel columns, head dims as k */
            nat_pw_pack(p->k + (size_t)j0 * p->d, true, nc, p->d, t->pk);
            nat_pw_gemm(t->qs, p->d, t->pk, t->sc, ATTN_BC, nr, p->d, 0, nc, false, NULL);
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, p->d, p->alpha,
                        p->q + (size_t)i0 * p->d, p->d, p->k + (size_t)j0 * p->d, p->d, 0.0f, t->sc,
                        ATTN_BC);
        }
        attn_update(t, p, i0, nr, j0, nc, dc);
        /* the accumulator starts at the first block (beta 0 / no accumulate) */
        if (t->pv) {
            pack_rows(p->v + (size_t)j0 * p->d + d0, p->d, nc, dc, t->pv);
            nat_pw_gemm(t->sc, ATTN_BC, t->pv, t->acc, ATTN_DMAX, nr, nc, 0, dc, j0 > 0, NULL);
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, dc, nc, 1.0f, t->sc, ATTN_BC,
                        p->v + (size_t)j0 * p->d + d0, p->d, j0 == 0 ? 0.0f : 1.0f, t->acc,
                        ATTN_DMAX);
        }
    }
    for (int r = 0; r < nr; r++) {
        float inv = 1.0f / t->l[r];
        float *dst = p->o + (size_t)(i0 + r) * p->d + d0;
        const float *a = t->acc + (size_t)r * ATTN_DMAX;
#pragma omp simd
        for (int c = 0; c < dc; c++)
            dst[c] = a[c] * inv;
    }
}

static void attn_block(attn_tile *t, const attn_prob *p, int i0, int nr)
{
    if (t->qs) { /* the scale rides in the query block, once */
        const float *q = p->q + (size_t)i0 * p->d;
        for (int64_t e = 0; e < (int64_t)nr * p->d; e++)
            t->qs[e] = q[e] * p->alpha;
    }
    for (int d0 = 0; d0 < p->d; d0 += ATTN_DMAX) {
        int dc = p->d - d0 < ATTN_DMAX ? p->d - d0 : ATTN_DMAX;
        attn_block_cols(t, p, i0, nr, d0, dc);
    }
}

NAT_SIMD_CLONES void nat_attention_fused(const float *q, const float *k, const float *v, float *o,
                                         int bh, int s, int d, float scale, bool causal)
{
    if (bh < 1 || s < 1 || d < 1)
        return;
    int nqb = (s + ATTN_BR - 1) / ATTN_BR;
    int64_t items = (int64_t)bh * nqb;
    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    bool packed = nat_pw_default();
#pragma omp parallel
    {
        attn_tile t;
        t.qs = t.pk = t.pv = NULL;
        if (packed) { /* per thread; on failure this thread runs OpenBLAS */
            t.qs = malloc((size_t)ATTN_BR * d * sizeof(float));
            t.pk = malloc((size_t)nat_pw_floats(ATTN_BC, d) * sizeof(float));
            t.pv = malloc((size_t)nat_pw_floats(ATTN_DMAX, ATTN_BC) * sizeof(float));
            if (!t.qs || !t.pk || !t.pv) {
                free(t.qs), free(t.pk), free(t.pv);
                t.qs = t.pk = t.pv = NULL;
            }
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            /* Causal blocks late in the sequence cost the most: start them first. */
            int qb = causal ? nqb - 1 - (int)(it % nqb) : (int)(it % nqb);
            size_t off = (size_t)(it / nqb) * s * d;
            attn_prob p = {q + off, k + off, v + off, o + off, s, d, scale, causal};
            int i0 = qb * ATTN_BR;
            attn_block(&t, &p, i0, s - i0 < ATTN_BR ? s - i0 : ATTN_BR);
        }
        free(t.qs), free(t.pk), free(t.pv);
    }
    openblas_set_num_threads(blas_threads);
}

/* ---- batched matmul ---- */

/* Work items of nat_bmm: whole batches, or row blocks of them when there are
 * fewer batches than threads. */
typedef struct bmm_args {
    const float *a, *b;
    float *c;
    int m, n, k, ldb, rows; /* rows: per item */
    int per_batch;          /* items per batch */
    CBLAS_TRANSPOSE tb;
} bmm_args;

static void bmm_item(const bmm_args *x, int64_t it)
{
    int64_t z = it / x->per_batch;
    int r0 = (int)(it % x->per_batch) * x->rows;
    int nr = x->m - r0 < x->rows ? x->m - r0 : x->rows;
    if (nr <= 0)
        return;
    const float *a = x->a + ((size_t)z * x->m + r0) * x->k;
    const float *b = x->b + (size_t)z * x->n * x->k;
    float *c = x->c + ((size_t)z * x->m + r0) * x->n;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, x->tb, nr, x->n, x->k, 1.0f, a, x->k, b, x->ldb, 0.0f,
                c, x->n);
}

/* OpenMP over items with single-threaded sgemms, never OpenBLAS's own threads:
 * on this 2-core machine its pool and OpenMP's spin against each other between
 * kernels, which measured slower and far noisier than one pool. */
void nat_bmm(const float *a, const float *b, float *c, int nb, int m, int n, int k, bool trans_b)
{
    if (nb < 1 || m < 1 || n < 1)
        return;
    if (k < 1) { /* an empty sum; BLAS would reject the leading dimensions */
        memset(c, 0, (size_t)nb * m * n * sizeof(float));
        return;
    }
    int nt = omp_get_max_threads();
    int per = nb >= nt ? 1 : (nt + nb - 1) / nb;
    per = per > m ? m : per;
    bmm_args x = {a,
                  b,
                  c,
                  m,
                  n,
                  k,
                  trans_b ? k : n,
                  (m + per - 1) / per,
                  per,
                  trans_b ? CblasTrans : CblasNoTrans};
    int64_t items = (int64_t)nb * per;
    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
#pragma omp parallel for schedule(static)
    for (int64_t it = 0; it < items; it++)
        bmm_item(&x, it);
    openblas_set_num_threads(blas_threads);
}
