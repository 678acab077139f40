/* fb_result: a job's result (docs/API.md "Results") and its per-kernel rows, as C
 * structs, with the JSON encoder (fb_result.c) and its strict decoder
 * (fb_result_read.c; the schema: proto/schema/result.schema.json).  The worker
 * fills these; the database stores the encoded JSON; the server serves it as
 * stored; every C reader decodes it here. */
#ifndef FB_RESULT_H
#define FB_RESULT_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "fb_err.h"
#include "fb_spec.h"

#define FB_KERNEL_NAME_MAX     128
#define FB_MAX_KERNEL_OPS      16
#define FB_KERNEL_LAUNCHES_MAX 16 /* per-launch offsets kept per kernel row */
#define FB_MAX_CATEGORIES      8
#define FB_STATUS_MSG_MAX      512
#define FB_DRAM_REASON_MAX     160

/* Statuses of METHOD.md's accuracy gate and failure kinds. */
typedef enum fb_vstatus {
    FB_VS_OK,
    FB_VS_ACCURACY_FAILED,
    FB_VS_UNSUPPORTED,
    FB_VS_OOM,
    FB_VS_TIMEOUT,
    FB_VS_CRASHED,
    FB_VS_ERROR,
} fb_vstatus;

const char *fb_vstatus_name(fb_vstatus s); /* "ok", "accuracy_failed", ... */

/* A variant's speedup over the baseline, as its CI says (fb_stats_change). */
typedef enum fb_change {
    FB_CHANGE_UNKNOWN = 0, /* no speedup (the baseline itself, a failed side) */
    FB_CHANGE_FASTER,
    FB_CHANGE_SLOWER,
    FB_CHANGE_NONE, /* no significant difference */
} fb_change;

/* "faster", "slower", "no_difference"; NULL for unknown. */
const char *fb_change_name(fb_change c);

/* Kernel categories (docs/DESIGN.md profiling). */
typedef enum fb_kcat {
    FB_KC_GEMM,        /* "gemm" (GEMM and conv) */
    FB_KC_ELEMENTWISE, /* "elementwise" */
    FB_KC_REDUCTION,   /* "reduction" (reductions and normalizations) */
    FB_KC_ATTENTION,   /* "attention" */
    FB_KC_COPY,        /* "copy" */
    FB_KC_OTHER,       /* "other" */
    FB_KC_COUNT
} fb_kcat;

const char *fb_kcat_name(fb_kcat c);

/* Latency statistics in milliseconds (METHOD.md). */
typedef struct fb_stats {
    int n;
    double median, mean, stdev, min, max, p90, cv;
    double ci95_lo, ci95_hi; /* 95% CI of the median, order statistics */
} fb_stats;

/* One row of GET /jobs/{id}/kernels: a kernel of a profiled iteration. */
typedef struct fb_kernel_row {
    char name[FB_KERNEL_NAME_MAX];
    fb_kcat category;
    int count; /* launches in one iteration */
    double total_ms, mean_ms;
    int grid[3], block[3]; /* 0s on the CPU backend */
    int n_ops;             /* graph ops this kernel implements */
    char ops[FB_MAX_KERNEL_OPS][FB_NAME_MAX];
    /* When each launch was, for timelines (GET /jobs/{id}/trace): the first
     * FB_KERNEL_LAUNCHES_MAX launches as [start from the iteration's start,
     * duration] in ms; n_launches 0 when the engine does not say. */
    int n_launches;
    float launches_ms[FB_KERNEL_LAUNCHES_MAX][2];
    /* What the launches cost by their shapes (native engine, nat_cost.h), per
     * iteration: bytes moved, FLOPs, the sum of their roofline bounds (NaN
     * when no roofline was measured) and who wrote the kernel ("loop",
     * "packed_gemm", "openblas", "cublaslt", "mixed", ...).  impl "" when the
     * engine does not say: then all four are null in JSON. */
    double bytes, flops, roof_ms;
    char impl[16];
} fb_kernel_row;

/* A fusion group of a variant's plan (native engine): kernels formed by the
 * same rule over the same ops, counted.  rule: the planner's rule names joined
 * by '+' ("bn_fold+epilogue"); kind: docs/DESIGN.md's taxonomy ("tensor+element",
 * "tensor+element+tensor", "element_chain", "element+reduction"). */
typedef struct fb_fusion_group {
    char rule[64];
    char kind[32];
    int count; /* launches of this group per iteration */
    int n_ops;
    char ops[FB_MAX_KERNEL_OPS][FB_NAME_MAX];
} fb_fusion_group;

/* Optional metrics are NaN (double) or -1 (integer) when the device cannot give
 * them; the encoder writes those as JSON null, never 0. */
typedef struct fb_variant_result {
    char name[FB_NAME_MAX];
    fb_vstatus status;
    char message[FB_STATUS_MSG_MAX]; /* why, when status != ok */
    fb_stats latency;
    int n_samples;
    double *samples_ms;                      /* owned, n_samples long */
    int64_t kernels;                         /* launches per iteration, -1 unknown */
    double kernel_time_ms, busy_ms, idle_ms; /* NaN unknown */
    int64_t fused_kernels, fused_ops;        /* -1 unknown */
    int64_t peak_mem_bytes;                  /* -1 unknown */
    double max_rel_error;                    /* NaN when not checked */
    /* Against the baseline's samples (fb_result_judge): the speedup (baseline
     * median / this median), its 95% bootstrap CI, what it says; NaN and
     * unknown for the baseline itself and when either side has no samples. */
    double speedup, speedup_lo, speedup_hi;
    fb_change change;
    bool unstable;                     /* latency CV over the device's threshold */
    double categories_ms[FB_KC_COUNT]; /* NaN for "none seen" */
    /* From CUPTI (GPU); unknown elsewhere.  DRAM bytes come from the range
     * profiler, which the driver may refuse: then -1 and dram_reason says why. */
    double memcpy_ms;                          /* NaN unknown */
    int64_t memcpy_bytes;                      /* -1 unknown */
    int64_t dropped_records;                   /* activity records lost, -1 unknown */
    int64_t dram_read_bytes, dram_write_bytes; /* per iteration, -1 unknown */
    char dram_reason[FB_DRAM_REASON_MAX];      /* why DRAM bytes are null, or "" */
    int n_kernel_rows;
    fb_kernel_row *kernel_rows;     /* owned */
    int n_fusion_groups;            /* 0: none reported */
    fb_fusion_group *fusion_groups; /* owned; "fusion_groups" in JSON */
    /* Graph-built workloads (fb_result.graph set): per graph node, the index into
     * fusion_groups of the group whose launch computes it, -1 none (an op of its
     * own, or a view).  Owned, NULL when no graph; "node_groups" in JSON, -1 as
     * null.  n_node_groups is the graph's kept node count. */
    int n_node_groups;
    int *node_groups;
    /* Engine-specific figures (owned, NULL when none; freed by fb_result_free),
     * encoded under extra_key, e.g. the inductor engine's "inductor" object. */
    char extra_key[32];
    cJSON *extra;
} fb_variant_result;

typedef struct fb_env {
    char device_name[128], device_uuid[64], driver[64], cuda[32], cudnn[32], cublas[32];
    char torch[32], triton[32], cpu[128], blas[64], fusionbench[64], hostname[64];
    int threads;
    /* The machine's measured limits on these threads (nat_roofline), 0 when
     * not measured: "roofline" in JSON, null then.  Not part of a result's
     * identity (db migration 0002 names the fields that are). */
    double roofline_gbps, roofline_gflops;
} fb_env;

/* A GPU while it was timed (fb_nvml): NaN unknown; n_samples 0 when NVML
 * was not there (then "gpu" is null in JSON). */
typedef struct fb_gpu_interference {
    int n_samples;
    double sm_mhz_min, sm_mhz_max, mem_mhz_min, mem_mhz_max, temp_c_max;
    uint64_t throttle_reasons; /* NVML's clocks-event reason bits, OR of the samples */
} fb_gpu_interference;

/* What else ran while the variants were timed (the noise's causes); NaN / -1
 * unknown. */
typedef struct fb_interference {
    double timed_ms;        /* wall time of the timed rounds */
    double steal_ms;        /* CPU time the hypervisor gave others (/proc/stat, all CPUs) */
    int64_t invol_switches; /* involuntary context switches of the process */
    int64_t minor_faults, major_faults;
    fb_gpu_interference gpu;
} fb_interference;

/* Adaptive repetition (METHOD.md in docs/): rounds asked for, rounds run, the
 * extra time allowed and why it stopped: "stable" (nothing to add),
 * "converged", "time_budget", "max_rounds"; "" when the engine timed alone. */
typedef struct fb_repetition {
    int rounds_requested, rounds;
    double budget_s;
    char stop[16];
} fb_repetition;

typedef struct fb_result {
    fb_env env;
    fb_interference interference;
    fb_repetition repetition;
    int n_variants;
    fb_variant_result variants[FB_MAX_VARIANTS];
    char baseline[FB_NAME_MAX]; /* "eager" unless the spec has none */
    double plan_ms;             /* compile/plan time, reported apart from latency */
    /* The model graph in compact form (native engine, graph-built workloads:
     * gr_graph_compact's {n_nodes, truncated, input, nodes}), owned, NULL when
     * the workload has none; "graph" in JSON.  Freed by fb_result_free. */
    cJSON *graph;
    /* The explanation of the fusion groups (spec.explain; docs/EXPLAIN.md),
     * owned, NULL when not asked; "explain" in JSON.  {"unavailable": why}
     * when asked and not possible.  Freed by fb_result_free. */
    cJSON *explain;
} fb_result;

/* Initializes to "nothing known" (NaN / -1 fields). */
void fb_variant_result_init(fb_variant_result *v, const char *name);
void fb_result_init(fb_result *r);
void fb_result_free(fb_result *r); /* frees samples, kernel rows, groups and the graph */

/* The name of NVML's clocks-event (throttle) reason bit i (0..8:
 * "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
 * "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown",
 * "hw_power_brake_slowdown", "display_clock_setting"), NULL past them. */
const char *fb_throttle_reason_name(int bit);

/* Fills each variant's unstable flag (latency CV over device's threshold) and
 * each non-baseline variant's speedup, bootstrap CI and change against the
 * baseline's samples.  Only variants with status ok against an ok baseline get
 * a speedup. */
void fb_result_judge(fb_result *r, const char *device);

/* Encodes the result, comparison included (speedup, kernel_ratio, memory_ratio
 * against the baseline, only for variants with status ok; a variant that failed
 * the accuracy gate gets no speedup).  Kernel rows are NOT included (they are
 * served by /kernels).  Caller deletes. NULL on ENOMEM. */
cJSON *fb_result_to_json(const fb_result *r);

/* Kernel rows of one variant as a JSON array of docs/API.md's /kernels rows. */
cJSON *fb_kernel_rows_to_json(const fb_variant_result *v);

/* Parts of the result as fb_result_to_json writes them, for readers that show
 * a part (the server's suite rows): the environment object, and a variant's
 * fusion groups (an array, empty when the engine gave none).  NULL on ENOMEM. */
cJSON *fb_env_to_json(const fb_env *e);
cJSON *fb_fusion_groups_to_json(const fb_variant_result *v);

/* The variant named name, or NULL. */
const fb_variant_result *fb_result_variant(const fb_result *r, const char *name);

/* Variant v against the result's baseline, as the comparison has it: the
 * speedup (baseline median / v's), and v's kernels and peak memory over the
 * baseline's; each NaN when unknown.  False (all NaN) for the baseline itself
 * and when either side's status is not ok: a wrong answer has no speedup. */
bool fb_result_against_baseline(const fb_result *r, const fb_variant_result *v, double *speedup,
                                double *kernel_ratio, double *memory_ratio);

/* Decodes a result as fb_result_to_json writes it (proto/schema/result.schema.json)
 * into *out (fb_result_free it; on an error it is left empty): strictly, an
 * error names the bad field by its path ("variants[1].latency_ms.median").
 * What the encoder always writes is required; what it may leave out may be
 * missing (older results lack later fields) and reads as unknown; an unknown
 * field is an error, except one object per variant, kept as the engine's own
 * (extra).  The comparison's speedups, intervals and changes go back into the
 * variants; kernel_ratio and memory_ratio are checked and recomputed by the
 * encoder.  FB_EINVAL (field named) or FB_ENOMEM. */
FB_MUSTCHECK fb_code fb_result_from_json(const cJSON *j, fb_result *out, fb_err *err);

/* Decodes kernel rows (fb_kernel_rows_to_json's array; a row may also carry
 * the server's "variant") into v's kernel_rows, replacing them; at prefixes
 * the error's path ("kernels.fused"), may be NULL. */
FB_MUSTCHECK fb_code fb_kernel_rows_from_json(const cJSON *arr, const char *at,
                                              fb_variant_result *v, fb_err *err);

/* JSON number or null for NaN; -1 integers → null. */
cJSON *fb_json_num_or_null(double v);
cJSON *fb_json_int_or_null(int64_t v);

/* Adds item to o as key; on failure (item NULL, or no memory) deletes item and
 * returns false, so a builder can chain `ok = ok && fb_json_put(...)`. */
bool fb_json_put(cJSON *o, const char *key, cJSON *item);

/* {"gbps", "gflops"}: a machine's measured limits, the roofline an
 * explanation holds kernels against; null unless both are > 0; NULL when out
 * of memory. */
cJSON *fb_json_roofline(double gbps, double gflops);

#endif
