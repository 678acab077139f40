/* ncu_attn: fused attention, o = softmax(scale * q k^T [+ causal mask]) v, for
 * q, k, v, o of shape [bh, s, d], d <= NCU_ATTN_MAX_D.
 *
 * Tiled with an online softmax (running max m and sum l per query row, the
 * accumulator rescaled by exp(m_old - m_new) as each key tile arrives), so the
 * s x s scores never reach device memory: a block holds ATT_BQ query rows in
 * shared memory and streams key/value tiles of ATT_BK rows through shared
 * memory; each warp owns ATT_RPW query rows, a lane scores one key of the tile
 * and owns d/32 output columns.  Math is float32 FMA on every dtype (no tensor
 * cores yet: a wmma/mma version for float16/bfloat16 is the next step, see
 * docs/gpu/README.md). */
#include "ncu_dev.cuh"

#define ATT_WARPS 4
#define ATT_RPW   4 /* query rows per warp */
#define ATT_BQ    (ATT_WARPS * ATT_RPW)
#define ATT_BK    32 /* keys per tile: one per lane */
#define ATT_ACC   (NCU_ATTN_MAX_D / 32)

struct att_args {
    int s, d;
    float scale;
    bool causal;
};

/* Loads rows [r0, r0 + nr) of a [s, d] matrix into dst (row stride ld) as
 * float; rows past s are zero. */
template <typename T>
__device__ __forceinline__ void att_load(const T *src, int r0, int nr, int s, int d, float *dst,
                                         int ld)
{
    for (int i = threadIdx.x; i < nr * d; i += blockDim.x) {
        int r = i / d, c = i % d;
        dst[r * ld + c] = r0 + r < s ? ncu_f(src[(int64_t)(r0 + r) * d + c]) : 0.0f;
    }
}

/* One query row against one key tile: updates m, l and acc (online softmax). */
__device__ __forceinline__ void att_row_tile(const float *qrow, const float *ks, const float *vs,
                                             int t0, int qi, const att_args &a, float &m, float &l,
                                             float *acc)
{
    int lane = threadIdx.x & 31, j = t0 + lane;
    float sc = -INFINITY;
    if (j < a.s && (!a.causal || j <= qi)) {
        float dot = 0.0f;
        for (int c = 0; c < a.d; c++)
            dot = fmaf(qrow[c], ks[lane * (a.d + 1) + c], dot);
        sc = dot * a.scale;
    }
    float m_new = fmaxf(m, ncu_warp_max(sc));
    if (m_new == -INFINITY)
        return;                    /* every key so far is masked: nothing to accumulate */
    float alpha = expf(m - m_new); /* m == -inf: 0, nothing to rescale */
    float p = expf(sc - m_new);
    l = l * alpha + ncu_warp_sum(p);
    m = m_new;
#pragma unroll
    for (int c = 0; c < ATT_ACC; c++)
        acc[c] *= alpha;
    for (int jj = 0; jj < ATT_BK; jj++) {
        float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
        for (int c = 0; c < ATT_ACC; c++) {
            int col = lane + 32 * c;
            if (col < a.d)
                acc[c] = fmaf(pj, vs[jj * a.d + col], acc[c]);
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(ATT_WARPS * 32)
    k_attention(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                T *__restrict__ o, att_args a)
{
    extern __shared__ float smem[];
    float *qs = smem;                    /* [ATT_BQ][d] */
    float *ks = qs + ATT_BQ * a.d;       /* [ATT_BK][d + 1]: conflict-free per lane */
    float *vs = ks + ATT_BK * (a.d + 1); /* [ATT_BK][d] */
    int64_t base = (int64_t)blockIdx.y * a.s * a.d;
    int q0 = blockIdx.x * ATT_BQ, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    att_load(q + base, q0, ATT_BQ, a.s, a.d, qs, a.d);
    float m[ATT_RPW], l[ATT_RPW], acc[ATT_RPW][ATT_ACC];
    for (int r = 0; r < ATT_RPW; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        for (int c = 0; c < ATT_ACC; c++)
            acc[r][c] = 0.0f;
    }
    /* Causal: keys past the block's last query row are masked for all rows. */
    int kend = a.causal ? min(a.s, q0 + ATT_BQ) : a.s;
    for (int t0 = 0; t0 < kend; t0 += ATT_BK) {
        __syncthreads(); /* the previous tile is no longer read */
        att_load(k + base, t0, ATT_BK, a.s, a.d, ks, a.d + 1);
        att_load(v + base, t0, ATT_BK, a.s, a.d, vs, a.d);
        __syncthreads();
        for (int r = 0; r < ATT_RPW; r++) {
            int row = warp * ATT_RPW + r;
            att_row_tile(qs + row * a.d, ks, vs, t0, q0 + row, a, m[r], l[r], acc[r]);
        }
    }
    for (int r = 0; r < ATT_RPW; r++) {
        int qi = q0 + warp * ATT_RPW + r;
        if (qi >= a.s || l[r] == 0.0f)
            continue;
        float inv = 1.0f / l[r];
        for (int c = 0; c < ATT_ACC; c++) {
            int col = lane + 32 * c;
            if (col < a.d)
                o[base + (int64_t)qi * a.d + col] = ncu_t<T>(acc[r][c] * inv);
        }
    }
}

template <typename T> static void run_attention(const nat_launch *l, cudaStream_t s)
{
    const nat_attn_desc *d = &l->d.attn;
    att_args a = {(int)d->s, (int)d->d, d->scale, d->causal};
    dim3 grid((unsigned)((a.s + ATT_BQ - 1) / ATT_BQ), (unsigned)d->bh);
    size_t shmem = sizeof(float) * (size_t)(ATT_BQ * a.d + ATT_BK * (a.d + 1) + ATT_BK * a.d);
    k_attention<T><<<grid, ATT_WARPS * 32, shmem, s>>>(
        (const T *)l->p[NAT_ATTN_Q], (const T *)l->p[NAT_ATTN_K], (const T *)l->p[NAT_ATTN_V],
        (T *)l->p[NAT_ATTN_O], a);
}

extern "C" void ncu_k_attention(const nat_launch *l)
{
    const ncu_lstate *st = ncu_st(l);
    NCU_DISPATCH(st->ctx->dtype, run_attention, l, st->ctx->stream);
}
