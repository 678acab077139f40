/* fb_client_core: argument parsing, request bodies, --param values, URLs,
 * the saved login (modes, atomic replace) and what the client prints. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cl_args.h"
#include "cl_config.h"
#include "cl_fmt.h"
#include "cl_url.h"

#define ARGV(...)          ((char *[]){"fusionbench", __VA_ARGS__, NULL})
#define ARGC(...)          ((int)(sizeof((char *[]){"fusionbench", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(a, err, ...) cl_args_parse(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), (a), (err))

static void assert_json(const cJSON *got, const char *want)
{
    cJSON *w = cJSON_Parse(want);
    char *text = cJSON_PrintUnformatted(got);
    assert_non_null(w);
    if (!cJSON_Compare(got, w, true))
        fail_msg("got %s, want %s", text, want);
    free(text);
    cJSON_Delete(w);
}

static void test_args_submit(void **state)
{
    cl_args a;
    fb_err err;
    cJSON *spec = NULL;

    assert_int_equal(PARSE(&a, &err, "--server", "http://x", "submit", "softmax", "--variants",
                           "eager,fused", "--batch-size=8", "--param", "m=64", "--param",
                           "name=abc", "--param", "flag=true", "--param", "rules:=[\"a\"]",
                           "--param", "x=1e3", "--param", "v=0x10", "--label", "k=v=w", "--wait",
                           "--timeout", "30", "--json"),
                     FB_OK);
    assert_int_equal(a.cmd, CL_CMD_SUBMIT);
    assert_true(a.set[CL_O_WAIT] && a.set[CL_O_JSON]);
    assert_string_equal(a.val[CL_O_SERVER], "http://x");
    assert_int_equal(cl_args_job_spec(&a, &spec, &err), FB_OK);
    assert_json(spec, "{\"workload\":\"softmax\",\"batch_size\":8,\"timeout_s\":30,"
                      "\"variants\":[\"eager\",\"fused\"],\"params\":{\"m\":64,\"name\":\"abc\","
                      "\"flag\":true,\"rules\":[\"a\"],\"x\":1000,\"v\":\"0x10\"},"
                      "\"labels\":{\"k\":\"v=w\"}}");
    cJSON_Delete(spec);
}

static void test_args_errors(void **state)
{
    cl_args a;
    fb_err err;
    cJSON *spec = NULL;

    assert_int_equal(PARSE(&a, &err, "jobs", "--wait"), FB_EINVAL);
    assert_string_equal(err.msg, "--wait is not an option of jobs");
    assert_int_equal(PARSE(&a, &err, "submit", "w", "--nope"), FB_EINVAL);
    assert_string_equal(err.field, "--nope");
    assert_int_equal(PARSE(&a, &err, "submit", "w", "--engine"), FB_EINVAL);
    assert_string_equal(err.msg, "needs a value");
    assert_int_equal(PARSE(&a, &err, "submit"), FB_EINVAL);
    assert_int_equal(PARSE(&a, &err, "frob"), FB_EINVAL);
    assert_int_equal(PARSE(&a, &err, "suite", "drop"), FB_EINVAL);
    assert_string_equal(err.msg, "unknown suite command 'drop' (submit, show)");
    assert_int_equal(PARSE(&a, &err, "model"), FB_EINVAL);
    assert_string_equal(err.msg, "model needs a command (add, list, show, rm, get)");
    assert_int_equal(PARSE(&a, &err, "model", "add", "x"), FB_EINVAL);
    assert_int_equal(PARSE(&a, &err, "model", "list", "--visibility", "lab"), FB_EINVAL);
    assert_string_equal(err.msg, "--visibility is not an option of model list");
    assert_int_equal(PARSE(&a, &err, "model", "add", "n", "f.pt2", "--visibility", "lab"), FB_OK);
    assert_int_equal(a.cmd, CL_CMD_MODEL_ADD);
    assert_string_equal(a.pos[1], "f.pt2");
    assert_string_equal(a.val[CL_O_VISIBILITY], "lab");
    assert_int_equal(PARSE(&a, &err, "model", "get", "3", "out.pt2"), FB_OK);
    assert_int_equal(a.cmd, CL_CMD_MODEL_GET);
    assert_int_equal(PARSE(&a, &err, "status", "1", "2"), FB_EINVAL);
    assert_int_equal(PARSE(&a, &err, "jobs", "--all=yes"), FB_EINVAL);
    assert_int_equal(PARSE(&a, &err, "submit", "w", "--iterations", "0"), FB_OK);
    assert_int_equal(cl_args_job_spec(&a, &spec, &err), FB_EINVAL);
    assert_string_equal(err.msg, "--iterations: expected an integer in 1..100000, got '0'");
    assert_null(spec);
    assert_int_equal(PARSE(&a, &err, "submit", "w", "--param", "=3"), FB_OK);
    assert_int_equal(cl_args_job_spec(&a, &spec, &err), FB_EINVAL);
    assert_int_equal(PARSE(&a, &err, "submit", "w", "--variants", "a,,b"), FB_OK);
    assert_int_equal(cl_args_job_spec(&a, &spec, &err), FB_EINVAL);
    /* --help anywhere wins over missing arguments. */
    assert_int_equal(PARSE(&a, &err, "compare", "--help"), FB_OK);
    assert_int_equal(a.cmd, CL_CMD_COMPARE);
    assert_int_equal(PARSE(&a, &err, "--version"), FB_OK);
    assert_int_equal(PARSE(&a, &err, "--", "status", "-1"), FB_OK);
    assert_string_equal(a.pos[0], "-1");
    assert_false(cl_id_valid(a.pos[0]));
}

static void test_args_suite_compare(void **state)
{
    cl_args a;
    fb_err err;
    cJSON *body = NULL;
    char ref[64];

    assert_int_equal(PARSE(&a, &err, "suite", "submit", "nightly", "softmax", "pattern",
                           "--batch-sizes", "1,8", "--device", "cpu"),
                     FB_OK);
    assert_int_equal(a.cmd, CL_CMD_SUITE_SUBMIT);
    assert_int_equal(cl_args_suite(&a, &body, &err), FB_OK);
    assert_json(body, "{\"name\":\"nightly\",\"workloads\":[\"softmax\",\"pattern\"],"
                      "\"batch_sizes\":[1,8],\"device\":\"cpu\"}");
    cJSON_Delete(body);
    assert_int_equal(
        PARSE(&a, &err, "suite", "submit", "n", "resnet18", "--engine", "inductor", "--explain"),
        FB_OK);
    assert_int_equal(cl_args_suite(&a, &body, &err), FB_OK);
    assert_json(body, "{\"name\":\"n\",\"workloads\":[\"resnet18\"],\"engine\":\"inductor\","
                      "\"explain\":true}");
    cJSON_Delete(body);
    assert_int_equal(PARSE(&a, &err, "suite", "submit", "n", "w", "--batch-sizes", "1,x"), FB_OK);
    assert_int_equal(cl_args_suite(&a, &body, &err), FB_EINVAL);
    assert_int_equal(cl_compare_ref("42", ref, sizeof ref, &err), FB_OK);
    assert_string_equal(ref, "job:42");
    assert_int_equal(cl_compare_ref("suite:3", ref, sizeof ref, &err), FB_OK);
    assert_string_equal(ref, "suite:3");
    assert_int_equal(cl_compare_ref("run:3", ref, sizeof ref, &err), FB_EINVAL);
    assert_int_equal(cl_compare_ref("job:", ref, sizeof ref, &err), FB_EINVAL);
    assert_int_equal(cl_compare_ref("007", ref, sizeof ref, &err), FB_EINVAL);
}

static void test_url(void **state)
{
    char base[256];
    fb_err err;
    cl_url u;

    assert_int_equal(cl_url_normalize("http://h:8080//", base, sizeof base, &err), FB_OK);
    assert_string_equal(base, "http://h:8080");
    assert_int_equal(cl_url_normalize("ftp://h", base, sizeof base, &err), FB_EINVAL);
    assert_int_equal(cl_url_normalize("http://", base, sizeof base, &err), FB_EINVAL);
    assert_int_equal(cl_url_normalize("http://h/?a", base, sizeof base, &err), FB_EINVAL);
    cl_url_init(&u, "http://h", "/api/v1/workers");
    cl_url_seg(&u, "node a/gpu0");
    cl_url_query(&u, "workload", "a&b=c");
    cl_url_query(&u, "label", "k:v");
    assert_int_equal(cl_url_done(&u, &err), FB_OK);
    assert_string_equal(u.s,
                        "http://h/api/v1/workers/node%20a%2Fgpu0?workload=a%26b%3Dc&label=k%3Av");
    char big[CL_URL_MAX];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cl_url_query(&u, "x", big);
    assert_int_equal(cl_url_done(&u, &err), FB_ETOOBIG);
}

static void test_config(void **state)
{
    char tmpl[] = "/tmp/fb-client-test-XXXXXX", dir[CL_CONFIG_PATH_MAX], path[1200];
    cl_config c = {0}, back;
    fb_err err;
    struct stat st;

    assert_non_null(mkdtemp(tmpl));
    assert_int_equal(cl_config_dir(tmpl, "/home/x", dir, sizeof dir, &err), FB_OK);
    snprintf(path, sizeof path, "%s/fusionbench", tmpl);
    assert_string_equal(dir, path);
    assert_int_equal(cl_config_dir("relative", "/home/x", dir, sizeof dir, &err), FB_OK);
    assert_string_equal(dir, "/home/x/.config/fusionbench");
    assert_int_equal(cl_config_dir(NULL, NULL, dir, sizeof dir, &err), FB_EINVAL);

    snprintf(dir, sizeof dir, "%s/cfg/fusionbench", tmpl);
    assert_int_equal(cl_config_load(dir, &back, &err), FB_ENOTFOUND);
    snprintf(c.url, sizeof c.url, "http://h:1");
    snprintf(c.token, sizeof c.token, "fbu_secret");
    assert_int_equal(cl_config_save(dir, &c, &err), FB_OK);
    snprintf(c.token, sizeof c.token, "fbu_second");
    assert_int_equal(cl_config_save(dir, &c, &err), FB_OK); /* replaces */
    assert_int_equal(cl_config_load(dir, &back, &err), FB_OK);
    assert_string_equal(back.url, "http://h:1");
    assert_string_equal(back.token, "fbu_second");
    snprintf(path, sizeof path, "%s/config.json", dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    FILE *f = fopen(path, "w");
    fputs("{\"url\": 3}", f);
    fclose(f);
    assert_int_equal(cl_config_load(dir, &back, &err), FB_EINVAL);
    assert_int_equal(cl_config_remove(dir, &err), FB_OK);
    assert_int_equal(cl_config_remove(dir, &err), FB_ENOTFOUND);
    rmdir(dir);
    snprintf(path, sizeof path, "%s/cfg", tmpl);
    rmdir(path);
    rmdir(tmpl);

    char t1[] = "fbu_abc\r\n", t2[] = "\n", t3[] = "fbu a", t4[] = "fbu\x01";
    assert_true(cl_token_clean(t1));
    assert_string_equal(t1, "fbu_abc");
    assert_false(cl_token_clean(t2));
    assert_false(cl_token_clean(t3));
    assert_false(cl_token_clean(t4));
}

static void test_progress(void **state)
{
    char buf[256];
    cJSON *job = cJSON_Parse("{\"id\": 42, \"state\": \"running\", \"progress\": {\"phase\": "
                             "\"timing\", \"variant\": null, \"done\": 30, \"total\": 60}}");

    assert_true(cl_progress_fraction(cJSON_GetObjectItem(job, "progress")) == 0.5);
    cl_fmt_progress(buf, sizeof buf, job, 3.14);
    assert_string_equal(buf, "job 42 running   timing             [############............]  "
                             "50%    3.1s");
    cl_fmt_state_line(buf, sizeof buf, job, 3.14);
    assert_string_equal(buf, "job 42: running, timing 30/60 (3.1 s)");
    cl_fmt_state_key(buf, sizeof buf, job);
    assert_string_equal(buf, "running timing -");
    cJSON_Delete(job);
    job = cJSON_Parse("{\"id\": 7, \"state\": \"queued\", \"progress\": null}");
    cl_fmt_progress(buf, sizeof buf, job, 0);
    assert_string_equal(buf, "job 7 queued                       [........................]   - "
                             "   0.0s");
    cl_fmt_state_line(buf, sizeof buf, job, 0);
    assert_string_equal(buf, "job 7: queued (0.0 s)");
    assert_true(cl_progress_fraction(cJSON_GetObjectItem(job, "progress")) < 0);
    cJSON_Delete(job);
}

static void test_api_error(void **state)
{
    char buf[256];

    cl_fmt_api_error(buf, sizeof buf, 400,
                     "{\"error\":{\"code\":\"invalid_argument\",\"message\":\"bad\",\"field\":"
                     "\"variants[1]\"}}");
    assert_string_equal(buf, "400 invalid_argument: bad (field variants[1])");
    cl_fmt_api_error(buf, sizeof buf, 502, "<html>");
    assert_string_equal(buf, "502: <html>");
    cl_fmt_api_error(buf, sizeof buf, 503, "");
    assert_string_equal(buf, "503: (no body)");
}

static char *print_to_string(void (*pr)(FILE *, const cJSON *), const char *doc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cJSON *d = cJSON_Parse(doc);
    pr(f, d);
    fclose(f);
    cJSON_Delete(d);
    return buf;
}

static void test_tables(void **state)
{
    char *out = print_to_string(
        cl_fmt_jobs, "{\"items\":[{\"id\":5,\"state\":\"succeeded\",\"spec\":{\"workload\":"
                     "\"softmax\",\"engine\":\"native\",\"device\":\"cpu\",\"batch_size\":1},"
                     "\"owner\":null,\"created_at\":\"2026-01-01T00:00:00Z\"}],\"next_cursor\":"
                     "\"5\"}");
    assert_string_equal(out, "ID       STATE      WORKLOAD                 ENGINE    DEVICE BATCH "
                             "OWNER        CREATED\n"
                             "5        succeeded  softmax                  native    cpu        1 "
                             "-            2026-01-01T00:00:00Z\n"
                             "(more: next cursor 5)\n");
    free(out);
    out = print_to_string(cl_fmt_compare,
                          "{\"a\":\"job:1\",\"b\":\"job:2\",\"rows\":[{\"workload\":\"softmax\","
                          "\"batch_size\":1,\"variant\":\"fused\",\"a\":{\"median_ms\":1.0},"
                          "\"b\":{\"median_ms\":1.12},\"change\":0.12,\"p\":3e-15,\"flag\":"
                          "\"regression\"}],\"summary\":{\"rows\":1,\"regressions\":1,"
                          "\"improvements\":0,\"unmatched\":0}}");
    assert_non_null(strstr(out, "softmax                      1 fused                      "
                                "1.0000     1.1200   +12.0%     3e-15 regression\n"));
    assert_non_null(strstr(out, "rows 1, regressions 1, improvements 0, unmatched 0\n"));
    free(out);
    out = print_to_string(cl_fmt_suite,
                          "{\"id\":3,\"name\":\"n\",\"progress\":{\"total\":2,\"done\":2},"
                          "\"rows\":[],\"summary\":{\"baseline\":\"eager\",\"variants\":{\"fused\":"
                          "{\"geomean_speedup\":1.42,\"geomean_ci95\":[1.38,1.461],\"passed\":2,"
                          "\"total\":2,\"unstable\":1,\"faster\":1,\"slower\":0,"
                          "\"no_difference\":1}}}}");
    assert_non_null(strstr(out, "fused against eager: geomean speedup 1.420x [95% CI 1.380, "
                                "1.461], passed 2/2; 1 faster, 0 slower, 1 no difference, 1 "
                                "unstable\n"));
    assert_null(strstr(out, "explained")); /* no job explained */
    free(out);
    /* an explained suite: the native groups and Inductor's fusions summed,
     * the compile's layout choice beside fusion */
    out = print_to_string(
        cl_fmt_suite,
        "{\"id\":4,\"name\":\"cnn\",\"progress\":{\"total\":2,\"done\":2},\"rows\":[],"
        "\"summary\":{\"baseline\":\"eager\",\"variants\":{},\"explain\":{\"jobs\":1,"
        "\"won\":3,\"lost\":1,\"within_noise\":2,\"fused_roofline_share\":0.25,"
        "\"lost_by_reason\":{\"kernel_slowdown\":{\"groups\":1,\"lost_ms\":-0.2,"
        "\"workloads\":[\"mlp\"]}},\"inductor\":{\"jobs\":2,\"won\":1,\"lost\":0,"
        "\"no_difference\":4,\"not_measured\":8,\"fused_roofline_share\":0.21,"
        "\"cost_model\":{\"units\":3,\"spearman_units\":0.5},\"lost_by_reason\":{},"
        "\"beside\":{\"layout_optimization\":{\"measured\":2,\"saved_ms\":-15.627,"
        "\"lost\":2,\"workloads\":[\"resnet18\",\"tiny_cnn\"]}}}}}}");
    assert_non_null(strstr(out, "fusion groups explained (1 jobs): 3 won, 1 lost, 2 within noise; "
                                "fused kernels on the roofline 25%\n  lost by kernel_slowdown: 1 "
                                "groups, -0.200 ms (mlp)\n"));
    assert_non_null(strstr(out, "Inductor's fusions explained (2 jobs): 1 won, 0 lost, 4 no "
                                "difference, 8 not measured; cost model rank correlation 0.50 over "
                                "3 units; fused kernels on the roofline 21%\n"));
    assert_non_null(strstr(out, "beside fusion: layout_optimization, switched off alone in 2 "
                                "jobs, cost inductor 15.627 ms in all; lost in 2 "
                                "(resnet18,tiny_cnn)\n"));
    free(out);
    out = print_to_string(cl_fmt_models,
                          "{\"items\":[{\"id\":7,\"name\":\"mine\",\"owner\":\"alice\","
                          "\"visibility\":\"lab\",\"status\":\"preparing\",\"size\":2500000,"
                          "\"created_at\":\"2026-11-26T05:00:00Z\"}]}");
    assert_string_equal(out, "    ID NAME                     OWNER        VISIBLE   STATUS     "
                             "      SIZE UPLOADED\n"
                             "     7 mine                     alice        lab       preparing  "
                             "   2.4 MiB 2026-11-26T05:00:00Z\n");
    free(out);
    out = print_to_string(cl_fmt_model, "{\"id\":7,\"name\":\"mine\",\"owner\":null,"
                                        "\"visibility\":\"private\",\"status\":\"invalid\","
                                        "\"error\":\"not a zip\",\"format\":\"torch.export\","
                                        "\"size\":12,\"sha256\":\"ab\"}");
    assert_non_null(strstr(out, "model 7: mine (no owner, private)\n"));
    assert_non_null(strstr(out, "  status   invalid: not a zip\n"));
    assert_non_null(strstr(out, "  archive  torch.export, 12 B, sha256 ab\n"));
    free(out);
    /* ready: what preparing found, and how to benchmark it */
    out = print_to_string(
        cl_fmt_model, "{\"id\":9,\"name\":\"net\",\"status\":\"ready\",\"info\":{"
                      "\"inputs\":[{\"name\":\"x\",\"shape\":[2,3,16,16],\"dtype\":\"float32\","
                      "\"dynamic_dims\":[0]}],\"outputs\":[{\"shape\":[2,10],\"dtype\":"
                      "\"float32\"}],\"parameters\":19898,\"weight_bytes\":79864,"
                      "\"dynamic_batch\":true,\"eager\":{\"median_ms\":1.25,\"runs\":3},"
                      "\"ops\":{\"aten.conv2d.default\":3,\"aten.linear.default\":5},"
                      "\"native\":{\"ok\":false,\"why\":\"no mapping for aten.cumsum (x2)\"}}}");
    assert_non_null(strstr(out, "  input    x [2, 3, 16, 16] float32 (dynamic dims)\n"));
    assert_non_null(strstr(out, "  output   [2, 10] float32\n"));
    assert_non_null(strstr(out, "  params   19898 (78.0 KiB of weights); batch dynamic\n"));
    assert_non_null(strstr(out, "  eager    1.250 ms on the CPU (median of 3)\n"));
    assert_non_null(strstr(out, "  ops      aten.linear.default x5 aten.conv2d.default x3\n"));
    assert_non_null(strstr(out, "  native   cannot: no mapping for aten.cumsum (x2)\n"));
    assert_non_null(strstr(out, "  inputs   seeded random values\n"));
    assert_non_null(
        strstr(out, "  submit   fusionbench submit model.9 --engine inductor --explain --wait\n"));
    assert_null(strstr(out, "--engine native"));
    free(out);
    /* the native engine runs it from its form; the inputs are the uploader's */
    out = print_to_string(cl_fmt_model,
                          "{\"id\":9,\"name\":\"net\",\"status\":\"ready\",\"info\":{"
                          "\"input_values\":{\"source\":\"uploaded\"},\"native\":{\"ok\":true,"
                          "\"nodes\":36,\"batch_dynamic\":true,\"form\":{\"bytes\":92600}}}}");
    assert_non_null(
        strstr(out, "  native   converts to 36 graph nodes, any batch; native form 90.4 KiB\n"));
    assert_non_null(strstr(out, "  inputs   yours, uploaded with the archive\n"));
    assert_non_null(
        strstr(out, "           fusionbench submit model.9 --engine native --explain --wait\n"));
    free(out);
    /* the catalog: each workload's own params, the engine's once below;
     * "any" for an entry that declares none */
    out = print_to_string(cl_fmt_workloads,
                          "{\"items\":[{\"name\":\"softmax\",\"engine\":\"native\","
                          "\"params\":[\"rows\",\"cols\",\"threads\",\"seed\"]},"
                          "{\"name\":\"resnet18\",\"engine\":\"native\",\"params\":"
                          "[\"image\",\"threads\",\"seed\"]},{\"name\":\"resnet18\","
                          "\"engine\":\"inductor\"},{\"name\":\"model.3\",\"engine\":"
                          "\"native\",\"params\":[\"threads\",\"seed\"]}]}");
    assert_non_null(strstr(out, " rows,cols\n"));
    assert_non_null(strstr(out, " image\n"));
    assert_non_null(strstr(out, " any\n"));
    assert_non_null(strstr(out, " -\n")); /* only the engine's */
    assert_non_null(strstr(out, "\nevery native workload also takes: threads,seed\n"));
    assert_null(strstr(out, "every inductor"));
    free(out);
    /* Wrong shapes print, never crash. */
    const char *bad[] = {"null", "[]", "{\"items\": {}}", "{\"items\": [1, null, {\"spec\": 3}]}",
                         "{\"rows\": [{\"variants\": [1]}], \"progress\": 5}"};
    void (*printers[])(FILE *, const cJSON *) = {
        cl_fmt_jobs,      cl_fmt_results,     cl_fmt_compare, cl_fmt_suite, cl_fmt_workers,
        cl_fmt_workloads, cl_fmt_job_summary, cl_fmt_models,  cl_fmt_model};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (size_t p = 0; p < sizeof printers / sizeof printers[0]; p++)
            free(print_to_string(printers[p], bad[i]));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_args_submit),
        cmocka_unit_test(test_args_errors),
        cmocka_unit_test(test_args_suite_compare),
        cmocka_unit_test(test_url),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_progress),
        cmocka_unit_test(test_api_error),
        cmocka_unit_test(test_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
