/* GPU test of the in-process CUPTI profiler (issue 3: "CUPTI's kernel count
 * equals the engine's launch count"): every workload of the native engine's
 * cuda catalog, eager and fused in float32, one profiled iteration each under
 * fbc_session, compared with the launch count the engine itself reports
 * (profile()'s `kernels`, which fb_engine.h defines as launches per iteration).
 * Our own kernels are one kernel per launch; a cuBLASLt or cuDNN call may run
 * more than one (the first H100 run saw cuBLASLt GEMMs run two, e.g. a GEMM
 * and a reduction), so CUPTI must see at least the engine's count and at most
 * MAX_PER_LIBRARY_CALL kernels per library launch, and exactly the engine's
 * count where the plan calls no library.
 * Also checks the figures hang together (busy within span, kernel time > 0,
 * one row per distinct kernel), and that launch marks are recorded (the
 * explanation's per-launch times: the H100 and H200 runs got none, so every
 * GPU group read 0 ms).  Exits 77 (skipped) without a CUDA device or a cuda
 * catalog; never passes silently. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_engines.h"
#include "fbc_cupti.h"
#include "fbc_session.h"
#include "user_graph.h"

#define SKIP                 77
#define MAX_PER_LIBRARY_CALL 4

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

typedef struct run_ctx {
    fb_instance *inst;
    int v;
} run_ctx;

static fb_code run_once(void *ud, fb_err *err)
{
    run_ctx *rc = ud;
    return rc->inst->ops->run(rc->inst, rc->v, err);
}

/* Launches of the engine's rows that are library calls (cuBLASLt, cuDNN). */
static int64_t library_launches(const fb_variant_result *r)
{
    int64_t n = 0;
    for (int i = 0; i < r->n_kernel_rows; i++) {
        const fb_kernel_row *k = &r->kernel_rows[i];
        if (strncmp(k->name, "cublaslt", 8) == 0 || strncmp(k->name, "cudnn", 5) == 0 ||
            strcmp(k->impl, "cublaslt") == 0 || strcmp(k->impl, "cudnn") == 0)
            n += k->count;
    }
    return n;
}

/* The engine's own count, then CUPTI's, for variant v of inst. */
static void check_variant(const char *workload, fb_instance *inst, int v, const char *vname)
{
    run_ctx rc = {inst, v};
    fb_variant_result eng, prof;
    fbc_session *s = NULL;
    fb_err err;

    fb_err_clear(&err);
    fb_variant_result_init(&eng, vname);
    fb_variant_result_init(&prof, vname);
    for (int i = 0; i < 3; i++) /* warm: library heuristics, workspaces, graph capture */
        CHECK(run_once(&rc, &err) == FB_OK, "%s/%s run: %s", workload, vname, err.msg);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s/%s: sync", workload, vname);
    CHECK(inst->ops->profile(inst, v, &eng, &err) == FB_OK, "%s/%s engine profile: %s", workload,
          vname, err.msg);
    if (fbc_session_open(&s, &err) != FB_OK) {
        CHECK(0, "%s/%s: CUPTI session: %s", workload, vname, err.msg);
        goto out;
    }
    CHECK(fbc_profile_iteration(s, vname, run_once, &rc, NULL, 0, -1, &prof, &err) == FB_OK,
          "%s/%s profiled iteration: %s", workload, vname, err.msg);
    fbc_session_close(s);
    printf("%-20s %-12s engine %3lld  cupti %3lld  kernel %.4f ms  busy %.4f ms  idle %.4f ms  "
           "dropped %lld\n",
           workload, vname, (long long)eng.kernels, (long long)prof.kernels, prof.kernel_time_ms,
           prof.busy_ms, prof.idle_ms, (long long)prof.dropped_records);
    int64_t lib = library_launches(&eng);
    CHECK(eng.kernels > 0 && prof.kernels >= eng.kernels &&
              prof.kernels <= eng.kernels + (MAX_PER_LIBRARY_CALL - 1) * lib,
          "%s/%s: CUPTI saw %lld kernels, the engine launched %lld (%lld library calls)", workload,
          vname, (long long)prof.kernels, (long long)eng.kernels, (long long)lib);
    if (prof.kernels != eng.kernels) /* which kernels the libraries added, for the report */
        for (int i = 0; i < prof.n_kernel_rows; i++)
            printf("    cupti %3d x %s\n", prof.kernel_rows[i].count, prof.kernel_rows[i].name);
    CHECK(prof.kernel_time_ms > 0 && prof.busy_ms > 0, "%s/%s: no kernel time", workload, vname);
    /* The union of intervals can never exceed their sum (kernels + copies). */
    double copies = isnan(prof.categories_ms[FB_KC_COPY]) ? 0 : prof.categories_ms[FB_KC_COPY];
    CHECK(prof.busy_ms <= prof.kernel_time_ms + copies + 1e-9 && prof.idle_ms >= 0,
          "%s/%s: busy %.6f over the summed time", workload, vname, prof.busy_ms);
    CHECK(prof.n_kernel_rows >= 1, "%s/%s: no kernel rows", workload, vname);
    CHECK(prof.dropped_records == 0, "%s/%s: %lld records dropped", workload, vname,
          (long long)prof.dropped_records);
out:
    free(eng.kernel_rows);
    free(prof.kernel_rows);
    free(eng.samples_ms);
    free(prof.samples_ms);
}

static void check_workload(const fb_engine *e, const fb_workload_info *w)
{
    static const char *const variants[] = {"eager", "fused", NULL};
    fb_instance *inst = NULL;
    fb_spec spec;
    fb_err err;

    fb_spec_init(&spec);
    fb_err_clear(&err);
    snprintf(spec.workload, sizeof spec.workload, "%s", w->name);
    snprintf(spec.dtype, sizeof spec.dtype, "float32");
    fb_spec_apply_defaults(&spec, "cuda", w->default_batch_size, variants);
    snprintf(spec.device, sizeof spec.device, "cuda");
    if (strcmp(w->name, "graph") == 0) { /* the one workload that needs params */
        cJSON_Delete(spec.params);
        if (!(spec.params = cJSON_Parse(USER_GRAPH))) {
            CHECK(0, "graph: bad params JSON");
            fb_spec_free(&spec);
            return;
        }
    }
    if (e->prepare(&spec, &inst, &err) != FB_OK) {
        CHECK(0, "%s: prepare: %s", w->name, err.msg);
    } else {
        for (int v = 0; v < spec.n_variants; v++)
            check_variant(w->name, inst, v, spec.variants[v]);
        inst->ops->destroy(inst);
    }
    fb_spec_free(&spec);
}

/* Two memsets, each inside its own launch mark, in one session range: each
 * gets its device time and no activity is left unmarked. */
static void check_launch_marks(void)
{
    enum { BYTES = 1 << 24 };
    fbc_session *s = NULL;
    void *buf = NULL;
    uint64_t id = 0;
    double t[2] = {0, 0}, wall = 0;
    int unmarked = -1;
    fb_err err;
    fb_err_clear(&err);
    if (cudaMalloc(&buf, BYTES) != cudaSuccess) {
        CHECK(0, "launch marks: cudaMalloc");
        return;
    }
    fb_code rc = fbc_session_open(&s, &err);
    if (!rc)
        rc = fbc_session_begin(s, "marks", &id, &err);
    for (int i = 0; i < 2 && !rc; i++) {
        rc = fbc_launch_push((uint64_t)i + 1, &err);
        if (!rc && cudaMemsetAsync(buf, i, BYTES, 0) != cudaSuccess)
            rc = fb_err_set(&err, FB_EDEVICE, NULL, "cudaMemsetAsync");
        fb_code pop = fbc_launch_pop(rc ? NULL : &err);
        rc = rc ? rc : pop;
    }
    if (s && id) {
        fb_code end = fbc_session_end(s, rc ? NULL : &err);
        rc = rc ? rc : end;
    }
    if (!rc)
        rc = fbc_session_launch_times(s, id, 2, t, &wall, &unmarked, &err);
    CHECK(rc == FB_OK, "launch marks: %s", err.msg);
    CHECK(rc || (t[0] > 0 && t[1] > 0 && unmarked == 0 && wall >= t[0]),
          "launch marks: times %.6f, %.6f ms, %d unmarked, wall %.6f ms", t[0], t[1], unmarked,
          wall);
    if (!rc && t[0] > 0 && t[1] > 0 && unmarked == 0)
        printf("ok launch marks: %.4f and %.4f ms, wall %.4f ms\n", t[0], t[1], wall);
    fbc_session_close(s);
    cudaFree(buf);
}

int main(void)
{
    const fb_engine *e = fb_engine_find("native");
    const fb_workload_info *w;
    int count = 0, n = 0;

    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("skipped: no CUDA device\n");
        return SKIP;
    }
    w = e ? e->catalog("cuda", &n) : NULL;
    if (!w || n == 0) {
        printf("skipped: the native engine offers no cuda workloads in this build\n");
        return SKIP;
    }
    check_launch_marks();
    for (int i = 0; i < n; i++)
        check_workload(e, &w[i]);
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
