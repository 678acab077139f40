/* srv_ratelimit: the token bucket's arithmetic and its bounded table. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>

#include "srv_ratelimit.h"

/* 2 per second, bursts of 3: three at once, the fourth waits half a second. */
static void test_bucket(void **state)
{
    srv_ratelimit *rl = srv_ratelimit_new(2, 3);
    (void)state;

    assert_non_null(rl);
    for (int i = 0; i < 3; i++)
        assert_true(srv_ratelimit_take(rl, "alice", 10.0) == 0);
    assert_float_equal(srv_ratelimit_take(rl, "alice", 10.0), 0.5, 1e-9);
    /* A refused take costs nothing: still half a second at the same time. */
    assert_float_equal(srv_ratelimit_take(rl, "alice", 10.0), 0.5, 1e-9);
    assert_float_equal(srv_ratelimit_take(rl, "alice", 10.25), 0.25, 1e-9);
    assert_true(srv_ratelimit_take(rl, "alice", 10.5) == 0);
    assert_float_equal(srv_ratelimit_take(rl, "alice", 10.5), 0.5, 1e-9);
    /* Another key has its own bucket. */
    assert_true(srv_ratelimit_take(rl, "bob", 10.5) == 0);
    /* Idle a long time: the bucket is full again, not fuller. */
    for (int i = 0; i < 3; i++)
        assert_true(srv_ratelimit_take(rl, "alice", 1000.0) == 0);
    assert_true(srv_ratelimit_take(rl, "alice", 1000.0) > 0);
    /* A clock that steps back refills nothing and breaks nothing. */
    assert_true(srv_ratelimit_take(rl, "alice", 999.0) > 0);
    srv_ratelimit_free(rl);
}

/* A steady rate below the limit is never refused. */
static void test_steady(void **state)
{
    srv_ratelimit *rl = srv_ratelimit_new(10, 1);
    (void)state;

    for (int i = 0; i < 1000; i++)
        assert_true(srv_ratelimit_take(rl, "k", i * 0.1) == 0);
    assert_true(srv_ratelimit_take(rl, "k", 999 * 0.1) > 0);
    srv_ratelimit_free(rl);
}

/* 100,000 keys that each come once, 1 s apart: their buckets refill (2 s at
 * most), so the table keeps only the last few and never grows. */
static void test_bounded(void **state)
{
    srv_ratelimit *rl = srv_ratelimit_new(1, 2);
    char key[32];
    int most = 0;
    (void)state;

    for (int i = 0; i < 100000; i++) {
        snprintf(key, sizeof key, "key%d", i);
        assert_true(srv_ratelimit_take(rl, key, (double)i) == 0);
        if (srv_ratelimit_size(rl) > most)
            most = srv_ratelimit_size(rl);
    }
    assert_in_range(most, 2, 48);
    /* 1,000 keys at one instant are all held (none is full). */
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "burst%d", i);
        assert_true(srv_ratelimit_take(rl, key, 1e6) == 0);
    }
    assert_in_range(srv_ratelimit_size(rl), 1000, 1010);
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "burst%d", i);
        assert_true(srv_ratelimit_take(rl, key, 1e6) == 0); /* the second of two */
        assert_true(srv_ratelimit_take(rl, key, 1e6) > 0);
    }
    srv_ratelimit_free(rl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket),
        cmocka_unit_test(test_steady),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
