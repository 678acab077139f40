/* ind_result: a runner result line → fb_result (declared in ind_engine.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_stats.h"
#include "ind_engine.h"

static double num_or(const cJSON *o, const char *key, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static int64_t int_or(const cJSON *o, const char *key, int64_t def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : def;
}

static const char *str_or(const cJSON *o, const char *key, const char *def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : def;
}

static fb_vstatus status_of(const char *s)
{
    for (int i = FB_VS_OK; i <= FB_VS_ERROR; i++) {
        if (strcmp(fb_vstatus_name((fb_vstatus)i), s) == 0)
            return (fb_vstatus)i;
    }
    return FB_VS_ERROR;
}

static fb_kcat kcat_of(const char *s)
{
    for (int i = 0; i < FB_KC_COUNT; i++) {
        if (strcmp(fb_kcat_name((fb_kcat)i), s) == 0)
            return (fb_kcat)i;
    }
    return FB_KC_OTHER;
}

static fb_code samples(fb_variant_result *vr, const cJSON *arr, fb_err *err)
{
    int n = cJSON_GetArraySize(arr), i = 0;
    const cJSON *s;

    if (n <= 0)
        return FB_OK;
    if (n > FB_MAX_ITERATIONS)
        return fb_err_set(err, FB_ETOOBIG, "samples_ms", "%d samples, over %d", n,
                          FB_MAX_ITERATIONS);
    vr->samples_ms = calloc((size_t)n, sizeof(double));
    if (!vr->samples_ms)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for %d samples", n);
    cJSON_ArrayForEach(s, arr)
    {
        if (cJSON_IsNumber(s) && i < n)
            vr->samples_ms[i++] = s->valuedouble;
    }
    vr->n_samples = i;
    if (i > 0)
        fb_stats_compute(vr->samples_ms, i, &vr->latency);
    return FB_OK;
}

static void row_ops(fb_kernel_row *r, const cJSON *ops)
{
    const cJSON *op;

    cJSON_ArrayForEach(op, ops)
    {
        if (r->n_ops >= FB_MAX_KERNEL_OPS || !cJSON_IsString(op))
            break;
        snprintf(r->ops[r->n_ops++], FB_NAME_MAX, "%s", op->valuestring);
    }
}

/* A generated kernel's bytes and FLOPs in the iteration, as the runner
 * counted them from Inductor's scheduler nodes (decisions.kernel_costs), and
 * its roofline bound on env's measured limits: max(bytes / bandwidth, FLOPs /
 * peak), NaN when either count or the roofline is unknown. */
static void row_costs(fb_kernel_row *k, const cJSON *r, const fb_env *env)
{
    const char *impl = str_or(r, "impl", "");
    if (!impl[0])
        return;
    snprintf(k->impl, sizeof k->impl, "%s", impl);
    k->bytes = num_or(r, "bytes", NAN);
    k->flops = num_or(r, "flops", NAN);
    k->roof_ms = NAN;
    if (k->bytes >= 0 && k->flops >= 0 && env->roofline_gbps > 0 && env->roofline_gflops > 0)
        k->roof_ms =
            fmax(k->bytes / (env->roofline_gbps * 1e6), k->flops / (env->roofline_gflops * 1e6));
}

/* Kernel rows from the runner's profile (one per kernel name). */
static fb_code rows(fb_variant_result *vr, const cJSON *prof, const fb_env *env, fb_err *err)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(prof, "rows"), *r;
    int n = cJSON_GetArraySize(arr);

    if (n <= 0)
        return FB_OK;
    vr->kernel_rows = calloc((size_t)n, sizeof *vr->kernel_rows);
    if (!vr->kernel_rows)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for %d kernel rows", n);
    cJSON_ArrayForEach(r, arr)
    {
        fb_kernel_row *k = &vr->kernel_rows[vr->n_kernel_rows];
        if (vr->n_kernel_rows >= n)
            break;
        snprintf(k->name, sizeof k->name, "%s", str_or(r, "name", "?"));
        k->category = kcat_of(str_or(r, "category", "other"));
        k->count = (int)int_or(r, "count", 0);
        k->total_ms = num_or(r, "total_ms", NAN);
        k->mean_ms = num_or(r, "mean_ms", NAN);
        row_ops(k, cJSON_GetObjectItemCaseSensitive(r, "ops"));
        row_costs(k, r, env);
        vr->n_kernel_rows++;
    }
    return FB_OK;
}

static void profile_figures(fb_variant_result *vr, const cJSON *prof)
{
    const cJSON *cats = cJSON_GetObjectItemCaseSensitive(prof, "categories_ms"), *c;

    vr->kernels = int_or(prof, "kernels", -1);
    vr->kernel_time_ms = num_or(prof, "kernel_time_ms", NAN);
    vr->busy_ms = num_or(prof, "busy_ms", NAN);
    vr->idle_ms = num_or(prof, "idle_ms", NAN);
    cJSON_ArrayForEach(c, cats)
    {
        if (cJSON_IsNumber(c))
            vr->categories_ms[kcat_of(c->string)] = c->valuedouble;
    }
}

/* The per-variant "inductor" object: Inductor's figures plus compile times and
 * how peak memory was measured.  Eager rungs get compile and memory fields only. */
static fb_code extra(fb_variant_result *vr, const cJSON *v, fb_err *err)
{
    const cJSON *ind = cJSON_GetObjectItemCaseSensitive(v, "inductor");
    cJSON *x = ind ? cJSON_Duplicate(ind, 1) : cJSON_CreateObject();
    const char *keep[] = {
        "peak_mem_method", "rss_hwm_delta_bytes", "tolerance", "profile_error", "repro", NULL};

    if (!x)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for the inductor object");
    for (int i = 0; keep[i]; i++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(v, keep[i]);
        if (it)
            cJSON_AddItemToObject(x, keep[i], cJSON_Duplicate(it, 1));
    }
    snprintf(vr->extra_key, sizeof vr->extra_key, "inductor");
    vr->extra = x;
    return FB_OK;
}

static fb_code variant(fb_variant_result *vr, const cJSON *v, const fb_env *env, fb_err *err)
{
    const cJSON *ind = cJSON_GetObjectItemCaseSensitive(v, "inductor");
    const cJSON *prof = cJSON_GetObjectItemCaseSensitive(v, "profile");
    fb_code rc;

    fb_variant_result_init(vr, str_or(v, "name", "?"));
    vr->status = status_of(str_or(v, "status", "error"));
    snprintf(vr->message, sizeof vr->message, "%s", str_or(v, "message", ""));
    vr->max_rel_error = num_or(v, "max_rel_error", NAN);
    vr->peak_mem_bytes = int_or(v, "peak_mem_bytes", -1);
    /* eager executes unfused ATen ops: zero fused kernels, known, not unknown */
    vr->fused_kernels = ind ? int_or(ind, "fused_kernels", -1) : 0;
    vr->fused_ops = ind ? int_or(ind, "fused_ops", -1) : 0;
    if (prof)
        profile_figures(vr, prof);
    rc = samples(vr, cJSON_GetObjectItemCaseSensitive(v, "samples_ms"), err);
    if (rc == FB_OK && prof)
        rc = rows(vr, prof, env, err);
    if (rc == FB_OK)
        rc = extra(vr, v, err);
    return rc;
}

static void env(fb_env *e, const cJSON *j)
{
    const cJSON *threads = cJSON_GetObjectItemCaseSensitive(j, "threads");

    snprintf(e->torch, sizeof e->torch, "%s", str_or(j, "torch", ""));
    snprintf(e->triton, sizeof e->triton, "%s", str_or(j, "triton", ""));
    if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "cuda")))
        snprintf(e->cuda, sizeof e->cuda, "%s", str_or(j, "cuda", ""));
    if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "cudnn")))
        snprintf(e->cudnn, sizeof e->cudnn, "%s", str_or(j, "cudnn", ""));
    if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "device_name")))
        snprintf(e->device_name, sizeof e->device_name, "%s", str_or(j, "device_name", ""));
    if (cJSON_IsNumber(threads))
        e->threads = threads->valueint;
}

static bool has_variant(const fb_result *r, const char *name)
{
    for (int i = 0; i < r->n_variants; i++) {
        if (strcmp(r->variants[i].name, name) == 0)
            return true;
    }
    return false;
}

/* The runner's adaptive repetition (runner.py run_variants); left unknown
 * (stop "") when absent or malformed. */
static void repetition(fb_repetition *r, const cJSON *o)
{
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(o, "stop");
    double asked = num_or(o, "rounds_requested", NAN), done = num_or(o, "rounds", NAN);
    static const char *const stops[] = {"stable", "converged", "time_budget", "max_rounds"};

    if (!cJSON_IsString(stop) || !(asked >= 1 && asked <= FB_MAX_ITERATIONS) ||
        !(done >= asked && done <= 10.0 * asked))
        return;
    for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) {
        if (strcmp(stop->valuestring, stops[i]) == 0) {
            r->rounds_requested = (int)asked;
            r->rounds = (int)done;
            r->budget_s = num_or(o, "budget_s", NAN);
            snprintf(r->stop, sizeof r->stop, "%s", stops[i]);
            return;
        }
    }
}

/* An integer count >= 0, or -1 (unknown). */
static int64_t count_or_unknown(const cJSON *o, const char *key)
{
    double v = num_or(o, key, NAN);
    return v >= 0 && v < 9e15 ? (int64_t)v : -1;
}

/* The runner's interference over its timed rounds (runner.py _interference). */
static void interference(fb_interference *f, const cJSON *o)
{
    if (!cJSON_IsObject(o))
        return;
    f->timed_ms = num_or(o, "timed_ms", NAN);
    f->steal_ms = num_or(o, "steal_ms", NAN);
    f->invol_switches = count_or_unknown(o, "involuntary_switches");
    f->minor_faults = count_or_unknown(o, "minor_faults");
    f->major_faults = count_or_unknown(o, "major_faults");
}

fb_code ind_result_from_json(const cJSON *line, fb_result *out, fb_err *err)
{
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(line, "variants"), *v;
    int n = cJSON_GetArraySize(vs);

    if (!cJSON_IsArray(vs) || n < 1 || n > FB_MAX_VARIANTS)
        return fb_err_set(err, FB_EINVAL, "variants", "runner result has %d variants", n);
    out->n_variants = 0;
    cJSON_ArrayForEach(v, vs)
    {
        fb_code rc = variant(&out->variants[out->n_variants], v, &out->env, err);
        out->n_variants++;
        if (rc != FB_OK)
            return rc;
        if (strcmp(out->variants[out->n_variants - 1].name, "eager") == 0)
            snprintf(out->baseline, sizeof out->baseline, "eager");
    }
    if (!has_variant(out, out->baseline))
        snprintf(out->baseline, sizeof out->baseline, "%s", out->variants[0].name);
    out->plan_ms = num_or(line, "model_build_ms", NAN);
    env(&out->env, cJSON_GetObjectItemCaseSensitive(line, "env"));
    repetition(&out->repetition, cJSON_GetObjectItemCaseSensitive(line, "repetition"));
    interference(&out->interference, cJSON_GetObjectItemCaseSensitive(line, "interference"));
    return FB_OK;
}
