/* zoo_parity: checks a zoo model of the native engine against PyTorch's output.
 *   zoo_parity MODEL DIR PARAMS_JSON [BATCH]
 * DIR holds weights.safetensors (the PyTorch state_dict), input.safetensors
 * ("input") and expected.safetensors ("output"), written by parity.py.  For
 * every rule configuration (all rules on, then each rule off in turn) the ctx
 * is built with params = PARAMS_JSON + weights + input + disable_rules, and the
 * eager and fused plans are run and compared with PyTorch's output:
 * max|out - ref| / max|ref| <= FB_PARITY_TOL (default 1e-4).  Prints one line
 * per check; exit 0 when all pass, 1 otherwise, 2 on bad arguments. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_cpu.h"
#include "fb_spec.h"
#include "gr_plan.h"
#include "gr_st.h"
#include "gr_zoo.h"
#include "nat.h"

static int build(const char *model, const char *dir, const char *params, int batch, int off_rule,
                 nat_ctx **ctx)
{
    fb_spec spec;
    fb_err err = {0};
    fb_spec_init(&spec);
    snprintf(spec.workload, sizeof spec.workload, "%s", model);
    spec.batch_size = batch;
    spec.params = cJSON_Parse(params);
    if (!cJSON_IsObject(spec.params)) {
        fprintf(stderr, "PARAMS_JSON is not an object\n");
        fb_spec_free(&spec);
        return 2;
    }
    /* A job names its files inside the weights folder (gr_files.h): the
     * test's folder is that folder. */
    setenv("FUSIONBENCH_WEIGHTS_DIR", dir, 1);
    cJSON_AddStringToObject(spec.params, "weights", "weights.safetensors");
    cJSON_AddStringToObject(spec.params, "input", "input.safetensors");
    cJSON *rules = cJSON_AddArrayToObject(spec.params, "disable_rules");
    if (off_rule >= 0)
        cJSON_AddItemToArray(rules, cJSON_CreateString(gr_rule_name(off_rule)));
    fb_code rc = gr_ctx_build(&spec, ctx, &err);
    if (rc)
        fprintf(stderr, "build %s: %s (%s)\n", model, err.msg, err.field);
    fb_spec_free(&spec);
    return rc ? 1 : 0;
}

static double rel_err(const float *out, const float *ref, size_t n)
{
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)out[i] - ref[i]);
        md = d > md || isnan(d) ? d : md;
        mr = fabs(ref[i]) > mr ? fabs(ref[i]) : mr;
    }
    return mr > 0 ? md / mr : md;
}

/* Fused groups of variant v (launches implementing 2+ ops). */
static int fused_groups(const nat_ctx *ctx, int v)
{
    int n = 0;
    for (int i = 0; i < ctx->plans[v].n; i++)
        n += ctx->plans[v].launches[i].n_ops >= 2;
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: zoo_parity MODEL DIR PARAMS_JSON [BATCH]\n");
        return 2;
    }
    /* the kernels checked: under FUSIONBENCH_NATIVE_ISA=avx2 (the _avx2
     * tests) the narrow ones, or the check would pass on the wide ones again */
    const char *isa = getenv(FB_CPU_ISA_ENV);
    printf("native kernels: %s\n", fb_cpu_wide() ? "16 lanes (AVX-512)" : "8 lanes (AVX2)");
    if (isa && strcmp(isa, "avx2") == 0 && fb_cpu_wide()) {
        fprintf(stderr, "%s=avx2 did not take: the wide kernels run\n", FB_CPU_ISA_ENV);
        return 1;
    }
    const char *tol_s = getenv("FB_PARITY_TOL");
    double tol = tol_s ? strtod(tol_s, NULL) : 1e-4;
    int batch = argc > 4 ? (int)strtol(argv[4], NULL, 10) : 1;
    char path[1024];
    snprintf(path, sizeof path, "%s/expected.safetensors", argv[2]);
    gr_st st = {0};
    fb_err err = {0};
    if (gr_st_open(path, &st, "expected", &err) != FB_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 2;
    }
    const gr_st_tensor *t = gr_st_find(&st, "output");
    size_t n = 1;
    for (int d = 0; t && d < t->rank; d++)
        n *= (size_t)t->dims[d];
    float *ref = t ? malloc(n * sizeof *ref) : NULL;
    if (!ref || gr_st_read(&st, "output", t->rank, t->dims, ref, "expected", &err) != FB_OK) {
        fprintf(stderr, "%s: no output tensor\n", path);
        return 2;
    }
    int failed = 0;
    for (int r = -1; r < GR_R_COUNT; r++) {
        nat_ctx *ctx = NULL;
        int rc = build(argv[1], argv[2], argv[3], batch, r, &ctx);
        if (rc) {
            failed = 1;
            continue;
        }
        for (int v = 0; v < 2; v++) {
            nat_plan_run(&ctx->plans[v]);
            double e = ctx->plans[v].out_n == n ? rel_err(ctx->plans[v].out, ref, n) : INFINITY;
            bool ok = e <= tol;
            failed |= !ok;
            printf("%-14s %-6s rules off: %-18s kernels %4d fused %3d  max_rel %.3e  %s\n", argv[1],
                   v == NAT_EAGER ? "eager" : "fused", r < 0 ? "(none)" : gr_rule_name(r),
                   ctx->plans[v].n, fused_groups(ctx, v), e, ok ? "ok" : "FAIL");
        }
        nat_ctx_free(ctx);
    }
    free(ref);
    gr_st_close(&st);
    return failed;
}
