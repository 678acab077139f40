/* wk_device: registration data for the worker (docs/DESIGN.md "Queue and reliability"). */
#include "wk_device.h"

#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fb_catalog.h"
#include "fb_engines.h"
#include "fb_run.h"
#include "wk_gpu.h"

#define WK_MAX_ENGINES 8

int64_t wk_device_mem_total(void)
{
    char line[256];
    int64_t kb = -1;
    FILE *f = fopen("/proc/meminfo", "r");

    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %" SCNd64 " kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

const char *const *wk_device_engines(int *n)
{
    static const char *names[WK_MAX_ENGINES + 1];
    int i = 0;

    int k = 0;

    /* An engine offering nothing is not announced (inductor without a usable
     * Python + torch: its catalog, from one runner probe, is empty). */
    for (; fb_engines[i] && k < WK_MAX_ENGINES; i++) {
        int nc = 0, ng = 0;
        (void)fb_engines[i]->catalog("cpu", &nc);
        (void)fb_engines[i]->catalog("cuda", &ng);
        if (nc > 0 || ng > 0)
            names[k++] = fb_engines[i]->name;
    }
    names[k] = NULL;
    *n = k;
    return names;
}

/* Takes ownership of j: prints it unformatted into *out and deletes it. */
static fb_code print_owned(cJSON *j, char **out, fb_err *err)
{
    *out = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!*out)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for registration JSON");
    return FB_OK;
}

/* The GPU's registration: fb_device_info plus the stack versions (the
 * /workers "device" object may carry more than docs/API.md lists). */
static cJSON *gpu_device_json(const fb_gpu *g)
{
    fb_device_info d;
    cJSON *o;

    memset(&d, 0, sizeof d);
    snprintf(d.kind, sizeof d.kind, "cuda");
    snprintf(d.name, sizeof d.name, "%s", g->name);
    snprintf(d.uuid, sizeof d.uuid, "%s", g->uuid);
    snprintf(d.driver, sizeof d.driver, "%s", g->driver);
    snprintf(d.compute_capability, sizeof d.compute_capability, "%s", g->compute_capability);
    d.memory_bytes = g->memory_bytes;
    d.job_memory_bytes = g->memory_bytes;
    d.threads = omp_get_num_procs();
    o = fb_device_info_to_json(&d);
    if (o && (!cJSON_AddStringToObject(o, "cuda", g->cuda) ||
              !cJSON_AddStringToObject(o, "cudnn", g->cudnn) ||
              !cJSON_AddStringToObject(o, "cublas", g->cublas))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *device_json(const wk_config *cfg)
{
    fb_device_info d;
    fb_env env;

    memset(&d, 0, sizeof d);
    fb_env_capture(&env, cfg->device);
    snprintf(d.kind, sizeof d.kind, "%s", cfg->device);
    snprintf(d.name, sizeof d.name, "%s", env.device_name[0] ? env.device_name : env.cpu);
    d.memory_bytes = wk_device_mem_total();
    d.job_memory_bytes =
        cfg->job_memory_mib > 0 ? (int64_t)cfg->job_memory_mib << 20 : d.memory_bytes;
    d.threads = cfg->threads > 0 ? cfg->threads : omp_get_num_procs();
    cJSON *o = fb_device_info_to_json(&d);
    if (o && env.roofline_gbps > 0) { /* measured at start (wk_loop.c) */
        cJSON *r = cJSON_AddObjectToObject(o, "roofline");
        if (!r || !cJSON_AddNumberToObject(r, "triad_gbps", env.roofline_gbps) ||
            !cJSON_AddNumberToObject(r, "gemm_gflops", env.roofline_gflops)) {
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

static cJSON *workloads_json(const char *device)
{
    cJSON *arr = cJSON_CreateArray();

    for (int e = 0; arr && fb_engines[e]; e++) {
        int n = 0;
        const fb_workload_info *w = fb_engines[e]->catalog(device, &n);
        for (int i = 0; w && i < n; i++) {
            cJSON *item = fb_workload_info_to_json(&w[i]);
            if (!item || !cJSON_AddItemToArray(arr, item)) {
                cJSON_Delete(item);
                cJSON_Delete(arr);
                return NULL;
            }
        }
    }
    return arr;
}

fb_code wk_device_registration(const wk_config *cfg, wk_registration *out, fb_err *err)
{
    int n_eng = 0;
    const char *const *eng = wk_device_engines(&n_eng);
    fb_code rc;

    memset(out, 0, sizeof *out);
    if (gethostname(out->host, sizeof out->host) != 0)
        snprintf(out->host, sizeof out->host, "localhost");
    out->host[sizeof out->host - 1] = '\0';
    if (strcmp(cfg->device, "cuda") == 0) {
        rc = wk_gpu_probe(cfg->gpu, &out->gpu, err);
        if (rc == FB_OK)
            rc = print_owned(gpu_device_json(&out->gpu), &out->device_json, err);
    } else {
        rc = print_owned(device_json(cfg), &out->device_json, err);
    }
    if (rc == FB_OK)
        rc = print_owned(cJSON_CreateStringArray(eng, n_eng), &out->engines_json, err);
    if (rc == FB_OK)
        rc = print_owned(workloads_json(cfg->device), &out->workloads_json, err);
    return rc;
}

void wk_registration_free(wk_registration *r)
{
    cJSON_free(r->device_json);
    cJSON_free(r->engines_json);
    cJSON_free(r->workloads_json);
    memset(r, 0, sizeof *r);
}

db_worker_reg wk_device_reg(const wk_config *cfg, const wk_registration *r)
{
    return (db_worker_reg){.id = cfg->id,
                           .host = r->host,
                           .device_json = r->device_json,
                           .engines_json = r->engines_json,
                           .workloads_json = r->workloads_json};
}
