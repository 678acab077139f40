/* nat_kern: the CPU backend's compute kernels that the patterns' launches call.
 * Pure functions on host memory (float32), parallel with OpenMP, GEMMs through
 * OpenBLAS.  Every kernel is tested against a naive float64 reference. */
#ifndef NAT_KERN_H
#define NAT_KERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum nat_act {
    NAT_ACT_NONE,
    NAT_ACT_RELU,
    NAT_ACT_GELU, /* exact, erf-based, as torch.nn.GELU() */
    /* The model zoo's activations (nat_act_apply computes them all). */
    NAT_ACT_RELU6,
    NAT_ACT_SILU,
    NAT_ACT_SIGMOID,
    NAT_ACT_HARDSWISH,
    NAT_ACT_HARDSIGMOID,
    NAT_ACT_TANH,
    NAT_ACT_GELU_TANH, /* tanh approximation, GPT-2's gelu_new */
} nat_act;

/* ---- convolution (nat_kern_conv.c) ---- */

/* ---- GEMM epilogue (nat_kern_elem.c) ---- */

/* What a GEMM's output gets while it is in cache: c = act(c + bias + res).
 * bias is indexed by column (a linear's) or, when bias_rows, by row (a
 * convolution's, one per output channel); res is laid out as c with row
 * stride ldr.  Both are relative to the GEMM's output origin; NULL: none. */
typedef struct nat_epi {
    const float *bias;
    bool bias_rows;
    const float *res;
    int64_t ldr;
    int act; /* nat_act */
} nat_epi;

/* Applies e (NULL: nothing) to rows x cols of the GEMM's output at c (row
 * stride ldc), c being the output's element (r0, c0). */
void nat_epi_apply(float *c, int64_t ldc, int64_t r0, int64_t c0, int64_t rows, int64_t cols,
                   const nat_epi *e);

/* ---- GEMM against a weight packed once (nat_kern_pgemm.c) ---- */

/* Whether the 16-lane kernels run here: AVX-512F, and FUSIONBENCH_NATIVE_ISA
 * not "avx2" (fb_cpu.h); callers use 8 lanes if not. */
bool nat_v16_available(void);
/* Whether a job that leaves params.gemm to us ("auto") runs our packed GEMM
 * (the convolutions, the linear layers; the attention's GEMMs always follow
 * this): on 16 lanes.  On 8 OpenBLAS, unless the job asks for "packed": on
 * one core of an AMD EPYC 7003 (AVX2, a shared VM) ours ran 5-15% behind
 * OpenBLAS on BERT's GEMMs and 10-35% on convolutions with a long reduction
 * at 14 x 14 and 28 x 28 (3x3 on 128 and 256 channels), ahead at 7 x 7 and on
 * short reductions (16 -> 96 channels at 112 x 112); whole models, means of
 * alternating runs: resnet50 10% and bert_base 5% slower, mobilenet_v2 5%
 * and efficientnet_b0 8% faster (docs/BENCHMARKS.md). */
bool nat_pw_default(void);
/* Floats of the packed form of an n-column weight with k rows of reduction. */
int64_t nat_pw_floats(int64_t n, int64_t k);
/* Packs w ([n, k] when w_trans, PyTorch's nn.Linear layout; else [k, n]) into
 * dst (nat_pw_floats(n, k) floats): panels of 32 columns, zero-padded. */
void nat_pw_pack(const float *w, bool w_trans, int64_t n, int64_t k, float *dst);
/* c[r, c0 .. c0+cols) (+)= sum_q a[r, q] W[q, col] for r < rows (added to c
 * when accumulate), then the epilogue epi (NULL: none) on each block of rows
 * while it is in L1; single-threaded; pw packed by nat_pw_pack (or in its
 * layout), c0 a multiple of 32, lda/ldc the row strides, k >= 1. */
void nat_pw_gemm(const float *a, int64_t lda, const float *pw, float *c, int64_t ldc, int64_t rows,
                 int64_t k, int64_t c0, int64_t cols, bool accumulate, const nat_epi *epi);
/* The same GEMM with B unpacked, read in place through a table: B's row q,
 * columns 0 .. cols, is the contiguous run at b + koff[q] (koff has k
 * entries); nothing past a run is read.  c[r, col] = sum_q a[r, q] B[q, col],
 * then epi.  With vpitch 0 column col is c[r * ldc + col]; else the columns
 * are "virtual rows" of vpitch (>= 16), of which the first rlen are kept:
 * column col lands at c[r * ldc + col / vpitch * rlen + col % vpitch] and is
 * dropped when col % vpitch >= rlen.  A convolution of stride 1 is such a
 * GEMM over its padded input (vpitch its padded width, rlen the output
 * width), with no im2col copy (nat_kern_conv.c). */
void nat_pw_gemm_offsets(const float *a, int64_t lda, const float *b, const int64_t *koff, float *c,
                         int64_t ldc, int64_t rows, int64_t k, int64_t cols, int64_t vpitch,
                         int64_t rlen, const nat_epi *epi);

typedef struct nat_conv_shape {
    int n, ci, h, w; /* input NCHW */
    int co, kh, kw;  /* output channels, kernel size */
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    int groups;  /* ci and co divisible by groups */
    int ho, wo;  /* output size: filled by nat_conv_shape_finish */
    bool blas;   /* the GEMMs on OpenBLAS (params.gemm "openblas"); else packed
                    panels for nat_pw_gemm */
    int threads; /* the threads its tiles and channel chunks are cut for: the
                    plan's; 0: nat_conv_shape_finish takes OpenMP's now */
} nat_conv_shape;

/* Computes ho and wo, and threads where it is 0 (omp_get_max_threads, at most
 * the processors); returns false when the shape is impossible (non-positive
 * output, groups not dividing channels). */
bool nat_conv_shape_finish(nat_conv_shape *s);

/* Floats of workspace nat_conv2d needs (im2col, packing, Winograd's tiles),
 * 0 when none; prepared: the calls pass w made ready (nat_conv2d_prepare),
 * which then need not be made in the workspace. */
size_t nat_conv2d_workspace(const nat_conv_shape *s, bool prepared);

/* out[n,co,ho,wo] = act(conv(in, w) + bias[co] + residual[n,co,ho,wo]).
 * w is [co, ci/groups, kh, kw]; prep is w made ready by nat_conv2d_prepare
 * (NULL: made in the workspace on every call); bias and residual may be NULL;
 * workspace holds nat_conv2d_workspace(s, prep != NULL) floats (may be NULL when that is
 * 0).  The epilogue (bias, residual, act) runs on each output tile while it is
 * in cache: with bias == residual == NULL and act == NONE this is a bare
 * convolution. */
void nat_conv2d(const float *in, const float *w, const float *prep, const float *bias,
                const float *residual, float *out, const nat_conv_shape *s, nat_act act,
                float *workspace);

/* Floats of w made ready for s once, when the plan is built (Winograd's
 * transformed kernels), or 0 when the path for s uses w as it is. */
size_t nat_conv2d_prep_floats(const nat_conv_shape *s);
/* Makes w ready for s into prep (nat_conv2d_prep_floats(s) floats). */
void nat_conv2d_prepare(const float *w, const nat_conv_shape *s, float *prep);

/* ---- attention (nat_kern_attn.c) ---- */

/* Fused attention: o = softmax(scale * q k^T [+ causal mask]) v for q, k, v, o of
 * shape [bh, s, d] (bh = batch * heads), tiled with an online softmax so the
 * s x s scores never reach memory. */
void nat_attention_fused(const float *q, const float *k, const float *v, float *o, int bh, int s,
                         int d, float scale, bool causal);

/* Batched matmul for the eager path: c[b] = a[b] (m x k) * op(b[b]) with op the
 * transpose when trans_b (b is then n x k), all row-major, batch count nb. */
void nat_bmm(const float *a, const float *b, float *c, int nb, int m, int n, int k, bool trans_b);

#endif
