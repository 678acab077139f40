/* queue_claims: how fast the PostgreSQL job queue hands out work.
 *
 *   queue_claims [--database-url URL] [--jobs N] [--workers W] [--owners K]
 *
 * --owners K: the jobs belong to K users in turn (made for the run) and the W
 * workers are registered, so every claim goes through the fair share (migration
 * 0007: the least-used owner first, each owner capped at its share of the
 * workers); without it the jobs have no owner, as with authentication off.
 *
 * Inserts N no-op jobs (db_job_insert, one connection), then W threads, each with
 * its own db_conn, loop db_queue_claim + db_queue_complete with a tiny result
 * until the queue is empty.  Reports claims/s and completes/s over the wall time
 * of the drain, and per-call latency (median, p99) of claim and complete.
 *
 * The jobs use an engine name no real worker offers ("queue-bench"), so a worker
 * sharing the database never steals them.  The run checks what it measured: every
 * job claimed exactly once (no id twice: the SKIP LOCKED claim must never hand a
 * job to two workers), every complete accepted, and the database's succeeded count
 * grown by N; any failure exits 1.  Needs a database it may write to: use a
 * throwaway cluster (scripts/pg.sh start DIR PORT). */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "db.h"
#include "db_auth.h"
#include "fb_err.h"

#define QB_MAX_JOBS    1000000
#define QB_MAX_WORKERS 64
#define QB_ENGINE      "queue-bench"
#define QB_RESULT      "{\"variants\":[],\"note\":\"queue bench no-op\"}"

typedef struct qb_opts {
    const char *url;
    int jobs, workers, owners;
} qb_opts;

/* One worker thread: its connection, its latencies (ms, at most jobs each) and
 * the ids it claimed. */
typedef struct qb_worker {
    const qb_opts *o;
    pthread_barrier_t *start;
    db_conn *conn;
    int index;
    int claims, completes;
    double *claim_ms, *complete_ms;
    int64_t *ids;
    fb_err err;
    fb_code rc;
} qb_worker;

static double qb_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int qb_parse_int(const char *s, int lo, int hi, int *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int qb_parse_args(int argc, char **argv, qb_opts *o)
{
    o->url = getenv("DATABASE_URL");
    o->jobs = 20000;
    o->workers = 8;
    o->owners = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = v == NULL;
        if (!bad && strcmp(a, "--database-url") == 0)
            o->url = v;
        else if (!bad && strcmp(a, "--jobs") == 0)
            bad = qb_parse_int(v, 1, QB_MAX_JOBS, &o->jobs);
        else if (!bad && strcmp(a, "--workers") == 0)
            bad = qb_parse_int(v, 1, QB_MAX_WORKERS, &o->workers);
        else if (!bad && strcmp(a, "--owners") == 0)
            bad = qb_parse_int(v, 0, 64, &o->owners);
        else
            bad = 1;
        if (bad) {
            fprintf(stderr,
                    "queue_claims: bad argument '%s'\nusage: queue_claims "
                    "[--database-url URL] [--jobs 1..%d] [--workers 1..%d] [--owners 0..64]\n",
                    a, QB_MAX_JOBS, QB_MAX_WORKERS);
            return -1;
        }
        i++;
    }
    if (o->url == NULL) {
        fprintf(stderr, "queue_claims: no database: pass --database-url or set DATABASE_URL\n");
        return -1;
    }
    return 0;
}

/* --owners: K users named for this run, and the W workers registered (the
 * fair share divides the live workers among the owners waiting). */
static FB_MUSTCHECK fb_code qb_owners(db_conn *c, const qb_opts *o, int64_t *ids, fb_err *err)
{
    fb_code rc = FB_OK;
    for (int k = 0; k < o->owners && rc == FB_OK; k++) {
        char name[48];
        snprintf(name, sizeof name, "bench%ld-%d", (long)getpid(), k);
        rc = db_user_add(c, name, "user", &ids[k], err);
    }
    for (int w = 0; w < o->workers && rc == FB_OK && o->owners > 0; w++) {
        char id[48];
        snprintf(id, sizeof id, "queue-bench/%ld-%d", (long)getpid(), w);
        db_worker_reg reg = {.id = id,
                             .host = "queue-bench",
                             .device_json = "{\"kind\":\"cpu\",\"name\":\"bench\"}",
                             .engines_json = "[\"" QB_ENGINE "\"]",
                             .workloads_json = "[]"};
        rc = db_worker_register(c, &reg, err);
    }
    return rc;
}

/* Inserts o->jobs queued no-op jobs through one connection, owned by owners[]
 * in turn when there are any. */
static FB_MUSTCHECK fb_code qb_insert(db_conn *c, int jobs, const int64_t *owners, int n_owners,
                                      fb_err *err)
{
    static const char spec[] = "{\"workload\":\"noop\",\"engine\":\"" QB_ENGINE
                               "\",\"device\":\"cpu\",\"dtype\":\"float32\",\"batch_size\":1,"
                               "\"variants\":[\"eager\"],\"params\":{},\"warmup\":0,"
                               "\"iterations\":1,\"priority\":0,\"timeout_s\":600,"
                               "\"max_attempts\":1,\"labels\":{}}";
    db_new_job nj = {.spec_json = spec,
                     .workload = "noop",
                     .engine = QB_ENGINE,
                     .device = "cpu",
                     .dtype = "float32",
                     .batch_size = 1,
                     .priority = 0,
                     .max_attempts = 1,
                     .timeout_s = 600};
    fb_code rc = FB_OK;
    for (int i = 0; i < jobs && rc == FB_OK; i++) {
        int64_t id = 0;
        nj.owner_id = n_owners > 0 ? owners[i % n_owners] : 0;
        rc = db_job_insert(c, &nj, &id, err);
    }
    return rc;
}

/* One claim + complete; *done set when the queue had nothing left. */
static FB_MUSTCHECK fb_code qb_step(qb_worker *w, const char *wid, bool *done)
{
    static const char *const engines[] = {QB_ENGINE};
    db_claim cl = {0};
    double t0 = qb_now_ms();
    fb_code rc = db_queue_claim(w->conn, wid, engines, 1, "cpu", &cl, &w->err);
    double t1 = qb_now_ms();
    if (rc == FB_ENOTFOUND) {
        *done = true;
        rc = FB_OK;
        goto out;
    }
    if (rc != FB_OK)
        goto out;
    if (w->claims >= w->o->jobs) {
        rc = fb_err_set(&w->err, FB_EINTERNAL, NULL, "more claims than jobs inserted");
        goto out;
    }
    w->claim_ms[w->claims] = t1 - t0;
    w->ids[w->claims++] = cl.id;
    rc = db_queue_complete(w->conn, cl.id, cl.attempt, QB_RESULT, NULL, &w->err);
    if (rc == FB_OK)
        w->complete_ms[w->completes++] = qb_now_ms() - t1;
out:
    db_claim_free(&cl);
    return rc;
}

static void *qb_worker_main(void *arg)
{
    qb_worker *w = arg;
    char wid[64];
    bool done = false;
    snprintf(wid, sizeof wid, "queue-bench/%d", w->index);
    pthread_barrier_wait(w->start);
    while (!done && w->rc == FB_OK)
        w->rc = qb_step(w, wid, &done);
    return NULL;
}

static int qb_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int qb_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Value at quantile q of sorted v[n] (nearest rank). */
static double qb_quantile(const double *v, int n, double q)
{
    int i = (int)(q * (n - 1) + 0.5);
    return n > 0 ? v[i] : 0.0;
}

/* Gathers the claim (or complete) latencies of all workers into all[] (sized
 * for jobs) and sorts them; returns their count. */
static int qb_gather(const qb_worker *ws, int nw, bool claims, double *all)
{
    int n = 0;
    for (int i = 0; i < nw; i++) {
        int cnt = claims ? ws[i].claims : ws[i].completes;
        memcpy(all + n, claims ? ws[i].claim_ms : ws[i].complete_ms, (size_t)cnt * sizeof *all);
        n += cnt;
    }
    qsort(all, (size_t)n, sizeof *all, qb_cmp_double);
    return n;
}

static void qb_worker_free(qb_worker *w)
{
    db_close(w->conn);
    free(w->claim_ms);
    free(w->complete_ms);
    free(w->ids);
}

/* Connects and allocates each worker before the clock starts. */
static FB_MUSTCHECK fb_code qb_workers_init(const qb_opts *o, pthread_barrier_t *start,
                                            qb_worker *ws, fb_err *err)
{
    for (int i = 0; i < o->workers; i++) {
        qb_worker *w = &ws[i];
        *w = (qb_worker){.o = o, .start = start, .index = i};
        w->claim_ms = calloc((size_t)o->jobs, sizeof *w->claim_ms);
        w->complete_ms = calloc((size_t)o->jobs, sizeof *w->complete_ms);
        w->ids = calloc((size_t)o->jobs, sizeof *w->ids);
        if (!w->claim_ms || !w->complete_ms || !w->ids)
            return fb_err_set(err, FB_ENOMEM, NULL, "worker buffers");
        fb_code rc = db_connect(o->url, &w->conn, err);
        if (rc != FB_OK)
            return rc;
    }
    return FB_OK;
}

/* Runs the threads; *wall_ms is the drain's wall time. */
static FB_MUSTCHECK fb_code qb_drain(const qb_opts *o, qb_worker *ws, pthread_barrier_t *start,
                                     double *wall_ms, fb_err *err)
{
    pthread_t th[QB_MAX_WORKERS];
    fb_code rc = FB_OK;
    int started = 0;
    for (; started < o->workers; started++)
        if (pthread_create(&th[started], NULL, qb_worker_main, &ws[started]) != 0)
            break;
    if (started < o->workers) {
        /* The barrier counts the main thread too: it can never open now. */
        fprintf(stderr, "queue_claims: pthread_create failed\n");
        exit(1);
    }
    pthread_barrier_wait(start);
    double t0 = qb_now_ms();
    for (int i = 0; i < o->workers; i++)
        pthread_join(th[i], NULL);
    *wall_ms = qb_now_ms() - t0;
    for (int i = 0; i < o->workers && rc == FB_OK; i++)
        if (ws[i].rc != FB_OK) {
            *err = ws[i].err;
            rc = ws[i].rc;
        }
    return rc;
}

/* Every job claimed exactly once, every claim completed. */
static FB_MUSTCHECK fb_code qb_check_ids(const qb_opts *o, qb_worker *ws, int64_t *all, fb_err *err)
{
    int n = 0, completes = 0;
    for (int i = 0; i < o->workers; i++) {
        memcpy(all + n, ws[i].ids, (size_t)ws[i].claims * sizeof *all);
        n += ws[i].claims;
        completes += ws[i].completes;
    }
    if (n != o->jobs || completes != o->jobs)
        return fb_err_set(err, FB_EINTERNAL, NULL, "%d jobs inserted but %d claimed, %d completed",
                          o->jobs, n, completes);
    qsort(all, (size_t)n, sizeof *all, qb_cmp_i64);
    for (int i = 1; i < n; i++)
        if (all[i] == all[i - 1])
            return fb_err_set(err, FB_EINTERNAL, NULL, "job %" PRId64 " was claimed twice", all[i]);
    return FB_OK;
}

static void qb_report(const qb_opts *o, qb_worker *ws, double insert_ms, double wall_ms,
                      double *all)
{
    int n = qb_gather(ws, o->workers, true, all);
    printf("jobs %d, workers %d\n", o->jobs, o->workers);
    printf("insert:   %.0f jobs/s (one connection, %.1f ms)\n", o->jobs / (insert_ms / 1e3),
           insert_ms);
    printf("drain:    %.1f ms wall\n", wall_ms);
    printf("claims:   %.0f /s  (latency median %.3f ms, p99 %.3f ms)\n", n / (wall_ms / 1e3),
           qb_quantile(all, n, 0.5), qb_quantile(all, n, 0.99));
    n = qb_gather(ws, o->workers, false, all);
    printf("complete: %.0f /s  (latency median %.3f ms, p99 %.3f ms)\n", n / (wall_ms / 1e3),
           qb_quantile(all, n, 0.5), qb_quantile(all, n, 0.99));
}

/* The succeeded count, to check the drain's effect in the database itself. */
static FB_MUSTCHECK fb_code qb_succeeded(db_conn *c, int64_t *out, fb_err *err)
{
    db_stats st;
    fb_code rc = db_get_stats(c, 30, &st, err);
    if (rc == FB_OK)
        *out = st.jobs_by_state[2];
    return rc;
}

static FB_MUSTCHECK fb_code qb_run(const qb_opts *o, fb_err *err)
{
    qb_worker ws[QB_MAX_WORKERS] = {0};
    pthread_barrier_t start;
    db_conn *c = NULL;
    double *lat = calloc((size_t)o->jobs, sizeof *lat);
    int64_t *ids = calloc((size_t)o->jobs, sizeof *ids), before = 0, after = 0;
    double insert_ms = 0, wall_ms = 0;
    int64_t owners[64] = {0};
    fb_code rc = FB_ENOMEM;
    pthread_barrier_init(&start, NULL, (unsigned)o->workers + 1);
    if (!lat || !ids)
        goto out;
    rc = db_connect(o->url, &c, err);
    if (rc == FB_OK)
        rc = db_migrate(c, err);
    if (rc == FB_OK)
        rc = qb_succeeded(c, &before, err);
    if (rc != FB_OK)
        goto out;
    rc = qb_owners(c, o, owners, err);
    if (rc != FB_OK)
        goto out;
    insert_ms = qb_now_ms();
    rc = qb_insert(c, o->jobs, owners, o->owners, err);
    insert_ms = qb_now_ms() - insert_ms;
    if (rc == FB_OK)
        rc = qb_workers_init(o, &start, ws, err);
    if (rc == FB_OK)
        rc = qb_drain(o, ws, &start, &wall_ms, err);
    if (rc == FB_OK)
        rc = qb_check_ids(o, ws, ids, err);
    if (rc == FB_OK)
        rc = qb_succeeded(c, &after, err);
    if (rc == FB_OK && after - before != o->jobs)
        rc = fb_err_set(err, FB_EINTERNAL, NULL, "succeeded grew by %" PRId64 ", not %d",
                        after - before, o->jobs);
    if (rc == FB_OK)
        qb_report(o, ws, insert_ms, wall_ms, lat);
out:
    for (int i = 0; i < o->workers; i++)
        qb_worker_free(&ws[i]);
    pthread_barrier_destroy(&start);
    db_close(c);
    free(lat);
    free(ids);
    return rc;
}

int main(int argc, char **argv)
{
    qb_opts o;
    fb_err err = {0};
    if (qb_parse_args(argc, argv, &o) != 0)
        return 2;
    fb_code rc = qb_run(&o, &err);
    if (rc != FB_OK) {
        fprintf(stderr, "queue_claims: %s: %s\n", fb_code_name(rc), err.msg);
        return 1;
    }
    return 0;
}
