#include "srv_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SRV_POOL_MAX 256

typedef struct pool_slot {
    db_conn *conn; /* NULL until first use or after a failure */
    bool busy;
} pool_slot;

struct srv_pool {
    pthread_mutex_t mu;
    pthread_cond_t freed;
    srv_pool_waiter *wait_head, *wait_tail; /* queued borrowers, first come first served */
    char *conninfo;
    int size;
    int statement_timeout_ms;
    pool_slot *slots;
};

fb_code srv_pool_create(const char *conninfo, int size, int statement_timeout_ms, srv_pool **out,
                        fb_err *err)
{
    srv_pool *p;

    if (!conninfo || size < 1 || size > SRV_POOL_MAX)
        return fb_err_set(err, FB_EINVAL, NULL, "pool size must be 1..%d", SRV_POOL_MAX);
    p = calloc(1, sizeof *p);
    if (!p)
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    p->conninfo = strdup(conninfo);
    p->slots = calloc((size_t)size, sizeof *p->slots);
    if (!p->conninfo || !p->slots) {
        free(p->conninfo);
        free(p->slots);
        free(p);
        return fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
    }
    p->size = size;
    p->statement_timeout_ms = statement_timeout_ms;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->freed, NULL);
    *out = p;
    return FB_OK;
}

void srv_pool_destroy(srv_pool *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->size; i++)
        db_close(p->slots[i].conn);
    pthread_cond_destroy(&p->freed);
    pthread_mutex_destroy(&p->mu);
    free(p->slots);
    free(p->conninfo);
    free(p);
}

/* Under the lock: the index of a free slot, preferring one already connected, or
 * -1 when all are busy. */
static int find_free(const srv_pool *p)
{
    int any = -1;
    for (int i = 0; i < p->size; i++) {
        if (p->slots[i].busy)
            continue;
        if (p->slots[i].conn)
            return i;
        if (any < 0)
            any = i;
    }
    return any;
}

/* Under the lock: waits until a slot is free or the deadline passes. */
static int wait_free(srv_pool *p, int wait_ms)
{
    struct timespec until;
    int i;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += wait_ms / 1000;
    until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while ((i = find_free(p)) < 0)
        if (pthread_cond_timedwait(&p->freed, &p->mu, &until) == ETIMEDOUT)
            return find_free(p);
    return i;
}

static void pool_free_slot(srv_pool *p, int i);

/* The connection of slot i, which the caller holds (busy): connected when
 * needed with the session settings; on failure the slot is freed again. */
static fb_code slot_connect(srv_pool *p, int i, db_conn **out, fb_err *err)
{
    fb_code rc = FB_OK;

    /* Connecting happens outside the lock: the slot is ours while busy. */
    if (!p->slots[i].conn) {
        rc = db_connect(p->conninfo, &p->slots[i].conn, err);
        if (!rc)
            rc = db_set_statement_timeout(p->slots[i].conn, p->statement_timeout_ms, err);
    }
    if (rc) {
        db_close(p->slots[i].conn);
        p->slots[i].conn = NULL;
        pool_free_slot(p, i);
        return rc == FB_ENOMEM ? rc : FB_EUNAVAIL;
    }
    *out = p->slots[i].conn;
    return FB_OK;
}

fb_code srv_pool_acquire(srv_pool *p, int wait_ms, db_conn **out, fb_err *err)
{
    int i;

    pthread_mutex_lock(&p->mu);
    i = p->wait_head ? -1 : wait_free(p, wait_ms); /* no jumping the queue */
    if (i >= 0)
        p->slots[i].busy = true;
    pthread_mutex_unlock(&p->mu);
    if (i < 0)
        return fb_err_set(err, FB_EUNAVAIL, NULL, "no database connection free");
    return slot_connect(p, i, out, err);
}

fb_code srv_pool_try(srv_pool *p, db_conn **out, bool *got, fb_err *err)
{
    int i;

    *got = false;
    pthread_mutex_lock(&p->mu);
    i = p->wait_head ? -1 : find_free(p); /* no jumping the queue */
    if (i >= 0)
        p->slots[i].busy = true;
    pthread_mutex_unlock(&p->mu);
    if (i < 0)
        return FB_OK;
    *got = true;
    return slot_connect(p, i, out, err);
}

void srv_pool_wait(srv_pool *p, srv_pool_waiter *w)
{
    int i;

    w->next = NULL;
    w->slot = -1;
    pthread_mutex_lock(&p->mu);
    i = p->wait_head ? -1 : find_free(p);
    if (i >= 0) { /* freed since srv_pool_try: the slot is w's now */
        p->slots[i].busy = true;
        w->slot = i;
    } else {
        if (p->wait_tail)
            p->wait_tail->next = w;
        else
            p->wait_head = w;
        p->wait_tail = w;
    }
    pthread_mutex_unlock(&p->mu);
    if (i >= 0)
        w->ready(w);
}

fb_code srv_pool_take(srv_pool *p, srv_pool_waiter *w, db_conn **out, fb_err *err)
{
    return slot_connect(p, w->slot, out, err);
}

/* Frees slot i (locks): to the first queued waiter, else to the pool. */
static void release_slot_locked(srv_pool *p, int i, srv_pool_waiter **woken)
{
    srv_pool_waiter *w = p->wait_head;

    *woken = NULL;
    if (w) { /* the slot stays busy: it is the waiter's now */
        p->wait_head = w->next;
        if (!p->wait_head)
            p->wait_tail = NULL;
        w->slot = i;
        *woken = w;
        return;
    }
    p->slots[i].busy = false;
    pthread_cond_signal(&p->freed);
}

static void pool_free_slot(srv_pool *p, int i)
{
    srv_pool_waiter *w;

    pthread_mutex_lock(&p->mu);
    release_slot_locked(p, i, &w);
    pthread_mutex_unlock(&p->mu);
    if (w)
        w->ready(w);
}

void srv_pool_release(srv_pool *p, db_conn *c, bool broken)
{
    srv_pool_waiter *w = NULL;

    if (!c)
        return;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->size; i++) {
        if (p->slots[i].conn != c)
            continue;
        if (broken) {
            db_close(c);
            p->slots[i].conn = NULL;
        }
        release_slot_locked(p, i, &w);
        break;
    }
    pthread_mutex_unlock(&p->mu);
    if (w)
        w->ready(w);
}
