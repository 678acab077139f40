/* db_results: suites, result history and the figures dashboards read.
 *
 * Result rows are written by a trigger on results (migration 0002), so the
 * worker's completing transaction writes them too: one row per (job, variant)
 * in result_rows, keyed by METHOD.md's result identity, and one history series
 * per identity in result_series.  Bodies are built as JSON in SQL, like the
 * other list endpoints; text handed out is the caller's to free. */
#ifndef FB_DB_RESULTS_H
#define FB_DB_RESULTS_H

#include <stdint.h>

#include "db.h"

#define DB_SUITE_JOBS_MAX 1000 /* jobs one suite may hold */

/* ---- suites (db_suites.c) ---- */

/* Inserts the suite (name may be "", spec_json the request as given) and its n
 * jobs (each as db_job_insert would), all in one statement, and NOTIFYs
 * fb_jobs.  *id is set.  n is 1..DB_SUITE_JOBS_MAX.  Under idem (NULL: none)
 * nothing is inserted when the owner already made a suite with the key: *id
 * is that suite and *how DB_IDEM_REPLAY (the same body hash) or
 * DB_IDEM_MISMATCH (another). */
/* The suite owner_id (0: none) made under idem's key: FB_ENOTFOUND when none
 * (err untouched); else *id and *how (DB_IDEM_REPLAY or DB_IDEM_MISMATCH). */
FB_MUSTCHECK fb_code db_suite_find_idem(db_conn *c, int64_t owner_id, const db_idem *idem,
                                        int64_t *id, db_idem_outcome *how, fb_err *err);

FB_MUSTCHECK fb_code db_suite_insert(db_conn *c, const char *name, const char *spec_json,
                                     const db_new_job *jobs, int n, const db_idem *idem,
                                     int64_t *id, db_idem_outcome *how, fb_err *err);

/* {"id", "name", "spec", "created_at", "jobs": [{"id", "state", "workload",
 * "batch_size", "device", "progress", "error", "result", "created_at",
 * "finished_at"}, ...]} as JSON text, jobs in id order.  FB_ENOTFOUND when
 * there is no such suite. */
FB_MUSTCHECK fb_code db_suite_get(db_conn *c, int64_t id, char **json, fb_err *err);

/* Newest first, ids < before (0: from the newest), of owner_id's (0: anyone's),
 * at most limit (1..200): a JSON array of {"id", "name", "owner", "created_at",
 * "jobs", "states": {state: n}, "device", "device_name"}.  *next_before is the
 * cursor, 0 on the last page. */
FB_MUSTCHECK fb_code db_suite_list(db_conn *c, int limit, int64_t before, int64_t owner_id,
                                   char **items_json, int64_t *next_before, fb_err *err);

/* ---- results (db_results.c) ---- */

typedef struct db_results_filter {
    const char *workload, *engine, *device, *dtype, *variant; /* NULL = any; device
                                                                  matches kind or name */
    int batch_size;                                           /* 0 = any */
    const char *since; /* timestamptz text; NULL = all points (a series with
                          none since then has an empty "series") */
    int points;        /* last points per series, 1..DB_RESULTS_POINTS_MAX */
    int limit;         /* series per page, 1..DB_RESULTS_LIMIT_MAX */
    int64_t after;     /* cursor: series ids > after */
} db_results_filter;

#define DB_RESULTS_POINTS_MAX 500
#define DB_RESULTS_LIMIT_MAX  500

/* A JSON array of series in series id order: {"id", "identity", "workload",
 * "engine", "device", "device_name", "dtype", "batch_size", "variant",
 * "params", "versions", "series": [{"job_id", "created_at", "status",
 * "median_ms", "ci95": [lo, hi], "speedup", "kernels", "fused_kernels",
 * "peak_mem_bytes"}, ...] oldest first}.  *next_after is the cursor, 0 on the
 * last page. */
FB_MUSTCHECK fb_code db_results_query(db_conn *c, const db_results_filter *f, char **items_json,
                                      int64_t *next_after, fb_err *err);

/* The raw samples of (job, variant) in *samples (malloc'd, caller frees), *n of
 * them; FB_ENOTFOUND when there is no such row. */
FB_MUSTCHECK fb_code db_result_samples(db_conn *c, int64_t job_id, const char *variant,
                                       double **samples, int *n, fb_err *err);

/* The raw samples of many (job, variant) pairs in one query: for each item,
 * v (malloc'd, caller frees, NULL when the row is missing or has none) and n. */
typedef struct db_samples {
    int64_t job_id;
    const char *variant; /* borrowed; a valid name (fb_name_valid) */
    double *v;
    int n;
} db_samples;

#define DB_SAMPLES_MANY_MAX 1024

FB_MUSTCHECK fb_code db_result_samples_many(db_conn *c, db_samples *items, int n, fb_err *err);

#endif
