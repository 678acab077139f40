/* db_auth: users and API tokens in PostgreSQL (migration 0005).  Only a
 * token's key id (public) and SHA-256 digest ever reach this layer. */
#ifndef DB_AUTH_H
#define DB_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"

#define DB_TOKEN_DIGEST_LEN 32
#define DB_USER_NAME_MAX    64

/* True for "viewer", "user" and "admin". */
bool db_role_valid(const char *role);

/* A new user; FB_ECONFLICT when the name is taken, FB_EINVAL for a bad name or
 * role (field says which). */
FB_MUSTCHECK fb_code db_user_add(db_conn *c, const char *name, const char *role, int64_t *id,
                                 fb_err *err);

/* Every user as a JSON array text {id, name, role, created_at, tokens} (caller frees). */
FB_MUSTCHECK fb_code db_user_list(db_conn *c, char **json, fb_err *err);

/* What `user set` changes: role (NULL = keep); quota_hours and max_running:
 * 0 = keep, < 0 = no limit, > 0 = the new limit. */
typedef struct db_user_limits {
    const char *role;
    double quota_hours;
    int max_running;
} db_user_limits;

/* Changes a user's role and limits, and whether it is held by its quota now;
 * FB_ENOTFOUND when there is no such user. */
FB_MUSTCHECK fb_code db_user_set(db_conn *c, const char *name, const db_user_limits *l,
                                 fb_err *err);

/* Each user (or only name's) as a JSON array text: name, role, max_running,
 * running, queued, fair_share_usage_hours and quota {window_hours,
 * device_hours, used_device_hours, remaining_device_hours, held_until}
 * (API-EXTENSIONS.md, "Quotas and rate limits"). */
FB_MUSTCHECK fb_code db_user_usage(db_conn *c, const char *name, char **json, fb_err *err);

typedef struct db_new_token {
    const char *user;   /* the owner's name */
    const char *key_id; /* the token's public part */
    unsigned char digest[DB_TOKEN_DIGEST_LEN];
    const char *name; /* a label, may be NULL */
    int expires_days; /* 0 = never */
} db_new_token;

/* Stores a token's digest; FB_ENOTFOUND when the user does not exist. */
FB_MUSTCHECK fb_code db_token_add(db_conn *c, const db_new_token *t, fb_err *err);

/* Tokens (of user, or all when NULL) as a JSON array text: key_id, user, name,
 * created_at, expires_at, revoked_at, last_used_at; never a digest. */
FB_MUSTCHECK fb_code db_token_list(db_conn *c, const char *user, char **json, fb_err *err);

/* Revokes the token with key_id (again is fine); FB_ENOTFOUND when none. */
FB_MUSTCHECK fb_code db_token_revoke(db_conn *c, const char *key_id, fb_err *err);

typedef struct db_token_row {
    unsigned char digest[DB_TOKEN_DIGEST_LEN];
    int64_t user_id;
    char user[DB_USER_NAME_MAX];
    char role[8];
    bool revoked, expired;
    double quota_hours; /* 0: none */
    double held_until;  /* Unix seconds the quota holds the user until; 0: not held */
} db_token_row;

/* The token with key_id and its user; FB_ENOTFOUND when none. */
FB_MUSTCHECK fb_code db_token_lookup(db_conn *c, const char *key_id, db_token_row *out,
                                     fb_err *err);

/* Records that the token with key_id was used now. */
FB_MUSTCHECK fb_code db_token_touch(db_conn *c, const char *key_id, fb_err *err);

#endif
