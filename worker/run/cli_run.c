/* fusionbench-run: runs one benchmark locally, with no database, and prints a
 * table (or JSON).  Exit status: 0 every variant ok, 1 the run or a variant
 * failed, 2 bad arguments. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fb_cpu.h"
#include "fb_engines.h"
#include "fb_parse.h"
#include "fb_log.h"
#include "fb_run.h"
#include "fb_table.h"

#define CLI_EXIT_USAGE  FB_EXIT_USAGE
#define CLI_MAX_THREADS 1024

typedef struct cli_opts {
    const char *workload;
    const char *engine, *device, *dtype, *variants; /* NULL = default */
    int iterations, warmup, batch, timeout;         /* -1 = default */
    bool json, list, catalog_json, roofline, explain, dry_run;
    cJSON *params; /* owned */
} cli_opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: fusionbench-run WORKLOAD [--device cpu] [--engine native] [--json]\n"
               "         [--variants eager,fused] [--iterations N] [--warmup N] [--batch N]\n"
               "         [--dtype float32] [--param key=value ...] [--threads N] [--roofline]\n"
               "         [--explain] [--timeout S] [--dry-run]\n"
               "       fusionbench-run --list [--device cpu]\n"
               "       fusionbench-run --catalog-json\n"
               "Runs one benchmark locally (warmup, interleaved timed rounds, accuracy gate,\n"
               "one profiled iteration) and prints a table, or JSON with --json.\n"
               "--param key=value: one of the params the workload takes (--catalog-json lists\n"
               "them per workload; any other key is refused).\n"
               "--roofline first measures this machine's limits on the job's threads (a\n"
               "triad's bandwidth, our GEMM's FLOP rate; half a second) into the result.\n"
               "--explain also explains every fusion group (docs/EXPLAIN.md): why each won\n"
               "or lost, with the groups that lost undone and re-timed.\n"
               "--timeout S: the job's time limit (default 600 s; the inductor engine's\n"
               "explanation spends what the timing leaves of it).\n"
               "--dry-run checks the arguments against the catalog (the workload, its device,\n"
               "dtype and variants) and prints the job spec that would run, as JSON; it runs\n"
               "nothing, so it needs no device.\n"
               "FUSIONBENCH_NATIVE_ISA=avx2 runs the native CPU kernels an AVX2-only CPU\n"
               "runs (8 lanes, OpenBLAS GEMMs), on any CPU; the result's device name says so.\n"
               "Exit status: 0 all variants ok, 1 a variant or the run failed, 2 bad arguments.\n"
               "--catalog-json prints the catalog built into this build (the native engine on\n"
               "every device it was built for) as JSON: the server's built-in catalog.\n");
}

/* key=value → params[key]: JSON numbers, booleans, arrays and objects as such,
 * anything else as a string ("--param rules_off=bias_gelu"). */
static int add_param(cli_opts *o, const char *kv)
{
    const char *eq = strchr(kv, '=');
    char key[FB_NAME_MAX];
    cJSON *val;

    if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof key)
        return fb_cli_bad_arg("--param", "expected key=value with a key of 1..63 characters");
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
    if (cJSON_GetObjectItemCaseSensitive(o->params, key))
        return fb_cli_bad_arg("--param", "the same key is given twice");
    val = cJSON_Parse(eq + 1);
    if (val && !cJSON_IsNumber(val) && !cJSON_IsBool(val) && !cJSON_IsArray(val) &&
        !cJSON_IsObject(val)) {
        cJSON_Delete(val);
        val = NULL;
    }
    if (!val)
        val = cJSON_CreateString(eq + 1);
    if (!val || !cJSON_AddItemToObject(o->params, key, val)) {
        cJSON_Delete(val);
        return fb_cli_bad_arg("--param", "out of memory");
    }
    return 0;
}

/* --threads N is params.threads, which the engine applies to OpenMP and the
 * BLAS alike, so the spec (and with it the result) records it. */
static int set_threads(cli_opts *o, const char *v)
{
    int n = 0;
    int rc = fb_cli_parse_int("--threads", v, 1, CLI_MAX_THREADS, &n);

    if (rc)
        return rc;
    if (cJSON_GetObjectItemCaseSensitive(o->params, "threads"))
        return fb_cli_bad_arg("--threads", "params.threads is already set");
    if (!cJSON_AddNumberToObject(o->params, "threads", n))
        return fb_cli_bad_arg("--threads", "out of memory");
    return 0;
}

/* Option with a value: "--opt value" or "--opt=value"; *i advances past it. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
    size_t len = strlen(name);
    const char *a = argv[*i];

    if (strncmp(a, name, len) != 0)
        return NULL;
    if (a[len] == '=')
        return a + len + 1;
    if (a[len] != '\0' || *i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

static int parse_valued(cli_opts *o, const char *name, const char *v)
{
    if (strcmp(name, "--iterations") == 0)
        return fb_cli_parse_int(name, v, 1, FB_MAX_ITERATIONS, &o->iterations);
    if (strcmp(name, "--warmup") == 0)
        return fb_cli_parse_int(name, v, 0, FB_MAX_WARMUP, &o->warmup);
    if (strcmp(name, "--batch") == 0)
        return fb_cli_parse_int(name, v, 1, FB_MAX_BATCH, &o->batch);
    if (strcmp(name, "--threads") == 0)
        return set_threads(o, v);
    if (strcmp(name, "--timeout") == 0)
        return fb_cli_parse_int(name, v, 1, 86400, &o->timeout);
    if (strcmp(name, "--param") == 0)
        return add_param(o, v);
    if (!strcmp(name, "--variants")) {
        o->variants = v;
        return 0;
    }
    if (!fb_name_valid(v))
        return fb_cli_bad_arg(name, "not a valid name ([a-z0-9_+.-], 1..63 characters)");
    if (strcmp(name, "--device") == 0)
        o->device = v;
    else if (strcmp(name, "--dtype") == 0)
        o->dtype = v;
    else
        o->engine = v;
    return 0;
}

static const char *const cli_valued[] = {"--iterations", "--warmup",   "--batch",  "--threads",
                                         "--param",      "--variants", "--device", "--dtype",
                                         "--engine",     "--timeout",  NULL};

static int parse_one(cli_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];

    if (strcmp(a, "--json") == 0 || strcmp(a, "--list") == 0) {
        *(a[2] == 'j' ? &o->json : &o->list) = true;
        return 0;
    }
    if (strcmp(a, "--catalog-json") == 0 || strcmp(a, "--dry-run") == 0) {
        *(a[2] == 'c' ? &o->catalog_json : &o->dry_run) = true;
        return 0;
    }
    if (strcmp(a, "--roofline") == 0 || strcmp(a, "--explain") == 0) {
        *(a[2] == 'r' ? &o->roofline : &o->explain) = true;
        return 0;
    }
    for (int k = 0; cli_valued[k]; k++) {
        size_t len = strlen(cli_valued[k]);
        if (strncmp(a, cli_valued[k], len) == 0 && (a[len] == '\0' || a[len] == '=')) {
            const char *v = opt_value(argc, argv, i, cli_valued[k]);
            return v ? parse_valued(o, cli_valued[k], v) : fb_cli_bad_arg(a, "needs a value");
        }
    }
    if (a[0] == '-')
        return fb_cli_bad_arg(a, "unknown option (see --help)");
    if (o->workload)
        return fb_cli_bad_arg(a, "only one WORKLOAD may be given");
    o->workload = a;
    return 0;
}

static int parse_args(cli_opts *o, int argc, char **argv)
{
    *o = (cli_opts){.iterations = -1, .warmup = -1, .batch = -1, .timeout = -1};
    o->params = cJSON_CreateObject();
    if (!o->params)
        return fb_cli_bad_arg("params", "out of memory");
    for (int i = 1; i < argc; i++) {
        int rc;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        rc = parse_one(o, argc, argv, &i);
        if (rc)
            return rc;
    }
    if (!o->workload && !o->list && !o->catalog_json) {
        usage(stderr);
        return fb_cli_bad_arg("WORKLOAD", "missing");
    }
    return 0;
}

/* ---- catalog ---- */

static void print_list(const char *const *names, FILE *f)
{
    for (int i = 0; names[i]; i++)
        fprintf(f, "%s%s", i ? "," : "", names[i]);
}

static void print_catalog(const char *device, FILE *f)
{
    fprintf(f, "%-26s %-8s %-8s %5s  %-18s %s\n", "WORKLOAD", "ENGINE", "DOMAIN", "BATCH",
            "VARIANTS", "DESCRIPTION");
    for (int e = 0; fb_engines[e]; e++) {
        int n = 0;
        const fb_workload_info *w = fb_engines[e]->catalog(device, &n);
        for (int i = 0; w && i < n; i++) {
            fprintf(f, "%-26s %-8s %-8s %5d  ", w[i].name, w[i].engine, w[i].domain,
                    w[i].default_batch_size);
            print_list(w[i].variants, f);
            fprintf(f, "  %s\n", w[i].description);
        }
    }
}

/* Adds the string s to the JSON array arr unless it holds it already. */
static bool add_unique(cJSON *arr, const char *s)
{
    const cJSON *v;
    cJSON_ArrayForEach(v, arr)
    {
        if (cJSON_IsString(v) && strcmp(v->valuestring, s) == 0)
            return true;
    }
    return cJSON_AddItemToArray(arr, cJSON_CreateString(s));
}

/* Merges w, offered on device, into items: one entry per workload name, its
 * devices those it is offered on, its dtypes the union over them. */
static bool merge_info(cJSON *items, const fb_workload_info *w, const char *device)
{
    cJSON *item, *found = NULL;
    cJSON_ArrayForEach(item, items)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
        if (cJSON_IsString(name) && strcmp(name->valuestring, w->name) == 0)
            found = item;
    }
    if (!found) {
        found = fb_workload_info_to_json(w);
        if (!found || !cJSON_AddItemToArray(items, found)) {
            cJSON_Delete(found);
            return false;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(found, "devices");
        if (!cJSON_AddArrayToObject(found, "devices"))
            return false;
    }
    for (int i = 0; w->dtypes[i]; i++)
        if (!add_unique(cJSON_GetObjectItemCaseSensitive(found, "dtypes"), w->dtypes[i]))
            return false;
    return add_unique(cJSON_GetObjectItemCaseSensitive(found, "devices"), device);
}

/* The native engine's catalog on every device: static tables, so the server can
 * know them before any worker registered.  (The inductor engine's catalog comes
 * from the worker's Python: known once such a worker registers.) */
static int print_catalog_json(void)
{
    static const char *const devices[] = {"cpu", "cuda"};
    const fb_engine *eng = fb_engine_find("native");
    cJSON *items = cJSON_CreateArray();
    char *text = NULL;
    bool ok = items && eng;

    for (size_t d = 0; ok && d < sizeof devices / sizeof devices[0]; d++) {
        int n = 0;
        const fb_workload_info *w = eng->catalog(devices[d], &n);
        for (int i = 0; ok && w && i < n; i++)
            ok = merge_info(items, &w[i], devices[d]);
    }
    text = ok ? cJSON_PrintUnformatted(items) : NULL;
    cJSON_Delete(items);
    if (!text) {
        fprintf(stderr, "fusionbench-run: cannot build the catalog JSON\n");
        return 1;
    }
    printf("%s\n", text);
    cJSON_free(text);
    return 0;
}

static void print_known(const char *device)
{
    int shown = 0;

    fprintf(stderr, "known workloads on %s:", device);
    for (int e = 0; fb_engines[e]; e++) {
        int n = 0;
        const fb_workload_info *w = fb_engines[e]->catalog(device, &n);
        for (int i = 0; w && i < n; i++, shown++)
            fprintf(stderr, " %s", w[i].name);
    }
    fprintf(stderr, "%s\n", shown ? "" : " (none)");
}

/* ---- spec ---- */

static int set_variants(fb_spec *spec, const char *list)
{
    const char *p = list;

    spec->n_variants = 0;
    while (*p) {
        size_t len = strcspn(p, ",");
        char *name = spec->variants[spec->n_variants];
        if (spec->n_variants == FB_MAX_VARIANTS || len == 0 || len >= FB_NAME_MAX)
            return fb_cli_bad_arg("--variants", "expected 1..8 comma-separated names");
        snprintf(name, FB_NAME_MAX, "%.*s", (int)len, p);
        if (!fb_name_valid(name))
            return fb_cli_bad_arg("--variants", "a variant is not a valid name");
        for (int i = 0; i < spec->n_variants; i++) {
            if (strcmp(spec->variants[i], name) == 0)
                return fb_cli_bad_arg("--variants", "a variant is named twice");
        }
        spec->n_variants++;
        p += len + (p[len] == ',');
    }
    return spec->n_variants ? 0 : fb_cli_bad_arg("--variants", "empty");
}

static bool in_list(const char *const *names, const char *s)
{
    for (int i = 0; names[i]; i++) {
        if (strcmp(names[i], s) == 0)
            return true;
    }
    return false;
}

/* Bad-argument exit when the spec asks for a dtype or variant the workload does
 * not offer, naming what it does offer. */
static int check_offered(const fb_workload_info *w, const fb_spec *spec)
{
    const char *bad = NULL, *arg = "--variants";
    const char *const *offered = w->variants;

    for (int v = 0; v < spec->n_variants && !bad; v++)
        bad = in_list(w->variants, spec->variants[v]) ? NULL : spec->variants[v];
    if (!bad && !in_list(w->dtypes, spec->dtype)) {
        bad = spec->dtype;
        arg = "--dtype";
        offered = w->dtypes;
    }
    if (!bad)
        return 0;
    fprintf(stderr, "fusionbench-run: %s: '%s' is not offered by %s; offered: ", arg, bad, w->name);
    print_list(offered, stderr);
    fprintf(stderr, "\n");
    return CLI_EXIT_USAGE;
}

/* Fills spec from the options and the catalog's defaults. */
static int build_spec(cli_opts *o, fb_spec *spec)
{
    const fb_engine *eng = fb_engine_find(o->engine);
    const fb_workload_info *w;
    int rc = 0;

    if (!eng)
        return fb_cli_bad_arg("--engine", "unknown engine");
    if (!fb_name_valid(o->workload))
        return fb_cli_bad_arg(o->workload, "not a valid workload name");
    w = fb_engine_workload(eng, o->device, o->workload);
    if (!w) {
        fprintf(stderr, "fusionbench-run: unknown workload '%s' for engine %s on %s\n", o->workload,
                eng->name, o->device);
        print_known(o->device);
        return CLI_EXIT_USAGE;
    }
    snprintf(spec->workload, sizeof spec->workload, "%s", o->workload);
    snprintf(spec->engine, sizeof spec->engine, "%s", eng->name);
    snprintf(spec->device, sizeof spec->device, "%s", o->device);
    if (o->dtype)
        snprintf(spec->dtype, sizeof spec->dtype, "%s", o->dtype);
    if (o->variants)
        rc = set_variants(spec, o->variants);
    spec->batch_size = o->batch > 0 ? o->batch : 0;
    spec->iterations = o->iterations > 0 ? o->iterations : 0;
    spec->warmup = o->warmup;
    spec->params = o->params;
    o->params = NULL;
    spec->explain = o->explain;
    fb_spec_apply_defaults(spec, o->device, w->default_batch_size, w->variants);
    if (o->timeout > 0)
        spec->timeout_s = o->timeout;
    if (!rc) {
        fb_err err;
        fb_err_clear(&err);
        if (fb_spec_check_unfuse(spec, &err) != FB_OK ||
            fb_workload_params_check(w, spec->params, &err) != FB_OK)
            rc = fb_cli_bad_arg(err.field, err.msg);
    }
    return rc ? rc : check_offered(w, spec);
}

/* ---- output ---- */

/* --dry-run: the spec with its defaults applied, on stdout. */
static int print_spec(const fb_spec *spec)
{
    cJSON *js = fb_spec_to_json(spec);
    char *text = js ? cJSON_PrintUnformatted(js) : NULL;
    int rc = text ? 0 : 1;

    if (text)
        printf("%s\n", text);
    cJSON_Delete(js);
    free(text);
    return rc;
}

/* {"spec":..., "result":..., "kernels": {variant: rows}} on stdout. */
static int print_json(const fb_spec *spec, const fb_result *r)
{
    cJSON *root = cJSON_CreateObject(), *kernels = cJSON_CreateObject();
    char *text = NULL;
    int rc = 1;

    if (!root || !kernels)
        goto out;
    cJSON_AddItemToObject(root, "spec", fb_spec_to_json(spec));
    cJSON_AddItemToObject(root, "result", fb_result_to_json(r));
    for (int v = 0; v < r->n_variants; v++)
        cJSON_AddItemToObject(kernels, r->variants[v].name,
                              fb_kernel_rows_to_json(&r->variants[v]));
    cJSON_AddItemToObject(root, "kernels", kernels);
    kernels = NULL;
    text = cJSON_Print(root);
    if (text) {
        printf("%s\n", text);
        rc = 0;
    }
out:
    cJSON_Delete(kernels);
    cJSON_Delete(root);
    free(text);
    return rc;
}

static void progress_cb(void *ud, const char *phase, const char *variant, int done, int total)
{
    fb_debug("%s %s %d/%d", phase, variant ? variant : "", done, total);
}

/* --roofline: the limits of the job's device, on a CPU on the job's threads
 * (params.threads, else OpenMP's). */
static void measure_roofline(const fb_spec *spec)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(spec->params, "threads");
    double gbps, gflops;
    fb_err err;

    fb_err_clear(&err);
    if (fb_roofline_measure(spec->device, cJSON_IsNumber(t) ? t->valueint : 0, &gbps, &gflops,
                            &err) != FB_OK) {
        fprintf(stderr, "fusionbench-run: roofline: %s\n", err.msg);
        return;
    }
    fb_env_set_roofline(spec->device, gbps, gflops);
}

static int run(const fb_spec *spec, bool json, bool roofline)
{
    fb_result res;
    fb_err err;
    int rc = 0;

    if (roofline)
        measure_roofline(spec);
    fb_err_clear(&err);
    if (fb_run_benchmark(spec, progress_cb, NULL, &res, &err) != FB_OK) {
        bool named = err.field[0] && strncmp(err.msg, err.field, strlen(err.field)) == 0;
        fprintf(stderr, "fusionbench-run: %s: %s%s%s\n", fb_code_name(err.code),
                named ? "" : err.field, err.field[0] && !named ? ": " : "", err.msg);
        fb_result_free(&res);
        return err.code == FB_EINVAL ? CLI_EXIT_USAGE : 1;
    }
    if (json)
        rc = print_json(spec, &res);
    else
        fb_table_print(stdout, spec, &res);
    if (rc == 0)
        rc = fb_table_all_ok(&res) ? 0 : 1;
    fb_result_free(&res);
    return rc;
}

int main(int argc, char **argv)
{
    cli_opts o;
    fb_spec spec;
    int rc;

    fb_log_init("fusionbench-run");
    fb_blas_fix_core(argv);
    fb_spec_init(&spec);
    rc = parse_args(&o, argc, argv);
    if (!rc)
        rc = fb_cpu_isa_cli();
    if (rc)
        goto out;
    if (!o.engine)
        o.engine = "native";
    if (!o.device)
        o.device = "cpu";
    if (o.list) {
        print_catalog(o.device, stdout);
        goto out;
    }
    if (o.catalog_json) {
        rc = print_catalog_json();
        goto out;
    }
    rc = build_spec(&o, &spec);
    if (rc == 0)
        rc = o.dry_run ? print_spec(&spec) : run(&spec, o.json, o.roofline);
out:
    cJSON_Delete(o.params);
    fb_spec_free(&spec);
    return rc;
}
