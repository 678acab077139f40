/* libFuzzer target for what the fusionbench client reads and prints from the
 * server's JSON (outside input for it): the result's decoder
 * (fb_result_from_json, fb_kernel_rows_from_json) and the table printed from
 * what it decoded, the explanation, the cl_fmt tables and progress lines, and
 * the API error line.  Checked: no crash, leak or undefined behaviour on any
 * JSON; a result that decodes encodes to JSON that decodes to the same JSON;
 * the progress fraction stays in [0, 1] or is -1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_fmt.h"
#include "fb_table.h"

/* A broken round trip: says which, and why, before libFuzzer saves the input. */
static void broken(const char *what, const fb_err *err)
{
    fprintf(stderr, "fuzz_client: %s%s%s%s%s\n", what, err ? ": " : "", err ? err->field : "",
            err && err->field[0] ? ": " : "", err ? err->msg : "");
    abort();
}

/* The result decoded, printed, and round-tripped. */
static void typed(FILE *sink, const cJSON *spec_json, const cJSON *result)
{
    fb_spec spec;
    fb_result r, again;
    fb_err err;

    fb_spec_init(&spec);
    if (spec_json && fb_spec_from_json(spec_json, &spec, &err) != FB_OK) {
        fb_spec_free(&spec);
        fb_spec_init(&spec);
    }
    if (fb_result_from_json(result, &r, &err) == FB_OK) {
        fb_table_print(sink, &spec, &r);
        (void)fb_table_all_ok(&r);
        cJSON *a = fb_result_to_json(&r), *b = NULL;
        if (!a)
            broken("the decoded result does not encode", NULL);
        if (fb_result_from_json(a, &again, &err) != FB_OK)
            broken("the encoded result does not decode", &err);
        b = fb_result_to_json(&again);
        if (!b || !cJSON_Compare(a, b, true))
            broken("the result changes on a second round trip", NULL);
        cJSON_Delete(a);
        cJSON_Delete(b);
        fb_result_free(&again);
    }
    fb_result_free(&r);
    fb_spec_free(&spec);
}

static void kernel_rows(const cJSON *rows)
{
    fb_variant_result v;
    fb_err err;

    fb_variant_result_init(&v, "fused");
    (void)fb_kernel_rows_from_json(rows, "items", &v, &err);
    free(v.kernel_rows);
}

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
        const cJSON *result = cJSON_GetObjectItemCaseSensitive(doc, "result");
        typed(sink, cJSON_GetObjectItemCaseSensitive(doc, "spec"), result ? result : doc);
        kernel_rows(cJSON_IsArray(doc) ? doc : cJSON_GetObjectItemCaseSensitive(doc, "items"));
        fb_table_explain(sink, cJSON_GetObjectItemCaseSensitive(doc, "explain"));
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
