/* srv_catcache: see srv_catcache.h.  One process-wide cached catalog under one
 * mutex.  Resolving against it is pure and takes microseconds, so it runs under
 * the mutex; the database read and the JSON parse run outside it, and the new
 * tree replaces the old one under it. */
#include "srv_catcache.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "srv_catalog.h"

static pthread_mutex_t cc_lock = PTHREAD_MUTEX_INITIALIZER;
static cJSON *cc_catalog;   /* owned; NULL until the first fetch */
static int64_t cc_fetched;  /* CLOCK_MONOTONIC ms of cc_catalog's fetch */
static uint64_t cc_fetches; /* fetches that succeeded */
static bool cc_refreshing;  /* a thread is reading the catalog after an expiry */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads and parses the catalog, then makes it the cached one. */
static fb_code refresh(srv_catcache_fetch_fn fetch, void *ctx, fb_err *err)
{
    char *text = NULL;
    cJSON *fresh = NULL;
    int64_t t0 = now_ms(); /* before the read: the copy is at least this fresh */
    fb_code rc = fetch(ctx, &text, err);
    if (!rc) {
        fresh = cJSON_Parse(text);
        if (!fresh)
            rc = fb_err_set(err, FB_EINTERNAL, NULL, "workload catalog is not JSON");
    }
    free(text);
    pthread_mutex_lock(&cc_lock);
    cJSON *old = fresh ? cc_catalog : NULL;
    if (fresh) {
        cc_catalog = fresh;
        cc_fetched = t0;
        cc_fetches++;
    }
    cc_refreshing = false;
    pthread_mutex_unlock(&cc_lock);
    cJSON_Delete(old);
    return rc;
}

/* Resolves spec against the cached catalog when there is a usable copy (*have;
 * when false, spec is untouched and the caller is to fetch).  Right after a
 * fetch any copy will do.  Otherwise a copy younger than the TTL; or, while
 * another thread is already reading the next one, an expired copy up to
 * SRV_CATCACHE_GRACE_MS old, so an expiry does not start one read per thread. */
static fb_code resolve_cached(fb_spec *spec, bool after_fetch, bool *have, fb_err *err)
{
    fb_code rc = FB_OK;
    pthread_mutex_lock(&cc_lock);
    int64_t age = now_ms() - cc_fetched;
    *have = cc_catalog && (after_fetch || age < SRV_CATCACHE_TTL_MS ||
                           (cc_refreshing && age < SRV_CATCACHE_GRACE_MS));
    if (*have)
        rc = srv_catalog_resolve(cc_catalog, spec, err);
    else
        cc_refreshing = true;
    pthread_mutex_unlock(&cc_lock);
    return rc;
}

/* A catalog answer that a newer catalog could change (as opposed to a broken
 * catalog or database). */
static bool is_miss(fb_code rc)
{
    return rc == FB_ENOTFOUND || rc == FB_EUNSUPPORTED;
}

fb_code srv_catcache_resolve(srv_catcache_fetch_fn fetch, void *ctx, fb_spec *spec, fb_err *err)
{
    /* What resolve fills in when empty: put back before resolving again, so the
     * second answer does not depend on defaults the stale copy picked. */
    char engine[sizeof spec->engine], device[sizeof spec->device], dtype[sizeof spec->dtype];
    bool have = false;
    memcpy(engine, spec->engine, sizeof engine);
    memcpy(device, spec->device, sizeof device);
    memcpy(dtype, spec->dtype, sizeof dtype);
    fb_code rc = resolve_cached(spec, false, &have, err);
    if (have && !is_miss(rc))
        return rc;
    /* No copy, an expired one, or a miss on a copy up to a TTL old: read again. */
    memcpy(spec->engine, engine, sizeof engine);
    memcpy(spec->device, device, sizeof device);
    memcpy(spec->dtype, dtype, sizeof dtype);
    fb_err_clear(err);
    rc = refresh(fetch, ctx, err);
    if (!rc)
        rc = resolve_cached(spec, true, &have, err);
    return rc;
}

void srv_catcache_clear(void)
{
    pthread_mutex_lock(&cc_lock);
    cJSON *old = cc_catalog;
    cc_catalog = NULL;
    cc_refreshing = false;
    pthread_mutex_unlock(&cc_lock);
    cJSON_Delete(old);
}

uint64_t srv_catcache_fetches(void)
{
    pthread_mutex_lock(&cc_lock);
    uint64_t n = cc_fetches;
    pthread_mutex_unlock(&cc_lock);
    return n;
}
