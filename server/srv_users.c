/* srv_users: see srv_users.h; the fields are db_user_usage's. */
#include "srv_users.h"

#include <stdlib.h>
#include <string.h>

#include "db_auth.h"

void srv_users_list(srv_req *r)
{
    char *items = NULL;
    fb_err err;

    fb_err_clear(&err);
    if (db_user_usage(r->db, NULL, &items, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    srv_reply_items(r, items);
}

void srv_users_me(srv_req *r)
{
    char *items = NULL;
    cJSON *arr, *me;
    fb_err err;

    if (r->user.id == 0) {
        srv_reply_error(r, 400, "invalid_argument", NULL,
                        "users/me needs a signed-in user: this server runs without tokens");
        return;
    }
    fb_err_clear(&err);
    if (db_user_usage(r->db, r->user.name, &items, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    arr = cJSON_Parse(items);
    free(items);
    me = cJSON_DetachItemFromArray(arr, 0);
    cJSON_Delete(arr);
    if (!me) {
        srv_reply_error(r, 404, "not_found", NULL, "user %s is gone", r->user.name);
        return;
    }
    srv_reply_json(r, 200, me);
}
