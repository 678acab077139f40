/* The fair share in the claim (issue 13; migration 0007), against a real
 * PostgreSQL: four workers, user A queues 200 short jobs, then user B queues 10.
 * B's first job starts within the next 4 claims, all of B's finish before A's
 * 40th, and while B has queued work A never holds more than its share (2 of 4
 * workers).  Jobs without an owner keep the plain order. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_auth.h"
#include "itest.h"

static const char *const g_native[] = {"native"};

static void job_for(db_conn *c, int64_t owner, int priority)
{
    db_new_job nj = {.spec_json = "{\"workload\":\"w\"}",
                     .workload = "w",
                     .engine = "native",
                     .device = "cpu",
                     .dtype = "float32",
                     .batch_size = 1,
                     .priority = priority,
                     .max_attempts = 3,
                     .timeout_s = 600,
                     .owner_id = owner};
    int64_t id;
    fb_err err = {0};
    assert_int_equal(db_job_insert(c, &nj, &id, &err), FB_OK);
}

static void workers(db_conn *c, int n)
{
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof id, "fair/w%d", i);
        db_worker_reg w = {.id = id,
                           .host = "fair",
                           .device_json = "{\"kind\":\"cpu\",\"name\":\"dev\"}",
                           .engines_json = "[\"native\"]",
                           .workloads_json = "[]"};
        fb_err err = {0};
        assert_int_equal(db_worker_register(c, &w, &err), FB_OK);
    }
}

static int count_of(const char *sql)
{
    return (int)raw_int(sql);
}

static int64_t owner_of(int64_t job)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT COALESCE(owner_id, 0) FROM jobs WHERE id = %lld",
             (long long)job);
    return count_of(sql);
}

static void test_fair_share(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    int64_t a = 0, b = 0;
    int a_done = 0, b_done = 0, claims_after_b = 0, first_b_claim = -1;

    assert_int_equal(db_user_add(c, "usera", "user", &a, &err), FB_OK);
    assert_int_equal(db_user_add(c, "userb", "user", &b, &err), FB_OK);
    workers(c, 4);
    for (int i = 0; i < 200; i++)
        job_for(c, a, 0);
    /* Four workers run A's jobs, four at a time, five rounds: 20 done. */
    for (int round = 0; round < 5; round++) {
        db_claim cl[4];
        for (int w = 0; w < 4; w++)
            assert_int_equal(db_queue_claim(c, "fair/w", g_native, 1, "cpu", &cl[w], &err), FB_OK);
        for (int w = 0; w < 4; w++) {
            assert_int_equal(db_queue_complete(c, cl[w].id, cl[w].attempt, "{}", NULL, &err),
                             FB_OK);
            db_claim_free(&cl[w]);
            a_done++;
        }
    }
    for (int i = 0; i < 10; i++)
        job_for(c, b, 0);
    /* Rounds of four claims, then four completions, until B is done. */
    while (b_done < 10) {
        db_claim cl[4];
        int n = 0;
        for (int w = 0; w < 4; w++) {
            fb_code rc = db_queue_claim(c, "fair/w", g_native, 1, "cpu", &cl[n], &err);
            if (rc == FB_ENOTFOUND)
                break;
            assert_int_equal(rc, FB_OK);
            claims_after_b++;
            if (owner_of(cl[n].id) == b && first_b_claim < 0)
                first_b_claim = claims_after_b;
            n++;
            char sql[160];
            snprintf(sql, sizeof sql,
                     "SELECT count(*) FROM jobs WHERE state = 'running' AND owner_id = %lld",
                     (long long)a);
            int a_running = count_of(sql);
            snprintf(sql, sizeof sql,
                     "SELECT count(*) FROM jobs WHERE state = 'queued' AND owner_id = %lld",
                     (long long)b);
            if (count_of(sql) > 0 && a_running > 2)
                fail_msg("A holds %d workers while B has queued work", a_running);
        }
        for (int w = 0; w < n; w++) {
            int64_t who = owner_of(cl[w].id);
            assert_int_equal(db_queue_complete(c, cl[w].id, cl[w].attempt, "{}", NULL, &err),
                             FB_OK);
            db_claim_free(&cl[w]);
            if (who == b)
                b_done++;
            else
                a_done++;
        }
        assert_true(claims_after_b < 100);
    }
    assert_true(first_b_claim >= 1 && first_b_claim <= 4);
    if (a_done >= 40)
        fail_msg("B's 10 jobs finished after A's %d", a_done);
    /* Usage was recorded for both, in device-seconds. */
    assert_int_equal(count_of("SELECT count(DISTINCT user_id) FROM user_usage WHERE usage > 0"), 2);
}

/* A user's max_running caps it whatever the share; owner-less jobs (auth off)
 * go by priority, then age, as before. */
static void test_cap_and_unowned(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    int64_t a = 0, b = 0;
    db_claim cl;

    assert_int_equal(db_user_add(c, "usera", "user", &a, &err), FB_OK);
    assert_int_equal(db_user_add(c, "userb", "user", &b, &err), FB_OK);
    workers(c, 4);
    raw_exec("UPDATE users SET max_running = 1 WHERE name = 'usera'");
    for (int i = 0; i < 3; i++)
        job_for(c, a, 5);
    job_for(c, b, 0);
    assert_int_equal(db_queue_claim(c, "fair/w", g_native, 1, "cpu", &cl, &err), FB_OK);
    int64_t first = owner_of(cl.id);
    db_claim_free(&cl);
    assert_int_equal(db_queue_claim(c, "fair/w", g_native, 1, "cpu", &cl, &err), FB_OK);
    int64_t second = owner_of(cl.id);
    db_claim_free(&cl);
    /* One of A's (cap 1) and B's one: not two of A's, whatever the priority. */
    assert_true((first == a && second == b) || (first == b && second == a));
    assert_int_equal(db_queue_claim(c, "fair/w", g_native, 1, "cpu", &cl, &err), FB_ENOTFOUND);

    raw_exec("DELETE FROM jobs");
    job_for(c, 0, 0);
    job_for(c, 0, 9);
    job_for(c, 0, 0);
    assert_int_equal(db_queue_claim(c, "fair/w", g_native, 1, "cpu", &cl, &err), FB_OK);
    assert_int_equal(count_of("SELECT priority FROM jobs WHERE state = 'running'"), 9);
    db_claim_free(&cl);
}

int main(void)
{
    itest_url_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fair_share, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_cap_and_unowned, itest_setup, itest_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
