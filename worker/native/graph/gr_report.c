/* gr_report: a plan's fusion groups for the result (nat_plan_fusion_groups in
 * nat.h): launches the planner formed, grouped by rule, kind and op list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

bool nat_plan_fusion_groups(const nat_plan *plan, fb_variant_result *vr)
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
