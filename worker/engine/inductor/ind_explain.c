/* ind_explain: the inductor engine's explanation (docs/EXPLAIN.md), from a
 * finished result: the rungs of the ladder (eager -> inductor-nofusion ->
 * inductor -> inductor-max-autotune, each step one mechanism, with the
 * bootstrap interval of its difference of medians); each fused Inductor
 * kernel of the profiled iteration with eager's per-call time of each ATen op
 * type it names (from eager's own profile: a reference, not a measured
 * difference); and, fusion by fusion, what the runner measured by undoing
 * each of Inductor's fusion decisions (the inductor variant's
 * "fusion_explain": worker/engine/inductor/explain.py), passed on as
 * "fusions". */
#include "ind_explain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_stats.h"

#define IND_EX_KERNELS_MAX 40

static const fb_variant_result *variant(const fb_result *r, const char *name)
{
    for (int i = 0; i < r->n_variants; i++)
        if (strcmp(r->variants[i].name, name) == 0 && r->variants[i].status == FB_VS_OK &&
            r->variants[i].n_samples >= 2)
            return &r->variants[i];
    return NULL;
}

/* One step of the ladder: a's median minus b's, with its interval. */
static cJSON *step(const fb_variant_result *a, const fb_variant_result *b, const char *mechanism)
{
    double d, lo, hi;
    if (!fb_stats_diff_ci(a->samples_ms, a->n_samples, b->samples_ms, b->n_samples, 0.95, &d, &lo,
                          &hi))
        return NULL;
    cJSON *o = cJSON_CreateObject(), *ci = cJSON_CreateArray();
    if (!o || !ci || !cJSON_AddItemToArray(ci, fb_json_num_or_null(lo)) ||
        !cJSON_AddItemToArray(ci, fb_json_num_or_null(hi)) ||
        !cJSON_AddStringToObject(o, "from", a->name) ||
        !cJSON_AddStringToObject(o, "to", b->name) ||
        !cJSON_AddStringToObject(o, "mechanism", mechanism) ||
        !cJSON_AddItemToObject(o, "saved_ms", fb_json_num_or_null(d))) {
        cJSON_Delete(o);
        cJSON_Delete(ci);
        return NULL;
    }
    if (!cJSON_AddItemToObject(o, "saved_ci95", ci)) {
        cJSON_Delete(ci);
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Inductor names the ATen ops a kernel merged after decomposition
 * ("aten.convolution", "aten._native_batch_norm_legit_no_training"), eager's
 * profile the ops the model called ("aten.conv2d", "aten.batch_norm",
 * "aten.relu_"): both to one name, "aten." and an in-place '_' dropped. */
static void canonical(const char *op, char *out, size_t n)
{
    static const struct {
        const char *from, *to;
    } same[] = {
        {"convolution", "conv2d"},
        {"_convolution", "conv2d"},
        {"_native_batch_norm_legit_no_training", "batch_norm"},
        {"native_batch_norm", "batch_norm"},
        {"max_pool2d_with_indices", "max_pool2d"},
        {"addmm", "linear"},
        {"mm", "linear"},
        {"native_layer_norm", "layer_norm"},
        {"_softmax", "softmax"},
    };
    const char *s = strncmp(op, "aten.", 5) == 0 ? op + 5 : op;
    snprintf(out, n, "%s", s);
    size_t len = strlen(out);
    if (len > 1 && out[len - 1] == '_' && out[0] != '_')
        out[len - 1] = '\0';
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (strcmp(out, same[i].from) == 0) {
            snprintf(out, n, "%s", same[i].to);
            break;
        }
}

/* Eager's time per call of ATen op `op`, NaN when eager's profile has no such
 * op. */
static double eager_per_call(const fb_variant_result *e, const char *op)
{
    char want[FB_NAME_MAX], have[FB_NAME_MAX];
    canonical(op, want, sizeof want);
    for (int i = 0; e && i < e->n_kernel_rows; i++) {
        const fb_kernel_row *k = &e->kernel_rows[i];
        if (k->n_ops < 1 || k->count <= 0)
            continue;
        canonical(k->ops[0], have, sizeof have);
        if (strcmp(have, want) == 0)
            return k->total_ms / k->count;
    }
    return NAN;
}

static int by_time(const void *a, const void *b)
{
    double x = (*(const fb_kernel_row *const *)a)->total_ms;
    double y = (*(const fb_kernel_row *const *)b)->total_ms;
    return (y > x) - (y < x);
}

/* Whether Inductor also called a library (an extern kernel: oneDNN, a GEMM)
 * for ATen op type `op` somewhere in variant v's program: a fused kernel
 * naming it among its origins may not compute it itself. */
static bool extern_op(const fb_variant_result *v, const char *op)
{
    const cJSON *x, *o;
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(v->extra, "extern"))
    {
        cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(x, "aten_ops"))
        {
            if (cJSON_IsString(o) && strcmp(o->valuestring, op) == 0)
                return true;
        }
    }
    return false;
}

/* A fused Inductor kernel and eager's per-call time of each ATen op type it
 * names (an average over every call of that type in eager: a reference for
 * the reader, not a difference; no sum, since a kernel's origins may include
 * ops a library call computed). */
static cJSON *kernel_json(const fb_kernel_row *k, const fb_variant_result *v,
                          const fb_variant_result *e)
{
    cJSON *o = cJSON_CreateObject(), *ops = cJSON_CreateArray();
    for (int j = 0; ops && j < k->n_ops; j++) {
        bool ext = extern_op(v, k->ops[j]);
        double t = eager_per_call(e, k->ops[j]);
        cJSON *op = cJSON_CreateObject();
        if (!op || !cJSON_AddStringToObject(op, "op", k->ops[j]) ||
            !cJSON_AddBoolToObject(op, "extern", ext) ||
            !cJSON_AddItemToObject(op, "eager_ms_per_call", fb_json_num_or_null(t)) ||
            !cJSON_AddItemToArray(ops, op)) {
            cJSON_Delete(op);
            cJSON_Delete(ops);
            ops = NULL;
        }
    }
    bool ok = o && ops && cJSON_AddStringToObject(o, "kernel", k->name) &&
              cJSON_AddNumberToObject(o, "count", k->count) &&
              cJSON_AddItemToObject(o, "mean_ms", fb_json_num_or_null(k->mean_ms)) &&
              cJSON_AddItemToObject(o, "total_ms", fb_json_num_or_null(k->total_ms)) &&
              cJSON_AddItemToObject(o, "ops", ops);
    if (!ok) {
        if (o && ops && !cJSON_GetObjectItemCaseSensitive(o, "ops"))
            cJSON_Delete(ops);
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* The fused kernels of v's profile (2+ ATen ops), most time first. */
static cJSON *kernels_json(const fb_variant_result *v, const fb_variant_result *e)
{
    const fb_kernel_row **k = malloc(((size_t)v->n_kernel_rows + 1) * sizeof *k);
    cJSON *arr = cJSON_CreateArray();
    int n = 0;
    if (!k || !arr) {
        free(k);
        cJSON_Delete(arr);
        return NULL;
    }
    for (int i = 0; i < v->n_kernel_rows; i++)
        if (v->kernel_rows[i].n_ops >= 2)
            k[n++] = &v->kernel_rows[i];
    qsort(k, (size_t)n, sizeof *k, by_time);
    for (int i = 0; i < n && i < IND_EX_KERNELS_MAX; i++) {
        cJSON *j = kernel_json(k[i], v, e);
        if (!j || !cJSON_AddItemToArray(arr, j)) {
            cJSON_Delete(j);
            cJSON_Delete(arr);
            arr = NULL;
            break;
        }
    }
    free(k);
    return arr;
}

/* The row of v's profile for kernel `name`, or NULL. */
static const fb_kernel_row *row_named(const fb_variant_result *v, const char *name)
{
    for (int i = 0; name && i < v->n_kernel_rows; i++)
        if (strcmp(v->kernel_rows[i].name, name) == 0)
            return &v->kernel_rows[i];
    return NULL;
}

/* Each fusion decision's kernel where the machine's limits put it: "costs"
 * {bytes, flops, gbps, gflops, roofline_share} of its kernel in the profiled
 * iteration (the kernel's row: Inductor's scheduler counts, the kernel's
 * time), and fx's "fused_roofline_share", the time-weighted share of the
 * kernels holding a decision, each kernel once, over "fused_kernels_ms", their
 * time (a suite weighs jobs by it).  A decision whose kernel has no counts
 * gets none. */
static bool fusion_costs(cJSON *fx, const fb_variant_result *f)
{
    bool *seen = calloc((size_t)f->n_kernel_rows + 1, sizeof *seen);
    double roof = 0, ms = 0;
    cJSON *e;
    if (!seen)
        return false;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(fx, "fusions"))
    {
        const fb_kernel_row *k =
            row_named(f, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "kernel")));
        if (!k || !k->impl[0] || !(k->total_ms > 0))
            continue;
        double t = k->total_ms * 1e6; /* ms -> GB/s, GFLOP/s */
        cJSON *c = cJSON_CreateObject();
        bool ok = c && fb_json_put(c, "bytes", fb_json_num_or_null(k->bytes)) &&
                  fb_json_put(c, "flops", fb_json_num_or_null(k->flops)) &&
                  fb_json_put(c, "gbps", fb_json_num_or_null(k->bytes / t)) &&
                  fb_json_put(c, "gflops", fb_json_num_or_null(k->flops / t)) &&
                  fb_json_put(c, "roofline_share", fb_json_num_or_null(k->roof_ms / k->total_ms));
        if (!ok || !fb_json_put(e, "costs", c)) {
            if (!ok)
                cJSON_Delete(c);
            free(seen);
            return false;
        }
        if (seen[k - f->kernel_rows] || !isfinite(k->roof_ms))
            continue;
        seen[k - f->kernel_rows] = true;
        roof += k->roof_ms;
        ms += k->total_ms;
    }
    free(seen);
    return fb_json_put(fx, "fused_roofline_share",
                       ms > 0 ? cJSON_CreateNumber(roof / ms) : cJSON_CreateNull()) &&
           fb_json_put(fx, "fused_kernels_ms", cJSON_CreateNumber(ms));
}

fb_code ind_explain(const fb_result *r, cJSON **out, fb_err *err)
{
    static const struct {
        const char *name, *mechanism;
    } rungs[] = {
        {"eager", NULL},
        {"inductor-nofusion",
         "compiling without fusion (decompositions, lowering, the C++ codegen)"},
        {"inductor", "Inductor's fusion"},
        {"inductor-max-autotune", "GEMM/conv template autotuning"},
    };
    const fb_variant_result *prev = NULL, *e = variant(r, "eager"), *f = variant(r, "inductor");
    size_t prev_i = 0;
    *out = NULL;
    if (!e || !f)
        return fb_err_set(err, FB_EUNSUPPORTED, "variants",
                          "an inductor explanation needs eager and inductor timed");
    cJSON *o = cJSON_CreateObject(), *ladder = cJSON_CreateArray();
    bool ok = o && ladder;
    for (size_t i = 0; ok && i < sizeof rungs / sizeof rungs[0]; i++) {
        const fb_variant_result *v = variant(r, rungs[i].name);
        if (!v)
            continue;
        if (prev) {
            /* a step over rungs not run holds each of their mechanisms:
             * eager -> inductor is the compile and the fusion, not fusion */
            char mech[384] = "";
            size_t n = 0;
            for (size_t j = prev_i + 1; j <= i && n < sizeof mech; j++)
                n += (size_t)snprintf(mech + n, sizeof mech - n, "%s%s",
                                      j > prev_i + 1 ? ", then " : "", rungs[j].mechanism);
            cJSON *s = step(prev, v, mech);
            ok = s && cJSON_AddItemToArray(ladder, s);
            if (!ok)
                cJSON_Delete(s);
        }
        prev = v;
        prev_i = i;
    }
    cJSON *kernels = ok ? kernels_json(f, e) : NULL;
    ok = ok && kernels && cJSON_AddStringToObject(o, "engine", "inductor") &&
         cJSON_AddItemToObject(o, "ladder", ladder);
    if (ok)
        ladder = NULL;
    ok = ok && cJSON_AddItemToObject(o, "kernels", kernels);
    if (ok)
        kernels = NULL;
    const cJSON *fx =
        f->extra ? cJSON_GetObjectItemCaseSensitive(f->extra, "fusion_explain") : NULL;
    cJSON *fusions = ok && fx ? cJSON_Duplicate(fx, 1) : NULL;
    ok = ok && (!fx || (fusions && fusion_costs(fusions, f) &&
                        cJSON_AddItemToObject(o, "fusions", fusions)));
    if (!ok)
        cJSON_Delete(fusions);
    ok = ok &&
         fb_json_put(o, "roofline", fb_json_roofline(r->env.roofline_gbps, r->env.roofline_gflops));
    ok = ok && cJSON_AddStringToObject(
                   o, "note",
                   fx ? "fusions: each of Inductor's fusion decisions undone alone (or, among "
                        "many, in groups) and timed against the job's compile; the ladder's "
                        "rungs are the coarser counterfactuals; beside each fused kernel, eager's "
                        "time per call of each ATen op type it names (a reference)"
                      : "the ladder's rungs are the counterfactuals (the fusion-by-fusion "
                        "undoing runs in the job: ask with explain); beside each fused kernel, "
                        "eager's time per call of each ATen op type it names (a reference)");
    cJSON_Delete(ladder);
    cJSON_Delete(kernels);
    if (!ok) {
        cJSON_Delete(o);
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot describe the inductor explanation");
    }
    *out = o;
    return FB_OK;
}
