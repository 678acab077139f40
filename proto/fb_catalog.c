/* fb_catalog: JSON for GET /api/v1/workloads items and a worker's device.
 * Unknown values (NULL or empty strings, non-positive sizes) are null, never ""
 * or 0, as everywhere in the API. */
#include "fb_catalog.h"

#include <string.h>

static bool cat_put(cJSON *o, const char *key, cJSON *item)
{
    if (item && cJSON_AddItemToObject(o, key, item))
        return true;
    cJSON_Delete(item);
    return false;
}

static cJSON *cat_str(const char *s)
{
    return s && s[0] ? cJSON_CreateString(s) : cJSON_CreateNull();
}

/* A positive count or size, else null. */
static cJSON *cat_pos(int64_t v)
{
    return v > 0 ? cJSON_CreateNumber((double)v) : cJSON_CreateNull();
}

/* names is NULL-terminated and holds at most max entries (more are ignored). */
static cJSON *cat_list(const char *const *names, int max)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < max && names[i]; i++) {
        cJSON *s = cJSON_CreateString(names[i]);
        if (!s || !cJSON_AddItemToArray(arr, s)) {
            cJSON_Delete(s);
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

cJSON *fb_workload_info_to_json(const fb_workload_info *w)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cat_put(o, "name", cat_str(w->name)) &&
              cat_put(o, "engine", cat_str(w->engine)) &&
              cat_put(o, "domain", cat_str(w->domain)) &&
              cat_put(o, "devices", cat_list(w->devices, FB_MAX_DEVICES)) &&
              cat_put(o, "dtypes", cat_list(w->dtypes, FB_MAX_DTYPES)) &&
              cat_put(o, "variants", cat_list(w->variants, FB_MAX_VARIANTS)) &&
              cat_put(o, "description", cat_str(w->description)) &&
              cat_put(o, "default_batch_size", cat_pos(w->default_batch_size));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *fb_device_info_to_json(const fb_device_info *d)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cat_put(o, "kind", cat_str(d->kind)) && cat_put(o, "name", cat_str(d->name)) &&
              cat_put(o, "uuid", cat_str(d->uuid)) &&
              cat_put(o, "memory_bytes", cat_pos(d->memory_bytes)) &&
              cat_put(o, "job_memory_bytes", cat_pos(d->job_memory_bytes)) &&
              cat_put(o, "driver", cat_str(d->driver)) &&
              cat_put(o, "compute_capability", cat_str(d->compute_capability)) &&
              cat_put(o, "threads", cat_pos(d->threads));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

bool fb_workload_is_upload(const char *workload)
{
    size_t n = workload && strncmp(workload, "model.", 6) == 0 ? strlen(workload + 6) : 0;

    if (n < 1 || n > 18)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (workload[6 + i] < '0' || workload[6 + i] > '9')
            return false;
    }
    return true;
}
