#include "srv_workers.h"

#include <stddef.h>

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
