/* srv_suite_explain: a suite's explanation summed from its jobs' (native
 * fusion groups; Inductor's fusion decisions undone). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "srv_suite_explain.h"

static const char *native_ex =
    "{\"groups\":[{\"verdict\":\"won\",\"fused_ms\":1,\"costs\":{\"roofline_share\":0.5}},"
    "{\"verdict\":\"lost\",\"delta_ms\":-0.2,\"fused_ms\":3,\"costs\":{\"roofline_share\":0.1},"
    "\"reason\":{\"code\":\"kernel_slowdown\"}}]}";

/* Two inductor jobs: one lost fusion each (one without a reason), their fused
 * kernels' roofline shares over different times, cost-model
 * points that rank exactly opposite (predicted more, saved less), units
 * (chunks included) that rank exactly alike, refused merges in both. */
static const char *ind_a =
    "{\"engine\":\"inductor\",\"fusions\":{\"fusions\":["
    "{\"verdict\":\"lost\",\"saved_ms\":-1.5,\"reason\":\"kernel_slowdown\"},"
    "{\"verdict\":\"won\",\"saved_ms\":2.0},{\"verdict\":\"not_measured\"}],"
    "\"all_lost_undone\":{\"recovered_ms\":1.25},"
    "\"fused_roofline_share\":0.6,\"fused_kernels_ms\":1,"
    "\"cost_model\":{\"points\":[{\"predicted_shared_bytes\":100,\"saved_ms\":1},"
    "{\"predicted_shared_bytes\":200,\"saved_ms\":0.5}],\"bad_fusions\":[{\"id\":\"x\"}],"
    "\"units\":[{\"predicted_shared_bytes\":100,\"saved_ms\":1},"
    "{\"decisions\":8,\"predicted_shared_bytes\":800,\"saved_ms\":3}]},"
    "\"missed\":{\"by_reason\":{\"no shared data\":{\"count\":2,\"shared_bytes\":64}},"
    "\"top\":[{\"nodes\":[\"a\",\"b\"],\"shared_bytes\":64,\"reason\":\"no shared data\"}]},"
    "\"beside\":[{\"knob\":\"layout_optimization\",\"what\":\"layout_optimization=False\",\"saved_"
    "ms\":-12.25,"
    "\"verdict\":\"lost\"}]}}";
static const char *ind_b =
    "{\"engine\":\"inductor\",\"fusions\":{\"fusions\":["
    "{\"verdict\":\"lost\",\"saved_ms\":-0.5,\"reason\":null},"
    "{\"verdict\":\"no_difference\",\"saved_ms\":0.01}],"
    "\"fused_roofline_share\":0.2,\"fused_kernels_ms\":3,"
    "\"cost_model\":{\"points\":[{\"predicted_shared_bytes\":300,\"saved_ms\":0.25}],"
    "\"bad_fusions\":[],\"units\":[{\"predicted_shared_bytes\":300,\"saved_ms\":2},"
    "{\"predicted_shared_bytes\":null,\"saved_ms\":9}]},"
    "\"missed\":{\"by_reason\":{\"no shared data\":{\"count\":1,\"shared_bytes\":4096},"
    "\"exceeds max fusion\":{\"count\":1,\"shared_bytes\":8}},"
    "\"top\":[{\"nodes\":[\"c\",\"d\"],\"shared_bytes\":4096,\"reason\":\"no shared data\"}]},"
    /* (stored before beside items carried their knob: only "what") */
    "\"beside\":[{\"what\":\"layout_optimization=False\",\"saved_ms\":1.5,"
    "\"verdict\":\"won\"},{\"knob\":\"freezing\",\"what\":\"freezing=True\",\"saved_ms\":null,"
    "\"verdict\":\"not_measured\"}]}}";

static double num(const cJSON *o, const char *path)
{
    char buf[128], *save = NULL;
    snprintf(buf, sizeof buf, "%s", path);
    for (char *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
        o = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(o) ? o->valuedouble : NAN;
}

static void test_inductor_suite(void **state)
{
    (void)state;
    cJSON *a = cJSON_Parse(ind_a), *b = cJSON_Parse(ind_b), *nat = cJSON_Parse(native_ex);
    const cJSON *ex[] = {a, NULL, b, nat};
    const char *w[] = {"resnet50", "gpt2", "mobilenet_v2", "resnet18"};
    cJSON *o = srv_suite_explain(w, ex, 4);
    assert_non_null(o);
    /* native: its own counts, roofline share time-weighted (0.5*1+0.1*3)/4 */
    assert_int_equal((int)num(o, "jobs"), 1);
    assert_int_equal((int)num(o, "lost"), 1);
    assert_float_equal(num(o, "fused_roofline_share"), 0.2, 1e-12);
    assert_float_equal(num(o, "lost_by_reason.kernel_slowdown.lost_ms"), -0.2, 1e-12);
    /* inductor */
    const cJSON *ind = cJSON_GetObjectItemCaseSensitive(o, "inductor");
    assert_int_equal((int)num(ind, "jobs"), 2);
    assert_int_equal((int)num(ind, "won"), 1);
    assert_int_equal((int)num(ind, "lost"), 2);
    assert_int_equal((int)num(ind, "no_difference"), 1);
    assert_int_equal((int)num(ind, "not_measured"), 1);
    assert_float_equal(num(ind, "all_lost_recovered_ms"), 1.25, 1e-12);
    /* the fused kernels' roofline share weighed by their time: (0.6*1+0.2*3)/4 */
    assert_float_equal(num(ind, "fused_roofline_share"), 0.3, 1e-12);
    assert_float_equal(num(ind, "lost_by_reason.kernel_slowdown.lost_ms"), -1.5, 1e-12);
    assert_float_equal(num(ind, "lost_by_reason.unexplained.fusions"), 1, 0);
    const cJSON *wl = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ind, "lost_by_reason"),
                                         "unexplained"),
        "workloads");
    assert_string_equal(cJSON_GetArrayItem(wl, 0)->valuestring, "mobilenet_v2");
    /* three points ranked exactly opposite: rho -1 */
    assert_int_equal((int)num(ind, "cost_model.points"), 3);
    assert_float_equal(num(ind, "cost_model.spearman"), -1.0, 1e-12);
    assert_int_equal((int)num(ind, "cost_model.bad_fusions"), 1);
    /* the units (a chunk of 8 among them; one without a prediction left out):
     * ranked alike, rho 1 */
    assert_int_equal((int)num(ind, "cost_model.units"), 3);
    assert_float_equal(num(ind, "cost_model.spearman_units"), 1.0, 1e-12);
    /* refused merges summed by reason, the top ones most bytes first */
    assert_float_equal(num(ind, "missed_by_reason.no shared data.count"), 3, 0);
    assert_float_equal(num(ind, "missed_by_reason.no shared data.shared_bytes"), 4160, 0);
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(ind, "missed_top");
    assert_int_equal(cJSON_GetArraySize(top), 2);
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(top, 0), "workload")->valuestring,
        "mobilenet_v2");
    /* beside fusion: the layout choice measured in both, costing resnet50
     * 12.25 ms and saving mobilenet_v2 1.5; one not measured: not counted */
    assert_int_equal((int)num(ind, "beside.layout_optimization.measured"), 2);
    assert_int_equal((int)num(ind, "beside.layout_optimization.lost"), 1);
    assert_float_equal(num(ind, "beside.layout_optimization.saved_ms"), -10.75, 1e-12);
    wl = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ind, "beside"),
                                         "layout_optimization"),
        "workloads");
    assert_int_equal(cJSON_GetArraySize(wl), 1);
    assert_string_equal(cJSON_GetArrayItem(wl, 0)->valuestring, "resnet50");
    assert_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ind, "beside"),
                                                 "freezing"));
    cJSON_Delete(o);
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(nat);
}

/* No job explained: JSON null; only native jobs: "inductor" null. */
static void test_none(void **state)
{
    (void)state;
    cJSON *nat = cJSON_Parse(native_ex), *plain = cJSON_Parse("{\"unavailable\":\"x\"}");
    const cJSON *none[] = {NULL, plain};
    const char *w[] = {"a", "b"};
    cJSON *o = srv_suite_explain(w, none, 2);
    assert_true(cJSON_IsNull(o));
    cJSON_Delete(o);
    const cJSON *one[] = {nat};
    o = srv_suite_explain(w, one, 1);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "inductor")));
    assert_int_equal((int)num(o, "won"), 1);
    cJSON_Delete(o);
    cJSON_Delete(nat);
    cJSON_Delete(plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inductor_suite),
        cmocka_unit_test(test_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
