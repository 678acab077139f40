/* ncu_dev: device helpers the CUDA backend's kernels share: float conversion
 * of the storage types (all math is float32; storage is the ctx dtype), the
 * activation math (exactly the same functions in eager and fused kernels, so a
 * fused kernel is faster only because it moves less memory), block reductions,
 * and the dtype dispatch. */
#ifndef NCU_DEV_CUH
#define NCU_DEV_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ncu_int.h"

#define NCU_THREADS 256

__device__ __forceinline__ float ncu_f(float x)
{
    return x;
}
__device__ __forceinline__ float ncu_f(__half x)
{
    return __half2float(x);
}
__device__ __forceinline__ float ncu_f(__nv_bfloat16 x)
{
    return __bfloat162float(x);
}

template <typename T> __device__ __forceinline__ T ncu_t(float x);
template <> __device__ __forceinline__ float ncu_t<float>(float x)
{
    return x;
}
template <> __device__ __forceinline__ __half ncu_t<__half>(float x)
{
    return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 ncu_t<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}

/* VEC elements loaded or stored as one aligned access (16 bytes of float x 4,
 * 8 bytes of half x 4). */
template <typename T, int VEC> struct alignas(sizeof(T) * VEC) ncu_vec {
    T v[VEC];
};

/* Exact (erf) GELU, as torch.nn.GELU(). */
__device__ __forceinline__ float ncu_gelu(float x)
{
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

__device__ __forceinline__ float ncu_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

__device__ __forceinline__ float ncu_act(float x, int act)
{
    if (act == NCU_ACT_RELU)
        return x > 0.0f ? x : 0.0f;
    if (act == NCU_ACT_GELU)
        return ncu_gelu(x);
    return x;
}

__device__ __forceinline__ float ncu_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float ncu_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum (is_max false) or max over the block (NCU_THREADS threads); every thread
 * gets the result.  Uses 33 floats of shared memory passed in. */
__device__ __forceinline__ float ncu_block_reduce(float v, bool is_max, float *sh)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = is_max ? ncu_warp_max(v) : ncu_warp_sum(v);
    __syncthreads(); /* sh may still be read from a previous reduction */
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < (int)(blockDim.x >> 5) ? sh[lane] : (is_max ? -INFINITY : 0.0f);
        w = is_max ? ncu_warp_max(w) : ncu_warp_sum(w);
        if (lane == 0)
            sh[32] = w;
    }
    __syncthreads();
    return sh[32];
}

static inline const ncu_lstate *ncu_st(const nat_launch *l)
{
    return (const ncu_lstate *)l->aux;
}

/* Calls FN<T>(args...) for the ctx dtype. */
#define NCU_DISPATCH(dtype, FN, ...)                                                               \
    do {                                                                                           \
        switch (dtype) {                                                                           \
        case NCU_F16:                                                                              \
            FN<__half>(__VA_ARGS__);                                                               \
            break;                                                                                 \
        case NCU_BF16:                                                                             \
            FN<__nv_bfloat16>(__VA_ARGS__);                                                        \
            break;                                                                                 \
        default:                                                                                   \
            FN<float>(__VA_ARGS__);                                                                \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* Blocks for n work items of NCU_THREADS threads each (grid-stride loops cover
 * the rest; 2^20 blocks keep every SM busy many times over). */
static inline unsigned ncu_blocks(int64_t n)
{
    int64_t b = (n + NCU_THREADS - 1) / NCU_THREADS;
    return (unsigned)(b < 1 ? 1 : (b > (1 << 20) ? (1 << 20) : b));
}

#endif
