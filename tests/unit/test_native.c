/* test_native: the native engine's pattern suite against float64 references,
 * plan shapes (kernel and fusion counts, memory), parameter validation, and the
 * fb_engine surface (prepare, run, output, profile). */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gr_zoo.h"
#include "nat.h"
#include "nat_engine.h"

/* A pattern at small shapes and the plan shape it must have. */
typedef struct pat_case {
    const char *workload;
    const char *params;
    int eager_kernels, fused_kernels, fused_groups, fused_ops;
} pat_case;

static const pat_case cases[] = {
    {"gemm_bias_relu", "{\"m\":33,\"k\":40,\"n\":50}", 3, 1, 1, 3},
    {"gemm_bias_gelu", "{\"m\":33,\"k\":40,\"n\":50}", 3, 1, 1, 3},
    {"mlp", "{\"m\":37,\"d\":24,\"h\":64}", 5, 1, 1, 5},
    {"mlp", "{\"m\":37,\"d\":24,\"h\":64,\"mlp_split\":1}", 5, 2, 2, 5},
    /* k past the packed GEMM's k block (256), a partial last panel */
    {"gemm_bias_relu", "{\"m\":300,\"k\":300,\"n\":70}", 3, 1, 1, 3},
    {"mlp", "{\"m\":300,\"d\":40,\"h\":280}", 5, 1, 1, 5},
    /* our GEMM asked for (on 8 lanes too), and left to the default */
    {"gemm_bias_relu", "{\"m\":300,\"k\":300,\"n\":70,\"gemm\":\"packed\"}", 3, 1, 1, 3},
    {"mlp", "{\"m\":300,\"d\":40,\"h\":280,\"gemm\":\"auto\"}", 5, 1, 1, 5},
    /* the same on OpenBLAS (params.gemm) */
    {"gemm_bias_gelu", "{\"m\":300,\"k\":300,\"n\":70,\"gemm\":\"openblas\"}", 3, 1, 1, 3},
    {"mlp", "{\"m\":300,\"d\":40,\"h\":280,\"gemm\":\"openblas\"}", 5, 1, 1, 5},
    {"conv_bn_relu", "{\"channels\":8,\"height\":9,\"width\":7}", 3, 1, 1, 3},
    {"conv_relu_conv", "{\"channels\":8,\"height\":9,\"width\":7}", 3, 2, 1, 2},
    {"elementwise_chain", "{\"n\":1000}", 6, 1, 1, 6},
    {"softmax", "{\"rows\":17,\"cols\":33}", 5, 1, 1, 5},
    {"layernorm", "{\"rows\":17,\"cols\":40}", 9, 1, 1, 9},
    {"add_layernorm", "{\"rows\":17,\"cols\":40}", 10, 1, 1, 10},
    /* outputs past NAT_STREAM_BYTES (16 MiB): stored past the caches, the
     * chain's odd tail masked, layernorm's rows of 1000 floats alternately
     * aligned for the streamed stores and not; softmax's rows of 1001 floats
     * (heads and tails before and after the streamed part), add_layernorm's
     * sum in the row buffer, layernorm's rows longer than the buffer */
    {"elementwise_chain", "{\"n\":4500001}", 6, 1, 1, 6},
    {"layernorm", "{\"rows\":4500,\"cols\":1000}", 9, 1, 1, 9},
    {"softmax", "{\"rows\":4500,\"cols\":1001}", 5, 1, 1, 5},
    {"add_layernorm", "{\"rows\":4500,\"cols\":1000}", 10, 1, 1, 10},
    {"layernorm", "{\"rows\":900,\"cols\":5001}", 9, 1, 1, 9},
    {"attention", "{\"heads\":2,\"seq\":19,\"head_dim\":8}", 4, 1, 1, 4},
    {"attention", "{\"heads\":2,\"seq\":19,\"head_dim\":8,\"causal\":1}", 5, 1, 1, 5},
};

/* A spec as fb_spec_apply_defaults would leave it, with params from JSON. */
static void make_spec(fb_spec *spec, const char *workload, const char *params, int batch)
{
    fb_spec_init(spec);
    snprintf(spec->workload, sizeof spec->workload, "%s", workload);
    snprintf(spec->engine, sizeof spec->engine, "native");
    snprintf(spec->device, sizeof spec->device, "cpu");
    snprintf(spec->dtype, sizeof spec->dtype, "float32");
    spec->batch_size = batch;
    spec->n_variants = 2;
    snprintf(spec->variants[0], sizeof spec->variants[0], "eager");
    snprintf(spec->variants[1], sizeof spec->variants[1], "fused");
    spec->params = cJSON_Parse(params);
    assert_non_null(spec->params);
}

static double max_rel_error(const float *out, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)out[i] - ref[i]);
        num = d > num || isnan(d) ? d : num;
        den = fabs(ref[i]) > den ? fabs(ref[i]) : den;
    }
    return num / den;
}

static bool all_zero(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] != 0.0f)
            return false;
    return true;
}

static int fused_groups(const nat_plan *p, int *ops)
{
    int g = 0;
    *ops = 0;
    for (int i = 0; i < p->n; i++) {
        if (p->launches[i].n_ops >= 2) {
            g++;
            *ops += p->launches[i].n_ops;
        }
    }
    return g;
}

/* Builds, runs both plans and checks them against the float64 reference. */
static void check_case(const pat_case *c, int batch)
{
    fb_spec spec;
    fb_err err;
    nat_ctx *ctx = NULL;
    make_spec(&spec, c->workload, c->params, batch);
    fb_code rc = gr_ctx_build(&spec, &ctx, &err);
    if (rc)
        fail_msg("%s %s: %s (%s)", c->workload, c->params, err.msg, err.field);
    const nat_pattern *pat = nat_pattern_find(c->workload);
    assert_non_null(pat);
    nat_plan *e = &ctx->plans[NAT_EAGER], *f = &ctx->plans[NAT_FUSED];
    int bad = 0;
    if (!nat_plan_check(e, &bad) || !nat_plan_check(f, &bad))
        fail_msg("%s: launch %d has no descriptor or lacks a buffer", c->workload, bad);
    assert_int_equal(e->out_n, f->out_n);
    double *ref = calloc(e->out_n, sizeof *ref);
    assert_non_null(ref);
    pat->reference(ctx, ref);
    nat_plan_run(e);
    nat_plan_run(f);
    double ee = max_rel_error(e->out, ref, e->out_n), fe = max_rel_error(f->out, ref, f->out_n);
    print_message("  %-18s %-48s eager %.2e fused %.2e\n", c->workload, c->params, ee, fe);
    assert_true(ee <= 1e-4);
    assert_true(fe <= 1e-4);
    assert_false(all_zero(e->out, e->out_n));
    assert_false(all_zero(f->out, f->out_n));
    assert_int_equal(e->n, c->eager_kernels);
    assert_int_equal(f->n, c->fused_kernels);
    assert_true(e->n > f->n);
    int ops = 0;
    assert_int_equal(fused_groups(e, &ops), 0);
    assert_int_equal(fused_groups(f, &ops), c->fused_groups);
    assert_int_equal(ops, c->fused_ops);
    assert_true(nat_ctx_variant_bytes(ctx, NAT_FUSED) <= nat_ctx_variant_bytes(ctx, NAT_EAGER));
    assert_true(nat_ctx_variant_bytes(ctx, NAT_FUSED) > 0);
    free(ref);
    nat_ctx_free(ctx);
    fb_spec_free(&spec);
}

static void test_patterns_match_reference(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i], 1);
}

static void test_batch_multiplies(void **state)
{
    (void)state;
    check_case(&cases[0], 3);  /* gemm rows */
    check_case(&cases[4], 2);  /* conv images */
    check_case(&cases[10], 2); /* attention batch */
}

static void test_every_pattern_covered(void **state)
{
    (void)state;
    static const char *const order[] = {
        "gemm_bias_relu",    "gemm_bias_gelu", "mlp",       "conv_bn_relu",  "conv_relu_conv",
        "elementwise_chain", "softmax",        "layernorm", "add_layernorm", "attention"};
    int n = 0;
    while (nat_patterns[n])
        n++;
    assert_int_equal(n, 10);
    for (int i = 0; i < n; i++)
        assert_string_equal(nat_patterns[i]->info.name, order[i]);
    assert_null(nat_pattern_find("resnet50"));
}

static void expect_einval(const char *workload, const char *params, const char *field)
{
    fb_spec spec;
    fb_err err;
    nat_ctx *ctx = NULL;
    make_spec(&spec, workload, params, 1);
    fb_err_clear(&err);
    assert_int_equal(gr_ctx_build(&spec, &ctx, &err), FB_EINVAL);
    assert_null(ctx);
    assert_string_equal(err.field, field);
    fb_spec_free(&spec);
}

static void test_bad_params(void **state)
{
    (void)state;
    expect_einval("gemm_bias_relu", "{\"m\":0}", "params.m");
    expect_einval("gemm_bias_relu", "{\"k\":\"big\"}", "params.k");
    expect_einval("gemm_bias_relu", "{\"m\":1048576,\"k\":65536}", "params.m");
    expect_einval("mlp", "{\"h\":-3}", "params.h");
    expect_einval("gemm_bias_relu", "{\"gemm\":\"mkl\"}", "params.gemm");
    expect_einval("elementwise_chain", "{\"n\":2.5}", "params.n");
    expect_einval("elementwise_chain", "{\"n\":2000000000}", "params.n");
    expect_einval("softmax", "{\"rows\":16777216,\"cols\":16777216}", "params.rows");
    expect_einval("conv_bn_relu", "{\"channels\":100000}", "params.channels");
    expect_einval("attention", "{\"seq\":65536,\"heads\":64}", "params.seq");
    expect_einval("attention", "{\"causal\":2}", "params.causal");
    expect_einval("layernorm", "{\"seed\":-1}", "params.seed");
}

/* The same seed gives the same inputs whatever the thread count. */
static void test_fill_thread_independent(void **state)
{
    (void)state;
    nat_ctx a = {.seed = 7}, b = {.seed = 7};
    enum { N = 100003 };
    float *x = calloc(N, sizeof *x), *y = calloc(N, sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    nat_fill_uniform(&a, x, N, 5, -1.0f, 1.0f);
    omp_set_num_threads(2);
    nat_fill_uniform(&b, y, N, 5, -1.0f, 1.0f);
    omp_set_num_threads(saved);
    assert_memory_equal(x, y, N * sizeof *x);
    double mean = 0;
    for (int i = 0; i < N; i++) {
        assert_true(x[i] >= -1.0f && x[i] < 1.0f);
        mean += x[i];
    }
    assert_true(fabs(mean / N) < 0.01);
    nat_fill_uniform(&b, y, N, 6, -1.0f, 1.0f); /* another stream differs */
    assert_true(memcmp(x, y, N * sizeof *x) != 0);
    free(x);
    free(y);
}

static void test_buffers_aligned_and_counted(void **state)
{
    (void)state;
    nat_ctx *ctx = calloc(1, sizeof *ctx);
    fb_err err;
    assert_non_null(ctx);
    float *a = nat_buf_new(ctx, 3, NAT_ALL_VARIANTS, "a", &err);
    float *b = nat_buf_new(ctx, 100, 1u << NAT_FUSED, "b", &err);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal((uintptr_t)a % 64, 0);
    assert_int_equal((uintptr_t)b % 64, 0);
    assert_true(a[0] == 0.0f && a[2] == 0.0f && b[99] == 0.0f);
    assert_int_equal(nat_ctx_variant_bytes(ctx, NAT_EAGER), 12);
    assert_int_equal(nat_ctx_variant_bytes(ctx, NAT_FUSED), 412);
    assert_null(nat_buf_new(ctx, (size_t)1 << 40, NAT_ALL_VARIANTS, "huge", &err));
    assert_int_equal(err.code, FB_ETOOBIG);
    nat_ctx_free(ctx);
}

static void expect_unsupported(const char *field, void (*edit)(fb_spec *))
{
    fb_spec spec;
    fb_err err;
    fb_instance *inst = NULL;
    make_spec(&spec, "softmax", "{\"rows\":4,\"cols\":8}", 1);
    edit(&spec);
    fb_err_clear(&err);
    assert_int_equal(nat_engine.prepare(&spec, &inst, &err), FB_EUNSUPPORTED);
    assert_null(inst);
    assert_string_equal(err.field, field);
    fb_spec_free(&spec);
}

static void edit_variant(fb_spec *s)
{
    snprintf(s->variants[1], sizeof s->variants[1], "inductor");
}
static void edit_dtype(fb_spec *s)
{
    snprintf(s->dtype, sizeof s->dtype, "float16");
}
static void edit_workload(fb_spec *s)
{
    snprintf(s->workload, sizeof s->workload, "no_such_model");
}
static void edit_device(fb_spec *s)
{
    snprintf(s->device, sizeof s->device, "tpu"); /* "cuda" is offered when built with CUDA */
}

static void test_engine_rejects(void **state)
{
    (void)state;
    expect_unsupported("variants[1]", edit_variant);
    expect_unsupported("dtype", edit_dtype);
    expect_unsupported("workload", edit_workload);
    expect_unsupported("device", edit_device);
}

static void test_engine_catalog(void **state)
{
    (void)state;
    int n = -1;
    const fb_workload_info *w = nat_engine.catalog("cpu", &n);
    assert_true(n > 10); /* the ten patterns, then the model zoo */
    assert_string_equal(w[0].name, "gemm_bias_relu");
    assert_string_equal(w[9].name, "attention");
    assert_string_equal(w[10].name, "resnet18");
    assert_string_equal(w[10].domain, "vision");
    assert_string_equal(w[3].variants[0], "eager");
    assert_string_equal(w[3].variants[1], "fused");
    assert_string_equal(w[3].dtypes[0], "float32");
    /* "cuda": the pattern suite, then the model zoo, when built with CUDA
     * (worker/engine/native/cuda), else none. */
    w = nat_engine.catalog("cuda", &n);
    assert_true(n == 0 || (n > 10 && strcmp(w[0].devices[0], "cuda") == 0 &&
                           strcmp(w[10].name, "resnet18") == 0));
    assert_string_equal(nat_engine.name, "native");
}

/* Profiles variant v and checks the rows add up. */
static void check_profile(fb_instance *inst, int v, int kernels, int groups, int ops)
{
    fb_variant_result vr;
    fb_err err;
    fb_variant_result_init(&vr, v ? "fused" : "eager");
    assert_int_equal(inst->ops->profile(inst, v, &vr, &err), FB_OK);
    assert_int_equal(vr.kernels, kernels);
    assert_int_equal(vr.fused_kernels, groups);
    assert_int_equal(vr.fused_ops, ops);
    assert_true(vr.peak_mem_bytes > 0);
    assert_true(vr.kernel_time_ms > 0 && vr.busy_ms >= vr.kernel_time_ms);
    assert_true(vr.idle_ms >= 0);
    int count = 0;
    double total = 0, cats = 0;
    for (int i = 0; i < vr.n_kernel_rows; i++) {
        count += vr.kernel_rows[i].count;
        total += vr.kernel_rows[i].total_ms;
    }
    for (int c = 0; c < FB_KC_COUNT; c++)
        cats += isnan(vr.categories_ms[c]) ? 0 : vr.categories_ms[c];
    assert_int_equal(count, kernels);
    assert_true(fabs(total - vr.kernel_time_ms) < 1e-9);
    assert_true(fabs(cats - vr.kernel_time_ms) < 1e-9);
    free(vr.kernel_rows);
    free(vr.samples_ms);
}

static void test_engine_run_output_profile(void **state)
{
    (void)state;
    fb_spec spec;
    fb_err err;
    fb_instance *inst = NULL;
    make_spec(&spec, "layernorm", "{\"rows\":64,\"cols\":96,\"threads\":2}", 1);
    assert_int_equal(nat_engine.prepare(&spec, &inst, &err), FB_OK);
    assert_true(inst->plan_ms >= 0);
    const float *out[2];
    size_t n[2];
    for (int v = 0; v < 2; v++) {
        assert_int_equal(inst->ops->run(inst, v, &err), FB_OK);
        assert_int_equal(inst->ops->output(inst, v, &out[v], &n[v], &err), FB_OK);
    }
    assert_int_equal(n[0], 64 * 96);
    assert_int_equal(n[1], n[0]);
    double num = 0, den = 0;
    for (size_t i = 0; i < n[0]; i++) {
        num = fmax(num, fabs(out[0][i] - out[1][i]));
        den = fmax(den, fabs(out[0][i]));
    }
    assert_true(den > 0 && num / den < 1e-4);
    assert_int_equal(inst->ops->run(inst, 2, &err), FB_EINVAL);
    check_profile(inst, 0, 9, 0, 0);
    check_profile(inst, 1, 1, 1, 9);
    inst->ops->destroy(inst);
    fb_spec_free(&spec);
}

static void test_engine_bad_threads(void **state)
{
    (void)state;
    fb_spec spec;
    fb_err err;
    fb_instance *inst = NULL;
    make_spec(&spec, "softmax", "{\"threads\":0}", 1);
    assert_int_equal(nat_engine.prepare(&spec, &inst, &err), FB_EINVAL);
    assert_string_equal(err.field, "params.threads");
    fb_spec_free(&spec);
}

int main(void)
{
    /* the rules' groups are what these tests check (the cost planner's:
     * tests/models/test_planner.py), and the rules plan without timing */
    setenv("FUSIONBENCH_PLANNER", "rules", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_pattern_covered),
        cmocka_unit_test(test_buffers_aligned_and_counted),
        cmocka_unit_test(test_fill_thread_independent),
        cmocka_unit_test(test_patterns_match_reference),
        cmocka_unit_test(test_batch_multiplies),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_engine_catalog),
        cmocka_unit_test(test_engine_rejects),
        cmocka_unit_test(test_engine_bad_threads),
        cmocka_unit_test(test_engine_run_output_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
