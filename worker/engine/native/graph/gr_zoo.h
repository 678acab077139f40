/* gr_zoo: the graph layer's face to the engines above it (the native engine,
 * its CUDA backend): the model zoo as workloads, lookup of any native workload
 * (a pattern of the core, or a model), building its ctx, and what the result
 * says of a plan (gr_report.c).  The core below knows none of this. */
#ifndef GR_ZOO_H
#define GR_ZOO_H

#include <stdbool.h>

#include "fb_result.h"
#include "nat.h"

/* The model zoo (gr_zoo.c), NULL-terminated: whole models built as graphs and
 * lowered by the fusion planner; the same interface as a pattern (reference is
 * NULL: models are checked against PyTorch, tests/models). */
extern const nat_pattern *const gr_models[];

/* The workload of an uploaded model's jobs (model.<id>): the model's native
 * form, a file the worker names in params.model.native (gr_zoo.c). */
extern const nat_pattern gr_upload;

/* A pattern, a model of the zoo or an uploaded model by workload name, or NULL. */
const nat_pattern *gr_workload_find(const char *name);

/* Builds a ctx for spec's workload (gr_workload_find, then nat_ctx_build_for);
 * FB_EUNSUPPORTED on "workload" when the native engine has none of that name. */
FB_MUSTCHECK fb_code gr_ctx_build(const fb_spec *spec, nat_ctx **out, fb_err *err);

/* As gr_ctx_build, the cost planner timing on timer's device (NULL: this
 * CPU); the CUDA backend's builds pass its own (ncu_cost.c). */
FB_MUSTCHECK fb_code gr_ctx_build_on(const fb_spec *spec, const struct gr_cost_timer *timer,
                                     nat_ctx **out, fb_err *err);

/* Sets vr->fusion_groups from the plan's launches that a fusion rule formed
 * (rule set), counted by (rule, kind, ops); frees what vr held before.  Returns
 * false on ENOMEM (vr then reports none).  gr_report.c. */
bool gr_plan_fusion_groups(const nat_plan *plan, fb_variant_result *vr);

/* After gr_plan_fusion_groups of plan v: sets vr->node_groups from
 * ctx->node_launch[v] (each node's index into vr->fusion_groups, -1 none) for
 * the n_graph_nodes nodes the graph kept; leaves vr without node groups for a
 * ctx without a graph.  False on ENOMEM.  gr_report.c. */
bool gr_plan_node_groups(const nat_ctx *ctx, int v, fb_variant_result *vr);

#endif
