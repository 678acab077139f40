/* libFuzzer target for what the fusionbench client prints from the server's
 * JSON (outside input for it): fb_table_print (a job's result table), the
 * cl_fmt tables and progress lines, and the API error line.  Checked: no crash,
 * leak or undefined behaviour on any JSON, and the progress fraction stays in
 * [0, 1] or is -1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_fmt.h"
#include "fb_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    char *text = malloc(size + 1), line[512];
    cJSON *doc;

    if (!sink)
        sink = fopen("/dev/null", "w");
    if (!text || !sink)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    cl_fmt_api_error(line, sizeof line, 400, text);
    doc = cJSON_ParseWithLength((const char *)data, size);
    if (doc) {
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(doc, "spec");
        const cJSON *result = cJSON_GetObjectItemCaseSensitive(doc, "result");
        fb_table_print(sink, spec, result ? result : doc);
        (void)fb_table_all_ok(result);
        cl_fmt_job_summary(sink, doc);
        cl_fmt_jobs(sink, doc);
        cl_fmt_results(sink, doc);
        cl_fmt_compare(sink, doc);
        cl_fmt_suite(sink, doc);
        cl_fmt_workers(sink, doc);
        cl_fmt_workloads(sink, doc);
        cl_fmt_progress(line, sizeof line, doc, 1.5);
        cl_fmt_state_line(line, sizeof line, doc, 1.5);
        cl_fmt_state_key(line, sizeof line, doc);
        double f = cl_progress_fraction(cJSON_GetObjectItemCaseSensitive(doc, "progress"));
        if (!(f == -1 || (f >= 0 && f <= 1)))
            abort();
        cJSON_Delete(doc);
    }
    free(text);
    return 0;
}
