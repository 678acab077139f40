/* nat_pat: helpers shared by the pattern files (nat_pat.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nat_pat.h"

fb_code nat_pat_dim(const fb_spec *spec, const char *key, int64_t def, int64_t hi, int64_t *out,
                    fb_err *err)
{
    return fb_spec_param_int(spec, key, def, 1, hi, out, err);
}

fb_code nat_pat_size(const char *key, int64_t a, int64_t b, int64_t c, int64_t d, fb_err *err)
{
    /* Each factor is bounded by its param's hi (< 2^31), so check step by step
     * to stay clear of int64 overflow. */
    int64_t f[4] = {a, b, c, d}, n = 1;
    for (int i = 0; i < 4; i++) {
        if (f[i] > NAT_PAT_MAX_FLOATS || n > NAT_PAT_MAX_FLOATS / f[i]) {
            char field[FB_ERR_FIELD_MAX];
            snprintf(field, sizeof field, "params.%s", key);
            return fb_err_set(err, FB_EINVAL, field,
                              "shape too large: a buffer would exceed %lld floats (4 GiB)",
                              (long long)NAT_PAT_MAX_FLOATS);
        }
        n *= f[i];
    }
    return FB_OK;
}

void nat_pat_fill_weight(nat_ctx *ctx, float *w, int64_t n, uint32_t stream, int64_t fan_in)
{
    float bound = 1.0f / sqrtf((float)fan_in);
    nat_fill_uniform(ctx, w, (size_t)n, stream, -bound, bound);
}

const float *nat_pat_buf(const nat_ctx *ctx, const char *name)
{
    for (int i = 0; i < ctx->n_bufs; i++)
        if (strcmp(ctx->bufs[i].name, name) == 0)
            return ctx->bufs[i].data;
    return NULL;
}

const nat_launch *nat_pat_first(const nat_ctx *ctx, int v)
{
    return &ctx->plans[v].launches[0];
}

fb_code nat_pat_add(nat_ctx *ctx, int v, const char *name, fb_kcat cat, const char *const *ops,
                    nat_kernel_fn fn, nat_launch **out, fb_err *err)
{
    fb_err local;
    *out = nat_plan_add(ctx, v, name, cat, ops, fn, err ? err : &local);
    return *out ? FB_OK : FB_EINTERNAL;
}

fb_code nat_pat_unary(nat_ctx *ctx, int v, const char *op, int unop, float *x, float *out,
                      int64_t n, fb_err *err)
{
    nat_launch *l = NULL;
    fb_code rc = nat_pat_add(ctx, v, op, FB_KC_ELEMENTWISE, (const char *const[]){op, NULL},
                             nat_k_unary, &l, err);
    if (rc)
        return rc;
    l->p[NAT_ELEM_A] = x;
    l->p[NAT_ELEM_OUT] = out;
    l->dk = NAT_D_ELEM;
    l->d.elem = (nat_elem_desc){.rows = 1, .cols = n, .op = unop, .bcast = NAT_BC_SCALAR};
    return FB_OK;
}

fb_code nat_pat_binary(nat_ctx *ctx, int v, const char *op, int binop, int bc, float *a, float *b,
                       float s, float *out, int64_t rows, int64_t cols, fb_err *err)
{
    nat_launch *l = NULL;
    fb_code rc = nat_pat_add(ctx, v, op, FB_KC_ELEMENTWISE, (const char *const[]){op, NULL},
                             nat_k_binary, &l, err);
    if (rc)
        return rc;
    l->p[NAT_ELEM_A] = a;
    l->p[NAT_ELEM_B] = b;
    l->p[NAT_ELEM_OUT] = out;
    l->dk = NAT_D_ELEM;
    l->d.elem = (nat_elem_desc){.rows = rows, .cols = cols, .op = binop, .bcast = bc, .scalar = s};
    return FB_OK;
}

fb_code nat_pat_reduce(nat_ctx *ctx, int v, const char *op, int redop, float *x, float *out,
                       int64_t rows, int64_t cols, fb_err *err)
{
    nat_launch *l = NULL;
    fb_code rc = nat_pat_add(ctx, v, op, FB_KC_REDUCTION, (const char *const[]){op, NULL},
                             nat_k_row_reduce, &l, err);
    if (rc)
        return rc;
    l->p[NAT_ROWS_X] = x;
    l->p[NAT_ROWS_OUT] = out;
    l->dk = NAT_D_REDUCE;
    l->d.rows = (nat_rows_desc){.rows = rows, .cols = cols, .op = redop, .scale = 1.0f};
    return FB_OK;
}

fb_code nat_pat_alloc(nat_ctx *ctx, int64_t n, unsigned mask, const char *name, float **out,
                      fb_err *err)
{
    fb_err local;
    fb_err *e = err ? err : &local;
    *out = nat_buf_new(ctx, (size_t)n, mask, name, e);
    return *out ? FB_OK : e->code;
}

fb_code nat_pat_pack(nat_ctx *ctx, const fb_spec *spec, const float *w, int64_t k, int64_t n,
                     const char *name, float **out, fb_err *err)
{
    bool pack;
    *out = NULL;
    fb_code rc = nat_spec_gemm_pack(spec, &pack, NULL, err);
    if (rc || !pack)
        return rc;
    char full[64];
    snprintf(full, sizeof full, "%s.packed", name);
    rc = nat_pat_size("n", nat_pw_floats(n, k), 1, 1, 1, err);
    if (!rc)
        rc = nat_pat_alloc(ctx, nat_pw_floats(n, k), NAT_ALL_VARIANTS, full, out, err);
    if (!rc)
        nat_pw_pack(w, false, n, k, *out);
    return rc;
}
