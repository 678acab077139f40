/* test_cuda_native: the native engine's CUDA backend on a GPU.  Every pattern x
 * dtype (float32, float16, bfloat16) x variant (eager, fused, eager+graph,
 * fused+graph): outputs within fb_run_tolerance of the pattern's float64
 * reference (computed from the inputs as the device holds them) and of eager;
 * graph variants bit-equal to their non-graph twins (same kernels, same
 * buffers, fixed algorithms).  The graph variants run first on a fresh
 * instance, so a graph that ran nothing would leave zeros and fail.  Also
 * checks the profile's kernel count against the lowered plan and that peak
 * memory of fused is not above eager.
 *
 * Exits 77 ("skipped: no CUDA device") without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "cuda/ncu.h"
#include "fb_run.h"
#include "nat.h"
#include "nat_engine.h"

typedef struct cuda_case {
    const char *workload, *params;
} cuda_case;

/* Odd sizes (scalar paths, partial tiles) and aligned ones (vector paths). */
static const cuda_case cases[] = {
    {"gemm_bias_relu", "{\"m\":33,\"k\":40,\"n\":50}"},
    {"gemm_bias_relu", "{\"m\":128,\"k\":256,\"n\":192}"},
    {"gemm_bias_gelu", "{\"m\":33,\"k\":40,\"n\":56}"},
    {"gemm_bias_gelu", "{\"m\":128,\"k\":256,\"n\":192}"},
    {"mlp", "{\"m\":37,\"d\":24,\"h\":64}"},
    {"mlp", "{\"m\":64,\"d\":128,\"h\":512,\"mlp_split\":1}"},
    {"conv_bn_relu", "{\"channels\":8,\"height\":9,\"width\":7}"},
    {"conv_bn_relu", "{\"channels\":32,\"height\":16,\"width\":16}"},
    {"conv_relu_conv", "{\"channels\":8,\"height\":9,\"width\":7}"},
    {"conv_relu_conv", "{\"channels\":32,\"height\":16,\"width\":16}"},
    {"elementwise_chain", "{\"n\":1001}"},
    {"elementwise_chain", "{\"n\":65536}"},
    {"softmax", "{\"rows\":17,\"cols\":33}"},
    {"softmax", "{\"rows\":64,\"cols\":1024}"},
    {"softmax", "{\"rows\":8,\"cols\":5000}"},
    {"layernorm", "{\"rows\":17,\"cols\":40}"},
    {"layernorm", "{\"rows\":64,\"cols\":768}"},
    {"layernorm", "{\"rows\":4,\"cols\":4999}"},
    {"add_layernorm", "{\"rows\":17,\"cols\":41}"},
    {"add_layernorm", "{\"rows\":64,\"cols\":768}"},
    /* the float32-FMA kernel (tc_attention 0; float32 and head_dim 8 take it
     * whatever the setting) */
    {"attention", "{\"heads\":2,\"seq\":19,\"head_dim\":8}"},
    {"attention", "{\"heads\":2,\"seq\":19,\"head_dim\":8,\"causal\":1}"},
    {"attention", "{\"heads\":4,\"seq\":128,\"head_dim\":64,\"causal\":1,\"tc_attention\":0}"},
    {"attention", "{\"heads\":2,\"seq\":70,\"head_dim\":128,\"tc_attention\":0}"},
    /* on the tensor cores (float16, bfloat16; the default since the H200 run):
     * partial tiles, causal across tiles, every head size */
    {"attention", "{\"heads\":2,\"seq\":70,\"head_dim\":64}"},
    {"attention", "{\"heads\":2,\"seq\":19,\"head_dim\":8,\"tc_attention\":1}"},
    {"attention", "{\"heads\":2,\"seq\":19,\"head_dim\":16,\"tc_attention\":1}"},
    {"attention", "{\"heads\":3,\"seq\":200,\"head_dim\":32,\"causal\":1,\"tc_attention\":1}"},
    {"attention", "{\"heads\":4,\"seq\":128,\"head_dim\":64,\"causal\":1,\"tc_attention\":1}"},
    {"attention", "{\"heads\":2,\"seq\":70,\"head_dim\":80,\"tc_attention\":1}"},
    {"attention", "{\"heads\":2,\"seq\":130,\"head_dim\":128,\"tc_attention\":1}"},
    /* the same with cp.async tile copies (tc_attention 2): rows past seq
     * zero-filled, causal, the largest head */
    {"attention", "{\"heads\":2,\"seq\":19,\"head_dim\":16,\"tc_attention\":2}"},
    {"attention", "{\"heads\":3,\"seq\":200,\"head_dim\":32,\"causal\":1,\"tc_attention\":2}"},
    {"attention", "{\"heads\":4,\"seq\":128,\"head_dim\":64,\"tc_attention\":2}"},
    {"attention", "{\"heads\":2,\"seq\":130,\"head_dim\":128,\"tc_attention\":2}"},
    /* and the softmax half a row a lane (tc_attention 3) */
    {"attention", "{\"heads\":2,\"seq\":19,\"head_dim\":16,\"tc_attention\":3}"},
    {"attention", "{\"heads\":3,\"seq\":200,\"head_dim\":32,\"causal\":1,\"tc_attention\":3}"},
    {"attention", "{\"heads\":4,\"seq\":128,\"head_dim\":64,\"tc_attention\":3}"},
    {"attention", "{\"heads\":2,\"seq\":130,\"head_dim\":128,\"causal\":1,\"tc_attention\":3}"},
};

static const char *const dtypes[] = {"float32", "float16", "bfloat16"};
/* Graph variants first: see the header comment. */
static const char *const variants[] = {"eager+graph", "fused+graph", "eager", "fused"};
enum { V_EG, V_FG, V_E, V_F, N_V };

static int failures;

static void fail(const char *what, const cuda_case *c, const char *dtype, const char *detail)
{
    failures++;
    fprintf(stderr, "FAIL %s %s %s: %s: %s\n", c->workload, c->params, dtype, what, detail);
}

static bool make_spec(fb_spec *spec, const cuda_case *c, const char *dtype)
{
    fb_spec_init(spec);
    snprintf(spec->workload, sizeof spec->workload, "%s", c->workload);
    snprintf(spec->engine, sizeof spec->engine, "native");
    snprintf(spec->device, sizeof spec->device, "cuda");
    snprintf(spec->dtype, sizeof spec->dtype, "%s", dtype);
    spec->batch_size = 2;
    spec->n_variants = N_V;
    for (int v = 0; v < N_V; v++)
        snprintf(spec->variants[v], sizeof spec->variants[v], "%s", variants[v]);
    spec->params = cJSON_Parse(c->params);
    return spec->params != NULL;
}

/* Runs v once and copies its output into *out (malloc'd, n values). */
static bool run_copy(fb_instance *inst, int v, float **out, size_t *n, fb_err *e)
{
    const float *data = NULL;
    if (inst->ops->run(inst, v, e) || inst->ops->output(inst, v, &data, n, e))
        return false;
    *out = malloc(*n * sizeof **out);
    if (!*out)
        return false;
    memcpy(*out, data, *n * sizeof **out);
    return true;
}

/* max|out - ref| / max|ref| against a float64 reference. */
static double rel_err_ref(const float *out, const double *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)out[i] - ref[i]);
        num = d > num || isnan(d) ? d : num;
        den = fabs(ref[i]) > den ? fabs(ref[i]) : den;
    }
    return den > 0 ? num / den : num;
}

static void check_outputs(const cuda_case *c, const char *dtype, fb_instance *inst, float **o,
                          size_t n)
{
    const nat_pattern *pat = nat_pattern_find(c->workload);
    double tol = fb_run_tolerance(dtype, false), *ref = malloc(n * sizeof *ref);
    char msg[160];
    if (!ref) {
        fail("reference", c, dtype, "out of memory");
        return;
    }
    pat->reference(ncu_instance_host(inst), ref);
    for (int v = 0; v < N_V; v++) {
        double er = rel_err_ref(o[v], ref, n);
        snprintf(msg, sizeof msg, "%s vs float64 reference: %.3g > %.0e", variants[v], er, tol);
        if (!(er <= tol))
            fail("reference", c, dtype, msg);
    }
    double ef = fb_max_rel_error(o[V_F], o[V_E], n);
    snprintf(msg, sizeof msg, "fused vs eager: %.3g > %.0e", ef, tol);
    if (!(ef <= tol))
        fail("eager", c, dtype, msg);
    if (memcmp(o[V_EG], o[V_E], n * sizeof(float)) != 0)
        fail("graph", c, dtype, "eager+graph differs from eager");
    if (memcmp(o[V_FG], o[V_F], n * sizeof(float)) != 0)
        fail("graph", c, dtype, "fused+graph differs from fused");
    free(ref);
}

/* The fused attention kernel a case runs: attention_wmma for 16-bit storage
 * with a head_dim multiple of 16 on compute capability 8.0 or later, unless
 * params.tc_attention is 0 (the default is 1; 2, attention_wmma_async, copies
 * its tiles by cp.async; 3, attention_wmma_split, also splits its softmax);
 * else the float32-FMA kernel (attention_fused). */
static const char *attention_kernel(const cuda_case *c, const char *dtype)
{
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
        major = 0;
    cJSON *p = cJSON_Parse(c->params);
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(p, "tc_attention");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(p, "head_dim");
    int setting = cJSON_IsNumber(tc) ? tc->valueint : 1;
    int hd = cJSON_IsNumber(d) ? d->valueint : 64; /* the pattern's default */
    bool fits = strcmp(dtype, "float32") != 0 && hd % 16 == 0 && major >= 8;
    cJSON_Delete(p);
    static const char *const forms[] = {"attention_wmma", "attention_wmma_async",
                                        "attention_wmma_split"};
    if (!setting || !fits)
        return "attention_fused";
    return forms[setting - 1];
}

/* Profile: the kernel count is the lowered plan's; fused needs no more memory;
 * the fused attention's kernel is the one its setting and shape pick. */
static void check_profile(const cuda_case *c, const char *dtype, fb_instance *inst)
{
    fb_variant_result vr[N_V];
    memset(vr, 0, sizeof vr);
    fb_err e;
    for (int v = 0; v < N_V; v++) {
        if (inst->ops->profile(inst, v, &vr[v], &e)) {
            fail("profile", c, dtype, e.msg);
            goto out;
        }
    }
    if (vr[V_EG].kernels != vr[V_E].kernels || vr[V_FG].kernels != vr[V_F].kernels ||
        vr[V_F].kernels < 1 || vr[V_F].kernels > vr[V_E].kernels)
        fail("profile", c, dtype, "kernel counts");
    if (vr[V_F].peak_mem_bytes > vr[V_E].peak_mem_bytes || vr[V_F].peak_mem_bytes <= 0)
        fail("profile", c, dtype, "fused peak memory above eager");
    if (strcmp(c->workload, "attention") == 0) {
        const char *want = attention_kernel(c, dtype);
        bool seen = false;
        for (int i = 0; i < vr[V_F].n_kernel_rows; i++)
            seen |= strcmp(vr[V_F].kernel_rows[i].name, want) == 0;
        if (!seen)
            fail("profile", c, dtype, want);
    }
out:
    for (int v = 0; v < N_V; v++)
        free(vr[v].kernel_rows);
}

static void run_case(const cuda_case *c, const char *dtype)
{
    fb_spec spec;
    fb_instance *inst = NULL;
    float *o[N_V] = {0};
    size_t n[N_V] = {0};
    fb_err e;
    fb_err_clear(&e);
    if (!make_spec(&spec, c, dtype)) {
        fail("spec", c, dtype, "bad params JSON");
        return;
    }
    if (nat_engine.prepare(&spec, &inst, &e)) {
        fail("prepare", c, dtype, e.msg);
        goto out;
    }
    for (int v = 0; v < N_V; v++) {
        if (!run_copy(inst, v, &o[v], &n[v], &e) || n[v] != n[0]) {
            fail("run", c, dtype, e.msg[0] ? e.msg : "output size");
            goto out;
        }
    }
    check_outputs(c, dtype, inst, o, n[0]);
    check_profile(c, dtype, inst);
    printf("ok %s %s %s\n", c->workload, c->params, dtype);
out:
    for (int v = 0; v < N_V; v++)
        free(o[v]);
    if (inst)
        inst->ops->destroy(inst);
    fb_spec_free(&spec);
}

/* The catalog offers every pattern on cuda with the three dtypes. */
static void check_catalog(void)
{
    int n = 0;
    const fb_workload_info *w = nat_engine.catalog("cuda", &n);
    if (!w || n < 10 || !w[0].dtypes[2] || strcmp(w[0].variants[3], "fused+graph") != 0) {
        failures++;
        fprintf(stderr, "FAIL catalog: %d cuda workloads\n", n);
    }
}

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    check_catalog();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int d = 0; d < 3; d++)
            run_case(&cases[i], dtypes[d]);
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
