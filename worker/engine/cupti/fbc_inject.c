/* fbc_inject: libfusionbench_cupti.so, the CUPTI injection library (the second
 * of fbc_cupti.h's two uses).  Any CUDA process started with
 *
 *     CUDA_INJECTION64_PATH=/path/libfusionbench_cupti.so
 *     FUSIONBENCH_CUPTI_OUT=/path/records.jsonl
 *
 * has its kernels, copies, memsets and device allocations streamed to that
 * file (fbc_file.h's format) from CUPTI's buffer callbacks; the file is
 * completed with an "end" line at exit and on SIGTERM.  When another profiler
 * holds CUPTI the file gets an "end" line with the reason and stderr says it;
 * the process itself always goes on.
 *
 * A process that wants iterations attributed calls, through dlopen/ctypes on
 * this same library (already loaded, so the same instance):
 *     fusionbench_cupti_range_begin(id, "label");  ... work ...
 *     fusionbench_cupti_range_end();
 * which records a range line with CUPTI timestamps (after a context
 * synchronize) and maps every CUDA call in between to id. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "fbc_cupti.h"
#include "fbc_file.h"

#define FBC_EXPORT  __attribute__((visibility("default")))
#define FBC_OUT_ENV "FUSIONBENCH_CUPTI_OUT"

static struct {
    pthread_mutex_t lock; /* guards f and the write counters */
    FILE *f;
    uint64_t base;
    uint64_t write_errors;
    atomic_int finished;
    struct sigaction old_term;
    uint64_t range_id, range_t0;
    char range_label[FBC_NAME_MAX];
} inj = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void file_sink(void *ud, const fbc_rec *r)
{
    (void)ud;
    pthread_mutex_lock(&inj.lock);
    if (inj.f && fbc_file_put(inj.f, r, inj.base) != 0)
        inj.write_errors++;
    pthread_mutex_unlock(&inj.lock);
}

/* Writes the end line and closes the file, once (exit, SIGTERM, or a failed
 * start, whichever comes first). */
static void finish(const char *message)
{
    char msg[256];

    if (atomic_exchange(&inj.finished, 1))
        return;
    if (!message)
        fbc_activity_stop(); /* flushes every buffer into the file first */
    pthread_mutex_lock(&inj.lock);
    if (inj.f) {
        snprintf(msg, sizeof msg, "%s", message ? message : "");
        if (!message && inj.write_errors)
            snprintf(msg, sizeof msg, "%llu record(s) could not be written",
                     (unsigned long long)inj.write_errors);
        if (fbc_file_end(inj.f, fbc_activity_dropped(), msg) != 0)
            fprintf(stderr, "fusionbench-cupti: writing the record file failed\n");
        fclose(inj.f);
        inj.f = NULL;
    }
    pthread_mutex_unlock(&inj.lock);
}

static void at_exit(void)
{
    finish(NULL);
}

/* Flushing from a signal handler is not async-signal-safe; it is what a
 * profiler can do to keep the records of a process that is being terminated,
 * and the process is going away either way.  The previous disposition is
 * restored and the signal raised again, so the process dies as it would have. */
static void on_term(int sig)
{
    finish(NULL);
    sigaction(SIGTERM, &inj.old_term, NULL);
    raise(sig);
}

static void install_term(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, &inj.old_term) != 0)
        fprintf(stderr, "fusionbench-cupti: cannot catch SIGTERM; records flush at exit only\n");
}

static int open_out(void)
{
    const char *path = getenv(FBC_OUT_ENV);

    if (!path || !path[0]) {
        fprintf(stderr, "fusionbench-cupti: %s is not set; recording nothing\n", FBC_OUT_ENV);
        return -1;
    }
    inj.f = fopen(path, "w");
    if (!inj.f) {
        fprintf(stderr, "fusionbench-cupti: cannot write %s; recording nothing\n", path);
        return -1;
    }
    inj.base = fbc_now();
    if (fbc_file_header(inj.f, (long)getpid(), inj.base) != 0)
        inj.write_errors++;
    return 0;
}

/* Called by the CUDA driver when it loads the library (CUDA_INJECTION64_PATH).
 * Returns 1: a failure to record must never fail the process. */
FBC_EXPORT int InitializeInjection(void)
{
    fb_err err;

    if (open_out() != 0)
        return 1;
    fb_err_clear(&err);
    /* no API records: the job's timed iterations run under this library,
     * and its ranges are windowed by their times (fbc_window_of_range) */
    if (fbc_activity_start(file_sink, NULL, false, &err) != FB_OK) {
        fprintf(stderr, "fusionbench-cupti: not recording: %s\n", err.msg);
        finish(err.msg);
        return 1;
    }
    atexit(at_exit);
    install_term();
    return 1;
}

/* Starts range id (labels are cut at FBC_NAME_MAX).  0, or -1 when not recording. */
FBC_EXPORT int fusionbench_cupti_range_begin(uint64_t id, const char *label)
{
    if (atomic_load(&inj.finished) || !inj.f)
        return -1;
    (void)cuCtxSynchronize();
    inj.range_id = id;
    snprintf(inj.range_label, sizeof inj.range_label, "%s", label ? label : "");
    inj.range_t0 = fbc_now();
    return fbc_mark_push(id, NULL) == FB_OK ? 0 : -1;
}

/* Ends the range begun last and writes its line.  0, or -1. */
FBC_EXPORT int fusionbench_cupti_range_end(void)
{
    fbc_rec r;

    if (atomic_load(&inj.finished) || !inj.f)
        return -1;
    (void)cuCtxSynchronize();
    memset(&r, 0, sizeof r);
    r.kind = FBC_RANGE;
    r.ext_id = inj.range_id;
    r.start = inj.range_t0;
    r.end = fbc_now();
    snprintf(r.name, sizeof r.name, "%s", inj.range_label);
    file_sink(NULL, &r);
    return fbc_mark_pop(NULL) == FB_OK ? 0 : -1;
}

/* Flushes the records so far into the file (e.g. before reading it while the
 * process lives on).  0, or -1. */
FBC_EXPORT int fusionbench_cupti_flush(void)
{
    int rc;

    if (atomic_load(&inj.finished))
        return -1;
    rc = fbc_activity_flush(NULL) == FB_OK ? 0 : -1;
    pthread_mutex_lock(&inj.lock);
    if (inj.f && fflush(inj.f) != 0)
        rc = -1;
    pthread_mutex_unlock(&inj.lock);
    return rc;
}
