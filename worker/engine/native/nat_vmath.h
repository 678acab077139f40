/* nat_vmath: the zoo's cheap-to-vectorize activations on a register of 8
 * (AVX2 + FMA, the build's baseline) or 16 (AVX-512) floats, for nat_act_vec:
 * the one pass that every eager activation of the model zoo and every fused
 * epilogue runs (GEMM, convolution, depthwise plane, element chain), so eager
 * and fused compute an activation with the same instructions, lane for lane,
 * at either width.
 *
 * exp is nat_expf's algorithm (round to nearest multiple of ln 2 by adding
 * 1.5 * 2^23, one-constant reduction, the degree-5 polynomial, the exponent
 * built in integer bits from the rounding sum's own low bits), written with
 * intrinsics because GCC's vectorization of the scalar form (compares and
 * blends for its clamps) was slower: an eager SiLU over 50,176 floats took
 * 0.0367 ms with it and 0.0262 with the first intrinsics (one AMD EPYC core,
 * AVX2; bench/ab.sh, docs/BENCHMARKS.md).  The form above, with 10 FMA-unit
 * operations to an 8-lane exp where the first had 12, took 2.63 ns per 8
 * lanes against their 3.81 in a loop over one L1-resident row (the mean of
 * 20 alternating runs, one core of the same CPU; a harness not kept).
 * Sigmoid is 1 / (1 + exp(-x)) and SiLU x / (1 + exp(-x)), by a true
 * division: within 1e-6 relative of the exact value (unit.test_kernels).
 * exp's argument is clamped to [-88, 88], where the result and 1 + it are
 * finite floats, and the result is 0 below about -87.7, as nat_expf's.
 *
 * Also nat_lanes8 and nat_bits8, masks for AVX2's masked moves. */
#ifndef NAT_VMATH_H
#define NAT_VMATH_H

#include <stdbool.h>
#include <stdint.h>

#include "nat_kern.h"
#include "nat_kern_cpu.h"

/* Whether nat_act8/nat_act16 compute act: the activations whose vectorized
 * scalar form was slow (an exp, clamps).  The others (ReLU, GELU, tanh) take
 * nat_act_vec's scalar loops, which GCC vectorizes well. */
static inline bool nat_vact_has(int act)
{
    return act == NAT_ACT_RELU6 || act == NAT_ACT_SILU || act == NAT_ACT_SIGMOID ||
           act == NAT_ACT_HARDSWISH || act == NAT_ACT_HARDSIGMOID;
}

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#define NAT_VMATH 1
#include <immintrin.h>

/* ---- 8 lanes (the build's baseline, x86-64-v3) ---- */

/* The mask of the first n (0..8) lanes, for _mm256_maskload_ps/maskstore. */
static inline __m256i nat_lanes8(int64_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The lanes set in bits' low 8 bits (bit j: lane j), for AVX2's masked moves. */
static inline __m256i nat_bits8(uint32_t bits)
{
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)(bits & 0xff)), bit), bit);
}

static inline __m256 nat_exp8(__m256 x)
{
    const __m256 magic = _mm256_set1_ps(12582912.0f); /* 1.5 * 2^23 */
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-88.0f)), _mm256_set1_ps(88.0f));
    __m256 t = _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504f), magic);
    __m256 n = _mm256_sub_ps(t, magic);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693147182f), xc);
    __m256 p = _mm256_set1_ps(NAT_EXP_C5);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(NAT_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(NAT_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(NAT_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(NAT_EXP_C1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* t's low mantissa bits hold n: shifted into the exponent, plus the bias */
    __m256i e = _mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(t), 23),
                                 _mm256_set1_epi32(127 << 23));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* The sum and the max of a register's 8 lanes. */
static inline float nat_hsum8(__m256 v)
{
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

static inline float nat_hmax8(__m256 v)
{
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* x / (1 + exp(-x)): SiLU with num = x, sigmoid with num = 1. */
static inline __m256 nat_sig8(__m256 x, __m256 num)
{
    __m256 d = _mm256_add_ps(_mm256_set1_ps(1.0f), nat_exp8(_mm256_sub_ps(_mm256_setzero_ps(), x)));
    return _mm256_div_ps(num, d);
}

/* act(x) for the activations of nat_vact_has (x itself for any other);
 * callers pass act as a constant (nat_kern_elem.c's loops). */
static inline __m256 nat_act8(__m256 x, int act)
{
    const __m256 zero = _mm256_setzero_ps();
    switch (act) {
    case NAT_ACT_RELU6:
        return _mm256_min_ps(_mm256_max_ps(x, zero), _mm256_set1_ps(6.0f));
    case NAT_ACT_SILU:
        return nat_sig8(x, x);
    case NAT_ACT_SIGMOID:
        return nat_sig8(x, _mm256_set1_ps(1.0f));
    case NAT_ACT_HARDSWISH: {
        __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(x, _mm256_set1_ps(3.0f)), zero),
                                 _mm256_set1_ps(6.0f));
        return _mm256_mul_ps(_mm256_mul_ps(x, t), _mm256_set1_ps(1.0f / 6.0f));
    }
    case NAT_ACT_HARDSIGMOID: {
        __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(1.0f / 6.0f), _mm256_set1_ps(0.5f));
        return _mm256_min_ps(_mm256_max_ps(t, zero), _mm256_set1_ps(1.0f));
    }
    default:
        return x;
    }
}

/* Whether a kernel writing n floats to out (aligned to 32 bytes) stores them
 * past the caches (_mm256_stream_ps): where out alone is larger than
 * NAT_STREAM_BYTES, about half of a server's last-level cache, the next
 * kernel reads it from memory anyway, and a cached store first reads the
 * line it writes: a kernel of two inputs and one output moves 16 bytes per
 * element for its 12. */
#define NAT_STREAM_BYTES ((int64_t)16 << 20)

/* How far ahead (floats: one 4 KiB page) a streaming kernel asks for its
 * inputs' lines: the hardware prefetcher does not cross a page, so without
 * it each page starts with a miss to memory. */
#define NAT_PF_AHEAD 1024

static inline bool nat_stream_out(const float *out, int64_t n)
{
    return n * (int64_t)sizeof(float) > NAT_STREAM_BYTES && ((uintptr_t)out & 31) == 0;
}

/* o[j] = sigmoid(x[j]) for j < n, 8 lanes, the tail masked: the pattern
 * suite's eager sigmoid pass; the element chain that fuses it computes its
 * sigmoid with nat_sig8 too (nat_kern_elem.c).  Every softmax's exponentials
 * are nat_exp_sum's (nat_kern_cpu.h). */
static inline void nat_vsigmoid8(const float *x, float *o, int64_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, nat_sig8(_mm256_loadu_ps(x + i), one));
    if (i < n) {
        __m256i m = nat_lanes8(n - i);
        _mm256_maskstore_ps(o + i, m, nat_sig8(_mm256_maskload_ps(x + i, m), one));
    }
}

/* ---- 16 lanes (AVX-512F; callers check nat_v16_available()) ---- */

#define NAT_AVX512 __attribute__((target("avx512f")))

NAT_AVX512 static inline __m512 nat_exp16(__m512 x)
{
    const __m512 magic = _mm512_set1_ps(12582912.0f); /* 1.5 * 2^23 */
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-88.0f)), _mm512_set1_ps(88.0f));
    __m512 t = _mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504f), magic);
    __m512 n = _mm512_sub_ps(t, magic);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693147182f), xc);
    __m512 p = _mm512_set1_ps(NAT_EXP_C5);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(NAT_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(NAT_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(NAT_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(NAT_EXP_C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i e = _mm512_add_epi32(_mm512_slli_epi32(_mm512_castps_si512(t), 23),
                                 _mm512_set1_epi32(127 << 23));
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

NAT_AVX512 static inline __m512 nat_sig16(__m512 x, __m512 num)
{
    __m512 d =
        _mm512_add_ps(_mm512_set1_ps(1.0f), nat_exp16(_mm512_sub_ps(_mm512_setzero_ps(), x)));
    return _mm512_div_ps(num, d);
}

NAT_AVX512 static inline __m512 nat_act16(__m512 x, int act)
{
    const __m512 zero = _mm512_setzero_ps();
    switch (act) {
    case NAT_ACT_RELU6:
        return _mm512_min_ps(_mm512_max_ps(x, zero), _mm512_set1_ps(6.0f));
    case NAT_ACT_SILU:
        return nat_sig16(x, x);
    case NAT_ACT_SIGMOID:
        return nat_sig16(x, _mm512_set1_ps(1.0f));
    case NAT_ACT_HARDSWISH: {
        __m512 t = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(x, _mm512_set1_ps(3.0f)), zero),
                                 _mm512_set1_ps(6.0f));
        return _mm512_mul_ps(_mm512_mul_ps(x, t), _mm512_set1_ps(1.0f / 6.0f));
    }
    case NAT_ACT_HARDSIGMOID: {
        __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
        return _mm512_min_ps(_mm512_max_ps(t, zero), _mm512_set1_ps(1.0f));
    }
    default:
        return x;
    }
}
#endif

#endif
