/* gr_build: the model builders' helpers (gr_build.h). */
#include <stdio.h>
#include <string.h>

#include "gr_build.h"

const gr_tensor *gb_t(gb *b, int t)
{
    return &b->g->tensors[t];
}

int gb_w(gb *b, const char *prefix, const char *suffix, int rank, const int64_t *dims,
         uint32_t init, int64_t fan_in)
{
    char name[GR_NAME_MAX];
    snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    return gr_weight(b->g, name, rank, dims, init, fan_in, b->err);
}

int gb_op1(gb *b, gr_opk op, const char *name, int x, const gr_attr *a)
{
    if (x < 0)
        return -1;
    return gr_node_add(b->g, op, name, 1, (int[]){x}, a, b->err);
}

int gb_op2(gb *b, gr_opk op, const char *name, int x, int y, const gr_attr *a)
{
    if (x < 0 || y < 0)
        return -1;
    return gr_node_add(b->g, op, name, 2, (int[]){x, y}, a, b->err);
}

static int conv_any(gb *b, gr_opk op, const char *prefix, int x, int co, int k, int stride, int pad,
                    int groups, bool bias)
{
    if (x < 0)
        return -1;
    int64_t ci = gb_t(b, x)->dims[1];
    if (groups < 1 || ci % groups)
        return -1;
    int64_t wd[4] = {co, ci / groups, k, k};
    int rank = op == GR_CONV2D ? 4 : 3;
    int64_t fan = ci / groups * k * (op == GR_CONV2D ? k : 1);
    int w = gb_w(b, prefix, "weight", rank, wd, GR_INIT_FANIN, fan);
    int bb = bias ? gb_w(b, prefix, "bias", 1, (int64_t[]){co}, GR_INIT_FANIN, fan) : 0;
    if (w < 0 || bb < 0)
        return -1;
    gr_attr a = {.stride = {stride, stride}, .pad = {pad, pad}, .groups = groups};
    return gr_node_add(b->g, op, prefix, bias ? 3 : 2, (int[]){x, w, bb}, &a, b->err);
}

int gb_conv(gb *b, const char *prefix, int x, int co, int k, int stride, int pad, int groups,
            bool bias)
{
    return conv_any(b, GR_CONV2D, prefix, x, co, k, stride, pad, groups, bias);
}

int gb_conv1d(gb *b, const char *prefix, int x, int co, int k, int stride, int pad, bool bias)
{
    return conv_any(b, GR_CONV1D, prefix, x, co, k, stride, pad, 1, bias);
}

int gb_bn(gb *b, const char *prefix, int x, float eps)
{
    if (x < 0)
        return -1;
    int64_t c[1] = {gb_t(b, x)->dims[1]};
    static const char *const sfx[4] = {"weight", "bias", "running_mean", "running_var"};
    static const uint32_t init[4] = {GR_INIT_ONE, GR_INIT_SMALL, GR_INIT_SMALL, GR_INIT_VAR};
    int in[5] = {x};
    for (int i = 0; i < 4; i++)
        in[i + 1] = gb_w(b, prefix, sfx[i], 1, c, init[i], 1);
    for (int i = 1; i < 5; i++)
        if (in[i] < 0)
            return -1;
    gr_attr a = {.eps = eps};
    char name[GR_NAME_MAX];
    snprintf(name, sizeof name, "%s", prefix);
    return gr_node_add(b->g, GR_BATCHNORM, name, 5, in, &a, b->err);
}

int gb_linear(gb *b, const char *prefix, int x, int n, bool bias)
{
    if (x < 0)
        return -1;
    const gr_tensor *t = gb_t(b, x);
    int64_t k = t->dims[t->rank - 1];
    int w = gb_w(b, prefix, "weight", 2, (int64_t[]){n, k}, GR_INIT_FANIN, k);
    int bb = bias ? gb_w(b, prefix, "bias", 1, (int64_t[]){n}, GR_INIT_FANIN, k) : 0;
    if (w < 0 || bb < 0)
        return -1;
    return gr_node_add(b->g, GR_LINEAR, prefix, bias ? 3 : 2, (int[]){x, w, bb}, NULL, b->err);
}

int gb_ln(gb *b, const char *prefix, int x, float eps)
{
    if (x < 0)
        return -1;
    const gr_tensor *t = gb_t(b, x);
    int64_t d[1] = {t->dims[t->rank - 1]};
    int g = gb_w(b, prefix, "weight", 1, d, GR_INIT_ONE, 1);
    int be = gb_w(b, prefix, "bias", 1, d, GR_INIT_SMALL, 1);
    if (g < 0 || be < 0)
        return -1;
    gr_attr a = {.eps = eps};
    return gr_node_add(b->g, GR_LAYERNORM, prefix, 3, (int[]){x, g, be}, &a, b->err);
}

int gb_act(gb *b, gr_opk op, const char *name, int x)
{
    return gb_op1(b, op, name, x, NULL);
}

int gb_add(gb *b, const char *name, int x, int y)
{
    return gb_op2(b, GR_ADD, name, x, y, NULL);
}

int gb_reshape(gb *b, const char *name, int x, int rank, const int64_t *dims)
{
    gr_attr a = {.shape_rank = rank};
    memcpy(a.shape, dims, (size_t)rank * sizeof *dims);
    return gb_op1(b, GR_RESHAPE, name, x, &a);
}

int gb_permute(gb *b, const char *name, int x, int rank, const int *perm)
{
    gr_attr a = {0};
    memcpy(a.perm, perm, (size_t)rank * sizeof *perm);
    return gb_op1(b, GR_PERMUTE, name, x, &a);
}

int gb_slice(gb *b, const char *name, int x, int axis, int start, int end)
{
    gr_attr a = {.axis = axis, .start = start, .end = end};
    return gb_op1(b, GR_SLICE, name, x, &a);
}

int gb_scale(gb *b, const char *name, int x, float alpha)
{
    gr_attr a = {.alpha = alpha};
    return gb_op1(b, GR_SCALE, name, x, &a);
}

/* [n, s, d] -> [n, h, s, d/h] */
static int heads_of(gb *b, const char *name, int x, int heads)
{
    if (x < 0)
        return -1;
    const gr_tensor *t = gb_t(b, x);
    int64_t n = t->dims[0], s = t->dims[1], d = t->dims[2];
    char nm[GR_NAME_MAX];
    snprintf(nm, sizeof nm, "%s.split", name);
    int r = gb_reshape(b, nm, x, 4, (int64_t[]){n, s, heads, d / heads});
    return gb_permute(b, name, r, 4, (int[]){0, 2, 1, 3});
}

int gb_attention(gb *b, const char *prefix, int q, int k, int v, int heads, float scale,
                 bool causal)
{
    char nm[GR_NAME_MAX];
    if (q < 0 || k < 0 || v < 0)
        return -1;
    int64_t n = gb_t(b, q)->dims[0], s = gb_t(b, q)->dims[1], d = gb_t(b, q)->dims[2];
    snprintf(nm, sizeof nm, "%s.q", prefix);
    int qh = heads_of(b, nm, q, heads);
    snprintf(nm, sizeof nm, "%s.k", prefix);
    int kh = heads_of(b, nm, k, heads);
    snprintf(nm, sizeof nm, "%s.v", prefix);
    int vh = heads_of(b, nm, v, heads);
    gr_attr tb = {.trans_b = 1};
    snprintf(nm, sizeof nm, "%s.scores", prefix);
    int sc = gb_op2(b, GR_MATMUL, nm, qh, kh, &tb);
    snprintf(nm, sizeof nm, "%s.scale", prefix);
    sc = gb_scale(b, nm, sc, scale);
    if (causal) {
        snprintf(nm, sizeof nm, "%s.mask", prefix);
        sc = gb_op1(b, GR_CAUSAL_MASK, nm, sc, NULL);
    }
    snprintf(nm, sizeof nm, "%s.softmax", prefix);
    int p = gb_op1(b, GR_SOFTMAX, nm, sc, NULL);
    snprintf(nm, sizeof nm, "%s.context", prefix);
    int c = gb_op2(b, GR_MATMUL, nm, p, vh, NULL);
    snprintf(nm, sizeof nm, "%s.merge", prefix);
    c = gb_permute(b, nm, c, 4, (int[]){0, 2, 1, 3});
    snprintf(nm, sizeof nm, "%s.merged", prefix);
    return gb_reshape(b, nm, c, 3, (int64_t[]){n, s, d});
}
