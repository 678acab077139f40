/* wk_child: the parent's side of a job's child process (see wk_child.h). */
#include "wk_child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fb_log.h"
#include "fb_result.h"
#include "wk_child_main.h"

/* An unlinked temp file: nothing is left behind whoever dies. */
static int temp_file(fb_err *err)
{
    const char *dir = getenv("TMPDIR");
    char path[512];
    int fd;

    snprintf(path, sizeof path, "%s/fusionbench-job-XXXXXX", dir && dir[0] ? dir : "/tmp");
    fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) {
        fb_err_set(err, FB_EIO, NULL, "temp file %s: %s", path, strerror(errno));
        return -1;
    }
    unlink(path);
    return fd;
}

fb_code wk_child_start(wk_child *ch, const wk_config *cfg, const char *spec_json, fb_err *err)
{
    int pfd[2];
    pid_t parent = getpid();

    memset(ch, 0, sizeof *ch);
    ch->progress_fd = ch->result_fd = -1;
    ch->result_fd = temp_file(err);
    if (ch->result_fd < 0)
        return FB_EIO;
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        close(ch->result_fd);
        return fb_err_set(err, FB_EIO, NULL, "pipe: %s", strerror(errno));
    }
    fflush(NULL); /* no buffered output is written twice */
    ch->pid = fork();
    if (ch->pid == 0) {
        close(pfd[0]);
        wk_child_main(cfg, spec_json, parent, pfd[1], ch->result_fd);
    }
    close(pfd[1]);
    ch->progress_fd = pfd[0];
    if (ch->pid < 0) {
        ch->pid = 0;
        wk_child_close(ch);
        return fb_err_set(err, FB_EIO, NULL, "fork: %s", strerror(errno));
    }
    (void)fcntl(ch->progress_fd, F_SETFL, O_NONBLOCK);
    return FB_OK;
}

/* Keeps the last complete line; a line over WK_PROGRESS_MAX is dropped whole. */
static void take_bytes(wk_child *ch, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n') {
            if (ch->line_len < sizeof ch->line - 1)
                ch->line[ch->line_len] = buf[i];
            ch->line_len++;
            continue;
        }
        if (ch->line_len > 0 && ch->line_len < sizeof ch->line) {
            memcpy(ch->progress, ch->line, ch->line_len);
            ch->progress[ch->line_len] = '\0';
        }
        ch->line_len = 0;
    }
}

static void read_progress(wk_child *ch)
{
    char buf[4096];

    for (;;) {
        ssize_t r = read(ch->progress_fd, buf, sizeof buf);
        if (r > 0) {
            take_bytes(ch, buf, (size_t)r);
            continue;
        }
        if (r == 0) { /* EOF: the child closed its end (it exited) */
            close(ch->progress_fd);
            ch->progress_fd = -1;
        }
        return; /* EAGAIN, EINTR or EOF */
    }
}

static void reap(wk_child *ch, int flags)
{
    int status;
    pid_t r;

    if (ch->exited || ch->pid <= 0)
        return;
    do {
        r = waitpid(ch->pid, &status, flags);
    } while (r < 0 && errno == EINTR && flags == 0);
    if (r == ch->pid) {
        ch->exited = true;
        ch->wait_status = status;
    }
}

void wk_child_poll(wk_child *ch, int timeout_ms)
{
    if (ch->progress_fd >= 0) {
        struct pollfd p = {.fd = ch->progress_fd, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) > 0)
            read_progress(ch);
    } else {
        /* Pipe at EOF: the child is ending; sleep rather than spin on POLLHUP. */
        (void)poll(NULL, 0, timeout_ms < 20 ? timeout_ms : 20);
    }
    reap(ch, WNOHANG);
}

void wk_child_kill(wk_child *ch)
{
    if (ch->pid > 0 && !ch->exited) {
        kill(ch->pid, SIGKILL);
        reap(ch, 0);
    }
}

void wk_child_close(wk_child *ch)
{
    if (ch->progress_fd >= 0)
        close(ch->progress_fd);
    if (ch->result_fd >= 0)
        close(ch->result_fd);
    ch->progress_fd = ch->result_fd = -1;
}

void wk_outcome_free(wk_outcome *out)
{
    cJSON_free(out->result_json);
    cJSON_free(out->kernels_json);
    out->result_json = out->kernels_json = NULL;
}

static void outcome_fail(wk_outcome *out, const char *code, const char *msg)
{
    wk_outcome_free(out);
    out->ok = false;
    snprintf(out->code, sizeof out->code, "%s", code);
    snprintf(out->message, sizeof out->message, "%s", msg);
}

/* Reads the whole result file (bounded) into *text (caller frees); NULL on
 * success, else why not. */
static const char *read_result(int fd, char **text, size_t *len)
{
    struct stat st;
    size_t got = 0;

    *text = NULL;
    if (fstat(fd, &st) != 0 || st.st_size <= 0)
        return "the job process exited without writing a result";
    if (st.st_size > WK_RESULT_MAX)
        return "the job's result is over the size limit";
    *text = malloc((size_t)st.st_size + 1);
    if (!*text)
        return "no memory to read the job's result";
    while (got < (size_t)st.st_size) {
        ssize_t r = pread(fd, *text + got, (size_t)st.st_size - got, (off_t)got);
        if (r <= 0) {
            free(*text);
            *text = NULL;
            return "could not read the job's result";
        }
        got += (size_t)r;
    }
    (*text)[got] = '\0';
    *len = got;
    return NULL;
}

/* Decodes the result and every variant's kernel rows (kernels: {variant:
 * rows}, may be NULL) into r, strictly: only what decodes is stored. */
static fb_code decode_final(const cJSON *res, const cJSON *ker, fb_result *r, fb_err *err)
{
    fb_code rc = fb_result_from_json(res, r, err);
    const cJSON *rows;

    if (rc != FB_OK || !cJSON_IsObject(ker))
        return rc;
    cJSON_ArrayForEach(rows, ker)
    {
        char at[FB_NAME_MAX + 16];
        int v = 0;
        while (v < r->n_variants && strcmp(r->variants[v].name, rows->string) != 0)
            v++;
        snprintf(at, sizeof at, "kernels.%.*s", FB_NAME_MAX - 1, rows->string);
        if (v == r->n_variants)
            return fb_err_set(err, FB_EINVAL, at, "%s names no variant of the result", at);
        rc = fb_kernel_rows_from_json(rows, at, &r->variants[v], err);
        if (rc != FB_OK)
            return rc;
    }
    return FB_OK;
}

/* {"result", "kernels"} → ok, once the result decodes; {"error": {code,
 * message}} → the child's error. */
static void parse_final(const cJSON *root, wk_outcome *out)
{
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(root, "result");
    const cJSON *ker = cJSON_GetObjectItemCaseSensitive(root, "kernels");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");

    if (cJSON_IsObject(res)) {
        char msg[WK_MESSAGE_MAX];
        fb_result r;
        fb_err err;
        if (decode_final(res, ker, &r, &err) != FB_OK) {
            snprintf(msg, sizeof msg, "the job process wrote a result that does not decode: %s",
                     err.msg);
            outcome_fail(out, err.code == FB_ENOMEM ? "internal" : "crashed", msg);
            fb_result_free(&r);
            return;
        }
        fb_result_free(&r);
        out->result_json = cJSON_PrintUnformatted(res);
        out->kernels_json = cJSON_IsObject(ker) ? cJSON_PrintUnformatted(ker) : NULL;
        out->ok = out->result_json != NULL && (out->kernels_json || !cJSON_IsObject(ker));
        if (!out->ok)
            outcome_fail(out, "internal", "no memory to encode the job's result");
        return;
    }
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
    if (cJSON_IsString(code) && cJSON_IsString(msg))
        outcome_fail(out, code->valuestring, msg->valuestring);
    else
        outcome_fail(out, "crashed", "the job process wrote a malformed result");
}

static void outcome_from_file(wk_child *ch, wk_outcome *out)
{
    char *text = NULL;
    size_t len = 0;
    const char *why = read_result(ch->result_fd, &text, &len);
    cJSON *root;

    if (why) {
        outcome_fail(out, "crashed", why);
        return;
    }
    root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root)
        outcome_fail(out, "crashed", "the job process wrote a result that is not JSON");
    else
        parse_final(root, out);
    cJSON_Delete(root);
}

void wk_child_outcome(wk_child *ch, wk_outcome *out)
{
    char msg[WK_MESSAGE_MAX];
    int st = ch->wait_status;

    memset(out, 0, sizeof *out);
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
        outcome_fail(out, "killed",
                     "the job process was killed (SIGKILL) from outside the worker: an operator, "
                     "or the kernel's OOM killer");
    } else if (WIFSIGNALED(st)) {
        snprintf(msg, sizeof msg, "the job process was killed by signal %d (SIG%s)", WTERMSIG(st),
                 sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
        outcome_fail(out, "crashed", msg);
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(msg, sizeof msg, "the job process exited with status %d",
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        outcome_fail(out, "crashed", msg);
    } else {
        outcome_from_file(ch, out);
    }
}
