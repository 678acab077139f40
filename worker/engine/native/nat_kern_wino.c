/* nat_kern_wino: 3x3 stride-1 convolutions by Winograd's F(2x2, 3x3).
 *
 * Each 2x2 block of outputs (a tile) comes from a 4x4 patch d of the padded
 * input: Y = A^T [(G g G^T) . (B^T d B)] A, with g the 3x3 kernel.  The 16
 * products per (output channel, input channel, tile) replace 36
 * multiplications, and summed over input channels they are 16 independent
 * GEMMs: M[xi] = U[xi] V[xi] for xi = 0..15, U[xi] = (G g G^T)[xi] as
 * [co, ci], V[xi] = (B^T d B)[xi] as [ci, tiles].  So a 3x3 convolution
 * costs 16/36 of its direct multiply-adds on our packed GEMM (nat_pw_gemm),
 * plus the input and output transforms (adds, a few percent).  F(2x2, 3x3)'s
 * matrices hold only 0, +-1 and +-1/2: the rounding error stays that of a
 * direct convolution (the tests hold it to 1e-4 of the largest output
 * against a float64 reference).
 *
 * Work is cut in blocks of WG_BLK tiles of one image (2 panels of 32): a
 * thread transforms the block's input into V (already in nat_pw_gemm's panel
 * layout), runs the 16 GEMMs into M, and transforms M into the output with the
 * epilogue (bias, residual, ReLU/ReLU6 in registers; other activations on the
 * stored rows).  V and M of a block stay in L2.  With fewer blocks than
 * threads (14 x 14 at batch 1: one block) the team works on each block
 * together: input channels, the 16 GEMMs, output channels.  The input is first copied
 * with its padding (and one more zero row and column, for the last tile of an
 * odd output), so the transforms read 4x4 patches with no bounds checks.
 *
 * AVX-512 only (nat_v16_available), where nat_kern_conv.c takes it:
 * nat_wino_fits. */
#include <assert.h>
#include <immintrin.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "nat_kern.h"
#include "nat_kern_cpu.h"

#define WG_XI        16 /* transformed elements of a tile (4x4) */
#define WG_BLK       64 /* tiles per block: 2 panels of nat_pw_gemm */
#define WG_PANEL     32 /* nat_pw_gemm's panel width */
#define WG_SLACK     64 /* floats past the padded input: vector reads of the last row */
#define WG_MIN_CH    16 /* fewer channels: the transforms outweigh the saving */
#define WG_MAX_SLOTS 256

typedef struct wg_geom {
    int th, tw;    /* tiles per image: ceil(ho / 2) x ceil(wo / 2) */
    int hp, wp;    /* the padded input plane (pad, +1 row and column) */
    int nblk;      /* blocks per image */
    size_t u, pad; /* floats of U (16 co ci) and of the padded input */
    size_t v, m;   /* floats per thread of V and M */
} wg_geom;

bool nat_wino_fits(const nat_conv_shape *s)
{
    /* at least a panel of tiles: at 7 x 7 and batch 1 (16 tiles) half of each
     * GEMM's panel would be padding, and the direct path was as fast */
    int64_t tiles = (int64_t)s->n * ((s->ho + 1) / 2) * ((s->wo + 1) / 2);
    return !s->blas && nat_v16_available() && s->kh == 3 && s->kw == 3 && s->stride_h == 1 &&
           s->stride_w == 1 && s->dil_h == 1 && s->dil_w == 1 && s->groups == 1 &&
           s->ci >= WG_MIN_CH && s->co >= WG_MIN_CH && tiles >= WG_PANEL;
}

static int wg_slots(void)
{
    int t = omp_get_num_procs();
    return t < 1 ? 1 : (t > WG_MAX_SLOTS ? WG_MAX_SLOTS : t);
}

static wg_geom wg_geom_of(const nat_conv_shape *s)
{
    wg_geom g;
    g.th = (s->ho + 1) / 2;
    g.tw = (s->wo + 1) / 2;
    /* tile (ty, tx) reads padded rows 2 ty .. 2 ty + 3: up to h + 2 pad_h when
     * ho is odd, one past the padding */
    g.hp = s->h + 2 * s->pad_h + 1;
    g.wp = s->w + 2 * s->pad_w + 1;
    g.nblk = (g.th * g.tw + WG_BLK - 1) / WG_BLK;
    g.u = (size_t)WG_XI * s->co * s->ci;
    g.pad = (size_t)s->n * s->ci * g.hp * g.wp + WG_SLACK;
    g.v = (size_t)WG_XI * (WG_BLK / WG_PANEL) * s->ci * WG_PANEL;
    g.m = (size_t)WG_XI * s->co * WG_BLK;
    return g;
}

size_t nat_wino_workspace(const nat_conv_shape *s, bool prepared)
{
    wg_geom g = wg_geom_of(s);
    return (prepared ? 0 : g.u) + g.pad + (g.v + g.m) * (size_t)wg_slots();
}

size_t nat_wino_prep_floats(const nat_conv_shape *s)
{
    return wg_geom_of(s).u;
}

/* ---- transforms ---- */

/* U[xi][o][c] = (G g G^T)[xi] for kernel g = w[o][c] (3x3).  Done once at
 * plan build where the plan keeps U (nat_conv2d_prepare), else per call. */
static void weight_tf(float *u, const float *w, int co, int ci, int o)
{
    size_t xs = (size_t)co * ci; /* stride between xi */
    for (int c = 0; c < ci; c++) {
        const float *g = w + ((size_t)o * ci + c) * 9;
        float t[4][3]; /* G g: rows of the 4x3 */
        for (int j = 0; j < 3; j++) {
            t[0][j] = g[j];
            t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
            t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
            t[3][j] = g[6 + j];
        }
        for (int i = 0; i < 4; i++) { /* (G g) G^T */
            float *ui = u + (size_t)(4 * i) * xs + (size_t)o * ci + c;
            ui[0] = t[i][0];
            ui[xs] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
            ui[2 * xs] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
            ui[3 * xs] = t[i][2];
        }
    }
}

static inline __mmask16 lanes16(int n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n < 0 ? 0 : n)) - 1);
}

/* The 4 columns j of 16 tiles in one padded row: r[j] lane t = row[2 t + j]. */
__attribute__((target("avx512f"))) static inline void row_cols(const float *row, __m512 r[4])
{
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __m512i a = _mm512_loadu_si512(row), b = _mm512_loadu_si512(row + 16);
    __m512i c = _mm512_loadu_si512(row + 32);
    __m512i a2 = _mm512_alignr_epi32(b, a, 2), b2 = _mm512_alignr_epi32(c, b, 2);
    r[0] = _mm512_castsi512_ps(_mm512_permutex2var_epi32(a, ev, b));
    r[1] = _mm512_castsi512_ps(_mm512_permutex2var_epi32(a, od, b));
    r[2] = _mm512_castsi512_ps(_mm512_permutex2var_epi32(a2, ev, b2));
    r[3] = _mm512_castsi512_ps(_mm512_permutex2var_epi32(a2, od, b2));
}

/* The runs of a block: at most 16 tiles, within one tile row and one panel. */
typedef struct wg_run {
    int ty, tx0, n, l0;
} wg_run;

/* V of run r (n <= 16 tiles of tile row ty from tile column tx0) for input
 * channels [c0, c1): B^T d B, stored at the run's lanes of each V[xi]. */
__attribute__((target("avx512f"))) static void input_tf(float *v, const float *pad,
                                                        const nat_conv_shape *s, const wg_geom *g,
                                                        const wg_run *r, int c0, int c1)
{
    int ty = r->ty, tx0 = r->tx0, p = r->l0 / WG_PANEL, lane = r->l0 % WG_PANEL;
    __mmask16 live = lanes16(r->n);
    size_t xs = (size_t)(WG_BLK / WG_PANEL) * s->ci * WG_PANEL; /* stride between xi */
    for (int c = c0; c < c1; c++) {
        const float *base = pad + ((size_t)c * g->hp + 2 * ty) * g->wp + 2 * tx0;
        __m512 d[4][4], t[4][4];
        for (int i = 0; i < 4; i++)
            row_cols(base + (size_t)i * g->wp, d[i]);
        for (int j = 0; j < 4; j++) { /* B^T d: combine rows */
            t[0][j] = _mm512_sub_ps(d[0][j], d[2][j]);
            t[1][j] = _mm512_add_ps(d[1][j], d[2][j]);
            t[2][j] = _mm512_sub_ps(d[2][j], d[1][j]);
            t[3][j] = _mm512_sub_ps(d[1][j], d[3][j]);
        }
        float *dst = v + ((size_t)p * s->ci + c) * WG_PANEL + lane;
        for (int i = 0; i < 4; i++) { /* (B^T d) B: combine columns */
            __m512 e[4] = {_mm512_sub_ps(t[i][0], t[i][2]), _mm512_add_ps(t[i][1], t[i][2]),
                           _mm512_sub_ps(t[i][2], t[i][1]), _mm512_sub_ps(t[i][1], t[i][3])};
            for (int j = 0; j < 4; j++)
                _mm512_mask_storeu_ps(dst + (size_t)(4 * i + j) * xs, live, e[j]);
        }
    }
}

/* The epilogue in registers where it is bias, residual and ReLU/ReLU6 (what
 * 3x3 convolutions carry); other activations run on the stored row. */
static bool act_in_reg(int act)
{
    return act == NAT_ACT_NONE || act == NAT_ACT_RELU || act == NAT_ACT_RELU6;
}

/* Output row y (its columns 2 tx0 .. 2 tx0 + 2n, within wo) of channel o from
 * the two tile columns y0 (even x) and y1 (odd x): interleaved, epilogue,
 * stored. */
__attribute__((target("avx512f"))) static void store_row(float *out, const float *res, float bias,
                                                         int act, int cnt, __m512 y0, __m512 y1)
{
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi =
        _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    __m512 v[2] = {_mm512_permutex2var_ps(y0, lo, y1), _mm512_permutex2var_ps(y0, hi, y1)};
    bool in_reg = act_in_reg(act);
    for (int h = 0; h < 2; h++) {
        __mmask16 m = lanes16(cnt - 16 * h);
        if (!m)
            break;
        __m512 x = _mm512_add_ps(v[h], _mm512_set1_ps(bias));
        if (res)
            x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, res + 16 * h));
        if (in_reg && act != NAT_ACT_NONE)
            x = _mm512_max_ps(x, _mm512_setzero_ps());
        if (in_reg && act == NAT_ACT_RELU6)
            x = _mm512_min_ps(x, _mm512_set1_ps(6.0f));
        _mm512_mask_storeu_ps(out + 16 * h, m, x);
    }
    if (!in_reg)
        nat_act_vec(out, cnt, act);
}

/* Y = A^T M A for run r of image b, output channels [o0, o1), into the
 * output with the epilogue. */
__attribute__((target("avx512f"))) static void output_tf(const float *m, const nat_conv_args *a,
                                                         int b, const wg_run *r, int o0, int o1)
{
    const nat_conv_shape *s = a->s;
    int ty = r->ty, tx0 = r->tx0, n = r->n;
    __mmask16 live = lanes16(n);
    size_t xs = (size_t)s->co * WG_BLK;                          /* stride between xi */
    int cnt = s->wo - 2 * tx0 < 2 * n ? s->wo - 2 * tx0 : 2 * n; /* outputs per row */
    for (int o = o0; o < o1; o++) {
        const float *mo = m + (size_t)o * WG_BLK + r->l0;
        __m512 t[2][4];
        for (int j = 0; j < 4; j++) { /* A^T M: combine rows */
            __m512 m0 = _mm512_maskz_loadu_ps(live, mo + (size_t)j * xs);
            __m512 m1 = _mm512_maskz_loadu_ps(live, mo + (size_t)(4 + j) * xs);
            __m512 m2 = _mm512_maskz_loadu_ps(live, mo + (size_t)(8 + j) * xs);
            __m512 m3 = _mm512_maskz_loadu_ps(live, mo + (size_t)(12 + j) * xs);
            t[0][j] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
            t[1][j] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
        }
        float bias = a->bias ? a->bias[o] : 0.0f;
        for (int q = 0; q < 2 && 2 * ty + q < s->ho; q++) { /* (A^T M) A: combine columns */
            __m512 y0 = _mm512_add_ps(_mm512_add_ps(t[q][0], t[q][1]), t[q][2]);
            __m512 y1 = _mm512_sub_ps(_mm512_sub_ps(t[q][1], t[q][2]), t[q][3]);
            size_t off = (((size_t)b * s->co + o) * s->ho + 2 * ty + q) * s->wo + 2 * tx0;
            store_row(a->out + off, a->res ? a->res + off : NULL, bias, a->act, cnt, y0, y1);
        }
    }
}

/* Cuts block blk into runs; *nt: its tiles.  Returns how many runs. */
static int block_runs(const wg_geom *g, int blk, wg_run *runs, int *nt)
{
    int t0 = blk * WG_BLK, t1 = t0 + WG_BLK < g->th * g->tw ? t0 + WG_BLK : g->th * g->tw;
    int nr = 0;
    for (int t = t0; t < t1;) {
        int ty = t / g->tw, tx = t % g->tw, l0 = t - t0;
        int n = g->tw - tx;
        n = n < 16 ? n : 16;
        n = n < t1 - t ? n : t1 - t;
        n = n < WG_PANEL - l0 % WG_PANEL ? n : WG_PANEL - l0 % WG_PANEL;
        runs[nr++] = (wg_run){ty, tx, n, l0};
        t += n;
    }
    *nt = t1 - t0;
    return nr;
}

/* Zeroes the lanes past the block's nt tiles in its last panel, channels
 * [c0, c1) of every V[xi]: the GEMM reads whole panels (and drops those
 * columns), and left over they could hold anything, denormals that slow it
 * included. */
static void v_clear_tail(float *v, const nat_conv_shape *s, int nt, int c0, int c1)
{
    int p = nt / WG_PANEL, lane = nt % WG_PANEL;
    size_t xs = (size_t)(WG_BLK / WG_PANEL) * s->ci * WG_PANEL;
    if (lane == 0)
        return;
    for (int xi = 0; xi < WG_XI; xi++)
        for (int c = c0; c < c1; c++)
            memset(v + xi * xs + ((size_t)p * s->ci + c) * WG_PANEL + lane, 0,
                   (size_t)(WG_PANEL - lane) * sizeof(float));
}

/* GEMM xi of a block of nt tiles: M[xi] = U[xi] V[xi]. */
static void block_gemm(const nat_conv_shape *s, const float *u, const float *v, float *m, int xi,
                       int nt)
{
    size_t vxs = (size_t)(WG_BLK / WG_PANEL) * s->ci * WG_PANEL, uxs = (size_t)s->co * s->ci;
    nat_pw_gemm(u + xi * uxs, s->ci, v + xi * vxs, m + (size_t)xi * s->co * WG_BLK, WG_BLK, s->co,
                s->ci, 0, nt, false, NULL);
}

/* One block of image b by one thread: transform in, 16 GEMMs, transform out. */
static void block(const nat_conv_args *a, const wg_geom *g, const float *u, const float *pad,
                  float *v, float *m, int b, int blk)
{
    const nat_conv_shape *s = a->s;
    wg_run runs[WG_BLK];
    int nt, nr = block_runs(g, blk, runs, &nt);
    const float *pimg = pad + (size_t)b * s->ci * g->hp * g->wp;
    for (int r = 0; r < nr; r++)
        input_tf(v, pimg, s, g, &runs[r], 0, s->ci);
    v_clear_tail(v, s, nt, 0, s->ci);
    for (int xi = 0; xi < WG_XI; xi++)
        block_gemm(s, u, v, m, xi, nt);
    for (int r = 0; r < nr; r++)
        output_tf(m, a, b, &runs[r], 0, s->co);
}

/* One block of image b by the whole team (fewer blocks than threads: a
 * small image): input channels, then the 16 GEMMs, then output channels split
 * among the threads, a barrier between.  Called by every thread. */
static void block_team(const nat_conv_args *a, const wg_geom *g, const float *u, const float *pad,
                       float *v, float *m, int b, int blk)
{
    const nat_conv_shape *s = a->s;
    wg_run runs[WG_BLK];
    int nt, nr = block_runs(g, blk, runs, &nt);
    const float *pimg = pad + (size_t)b * s->ci * g->hp * g->wp;
#pragma omp for schedule(static)
    for (int c = 0; c < s->ci; c++) {
        for (int r = 0; r < nr; r++)
            input_tf(v, pimg, s, g, &runs[r], c, c + 1);
        v_clear_tail(v, s, nt, c, c + 1);
    }
#pragma omp for schedule(static)
    for (int xi = 0; xi < WG_XI; xi++)
        block_gemm(s, u, v, m, xi, nt);
#pragma omp for schedule(static)
    for (int o = 0; o < s->co; o++)
        for (int r = 0; r < nr; r++)
            output_tf(m, a, b, &runs[r], o, o + 1);
}

void nat_wino_prepare(const float *w, const nat_conv_shape *s, float *u)
{
#pragma omp parallel for schedule(static)
    for (int o = 0; o < s->co; o++)
        weight_tf(u, w, s->co, s->ci, o);
}

void nat_wino_conv(const nat_conv_args *a)
{
    const nat_conv_shape *s = a->s;
    wg_geom g = wg_geom_of(s);
    /* the workspace: [U unless prepared] padded input, then V and M per thread */
    float *u = a->prep ? NULL : a->ws, *pad = a->ws + (a->prep ? 0 : g.u), *slots = pad + g.pad;
    const float *uk = a->prep ? a->prep : u; /* the kernels, transformed */
    int threads = omp_get_max_threads() < wg_slots() ? omp_get_max_threads() : wg_slots();
    int64_t items = (int64_t)s->n * g.nblk;
    assert(nat_wino_fits(s) && a->ws != NULL);
#pragma omp parallel num_threads(threads)
    {
        float *v = slots + (g.v + g.m) * (size_t)omp_get_thread_num(), *m = v + g.v;
        if (!a->prep) {
#pragma omp for schedule(static) nowait
            for (int o = 0; o < s->co; o++)
                weight_tf(u, a->w, s->co, s->ci, o);
        }
#pragma omp for schedule(static)
        for (int64_t pi = 0; pi < (int64_t)s->n * s->ci; pi++)
            nat_conv_pad_plane(pad + pi * g.hp * g.wp, a->in + pi * s->h * s->w, s, g.hp, g.wp);
        /* the barrier: U and the padded input are whole */
        if (items >= omp_get_num_threads()) {
#pragma omp for schedule(static)
            for (int64_t it = 0; it < items; it++)
                block(a, &g, uk, pad, v, m, (int)(it / g.nblk), (int)(it % g.nblk));
        } else { /* every thread on each block, in the first thread's V and M */
            for (int64_t it = 0; it < items; it++)
                block_team(a, &g, uk, pad, slots, slots + g.v, (int)(it / g.nblk),
                           (int)(it % g.nblk));
        }
    }
}
