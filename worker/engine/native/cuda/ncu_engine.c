/* ncu_engine: the native engine's CUDA instance (fb_instance).  prepare()
 * builds the host ctx (a pattern's or a zoo model's buffers and CPU plans; a
 * model's graph goes to the result), lowers both plans
 * onto the GPU (ncu_lower.c) and captures a CUDA graph of each plan a graph
 * variant asks for (captured once, replayed every run).  run() enqueues and
 * waits; timed_run() brackets the enqueue with CUDA events on the stream and
 * synchronizes before reading them (METHOD.md); output() converts the device
 * output to float32 on the device and copies it back; profile() times each
 * launch with its own pair of events. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fb_clock.h"
#include "gr_cost.h"
#include "gr_zoo.h"
#include "ncu_int.h"

typedef struct ncu_instance {
    fb_instance base; /* first, so an fb_instance * is an ncu_instance * */
    ncu_ctx *ctx;
    const fb_spec *spec; /* the caller's, outlives the instance */
    int n_variants;
    int plan[FB_MAX_VARIANTS];   /* spec variant -> NAT_EAGER / NAT_FUSED */
    bool graph[FB_MAX_VARIANTS]; /* replay the plan's CUDA graph */
    cudaGraphExec_t exec[NAT_MAX_VARIANTS];
    cudaEvent_t ev0, ev1;
    float *stage;                     /* device float32 staging for outputs */
    float *host_out[FB_MAX_VARIANTS]; /* each variant's last output, float32 */
} ncu_instance;

/* ---- catalog ---- */

static fb_workload_info cuda_catalog[64];
static int cuda_catalog_n;
static pthread_once_t cuda_catalog_once = PTHREAD_ONCE_INIT;

/* w offered on cuda with the four variants; float16 and bfloat16 too when
 * halves is set. */
static fb_workload_info cuda_info(const fb_workload_info *src, bool halves)
{
    fb_workload_info w = *src;
    memset(w.devices, 0, sizeof w.devices);
    memset(w.dtypes, 0, sizeof w.dtypes);
    memset(w.variants, 0, sizeof w.variants);
    w.devices[0] = "cuda";
    w.dtypes[0] = "float32";
    w.dtypes[1] = halves ? "float16" : NULL;
    w.dtypes[2] = halves ? "bfloat16" : NULL;
    w.variants[0] = "eager";
    w.variants[1] = "fused";
    w.variants[2] = "eager+graph";
    w.variants[3] = "fused+graph";
    return w;
}

/* The pattern suite, then the model zoo (lowered by the same table).  The
 * language models' token ids are stored in the run's dtype, and float16 and
 * bfloat16 hold integers exactly only up to 2048 and 256: those models are
 * float32 only (the embedding's lowering refuses the others by name).
 * Without cuDNN, the workloads that convolve say so. */
static void cuda_catalog_init(void)
{
    const int max = (int)(sizeof cuda_catalog / sizeof cuda_catalog[0]);
    for (int i = 0; nat_patterns[i] && cuda_catalog_n < max; i++) {
        fb_workload_info w = cuda_info(&nat_patterns[i]->info, true);
#ifndef NCU_HAVE_CUDNN
        if (strncmp(w.name, "conv", 4) == 0)
            w.description = "unavailable on cuda: this build has no cuDNN";
#endif
        cuda_catalog[cuda_catalog_n++] = w;
    }
    for (int i = 0; gr_models[i] && cuda_catalog_n < max; i++) {
        bool nlp = strcmp(gr_models[i]->info.domain, "nlp") == 0;
        fb_workload_info w = cuda_info(&gr_models[i]->info, !nlp);
#ifndef NCU_HAVE_CUDNN
        if (!nlp && strcmp(w.domain, "custom") != 0)
            w.description = "unavailable on cuda: this build has no cuDNN";
#endif
        cuda_catalog[cuda_catalog_n++] = w;
    }
}

const fb_workload_info *ncu_catalog(int *n)
{
    pthread_once(&cuda_catalog_once, cuda_catalog_init);
    *n = cuda_catalog_n;
    return cuda_catalog;
}

static fb_workload_info cuda_upload;
static pthread_once_t cuda_upload_once = PTHREAD_ONCE_INIT;

/* float32 only: an uploaded model's token ids, if any, need it (as above). */
static void cuda_upload_init(void)
{
    cuda_upload = cuda_info(&gr_upload.info, false);
}

const fb_workload_info *ncu_uploaded(void)
{
    pthread_once(&cuda_upload_once, cuda_upload_init);
    return &cuda_upload;
}

/* ---- prepare ---- */

static fb_code parse_dtype(const char *s, ncu_dtype *out, fb_err *err)
{
    if (!s[0] || strcmp(s, "float32") == 0)
        *out = NCU_F32;
    else if (strcmp(s, "float16") == 0)
        *out = NCU_F16;
    else if (strcmp(s, "bfloat16") == 0)
        *out = NCU_BF16;
    else
        return fb_err_set(err, FB_EUNSUPPORTED, "dtype", "native cuda has no dtype %s", s);
    return FB_OK;
}

/* Maps the spec's variant names onto plans and graph flags. */
static fb_code map_variants(const fb_spec *spec, ncu_instance *ni, fb_err *err)
{
    static const char *const names[] = {"eager", "fused", "eager+graph", "fused+graph"};
    ni->n_variants = spec->n_variants;
    for (int i = 0; i < spec->n_variants; i++) {
        int k = 0;
        while (k < 4 && strcmp(spec->variants[i], names[k]) != 0)
            k++;
        if (k == 4) {
            char field[FB_ERR_FIELD_MAX];
            snprintf(field, sizeof field, "variants[%d]", i);
            return fb_err_set(err, FB_EUNSUPPORTED, field, "native cuda has no variant %s",
                              spec->variants[i]);
        }
        ni->plan[i] = k % 2 == 0 ? NAT_EAGER : NAT_FUSED;
        ni->graph[i] = k >= 2;
    }
    if (spec->n_variants == 0) { /* defaults not applied: the standard pair */
        ni->n_variants = 2;
        ni->plan[0] = NAT_EAGER;
        ni->plan[1] = NAT_FUSED;
    }
    return FB_OK;
}

/* Fails (FB_EUNSUPPORTED, so the test can skip) when no device is usable. */
static fb_code check_device(fb_err *err)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1)
        return fb_err_set(err, FB_EUNSUPPORTED, "device", "no usable CUDA device (%s)",
                          e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return FB_OK;
}

fb_code ncu_ctx_open(ncu_ctx *ctx, fb_err *err)
{
    fb_code rc = ncu_cuda_check(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking),
                                "cudaStreamCreate", err);
    if (!rc)
        rc = ncu_cublas_check(cublasLtCreate(&ctx->lt), "cublasLtCreate", err);
#ifdef NCU_HAVE_CUDNN
    if (!rc)
        rc = ncu_cudnn_check(cudnnCreate(&ctx->dnn), "cudnnCreate", err);
    if (!rc)
        rc = ncu_cudnn_check(cudnnSetStream(ctx->dnn, ctx->stream), "cudnnSetStream", err);
#endif
    if (!rc) {
        ctx->dev = calloc((size_t)ctx->host->n_bufs + 1, sizeof *ctx->dev);
        if (!ctx->dev)
            rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the device buffer table");
    }
    return rc;
}

void ncu_ctx_close(ncu_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->stream)
        (void)cudaStreamSynchronize(ctx->stream);
    for (int v = 0; v < NAT_MAX_VARIANTS; v++) {
        for (int j = 0; ctx->ls[v] && j < ctx->plans[v].n; j++) {
            ncu_gemm_destroy(&ctx->ls[v][j]);
            ncu_conv_destroy(&ctx->ls[v][j]);
        }
        free(ctx->ls[v]);
        free(ctx->plans[v].launches);
    }
    ncu_mem_release(&ctx->mem);
#ifdef NCU_HAVE_CUDNN
    if (ctx->dnn)
        (void)cudnnDestroy(ctx->dnn);
#endif
    if (ctx->lt)
        (void)cublasLtDestroy(ctx->lt);
    if (ctx->stream)
        (void)cudaStreamDestroy(ctx->stream);
    free(ctx->dev);
    nat_ctx_free(ctx->host);
    free(ctx);
}

/* Checks what the plan's launches reported: launch errors and library
 * failures recorded by the launch fns. */
fb_code ncu_launch_status(ncu_ctx *ctx, const char *what, fb_err *err)
{
    fb_code rc = ncu_cuda_check(cudaGetLastError(), what, err);
    if (!rc && ctx->launch_err.code != FB_OK) {
        rc = ctx->launch_err.code;
        if (err)
            *err = ctx->launch_err;
        fb_err_clear(&ctx->launch_err);
    }
    return rc;
}

/* Captures plan v into a CUDA graph, once. */
static fb_code capture(ncu_instance *ni, int v, fb_err *err)
{
    ncu_ctx *ctx = ni->ctx;
    cudaGraph_t g = NULL;
    if (ni->exec[v])
        return FB_OK;
    fb_code rc =
        ncu_cuda_check(cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal),
                       "begin capture", err);
    if (rc)
        return rc;
    nat_plan_run(&ctx->plans[v]);
    rc = ncu_cuda_check(cudaStreamEndCapture(ctx->stream, &g), "end capture", err);
    if (!rc)
        rc = ncu_launch_status(ctx, "capture", err);
    if (!rc)
        rc = ncu_cuda_check(cudaGraphInstantiate(&ni->exec[v], g, 0), "graph instantiate", err);
    if (g)
        (void)cudaGraphDestroy(g);
    return rc;
}

/* Device-side setup after the host ctx exists: lower, stage, events, graphs. */
static fb_code device_setup(ncu_instance *ni, fb_err *err)
{
    ncu_ctx *ctx = ni->ctx;
    fb_code rc = ncu_ctx_open(ctx, err);
    for (int v = NAT_EAGER; v <= NAT_FUSED && !rc; v++)
        rc = ncu_lower_plan(ctx, v, err);
    if (!rc)
        rc = ncu_cuda_check(cudaStreamSynchronize(ctx->stream), "lowering", err);
    if (!rc)
        rc = ncu_launch_status(ctx, "lowering", err);
    size_t out_n = ctx->plans[NAT_EAGER].out_n > ctx->plans[NAT_FUSED].out_n
                       ? ctx->plans[NAT_EAGER].out_n
                       : ctx->plans[NAT_FUSED].out_n;
    if (!rc)
        rc = ncu_mem_alloc(&ctx->mem, out_n * sizeof(float), NAT_ALL_VARIANTS, "output.staging",
                           (void **)&ni->stage, err);
    if (!rc)
        rc = ncu_cuda_check(cudaEventCreate(&ni->ev0), "cudaEventCreate", err);
    if (!rc)
        rc = ncu_cuda_check(cudaEventCreate(&ni->ev1), "cudaEventCreate", err);
    for (int i = 0; i < ni->n_variants && !rc; i++)
        if (ni->graph[i])
            rc = capture(ni, ni->plan[i], err);
    return rc;
}

static const fb_instance_ops ncu_instance_ops;
static void ncu_destroy(fb_instance *inst);

static fb_code read_params(const fb_spec *spec, ncu_ctx *ctx, fb_err *err)
{
    int64_t ge = 0, tc = 0;
    fb_code rc = parse_dtype(spec->dtype, &ctx->dtype, err);
    if (!rc)
        rc = fb_spec_param_bool(spec, "tf32", false, &ctx->tf32, err);
    if (!rc)
        rc = fb_spec_param_int(spec, "gelu_epilogue", 0, 0, 1, &ge, err);
    if (!rc)
        rc = fb_spec_param_int(spec, "tc_attention", 1, 0, 3, &tc, err);
    ctx->gelu_epilogue = ge != 0;
    ctx->tc_attention = (int)tc;
    return rc;
}

fb_code ncu_prepare(const fb_spec *spec, fb_instance **out, fb_err *err)
{
    *out = NULL;
    ncu_instance *ni = calloc(1, sizeof *ni);
    fb_code rc = FB_OK;
    if (ni)
        ni->ctx = calloc(1, sizeof *ni->ctx);
    if (!ni || !ni->ctx) {
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate an instance");
        goto out;
    }
    ni->base.ops = &ncu_instance_ops;
    ni->spec = spec;
    if (!gr_workload_find(spec->workload)) {
        rc = fb_err_set(err, FB_EUNSUPPORTED, "workload", "native cuda has no workload %s",
                        spec->workload);
        goto out;
    }
    rc = read_params(spec, ni->ctx, err);
    if (!rc)
        rc = map_variants(spec, ni, err);
    if (!rc)
        rc = check_device(err);
    if (rc)
        goto out;
    double t0 = fb_now_ms();
    gr_cost_timer timer; /* the cost planner's groups timed on this device */
    bool cost = false;   /* only a job planned by cost times its groups here */
    rc = gr_planner_from_spec(spec, true, &cost, err);
    if (!rc && cost)
        rc = ncu_cost_timer(ni->ctx, &timer, err);
    if (!rc)
        rc = gr_ctx_build_on(spec, cost ? &timer : NULL, &ni->ctx->host, err);
    if (!rc)
        ni->ctx->host->cost_timer = NULL; /* timer was for the build */
    if (!rc)
        rc = device_setup(ni, err);
    if (rc)
        goto out;
    ni->base.plan_ms = fb_now_ms() - t0;
    ni->base.graph = ni->ctx->host->graph; /* models: the graph goes to the result */
    ni->ctx->host->graph = NULL;
    *out = &ni->base;
    ni = NULL;
out:
    if (ni && ni->ctx)
        ncu_destroy(&ni->base);
    else
        free(ni);
    return rc;
}

/* ---- instance ---- */

static fb_code check_v(const ncu_instance *ni, int v, fb_err *err)
{
    if (v < 0 || v >= ni->n_variants)
        return fb_err_set(err, FB_EINVAL, NULL, "variant index %d out of range", v);
    return FB_OK;
}

/* Enqueues one iteration of variant v: its graph, or its plan launch by launch. */
static fb_code enqueue(ncu_instance *ni, int v, fb_err *err)
{
    ncu_ctx *ctx = ni->ctx;
    if (ni->graph[v])
        return ncu_cuda_check(cudaGraphLaunch(ni->exec[ni->plan[v]], ctx->stream),
                              "cudaGraphLaunch", err);
    nat_plan_run(&ctx->plans[ni->plan[v]]);
    return ncu_launch_status(ctx, "launch", err);
}

static fb_code ncu_run(fb_instance *inst, int v, fb_err *err)
{
    ncu_instance *ni = (ncu_instance *)inst;
    fb_code rc = check_v(ni, v, err);
    if (!rc)
        rc = enqueue(ni, v, err);
    if (!rc)
        rc = ncu_cuda_check(cudaStreamSynchronize(ni->ctx->stream), "run", err);
    if (!rc)
        rc = ncu_launch_status(ni->ctx, "run", err);
    return rc;
}

static fb_code ncu_timed_run(fb_instance *inst, int v, double *ms, fb_err *err)
{
    ncu_instance *ni = (ncu_instance *)inst;
    cudaStream_t s = ni->ctx->stream;
    float elapsed = 0.0f;
    fb_code rc = check_v(ni, v, err);
    if (!rc)
        rc = ncu_cuda_check(cudaEventRecord(ni->ev0, s), "cudaEventRecord", err);
    if (!rc)
        rc = enqueue(ni, v, err);
    if (!rc)
        rc = ncu_cuda_check(cudaEventRecord(ni->ev1, s), "cudaEventRecord", err);
    if (!rc)
        rc = ncu_cuda_check(cudaEventSynchronize(ni->ev1), "cudaEventSynchronize", err);
    if (!rc)
        rc = ncu_launch_status(ni->ctx, "timed run", err);
    if (!rc)
        rc = ncu_cuda_check(cudaEventElapsedTime(&elapsed, ni->ev0, ni->ev1), "elapsed", err);
    *ms = (double)elapsed;
    return rc;
}

static fb_code ncu_output(fb_instance *inst, int v, const float **data, size_t *n, fb_err *err)
{
    ncu_instance *ni = (ncu_instance *)inst;
    fb_code rc = check_v(ni, v, err);
    if (rc)
        return rc;
    const nat_plan *plan = &ni->ctx->plans[ni->plan[v]];
    if (!ni->host_out[v] && !(ni->host_out[v] = malloc(plan->out_n * sizeof(float))))
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate the output copy");
    rc = ncu_cuda_check(
        ncu_convert_from(plan->out, ni->stage, ni->ctx->dtype, plan->out_n, ni->ctx->stream),
        "output convert", err);
    if (!rc)
        rc = ncu_cuda_check(cudaMemcpyAsync(ni->host_out[v], ni->stage, plan->out_n * sizeof(float),
                                            cudaMemcpyDeviceToHost, ni->ctx->stream),
                            "output copy", err);
    if (!rc)
        rc = ncu_cuda_check(cudaStreamSynchronize(ni->ctx->stream), "output copy", err);
    *data = ni->host_out[v];
    *n = plan->out_n;
    return rc;
}

static void ncu_destroy(fb_instance *inst)
{
    ncu_instance *ni = (ncu_instance *)inst;
    if (!ni)
        return;
    for (int v = 0; v < NAT_MAX_VARIANTS; v++)
        if (ni->exec[v])
            (void)cudaGraphExecDestroy(ni->exec[v]);
    if (ni->ev0)
        (void)cudaEventDestroy(ni->ev0);
    if (ni->ev1)
        (void)cudaEventDestroy(ni->ev1);
    for (int v = 0; v < FB_MAX_VARIANTS; v++)
        free(ni->host_out[v]);
    ncu_ctx_close(ni->ctx); /* frees stage with the rest of the device memory */
    cJSON_Delete(ni->base.graph);
    free(ni);
}

const nat_ctx *ncu_instance_host(const fb_instance *inst)
{
    return ((const ncu_instance *)inst)->ctx->host;
}

/* ---- profile ---- */

/* (ncu_int.h) A group's nodes are its CPU launch's ops, in graph order. */
int *ncu_node_launches(const ncu_ctx *ctx, int pv)
{
    const nat_ctx *h = ctx->host;
    const nat_plan *plan = &ctx->plans[pv];
    const int *nl = h->node_launch[pv];
    int n = h->n_graph_nodes, ncpu = h->plans[pv].n;
    int *out = malloc((size_t)(n > 0 ? n : 1) * sizeof *out);
    int *first = malloc((size_t)(ncpu + 1) * sizeof *first);
    int *seen = calloc((size_t)(ncpu + 1), sizeof *seen);
    if (!out || !first || !seen) {
        free(out);
        out = NULL;
        goto done;
    }
    for (int j = 0; j < ncpu; j++)
        first[j] = -1;
    for (int j = plan->n - 1; j >= 0; j--) /* a CPU launch's lowered launches are adjacent */
        if (ctx->ls[pv][j].src >= 0 && ctx->ls[pv][j].src < ncpu)
            first[ctx->ls[pv][j].src] = j;
    for (int i = 0; i < n; i++) {
        int cj = nl[i], k = cj >= 0 && cj < ncpu ? seen[cj]++ : -1;
        out[i] = -1;
        for (int j = k < 0 ? -1 : first[cj]; j >= 0 && j < plan->n && ctx->ls[pv][j].src == cj;
             j++) {
            const ncu_lstate *st = &ctx->ls[pv][j];
            if (k >= st->op0 && k < st->op0 + plan->launches[j].n_ops) {
                out[i] = j;
                break;
            }
        }
    }
done:
    free(first);
    free(seen);
    return out;
}

/* vr's fusion groups from lowered plan pv (the launches that kept a fusion
 * rule: those implementing two or more graph ops) and, for a model, each
 * graph node's group, as the CPU engine reports them. */
static fb_code fusion_groups(const ncu_ctx *ctx, int pv, fb_variant_result *vr, fb_err *err)
{
    if (!gr_plan_fusion_groups(&ctx->plans[pv], vr))
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate fusion groups");
    if (!ctx->host->node_launch[pv] || ctx->host->n_graph_nodes <= 0)
        return gr_plan_node_groups(ctx->host, pv, vr)
                   ? FB_OK
                   : fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate fusion groups");
    int *nl = ncu_node_launches(ctx, pv);
    nat_ctx *view = calloc(1, sizeof *view); /* the host ctx as the lowered plan sees it */
    bool ok = nl && view;
    if (ok) {
        view->n_graph_nodes = ctx->host->n_graph_nodes;
        view->node_launch[pv] = nl;
        view->plans[pv] = ctx->plans[pv];
        ok = gr_plan_node_groups(view, pv, vr);
    }
    free(view);
    free(nl);
    return ok ? FB_OK : fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate node groups");
}

static fb_code ncu_profile(fb_instance *inst, int v, fb_variant_result *vr, fb_err *err)
{
    ncu_instance *ni = (ncu_instance *)inst;
    fb_code rc = check_v(ni, v, err);
    if (!rc)
        rc = ncu_profile_plan(ni->ctx, &ni->ctx->plans[ni->plan[v]], ni->plan[v], vr, err);
    if (!rc)
        rc = fusion_groups(ni->ctx, ni->plan[v], vr, err);
    if (rc || !ni->graph[v])
        return rc;
    /* A graph replays the same launches: rows as measured launch by launch;
     * busy time is the replay's, which is what launch overhead changes. */
    double ms = 0.0;
    rc = ncu_timed_run(inst, v, &ms, err);
    if (!rc) {
        vr->busy_ms = ms;
        vr->idle_ms = ms > vr->kernel_time_ms ? ms - vr->kernel_time_ms : 0.0;
    }
    return rc;
}

/* ---- explain ---- */

/* The profiled rounds take about this long; each counterfactual half of it. */
#define NCU_EXPLAIN_BUDGET_S 3.0

static fb_code ncu_explain(fb_instance *inst, int eager, int fused, const fb_variant_result *ev,
                           const fb_variant_result *fv, cJSON **out, fb_err *err)
{
    ncu_instance *ni = (ncu_instance *)inst;
    *out = NULL;
    if (eager < 0 || eager >= ni->n_variants || fused < 0 || fused >= ni->n_variants ||
        ni->plan[eager] != NAT_EAGER || ni->plan[fused] != NAT_FUSED)
        return fb_err_set(err, FB_EINVAL, NULL, "explain needs the eager and fused variants");
    nat_ex_builds bs = nat_ex_builds_of(ni->spec, eager, fused,
                                        ni->ctx->host->node_launch[NAT_FUSED] != NULL, ncu_prepare);
    return ncu_explain_run(ni->ctx, inst, eager, fused, &bs, ev, fv, NCU_EXPLAIN_BUDGET_S, out,
                           err);
}

static fb_code ncu_reference(fb_instance *inst, const float **data, size_t *n, const char **what,
                             fb_err *err)
{
    const nat_ctx *h = ((ncu_instance *)inst)->ctx->host;
    (void)err;
    *data = h->reference;
    *n = h->reference_n;
    *what = h->reference_what;
    return FB_OK;
}

static const fb_instance_ops ncu_instance_ops = {
    .run = ncu_run,
    .timed_run = ncu_timed_run,
    .output = ncu_output,
    .profile = ncu_profile,
    .destroy = ncu_destroy,
    .explain = ncu_explain,
    .reference = ncu_reference,
};
