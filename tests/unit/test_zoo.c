/* test_zoo: the native model zoo's graph IR, JSON form, planner, memory planner,
 * safetensors reader and input decoders; every model's fused plan against its
 * eager plan at small sizes (PyTorch parity is tests/models/). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gr.h"
#include "gr_input.h"
#include "gr_models.h"
#include "gr_plan.h"
#include "gr_st.h"
#include "nat.h"

static void make_spec(fb_spec *spec, const char *workload, const char *params, int batch)
{
    fb_spec_init(spec);
    snprintf(spec->workload, sizeof spec->workload, "%s", workload);
    spec->batch_size = batch;
    spec->params = cJSON_Parse(params);
    assert_non_null(spec->params);
}

static double rel_err(const float *a, const float *b, size_t n)
{
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        md = d > md || isnan(d) ? d : md;
        mr = fabs(b[i]) > mr ? fabs(b[i]) : mr;
    }
    return mr > 0 ? md / mr : md;
}

static int fused_launches(const nat_plan *p)
{
    int n = 0;
    for (int i = 0; i < p->n; i++)
        n += p->launches[i].n_ops >= 2;
    return n;
}

/* Builds workload with params, runs both plans, checks fused against eager and
 * returns the ctx (caller frees). */
static nat_ctx *build_run(const char *workload, const char *params, int batch)
{
    fb_spec spec;
    fb_err err = {0};
    nat_ctx *ctx = NULL;
    make_spec(&spec, workload, params, batch);
    fb_code rc = nat_ctx_build(&spec, &ctx, &err);
    if (rc)
        fprintf(stderr, "%s: %s (%s)\n", workload, err.msg, err.field);
    assert_int_equal(rc, FB_OK);
    fb_spec_free(&spec);
    nat_plan_run(&ctx->plans[NAT_EAGER]);
    nat_plan_run(&ctx->plans[NAT_FUSED]);
    assert_int_equal(ctx->plans[NAT_EAGER].out_n, ctx->plans[NAT_FUSED].out_n);
    double e =
        rel_err(ctx->plans[NAT_FUSED].out, ctx->plans[NAT_EAGER].out, ctx->plans[NAT_EAGER].out_n);
    assert_true(e <= 1e-4);
    /* never all zeros: the output varies */
    const float *o = ctx->plans[NAT_EAGER].out;
    bool varies = false;
    for (size_t i = 1; i < ctx->plans[NAT_EAGER].out_n && !varies; i++)
        varies = o[i] != o[0];
    assert_true(varies);
    return ctx;
}

static int64_t buf_floats(const nat_ctx *ctx, const char *name)
{
    for (int i = 0; i < ctx->n_bufs; i++)
        if (strcmp(ctx->bufs[i].name, name) == 0)
            return (int64_t)ctx->bufs[i].n;
    return -1;
}

/* ---- models ---- */

static void test_models_fused_match_eager(void **state)
{
    (void)state;
    static const struct {
        const char *w, *p;
        int batch;
    } cases[] = {
        {"resnet18", "{\"image\":64}", 2},
        {"resnet50", "{\"image\":64}", 1},
        {"mobilenet_v2", "{\"image\":64}", 1},
        {"vit_b_16", "{\"image\":32,\"layers\":1}", 2},
        {"bert_base", "{\"seq\":8,\"layers\":1}", 2},
        {"gpt2", "{\"seq\":8,\"layers\":1}", 1},
        {"mobilenet_v3_large", "{\"image\":64}", 1},
        {"efficientnet_b0", "{\"image\":64}", 1},
        {"convnext_tiny", "{\"image\":64}", 1},
        {"whisper_tiny", "{\"frames\":200,\"layers\":1}", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nat_ctx *ctx = build_run(cases[i].w, cases[i].p, cases[i].batch);
        assert_true(ctx->plans[NAT_FUSED].n < ctx->plans[NAT_EAGER].n);
        assert_int_equal(fused_launches(&ctx->plans[NAT_EAGER]), 0);
        assert_true(fused_launches(&ctx->plans[NAT_FUSED]) > 0);
        nat_ctx_free(ctx);
    }
}

/* resnet18's eager plan: 20 convs + 20 BNs + 17 ReLUs + 8 adds + pool + pools
 * + fc = 68 launches; fused: every conv takes its BN (and ReLU / residual). */
static void test_resnet18_counts_and_memory(void **state)
{
    (void)state;
    nat_ctx *ctx = build_run("resnet18", "{\"image\":64}", 1);
    assert_int_equal(ctx->plans[NAT_EAGER].n, 68);
    assert_int_equal(ctx->plans[NAT_FUSED].n, 23);
    assert_int_equal(fused_launches(&ctx->plans[NAT_FUSED]), 20);
    int64_t ae = buf_floats(ctx, "arena.eager"), af = buf_floats(ctx, "arena.fused");
    assert_true(ae > 0 && af > 0 && af < ae);
    /* reuse: the arena is far below the sum of the 67 eager activations
     * (the stem alone: 3 tensors of 64x32x32 = 196608 floats) */
    assert_true(ae < 4 * 64 * 32 * 32);
    /* the fused variant does not count the raw conv weights, eager does not
     * count the folded ones */
    assert_true(nat_ctx_variant_bytes(ctx, NAT_FUSED) < nat_ctx_variant_bytes(ctx, NAT_EAGER));
    nat_ctx_free(ctx);
}

static void test_disable_rules(void **state)
{
    (void)state;
    nat_ctx *ctx = build_run("resnet18", "{\"image\":32,\"disable_rules\":[\"bn_fold\"]}", 1);
    /* without bn_fold, only the downsample-free ReLU/residual epilogues fuse
     * into convs that have no BN in between: none; BN+ReLU chains do not form
     * element chains (BN is no element op) */
    assert_int_equal(ctx->plans[NAT_FUSED].n, 60);
    nat_ctx_free(ctx);
    fb_spec spec;
    fb_err err = {0};
    make_spec(&spec, "resnet18", "{\"image\":32,\"disable_rules\":[\"bn_fold\",\"nope\"]}", 1);
    assert_int_equal(nat_ctx_build(&spec, &ctx, &err), FB_EINVAL);
    assert_string_equal(err.field, "params.disable_rules[1]");
    fb_spec_free(&spec);
}

/* ---- user graphs ---- */

static const char *k_graph =
    "{\"graph\":{\"tensors\":[{\"name\":\"input\",\"kind\":\"input\",\"shape\":[2,3,8,8]},"
    "{\"name\":\"w\",\"kind\":\"weight\",\"shape\":[4,3,3,3]},"
    "{\"name\":\"b\",\"kind\":\"weight\",\"shape\":[4],\"init\":\"small\"}],"
    "\"nodes\":[{\"op\":\"conv2d\",\"name\":\"c\",\"inputs\":[0,1,2],\"pad\":[1,1]},"
    "{\"op\":\"relu\",\"inputs\":[3]},{\"op\":\"flatten\",\"inputs\":[4],\"axis\":1}]}}";

static void test_user_graph(void **state)
{
    (void)state;
    nat_ctx *ctx = build_run("graph", k_graph, 1);
    assert_int_equal(ctx->plans[NAT_EAGER].n, 2); /* conv, relu; flatten is a view */
    assert_int_equal(ctx->plans[NAT_FUSED].n, 1);
    assert_string_equal(ctx->plans[NAT_FUSED].launches[0].rule, "epilogue");
    assert_string_equal(ctx->plans[NAT_FUSED].launches[0].kind, "tensor+element");
    assert_int_equal(ctx->plans[NAT_EAGER].out_n, 2 * 4 * 8 * 8);
    nat_ctx_free(ctx);
}

static void expect_graph_error(const char *params, const char *field)
{
    fb_spec spec;
    fb_err err = {0};
    nat_ctx *ctx = NULL;
    make_spec(&spec, "graph", params, 1);
    assert_int_equal(nat_ctx_build(&spec, &ctx, &err), FB_EINVAL);
    assert_null(ctx);
    assert_string_equal(err.field, field);
    fb_spec_free(&spec);
}

static void test_user_graph_errors(void **state)
{
    (void)state;
    const char *t = "\"tensors\":[{\"name\":\"input\",\"kind\":\"input\",\"shape\":[1,4]}]";
    char buf[512];
    snprintf(buf, sizeof buf, "{\"graph\":{%s,\"nodes\":[{\"op\":\"frobnicate\",\"inputs\":[0]}]}}",
             t);
    expect_graph_error(buf, "params.graph.nodes[0].op");
    snprintf(buf, sizeof buf, "{\"graph\":{%s,\"nodes\":[{\"op\":\"relu\",\"inputs\":[1]}]}}", t);
    expect_graph_error(buf, "params.graph.nodes[0].inputs");
    snprintf(buf, sizeof buf,
             "{\"graph\":{%s,\"nodes\":[{\"op\":\"softmax\",\"inputs\":[0],\"axis\":9}]}}", t);
    expect_graph_error(buf, "params.graph.nodes[0].axis");
    snprintf(buf, sizeof buf, "{\"graph\":{%s,\"nodes\":[{\"op\":\"matmul\",\"inputs\":[0,0]}]}}",
             t);
    expect_graph_error(buf, "params.graph.nodes[0]"); /* [1,4] x [1,4]: shapes do not fit */
    expect_graph_error("{\"graph\":{\"tensors\":[{\"name\":\"x\",\"kind\":\"input\","
                       "\"shape\":[65536,65536]}],\"nodes\":[{\"op\":\"relu\",\"inputs\":[0]}]}}",
                       "params.graph.tensors[0].shape");
    expect_graph_error("{\"nope\":1}", "params.graph");
}

static void test_graph_json_roundtrip(void **state)
{
    (void)state;
    gr_graph g, h;
    gr_init(&g);
    gr_init(&h);
    fb_err err = {0};
    gb b = {&g, &err};
    gr_cfg c = {.batch = 1, .image = 64, .classes = 10};
    assert_true(gr_resnet18(&b, &c) >= 0);
    cJSON *j = gr_to_json(&g);
    assert_non_null(j);
    assert_int_equal(gr_from_json(&h, j, "graph", &err), FB_OK);
    assert_int_equal(h.n_nodes, g.n_nodes);
    assert_int_equal(h.n_tensors, g.n_tensors);
    const gr_tensor *o = &h.tensors[h.output];
    assert_int_equal(o->rank, 2);
    assert_int_equal(o->dims[1], 10);
    cJSON_Delete(j);
    gr_free(&g);
    gr_free(&h);
}

/* ---- safetensors ---- */

static void test_safetensors_header(void **state)
{
    (void)state;
    gr_st st = {0};
    fb_err err = {0};
    const char *ok = "{\"a\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
                     "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[12,20]},"
                     "\"__metadata__\":{\"format\":\"pt\"}}";
    assert_int_equal(gr_st_parse_header(ok, strlen(ok), 20, &st, "w", &err), FB_OK);
    assert_int_equal(st.n, 2);
    assert_int_equal(gr_st_find(&st, "a")->dtype, GR_ST_F16);
    float out[6];
    assert_int_equal(gr_st_read(&st, "b", 1, (int64_t[]){1}, out, "w", &err), FB_EINVAL);
    assert_int_equal(gr_st_read(&st, "c", 1, (int64_t[]){1}, out, "w", &err), FB_EINVAL);
    gr_st_close(&st);
    static const char *const bad[] = {
        "[]",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}",  /* size */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,800]}}", /* past data */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1e300,1e300],\"data_offsets\":[0,8]}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&st, 0, sizeof st);
        assert_int_equal(gr_st_parse_header(bad[i], strlen(bad[i]), 20, &st, "w", &err), FB_EINVAL);
        assert_string_equal(err.field, "w");
        gr_st_close(&st);
    }
}

/* ---- inputs ---- */

static void test_ppm_and_inputs(void **state)
{
    (void)state;
    fb_err err = {0};
    int w, h;
    const unsigned char *rgb;
    const unsigned char good[] = "P6\n# c\n2 1\n255\n\x01\x02\x03\x04\x05\x06";
    assert_int_equal(gr_ppm_parse(good, sizeof good - 1, &w, &h, &rgb, &err), FB_OK);
    assert_int_equal(w, 2);
    assert_int_equal(rgb[5], 6);
    const unsigned char short_px[] = "P6 2 2 255\n\x01\x02\x03";
    assert_int_equal(gr_ppm_parse(short_px, sizeof short_px - 1, &w, &h, &rgb, &err), FB_EINVAL);
    const unsigned char p3[] = "P3 1 1 255\n1 2 3";
    assert_int_equal(gr_ppm_parse(p3, sizeof p3 - 1, &w, &h, &rgb, &err), FB_EINVAL);
    float img[2 * 3 * 16 * 16], ids[2 * 12];
    assert_int_equal(gr_input_images(img, 2, 16, &err), FB_OK);
    double s = 0;
    for (size_t i = 0; i < sizeof img / sizeof img[0]; i++)
        s += fabs(img[i]);
    assert_true(s > 100.0); /* normalized pixels, not zeros */
    assert_int_equal(gr_input_tokens(ids, 2, 12, 30522, &err), FB_OK);
    assert_true(ids[0] == 101.0f && ids[1] != ids[2]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_fused_match_eager),
        cmocka_unit_test(test_resnet18_counts_and_memory),
        cmocka_unit_test(test_disable_rules),
        cmocka_unit_test(test_user_graph),
        cmocka_unit_test(test_user_graph_errors),
        cmocka_unit_test(test_graph_json_roundtrip),
        cmocka_unit_test(test_safetensors_header),
        cmocka_unit_test(test_ppm_and_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
