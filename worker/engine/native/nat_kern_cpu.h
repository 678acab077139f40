/* nat_kern_cpu: the CPU backend's launch functions (nat_kernel_fn) for GEMMs with
 * epilogues, elementwise ops, reductions and normalizations, and the adapters that
 * call the conv and attention kernels of nat_kern.h.  Each reads its buffers from
 * the launch's p[] at its kind's slots and everything else from its descriptor
 * (nat_desc.h), whose kind the comment above it names.  Sizes are int64 element
 * counts, all row-major.
 *
 * Also the vectorizable math the kernels share (exp, erf, sigmoid, GELU), inline
 * here so that eager and fused kernels compute with exactly the same functions:
 * a fused kernel is faster because it moves less memory, never because it uses a
 * cheaper approximation. */
#ifndef NAT_KERN_CPU_H
#define NAT_KERN_CPU_H

#include <math.h>
#include <stdint.h>

#include "nat.h"
#include "nat_kern.h"

/* ---- math: branch-free so loops over them vectorize (AVX2) ---- */

/* exp(x) = 2^n * p(r), n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2],
 * p of degree 5 with p(0) = 1 (so exp(0) is exactly 1) and the other
 * coefficients fitted for least maximum relative error on that interval
 * (9.2e-8, 1.7e-7 once evaluated in float).  Every exponential of the CPU
 * kernels is this one: nat_expf in scalar loops, nat_exp8 and nat_exp16
 * (nat_vmath.h) on 8 and 16 lanes, the same operations lane for lane. */
#define NAT_EXP_C1 0.999999702f
#define NAT_EXP_C2 0.499991506f
#define NAT_EXP_C3 0.166676357f
#define NAT_EXP_C4 0.0418979302f
#define NAT_EXP_C5 0.00829031505f

/* exp(x) with relative error below 4e-7 where the result is a normal float
 * (2.1e-7 on [-20, 20]); 0 below about -87.7 (so -inf masks give exactly 0, and
 * NaN gives 0 in the vector forms); x clamped to [-88, 88], so the result and
 * 1 + it are finite. */
static inline float nat_expf(float x)
{
    float xc = x < -88.0f ? -88.0f : (x > 88.0f ? 88.0f : x);
    /* Round to nearest by the 1.5 * 2^23 trick: vectorizes everywhere.
     * fmaf, as the vector forms' FMAs: one rounding, whatever the including
     * file's contraction flags (the reduction needs it: xc - n * ln2 rounded
     * twice is off by up to 3e-6 relative near -87). */
    float n = fmaf(xc, 1.44269504f, 12582912.0f) - 12582912.0f;
    float r = fmaf(-n, 0.693147182f, xc);
    float p = NAT_EXP_C5;
    p = fmaf(p, r, NAT_EXP_C4);
    p = fmaf(p, r, NAT_EXP_C3);
    p = fmaf(p, r, NAT_EXP_C2);
    p = fmaf(p, r, NAT_EXP_C1);
    p = fmaf(p, r, 1.0f);
    /* n = -127 (x below about -87.7) makes the scale's bits 0: the result 0 */
    union {
        int32_t i;
        float f;
    } scale = {.i = ((int32_t)n + 127) << 23};
    return p * scale.f;
}

/* erf(x) with absolute error below 2e-7 (Abramowitz and Stegun 7.1.26 on |x|,
 * sign restored): the exact, erf-based GELU to float precision. */
static inline float nat_erff(float x)
{
    float ax = __builtin_fabsf(x);
    float t = 1.0f / (1.0f + 0.3275911f * ax);
    float p = 1.061405429f;
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    float y = 1.0f - p * t * nat_expf(-ax * ax);
    return __builtin_copysignf(y, x);
}

static inline float nat_gelu(float x)
{
    return 0.5f * x * (1.0f + nat_erff(x * 0.70710678118654752f));
}

static inline float nat_sigmoid(float x)
{
    return 1.0f / (1.0f + nat_expf(-x));
}

/* tanh(x) = 1 - 2 / (exp(2x) + 1): exact at the ends (+-1), nat_expf inside. */
static inline float nat_tanhf(float x)
{
    return 1.0f - 2.0f / (nat_expf(2.0f * x) + 1.0f);
}

static inline float nat_act_more(float x, int act)
{
    switch (act) {
    case NAT_ACT_RELU6:
        return x < 0.0f ? 0.0f : (x > 6.0f ? 6.0f : x);
    case NAT_ACT_SILU:
        return x * nat_sigmoid(x);
    case NAT_ACT_SIGMOID:
        return nat_sigmoid(x);
    case NAT_ACT_HARDSWISH: {
        float t = x + 3.0f;
        return x * (t < 0.0f ? 0.0f : (t > 6.0f ? 6.0f : t)) * (1.0f / 6.0f);
    }
    case NAT_ACT_HARDSIGMOID: {
        float t = x * (1.0f / 6.0f) + 0.5f;
        return t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
    }
    case NAT_ACT_TANH:
        return nat_tanhf(x);
    case NAT_ACT_GELU_TANH:
        return 0.5f * x * (1.0f + nat_tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
    default:
        return x;
    }
}

static inline float nat_act_apply(float x, int act)
{
    if (act == NAT_ACT_RELU)
        return x > 0.0f ? x : 0.0f;
    if (act == NAT_ACT_GELU)
        return nat_gelu(x);
    return nat_act_more(x, act);
}

/* o[j] = exp(x[j] * scale - m) for j < n (o may be x) and their sum: the
 * exponentials of every softmax, eager (the patterns' exp pass, the zoo's
 * softmax) and fused (the patterns' and the zoo's softmax, the attention
 * kernels' rows) alike, in nat_vmath.h's intrinsics where the build has them
 * (nat_kern_elem.c). */
/* The largest of x[0..n) (-inf for n = 0; a NaN passed over), on four
 * accumulators where the CPU has AVX2 (nat_kern_reduce.c): every softmax's
 * row max, eager, fused and the attention kernels'. */
float nat_row_max(const float *x, int64_t n);

float nat_exp_sum(const float *x, float scale, float m, float *o, int64_t n);

/* nat_exp_sum that also asks for next[0..n) to be brought into the cache, one
 * line per 16 floats it computes (next NULL: none): a row-wise kernel's next
 * row arrives while this one computes, where the hardware prefetcher, which
 * stops at each 4 KiB page, would fetch it only once asked (the softmax). */
float nat_exp_sum_pf(const float *x, float scale, float m, float *o, int64_t n, const float *next);

/* x[i] = act(x[i]) for i < n, vectorized, the activation (nat_act) chosen once
 * outside the loop (nat_kern_elem.c).  Epilogues call it on rows in cache. */
void nat_act_vec(float *x, int64_t n, int act);

/* The memory-bound kernels (elementwise, reductions, normalizations, the
 * attention's softmax) are built twice, for AVX-512 and for the build's
 * baseline (x86-64-v3), and the loader picks one per CPU (an ifunc): their
 * simd loops then run 16 lanes wide where the CPU has them.  Measured on the
 * dev box: the softmax pattern's fused kernel 1.86 -> 1.14-1.31 ms. */
#if defined(__x86_64__) && defined(__GNUC__)
#define NAT_SIMD_CLONES __attribute__((target_clones("avx512f", "default")))
#else
#define NAT_SIMD_CLONES
#endif

/* ---- convolution internals (nat_kern_conv.c, nat_kern_wino.c) ---- */

/* One nat_conv2d call's arguments. */
typedef struct nat_conv_args {
    const float *in, *w, *prep, *bias, *res;
    float *out;
    const nat_conv_shape *s;
    nat_act act;
    float *ws;
} nat_conv_args;

/* The input plane src (s->h x s->w) into dst, hp x wp with s->pad_h rows and
 * s->pad_w columns of zeros before it and zeros after it to fill. */
void nat_conv_pad_plane(float *dst, const float *src, const nat_conv_shape *s, int hp, int wp);

/* Whether nat_wino_conv takes shape s: 3x3, stride and dilation 1, groups 1,
 * at least 16 input and output channels and 32 tiles of 2x2 outputs, AVX-512
 * and not params.gemm "openblas". */
bool nat_wino_fits(const nat_conv_shape *s);
/* Workspace floats of nat_wino_conv (s finished, nat_wino_fits), prepared:
 * with a->prep set (else U is made in it). */
size_t nat_wino_workspace(const nat_conv_shape *s, bool prepared);
/* Floats of the transformed kernels U (a->prep). */
size_t nat_wino_prep_floats(const nat_conv_shape *s);
/* The path nat_conv2d takes for s (finished): Winograd, the depthwise loop,
 * our packed GEMM or OpenBLAS. */
nat_impl nat_conv2d_impl(const nat_conv_shape *s);
/* U of w for s. */
void nat_wino_prepare(const float *w, const nat_conv_shape *s, float *u);
/* The convolution of a (a->ws of nat_wino_workspace floats) by Winograd's
 * F(2x2, 3x3), on a->prep (NULL: U made in the workspace first). */
void nat_wino_conv(const nat_conv_args *a);

/* ---- linear and MLP on either GEMM (nat_kern_linear.c) ---- */

/* A weight: w as stored ([n, k] when wt, PyTorch's nn.Linear layout, c = a
 * w^T; else [k, n]) and pw, w packed by nat_pw_pack (NULL: OpenBLAS on w). */
typedef struct nat_weight {
    const float *w, *pw;
    bool wt;
} nat_weight;

/* c[m, n] = act(a[m, k] w + bias[n] + res[m, n]) (bias, res NULL: none),
 * OpenMP over tiles of columns x row blocks, each tile's epilogue while it is
 * in cache. */
void nat_linear(const float *a, nat_weight w, const float *bias, const float *res, float *c,
                int64_t m, int64_t n, int64_t k, int act);

/* The MLP's two schedules (nat_mlp_ws picks): the two GEMMs one after the
 * other split by columns, the hidden tensor in ws; or row blocks running the
 * whole MLP per thread through a per-thread hidden block of ws. */
enum { NAT_MLP_COLUMNS, NAT_MLP_ROWS };
typedef struct nat_mlp_dims {
    int64_t m, d, h; /* x [m, d] -> hidden [m, h] -> out [m, d] */
    int act;         /* the hidden activation */
    int64_t mode, rb, slots;
} nat_mlp_dims;
/* Workspace floats for m rows and hidden width h; sets mode, rb and slots. */
int64_t nat_mlp_ws(int64_t m, int64_t h, int64_t *mode, int64_t *rb, int64_t *slots);
/* out = act(x w1 + b1) w2 + b2 [+ res] (res [m, d], NULL: none), ws of
 * nat_mlp_ws's size. */
void nat_mlp(const float *x, nat_weight w1, const float *b1, nat_weight w2, const float *b2,
             const float *res, float *out, float *ws, const nat_mlp_dims *d);

/* ---- GEMM (nat_kern_gemm.c) ---- */

/* NAT_D_GEMM with b [k, n] (b_trans false), nb 1: c = a b.  PB: b packed
 * (NULL: OpenBLAS on b). */
void nat_k_sgemm(const nat_launch *l);

/* NAT_D_GEMM as nat_k_sgemm, c = act(a b + bias), by tiles so the epilogue
 * runs on each tile while it is in cache. */
void nat_k_gemm_epi(const nat_launch *l);

/* NAT_D_MLP, the whole MLP in one pass over row blocks (mode NAT_MLP_ROWS):
 * out = act(x w1 + b1) w2 + b2 with w1 [d,h], w2 [h,d]; the hidden block
 * lives in a per-thread workspace (slots * rb * h floats) and never reaches a
 * full [m,h] buffer. */
void nat_k_mlp_fused(const nat_launch *l);

/* Workspace floats nat_k_mlp_fused needs for m rows and h hidden units (with the
 * current OpenMP thread count); sets the launch's rb and slots. */
int64_t nat_mlp_fused_ws(int64_t m, int64_t h, int64_t *rb, int64_t *slots);

/* ---- elementwise (nat_kern_elem.c) ---- */

/* NAT_D_ELEM: out = a (op: nat_binop) b, b broadcast by bcast (unused for
 * SCALAR).  out may alias a. */
void nat_k_binary(const nat_launch *l);

/* NAT_D_ELEM: out = op(a) (nat_unop) over rows * cols elements. */
void nat_k_unary(const nat_launch *l);

/* NAT_D_ELEM: out = relu(a * alpha + beta) * sigmoid(b) + a in one pass. */
void nat_k_elem_chain(const nat_launch *l);

/* NAT_D_BN: inference batch norm over NCHW. */
void nat_k_batchnorm(const nat_launch *l);

/* ---- reductions and normalizations (nat_kern_reduce.c) ---- */

/* NAT_D_REDUCE: out[r] = reduce(x[r, :]) (op: nat_redop). */
void nat_k_row_reduce(const nat_launch *l);

/* NAT_D_ROWS: softmax along rows, one pass per row held in cache (scale and
 * causal unused: 1 and none). */
void nat_k_softmax(const nat_launch *l);

/* NAT_D_ROWS: out = layernorm(x [+ res]) * gamma + beta along rows. */
void nat_k_layernorm(const nat_launch *l);

/* ---- adapters to nat_kern.h (nat_kern_call.c) ---- */

/* NAT_D_CONV: out = act(conv2d(in, w) + bias + res), any shape nat_conv2d
 * takes; WS the workspace, PREP w made ready (NULL: none). */
void nat_k_conv2d(const nat_launch *l);

/* NAT_D_ATTN: the fused attention (nat_attention_fused). */
void nat_k_attention(const nat_launch *l);

/* NAT_D_GEMM, batched: c[b] = a[b] op(b[b]), no epilogue, OpenBLAS. */
void nat_k_bmm(const nat_launch *l);

#endif
