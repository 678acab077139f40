/* db_auth: users and API tokens (db_auth.h).  Tokens are stored as digests:
 * what arrives here is a key id and the SHA-256 of the token, never a token. */
#include "db_auth.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"

static const db_stmt st_user_add = {
    "user add", "INSERT INTO users (name, role) VALUES ($1, $2) RETURNING id", false};

static const db_stmt st_user_list = {
    "user list",
    "SELECT COALESCE(jsonb_agg(jsonb_build_object('id', u.id, 'name', u.name, 'role', u.role,"
    "  'quota_hours', u.quota_hours, 'max_running', u.max_running,"
    "  'created_at', " DB_TS(
        "u.created_at") ","
                        "  'tokens', (SELECT count(*) FROM tokens t WHERE t.user_id = u.id"
                        "    AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > "
                        "now())))"
                        "  ORDER BY u.name), '[]'::jsonb)::text FROM users u",
    true};

/* $2..$5: role, quota hours, max running ("" = leave, "none" = no limit);
 * held_until follows the new quota at once. */
static const db_stmt st_user_set = {
    "user set",
    "UPDATE users SET"
    "  role = COALESCE(NULLIF($2, ''), role),"
    "  quota_hours = CASE $3 WHEN '' THEN quota_hours WHEN 'none' THEN NULL"
    "    ELSE $3::double precision END,"
    "  max_running = CASE $4 WHEN '' THEN max_running WHEN 'none' THEN NULL"
    "    ELSE $4::integer END"
    " WHERE name = $1 RETURNING id",
    false};

static const db_stmt st_user_hold = {
    "user hold", "UPDATE users SET held_until = fb_quota_release(id, quota_hours) WHERE id = $1",
    false};

/* Each user's share, quota and queue ($1: one name, or '' for all). */
static const db_stmt st_user_usage = {
    "user usage",
    "WITH a AS (SELECT owner_id,"
    "    count(*) FILTER (WHERE state = 'running') AS running,"
    "    count(*) FILTER (WHERE state = 'queued') AS queued"
    "  FROM jobs WHERE state IN ('queued', 'running') AND owner_id IS NOT NULL"
    "  GROUP BY owner_id)"
    " SELECT COALESCE(jsonb_agg(jsonb_build_object('name', u.name, 'role', u.role,"
    "  'max_running', u.max_running, 'running', COALESCE(a.running, 0),"
    "  'queued', COALESCE(a.queued, 0),"
    "  'fair_share_usage_hours', round((f.usage / 3600)::numeric, 4),"
    "  'quota', jsonb_build_object("
    "    'window_hours', EXTRACT(EPOCH FROM fb_quota_window()) / 3600,"
    "    'device_hours', u.quota_hours,"
    "    'used_device_hours', round((q.used / 3600)::numeric, 4),"
    "    'remaining_device_hours', CASE WHEN u.quota_hours IS NOT NULL THEN"
    "      round(GREATEST(0, u.quota_hours - q.used / 3600)::numeric, 4) END,"
    "    'held_until', CASE WHEN u.held_until > now() THEN " DB_TS(
        "u.held_until") " END))"
                        "  ORDER BY u.name), '[]'::jsonb)::text"
                        " FROM users u LEFT JOIN a ON a.owner_id = u.id"
                        " CROSS JOIN LATERAL (SELECT fb_quota_used(u.id) AS used) q"
                        " CROSS JOIN LATERAL (SELECT COALESCE(sum(uu.usage * power(0.5, "
                        "EXTRACT(EPOCH FROM"
                        "    now() - uu.at) / fb_usage_half_life())), 0) AS usage"
                        "    FROM user_usage uu WHERE uu.user_id = u.id) f"
                        " WHERE $1 = '' OR u.name = $1",
    true};

static const db_stmt st_token_add = {
    "token add",
    "INSERT INTO tokens (key_id, digest, user_id, name, expires_at)"
    " SELECT $1, decode($2, 'hex'), u.id, $3,"
    "  CASE WHEN $4::integer > 0 THEN now() + $4::integer * interval '1 day' END"
    " FROM users u WHERE u.name = $5 RETURNING id",
    false};

static const db_stmt st_token_list = {
    "token list",
    "SELECT COALESCE(jsonb_agg(jsonb_build_object('key_id', t.key_id, 'user', u.name,"
    "  'name', t.name, 'created_at', " DB_TS(
        "t.created_at") ","
                        "  'expires_at', " DB_TS("t.expires_at") ", 'revoked_at', " DB_TS(
                            "t.revoked_at") ","
                                            "  'last_used_at', " DB_TS(
                                                "t.last_used_at") ") ORDER BY t.id), "
                                                                  "'[]'::jsonb)::text"
                                                                  " FROM tokens t JOIN users u ON "
                                                                  "u.id = t.user_id WHERE $1 = '' "
                                                                  "OR u.name = $1",
    true};

static const db_stmt st_token_revoke = {
    "token revoke",
    "UPDATE tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE key_id = $1 RETURNING id",
    true};

static const db_stmt st_token_lookup = {
    "token lookup",
    "SELECT encode(t.digest, 'hex'), u.id, u.name, u.role,"
    "  t.revoked_at IS NOT NULL, t.expires_at IS NOT NULL AND t.expires_at <= now(),"
    "  COALESCE(u.quota_hours, 0), COALESCE(EXTRACT(EPOCH FROM u.held_until), 0)"
    " FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.key_id = $1",
    true};

static const db_stmt st_token_touch = {
    "token touch", "UPDATE tokens SET last_used_at = now() WHERE key_id = $1", true};

bool db_role_valid(const char *role)
{
    return role && (!strcmp(role, "viewer") || !strcmp(role, "user") || !strcmp(role, "admin"));
}

fb_code db_user_add(db_conn *c, const char *name, const char *role, int64_t *id, fb_err *err)
{
    const char *params[] = {name, role};
    PGresult *res = NULL;
    fb_code rc;

    if (!db_role_valid(role))
        return fb_err_set(err, FB_EINVAL, "role", "role must be viewer, user or admin");
    rc = db_exec(c, &st_user_add, 2, params, &res, err);
    if (rc == FB_EINVAL)
        rc = fb_err_set(err, FB_EINVAL, "name",
                        "a user name is 1-63 characters: a lowercase letter, then lowercase "
                        "letters, digits, '.', '_' or '-'");
    else if (rc == FB_ECONFLICT)
        rc = fb_err_set(err, FB_ECONFLICT, "name", "there is a user named %s already", name);
    if (!rc)
        rc = db_get_i64(res, 0, 0, id, err);
    PQclear(res);
    return rc;
}

/* Runs st (one text row, one column) with params into *json. */
static fb_code json_of(db_conn *c, const db_stmt *st, int n, const char *const *params, char **json,
                       fb_err *err)
{
    PGresult *res = NULL;
    fb_code rc = db_exec(c, st, n, params, &res, err);
    *json = NULL;
    if (!rc)
        rc = db_get_text(res, 0, 0, json, err);
    PQclear(res);
    return rc;
}

fb_code db_user_list(db_conn *c, char **json, fb_err *err)
{
    return json_of(c, &st_user_list, 0, NULL, json, err);
}

fb_code db_user_set(db_conn *c, const char *name, const db_user_limits *l, fb_err *err)
{
    char quota[32] = "", running[16] = "", id_text[24];
    const char *params[] = {name, l->role ? l->role : "", quota, running};
    PGresult *res = NULL;
    int64_t id = 0;
    fb_code rc;

    if (l->role && !db_role_valid(l->role))
        return fb_err_set(err, FB_EINVAL, "role", "role must be viewer, user or admin");
    if (l->quota_hours < 0)
        snprintf(quota, sizeof quota, "none");
    else if (l->quota_hours > 0)
        snprintf(quota, sizeof quota, "%.17g", l->quota_hours);
    if (l->max_running < 0)
        snprintf(running, sizeof running, "none");
    else if (l->max_running > 0)
        snprintf(running, sizeof running, "%d", l->max_running);
    rc = db_exec(c, &st_user_set, 4, params, &res, err);
    if (!rc && PQntuples(res) == 0)
        rc = fb_err_set(err, FB_ENOTFOUND, "user", "no user named %s", name);
    if (!rc)
        rc = db_get_i64(res, 0, 0, &id, err);
    PQclear(res);
    if (rc)
        return rc;
    snprintf(id_text, sizeof id_text, "%" PRId64, id);
    params[0] = id_text;
    rc = db_exec(c, &st_user_hold, 1, params, &res, err);
    PQclear(res);
    return rc;
}

fb_code db_user_usage(db_conn *c, const char *name, char **json, fb_err *err)
{
    const char *params[] = {name ? name : ""};
    return json_of(c, &st_user_usage, 1, params, json, err);
}

fb_code db_token_add(db_conn *c, const db_new_token *t, fb_err *err)
{
    char hex[2 * DB_TOKEN_DIGEST_LEN + 1], days[16];
    const char *params[] = {t->key_id, hex, t->name ? t->name : "", days, t->user};
    PGresult *res = NULL;
    fb_code rc;

    for (int i = 0; i < DB_TOKEN_DIGEST_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", t->digest[i]);
    snprintf(days, sizeof days, "%d", t->expires_days);
    rc = db_exec(c, &st_token_add, 5, params, &res, err);
    if (!rc && PQntuples(res) == 0)
        rc = fb_err_set(err, FB_ENOTFOUND, "user", "no user named %s", t->user);
    PQclear(res);
    return rc;
}

fb_code db_token_list(db_conn *c, const char *user, char **json, fb_err *err)
{
    const char *params[] = {user ? user : ""};
    return json_of(c, &st_token_list, 1, params, json, err);
}

fb_code db_token_revoke(db_conn *c, const char *key_id, fb_err *err)
{
    const char *params[] = {key_id};
    PGresult *res = NULL;
    fb_code rc = db_exec(c, &st_token_revoke, 1, params, &res, err);
    if (!rc && PQntuples(res) == 0)
        rc = fb_err_set(err, FB_ENOTFOUND, "key_id", "no token with key id %s", key_id);
    PQclear(res);
    return rc;
}

static int hex_nibble(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

fb_code db_token_lookup(db_conn *c, const char *key_id, db_token_row *out, fb_err *err)
{
    const char *params[] = {key_id};
    PGresult *res = NULL;
    fb_code rc = db_exec(c, &st_token_lookup, 1, params, &res, err);
    const char *hex;

    memset(out, 0, sizeof *out);
    if (!rc && PQntuples(res) == 0)
        rc = fb_err_set(err, FB_ENOTFOUND, NULL, "no such token");
    if (!rc) {
        hex = PQgetvalue(res, 0, 0);
        for (int i = 0; i < DB_TOKEN_DIGEST_LEN && !rc; i++) {
            int hi = hex_nibble(hex[2 * i]), lo = hi < 0 ? -1 : hex_nibble(hex[2 * i + 1]);
            if (lo < 0)
                rc = fb_err_set(err, FB_EINTERNAL, NULL, "a stored digest is not hex");
            else
                out->digest[i] = (unsigned char)(hi << 4 | lo);
        }
    }
    if (!rc)
        rc = db_get_i64(res, 0, 1, &out->user_id, err);
    if (!rc) {
        snprintf(out->user, sizeof out->user, "%s", PQgetvalue(res, 0, 2));
        snprintf(out->role, sizeof out->role, "%s", PQgetvalue(res, 0, 3));
        out->revoked = strcmp(PQgetvalue(res, 0, 4), "t") == 0;
        out->expired = strcmp(PQgetvalue(res, 0, 5), "t") == 0;
        out->quota_hours = strtod(PQgetvalue(res, 0, 6), NULL);
        out->held_until = strtod(PQgetvalue(res, 0, 7), NULL);
    }
    PQclear(res);
    return rc;
}

fb_code db_token_touch(db_conn *c, const char *key_id, fb_err *err)
{
    const char *params[] = {key_id};
    PGresult *res = NULL;
    fb_code rc = db_exec(c, &st_token_touch, 1, params, &res, err);
    PQclear(res);
    return rc;
}
