/* fb_run: runs one benchmark as METHOD.md says, with no database.  Shared by
 * fusionbench-run (the CLI) and the worker daemon's job child.
 *
 *   prepare → warmup (each variant) → timed rounds, interleaved
 *   (v0, v1, ..., v0, v1, ...) with CLOCK_MONOTONIC (CPU) around each iteration →
 *   statistics → accuracy gate against the baseline (eager) → one profiled
 *   iteration per variant, after the timed ones → environment capture. */
#ifndef FB_RUN_H
#define FB_RUN_H

#include "fb_engine.h"
#include "fb_result.h"
#include "fb_spec.h"
#include "fb_stats.h" /* statistics moved to proto/ (shared with the server) */

/* Progress: phase is "prepare", "warmup", "timing", "profile", "done";
 * variant may be NULL.  Called at most a few times per second. */
typedef void (*fb_progress_fn)(void *ud, const char *phase, const char *variant, int done,
                               int total);

/* Runs the spec (defaults applied) on its engine and fills *out (initialized
 * here; free with fb_result_free even on error).  A variant that fails
 * (unsupported, error, accuracy) gets its status and message; the call itself
 * fails only when no variant could run at all (e.g. unknown workload). */
FB_MUSTCHECK fb_code fb_run_benchmark(const fb_spec *spec, fb_progress_fn progress, void *ud,
                                      fb_result *out, fb_err *err);

/* Accuracy tolerance of METHOD.md for a dtype (tf32 on → 1e-3 for float32). */
double fb_run_tolerance(const char *dtype, bool tf32);

/* max|out - ref| / max|ref| over n values; 0 when both are all zero, INFINITY
 * when ref is all zero and out is not, NaN when any value is NaN. */
double fb_max_rel_error(const float *out, const float *ref, size_t n);

/* OpenBLAS picks its kernels when it loads, before main, from the CPU models
 * it knows; a model newer than its table gets the "Prescott" fallback (SSE3
 * kernels): OpenBLAS 0.3.21 on an Emerald Rapids VM (model 207) ran eager
 * whisper_tiny's batched GEMMs at half speed (754 -> 381 ms with the right
 * core).  fb_blas_core_for_cpu: the core to name instead, from the CPU's
 * features ("SkylakeX" with AVX-512 F/BW/VL/DQ, "Haswell" with AVX2 and
 * FMA), NULL where core is not that fallback or the CPU has neither; with
 * narrow (FUSIONBENCH_NATIVE_ISA=avx2 on an AVX-512 CPU, fb_cpu.h: the
 * kernels an AVX2-only CPU runs) "Haswell" unless core is already that.
 * fb_blas_fix_core: called first in main; where OPENBLAS_CORETYPE is unset
 * and fb_blas_core_for_cpu names a core, sets it and runs this program again
 * (the file /proc/self/exe links to, so the process keeps its name; the same
 * argv); returns where nothing is to be done or the exec failed (a warning;
 * the run goes on with the fallback). */
const char *fb_blas_core_for_cpu(const char *core, bool narrow);
void fb_blas_fix_core(char **argv);

/* Fills env with what this process can see (CPU model, threads, BLAS, hostname,
 * git revision; GPU fields when the device is CUDA). */
void fb_env_capture(fb_env *env, const char *device);

/* The roofline of device ("cpu" or "cuda") fb_env_capture records for jobs
 * on it from now on, and launches on it are held against (measured once per
 * process: the worker at start, fusionbench-run --roofline; fb_engines.h's
 * fb_roofline_measure), and tells the engines (fb_roofline_use); 0: none.  A job child forked later
 * inherits it. */
void fb_env_set_roofline(const char *device, double gbps, double gflops);

#endif
