/* gr: the native engine's graph IR for whole models.  A graph is a list of
 * tensors (shape, kind, name) and a list of nodes in topological order (op kind,
 * input tensors, one output tensor, attributes).  Shapes are inferred when a
 * node is added, so a builder (or a user's JSON graph) that connects tensors of
 * the wrong shape fails at build time with a message naming the node.
 *
 * The graph knows nothing of memory or kernels: gr_plan groups its nodes by
 * fusion rules, gr_lower turns the groups into a nat_plan (one per variant) with
 * activation buffers placed in an arena by lifetime.  A CUDA backend reuses the
 * graph and the groups and only swaps the launch functions. */
#ifndef GR_H
#define GR_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "fb_err.h"

#define GR_MAX_DIMS    6
#define GR_MAX_INPUTS  6
#define GR_MAX_TENSORS 20000 /* hard maxima: a user graph cannot grow past these */
#define GR_MAX_NODES   10000
#define GR_NAME_MAX    96
#define GR_MAX_NUMEL   ((int64_t)1 << 30) /* per tensor: 4 GiB of floats */

typedef enum gr_tkind {
    GR_T_INPUT,  /* the graph's input (images, features, token ids as floats) */
    GR_T_WEIGHT, /* a parameter: filled randomly or from safetensors, by name */
    GR_T_ACT,    /* an activation: produced by a node */
} gr_tkind;

typedef enum gr_opk {
    GR_CONV2D,    /* in, w[, b]; attrs stride, pad, dil (h, w), groups */
    GR_CONV1D,    /* in [n, c, l], w [co, ci/g, k][, b]; stride[0], pad[0], dil[0], groups */
    GR_BATCHNORM, /* in [n, c, ...], gamma, beta, mean, var; eps */
    GR_LINEAR,    /* in [..., k], w [n, k][, b] (PyTorch layout); trans_w=0: w is [k, n] */
    GR_MATMUL,    /* a [..., m, k], b [..., k, n] (trans_b: [..., n, k]) */
    GR_ADD,       /* a, b: b same shape, or broadcast (see gr_bcast) */
    GR_MUL,       /* a, b likewise */
    GR_SCALE,     /* a * alpha */
    GR_RELU,
    GR_RELU6,
    GR_GELU,      /* exact (erf) */
    GR_GELU_TANH, /* tanh approximation (GPT-2's gelu_new) */
    GR_SILU,
    GR_SIGMOID,
    GR_HARDSWISH,
    GR_HARDSIGMOID,
    GR_TANH,
    GR_MAXPOOL2D,          /* kernel, stride, pad (h, w) */
    GR_AVGPOOL2D,          /* kernel, stride, pad; count_include_pad */
    GR_ADAPTIVE_AVGPOOL2D, /* out size (h, w) */
    GR_LAYERNORM,          /* in [..., d], gamma [d], beta [d]; eps */
    GR_SOFTMAX,            /* along the last dim */
    GR_CAUSAL_MASK,        /* scores [..., s, s]: -inf above the diagonal */
    GR_EMBEDDING,          /* ids (floats holding integers) [...], table [v, d] -> [..., d] */
    GR_RESHAPE,            /* a view: shape attr, one -1 allowed */
    GR_FLATTEN,            /* a view: dims [axis..] merged */
    GR_PERMUTE,            /* perm attr */
    GR_CONCAT,             /* along axis; an input with leading dim 1 broadcasts over it */
    GR_SLICE,              /* along axis: [start, end) */
    GR_MEAN,               /* over the last dims: axis..rank-1 */
    GR_OPK_COUNT
} gr_opk;

typedef struct gr_tensor {
    char name[GR_NAME_MAX]; /* weights: the PyTorch state_dict name */
    gr_tkind kind;
    int rank;
    int64_t dims[GR_MAX_DIMS];
    int producer;   /* node index, -1 for inputs and weights */
    int n_users;    /* nodes that read it */
    int view_of;    /* reshape/flatten: the tensor whose memory it shares, else -1 */
    float *data;    /* weights and inputs: set by the zoo at build; not owned */
    float *packed;  /* linear weights: gr_lower's nat_pw_pack copy; conv weights: their
                       nat_conv2d_prepare form (Winograd); not owned */
    uint32_t init;  /* weights: gr_init_kind (how random weights are drawn) */
    int64_t fan_in; /* weights: for the default init */
} gr_tensor;

/* Attributes of a node; unused ones stay 0. */
typedef struct gr_attr {
    int stride[2], pad[2], dil[2], kernel[2], groups;
    int axis, start, end;
    int perm[GR_MAX_DIMS];
    int64_t shape[GR_MAX_DIMS];
    int shape_rank;
    int trans_b;   /* matmul */
    int count_pad; /* avgpool: count_include_pad */
    float eps, alpha;
} gr_attr;

/* Whose GEMM a convolution or linear node runs on (gr_node.gemm, and
 * gemm_fused inside a fused group's launch): the job's mode (params.gemm,
 * nat_spec_gemm_pack), or the cost planner's measured choice
 * (gr_gemm_choose, params.gemm "auto"). */
enum gr_gemm { GR_GEMM_JOB, GR_GEMM_PACKED, GR_GEMM_OPENBLAS };

typedef struct gr_node {
    gr_opk op;
    char name[GR_NAME_MAX];
    int n_in;
    int in[GR_MAX_INPUTS];
    int out;
    gr_attr a;
    unsigned char gemm;       /* enum gr_gemm: its launch alone */
    unsigned char gemm_fused; /* and the fused group's it heads or is in */
} gr_node;

typedef struct gr_graph {
    int n_tensors, cap_tensors;
    gr_tensor *tensors;
    int n_nodes, cap_nodes;
    gr_node *nodes;
    int input;  /* the (first) input tensor; a user's graph may have more */
    int output; /* the output tensor */
} gr_graph;

/* Weight init kinds (random weights, PyTorch-like). */
enum gr_init_kind {
    GR_INIT_FANIN, /* uniform +-1/sqrt(fan_in): conv/linear weights and biases */
    GR_INIT_ONE,   /* norm gamma: 1 + small noise */
    GR_INIT_SMALL, /* norm beta, BN mean: +-0.1 */
    GR_INIT_VAR,   /* BN running var: [0.5, 1.5) */
    GR_INIT_EMBED, /* embeddings, positions, tokens: +-0.04 (std ~0.02) */
};

const char *gr_opk_name(gr_opk op);  /* "conv2d", "batch_norm", ... */
int gr_opk_from_name(const char *s); /* -1 when unknown */
bool gr_opk_is_elementwise(gr_opk op);
bool gr_opk_is_act(gr_opk op);

void gr_init(gr_graph *g);
void gr_free(gr_graph *g);

/* The graph's tensors of kind GR_T_INPUT. */
int gr_count_inputs(const gr_graph *g);

int64_t gr_numel(const gr_tensor *t);

/* Adds a tensor; returns its index or -1 (err set: over GR_MAX_TENSORS, bad
 * dims or numel over GR_MAX_NUMEL). */
int gr_tensor_add(gr_graph *g, const char *name, gr_tkind kind, int rank, const int64_t *dims,
                  fb_err *err);

/* Adds a weight named name of the given dims with init kind and fan_in. */
int gr_weight(gr_graph *g, const char *name, int rank, const int64_t *dims, uint32_t init,
              int64_t fan_in, fb_err *err);

/* Adds node op reading in[0..n_in) with attrs a (may be NULL), infers the
 * output shape, creates the output tensor and returns its index; -1 with err
 * naming the node when the inputs do not fit the op. */
int gr_node_add(gr_graph *g, gr_opk op, const char *name, int n_in, const int *in, const gr_attr *a,
                fb_err *err);

/* ---- JSON (gr_json.c) ---- */

/* The graph as JSON: {"tensors": [...], "nodes": [...], "input": i, "output": o}.
 * Caller deletes; NULL on ENOMEM. */
cJSON *gr_to_json(const gr_graph *g);

/* Builds g (initialized by the caller) from a JSON graph of the same form.  The
 * inputs (1 to 16; "batch": true marks one whose first dimension is the
 * batch) and the weights are declared in "tensors"; activations come
 * only from nodes ({"op", "name", "inputs": [tensor indexes], attrs}).
 * FB_EINVAL naming the field (under prefix, e.g. "params.graph") on any error. */
FB_MUSTCHECK fb_code gr_from_json(gr_graph *g, const cJSON *j, const char *prefix, fb_err *err);

/* ---- the result's view (gr_report.c) ---- */

/* Nodes the result's graph keeps: a model has up to a few thousand; a user's
 * graph is cut here and says so ("truncated"). */
#define GR_RESULT_MAX_NODES 4096

/* The graph for the result, compact: {"n_nodes": total, "truncated": bool,
 * "input": {"shape"}, "nodes": [{"id", "op", "name", "shape", "in"}]} with the
 * first max_nodes nodes; "in" lists the producing node ids of a node's
 * activation inputs (-1: the graph input; weights are left out).  *kept is the
 * node count written.  Caller deletes; NULL on ENOMEM. */
cJSON *gr_graph_compact(const gr_graph *g, int max_nodes, int *kept);

#endif
