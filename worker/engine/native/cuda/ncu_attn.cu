/* ncu_attn: fused attention, o = softmax(scale * q k^T [+ causal mask]) v, for
 * q, k, v, o of shape [bh, s, d], d <= NCU_ATTN_MAX_D.
 *
 * Tiled with an online softmax (running max m and sum l per query row, the
 * accumulator rescaled by exp(m_old - m_new) as each key tile arrives), so the
 * s x s scores never reach device memory: a block holds ATT_BQ query rows in
 * shared memory and streams key/value tiles of ATT_BK rows through shared
 * memory; each warp owns ATT_RPW query rows, a lane scores one key of the tile
 * and owns d/32 output columns.  Math is float32 FMA on every dtype.
 *
 * With params.tc_attention=1, float16 and bfloat16 with d a multiple of 16 run
 * k_attention_tc instead: the same online softmax with both products on the
 * tensor cores (wmma 16x16x16, float32 accumulation).  A warp owns 16 query
 * rows; per key tile it computes its 16 x ATT_TC_BK scores (q k^T) into
 * shared memory, turns them into probabilities in the storage type (the
 * running max and sum per row in float32, as above), and adds p v into a
 * float32 output tile in shared memory that each tile first rescales by
 * exp(m_old - m_new).  Checked against the float64 reference on an H200
 * (2026-11-28): the default since, 1.3x the FMA kernel on the attention
 * pattern and 2.4x on whisper_tiny (docs/gpu/README.md).
 *
 * Two changes to it, each written without a GPU and opt-in until the GPU
 * check has run it (MODE bits of k_attention_tc):
 *
 * - ATT_TC_ASYNC (params.tc_attention=2, and 3): the tiles copied into
 *   shared memory by cp.async, 16 bytes a copy, every copy of a tile in
 *   flight at once (where q, k and v are 16-byte aligned).  The
 *   element-by-element loads wait out one global round trip per element a
 *   thread loads, about 64 a tile: where the H200 run's 0.228 ms went, by
 *   its arithmetic.
 * - ATT_TC_SPLIT (params.tc_attention=3, with the copies): the online
 *   softmax with a lane on half a row (row lane & 15, keys 32 (lane >> 4)
 *   on) instead of the warp on one row at a time: 32 independent exps and
 *   two shuffles a lane, where the row-at-a-time form chains two warp
 *   reductions (ten shuffles) per row through 16 rows.  A lane visits its
 *   keys from (2 row + half) mod 32 on, the order in which no two lanes
 *   share a bank, reading the float scores or writing the 16-bit
 *   probabilities. */
#include <cuda_pipeline_primitives.h>
#include <mma.h>
#include <stdint.h>
#include <type_traits>

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

/* ---- on the tensor cores (float16, bfloat16; params.tc_attention) ---- */

#define ATT_TC_WARPS 4
#define ATT_TC_BQ    (ATT_TC_WARPS * 16) /* query rows a block: 16 a warp */
#define ATT_TC_BK    64                  /* keys a tile */

/* Byte offsets of k_attention_tc's shared memory for head dim d and a
 * storage type of tsz bytes, each region 128-byte aligned (wmma wants 32). */
struct att_tc_layout {
    size_t q, k, v, s, p, o, scratch, m, l, alpha, total;
};

__host__ __device__ static inline size_t att_tc_align(size_t x)
{
    return (x + 127) & ~(size_t)127;
}

__host__ __device__ static inline att_tc_layout att_tc_layout_for(int d, size_t tsz)
{
    att_tc_layout L;
    size_t at = 0;
    L.q = at; /* [BQ][d] T: the block's query rows */
    at = att_tc_align(at + (size_t)ATT_TC_BQ * d * tsz);
    L.k = at; /* [BK][d] T: the key tile */
    at = att_tc_align(at + (size_t)ATT_TC_BK * d * tsz);
    L.v = at; /* [BK][d] T: the value tile */
    at = att_tc_align(at + (size_t)ATT_TC_BK * d * tsz);
    L.s = at; /* [BQ][BK] float: scores */
    at = att_tc_align(at + (size_t)ATT_TC_BQ * ATT_TC_BK * sizeof(float));
    L.p = at; /* [BQ][BK] T: probabilities */
    at = att_tc_align(at + (size_t)ATT_TC_BQ * ATT_TC_BK * tsz);
    L.o = at; /* [BQ][d] float: the output rows, unnormalized */
    at = att_tc_align(at + (size_t)ATT_TC_BQ * d * sizeof(float));
    L.scratch = at; /* [warps][16][16] float: one p v block a warp */
    at = att_tc_align(at + (size_t)ATT_TC_WARPS * 256 * sizeof(float));
    L.m = at; /* [BQ] float: running max */
    at = att_tc_align(at + (size_t)ATT_TC_BQ * sizeof(float));
    L.l = at; /* [BQ] float: running sum */
    at = att_tc_align(at + (size_t)ATT_TC_BQ * sizeof(float));
    L.alpha = at; /* [BQ] float: this tile's rescale */
    at = att_tc_align(at + (size_t)ATT_TC_BQ * sizeof(float));
    L.total = at;
    return L;
}

/* Rows [r0, r0 + n) of a [s][d] matrix at src into dst [n][d] in shared
 * memory, rows past s zero.  ASYNC with vec (src 16-byte aligned; d is a
 * multiple of 16): cp.async 16 bytes at a time, a row past s zero-filled
 * without a read, the caller committing and waiting before its
 * __syncthreads; else element by element. */
/* k_attention_tc's MODE bits (params.tc_attention 1: 0, 2: ASYNC, 3: both). */
#define ATT_TC_ASYNC 1
#define ATT_TC_SPLIT 2

template <typename T, bool ASYNC>
__device__ __forceinline__ void att_tc_rows(T *dst, const T *src, int r0, int n, int s, int d,
                                            bool vec)
{
    if (ASYNC && vec) {
        const int d8 = d >> 3; /* 16-byte pieces a row */
        for (int j = threadIdx.x; j < n * d8; j += blockDim.x) {
            int r = j / d8, c = (j - r * d8) << 3;
            if (r0 + r < s)
                __pipeline_memcpy_async(dst + r * d + c, src + (int64_t)(r0 + r) * d + c, 16);
            else
                __pipeline_memcpy_async(dst + r * d + c, src, 16, 16);
        }
        return;
    }
    const T zero = ncu_t<T>(0.0f);
    for (int i = threadIdx.x; i < n * d; i += blockDim.x) {
        int r = i / d, c = i - r * d;
        dst[i] = r0 + r < s ? src[(int64_t)(r0 + r) * d + c] : zero;
    }
}

/* Key j's scaled score for query row qi, -inf where masked (past s, or
 * after qi when causal). */
__device__ __forceinline__ float att_tc_score(float dot, int j, int qi, const att_args &a)
{
    return j < a.s && (!a.causal || j <= qi) ? dot * a.scale : -INFINITY;
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
/* acc = a [16][k] . b [k][16] on the tensor cores, 16 of k at a time: a
 * row-major with leading dimension lda, b in layout L with ldb (its next 16
 * rows are 16 elements on when column-major, 16 rows on when row-major). */
template <typename T, typename L>
__device__ __forceinline__ void
att_tc_mma(nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> &acc, const T *a,
           int lda, const T *b, int ldb, int k)
{
    namespace wm = nvcuda::wmma;
    constexpr bool col = std::is_same<L, wm::col_major>::value;
    wm::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < k; kk += 16) {
        wm::fragment<wm::matrix_a, 16, 16, 16, T, wm::row_major> fa;
        wm::fragment<wm::matrix_b, 16, 16, 16, T, L> fb;
        wm::load_matrix_sync(fa, a + kk, lda);
        wm::load_matrix_sync(fb, b + (col ? kk : kk * ldb), ldb);
        wm::mma_sync(acc, fa, fb, acc);
    }
}
#endif

template <typename T, int MODE>
__global__ void __launch_bounds__(ATT_TC_WARPS * 32)
    k_attention_tc(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                   T *__restrict__ o, att_args a)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    /* bfloat16 wmma needs sm_80; att_tc_fits never picks this kernel there */
    __trap();
#else
    namespace wm = nvcuda::wmma;
    constexpr bool ASYNC = (MODE & ATT_TC_ASYNC) != 0, SPLIT = (MODE & ATT_TC_SPLIT) != 0;
    extern __shared__ __align__(128) unsigned char att_tc_smem[];
    const int d = a.d;
    const att_tc_layout L = att_tc_layout_for(d, sizeof(T));
    T *qs = (T *)(att_tc_smem + L.q), *ks = (T *)(att_tc_smem + L.k);
    T *vs = (T *)(att_tc_smem + L.v), *ps = (T *)(att_tc_smem + L.p);
    float *ss = (float *)(att_tc_smem + L.s), *os = (float *)(att_tc_smem + L.o);
    float *scratch = (float *)(att_tc_smem + L.scratch), *ms = (float *)(att_tc_smem + L.m);
    float *ls = (float *)(att_tc_smem + L.l), *als = (float *)(att_tc_smem + L.alpha);
    const int64_t base = (int64_t)blockIdx.y * a.s * d;
    const int q0 = blockIdx.x * ATT_TC_BQ, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const bool vec = ((reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(k) |
                       reinterpret_cast<uintptr_t>(v)) &
                      15) == 0;

    /* the query rows (with ASYNC, in flight until the first tile's wait) */
    att_tc_rows<T, ASYNC>(qs, q + base, q0, ATT_TC_BQ, a.s, d, vec);
    for (int i = threadIdx.x; i < ATT_TC_BQ * d; i += blockDim.x)
        os[i] = 0.0f;
    for (int r = threadIdx.x; r < ATT_TC_BQ; r += blockDim.x) {
        ms[r] = -INFINITY;
        ls[r] = 0.0f;
    }
    /* this warp's 16 rows of each region */
    const T *qw = qs + warp * 16 * d;
    float *sw = ss + warp * 16 * ATT_TC_BK, *ow = os + warp * 16 * d;
    float *scw = scratch + warp * 256, *mw = ms + warp * 16, *lw = ls + warp * 16;
    float *aw = als + warp * 16;
    T *pw = ps + warp * 16 * ATT_TC_BK;

    /* Causal: keys past the block's last query row are masked for all rows. */
    int kend = a.causal ? min(a.s, q0 + ATT_TC_BQ) : a.s;
    for (int t0 = 0; t0 < kend; t0 += ATT_TC_BK) {
        __syncthreads(); /* the previous tiles are no longer read; the first: o, m, l set */
        att_tc_rows<T, ASYNC>(ks, k + base, t0, ATT_TC_BK, a.s, d, vec);
        att_tc_rows<T, ASYNC>(vs, v + base, t0, ATT_TC_BK, a.s, d, vec);
        if (ASYNC) {
            __pipeline_commit();
            __pipeline_wait_prior(0); /* this thread's copies (and the first: q's) landed */
        }
        __syncthreads();

        /* scores: [16][BK] = q rows [16][d] . k tile^T (k row-major [BK][d]
         * is k^T column-major with leading dimension d) */
        for (int n = 0; n < ATT_TC_BK; n += 16) {
            wm::fragment<wm::accumulator, 16, 16, 16, float> acc;
            att_tc_mma<T, wm::col_major>(acc, qw, d, ks + n * d, d, d);
            wm::store_matrix_sync(sw + n, acc, ATT_TC_BK, wm::mem_row_major);
        }
        __syncwarp();

        if (SPLIT) {
            /* a lane on half a row: row r, keys 32 h .. 32 h + 31, visited
             * from (2 r + h) mod 32 on (no two lanes in one bank) */
            const int r = lane & 15, h = lane >> 4, qi = q0 + warp * 16 + r;
            const float *srow = sw + r * ATT_TC_BK + h * 32;
            T *prow = pw + r * ATT_TC_BK + h * 32;
            float sv[32], mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < 32; j++) {
                int c = (j + 2 * r + h) & 31;
                sv[j] = att_tc_score(srow[c], t0 + h * 32 + c, qi, a);
                mx = fmaxf(mx, sv[j]);
            }
            float m_old = mw[r];
            float m_new = fmaxf(m_old, fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16)));
            bool live = m_new != -INFINITY; /* else every key so far is masked */
            float alpha = live ? expf(m_old - m_new) : 1.0f, sum = 0.0f;
#pragma unroll
            for (int j = 0; j < 32; j++) {
                int c = (j + 2 * r + h) & 31;
                float p = live ? expf(sv[j] - m_new) : 0.0f;
                sum += p;
                prow[c] = ncu_t<T>(p);
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 16);
            /* the other half read m_old before: its sum, shuffled above,
             * depends on it */
            if (h == 0) {
                mw[r] = m_new;
                lw[r] = lw[r] * alpha + sum;
                aw[r] = alpha;
            }
        } else {
            /* the online softmax, a row at a time: a lane holds keys lane and lane + 32 */
            for (int r = 0; r < 16; r++) {
                int qi = q0 + warp * 16 + r;
                float s0 = att_tc_score(sw[r * ATT_TC_BK + lane], t0 + lane, qi, a);
                float s1 = att_tc_score(sw[r * ATT_TC_BK + lane + 32], t0 + lane + 32, qi, a);
                float m_old = mw[r];
                float m_new = fmaxf(m_old, ncu_warp_max(fmaxf(s0, s1)));
                float alpha = 1.0f, p0 = 0.0f, p1 = 0.0f;
                if (m_new != -INFINITY) {        /* else every key so far is masked */
                    alpha = expf(m_old - m_new); /* m_old == -inf: 0 */
                    p0 = expf(s0 - m_new);
                    p1 = expf(s1 - m_new);
                }
                float sum = ncu_warp_sum(p0 + p1);
                pw[r * ATT_TC_BK + lane] = ncu_t<T>(p0);
                pw[r * ATT_TC_BK + lane + 32] = ncu_t<T>(p1);
                if (lane == 0) { /* every lane read m_old before the shuffles above */
                    mw[r] = m_new;
                    lw[r] = lw[r] * alpha + sum;
                    aw[r] = alpha;
                }
            }
        }
        __syncwarp();

        /* o = o * alpha + p [16][BK] . v tile [BK][d], 16 columns at a time */
        for (int c = 0; c < d; c += 16) {
            wm::fragment<wm::accumulator, 16, 16, 16, float> acc;
            att_tc_mma<T, wm::row_major>(acc, pw, ATT_TC_BK, vs + c, d, ATT_TC_BK);
            wm::store_matrix_sync(scw, acc, 16, wm::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                float *dst = ow + (e >> 4) * d + c + (e & 15);
                *dst = *dst * aw[e >> 4] + scw[e];
            }
            __syncwarp(); /* scw is written again by the next block of columns */
        }
    }
    __syncwarp();
    for (int e = lane; e < 16 * d; e += 32) {
        int r = e / d, c = e % d, qi = q0 + warp * 16 + r;
        if (qi < a.s && lw[r] > 0.0f)
            o[base + (int64_t)qi * d + c] = ncu_t<T>(ow[e] / lw[r]);
    }
#endif
}

/* The dynamic shared memory k_attention_tc<T, *> may use: set once per
 * process for both forms (to what d = NCU_ATTN_MAX_D needs, or the device's
 * opt-in limit if lower); 0 when it cannot be had or the device is older
 * than compute capability 8.0.  Single-threaded, as the lowering is. */
template <typename T> static size_t att_tc_allowed()
{
    static bool asked = false;
    static size_t allowed = 0;
    if (asked)
        return allowed;
    asked = true;
    int dev = 0, optin = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return allowed;
    }
    if (major < 8)
        return allowed;
    size_t want = att_tc_layout_for(NCU_ATTN_MAX_D, sizeof(T)).total;
    size_t set = want < (size_t)optin ? want : (size_t)optin;
    if (cudaFuncSetAttribute(k_attention_tc<T, 0>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)set) == cudaSuccess &&
        cudaFuncSetAttribute(k_attention_tc<T, ATT_TC_ASYNC>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)set) == cudaSuccess &&
        cudaFuncSetAttribute(k_attention_tc<T, ATT_TC_ASYNC | ATT_TC_SPLIT>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)set) == cudaSuccess)
        allowed = set;
    else
        (void)cudaGetLastError();
    return allowed;
}

/* Whether k_attention_tc<T> runs this launch: 16-bit storage, d a multiple
 * of 16, and its shared memory to be had. */
template <typename T> static bool att_tc_fits(int d)
{
    return sizeof(T) == 2 && d % 16 == 0 && d <= NCU_ATTN_MAX_D &&
           att_tc_layout_for(d, sizeof(T)).total <= att_tc_allowed<T>();
}

/* float32 storage never takes the tensor-core path (wmma has no float32
 * operands of this shape); the instantiation only keeps the dispatch uniform. */
template <> bool att_tc_fits<float>(int)
{
    return false;
}

template <typename T, int MODE> static void launch_attention_tc(const nat_launch *l, cudaStream_t s)
{
    const nat_attn_desc *d = &l->d.attn;
    att_args a = {(int)d->s, (int)d->d, d->scale, d->causal};
    dim3 grid((unsigned)((a.s + ATT_TC_BQ - 1) / ATT_TC_BQ), (unsigned)d->bh);
    k_attention_tc<T, MODE>
        <<<grid, ATT_TC_WARPS * 32, att_tc_layout_for(a.d, sizeof(T)).total, s>>>(
            (const T *)l->p[NAT_ATTN_Q], (const T *)l->p[NAT_ATTN_K], (const T *)l->p[NAT_ATTN_V],
            (T *)l->p[NAT_ATTN_O], a);
}

/* The lowering's launch fn for MODE: float32 never takes these
 * (att_tc_fits<float> is false), so it has no instantiation. */
template <int MODE> static void attention_tc(const nat_launch *l)
{
    const ncu_lstate *st = ncu_st(l);
    if (st->ctx->dtype == NCU_F16)
        launch_attention_tc<__half, MODE>(l, st->ctx->stream);
    else if (st->ctx->dtype == NCU_BF16)
        launch_attention_tc<__nv_bfloat16, MODE>(l, st->ctx->stream);
}

/* The FMA kernel; the lowering picks ncu_k_attention_tc instead where
 * att_tc_fits, once per plan, not per launch. */
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

template <typename T> static void tc_fits_for(int d, bool *out)
{
    *out = att_tc_fits<T>(d);
}

extern "C" bool ncu_attention_tc_fits(ncu_dtype dtype, int d)
{
    bool fits = false;
    NCU_DISPATCH(dtype, tc_fits_for, d, &fits);
    return fits;
}

extern "C" void ncu_k_attention(const nat_launch *l)
{
    const ncu_lstate *st = ncu_st(l);
    NCU_DISPATCH(st->ctx->dtype, run_attention, l, st->ctx->stream);
}

extern "C" void ncu_k_attention_tc(const nat_launch *l)
{
    attention_tc<0>(l);
}

extern "C" void ncu_k_attention_tc_async(const nat_launch *l)
{
    attention_tc<ATT_TC_ASYNC>(l);
}

extern "C" void ncu_k_attention_tc_split(const nat_launch *l)
{
    attention_tc<ATT_TC_ASYNC | ATT_TC_SPLIT>(l);
}
