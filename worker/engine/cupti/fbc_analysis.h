/* fbc_analysis: what a profiled iteration's activity records say (docs/DESIGN.md
 * "Profiling"), as pure functions over plain records, with no CUDA or CUPTI in
 * sight so that they are unit-tested on synthetic records on any machine.
 *
 * The CUPTI layer (fbc_cupti.c) turns activity records into fbc_rec; the
 * injection library writes them to a file and fbc_file.c reads them back; both
 * end here.  Times are CUPTI timestamps in nanoseconds. */
#ifndef FBC_ANALYSIS_H
#define FBC_ANALYSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fb_err.h"
#include "fb_result.h"

#define FBC_NAME_MAX   256       /* kernel names are mangled and long; longer ones are cut */
#define FBC_STORE_MAX  (1 << 18) /* hard maximum of records one store holds */
#define FBC_TOP_MAX    64        /* kernel rows kept per iteration (by total time) */
#define FBC_REASON_MAX 160

typedef enum fbc_kind {
    FBC_KERNEL,  /* CONCURRENT_KERNEL: start, end, grid, block, name, corr */
    FBC_MEMCPY,  /* start, end, bytes, copy_kind, corr */
    FBC_MEMSET,  /* start, end, bytes, corr */
    FBC_ALLOC,   /* MEMORY2 allocation: start = end = timestamp, bytes, addr */
    FBC_FREE,    /* MEMORY2 release: start = end = timestamp, bytes, addr */
    FBC_EXTCORR, /* external correlation: corr (CUPTI's) belongs to ext_id (ours) */
    FBC_RANGE,   /* a range marker we recorded: ext_id, start, end, name = label */
    FBC_LAUNCH,  /* a launch mark: corr (CUPTI's) was enqueued by launch ext_id - 1 of a plan */
} fbc_kind;

typedef struct fbc_rec {
    fbc_kind kind;
    uint64_t start, end; /* ns */
    uint64_t bytes;
    uint64_t addr;
    uint64_t ext_id;
    uint32_t corr;
    uint32_t device, stream;
    int copy_kind; /* CUpti_ActivityMemcpyKind for FBC_MEMCPY */
    int32_t grid[3], block[3];
    char name[FBC_NAME_MAX];
} fbc_rec;

/* A growable array of records with a hard maximum: appends past FBC_STORE_MAX
 * (or past a failed allocation) are counted in `overflow`, never stored. */
typedef struct fbc_store {
    fbc_rec *recs; /* owned */
    size_t n, cap, max;
    uint64_t overflow;
} fbc_store;

/* max 0 means FBC_STORE_MAX. */
void fbc_store_init(fbc_store *s, size_t max);
void fbc_store_free(fbc_store *s);
void fbc_store_clear(fbc_store *s); /* keeps the memory */
/* Copies r in; false when it was dropped (counted in overflow). */
bool fbc_store_add(fbc_store *s, const fbc_rec *r);

/* Category of a kernel from its (possibly mangled) name: the first row of the
 * pattern table (fbc_analysis.c, documented in docs/gpu/CUPTI.md) whose
 * pattern occurs in the lower-cased name wins; FB_KC_OTHER when none does. */
fb_kcat fbc_classify(const char *name);

/* An interval [start, end) in ns. */
typedef struct fbc_span {
    uint64_t start, end;
} fbc_span;

/* Total length of the union of n intervals (sorted in place; empty or
 * inverted intervals count 0). */
uint64_t fbc_union_ns(fbc_span *spans, size_t n);

/* What the engine says launch i of the iteration implements (optional): when
 * the iteration has exactly n_labels kernels, kernel i in launch order (CUPTI
 * correlation id) takes label i's ops. */
typedef struct fbc_label {
    const char *name;
    int n_ops;
    const char *const *ops;
} fbc_label;

/* One profiled iteration, reduced. */
typedef struct fbc_summary {
    int64_t kernels;
    uint64_t kernel_ns; /* sum of kernel durations (overlaps counted twice) */
    uint64_t busy_ns;   /* union of kernel, memcpy and memset intervals */
    uint64_t span_ns;   /* first start to last end of that activity */
    uint64_t idle_ns;   /* span - busy: the GPU waited for the host */
    int64_t memcpys;
    uint64_t memcpy_ns, memcpy_bytes;
    int64_t memsets;
    uint64_t memset_ns;
    uint64_t category_ns[FB_KC_COUNT];
    bool category_seen[FB_KC_COUNT];
    int64_t peak_delta_bytes; /* max net bytes allocated in the window, over its start */
    int64_t peak_bytes;       /* max net bytes live since the first record, up to window end */
    uint64_t dropped;         /* records lost (CUPTI and store overflow), whole session */
    int n_rows;
    fb_kernel_row *rows; /* owned: per kernel name, by total time, at most FBC_TOP_MAX */
} fbc_summary;

void fbc_summary_free(fbc_summary *s);

/* Which records belong to an iteration: those whose correlation id an
 * FBC_EXTCORR record maps to ext_id; when the store holds no such mapping for
 * ext_id, those whose interval lies inside [t0, t1] (the range's timestamps). */
typedef struct fbc_window {
    uint64_t ext_id;
    uint64_t t0, t1;
} fbc_window;

/* Finds the FBC_RANGE record with this ext_id and fills w; false when none. */
bool fbc_window_of_range(const fbc_store *s, uint64_t ext_id, fbc_window *w);

/* Reduces the records of window w (labels may be NULL).  *out is initialized
 * here; free with fbc_summary_free even on error. */
FB_MUSTCHECK fb_code fbc_summarize(const fbc_store *s, const fbc_window *w, const fbc_label *labels,
                                   int n_labels, fbc_summary *out, fb_err *err);

/* Per-launch device time of one profiled iteration of a plan of n launches
 * whose launch i was marked (FBC_LAUNCH, ext_id i + 1) while it enqueued its
 * work: t_ms[i] the summed durations of window w's kernels, memcpys and
 * memsets that launch i's marks name (a library call that runs several
 * kernels adds them up; a launch that ran nothing on the device gets 0);
 * *wall_ms the window's activity span, first start to last end.  Activity of
 * the window that no mark names (or names past n) is counted in *unmarked,
 * never given to a launch.  FB_EINVAL when the window holds no activity;
 * FB_EUNAVAIL when it holds activity but none of it is marked (CUPTI wrote
 * no external-correlation records: every launch would read 0 ms). */
FB_MUSTCHECK fb_code fbc_launch_times(const fbc_store *s, const fbc_window *w, int n, double *t_ms,
                                      double *wall_ms, int *unmarked, fb_err *err);

/* Copies the summary into a variant result: kernels, kernel_time_ms, busy_ms,
 * idle_ms, memcpy_ms and _bytes, dropped_records, categories_ms (copy = memcpy + memset; unseen
 * categories stay NaN), kernel rows (moved: the summary's rows become the result's) and, when
 * base_bytes >= 0, peak_mem_bytes = base_bytes + peak_delta_bytes. */
void fbc_summary_to_variant(fbc_summary *s, int64_t base_bytes, fb_variant_result *vr);

#endif
