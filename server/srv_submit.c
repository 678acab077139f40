#include "srv_submit.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fb_log.h"

struct srv_submit {
    pthread_mutex_t mu;
    pthread_cond_t wake;          /* an item was queued, or stop */
    srv_submit_item *head, *tail; /* queued, oldest first; under mu */
    int in_flight;                /* under mu: batches and direct creates being committed */
    struct timespec last_commit;  /* under mu: CLOCK_MONOTONIC, when the last one ended */
    bool stopping;                /* under mu: no item is taken in any more */
    bool joined;                  /* under mu: a stop joins the thread once */
    pthread_t thread;
    atomic_uint_fast64_t batches, jobs;
    /* The batcher thread's alone from start to stop: */
    char *conninfo;
    db_conn *db;               /* NULL until connected, and after a break */
    struct timespec last_used; /* CLOCK_MONOTONIC: db's last statement */
    int max_batch;
    srv_submit_item **batch;  /* max_batch: the items of the batch being sent */
    const db_new_job **nj;    /* max_batch: their jobs */
    db_job_outcome *outcomes; /* max_batch: what became of them */
};

/* Under mu: unlinks the oldest queued item. */
static srv_submit_item *queue_pop(srv_submit *s)
{
    srv_submit_item *it = s->head;
    s->head = it->next;
    if (!s->head)
        s->tail = NULL;
    it->next = NULL;
    return it;
}

static size_t spec_bytes(const srv_submit_item *it)
{
    return it->nj.spec_json ? strlen(it->nj.spec_json) : 0;
}

/* Waits until something is queued and no commit is in flight (a direct create
 * may be), then takes the oldest items as one batch into s->batch: up to
 * max_batch of them and SRV_SUBMIT_BATCH_BYTES of spec (the first is taken
 * whatever its size).  0 when stopping with none left. */
static int take(srv_submit *s)
{
    size_t bytes = 0;
    int n = 0;

    pthread_mutex_lock(&s->mu);
    while ((!s->head || s->in_flight > 0) && !s->stopping)
        pthread_cond_wait(&s->wake, &s->mu);
    while (s->head && n < s->max_batch) {
        size_t b = spec_bytes(s->head);
        if (n > 0 && (bytes >= SRV_SUBMIT_BATCH_BYTES || b > SRV_SUBMIT_BATCH_BYTES - bytes))
            break;
        bytes += b;
        s->batch[n++] = queue_pop(s);
    }
    if (n > 0)
        s->in_flight++;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* A commit (batch or direct create) of jobs jobs is over. */
static void commit_done(srv_submit *s, int jobs)
{
    atomic_fetch_add(&s->batches, 1);
    atomic_fetch_add(&s->jobs, (uint_fast64_t)jobs);
    pthread_mutex_lock(&s->mu);
    s->in_flight--;
    clock_gettime(CLOCK_MONOTONIC, &s->last_commit);
    if (s->head) /* queued behind a direct create: the batcher may go now */
        pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
}

static long long us_since(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)(now.tv_sec - t->tv_sec) * 1000000 + (now.tv_nsec - t->tv_nsec) / 1000;
}

/* The batcher's connection, made when there is none.  One idle for a while is
 * pinged first (db_ping reconnects a stale one): after a database restart a
 * batch's insert, which is never retried, would otherwise fail all its jobs. */
static fb_code conn_ready(srv_submit *s, fb_err *err)
{
    fb_code rc = FB_OK;

    if (s->db && us_since(&s->last_used) > SRV_SUBMIT_PING_IDLE_MS * 1000LL &&
        db_ping(s->db, err)) {
        db_close(s->db);
        s->db = NULL;
        return FB_EUNAVAIL; /* err says why */
    }
    if (!s->db)
        rc = db_connect(s->conninfo, &s->db, err);
    /* As srv_pool: whatever kept us from connecting, the database is away. */
    if (rc && rc != FB_ENOMEM)
        rc = err->code = FB_EUNAVAIL;
    return rc;
}

/* Every outcome of the batch fails with err (the database was not reached). */
static void fail_all(srv_submit *s, int n, const fb_err *err)
{
    for (int i = 0; i < n; i++) {
        memset(&s->outcomes[i], 0, sizeof s->outcomes[i]);
        s->outcomes[i].rc = err->code;
        s->outcomes[i].err = *err;
    }
}

/* Creates the n jobs of s->batch and answers each item. */
static void flush(srv_submit *s, int n)
{
    fb_err err;
    fb_code rc = FB_OK;

    fb_err_clear(&err);
    for (int i = 0; i < n; i++)
        s->nj[i] = &s->batch[i]->nj;
    rc = conn_ready(s, &err);
    if (rc) {
        fb_warn("submit: %d job(s) not created: %s", n, err.msg);
        fail_all(s, n, &err);
    } else {
        rc = db_job_create_many(s->db, s->nj, n, s->outcomes, &err);
        clock_gettime(CLOCK_MONOTONIC, &s->last_used);
        if (rc != FB_OK && rc != FB_EUNAVAIL) /* n out of range: a bug here */
            fail_all(s, n, &err);
    }
    if (rc == FB_EUNAVAIL) { /* closed now, connected again by the next batch */
        db_close(s->db);
        s->db = NULL;
    }
    commit_done(s, n);
    fb_debug("submit: batch of %d job(s): %s", n, fb_code_name(rc));
    for (int i = 0; i < n; i++) {
        srv_submit_item *it = s->batch[i];
        it->res = s->outcomes[i];
        it->done(it); /* it may be gone after this */
    }
}

static void *submit_main(void *arg)
{
    srv_submit *s = arg;

    for (;;) {
        int n = take(s);
        if (n == 0)
            break;
        flush(s, n);
    }
    return NULL;
}

static void submit_free(srv_submit *s)
{
    db_close(s->db);
    free(s->batch);
    free(s->nj);
    free(s->outcomes);
    free(s->conninfo);
    free(s);
}

fb_code srv_submit_start(const char *conninfo, int max_batch, srv_submit **out, fb_err *err)
{
    srv_submit *s;

    *out = NULL;
    if (!conninfo || max_batch < 1 || max_batch > DB_JOB_BATCH_MAX)
        return fb_err_set(err, FB_EINVAL, NULL, "submit batch size must be 1..%d",
                          DB_JOB_BATCH_MAX);
    s = calloc(1, sizeof *s);
    if (!s)
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    s->max_batch = max_batch;
    s->conninfo = strdup(conninfo);
    s->batch = calloc((size_t)max_batch, sizeof *s->batch);
    s->nj = calloc((size_t)max_batch, sizeof *s->nj);
    s->outcomes = calloc((size_t)max_batch, sizeof *s->outcomes);
    if (!s->conninfo || !s->batch || !s->nj || !s->outcomes) {
        submit_free(s);
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    }
    atomic_init(&s->batches, 0);
    atomic_init(&s->jobs, 0);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    if (pthread_create(&s->thread, NULL, submit_main, s) != 0) {
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->mu);
        submit_free(s);
        return fb_err_set(err, FB_EIO, NULL, "cannot start the submit thread");
    }
    *out = s;
    return FB_OK;
}

void srv_submit_enqueue(srv_submit *s, srv_submit_item *item)
{
    bool refused;

    assert(s && item && item->done);
    item->next = NULL;
    memset(&item->res, 0, sizeof item->res);
    pthread_mutex_lock(&s->mu);
    refused = s->stopping;
    if (!refused) {
        if (s->tail)
            s->tail->next = item;
        else
            s->head = item;
        s->tail = item;
        pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->mu);
    if (refused) {
        item->res.rc = fb_err_set(&item->res.err, FB_EUNAVAIL, NULL, "the server is stopping");
        item->done(item);
    }
}

/* srv_submit_run's item and what its caller waits on. */
typedef struct run_wait {
    srv_submit_item item;
    pthread_mutex_t mu;
    pthread_cond_t answered_cv;
    bool answered;
} run_wait;

static void run_done(srv_submit_item *item)
{
    run_wait *w = item->arg;

    pthread_mutex_lock(&w->mu);
    w->answered = true;
    pthread_cond_signal(&w->answered_cv);
    pthread_mutex_unlock(&w->mu);
}

fb_code srv_submit_run(srv_submit *s, const db_new_job *nj, db_job *out, fb_err *err)
{
    run_wait w;

    memset(&w, 0, sizeof w);
    w.item.nj = *nj;
    w.item.done = run_done;
    w.item.arg = &w;
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.answered_cv, NULL);
    srv_submit_enqueue(s, &w.item);
    pthread_mutex_lock(&w.mu);
    while (!w.answered)
        pthread_cond_wait(&w.answered_cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    pthread_cond_destroy(&w.answered_cv);
    pthread_mutex_destroy(&w.mu);
    *out = w.item.res.job;
    if (w.item.res.rc && err)
        *err = w.item.res.err;
    return w.item.res.rc;
}

bool srv_submit_direct_begin(srv_submit *s)
{
    bool ok;

    pthread_mutex_lock(&s->mu);
    /* Only after a quiet spell: under load an HTTP thread committing directly
     * would hold up the requests of its other connections, and each would in
     * turn find the batcher idle and commit alone. */
    ok = s->stopping ||
         (s->in_flight == 0 && !s->head && us_since(&s->last_commit) >= SRV_SUBMIT_DIRECT_IDLE_US);
    if (ok)
        s->in_flight++;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

void srv_submit_direct_end(srv_submit *s)
{
    commit_done(s, 1);
}

void srv_submit_stop(srv_submit *s)
{
    bool join;

    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    join = !s->joined;
    s->joined = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    if (join)
        pthread_join(s->thread, NULL); /* take() drains the queue before it returns 0 */
}

void srv_submit_destroy(srv_submit *s)
{
    if (!s)
        return;
    srv_submit_stop(s);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
    submit_free(s);
}

void srv_submit_counts(srv_submit *s, uint64_t *batches, uint64_t *jobs)
{
    *batches = atomic_load(&s->batches);
    *jobs = atomic_load(&s->jobs);
}
