#include "cl_fmt.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fb_table.h"

static const cJSON *get(const cJSON *o, const char *key)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = get(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *key, const char *def)
{
    const cJSON *v = get(o, key);
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : def;
}

/* A whole number as text ("-" unless it is one in a sane range). */
static void fmt_int(char *buf, size_t cap, double v)
{
    if (!(v >= -9e15 && v <= 9e15))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.0f", v);
}

/* v with prec decimals and a suffix, "-" when unknown. */
static void fmt_num(char *buf, size_t cap, double v, int prec, const char *suffix)
{
    if (isnan(v) || isinf(v))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.*f%s", prec, v, suffix);
}

/* A relative change as a signed percentage, "-" when unknown. */
static void fmt_change(char *buf, size_t cap, double v)
{
    if (isnan(v) || isinf(v))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%+.1f%%", v * 100);
}

static void fmt_p(char *buf, size_t cap, double v)
{
    if (isnan(v) || isinf(v))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.2g", v);
}

static const cJSON *as_arr(const cJSON *v)
{
    return cJSON_IsArray(v) ? v : NULL;
}

static const cJSON *as_obj(const cJSON *v)
{
    return cJSON_IsObject(v) ? v : NULL;
}

/* The items array of a list answer, or NULL. */
static const cJSON *items(const cJSON *list)
{
    const cJSON *it = get(list, "items");
    return as_arr(it);
}

static void next_cursor(FILE *f, const cJSON *list)
{
    const char *c = str(list, "next_cursor", NULL);
    if (c && *c)
        fprintf(f, "(more: next cursor %s)\n", c);
}

double cl_progress_fraction(const cJSON *p)
{
    double done = num(p, "done"), total = num(p, "total");

    if (!(total > 0) || !(done >= 0))
        return -1;
    return done >= total ? 1.0 : done / total;
}

/* "timing fused 30/50" or "" without progress. */
static void phase_text(char *buf, size_t cap, const cJSON *job)
{
    const cJSON *p = get(job, "progress");
    char d[24], t[24];

    if (!cJSON_IsObject(p)) {
        buf[0] = '\0';
        return;
    }
    fmt_int(d, sizeof d, num(p, "done"));
    fmt_int(t, sizeof t, num(p, "total"));
    const char *v = str(p, "variant", NULL);
    snprintf(buf, cap, "%s%s%s %s/%s", str(p, "phase", "?"), v ? " " : "", v ? v : "", d, t);
}

static void job_id(char *buf, size_t cap, const cJSON *job)
{
    fmt_int(buf, cap, num(job, "id"));
}

void cl_fmt_progress(char *buf, size_t cap, const cJSON *job, double elapsed_s)
{
    const cJSON *p = get(job, "progress");
    double frac = cl_progress_fraction(p);
    char id[24], bar[CL_BAR_WIDTH + 1], pct[8], ph[160];
    const char *v = str(p, "variant", NULL);
    int fill = frac < 0 ? 0 : (int)(frac * CL_BAR_WIDTH + 0.5);

    job_id(id, sizeof id, job);
    for (int i = 0; i < CL_BAR_WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[CL_BAR_WIDTH] = '\0';
    if (frac < 0)
        snprintf(pct, sizeof pct, "  -");
    else
        snprintf(pct, sizeof pct, "%3d%%", (int)(frac * 100 + 0.5));
    snprintf(ph, sizeof ph, "%s%s%s", cJSON_IsObject(p) ? str(p, "phase", "?") : "", v ? " " : "",
             v ? v : "");
    snprintf(buf, cap, "job %s %-9s %-18.18s [%s] %s %6.1fs", id, str(job, "state", "?"), ph, bar,
             pct, elapsed_s);
}

void cl_fmt_state_key(char *buf, size_t cap, const cJSON *job)
{
    const cJSON *p = get(job, "progress");
    snprintf(buf, cap, "%s %s %s", str(job, "state", "?"), str(p, "phase", "-"),
             str(p, "variant", "-"));
}

void cl_fmt_state_line(char *buf, size_t cap, const cJSON *job, double elapsed_s)
{
    char id[24], ph[160];

    job_id(id, sizeof id, job);
    phase_text(ph, sizeof ph, job);
    snprintf(buf, cap, "job %s: %s%s%s (%.1f s)", id, str(job, "state", "?"), ph[0] ? ", " : "", ph,
             elapsed_s);
}

void cl_fmt_api_error(char *buf, size_t cap, long status, const char *body)
{
    cJSON *root = body ? cJSON_Parse(body) : NULL;
    const cJSON *e = get(root, "error");
    const char *field = str(e, "field", NULL);

    if (cJSON_IsObject(e))
        snprintf(buf, cap, "%ld %s: %s%s%s%s", status, str(e, "code", "?"), str(e, "message", ""),
                 field ? " (field " : "", field ? field : "", field ? ")" : "");
    else
        snprintf(buf, cap, "%ld: %.200s", status, body && *body ? body : "(no body)");
    cJSON_Delete(root);
}

void cl_fmt_job_summary(FILE *f, const cJSON *job)
{
    const cJSON *spec = get(job, "spec"), *e = get(job, "error");
    char id[24], ph[160];

    job_id(id, sizeof id, job);
    phase_text(ph, sizeof ph, job);
    fprintf(f, "job %s  %s  %s  engine %s  device %s  owner %s  worker %s\n", id,
            str(job, "state", "?"), str(spec, "workload", "?"), str(spec, "engine", "-"),
            str(spec, "device", "-"), str(job, "owner", "-"), str(job, "worker", "-"));
    fprintf(f, "created %s  started %s  finished %s\n", str(job, "created_at", "-"),
            str(job, "started_at", "-"), str(job, "finished_at", "-"));
    if (ph[0])
        fprintf(f, "progress: %s\n", ph);
    if (cJSON_IsObject(e))
        fprintf(f, "error: %s: %s\n", str(e, "code", "?"), str(e, "message", ""));
}

void cl_fmt_jobs(FILE *f, const cJSON *list)
{
    const cJSON *j;
    char id[24], batch[24];

    fprintf(f, "%-8s %-10s %-24s %-9s %-6s %5s %-12s %s\n", "ID", "STATE", "WORKLOAD", "ENGINE",
            "DEVICE", "BATCH", "OWNER", "CREATED");
    cJSON_ArrayForEach(j, items(list))
    {
        const cJSON *spec = get(j, "spec");
        job_id(id, sizeof id, j);
        fmt_int(batch, sizeof batch, num(spec, "batch_size"));
        fprintf(f, "%-8s %-10s %-24s %-9s %-6s %5s %-12s %s\n", id, str(j, "state", "?"),
                str(spec, "workload", "?"), str(spec, "engine", "-"), str(spec, "device", "-"),
                batch, str(j, "owner", "-"), str(j, "created_at", "-"));
    }
    next_cursor(f, list);
}

void cl_fmt_results(FILE *f, const cJSON *list)
{
    const cJSON *r;
    char batch[24], med[24], sp[24], ch[24], job[24];

    fprintf(f, "%-24s %-9s %-6s %-9s %5s %-22s %10s %9s %8s %-12s %8s\n", "WORKLOAD", "ENGINE",
            "DEVICE", "DTYPE", "BATCH", "VARIANT", "MEDIAN MS", "SPEEDUP", "CHANGE", "FLAG", "JOB");
    cJSON_ArrayForEach(r, items(list))
    {
        const cJSON *p = get(r, "latest");
        fmt_int(batch, sizeof batch, num(r, "batch_size"));
        fmt_num(med, sizeof med, num(p, "median_ms"), 4, "");
        fmt_num(sp, sizeof sp, num(p, "speedup"), 3, "x");
        fmt_change(ch, sizeof ch, num(p, "change"));
        fmt_int(job, sizeof job, num(p, "job_id"));
        fprintf(f, "%-24s %-9s %-6s %-9s %5s %-22s %10s %9s %8s %-12s %8s\n",
                str(r, "workload", "?"), str(r, "engine", "-"), str(r, "device", "-"),
                str(r, "dtype", "-"), batch, str(r, "variant", "?"), med, sp, ch,
                str(p, "flag", "-"), job);
    }
    next_cursor(f, list);
}

void cl_fmt_compare(FILE *f, const cJSON *cmp)
{
    const cJSON *rows = get(cmp, "rows"), *r, *s = get(cmp, "summary");
    char batch[24], am[24], bm[24], ch[24], p[24], n[4][24];

    fprintf(f, "a = %s (before), b = %s (after)\n", str(cmp, "a", "?"), str(cmp, "b", "?"));
    fprintf(f, "%-24s %5s %-22s %10s %10s %8s %9s %s\n", "WORKLOAD", "BATCH", "VARIANT", "A MS",
            "B MS", "CHANGE", "P", "FLAG");
    cJSON_ArrayForEach(r, as_arr(rows))
    {
        fmt_int(batch, sizeof batch, num(r, "batch_size"));
        fmt_num(am, sizeof am, num(get(r, "a"), "median_ms"), 4, "");
        fmt_num(bm, sizeof bm, num(get(r, "b"), "median_ms"), 4, "");
        fmt_change(ch, sizeof ch, num(r, "change"));
        fmt_p(p, sizeof p, num(r, "p"));
        fprintf(f, "%-24s %5s %-22s %10s %10s %8s %9s %s\n", str(r, "workload", "?"), batch,
                str(r, "variant", "?"), am, bm, ch, p, str(r, "flag", "-"));
    }
    fmt_int(n[0], sizeof n[0], num(s, "rows"));
    fmt_int(n[1], sizeof n[1], num(s, "regressions"));
    fmt_int(n[2], sizeof n[2], num(s, "improvements"));
    fmt_int(n[3], sizeof n[3], num(s, "unmatched"));
    fprintf(f, "rows %s, regressions %s, improvements %s, unmatched %s\n", n[0], n[1], n[2], n[3]);
}

static void suite_header(FILE *f, const cJSON *suite)
{
    const cJSON *p = get(suite, "progress"), *st = get(p, "states");
    char id[24], done[24], total[24], pct[16];

    fmt_int(id, sizeof id, num(suite, "id"));
    fmt_int(done, sizeof done, num(p, "done"));
    fmt_int(total, sizeof total, num(p, "total"));
    fmt_num(pct, sizeof pct, num(p, "fraction") * 100, 0, "%");
    fprintf(f, "suite %s %s: %s/%s done (%s)", id, str(suite, "name", "?"), done, total, pct);
    const char *states[] = {"queued", "running", "succeeded", "failed", "canceled"};
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
        char n[24];
        fmt_int(n, sizeof n, num(st, states[i]));
        fprintf(f, "  %s %s", states[i], n);
    }
    fprintf(f, "\n");
}

static void join(char *buf, size_t cap, const cJSON *arr);

/* "  code: n groups, x ms (a, b)" for each entry of a lost-by-reason object,
 * count_key the count's name, ms_key the summed time's. */
static void suite_reasons(FILE *f, const cJSON *by, const char *count_key, const char *ms_key)
{
    const cJSON *r;
    cJSON_ArrayForEach(r, as_obj(by))
    {
        char n[24], ms[24], ws[160];
        fmt_int(n, sizeof n, num(r, count_key));
        fmt_num(ms, sizeof ms, num(r, ms_key), 3, " ms");
        join(ws, sizeof ws, get(r, "workloads"));
        fprintf(f, "  lost by %s: %s %s, %s (%s)\n", r->string ? r->string : "?", n, count_key, ms,
                ws);
    }
}

/* A count of o's for text: "-" unless a whole number (its buffer, one of
 * CNT_BUFS used in turn, lives until that many more calls). */
#define CNT_BUFS 8
static const char *cnt(const cJSON *o, const char *key)
{
    static char bufs[CNT_BUFS][24];
    static int next;
    char *b = bufs[next++ % CNT_BUFS];
    fmt_int(b, sizeof bufs[0], num(o, key));
    return b;
}

/* The suite's explanation summed over its jobs (summary.explain): the
 * native engine's groups, Inductor's fusions, the compile's choices beside
 * fusion. */
static void suite_explain(FILE *f, const cJSON *ex)
{
    const cJSON *ind = get(ex, "inductor"), *b;
    char share[24];
    if (num(ex, "jobs") > 0) {
        fmt_num(share, sizeof share, num(ex, "fused_roofline_share") * 100, 0, "%");
        fprintf(f,
                "fusion groups explained (%s jobs): %s won, %s lost, %s within noise; "
                "fused kernels on the roofline %s\n",
                cnt(ex, "jobs"), cnt(ex, "won"), cnt(ex, "lost"), cnt(ex, "within_noise"), share);
        suite_reasons(f, get(ex, "lost_by_reason"), "groups", "lost_ms");
    }
    if (!cJSON_IsObject(ind))
        return;
    const cJSON *cm = get(ind, "cost_model");
    char rho[24];
    fmt_num(share, sizeof share, num(ind, "fused_roofline_share") * 100, 0, "%");
    fmt_num(rho, sizeof rho, num(cm, "spearman_units"), 2, "");
    fprintf(f,
            "Inductor's fusions explained (%s jobs): %s won, %s lost, %s no difference, "
            "%s not measured; cost model rank correlation %s over %s units; fused kernels on "
            "the roofline %s\n",
            cnt(ind, "jobs"), cnt(ind, "won"), cnt(ind, "lost"), cnt(ind, "no_difference"),
            cnt(ind, "not_measured"), rho, cnt(cm, "units"), share);
    suite_reasons(f, get(ind, "lost_by_reason"), "fusions", "lost_ms");
    cJSON_ArrayForEach(b, as_obj(get(ind, "beside")))
    {
        char ms[24], ws[160];
        double saved = num(b, "saved_ms");
        fmt_num(ms, sizeof ms, fabs(saved), 3, " ms");
        join(ws, sizeof ws, get(b, "workloads"));
        fprintf(f,
                "beside fusion: %s, switched off alone in %s jobs, %s inductor %s in all; lost "
                "in %s%s%s%s\n",
                b->string ? b->string : "?", cnt(b, "measured"), saved < 0 ? "cost" : "saved", ms,
                cnt(b, "lost"), ws[0] ? " (" : "", ws, ws[0] ? ")" : "");
    }
}

void cl_fmt_suite(FILE *f, const cJSON *suite)
{
    const cJSON *rows = get(suite, "rows"), *r, *v;
    const cJSON *sum = get(suite, "summary"), *sv = get(sum, "variants");
    char id[24], batch[24], med[24], sp[24];

    suite_header(f, suite);
    fprintf(f, "%-8s %-24s %5s %-10s %s\n", "JOB", "WORKLOAD", "BATCH", "STATE",
            "VARIANTS (median ms, speedup)");
    cJSON_ArrayForEach(r, as_arr(rows))
    {
        fmt_int(id, sizeof id, num(r, "job_id"));
        fmt_int(batch, sizeof batch, num(r, "batch_size"));
        fprintf(f, "%-8s %-24s %5s %-10s", id, str(r, "workload", "?"), batch,
                str(r, "state", "?"));
        cJSON_ArrayForEach(v, as_obj(get(r, "variants")))
        {
            fmt_num(med, sizeof med, num(v, "median_ms"), 4, "");
            fmt_num(sp, sizeof sp, num(v, "speedup"), 3, "x");
            fprintf(f, " %s %s %s", v->string ? v->string : "?", med, sp);
            if (strcmp(str(v, "status", "ok"), "ok") != 0)
                fprintf(f, " (%s)", str(v, "status", "?"));
        }
        fprintf(f, "\n");
    }
    cJSON_ArrayForEach(v, as_obj(sv))
    {
        char passed[24], total[24];
        fmt_num(sp, sizeof sp, num(v, "geomean_speedup"), 3, "x");
        fmt_int(passed, sizeof passed, num(v, "passed"));
        fmt_int(total, sizeof total, num(v, "total"));
        const cJSON *ci = cJSON_GetObjectItemCaseSensitive(v, "geomean_ci95");
        const cJSON *lo = cJSON_GetArrayItem(ci, 0), *hi = cJSON_GetArrayItem(ci, 1);
        char ci_text[48] = "";
        if (cJSON_IsArray(ci) && cJSON_IsNumber(lo) && cJSON_IsNumber(hi))
            snprintf(ci_text, sizeof ci_text, " [95%% CI %.3f, %.3f]", lo->valuedouble,
                     hi->valuedouble);
        fprintf(f, "%s against %s: geomean speedup %s%s, passed %s/%s", v->string ? v->string : "?",
                str(sum, "baseline", "?"), sp, ci_text, passed, total);
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(v, "faster")))
            fprintf(f, "; %.0f faster, %.0f slower, %.0f no difference, %.0f unstable",
                    num(v, "faster"), num(v, "slower"), num(v, "no_difference"),
                    num(v, "unstable"));
        fprintf(f, "\n");
    }
    suite_explain(f, get(sum, "explain"));
}

/* "a,b,c" from an array of strings. */
static void join(char *buf, size_t cap, const cJSON *arr)
{
    const cJSON *e;
    size_t len = 0;

    buf[0] = '\0';
    cJSON_ArrayForEach(e, as_arr(arr))
    {
        if (!cJSON_IsString(e) || len >= cap)
            continue;
        int n = snprintf(buf + len, cap - len, "%s%s", len ? "," : "", e->valuestring);
        if (n < 0)
            break;
        len += (size_t)n;
    }
    if (len == 0)
        snprintf(buf, cap, "-");
}

void cl_fmt_workers(FILE *f, const cJSON *list)
{
    const cJSON *w;
    char eng[128], job[24];

    fprintf(f, "%-24s %-9s %-6s %-32s %-16s %8s %s\n", "ID", "STATE", "KIND", "DEVICE", "ENGINES",
            "JOB", "LAST HEARTBEAT");
    cJSON_ArrayForEach(w, items(list))
    {
        const cJSON *d = get(w, "device");
        join(eng, sizeof eng, get(w, "engines"));
        fmt_int(job, sizeof job, num(w, "current_job"));
        fprintf(f, "%-24s %-9s %-6s %-32.32s %-16s %8s %s\n", str(w, "id", "?"),
                str(w, "state", "?"), str(d, "kind", "-"), str(d, "name", "-"), eng, job,
                str(w, "last_heartbeat", "-"));
    }
}

static bool has_name(const cJSON *arr, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, as_arr(arr))
    {
        if (cJSON_IsString(e) && strcmp(e->valuestring, name) == 0)
            return true;
    }
    return false;
}

/* Whether every entry of engine that lists params lists name: the engine's
 * own params, printed once below the table rather than on every row. */
static bool engine_wide(const cJSON *list, const char *engine, const char *name)
{
    const cJSON *w;
    cJSON_ArrayForEach(w, items(list))
    {
        const cJSON *ps = get(w, "params");
        if (cJSON_IsArray(ps) && strcmp(str(w, "engine", ""), engine) == 0 && !has_name(ps, name))
            return false;
    }
    return true;
}

/* The params w lists that are its engine's (wide) or its own (!wide), joined
 * by commas into buf; "" when none. */
static void join_params(char *buf, size_t cap, const cJSON *list, const cJSON *w, bool wide)
{
    const cJSON *e;
    size_t len = 0;
    buf[0] = '\0';
    cJSON_ArrayForEach(e, as_arr(get(w, "params")))
    {
        if (!cJSON_IsString(e) || engine_wide(list, str(w, "engine", ""), e->valuestring) != wide ||
            len >= cap)
            continue;
        int n = snprintf(buf + len, cap - len, "%s%s", len ? "," : "", e->valuestring);
        if (n < 0)
            break;
        len += (size_t)n;
    }
}

void cl_fmt_workloads(FILE *f, const cJSON *list)
{
    const cJSON *w;
    char dev[128], vars[256], batch[24], params[256];

    fprintf(f, "%-26s %-9s %-9s %-12s %5s %-56s %s\n", "NAME", "ENGINE", "DOMAIN", "DEVICES",
            "BATCH", "VARIANTS", "PARAMS");
    cJSON_ArrayForEach(w, items(list))
    {
        join(dev, sizeof dev, get(w, "devices"));
        join(vars, sizeof vars, get(w, "variants"));
        fmt_int(batch, sizeof batch, num(w, "default_batch_size"));
        join_params(params, sizeof params, list, w, false);
        if (!params[0]) /* none of its own, or none declared */
            snprintf(params, sizeof params, "%s", cJSON_IsArray(get(w, "params")) ? "-" : "any");
        fprintf(f, "%-26s %-9s %-9s %-12s %5s %-56s %s\n", str(w, "name", "?"),
                str(w, "engine", "-"), str(w, "domain", "-"), dev, batch, vars, params);
    }
    /* each engine's own params, once: from its first entry that lists some */
    char seen[256] = "|";
    cJSON_ArrayForEach(w, items(list))
    {
        const char *engine = str(w, "engine", "");
        char tag[96], all[512];
        snprintf(tag, sizeof tag, "|%s|", engine);
        if (!cJSON_IsArray(get(w, "params")) || strstr(seen, tag))
            continue;
        snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s", tag + 1);
        join_params(all, sizeof all, list, w, true);
        if (all[0])
            fprintf(f, "every %s workload also takes: %s\n", engine, all);
    }
}

/* ---- models ---- */

void cl_fmt_models(FILE *f, const cJSON *list)
{
    const cJSON *m;
    char id[24], size[24];

    fprintf(f, "%6s %-24s %-12s %-9s %-10s %10s %s\n", "ID", "NAME", "OWNER", "VISIBLE", "STATUS",
            "SIZE", "UPLOADED");
    cJSON_ArrayForEach(m, items(list))
    {
        fmt_int(id, sizeof id, num(m, "id"));
        fb_table_bytes(size, sizeof size, num(m, "size"));
        fprintf(f, "%6s %-24s %-12s %-9s %-10s %10s %s\n", id, str(m, "name", "?"),
                str(m, "owner", "-"), str(m, "visibility", "?"), str(m, "status", "?"), size,
                str(m, "created_at", "-"));
    }
}

#define OPS_SHOWN 10 /* a model's operators printed, the most called first */

/* [2, 3, 16, 16] */
static void fmt_shape(FILE *f, const cJSON *shape)
{
    const cJSON *d;
    bool first = true;

    fputc('[', f);
    const cJSON *dims = cJSON_IsArray(shape) ? shape : NULL;
    cJSON_ArrayForEach(d, dims)
    {
        fprintf(f, "%s%.0f", first ? "" : ", ", cJSON_GetNumberValue(d));
        first = false;
    }
    fputc(']', f);
}

void cl_fmt_model(FILE *f, const cJSON *m)
{
    char id[24], size[24];
    const cJSON *info = get(m, "info");

    fmt_int(id, sizeof id, num(m, "id"));
    fb_table_bytes(size, sizeof size, num(m, "size"));
    fprintf(f, "model %s: %s (%s, %s)\n", id, str(m, "name", "?"), str(m, "owner", "no owner"),
            str(m, "visibility", "?"));
    fprintf(f, "  status   %s%s%s\n", str(m, "status", "?"),
            cJSON_IsString(get(m, "error")) ? ": " : "", str(m, "error", ""));
    fprintf(f, "  archive  %s, %s, sha256 %s\n", str(m, "format", "?"), size,
            str(m, "sha256", "?"));
    fprintf(f, "  uploaded %s\n", str(m, "created_at", "-"));
    if (!cJSON_IsObject(info))
        return;
    const cJSON *t, *eager = get(info, "eager"), *op;
    cJSON_ArrayForEach(t, get(info, "inputs"))
    {
        fprintf(f, "  input    %s ", str(t, "name", "?"));
        fmt_shape(f, get(t, "shape"));
        fprintf(f, " %s%s\n", str(t, "dtype", "?"),
                cJSON_GetArraySize(get(t, "dynamic_dims")) > 0 ? " (dynamic dims)" : "");
    }
    cJSON_ArrayForEach(t, get(info, "outputs"))
    {
        fprintf(f, "  output   ");
        fmt_shape(f, get(t, "shape"));
        fprintf(f, " %s\n", str(t, "dtype", "?"));
    }
    fmt_int(id, sizeof id, num(info, "parameters"));
    fb_table_bytes(size, sizeof size, num(info, "weight_bytes"));
    fprintf(f, "  params   %s (%s of weights); batch %s\n", id, size,
            cJSON_IsTrue(get(info, "dynamic_batch")) ? "dynamic" : "fixed by the export");
    if (cJSON_IsNumber(get(eager, "median_ms")))
        fprintf(f, "  eager    %.3f ms on the CPU (median of %d)\n", num(eager, "median_ms"),
                (int)num(eager, "runs"));
    /* the most called first (the database keeps an object's keys in its own order) */
    const cJSON *top[OPS_SHOWN];
    int n = 0, all = 0;
    cJSON_ArrayForEach(op, get(info, "ops"))
    {
        int at = n < OPS_SHOWN ? n++ : OPS_SHOWN;
        all++;
        while (at > 0 && cJSON_GetNumberValue(top[at - 1]) < cJSON_GetNumberValue(op)) {
            if (at < OPS_SHOWN)
                top[at] = top[at - 1];
            at--;
        }
        if (at < OPS_SHOWN)
            top[at] = op;
    }
    fprintf(f, "  ops     ");
    for (int i = 0; i < n; i++)
        fprintf(f, " %s x%d", top[i]->string ? top[i]->string : "?",
                (int)cJSON_GetNumberValue(top[i]));
    fprintf(f, "%s", all > n ? " ..." : "");
    const cJSON *nat = get(info, "native"), *form = get(nat, "form");
    bool native = cJSON_IsTrue(get(nat, "ok")) && cJSON_IsObject(form);
    if (cJSON_IsTrue(get(nat, "ok"))) {
        fb_table_bytes(size, sizeof size, num(form, "bytes"));
        fprintf(f, "\n  native   converts to %d graph nodes%s; %s%s", (int)num(nat, "nodes"),
                cJSON_IsTrue(get(nat, "batch_dynamic")) ? ", any batch" : "",
                native ? "native form " : "no native form (upload it again)", native ? size : "");
    } else if (cJSON_IsObject(nat)) {
        fprintf(f, "\n  native   cannot: %s", str(nat, "why", "?"));
    }
    fprintf(f, "\n  inputs   %s",
            strcmp(str(get(info, "input_values"), "source", "seeded"), "uploaded") == 0
                ? "yours, uploaded with the archive"
                : "seeded random values");
    fprintf(f, "\n  submit   fusionbench submit model.%.0f --engine inductor --explain --wait\n",
            num(m, "id"));
    if (native)
        fprintf(f, "           fusionbench submit model.%.0f --engine native --explain --wait\n",
                num(m, "id"));
}
