/* Unit tests of fb_stats_median_ci (proto/fb_stats.h): the order-statistic CI of
 * the median at 95% and 99%, against binomial ranks computed by hand (python:
 * the largest c with sum_{i<=c} C(n,i)/2^n <= tail, rank j = c + 1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "fb_stats.h"

/* 1..n, reversed, so the function must sort a copy. */
static double *reversed(int n)
{
    double *s = malloc((size_t)n * sizeof *s);
    assert_non_null(s);
    for (int i = 0; i < n; i++)
        s[i] = (double)(n - i);
    return s;
}

static void check_ci(int n, double level, double want_lo, double want_hi)
{
    double *s = reversed(n), lo = 0, hi = 0;
    assert_true(fb_stats_median_ci(s, n, level, &lo, &hi));
    assert_true(lo == want_lo);
    assert_true(hi == want_hi);
    assert_true(s[0] == (double)n); /* input untouched */
    free(s);
}

/* n = 50: 95% ranks 18 and 33, 99% ranks 16 and 35 (values = ranks here). */
static void test_n50(void **state)
{
    (void)state;
    check_ci(50, 0.95, 18, 33);
    check_ci(50, 0.99, 16, 35);
}

/* n = 20: 95% ranks 6 and 15, 99% ranks 4 and 17; n = 100: 99% ranks 37, 64. */
static void test_n20_n100(void **state)
{
    (void)state;
    check_ci(20, 0.95, 6, 15);
    check_ci(20, 0.99, 4, 17);
    check_ci(100, 0.99, 37, 64);
}

/* Too few samples for any narrower pair: [min, max] (n = 6 at 99%, n = 5 at 95%). */
static void test_small(void **state)
{
    (void)state;
    check_ci(6, 0.99, 1, 6);
    check_ci(5, 0.95, 1, 5);
    check_ci(1, 0.99, 1, 1);
}

/* The 95% CI agrees with fb_stats_compute's. */
static void test_matches_compute(void **state)
{
    (void)state;
    double *s = reversed(37), lo, hi;
    fb_stats st;
    fb_stats_compute(s, 37, &st);
    assert_true(fb_stats_median_ci(s, 37, 0.95, &lo, &hi));
    assert_true(lo == st.ci95_lo && hi == st.ci95_hi);
    free(s);
}

static void test_bad_args(void **state)
{
    (void)state;
    double s[3] = {1, 2, 3}, lo, hi;
    assert_false(fb_stats_median_ci(s, 0, 0.99, &lo, &hi));
    assert_false(fb_stats_median_ci(s, 3, 1.0, &lo, &hi));
    assert_false(fb_stats_median_ci(s, 3, 0.0, &lo, &hi));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_n50),      cmocka_unit_test(test_n20_n100),
        cmocka_unit_test(test_small),    cmocka_unit_test(test_matches_compute),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
