/* Integration tests of group commit against a real PostgreSQL
 * (FB_TEST_DATABASE_URL): db_job_create_many, and the submit batcher
 * (server/srv_submit.c) driven from many threads: every job created exactly
 * once with its own fields, each caller answered with its own row, batches
 * formed while a commit is in flight, a bad job failing alone, the database
 * going away and coming back, a stop that drains the queue, and the lone
 * submit's direct path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "db.h"
#include "itest.h"
#include "srv_submit.h"

#define THREADS         16
#define JOBS_PER_THREAD 500
#define QUEUED          40 /* jobs queued behind a blocked batch */

/* Holds a lock on jobs that blocks every INSERT until raw_unlock. */
static PGconn *raw_lock_jobs(void)
{
    PGconn *pg = raw_connect();
    raw_on(pg, "BEGIN");
    raw_on(pg, "LOCK TABLE jobs IN SHARE MODE");
    return pg;
}

static void raw_unlock(PGconn *pg)
{
    raw_on(pg, "COMMIT");
    PQfinish(pg);
}

/* Waits (up to 20 s) until a session of ours waits for a lock: the batch in
 * flight is blocked on the table. */
static void wait_blocked(void)
{
    for (int i = 0; i < 2000; i++) {
        if (raw_int("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND datname = current_database()") > 0)
            return;
        itest_sleep_ms(10);
    }
    fail_msg("no insert blocked on the jobs lock");
}

/* A job whose fields all derive from (t, i), so a row shows whose it is. */
typedef struct test_job {
    char spec[160], workload[32];
    db_new_job nj;
} test_job;

static void test_job_make(test_job *tj, int t, int i)
{
    snprintf(tj->spec, sizeof tj->spec,
             "{\"workload\":\"w%d\",\"labels\":{\"t\":\"%d\",\"i\":\"%d\",\"q\":\"a\\\"b\\\\c\"}}",
             t, t, i);
    snprintf(tj->workload, sizeof tj->workload, "w%d", t);
    tj->nj = (db_new_job){.spec_json = tj->spec,
                          .workload = tj->workload,
                          .engine = "native",
                          .device = (i % 2) ? "cuda" : "cpu",
                          .dtype = (i % 3) ? "float32" : "float16",
                          .batch_size = i + 1,
                          .priority = t - 8,
                          .max_attempts = 1 + i % 10,
                          .timeout_s = 100 + i};
}

/* The label key of a job's stored spec as an int, -1 when missing. */
static int spec_label(const char *spec_json, const char *key)
{
    cJSON *o = cJSON_Parse(spec_json);
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "labels"), key);
    int r = cJSON_IsString(v) ? atoi(v->valuestring) : -1;
    const cJSON *q = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "labels"), "q");
    if (!cJSON_IsString(q) || strcmp(q->valuestring, "a\"b\\c") != 0)
        r = -2; /* the array literal's escaping lost something */
    cJSON_Delete(o);
    return r;
}

/* True when job is (t, i)'s job as created, every field. */
static bool job_matches(const db_job *j, int t, int i)
{
    test_job tj;
    test_job_make(&tj, t, i);
    return j->id > 0 && strcmp(j->state, "queued") == 0 && j->attempt == 0 &&
           j->max_attempts == tj.nj.max_attempts && spec_label(j->spec_json, "t") == t &&
           spec_label(j->spec_json, "i") == i && j->created_at[0] && !j->started_at[0] &&
           !j->worker[0] && !j->result_json && !j->error_json && !j->cancel_requested;
}

/* The stored columns of id are (t, i)'s (what db_job does not carry). */
static void row_is(int64_t id, int t, int i)
{
    test_job tj;
    char sql[512];
    test_job_make(&tj, t, i);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM jobs WHERE id = %lld AND workload = '%s' AND engine = 'native'"
             " AND device = '%s' AND dtype = '%s' AND batch_size = %d AND priority = %d"
             " AND max_attempts = %d AND timeout_s = %d AND spec = '%s'::jsonb",
             (long long)id, tj.workload, tj.nj.device, tj.nj.dtype, tj.nj.batch_size,
             tj.nj.priority, tj.nj.max_attempts, tj.nj.timeout_s, tj.spec);
    assert_int_equal(raw_int(sql), 1);
}

/* ---- db_job_create_many ---- */

static void test_create_many_direct(void **state)
{
    db_conn *c = *state;
    enum { N = 12 };
    test_job tj[N];
    const db_new_job *nj[N];
    db_job_outcome out[N];
    fb_err err = {0};

    for (int i = 0; i < N; i++) {
        test_job_make(&tj[i], 1, i);
        nj[i] = &tj[i].nj;
    }
    assert_int_equal(db_job_create_many(c, nj, N, out, &err), FB_OK);
    for (int i = 0; i < N; i++) {
        assert_int_equal(out[i].rc, FB_OK);
        assert_true(job_matches(&out[i].job, 1, i));
        row_is(out[i].job.id, 1, i);
        if (i > 0) /* ids are drawn in the batch's order */
            assert_true(out[i].job.id > out[i - 1].job.id);
        db_job_free(&out[i].job);
    }
    assert_int_equal(raw_int("SELECT count(*) FROM jobs"), N);
    /* Out of range n is refused before anything is sent. */
    assert_int_equal(db_job_create_many(c, nj, 0, out, &err), FB_EINVAL);
    assert_int_equal(db_job_create_many(c, nj, DB_JOB_BATCH_MAX + 1, out, &err), FB_EINVAL);
}

/* Jobs 3 and 7 break a CHECK, 5 is not JSON, 9 is missing its workload: they
 * fail, each with its own error, and the others are created once each. */
static void test_create_many_bad_rows(void **state)
{
    db_conn *c = *state;
    enum { N = 11 };
    test_job tj[N];
    const db_new_job *nj[N];
    db_job_outcome out[N];
    fb_err err = {0};

    for (int i = 0; i < N; i++) {
        test_job_make(&tj[i], 2, i);
        nj[i] = &tj[i].nj;
    }
    tj[3].nj.batch_size = 0;
    tj[7].nj.timeout_s = 0;
    tj[5].nj.spec_json = "{not json";
    tj[9].nj.workload = NULL;
    assert_int_equal(db_job_create_many(c, nj, N, out, &err), FB_OK);
    for (int i = 0; i < N; i++) {
        if (i == 3 || i == 5 || i == 7 || i == 9) {
            assert_int_equal(out[i].rc, FB_EINVAL);
            assert_int_equal(out[i].job.id, 0);
            assert_true(out[i].err.msg[0] != '\0');
            continue;
        }
        assert_int_equal(out[i].rc, FB_OK);
        assert_true(job_matches(&out[i].job, 2, i));
        row_is(out[i].job.id, 2, i);
        db_job_free(&out[i].job);
    }
    assert_int_equal(raw_int("SELECT count(*) FROM jobs"), N - 4);
    assert_int_equal(raw_int("SELECT count(DISTINCT spec->'labels'->>'i') FROM jobs"), N - 4);
}

/* ---- the batcher from many threads ---- */

typedef struct submitter {
    srv_submit *s;
    int t;
    int64_t ids[JOBS_PER_THREAD];
    int ok, wrong; /* answers FB_OK; answers that were not this caller's job */
    fb_code last_err;
} submitter;

static void *submit_loop(void *arg)
{
    submitter *sm = arg;
    for (int i = 0; i < JOBS_PER_THREAD; i++) {
        test_job tj;
        db_job j;
        fb_err err = {0};
        test_job_make(&tj, sm->t, i);
        fb_code rc = srv_submit_run(sm->s, &tj.nj, &j, &err);
        if (rc != FB_OK) {
            sm->last_err = rc;
            continue;
        }
        sm->ok++;
        if (!job_matches(&j, sm->t, i))
            sm->wrong++;
        sm->ids[i] = j.id;
        db_job_free(&j);
    }
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void test_batcher_many_threads(void **state)
{
    db_conn *c = *state;
    static submitter sms[THREADS];
    static int64_t all[THREADS * JOBS_PER_THREAD];
    pthread_t th[THREADS];
    srv_submit *s = NULL;
    fb_err err = {0};
    uint64_t batches = 0, jobs = 0;
    int n = 0;

    assert_int_equal(srv_submit_start(itest_url, SRV_SUBMIT_BATCH_MAX, &s, &err), FB_OK);
    for (int t = 0; t < THREADS; t++) {
        memset(&sms[t], 0, sizeof sms[t]);
        sms[t].s = s;
        sms[t].t = t;
        assert_int_equal(pthread_create(&th[t], NULL, submit_loop, &sms[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_join(th[t], NULL), 0);
    srv_submit_counts(s, &batches, &jobs);
    srv_submit_destroy(s);

    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(sms[t].last_err, FB_OK);
        assert_int_equal(sms[t].ok, JOBS_PER_THREAD);
        assert_int_equal(sms[t].wrong, 0);
        for (int i = 0; i < JOBS_PER_THREAD; i++)
            all[n++] = sms[t].ids[i];
    }
    /* Each caller got an id of its own ... */
    qsort(all, (size_t)n, sizeof all[0], cmp_i64);
    for (int k = 1; k < n; k++)
        assert_true(all[k] > all[k - 1]);
    /* ... and each job is stored once, under the id its caller got. */
    assert_int_equal(raw_int("SELECT count(*) FROM jobs"), THREADS * JOBS_PER_THREAD);
    assert_int_equal(raw_int("SELECT count(DISTINCT (spec->'labels'->>'t', spec->'labels'->>'i'))"
                             " FROM jobs"),
                     THREADS * JOBS_PER_THREAD);
    for (int t = 0; t < THREADS; t++) {
        for (int i = 0; i < JOBS_PER_THREAD; i++) {
            db_job j;
            assert_int_equal(db_job_get(c, sms[t].ids[i], &j, &err), FB_OK);
            assert_true(job_matches(&j, t, i));
            db_job_free(&j);
        }
    }
    row_is(sms[3].ids[17], 3, 17);
    row_is(sms[THREADS - 1].ids[JOBS_PER_THREAD - 1], THREADS - 1, JOBS_PER_THREAD - 1);
    assert_int_equal(jobs, (uint64_t)(THREADS * JOBS_PER_THREAD));
    assert_true(batches >= 1 && batches < jobs); /* some batches held several jobs */
    printf("submit: %llu jobs in %llu batches (%.1f per batch)\n", (unsigned long long)jobs,
           (unsigned long long)batches, (double)jobs / (double)batches);
}

/* ---- batches formed behind a commit in flight ---- */

/* Items answered asynchronously (srv_submit_enqueue), counted under a lock. */
typedef struct async_set {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int answered;
    test_job tj[QUEUED + 2];
    srv_submit_item items[QUEUED + 2];
} async_set;

static void async_done(srv_submit_item *item)
{
    async_set *a = item->arg;
    pthread_mutex_lock(&a->mu);
    a->answered++;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

static async_set *async_new(void)
{
    async_set *a = calloc(1, sizeof *a);
    assert_non_null(a);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    return a;
}

static void async_free(async_set *a)
{
    for (int i = 0; i < QUEUED + 2; i++)
        db_job_free(&a->items[i].res.job);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

static void async_enqueue(srv_submit *s, async_set *a, int i)
{
    a->items[i].nj = a->tj[i].nj;
    a->items[i].done = async_done;
    a->items[i].arg = a;
    srv_submit_enqueue(s, &a->items[i]);
}

static int async_answered(async_set *a)
{
    pthread_mutex_lock(&a->mu);
    int n = a->answered;
    pthread_mutex_unlock(&a->mu);
    return n;
}

static void async_wait(async_set *a, int n)
{
    pthread_mutex_lock(&a->mu);
    while (a->answered < n)
        pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
}

/* Job 0 goes alone and blocks on a table lock; jobs 1..QUEUED queue behind it
 * (one of them bad) and go as one batch once it commits, the bad one failing
 * alone. */
static void test_batcher_batches_and_bad_job(void **state)
{
    async_set *a = async_new();
    srv_submit *s = NULL;
    fb_err err = {0};
    uint64_t batches = 0, jobs = 0;

    for (int i = 0; i <= QUEUED; i++)
        test_job_make(&a->tj[i], 4, i);
    a->tj[13].nj.max_attempts = 0; /* CHECK (max_attempts >= 1) */
    assert_int_equal(srv_submit_start(itest_url, SRV_SUBMIT_BATCH_MAX, &s, &err), FB_OK);
    PGconn *lock = raw_lock_jobs();
    async_enqueue(s, a, 0);
    wait_blocked();
    for (int i = 1; i <= QUEUED; i++)
        async_enqueue(s, a, i);
    itest_sleep_ms(50);
    assert_int_equal(async_answered(a), 0); /* nothing answered before its commit */
    raw_unlock(lock);
    async_wait(a, QUEUED + 1);
    srv_submit_counts(s, &batches, &jobs);
    assert_int_equal(batches, 2);
    assert_int_equal(jobs, QUEUED + 1);
    for (int i = 0; i <= QUEUED; i++) {
        const db_job_outcome *o = &a->items[i].res;
        if (i == 13) {
            assert_int_equal(o->rc, FB_EINVAL);
            assert_non_null(strstr(o->err.msg, "malformed or out of range"));
            continue;
        }
        assert_int_equal(o->rc, FB_OK);
        assert_true(job_matches(&o->job, 4, i));
        row_is(o->job.id, 4, i);
    }
    assert_int_equal(raw_int("SELECT count(*) FROM jobs"), QUEUED);
    srv_submit_destroy(s);
    async_free(a);
}

/* ---- the database away ---- */

static void terminate_backends(void)
{
    raw_exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
             " WHERE application_name = 'fusionbench' AND pid <> pg_backend_pid()"
             " AND datname = current_database()");
}

static void test_batcher_database_away(void **state)
{
    srv_submit *s = NULL;
    fb_err err = {0};
    test_job tj;
    db_job j;

    /* Nothing listens there: each job is answered FB_EUNAVAIL, none is lost
     * silently, and the batcher goes on. */
    assert_int_equal(srv_submit_start("postgresql://127.0.0.1:1/none?connect_timeout=2",
                                      SRV_SUBMIT_BATCH_MAX, &s, &err),
                     FB_OK);
    test_job_make(&tj, 5, 0);
    assert_int_equal(srv_submit_run(s, &tj.nj, &j, &err), FB_EUNAVAIL);
    assert_int_equal(j.id, 0);
    assert_int_equal(srv_submit_run(s, &tj.nj, &j, &err), FB_EUNAVAIL);
    srv_submit_destroy(s);

    /* The connection breaks under the batcher.  Right after a statement, the
     * next batch's insert (never retried: it may have committed) fails (503 for
     * its requests, nothing stored), and the batch after connects again; a
     * connection idle for a while is pinged (and so reconnected) first. */
    assert_int_equal(srv_submit_start(itest_url, SRV_SUBMIT_BATCH_MAX, &s, &err), FB_OK);
    assert_int_equal(srv_submit_run(s, &tj.nj, &j, &err), FB_OK);
    db_job_free(&j);
    terminate_backends();
    test_job_make(&tj, 5, 1);
    fb_code rc = srv_submit_run(s, &tj.nj, &j, &err);
    if (rc == FB_OK) /* only when this machine stalled past SRV_SUBMIT_PING_IDLE_MS */
        db_job_free(&j);
    else
        assert_int_equal(rc, FB_EUNAVAIL);
    assert_int_equal(raw_int("SELECT count(*) FROM jobs"), rc == FB_OK ? 2 : 1);
    assert_int_equal(srv_submit_run(s, &tj.nj, &j, &err), FB_OK);
    assert_true(job_matches(&j, 5, 1));
    db_job_free(&j);
    long long stored = raw_int("SELECT count(*) FROM jobs");
    assert_int_equal(stored, rc == FB_OK ? 3 : 2);

    terminate_backends();
    itest_sleep_ms(SRV_SUBMIT_PING_IDLE_MS + 300);
    test_job_make(&tj, 5, 2);
    assert_int_equal(srv_submit_run(s, &tj.nj, &j, &err), FB_OK);
    assert_true(job_matches(&j, 5, 2));
    db_job_free(&j);
    assert_int_equal(raw_int("SELECT count(*) FROM jobs"), stored + 1);
    srv_submit_destroy(s);
}

/* ---- the lone submit's fast path ---- */

static void test_batcher_direct(void **state)
{
    async_set *a = async_new();
    srv_submit *s = NULL;
    fb_err err = {0};
    uint64_t batches = 0, jobs = 0;

    for (int i = 0; i < 3; i++)
        test_job_make(&a->tj[i], 7, i);
    assert_int_equal(srv_submit_start(itest_url, SRV_SUBMIT_BATCH_MAX, &s, &err), FB_OK);
    /* Idle: the first caller may create directly, a second not at the same time. */
    assert_true(srv_submit_direct_begin(s));
    assert_false(srv_submit_direct_begin(s));
    /* A job handed in meanwhile waits for that commit, then goes. */
    async_enqueue(s, a, 0);
    itest_sleep_ms(100);
    assert_int_equal(async_answered(a), 0);
    srv_submit_direct_end(s);
    async_wait(a, 1);
    itest_sleep_ms(5);
    assert_int_equal(a->items[0].res.rc, FB_OK);
    assert_true(job_matches(&a->items[0].res.job, 7, 0));

    /* Not while a batch is in flight, nor while jobs are queued behind it. */
    PGconn *lock = raw_lock_jobs();
    async_enqueue(s, a, 1);
    wait_blocked();
    assert_false(srv_submit_direct_begin(s));
    async_enqueue(s, a, 2);
    assert_false(srv_submit_direct_begin(s));
    raw_unlock(lock);
    async_wait(a, 3);
    itest_sleep_ms(5); /* a quiet spell of SRV_SUBMIT_DIRECT_IDLE_US */
    assert_true(srv_submit_direct_begin(s));
    srv_submit_direct_end(s);
    srv_submit_counts(s, &batches, &jobs);
    assert_int_equal(batches, 5); /* direct, batch {0}, batch {1}, batch {2}, direct */
    assert_int_equal(jobs, 5);
    srv_submit_stop(s);
    assert_true(srv_submit_direct_begin(s)); /* stopped: the caller creates its job itself */
    assert_true(srv_submit_direct_begin(s));
    srv_submit_direct_end(s);
    srv_submit_direct_end(s);
    srv_submit_destroy(s);
    async_free(a);
}

/* ---- stop ---- */

static void *stop_main(void *arg)
{
    srv_submit_stop(arg);
    return NULL;
}

/* A stop while jobs wait behind a commit in flight creates and answers them
 * all, then refuses what comes later. */
static void test_batcher_stop_drains(void **state)
{
    async_set *a = async_new();
    srv_submit *s = NULL;
    fb_err err = {0};
    pthread_t th;

    for (int i = 0; i <= QUEUED + 1; i++)
        test_job_make(&a->tj[i], 6, i);
    assert_int_equal(srv_submit_start(itest_url, 8, &s, &err), FB_OK);
    PGconn *lock = raw_lock_jobs();
    async_enqueue(s, a, 0);
    wait_blocked();
    for (int i = 1; i <= QUEUED; i++)
        async_enqueue(s, a, i);
    assert_int_equal(pthread_create(&th, NULL, stop_main, s), 0);
    itest_sleep_ms(100);
    assert_int_equal(async_answered(a), 0);
    raw_unlock(lock);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(async_answered(a), QUEUED + 1); /* all answered before stop returned */
    for (int i = 0; i <= QUEUED; i++) {
        assert_int_equal(a->items[i].res.rc, FB_OK);
        assert_true(job_matches(&a->items[i].res.job, 6, i));
    }
    assert_int_equal(raw_int("SELECT count(*) FROM jobs"), QUEUED + 1);
    /* max_batch 8: 1 + 40 jobs took at least 1 + 5 batches */
    uint64_t batches = 0, jobs = 0;
    srv_submit_counts(s, &batches, &jobs);
    assert_int_equal(jobs, QUEUED + 1);
    assert_true(batches >= 6);

    async_enqueue(s, a, QUEUED + 1); /* after the stop: refused at once */
    assert_int_equal(async_answered(a), QUEUED + 2);
    assert_int_equal(a->items[QUEUED + 1].res.rc, FB_EUNAVAIL);
    assert_int_equal(raw_int("SELECT count(*) FROM jobs"), QUEUED + 1);
    srv_submit_destroy(s);
    async_free(a);
}

int main(void)
{
    itest_url_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_many_direct, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_create_many_bad_rows, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_batcher_many_threads, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_batcher_batches_and_bad_job, itest_setup,
                                        itest_teardown),
        cmocka_unit_test_setup_teardown(test_batcher_database_away, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_batcher_stop_drains, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_batcher_direct, itest_setup, itest_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
