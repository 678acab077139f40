/* nat_kern_conv: 2-D convolution on the CPU, NCHW float32.
 *
 * Paths, chosen from the shape:
 *  - direct: one input channel per group (depthwise): its own kernel, since an
 *    im2col GEMM with K = kh*kw is mostly packing overhead; rows of 16 (AVX-512)
 *    or 8 (AVX2) outputs summed in registers for strides 1 and 2, whatever
 *    params.gemm says (no GEMM here), a plain loop otherwise;
 *  - 3x3 stride 1 (groups 1, 16 channels and more) where the CPU has AVX-512:
 *    Winograd F(2x2, 3x3), 16 GEMMs of 16/36 the multiply-adds
 *    (nat_kern_wino.c);
 *  - stride 1 on our packed GEMM (params.gemm "packed", or "auto" where the
 *    CPU has AVX-512: nat_pw_default; on 8 lanes not for 1x1, see
 *    conv_geom_of): no im2col at all.  The input is copied once with its padding into a
 *    buffer whose rows are w + 2 pad wide; then output pixel (oy, ox) reads
 *    input (oy + ky, ox + kx) at a fixed offset from "virtual pixel"
 *    oy * (w + 2 pad) + ox, for every (c, ky, kx), so the reduction row
 *    (c, ky, kx) of a tile is one contiguous run of the padded input, and our
 *    GEMM reads it in place through a table of run offsets
 *    (nat_pw_gemm_offsets).  The 2 pad columns of each virtual row are
 *    computed (4% of the work at 56 x 56) and dropped as the GEMM stores into
 *    the output.  A 1x1 convolution needs neither the padding nor the drop:
 *    its input plane is B as it is.  With im2col into packed panels instead,
 *    the packing was 10% of a 3x3 convolution's time.  Taken for few output
 *    channels and wide rows (CONV_IMPL_CO_MAX, CONV_IMPL_JUNK_MAX);
 *  - otherwise (strides of 2 and more, the other stride-1 shapes): im2col into
 *    a per-thread column tile of a few output rows, then one GEMM per tile.
 *    On our packed GEMM, im2col writes the tile straight into its panel
 *    layout (nat_pw_gemm: 32 output pixels x K per panel;
 *    nat_kern_conv_panels.inc, for 16 and 8 lanes) and the weights are read
 *    in place; on OpenBLAS ("openblas", or "auto" without AVX-512) im2col
 *    makes a row-major tile (the 1x1 path takes the input plane as B), and
 *    OpenBLAS packs both operands again inside every call.
 * The epilogue (bias, residual, activation) runs on each output tile right after
 * the GEMM that produced it, while the tile is still in cache.
 *
 * Threading: Debian's OpenBLAS is the pthreads build, which must not be called
 * multi-threaded from inside an OpenMP region.  We parallelize over tiles with
 * OpenMP and run each tile's sgemm single-threaded (measured faster on 2 cores
 * than a serial loop around a 2-thread sgemm: the im2col and the epilogue then
 * run in parallel too, and no two thread pools spin against each other). */
#include "nat_kern.h"
#include "nat_kern_cpu.h" /* nat_gelu: the same GELU as the eager kernels */
#include "nat_vmath.h"    /* nat_lanes8 */

#include <assert.h>
#include <cblas.h>
#include <immintrin.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Column tile target: floats of im2col per thread (1 MiB), so the tile and
 * the weights stay in this CPU's 2 MiB L2 while the GEMM streams them. */
#ifndef CONV_COL_TARGET
#define CONV_COL_TARGET (256 * 1024)
#endif
/* Upper bound on the OpenMP threads a workspace is sized for. */
#define CONV_MAX_SLOTS 256

typedef struct conv_geom {
    int cig, cog;   /* channels per group */
    int kdim;       /* cig * kh * kw: the GEMM's K */
    int plane;      /* ho * wo */
    int tile_rows;  /* output rows per tile */
    int ntiles;     /* tiles per (image, group) */
    int csplit;     /* channel chunks per tile (packed, small planes): 1 or the threads */
    size_t slot;    /* workspace floats per thread */
    bool direct;    /* depthwise loop kernel */
    bool pointwise; /* 1x1 stride 1 no pad: no im2col */
    bool packed;    /* on our GEMM: tiles in nat_pw_gemm's panel layout */
    bool implicit;  /* packed, stride 1: nat_pw_gemm_offsets on the (padded) input */
    int hp, wp;     /* implicit, not pointwise: the padded input's plane */
    size_t shared;  /* workspace floats before the per-thread slots (implicit: the
                       offset table, then the padded input) */
} conv_geom;

static bool in_range(int64_t v, int64_t lo, int64_t hi)
{
    return v >= lo && v <= hi;
}

static bool conv_args_ok(const nat_conv_shape *s)
{
    return in_range(s->n, 1, INT_MAX) && in_range(s->ci, 1, INT_MAX) &&
           in_range(s->h, 1, INT_MAX) && in_range(s->w, 1, INT_MAX) &&
           in_range(s->co, 1, INT_MAX) && in_range(s->kh, 1, INT_MAX) &&
           in_range(s->kw, 1, INT_MAX) && in_range(s->stride_h, 1, INT_MAX) &&
           in_range(s->stride_w, 1, INT_MAX) && in_range(s->pad_h, 0, INT_MAX) &&
           in_range(s->pad_w, 0, INT_MAX) && in_range(s->dil_h, 1, INT_MAX) &&
           in_range(s->dil_w, 1, INT_MAX) && in_range(s->groups, 1, INT_MAX) &&
           s->ci % s->groups == 0 && s->co % s->groups == 0;
}

/* Output extent of one dimension, or -1 when there is none. */
static int64_t conv_out_dim(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil)
{
    int64_t span = in + 2 * pad - dil * (k - 1) - 1;
    return span < 0 ? -1 : span / stride + 1;
}

/* True when the product of f[0..n) is at most INT_MAX (factors >= 0). */
static bool prod_fits(const int64_t *f, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        if (__builtin_mul_overflow(p, f[i], &p) || p > INT_MAX)
            return false;
    return true;
}

/* Every tensor (and the GEMM's dimensions) must be indexable with BLAS ints. */
static bool conv_sizes_ok(const nat_conv_shape *s, int64_t ho, int64_t wo)
{
    int64_t cig = s->ci / s->groups;
    const int64_t in[] = {s->n, s->ci, s->h, s->w};
    const int64_t out[] = {s->n, s->co, ho, wo};
    const int64_t wts[] = {s->co, cig, s->kh, s->kw};
    const int64_t col[] = {cig, s->kh, s->kw, wo}; /* one output row of im2col */
    return prod_fits(in, 4) && prod_fits(out, 4) && prod_fits(wts, 4) && prod_fits(col, 4);
}

static int conv_slots(void);

bool nat_conv_shape_finish(nat_conv_shape *s)
{
    if (s == NULL || !conv_args_ok(s) || s->threads < 0)
        return false;
    if (s->threads == 0)
        s->threads = omp_get_max_threads();
    if (s->threads > conv_slots())
        s->threads = conv_slots();
    int64_t ho = conv_out_dim(s->h, s->kh, s->stride_h, s->pad_h, s->dil_h);
    int64_t wo = conv_out_dim(s->w, s->kw, s->stride_w, s->pad_w, s->dil_w);
    if (ho < 1 || wo < 1 || !conv_sizes_ok(s, ho, wo))
        return false;
    s->ho = (int)ho;
    s->wo = (int)wo;
    return true;
}

/* Threads a workspace is sized for: the processor count, not the current
 * OpenMP thread count, so a workspace sized at plan-build time stays big
 * enough if omp_set_num_threads changes before the run.  The work is cut for
 * the shape's threads (the plan's): cut for every processor, a one-thread
 * job on 16 cores split a 7 x 7 plane's 512 channels into 16 chunks, each
 * laying out the whole plane's input again. */
static int conv_slots(void)
{
    int t = omp_get_num_procs();
    return t < 1 ? 1 : (t > CONV_MAX_SLOTS ? CONV_MAX_SLOTS : t);
}

/* Threads to run with: never more than the workspace has slots for. */
static int conv_threads(void)
{
    int t = omp_get_max_threads(), slots = conv_slots();
    return t < 1 ? 1 : (t > slots ? slots : t);
}

/* Tiles per (image, group): output rows of row_floats floats of buffer each
 * up to target floats per tile; at least one per thread when there are few
 * images, a multiple of the thread count so the last round is not half idle. */
static int conv_tile_count(const nat_conv_shape *s, int64_t row_floats, int64_t target, int slots)
{
    int64_t rows = target / (row_floats > 0 ? row_floats : 1);
    if (rows < 1)
        rows = 1;
    int64_t nt = (s->ho + rows - 1) / rows;
    int64_t items = (int64_t)s->n * s->groups;
    if (items < slots) {
        int64_t per = (slots + items - 1) / items;
        nt = (nt + per - 1) / per * per;
    }
    return nt > s->ho ? s->ho : (int)nt;
}

/* The stride-1 path's tiles: up to CONV_IMPL_TARGET floats of output (with
 * the pad columns) per tile, so its epilogue runs in L2; a tile's B, the input
 * rows it reads, is at most a few hundred KiB (KC channels' rows at a time). */
#ifndef CONV_IMPL_TARGET
#define CONV_IMPL_TARGET (64 * 1024)
#endif
#define CONV_PAD_SLACK 16 /* floats after the padded input (none are read) */
/* At most 1 in this many columns computed and dropped (a padded row is wider
 * than an output row by (kw - 1) * dil_w): 3x3 at 56 x 56 (2 of 58) and
 * 28 x 28 (2 of 30) take the path, 14 x 14 (2 of 16) and 7 x 7 do not. */
#define CONV_IMPL_JUNK_MAX 12
/* Output channels per group at most.  One core, against im2col into panels:
 * 3x3 64 -> 64 at 56 x 56 2.55 vs 2.60 ms, 1x1 256 -> 64 1.12 vs 1.17 ms;
 * but 3x3 128 -> 128 at 28 x 28 2.69 vs 2.65, 1x1 64 -> 256 1.19 vs 1.17,
 * 1x1 2048 -> 512 at 7 x 7 1.84 vs 1.37. */
#define CONV_IMPL_CO_MAX 64

static void conv_geom_implicit(conv_geom *g, const nat_conv_shape *s)
{
    int64_t k_block = g->kdim < 256 ? g->kdim : 256; /* nat_pw_gemm's KC */
    int64_t row_floats = g->pointwise ? k_block * s->wo : (int64_t)g->cog * (s->w + 2 * s->pad_w);
    g->ntiles = conv_tile_count(s, row_floats, CONV_IMPL_TARGET, s->threads);
    g->tile_rows = (s->ho + g->ntiles - 1) / g->ntiles;
    g->ntiles = (s->ho + g->tile_rows - 1) / g->tile_rows;
    g->shared = 2 * (size_t)g->kdim; /* the int64 offset table */
    if (g->pointwise)
        return; /* the output takes the GEMM's tile directly */
    g->hp = s->h + 2 * s->pad_h;
    g->wp = s->w + 2 * s->pad_w;
    g->shared += (size_t)s->n * s->ci * g->hp * g->wp + CONV_PAD_SLACK;
}

/* A small plane on few images splits its output channels among the threads,
 * not its rows: tiles of a few output rows each leave every channel's row of
 * the plane to two threads, writing the same cache lines of the output at
 * once (7 x 7: 28 and 21 of each row's 49 floats), and each tile's GEMM
 * computes a whole panel of 32 columns for its 21 or 28.  Each thread then
 * lays out the whole plane's input (at most CONV_SPLIT_PLANE columns) and
 * multiplies its own channels. */
#define CONV_SPLIT_PLANE 256
static bool conv_by_channels(const nat_conv_shape *s, const conv_geom *g)
{
    int t = s->threads;
    return t > 1 && g->ntiles > 1 && (int64_t)s->n * s->groups < t &&
           g->plane <= CONV_SPLIT_PLANE && g->cog >= 32 * t;
}

static conv_geom conv_geom_of(const nat_conv_shape *s)
{
    conv_geom g = {.csplit = 1};
    g.cig = s->ci / s->groups;
    g.cog = s->co / s->groups;
    g.kdim = g.cig * s->kh * s->kw;
    g.plane = s->ho * s->wo;
    g.direct = g.cig == 1 && s->groups > 1;
    g.pointwise = s->kh == 1 && s->kw == 1 && s->stride_h == 1 && s->stride_w == 1 &&
                  s->pad_h == 0 && s->pad_w == 0;
    g.packed = !g.direct && !s->blas;
    /* Stride 1, few output channels (the copy im2col makes costs about 1/co
     * of the GEMM: with more, the aligned panels it makes pay for it), and
     * few pad columns computed and dropped.  Not 1x1 on 8 lanes, whose tile
     * reads each panel as two halves from kdim rows of the input planes
     * apart: one core of an AMD EPYC 7003, 256 -> 64 channels at 56 x 56,
     * 2.35 ms against 1.40 ms through im2col's panels. */
    int wp = s->w + 2 * s->pad_w; /* a padded row; the output row is wo of it */
    g.implicit = g.packed && (nat_v16_available() || !g.pointwise) && s->stride_h == 1 &&
                 s->stride_w == 1 && g.cog <= CONV_IMPL_CO_MAX &&
                 (g.pointwise || (wp >= 16 && (int64_t)(wp - s->wo) * CONV_IMPL_JUNK_MAX <= wp));
    if (g.implicit) {
        conv_geom_implicit(&g, s);
        return g;
    }
    g.ntiles = conv_tile_count(s, (int64_t)g.kdim * s->wo, CONV_COL_TARGET, s->threads);
    if (g.packed && conv_by_channels(s, &g))
        g.csplit = s->threads, g.ntiles = 1;
    g.tile_rows = (s->ho + g.ntiles - 1) / g.ntiles;
    g.ntiles = (s->ho + g.tile_rows - 1) / g.tile_rows;
    if (g.packed) /* whole panels of 32 pixels, the last one zero-padded */
        g.slot = (size_t)g.kdim * (size_t)nat_pw_floats((int64_t)g.tile_rows * s->wo, 1);
    else
        g.slot = (g.direct || g.pointwise) ? 0 : (size_t)g.kdim * g.tile_rows * s->wo;
    return g;
}

size_t nat_conv2d_workspace(const nat_conv_shape *s, bool prepared)
{
    assert(s != NULL && s->ho >= 1 && s->wo >= 1); /* finished by nat_conv_shape_finish */
    if (s->ho < 1 || s->wo < 1)
        return 0;
    if (nat_wino_fits(s))
        return nat_wino_workspace(s, prepared);
    conv_geom g = conv_geom_of(s);
    return g.shared + g.slot * (size_t)conv_slots();
}

/* ---- epilogue ---- */

/* One row of cols outputs: x = act(x + b + r[i]) (r NULL: none), in place. */
static void epi_row(float *x, int cols, float b, const float *r, nat_act act)
{
    nat_epi e = {.bias = &b, .bias_rows = true, .res = r, .act = act};
    nat_epi_apply(x, 0, 0, 0, 1, cols, &e);
}

/* ---- im2col ---- */

/* Range [*lo, *hi) of output columns whose input column ox*stride + off lies
 * inside [0, w). */
static void valid_cols(int wo, int w, int stride, int off, int *lo, int *hi)
{
    int a = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int64_t last = (int64_t)w - 1 - off; /* ox*stride <= last */
    int b = last < 0 ? 0 : (int)(last / stride + 1);
    *lo = a > wo ? wo : a;
    *hi = b > wo ? wo : (b < *lo ? *lo : b);
}

/* One im2col row segment: wo outputs of input row src for column offset off. */
static void im2col_seg(float *dst, const float *src, int wo, int w, int stride, int off)
{
    int lo, hi;
    valid_cols(wo, w, stride, off, &lo, &hi);
    memset(dst, 0, (size_t)lo * sizeof(float));
    if (stride == 1) {
        memcpy(dst + lo, src + lo + off, (size_t)(hi - lo) * sizeof(float));
    } else {
        for (int ox = lo; ox < hi; ox++)
            dst[ox] = src[ox * stride + off];
    }
    memset(dst + hi, 0, (size_t)(wo - hi) * sizeof(float));
}

/* Fills col [kdim, rows*wo] for output rows [oy0, oy0+rows) of one group's
 * input channels in (cig planes of h*w). */
static void im2col_tile(float *col, const float *in, const nat_conv_shape *s, int cig, int oy0,
                        int rows)
{
    size_t ldc = (size_t)rows * s->wo;
    for (int c = 0; c < cig; c++) {
        const float *plane = in + (size_t)c * s->h * s->w;
        for (int ky = 0; ky < s->kh; ky++) {
            for (int kx = 0; kx < s->kw; kx++) {
                float *row = col + ((size_t)(c * s->kh + ky) * s->kw + kx) * ldc;
                int off = kx * s->dil_w - s->pad_w;
                for (int r = 0; r < rows; r++) {
                    int iy = (oy0 + r) * s->stride_h - s->pad_h + ky * s->dil_h;
                    float *d = row + (size_t)r * s->wo;
                    if (iy < 0 || iy >= s->h)
                        memset(d, 0, (size_t)s->wo * sizeof(float));
                    else
                        im2col_seg(d, plane + (size_t)iy * s->w, s->wo, s->w, s->stride_w, off);
                }
            }
        }
    }
}

/* ---- im2col into packed panels (nat_pw_gemm's B layout) ---- */

#define PANEL 32 /* nat_pw_gemm's panel width */

/* Mask of the first n (0..16) lanes. */
static inline __mmask16 lanes(int n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n < 0 ? 0 : n)) - 1);
}

/* Lanes j of a 16-float load at input column x0 + j that lie in [0, w),
 * within mask m. */
static inline __mmask16 in_row(int x0, int w, __mmask16 m)
{
    int lo = x0 < 0 ? -x0 : 0, hi = w - x0; /* lanes [lo, hi) are inside */
    if (hi <= lo)
        return 0;
    __mmask16 in = (__mmask16)(lanes(hi > 16 ? 16 : hi) & ~lanes(lo > 16 ? 16 : lo));
    return in & m;
}

/* A run of one panel's lanes [lane, lane+len): output pixels ox0 .. ox0+len
 * of tile row r. */
typedef struct pseg {
    int lane, len, r, ox0;
} pseg;

#define KW_MAX 16

/* im2col into the panels, for each width (nat_kern_conv_panels.inc). */
#define PANELS_ATTR       __attribute__((target("avx512f")))
#define PANELS_NAME(f)    f##16
#define PANELS_ZERO(d, m) _mm512_mask_storeu_ps(d, (__mmask16)(m), _mm512_setzero_ps())
#define PANELS_COPY(d, m, src, lm)                                                                 \
    _mm512_mask_storeu_ps(d, (__mmask16)(m), _mm512_maskz_loadu_ps((__mmask16)(lm), src))
#include "nat_kern_conv_panels.inc"
#undef PANELS_ATTR
#undef PANELS_NAME
#undef PANELS_ZERO
#undef PANELS_COPY

/* The 8-lane moves: plain ones where every lane is written and read. */
static inline void zero16_8(float *d, uint32_t m)
{
    if ((m & 0xffff) == 0xffff) {
        _mm256_storeu_ps(d, _mm256_setzero_ps());
        _mm256_storeu_ps(d + 8, _mm256_setzero_ps());
        return;
    }
    _mm256_maskstore_ps(d, nat_bits8(m), _mm256_setzero_ps());
    _mm256_maskstore_ps(d + 8, nat_bits8(m >> 8), _mm256_setzero_ps());
}

static inline void copy16_8(float *d, uint32_t m, const float *src, uint32_t lm)
{
    if ((m & 0xffff) == 0xffff && (lm & 0xffff) == 0xffff) {
        _mm256_storeu_ps(d, _mm256_loadu_ps(src));
        _mm256_storeu_ps(d + 8, _mm256_loadu_ps(src + 8));
        return;
    }
    _mm256_maskstore_ps(d, nat_bits8(m), _mm256_maskload_ps(src, nat_bits8(lm)));
    _mm256_maskstore_ps(d + 8, nat_bits8(m >> 8), _mm256_maskload_ps(src + 8, nat_bits8(lm >> 8)));
}

#define PANELS_ATTR
#define PANELS_NAME(f)             f##8
#define PANELS_ZERO(d, m)          zero16_8(d, m)
#define PANELS_COPY(d, m, src, lm) copy16_8(d, m, src, lm)
#include "nat_kern_conv_panels.inc"
#undef PANELS_ATTR
#undef PANELS_NAME
#undef PANELS_ZERO
#undef PANELS_COPY

/* The tile of output rows [oy0, oy0+rows) of one group's cig input planes as
 * panels (im2col_panels16/8, by the width this process runs). */
static void im2col_panels(float *dst, const float *in, const nat_conv_shape *s, int cig, int kdim,
                          int oy0, int rows, bool pointwise)
{
    if (nat_v16_available())
        im2col_panels16(dst, in, s, cig, kdim, oy0, rows, pointwise);
    else
        im2col_panels8(dst, in, s, cig, kdim, oy0, rows, pointwise);
}

/* ---- GEMM paths ---- */

/* The epilogue of group grp's GEMM whose output starts at out + o_off: bias
 * per output channel (a row of the GEMM), residual laid out as out. */
static nat_epi conv_epi(const nat_conv_args *a, const conv_geom *g, int grp, size_t o_off, int c_lo)
{
    return (nat_epi){.bias = a->bias != NULL ? a->bias + (size_t)grp * g->cog + c_lo : NULL,
                     .bias_rows = true,
                     .res = a->res != NULL ? a->res + o_off : NULL,
                     .ldr = g->plane,
                     .act = a->act};
}

/* One tile: image b, group grp, output rows [oy0, oy0+rows), channel chunk
 * chunk of g->csplit; col is this thread's workspace slot (unused on the
 * pointwise path). */
static void conv_gemm_tile(const nat_conv_args *a, const conv_geom *g, int b, int grp, int oy0,
                           int rows, int chunk, float *col)
{
    const nat_conv_shape *s = a->s;
    size_t img_in = (size_t)s->ci * s->h * s->w;
    const float *in = a->in + b * img_in + (size_t)grp * g->cig * s->h * s->w;
    size_t o_off = ((size_t)b * s->co + (size_t)grp * g->cog) * g->plane + (size_t)oy0 * s->wo;
    const float *wg = a->w + (size_t)grp * g->cog * g->kdim;
    int cols = rows * s->wo;
    const float *bm = col;
    int ldb = cols;
    if (g->packed) { /* the epilogue runs inside, on blocks of channels in cache */
        /* this chunk's channels: whole blocks of 16, the last chunk the rest */
        int per = (g->cog / g->csplit + 15) / 16 * 16;
        int c_lo = chunk * per < g->cog ? chunk * per : g->cog;
        int c_hi = chunk + 1 == g->csplit || c_lo + per > g->cog ? g->cog : c_lo + per;
        if (c_hi <= c_lo)
            return;
        nat_epi epi = conv_epi(a, g, grp, o_off + (size_t)c_lo * g->plane, c_lo);
        im2col_panels(col, in, s, g->cig, g->kdim, oy0, rows, g->pointwise);
        nat_pw_gemm(wg + (size_t)c_lo * g->kdim, g->kdim, col,
                    a->out + o_off + (size_t)c_lo * g->plane, g->plane, c_hi - c_lo, g->kdim, 0,
                    cols, false, &epi);
        return;
    }
    nat_epi epi = conv_epi(a, g, grp, o_off, 0);
    if (g->pointwise) {
        bm = in + (size_t)oy0 * s->wo;
        ldb = g->plane;
    } else {
        im2col_tile(col, in, s, g->cig, oy0, rows);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->cog, cols, g->kdim, 1.0f, wg, g->kdim,
                bm, ldb, 0.0f, a->out + o_off, g->plane);
    nat_epi_apply(a->out + o_off, g->plane, 0, 0, g->cog, cols, &epi);
}

/* ---- stride 1: our GEMM on the input in place (nat_pw_gemm_offsets) ---- */

/* The run offset of each reduction row (c, ky, kx): in the input plane for
 * 1x1, else in the padded input, relative to the tile's first virtual pixel. */
static void implicit_offsets(int64_t *koff, const conv_geom *g, const nat_conv_shape *s)
{
    if (g->pointwise) {
        for (int c = 0; c < g->cig; c++)
            koff[c] = (int64_t)c * g->plane;
        return;
    }
    int64_t pplane = (int64_t)g->hp * g->wp, kk = 0;
    for (int c = 0; c < g->cig; c++)
        for (int ky = 0; ky < s->kh; ky++)
            for (int kx = 0; kx < s->kw; kx++)
                koff[kk++] = c * pplane + (int64_t)ky * s->dil_h * g->wp + (int64_t)kx * s->dil_w;
}

void nat_conv_pad_plane(float *dst, const float *src, const nat_conv_shape *s, int hp, int wp)
{
    memset(dst, 0, (size_t)s->pad_h * wp * sizeof(float));
    dst += (size_t)s->pad_h * wp;
    for (int y = 0; y < s->h; y++, dst += wp) {
        memset(dst, 0, (size_t)s->pad_w * sizeof(float));
        memcpy(dst + s->pad_w, src + (size_t)y * s->w, (size_t)s->w * sizeof(float));
        memset(dst + s->pad_w + s->w, 0, (size_t)(wp - s->pad_w - s->w) * sizeof(float));
    }
    memset(dst, 0, (size_t)(hp - s->pad_h - s->h) * wp * sizeof(float));
}

/* One tile: image b, group grp, output rows [oy0, oy0+rows): the GEMM
 * writes the output, epilogue included; for kxk its columns are virtual
 * pixels (rows of wp, the last 2 pad_w of each dropped). */
static void implicit_tile(const nat_conv_args *a, const conv_geom *g, const int64_t *koff,
                          const float *padded, int b, int grp, int oy0, int rows)
{
    const nat_conv_shape *s = a->s;
    size_t o_off = ((size_t)b * s->co + (size_t)grp * g->cog) * g->plane + (size_t)oy0 * s->wo;
    size_t first_plane = (size_t)b * s->ci + (size_t)grp * g->cig;
    const float *wg = a->w + (size_t)grp * g->cog * g->kdim;
    nat_epi epi = conv_epi(a, g, grp, o_off, 0);
    if (g->pointwise) {
        const float *bsrc = a->in + first_plane * g->plane + (size_t)oy0 * s->wo;
        nat_pw_gemm_offsets(wg, g->kdim, bsrc, koff, a->out + o_off, g->plane, g->cog, g->kdim,
                            (int64_t)rows * s->wo, 0, 0, &epi);
        return;
    }
    const float *bsrc = padded + first_plane * g->hp * g->wp + (size_t)oy0 * g->wp;
    int64_t ncols = (int64_t)(rows - 1) * g->wp + s->wo;
    nat_pw_gemm_offsets(wg, g->kdim, bsrc, koff, a->out + o_off, g->plane, g->cog, g->kdim, ncols,
                        g->wp, s->wo, &epi);
}

static void conv_gemm(const nat_conv_args *a, const conv_geom *g)
{
    const nat_conv_shape *s = a->s;
    int64_t items = (int64_t)s->n * s->groups * g->ntiles * g->csplit;
    int64_t *koff = g->implicit ? (int64_t *)a->ws : NULL; /* 64-byte aligned (nat_buf) */
    float *padded = g->implicit ? a->ws + 2 * (size_t)g->kdim : NULL;
    float *slots = a->ws != NULL ? a->ws + g->shared : NULL;
    int blas_threads = openblas_get_num_threads();
    if (koff)
        implicit_offsets(koff, g, s);
    openblas_set_num_threads(1);
#pragma omp parallel num_threads(conv_threads())
    {
        float *col = slots != NULL ? slots + g->slot * (size_t)omp_get_thread_num() : NULL;
        if (g->implicit && !g->pointwise) {
#pragma omp for schedule(static)
            for (int64_t pi = 0; pi < (int64_t)s->n * s->ci; pi++)
                nat_conv_pad_plane(padded + pi * g->hp * g->wp, a->in + pi * s->h * s->w, s, g->hp,
                                   g->wp);
        } /* the for's barrier: the padded input is whole */
#pragma omp for schedule(static)
        for (int64_t it = 0; it < items; it++) {
            int chunk = (int)(it % g->csplit);
            int t = (int)(it / g->csplit % g->ntiles);
            int64_t bg = it / g->csplit / g->ntiles;
            int oy0 = t * g->tile_rows;
            int rows = s->ho - oy0 < g->tile_rows ? s->ho - oy0 : g->tile_rows;
            int b = (int)(bg / s->groups), grp = (int)(bg % s->groups);
            if (g->implicit)
                implicit_tile(a, g, koff, padded, b, grp, oy0, rows);
            else
                conv_gemm_tile(a, g, b, grp, oy0, rows, chunk, col);
        }
    }
    openblas_set_num_threads(blas_threads);
}

/* ---- direct (depthwise) path ---- */

/* acc[0..wo) += wt * input row src at columns ox*stride + off (zero outside). */
static void dw_tap(float *acc, const float *src, float wt, int wo, int w, int stride, int off)
{
    int lo, hi;
    valid_cols(wo, w, stride, off, &lo, &hi);
    if (stride == 1) {
        const float *p = src + off;
#pragma omp simd
        for (int ox = lo; ox < hi; ox++)
            acc[ox] += wt * p[ox];
    } else {
        for (int ox = lo; ox < hi; ox++)
            acc[ox] += wt * src[ox * stride + off];
    }
}

/* Output row oy of output channel oc of image b, without the epilogue
 * (conv_direct runs it on the plane). */
static void dw_row(const nat_conv_args *a, int b, int oc, int oy)
{
    const nat_conv_shape *s = a->s;
    int mult = s->co / s->groups;
    const float *plane = a->in + ((size_t)b * s->ci + oc / mult) * s->h * s->w;
    const float *wk = a->w + (size_t)oc * s->kh * s->kw;
    size_t o_off = (((size_t)b * s->co + oc) * s->ho + oy) * s->wo;
    float *acc = a->out + o_off;
    memset(acc, 0, (size_t)s->wo * sizeof(float));
    for (int ky = 0; ky < s->kh; ky++) {
        int iy = oy * s->stride_h - s->pad_h + ky * s->dil_h;
        if (iy < 0 || iy >= s->h)
            continue;
        const float *src = plane + (size_t)iy * s->w;
        for (int kx = 0; kx < s->kw; kx++)
            dw_tap(acc, src, wk[ky * s->kw + kx], s->wo, s->w, s->stride_w,
                   kx * s->dil_w - s->pad_w);
    }
}

/* dw_row with the taps summed in registers (AVX-512, 16 lanes, in dw_row_v;
 * AVX2, 8 lanes, in dw_row_v8; strides 1 and 2): each chunk of outputs loads
 * its inputs once per tap and stores once, where dw_row reads and writes the
 * output row once per tap (9 times for 3x3).  Lanes whose input column falls
 * in the padding are masked out of the load (masks per kernel column, shared
 * by the kernel rows).  Without a residual the bias is added in registers, and
 * ReLU/ReLU6 applied there (dw_act_in_reg); other activations run on the
 * whole plane after it (conv_direct), through nat_act_vec: SiLU in registers
 * (a variant built and dropped) made EfficientNet's 7 x 7 depthwise + SiLU
 * 1.45x slower than this (0.380 against 0.262 ms, 1152 channels, AVX2, one
 * thread), its exp's chain of dependent instructions per chunk added to the
 * taps'. */
#define DW_KW_MAX 16

/* Whether dw_row_v/dw_row_v8 add the bias in registers: without a residual
 * (which conv_direct adds with the bias, on the plane). */
static bool dw_bias_in_reg(const nat_conv_args *a)
{
    return a->res == NULL;
}

/* Whether they also apply the activation there: the cheap ones. */
static bool dw_act_in_reg(const nat_conv_args *a)
{
    return dw_bias_in_reg(a) &&
           (a->act == NAT_ACT_NONE || a->act == NAT_ACT_RELU || a->act == NAT_ACT_RELU6);
}

__attribute__((target("avx512f"))) static void dw_row_v(const nat_conv_args *a, int b, int oc,
                                                        int oy)
{
    const nat_conv_shape *s = a->s;
    int mult = s->co / s->groups, st = s->stride_w;
    const float *plane = a->in + ((size_t)b * s->ci + oc / mult) * s->h * s->w;
    const float *wk = a->w + (size_t)oc * s->kh * s->kw;
    size_t o_off = (((size_t)b * s->co + oc) * s->ho + oy) * s->wo;
    float *dst = a->out + o_off;
    float bias = a->bias != NULL && dw_bias_in_reg(a) ? a->bias[oc] : 0.0f;
    nat_act act = dw_act_in_reg(a) ? a->act : NAT_ACT_NONE;
    const __m512i evens =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    __mmask16 m_lo[DW_KW_MAX], m_hi[DW_KW_MAX];
    for (int ox0 = 0; ox0 < s->wo; ox0 += 16) {
        int n = s->wo - ox0 < 16 ? s->wo - ox0 : 16;
        __mmask16 live = lanes(n);
        for (int kx = 0; kx < s->kw; kx++) {
            int ix0 = ox0 * st + kx * s->dil_w - s->pad_w; /* input column of lane 0 */
            m_lo[kx] = in_row(ix0, s->w, st == 1 ? live : 0xffff);
            m_hi[kx] = st == 1 ? 0 : in_row(ix0 + 16, s->w, 0xffff);
        }
        __m512 acc = _mm512_setzero_ps();
        for (int ky = 0; ky < s->kh; ky++) {
            int iy = oy * s->stride_h - s->pad_h + ky * s->dil_h;
            if (iy < 0 || iy >= s->h)
                continue;
            const float *row = plane + (size_t)iy * s->w + ox0 * st - s->pad_w;
            const float *wr = wk + ky * s->kw;
            for (int kx = 0; kx < s->kw; kx++) {
                const float *x = row + kx * s->dil_w;
                __m512 v;
                if (st == 1) {
                    v = _mm512_maskz_loadu_ps(m_lo[kx], x);
                } else { /* the even ones of 32 inputs */
                    __m512 lo = _mm512_maskz_loadu_ps(m_lo[kx], x);
                    __m512 hi = _mm512_maskz_loadu_ps(m_hi[kx], x + 16);
                    v = _mm512_permutex2var_ps(lo, evens, hi);
                }
                acc = _mm512_fmadd_ps(_mm512_set1_ps(wr[kx]), v, acc);
            }
        }
        acc = _mm512_add_ps(acc, _mm512_set1_ps(bias));
        if (act != NAT_ACT_NONE)
            acc = _mm512_max_ps(acc, _mm512_setzero_ps());
        if (act == NAT_ACT_RELU6)
            acc = _mm512_min_ps(acc, _mm512_set1_ps(6.0f));
        _mm512_mask_storeu_ps(dst + ox0, live, acc);
    }
}

/* The lanes j of an 8-float load at input column x0 + j that lie in [0, w),
 * within mask m. */
static inline __m256i in_row8(int x0, int w, __m256i m)
{
    __m256i x = _mm256_add_epi32(_mm256_set1_epi32(x0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i in = _mm256_and_si256(_mm256_cmpgt_epi32(x, _mm256_set1_epi32(-1)),
                                  _mm256_cmpgt_epi32(_mm256_set1_epi32(w), x));
    return _mm256_and_si256(in, m);
}

/* One input vector of a tap: 8 columns from x (stride 1) or the even ones of
 * 16 (stride 2), masked by lo/hi or, with masked false, plain. */
static inline __attribute__((always_inline)) __m256 dw_load8(const float *x, bool s2, bool masked,
                                                             __m256i lo, __m256i hi)
{
    if (!s2)
        return masked ? _mm256_maskload_ps(x, lo) : _mm256_loadu_ps(x);
    __m256 a = masked ? _mm256_maskload_ps(x, lo) : _mm256_loadu_ps(x);
    __m256 b = masked ? _mm256_maskload_ps(x + 8, hi) : _mm256_loadu_ps(x + 8);
    __m256 ev = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)); /* a0 a2 b0 b2 a4 a6 b4 b6 */
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8));
}

/* bias, then act (NONE, RELU or RELU6), in registers. */
static inline __m256 dw_epi8(__m256 acc, __m256 bias, nat_act act)
{
    acc = _mm256_add_ps(acc, bias);
    if (act != NAT_ACT_NONE)
        acc = _mm256_max_ps(acc, _mm256_setzero_ps());
    if (act == NAT_ACT_RELU6)
        acc = _mm256_min_ps(acc, _mm256_set1_ps(6.0f));
    return acc;
}

/* dw_row_v on 8 lanes (AVX2, the build's baseline), for CPUs without AVX-512,
 * with the kernel's size K (3 or 5, square; 0: any, from the shape) and the
 * activation constant in each copy (dw_row_v8 picks the copy): the kernel rows'
 * input rows and the weights' broadcasts are set once per output row, and the
 * taps of a chunk unroll into two chains of FMAs (even and odd kernel rows).
 * Chunks whose every input column lies inside the row load plainly (a variant
 * with a masked load per tap, weights loaded per chunk, took 3.36 ms where
 * dw_row takes 1.73: 96 channels of 112 x 112, 3x3, one thread), the others
 * masked. */
#define DW8_KMAX 5

static inline __attribute__((always_inline)) void dw_row_v8_k(const nat_conv_args *a, int b, int oc,
                                                              int oy, nat_act act, int K)
{
    const nat_conv_shape *s = a->s;
    int kh = K ? K : s->kh, kw = K ? K : s->kw;
    int mult = s->co / s->groups, st = s->stride_w, dil = s->dil_w;
    bool s2 = st == 2;
    const float *plane = a->in + ((size_t)b * s->ci + oc / mult) * s->h * s->w;
    const float *wk = a->w + (size_t)oc * s->kh * s->kw;
    float *dst = a->out + (((size_t)b * s->co + oc) * s->ho + oy) * s->wo;
    __m256 bias = _mm256_set1_ps(a->bias != NULL && dw_bias_in_reg(a) ? a->bias[oc] : 0.0f);
    /* the last input column a chunk reads, past its first output's */
    int reach = 7 * st + (s2 ? 1 : 0) + (kw - 1) * dil;
    const __m256i all = _mm256_set1_epi32(-1), none = _mm256_setzero_si256();
    __m256i m_lo[DW_KW_MAX], m_hi[DW_KW_MAX];
    const float *rows[DW8_KMAX]; /* K > 0: input row of each kernel row, NULL outside */
    __m256 wv[3 * 3];
    if (K)
        for (int ky = 0; ky < K; ky++) {
            int iy = oy * s->stride_h - s->pad_h + ky * s->dil_h;
            rows[ky] = iy >= 0 && iy < s->h ? plane + (size_t)iy * s->w - s->pad_w : NULL;
            for (int kx = 0; kx < K && K <= 3; kx++)
                wv[ky * K + kx] = _mm256_set1_ps(wk[ky * K + kx]);
        }
    for (int ox0 = 0; ox0 < s->wo; ox0 += 8) {
        int ix0 = ox0 * st - s->pad_w; /* input column of lane 0 at kx = 0 */
        bool inside = ox0 + 8 <= s->wo && ix0 >= 0 && ix0 + reach < s->w;
        __m256i live = nat_lanes8(s->wo - ox0);
        if (!inside)
            for (int kx = 0; kx < kw; kx++) {
                int x0 = ix0 + kx * dil;
                m_lo[kx] = in_row8(x0, s->w, s2 ? all : live);
                m_hi[kx] = s2 ? in_row8(x0 + 8, s->w, all) : none;
            }
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        if (K) {
            for (int ky = 0; ky < K; ky++) {
                if (rows[ky] == NULL)
                    continue;
                const float *x = rows[ky] + ox0 * st;
                for (int kx = 0; kx < K; kx++) {
                    __m256 v = inside ? dw_load8(x + kx * dil, s2, false, none, none)
                                      : dw_load8(x + kx * dil, s2, true, m_lo[kx], m_hi[kx]);
                    /* 3x3's 9 broadcasts stay in registers; 5x5's 25 would spill */
                    __m256 wt = K <= 3 ? wv[ky * K + kx] : _mm256_broadcast_ss(&wk[ky * K + kx]);
                    if (ky & 1)
                        acc1 = _mm256_fmadd_ps(wt, v, acc1);
                    else
                        acc0 = _mm256_fmadd_ps(wt, v, acc0);
                }
            }
        } else {
            for (int ky = 0; ky < kh; ky++) {
                int iy = oy * s->stride_h - s->pad_h + ky * s->dil_h;
                if (iy < 0 || iy >= s->h)
                    continue;
                const float *x = plane + (size_t)iy * s->w + ix0;
                for (int kx = 0; kx < kw; kx++)
                    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(wk[ky * kw + kx]),
                                           dw_load8(x + kx * dil, s2, !inside, m_lo[kx], m_hi[kx]),
                                           acc0);
            }
        }
        __m256 out = dw_epi8(_mm256_add_ps(acc0, acc1), bias, act);
        if (inside)
            _mm256_storeu_ps(dst + ox0, out);
        else
            _mm256_maskstore_ps(dst + ox0, live, out);
    }
}

#define DW8_ACTS(K)                                                                                \
    do {                                                                                           \
        if (act == NAT_ACT_RELU)                                                                   \
            dw_row_v8_k(a, b, oc, oy, NAT_ACT_RELU, K);                                            \
        else if (act == NAT_ACT_RELU6)                                                             \
            dw_row_v8_k(a, b, oc, oy, NAT_ACT_RELU6, K);                                           \
        else                                                                                       \
            dw_row_v8_k(a, b, oc, oy, NAT_ACT_NONE, K);                                            \
    } while (0)

static void dw_row_v8(const nat_conv_args *a, int b, int oc, int oy)
{
    const nat_conv_shape *s = a->s;
    nat_act act = dw_act_in_reg(a) ? a->act : NAT_ACT_NONE;
    if (s->kh == 3 && s->kw == 3)
        DW8_ACTS(3);
    else if (s->kh == 5 && s->kw == 5)
        DW8_ACTS(5);
    else
        DW8_ACTS(0);
}

/* Threads take whole output planes (image, channel), and an epilogue that is
 * not applied in registers runs once on each plane while it is in cache: per
 * row (7 outputs at 7 x 7) its calls cost more than the convolution, and the
 * fused depthwise conv + SiLU of EfficientNet ran at 0.47x of eager's conv
 * then SiLU (1152 channels, 7 x 7, one thread: 0.75 against 0.36 ms). */
/* Test only: FB_TEST_DW_ROW_EPILOGUE=1 puts back the epilogue per output row
 * (the schedule that lost efficientnet_b0's depthwise groups, above), so that
 * tests/e2e/test_explain_loss.py can check that the explanation names them. */
static bool dw_row_epilogue(void)
{
    static int on = -1; /* read once, before any parallel region */
    if (on < 0) {
        const char *e = getenv("FB_TEST_DW_ROW_EPILOGUE");
        on = e && strcmp(e, "1") == 0;
    }
    return on == 1;
}

static void conv_direct(const nat_conv_args *a)
{
    const nat_conv_shape *s = a->s;
    int64_t planes = (int64_t)s->n * s->co, plane = (int64_t)s->ho * s->wo;
    bool vec = (s->stride_w == 1 || s->stride_w == 2) && s->kw <= DW_KW_MAX;
    bool v16 = vec && nat_v16_available();
    /* what the rows leave for the plane: everything (dw_row), the bias with the
     * residual and the activation, or the activation alone */
    bool epi_after = !vec || !dw_bias_in_reg(a);
    bool act_after = vec && dw_bias_in_reg(a) && !dw_act_in_reg(a);
    bool by_row = (epi_after || act_after) && dw_row_epilogue();
#pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < planes; pl++) {
        int b = (int)(pl / s->co), oc = (int)(pl % s->co);
        float bias = a->bias != NULL ? a->bias[oc] : 0.0f;
        float *out = a->out + pl * plane;
        const float *res = a->res != NULL ? a->res + pl * plane : NULL;
        for (int oy = 0; oy < s->ho; oy++) {
            if (v16)
                dw_row_v(a, b, oc, oy);
            else if (vec)
                dw_row_v8(a, b, oc, oy);
            else
                dw_row(a, b, oc, oy);
            int64_t o = (int64_t)oy * s->wo;
            if (by_row && epi_after)
                epi_row(out + o, s->wo, bias, res != NULL ? res + o : NULL, a->act);
            else if (by_row)
                nat_act_vec(out + o, s->wo, a->act);
        }
        if (epi_after && !by_row)
            epi_row(out, (int)plane, bias, res, a->act);
        else if (act_after && !by_row)
            nat_act_vec(out, plane, a->act); /* the eager pass's, on the plane in L1 */
    }
}

nat_impl nat_conv2d_impl(const nat_conv_shape *s)
{
    if (nat_wino_fits(s))
        return NAT_IMPL_WINOGRAD;
    conv_geom g = conv_geom_of(s);
    if (g.direct)
        return NAT_IMPL_LOOP;
    return g.packed ? NAT_IMPL_PACKED_GEMM : NAT_IMPL_OPENBLAS;
}

size_t nat_conv2d_prep_floats(const nat_conv_shape *s)
{
    return nat_wino_fits(s) ? nat_wino_prep_floats(s) : 0;
}

void nat_conv2d_prepare(const float *w, const nat_conv_shape *s, float *prep)
{
    if (nat_wino_fits(s))
        nat_wino_prepare(w, s, prep);
}

void nat_conv2d(const float *in, const float *w, const float *prep, const float *bias,
                const float *residual, float *out, const nat_conv_shape *s, nat_act act,
                float *workspace)
{
    assert(s->ho >= 1 && s->wo >= 1);
    nat_conv_args a = {in, w, prep, bias, residual, out, s, act, workspace};
    if (nat_wino_fits(s)) {
        nat_wino_conv(&a);
        return;
    }
    conv_geom g = conv_geom_of(s);
    assert(workspace != NULL || (g.slot == 0 && g.shared == 0));
    if (g.direct)
        conv_direct(&a);
    else
        conv_gemm(&a, &g);
}
