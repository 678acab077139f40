#include "srv_export.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_log.h"
#include "fb_result.h"

#define COL_PATH_MAX     64
#define TRACE_EVENTS_MAX 100000 /* launches drawn in one trace */

bool srv_export_format(srv_req *r, bool *csv)
{
    const char *f = srv_req_query(r, "format");
    *csv = false;
    if (!f || strcmp(f, "json") == 0)
        return true;
    if (strcmp(f, "csv") == 0) {
        *csv = true;
        return true;
    }
    srv_reply_error(r, 400, "invalid_argument", "format", "format must be json or csv");
    return false;
}

/* The value at a column path "k" or "k.sub" of row. */
static const cJSON *col_value(const cJSON *row, const char *col)
{
    char head[COL_PATH_MAX];
    const char *dot = strchr(col, '.');
    if (!dot)
        return cJSON_GetObjectItemCaseSensitive(row, col);
    if ((size_t)(dot - col) >= sizeof head)
        return NULL;
    memcpy(head, col, (size_t)(dot - col));
    head[dot - col] = '\0';
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(row, head), dot + 1);
}

static bool put(char *buf, size_t cap, size_t *len, const char *s, size_t n)
{
    if (n >= cap - *len)
        return false;
    memcpy(buf + *len, s, n);
    *len += n;
    buf[*len] = '\0';
    return true;
}

/* A string field, quoted (RFC 4180) when it holds a comma, quote or newline. */
static bool put_string(char *buf, size_t cap, size_t *len, const char *s)
{
    if (!strpbrk(s, ",\"\r\n"))
        return put(buf, cap, len, s, strlen(s));
    bool ok = put(buf, cap, len, "\"", 1);
    for (const char *p = s; ok && *p; p++)
        ok = *p == '"' ? put(buf, cap, len, "\"\"", 2) : put(buf, cap, len, p, 1);
    return ok && put(buf, cap, len, "\"", 1);
}

static bool put_value(char *buf, size_t cap, size_t *len, const cJSON *v)
{
    char num[40];
    if (cJSON_IsNumber(v)) {
        int n = snprintf(num, sizeof num, "%.17g", v->valuedouble);
        if (v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 1e15)
            n = snprintf(num, sizeof num, "%.0f", v->valuedouble);
        return put(buf, cap, len, num, (size_t)n);
    }
    if (cJSON_IsString(v))
        return put_string(buf, cap, len, v->valuestring);
    if (cJSON_IsBool(v))
        return put(buf, cap, len, cJSON_IsTrue(v) ? "true" : "false", cJSON_IsTrue(v) ? 4 : 5);
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        char *t = cJSON_PrintUnformatted(v);
        bool ok = t && put_string(buf, cap, len, t);
        free(t);
        return ok;
    }
    return true; /* null or missing: empty field */
}

bool srv_export_csv_line(const cJSON *row, const char *const *cols, int n_cols, char *buf,
                         size_t cap, size_t *len)
{
    for (int i = 0; i < n_cols; i++) {
        if (i && !put(buf, cap, len, ",", 1))
            return false;
        if (!put_value(buf, cap, len, row ? col_value(row, cols[i]) : NULL))
            return false;
    }
    return put(buf, cap, len, "\r\n", 2);
}

void srv_export_csv(srv_req *r, const cJSON *rows, const char *const *cols, int n_cols,
                    const char *filename)
{
    size_t cap = 64 * 1024, len = 0;
    char *buf = malloc(cap), disp[128];
    const cJSON *row;
    bool ok = buf != NULL;

    for (int i = 0; ok && i < n_cols; i++)
        ok = put_string(buf, cap, &len, cols[i]) &&
             put(buf, cap, &len, i + 1 < n_cols ? "," : "\r\n", i + 1 < n_cols ? 1 : 2);
    cJSON_ArrayForEach(row, rows)
    {
        /* Grow by doubling up to the hard maximum; a line never passes 1 MiB. */
        while (ok && cap - len < 1024 * 1024 && cap < SRV_CSV_MAX) {
            char *g = realloc(buf, cap * 2);
            ok = g != NULL;
            if (ok) {
                buf = g;
                cap *= 2;
            }
        }
        ok = ok && srv_export_csv_line(row, cols, n_cols, buf, cap, &len);
    }
    if (!ok) {
        free(buf);
        srv_reply_error(r, 413, "payload_too_large", NULL,
                        "the CSV would pass %u bytes: narrow the query", SRV_CSV_MAX);
        return;
    }
    srv_reply_owned(r, 200, "text/csv; charset=utf-8", buf, len);
    snprintf(disp, sizeof disp, "attachment; filename=\"%s\"", filename);
    srv_reply_header(r, "Content-Disposition", disp);
    srv_reply_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
}

/* ---- Chrome trace events ---- */

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* A metadata event naming process pid (one process per variant). */
static bool meta(cJSON *ev, const char *what, int pid, int tid, const char *name)
{
    cJSON *o = cJSON_CreateObject(), *args = cJSON_AddObjectToObject(o, "args");
    bool ok = args && cJSON_AddStringToObject(args, "name", name) &&
              cJSON_AddStringToObject(o, "ph", "M") && cJSON_AddStringToObject(o, "name", what) &&
              cJSON_AddNumberToObject(o, "pid", pid) && cJSON_AddNumberToObject(o, "tid", tid);
    if (!ok || !cJSON_AddItemToArray(ev, o)) {
        cJSON_Delete(o);
        return false;
    }
    return true;
}

/* A complete ("X") event of dur_us at ts_us for kernel row k. */
static bool launch(cJSON *ev, int pid, const fb_kernel_row *k, double ts_us, double dur_us)
{
    cJSON *o = cJSON_CreateObject(), *args = cJSON_CreateObject(), *ops = cJSON_CreateArray();
    const char *cat = fb_kcat_name(k->category);
    for (int i = 0; ops && i < k->n_ops && i < FB_MAX_KERNEL_OPS; i++)
        cJSON_AddItemToArray(ops, cJSON_CreateString(k->ops[i]));
    bool ok =
        o && args && ops && cJSON_AddStringToObject(o, "name", k->name) &&
        cJSON_AddStringToObject(o, "cat", cat) && cJSON_AddStringToObject(o, "ph", "X") &&
        cJSON_AddNumberToObject(o, "ts", ts_us) && cJSON_AddNumberToObject(o, "dur", dur_us) &&
        cJSON_AddNumberToObject(o, "pid", pid) && cJSON_AddNumberToObject(o, "tid", 1) &&
        cJSON_AddStringToObject(args, "category", cat) && cJSON_AddItemToObject(args, "ops", ops);
    if (!ok || !cJSON_AddItemToObject(o, "args", args)) {
        if (!ok)
            cJSON_Delete(ops);
        cJSON_Delete(args);
        cJSON_Delete(o);
        return false;
    }
    if (!cJSON_AddItemToArray(ev, o)) {
        cJSON_Delete(o);
        return false;
    }
    return true;
}

/* The launches of row k: at their recorded offsets (the first
 * FB_KERNEL_LAUNCHES_MAX, [start_ms, dur_ms]) when the worker stored them, else
 * back to back from *t_us, count launches of mean_ms each (the rows keep the
 * order of first launch). */
static bool row_events(cJSON *ev, int pid, const fb_kernel_row *k, double *t_us, int *budget)
{
    if (k->n_launches > 0) {
        for (int i = 0; i < k->n_launches && i < FB_KERNEL_LAUNCHES_MAX; i++) {
            double s = k->launches_ms[i][0], d = k->launches_ms[i][1];
            if (--*budget < 0 || !launch(ev, pid, k, s * 1e3, d * 1e3))
                return false;
            if ((s + d) * 1e3 > *t_us)
                *t_us = (s + d) * 1e3;
        }
        return true;
    }
    int count = k->count > 0 ? k->count : 1;
    double mean = isfinite(k->mean_ms)    ? k->mean_ms
                  : isfinite(k->total_ms) ? k->total_ms / count
                                          : 0;
    for (int i = 0; i < count; i++) {
        if (--*budget < 0 || !launch(ev, pid, k, *t_us, mean * 1e3))
            return false;
        *t_us += mean * 1e3;
    }
    return true;
}

cJSON *srv_export_trace_json(int64_t job_id, const char *workload, const cJSON *rows, fb_err *err)
{
    cJSON *o = NULL, *ev, *other;
    const cJSON *k;
    char last[64] = "", title[128];
    int pid = 0, budget = TRACE_EVENTS_MAX, i = 0;
    double t_us = 0;
    fb_variant_result v;
    bool ok;

    /* The rows typed (one variant's decoder over all of them, in order); the
     * variant each belongs to is the server's column beside them. */
    fb_variant_result_init(&v, "");
    if (fb_kernel_rows_from_json(rows, "kernels", &v, err) != FB_OK)
        goto out;
    o = cJSON_CreateObject();
    ev = cJSON_AddArrayToObject(o, "traceEvents");
    other = cJSON_AddObjectToObject(o, "otherData");
    ok = ev && other && cJSON_AddStringToObject(o, "displayTimeUnit", "ms") &&
         cJSON_AddNumberToObject(other, "job_id", (double)job_id) &&
         cJSON_AddStringToObject(other, "workload", workload);
    cJSON_ArrayForEach(k, rows)
    {
        if (!ok || i >= v.n_kernel_rows)
            break;
        const char *variant = str(k, "variant");
        if (strcmp(variant, last) != 0) { /* rows come grouped by variant */
            snprintf(last, sizeof last, "%s", variant);
            snprintf(title, sizeof title, "%s (job %" PRId64 ")", variant, job_id);
            pid++;
            t_us = 0;
            ok = meta(ev, "process_name", pid, 0, title) &&
                 meta(ev, "thread_name", pid, 1, "kernels");
        }
        ok = ok && row_events(ev, pid, &v.kernel_rows[i++], &t_us, &budget);
    }
    if (!ok) {
        cJSON_Delete(o);
        o = NULL;
        fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    }
out:
    free(v.kernel_rows);
    return o;
}

void srv_export_trace(srv_req *r)
{
    char idt[32], disp[96], *rows_text = NULL;
    int64_t id;
    db_job j = {0};
    fb_err err;

    fb_err_clear(&err);
    if (!srv_req_cap(r, 0, idt, sizeof idt) || !srv_parse_id(idt, strlen(idt), &id)) {
        srv_reply_error(r, 404, "not_found", NULL, "no such job");
        return;
    }
    if (db_job_get(r->db, id, &j, &err) != FB_OK ||
        db_job_kernels(r->db, id, NULL, &rows_text, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        goto out;
    }
    cJSON *spec = cJSON_Parse(j.spec_json), *rows = cJSON_Parse(rows_text);
    if (cJSON_GetArraySize(rows) == 0) {
        srv_reply_error(r, 404, "not_found", NULL, "job %" PRId64 " has no profiled kernels%s", id,
                        strcmp(j.state, "succeeded") ? " (not succeeded)" : "");
    } else {
        cJSON *trace = srv_export_trace_json(id, str(spec, "workload"), rows, &err);
        if (!trace) {
            srv_reply_fb_err(r, &err);
        } else {
            srv_reply_json(r, 200, trace);
            snprintf(disp, sizeof disp, "attachment; filename=\"job-%" PRId64 "-trace.json\"", id);
            srv_reply_header(r, "Content-Disposition", disp);
        }
    }
    cJSON_Delete(spec);
    cJSON_Delete(rows);
out:
    free(rows_text);
    db_job_free(&j);
}
