/* fusionbench-server: the REST API and the dashboard.  See usage() and docs/API.md. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "db.h"
#include "fb_log.h"
#include "srv_admin.h"
#include "srv_builtin.h"
#include "srv_http.h"
#include "srv_ratelimit.h"
#include "srv_parse.h"
#include "srv_ops.h"
#include "srv_pool.h"
#include "srv_submit.h"

#ifndef FB_WEB_DIR
#define FB_WEB_DIR "web"
#endif

#define DEFAULT_PORT                 8080
#define DEFAULT_MAX_BODY             (1024 * 1024)
#define DEFAULT_THREADS              4
#define DEFAULT_STATEMENT_TIMEOUT_MS 15000
#define MAX_THREADS                  64
#define MAX_BODY_LIMIT               (64L * 1024 * 1024)
#define DB_RETRY_FIRST_S             1
#define DB_RETRY_MAX_S               30
#define DEFAULT_SUBMIT_RATE          10.0
#define DEFAULT_SUBMIT_BURST         100
#define SRV_DRAIN_MS                 2000 /* at stop, longest wait for answers being sent */
#define DEFAULT_CLIENT_CONN_LIMIT    64
#define DEFAULT_MAX_MODEL_BYTES      (2LL << 30)  /* 2 GiB */
#define DEFAULT_MODEL_QUOTA          (20LL << 30) /* 20 GiB per user */
#define DEFAULT_MAX_STREAMS          4

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: fusionbench-server [--database-url URL] [--port N] [--bind ADDR]\n"
        "                          [--web-dir DIR] [--max-body BYTES] [--threads N]\n"
        "\n"
        "  --database-url URL  PostgreSQL URL or conninfo (default: $DATABASE_URL, else\n"
        "                      libpq's PG* environment)\n"
        "  --port N            TCP port, 0 for any free one (default: $FUSIONBENCH_PORT or %d)\n"
        "  --bind ADDR         numeric IPv4/IPv6 address to listen on (default 127.0.0.1)\n"
        "  --web-dir DIR       dashboard files (default %s)\n"
        "  --max-body BYTES    largest request body, over it 413 (default %d)\n"
        "  --threads N         HTTP threads = database connections, 1..%d (default %d),\n"
        "                      and one more connection for submits (group commit)\n"
        "  --statement-timeout-ms N  longest a request's query may run, then 503 timeout\n"
        "                      (default %d; 0 = none): no read holds a connection longer\n"
        "  --auth              API requests need a token (Authorization: Bearer), even\n"
        "                      bound to 127.0.0.1; bound elsewhere that is the default\n"
        "  --insecure-no-auth  bound elsewhere, take requests without a token anyway\n"
        "  --submit-rate R     submits per second per API token, then 429 rate_limited\n"
        "                      (default %g; 0 = no limit; with authentication on)\n"
        "  --submit-burst N    submits per token at once before the rate applies (default %d)\n"
        "  --admin-port N      also serve /healthz, /readyz and /metrics on port N (0: a\n"
        "                      free one), exempt from the client caps, for probes and\n"
        "                      scrapers (default: $FUSIONBENCH_ADMIN_PORT, else none)\n"
        "  --admin-bind ADDR   the admin listener's address (default 127.0.0.1; a pod's\n"
        "                      own address under Kubernetes)\n"
        "  --client-conn-limit N  open connections per address, and requests in flight\n"
        "                      per client, past which a request is answered 503 with\n"
        "                      Retry-After (default %d)\n"
        "  --trusted-proxies L comma-separated CIDR ranges of proxies (an ingress): from\n"
        "                      them the client is the nearest hop of X-Forwarded-For (or\n"
        "                      Forwarded) that is not a proxy; caps, logs and /metrics\n"
        "                      use it.  Anyone else's such header is ignored\n"
        "  --max-model-bytes N largest model archive a user may upload, over it 413\n"
        "                      before anything is stored (default %lld)\n"
        "  --model-quota N     bytes of model archives per user, unless an admin set the\n"
        "                      user's own (default %lld; -1 = no limit)\n"
        "  --max-streams N     model uploads and archive downloads at once, each on a\n"
        "                      database connection of its own; past it 503 (default %d)\n"
        "  --allowed-hosts L   comma-separated names the Host header must match (DNS\n"
        "                      rebinding); default $FUSIONBENCH_ALLOWED_HOSTS, else, bound\n"
        "                      to a loopback address, localhost,127.0.0.1,::1; \"\" = any\n"
        "  --help              this text\n"
        "\n"
        "Migrations are applied at start.  If the database is unreachable the server\n"
        "still starts: /healthz answers 200, /readyz and the API 503, and it retries\n"
        "with backoff (up to %d s apart) until the database answers.  SIGINT or SIGTERM\n"
        "stop it cleanly.  FUSIONBENCH_LOG=debug logs one line per request.\n",
        DEFAULT_PORT, FB_WEB_DIR, DEFAULT_MAX_BODY, MAX_THREADS, DEFAULT_THREADS,
        DEFAULT_STATEMENT_TIMEOUT_MS, DEFAULT_SUBMIT_RATE, DEFAULT_SUBMIT_BURST,
        DEFAULT_CLIENT_CONN_LIMIT, DEFAULT_MAX_MODEL_BYTES, DEFAULT_MODEL_QUOTA,
        DEFAULT_MAX_STREAMS, DB_RETRY_MAX_S);
}

static bool opt_long(const char *name, const char *s, long lo, long hi, long *out)
{
    if (srv_parse_int_range(s, lo, hi, out))
        return true;
    fprintf(stderr, "fusionbench-server: --%s must be an integer in %ld..%ld, got '%s'\n", name, lo,
            hi, s);
    return false;
}

/* A 64-bit option (byte counts past long's range on 32-bit hosts). */
static bool opt_ll(const char *name, const char *s, long long lo, long long hi, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (s[0] && end && !*end && !errno && v >= lo && v <= hi) {
        *out = v;
        return true;
    }
    fprintf(stderr, "fusionbench-server: --%s must be an integer in %lld..%lld, got '%s'\n", name,
            lo, hi, s);
    return false;
}

#define LOOPBACK_HOSTS "localhost,127.0.0.1,::1"

/* 127.0.0.0/8 or ::1: only this machine reaches the server, so a browser page
 * can reach it only through DNS rebinding, which the Host check stops. */
static bool is_loopback(const char *addr)
{
    return strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0;
}

/* Fills cfg from the environment, then the command line.  Returns 0 to run, 1 on
 * a usage error, 2 when --help was printed. */
/* What the command line sets beyond srv_config. */
typedef struct srv_args {
    bool auth_on, auth_off;
    const char *proxies;
} srv_args;

/* Applies option c (getopt_long's) with its argument: 0 to go on, 1 on a
 * usage error, 2 when --help was printed. */
static int take_opt(int c, const char *arg, srv_config *cfg, srv_args *a)
{
    long v;

    switch (c) {
    case 'd':
        cfg->database_url = arg;
        break;
    case 'b':
        cfg->bind_addr = arg;
        break;
    case 'w':
        cfg->web_dir = arg;
        break;
    case 'p':
        if (!opt_long("port", arg, 0, 65535, &v))
            return 1;
        cfg->port = (int)v;
        break;
    case 'm':
        if (!opt_long("max-body", arg, 1, MAX_BODY_LIMIT, &v))
            return 1;
        cfg->max_body = (size_t)v;
        break;
    case 't':
        if (!opt_long("threads", arg, 1, MAX_THREADS, &v))
            return 1;
        cfg->threads = (int)v;
        break;
    case 'a':
        cfg->allowed_hosts = arg;
        break;
    case 's':
        if (!opt_long("statement-timeout-ms", arg, 0, 3600000, &v))
            return 1;
        cfg->statement_timeout_ms = (int)v;
        break;
    case 'r': {
        char *end;
        cfg->submit_rate = strtod(arg, &end);
        if (end == arg || *end || !(cfg->submit_rate >= 0 && cfg->submit_rate <= 1e9)) {
            fprintf(stderr,
                    "fusionbench-server: --submit-rate must be a number in 0..1e9, got '%s'\n",
                    arg);
            return 1;
        }
        break;
    }
    case 'B':
        if (!opt_long("submit-burst", arg, 1, 1000000000, &v))
            return 1;
        cfg->submit_burst = (double)v;
        break;
    case 'P':
        if (!opt_long("admin-port", arg, 0, 65535, &v))
            return 1;
        cfg->admin_port = (int)v;
        break;
    case 'D':
        cfg->admin_bind = arg;
        break;
    case 'C':
        if (!opt_long("client-conn-limit", arg, 1, 100000, &v))
            return 1;
        cfg->client_conn_limit = (int)v;
        break;
    case 'T':
        a->proxies = arg;
        break;
    case 'M': {
        long long n;
        if (!opt_ll("max-model-bytes", arg, 1, 1LL << 40, &n))
            return 1;
        cfg->max_model_bytes = n;
        break;
    }
    case 'Q': {
        long long n;
        if (!opt_ll("model-quota", arg, -1, 1LL << 50, &n))
            return 1;
        cfg->model_quota = n;
        break;
    }
    case 'S':
        if (!opt_long("max-streams", arg, 1, 256, &v))
            return 1;
        cfg->max_streams = (int)v;
        break;
    case 'A':
        a->auth_on = true;
        break;
    case 'I':
        a->auth_off = true;
        break;
    case 'h':
        usage(stdout);
        return 2;
    default:
        usage(stderr);
        return 1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, srv_config *cfg)
{
    static const struct option opts[] = {
        {"database-url", required_argument, NULL, 'd'},
        {"port", required_argument, NULL, 'p'},
        {"bind", required_argument, NULL, 'b'},
        {"web-dir", required_argument, NULL, 'w'},
        {"max-body", required_argument, NULL, 'm'},
        {"threads", required_argument, NULL, 't'},
        {"allowed-hosts", required_argument, NULL, 'a'},
        {"statement-timeout-ms", required_argument, NULL, 's'},
        {"auth", no_argument, NULL, 'A'},
        {"insecure-no-auth", no_argument, NULL, 'I'},
        {"submit-rate", required_argument, NULL, 'r'},
        {"submit-burst", required_argument, NULL, 'B'},
        {"admin-port", required_argument, NULL, 'P'},
        {"admin-bind", required_argument, NULL, 'D'},
        {"client-conn-limit", required_argument, NULL, 'C'},
        {"trusted-proxies", required_argument, NULL, 'T'},
        {"max-model-bytes", required_argument, NULL, 'M'},
        {"model-quota", required_argument, NULL, 'Q'},
        {"max-streams", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *env_port = getenv("FUSIONBENCH_PORT"),
               *env_admin = getenv("FUSIONBENCH_ADMIN_PORT");
    srv_args a = {0};
    fb_err err;
    long v = DEFAULT_PORT;
    int c;

    *cfg = (srv_config){.database_url = getenv("DATABASE_URL"),
                        .bind_addr = "127.0.0.1",
                        .port = DEFAULT_PORT,
                        .web_dir = FB_WEB_DIR,
                        .max_body = DEFAULT_MAX_BODY,
                        .threads = DEFAULT_THREADS,
                        .statement_timeout_ms = DEFAULT_STATEMENT_TIMEOUT_MS,
                        .submit_rate = DEFAULT_SUBMIT_RATE,
                        .submit_burst = DEFAULT_SUBMIT_BURST,
                        .client_conn_limit = DEFAULT_CLIENT_CONN_LIMIT,
                        .admin_bind = "127.0.0.1",
                        .admin_port = -1,
                        .max_model_bytes = DEFAULT_MAX_MODEL_BYTES,
                        .model_quota = DEFAULT_MODEL_QUOTA,
                        .max_streams = DEFAULT_MAX_STREAMS};
    if (env_port && env_port[0]) {
        if (!opt_long("port (FUSIONBENCH_PORT)", env_port, 0, 65535, &v))
            return 1;
        cfg->port = (int)v;
    }
    if (env_admin && env_admin[0]) {
        if (!opt_long("admin-port (FUSIONBENCH_ADMIN_PORT)", env_admin, 0, 65535, &v))
            return 1;
        cfg->admin_port = (int)v;
    }
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int rc = take_opt(c, optarg, cfg, &a);
        if (rc)
            return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "fusionbench-server: unexpected argument '%s'\n", argv[optind]);
        return 1;
    }
    if (srv_proxies_parse(a.proxies, &cfg->proxies, &err) != FB_OK) {
        fprintf(stderr, "fusionbench-server: --%s: %s\n", err.field, err.msg);
        return 1;
    }
    if (a.auth_on && a.auth_off) {
        fprintf(stderr, "fusionbench-server: --auth and --insecure-no-auth contradict\n");
        return 1;
    }
    /* Off only for a server that only this machine reaches, or when asked for
     * by name: a lab's server asks every request who it is. */
    cfg->auth = a.auth_on || (!is_loopback(cfg->bind_addr) && !a.auth_off);
    if (!cfg->allowed_hosts)
        cfg->allowed_hosts = getenv("FUSIONBENCH_ALLOWED_HOSTS");
    if (!cfg->allowed_hosts && is_loopback(cfg->bind_addr))
        cfg->allowed_hosts = LOOPBACK_HOSTS;
    return 0;
}

/* The background task that brings the database up: connect, migrate, and mark
 * the server ready, retrying with backoff until it works or we stop. */
typedef struct db_init {
    srv_ctx *ctx;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool stop;
} db_init;

static fb_code connect_and_migrate(const char *url, fb_err *err)
{
    db_conn *c = NULL;
    fb_code rc = db_connect(url, &c, err);

    if (rc)
        goto out;
    /* db_migrate holds an advisory lock: servers and workers may start together. */
    rc = db_migrate(c, err);
    if (!rc)
        rc = srv_builtin_store(c, err);
out:
    if (c)
        db_close(c);
    return rc;
}

/* Sleeps delay_s unless told to stop; true when stopping. */
static bool wait_or_stop(db_init *di, int delay_s)
{
    struct timespec until;
    bool stop;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += delay_s;
    pthread_mutex_lock(&di->mu);
    while (!di->stop)
        if (pthread_cond_timedwait(&di->wake, &di->mu, &until) == ETIMEDOUT)
            break;
    stop = di->stop;
    pthread_mutex_unlock(&di->mu);
    return stop;
}

static void *db_init_main(void *arg)
{
    db_init *di = arg;
    const char *url = di->ctx->cfg.database_url ? di->ctx->cfg.database_url : "";
    int delay = DB_RETRY_FIRST_S;
    fb_err err;

    for (;;) {
        fb_err_clear(&err);
        if (connect_and_migrate(url, &err) == FB_OK) {
            atomic_store(&di->ctx->db_ready, true);
            fb_info("database ready (migrations applied, built-in catalog stored)");
            return NULL;
        }
        fb_warn("database not ready (%s: %s); retrying in %d s", fb_code_name(err.code), err.msg,
                delay);
        if (wait_or_stop(di, delay))
            return NULL;
        delay = delay * 2 > DB_RETRY_MAX_S ? DB_RETRY_MAX_S : delay * 2;
    }
}

static void log_listening(const srv_ctx *ctx)
{
    bool v6 = strchr(ctx->cfg.bind_addr, ':') != NULL;
    fb_info("authentication %s", ctx->cfg.auth ? "on: API requests need a token"
                                               : "off: every request acts as an admin");
    if (!ctx->cfg.auth && !is_loopback(ctx->cfg.bind_addr))
        fb_warn("--insecure-no-auth: anyone who reaches %s may submit, cancel and drain",
                ctx->cfg.bind_addr);
    fb_info("Host names accepted: %s", ctx->cfg.allowed_hosts && ctx->cfg.allowed_hosts[0]
                                           ? ctx->cfg.allowed_hosts
                                           : "any (--allowed-hosts unset)");
    fb_info("listening on http://%s%s%s:%d", v6 ? "[" : "", ctx->cfg.bind_addr, v6 ? "]" : "",
            ctx->bound_port);
    if (ctx->admin_daemon)
        fb_info("admin listener (/healthz, /readyz, /metrics) on http://%s%s%s:%d",
                strchr(ctx->cfg.admin_bind, ':') ? "[" : "", ctx->cfg.admin_bind,
                strchr(ctx->cfg.admin_bind, ':') ? "]" : "", ctx->admin_bound_port);
    fb_info("past %d connections per address or requests in flight per client: 503; %d "
            "trusted prox%s",
            ctx->cfg.client_conn_limit, ctx->cfg.proxies.n, ctx->cfg.proxies.n == 1 ? "y" : "ies");
}

/* Enough descriptors for the connection limits (srv_http.c): the soft limit
 * raised to the hard one, at most 65536. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
    if (rl.rlim_cur < want) {
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            fb_warn("cannot raise the open-file limit to %lu", (unsigned long)want);
    }
}

/* Serves until SIGINT or SIGTERM.  The signals are blocked in every thread
 * (the mask is inherited) and taken here with sigwait, so no handler runs in
 * the middle of libmicrohttpd or libpq. */
static int serve(srv_ctx *ctx, const sigset_t *stop_set)
{
    db_init di = {.ctx = ctx, .stop = false};
    pthread_t th;
    fb_err err;
    int sig = 0;

    fb_err_clear(&err);
    pthread_mutex_init(&di.mu, NULL);
    pthread_cond_init(&di.wake, NULL);
    raise_nofile();
    if (srv_http_start(ctx, &err) != FB_OK) {
        fb_error("%s", err.msg);
        srv_http_stop(ctx);
        return 1;
    }
    log_listening(ctx);
    if (pthread_create(&th, NULL, db_init_main, &di) != 0) {
        fb_error("cannot start the database thread");
        srv_http_stop(ctx);
        return 1;
    }
    sigwait(stop_set, &sig);
    fb_info("signal %d: stopping", sig);
    pthread_mutex_lock(&di.mu);
    di.stop = true;
    pthread_cond_signal(&di.wake);
    pthread_mutex_unlock(&di.mu);
    pthread_join(th, NULL);
    /* Submits waiting for a commit hold suspended connections, which MHD may not
     * be stopped with: the batcher creates and answers what it holds first (a
     * submit that comes later commits on its own connection); then every
     * request begun, suspended or not, gets its answer out before MHD stops. */
    srv_submit_stop(ctx->submit);
    srv_http_drain(ctx, SRV_DRAIN_MS);
    srv_http_stop(ctx);
    pthread_cond_destroy(&di.wake);
    pthread_mutex_destroy(&di.mu);
    return 0;
}

/* "fusionbench-server [--database-url URL] user|token ...": runs it and
 * returns its exit status, or -1 when argv is no admin command. */
static int admin_command(int argc, char **argv)
{
    const char *url = getenv("DATABASE_URL");
    int cmd = 1;

    if (argc > 2 && strcmp(argv[1], "--database-url") == 0) {
        url = argv[2];
        cmd = 3;
    }
    if (cmd >= argc || !srv_admin_is_command(argv[cmd]))
        return -1;
    return srv_admin_main(url, argc - cmd, argv + cmd);
}

int main(int argc, char **argv)
{
    static srv_ctx ctx;
    sigset_t stop_set;
    fb_err err;
    int rc;

    fb_log_init("server");
    fb_err_clear(&err);
    rc = admin_command(argc, argv);
    if (rc >= 0)
        return rc;
    rc = parse_args(argc, argv, &ctx.cfg);
    if (rc)
        return rc == 2 ? 0 : 2;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
    signal(SIGPIPE, SIG_IGN);
    atomic_init(&ctx.db_ready, false);
    atomic_init(&ctx.pending, 0);
    atomic_init(&ctx.unsettled, 0);
    if (srv_pool_create(ctx.cfg.database_url ? ctx.cfg.database_url : "", ctx.cfg.threads,
                        ctx.cfg.statement_timeout_ms, &ctx.pool, &err) != FB_OK) {
        fb_error("%s", err.msg);
        return 1;
    }
    /* After the signal mask: the batcher's thread must not take SIGTERM either. */
    if (srv_submit_start(ctx.cfg.database_url ? ctx.cfg.database_url : "", SRV_SUBMIT_BATCH_MAX,
                         &ctx.submit, &err) != FB_OK) {
        fb_error("%s", err.msg);
        srv_pool_destroy(ctx.pool);
        return 1;
    }
    if (ctx.cfg.auth && ctx.cfg.submit_rate > 0 &&
        !(ctx.ratelimit = srv_ratelimit_new(ctx.cfg.submit_rate, ctx.cfg.submit_burst))) {
        fb_error("out of memory");
        srv_submit_destroy(ctx.submit);
        srv_pool_destroy(ctx.pool);
        return 1;
    }
    rc = serve(&ctx, &stop_set);
    srv_ratelimit_free(ctx.ratelimit);
    srv_submit_destroy(ctx.submit);
    srv_ops_close();
    srv_pool_destroy(ctx.pool);
    fb_info("stopped");
    return rc;
}
