/* gr_report: what the result says of a plan: its fusion groups
 * (gr_plan_fusion_groups in gr_zoo.h: launches the planner formed, grouped by
 * rule, kind and op list), the graph in compact form and, per variant, the
 * fusion group of each node (so the dashboard can colour the graph). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr.h"
#include "gr_zoo.h"
#include "nat.h"

static bool same_group(const fb_fusion_group *g, const nat_launch *l)
{
    if (strcmp(g->rule, l->rule) != 0 || strcmp(g->kind, l->kind) != 0 || g->n_ops != l->n_ops)
        return false;
    for (int k = 0; k < l->n_ops; k++)
        if (strcmp(g->ops[k], l->ops[k]) != 0)
            return false;
    return true;
}

static void group_of(fb_fusion_group *g, const nat_launch *l)
{
    snprintf(g->rule, sizeof g->rule, "%s", l->rule);
    snprintf(g->kind, sizeof g->kind, "%s", l->kind);
    g->n_ops = l->n_ops < FB_MAX_KERNEL_OPS ? l->n_ops : FB_MAX_KERNEL_OPS;
    for (int k = 0; k < g->n_ops; k++)
        snprintf(g->ops[k], sizeof g->ops[k], "%s", l->ops[k]);
}

bool gr_plan_fusion_groups(const nat_plan *plan, fb_variant_result *vr)
{
    free(vr->fusion_groups);
    vr->fusion_groups = NULL;
    vr->n_fusion_groups = 0;
    int n = 0;
    for (int i = 0; i < plan->n; i++)
        n += plan->launches[i].rule != NULL;
    if (n == 0)
        return true;
    fb_fusion_group *gs = calloc((size_t)n, sizeof *gs);
    if (!gs)
        return false;
    int ng = 0;
    for (int i = 0; i < plan->n; i++) {
        const nat_launch *l = &plan->launches[i];
        if (!l->rule || !l->kind)
            continue;
        int j = 0;
        while (j < ng && !same_group(&gs[j], l))
            j++;
        if (j == ng)
            group_of(&gs[ng++], l);
        gs[j].count++;
    }
    vr->fusion_groups = gs;
    vr->n_fusion_groups = ng;
    return true;
}

bool gr_plan_node_groups(const nat_ctx *ctx, int v, fb_variant_result *vr)
{
    free(vr->node_groups);
    vr->node_groups = NULL;
    vr->n_node_groups = 0;
    const int *nl = ctx->node_launch[v];
    int n = ctx->n_graph_nodes;
    if (!nl || n <= 0) /* no graph: a pattern */
        return true;
    int *ng = malloc((size_t)n * sizeof *ng);
    if (!ng)
        return false;
    const nat_plan *plan = &ctx->plans[v];
    for (int i = 0; i < n; i++) {
        ng[i] = -1;
        const nat_launch *l = nl[i] >= 0 && nl[i] < plan->n ? &plan->launches[nl[i]] : NULL;
        if (!l || !l->rule || !l->kind)
            continue; /* an op of its own is no fusion group */
        for (int j = 0; j < vr->n_fusion_groups && ng[i] < 0; j++)
            if (same_group(&vr->fusion_groups[j], l))
                ng[i] = j;
    }
    vr->node_groups = ng;
    vr->n_node_groups = n;
    return true;
}

/* [d0, d1, ...] */
static cJSON *dims_json(const gr_tensor *t)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < t->rank; i++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateNumber((double)t->dims[i]))) {
            cJSON_Delete(a);
            return NULL;
        }
    return a;
}

/* Producing node ids of n's activation inputs; -1 for the graph input. */
static cJSON *inputs_json(const gr_graph *g, const gr_node *n)
{
    cJSON *a = cJSON_CreateArray();
    for (int j = 0; a && j < n->n_in; j++) {
        const gr_tensor *t = &g->tensors[n->in[j]];
        int id = t->kind == GR_T_ACT ? t->producer : (t->kind == GR_T_INPUT ? -1 : -2);
        if (id == -2)
            continue; /* a weight */
        if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(id))) {
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

static cJSON *node_json(const gr_graph *g, int i)
{
    const gr_node *n = &g->nodes[i];
    cJSON *o = cJSON_CreateObject();
    if (o && cJSON_AddNumberToObject(o, "id", i) &&
        cJSON_AddStringToObject(o, "op", gr_opk_name(n->op)) &&
        cJSON_AddStringToObject(o, "name", n->name) &&
        cJSON_AddItemToObject(o, "shape", dims_json(&g->tensors[n->out])) &&
        cJSON_AddItemToObject(o, "in", inputs_json(g, n)))
        return o;
    cJSON_Delete(o);
    return NULL;
}

cJSON *gr_graph_compact(const gr_graph *g, int max_nodes, int *kept)
{
    int n = g->n_nodes < max_nodes ? g->n_nodes : max_nodes;
    *kept = 0;
    cJSON *root = cJSON_CreateObject(), *in = NULL, *ns = NULL;
    bool ok =
        root && cJSON_AddNumberToObject(root, "n_nodes", g->n_nodes) &&
        cJSON_AddBoolToObject(root, "truncated", n < g->n_nodes) &&
        (in = cJSON_AddObjectToObject(root, "input")) &&
        (g->input < 0 || cJSON_AddItemToObject(in, "shape", dims_json(&g->tensors[g->input]))) &&
        (ns = cJSON_AddArrayToObject(root, "nodes"));
    for (int i = 0; ok && i < n; i++)
        ok = cJSON_AddItemToArray(ns, node_json(g, i));
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    *kept = n;
    return root;
}
