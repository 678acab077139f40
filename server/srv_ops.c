#include "srv_ops.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "fb_log.h"

#define READYZ_WAIT_MS 1000

void srv_ops_healthz(srv_req *r)
{
    static const char ok[] = "{\"status\":\"ok\"}";
    srv_reply_text(r, 200, NULL, ok, sizeof ok - 1);
}

/* /readyz pings on a connection of its own, not the pool's: with every pooled
 * connection busy (slow reads) the database still answers, and the server is
 * still ready.  One ping at a time; a verdict at most PING_REUSE_MS old is
 * reused, so frequent probes cost one ping. */
#define PING_REUSE_MS 250
static pthread_mutex_t ping_mu = PTHREAD_MUTEX_INITIALIZER;
static db_conn *ping_conn;
static bool ping_ok;
static int64_t ping_at_ms = -PING_REUSE_MS - 1;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Under ping_mu: SELECT 1 on ping_conn, connecting (again) when needed. */
static bool ping_locked(const char *url)
{
    fb_err err;
    fb_code rc = FB_OK;

    fb_err_clear(&err);
    if (!ping_conn) {
        rc = db_connect(url, &ping_conn, &err);
        if (!rc)
            rc = db_set_statement_timeout(ping_conn, READYZ_WAIT_MS, &err);
    }
    if (!rc)
        rc = db_ping(ping_conn, &err);
    if (rc) {
        fb_warn("readyz: %s", err.msg);
        db_close(ping_conn);
        ping_conn = NULL;
    }
    ping_ok = rc == FB_OK;
    ping_at_ms = mono_ms();
    return ping_ok;
}

/* Ready when migrations are applied and the database answers SELECT 1; a load
 * balancer stops sending API traffic otherwise. */
void srv_ops_readyz(srv_req *r)
{
    static const char ready[] = "{\"status\":\"ready\"}";
    bool ok;

    if (!atomic_load(&r->srv->db_ready)) {
        srv_reply_error(r, 503, "unavailable", NULL, "database not reached or not migrated yet");
        return;
    }
    pthread_mutex_lock(&ping_mu);
    ok = mono_ms() - ping_at_ms <= PING_REUSE_MS
             ? ping_ok
             : ping_locked(r->srv->cfg.database_url ? r->srv->cfg.database_url : "");
    pthread_mutex_unlock(&ping_mu);
    if (!ok) {
        srv_reply_error(r, 503, "unavailable", NULL, "the database is unavailable");
        return;
    }
    srv_reply_text(r, 200, NULL, ready, sizeof ready - 1);
}

void srv_ops_close(void)
{
    pthread_mutex_lock(&ping_mu);
    db_close(ping_conn);
    ping_conn = NULL;
    pthread_mutex_unlock(&ping_mu);
}
