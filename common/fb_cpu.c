/* fb_cpu: the vector width of the native engine's CPU kernels (fb_cpu.h). */
#include "fb_cpu.h"

#include "fb_parse.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool cpu_has_avx512(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

fb_code fb_cpu_isa_parse(const char *value, bool cpu_avx512, bool *wide, fb_err *err)
{
    if (!value || !value[0] || strcasecmp(value, "auto") == 0) {
        *wide = cpu_avx512;
        return FB_OK;
    }
    if (strcasecmp(value, "avx2") == 0) {
        *wide = false;
        return FB_OK;
    }
    if (strcasecmp(value, "avx512") == 0) {
        if (!cpu_avx512)
            return fb_err_set(err, FB_EINVAL, FB_CPU_ISA_ENV,
                              "asks for AVX-512 kernels, and this CPU has no AVX-512F");
        *wide = true;
        return FB_OK;
    }
    return fb_err_set(err, FB_EINVAL, FB_CPU_ISA_ENV, "must be avx2, avx512 or auto, got \"%.40s\"",
                      value);
}

int fb_cpu_isa_cli(void)
{
    bool wide;
    fb_err err;
    fb_err_clear(&err);
    if (fb_cpu_isa_parse(getenv(FB_CPU_ISA_ENV), cpu_has_avx512(), &wide, &err) == FB_OK)
        return 0;
    return fb_cli_bad_arg(err.field, err.msg);
}

/* -1 undecided, else 0/1; threads that race to decide decide the same. */
static _Atomic int wide_state = -1;

bool fb_cpu_wide(void)
{
    int state = atomic_load_explicit(&wide_state, memory_order_relaxed);
    if (state < 0) {
        bool has = cpu_has_avx512(), wide = has;
        fb_err err;
        fb_err_clear(&err);
        if (fb_cpu_isa_parse(getenv(FB_CPU_ISA_ENV), has, &wide, &err) != FB_OK)
            wide = has;
        state = wide ? 1 : 0;
        atomic_store_explicit(&wide_state, state, memory_order_relaxed);
    }
    return state == 1;
}

bool fb_cpu_narrowed(void)
{
    return cpu_has_avx512() && !fb_cpu_wide();
}
