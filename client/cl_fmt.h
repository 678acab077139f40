/* cl_fmt: what the client prints from the server's JSON: the live progress
 * line of a job, its state changes, and the tables of jobs, results, compare,
 * suites, workers and workloads (a job's result table is proto/fb_table's).
 * The JSON is outside input: missing or mistyped members print as "-". */
#ifndef CL_FMT_H
#define CL_FMT_H

#include <stdio.h>

#include <cjson/cJSON.h>

#define CL_BAR_WIDTH 24

/* A job's progress as a fraction in [0, 1] of its current phase (the worker's
 * {"phase", "variant", "done", "total"}); -1 when unknown. */
double cl_progress_fraction(const cJSON *progress);

/* The live line (no newline): "job 42 running  timing fused [#####.....]  40%  3.1s". */
void cl_fmt_progress(char *buf, size_t cap, const cJSON *job, double elapsed_s);

/* What a state-change line is about: "state phase variant"; the caller prints
 * cl_fmt_progress's text (without bar) when it changes. */
void cl_fmt_state_key(char *buf, size_t cap, const cJSON *job);

/* "job 42: running, timing fused 30/50 (3.1 s)". */
void cl_fmt_state_line(char *buf, size_t cap, const cJSON *job, double elapsed_s);

/* "401 unauthenticated: message (field x)" from an error answer, or the
 * status and the body's start when it is not the API's error shape. */
void cl_fmt_api_error(char *buf, size_t cap, long status, const char *body);

void cl_fmt_job_summary(FILE *f, const cJSON *job);
void cl_fmt_jobs(FILE *f, const cJSON *list);
void cl_fmt_results(FILE *f, const cJSON *list);
void cl_fmt_compare(FILE *f, const cJSON *cmp);
void cl_fmt_suite(FILE *f, const cJSON *suite);
void cl_fmt_workers(FILE *f, const cJSON *list);
void cl_fmt_workloads(FILE *f, const cJSON *list);

/* GET /api/v1/models: one line per model (id, name, owner, status, size, visibility). */
void cl_fmt_models(FILE *f, const cJSON *list);

/* One model: its fields, and what preparing it found or why it is invalid. */
void cl_fmt_model(FILE *f, const cJSON *m);

#endif
