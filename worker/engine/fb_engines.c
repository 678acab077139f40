/* fb_engines: lookups over the engines compiled in (fb_engine_list.c). */
#include "fb_engines.h"

#include <string.h>

const fb_engine *fb_engine_find(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; fb_engines[i]; i++) {
        if (strcmp(fb_engines[i]->name, name) == 0)
            return fb_engines[i];
    }
    return NULL;
}

const fb_workload_info *fb_engine_workload(const fb_engine *e, const char *device,
                                           const char *workload)
{
    int n = 0;
    const fb_workload_info *cat;

    if (!e || !device || !workload)
        return NULL;
    if (fb_workload_is_upload(workload))
        return e->uploaded ? e->uploaded(device) : NULL;
    cat = e->catalog(device, &n);
    for (int i = 0; cat && i < n; i++) {
        if (strcmp(cat[i].name, workload) == 0)
            return &cat[i];
    }
    return NULL;
}

fb_code fb_roofline_measure(const char *device, int threads, double *gbps, double *gflops,
                            fb_err *err)
{
    *gbps = *gflops = 0;
    for (int i = 0; fb_engines[i]; i++) {
        if (!fb_engines[i]->roofline_measure)
            continue;
        fb_code rc = fb_engines[i]->roofline_measure(device, threads, gbps, gflops, err);
        if (rc != FB_EUNSUPPORTED)
            return rc;
    }
    return fb_err_set(err, FB_EUNSUPPORTED, "device", "no engine here measures a roofline for %s",
                      device ? device : "(no device)");
}

void fb_roofline_use(const char *device, double gbps, double gflops)
{
    for (int i = 0; fb_engines[i]; i++) {
        if (fb_engines[i]->roofline_use)
            fb_engines[i]->roofline_use(device, gbps, gflops);
    }
}

const fb_engine *fb_model_reader(void)
{
    for (int i = 0; fb_engines[i]; i++) {
        if (fb_engines[i]->inspect_model)
            return fb_engines[i];
    }
    return NULL;
}
