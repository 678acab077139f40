/* Integration tests of db/ against a real PostgreSQL (FB_TEST_DATABASE_URL):
 * the queue's exactly-once claim under concurrency, fencing, rescue with backoff,
 * cancel, migrations, listing, kernels, workers, stats and reconnect. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "db.h"
#include "db_int.h"
#include "itest.h"

#define CLAIM_JOBS 2000
#define CLAIMERS   8

static const char *const g_native[] = {"native"};

static int64_t insert_job(db_conn *c, const char *workload, int priority, int max_attempts,
                          const char *labels)
{
    char spec[512];
    snprintf(spec, sizeof spec,
             "{\"workload\":\"%s\",\"engine\":\"native\",\"device\":\"cpu\",\"labels\":%s}",
             workload, labels ? labels : "{}");
    db_new_job nj = {.spec_json = spec,
                     .workload = workload,
                     .engine = "native",
                     .device = "cpu",
                     .dtype = "float32",
                     .batch_size = 1,
                     .priority = priority,
                     .max_attempts = max_attempts,
                     .timeout_s = 600};
    int64_t id = 0;
    fb_err err = {0};
    assert_int_equal(db_job_insert(c, &nj, &id, &err), FB_OK);
    assert_true(id > 0);
    return id;
}

static db_claim claim_ok(db_conn *c, const char *worker)
{
    db_claim cl;
    fb_err err = {0};
    assert_int_equal(db_queue_claim(c, worker, g_native, 1, "cpu", &cl, &err), FB_OK);
    return cl;
}

static void job_state_is(db_conn *c, int64_t id, const char *state)
{
    db_job j;
    fb_err err = {0};
    assert_int_equal(db_job_get(c, id, &j, &err), FB_OK);
    assert_string_equal(j.state, state);
    db_job_free(&j);
}

/* Makes a running job's heartbeat an hour old. */
static void age_heartbeat(int64_t id)
{
    char sql[160];
    snprintf(sql, sizeof sql,
             "UPDATE jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = %lld",
             (long long)id);
    raw_exec(sql);
}

static void end_backoff(int64_t id)
{
    char sql[128];
    snprintf(sql, sizeof sql, "UPDATE jobs SET not_before = now() WHERE id = %lld", (long long)id);
    raw_exec(sql);
}

/* ---- concurrent claims ---- */

typedef struct claimer {
    int64_t ids[CLAIM_JOBS];
    int n;
    fb_code last;
} claimer;

static void *claim_loop(void *arg)
{
    claimer *cl = arg;
    db_conn *c = NULL;
    fb_err err = {0};
    char name[32];
    snprintf(name, sizeof name, "host/cpu%p", arg);
    cl->last = db_connect(itest_url, &c, &err);
    while (cl->last == FB_OK && cl->n < CLAIM_JOBS) {
        db_claim got;
        cl->last = db_queue_claim(c, name, g_native, 1, "cpu", &got, &err);
        if (cl->last == FB_OK) {
            cl->ids[cl->n++] = got.id;
            db_claim_free(&got);
        }
    }
    db_close(c);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_concurrent_claims(void **state)
{
    db_conn *c = *state;
    for (int i = 0; i < CLAIM_JOBS; i++)
        (void)insert_job(c, "gemm_bias_gelu", i % 3, 3, NULL);
    static claimer cls[CLAIMERS];
    pthread_t th[CLAIMERS];
    double t0 = now_s();
    for (int i = 0; i < CLAIMERS; i++) {
        memset(&cls[i], 0, sizeof cls[i]);
        assert_int_equal(pthread_create(&th[i], NULL, claim_loop, &cls[i]), 0);
    }
    for (int i = 0; i < CLAIMERS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    double dt = now_s() - t0;

    static int seen[CLAIM_JOBS + 1];
    memset(seen, 0, sizeof seen);
    int total = 0;
    for (int i = 0; i < CLAIMERS; i++) {
        assert_int_equal(cls[i].last, FB_ENOTFOUND); /* stopped because the queue ran dry */
        for (int k = 0; k < cls[i].n; k++) {
            assert_in_range(cls[i].ids[k], 1, CLAIM_JOBS);
            seen[cls[i].ids[k]]++;
        }
        total += cls[i].n;
    }
    for (int id = 1; id <= CLAIM_JOBS; id++)
        assert_int_equal(seen[id], 1);
    assert_int_equal(total, CLAIM_JOBS);
    assert_int_equal(raw_int("SELECT count(*) FROM jobs WHERE state = 'running' AND attempt = 1"),
                     CLAIM_JOBS);
    printf("claims: %d jobs by %d claimers in %.3f s = %.0f claims/s\n", total, CLAIMERS, dt,
           total / dt);
}

static void test_claim_order_and_filters(void **state)
{
    db_conn *c = *state;
    int64_t low = insert_job(c, "a", 0, 3, NULL);
    int64_t high = insert_job(c, "b", 5, 3, NULL);
    raw_exec("UPDATE jobs SET device = 'cuda' WHERE workload = 'c'");
    const char *const other[] = {"inductor"};
    db_claim cl;
    fb_err err = {0};
    assert_int_equal(db_queue_claim(c, "w", other, 1, "cpu", &cl, &err), FB_ENOTFOUND);
    assert_int_equal(db_queue_claim(c, "w", g_native, 1, "cuda", &cl, &err), FB_ENOTFOUND);
    cl = claim_ok(c, "w");
    assert_int_equal(cl.id, high);
    assert_int_equal(cl.attempt, 1);
    assert_int_equal(cl.timeout_s, 600);
    assert_non_null(strstr(cl.spec_json, "\"b\""));
    db_claim_free(&cl);
    cl = claim_ok(c, "w");
    assert_int_equal(cl.id, low);
    db_claim_free(&cl);
}

/* ---- fencing ---- */

static void test_stale_attempt_fenced(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    bool cancel = true;
    int requeued = -1, failed = -1;
    int64_t id = insert_job(c, "gemm_bias_gelu", 0, 3, NULL);
    db_claim first = claim_ok(c, "old-worker");
    assert_int_equal(first.attempt, 1);
    assert_int_equal(db_queue_heartbeat(c, id, 1, "{\"phase\":\"timing\"}", &cancel, &err), FB_OK);
    assert_false(cancel);

    age_heartbeat(id);
    assert_int_equal(db_queue_rescue(c, 30, &requeued, &failed, &err), FB_OK);
    assert_int_equal(requeued, 1);
    assert_int_equal(failed, 0);
    end_backoff(id);
    db_claim second = claim_ok(c, "new-worker");
    assert_int_equal(second.id, id);
    assert_int_equal(second.attempt, 2);

    assert_int_equal(db_queue_heartbeat(c, id, 1, NULL, &cancel, &err), FB_ESTALE);
    assert_int_equal(db_queue_complete(c, id, 1, "{\"variants\":[]}", NULL, &err), FB_ESTALE);
    assert_int_equal(db_queue_fail(c, id, 1, "crash", "boom", true, &err), FB_ESTALE);
    assert_int_equal(db_queue_release(c, id, 1, &err), FB_ESTALE);
    assert_int_equal(db_queue_mark_canceled(c, id, 1, &err), FB_ESTALE);
    assert_int_equal(raw_int("SELECT count(*) FROM results"), 0);
    job_state_is(c, id, "running");

    assert_int_equal(db_queue_complete(c, id, 2, "{\"variants\":[],\"attempt\":2}",
                                       "{\"eager\":[{\"name\":\"k\"}]}", &err),
                     FB_OK);
    /* A second completion of the same attempt is fenced out too. */
    assert_int_equal(db_queue_complete(c, id, 2, "{\"variants\":[]}", NULL, &err), FB_ESTALE);
    assert_int_equal(raw_int("SELECT count(*) FROM results"), 1);
    assert_int_equal(raw_int("SELECT attempt FROM results"), 2);
    assert_int_equal(raw_int("SELECT count(*) FROM kernels"), 1);

    db_job j;
    assert_int_equal(db_job_get(c, id, &j, &err), FB_OK);
    assert_string_equal(j.state, "succeeded");
    assert_string_equal(j.worker, "new-worker");
    assert_int_equal(j.attempt, 2);
    assert_non_null(j.result_json);
    assert_non_null(strstr(j.result_json, "\"attempt\": 2"));
    assert_non_null(j.progress_json == NULL ? "" : j.progress_json);
    assert_int_equal(strlen(j.finished_at), 27); /* 2026-01-02T03:04:05.123456Z */
    assert_int_equal(j.finished_at[26], 'Z');
    assert_int_equal(j.finished_at[10], 'T');
    db_job_free(&j);
    db_claim_free(&first);
    db_claim_free(&second);
}

/* ---- rescue ---- */

static void test_rescue_backoff_and_give_up(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    int requeued = -1, failed = -1;
    char buf[256];
    int64_t id = insert_job(c, "gemm_bias_gelu", 0, 2, NULL);
    int64_t fresh = insert_job(c, "fresh", 0, 2, NULL);
    db_claim cl = claim_ok(c, "w1");
    db_claim cl2 = claim_ok(c, "w2");
    assert_int_equal(cl.id, id);
    db_claim_free(&cl);
    db_claim_free(&cl2);

    /* Fresh heartbeats are left alone. */
    assert_int_equal(db_queue_rescue(c, 30, &requeued, &failed, &err), FB_OK);
    assert_int_equal(requeued + failed, 0);

    age_heartbeat(id);
    assert_int_equal(db_queue_rescue(c, 30, &requeued, &failed, &err), FB_OK);
    assert_int_equal(requeued, 1);
    assert_int_equal(failed, 0);
    job_state_is(c, id, "queued");
    job_state_is(c, fresh, "running");
    /* Backoff after attempt 1: 2 s, so the job cannot be claimed at once. */
    assert_int_equal(raw_int("SELECT (not_before > now() + interval '1 second')::int FROM jobs"
                             " WHERE workload = 'gemm_bias_gelu'"),
                     1);
    assert_int_equal(db_queue_claim(c, "w3", g_native, 1, "cpu", &cl, &err), FB_ENOTFOUND);

    end_backoff(id);
    cl = claim_ok(c, "w3");
    assert_int_equal(cl.attempt, 2);
    db_claim_free(&cl);
    age_heartbeat(id);
    assert_int_equal(db_queue_rescue(c, 30, &requeued, &failed, &err), FB_OK);
    assert_int_equal(requeued, 0);
    assert_int_equal(failed, 1);
    job_state_is(c, id, "failed");
    assert_string_equal(
        raw_text("SELECT error->>'code' FROM jobs WHERE workload = 'gemm_bias_gelu'", buf,
                 sizeof buf),
        "lost");
    assert_int_equal(raw_int("SELECT (finished_at IS NOT NULL)::int FROM jobs"
                             " WHERE workload = 'gemm_bias_gelu'"),
                     1);
    assert_int_equal(db_queue_rescue(c, 0, NULL, NULL, &err), FB_EINVAL);
}

static void test_fail_and_release(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    char buf[256];
    int64_t id = insert_job(c, "x", 0, 2, NULL);
    db_claim cl = claim_ok(c, "w");
    db_claim_free(&cl);
    assert_int_equal(db_queue_fail(c, id, 1, "oom", "out of memory", true, &err), FB_OK);
    job_state_is(c, id, "queued");
    assert_int_equal(raw_int("SELECT (not_before > now())::int FROM jobs"), 1);
    assert_string_equal(raw_text("SELECT error->>'code' FROM jobs", buf, sizeof buf), "oom");

    end_backoff(id);
    cl = claim_ok(c, "w");
    assert_int_equal(cl.attempt, 2);
    db_claim_free(&cl);
    /* Shutting down: back to the queue at once, the attempt not counted. */
    assert_int_equal(db_queue_release(c, id, 2, &err), FB_OK);
    job_state_is(c, id, "queued");
    assert_int_equal(raw_int("SELECT attempt FROM jobs"), 1);
    cl = claim_ok(c, "w");
    assert_int_equal(cl.attempt, 2);
    db_claim_free(&cl);
    /* retry, but attempts are used up: failed. */
    assert_int_equal(db_queue_fail(c, id, 2, "crash", "segfault", true, &err), FB_OK);
    job_state_is(c, id, "failed");
    assert_string_equal(raw_text("SELECT error->>'message' FROM jobs", buf, sizeof buf),
                        "segfault");

    /* A failure after a cancel request ends canceled. */
    int64_t id2 = insert_job(c, "y", 0, 3, NULL);
    cl = claim_ok(c, "w");
    db_claim_free(&cl);
    assert_int_equal(db_job_cancel(c, id2, &err), FB_OK);
    assert_int_equal(db_queue_fail(c, id2, 1, "killed", "stopped", true, &err), FB_OK);
    job_state_is(c, id2, "canceled");
}

/* ---- cancel ---- */

static void test_cancel(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    bool cancel = false;
    int64_t queued = insert_job(c, "q", 0, 3, NULL);
    assert_int_equal(db_job_cancel(c, queued, &err), FB_OK);
    job_state_is(c, queued, "canceled");
    assert_int_equal(db_job_cancel(c, queued, &err), FB_ECONFLICT);

    int64_t running = insert_job(c, "r", 0, 3, NULL);
    db_claim cl = claim_ok(c, "w");
    assert_int_equal(cl.id, running);
    assert_int_equal(db_queue_heartbeat(c, running, 1, NULL, &cancel, &err), FB_OK);
    assert_false(cancel);
    assert_int_equal(db_job_cancel(c, running, &err), FB_OK);
    job_state_is(c, running, "running");
    assert_int_equal(db_queue_heartbeat(c, running, 1, NULL, &cancel, &err), FB_OK);
    assert_true(cancel);
    assert_int_equal(db_queue_mark_canceled(c, running, 1, &err), FB_OK);
    job_state_is(c, running, "canceled");
    db_claim_free(&cl);

    int64_t done = insert_job(c, "d", 0, 3, NULL);
    cl = claim_ok(c, "w");
    assert_int_equal(db_queue_complete(c, done, 1, "{}", NULL, &err), FB_OK);
    assert_int_equal(db_job_cancel(c, done, &err), FB_ECONFLICT);
    assert_int_equal(db_job_cancel(c, 999999, &err), FB_ENOTFOUND);
    db_claim_free(&cl);
}

/* ---- migrations ---- */

typedef struct migrator {
    fb_code rc;
} migrator;

static void *migrate_thread(void *arg)
{
    migrator *m = arg;
    db_conn *c = NULL;
    fb_err err = {0};
    m->rc = db_connect(itest_url, &c, &err);
    if (m->rc == FB_OK)
        m->rc = db_migrate(c, &err);
    if (m->rc)
        fprintf(stderr, "migrate thread: %s\n", err.msg);
    db_close(c);
    return NULL;
}

static void test_migrations(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    assert_int_equal(db_migrate(c, &err), FB_OK);
    assert_int_equal(db_migrate(c, &err), FB_OK);
    long long applied = raw_int("SELECT count(*) FROM schema_migrations");
    assert_true(applied >= 1);

    /* From nothing, two starters at once: each migration applied exactly once. */
    /* Everything every migration made (tables, functions, triggers) goes. */
    raw_exec("DROP SCHEMA public CASCADE; CREATE SCHEMA public");
    migrator m[2] = {{FB_EINTERNAL}, {FB_EINTERNAL}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, migrate_thread, &m[i]), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(m[0].rc, FB_OK);
    assert_int_equal(m[1].rc, FB_OK);
    assert_int_equal(raw_int("SELECT count(*) FROM schema_migrations"), applied);
    assert_int_equal(raw_int("SELECT count(DISTINCT version) FROM schema_migrations"), applied);
    assert_int_equal(raw_int("SELECT min(version) FROM schema_migrations"), 1);
    assert_int_equal(raw_int("SELECT count(*) FROM jobs"), 0);
}

/* ---- listing ---- */

static int list_ids(db_conn *c, const db_job_filter *f, int64_t *ids, int cap, int64_t *next)
{
    db_job *items = NULL;
    int n = -1;
    fb_err err = {0};
    assert_int_equal(db_job_list(c, f, &items, &n, next, &err), FB_OK);
    assert_true(n <= cap);
    for (int i = 0; i < n; i++) {
        ids[i] = items[i].id;
        db_job_free(&items[i]);
    }
    free(items);
    return n;
}

static void test_list_pagination_filters(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    int64_t ids[32], next = -1;
    for (int i = 0; i < 25; i++)
        (void)insert_job(c, i % 2 ? "b" : "a", 0, 3,
                         i % 3 ? "{\"project\":\"p2\"}" : "{\"project\":\"p1\",\"x\":\"y\"}");
    db_job_filter f = {.limit = 10};
    assert_int_equal(list_ids(c, &f, ids, 32, &next), 10);
    assert_int_equal(ids[0], 25);
    assert_int_equal(ids[9], 16);
    assert_int_equal(next, 16);
    f.before_id = next;
    assert_int_equal(list_ids(c, &f, ids, 32, &next), 10);
    assert_int_equal(ids[0], 15);
    assert_int_equal(next, 6);
    f.before_id = next;
    assert_int_equal(list_ids(c, &f, ids, 32, &next), 5);
    assert_int_equal(ids[4], 1);
    assert_int_equal(next, 0);

    db_job_filter byw = {.limit = 200, .workload = "a"};
    assert_int_equal(list_ids(c, &byw, ids, 32, &next), 13);
    for (int i = 0; i < 13; i++)
        assert_int_equal(ids[i] % 2, 1); /* i even -> id odd */
    db_job_filter byl = {.limit = 9, .label_key = "project", .label_value = "p1"};
    assert_int_equal(list_ids(c, &byl, ids, 32, &next), 9);
    assert_int_equal(next, 0); /* exactly one full page */
    assert_int_equal(ids[0], 25);
    db_job_filter none = {.limit = 5, .label_key = "project", .label_value = "zzz"};
    assert_int_equal(list_ids(c, &none, ids, 32, &next), 0);

    db_claim cl = claim_ok(c, "w");
    db_job_filter running = {.limit = 50, .state = "running", .engine = "native", .device = "cpu"};
    assert_int_equal(list_ids(c, &running, ids, 32, &next), 1);
    assert_int_equal(ids[0], cl.id);
    db_claim_free(&cl);

    db_job *items = NULL;
    int n = 0;
    db_job_filter bad = {.limit = 0};
    assert_int_equal(db_job_list(c, &bad, &items, &n, &next, &err), FB_EINVAL);
    db_job_filter half = {.limit = 5, .label_key = "k"};
    assert_int_equal(db_job_list(c, &half, &items, &n, &next, &err), FB_EINVAL);
    db_job j;
    assert_int_equal(db_job_get(c, 4242, &j, &err), FB_ENOTFOUND);
    /* The schema's checks reach the caller as bad input. */
    int64_t id = 0;
    db_new_job nj = {.spec_json = "{}",
                     .workload = "x",
                     .engine = "native",
                     .device = "cpu",
                     .dtype = "float32",
                     .batch_size = 0,
                     .max_attempts = 1,
                     .timeout_s = 1};
    assert_int_equal(db_job_insert(c, &nj, &id, &err), FB_EINVAL);
    nj.batch_size = 1;
    nj.spec_json = "not json";
    assert_int_equal(db_job_insert(c, &nj, &id, &err), FB_EINVAL);
}

/* ---- kernels ---- */

static void test_kernels(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    char *rows = NULL;
    int64_t id = insert_job(c, "k", 0, 3, NULL);
    assert_int_equal(db_job_kernels(c, id, NULL, &rows, &err), FB_OK);
    assert_string_equal(rows, "[]");
    free(rows);
    db_claim cl = claim_ok(c, "w");
    assert_int_equal(
        db_queue_complete(c, id, 1, "{\"variants\":[]}",
                          "{\"eager\":[{\"name\":\"gemm\"},{\"name\":\"gelu\"}],"
                          "\"fused\":[{\"name\":\"gemm_gelu\",\"ops\":[\"gemm\",\"gelu\"]}]}",
                          &err),
        FB_OK);
    db_claim_free(&cl);

    assert_int_equal(db_job_kernels(c, id, NULL, &rows, &err), FB_OK);
    cJSON *all = cJSON_Parse(rows);
    assert_non_null(all);
    assert_int_equal(cJSON_GetArraySize(all), 3);
    cJSON *first = cJSON_GetArrayItem(all, 0);
    assert_string_equal(cJSON_GetObjectItem(first, "name")->valuestring, "gemm");
    assert_string_equal(cJSON_GetObjectItem(first, "variant")->valuestring, "eager");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(all, 1), "name")->valuestring,
                        "gelu");
    cJSON_Delete(all);
    free(rows);

    assert_int_equal(db_job_kernels(c, id, "fused", &rows, &err), FB_OK);
    cJSON *fused = cJSON_Parse(rows);
    assert_int_equal(cJSON_GetArraySize(fused), 1);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(fused, 0), "name")->valuestring,
                        "gemm_gelu");
    cJSON_Delete(fused);
    free(rows);
    assert_int_equal(db_job_kernels(c, id + 100, NULL, &rows, &err), FB_ENOTFOUND);
    assert_null(rows);

    /* Kernels that are not {"variant": [rows]} are refused and nothing is written. */
    int64_t id2 = insert_job(c, "k2", 0, 3, NULL);
    cl = claim_ok(c, "w");
    assert_int_equal(db_queue_complete(c, id2, 1, "{}", "{\"eager\":5}", &err), FB_EINVAL);
    job_state_is(c, id2, "running");
    assert_int_equal(raw_int("SELECT count(*) FROM results"), 1);
    db_claim_free(&cl);
}

/* ---- workers, catalog, stats ---- */

static void register_worker(db_conn *c, const char *id, const char *kind, const char *workloads)
{
    char device[128];
    snprintf(device, sizeof device, "{\"kind\":\"%s\",\"name\":\"dev\"}", kind);
    db_worker_reg w = {.id = id,
                       .host = "node1",
                       .device_json = device,
                       .engines_json = "[\"native\"]",
                       .workloads_json = workloads};
    fb_err err = {0};
    assert_int_equal(db_worker_register(c, &w, &err), FB_OK);
}

static cJSON *find_by(cJSON *arr, const char *key, const char *value)
{
    cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        cJSON *v = cJSON_GetObjectItem(it, key);
        if (cJSON_IsString(v) && !strcmp(v->valuestring, value))
            return it;
    }
    return NULL;
}

/* The catalog entry name's key ("devices" or "alive_devices") as JSON text. */
static const char *list_of(cJSON *cat, const char *name, const char *key, char *buf, size_t cap)
{
    cJSON *w = find_by(cat, "name", name);
    assert_non_null(w);
    char *s = cJSON_PrintUnformatted(cJSON_GetObjectItem(w, key));
    assert_non_null(s);
    snprintf(buf, cap, "%s", s);
    free(s);
    return buf;
}

static const char *devices_of(cJSON *cat, const char *name, char *buf, size_t cap)
{
    return list_of(cat, name, "devices", buf, cap);
}

static cJSON *catalog_now(db_conn *c)
{
    fb_err err = {0};
    char *json = NULL;
    assert_int_equal(db_workload_catalog(c, 30, &json, &err), FB_OK);
    cJSON *cat = cJSON_Parse(json);
    free(json);
    assert_non_null(cat);
    return cat;
}

#define GEMM_BOTH                                                                                  \
    "{\"name\":\"gemm_bias_gelu\",\"engine\":\"native\",\"domain\":\"pattern\","                   \
    "\"devices\":[\"cpu\",\"cuda\"],\"dtypes\":[\"float32\"],\"variants\":[\"eager\",\"fused\"]}"

static void test_workers_catalog_stats(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    char *json = NULL, buf[128];
    register_worker(c, "node1/cpu0", "cpu",
                    "[" GEMM_BOTH ",{\"name\":\"mlp\",\"engine\":\"native\","
                    "\"devices\":[\"cpu\"]}]");
    register_worker(c, "node1/gpu0", "cuda", "[" GEMM_BOTH "]");

    assert_int_equal(db_workload_catalog(c, 30, &json, &err), FB_OK);
    cJSON *cat = cJSON_Parse(json);
    free(json);
    assert_int_equal(cJSON_GetArraySize(cat), 2);
    assert_string_equal(devices_of(cat, "gemm_bias_gelu", buf, sizeof buf), "[\"cpu\",\"cuda\"]");
    assert_string_equal(devices_of(cat, "mlp", buf, sizeof buf), "[\"cpu\"]");
    assert_string_equal(
        cJSON_GetObjectItem(find_by(cat, "name", "gemm_bias_gelu"), "domain")->valuestring,
        "pattern");
    cJSON_Delete(cat);

    assert_int_equal(db_worker_heartbeat(c, "node1/cpu0", "busy", 7, NULL, &err), FB_OK);
    assert_int_equal(db_worker_heartbeat(c, "nobody", "idle", 0, NULL, &err), FB_ENOTFOUND);
    raw_exec("UPDATE workers SET last_heartbeat = now() - interval '1 hour'"
             " WHERE id = 'node1/gpu0'");

    assert_int_equal(db_worker_list(c, 30, &json, &err), FB_OK);
    cJSON *list = cJSON_Parse(json);
    free(json);
    assert_int_equal(cJSON_GetArraySize(list), 2);
    cJSON *cpu = find_by(list, "id", "node1/cpu0");
    assert_string_equal(cJSON_GetObjectItem(cpu, "state")->valuestring, "busy");
    assert_int_equal(cJSON_GetObjectItem(cpu, "current_job")->valueint, 7);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cpu, "device"), "kind")->valuestring, "cpu");
    assert_int_equal(strlen(cJSON_GetObjectItem(cpu, "last_heartbeat")->valuestring), 27);
    cJSON *gpu = find_by(list, "id", "node1/gpu0");
    assert_string_equal(cJSON_GetObjectItem(gpu, "state")->valuestring, "lost");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(gpu, "current_job")));
    cJSON_Delete(list);

    /* The lost GPU worker no longer serves cuda now, but cuda stays in the
     * catalog: a job for it waits for a GPU worker (scale from zero). */
    cat = catalog_now(c);
    assert_string_equal(devices_of(cat, "gemm_bias_gelu", buf, sizeof buf), "[\"cpu\",\"cuda\"]");
    assert_string_equal(list_of(cat, "gemm_bias_gelu", "alive_devices", buf, sizeof buf),
                        "[\"cpu\"]");
    assert_string_equal(list_of(cat, "mlp", "alive_devices", buf, sizeof buf), "[\"cpu\"]");
    cJSON_Delete(cat);

    int64_t q = insert_job(c, "s1", 0, 3, NULL);
    (void)insert_job(c, "s2", 0, 3, NULL);
    int64_t r = insert_job(c, "s3", 5, 3, NULL);
    db_claim cl = claim_ok(c, "w");
    assert_int_equal(cl.id, r);
    db_claim_free(&cl);
    assert_int_equal(db_job_cancel(c, q, &err), FB_OK);
    raw_exec("UPDATE jobs SET created_at = now() - interval '100 seconds' WHERE workload = 's2'");
    db_stats st;
    assert_int_equal(db_get_stats(c, 30, &st, &err), FB_OK);
    assert_int_equal(st.jobs_by_state[0], 1);
    assert_int_equal(st.jobs_by_state[1], 1);
    assert_int_equal(st.jobs_by_state[2], 0);
    assert_int_equal(st.jobs_by_state[3], 0);
    assert_int_equal(st.jobs_by_state[4], 1);
    assert_true(st.oldest_queued_age_s >= 99.0 && st.oldest_queued_age_s < 200.0);
    assert_int_equal(st.workers_alive, 1);
}

/* ---- wait and reconnect ---- */

static void terminate_fusionbench_backends(void)
{
    raw_exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
             " WHERE application_name = 'fusionbench' AND pid <> pg_backend_pid()");
}

/* Drain through the database: only a live worker can be asked, its heartbeat
 * reads the request back, registering again clears it; the list shows it. */
static void test_worker_drain(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    bool drain = true;
    char *json = NULL;

    register_worker(c, "node1/cpu0", "cpu", "[]");
    register_worker(c, "node1/cpu1", "cpu", "[]");
    assert_int_equal(db_worker_heartbeat(c, "node1/cpu0", "idle", 0, &drain, &err), FB_OK);
    assert_false(drain);
    assert_int_equal(db_worker_drain(c, "node1/cpu0", 30, &err), FB_OK);
    assert_int_equal(db_worker_heartbeat(c, "node1/cpu0", "busy", 3, &drain, &err), FB_OK);
    assert_true(drain);
    assert_int_equal(db_worker_heartbeat(c, "node1/cpu1", "idle", 0, &drain, &err), FB_OK);
    assert_false(drain); /* only the one asked */

    assert_int_equal(db_worker_list(c, 30, &json, &err), FB_OK);
    cJSON *list = cJSON_Parse(json);
    free(json);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(find_by(list, "id", "node1/cpu0"), "draining")));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(find_by(list, "id", "node1/cpu1"), "draining")));
    cJSON_Delete(list);

    /* A worker draining on its own (SIGTERM) reports the state itself. */
    assert_int_equal(db_worker_heartbeat(c, "node1/cpu1", "draining", 0, &drain, &err), FB_OK);
    assert_false(drain);
    assert_int_equal(db_worker_list(c, 30, &json, &err), FB_OK);
    list = cJSON_Parse(json);
    free(json);
    cJSON *w1 = find_by(list, "id", "node1/cpu1");
    assert_string_equal(cJSON_GetObjectItem(w1, "state")->valuestring, "draining");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(w1, "draining")));
    cJSON_Delete(list);

    /* Unknown: 404; stopped or lost: 409, and nothing changes. */
    assert_int_equal(db_worker_drain(c, "nobody", 30, &err), FB_ENOTFOUND);
    assert_int_equal(db_worker_heartbeat(c, "node1/cpu1", "stopped", 0, NULL, &err), FB_OK);
    assert_int_equal(db_worker_drain(c, "node1/cpu1", 30, &err), FB_ECONFLICT);
    assert_non_null(strstr(err.msg, "stopped"));
    /* node1/cpu0 was asked to drain and has stopped: it drains no more. */
    assert_int_equal(db_worker_heartbeat(c, "node1/cpu0", "stopped", 0, NULL, &err), FB_OK);
    assert_int_equal(db_worker_list(c, 30, &json, &err), FB_OK);
    list = cJSON_Parse(json);
    free(json);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(find_by(list, "id", "node1/cpu0"), "draining")));
    cJSON_Delete(list);
    raw_exec("UPDATE workers SET last_heartbeat = now() - interval '1 hour' WHERE id = 'node1/cpu1'"
             " ; UPDATE workers SET state = 'idle' WHERE id = 'node1/cpu1'");
    assert_int_equal(db_worker_drain(c, "node1/cpu1", 30, &err), FB_ECONFLICT);
    assert_non_null(strstr(err.msg, "lost"));

    /* A new process under the same id starts afresh. */
    register_worker(c, "node1/cpu0", "cpu", "[]");
    assert_int_equal(db_worker_heartbeat(c, "node1/cpu0", "idle", 0, &drain, &err), FB_OK);
    assert_false(drain);
}

/* The built-in catalog: known before any worker registered, merged with the
 * workers' registrations; alive only where a live worker serves it. */
static void test_catalog_builtin(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    char buf[128];

    assert_int_equal(db_catalog_builtin_put(c, "native/cpu,cuda", "[" GEMM_BOTH "]", &err), FB_OK);
    cJSON *cat = catalog_now(c);
    assert_int_equal(cJSON_GetArraySize(cat), 1);
    assert_string_equal(devices_of(cat, "gemm_bias_gelu", buf, sizeof buf), "[\"cpu\",\"cuda\"]");
    assert_string_equal(list_of(cat, "gemm_bias_gelu", "alive_devices", buf, sizeof buf), "[]");
    cJSON_Delete(cat);

    /* A second put of the same source replaces it; another source adds to it. */
    assert_int_equal(db_catalog_builtin_put(c, "native/cpu,cuda", "[]", &err), FB_OK);
    assert_int_equal(db_catalog_builtin_put(c, "native/cpu",
                                            "[{\"name\":\"mlp\",\"engine\":\"native\","
                                            "\"devices\":[\"cpu\"]}]",
                                            &err),
                     FB_OK);
    register_worker(c, "node1/gpu0", "cuda", "[" GEMM_BOTH "]");
    cat = catalog_now(c);
    assert_int_equal(cJSON_GetArraySize(cat), 2);
    /* A GPU worker offers only its own kind, even when its info lists more. */
    assert_string_equal(devices_of(cat, "gemm_bias_gelu", buf, sizeof buf), "[\"cuda\"]");
    assert_string_equal(list_of(cat, "gemm_bias_gelu", "alive_devices", buf, sizeof buf),
                        "[\"cuda\"]");
    assert_string_equal(list_of(cat, "mlp", "alive_devices", buf, sizeof buf), "[]");
    cJSON_Delete(cat);

    /* Bad JSON is refused by the database, not stored, and the error does not
     * quote the database (it reaches clients as it is). */
    assert_int_equal(db_catalog_builtin_put(c, "x", "{}", &err), FB_EINVAL);
    assert_null(strstr(err.msg, "ERROR"));
    assert_null(strstr(err.msg, "violates"));
    assert_null(strstr(err.msg, "catalog_builtin_workloads_check"));
}

static void test_wait_notify(void **state)
{
    db_conn *c = *state;
    db_conn *other = NULL;
    fb_err err = {0};
    bool woken = true;
    assert_int_equal(db_connect(itest_url, &other, &err), FB_OK);
    assert_int_equal(db_queue_wait(c, 20, &woken, &err), FB_OK);
    assert_false(woken);
    (void)insert_job(other, "n", 0, 3, NULL);
    double t0 = now_s();
    assert_int_equal(db_queue_wait(c, 5000, &woken, &err), FB_OK);
    assert_true(woken);
    assert_true(now_s() - t0 < 2.0);
    /* A requeue wakes too. */
    db_claim cl = claim_ok(other, "w");
    assert_int_equal(db_queue_release(other, cl.id, cl.attempt, &err), FB_OK);
    db_claim_free(&cl);
    assert_int_equal(db_queue_wait(c, 5000, &woken, &err), FB_OK);
    assert_true(woken);
    db_close(other);
}

static void test_reconnect(void **state)
{
    db_conn *c = *state;
    fb_err err = {0};
    db_job j;
    bool woken = false;
    int64_t id = insert_job(c, "re", 0, 3, NULL);

    terminate_fusionbench_backends();
    assert_int_equal(db_ping(c, &err), FB_OK);
    terminate_fusionbench_backends();
    assert_int_equal(db_job_get(c, id, &j, &err), FB_OK);
    assert_int_equal(j.id, id);
    db_job_free(&j);

    /* An insert is not run twice: it fails, and the connection works after. */
    terminate_fusionbench_backends();
    db_new_job nj = {.spec_json = "{}",
                     .workload = "x",
                     .engine = "native",
                     .device = "cpu",
                     .dtype = "float32",
                     .batch_size = 1,
                     .max_attempts = 1,
                     .timeout_s = 1};
    int64_t id2 = 0;
    assert_int_equal(db_job_insert(c, &nj, &id2, &err), FB_EUNAVAIL);
    assert_int_equal(raw_int("SELECT count(*) FROM jobs"), 1);
    assert_int_equal(db_ping(c, &err), FB_OK);

    /* An error of libpq's own on a live session (here a call with too many
     * parameters) is no lost connection: not resent, the session kept. */
    static const db_stmt many = {"many params", "SELECT 1", true};
    static const char *params[70000];
    PGresult *res = NULL;
    assert_int_equal(db_exec(c, &many, 70000, params, &res, &err), FB_EDB);
    assert_null(res);
    assert_false(db_resent(c));
    assert_int_equal(db_ping(c, &err), FB_OK);

    /* A waiter sees the break, and the next wait listens again. */
    assert_int_equal(db_queue_wait(c, 10, &woken, &err), FB_OK);
    terminate_fusionbench_backends();
    assert_int_equal(db_queue_wait(c, 2000, &woken, &err), FB_EUNAVAIL);
    assert_int_equal(db_queue_wait(c, 10, &woken, &err), FB_OK);
    assert_false(woken);
}

int main(void)
{
    itest_url_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_concurrent_claims, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_claim_order_and_filters, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_stale_attempt_fenced, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_rescue_backoff_and_give_up, itest_setup,
                                        itest_teardown),
        cmocka_unit_test_setup_teardown(test_fail_and_release, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_cancel, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_migrations, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_list_pagination_filters, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_kernels, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_workers_catalog_stats, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_worker_drain, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_catalog_builtin, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_wait_notify, itest_setup, itest_teardown),
        cmocka_unit_test_setup_teardown(test_reconnect, itest_setup, itest_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
