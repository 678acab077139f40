#include "srv_catalog.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "fb_catalog.h"

#define OFFER_LIST_MAX 256 /* the "(offered: ...)" part of a message */

static bool str_is(const cJSON *item, const char *key, const char *want)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(item, key);
    return cJSON_IsString(v) && strcmp(v->valuestring, want) == 0;
}

static bool array_has(const cJSON *item, const char *key, const char *want)
{
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(item, key))
    {
        if (cJSON_IsString(v) && strcmp(v->valuestring, want) == 0)
            return true;
    }
    return false;
}

/* Joins the strings of item[key] (or of the engines of name's entries, when key
 * is NULL) as "a, b" into buf. */
static const char *offer_list(const cJSON *catalog, const cJSON *item, const char *key,
                              const char *name, char *buf, size_t size)
{
    const cJSON *v, *list = key ? cJSON_GetObjectItemCaseSensitive(item, key) : catalog;
    size_t len = 0;

    buf[0] = '\0';
    cJSON_ArrayForEach(v, list)
    {
        const cJSON *s = key ? v : cJSON_GetObjectItemCaseSensitive(v, "engine");
        if (!key && !str_is(v, "name", name))
            continue;
        if (!cJSON_IsString(s) || len >= size)
            continue;
        len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "", s->valuestring);
    }
    return buf;
}

/* The entry for (name, engine), or for engine "" the native one, else the first. */
static const cJSON *find_entry(const cJSON *catalog, const char *name, const char *engine)
{
    const cJSON *item, *first = NULL;
    cJSON_ArrayForEach(item, catalog)
    {
        if (!str_is(item, "name", name))
            continue;
        if (engine[0] ? str_is(item, "engine", engine) : str_is(item, "engine", "native"))
            return item;
        if (!first)
            first = item;
    }
    return engine[0] ? NULL : first;
}

/* The preferred value when offered, else the entry's first, else "". */
static const char *pick(const cJSON *entry, const char *key, const char *pref1, const char *pref2)
{
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(entry, key), 0);
    if (array_has(entry, key, pref1))
        return pref1;
    if (pref2 && array_has(entry, key, pref2))
        return pref2;
    return cJSON_IsString(first) ? first->valuestring : "";
}

/* Checks that the set value of field is offered, else picks the default. */
static fb_code check_or_pick(const cJSON *entry, const char *key, char *value, const char *pref1,
                             const char *pref2, const char *what, fb_err *err)
{
    char offered[OFFER_LIST_MAX];

    if (!value[0]) {
        snprintf(value, FB_NAME_MAX, "%s", pick(entry, key, pref1, pref2));
        return FB_OK;
    }
    if (array_has(entry, key, value))
        return FB_OK;
    return fb_err_set(err, FB_EUNSUPPORTED, what,
                      "no worker or built-in engine offers %s %s for "
                      "this workload (offered: %s)",
                      what, value, offer_list(NULL, entry, key, NULL, offered, sizeof offered));
}

/* The device: the spec's when offered at all (a job may wait in the queue for
 * a worker to come), else cuda when a CUDA worker has registered for it, else
 * cpu (docs/API.md): a device only built into the server is not a default, or a
 * CPU-only lab would queue jobs for GPUs it does not have. */
static fb_code check_or_pick_device(const cJSON *entry, char *device, fb_err *err)
{
    if (!device[0] && array_has(entry, "registered_devices", "cuda")) {
        snprintf(device, FB_NAME_MAX, "cuda");
        return FB_OK;
    }
    return check_or_pick(entry, "devices", device, "cpu", NULL, "device", err);
}

static fb_code check_variants(const cJSON *entry, const fb_spec *spec, fb_err *err)
{
    char offered[OFFER_LIST_MAX], field[32];

    for (int i = 0; i < spec->n_variants; i++) {
        if (array_has(entry, "variants", spec->variants[i]))
            continue;
        snprintf(field, sizeof field, "variants[%d]", i);
        return fb_err_set(err, FB_EUNSUPPORTED, field, "variant %s is not offered (offered: %s)",
                          spec->variants[i],
                          offer_list(NULL, entry, "variants", NULL, offered, sizeof offered));
    }
    return FB_OK;
}

/* Entry's default variants as a NULL-terminated list pointing into the entry. */
static void default_variants(const cJSON *entry, const char **out)
{
    const cJSON *v;
    int n = 0;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(entry, "variants"))
    {
        if (cJSON_IsString(v) && n < FB_MAX_VARIANTS)
            out[n++] = v->valuestring;
    }
    out[n] = NULL;
}

static fb_code find_checked(const cJSON *catalog, fb_spec *spec, const cJSON **entry, fb_err *err)
{
    char offered[OFFER_LIST_MAX];

    if (!cJSON_IsArray(catalog))
        return fb_err_set(err, FB_EINVAL, NULL, "workload catalog is not an array");
    if (!find_entry(catalog, spec->workload, ""))
        return fb_err_set(err, FB_ENOTFOUND, "workload",
                          "no worker has offered workload %s and no engine built into the server "
                          "has it",
                          spec->workload);
    *entry = find_entry(catalog, spec->workload, spec->engine);
    if (!*entry)
        return fb_err_set(err, FB_EUNSUPPORTED, "engine",
                          "no worker or built-in engine offers workload %s on engine %s "
                          "(offered: %s)",
                          spec->workload, spec->engine,
                          offer_list(catalog, NULL, NULL, spec->workload, offered, sizeof offered));
    return FB_OK;
}

/* Refuses a job whose memory floor (fb_spec_input_bytes) is over what the
 * largest worker of its device takes (the catalog's job_memory_bytes: the
 * workers' memory caps, their GPUs' memory).  No worker has said: no check. */
static void fmt_bytes(char *buf, size_t cap, double bytes)
{
    if (bytes < 1024.0 * 1024.0 * 1024.0)
        snprintf(buf, cap, "%.0f MiB", bytes / (1024.0 * 1024.0));
    else
        snprintf(buf, cap, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
}

static fb_code check_memory(const cJSON *entry, const fb_spec *spec, fb_err *err)
{
    const cJSON *domain = cJSON_GetObjectItemCaseSensitive(entry, "domain");
    const cJSON *budgets = cJSON_GetObjectItemCaseSensitive(entry, "job_memory_bytes");
    const cJSON *budget = cJSON_GetObjectItemCaseSensitive(budgets, spec->device);
    char need_text[32], budget_text[32];
    double need;

    if (!cJSON_IsString(domain) || !cJSON_IsNumber(budget) || !(budget->valuedouble > 0))
        return FB_OK;
    need = fb_spec_input_bytes(spec, domain->valuestring);
    if (need <= budget->valuedouble)
        return FB_OK;
    fmt_bytes(need_text, sizeof need_text, need);
    fmt_bytes(budget_text, sizeof budget_text, budget->valuedouble);
    return fb_err_set(err, FB_EUNSUPPORTED, "batch_size",
                      "%s at batch_size %d needs at least %s (its %s alone), more than the "
                      "%s the largest %s worker gives a job: lower batch_size or the "
                      "params that size the input",
                      spec->workload, spec->batch_size, need_text,
                      strcmp(domain->valuestring, "nlp") == 0 ? "embedding output" : "input",
                      budget_text, spec->device);
}

void srv_catalog_keep_params(const cJSON *catalog, fb_spec *spec)
{
    const cJSON *entry = cJSON_IsArray(catalog) && spec->params
                             ? find_entry(catalog, spec->workload, spec->engine)
                             : NULL;
    const cJSON *allowed = cJSON_GetObjectItemCaseSensitive(entry, "params");
    if (!cJSON_IsArray(allowed))
        return;
    cJSON *p = spec->params->child;
    while (p) {
        cJSON *next = p->next;
        if (p->string && !array_has(entry, "params", p->string))
            cJSON_Delete(cJSON_DetachItemViaPointer(spec->params, p));
        p = next;
    }
}

fb_code srv_catalog_resolve(const cJSON *catalog, fb_spec *spec, fb_err *err)
{
    const char *variants[FB_MAX_VARIANTS + 1];
    const cJSON *entry = NULL, *eng, *bs;
    char device[FB_NAME_MAX];
    /* A param naming a file is checked for its form here, before anything is
     * queued; the worker checks it again where it opens the file. */
    fb_code rc = fb_spec_check_files(spec, err);

    if (!rc)
        rc = find_checked(catalog, spec, &entry, err);

    if (rc)
        return rc;
    eng = cJSON_GetObjectItemCaseSensitive(entry, "engine");
    if (!spec->engine[0] && cJSON_IsString(eng))
        snprintf(spec->engine, sizeof spec->engine, "%s", eng->valuestring);
    rc = check_or_pick_device(entry, spec->device, err);
    if (!rc)
        rc = check_or_pick(entry, "dtypes", spec->dtype, "float32", NULL, "dtype", err);
    if (!rc)
        rc = check_variants(entry, spec, err);
    if (!rc)
        rc = fb_spec_check_unfuse(spec, err);
    if (!rc) /* a key the workload does not take would be ignored: refused */
        rc = fb_catalog_params_check(entry, spec->params, err);
    if (rc)
        return rc;
    snprintf(device, sizeof device, "%s", spec->device);
    bs = cJSON_GetObjectItemCaseSensitive(entry, "default_batch_size");
    default_variants(entry, variants);
    fb_spec_apply_defaults(spec, device, cJSON_IsNumber(bs) && bs->valueint >= 1 ? bs->valueint : 1,
                           variants);
    return check_memory(entry, spec, err);
}
