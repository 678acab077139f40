/* srv_pool: a fixed pool of database connections shared by the HTTP threads.
 *
 * libpq connections are not thread-safe, so a request borrows one connection for
 * its handler and gives it back.  Slots connect lazily, so the pool can be created
 * while the database is still down; a connection that failed with FB_EUNAVAIL is
 * closed on release and the next borrower reconnects. */
#ifndef SRV_POOL_H
#define SRV_POOL_H

#include <stdbool.h>

#include "db.h"
#include "fb_err.h"

typedef struct srv_pool srv_pool;

/* Creates a pool of size slots (1..256) for conninfo (copied); each connection
 * gets statement_timeout_ms (0 = none) as it connects, so no request's query
 * holds a connection longer.  *out is the caller's, freed with
 * srv_pool_destroy.  Connects nothing yet. */
FB_MUSTCHECK fb_code srv_pool_create(const char *conninfo, int size, int statement_timeout_ms,
                                     srv_pool **out, fb_err *err);

/* Closes every connection and frees the pool; no borrower may be left.  NULL ok. */
void srv_pool_destroy(srv_pool *p);

/* Borrows a connection, waiting up to wait_ms for a free slot and connecting it
 * when needed.  FB_EUNAVAIL when the database does not answer or no slot frees
 * in time.  *out stays the pool's: give it back with srv_pool_release. */
FB_MUSTCHECK fb_code srv_pool_acquire(srv_pool *p, int wait_ms, db_conn **out, fb_err *err);

/* Gives c back; broken = true closes it (the last call saw FB_EUNAVAIL).  When
 * a waiter is queued (srv_pool_wait) the slot goes to it. */
void srv_pool_release(srv_pool *p, db_conn *c, bool broken);

/* A borrower that waits without holding a thread.  The pool calls ready(w)
 * once, from the thread that freed a slot (or from srv_pool_wait's caller),
 * after handing the slot to w; the owner then takes the connection with
 * srv_pool_take.  The waiter is the
 * owner's memory and must stay valid until ready ran. */
typedef struct srv_pool_waiter {
    void (*ready)(struct srv_pool_waiter *w);
    int slot;                     /* the pool's */
    struct srv_pool_waiter *next; /* the pool's */
} srv_pool_waiter;

/* A free connection now, without waiting or queueing: *got true and *out set
 * (FB_OK), or *got false when every slot is busy or others are queued.
 * Errors as srv_pool_acquire. */
FB_MUSTCHECK fb_code srv_pool_try(srv_pool *p, db_conn **out, bool *got, fb_err *err);

/* Queues w for the next free slot; when one is free already, hands it to w and
 * calls w->ready at once (on this thread).  So a caller that must be ready to
 * be woken (a suspended request) gets ready first, then calls this. */
void srv_pool_wait(srv_pool *p, srv_pool_waiter *w);

/* After w->ready: the connection of the slot handed to w, connected when
 * needed (FB_EUNAVAIL, and the slot freed, when the database does not answer). */
FB_MUSTCHECK fb_code srv_pool_take(srv_pool *p, srv_pool_waiter *w, db_conn **out, fb_err *err);

#endif
