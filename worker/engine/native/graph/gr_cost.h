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

/* Where the cost planner times a group's forms when not on this CPU: a
 * device backend's timer (the CUDA one: ncu_cost.c).  With none, the plans'
 * launches run here, each timed by the host clock. */
typedef struct gr_cost_timer {
    /* The device's part of the decision keys: its name and whatever changes
     * what its launches do (dtype, TF32, ...), so that another device or
     * setting decides anew.  Also the result's graph.planner.timed_on. */
    char device[256];
    void *arg;
    /* Makes *run: plans 0 (eager), 1 (fused, the rules' groups) and 2 (each
     * group split) of the measuring ctx m made ready on the device, and run
     * once each.  Their launches read m's buffers and the job's ctx's (the
     * weights and inputs); both stay the caller's and outlive *run. */
    fb_code (*open)(void *arg, const nat_ctx *job, const nat_ctx *m, void **run, fb_err *err);
    /* One run of plan v (0, 1, 2) on the device, launch by launch: the
     * launches of the groups in want (n of them, by fid) and the launch
     * before each, which warms its input as in a job; each wanted group's
     * launches' time in ms summed into acc[fid] (zeroed first). */
    fb_code (*run)(void *run, int v, int n, const bool *want, double *acc, fb_err *err);
    void (*close)(void *run);
} gr_cost_timer;

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
    char timed_on[256];           /* "cpu", or the timer's device */
} gr_cost_report;

/* params.planner: "rules" (every group the rules form is fused) or "cost"
 * (*cost set).  A job that names none takes $FUSIONBENCH_PLANNER where set,
 * else "cost" on the CPU and on a device whose backend times launches
 * (device_timer: the CUDA one, checked on an H200, 2026-11-28), "rules"
 * elsewhere.
 * FB_EINVAL naming the field (or the variable) otherwise; FB_EUNSUPPORTED
 * for "cost" off the CPU where the backend gives no timer (device_timer
 * false). */
FB_MUSTCHECK fb_code gr_planner_from_spec(const fb_spec *spec, bool device_timer, bool *cost,
                                          fb_err *err);

/* The choice for each fusion group of g's fused plan under the rules not in
 * off (*out, indexed by fid; free with gr_choices_free): measured in a ctx
 * of its own (the weights and inputs g's tensors hold are read, not copied),
 * on this CPU or, with timer, on its device; or from the cache.  pack: the
 * job's GEMM mode (nat_spec_gemm_pack).  The CPU's cost model predicts (and
 * is calibrated) on the CPU only: a device measures every group it has no
 * decision for. */
FB_MUSTCHECK fb_code gr_cost_choose(const nat_ctx *ctx, const gr_graph *g, unsigned off, bool pack,
                                    const gr_cost_timer *timer, gr_choices *out,
                                    gr_cost_report *rep, fb_err *err);

/* What the GEMM choice did, for the result (graph.planner.gemm). */
typedef struct gr_gemm_report {
    int nodes;            /* convolutions and linears whose path depends on the GEMM */
    int packed, openblas; /* what they run on alone (the eager variant, an unfused group) */
    int groups;           /* the rules' fused groups headed by one */
    int groups_packed;    /* of them on ours when fused (the rest on OpenBLAS) */
    int measured, cached; /* shapes and groups timed now, or decided by an earlier job */
    double ms;            /* time spent deciding */
    char cache[256];      /* the cache file, "" when off */
} gr_gemm_report;

/* Whose GEMM each convolution and linear of g runs on, chosen where
 * params.gemm is "auto" and the cost planner plans (a CPU job), for each
 * node whose path depends on it (a linear; a convolution on ours against
 * OpenBLAS's, or Winograd where the CPU has it; not a depthwise one), twice:
 * running alone (g's eager plan) and at the head of a fused group (the
 * rules' groups: its epilogue in our GEMM's tile, or a pass after
 * OpenBLAS's), since one GEMM may win alone and lose fused.  Both plans run
 * on both GEMMs, alternating, 5 times at least and more while under 3 s,
 * and each keeps pack's (the job's default, nat_pw_default) unless the
 * other's least time is 3% lower (gr_cost.c, GEMM_MS).  The choices are set on the node
 * (gr_node.gemm and gemm_fused, where they differ from pack): each variant runs its faster GEMM,
 * and fusion is measured best against best.  One shape or group signature is timed once (its twins
 * share it) and cached with the groups' decisions, under the same machine, build, threads and
 * default. Call before gr_cost_choose: a group's key names its nodes' GEMMs. */
FB_MUSTCHECK fb_code gr_gemm_choose(const nat_ctx *ctx, gr_graph *g, unsigned off, bool pack,
                                    gr_gemm_report *rep, fb_err *err);

/* The key a group's decision is cached under (a digest, 16 hex digits) from
 * its signature and the context (machine, build, threads, GEMM mode);
 * exposed for the tests. */
void gr_cost_key(const char *signature, const char *context, char key[17]);

/* The context part of the key: machine (the CPU's model and count, or
 * device, a timer's gr_cost_timer.device), build ($FUSIONBENCH_BUILD_ID,
 * else the running executable's identity), and on the CPU threads and pack. */
void gr_cost_context(int threads, bool pack, const char *device, char *buf, size_t cap);

#endif
