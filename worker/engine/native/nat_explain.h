/* nat_explain: why each fusion group of a native job won or lost, measured
 * (docs/EXPLAIN.md has the method).
 *
 * Per-launch times of the eager and fused plans over interleaved profiled
 * rounds give, per fusion group, the eager kernels it replaced summed against
 * its fused kernel(s), with a bootstrap interval of the mean per-round
 * difference; a verdict (won, lost, within_noise); for a group that lost, a
 * reason from a fixed list derived from measured facts (costs from the
 * launches' descriptors, who wrote each kernel, units of parallel work); and
 * a waterfall from the eager time to the fused time whose bars add up to the
 * job's measured difference with the remainder shown.  Counterfactuals then
 * re-time the fused plan with each losing group undone (params.unfuse),
 * interleaved with the plain fused plan: confirmed when undoing it recovers
 * time (the interval of the difference excludes zero), refuted when not.
 *
 * The analysis (nat_ex_analyze) is a pure function of per-launch samples,
 * so the CUDA backend's event timings feed it as the CPU's do, and the tests
 * feed it made-up samples. */
#ifndef NAT_EXPLAIN_H
#define NAT_EXPLAIN_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "fb_err.h"
#include "fb_spec.h"
#include "nat.h"

/* Reasons a group lost, in the order they are tried (the first that holds). */
typedef enum nat_ex_reason {
    NAT_EX_NONE,             /* the group did not lose */
    NAT_EX_LIBRARY_REPLACED, /* a library/tuned kernel of eager replaced by a generic one */
    NAT_EX_RECOMPUTE,        /* the fused kernel does more FLOPs than its parts */
    NAT_EX_MORE_BYTES,       /* it moves more bytes than its parts (a layout change, copies) */
    NAT_EX_LOST_PARALLELISM, /* fewer units of parallel work than the threads, its parts had more */
    NAT_EX_TOO_SMALL,        /* its parts took under the launch-bound floor: overhead decides */
    NAT_EX_KERNEL_SLOWDOWN,  /* none of the above: the fused kernel's own code is slower */
    NAT_EX_UNKNOWN,          /* the facts to decide are missing */
    NAT_EX_COUNT
} nat_ex_reason;

const char *nat_ex_reason_name(nat_ex_reason r); /* "library_replaced", ... */

typedef enum nat_ex_verdict { NAT_EX_WON, NAT_EX_LOST, NAT_EX_NOISE } nat_ex_verdict;

/* A counterfactual's verdict on the time undoing a group recovers, interval
 * [lo, hi]: confirmed when all of it is past what memory layout alone moves;
 * refuted when all of it is short of what the group lost; else inconclusive
 * (the run cannot tell them apart: a small group in a noisy model). */
typedef enum nat_ex_cf { NAT_EX_CF_CONFIRMED, NAT_EX_CF_REFUTED, NAT_EX_CF_INCONCLUSIVE } nat_ex_cf;
nat_ex_cf nat_ex_cf_verdict(double lo, double hi, double loss, double layout_ms);
const char *nat_ex_cf_name(nat_ex_cf v); /* "confirmed", "refuted", "inconclusive" */

/* One plan's profiled rounds: t[r * plan->n + i] is launch i's time in round
 * r (ms), wall[r] the whole round's. */
typedef struct nat_ex_plan {
    const nat_plan *plan;
    const double *t, *wall;
} nat_ex_plan;

typedef struct nat_ex_input {
    nat_ex_plan eager, fused;
    int rounds;
    int elem_bytes; /* 4: float32 */
    bool gpu;
    int threads; /* parallel workers (CPU threads; a GPU's SMs) */
    /* The job's timed samples (the headline), NULL when none. */
    const double *eager_ms, *fused_ms;
    int n_eager, n_fused;
    /* The profiled rounds' plain runs of each plan (rounds of them), NULL
     * when none: the difference re-measured in the explanation's phase. */
    const double *plain_eager, *plain_fused;
} nat_ex_input;

/* The facts the reason rules read, per group (exposed for the tests). */
typedef struct nat_ex_facts {
    bool eager_library, fused_library; /* some eager kernel / every fused one tuned */
    double eager_flops, fused_flops, eager_bytes, fused_bytes;
    double eager_units_max, fused_units; /* units of parallel work */
    double eager_ms;                     /* median per-round sum of the replaced kernels */
    int threads;
    bool gpu;
} nat_ex_facts;

/* The reason a group that lost lost, by the rules above. */
nat_ex_reason nat_ex_reason_of(const nat_ex_facts *f);

/* The launch-bound floor: a group whose eager kernels take less (ms) is too
 * small for its fusion to matter beyond launch overhead. */
#define NAT_EX_SMALL_MS_CPU 0.02
#define NAT_EX_SMALL_MS_GPU 0.01

typedef struct nat_ex_group {
    int id;
    int n_eager, n_fused; /* launches */
    const nat_launch *first_fused;
    double eager_med, fused_med;      /* medians of the per-round sums (ms) */
    double delta, delta_lo, delta_hi; /* mean per-round eager - fused and its 95% CI */
    /* the verdict's: the median per-round eager - fused and its distribution-free
     * 95% CI (order statistics), which a round a preemption stretched cannot move */
    double med_delta, med_lo, med_hi;
    nat_ex_facts facts;
    nat_ex_verdict verdict;
    nat_ex_reason reason;
    double roof_ms; /* the fused launches' roofline bound, NaN unknown */
    /* counterfactual (lost groups): fused minus fused-with-this-undone */
    bool cf_run;
    double cf_fused_ms, cf_unfused_ms, cf_diff, cf_lo, cf_hi;
    nat_ex_cf cf_verdict;
} nat_ex_group;

typedef struct nat_ex_result {
    int rounds;
    int n_groups;
    nat_ex_group *groups; /* owned: the ids with a fused launch, in id order */
    /* the waterfall (ms): means over the profiled rounds, and the measured
     * difference from the job's timed medians */
    double eager_wall, fused_wall;
    double won, lost, noise, outside, overhead;
    double measured, measured_lo, measured_hi, unexplained;
    /* the bars' sum (the profiled rounds' mean difference) and its 95% CI */
    double explained, explained_lo, explained_hi;
    /* the mean difference re-measured by plain runs in the same rounds (a
     * mean, as the bars are), and its 95% CI (NaN without them): the job's
     * headline was taken at another time, and a machine can drift between */
    double remeasured, remeasured_lo, remeasured_hi;
    double eager_med, fused_med; /* the headline medians */
    /* what memory layout alone moves the fused plan's time (ms): a placebo
     * counterfactual, two fresh builds of it against each other; NaN when no
     * counterfactual ran */
    double layout_ms;
    /* every lost group undone at once (n of them, 0: not run) */
    struct {
        int n;
        double loss, fused_ms, unfused_ms, diff, lo, hi;
        nat_ex_cf verdict;
    } all;
} nat_ex_result;

/* Analyzes in into out (freed by nat_ex_free).  FB_ENOMEM, or FB_EINVAL when
 * the plans have no fusion group. */
FB_MUSTCHECK fb_code nat_ex_analyze(const nat_ex_input *in, nat_ex_result *out, fb_err *err);
void nat_ex_free(nat_ex_result *ex);

/* The explanation as JSON (docs/EXPLAIN.md), groups largest effect first;
 * ctx, when it has a graph, names each group's graph nodes.  NULL on ENOMEM. */
cJSON *nat_ex_to_json(const nat_ex_result *ex, const nat_ex_input *in, const nat_ctx *ctx);

/* ---- counterfactuals (nat_explain_cf.c), on any backend ---- */

#define NAT_EX_MAX_COUNTERFACTUALS 8  /* groups undone one by one, largest loss first */
#define NAT_EX_UNFUSE_MAX          64 /* groups undone at once (= GR_UNFUSE_MAX) */

/* How to make fresh builds of the job: prepare(spec) with the job's spec,
 * params.unfuse set and variants (eager_name, fused_name).  by_group: the
 * workload's groups can be undone one by one (graph-built); else it is a
 * pattern whose one group undone is its eager variant. */
typedef struct nat_ex_builds {
    const fb_spec *spec;
    const char *eager_name, *fused_name;
    bool by_group;
    FB_MUSTCHECK fb_code (*prepare)(const fb_spec *spec, fb_instance **out, fb_err *err);
} nat_ex_builds;

/* The builds of a job's explanation: spec's variants eager and fused by
 * index ("eager" and "fused" when the spec names none, its defaults not
 * applied), prepare the backend's. */
nat_ex_builds nat_ex_builds_of(const fb_spec *spec, int eager, int fused, bool by_group,
                               fb_code (*prepare)(const fb_spec *, fb_instance **, fb_err *));

/* ---- the profiled rounds' samples, on any backend ---- */

/* Per launch per round of the eager (te) and fused (tf) plans, each round's
 * wall (we, wf), and the same rounds' plain runs of each (re, rf). */
typedef struct nat_ex_samples {
    int rounds;
    double *te, *tf, *we, *wf, *re, *rf;
} nat_ex_samples;

/* Room for rounds rounds of plans of n_eager and n_fused launches; FB_ENOMEM
 * (and s owning nothing) when there is none. */
FB_MUSTCHECK fb_code nat_ex_samples_alloc(nat_ex_samples *s, int rounds, int n_eager, int n_fused,
                                          fb_err *err);
void nat_ex_samples_free(nat_ex_samples *s);

/* The order of a profiled round's four runs: each plan launch by launch
 * (timed) and plainly, eager's two, then fused's two, the timed run first in
 * even rounds and the plain run first in odd ones.  So each of the four runs
 * right after its own plan in half the rounds and after the other plan in
 * the rest: the job's timing (A B, B A) gives each plan that, and the
 * launch-by-launch runs and the plain ones beside them see the same caches.
 * The order before it (timed eager and fused, then plain eager and fused,
 * which first alternating) gave the timed runs their own plan before them in
 * half the rounds and the plain runs never: layer norm's bars read 4-9% above
 * the plain runs, all of it what the run before left in the cache
 * (docs/EXPLAIN.md). */
typedef struct nat_ex_step {
    bool fused; /* else eager */
    bool timed; /* launch by launch; else plainly */
} nat_ex_step;
nat_ex_step nat_ex_round_step(int round, int step);

/* Rounds that fit budget_s when one takes round_ms, within [lo, hi]. */
int nat_ex_rounds_for(double budget_s, double round_ms, int lo, int hi);

/* Counterfactuals of ex's losing groups, each within budget_s: against a
 * fresh control build of the fused plan, a placebo (a second fresh build) for
 * layout_ms, each losing group undone (at most NAT_EX_MAX_COUNTERFACTUALS)
 * and, for a graph-built workload with two or more, all of them at once.
 * Plain iterations are timed by the instances' timed_run where they have one
 * (CUDA events), else by the wall clock around run. */
FB_MUSTCHECK fb_code nat_ex_counterfactuals(const nat_ex_builds *bs, double budget_s,
                                            nat_ex_result *ex, fb_err *err);

/* The whole explanation of a CPU job: profiled rounds of ctx's eager and
 * fused plans within budget_s, the analysis, counterfactuals of the losing
 * groups (nat_ex_counterfactuals with the native engine's prepare).  The
 * headline samples as in nat_ex_input. */
FB_MUSTCHECK fb_code nat_explain_cpu(const nat_ex_builds *bs, nat_ctx *ctx, const double *eager_ms,
                                     int n_eager, const double *fused_ms, int n_fused,
                                     double budget_s, cJSON **out, fb_err *err);

#endif
