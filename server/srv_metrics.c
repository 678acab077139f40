#include "srv_metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_git_sha.h"
#include "fb_log.h"

#define MAX_REQ_SERIES   256 /* (route, method, status) triples; more are dropped */
#define MAX_ROUTES       32  /* latency series: one per route label */
#define METRICS_TEXT_MAX (256 * 1024)
#define STATS_WAIT_MS    1000

static const double bucket_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                   0.1,   0.25,   0.5,   1.0,  2.5,   5.0};
#define N_BUCKETS (sizeof bucket_le / sizeof bucket_le[0])

typedef struct req_series {
    const char *route; /* static */
    const char *method;
    int status;
    uint64_t count;
} req_series;

typedef struct lat_series {
    const char *route;
    uint64_t bucket[N_BUCKETS]; /* per bucket, not cumulative: summed when written */
    uint64_t count;
    double sum;
} lat_series;

/* One mutex: a request takes it once, for a few increments. */
static pthread_mutex_t metrics_mu = PTHREAD_MUTEX_INITIALIZER;
static req_series reqs[MAX_REQ_SERIES];
static int n_reqs;
static lat_series lats[MAX_ROUTES];
static int n_lats;
static uint64_t dropped;

/* Methods outside this list are counted as "OTHER" so clients cannot grow the
 * series table with made-up methods. */
static const char *method_label(const char *m)
{
    static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(m, known[i]) == 0)
            return known[i];
    return "OTHER";
}

static void count_request(const char *route, const char *method, int status)
{
    for (int i = 0; i < n_reqs; i++) {
        if (reqs[i].route == route && reqs[i].method == method && reqs[i].status == status) {
            reqs[i].count++;
            return;
        }
    }
    if (n_reqs == MAX_REQ_SERIES) {
        dropped++;
        return;
    }
    reqs[n_reqs++] = (req_series){route, method, status, 1};
}

static void observe_latency(const char *route, double s)
{
    lat_series *l = NULL;

    for (int i = 0; i < n_lats && !l; i++)
        if (lats[i].route == route)
            l = &lats[i];
    if (!l) {
        if (n_lats == MAX_ROUTES) {
            dropped++;
            return;
        }
        l = &lats[n_lats++];
        l->route = route;
    }
    for (size_t b = 0; b < N_BUCKETS; b++) {
        if (s <= bucket_le[b]) {
            l->bucket[b]++;
            break;
        }
    }
    l->count++;
    l->sum += s;
}

void srv_metrics_observe(const char *route, const char *method, int status, double seconds)
{
    const char *m = method_label(method);

    pthread_mutex_lock(&metrics_mu);
    count_request(route, m, status);
    observe_latency(route, seconds);
    pthread_mutex_unlock(&metrics_mu);
}

/* ---- exposition ---- */

typedef struct textbuf {
    char *p;
    size_t len;
    bool full; /* METRICS_TEXT_MAX reached */
} textbuf;

FB_PRINTF(2, 3) static void tb_add(textbuf *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->full)
        return;
    va_start(ap, fmt);
    n = vsnprintf(t->p + t->len, METRICS_TEXT_MAX - t->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= METRICS_TEXT_MAX - t->len)
        t->full = true;
    else
        t->len += (size_t)n;
}

static void write_requests(textbuf *t)
{
    tb_add(t, "# HELP fusionbench_http_requests_total HTTP requests by route pattern, method "
              "and status.\n# TYPE fusionbench_http_requests_total counter\n");
    for (int i = 0; i < n_reqs; i++)
        tb_add(t,
               "fusionbench_http_requests_total{route=\"%s\",method=\"%s\",status=\"%d\"} %llu\n",
               reqs[i].route, reqs[i].method, reqs[i].status, (unsigned long long)reqs[i].count);
    tb_add(t,
           "# HELP fusionbench_metrics_dropped_total Observations dropped: series table "
           "full.\n# TYPE fusionbench_metrics_dropped_total counter\n"
           "fusionbench_metrics_dropped_total %llu\n",
           (unsigned long long)dropped);
}

static void write_latency(textbuf *t)
{
    tb_add(t, "# HELP fusionbench_http_request_duration_seconds Time from request to response "
              "sent, by route pattern.\n"
              "# TYPE fusionbench_http_request_duration_seconds histogram\n");
    for (int i = 0; i < n_lats; i++) {
        const lat_series *l = &lats[i];
        uint64_t cum = 0;
        for (size_t b = 0; b < N_BUCKETS; b++) {
            cum += l->bucket[b];
            tb_add(t,
                   "fusionbench_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} "
                   "%llu\n",
                   l->route, bucket_le[b], (unsigned long long)cum);
        }
        tb_add(t,
               "fusionbench_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} "
               "%llu\n",
               l->route, (unsigned long long)l->count);
        tb_add(t, "fusionbench_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n", l->route,
               l->sum);
        tb_add(t, "fusionbench_http_request_duration_seconds_count{route=\"%s\"} %llu\n", l->route,
               (unsigned long long)l->count);
    }
}

/* Queue figures from the database; false when it cannot be asked now. */
static bool fetch_stats(srv_req *r, db_stats *st)
{
    db_conn *c = NULL;
    fb_err err;
    fb_code rc;

    fb_err_clear(&err);
    if (!atomic_load(&r->srv->db_ready))
        return false;
    rc = srv_pool_acquire(r->srv->pool, STATS_WAIT_MS, &c, &err);
    if (rc == FB_OK)
        rc = db_get_stats(c, SRV_WORKER_STALE_S, st, &err);
    if (c)
        srv_pool_release(r->srv->pool, c, rc == FB_EUNAVAIL);
    if (rc)
        fb_warn("metrics: no queue figures: %s", err.msg);
    return rc == FB_OK;
}

static void write_queue(textbuf *t, const db_stats *st, bool have)
{
    static const char *const states[] = {"queued", "running", "succeeded", "failed", "canceled"};
    tb_add(t,
           "# HELP fusionbench_db_up 1 when the database answered this scrape.\n"
           "# TYPE fusionbench_db_up gauge\nfusionbench_db_up %d\n",
           have ? 1 : 0);
    tb_add(t,
           "# HELP fusionbench_build_info Build of this server.\n"
           "# TYPE fusionbench_build_info gauge\n"
           "fusionbench_build_info{git_sha=\"%s\"} 1\n",
           FB_GIT_SHA);
    if (!have)
        return;
    tb_add(t, "# HELP fusionbench_jobs Jobs by state.\n# TYPE fusionbench_jobs gauge\n");
    for (int i = 0; i < 5; i++)
        tb_add(t, "fusionbench_jobs{state=\"%s\"} %lld\n", states[i],
               (long long)st->jobs_by_state[i]);
    tb_add(t,
           "# HELP fusionbench_queue_oldest_age_seconds Age of the oldest queued job.\n"
           "# TYPE fusionbench_queue_oldest_age_seconds gauge\n"
           "fusionbench_queue_oldest_age_seconds %.3f\n",
           st->oldest_queued_age_s);
    tb_add(t,
           "# HELP fusionbench_workers_alive Workers with a recent heartbeat.\n"
           "# TYPE fusionbench_workers_alive gauge\nfusionbench_workers_alive %lld\n",
           (long long)st->workers_alive);
}

/* The submit batcher's counters: jobs / batches is the mean batch (srv_submit). */
static void write_submit(textbuf *t, srv_submit *s)
{
    uint64_t batches = 0, jobs = 0;

    if (!s)
        return;
    srv_submit_counts(s, &batches, &jobs);
    tb_add(t,
           "# HELP fusionbench_submit_batches_total Group commits of submitted jobs.\n"
           "# TYPE fusionbench_submit_batches_total counter\n"
           "fusionbench_submit_batches_total %llu\n"
           "# HELP fusionbench_submit_jobs_total Jobs sent in those group commits.\n"
           "# TYPE fusionbench_submit_jobs_total counter\n"
           "fusionbench_submit_jobs_total %llu\n",
           (unsigned long long)batches, (unsigned long long)jobs);
}

/* The caps of srv_http.c: what they refused, and who holds the server now. */
static void write_clients(textbuf *t, srv_ctx *ctx)
{
    tb_add(t,
           "# HELP fusionbench_http_refused_total Requests answered 503 over a connection cap: "
           "all connections, or one client's (connections per address, requests in flight).\n"
           "# TYPE fusionbench_http_refused_total counter\n"
           "fusionbench_http_refused_total{cap=\"connections\"} %lld\n"
           "fusionbench_http_refused_total{cap=\"client\"} %lld\n"
           "# HELP fusionbench_http_open_connections Connections open on the public listener.\n"
           "# TYPE fusionbench_http_open_connections gauge\n"
           "fusionbench_http_open_connections %d\n"
           "# HELP fusionbench_http_clients Clients with a request in flight (behind trusted "
           "proxies, each client apart).\n"
           "# TYPE fusionbench_http_clients gauge\n"
           "fusionbench_http_clients %d\n"
           "# HELP fusionbench_http_requests_in_flight Requests begun and not yet answered, "
           "this scrape among them (on both listeners).\n"
           "# TYPE fusionbench_http_requests_in_flight gauge\n"
           "fusionbench_http_requests_in_flight %d\n"
           "# HELP fusionbench_http_connections_unanswered Public connections with a request "
           "begun and not answered, or open with none read yet.\n"
           "# TYPE fusionbench_http_connections_unanswered gauge\n"
           "fusionbench_http_connections_unanswered %d\n",
           (long long)atomic_load(&ctx->refused[0]), (long long)atomic_load(&ctx->refused[1]),
           atomic_load(&ctx->open_conns), ctx->inflight ? srv_counts_keys(ctx->inflight) : 0,
           atomic_load(&ctx->pending), atomic_load(&ctx->unsettled));
}

void srv_metrics_handle(srv_req *r)
{
    textbuf t = {malloc(METRICS_TEXT_MAX), 0, false};
    db_stats st;
    bool have;

    if (!t.p) {
        srv_reply_error(r, 500, "internal", NULL, "out of memory");
        return;
    }
    memset(&st, 0, sizeof st);
    have = fetch_stats(r, &st);
    pthread_mutex_lock(&metrics_mu);
    write_requests(&t);
    write_latency(&t);
    pthread_mutex_unlock(&metrics_mu);
    write_queue(&t, &st, have);
    write_submit(&t, r->srv->submit);
    write_clients(&t, r->srv);
    if (t.full) {
        free(t.p);
        srv_reply_error(r, 500, "internal", NULL, "metrics text over %d bytes", METRICS_TEXT_MAX);
        return;
    }
    srv_reply_owned(r, 200, "text/plain; version=0.0.4; charset=utf-8", t.p, t.len);
}
