/* gr_json: graphs as JSON (gr.h).  The form:
 *   {"tensors": [{"name", "kind": "input"|"weight", "shape": [..], "init"}...],
 *    "nodes": [{"op", "name", "inputs": [tensor indexes], attrs...}...],
 *    "output": index}
 * Tensor indexes: the declared tensors first (0..T-1), then each node's output
 * in node order (T, T+1, ...), so a node can only read what precedes it and a
 * graph is acyclic by construction.  The dump renumbers a builder's graph into
 * this order.  Attrs: stride, pad, dil, kernel ([h, w]), groups, axis, start,
 * end, perm, shape, trans_b, count_pad, eps, alpha. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr.h"

/* A user graph may declare at most this many inputs. */
#define GR_JSON_MAX_INPUTS 16

/* A user graph may declare at most this many floats of input and weights. */
#define GR_JSON_MAX_FLOATS ((int64_t)1 << 28)

static const char *const init_names[] = {"fanin", "one", "small", "var", "embed"};

/* ---- dump ---- */

static cJSON *int_array(const int64_t *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static cJSON *pair(const int *v)
{
    int64_t w[2] = {v[0], v[1]};
    return int_array(w, 2);
}

static void dump_attrs(cJSON *o, const gr_node *n)
{
    const gr_attr *a = &n->a;
    cJSON_AddItemToObject(o, "stride", pair(a->stride));
    cJSON_AddItemToObject(o, "pad", pair(a->pad));
    cJSON_AddItemToObject(o, "dil", pair(a->dil));
    cJSON_AddItemToObject(o, "kernel", pair(a->kernel));
    cJSON_AddNumberToObject(o, "groups", a->groups);
    cJSON_AddNumberToObject(o, "axis", a->axis);
    cJSON_AddNumberToObject(o, "start", a->start);
    cJSON_AddNumberToObject(o, "end", a->end);
    int64_t perm[GR_MAX_DIMS];
    for (int i = 0; i < GR_MAX_DIMS; i++)
        perm[i] = a->perm[i];
    if (n->op == GR_PERMUTE)
        cJSON_AddItemToObject(o, "perm", int_array(perm, GR_MAX_DIMS));
    if (n->op == GR_RESHAPE)
        cJSON_AddItemToObject(o, "shape", int_array(a->shape, a->shape_rank));
    cJSON_AddNumberToObject(o, "trans_b", a->trans_b);
    cJSON_AddNumberToObject(o, "count_pad", a->count_pad);
    cJSON_AddNumberToObject(o, "eps", a->eps);
    cJSON_AddNumberToObject(o, "alpha", a->alpha);
}

static cJSON *dump_tensor(const gr_tensor *t)
{
    static const char *const kinds[] = {"input", "weight", "act"};
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddStringToObject(o, "kind", kinds[t->kind]);
    cJSON_AddItemToObject(o, "shape", int_array(t->dims, t->rank));
    if (t->kind == GR_T_WEIGHT && t->init < 5)
        cJSON_AddStringToObject(o, "init", init_names[t->init]);
    return o;
}

cJSON *gr_to_json(const gr_graph *g)
{
    cJSON *root = cJSON_CreateObject(), *ts = cJSON_CreateArray(), *ns = cJSON_CreateArray();
    int *map = malloc(((size_t)g->n_tensors + 1) * sizeof *map);
    if (!root || !ts || !ns || !map) {
        cJSON_Delete(root);
        cJSON_Delete(ts);
        cJSON_Delete(ns);
        free(map);
        return NULL;
    }
    int k = 0;
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].kind != GR_T_ACT) {
            map[t] = k++;
            cJSON_AddItemToArray(ts, dump_tensor(&g->tensors[t]));
        }
    for (int i = 0; i < g->n_nodes; i++) {
        const gr_node *n = &g->nodes[i];
        map[n->out] = k++;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", gr_opk_name(n->op));
        cJSON_AddStringToObject(o, "name", n->name);
        int64_t in[GR_MAX_INPUTS];
        for (int j = 0; j < n->n_in; j++)
            in[j] = map[n->in[j]];
        cJSON_AddItemToObject(o, "inputs", int_array(in, n->n_in));
        cJSON_AddItemToObject(o, "shape_out",
                              int_array(g->tensors[n->out].dims, g->tensors[n->out].rank));
        dump_attrs(o, n);
        cJSON_AddItemToArray(ns, o);
    }
    cJSON_AddItemToObject(root, "tensors", ts);
    cJSON_AddItemToObject(root, "nodes", ns);
    cJSON_AddNumberToObject(root, "output", g->output >= 0 ? map[g->output] : -1);
    free(map);
    return root;
}

/* ---- parse ---- */

typedef struct jctx {
    const char *prefix;
    fb_err *err;
    char field[128];
} jctx;

static fb_code jbad(jctx *c, const char *what, int i, const char *sub, const char *why)
{
    if (sub)
        snprintf(c->field, sizeof c->field, "%s.%s[%d].%s", c->prefix, what, i, sub);
    else if (i >= 0)
        snprintf(c->field, sizeof c->field, "%s.%s[%d]", c->prefix, what, i);
    else
        snprintf(c->field, sizeof c->field, "%s.%s", c->prefix, what);
    return fb_err_set(c->err, FB_EINVAL, c->field, "%s", why);
}

/* An integer in [lo, hi]. */
static bool jint(const cJSON *j, int64_t lo, int64_t hi, int64_t *out)
{
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble) ||
        floor(j->valuedouble) != j->valuedouble || j->valuedouble < (double)lo ||
        j->valuedouble > (double)hi)
        return false;
    *out = (int64_t)j->valuedouble;
    return true;
}

/* An array of 1..max integers in [lo, hi]; *n its length. */
static bool jints(const cJSON *j, int max, int64_t lo, int64_t hi, int64_t *out, int *n)
{
    int len = cJSON_IsArray(j) ? cJSON_GetArraySize(j) : -1;
    if (len < 1 || len > max)
        return false;
    for (int i = 0; i < len; i++)
        if (!jint(cJSON_GetArrayItem(j, i), lo, hi, &out[i]))
            return false;
    *n = len;
    return true;
}

static fb_code parse_tensor(gr_graph *g, const cJSON *t, int i, int64_t *total, jctx *c)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(t, "kind");
    const cJSON *init = cJSON_GetObjectItemCaseSensitive(t, "init");
    int64_t dims[GR_MAX_DIMS];
    int rank = 0;
    if (!cJSON_IsString(name) || strlen(name->valuestring) >= GR_NAME_MAX)
        return jbad(c, "tensors", i, "name", "must be a string under 96 bytes");
    bool input = cJSON_IsString(kind) && strcmp(kind->valuestring, "input") == 0;
    if (!input && !(cJSON_IsString(kind) && strcmp(kind->valuestring, "weight") == 0))
        return jbad(c, "tensors", i, "kind", "must be input or weight");
    if (!jints(cJSON_GetObjectItemCaseSensitive(t, "shape"), GR_MAX_DIMS, 1, GR_MAX_NUMEL, dims,
               &rank))
        return jbad(c, "tensors", i, "shape", "must be 1..6 positive integers");
    uint32_t ik = GR_INIT_FANIN;
    if (init) {
        ik = 0;
        while (ik < 5 && !(cJSON_IsString(init) && strcmp(init->valuestring, init_names[ik]) == 0))
            ik++;
        if (ik == 5)
            return jbad(c, "tensors", i, "init", "must be fanin, one, small, var or embed");
    }
    if (input && gr_count_inputs(g) >= GR_JSON_MAX_INPUTS)
        return jbad(c, "tensors", i, "kind", "at most 16 inputs");
    int64_t fan = rank > 1 ? 1 : dims[0];
    for (int d = 1; d < rank; d++)
        fan *= dims[d];
    int k = input ? gr_tensor_add(g, name->valuestring, GR_T_INPUT, rank, dims, c->err)
                  : gr_weight(g, name->valuestring, rank, dims, ik, fan, c->err);
    if (k < 0)
        return jbad(c, "tensors", i, "shape", "too large");
    *total += gr_numel(&g->tensors[k]);
    if (*total > GR_JSON_MAX_FLOATS)
        return jbad(c, "tensors", i, "shape", "the graph's tensors are over 2^28 floats");
    if (input && g->input < 0)
        g->input = k; /* the first */
    return FB_OK;
}

/* Reads the optional pair attr key (1 or 2 values, one means both). */
static bool jpair(const cJSON *o, const char *key, int64_t lo, int64_t hi, int *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    int64_t v[2];
    int n = 0;
    if (!j)
        return true;
    if (!jints(j, 2, lo, hi, v, &n))
        return false;
    out[0] = (int)v[0];
    out[1] = (int)(n == 2 ? v[1] : v[0]);
    return true;
}

static bool jscalar(const cJSON *o, const char *key, int64_t lo, int64_t hi, int *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    int64_t v;
    if (!j)
        return true;
    if (!jint(j, lo, hi, &v))
        return false;
    *out = (int)v;
    return true;
}

static bool jfloat(const cJSON *o, const char *key, float *out)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j)
        return true;
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble) || fabs(j->valuedouble) > 1e6)
        return false;
    *out = (float)j->valuedouble;
    return true;
}

/* Parses the attrs of node i; the bad key is named. */
static fb_code parse_attrs(const cJSON *o, gr_attr *a, int i, jctx *c)
{
    int64_t v[GR_MAX_DIMS];
    int n = 0;
    const char *bad = NULL;
    if (!jpair(o, "stride", 1, 64, a->stride))
        bad = "stride";
    else if (!jpair(o, "pad", 0, 64, a->pad))
        bad = "pad";
    else if (!jpair(o, "dil", 1, 64, a->dil))
        bad = "dil";
    else if (!jpair(o, "kernel", 0, 4096, a->kernel))
        bad = "kernel";
    else if (!jscalar(o, "groups", 1, 65536, &a->groups))
        bad = "groups";
    else if (!jscalar(o, "axis", 0, GR_MAX_DIMS - 1, &a->axis))
        bad = "axis";
    else if (!jscalar(o, "start", 0, 1 << 30, &a->start))
        bad = "start";
    else if (!jscalar(o, "end", 0, 1 << 30, &a->end))
        bad = "end";
    else if (!jscalar(o, "trans_b", 0, 1, &a->trans_b))
        bad = "trans_b";
    else if (!jscalar(o, "count_pad", 0, 1, &a->count_pad))
        bad = "count_pad";
    else if (!jfloat(o, "eps", &a->eps) || a->eps < 0)
        bad = "eps";
    else if (!jfloat(o, "alpha", &a->alpha))
        bad = "alpha";
    if (!bad && cJSON_GetObjectItemCaseSensitive(o, "perm")) {
        if (!jints(cJSON_GetObjectItemCaseSensitive(o, "perm"), GR_MAX_DIMS, 0, GR_MAX_DIMS - 1, v,
                   &n))
            bad = "perm";
        for (int k = 0; !bad && k < n; k++)
            a->perm[k] = (int)v[k];
    }
    if (!bad && cJSON_GetObjectItemCaseSensitive(o, "shape")) {
        if (!jints(cJSON_GetObjectItemCaseSensitive(o, "shape"), GR_MAX_DIMS, -1, GR_MAX_NUMEL,
                   a->shape, &a->shape_rank))
            bad = "shape";
    }
    return bad ? jbad(c, "nodes", i, bad, "out of range or of the wrong type") : FB_OK;
}

static fb_code parse_node(gr_graph *g, const cJSON *o, int i, int declared, jctx *c)
{
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(o, "op");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    int k = cJSON_IsString(op) ? gr_opk_from_name(op->valuestring) : -1;
    if (k < 0)
        return jbad(c, "nodes", i, "op", "unknown op");
    if (name && (!cJSON_IsString(name) || strlen(name->valuestring) >= GR_NAME_MAX))
        return jbad(c, "nodes", i, "name", "must be a string under 96 bytes");
    int64_t in[GR_MAX_INPUTS];
    int n_in = 0;
    if (!jints(cJSON_GetObjectItemCaseSensitive(o, "inputs"), GR_MAX_INPUTS, 0,
               (int64_t)declared + i - 1, in, &n_in))
        return jbad(c, "nodes", i, "inputs", "must be 1..6 indexes of earlier tensors");
    gr_attr a = {0};
    fb_code rc = parse_attrs(o, &a, i, c);
    if (rc)
        return rc;
    int ins[GR_MAX_INPUTS];
    for (int j = 0; j < n_in; j++)
        ins[j] = (int)in[j];
    char nm[GR_NAME_MAX];
    snprintf(nm, sizeof nm, "%s", name ? name->valuestring : gr_opk_name((gr_opk)k));
    fb_err sub = {0};
    if (gr_node_add(g, (gr_opk)k, nm, n_in, ins, &a, &sub) < 0)
        return jbad(c, "nodes", i, NULL, sub.msg);
    return FB_OK;
}

fb_code gr_from_json(gr_graph *g, const cJSON *j, const char *prefix, fb_err *err)
{
    jctx c = {.prefix = prefix, .err = err};
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(j, "tensors");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(j, "nodes");
    if (!cJSON_IsObject(j))
        return jbad(&c, "", -1, NULL, "must be an object");
    int nt = cJSON_IsArray(ts) ? cJSON_GetArraySize(ts) : -1;
    int nn = cJSON_IsArray(ns) ? cJSON_GetArraySize(ns) : -1;
    if (nt < 1 || nt > GR_MAX_TENSORS / 2)
        return jbad(&c, "tensors", -1, NULL, "must be an array of 1..10000 tensors");
    if (nn < 1 || nn > GR_MAX_NODES)
        return jbad(&c, "nodes", -1, NULL, "must be an array of 1..10000 nodes");
    int64_t total = 0;
    fb_code rc = FB_OK;
    int i = 0;
    for (const cJSON *t = ts->child; t && !rc; t = t->next, i++)
        rc = parse_tensor(g, t, i, &total, &c);
    if (!rc && g->input < 0)
        rc = jbad(&c, "tensors", -1, NULL, "needs a tensor of kind input");
    i = 0;
    for (const cJSON *o = ns->child; o && !rc; o = o->next, i++)
        rc = parse_node(g, o, i, nt, &c);
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(j, "output");
    int64_t ov = 0;
    if (!rc && out) {
        if (!jint(out, nt, (int64_t)nt + nn - 1, &ov))
            rc = jbad(&c, "output", -1, NULL, "must be the index of a node's output");
        else
            g->output = (int)ov;
    }
    return rc;
}
