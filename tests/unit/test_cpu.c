/* Unit tests of fb_cpu (common/fb_cpu.h): FUSIONBENCH_NATIVE_ISA's values
 * against a CPU with and without AVX-512, and the decision a process makes
 * once from its environment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_cpu.h"

/* wide after parsing value on a CPU with (has) or without AVX-512F; -1 refused. */
static int parse(const char *value, bool has, char *msg, size_t cap)
{
    fb_err err;
    bool wide = !has; /* a value the parse must overwrite */
    fb_err_clear(&err);
    fb_code rc = fb_cpu_isa_parse(value, has, &wide, &err);
    if (msg)
        snprintf(msg, cap, "%s: %s", err.field, err.msg);
    if (rc != FB_OK) {
        assert_int_equal(rc, FB_EINVAL);
        return -1;
    }
    return wide ? 1 : 0;
}

static void test_isa_values(void **state)
{
    (void)state;
    /* unset, empty and auto: the CPU decides */
    assert_int_equal(parse(NULL, true, NULL, 0), 1);
    assert_int_equal(parse(NULL, false, NULL, 0), 0);
    assert_int_equal(parse("", true, NULL, 0), 1);
    assert_int_equal(parse("auto", true, NULL, 0), 1);
    assert_int_equal(parse("AUTO", false, NULL, 0), 0);
    /* avx2 narrows any CPU */
    assert_int_equal(parse("avx2", true, NULL, 0), 0);
    assert_int_equal(parse("AVX2", false, NULL, 0), 0);
    /* avx512 insists: refused, naming the variable, where the CPU lacks it */
    char msg[FB_ERR_MSG_MAX + FB_ERR_FIELD_MAX + 4];
    assert_int_equal(parse("avx512", true, NULL, 0), 1);
    assert_int_equal(parse("avx512", false, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "FUSIONBENCH_NATIVE_ISA: "));
    assert_non_null(strstr(msg, "no AVX-512F"));
}

static void test_isa_refused(void **state)
{
    (void)state;
    char msg[FB_ERR_MSG_MAX + FB_ERR_FIELD_MAX + 4];
    static const char *const bad[] = {"sse", "avx", "avx2 ", "avx-512", "avx512f", "1", NULL};
    for (int i = 0; bad[i]; i++) {
        assert_int_equal(parse(bad[i], true, msg, sizeof msg), -1);
        assert_non_null(strstr(msg, "FUSIONBENCH_NATIVE_ISA: must be avx2, avx512 or auto"));
        assert_non_null(strstr(msg, bad[i])); /* the value, quoted */
    }
    /* a long value is cut in the message, not overflowing it */
    char longv[600];
    memset(longv, 'x', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    assert_int_equal(parse(longv, true, msg, sizeof msg), -1);
    assert_true(strlen(msg) < 200);
}

/* The process's decision: the test runs under ctest once plainly and once
 * as unit.test_cpu_avx2 (FUSIONBENCH_NATIVE_ISA=avx2); either way it agrees
 * with the parse of its own environment, and avx2 is never wide. */
static void test_process_decision(void **state)
{
    (void)state;
    const char *v = getenv(FB_CPU_ISA_ENV);
    __builtin_cpu_init();
    bool has = __builtin_cpu_supports("avx512f");
    int parsed = parse(v, has, NULL, 0), want = parsed < 0 ? has : parsed; /* invalid: unset */
    assert_int_equal(fb_cpu_wide(), want == 1);
    assert_int_equal(fb_cpu_wide(), want == 1); /* decided once, the same */
    assert_int_equal(fb_cpu_narrowed(), has && want == 0);
    if (v && strcmp(v, "avx2") == 0) {
        assert_false(fb_cpu_wide());
        assert_int_equal(fb_cpu_narrowed(), has);
    }
    assert_int_equal(fb_cpu_isa_cli(), parsed < 0 ? 2 : 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isa_values),
        cmocka_unit_test(test_isa_refused),
        cmocka_unit_test(test_process_decision),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
