/* gr_kern: CPU launch functions of the model zoo (gr_kern.h).  The math is the
 * pattern suite's (nat_act_vec, nat_exp_sum), so eager and fused compute with
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
    nat_k_conv2d(l);
}

void gr_k_linear(const nat_launch *l)
{
    nat_k_gemm_epi(l);
}

int64_t gr_mlp_ws(int64_t m, int64_t h, int64_t *mode, int64_t *rb, int64_t *slots)
{
    return nat_mlp_ws(m, h, mode, rb, slots);
}

void gr_k_mlp(const nat_launch *l)
{
    nat_k_mlp_fused(l);
}

/* ---- element chain ---- */

#define CHUNK 1024

/* Applies step st to v[0..len), elements [j0, j0+len) of the flow, b its
 * operand. */
/* v[j] (+ or *)= the operand of element j0 + j: by column, b[(j0 + j) % size];
 * by row, b[(j0 + j) / size].  In runs where the operand's index moves with j
 * (by column) or stays (by row), so the loops vectorize: an index computed per
 * element (a division each) made the fused chain 3.5x slower than the eager
 * kernels on [64, 131072] + a bias (the explanation's kernel_slowdown,
 * docs/EXPLAIN.md). */
static void chain_bcast(float *v, int64_t len, int64_t j0, bool add, bool by_col, int64_t size,
                        const float *b)
{
    for (int64_t j = 0; j < len;) {
        int64_t pos = (j0 + j) % size, run = size - pos < len - j ? size - pos : len - j;
        float *w = v + j;
        if (by_col && add) {
#pragma omp simd
            for (int64_t k = 0; k < run; k++)
                w[k] += b[pos + k];
        } else if (by_col) {
#pragma omp simd
            for (int64_t k = 0; k < run; k++)
                w[k] *= b[pos + k];
        } else {
            float s = b[(j0 + j) / size];
            if (add) {
#pragma omp simd
                for (int64_t k = 0; k < run; k++)
                    w[k] += s;
            } else {
#pragma omp simd
                for (int64_t k = 0; k < run; k++)
                    w[k] *= s;
            }
        }
        j += run;
    }
}

static void chain_apply(float *v, int64_t len, int64_t j0, const nat_chain_step *st, const float *b)
{
    int op = st->op, bc = st->bc;
    int64_t size = st->size;
    if (op == NAT_CH_ACT) {
        nat_act_vec(v, len, st->act);
    } else if (op == NAT_CH_SCALE) {
        float s = st->scalar;
#pragma omp simd
        for (int64_t j = 0; j < len; j++)
            v[j] *= s;
    } else if (bc == NAT_CH_FULL) {
        if (op == NAT_CH_ADD)
            for (int64_t j = 0; j < len; j++)
                v[j] += b[j0 + j];
        else
            for (int64_t j = 0; j < len; j++)
                v[j] *= b[j0 + j];
    } else {
        chain_bcast(v, len, j0, op == NAT_CH_ADD, bc == NAT_CH_COL, size, b);
    }
}

NAT_SIMD_CLONES void gr_k_chain(const nat_launch *l)
{
    const nat_chain_desc *ch = &l->d.chain;
    const float *x = l->p[NAT_CHAIN_X];
    float *out = l->p[NAT_CHAIN_OUT];
    int64_t n = ch->n, nch = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nch; c++) {
        int64_t j0 = c * CHUNK, len = n - j0 < CHUNK ? n - j0 : CHUNK;
        float *v = out + j0; /* the chunk is computed in place in out, in cache */
        if (v != x + j0)
            memcpy(v, x + j0, (size_t)len * sizeof *v);
        for (int s = 0; s < ch->n_steps; s++) {
            const nat_chain_step *st = &ch->steps[s];
            const float *b = st->op == NAT_CH_ADD || st->op == NAT_CH_MUL
                                 ? l->p[NAT_CHAIN_OPD + st->operand]
                                 : NULL;
            chain_apply(v, len, j0, st, b);
        }
    }
}

/* ---- softmax and masks ---- */

NAT_SIMD_CLONES void gr_k_softmax(const nat_launch *l)
{
    const float *x = l->p[NAT_ROWS_X];
    float *out = l->p[NAT_ROWS_OUT];
    int64_t rows = l->d.rows.rows, cols = l->d.rows.cols;
    bool causal = l->d.rows.causal;
    float scale = l->d.rows.scale;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *o = out + r * cols;
        int64_t vis = causal ? r % cols + 1 : cols;
        float m = -INFINITY;
        for (int64_t j = 0; j < vis; j++)
            m = xr[j] * scale > m ? xr[j] * scale : m;
        float inv = 1.0f / nat_exp_sum(xr, scale, m, o, vis);
#pragma omp simd
        for (int64_t j = 0; j < vis; j++)
            o[j] *= inv;
        for (int64_t j = vis; j < cols; j++)
            o[j] = 0.0f;
    }
}

NAT_SIMD_CLONES void gr_k_causal(const nat_launch *l)
{
    const float *x = l->p[NAT_ROWS_X];
    float *out = l->p[NAT_ROWS_OUT];
    int64_t rows = l->d.rows.rows, cols = l->d.rows.cols;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t vis = r % cols + 1;
        for (int64_t j = 0; j < cols; j++)
            out[r * cols + j] = j < vis ? x[r * cols + j] : -INFINITY;
    }
}

/* ---- pools ---- */

NAT_SIMD_CLONES void gr_k_maxpool(const nat_launch *l)
{
    nat_pool_desc g = l->d.pool;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < g.planes; p++) {
        const float *in = l->p[NAT_MOVE_IN] + p * g.h * g.w;
        float *o = l->p[NAT_MOVE_OUT] + p * g.ho * g.wo;
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
    nat_pool_desc g = l->d.pool;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < g.planes; p++) {
        const float *in = l->p[NAT_MOVE_IN] + p * g.h * g.w;
        float *o = l->p[NAT_MOVE_OUT] + p * g.ho * g.wo;
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
    const nat_pool_desc *g = &l->d.pool;
    int64_t planes = g->planes, h = g->h, w = g->w, ho = g->ho, wo = g->wo;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        const float *in = l->p[NAT_MOVE_IN] + p * h * w;
        float *o = l->p[NAT_MOVE_OUT] + p * ho * wo;
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
    const float *ids = l->p[NAT_EMBED_IDS], *tab = l->p[NAT_EMBED_TABLE];
    float *out = l->p[NAT_EMBED_OUT];
    int64_t n = l->d.embed.n_ids, d = l->d.embed.d, vocab = l->d.embed.vocab;
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < n; j++) {
        int64_t id = (int64_t)ids[j];
        id = id < 0 ? 0 : (id >= vocab ? vocab - 1 : id); /* ids are checked at load */
        memcpy(out + j * d, tab + id * d, (size_t)d * sizeof *out);
    }
}

void gr_k_permute(const nat_launch *l)
{
    const nat_permute_desc *pd = &l->d.permute;
    int rank = pd->rank;
    const int64_t *dims = pd->dims, *perm = pd->perm;
    int64_t istride[NAT_PERMUTE_MAX_RANK], odims[NAT_PERMUTE_MAX_RANK], total = 1;
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
        const float *src = l->p[NAT_MOVE_IN] + off;
        float *dst = l->p[NAT_MOVE_OUT] + r * inner;
        for (int64_t j = 0; j < inner; j++)
            dst[j] = src[j * st];
    }
}

void gr_k_concat(const nat_launch *l)
{
    const nat_concat_desc *c = &l->d.concat;
    int n_in = c->n_in;
    int64_t outer = c->outer, inner = c->inner, oax = c->out_axis;
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; o++) {
        float *dst = l->p[NAT_CONCAT_OUT] + o * oax * inner;
        for (int k = 0; k < n_in; k++) {
            int64_t ax = c->axis[k], src_o = (c->bcast >> k) & 1 ? 0 : o;
            memcpy(dst, l->p[k] + src_o * ax * inner, (size_t)(ax * inner) * sizeof *dst);
            dst += ax * inner;
        }
    }
}

void gr_k_slice(const nat_launch *l)
{
    const nat_slice_desc *sd = &l->d.slice;
    int64_t outer = sd->outer, ax = sd->axis_len, start = sd->start, len = sd->len;
    int64_t inner = sd->inner;
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; o++)
        memcpy(l->p[NAT_MOVE_OUT] + o * len * inner, l->p[NAT_MOVE_IN] + (o * ax + start) * inner,
               (size_t)(len * inner) * sizeof(float));
}
