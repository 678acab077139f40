/* The machine's limits: measured by the native engine (nat_roofline), asked
 * of the engines through their interface (fb_roofline_measure), and carried by
 * a result's environment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <omp.h>
#include <string.h>

#include "fb_engines.h"
#include "fb_run.h"
#include "nat_roofline.h"

/* Plausible figures for any CPU this runs on (a triad above 0.5 GB/s, a GEMM
 * above 0.5 GFLOP/s, and below what any 2026 socket reaches), on the threads
 * asked for, with OpenMP's setting given back. */
static void test_measure(void **state)
{
    nat_roofline r;
    fb_err err = {0};
    int before = omp_get_max_threads();
    (void)state;

    assert_int_equal(nat_roofline_measure(1, &r, &err), FB_OK);
    assert_int_equal(r.threads, 1);
    assert_true(r.triad_gbps > 0.5 && r.triad_gbps < 2000);
    assert_true(r.gemm_gflops > 0.5 && r.gemm_gflops < 100000);
    assert_int_equal(omp_get_max_threads(), before);
}

/* Through the engine interface: the native engine measures the CPU; a device
 * no engine measures is refused, naming it. */
static void test_engines(void **state)
{
    double gbps = -1, gflops = -1;
    fb_err err = {0};
    (void)state;

    assert_int_equal(fb_roofline_measure("cpu", 1, &gbps, &gflops, &err), FB_OK);
    assert_true(gbps > 0.5 && gbps < 2000);
    assert_true(gflops > 0.5 && gflops < 100000);
    assert_int_equal(fb_roofline_measure("tpu", 1, &gbps, &gflops, &err), FB_EUNSUPPORTED);
    assert_true(gbps == 0 && gflops == 0);
    assert_string_equal(err.field, "device");
    assert_non_null(strstr(err.msg, "tpu"));
}

/* fb_env_capture records the roofline set for the job's device;
 * the result's env has it as "roofline", null when not measured. */
static void test_env(void **state)
{
    fb_env env;
    (void)state;

    fb_env_set_roofline("cpu", 0, 0);
    fb_env_capture(&env, "cpu");
    assert_true(env.roofline_gbps == 0);
    fb_env_set_roofline("cpu", 21.5, 300.25);
    fb_env_capture(&env, "cpu");
    assert_true(env.roofline_gbps == 21.5 && env.roofline_gflops == 300.25);
    fb_result r;
    fb_result_init(&r);
    r.env = env;
    cJSON *j = fb_result_to_json(&r);
    cJSON *roof = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "env"), "roofline");
    assert_true(cJSON_GetObjectItem(roof, "triad_gbps")->valuedouble == 21.5);
    assert_true(cJSON_GetObjectItem(roof, "gemm_gflops")->valuedouble == 300.25);
    cJSON_Delete(j);
    /* each device its own: a GPU's limits go to CUDA jobs, never to CPU ones */
    fb_env_set_roofline("cuda", 3000.0, 50000.0);
    fb_env_capture(&env, "cpu");
    assert_true(env.roofline_gbps == 21.5 && env.roofline_gflops == 300.25);
    fb_env_capture(&env, "cuda");
    assert_true(env.roofline_gbps == 3000.0 && env.roofline_gflops == 50000.0);
    fb_env_set_roofline("cuda", 0, 0);
    fb_env_set_roofline("cpu", 0, 0);
    fb_env_capture(&r.env, "cpu");
    j = fb_result_to_json(&r);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "env"), "roofline")));
    cJSON_Delete(j);
    fb_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_measure),
        cmocka_unit_test(test_engines),
        cmocka_unit_test(test_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
