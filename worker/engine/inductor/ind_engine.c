/* ind_engine: catalog (from one `runner.py --probe`), request and result (see
 * ind_engine.h). */
#include "ind_engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_log.h"
#include "ind_explain.h"
#include "ind_proc.h"

#include <unistd.h>

#define IND_MAX_MODELS       32
#define IND_DESC_MAX         128
#define IND_PROBE_TIMEOUT_MS 120000.0

#define IND_PARAMS_MAX 512

typedef struct ind_model {
    char name[FB_NAME_MAX], domain[16], desc[IND_DESC_MAX];
    /* the params a job of it may name, space-separated (its builder's, the
     * runner's, threads), or "" where the probe listed none (then any) */
    char params[IND_PARAMS_MAX];
} ind_model;

/* What the probe found, once per process (the worker's parent probes at
 * registration; its job children inherit this by fork). */
static struct {
    bool probed, usable, cuda;
    int n;
    ind_model models[IND_MAX_MODELS];
    fb_workload_info cpu[IND_MAX_MODELS], gpu[IND_MAX_MODELS];
} ind_cat;

static const char *const ind_variants_cpu[] = {"eager", "inductor-nofusion", "inductor",
                                               "inductor-max-autotune", NULL};
static const char *const ind_variants_cuda[] = {
    "eager",    "eager+cudagraphs",    "inductor-nofusion",
    "inductor", "inductor+cudagraphs", "inductor-max-autotune",
    NULL};

static void fill_info(fb_workload_info *w, const ind_model *m, const char *device)
{
    const char *const *vs = strcmp(device, "cuda") == 0 ? ind_variants_cuda : ind_variants_cpu;

    memset(w, 0, sizeof *w);
    w->name = m->name;
    w->engine = "inductor";
    w->domain = m->domain;
    w->description = m->desc;
    w->default_batch_size = 1;
    w->devices[0] = device;
    w->dtypes[0] = "float32";
    w->dtypes[1] = "bfloat16";
    w->dtypes[2] = strcmp(device, "cuda") == 0 ? "float16" : NULL;
    for (int i = 0; vs[i] && i < FB_MAX_VARIANTS; i++)
        w->variants[i] = vs[i];
    w->params = m->params[0] ? m->params : NULL;
}

/* Appends the names of the string array arr to dst (space-separated); false
 * when arr is not an array of valid names or they do not fit. */
static bool add_names(char *dst, size_t cap, const cJSON *arr)
{
    const cJSON *v;
    if (!cJSON_IsArray(arr))
        return false;
    cJSON_ArrayForEach(v, arr)
    {
        size_t len = strlen(dst);
        if (!cJSON_IsString(v) || !fb_name_valid(v->valuestring) ||
            (size_t)snprintf(dst + len, cap - len, "%s%s", len ? " " : "", v->valuestring) >=
                cap - len)
            return false;
    }
    return true;
}

/* A model's params: its builder's and the runner's (the probe's lists) and
 * threads (every job may name it: the worker's --threads); "" when the probe
 * lists none. */
static void model_params(ind_model *im, const cJSON *m, const cJSON *probe)
{
    im->params[0] = '\0';
    if (!add_names(im->params, sizeof im->params, cJSON_GetObjectItemCaseSensitive(m, "params")) ||
        !add_names(im->params, sizeof im->params,
                   cJSON_GetObjectItemCaseSensitive(probe, "params")) ||
        strlen(im->params) + sizeof " threads" > sizeof im->params)
        im->params[0] = '\0';
    else
        strcat(im->params, im->params[0] ? " threads" : "threads");
}

static void copy_str(char *dst, size_t cap, const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    snprintf(dst, cap, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

/* Reads the probe line's models into the catalog. */
static void probe_models(const cJSON *probe)
{
    const cJSON *m;

    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(probe, "models"))
    {
        ind_model *im = &ind_cat.models[ind_cat.n];
        if (ind_cat.n >= IND_MAX_MODELS)
            break;
        copy_str(im->name, sizeof im->name, m, "name");
        copy_str(im->domain, sizeof im->domain, m, "domain");
        copy_str(im->desc, sizeof im->desc, m, "description");
        if (!fb_name_valid(im->name))
            continue;
        model_params(im, m, probe);
        fill_info(&ind_cat.cpu[ind_cat.n], im, "cpu");
        fill_info(&ind_cat.gpu[ind_cat.n], im, "cuda");
        ind_cat.n++;
    }
}

/* Runs `runner.py --probe` once; the engine is usable when it answers with a
 * PyTorch whose torch.compile can be tried. */
static void probe_once(void)
{
    static const char *const args[] = {"--probe", NULL};
    ind_proc p;
    fb_err err;
    char *line = NULL, tail[IND_STDERR_TAIL];
    cJSON *j = NULL;
    const char *off = getenv("FUSIONBENCH_INDUCTOR");

    ind_cat.probed = true;
    if (off && strcmp(off, "0") == 0)
        return;
    fb_err_clear(&err);
    if (ind_proc_start(&p, args, NULL, &err) != FB_OK) {
        fb_info("inductor engine off: %s", err.msg);
        return;
    }
    if (ind_proc_line(&p, ind_now_ms() + IND_PROBE_TIMEOUT_MS, &line, &err) == FB_OK && line)
        j = cJSON_Parse(line);
    ind_proc_end(&p, true, tail, sizeof tail);
    if (j && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "compile"))) {
        ind_cat.usable = true;
        ind_cat.cuda = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "cuda"));
        probe_models(j);
    } else {
        fb_info("inductor engine off: %s --probe gave no usable torch (%s)", ind_python(),
                j ? "torch.compile unavailable" : tail);
    }
    cJSON_Delete(j);
}

static const fb_workload_info *ind_catalog(const char *device, int *n)
{
    *n = 0;
    if (!ind_cat.probed)
        probe_once();
    if (!ind_cat.usable || !device)
        return NULL;
    if (strcmp(device, "cpu") == 0) {
        *n = ind_cat.n;
        return ind_cat.cpu;
    }
    if (strcmp(device, "cuda") == 0 && ind_cat.cuda) {
        *n = ind_cat.n;
        return ind_cat.gpu;
    }
    return NULL;
}

/* Jobs of uploaded models (model.<id>): the runner runs an exported program as
 * it runs a model of its zoo, with the zoo's variants, dtypes and devices. */
static const fb_workload_info *ind_uploaded(const char *device)
{
    static fb_workload_info up[2];
    int n = 0;
    const fb_workload_info *cat = ind_catalog(device, &n);
    int k = device && strcmp(device, "cuda") == 0;

    if (!cat || n < 1)
        return NULL;
    up[k] = cat[0];
    up[k].name = "model";
    up[k].domain = "user";
    up[k].description = "An uploaded model (a torch.export archive)";
    up[k].default_batch_size = 1;
    up[k].params = NULL; /* not the zoo model's: any (the server sets params.model) */
    return &up[k];
}

/* ---- request ---- */

/* The roofline of each device ([0] the CPU, [1] the GPU) the worker measured
 * at start (fb_engine.roofline_use; 0: none), which the request hands the
 * runner so its explanation holds kernels against the same limits as the
 * job's rows, and measures nothing again. */
static double roof_gbps[2], roof_gflops[2];

static void ind_roofline_use(const char *device, double gbps, double gflops)
{
    bool gpu = device && strcmp(device, "cuda") == 0;
    roof_gbps[gpu] = gbps;
    roof_gflops[gpu] = gflops;
}

/* {"gbps", "gflops"} of device as the worker measured it, or null. */
static cJSON *roofline_json(const char *device)
{
    bool gpu = device && strcmp(device, "cuda") == 0;
    cJSON *o;

    if (!(roof_gbps[gpu] > 0) || !(roof_gflops[gpu] > 0))
        return cJSON_CreateNull();
    o = cJSON_CreateObject();
    if (o && (!cJSON_AddNumberToObject(o, "gbps", roof_gbps[gpu]) ||
              !cJSON_AddNumberToObject(o, "gflops", roof_gflops[gpu]))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* params.threads becomes the request's threads; the rest pass as params;
 * roofline the device's limits the worker measured (null: none). */
cJSON *ind_request_json(const fb_spec *spec)
{
    cJSON *r = cJSON_CreateObject(), *params = cJSON_Duplicate(spec->params, 1);
    cJSON *threads = params ? cJSON_DetachItemFromObjectCaseSensitive(params, "threads") : NULL;
    cJSON *vs = cJSON_CreateArray();

    for (int v = 0; vs && v < spec->n_variants; v++)
        cJSON_AddItemToArray(vs, cJSON_CreateString(spec->variants[v]));
    if (!r || !params || !vs) {
        cJSON_Delete(r);
        cJSON_Delete(params);
        cJSON_Delete(vs);
        cJSON_Delete(threads);
        return NULL;
    }
    cJSON_AddNumberToObject(r, "protocol", 1);
    cJSON_AddStringToObject(r, "model", spec->workload);
    cJSON_AddStringToObject(r, "device", spec->device);
    cJSON_AddStringToObject(r, "dtype", spec->dtype);
    cJSON_AddNumberToObject(r, "batch_size", spec->batch_size);
    cJSON_AddNumberToObject(r, "warmup", spec->warmup);
    cJSON_AddNumberToObject(r, "iterations", spec->iterations);
    cJSON_AddNumberToObject(r, "timeout_s", spec->timeout_s);
    cJSON_AddBoolToObject(r, "explain", spec->explain);
    cJSON_AddItemToObject(r, "variants", vs);
    cJSON_AddItemToObject(r, "threads", cJSON_IsNumber(threads) ? threads : cJSON_CreateNull());
    if (!cJSON_IsNumber(threads))
        cJSON_Delete(threads);
    cJSON_AddItemToObject(r, "params", params);
    cJSON *roof = roofline_json(spec->device);
    if (!roof) {
        cJSON_Delete(r);
        return NULL;
    }
    cJSON_AddItemToObject(r, "roofline", roof);
    return r;
}

/* ---- one job ---- */

/* Grace on top of the spec's timeout for the runner to start and exit. */
#define IND_TIMEOUT_GRACE_MS 30000.0
#define IND_REQUEST_MAX      (128 * 1024)

/* Writes the request to an unlinked-on-close temp file; path out. */
static fb_code write_request(const fb_spec *spec, char *path, size_t cap, fb_err *err)
{
    cJSON *req = ind_request_json(spec);
    char *text = req ? cJSON_PrintUnformatted(req) : NULL;
    fb_code rc = FB_OK;
    FILE *f = NULL;
    int fd;

    snprintf(path, cap, "/tmp/fb-inductor-request-XXXXXX");
    if (!text) {
        rc = fb_err_set(err, FB_ENOMEM, NULL, "no memory for the runner request");
        goto out;
    }
    if (strlen(text) > IND_REQUEST_MAX) {
        rc = fb_err_set(err, FB_ETOOBIG, "params", "runner request over %d bytes", IND_REQUEST_MAX);
        goto out;
    }
    fd = mkstemp(path);
    f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f || fputs(text, f) < 0) {
        rc = fb_err_set(err, FB_EIO, NULL, "cannot write the runner request");
        if (fd >= 0 && !f)
            close(fd);
    }
out:
    if (f && fclose(f) != 0 && rc == FB_OK)
        rc = fb_err_set(err, FB_EIO, NULL, "cannot write the runner request");
    cJSON_free(text);
    cJSON_Delete(req);
    return rc;
}

static fb_code error_line(const cJSON *j, fb_err *err)
{
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(j, "code");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(j, "message");
    const char *c = cJSON_IsString(code) ? code->valuestring : "error";
    const char *m = cJSON_IsString(msg) ? msg->valuestring : "runner failed";
    fb_code fc = FB_EINTERNAL;

    if (strcmp(c, "unsupported") == 0)
        fc = FB_EUNSUPPORTED;
    else if (strcmp(c, "invalid_argument") == 0)
        fc = FB_EINVAL;
    else if (strcmp(c, "oom") == 0)
        fc = FB_EOOM;
    return fb_err_set(err, fc, fc == FB_EINVAL ? "params" : NULL, "runner: %s", m);
}

/* A progress line → the callback (names from the runner are checked). */
static void progress_line(const cJSON *j, fb_engine_progress_fn progress, void *ud)
{
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(j, "phase");
    const cJSON *va = cJSON_GetObjectItemCaseSensitive(j, "variant");
    const char *variant =
        cJSON_IsString(va) && fb_name_valid(va->valuestring) ? va->valuestring : NULL;

    if (progress && cJSON_IsString(ph) && fb_name_valid(ph->valuestring))
        progress(ud, ph->valuestring, variant,
                 (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "done")),
                 (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "total")));
}

/* Handles one protocol line; *done once the final line (result or error) came. */
static fb_code one_line(const char *line, fb_engine_progress_fn progress, void *ud, fb_result *out,
                        bool *done, fb_err *err)
{
    cJSON *j = cJSON_Parse(line);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    fb_code rc = FB_OK;

    if (!cJSON_IsString(type)) {
        rc = fb_err_set(err, FB_EINTERNAL, NULL, "runner wrote a line that is not protocol");
    } else if (strcmp(type->valuestring, "progress") == 0) {
        progress_line(j, progress, ud);
    } else if (strcmp(type->valuestring, "result") == 0) {
        *done = true;
        rc = ind_result_from_json(j, out, err);
    } else if (strcmp(type->valuestring, "error") == 0) {
        *done = true;
        rc = error_line(j, err);
    }
    cJSON_Delete(j);
    return rc;
}

/* The CUPTI hook: FUSIONBENCH_CUPTI_LIB (set for the worker by whoever deploys
 * the injection library) becomes CUDA_INJECTION64_PATH in the runner's
 * environment only; the runner scrubs it after CUDA starts (runner.py). */
static void injection_env(char *buf, size_t cap, const char **env_extra)
{
    const char *lib = getenv("FUSIONBENCH_CUPTI_LIB");

    env_extra[0] = NULL;
    if (lib && lib[0]) {
        snprintf(buf, cap, "CUDA_INJECTION64_PATH=%s", lib);
        env_extra[0] = buf;
        env_extra[1] = NULL;
    }
}

static fb_code talk(ind_proc *p, const fb_spec *spec, fb_engine_progress_fn progress, void *ud,
                    fb_result *out, fb_err *err)
{
    double deadline = ind_now_ms() + spec->timeout_s * 1e3 + IND_TIMEOUT_GRACE_MS;
    bool done = false;
    fb_code rc = FB_OK;

    while (rc == FB_OK && !done) {
        char *line = NULL;
        rc = ind_proc_line(p, deadline, &line, err);
        if (rc == FB_OK && !line)
            rc = fb_err_set(err, FB_EINTERNAL, NULL, "runner exited without a result");
        if (rc == FB_OK)
            rc = one_line(line, progress, ud, out, &done, err);
    }
    return rc;
}

static fb_code ind_run_whole(const fb_spec *spec, fb_engine_progress_fn progress, void *ud,
                             fb_result *out, fb_err *err)
{
    char path[64], inj[4200], tail[IND_STDERR_TAIL];
    const char *env_extra[2];
    const char *args[] = {"--request", path, NULL};
    ind_proc p;
    fb_code rc = write_request(spec, path, sizeof path, err);

    if (rc != FB_OK)
        return rc;
    injection_env(inj, sizeof inj, env_extra);
    rc = ind_proc_start(&p, args, env_extra, err);
    if (rc == FB_OK) {
        rc = talk(&p, spec, progress, ud, out, err);
        ind_proc_end(&p, true, tail, sizeof tail);
        if (rc == FB_EINTERNAL && tail[0])
            fb_warn("inductor runner stderr (end): %s", tail);
    }
    (void)unlink(path);
    return rc;
}

/* The "model" line of --inspect-model: *ready and *detail (the info object's
 * text, or why the archive is invalid). */
static fb_code model_line(const cJSON *j, bool *ready, char **detail, fb_err *err)
{
    const char *status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "status"));
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(j, "info");
    const char *why = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "error"));

    if (status && strcmp(status, "ready") == 0 && cJSON_IsObject(info)) {
        *ready = true;
        *detail = cJSON_PrintUnformatted(info);
    } else if (status && strcmp(status, "invalid") == 0 && why) {
        *detail = strdup(why);
    } else {
        return fb_err_set(err, FB_EINTERNAL, NULL, "the runner's model line is malformed");
    }
    return *detail ? FB_OK : fb_err_set(err, FB_ENOMEM, NULL, "no memory for a model's info");
}

static fb_code ind_inspect_model(const char *path, const char *native_out, int timeout_s,
                                 int data_limit_mib, void (*tick)(void *ud), void *ud, bool *ready,
                                 char **detail, fb_err *err)
{
    const char *args[] = {"--inspect-model", path, native_out ? "--native-out" : NULL, native_out,
                          NULL};
    char tail[IND_STDERR_TAIL];
    double end = ind_now_ms() + timeout_s * 1e3;
    ind_proc p;
    fb_code rc = ind_proc_start_limited(&p, args, NULL, (long long)data_limit_mib << 20, err);

    *ready = false;
    *detail = NULL;
    if (rc != FB_OK)
        return rc;
    while (rc == FB_OK && !*detail) {
        double now = ind_now_ms();
        char *line = NULL;
        rc = ind_proc_line(&p, now + 1000 < end ? now + 1000 : end, &line, err);
        if (rc == FB_ETIMEOUT && ind_now_ms() < end) { /* a slice: the caller's heartbeat */
            fb_err_clear(err);
            rc = FB_OK;
            if (tick)
                tick(ud);
            continue;
        }
        if (rc != FB_OK || !line)
            break;
        cJSON *j = cJSON_Parse(line);
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "type"));
        if (type && strcmp(type, "model") == 0)
            rc = model_line(j, ready, detail, err);
        else if (type && strcmp(type, "error") == 0)
            rc = error_line(j, err);
        cJSON_Delete(j);
        if (type && strcmp(type, "error") == 0)
            break;
    }
    ind_proc_end(&p, true, tail, sizeof tail);
    if (rc == FB_ETIMEOUT)
        return fb_err_set(err, FB_ETIMEOUT, NULL, "reading the model took over %d s", timeout_s);
    if (rc == FB_OK && !*detail)
        rc = fb_err_set(err, FB_EINTERNAL, NULL, "the runner ended without an answer%s%s",
                        tail[0] ? ": " : "", tail);
    return rc;
}

static fb_code ind_prepare(const fb_spec *spec, fb_instance **out, fb_err *err)
{
    (void)out;
    return fb_err_set(err, FB_EUNSUPPORTED, "engine",
                      "the inductor engine runs whole benchmarks (run_whole), not %s "
                      "iteration by iteration",
                      spec->workload);
}

const fb_engine ind_engine = {
    .name = "inductor",
    .catalog = ind_catalog,
    .prepare = ind_prepare,
    .run_whole = ind_run_whole,
    .explain_whole = ind_explain,
    .uploaded = ind_uploaded,
    .inspect_model = ind_inspect_model,
    .roofline_use = ind_roofline_use,
};
