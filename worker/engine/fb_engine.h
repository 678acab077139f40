/* fb_engine: what an engine gives the run library (the interface; the
 * engines compiled in, and the lookups over them, are in fb_engines.h).
 *
 * An engine lists the workloads it offers and prepares an *instance* of one for a
 * spec.  The instance runs one iteration of a variant at a time, synchronously
 * (on a GPU backend, run() enqueues and the run library times with events; on
 * the CPU it computes), exposes the variant's output for the accuracy gate, and
 * describes a profiled iteration as kernel rows. */
#ifndef FB_ENGINE_H
#define FB_ENGINE_H

#include <stdbool.h>
#include <stddef.h>

#include "fb_catalog.h"
#include "fb_err.h"
#include "fb_result.h"
#include "fb_spec.h"

typedef struct fb_instance fb_instance;

typedef struct fb_instance_ops {
    /* One iteration of variant v (index into spec->variants). */
    FB_MUSTCHECK fb_code (*run)(fb_instance *inst, int v, fb_err *err);
    /* The output of variant v's last run, as float32 values the instance owns
     * (valid until the next run of v or destroy). */
    FB_MUSTCHECK fb_code (*output)(fb_instance *inst, int v, const float **data, size_t *n,
                                   fb_err *err);
    /* One profiled iteration of variant v: fills vr's kernels, kernel_time_ms,
     * busy_ms, idle_ms, fused_kernels, fused_ops, peak_mem_bytes, categories_ms
     * and kernel rows.  Never called while timing. */
    FB_MUSTCHECK fb_code (*profile)(fb_instance *inst, int v, fb_variant_result *vr, fb_err *err);
    void (*destroy)(fb_instance *inst);
    /* Optional (NULL: the run library times run() with CLOCK_MONOTONIC): one
     * timed iteration of v, *ms measured by the engine (a GPU backend: CUDA
     * events on its stream, synchronized before reading). */
    FB_MUSTCHECK fb_code (*timed_run)(fb_instance *inst, int v, double *ms, fb_err *err);
    /* Optional (NULL: the engine explains nothing): after timing and
     * profiling, explains variant fused against variant eager (spec.explain,
     * docs/EXPLAIN.md) given their results' timed samples; *out a JSON object
     * the result takes. */
    FB_MUSTCHECK fb_code (*explain)(fb_instance *inst, int eager, int fused,
                                    const fb_variant_result *ev, const fb_variant_result *fv,
                                    cJSON **out, fb_err *err);
    /* Optional (NULL, or *data NULL: none): an output computed elsewhere that
     * the accuracy gate checks the baseline variant against (an uploaded
     * model's PyTorch eager output, docs/API-EXTENSIONS.md): *n float32
     * values and *what it is, both owned by the instance. */
    FB_MUSTCHECK fb_code (*reference)(fb_instance *inst, const float **data, size_t *n,
                                      const char **what, fb_err *err);
} fb_instance_ops;

struct fb_instance {
    const fb_instance_ops *ops;
    double plan_ms; /* build + plan time, reported apart from latency */
    /* The workload's graph for the result (fb_result.graph), or NULL.  Owned by
     * the instance until the run library takes it after prepare. */
    cJSON *graph;
};

/* Progress of a whole run: the same signature as fb_run.h's fb_progress_fn. */
typedef void (*fb_engine_progress_fn)(void *ud, const char *phase, const char *variant, int done,
                                      int total);

typedef struct fb_engine {
    const char *name; /* "native" */
    /* Workloads offered on device ("cpu", "cuda"); *n set; static storage. */
    const fb_workload_info *(*catalog)(const char *device, int *n);
    /* Builds an instance for a spec whose defaults are applied.  FB_EUNSUPPORTED
     * for an unknown workload/device/dtype/variant, FB_EINVAL (field named) for
     * bad params. */
    FB_MUSTCHECK fb_code (*prepare)(const fb_spec *spec, fb_instance **out, fb_err *err);
    /* Optional (NULL: the run library drives prepare/run/profile itself).  An
     * engine that measures in a process of its own (inductor: the Python runner
     * does warmup, interleaved timing, the gate and profiling) runs the whole
     * benchmark here and fills out's variants, baseline, plan_ms and the env
     * fields it knows (torch, triton); out->env arrives captured.  Fails only
     * when no variant could run. */
    FB_MUSTCHECK fb_code (*run_whole)(const fb_spec *spec, fb_engine_progress_fn progress, void *ud,
                                      fb_result *out, fb_err *err);
    /* Optional, with run_whole: the explanation of a finished result
     * (spec.explain, docs/EXPLAIN.md); *out a JSON object the result takes. */
    FB_MUSTCHECK fb_code (*explain_whole)(const fb_result *r, cJSON **out, fb_err *err);
    /* Optional: called once in a job's process before its memory budget
     * applies, for a spec whose defaults are applied: maps what the engine's
     * libraries keep for the life of the process (threads, OpenBLAS's buffers),
     * so the budget bounds the job's own data and a library never meets it
     * inside a call (OpenBLAS 0.3.21 retries a failed buffer mmap forever). */
    void (*warm)(const fb_spec *spec);
    /* Optional: this machine's limits on device (the roofline a launch is set
     * against): memory bandwidth in GB/s (1e9 bytes) and compute in GFLOP/s,
     * measured on threads threads where the device is the CPU (< 1: the
     * engine's default); seconds of work, done once per process before jobs.
     * FB_EUNSUPPORTED for a device the engine does not measure. */
    FB_MUSTCHECK fb_code (*roofline_measure)(const char *device, int threads, double *gbps,
                                             double *gflops, fb_err *err);
    /* Optional: the limits the engine's profile sets each launch against from
     * now on (0: unknown, no bound), as measured by roofline_measure. */
    void (*roofline_use)(const char *device, double gbps, double gflops);
    /* Optional (NULL: the engine runs none): the workload of a job of an
     * uploaded model on device (its name "model.<id>", no catalog entry: the
     * server resolved the model at submit and the worker fetches what the
     * engine reads, docs/API-EXTENSIONS.md), as a catalog entry of this
     * engine's variants, dtypes and devices; NULL when not on device. */
    const fb_workload_info *(*uploaded)(const char *device);
    /* Optional: reads a model archive someone uploaded (docs/API-EXTENSIONS.md,
     * "Your own models") at path, in a process of its own that holds no
     * database credential and no descriptor of ours, with at most
     * data_limit_mib MiB of data (0: no limit), for at most timeout_s seconds,
     * calling tick(ud) about once a second meanwhile.  *ready, and *detail
     * (malloc'd): the model's info as JSON object text when ready, else why the
     * archive is invalid.  An error when the engine could not tell (the reader
     * did not start, ran out of time or memory, or died).  native_out (NULL:
     * not asked): where to write the model's native form (the file the native
     * engine runs an uploaded model from) when the native engine can run it;
     * nothing is written there otherwise. */
    FB_MUSTCHECK fb_code (*inspect_model)(const char *path, const char *native_out, int timeout_s,
                                          int data_limit_mib, void (*tick)(void *ud), void *ud,
                                          bool *ready, char **detail, fb_err *err);
} fb_engine;

#endif
