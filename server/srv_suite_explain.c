/* srv_suite_explain: see srv_suite_explain.h. */
#include "srv_suite_explain.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_stats.h"

/* Cost-model points pooled over the suite, at most this many. */
#define SE_POINTS_MAX 4096
/* Refused merges listed across the suite. */
#define SE_MISSED_TOP 10

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const cJSON *get(const cJSON *o, const char *k)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

/* by[code] as {count_key: n, ms_key: x, "workloads": [...]}, created at 0. */
static cJSON *reason_entry(cJSON *by, const char *code, const char *count_key, const char *ms_key)
{
    cJSON *r = cJSON_GetObjectItemCaseSensitive(by, code);
    if (!r && (r = cJSON_AddObjectToObject(by, code))) {
        if (!cJSON_AddNumberToObject(r, count_key, 0) || !cJSON_AddNumberToObject(r, ms_key, 0) ||
            !cJSON_AddArrayToObject(r, "workloads")) {
            cJSON_DeleteItemFromObjectCaseSensitive(by, code);
            return NULL;
        }
    }
    return r;
}

static void add_to(cJSON *o, const char *k, double v)
{
    cJSON *n = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsNumber(n) && isfinite(v))
        cJSON_SetNumberValue(n, n->valuedouble + v);
}

static void add_workload(cJSON *r, const char *workload)
{
    cJSON *ws = cJSON_GetObjectItemCaseSensitive(r, "workloads"), *w;
    cJSON_ArrayForEach(w, ws)
    {
        if (cJSON_IsString(w) && strcmp(w->valuestring, workload) == 0)
            return;
    }
    cJSON_AddItemToArray(ws, cJSON_CreateString(workload));
}

/* ---- the native engine's fusion groups ---- */

typedef struct native_sum {
    int jobs, counts[3];
    double roof, ms;
    cJSON *by;
} native_sum;

static void native_add(native_sum *s, const char *workload, const cJSON *ex)
{
    static const char *const verdicts[] = {"won", "lost", "within_noise"};
    const cJSON *g;
    s->jobs++;
    cJSON_ArrayForEach(g, get(ex, "groups"))
    {
        const char *v = cJSON_GetStringValue(get(g, "verdict"));
        for (int k = 0; v && k < 3; k++)
            s->counts[k] += strcmp(v, verdicts[k]) == 0;
        double share = num(get(g, "costs"), "roofline_share");
        double f = num(g, "fused_ms");
        if (isfinite(share) && isfinite(f) && f > 0) {
            s->roof += share * f;
            s->ms += f;
        }
        const char *code = cJSON_GetStringValue(get(get(g, "reason"), "code"));
        if (!v || strcmp(v, "lost") != 0 || !code)
            continue;
        cJSON *r = reason_entry(s->by, code, "groups", "lost_ms");
        if (!r)
            continue;
        add_to(r, "groups", 1);
        add_to(r, "lost_ms", num(g, "delta_ms"));
        if (workload)
            add_workload(r, workload);
    }
}

/* ---- Inductor's fusion decisions ---- */

typedef struct inductor_sum {
    int jobs, counts[4], bad;
    double recovered, roof, ms; /* roofline share x kernel ms, kernel ms */
    int n_points, n_units;
    double *pred, *saved, *u_pred, *u_saved;
    cJSON *by, *missed_by, *missed_top, *beside;
} inductor_sum;

/* The (predicted shared bytes, saved ms) pairs of list into x, y after *n. */
static void add_pairs(const cJSON *list, double *x, double *y, int *n)
{
    const cJSON *p;
    cJSON_ArrayForEach(p, list)
    {
        double px = num(p, "predicted_shared_bytes"), py = num(p, "saved_ms");
        if (*n < SE_POINTS_MAX && isfinite(px) && isfinite(py)) {
            x[*n] = px;
            y[(*n)++] = py;
        }
    }
}

/* A job's cost-model audit: the fusions measured alone, and every unit
 * measured (a chunk within the noise as one, its predictions summed). */
static void inductor_points(inductor_sum *s, const cJSON *cm)
{
    add_pairs(get(cm, "points"), s->pred, s->saved, &s->n_points);
    add_pairs(get(cm, "units"), s->u_pred, s->u_saved, &s->n_units);
    s->bad += cJSON_GetArraySize(get(cm, "bad_fusions"));
}

static void inductor_missed(inductor_sum *s, const char *workload, const cJSON *missed)
{
    const cJSON *r, *t;
    cJSON_ArrayForEach(r, get(missed, "by_reason"))
    {
        cJSON *e = reason_entry(s->missed_by, r->string, "count", "shared_bytes");
        if (!e)
            continue;
        add_to(e, "count", num(r, "count"));
        add_to(e, "shared_bytes", num(r, "shared_bytes"));
        if (workload)
            add_workload(e, workload);
    }
    cJSON_ArrayForEach(t, get(missed, "top"))
    {
        cJSON *row = cJSON_Duplicate(t, true);
        if (!row)
            continue;
        if (workload)
            cJSON_AddStringToObject(row, "workload", workload);
        cJSON_AddItemToArray(s->missed_top, row);
    }
}

/* The compile's choices beside fusion, each switched off alone: by the knob
 * ("layout_optimization"; in results stored before items carried it, what
 * "what" holds up to its "="), {"measured": jobs, "saved_ms": their sum (< 0:
 * the choice cost inductor time), "lost": jobs where it cost time past the
 * noise, "workloads": those jobs'}. */
static void inductor_beside(inductor_sum *s, const char *workload, const cJSON *list)
{
    const cJSON *p;
    cJSON_ArrayForEach(p, list)
    {
        const char *knob = cJSON_GetStringValue(get(p, "knob"));
        const char *what = cJSON_GetStringValue(get(p, "what"));
        char name[64];
        if (!knob && what && strcspn(what, "=") < sizeof name) {
            snprintf(name, sizeof name, "%.*s", (int)strcspn(what, "="), what);
            knob = name;
        }
        const char *v = cJSON_GetStringValue(get(p, "verdict"));
        double saved = num(p, "saved_ms");
        if (!knob || !v || !isfinite(saved)) /* not measured */
            continue;
        cJSON *r = reason_entry(s->beside, knob, "measured", "saved_ms");
        if (!r || (!get(r, "lost") && !cJSON_AddNumberToObject(r, "lost", 0)))
            continue;
        add_to(r, "measured", 1);
        add_to(r, "saved_ms", saved);
        if (strcmp(v, "lost") == 0) {
            add_to(r, "lost", 1);
            if (workload)
                add_workload(r, workload);
        }
    }
}

static void inductor_add(inductor_sum *s, const char *workload, const cJSON *fx)
{
    static const char *const verdicts[] = {"won", "lost", "no_difference", "not_measured"};
    const cJSON *e;
    s->jobs++;
    cJSON_ArrayForEach(e, get(fx, "fusions"))
    {
        const char *v = cJSON_GetStringValue(get(e, "verdict"));
        for (int k = 0; v && k < 4; k++)
            s->counts[k] += strcmp(v, verdicts[k]) == 0;
        const char *code = cJSON_GetStringValue(get(e, "reason"));
        if (!v || strcmp(v, "lost") != 0)
            continue;
        cJSON *r = reason_entry(s->by, code ? code : "unexplained", "fusions", "lost_ms");
        if (!r)
            continue;
        add_to(r, "fusions", 1);
        add_to(r, "lost_ms", num(e, "saved_ms"));
        if (workload)
            add_workload(r, workload);
    }
    double rec = num(get(fx, "all_lost_undone"), "recovered_ms");
    if (isfinite(rec))
        s->recovered += rec;
    double share = num(fx, "fused_roofline_share"), ms = num(fx, "fused_kernels_ms");
    if (isfinite(share) && isfinite(ms) && ms > 0) {
        s->roof += share * ms;
        s->ms += ms;
    }
    inductor_points(s, get(fx, "cost_model"));
    inductor_missed(s, workload, get(fx, "missed"));
    inductor_beside(s, workload, get(fx, "beside"));
}

static int by_shared_bytes(const void *a, const void *b)
{
    double x = num(*(const cJSON *const *)a, "shared_bytes");
    double y = num(*(const cJSON *const *)b, "shared_bytes");
    return (y > x) - (y < x);
}

/* The refused merges of every job, most shared bytes first, SE_MISSED_TOP. */
static cJSON *missed_top(cJSON *all)
{
    int n = cJSON_GetArraySize(all), k = 0;
    cJSON **rows = malloc(((size_t)n + 1) * sizeof *rows), *out = cJSON_CreateArray(), *r;
    if (!rows || !out) {
        free(rows);
        cJSON_Delete(out);
        return NULL;
    }
    cJSON_ArrayForEach(r, all)
    {
        rows[k++] = r;
    }
    qsort(rows, (size_t)k, sizeof *rows, by_shared_bytes);
    for (int i = 0; i < k && i < SE_MISSED_TOP; i++)
        cJSON_AddItemToArray(out, cJSON_Duplicate(rows[i], true));
    free(rows);
    return out;
}

static cJSON *num_or_null(double x)
{
    return isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull();
}

static cJSON *inductor_json(inductor_sum *s)
{
    cJSON *o = cJSON_CreateObject(), *cm = cJSON_CreateObject();
    double rho = fb_stats_spearman(s->pred, s->saved, s->n_points);
    double rho_u = fb_stats_spearman(s->u_pred, s->u_saved, s->n_units);
    bool ok = o && cm && cJSON_AddNumberToObject(o, "jobs", s->jobs) &&
              cJSON_AddNumberToObject(o, "won", s->counts[0]) &&
              cJSON_AddNumberToObject(o, "lost", s->counts[1]) &&
              cJSON_AddNumberToObject(o, "no_difference", s->counts[2]) &&
              cJSON_AddNumberToObject(o, "not_measured", s->counts[3]) &&
              cJSON_AddNumberToObject(o, "all_lost_recovered_ms", s->recovered) &&
              cJSON_AddItemToObject(o, "fused_roofline_share",
                                    num_or_null(s->ms > 0 ? s->roof / s->ms : NAN)) &&
              cJSON_AddNumberToObject(cm, "points", s->n_points) &&
              cJSON_AddItemToObject(cm, "spearman", num_or_null(rho)) &&
              cJSON_AddNumberToObject(cm, "units", s->n_units) &&
              cJSON_AddItemToObject(cm, "spearman_units", num_or_null(rho_u)) &&
              cJSON_AddNumberToObject(cm, "bad_fusions", s->bad);
    if (ok && cJSON_AddItemToObject(o, "cost_model", cm))
        cm = NULL;
    if (ok && cJSON_AddItemToObject(o, "lost_by_reason", s->by))
        s->by = NULL;
    if (ok && cJSON_AddItemToObject(o, "missed_by_reason", s->missed_by))
        s->missed_by = NULL;
    if (ok && cJSON_AddItemToObject(o, "beside", s->beside))
        s->beside = NULL;
    cJSON *top = ok ? missed_top(s->missed_top) : NULL;
    ok = ok && top && cJSON_AddItemToObject(o, "missed_top", top);
    if (!ok) {
        cJSON_Delete(top);
        cJSON_Delete(cm);
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *srv_suite_explain(const char *const *workloads, const cJSON *const *explains, int n)
{
    native_sum ns = {0};
    inductor_sum is = {0};
    cJSON *o = NULL;

    ns.by = cJSON_CreateObject();
    is.by = cJSON_CreateObject();
    is.missed_by = cJSON_CreateObject();
    is.missed_top = cJSON_CreateArray();
    is.beside = cJSON_CreateObject();
    is.pred = malloc(4 * SE_POINTS_MAX * sizeof *is.pred);
    is.saved = is.pred ? is.pred + SE_POINTS_MAX : NULL;
    is.u_pred = is.pred ? is.pred + 2 * SE_POINTS_MAX : NULL;
    is.u_saved = is.pred ? is.pred + 3 * SE_POINTS_MAX : NULL;
    if (!ns.by || !is.by || !is.missed_by || !is.missed_top || !is.beside || !is.pred)
        goto out;
    for (int i = 0; i < n; i++) {
        const cJSON *ex = explains[i];
        const cJSON *fx = get(ex, "fusions");
        if (get(ex, "groups"))
            native_add(&ns, workloads[i], ex);
        if (cJSON_IsArray(get(fx, "fusions")))
            inductor_add(&is, workloads[i], fx);
    }
    if (ns.jobs == 0 && is.jobs == 0) {
        o = cJSON_CreateNull();
        goto out;
    }
    o = cJSON_CreateObject();
    cJSON *ind = is.jobs ? inductor_json(&is) : cJSON_CreateNull();
    bool ok = o && ind && cJSON_AddNumberToObject(o, "jobs", ns.jobs) &&
              cJSON_AddNumberToObject(o, "won", ns.counts[0]) &&
              cJSON_AddNumberToObject(o, "lost", ns.counts[1]) &&
              cJSON_AddNumberToObject(o, "within_noise", ns.counts[2]) &&
              cJSON_AddItemToObject(o, "lost_by_reason", ns.by);
    if (ok)
        ns.by = NULL;
    ok = ok && cJSON_AddItemToObject(o, "fused_roofline_share",
                                     ns.ms > 0 ? cJSON_CreateNumber(ns.roof / ns.ms)
                                               : cJSON_CreateNull());
    ok = ok && cJSON_AddItemToObject(o, "inductor", ind);
    if (ok)
        ind = NULL;
    if (!ok) {
        cJSON_Delete(o);
        o = NULL;
    }
    cJSON_Delete(ind);
out:
    cJSON_Delete(ns.by);
    cJSON_Delete(is.by);
    cJSON_Delete(is.missed_by);
    cJSON_Delete(is.missed_top);
    cJSON_Delete(is.beside);
    free(is.pred);
    return o;
}
