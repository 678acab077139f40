/* ncu_kern_zoo: our CUDA kernels for the model zoo's launches (graph/gr_kern.h):
 * the interpreted element chain, softmax with scale and causal mask, the
 * causal mask alone, the pools, the embedding lookup, permute, concat, slice,
 * and the epilogue (bias + residual + any activation) that follows a bare
 * library convolution or GEMM.  Each takes its CPU twin's descriptor as it is
 * (ncu_lower.c checks it once, at prepare), stores in the ctx dtype and
 * computes in float32 with the CPU's formulas (nat_act_apply).
 *
 * Every kernel is a grid-stride loop over int64 indexes, so no size is bound
 * by the grid (ncu_blocks caps it at 2^20 blocks in x; y and z are never
 * used).  Element streams go through 16-byte vector accesses when the count
 * and the pointers allow it, checked at launch. */
#include <stdint.h>

#include "ncu_dev.cuh"

#define ZOO_FOR(i, n)                                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

/* Elements per 16-byte access: 4 floats or 8 halves. */
template <typename T> constexpr int zoo_vec()
{
    return (int)(16 / sizeof(T));
}

static inline bool zoo_aligned(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

/* ---- activations: nat_act_apply's formulas, CUDA's expf/erff/tanhf (within
 * 2 ulp) where the CPU has its polynomials (within 2e-7) ---- */

__device__ __forceinline__ float zoo_clamp(float x, float lo, float hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}

__device__ __forceinline__ float zoo_act(float x, int act)
{
    switch (act) {
    case NCU_ACT_RELU:
        return x > 0.0f ? x : 0.0f;
    case NCU_ACT_GELU:
        return ncu_gelu(x);
    case NCU_ACT_RELU6:
        return zoo_clamp(x, 0.0f, 6.0f);
    case NCU_ACT_SILU:
        return x * ncu_sigmoid(x);
    case NCU_ACT_SIGMOID:
        return ncu_sigmoid(x);
    case NCU_ACT_HARDSWISH:
        return x * zoo_clamp(x + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f);
    case NCU_ACT_HARDSIGMOID:
        return zoo_clamp(x * (1.0f / 6.0f) + 0.5f, 0.0f, 1.0f);
    case NCU_ACT_TANH:
        return tanhf(x);
    case NCU_ACT_GELU_TANH:
        return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
    default:
        return x;
    }
}

/* ---- element chain: the steps of gr_chain_step applied in order, one pass ---- */

struct zoo_step {
    int op, act, bc;
    int64_t size;  /* COL: the operand's length; ROW: elements per operand value */
    const void *b; /* the operand (ADD, MUL) */
    float s;       /* SCALE */
};

struct zoo_chain_args {
    int64_t n;
    int steps;
    zoo_step st[NCU_CHAIN_MAX];
};

template <typename T>
__device__ __forceinline__ float zoo_chain_value(float v, int64_t j, const zoo_chain_args &a)
{
    for (int s = 0; s < a.steps; s++) {
        const zoo_step &st = a.st[s];
        if (st.op == NCU_CH_ACT) {
            v = zoo_act(v, st.act);
        } else if (st.op == NCU_CH_SCALE) {
            v *= st.s;
        } else {
            int64_t idx =
                st.bc == NCU_CH_BC_FULL ? j : (st.bc == NCU_CH_BC_COL ? j % st.size : j / st.size);
            float b = ncu_f(static_cast<const T *>(st.b)[idx]);
            v = st.op == NCU_CH_ADD ? v + b : v * b;
        }
    }
    return v;
}

/* x may be out (in place): no __restrict__. */
template <typename T, int VEC> __global__ void kz_chain(const T *x, T *out, zoo_chain_args a)
{
    ZOO_FOR(i, a.n / VEC)
    {
        ncu_vec<T, VEC> xv = reinterpret_cast<const ncu_vec<T, VEC> *>(x)[i], ov;
#pragma unroll
        for (int k = 0; k < VEC; k++)
            ov.v[k] = ncu_t<T>(zoo_chain_value<T>(ncu_f(xv.v[k]), i * VEC + k, a));
        reinterpret_cast<ncu_vec<T, VEC> *>(out)[i] = ov;
    }
}

/* NAT_D_CHAIN (steps checked when lowered). */
template <typename T> static void rz_chain(const nat_launch *l, cudaStream_t s)
{
    const nat_chain_desc *ch = &l->d.chain;
    zoo_chain_args a = {};
    a.n = ch->n;
    a.steps = ch->n_steps < NCU_CHAIN_MAX ? ch->n_steps : NCU_CHAIN_MAX;
    for (int k = 0; k < a.steps; k++) {
        const nat_chain_step *st = &ch->steps[k];
        a.st[k].op = st->op;
        a.st[k].act = st->act;
        a.st[k].bc = st->bc;
        a.st[k].size = st->size > 0 ? st->size : 1;
        a.st[k].b =
            NAT_CHAIN_OPD + st->operand < NAT_MAX_ARGS ? l->p[NAT_CHAIN_OPD + st->operand] : NULL;
        a.st[k].s = st->scalar;
    }
    const T *x = (const T *)l->p[NAT_CHAIN_X];
    T *out = (T *)l->p[NAT_CHAIN_OUT];
    constexpr int V = zoo_vec<T>();
    if (a.n % V == 0 && zoo_aligned(x) && zoo_aligned(out))
        kz_chain<T, V><<<ncu_blocks(a.n / V), NCU_THREADS, 0, s>>>(x, out, a);
    else
        kz_chain<T, 1><<<ncu_blocks(a.n), NCU_THREADS, 0, s>>>(x, out, a);
}

/* ---- softmax of scale * x along rows, -inf above the diagonal of each
 * cols x cols block when causal: one block per row (grid-stride over rows);
 * a row of up to CH * NCU_THREADS elements stays in registers ---- */

#define ZOO_SOFTMAX_MAX_CH 16

template <typename T, int CH>
__global__ void __launch_bounds__(NCU_THREADS)
    kz_softmax(const T *__restrict__ x, T *__restrict__ out, int64_t rows, int64_t cols, int causal,
               float scale)
{
    __shared__ float sh[33];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * cols;
        T *o = out + r * cols;
        int64_t vis = causal ? r % cols + 1 : cols;
        float v[CH], m = -INFINITY, sum = 0.0f;
#pragma unroll
        for (int c = 0; c < CH; c++) {
            int64_t j = (int64_t)c * blockDim.x + threadIdx.x;
            v[c] = j < vis ? ncu_f(xr[j]) * scale : -INFINITY;
            m = fmaxf(m, v[c]);
        }
        m = ncu_block_reduce(m, true, sh);
#pragma unroll
        for (int c = 0; c < CH; c++) {
            int64_t j = (int64_t)c * blockDim.x + threadIdx.x;
            v[c] = j < vis ? expf(v[c] - m) : 0.0f;
            sum += v[c];
        }
        float inv = 1.0f / ncu_block_reduce(sum, false, sh);
#pragma unroll
        for (int c = 0; c < CH; c++) {
            int64_t j = (int64_t)c * blockDim.x + threadIdx.x;
            if (j < cols)
                o[j] = ncu_t<T>(v[c] * inv); /* masked: exactly 0, as on the CPU */
        }
    }
}

/* Rows too long for registers: three passes over the row (in L2). */
template <typename T>
__global__ void __launch_bounds__(NCU_THREADS)
    kz_softmax_stream(const T *__restrict__ x, T *__restrict__ out, int64_t rows, int64_t cols,
                      int causal, float scale)
{
    __shared__ float sh[33];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * cols;
        T *o = out + r * cols;
        int64_t vis = causal ? r % cols + 1 : cols;
        float m = -INFINITY, sum = 0.0f;
        for (int64_t j = threadIdx.x; j < vis; j += blockDim.x)
            m = fmaxf(m, ncu_f(xr[j]) * scale);
        m = ncu_block_reduce(m, true, sh);
        for (int64_t j = threadIdx.x; j < vis; j += blockDim.x)
            sum += expf(ncu_f(xr[j]) * scale - m);
        float inv = 1.0f / ncu_block_reduce(sum, false, sh);
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            o[j] = ncu_t<T>(j < vis ? expf(ncu_f(xr[j]) * scale - m) * inv : 0.0f);
    }
}

static unsigned zoo_row_blocks(int64_t rows)
{
    return (unsigned)(rows < 1 ? 1 : (rows > (1 << 20) ? (1 << 20) : rows));
}

/* p: x, out; i: rows, cols, causal; f: scale. */
template <typename T> static void rz_softmax(const nat_launch *l, cudaStream_t s)
{
    const T *x = (const T *)l->p[NAT_ROWS_X];
    T *out = (T *)l->p[NAT_ROWS_OUT];
    int64_t rows = l->d.rows.rows, cols = l->d.rows.cols;
    int causal = l->d.rows.causal;
    float scale = l->d.rows.scale;
    int64_t ch = (cols + NCU_THREADS - 1) / NCU_THREADS;
    unsigned g = zoo_row_blocks(rows);
    if (ch <= 1)
        kz_softmax<T, 1><<<g, NCU_THREADS, 0, s>>>(x, out, rows, cols, causal, scale);
    else if (ch <= 2)
        kz_softmax<T, 2><<<g, NCU_THREADS, 0, s>>>(x, out, rows, cols, causal, scale);
    else if (ch <= 4)
        kz_softmax<T, 4><<<g, NCU_THREADS, 0, s>>>(x, out, rows, cols, causal, scale);
    else if (ch <= 8)
        kz_softmax<T, 8><<<g, NCU_THREADS, 0, s>>>(x, out, rows, cols, causal, scale);
    else if (ch <= ZOO_SOFTMAX_MAX_CH)
        kz_softmax<T, ZOO_SOFTMAX_MAX_CH>
            <<<g, NCU_THREADS, 0, s>>>(x, out, rows, cols, causal, scale);
    else
        kz_softmax_stream<T><<<g, NCU_THREADS, 0, s>>>(x, out, rows, cols, causal, scale);
}

/* ---- the causal mask alone (eager): -inf above each block's diagonal ---- */

template <typename T>
__global__ void kz_causal(const T *__restrict__ x, T *__restrict__ out, int64_t rows, int64_t cols)
{
    ZOO_FOR(i, rows * cols)
    {
        int64_t r = i / cols, j = i % cols;
        out[i] = j < r % cols + 1 ? x[i] : ncu_t<T>(-INFINITY);
    }
}

/* p: x, out; i: rows, cols. */
template <typename T> static void rz_causal(const nat_launch *l, cudaStream_t s)
{
    int64_t rows = l->d.rows.rows, cols = l->d.rows.cols;
    kz_causal<T><<<ncu_blocks(rows * cols), NCU_THREADS, 0, s>>>(
        (const T *)l->p[NAT_ROWS_X], (T *)l->p[NAT_ROWS_OUT], rows, cols);
}

/* ---- pools over planes: one thread per output element ---- */

struct zoo_pool {
    int64_t planes, h, w, kh, kw, sh, sw, ph, pw, ho, wo, count_pad;
};

/* Max (MAX) or average over the window, the CPU's loop order. */
template <typename T, bool MAX>
__global__ void kz_pool(const T *__restrict__ in, T *__restrict__ out, zoo_pool g)
{
    ZOO_FOR(i, g.planes * g.ho * g.wo)
    {
        int64_t ox = i % g.wo, oy = (i / g.wo) % g.ho, p = i / (g.wo * g.ho);
        const T *src = in + p * g.h * g.w;
        float acc = MAX ? -INFINITY : 0.0f;
        int64_t cnt = 0;
        for (int64_t ky = 0; ky < g.kh; ky++) {
            int64_t iy = oy * g.sh - g.ph + ky;
            if (iy < 0 || iy >= g.h)
                continue;
            for (int64_t kx = 0; kx < g.kw; kx++) {
                int64_t ix = ox * g.sw - g.pw + kx;
                if (ix < 0 || ix >= g.w)
                    continue;
                float v = ncu_f(src[iy * g.w + ix]);
                if (MAX) {
                    acc = v > acc ? v : acc;
                } else {
                    acc += v;
                    cnt++;
                }
            }
        }
        if (!MAX)
            acc /= (float)(g.count_pad ? g.kh * g.kw : (cnt ? cnt : 1));
        out[i] = ncu_t<T>(acc);
    }
}

/* p: in, out; i: planes, h, w, kh, kw, sh, sw, ph, pw, ho, wo, count_pad. */
template <typename T, bool MAX> static void rz_pool(const nat_launch *l, cudaStream_t s)
{
    const nat_pool_desc *d = &l->d.pool;
    zoo_pool g = {d->planes, d->h,  d->w,  d->kh, d->kw, d->sh,
                  d->sw,     d->ph, d->pw, d->ho, d->wo, d->count_pad};
    kz_pool<T, MAX><<<ncu_blocks(g.planes * g.ho * g.wo), NCU_THREADS, 0, s>>>(
        (const T *)l->p[NAT_MOVE_IN], (T *)l->p[NAT_MOVE_OUT], g);
}

template <typename T> static void rz_maxpool(const nat_launch *l, cudaStream_t s)
{
    rz_pool<T, true>(l, s);
}

template <typename T> static void rz_avgpool(const nat_launch *l, cudaStream_t s)
{
    rz_pool<T, false>(l, s);
}

/* Adaptive average pool: one warp per output element, the lanes striding over
 * its window (a global pool's window is the whole plane: 12544 values in
 * EfficientNet's first squeeze-excite). */
struct zoo_apool {
    int64_t planes, h, w, ho, wo;
};

template <typename T>
__global__ void kz_adaptive_avgpool(const T *__restrict__ in, T *__restrict__ out, zoo_apool g)
{
    int lane = threadIdx.x & 31;
    int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    /* i is the same for the 32 lanes of a warp: the shuffles see them all. */
    for (int64_t i = warp; i < g.planes * g.ho * g.wo; i += nwarps) {
        int64_t ox = i % g.wo, oy = (i / g.wo) % g.ho, p = i / (g.wo * g.ho);
        int64_t y0 = oy * g.h / g.ho, y1 = ((oy + 1) * g.h + g.ho - 1) / g.ho;
        int64_t x0 = ox * g.w / g.wo, x1 = ((ox + 1) * g.w + g.wo - 1) / g.wo;
        int64_t bw = x1 - x0, cnt = (y1 - y0) * bw;
        const T *src = in + p * g.h * g.w;
        float sum = 0.0f;
        for (int64_t q = lane; q < cnt; q += 32)
            sum += ncu_f(src[(y0 + q / bw) * g.w + x0 + q % bw]);
        sum = ncu_warp_sum(sum);
        if (lane == 0)
            out[i] = ncu_t<T>(sum / (float)(cnt > 0 ? cnt : 1));
    }
}

/* p: in, out; i: planes, h, w, ho, wo. */
template <typename T> static void rz_adaptive_avgpool(const nat_launch *l, cudaStream_t s)
{
    const nat_pool_desc *d = &l->d.pool;
    zoo_apool g = {d->planes, d->h, d->w, d->ho, d->wo};
    kz_adaptive_avgpool<T><<<ncu_blocks(g.planes * g.ho * g.wo * 32), NCU_THREADS, 0, s>>>(
        (const T *)l->p[NAT_MOVE_IN], (T *)l->p[NAT_MOVE_OUT], g);
}

/* ---- data movement ---- */

/* out[j, :] = table[ids[j], :], ids (floats holding integers) clamped to the
 * table as on the CPU (a NaN id reads row 0). */
template <typename T>
__global__ void kz_embedding(const T *__restrict__ ids, const T *__restrict__ tab,
                             T *__restrict__ out, int64_t n, int64_t d, int64_t vocab)
{
    ZOO_FOR(i, n * d)
    {
        int64_t j = i / d, c = i % d;
        float f = ncu_f(ids[j]);
        int64_t id = f > 0.0f ? (int64_t)fminf(f, (float)(vocab - 1)) : 0;
        id = id >= vocab ? vocab - 1 : id;
        out[i] = tab[id * d + c];
    }
}

/* p: ids, table, out; i: n_ids, d, vocab. */
template <typename T> static void rz_embedding(const nat_launch *l, cudaStream_t s)
{
    int64_t n = l->d.embed.n_ids, d = l->d.embed.d, vocab = l->d.embed.vocab;
    kz_embedding<T><<<ncu_blocks(n * d), NCU_THREADS, 0, s>>>(
        (const T *)l->p[NAT_EMBED_IDS], (const T *)l->p[NAT_EMBED_TABLE], (T *)l->p[NAT_EMBED_OUT],
        n, d, vocab);
}

struct zoo_perm {
    int rank;
    int64_t total;
    int64_t odims[NCU_PERMUTE_MAX_RANK]; /* output dims */
    int64_t ist[NCU_PERMUTE_MAX_RANK];   /* input stride of each output dim */
};

/* One thread per output element (writes coalesced; reads too when the last
 * dim stays last, as in every permute of the zoo's attention heads). */
template <typename T>
__global__ void kz_permute(const T *__restrict__ in, T *__restrict__ out, zoo_perm a)
{
    ZOO_FOR(i, a.total)
    {
        int64_t rem = i, off = 0;
        for (int d = a.rank - 1; d >= 0; d--) {
            off += (rem % a.odims[d]) * a.ist[d];
            rem /= a.odims[d];
        }
        out[i] = in[off];
    }
}

/* NAT_D_PERMUTE. */
template <typename T> static void rz_permute(const nat_launch *l, cudaStream_t s)
{
    const nat_permute_desc *pd = &l->d.permute;
    zoo_perm a = {};
    int64_t istride[NCU_PERMUTE_MAX_RANK], st = 1;
    a.rank = pd->rank < NCU_PERMUTE_MAX_RANK ? pd->rank : NCU_PERMUTE_MAX_RANK;
    for (int d = a.rank - 1; d >= 0; d--) {
        istride[d] = st;
        st *= pd->dims[d];
    }
    a.total = 1;
    for (int d = 0; d < a.rank; d++) {
        int64_t p = pd->perm[d]; /* a permutation of 0..rank-1: checked when lowered */
        a.odims[d] = pd->dims[p];
        a.ist[d] = istride[p];
        a.total *= a.odims[d];
    }
    kz_permute<T><<<ncu_blocks(a.total), NCU_THREADS, 0, s>>>((const T *)l->p[NAT_MOVE_IN],
                                                              (T *)l->p[NAT_MOVE_OUT], a);
}

struct zoo_cat {
    int n_in;
    unsigned bcast; /* bit k: input k has outer size 1 */
    int64_t outer, inner, oax, total;
    int64_t ax[NCU_CONCAT_MAX_IN];
    const void *src[NCU_CONCAT_MAX_IN];
};

template <typename T> __global__ void kz_concat(T *__restrict__ out, zoo_cat a)
{
    ZOO_FOR(i, a.total)
    {
        int64_t per = a.oax * a.inner, o = i / per, rem = i % per;
        int64_t at = rem / a.inner, c = rem % a.inner, start = 0;
        int k = 0;
        while (k < a.n_in - 1 && at >= start + a.ax[k])
            start += a.ax[k++];
        int64_t so = (a.bcast >> k) & 1u ? 0 : o;
        out[i] = static_cast<const T *>(a.src[k])[(so * a.ax[k] + at - start) * a.inner + c];
    }
}

/* NAT_D_CONCAT: inputs at p[0 .. n_in), out at p[NAT_CONCAT_OUT]. */
template <typename T> static void rz_concat(const nat_launch *l, cudaStream_t s)
{
    zoo_cat a = {};
    const nat_concat_desc *c = &l->d.concat;
    a.n_in = c->n_in < NCU_CONCAT_MAX_IN ? c->n_in : NCU_CONCAT_MAX_IN;
    a.bcast = c->bcast;
    a.outer = c->outer;
    a.inner = c->inner;
    a.oax = c->out_axis;
    a.total = a.outer * a.oax * a.inner;
    for (int k = 0; k < a.n_in; k++) {
        a.ax[k] = c->axis[k];
        a.src[k] = l->p[k];
    }
    kz_concat<T><<<ncu_blocks(a.total), NCU_THREADS, 0, s>>>((T *)l->p[NAT_CONCAT_OUT], a);
}

template <typename T>
__global__ void kz_slice(const T *__restrict__ in, T *__restrict__ out, int64_t outer, int64_t ax,
                         int64_t start, int64_t len, int64_t inner)
{
    int64_t per = len * inner;
    ZOO_FOR(i, outer * per)
    {
        int64_t o = i / per, rem = i % per;
        out[i] = in[(o * ax + start) * inner + rem];
    }
}

/* p: in, out; i: outer, axis_len, start, len, inner. */
template <typename T> static void rz_slice(const nat_launch *l, cudaStream_t s)
{
    const nat_slice_desc *sd = &l->d.slice;
    int64_t outer = sd->outer, len = sd->len, inner = sd->inner;
    kz_slice<T><<<ncu_blocks(outer * len * inner), NCU_THREADS, 0, s>>>(
        (const T *)l->p[NAT_MOVE_IN], (T *)l->p[NAT_MOVE_OUT], outer, sd->axis_len, sd->start, len,
        inner);
}

/* ---- epilogue: out = act(x + bias + res) after a bare library call ---- */

struct zoo_epi {
    int64_t n, c, inner;
    int act;
};

/* x may be out (in place): no __restrict__ on either. */
template <typename T, int VEC>
__global__ void kz_epilogue(const T *x, const T *__restrict__ bias, const T *__restrict__ res,
                            T *out, zoo_epi a)
{
    ZOO_FOR(i, a.n / VEC)
    {
        ncu_vec<T, VEC> xv = reinterpret_cast<const ncu_vec<T, VEC> *>(x)[i], ov;
        ncu_vec<T, VEC> rv = res ? reinterpret_cast<const ncu_vec<T, VEC> *>(res)[i] : xv;
#pragma unroll
        for (int k = 0; k < VEC; k++) {
            int64_t idx = i * VEC + k;
            float v = ncu_f(xv.v[k]);
            if (bias)
                v += ncu_f(bias[(idx / a.inner) % a.c]);
            if (res)
                v += ncu_f(rv.v[k]);
            ov.v[k] = ncu_t<T>(zoo_act(v, a.act));
        }
        reinterpret_cast<ncu_vec<T, VEC> *>(out)[i] = ov;
    }
}

/* NAT_D_EPI. */
template <typename T> static void rz_epilogue(const nat_launch *l, cudaStream_t s)
{
    const T *x = (const T *)l->p[NAT_EPI_X], *bias = (const T *)l->p[NAT_EPI_BIAS];
    const T *res = (const T *)l->p[NAT_EPI_RES];
    T *out = (T *)l->p[NAT_EPI_OUT];
    const nat_epi_desc *e = &l->d.epi;
    zoo_epi a = {e->n, e->c > 0 ? e->c : 1, e->inner > 0 ? e->inner : 1, e->act};
    constexpr int V = zoo_vec<T>();
    if (a.n % V == 0 && zoo_aligned(x) && zoo_aligned(out) && zoo_aligned(res))
        kz_epilogue<T, V><<<ncu_blocks(a.n / V), NCU_THREADS, 0, s>>>(x, bias, res, out, a);
    else
        kz_epilogue<T, 1><<<ncu_blocks(a.n), NCU_THREADS, 0, s>>>(x, bias, res, out, a);
}

/* ---- the launch fns: dtype dispatch on the launch's stream ---- */

#define ZOO_LAUNCH_FN(NAME, RUN)                                                                   \
    extern "C" void NAME(const nat_launch *l)                                                      \
    {                                                                                              \
        const ncu_lstate *st = ncu_st(l);                                                          \
        NCU_DISPATCH(st->ctx->dtype, RUN, l, st->ctx->stream);                                     \
    }

ZOO_LAUNCH_FN(ncu_k_zoo_chain, rz_chain)
ZOO_LAUNCH_FN(ncu_k_zoo_softmax, rz_softmax)
ZOO_LAUNCH_FN(ncu_k_zoo_causal, rz_causal)
ZOO_LAUNCH_FN(ncu_k_zoo_maxpool, rz_maxpool)
ZOO_LAUNCH_FN(ncu_k_zoo_avgpool, rz_avgpool)
ZOO_LAUNCH_FN(ncu_k_zoo_adaptive_avgpool, rz_adaptive_avgpool)
ZOO_LAUNCH_FN(ncu_k_zoo_embedding, rz_embedding)
ZOO_LAUNCH_FN(ncu_k_zoo_permute, rz_permute)
ZOO_LAUNCH_FN(ncu_k_zoo_concat, rz_concat)
ZOO_LAUNCH_FN(ncu_k_zoo_slice, rz_slice)
ZOO_LAUNCH_FN(ncu_k_epilogue, rz_epilogue)
