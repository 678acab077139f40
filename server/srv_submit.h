/* srv_submit: group commit of job submissions.
 *
 * A durable commit waits for a WAL flush, and a disk does only so many flushes a
 * second; one transaction per submit made that the ceiling of POST /jobs.  The
 * submit batcher is one thread with a database connection of its own: request
 * threads hand it their validated jobs, and it creates all that are waiting in
 * one statement (db_job_create_many: one transaction, one flush, one NOTIFY),
 * then hands each job back to its own caller with its own row or error.
 *
 * Batches form by themselves: while one commit is in flight the next jobs
 * queue, and the next batch takes them all (up to max_batch jobs and
 * SRV_SUBMIT_BATCH_BYTES of spec).  There is no timer: a job that finds
 * nothing in flight goes at once, and a lone submit with a connection at hand
 * commits on it directly (srv_submit_direct_begin), so it waits for nothing but
 * its commit.
 *
 * The connection is made on first use and closed when it breaks (FB_EUNAVAIL);
 * the next batch connects again, as srv_pool's slots do.  While the database is
 * away each waiting job gets FB_EUNAVAIL.  Every job handed in gets exactly one
 * answer, stop included: srv_submit_stop creates what is queued, then refuses
 * (FB_EUNAVAIL) what comes later. */
#ifndef SRV_SUBMIT_H
#define SRV_SUBMIT_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "fb_err.h"

#define SRV_SUBMIT_BATCH_MAX      256  /* the server's max_batch */
#define SRV_SUBMIT_DIRECT_IDLE_US 1000 /* quiet spell before a direct create */
#define SRV_SUBMIT_PING_IDLE_MS   1000 /* the batcher pings a connection idle this long */
#define SRV_SUBMIT_BATCH_BYTES                                                                     \
    (8u * 1024 * 1024) /* of spec JSON per batch (one job may exceed it) */

typedef struct srv_submit srv_submit;
typedef struct srv_submit_item srv_submit_item;

/* Called once per item, on the batcher's thread (or on the caller's, when the
 * batcher refuses the item), with item->res set.  After done returns the
 * batcher never touches the item again, so done may free it. */
typedef void (*srv_submit_done_fn)(srv_submit_item *item);

/* One job in flight; the caller's memory, which must stay valid until done. */
struct srv_submit_item {
    db_new_job nj;           /* in: the job; its strings stay the caller's until done */
    srv_submit_done_fn done; /* in */
    void *arg;               /* in: the caller's, for done */
    db_job_outcome res;      /* out: res.rc FB_OK: res.job is the caller's (db_job_free) */
    srv_submit_item *next;   /* the batcher's queue link */
};

/* Starts the batcher thread for conninfo (copied; connects on first use);
 * max_batch 1..DB_JOB_BATCH_MAX.  *out is the caller's: srv_submit_destroy. */
FB_MUSTCHECK fb_code srv_submit_start(const char *conninfo, int max_batch, srv_submit **out,
                                      fb_err *err);

/* Hands item to the batcher; item->done will be called exactly once. */
void srv_submit_enqueue(srv_submit *s, srv_submit_item *item);

/* srv_submit_enqueue and wait for the answer: db_job_create through the
 * batcher.  *out is the caller's (db_job_free) on FB_OK, zeroed otherwise. */
FB_MUSTCHECK fb_code srv_submit_run(srv_submit *s, const db_new_job *nj, db_job *out, fb_err *err);

/* The lone submit's fast path.  When nothing is queued or being committed,
 * nor was for SRV_SUBMIT_DIRECT_IDLE_US (low load), a caller that holds a
 * database connection of its own (an HTTP thread's, from srv_pool) creates its
 * job there with db_job_create, as before group commit, sparing the hand-over
 * to the batcher's thread and back.  true: the caller does so now and then
 * calls srv_submit_direct_end; jobs handed in meanwhile queue, and go as one
 * batch once that commit is over.  false: enqueue instead.  Once the batcher
 * has stopped, always true: what comes in during a shutdown is created on the
 * request's own connection, as before group commit, not refused. */
FB_MUSTCHECK bool srv_submit_direct_begin(srv_submit *s);
void srv_submit_direct_end(srv_submit *s);

/* Creates every job queued so far, answers them, and stops the thread; later
 * items are answered FB_EUNAVAIL at once.  Idempotent. */
void srv_submit_stop(srv_submit *s);

/* srv_submit_stop, then closes the connection and frees s.  NULL is ok. */
void srv_submit_destroy(srv_submit *s);

/* Counts so far: commits (batches and direct creates) and the jobs in them. */
void srv_submit_counts(srv_submit *s, uint64_t *batches, uint64_t *jobs);

#endif
