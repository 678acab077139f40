/* ind_proc: the inductor runner as a child process (docs/INDUCTOR_PROTOCOL.md).
 *
 * Starts `python runner.py ARGS...` with its protocol stream on a pipe and its
 * stderr in an unlinked temp file, without the database's credentials or any
 * other descriptor of ours, reads protocol lines with a deadline, and
 * kills the runner's whole process group on timeout or when done early. */
#ifndef IND_PROC_H
#define IND_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "fb_err.h"

#define IND_LINE_MAX    (32L * 1024 * 1024) /* one protocol line (the result) */
#define IND_STDERR_TAIL 400                 /* stderr bytes quoted in errors */

typedef struct ind_proc {
    pid_t pid;              /* 0 once reaped */
    int out_fd;             /* protocol pipe, read end; -1 at EOF */
    int err_fd;             /* the runner's stderr (unlinked temp file) */
    int status;             /* waitpid status once reaped */
    char *buf;              /* owned, partial line */
    size_t len, cap, shift; /* shift: the last line's bytes, dropped next call */
} ind_proc;

/* Path of the runner's python and of runner.py (static storage): the
 * FUSIONBENCH_PYTHON / FUSIONBENCH_INDUCTOR_RUNNER environment variables, else
 * the project venv (~/.cache/fusionbench/venv-<hash of scripts/requirements.txt>)
 * and the source tree's or the install's runner.py. */
const char *ind_python(void);
const char *ind_runner(void);

/* Starts the runner with argv[] appended after runner.py (NULL-terminated).
 * env_extra: "NAME=value" strings (NULL-terminated, may be NULL) set only in the
 * runner's environment. */
FB_MUSTCHECK fb_code ind_proc_start(ind_proc *p, const char *const *args,
                                    const char *const *env_extra, fb_err *err);

/* ind_proc_start, with the runner's data (RLIMIT_DATA) limited to data_limit
 * bytes when > 0. */
FB_MUSTCHECK fb_code ind_proc_start_limited(ind_proc *p, const char *const *args,
                                            const char *const *env_extra, long long data_limit,
                                            fb_err *err);

/* Next complete line (NUL-terminated, owned by p, valid until the next call) or
 * NULL at EOF.  FB_ETIMEOUT when deadline_ms (CLOCK_MONOTONIC) passes first,
 * FB_ETOOBIG over IND_LINE_MAX. */
FB_MUSTCHECK fb_code ind_proc_line(ind_proc *p, double deadline_ms, char **line, fb_err *err);

/* Kills the runner's process group (if running), reaps it, frees buffers.  When
 * tail is not NULL, the end of its stderr is copied there (cap bytes). */
void ind_proc_end(ind_proc *p, bool kill_it, char *tail, size_t cap);

/* CLOCK_MONOTONIC in milliseconds. */
double ind_now_ms(void);

#endif
