/* srv_builtin: see srv_builtin.h. */
#include "srv_builtin.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

static bool any_offers(const cJSON *items, const char *device)
{
    const cJSON *item, *dev;
    cJSON_ArrayForEach(item, items)
    {
        cJSON_ArrayForEach(dev, cJSON_GetObjectItemCaseSensitive(item, "devices"))
        {
            if (cJSON_IsString(dev) && strcmp(dev->valuestring, device) == 0)
                return true;
        }
    }
    return false;
}

/* "native/cpu", "native/cuda" or "native/cpu,cuda": the devices built. */
static fb_code source_name(const cJSON *items, char *buf, size_t size, fb_err *err)
{
    bool cpu = any_offers(items, "cpu"), cuda = any_offers(items, "cuda");

    if (!cpu && !cuda)
        return fb_err_set(err, FB_EINTERNAL, NULL, "the built-in catalog names no device");
    snprintf(buf, size, "native/%s%s%s", cpu ? "cpu" : "", cpu && cuda ? "," : "",
             cuda ? "cuda" : "");
    return FB_OK;
}

fb_code srv_builtin_store(db_conn *c, fb_err *err)
{
    cJSON *items = cJSON_Parse(srv_builtin_catalog_json);
    char source[64];
    fb_code rc;

    if (!cJSON_IsArray(items))
        rc = fb_err_set(err, FB_EINTERNAL, NULL, "the built-in catalog is not a JSON array");
    else
        rc = source_name(items, source, sizeof source, err);
    cJSON_Delete(items);
    if (!rc)
        rc = db_catalog_builtin_put(c, source, srv_builtin_catalog_json, err);
    return rc;
}
