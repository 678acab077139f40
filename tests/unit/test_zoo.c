/* test_zoo: the native model zoo's graph IR, JSON form, planner, memory planner,
 * safetensors reader and input decoders; every model's fused plan against its
 * eager plan at small sizes (PyTorch parity is tests/models/). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fb_cpu.h"
#include "gr.h"
#include "gr_cost.h"
#include "gr_input.h"
#include "gr_kern.h"
#include "gr_models.h"
#include "gr_plan.h"
#include "gr_st.h"
#include "gr_zoo.h"
#include "nat.h"
#include "nat_kern_cpu.h"

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
    fb_code rc = gr_ctx_build(&spec, &ctx, &err);
    if (rc)
        fprintf(stderr, "%s: %s (%s)\n", workload, err.msg, err.field);
    assert_int_equal(rc, FB_OK);
    fb_spec_free(&spec);
    int bad = 0;
    for (int v = NAT_EAGER; v <= NAT_FUSED; v++)
        if (!nat_plan_check(&ctx->plans[v], &bad))
            fail_msg("%s variant %d: launch %d (%s) has no descriptor or lacks a buffer", workload,
                     v, bad, ctx->plans[v].launches[bad].name);
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

/* ---- the params each workload declares (its catalog entry's "params") ---- */

/* Every param a workload declares as its own is one its build reads: given
 * true (no size, file or graph is a boolean) the build fails naming it.  A
 * declared param nothing read would be accepted at submit and ignored. */
static void check_declared_read(const nat_pattern *pat)
{
    char own[512];
    snprintf(own, sizeof own, "%s", pat->info.params);
    char *eng = strstr(own, NAT_PARAMS_ENGINE); /* the engine's, read elsewhere */
    assert_non_null(eng);
    *eng = '\0';
    int n = 0;
    for (char *save = NULL, *key = strtok_r(own, " ", &save); key;
         key = strtok_r(NULL, " ", &save), n++) {
        char params[128], want[80];
        snprintf(params, sizeof params, "{\"%s\": true}", key);
        snprintf(want, sizeof want, "params.%s", key);
        fb_spec spec;
        fb_err err = {0};
        nat_ctx *ctx = NULL;
        make_spec(&spec, pat->info.name, params, 1);
        fb_code rc = gr_ctx_build(&spec, &ctx, &err);
        if (rc != FB_EINVAL || strncmp(err.field, want, strlen(want)) != 0)
            fail_msg("%s: params.%s declared, and a build given true for it answered %d (%s: %s)",
                     pat->info.name, key, rc, err.field, err.msg);
        nat_ctx_free(ctx);
        fb_spec_free(&spec);
    }
    assert_true(n >= 1);
}

/* The kernels this run checks: under FUSIONBENCH_NATIVE_ISA=avx2
 * (unit.test_zoo_avx2) the 8-lane ones, or the models would be checked on the
 * wide kernels again. */
static void test_isa_in_use(void **state)
{
    (void)state;
    const char *v = getenv("FUSIONBENCH_NATIVE_ISA");
    __builtin_cpu_init();
    if (v && strcmp(v, "avx2") == 0)
        assert_false(nat_v16_available());
    else
        assert_int_equal(nat_v16_available(), __builtin_cpu_supports("avx512f") != 0);
}

static void test_declared_params_are_read(void **state)
{
    (void)state;
    for (int i = 0; nat_patterns[i]; i++)
        check_declared_read(nat_patterns[i]);
    for (int i = 0; gr_models[i]; i++)
        check_declared_read(gr_models[i]);
    /* the sizes a model's config lacks are not its params: resnet18 has no seq */
    const nat_pattern *r18 = gr_workload_find("resnet18");
    assert_non_null(r18);
    assert_null(strstr(r18->info.params, "seq"));
    assert_non_null(strstr(r18->info.params, "image classes"));
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
    assert_int_equal(gr_ctx_build(&spec, &ctx, &err), FB_EINVAL);
    assert_string_equal(err.field, "params.disable_rules[1]");
    fb_spec_free(&spec);
}

/* The group ids of a fused plan's launches, as a bit set (ids < 64). */
static uint64_t group_ids(const nat_plan *p, int *launches_of_3)
{
    uint64_t ids = 0;
    *launches_of_3 = 0;
    for (int i = 0; i < p->n; i++) {
        int g = p->launches[i].group;
        assert_true(g >= -1 && g < 64);
        assert_true((g >= 0) == (p->launches[i].n_ops >= 2)); /* a group: a fused launch */
        if (g >= 0)
            ids |= 1ull << g;
        *launches_of_3 += g == 3;
    }
    return ids;
}

/* params.unfuse leaves exactly the groups named as one launch per op, every
 * other group with its id; the output stays eager's.  Bad ids name the
 * field; a pattern (one group: its eager variant is it unfused) refuses. */
static void test_unfuse(void **state)
{
    (void)state;
    nat_ctx *base = build_run("resnet18", "{\"image\":32}", 1);
    int n3 = 0, n3u = 0;
    uint64_t ids = group_ids(&base->plans[NAT_FUSED], &n3);
    assert_int_equal(ids, (1ull << 20) - 1); /* 20 groups, ids 0..19 */
    assert_int_equal(n3, 1);
    /* the eager launches group 3 replaced (conv, batch_norm, relu) carry its id */
    int e3 = 0;
    for (int i = 0; i < base->plans[NAT_EAGER].n; i++)
        e3 += base->plans[NAT_EAGER].launches[i].group == 3;
    assert_int_equal(e3, 3);
    /* group 3 of resnet18: conv + bn + relu */
    nat_ctx *un = build_run("resnet18", "{\"image\":32,\"unfuse\":[3]}", 1);
    uint64_t ids_un = group_ids(&un->plans[NAT_FUSED], &n3u);
    assert_int_equal(ids_un, ids & ~(1ull << 3));
    assert_int_equal(n3u, 0);
    assert_int_equal(un->plans[NAT_FUSED].n, base->plans[NAT_FUSED].n + 2);
    nat_ctx_free(un);
    un = build_run("resnet18",
                   "{\"image\":32,\"unfuse\":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,"
                   "16,17,18,19]}",
                   1);
    assert_int_equal(un->plans[NAT_FUSED].n, base->plans[NAT_EAGER].n);
    assert_int_equal(fused_launches(&un->plans[NAT_FUSED]), 0);
    nat_ctx_free(un);
    nat_ctx_free(base);
    static const struct {
        const char *w, *p, *field;
    } bad[] = {
        {"resnet18", "{\"image\":32,\"unfuse\":[20]}", "params.unfuse[0]"},
        {"resnet18", "{\"image\":32,\"unfuse\":[1,-1]}", "params.unfuse[1]"},
        {"resnet18", "{\"image\":32,\"unfuse\":[1.5]}", "params.unfuse[0]"},
        {"resnet18", "{\"image\":32,\"unfuse\":3}", "params.unfuse"},
        {"softmax", "{\"rows\":8,\"cols\":8,\"unfuse\":[0]}", "params.unfuse"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fb_spec spec;
        fb_err err = {0};
        nat_ctx *ctx = NULL;
        make_spec(&spec, bad[i].w, bad[i].p, 1);
        assert_int_equal(gr_ctx_build(&spec, &ctx, &err), FB_EINVAL);
        assert_string_equal(err.field, bad[i].field);
        assert_null(ctx);
        fb_spec_free(&spec);
    }
}

/* The planner's choices (the cost planner's, gr_cost.h): a group kept, split
 * after its folded batch norm (the convolution keeps the group's id), or
 * unfused; unfuse wins over a choice.  And the decision cache's key: another
 * build, machine or thread count is another key. */
static void test_planner_choices(void **state)
{
    (void)state;
    gr_graph g;
    gr_init(&g);
    gb b = {&g, NULL};
    fb_err err = {0};
    b.err = &err;
    gr_cfg c = {.batch = 1, .image = 32, .classes = 10};
    assert_true(gr_resnet18(&b, &c) >= 0);
    gr_groups plain = {0}, chosen = {0}, un = {0};
    assert_int_equal(gr_plan_groups(&g, true, 0, NULL, NULL, &plain, &err), FB_OK);
    unsigned char cs[20] = {0};
    gr_choices ch = {.n = 20, .c = cs};
    cs[0] = GR_SPLIT;  /* group 0: conv1 + bn1 + relu */
    cs[3] = GR_UNFUSE; /* group 3: conv + bn + relu */
    assert_int_equal(gr_plan_groups(&g, true, 0, NULL, &ch, &chosen, &err), FB_OK);
    assert_int_equal(chosen.n, plain.n + 1 + 2);
    const gr_group *g0 = NULL, *after = NULL;
    for (int i = 0; i < chosen.n; i++)
        if (chosen.g[i].fid == 0) {
            g0 = &chosen.g[i];
            after = &chosen.g[i + 1];
        }
    assert_non_null(g0);
    assert_int_equal(g0->n, 2); /* conv + its folded batch norm */
    assert_string_equal(gr_group_rule(g0), "bn_fold");
    assert_int_equal(after->n, 1);
    assert_int_equal(g.nodes[after->nodes[0]].op, GR_RELU);
    for (int i = 0; i < chosen.n; i++)
        assert_int_not_equal(chosen.g[i].fid, 3);
    gr_unfuse u = {.n = 1, .ids = {0}}; /* unfuse over a choice: one op each */
    assert_int_equal(gr_plan_groups(&g, true, 0, &u, &ch, &un, &err), FB_OK);
    assert_int_equal(un.n, plain.n + 2 + 2);
    gr_groups_free(&plain);
    gr_groups_free(&chosen);
    gr_groups_free(&un);
    gr_free(&g);

    char c1[1024], c2[1024], c3[1024], k1[17], k2[17], k3[17], k4[17];
    setenv("FUSIONBENCH_BUILD_ID", "build-a", 1);
    gr_cost_context(1, true, NULL, c1, sizeof c1);
    gr_cost_context(2, true, NULL, c2, sizeof c2);
    setenv("FUSIONBENCH_BUILD_ID", "build-b", 1);
    gr_cost_context(1, true, NULL, c3, sizeof c3);
    unsetenv("FUSIONBENCH_BUILD_ID");
    assert_non_null(strstr(c1, "build-a"));
    assert_non_null(strstr(c1, "threads 1|packed"));
    /* the kernels' width: a narrowed run (unit.test_zoo_avx2) keys its own */
    assert_non_null(strstr(c1, fb_cpu_wide() ? "|packed|16 lanes" : "|packed|8 lanes"));
    gr_cost_key("conv", c1, k1);
    gr_cost_key("conv", c2, k2);
    gr_cost_key("conv", c3, k3);
    gr_cost_key("conv", "v1|another machine x4|build-a|threads 1|packed", k4);
    assert_int_equal(strlen(k1), 16);
    assert_string_not_equal(k1, k2);
    assert_string_not_equal(k1, k3);
    assert_string_not_equal(k1, k4);
    gr_cost_key("conv", c1, k2);
    assert_string_equal(k1, k2);
    /* a device's context: its string, not the CPU's threads */
    setenv("FUSIONBENCH_BUILD_ID", "build-a", 1);
    gr_cost_context(1, true, "cuda H100 sm_90|float16", c2, sizeof c2);
    gr_cost_context(2, false, "cuda H100 sm_90|float16", c3, sizeof c3);
    unsetenv("FUSIONBENCH_BUILD_ID");
    assert_string_equal(c2, "v1|cuda H100 sm_90|float16|build-a");
    assert_string_equal(c2, c3);
}

/* A job never names a file on the host (issue 13, item 1): a path is refused
 * before anything is opened, and so is a name the weights folder lacks. */
static void test_weights_stay_in_folder(void **state)
{
    static const char *const params[] = {
        "{\"image\":32,\"weights\":\"/etc/passwd\"}",
        "{\"image\":32,\"weights\":\"../../etc/passwd\"}",
        "{\"image\":32,\"input\":\"/dev/zero\"}",
        "{\"image\":32,\"weights\":\"no-such-file.safetensors\"}",
    };
    static const char *const fields[] = {"params.weights", "params.weights", "params.input",
                                         "params.weights"};
    (void)state;
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        nat_ctx *ctx = NULL;
        fb_spec spec;
        fb_err err = {0};
        make_spec(&spec, "resnet18", params[i], 1);
        assert_int_equal(gr_ctx_build(&spec, &ctx, &err), FB_EINVAL);
        assert_string_equal(err.field, fields[i]);
        assert_null(strstr(err.msg, "/etc"));
        assert_null(strstr(err.msg, "/dev"));
        fb_spec_free(&spec);
    }
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

/* conv c, then conv d, then relu(c + d): c's group takes the add and the relu
 * although d is made after c, and runs after d (a group runs where its last
 * node is). */
static const char *k_graph_late_residual =
    "{\"graph\":{\"tensors\":[{\"name\":\"input\",\"kind\":\"input\",\"shape\":[2,3,8,8]},"
    "{\"name\":\"w\",\"kind\":\"weight\",\"shape\":[4,3,3,3]},"
    "{\"name\":\"b\",\"kind\":\"weight\",\"shape\":[4],\"init\":\"small\"},"
    "{\"name\":\"w2\",\"kind\":\"weight\",\"shape\":[4,3,3,3]}],"
    "\"nodes\":[{\"op\":\"conv2d\",\"name\":\"c\",\"inputs\":[0,1,2],\"pad\":[1,1]},"
    "{\"op\":\"conv2d\",\"name\":\"d\",\"inputs\":[0,3],\"pad\":[1,1]},"
    "{\"op\":\"add\",\"inputs\":[4,5]},{\"op\":\"relu\",\"inputs\":[6]}]}}";

static void test_user_graph_late_residual(void **state)
{
    (void)state;
    nat_ctx *ctx = build_run("graph", k_graph_late_residual, 1); /* fused matches eager */
    const nat_plan *f = &ctx->plans[NAT_FUSED];
    assert_int_equal(ctx->plans[NAT_EAGER].n, 4);
    assert_int_equal(f->n, 2);
    assert_null(f->launches[0].rule); /* d alone */
    assert_string_equal(f->launches[1].rule, "residual_epilogue");
    assert_int_equal(f->launches[1].n_ops, 3); /* c, add, relu */
    nat_ctx_free(ctx);
}

static void expect_graph_error(const char *params, const char *field)
{
    fb_spec spec;
    fb_err err = {0};
    nat_ctx *ctx = NULL;
    make_spec(&spec, "graph", params, 1);
    assert_int_equal(gr_ctx_build(&spec, &ctx, &err), FB_EINVAL);
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
    /* More batch items than the sentence has tokens: each item starts further
     * into it, wrapping (batch 32 used to read past the sentence). */
    enum { B = 64, S = 128 }; /* item 0 holds the whole sentence and its [SEP] */
    static float many[B * S];
    assert_int_equal(gr_input_tokens(many, B, S, 30522, &err), FB_OK);
    for (int i = 0; i < B * S; i++) {
        bool seen = false;
        for (int j = 0; j < S && !seen; j++)
            seen = many[j] == many[i];
        assert_true(seen); /* only the sentence's tokens, in every item */
    }
    assert_true(many[0] == 101.0f && many[1] != many[S + 1]);
}

/* ---- the linear and MLP kernels, every tiling, against float64 ---- */

static float frand(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static float *rand_vec(int64_t n, unsigned *seed)
{
    float *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = frand(seed);
    return v;
}

/* out[r, j] = act(sum_k a[r,k] w(k,j) + bias[j] + res[r,j]) in double, the
 * activation applied by the engine's nat_act_vec to the rounded sum. */
static void ref_linear(const float *a, const float *w, const float *bias, const float *res,
                       float *out, int64_t m, int64_t n, int64_t k, bool wt, int act)
{
    for (int64_t r = 0; r < m; r++) {
        for (int64_t j = 0; j < n; j++) {
            double s = bias ? bias[j] : 0.0;
            for (int64_t q = 0; q < k; q++)
                s += (double)a[r * k + q] * (wt ? w[j * k + q] : w[q * n + j]);
            out[r * n + j] = (float)(s + (res ? res[r * n + j] : 0.0));
        }
        nat_act_vec(out + r * n, n, act);
    }
}

static void test_linear_tilings(void **state)
{
    (void)state;
    /* m: one row, a few, more than a row block (256); n: too narrow to split
     * by columns, wide enough */
    static const int64_t ms[] = {1, 7, 300}, ns[] = {5, 200};
    unsigned seed = 7;
    for (size_t mi = 0; mi < 3; mi++)
        for (size_t ni = 0; ni < 2; ni++)
            for (int wt = 0; wt < 4; wt++) { /* bit 0: [n,k] weight; bit 1: packed */
                int64_t m = ms[mi], n = ns[ni], k = mi == 1 ? 300 : 37; /* > KC: k blocks */
                float *a = rand_vec(m * k, &seed), *w = rand_vec(n * k, &seed);
                float *bias = rand_vec(n, &seed), *res = rand_vec(m * n, &seed);
                float *out = calloc((size_t)(m * n), sizeof *out);
                float *ref = calloc((size_t)(m * n), sizeof *ref);
                float *pw = NULL;
                if (wt & 2) {
                    pw = malloc((size_t)nat_pw_floats(n, k) * sizeof *pw);
                    assert_non_null(pw);
                    nat_pw_pack(w, wt & 1, n, k, pw);
                }
                nat_launch l = {.fn = gr_k_linear, .dk = NAT_D_GEMM};
                l.p[NAT_GEMM_A] = a, l.p[NAT_GEMM_B] = w, l.p[NAT_GEMM_BIAS] = bias;
                l.p[NAT_GEMM_RES] = res, l.p[NAT_GEMM_C] = out, l.p[NAT_GEMM_PB] = pw;
                l.d.gemm = (nat_gemm_desc){
                    .nb = 1, .m = m, .n = n, .k = k, .b_trans = wt & 1, .act = NAT_ACT_GELU_TANH};
                gr_k_linear(&l);
                ref_linear(a, w, bias, res, ref, m, n, k, wt & 1, NAT_ACT_GELU_TANH);
                free(pw);
                double e = rel_err(out, ref, (size_t)(m * n));
                if (e > 1e-5)
                    fprintf(stderr, "linear m=%lld n=%lld wt=%d: rel err %g\n", (long long)m,
                            (long long)n, wt, e);
                assert_true(e <= 1e-5);
                free(a), free(w), free(bias), free(res), free(out), free(ref);
            }
}

static void test_mlp_modes(void **state)
{
    (void)state;
    unsigned seed = 11;
    int64_t m = 70, d = 48, h = 288; /* the second GEMM's k = h crosses a k block (256) */
    for (int64_t mode = GR_MLP_COLUMNS; mode <= GR_MLP_ROWS; mode++)
        for (int64_t bits = 0; bits < 8; bits++) { /* bit 2: packed weights */
            float *x = rand_vec(m * d, &seed), *w1 = rand_vec(d * h, &seed);
            float *b1 = rand_vec(h, &seed), *w2 = rand_vec(h * d, &seed);
            float *b2 = rand_vec(d, &seed), *out = calloc((size_t)(m * d), sizeof *out);
            float *hid = calloc((size_t)(m * h), sizeof *hid);
            float *ref = calloc((size_t)(m * d), sizeof *ref);
            int64_t rb = mode == GR_MLP_ROWS ? 32 : m, slots = 8; /* three row blocks */
            float *ws = calloc((size_t)(m > rb * slots ? m : rb * slots) * (size_t)h, sizeof *ws);
            float *pw1 = NULL, *pw2 = NULL;
            if (bits & 4) {
                pw1 = malloc((size_t)nat_pw_floats(h, d) * sizeof *pw1);
                pw2 = malloc((size_t)nat_pw_floats(d, h) * sizeof *pw2);
                assert_true(pw1 && pw2);
                nat_pw_pack(w1, bits & 1, h, d, pw1);
                nat_pw_pack(w2, bits & 2, d, h, pw2);
            }
            nat_launch l = {.fn = gr_k_mlp, .dk = NAT_D_MLP};
            float *p[9] = {x, w1, b1, w2, b2, out, ws, pw1, pw2};
            memcpy(l.p, p, sizeof p); /* NAT_MLP_X .. NAT_MLP_PW2 in order */
            l.d.mlp = (nat_mlp_desc){.m = m,
                                     .d = d,
                                     .h = h,
                                     .act = NAT_ACT_RELU,
                                     .w1_trans = bits & 1,
                                     .w2_trans = (bits & 2) != 0,
                                     .mode = mode,
                                     .rb = rb,
                                     .slots = slots};
            gr_k_mlp(&l);
            ref_linear(x, w1, b1, NULL, hid, m, h, d, bits & 1, NAT_ACT_RELU);
            ref_linear(hid, w2, b2, NULL, ref, m, d, h, (bits & 2) != 0, NAT_ACT_NONE);
            double e = rel_err(out, ref, (size_t)(m * d));
            if (e > 1e-5)
                fprintf(stderr, "mlp mode=%lld bits=%lld: rel err %g\n", (long long)mode,
                        (long long)bits, e);
            assert_true(e <= 1e-5);
            free(x), free(w1), free(b1), free(w2), free(b2), free(out), free(hid), free(ref);
            free(ws), free(pw1), free(pw2);
        }
}

/* Whether p lies in one of ctx's buffers. */
static bool owned(const nat_ctx *ctx, const float *p)
{
    for (int i = 0; i < ctx->n_bufs; i++)
        if (p >= ctx->bufs[i].data && p < ctx->bufs[i].data + ctx->bufs[i].n)
            return true;
    return false;
}

/* The cost planner with nothing cached measures its choices in a ctx of
 * its own, freed before the job's plans are lowered: every buffer those
 * plans read is the job ctx's (a weight packed while measuring, kept on
 * its graph tensor, was read after that ctx was freed: Winograd's and the
 * linear's packed weights where the CPU has AVX-512). */
static void test_cost_planner_owns_buffers(void **state)
{
    (void)state;
    char cache[] = "/tmp/fb-test-plan-cache-XXXXXX";
    int fd = mkstemp(cache);
    assert_true(fd >= 0);
    close(fd);
    unlink(cache); /* nothing cached: every decision measured or predicted */
    setenv("FUSIONBENCH_PLAN_CACHE", cache, 1);
    nat_ctx *ctx = build_run("resnet18", "{\"image\":64,\"planner\":\"cost\"}", 1);
    for (int v = NAT_EAGER; v <= NAT_FUSED; v++)
        for (int i = 0; i < ctx->plans[v].n; i++)
            for (int k = 0; k < NAT_MAX_ARGS; k++) {
                const float *p = ctx->plans[v].launches[i].p[k];
                if (p && !owned(ctx, p))
                    fail_msg("variant %d launch %d (%s) slot %d: a buffer not the ctx's", v, i,
                             ctx->plans[v].launches[i].name, k);
            }
    nat_ctx_free(ctx);
    unsetenv("FUSIONBENCH_PLAN_CACHE");
    unlink(cache);
}

int main(void)
{
    /* the rules' groups are what these tests check (the cost planner's:
     * tests/models/test_planner.py), and the rules plan without timing */
    setenv("FUSIONBENCH_PLANNER", "rules", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isa_in_use),
        cmocka_unit_test(test_declared_params_are_read),
        cmocka_unit_test(test_models_fused_match_eager),
        cmocka_unit_test(test_resnet18_counts_and_memory),
        cmocka_unit_test(test_disable_rules),
        cmocka_unit_test(test_unfuse),
        cmocka_unit_test(test_planner_choices),
        cmocka_unit_test(test_weights_stay_in_folder),
        cmocka_unit_test(test_user_graph),
        cmocka_unit_test(test_user_graph_late_residual),
        cmocka_unit_test(test_user_graph_errors),
        cmocka_unit_test(test_graph_json_roundtrip),
        cmocka_unit_test(test_safetensors_header),
        cmocka_unit_test(test_ppm_and_inputs),
        cmocka_unit_test(test_linear_tilings),
        cmocka_unit_test(test_mlp_modes),
        cmocka_unit_test(test_cost_planner_owns_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
