/* fb_result: encoding of a job's result and its kernel rows (docs/API.md "Results").
 *
 * Unknown metrics are NaN or -1 in the structs and JSON null on the wire, never
 * 0: a dashboard must be able to tell "no kernels" from "cannot count kernels".
 * Every encoder builds into one tree and returns NULL (freeing it) on ENOMEM. */
#include "fb_result.h"

#include "fb_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fb_vstatus_name(fb_vstatus s)
{
    switch (s) {
    case FB_VS_OK:
        return "ok";
    case FB_VS_ACCURACY_FAILED:
        return "accuracy_failed";
    case FB_VS_UNSUPPORTED:
        return "unsupported";
    case FB_VS_OOM:
        return "oom";
    case FB_VS_TIMEOUT:
        return "timeout";
    case FB_VS_CRASHED:
        return "crashed";
    case FB_VS_ERROR:
        return "error";
    }
    return "error";
}

const char *fb_kcat_name(fb_kcat c)
{
    switch (c) {
    case FB_KC_GEMM:
        return "gemm";
    case FB_KC_ELEMENTWISE:
        return "elementwise";
    case FB_KC_REDUCTION:
        return "reduction";
    case FB_KC_ATTENTION:
        return "attention";
    case FB_KC_COPY:
        return "copy";
    case FB_KC_OTHER:
        return "other";
    case FB_KC_COUNT:
        break;
    }
    return "other";
}

void fb_variant_result_init(fb_variant_result *v, const char *name)
{
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name ? name : "");
    v->status = FB_VS_OK;
    fb_stats *st = &v->latency;
    st->median = st->mean = st->stdev = st->min = st->max = st->p90 = st->cv = NAN;
    st->ci95_lo = st->ci95_hi = NAN;
    v->kernels = v->fused_kernels = v->fused_ops = v->peak_mem_bytes = -1;
    v->kernel_time_ms = v->busy_ms = v->idle_ms = v->max_rel_error = NAN;
    v->memcpy_ms = NAN;
    v->speedup = v->speedup_lo = v->speedup_hi = NAN;
    v->change = FB_CHANGE_UNKNOWN;
    v->unstable = false;
    v->memcpy_bytes = v->dropped_records = v->dram_read_bytes = v->dram_write_bytes = -1;
    for (int i = 0; i < FB_KC_COUNT; i++)
        v->categories_ms[i] = NAN;
}

void fb_result_init(fb_result *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->baseline, sizeof r->baseline, "eager");
    r->plan_ms = NAN;
    r->interference = (fb_interference){.timed_ms = NAN,
                                        .steal_ms = NAN,
                                        .invol_switches = -1,
                                        .minor_faults = -1,
                                        .major_faults = -1,
                                        .gpu = {.sm_mhz_min = NAN,
                                                .sm_mhz_max = NAN,
                                                .mem_mhz_min = NAN,
                                                .mem_mhz_max = NAN,
                                                .temp_c_max = NAN}};
    for (int i = 0; i < FB_MAX_VARIANTS; i++)
        fb_variant_result_init(&r->variants[i], "");
}

const char *fb_throttle_reason_name(int bit)
{
    static const char *const names[] = {"gpu_idle",
                                        "applications_clocks_setting",
                                        "sw_power_cap",
                                        "hw_slowdown",
                                        "sync_boost",
                                        "sw_thermal_slowdown",
                                        "hw_thermal_slowdown",
                                        "hw_power_brake_slowdown",
                                        "display_clock_setting"};
    return bit >= 0 && bit < (int)(sizeof names / sizeof names[0]) ? names[bit] : NULL;
}

const char *fb_change_name(fb_change c)
{
    switch (c) {
    case FB_CHANGE_FASTER:
        return "faster";
    case FB_CHANGE_SLOWER:
        return "slower";
    case FB_CHANGE_NONE:
        return "no_difference";
    default:
        return NULL;
    }
}

void fb_result_judge(fb_result *r, const char *device)
{
    const fb_variant_result *b = NULL;
    double cv_max = fb_stats_unstable_cv(device);

    for (int i = 0; i < r->n_variants && i < FB_MAX_VARIANTS; i++) {
        fb_variant_result *v = &r->variants[i];
        if (strcmp(v->name, r->baseline) == 0)
            b = v;
        v->unstable = v->status == FB_VS_OK && v->n_samples >= 2 && v->latency.cv > cv_max;
    }
    for (int i = 0; i < r->n_variants && i < FB_MAX_VARIANTS; i++) {
        fb_variant_result *v = &r->variants[i];
        v->speedup = v->speedup_lo = v->speedup_hi = NAN;
        v->change = FB_CHANGE_UNKNOWN;
        if (!b || v == b || b->status != FB_VS_OK || v->status != FB_VS_OK)
            continue;
        if (fb_stats_speedup_ci(b->samples_ms, b->n_samples, v->samples_ms, v->n_samples, 0.95,
                                &v->speedup, &v->speedup_lo, &v->speedup_hi))
            v->change = fb_stats_change(v->speedup, v->speedup_lo, v->speedup_hi);
    }
}

void fb_result_free(fb_result *r)
{
    if (!r)
        return;
    for (int i = 0; i < FB_MAX_VARIANTS; i++) {
        free(r->variants[i].samples_ms);
        free(r->variants[i].kernel_rows);
        free(r->variants[i].fusion_groups);
        free(r->variants[i].node_groups);
        r->variants[i].node_groups = NULL;
        r->variants[i].n_node_groups = 0;
        r->variants[i].samples_ms = NULL;
        r->variants[i].kernel_rows = NULL;
        r->variants[i].fusion_groups = NULL;
        cJSON_Delete(r->variants[i].extra);
        r->variants[i].extra = NULL;
        r->variants[i].n_fusion_groups = 0;
        r->variants[i].n_samples = 0;
        r->variants[i].n_kernel_rows = 0;
    }
    cJSON_Delete(r->graph);
    r->graph = NULL;
    cJSON_Delete(r->explain);
    r->explain = NULL;
}

/* Non-finite values are turned into null here, explicitly, rather than left to
 * cJSON's printer. */
cJSON *fb_json_num_or_null(double v)
{
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

cJSON *fb_json_int_or_null(int64_t v)
{
    return v == -1 ? cJSON_CreateNull() : cJSON_CreateNumber((double)v);
}

bool fb_json_put(cJSON *o, const char *key, cJSON *item)
{
    if (item && o && cJSON_AddItemToObject(o, key, item))
        return true;
    cJSON_Delete(item);
    return false;
}

cJSON *fb_json_roofline(double gbps, double gflops)
{
    if (!(gbps > 0) || !(gflops > 0))
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddNumberToObject(o, "gbps", gbps) ||
        !cJSON_AddNumberToObject(o, "gflops", gflops)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static bool res_push(cJSON *arr, cJSON *item)
{
    if (item && cJSON_AddItemToArray(arr, item))
        return true;
    cJSON_Delete(item);
    return false;
}

/* A string, or null when empty (unknown). */
static cJSON *res_str_or_null(const char *s)
{
    return s[0] ? cJSON_CreateString(s) : cJSON_CreateNull();
}

/* {"triad_gbps", "gemm_gflops"}, or null when not measured. */
static cJSON *res_roofline(const fb_env *e)
{
    if (!(e->roofline_gbps > 0) || !(e->roofline_gflops > 0))
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    if (!o || !fb_json_put(o, "triad_gbps", cJSON_CreateNumber(e->roofline_gbps)) ||
        !fb_json_put(o, "gemm_gflops", cJSON_CreateNumber(e->roofline_gflops))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *fb_env_to_json(const fb_env *e)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && fb_json_put(o, "device_name", res_str_or_null(e->device_name)) &&
              fb_json_put(o, "device_uuid", res_str_or_null(e->device_uuid)) &&
              fb_json_put(o, "driver", res_str_or_null(e->driver)) &&
              fb_json_put(o, "cuda", res_str_or_null(e->cuda)) &&
              fb_json_put(o, "cudnn", res_str_or_null(e->cudnn)) &&
              fb_json_put(o, "cublas", res_str_or_null(e->cublas)) &&
              fb_json_put(o, "torch", res_str_or_null(e->torch)) &&
              fb_json_put(o, "triton", res_str_or_null(e->triton)) &&
              fb_json_put(o, "cpu", res_str_or_null(e->cpu)) &&
              fb_json_put(o, "blas", res_str_or_null(e->blas)) &&
              fb_json_put(o, "threads",
                          e->threads > 0 ? cJSON_CreateNumber(e->threads) : cJSON_CreateNull()) &&
              fb_json_put(o, "fusionbench", res_str_or_null(e->fusionbench)) &&
              fb_json_put(o, "hostname", res_str_or_null(e->hostname)) &&
              fb_json_put(o, "roofline", res_roofline(e));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* [a, b] with nulls for unknown ends. */
static cJSON *res_pair(double a, double b)
{
    cJSON *arr = cJSON_CreateArray();
    if (arr && res_push(arr, fb_json_num_or_null(a)) && res_push(arr, fb_json_num_or_null(b)))
        return arr;
    cJSON_Delete(arr);
    return NULL;
}

static cJSON *res_latency(const fb_stats *st)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && fb_json_put(o, "median", fb_json_num_or_null(st->median)) &&
              fb_json_put(o, "mean", fb_json_num_or_null(st->mean)) &&
              fb_json_put(o, "stdev", fb_json_num_or_null(st->stdev)) &&
              fb_json_put(o, "min", fb_json_num_or_null(st->min)) &&
              fb_json_put(o, "max", fb_json_num_or_null(st->max)) &&
              fb_json_put(o, "p90", fb_json_num_or_null(st->p90)) &&
              fb_json_put(o, "cv", fb_json_num_or_null(st->cv)) &&
              fb_json_put(o, "ci95", res_pair(st->ci95_lo, st->ci95_hi));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *res_samples(const fb_variant_result *v)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && v->samples_ms && i < v->n_samples; i++) {
        if (!res_push(arr, fb_json_num_or_null(v->samples_ms[i]))) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

/* {category: ms} for the categories seen (non-NaN) only. */
static cJSON *res_categories(const fb_variant_result *v)
{
    cJSON *o = cJSON_CreateObject();
    for (int c = 0; o && c < FB_KC_COUNT; c++) {
        if (!isfinite(v->categories_ms[c]))
            continue;
        if (!fb_json_put(o, fb_kcat_name((fb_kcat)c), cJSON_CreateNumber(v->categories_ms[c]))) {
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

/* The CUPTI figures; dram_reason only when DRAM bytes are unknown for a reason. */
static bool res_variant_gpu(cJSON *o, const fb_variant_result *v)
{
    return fb_json_put(o, "memcpy_ms", fb_json_num_or_null(v->memcpy_ms)) &&
           fb_json_put(o, "memcpy_bytes", fb_json_int_or_null(v->memcpy_bytes)) &&
           fb_json_put(o, "dropped_records", fb_json_int_or_null(v->dropped_records)) &&
           fb_json_put(o, "dram_read_bytes", fb_json_int_or_null(v->dram_read_bytes)) &&
           fb_json_put(o, "dram_write_bytes", fb_json_int_or_null(v->dram_write_bytes)) &&
           (!v->dram_reason[0] ||
            fb_json_put(o, "dram_reason", cJSON_CreateString(v->dram_reason)));
}

cJSON *fb_fusion_groups_to_json(const fb_variant_result *v)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < v->n_fusion_groups && v->fusion_groups; i++) {
        const fb_fusion_group *g = &v->fusion_groups[i];
        cJSON *e = cJSON_CreateObject(), *ops = cJSON_CreateArray();
        for (int k = 0; ops && k < g->n_ops && k < FB_MAX_KERNEL_OPS; k++)
            cJSON_AddItemToArray(ops, cJSON_CreateString(g->ops[k]));
        if (!e || !ops || !cJSON_AddStringToObject(e, "rule", g->rule) ||
            !cJSON_AddStringToObject(e, "kind", g->kind) ||
            !cJSON_AddNumberToObject(e, "count", g->count)) {
            cJSON_Delete(e);
            cJSON_Delete(ops);
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddItemToObject(e, "ops", ops);
        cJSON_AddItemToArray(arr, e);
    }
    return arr;
}

/* "fusion_groups": [{rule, kind, count, ops}], only when the engine gave some. */
static bool res_fusion_groups(cJSON *o, const fb_variant_result *v)
{
    if (v->n_fusion_groups <= 0 || !v->fusion_groups)
        return true;
    return fb_json_put(o, "fusion_groups", fb_fusion_groups_to_json(v));
}

static bool res_variant_metrics(cJSON *o, const fb_variant_result *v)
{
    return fb_json_put(o, "kernels", fb_json_int_or_null(v->kernels)) &&
           fb_json_put(o, "kernel_time_ms", fb_json_num_or_null(v->kernel_time_ms)) &&
           fb_json_put(o, "busy_ms", fb_json_num_or_null(v->busy_ms)) &&
           fb_json_put(o, "idle_ms", fb_json_num_or_null(v->idle_ms)) &&
           fb_json_put(o, "fused_kernels", fb_json_int_or_null(v->fused_kernels)) &&
           fb_json_put(o, "fused_ops", fb_json_int_or_null(v->fused_ops)) &&
           fb_json_put(o, "peak_mem_bytes", fb_json_int_or_null(v->peak_mem_bytes)) &&
           fb_json_put(o, "max_rel_error", fb_json_num_or_null(v->max_rel_error)) &&
           fb_json_put(o, "categories_ms", res_categories(v)) && res_variant_gpu(o, v) &&
           res_fusion_groups(o, v);
}

/* "node_groups": [index into fusion_groups or null], only with a graph. */
static bool res_node_groups(cJSON *o, const fb_variant_result *v)
{
    if (!v->node_groups || v->n_node_groups <= 0)
        return true;
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < v->n_node_groups; i++) {
        int g = v->node_groups[i];
        if (!res_push(arr, g >= 0 ? cJSON_CreateNumber(g) : cJSON_CreateNull())) {
            cJSON_Delete(arr);
            return false;
        }
    }
    return fb_json_put(o, "node_groups", arr);
}

/* The engine's own object (e.g. "inductor"), when it has one. */
static bool res_extra(cJSON *o, const fb_variant_result *v)
{
    return !v->extra || !v->extra_key[0] ||
           fb_json_put(o, v->extra_key, cJSON_Duplicate(v->extra, 1));
}

static cJSON *res_variant(const fb_variant_result *v)
{
    cJSON *o = cJSON_CreateObject();
    bool ok =
        o && fb_json_put(o, "name", cJSON_CreateString(v->name)) &&
        fb_json_put(o, "status", cJSON_CreateString(fb_vstatus_name(v->status))) &&
        (v->status == FB_VS_OK || fb_json_put(o, "message", cJSON_CreateString(v->message))) &&
        fb_json_put(o, "latency_ms", res_latency(&v->latency)) &&
        fb_json_put(o, "samples_ms", res_samples(v)) &&
        fb_json_put(o, "unstable", cJSON_CreateBool(v->unstable)) && res_variant_metrics(o, v) &&
        res_node_groups(o, v) && res_extra(o, v);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* num / den when both are known and den > 0; NaN otherwise (the entry is left out). */
static double res_ratio(double num, double den)
{
    if (!isfinite(num) || !isfinite(den) || num < 0 || den <= 0)
        return NAN;
    return num / den;
}

/* Integer metrics use -1 for unknown; any negative is treated as unknown here. */
static double res_known(int64_t v)
{
    return v < 0 ? NAN : (double)v;
}

const fb_variant_result *fb_result_variant(const fb_result *r, const char *name)
{
    for (int i = 0; name && i < r->n_variants && i < FB_MAX_VARIANTS; i++)
        if (strcmp(r->variants[i].name, name) == 0)
            return &r->variants[i];
    return NULL;
}

bool fb_result_against_baseline(const fb_result *r, const fb_variant_result *v, double *speedup,
                                double *kernel_ratio, double *memory_ratio)
{
    const fb_variant_result *b = fb_result_variant(r, r->baseline);

    *speedup = *kernel_ratio = *memory_ratio = NAN;
    if (!b || !v || v == b || b->status != FB_VS_OK || v->status != FB_VS_OK)
        return false;
    *speedup = res_ratio(b->latency.median, v->latency.median);
    *kernel_ratio = res_ratio(res_known(v->kernels), res_known(b->kernels));
    *memory_ratio = res_ratio(res_known(v->peak_mem_bytes), res_known(b->peak_mem_bytes));
    return true;
}

/* Adds key: x to map when x is finite. */
static bool res_put_ratio(cJSON *map, const char *key, double x)
{
    return !isfinite(x) || fb_json_put(map, key, cJSON_CreateNumber(x));
}

/* Fills the three maps.  Only variants with status ok against an ok baseline get
 * entries: a speedup of a wrong answer (accuracy_failed) is no speedup. */
/* The judged speedup's interval and change, when fb_result_judge found them
 * (both, or neither). */
static bool res_put_change(cJSON *ci, cJSON *change, const fb_variant_result *v)
{
    const char *c = fb_change_name(v->change);
    if (!c || !isfinite(v->speedup_lo) || !isfinite(v->speedup_hi))
        return true;
    double pair[2] = {v->speedup_lo, v->speedup_hi};
    return fb_json_put(ci, v->name, cJSON_CreateDoubleArray(pair, 2)) &&
           fb_json_put(change, v->name, cJSON_CreateString(c));
}

static bool res_fill_comparison(const fb_result *r, cJSON *speed, cJSON *kern, cJSON *mem,
                                cJSON *ci, cJSON *change)
{
    for (int i = 0; i < r->n_variants && i < FB_MAX_VARIANTS; i++) {
        const fb_variant_result *v = &r->variants[i];
        double sp, kr, mr;
        if (!fb_result_against_baseline(r, v, &sp, &kr, &mr))
            continue;
        if (!res_put_ratio(speed, v->name, sp) || !res_put_ratio(kern, v->name, kr) ||
            !res_put_ratio(mem, v->name, mr) || !res_put_change(ci, change, v))
            return false;
    }
    return true;
}

static cJSON *res_comparison(const fb_result *r)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && fb_json_put(o, "baseline", res_str_or_null(r->baseline));
    cJSON *speed = ok ? cJSON_AddObjectToObject(o, "speedup") : NULL;
    cJSON *kern = speed ? cJSON_AddObjectToObject(o, "kernel_ratio") : NULL;
    cJSON *mem = kern ? cJSON_AddObjectToObject(o, "memory_ratio") : NULL;
    cJSON *ci = mem ? cJSON_AddObjectToObject(o, "speedup_ci95") : NULL;
    cJSON *change = ci ? cJSON_AddObjectToObject(o, "change") : NULL;
    if (!change || !res_fill_comparison(r, speed, kern, mem, ci, change)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *res_variants(const fb_result *r)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < r->n_variants && i < FB_MAX_VARIANTS; i++) {
        if (!res_push(arr, res_variant(&r->variants[i]))) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

/* [lo, hi], or null when either is unknown. */
static cJSON *res_range(double lo, double hi)
{
    double pair[2] = {lo, hi};
    return isfinite(lo) && isfinite(hi) ? cJSON_CreateDoubleArray(pair, 2) : cJSON_CreateNull();
}

/* The GPU's clocks while timed, or null without NVML.  Reasons list every bit
 * seen but gpu_idle (a GPU idles between rounds); an unknown bit is named by
 * its number. */
static cJSON *res_gpu(const fb_gpu_interference *g)
{
    if (g->n_samples <= 0)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject(), *reasons = cJSON_CreateArray();
    for (int b = 1; reasons && b < 64; b++) {
        char num[16];
        const char *name = fb_throttle_reason_name(b);
        if (!(g->throttle_reasons >> b & 1))
            continue;
        snprintf(num, sizeof num, "bit_%d", b);
        cJSON_AddItemToArray(reasons, cJSON_CreateString(name ? name : num));
    }
    if (!o || !reasons || !fb_json_put(o, "samples", cJSON_CreateNumber(g->n_samples)) ||
        !fb_json_put(o, "sm_clock_mhz", res_range(g->sm_mhz_min, g->sm_mhz_max)) ||
        !fb_json_put(o, "mem_clock_mhz", res_range(g->mem_mhz_min, g->mem_mhz_max)) ||
        !fb_json_put(o, "max_temperature_c", fb_json_num_or_null(g->temp_c_max)) ||
        !fb_json_put(o, "throttle_reasons", reasons)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *res_interference(const fb_interference *f)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !fb_json_put(o, "timed_ms", fb_json_num_or_null(f->timed_ms)) ||
        !fb_json_put(o, "steal_ms", fb_json_num_or_null(f->steal_ms)) ||
        !fb_json_put(o, "involuntary_switches", fb_json_int_or_null(f->invol_switches)) ||
        !fb_json_put(o, "minor_faults", fb_json_int_or_null(f->minor_faults)) ||
        !fb_json_put(o, "major_faults", fb_json_int_or_null(f->major_faults)) ||
        !fb_json_put(o, "gpu", res_gpu(&f->gpu))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* null when the engine timed on its own (no rounds here). */
static cJSON *res_repetition(const fb_repetition *p)
{
    if (!p->stop[0])
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    if (!o || !fb_json_put(o, "rounds_requested", cJSON_CreateNumber(p->rounds_requested)) ||
        !fb_json_put(o, "rounds", cJSON_CreateNumber(p->rounds)) ||
        !fb_json_put(o, "budget_s", fb_json_num_or_null(p->budget_s)) ||
        !fb_json_put(o, "stop", cJSON_CreateString(p->stop))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *fb_result_to_json(const fb_result *r)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && fb_json_put(o, "env", fb_env_to_json(&r->env)) &&
              fb_json_put(o, "interference", res_interference(&r->interference)) &&
              fb_json_put(o, "repetition", res_repetition(&r->repetition)) &&
              fb_json_put(o, "plan_ms", fb_json_num_or_null(r->plan_ms)) &&
              fb_json_put(o, "variants", res_variants(r)) &&
              fb_json_put(o, "comparison", res_comparison(r)) &&
              (!r->graph || fb_json_put(o, "graph", cJSON_Duplicate(r->graph, 1))) &&
              (!r->explain || fb_json_put(o, "explain", cJSON_Duplicate(r->explain, 1)));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* [x, y, z] of a launch dimension. */
static cJSON *res_dim3(const int d[3])
{
    return cJSON_CreateIntArray(d, 3);
}

/* [[start_ms, dur_ms], ...] of the launches the row recorded. */
static cJSON *res_launches(const fb_kernel_row *k)
{
    cJSON *arr = cJSON_CreateArray();
    int n = k->n_launches < FB_KERNEL_LAUNCHES_MAX ? k->n_launches : FB_KERNEL_LAUNCHES_MAX;
    for (int i = 0; arr && i < n; i++) {
        double pair[2] = {k->launches_ms[i][0], k->launches_ms[i][1]};
        if (!res_push(arr, cJSON_CreateDoubleArray(pair, 2))) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

static cJSON *res_kernel_row(const fb_kernel_row *k)
{
    cJSON *o = cJSON_CreateObject();
    int n_ops = k->n_ops < FB_MAX_KERNEL_OPS ? k->n_ops : FB_MAX_KERNEL_OPS;
    bool ok = o && fb_json_put(o, "name", cJSON_CreateString(k->name)) &&
              fb_json_put(o, "category", cJSON_CreateString(fb_kcat_name(k->category))) &&
              fb_json_put(o, "count", cJSON_CreateNumber(k->count)) &&
              fb_json_put(o, "total_ms", fb_json_num_or_null(k->total_ms)) &&
              fb_json_put(o, "mean_ms", fb_json_num_or_null(k->mean_ms)) &&
              fb_json_put(o, "grid", res_dim3(k->grid)) &&
              fb_json_put(o, "block", res_dim3(k->block));
    cJSON *ops = ok ? cJSON_AddArrayToObject(o, "ops") : NULL;
    ok = ops != NULL;
    for (int i = 0; ok && i < n_ops; i++)
        ok = res_push(ops, cJSON_CreateString(k->ops[i]));
    if (ok && k->n_launches > 0)
        ok = fb_json_put(o, "launches", res_launches(k));
    if (ok && k->impl[0]) /* what the launches cost by their shapes */
        ok = fb_json_put(o, "impl", cJSON_CreateString(k->impl)) &&
             fb_json_put(o, "bytes", fb_json_num_or_null(k->bytes)) &&
             fb_json_put(o, "flops", fb_json_num_or_null(k->flops)) &&
             fb_json_put(o, "roofline_ms", fb_json_num_or_null(k->roof_ms));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *fb_kernel_rows_to_json(const fb_variant_result *v)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && v->kernel_rows && i < v->n_kernel_rows; i++) {
        if (!res_push(arr, res_kernel_row(&v->kernel_rows[i]))) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}
