/* nat_engine: the native engine (fb_engine) over the pattern suite: prepare()
 * builds a nat_ctx and maps the spec's variant names onto its plans; run() runs
 * a plan; profile() times each launch of one run and reports kernel rows and the
 * fusion counts of the plan. */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "fb_clock.h"
#include "gr_zoo.h"
#include "nat.h"
#include "nat_cost.h"
#include "nat_engine.h"
#include "nat_explain.h"
#include "nat_roofline.h"
#ifdef NAT_HAVE_CUDA
#include "cuda/ncu.h" /* the CUDA backend: device "cuda" goes there */
#endif

#define NAT_MAX_THREADS 256

typedef struct nat_instance {
    fb_instance base; /* first, so an fb_instance * is a nat_instance * */
    nat_ctx *ctx;
    const fb_spec *spec; /* the caller's, outlives the instance */
    int n_variants;
    int plan[FB_MAX_VARIANTS]; /* spec variant index -> NAT_EAGER / NAT_FUSED */
} nat_instance;

/* ---- catalog ---- */

static fb_workload_info cpu_catalog[64];
static int cpu_catalog_n;
static pthread_once_t catalog_once = PTHREAD_ONCE_INIT;

/* The patterns, then the model zoo. */
static void catalog_init(void)
{
    const int max = (int)(sizeof cpu_catalog / sizeof cpu_catalog[0]);
    for (int i = 0; nat_patterns[i] && cpu_catalog_n < max; i++)
        cpu_catalog[cpu_catalog_n++] = nat_patterns[i]->info;
    for (int i = 0; gr_models[i] && cpu_catalog_n < max; i++)
        cpu_catalog[cpu_catalog_n++] = gr_models[i]->info;
}

/* Every workload on "cpu"; the patterns and the model zoo on "cuda" when built
 * with CUDA (ncu_engine.c's catalog). */
static const fb_workload_info *nat_catalog(const char *device, int *n)
{
    *n = 0;
#ifdef NAT_HAVE_CUDA
    if (device && strcmp(device, "cuda") == 0)
        return ncu_catalog(n);
#endif
    if (!device || strcmp(device, "cpu") != 0)
        return NULL;
    pthread_once(&catalog_once, catalog_init);
    *n = cpu_catalog_n;
    return cpu_catalog;
}

/* ---- prepare ---- */

/* Checks device, dtype and workload, and maps variant names onto plans. */
static fb_code check_spec(const fb_spec *spec, nat_instance *ni, fb_err *err)
{
    if (spec->device[0] && strcmp(spec->device, "cpu") != 0)
        return fb_err_set(err, FB_EUNSUPPORTED, "device", "native engine runs on cpu, not %s",
                          spec->device);
    if (!gr_workload_find(spec->workload))
        return fb_err_set(err, FB_EUNSUPPORTED, "workload", "native engine has no workload %s",
                          spec->workload);
    if (spec->dtype[0] && strcmp(spec->dtype, "float32") != 0)
        return fb_err_set(err, FB_EUNSUPPORTED, "dtype", "native cpu runs float32, not %s",
                          spec->dtype);
    ni->n_variants = spec->n_variants;
    for (int i = 0; i < spec->n_variants; i++) {
        char field[FB_ERR_FIELD_MAX];
        if (strcmp(spec->variants[i], "eager") == 0) {
            ni->plan[i] = NAT_EAGER;
        } else if (strcmp(spec->variants[i], "fused") == 0) {
            ni->plan[i] = NAT_FUSED;
        } else {
            snprintf(field, sizeof field, "variants[%d]", i);
            return fb_err_set(err, FB_EUNSUPPORTED, field, "native has no variant %s",
                              spec->variants[i]);
        }
    }
    if (spec->n_variants == 0) { /* defaults not applied: the standard pair */
        ni->n_variants = 2;
        ni->plan[0] = NAT_EAGER;
        ni->plan[1] = NAT_FUSED;
    }
    return FB_OK;
}

/* params.threads (default: every core) for OpenMP and OpenBLAS alike, so eager
 * GEMMs (threaded by OpenBLAS) and fused kernels (by OpenMP) use the same cores. */
static fb_code set_threads(const fb_spec *spec, fb_err *err)
{
    int64_t t = 0;
    int cores = omp_get_num_procs();
    fb_code rc =
        fb_spec_param_int(spec, "threads", cores < NAT_MAX_THREADS ? cores : NAT_MAX_THREADS, 1,
                          NAT_MAX_THREADS, &t, err);
    if (rc)
        return rc;
    omp_set_num_threads((int)t);
    /* One threading runtime: every kernel parallelizes with OpenMP and calls
     * OpenBLAS single-threaded.  Letting OpenBLAS thread the bare GEMMs put
     * two pools of spinning threads on the cores, taking turns as eager and
     * fused launches interleave, and made medians swing 2-4x run to run. */
    openblas_set_num_threads(1);
    return FB_OK;
}

static const fb_instance_ops nat_instance_ops;

static fb_code nat_prepare(const fb_spec *spec, fb_instance **out, fb_err *err)
{
    *out = NULL;
#ifdef NAT_HAVE_CUDA
    if (strcmp(spec->device, "cuda") == 0)
        return ncu_prepare(spec, out, err);
#endif
    nat_instance *ni = calloc(1, sizeof *ni);
    fb_code rc = FB_OK;
    if (!ni) {
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate an instance");
        goto out;
    }
    ni->base.ops = &nat_instance_ops;
    ni->spec = spec;
    rc = check_spec(spec, ni, err);
    if (!rc)
        rc = set_threads(spec, err);
    if (rc)
        goto out;
    double t0 = fb_now_ms();
    rc = gr_ctx_build(spec, &ni->ctx, err);
    if (rc)
        goto out;
    ni->base.plan_ms = fb_now_ms() - t0;
    ni->base.graph = ni->ctx->graph; /* models: the graph goes to the result */
    ni->ctx->graph = NULL;
    *out = &ni->base;
    ni = NULL;
out:
    free(ni);
    return rc;
}

/* ---- instance ---- */

static fb_code variant_plan(nat_instance *ni, int v, const nat_plan **plan, fb_err *err)
{
    if (v < 0 || v >= ni->n_variants)
        return fb_err_set(err, FB_EINVAL, NULL, "variant index %d out of range", v);
    *plan = &ni->ctx->plans[ni->plan[v]];
    return FB_OK;
}

static fb_code nat_run(fb_instance *inst, int v, fb_err *err)
{
    const nat_plan *plan = NULL;
    fb_code rc = variant_plan((nat_instance *)inst, v, &plan, err);
    if (!rc)
        nat_plan_run(plan);
    return rc;
}

static fb_code nat_output(fb_instance *inst, int v, const float **data, size_t *n, fb_err *err)
{
    const nat_plan *plan = NULL;
    fb_code rc = variant_plan((nat_instance *)inst, v, &plan, err);
    if (rc)
        return rc;
    *data = plan->out;
    *n = plan->out_n;
    return FB_OK;
}

static void nat_destroy(fb_instance *inst)
{
    nat_instance *ni = (nat_instance *)inst;
    if (!ni)
        return;
    nat_ctx_free(ni->ctx);
    cJSON_Delete(ni->base.graph);
    free(ni);
}

/* ---- profile ---- */

/* Fills the plan-derived counts of vr (kernels and fusion groups). */
static void plan_counts(const nat_plan *plan, fb_variant_result *vr)
{
    vr->kernels = plan->n;
    vr->fused_kernels = 0;
    vr->fused_ops = 0;
    for (int i = 0; i < plan->n; i++) {
        if (plan->launches[i].n_ops >= 2) {
            vr->fused_kernels++;
            vr->fused_ops += plan->launches[i].n_ops;
        }
    }
}

static fb_code nat_profile(fb_instance *inst, int v, fb_variant_result *vr, fb_err *err)
{
    nat_instance *ni = (nat_instance *)inst;
    const nat_plan *plan = NULL;
    fb_code rc = variant_plan(ni, v, &plan, err);
    if (rc)
        return rc;
    fb_kernel_row *rows = calloc(plan->n > 0 ? (size_t)plan->n : 1, sizeof *rows);
    if (!rows)
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate kernel rows");
    int n_rows = 0;
    double kernel_ms = 0.0, cat[FB_KC_COUNT];
    for (int c = 0; c < FB_KC_COUNT; c++)
        cat[c] = NAN;
    double t0 = fb_now_ms();
    for (int i = 0; i < plan->n; i++) {
        const nat_launch *l = &plan->launches[i];
        double ts = fb_now_ms();
        l->fn(l);
        double ms = fb_now_ms() - ts;
        kernel_ms += ms;
        cat[l->category] = isnan(cat[l->category]) ? ms : cat[l->category] + ms;
        nat_kernel_row_add(rows, &n_rows, l, ts - t0, ms, (int)sizeof(float), false);
    }
    double busy = fb_now_ms() - t0;
    free(vr->kernel_rows);
    vr->kernel_rows = rows;
    vr->n_kernel_rows = n_rows;
    plan_counts(plan, vr);
    if (!gr_plan_fusion_groups(plan, vr) || !gr_plan_node_groups(ni->ctx, ni->plan[v], vr))
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate fusion groups");
    vr->kernel_time_ms = kernel_ms;
    vr->busy_ms = busy;
    vr->idle_ms = busy > kernel_ms ? busy - kernel_ms : 0.0;
    vr->peak_mem_bytes = nat_ctx_variant_bytes(ni->ctx, ni->plan[v]);
    for (int c = 0; c < FB_KC_COUNT; c++)
        vr->categories_ms[c] = cat[c];
    return FB_OK;
}

/* The explanation's profiled rounds take about this long; each
 * counterfactual half of it (nat_explain_cpu). */
#define NAT_EXPLAIN_BUDGET_S 3.0

static fb_code nat_explain_op(fb_instance *inst, int eager, int fused, const fb_variant_result *ev,
                              const fb_variant_result *fv, cJSON **out, fb_err *err)
{
    nat_instance *ni = (nat_instance *)inst;
    *out = NULL;
    if (eager < 0 || eager >= ni->n_variants || fused < 0 || fused >= ni->n_variants ||
        ni->plan[eager] != NAT_EAGER || ni->plan[fused] != NAT_FUSED)
        return fb_err_set(err, FB_EINVAL, NULL, "explain needs the eager and fused variants");
    nat_ex_builds bs = nat_ex_builds_of(ni->spec, eager, fused,
                                        ni->ctx->node_launch[NAT_FUSED] != NULL, nat_prepare);
    return nat_explain_cpu(&bs, ni->ctx, ev->samples_ms, ev->n_samples, fv->samples_ms,
                           fv->n_samples, NAT_EXPLAIN_BUDGET_S, out, err);
}

static fb_code nat_reference(fb_instance *inst, const float **data, size_t *n, const char **what,
                             fb_err *err)
{
    const nat_ctx *ctx = ((nat_instance *)inst)->ctx;
    (void)err;
    *data = ctx->reference;
    *n = ctx->reference_n;
    *what = ctx->reference_what;
    return FB_OK;
}

static const fb_instance_ops nat_instance_ops = {
    .run = nat_run,
    .output = nat_output,
    .profile = nat_profile,
    .destroy = nat_destroy,
    .explain = nat_explain_op,
    .reference = nat_reference,
};

/* The limits of device ("cpu": a triad's bandwidth and our GEMM's rate on
 * threads OpenMP threads, nat_roofline.h; "cuda": a device copy's bandwidth
 * and cuBLASLt's float32 GEMM rate, ncu.h) into *gbps, *gflops.
 * FB_EUNSUPPORTED for a device this build has no backend for. */
static fb_code nat_roofline_device(const char *device, int threads, double *gbps, double *gflops,
                                   fb_err *err)
{
    *gbps = *gflops = 0;
#ifdef NAT_HAVE_CUDA
    if (device && strcmp(device, "cuda") == 0)
        return ncu_roofline_measure(gbps, gflops, err);
#endif
    if (device && strcmp(device, "cpu") != 0)
        return fb_err_set(err, FB_EUNSUPPORTED, "device", "no roofline for device %s", device);
    nat_roofline r;
    fb_code rc = nat_roofline_measure(threads, &r, err);
    if (!rc) {
        *gbps = r.triad_gbps;
        *gflops = r.gemm_gflops;
    }
    return rc;
}

/* Each launch's bound at profile (nat_cost.h), on the CPU or the GPU. */
static void nat_roofline_use_dev(const char *device, double gbps, double gflops)
{
    nat_roofline_use(device && strcmp(device, "cuda") == 0, gbps, gflops);
}

/* The job's OpenMP threads, each calling OpenBLAS at once (as the kernels do:
 * OpenBLAS single-threaded inside OpenMP regions), so OpenBLAS maps a buffer
 * per thread now: 256^3 takes about a millisecond, long enough for the calls
 * to overlap.  A CUDA job's host side needs none of it. */
static void nat_warm(const fb_spec *spec)
{
    enum { N = 256 };
    fb_err err;
    float *a;

    fb_err_clear(&err);
    if (strcmp(spec->device, "cpu") != 0 || set_threads(spec, &err) != FB_OK)
        return;
    a = calloc(3 * (size_t)N * N, sizeof *a);
    if (!a)
        return;
    for (int round = 0; round < 2; round++) {
#pragma omp parallel
        {
            float *c = calloc((size_t)N * N, sizeof *c);
            if (c)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N,
                            a + (size_t)N * N, N, 0.0f, c, N);
            free(c);
        }
    }
    free(a);
}

/* Jobs of uploaded models: their native form (gr_zoo.c) on any device this
 * build runs. */
static const fb_workload_info *nat_uploaded(const char *device)
{
#ifdef NAT_HAVE_CUDA
    if (device && strcmp(device, "cuda") == 0)
        return ncu_uploaded();
#endif
    return device && strcmp(device, "cpu") == 0 ? &gr_upload.info : NULL;
}

const fb_engine nat_engine = {
    .name = "native",
    .catalog = nat_catalog,
    .uploaded = nat_uploaded,
    .prepare = nat_prepare,
    .warm = nat_warm,
    .roofline_measure = nat_roofline_device,
    .roofline_use = nat_roofline_use_dev,
};
