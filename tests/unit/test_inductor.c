/* Unit tests of the inductor engine's C side without Python: a runner result
 * line → fb_result (statuses, statistics, kernel rows, the "inductor" object),
 * a spec → the runner request, and which environment entries the runner (and a
 * job's process) are started without. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fb_parse.h"
#include "ind_engine.h"
#include "ind_explain.h"

static const char *LINE =
    "{\"type\":\"result\",\"protocol\":1,\"model_build_ms\":12.5,"
    "\"env\":{\"torch\":\"2.15.0\",\"triton\":\"3.9.0\",\"threads\":2,\"cuda\":null},"
    "\"variants\":["
    "{\"name\":\"eager\",\"status\":\"ok\",\"samples_ms\":[3,1,2],\"max_rel_error\":0,"
    "\"peak_mem_bytes\":1000,\"peak_mem_method\":\"profiler_alloc_peak\","
    "\"profile\":{\"kernels\":5,\"kernel_time_ms\":1.5,\"busy_ms\":1.5,\"idle_ms\":0.25,"
    "\"categories_ms\":{\"gemm\":1.0,\"elementwise\":0.5},\"rows\":["
    "{\"name\":\"aten::conv2d\",\"count\":2,\"total_ms\":1.0,\"mean_ms\":0.5,"
    "\"ops\":[\"aten.conv2d\"],\"category\":\"gemm\",\"generated\":false}]}},"
    "{\"name\":\"inductor\",\"status\":\"ok\",\"samples_ms\":[1,1.5,0.5,1],"
    "\"max_rel_error\":2e-7,\"peak_mem_bytes\":500,"
    "\"inductor\":{\"fused_kernels\":2,\"fused_ops\":9,\"compile_cold_ms\":900,"
    "\"kernels\":[{\"name\":\"cpp_fused_relu_0\",\"aten_ops\":[\"aten.relu\"]}]},"
    "\"profile\":{\"kernels\":3,\"rows\":[{\"name\":\"cpp_fused_add_relu_0\",\"count\":1,"
    "\"total_ms\":0.2,\"mean_ms\":0.2,\"ops\":[\"aten.add\",\"aten.relu\"],"
    "\"category\":\"elementwise\",\"generated\":true}]}},"
    "{\"name\":\"inductor+cudagraphs\",\"status\":\"unsupported\",\"samples_ms\":[],"
    "\"message\":\"CUDA graphs need a CUDA device\"}]}";

static void convert(fb_result *res)
{
    cJSON *j = cJSON_Parse(LINE);
    fb_err err;

    assert_non_null(j);
    fb_err_clear(&err);
    fb_result_init(res);
    assert_int_equal(ind_result_from_json(j, res, &err), FB_OK);
    cJSON_Delete(j);
}

static void test_variants(void **state)
{
    fb_result res;

    (void)state;
    convert(&res);
    assert_int_equal(res.n_variants, 3);
    assert_string_equal(res.baseline, "eager");
    assert_int_equal(res.variants[0].status, FB_VS_OK);
    assert_int_equal(res.variants[0].n_samples, 3);
    assert_true(res.variants[0].latency.median == 2.0);
    assert_true(res.variants[1].latency.median == 1.0);
    assert_int_equal(res.variants[0].fused_kernels, 0); /* eager: known zero */
    assert_int_equal(res.variants[1].fused_kernels, 2);
    assert_int_equal(res.variants[1].fused_ops, 9);
    assert_int_equal(res.variants[0].kernels, 5);
    assert_true(res.variants[0].idle_ms == 0.25);
    assert_true(res.variants[0].categories_ms[FB_KC_GEMM] == 1.0);
    assert_int_equal(res.variants[0].peak_mem_bytes, 1000);
    assert_int_equal(res.variants[2].status, FB_VS_UNSUPPORTED);
    assert_string_equal(res.variants[2].message, "CUDA graphs need a CUDA device");
    assert_int_equal(res.variants[2].n_samples, 0);
    assert_string_equal(res.env.torch, "2.15.0");
    assert_string_equal(res.env.triton, "3.9.0");
    assert_true(res.plan_ms == 12.5);
    fb_result_free(&res);
}

static void test_kernel_rows(void **state)
{
    fb_result res;
    const fb_kernel_row *k;

    (void)state;
    convert(&res);
    assert_int_equal(res.variants[1].n_kernel_rows, 1);
    k = &res.variants[1].kernel_rows[0];
    assert_string_equal(k->name, "cpp_fused_add_relu_0");
    assert_int_equal(k->category, FB_KC_ELEMENTWISE);
    assert_int_equal(k->n_ops, 2);
    assert_string_equal(k->ops[1], "aten.relu");
    assert_int_equal(res.variants[0].kernel_rows[0].count, 2);
    fb_result_free(&res);
}

/* A job explained fusion by fusion: kernel a (8 MB and 2 MFLOP in 2 ms) holds
 * two decisions, kernel b (1 MB, 100 MFLOP in 4 ms) one, kernel c has no
 * counts, and a fourth decision names no kernel. */
static const char *COSTED =
    "{\"type\":\"result\",\"protocol\":1,\"env\":{\"threads\":2},\"variants\":["
    "{\"name\":\"eager\",\"status\":\"ok\",\"samples_ms\":[9,9.5,10]},"
    "{\"name\":\"inductor\",\"status\":\"ok\",\"samples_ms\":[7,7.5,8],"
    "\"inductor\":{\"fusion_explain\":{\"decisions\":4,\"fusions\":["
    "{\"id\":\"fuse-000000000001\",\"kernel\":\"cpp_fused_a_0\",\"verdict\":\"won\"},"
    "{\"id\":\"group-000000000002\",\"kernel\":\"cpp_fused_a_0\",\"verdict\":\"lost\"},"
    "{\"id\":\"fuse-000000000003\",\"kernel\":\"cpp_fused_b_1\",\"verdict\":\"won\"},"
    "{\"id\":\"fuse-000000000004\",\"kernel\":\"cpp_fused_c_2\",\"verdict\":\"won\"},"
    "{\"id\":\"fuse-000000000005\",\"kernel\":null,\"verdict\":\"won\"}]}},"
    "\"profile\":{\"kernels\":3,\"rows\":["
    "{\"name\":\"cpp_fused_a_0\",\"count\":2,\"total_ms\":2.0,\"mean_ms\":1.0,"
    "\"generated\":true,\"impl\":\"inductor\",\"bytes\":8e6,\"flops\":2e6},"
    "{\"name\":\"cpp_fused_b_1\",\"count\":1,\"total_ms\":4.0,\"mean_ms\":4.0,"
    "\"generated\":true,\"impl\":\"inductor\",\"bytes\":1e6,\"flops\":1e8},"
    "{\"name\":\"cpp_fused_c_2\",\"count\":1,\"total_ms\":1.0,\"mean_ms\":1.0,"
    "\"generated\":true}]}}]}";

static void costed(fb_result *res, double gbps, double gflops)
{
    cJSON *j = cJSON_Parse(COSTED);
    fb_err err;

    assert_non_null(j);
    fb_err_clear(&err);
    fb_result_init(res);
    res->env.roofline_gbps = gbps; /* as fb_env_capture leaves it before the runner */
    res->env.roofline_gflops = gflops;
    assert_int_equal(ind_result_from_json(j, res, &err), FB_OK);
    cJSON_Delete(j);
}

static double num_at(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

/* A generated kernel's counts become its row's bytes, FLOPs and roofline
 * bound (10 GB/s, 100 GFLOP/s: a's bound is its bytes', 0.8 ms; b's its
 * FLOPs', 1 ms); the explanation puts each decision's kernel against them,
 * and the fused kernels' time-weighted share counts a kernel once: (0.8 + 1)
 * / (2 + 4), not (0.8 + 0.8 + 1) / (2 + 2 + 4). */
static void test_roofline(void **state)
{
    fb_result res;
    fb_err err;
    cJSON *ex = NULL;

    (void)state;
    costed(&res, 10, 100);
    const fb_kernel_row *k = res.variants[1].kernel_rows;
    assert_string_equal(k[0].impl, "inductor");
    assert_true(fabs(k[0].roof_ms - 0.8) < 1e-12);
    assert_true(fabs(k[1].roof_ms - 1.0) < 1e-12);
    assert_string_equal(k[2].impl, ""); /* no counts: bytes, FLOPs, bound all unsaid */
    fb_err_clear(&err);
    assert_int_equal(ind_explain(&res, &ex, &err), FB_OK);
    /* eager -> inductor with no inductor-nofusion between: the step is the
     * compile and the fusion, and says so */
    const cJSON *st = cJSON_GetArrayItem(cJSON_GetObjectItem(ex, "ladder"), 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(ex, "ladder")), 1);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(st, "mechanism")),
                        "compiling without fusion (decompositions, lowering, the C++ codegen), "
                        "then Inductor's fusion");
    const cJSON *lim = cJSON_GetObjectItem(ex, "roofline");
    assert_true(num_at(lim, "gbps") == 10 && num_at(lim, "gflops") == 100);
    const cJSON *fx = cJSON_GetObjectItem(ex, "fusions");
    const cJSON *fs = cJSON_GetObjectItem(fx, "fusions");
    const cJSON *a = cJSON_GetObjectItem(cJSON_GetArrayItem(fs, 0), "costs");
    assert_true(fabs(num_at(a, "roofline_share") - 0.4) < 1e-12);
    assert_true(fabs(num_at(a, "gbps") - 4.0) < 1e-12); /* 8 MB in 2 ms */
    assert_true(fabs(num_at(a, "gflops") - 1.0) < 1e-12);
    assert_true(num_at(a, "bytes") == 8e6 && num_at(a, "flops") == 2e6);
    const cJSON *g = cJSON_GetObjectItem(cJSON_GetArrayItem(fs, 1), "costs");
    assert_true(fabs(num_at(g, "roofline_share") - 0.4) < 1e-12); /* the same kernel */
    const cJSON *b = cJSON_GetObjectItem(cJSON_GetArrayItem(fs, 2), "costs");
    assert_true(fabs(num_at(b, "roofline_share") - 0.25) < 1e-12);
    assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(fs, 3), "costs"));
    assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(fs, 4), "costs"));
    assert_true(fabs(num_at(fx, "fused_roofline_share") - 0.3) < 1e-12);
    assert_true(num_at(fx, "fused_kernels_ms") == 6.0);
    cJSON_Delete(ex);
    fb_result_free(&res);

    /* no roofline measured: the counts stay, the shares are unknown */
    costed(&res, 0, 0);
    assert_true(isnan(res.variants[1].kernel_rows[0].roof_ms));
    assert_int_equal(ind_explain(&res, &ex, &err), FB_OK);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(ex, "roofline")));
    fx = cJSON_GetObjectItem(ex, "fusions");
    a = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(fx, "fusions"), 0), "costs");
    assert_true(num_at(a, "gbps") == 4.0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(a, "roofline_share")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(fx, "fused_roofline_share")));
    cJSON_Delete(ex);
    fb_result_free(&res);
}

/* The "inductor" object rides along in the encoded result, with the memory
 * method added; speedup uses the medians. */
static void test_encoded(void **state)
{
    fb_result res;
    cJSON *j, *vs, *ind, *sp;

    (void)state;
    convert(&res);
    j = fb_result_to_json(&res);
    assert_non_null(j);
    vs = cJSON_GetObjectItem(j, "variants");
    ind = cJSON_GetObjectItem(cJSON_GetArrayItem(vs, 1), "inductor");
    assert_non_null(ind);
    assert_true(cJSON_GetObjectItem(ind, "compile_cold_ms")->valuedouble == 900);
    ind = cJSON_GetObjectItem(cJSON_GetArrayItem(vs, 0), "inductor");
    assert_string_equal(cJSON_GetObjectItem(ind, "peak_mem_method")->valuestring,
                        "profiler_alloc_peak");
    sp = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "comparison"), "speedup");
    assert_true(cJSON_GetObjectItem(sp, "inductor")->valuedouble == 2.0);
    assert_null(cJSON_GetObjectItem(sp, "inductor+cudagraphs"));
    cJSON_Delete(j);
    fb_result_free(&res);
}

static void test_bad_line(void **state)
{
    cJSON *j = cJSON_Parse("{\"type\":\"result\",\"variants\":[]}");
    fb_result res;
    fb_err err;

    (void)state;
    fb_err_clear(&err);
    fb_result_init(&res);
    assert_int_equal(ind_result_from_json(j, &res, &err), FB_EINVAL);
    cJSON_Delete(j);
    fb_result_free(&res);
}

static void test_request(void **state)
{
    fb_spec spec;
    fb_err err;
    const char *text = "{\"workload\":\"resnet18\",\"engine\":\"inductor\",\"device\":\"cpu\","
                       "\"variants\":[\"eager\",\"inductor\"],"
                       "\"params\":{\"threads\":2,\"image_size\":64}}";
    cJSON *r, *p;
    static const char *const defaults[] = {"eager", NULL};

    (void)state;
    fb_err_clear(&err);
    assert_int_equal(fb_spec_parse(text, strlen(text), &spec, &err), FB_OK);
    fb_spec_apply_defaults(&spec, "cpu", 1, defaults);
    r = ind_request_json(&spec);
    assert_non_null(r);
    assert_string_equal(cJSON_GetObjectItem(r, "model")->valuestring, "resnet18");
    assert_int_equal(cJSON_GetObjectItem(r, "threads")->valueint, 2);
    assert_int_equal(cJSON_GetObjectItem(r, "iterations")->valueint, 50);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "variants")), 2);
    p = cJSON_GetObjectItem(r, "params");
    assert_null(cJSON_GetObjectItem(p, "threads"));
    assert_int_equal(cJSON_GetObjectItem(p, "image_size")->valueint, 64);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(r, "explain")));
    cJSON_Delete(r);
    spec.explain = true; /* the runner explains fusion by fusion in the job's process */
    r = ind_request_json(&spec);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r, "explain")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(r, "roofline"))); /* none measured */
    cJSON_Delete(r);
    /* the worker's measured limits of the job's device go to the runner, so
     * its explanation holds kernels against them and measures none again */
    ind_engine.roofline_use("cuda", 4000, 500000);
    r = ind_request_json(&spec);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(r, "roofline"))); /* another device's */
    cJSON_Delete(r);
    ind_engine.roofline_use("cpu", 30.5, 142.75);
    r = ind_request_json(&spec);
    p = cJSON_GetObjectItem(r, "roofline");
    assert_true(cJSON_IsObject(p));
    assert_true(fabs(cJSON_GetObjectItem(p, "gbps")->valuedouble - 30.5) < 1e-12);
    assert_true(fabs(cJSON_GetObjectItem(p, "gflops")->valuedouble - 142.75) < 1e-12);
    cJSON_Delete(r);
    ind_engine.roofline_use("cpu", 0, 0);
    ind_engine.roofline_use("cuda", 0, 0);
    fb_spec_free(&spec);
}

/* The database's variables: DATABASE_URL and libpq's PG* (an upper-case
 * letter after PG), nothing else that merely starts alike. */
static void test_env_database(void **state)
{
    (void)state;
    assert_true(fb_env_is_database("DATABASE_URL=postgresql://u:p@h/db"));
    assert_true(fb_env_is_database("DATABASE_URL="));
    assert_true(fb_env_is_database("PGPASSWORD=secret"));
    assert_true(fb_env_is_database("PGPASSFILE=/home/u/.pgpass"));
    assert_true(fb_env_is_database("PGHOST=db"));
    assert_false(fb_env_is_database("DATABASE_URLS=x"));
    assert_false(fb_env_is_database("DATABASE=x"));
    assert_false(fb_env_is_database("PG=x"));
    assert_false(fb_env_is_database("PGx=1"));
    assert_false(fb_env_is_database("PG_COLOR=1"));
    assert_false(fb_env_is_database("PYTHONPATH=/x"));
    assert_false(fb_env_is_database("MY_DATABASE_URL=x"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variants), cmocka_unit_test(test_kernel_rows),
        cmocka_unit_test(test_encoded),  cmocka_unit_test(test_bad_line),
        cmocka_unit_test(test_request),  cmocka_unit_test(test_env_database),
        cmocka_unit_test(test_roofline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
