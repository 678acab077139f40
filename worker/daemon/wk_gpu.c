/* wk_gpu: GPU facts from a query child (see wk_gpu.h). */
#include "wk_gpu.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wk_time.h"

/* What the child sends: its result code, message and the facts. */
typedef struct probe_msg {
    fb_code code;
    char msg[FB_ERR_MSG_MAX];
    fb_gpu gpu;
} probe_msg;

__attribute__((noreturn)) static void probe_child(int gpu, int fd)
{
    probe_msg m;
    fb_err err;
    const char *p = (const char *)&m;
    size_t left = sizeof m;

    memset(&m, 0, sizeof m);
    fb_err_clear(&err);
    m.code = fb_gpu_query(gpu, &m.gpu, &err);
    snprintf(m.msg, sizeof m.msg, "%s", err.msg);
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(3);
        p += w;
        left -= (size_t)w;
    }
    _exit(0);
}

/* Reads exactly n bytes before the deadline.  0, or -1 (EOF, error, timeout). */
static int read_until(int fd, void *buf, size_t n, int64_t deadline_ms)
{
    char *p = buf;

    while (n > 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int64_t left = deadline_ms - wk_time_now_ms();
        ssize_t r;
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            return -1;
        r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

fb_code wk_gpu_probe(int gpu, fb_gpu *out, fb_err *err)
{
    int fds[2];
    probe_msg m;
    pid_t pid;
    int got, status = 0;

    memset(out, 0, sizeof *out);
    if (pipe(fds) != 0)
        return fb_err_set(err, FB_EIO, NULL, "pipe: %s", strerror(errno));
    pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return fb_err_set(err, FB_EIO, NULL, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        probe_child(gpu, fds[1]);
    }
    close(fds[1]);
    got = read_until(fds[0], &m, sizeof m, wk_time_now_ms() + WK_GPU_PROBE_TIMEOUT_MS);
    close(fds[0]);
    if (got != 0)
        kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got != 0)
        return fb_err_set(err, FB_ETIMEOUT, NULL, "GPU %d: the query process gave no answer", gpu);
    if (m.code != FB_OK)
        return fb_err_set(err, m.code, NULL, "%s", m.msg);
    *out = m.gpu;
    return FB_OK;
}

fb_code wk_gpu_pin(const char *uuid, fb_err *err)
{
    if (setenv("CUDA_VISIBLE_DEVICES", uuid, 1) != 0)
        return fb_err_set(err, FB_EIO, NULL, "setenv CUDA_VISIBLE_DEVICES: %s", strerror(errno));
    return FB_OK;
}
