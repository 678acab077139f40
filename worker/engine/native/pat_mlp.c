/* mlp: linear(d->h) + bias -> GELU -> linear(h->d) + bias, tensor + element +
 * tensor.  Eager: sgemm, bias, gelu, sgemm, bias (5 kernels, three [m,h]
 * intermediates in memory).
 *
 * Fused, the default: ONE kernel over row blocks (up to 256 rows, one block per
 * thread at the default m); each thread computes its block's hidden rows, applies
 * bias+GELU there while they are in its cache and feeds them straight to the
 * second GEMM, so the [m,h] intermediate never exists as a whole: the workspace
 * is threads x 256 x h, which saves memory once m > 512.  Measured on the 2-core
 * dev box at the defaults (m=512, d=768, h=3072), medians of 15 on a loaded
 * machine: eager 64 ms, this 48 ms, the alternative (two GEMM launches with
 * epilogues, params.mlp_split=1, kept for ablation) 56 ms. */
#include <stdlib.h>

#include "nat_pat_gemm.h"

#define EAGER (1u << NAT_EAGER)
#define FUSED (1u << NAT_FUSED)

typedef struct mlp_t {
    int64_t m, d, h;
    float *x, *w1, *b1, *w2, *b2;
    float *w1p, *w2p; /* packed for nat_pw_gemm, or NULL (nat_pat_pack) */
} mlp_t;

static fb_code mlp_dims(nat_ctx *ctx, const fb_spec *spec, mlp_t *t, fb_err *err)
{
    fb_code rc = nat_pat_dim(spec, "m", 512, 1 << 20, &t->m, err);
    if (!rc)
        rc = nat_pat_dim(spec, "d", 768, 1 << 16, &t->d, err);
    if (!rc)
        rc = nat_pat_dim(spec, "h", 3072, 1 << 16, &t->h, err);
    if (rc)
        return rc;
    t->m *= ctx->batch;
    rc = nat_pat_size("m", t->m, t->h, 1, 1, err);
    if (!rc)
        rc = nat_pat_size("m", t->m, t->d, 1, 1, err);
    if (!rc)
        rc = nat_pat_size("h", t->h, t->d, 1, 1, err);
    return rc;
}

static fb_code add_gemm(nat_ctx *ctx, int v, float *a, float *b, float *bp, float *c, int64_t m,
                        int64_t n, int64_t k, fb_err *err)
{
    nat_launch *l = NULL;
    fb_code rc = nat_pat_add(ctx, v, "sgemm", FB_KC_GEMM, (const char *const[]){"linear", NULL},
                             nat_k_sgemm, &l, err);
    if (rc)
        return rc;
    l->p[NAT_GEMM_A] = a;
    l->p[NAT_GEMM_B] = b;
    l->p[NAT_GEMM_C] = c;
    l->p[NAT_GEMM_PB] = bp;
    l->dk = NAT_D_GEMM;
    l->d.gemm = (nat_gemm_desc){.nb = 1, .m = m, .n = n, .k = k};
    return FB_OK;
}

static fb_code mlp_eager(nat_ctx *ctx, const mlp_t *t, fb_err *err)
{
    float *h1, *h2, *h3, *y, *out;
    int64_t mh = t->m * t->h, md = t->m * t->d;
    fb_code rc = nat_pat_alloc(ctx, mh, EAGER, "eager.linear1", &h1, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, mh, EAGER, "eager.bias1", &h2, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, mh, EAGER, "eager.gelu", &h3, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, md, EAGER, "eager.linear2", &y, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, md, EAGER, "eager.out", &out, err);
    if (!rc)
        rc = add_gemm(ctx, NAT_EAGER, t->x, t->w1, t->w1p, h1, t->m, t->h, t->d, err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "bias", NAT_ADD, NAT_BC_COL, h1, t->b1, 0, h2, t->m,
                            t->h, err);
    if (!rc)
        rc = nat_pat_unary(ctx, NAT_EAGER, "gelu", NAT_GELU, h2, h3, mh, err);
    if (!rc)
        rc = add_gemm(ctx, NAT_EAGER, h3, t->w2, t->w2p, y, t->m, t->d, t->h, err);
    if (!rc)
        rc = nat_pat_binary(ctx, NAT_EAGER, "bias", NAT_ADD, NAT_BC_COL, y, t->b2, 0, out, t->m,
                            t->d, err);
    ctx->plans[NAT_EAGER].out = out;
    ctx->plans[NAT_EAGER].out_n = (size_t)md;
    return rc;
}

/* Two launches: gemm+bias+gelu into a full hidden buffer, then gemm+bias. */
static fb_code mlp_fused_split(nat_ctx *ctx, const mlp_t *t, float *out, fb_err *err)
{
    float *hid;
    nat_launch *l1 = NULL, *l2 = NULL;
    fb_code rc = nat_pat_alloc(ctx, t->m * t->h, FUSED, "fused.hidden", &hid, err);
    if (!rc)
        rc = nat_pat_add(ctx, NAT_FUSED, "gemm_bias_gelu", FB_KC_GEMM,
                         (const char *const[]){"linear", "bias", "gelu", NULL}, nat_k_gemm_epi, &l1,
                         err);
    if (!rc)
        rc = nat_pat_add(ctx, NAT_FUSED, "gemm_bias", FB_KC_GEMM,
                         (const char *const[]){"linear", "bias", NULL}, nat_k_gemm_epi, &l2, err);
    if (rc)
        return rc;
    l1->p[NAT_GEMM_A] = t->x;
    l1->p[NAT_GEMM_B] = t->w1;
    l1->p[NAT_GEMM_BIAS] = t->b1;
    l1->p[NAT_GEMM_C] = hid;
    l1->p[NAT_GEMM_PB] = t->w1p;
    l1->dk = NAT_D_GEMM;
    l1->d.gemm = (nat_gemm_desc){.nb = 1, .m = t->m, .n = t->h, .k = t->d, .act = NAT_ACT_GELU};
    l2->p[NAT_GEMM_A] = hid;
    l2->p[NAT_GEMM_B] = t->w2;
    l2->p[NAT_GEMM_BIAS] = t->b2;
    l2->p[NAT_GEMM_C] = out;
    l2->p[NAT_GEMM_PB] = t->w2p;
    l2->dk = NAT_D_GEMM;
    l2->d.gemm = (nat_gemm_desc){.nb = 1, .m = t->m, .n = t->d, .k = t->h, .act = NAT_ACT_NONE};
    return FB_OK;
}

static fb_code mlp_fused_blocks(nat_ctx *ctx, const mlp_t *t, float *out, fb_err *err)
{
    float *ws;
    nat_launch *l = NULL;
    int64_t rb = 0, slots = 0, ws_n = nat_mlp_fused_ws(t->m, t->h, &rb, &slots);
    fb_code rc = nat_pat_size("h", ws_n, 1, 1, 1, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, ws_n, FUSED, "fused.hidden_blocks", &ws, err);
    if (!rc)
        rc = nat_pat_add(ctx, NAT_FUSED, "mlp_fused", FB_KC_GEMM,
                         (const char *const[]){"linear", "bias", "gelu", "linear", "bias", NULL},
                         nat_k_mlp_fused, &l, err);
    if (rc)
        return rc;
    l->p[NAT_MLP_X] = t->x;
    l->p[NAT_MLP_W1] = t->w1;
    l->p[NAT_MLP_B1] = t->b1;
    l->p[NAT_MLP_W2] = t->w2;
    l->p[NAT_MLP_B2] = t->b2;
    l->p[NAT_MLP_OUT] = out;
    l->p[NAT_MLP_WS] = ws;
    l->p[NAT_MLP_PW1] = t->w1p;
    l->p[NAT_MLP_PW2] = t->w2p;
    l->dk = NAT_D_MLP;
    l->d.mlp = (nat_mlp_desc){.m = t->m,
                              .d = t->d,
                              .h = t->h,
                              .act = NAT_ACT_GELU,
                              .mode = NAT_MLP_ROWS,
                              .rb = rb,
                              .slots = slots};
    return FB_OK;
}

static fb_code build(nat_ctx *ctx, const fb_spec *spec, fb_err *err)
{
    mlp_t t;
    float *out;
    int64_t split = 0;
    fb_code rc = mlp_dims(ctx, spec, &t, err);
    if (!rc)
        rc = fb_spec_param_int(spec, "mlp_split", 0, 0, 1, &split, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, t.m * t.d, NAT_ALL_VARIANTS, "x", &t.x, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, t.d * t.h, NAT_ALL_VARIANTS, "w1", &t.w1, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, t.h, NAT_ALL_VARIANTS, "b1", &t.b1, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, t.h * t.d, NAT_ALL_VARIANTS, "w2", &t.w2, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, t.d, NAT_ALL_VARIANTS, "b2", &t.b2, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, t.m * t.d, FUSED, "fused.out", &out, err);
    if (rc)
        return rc;
    nat_fill_uniform(ctx, t.x, (size_t)(t.m * t.d), 1, -1.0f, 1.0f);
    nat_pat_fill_weight(ctx, t.w1, t.d * t.h, 2, t.d);
    nat_pat_fill_weight(ctx, t.b1, t.h, 3, t.d);
    nat_pat_fill_weight(ctx, t.w2, t.h * t.d, 4, t.h);
    nat_pat_fill_weight(ctx, t.b2, t.d, 5, t.h);
    rc = nat_pat_pack(ctx, spec, t.w1, t.d, t.h, "w1", &t.w1p, err);
    if (!rc)
        rc = nat_pat_pack(ctx, spec, t.w2, t.h, t.d, "w2", &t.w2p, err);
    if (!rc)
        rc = mlp_eager(ctx, &t, err);
    if (!rc)
        rc = split ? mlp_fused_split(ctx, &t, out, err) : mlp_fused_blocks(ctx, &t, out, err);
    ctx->plans[NAT_FUSED].out = out;
    ctx->plans[NAT_FUSED].out_n = (size_t)(t.m * t.d);
    return rc;
}

/* One row: hidden = gelu(x w1 + b1) in float64, then out = hidden w2 + b2. */
static void ref_row(const float *x, const float *w1, const float *b1, const float *w2,
                    const float *b2, int64_t d, int64_t h, double *hid, double *out)
{
    for (int64_t j = 0; j < h; j++)
        hid[j] = b1[j];
    for (int64_t p = 0; p < d; p++)
        for (int64_t j = 0; j < h; j++)
            hid[j] += (double)x[p] * w1[p * h + j];
    for (int64_t j = 0; j < h; j++)
        hid[j] = nat_pat_gelu_ref(hid[j]);
    for (int64_t j = 0; j < d; j++)
        out[j] = b2[j];
    for (int64_t p = 0; p < h; p++)
        for (int64_t j = 0; j < d; j++)
            out[j] += hid[p] * w2[p * d + j];
}

static void reference(const nat_ctx *ctx, double *out)
{
    const nat_launch *l = nat_pat_first(ctx, NAT_EAGER);
    int64_t m = l->d.gemm.m, h = l->d.gemm.n, d = l->d.gemm.k;
    double *hid = malloc((size_t)h * sizeof *hid);
    if (!hid)
        return;
    const float *x = nat_pat_buf(ctx, "x");
    for (int64_t r = 0; r < m; r++)
        ref_row(x + r * d, nat_pat_buf(ctx, "w1"), nat_pat_buf(ctx, "b1"), nat_pat_buf(ctx, "w2"),
                nat_pat_buf(ctx, "b2"), d, h, hid, out + r * d);
    free(hid);
}

const nat_pattern nat_pat_mlp = {
    .info = NAT_PAT_INFO("mlp", "linear -> bias -> GELU -> linear -> bias (transformer MLP)",
                         "m d h mlp_split"),
    .build = build,
    .reference = reference,
};
