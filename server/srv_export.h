/* srv_export: results views as CSV (?format=csv on /results, /suites/{id},
 * /compare) and a job's profiled iteration as a Chrome trace-event file
 * (GET /api/v1/jobs/{id}/trace) that Perfetto and chrome://tracing open. */
#ifndef SRV_EXPORT_H
#define SRV_EXPORT_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "srv_req.h"

#define SRV_CSV_MAX (32u * 1024 * 1024) /* largest CSV body */

/* Reads ?format= (json, the default, or csv) into *csv; false when it answered 400. */
FB_MUSTCHECK bool srv_export_format(srv_req *r, bool *csv);

/* Answers 200 text/csv: a header of cols, then one line per object of rows.  A
 * column "a.b" reads member b of object member a.  Numbers are written in full
 * precision, null as an empty field, strings quoted when they need it.  rows is
 * borrowed. */
void srv_export_csv(srv_req *r, const cJSON *rows, const char *const *cols, int n_cols,
                    const char *filename);

/* Appends the CSV line for one row to buf; exposed for unit tests.  false when
 * buf would pass cap bytes (nothing useful is left in buf then). */
FB_MUSTCHECK bool srv_export_csv_line(const cJSON *row, const char *const *cols, int n_cols,
                                      char *buf, size_t cap, size_t *len);

void srv_export_trace(srv_req *r);

/* The Chrome trace-event JSON for a job's kernel rows (an array as
 * db_job_kernels gives, each with "variant"), read through the typed kernel
 * rows (fb_kernel_rows_from_json); pure, caller deletes.  NULL with err set
 * when the rows do not decode (FB_EINVAL, the bad field named) or on ENOMEM. */
cJSON *srv_export_trace_json(int64_t job_id, const char *workload, const cJSON *rows, fb_err *err);

#endif
