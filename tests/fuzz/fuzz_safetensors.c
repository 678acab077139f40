/* libFuzzer target: the safetensors header parser (gr_st_parse_header) with a
 * data section whose length comes from the input's first byte, so offsets both
 * inside and outside it are exercised.
 *   build-fuzz/tests/fuzz/fuzz_safetensors -max_total_time=60 <scratch dir>
 * tests/fuzz/corpus/safetensors */
#include <stddef.h>
#include <stdint.h>

#include "gr_st.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    gr_st st = {0};
    fb_err err = {0};
    uint64_t data_len = (uint64_t)data[0] * 64;
    if (gr_st_parse_header((const char *)data + 1, size - 1, data_len, &st, "weights", &err) ==
        FB_OK) {
        for (int i = 0; i < st.n; i++)
            if (st.t[i].end > data_len || st.t[i].begin > st.t[i].end)
                __builtin_trap(); /* accepted offsets always lie in the data */
    }
    gr_st_close(&st);
    return 0;
}
