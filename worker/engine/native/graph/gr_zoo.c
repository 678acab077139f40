/* gr_zoo: the model zoo as workloads of the native engine (gr_models[]).
 * Building a model: read its sizes from params (standard defaults), build the
 * graph, allocate and fill the input (real data, or params.input) and the
 * weights (seeded PyTorch-like random, or params.weights: a safetensors file
 * named inside the worker's weights folder, gr_files.h
 * with the PyTorch state_dict names), plan the eager and fused groups
 * (params.disable_rules switches rules off) and lower both into the ctx.
 * The graph itself is freed at the end: the plans keep only buffers of the
 * ctx and static strings, and the ctx a compact copy for the result.
 *
 * Params: image, seq, frames, layers, hidden, heads, inter, vocab, classes
 * (model sizes), weights, input (safetensors names in the weights folder),
 * disable_rules, gemm, graph
 * (workload "graph": a user's graph in gr_to_json's form). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr_cost.h"
#include "gr_files.h"
#include "gr_input.h"
#include "gr_models.h"
#include "gr_plan.h"
#include "gr_zoo.h"
#include "gr_st.h"
#include "nat_pat.h"

#define PATH_MAX_LEN 4096

typedef struct zoo_model {
    gr_input_kind in;
    gr_cfg def;
    int (*build)(gb *b, const gr_cfg *c);
} zoo_model;

/* ---- params ---- */

static fb_code cfg_from_spec(const fb_spec *spec, const zoo_model *m, gr_cfg *c, fb_err *err)
{
    *c = m->def;
    c->batch = spec->batch_size > 0 ? spec->batch_size : 1;
    struct {
        const char *key;
        int64_t *v, hi;
    } p[] = {
        {"image", &c->image, 4096},       {"seq", &c->seq, 4096},
        {"frames", &c->frames, 30000},    {"layers", &c->layers, 96},
        {"hidden", &c->hidden, 8192},     {"heads", &c->heads, 128},
        {"inter", &c->inter, 32768},      {"vocab", &c->vocab, 1 << 20},
        {"classes", &c->classes, 100000},
    };
    fb_code rc = FB_OK;
    for (size_t i = 0; i < sizeof p / sizeof p[0] && !rc; i++)
        if (*p[i].v > 0)
            rc = fb_spec_param_int(spec, p[i].key, *p[i].v, 1, p[i].hi, p[i].v, err);
    if (!rc && c->heads > 0 && c->hidden % c->heads)
        rc = fb_err_set(err, FB_EINVAL, "params.heads", "must divide hidden");
    return rc;
}

/* params.<key> as a path string, or NULL when absent. */
static fb_code param_path(const fb_spec *spec, const char *key, const char **out, fb_err *err)
{
    *out = NULL;
    const cJSON *j = spec->params ? cJSON_GetObjectItemCaseSensitive(spec->params, key) : NULL;
    if (!j)
        return FB_OK;
    char field[64];
    snprintf(field, sizeof field, "params.%s", key);
    if (!cJSON_IsString(j) || !j->valuestring[0] || strlen(j->valuestring) > PATH_MAX_LEN)
        return fb_err_set(err, FB_EINVAL, field, "must name a file in the worker's weights folder");
    *out = j->valuestring;
    return FB_OK;
}

/* ---- weights and input ---- */

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void fill_random(nat_ctx *ctx, const gr_tensor *t)
{
    int64_t n = gr_numel(t);
    uint32_t s = name_hash(t->name);
    switch (t->init) {
    case GR_INIT_FANIN:
        nat_pat_fill_weight(ctx, t->data, n, s, t->fan_in);
        break;
    case GR_INIT_ONE:
        nat_fill_uniform(ctx, t->data, (size_t)n, s, 0.8f, 1.2f);
        break;
    case GR_INIT_VAR:
        nat_fill_uniform(ctx, t->data, (size_t)n, s, 0.5f, 1.5f);
        break;
    case GR_INIT_EMBED:
        nat_fill_uniform(ctx, t->data, (size_t)n, s, -0.035f, 0.035f);
        break;
    default:
        nat_fill_uniform(ctx, t->data, (size_t)n, s, -0.1f, 0.1f);
        break;
    }
}

/* A safetensors file a job names: inside the weights folder only (gr_files). */
static fb_code open_named(const char *name, gr_st *st, const char *field, fb_err *err)
{
    int fd = -1;
    fb_code rc = gr_files_open(name, field, &fd, err);
    return rc ? rc : gr_st_open_fd(fd, name, st, field, err);
}

/* Every weight of g: read from st by its name, or seeded random when st is NULL. */
static fb_code load_weights(nat_ctx *ctx, gr_graph *g, const gr_st *st, const char *field,
                            fb_err *err)
{
    fb_code rc = FB_OK;
    for (int i = 0; i < g->n_tensors && !rc; i++) {
        gr_tensor *t = &g->tensors[i];
        if (t->kind != GR_T_WEIGHT)
            continue;
        rc = nat_pat_alloc(ctx, gr_numel(t), NAT_ALL_VARIANTS, t->name, &t->data, err);
        if (!rc && st)
            rc = gr_st_read(st, t->name, t->rank, t->dims, t->data, field, err);
        else if (!rc)
            fill_random(ctx, t);
    }
    return rc;
}

/* A user's graph (m NULL) may take several inputs: each read from params.input
 * by its name (one input: "input"), or seeded uniform values in [-1, 1). */
static fb_code load_user_inputs(nat_ctx *ctx, gr_graph *g, const char *path, fb_err *err)
{
    gr_st st = {0};
    int n = gr_count_inputs(g);
    fb_code rc = path ? open_named(path, &st, "params.input", err) : FB_OK;
    for (int i = 0, k = 0; i < g->n_tensors && !rc; i++) {
        gr_tensor *t = &g->tensors[i];
        if (t->kind != GR_T_INPUT)
            continue;
        rc = nat_pat_alloc(ctx, gr_numel(t), NAT_ALL_VARIANTS, t->name, &t->data, err);
        if (!rc && path)
            rc = gr_st_read(&st, n == 1 ? "input" : t->name, t->rank, t->dims, t->data,
                            "params.input", err);
        else if (!rc)
            nat_fill_uniform(ctx, t->data, (size_t)gr_numel(t), (uint32_t)++k, -1.0f, 1.0f);
    }
    gr_st_close(&st);
    return rc;
}

static fb_code load_input(nat_ctx *ctx, gr_graph *g, const zoo_model *m, const gr_cfg *c,
                          const char *path, fb_err *err)
{
    if (!m)
        return load_user_inputs(ctx, g, path, err);
    gr_tensor *t = &g->tensors[g->input];
    fb_code rc = nat_pat_alloc(ctx, gr_numel(t), NAT_ALL_VARIANTS, "input", &t->data, err);
    if (rc)
        return rc;
    if (path) {
        gr_st st = {0};
        rc = open_named(path, &st, "params.input", err);
        if (!rc)
            rc = gr_st_read(&st, "input", t->rank, t->dims, t->data, "params.input", err);
        gr_st_close(&st);
        return rc;
    }
    if (m->in == GR_IN_IMAGE)
        return gr_input_images(t->data, t->dims[0], t->dims[2], err);
    if (m->in == GR_IN_TOKENS)
        return gr_input_tokens(t->data, c->batch, c->seq, c->vocab, err);
    if (m->in == GR_IN_MEL)
        return gr_input_mel(t->data, c->batch, c->frames, err);
    return fb_err_set(err, FB_EUNSUPPORTED, NULL, "no input for this model");
}

/* Token ids must index the embedding table. */
static fb_code check_ids(const gr_graph *g, fb_err *err)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];
        if (n->op != GR_EMBEDDING)
            continue;
        const gr_tensor *ids = &g->tensors[n->in[0]], *tab = &g->tensors[n->in[1]];
        if (!ids->data)
            continue;
        for (int64_t j = 0; j < gr_numel(ids); j++)
            if (!(ids->data[j] >= 0 && ids->data[j] < (float)tab->dims[0] &&
                  ids->data[j] == (float)(int64_t)ids->data[j]))
                return fb_err_set(err, FB_EINVAL, "params.input", "token id %lld is no row",
                                  (long long)j);
    }
    return FB_OK;
}

/* ---- planning ---- */

/* What planned the fused variant, for the result's graph ("planner"). */
static cJSON *planner_json(bool cost, const gr_cost_report *r, const gr_gemm_report *gm)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "planner", cost ? "cost" : "rules") || !cost)
        return o;
    if (gm) { /* whose GEMM each convolution and linear runs on */
        cJSON *go = cJSON_AddObjectToObject(o, "gemm");
        cJSON_AddNumberToObject(go, "nodes", gm->nodes);
        cJSON_AddNumberToObject(go, "packed", gm->packed);
        cJSON_AddNumberToObject(go, "openblas", gm->openblas);
        cJSON_AddNumberToObject(go, "groups", gm->groups);
        cJSON_AddNumberToObject(go, "groups_packed", gm->groups_packed);
        cJSON_AddNumberToObject(go, "measured", gm->measured);
        cJSON_AddNumberToObject(go, "cached", gm->cached);
        cJSON_AddNumberToObject(go, "decide_ms", gm->ms);
    }
    cJSON_AddNumberToObject(o, "groups", r->groups);
    cJSON_AddNumberToObject(o, "kept", r->kept);
    cJSON_AddNumberToObject(o, "split", r->split);
    cJSON_AddNumberToObject(o, "unfused", r->unfused);
    cJSON_AddNumberToObject(o, "measured", r->measured);
    cJSON_AddNumberToObject(o, "cached", r->cached);
    cJSON_AddNumberToObject(o, "predicted", r->predicted);
    cJSON_AddNumberToObject(o, "decide_ms", r->ms);
    cJSON_AddStringToObject(o, "timed_on", r->timed_on);
    if (r->model_pairs > 0) { /* the cost model against what was measured */
        cJSON *mo = cJSON_AddObjectToObject(o, "model");
        cJSON_AddNumberToObject(mo, "pairs", r->model_pairs);
        if (!isnan(r->rank_corr))
            cJSON_AddNumberToObject(mo, "rank_correlation", r->rank_corr);
        if (!isnan(r->median_err))
            cJSON_AddNumberToObject(mo, "median_error", r->median_err);
    }
    return o;
}

/* Plans and lowers both variants; *planner says what planned the fused one. */
static fb_code plan_both(nat_ctx *ctx, gr_graph *g, const fb_spec *spec, cJSON **planner,
                         fb_err *err)
{
    unsigned off = 0;
    bool pack = true, cost = false, gemm_auto = false;
    gr_groups eager = {0}, fused = {0};
    gr_unfuse unfuse;
    gr_choices choices = {0};
    gr_cost_report crep = {0};
    gr_gemm_report grep = {0};
    fb_code rc = gr_rules_from_spec(spec, &off, err);
    if (!rc)
        rc = gr_unfuse_from_spec(spec, &unfuse, err);
    if (!rc)
        rc = nat_spec_gemm_pack(spec, &pack, &gemm_auto, err);
    if (!rc)
        rc = gr_planner_from_spec(spec, ctx->cost_timer != NULL, &cost, err);
    /* on the CPU, "auto" is the cost planner's choice per shape */
    bool choose = cost && gemm_auto && !ctx->cost_timer;
    if (!rc && choose)
        rc = gr_gemm_choose(ctx, g, off, pack, &grep, err);
    if (!rc && cost)
        rc = gr_cost_choose(ctx, g, off, pack, ctx->cost_timer, &choices, &crep, err);
    if (!rc && !(*planner = planner_json(cost, &crep, choose ? &grep : NULL)))
        rc = fb_err_set(err, FB_ENOMEM, NULL, "no memory for the planner's report");
    if (!rc)
        rc = gr_plan_groups(g, false, off, NULL, NULL, &eager, err);
    if (!rc)
        rc = gr_plan_groups(g, true, off, &unfuse, &choices, &fused, err);
    /* the eager launches carry the id of the fused group that replaces them */
    int *node_group = rc ? NULL : gr_node_groups(g, &fused, err);
    if (!rc && !node_group)
        rc = FB_ENOMEM;
    if (!rc)
        rc = gr_lower(ctx, g, &eager, NAT_EAGER, pack, node_group, err);
    if (!rc)
        rc = gr_lower(ctx, g, &fused, NAT_FUSED, pack, NULL, err);
    if (!rc)
        gr_lower_masks(ctx, g);
    free(node_group);
    gr_groups_free(&eager);
    gr_groups_free(&fused);
    gr_choices_free(&choices);
    return rc;
}

/* The compact graph of g for the result, with what planned it. */
static fb_code describe(nat_ctx *ctx, const gr_graph *g, cJSON *planner, fb_err *err)
{
    ctx->graph = gr_graph_compact(g, GR_RESULT_MAX_NODES, &ctx->n_graph_nodes);
    if (!ctx->graph) {
        cJSON_Delete(planner);
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot describe the graph");
    }
    if (planner)
        cJSON_AddItemToObject(ctx->graph, "planner", planner);
    return FB_OK;
}

/* Builds the graph of model m (or the user's, m NULL) and lowers it. */
static fb_code zoo_build(const zoo_model *m, nat_ctx *ctx, const fb_spec *spec, fb_err *err)
{
    gr_graph g;
    gr_init(&g);
    gb b = {&g, err};
    gr_cfg c = {0};
    const char *wpath = NULL, *ipath = NULL;
    fb_code rc = m ? cfg_from_spec(spec, m, &c, err) : FB_OK;
    if (!rc)
        rc = param_path(spec, "weights", &wpath, err);
    if (!rc)
        rc = param_path(spec, "input", &ipath, err);
    if (!rc && m && m->build(&b, &c) < 0)
        rc = err->code ? err->code : fb_err_set(err, FB_EINTERNAL, NULL, "model build failed");
    if (!rc && !m) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(spec->params, "graph");
        rc = j ? gr_from_json(&g, j, "params.graph", err)
               : fb_err_set(err, FB_EINVAL, "params.graph", "workload graph needs a graph");
    }
    gr_st wst = {0};
    if (!rc && wpath)
        rc = open_named(wpath, &wst, "params.weights", err);
    if (!rc)
        rc = load_weights(ctx, &g, wpath ? &wst : NULL, "params.weights", err);
    gr_st_close(&wst);
    if (!rc)
        rc = load_input(ctx, &g, m, &c, ipath, err);
    if (!rc)
        rc = check_ids(&g, err);
    cJSON *planner = NULL;
    if (!rc)
        rc = plan_both(ctx, &g, spec, &planner, err);
    if (!rc)
        rc = describe(ctx, &g, planner, err);
    else
        cJSON_Delete(planner);
    gr_free(&g);
    return rc;
}

/* ---- an uploaded model's native form ---- */

/* A job of an uploaded model (workload model.<id>, docs/API-EXTENSIONS.md)
 * reads one safetensors file, its native form, which the worker fetched and
 * named in params.model.native (the server replaces params.model at submit,
 * so a job's sender never names a file): the graph in gr_json's form
 * (metadata "graph", written by the inductor engine's to_native.py when the
 * model was prepared), the weights by their state_dict names, the inputs
 * (FORM_INPUT and each input's name in the graph) and PyTorch eager's output
 * for them (FORM_EXPECTED), at the export's batch (metadata "batch").  Where the export's batch is
 * dynamic
 * ("batch_dynamic" "true") the job's batch replaces it: the input's samples
 * and the expected output's rows repeat (samples of an inference model do
 * not see each other). */
#define FORM_FORMAT   "fusionbench.native/1"
#define FORM_INPUT    "__input__."
#define FORM_EXPECTED "__expected__"
#define FORM_FIELD    "params.model.native"

static fb_code form_open(const fb_spec *spec, gr_st *st, int64_t *b0, bool *dynamic, fb_err *err)
{
    const cJSON *m = spec->params ? cJSON_GetObjectItemCaseSensitive(spec->params, "model") : NULL;
    const char *path = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "native"));
    if (!path || !path[0] || strlen(path) > PATH_MAX_LEN)
        return fb_err_set(err, FB_EINVAL, FORM_FIELD,
                          "a job of an uploaded model needs its native form, which a worker "
                          "fetches: submit the job to the service");
    fb_code rc = gr_st_open(path, st, FORM_FIELD, err);
    if (rc)
        return rc;
    const char *fmt = gr_st_meta(st, "format"), *batch = gr_st_meta(st, "batch");
    const char *dyn = gr_st_meta(st, "batch_dynamic");
    char *end = NULL;
    *b0 = batch ? strtoll(batch, &end, 10) : 0;
    *dynamic = dyn && strcmp(dyn, "true") == 0;
    if (!fmt || strcmp(fmt, FORM_FORMAT) != 0)
        rc =
            fb_err_set(err, FB_EINVAL, FORM_FIELD, "not a native form of format %s (it says %.40s)",
                       FORM_FORMAT, fmt ? fmt : "nothing");
    else if (!batch || *end || *b0 < 1 || *b0 > FB_MAX_BATCH)
        rc = fb_err_set(err, FB_EINVAL, FORM_FIELD, "the native form has no batch size");
    else if (!gr_st_meta(st, "graph"))
        rc = fb_err_set(err, FB_EINVAL, FORM_FIELD, "the native form has no graph");
    if (rc)
        gr_st_close(st);
    return rc;
}

/* The form's graph, the first dimension of its inputs that take the batch
 * ("batch": true) set to batch. */
static fb_code form_graph(const gr_st *st, int64_t batch, cJSON **out, fb_err *err)
{
    cJSON *j = cJSON_Parse(gr_st_meta(st, "graph"));
    const cJSON *t;
    bool any = false;
    *out = NULL;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(j, "tensors"))
    {
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "kind"));
        cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(t, "shape"), 0);
        bool input = kind && strcmp(kind, "input") == 0;
        if (input && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "batch")) &&
            cJSON_IsNumber(d0))
            cJSON_SetNumberValue(d0, (double)batch);
        any = any || input;
    }
    if (!any) {
        cJSON_Delete(j);
        return fb_err_set(err, FB_EINVAL, FORM_FIELD, "the native form's graph has no input");
    }
    *out = j;
    return FB_OK;
}

/* Tensor name of the form into out, whose shape is dims: read as it is, or,
 * where only its first dimension (b0 stored) differs, out's row i is its row
 * i mod b0. */
static fb_code form_tiled(const gr_st *st, const char *name, int rank, const int64_t *dims,
                          float *out, fb_err *err)
{
    const gr_st_tensor *s = gr_st_find(st, name);
    int64_t d[GR_MAX_DIMS], row = 1, b0 = s && s->rank >= 1 ? s->dims[0] : 0;
    if (rank < 1 || b0 < 1 || b0 == dims[0])
        return gr_st_read(st, name, rank, dims, out, FORM_FIELD, err);
    for (int i = 0; i < rank; i++) {
        d[i] = i ? dims[i] : b0;
        row *= i ? dims[i] : 1;
    }
    float *tmp = malloc((size_t)(b0 * row) * sizeof *tmp);
    if (!tmp)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for the native form's %s", name);
    fb_code rc = gr_st_read(st, name, rank, d, tmp, FORM_FIELD, err);
    for (int64_t i = 0; !rc && i < dims[0]; i++)
        memcpy(out + i * row, tmp + (i % b0) * row, (size_t)row * sizeof *out);
    free(tmp);
    return rc;
}

/* Each input of the graph from the form's FORM_INPUT + its name. */
static fb_code form_inputs(nat_ctx *ctx, gr_graph *g, const gr_st *st, fb_err *err)
{
    char name[GR_NAME_MAX + 16];
    fb_code rc = FB_OK;
    for (int i = 0; i < g->n_tensors && !rc; i++) {
        gr_tensor *t = &g->tensors[i];
        if (t->kind != GR_T_INPUT)
            continue;
        snprintf(name, sizeof name, "%s%s", FORM_INPUT, t->name);
        rc = nat_pat_alloc(ctx, gr_numel(t), NAT_ALL_VARIANTS, t->name, &t->data, err);
        if (!rc)
            rc = form_tiled(st, name, t->rank, t->dims, t->data, err);
    }
    return rc;
}

/* PyTorch's output into ctx->reference, when the form has it for an output
 * whose first dimension is the batch (or at the export's batch). */
static fb_code form_reference(nat_ctx *ctx, const gr_graph *g, const gr_st *st, int64_t b0,
                              int64_t batch, fb_err *err)
{
    const gr_tensor *o = &g->tensors[g->output];
    const char *torch = gr_st_meta(st, "torch");
    if (!gr_st_find(st, FORM_EXPECTED) || (batch != b0 && (o->rank < 1 || o->dims[0] != batch)))
        return FB_OK; /* nothing to check against: the gate compares fused with eager */
    ctx->reference_n = (size_t)gr_numel(o);
    ctx->reference = malloc(ctx->reference_n * sizeof *ctx->reference);
    if (!ctx->reference)
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for the reference output");
    int n =
        snprintf(ctx->reference_what, sizeof ctx->reference_what,
                 "PyTorch eager (torch %.32s) on the same weights and input", torch ? torch : "?");
    if (batch != b0 && n > 0 && (size_t)n < sizeof ctx->reference_what)
        snprintf(ctx->reference_what + n, sizeof ctx->reference_what - (size_t)n,
                 ", its %lld samples repeated to %lld", (long long)b0, (long long)batch);
    return form_tiled(st, FORM_EXPECTED, o->rank, o->dims, ctx->reference, err);
}

static fb_code form_build(nat_ctx *ctx, const fb_spec *spec, fb_err *err)
{
    gr_st st = {0};
    gr_graph g;
    cJSON *j = NULL;
    int64_t b0 = 0;
    bool dynamic = false;
    gr_init(&g);
    fb_code rc = form_open(spec, &st, &b0, &dynamic, err);
    int64_t batch = spec->batch_size > 0 ? spec->batch_size : b0;
    if (!rc && !dynamic && batch != b0)
        rc = fb_err_set(err, FB_EUNSUPPORTED, "batch_size",
                        "the model was exported with a fixed batch of %lld", (long long)b0);
    if (!rc)
        rc = form_graph(&st, batch, &j, err);
    if (!rc)
        rc = gr_from_json(&g, j, "the native form's graph", err);
    if (!rc)
        rc = load_weights(ctx, &g, &st, FORM_FIELD, err);
    if (!rc)
        rc = form_inputs(ctx, &g, &st, err);
    if (!rc)
        rc = check_ids(&g, err);
    if (!rc)
        rc = form_reference(ctx, &g, &st, b0, batch, err);
    cJSON *planner = NULL;
    if (!rc)
        rc = plan_both(ctx, &g, spec, &planner, err);
    if (!rc && ctx->reference && ctx->plans[NAT_EAGER].out_n != ctx->reference_n)
        rc = fb_err_set(err, FB_EINTERNAL, NULL, "the graph's output has %zu values, PyTorch's %zu",
                        ctx->plans[NAT_EAGER].out_n, ctx->reference_n);
    if (!rc)
        rc = describe(ctx, &g, planner, err);
    else
        cJSON_Delete(planner);
    cJSON_Delete(j);
    gr_free(&g);
    gr_st_close(&st);
    return rc;
}

/* ---- the zoo ---- */

#define IMG(img, cls)                                                                              \
    {                                                                                              \
        .image = img, .classes = cls                                                               \
    }

static const zoo_model m_resnet18 = {GR_IN_IMAGE, IMG(224, 1000), gr_resnet18};
static const zoo_model m_resnet50 = {GR_IN_IMAGE, IMG(224, 1000), gr_resnet50};
static const zoo_model m_mobilenet_v2 = {GR_IN_IMAGE, IMG(224, 1000), gr_mobilenet_v2};
static const zoo_model m_vgg16 = {GR_IN_IMAGE, IMG(224, 1000), gr_vgg16};
static const zoo_model m_vit = {
    GR_IN_IMAGE,
    {.image = 224, .classes = 1000, .layers = 12, .hidden = 768, .heads = 12, .inter = 3072},
    gr_vit_b_16};
static const zoo_model m_mnv3 = {GR_IN_IMAGE, IMG(224, 1000), gr_mobilenet_v3_large};
static const zoo_model m_effnet = {GR_IN_IMAGE, IMG(224, 1000), gr_efficientnet_b0};
static const zoo_model m_convnext = {GR_IN_IMAGE, IMG(224, 1000), gr_convnext_tiny};
static const zoo_model m_whisper = {
    GR_IN_MEL,
    {.frames = 3000, .layers = 4, .hidden = 384, .heads = 6, .inter = 1536},
    gr_whisper_tiny};
static const zoo_model m_bert = {
    GR_IN_TOKENS,
    {.seq = 128, .layers = 12, .hidden = 768, .heads = 12, .inter = 3072, .vocab = 30522},
    gr_bert_base};
static const zoo_model m_gpt2 = {
    GR_IN_TOKENS,
    {.seq = 128, .layers = 12, .hidden = 768, .heads = 12, .inter = 3072, .vocab = 50257},
    gr_gpt2};

/* The params a model takes: the sizes its config has (cfg_from_spec reads
 * those with a default), the files, and the engine's. */
#define ZOO_IMG_PARAMS "image classes"
#define ZOO_TXT_PARAMS "seq layers hidden heads inter vocab"
#define ZOO_ENTRY(VAR, MODEL, NAME, DOMAIN, DESC, PARAMS)                                          \
    static fb_code build_##VAR(nat_ctx *ctx, const fb_spec *spec, fb_err *err)                     \
    {                                                                                              \
        return zoo_build(MODEL, ctx, spec, err);                                                   \
    }                                                                                              \
    static const nat_pattern VAR = {                                                               \
        .info = {.name = NAME,                                                                     \
                 .engine = "native",                                                               \
                 .domain = DOMAIN,                                                                 \
                 .description = DESC,                                                              \
                 .default_batch_size = 1,                                                          \
                 .devices = {"cpu", NULL},                                                         \
                 .dtypes = {"float32", NULL},                                                      \
                 .variants = {"eager", "fused", NULL},                                             \
                 .params = PARAMS " weights input " NAT_PARAMS_ENGINE},                            \
        .build = build_##VAR,                                                                      \
    }

ZOO_ENTRY(z_resnet18, &m_resnet18, "resnet18", "vision", "ResNet-18 (torchvision), 224x224",
          ZOO_IMG_PARAMS);
ZOO_ENTRY(z_resnet50, &m_resnet50, "resnet50", "vision", "ResNet-50 v1.5 (torchvision), 224x224",
          ZOO_IMG_PARAMS);
ZOO_ENTRY(z_mobilenet_v2, &m_mobilenet_v2, "mobilenet_v2", "vision",
          "MobileNetV2 (torchvision), 224x224", ZOO_IMG_PARAMS);
ZOO_ENTRY(z_vgg16, &m_vgg16, "vgg16", "vision", "VGG-16 (torchvision), 224x224", ZOO_IMG_PARAMS);
ZOO_ENTRY(z_mnv3, &m_mnv3, "mobilenet_v3_large", "vision",
          "MobileNetV3-Large (torchvision), 224x224", ZOO_IMG_PARAMS);
ZOO_ENTRY(z_effnet, &m_effnet, "efficientnet_b0", "vision",
          "EfficientNet-B0 (torchvision), 224x224", ZOO_IMG_PARAMS);
ZOO_ENTRY(z_convnext, &m_convnext, "convnext_tiny", "vision",
          "ConvNeXt-Tiny (torchvision), 224x224", ZOO_IMG_PARAMS);
ZOO_ENTRY(z_whisper, &m_whisper, "whisper_tiny", "speech",
          "Whisper-tiny encoder (transformers), 80-bin log-mel of 3000 frames",
          "frames layers hidden heads inter");
ZOO_ENTRY(z_vit, &m_vit, "vit_b_16", "vision", "ViT-B/16 (torchvision), 224x224",
          ZOO_IMG_PARAMS " layers hidden heads inter");
ZOO_ENTRY(z_bert, &m_bert, "bert_base", "nlp", "BERT-base encoder (transformers), seq 128",
          ZOO_TXT_PARAMS);
ZOO_ENTRY(z_gpt2, &m_gpt2, "gpt2", "nlp", "GPT-2 124M (transformers), prefill of 128 tokens",
          ZOO_TXT_PARAMS);
ZOO_ENTRY(z_graph, NULL, "graph", "custom", "A user's graph from params.graph", "graph");

const nat_pattern *const gr_models[] = {
    &z_resnet18, &z_resnet50, &z_mobilenet_v2, &z_mnv3,    &z_vgg16, &z_effnet, &z_convnext,
    &z_vit,      &z_bert,     &z_gpt2,         &z_whisper, &z_graph, NULL,
};

static fb_code build_upload(nat_ctx *ctx, const fb_spec *spec, fb_err *err)
{
    return form_build(ctx, spec, err);
}

const nat_pattern gr_upload = {
    .info = {.name = "model",
             .engine = "native",
             .domain = "user",
             .description = "An uploaded model, through the native form made when it was prepared",
             .default_batch_size = 1,
             .devices = {"cpu", "cuda", NULL},
             .dtypes = {"float32", NULL},
             .variants = {"eager", "fused", NULL}},
    .build = build_upload,
};

const nat_pattern *gr_workload_find(const char *name)
{
    const nat_pattern *p = fb_workload_is_upload(name) ? &gr_upload : nat_pattern_find(name);
    for (int i = 0; !p && name && gr_models[i]; i++)
        if (strcmp(gr_models[i]->info.name, name) == 0)
            p = gr_models[i];
    return p;
}

fb_code gr_ctx_build_on(const fb_spec *spec, const struct gr_cost_timer *timer, nat_ctx **out,
                        fb_err *err)
{
    const nat_pattern *pat = gr_workload_find(spec->workload);
    *out = NULL;
    if (!pat)
        return fb_err_set(err, FB_EUNSUPPORTED, "workload", "native engine has no workload %s",
                          spec->workload);
    return nat_ctx_build_for(pat, spec, timer, out, err);
}

fb_code gr_ctx_build(const fb_spec *spec, nat_ctx **out, fb_err *err)
{
    return gr_ctx_build_on(spec, NULL, out, err);
}
