/* test_cuda_zoo: the model zoo on the native engine's CUDA backend.  Every
 * model at a small size in float32, variants eager+graph, fused+graph, eager,
 * fused (the graph variants first on a fresh instance, so a graph that ran
 * nothing would leave zeros): each output within fb_run_tolerance of the CPU
 * engine's eager output for the same weights and input, fused against eager,
 * graph variants bit-equal to their twins; the profile's kernel count is the
 * lowered plan's, fused has fewer kernels than eager, and the fusion groups
 * and one node group per graph node are consistent (eager has none); the
 * model's graph reaches the instance.  float16 on a few models and bfloat16
 * on a user's graph: fused against eager (the accuracy gate).  The language
 * models refuse float16 (token ids), by the field "dtype"; the catalog says
 * so.
 *
 * With arguments, `test_cuda_zoo WORKLOAD PARAMS_JSON BATCH` checks that one
 * model alone in float32 against the CPU engine (scripts/gpu-check.sh: the
 * zoo at its real sizes) and prints the largest errors; the arguments are
 * checked before the device is looked for (exit 2 when they are bad).
 *
 * Exits 77 ("skipped: no CUDA device") without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "cuda/ncu.h"
#include "fb_run.h"
#include "gr_zoo.h"
#include "nat.h"
#include "nat_engine.h"
#include "user_graph.h"

typedef struct zoo_case {
    const char *workload, *params;
    int batch;
} zoo_case;

/* Small sizes of every model (tests/unit/test_zoo.c's), and ablations that
 * send the fused plan down other lowerings: no BN folding (BN kernels, add +
 * ReLU chains), no MLP rule (linear + GELU and tanh-GELU epilogues, both
 * weight layouts), no attention rule (softmax with scale, and causal mask). */
static const zoo_case f32_cases[] = {
    {"resnet18", "{\"image\":32}", 2},
    {"resnet18", "{\"image\":32,\"disable_rules\":[\"bn_fold\"]}", 1},
    {"resnet50", "{\"image\":64}", 1},
    {"mobilenet_v2", "{\"image\":64}", 1},
    {"mobilenet_v3_large", "{\"image\":64}", 1},
    {"vgg16", "{\"image\":224,\"classes\":10}", 1},
    {"efficientnet_b0", "{\"image\":64}", 1},
    {"convnext_tiny", "{\"image\":64}", 1},
    {"vit_b_16", "{\"image\":32,\"layers\":1}", 2},
    {"bert_base", "{\"seq\":8,\"layers\":2}", 2},
    {"bert_base", "{\"seq\":8,\"layers\":1,\"disable_rules\":[\"mlp\",\"attention\"]}", 1},
    {"gpt2", "{\"seq\":8,\"layers\":1}", 1},
    {"gpt2", "{\"seq\":8,\"layers\":1,\"disable_rules\":[\"mlp\",\"attention\"]}", 1},
    {"whisper_tiny", "{\"frames\":200,\"layers\":1}", 1},
    {"graph", USER_GRAPH, 1},
};

/* Half dtypes: fused against eager only (rounding differs from float32).
 * bfloat16 on a shallow graph: eager rounds every intermediate to 8 bits of
 * mantissa, and a whole model's drift from that is no bug of the lowering. */
static const struct {
    zoo_case c;
    const char *dtype;
} half_cases[] = {
    {{"resnet18", "{\"image\":32}", 2}, "float16"},
    {{"mobilenet_v2", "{\"image\":64}", 1}, "float16"},
    {{"vit_b_16", "{\"image\":32,\"layers\":1}", 2}, "float16"},
    {{"graph", USER_GRAPH, 1}, "bfloat16"},
};

static const char *const variants[] = {"eager+graph", "fused+graph", "eager", "fused"};
enum { V_EG, V_FG, V_E, V_F, N_V };

static int failures;
/* The largest errors of the last case: a variant vs the CPU engine, fused vs eager. */
static double worst_cpu, worst_fused;

static void fail(const zoo_case *c, const char *dtype, const char *what, const char *detail)
{
    failures++;
    fprintf(stderr, "FAIL %s %s %s: %s: %s\n", c->workload, c->params, dtype, what, detail);
}

static bool make_spec(fb_spec *spec, const zoo_case *c, const char *device, const char *dtype)
{
    fb_spec_init(spec);
    snprintf(spec->workload, sizeof spec->workload, "%s", c->workload);
    snprintf(spec->engine, sizeof spec->engine, "native");
    snprintf(spec->device, sizeof spec->device, "%s", device);
    snprintf(spec->dtype, sizeof spec->dtype, "%s", dtype);
    spec->batch_size = c->batch;
    spec->n_variants = N_V;
    for (int v = 0; v < N_V; v++)
        snprintf(spec->variants[v], sizeof spec->variants[v], "%s", variants[v]);
    spec->params = cJSON_Parse(c->params);
    return spec->params != NULL;
}

/* The CPU engine's eager output for c (malloc'd, *n values), or NULL. */
static float *cpu_reference(const zoo_case *c, size_t *n)
{
    fb_spec spec;
    nat_ctx *ctx = NULL;
    float *out = NULL;
    fb_err e;
    fb_err_clear(&e);
    if (!make_spec(&spec, c, "cpu", "float32") || gr_ctx_build(&spec, &ctx, &e)) {
        fail(c, "float32", "cpu build", e.msg);
        goto out;
    }
    nat_plan_run(&ctx->plans[NAT_EAGER]);
    *n = ctx->plans[NAT_EAGER].out_n;
    out = malloc(*n * sizeof *out);
    if (out)
        memcpy(out, ctx->plans[NAT_EAGER].out, *n * sizeof *out);
out:
    nat_ctx_free(ctx);
    fb_spec_free(&spec);
    return out;
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

/* Every variant against ref (when not NULL), fused against eager, and the
 * graph variants bit-equal to their twins. */
static void check_outputs(const zoo_case *c, const char *dtype, float **o, const float *ref,
                          size_t n)
{
    double tol = fb_run_tolerance(dtype, false);
    char msg[160];
    worst_cpu = ref ? 0.0 : NAN;
    for (int v = 0; ref && v < N_V; v++) {
        double er = fb_max_rel_error(o[v], ref, n);
        worst_cpu = er > worst_cpu || isnan(er) ? er : worst_cpu;
        snprintf(msg, sizeof msg, "%s vs the CPU engine: %.3g > %.0e", variants[v], er, tol);
        if (!(er <= tol))
            fail(c, dtype, "cpu", msg);
    }
    double ef = fb_max_rel_error(o[V_F], o[V_E], n);
    worst_fused = ef;
    snprintf(msg, sizeof msg, "fused vs eager: %.3g > %.0e", ef, tol);
    if (!(ef <= tol))
        fail(c, dtype, "eager", msg);
    if (memcmp(o[V_EG], o[V_E], n * sizeof(float)) != 0)
        fail(c, dtype, "graph", "eager+graph differs from eager");
    if (memcmp(o[V_FG], o[V_F], n * sizeof(float)) != 0)
        fail(c, dtype, "graph", "fused+graph differs from fused");
}

/* Node groups: one per kept graph node, each -1 or an index into the fusion
 * groups; eager has none; fused has nodes in groups exactly when it has
 * groups (float32 ConvNeXt has none on the GPU: its MLPs' exact GELU runs
 * apart from the GEMMs, docs/gpu/README.md). */
static const char *node_group_problem(const fb_variant_result *vr, int nodes, bool fused)
{
    int in_group = 0;
    if (vr->n_node_groups != nodes || !vr->node_groups)
        return "node groups missing";
    for (int i = 0; i < nodes; i++) {
        int g = vr->node_groups[i];
        if (g < -1 || g >= vr->n_fusion_groups)
            return "node group out of range";
        in_group += g >= 0;
    }
    if (!fused && (in_group || vr->n_fusion_groups))
        return "eager reports fusion groups";
    if (fused && (in_group > 0) != (vr->n_fusion_groups > 0))
        return "fusion groups without nodes, or nodes without groups";
    return NULL;
}

static void free_vr(fb_variant_result *vr)
{
    free(vr->kernel_rows);
    free(vr->fusion_groups);
    free(vr->node_groups);
}

/* Profile: the kernel counts are the lowered plans'; fusion groups as the CPU
 * engine reports them. */
static void check_profile(const zoo_case *c, const char *dtype, fb_instance *inst)
{
    fb_variant_result vr[N_V];
    memset(vr, 0, sizeof vr);
    fb_err e;
    const char *why = NULL;
    int nodes = ncu_instance_host(inst)->n_graph_nodes;
    for (int v = 0; v < N_V; v++) {
        if (inst->ops->profile(inst, v, &vr[v], &e)) {
            fail(c, dtype, "profile", e.msg);
            goto out;
        }
    }
    if (vr[V_EG].kernels != vr[V_E].kernels || vr[V_FG].kernels != vr[V_F].kernels ||
        vr[V_F].kernels < 1 || vr[V_F].kernels >= vr[V_E].kernels)
        fail(c, dtype, "profile", "kernel counts");
    if (vr[V_E].fused_kernels != 0 || vr[V_F].fused_kernels < vr[V_F].n_fusion_groups)
        fail(c, dtype, "profile", "fused kernel counts");
    if (vr[V_F].peak_mem_bytes <= 0 || vr[V_E].peak_mem_bytes <= 0)
        fail(c, dtype, "profile", "peak memory");
    if ((why = node_group_problem(&vr[V_E], nodes, false)) ||
        (why = node_group_problem(&vr[V_F], nodes, true)))
        fail(c, dtype, "profile", why);
out:
    for (int v = 0; v < N_V; v++)
        free_vr(&vr[v]);
}

/* One case on cuda: prepare, run every variant, check; ref NULL: no CPU
 * comparison. */
static void run_case(const zoo_case *c, const char *dtype, const float *ref, size_t ref_n)
{
    fb_spec spec;
    fb_instance *inst = NULL;
    float *o[N_V] = {0};
    size_t n[N_V] = {0};
    fb_err e;
    fb_err_clear(&e);
    if (!make_spec(&spec, c, "cuda", dtype)) {
        fail(c, dtype, "spec", "bad params JSON");
        return;
    }
    if (nat_engine.prepare(&spec, &inst, &e)) {
        fail(c, dtype, "prepare", e.msg);
        goto out;
    }
    if (!inst->graph)
        fail(c, dtype, "graph", "the model's graph is not on the instance");
    for (int v = 0; v < N_V; v++) {
        if (!run_copy(inst, v, &o[v], &n[v], &e) || n[v] != n[0]) {
            fail(c, dtype, "run", e.msg[0] ? e.msg : "output size");
            goto out;
        }
    }
    if (ref && n[0] != ref_n) {
        fail(c, dtype, "run", "output size differs from the CPU engine's");
        goto out;
    }
    check_outputs(c, dtype, o, ref, n[0]);
    check_profile(c, dtype, inst);
    printf("ok %s %s %s batch %d: max_rel_error vs the CPU engine %.3g, fused vs eager %.3g\n",
           c->workload, c->params, dtype, c->batch, worst_cpu, worst_fused);
out:
    for (int v = 0; v < N_V; v++)
        free(o[v]);
    if (inst)
        inst->ops->destroy(inst);
    fb_spec_free(&spec);
}

static void run_f32(const zoo_case *c)
{
    size_t n = 0;
    float *ref = cpu_reference(c, &n);
    if (ref)
        run_case(c, "float32", ref, n);
    free(ref);
}

/* A language model in float16: refused at prepare, naming the dtype. */
static void check_token_dtype(void)
{
    static const zoo_case c = {"gpt2", "{\"seq\":8,\"layers\":1}", 1};
    fb_spec spec;
    fb_instance *inst = NULL;
    fb_err e;
    fb_err_clear(&e);
    if (!make_spec(&spec, &c, "cuda", "float16")) {
        fail(&c, "float16", "spec", "bad params JSON");
        return;
    }
    fb_code rc = nat_engine.prepare(&spec, &inst, &e);
    if (rc != FB_EUNSUPPORTED || strcmp(e.field, "dtype") != 0)
        fail(&c, "float16", "token ids", rc ? e.msg : "prepared");
    if (inst)
        inst->ops->destroy(inst);
    fb_spec_free(&spec);
}

/* The cuda catalog lists the zoo: images in three dtypes, language models in
 * float32 only, four variants. */
static void check_catalog(void)
{
    int n = 0, seen = 0;
    const fb_workload_info *w = nat_engine.catalog("cuda", &n);
    for (int i = 0; w && i < n; i++) {
        bool resnet = strcmp(w[i].name, "resnet18") == 0,
             bert = strcmp(w[i].name, "bert_base") == 0;
        if (!resnet && !bert)
            continue;
        seen++;
        bool halves = w[i].dtypes[1] && strcmp(w[i].dtypes[1], "float16") == 0;
        if (halves != resnet || !w[i].variants[3] || strcmp(w[i].variants[3], "fused+graph") != 0) {
            failures++;
            fprintf(stderr, "FAIL catalog: %s dtypes or variants\n", w[i].name);
        }
    }
    if (seen != 2) {
        failures++;
        fprintf(stderr, "FAIL catalog: the zoo is not offered on cuda\n");
    }
}

/* argv's one case: a zoo workload, a JSON object of params, a batch of 1..1024. */
static bool parse_case(char **argv, zoo_case *c)
{
    char *end = NULL;
    long batch = strtol(argv[3], &end, 10);
    cJSON *params = cJSON_Parse(argv[2]);
    bool ok = cJSON_IsObject(params) && *end == '\0' && batch >= 1 && batch <= 1024;
    int n = 0;
    const fb_workload_info *w = nat_engine.catalog("cuda", &n);

    cJSON_Delete(params);
    if (!ok) {
        fprintf(stderr, "usage: test_cuda_zoo [WORKLOAD PARAMS_JSON BATCH] (batch 1..1024)\n");
        return false;
    }
    for (int i = 0; w && i < n; i++) {
        if (strcmp(w[i].name, argv[1]) == 0 && strcmp(w[i].domain, "pattern") != 0) {
            *c = (zoo_case){w[i].name, argv[2], (int)batch};
            return true;
        }
    }
    fprintf(stderr, "test_cuda_zoo: %s is not a zoo model on cuda\n", argv[1]);
    return false;
}

int main(int argc, char **argv)
{
    int count = 0;
    zoo_case one;
    if (argc != 1 && (argc != 4 || !parse_case(argv, &one)))
        return 2;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    if (argc == 4) {
        run_f32(&one);
        printf("%d failure(s)\n", failures);
        return failures ? 1 : 0;
    }
    check_catalog();
    check_token_dtype();
    for (size_t i = 0; i < sizeof f32_cases / sizeof f32_cases[0]; i++)
        run_f32(&f32_cases[i]);
    for (size_t i = 0; i < sizeof half_cases / sizeof half_cases[0]; i++)
        run_case(&half_cases[i].c, half_cases[i].dtype, NULL, 0);
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
