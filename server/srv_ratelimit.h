/* srv_ratelimit: a token bucket per API token for submits.
 *
 * Each key (an API token's key id) has a bucket of `burst` submits that
 * refills at `rate` per second; a submit takes one.  An empty bucket answers
 * how long until one is back (the 429's Retry-After).  The buckets live in
 * this process: behind N servers a token gets N times the rate (docs).
 *
 * Memory is bounded by the keys seen lately: a bucket that has refilled
 * completely is the same as no bucket, so it is dropped when the table needs
 * room.  Thread-safe. */
#ifndef SRV_RATELIMIT_H
#define SRV_RATELIMIT_H

#include <stdbool.h>

typedef struct srv_ratelimit srv_ratelimit;

/* rate: submits per second (> 0); burst: the bucket's size (>= 1).  NULL when
 * out of memory. */
srv_ratelimit *srv_ratelimit_new(double rate, double burst);
void srv_ratelimit_free(srv_ratelimit *rl);

/* Takes one submit from key's bucket at time now_s (any monotonic clock, in
 * seconds).  Returns 0 when taken, else the seconds until one is available
 * (nothing taken).  A key longer than 63 characters is cut. */
double srv_ratelimit_take(srv_ratelimit *rl, const char *key, double now_s);

/* Buckets held now (tests). */
int srv_ratelimit_size(srv_ratelimit *rl);

#endif
