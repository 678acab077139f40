/* fb_run: one benchmark, as METHOD.md says (see fb_run.h for the flow).
 *
 * A variant that fails at any step keeps its status and message and drops out of
 * the later steps; the others go on.  The timed loop does nothing but run and
 * read the clock: statistics, checks and profiling all come after it. */
#include "fb_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "fb_clock.h"
#include "fb_engines.h"
#include "fb_gpu.h"
#include "fb_log.h"
#include "fb_nvml.h"
#include "fb_stats.h"

/* Adaptive repetition (METHOD.md in docs/): while a variant is unstable or a
 * speedup's CI is wider than this share of the speedup, more rounds, in
 * chunks, until the time budget (params.time_budget_s; by default as long as
 * the first rounds took, at least 1 s and at most 60 s) or this many times the
 * rounds asked for. */
#define RUN_WIDE_CI          0.10
#define RUN_MAX_ROUNDS_X     10
#define RUN_BUDGET_MIN_S     1
#define RUN_BUDGET_MAX_S     60
#define RUN_BUDGET_PARAM_MAX 3600

/* Timing progress: every this many rounds, and no more often than this. */
#define RUN_PROGRESS_EVERY  10
#define RUN_PROGRESS_MIN_MS 250.0

typedef struct run_state {
    const fb_spec *spec;
    fb_instance *inst;
    fb_result *res;
    fb_progress_fn progress;
    void *ud;
    double last_report_ms;
    int baseline; /* index of the baseline variant */
    bool tf32;
    int64_t budget_s;               /* params.time_budget_s, -1 unset */
    int cap;                        /* samples each variant's array holds */
    fb_code codes[FB_MAX_VARIANTS]; /* why a variant failed, for the call's error */
} run_state;

static void report(run_state *st, const char *phase, const char *variant, int done, int total)
{
    if (st->progress)
        st->progress(st->ud, phase, variant, done, total);
    st->last_report_ms = fb_now_ms();
}

static bool variant_alive(const run_state *st, int v)
{
    return st->res->variants[v].status == FB_VS_OK;
}

/* Marks variant v failed from an engine error: unsupported and out-of-memory keep
 * their own statuses, anything else is an error. */
static void variant_fail(run_state *st, int v, const char *step, const fb_err *e)
{
    fb_variant_result *vr = &st->res->variants[v];

    if (e->code == FB_EUNSUPPORTED)
        vr->status = FB_VS_UNSUPPORTED;
    else if (e->code == FB_EOOM || e->code == FB_ENOMEM)
        vr->status = FB_VS_OOM;
    else
        vr->status = FB_VS_ERROR;
    st->codes[v] = e->code;
    snprintf(vr->message, sizeof vr->message, "%s: %s", step, e->msg[0] ? e->msg : "failed");
    free(vr->samples_ms);
    vr->samples_ms = NULL;
    vr->n_samples = 0;
}

static void run_one(run_state *st, int v, const char *step)
{
    fb_err e;

    fb_err_clear(&e);
    if (st->inst->ops->run(st->inst, v, &e) != FB_OK)
        variant_fail(st, v, step, &e);
}

static void warmup(run_state *st)
{
    int total = st->spec->warmup;

    report(st, "warmup", NULL, 0, total);
    for (int w = 0; w < total; w++) {
        for (int v = 0; v < st->spec->n_variants; v++) {
            if (variant_alive(st, v))
                run_one(st, v, "warmup");
        }
    }
}

/* One timed iteration of v: the engine's own timer when it has one (CUDA
 * events), else CLOCK_MONOTONIC around the run (CPU backend). */
static void time_one(run_state *st, int v, int it)
{
    fb_variant_result *vr = &st->res->variants[v];
    double t0 = fb_now_ms(), ms = 0.0;
    fb_err e;
    fb_code rc;

    fb_err_clear(&e);
    if (st->inst->ops->timed_run)
        rc = st->inst->ops->timed_run(st->inst, v, &ms, &e);
    else
        rc = st->inst->ops->run(st->inst, v, &e);
    if (rc != FB_OK) {
        variant_fail(st, v, "timing", &e);
        return;
    }
    vr->samples_ms[it] = st->inst->ops->timed_run ? ms : fb_now_ms() - t0;
    vr->n_samples = it + 1;
}

/* ---- interference: what else ran while we timed ---- */

typedef struct probe {
    double wall_ms, steal_ms;
    struct rusage ru;
    bool have_ru;
} probe;

/* Steal time of all CPUs so far (the 8th value of /proc/stat's "cpu" line, in
 * USER_HZ ticks), in ms; NaN when unknown (not Linux, not virtualized). */
static double steal_now_ms(void)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    int n;

    if (!f)
        return NAN;
    n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]);
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    return n == 8 && hz > 0 ? (double)v[7] * 1000.0 / (double)hz : NAN;
}

static void probe_take(probe *p, int who)
{
    p->wall_ms = fb_now_ms();
    p->steal_ms = steal_now_ms();
    p->have_ru = getrusage(who, &p->ru) == 0;
}

/* The interference between a and b into f. */
static void probe_diff(const probe *a, const probe *b, fb_interference *f)
{
    f->timed_ms = b->wall_ms - a->wall_ms;
    f->steal_ms = b->steal_ms - a->steal_ms;
    if (a->have_ru && b->have_ru) {
        f->invol_switches = b->ru.ru_nivcsw - a->ru.ru_nivcsw;
        f->minor_faults = b->ru.ru_minflt - a->ru.ru_minflt;
        f->major_faults = b->ru.ru_majflt - a->ru.ru_majflt;
    }
}

/* ---- the timed rounds ---- */

/* Rounds from..to of every variant, in turn.  Every other round runs the
 * variants in reverse order (A B, B A, ...): a variant that always ran right
 * after another would inherit its caches, predictors and clock state, a bias
 * of a few percent that no number of rounds averages out (measured: 1.3% on
 * two identical plans, significant at 180 rounds). */
static void timed_rounds(run_state *st, int from, int to, int total)
{
    int n = st->spec->n_variants;
    for (int it = from; it < to; it++) {
        for (int k = 0; k < n; k++) {
            int v = it % 2 ? n - 1 - k : k;
            if (variant_alive(st, v))
                time_one(st, v, it);
        }
        if ((it + 1) % RUN_PROGRESS_EVERY == 0 && it + 1 < total &&
            fb_now_ms() - st->last_report_ms >= RUN_PROGRESS_MIN_MS)
            report(st, "timing", NULL, it + 1, total);
    }
}

static void compute_stats(run_state *st)
{
    for (int v = 0; v < st->spec->n_variants; v++) {
        fb_variant_result *vr = &st->res->variants[v];
        if (variant_alive(st, v) && vr->n_samples > 0)
            fb_stats_compute(vr->samples_ms, vr->n_samples, &vr->latency);
    }
    fb_result_judge(st->res, st->spec->device);
}

/* True while a variant is unstable or a speedup's CI is wide. */
static bool unsettled(const run_state *st)
{
    for (int v = 0; v < st->spec->n_variants; v++) {
        const fb_variant_result *vr = &st->res->variants[v];
        if (!variant_alive(st, v))
            continue;
        if (vr->unstable)
            return true;
        if (isfinite(vr->speedup) && (vr->speedup_hi - vr->speedup_lo) > RUN_WIDE_CI * vr->speedup)
            return true;
    }
    return false;
}

/* Room for n samples per variant; false (and nothing lost) on ENOMEM. */
static bool grow_samples(run_state *st, int n)
{
    for (int v = 0; v < st->spec->n_variants && n > st->cap; v++) {
        fb_variant_result *vr = &st->res->variants[v];
        if (!vr->samples_ms)
            continue;
        double *p = realloc(vr->samples_ms, (size_t)n * sizeof *p);
        if (!p)
            return false;
        vr->samples_ms = p;
    }
    if (n > st->cap)
        st->cap = n;
    return true;
}

/* NVML for the clocks of a CUDA job's GPU, NULL otherwise or without NVML. */
static fb_nvml *job_nvml(const fb_spec *spec)
{
    fb_gpu g;
    fb_err e;
    fb_err_clear(&e);
    if (strcmp(spec->device, "cuda") != 0 || fb_gpu_query(-1, &g, &e) != FB_OK)
        return NULL;
    return fb_nvml_open(g.uuid);
}

static void timing(run_state *st)
{
    int asked = st->spec->iterations, done = asked, most = asked * RUN_MAX_ROUNDS_X;
    fb_repetition *rep = &st->res->repetition;
    probe p0, p1;
    double t_first, budget_ms, t_extra;

    fb_nvml *nvml = job_nvml(st->spec);

    if (most > FB_MAX_ITERATIONS)
        most = asked > FB_MAX_ITERATIONS ? asked : FB_MAX_ITERATIONS;
    report(st, "timing", NULL, 0, asked);
    fb_nvml_sample(nvml, &st->res->interference.gpu);
    probe_take(&p0, RUSAGE_SELF);
    timed_rounds(st, 0, asked, asked);
    fb_nvml_sample(nvml, &st->res->interference.gpu);
    t_first = fb_now_ms() - p0.wall_ms;
    compute_stats(st);
    budget_ms = st->budget_s >= 0
                    ? (double)st->budget_s * 1000.0
                    : fmin(fmax(t_first, RUN_BUDGET_MIN_S * 1000.0), RUN_BUDGET_MAX_S * 1000.0);
    snprintf(rep->stop, sizeof rep->stop, "stable");
    t_extra = fb_now_ms();
    while (unsettled(st)) {
        int chunk = asked / 2 > 5 ? asked / 2 : 5;
        if (done >= most) {
            snprintf(rep->stop, sizeof rep->stop, "max_rounds");
            break;
        }
        if (fb_now_ms() - t_extra >= budget_ms) {
            snprintf(rep->stop, sizeof rep->stop, "time_budget");
            break;
        }
        if (chunk > most - done)
            chunk = most - done;
        if (!grow_samples(st, done + chunk)) {
            snprintf(rep->stop, sizeof rep->stop, "max_rounds");
            break;
        }
        report(st, "timing", NULL, done, done + chunk);
        timed_rounds(st, done, done + chunk, done + chunk);
        fb_nvml_sample(nvml, &st->res->interference.gpu);
        done += chunk;
        compute_stats(st);
        snprintf(rep->stop, sizeof rep->stop, "converged");
    }
    probe_take(&p1, RUSAGE_SELF);
    probe_diff(&p0, &p1, &st->res->interference);
    fb_nvml_close(nvml);
    rep->rounds_requested = asked;
    rep->rounds = done;
    rep->budget_s = budget_ms / 1000.0;
}

/* Error unless the output is finite and not all zeros: an all-zero output means
 * nothing was computed, and nothing is timed that was not computed. */
static void check_output(run_state *st, int v, const float *data, size_t n)
{
    fb_variant_result *vr = &st->res->variants[v];
    bool nonzero = false;

    for (size_t i = 0; i < n; i++) {
        if (!isfinite(data[i])) {
            vr->status = FB_VS_ERROR;
            snprintf(vr->message, sizeof vr->message,
                     "output contains NaN or Inf (element %zu of %zu)", i, n);
            return;
        }
        nonzero = nonzero || data[i] != 0.0f;
    }
    if (!nonzero || n == 0) {
        vr->status = FB_VS_ERROR;
        snprintf(vr->message, sizeof vr->message, "output is all zeros (%zu elements)", n);
    }
}

static bool get_output(run_state *st, int v, const float **data, size_t *n)
{
    fb_err e;

    fb_err_clear(&e);
    if (st->inst->ops->output(st->inst, v, data, n, &e) != FB_OK) {
        variant_fail(st, v, "output", &e);
        return false;
    }
    check_output(st, v, *data, *n);
    return variant_alive(st, v);
}

/* Compares variant v with the baseline output ref (n values). */
static void gate_one(run_state *st, int v, const float *ref, size_t n)
{
    fb_variant_result *vr = &st->res->variants[v];
    double tol = fb_run_tolerance(st->spec->dtype, st->tf32);
    const float *out;
    size_t on;

    if (!get_output(st, v, &out, &on) || !ref)
        return;
    if (on != n) {
        vr->status = FB_VS_ERROR;
        snprintf(vr->message, sizeof vr->message, "output has %zu elements, baseline %s has %zu",
                 on, st->res->baseline, n);
        return;
    }
    vr->max_rel_error = fb_max_rel_error(out, ref, n);
    if (!(vr->max_rel_error <= tol)) {
        vr->status = FB_VS_ACCURACY_FAILED;
        snprintf(vr->message, sizeof vr->message,
                 "max_rel_error %.3g vs %s exceeds tolerance %.0e for %s", vr->max_rel_error,
                 st->res->baseline, tol, st->spec->dtype);
    }
}

/* The baseline's output (n values) against the instance's reference, an
 * output computed elsewhere (fb_instance_ops.reference): its max_rel_error is
 * then that comparison's, and the variant's "reference" object says against
 * what. */
static void gate_reference(run_state *st, const float *out, size_t n)
{
    fb_variant_result *vr = &st->res->variants[st->baseline];
    double tol = fb_run_tolerance(st->spec->dtype, st->tf32);
    const float *ref = NULL;
    const char *what = NULL;
    size_t rn = 0;
    fb_err e;

    fb_err_clear(&e);
    if (!st->inst->ops->reference)
        return;
    if (st->inst->ops->reference(st->inst, &ref, &rn, &what, &e) != FB_OK) {
        variant_fail(st, st->baseline, "reference", &e);
        return;
    }
    if (!ref)
        return;
    what = what && what[0] ? what : "the reference output";
    if (rn != n) {
        vr->status = FB_VS_ERROR;
        snprintf(vr->message, sizeof vr->message, "output has %zu elements, %s has %zu", n, what,
                 rn);
        return;
    }
    vr->max_rel_error = fb_max_rel_error(out, ref, n);
    cJSON *o = cJSON_CreateObject();
    if (o && cJSON_AddStringToObject(o, "against", what) &&
        cJSON_AddItemToObject(o, "max_rel_error",
                              isfinite(vr->max_rel_error) ? cJSON_CreateNumber(vr->max_rel_error)
                                                          : cJSON_CreateNull()) &&
        cJSON_AddNumberToObject(o, "tolerance", tol) && !vr->extra) {
        snprintf(vr->extra_key, sizeof vr->extra_key, "reference");
        vr->extra = o;
        o = NULL;
    }
    cJSON_Delete(o);
    if (!(vr->max_rel_error <= tol)) {
        vr->status = FB_VS_ACCURACY_FAILED;
        snprintf(vr->message, sizeof vr->message, "max_rel_error %.3g vs %s exceeds tolerance %.0e",
                 vr->max_rel_error, what, tol);
    }
}

/* Accuracy gate: every variant against the baseline, and the baseline against
 * the instance's reference when it has one.  When the baseline itself has no
 * usable output the others are still checked for finite non-zero output, and
 * their max_rel_error stays NaN (not checked). */
static void accuracy_gate(run_state *st)
{
    const float *ref = NULL;
    size_t n = 0;
    int b = st->baseline;

    if (variant_alive(st, b) && get_output(st, b, &ref, &n))
        st->res->variants[b].max_rel_error = 0.0;
    else
        ref = NULL;
    for (int v = 0; v < st->spec->n_variants; v++) {
        if (v != b && variant_alive(st, v))
            gate_one(st, v, ref, n);
    }
    if (ref)
        gate_reference(st, ref, n);
}

/* One profiled iteration per variant that ran, after all timing.  A profiling
 * failure loses the kernel figures (they stay unknown), not the latency. */
static void profile_all(run_state *st)
{
    for (int v = 0; v < st->spec->n_variants; v++) {
        fb_variant_result *vr = &st->res->variants[v];
        fb_err e;

        if (vr->status != FB_VS_OK && vr->status != FB_VS_ACCURACY_FAILED)
            continue;
        report(st, "profile", vr->name, v, st->spec->n_variants);
        fb_err_clear(&e);
        if (st->inst->ops->profile(st->inst, v, vr, &e) != FB_OK)
            fb_warn("profile of %s/%s failed: %s", st->spec->workload, vr->name, e.msg);
    }
}

/* {"unavailable": why}, the explanation of a job that has none; NULL on
 * ENOMEM. */
static cJSON *unavailable(const char *why)
{
    cJSON *o = cJSON_CreateObject();
    if (o && !cJSON_AddStringToObject(o, "unavailable", why)) {
        cJSON_Delete(o);
        o = NULL;
    }
    return o;
}

static int variant_named(const run_state *st, const char *name)
{
    for (int v = 0; v < st->spec->n_variants; v++)
        if (strcmp(st->spec->variants[v], name) == 0)
            return v;
    return -1;
}

/* spec.explain: the engine's explanation of fused against eager, or why there
 * is none ({"unavailable": why}); it never fails the job. */
static void explain(run_state *st)
{
    int e = variant_named(st, "eager"), f = variant_named(st, "fused");
    fb_err err;
    cJSON *out = NULL;
    fb_err_clear(&err);
    if (!st->inst->ops->explain)
        fb_err_set(&err, FB_EUNSUPPORTED, NULL, "the %s engine explains nothing on %s",
                   st->spec->engine, st->spec->device);
    else if (e < 0 || f < 0)
        fb_err_set(&err, FB_EUNSUPPORTED, "variants",
                   "an explanation needs variants eager and fused");
    else if (st->res->variants[e].status != FB_VS_OK || st->res->variants[f].status != FB_VS_OK)
        fb_err_set(&err, FB_EUNSUPPORTED, NULL, "eager or fused did not run cleanly");
    else {
        report(st, "explain", NULL, 0, 1);
        if (st->inst->ops->explain(st->inst, e, f, &st->res->variants[e], &st->res->variants[f],
                                   &out, &err) != FB_OK) {
            cJSON_Delete(out);
            out = NULL;
        }
    }
    if (!out) {
        fb_warn("no explanation of %s: %s", st->spec->workload, err.msg);
        out = unavailable(err.msg);
    }
    cJSON_Delete(st->res->explain);
    st->res->explain = out;
}

static fb_code check_spec(const fb_spec *spec, fb_err *err)
{
    if (spec->n_variants < 1 || spec->n_variants > FB_MAX_VARIANTS)
        return fb_err_set(err, FB_EINVAL, "variants", "need 1..%d variants, got %d",
                          FB_MAX_VARIANTS, spec->n_variants);
    if (spec->iterations < 1 || spec->iterations > FB_MAX_ITERATIONS)
        return fb_err_set(err, FB_EINVAL, "iterations", "must be 1..%d, got %d", FB_MAX_ITERATIONS,
                          spec->iterations);
    if (spec->warmup < 0 || spec->warmup > FB_MAX_WARMUP)
        return fb_err_set(err, FB_EINVAL, "warmup", "must be 0..%d, got %d", FB_MAX_WARMUP,
                          spec->warmup);
    return FB_OK;
}

/* Result slots for every variant, samples allocated, baseline chosen. */
static fb_code setup_result(run_state *st, fb_err *err)
{
    const fb_spec *spec = st->spec;
    fb_result *res = st->res;

    st->baseline = 0;
    res->n_variants = spec->n_variants;
    for (int v = 0; v < spec->n_variants; v++) {
        fb_variant_result_init(&res->variants[v], spec->variants[v]);
        res->variants[v].samples_ms = calloc((size_t)spec->iterations, sizeof(double));
        if (!res->variants[v].samples_ms)
            return fb_err_set(err, FB_ENOMEM, NULL, "no memory for %d samples", spec->iterations);
        if (strcmp(spec->variants[v], "eager") == 0)
            st->baseline = v;
    }
    st->cap = spec->iterations;
    snprintf(res->baseline, sizeof res->baseline, "%s", spec->variants[st->baseline]);
    return FB_OK;
}

/* FB_OK when at least one variant produced a measurement; else the first
 * variant's failure becomes the call's error. */
static fb_code any_ran(const run_state *st, fb_err *err)
{
    const fb_variant_result *first = &st->res->variants[0];
    fb_code code = st->codes[0] != FB_OK ? st->codes[0] : FB_EINTERNAL;

    for (int v = 0; v < st->spec->n_variants; v++) {
        fb_vstatus s = st->res->variants[v].status;
        if (s == FB_VS_OK || s == FB_VS_ACCURACY_FAILED)
            return FB_OK;
    }
    return fb_err_set(err, code, "variants", "no variant ran: %s: %s", first->name, first->message);
}

static fb_code prepare(run_state *st, const fb_engine **eng, fb_err *err)
{
    fb_code rc = check_spec(st->spec, err);

    if (rc != FB_OK)
        return rc;
    *eng = fb_engine_find(st->spec->engine);
    if (!*eng)
        return fb_err_set(err, FB_EUNSUPPORTED, "engine", "unknown engine '%s'", st->spec->engine);
    rc = fb_spec_param_bool(st->spec, "tf32", false, &st->tf32, err);
    if (rc == FB_OK)
        rc = fb_spec_param_int(st->spec, "time_budget_s", -1, 0, RUN_BUDGET_PARAM_MAX,
                               &st->budget_s, err);
    if (rc == FB_OK)
        rc = setup_result(st, err);
    if (rc != FB_OK)
        return rc;
    report(st, "prepare", NULL, 0, 1);
    rc = (*eng)->prepare(st->spec, &st->inst, err);
    if (rc == FB_OK) {
        st->res->plan_ms = st->inst->plan_ms;
        st->res->graph = st->inst->graph; /* the result owns it from here */
        st->inst->graph = NULL;
    }
    return rc;
}

/* A whole-run engine's progress, passed on; while it reports its timing
 * phase, the GPU's clocks are read (NVML) as the run library's own timing
 * does: the engine's process is another, but the GPU is the same. */
typedef struct whole_watch {
    fb_progress_fn progress;
    void *ud;
    fb_nvml *nvml;
    fb_gpu_interference gpu;
} whole_watch;

static void whole_progress(void *ud, const char *phase, const char *variant, int done, int total)
{
    whole_watch *w = ud;
    if (w->nvml && phase && strcmp(phase, "timing") == 0)
        fb_nvml_sample(w->nvml, &w->gpu);
    if (w->progress)
        w->progress(w->ud, phase, variant, done, total);
}

/* An engine with run_whole measures in its own process; here only the spec
 * checks, the environment (captured first, the engine adds what it knows),
 * the GPU's clocks, the engine's explanation and "did anything run". */
static fb_code run_whole(const fb_spec *spec, const fb_engine *eng, fb_progress_fn progress,
                         void *ud, fb_result *out, fb_err *err)
{
    fb_code rc = check_spec(spec, err);

    if (rc != FB_OK)
        return rc;
    probe p0, p1;
    whole_watch w = {.progress = progress, .ud = ud, .gpu = out->interference.gpu}; /* NaNs */

    fb_env_capture(&out->env, spec->device);
    w.nvml = job_nvml(spec);
    /* The engine's process is a child, waited for within run_whole: its
     * figures cover the whole process (start, compile, timing) unless the
     * engine reports its timed rounds' own, which replace them. */
    probe_take(&p0, RUSAGE_CHILDREN);
    rc = eng->run_whole(spec, whole_progress, &w, out, err);
    probe_take(&p1, RUSAGE_CHILDREN);
    if (w.gpu.n_samples > 0) { /* the last reading: as the timing ended */
        fb_nvml_sample(w.nvml, &w.gpu);
        out->interference.gpu = w.gpu;
    }
    fb_nvml_close(w.nvml);
    if (isnan(out->interference.timed_ms))
        probe_diff(&p0, &p1, &out->interference);
    fb_result_judge(out, spec->device);
    if (spec->explain && !out->explain) { /* the engine's own explanation, when it has one */
        fb_err e;
        char why[sizeof e.msg + 64] = "";
        fb_err_clear(&e);
        if (rc != FB_OK || !eng->explain_whole || eng->explain_whole(out, &out->explain, &e))
            snprintf(why, sizeof why, "the %s engine explains nothing%s%s", spec->engine,
                     e.msg[0] ? ": " : "", e.msg);
        if (!out->explain)
            out->explain = unavailable(why);
    }
    for (int v = 0; rc == FB_OK && v < out->n_variants; v++) {
        fb_vstatus s = out->variants[v].status;
        if (s == FB_VS_OK || s == FB_VS_ACCURACY_FAILED)
            return FB_OK;
    }
    if (rc == FB_OK)
        rc = fb_err_set(err, FB_EUNSUPPORTED, "variants", "no variant ran: %s: %s",
                        out->variants[0].name, out->variants[0].message);
    return rc;
}

fb_code fb_run_benchmark(const fb_spec *spec, fb_progress_fn progress, void *ud, fb_result *out,
                         fb_err *err)
{
    run_state st = {.spec = spec, .res = out, .progress = progress, .ud = ud};
    const fb_engine *eng = fb_engine_find(spec->engine);
    fb_code rc;

    fb_result_init(out);
    if (eng && eng->run_whole)
        return run_whole(spec, eng, progress, ud, out, err);
    rc = prepare(&st, &eng, err);
    if (rc != FB_OK)
        goto out;
    warmup(&st);
    timing(&st);
    accuracy_gate(&st);
    fb_result_judge(out, spec->device); /* again: no speedup for a wrong answer */
    profile_all(&st);
    if (spec->explain)
        explain(&st);
    rc = any_ran(&st, err);
    report(&st, "done", NULL, 1, 1);
out:
    /* After prepare: the engine sets the thread count the environment records. */
    fb_env_capture(&out->env, spec->device);
    if (st.inst)
        st.inst->ops->destroy(st.inst);
    return rc;
}

double fb_run_tolerance(const char *dtype, bool tf32)
{
    /* bfloat16 keeps 8 significant bits to float16's 11: an eager chain that
     * rounds each of its 9 intermediates (layer norm) reads 0.012 against
     * float64 on an H100 (docs/gpu/check-NVIDIA-H100-80GB-HBM3-20261127.md). */
    if (dtype && strcmp(dtype, "bfloat16") == 0)
        return 2e-2;
    if (dtype && strcmp(dtype, "float16") == 0)
        return 1e-2;
    return tf32 ? 1e-3 : 1e-4;
}

double fb_max_rel_error(const float *out, const float *ref, size_t n)
{
    double max_diff = 0.0, max_ref = 0.0;

    for (size_t i = 0; i < n; i++) {
        double o = out[i], r = ref[i];
        if (isnan(o) || isnan(r))
            return NAN;
        max_diff = fmax(max_diff, fabs(o - r));
        max_ref = fmax(max_ref, fabs(r));
    }
    if (max_ref == 0.0)
        return max_diff == 0.0 ? 0.0 : INFINITY;
    return max_diff / max_ref;
}
