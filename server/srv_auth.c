/* srv_auth: see srv_auth.h. */
#include "srv_auth.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "db_auth.h"
#include "fb_log.h"
#include "srv_req.h"
#include "srv_ratelimit.h"
#include "srv_token.h"

#define CACHE_SLOTS 256

/* A token checked against the database lately: its row, keyed by key id. */
typedef struct cache_entry {
    char key_id[SRV_TOKEN_KEYID_LEN + 1];
    db_token_row row;
    int64_t checked_ms;
} cache_entry;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static cache_entry cache[CACHE_SLOTS];

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static unsigned slot_of(const char *key_id)
{
    unsigned h = 2166136261u;
    for (const char *p = key_id; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h % CACHE_SLOTS;
}

srv_role srv_role_parse(const char *s)
{
    if (!s)
        return SRV_ROLE_NONE;
    if (strcmp(s, "viewer") == 0)
        return SRV_ROLE_VIEWER;
    if (strcmp(s, "user") == 0)
        return SRV_ROLE_USER;
    if (strcmp(s, "admin") == 0)
        return SRV_ROLE_ADMIN;
    return SRV_ROLE_NONE;
}

const char *srv_role_name(srv_role r)
{
    static const char *const names[] = {"none", "viewer", "user", "admin"};
    return r >= SRV_ROLE_NONE && r <= SRV_ROLE_ADMIN ? names[r] : "none";
}

/* The token's row: from the cache when checked within SRV_AUTH_CACHE_MS, else
 * from the database (and then last_used_at is written). */
static fb_code token_row(srv_req *r, const char *key_id, db_token_row *row, fb_err *err)
{
    unsigned s = slot_of(key_id);
    int64_t now = now_ms();
    fb_code rc;
    fb_err touch_err;

    pthread_mutex_lock(&cache_mu);
    bool hit =
        strcmp(cache[s].key_id, key_id) == 0 && now - cache[s].checked_ms < SRV_AUTH_CACHE_MS;
    if (hit)
        *row = cache[s].row;
    pthread_mutex_unlock(&cache_mu);
    if (hit)
        return FB_OK;
    rc = db_token_lookup(r->db, key_id, row, err);
    if (rc)
        return rc;
    fb_err_clear(&touch_err);
    if (db_token_touch(r->db, key_id, &touch_err) != FB_OK)
        fb_debug("token %s: last use not recorded: %s", key_id, touch_err.msg);
    pthread_mutex_lock(&cache_mu);
    snprintf(cache[s].key_id, sizeof cache[s].key_id, "%s", key_id);
    cache[s].row = *row;
    cache[s].checked_ms = now;
    pthread_mutex_unlock(&cache_mu);
    return FB_OK;
}

static bool unauthenticated(srv_req *r, const char *why)
{
    srv_reply_error(r, 401, "unauthenticated", NULL, "%s", why);
    srv_reply_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"fusionbench\"");
    return false;
}

bool srv_auth_request(srv_req *r, srv_role need)
{
    const char *header =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    char key_id[SRV_TOKEN_KEYID_LEN + 1];
    db_token_row row;
    size_t len = 0;
    const char *token = srv_token_from_header(header, &len);
    fb_err err;
    fb_code rc;

    if (!token)
        return unauthenticated(r, "this server needs an API token: Authorization: Bearer "
                                  "<token> (fusionbench-server token create USER)");
    if (!srv_token_parse(token, len, key_id))
        return unauthenticated(r, "that is not a FusionBench API token");
    fb_err_clear(&err);
    rc = token_row(r, key_id, &row, &err);
    if (rc == FB_ENOTFOUND || (!rc && !srv_token_matches(token, len, row.digest)))
        return unauthenticated(r, "unknown or wrong API token");
    if (rc) {
        srv_reply_fb_err(r, &err);
        return false;
    }
    if (row.revoked)
        return unauthenticated(r, "this API token was revoked");
    if (row.expired)
        return unauthenticated(r, "this API token has expired");
    r->user.id = row.user_id;
    snprintf(r->user.name, sizeof r->user.name, "%s", row.user);
    r->user.role = srv_role_parse(row.role);
    snprintf(r->user.key_id, sizeof r->user.key_id, "%s", key_id);
    r->user.quota_hours = row.quota_hours;
    r->user.held_until = row.held_until;
    if (r->user.role < need) {
        srv_reply_error(r, 403, "forbidden", NULL, "%s needs the role %s; %s is %s", r->path,
                        srv_role_name(need), r->user.name, srv_role_name(r->user.role));
        return false;
    }
    return true;
}

/* Retry-After: whole seconds, at least 1. */
static void retry_after(srv_req *r, double seconds)
{
    char text[24];
    snprintf(text, sizeof text, "%.0f", seconds < 1 ? 1 : ceil(seconds));
    srv_reply_header(r, MHD_HTTP_HEADER_RETRY_AFTER, text);
}

bool srv_auth_submit_allowed(srv_req *r, srv_ratelimit *rl)
{
    struct timespec wall, mono;
    double now, wait;

    if (r->user.id == 0)
        return true;
    clock_gettime(CLOCK_REALTIME, &wall);
    now = (double)wall.tv_sec + wall.tv_nsec * 1e-9;
    if (r->user.held_until > now) {
        time_t until = (time_t)r->user.held_until;
        struct tm tm;
        char at[32];
        gmtime_r(&until, &tm);
        strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
        srv_reply_error(r, 429, "quota_exceeded", NULL,
                        "%s has used its %g device-hours of the last 24 hours; queued jobs "
                        "wait, and new ones are taken again from %s",
                        r->user.name, r->user.quota_hours, at);
        retry_after(r, r->user.held_until - now);
        return false;
    }
    if (!rl)
        return true;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    wait = srv_ratelimit_take(rl, r->user.key_id, (double)mono.tv_sec + mono.tv_nsec * 1e-9);
    if (wait > 0) {
        srv_reply_error(r, 429, "rate_limited", NULL,
                        "too many submits with this token; retry in %.0f s (a suite submits "
                        "many jobs in one request)",
                        wait < 1 ? 1 : ceil(wait));
        retry_after(r, wait);
        return false;
    }
    return true;
}
