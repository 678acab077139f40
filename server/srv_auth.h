/* srv_auth: who is asking.
 *
 * With authentication on, every API route names the least role it needs
 * (viewer reads, user submits and manages what it owns, admin everything) and
 * a request must carry "Authorization: Bearer <token>"; health, metrics and
 * the dashboard's files need none.  Off (the embedded default on 127.0.0.1),
 * every request acts as an admin with no identity: jobs get no owner.
 *
 * A token is checked against its digest in the database, once per
 * SRV_AUTH_CACHE_MS per server (a revoked token is refused within that time at
 * most); last_used_at is written then too. */
#ifndef SRV_AUTH_H
#define SRV_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "fb_err.h"

#define SRV_AUTH_CACHE_MS    5000
#define SRV_USER_TIMEOUT_MAX 3600 /* s: a user's job runs at most this long (admins: any) */

typedef enum srv_role {
    SRV_ROLE_NONE = 0,
    SRV_ROLE_VIEWER,
    SRV_ROLE_USER,
    SRV_ROLE_ADMIN
} srv_role;

typedef struct srv_user {
    int64_t id; /* 0: nobody (authentication off) */
    char name[64];
    srv_role role;
    char key_id[16];    /* the token's public part ("" with authentication off) */
    double quota_hours; /* device-hours per rolling window; 0: no quota */
    double held_until;  /* Unix seconds its quota holds it until; 0: not held */
} srv_user;

/* "viewer" -> SRV_ROLE_VIEWER ...; SRV_ROLE_NONE for anything else. */
srv_role srv_role_parse(const char *s);
const char *srv_role_name(srv_role r);

struct srv_req;

/* Sets r->user from the request's token and checks it holds at least need;
 * false after answering 401 (no, a bad, a revoked or an expired token) or 403
 * (a role below need).  Needs r->db. */
bool srv_auth_request(struct srv_req *r, srv_role need);

/* Before a submit (POST /jobs, /suites) by a signed-in user: its quota (held
 * until the window has room: 429 quota_exceeded) and its token's submit rate
 * (rl, NULL = no limit: 429 rate_limited), each with Retry-After.  False
 * after answering. */
struct srv_ratelimit;
bool srv_auth_submit_allowed(struct srv_req *r, struct srv_ratelimit *rl);

#endif
