#include "srv_workloads.h"

#include <stddef.h>

/* The catalog is built from the workers' registrations each time: workers come
 * and go, and a stateless server must not cache what another server saw. */
void srv_workloads_list(srv_req *r)
{
    char *items = NULL;
    fb_err err;

    fb_err_clear(&err);
    if (db_workload_catalog(r->db, SRV_WORKER_STALE_S, &items, &err) != FB_OK) {
        srv_reply_fb_err(r, &err);
        return;
    }
    srv_reply_items(r, items);
}
