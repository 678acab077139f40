/* Unit tests of fb_stats_compute and fb_mann_whitney_p against values derived
 * by hand (comments show the arithmetic). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fb_stats.h"

#include <stdio.h>

#define EPS 1e-12

/* cmocka's assert_float_equal compares in float; these are doubles. */
#define assert_close(a, b, eps) check_close((a), (b), (eps), #a, __LINE__)

static void check_close(double a, double b, double eps, const char *expr, int line)
{
    if (!(fabs(a - b) <= eps)) {
        print_error("line %d: %s = %.17g, expected %.17g (eps %g)\n", line, expr, a, b, eps);
        fail();
    }
}

/* 1..n in a scrambled order (stride 7 is coprime with the n used here), so the
 * code must sort a copy; the input must stay as given. */
static double *scrambled(int n)
{
    double *s = malloc((size_t)n * sizeof *s);
    assert_non_null(s);
    for (int i = 0; i < n; i++)
        s[i] = (double)((i * 7) % n + 1);
    return s;
}

static void test_odd(void **state)
{
    /* sorted 1 2 3: median 2; mean 2; stdev sqrt((1 + 0 + 1) / 2) = 1; cv 0.5;
     * p90: h = (3-1)*0.9 = 1.8 -> 2 + 0.8*(3-2) = 2.8; n < 6 -> CI [min, max]. */
    double s[] = {3, 1, 2};
    fb_stats st;

    fb_stats_compute(s, 3, &st);
    assert_int_equal(st.n, 3);
    assert_close(st.median, 2.0, EPS);
    assert_close(st.mean, 2.0, EPS);
    assert_close(st.stdev, 1.0, EPS);
    assert_close(st.cv, 0.5, EPS);
    assert_close(st.min, 1.0, EPS);
    assert_close(st.max, 3.0, EPS);
    assert_close(st.p90, 2.8, EPS);
    assert_close(st.ci95_lo, 1.0, EPS);
    assert_close(st.ci95_hi, 3.0, EPS);
    assert_close(s[0], 3.0, 0.0); /* input untouched */
}

static void test_even(void **state)
{
    /* sorted 1 2 3 4: median h = 1.5 -> 2.5; mean 2.5; squares of deviations
     * 2.25 + 0.25 + 0.25 + 2.25 = 5, stdev = sqrt(5/3) = 1.2909944487;
     * p90: h = 2.7 -> 3 + 0.7 = 3.7. */
    double s[] = {4, 1, 3, 2};
    fb_stats st;

    fb_stats_compute(s, 4, &st);
    assert_close(st.median, 2.5, EPS);
    assert_close(st.mean, 2.5, EPS);
    assert_close(st.stdev, sqrt(5.0 / 3.0), EPS);
    assert_close(st.p90, 3.7, EPS);
    assert_close(st.cv, sqrt(5.0 / 3.0) / 2.5, EPS);
}

static void test_single(void **state)
{
    double s[] = {1.25};
    fb_stats st;

    fb_stats_compute(s, 1, &st);
    assert_close(st.median, 1.25, EPS);
    assert_close(st.p90, 1.25, EPS);
    assert_close(st.stdev, 0.0, EPS);
    assert_close(st.cv, 0.0, EPS);
    assert_close(st.ci95_lo, 1.25, EPS);
    assert_close(st.ci95_hi, 1.25, EPS);
}

/* Samples 1..n, so x(j) = j and the CI bounds are the ranks themselves. */
static void check_ci(int n, double lo, double hi, double median, double p90)
{
    double *s = scrambled(n);
    fb_stats st;

    fb_stats_compute(s, n, &st);
    assert_close(st.ci95_lo, lo, EPS);
    assert_close(st.ci95_hi, hi, EPS);
    assert_close(st.median, median, EPS);
    assert_close(st.p90, p90, EPS);
    assert_close(st.min, 1.0, EPS);
    assert_close(st.max, (double)n, EPS);
    assert_close(st.mean, (n + 1) / 2.0, EPS);
    free(s);
}

static void test_ci_n10(void **state)
{
    /* Binomial(10, 1/2): P(B <= 1) = (1 + 10)/1024 = 0.0107 <= 0.025 but
     * P(B <= 2) = 56/1024 = 0.0547 > 0.025, so j = 2, k = 10 - 2 + 1 = 9,
     * coverage 1 - 2*11/1024 = 0.9785.  median h = 4.5 -> 5.5; p90 h = 8.1 -> 9.1. */
    check_ci(10, 2.0, 9.0, 5.5, 9.1);
}

static void test_ci_n50(void **state)
{
    /* Binomial(50, 1/2): P(B <= 16) = 0.0164, P(B <= 17) = 0.0325 > 0.025, so
     * j = 17 + 1 = 18, k = 33 (coverage 0.967, the textbook table's pair).
     * median 25.5; p90 h = 44.1 -> 45.1. */
    check_ci(50, 18.0, 33.0, 25.5, 45.1);
}

static void test_ci_n100(void **state)
{
    /* Binomial(100, 1/2): P(B <= 39) = 0.0176, P(B <= 40) = 0.0284 > 0.025, so
     * j = 40, k = 61 (coverage 0.9648).  median 50.5; p90 h = 89.1 -> 90.1. */
    check_ci(100, 40.0, 61.0, 50.5, 90.1);
}

static void test_ci_small_n(void **state)
{
    /* n = 5: even [min, max] covers only 1 - 2/32 = 0.9375, so [min, max] by
     * rule; n = 6: P(B <= 0) = 1/64 <= 0.025 and P(B <= 1) = 7/64 > 0.025, so
     * j = 1, k = 6: [min, max] again (coverage 0.96875). */
    check_ci(5, 1.0, 5.0, 3.0, 4.6);
    check_ci(6, 1.0, 6.0, 3.5, 5.5);
}

static void test_ci_large_n(void **state)
{
    /* Normal approximation above 5000: j = floor((10000 - 1.96*100)/2) = 4902,
     * k = 10000 - 4902 + 1 = 5099.  The CI must bracket the median. */
    check_ci(10000, 4902.0, 5099.0, 5000.5, 9000.1);
}

static void test_mw_separated_small(void **state)
{
    /* a = 1 2 3, b = 4 5 6: ranks of a sum to 6, U = 6 - 3*4/2 = 0; mu = 4.5;
     * var = 3*3/12 * 7 = 5.25; z = (4.5 - 0.5)/sqrt(5.25) = 1.74574;
     * p = erfc(z/sqrt 2) = 0.080856. */
    double a[] = {1, 2, 3}, b[] = {4, 5, 6};
    assert_close(fb_mann_whitney_p(a, 3, b, 3), 0.0808555983700523, 1e-9);
    assert_close(fb_mann_whitney_p(b, 3, a, 3), 0.0808555983700523, 1e-9);
}

static void test_mw_ties(void **state)
{
    /* a = 1 2 2, b = 2 3 4: pooled ranks 1, (2+3+4)/3 = 3 for the three 2s, 5, 6;
     * R_a = 1 + 3 + 3 = 7, U = 7 - 6 = 1; ties: one group of 3 -> 27 - 3 = 24;
     * var = 9/12 * (7 - 24/30) = 4.65; z = (3.5 - 0.5)/sqrt(4.65) = 1.39122;
     * p = 0.164160. */
    double a[] = {1, 2, 2}, b[] = {2, 3, 4};
    assert_close(fb_mann_whitney_p(a, 3, b, 3), 0.16415972847851523, 1e-9);
}

static void test_mw_interleaved(void **state)
{
    /* a = 1 3 5 7, b = 2 4 6 8: R_a = 16, U = 6, mu = 8, var = 16/12*9 = 12;
     * z = 1.5/sqrt(12) = 0.43301, p = 0.665006. */
    double a[] = {1, 3, 5, 7}, b[] = {2, 4, 6, 8};
    assert_close(fb_mann_whitney_p(a, 4, b, 4), 0.6650055421020291, 1e-9);
}

static void test_mw_identical_and_separated(void **state)
{
    double same[] = {1, 1, 1, 1, 1};
    double a[20], b[20];

    /* Every value tied: no variance, no evidence of a difference. */
    assert_close(fb_mann_whitney_p(same, 5, same, 5), 1.0, 0.0);
    /* Identical samples: U = mu exactly, |U - mu| - 0.5 < 0 -> p clipped to 1. */
    for (int i = 0; i < 20; i++) {
        a[i] = i;
        b[i] = 100 + i;
    }
    assert_close(fb_mann_whitney_p(a, 20, a, 20), 1.0, 0.0);
    /* 20 vs 20 fully separated: U = 0, var = 400/12*41, p = 6.7956e-8. */
    assert_close(fb_mann_whitney_p(a, 20, b, 20), 6.795615128173387e-08, 1e-12);
    assert_true(fb_mann_whitney_p(a, 20, b, 20) < 0.01);
    assert_close(fb_mann_whitney_p(a, 0, b, 20), 1.0, 0.0);
}

/* ---- the speedup's interval and verdict ---- */

/* n samples of mean * (1 + noise * N(0, 1)), deterministic (Box-Muller over
 * a fixed LCG). */
static void gauss(double *out, int n, double mean, double noise, uint64_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        double u1 = ((seed >> 11) + 0.5) / 9007199254740992.0;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        double u2 = ((seed >> 11) + 0.5) / 9007199254740992.0;
        double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        out[i] = mean * (1.0 + noise * z);
    }
}

/* A planted 10% change in 3% noise is faster (and the interval holds 1.1);
 * over 20 seeds, every time. */
static void test_speedup_planted_10(void **state)
{
    double base[50], var[50], sp, lo, hi;
    (void)state;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        gauss(base, 50, 1.10, 0.03, seed);
        gauss(var, 50, 1.00, 0.03, seed * 7919);
        assert_true(fb_stats_speedup_ci(base, 50, var, 50, 0.95, &sp, &lo, &hi));
        assert_true(lo > 1.0 && lo < sp && sp < hi);
        assert_true(lo < 1.1 * 1.03 && hi > 1.1 * 0.97);
        assert_int_equal(fb_stats_change(sp, lo, hi), FB_CHANGE_FASTER);
        /* The other way round: slower. */
        assert_true(fb_stats_speedup_ci(var, 50, base, 50, 0.95, &sp, &lo, &hi));
        assert_int_equal(fb_stats_change(sp, lo, hi), FB_CHANGE_SLOWER);
    }
}

/* 1% in 3% noise is no significant difference in at least 19 of 20 runs: its
 * interval rarely clears the 1% noise threshold (here it never does; the
 * highest lower end of the 20 is 1.0098). */
static void test_speedup_planted_1(void **state)
{
    double base[50], var[50], sp, lo, hi;
    int none = 0;
    (void)state;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        gauss(base, 50, 1.01, 0.03, seed);
        gauss(var, 50, 1.00, 0.03, seed * 7919);
        assert_true(fb_stats_speedup_ci(base, 50, var, 50, 0.95, &sp, &lo, &hi));
        none += fb_stats_change(sp, lo, hi) == FB_CHANGE_NONE;
    }
    assert_in_range(none, 19, 20);
}

/* The same samples give the same interval; too few samples or a zero median
 * give none. */
static void test_speedup_edges(void **state)
{
    double a[8] = {2, 2.1, 1.9, 2, 2.05, 1.95, 2, 2}, b[8] = {1, 1.1, 0.9, 1, 1, 1, 1.05, 0.95};
    double z[3] = {0, 0, 0}, sp, lo, hi, lo2, hi2;
    (void)state;
    assert_true(fb_stats_speedup_ci(a, 8, b, 8, 0.95, &sp, &lo, &hi));
    assert_float_equal(sp, 2.0, 1e-12);
    assert_true(fb_stats_speedup_ci(a, 8, b, 8, 0.95, &sp, &lo2, &hi2));
    assert_true(lo == lo2 && hi == hi2);
    assert_false(fb_stats_speedup_ci(a, 1, b, 8, 0.95, &sp, &lo, &hi));
    assert_true(isnan(sp));
    assert_false(fb_stats_speedup_ci(a, 8, z, 3, 0.95, &sp, &lo, &hi));
    assert_int_equal(fb_stats_change(NAN, 1, 2), FB_CHANGE_UNKNOWN);
    /* Significant but not past the 1% noise threshold: no difference. */
    assert_int_equal(fb_stats_change(1.005, 1.001, 1.009), FB_CHANGE_NONE);
    assert_int_equal(fb_stats_change(1.03, 1.008, 1.05), FB_CHANGE_NONE);
    assert_int_equal(fb_stats_change(1.03, 1.011, 1.05), FB_CHANGE_FASTER);
    assert_int_equal(fb_stats_change(0.97, 0.95, 0.991), FB_CHANGE_NONE);
    assert_int_equal(fb_stats_change(0.97, 0.95, 0.989), FB_CHANGE_SLOWER);
    assert_float_equal(fb_stats_unstable_cv("cuda"), 0.05, 0);
    assert_float_equal(fb_stats_unstable_cv("cpu"), 0.10, 0);
}

/* fb_result_judge: unstable by CV, speedups only for ok variants. */
static void test_judge(void **state)
{
    fb_result r;
    double base[40], fused[40], bad[40];
    (void)state;
    fb_result_init(&r);
    r.n_variants = 3;
    gauss(base, 40, 2.0, 0.02, 3);
    gauss(fused, 40, 1.0, 0.20, 5); /* noisy */
    gauss(bad, 40, 0.5, 0.02, 7);
    const char *names[3] = {"eager", "fused", "wrong"};
    double *s[3] = {base, fused, bad};
    for (int v = 0; v < 3; v++) {
        fb_variant_result_init(&r.variants[v], names[v]);
        r.variants[v].samples_ms = malloc(40 * sizeof(double));
        memcpy(r.variants[v].samples_ms, s[v], 40 * sizeof(double));
        r.variants[v].n_samples = 40;
        fb_stats_compute(s[v], 40, &r.variants[v].latency);
    }
    r.variants[2].status = FB_VS_ACCURACY_FAILED;
    fb_result_judge(&r, "cpu");
    assert_false(r.variants[0].unstable);
    assert_true(r.variants[1].unstable);
    assert_true(isnan(r.variants[0].speedup));
    assert_int_equal(r.variants[1].change, FB_CHANGE_FASTER);
    assert_true(r.variants[1].speedup_lo < 2.0 && r.variants[1].speedup_hi > 2.0);
    assert_true(isnan(r.variants[2].speedup)); /* a wrong answer has no speedup */
    cJSON *j = fb_result_to_json(&r);
    cJSON *cmp = cJSON_GetObjectItem(j, "comparison");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cmp, "change"), "fused")->valuestring, "faster");
    assert_int_equal(
        cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(cmp, "speedup_ci95"), "fused")),
        2);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(j, "variants"), 1), "unstable")));
    cJSON_Delete(j);
    fb_result_free(&r);
}

/* The GPU's clocks in a result: null without NVML; ranges, the hottest
 * temperature and the reasons (gpu_idle left out, unknown bits by number). */
static void test_gpu_interference_json(void **state)
{
    fb_result r;
    (void)state;
    fb_result_init(&r);
    cJSON *j = fb_result_to_json(&r);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "interference"), "gpu")));
    cJSON_Delete(j);
    fb_gpu_interference *g = &r.interference.gpu;
    g->n_samples = 3;
    g->sm_mhz_min = 1755;
    g->sm_mhz_max = 1980;
    g->mem_mhz_min = g->mem_mhz_max = 2619;
    g->temp_c_max = 71;
    g->throttle_reasons = 0x1 | 0x4 | 0x40 | (1ull << 20); /* idle, sw power cap, hw thermal */
    j = fb_result_to_json(&r);
    cJSON *gj = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "interference"), "gpu");
    assert_int_equal(cJSON_GetObjectItem(gj, "samples")->valueint, 3);
    assert_float_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(gj, "sm_clock_mhz"), 0)->valuedouble,
                       1755, 0);
    assert_float_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(gj, "sm_clock_mhz"), 1)->valuedouble,
                       1980, 0);
    assert_float_equal(cJSON_GetObjectItem(gj, "max_temperature_c")->valuedouble, 71, 0);
    cJSON *rs = cJSON_GetObjectItem(gj, "throttle_reasons");
    assert_int_equal(cJSON_GetArraySize(rs), 3);
    assert_string_equal(cJSON_GetArrayItem(rs, 0)->valuestring, "sw_power_cap");
    assert_string_equal(cJSON_GetArrayItem(rs, 1)->valuestring, "hw_thermal_slowdown");
    assert_string_equal(cJSON_GetArrayItem(rs, 2)->valuestring, "bit_20");
    assert_null(fb_throttle_reason_name(9));
    cJSON_Delete(j);
    fb_result_free(&r);
}

/* Spearman's rho: monotone 1, reversed -1, ties as midranks (the Pearson
 * correlation of the ranks, worked by hand below); NaN for n < 3 or a
 * constant side. */
static void test_spearman(void **state)
{
    (void)state;
    const double x[] = {1, 2, 3, 4, 5}, up[] = {10, 20, 30, 40, 1000}, down[] = {5, 4, 3, 2, 1};
    const double tied[] = {1, 2, 2, 3, 5}, y[] = {2, 1, 4, 3, 5}, flat[] = {7, 7, 7, 7, 7};
    assert_float_equal(fb_stats_spearman(x, up, 5), 1.0, 1e-12);
    assert_float_equal(fb_stats_spearman(x, down, 5), -1.0, 1e-12);
    /* ranks 1..5 and 2,1,4,3,5: 1 - 6 * 4 / (5 * 24) = 0.8 */
    assert_float_equal(fb_stats_spearman(x, y, 5), 0.8, 1e-12);
    /* ranks 1,2.5,2.5,4,5 and 2,1,4,3,5 about their mean 3: sxy 6.5, sxx 9.5,
     * syy 10, rho = 6.5 / sqrt(95) */
    assert_float_equal(fb_stats_spearman(tied, y, 5), 6.5 / sqrt(95.0), 1e-12);
    assert_true(isnan(fb_stats_spearman(x, flat, 5)));
    assert_true(isnan(fb_stats_spearman(x, y, 2)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_odd),
        cmocka_unit_test(test_speedup_planted_10),
        cmocka_unit_test(test_speedup_planted_1),
        cmocka_unit_test(test_speedup_edges),
        cmocka_unit_test(test_judge),
        cmocka_unit_test(test_gpu_interference_json),
        cmocka_unit_test(test_even),
        cmocka_unit_test(test_single),
        cmocka_unit_test(test_ci_n10),
        cmocka_unit_test(test_ci_n50),
        cmocka_unit_test(test_ci_n100),
        cmocka_unit_test(test_ci_small_n),
        cmocka_unit_test(test_ci_large_n),
        cmocka_unit_test(test_mw_separated_small),
        cmocka_unit_test(test_mw_ties),
        cmocka_unit_test(test_mw_interleaved),
        cmocka_unit_test(test_mw_identical_and_separated),
        cmocka_unit_test(test_spearman),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
