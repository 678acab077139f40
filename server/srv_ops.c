#include "srv_ops.h"

#include "fb_log.h"

#define READYZ_WAIT_MS 1000

void srv_ops_healthz(srv_req *r)
{
    static const char ok[] = "{\"status\":\"ok\"}";
    srv_reply_text(r, 200, NULL, ok, sizeof ok - 1);
}

/* Ready when migrations are applied and a pooled connection answers SELECT 1;
 * a load balancer stops sending API traffic otherwise. */
void srv_ops_readyz(srv_req *r)
{
    static const char ready[] = "{\"status\":\"ready\"}";
    db_conn *c = NULL;
    fb_err err;
    fb_code rc;

    fb_err_clear(&err);
    if (!atomic_load(&r->srv->db_ready)) {
        srv_reply_error(r, 503, "unavailable", NULL, "database not reached or not migrated yet");
        return;
    }
    rc = srv_pool_acquire(r->srv->pool, READYZ_WAIT_MS, &c, &err);
    if (rc == FB_OK)
        rc = db_ping(c, &err);
    if (c)
        srv_pool_release(r->srv->pool, c, rc == FB_EUNAVAIL);
    if (rc) {
        fb_warn("readyz: %s", err.msg);
        srv_reply_error(r, 503, "unavailable", NULL, "the database is unavailable");
        return;
    }
    srv_reply_text(r, 200, NULL, ready, sizeof ready - 1);
}
