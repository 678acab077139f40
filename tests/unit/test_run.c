/* Unit tests of the run library: fb_run_benchmark on real native patterns with
 * small shapes, and on a fake engine (linked in place of fb_engine_list.c's weak
 * table) that drives the failure paths: accuracy, all-zero and NaN outputs, run
 * errors, and the order of warmup, timed and profiled iterations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fb_engines.h"
#include "fb_gpu.h"
#include "fb_nvml.h"
#include "fb_run.h"
#include "nat.h"
#include "nat_engine.h"

/* ---- a fake engine ---- */

#define FAKE_N       16
#define FAKE_LOG_MAX 4096

/* Every run and profile in order: variant index, or 100 + index for a profile. */
static int fake_log[FAKE_LOG_MAX];
static int fake_log_n;

typedef struct fake_inst {
    fb_instance base;
    const fb_spec *spec;
    int runs[FB_MAX_VARIANTS];
    float out[FB_MAX_VARIANTS][FAKE_N];
    float ref[FAKE_N];
} fake_inst;

/* The variant's name says how it behaves: "eager"/"fused" exact, "close" within
 * float32 tolerance, "off" 1% off, "zeros", "nan", "broken" (run fails), "late"
 * (fails on its 5th run), "unsup" (unsupported). */
static fb_code fake_run(fb_instance *inst, int v, fb_err *err)
{
    fake_inst *fi = (fake_inst *)inst;
    const char *name = fi->spec->variants[v];
    float scale = 1.0f;

    if (fake_log_n < FAKE_LOG_MAX)
        fake_log[fake_log_n++] = v;
    fi->runs[v]++;
    if (strcmp(name, "broken") == 0 || (strcmp(name, "late") == 0 && fi->runs[v] == 5))
        return fb_err_set(err, FB_EDEVICE, NULL, "kernel launch failed");
    if (strcmp(name, "unsup") == 0)
        return fb_err_set(err, FB_EUNSUPPORTED, NULL, "not on this device");
    if (strcmp(name, "noisy") == 0) { /* 0.1 ms and 1 ms in turn: CV near 90% */
        struct timespec t0, t;
        double want = fi->runs[v] % 2 ? 0.1 : 1.0, ms;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            clock_gettime(CLOCK_MONOTONIC, &t);
            ms = (t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6;
        } while (ms < want);
    }
    if (strcmp(name, "close") == 0)
        scale = 1.0f + 5e-5f;
    if (strcmp(name, "off") == 0)
        scale = 1.01f;
    for (int i = 0; i < FAKE_N; i++)
        fi->out[v][i] = strcmp(name, "zeros") == 0 ? 0.0f : (float)(i + 1) * scale;
    if (strcmp(name, "nan") == 0)
        fi->out[v][3] = NAN;
    return FB_OK;
}

static fb_code fake_output(fb_instance *inst, int v, const float **data, size_t *n, fb_err *err)
{
    fake_inst *fi = (fake_inst *)inst;
    *data = fi->out[v];
    *n = FAKE_N;
    return FB_OK;
}

static fb_code fake_profile(fb_instance *inst, int v, fb_variant_result *vr, fb_err *err)
{
    if (fake_log_n < FAKE_LOG_MAX)
        fake_log[fake_log_n++] = 100 + v;
    vr->kernels = 7;
    return FB_OK;
}

static void fake_destroy(fb_instance *inst)
{
    free(inst);
}

/* params.reference: "exact" (the eager output), "off" (1% off); absent: none. */
static fb_code fake_reference(fb_instance *inst, const float **data, size_t *n, const char **what,
                              fb_err *err)
{
    fake_inst *fi = (fake_inst *)inst;
    const char *how =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fi->spec->params, "reference"));
    *data = NULL;
    if (!how)
        return FB_OK;
    for (int i = 0; i < FAKE_N; i++)
        fi->ref[i] = (float)(i + 1) * (strcmp(how, "off") == 0 ? 1.01f : 1.0f);
    *data = fi->ref;
    *n = FAKE_N;
    *what = "the fake reference";
    return FB_OK;
}

static const fb_instance_ops fake_ops = {.run = fake_run,
                                         .output = fake_output,
                                         .profile = fake_profile,
                                         .destroy = fake_destroy,
                                         .reference = fake_reference};

static const fb_workload_info fake_catalog[] = {{
    .name = "fake",
    .engine = "fake",
    .domain = "pattern",
    .description = "test double",
    .default_batch_size = 1,
    .devices = {"cpu", NULL},
    .dtypes = {"float32", NULL},
    .variants = {"eager", "fused", NULL},
}};

static const fb_workload_info *fake_cat(const char *device, int *n)
{
    *n = 1;
    return fake_catalog;
}

static fb_code fake_prepare(const fb_spec *spec, fb_instance **out, fb_err *err)
{
    fake_inst *fi = calloc(1, sizeof *fi);
    if (!fi)
        return fb_err_set(err, FB_ENOMEM, NULL, "oom");
    if (strcmp(spec->workload, "fake") != 0) {
        free(fi);
        return fb_err_set(err, FB_EUNSUPPORTED, "workload", "no such workload");
    }
    fi->base.ops = &fake_ops;
    fi->base.plan_ms = 1.5;
    fi->spec = spec;
    *out = &fi->base;
    return FB_OK;
}

static const fb_engine fake_engine = {.name = "fake", .catalog = fake_cat, .prepare = fake_prepare};

/* Replaces the weak table of fb_engine_list.c. */
const fb_engine *const fb_engines[] = {&nat_engine, &fake_engine, NULL};

/* ---- helpers ---- */

static void make_spec(fb_spec *spec, const char *engine, const char *workload, const char *params,
                      const char *const *variants, int warmup, int iterations)
{
    static const char *const dflt[] = {"eager", "fused", NULL};
    fb_spec_init(spec);
    snprintf(spec->engine, sizeof spec->engine, "%s", engine);
    snprintf(spec->workload, sizeof spec->workload, "%s", workload);
    spec->params = cJSON_Parse(params);
    assert_non_null(spec->params);
    spec->warmup = warmup;
    spec->iterations = iterations;
    fb_spec_apply_defaults(spec, "cpu", 1, variants ? variants : dflt);
}

static const fb_variant_result *find_variant(const fb_result *r, const char *name)
{
    for (int v = 0; v < r->n_variants; v++) {
        if (strcmp(r->variants[v].name, name) == 0)
            return &r->variants[v];
    }
    fail_msg("no variant %s", name);
    return NULL;
}

/* The stored statistics are those of the stored samples. */
static void check_stats_match(const fb_variant_result *vr, int iterations)
{
    fb_stats st;

    assert_int_equal(vr->n_samples, iterations);
    assert_int_equal(vr->latency.n, iterations);
    for (int i = 0; i < vr->n_samples; i++)
        assert_true(vr->samples_ms[i] > 0.0);
    fb_stats_compute(vr->samples_ms, vr->n_samples, &st);
    assert_true(st.median == vr->latency.median && st.p90 == vr->latency.p90);
    assert_true(st.min == vr->latency.min && st.max == vr->latency.max);
    assert_true(vr->latency.min <= vr->latency.median && vr->latency.median <= vr->latency.max);
    assert_true(vr->latency.ci95_lo <= vr->latency.median);
    assert_true(vr->latency.ci95_hi >= vr->latency.median);
}

/* ---- progress ---- */

typedef struct prog_log {
    char phases[64][16];
    int n;
} prog_log;

static void on_progress(void *ud, const char *phase, const char *variant, int done, int total)
{
    prog_log *pl = ud;
    assert_true(done >= 0 && done <= total);
    if (pl->n == 0 || strcmp(pl->phases[pl->n - 1], phase) != 0) {
        if (pl->n < 64)
            snprintf(pl->phases[pl->n++], sizeof pl->phases[0], "%s", phase);
    }
}

/* ---- native patterns ---- */

static void test_native_gemm_bias_relu(void **state)
{
    fb_spec spec;
    fb_result res;
    fb_err err;
    prog_log pl = {.n = 0};

    make_spec(&spec, "native", "gemm_bias_relu",
              "{\"m\":64,\"k\":64,\"n\":64,\"threads\":1,\"time_budget_s\":0}", NULL, 2, 12);
    assert_int_equal(fb_run_benchmark(&spec, on_progress, &pl, &res, &err), FB_OK);
    assert_int_equal(res.n_variants, 2);
    assert_string_equal(res.baseline, "eager");
    assert_true(res.plan_ms >= 0.0);
    const fb_variant_result *e = find_variant(&res, "eager"), *f = find_variant(&res, "fused");
    assert_int_equal(e->status, FB_VS_OK);
    assert_int_equal(f->status, FB_VS_OK);
    check_stats_match(e, 12);
    check_stats_match(f, 12);
    assert_true(e->max_rel_error == 0.0);
    assert_true(f->max_rel_error >= 0.0 && f->max_rel_error < 1e-5);
    assert_true(e->kernels > f->kernels && f->kernels >= 1);
    assert_true(f->fused_kernels >= 1 && f->fused_ops >= 2);
    assert_true(e->peak_mem_bytes > f->peak_mem_bytes && f->peak_mem_bytes > 0);
    assert_true(res.env.cpu[0] && res.env.hostname[0] && res.env.fusionbench[0]);
    assert_string_equal(res.env.device_name, res.env.cpu);
    assert_int_equal(res.env.threads, 1); /* params.threads, applied by the engine */
    assert_true(strncmp(res.env.blas, "OpenBLAS", 8) == 0);
    /* Phases in order, each once (timing may repeat in a row). */
    assert_int_equal(pl.n, 5);
    assert_string_equal(pl.phases[0], "prepare");
    assert_string_equal(pl.phases[1], "warmup");
    assert_string_equal(pl.phases[2], "timing");
    assert_string_equal(pl.phases[3], "profile");
    assert_string_equal(pl.phases[4], "done");
    fb_result_free(&res);
    fb_spec_free(&spec);
}

/* OpenBLAS's fallback core is replaced only where the CPU can run better. */
static void test_blas_core_for_cpu(void **state)
{
    (void)state;
    assert_null(fb_blas_core_for_cpu(NULL, false));
    assert_null(fb_blas_core_for_cpu(NULL, true));
    assert_null(fb_blas_core_for_cpu("SkylakeX", false));
    assert_null(fb_blas_core_for_cpu("Haswell", false));
    assert_null(fb_blas_core_for_cpu("Haswell", true)); /* already an AVX2 CPU's */
    const char *want = fb_blas_core_for_cpu("Prescott", false);
    assert_true(want == fb_blas_core_for_cpu("PRESCOTT", false));
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (avx512)
        assert_string_equal(want, "SkylakeX");
    else if (avx2)
        assert_string_equal(want, "Haswell");
    else
        assert_null(want);
    /* narrowed: OpenBLAS's AVX2 kernels too, from the fallback or the wide ones */
    const char *narrow = fb_blas_core_for_cpu("SkylakeX", true);
    if (avx2) {
        assert_string_equal(narrow, "Haswell");
        assert_string_equal(fb_blas_core_for_cpu("Prescott", true), "Haswell");
    } else {
        assert_null(narrow);
    }
#else
    assert_null(want);
#endif
}

static void test_native_speedup_json(void **state)
{
    static const char *const rev[] = {"fused", "eager", NULL};
    fb_spec spec;
    fb_result res;
    fb_err err;

    /* Baseline is eager even when it is not first. */
    make_spec(&spec, "native", "softmax", "{\"rows\":32,\"cols\":64,\"threads\":1}", rev, 1, 6);
    assert_int_equal(fb_run_benchmark(&spec, NULL, NULL, &res, &err), FB_OK);
    assert_string_equal(res.baseline, "eager");
    assert_string_equal(res.variants[0].name, "fused");
    cJSON *j = fb_result_to_json(&res);
    assert_non_null(j);
    cJSON *sp = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(j, "comparison"), "speedup"), "fused");
    assert_true(cJSON_IsNumber(sp));
    double want = res.variants[1].latency.median / res.variants[0].latency.median;
    assert_true(fabs(sp->valuedouble - want) <= 1e-9 * want);
    cJSON_Delete(j);
    fb_result_free(&res);
    fb_spec_free(&spec);
}

static void test_unknown_workload_and_engine(void **state)
{
    fb_spec spec;
    fb_result res;
    fb_err err;

    make_spec(&spec, "native", "no_such_workload", "{}", NULL, 1, 2);
    assert_int_not_equal(fb_run_benchmark(&spec, NULL, NULL, &res, &err), FB_OK);
    assert_int_equal(err.code, FB_EUNSUPPORTED);
    fb_result_free(&res);
    fb_spec_free(&spec);

    make_spec(&spec, "nope", "gemm_bias_relu", "{}", NULL, 1, 2);
    assert_int_equal(fb_run_benchmark(&spec, NULL, NULL, &res, &err), FB_EUNSUPPORTED);
    assert_string_equal(err.field, "engine");
    fb_result_free(&res);
    fb_spec_free(&spec);
}

static void test_bad_param_names_field(void **state)
{
    fb_spec spec;
    fb_result res;
    fb_err err;

    make_spec(&spec, "native", "gemm_bias_relu", "{\"m\":-3}", NULL, 1, 2);
    assert_int_equal(fb_run_benchmark(&spec, NULL, NULL, &res, &err), FB_EINVAL);
    assert_string_equal(err.field, "params.m");
    fb_result_free(&res);
    fb_spec_free(&spec);
}

/* ---- fake engine: order and failures ---- */

static void run_fake(const char *const *variants, int warmup, int iterations, fb_result *res,
                     fb_code want)
{
    fb_spec spec;
    fb_err err;

    fake_log_n = 0;
    make_spec(&spec, "fake", "fake", "{\"time_budget_s\":0}", variants, warmup, iterations);
    assert_int_equal(fb_run_benchmark(&spec, NULL, NULL, res, &err), want);
    fb_spec_free(&spec);
}

static void test_interleaved_order(void **state)
{
    static const char *const vs[] = {"eager", "fused", "close", NULL};
    fb_result res;

    run_fake(vs, 3, 5, &res, FB_OK);
    /* 3 warmup rounds of v0 v1 v2, 5 timed rounds in turn forward and back
     * (v0 v1 v2, v2 v1 v0, ...), then one profile each. */
    assert_int_equal(fake_log_n, 8 * 3 + 3);
    for (int i = 0; i < 3 * 3; i++)
        assert_int_equal(fake_log[i], i % 3);
    for (int r = 0; r < 5; r++)
        for (int k = 0; k < 3; k++)
            assert_int_equal(fake_log[9 + 3 * r + k], r % 2 ? 2 - k : k);
    for (int v = 0; v < 3; v++)
        assert_int_equal(fake_log[24 + v], 100 + v);
    assert_int_equal(res.variants[2].status, FB_VS_OK);
    assert_true(res.variants[2].max_rel_error > 1e-6 && res.variants[2].max_rel_error < 1e-4);
    assert_int_equal(res.variants[0].kernels, 7);
    assert_true(res.plan_ms == 1.5);
    fb_result_free(&res);
}

/* Adaptive repetition: an unstable variant gets more interleaved rounds, up
 * to the time budget or 10x the rounds asked for, and the result says how
 * many and why it stopped; with a budget of 0 there are none. */
static void test_adaptive_rounds(void **state)
{
    static const char *const vs[] = {"eager", "noisy", NULL};
    fb_spec spec;
    fb_result res;
    fb_err err;

    make_spec(&spec, "fake", "fake", "{\"time_budget_s\":2}", vs, 1, 10);
    assert_int_equal(fb_run_benchmark(&spec, NULL, NULL, &res, &err), FB_OK);
    assert_true(res.variants[1].unstable);
    assert_true(res.repetition.rounds > 10 && res.repetition.rounds <= 100);
    assert_int_equal(res.repetition.rounds_requested, 10);
    assert_true(strcmp(res.repetition.stop, "max_rounds") == 0 ||
                strcmp(res.repetition.stop, "time_budget") == 0);
    for (int v = 0; v < 2; v++) {
        assert_int_equal(res.variants[v].n_samples, res.repetition.rounds);
        assert_int_equal(res.variants[v].latency.n, res.repetition.rounds);
    }
    assert_true(res.interference.timed_ms >= 0.1 * res.repetition.rounds / 2);
    assert_true(res.interference.invol_switches >= 0 && res.interference.minor_faults >= 0);
    cJSON *j = fb_result_to_json(&res);
    cJSON *rep = cJSON_GetObjectItem(j, "repetition");
    assert_int_equal(cJSON_GetObjectItem(rep, "rounds")->valueint, res.repetition.rounds);
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "interference"), "steal_ms"));
    cJSON_Delete(j);
    fb_result_free(&res);
    fb_spec_free(&spec);

    make_spec(&spec, "fake", "fake", "{\"time_budget_s\":0}", vs, 1, 10);
    assert_int_equal(fb_run_benchmark(&spec, NULL, NULL, &res, &err), FB_OK);
    assert_int_equal(res.repetition.rounds, 10);
    assert_string_equal(res.repetition.stop, "time_budget");
    assert_int_equal(res.variants[1].n_samples, 10);
    fb_result_free(&res);
    fb_spec_free(&spec);
}

/* Without NVML (no driver here) nothing is read and nothing is made up; with
 * it, a UUID no GPU has is refused. */
static void test_nvml_absent(void **state)
{
    fb_gpu_interference g = {.sm_mhz_min = NAN, .sm_mhz_max = NAN, .temp_c_max = NAN};
    (void)state;
    assert_null(fb_nvml_open("GPU-00000000-0000-0000-0000-000000000000"));
    assert_null(fb_nvml_open(""));
    fb_nvml_sample(NULL, &g);
    assert_int_equal(g.n_samples, 0);
    assert_true(isnan(g.sm_mhz_min) && g.throttle_reasons == 0);
    fb_nvml_close(NULL);
}

static void test_accuracy_and_output_checks(void **state)
{
    static const char *const vs[] = {"eager", "off", "zeros", "nan", NULL};
    fb_result res;

    run_fake(vs, 1, 4, &res, FB_OK);
    assert_int_equal(res.variants[0].status, FB_VS_OK);
    assert_int_equal(res.variants[1].status, FB_VS_ACCURACY_FAILED);
    assert_true(fabs(res.variants[1].max_rel_error - 0.01) < 1e-4);
    assert_non_null(strstr(res.variants[1].message, "tolerance"));
    assert_int_equal(res.variants[1].n_samples, 4); /* measured, just wrong */
    assert_int_equal(res.variants[2].status, FB_VS_ERROR);
    assert_non_null(strstr(res.variants[2].message, "all zeros"));
    assert_int_equal(res.variants[3].status, FB_VS_ERROR);
    assert_non_null(strstr(res.variants[3].message, "NaN"));
    /* Profiled: the ok one and the accuracy failure, not the broken outputs. */
    assert_int_equal(res.variants[1].kernels, 7);
    assert_int_equal(res.variants[2].kernels, -1);
    cJSON *j = fb_result_to_json(&res);
    cJSON *sp = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "comparison"), "speedup");
    assert_null(cJSON_GetObjectItem(sp, "off")); /* no speedup for a wrong answer */
    cJSON_Delete(j);
    fb_result_free(&res);
}

/* An engine's reference (an uploaded model's PyTorch output): the baseline
 * is checked against it, says so, and fails the gate when off, taking every
 * speedup with it. */
static void test_reference_gate(void **state)
{
    static const char *const hows[] = {"{\"time_budget_s\":0,\"reference\":\"exact\"}",
                                       "{\"time_budget_s\":0,\"reference\":\"off\"}"};
    for (int k = 0; k < 2; k++) {
        fb_spec spec;
        fb_result res;
        fb_err err;
        make_spec(&spec, "fake", "fake", hows[k], NULL, 1, 4);
        assert_int_equal(fb_run_benchmark(&spec, NULL, NULL, &res, &err), FB_OK);
        const fb_variant_result *e = find_variant(&res, "eager"), *f = find_variant(&res, "fused");
        assert_string_equal(e->extra_key, "reference");
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e->extra, "against")),
                            "the fake reference");
        assert_int_equal(f->status, FB_VS_OK); /* fused agrees with eager */
        assert_true(f->max_rel_error == 0.0);
        if (k == 0) {
            assert_int_equal(e->status, FB_VS_OK);
            assert_true(e->max_rel_error == 0.0);
            assert_true(isfinite(f->speedup));
        } else {
            assert_int_equal(e->status, FB_VS_ACCURACY_FAILED);
            assert_true(fabs(e->max_rel_error - 0.01 / 1.01) < 1e-4);
            assert_non_null(strstr(e->message, "vs the fake reference exceeds tolerance"));
            assert_true(isnan(f->speedup)); /* no speedup against a wrong baseline */
        }
        fb_result_free(&res);
        fb_spec_free(&spec);
    }
}

static void test_run_errors_others_go_on(void **state)
{
    static const char *const vs[] = {"eager", "broken", "late", "unsup", NULL};
    fb_result res;

    run_fake(vs, 2, 6, &res, FB_OK);
    assert_int_equal(res.variants[0].status, FB_VS_OK);
    assert_int_equal(res.variants[0].n_samples, 6);
    assert_int_equal(res.variants[1].status, FB_VS_ERROR);
    assert_non_null(strstr(res.variants[1].message, "kernel launch failed"));
    assert_int_equal(res.variants[1].n_samples, 0);
    assert_int_equal(res.variants[2].status, FB_VS_ERROR); /* 5th run: 2 warmup + 3 timed */
    assert_non_null(strstr(res.variants[2].message, "timing"));
    assert_int_equal(res.variants[2].n_samples, 0);
    assert_int_equal(res.variants[3].status, FB_VS_UNSUPPORTED);
    fb_result_free(&res);
}

static void test_no_variant_ran(void **state)
{
    static const char *const vs[] = {"unsup", "broken", NULL};
    fb_result res;

    run_fake(vs, 1, 3, &res, FB_EUNSUPPORTED);
    assert_int_equal(res.n_variants, 2);
    fb_result_free(&res);
}

static void test_baseline_first_when_no_eager(void **state)
{
    static const char *const vs[] = {"fused", "off", NULL};
    fb_result res;

    run_fake(vs, 0, 2, &res, FB_OK);
    assert_string_equal(res.baseline, "fused");
    assert_true(res.variants[0].max_rel_error == 0.0);
    assert_int_equal(res.variants[1].status, FB_VS_ACCURACY_FAILED);
    fb_result_free(&res);
}

/* ---- fb_max_rel_error and tolerance ---- */

static void test_max_rel_error(void **state)
{
    float ref[] = {1, 2, 4}, out[] = {1, 2, 3}, z[] = {0, 0, 0}, nz[] = {0, 1e-6f, 0};
    float nan_out[] = {1, NAN, 4};

    /* max|out - ref| = 1, max|ref| = 4 -> 0.25 */
    assert_true(fabs(fb_max_rel_error(out, ref, 3) - 0.25) < 1e-12);
    assert_true(fb_max_rel_error(ref, ref, 3) == 0.0);
    assert_true(fb_max_rel_error(z, z, 3) == 0.0);
    assert_true(isinf(fb_max_rel_error(nz, z, 3)));
    assert_true(isnan(fb_max_rel_error(nan_out, ref, 3)));
    assert_true(isnan(fb_max_rel_error(ref, nan_out, 3)));
    assert_true(fb_max_rel_error(out, ref, 0) == 0.0);
    /* Negative values count by magnitude: ref -8, diff 2 -> 0.25. */
    float rn[] = {-8, 1}, on[] = {-6, 1};
    assert_true(fabs(fb_max_rel_error(on, rn, 2) - 0.25) < 1e-12);
}

static void test_tolerance(void **state)
{
    assert_true(fb_run_tolerance("float32", false) == 1e-4);
    assert_true(fb_run_tolerance("float32", true) == 1e-3);
    assert_true(fb_run_tolerance("float16", false) == 1e-2);
    assert_true(fb_run_tolerance("bfloat16", true) == 2e-2);
}

/* The H100 image's open kernel module says "Open Kernel Module for x86_64"
 * before its version: the first GPU check read "for" as the driver. */
static void test_driver_version_line(void **state)
{
    char v[32];
    (void)state;
    fb_gpu_driver_from_line("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  "
                            "Release Build  (dvs-builder@U22-I3-AM01-33-3)  Thu Oct 9 2025\n",
                            v, sizeof v);
    assert_string_equal(v, "580.159.04");
    fb_gpu_driver_from_line("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 "
                            "07:09:40 UTC 2025\n",
                            v, sizeof v);
    assert_string_equal(v, "580.65.06");
    fb_gpu_driver_from_line("NVRM version: something else 1.2\n", v, sizeof v);
    assert_string_equal(v, "");
    fb_gpu_driver_from_line("Kernel Module for x86_64\n", v, sizeof v);
    assert_string_equal(v, "");
}

int main(void)
{
    /* the rules' groups are what these tests check (the cost planner's:
     * tests/models/test_planner.py), and the rules plan without timing */
    setenv("FUSIONBENCH_PLANNER", "rules", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_native_gemm_bias_relu),
        cmocka_unit_test(test_native_speedup_json),
        cmocka_unit_test(test_blas_core_for_cpu),
        cmocka_unit_test(test_unknown_workload_and_engine),
        cmocka_unit_test(test_bad_param_names_field),
        cmocka_unit_test(test_interleaved_order),
        cmocka_unit_test(test_adaptive_rounds),
        cmocka_unit_test(test_nvml_absent),
        cmocka_unit_test(test_accuracy_and_output_checks),
        cmocka_unit_test(test_reference_gate),
        cmocka_unit_test(test_run_errors_others_go_on),
        cmocka_unit_test(test_no_variant_ran),
        cmocka_unit_test(test_baseline_first_when_no_eager),
        cmocka_unit_test(test_max_rel_error),
        cmocka_unit_test(test_tolerance),
        cmocka_unit_test(test_driver_version_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
