/* Unit tests of proto/: job spec decoding (every rule, with the exact field
 * path), defaults and round trips, result and catalog encoding, and the JSON
 * Schema's agreement with the C decoder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_catalog.h"
#include "fb_result.h"
#include "fb_spec.h"

/* ---- helpers ---- */

/* Parses text, expects code and field; the spec must come back owning nothing. */
static void expect_err(const char *text, fb_code code, const char *field)
{
    fb_spec s;
    fb_err err;
    fb_err_clear(&err);
    fb_code rc = fb_spec_parse(text, strlen(text), &s, &err);
    if (rc != code || strcmp(err.field, field) != 0)
        print_error("input %.200s: got %s field \"%s\" (%s), want %s field \"%s\"\n", text,
                    fb_code_name(rc), err.field, err.msg, fb_code_name(code), field);
    assert_int_equal(rc, code);
    assert_int_equal(err.code, code);
    assert_string_equal(err.field, field);
    assert_true(err.msg[0] != '\0');
    assert_null(s.params);
    fb_spec_free(&s);
}

static void expect_ok(const char *text, fb_spec *s)
{
    fb_err err;
    fb_err_clear(&err);
    fb_code rc = fb_spec_parse(text, strlen(text), s, &err);
    if (rc != FB_OK)
        print_error("input %.200s: %s field \"%s\": %s\n", text, fb_code_name(rc), err.field,
                    err.msg);
    assert_int_equal(rc, FB_OK);
    assert_non_null(s->params);
}

static void expect_ok_free(const char *text)
{
    fb_spec s;
    expect_ok(text, &s);
    fb_spec_free(&s);
}

static void assert_spec_equal(const fb_spec *a, const fb_spec *b)
{
    assert_string_equal(a->workload, b->workload);
    assert_string_equal(a->engine, b->engine);
    assert_string_equal(a->device, b->device);
    assert_string_equal(a->dtype, b->dtype);
    assert_int_equal(a->batch_size, b->batch_size);
    assert_int_equal(a->n_variants, b->n_variants);
    for (int i = 0; i < a->n_variants; i++)
        assert_string_equal(a->variants[i], b->variants[i]);
    assert_int_equal(a->warmup, b->warmup);
    assert_int_equal(a->iterations, b->iterations);
    assert_int_equal(a->priority, b->priority);
    assert_int_equal(a->timeout_s, b->timeout_s);
    assert_int_equal(a->max_attempts, b->max_attempts);
    assert_int_equal(a->explain, b->explain);
    assert_int_equal(a->n_labels, b->n_labels);
    for (int i = 0; i < a->n_labels; i++) {
        assert_string_equal(a->labels[i].key, b->labels[i].key);
        assert_string_equal(a->labels[i].value, b->labels[i].value);
    }
    assert_true(cJSON_Compare(a->params, b->params, true));
}

/* Encodes s, prints it, parses the text back into out. */
static void reencode(const fb_spec *s, fb_spec *out)
{
    cJSON *j = fb_spec_to_json(s);
    assert_non_null(j);
    char *txt = cJSON_PrintUnformatted(j);
    assert_non_null(txt);
    expect_ok(txt, out);
    cJSON_free(txt);
    cJSON_Delete(j);
}

/* {"workload":"w","<key>":<value>} */
static void with_field(char *buf, size_t n, const char *key, const char *value)
{
    snprintf(buf, n, "{\"workload\":\"w\",\"%s\":%s}", key, value);
}

/* A string of n copies of c, NUL-terminated, caller frees. */
static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* ---- spec: success, defaults, round trips ---- */

static const char *full_spec =
    "{\"workload\":\"gemm_bias_gelu\",\"engine\":\"native\",\"device\":\"cpu\","
    "\"batch_size\":4,\"dtype\":\"bfloat16\",\"variants\":[\"eager\",\"fused\","
    "\"eager+cudagraphs\"],\"params\":{\"m\":128,\"rules\":{\"off\":[\"gelu\"]},\"x\":0.1},"
    "\"warmup\":0,\"iterations\":7,\"priority\":-3,\"labels\":{\"project\":\"demo\","
    "\"team/x\":\"caf\\u00e9 au lait\"},\"timeout_s\":30,\"max_attempts\":2,\"explain\":true}";

static void test_spec_full_fields(void **state)
{
    fb_spec s;
    expect_ok(full_spec, &s);
    assert_string_equal(s.workload, "gemm_bias_gelu");
    assert_string_equal(s.dtype, "bfloat16");
    assert_int_equal(s.batch_size, 4);
    assert_int_equal(s.n_variants, 3);
    assert_string_equal(s.variants[2], "eager+cudagraphs");
    assert_int_equal(s.warmup, 0);
    assert_int_equal(s.iterations, 7);
    assert_int_equal(s.priority, -3);
    assert_int_equal(s.timeout_s, 30);
    assert_int_equal(s.max_attempts, 2);
    assert_true(s.explain);
    assert_int_equal(s.n_labels, 2);
    assert_string_equal(fb_spec_label(&s, "project"), "demo");
    assert_string_equal(fb_spec_label(&s, "team/x"), "caf\xc3\xa9 au lait");
    assert_null(fb_spec_label(&s, "nope"));
    fb_spec_free(&s);
}

static void test_spec_round_trip_full(void **state)
{
    fb_spec a, b;
    expect_ok(full_spec, &a);
    reencode(&a, &b);
    assert_spec_equal(&a, &b);
    fb_spec_free(&a);
    fb_spec_free(&b);
}

static void test_spec_unset_sentinels(void **state)
{
    fb_spec s;
    expect_ok("{\"workload\":\"w\"}", &s);
    assert_string_equal(s.engine, "");
    assert_string_equal(s.device, "");
    assert_string_equal(s.dtype, "");
    assert_int_equal(s.batch_size, 0);
    assert_int_equal(s.n_variants, 0);
    assert_int_equal(s.warmup, -1);
    assert_int_equal(s.iterations, 0);
    assert_int_equal(s.timeout_s, 0);
    assert_int_equal(s.max_attempts, 0);
    assert_int_equal(s.priority, 0);
    assert_true(cJSON_IsObject(s.params));
    assert_null(s.params->child);
    /* Unset fields are not encoded, and re-decoding gives the same sentinels. */
    cJSON *j = fb_spec_to_json(&s);
    assert_non_null(j);
    assert_null(cJSON_GetObjectItem(j, "engine"));
    assert_null(cJSON_GetObjectItem(j, "batch_size"));
    assert_null(cJSON_GetObjectItem(j, "warmup"));
    cJSON_Delete(j);
    fb_spec b;
    reencode(&s, &b);
    assert_spec_equal(&s, &b);
    fb_spec_free(&b);
    fb_spec_free(&s);
}

static void test_spec_defaults_round_trip(void **state)
{
    static const char *const vars[] = {"eager", "fused", "fused-noepi", NULL};
    fb_spec s, b;
    expect_ok("{\"workload\":\"w\",\"warmup\":0}", &s);
    fb_spec_apply_defaults(&s, "cuda", 8, vars);
    assert_string_equal(s.engine, "native");
    assert_string_equal(s.device, "cuda");
    assert_string_equal(s.dtype, "float32");
    assert_int_equal(s.batch_size, 8);
    assert_int_equal(s.n_variants, 3);
    assert_string_equal(s.variants[0], "eager");
    assert_string_equal(s.variants[2], "fused-noepi");
    assert_int_equal(s.warmup, 0); /* 0 is a real value, not "unset" */
    assert_int_equal(s.iterations, 50);
    assert_int_equal(s.timeout_s, 600);
    assert_int_equal(s.max_attempts, 3);
    reencode(&s, &b);
    assert_spec_equal(&s, &b);
    fb_spec_free(&b);
    fb_spec_free(&s);
}

static void test_spec_defaults_keep_set_fields(void **state)
{
    fb_spec s;
    expect_ok(full_spec, &s);
    fb_spec_apply_defaults(&s, "cuda", 8, NULL);
    assert_string_equal(s.device, "cpu");
    assert_int_equal(s.batch_size, 4);
    assert_int_equal(s.n_variants, 3);
    assert_int_equal(s.warmup, 0);
    assert_int_equal(s.iterations, 7);
    fb_spec_free(&s);

    expect_ok("{\"workload\":\"w\"}", &s);
    fb_spec_apply_defaults(&s, NULL, 0, NULL);
    assert_string_equal(s.device, "cpu");
    assert_int_equal(s.batch_size, 1);
    assert_int_equal(s.n_variants, 2);
    assert_string_equal(s.variants[0], "eager");
    assert_string_equal(s.variants[1], "fused");
    assert_int_equal(s.warmup, 10);
    fb_spec_free(&s);
}

/* What the worker runs: a spec with its defaults (as the server stores it
 * after submit) passes; one without them fails naming the first unset field,
 * and a re-encoded resolved spec is still resolved. */
static void test_spec_check_resolved(void **state)
{
    static const char *const partial[][2] = {
        {"{\"workload\":\"w\"}", "engine"},
        {"{\"workload\":\"w\",\"engine\":\"native\"}", "device"},
        {"{\"workload\":\"w\",\"engine\":\"native\",\"device\":\"cpu\","
         "\"dtype\":\"float32\"}",
         "batch_size"},
        {"{\"workload\":\"w\",\"engine\":\"native\",\"device\":\"cpu\","
         "\"dtype\":\"float32\",\"batch_size\":2,\"variants\":[\"eager\"],\"warmup\":0}",
         "iterations"},
    };
    fb_spec s, b;
    fb_err err;
    (void)state;

    for (size_t i = 0; i < sizeof partial / sizeof partial[0]; i++) {
        expect_ok(partial[i][0], &s);
        assert_int_equal(fb_spec_check_resolved(&s, &err), FB_EINVAL);
        assert_string_equal(err.field, partial[i][1]);
        assert_non_null(strstr(err.msg, "submitted"));
        fb_spec_free(&s);
    }
    expect_ok("{\"workload\":\"w\",\"warmup\":0}", &s);
    fb_spec_apply_defaults(&s, "cpu", 1, NULL);
    assert_int_equal(fb_spec_check_resolved(&s, &err), FB_OK);
    reencode(&s, &b);
    assert_int_equal(fb_spec_check_resolved(&b, &err), FB_OK);
    fb_spec_free(&b);
    fb_spec_free(&s);
}

static void test_spec_from_json_not_consumed(void **state)
{
    cJSON *obj = cJSON_Parse("{\"workload\":\"w\",\"params\":{\"a\":1}}");
    assert_non_null(obj);
    fb_spec s;
    fb_err err;
    assert_int_equal(fb_spec_from_json(obj, &s, &err), FB_OK);
    assert_true(s.params != cJSON_GetObjectItem(obj, "params")); /* a copy */
    assert_true(cJSON_Compare(s.params, cJSON_GetObjectItem(obj, "params"), true));
    fb_spec_free(&s);
    cJSON_Delete(obj);
    assert_int_equal(fb_spec_from_json(NULL, &s, &err), FB_EINVAL);
    assert_string_equal(err.field, "");
    assert_null(s.params);
}

static void test_spec_whitespace_and_unterminated(void **state)
{
    expect_ok_free(" \n\t{ \"workload\" : \"w\" }\r\n ");
    /* len shorter than the string: only the first len bytes count. */
    const char *t = "{\"workload\":\"w\"}garbage";
    fb_spec s;
    fb_err err;
    assert_int_equal(fb_spec_parse(t, 16, &s, &err), FB_OK);
    assert_string_equal(s.workload, "w");
    fb_spec_free(&s);
}

/* ---- spec: each validation rule ---- */

static void test_spec_not_json(void **state)
{
    expect_err("{\"workload\":\"w\",\"explain\":1}", FB_EINVAL, "explain");
    expect_err("{\"workload\":\"w\",\"explain\":\"yes\"}", FB_EINVAL, "explain");
    expect_err("", FB_EJSON, "");
    expect_err("{", FB_EJSON, "");
    expect_err("{\"workload\":}", FB_EJSON, "");
    expect_err("not json", FB_EJSON, "");
    expect_err("{\"workload\":\"w\"} trailing", FB_EJSON, "");
    expect_err("{\"workload\":\"w\"}{}", FB_EJSON, "");
    /* Raw control characters: never inside strings, only tab/LF/CR outside. */
    expect_err("{\"workload\":\"w\x01\"}", FB_EJSON, "");
    expect_err("{\"workload\":\"w\",\"labels\":{\"a\":\"x\ty\"}}", FB_EJSON, "");
    expect_err("{\x01\"workload\":\"w\"}", FB_EJSON, "");
    expect_err("{\x0b\"workload\":\"w\"}", FB_EJSON, "");
    fb_spec s;
    fb_err err;
    assert_int_equal(fb_spec_parse("{\"workload\":\"w\"}\0", 17, &s, &err), FB_EJSON);
}

static void test_spec_not_object(void **state)
{
    expect_err("[1,2]", FB_EINVAL, "");
    expect_err("\"workload\"", FB_EINVAL, "");
    expect_err("42", FB_EINVAL, "");
    expect_err("null", FB_EINVAL, "");
}

static void test_spec_missing_workload(void **state)
{
    expect_err("{}", FB_EINVAL, "workload");
    expect_err("{\"engine\":\"native\",\"iterations\":5}", FB_EINVAL, "workload");
}

static void test_spec_unknown_and_repeated_keys(void **state)
{
    expect_err("{\"workload\":\"w\",\"bogus\":1}", FB_EINVAL, "bogus");
    expect_err("{\"Workload\":\"w\"}", FB_EINVAL, "Workload");
    expect_err("{\"workload\":\"w\",\"workload\":\"v\"}", FB_EINVAL, "workload");
    expect_err("{\"workload\":\"w\",\"iterations\":5,\"iterations\":6}", FB_EINVAL, "iterations");
    /* A key that is not printable ASCII is shown sanitized, never raw. */
    expect_err("{\"workload\":\"w\",\"k\\u00e9\":1}", FB_EINVAL, "k??");
    fb_spec s;
    fb_err err;
    const char *t = "{\"workload\":\"w\",\"bogus\":1}";
    assert_int_equal(fb_spec_parse(t, strlen(t), &s, &err), FB_EINVAL);
    assert_non_null(strstr(err.msg, "unknown field \"bogus\""));
}

static void test_spec_bad_names(void **state)
{
    char buf[256];
    expect_err("{\"workload\":\"\"}", FB_EINVAL, "workload");
    expect_err("{\"workload\":\"Gemm\"}", FB_EINVAL, "workload");
    expect_err("{\"workload\":\"_gemm\"}", FB_EINVAL, "workload");
    expect_err("{\"workload\":\"-gemm\"}", FB_EINVAL, "workload");
    expect_err("{\"workload\":\"ge mm\"}", FB_EINVAL, "workload");
    expect_err("{\"workload\":\"g/x\"}", FB_EINVAL, "workload");
    expect_err("{\"workload\":1}", FB_EINVAL, "workload");
    expect_err("{\"workload\":null}", FB_EINVAL, "workload");
    expect_err("{\"workload\":\"w\",\"engine\":\"Native\"}", FB_EINVAL, "engine");
    expect_err("{\"workload\":\"w\",\"engine\":[]}", FB_EINVAL, "engine");
    char *n63 = repeat('a', 63), *n64 = repeat('a', 64);
    snprintf(buf, sizeof buf, "{\"workload\":\"%s\"}", n63);
    expect_ok_free(buf);
    snprintf(buf, sizeof buf, "{\"workload\":\"%s\"}", n64);
    expect_err(buf, FB_EINVAL, "workload");
    free(n63);
    free(n64);
    expect_ok_free("{\"workload\":\"0a_b+c.d-e\"}");
}

static void test_spec_name_valid(void **state)
{
    assert_true(fb_name_valid("a"));
    assert_true(fb_name_valid("9"));
    assert_true(fb_name_valid("inductor-max-autotune"));
    assert_true(fb_name_valid("eager+cudagraphs"));
    assert_false(fb_name_valid(NULL));
    assert_false(fb_name_valid(""));
    assert_false(fb_name_valid(".a"));
    assert_false(fb_name_valid("+a"));
    assert_false(fb_name_valid("aB"));
    assert_false(fb_name_valid("a b"));
    assert_false(fb_name_valid("a\xc3\xa9"));
}

/* An uploaded model as a workload: model:NAME or model:OWNER/NAME. */
static void test_spec_model_ref(void **state)
{
    char owner[FB_NAME_MAX], name[FB_NAME_MAX];
    assert_true(fb_model_ref_parse("model:Mine-2.v1", owner, name));
    assert_string_equal(owner, "");
    assert_string_equal(name, "Mine-2.v1");
    assert_true(fb_model_ref_parse("model:alice/net", owner, name));
    assert_string_equal(owner, "alice");
    assert_string_equal(name, "net");
    assert_false(fb_model_ref_parse("model:", owner, name));
    assert_false(fb_model_ref_parse("model:/net", owner, name));
    assert_false(fb_model_ref_parse("model:alice/", owner, name));
    assert_false(fb_model_ref_parse("model:a/b/c", owner, name));
    assert_false(fb_model_ref_parse("model:a b", owner, name));
    assert_false(fb_model_ref_parse("model:-x", owner, name));
    assert_false(fb_model_ref_parse("model.7", owner, name));
    assert_false(fb_model_ref_parse("resnet50", owner, name));
    expect_ok_free("{\"workload\":\"model:alice/Net_1\"}");
    expect_ok_free("{\"workload\":\"model.17\"}");
    expect_err("{\"workload\":\"model:bad name\"}", FB_EINVAL, "workload");
    char *longname = repeat('a', 60), buf[128];
    snprintf(buf, sizeof buf, "{\"workload\":\"model:%s\"}", longname);
    expect_err(buf, FB_EINVAL, "workload"); /* 66 characters: over the name limit */
    free(longname);
}

static void test_spec_device_dtype(void **state)
{
    expect_ok_free("{\"workload\":\"w\",\"device\":\"cuda\",\"dtype\":\"float16\"}");
    expect_ok_free("{\"workload\":\"w\",\"device\":\"cpu\",\"dtype\":\"float32\"}");
    expect_err("{\"workload\":\"w\",\"device\":\"tpu\"}", FB_EINVAL, "device");
    expect_err("{\"workload\":\"w\",\"device\":\"CPU\"}", FB_EINVAL, "device");
    expect_err("{\"workload\":\"w\",\"dtype\":\"float64\"}", FB_EINVAL, "dtype");
    expect_err("{\"workload\":\"w\",\"dtype\":16}", FB_EINVAL, "dtype");
    fb_spec s;
    fb_err err;
    const char *t = "{\"workload\":\"w\",\"dtype\":\"int8\"}";
    assert_int_equal(fb_spec_parse(t, strlen(t), &s, &err), FB_EINVAL);
    assert_string_equal(err.msg, "dtype must be one of float32, float16, bfloat16, got \"int8\"");
}

/* Each integer field: both edges pass, one past each edge fails, and so do
 * fractions, strings, booleans and null. */
static void test_spec_int_ranges(void **state)
{
    static const struct {
        const char *key;
        long lo, hi;
    } f[] = {
        {"batch_size", 1, FB_MAX_BATCH},
        {"warmup", 0, FB_MAX_WARMUP},
        {"iterations", 1, FB_MAX_ITERATIONS},
        {"priority", -100, 100},
        {"timeout_s", 1, 86400},
        {"max_attempts", 1, 10},
    };
    char buf[256], v[64];
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        long ok[] = {f[i].lo, f[i].hi}, bad[] = {f[i].lo - 1, f[i].hi + 1};
        for (int k = 0; k < 2; k++) {
            snprintf(v, sizeof v, "%ld", ok[k]);
            with_field(buf, sizeof buf, f[i].key, v);
            expect_ok_free(buf);
            snprintf(v, sizeof v, "%ld", bad[k]);
            with_field(buf, sizeof buf, f[i].key, v);
            expect_err(buf, FB_EINVAL, f[i].key);
        }
        const char *wrong[] = {"1.5", "\"5\"", "true", "null", "[1]", "{}", "1e999", "-1e999"};
        for (size_t k = 0; k < sizeof wrong / sizeof wrong[0]; k++) {
            with_field(buf, sizeof buf, f[i].key, wrong[k]);
            expect_err(buf, FB_EINVAL, f[i].key);
        }
    }
    /* Integral values written as floats are integers. */
    expect_ok_free("{\"workload\":\"w\",\"batch_size\":2.0,\"iterations\":1e2}");
}

static void test_spec_int_message(void **state)
{
    fb_spec s;
    fb_err err;
    const char *t = "{\"workload\":\"w\",\"batch_size\":0}";
    assert_int_equal(fb_spec_parse(t, strlen(t), &s, &err), FB_EINVAL);
    assert_string_equal(err.msg, "batch_size must be an integer between 1 and 65536, got 0");
    t = "{\"workload\":\"w\",\"iterations\":\"many\"}";
    assert_int_equal(fb_spec_parse(t, strlen(t), &s, &err), FB_EINVAL);
    assert_string_equal(err.msg,
                        "iterations must be an integer between 1 and 100000, got a string");
    t = "{\"workload\":\"w\",\"warmup\":2.5}";
    assert_int_equal(fb_spec_parse(t, strlen(t), &s, &err), FB_EINVAL);
    assert_string_equal(err.msg, "warmup must be an integer between 0 and 10000, got 2.5");
}

static void test_spec_variants(void **state)
{
    fb_spec s;
    expect_ok("{\"workload\":\"w\",\"variants\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\","
              "\"h\"]}",
              &s);
    assert_int_equal(s.n_variants, FB_MAX_VARIANTS);
    assert_string_equal(s.variants[7], "h");
    fb_spec_free(&s);
    expect_err("{\"workload\":\"w\",\"variants\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\","
               "\"h\",\"i\"]}",
               FB_EINVAL, "variants");
    expect_err("{\"workload\":\"w\",\"variants\":[]}", FB_EINVAL, "variants");
    expect_err("{\"workload\":\"w\",\"variants\":\"eager\"}", FB_EINVAL, "variants");
    expect_err("{\"workload\":\"w\",\"variants\":{}}", FB_EINVAL, "variants");
    expect_err("{\"workload\":\"w\",\"variants\":[\"eager\",\"eager\"]}", FB_EINVAL, "variants[1]");
    expect_err("{\"workload\":\"w\",\"variants\":[\"eager\",\"fused\",\"eager\"]}", FB_EINVAL,
               "variants[2]");
    expect_err("{\"workload\":\"w\",\"variants\":[1]}", FB_EINVAL, "variants[0]");
    expect_err("{\"workload\":\"w\",\"variants\":[\"eager\",null]}", FB_EINVAL, "variants[1]");
    expect_err("{\"workload\":\"w\",\"variants\":[\"eager\",\"fused\",\"Bad\"]}", FB_EINVAL,
               "variants[2]");
    expect_err("{\"workload\":\"w\",\"variants\":[[\"eager\"]]}", FB_EINVAL, "variants[0]");
}

/* A labels object with n entries k0..k(n-1). */
static void labels_json(char *buf, size_t n, int count)
{
    size_t used = (size_t)snprintf(buf, n, "{\"workload\":\"w\",\"labels\":{");
    for (int i = 0; i < count; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s\"k%d\":\"v\"", i ? "," : "", i);
    snprintf(buf + used, n - used, "}}");
}

static void test_spec_labels(void **state)
{
    char buf[2048];
    labels_json(buf, sizeof buf, FB_MAX_LABELS);
    expect_ok_free(buf);
    labels_json(buf, sizeof buf, FB_MAX_LABELS + 1);
    expect_err(buf, FB_EINVAL, "labels");
    expect_ok_free("{\"workload\":\"w\",\"labels\":{}}");
    expect_err("{\"workload\":\"w\",\"labels\":[]}", FB_EINVAL, "labels");
    expect_err("{\"workload\":\"w\",\"labels\":\"project=demo\"}", FB_EINVAL, "labels");
    expect_err("{\"workload\":\"w\",\"labels\":{\"project\":1}}", FB_EINVAL, "labels.project");
    expect_err("{\"workload\":\"w\",\"labels\":{\"a\":\"x\",\"project\":null}}", FB_EINVAL,
               "labels.project");
    expect_err("{\"workload\":\"w\",\"labels\":{\"project\":{\"x\":\"y\"}}}", FB_EINVAL,
               "labels.project");
    expect_err("{\"workload\":\"w\",\"labels\":{\"a\":\"x\",\"a\":\"y\"}}", FB_EINVAL, "labels.a");
    expect_err("{\"workload\":\"w\",\"labels\":{\"a:b\":\"x\"}}", FB_EINVAL, "labels.a:b");
    expect_err("{\"workload\":\"w\",\"labels\":{\"\":\"x\"}}", FB_EINVAL, "labels.");
    expect_err("{\"workload\":\"w\",\"labels\":{\"a\":\"x\\ny\"}}", FB_EINVAL, "labels.a");
    expect_err("{\"workload\":\"w\",\"labels\":{\"a\":\"\\ud800\"}}", FB_EJSON, "");
    /* Key and value lengths: 127 bytes pass, 128 fail. */
    char *k127 = repeat('k', 127), *k128 = repeat('k', 128);
    snprintf(buf, sizeof buf, "{\"workload\":\"w\",\"labels\":{\"%s\":\"%s\"}}", k127, k127);
    expect_ok_free(buf);
    snprintf(buf, sizeof buf, "{\"workload\":\"w\",\"labels\":{\"%s\":\"v\"}}", k128);
    fb_spec s;
    fb_err err;
    assert_int_equal(fb_spec_parse(buf, strlen(buf), &s, &err), FB_EINVAL);
    assert_int_equal(strncmp(err.field, "labels.kkkk", 11), 0);
    snprintf(buf, sizeof buf, "{\"workload\":\"w\",\"labels\":{\"a\":\"%s\"}}", k128);
    expect_err(buf, FB_EINVAL, "labels.a");
    free(k127);
    free(k128);
}

/* {"workload":"w","params": <depth levels of {"a": ... 1 ...}>} */
static char *deep_params(int depth)
{
    size_t n = (size_t)depth * 6 + 64;
    char *buf = malloc(n);
    assert_non_null(buf);
    size_t used = (size_t)snprintf(buf, n, "{\"workload\":\"w\",\"params\":");
    for (int i = 0; i < depth; i++)
        used += (size_t)snprintf(buf + used, n - used, i + 1 < depth ? "{\"a\":" : "{\"a\":1");
    for (int i = 0; i < depth; i++)
        buf[used++] = '}';
    snprintf(buf + used, n - used, "}");
    return buf;
}

static void test_spec_params(void **state)
{
    expect_ok_free("{\"workload\":\"w\",\"params\":{}}");
    expect_ok_free("{\"workload\":\"w\",\"params\":{\"a\":[1,\"x\",null,true,{\"b\":[]}]}}");
    expect_err("{\"workload\":\"w\",\"params\":[]}", FB_EINVAL, "params");
    expect_err("{\"workload\":\"w\",\"params\":null}", FB_EINVAL, "params");
    expect_err("{\"workload\":\"w\",\"params\":\"m=1\"}", FB_EINVAL, "params");
    expect_err("{\"workload\":\"w\",\"params\":{\"m\":1e999}}", FB_EINVAL, "params");
    expect_err("{\"workload\":\"w\",\"params\":{\"m\":\"\xff\"}}", FB_EINVAL, "params");
    expect_err("{\"workload\":\"w\",\"params\":{\"\xc3\x28\":1}}", FB_EINVAL, "params");
    /* Repeated keys would read differently in cJSON (first) and jsonb (last). */
    expect_err("{\"workload\":\"w\",\"params\":{\"m\":1,\"n\":2,\"m\":3}}", FB_EINVAL, "params");
    expect_err("{\"workload\":\"w\",\"params\":{\"a\":[{\"x\":1,\"x\":1}]}}", FB_EINVAL, "params");
    expect_ok_free("{\"workload\":\"w\",\"params\":{\"a\":{\"x\":1},\"b\":{\"x\":1}}}");
}

static void test_utf8(void **state)
{
    (void)state;
    assert_true(fb_utf8_valid("plain \xc3\xa9 \xf0\x9f\x98\x8d"));
    assert_false(fb_utf8_valid("\xff"));
    assert_false(fb_utf8_valid("\xed\xa0\x80"));   /* a surrogate */
    assert_false(fb_utf8_valid("\xc0\xaf"));       /* overlong */
    assert_int_equal(fb_utf8_prefix("ab\xc3"), 2); /* cut inside a character */
    assert_int_equal(fb_utf8_prefix("ab\xc3x"), 2);
    char s[] = "a\xc3\xa9\xff\xe2\x82"
               "b\xe2\x82\xac\xc3";
    fb_utf8_mend(s);
    assert_string_equal(s, "a\xc3\xa9???b\xe2\x82\xac?"); /* each bad byte one '?' */
    assert_true(fb_utf8_valid(s));
}

/* A number next to DBL_MAX is finite, but cJSON's 15-digit text for it reads
 * back as infinity and prints as null: refused.  1e308 and smaller survive the
 * trip from the spec's text and back unchanged. */
static void test_spec_params_number_range(void **state)
{
    (void)state;
    expect_err("{\"workload\":\"w\",\"params\":{\"x\":[1.7976931348623157e+308]}}", FB_EINVAL,
               "params");
    expect_err("{\"workload\":\"w\",\"params\":{\"x\":-1.797693134862315e308}}", FB_EINVAL,
               "params");
    expect_err("{\"workload\":\"w\",\"params\":{\"x\":1.00000000000001e308}}", FB_EINVAL, "params");
    fb_spec s;
    expect_ok("{\"workload\":\"w\",\"params\":{\"a\":[1e308,-1e308,9.999999999999999e307,"
              "5e-324]}}",
              &s);
    cJSON *j = fb_spec_to_json(&s);
    char *txt = cJSON_PrintUnformatted(j);
    assert_non_null(txt);
    fb_spec back;
    fb_err err;
    assert_int_equal(fb_spec_parse(txt, strlen(txt), &back, &err), FB_OK);
    const cJSON *a = cJSON_GetObjectItem(back.params, "a");
    assert_int_equal(cJSON_GetArraySize(a), 4);
    assert_true(cJSON_GetArrayItem(a, 0)->valuedouble == 1e308);
    assert_true(cJSON_GetArrayItem(a, 1)->valuedouble == -1e308);
    assert_true(isfinite(cJSON_GetArrayItem(a, 2)->valuedouble));
    assert_true(cJSON_GetArrayItem(a, 2)->valuedouble > 9.99e307);
    assert_true(cJSON_GetArrayItem(a, 3)->valuedouble > 0);
    cJSON_free(txt);
    cJSON_Delete(j);
    fb_spec_free(&back);
    fb_spec_free(&s);
}

static void test_spec_params_depth(void **state)
{
    char *ok = deep_params(FB_JSON_MAX_DEPTH), *bad = deep_params(FB_JSON_MAX_DEPTH + 1);
    expect_ok_free(ok);
    expect_err(bad, FB_ETOOBIG, "params");
    free(ok);
    free(bad);
    /* Far deeper than cJSON's own limit: refused before parsing, no crash. */
    char *huge = deep_params(20000);
    expect_err(huge, FB_ETOOBIG, "");
    free(huge);
    char *arr = repeat('[', 60000);
    expect_err(arr, FB_ETOOBIG, "");
    free(arr);
    /* Brackets inside strings do not count. */
    char buf[256];
    snprintf(
        buf, sizeof buf, "{\"workload\":\"w\",\"params\":{\"s\":\"%s\"}}",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\\"{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{");
    expect_ok_free(buf);
}

static void test_spec_too_big(void **state)
{
    /* Exactly the limit (padding with spaces) passes; one byte more fails. */
    const char *core = "{\"workload\":\"w\"}";
    char *t = repeat(' ', FB_SPEC_JSON_MAX + 1);
    memcpy(t, core, strlen(core));
    fb_spec s;
    fb_err err;
    assert_int_equal(fb_spec_parse(t, FB_SPEC_JSON_MAX, &s, &err), FB_OK);
    fb_spec_free(&s);
    assert_int_equal(fb_spec_parse(t, FB_SPEC_JSON_MAX + 1, &s, &err), FB_ETOOBIG);
    assert_string_equal(err.field, "");
    assert_null(s.params);
    free(t);
    /* params under the text limit but too big to store with the rest of the spec. */
    char *big = repeat('x', FB_SPEC_JSON_MAX - 4096);
    size_t n = strlen(big) + 64;
    char *txt = malloc(n);
    assert_non_null(txt);
    snprintf(txt, n, "{\"workload\":\"w\",\"params\":{\"s\":\"%s\"}}", big);
    expect_err(txt, FB_ETOOBIG, "params");
    free(txt);
    free(big);
}

/* params.unfuse has the form of the engine's ids: the inductor engine's
 * strings, the native engine's integers; at most FB_UNFUSE_MAX, no repeat. */
static void test_spec_unfuse(void **state)
{
    static const struct {
        const char *engine, *params, *field; /* field NULL: accepted */
    } cases[] = {
        {"inductor", "{}", NULL},
        {"inductor", "{\"unfuse\":[\"fuse-0123456789ab\",\"group-abcdef012345\"]}", NULL},
        {"inductor", "{\"unfuse\":[]}", "params.unfuse"},
        {"inductor", "{\"unfuse\":\"fuse-0123456789ab\"}", "params.unfuse"},
        {"inductor", "{\"unfuse\":[3]}", "params.unfuse[0]"},
        {"inductor", "{\"unfuse\":[\"fuse-0123456789AB\"]}", "params.unfuse[0]"},
        {"inductor", "{\"unfuse\":[\"fuse-0123456789a\"]}", "params.unfuse[0]"},
        {"inductor", "{\"unfuse\":[\"fuse-0123456789abc\"]}", "params.unfuse[0]"},
        {"inductor", "{\"unfuse\":[\"fuse-0123456789ab\",\"fuse-0123456789ab\"]}",
         "params.unfuse[1]"},
        {"inductor", "{\"unfuse\":[\"kernel-0123456789ab\"]}", "params.unfuse[0]"},
        {"native", "{\"unfuse\":[0,3,17]}", NULL},
        {"native", "{\"unfuse\":[\"fuse-0123456789ab\"]}", "params.unfuse[0]"},
        {"native", "{\"unfuse\":[1.5]}", "params.unfuse[0]"},
        {"native", "{\"unfuse\":[-1]}", "params.unfuse[0]"},
        {"native", "{\"unfuse\":[2,2]}", "params.unfuse[1]"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fb_spec s;
        fb_err err;
        char text[256];
        snprintf(text, sizeof text, "{\"workload\":\"w\",\"params\":%s}", cases[i].params);
        expect_ok(text, &s);
        snprintf(s.engine, sizeof s.engine, "%s", cases[i].engine);
        fb_err_clear(&err);
        fb_code rc = fb_spec_check_unfuse(&s, &err);
        if (!cases[i].field) {
            assert_int_equal(rc, FB_OK);
        } else {
            assert_int_equal(rc, FB_EINVAL);
            assert_string_equal(err.field, cases[i].field);
        }
        fb_spec_free(&s);
    }
    /* 64 ids pass, 65 do not */
    char big[2048] = "{\"workload\":\"w\",\"params\":{\"unfuse\":[";
    for (int n = 0; n < 65; n++)
        snprintf(big + strlen(big), sizeof big - strlen(big), "%s%d", n ? "," : "", n);
    strcat(big, "]}}");
    fb_spec s;
    fb_err err;
    expect_ok(big, &s);
    snprintf(s.engine, sizeof s.engine, "native");
    assert_int_equal(fb_spec_check_unfuse(&s, &err), FB_EINVAL);
    assert_string_equal(err.field, "params.unfuse");
    cJSON_DeleteItemFromArray(cJSON_GetObjectItemCaseSensitive(s.params, "unfuse"), 64);
    assert_int_equal(fb_spec_check_unfuse(&s, &err), FB_OK);
    fb_spec_free(&s);
}

static void test_spec_param_int_bool(void **state)
{
    fb_spec s;
    fb_err err;
    int64_t v = 0;
    bool b = false;
    expect_ok("{\"workload\":\"w\",\"params\":{\"m\":128,\"f\":1.5,\"s\":\"x\",\"big\":1e300,"
              "\"neg\":-4,\"on\":true,\"off\":false,\"zero\":0}}",
              &s);
    assert_int_equal(fb_spec_param_int(&s, "m", 7, 1, 1024, &v, &err), FB_OK);
    assert_int_equal(v, 128);
    assert_int_equal(fb_spec_param_int(&s, "absent", 7, 1, 1024, &v, &err), FB_OK);
    assert_int_equal(v, 7);
    assert_int_equal(fb_spec_param_int(&s, "neg", 0, -4, 4, &v, &err), FB_OK);
    assert_int_equal(v, -4);
    assert_int_equal(fb_spec_param_int(&s, "m", 7, 1, 127, &v, &err), FB_EINVAL);
    assert_string_equal(err.field, "params.m");
    assert_string_equal(err.msg, "params.m must be an integer between 1 and 127, got 128");
    assert_int_equal(fb_spec_param_int(&s, "m", 7, 129, 1024, &v, &err), FB_EINVAL);
    assert_int_equal(fb_spec_param_int(&s, "f", 7, 0, 10, &v, &err), FB_EINVAL);
    assert_string_equal(err.field, "params.f");
    assert_int_equal(fb_spec_param_int(&s, "s", 7, 0, 10, &v, &err), FB_EINVAL);
    assert_string_equal(err.field, "params.s");
    assert_int_equal(fb_spec_param_int(&s, "big", 0, INT64_MIN, INT64_MAX, &v, &err), FB_EINVAL);
    assert_int_equal(fb_spec_param_int(&s, "on", 0, 0, 1, &v, &err), FB_EINVAL);
    assert_int_equal(fb_spec_param_bool(&s, "on", false, &b, &err), FB_OK);
    assert_true(b);
    assert_int_equal(fb_spec_param_bool(&s, "off", true, &b, &err), FB_OK);
    assert_false(b);
    assert_int_equal(fb_spec_param_bool(&s, "absent", true, &b, &err), FB_OK);
    assert_true(b);
    assert_int_equal(fb_spec_param_bool(&s, "zero", false, &b, &err), FB_EINVAL);
    assert_string_equal(err.field, "params.zero");
    assert_int_equal(fb_spec_param_bool(&s, "s", false, &b, &err), FB_EINVAL);
    assert_string_equal(err.field, "params.s");
    fb_spec_free(&s);
}

/* ---- results ---- */

/* An eager/fused/bad result with known numbers. */
static void make_result(fb_result *r)
{
    fb_result_init(r);
    r->n_variants = 3;
    fb_variant_result_init(&r->variants[0], "eager");
    fb_variant_result_init(&r->variants[1], "fused");
    fb_variant_result_init(&r->variants[2], "fused-bad");
    fb_variant_result *e = &r->variants[0], *f = &r->variants[1], *x = &r->variants[2];
    e->latency.median = 2.0;
    f->latency.median = 0.5;
    x->latency.median = 0.25;
    e->kernels = 12;
    f->kernels = 3;
    x->kernels = 1;
    e->peak_mem_bytes = 1000;
    f->peak_mem_bytes = 800;
    x->status = FB_VS_ACCURACY_FAILED;
    snprintf(x->message, sizeof x->message, "max_rel_error 0.5 over 0.01");
}

static double num_at(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(it));
    return it->valuedouble;
}

static void assert_null_at(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNull(it))
        print_error("%s is not null\n", key);
    assert_true(cJSON_IsNull(it));
}

static void test_result_unknown_is_null(void **state)
{
    fb_result r;
    fb_result_init(&r);
    r.n_variants = 1;
    fb_variant_result_init(&r.variants[0], "eager");
    cJSON *j = fb_result_to_json(&r);
    assert_non_null(j);
    assert_null_at(j, "plan_ms");
    const cJSON *env = cJSON_GetObjectItem(j, "env");
    const char *env_keys[] = {"device_name", "device_uuid", "driver",  "cuda", "cudnn",
                              "cublas",      "torch",       "triton",  "cpu",  "blas",
                              "threads",     "fusionbench", "hostname"};
    for (size_t i = 0; i < sizeof env_keys / sizeof env_keys[0]; i++)
        assert_null_at(env, env_keys[i]);
    const cJSON *v = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "variants"), 0);
    assert_string_equal(cJSON_GetObjectItem(v, "name")->valuestring, "eager");
    assert_string_equal(cJSON_GetObjectItem(v, "status")->valuestring, "ok");
    assert_null(cJSON_GetObjectItem(v, "message"));
    const char *v_keys[] = {"kernels",       "kernel_time_ms", "busy_ms",        "idle_ms",
                            "fused_kernels", "fused_ops",      "peak_mem_bytes", "max_rel_error"};
    for (size_t i = 0; i < sizeof v_keys / sizeof v_keys[0]; i++)
        assert_null_at(v, v_keys[i]);
    const cJSON *lat = cJSON_GetObjectItem(v, "latency_ms");
    const char *l_keys[] = {"median", "mean", "stdev", "min", "max", "p90", "cv"};
    for (size_t i = 0; i < sizeof l_keys / sizeof l_keys[0]; i++)
        assert_null_at(lat, l_keys[i]);
    const cJSON *ci = cJSON_GetObjectItem(lat, "ci95");
    assert_int_equal(cJSON_GetArraySize(ci), 2);
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(ci, 0)));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(v, "samples_ms")), 0);
    assert_null(cJSON_GetObjectItem(v, "categories_ms")->child);
    cJSON_Delete(j);
    fb_result_free(&r);
}

static void test_result_known_values(void **state)
{
    fb_result r;
    make_result(&r);
    snprintf(r.env.cpu, sizeof r.env.cpu, "Xeon");
    r.env.threads = 2;
    r.plan_ms = 1.5;
    fb_variant_result *e = &r.variants[0];
    e->latency.ci95_lo = 1.9;
    e->latency.ci95_hi = 2.1;
    e->n_samples = 3;
    e->samples_ms = malloc(3 * sizeof(double));
    assert_non_null(e->samples_ms);
    e->samples_ms[0] = 1.0;
    e->samples_ms[1] = NAN;
    e->samples_ms[2] = 3.0;
    e->kernel_time_ms = 0.0; /* a real zero stays 0 */
    e->fused_kernels = 0;
    e->categories_ms[FB_KC_GEMM] = 1.25;
    e->categories_ms[FB_KC_COPY] = 0.0;
    cJSON *j = fb_result_to_json(&r);
    assert_non_null(j);
    assert_true(num_at(j, "plan_ms") == 1.5);
    const cJSON *env = cJSON_GetObjectItem(j, "env");
    assert_string_equal(cJSON_GetObjectItem(env, "cpu")->valuestring, "Xeon");
    assert_true(num_at(env, "threads") == 2);
    const cJSON *v = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "variants"), 0);
    const cJSON *lat = cJSON_GetObjectItem(v, "latency_ms");
    assert_true(num_at(lat, "median") == 2.0);
    const cJSON *ci = cJSON_GetObjectItem(lat, "ci95");
    assert_true(cJSON_GetArrayItem(ci, 1)->valuedouble == 2.1);
    const cJSON *samples = cJSON_GetObjectItem(v, "samples_ms");
    assert_int_equal(cJSON_GetArraySize(samples), 3);
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(samples, 1)));
    assert_true(cJSON_GetArrayItem(samples, 2)->valuedouble == 3.0);
    assert_true(num_at(v, "kernels") == 12);
    assert_true(num_at(v, "kernel_time_ms") == 0.0);
    assert_true(num_at(v, "fused_kernels") == 0);
    const cJSON *cats = cJSON_GetObjectItem(v, "categories_ms");
    assert_int_equal(cJSON_GetArraySize(cats), 2);
    assert_true(num_at(cats, "gemm") == 1.25);
    assert_true(num_at(cats, "copy") == 0.0);
    assert_null(cJSON_GetObjectItem(cats, "elementwise"));
    /* The printed text has no nan/inf tokens. */
    char *txt = cJSON_PrintUnformatted(j);
    assert_non_null(txt);
    assert_null(strstr(txt, "nan"));
    assert_null(strstr(txt, "inf"));
    cJSON_free(txt);
    cJSON_Delete(j);
    fb_result_free(&r);
    assert_null(r.variants[0].samples_ms);
}

static void test_result_comparison(void **state)
{
    fb_result r;
    make_result(&r);
    cJSON *j = fb_result_to_json(&r);
    assert_non_null(j);
    const cJSON *c = cJSON_GetObjectItem(j, "comparison");
    assert_string_equal(cJSON_GetObjectItem(c, "baseline")->valuestring, "eager");
    const cJSON *sp = cJSON_GetObjectItem(c, "speedup");
    const cJSON *kr = cJSON_GetObjectItem(c, "kernel_ratio");
    const cJSON *mr = cJSON_GetObjectItem(c, "memory_ratio");
    assert_true(num_at(sp, "fused") == 4.0);           /* 2.0 / 0.5 */
    assert_true(num_at(kr, "fused") == 0.25);          /* 3 / 12 */
    assert_true(num_at(mr, "fused") == 0.8);           /* 800 / 1000 */
    assert_null(cJSON_GetObjectItem(sp, "eager"));     /* the baseline is not listed */
    assert_null(cJSON_GetObjectItem(sp, "fused-bad")); /* accuracy_failed: no speedup */
    assert_null(cJSON_GetObjectItem(kr, "fused-bad"));
    assert_int_equal(cJSON_GetArraySize(sp), 1);
    const cJSON *bad = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "variants"), 2);
    assert_string_equal(cJSON_GetObjectItem(bad, "status")->valuestring, "accuracy_failed");
    assert_string_equal(cJSON_GetObjectItem(bad, "message")->valuestring,
                        "max_rel_error 0.5 over 0.01");
    cJSON_Delete(j);
    fb_result_free(&r);
}

static void test_result_comparison_unknowns(void **state)
{
    fb_result r;
    make_result(&r);
    r.variants[1].kernels = -1;        /* unknown: no kernel ratio */
    r.variants[0].peak_mem_bytes = -1; /* unknown baseline: no memory ratio */
    cJSON *j = fb_result_to_json(&r);
    const cJSON *c = cJSON_GetObjectItem(j, "comparison");
    assert_true(num_at(cJSON_GetObjectItem(c, "speedup"), "fused") == 4.0);
    assert_null(cJSON_GetObjectItem(c, "kernel_ratio")->child);
    assert_null(cJSON_GetObjectItem(c, "memory_ratio")->child);
    cJSON_Delete(j);
    /* A failed baseline gives no comparison at all. */
    r.variants[0].status = FB_VS_CRASHED;
    j = fb_result_to_json(&r);
    c = cJSON_GetObjectItem(j, "comparison");
    assert_null(cJSON_GetObjectItem(c, "speedup")->child);
    cJSON_Delete(j);
    /* So does a baseline that did not run. */
    r.variants[0].status = FB_VS_OK;
    snprintf(r.baseline, sizeof r.baseline, "nosuch");
    j = fb_result_to_json(&r);
    c = cJSON_GetObjectItem(j, "comparison");
    assert_string_equal(cJSON_GetObjectItem(c, "baseline")->valuestring, "nosuch");
    assert_null(cJSON_GetObjectItem(c, "speedup")->child);
    cJSON_Delete(j);
    fb_result_free(&r);
}

static void test_result_names(void **state)
{
    assert_string_equal(fb_vstatus_name(FB_VS_OK), "ok");
    assert_string_equal(fb_vstatus_name(FB_VS_ACCURACY_FAILED), "accuracy_failed");
    assert_string_equal(fb_vstatus_name(FB_VS_UNSUPPORTED), "unsupported");
    assert_string_equal(fb_vstatus_name(FB_VS_OOM), "oom");
    assert_string_equal(fb_vstatus_name(FB_VS_TIMEOUT), "timeout");
    assert_string_equal(fb_vstatus_name(FB_VS_CRASHED), "crashed");
    assert_string_equal(fb_vstatus_name(FB_VS_ERROR), "error");
    assert_string_equal(fb_kcat_name(FB_KC_GEMM), "gemm");
    assert_string_equal(fb_kcat_name(FB_KC_ELEMENTWISE), "elementwise");
    assert_string_equal(fb_kcat_name(FB_KC_REDUCTION), "reduction");
    assert_string_equal(fb_kcat_name(FB_KC_ATTENTION), "attention");
    assert_string_equal(fb_kcat_name(FB_KC_COPY), "copy");
    assert_string_equal(fb_kcat_name(FB_KC_OTHER), "other");
}

static void test_result_json_helpers(void **state)
{
    cJSON *a = fb_json_num_or_null(NAN), *b = fb_json_num_or_null(INFINITY);
    cJSON *c = fb_json_num_or_null(0.0), *d = fb_json_int_or_null(-1);
    cJSON *e = fb_json_int_or_null(0), *f = fb_json_int_or_null(1LL << 40);
    assert_true(cJSON_IsNull(a));
    assert_true(cJSON_IsNull(b));
    assert_true(cJSON_IsNumber(c) && c->valuedouble == 0.0);
    assert_true(cJSON_IsNull(d));
    assert_true(cJSON_IsNumber(e) && e->valuedouble == 0.0);
    assert_true(cJSON_IsNumber(f) && f->valuedouble == (double)(1LL << 40));
    cJSON *all[] = {a, b, c, d, e, f};
    for (int i = 0; i < 6; i++)
        cJSON_Delete(all[i]);
}

static void test_kernel_rows(void **state)
{
    fb_variant_result v;
    fb_variant_result_init(&v, "fused");
    v.n_kernel_rows = 2;
    v.kernel_rows = calloc(2, sizeof *v.kernel_rows);
    assert_non_null(v.kernel_rows);
    fb_kernel_row *k = &v.kernel_rows[0];
    snprintf(k->name, sizeof k->name, "gemm_bias_gelu_f32");
    k->category = FB_KC_GEMM;
    k->count = 2;
    k->total_ms = 1.5;
    k->mean_ms = 0.75;
    k->grid[0] = 4, k->grid[1] = 2, k->grid[2] = 1;
    k->block[0] = 128, k->block[1] = 1, k->block[2] = 1;
    k->n_ops = 3;
    snprintf(k->ops[0], FB_NAME_MAX, "matmul");
    snprintf(k->ops[1], FB_NAME_MAX, "add");
    snprintf(k->ops[2], FB_NAME_MAX, "gelu");
    v.kernel_rows[1].category = FB_KC_COPY;
    v.kernel_rows[1].mean_ms = NAN;
    cJSON *j = fb_kernel_rows_to_json(&v);
    assert_non_null(j);
    assert_int_equal(cJSON_GetArraySize(j), 2);
    const cJSON *r0 = cJSON_GetArrayItem(j, 0);
    assert_string_equal(cJSON_GetObjectItem(r0, "name")->valuestring, "gemm_bias_gelu_f32");
    assert_string_equal(cJSON_GetObjectItem(r0, "category")->valuestring, "gemm");
    assert_true(num_at(r0, "count") == 2);
    assert_true(num_at(r0, "total_ms") == 1.5);
    assert_true(num_at(r0, "mean_ms") == 0.75);
    const cJSON *grid = cJSON_GetObjectItem(r0, "grid");
    assert_int_equal(cJSON_GetArraySize(grid), 3);
    assert_int_equal(cJSON_GetArrayItem(grid, 0)->valueint, 4);
    assert_int_equal(cJSON_GetArrayItem(grid, 1)->valueint, 2);
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(r0, "block"), 0)->valueint, 128);
    const cJSON *ops = cJSON_GetObjectItem(r0, "ops");
    assert_int_equal(cJSON_GetArraySize(ops), 3);
    assert_string_equal(cJSON_GetArrayItem(ops, 2)->valuestring, "gelu");
    const cJSON *r1 = cJSON_GetArrayItem(j, 1);
    assert_string_equal(cJSON_GetObjectItem(r1, "category")->valuestring, "copy");
    assert_null_at(r1, "mean_ms");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r1, "ops")), 0);
    cJSON_Delete(j);
    /* Kernel rows stay out of the result body. */
    fb_result r;
    fb_result_init(&r);
    r.n_variants = 1;
    r.variants[0] = v;
    j = fb_result_to_json(&r);
    const cJSON *jv = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "variants"), 0);
    assert_null(cJSON_GetObjectItem(jv, "kernel_rows"));
    assert_null(cJSON_GetObjectItem(jv, "kernels_rows"));
    cJSON_Delete(j);
    fb_result_free(&r);
}

/* ---- catalog ---- */

static void test_catalog_workload(void **state)
{
    fb_workload_info w = {.name = "gemm_bias_gelu",
                          .engine = "native",
                          .domain = "pattern",
                          .description = "GEMM + bias + GELU",
                          .default_batch_size = 1,
                          .devices = {"cpu", NULL},
                          .dtypes = {"float32", NULL},
                          .variants = {"eager", "fused", NULL}};
    cJSON *j = fb_workload_info_to_json(&w);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "name")->valuestring, "gemm_bias_gelu");
    assert_string_equal(cJSON_GetObjectItem(j, "domain")->valuestring, "pattern");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "devices")), 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "variants")), 2);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "variants"), 1)->valuestring,
                        "fused");
    assert_true(num_at(j, "default_batch_size") == 1);
    cJSON_Delete(j);
    w.description = NULL;
    w.domain = "";
    j = fb_workload_info_to_json(&w);
    assert_null_at(j, "description");
    assert_null_at(j, "domain");
    assert_null(cJSON_GetObjectItem(j, "params")); /* undeclared: absent, not [] */
    cJSON_Delete(j);
}

/* Declared params: the entry lists them, a job's key outside them is refused
 * naming it and the list; an undeclared list or no params lets all pass. */
static void test_catalog_params(void **state)
{
    (void)state;
    fb_workload_info w = {.name = "softmax", .engine = "native", .params = "rows cols  threads"};
    cJSON *j = fb_workload_info_to_json(&w);
    const cJSON *arr = cJSON_GetObjectItem(j, "params");
    assert_int_equal(cJSON_GetArraySize(arr), 3); /* the double space is no empty name */
    assert_string_equal(cJSON_GetArrayItem(arr, 0)->valuestring, "rows");
    assert_string_equal(cJSON_GetArrayItem(arr, 2)->valuestring, "threads");
    cJSON_Delete(j);

    fb_err err;
    fb_err_clear(&err);
    cJSON *ok = cJSON_Parse("{\"rows\": 8, \"threads\": 2}");
    cJSON *bad = cJSON_Parse("{\"rows\": 8, \"image_size\": 112}");
    cJSON *empty = cJSON_CreateObject();
    assert_int_equal(fb_workload_params_check(&w, ok, &err), FB_OK);
    assert_int_equal(fb_workload_params_check(&w, empty, &err), FB_OK);
    assert_int_equal(fb_workload_params_check(&w, NULL, &err), FB_OK);
    assert_int_equal(fb_workload_params_check(&w, bad, &err), FB_EINVAL);
    assert_string_equal(err.field, "params.image_size");
    assert_string_equal(err.msg, "params.image_size is not a parameter of softmax (engine native), "
                                 "which takes: rows, cols, threads");
    w.params = NULL; /* not declared: anything goes (the inductor engine's) */
    assert_int_equal(fb_workload_params_check(&w, bad, &err), FB_OK);
    w.params = ""; /* declared as none */
    fb_err_clear(&err);
    assert_int_equal(fb_workload_params_check(&w, ok, &err), FB_EINVAL);
    assert_string_equal(err.field, "params.rows");
    assert_non_null(strstr(err.msg, "which takes: none"));
    cJSON_Delete(ok);
    cJSON_Delete(bad);
    cJSON_Delete(empty);
}

static void test_catalog_device(void **state)
{
    fb_device_info d;
    memset(&d, 0, sizeof d);
    snprintf(d.kind, sizeof d.kind, "cpu");
    snprintf(d.name, sizeof d.name, "AMD EPYC");
    d.threads = 2;
    d.memory_bytes = 1LL << 33;
    cJSON *j = fb_device_info_to_json(&d);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "kind")->valuestring, "cpu");
    assert_string_equal(cJSON_GetObjectItem(j, "name")->valuestring, "AMD EPYC");
    assert_true(num_at(j, "memory_bytes") == (double)(1LL << 33));
    assert_true(num_at(j, "threads") == 2);
    assert_null_at(j, "uuid");
    assert_null_at(j, "driver");
    assert_null_at(j, "compute_capability");
    cJSON_Delete(j);
    d.memory_bytes = -1;
    d.threads = 0;
    j = fb_device_info_to_json(&d);
    assert_null_at(j, "memory_bytes");
    assert_null_at(j, "threads");
    cJSON_Delete(j);
}

/* ---- schema ---- */

static const char *const spec_keys[] = {"workload",     "engine",   "device", "batch_size",
                                        "dtype",        "variants", "params", "warmup",
                                        "iterations",   "priority", "labels", "timeout_s",
                                        "max_attempts", "explain",  NULL};

/* Reads the schema from $FB_SOURCE_DIR, or from next to this source file. */
static cJSON *load_schema(void)
{
    char path[1024];
    const char *root = getenv("FB_SOURCE_DIR");
    if (root) {
        snprintf(path, sizeof path, "%s/proto/schema/job_spec.schema.json", root);
    } else {
        const char *suffix = "tests/unit/test_proto.c";
        size_t n = strlen(__FILE__), m = strlen(suffix);
        assert_true(n >= m && strcmp(__FILE__ + n - m, suffix) == 0);
        snprintf(path, sizeof path, "%.*sproto/schema/job_spec.schema.json", (int)(n - m),
                 __FILE__);
    }
    FILE *f = fopen(path, "rb");
    if (!f)
        print_error("cannot open %s\n", path);
    assert_non_null(f);
    static char buf[64 * 1024];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    assert_true(len > 0 && len < sizeof buf - 1);
    buf[len] = '\0';
    cJSON *j = cJSON_Parse(buf);
    assert_non_null(j);
    return j;
}

static double schema_num(const cJSON *props, const char *key, const char *what)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(props, key);
    assert_non_null(p);
    return num_at(p, what);
}

static void test_schema_matches_decoder(void **state)
{
    cJSON *s = load_schema();
    assert_string_equal(cJSON_GetObjectItem(s, "$schema")->valuestring,
                        "https://json-schema.org/draft/2020-12/schema");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(s, "additionalProperties")));
    const cJSON *props = cJSON_GetObjectItem(s, "properties");
    int n = 0;
    for (; spec_keys[n]; n++)
        assert_non_null(cJSON_GetObjectItemCaseSensitive(props, spec_keys[n]));
    assert_int_equal(cJSON_GetArraySize(props), n);
    /* Every schema property is a field the decoder knows (a wrong value is an
     * error about the value, never "unknown field"). */
    char buf[256];
    for (const cJSON *p = props->child; p; p = p->next) {
        with_field(buf, sizeof buf, p->string, "[[[]]]");
        fb_spec sp;
        fb_err err;
        fb_code rc = fb_spec_parse(buf, strlen(buf), &sp, &err);
        /* "workload" is then repeated, which is an error of its own. */
        assert_int_equal(rc, FB_EINVAL);
        assert_null(strstr(err.msg, "unknown field"));
    }
    assert_true(schema_num(props, "batch_size", "maximum") == FB_MAX_BATCH);
    assert_true(schema_num(props, "warmup", "maximum") == FB_MAX_WARMUP);
    assert_true(schema_num(props, "iterations", "maximum") == FB_MAX_ITERATIONS);
    assert_true(schema_num(props, "variants", "maxItems") == FB_MAX_VARIANTS);
    assert_true(schema_num(props, "labels", "maxProperties") == FB_MAX_LABELS);
    /* params' values: numbers bounded as the decoder bounds them. */
    const cJSON *params = cJSON_GetObjectItem(props, "params");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(params, "additionalProperties"), "$ref")
            ->valuestring,
        "#/$defs/param");
    const cJSON *num = cJSON_GetArrayItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(s, "$defs"), "param"), "anyOf"),
        0);
    assert_string_equal(cJSON_GetObjectItem(num, "type")->valuestring, "number");
    assert_true(num_at(num, "maximum") == FB_PARAM_NUM_MAX);
    assert_true(num_at(num, "minimum") == -FB_PARAM_NUM_MAX);
    const cJSON *req = cJSON_GetObjectItem(s, "required");
    assert_int_equal(cJSON_GetArraySize(req), 1);
    assert_string_equal(cJSON_GetArrayItem(req, 0)->valuestring, "workload");
    cJSON_Delete(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_full_fields),
        cmocka_unit_test(test_spec_round_trip_full),
        cmocka_unit_test(test_spec_unset_sentinels),
        cmocka_unit_test(test_spec_defaults_round_trip),
        cmocka_unit_test(test_spec_defaults_keep_set_fields),
        cmocka_unit_test(test_spec_check_resolved),
        cmocka_unit_test(test_spec_from_json_not_consumed),
        cmocka_unit_test(test_spec_whitespace_and_unterminated),
        cmocka_unit_test(test_spec_not_json),
        cmocka_unit_test(test_spec_not_object),
        cmocka_unit_test(test_spec_missing_workload),
        cmocka_unit_test(test_spec_unknown_and_repeated_keys),
        cmocka_unit_test(test_spec_bad_names),
        cmocka_unit_test(test_spec_name_valid),
        cmocka_unit_test(test_spec_model_ref),
        cmocka_unit_test(test_spec_device_dtype),
        cmocka_unit_test(test_spec_int_ranges),
        cmocka_unit_test(test_spec_int_message),
        cmocka_unit_test(test_spec_variants),
        cmocka_unit_test(test_spec_labels),
        cmocka_unit_test(test_spec_params),
        cmocka_unit_test(test_spec_params_number_range),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_spec_params_depth),
        cmocka_unit_test(test_spec_too_big),
        cmocka_unit_test(test_spec_param_int_bool),
        cmocka_unit_test(test_spec_unfuse),
        cmocka_unit_test(test_result_unknown_is_null),
        cmocka_unit_test(test_result_known_values),
        cmocka_unit_test(test_result_comparison),
        cmocka_unit_test(test_result_comparison_unknowns),
        cmocka_unit_test(test_result_names),
        cmocka_unit_test(test_result_json_helpers),
        cmocka_unit_test(test_kernel_rows),
        cmocka_unit_test(test_catalog_workload),
        cmocka_unit_test(test_catalog_params),
        cmocka_unit_test(test_catalog_device),
        cmocka_unit_test(test_schema_matches_decoder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
