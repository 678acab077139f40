/* Unit tests of the server's pure functions: srv_parse (paths, ids, query
 * values, Content-Type, static paths) and srv_catalog (POST /jobs's rules). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "srv_catalog.h"
#include "srv_parse.h"

static void test_path_literal(void **state)
{
    assert_true(srv_path_match("/", "/", NULL));
    assert_false(srv_path_match("/", "/x", NULL));
    assert_true(srv_path_match("/api/v1/jobs", "/api/v1/jobs", NULL));
    assert_false(srv_path_match("/api/v1/jobs", "/api/v1/jobs/", NULL));
    assert_false(srv_path_match("/api/v1/jobs", "/api/v1/job", NULL));
    assert_false(srv_path_match("/api/v1/jobs", "/api/v1/jobsx", NULL));
    assert_false(srv_path_match("/api/v1/jobs", "api/v1/jobs", NULL));
    assert_false(srv_path_match("/healthz", "", NULL));
}

static void test_path_captures(void **state)
{
    srv_caps c;
    const char *p = "/api/v1/jobs/42/cancel";

    assert_true(srv_path_match("/api/v1/jobs/{id}/cancel", p, &c));
    assert_int_equal(c.n, 1);
    assert_int_equal(c.cap[0].off, 13);
    assert_int_equal(c.cap[0].len, 2);
    assert_false(srv_path_match("/api/v1/jobs/{id}", p, &c));
    assert_false(srv_path_match("/api/v1/jobs/{id}/cancel", "/api/v1/jobs//cancel", &c));
    assert_false(srv_path_match("/api/v1/jobs/{id}", "/api/v1/jobs/", &c));
    assert_true(srv_path_match("/static/{*}", "/static/css/a.css", &c));
    assert_int_equal(c.n, 1);
    assert_string_equal("/static/css/a.css" + c.cap[0].off, "css/a.css");
    assert_false(srv_path_match("/static/{*}", "/static/", &c));
    assert_false(srv_path_match("/static/{*}", "/static", &c));
}

static void test_path_too_long(void **state)
{
    char long_path[SRV_PATH_MAX + 10];
    memset(long_path, 'a', sizeof long_path);
    long_path[0] = '/';
    long_path[sizeof long_path - 1] = '\0';
    assert_false(srv_path_match("/static/{*}", long_path, NULL));
}

static void test_parse_id(void **state)
{
    int64_t id = -5;
    assert_true(srv_parse_id("42", 2, &id));
    assert_int_equal(id, 42);
    assert_true(srv_parse_id("9223372036854775807", 19, &id));
    assert_true(id == INT64_MAX);
    id = 7;
    assert_false(srv_parse_id("9223372036854775808", 19, &id));
    assert_false(srv_parse_id("0", 1, &id));
    assert_false(srv_parse_id("-1", 2, &id));
    assert_false(srv_parse_id("+1", 2, &id));
    assert_false(srv_parse_id("1a", 2, &id));
    assert_false(srv_parse_id(" 1", 2, &id));
    assert_false(srv_parse_id("", 0, &id));
    assert_false(srv_parse_id("12345678901234567890", 20, &id));
    assert_int_equal(id, 7);                  /* untouched on failure */
    assert_true(srv_parse_id("123", 1, &id)); /* only len bytes are read */
    assert_int_equal(id, 1);
}

static void test_int_range(void **state)
{
    long v = 0;
    assert_true(srv_parse_int_range("1", 1, 200, &v));
    assert_int_equal(v, 1);
    assert_true(srv_parse_int_range("200", 1, 200, &v));
    assert_int_equal(v, 200);
    assert_false(srv_parse_int_range("201", 1, 200, &v));
    assert_false(srv_parse_int_range("0", 1, 200, &v));
    assert_true(srv_parse_int_range("0", 0, 65535, &v));
    assert_int_equal(v, 0);
    assert_false(srv_parse_int_range("", 1, 200, &v));
    assert_false(srv_parse_int_range("5x", 1, 200, &v));
    assert_false(srv_parse_int_range("-5", -10, 200, &v)); /* no sign accepted */
    assert_false(srv_parse_int_range("99999999999999999999", 1, 200, &v));
    assert_false(srv_parse_int_range(NULL, 1, 200, &v));
}

static void test_label(void **state)
{
    char k[8] = "", v[8] = "";
    assert_true(srv_parse_label("project:demo", 7, k, sizeof k, v, sizeof v));
    assert_string_equal(k, "project");
    assert_string_equal(v, "demo");
    assert_true(srv_parse_label("a:b:c", 7, k, sizeof k, v, sizeof v));
    assert_string_equal(k, "a");
    assert_string_equal(v, "b:c");
    assert_false(srv_parse_label("nocolon", 7, k, sizeof k, v, sizeof v));
    assert_false(srv_parse_label(":v", 7, k, sizeof k, v, sizeof v));
    assert_false(srv_parse_label("k:", 7, k, sizeof k, v, sizeof v));
    assert_false(srv_parse_label("toolongkey:v", 7, k, sizeof k, v, sizeof v));
    assert_false(srv_parse_label("k:toolongvalue", 7, k, sizeof k, v, sizeof v));
    assert_string_equal(k, "a"); /* untouched on failure */
    /* characters, not bytes: 3 two-byte characters fit a limit of 3 */
    char kk[16], vv[16];
    assert_true(srv_parse_label("\xc3\xa9\xc3\xa9\xc3\xa9:x", 3, kk, sizeof kk, vv, sizeof vv));
    assert_string_equal(kk, "\xc3\xa9\xc3\xa9\xc3\xa9");
    assert_false(
        srv_parse_label("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9:x", 3, kk, sizeof kk, vv, sizeof vv));
    assert_false(srv_parse_label("k:abcd", 3, kk, sizeof kk, vv, sizeof vv));
    assert_int_equal(srv_utf8_chars("a\xc3\xa9\xf0\x9f\x98\x8d", 7), 3);
}

static void test_state(void **state)
{
    assert_true(srv_state_valid("queued"));
    assert_true(srv_state_valid("canceled"));
    assert_false(srv_state_valid("cancelled"));
    assert_false(srv_state_valid("QUEUED"));
    assert_false(srv_state_valid(""));
    assert_false(srv_state_valid(NULL));
}

static void test_content_type(void **state)
{
    assert_true(srv_content_type_is_json("application/json"));
    assert_true(srv_content_type_is_json("Application/JSON"));
    assert_true(srv_content_type_is_json("application/json; charset=utf-8"));
    assert_true(srv_content_type_is_json("application/json;charset=\"UTF-8\""));
    assert_true(srv_content_type_is_json(" application/json ; foo=bar ; charset=utf8"));
    assert_false(srv_content_type_is_json("application/json; charset=latin1"));
    assert_false(srv_content_type_is_json("application/jsonx"));
    assert_false(srv_content_type_is_json("application/json-patch+json"));
    assert_false(srv_content_type_is_json("text/plain"));
    assert_false(srv_content_type_is_json("application/json; garbage"));
    assert_false(srv_content_type_is_json(""));
    assert_false(srv_content_type_is_json(NULL));
}

static void test_static_path(void **state)
{
    assert_true(srv_static_path_ok("app.js"));
    assert_true(srv_static_path_ok("css/style.css"));
    assert_true(srv_static_path_ok("a.b-c_d/e.f"));
    assert_false(srv_static_path_ok(""));
    assert_false(srv_static_path_ok(".."));
    assert_false(srv_static_path_ok("../etc/passwd"));
    assert_false(srv_static_path_ok("css/../../x"));
    assert_false(srv_static_path_ok("/etc/passwd"));
    assert_false(srv_static_path_ok(".git/config"));
    assert_false(srv_static_path_ok("a//b"));
    assert_false(srv_static_path_ok("dir/"));
    assert_false(srv_static_path_ok("a b"));
    assert_false(srv_static_path_ok("a\\b"));
    assert_false(srv_static_path_ok("a%2e"));
}

static void test_worker_action(void **state)
{
    char id[16], act[8];

    assert_true(srv_parse_worker_action("host/gpu0/drain", id, sizeof id, act, sizeof act));
    assert_string_equal(id, "host/gpu0");
    assert_string_equal(act, "drain");
    assert_true(srv_parse_worker_action("host%2Fcpu0/drain", id, sizeof id, act, sizeof act));
    assert_string_equal(id, "host/cpu0");
    assert_true(srv_parse_worker_action("a%2f%41/x", id, sizeof id, act, sizeof act));
    assert_string_equal(id, "a/A");
    assert_false(srv_parse_worker_action("drain", id, sizeof id, act, sizeof act));
    assert_false(srv_parse_worker_action("/drain", id, sizeof id, act, sizeof act));
    assert_false(srv_parse_worker_action("host/", id, sizeof id, act, sizeof act));
    assert_false(srv_parse_worker_action("a%2/drain", id, sizeof id, act, sizeof act));
    assert_false(srv_parse_worker_action("a%zz/drain", id, sizeof id, act, sizeof act));
    assert_false(srv_parse_worker_action("a%20b/drain", id, sizeof id, act, sizeof act));
    assert_false(srv_parse_worker_action("a%00b/drain", id, sizeof id, act, sizeof act));
    assert_false(srv_parse_worker_action("host/toolongaction", id, sizeof id, act, sizeof act));
    assert_false(srv_parse_worker_action("0123456789abcdef/drain", id, sizeof id, act, sizeof act));
    assert_true(srv_parse_worker_action("0123456789abcde/drain", id, sizeof id, act, sizeof act));
    assert_false(srv_parse_worker_action(NULL, id, sizeof id, act, sizeof act));
}

static void test_rfc3339(void **state)
{
    static const char *const good[] = {
        "2026-11-22",
        "2024-02-29",
        "2026-11-22T10:00:00Z",
        "2026-11-22 10:00:00Z",
        "2026-11-22t23:59:60z",
        "2026-11-22T10:00:00.123456+01:00",
        "0001-01-01T00:00:00-12:30",
    };
    static const char *const bad[] = {
        "2026-13-45",
        "2026-02-29",
        "2100-02-29",
        "2026-04-31",
        "2026-00-10",
        "2026-11-00",
        "0000-01-01",
        "2026-1-22",
        "2026/11/22",
        "2026-11-22T",
        "2026-11-22T24:00:00Z",
        "2026-11-22T10:60:00Z",
        "2026-11-22T10:00:61Z",
        "2026-11-22T10:00:00",
        "2026-11-22T10:00:00.Z",
        "2026-11-22T10:00:00+1:00",
        "2026-11-22T10:00:00+01:00x",
        "2026-11-22x",
        "2026-11-22T10:00:00.1234567890Z",
        "",
        "now",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        if (!srv_parse_rfc3339(good[i], NULL, 0))
            fail_msg("refused %s", good[i]);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (srv_parse_rfc3339(bad[i], NULL, 0))
            fail_msg("accepted %s", bad[i]);
    }
    assert_false(srv_parse_rfc3339(NULL, NULL, 0));
}

/* The UTC form handed to PostgreSQL, which refuses offsets past 15:59. */
static void test_rfc3339_utc(void **state)
{
    static const char *const cases[][2] = {
        {"2026-11-22", "2026-11-22"},
        {"2026-11-22T10:00:00Z", "2026-11-22T10:00:00Z"},
        {"2026-11-22t23:59:60z", "2026-11-22T23:59:60Z"},
        {"2026-11-22 10:00:00.5+01:00", "2026-11-22T09:00:00.5Z"},
        {"2053-01-19T14:38:31-17:41", "2053-01-20T08:19:31Z"},
        {"2024-03-01T00:30:00+01:00", "2024-02-29T23:30:00Z"},
        {"1900-03-01T01:00:00+02:00", "1900-02-28T23:00:00Z"},
        {"1969-12-31T23:00:00.123456789-02:00", "1970-01-01T01:00:00.123456789Z"},
        {"2026-12-31T23:59:59-00:01", "2027-01-01T00:00:59Z"},
        {"0001-01-01T00:00:00-12:30", "0001-01-01T12:30:00Z"},
        {"0001-01-01T00:00:00+00:01", "0001-01-01T00:00:00Z"},
        {"9999-12-31T23:59:60-23:59", "9999-12-31T23:59:59.999999Z"},
    };
    char utc[SRV_TIME_MAX];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_true(srv_parse_rfc3339(cases[i][0], utc, sizeof utc));
        if (strcmp(utc, cases[i][1]) != 0)
            fail_msg("%s: got %s, want %s", cases[i][0], utc, cases[i][1]);
    }
    assert_false(srv_parse_rfc3339("2026-11-22T10:00:00+24:00", utc, sizeof utc));
}

/* Idempotency-Key values: 1..255 visible ASCII characters. */
static void test_idem_key(void **state)
{
    (void)state;
    char max[SRV_IDEM_KEY_MAX + 2];
    assert_true(srv_parse_idem_key("0b5a5f1e-6c1e-4a7e-9b55-1d0f4c2a9e10"));
    assert_true(srv_parse_idem_key("k"));
    assert_true(srv_parse_idem_key("~!@#$%^&*()_+{}|:<>?"));
    assert_false(srv_parse_idem_key(""));
    assert_false(srv_parse_idem_key(NULL));
    assert_false(srv_parse_idem_key("has space"));
    assert_false(srv_parse_idem_key("tab\there"));
    assert_false(srv_parse_idem_key("caf\xc3\xa9"));
    assert_false(srv_parse_idem_key("del\x7f"));
    memset(max, 'a', SRV_IDEM_KEY_MAX);
    max[SRV_IDEM_KEY_MAX] = '\0';
    assert_true(srv_parse_idem_key(max));
    max[SRV_IDEM_KEY_MAX] = 'a';
    max[SRV_IDEM_KEY_MAX + 1] = '\0';
    assert_false(srv_parse_idem_key(max));
}

static void test_host_allowed(void **state)
{
    const char *lo = "localhost,127.0.0.1,::1";

    assert_true(srv_host_allowed("localhost", lo));
    assert_true(srv_host_allowed("LocalHost:8080", lo));
    assert_true(srv_host_allowed("127.0.0.1:1", lo));
    assert_true(srv_host_allowed("[::1]:8080", lo));
    assert_true(srv_host_allowed("[::1]", lo));
    assert_false(srv_host_allowed("evil.example", lo));
    assert_false(srv_host_allowed("127.0.0.1.evil.example", lo));
    assert_false(srv_host_allowed("localhost.evil", lo));
    assert_false(srv_host_allowed("local", lo));
    assert_false(srv_host_allowed("[::1", lo));
    assert_false(srv_host_allowed("[::1]x", lo));
    assert_false(srv_host_allowed("", lo));
    assert_false(srv_host_allowed(":8080", lo));
    /* the port is digits, 1 to 5 of them, and nothing after (fuzz_query found
     * "127.0.0.1:" followed by 300 bytes of anything let through) */
    assert_false(srv_host_allowed("127.0.0.1:", lo));
    assert_false(srv_host_allowed("127.0.0.1:80x", lo));
    assert_false(srv_host_allowed("127.0.0.1:123456", lo));
    assert_false(srv_host_allowed("localhost:8080:1", lo));
    assert_false(srv_host_allowed("[::1]:", lo));
    assert_false(srv_host_allowed("[::1]:8080/evil", lo));
    assert_false(srv_host_allowed(NULL, lo));
    assert_true(srv_host_allowed("anything", ""));
    assert_true(srv_host_allowed(NULL, NULL));
    assert_true(srv_host_allowed("bench.lab.example:443", "a,bench.lab.example"));
}

static void test_content_type_for(void **state)
{
    assert_string_equal(srv_content_type_for("index.html"), "text/html; charset=utf-8");
    assert_string_equal(srv_content_type_for("x/app.js"), "text/javascript; charset=utf-8");
    assert_string_equal(srv_content_type_for("style.css"), "text/css; charset=utf-8");
    assert_null(srv_content_type_for("secret.conf"));
    assert_null(srv_content_type_for("noext"));
    assert_null(srv_content_type_for("dir.js/file"));
    assert_null(srv_content_type_for(NULL));
}

/* ---- srv_catalog ---- */

static const char catalog_text[] =
    "[{\"name\":\"gemm_bias_gelu\",\"engine\":\"native\",\"domain\":\"pattern\","
    "\"devices\":[\"cpu\",\"cuda\"],\"dtypes\":[\"float32\",\"float16\"],"
    "\"variants\":[\"eager\",\"fused\"],\"description\":\"d\",\"default_batch_size\":4},"
    "{\"name\":\"softmax\",\"engine\":\"native\",\"domain\":\"pattern\","
    "\"devices\":[\"cpu\"],\"dtypes\":[\"float32\"],"
    "\"variants\":[\"eager\",\"fused\"],\"description\":\"d\",\"default_batch_size\":1,"
    "\"params\":[\"rows\",\"cols\",\"threads\",\"unfuse\"]},"
    "{\"name\":\"resnet18\",\"engine\":\"inductor\",\"domain\":\"vision\","
    "\"devices\":[\"cuda\"],\"dtypes\":[\"float16\"],"
    "\"variants\":[\"eager\",\"inductor\"],\"description\":\"d\",\"default_batch_size\":8,"
    "\"job_memory_bytes\":{\"cuda\":85899345920}}]";

typedef struct cat_fixture {
    cJSON *catalog;
    fb_spec spec;
    fb_err err;
} cat_fixture;

static int cat_setup(void **state)
{
    static cat_fixture f;
    f.catalog = cJSON_Parse(catalog_text);
    fb_spec_init(&f.spec);
    fb_err_clear(&f.err);
    *state = &f;
    return f.catalog ? 0 : -1;
}

static int cat_teardown(void **state)
{
    cat_fixture *f = *state;
    cJSON_Delete(f->catalog);
    fb_spec_free(&f->spec);
    return 0;
}

/* Parses a spec text into f->spec (must succeed) and resolves it. */
static fb_code resolve_text(cat_fixture *f, const char *text)
{
    assert_int_equal(fb_spec_parse(text, strlen(text), &f->spec, &f->err), FB_OK);
    return srv_catalog_resolve(f->catalog, &f->spec, &f->err);
}

static void test_catalog_defaults(void **state)
{
    cat_fixture *f = *state;
    assert_int_equal(resolve_text(f, "{\"workload\":\"gemm_bias_gelu\"}"), FB_OK);
    assert_string_equal(f->spec.engine, "native");
    assert_string_equal(f->spec.device, "cpu"); /* no CUDA worker registered: cpu */
    assert_string_equal(f->spec.dtype, "float32");
    assert_int_equal(f->spec.batch_size, 4);
    assert_int_equal(f->spec.n_variants, 2);
    assert_string_equal(f->spec.variants[0], "eager");
    assert_string_equal(f->spec.variants[1], "fused");
}

static void test_catalog_cpu_only(void **state)
{
    cat_fixture *f = *state;
    assert_int_equal(resolve_text(f, "{\"workload\":\"softmax\",\"batch_size\":2}"), FB_OK);
    assert_string_equal(f->spec.device, "cpu");
    assert_int_equal(f->spec.batch_size, 2); /* given: kept */
}

static void test_catalog_other_engine(void **state)
{
    cat_fixture *f = *state;
    assert_int_equal(resolve_text(f, "{\"workload\":\"resnet18\"}"), FB_OK);
    assert_string_equal(f->spec.engine, "inductor");
    assert_string_equal(f->spec.dtype, "float16"); /* float32 not offered */
}

/* params.unfuse is checked at submit in the form of the resolved engine's
 * ids: the inductor engine's strings, the native engine's integers. */
static void test_catalog_unfuse(void **state)
{
    cat_fixture *f = *state;
    assert_int_equal(
        resolve_text(f,
                     "{\"workload\":\"resnet18\",\"params\":{\"unfuse\":[\"fuse-0123456789ab\"]}}"),
        FB_OK);
    fb_spec_free(&f->spec);
    assert_int_equal(resolve_text(f, "{\"workload\":\"resnet18\",\"params\":{\"unfuse\":[7]}}"),
                     FB_EINVAL);
    assert_string_equal(f->err.field, "params.unfuse[0]");
    assert_non_null(strstr(f->err.msg, "inductor fusion id"));
    fb_spec_free(&f->spec);
    assert_int_equal(
        resolve_text(
            f, "{\"workload\":\"gemm_bias_gelu\",\"params\":{\"unfuse\":[\"fuse-0123456789ab\"]}}"),
        FB_EINVAL);
    assert_string_equal(f->err.field, "params.unfuse[0]");
}

/* A key the entry's "params" does not list is refused at submit, naming it;
 * an entry without "params" (resnet18 on inductor here) takes any.  A suite
 * first keeps only the keys its workload's entry lists. */
static void test_catalog_params(void **state)
{
    cat_fixture *f = *state;
    assert_int_equal(resolve_text(f, "{\"workload\":\"softmax\",\"params\":{\"rows\":8}}"), FB_OK);
    fb_spec_free(&f->spec);
    assert_int_equal(
        resolve_text(f, "{\"workload\":\"softmax\",\"params\":{\"rows\":8,\"image\":64}}"),
        FB_EINVAL);
    assert_string_equal(f->err.field, "params.image");
    assert_non_null(strstr(f->err.msg, "not a parameter of softmax (engine native)"));
    assert_non_null(strstr(f->err.msg, "rows, cols, threads, unfuse"));
    fb_spec_free(&f->spec);
    assert_int_equal(resolve_text(f, "{\"workload\":\"resnet18\",\"params\":{\"anything\":1}}"),
                     FB_OK);
    fb_spec_free(&f->spec);
    /* a suite's shared params: softmax keeps rows, drops m; resnet18 keeps both */
    static const char text[] = "{\"workload\":\"softmax\",\"params\":{\"m\":8,\"rows\":8}}";
    assert_int_equal(fb_spec_parse(text, strlen(text), &f->spec, &f->err), FB_OK);
    srv_catalog_keep_params(f->catalog, &f->spec);
    assert_int_equal(cJSON_GetArraySize(f->spec.params), 1);
    assert_non_null(cJSON_GetObjectItemCaseSensitive(f->spec.params, "rows"));
    assert_int_equal(srv_catalog_resolve(f->catalog, &f->spec, &f->err), FB_OK);
    fb_spec_free(&f->spec);
    static const char text2[] = "{\"workload\":\"resnet18\",\"params\":{\"m\":8,\"rows\":8}}";
    assert_int_equal(fb_spec_parse(text2, strlen(text2), &f->spec, &f->err), FB_OK);
    srv_catalog_keep_params(f->catalog, &f->spec);
    assert_int_equal(cJSON_GetArraySize(f->spec.params), 2);
}

/* Admission by memory: a job whose input alone is over the largest worker's
 * budget (80 GiB GPUs here) is refused naming batch_size and both sizes. */
static void test_catalog_memory(void **state)
{
    cat_fixture *f = *state;
    assert_int_equal(resolve_text(f, "{\"workload\":\"resnet18\",\"batch_size\":65536,"
                                     "\"params\":{\"image_size\":1024}}"),
                     FB_EUNSUPPORTED);
    assert_string_equal(f->err.field, "batch_size");
    assert_non_null(strstr(f->err.msg, "384.0 GiB")); /* 65536 x 3 x 1024^2 x 2 B */
    assert_non_null(strstr(f->err.msg, "80.0 GiB"));
    fb_spec_free(&f->spec);
    assert_int_equal(resolve_text(f, "{\"workload\":\"resnet18\",\"batch_size\":4096}"),
                     FB_OK); /* 1.15 GiB of input: let the worker find out */
    fb_spec_free(&f->spec);
    /* Patterns are not modelled: no floor, no refusal. */
    assert_int_equal(resolve_text(f, "{\"workload\":\"softmax\",\"batch_size\":65536}"), FB_OK);
}

static void test_input_bytes(void **state)
{
    fb_spec s;
    (void)state;
    fb_spec_init(&s);
    s.batch_size = 2;
    snprintf(s.dtype, sizeof s.dtype, "float32");
    s.params = cJSON_Parse("{\"seq_len\":10}");
    assert_float_equal(fb_spec_input_bytes(&s, "nlp"), 2.0 * 10 * 512 * 4, 0);
    assert_float_equal(fb_spec_input_bytes(&s, "vision"), 2.0 * 3 * 224 * 224 * 4, 0);
    assert_float_equal(fb_spec_input_bytes(&s, "test"), 2.0 * 3 * 32 * 32 * 4, 0);
    assert_float_equal(fb_spec_input_bytes(&s, "speech"), 2.0 * 16000 * 4, 0);
    assert_float_equal(fb_spec_input_bytes(&s, "pattern"), 0, 0);
    cJSON_Delete(s.params);
    s.params = cJSON_Parse("{\"mel_frames\":3000,\"image_size\":\"big\"}");
    snprintf(s.dtype, sizeof s.dtype, "bfloat16");
    assert_float_equal(fb_spec_input_bytes(&s, "speech"), 2.0 * 80 * 3000 * 2, 0);
    assert_float_equal(fb_spec_input_bytes(&s, "vision"), 2.0 * 3 * 224 * 224 * 2, 0);
    fb_spec_free(&s);
}

/* The default device (docs/API.md): cuda when a CUDA worker has registered for the
 * workload, else cpu; a device only built into the server is never a default,
 * but asked for explicitly it is accepted (the job waits for such a worker). */
static void test_catalog_registered_devices(void **state)
{
    cat_fixture *f = *state;
    cJSON *entry = cJSON_GetArrayItem(f->catalog, 0); /* gemm_bias_gelu, cpu and cuda */
    const char *cpu_only[] = {"cpu"}, *both[] = {"cpu", "cuda"};

    cJSON_AddItemToObject(entry, "registered_devices", cJSON_CreateStringArray(cpu_only, 1));
    assert_int_equal(resolve_text(f, "{\"workload\":\"gemm_bias_gelu\"}"), FB_OK);
    assert_string_equal(f->spec.device, "cpu");
    fb_spec_free(&f->spec);
    fb_spec_init(&f->spec);
    assert_int_equal(resolve_text(f, "{\"workload\":\"gemm_bias_gelu\",\"device\":\"cuda\"}"),
                     FB_OK);
    assert_string_equal(f->spec.device, "cuda");
    /* A CUDA worker registered once (scaled to zero now): cuda again. */
    cJSON_ReplaceItemInObjectCaseSensitive(entry, "registered_devices",
                                           cJSON_CreateStringArray(both, 2));
    fb_spec_free(&f->spec);
    fb_spec_init(&f->spec);
    assert_int_equal(resolve_text(f, "{\"workload\":\"gemm_bias_gelu\"}"), FB_OK);
    assert_string_equal(f->spec.device, "cuda");
    /* Offered on cuda only (built in), no worker: cuda, the only choice. */
    fb_spec_free(&f->spec);
    fb_spec_init(&f->spec);
    assert_int_equal(resolve_text(f, "{\"workload\":\"resnet18\"}"), FB_OK);
    assert_string_equal(f->spec.device, "cuda");
}

static void test_catalog_unknown(void **state)
{
    cat_fixture *f = *state;
    assert_int_equal(resolve_text(f, "{\"workload\":\"nope\"}"), FB_ENOTFOUND);
    assert_string_equal(f->err.field, "workload");
    assert_non_null(strstr(f->err.msg, "no worker has offered workload nope"));
}

/* A param that names a file is refused at submit for its form alone (no file
 * is looked at): absolute, "..", a hidden part, an empty part, a NUL cut, not
 * a string; a relative name passes. */
static void test_catalog_file_params(void **state)
{
    static const char *const bad[][2] = {
        {"{\"workload\":\"gemm_bias_gelu\",\"params\":{\"weights\":\"/etc/passwd\"}}",
         "params.weights"},
        {"{\"workload\":\"gemm_bias_gelu\",\"params\":{\"weights\":\"a/../../etc\"}}",
         "params.weights"},
        {"{\"workload\":\"gemm_bias_gelu\",\"params\":{\"input\":\".hidden\"}}", "params.input"},
        {"{\"workload\":\"gemm_bias_gelu\",\"params\":{\"input\":\"a//b\"}}", "params.input"},
        {"{\"workload\":\"gemm_bias_gelu\",\"params\":{\"weights\":7}}", "params.weights"},
        {"{\"workload\":\"gemm_bias_gelu\",\"params\":{\"weights\":\"\"}}", "params.weights"},
    };
    cat_fixture *f = *state;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fb_spec_free(&f->spec);
        fb_spec_init(&f->spec);
        assert_int_equal(resolve_text(f, bad[i][0]), FB_EINVAL);
        assert_string_equal(f->err.field, bad[i][1]);
        assert_non_null(strstr(f->err.msg, "weights folder"));
    }
    fb_spec_free(&f->spec);
    fb_spec_init(&f->spec);
    assert_int_equal(resolve_text(f, "{\"workload\":\"gemm_bias_gelu\",\"params\":"
                                     "{\"weights\":\"resnet/w-1.safetensors\"}}"),
                     FB_OK);
    /* a NUL inside the name: jsonb refuses it, and so does the spec parser */
    const char *nul = "{\"workload\":\"w\",\"params\":{\"weights\":\"a\\u0000b\"}}";
    fb_spec_free(&f->spec);
    fb_spec_init(&f->spec);
    assert_int_equal(fb_spec_parse(nul, strlen(nul), &f->spec, &f->err), FB_EINVAL);
}

static void test_catalog_empty(void **state)
{
    cat_fixture *f = *state;
    cJSON_Delete(f->catalog);
    f->catalog = cJSON_CreateArray();
    assert_int_equal(resolve_text(f, "{\"workload\":\"gemm_bias_gelu\"}"), FB_ENOTFOUND);
    assert_string_equal(f->err.field, "workload");
}

static void test_catalog_unsupported(void **state)
{
    cat_fixture *f = *state;
    assert_int_equal(resolve_text(f, "{\"workload\":\"softmax\",\"device\":\"cuda\"}"),
                     FB_EUNSUPPORTED);
    assert_string_equal(f->err.field, "device");
    fb_spec_free(&f->spec);
    fb_spec_init(&f->spec);
    assert_int_equal(resolve_text(f, "{\"workload\":\"softmax\",\"engine\":\"inductor\"}"),
                     FB_EUNSUPPORTED);
    assert_string_equal(f->err.field, "engine");
    fb_spec_free(&f->spec);
    fb_spec_init(&f->spec);
    assert_int_equal(resolve_text(f, "{\"workload\":\"softmax\",\"dtype\":\"float16\"}"),
                     FB_EUNSUPPORTED);
    assert_string_equal(f->err.field, "dtype");
    fb_spec_free(&f->spec);
    fb_spec_init(&f->spec);
    assert_int_equal(
        resolve_text(f, "{\"workload\":\"softmax\",\"variants\":[\"eager\",\"inductor\"]}"),
        FB_EUNSUPPORTED);
    assert_string_equal(f->err.field, "variants[1]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_literal),
        cmocka_unit_test(test_path_captures),
        cmocka_unit_test(test_path_too_long),
        cmocka_unit_test(test_parse_id),
        cmocka_unit_test(test_int_range),
        cmocka_unit_test(test_label),
        cmocka_unit_test(test_state),
        cmocka_unit_test(test_content_type),
        cmocka_unit_test(test_static_path),
        cmocka_unit_test(test_content_type_for),
        cmocka_unit_test(test_worker_action),
        cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_rfc3339_utc),
        cmocka_unit_test(test_idem_key),
        cmocka_unit_test(test_host_allowed),
        cmocka_unit_test_setup_teardown(test_catalog_defaults, cat_setup, cat_teardown),
        cmocka_unit_test_setup_teardown(test_catalog_cpu_only, cat_setup, cat_teardown),
        cmocka_unit_test_setup_teardown(test_catalog_other_engine, cat_setup, cat_teardown),
        cmocka_unit_test_setup_teardown(test_catalog_unfuse, cat_setup, cat_teardown),
        cmocka_unit_test_setup_teardown(test_catalog_params, cat_setup, cat_teardown),
        cmocka_unit_test_setup_teardown(test_catalog_memory, cat_setup, cat_teardown),
        cmocka_unit_test(test_input_bytes),
        cmocka_unit_test_setup_teardown(test_catalog_registered_devices, cat_setup, cat_teardown),
        cmocka_unit_test_setup_teardown(test_catalog_unknown, cat_setup, cat_teardown),
        cmocka_unit_test_setup_teardown(test_catalog_file_params, cat_setup, cat_teardown),
        cmocka_unit_test_setup_teardown(test_catalog_empty, cat_setup, cat_teardown),
        cmocka_unit_test_setup_teardown(test_catalog_unsupported, cat_setup, cat_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
