/* wk_child: one job in a child process (docs/DESIGN.md: a crash or hang in a workload
 * fails that job and the worker goes on; the parent never touches CUDA).
 *
 * The child parses the spec, runs fb_run_benchmark, sends progress as JSON lines
 * on a pipe (dropped, never blocking, when the pipe is full) and writes its final
 * JSON, {"result": ..., "kernels": {...}} or {"error": {"code", "message"}}, to an
 * unlinked temp file the parent reads after the child exits. */
#ifndef WK_CHILD_H
#define WK_CHILD_H

#include <stdbool.h>
#include <sys/types.h>

#include "fb_err.h"
#include "wk_opts.h"

#define WK_PROGRESS_MAX 512                 /* one progress line */
#define WK_RESULT_MAX   (64L * 1024 * 1024) /* the final JSON */
#define WK_CODE_MAX     64
#define WK_MESSAGE_MAX  1024

typedef struct wk_child {
    pid_t pid;       /* 0 once reaped */
    int progress_fd; /* read end, non-blocking; -1 at EOF */
    int result_fd;   /* the unlinked temp file */
    int wait_status; /* waitpid status once exited */
    bool exited;
    size_t line_len;
    char line[WK_PROGRESS_MAX];     /* partial line being read */
    char progress[WK_PROGRESS_MAX]; /* latest complete progress JSON, "" none */
} wk_child;

/* Forks a child that runs spec_json (a job spec).  On success the caller must
 * end with wk_child_close (after wk_child_kill or an exit). */
FB_MUSTCHECK fb_code wk_child_start(wk_child *ch, const wk_config *cfg, const char *spec_json,
                                    fb_err *err);

/* Waits up to timeout_ms for progress, reads what came, and reaps the child if
 * it exited (ch->exited). */
void wk_child_poll(wk_child *ch, int timeout_ms);

/* SIGKILLs the child (if still running) and reaps it. */
void wk_child_kill(wk_child *ch);

/* What an exited child produced.  ok: result_json and kernels_json (owned,
 * cJSON_free) are set; else code/message say why ("crashed" for a signal or a
 * missing result, or the child's own error code). */
typedef struct wk_outcome {
    bool ok;
    char *result_json, *kernels_json;
    char code[WK_CODE_MAX];
    char message[WK_MESSAGE_MAX];
} wk_outcome;

void wk_child_outcome(wk_child *ch, wk_outcome *out);
void wk_outcome_free(wk_outcome *out);

/* Closes the child's descriptors (the child must have been reaped). */
void wk_child_close(wk_child *ch);

#endif
