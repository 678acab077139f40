/* gr_cost: the cost planner (params.planner "cost", docs/EXPLAIN.md "The cost
 * planner").  The rules propose each fusion group; whether it is kept is
 * decided by what it costs here: at plan build each group's fused launch, its
 * split form (a convolution with its folded batch norm, the epilogue after it
 * as launches of their own) and its eager launches run in turn, on this
 * machine with the job's threads, and the fastest is kept (the fused one
 * unless another is faster by a clear margin).  Decisions are cached in a
 * file by (the group's ops, shapes and attributes, the threads, the GEMM
 * mode, the machine, the build), so a model plans from measurements once per
 * machine and build. */
#ifndef GR_COST_H
#define GR_COST_H

#include <stdbool.h>

#include "fb_spec.h"
#include "gr.h"
#include "gr_plan.h"
#include "nat.h"

/* What the planner did, for the result (graph.planner). */
typedef struct gr_cost_report {
    int groups;               /* fusion groups the rules proposed */
    int kept, split, unfused; /* what became of them */
    int measured, cached;     /* decisions timed now, or found in the cache (or in a group
                                 of the same ops and shapes decided just now) */
    int predicted;            /* decisions the cost model was sure of (gr_costmodel.h) */
    /* The model against what was measured now, each measured group in each
     * form a pair, predicted before this job's measurements taught it (NaN
     * when there were too few pairs or no calibration yet). */
    int model_pairs;
    double rank_corr, median_err; /* Spearman's; median |predicted / measured - 1| */
    double ms;                    /* time spent deciding (measuring included) */
    char cache[256];              /* the cache file, "" when off */
} gr_cost_report;

/* params.planner: "rules" (every group the rules form is fused) or "cost"
 * (*cost set).  A job that names none takes $FUSIONBENCH_PLANNER where set,
 * else "cost" on the CPU and "rules" on other devices (until the cost
 * planner times device launches).  FB_EINVAL naming the field (or the
 * variable) otherwise; FB_EUNSUPPORTED for "cost" off the CPU. */
FB_MUSTCHECK fb_code gr_planner_from_spec(const fb_spec *spec, bool *cost, fb_err *err);

/* The choice for each fusion group of g's fused plan under the rules not in
 * off (*out, indexed by fid; free with gr_choices_free): measured in a ctx
 * of its own (the weights and inputs g's tensors hold are read, not copied),
 * or from the cache.  pack: the job's GEMM mode (nat_spec_gemm_pack). */
FB_MUSTCHECK fb_code gr_cost_choose(const nat_ctx *ctx, const gr_graph *g, unsigned off, bool pack,
                                    gr_choices *out, gr_cost_report *rep, fb_err *err);

/* The key a group's decision is cached under (a digest, 16 hex digits) from
 * its signature and the context (machine, build, threads, GEMM mode);
 * exposed for the tests. */
void gr_cost_key(const char *signature, const char *context, char key[17]);

/* The context part of the key: machine (the CPU's model and count), build
 * ($FUSIONBENCH_BUILD_ID, else the running executable's identity), threads
 * and pack. */
void gr_cost_context(int threads, bool pack, char *buf, size_t cap);

#endif
