/* Unit tests of the native engine's conv, bmm and attention kernels against
 * naive float64 references: max|out - ref| / max|ref| <= 1e-4 (METHOD.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "nat_kern.h"
#include "nat_kern_cpu.h" /* nat_act_vec */

#define TOL 1e-4

/* ---- deterministic inputs: a 64-bit LCG, top bits to [-1, 1) ---- */

static uint64_t rng_state;

static float rnd(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(rng_state >> 40) / (double)(1ULL << 24) * 2.0 - 1.0);
}

static float *rnd_buf(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = rnd();
    return p;
}

static double *dbuf(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    assert_non_null(p);
    return p;
}

/* max|out - ref| / max|ref|, asserted <= TOL; a zero reference must be matched
 * exactly. */
static void check_close(const float *out, const double *ref, size_t n)
{
    double err = 0.0, mag = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)out[i] - ref[i]);
        err = e > err ? e : err;
        mag = fabs(ref[i]) > mag ? fabs(ref[i]) : mag;
        assert_false(isnan(out[i]));
    }
    if (mag == 0.0)
        assert_true(err == 0.0);
    else if (err / mag > TOL)
        fail_msg("max rel error %.3g > %.1g", err / mag, TOL);
}

/* ---- convolution ---- */

static double act_ref(double x, nat_act act)
{
    if (act == NAT_ACT_RELU)
        return x > 0.0 ? x : 0.0;
    if (act == NAT_ACT_GELU)
        return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    if (act == NAT_ACT_RELU6)
        return x < 0.0 ? 0.0 : (x > 6.0 ? 6.0 : x);
    if (act == NAT_ACT_SILU)
        return x / (1.0 + exp(-x));
    if (act == NAT_ACT_SIGMOID)
        return 1.0 / (1.0 + exp(-x));
    if (act == NAT_ACT_HARDSWISH)
        return x * (x + 3.0 < 0.0 ? 0.0 : (x + 3.0 > 6.0 ? 6.0 : x + 3.0)) / 6.0;
    if (act == NAT_ACT_HARDSIGMOID)
        return x / 6.0 + 0.5 < 0.0 ? 0.0 : (x / 6.0 + 0.5 > 1.0 ? 1.0 : x / 6.0 + 0.5);
    assert_int_equal(act, NAT_ACT_NONE);
    return x;
}

static double conv_point(const float *in, const float *w, const nat_conv_shape *s, int b, int oc,
                         int oy, int ox)
{
    int cig = s->ci / s->groups, g = oc / (s->co / s->groups);
    double acc = 0.0;
    for (int c = 0; c < cig; c++) {
        int ic = g * cig + c;
        for (int ky = 0; ky < s->kh; ky++) {
            int iy = oy * s->stride_h - s->pad_h + ky * s->dil_h;
            for (int kx = 0; kx < s->kw; kx++) {
                int ix = ox * s->stride_w - s->pad_w + kx * s->dil_w;
                if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
                    continue;
                double x = in[(((size_t)b * s->ci + ic) * s->h + iy) * s->w + ix];
                acc += x * w[(((size_t)oc * cig + c) * s->kh + ky) * s->kw + kx];
            }
        }
    }
    return acc;
}

static void conv_ref(const float *in, const float *w, const float *bias, const float *res,
                     double *out, const nat_conv_shape *s, nat_act act)
{
    size_t i = 0;
    for (int b = 0; b < s->n; b++)
        for (int oc = 0; oc < s->co; oc++)
            for (int oy = 0; oy < s->ho; oy++)
                for (int ox = 0; ox < s->wo; ox++, i++) {
                    double v = conv_point(in, w, s, b, oc, oy, ox);
                    v += bias ? bias[oc] : 0.0;
                    v += res ? res[i] : 0.0;
                    out[i] = act_ref(v, act);
                }
}

typedef struct conv_case {
    nat_conv_shape s;
    bool bias, res;
    nat_act act;
} conv_case;

/* Runs one case with an exactly-sized workspace (so ASan sees overruns), on
 * OpenBLAS (s.blas) or in packed panels (where the CPU has AVX-512). */
static void run_conv_on(conv_case cc)
{
    nat_conv_shape s = cc.s;
    assert_true(nat_conv_shape_finish(&s));
    size_t n_in = (size_t)s.n * s.ci * s.h * s.w;
    size_t n_w = (size_t)s.co * (s.ci / s.groups) * s.kh * s.kw;
    size_t n_out = (size_t)s.n * s.co * s.ho * s.wo;
    rng_state = 12345;
    float *in = rnd_buf(n_in), *w = rnd_buf(n_w), *bias = rnd_buf(s.co), *res = rnd_buf(n_out);
    float *out = rnd_buf(n_out); /* garbage: the kernel must overwrite it */
    if (cc.act == NAT_ACT_RELU6 || cc.act == NAT_ACT_HARDSWISH || cc.act == NAT_ACT_HARDSIGMOID ||
        cc.act == NAT_ACT_SILU) /* outputs past the clamps and the knees */
        for (size_t i = 0; i < n_in; i++)
            in[i] *= 8.0f;
    size_t ws_n = nat_conv2d_workspace(&s, false);
    float *ws = ws_n ? malloc(ws_n * sizeof(float)) : NULL;
    double *ref = dbuf(n_out);
    const float *b = cc.bias ? bias : NULL, *r = cc.res ? res : NULL;
    nat_conv2d(in, w, NULL, b, r, out, &s, cc.act, ws);
    conv_ref(in, w, b, r, ref, &s, cc.act);
    check_close(out, ref, n_out);
    size_t prep_n = nat_conv2d_prep_floats(&s); /* the same with w made ready once */
    if (prep_n) {
        float *prep = malloc(prep_n * sizeof(float));
        float *ws_p = malloc(nat_conv2d_workspace(&s, true) * sizeof(float)); /* exact, smaller */
        assert_true(nat_conv2d_workspace(&s, true) < ws_n);
        nat_conv2d_prepare(w, &s, prep);
        memset(out, 0, n_out * sizeof(float));
        nat_conv2d(in, w, prep, b, r, out, &s, cc.act, ws_p);
        check_close(out, ref, n_out);
        free(prep), free(ws_p);
    }
    free(in), free(w), free(bias), free(res), free(out), free(ws), free(ref);
}

static void run_conv(conv_case cc)
{
    cc.s.blas = true;
    run_conv_on(cc);
    cc.s.blas = false;
    run_conv_on(cc);
}

/* Shape helper: n, ci, h, w, co, kh, kw, stride, pad, dil, groups (square
 * stride, pad and dilation). */
static nat_conv_shape shp(int n, int ci, int h, int w, int co, int kh, int kw, int st, int pad,
                          int dil, int groups)
{
    nat_conv_shape s = {.n = n,
                        .ci = ci,
                        .h = h,
                        .w = w,
                        .co = co,
                        .kh = kh,
                        .kw = kw,
                        .stride_h = st,
                        .stride_w = st,
                        .pad_h = pad,
                        .pad_w = pad,
                        .dil_h = dil,
                        .dil_w = dil,
                        .groups = groups,
                        .blas = true};
    return s;
}

/* The kernels this run checks: the 16-lane ones where the CPU has AVX-512F,
 * the 8-lane and OpenBLAS ones an AVX2-only CPU runs under
 * FUSIONBENCH_NATIVE_ISA=avx2 (unit.test_kernels_avx2: without this check a
 * variable that did not take would pass it on the wide kernels again). */
static void test_isa_in_use(void **state)
{
    (void)state;
    const char *v = getenv("FUSIONBENCH_NATIVE_ISA");
    __builtin_cpu_init();
    bool has = __builtin_cpu_supports("avx512f");
    if (v && strcmp(v, "avx2") == 0)
        assert_false(nat_v16_available());
    else
        assert_int_equal(nat_v16_available(), has);
    /* our packed GEMM by default (params.gemm "auto") on 16 lanes only */
    assert_int_equal(nat_pw_default(), nat_v16_available());
    print_message("native kernels: %s\n",
                  nat_v16_available() ? "16 lanes (AVX-512)" : "8 lanes (AVX2)");
}

static void test_conv_3x3(void **state)
{
    run_conv((conv_case){shp(2, 4, 9, 9, 8, 3, 3, 1, 1, 1, 1), true, false, NAT_ACT_RELU});
    run_conv((conv_case){shp(2, 4, 9, 9, 8, 3, 3, 1, 1, 1, 1), false, false, NAT_ACT_NONE});
    run_conv((conv_case){shp(1, 5, 10, 10, 3, 3, 3, 1, 0, 1, 1), true, true, NAT_ACT_GELU});
}

static void test_conv_stride2_nonsquare(void **state)
{
    run_conv((conv_case){shp(2, 3, 11, 7, 5, 3, 3, 2, 0, 1, 1), false, false, NAT_ACT_NONE});
    run_conv((conv_case){shp(1, 3, 12, 17, 4, 3, 3, 2, 1, 1, 1), true, true, NAT_ACT_RELU});
    nat_conv_shape s = shp(2, 3, 8, 13, 4, 1, 3, 1, 0, 1, 1); /* 1x3 kernel, pad on w only */
    s.pad_w = 1;
    s.stride_h = 2;
    run_conv((conv_case){s, true, false, NAT_ACT_NONE});
}

/* Stride 1 with unequal padding, dilation, a 1x3 kernel, and more reduction
 * rows than the GEMM's k block (the offset table read from k0 on).  Rows are
 * wide enough (and output channels few enough) for the stride-1 path that
 * reads the padded input in place (CONV_IMPL_JUNK_MAX, CONV_IMPL_CO_MAX). */
static void test_conv_stride1_shapes(void **state)
{
    nat_conv_shape s = shp(2, 5, 9, 40, 7, 3, 3, 1, 0, 1, 1);
    s.pad_h = 2;
    s.pad_w = 1;
    run_conv((conv_case){s, true, true, NAT_ACT_RELU});
    s = shp(1, 3, 6, 30, 4, 1, 3, 1, 0, 1, 1);
    s.pad_w = 1;
    run_conv((conv_case){s, false, false, NAT_ACT_NONE});
    run_conv((conv_case){shp(2, 4, 13, 50, 6, 3, 3, 1, 2, 2, 1), true, true, NAT_ACT_GELU});
    run_conv((conv_case){shp(1, 40, 6, 29, 13, 3, 3, 1, 1, 1, 1), true, false, NAT_ACT_SILU});
    run_conv((conv_case){shp(2, 300, 3, 4, 5, 1, 1, 1, 0, 1, 1), true, true, NAT_ACT_NONE});
    run_conv((conv_case){shp(1, 6, 5, 33, 4, 3, 3, 1, 1, 1, 2), true, true, NAT_ACT_RELU});
}

/* 3x3 stride 1 with 16+ channels: Winograd F(2x2, 3x3) (nat_kern_wino.c).
 * Odd and even outputs (a last tile half outside), no padding and padding 2,
 * rows of tiles wider than 16 and blocks spanning tile rows, batch 2, every
 * epilogue path (in registers: bias, residual, ReLU, ReLU6; GELU, SiLU after),
 * each with one thread per block and with the team on one block (3 threads,
 * 1 or 2 blocks); 7 x 7 at batch 1 is left to the direct path. */
static void test_conv_winograd(void **state)
{
    int threads = omp_get_max_threads();
    nat_conv_shape s = shp(1, 24, 6, 70, 16, 3, 3, 1, 0, 1, 1);
    s.pad_w = 1; /* unequal padding */
    for (int t = 1; t <= 3; t += 2) {
        omp_set_num_threads(t);
        run_conv((conv_case){shp(2, 16, 9, 11, 16, 3, 3, 1, 1, 1, 1), true, true, NAT_ACT_RELU});
        run_conv((conv_case){shp(1, 20, 13, 40, 17, 3, 3, 1, 0, 1, 1), true, false, NAT_ACT_RELU6});
        run_conv((conv_case){shp(1, 32, 12, 12, 48, 3, 3, 1, 1, 1, 1), false, true, NAT_ACT_GELU});
        run_conv((conv_case){shp(2, 17, 15, 34, 19, 3, 3, 1, 2, 1, 1), false, false, NAT_ACT_NONE});
        run_conv((conv_case){s, true, true, NAT_ACT_SILU});
    }
    omp_set_num_threads(threads);
    nat_conv_shape small = shp(1, 32, 7, 7, 32, 3, 3, 1, 1, 1, 1);
    small.blas = false;
    assert_true(nat_conv_shape_finish(&small));
    assert_int_equal(nat_conv2d_prep_floats(&small), 0); /* 16 tiles: not Winograd */
    small.n = 2;
    assert_true((nat_conv2d_prep_floats(&small) > 0) == nat_v16_available()); /* Winograd */
    run_conv((conv_case){shp(1, 32, 7, 7, 48, 3, 3, 1, 1, 1, 1), true, false, NAT_ACT_RELU});
}

static void test_conv_dilation(void **state)
{
    run_conv((conv_case){shp(2, 4, 13, 11, 6, 3, 3, 1, 2, 2, 1), true, true, NAT_ACT_GELU});
    run_conv((conv_case){shp(1, 2, 15, 15, 3, 3, 3, 2, 1, 2, 1), false, false, NAT_ACT_RELU});
}

static void test_conv_groups(void **state)
{
    run_conv((conv_case){shp(2, 6, 9, 8, 4, 3, 3, 1, 1, 1, 2), true, true, NAT_ACT_RELU});
    run_conv((conv_case){shp(1, 8, 7, 7, 12, 1, 1, 1, 0, 1, 4), true, false, NAT_ACT_NONE});
}

static void test_conv_depthwise(void **state)
{
    run_conv((conv_case){shp(2, 8, 10, 9, 8, 3, 3, 1, 1, 1, 8), true, false, NAT_ACT_RELU});
    run_conv((conv_case){shp(1, 6, 15, 14, 6, 5, 5, 2, 2, 1, 6), false, true, NAT_ACT_GELU});
    run_conv((conv_case){shp(2, 4, 9, 9, 8, 3, 3, 1, 2, 2, 4), true, true, NAT_ACT_NONE});
    run_conv((conv_case){shp(1, 3, 4, 4, 3, 3, 3, 1, 5, 1, 3), false, false, NAT_ACT_NONE});
    /* MobileNet's: ReLU6 in registers; stride 2 over a row wider than 32 */
    run_conv((conv_case){shp(1, 4, 9, 70, 4, 3, 3, 2, 1, 1, 4), true, false, NAT_ACT_RELU6});
    run_conv((conv_case){shp(1, 4, 9, 37, 8, 3, 3, 1, 1, 1, 4), true, false, NAT_ACT_RELU6});
    /* EfficientNet's and MobileNetV3's: SiLU, sigmoid, hardswish, hardsigmoid in
     * registers (nat_vmath.h), 5x5 stride 2 and 7x7 planes of a tail under 8 lanes */
    run_conv((conv_case){shp(1, 6, 7, 7, 6, 3, 3, 1, 1, 1, 6), true, false, NAT_ACT_SILU});
    run_conv((conv_case){shp(2, 5, 14, 23, 5, 5, 5, 2, 2, 1, 5), true, false, NAT_ACT_SILU});
    run_conv((conv_case){shp(1, 4, 11, 19, 4, 3, 3, 1, 1, 1, 4), false, false, NAT_ACT_SIGMOID});
    run_conv((conv_case){shp(1, 4, 12, 40, 4, 5, 5, 1, 2, 1, 4), true, false, NAT_ACT_HARDSWISH});
    run_conv((conv_case){shp(1, 3, 9, 9, 3, 3, 3, 2, 1, 1, 3), true, false, NAT_ACT_HARDSIGMOID});
    run_conv((conv_case){shp(1, 4, 9, 17, 4, 3, 3, 1, 1, 1, 4), true, true, NAT_ACT_SILU});
    /* the vector rows' generic kernel size (7x7, 3x5) and the plain loop (stride 3) */
    run_conv((conv_case){shp(1, 3, 16, 33, 3, 7, 7, 1, 3, 1, 3), true, false, NAT_ACT_RELU});
    nat_conv_shape s = shp(1, 4, 10, 27, 4, 3, 3, 2, 1, 1, 4);
    s.kw = 5;
    s.pad_w = 2;
    run_conv((conv_case){s, true, false, NAT_ACT_SILU});
    run_conv((conv_case){shp(1, 4, 13, 20, 4, 3, 3, 3, 1, 1, 4), true, true, NAT_ACT_RELU6});
}

static void test_conv_1x1(void **state)
{
    run_conv((conv_case){shp(2, 16, 7, 6, 8, 1, 1, 1, 0, 1, 1), true, false, NAT_ACT_GELU});
    run_conv((conv_case){shp(2, 16, 7, 6, 8, 1, 1, 1, 0, 1, 1), false, true, NAT_ACT_NONE});
    run_conv((conv_case){shp(2, 8, 9, 9, 4, 1, 1, 2, 0, 1, 1), true, true, NAT_ACT_RELU});
    run_conv((conv_case){shp(1, 8, 5, 5, 4, 1, 1, 1, 1, 1, 1), false, false, NAT_ACT_NONE});
    /* the epilogue's activation over rows end to end (nat_epi_apply): an SE
     * block's expand on a 1x1 plane, and 7x7 planes in blocks of 41 rows */
    run_conv((conv_case){shp(1, 20, 1, 1, 300, 1, 1, 1, 0, 1, 1), true, false, NAT_ACT_SIGMOID});
    run_conv((conv_case){shp(2, 16, 7, 7, 100, 1, 1, 1, 0, 1, 1), true, true, NAT_ACT_SILU});
    /* more than 64 output channels at one image: tiles of a few output rows
     * each, their epilogue rows apart (EfficientNet's head, 320 -> 1280 at 7x7) */
    run_conv((conv_case){shp(1, 24, 7, 7, 101, 1, 1, 1, 0, 1, 1), true, false, NAT_ACT_SILU});
    run_conv((conv_case){shp(1, 16, 9, 9, 70, 1, 1, 1, 0, 1, 1), true, true, NAT_ACT_HARDSWISH});
}

/* A small plane on one image splits its output channels among the threads
 * (more than 64 of them: the packed path; where the machine has 2 or more
 * cores): 3x3 with residual, stride 2 down to 7x7, a pointwise plane of 256
 * (the limit), 101 channels (chunks of 64 and 37) and 5x5. */
static void test_conv_channel_split(void **state)
{
    int threads = omp_get_max_threads();
    /* cut for the shape's threads (the plan's), which finish takes from
     * OpenMP where unset, at most the processors; run on as many, or on
     * another count than it was cut for (correct either way) */
    for (int t = 1; t <= 2; t++)
        for (int run_on = 1; run_on <= 2; run_on++) {
            omp_set_num_threads(t);
            conv_case cs[] = {
                {shp(1, 16, 9, 9, 80, 3, 3, 1, 1, 1, 1), true, true, NAT_ACT_SILU},
                {shp(1, 8, 14, 14, 70, 3, 3, 2, 1, 1, 1), true, false, NAT_ACT_RELU},
                {shp(1, 32, 16, 16, 96, 1, 1, 1, 0, 1, 1), false, true, NAT_ACT_NONE},
                {shp(1, 40, 7, 7, 101, 1, 1, 1, 0, 1, 1), true, true, NAT_ACT_SIGMOID},
                {shp(1, 6, 8, 8, 72, 5, 5, 1, 2, 1, 1), true, false, NAT_ACT_HARDSWISH}};
            for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
                assert_true(nat_conv_shape_finish(&cs[i].s));
                assert_int_equal(cs[i].s.threads, t <= omp_get_num_procs() ? t : 1);
                omp_set_num_threads(run_on);
                run_conv(cs[i]);
                omp_set_num_threads(t);
            }
        }
    omp_set_num_threads(1000);
    nat_conv_shape s = shp(1, 16, 9, 9, 80, 3, 3, 1, 1, 1, 1);
    assert_true(nat_conv_shape_finish(&s));
    assert_int_equal(s.threads, omp_get_num_procs()); /* the workspace's slots */
    s.threads = -1;
    assert_false(nat_conv_shape_finish(&s));
    omp_set_num_threads(threads);
}

static void test_conv_stem_7x7(void **state)
{
    run_conv((conv_case){shp(2, 3, 32, 30, 8, 7, 7, 2, 3, 1, 1), true, false, NAT_ACT_RELU});
}

/* Many output-row tiles, the 3x3 64->64 56x56 benchmark shape. */
static void test_conv_tiled(void **state)
{
    run_conv((conv_case){shp(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1), true, true, NAT_ACT_RELU});
    run_conv((conv_case){shp(3, 32, 30, 30, 16, 3, 3, 1, 1, 1, 1), false, false, NAT_ACT_NONE});
}

/* nat_act_vec (every eager activation of the zoo and every epilogue but the
 * depthwise convolution's) against float64, element by element, over the
 * clamps of exp (+-100) and lengths with every tail under 16 lanes. */
static void test_act_vec(void **state)
{
    const nat_act acts[] = {NAT_ACT_RELU,    NAT_ACT_RELU6,     NAT_ACT_SILU,
                            NAT_ACT_SIGMOID, NAT_ACT_HARDSWISH, NAT_ACT_HARDSIGMOID};
    enum { N = 1003 };
    float x[N + 1];
    for (size_t k = 0; k < sizeof acts / sizeof acts[0]; k++) {
        for (int n = 1; n <= N; n += (n < 40 ? 1 : 241)) {
            for (int i = 0; i < n; i++)
                x[i] = -100.0f + 200.0f * (float)i / (float)(n > 1 ? n - 1 : 1);
            x[n] = 12345.0f; /* past the end: must stay */
            float in[N];
            memcpy(in, x, (size_t)n * sizeof(float));
            nat_act_vec(x, n, acts[k]);
            assert_true(x[n] == 12345.0f);
            for (int i = 0; i < n; i++) {
                double ref = act_ref(in[i], acts[k]), err = fabs((double)x[i] - ref);
                if (err > 1e-6 * fabs(ref) && err > 1e-30)
                    fail_msg("act %d at x = %.9g: %.9g, want %.9g", acts[k], in[i], x[i], ref);
            }
        }
    }
}

/* nat_epi_apply over short rows apart from each other (a GEMM tile's few
 * columns of each output channel's plane: the rows' interleaved activation),
 * bias per row and a residual, against float64: row counts around the 4
 * rows it takes at a time and its 16-row blocks, columns around the 8 and 16
 * lanes, and the columns between the rows (ldc) untouched. */
static void test_epi_short_rows(void **state)
{
    const nat_act acts[] = {NAT_ACT_SILU, NAT_ACT_SIGMOID, NAT_ACT_HARDSWISH, NAT_ACT_RELU};
    enum { LDC = 49, ROWS = 37 };
    static float c[ROWS * LDC], in[ROWS * LDC], res[ROWS * LDC], bias[ROWS];
    const int cols_of[] = {1, 7, 8, 15, 16, 17, 28, 33, 48};
    const int rows_of[] = {1, 3, 4, 5, 13, 16, 17, 37};
    for (int i = 0; i < ROWS * LDC; i++) {
        in[i] = (float)((i * 37) % 101) * 0.2f - 10.0f;
        res[i] = (float)((i * 11) % 13) * 0.1f - 0.6f;
    }
    for (int r = 0; r < ROWS; r++)
        bias[r] = (float)r * 0.05f - 0.9f;
    for (size_t k = 0; k < sizeof acts / sizeof acts[0]; k++)
        for (size_t ci = 0; ci < sizeof cols_of / sizeof cols_of[0]; ci++)
            for (size_t ri = 0; ri < sizeof rows_of / sizeof rows_of[0]; ri++)
                for (int with_res = 0; with_res < 2; with_res++) {
                    int cols = cols_of[ci], rows = rows_of[ri];
                    memcpy(c, in, sizeof c);
                    nat_epi e = {.bias = bias,
                                 .bias_rows = true,
                                 .res = with_res ? res : NULL,
                                 .ldr = LDC,
                                 .act = acts[k]};
                    nat_epi_apply(c, LDC, 0, 0, rows, cols, &e);
                    for (int r = 0; r < ROWS; r++)
                        for (int j = 0; j < LDC; j++) {
                            int i = r * LDC + j;
                            if (r >= rows || j >= cols) {
                                if (c[i] != in[i])
                                    fail_msg("act %d, %d x %d: (%d, %d) written", acts[k], rows,
                                             cols, r, j);
                                continue;
                            }
                            float x = in[i] + bias[r] + (with_res ? res[i] : 0.0f);
                            double ref = act_ref(x, acts[k]), err = fabs((double)c[i] - ref);
                            if (err > 1e-5 * fabs(ref) && err > 1e-6)
                                fail_msg("act %d, %d x %d at (%d, %d): %.9g, want %.9g", acts[k],
                                         rows, cols, r, j, c[i], ref);
                        }
                }
}

/* nat_exp_sum (every softmax's exponentials, eager and fused) against
 * float64: each value and the sum within 1e-6, a -inf (a mask) exactly 0,
 * in place as the attention kernels call it, every tail under 8 (AVX2) or
 * 16 (AVX-512) lanes. */
static void test_exp_sum(void **state)
{
    enum { N = 67 };
    float x[N], o[N];
    for (int n = 1; n <= N; n++) {
        for (int i = 0; i < n; i++)
            x[i] = i % 5 == 4 ? -INFINITY : (float)(i % 23) * 0.7f - 9.0f;
        const float scale = 1.25f, m = 3.5f;
        double want = 0.0;
        float got = nat_exp_sum(x, scale, m, o, n);
        for (int i = 0; i < n; i++) {
            double ref = isinf(x[i]) ? 0.0 : exp((double)x[i] * scale - m);
            want += ref;
            if (ref == 0.0 ? o[i] != 0.0f : fabs(o[i] - ref) > 1e-6 * ref)
                fail_msg("n %d at %d: exp(%.9g) = %.9g, want %.9g", n, i, x[i], o[i], ref);
        }
        assert_true(fabs(got - want) <= 1e-6 * want);
        float y[N];
        memcpy(y, x, sizeof y);
        assert_true(nat_exp_sum(y, scale, m, y, n) == got); /* in place: the same */
        assert_memory_equal(y, o, (size_t)n * sizeof(float));
    }
}

/* The one exponential, scalar (nat_expf) and on the CPU's lanes (through
 * nat_exp_sum), against float64 over the range where the result is a normal
 * float: within 4e-7 relative (2.5e-7 on [-20, 20], where every softmax's
 * values fall), exactly 1 at 0 (a softmax row's maximum), 0 below -88 and at
 * -inf, finite (exp(88)) above 88; the two forms equal: the same operations. */
static void test_expf(void **state)
{
    (void)state;
    enum { N = 4096 };
    static float x[N], o[N];
    double worst = 0.0, worst20 = 0.0;
    for (float lo = -87.0f; lo < 88.0f; lo += 0.0437f * N) {
        int n = 0;
        for (; n < N && lo + 0.0437f * (float)n < 88.0f; n++)
            x[n] = lo + 0.0437f * (float)n;
        (void)nat_exp_sum(x, 1.0f, 0.0f, o, n);
        for (int i = 0; i < n; i++) {
            double ref = exp((double)x[i]);
            float s = nat_expf(x[i]);
            double e = fabs(o[i] - ref) / ref, es = fabs(s - ref) / ref;
            if (e > 4e-7 || es > 4e-7)
                fail_msg("exp(%.9g): %.9g lanes, %.9g scalar, want %.9g", x[i], o[i], s, ref);
            if (o[i] != s)
                fail_msg("exp(%.9g): lanes %.9g, scalar %.9g", x[i], o[i], s);
            worst = fmax(worst, fmax(e, es));
            if (fabsf(x[i]) <= 20.0f)
                worst20 = fmax(worst20, fmax(e, es));
        }
    }
    assert_true(worst > 0.0 && worst < 4e-7);
    assert_true(worst20 < 2.5e-7);
    const float edge[] = {0.0f, -88.5f, -1000.0f, -INFINITY, 88.0f, 100.0f, INFINITY, 1.0f};
    enum { E = sizeof edge / sizeof edge[0] };
    float y[E];
    (void)nat_exp_sum(edge, 1.0f, 0.0f, y, E);
    for (int i = 0; i < E; i++) {
        float s = nat_expf(edge[i]);
        if (edge[i] == 0.0f)
            assert_true(y[i] == 1.0f && s == 1.0f);
        else if (edge[i] < -88.0f)
            assert_true(y[i] == 0.0f && s == 0.0f);
        else if (edge[i] >= 88.0f)
            assert_true(isfinite(y[i]) && isfinite(s) && y[i] > 1.6e38f && s > 1.6e38f);
    }
    /* a softmax row: its maximum's exponential is exactly 1 */
    const float row[] = {3.25f, -1.5f, 0.125f, 7.75f, 2.0f, -30.0f, 7.5f, 1.0f, 0.5f};
    float e9[9];
    (void)nat_exp_sum(row, 1.0f, 7.75f, e9, 9);
    assert_true(e9[3] == 1.0f);
}

/* The depthwise convolution's in-register epilogue is the eager pass's
 * activation, bit for bit: conv with bias and act equals conv with bias, then
 * nat_act_vec (EfficientNet's 7x7 and 14x14 planes, strides 1 and 2). */
static void test_conv_depthwise_act_exact(void **state)
{
    const nat_act acts[] = {NAT_ACT_SILU, NAT_ACT_SIGMOID, NAT_ACT_HARDSWISH, NAT_ACT_RELU6};
    const nat_conv_shape shapes[] = {shp(1, 12, 7, 7, 12, 3, 3, 1, 1, 1, 12),
                                     shp(1, 8, 14, 14, 8, 5, 5, 2, 2, 1, 8)};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        nat_conv_shape s = shapes[k];
        s.blas = false;
        assert_true(nat_conv_shape_finish(&s));
        size_t n_in = (size_t)s.n * s.ci * s.h * s.w, n_out = (size_t)s.n * s.co * s.ho * s.wo;
        rng_state = 99;
        float *in = rnd_buf(n_in), *w = rnd_buf((size_t)s.co * s.kh * s.kw), *b = rnd_buf(s.co);
        float *fused = rnd_buf(n_out), *eager = rnd_buf(n_out);
        for (size_t i = 0; i < n_in; i++)
            in[i] *= 4.0f;
        for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
            nat_conv2d(in, w, NULL, b, NULL, fused, &s, acts[a], NULL);
            nat_conv2d(in, w, NULL, b, NULL, eager, &s, NAT_ACT_NONE, NULL);
            nat_act_vec(eager, (int64_t)n_out, acts[a]);
            for (size_t i = 0; i < n_out; i++)
                if (memcmp(&fused[i], &eager[i], sizeof(float)) != 0)
                    fail_msg("shape %zu act %d at %zu: fused %.9g, eager %.9g", k, acts[a], i,
                             fused[i], eager[i]);
        }
        free(in), free(w), free(b), free(fused), free(eager);
    }
}

static void test_conv_workspace(void **state)
{
    nat_conv_shape s = shp(1, 8, 10, 10, 4, 1, 1, 1, 0, 1, 1);
    assert_true(nat_conv_shape_finish(&s));
    assert_int_equal(s.ho, 10);
    assert_int_equal(nat_conv2d_workspace(&s, false), 0); /* pointwise on OpenBLAS: direct GEMM */
    s.blas = false;
    size_t pws = nat_conv2d_workspace(&s, false);
    if (nat_v16_available()) /* our GEMM reads the plane in place: only its row table (8 int64) */
        assert_int_equal(pws, 2 * 8);
    else /* 8 lanes: each thread's tile copied into whole panels of 32 pixels */
        assert_true(pws > 0 && pws % (8 * 32) == 0);
    s = shp(1, 8, 10, 10, 8, 3, 3, 1, 1, 1, 8);
    assert_true(nat_conv_shape_finish(&s));
    assert_int_equal(nat_conv2d_workspace(&s, false), 0); /* depthwise: loop kernel */
    s = shp(1, 8, 10, 12, 4, 3, 3, 1, 1, 1, 1);
    assert_true(nat_conv_shape_finish(&s));
    assert_int_equal(s.ho, 10);
    assert_int_equal(s.wo, 12);
    size_t ws = nat_conv2d_workspace(&s, false);
    size_t row = (size_t)8 * 9 * 12; /* one output row of im2col */
    assert_true(ws >= row);
    assert_int_equal(ws % row, 0);
    assert_true(ws <= row * 10 * 256); /* no more than the whole image per thread */
    s.blas = false; /* stride 1 on our GEMM: row table, padded input, per-thread output tiles */
    {
        size_t table = 2 * 8 * 9, padded = (size_t)8 * 12 * 14;
        ws = nat_conv2d_workspace(&s, false);
        assert_true(ws > table + padded);
        /* a tile per thread holds at most the whole output with its pad columns */
        assert_true(ws <= table + padded + 64 + (size_t)256 * 4 * (10 * 14));
    }
    s.blas = true;
    s = shp(2, 3, 32, 32, 8, 7, 7, 2, 3, 1, 1);
    assert_true(nat_conv_shape_finish(&s));
    assert_int_equal(s.ho, 16);
    assert_int_equal(s.wo, 16);
    s = shp(1, 1, 15, 15, 1, 3, 3, 2, 1, 2, 1);
    assert_true(nat_conv_shape_finish(&s));
    assert_int_equal(s.ho, 7); /* (15 + 2 - 5) / 2 + 1 */
}

static void expect_bad(nat_conv_shape s)
{
    assert_false(nat_conv_shape_finish(&s));
}

static void test_conv_bad_shapes(void **state)
{
    expect_bad(shp(1, 3, 2, 2, 4, 3, 3, 1, 0, 1, 1));             /* kernel wider than input */
    expect_bad(shp(1, 3, 5, 5, 4, 3, 3, 1, 0, 3, 1));             /* dilated kernel too wide */
    expect_bad(shp(1, 6, 5, 5, 4, 3, 3, 1, 1, 1, 4));             /* groups do not divide ci */
    expect_bad(shp(1, 8, 5, 5, 6, 3, 3, 1, 1, 1, 4));             /* groups do not divide co */
    expect_bad(shp(1, 3, 5, 5, 4, 3, 3, 0, 1, 1, 1));             /* zero stride */
    expect_bad(shp(1, 3, 5, 5, 4, 3, 3, 1, -1, 1, 1));            /* negative pad */
    expect_bad(shp(1, 3, 5, 5, 4, 3, 3, 1, 1, 0, 1));             /* zero dilation */
    expect_bad(shp(0, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1));             /* empty batch */
    expect_bad(shp(1, 0, 5, 5, 4, 3, 3, 1, 1, 1, 1));             /* no channels */
    expect_bad(shp(1, 3, 5, 5, 4, 3, 3, 1, 1, 1, 0));             /* zero groups */
    expect_bad(shp(1, 3, 5, 5, 4, 0, 3, 1, 1, 1, 1));             /* empty kernel */
    expect_bad(shp(1024, 1024, 1024, 1024, 4, 3, 3, 1, 1, 1, 1)); /* over INT_MAX */
    expect_bad(shp(1, 3, 5, 5, 4, 3, 3, 1, 2000000000, 1, 1));    /* huge output */
    expect_bad(shp(1, 1, 5, 5, 1, 3, 3, 1, 1, 2000000000, 1));    /* huge dilation */
    assert_false(nat_conv_shape_finish(NULL));
}

/* ---- batched matmul ---- */

static void bmm_ref(const float *a, const float *b, double *c, int nb, int m, int n, int k, bool tb)
{
    for (int z = 0; z < nb; z++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double acc = 0.0;
                for (int t = 0; t < k; t++) {
                    float bv = tb ? b[((size_t)z * n + j) * k + t] : b[((size_t)z * k + t) * n + j];
                    acc += (double)a[((size_t)z * m + i) * k + t] * bv;
                }
                c[((size_t)z * m + i) * n + j] = acc;
            }
}

static void run_bmm(int nb, int m, int n, int k, bool tb)
{
    rng_state = 777;
    size_t na = (size_t)nb * m * k, nbb = (size_t)nb * n * k, nc = (size_t)nb * m * n;
    float *a = rnd_buf(na), *b = rnd_buf(nbb), *c = rnd_buf(nc);
    double *ref = dbuf(nc);
    nat_bmm(a, b, c, nb, m, n, k, tb);
    bmm_ref(a, b, ref, nb, m, n, k, tb);
    check_close(c, ref, nc);
    free(a), free(b), free(c), free(ref);
}

static void test_bmm(void **state)
{
    run_bmm(3, 5, 7, 4, false);
    run_bmm(3, 5, 7, 4, true);
    run_bmm(1, 33, 17, 65, true);
    run_bmm(4, 64, 48, 32, false);
    run_bmm(2, 256, 256, 256, true); /* large: OpenBLAS's own threads */
    run_bmm(2, 256, 256, 256, false);
    run_bmm(2, 3, 4, 0, false); /* empty sum: zeros */
}

/* ---- our packed GEMM, called directly (nat_kern_pgemm.c) ---- */

/* nat_pw_gemm on columns [c0, c0 + cols) of an n-column weight, against
 * float64, on the width this process runs (16 lanes; 8 where the CPU lacks
 * AVX-512, or under FUSIONBENCH_NATIVE_ISA=avx2, unit.test_kernels_avx2):
 * the panels' column masks, k blocks, a's rows copied first (lda a multiple
 * of 1024 floats puts them in one L1 set) or read in place, c added to, and
 * the epilogue (a bias per column, ReLU).  The columns outside the call and
 * the pad columns of c keep their values. */
static void run_pw(int64_t rows, int64_t k, int64_t n, int64_t c0, int64_t cols, int64_t lda,
                   bool accumulate)
{
    int64_t ldc = n + 3;
    float *a = rnd_buf((size_t)(rows * lda)), *w = rnd_buf((size_t)(k * n));
    float *bias = rnd_buf((size_t)n), *c = rnd_buf((size_t)(rows * ldc));
    float *pw = malloc((size_t)nat_pw_floats(n, k) * sizeof *pw);
    double *ref = dbuf((size_t)(rows * ldc));
    assert_non_null(pw);
    nat_pw_pack(w, false, n, k, pw);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < ldc; j++) {
            double x = c[r * ldc + j];
            if (j >= c0 && j < c0 + cols) {
                double sum = accumulate ? x : 0.0;
                for (int64_t q = 0; q < k; q++)
                    sum += (double)a[r * lda + q] * w[q * n + j];
                x = act_ref(sum + bias[j], NAT_ACT_RELU);
            }
            ref[r * ldc + j] = x;
        }
    nat_epi e = {.bias = bias, .act = NAT_ACT_RELU};
    nat_pw_gemm(a, lda, pw, c, ldc, rows, k, c0, cols, accumulate, &e);
    check_close(c, ref, (size_t)(rows * ldc));
    free(a), free(w), free(bias), free(c), free(pw), free(ref);
}

/* nat_pw_gemm_offsets: B's row q the run at b + koff[q] (rows of b out of
 * order), columns straight to c (vpitch 0) or as virtual rows of vpitch
 * whose first rlen are kept, a bias per row (a convolution's). */
static void run_pw_offsets(int64_t rows, int64_t k, int64_t cols, int64_t vpitch, int64_t rlen)
{
    int64_t stride = cols + 5, out_cols = vpitch ? (cols + vpitch - 1) / vpitch * rlen : cols;
    int64_t ldc = out_cols + 2;
    float *a = rnd_buf((size_t)(rows * k)), *b = rnd_buf((size_t)(k * stride));
    float *bias = rnd_buf((size_t)rows), *c = rnd_buf((size_t)(rows * ldc));
    int64_t *koff = malloc((size_t)k * sizeof *koff);
    double *ref = dbuf((size_t)(rows * ldc));
    assert_non_null(koff);
    for (int64_t q = 0; q < k; q++)
        koff[q] = (k - 1 - q) * stride + q % 3; /* reversed, and not aligned */
    for (int64_t i = 0; i < rows * ldc; i++)
        ref[i] = c[i];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t col = 0; col < cols; col++) {
            if (vpitch && col % vpitch >= rlen)
                continue; /* a pad column: computed and dropped */
            double sum = bias[r];
            for (int64_t q = 0; q < k; q++)
                sum += (double)a[r * k + q] * b[koff[q] + col];
            int64_t at = vpitch ? col / vpitch * rlen + col % vpitch : col;
            ref[r * ldc + at] = act_ref(sum, NAT_ACT_RELU);
        }
    nat_epi e = {.bias = bias, .bias_rows = true, .act = NAT_ACT_RELU};
    nat_pw_gemm_offsets(a, k, b, koff, c, ldc, rows, k, cols, vpitch, rlen, &e);
    check_close(c, ref, (size_t)(rows * ldc));
    free(a), free(b), free(bias), free(c), free(koff), free(ref);
}

static void test_pw_gemm(void **state)
{
    (void)state;
    rng_state = 29;
    print_message("packed GEMM on %s\n", nat_v16_available() ? "16 lanes" : "8 lanes");
    run_pw(1, 1, 5, 0, 5, 1, false);
    run_pw(5, 7, 100, 0, 100, 7, false);        /* the last panel 4 columns */
    run_pw(13, 300, 100, 32, 37, 300, true);    /* from the second panel, k blocks, c added to */
    run_pw(29, 520, 300, 32, 268, 1024, false); /* a's rows copied; past one chunk of panels */
    run_pw(7, 260, 70, 0, 70, 1024, true);
    run_pw_offsets(9, 11, 70, 0, 0);
    run_pw_offsets(13, 300, 52, 18, 16); /* virtual rows; k blocks */
    run_pw_offsets(6, 40, 95, 32, 30);   /* a panel spanning a row's end */
    run_pw_offsets(260, 20, 40, 20, 17); /* rows x KC past the panels-outer order */
}

/* ---- attention ---- */

static void attn_ref(const float *q, const float *k, const float *v, double *o, int bh, int s,
                     int d, double scale, bool causal)
{
    double *p = dbuf((size_t)s);
    for (int z = 0; z < bh; z++) {
        size_t off = (size_t)z * s * d;
        for (int i = 0; i < s; i++) {
            int nj = causal ? i + 1 : s;
            double mx = -INFINITY, sum = 0.0;
            for (int j = 0; j < nj; j++) {
                double acc = 0.0;
                for (int t = 0; t < d; t++)
                    acc += (double)q[off + (size_t)i * d + t] * k[off + (size_t)j * d + t];
                p[j] = acc * scale;
                mx = p[j] > mx ? p[j] : mx;
            }
            for (int j = 0; j < nj; j++)
                sum += (p[j] = exp(p[j] - mx));
            for (int t = 0; t < d; t++) {
                double acc = 0.0;
                for (int j = 0; j < nj; j++)
                    acc += p[j] * v[off + (size_t)j * d + t];
                o[off + (size_t)i * d + t] = acc / sum;
            }
        }
    }
    free(p);
}

/* q is scaled by qmag so softmax is peaked (a real test of the running max). */
static void run_attn(int bh, int s, int d, bool causal, float qmag)
{
    rng_state = 4242;
    size_t n = (size_t)bh * s * d;
    float *q = rnd_buf(n), *k = rnd_buf(n), *v = rnd_buf(n), *o = rnd_buf(n);
    for (size_t i = 0; i < n; i++)
        q[i] *= qmag;
    double *ref = dbuf(n);
    float scale = 1.0f / sqrtf((float)d);
    nat_attention_fused(q, k, v, o, bh, s, d, scale, causal);
    attn_ref(q, k, v, ref, bh, s, d, scale, causal);
    check_close(o, ref, n);
    free(q), free(k), free(v), free(o), free(ref);
}

static void test_attention(void **state)
{
    for (int c = 0; c <= 1; c++) {
        bool causal = c == 1;
        run_attn(2, 1, 16, causal, 1.0f);    /* one token */
        run_attn(3, 100, 64, causal, 1.0f);  /* s not a multiple of the blocks */
        run_attn(2, 300, 32, causal, 8.0f);  /* several key blocks, peaked scores */
        run_attn(1, 257, 64, causal, 30.0f); /* very peaked: max moves between blocks */
        run_attn(1, 70, 300, causal, 1.0f);  /* head wider than the accumulator */
        run_attn(2, 129, 7, causal, 1.0f);   /* odd head size */
    }
}

/* The causal mask must be exact: the first row sees only key 0, so o[0] == v[0]. */
static void test_attention_causal_first_row(void **state)
{
    rng_state = 99;
    int s = 150, d = 8;
    size_t n = (size_t)s * d;
    float *q = rnd_buf(n), *k = rnd_buf(n), *v = rnd_buf(n), *o = rnd_buf(n);
    nat_attention_fused(q, k, v, o, 1, s, d, 0.5f, true);
    for (int t = 0; t < d; t++)
        assert_float_equal(o[t], v[t], 1e-6f);
    free(q), free(k), free(v), free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isa_in_use),
        cmocka_unit_test(test_conv_3x3),
        cmocka_unit_test(test_conv_stride2_nonsquare),
        cmocka_unit_test(test_conv_stride1_shapes),
        cmocka_unit_test(test_conv_winograd),
        cmocka_unit_test(test_conv_dilation),
        cmocka_unit_test(test_conv_groups),
        cmocka_unit_test(test_conv_depthwise),
        cmocka_unit_test(test_conv_depthwise_act_exact),
        cmocka_unit_test(test_act_vec),
        cmocka_unit_test(test_epi_short_rows),
        cmocka_unit_test(test_exp_sum),
        cmocka_unit_test(test_expf),
        cmocka_unit_test(test_conv_1x1),
        cmocka_unit_test(test_conv_channel_split),
        cmocka_unit_test(test_conv_stem_7x7),
        cmocka_unit_test(test_conv_tiled),
        cmocka_unit_test(test_conv_workspace),
        cmocka_unit_test(test_conv_bad_shapes),
        cmocka_unit_test(test_bmm),
        cmocka_unit_test(test_pw_gemm),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_causal_first_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
