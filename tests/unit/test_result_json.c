/* The result's decoder (fb_result_from_json, fb_kernel_rows_from_json) against
 * its encoder: real results of the CPU engine (a pattern, two zoo models with
 * their graphs and fusion groups, one explained) and a fixture with every
 * field a GPU and the inductor engine fill decode and encode back to the same
 * JSON, kernel rows too; a renamed, mistyped or unknown field fails, naming
 * its path. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fb_engines.h"
#include "fb_result.h"
#include "fb_run.h"
#include "fb_spec.h"

/* Runs workload on the CPU engine (few iterations) into *r. */
static void run_cpu(const char *workload, const char *params, bool explain, fb_result *r)
{
    const fb_engine *eng = fb_engine_find("native");
    const fb_workload_info *w = fb_engine_workload(eng, "cpu", workload);
    fb_spec spec;
    fb_err err;

    assert_non_null(w);
    fb_spec_init(&spec);
    snprintf(spec.workload, sizeof spec.workload, "%s", workload);
    snprintf(spec.engine, sizeof spec.engine, "native");
    snprintf(spec.device, sizeof spec.device, "cpu");
    spec.params = cJSON_Parse(params);
    spec.iterations = 3;
    spec.warmup = 1;
    spec.explain = explain;
    fb_spec_apply_defaults(&spec, "cpu", 1, w->variants);
    fb_err_clear(&err);
    assert_int_equal(fb_run_benchmark(&spec, NULL, NULL, r, &err), FB_OK);
    fb_spec_free(&spec);
}

/* decode(encode(r)) encodes to the same JSON; each variant's kernel rows too. */
static void round_trip(const fb_result *r)
{
    cJSON *a = fb_result_to_json(r), *b;
    fb_result back;
    fb_err err;

    assert_non_null(a);
    if (fb_result_from_json(a, &back, &err) != FB_OK)
        fail_msg("decode: %s (field %s)", err.msg, err.field);
    b = fb_result_to_json(&back);
    assert_non_null(b);
    if (!cJSON_Compare(a, b, true)) {
        char *x = cJSON_PrintUnformatted(a), *y = cJSON_PrintUnformatted(b);
        fail_msg("round trip differs:\n%s\n%s", x, y);
    }
    for (int v = 0; v < r->n_variants; v++) {
        cJSON *ka = fb_kernel_rows_to_json(&r->variants[v]), *kb;
        assert_int_equal(fb_kernel_rows_from_json(ka, "kernels", &back.variants[v], &err), FB_OK);
        assert_int_equal(back.variants[v].n_kernel_rows, r->variants[v].n_kernel_rows);
        kb = fb_kernel_rows_to_json(&back.variants[v]);
        assert_true(cJSON_Compare(ka, kb, true));
        cJSON_Delete(ka);
        cJSON_Delete(kb);
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    fb_result_free(&back);
}

static void test_real_results(void **state)
{
    static const struct {
        const char *workload, *params;
        bool explain;
        bool graph;
    } cases[] = {
        {"gemm_bias_gelu", "{\"m\":16,\"k\":16,\"n\":16}", false, false},
        {"resnet18", "{\"image\":32}", true, true},
        {"bert_base", "{\"seq\":8,\"layers\":1}", false, true},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fb_result r;
        run_cpu(cases[i].workload, cases[i].params, cases[i].explain, &r);
        assert_true(r.n_variants >= 2);
        assert_true(r.variants[0].n_kernel_rows > 0);
        assert_int_equal(r.graph != NULL, cases[i].graph);
        assert_int_equal(r.explain != NULL, cases[i].explain);
        if (cases[i].graph)
            assert_true(r.variants[1].n_fusion_groups > 0 && r.variants[1].node_groups);
        round_trip(&r);
        fb_result_free(&r);
    }
}

/* What a GPU run and the inductor engine add: clocks and throttle reasons,
 * DRAM bytes and why they are missing, copies, the engine's own object, a
 * failed variant with its message, no repetition (the engine timed alone). */
static void gpu_fixture(fb_result *r)
{
    static const double s[4] = {1.5, 1.25, 1.75, NAN};
    fb_result_init(r);
    snprintf(r->env.device_name, sizeof r->env.device_name, "NVIDIA H100 80GB HBM3");
    snprintf(r->env.cuda, sizeof r->env.cuda, "13.0");
    snprintf(r->env.torch, sizeof r->env.torch, "2.11.0+cu130");
    r->env.threads = 16;
    r->env.roofline_gbps = 3000.5;
    r->env.roofline_gflops = 51000;
    r->interference.timed_ms = 1234.5;
    r->interference.gpu =
        (fb_gpu_interference){3, 1755, 1980, 2619, 2619, 61, (1ull << 2) | (1ull << 40)};
    r->plan_ms = 5120;
    r->n_variants = 3;
    const char *names[] = {"eager", "inductor", "inductor+cudagraphs"};
    for (int v = 0; v < 3; v++) {
        fb_variant_result *vr = &r->variants[v];
        fb_variant_result_init(vr, names[v]);
        if (v == 2) {
            vr->status = FB_VS_UNSUPPORTED;
            snprintf(vr->message, sizeof vr->message, "CUDA graphs need a CUDA device");
            continue;
        }
        vr->n_samples = 4;
        vr->samples_ms = malloc(sizeof s);
        memcpy(vr->samples_ms, s, sizeof s);
        vr->latency.median = v ? 1.25 : 1.5;
        vr->kernels = v ? 40 : 120;
        vr->fused_kernels = v ? 30 : 0;
        vr->memcpy_ms = 0.01;
        vr->memcpy_bytes = 4096;
        vr->dropped_records = 0;
        vr->dram_reason[0] = '\0';
        snprintf(vr->dram_reason, sizeof vr->dram_reason, "the driver refused the range profiler");
        vr->categories_ms[FB_KC_GEMM] = 0.75;
        vr->categories_ms[FB_KC_ATTENTION] = 0.25;
        snprintf(vr->extra_key, sizeof vr->extra_key, "inductor");
        vr->extra = cJSON_Parse("{\"fused_kernels\":30,\"compile_cold_ms\":900}");
    }
    r->variants[1].speedup_lo = 1.1;
    r->variants[1].speedup_hi = 1.3;
    r->variants[1].change = FB_CHANGE_FASTER;
}

static void test_gpu_fields(void **state)
{
    fb_result r;
    (void)state;
    gpu_fixture(&r);
    round_trip(&r);
    fb_result_free(&r);
}

/* Decodes text, which must fail naming field. */
static void refused(const char *text, const char *field)
{
    cJSON *j = cJSON_Parse(text);
    fb_result r;
    fb_err err;

    assert_non_null(j);
    assert_int_equal(fb_result_from_json(j, &r, &err), FB_EINVAL);
    if (strcmp(err.field, field) != 0)
        fail_msg("want field %s, got %s (%s)", field, err.field, err.msg);
    assert_int_equal(r.n_variants, 0);
    cJSON_Delete(j);
}

/* The fixture's JSON with one substitution (the first occurrence of from). */
static char *mutated(const char *from, const char *to)
{
    fb_result r;
    gpu_fixture(&r);
    cJSON *j = fb_result_to_json(&r);
    char *text = cJSON_PrintUnformatted(j), *at = strstr(text, from);
    assert_non_null(at);
    char *out = malloc(strlen(text) + strlen(to) + 1);
    sprintf(out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    cJSON_Delete(j);
    free(text);
    fb_result_free(&r);
    return out;
}

static void test_refusals(void **state)
{
    static const struct {
        const char *from, *to, *field;
    } m[] = {
        {"\"latency_ms\"", "\"latency\"", "variants[0].latency_ms"},
        {"\"median\":1.5", "\"median\":\"1.5\"", "variants[0].latency_ms.median"},
        {"\"env\"", "\"environment\"", "env"},
        {"\"plan_ms\"", "\"planning_ms\"", "planning_ms"},
        {"\"status\":\"ok\"", "\"status\":\"great\"", "variants[0].status"},
        {"\"kernels\":120", "\"kernels\":-3", "variants[0].kernels"},
        {"\"inductor\":1.2", "\"fused\":1.2", "comparison.speedup.fused"},
        {"\"sw_power_cap\"", "\"overclocked\"", "interference.gpu.throttle_reasons[0]"},
        {"\"samples_ms\":[1.5", "\"samples_ms\":[true", "variants[0].samples_ms[0]"},
        {"\"name\":\"inductor\"", "\"name\":\"eager\"", "variants[1].name"},
        {"\"median\":1.5", "\"median\":1.5,\"median\":2.5", "variants[0].latency_ms"},
        {"\"median\":1.5", "\"median\":1e999", "variants[0].latency_ms.median"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        char *text = mutated(m[i].from, m[i].to);
        refused(text, m[i].field);
        free(text);
    }
    refused("[]", "");
    refused("{\"variants\":[],\"comparison\":{}}", "env");
}

static void test_kernel_rows_refused(void **state)
{
    cJSON *rows = cJSON_Parse("[{\"name\":\"k\",\"category\":\"gemm\",\"count\":1,"
                              "\"grid\":[1,1],\"block\":[0,0,0],\"ops\":[]}]");
    fb_variant_result v;
    fb_err err;

    (void)state;
    fb_variant_result_init(&v, "fused");
    assert_int_equal(fb_kernel_rows_from_json(rows, "kernels.fused", &v, &err), FB_EINVAL);
    assert_string_equal(err.field, "kernels.fused[0].grid");
    free(v.kernel_rows);
    cJSON_Delete(rows);
    /* a row naming a field twice: the decoder would read one, an encoder write both */
    rows = cJSON_Parse("[{\"name\":\"k\",\"category\":\"gemm\",\"name\":\"j\"}]");
    fb_variant_result_init(&v, "fused");
    assert_int_equal(fb_kernel_rows_from_json(rows, "kernels.fused", &v, &err), FB_EINVAL);
    assert_string_equal(err.field, "kernels.fused[0]");
    assert_non_null(strstr(err.msg, "names \"name\" twice"));
    free(v.kernel_rows);
    cJSON_Delete(rows);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_results),
        cmocka_unit_test(test_gpu_fields),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_kernel_rows_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
