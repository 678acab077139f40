/* gr_kern: CPU launch functions of the model zoo (gr_kern.h).  The math is the
 * pattern suite's (nat_act_apply, nat_expf), so eager and fused compute with
 * the same functions; the convolution is nat_conv2d. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "gr_kern.h"
#include "nat_kern.h"
#include "nat_kern_cpu.h"

void gr_k_conv(const nat_launch *l)
{
    nat_conv_shape s = {
        .n = (int)l->i[0],
        .ci = (int)l->i[1],
        .h = (int)l->i[2],
        .w = (int)l->i[3],
        .co = (int)l->i[4],
        .kh = (int)l->i[5],
        .kw = (int)l->i[6],
        .stride_h = (int)l->i[7],
        .stride_w = (int)l->i[8],
        .pad_h = (int)l->i[9],
        .pad_w = (int)l->i[10],
        .dil_h = (int)l->i[11],
        .dil_w = (int)l->i[12],
        .groups = (int)l->i[13],
        .blas = l->i[15] != 0,
    };
    if (!nat_conv_shape_finish(&s))
        return; /* validated when the plan was built */
    nat_conv2d(l->p[0], l->p[1], l->p[6], l->p[2], l->p[3], l->p[4], &s, (nat_act)l->i[14],
               l->p[5]);
}

/* ---- linear and MLP: the launch layouts of gr_kern.h over nat_linear and
 * nat_mlp (nat_kern_linear.c) ---- */

void gr_k_linear(const nat_launch *l)
{
    nat_weight w = {.w = l->p[1], .pw = l->p[5], .wt = l->i[4] != 0};
    nat_linear(l->p[0], w, l->p[2], l->p[3], l->p[4], l->i[0], l->i[1], l->i[2], (int)l->i[3]);
}

int64_t gr_mlp_ws(int64_t m, int64_t h, int64_t *mode, int64_t *rb, int64_t *slots)
{
    return nat_mlp_ws(m, h, mode, rb, slots);
}

void gr_k_mlp(const nat_launch *l)
{
    nat_weight w1 = {.w = l->p[1], .pw = l->p[7], .wt = (l->i[4] & 1) != 0};
    nat_weight w2 = {.w = l->p[3], .pw = l->p[8], .wt = (l->i[4] & 2) != 0};
    nat_mlp_dims d = {.m = l->i[0],
                      .d = l->i[1],
                      .h = l->i[2],
                      .act = (int)l->i[3],
                      .mode = l->i[5],
                      .rb = l->i[6],
                      .slots = l->i[7]};
    nat_mlp(l->p[0], w1, l->p[2], w2, l->p[4], l->p[9], l->p[5], l->p[6], &d);
}

/* ---- element chain ---- */

int64_t gr_chain_step(int op, int act, int bc, int operand, int64_t size)
{
    return (int64_t)(op | act << 4 | bc << 12 | operand << 16) | size << 32;
}

#define CHUNK 1024

/* Applies step code to v[0..len), elements [j0, j0+len) of the flow. */
static void chain_apply(float *v, int64_t len, int64_t j0, int64_t code, const float *b, float s)
{
    int op = (int)(code & 15), act = (int)((code >> 4) & 255), bc = (int)((code >> 12) & 15);
    int64_t size = code >> 32;
    if (op == GR_CH_ACT) {
        nat_act_vec(v, len, act);
    } else if (op == GR_CH_SCALE) {
#pragma omp simd
        for (int64_t j = 0; j < len; j++)
            v[j] *= s;
    } else if (bc == GR_BC_FULL) {
        if (op == GR_CH_ADD)
            for (int64_t j = 0; j < len; j++)
                v[j] += b[j0 + j];
        else
            for (int64_t j = 0; j < len; j++)
                v[j] *= b[j0 + j];
    } else {
        for (int64_t j = 0; j < len; j++) {
            int64_t idx = bc == GR_BC_COL ? (j0 + j) % size : (j0 + j) / size;
            v[j] = op == GR_CH_ADD ? v[j] + b[idx] : v[j] * b[idx];
        }
    }
}

NAT_SIMD_CLONES void gr_k_chain(const nat_launch *l)
{
    const float *x = l->p[0];
    float *out = l->p[1];
    int64_t n = l->i[0], steps = l->i[1], nch = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nch; c++) {
        int64_t j0 = c * CHUNK, len = n - j0 < CHUNK ? n - j0 : CHUNK;
        float *v = out + j0; /* the chunk is computed in place in out, in cache */
        if (v != x + j0)
            memcpy(v, x + j0, (size_t)len * sizeof *v);
        for (int64_t s = 0; s < steps; s++) {
            int64_t code = l->i[2 + s];
            int operand = (int)((code >> 16) & 0xffff);
            chain_apply(v, len, j0, code, l->p[2 + operand], l->f[s]);
        }
    }
}

/* ---- softmax and masks ---- */

NAT_SIMD_CLONES void gr_k_softmax(const nat_launch *l)
{
    const float *x = l->p[0];
    float *out = l->p[1];
    int64_t rows = l->i[0], cols = l->i[1];
    bool causal = l->i[2] != 0;
    float scale = l->f[0];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *o = out + r * cols;
        int64_t vis = causal ? r % cols + 1 : cols;
        float m = -INFINITY, s = 0.0f;
        for (int64_t j = 0; j < vis; j++)
            m = xr[j] * scale > m ? xr[j] * scale : m;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < vis; j++) {
            o[j] = nat_expf(xr[j] * scale - m);
            s += o[j];
        }
        float inv = 1.0f / s;
#pragma omp simd
        for (int64_t j = 0; j < vis; j++)
            o[j] *= inv;
        for (int64_t j = vis; j < cols; j++)
            o[j] = 0.0f;
    }
}

NAT_SIMD_CLONES void gr_k_causal(const nat_launch *l)
{
    const float *x = l->p[0];
    float *out = l->p[1];
    int64_t rows = l->i[0], cols = l->i[1];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t vis = r % cols + 1;
        for (int64_t j = 0; j < cols; j++)
            out[r * cols + j] = j < vis ? x[r * cols + j] : -INFINITY;
    }
}

/* ---- pools ---- */

typedef struct pool_geom {
    int64_t planes, h, w, kh, kw, sh, sw, ph, pw, ho, wo, count_pad;
} pool_geom;

static pool_geom pool_of(const nat_launch *l)
{
    pool_geom g = {l->i[0], l->i[1], l->i[2], l->i[3], l->i[4],  l->i[5],
                   l->i[6], l->i[7], l->i[8], l->i[9], l->i[10], l->i[11]};
    return g;
}

NAT_SIMD_CLONES void gr_k_maxpool(const nat_launch *l)
{
    pool_geom g = pool_of(l);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < g.planes; p++) {
        const float *in = l->p[0] + p * g.h * g.w;
        float *o = l->p[1] + p * g.ho * g.wo;
        for (int64_t oy = 0; oy < g.ho; oy++)
            for (int64_t ox = 0; ox < g.wo; ox++) {
                float m = -INFINITY;
                for (int64_t ky = 0; ky < g.kh; ky++) {
                    int64_t iy = oy * g.sh - g.ph + ky;
                    for (int64_t kx = 0; iy >= 0 && iy < g.h && kx < g.kw; kx++) {
                        int64_t ix = ox * g.sw - g.pw + kx;
                        if (ix >= 0 && ix < g.w && in[iy * g.w + ix] > m)
                            m = in[iy * g.w + ix];
                    }
                }
                o[oy * g.wo + ox] = m;
            }
    }
}

NAT_SIMD_CLONES void gr_k_avgpool(const nat_launch *l)
{
    pool_geom g = pool_of(l);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < g.planes; p++) {
        const float *in = l->p[0] + p * g.h * g.w;
        float *o = l->p[1] + p * g.ho * g.wo;
        for (int64_t oy = 0; oy < g.ho; oy++)
            for (int64_t ox = 0; ox < g.wo; ox++) {
                float s = 0.0f;
                int64_t cnt = 0;
                for (int64_t ky = 0; ky < g.kh; ky++) {
                    int64_t iy = oy * g.sh - g.ph + ky;
                    for (int64_t kx = 0; iy >= 0 && iy < g.h && kx < g.kw; kx++) {
                        int64_t ix = ox * g.sw - g.pw + kx;
                        if (ix >= 0 && ix < g.w) {
                            s += in[iy * g.w + ix];
                            cnt++;
                        }
                    }
                }
                o[oy * g.wo + ox] = s / (float)(g.count_pad ? g.kh * g.kw : (cnt ? cnt : 1));
            }
    }
}

void gr_k_adaptive_avgpool(const nat_launch *l)
{
    int64_t planes = l->i[0], h = l->i[1], w = l->i[2], ho = l->i[3], wo = l->i[4];
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        const float *in = l->p[0] + p * h * w;
        float *o = l->p[1] + p * ho * wo;
        for (int64_t oy = 0; oy < ho; oy++) {
            int64_t y0 = oy * h / ho, y1 = ((oy + 1) * h + ho - 1) / ho;
            for (int64_t ox = 0; ox < wo; ox++) {
                int64_t x0 = ox * w / wo, x1 = ((ox + 1) * w + wo - 1) / wo;
                float s = 0.0f;
                for (int64_t y = y0; y < y1; y++)
                    for (int64_t x = x0; x < x1; x++)
                        s += in[y * w + x];
                o[oy * wo + ox] = s / (float)((y1 - y0) * (x1 - x0));
            }
        }
    }
}

/* ---- data movement ---- */

void gr_k_embedding(const nat_launch *l)
{
    const float *ids = l->p[0], *tab = l->p[1];
    float *out = l->p[2];
    int64_t n = l->i[0], d = l->i[1], vocab = l->i[2];
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < n; j++) {
        int64_t id = (int64_t)ids[j];
        id = id < 0 ? 0 : (id >= vocab ? vocab - 1 : id); /* ids are checked at load */
        memcpy(out + j * d, tab + id * d, (size_t)d * sizeof *out);
    }
}

void gr_k_permute(const nat_launch *l)
{
    int rank = (int)l->i[0];
    int64_t dims[6], perm[6], istride[6], odims[6], total = 1;
    for (int d = 0; d < rank; d++)
        dims[d] = l->i[1 + d], perm[d] = l->i[7 + d];
    for (int d = rank - 1, s = 1; d >= 0; d--)
        istride[d] = s, s *= (int)dims[d];
    for (int d = 0; d < rank; d++)
        odims[d] = dims[perm[d]], total *= odims[d];
    int64_t inner = odims[rank - 1], rows = total / inner, st = istride[perm[rank - 1]];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t rem = r, off = 0;
        for (int d = rank - 2; d >= 0; d--) {
            off += (rem % odims[d]) * istride[perm[d]];
            rem /= odims[d];
        }
        const float *src = l->p[0] + off;
        float *dst = l->p[1] + r * inner;
        for (int64_t j = 0; j < inner; j++)
            dst[j] = src[j * st];
    }
}

void gr_k_concat(const nat_launch *l)
{
    int n_in = (int)l->i[0];
    int64_t outer = l->i[1], inner = l->i[2], oax = l->i[3];
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; o++) {
        float *dst = l->p[6] + o * oax * inner;
        for (int k = 0; k < n_in; k++) {
            int64_t ax = l->i[4 + k], src_o = (l->i[10] >> k) & 1 ? 0 : o;
            memcpy(dst, l->p[k] + src_o * ax * inner, (size_t)(ax * inner) * sizeof *dst);
            dst += ax * inner;
        }
    }
}

void gr_k_slice(const nat_launch *l)
{
    int64_t outer = l->i[0], ax = l->i[1], start = l->i[2], len = l->i[3], inner = l->i[4];
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; o++)
        memcpy(l->p[1] + o * len * inner, l->p[0] + (o * ax + start) * inner,
               (size_t)(len * inner) * sizeof(float));
}
