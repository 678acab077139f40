/* ind_proc: the runner child process (see ind_proc.h). */
#include "ind_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fb_parse.h"

#ifndef FB_VENV_HASH
#define FB_VENV_HASH "unknown"
#endif
#ifndef FB_INDUCTOR_SRC_RUNNER
#define FB_INDUCTOR_SRC_RUNNER ""
#endif
#ifndef FB_INDUCTOR_INSTALL_RUNNER
#define FB_INDUCTOR_INSTALL_RUNNER ""
#endif

#define IND_PATH_MAX 4096
#define IND_MAX_ARGS 16
#define IND_MAX_ENV  1024

extern char **environ;

double ind_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

const char *ind_python(void)
{
    static char path[IND_PATH_MAX];
    const char *env = getenv("FUSIONBENCH_PYTHON"), *home = getenv("HOME");

    if (env && env[0])
        return env;
    snprintf(path, sizeof path, "%s/.cache/fusionbench/venv-%s/bin/python", home ? home : "",
             FB_VENV_HASH);
    return path;
}

const char *ind_runner(void)
{
    const char *env = getenv("FUSIONBENCH_INDUCTOR_RUNNER");

    if (env && env[0])
        return env;
    /* The source tree first: a developer's build runs the runner it was built
     * from; an installed binary whose tree is gone uses the installed copy. */
    if (FB_INDUCTOR_SRC_RUNNER[0] && access(FB_INDUCTOR_SRC_RUNNER, R_OK) == 0)
        return FB_INDUCTOR_SRC_RUNNER;
    return FB_INDUCTOR_INSTALL_RUNNER;
}

/* The runner's environment: ours less the database's (fb_env_is_database), plus
 * env_extra (which wins over a same-named variable of ours).  Pointers into
 * environ and env_extra; vec holds cap. */
static int build_env(const char *const *env_extra, const char **vec, int cap)
{
    int n = 0;

    for (int i = 0; env_extra && env_extra[i] && n < cap - 1; i++)
        vec[n++] = env_extra[i];
    for (int i = 0; environ[i] && n < cap - 1; i++) {
        bool shadowed = fb_env_is_database(environ[i]);
        for (int k = 0; env_extra && env_extra[k] && !shadowed; k++) {
            size_t len = strcspn(env_extra[k], "=");
            shadowed = strncmp(environ[i], env_extra[k], len + 1) == 0;
        }
        if (!shadowed)
            vec[n++] = environ[i];
    }
    vec[n] = NULL;
    return n;
}

/* In the child: its own process group (so a timeout kills Inductor's compile
 * workers too), death with its parent, protocol on out, stderr to err, no
 * other descriptor (a database socket the worker holds never reaches the
 * runner), and data_limit bytes of data when > 0 (RLIMIT_DATA). */
/* Closes every descriptor from lo up (close_range where the kernel has it,
 * else one by one up to the descriptor limit). */
static void close_from(int lo)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)lo, ~0u, 0u) == 0)
        return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = lo; fd < (max > 0 && max < 1048576 ? max : 65536); fd++)
        (void)close((int)fd);
}

__attribute__((noreturn)) static void exec_child(int out, int err_fd, const char **argv,
                                                 const char **envp, long long data_limit)
{
    (void)setpgid(0, 0);
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_DFL);
    if (dup2(out, 1) < 0 || dup2(err_fd, 2) < 0)
        _exit(127);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0)
        (void)dup2(devnull, 0);
    close_from(3);
    if (data_limit > 0) {
        struct rlimit rl = {.rlim_cur = (rlim_t)data_limit, .rlim_max = (rlim_t)data_limit};
        if (setrlimit(RLIMIT_DATA, &rl) != 0)
            dprintf(2, "setrlimit(RLIMIT_DATA): %s\n", strerror(errno));
    }
    execve(argv[0], (char *const *)argv, (char *const *)envp);
    dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static fb_code make_argv(const char *const *args, const char **argv, fb_err *err)
{
    int n = 0;

    argv[n++] = ind_python();
    argv[n++] = ind_runner();
    for (int i = 0; args && args[i]; i++) {
        if (n >= IND_MAX_ARGS - 1)
            return fb_err_set(err, FB_EINTERNAL, NULL, "too many runner arguments");
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    if (!argv[1][0])
        return fb_err_set(err, FB_EUNSUPPORTED, NULL, "no runner.py found");
    return FB_OK;
}

fb_code ind_proc_start(ind_proc *p, const char *const *args, const char *const *env_extra,
                       fb_err *err)
{
    return ind_proc_start_limited(p, args, env_extra, 0, err);
}

fb_code ind_proc_start_limited(ind_proc *p, const char *const *args, const char *const *env_extra,
                               long long data_limit, fb_err *err)
{
    const char *argv[IND_MAX_ARGS];
    static const char *envp[IND_MAX_ENV];
    char tmpl[] = "/tmp/fb-inductor-stderr-XXXXXX";
    int pipefd[2] = {-1, -1};
    fb_code rc;

    memset(p, 0, sizeof *p);
    p->out_fd = p->err_fd = -1;
    rc = make_argv(args, argv, err);
    if (rc != FB_OK)
        return rc;
    build_env(env_extra, envp, IND_MAX_ENV);
    p->err_fd = mkostemp(tmpl, O_CLOEXEC);
    if (p->err_fd < 0 || unlink(tmpl) != 0 || pipe2(pipefd, O_CLOEXEC) != 0) {
        rc = fb_err_set(err, FB_EIO, NULL, "runner pipes: %s", strerror(errno));
        goto out;
    }
    p->pid = fork();
    if (p->pid < 0) {
        p->pid = 0;
        rc = fb_err_set(err, FB_EIO, NULL, "fork: %s", strerror(errno));
        goto out;
    }
    if (p->pid == 0)
        exec_child(pipefd[1], p->err_fd, argv, envp, data_limit);
    p->out_fd = pipefd[0];
    pipefd[0] = -1;
out:
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    return rc;
}

/* The first complete line in buf, NUL-terminated, removed from the buffer on
 * the next call (shift is how much to drop then). */
static char *take_line(ind_proc *p, size_t *shift)
{
    char *nl = p->buf ? memchr(p->buf, '\n', p->len) : NULL;

    if (!nl)
        return NULL;
    *nl = '\0';
    *shift = (size_t)(nl - p->buf) + 1;
    return p->buf;
}

static fb_code grow(ind_proc *p, fb_err *err)
{
    size_t cap = p->cap ? p->cap * 2 : 65536;
    char *nb;

    if (p->len + 1 < p->cap)
        return FB_OK;
    if (cap > (size_t)IND_LINE_MAX + 1)
        return fb_err_set(err, FB_ETOOBIG, NULL, "runner line over %ld bytes", IND_LINE_MAX);
    nb = realloc(p->buf, cap);
    if (!nb)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for a runner line");
    p->buf = nb;
    p->cap = cap;
    return FB_OK;
}

/* Reads what is there (after poll) into buf; *eof at end of stream. */
static fb_code fill(ind_proc *p, double deadline_ms, bool *eof, fb_err *err)
{
    struct pollfd pfd = {.fd = p->out_fd, .events = POLLIN};
    double left = deadline_ms - ind_now_ms();
    fb_code rc = grow(p, err);
    ssize_t n;

    if (rc != FB_OK)
        return rc;
    if (left <= 0)
        return fb_err_set(err, FB_ETIMEOUT, NULL, "runner timed out");
    if (poll(&pfd, 1, left > 1000 ? 1000 : (int)left + 1) <= 0)
        return FB_OK; /* nothing yet (or EINTR): the caller loops to the deadline */
    n = read(p->out_fd, p->buf + p->len, p->cap - p->len - 1);
    if (n < 0 && errno != EINTR && errno != EAGAIN)
        return fb_err_set(err, FB_EIO, NULL, "reading the runner: %s", strerror(errno));
    if (n == 0)
        *eof = true;
    if (n > 0)
        p->len += (size_t)n;
    return FB_OK;
}

fb_code ind_proc_line(ind_proc *p, double deadline_ms, char **line, fb_err *err)
{
    bool eof = false;

    if (p->shift) {
        memmove(p->buf, p->buf + p->shift, p->len - p->shift);
        p->len -= p->shift;
        p->shift = 0;
    }
    *line = NULL;
    while (p->out_fd >= 0 && !eof) {
        fb_code rc;
        *line = take_line(p, &p->shift);
        if (*line)
            return FB_OK;
        rc = fill(p, deadline_ms, &eof, err);
        if (rc != FB_OK)
            return rc;
    }
    *line = take_line(p, &p->shift);
    return FB_OK;
}

static void stderr_tail(int fd, char *tail, size_t cap)
{
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > (off_t)(cap - 1) ? end - (off_t)(cap - 1) : 0;
    ssize_t n = pread(fd, tail, cap - 1, from);

    tail[n > 0 ? n : 0] = '\0';
    for (char *c = tail; *c; c++) {
        if (*c == '\n' || *c == '\r' || *c == '"')
            *c = ' ';
    }
}

void ind_proc_end(ind_proc *p, bool kill_it, char *tail, size_t cap)
{
    if (p->pid > 0) {
        if (kill_it)
            (void)kill(-p->pid, SIGKILL);
        while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR)
            ;
        p->pid = 0;
    }
    if (tail && cap > 0 && p->err_fd >= 0)
        stderr_tail(p->err_fd, tail, cap);
    if (p->out_fd >= 0)
        close(p->out_fd);
    if (p->err_fd >= 0)
        close(p->err_fd);
    free(p->buf);
    p->buf = NULL;
    p->out_fd = p->err_fd = -1;
}
