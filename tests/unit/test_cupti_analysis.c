/* Unit tests of the CUPTI analysis (worker/engine/cupti/fbc_analysis.c) and the record
 * file (fbc_file.c) on synthetic records: no GPU needed.  Expected figures are
 * worked out by hand in the comments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fbc_analysis.h"
#include "fbc_file.h"

static fbc_rec kern(const char *name, uint32_t corr, uint64_t s, uint64_t e)
{
    fbc_rec r;
    memset(&r, 0, sizeof r);
    r.kind = FBC_KERNEL;
    snprintf(r.name, sizeof r.name, "%s", name);
    r.corr = corr;
    r.start = s;
    r.end = e;
    r.grid[0] = 64;
    r.grid[1] = r.grid[2] = 1;
    r.block[0] = 256;
    r.block[1] = r.block[2] = 1;
    return r;
}

static fbc_rec other(fbc_kind k, uint32_t corr, uint64_t s, uint64_t e, uint64_t bytes)
{
    fbc_rec r;
    memset(&r, 0, sizeof r);
    r.kind = k;
    r.corr = corr;
    r.start = s;
    r.end = e;
    r.bytes = bytes;
    return r;
}

static fbc_rec ext(uint64_t id, uint32_t corr)
{
    fbc_rec r = other(FBC_EXTCORR, corr, 0, 0, 0);
    r.ext_id = id;
    return r;
}

static void add(fbc_store *s, fbc_rec r)
{
    assert_true(fbc_store_add(s, &r));
}

static void test_classify(void **state)
{
    (void)state;
    assert_int_equal(fbc_classify("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32"),
                     FB_KC_GEMM);
    assert_int_equal(fbc_classify("cutlass_80_tensorop_s1688gemm_64x64"), FB_KC_GEMM);
    assert_int_equal(fbc_classify("void cudnn::engines_precompiled::implicit_convolve_sgemm"),
                     FB_KC_GEMM);
    assert_int_equal(fbc_classify("splitKreduce_kernel"), FB_KC_GEMM);
    assert_int_equal(fbc_classify("flash_fwd_kernel"), FB_KC_ATTENTION);
    assert_int_equal(fbc_classify("fused_attention_f16"), FB_KC_ATTENTION);
    assert_int_equal(fbc_classify("_Z14softmax_kernelPKfPfii"), FB_KC_REDUCTION);
    assert_int_equal(fbc_classify("layernorm_fwd"), FB_KC_REDUCTION);
    assert_int_equal(fbc_classify("cudnn::bn_fw_inf_1C11_kernel_NCHW"), FB_KC_REDUCTION);
    assert_int_equal(fbc_classify("triton_red_fused_sum_0"), FB_KC_REDUCTION);
    assert_int_equal(fbc_classify("triton_poi_fused_add_relu_1"), FB_KC_ELEMENTWISE);
    assert_int_equal(fbc_classify("bias_add_f32"), FB_KC_ELEMENTWISE);
    assert_int_equal(fbc_classify("at::native::vectorized_elementwise_kernel"), FB_KC_ELEMENTWISE);
    assert_int_equal(fbc_classify("fused_bias_gelu"), FB_KC_ELEMENTWISE);
    assert_int_equal(fbc_classify("nchwToNhwcKernel"), FB_KC_COPY);
    assert_int_equal(fbc_classify("my_kernel"), FB_KC_OTHER);
    assert_int_equal(fbc_classify(""), FB_KC_OTHER);
    assert_int_equal(fbc_classify(NULL), FB_KC_OTHER);
}

static void test_union(void **state)
{
    /* [0,10) [5,15) [20,30) [25,26) [40,40) [50,45): 15 + 10 + 0 + 0 = 25. */
    fbc_span s[] = {{20, 30}, {0, 10}, {25, 26}, {5, 15}, {40, 40}, {50, 45}};
    fbc_span one[] = {{3, 9}};
    (void)state;
    assert_int_equal(fbc_union_ns(s, 6), 25);
    assert_int_equal(fbc_union_ns(one, 1), 6);
    assert_int_equal(fbc_union_ns(NULL, 0), 0);
}

static void test_union_touching(void **state)
{
    /* Touching intervals merge: [0,10) [10,20) → 20; a nested one adds nothing. */
    fbc_span s[] = {{10, 20}, {0, 10}, {2, 3}};
    (void)state;
    assert_int_equal(fbc_union_ns(s, 3), 20);
}

/* An iteration (ext id 7) of three kernels, one memcpy and one memset, between
 * records of another range (ext id 8) that must not count:
 *   gemm  [1000,1400)  corr 1
 *   relu  [1500,1600)  corr 2
 *   relu  [1550,1650)  corr 3   (overlaps the first relu by 50)
 *   D2D   [1700,1800)  corr 4, 4096 bytes
 *   memset[1800,1810)  corr 5
 * kernel time 400+100+100 = 600; busy = 400 + [1500,1650)=150 + 100 + 10 = 660;
 * span 1000..1810 = 810; idle 150. */
static void iteration(fbc_store *s)
{
    add(s, kern("sm90_xmma_gemm_tn", 1, 1000, 1400));
    add(s, kern("relu_f32", 2, 1500, 1600));
    add(s, kern("relu_f32", 3, 1550, 1650));
    add(s, other(FBC_MEMCPY, 4, 1700, 1800, 4096));
    add(s, other(FBC_MEMSET, 5, 1800, 1810, 64));
    add(s, kern("softmax", 9, 5000, 5100)); /* range 8 */
    for (uint32_t c = 1; c <= 5; c++)
        add(s, ext(7, c));
    add(s, ext(8, 9));
}

static void test_summary(void **state)
{
    fbc_store s;
    fbc_window w = {.ext_id = 7, .t0 = 0, .t1 = 0};
    fbc_summary sum;
    (void)state;

    fbc_store_init(&s, 0);
    iteration(&s);
    assert_int_equal(fbc_summarize(&s, &w, NULL, 0, &sum, NULL), FB_OK);
    assert_int_equal(sum.kernels, 3);
    assert_int_equal(sum.kernel_ns, 600);
    assert_int_equal(sum.busy_ns, 660);
    assert_int_equal(sum.span_ns, 810);
    assert_int_equal(sum.idle_ns, 150);
    assert_int_equal(sum.memcpys, 1);
    assert_int_equal(sum.memcpy_ns, 100);
    assert_int_equal(sum.memcpy_bytes, 4096);
    assert_int_equal(sum.category_ns[FB_KC_GEMM], 400);
    assert_int_equal(sum.category_ns[FB_KC_ELEMENTWISE], 200);
    assert_int_equal(sum.category_ns[FB_KC_COPY], 110);
    assert_false(sum.category_seen[FB_KC_REDUCTION]);
    /* Rows: gemm (0.0004 ms) first, then relu with 2 launches. */
    assert_int_equal(sum.n_rows, 2);
    assert_string_equal(sum.rows[0].name, "sm90_xmma_gemm_tn");
    assert_int_equal(sum.rows[1].count, 2);
    assert_true(fabs(sum.rows[1].mean_ms - 0.0001) < 1e-12);
    assert_int_equal(sum.rows[1].grid[0], 64);
    assert_int_equal(sum.rows[1].block[0], 256);
    assert_int_equal(sum.rows[0].category, FB_KC_GEMM);
    fbc_summary_free(&sum);
    fbc_store_free(&s);
}

static void test_summary_time_window(void **state)
{
    /* No external correlation for ext 99: the [t0, t1] window decides.  The
     * window [1450, 1700] holds the two relus only (the memcpy ends at 1800). */
    fbc_store s;
    fbc_window w = {.ext_id = 99, .t0 = 1450, .t1 = 1700};
    fbc_summary sum;
    (void)state;

    fbc_store_init(&s, 0);
    iteration(&s);
    assert_int_equal(fbc_summarize(&s, &w, NULL, 0, &sum, NULL), FB_OK);
    assert_int_equal(sum.kernels, 2);
    assert_int_equal(sum.busy_ns, 150);
    assert_int_equal(sum.idle_ns, 0);
    fbc_summary_free(&sum);
    fbc_store_free(&s);
}

static void test_labels(void **state)
{
    /* Labels attach to kernels in launch (correlation) order when the counts match. */
    static const char *const gemm_ops[] = {"linear"};
    static const char *const relu_ops[] = {"relu"};
    static const char *const fused_ops[] = {"bias", "relu"};
    fbc_label lab[] = {{"gemm", 1, gemm_ops}, {"relu", 1, relu_ops}, {"relu2", 2, fused_ops}};
    fbc_store s;
    fbc_window w = {.ext_id = 7};
    fbc_summary sum;
    (void)state;

    fbc_store_init(&s, 0);
    iteration(&s);
    assert_int_equal(fbc_summarize(&s, &w, lab, 3, &sum, NULL), FB_OK);
    assert_int_equal(sum.rows[0].n_ops, 1);
    assert_string_equal(sum.rows[0].ops[0], "linear");
    assert_int_equal(sum.rows[1].n_ops, 1); /* the first relu launch's label wins */
    assert_string_equal(sum.rows[1].ops[0], "relu");
    fbc_summary_free(&sum);
    /* A count mismatch attaches nothing. */
    assert_int_equal(fbc_summarize(&s, &w, lab, 2, &sum, NULL), FB_OK);
    assert_int_equal(sum.rows[0].n_ops, 0);
    fbc_summary_free(&sum);
    fbc_store_free(&s);
}

static void test_memory(void **state)
{
    /* alloc 100 @10, alloc 50 @20, [window 30..60] alloc 200 @40, free 200 @50,
     * alloc 30 @55, after it alloc 1000 @70.  Live at t0: 150; in the window the
     * peak is 350 → delta 200; peak up to t1: 350 (the 1000 comes later). */
    fbc_store s;
    fbc_window w = {.ext_id = 1, .t0 = 30, .t1 = 60};
    fbc_summary sum;
    (void)state;

    fbc_store_init(&s, 0);
    add(&s, other(FBC_ALLOC, 0, 10, 10, 100));
    add(&s, other(FBC_FREE, 0, 50, 50, 200));
    add(&s, other(FBC_ALLOC, 0, 20, 20, 50));
    add(&s, other(FBC_ALLOC, 0, 40, 40, 200));
    add(&s, other(FBC_ALLOC, 0, 55, 55, 30));
    add(&s, other(FBC_ALLOC, 0, 70, 70, 1000));
    assert_int_equal(fbc_summarize(&s, &w, NULL, 0, &sum, NULL), FB_OK);
    assert_int_equal(sum.peak_bytes, 350);
    assert_int_equal(sum.peak_delta_bytes, 200);
    assert_int_equal(sum.kernels, 0);
    assert_int_equal(sum.busy_ns, 0);
    fbc_summary_free(&sum);
    fbc_store_free(&s);
}

static void test_store_limit(void **state)
{
    fbc_store s;
    fbc_rec r = kern("k", 1, 0, 1);
    (void)state;

    fbc_store_init(&s, 3);
    for (int i = 0; i < 5; i++)
        (void)fbc_store_add(&s, &r);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.overflow, 2);
    fbc_store_free(&s);
}

static void test_to_variant(void **state)
{
    fbc_store s;
    fbc_window w = {.ext_id = 7};
    fbc_summary sum;
    fb_variant_result vr;
    (void)state;

    fbc_store_init(&s, 0);
    iteration(&s);
    fb_variant_result_init(&vr, "fused");
    assert_int_equal(fbc_summarize(&s, &w, NULL, 0, &sum, NULL), FB_OK);
    fbc_summary_to_variant(&sum, 1000, &vr);
    assert_int_equal(vr.kernels, 3);
    assert_true(fabs(vr.busy_ms - 0.00066) < 1e-12);
    assert_true(fabs(vr.idle_ms - 0.00015) < 1e-12);
    assert_true(fabs(vr.memcpy_ms - 0.0001) < 1e-12);
    assert_int_equal(vr.memcpy_bytes, 4096);
    assert_int_equal(vr.dropped_records, 0);
    assert_int_equal(vr.peak_mem_bytes, 1000);
    assert_true(isnan(vr.categories_ms[FB_KC_ATTENTION]));
    assert_true(fabs(vr.categories_ms[FB_KC_GEMM] - 0.0004) < 1e-12);
    assert_int_equal(vr.n_kernel_rows, 2);
    assert_null(sum.rows);
    free(vr.kernel_rows);
    fbc_store_free(&s);
}

static void test_file_roundtrip(void **state)
{
    char path[] = "/tmp/fbc_test_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    fbc_store in, out;
    fbc_file_info info;
    fbc_rec range;
    fbc_window w;
    fbc_summary sum;
    const uint64_t base = 1700000000000000000ull; /* over 2^53: written relative */
    (void)state;

    assert_non_null(f);
    fbc_store_init(&in, 0);
    iteration(&in);
    range = other(FBC_RANGE, 0, 900, 2000, 0);
    range.ext_id = 7;
    snprintf(range.name, sizeof range.name, "iter \"7\"");
    add(&in, range);
    snprintf(in.recs[0].name, sizeof in.recs[0].name, "gemm\\\"quoted\"\x01");
    assert_int_equal(fbc_file_header(f, 42, base), 0);
    for (size_t i = 0; i < in.n; i++) {
        fbc_rec r = in.recs[i];
        r.start += base;
        r.end += base;
        assert_int_equal(fbc_file_put(f, &r, base), 0);
    }
    assert_int_equal(fbc_file_end(f, 3, "done"), 0);
    fclose(f);

    fbc_store_init(&out, 0);
    assert_int_equal(fbc_file_read(path, &out, &info, NULL), FB_OK);
    unlink(path);
    assert_int_equal(out.n, in.n);
    assert_true(info.complete);
    assert_int_equal(info.dropped, 3);
    assert_string_equal(info.message, "done");
    assert_string_equal(out.recs[0].name, in.recs[0].name);
    assert_int_equal(out.recs[0].start, 1000);
    assert_int_equal(out.recs[0].grid[0], 64);
    assert_true(fbc_window_of_range(&out, 7, &w));
    assert_int_equal(w.t0, 900);
    assert_int_equal(w.t1, 2000);
    assert_int_equal(fbc_summarize(&out, &w, NULL, 0, &sum, NULL), FB_OK);
    assert_int_equal(sum.kernels, 3);
    assert_int_equal(sum.busy_ns, 660);
    assert_int_equal(sum.memcpy_bytes, 4096);
    fbc_summary_free(&sum);
    fbc_store_free(&in);
    fbc_store_free(&out);
}

static fbc_rec launch_mark(uint64_t launch_plus_1, uint32_t corr)
{
    fbc_rec r = ext(launch_plus_1, corr);
    r.kind = FBC_LAUNCH;
    return r;
}

/* Two rounds in one store; round 1's plan has 3 launches: launch 0 one
 * kernel (corr 10, 100 ns), launch 1 a library call of two kernels (corr 11
 * 210-400 and corr 12 400-450: 240 ns), launch 2 nothing on the device; a
 * memset nobody marked (corr 13) and a mark past the plan (corr 14) stay
 * unmarked; round 2's kernel (corr 20) is not round 1's.  Written to a record
 * file and read back first, as the injection library's files are. */
static void test_launch_times(void **state)
{
    char path[] = "/tmp/fbc_test_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    fbc_store in, s;
    fbc_file_info info;
    fbc_window w;
    double t[3], wall;
    int unmarked = -1;
    (void)state;

    assert_non_null(f);
    fbc_store_init(&in, 0);
    for (uint32_t c = 10; c <= 14; c++)
        add(&in, ext(1, c));
    add(&in, ext(2, 20));
    add(&in, launch_mark(1, 10));
    add(&in, launch_mark(2, 11));
    add(&in, launch_mark(2, 12));
    add(&in, launch_mark(9, 14));
    add(&in, launch_mark(1, 20));
    add(&in, kern("gemm_bias", 10, 100, 200));
    add(&in, kern("sm90_xmma_gemm", 11, 210, 400));
    add(&in, kern("splitKreduce_kernel", 12, 400, 450));
    add(&in, other(FBC_MEMSET, 13, 460, 500, 64));
    add(&in, kern("stray", 14, 500, 520));
    add(&in, kern("gemm_bias", 20, 900, 1000));
    fbc_rec range = other(FBC_RANGE, 0, 50, 600, 0);
    range.ext_id = 1;
    add(&in, range);
    assert_int_equal(fbc_file_header(f, 1, 0), 0);
    for (size_t i = 0; i < in.n; i++)
        assert_int_equal(fbc_file_put(f, &in.recs[i], 0), 0);
    fclose(f);
    fbc_store_init(&s, 0);
    assert_int_equal(fbc_file_read(path, &s, &info, NULL), FB_OK);
    unlink(path);
    assert_int_equal(s.n, in.n);

    assert_true(fbc_window_of_range(&s, 1, &w));
    assert_int_equal(fbc_launch_times(&s, &w, 3, t, &wall, &unmarked, NULL), FB_OK);
    assert_true(fabs(t[0] - 100e-6) < 1e-12);
    assert_true(fabs(t[1] - 240e-6) < 1e-12);
    assert_true(t[2] == 0.0);
    assert_int_equal(unmarked, 2);
    assert_true(fabs(wall - 420e-6) < 1e-12); /* 100 .. 520 */

    /* a window with no activity is an error, not zeros */
    fbc_window empty = {.ext_id = 99, .t0 = 2000, .t1 = 3000};
    fb_err err = {0};
    assert_int_equal(fbc_launch_times(&s, &empty, 3, t, &wall, &unmarked, &err), FB_EINVAL);
    assert_non_null(strstr(err.msg, "no device activity"));

    /* activity but no launch marks at all (CUPTI without its API kinds
     * writes none): an error naming it, not every launch at 0 ms */
    fbc_store bare;
    fbc_store_init(&bare, 0);
    add(&bare, kern("gemm_bias", 10, 100, 200));
    add(&bare, kern("relu", 11, 210, 260));
    fbc_window all = {.ext_id = 5, .t0 = 0, .t1 = 1000};
    assert_int_equal(fbc_launch_times(&bare, &all, 2, t, &wall, &unmarked, &err), FB_EUNAVAIL);
    assert_int_equal(unmarked, 2);
    assert_non_null(strstr(err.msg, "none of the iteration's 2 launch marks"));
    fbc_store_free(&bare);
    fbc_store_free(&in);
    fbc_store_free(&s);
}

static void test_file_bad(void **state)
{
    char path[] = "/tmp/fbc_test_XXXXXX";
    int fd = mkstemp(path);
    fbc_store s;
    fbc_file_info info;
    fb_err err;
    (void)state;

    assert_true(fd >= 0);
    assert_true(write(fd, "{\"t\":\"kernel\"}\nnot json\n", 24) == 24);
    close(fd);
    fbc_store_init(&s, 0);
    fb_err_clear(&err);
    assert_int_equal(fbc_file_read(path, &s, &info, &err), FB_EJSON);
    assert_non_null(strstr(err.msg, "line 2"));
    assert_false(info.complete);
    unlink(path);
    assert_int_equal(fbc_file_read(path, &s, &info, &err), FB_EIO);
    fbc_store_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_union),
        cmocka_unit_test(test_union_touching),
        cmocka_unit_test(test_summary),
        cmocka_unit_test(test_summary_time_window),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_store_limit),
        cmocka_unit_test(test_to_variant),
        cmocka_unit_test(test_file_roundtrip),
        cmocka_unit_test(test_file_bad),
        cmocka_unit_test(test_launch_times),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
