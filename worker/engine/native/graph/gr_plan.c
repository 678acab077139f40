/* gr_plan: the fusion planner's rules (gr_plan.h).  Rules are tried at each
 * not-yet-grouped node in graph order, the most valuable first (attention and
 * MLP remove whole intermediates, then tensor epilogues, then the normalization
 * and element kinds); a rule grows its group only along edges whose tensor has
 * exactly one reader and is not the graph output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr_plan.h"

static const char *const rule_names[GR_R_COUNT] = {
    "bn_fold", "epilogue",  "residual_epilogue", "element_chain",
    "softmax", "layernorm", "attention",         "mlp",
};

const char *gr_rule_name(int r)
{
    return r >= 0 && r < GR_R_COUNT ? rule_names[r] : "?";
}

fb_code gr_rules_from_spec(const fb_spec *spec, unsigned *disabled, fb_err *err)
{
    *disabled = 0;
    const cJSON *arr =
        spec->params ? cJSON_GetObjectItemCaseSensitive(spec->params, "disable_rules") : NULL;
    if (!arr)
        return FB_OK;
    if (!cJSON_IsArray(arr))
        return fb_err_set(err, FB_EINVAL, "params.disable_rules", "must be an array of names");
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        char field[64];
        snprintf(field, sizeof field, "params.disable_rules[%d]", i);
        int r = 0;
        while (r < GR_R_COUNT && !(cJSON_IsString(e) && strcmp(e->valuestring, rule_names[r]) == 0))
            r++;
        if (r == GR_R_COUNT)
            return fb_err_set(err, FB_EINVAL, field,
                              "unknown rule (bn_fold, epilogue, residual_epilogue, "
                              "element_chain, softmax, layernorm, attention, mlp)");
        *disabled |= 1u << r;
    }
    return FB_OK;
}

fb_code gr_unfuse_from_spec(const fb_spec *spec, gr_unfuse *u, fb_err *err)
{
    u->n = 0;
    fb_code rc = fb_spec_check_unfuse(spec, err); /* the form: integers, at most 64, distinct */
    const cJSON *arr =
        spec->params ? cJSON_GetObjectItemCaseSensitive(spec->params, "unfuse") : NULL;
    if (rc || !arr)
        return rc;
    for (const cJSON *e = arr->child; e && u->n < GR_UNFUSE_MAX; e = e->next)
        u->ids[u->n++] = (int)e->valuedouble;
    return FB_OK;
}

/* ---- planner state ---- */

typedef struct planner {
    const gr_graph *g;
    unsigned off;  /* disabled rules */
    int *group_of; /* node -> group, -1 */
    int *reader;   /* tensor -> its one reading node, -1 when 0 or 2+ readers */
} planner;

static bool on(const planner *p, int r)
{
    return !(p->off & (1u << r));
}

/* The node that alone reads tensor t and is still free, or -1. */
static int sole_free_reader(const planner *p, int t)
{
    if (t == p->g->output || p->g->tensors[t].n_users != 1)
        return -1;
    int r = p->reader[t];
    return r >= 0 && p->group_of[r] < 0 ? r : -1;
}

static const gr_node *node(const planner *p, int i)
{
    return &p->g->nodes[i];
}

static bool same_shape(const gr_tensor *a, const gr_tensor *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

static void push(gr_group *grp, int n)
{
    if (grp->n < GR_GROUP_MAX)
        grp->nodes[grp->n++] = n;
}

static int last_out(const planner *p, const gr_group *grp)
{
    return node(p, grp->nodes[grp->n - 1])->out;
}

/* The other operand of binary node j whose operand t is the flow; -1 if none. */
static int other_operand(const gr_node *nd, int t)
{
    if (nd->in[0] == t)
        return nd->in[1];
    return nd->in[1] == t ? nd->in[0] : -1;
}

/* residual_epilogue: takes into grp the add of its output and another tensor
 * of the same shape.  That tensor may be made after the group's first node: a
 * group runs where its last node is (gr_lower's emission order). */
static bool take_residual(const planner *p, gr_group *grp)
{
    int out = last_out(p, grp), j = sole_free_reader(p, out);
    if (j < 0 || node(p, j)->op != GR_ADD || !on(p, GR_R_RESIDUAL))
        return false;
    int o = other_operand(node(p, j), out);
    if (o < 0 || o == out || !same_shape(&p->g->tensors[o], &p->g->tensors[out]))
        return false;
    push(grp, j);
    grp->rules |= 1u << GR_R_RESIDUAL;
    return true;
}

/* ---- rules ---- */

static bool rule_attention(const planner *p, int i, gr_group *grp)
{
    const gr_node *mm = node(p, i);
    if (mm->op != GR_MATMUL || !mm->a.trans_b || !on(p, GR_R_ATTENTION))
        return false;
    const gr_tensor *q = &p->g->tensors[mm->in[0]], *k = &p->g->tensors[mm->in[1]];
    if (!same_shape(q, k) || q->rank < 3)
        return false;
    int seq[4], n = 0, t = mm->out, j;
    while ((j = sole_free_reader(p, t)) >= 0 && n < 4) {
        gr_opk op = node(p, j)->op;
        if (!(op == GR_SCALE || op == GR_CAUSAL_MASK || op == GR_SOFTMAX || op == GR_MATMUL))
            return false;
        seq[n++] = j;
        t = node(p, j)->out;
        if (op == GR_MATMUL)
            break;
    }
    if (n < 2 || node(p, seq[n - 1])->op != GR_MATMUL || node(p, seq[n - 2])->op != GR_SOFTMAX)
        return false;
    const gr_node *pv = node(p, seq[n - 1]);
    if (pv->a.trans_b || pv->in[0] != node(p, seq[n - 2])->out ||
        !same_shape(&p->g->tensors[pv->in[1]], q))
        return false;
    grp->kind = GR_G_ATTENTION;
    grp->rules = 1u << GR_R_ATTENTION;
    push(grp, i);
    for (int s = 0; s < n; s++)
        push(grp, seq[s]);
    return true;
}

static bool rule_mlp(const planner *p, int i, gr_group *grp)
{
    const gr_node *l1 = node(p, i);
    if (l1->op != GR_LINEAR || l1->n_in != 3 || !on(p, GR_R_MLP))
        return false;
    int a = sole_free_reader(p, l1->out);
    if (a < 0 ||
        (node(p, a)->op != GR_GELU && node(p, a)->op != GR_GELU_TANH && node(p, a)->op != GR_RELU))
        return false;
    int l2 = sole_free_reader(p, node(p, a)->out);
    if (l2 < 0 || node(p, l2)->op != GR_LINEAR || node(p, l2)->n_in != 3 ||
        node(p, l2)->in[0] != node(p, a)->out)
        return false;
    /* the fused MLP kernel maps d -> h -> d */
    if (!same_shape(&p->g->tensors[l1->in[0]], &p->g->tensors[node(p, l2)->out]))
        return false;
    grp->kind = GR_G_MLP;
    grp->rules = 1u << GR_R_MLP;
    push(grp, i);
    push(grp, a);
    push(grp, l2);
    take_residual(p, grp); /* a pre-norm block's x + mlp(x): the add in the 2nd GEMM */
    return true;
}

/* conv/linear [+ bn] [+ add residual [+ act]] or [+ act]. */
static bool rule_tensor(const planner *p, int i, gr_group *grp)
{
    gr_opk op0 = node(p, i)->op;
    if (op0 != GR_CONV2D && op0 != GR_CONV1D && op0 != GR_LINEAR)
        return false;
    push(grp, i);
    grp->kind = GR_G_TENSOR;
    int j = sole_free_reader(p, last_out(p, grp));
    if (j >= 0 && op0 != GR_LINEAR && node(p, j)->op == GR_BATCHNORM && on(p, GR_R_BN_FOLD)) {
        push(grp, j);
        grp->rules |= 1u << GR_R_BN_FOLD;
        j = sole_free_reader(p, last_out(p, grp));
    }
    if (take_residual(p, grp)) {
        j = sole_free_reader(p, last_out(p, grp));
        if (j >= 0 && gr_opk_is_act(node(p, j)->op))
            push(grp, j);
        return true;
    }
    if (j >= 0 && gr_opk_is_act(node(p, j)->op) && on(p, GR_R_EPILOGUE)) {
        push(grp, j);
        grp->rules |= 1u << GR_R_EPILOGUE;
    }
    return grp->n > 1;
}

static bool rule_layernorm(const planner *p, int i, gr_group *grp)
{
    const gr_node *add = node(p, i);
    if (add->op != GR_ADD || !on(p, GR_R_LAYERNORM) ||
        !same_shape(&p->g->tensors[add->in[0]], &p->g->tensors[add->in[1]]))
        return false;
    int j = sole_free_reader(p, add->out);
    if (j < 0 || node(p, j)->op != GR_LAYERNORM)
        return false;
    grp->kind = GR_G_LAYERNORM;
    grp->rules = 1u << GR_R_LAYERNORM;
    push(grp, i);
    push(grp, j);
    return true;
}

static bool rule_softmax(const planner *p, int i, gr_group *grp)
{
    gr_opk op = node(p, i)->op;
    if ((op != GR_SCALE && op != GR_CAUSAL_MASK) || !on(p, GR_R_SOFTMAX))
        return false;
    int seq[3] = {i}, n = 1, t = node(p, i)->out, j;
    while ((j = sole_free_reader(p, t)) >= 0 && n < 3) {
        gr_opk o = node(p, j)->op;
        if (o != GR_CAUSAL_MASK && o != GR_SOFTMAX)
            return false;
        if (o == GR_CAUSAL_MASK && (op == GR_CAUSAL_MASK || n > 1))
            return false;
        seq[n++] = j;
        t = node(p, j)->out;
        if (o == GR_SOFTMAX)
            break;
    }
    if (n < 2 || node(p, seq[n - 1])->op != GR_SOFTMAX)
        return false;
    grp->kind = GR_G_SOFTMAX;
    grp->rules = 1u << GR_R_SOFTMAX;
    for (int s = 0; s < n; s++)
        push(grp, seq[s]);
    return true;
}

/* The longest element chain one group takes; its launch describes each op as
 * one step (nat_chain_desc). */
#define CHAIN_NODES_MAX 8
_Static_assert(CHAIN_NODES_MAX <= NAT_CHAIN_MAX, "a chain group's steps fit its descriptor");

static bool rule_chain(const planner *p, int i, gr_group *grp)
{
    if (!gr_opk_is_elementwise(node(p, i)->op) || !on(p, GR_R_ELEMENT_CHAIN))
        return false;
    push(grp, i);
    int j;
    while (grp->n < CHAIN_NODES_MAX && (j = sole_free_reader(p, last_out(p, grp))) >= 0) {
        const gr_node *nd = node(p, j);
        if (!gr_opk_is_elementwise(nd->op))
            break;
        if ((nd->op == GR_ADD || nd->op == GR_MUL) && nd->in[0] == nd->in[1])
            break;
        if (!same_shape(&p->g->tensors[nd->out], &p->g->tensors[last_out(p, grp)]))
            break;
        push(grp, j);
    }
    grp->kind = GR_G_CHAIN;
    grp->rules = 1u << GR_R_ELEMENT_CHAIN;
    return grp->n > 1;
}

/* ---- driver ---- */

static fb_code planner_init(planner *p, const gr_graph *g, unsigned off, fb_err *err)
{
    p->g = g;
    p->off = off;
    p->group_of = malloc((size_t)(g->n_nodes + 1) * sizeof *p->group_of);
    p->reader = malloc((size_t)(g->n_tensors + 1) * sizeof *p->reader);
    if (!p->group_of || !p->reader)
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the planner");
    for (int i = 0; i < g->n_nodes; i++)
        p->group_of[i] = -1;
    for (int t = 0; t < g->n_tensors; t++)
        p->reader[t] = -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            p->reader[g->nodes[i].in[k]] = i;
    return FB_OK;
}

/* Tries the rules at node i in order; a group of one op when none applies. */
static void group_at(const planner *p, int i, bool fused, gr_group *grp)
{
    bool (*const rules[])(const planner *, int, gr_group *) = {
        rule_attention, rule_mlp, rule_tensor, rule_layernorm, rule_softmax, rule_chain,
    };
    for (size_t r = 0; fused && r < sizeof rules / sizeof rules[0]; r++) {
        memset(grp, 0, sizeof *grp);
        if (rules[r](p, i, grp))
            return;
    }
    memset(grp, 0, sizeof *grp);
    grp->kind = GR_G_SINGLE;
    push(grp, i);
}

static bool unfused(const gr_unfuse *u, int fid)
{
    for (int k = 0; u && k < u->n; k++)
        if (u->ids[k] == fid)
            return true;
    return false;
}

void gr_choices_free(gr_choices *ch)
{
    if (!ch)
        return;
    free(ch->c);
    ch->c = NULL;
    ch->n = 0;
}

const char *gr_choice_name(int c)
{
    static const char *const names[] = {"keep", "split", "unfuse"};
    return c >= 0 && c <= GR_UNFUSE ? names[c] : "?";
}

bool gr_group_splits(const gr_group *grp)
{
    return grp->kind == GR_G_TENSOR && (grp->rules & (1u << GR_R_BN_FOLD)) && grp->n > 2;
}

/* Makes group grp (at out->g[out->n]) what unfuse (first) or choices say:
 * left whole, split after its folded batch norm, or one group per op;
 * returns the number of groups it is now. */
static int apply_choice(gr_groups *out, const gr_unfuse *u, const gr_choices *ch)
{
    gr_group *grp = &out->g[out->n];
    int c = GR_KEEP;
    if (grp->fid >= 0 && unfused(u, grp->fid))
        c = GR_UNFUSE;
    else if (grp->fid >= 0 && ch && grp->fid < ch->n)
        c = ch->c[grp->fid];
    if (c == GR_KEEP)
        return 1;
    gr_group whole = *grp;
    int head = c == GR_SPLIT && gr_group_splits(&whole) ? 2 : 0;
    if (head) { /* the convolution and its batch norm, under the group's id */
        grp->n = head;
        grp->rules = 1u << GR_R_BN_FOLD;
    }
    for (int k = head; k < whole.n; k++) {
        gr_group *one = &out->g[out->n + (head ? 1 : 0) + (k - head)];
        memset(one, 0, sizeof *one);
        one->kind = GR_G_SINGLE;
        one->fid = -1;
        one->n = 1;
        one->nodes[0] = whole.nodes[k];
    }
    return (head ? 1 : 0) + whole.n - head;
}

/* Each id of u names a fusion group of the plan (n_fused of them). */
static fb_code check_unfuse(const gr_unfuse *u, int n_fused, fb_err *err)
{
    for (int k = 0; u && k < u->n; k++)
        if (u->ids[k] >= n_fused) {
            char field[32];
            snprintf(field, sizeof field, "params.unfuse[%d]", k);
            return fb_err_set(err, FB_EINVAL, field, "no fusion group %d: the plan has %d",
                              u->ids[k], n_fused);
        }
    return FB_OK;
}

fb_code gr_plan_groups(const gr_graph *g, bool fused, unsigned disabled, const gr_unfuse *unfuse,
                       const gr_choices *choices, gr_groups *out, fb_err *err)
{
    planner p = {0};
    memset(out, 0, sizeof *out);
    fb_code rc = planner_init(&p, g, disabled, err);
    if (!rc) {
        out->g = calloc((size_t)g->n_nodes + 1, sizeof *out->g);
        if (!out->g)
            rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate groups");
    }
    int n_fused = 0;
    for (int i = 0; !rc && i < g->n_nodes; i++) {
        gr_opk op = g->nodes[i].op;
        if (p.group_of[i] >= 0 || op == GR_RESHAPE || op == GR_FLATTEN)
            continue; /* views launch nothing */
        gr_group *grp = &out->g[out->n];
        group_at(&p, i, fused, grp);
        grp->fid = grp->n >= 2 ? n_fused++ : -1;
        for (int k = 0; k < grp->n; k++)
            p.group_of[grp->nodes[k]] = out->n;
        out->n += fused ? apply_choice(out, unfuse, choices) : 1;
    }
    if (!rc && fused)
        rc = check_unfuse(unfuse, n_fused, err);
    free(p.group_of);
    free(p.reader);
    if (rc)
        gr_groups_free(out);
    return rc;
}

void gr_groups_free(gr_groups *gs)
{
    if (!gs)
        return;
    free(gs->g);
    gs->g = NULL;
    gs->n = 0;
}

int gr_groups_fids(const gr_groups *gs)
{
    int n = 0;
    for (int i = 0; i < gs->n; i++)
        n = gs->g[i].fid + 1 > n ? gs->g[i].fid + 1 : n;
    return n;
}

int *gr_node_groups(const gr_graph *g, const gr_groups *fused, fb_err *err)
{
    int *ng = malloc(((size_t)g->n_nodes + 1) * sizeof *ng);
    if (!ng) {
        fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the group map");
        return NULL;
    }
    for (int i = 0; i < g->n_nodes; i++)
        ng[i] = -1;
    for (int gi = 0; gi < fused->n; gi++)
        for (int k = 0; k < fused->g[gi].n; k++)
            ng[fused->g[gi].nodes[k]] = fused->g[gi].fid;
    return ng;
}

/* Every combination of the tensor-epilogue rules, named (static strings). */
static const char *tensor_rule_name(unsigned r)
{
    static const char *const names[8] = {
        NULL,
        "bn_fold",
        "epilogue",
        "bn_fold+epilogue",
        "residual_epilogue",
        "bn_fold+residual_epilogue",
        "epilogue+residual_epilogue",
        "bn_fold+epilogue+residual_epilogue",
    };
    return names[r & 7];
}

const char *gr_group_rule(const gr_group *grp)
{
    if (grp->n < 2)
        return NULL;
    if (grp->kind == GR_G_TENSOR)
        return tensor_rule_name(grp->rules);
    if (grp->kind == GR_G_MLP && (grp->rules & (1u << GR_R_RESIDUAL)))
        return "mlp+residual_epilogue";
    for (int r = 0; r < GR_R_COUNT; r++)
        if (grp->rules & (1u << r))
            return rule_names[r];
    return NULL;
}

const char *gr_group_kind(const gr_group *grp)
{
    if (grp->n < 2)
        return NULL;
    switch (grp->kind) {
    case GR_G_TENSOR:
        return "tensor+element";
    case GR_G_ATTENTION:
    case GR_G_MLP:
        return "tensor+element+tensor";
    case GR_G_CHAIN:
        return "element_chain";
    default:
        return "element+reduction";
    }
}
