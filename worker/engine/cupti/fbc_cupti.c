/* fbc_cupti: CUPTI activity records, in-process sessions (see fbc_cupti.h). */
#include "fbc_cupti.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Process-wide, as CUPTI is.  lock guards the sink and the counters: CUPTI
 * calls the buffer callbacks from its own thread. */
static struct {
    pthread_mutex_t lock;
    fbc_sink_fn sink;
    void *ud;
    CUpti_SubscriberHandle sub;
    bool subscribed, started, api;
    int buffers_out;
    uint64_t dropped, refused;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The kinds we record; KERNEL is deliberately absent (it serializes kernels). */
static const CUpti_ActivityKind fbc_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_MEMORY2,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};
#define FBC_N_KINDS (sizeof fbc_kinds / sizeof fbc_kinds[0])

/* The API kinds, for marks: CUPTI writes an external-correlation record only
 * beside an API activity record ("When a CUPTI activity API record is
 * created while within an external API region and
 * CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION is enabled, the activity API
 * record will be preceded by a CUpti_ActivityExternalCorrelation record",
 * cupti_activity.h), so without these no mark is ever recorded (the H100 and
 * H200 runs: every GPU explanation's launch unmarked).  Their own records
 * are dropped in convert(). */
static const CUpti_ActivityKind fbc_api_kinds[] = {
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
};
#define FBC_N_API_KINDS (sizeof fbc_api_kinds / sizeof fbc_api_kinds[0])

fb_code fbc_cupti_code(CUptiResult r, const char *what, fb_err *err)
{
    const char *s = NULL;

    if (r == CUPTI_SUCCESS)
        return FB_OK;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
        s = "unknown CUPTI error";
    switch (r) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        return fb_err_set(err, FB_EUNAVAIL, NULL,
                          "%s: another profiler already holds CUPTI (Nsight Systems or "
                          "Compute, or a second CUPTI client/injection library); run without "
                          "it to get FusionBench's kernel records (%s)",
                          what, s);
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
        return fb_err_set(err, FB_EUNAVAIL, NULL,
                          "%s: the driver restricts profiling to administrators "
                          "(NVreg_RestrictProfilingToAdminUsers) (%s)",
                          what, s);
    case CUPTI_ERROR_OUT_OF_MEMORY:
        return fb_err_set(err, FB_ENOMEM, NULL, "%s: %s", what, s);
    default:
        return fb_err_set(err, FB_EDEVICE, NULL, "%s: %s (CUPTI error %d)", what, s, (int)r);
    }
}

/* ---- record conversion ---- */

static void conv_kernel(const CUpti_ActivityKernel10 *k, fbc_rec *r)
{
    r->kind = FBC_KERNEL;
    r->start = k->start;
    r->end = k->end;
    r->corr = k->correlationId;
    r->device = k->deviceId;
    r->stream = k->streamId;
    r->grid[0] = k->gridX;
    r->grid[1] = k->gridY;
    r->grid[2] = k->gridZ;
    r->block[0] = k->blockX;
    r->block[1] = k->blockY;
    r->block[2] = k->blockZ;
    snprintf(r->name, sizeof r->name, "%s", k->name ? k->name : "?");
}

static void conv_memcpy(const CUpti_ActivityMemcpy6 *m, fbc_rec *r)
{
    r->kind = FBC_MEMCPY;
    r->start = m->start;
    r->end = m->end;
    r->bytes = m->bytes;
    r->copy_kind = m->copyKind;
    r->corr = m->correlationId;
    r->device = m->deviceId;
    r->stream = m->streamId;
}

static void conv_memset(const CUpti_ActivityMemset4 *m, fbc_rec *r)
{
    r->kind = FBC_MEMSET;
    r->start = m->start;
    r->end = m->end;
    r->bytes = m->bytes;
    r->corr = m->correlationId;
    r->device = m->deviceId;
    r->stream = m->streamId;
}

/* Only device memory counts towards peak device memory. */
static bool conv_memory(const CUpti_ActivityMemory4 *m, fbc_rec *r)
{
    if (m->memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE)
        return false;
    if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
        r->kind = FBC_ALLOC;
    else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
        r->kind = FBC_FREE;
    else
        return false;
    r->start = r->end = m->timestamp;
    r->bytes = m->bytes;
    r->addr = m->address;
    r->corr = m->correlationId;
    r->device = m->deviceId;
    return true;
}

/* false for kinds we do not keep. */
static bool convert(const CUpti_Activity *a, fbc_rec *r)
{
    memset(r, 0, sizeof *r);
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        conv_kernel((const CUpti_ActivityKernel10 *)a, r);
        return true;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        conv_memcpy((const CUpti_ActivityMemcpy6 *)a, r);
        return true;
    case CUPTI_ACTIVITY_KIND_MEMSET:
        conv_memset((const CUpti_ActivityMemset4 *)a, r);
        return true;
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        return conv_memory((const CUpti_ActivityMemory4 *)a, r);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const CUpti_ActivityExternalCorrelation *x = (const CUpti_ActivityExternalCorrelation *)a;
        if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
            r->kind = FBC_EXTCORR;
        else if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1)
            r->kind = FBC_LAUNCH;
        else
            return false;
        r->ext_id = x->externalId;
        r->corr = x->correlationId;
        return true;
    }
    default:
        return false;
    }
}

/* ---- buffer callbacks ---- */

/* Bounded: past FBC_MAX_BUFFERS outstanding we hand CUPTI no buffer, and it
 * drops records (counted) rather than let a runaway process eat the host. */
static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    uint8_t *b = NULL;

    pthread_mutex_lock(&g.lock);
    if (g.buffers_out < FBC_MAX_BUFFERS && (b = aligned_alloc(8, FBC_BUFFER_BYTES)) != NULL)
        g.buffers_out++;
    else
        g.refused++;
    pthread_mutex_unlock(&g.lock);
    *buffer = b;
    *size = b ? FBC_BUFFER_BYTES : 0;
    *max_records = 0; /* as many as fit */
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    CUpti_Activity *a = NULL;
    size_t dropped = 0;
    fbc_rec r;

    (void)size;
    pthread_mutex_lock(&g.lock);
    while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &a) == CUPTI_SUCCESS) {
        if (g.sink && convert(a, &r))
            g.sink(g.ud, &r);
    }
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
        g.dropped += dropped;
    if (buffer)
        g.buffers_out--;
    pthread_mutex_unlock(&g.lock);
    free(buffer);
}

/* Subscribing claims CUPTI's single subscriber slot: it is how a second
 * profiler is detected.  We enable no callback domain. */
static void CUPTIAPI no_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                 const void *data)
{
    (void)ud;
    (void)d;
    (void)id;
    (void)data;
}

static fb_code enable_kinds(bool marks, fb_err *err)
{
    for (size_t i = 0; i < FBC_N_KINDS; i++) {
        fb_code rc = fbc_cupti_code(cuptiActivityEnable(fbc_kinds[i]), "cuptiActivityEnable", err);
        if (rc)
            return rc;
    }
    for (size_t i = 0; marks && i < FBC_N_API_KINDS; i++) {
        g.api = true; /* stop disables them, even after a partial failure */
        fb_code rc =
            fbc_cupti_code(cuptiActivityEnable(fbc_api_kinds[i]), "cuptiActivityEnable", err);
        if (rc)
            return rc;
    }
    return FB_OK;
}

fb_code fbc_activity_start(fbc_sink_fn sink, void *ud, bool marks, fb_err *err)
{
    fb_code rc;

    if (g.started)
        return fb_err_set(err, FB_ECONFLICT, NULL, "a CUPTI session is already open");
    rc = fbc_cupti_code(cuptiSubscribe(&g.sub, (CUpti_CallbackFunc)no_callback, NULL),
                        "cuptiSubscribe", err);
    if (rc)
        return rc;
    g.subscribed = true;
    pthread_mutex_lock(&g.lock);
    g.sink = sink;
    g.ud = ud;
    g.dropped = g.refused = 0;
    pthread_mutex_unlock(&g.lock);
    rc = fbc_cupti_code(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
                        "cuptiActivityRegisterCallbacks", err);
    if (rc == FB_OK)
        rc = enable_kinds(marks, err);
    g.started = true; /* stop undoes whatever part succeeded */
    if (rc)
        fbc_activity_stop();
    return rc;
}

fb_code fbc_activity_flush(fb_err *err)
{
    return fbc_cupti_code(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
                          "cuptiActivityFlushAll", err);
}

void fbc_activity_stop(void)
{
    if (!g.started)
        return;
    (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (size_t i = 0; i < FBC_N_KINDS; i++)
        (void)cuptiActivityDisable(fbc_kinds[i]);
    for (size_t i = 0; g.api && i < FBC_N_API_KINDS; i++)
        (void)cuptiActivityDisable(fbc_api_kinds[i]);
    (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (g.subscribed)
        (void)cuptiUnsubscribe(g.sub);
    pthread_mutex_lock(&g.lock);
    g.sink = NULL;
    g.ud = NULL;
    pthread_mutex_unlock(&g.lock);
    g.subscribed = g.started = g.api = false;
}

uint64_t fbc_activity_dropped(void)
{
    uint64_t n;

    pthread_mutex_lock(&g.lock);
    n = g.dropped;
    pthread_mutex_unlock(&g.lock);
    return n;
}

uint64_t fbc_now(void)
{
    uint64_t t = 0;
    return cuptiGetTimestamp(&t) == CUPTI_SUCCESS ? t : 0;
}

/* The range's marks are kind CUSTOM0, the launches' CUSTOM1: two stacks. */
static fb_code push(CUpti_ExternalCorrelationKind kind, uint64_t id, fb_err *err)
{
    return fbc_cupti_code(cuptiActivityPushExternalCorrelationId(kind, id),
                          "cuptiActivityPushExternalCorrelationId", err);
}

static fb_code pop(CUpti_ExternalCorrelationKind kind, fb_err *err)
{
    uint64_t last = 0;
    return fbc_cupti_code(cuptiActivityPopExternalCorrelationId(kind, &last),
                          "cuptiActivityPopExternalCorrelationId", err);
}

fb_code fbc_mark_push(uint64_t id, fb_err *err)
{
    return push(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id, err);
}

fb_code fbc_mark_pop(fb_err *err)
{
    return pop(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, err);
}

fb_code fbc_launch_push(uint64_t id, fb_err *err)
{
    return push(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, id, err);
}

fb_code fbc_launch_pop(fb_err *err)
{
    return pop(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, err);
}
