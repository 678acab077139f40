/* attention: softmax(q k^T * scale [+ causal mask]) v over [batch, heads, seq,
 * head_dim], tensor + element + tensor.  Eager as PyTorch code without SDPA:
 * bmm(q, k^T), mul scale, [add mask,] softmax (one kernel, as torch.softmax),
 * bmm(., v) — the [bh, s, s] scores go through memory three or four times.
 * Fused: nat_attention_fused (online softmax; the scores never reach memory). */
#include <math.h>
#include <stdlib.h>

#include "nat_pat.h"

#define EAGER (1u << NAT_EAGER)
#define FUSED (1u << NAT_FUSED)

typedef struct attn_t {
    int64_t bh, s, d, causal;
    float *q, *k, *v;
} attn_t;

static fb_code attn_dims(const nat_ctx *ctx, const fb_spec *spec, attn_t *t, fb_err *err)
{
    int64_t heads = 0;
    fb_code rc = nat_pat_dim(spec, "heads", 8, 1024, &heads, err);
    if (!rc)
        rc = nat_pat_dim(spec, "seq", 512, 1 << 16, &t->s, err);
    if (!rc)
        rc = nat_pat_dim(spec, "head_dim", 64, 1024, &t->d, err);
    if (!rc)
        rc = fb_spec_param_int(spec, "causal", 0, 0, 1, &t->causal, err);
    if (!rc)
        rc = nat_pat_size("seq", ctx->batch, heads, t->s, t->s, err);
    if (!rc)
        rc = nat_pat_size("seq", ctx->batch, heads, t->s, t->d, err);
    t->bh = ctx->batch * heads;
    return rc;
}

/* c = a b (b [k, n]) or a b^T (b_trans: b [n, k]), nb times. */
static fb_code add_bmm(nat_ctx *ctx, float *a, float *b, float *c, nat_gemm_desc g, fb_err *err)
{
    nat_launch *l = NULL;
    fb_code rc = nat_pat_add(ctx, NAT_EAGER, "bmm", FB_KC_GEMM, (const char *const[]){"bmm", NULL},
                             nat_k_bmm, &l, err);
    if (rc)
        return rc;
    l->p[NAT_GEMM_A] = a;
    l->p[NAT_GEMM_B] = b;
    l->p[NAT_GEMM_C] = c;
    l->dk = NAT_D_GEMM;
    l->d.gemm = g;
    return FB_OK;
}

/* The causal mask as PyTorch code builds it: 0 on and below the diagonal, -inf
 * above, added to the scores by one broadcast kernel. */
static fb_code attn_mask(nat_ctx *ctx, const attn_t *t, float *sc, float *masked, fb_err *err)
{
    float *mask;
    nat_launch *l = NULL;
    fb_code rc = nat_pat_alloc(ctx, t->s * t->s, EAGER, "eager.mask", &mask, err);
    if (!rc)
        rc = nat_pat_add(ctx, NAT_EAGER, "add", FB_KC_ELEMENTWISE,
                         (const char *const[]){"add", NULL}, nat_k_binary, &l, err);
    if (rc)
        return rc;
    for (int64_t i = 0; i < t->s; i++)
        for (int64_t j = i + 1; j < t->s; j++)
            mask[i * t->s + j] = -INFINITY;
    l->p[NAT_ELEM_A] = sc;
    l->p[NAT_ELEM_B] = mask;
    l->p[NAT_ELEM_OUT] = masked;
    l->dk = NAT_D_ELEM;
    l->d.elem = (nat_elem_desc){
        .rows = t->bh * t->s, .cols = t->s, .op = NAT_ADD, .bcast = NAT_BC_TILE, .period = t->s};
    return FB_OK;
}

static fb_code attn_eager(nat_ctx *ctx, const attn_t *t, fb_err *err)
{
    float *sc, *scaled, *masked = NULL, *p, *out;
    int64_t ss = t->bh * t->s * t->s;
    fb_code rc = nat_pat_alloc(ctx, ss, EAGER, "eager.scores", &sc, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, ss, EAGER, "eager.scaled", &scaled, err);
    if (!rc && t->causal)
        rc = nat_pat_alloc(ctx, ss, EAGER, "eager.masked", &masked, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, ss, EAGER, "eager.probs", &p, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, t->bh * t->s * t->d, EAGER, "eager.out", &out, err);
    if (!rc)
        rc = add_bmm(ctx, t->q, t->k, sc,
                     (nat_gemm_desc){.nb = t->bh, .m = t->s, .n = t->s, .k = t->d, .b_trans = true},
                     err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "mul", NAT_MUL, NAT_BC_SCALAR, sc, NULL,
                            1.0f / sqrtf((float)t->d), scaled, 1, ss, err);
    if (!rc && t->causal)
        rc = attn_mask(ctx, t, scaled, masked, err);
    nat_launch *l = NULL;
    if (!rc)
        rc = nat_pat_add(ctx, NAT_EAGER, "softmax", FB_KC_REDUCTION,
                         (const char *const[]){"softmax", NULL}, nat_k_softmax, &l, err);
    if (rc)
        return rc;
    l->p[NAT_ROWS_X] = t->causal ? masked : scaled;
    l->p[NAT_ROWS_OUT] = p;
    l->dk = NAT_D_ROWS;
    l->d.rows = (nat_rows_desc){.rows = t->bh * t->s, .cols = t->s, .scale = 1.0f};
    rc = add_bmm(ctx, p, t->v, out, (nat_gemm_desc){.nb = t->bh, .m = t->s, .n = t->d, .k = t->s},
                 err);
    ctx->plans[NAT_EAGER].out = out;
    ctx->plans[NAT_EAGER].out_n = (size_t)(t->bh * t->s * t->d);
    return rc;
}

static fb_code attn_fused(nat_ctx *ctx, const attn_t *t, fb_err *err)
{
    float *out;
    nat_launch *l = NULL;
    static const char *const ops[] = {"bmm", "mul", "softmax", "bmm", NULL};
    static const char *const ops_causal[] = {"bmm", "mul", "add", "softmax", "bmm", NULL};
    fb_code rc = nat_pat_alloc(ctx, t->bh * t->s * t->d, FUSED, "fused.out", &out, err);
    if (!rc)
        rc = nat_pat_add(ctx, NAT_FUSED, "attention_fused", FB_KC_ATTENTION,
                         t->causal ? ops_causal : ops, nat_k_attention, &l, err);
    if (rc)
        return rc;
    l->p[NAT_ATTN_Q] = t->q;
    l->p[NAT_ATTN_K] = t->k;
    l->p[NAT_ATTN_V] = t->v;
    l->p[NAT_ATTN_O] = out;
    l->dk = NAT_D_ATTN;
    l->d.attn = (nat_attn_desc){
        .bh = t->bh, .s = t->s, .d = t->d, .causal = t->causal, .scale = 1.0f / sqrtf((float)t->d)};
    ctx->plans[NAT_FUSED].out = out;
    ctx->plans[NAT_FUSED].out_n = (size_t)(t->bh * t->s * t->d);
    return FB_OK;
}

static fb_code build(nat_ctx *ctx, const fb_spec *spec, fb_err *err)
{
    attn_t t = {0};
    fb_code rc = attn_dims(ctx, spec, &t, err);
    int64_t n = t.bh * t.s * t.d;
    if (!rc)
        rc = nat_pat_alloc(ctx, n, NAT_ALL_VARIANTS, "q", &t.q, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, n, NAT_ALL_VARIANTS, "k", &t.k, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, n, NAT_ALL_VARIANTS, "v", &t.v, err);
    if (rc)
        return rc;
    nat_fill_uniform(ctx, t.q, (size_t)n, 1, -1.0f, 1.0f);
    nat_fill_uniform(ctx, t.k, (size_t)n, 2, -1.0f, 1.0f);
    nat_fill_uniform(ctx, t.v, (size_t)n, 3, -1.0f, 1.0f);
    rc = attn_eager(ctx, &t, err);
    if (!rc)
        rc = attn_fused(ctx, &t, err);
    return rc;
}

/* One query row: scores against every allowed key, softmax, weighted sum of v. */
static void ref_row(const float *q, const float *k, const float *v, int64_t s, int64_t d, int64_t i,
                    bool causal, double *sc, double *o)
{
    int64_t nk = causal ? i + 1 : s;
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < nk; j++) {
        double acc = 0;
        for (int64_t c = 0; c < d; c++)
            acc += (double)q[i * d + c] * k[j * d + c];
        sc[j] = acc / sqrt((double)d);
        m = sc[j] > m ? sc[j] : m;
    }
    for (int64_t j = 0; j < nk; j++)
        sum += (sc[j] = exp(sc[j] - m));
    for (int64_t c = 0; c < d; c++)
        o[c] = 0;
    for (int64_t j = 0; j < nk; j++)
        for (int64_t c = 0; c < d; c++)
            o[c] += sc[j] / sum * v[j * d + c];
}

static void reference(const nat_ctx *ctx, double *out)
{
    const nat_launch *l = nat_pat_first(ctx, NAT_FUSED);
    int64_t bh = l->d.attn.bh, s = l->d.attn.s, d = l->d.attn.d;
    double *sc = malloc((size_t)s * sizeof *sc);
    if (!sc)
        return;
    for (int64_t b = 0; b < bh; b++)
        for (int64_t i = 0; i < s; i++)
            ref_row(l->p[NAT_ATTN_Q] + b * s * d, l->p[NAT_ATTN_K] + b * s * d,
                    l->p[NAT_ATTN_V] + b * s * d, s, d, i, l->d.attn.causal, sc,
                    out + (b * s + i) * d);
    free(sc);
}

const nat_pattern nat_pat_attention = {
    .info = NAT_PAT_INFO("attention", "softmax(q k^T / sqrt(d) [+ causal mask]) v",
                         "heads seq head_dim causal"),
    .build = build,
    .reference = reference,
};
