/* fbc_range: DRAM bytes read and written over one iteration with CUPTI's range
 * profiler (CUDA 13: cupti_range_profiler.h for the target side,
 * cupti_profiler_host.h for configuration and evaluation).
 *
 * One user range around one iteration, user replay: the iteration is run again
 * for as many passes as the metrics need (dram__bytes_{read,write}.sum need one
 * on Hopper).  Anything the driver refuses becomes a reason, never an error:
 * docs/DESIGN.md wants these figures absent with a reason, not zero. */
#include "fbc_range.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#define FBC_DRAM_MAX_PASSES 16

static const char *fbc_dram_metrics[] = {"dram__bytes_read.sum", "dram__bytes_write.sum"};
#define FBC_N_DRAM 2

typedef struct dram_state {
    CUcontext ctx;
    const char *chip;
    uint8_t *avail;  /* counter availability image (owned) */
    uint8_t *config; /* config image (owned) */
    size_t config_size;
    uint8_t *counters; /* counter data image (owned) */
    size_t counters_size;
    CUpti_Profiler_Host_Object *host;
    CUpti_RangeProfiler_Object *obj;
    bool profiler_init;
} dram_state;

#define CK(call, what)                                                                             \
    do {                                                                                           \
        rc = fbc_cupti_code((call), (what), err);                                                  \
        if (rc)                                                                                    \
            return rc;                                                                             \
    } while (0)

static fb_code dram_device(dram_state *st, fb_err *err)
{
    CUpti_Profiler_Initialize_Params ip = {.structSize =
                                               CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CUpti_Device_GetChipName_Params cp = {.structSize =
                                              CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    CUdevice dev = 0;
    fb_code rc;

    if (cuCtxGetCurrent(&st->ctx) != CUDA_SUCCESS || !st->ctx ||
        cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return fb_err_set(err, FB_EDEVICE, NULL, "no current CUDA context to profile");
    CK(cuptiProfilerInitialize(&ip), "cuptiProfilerInitialize");
    st->profiler_init = true;
    cp.deviceIndex = (size_t)dev;
    CK(cuptiDeviceGetChipName(&cp), "cuptiDeviceGetChipName");
    st->chip = cp.pChipName;
    return FB_OK;
}

static fb_code dram_availability(dram_state *st, fb_err *err)
{
    CUpti_Profiler_GetCounterAvailability_Params ap = {
        .structSize = CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    fb_code rc;

    ap.ctx = st->ctx;
    CK(cuptiProfilerGetCounterAvailability(&ap), "cuptiProfilerGetCounterAvailability");
    st->avail = malloc(ap.counterAvailabilityImageSize ? ap.counterAvailabilityImageSize : 1);
    if (!st->avail)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for the counter availability image");
    ap.pCounterAvailabilityImage = st->avail;
    CK(cuptiProfilerGetCounterAvailability(&ap), "cuptiProfilerGetCounterAvailability");
    return FB_OK;
}

/* Host side: the config image that schedules the two metrics. */
static fb_code dram_config(dram_state *st, fb_err *err)
{
    CUpti_Profiler_Host_Initialize_Params hp = {
        .structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    CUpti_Profiler_Host_ConfigAddMetrics_Params mp = {
        .structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    CUpti_Profiler_Host_GetConfigImageSize_Params sp = {
        .structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    CUpti_Profiler_Host_GetConfigImage_Params gp = {
        .structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    fb_code rc;

    hp.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    hp.pChipName = st->chip;
    hp.pCounterAvailabilityImage = st->avail;
    CK(cuptiProfilerHostInitialize(&hp), "cuptiProfilerHostInitialize");
    st->host = hp.pHostObject;
    mp.pHostObject = st->host;
    mp.ppMetricNames = fbc_dram_metrics;
    mp.numMetrics = FBC_N_DRAM;
    CK(cuptiProfilerHostConfigAddMetrics(&mp), "cuptiProfilerHostConfigAddMetrics");
    sp.pHostObject = st->host;
    CK(cuptiProfilerHostGetConfigImageSize(&sp), "cuptiProfilerHostGetConfigImageSize");
    st->config_size = sp.configImageSize;
    st->config = malloc(st->config_size ? st->config_size : 1);
    if (!st->config)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for the config image");
    gp.pHostObject = st->host;
    gp.configImageSize = st->config_size;
    gp.pConfigImage = st->config;
    CK(cuptiProfilerHostGetConfigImage(&gp), "cuptiProfilerHostGetConfigImage");
    return FB_OK;
}

/* Target side: enable on the context, size and initialize the counter data. */
static fb_code dram_target(dram_state *st, fb_err *err)
{
    CUpti_RangeProfiler_Enable_Params ep = {.structSize =
                                                CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    CUpti_RangeProfiler_GetCounterDataSize_Params dp = {
        .structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params ip = {
        .structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    fb_code rc;

    ep.ctx = st->ctx;
    CK(cuptiRangeProfilerEnable(&ep), "cuptiRangeProfilerEnable");
    st->obj = ep.pRangeProfilerObject;
    dp.pRangeProfilerObject = st->obj;
    dp.pMetricNames = fbc_dram_metrics;
    dp.numMetrics = FBC_N_DRAM;
    dp.maxNumOfRanges = 1;
    dp.maxNumRangeTreeNodes = 1;
    CK(cuptiRangeProfilerGetCounterDataSize(&dp), "cuptiRangeProfilerGetCounterDataSize");
    st->counters_size = dp.counterDataSize;
    st->counters = malloc(st->counters_size ? st->counters_size : 1);
    if (!st->counters)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for the counter data image");
    ip.pRangeProfilerObject = st->obj;
    ip.counterDataSize = st->counters_size;
    ip.pCounterData = st->counters;
    CK(cuptiRangeProfilerCounterDataImageInitialize(&ip),
       "cuptiRangeProfilerCounterDataImageInitialize");
    return FB_OK;
}

static fb_code dram_set_config(dram_state *st, size_t pass, fb_err *err)
{
    CUpti_RangeProfiler_SetConfig_Params cp = {
        .structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    fb_code rc;

    cp.pRangeProfilerObject = st->obj;
    cp.configSize = st->config_size;
    cp.pConfig = st->config;
    cp.counterDataImageSize = st->counters_size;
    cp.pCounterDataImage = st->counters;
    cp.range = CUPTI_UserRange;
    cp.replayMode = CUPTI_UserReplay;
    cp.maxRangesPerPass = 1;
    cp.numNestingLevels = 1;
    cp.minNestingLevel = 1;
    cp.passIndex = pass;
    cp.targetNestingLevel = 1;
    CK(cuptiRangeProfilerSetConfig(&cp), "cuptiRangeProfilerSetConfig");
    return FB_OK;
}

/* One pass: start, push, run, pop, stop.  *done when every pass is submitted.
 * *run_failed tells the caller the error is the iteration's, not CUPTI's. */
static fb_code dram_pass(dram_state *st, fbc_run_fn run, void *ud, bool *done, bool *run_failed,
                         fb_err *err)
{
    CUpti_RangeProfiler_Start_Params sp = {.structSize =
                                               CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    CUpti_RangeProfiler_PushRange_Params pp = {
        .structSize = CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
    CUpti_RangeProfiler_PopRange_Params op = {.structSize =
                                                  CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
    CUpti_RangeProfiler_Stop_Params tp = {.structSize =
                                              CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    fb_code rc, run_rc;

    sp.pRangeProfilerObject = pp.pRangeProfilerObject = st->obj;
    op.pRangeProfilerObject = tp.pRangeProfilerObject = st->obj;
    pp.pRangeName = "iteration";
    CK(cuptiRangeProfilerStart(&sp), "cuptiRangeProfilerStart");
    CK(cuptiRangeProfilerPushRange(&pp), "cuptiRangeProfilerPushRange");
    run_rc = run(ud, err);
    if (run_rc == FB_OK && cuCtxSynchronize() != CUDA_SUCCESS)
        run_rc = fb_err_set(err, FB_EDEVICE, NULL, "iteration under the range profiler failed");
    (void)cuptiRangeProfilerPopRange(&op);
    (void)cuptiRangeProfilerStop(&tp);
    if (run_rc) {
        *run_failed = true;
        return run_rc;
    }
    *done = tp.isAllPassSubmitted != 0;
    return FB_OK;
}

static fb_code dram_evaluate(dram_state *st, double values[FBC_N_DRAM], fb_err *err)
{
    CUpti_RangeProfiler_DecodeData_Params dp = {
        .structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    CUpti_Profiler_Host_EvaluateToGpuValues_Params ep = {
        .structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    fb_code rc;

    dp.pRangeProfilerObject = st->obj;
    CK(cuptiRangeProfilerDecodeData(&dp), "cuptiRangeProfilerDecodeData");
    if (dp.numOfRangeDropped > 0)
        return fb_err_set(err, FB_EDEVICE, NULL, "the range profiler dropped the range");
    ep.pHostObject = st->host;
    ep.pCounterDataImage = st->counters;
    ep.counterDataImageSize = st->counters_size;
    ep.rangeIndex = 0;
    ep.ppMetricNames = fbc_dram_metrics;
    ep.numMetrics = FBC_N_DRAM;
    ep.pMetricValues = values;
    CK(cuptiProfilerHostEvaluateToGpuValues(&ep), "cuptiProfilerHostEvaluateToGpuValues");
    return FB_OK;
}

static void dram_cleanup(dram_state *st)
{
    if (st->obj) {
        CUpti_RangeProfiler_Disable_Params p = {.structSize =
                                                    CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
        p.pRangeProfilerObject = st->obj;
        (void)cuptiRangeProfilerDisable(&p);
    }
    if (st->host) {
        CUpti_Profiler_Host_Deinitialize_Params p = {
            .structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
        p.pHostObject = st->host;
        (void)cuptiProfilerHostDeinitialize(&p);
    }
    if (st->profiler_init) {
        CUpti_Profiler_DeInitialize_Params p = {.structSize =
                                                    CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
        (void)cuptiProfilerDeInitialize(&p);
    }
    free(st->avail);
    free(st->config);
    free(st->counters);
}

/* Everything up to the measurement; an error here is a reason, not a failure. */
static fb_code dram_setup(dram_state *st, fb_err *err)
{
    fb_code rc = dram_device(st, err);
    if (rc == FB_OK)
        rc = dram_availability(st, err);
    if (rc == FB_OK)
        rc = dram_config(st, err);
    if (rc == FB_OK)
        rc = dram_target(st, err);
    return rc;
}

fb_code fbc_dram_measure(fbc_run_fn run, void *ud, fb_variant_result *vr, fb_err *err)
{
    dram_state st;
    double values[FBC_N_DRAM] = {0, 0};
    bool done = false, run_failed = false;
    fb_err why;
    fb_code rc;

    memset(&st, 0, sizeof st);
    fb_err_clear(&why);
    vr->dram_read_bytes = vr->dram_write_bytes = -1;
    rc = dram_setup(&st, &why);
    for (size_t pass = 0; rc == FB_OK && !done && pass < FBC_DRAM_MAX_PASSES; pass++) {
        rc = dram_set_config(&st, pass, &why);
        if (rc == FB_OK)
            rc = dram_pass(&st, run, ud, &done, &run_failed, &why);
    }
    if (rc == FB_OK && !done)
        rc = fb_err_set(&why, FB_EDEVICE, NULL, "the metrics need over %d passes",
                        FBC_DRAM_MAX_PASSES);
    if (rc == FB_OK)
        rc = dram_evaluate(&st, values, &why);
    dram_cleanup(&st);
    if (run_failed) {
        if (err)
            *err = why;
        return rc;
    }
    if (rc) {
        snprintf(vr->dram_reason, sizeof vr->dram_reason, "%s", why.msg);
        return FB_OK;
    }
    vr->dram_read_bytes = (int64_t)values[0];
    vr->dram_write_bytes = (int64_t)values[1];
    vr->dram_reason[0] = '\0';
    return FB_OK;
}
