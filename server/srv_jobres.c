/* srv_jobres: jobs with their results decoded once (srv_jobres.h). */
#include "srv_jobres.h"

#include <stdlib.h>

#include "fb_log.h"

srv_jobres *srv_jobres_decode(const cJSON *jobs, int *n)
{
    const cJSON *j;
    srv_jobres *jr = calloc((size_t)cJSON_GetArraySize(jobs) + 1, sizeof *jr);
    int i = 0;

    *n = 0;
    if (!jr)
        return NULL;
    cJSON_ArrayForEach(j, jobs)
    {
        srv_jobres *s = &jr[i++];
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "result");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
        const cJSON *bs = cJSON_GetObjectItemCaseSensitive(j, "batch_size");
        fb_err err;

        s->job = j;
        s->id = cJSON_IsNumber(id) ? (int64_t)id->valuedouble : 0;
        s->state = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "state"));
        s->workload = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "workload"));
        s->batch_size = cJSON_IsNumber(bs) ? bs->valueint : 0;
        fb_result_init(&s->r);
        if (!cJSON_IsObject(res))
            continue;
        s->has = fb_result_from_json(res, &s->r, &err) == FB_OK;
        if (!s->has)
            fb_warn("job %lld: its stored result is left out: %s", (long long)s->id, err.msg);
    }
    *n = i;
    return jr;
}

void srv_jobres_free(srv_jobres *jr, int n)
{
    for (int i = 0; jr && i < n; i++)
        fb_result_free(&jr[i].r);
    free(jr);
}
