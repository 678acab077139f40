/* fusionbench: the command-line client of the FusionBench server (docs/API.md,
 * docs/API-EXTENSIONS.md).  Exit status: 0 ok, 1 a job or a variant failed or
 * was canceled, 2 bad usage, 3 the server refused, failed or could not be
 * reached, 130 interrupted while waiting (the job goes on). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cl_args.h"
#include "cl_config.h"
#include "cl_fmt.h"
#include "cl_http.h"
#include "cl_url.h"
#include "fb_git_sha.h"
#include "fb_table.h"

#define EXIT_JOB    1
#define EXIT_USAGE  2
#define EXIT_SERVER 3
#define EXIT_INTR   130

#define DEFAULT_URL "http://127.0.0.1:8080"

typedef struct cl_ctx {
    cl_args a;
    bool json;
    char server[CL_CONFIG_URL_MAX];
    char token[CL_CONFIG_TOKEN_MAX];
    char cfg_dir[CL_CONFIG_PATH_MAX];
} cl_ctx;

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    interrupted = 1;
}

static void say(const char *fmt, ...) FB_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fusionbench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int usage_error(const cl_args *a, const fb_err *err)
{
    if (err->field[0] && !strstr(err->msg, err->field))
        say("%s: %s", err->field, err->msg);
    else
        say("%s", err->msg);
    fputs(cl_usage(a->cmd), stderr);
    return EXIT_USAGE;
}

/* ---- requests ---- */

/* Sends the request; 0 with resp filled whatever the status, else EXIT_SERVER
 * (said why).  resp is freed by the caller in every case. */
static int send_req(const cl_ctx *c, const char *method, const cl_url *u, const char *body,
                    cl_http_resp *resp)
{
    fb_err err;

    fb_err_clear(&err);
    if (cl_url_done(u, &err) != FB_OK) {
        say("%s", err.msg);
        memset(resp, 0, sizeof *resp);
        return EXIT_SERVER;
    }
    if (cl_http_request(method, u->s, c->token, body, resp, &err) != FB_OK) {
        if (strcmp(err.msg, "interrupted") != 0)
            say("cannot reach the server: %s", err.msg);
        return interrupted ? EXIT_INTR : EXIT_SERVER;
    }
    return 0;
}

static void say_api_error(const cl_http_resp *resp)
{
    char msg[1024];

    cl_fmt_api_error(msg, sizeof msg, resp->status, resp->body);
    if (resp->retry_after[0])
        say("server: %s (retry after %s s)", msg, resp->retry_after);
    else
        say("server: %s", msg);
}

/* A 2xx answer parsed as JSON into *out; else EXIT_SERVER (said why). */
static int answer_json(const cl_http_resp *resp, cJSON **out)
{
    *out = NULL;
    if (resp->status < 200 || resp->status > 299) {
        say_api_error(resp);
        return EXIT_SERVER;
    }
    *out = cJSON_ParseWithLength(resp->body, resp->len);
    if (!*out) {
        say("the server's answer is not JSON (HTTP %ld)", resp->status);
        return EXIT_SERVER;
    }
    return 0;
}

/* One call: send, check, parse.  *out is the caller's to delete. */
static int call(const cl_ctx *c, const char *method, const cl_url *u, const char *body,
                cl_http_resp *resp, cJSON **out)
{
    int rc = send_req(c, method, u, body, resp);
    *out = NULL;
    return rc ? rc : answer_json(resp, out);
}

static void print_raw(const cl_http_resp *resp)
{
    fwrite(resp->body, 1, resp->len, stdout);
    if (resp->len == 0 || resp->body[resp->len - 1] != '\n')
        putchar('\n');
}

/* ---- jobs ---- */

static const char *job_state(const cJSON *job)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(job, "state");
    return cJSON_IsString(s) ? s->valuestring : "?";
}

static bool terminal(const char *state)
{
    return strcmp(state, "succeeded") == 0 || strcmp(state, "failed") == 0 ||
           strcmp(state, "canceled") == 0;
}

/* The job's spec and result decoded (fb_spec_free, fb_result_free both in
 * every case); false when the job has no result or either does not decode
 * (said why when say_why). */
static bool job_typed(const cJSON *job, fb_spec *spec, fb_result *r, bool say_why)
{
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(job, "result");
    fb_err err;

    fb_spec_init(spec);
    fb_result_init(r);
    if (!cJSON_IsObject(res))
        return false;
    if (fb_spec_from_json(cJSON_GetObjectItemCaseSensitive(job, "spec"), spec, &err) != FB_OK ||
        fb_result_from_json(res, r, &err) != FB_OK) {
        if (say_why)
            say("the server's job does not decode: %s", err.msg);
        return false;
    }
    return true;
}

/* 0 when the job succeeded with every variant ok, or is still going; else 1
 * (a succeeded job whose result does not decode too: said why). */
static int job_exit(const cJSON *job)
{
    const char *st = job_state(job);
    fb_spec spec;
    fb_result r;
    bool ok;

    if (strcmp(st, "succeeded") != 0)
        return strcmp(st, "failed") == 0 || strcmp(st, "canceled") == 0 ? EXIT_JOB : 0;
    ok = job_typed(job, &spec, &r, true) && fb_table_all_ok(&r);
    fb_spec_free(&spec);
    fb_result_free(&r);
    return ok ? 0 : EXIT_JOB;
}

/* The job as text: a summary, then the result table once there is one. */
static void print_job(FILE *f, const cJSON *job)
{
    bool done = strcmp(job_state(job), "succeeded") == 0;
    fb_spec spec;
    fb_result r;
    bool typed = job_typed(job, &spec, &r, false); /* job_exit says why not */

    if (!typed || !done)
        cl_fmt_job_summary(f, job);
    if (typed)
        fb_table_print(f, &spec, &r);
    fb_spec_free(&spec);
    fb_result_free(&r);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleeps s seconds unless interrupted first. */
static void nap(double s)
{
    double end = now_s() + s;
    while (!interrupted && now_s() < end) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void watch_signals(bool on)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on ? on_sigint : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    cl_http_set_interrupt(on ? &interrupted : NULL);
}

/* Answers worth another poll: the server is busy or restarting. */
static bool transient(long status)
{
    return status == 429 || status == 502 || status == 503 || status == 504;
}

typedef struct waiter {
    bool tty;
    double t0, delay;
    char last_key[256];
    int failures;
} waiter;

/* Shows one poll's job on stderr: the live bar on a terminal, a line per change
 * of state or phase otherwise.  A change polls again soon. */
static void show_poll(waiter *w, const cJSON *job)
{
    char key[256], line[512];
    double el = now_s() - w->t0;

    cl_fmt_state_key(key, sizeof key, job);
    if (strcmp(key, w->last_key) != 0) {
        snprintf(w->last_key, sizeof w->last_key, "%s", key);
        w->delay = 0.2;
        if (!w->tty) {
            cl_fmt_state_line(line, sizeof line, job, el);
            fprintf(stderr, "%s\n", line);
        }
    }
    if (w->tty) {
        cl_fmt_progress(line, sizeof line, job, el);
        fprintf(stderr, "\r%s\x1b[K", line);
    }
    fflush(stderr);
}

/* One poll of url; 0 with *job set, -1 to poll again, else an exit status. */
static int poll_once(const cl_ctx *c, waiter *w, const cl_url *u, cl_http_resp *resp, cJSON **job)
{
    int rc = send_req(c, "GET", u, NULL, resp);

    *job = NULL;
    if (rc == EXIT_SERVER && !interrupted && ++w->failures < 5)
        return -1;
    if (rc)
        return rc;
    if (transient(resp->status) && ++w->failures < 5)
        return -1;
    rc = answer_json(resp, job);
    if (rc == 0)
        w->failures = 0;
    return rc;
}

/* One poll's verdict: show what the poll found; true when the thing ended. */
typedef bool (*poll_step)(waiter *w, const cJSON *obj, void *ud);

/* Polls path/id (0.2 s, growing to 2 s) until step says it ended, a poll
 * fails for good, or Ctrl-C (which stops the waiting, not the job); leaves the
 * last answer in *resp and *obj and the bar cleared.  Returns 0 or an exit
 * status. */
static int poll_until(const cl_ctx *c, waiter *w, const char *path, const char *id, poll_step step,
                      void *ud, cl_http_resp *resp, cJSON **obj)
{
    cl_url u;
    int rc;

    cl_url_init(&u, c->server, path);
    cl_url_seg(&u, id);
    watch_signals(true);
    for (;;) {
        cl_http_resp_free(resp);
        cJSON_Delete(*obj);
        rc = poll_once(c, w, &u, resp, obj);
        if (rc > 0 || interrupted)
            break;
        if (rc == 0 && step(w, *obj, ud))
            break;
        nap(w->delay);
        w->delay = w->delay * 1.5 > 2.0 ? 2.0 : w->delay * 1.5;
    }
    watch_signals(false);
    if (w->tty)
        fputs("\r\x1b[K", stderr);
    return rc;
}

static bool job_step(waiter *w, const cJSON *job, void *ud)
{
    (void)ud;
    show_poll(w, job);
    return terminal(job_state(job));
}

/* Polls the job until it ends (0.2 s, growing to 2 s); Ctrl-C stops the
 * waiting, not the job.  Prints the end as asked; returns the exit status. */
static int wait_job(const cl_ctx *c, const char *id)
{
    waiter w = {.tty = isatty(STDERR_FILENO) == 1, .t0 = now_s(), .delay = 0.2};
    cl_http_resp resp = {0};
    cJSON *job = NULL;
    int rc = poll_until(c, &w, "/api/v1/jobs", id, job_step, NULL, &resp, &job);
    if (interrupted) {
        say("stopped waiting; job %s goes on (not canceled). Resume with: fusionbench status %s "
            "--wait",
            id, id);
        rc = EXIT_INTR;
    } else if (rc == 0) {
        char line[512];
        if (w.tty) { /* the bar is gone: say how it ended (a non-tty has its line) */
            cl_fmt_state_line(line, sizeof line, job, now_s() - w.t0);
            fprintf(stderr, "%s\n", line);
        }
        if (c->json)
            print_raw(&resp);
        else
            print_job(stdout, job);
        rc = job_exit(job);
    }
    cJSON_Delete(job);
    cl_http_resp_free(&resp);
    return rc;
}

/* POSTs body (NULL: out of memory) to path; the created thing's JSON into
 * *obj and its id as text into id (32 bytes).  0 or an exit status. */
/* Whether a submit whose answer was lost or refused for a while is worth
 * sending again (with its key): the server could not be reached or timed
 * out, or answered 502, 503 or 504. */
static bool retryable(fb_code rc, long status)
{
    return rc == FB_EUNAVAIL || (rc == FB_ETIMEOUT && !interrupted) ||
           (rc == FB_OK && (status == 502 || status == 503 || status == 504));
}

/* How long to wait before try t + 1: the server's Retry-After (up to a
 * minute) or 1, 2, 4, 8 s, whichever is longer, less a random part of up to
 * half, so that the clients of a burst refused together do not come back
 * together. */
static unsigned retry_delay_ms(const cl_http_resp *resp, int t)
{
    unsigned ms = 1000u << (t - 1 < 3 ? t - 1 : 3);
    long after = resp->retry_after[0] ? strtol(resp->retry_after, NULL, 10) : 0;

    if (after > 0 && after <= 60 && (unsigned)after * 1000 > ms)
        ms = (unsigned)after * 1000;
    return ms - (unsigned)(random() % (ms / 2 + 1));
}

/* POSTs a new job or suite with a fresh Idempotency-Key, sending it again
 * with the same key (at most SUBMIT_TRIES times, retry_delay_ms apart) while
 * the answer is lost or the server is unavailable or over a cap (503): the
 * server makes it once (docs/API-EXTENSIONS.md, "Idempotent submits"). */
#define SUBMIT_TRIES 8
static int post_keyed(const cl_ctx *c, const cl_url *u, const char *body, cl_http_resp *resp,
                      cJSON **obj)
{
    char key[33];
    fb_err err;
    fb_code rc;

    fb_err_clear(&err);
    *obj = NULL;
    memset(resp, 0, sizeof *resp);
    if (cl_url_done(u, &err) != FB_OK || cl_http_new_key(key, &err) != FB_OK) {
        say("%s", err.msg);
        return EXIT_SERVER;
    }
    srandom((unsigned)time(NULL) ^ (unsigned)getpid() << 16);
    for (int t = 1;; t++) {
        cl_http_resp_free(resp);
        fb_err_clear(&err);
        rc = cl_http_request_key("POST", u->s, c->token, body, key, resp, &err);
        if (t >= SUBMIT_TRIES || !retryable(rc, resp->status))
            break;
        unsigned ms = retry_delay_ms(resp, t);
        say("%s; sending it again in %.1f s (%d of %d, Idempotency-Key %s)",
            rc                    ? err.msg
            : resp->status == 503 ? "the server is busy or unavailable (503)"
                                  : "the server is unavailable",
            ms / 1000.0, t + 1, SUBMIT_TRIES, key);
        struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
        while (nanosleep(&d, &d) != 0 && !interrupted)
            ;
        if (interrupted)
            return EXIT_INTR;
    }
    if (rc) {
        if (strcmp(err.msg, "interrupted") != 0)
            say("cannot reach the server: %s", err.msg);
        return interrupted ? EXIT_INTR : EXIT_SERVER;
    }
    return answer_json(resp, obj);
}

static int post_new(const cl_ctx *c, const char *path, const char *body, const char *what,
                    cl_http_resp *resp, cJSON **obj, char id[32])
{
    cl_url u;
    int rc;

    if (!body)
        return EXIT_SERVER;
    cl_url_init(&u, c->server, path);
    rc = post_keyed(c, &u, body, resp, obj);
    if (rc)
        return rc;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(*obj, "id");
    if (!cJSON_IsNumber(v)) {
        say("the server's answer has no %s id", what);
        return EXIT_SERVER;
    }
    snprintf(id, 32, "%.0f", v->valuedouble);
    return 0;
}

static int cmd_submit(cl_ctx *c)
{
    cl_http_resp resp = {0};
    cJSON *spec = NULL, *job = NULL;
    char *body = NULL, id[32];
    fb_err err;
    int rc;

    fb_err_clear(&err);
    if (cl_args_job_spec(&c->a, &spec, &err) != FB_OK)
        return usage_error(&c->a, &err);
    body = cJSON_PrintUnformatted(spec);
    rc = post_new(c, "/api/v1/jobs", body, "job", &resp, &job, id);
    if (rc)
        goto out;
    if (c->a.set[CL_O_WAIT]) {
        fprintf(stderr, "job %s queued\n", id);
        rc = wait_job(c, id);
    } else if (c->json) {
        print_raw(&resp);
    } else {
        printf("%s\n", id);
    }
out:
    free(body);
    cJSON_Delete(spec);
    cJSON_Delete(job);
    cl_http_resp_free(&resp);
    return rc;
}

static int check_id(const cl_ctx *c, const char *id);

/* An explanation's answer ended: 200 with one. */
static bool explained(waiter *w, const cJSON *ans, void *ud)
{
    (void)ud;
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(ans, "explain");
    if (!w->tty && !cJSON_IsObject(ex)) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(ans, "state");
        const char *s = cJSON_IsString(st) ? st->valuestring : "?";
        if (strcmp(s, w->last_key) != 0) {
            snprintf(w->last_key, sizeof w->last_key, "%s", s);
            fprintf(stderr, "explaining: %s\n", s);
        }
    }
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(ans, "state");
    return cJSON_IsObject(ex) || (cJSON_IsString(st) && terminal(st->valuestring));
}

/* fusionbench explain ID [--request] [--wait]: GET (after POST with
 * --request) /jobs/ID/explain; the explanation's table, or the JSON. */
static int cmd_explain(cl_ctx *c)
{
    const char *id = c->a.pos[0];
    cl_http_resp resp = {0};
    cJSON *ans = NULL;
    char path[96];
    cl_url u;
    int rc = check_id(c, id);

    if (rc)
        return rc;
    snprintf(path, sizeof path, "/api/v1/jobs/%s/explain", id);
    if (c->a.set[CL_O_REQUEST]) {
        cl_url_init(&u, c->server, path);
        rc = call(c, "POST", &u, NULL, &resp, &ans);
        const cJSON *jid = ans ? cJSON_GetObjectItemCaseSensitive(ans, "id") : NULL;
        if (rc == 0 && cJSON_IsNumber(jid))
            fprintf(stderr, "job %s is explained by job %.0f\n", id, jid->valuedouble);
        cJSON_Delete(ans);
        ans = NULL;
        cl_http_resp_free(&resp);
        if (rc)
            return rc;
    }
    if (c->a.set[CL_O_WAIT]) {
        waiter w = {.tty = false, .t0 = now_s(), .delay = 0.5};
        snprintf(path, sizeof path, "/api/v1/jobs/%s", id);
        rc = poll_until(c, &w, path, "explain", explained, NULL, &resp, &ans);
    } else {
        cl_url_init(&u, c->server, path);
        rc = call(c, "GET", &u, NULL, &resp, &ans);
    }
    if (rc == 0) {
        const cJSON *ex = cJSON_GetObjectItemCaseSensitive(ans, "explain");
        if (c->json)
            print_raw(&resp);
        else if (cJSON_IsObject(ex))
            fb_table_explain(stdout, ex);
        else
            cl_fmt_job_summary(stdout, ans);
        rc = cJSON_IsObject(ex) ? 0 : EXIT_JOB;
    }
    cJSON_Delete(ans);
    cl_http_resp_free(&resp);
    return rc;
}

static int check_id(const cl_ctx *c, const char *id)
{
    fb_err err;

    if (cl_id_valid(id))
        return 0;
    fb_err_set(&err, FB_EINVAL, id, "not a job id (a positive whole number)");
    return usage_error(&c->a, &err);
}

/* Adds ?key=value for a valued option that was given. */
static void query_opt(cl_url *u, const cl_args *a, cl_opt o, const char *key)
{
    if (a->set[o])
        cl_url_query(u, key, a->val[o]);
}

static int check_limit(const cl_ctx *c)
{
    fb_err err;
    int n;

    if (c->a.set[CL_O_LIMIT] && cl_args_int(&c->a, CL_O_LIMIT, 1, 1000, &n, &err) != FB_OK)
        return usage_error(&c->a, &err);
    return 0;
}

/* The list's URL, owner=me unless --all or fallback. */
static void jobs_url(const cl_ctx *c, cl_url *u, bool mine)
{
    cl_url_init(u, c->server, "/api/v1/jobs");
    if (mine)
        cl_url_query(u, "owner", "me");
    query_opt(u, &c->a, CL_O_STATE, "state");
    query_opt(u, &c->a, CL_O_WORKLOAD, "workload");
    query_opt(u, &c->a, CL_O_LIMIT, "limit");
}

/* 400 on "owner": the server runs without tokens (API-EXTENSIONS.md). */
static bool owner_refused(const cl_http_resp *resp)
{
    cJSON *root = resp->status == 400 ? cJSON_Parse(resp->body) : NULL;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "field");
    bool yes = cJSON_IsString(f) && strcmp(f->valuestring, "owner") == 0;
    cJSON_Delete(root);
    return yes;
}

static int cmd_jobs(cl_ctx *c)
{
    bool mine = !c->a.set[CL_O_ALL];
    cl_http_resp resp = {0};
    cJSON *list = NULL;
    cl_url u;
    int rc = check_limit(c);

    if (rc)
        return rc;
    jobs_url(c, &u, mine);
    rc = send_req(c, "GET", &u, NULL, &resp);
    if (rc == 0 && mine && owner_refused(&resp)) {
        say("the server runs without authentication: listing all jobs");
        cl_http_resp_free(&resp);
        jobs_url(c, &u, false);
        rc = send_req(c, "GET", &u, NULL, &resp);
    }
    if (rc == 0)
        rc = answer_json(&resp, &list);
    if (rc == 0 && c->json)
        print_raw(&resp);
    else if (rc == 0)
        cl_fmt_jobs(stdout, list);
    cJSON_Delete(list);
    cl_http_resp_free(&resp);
    return rc;
}

/* ---- views: one request, its answer printed ---- */

/* --limit, then the filters the history takes. */
static int results_query(const cl_ctx *c, cl_url *u)
{
    int rc = check_limit(c);

    if (rc)
        return rc;
    cl_url_query(u, "points", "1");
    query_opt(u, &c->a, CL_O_WORKLOAD, "workload");
    query_opt(u, &c->a, CL_O_DEVICE, "device");
    query_opt(u, &c->a, CL_O_VARIANT, "variant");
    query_opt(u, &c->a, CL_O_LIMIT, "limit");
    return 0;
}

/* A and B: jobs (12) or suites (suite:3). */
static int compare_query(const cl_ctx *c, cl_url *u)
{
    char a[64], b[64];
    fb_err err;

    fb_err_clear(&err);
    if (cl_compare_ref(c->a.pos[0], a, sizeof a, &err) != FB_OK ||
        cl_compare_ref(c->a.pos[1], b, sizeof b, &err) != FB_OK)
        return usage_error(&c->a, &err);
    cl_url_query(u, "a", a);
    cl_url_query(u, "b", b);
    return 0;
}

static void print_canceled(FILE *f, const cJSON *job)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(job, "id");

    fprintf(f, "job %.0f: %s%s\n", cJSON_IsNumber(id) ? id->valuedouble : 0.0, job_state(job),
            strcmp(job_state(job), "running") == 0 ? " (its worker stops it)" : "");
}

/* A command that reads or changes one resource: its id checked (when it
 * takes one), its URL built, one request, the answer printed (as the server
 * sent it with --json), an exit status from it. */
typedef struct cl_view {
    const char *method, *base;                    /* "GET", "/api/v1/jobs" */
    bool id;                                      /* pos[0] is an id, appended to base */
    const char *action;                           /* a segment after the id ("cancel"), or NULL */
    int (*query)(const cl_ctx *c, cl_url *u);     /* checks, adds the query; or NULL */
    void (*print)(FILE *f, const cJSON *doc);     /* the human form */
    int (*exit_of)(const cJSON *doc);             /* NULL: 0 */
    int (*wait)(const cl_ctx *c, const char *id); /* --wait polls instead; or NULL */
} cl_view;

static int run_view(const cl_ctx *c, const cl_view *v)
{
    const char *id = v->id ? c->a.pos[0] : NULL;
    cl_http_resp resp = {0};
    cJSON *doc = NULL;
    cl_url u;
    int rc = id ? check_id(c, id) : 0;

    if (rc)
        return rc;
    if (v->wait && c->a.set[CL_O_WAIT])
        return v->wait(c, id);
    cl_url_init(&u, c->server, v->base);
    if (id)
        cl_url_seg(&u, id);
    if (v->action)
        cl_url_seg(&u, v->action);
    if (v->query && (rc = v->query(c, &u)) != 0)
        return rc;
    rc = call(c, v->method, &u, NULL, &resp, &doc);
    if (rc == 0 && c->json)
        print_raw(&resp);
    else if (rc == 0)
        v->print(stdout, doc);
    if (rc == 0 && v->exit_of)
        rc = v->exit_of(doc);
    cJSON_Delete(doc);
    cl_http_resp_free(&resp);
    return rc;
}

/* ---- suites ---- */

static double suite_num(const cJSON *suite, const char *a, const char *b)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(suite, a);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, b);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* 1 when a job of the suite failed or was canceled. */
static int suite_exit(const cJSON *suite)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(suite, "progress"), "states");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(st, "failed");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(st, "canceled");

    return (cJSON_IsNumber(f) && f->valuedouble > 0) || (cJSON_IsNumber(k) && k->valuedouble > 0)
               ? EXIT_JOB
               : 0;
}

static bool suite_done(const cJSON *suite)
{
    double done = suite_num(suite, "progress", "done"),
           total = suite_num(suite, "progress", "total");
    return total >= 0 && done >= total;
}

/* A suite's progress while waited for: a line when it moves (on a tty, the
 * same line redrawn). */
typedef struct suite_poll {
    const char *id;
    double last_done;
} suite_poll;

static bool suite_step(waiter *w, const cJSON *suite, void *ud)
{
    suite_poll *p = ud;
    double done = suite_num(suite, "progress", "done");

    if (done != p->last_done || w->tty) {
        fprintf(stderr,
                w->tty ? "\rsuite %s: %.0f/%.0f done (%.1f s)\x1b[K"
                       : "suite %s: %.0f/%.0f done (%.1f s)\n",
                p->id, done, suite_num(suite, "progress", "total"), now_s() - w->t0);
        if (done != p->last_done)
            w->delay = 0.2;
        p->last_done = done;
    }
    return suite_done(suite);
}

static int wait_suite(const cl_ctx *c, const char *id)
{
    waiter w = {.tty = isatty(STDERR_FILENO) == 1, .t0 = now_s(), .delay = 0.2};
    cl_http_resp resp = {0};
    cJSON *suite = NULL;
    suite_poll p = {.id = id, .last_done = -2};
    int rc;

    rc = poll_until(c, &w, "/api/v1/suites", id, suite_step, &p, &resp, &suite);
    if (interrupted) {
        say("stopped waiting; suite %s goes on (not canceled). See it with: fusionbench suite "
            "show %s",
            id, id);
        rc = EXIT_INTR;
    } else if (rc == 0) {
        if (c->json)
            print_raw(&resp);
        else
            cl_fmt_suite(stdout, suite);
        rc = suite_exit(suite);
    }
    cJSON_Delete(suite);
    cl_http_resp_free(&resp);
    return rc;
}

static int cmd_suite_submit(cl_ctx *c)
{
    cl_http_resp resp = {0};
    cJSON *body = NULL, *suite = NULL;
    char *text = NULL, id[32];
    fb_err err;
    int rc;

    fb_err_clear(&err);
    if (cl_args_suite(&c->a, &body, &err) != FB_OK)
        return usage_error(&c->a, &err);
    text = cJSON_PrintUnformatted(body);
    rc = post_new(c, "/api/v1/suites", text, "suite", &resp, &suite, id);
    if (rc)
        goto out;
    if (c->a.set[CL_O_WAIT]) {
        fprintf(stderr, "suite %s queued (%.0f jobs)\n", id, suite_num(suite, "progress", "total"));
        rc = wait_suite(c, id);
    } else if (c->json) {
        print_raw(&resp);
    } else {
        printf("%s\n", id);
    }
out:
    free(text);
    cJSON_Delete(body);
    cJSON_Delete(suite);
    cl_http_resp_free(&resp);
    return rc;
}

/* ---- login ---- */

/* Reads one line of stdin into buf: without echo after a prompt on a terminal. */
static int read_token(const char *url, bool force_stdin, char *buf, size_t cap)
{
    bool tty = !force_stdin && isatty(STDIN_FILENO) == 1;
    struct termios old, quiet;
    bool restore = false;
    char *got;

    if (tty) {
        fprintf(stderr, "API token for %s: ", url);
        fflush(stderr);
        if (tcgetattr(STDIN_FILENO, &old) == 0) {
            quiet = old;
            quiet.c_lflag &= ~(tcflag_t)ECHO;
            restore = tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) == 0;
        }
    }
    got = fgets(buf, (int)cap, stdin);
    if (restore) {
        (void)tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
        fputc('\n', stderr);
    }
    if (!got) {
        say("no token on stdin");
        return EXIT_USAGE;
    }
    if (!strchr(buf, '\n') && strlen(buf) == cap - 1) {
        say("the token is too long (at most %zu characters)", cap - 2);
        return EXIT_USAGE;
    }
    if (!cl_token_clean(buf)) {
        say("the token is empty or has a character a token cannot have");
        return EXIT_USAGE;
    }
    return 0;
}

static int cmd_login(cl_ctx *c)
{
    cl_http_resp resp = {0};
    cl_config cfg;
    cJSON *doc = NULL;
    fb_err err;
    cl_url u;
    int rc;

    fb_err_clear(&err);
    memset(&cfg, 0, sizeof cfg);
    if (cl_url_normalize(c->a.pos[0], cfg.url, sizeof cfg.url, &err) != FB_OK)
        return usage_error(&c->a, &err);
    rc = read_token(cfg.url, c->a.set[CL_O_TOKEN_STDIN], cfg.token, sizeof cfg.token);
    if (rc)
        return rc;
    snprintf(c->token, sizeof c->token, "%s", cfg.token);
    cl_url_init(&u, cfg.url, "/api/v1/jobs");
    cl_url_query(&u, "limit", "1");
    rc = call(c, "GET", &u, NULL, &resp, &doc);
    if (rc) {
        say("not logged in: nothing saved");
        goto out;
    }
    if (cl_config_save(c->cfg_dir, &cfg, &err) != FB_OK) {
        say("cannot save the login: %s", err.msg);
        rc = EXIT_SERVER;
        goto out;
    }
    if (c->json)
        print_raw(&resp);
    fprintf(stderr, "logged in to %s (saved in %s/config.json)\n", cfg.url, c->cfg_dir);
out:
    cJSON_Delete(doc);
    cl_http_resp_free(&resp);
    return rc;
}

static int cmd_logout(cl_ctx *c)
{
    fb_err err;
    fb_code code = cl_config_remove(c->cfg_dir, &err);

    if (code == FB_ENOTFOUND) {
        fprintf(stderr, "not logged in\n");
        return 0;
    }
    if (code != FB_OK) {
        say("%s", err.msg);
        return EXIT_SERVER;
    }
    fprintf(stderr, "logged out (removed %s/config.json)\n", c->cfg_dir);
    return 0;
}

/* ---- models ---- */

static int check_model_id(const cl_ctx *c, const char *id)
{
    fb_err err;

    if (cl_id_valid(id))
        return 0;
    fb_err_set(&err, FB_EINVAL, id,
               "not a model id (a positive whole number: fusionbench model "
               "list shows them)");
    return usage_error(&c->a, &err);
}

/* model add NAME FILE: the file streamed to the server with a progress bar. */
static int cmd_model_add(cl_ctx *c)
{
    const char *name = c->a.pos[0], *path = c->a.pos[1];
    char sha[65];
    cl_http_transfer t = {.progress = isatty(STDERR_FILENO), .label = name, .sha256_hex = sha};
    cl_http_resp resp = {0};
    cJSON *doc = NULL;
    struct stat st;
    cl_url u;
    fb_err err;
    int rc;

    fb_err_clear(&err);
    t.in = fopen(path, "rb");
    if (!t.in || fstat(fileno(t.in), &st) != 0 || !S_ISREG(st.st_mode)) {
        say("%s: %s", path, t.in ? "not a regular file" : strerror(errno));
        if (t.in)
            fclose(t.in);
        return EXIT_USAGE;
    }
    t.in_size = (long long)st.st_size;
    cl_url_init(&u, c->server, "/api/v1/models");
    cl_url_query(&u, "name", name);
    if (c->a.set[CL_O_VISIBILITY])
        cl_url_query(&u, "visibility", c->a.val[CL_O_VISIBILITY]);
    if (cl_url_done(&u, &err) != FB_OK) {
        say("%s", err.msg);
        fclose(t.in);
        return EXIT_USAGE;
    }
    watch_signals(true);
    if (cl_http_transfer_file(u.s, c->token, &t, &resp, &err) != FB_OK) {
        if (strcmp(err.msg, "interrupted") != 0)
            say("upload failed: %s", err.msg);
        rc = interrupted ? EXIT_INTR : EXIT_SERVER;
    } else {
        rc = answer_json(&resp, &doc);
    }
    watch_signals(false);
    fclose(t.in);
    if (rc == 0 && c->json) {
        print_raw(&resp);
    } else if (rc == 0) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(doc, "id");
        const cJSON *digest = cJSON_GetObjectItemCaseSensitive(doc, "sha256");
        if (!cJSON_IsString(digest) || strcmp(digest->valuestring, sha) != 0) {
            say("the server stored a SHA-256 (%s) other than the file's (%s)",
                cJSON_IsString(digest) ? digest->valuestring : "none", sha);
            rc = EXIT_SERVER;
        } else {
            printf("%.0f\n", cJSON_IsNumber(id) ? id->valuedouble : 0.0);
            fprintf(stderr,
                    "uploaded %s as model %.0f (sha256 %.12s...); it is being prepared: "
                    "fusionbench model show %.0f\n",
                    path, cJSON_IsNumber(id) ? id->valuedouble : 0.0, sha,
                    cJSON_IsNumber(id) ? id->valuedouble : 0.0);
        }
    }
    cJSON_Delete(doc);
    cl_http_resp_free(&resp);
    return rc;
}

/* model rm ID */
static int cmd_model_rm(cl_ctx *c)
{
    cl_http_resp resp = {0};
    cl_url u;
    int rc = check_model_id(c, c->a.pos[0]);

    if (rc)
        return rc;
    cl_url_init(&u, c->server, "/api/v1/models");
    cl_url_seg(&u, c->a.pos[0]);
    rc = send_req(c, "DELETE", &u, NULL, &resp);
    if (rc == 0 && resp.status != 204) {
        say_api_error(&resp);
        rc = EXIT_SERVER;
    } else if (rc == 0) {
        fprintf(stderr, "deleted model %s\n", c->a.pos[0]);
    }
    cl_http_resp_free(&resp);
    return rc;
}

/* model get ID FILE: the archive into a new file, its SHA-256 checked. */
static int cmd_model_get(cl_ctx *c)
{
    const char *id = c->a.pos[0], *path = c->a.pos[1];
    char sha[65];
    cl_http_transfer t = {.progress = isatty(STDERR_FILENO), .label = path, .sha256_hex = sha};
    cl_http_resp resp = {0};
    cJSON *doc = NULL;
    cl_url u;
    fb_err err;
    int rc = check_model_id(c, id), fd;

    if (rc)
        return rc;
    fb_err_clear(&err);
    /* the model's digest first, to check the bytes against */
    cl_url_init(&u, c->server, "/api/v1/models");
    cl_url_seg(&u, id);
    rc = call(c, "GET", &u, NULL, &resp, &doc);
    cl_http_resp_free(&resp);
    if (rc)
        return rc;
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(doc, "sha256");
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || !(t.out = fdopen(fd, "wb"))) {
        say("%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        cJSON_Delete(doc);
        return EXIT_USAGE;
    }
    cl_url_seg(&u, "archive");
    if (cl_url_done(&u, &err) == FB_OK) {
        watch_signals(true);
        rc = cl_http_transfer_file(u.s, c->token, &t, &resp, &err) == FB_OK ? 0 : EXIT_SERVER;
        watch_signals(false);
    } else {
        rc = EXIT_SERVER;
    }
    if (fclose(t.out) != 0 && rc == 0) {
        say("%s: %s", path, strerror(errno));
        rc = EXIT_SERVER;
    } else if (rc) {
        if (strcmp(err.msg, "interrupted") != 0)
            say("download failed: %s", err.msg);
        rc = interrupted ? EXIT_INTR : rc;
    } else if (resp.status != 200) {
        say_api_error(&resp);
        rc = EXIT_SERVER;
    } else if (!cJSON_IsString(want) || strcmp(want->valuestring, sha) != 0) {
        say("%s: its SHA-256 %s is not the model's (%s)", path, sha,
            cJSON_IsString(want) ? want->valuestring : "none");
        rc = EXIT_SERVER;
    } else {
        fprintf(stderr, "wrote %s (sha256 %s)\n", path, sha);
    }
    if (rc)
        unlink(path);
    cJSON_Delete(doc);
    cl_http_resp_free(&resp);
    return rc;
}

/* ---- setup ---- */

/* Server: --server, $FUSIONBENCH_URL, the saved login's, the default.  Token:
 * $FUSIONBENCH_TOKEN, else the saved login's when it is for this server. */
static int pick_server(cl_ctx *c)
{
    const char *flag = c->a.set[CL_O_SERVER] ? c->a.val[CL_O_SERVER] : NULL;
    const char *env_url = getenv("FUSIONBENCH_URL"), *env_tok = getenv("FUSIONBENCH_TOKEN");
    bool have_cfg = false;
    cl_config cfg;
    fb_err err;
    fb_code code;

    fb_err_clear(&err);
    if (cl_config_dir(getenv("XDG_CONFIG_HOME"), getenv("HOME"), c->cfg_dir, sizeof c->cfg_dir,
                      &err) == FB_OK) {
        code = cl_config_load(c->cfg_dir, &cfg, &err);
        have_cfg = code == FB_OK;
        if (code != FB_OK && code != FB_ENOTFOUND)
            say("ignoring the saved login: %s", err.msg);
    } else if (c->a.cmd == CL_CMD_LOGIN || c->a.cmd == CL_CMD_LOGOUT) {
        say("%s", err.msg);
        return EXIT_USAGE;
    }
    const char *url = flag                  ? flag
                      : env_url && *env_url ? env_url
                      : have_cfg            ? cfg.url
                                            : DEFAULT_URL;
    if (cl_url_normalize(url, c->server, sizeof c->server, &err) != FB_OK) {
        say("%s: %s",
            flag                  ? "--server"
            : env_url && *env_url ? "FUSIONBENCH_URL"
                                  : "config",
            err.msg);
        return EXIT_USAGE;
    }
    if (env_tok && *env_tok) {
        snprintf(c->token, sizeof c->token, "%s", env_tok);
        if (!cl_token_clean(c->token)) {
            say("FUSIONBENCH_TOKEN has a character a token cannot have");
            return EXIT_USAGE;
        }
    } else if (have_cfg && strcmp(cfg.url, c->server) == 0) {
        snprintf(c->token, sizeof c->token, "%s", cfg.token);
    }
    return 0;
}

/* Every command: a view, or a function of its own. */
typedef struct cl_command {
    cl_view view;
    int (*run)(cl_ctx *c); /* when set, the command is this */
} cl_command;

static const cl_command commands[CL_CMD_COUNT] = {
    [CL_CMD_LOGIN] = {.run = cmd_login},
    [CL_CMD_LOGOUT] = {.run = cmd_logout},
    [CL_CMD_SUBMIT] = {.run = cmd_submit},
    [CL_CMD_STATUS] = {{"GET", "/api/v1/jobs", true, NULL, NULL, print_job, job_exit, wait_job}},
    [CL_CMD_CANCEL] = {{"POST", "/api/v1/jobs", true, "cancel", NULL, print_canceled, NULL, NULL}},
    [CL_CMD_JOBS] = {.run = cmd_jobs},
    [CL_CMD_RESULTS] = {{"GET", "/api/v1/results", false, NULL, results_query, cl_fmt_results}},
    [CL_CMD_COMPARE] = {{"GET", "/api/v1/compare", false, NULL, compare_query, cl_fmt_compare}},
    [CL_CMD_SUITE_SUBMIT] = {.run = cmd_suite_submit},
    [CL_CMD_SUITE_SHOW] = {{"GET", "/api/v1/suites", true, NULL, NULL, cl_fmt_suite}},
    [CL_CMD_WORKERS] = {{"GET", "/api/v1/workers", false, NULL, NULL, cl_fmt_workers}},
    [CL_CMD_WORKLOADS] = {{"GET", "/api/v1/workloads", false, NULL, NULL, cl_fmt_workloads}},
    [CL_CMD_EXPLAIN] = {.run = cmd_explain},
    [CL_CMD_MODEL_ADD] = {.run = cmd_model_add},
    [CL_CMD_MODEL_LIST] = {{"GET", "/api/v1/models", false, NULL, NULL, cl_fmt_models}},
    [CL_CMD_MODEL_SHOW] = {{"GET", "/api/v1/models", true, NULL, NULL, cl_fmt_model}},
    [CL_CMD_MODEL_RM] = {.run = cmd_model_rm},
    [CL_CMD_MODEL_GET] = {.run = cmd_model_get},
};

static int dispatch(cl_ctx *c)
{
    const cl_command *k =
        c->a.cmd > CL_CMD_NONE && c->a.cmd < CL_CMD_COUNT ? &commands[c->a.cmd] : NULL;

    if (k && k->run)
        return k->run(c);
    if (k && k->view.print)
        return run_view(c, &k->view);
    return EXIT_USAGE;
}

int main(int argc, char **argv)
{
    static cl_ctx c;
    fb_err err;
    int rc;

    fb_err_clear(&err);
    if (cl_args_parse(argc, argv, &c.a, &err) != FB_OK)
        return usage_error(&c.a, &err);
    if (c.a.set[CL_O_HELP]) {
        fputs(cl_usage(c.a.cmd), stdout);
        return 0;
    }
    if (c.a.set[CL_O_VERSION]) {
        printf("fusionbench %s (%s)\n", FB_CLIENT_VERSION, FB_GIT_SHA);
        return 0;
    }
    c.json = c.a.set[CL_O_JSON];
    rc = pick_server(&c);
    if (rc)
        return rc;
    if (cl_http_global_init(&err) != FB_OK) {
        say("%s", err.msg);
        return EXIT_SERVER;
    }
    rc = dispatch(&c);
    cl_http_global_cleanup();
    return rc;
}
