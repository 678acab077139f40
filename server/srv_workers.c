#include "srv_workers.h"
#include "srv_parse.h"

#include <stdio.h>
#include <string.h>

/* Workers silent for SRV_WORKER_STALE_S are listed with state "lost". */
void srv_workers_list(srv_req *r)
{
    char *items = NULL;
    fb_err err;

    fb_err_clear(&err);
    if (db_worker_list(r->db, SRV_WORKER_STALE_S, &items, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    srv_reply_items(r, items);
}

void srv_workers_action(srv_req *r)
{
    char rest[512], id[128], action[16];
    fb_err err;

    if (!srv_req_cap(r, 0, rest, sizeof rest) ||
        !srv_parse_worker_action(rest, id, sizeof id, action, sizeof action) ||
        strcmp(action, "drain") != 0) {
        srv_reply_error(r, 404, "not_found", NULL,
                        "no such route (POST /api/v1/workers/{id}/drain)");
        return;
    }
    fb_err_clear(&err);
    if (db_worker_drain(r->db, id, SRV_WORKER_STALE_S, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    if (o && (!cJSON_AddStringToObject(o, "id", id) || !cJSON_AddBoolToObject(o, "draining", 1))) {
        cJSON_Delete(o);
        o = NULL;
    }
    srv_reply_json(r, 202, o);
}
