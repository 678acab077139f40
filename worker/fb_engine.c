/* fb_engine: engine and catalog lookups over fb_engines (fb_engine_list.c). */
#include "fb_engine.h"

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
    cat = e->catalog(device, &n);
    for (int i = 0; cat && i < n; i++) {
        if (strcmp(cat[i].name, workload) == 0)
            return &cat[i];
    }
    return NULL;
}
