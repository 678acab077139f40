/* fb_nvml: see fb_nvml.h.  The few NVML entry points used, declared here with
 * their C types (nvml.h's are the same ABI: handles are pointers, enums int). */
#include "fb_nvml.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>

typedef void *nvml_device;
enum { NVML_OK = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_TEMPERATURE_GPU = 0 };

struct fb_nvml {
    void *lib;
    nvml_device dev;
    int (*shutdown)(void);
    int (*clock)(nvml_device, int, unsigned *);
    int (*temp)(nvml_device, int, unsigned *);
    int (*reasons)(nvml_device, unsigned long long *);
};

static void *sym(void *lib, const char *a, const char *b)
{
    void *f = dlsym(lib, a);
    return f || !b ? f : dlsym(lib, b);
}

fb_nvml *fb_nvml_open(const char *uuid)
{
    int (*init)(void), (*by_uuid)(const char *, nvml_device *);
    fb_nvml *n;

    if (!uuid || !uuid[0])
        return NULL;
    n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!n->lib)
        goto fail;
    *(void **)&init = sym(n->lib, "nvmlInit_v2", "nvmlInit");
    *(void **)&by_uuid = sym(n->lib, "nvmlDeviceGetHandleByUUID", NULL);
    *(void **)&n->shutdown = sym(n->lib, "nvmlShutdown", NULL);
    *(void **)&n->clock = sym(n->lib, "nvmlDeviceGetClockInfo", NULL);
    *(void **)&n->temp = sym(n->lib, "nvmlDeviceGetTemperature", NULL);
    /* Renamed "clocks event reasons" in newer drivers; the old name stays. */
    *(void **)&n->reasons = sym(n->lib, "nvmlDeviceGetCurrentClocksEventReasons",
                                "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (!init || !by_uuid || !n->shutdown || init() != NVML_OK)
        goto fail;
    if (by_uuid(uuid, &n->dev) != NVML_OK) {
        n->shutdown();
        goto fail;
    }
    return n;
fail:
    if (n->lib)
        dlclose(n->lib);
    free(n);
    return NULL;
}

static void widen(double *lo, double *hi, double v)
{
    if (isnan(*lo) || v < *lo)
        *lo = v;
    if (isnan(*hi) || v > *hi)
        *hi = v;
}

void fb_nvml_sample(fb_nvml *n, fb_gpu_interference *g)
{
    unsigned v;
    unsigned long long bits;

    if (!n)
        return;
    if (n->clock && n->clock(n->dev, NVML_CLOCK_SM, &v) == NVML_OK)
        widen(&g->sm_mhz_min, &g->sm_mhz_max, v);
    if (n->clock && n->clock(n->dev, NVML_CLOCK_MEM, &v) == NVML_OK)
        widen(&g->mem_mhz_min, &g->mem_mhz_max, v);
    if (n->temp && n->temp(n->dev, NVML_TEMPERATURE_GPU, &v) == NVML_OK &&
        (isnan(g->temp_c_max) || v > g->temp_c_max))
        g->temp_c_max = v;
    if (n->reasons && n->reasons(n->dev, &bits) == NVML_OK)
        g->throttle_reasons |= bits;
    g->n_samples++;
}

void fb_nvml_close(fb_nvml *n)
{
    if (!n)
        return;
    n->shutdown();
    dlclose(n->lib);
    free(n);
}
