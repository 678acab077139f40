/* gr_lower: groups to launches (gr_plan.h), with the activation memory planner.
 *
 * Memory: only tensors that leave a group reach memory.  Each gets a lifetime
 * [position of its producing group, position of its last reading group] in the
 * emission order, and an offset in one arena: tensors are placed largest first
 * at the lowest offset that overlaps no placed tensor alive at the same time
 * (greedy by size, as TFLite's and PyTorch's static planners do).  Views
 * (reshape, flatten) share their root's memory and extend its lifetime.  So a
 * variant's activation memory is the arena's size, and eager against fused
 * compares the real peak of each. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gr_kern.h"
#include "gr_plan.h"
#include "nat_kern.h"
#include "nat_kern_cpu.h"

#define ALIGN_FLOATS 16 /* 64 bytes */

typedef struct lower {
    nat_ctx *ctx;
    gr_graph *g;
    const gr_groups *gs;
    int v;
    int *order;        /* emission order: group indexes sorted by last node */
    int *first, *last; /* per tensor: lifetime in positions, -1 not in the arena */
    int64_t *off;      /* per tensor: arena offset in floats */
    float *arena;
    float *conv_ws; /* shared by every conv of this variant */
    float *mlp_ws;
    bool no_pack;          /* the job's GEMM is OpenBLAS's (params.gemm; a node's gemm
                              may say otherwise: node_blas) */
    const int *node_group; /* per node, the fused plan's group id for the launches, or NULL */
    fb_err *err;
} lower;

static const gr_node *nd(const lower *L, int i)
{
    return &L->g->nodes[i];
}

static gr_tensor *ten(const lower *L, int t)
{
    return &L->g->tensors[t];
}

static int root_of(const lower *L, int t)
{
    return ten(L, t)->view_of >= 0 ? ten(L, t)->view_of : t;
}

/* The memory of tensor t in this variant. */
static float *tp(const lower *L, int t)
{
    int r = root_of(L, t);
    if (ten(L, r)->kind != GR_T_ACT)
        return ten(L, r)->data;
    return L->arena + L->off[r];
}

/* ---- emission order and lifetimes ---- */

static int group_last(const lower *L, int gi)
{
    const gr_group *g = &L->gs->g[gi];
    return g->nodes[g->n - 1];
}

/* A sort key with its index: qsort has no context argument in C11, so keys are
 * computed first (no file-level state: builds may run in parallel threads). */
typedef struct keyed {
    int64_t key;
    int idx;
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    return (x->key > y->key) - (x->key < y->key);
}

/* Sorts ids[0..n) by key(ids[i]) ascending (ties keep index order). */
static bool sort_by(int *ids, int n, const int64_t *key)
{
    keyed *k = malloc((size_t)(n + 1) * sizeof *k);
    if (!k)
        return false;
    for (int i = 0; i < n; i++)
        k[i] = (keyed){key[i] * ((int64_t)1 << 20) + i, ids[i]};
    qsort(k, (size_t)n, sizeof *k, cmp_keyed);
    for (int i = 0; i < n; i++)
        ids[i] = k[i].idx;
    free(k);
    return true;
}

static bool in_group(const gr_group *grp, const gr_graph *g, int t)
{
    for (int k = 0; k < grp->n; k++)
        if (g->nodes[grp->nodes[k]].out == t)
            return true;
    return false;
}

/* Lifetimes of the arena tensors (roots of group outputs). */
static void lifetimes(lower *L)
{
    for (int t = 0; t < L->g->n_tensors; t++)
        L->first[t] = L->last[t] = -1;
    for (int pos = 0; pos < L->gs->n; pos++) {
        const gr_group *grp = &L->gs->g[L->order[pos]];
        int out = root_of(L, nd(L, grp->nodes[grp->n - 1])->out);
        L->first[out] = L->last[out] = pos;
        for (int k = 0; k < grp->n; k++) {
            const gr_node *n = nd(L, grp->nodes[k]);
            for (int j = 0; j < n->n_in; j++) {
                int r = root_of(L, n->in[j]);
                if (!in_group(grp, L->g, n->in[j]) && L->first[r] >= 0)
                    L->last[r] = pos;
            }
        }
    }
    int out = root_of(L, L->g->output);
    if (L->first[out] >= 0)
        L->last[out] = L->gs->n; /* the output outlives the plan */
}

static int64_t round_up(int64_t n)
{
    return (n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
}

/* Greedy placement, largest first: returns the arena size in floats, -1 on
 * ENOMEM. */
static int64_t place(lower *L, int *ids, int n)
{
    int64_t *key = malloc((size_t)(n + 1) * sizeof *key);
    if (!key)
        return -1;
    for (int i = 0; i < n; i++)
        key[i] = -gr_numel(ten(L, ids[i]));
    bool sorted = sort_by(ids, n, key);
    free(key);
    if (!sorted)
        return -1;
    int64_t total = 0;
    for (int a = 0; a < n; a++) {
        int t = ids[a];
        int64_t sz = round_up(gr_numel(ten(L, t))), at = 0;
        bool moved = true;
        while (moved) { /* first fit: bump past every live overlap until none is left */
            moved = false;
            for (int b = 0; b < a; b++) {
                int u = ids[b];
                int64_t us = round_up(gr_numel(ten(L, u)));
                bool live = L->first[t] <= L->last[u] && L->first[u] <= L->last[t];
                if (live && at < L->off[u] + us && L->off[u] < at + sz) {
                    at = L->off[u] + us;
                    moved = true;
                }
            }
        }
        L->off[t] = at;
        total = at + sz > total ? at + sz : total;
    }
    return total;
}

static fb_code plan_memory(lower *L)
{
    int n = 0;
    int *ids = malloc((size_t)L->g->n_tensors * sizeof *ids);
    if (!ids)
        return fb_err_set(L->err, FB_ENOMEM, NULL, "cannot allocate the memory planner");
    lifetimes(L);
    for (int t = 0; t < L->g->n_tensors; t++)
        if (L->first[t] >= 0 && ten(L, t)->kind == GR_T_ACT)
            ids[n++] = t;
    int64_t total = place(L, ids, n);
    free(ids);
    if (total < 0)
        return fb_err_set(L->err, FB_ENOMEM, NULL, "cannot allocate the memory planner");
    static const char *const names[] = {"arena.eager", "arena.fused", "arena.2", "arena.3"};
    L->arena =
        nat_buf_new(L->ctx, (size_t)(total > 0 ? total : 1), 1u << L->v, names[L->v], L->err);
    return L->arena ? FB_OK : L->err->code;
}

/* ---- helpers for launches ---- */

static int act_of(gr_opk op)
{
    static const int map[][2] = {
        {GR_RELU, NAT_ACT_RELU},           {GR_RELU6, NAT_ACT_RELU6},
        {GR_GELU, NAT_ACT_GELU},           {GR_GELU_TANH, NAT_ACT_GELU_TANH},
        {GR_SILU, NAT_ACT_SILU},           {GR_SIGMOID, NAT_ACT_SIGMOID},
        {GR_HARDSWISH, NAT_ACT_HARDSWISH}, {GR_HARDSIGMOID, NAT_ACT_HARDSIGMOID},
        {GR_TANH, NAT_ACT_TANH},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i][0] == (int)op)
            return map[i][1];
    return NAT_ACT_NONE;
}

/* Adds a launch for group grp named name, its ops the group's op names. */
static nat_launch *add(lower *L, const gr_group *grp, const char *name, fb_kcat cat,
                       nat_kernel_fn fn)
{
    const char *ops[GR_GROUP_MAX + 1] = {0};
    for (int k = 0; k < grp->n && k < NAT_MAX_OPS; k++)
        ops[k] = gr_opk_name(nd(L, grp->nodes[k])->op);
    nat_launch *l = nat_plan_add(L->ctx, L->v, name, cat, ops, fn, L->err);
    if (l) {
        l->rule = gr_group_rule(grp);
        l->kind = gr_group_kind(grp);
        l->group = L->node_group ? L->node_group[grp->nodes[0]] : grp->fid;
    }
    return l;
}

#define ADD_OR_FAIL(l, ...)                                                                        \
    do {                                                                                           \
        l = add(__VA_ARGS__);                                                                      \
        if (!l)                                                                                    \
            return L->err->code;                                                                   \
    } while (0)

/* Broadcast of b onto a (gr_bcast_ok held): FULL, ROW (b is [n, c, 1, 1]) with
 * size h*w, or COL with size numel(b). */
static int bcast_of(const gr_tensor *a, const gr_tensor *b, int64_t *size)
{
    int64_t na = gr_numel(a), nb = gr_numel(b);
    *size = nb;
    if (na == nb)
        return NAT_CH_FULL;
    if (a->rank == 4 && b->rank == 4 && b->dims[2] == 1 && b->dims[3] == 1 &&
        b->dims[0] == a->dims[0] && b->dims[1] == a->dims[1] && a->dims[2] * a->dims[3] > 1) {
        *size = a->dims[2] * a->dims[3];
        return NAT_CH_ROW;
    }
    return NAT_CH_COL;
}

/* Whether conv or linear node n runs on OpenBLAS, alone or in a fused group's
 * launch (in_group): its own choice for that (gr_node.gemm, gemm_fused)
 * where it has one, else the job's. */
static bool node_blas(const lower *L, const gr_node *n, bool in_group)
{
    unsigned char c = in_group ? n->gemm_fused : n->gemm;
    return c == GR_GEMM_JOB ? L->no_pack : c == GR_GEMM_OPENBLAS;
}

/* The weight of linear node n as gr_k_linear takes it: PyTorch's [n, k]
 * nn.Linear weight as it is (w_trans), GPT-2's Conv1D weight (trans_b) [k, n];
 * and, unless its GEMM is OpenBLAS's (params.gemm, nat_spec_gemm_pack, or
 * the node's own choice alone or in_group: node_blas), packed once per graph
 * for nat_pw_gemm (*packed; NULL: OpenBLAS reads w, or out of memory: L->err
 * set). */
static float *lin_w(lower *L, const gr_node *n, bool in_group, bool *w_trans, float **packed)
{
    gr_tensor *w = ten(L, n->in[1]);
    *w_trans = !n->a.trans_b;
    *packed = NULL;
    if (node_blas(L, n, in_group))
        return w->data;
    if (!w->packed) {
        int64_t cols = *w_trans ? w->dims[0] : w->dims[1], k = *w_trans ? w->dims[1] : w->dims[0];
        float *d = nat_buf_new(L->ctx, (size_t)nat_pw_floats(cols, k), NAT_ALL_VARIANTS,
                               "linear.packed", L->err);
        if (!d)
            return NULL;
        nat_pw_pack(w->data, *w_trans, cols, k, d);
        w->packed = d;
    }
    *packed = w->packed;
    return w->data;
}

/* ---- single ops ---- */

bool gr_conv_shape(const gr_graph *g, const gr_node *n, bool blas, nat_conv_shape *s)
{
    const gr_tensor *x = &g->tensors[n->in[0]], *w = &g->tensors[n->in[1]];
    bool one_d = n->op == GR_CONV1D;
    *s = (nat_conv_shape){
        .n = (int)x->dims[0],
        .ci = (int)x->dims[1],
        .h = one_d ? 1 : (int)x->dims[2],
        .w = (int)(one_d ? x->dims[2] : x->dims[3]),
        .co = (int)w->dims[0],
        .kh = one_d ? 1 : (int)w->dims[2],
        .kw = (int)(one_d ? w->dims[2] : w->dims[3]),
        .stride_h = one_d ? 1 : n->a.stride[0],
        .stride_w = one_d ? n->a.stride[0] : n->a.stride[1],
        .pad_h = one_d ? 0 : n->a.pad[0],
        .pad_w = one_d ? n->a.pad[0] : n->a.pad[1],
        .dil_h = one_d ? 1 : n->a.dil[0],
        .dil_w = one_d ? n->a.dil[0] : n->a.dil[1],
        .groups = n->a.groups,
        .blas = blas,
    };
    return nat_conv_shape_finish(s);
}

/* The shape of conv node n (finished) on its GEMM, alone or in a fused
 * group's launch; false when impossible. */
static bool conv_shape(const lower *L, const gr_node *n, bool in_group, nat_conv_shape *s)
{
    return gr_conv_shape(L->g, n, node_blas(L, n, in_group), s);
}

/* Fills l as conv node n with activation act; false when the shape is
 * impossible. */
static bool conv_desc(const lower *L, const gr_node *n, bool in_group, int act, nat_launch *l)
{
    l->dk = NAT_D_CONV;
    l->d.conv.act = act;
    return conv_shape(L, n, in_group, &l->d.conv.s);
}

static fb_code emit_pool(lower *L, const gr_group *grp, const gr_node *n)
{
    const gr_tensor *x = ten(L, n->in[0]), *o = ten(L, n->out);
    nat_launch *l;
    nat_kernel_fn fn = n->op == GR_MAXPOOL2D
                           ? gr_k_maxpool
                           : (n->op == GR_AVGPOOL2D ? gr_k_avgpool : gr_k_adaptive_avgpool);
    ADD_OR_FAIL(l, L, grp, gr_opk_name(n->op), FB_KC_REDUCTION, fn);
    l->p[NAT_MOVE_IN] = tp(L, n->in[0]);
    l->p[NAT_MOVE_OUT] = tp(L, n->out);
    l->dk = NAT_D_POOL;
    l->d.pool = (nat_pool_desc){.planes = x->dims[0] * x->dims[1],
                                .h = x->dims[2],
                                .w = x->dims[3],
                                .ho = o->dims[2],
                                .wo = o->dims[3]};
    if (n->op == GR_ADAPTIVE_AVGPOOL2D)
        return FB_OK;
    nat_pool_desc *g = &l->d.pool;
    g->kh = n->a.kernel[0];
    g->kw = n->a.kernel[1];
    g->sh = n->a.stride[0];
    g->sw = n->a.stride[1];
    g->ph = n->a.pad[0];
    g->pw = n->a.pad[1];
    g->count_pad = n->a.count_pad != 0;
    return FB_OK;
}

static fb_code emit_binary(lower *L, const gr_group *grp, const gr_node *n)
{
    nat_launch *l;
    ADD_OR_FAIL(l, L, grp, gr_opk_name(n->op), FB_KC_ELEMENTWISE, nat_k_binary);
    const gr_tensor *a = ten(L, n->in[0]);
    nat_elem_desc *e = &l->d.elem;
    l->dk = NAT_D_ELEM;
    l->p[NAT_ELEM_A] = tp(L, n->in[0]);
    l->p[NAT_ELEM_OUT] = tp(L, n->out);
    e->op = n->op == GR_ADD ? NAT_ADD : NAT_MUL;
    if (n->op == GR_SCALE) {
        e->rows = 1;
        e->cols = gr_numel(a);
        e->bcast = NAT_BC_SCALAR;
        e->scalar = n->a.alpha;
        return FB_OK;
    }
    int64_t size;
    int bc = bcast_of(a, ten(L, n->in[1]), &size);
    l->p[NAT_ELEM_B] = tp(L, n->in[1]);
    e->bcast = bc == NAT_CH_FULL ? NAT_BC_FULL : (bc == NAT_CH_ROW ? NAT_BC_ROW : NAT_BC_COL);
    e->rows = bc == NAT_CH_FULL ? 1 : gr_numel(a) / size;
    e->cols = bc == NAT_CH_FULL ? gr_numel(a) : size;
    return FB_OK;
}

static fb_code emit_act(lower *L, const gr_group *grp, const gr_node *n)
{
    nat_launch *l;
    ADD_OR_FAIL(l, L, grp, gr_opk_name(n->op), FB_KC_ELEMENTWISE, gr_k_chain);
    l->p[NAT_CHAIN_X] = tp(L, n->in[0]);
    l->p[NAT_CHAIN_OUT] = tp(L, n->out);
    l->dk = NAT_D_CHAIN;
    l->d.chain.n = gr_numel(ten(L, n->out));
    l->d.chain.n_steps = 1;
    l->d.chain.steps[0] = (nat_chain_step){.op = NAT_CH_ACT, .act = (uint8_t)act_of(n->op)};
    return FB_OK;
}

static int64_t last_dim(const gr_tensor *t)
{
    return t->dims[t->rank - 1];
}

/* Rows and last-dim columns of tensor t. */
static void rows_cols(const gr_tensor *t, int64_t *rows, int64_t *cols)
{
    *cols = t->dims[t->rank - 1];
    *rows = gr_numel(t) / *cols;
}

static fb_code emit_norm(lower *L, const gr_group *grp, const gr_node *n)
{
    nat_launch *l;
    const gr_tensor *x = ten(L, n->in[0]);
    if (n->op == GR_BATCHNORM) {
        ADD_OR_FAIL(l, L, grp, "batch_norm", FB_KC_REDUCTION, nat_k_batchnorm);
        l->p[NAT_BN_X] = tp(L, n->in[0]);
        l->p[NAT_BN_GAMMA] = tp(L, n->in[1]);
        l->p[NAT_BN_BETA] = tp(L, n->in[2]);
        l->p[NAT_BN_MEAN] = tp(L, n->in[3]);
        l->p[NAT_BN_VAR] = tp(L, n->in[4]);
        l->p[NAT_BN_OUT] = tp(L, n->out);
        l->dk = NAT_D_BN;
        l->d.bn = (nat_bn_desc){.n = x->dims[0],
                                .c = x->dims[1],
                                .hw = gr_numel(x) / (x->dims[0] * x->dims[1]),
                                .eps = n->a.eps};
        return FB_OK;
    }
    ADD_OR_FAIL(l, L, grp, gr_opk_name(n->op), FB_KC_REDUCTION,
                n->op == GR_LAYERNORM ? nat_k_layernorm : nat_k_softmax);
    int64_t rows, cols;
    rows_cols(x, &rows, &cols);
    l->dk = NAT_D_ROWS;
    l->d.rows = (nat_rows_desc){.rows = rows, .cols = cols, .scale = 1.0f};
    l->p[NAT_ROWS_X] = tp(L, n->in[0]);
    l->p[NAT_ROWS_OUT] = tp(L, n->out);
    if (n->op == GR_SOFTMAX)
        return FB_OK;
    l->p[NAT_ROWS_GAMMA] = tp(L, n->in[1]);
    l->p[NAT_ROWS_BETA] = tp(L, n->in[2]);
    l->d.rows.op = NAT_ROW_LAYERNORM;
    l->d.rows.eps = n->a.eps;
    return FB_OK;
}

/* The conv launch l's weights made ready once (nat_conv2d_prepare: Winograd's
 * kernels), at its PREP slot, where its path has them: from the weight tensor
 * (kept on it, shared by the variants) or from wf, the group's BN-folded
 * weights.  l's descriptor is filled. */
static fb_code conv_prep(lower *L, const gr_node *n, const float *wf, nat_launch *l)
{
    const nat_conv_shape *s = &l->d.conv.s;
    gr_tensor *w = ten(L, n->in[1]);
    size_t k = nat_conv2d_prep_floats(s);
    if (k == 0 || (!wf && w->packed)) {
        l->p[NAT_CONV_PREP] = k ? w->packed : NULL;
        return FB_OK;
    }
    float *d = nat_buf_new(L->ctx, k, wf ? 1u << L->v : NAT_ALL_VARIANTS, "conv.prep", L->err);
    if (!d)
        return L->err->code;
    nat_conv2d_prepare(wf ? wf : w->data, s, d);
    if (!wf)
        w->packed = d;
    l->p[NAT_CONV_PREP] = d;
    return FB_OK;
}

static fb_code emit_gemm(lower *L, const gr_group *grp, const gr_node *n)
{
    nat_launch *l;
    if (n->op == GR_CONV2D || n->op == GR_CONV1D) {
        ADD_OR_FAIL(l, L, grp, gr_opk_name(n->op), FB_KC_GEMM, gr_k_conv);
        if (!conv_desc(L, n, false, NAT_ACT_NONE, l))
            return fb_err_set(L->err, FB_EINVAL, NULL, "node %s: impossible conv shape", n->name);
        l->p[NAT_CONV_IN] = tp(L, n->in[0]);
        l->p[NAT_CONV_W] = tp(L, n->in[1]);
        l->p[NAT_CONV_BIAS] = n->n_in > 2 ? tp(L, n->in[2]) : NULL;
        l->p[NAT_CONV_OUT] = tp(L, n->out);
        l->p[NAT_CONV_WS] = L->conv_ws;
        return conv_prep(L, n, NULL, l);
    }
    if (n->op == GR_LINEAR) {
        bool w_trans;
        float *packed, *wt = lin_w(L, n, false, &w_trans, &packed);
        if (!wt)
            return L->err->code;
        ADD_OR_FAIL(l, L, grp, "linear", FB_KC_GEMM, gr_k_linear);
        int64_t m, k;
        rows_cols(ten(L, n->in[0]), &m, &k);
        l->p[NAT_GEMM_A] = tp(L, n->in[0]);
        l->p[NAT_GEMM_B] = wt;
        l->p[NAT_GEMM_BIAS] = n->n_in > 2 ? tp(L, n->in[2]) : NULL;
        l->p[NAT_GEMM_C] = tp(L, n->out);
        l->p[NAT_GEMM_PB] = packed;
        l->dk = NAT_D_GEMM;
        l->d.gemm = (nat_gemm_desc){
            .nb = 1, .m = m, .n = last_dim(ten(L, n->out)), .k = k, .b_trans = w_trans};
        return FB_OK;
    }
    ADD_OR_FAIL(l, L, grp, "bmm", FB_KC_GEMM, nat_k_bmm);
    const gr_tensor *a = ten(L, n->in[0]), *o = ten(L, n->out);
    int r = a->rank;
    l->p[NAT_GEMM_A] = tp(L, n->in[0]);
    l->p[NAT_GEMM_B] = tp(L, n->in[1]);
    l->p[NAT_GEMM_C] = tp(L, n->out);
    l->dk = NAT_D_GEMM;
    l->d.gemm = (nat_gemm_desc){.nb = gr_numel(a) / (a->dims[r - 1] * a->dims[r - 2]),
                                .m = a->dims[r - 2],
                                .n = o->dims[r - 1],
                                .k = a->dims[r - 1],
                                .b_trans = n->a.trans_b != 0};
    return FB_OK;
}

static fb_code emit_permute(lower *L, const gr_group *grp, const gr_node *n)
{
    nat_launch *l;
    ADD_OR_FAIL(l, L, grp, "permute", FB_KC_COPY, gr_k_permute);
    const gr_tensor *x = ten(L, n->in[0]);
    l->p[NAT_MOVE_IN] = tp(L, n->in[0]);
    l->p[NAT_MOVE_OUT] = tp(L, n->out);
    l->dk = NAT_D_PERMUTE;
    l->d.permute.rank = x->rank;
    for (int d = 0; d < x->rank && d < NAT_PERMUTE_MAX_RANK; d++) {
        l->d.permute.dims[d] = x->dims[d];
        l->d.permute.perm[d] = n->a.perm[d];
    }
    return FB_OK;
}

/* outer = product of dims before axis, inner = after it. */
static void split_at(const gr_tensor *t, int axis, int64_t *outer, int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < axis; d++)
        *outer *= t->dims[d];
    for (int d = axis + 1; d < t->rank; d++)
        *inner *= t->dims[d];
}

static fb_code emit_copy(lower *L, const gr_group *grp, const gr_node *n)
{
    nat_launch *l;
    const gr_tensor *x = ten(L, n->in[0]), *o = ten(L, n->out);
    int64_t outer, inner;
    if (n->op == GR_SLICE) {
        ADD_OR_FAIL(l, L, grp, "slice", FB_KC_COPY, gr_k_slice);
        split_at(x, n->a.axis, &outer, &inner);
        l->dk = NAT_D_SLICE;
        l->d.slice = (nat_slice_desc){.outer = outer,
                                      .axis_len = x->dims[n->a.axis],
                                      .start = n->a.start,
                                      .len = n->a.end - n->a.start,
                                      .inner = inner};
        l->p[NAT_MOVE_IN] = tp(L, n->in[0]);
        l->p[NAT_MOVE_OUT] = tp(L, n->out);
        return FB_OK;
    }
    if (n->op == GR_EMBEDDING) {
        ADD_OR_FAIL(l, L, grp, "embedding", FB_KC_COPY, gr_k_embedding);
        const gr_tensor *tab = ten(L, n->in[1]);
        l->p[NAT_EMBED_IDS] = tp(L, n->in[0]);
        l->p[NAT_EMBED_TABLE] = tp(L, n->in[1]);
        l->p[NAT_EMBED_OUT] = tp(L, n->out);
        l->dk = NAT_D_EMBED;
        l->d.embed =
            (nat_embed_desc){.n_ids = gr_numel(x), .d = tab->dims[1], .vocab = tab->dims[0]};
        return FB_OK;
    }
    ADD_OR_FAIL(l, L, grp, "concat", FB_KC_COPY, gr_k_concat);
    split_at(o, n->a.axis, &outer, &inner);
    nat_concat_desc *c = &l->d.concat;
    l->dk = NAT_D_CONCAT;
    c->n_in = n->n_in;
    c->outer = outer;
    c->inner = inner;
    c->out_axis = o->dims[n->a.axis];
    for (int k = 0; k < n->n_in && k < NAT_CONCAT_MAX_IN; k++) {
        l->p[k] = tp(L, n->in[k]);
        c->axis[k] = ten(L, n->in[k])->dims[n->a.axis];
        if (ten(L, n->in[k])->dims[0] != o->dims[0])
            c->bcast |= 1u << k;
    }
    l->p[NAT_CONCAT_OUT] = tp(L, n->out);
    return FB_OK;
}

static fb_code emit_misc(lower *L, const gr_group *grp, const gr_node *n)
{
    nat_launch *l;
    int64_t rows, cols;
    if (n->op == GR_CAUSAL_MASK) {
        ADD_OR_FAIL(l, L, grp, "causal_mask", FB_KC_ELEMENTWISE, gr_k_causal);
        rows_cols(ten(L, n->in[0]), &rows, &cols);
    } else { /* mean over the trailing dims */
        ADD_OR_FAIL(l, L, grp, "mean", FB_KC_REDUCTION, nat_k_row_reduce);
        rows = gr_numel(ten(L, n->out));
        cols = gr_numel(ten(L, n->in[0])) / rows;
    }
    l->p[NAT_ROWS_X] = tp(L, n->in[0]);
    l->p[NAT_ROWS_OUT] = tp(L, n->out);
    bool causal = n->op == GR_CAUSAL_MASK;
    l->dk = causal ? NAT_D_ROWS : NAT_D_REDUCE;
    l->d.rows = (nat_rows_desc){
        .rows = rows, .cols = cols, .op = causal ? NAT_ROW_CAUSAL : NAT_RMEAN, .scale = 1.0f};
    return FB_OK;
}

static fb_code emit_single(lower *L, const gr_group *grp)
{
    const gr_node *n = nd(L, grp->nodes[0]);
    switch (n->op) {
    case GR_CONV2D:
    case GR_CONV1D:
    case GR_LINEAR:
    case GR_MATMUL:
        return emit_gemm(L, grp, n);
    case GR_BATCHNORM:
    case GR_LAYERNORM:
    case GR_SOFTMAX:
        return emit_norm(L, grp, n);
    case GR_ADD:
    case GR_MUL:
    case GR_SCALE:
        return emit_binary(L, grp, n);
    case GR_MAXPOOL2D:
    case GR_AVGPOOL2D:
    case GR_ADAPTIVE_AVGPOOL2D:
        return emit_pool(L, grp, n);
    case GR_PERMUTE:
        return emit_permute(L, grp, n);
    case GR_SLICE:
    case GR_EMBEDDING:
    case GR_CONCAT:
        return emit_copy(L, grp, n);
    case GR_CAUSAL_MASK:
    case GR_MEAN:
        return emit_misc(L, grp, n);
    default:
        if (gr_opk_is_act(n->op))
            return emit_act(L, grp, n);
        return fb_err_set(L->err, FB_EUNSUPPORTED, NULL, "op %s has no CPU kernel",
                          gr_opk_name(n->op));
    }
}

/* ---- fused groups ---- */

/* BN folded into the conv: w' = w * s, b' = (b - mean) * s + beta with
 * s = gamma / sqrt(var + eps), per output channel (plan-time work). */
static fb_code fold_bn(lower *L, const gr_node *conv, const gr_node *bn, float **wf, float **bf)
{
    const gr_tensor *w = ten(L, conv->in[1]);
    int64_t co = w->dims[0], per = gr_numel(w) / co;
    *wf = nat_buf_new(L->ctx, (size_t)gr_numel(w), 1u << L->v, "bn_fold.w", L->err);
    *bf = *wf ? nat_buf_new(L->ctx, (size_t)co, 1u << L->v, "bn_fold.b", L->err) : NULL;
    if (!*bf)
        return L->err->code;
    const float *wd = tp(L, conv->in[1]), *b = conv->n_in > 2 ? tp(L, conv->in[2]) : NULL;
    const float *g = tp(L, bn->in[1]), *beta = tp(L, bn->in[2]);
    const float *mean = tp(L, bn->in[3]), *var = tp(L, bn->in[4]);
    for (int64_t c = 0; c < co; c++) {
        float s = g[c] / sqrtf(var[c] + bn->a.eps);
        for (int64_t j = 0; j < per; j++)
            (*wf)[c * per + j] = wd[c * per + j] * s;
        (*bf)[c] = ((b ? b[c] : 0.0f) - mean[c]) * s + beta[c];
    }
    return FB_OK;
}

static fb_code emit_tensor(lower *L, const gr_group *grp)
{
    const gr_node *t = nd(L, grp->nodes[0]);
    int k = 1, act = NAT_ACT_NONE, flow = t->out;
    float *w = NULL, *bias = NULL, *res = NULL;
    if (k < grp->n && nd(L, grp->nodes[k])->op == GR_BATCHNORM) {
        fb_code rc = fold_bn(L, t, nd(L, grp->nodes[k]), &w, &bias);
        if (rc)
            return rc;
        flow = nd(L, grp->nodes[k++])->out;
    }
    if (k < grp->n && nd(L, grp->nodes[k])->op == GR_ADD) {
        const gr_node *a = nd(L, grp->nodes[k++]);
        res = tp(L, a->in[0] == flow ? a->in[1] : a->in[0]);
        flow = a->out;
    }
    if (k < grp->n)
        act = act_of(nd(L, grp->nodes[k])->op);
    nat_launch *l;
    if (t->op == GR_LINEAR) {
        bool w_trans;
        float *packed, *wt = lin_w(L, t, true, &w_trans, &packed);
        if (!wt)
            return L->err->code;
        ADD_OR_FAIL(l, L, grp, "linear_fused", FB_KC_GEMM, gr_k_linear);
        int64_t m, kk;
        rows_cols(ten(L, t->in[0]), &m, &kk);
        l->dk = NAT_D_GEMM;
        l->d.gemm = (nat_gemm_desc){.nb = 1,
                                    .m = m,
                                    .n = last_dim(ten(L, t->out)),
                                    .k = kk,
                                    .b_trans = w_trans,
                                    .act = act};
        l->p[NAT_GEMM_A] = tp(L, t->in[0]);
        l->p[NAT_GEMM_B] = wt;
        l->p[NAT_GEMM_BIAS] = t->n_in > 2 ? tp(L, t->in[2]) : NULL;
        l->p[NAT_GEMM_RES] = res;
        l->p[NAT_GEMM_C] = tp(L, nd(L, grp->nodes[grp->n - 1])->out);
        l->p[NAT_GEMM_PB] = packed;
        return FB_OK;
    }
    ADD_OR_FAIL(l, L, grp, "conv_fused", FB_KC_GEMM, gr_k_conv);
    if (!conv_desc(L, t, true, act, l))
        return fb_err_set(L->err, FB_EINVAL, NULL, "node %s: impossible conv shape", t->name);
    l->p[NAT_CONV_IN] = tp(L, t->in[0]);
    l->p[NAT_CONV_W] = w ? w : tp(L, t->in[1]);
    l->p[NAT_CONV_BIAS] = w ? bias : (t->n_in > 2 ? tp(L, t->in[2]) : NULL);
    l->p[NAT_CONV_RES] = res;
    l->p[NAT_CONV_OUT] = tp(L, nd(L, grp->nodes[grp->n - 1])->out);
    l->p[NAT_CONV_WS] = L->conv_ws;
    return conv_prep(L, t, w, l);
}

static fb_code emit_chain(lower *L, const gr_group *grp)
{
    nat_launch *l;
    ADD_OR_FAIL(l, L, grp, "element_chain", FB_KC_ELEMENTWISE, gr_k_chain);
    const gr_node *n0 = nd(L, grp->nodes[0]);
    int flow = n0->in[0], n_opd = 0;
    nat_chain_desc *ch = &l->d.chain;
    l->dk = NAT_D_CHAIN;
    l->p[NAT_CHAIN_X] = tp(L, flow);
    l->p[NAT_CHAIN_OUT] = tp(L, nd(L, grp->nodes[grp->n - 1])->out);
    ch->n = gr_numel(ten(L, nd(L, grp->nodes[grp->n - 1])->out));
    ch->n_steps = grp->n < NAT_CHAIN_MAX ? grp->n : NAT_CHAIN_MAX; /* gr_plan.c caps it below */
    for (int s = 0; s < ch->n_steps; s++) {
        const gr_node *n = nd(L, grp->nodes[s]);
        nat_chain_step *st = &ch->steps[s];
        if ((n->op == GR_ADD || n->op == GR_MUL) && NAT_CHAIN_OPD + n_opd < NAT_MAX_ARGS) {
            int other = s == 0 ? n->in[1] : (n->in[0] == flow ? n->in[1] : n->in[0]);
            int64_t size;
            int bc = bcast_of(ten(L, n->out), ten(L, other), &size);
            l->p[NAT_CHAIN_OPD + n_opd] = tp(L, other);
            *st = (nat_chain_step){.op = n->op == GR_ADD ? NAT_CH_ADD : NAT_CH_MUL,
                                   .bc = (uint8_t)bc,
                                   .operand = (uint8_t)n_opd,
                                   .size = size};
            n_opd++;
        } else if (n->op == GR_SCALE) {
            *st = (nat_chain_step){.op = NAT_CH_SCALE, .scalar = n->a.alpha};
        } else {
            *st = (nat_chain_step){.op = NAT_CH_ACT, .act = (uint8_t)act_of(n->op)};
        }
        flow = n->out;
    }
    return FB_OK;
}

static fb_code emit_softmax(lower *L, const gr_group *grp)
{
    nat_launch *l;
    ADD_OR_FAIL(l, L, grp, "softmax_fused", FB_KC_REDUCTION, gr_k_softmax);
    const gr_node *n0 = nd(L, grp->nodes[0]);
    int64_t rows, cols;
    rows_cols(ten(L, n0->in[0]), &rows, &cols);
    l->p[NAT_ROWS_X] = tp(L, n0->in[0]);
    l->p[NAT_ROWS_OUT] = tp(L, nd(L, grp->nodes[grp->n - 1])->out);
    l->dk = NAT_D_ROWS;
    l->d.rows = (nat_rows_desc){.rows = rows, .cols = cols, .scale = 1.0f};
    for (int s = 0; s < grp->n; s++) {
        const gr_node *n = nd(L, grp->nodes[s]);
        if (n->op == GR_SCALE)
            l->d.rows.scale = n->a.alpha;
        if (n->op == GR_CAUSAL_MASK)
            l->d.rows.causal = true;
    }
    return FB_OK;
}

static fb_code emit_layernorm(lower *L, const gr_group *grp)
{
    nat_launch *l;
    ADD_OR_FAIL(l, L, grp, "add_layernorm", FB_KC_REDUCTION, nat_k_layernorm);
    const gr_node *a = nd(L, grp->nodes[0]), *ln = nd(L, grp->nodes[1]);
    int64_t rows, cols;
    rows_cols(ten(L, a->out), &rows, &cols);
    l->p[NAT_ROWS_X] = tp(L, a->in[0]);
    l->p[NAT_ROWS_RES] = tp(L, a->in[1]);
    l->p[NAT_ROWS_GAMMA] = tp(L, ln->in[1]);
    l->p[NAT_ROWS_BETA] = tp(L, ln->in[2]);
    l->p[NAT_ROWS_OUT] = tp(L, ln->out);
    l->dk = NAT_D_ROWS;
    l->d.rows = (nat_rows_desc){
        .rows = rows, .cols = cols, .op = NAT_ROW_LAYERNORM, .scale = 1.0f, .eps = ln->a.eps};
    return FB_OK;
}

static fb_code emit_attention(lower *L, const gr_group *grp)
{
    nat_launch *l;
    ADD_OR_FAIL(l, L, grp, "attention_fused", FB_KC_ATTENTION, nat_k_attention);
    const gr_node *qk = nd(L, grp->nodes[0]), *pv = nd(L, grp->nodes[grp->n - 1]);
    const gr_tensor *q = ten(L, qk->in[0]);
    int64_t s = q->dims[q->rank - 2], d = q->dims[q->rank - 1];
    l->p[NAT_ATTN_Q] = tp(L, qk->in[0]);
    l->p[NAT_ATTN_K] = tp(L, qk->in[1]);
    l->p[NAT_ATTN_V] = tp(L, pv->in[1]);
    l->p[NAT_ATTN_O] = tp(L, pv->out);
    l->dk = NAT_D_ATTN;
    l->d.attn = (nat_attn_desc){.bh = gr_numel(q) / (s * d), .s = s, .d = d, .scale = 1.0f};
    for (int k = 1; k < grp->n - 1; k++) {
        const gr_node *n = nd(L, grp->nodes[k]);
        if (n->op == GR_SCALE)
            l->d.attn.scale = n->a.alpha;
        if (n->op == GR_CAUSAL_MASK)
            l->d.attn.causal = true;
    }
    return FB_OK;
}

static fb_code emit_mlp(lower *L, const gr_group *grp)
{
    const gr_node *l1 = nd(L, grp->nodes[0]), *a = nd(L, grp->nodes[1]);
    const gr_node *l2 = nd(L, grp->nodes[2]);
    /* with residual_epilogue: out = ... + res, the add's other operand */
    const gr_node *sum = grp->n > 3 ? nd(L, grp->nodes[3]) : NULL;
    float *res = sum ? tp(L, sum->in[0] == l2->out ? sum->in[1] : sum->in[0]) : NULL;
    bool t1, t2;
    float *pw1, *pw2, *w1 = lin_w(L, l1, true, &t1, &pw1);
    float *w2 = w1 ? lin_w(L, l2, true, &t2, &pw2) : NULL;
    if (!w2)
        return L->err->code;
    nat_launch *l;
    ADD_OR_FAIL(l, L, grp, "mlp_fused", FB_KC_GEMM, gr_k_mlp);
    int64_t m, d, h = last_dim(ten(L, l1->out)), mode, rb, slots;
    rows_cols(ten(L, l1->in[0]), &m, &d);
    gr_mlp_ws(m, h, &mode, &rb, &slots);
    l->p[NAT_MLP_X] = tp(L, l1->in[0]);
    l->p[NAT_MLP_W1] = w1;
    l->p[NAT_MLP_B1] = tp(L, l1->in[2]);
    l->p[NAT_MLP_W2] = w2;
    l->p[NAT_MLP_B2] = tp(L, l2->in[2]);
    l->p[NAT_MLP_OUT] = tp(L, sum ? sum->out : l2->out);
    l->p[NAT_MLP_WS] = L->mlp_ws;
    l->p[NAT_MLP_PW1] = pw1;
    l->p[NAT_MLP_PW2] = pw2;
    l->p[NAT_MLP_RES] = res;
    l->dk = NAT_D_MLP;
    l->d.mlp = (nat_mlp_desc){.m = m,
                              .d = d,
                              .h = h,
                              .act = act_of(a->op),
                              .w1_trans = t1,
                              .w2_trans = t2,
                              .mode = mode,
                              .rb = rb,
                              .slots = slots};
    return FB_OK;
}

static fb_code emit(lower *L, const gr_group *grp)
{
    switch (grp->kind) {
    case GR_G_TENSOR:
        return emit_tensor(L, grp);
    case GR_G_CHAIN:
        return emit_chain(L, grp);
    case GR_G_SOFTMAX:
        return emit_softmax(L, grp);
    case GR_G_LAYERNORM:
        return emit_layernorm(L, grp);
    case GR_G_ATTENTION:
        return emit_attention(L, grp);
    case GR_G_MLP:
        return emit_mlp(L, grp);
    default:
        return emit_single(L, grp);
    }
}

/* ---- workspaces and driver ---- */

static fb_code workspaces(lower *L)
{
    int64_t conv = 0, mlp = 0;
    for (int gi = 0; gi < L->gs->n; gi++) {
        const gr_group *grp = &L->gs->g[gi];
        const gr_node *n = nd(L, grp->nodes[0]);
        nat_conv_shape s;
        if (n->op == GR_CONV2D || n->op == GR_CONV1D) {
            if (!conv_shape(L, n, grp->kind != GR_G_SINGLE, &s))
                return fb_err_set(L->err, FB_EINVAL, NULL, "node %s: impossible conv shape",
                                  n->name);
            int64_t w = (int64_t)nat_conv2d_workspace(&s, true); /* conv_prep */
            conv = w > conv ? w : conv;
        }
        if (grp->kind == GR_G_MLP) {
            int64_t m, d, mode, rb, slots;
            rows_cols(ten(L, n->in[0]), &m, &d);
            int64_t w = gr_mlp_ws(m, last_dim(ten(L, n->out)), &mode, &rb, &slots);
            mlp = w > mlp ? w : mlp;
        }
    }
    if (conv > 0 &&
        !(L->conv_ws = nat_buf_new(L->ctx, (size_t)conv, 1u << L->v, "conv.ws", L->err)))
        return L->err->code;
    if (mlp > 0 && !(L->mlp_ws = nat_buf_new(L->ctx, (size_t)mlp, 1u << L->v, "mlp.ws", L->err)))
        return L->err->code;
    return FB_OK;
}

/* Emits the groups in order and records, for the result's graph view, the
 * first launch of each group as the launch of its nodes (ctx->node_launch). */
static fb_code node_launches(lower *L)
{
    int *nl = malloc(((size_t)L->g->n_nodes + 1) * sizeof *nl);
    if (!nl)
        return fb_err_set(L->err, FB_ENOMEM, NULL, "cannot allocate the node map");
    for (int i = 0; i < L->g->n_nodes; i++)
        nl[i] = -1;
    fb_code rc = FB_OK;
    for (int pos = 0; !rc && pos < L->gs->n; pos++) {
        const gr_group *grp = &L->gs->g[L->order[pos]];
        int first = L->ctx->plans[L->v].n;
        rc = emit(L, grp);
        for (int k = 0; !rc && k < grp->n && first < L->ctx->plans[L->v].n; k++)
            nl[grp->nodes[k]] = first;
    }
    free(L->ctx->node_launch[L->v]);
    L->ctx->node_launch[L->v] = nl;
    return rc;
}

fb_code gr_lower(nat_ctx *ctx, gr_graph *g, const gr_groups *gs, int v, bool pack,
                 const int *node_group, fb_err *err)
{
    lower L = {.ctx = ctx,
               .g = g,
               .gs = gs,
               .v = v,
               .no_pack = !pack,
               .node_group = node_group,
               .err = err};
    fb_code rc = FB_OK;
    L.order = malloc((size_t)(gs->n + 1) * sizeof *L.order);
    L.first = malloc((size_t)g->n_tensors * sizeof *L.first);
    L.last = malloc((size_t)g->n_tensors * sizeof *L.last);
    L.off = calloc((size_t)g->n_tensors, sizeof *L.off);
    if (!L.order || !L.first || !L.last || !L.off) {
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the lowering");
        goto out;
    }
    int64_t *last = malloc((size_t)(gs->n + 1) * sizeof *last);
    for (int i = 0; last && i < gs->n; i++) {
        L.order[i] = i;
        last[i] = group_last(&L, i);
    }
    /* emission order: by each group's last node, a topological order since a
     * group's inner tensors have their one reader inside it */
    if (!last || !sort_by(L.order, gs->n, last))
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the lowering");
    free(last);
    if (!rc)
        rc = plan_memory(&L);
    if (!rc)
        rc = workspaces(&L);
    if (!rc)
        rc = node_launches(&L);
    if (!rc) {
        ctx->plans[v].out = tp(&L, g->output);
        ctx->plans[v].out_n = (size_t)gr_numel(ten(&L, g->output));
    }
out:
    free(L.order);
    free(L.first);
    free(L.last);
    free(L.off);
    return rc;
}

/* Whether the CPU kernel of l reads its argument p[k]: a linear's or an MLP's
 * weight as stored is not read when its packed copy is there (the CUDA
 * backend reads it, so it stays in the launch). */
static bool cpu_reads(const nat_launch *l, int k)
{
    if (l->dk == NAT_D_GEMM && k == NAT_GEMM_B)
        return l->p[NAT_GEMM_PB] == NULL;
    if (l->dk == NAT_D_MLP && (k == NAT_MLP_W1 || k == NAT_MLP_W2))
        return l->p[k == NAT_MLP_W1 ? NAT_MLP_PW1 : NAT_MLP_PW2] == NULL;
    return true;
}

void gr_lower_masks(nat_ctx *ctx, const gr_graph *g)
{
    for (int b = 0; b < ctx->n_bufs; b++) {
        nat_buf *buf = &ctx->bufs[b];
        bool keep = false;
        for (int t = 0; t < g->n_tensors && !keep; t++)
            keep = g->tensors[t].kind == GR_T_INPUT && g->tensors[t].data == buf->data;
        if (keep)
            continue;
        unsigned mask = 0;
        for (int v = 0; v < NAT_MAX_VARIANTS; v++) {
            const nat_plan *p = &ctx->plans[v];
            for (int i = 0; i < p->n && !(mask & (1u << v)); i++)
                for (int k = 0; k < NAT_MAX_ARGS; k++) {
                    if (!cpu_reads(&p->launches[i], k))
                        continue;
                    /* integer compares: pointers into different objects */
                    uintptr_t a = (uintptr_t)p->launches[i].p[k], lo = (uintptr_t)buf->data;
                    if (a >= lo && a < lo + buf->n * sizeof(float))
                        mask |= 1u << v;
                }
        }
        buf->variants = mask;
    }
}
