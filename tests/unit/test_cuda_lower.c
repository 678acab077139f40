/* test_cuda_lower: the CUDA backend lowers the fused plans of either planner
 * (issue 27), checked without a GPU.  Every model of the zoo at a small size,
 * planned by the rules ("keep" every group) and by the cost planner in each
 * of its forms (every group split after its folded batch norm, every group
 * unfused, and the three side by side), is built as a CUDA job's host plans
 * are (the GEMMs unpacked); then ncu_lower_accepts, what the lowering checks
 * of a launch before any device work, must take every launch of both
 * variants.  FB_TEST_PLANNER_CHOICE (gr_cost.c) makes the cost planner's
 * choices without timing anything.  And the check refuses what the lowering
 * would: an activation or an elementwise op it has no kernel for, a kernel it
 * has no lowering for, token ids that float16 cannot hold. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cJSON.h"
#include "cuda/ncu.h"
#include "gr_zoo.h"
#include "nat.h"
#include "nat_kern_cpu.h" /* nat_k_unary */

/* test_cuda_zoo's small sizes, and a user's graph. */
static const struct {
    const char *workload, *params;
} models[] = {
    {"resnet18", "{\"image\":32}"},
    {"resnet50", "{\"image\":64}"},
    {"mobilenet_v2", "{\"image\":64}"},
    {"mobilenet_v3_large", "{\"image\":64}"},
    {"efficientnet_b0", "{\"image\":64}"},
    {"convnext_tiny", "{\"image\":64}"},
    {"vgg16", "{\"image\":32,\"classes\":10}"},
    {"vit_b_16", "{\"image\":32,\"layers\":1}"},
    {"bert_base", "{\"seq\":8,\"layers\":1}"},
    {"gpt2", "{\"seq\":8,\"layers\":1}"},
    {"whisper_tiny", "{\"frames\":200,\"layers\":1}"},
    {"graph",
     "{\"graph\":{\"tensors\":[{\"name\":\"input\",\"kind\":\"input\",\"shape\":[1,8,7,7]},"
     "{\"name\":\"w\",\"kind\":\"weight\",\"shape\":[8,1,3,3]},"
     "{\"name\":\"bn.w\",\"kind\":\"weight\",\"shape\":[8],\"init\":\"one\"},"
     "{\"name\":\"bn.b\",\"kind\":\"weight\",\"shape\":[8],\"init\":\"small\"},"
     "{\"name\":\"bn.m\",\"kind\":\"weight\",\"shape\":[8],\"init\":\"small\"},"
     "{\"name\":\"bn.v\",\"kind\":\"weight\",\"shape\":[8],\"init\":\"var\"}],"
     "\"nodes\":[{\"op\":\"conv2d\",\"inputs\":[0,1],\"pad\":[1,1],\"groups\":8},"
     "{\"op\":\"batch_norm\",\"inputs\":[6,2,3,4,5],\"eps\":1e-5},"
     "{\"op\":\"silu\",\"inputs\":[7]}]}}"},
};

/* The planner's forms: "" plans by the rules; the others by the cost planner
 * with FB_TEST_PLANNER_CHOICE set to them. */
static const char *const forms[] = {"", "keep", "split", "unfuse", "split,unfuse,keep"};

typedef struct built {
    nat_ctx *ctx;
    int kept, split, unfused;
} built;

/* The planner report's count name, -1 where it has none (the rules'). */
static int count(const cJSON *planner, const char *name)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(planner, name);
    return cJSON_IsNumber(n) ? n->valueint : -1;
}

/* Builds workload on the CPU as a CUDA job's host plans (gemm "openblas": no
 * packed weights), under form. */
static built build(const char *workload, const char *params, const char *form)
{
    fb_spec spec;
    fb_err err = {0};
    built b = {0};
    fb_spec_init(&spec);
    snprintf(spec.workload, sizeof spec.workload, "%s", workload);
    snprintf(spec.device, sizeof spec.device, "cpu");
    spec.batch_size = 1;
    spec.params = cJSON_Parse(params);
    assert_non_null(spec.params);
    cJSON_AddStringToObject(spec.params, "gemm", "openblas");
    cJSON_AddStringToObject(spec.params, "planner", form[0] ? "cost" : "rules");
    if (form[0])
        setenv("FB_TEST_PLANNER_CHOICE", form, 1);
    fb_code rc = gr_ctx_build(&spec, &b.ctx, &err);
    unsetenv("FB_TEST_PLANNER_CHOICE");
    if (rc)
        fail_msg("%s %s: %s", workload, form, err.msg);
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(b.ctx->graph, "planner");
    b.kept = count(pl, "kept");
    b.split = count(pl, "split");
    b.unfused = count(pl, "unfused");
    fb_spec_free(&spec);
    return b;
}

/* Every launch of both variants is one the lowering takes, in dtype. */
static void check_lowers(const nat_ctx *ctx, ncu_dtype dtype, const char *what)
{
    for (int v = NAT_EAGER; v <= NAT_FUSED; v++)
        for (int i = 0; i < ctx->plans[v].n; i++) {
            fb_err err = {0};
            if (ncu_lower_accepts(&ctx->plans[v].launches[i], dtype, &err) != FB_OK)
                fail_msg("%s, %s launch %d (%s): %s", what, v == NAT_FUSED ? "fused" : "eager", i,
                         ctx->plans[v].launches[i].name, err.msg);
        }
}

static int fused_launches(const nat_plan *p)
{
    int n = 0;
    for (int i = 0; i < p->n; i++)
        n += p->launches[i].n_ops >= 2;
    return n;
}

static void test_either_planner_lowers(void **state)
{
    (void)state;
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        built rules = build(models[m].workload, models[m].params, "");
        check_lowers(rules.ctx, NCU_F32, models[m].workload);
        int groups = fused_launches(&rules.ctx->plans[NAT_FUSED]);
        assert_true(groups > 0);
        for (size_t f = 1; f < sizeof forms / sizeof forms[0]; f++) {
            char what[128];
            snprintf(what, sizeof what, "%s under the cost planner's \"%s\"", models[m].workload,
                     forms[f]);
            built b = build(models[m].workload, models[m].params, forms[f]);
            check_lowers(b.ctx, NCU_F32, what);
            const nat_plan *p = &b.ctx->plans[NAT_FUSED];
            if (strcmp(forms[f], "keep") == 0) { /* the rules' plan */
                assert_int_equal(p->n, rules.ctx->plans[NAT_FUSED].n);
                assert_int_equal(b.split + b.unfused, 0);
            } else if (strcmp(forms[f], "unfuse") == 0) { /* the eager plan */
                assert_int_equal(b.kept + b.split, 0);
                assert_int_equal(fused_launches(p), 0);
                assert_int_equal(p->n, b.ctx->plans[NAT_EAGER].n);
            } else if (strcmp(forms[f], "split") == 0) {
                assert_true(b.split > 0);
                assert_true(p->n >= rules.ctx->plans[NAT_FUSED].n);
            } else { /* the three forms side by side */
                assert_true(groups < 3 || (b.kept > 0 && b.split > 0 && b.unfused > 0));
                assert_true(p->n > rules.ctx->plans[NAT_FUSED].n);
            }
            nat_ctx_free(b.ctx);
        }
        nat_ctx_free(rules.ctx);
    }
}

/* float16 and bfloat16 plans of the CNNs, split and unfused among kept. */
static void test_half_dtypes(void **state)
{
    (void)state;
    static const int cnn[] = {0, 2, 4};
    for (size_t k = 0; k < sizeof cnn / sizeof cnn[0]; k++) {
        built b = build(models[cnn[k]].workload, models[cnn[k]].params, "split,unfuse,keep");
        check_lowers(b.ctx, NCU_F16, models[cnn[k]].workload);
        check_lowers(b.ctx, NCU_BF16, models[cnn[k]].workload);
        nat_ctx_free(b.ctx);
    }
}

static void cpu_only_kernel(const nat_launch *l)
{
    (void)l;
}

/* What the check refuses, as the lowering does: an activation beyond our
 * kernels', a kernel with no lowering, BERT's token ids in float16. */
static void test_refusals(void **state)
{
    (void)state;
    built b = build("efficientnet_b0", "{\"image\":64}", "split,unfuse,keep");
    const nat_plan *p = &b.ctx->plans[NAT_FUSED];
    const nat_launch *conv = NULL;
    for (int i = 0; i < p->n && !conv; i++)
        if (p->launches[i].dk == NAT_D_CONV)
            conv = &p->launches[i];
    assert_non_null(conv);
    nat_launch bad = *conv;
    bad.d.conv.act = 1000;
    fb_err err = {0};
    assert_int_equal(ncu_lower_accepts(&bad, NCU_F32, &err), FB_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "unknown activation"));
    bad = *conv;
    bad.fn = cpu_only_kernel;
    assert_int_equal(ncu_lower_accepts(&bad, NCU_F32, &err), FB_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "no lowering"));
    nat_ctx_free(b.ctx);
    nat_launch un = {.fn = nat_k_unary, .name = "exp"}; /* a pattern's op we have no kernel of */
    un.d.elem.op = 1000;
    assert_int_equal(ncu_lower_accepts(&un, NCU_F32, &err), FB_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "op 1000"));

    b = build("bert_base", "{\"seq\":8,\"layers\":1}", "");
    bool refused = false;
    for (int i = 0; i < b.ctx->plans[NAT_FUSED].n; i++)
        if (ncu_lower_accepts(&b.ctx->plans[NAT_FUSED].launches[i], NCU_F16, &err) != FB_OK)
            refused = strstr(err.msg, "float32") != NULL;
    assert_true(refused);
    nat_ctx_free(b.ctx);

    /* a bad forced list is refused naming the variable */
    fb_spec spec;
    fb_spec_init(&spec);
    snprintf(spec.workload, sizeof spec.workload, "resnet18");
    spec.batch_size = 1;
    spec.params = cJSON_Parse("{\"image\":32,\"planner\":\"cost\"}");
    setenv("FB_TEST_PLANNER_CHOICE", "split,fuse", 1);
    nat_ctx *ctx = NULL;
    assert_int_equal(gr_ctx_build(&spec, &ctx, &err), FB_EINVAL);
    unsetenv("FB_TEST_PLANNER_CHOICE");
    assert_string_equal(err.field, "FB_TEST_PLANNER_CHOICE");
    assert_null(ctx);
    fb_spec_free(&spec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_either_planner_lowers),
        cmocka_unit_test(test_half_dtypes),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
