/* fb_table: the result table.  The fixture is printed from its structs (as
 * fusionbench-run does) and after fb_result_to_json, text and
 * fb_result_from_json (as the client gets it from the server); the text is what
 * fusionbench-run printed from its structs before the table moved to proto/
 * (checked once against that code, byte for byte), plus the speedup's
 * interval, verdict, unstable marks and the noise lines of docs/METHOD.md. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fb_result.h"
#include "fb_spec.h"
#include "fb_table.h"

static double samples[3] = {1.0, 2.0, 3.0};

/* eager (ok, timed), fused (ok, timed, faster), broken (accuracy_failed, untimed). */
static void fixture(fb_spec *spec, fb_result *r)
{
    fb_spec_init(spec);
    snprintf(spec->workload, sizeof spec->workload, "gemm_bias_gelu");
    spec->params = cJSON_CreateObject();
    const char *vars[] = {"eager", "fused", NULL};
    fb_spec_apply_defaults(spec, "cpu", 4, vars);
    fb_result_init(r);
    r->n_variants = 3;
    r->plan_ms = 0.123456;
    snprintf(r->env.cpu, sizeof r->env.cpu, "Test CPU @ 2GHz");
    snprintf(r->env.blas, sizeof r->env.blas, "openblas 0.3");
    snprintf(r->env.hostname, sizeof r->env.hostname, "box");
    snprintf(r->env.fusionbench, sizeof r->env.fusionbench, "abc123");
    r->env.threads = 2;
    const char *names[] = {"eager", "fused", "broken"};
    for (int v = 0; v < 3; v++) {
        fb_variant_result *vr = &r->variants[v];
        fb_variant_result_init(vr, names[v]);
        if (v == 2) {
            vr->status = FB_VS_ACCURACY_FAILED;
            snprintf(vr->message, sizeof vr->message, "max rel error 0.5 over 1e-3");
            vr->max_rel_error = 0.5;
            continue;
        }
        vr->n_samples = 3;
        vr->samples_ms = malloc(sizeof samples);
        memcpy(vr->samples_ms, samples, sizeof samples);
        vr->latency.median = v == 0 ? 1.9 : 1.25;
        vr->latency.p90 = v == 0 ? 2.05 : 1.3;
        vr->latency.ci95_lo = vr->latency.median - 0.01;
        vr->latency.ci95_hi = vr->latency.median + 0.02;
        vr->latency.cv = 0.0123;
        vr->kernels = v == 0 ? 12 : 4;
        vr->fused_kernels = v == 0 ? 0 : 3;
        vr->fused_ops = v == 0 ? 0 : 9;
        vr->peak_mem_bytes = v == 0 ? 3 * 1024 * 1024 : 1536 * 1024;
        vr->max_rel_error = v == 0 ? 0.0 : 1.5e-7;
    }
    /* What fb_result_judge and the timed rounds would have said. */
    r->variants[0].unstable = true;
    r->variants[1].speedup = 1.52;
    r->variants[1].speedup_lo = 1.41;
    r->variants[1].speedup_hi = 1.625;
    r->variants[1].change = FB_CHANGE_FASTER;
    r->repetition = (fb_repetition){.rounds_requested = 50, .rounds = 75, .budget_s = 1.5};
    snprintf(r->repetition.stop, sizeof r->repetition.stop, "converged");
    r->interference = (fb_interference){.timed_ms = 812.4,
                                        .steal_ms = 12.5,
                                        .invol_switches = 40,
                                        .minor_faults = 7,
                                        .major_faults = 0};
}

static const char *want =
    "gemm_bias_gelu  engine native  device cpu  dtype float32  batch 4  warmup 10  iterations 50\n"
    "\n"
    "variant      status            median ms     p90 ms 95% CI of median           cv kernels "
    "fused k/ops  peak MiB   max rel  speedup  95% CI of speedup  verdict\n"
    "eager        ok, unstable         1.9000     2.0500 [1.8900, 1.9200]         1.2%      12 "
    "    0/0          3.00  0.00e+00   1.000x  -                  -\n"
    "fused        ok                   1.2500     1.3000 [1.2400, 1.2700]         1.2%       4 "
    "    3/9          1.50  1.50e-07   1.520x  [1.410, 1.625]     faster\n"
    "broken       accuracy_failed           -          - -                           -       - "
    "    -/-             -  5.00e-01        -  -                  -\n"
    "  broken: max rel error 0.5 over 1e-3\n"
    "\n"
    "baseline eager; plan 0.123 ms (not in latency); speedup = baseline median / median\n"
    "rounds: 75 of 50 asked (converged; extra time allowed 1.5 s)\n"
    "noise: timed 812 ms; CPU steal 12.5 ms; 40 involuntary context switches; page faults 7 "
    "minor, 0 major\n"
    "unstable: 1 variant(s) varied more than the device allows (cv over 10% CPU, 5% GPU); their "
    "figures move with the machine's load\n"
    "env: Test CPU @ 2GHz | 2 threads | openblas 0.3 | host box | fusionbench abc123\n";

static char *print_to_string(const fb_spec *spec, const fb_result *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    fb_table_print(f, spec, r);
    assert_int_equal(fclose(f), 0);
    return buf;
}

/* The client's path: the server's JSON text decoded into the structs. */
static void test_table_matches_run(void **state)
{
    fb_spec spec, ds;
    fb_result r, dr;
    fb_err err;
    fixture(&spec, &r);
    cJSON *js = fb_spec_to_json(&spec), *jr = fb_result_to_json(&r);
    char *ts = cJSON_PrintUnformatted(js), *tr = cJSON_PrintUnformatted(jr);
    cJSON *ps = cJSON_Parse(ts), *pr = cJSON_Parse(tr);
    fb_spec_init(&ds);
    assert_int_equal(fb_spec_from_json(ps, &ds, &err), FB_OK);
    assert_int_equal(fb_result_from_json(pr, &dr, &err), FB_OK);
    char *got = print_to_string(&ds, &dr);
    assert_string_equal(got, want);
    assert_false(fb_table_all_ok(&dr));
    free(got);
    /* fusionbench-run's path, its own structs: the same text. */
    got = print_to_string(&spec, &r);
    assert_string_equal(got, want);
    free(got);
    free(ts);
    free(tr);
    cJSON_Delete(js);
    cJSON_Delete(jr);
    cJSON_Delete(ps);
    cJSON_Delete(pr);
    fb_result_free(&r);
    fb_result_free(&dr);
    fb_spec_free(&spec);
    fb_spec_free(&ds);
}

/* A GPU job's clocks under the table. */
static void test_table_gpu_line(void **state)
{
    fb_spec spec;
    fb_result r;
    fixture(&spec, &r);
    r.interference.gpu =
        (fb_gpu_interference){3, 1755, 1980, 2619, 2619, 71, (1u << 2) | (1u << 6)};
    char *got = print_to_string(&spec, &r);
    assert_non_null(strstr(got, "gpu: SM clock 1755-1980 MHz; hottest 71 C; throttled by: "
                                "sw_power_cap, hw_thermal_slowdown\n"));
    free(got);
    fb_result_free(&r);
    fb_spec_free(&spec);
}

/* An uploaded model's eager output checked against PyTorch's: the table says
 * what its max rel is against. */
static void test_table_reference_line(void **state)
{
    fb_spec spec;
    fb_result r;
    fixture(&spec, &r);
    char *got = print_to_string(&spec, &r);
    assert_null(strstr(got, "max rel is against"));
    free(got);
    snprintf(r.variants[0].extra_key, sizeof r.variants[0].extra_key, "reference");
    r.variants[0].extra = cJSON_Parse("{\"against\": \"PyTorch eager (torch 2.15.0)\"}");
    got = print_to_string(&spec, &r);
    assert_non_null(strstr(got, "\neager's max rel is against PyTorch eager (torch 2.15.0)\n"));
    free(got);
    fb_result_free(&r);
    fb_spec_free(&spec);
}

/* No variants: the header, and not all ok; every variant ok: all ok. */
static void test_table_all_ok(void **state)
{
    fb_spec spec;
    fb_result r;
    fixture(&spec, &r);
    r.variants[2].status = FB_VS_OK;
    assert_true(fb_table_all_ok(&r));
    int n = r.n_variants;
    r.n_variants = 0;
    char *got = print_to_string(&spec, &r);
    assert_non_null(strstr(got, "variant      status"));
    assert_false(fb_table_all_ok(&r));
    free(got);
    r.n_variants = n;
    fb_result_free(&r);
    fb_spec_free(&spec);
}

/* fb_table_explain's text for an explanation given as JSON (malloc'd). */
static char *explain_text(const char *json)
{
    cJSON *ex = cJSON_Parse(json);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(ex);
    assert_non_null(f);
    fb_table_explain(f, ex);
    assert_int_equal(fclose(f), 0);
    cJSON_Delete(ex);
    return buf;
}

/* A GPU job's explanation names where its launch times came from: CUPTI with
 * its unmarked records, or the CUDA events and why not CUPTI; a CPU job's
 * (no "launch_times") prints no such line. */
static void test_table_launch_times(void **state)
{
    (void)state;
    static const struct {
        const char *json, *want;
    } cases[] = {
        {"{\"engine\":\"native\",\"rounds\":16,\"launch_times\":\"cupti_activity\","
         "\"unmarked_activity\":3}",
         "launch times: cupti_activity (3 activity records no launch mark named)\n"},
        {"{\"engine\":\"native\",\"rounds\":16,\"launch_times\":\"cuda_events\","
         "\"unmarked_activity\":0,\"launch_times_why\":\"CUPTI recorded none of the "
         "iteration's 4 launch marks\"}",
         "launch times: cuda_events (not CUPTI: CUPTI recorded none of the iteration's 4 launch "
         "marks)\n"},
        {"{\"engine\":\"native\",\"rounds\":16}", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *buf = explain_text(cases[i].json);
        if (cases[i].want)
            assert_non_null(strstr(buf, cases[i].want));
        else
            assert_null(strstr(buf, "launch times:"));
        free(buf);
    }
}

/* An inductor explanation with "fusions" (worker/engine/inductor/explain.py):
 * its summary lines, one row per fusion (unknowns as "-"; its kernel's share
 * of the roofline), the refused merges. */
static void test_table_inductor_fusions(void **state)
{
    (void)state;
    const char *text =
        "{\"engine\":\"inductor\",\"note\":\"n\",\"ladder\":[],\"kernels\":[],"
        "\"fusions\":{\"decisions\":2,\"budget_s\":60,\"layout_noise_ms\":0.05,"
        "\"recompiles_during_comparisons\":2,"
        "\"counts\":{\"won\":1,\"lost\":1,\"no_difference\":0,\"not_measured\":0},"
        "\"ladder_step_ms\":-1.2,\"sum_of_parts_ms\":-1.1,\"interaction_ms\":-0.1,"
        "\"all_lost_undone\":{\"ids\":[\"fuse-0123456789ab\"],\"recovered_ms\":1.3,"
        "\"ci95\":[-1.4,-1.2]},"
        "\"step\":{\"parts\":[{\"part\":\"decisions\",\"what\":\"all 2 fusion decisions "
        "undone at once\",\"saved_ms\":-1.25,\"ci95\":[-1.3,-1.2],\"verdict\":\"lost\","
        "\"peak_mem_delta_bytes\":54036000},"
        "{\"part\":\"knob\",\"what\":\"pattern_matcher=False\",\"saved_ms\":null,"
        "\"ci95\":null,\"verdict\":\"not_measured\"}],\"decisions_interaction_ms\":-0.15,"
        "\"interaction\":{\"causes\":[\"fuse-0123456789ab\",\"fuse-00000000000a\"],"
        "\"together\":[[\"group-abcdef012345\",\"fuse-000000000001\"]],"
        "\"tests\":[{},{},{}],\"stopped\":\"budget\",\"reason\":\"fresh_allocation\","
        "\"evidence\":{\"allocated_per_call\":{\"fused\":{\"bytes\":184140000},"
        "\"all_undone\":{\"bytes\":134820000}}}}},"
        "\"cost_model\":{\"spearman\":-0.5,\"bad_fusions\":[{\"id\":\"fuse-0123456789ab\"}],"
        "\"units\":[{},{},{}],\"spearman_units\":0.25},"
        "\"fused_roofline_share\":0.424,"
        "\"peak_interaction\":{\"extra_peak_bytes\":54036000,\"causes\":["
        "\"fuse-0123456789ab\",\"fuse-00000000000a\"],\"together\":[],\"tests\":[{},"
        "{\"kept\":[\"fuse-00000000000a\"],\"adds_bytes\":37896000}],"
        "\"stopped\":\"done\",\"evidence\":{\"allocated_per_call\":{\"fused\":{\"bytes\":"
        "184140000},\"all_undone\":{\"bytes\":130104000}}}},"
        "\"medians\":{\"eager\":14.977,\"inductor\":21.886},"
        "\"beside\":[{\"part\":\"beside\",\"knob\":\"layout_optimization\","
        "\"what\":\"layout_optimization=False\",\"saved_ms\":-12.2025,"
        "\"ci95\":[-12.454,-11.868],\"verdict\":\"lost\","
        "\"peak_mem_delta_bytes\":-1204224}],"
        "\"memory\":{\"inductor\":{\"peak_bytes\":1508736,\"held_by\":{"
        "\"aten::convolution\":1508736}},\"eager\":{\"peak_bytes\":2913664,\"held_by\":{"
        "\"aten::batch_norm\":1404928,\"aten::conv2d\":1508736}}},"
        "\"break_even\":{\"inductor\":{\"saving_ms_per_iter\":7.21,\"compile_cold_ms\":"
        "37060,\"compile_warm_ms\":2100,\"iterations_cold\":5139,\"iterations_warm\":292},"
        "\"inductor-nofusion\":{\"saving_ms_per_iter\":-0.5,\"compile_cold_ms\":40000,"
        "\"compile_warm_ms\":2000,\"iterations_cold\":null,\"iterations_warm\":null}},"
        "\"missed\":{\"top\":[{\"nodes\":[\"op1\",\"op4\"],\"shared_bytes\":4096,"
        "\"reason\":\"exceeds max fusion\"}]},"
        "\"fusions\":[{\"id\":\"fuse-0123456789ab\",\"kind\":\"vertical\",\"verdict\":\"lost\","
        "\"kernel_ms\":17.1,\"saved_ms\":-1.3,\"saved_ci95\":[-1.39,-1.26],"
        "\"peak_mem_delta_bytes\":12288,\"alloc_delta_bytes\":-36000000,"
        "\"predicted_shared_bytes\":4194304,\"reason\":\"kernel_slowdown\",\"kernel\":\"k0\","
        "\"why\":\"the fused kernel takes 17.1000 ms; its unfused kernel takes 15.8000 ms\","
        "\"costs\":{\"roofline_share\":0.424}},"
        "{\"id\":\"group-abcdef012345\",\"kind\":\"kernel_group\",\"verdict\":\"won\","
        "\"kernel_ms\":17.1,\"saved_ms\":0.13,\"saved_ci95\":[0.08,0.18],"
        "\"predicted_shared_bytes\":null,\"reason\":null,\"peak_interaction\":\"cause\","
        "\"kernel\":\"k0\",\"costs\":{\"roofline_share\":1.09}}]}}";
    char *buf = explain_text(text);
    /* a comparison that compiled while it ran is said, never hidden */
    assert_non_null(strstr(buf, "warning: 2 graphs compiled while comparisons ran: those "
                                "comparisons timed code other than they name"));
    /* the lost fusion's evidence in words; the won one has none */
    assert_non_null(strstr(buf, "why they lost:\n  fuse-0123456789ab kernel_slowdown: the fused "
                                "kernel takes 17.1000 ms; its unfused kernel takes 15.8000 ms\n"));
    assert_null(strstr(buf, "\n  group-abcdef012345 "));
    assert_non_null(strstr(buf, "Inductor's fusions, each undone (2 decisions; 1 won, 1 lost, 0 "
                                "no difference, 0 not measured in the 60 s budget; layout noise "
                                "0.050 ms)\n"));
    assert_non_null(strstr(buf, "saved -1.200 ms; the fusions measured alone add up to -1.100 ms; "
                                "interaction -0.100 ms\n"));
    assert_non_null(strstr(buf, "  all 2 fusion decisions undone at once "
                                "        -1.250  [-1.300, -1.200]     lost\n"));
    assert_non_null(strstr(buf, "  pattern_matcher=False                 "
                                "             -  -                    not_measured\n"));
    assert_non_null(strstr(buf, "  the decisions' interaction (3 keep-tests, stopped by the "
                                "budget): all undone at once is faster, none alone is\n"
                                "    any one of these kept fused, everything else unfused, costs "
                                "the loss: fuse-0123456789ab, fuse-00000000000a\n"
                                "    these cost it kept together, neither half alone: "
                                "group-abcdef012345, fuse-000000000001\n"
                                "    reason: fresh_allocation (allocated at each call: 184.1 MB "
                                "fused, 134.8 MB with every decision undone)\n"));
    assert_non_null(strstr(buf, "  the decisions together minus their sum alone: -0.150 ms\n"));
    assert_non_null(strstr(buf, "beside fusion, each choice of the compile switched off alone "
                                "(saved ms: > 0, inductor is faster with it); inductor is 6.909 "
                                "ms slower than eager:\n  layout_optimization=False"
                                "                    -12.203  [-12.454, -11.868]   lost\n"));
    assert_null(strstr(buf, "the step's rest"));
    assert_non_null(strstr(buf, "all 1 lost fusions undone at once: +1.300 ms recovered "
                                "[1.200, 1.400]\n"));
    assert_non_null(strstr(buf, "rank correlation -0.50 between predicted shared bytes and "
                                "measured saving; 1 predicted to help and measured to hurt\n"));
    assert_non_null(strstr(buf, "over the 3 units measured (a fusion alone, or a chunk within the "
                                "noise, its predictions summed): rank correlation 0.25\n"));
    assert_non_null(strstr(buf,
                           "fuse-0123456789ab  vertical     lost             17.1000   -1.3000  "
                           "[-1.390, -1.260]          4194304   42%  kernel_slowdown    k0\n"));
    assert_non_null(strstr(buf,
                           "group-abcdef012345 kernel_group won              17.1000   +0.1300  "
                           "[0.080, 0.180]                  - 109%*  extra peak: cause  k0\n"));
    /* past the roof: marked, and said what it means once, under the table */
    assert_non_null(strstr(buf, "k0\n* over 100% of the roofline: the roof is a measured stream "
                                "through memory (a triad on a CPU, a copy on a GPU); a kernel "
                                "whose data sat in cache, or that mostly reads, moves bytes "
                                "faster\nwhy they lost:"));
    assert_non_null(strstr(buf, "the kernels holding a fusion reach 42% of the roofline "
                                "(time-weighted; Inductor's byte and FLOP counts)\n"));
    assert_non_null(strstr(buf, "        4096 B  op1 + op4: exceeds max fusion\n"));
    assert_non_null(strstr(buf, "memory, each rung's peak in one iteration (allocated over what "
                                "was live before it) and what held it:\n"
                                "  eager                     2.8 MiB  aten::conv2d 1.4 MiB, "
                                "aten::batch_norm 1.3 MiB\n"
                                "  inductor                  1.4 MiB  aten::convolution 1.4 MiB\n"
                                "  what each part adds to inductor's peak: fuse-0123456789ab "
                                "+12.0 KiB; all fusion decisions +51.5 MiB; layout_optimization "
                                "-1.1 MiB (against it undone or switched off)\n"
                                "  what each decision adds to what inductor allocates at each "
                                "call: fuse-0123456789ab -34.3 MiB (against it undone alone)\n"
                                "  inductor's peak is 51.5 MiB above every decision undone, and "
                                "no decision undone alone lowers it by half of that (2 profiled "
                                "keep-tests):\n"
                                "    any one of these kept fused, everything else unfused, brings "
                                "it back (kept alone, it adds): fuse-0123456789ab, "
                                "fuse-00000000000a (+36.1 MiB)\n"
                                "    allocated at each call: 184.1 MB fused, 130.1 MB with every "
                                "decision undone\n"));
    /* the rungs in the ladder's order, the holders largest first, whatever
     * order the JSON holds them in (a server's JSONB has its own) */
    assert_non_null(strstr(buf, "compile against run time, inductor-nofusion: costs 0.500 ms an "
                                "iteration against eager; its compile never pays\n"
                                "compile against run time, inductor: saves 7.210 ms an iteration "
                                "against eager; its cold compile (37.1 s) pays after 5139 "
                                "iterations, a warm one (2.1 s) after 292\n"));
    free(buf);
    /* a budget of 0: nothing undone, so no noise and no parts (not "nan");
     * an op eager never called has no time per call: "-" */
    buf =
        explain_text("{\"engine\":\"inductor\",\"note\":\"n\",\"ladder\":[],\"kernels\":["
                     "{\"kernel\":\"cpp_fused_mean_relu_2\",\"count\":1,\"mean_ms\":0.0339,"
                     "\"ops\":[{\"op\":\"aten.relu\",\"extern\":true,\"eager_ms_per_call\":0.011},"
                     "{\"op\":\"aten.mean\",\"extern\":true,\"eager_ms_per_call\":null}]}],"
                     "\"fusions\":{\"decisions\":1,\"budget_s\":0,\"layout_noise_ms\":null,"
                     "\"counts\":{\"won\":0,\"lost\":0,\"no_difference\":0,\"not_measured\":1},"
                     "\"ladder_step_ms\":-1.307,\"sum_of_parts_ms\":null,\"interaction_ms\":null,"
                     "\"fusions\":[]}}");
    assert_non_null(strstr(buf, "1 not measured in the 0 s budget; layout noise - ms)\n"));
    assert_non_null(strstr(buf, "saved -1.307 ms; no fusion was measured alone, so there is no "
                                "sum of parts to set against it\n"));
    assert_null(strstr(buf, "nan"));
    assert_non_null(strstr(buf, "  relu* (0.011), mean* (-)\n"));
    assert_null(strstr(buf, "beside fusion")); /* no choice measured: no section */
    assert_null(strstr(buf, "warning:"));      /* none counted: nothing to warn of */
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_matches_run),    cmocka_unit_test(test_table_inductor_fusions),
        cmocka_unit_test(test_table_all_ok),         cmocka_unit_test(test_table_gpu_line),
        cmocka_unit_test(test_table_reference_line), cmocka_unit_test(test_table_launch_times),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
