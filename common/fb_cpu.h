/* fb_cpu: the vector width of the native engine's CPU kernels.
 *
 * The kernels are built for x86-64-v3 (AVX2 and FMA); their 16-lane forms
 * (packed GEMM, the packed and Winograd convolutions, the 16-lane math) run
 * where the CPU has AVX-512F, chosen at run time, and with them our packed
 * GEMM is the default (elsewhere OpenBLAS, or its 8-lane form when a job asks:
 * nat_kern.h, nat_pw_default).  FUSIONBENCH_NATIVE_ISA narrows that choice:
 * "avx2" runs the 8-lane kernels and the OpenBLAS paths an AVX2-only CPU
 * runs, on any CPU (so the tests check those paths on an
 * AVX-512 machine, and a lab can measure what its AVX2 nodes would); "avx512"
 * insists on the wide kernels (an error where the CPU lacks them); unset,
 * empty or "auto" lets the CPU decide. */
#ifndef FB_CPU_H
#define FB_CPU_H

#include <stdbool.h>

#include "fb_err.h"

#define FB_CPU_ISA_ENV "FUSIONBENCH_NATIVE_ISA"

/* Decides from value (the variable's text, NULL when unset) and whether the
 * CPU has AVX-512F: *wide true for the 16-lane kernels.  FB_EINVAL naming the
 * variable and the value when value is none of the above, or asks for
 * AVX-512 the CPU lacks. */
FB_MUSTCHECK fb_code fb_cpu_isa_parse(const char *value, bool cpu_avx512, bool *wide, fb_err *err);

/* fb_cpu_isa_parse of this process's variable and CPU, for a program's
 * start: 0, or "PROGRAM: FUSIONBENCH_NATIVE_ISA: WHY" on stderr and
 * FB_EXIT_USAGE (fusionbench-run and the worker refuse to start so). */
int fb_cpu_isa_cli(void);

/* The 16-lane kernels run in this process: the CPU has AVX-512F and the
 * variable does not say "avx2" (an invalid value counts as unset here; the
 * programs' fb_cpu_isa_cli refused it first).  Decided once. */
bool fb_cpu_wide(void);

/* True when the variable made the kernels narrower than the CPU allows, so
 * that a result says so (its device name). */
bool fb_cpu_narrowed(void);

#endif
