/* nat_kern_elem: elementwise launches.  The eager ones do one op per full pass
 * over memory, as PyTorch eager does; the element chain does all of its ops in
 * one pass.  Loops are written per (op, broadcast) so each one vectorizes. */
#include <math.h>

#include "nat_kern_cpu.h"
#include "nat_vmath.h"

/* A binary op as a loop over a contiguous range with operand b indexed by expr;
 * the macro keeps one vectorizable loop per op instead of a switch per element. */
#define BIN_LOOP(OPEXPR)                                                                           \
    do {                                                                                           \
        switch (op) {                                                                              \
        case NAT_ADD:                                                                              \
            _Pragma("omp simd") for (int64_t j = 0; j < cols; j++) o[j] = x[j] + (OPEXPR);         \
            break;                                                                                 \
        case NAT_SUB:                                                                              \
            _Pragma("omp simd") for (int64_t j = 0; j < cols; j++) o[j] = x[j] - (OPEXPR);         \
            break;                                                                                 \
        case NAT_MUL:                                                                              \
            _Pragma("omp simd") for (int64_t j = 0; j < cols; j++) o[j] = x[j] * (OPEXPR);         \
            break;                                                                                 \
        default:                                                                                   \
            _Pragma("omp simd") for (int64_t j = 0; j < cols; j++) o[j] = x[j] / (OPEXPR);         \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* One row of out = a (op) b, b already positioned for the row. */
static void bin_row(int op, int bc, const float *x, const float *y, float s, float *o, int64_t cols)
{
    if (bc == NAT_BC_FULL || bc == NAT_BC_COL || bc == NAT_BC_TILE)
        BIN_LOOP(y[j]);
    else
        BIN_LOOP(s);
}

/* Splits a FULL or SCALAR op on [rows, cols] into chunks of this many elements so
 * that a single long row (n x 1 views) still spreads over the threads. */
#define ELEM_CHUNK 16384

NAT_SIMD_CLONES void nat_k_binary(const nat_launch *l)
{
    const nat_elem_desc *e = &l->d.elem;
    const float *a = l->p[NAT_ELEM_A], *b = l->p[NAT_ELEM_B];
    float *out = l->p[NAT_ELEM_OUT];
    int op = e->op, bc = e->bcast;
    int64_t rows = e->rows, cols = e->cols, period = e->period;
    if (bc == NAT_BC_FULL || bc == NAT_BC_SCALAR) {
        int64_t n = rows * cols, nch = (n + ELEM_CHUNK - 1) / ELEM_CHUNK;
#pragma omp parallel for schedule(static)
        for (int64_t c = 0; c < nch; c++) {
            int64_t j0 = c * ELEM_CHUNK, len = n - j0 < ELEM_CHUNK ? n - j0 : ELEM_CHUNK;
            bin_row(op, bc, a + j0, b ? b + j0 : NULL, e->scalar, out + j0, len);
        }
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *y =
            bc == NAT_BC_COL ? b : (bc == NAT_BC_TILE ? b + (r % period) * cols : NULL);
        float s = bc == NAT_BC_ROW ? b[r] : 0.0f;
        bin_row(op, bc == NAT_BC_ROW ? NAT_BC_SCALAR : bc, a + r * cols, y, s, out + r * cols,
                cols);
    }
}

float nat_exp_sum(const float *x, float scale, float m, float *o, int64_t n)
{
    return nat_exp_sum_pf(x, scale, m, o, n, NULL);
}

#ifdef NAT_VMATH
/* nat_exp_sum_pf on 16 lanes (AVX-512F; nat_v16_available()). */
NAT_AVX512 static float exp_sum16(const float *x, float scale, float m, float *o, int64_t n,
                                  const float *next)
{
    const __m512 vs = _mm512_set1_ps(scale), vm = _mm512_set1_ps(m);
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        if (next)
            _mm_prefetch((const char *)(next + i), _MM_HINT_T0);
        __m512 e = nat_exp16(_mm512_fmsub_ps(_mm512_loadu_ps(x + i), vs, vm));
        _mm512_storeu_ps(o + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    if (i < n) {
        __mmask16 mk = (__mmask16)((1u << (n - i)) - 1u);
        __m512 e = nat_exp16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(mk, x + i), vs, vm));
        e = _mm512_maskz_mov_ps(mk, e);
        _mm512_mask_storeu_ps(o + i, mk, e);
        acc = _mm512_add_ps(acc, e);
    }
    return _mm512_reduce_add_ps(acc);
}
#endif

float nat_exp_sum_pf(const float *x, float scale, float m, float *o, int64_t n, const float *next)
{
#ifdef NAT_VMATH
    if (nat_v16_available())
        return exp_sum16(x, scale, m, o, n, next);
    const __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        if (next && (i & 15) == 0)
            _mm_prefetch((const char *)(next + i), _MM_HINT_T0);
        __m256 e = nat_exp8(_mm256_fmsub_ps(_mm256_loadu_ps(x + i), vs, vm));
        _mm256_storeu_ps(o + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (i < n) {
        __m256i mk = nat_lanes8(n - i);
        __m256 e = nat_exp8(_mm256_fmsub_ps(_mm256_maskload_ps(x + i, mk), vs, vm));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(mk));
        _mm256_maskstore_ps(o + i, mk, e);
        acc = _mm256_add_ps(acc, e);
    }
    return nat_hsum8(acc);
#else
    (void)next;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; j++) {
        o[j] = nat_expf(x[j] * scale - m);
        s += o[j];
    }
    return s;
#endif
}

static void un_range(int op, const float *x, float *o, int64_t n)
{
    switch (op) {
    case NAT_RELU:
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            o[j] = x[j] > 0.0f ? x[j] : 0.0f;
        break;
    case NAT_GELU:
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            o[j] = nat_gelu(x[j]);
        break;
    case NAT_SIGMOID:
#ifdef NAT_VMATH /* as the element chain's (nat_vmath.h) */
        nat_vsigmoid8(x, o, n);
#else
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            o[j] = nat_sigmoid(x[j]);
#endif
        break;
    case NAT_EXP: /* the softmax's exp (x * 1 - 0 is x) */
        (void)nat_exp_sum(x, 1.0f, 0.0f, o, n);
        break;
    default:
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            o[j] = 1.0f / sqrtf(x[j]);
        break;
    }
}

NAT_SIMD_CLONES void nat_k_unary(const nat_launch *l)
{
    const float *x = l->p[NAT_ELEM_A];
    float *out = l->p[NAT_ELEM_OUT];
    int op = l->d.elem.op;
    int64_t n = l->d.elem.rows * l->d.elem.cols, nch = (n + ELEM_CHUNK - 1) / ELEM_CHUNK;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nch; c++) {
        int64_t j0 = c * ELEM_CHUNK, len = n - j0 < ELEM_CHUNK ? n - j0 : ELEM_CHUNK;
        un_range(op, x + j0, out + j0, len);
    }
}

#ifdef NAT_VMATH
/* The chain over [0, n) on 8 lanes, its sigmoid the eager pass's; with
 * stream, the stores bypass the caches (out 32-byte aligned) and the inputs'
 * lines one page ahead are asked for (x and y hold `valid` floats from where
 * the chunk starts): the hardware prefetcher stops at each 4 KiB page, and
 * this kernel's 201 MB at batch 1 went from 8.19 to 5.82 ms with it (two
 * threads, docs/BENCHMARKS.md). */
static void chain8(const float *x, const float *y, float a, float b, float *out, int64_t n,
                   bool stream, int64_t valid)
{
    const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b), zero = _mm256_setzero_ps();
    int64_t i = 0, pf_end = stream ? valid - NAT_PF_AHEAD : 0;
    for (; i + 8 <= n; i += 8) {
        if ((i & 15) == 0 && i < pf_end) {
            _mm_prefetch((const char *)(x + i + NAT_PF_AHEAD), _MM_HINT_T0);
            _mm_prefetch((const char *)(y + i + NAT_PF_AHEAD), _MM_HINT_T0);
        }
        __m256 xv = _mm256_loadu_ps(x + i);
        __m256 t = _mm256_max_ps(_mm256_fmadd_ps(xv, va, vb), zero);
        __m256 s = nat_sig8(_mm256_loadu_ps(y + i), _mm256_set1_ps(1.0f));
        if (stream)
            _mm256_stream_ps(out + i, _mm256_fmadd_ps(t, s, xv));
        else
            _mm256_storeu_ps(out + i, _mm256_fmadd_ps(t, s, xv));
    }
    if (stream)
        _mm_sfence(); /* the streamed stores ordered before the loop's end */
    if (i < n) {
        __m256i m = nat_lanes8(n - i);
        __m256 xv = _mm256_maskload_ps(x + i, m);
        __m256 t = _mm256_max_ps(_mm256_fmadd_ps(xv, va, vb), zero);
        __m256 s = nat_sig8(_mm256_maskload_ps(y + i, m), _mm256_set1_ps(1.0f));
        _mm256_maskstore_ps(out + i, m, _mm256_fmadd_ps(t, s, xv));
    }
}
#endif

NAT_SIMD_CLONES void nat_k_elem_chain(const nat_launch *l)
{
    const float *x = l->p[NAT_ELEM_A], *y = l->p[NAT_ELEM_B];
    float *out = l->p[NAT_ELEM_OUT];
    int64_t n = l->d.elem.rows * l->d.elem.cols;
    float a = l->d.elem.alpha, b = l->d.elem.beta;
#ifdef NAT_VMATH
    int64_t nch = (n + ELEM_CHUNK - 1) / ELEM_CHUNK;
    bool stream = nat_stream_out(out, n);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nch; c++) {
        int64_t j0 = c * ELEM_CHUNK, len = n - j0 < ELEM_CHUNK ? n - j0 : ELEM_CHUNK;
        chain8(x + j0, y + j0, a, b, out + j0, len, stream, n - j0);
    }
#else
#pragma omp parallel for simd schedule(static)
    for (int64_t j = 0; j < n; j++) {
        float t = x[j] * a + b;
        t = t > 0.0f ? t : 0.0f;
        out[j] = t * nat_sigmoid(y[j]) + x[j];
    }
#endif
}

NAT_SIMD_CLONES void nat_k_batchnorm(const nat_launch *l)
{
    const float *x = l->p[NAT_BN_X], *mean = l->p[NAT_BN_MEAN], *var = l->p[NAT_BN_VAR];
    const float *gamma = l->p[NAT_BN_GAMMA], *beta = l->p[NAT_BN_BETA];
    float *out = l->p[NAT_BN_OUT];
    int64_t n = l->d.bn.n, c = l->d.bn.c, hw = l->d.bn.hw;
    float eps = l->d.bn.eps;
#pragma omp parallel for schedule(static)
    for (int64_t nc = 0; nc < n * c; nc++) {
        int64_t ch = nc % c;
        float sc = gamma[ch] / sqrtf(var[ch] + eps);
        float sh = beta[ch] - mean[ch] * sc;
        const float *xi = x + nc * hw;
        float *o = out + nc * hw;
#pragma omp simd
        for (int64_t j = 0; j < hw; j++)
            o[j] = xi[j] * sc + sh;
    }
}

/* One simd loop per activation, chosen before the loop: with the activation a
 * runtime value inside the loop, GCC if-converts the switch and evaluates every
 * activation (several exponentials) for each element. */
#define ACT_LOOP(expr)                                                                             \
    do {                                                                                           \
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++)                                        \
        {                                                                                          \
            float v = x[j];                                                                        \
            x[j] = (expr);                                                                         \
        }                                                                                          \
    } while (0)

NAT_SIMD_CLONES static void act_loops(float *x, int64_t n, int act)
{
    switch (act) {
    case NAT_ACT_NONE:
        return;
    case NAT_ACT_RELU:
        ACT_LOOP(v > 0.0f ? v : 0.0f);
        return;
    case NAT_ACT_GELU:
        ACT_LOOP(nat_gelu(v));
        return;
    case NAT_ACT_RELU6:
        ACT_LOOP(nat_act_more(v, NAT_ACT_RELU6));
        return;
    case NAT_ACT_SILU:
        ACT_LOOP(nat_act_more(v, NAT_ACT_SILU));
        return;
    case NAT_ACT_SIGMOID:
        ACT_LOOP(nat_sigmoid(v));
        return;
    case NAT_ACT_HARDSWISH:
        ACT_LOOP(nat_act_more(v, NAT_ACT_HARDSWISH));
        return;
    case NAT_ACT_HARDSIGMOID:
        ACT_LOOP(nat_act_more(v, NAT_ACT_HARDSIGMOID));
        return;
    case NAT_ACT_TANH:
        ACT_LOOP(nat_tanhf(v));
        return;
    default:
        ACT_LOOP(nat_act_more(v, act));
        return;
    }
}

#ifdef NAT_VMATH
/* nat_act8/nat_act16 over x[0..n), the tail masked; one loop per activation,
 * each with its activation a constant (a switch inside the loop, on a
 * runtime act, ran SiLU 1.4x slower). */
#define VACT_CASES(LOOP)                                                                           \
    switch (act) {                                                                                 \
    case NAT_ACT_RELU6:                                                                            \
        LOOP(NAT_ACT_RELU6);                                                                       \
        break;                                                                                     \
    case NAT_ACT_SILU:                                                                             \
        LOOP(NAT_ACT_SILU);                                                                        \
        break;                                                                                     \
    case NAT_ACT_SIGMOID:                                                                          \
        LOOP(NAT_ACT_SIGMOID);                                                                     \
        break;                                                                                     \
    case NAT_ACT_HARDSWISH:                                                                        \
        LOOP(NAT_ACT_HARDSWISH);                                                                   \
        break;                                                                                     \
    case NAT_ACT_HARDSIGMOID:                                                                      \
        LOOP(NAT_ACT_HARDSIGMOID);                                                                 \
        break;                                                                                     \
    default: /* not nat_vact_has's: nat_act_vec never sends it */                                  \
        break;                                                                                     \
    }

#define V16_LOOP(A)                                                                                \
    do {                                                                                           \
        for (; i + 16 <= n; i += 16)                                                               \
            _mm512_storeu_ps(x + i, nat_act16(_mm512_loadu_ps(x + i), A));                         \
        if (i < n) {                                                                               \
            __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);                                       \
            _mm512_mask_storeu_ps(x + i, m, nat_act16(_mm512_maskz_loadu_ps(m, x + i), A));        \
        }                                                                                          \
    } while (0)

#define V8_LOOP(A)                                                                                 \
    do {                                                                                           \
        for (; i + 8 <= n; i += 8)                                                                 \
            _mm256_storeu_ps(x + i, nat_act8(_mm256_loadu_ps(x + i), A));                          \
        if (i < n) {                                                                               \
            __m256i m = nat_lanes8(n - i);                                                         \
            _mm256_maskstore_ps(x + i, m, nat_act8(_mm256_maskload_ps(x + i, m), A));              \
        }                                                                                          \
    } while (0)

NAT_AVX512 static void act_vec16(float *x, int64_t n, int act)
{
    int64_t i = 0;
    VACT_CASES(V16_LOOP)
}

static void act_vec8(float *x, int64_t n, int act)
{
    int64_t i = 0;
    VACT_CASES(V8_LOOP)
}

/* act over rows x cols at x (row stride ldx), for short rows apart from
 * each other (a GEMM epilogue's block of rows, each a tile's few columns of
 * an output plane): four rows' vectors at a time, four independent exp
 * chains.  One call per row of 28 floats left each call's two vectors
 * waiting on their own exp's latency: a 1x1 convolution 320 -> 1280 at 7 x 7
 * with SiLU fused ran 0.46 ms against 0.40 for the convolution then the
 * eager SiLU pass (one thread).  ROWS4 reads x, ldx, rows, the column j and
 * its lane mask m from the loop around it. */
#define ROWS4(LOAD, ACT, STORE, A)                                                                 \
    do {                                                                                           \
        int64_t r = 0;                                                                             \
        for (; r + 4 <= rows; r += 4) {                                                            \
            float *p = x + r * ldx + j;                                                            \
            V v0 = LOAD(p), v1 = LOAD(p + ldx), v2 = LOAD(p + 2 * ldx), v3 = LOAD(p + 3 * ldx);    \
            v0 = ACT(v0, A);                                                                       \
            v1 = ACT(v1, A);                                                                       \
            v2 = ACT(v2, A);                                                                       \
            v3 = ACT(v3, A);                                                                       \
            STORE(p, v0);                                                                          \
            STORE(p + ldx, v1);                                                                    \
            STORE(p + 2 * ldx, v2);                                                                \
            STORE(p + 3 * ldx, v3);                                                                \
        }                                                                                          \
        for (; r < rows; r++) {                                                                    \
            float *p = x + r * ldx + j;                                                            \
            STORE(p, ACT(LOAD(p), A));                                                             \
        }                                                                                          \
    } while (0)

#define V16_LD(p)    _mm512_maskz_loadu_ps(m, (p))
#define V16_ST(p, v) _mm512_mask_storeu_ps((p), m, (v))
#define V16_ROWS(A)                                                                                \
    do {                                                                                           \
        for (int64_t j = 0; j < cols; j += 16) {                                                   \
            __mmask16 m =                                                                          \
                cols - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (cols - j)) - 1u);         \
            ROWS4(V16_LD, nat_act16, V16_ST, A);                                                   \
        }                                                                                          \
    } while (0)

#define V8_LD(p)    _mm256_maskload_ps((p), m)
#define V8_ST(p, v) _mm256_maskstore_ps((p), m, (v))
#define V8_ROWS(A)                                                                                 \
    do {                                                                                           \
        for (int64_t j = 0; j < cols; j += 8) {                                                    \
            __m256i m = nat_lanes8(cols - j < 8 ? cols - j : 8);                                   \
            ROWS4(V8_LD, nat_act8, V8_ST, A);                                                      \
        }                                                                                          \
    } while (0)

NAT_AVX512 static void act_rows16(float *x, int64_t ldx, int64_t rows, int64_t cols, int act)
{
    typedef __m512 V;
    VACT_CASES(V16_ROWS)
}

static void act_rows8(float *x, int64_t ldx, int64_t rows, int64_t cols, int act)
{
    typedef __m256 V;
    VACT_CASES(V8_ROWS)
}
#endif

/* Rows shorter than this take act_rows's interleaved path, this many rows
 * at a time (16 rows of 127 floats: 8 KiB, in L1). */
#define ACT_ROWS_COLS  128
#define ACT_ROWS_BLOCK 16

static void act_rows(float *x, int64_t ldx, int64_t rows, int64_t cols, int act)
{
#ifdef NAT_VMATH
    if (nat_vact_has(act) && cols < ACT_ROWS_COLS) {
        if (nat_v16_available())
            act_rows16(x, ldx, rows, cols, act);
        else
            act_rows8(x, ldx, rows, cols, act);
        return;
    }
#endif
    for (int64_t r = 0; r < rows; r++)
        nat_act_vec(x + r * ldx, cols, act);
}

void nat_act_vec(float *x, int64_t n, int act)
{
    if (act == NAT_ACT_NONE || n <= 0)
        return;
#ifdef NAT_VMATH
    if (nat_vact_has(act)) {
        if (nat_v16_available())
            act_vec16(x, n, act);
        else
            act_vec8(x, n, act);
        return;
    }
#endif
    act_loops(x, n, act);
}

/* Rows of the epilogue whose activation runs as one nat_act_vec call where
 * they lie end to end (ldc == cols): an SE block's 1x1 convolution on a 1x1
 * plane has one column per row, and a call per value made its fused conv +
 * sigmoid 2x slower than the eager conv then sigmoid (1152 channels: 0.059
 * against 0.032 ms, efficientnet_b0, one thread).  2048 floats stay in L1. */
#define EPI_ACT_BLOCK 2048

NAT_SIMD_CLONES void nat_epi_apply(float *c, int64_t ldc, int64_t r0, int64_t c0, int64_t rows,
                                   int64_t cols, const nat_epi *e)
{
    if (!e || (!e->bias && !e->res && e->act == NAT_ACT_NONE))
        return;
    const float *bc = e->bias && !e->bias_rows ? e->bias + c0 : NULL;
    int64_t per = ldc == cols && cols > 0 && cols < EPI_ACT_BLOCK ? EPI_ACT_BLOCK / cols : 1;
    for (int64_t r = 0; r < rows; r++) {
        float *x = c + r * ldc;
        float br = e->bias && e->bias_rows ? e->bias[r0 + r] : 0.0f;
        const float *rr = e->res ? e->res + (r0 + r) * e->ldr + c0 : NULL;
        if (bc) {
#pragma omp simd
            for (int64_t j = 0; j < cols; j++)
                x[j] += bc[j];
        }
        if (rr) {
#pragma omp simd
            for (int64_t j = 0; j < cols; j++)
                x[j] += br + rr[j];
        } else if (br != 0.0f) {
#pragma omp simd
            for (int64_t j = 0; j < cols; j++)
                x[j] += br;
        }
        /* the rows since the last call are still in L1; short rows apart
         * from each other go ACT_ROWS_BLOCK at a time */
        int64_t every = per > 1 || cols >= ACT_ROWS_COLS ? per : ACT_ROWS_BLOCK;
        if ((r + 1) % every == 0 || r + 1 == rows) {
            int64_t r_first = r / every * every;
            if (per > 1)
                nat_act_vec(c + r_first * ldc, (r - r_first + 1) * cols, e->act);
            else
                act_rows(c + r_first * ldc, ldc, r - r_first + 1, cols, e->act);
        }
    }
}
