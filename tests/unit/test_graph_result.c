/* test_graph_result: the model graph in the result (the dashboard's graph view):
 * gr_graph_compact's nodes, ids, shapes and inputs, its cap, each node's fusion
 * group per variant (gr_plan_node_groups) and the JSON the result encodes
 * ("graph" on the result, "node_groups" per variant, null for none). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fb_result.h"
#include "gr.h"
#include "gr_zoo.h"
#include "nat.h"

/* conv+bias -> relu -> flatten (a view) -> softmax: fused, conv and relu are one
 * epilogue group; flatten has no kernel and softmax stays on its own. */
static const char *k_params =
    "{\"graph\":{\"tensors\":[{\"name\":\"input\",\"kind\":\"input\",\"shape\":[1,3,8,8]},"
    "{\"name\":\"w\",\"kind\":\"weight\",\"shape\":[4,3,3,3]},"
    "{\"name\":\"b\",\"kind\":\"weight\",\"shape\":[4],\"init\":\"small\"}],"
    "\"nodes\":[{\"op\":\"conv2d\",\"name\":\"c\",\"inputs\":[0,1,2],\"pad\":[1,1]},"
    "{\"op\":\"relu\",\"name\":\"r\",\"inputs\":[3]},"
    "{\"op\":\"flatten\",\"name\":\"f\",\"inputs\":[4],\"axis\":1},"
    "{\"op\":\"softmax\",\"name\":\"s\",\"inputs\":[5]}]}}";

static const cJSON *item(const cJSON *o, const char *key)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_non_null(j);
    return j;
}

static int num_at(const cJSON *arr, int i)
{
    const cJSON *j = cJSON_GetArrayItem(arr, i);
    assert_true(cJSON_IsNumber(j));
    return j->valueint;
}

static void build_graph(gr_graph *g, cJSON **params)
{
    fb_err err = {0};
    *params = cJSON_Parse(k_params);
    assert_non_null(*params);
    gr_init(g);
    assert_int_equal(gr_from_json(g, cJSON_GetObjectItem(*params, "graph"), "params.graph", &err),
                     FB_OK);
}

static void test_compact_graph(void **state)
{
    (void)state;
    gr_graph g;
    cJSON *params = NULL;
    build_graph(&g, &params);
    int kept = -1;
    cJSON *c = gr_graph_compact(&g, GR_RESULT_MAX_NODES, &kept);
    assert_non_null(c);
    assert_int_equal(kept, 4);
    assert_int_equal(item(c, "n_nodes")->valueint, 4);
    assert_true(cJSON_IsFalse(item(c, "truncated")));
    const cJSON *ishape = item(item(c, "input"), "shape");
    assert_int_equal(cJSON_GetArraySize(ishape), 4);
    assert_int_equal(num_at(ishape, 1), 3);
    const cJSON *nodes = item(c, "nodes");
    assert_int_equal(cJSON_GetArraySize(nodes), 4);
    static const char *const ops[] = {"conv2d", "relu", "flatten", "softmax"};
    static const int in0[] = {-1, 0, 1, 2}; /* the graph input, then the chain */
    for (int i = 0; i < 4; i++) {
        const cJSON *n = cJSON_GetArrayItem(nodes, i);
        assert_int_equal(item(n, "id")->valueint, i);
        assert_string_equal(item(n, "op")->valuestring, ops[i]);
        const cJSON *in = item(n, "in");
        assert_int_equal(cJSON_GetArraySize(in), 1); /* weights are left out */
        assert_int_equal(num_at(in, 0), in0[i]);
    }
    assert_string_equal(item(cJSON_GetArrayItem(nodes, 0), "name")->valuestring, "c");
    const cJSON *s0 = item(cJSON_GetArrayItem(nodes, 0), "shape");
    assert_int_equal(cJSON_GetArraySize(s0), 4);
    assert_int_equal(num_at(s0, 1), 4);
    assert_int_equal(num_at(s0, 3), 8);
    const cJSON *s2 = item(cJSON_GetArrayItem(nodes, 2), "shape"); /* flatten: [1, 256] */
    assert_int_equal(cJSON_GetArraySize(s2), 2);
    assert_int_equal(num_at(s2, 1), 256);
    cJSON_Delete(c);

    /* The cap keeps a prefix and says so. */
    c = gr_graph_compact(&g, 2, &kept);
    assert_non_null(c);
    assert_int_equal(kept, 2);
    assert_int_equal(item(c, "n_nodes")->valueint, 4);
    assert_true(cJSON_IsTrue(item(c, "truncated")));
    assert_int_equal(cJSON_GetArraySize(item(c, "nodes")), 2);
    cJSON_Delete(c);
    gr_free(&g);
    cJSON_Delete(params);
}

/* Builds the user graph through the engine's ctx and profiles-by-plan both
 * variants into r (fusion groups and node groups), as nat_profile does. */
static nat_ctx *build_ctx(fb_result *r)
{
    fb_spec spec;
    fb_spec_init(&spec);
    snprintf(spec.workload, sizeof spec.workload, "graph");
    spec.batch_size = 1;
    spec.params = cJSON_Parse(k_params);
    assert_non_null(spec.params);
    fb_err err = {0};
    nat_ctx *ctx = NULL;
    assert_int_equal(gr_ctx_build(&spec, &ctx, &err), FB_OK);
    cJSON_Delete(spec.params);
    assert_non_null(ctx->graph);
    assert_int_equal(ctx->n_graph_nodes, 4);
    fb_result_init(r);
    r->n_variants = 2;
    static const char *const names[] = {"eager", "fused"};
    for (int v = 0; v < 2; v++) {
        fb_variant_result_init(&r->variants[v], names[v]);
        assert_true(gr_plan_fusion_groups(&ctx->plans[v], &r->variants[v]));
        assert_true(gr_plan_node_groups(ctx, v, &r->variants[v]));
    }
    r->graph = ctx->graph; /* as the run library does with the instance's */
    ctx->graph = NULL;
    return ctx;
}

static void test_node_groups(void **state)
{
    (void)state;
    fb_result r;
    nat_ctx *ctx = build_ctx(&r);
    /* node -> launch: eager conv, relu, (flatten: none), softmax */
    assert_int_equal(ctx->node_launch[NAT_EAGER][0], 0);
    assert_int_equal(ctx->node_launch[NAT_EAGER][1], 1);
    assert_int_equal(ctx->node_launch[NAT_EAGER][2], -1);
    assert_int_equal(ctx->node_launch[NAT_EAGER][3], 2);
    assert_int_equal(ctx->node_launch[NAT_FUSED][0], 0);
    assert_int_equal(ctx->node_launch[NAT_FUSED][1], 0);
    assert_int_equal(ctx->node_launch[NAT_FUSED][3], 1);

    const fb_variant_result *e = &r.variants[NAT_EAGER], *f = &r.variants[NAT_FUSED];
    assert_int_equal(e->n_fusion_groups, 0);
    assert_int_equal(e->n_node_groups, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(e->node_groups[i], -1);
    assert_int_equal(f->n_fusion_groups, 1);
    assert_string_equal(f->fusion_groups[0].rule, "epilogue");
    static const int want[] = {0, 0, -1, -1};
    assert_int_equal(f->n_node_groups, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(f->node_groups[i], want[i]);

    /* The encoding: the graph on the result, node_groups per variant, null = none. */
    cJSON *j = fb_result_to_json(&r);
    assert_non_null(j);
    const cJSON *g = item(j, "graph");
    assert_int_equal(item(g, "n_nodes")->valueint, 4);
    assert_int_equal(cJSON_GetArraySize(item(g, "nodes")), 4);
    const cJSON *vs = item(j, "variants");
    const cJSON *eng = item(cJSON_GetArrayItem(vs, 0), "node_groups");
    const cJSON *fng = item(cJSON_GetArrayItem(vs, 1), "node_groups");
    assert_int_equal(cJSON_GetArraySize(eng), 4);
    assert_int_equal(cJSON_GetArraySize(fng), 4);
    for (int i = 0; i < 4; i++) {
        assert_true(cJSON_IsNull(cJSON_GetArrayItem(eng, i)));
        if (want[i] < 0)
            assert_true(cJSON_IsNull(cJSON_GetArrayItem(fng, i)));
        else
            assert_int_equal(num_at(fng, i), want[i]);
    }
    cJSON_Delete(j);
    fb_result_free(&r);
    assert_null(r.graph);
    nat_ctx_free(ctx);
}

/* A pattern has no graph: no "graph", no "node_groups". */
static void test_pattern_has_no_graph(void **state)
{
    (void)state;
    fb_spec spec;
    fb_spec_init(&spec);
    snprintf(spec.workload, sizeof spec.workload, "softmax");
    spec.batch_size = 1;
    fb_err err = {0};
    nat_ctx *ctx = NULL;
    assert_int_equal(gr_ctx_build(&spec, &ctx, &err), FB_OK);
    assert_null(ctx->graph);
    fb_result r;
    fb_result_init(&r);
    r.n_variants = 1;
    fb_variant_result_init(&r.variants[0], "fused");
    assert_true(gr_plan_fusion_groups(&ctx->plans[NAT_FUSED], &r.variants[0]));
    assert_true(gr_plan_node_groups(ctx, NAT_FUSED, &r.variants[0]));
    assert_null(r.variants[0].node_groups);
    cJSON *j = fb_result_to_json(&r);
    assert_non_null(j);
    assert_null(cJSON_GetObjectItem(j, "graph"));
    assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "variants"), 0),
                                    "node_groups"));
    cJSON_Delete(j);
    fb_result_free(&r);
    nat_ctx_free(ctx);
}

int main(void)
{
    /* the rules' groups are what these tests check (the cost planner's:
     * tests/models/test_planner.py), and the rules plan without timing */
    setenv("FUSIONBENCH_PLANNER", "rules", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compact_graph),
        cmocka_unit_test(test_node_groups),
        cmocka_unit_test(test_pattern_has_no_graph),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
