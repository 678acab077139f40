/* gr_graph: building graphs with shape inference (gr.h). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_array.h"
#include "gr.h"

static const char *const op_names[GR_OPK_COUNT] = {
    [GR_CONV2D] = "conv2d",
    [GR_CONV1D] = "conv1d",
    [GR_BATCHNORM] = "batch_norm",
    [GR_LINEAR] = "linear",
    [GR_MATMUL] = "matmul",
    [GR_ADD] = "add",
    [GR_MUL] = "mul",
    [GR_SCALE] = "scale",
    [GR_RELU] = "relu",
    [GR_RELU6] = "relu6",
    [GR_GELU] = "gelu",
    [GR_GELU_TANH] = "gelu_tanh",
    [GR_SILU] = "silu",
    [GR_SIGMOID] = "sigmoid",
    [GR_HARDSWISH] = "hardswish",
    [GR_HARDSIGMOID] = "hardsigmoid",
    [GR_TANH] = "tanh",
    [GR_MAXPOOL2D] = "max_pool2d",
    [GR_AVGPOOL2D] = "avg_pool2d",
    [GR_ADAPTIVE_AVGPOOL2D] = "adaptive_avg_pool2d",
    [GR_LAYERNORM] = "layer_norm",
    [GR_SOFTMAX] = "softmax",
    [GR_CAUSAL_MASK] = "causal_mask",
    [GR_EMBEDDING] = "embedding",
    [GR_RESHAPE] = "reshape",
    [GR_FLATTEN] = "flatten",
    [GR_PERMUTE] = "permute",
    [GR_CONCAT] = "concat",
    [GR_SLICE] = "slice",
    [GR_MEAN] = "mean",
};

const char *gr_opk_name(gr_opk op)
{
    return op >= 0 && op < GR_OPK_COUNT ? op_names[op] : "?";
}

int gr_opk_from_name(const char *s)
{
    for (int i = 0; s && i < GR_OPK_COUNT; i++)
        if (strcmp(op_names[i], s) == 0)
            return i;
    return -1;
}

bool gr_opk_is_act(gr_opk op)
{
    return op >= GR_RELU && op <= GR_TANH;
}

bool gr_opk_is_elementwise(gr_opk op)
{
    return op == GR_ADD || op == GR_MUL || op == GR_SCALE || gr_opk_is_act(op);
}

void gr_init(gr_graph *g)
{
    memset(g, 0, sizeof *g);
    g->input = g->output = -1;
}

void gr_free(gr_graph *g)
{
    if (!g)
        return;
    free(g->tensors);
    free(g->nodes);
    gr_init(g);
}

int64_t gr_numel(const gr_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

int gr_count_inputs(const gr_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->n_tensors; i++)
        n += g->tensors[i].kind == GR_T_INPUT;
    return n;
}

int gr_tensor_add(gr_graph *g, const char *name, gr_tkind kind, int rank, const int64_t *dims,
                  fb_err *err)
{
    if (rank < 0 || rank > GR_MAX_DIMS) {
        fb_err_set(err, FB_EINVAL, NULL, "tensor %s: rank %d out of 0..%d", name, rank,
                   GR_MAX_DIMS);
        return -1;
    }
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 1 || dims[i] > GR_MAX_NUMEL || __builtin_mul_overflow(n, dims[i], &n) ||
            n > GR_MAX_NUMEL) {
            fb_err_set(err, FB_EINVAL, NULL, "tensor %s: bad or too large dims", name);
            return -1;
        }
    }
    if (!fb_array_grow((void **)&g->tensors, &g->cap_tensors, g->n_tensors + 1, GR_MAX_TENSORS,
                       sizeof *g->tensors)) {
        fb_err_set(err, FB_ETOOBIG, NULL, "graph over %d tensors", GR_MAX_TENSORS);
        return -1;
    }
    gr_tensor *t = &g->tensors[g->n_tensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->rank = rank;
    memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
    t->producer = -1;
    t->view_of = -1;
    return g->n_tensors++;
}

int gr_weight(gr_graph *g, const char *name, int rank, const int64_t *dims, uint32_t init,
              int64_t fan_in, fb_err *err)
{
    int t = gr_tensor_add(g, name, GR_T_WEIGHT, rank, dims, err);
    if (t >= 0) {
        g->tensors[t].init = init;
        g->tensors[t].fan_in = fan_in > 0 ? fan_in : 1;
    }
    return t;
}

/* ---- shape inference ---- */

typedef struct shape {
    int rank;
    int64_t d[GR_MAX_DIMS];
} shape;

#define T(i) (&g->tensors[in[i]])

static bool conv_out(int64_t h, int k, int s, int p, int d, int64_t *o)
{
    if (k < 1 || s < 1 || p < 0 || d < 1)
        return false;
    int64_t span = h + 2 * (int64_t)p - (int64_t)d * (k - 1) - 1;
    *o = span < 0 ? 0 : span / s + 1;
    return span >= 0;
}

static bool infer_conv2d(const gr_graph *g, const int *in, int n_in, const gr_attr *a, shape *o)
{
    const gr_tensor *x = T(0), *w = T(1);
    int grp = a->groups;
    if (x->rank != 4 || w->rank != 4 || grp < 1 || x->dims[1] % grp || w->dims[0] % grp ||
        w->dims[1] * grp != x->dims[1])
        return false;
    if (n_in > 2 && (T(2)->rank != 1 || T(2)->dims[0] != w->dims[0]))
        return false;
    o->rank = 4;
    o->d[0] = x->dims[0];
    o->d[1] = w->dims[0];
    return conv_out(x->dims[2], (int)w->dims[2], a->stride[0], a->pad[0], a->dil[0], &o->d[2]) &&
           conv_out(x->dims[3], (int)w->dims[3], a->stride[1], a->pad[1], a->dil[1], &o->d[3]);
}

static bool infer_conv1d(const gr_graph *g, const int *in, int n_in, const gr_attr *a, shape *o)
{
    const gr_tensor *x = T(0), *w = T(1);
    int grp = a->groups;
    if (x->rank != 3 || w->rank != 3 || grp < 1 || x->dims[1] % grp || w->dims[0] % grp ||
        w->dims[1] * grp != x->dims[1])
        return false;
    if (n_in > 2 && (T(2)->rank != 1 || T(2)->dims[0] != w->dims[0]))
        return false;
    o->rank = 3;
    o->d[0] = x->dims[0];
    o->d[1] = w->dims[0];
    return conv_out(x->dims[2], (int)w->dims[2], a->stride[0], a->pad[0], a->dil[0], &o->d[2]);
}

static void copy_shape(const gr_tensor *t, shape *o)
{
    o->rank = t->rank;
    memcpy(o->d, t->dims, sizeof o->d);
}

static bool vec_of(const gr_tensor *t, int64_t n)
{
    return t->rank == 1 && t->dims[0] == n;
}

static bool infer_norm(const gr_graph *g, gr_opk op, const int *in, int n_in, shape *o)
{
    const gr_tensor *x = T(0);
    if (x->rank < 1)
        return false;
    int64_t c = op == GR_BATCHNORM ? (x->rank >= 2 ? x->dims[1] : -1) : x->dims[x->rank - 1];
    for (int i = 1; i < n_in; i++)
        if (!vec_of(T(i), c))
            return false;
    copy_shape(x, o);
    return true;
}

static bool infer_linear(const gr_graph *g, const int *in, int n_in, const gr_attr *a, shape *o)
{
    const gr_tensor *x = T(0), *w = T(1);
    if (x->rank < 1 || w->rank != 2)
        return false;
    int64_t k = x->dims[x->rank - 1];
    int64_t wn = a->trans_b ? w->dims[1] : w->dims[0], wk = a->trans_b ? w->dims[0] : w->dims[1];
    if (wk != k || (n_in > 2 && !vec_of(T(2), wn)))
        return false;
    copy_shape(x, o);
    o->d[o->rank - 1] = wn;
    return true;
}

static bool infer_matmul(const gr_graph *g, const int *in, const gr_attr *a, shape *o)
{
    const gr_tensor *x = T(0), *y = T(1);
    if (x->rank < 2 || x->rank != y->rank)
        return false;
    int r = x->rank;
    for (int i = 0; i < r - 2; i++)
        if (x->dims[i] != y->dims[i])
            return false;
    int64_t k = a->trans_b ? y->dims[r - 1] : y->dims[r - 2];
    int64_t n = a->trans_b ? y->dims[r - 2] : y->dims[r - 1];
    if (k != x->dims[r - 1])
        return false;
    copy_shape(x, o);
    o->d[r - 1] = n;
    return true;
}

/* b broadcasts onto a when it has a's shape, or is a's trailing dims after its
 * own leading 1s (a bias, a position table), or is [n, c, 1, 1] against
 * [n, c, h, w] (squeeze-excite). */
bool gr_bcast_ok(const gr_tensor *a, const gr_tensor *b);
bool gr_bcast_ok(const gr_tensor *a, const gr_tensor *b)
{
    int lead = 0; /* leading 1s of b broadcast: [1, s, d] and [1, d] act as [s, d], [d] */
    while (lead < b->rank - 1 && b->dims[lead] == 1)
        lead++;
    int rb = b->rank - lead, off = a->rank - rb;
    bool trailing = rb <= a->rank;
    for (int i = 0; trailing && i < rb; i++)
        trailing = b->dims[lead + i] == a->dims[off + i];
    if (trailing)
        return true;
    return a->rank == 4 && b->rank == 4 && b->dims[0] == a->dims[0] && b->dims[1] == a->dims[1] &&
           b->dims[2] == 1 && b->dims[3] == 1;
}

static bool infer_pool(const gr_graph *g, gr_opk op, const int *in, const gr_attr *a, shape *o)
{
    const gr_tensor *x = T(0);
    if (x->rank != 4)
        return false;
    copy_shape(x, o);
    if (op == GR_ADAPTIVE_AVGPOOL2D) {
        o->d[2] = a->kernel[0];
        o->d[3] = a->kernel[1];
        /* any output size, as PyTorch: an output larger than the input
         * averages windows of one or two inputs (VGG16's 7x7 below 224) */
        return a->kernel[0] >= 1 && a->kernel[1] >= 1;
    }
    if (a->pad[0] * 2 > a->kernel[0] || a->pad[1] * 2 > a->kernel[1])
        return false;
    return conv_out(x->dims[2], a->kernel[0], a->stride[0], a->pad[0], 1, &o->d[2]) &&
           conv_out(x->dims[3], a->kernel[1], a->stride[1], a->pad[1], 1, &o->d[3]);
}

static bool infer_reshape(const gr_graph *g, const int *in, const gr_attr *a, shape *o)
{
    const gr_tensor *x = T(0);
    int64_t n = gr_numel(x), known = 1;
    int neg = -1;
    if (a->shape_rank < 1 || a->shape_rank > GR_MAX_DIMS)
        return false;
    o->rank = a->shape_rank;
    for (int i = 0; i < o->rank; i++) {
        o->d[i] = a->shape[i];
        if (o->d[i] == -1 && neg < 0)
            neg = i;
        else if (o->d[i] < 1 || __builtin_mul_overflow(known, o->d[i], &known))
            return false;
    }
    if (neg >= 0) {
        if (n % known)
            return false;
        o->d[neg] = n / known;
        known = n;
    }
    return known == n;
}

static bool infer_flatten(const gr_graph *g, const int *in, const gr_attr *a, shape *o)
{
    const gr_tensor *x = T(0);
    if (a->axis < 0 || a->axis >= x->rank)
        return false;
    o->rank = a->axis + 1;
    for (int i = 0; i < a->axis; i++)
        o->d[i] = x->dims[i];
    o->d[a->axis] = 1;
    for (int i = a->axis; i < x->rank; i++)
        o->d[a->axis] *= x->dims[i];
    return true;
}

static bool infer_permute(const gr_graph *g, const int *in, const gr_attr *a, shape *o)
{
    const gr_tensor *x = T(0);
    unsigned seen = 0;
    o->rank = x->rank;
    for (int i = 0; i < x->rank; i++) {
        int p = a->perm[i];
        if (p < 0 || p >= x->rank || (seen & (1u << p)))
            return false;
        seen |= 1u << p;
        o->d[i] = x->dims[p];
    }
    return true;
}

static bool infer_concat(const gr_graph *g, const int *in, int n_in, const gr_attr *a, shape *o)
{
    const gr_tensor *x = T(0);
    int ax = a->axis;
    if (ax < 1 || ax >= x->rank || n_in < 2)
        return false;
    copy_shape(x, o);
    o->d[ax] = 0;
    for (int i = 0; i < n_in; i++) {
        const gr_tensor *t = T(i);
        if (t->rank != x->rank)
            return false;
        for (int d = 1; d < t->rank; d++)
            if (d != ax && t->dims[d] != x->dims[d])
                return false;
        if (t->dims[0] > o->d[0])
            o->d[0] = t->dims[0];
        o->d[ax] += t->dims[ax];
    }
    for (int i = 0; i < n_in; i++)
        if (T(i)->dims[0] != 1 && T(i)->dims[0] != o->d[0])
            return false;
    return true;
}

static bool infer_slice(const gr_graph *g, const int *in, const gr_attr *a, shape *o)
{
    const gr_tensor *x = T(0);
    if (a->axis < 0 || a->axis >= x->rank || a->start < 0 || a->end <= a->start ||
        a->end > x->dims[a->axis])
        return false;
    copy_shape(x, o);
    o->d[a->axis] = a->end - a->start;
    return true;
}

static bool infer_mean(const gr_graph *g, const int *in, const gr_attr *a, shape *o)
{
    const gr_tensor *x = T(0);
    if (a->axis < 1 || a->axis >= x->rank)
        return false;
    o->rank = a->axis;
    memcpy(o->d, x->dims, sizeof o->d);
    return true;
}

static bool infer_embedding(const gr_graph *g, const int *in, shape *o)
{
    const gr_tensor *ids = T(0), *tab = T(1);
    if (tab->rank != 2 || ids->rank >= GR_MAX_DIMS)
        return false;
    copy_shape(ids, o);
    o->d[o->rank++] = tab->dims[1];
    return true;
}

/* Expected input counts: min and max. */
static void arity(gr_opk op, int *lo, int *hi)
{
    *lo = *hi = 1;
    switch (op) {
    case GR_CONV2D:
    case GR_CONV1D:
    case GR_LINEAR:
        *lo = 2, *hi = 3;
        break;
    case GR_BATCHNORM:
        *lo = *hi = 5;
        break;
    case GR_LAYERNORM:
        *lo = *hi = 3;
        break;
    case GR_MATMUL:
    case GR_ADD:
    case GR_MUL:
    case GR_EMBEDDING:
        *lo = *hi = 2;
        break;
    case GR_CONCAT:
        *lo = 2, *hi = GR_MAX_INPUTS;
        break;
    default:
        break;
    }
}

static bool infer(const gr_graph *g, gr_opk op, const int *in, int n_in, const gr_attr *a, shape *o)
{
    switch (op) {
    case GR_CONV2D:
        return infer_conv2d(g, in, n_in, a, o);
    case GR_CONV1D:
        return infer_conv1d(g, in, n_in, a, o);
    case GR_BATCHNORM:
    case GR_LAYERNORM:
        return infer_norm(g, op, in, n_in, o);
    case GR_LINEAR:
        return infer_linear(g, in, n_in, a, o);
    case GR_MATMUL:
        return infer_matmul(g, in, a, o);
    case GR_ADD:
    case GR_MUL:
        copy_shape(T(0), o);
        return gr_bcast_ok(T(0), T(1));
    case GR_MAXPOOL2D:
    case GR_AVGPOOL2D:
    case GR_ADAPTIVE_AVGPOOL2D:
        return infer_pool(g, op, in, a, o);
    case GR_CAUSAL_MASK:
        copy_shape(T(0), o);
        return T(0)->rank >= 2 && T(0)->dims[T(0)->rank - 1] == T(0)->dims[T(0)->rank - 2];
    case GR_EMBEDDING:
        return infer_embedding(g, in, o);
    case GR_RESHAPE:
        return infer_reshape(g, in, a, o);
    case GR_FLATTEN:
        return infer_flatten(g, in, a, o);
    case GR_PERMUTE:
        return infer_permute(g, in, a, o);
    case GR_CONCAT:
        return infer_concat(g, in, n_in, a, o);
    case GR_SLICE:
        return infer_slice(g, in, a, o);
    case GR_MEAN:
        return infer_mean(g, in, a, o);
    default: /* softmax, scale and the activations keep the shape */
        copy_shape(T(0), o);
        return op >= 0 && op < GR_OPK_COUNT;
    }
}

#undef T

/* Convolutions and pools default to stride 1 and dilation 1. */
static void attr_defaults(gr_attr *a)
{
    for (int i = 0; i < 2; i++) {
        a->stride[i] = a->stride[i] ? a->stride[i] : 1;
        a->dil[i] = a->dil[i] ? a->dil[i] : 1;
    }
    a->groups = a->groups ? a->groups : 1;
}

int gr_node_add(gr_graph *g, gr_opk op, const char *name, int n_in, const int *in, const gr_attr *a,
                fb_err *err)
{
    gr_attr at = {0};
    if (a)
        at = *a;
    attr_defaults(&at);
    int lo, hi;
    arity(op, &lo, &hi);
    if (op < 0 || op >= GR_OPK_COUNT || n_in < lo || n_in > hi) {
        fb_err_set(err, FB_EINVAL, NULL, "node %s: op %s takes %d..%d inputs, not %d", name,
                   gr_opk_name(op), lo, hi, n_in);
        return -1;
    }
    for (int i = 0; i < n_in; i++) {
        if (in[i] < 0 || in[i] >= g->n_tensors) {
            fb_err_set(err, FB_EINVAL, NULL, "node %s: input %d is no tensor", name, i);
            return -1;
        }
    }
    shape o = {0};
    if (!infer(g, op, in, n_in, &at, &o)) {
        fb_err_set(err, FB_EINVAL, NULL, "node %s: inputs do not fit op %s (shape or attrs)", name,
                   gr_opk_name(op));
        return -1;
    }
    if (!fb_array_grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, GR_MAX_NODES,
                       sizeof *g->nodes)) {
        fb_err_set(err, FB_ETOOBIG, NULL, "graph over %d nodes", GR_MAX_NODES);
        return -1;
    }
    int t = gr_tensor_add(g, name, GR_T_ACT, o.rank, o.d, err);
    if (t < 0)
        return -1;
    gr_node *nd = &g->nodes[g->n_nodes];
    memset(nd, 0, sizeof *nd);
    nd->op = op;
    snprintf(nd->name, sizeof nd->name, "%s", name);
    nd->n_in = n_in;
    memcpy(nd->in, in, (size_t)n_in * sizeof *in);
    nd->out = t;
    nd->a = at;
    g->tensors[t].producer = g->n_nodes;
    if (op == GR_RESHAPE || op == GR_FLATTEN) {
        int root = in[0];
        g->tensors[t].view_of = g->tensors[root].view_of >= 0 ? g->tensors[root].view_of : root;
    }
    for (int i = 0; i < n_in; i++)
        g->tensors[in[i]].n_users++;
    g->output = t;
    g->n_nodes++;
    return t;
}
