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

/* Creates a pool of size slots (1..256) for conninfo (copied).  *out is the
 * caller's, freed with srv_pool_destroy.  Connects nothing yet. */
FB_MUSTCHECK fb_code srv_pool_create(const char *conninfo, int size, srv_pool **out, fb_err *err);

/* Closes every connection and frees the pool; no borrower may be left.  NULL ok. */
void srv_pool_destroy(srv_pool *p);

/* Borrows a connection, waiting up to wait_ms for a free slot and connecting it
 * when needed.  FB_EUNAVAIL when the database does not answer or no slot frees
 * in time.  *out stays the pool's: give it back with srv_pool_release. */
FB_MUSTCHECK fb_code srv_pool_acquire(srv_pool *p, int wait_ms, db_conn **out, fb_err *err);

/* Gives c back; broken = true closes it (the last call saw FB_EUNAVAIL). */
void srv_pool_release(srv_pool *p, db_conn *c, bool broken);

#endif
