/* libFuzzer target: the graph parser of params.graph (gr_from_json) and the
 * dump of what it accepted (gr_to_json).  Any input must give a graph or a clean
 * error naming a field, never a crash, a leak or undefined behaviour.
 *   build-fuzz/tests/fuzz/fuzz_graph -max_total_time=60 <scratch dir> tests/fuzz/corpus/graph */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *j = cJSON_ParseWithLength((const char *)data, size);
    if (!j)
        return 0;
    gr_graph g;
    gr_init(&g);
    fb_err err = {0};
    if (gr_from_json(&g, j, "params.graph", &err) == FB_OK) {
        cJSON *out = gr_to_json(&g);
        cJSON_Delete(out);
    } else if (!err.field[0]) {
        __builtin_trap(); /* every parse error names its field */
    }
    gr_free(&g);
    cJSON_Delete(j);
    return 0;
}
