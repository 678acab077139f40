/* nat_explain: the reason rules on facts, the analysis on planted samples (a
 * group that wins, one that loses, one within noise, and a waterfall whose
 * bars add up), the bootstrap helpers it stands on, and whole explanations of
 * a pattern and a model on this CPU. */
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

#include "fb_stats.h"
#include "fbc_analysis.h"
#include "fbc_file.h"
#include "gr_zoo.h"
#include "nat.h"
#include "nat_engine.h"
#include "nat_explain.h"

/* ---- the reason rules ---- */

static nat_ex_facts plain_loss(void)
{
    /* a conv + epilogue that moves fewer bytes, same FLOPs, same workers */
    return (nat_ex_facts){.eager_library = true,
                          .fused_library = true,
                          .eager_flops = 1e9,
                          .fused_flops = 1e9,
                          .eager_bytes = 4e6,
                          .fused_bytes = 2e6,
                          .eager_units_max = 64,
                          .fused_units = 64,
                          .eager_ms = 1.0,
                          .threads = 2};
}

static void test_reasons(void **state)
{
    (void)state;
    nat_ex_facts f = plain_loss();
    assert_int_equal(nat_ex_reason_of(&f), NAT_EX_KERNEL_SLOWDOWN);
    f.fused_library = false; /* our packed GEMM traded for a loop */
    assert_int_equal(nat_ex_reason_of(&f), NAT_EX_LIBRARY_REPLACED);
    f = plain_loss();
    f.fused_flops = 1.2e9; /* a reduction recomputed in two consumers */
    assert_int_equal(nat_ex_reason_of(&f), NAT_EX_RECOMPUTE);
    f = plain_loss();
    f.fused_bytes = 5e6; /* a layout change that added copies */
    assert_int_equal(nat_ex_reason_of(&f), NAT_EX_MORE_BYTES);
    f = plain_loss();
    f.fused_units = 1; /* one unit of work for two threads, a part had 64 */
    assert_int_equal(nat_ex_reason_of(&f), NAT_EX_LOST_PARALLELISM);
    f.eager_units_max = 1; /* no part had more: not this reason */
    assert_int_equal(nat_ex_reason_of(&f), NAT_EX_KERNEL_SLOWDOWN);
    f = plain_loss();
    f.eager_ms = 0.005; /* 5 us of kernels: launch-bound */
    assert_int_equal(nat_ex_reason_of(&f), NAT_EX_TOO_SMALL);
    f.gpu = true; /* a GPU's floor is lower: 5 us is not under 10 us... */
    assert_int_equal(nat_ex_reason_of(&f), NAT_EX_TOO_SMALL);
    f.eager_ms = 0.015; /* ...but 15 us is */
    assert_int_equal(nat_ex_reason_of(&f), NAT_EX_KERNEL_SLOWDOWN);
    f = plain_loss();
    f.fused_bytes = 0; /* no costs: not decided */
    assert_int_equal(nat_ex_reason_of(&f), NAT_EX_UNKNOWN);
    assert_string_equal(nat_ex_reason_name(NAT_EX_LIBRARY_REPLACED), "library_replaced");
}

/* ---- the bootstrap helpers ---- */

static double noise(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return ((*seed >> 8) & 0xffff) / 65535.0 - 0.5; /* uniform in [-0.5, 0.5] */
}

static void test_bootstrap(void **state)
{
    (void)state;
    double a[40], b[40], d[40], diff, lo, hi, mean;
    unsigned seed = 9;
    for (int i = 0; i < 40; i++) {
        a[i] = 10.0 + 0.3 * noise(&seed);
        b[i] = 9.0 + 0.3 * noise(&seed);
        d[i] = 0.5 + 0.2 * noise(&seed);
    }
    assert_true(fb_stats_diff_ci(a, 40, b, 40, 0.95, &diff, &lo, &hi));
    assert_true(fabs(diff - 1.0) < 0.1 && lo < diff && diff < hi && lo > 0.8 && hi < 1.2);
    assert_true(fb_stats_mean_ci(d, 40, 0.95, &mean, &lo, &hi));
    assert_true(fabs(mean - 0.5) < 0.05 && lo < mean && mean < hi && hi - lo < 0.1);
    assert_false(fb_stats_mean_ci(d, 1, 0.95, &mean, &lo, &hi));
    assert_false(fb_stats_diff_ci(a, 1, b, 40, 0.95, &diff, &lo, &hi));
}

/* ---- the analysis on planted samples ---- */

/* Eager: group 0 = 2 launches of 1 ms, group 1 = 1 launch of 1 ms, group 2 =
 * 1 launch of 1 ms, and one launch outside any group (0.5 ms).  Fused: group
 * 0 in 1 ms (wins 1 ms), group 1 in 1.5 ms (loses 0.5 ms), group 2 in 1 ms
 * (no change), the outside launch the same.  Noise of +-5%. */
static void test_planted(void **state)
{
    (void)state;
    enum { R = 40 };
    static float buf[8];
    nat_launch el[5] = {0}, fl[4] = {0};
    const int eg[5] = {0, 0, 1, 2, -1}, fg[4] = {0, 1, 2, -1};
    for (int i = 0; i < 5; i++) {
        el[i] = (nat_launch){.name = "e", .n_ops = 1, .group = eg[i], .dk = NAT_D_ELEM};
        el[i].d.elem = (nat_elem_desc){.rows = 1, .cols = 1000};
        el[i].p[NAT_ELEM_A] = el[i].p[NAT_ELEM_OUT] = buf;
    }
    for (int i = 0; i < 4; i++) {
        /* as many ops as the eager launches it replaces: the same FLOPs */
        fl[i] = (nat_launch){.name = "f", .n_ops = i == 0 ? 2 : 1, .group = fg[i]};
        fl[i].dk = NAT_D_ELEM;
        fl[i].d.elem = (nat_elem_desc){.rows = 1, .cols = 1000};
        fl[i].p[NAT_ELEM_A] = fl[i].p[NAT_ELEM_OUT] = buf;
        fl[i].rule = "element_chain";
    }
    nat_plan ep = {.n = 5, .launches = el}, fp = {.n = 4, .launches = fl};
    static double te[R * 5], tf[R * 4], we[R], wf[R], hs_e[R], hs_f[R];
    unsigned seed = 3;
    const double e_ms[5] = {1, 1, 1, 1, 0.5}, f_ms[4] = {1, 1.5, 1, 0.5};
    for (int r = 0; r < R; r++) {
        we[r] = wf[r] = 0.05; /* overhead between launches, the same */
        for (int i = 0; i < 5; i++)
            we[r] += te[r * 5 + i] = e_ms[i] * (1 + 0.1 * noise(&seed));
        for (int i = 0; i < 4; i++)
            wf[r] += tf[r * 4 + i] = f_ms[i] * (1 + 0.1 * noise(&seed));
        hs_e[r] = 4.55 + 0.2 * noise(&seed); /* the job's timed samples */
        hs_f[r] = 4.05 + 0.2 * noise(&seed);
    }
    nat_ex_input in = {.eager = {&ep, te, we},
                       .fused = {&fp, tf, wf},
                       .rounds = R,
                       .elem_bytes = 4,
                       .threads = 2,
                       .eager_ms = hs_e,
                       .fused_ms = hs_f,
                       .n_eager = R,
                       .n_fused = R};
    nat_ex_result ex;
    fb_err err = {0};
    assert_int_equal(nat_ex_analyze(&in, &ex, &err), FB_OK);
    assert_int_equal(ex.n_groups, 3);
    assert_int_equal(ex.groups[0].verdict, NAT_EX_WON);
    assert_true(fabs(ex.groups[0].delta - 1.0) < 0.1);
    assert_int_equal(ex.groups[0].n_eager, 2);
    assert_int_equal(ex.groups[1].verdict, NAT_EX_LOST);
    assert_true(fabs(ex.groups[1].delta + 0.5) < 0.1);
    assert_int_equal(ex.groups[1].reason, NAT_EX_KERNEL_SLOWDOWN);
    assert_int_equal(ex.groups[2].verdict, NAT_EX_NOISE);
    assert_int_equal(ex.groups[2].reason, NAT_EX_NONE);
    /* the bars: won 1, lost -0.5, nothing outside, no overhead difference;
     * with the measured difference (0.5) they leave a small remainder */
    assert_true(fabs(ex.won - 1.0) < 0.1 && fabs(ex.lost + 0.5) < 0.1);
    assert_true(fabs(ex.outside) < 0.05 && fabs(ex.overhead) < 1e-9);
    double parts = ex.won + ex.lost + ex.noise + ex.outside + ex.overhead;
    assert_true(fabs(parts + ex.unexplained - ex.measured) < 1e-9);
    assert_true(ex.measured_lo <= parts && parts <= ex.measured_hi);
    /* a planner that left id 1 unused (the cost planner unfused it: its
     * eager launch is outside any group): groups 0 and 2 only, by id */
    nat_ex_result gap;
    int eg2[5] = {0, 0, -1, 2, -1}, fg2[4] = {0, -1, 2, -1};
    for (int i = 0; i < 5; i++)
        el[i].group = eg2[i];
    for (int i = 0; i < 4; i++)
        fl[i].group = fg2[i];
    assert_int_equal(nat_ex_analyze(&in, &gap, &err), FB_OK);
    assert_int_equal(gap.n_groups, 2);
    assert_int_equal(gap.groups[0].id, 0);
    assert_int_equal(gap.groups[1].id, 2);
    assert_int_equal(gap.groups[1].n_eager, 1);
    assert_int_equal(gap.groups[1].verdict, NAT_EX_NOISE);
    nat_ex_free(&gap);
    for (int i = 0; i < 5; i++)
        el[i].group = eg[i];
    for (int i = 0; i < 4; i++)
        fl[i].group = fg[i];
    cJSON *js = nat_ex_to_json(&ex, &in, NULL);
    assert_non_null(js);
    const cJSON *groups = cJSON_GetObjectItem(js, "groups");
    assert_int_equal(cJSON_GetArraySize(groups), 3);
    /* largest effect first: group 0 (1 ms), then group 1 (-0.5 ms) */
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(groups, 0), "id")->valueint, 0);
    const cJSON *g1 = cJSON_GetArrayItem(groups, 1);
    assert_string_equal(cJSON_GetObjectItem(g1, "verdict")->valuestring, "lost");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(g1, "reason"), "code")->valuestring,
                        "kernel_slowdown");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(js, "summary"), "lost")->valueint, 1);
    assert_true(cJSON_GetObjectItem(g1, "median_delta_ms")->valuedouble < -0.4);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(g1, "median_delta_ci95")), 2);
    cJSON_Delete(js);
    /* one round a preemption stretched: group 1's eager launch took 40 ms in
     * round 7.  The mean's interval now reaches past zero (the bar moves with
     * it, as the rounds' sum did); the verdict, on the median, stays lost. */
    const double keep = te[7 * 5 + 2];
    te[7 * 5 + 2] = 40.0;
    we[7] += 40.0 - keep;
    nat_ex_result spike;
    assert_int_equal(nat_ex_analyze(&in, &spike, &err), FB_OK);
    assert_true(spike.groups[1].delta_hi > 0.0);
    assert_int_equal(spike.groups[1].verdict, NAT_EX_LOST);
    assert_true(spike.groups[1].med_lo > -0.6 && spike.groups[1].med_hi < -0.4);
    assert_true(fabs(spike.groups[1].med_delta + 0.5) < 0.1);
    assert_int_equal(spike.groups[0].verdict, NAT_EX_WON);
    nat_ex_free(&spike);
    te[7 * 5 + 2] = keep;
    we[7] -= 40.0 - keep;
    nat_ex_free(&ex);
    /* no group: nothing to explain */
    for (int i = 0; i < 4; i++)
        fl[i].group = -1;
    assert_int_equal(nat_ex_analyze(&in, &ex, &err), FB_EINVAL);
}

/* ---- a GPU job's explanation from CUPTI-shaped records ---- */

/* A lowered plan's launch for the GPU test: elementwise costs (enough for the
 * rules), who wrote its code, its fusion group, the kernels it runs (us). */
typedef struct gpu_launch {
    nat_impl impl;
    int group;
    int n_kernels;
    const char *kernel[2];
    double us[2];
} gpu_launch;

static void gpu_plan(const gpu_launch *g, int n, nat_launch *l, nat_plan *p)
{
    static float buf[8];
    for (int i = 0; i < n; i++) {
        l[i] = (nat_launch){.name = g[i].kernel[0], .n_ops = 1, .group = g[i].group};
        l[i].dk = NAT_D_ELEM;
        l[i].impl = g[i].impl;
        l[i].d.elem = (nat_elem_desc){.rows = 1, .cols = 1000};
        l[i].p[NAT_ELEM_A] = l[i].p[NAT_ELEM_OUT] = buf;
    }
    *p = (nat_plan){.n = n, .launches = l};
}

/* Records of one round of plan g as CUPTI's activity API delivers them: the
 * range's external correlation and each launch's mark for every kernel's
 * correlation id, kernels back to back with a 2 us gap, +-5% noise. */
static void gpu_round(FILE *f, const gpu_launch *g, int n, uint64_t range, uint32_t *corr,
                      uint64_t *t, unsigned *seed)
{
    uint64_t t0 = *t;
    for (int j = 0; j < n; j++)
        for (int k = 0; k < g[j].n_kernels; k++) {
            fbc_rec r = {.kind = FBC_EXTCORR, .ext_id = range, .corr = ++*corr};
            assert_int_equal(fbc_file_put(f, &r, 0), 0);
            r.kind = FBC_LAUNCH;
            r.ext_id = (uint64_t)j + 1;
            assert_int_equal(fbc_file_put(f, &r, 0), 0);
            r = (fbc_rec){.kind = FBC_KERNEL, .corr = *corr, .start = *t};
            r.end = r.start + (uint64_t)(g[j].us[k] * 1e3 * (1 + 0.1 * noise(seed)));
            snprintf(r.name, sizeof r.name, "%s", g[j].kernel[k]);
            r.grid[0] = r.grid[1] = r.grid[2] = r.block[0] = r.block[1] = r.block[2] = 1;
            assert_int_equal(fbc_file_put(f, &r, 0), 0);
            *t = r.end + 2000;
        }
    fbc_rec rg = {.kind = FBC_RANGE, .ext_id = range, .start = t0 - 1000, .end = *t + 1000};
    assert_int_equal(fbc_file_put(f, &rg, 0), 0);
    *t += 50000;
}

/* A lowered gemm + bias + GELU (group 0: cuBLASLt's GEMM and split-K reduce,
 * then our bias+GELU kernel, fused into cuBLASLt's GEMM with its epilogue:
 * wins 11 us) and a GEMM + bias whose fusion traded cuBLASLt for a generic
 * kernel of ours (group 1: loses 10 us, library_replaced), beside a softmax in
 * no group.  Twenty rounds of each plan are written as the injection library
 * writes records, read back, turned into per-launch times by
 * fbc_launch_times and explained: the same path a GPU job's records take. */
static void test_gpu_rows(void **state)
{
    (void)state;
    enum { R = 20, NE = 5, NF = 3 };
    const gpu_launch eg[NE] = {
        {NAT_IMPL_CUBLASLT,
         0,
         2,
         {"sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n", "splitKreduce_kernel"},
         {40, 4}},
        {NAT_IMPL_CUDA, 0, 1, {"ncu_bias_gelu"}, {9}},
        {NAT_IMPL_CUBLASLT, 1, 1, {"sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n"}, {20}},
        {NAT_IMPL_CUDA, 1, 1, {"ncu_bias"}, {5}},
        {NAT_IMPL_CUDA, -1, 1, {"ncu_softmax_rows"}, {6}},
    };
    const gpu_launch fg[NF] = {
        {NAT_IMPL_CUBLASLT,
         0,
         1,
         {"sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_epilogue_gelu_bias"},
         {42}},
        {NAT_IMPL_CUDA, 1, 1, {"ncu_gemm_bias_generic"}, {35}},
        {NAT_IMPL_CUDA, -1, 1, {"ncu_softmax_rows"}, {6}},
    };
    nat_launch el[NE], fl[NF];
    nat_plan ep, fp;
    gpu_plan(eg, NE, el, &ep);
    gpu_plan(fg, NF, fl, &fp);

    char path[] = "/tmp/fb_gpu_rows_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    assert_non_null(f);
    assert_int_equal(fbc_file_header(f, 1, 0), 0);
    uint32_t corr = 0;
    uint64_t t = 1000000;
    unsigned seed = 5;
    for (int r = 0; r < R; r++) { /* alternating order, as the rounds run */
        gpu_round(f, r % 2 ? fg : eg, r % 2 ? NF : NE, 2 * (uint64_t)r + 1, &corr, &t, &seed);
        gpu_round(f, r % 2 ? eg : fg, r % 2 ? NE : NF, 2 * (uint64_t)r + 2, &corr, &t, &seed);
    }
    fclose(f);
    fbc_store st;
    fbc_file_info info;
    fbc_store_init(&st, 0);
    assert_int_equal(fbc_file_read(path, &st, &info, NULL), FB_OK);
    unlink(path);

    static double te[R * NE], tf[R * NF], we[R], wf[R];
    for (int r = 0; r < R; r++) {
        for (int k = 0; k < 2; k++) {
            bool eager = (k == 0) == (r % 2 == 0);
            fbc_window w;
            int unmarked = -1;
            assert_true(fbc_window_of_range(&st, 2 * (uint64_t)r + 1 + (uint64_t)k, &w));
            assert_int_equal(fbc_launch_times(&st, &w, eager ? NE : NF,
                                              eager ? te + r * NE : tf + r * NF,
                                              eager ? &we[r] : &wf[r], &unmarked, NULL),
                             FB_OK);
            assert_int_equal(unmarked, 0);
        }
    }
    fbc_store_free(&st);
    /* a library call's two kernels are its launch's time */
    assert_true(te[0] > 0.040 && te[0] < 0.050);

    nat_ex_input in = {.eager = {&ep, te, we},
                       .fused = {&fp, tf, wf},
                       .rounds = R,
                       .elem_bytes = 4,
                       .gpu = true,
                       .threads = 132};
    nat_ex_result ex;
    fb_err err = {0};
    assert_int_equal(nat_ex_analyze(&in, &ex, &err), FB_OK);
    assert_int_equal(ex.n_groups, 2);
    assert_int_equal(ex.groups[0].verdict, NAT_EX_WON);
    assert_int_equal(ex.groups[0].n_eager, 2);
    assert_true(fabs(ex.groups[0].delta - 0.011) < 0.002);
    assert_int_equal(ex.groups[1].verdict, NAT_EX_LOST);
    assert_true(fabs(ex.groups[1].delta + 0.010) < 0.002);
    assert_int_equal(ex.groups[1].reason, NAT_EX_LIBRARY_REPLACED);
    /* the bars add up to the rounds' own difference, the gaps included */
    double parts = ex.won + ex.lost + ex.noise + ex.outside + ex.overhead;
    assert_true(fabs(parts + ex.unexplained - ex.measured) < 1e-9);
    /* 2 us between kernels: eager 6 kernels (5 gaps), fused 3 (2 gaps) */
    assert_true(fabs(ex.overhead - 3 * 0.002) < 0.0005);
    cJSON *js = nat_ex_to_json(&ex, &in, NULL);
    assert_non_null(js);
    assert_string_equal(cJSON_GetObjectItem(js, "device")->valuestring, "cuda");
    cJSON_Delete(js);
    nat_ex_free(&ex);
}

/* ---- whole explanations on this CPU ---- */

static cJSON *explain(const char *workload, const char *params)
{
    fb_spec spec;
    fb_err err = {0};
    nat_ctx *ctx = NULL;
    fb_spec_init(&spec);
    snprintf(spec.workload, sizeof spec.workload, "%s", workload);
    snprintf(spec.engine, sizeof spec.engine, "native");
    snprintf(spec.device, sizeof spec.device, "cpu");
    snprintf(spec.dtype, sizeof spec.dtype, "float32");
    spec.batch_size = 1;
    spec.params = cJSON_Parse(params);
    assert_non_null(spec.params);
    if (gr_ctx_build(&spec, &ctx, &err) != FB_OK)
        fail_msg("%s: %s", workload, err.msg);
    cJSON *out = NULL;
    nat_ex_builds bs = {&spec, "eager", "fused", ctx->node_launch[NAT_FUSED] != NULL,
                        nat_engine.prepare};
    if (nat_explain_cpu(&bs, ctx, NULL, 0, NULL, 0, 0.3, &out, &err) != FB_OK)
        fail_msg("%s: %s", workload, err.msg);
    nat_ctx_free(ctx);
    fb_spec_free(&spec);
    return out;
}

static double num_at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItem(cJSON_GetObjectItem(o, a), b);
    assert_true(cJSON_IsNumber(x));
    return x->valuedouble;
}

/* A pattern is one group: its eager plan against its fused one; a model's
 * groups carry their graph nodes, kernels and costs.  Without the job's
 * samples the measured difference is the profiled rounds' own, so the bars
 * add up to it exactly. */
static void test_explain_cpu(void **state)
{
    (void)state;
    cJSON *js = explain("softmax", "{\"rows\":256,\"cols\":512}");
    const cJSON *groups = cJSON_GetObjectItem(js, "groups");
    assert_int_equal(cJSON_GetArraySize(groups), 1);
    const cJSON *g = cJSON_GetArrayItem(groups, 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(g, "eager_kernels")), 5);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(g, "nodes")));
    assert_true(num_at(g, "costs", "bytes_saved") > 0);
    double parts = num_at(js, "waterfall", "won_ms") + num_at(js, "waterfall", "lost_ms") +
                   num_at(js, "waterfall", "within_noise_ms") +
                   num_at(js, "waterfall", "outside_groups_ms") +
                   num_at(js, "waterfall", "overhead_ms");
    assert_true(fabs(parts + num_at(js, "waterfall", "unexplained_ms") -
                     num_at(js, "waterfall", "measured_ms")) < 1e-9);
    assert_true(fabs(num_at(js, "waterfall", "unexplained_ms")) < 1e-9);
    cJSON_Delete(js);

    js = explain("resnet18", "{\"image\":32}");
    groups = cJSON_GetObjectItem(js, "groups");
    assert_int_equal(cJSON_GetArraySize(groups), 20);
    const cJSON *e;
    int with_nodes = 0;
    cJSON_ArrayForEach(e, groups)
    {
        const cJSON *nodes = cJSON_GetObjectItem(e, "nodes");
        with_nodes += cJSON_IsArray(nodes) && cJSON_GetArraySize(nodes) >= 2;
        const char *v = cJSON_GetObjectItem(e, "verdict")->valuestring;
        const cJSON *reason = cJSON_GetObjectItem(e, "reason");
        assert_true(strcmp(v, "lost") == 0 ? cJSON_IsObject(reason) : cJSON_IsNull(reason));
        /* a conv with its batch norm folded in: fewer bytes, fewer FLOPs */
        assert_true(num_at(e, "costs", "bytes_saved") > 0);
        assert_true(num_at(e, "costs", "flops_added") <= 0);
    }
    assert_int_equal(with_nodes, 20);
    cJSON_Delete(js);
}

/* The profiled rounds' order: each round runs all four (each plan timed
 * launch by launch and plainly); over a stream of rounds each of the four
 * follows its own plan in exactly half the rounds, as the job's timing (A B,
 * B A) has each plan do, so the timed runs and the plain ones beside them see
 * the same caches. */
static void test_round_order(void **state)
{
    (void)state;
    enum { ROUNDS = 8 };
    int own[2][2] = {{0}}, seen[2][2] = {{0}};
    nat_ex_step prev = nat_ex_round_step(0, 0);
    for (int r = 0; r < ROUNDS; r++) {
        int in_round[2][2] = {{0}};
        for (int k = 0; k < 4; k++) {
            nat_ex_step st = nat_ex_round_step(r, k);
            in_round[st.fused][st.timed]++;
            if (r > 0 || k > 0) {
                seen[st.fused][st.timed]++;
                own[st.fused][st.timed] += prev.fused == st.fused;
            }
            prev = st;
        }
        for (int p = 0; p < 2; p++)
            for (int t = 0; t < 2; t++)
                assert_int_equal(in_round[p][t], 1);
    }
    /* the stream's first run has no run before it: eager timed, round 0 */
    assert_true(!nat_ex_round_step(0, 0).fused && nat_ex_round_step(0, 0).timed);
    for (int p = 0; p < 2; p++)
        for (int t = 0; t < 2; t++) {
            int n = seen[p][t] + (p == 0 && t == 1);
            assert_int_equal(n, ROUNDS);
            assert_int_equal(own[p][t], ROUNDS / 2);
        }
}

int main(void)
{
    /* the rules' groups are what these tests check (the cost planner's:
     * tests/models/test_planner.py), and the rules plan without timing */
    setenv("FUSIONBENCH_PLANNER", "rules", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reasons),     cmocka_unit_test(test_bootstrap),
        cmocka_unit_test(test_planted),     cmocka_unit_test(test_gpu_rows),
        cmocka_unit_test(test_explain_cpu), cmocka_unit_test(test_round_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
