/* fbc_session: in-process CUPTI sessions (see fbc_session.h). */
#include "fbc_session.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

/* lock guards the store: CUPTI's thread appends while the caller summarizes. */
struct fbc_session {
    pthread_mutex_t lock;
    fbc_store store;
    uint64_t next_id, cur_id;
    uint64_t t0;
    bool in_range;
    char label[FBC_NAME_MAX];
};

static void session_sink(void *ud, const fbc_rec *r)
{
    fbc_session *s = ud;
    pthread_mutex_lock(&s->lock);
    (void)fbc_store_add(&s->store, r); /* overflow counted by the store */
    pthread_mutex_unlock(&s->lock);
}

/* The one conversion of the CUDA runtime errors this module meets. */
static fb_code cuda_code(cudaError_t e, const char *what, fb_err *err)
{
    if (e == cudaSuccess)
        return FB_OK;
    return fb_err_set(err, e == cudaErrorMemoryAllocation ? FB_EOOM : FB_EDEVICE, NULL, "%s: %s",
                      what, cudaGetErrorString(e));
}

fb_code fbc_session_open(fbc_session **out, fb_err *err)
{
    fbc_session *s = calloc(1, sizeof *s);
    fb_code rc;

    *out = NULL;
    if (!s)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for a CUPTI session");
    pthread_mutex_init(&s->lock, NULL);
    fbc_store_init(&s->store, 0);
    s->next_id = 1;
    rc = fbc_activity_start(session_sink, s, true, err); /* marks: launch times */
    if (rc) {
        fbc_store_free(&s->store);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return rc;
    }
    *out = s;
    return FB_OK;
}

fb_code fbc_session_begin(fbc_session *s, const char *label, uint64_t *range_id, fb_err *err)
{
    fb_code rc;

    if (s->in_range)
        return fb_err_set(err, FB_ECONFLICT, NULL, "a profiled iteration is already open");
    rc = cuda_code(cudaDeviceSynchronize(), "cudaDeviceSynchronize before profiling", err);
    if (rc)
        return rc;
    s->cur_id = s->next_id++;
    snprintf(s->label, sizeof s->label, "%s", label ? label : "");
    s->t0 = fbc_now();
    rc = fbc_mark_push(s->cur_id, err);
    if (rc)
        return rc;
    s->in_range = true;
    *range_id = s->cur_id;
    return FB_OK;
}

fb_code fbc_session_end(fbc_session *s, fb_err *err)
{
    fb_code rc, pop_rc;
    fbc_rec r;

    if (!s->in_range)
        return fb_err_set(err, FB_ECONFLICT, NULL, "no profiled iteration is open");
    rc = cuda_code(cudaDeviceSynchronize(), "profiled iteration", err);
    pop_rc = fbc_mark_pop(rc ? NULL : err);
    s->in_range = false;
    memset(&r, 0, sizeof r);
    r.kind = FBC_RANGE;
    r.ext_id = s->cur_id;
    r.start = s->t0;
    r.end = fbc_now();
    snprintf(r.name, sizeof r.name, "%s", s->label);
    pthread_mutex_lock(&s->lock);
    (void)fbc_store_add(&s->store, &r);
    pthread_mutex_unlock(&s->lock);
    if (rc == FB_OK)
        rc = pop_rc;
    if (rc == FB_OK)
        rc = fbc_activity_flush(err);
    return rc;
}

fb_code fbc_session_summary(fbc_session *s, uint64_t range_id, const fbc_label *labels,
                            int n_labels, fbc_summary *out, fb_err *err)
{
    fbc_window w;
    fb_code rc;

    pthread_mutex_lock(&s->lock);
    if (!fbc_window_of_range(&s->store, range_id, &w)) {
        pthread_mutex_unlock(&s->lock);
        memset(out, 0, sizeof *out);
        return fb_err_set(err, FB_ENOTFOUND, NULL, "no profiled iteration %llu",
                          (unsigned long long)range_id);
    }
    rc = fbc_summarize(&s->store, &w, labels, n_labels, out, err);
    pthread_mutex_unlock(&s->lock);
    out->dropped += fbc_activity_dropped();
    return rc;
}

fb_code fbc_session_launch_times(fbc_session *s, uint64_t range_id, int n, double *t_ms,
                                 double *wall_ms, int *unmarked, fb_err *err)
{
    fbc_window w;
    fb_code rc;

    pthread_mutex_lock(&s->lock);
    if (!fbc_window_of_range(&s->store, range_id, &w))
        rc = fb_err_set(err, FB_ENOTFOUND, NULL, "no profiled iteration %llu",
                        (unsigned long long)range_id);
    else
        rc = fbc_launch_times(&s->store, &w, n, t_ms, wall_ms, unmarked, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void fbc_session_reset(fbc_session *s)
{
    pthread_mutex_lock(&s->lock);
    fbc_store_clear(&s->store);
    pthread_mutex_unlock(&s->lock);
}

void fbc_session_close(fbc_session *s)
{
    if (!s)
        return;
    if (s->in_range)
        (void)!fbc_mark_pop(NULL); /* closing anyway */
    fbc_activity_stop();
    fbc_store_free(&s->store);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

fb_code fbc_profile_iteration(fbc_session *s, const char *label, fbc_run_fn run, void *ud,
                              const fbc_label *labels, int n_labels, int64_t base_bytes,
                              fb_variant_result *vr, fb_err *err)
{
    fbc_summary sum;
    uint64_t id = 0;
    fb_code rc;

    memset(&sum, 0, sizeof sum);
    rc = fbc_session_begin(s, label, &id, err);
    if (rc)
        return rc;
    rc = run(ud, err);
    if (rc) {
        fb_err ignored;
        (void)!fbc_session_end(s, &ignored); /* the run's error wins */
        return rc;
    }
    rc = fbc_session_end(s, err);
    if (rc == FB_OK)
        rc = fbc_session_summary(s, id, labels, n_labels, &sum, err);
    if (rc == FB_OK)
        fbc_summary_to_variant(&sum, base_bytes, vr);
    fbc_summary_free(&sum);
    return rc;
}
