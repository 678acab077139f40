/* fb_catalog: JSON for GET /api/v1/workloads items and a worker's device.
 * Unknown values (NULL or empty strings, non-positive sizes) are null, never ""
 * or 0, as everywhere in the API. */
#include "fb_catalog.h"

#include <stdio.h>
#include <string.h>

#include "fb_result.h"

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

/* The words of a space-separated list as an array of strings. */
static cJSON *cat_words(const char *list)
{
    cJSON *arr = cJSON_CreateArray();
    for (const char *p = list; arr && *p;) {
        size_t n = strcspn(p, " ");
        cJSON *s = NULL;
        if (n > 0) {
            char word[FB_NAME_MAX];
            snprintf(word, sizeof word, "%.*s", (int)n, p);
            s = cJSON_CreateString(word);
            if (!s || !cJSON_AddItemToArray(arr, s)) {
                cJSON_Delete(s);
                cJSON_Delete(arr);
                return NULL;
            }
        }
        p += n + (p[n] == ' ');
    }
    return arr;
}

cJSON *fb_workload_info_to_json(const fb_workload_info *w)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && fb_json_put(o, "name", cat_str(w->name)) &&
              fb_json_put(o, "engine", cat_str(w->engine)) &&
              fb_json_put(o, "domain", cat_str(w->domain)) &&
              fb_json_put(o, "devices", cat_list(w->devices, FB_MAX_DEVICES)) &&
              fb_json_put(o, "dtypes", cat_list(w->dtypes, FB_MAX_DTYPES)) &&
              fb_json_put(o, "variants", cat_list(w->variants, FB_MAX_VARIANTS)) &&
              fb_json_put(o, "description", cat_str(w->description)) &&
              fb_json_put(o, "default_batch_size", cat_pos(w->default_batch_size)) &&
              (!w->params || fb_json_put(o, "params", cat_words(w->params)));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static bool has_word(const cJSON *arr, const char *key)
{
    const cJSON *v;
    cJSON_ArrayForEach(v, arr)
    {
        if (cJSON_IsString(v) && strcmp(v->valuestring, key) == 0)
            return true;
    }
    return false;
}

fb_code fb_catalog_params_check(const cJSON *entry, const cJSON *params, fb_err *err)
{
    const cJSON *allowed = cJSON_GetObjectItemCaseSensitive(entry, "params"), *p, *v;
    if (!cJSON_IsArray(allowed) || !params)
        return FB_OK;
    cJSON_ArrayForEach(p, params)
    {
        if (!p->string || has_word(allowed, p->string))
            continue;
        char field[FB_ERR_FIELD_MAX], list[FB_ERR_MSG_MAX / 2] = "";
        size_t len = 0;
        cJSON_ArrayForEach(v, allowed)
        {
            if (cJSON_IsString(v) && len < sizeof list)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "",
                                        v->valuestring);
        }
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(entry, "name"));
        const char *engine =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(entry, "engine"));
        snprintf(field, sizeof field, "params.%.60s", p->string);
        return fb_err_set(
            err, FB_EINVAL, field, "%s is not a parameter of %s (engine %s), which takes: %s",
            field, name ? name : "this workload", engine ? engine : "?", list[0] ? list : "none");
    }
    return FB_OK;
}

fb_code fb_workload_params_check(const fb_workload_info *w, const cJSON *params, fb_err *err)
{
    if (!w || !w->params || !params)
        return FB_OK;
    cJSON *entry = fb_workload_info_to_json(w);
    if (!entry)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory to check params");
    fb_code rc = fb_catalog_params_check(entry, params, err);
    cJSON_Delete(entry);
    return rc;
}

cJSON *fb_device_info_to_json(const fb_device_info *d)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && fb_json_put(o, "kind", cat_str(d->kind)) &&
              fb_json_put(o, "name", cat_str(d->name)) &&
              fb_json_put(o, "uuid", cat_str(d->uuid)) &&
              fb_json_put(o, "memory_bytes", cat_pos(d->memory_bytes)) &&
              fb_json_put(o, "job_memory_bytes", cat_pos(d->job_memory_bytes)) &&
              fb_json_put(o, "driver", cat_str(d->driver)) &&
              fb_json_put(o, "compute_capability", cat_str(d->compute_capability)) &&
              fb_json_put(o, "threads", cat_pos(d->threads));
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
