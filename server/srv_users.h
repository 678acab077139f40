/* srv_users: who shares the workers, and how much of them each has used:
 * GET /api/v1/users and GET /api/v1/users/me. */
#ifndef SRV_USERS_H
#define SRV_USERS_H

#include "srv_req.h"

/* {"items": [...]}: every user's role, share, quota and queue. */
void srv_users_list(srv_req *r);

/* The caller's own item; 400 when the server runs without tokens. */
void srv_users_me(srv_req *r);

#endif
