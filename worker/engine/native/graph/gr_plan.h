/* gr_plan: the fusion planner.  It partitions a graph's nodes into groups, each
 * one kernel launch: eager makes one group per op (views make none); fused
 * applies the enabled rules, each of which grows a group along single-consumer
 * edges (an intermediate read by anything else must reach memory, so it cannot
 * be fused away).  gr_lower turns groups into launches and places the tensors
 * that reach memory in an arena by lifetime. */
#ifndef GR_PLAN_H
#define GR_PLAN_H

#include <stdbool.h>

#include "fb_spec.h"
#include "gr.h"
#include "nat.h"

enum gr_rule {
    GR_R_BN_FOLD,
    GR_R_EPILOGUE,
    GR_R_RESIDUAL,
    GR_R_ELEMENT_CHAIN,
    GR_R_SOFTMAX,
    GR_R_LAYERNORM,
    GR_R_ATTENTION,
    GR_R_MLP,
    GR_R_COUNT
};

const char *gr_rule_name(int r); /* "bn_fold", ..., the params.disable_rules names */

/* What a group is, so gr_lower knows which launch to make. */
typedef enum gr_gkind {
    GR_G_SINGLE,    /* one op */
    GR_G_TENSOR,    /* conv/linear [+ bn] [+ residual add] [+ act] */
    GR_G_CHAIN,     /* elementwise ops */
    GR_G_SOFTMAX,   /* [scale] [mask] softmax */
    GR_G_LAYERNORM, /* add + layer norm */
    GR_G_ATTENTION, /* matmul [scale] [mask] softmax matmul */
    GR_G_MLP,       /* linear gelu linear */
} gr_gkind;

#define GR_GROUP_MAX 16

typedef struct gr_group {
    gr_gkind kind;
    unsigned rules; /* bit r: rule r formed it */
    int fid;        /* fusion group id: its place among the fused plan's groups of 2+ ops
                       (params.unfuse and the explanation name groups so), -1: none */
    int n;
    int nodes[GR_GROUP_MAX]; /* in graph order; the last one's output leaves the group */
} gr_group;

typedef struct gr_groups {
    int n;
    gr_group *g; /* owned */
} gr_groups;

/* Reads params.disable_rules (an array of rule names) into *disabled (bit r set:
 * rule r off).  FB_EINVAL naming "params.disable_rules[i]" for an unknown name. */
FB_MUSTCHECK fb_code gr_rules_from_spec(const fb_spec *spec, unsigned *disabled, fb_err *err);

/* params.unfuse: fusion group ids to leave unfused (at most GR_UNFUSE_MAX). */
#define GR_UNFUSE_MAX FB_UNFUSE_MAX
typedef struct gr_unfuse {
    int n;
    int ids[GR_UNFUSE_MAX];
} gr_unfuse;
/* Reads params.unfuse (an array of fusion group ids, each at least 0) into u
 * (n 0 when absent).  FB_EINVAL naming the field for anything else. */
FB_MUSTCHECK fb_code gr_unfuse_from_spec(const fb_spec *spec, gr_unfuse *u, fb_err *err);

/* What becomes of a fusion group the rules formed (the cost planner's
 * choice, gr_cost.h): kept, split (a tensor group with a folded batch norm
 * and more: the convolution with its batch norm stays one launch, keeping the
 * group's id, and each op after it runs alone), or unfused (one op each). */
typedef enum gr_choice { GR_KEEP, GR_SPLIT, GR_UNFUSE } gr_choice;
typedef struct gr_choices {
    int n;            /* fusion groups (fids 0..n-1) */
    unsigned char *c; /* owned: a gr_choice per fid */
} gr_choices;
void gr_choices_free(gr_choices *ch);
const char *gr_choice_name(int c); /* "keep", "split", "unfuse" */

/* Whether grp has a split form distinct from unfusing it. */
bool gr_group_splits(const gr_group *grp);

/* Groups of g: fused with the rules not in disabled, or eager (one op each).
 * With choices (fused only; may be NULL: keep all), each fusion group becomes
 * what its choice says; with unfuse (fused only; may be NULL), the fusion
 * groups it names are left as one group per op whatever the choice.  Every
 * other group keeps its id; an id past the plan's groups is FB_EINVAL naming
 * "params.unfuse[i]". */
FB_MUSTCHECK fb_code gr_plan_groups(const gr_graph *g, bool fused, unsigned disabled,
                                    const gr_unfuse *unfuse, const gr_choices *choices,
                                    gr_groups *out, fb_err *err);
void gr_groups_free(gr_groups *gs);

/* The number of fusion groups of gs (its largest fid + 1). */
int gr_groups_fids(const gr_groups *gs);

/* Per node of g (n_nodes of them, malloc'd; NULL on ENOMEM, err set), the
 * fid of the fusion group of fused that holds it, -1 none: the eager plan's
 * launches carry the id of the fused group that replaces them (gr_lower's
 * node_group). */
int *gr_node_groups(const gr_graph *g, const gr_groups *fused, fb_err *err);

/* The group's rule names joined by '+' ("bn_fold+epilogue") as a static
 * string, and its docs/DESIGN.md taxonomy kind; NULL for a group of one op. */
const char *gr_group_rule(const gr_group *grp);
const char *gr_group_kind(const gr_group *grp);

/* ---- lowering (gr_lower.c) ---- */

/* Lowers g into the ctx's plan for variant v (NAT_EAGER / NAT_FUSED) from its
 * groups: activations in one arena buffer (mask 1 << v) placed by lifetime,
 * weights and the input from the graph's tensor data (set by the caller).
 * Folded weights, and linear weights packed for nat_pw_gemm (when pack:
 * params.gemm, nat_spec_gemm_pack; shared by the variants), are new ctx
 * buffers.  The
 * plan's out is the graph output. */
/* Each launch's group is its group's fid, or with node_group (one per graph
 * node; the eager plan's) the fid of the fused group its first node is in, so
 * that the eager launches a fused group replaced carry its id. */
FB_MUSTCHECK fb_code gr_lower(nat_ctx *ctx, gr_graph *g, const gr_groups *gs, int v, bool pack,
                              const int *node_group, fb_err *err);

/* The shape of conv node n of g (GR_CONV2D or GR_CONV1D) as its launch takes
 * it, on OpenBLAS (blas) or our GEMM, finished (nat_conv_shape_finish); false
 * when the shape is impossible. */
bool gr_conv_shape(const gr_graph *g, const gr_node *n, bool blas, nat_conv_shape *s);

/* After every variant is lowered: each buffer's variant mask becomes the set of
 * plans whose launches read or write it (so a variant's peak memory counts the
 * weights it really uses: folded ones for fused, raw ones for eager), except
 * g's inputs, which every variant keeps. */
void gr_lower_masks(nat_ctx *ctx, const gr_graph *g);

#endif
