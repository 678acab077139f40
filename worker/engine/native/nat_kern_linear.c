/* nat_kern_linear: c = act(a w + bias + res) and the one-launch MLP
 * act(x w1 + b1) w2 + b2, threaded by tiles, on our packed-weight GEMM
 * (nat_kern_pgemm.c) where the caller packed the weight (params.gemm:
 * nat_spec_gemm_pack), else on OpenBLAS.  The pattern suite's GEMM launches and the model
 * zoo's linears both run here. */
#include <cblas.h>
#include <omp.h>

#include "nat_kern_cpu.h"

/* Threading and tiles.  OpenBLAS packs its whole B operand (here the weight)
 * on every call, and a model's weights come from DRAM: at BERT's m = 128 the
 * packing cost more than the multiply (perf: sgemm_itcopy 28% of the run
 * against 21% in the kernel).  So the weight is kept in PyTorch's [n, k]
 * layout (OpenBLAS's "T" packing reads it row by row, faster than the [k, n]
 * copy the engine used to make) and the threads split the columns, each
 * packing only its slice; the rows are split too, into blocks of up to
 * LIN_RB_MAX so each block's epilogue runs while the block is in cache.
 * Measured on the 2-core dev box, 24 distinct cold weights, per GEMM:
 * m=128 k=768 n=3072 rows-split [k,n] 3.92 ms, columns-split [n,k] 2.75 ms;
 * m=128 k=n=768 1.00 against 0.74 ms.  A weight too narrow to split
 * (n < LIN_CB_MIN per thread) falls back to the rows. */
#define LIN_RB_MAX 256
#define LIN_CB_MIN 64
/* Columns per tile at most: a 256 x 512 tile of c (512 KiB) stays in L2 for
 * its epilogue (at 1536 columns the epilogue of the MLP's hidden layer read
 * it back from L3). */
#ifndef LIN_CB_MAX
#define LIN_CB_MAX 512
#endif

typedef struct lin_tiles {
    int64_t rb, cb, nrb, ncb;
} lin_tiles;

static lin_tiles lin_tiling(int64_t m, int64_t n)
{
    int64_t nt = omp_get_max_threads();
    lin_tiles t = {.rb = m < LIN_RB_MAX ? m : LIN_RB_MAX, .cb = n};
    if (n >= nt * LIN_CB_MIN) {
        t.cb = (n + nt - 1) / nt;
        t.cb = (t.cb + 31) / 32 * 32; /* whole packed panels (nat_pw_gemm) per thread */
        if (t.cb > LIN_CB_MAX)        /* then several tiles per thread, in column order */
            t.cb = (t.cb + ((t.cb + LIN_CB_MAX - 1) / LIN_CB_MAX) - 1) /
                   ((t.cb + LIN_CB_MAX - 1) / LIN_CB_MAX);
        t.cb = (t.cb + 31) / 32 * 32;
    } else {
        int64_t rb = (m + nt - 1) / nt;
        rb = (rb + 7) / 8 * 8;
        t.rb = rb < 32 ? 32 : (rb > LIN_RB_MAX ? LIN_RB_MAX : rb);
    }
    t.nrb = (m + t.rb - 1) / t.rb;
    t.ncb = (n + t.cb - 1) / t.cb;
    return t;
}

/* c[r, c0 .. c0+cols) = a[r, :] w for rows rows: w is [n, k] when wt (PyTorch's
 * layout, c = a w^T), else [k, n].  ldc = n. */
static void lin_gemm(const float *a, const float *w, float *c, int64_t rows, int64_t c0,
                     int64_t cols, int64_t n, int64_t k, bool wt)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, wt ? CblasTrans : CblasNoTrans, (int)rows, (int)cols,
                (int)k, 1.0f, a, (int)k, wt ? w + c0 * k : w + c0, wt ? (int)k : (int)n, 0.0f,
                c + c0, (int)n);
}

/* One tile of c = act(a w + bias + res): rows [r0, r0+rb) x columns of slice cb_i. */
static void lin_tile(const float *a, nat_weight w, const float *bias, const float *res, float *c,
                     int64_t m, int64_t n, int64_t k, int act, const lin_tiles *t, int64_t tile)
{
    int64_t ci = tile / t->nrb, ri = tile % t->nrb;
    int64_t r0 = ri * t->rb, c0 = ci * t->cb;
    int64_t rows = m - r0 < t->rb ? m - r0 : t->rb, cols = n - c0 < t->cb ? n - c0 : t->cb;
    /* the epilogue relative to the tile's first row, which is the GEMM's */
    nat_epi epi = {.bias = bias, .res = res ? res + r0 * n : NULL, .ldr = n, .act = act};
    if (w.pw) { /* the epilogue runs inside, on blocks of rows in cache */
        nat_pw_gemm(a + r0 * k, k, w.pw, c + r0 * n, n, rows, k, c0, cols, false, &epi);
        return;
    }
    lin_gemm(a + r0 * k, w.w, c + r0 * n, rows, c0, cols, n, k, w.wt);
    nat_epi_apply(c + r0 * n + c0, n, 0, c0, rows, cols, &epi);
}

void nat_linear(const float *a, nat_weight w, const float *bias, const float *res, float *c,
                int64_t m, int64_t n, int64_t k, int act)
{
    lin_tiles t = lin_tiling(m, n);
    openblas_set_num_threads(1); /* the engine's setting: see nat_engine.c */
    /* static: a thread takes consecutive tiles, i.e. the row blocks of one
     * column slice, so its slice of w stays in its cache */
#pragma omp parallel for schedule(static)
    for (int64_t tile = 0; tile < t.nrb * t.ncb; tile++)
        lin_tile(a, w, bias, res, c, m, n, k, act, &t, tile);
}

/* ---- MLP: act(x w1 + b1) w2 + b2 in one launch ---- */

/* The hidden [m, h] activation fits in this many floats of cache (the dev
 * box's 2 MiB L2 per core and its share of L3): below it, the two GEMMs run
 * one after the other split by columns (each thread packs a slice of each
 * weight once), the hidden tensor written and read back from cache; above it,
 * row blocks run the whole MLP per thread through a per-thread hidden block
 * (the pattern suite's nat_k_mlp_fused), which repacks both weights per
 * block but never sends the hidden tensor to DRAM. */
#define MLP_COLS_MAX_FLOATS ((int64_t)1 << 20)

int64_t nat_mlp_ws(int64_t m, int64_t h, int64_t *mode, int64_t *rb, int64_t *slots)
{
    int64_t nt = omp_get_max_threads();
    *slots = nt;
    if (m * h <= MLP_COLS_MAX_FLOATS) {
        *mode = NAT_MLP_COLUMNS;
        *rb = m;
        return m * h;
    }
    *mode = NAT_MLP_ROWS;
    int64_t r = (m + nt - 1) / nt;
    r = (r + 7) / 8 * 8;
    *rb = r < 32 ? 32 : (r > LIN_RB_MAX ? LIN_RB_MAX : r);
    return *rb * nt * h;
}

void nat_mlp(const float *x, nat_weight w1, const float *b1, nat_weight w2, const float *b2,
             const float *res, float *out, float *ws, const nat_mlp_dims *dm)
{
    int64_t m = dm->m, d = dm->d, h = dm->h, rb = dm->rb;
    int act = dm->act;
    openblas_set_num_threads(1);
    if (dm->mode == NAT_MLP_COLUMNS) {
        lin_tiles t1 = lin_tiling(m, h), t2 = lin_tiling(m, d);
#pragma omp parallel
        {
#pragma omp for schedule(static)
            for (int64_t tile = 0; tile < t1.nrb * t1.ncb; tile++)
                lin_tile(x, w1, b1, NULL, ws, m, h, d, act, &t1, tile);
                /* the implicit barrier: the hidden tensor is whole */
#pragma omp for schedule(static)
            for (int64_t tile = 0; tile < t2.nrb * t2.ncb; tile++)
                lin_tile(ws, w2, b2, res, out, m, d, h, NAT_ACT_NONE, &t2, tile);
        }
        return;
    }
    int64_t nblk = (m + rb - 1) / rb;
    int nt = omp_get_max_threads() < dm->slots ? omp_get_max_threads() : (int)dm->slots;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
    for (int64_t blk = 0; blk < nblk; blk++) {
        float *hid = ws + (int64_t)omp_get_thread_num() * rb * h;
        int64_t r0 = blk * rb, rows = m - r0 < rb ? m - r0 : rb;
        lin_tiles t1 = {
            .rb = rows, .cb = LIN_CB_MAX, .nrb = 1, .ncb = (h + LIN_CB_MAX - 1) / LIN_CB_MAX};
        for (int64_t ti = 0; ti < t1.ncb; ti++)
            lin_tile(x + r0 * d, w1, b1, NULL, hid, rows, h, d, act, &t1, ti);
        lin_tiles t2 = {
            .rb = rows, .cb = LIN_CB_MAX, .nrb = 1, .ncb = (d + LIN_CB_MAX - 1) / LIN_CB_MAX};
        for (int64_t ti = 0; ti < t2.ncb; ti++)
            lin_tile(hid, w2, b2, res ? res + r0 * d : NULL, out + r0 * d, rows, d, h, NAT_ACT_NONE,
                     &t2, ti);
    }
}
