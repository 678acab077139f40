/* nat_cost: bytes, FLOPs and implementation of launches from their
 * descriptors, the kernel rows that carry them, and, over every pattern and
 * model of the native zoo, that fusion moves fewer bytes for no more FLOPs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "fb_spec.h"
#include "gr_cost.h"
#include "gr_costmodel.h"
#include "gr_zoo.h"
#include "nat.h"
#include "nat_cost.h"

static float dummy[4]; /* a non-NULL operand: costs read only which slots are set */

static void test_gemm(void **state)
{
    (void)state;
    nat_launch l = {.dk = NAT_D_GEMM, .d.gemm = {.nb = 1, .m = 4, .n = 8, .k = 16}};
    l.p[NAT_GEMM_A] = l.p[NAT_GEMM_B] = l.p[NAT_GEMM_C] = dummy;
    nat_cost c = nat_launch_cost(&l, 4);
    assert_true(c.bytes_read == (4 * 16 + 16 * 8) * 4.0);
    assert_true(c.bytes_written == 4 * 8 * 4.0);
    assert_true(c.flops == 2.0 * 4 * 8 * 16);
    /* bias and GELU: the bias vector read, one FLOP per output for each */
    l.p[NAT_GEMM_BIAS] = dummy;
    l.d.gemm.act = NAT_ACT_GELU;
    c = nat_launch_cost(&l, 4);
    assert_true(c.bytes_read == (4 * 16 + 16 * 8 + 8) * 4.0);
    assert_true(c.flops == 2.0 * 4 * 8 * 16 + 2.0 * 32);
    /* batched: each batch has its own b; float16 halves the bytes */
    l = (nat_launch){.dk = NAT_D_GEMM, .d.gemm = {.nb = 3, .m = 2, .n = 5, .k = 7}};
    l.p[NAT_GEMM_A] = l.p[NAT_GEMM_B] = l.p[NAT_GEMM_C] = dummy;
    c = nat_launch_cost(&l, 2);
    assert_true(c.bytes_read == 3.0 * (2 * 7 + 7 * 5) * 2);
    assert_true(c.bytes_written == 3.0 * 2 * 5 * 2);
    assert_true(c.flops == 2.0 * 3 * 2 * 5 * 7);
    /* who runs it: our packed GEMM where the weight is packed, else OpenBLAS */
    assert_string_equal(nat_impl_name(nat_launch_impl(&l)), "openblas");
    l.p[NAT_GEMM_PB] = dummy;
    assert_string_equal(nat_impl_name(nat_launch_impl(&l)), "packed_gemm");
    l.impl = NAT_IMPL_CUBLASLT; /* a backend's choice wins */
    assert_string_equal(nat_impl_name(nat_launch_impl(&l)), "cublaslt");
    assert_true(nat_impl_is_library(NAT_IMPL_CUBLASLT));
    assert_false(nat_impl_is_library(NAT_IMPL_LOOP));
    assert_false(nat_impl_is_library(NAT_IMPL_CUDA));
}

static void test_conv(void **state)
{
    (void)state;
    nat_launch l = {.dk = NAT_D_CONV};
    l.d.conv.s = (nat_conv_shape){.n = 1,
                                  .ci = 2,
                                  .h = 4,
                                  .w = 4,
                                  .co = 3,
                                  .kh = 3,
                                  .kw = 3,
                                  .stride_h = 1,
                                  .stride_w = 1,
                                  .pad_h = 1,
                                  .pad_w = 1,
                                  .dil_h = 1,
                                  .dil_w = 1,
                                  .groups = 1};
    assert_true(nat_conv_shape_finish(&l.d.conv.s));
    l.p[NAT_CONV_IN] = l.p[NAT_CONV_W] = l.p[NAT_CONV_OUT] = l.p[NAT_CONV_BIAS] = dummy;
    l.d.conv.act = NAT_ACT_RELU;
    nat_cost c = nat_launch_cost(&l, 4);
    /* in 2x4x4, w 3x2x3x3, bias 3; out 3x4x4; 18 multiply-adds per output */
    assert_true(c.bytes_read == (32 + 54 + 3) * 4.0);
    assert_true(c.bytes_written == 48 * 4.0);
    assert_true(c.flops == 2.0 * 48 * 18 + 2.0 * 48);
    /* depthwise: our loop kernel; its weights are one channel deep */
    l.d.conv.s.ci = l.d.conv.s.co = l.d.conv.s.groups = 8;
    assert_true(nat_conv_shape_finish(&l.d.conv.s));
    l.p[NAT_CONV_BIAS] = NULL;
    l.d.conv.act = NAT_ACT_NONE;
    c = nat_launch_cost(&l, 4);
    assert_true(c.bytes_read == (8 * 16 + 8 * 9) * 4.0);
    assert_true(c.flops == 2.0 * 8 * 16 * 9);
    assert_string_equal(nat_impl_name(nat_launch_impl(&l)), "loop");
}

static void test_memory_bound(void **state)
{
    (void)state;
    /* a bias add: b by column */
    nat_launch l = {.dk = NAT_D_ELEM,
                    .n_ops = 1,
                    .d.elem = {.rows = 2, .cols = 5, .op = NAT_ADD, .bcast = NAT_BC_COL}};
    l.p[NAT_ELEM_A] = l.p[NAT_ELEM_B] = l.p[NAT_ELEM_OUT] = dummy;
    nat_cost c = nat_launch_cost(&l, 4);
    assert_true(c.bytes_read == 15 * 4.0 && c.bytes_written == 10 * 4.0 && c.flops == 10);
    assert_string_equal(nat_impl_name(nat_launch_impl(&l)), "loop");
    /* a chain: act, + a column operand (10), * a row operand (20 per value) */
    l = (nat_launch){.dk = NAT_D_CHAIN, .d.chain = {.n = 100, .n_steps = 3}};
    l.d.chain.steps[0] = (nat_chain_step){.op = NAT_CH_ACT, .act = NAT_ACT_RELU};
    l.d.chain.steps[1] = (nat_chain_step){.op = NAT_CH_ADD, .bc = NAT_CH_COL, .size = 10};
    l.d.chain.steps[2] =
        (nat_chain_step){.op = NAT_CH_MUL, .bc = NAT_CH_ROW, .operand = 1, .size = 20};
    c = nat_launch_cost(&l, 4);
    assert_true(c.bytes_read == (100 + 10 + 5) * 4.0 && c.flops == 300);
    /* softmax, layernorm with its residual, a mean */
    l = (nat_launch){.dk = NAT_D_ROWS, .d.rows = {.rows = 3, .cols = 4, .scale = 1.0f}};
    c = nat_launch_cost(&l, 4);
    assert_true(c.bytes_read == 12 * 4.0 && c.bytes_written == 12 * 4.0 && c.flops == 60);
    l.d.rows.op = NAT_ROW_LAYERNORM;
    l.p[NAT_ROWS_GAMMA] = l.p[NAT_ROWS_BETA] = l.p[NAT_ROWS_RES] = dummy;
    c = nat_launch_cost(&l, 4);
    assert_true(c.bytes_read == (12 + 8 + 12) * 4.0 && c.flops == 12 * 8 + 3 * 2);
    l = (nat_launch){.dk = NAT_D_REDUCE, .d.rows = {.rows = 3, .cols = 4, .op = NAT_RMEAN}};
    c = nat_launch_cost(&l, 4);
    assert_true(c.bytes_written == 3 * 4.0 && c.flops == 12);
    /* data movement: no FLOPs; a concat's broadcast input is read once */
    l = (nat_launch){
        .dk = NAT_D_CONCAT,
        .d.concat = {
            .n_in = 2, .outer = 4, .inner = 3, .out_axis = 3, .axis = {1, 2}, .bcast = 1u}};
    c = nat_launch_cost(&l, 4);
    assert_true(c.bytes_read == (1 * 1 * 3 + 4 * 2 * 3) * 4.0);
    assert_true(c.bytes_written == 4 * 3 * 3 * 4.0 && c.flops == 0);
}

/* Rows sum bytes and FLOPs of their launches, say "mixed" when their kernels'
 * authors differ, and hold them against the roofline set (NaN before). */
static void test_rows(void **state)
{
    (void)state;
    nat_launch a = {
        .name = "linear", .dk = NAT_D_GEMM, .d.gemm = {.nb = 1, .m = 4, .n = 8, .k = 16}};
    a.p[NAT_GEMM_A] = a.p[NAT_GEMM_B] = a.p[NAT_GEMM_C] = dummy;
    nat_launch b = a;
    b.p[NAT_GEMM_PB] = dummy;
    fb_kernel_row rows[2];
    int n = 0;
    nat_roofline_use(false, 0, 0);
    nat_kernel_row_add(rows, &n, &a, 0.0, 0.5, 4, false);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].impl, "openblas");
    assert_true(isnan(rows[0].roof_ms));
    nat_roofline_use(false, 10.0, 100.0); /* 10 GB/s, 100 GFLOP/s */
    n = 0;
    nat_kernel_row_add(rows, &n, &a, 0.0, 0.5, 4, false);
    nat_kernel_row_add(rows, &n, &b, 0.5, 0.25, 4, false);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].count, 2);
    assert_string_equal(rows[0].impl, "mixed");
    double bytes = (4 * 16 + 16 * 8 + 4 * 8) * 4.0, flops = 2.0 * 4 * 8 * 16;
    assert_true(rows[0].bytes == 2 * bytes && rows[0].flops == 2 * flops);
    /* memory-bound here: 896 B at 10 GB/s is 8.96e-5 ms, over 1.02e-5 ms of FLOPs */
    assert_true(fabs(rows[0].roof_ms - 2 * bytes / 1e7) < 1e-12);
    assert_true(isnan(nat_roofline_bound_ms(&(nat_cost){.flops = 1}, true))); /* no GPU roofline */
    nat_roofline_use(false, 0, 0);
}

static nat_cost plan_cost(const nat_plan *p)
{
    nat_cost t = {0};
    for (int i = 0; i < p->n; i++) {
        nat_cost c = nat_launch_cost(&p->launches[i], 4);
        t.bytes_read += c.bytes_read;
        t.bytes_written += c.bytes_written;
        t.flops += c.flops;
    }
    return t;
}

/* Every pattern and model, at a small size: the fused plan moves fewer bytes
 * than the eager one (the intermediates it keeps out of memory) and does no
 * more FLOPs (batch norm folded into a conv does fewer). */
static void test_fusion_moves_less(void **state)
{
    (void)state;
    static const struct {
        const char *w, *p;
    } cases[] = {
        {"gemm_bias_relu", "{\"m\":64,\"n\":64,\"k\":64}"},
        {"gemm_bias_gelu", "{\"m\":64,\"n\":64,\"k\":64}"},
        {"conv_bn_relu", "{\"channels\":8,\"height\":8,\"width\":8}"},
        {"conv_relu_conv", "{\"channels\":8,\"height\":8,\"width\":8}"},
        {"layernorm", "{\"rows\":16,\"cols\":32}"},
        {"add_layernorm", "{\"rows\":16,\"cols\":32}"},
        {"softmax", "{\"rows\":16,\"cols\":32}"},
        {"attention", "{\"seq\":16,\"heads\":2,\"head_dim\":8,\"causal\":1}"},
        {"mlp", "{\"m\":16,\"d\":32,\"h\":64}"},
        {"elementwise_chain", "{\"n\":4096}"},
        {"resnet18", "{\"image\":32}"},
        {"mobilenet_v2", "{\"image\":32}"},
        {"efficientnet_b0", "{\"image\":32}"},
        {"convnext_tiny", "{\"image\":32}"},
        {"bert_base", "{\"seq\":8,\"layers\":1}"},
        {"gpt2", "{\"seq\":8,\"layers\":1}"},
        {"vit_b_16", "{\"image\":32,\"layers\":1}"},
        {"whisper_tiny", "{\"frames\":100,\"layers\":1}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fb_spec spec;
        fb_err err = {0};
        nat_ctx *ctx = NULL;
        fb_spec_init(&spec);
        snprintf(spec.workload, sizeof spec.workload, "%s", cases[i].w);
        snprintf(spec.engine, sizeof spec.engine, "native");
        snprintf(spec.device, sizeof spec.device, "cpu");
        snprintf(spec.dtype, sizeof spec.dtype, "float32");
        spec.batch_size = 1;
        spec.params = cJSON_Parse(cases[i].p);
        assert_non_null(spec.params);
        if (gr_ctx_build(&spec, &ctx, &err) != FB_OK)
            fail_msg("%s: %s (%s)", cases[i].w, err.msg, err.field);
        nat_cost e = plan_cost(&ctx->plans[NAT_EAGER]), f = plan_cost(&ctx->plans[NAT_FUSED]);
        print_message("  %-18s bytes eager %.3e fused %.3e  flops eager %.3e fused %.3e\n",
                      cases[i].w, e.bytes_read + e.bytes_written, f.bytes_read + f.bytes_written,
                      e.flops, f.flops);
        assert_true(f.bytes_read + f.bytes_written < e.bytes_read + e.bytes_written);
        assert_true(f.flops <= e.flops * (1 + 1e-9));
        /* no FLOPs lost on the way: the most fusion removes is causal
         * attention's masked half, which the fused kernel never computes */
        assert_true(f.flops > 0.45 * e.flops);
        nat_ctx_free(ctx);
        fb_spec_free(&spec);
    }
}

/* An elementwise launch over n floats: 8n bytes, n FLOPs. */
static nat_launch elem_launch(int64_t n, const char *name)
{
    nat_launch l = {.dk = NAT_D_ELEM, .name = name, .n_ops = 1, .ops = {"relu"}};
    l.d.elem = (nat_elem_desc){.rows = 1, .cols = n, .op = NAT_RELU};
    l.p[NAT_ELEM_A] = l.p[NAT_ELEM_OUT] = dummy;
    return l;
}

/* The cost model: raw time on its limits, classes by kernel, code and size,
 * predictions only after GR_CM_MIN_SAMPLES, as raw x exp(median log ratio)
 * with the spread as error, the newest samples kept, and its JSON form. */
static void test_cost_model(void **state)
{
    (void)state;
    gr_cm m;
    char key[GR_CM_KEY];
    double ms, e;
    gr_cm_init(&m, 10.0, 100.0, 1); /* 10 GB/s: 1e6 bytes take 0.1 ms */
    nat_launch l = elem_launch(125000, "relu");
    nat_cost c = nat_launch_cost(&l, 4);
    double raw = (c.bytes_read + c.bytes_written) / 10e6;
    assert_true(fabs(gr_cm_raw_ms(&m, &l) - raw) < 1e-12);
    gr_cm_class_key(&m, &l, key, sizeof key);
    assert_string_equal(key, "relu:relu:loop:b4"); /* 100 us: from 64 us, under 256 */
    nat_launch big = elem_launch(125000 * 8, "relu");
    gr_cm_class_key(&m, &big, key, sizeof key);
    assert_string_equal(key, "relu:relu:loop:b5"); /* 8x the size: another class */
    nat_launch tiny = elem_launch(1, "relu");
    gr_cm_class_key(&m, &tiny, key, sizeof key);
    assert_string_equal(key, "relu:relu:loop:b0");

    assert_false(gr_cm_predict(&m, &l, &ms, &e));
    /* measured at 2x, 2x, 2x, then 4x: the median is 2x */
    for (int i = 0; i < 3; i++)
        assert_true(gr_cm_add(&m, &l, 2 * raw));
    assert_false(gr_cm_predict(&m, &l, &ms, &e)); /* 3 samples: not yet */
    assert_true(gr_cm_add(&m, &l, 4 * raw));
    assert_true(gr_cm_predict(&m, &l, &ms, &e));
    assert_true(fabs(ms - 2 * raw) < 1e-9);
    /* distances 0, 0, 0, log 2: their 90th percentile, interpolated (numpy's
     * rule), 0.7 of the way from the third to the fourth */
    assert_true(fabs(e - 0.7 * log(2.0)) < 1e-9);
    assert_false(gr_cm_predict(&m, &big, &ms, &e)); /* another class learned nothing */
    /* alike samples claim no less than GR_CM_MIN_ERR */
    nat_launch other = elem_launch(125000, "relu6");
    for (int i = 0; i < GR_CM_MIN_SAMPLES; i++)
        assert_true(gr_cm_add(&m, &other, 3 * raw));
    assert_true(gr_cm_predict(&m, &other, &ms, &e));
    assert_true(fabs(ms - 3 * raw) < 1e-9 && e == GR_CM_MIN_ERR);
    /* only the newest GR_CM_SAMPLES count: 40 at 5x push the others out */
    for (int i = 0; i < 40; i++)
        assert_true(gr_cm_add(&m, &l, 5 * raw));
    assert_true(gr_cm_predict(&m, &l, &ms, &e));
    assert_true(fabs(ms - 5 * raw) < 1e-9 && e == GR_CM_MIN_ERR);
    /* nothing is learned from a time of 0 or NaN */
    assert_true(gr_cm_add(&m, &l, 0.0));
    assert_true(gr_cm_add(&m, &l, NAN));
    assert_true(gr_cm_predict(&m, &l, &ms, &e) && fabs(ms - 5 * raw) < 1e-9);

    /* JSON round trip keeps the limits and every class's samples in order */
    cJSON *j = gr_cm_to_json(&m);
    assert_non_null(j);
    gr_cm back;
    assert_true(gr_cm_from_json(&back, j, 1.0, 1.0, 1));
    assert_true(back.gbps == 10.0 && back.gflops == 100.0 && back.n == m.n);
    assert_true(gr_cm_predict(&back, &l, &ms, &e) && fabs(ms - 5 * raw) < 1e-9);
    assert_true(gr_cm_add(&back, &l, 1 * raw)); /* the oldest 5x goes, not another */
    assert_int_equal(back.c[0].n, GR_CM_SAMPLES);
    gr_cm_free(&back);
    cJSON_Delete(j);
    /* not a calibration: empty, on the limits given or the nominal ones */
    j = cJSON_Parse("{\"gbps\": -1, \"gflops\": 5, \"classes\": {}}");
    assert_false(gr_cm_from_json(&back, j, 0.0, 0.0, 2));
    assert_true(back.n == 0 && back.gbps == 20.0 && back.gflops == 100.0);
    gr_cm_free(&back);
    cJSON_Delete(j);
    j = cJSON_Parse(
        "{\"gbps\": 8, \"gflops\": 5, \"classes\": {\"a\": [1, \"x\", 1e300], \"b\": 3}}");
    assert_true(gr_cm_from_json(&back, j, 0.0, 0.0, 1));
    assert_true(back.n == 1 && back.c[0].n == 1); /* the one sane sample */
    gr_cm_free(&back);
    cJSON_Delete(j);
    gr_cm_free(&m);
}

/* Which planner a job gets: params.planner where it names one, else
 * $FUSIONBENCH_PLANNER, else the cost planner on the CPU and on a GPU whose
 * backend times launches, the rules on one that does not; "cost" named for
 * a GPU is refused where the backend has no timer, and a bad name either
 * way. */
static void test_planner_default(void **state)
{
    (void)state;
    fb_spec spec;
    fb_err err = {0};
    bool cost = false;
    fb_spec_init(&spec);
    unsetenv("FUSIONBENCH_PLANNER");
    snprintf(spec.device, sizeof spec.device, "cpu");
    assert_int_equal(gr_planner_from_spec(&spec, false, &cost, &err), FB_OK);
    assert_true(cost);
    snprintf(spec.device, sizeof spec.device, "cuda");
    assert_int_equal(gr_planner_from_spec(&spec, false, &cost, &err), FB_OK);
    assert_false(cost);
    assert_int_equal(gr_planner_from_spec(&spec, true, &cost, &err), FB_OK);
    assert_true(cost);
    setenv("FUSIONBENCH_PLANNER", "rules", 1);
    assert_int_equal(gr_planner_from_spec(&spec, true, &cost, &err), FB_OK);
    assert_false(cost);
    snprintf(spec.device, sizeof spec.device, "cpu");
    assert_int_equal(gr_planner_from_spec(&spec, false, &cost, &err), FB_OK);
    assert_false(cost);
    setenv("FUSIONBENCH_PLANNER", "greedy", 1);
    assert_int_equal(gr_planner_from_spec(&spec, false, &cost, &err), FB_EINVAL);
    assert_string_equal(err.field, "FUSIONBENCH_PLANNER");
    setenv("FUSIONBENCH_PLANNER", "rules", 1);
    spec.params = cJSON_Parse("{\"planner\": \"cost\"}");
    assert_int_equal(gr_planner_from_spec(&spec, false, &cost, &err), FB_OK); /* named: it wins */
    assert_true(cost);
    snprintf(spec.device, sizeof spec.device, "cuda");
    assert_int_equal(gr_planner_from_spec(&spec, false, &cost, &err), FB_EUNSUPPORTED);
    assert_string_equal(err.field, "params.planner");
    /* where the backend times its launches (the CUDA one does), asked by name */
    assert_int_equal(gr_planner_from_spec(&spec, true, &cost, &err), FB_OK);
    assert_true(cost);
    cJSON_Delete(spec.params);
    spec.params = cJSON_Parse("{\"planner\": 3}");
    assert_int_equal(gr_planner_from_spec(&spec, false, &cost, &err), FB_EINVAL);
    assert_string_equal(err.field, "params.planner");
    fb_spec_free(&spec);
}

/* A device timer made up for the test (the CUDA one, ncu_cost.c, needs a
 * GPU): its times are planted per form, the same for every group: with
 * eager_wins the eager launches beat the split form and that the fused one,
 * each by far, else the fused form wins.  It counts what the planner asked
 * of it. */
typedef struct fake_device {
    bool eager_wins;
    int opens, runs, closes;
    int plans; /* launches of the measuring ctx's three plans, seen at open */
} fake_device;

static fb_code fake_open(void *arg, const nat_ctx *job, const nat_ctx *m, void **run, fb_err *err)
{
    (void)err;
    (void)job;
    fake_device *d = arg;
    d->opens++;
    d->plans = m->plans[0].n + m->plans[1].n + m->plans[2].n;
    *run = d;
    return FB_OK;
}

static fb_code fake_run(void *run, int v, int n, const bool *want, double *acc, fb_err *err)
{
    (void)err;
    fake_device *d = run;
    /* v: 0 eager, 1 fused, 2 split */
    static const double eager_wins[3] = {0.5, 2.0, 1.0}, fused_wins[3] = {2.0, 0.5, 2.0};
    double t = d->eager_wins ? eager_wins[v] : fused_wins[v];
    d->runs++;
    for (int f = 0; f < n; f++)
        acc[f] = want[f] ? t : 0.0;
    return FB_OK;
}

static void fake_close(void *run)
{
    ((fake_device *)run)->closes++;
}

/* resnet18 at image 16 with params (JSON), its launches timed on t (NULL: on
 * this CPU). */
static nat_ctx *build_resnet18(const gr_cost_timer *t, const char *params)
{
    fb_spec spec;
    fb_err err = {0};
    nat_ctx *ctx = NULL;
    fb_spec_init(&spec);
    snprintf(spec.workload, sizeof spec.workload, "resnet18");
    snprintf(spec.device, sizeof spec.device, "cpu");
    spec.batch_size = 1;
    spec.params = cJSON_Parse(params);
    fb_code rc = gr_ctx_build_on(&spec, t, &ctx, &err);
    if (rc)
        fail_msg("resnet18 with %s%s: %s (%s)", params, t ? " on a made-up device" : "", err.msg,
                 err.field);
    fb_spec_free(&spec);
    return ctx;
}

static nat_ctx *build_on(const gr_cost_timer *t)
{
    return build_resnet18(t, "{\"image\": 16, \"planner\": \"cost\"}");
}

static int planner_int(const nat_ctx *ctx, const char *key)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(ctx->graph, "planner");
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(p, key);
    assert_true(cJSON_IsNumber(j));
    return j->valueint;
}

/* The cost planner on a device's timer: every group it has no decision for
 * is timed there (no CPU prediction), the choices follow the device's times,
 * the decisions are cached under the device's string (a second build asks
 * the device nothing; another device decides anew), and the result says
 * where the groups were timed. */
static void test_device_timer(void **state)
{
    (void)state;
    char dir[] = "/tmp/fb-test-cost-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/plan-cache.json", dir);
    setenv("FUSIONBENCH_PLAN_CACHE", path, 1);
    fake_device slow = {.eager_wins = true}, fast = {.eager_wins = false};
    gr_cost_timer ta = {.device = "fake device A",
                        .arg = &slow,
                        .open = fake_open,
                        .run = fake_run,
                        .close = fake_close};
    gr_cost_timer tb = ta;
    snprintf(tb.device, sizeof tb.device, "fake device B");
    tb.arg = &fast;

    nat_ctx *a = build_on(&ta);
    int groups = planner_int(a, "groups");
    assert_true(groups >= 10); /* resnet18: a conv + batch norm group per conv */
    assert_int_equal(slow.opens, 1);
    assert_int_equal(slow.closes, 1);
    assert_true(slow.runs >= 3 * 5 && slow.plans > 0);
    assert_int_equal(planner_int(a, "unfused"), groups);
    assert_int_equal(planner_int(a, "predicted"), 0);
    assert_true(planner_int(a, "measured") >= 1);
    assert_int_equal(planner_int(a, "measured") + planner_int(a, "cached"), groups);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetObjectItemCaseSensitive(a->graph, "planner"), "timed_on")),
                        "fake device A");
    /* every group unfused: the fused plan is the eager one */
    assert_int_equal(a->plans[NAT_FUSED].n, a->plans[NAT_EAGER].n);
    assert_ptr_equal(a->cost_timer, &ta); /* the build's, for its planning */
    nat_ctx_free(a);

    /* the same device again: all from the cache, the device not opened */
    a = build_on(&ta);
    assert_int_equal(slow.opens, 1);
    assert_int_equal(planner_int(a, "cached"), groups);
    assert_int_equal(planner_int(a, "unfused"), groups);
    nat_ctx_free(a);

    /* another device: decided there, where fusion wins */
    nat_ctx *b = build_on(&tb);
    assert_int_equal(fast.opens, 1);
    assert_int_equal(planner_int(b, "kept"), groups);
    assert_true(b->plans[NAT_FUSED].n < b->plans[NAT_EAGER].n);
    nat_ctx_free(b);

    unsetenv("FUSIONBENCH_PLAN_CACHE");
    unlink(path);
    rmdir(dir);
}

static nat_ctx *build_cpu(const char *params)
{
    return build_resnet18(NULL, params);
}

static const cJSON *gemm_report(const nat_ctx *ctx)
{
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ctx->graph, "planner"),
                                            "gemm");
}

static int gemm_int(const nat_ctx *ctx, const char *key)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(gemm_report(ctx), key);
    assert_true(cJSON_IsNumber(j));
    return j->valueint;
}

/* Rewrites the GEMM decisions of the plan cache at path to choice: those of
 * group ("gemm": a node alone, "gemm fused": a group), or both (NULL); how
 * many. */
static int plant_gemm_of(const char *path, const char *group, const char *choice)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *text = calloc(1, 1 << 22);
    size_t n = fread(text, 1, (1 << 22) - 1, f);
    fclose(f);
    assert_true(n > 0);
    cJSON *root = cJSON_Parse(text), *e;
    free(text);
    int k = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "entries"))
    {
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(e, "group");
        if (!cJSON_IsString(g) || strncmp(g->valuestring, "gemm", 4) != 0 ||
            (group && strcmp(g->valuestring, group) != 0))
            continue;
        cJSON_ReplaceItemInObjectCaseSensitive(e, "choice", cJSON_CreateString(choice));
        k++;
    }
    char *out = cJSON_PrintUnformatted(root);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_true(fputs(out, f) >= 0);
    fclose(f);
    free(out);
    cJSON_Delete(root);
    return k;
}

static int plant_gemm(const char *path, const char *choice)
{
    return plant_gemm_of(path, NULL, choice);
}

/* Every convolution and linear launch of both plans runs on ours (packed:
 * our packed GEMM or Winograd over it) or on OpenBLAS; how many there are. */
static int gemm_launches_on(const nat_ctx *ctx, bool packed)
{
    int k = 0;
    for (int v = NAT_EAGER; v <= NAT_FUSED; v++)
        for (int i = 0; i < ctx->plans[v].n; i++) {
            const nat_launch *l = &ctx->plans[v].launches[i];
            if (l->dk != NAT_D_CONV && l->dk != NAT_D_GEMM)
                continue;
            nat_impl im = nat_launch_impl(l);
            if (packed ? im == NAT_IMPL_OPENBLAS : im != NAT_IMPL_OPENBLAS)
                fail_msg("%s launch %d (%s) on %s, not on %s", v ? "fused" : "eager", i, l->name,
                         nat_impl_name(im), packed ? "ours" : "OpenBLAS");
            k++;
        }
    return k;
}

/* params.gemm "auto" under the cost planner: each convolution and linear
 * shape, and each fused group it heads, timed on both GEMMs and decided once
 * (cached with the groups' decisions), the decision taken by both variants' launches, read back
 * from the cache (planted decisions here, each way, so the test does not rest on which GEMM this
 * CPU runs faster), and a group's decision keyed by its nodes' GEMM.  An explicit params.gemm or
 * the rules choose nothing. */
static void test_gemm_choice(void **state)
{
    (void)state;
    char dir[] = "/tmp/fb-test-gemm-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/plan-cache.json", dir);
    setenv("FUSIONBENCH_PLAN_CACHE", path, 1);
    setenv("FUSIONBENCH_BUILD_ID", "test build 1", 1);
    const char *params = "{\"image\": 16, \"planner\": \"cost\"}";

    nat_ctx *a = build_cpu(params);
    int nodes = gemm_int(a, "nodes");
    assert_int_equal(nodes, 21); /* resnet18: 20 convolutions and the classifier */
    assert_int_equal(gemm_int(a, "packed") + gemm_int(a, "openblas"), nodes);
    assert_int_equal(gemm_int(a, "groups"), 20); /* each conv heads a group; fc is alone */
    assert_int_equal(gemm_int(a, "cached"), 0);
    /* one of each shape and group: resnet18's 21 nodes have 12 shapes (a
     * stage's 3x3s repeat), its groups some more (with or without the add) */
    int shapes = gemm_int(a, "measured");
    assert_true(shapes > 12 + 8 && shapes < nodes + 20);
    nat_ctx_free(a);
    int groups = 0;

    /* the non-default GEMM planted for every shape: both variants take it */
    bool wide = nat_pw_default();
    for (int k = 0; k < 2; k++) {
        bool ours = k == 0 ? !wide : wide;
        assert_int_equal(plant_gemm(path, ours ? "packed" : "openblas"), shapes);
        nat_ctx *b = build_cpu(params);
        assert_int_equal(gemm_int(b, "cached"), nodes + 20);
        assert_int_equal(gemm_int(b, "measured"), 0);
        assert_int_equal(gemm_int(b, ours ? "packed" : "openblas"), nodes);
        assert_int_equal(gemm_int(b, "groups_packed"), ours ? 20 : 0);
        assert_int_equal(gemm_launches_on(b, ours), 2 * nodes); /* a conv launch each in both */
        if (k == 0) /* the groups' keys name a GEMM other than the job's: decided anew */
            groups = planner_int(b, "measured") + planner_int(b, "predicted");
        nat_ctx_free(b);
    }
    assert_true(groups > 0);

    /* a named GEMM, or the rules: no choice, every launch on the named one */
    nat_ctx *c = build_cpu("{\"image\": 16, \"planner\": \"cost\", \"gemm\": \"openblas\"}");
    assert_null(gemm_report(c));
    assert_int_equal(gemm_launches_on(c, false), 2 * nodes);
    nat_ctx_free(c);
    c = build_cpu("{\"image\": 16, \"planner\": \"rules\"}");
    assert_null(gemm_report(c));
    nat_ctx_free(c);

    /* another build: decided anew */
    setenv("FUSIONBENCH_BUILD_ID", "test build 2", 1);
    c = build_cpu(params);
    assert_int_equal(gemm_int(c, "cached"), 0);
    assert_int_equal(gemm_int(c, "measured"), shapes);
    nat_ctx_free(c);
    /* the two decisions are the node's own: one GEMM alone, the other fused */
    assert_int_equal(plant_gemm(path, "packed"), 2 * shapes); /* both builds' */
    assert_int_equal(plant_gemm_of(path, "gemm fused", "openblas"), 2 * (shapes - 12));
    c = build_cpu(params);
    assert_int_equal(gemm_int(c, "packed"), nodes);
    assert_int_equal(gemm_int(c, "groups_packed"), 0);
    for (int i = 0; i < c->plans[NAT_EAGER].n; i++) {
        const nat_launch *l = &c->plans[NAT_EAGER].launches[i];
        if (l->dk == NAT_D_CONV || l->dk == NAT_D_GEMM)
            assert_int_not_equal(nat_launch_impl(l), NAT_IMPL_OPENBLAS);
    }
    for (int i = 0; i < c->plans[NAT_FUSED].n; i++) {
        const nat_launch *l = &c->plans[NAT_FUSED].launches[i];
        /* a group's launch ("conv_fused", "linear_fused"), or one alone: the
         * classifier, and any group the cost planner unfused */
        bool alone = !strstr(l->name, "_fused");
        if (l->dk == NAT_D_CONV || l->dk == NAT_D_GEMM)
            assert_true((nat_launch_impl(l) == NAT_IMPL_OPENBLAS) == !alone);
    }
    nat_ctx_free(c);

    unsetenv("FUSIONBENCH_BUILD_ID");
    unsetenv("FUSIONBENCH_PLAN_CACHE");
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    /* the rules' groups are what these tests check (the cost planner's:
     * tests/models/test_planner.py), and the rules plan without timing */
    setenv("FUSIONBENCH_PLANNER", "rules", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_cost_model),
        cmocka_unit_test(test_planner_default),
        cmocka_unit_test(test_device_timer),
        cmocka_unit_test(test_gemm_choice),
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_memory_bound),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_fusion_moves_less),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
