/* srv_catcache: the workload catalog kept in the server process, so POST /jobs
 * does not query it on every submit.
 *
 * The catalog (db_workload_catalog) changes only when a worker registers or goes
 * stale, yet reading it is a JSON aggregation over all workers: on every submit
 * it cost as much as the insert itself.  The cache keeps the parsed catalog for
 * SRV_CATCACHE_TTL_MS; a spec the cached copy rejects (unknown workload,
 * unsupported engine/device/...) is checked again against a fresh read before the
 * 422, so a worker that registered a moment ago is submittable at once.
 *
 * Thread-safe (one mutex; the database read runs outside it).  The fetch
 * function is passed in, so the cache is unit tested without a database. */
#ifndef SRV_CATCACHE_H
#define SRV_CATCACHE_H

#include <stdint.h>

#include "fb_err.h"
#include "fb_spec.h"

#define SRV_CATCACHE_TTL_MS   1000 /* a cached catalog older than this is read again */
#define SRV_CATCACHE_GRACE_MS 5000 /* expired, still used while one thread reads anew */

/* Reads the catalog as a JSON array text into *json (malloc'd, the caller frees
 * it on FB_OK).  ctx is the caller's (a db_conn for the server). */
typedef fb_code (*srv_catcache_fetch_fn)(void *ctx, char **json, fb_err *err);

/* srv_catalog_resolve of spec against the cached catalog, fetching it (through
 * fetch(ctx)) when there is none, when it is older than the TTL, or when the
 * cached copy rejects spec and is not fresh from this call.  Errors as
 * srv_catalog_resolve, or the fetch's error. */
FB_MUSTCHECK fb_code srv_catcache_resolve(srv_catcache_fetch_fn fetch, void *ctx, fb_spec *spec,
                                          fb_err *err);

/* Drops the cached catalog (tests; a later resolve fetches again). */
void srv_catcache_clear(void);

/* Fetches made so far (tests and /metrics-style checks). */
uint64_t srv_catcache_fetches(void);

#endif
