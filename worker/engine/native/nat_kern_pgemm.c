/* nat_kern_pgemm: GEMM against a weight packed once, for CPUs with AVX-512.
 *
 * Why: a model's weights are constants read from DRAM on every forward, and
 * OpenBLAS packs its B operand again on every call.  At BERT's m = 128 rows
 * the packing was a fifth of the whole run (perf: sgemm_incopy 18.8% against
 * 50.1% in sgemm_kernel).  Here the weight is packed once, when the plan is
 * built, into the layout the micro-kernel streams (panels of NR = 32 columns,
 * k rows of 32 contiguous floats each, the last panel zero-padded), so a call
 * reads each weight byte once, sequentially, and never writes a copy.
 *
 * The micro-kernel holds an MR x 32 tile of c in 2*MR zmm registers (MR = 12:
 * 24 accumulators, 2 weight vectors, 1 broadcast) and, per k step, loads 32
 * weights and broadcasts MR activations.  k is cut in blocks of KC; for each
 * block, MR rows of a at a time meet every panel of the call (its 32 x KC
 * block, 32 KiB, streams from L2), so those rows stay in L1.  Rows whose
 * addresses crowd a few L1 sets (a row stride of 4 KiB puts all 12 in one
 * 8-way set) are first copied k-major into a 12 KiB buffer (pack_a):
 * gemm_bias_relu (m = 512, n = 1024) at k = 1024 on one core took 11.46 ms
 * before, 10.92 after (at k = 1040, where rows do not alias, 10.50 before).
 * Once a block of rows is final (after the last k block), the caller's
 * epilogue (bias, residual, activation: nat_epi) runs on it while it is in
 * cache (12 rows of a 512-column tile: 24 KiB), instead of as a second pass
 * over the whole output.
 *
 * Where AVX-512 is missing, or FUSIONBENCH_NATIVE_ISA=avx2 narrows the
 * kernels (fb_cpu.h), the same panels run on 8 lanes (AVX2 and FMA, the
 * build's baseline): a tile of MR8 = 6 rows x half a panel (12 ymm
 * accumulators, 2 weight vectors, 1 broadcast), the two halves one after the
 * other, and columns in chunks of PW_CHUNK8 panels.  There OpenBLAS stays the
 * default (nat_pw_default) and a job asks for this path with params.gemm
 * "packed". */
#include <assert.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>

#include "fb_cpu.h"
#include "nat_kern_cpu.h"
#include "nat_vmath.h"

#define NR  32
#define MR  12 /* rows of a 16-lane tile */
#define MR8 6  /* rows of an 8-lane tile */
#ifndef KC
#define KC 256
#endif
#ifndef KC8
#define KC8 256
#endif
_Static_assert((MR8 * KC8 <= MR * KC), "pw_run's copy of a's rows holds a tile of either width");
/* How many k rows ahead an 8-lane tile asks for B's next lines: every other
 * line of the panel is its half's, a stride the hardware prefetcher kept up
 * with less well (one core of an AMD EPYC 7003, m = 128, n = 768, k = 3072:
 * 75 -> 79 GFLOP/s, on a noisy VM). */
#ifndef PFD8
#define PFD8 8
#endif

bool nat_v16_available(void)
{
    return fb_cpu_wide(); /* AVX-512F, unless FUSIONBENCH_NATIVE_ISA says avx2 */
}

bool nat_pw_default(void)
{
    return fb_cpu_wide();
}

int64_t nat_pw_floats(int64_t n, int64_t k)
{
    return (n + NR - 1) / NR * NR * k;
}

void nat_pw_pack(const float *w, bool w_trans, int64_t n, int64_t k, float *dst)
{
    int64_t panels = (n + NR - 1) / NR;
    for (int64_t p = 0; p < panels; p++) {
        float *d = dst + p * k * NR;
        int64_t cols = n - p * NR < NR ? n - p * NR : NR;
        if (cols < NR)
            memset(d, 0, (size_t)(k * NR) * sizeof(float));
        if (w_trans) { /* [n, k]: each column of the panel is a contiguous row of w */
            for (int64_t j = 0; j < cols; j++) {
                const float *src = w + (p * NR + j) * k;
                for (int64_t kk = 0; kk < k; kk++)
                    d[kk * NR + j] = src[kk];
            }
        } else { /* [k, n]: each row of the panel is a contiguous run of w */
            for (int64_t kk = 0; kk < k; kk++)
                memcpy(d + kk * NR, w + kk * n + p * NR, (size_t)cols * sizeof(float));
        }
    }
}

/* Where a panel's 32 columns land in c when they are not simply c + p * 32
 * (nat_pw_gemm_offsets with virtual rows): the lanes set in m (bit j: lane j
 * of 0..31) go to c + shift + lane, the lanes of one output row each. */
#define PW_CSEG_MAX 3 /* a panel spans at most 3 rows of >= 16 columns */
typedef struct pw_cseg {
    int64_t shift;
    uint32_t m;
} pw_cseg;

/* ---- 16 lanes (AVX-512F): a tile of MR rows x one whole panel ---- */

/* c[0..mr, 0..32) (=, or += when acc) a[0..mr, 0..kc) B, a[i, kk] at
 * a[i * si + kk * sk] (in place: si = lda, sk = 1; packed by pack_a: si = 1,
 * sk = MR); B's row kk (32 floats) at b + kk * NR (a KC block of a packed
 * panel) or, when koff is set, at b + koff[kk] (nat_pw_gemm_offsets); m: which
 * of the 32 columns exist. */
__attribute__((target("avx512f"), always_inline)) static inline void
micro(int mr, int64_t kc, const float *a, int64_t si, int64_t sk, const float *b,
      const int64_t *koff, float *c, int64_t ldc, uint32_t m, bool acc, const pw_cseg *cs, int ncs)
{
    __mmask16 m0 = (__mmask16)m, m1 = (__mmask16)(m >> 16);
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < mr) {
            c0[i] = c1[i] = _mm512_setzero_ps();
            /* the tile is read (acc) or written after the k loop: start its
             * lines on their way from L2/L3 now */
            _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
            _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
        }
    for (int64_t kk = 0; kk < kc; kk++) {
        __m512 b0, b1;
        if (koff) { /* only the call's columns are read: past them may be another tensor */
            b0 = _mm512_maskz_loadu_ps(m0, b + koff[kk]);
            b1 = _mm512_maskz_loadu_ps(m1, b + koff[kk] + 16);
        } else {
            b0 = _mm512_loadu_ps(b + kk * NR);
            b1 = _mm512_loadu_ps(b + kk * NR + 16);
        }
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++)
            if (i < mr) {
                __m512 av = _mm512_set1_ps(a[i * si + kk * sk]);
                c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
                c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
            }
    }
    if (cs) { /* the lanes go to their rows; the segments are disjoint */
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++)
            if (i < mr) {
                for (int g = 0; acc && g < ncs; g++) {
                    float *cg = c + i * ldc + cs[g].shift;
                    __mmask16 lo = (__mmask16)cs[g].m, hi = (__mmask16)(cs[g].m >> 16);
                    c0[i] = _mm512_add_ps(c0[i], _mm512_maskz_loadu_ps(lo, cg));
                    c1[i] = _mm512_add_ps(c1[i], _mm512_maskz_loadu_ps(hi, cg + 16));
                }
                for (int g = 0; g < ncs; g++) {
                    float *cg = c + i * ldc + cs[g].shift;
                    _mm512_mask_storeu_ps(cg, (__mmask16)cs[g].m, c0[i]);
                    _mm512_mask_storeu_ps(cg + 16, (__mmask16)(cs[g].m >> 16), c1[i]);
                }
            }
        return;
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < mr) {
            float *ci = c + i * ldc;
            if (acc) {
                c0[i] = _mm512_add_ps(c0[i], _mm512_maskz_loadu_ps(m0, ci));
                c1[i] = _mm512_add_ps(c1[i], _mm512_maskz_loadu_ps(m1, ci + 16));
            }
            _mm512_mask_storeu_ps(ci, m0, c0[i]);
            _mm512_mask_storeu_ps(ci + 16, m1, c1[i]);
        }
}

/* ---- 8 lanes (AVX2 and FMA, the build's baseline): MR8 rows x half a panel ---- */

/* micro for 16 columns (a half panel) and at most MR8 rows, in 12 of the 16
 * ymm registers (2 weight vectors, 1 broadcast besides): b, c and the masks
 * (m, the segments' m) are the half's, its lane j column j of the half. */
static inline __attribute__((always_inline)) void
micro8(int mr, int64_t kc, const float *a, int64_t si, int64_t sk, const float *b,
       const int64_t *koff, float *c, int64_t ldc, uint32_t m, bool acc, const pw_cseg *cs, int ncs)
{
    __m256 c0[MR8], c1[MR8];
#pragma GCC unroll 6
    for (int i = 0; i < MR8; i++)
        if (i < mr) {
            c0[i] = c1[i] = _mm256_setzero_ps();
            _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        }
    __m256i k0 = nat_bits8(m), k1 = nat_bits8(m >> 8);
    bool whole = (m & 0xffff) == 0xffff;
    for (int64_t kk = 0; kk < kc; kk++) {
        __m256 b0, b1;
        if (koff && !whole) { /* only the call's columns are read */
            b0 = _mm256_maskload_ps(b + koff[kk], k0);
            b1 = _mm256_maskload_ps(b + koff[kk] + 8, k1);
        } else {
            const float *bk = koff ? b + koff[kk] : b + kk * NR;
            if (!koff) /* the half's line PFD8 rows on (64 of each 128 bytes) */
                _mm_prefetch((const char *)(bk + PFD8 * NR), _MM_HINT_T0);
            b0 = _mm256_loadu_ps(bk);
            b1 = _mm256_loadu_ps(bk + 8);
        }
#pragma GCC unroll 6
        for (int i = 0; i < MR8; i++)
            if (i < mr) {
                __m256 av = _mm256_broadcast_ss(a + i * si + kk * sk);
                c0[i] = _mm256_fmadd_ps(av, b0, c0[i]);
                c1[i] = _mm256_fmadd_ps(av, b1, c1[i]);
            }
    }
    if (cs) {
        for (int g = 0; g < ncs; g++) {
            __m256i lo = nat_bits8(cs[g].m), hi = nat_bits8(cs[g].m >> 8);
#pragma GCC unroll 6
            for (int i = 0; i < MR8; i++)
                if (i < mr) {
                    float *cg = c + i * ldc + cs[g].shift;
                    __m256 v0 = c0[i], v1 = c1[i];
                    if (acc) {
                        v0 = _mm256_add_ps(v0, _mm256_maskload_ps(cg, lo));
                        v1 = _mm256_add_ps(v1, _mm256_maskload_ps(cg + 8, hi));
                    }
                    _mm256_maskstore_ps(cg, lo, v0);
                    _mm256_maskstore_ps(cg + 8, hi, v1);
                }
        }
        return;
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR8; i++)
        if (i < mr) {
            float *ci = c + i * ldc;
            if (whole) {
                if (acc) {
                    c0[i] = _mm256_add_ps(c0[i], _mm256_loadu_ps(ci));
                    c1[i] = _mm256_add_ps(c1[i], _mm256_loadu_ps(ci + 8));
                }
                _mm256_storeu_ps(ci, c0[i]);
                _mm256_storeu_ps(ci + 8, c1[i]);
                continue;
            }
            if (acc) {
                c0[i] = _mm256_add_ps(c0[i], _mm256_maskload_ps(ci, k0));
                c1[i] = _mm256_add_ps(c1[i], _mm256_maskload_ps(ci + 8, k1));
            }
            _mm256_maskstore_ps(ci, k0, c0[i]);
            _mm256_maskstore_ps(ci + 8, k1, c1[i]);
        }
}

/* The mr values a row block ends with, a in place (lda) or packed (lda 0):
 * one instantiation each, so the tile stays in registers (mr and the strides
 * constants after inlining).  Two functions per width, for B in panels and B
 * through offsets, kept apart (noinline): inlined into one caller, GCC merged
 * the two into one loop that tested koff on every k step (3-5% slower). */
#define MR_CASE(r, ROWS, FN, KOFF, CS)                                                             \
    case r:                                                                                        \
        FN(r, kc, a, lda, 1, b, KOFF, c, ldc, m, acc, CS, ncs);                                    \
        break;                                                                                     \
    case ROWS + r:                                                                                 \
        FN(r, kc, a, 1, ROWS, b, KOFF, c, ldc, m, acc, CS, ncs);                                   \
        break;
#define MR_SWITCH6(ROWS, FN, KOFF, CS)                                                             \
    MR_CASE(1, ROWS, FN, KOFF, CS)                                                                 \
    MR_CASE(2, ROWS, FN, KOFF, CS)                                                                 \
    MR_CASE(3, ROWS, FN, KOFF, CS)                                                                 \
    MR_CASE(4, ROWS, FN, KOFF, CS)                                                                 \
    MR_CASE(5, ROWS, FN, KOFF, CS)                                                                 \
    MR_CASE(6, ROWS, FN, KOFF, CS)
#define MR_SWITCH12(FN, KOFF, CS)                                                                  \
    switch (lda ? mr : MR + mr) {                                                                  \
        MR_SWITCH6(MR, FN, KOFF, CS)                                                               \
        MR_CASE(7, MR, FN, KOFF, CS)                                                               \
        MR_CASE(8, MR, FN, KOFF, CS)                                                               \
        MR_CASE(9, MR, FN, KOFF, CS)                                                               \
        MR_CASE(10, MR, FN, KOFF, CS)                                                              \
        MR_CASE(11, MR, FN, KOFF, CS)                                                              \
        MR_CASE(12, MR, FN, KOFF, CS)                                                              \
    default:                                                                                       \
        break;                                                                                     \
    }
#define MR_SWITCH8(KOFF, CS)                                                                       \
    switch (lda ? mr : MR8 + mr) {                                                                 \
        MR_SWITCH6(MR8, micro8, KOFF, CS)                                                          \
    default:                                                                                       \
        break;                                                                                     \
    }

__attribute__((target("avx512f"), noinline)) static void
micro_panels16(int mr, int64_t kc, const float *a, int64_t lda, const float *b, float *c,
               int64_t ldc, uint32_t m, bool acc)
{
    const int ncs = 0;
    MR_SWITCH12(micro, NULL, NULL)
}

__attribute__((target("avx512f"), noinline)) static void
micro_offsets16(int mr, int64_t kc, const float *a, int64_t lda, const float *b,
                const int64_t *koff, float *c, int64_t ldc, uint32_t m, bool acc, const pw_cseg *cs,
                int ncs)
{
    MR_SWITCH12(micro, koff, cs)
}

/* The 8-lane tile covers half a panel: a panel is its two halves, the second
 * where any of its columns exist. */
__attribute__((noinline)) static void micro_panels8(int mr, int64_t kc, const float *a, int64_t lda,
                                                    const float *b, float *c, int64_t ldc,
                                                    uint32_t mm, bool acc)
{
    const int ncs = 0;
    for (int h = 0; h < 2 && (mm >> 16 * h) & 0xffff; h++, b += 16, c += 16) {
        uint32_t m = (mm >> 16 * h) & 0xffff;
        MR_SWITCH8(NULL, NULL)
    }
}

__attribute__((noinline)) static void
micro_offsets8(int mr, int64_t kc, const float *a, int64_t lda, const float *b, const int64_t *koff,
               float *c, int64_t ldc, uint32_t mm, bool acc, const pw_cseg *csp, int ncsp)
{
    for (int h = 0; h < 2 && (mm >> 16 * h) & 0xffff; h++, b += 16, c += 16) {
        uint32_t m = (mm >> 16 * h) & 0xffff;
        pw_cseg half[PW_CSEG_MAX], *cs = NULL; /* the segments' lanes in this half */
        int ncs = 0;
        for (int g = 0; csp && g < ncsp; g++)
            if ((csp[g].m >> 16 * h) & 0xffff)
                half[ncs++] = (pw_cseg){csp[g].shift, (csp[g].m >> 16 * h) & 0xffff};
        if (csp)
            cs = half;
        MR_SWITCH8(koff, cs)
    }
}
#undef MR_SWITCH8
#undef MR_SWITCH12
#undef MR_SWITCH6
#undef MR_CASE

/* One tile through the width this process runs (fb_cpu_wide). */
static inline void micro_panels(bool wide, int mr, int64_t kc, const float *a, int64_t lda,
                                const float *b, float *c, int64_t ldc, uint32_t m, bool acc)
{
    if (wide)
        micro_panels16(mr, kc, a, lda, b, c, ldc, m, acc);
    else
        micro_panels8(mr, kc, a, lda, b, c, ldc, m, acc);
}

static inline void micro_offsets(bool wide, int mr, int64_t kc, const float *a, int64_t lda,
                                 const float *b, const int64_t *koff, float *c, int64_t ldc,
                                 uint32_t m, bool acc, const pw_cseg *cs, int ncs)
{
    if (wide)
        micro_offsets16(mr, kc, a, lda, b, koff, c, ldc, m, acc, cs, ncs);
    else
        micro_offsets8(mr, kc, a, lda, b, koff, c, ldc, m, acc, cs, ncs);
}

/* ap[kk * rb + i] = a[i * lda + kk] for the mr rows and kc columns at a, rb
 * the tile's rows (MR or MR8). */
static void pack_a(const float *a, int64_t lda, int mr, int64_t kc, int rb, float *ap)
{
    for (int i = 0; i < mr; i++)
        for (int64_t kk = 0; kk < kc; kk++)
            ap[kk * rb + i] = a[i * lda + kk];
}

/* Whether rb rows lda floats apart crowd a few L1 sets: more than 3 of them
 * in one set (of this CPU class's 64 sets of 64-byte lines, 8 ways) with a
 * panel's lines besides.  Then, and when the copy is shared by enough panels,
 * the rows are copied (pack_a); else read in place, which is faster (the copy
 * cost 4-10% at k = 768 and on attention's small GEMMs). */
#define L1_SETS           64
#define PACK_A_MIN_PANELS 3
static bool rows_alias(int64_t lda, int rb)
{
    int per_set[L1_SETS] = {0};
    for (int64_t i = 0; i < rb; i++)
        if (++per_set[(i * lda * (int64_t)sizeof(float) / 64) % L1_SETS] > 3)
            return true;
    return false;
}

/* Column mask of panel p of a call over columns [c0, c0 + cols): bit j for
 * column p * 32 + j. */
static uint32_t panel_mask(int64_t p, int64_t c0, int64_t cols)
{
    int64_t left = c0 + cols - p * NR; /* columns of this panel in the slice */
    return left >= 32 ? 0xffffffffu : (uint32_t)((1u << left) - 1);
}

/* The segments of panel p (pw_cseg) for a call through offsets: one when
 * columns map straight to c (vpitch 0), else one per virtual row the panel
 * touches, its pad columns (rlen .. vpitch of each row) dropped.  Returns how
 * many. */
static int panel_csegs(int64_t p, int64_t cols, int64_t vpitch, int64_t rlen, pw_cseg *cs)
{
    int n = 0;
    if (!vpitch) {
        cs[0] = (pw_cseg){0, panel_mask(p, 0, cols)};
        return 1;
    }
    int64_t v0 = p * NR, v1 = v0 + NR < cols ? v0 + NR : cols;
    for (int64_t r = v0 / vpitch; r * vpitch < v1; r++) {
        int64_t lo = r * vpitch > v0 ? r * vpitch : v0;
        int64_t hi = r * vpitch + rlen < v1 ? r * vpitch + rlen : v1;
        if (hi <= lo)
            continue;
        assert(n < PW_CSEG_MAX);
        uint32_t upto = hi - v0 >= 32 ? 0xffffffffu : (1u << (hi - v0)) - 1;
        cs[n++] = (pw_cseg){-r * (vpitch - rlen), upto & ~((1u << (lo - v0)) - 1)};
    }
    return n;
}

/* B read through offsets is unaligned and scattered over the input's rows:
 * there it pays to hold one panel's k block (32 x KC, from a few input rows)
 * in L1 while every block of rows of a passes, and read a from L2, as long as
 * a's k block fits this many floats (256 KiB).  While developing the stride-1
 * convolution path (3x3 on 64 channels at 56 x 56, one core) this order ran
 * 4% faster than rows outer; for 512 channels at 7 x 7 (a's block 512 KiB)
 * slower.  (That path now takes at most 64 output channels, so its calls
 * always come here.) */
#define OFFSETS_A_BLOCK_MAX (64 * 1024)

/* Panels of B per chunk on 8 lanes: the chunk's k block (32 x KC floats per
 * panel, 32 KiB) stays in L2 while every block of rows passes.  An 8-lane
 * tile has half the rows of a 16-lane one, so B streams twice as often per
 * multiply-add; from L3 (the whole call's k block, 1 MiB at n = 1024, past a
 * 512 KiB L2) it did not keep up: one core of an AMD EPYC 7003, m = 128,
 * n = 3072, k = 768, 52-64 GFLOP/s against 74-77 in chunks of 8 (2, 4 and
 * 16 no better beyond a noisy VM's noise). */
#ifndef PW_CHUNK8
#define PW_CHUNK8 8
#endif

/* pw_run's loop for B through offsets with panels outside, rows inside; the
 * epilogue then runs on the whole output (real_cols wide) once it is final. */
static void pw_run_panels_outer(bool wide, const float *a, int64_t lda, const float *b,
                                const int64_t *koff, float *c, int64_t ldc, int64_t rows, int64_t k,
                                int64_t cols, int64_t vpitch, int64_t rlen, int64_t real_cols,
                                const nat_epi *epi)
{
    int64_t panels = (cols + NR - 1) / NR;
    int rb = wide ? MR : MR8;
    int64_t kb = wide ? KC : KC8;
    for (int64_t k0 = 0; k0 < k; k0 += kb) {
        int64_t kc = k - k0 < kb ? k - k0 : kb;
        for (int64_t p = 0; p < panels; p++) {
            pw_cseg cs[PW_CSEG_MAX];
            int ncs = panel_csegs(p, cols, vpitch, rlen, cs);
            uint32_t m = panel_mask(p, 0, cols);
            for (int64_t i0 = 0; i0 < rows; i0 += rb) {
                int mr = rows - i0 < rb ? (int)(rows - i0) : rb;
                micro_offsets(wide, mr, kc, a + i0 * lda + k0, lda, b + p * NR, koff + k0,
                              c + i0 * ldc + p * NR, ldc, m, k0 > 0, cs, ncs);
            }
        }
    }
    nat_epi_apply(c, ldc, 0, 0, rows, real_cols, epi);
}

/* The driver of both entry points: B's row kk of panel p at
 * b + p * pstride + kk * NR, or at b + p * NR + koff[kk] when koff is set
 * (c0 0, columns mapped to c by vpitch and rlen: panel_csegs). */
static void pw_run(const float *a, int64_t lda, const float *b, int64_t pstride,
                   const int64_t *koff, float *c, int64_t ldc, int64_t rows, int64_t k, int64_t c0,
                   int64_t cols, int64_t vpitch, int64_t rlen, bool accumulate, const nat_epi *epi)
{
    float ap[MR * KC] __attribute__((aligned(64)));
    bool wide = fb_cpu_wide();
    int rb = wide ? MR : MR8;
    int64_t kb = wide ? KC : KC8;
    int64_t p0 = c0 / NR, p1 = (c0 + cols + NR - 1) / NR;
    bool packed = p1 - p0 >= PACK_A_MIN_PANELS && rows_alias(lda, rb);
    /* the output columns the epilogue covers: virtual rows without their pads */
    int64_t real_cols =
        vpitch ? cols / vpitch * rlen + (cols % vpitch < rlen ? cols % vpitch : rlen) : cols;

    if (koff && rows * kb <= OFFSETS_A_BLOCK_MAX) {
        pw_run_panels_outer(wide, a, lda, b, koff, c, ldc, rows, k, cols, vpitch, rlen, real_cols,
                            epi);
        return;
    }
    /* the panels a block of rows meets before the next block comes: all of
     * the call's for 16 lanes (KC x the call's columns, 1 MiB for n = 1024,
     * stays in a 2 MiB L2), PW_CHUNK8 for 8 lanes (see there) */
    int64_t chunk = wide || koff ? p1 - p0 : PW_CHUNK8;
    for (int64_t k0 = 0; k0 < k; k0 += kb) {
        int64_t kc = k - k0 < kb ? k - k0 : kb;
        bool acc = accumulate || k0 > 0;
        for (int64_t q0 = p0; q0 < p1; q0 += chunk) {
            int64_t q1 = q0 + chunk < p1 ? q0 + chunk : p1;
            /* the chunk's output columns, for the epilogue */
            int64_t e0 = q0 * NR > c0 ? q0 * NR : c0;
            int64_t e1 = q1 * NR < c0 + real_cols ? q1 * NR : c0 + real_cols;
            for (int64_t i0 = 0; i0 < rows; i0 += rb) {
                int mr = rows - i0 < rb ? (int)(rows - i0) : rb;
                const float *ai = a + i0 * lda + k0;
                if (packed)
                    pack_a(ai, lda, mr, kc, rb, ap);
                const float *aa = packed ? ap : ai;
                int64_t la = packed ? 0 : lda;
                for (int64_t p = q0; p < q1; p++) {
                    uint32_t m = panel_mask(p, c0, cols);
                    float *cp = c + i0 * ldc + p * NR;
                    if (koff) {
                        pw_cseg cs[PW_CSEG_MAX];
                        int ncs = panel_csegs(p, cols, vpitch, rlen, cs);
                        micro_offsets(wide, mr, kc, aa, la, b + p * NR, koff + k0, cp, ldc, m, acc,
                                      cs, ncs);
                    } else {
                        micro_panels(wide, mr, kc, aa, la, b + p * pstride + k0 * NR, cp, ldc, m,
                                     acc);
                    }
                }
                if (k0 + kc == k) /* the block's rows are final, and in cache */
                    nat_epi_apply(c + i0 * ldc + e0, ldc, i0, e0, mr, e1 - e0, epi);
            }
        }
    }
}

void nat_pw_gemm(const float *a, int64_t lda, const float *pw, float *c, int64_t ldc, int64_t rows,
                 int64_t k, int64_t c0, int64_t cols, bool accumulate, const nat_epi *epi)
{
    pw_run(a, lda, pw, k * NR, NULL, c, ldc, rows, k, c0, cols, 0, 0, accumulate, epi);
}

void nat_pw_gemm_offsets(const float *a, int64_t lda, const float *b, const int64_t *koff, float *c,
                         int64_t ldc, int64_t rows, int64_t k, int64_t cols, int64_t vpitch,
                         int64_t rlen, const nat_epi *epi)
{
    assert(vpitch == 0 || (vpitch >= 16 && rlen >= 1 && rlen <= vpitch));
    pw_run(a, lda, b, 0, koff, c, ldc, rows, k, 0, cols, vpitch, rlen, false, epi);
}
