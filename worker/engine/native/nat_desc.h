/* nat_desc: what a launch computes, in named fields.  Every launch carries a
 * descriptor (nat_launch.dk and .d): the shapes, strides, epilogue and flags
 * of its kind, the one record that the CPU kernels execute, the CUDA lowering
 * translates, and the report and the explainer measure (bytes and FLOPs per
 * launch, nat_cost.h).  Its buffers stay in nat_launch.p[], at the slots the
 * kind's enum names (a backend maps them to device memory without knowing the
 * kind); a slot left NULL is an absent operand (no bias, no residual).
 *
 * Kinds group the kernels that take the same arguments: a plain GEMM, a GEMM
 * with an epilogue, a batched GEMM and a linear layer are all NAT_D_GEMM. */
#ifndef NAT_DESC_H
#define NAT_DESC_H

#include <stdbool.h>
#include <stdint.h>

#include "nat_kern.h"

typedef enum nat_dkind {
    NAT_D_NONE,    /* not filled: a bug (nat_launch_check) */
    NAT_D_GEMM,    /* c = act(op(a) b + bias + res), nb times */
    NAT_D_MLP,     /* out = act(x w1 + b1) w2 + b2 [+ res] */
    NAT_D_CONV,    /* out = act(conv(in, w) + bias + res) */
    NAT_D_EPI,     /* out = act(x + bias[channel] + res): a backend's separate epilogue */
    NAT_D_ELEM,    /* out = a (op) b, op(a), or the fixed element chain */
    NAT_D_CHAIN,   /* out = an interpreted list of elementwise steps on x */
    NAT_D_BN,      /* inference batch norm over NCHW */
    NAT_D_ROWS,    /* per row, output as input: softmax, layernorm, causal mask */
    NAT_D_REDUCE,  /* per row, one value out: max, sum, mean */
    NAT_D_ATTN,    /* o = softmax(scale q k^T [+ mask]) v */
    NAT_D_POOL,    /* max/avg/adaptive-avg pooling over planes */
    NAT_D_EMBED,   /* rows of a table gathered by ids */
    NAT_D_PERMUTE, /* axes reordered */
    NAT_D_CONCAT,  /* inputs joined along an axis */
    NAT_D_SLICE,   /* a range of one axis */
    NAT_D_COUNT
} nat_dkind;

/* The kind's name ("gemm", "conv", ...), for reports. */
const char *nat_dkind_name(nat_dkind k);

/* ---- GEMM: gemm, gemm with epilogue, batched GEMM, linear ---- */
enum { NAT_GEMM_A, NAT_GEMM_B, NAT_GEMM_BIAS, NAT_GEMM_RES, NAT_GEMM_C, NAT_GEMM_PB };
typedef struct nat_gemm_desc {
    int64_t nb; /* batch count (1: one GEMM); a, b and c are nb matrices back to back */
    int64_t m, n, k;
    bool b_trans; /* b is [n, k] (nn.Linear's weight, bmm's trans_b); else [k, n] */
    int act;      /* nat_act after bias (by column) and res ([m, n]) */
} nat_gemm_desc;

/* ---- MLP in one launch: the hidden tensor never reaches memory ---- */
enum {
    NAT_MLP_X,
    NAT_MLP_W1,
    NAT_MLP_B1,
    NAT_MLP_W2,
    NAT_MLP_B2,
    NAT_MLP_OUT,
    NAT_MLP_WS,  /* workspace */
    NAT_MLP_PW1, /* w1 packed (nat_pw_pack), NULL: OpenBLAS reads w1 */
    NAT_MLP_PW2,
    NAT_MLP_RES
};
typedef struct nat_mlp_desc {
    int64_t m, d, h;         /* x [m, d] -> hidden [m, h] -> out [m, d] */
    int act;                 /* the hidden activation */
    bool w1_trans, w2_trans; /* w1 is [h, d] / w2 is [d, h] (nn.Linear); else [d, h] / [h, d] */
    int64_t mode, rb, slots; /* the CPU schedule (nat_mlp_ws) */
} nat_mlp_desc;

/* ---- convolution ---- */
enum {
    NAT_CONV_IN,
    NAT_CONV_W,
    NAT_CONV_BIAS,
    NAT_CONV_RES,
    NAT_CONV_OUT,
    NAT_CONV_WS,  /* workspace */
    NAT_CONV_PREP /* w made ready (nat_conv2d_prepare), NULL: none */
};
typedef struct nat_conv_desc {
    nat_conv_shape s; /* finished (ho, wo set); s.blas: the GEMMs on OpenBLAS */
    int act;
} nat_conv_desc;

/* ---- epilogue on its own (a backend's, after a library GEMM or conv) ---- */
enum { NAT_EPI_X, NAT_EPI_BIAS, NAT_EPI_RES, NAT_EPI_OUT };
typedef struct nat_epi_desc {
    int64_t n;     /* elements */
    int64_t c;     /* bias length: element i takes bias[(i / inner) % c] */
    int64_t inner; /* 1: a GEMM's column bias; h*w: a conv's channel bias */
    int act;
} nat_epi_desc;

/* ---- elementwise: binary, unary, the fixed chain ---- */
enum { NAT_ELEM_A, NAT_ELEM_B, NAT_ELEM_OUT };
enum nat_binop { NAT_ADD, NAT_SUB, NAT_MUL, NAT_DIV };
enum nat_unop { NAT_RELU, NAT_GELU, NAT_SIGMOID, NAT_EXP, NAT_RSQRT };
/* How b broadcasts onto a [rows, cols] a. */
enum nat_bcast {
    NAT_BC_FULL,   /* b[rows, cols] */
    NAT_BC_COL,    /* b[cols]: a bias */
    NAT_BC_ROW,    /* b[rows]: a per-row statistic */
    NAT_BC_SCALAR, /* the scalar field, no b */
    NAT_BC_TILE,   /* b[period, cols] repeated down the rows: a mask */
};
typedef struct nat_elem_desc {
    int64_t rows, cols; /* a and out are [rows, cols] (a unary op: rows 1) */
    int op;             /* nat_binop or nat_unop, by the kernel */
    int bcast;          /* nat_bcast of b (binary) */
    int64_t period;     /* NAT_BC_TILE's rows of b */
    float scalar;       /* NAT_BC_SCALAR's operand */
    float alpha, beta;  /* the fixed chain's relu(a * alpha + beta) */
} nat_elem_desc;

/* ---- interpreted elementwise chain ---- */
enum { NAT_CHAIN_X, NAT_CHAIN_OUT, NAT_CHAIN_OPD }; /* operand j at p[NAT_CHAIN_OPD + j] */
#define NAT_CHAIN_MAX 12
enum nat_chain_op { NAT_CH_ACT, NAT_CH_ADD, NAT_CH_MUL, NAT_CH_SCALE };
enum nat_chain_bc { NAT_CH_FULL, NAT_CH_COL, NAT_CH_ROW };
typedef struct nat_chain_step {
    uint8_t op;      /* nat_chain_op */
    uint8_t act;     /* NAT_CH_ACT: the nat_act */
    uint8_t bc;      /* NAT_CH_ADD/MUL: how the operand broadcasts (nat_chain_bc) */
    uint8_t operand; /* NAT_CH_ADD/MUL: its index */
    float scalar;    /* NAT_CH_SCALE's factor */
    int64_t size;    /* NAT_CH_COL/ROW: the operand's length; ROW: elements per row value */
} nat_chain_step;
typedef struct nat_chain_desc {
    int64_t n; /* elements of x and out */
    int n_steps;
    nat_chain_step steps[NAT_CHAIN_MAX];
} nat_chain_desc;

/* ---- batch norm (inference) ---- */
enum { NAT_BN_X, NAT_BN_MEAN, NAT_BN_VAR, NAT_BN_GAMMA, NAT_BN_BETA, NAT_BN_OUT };
typedef struct nat_bn_desc {
    int64_t n, c, hw;
    float eps;
} nat_bn_desc;

/* ---- per row: softmax, layernorm, causal mask; reductions ---- */
enum { NAT_ROWS_X, NAT_ROWS_OUT, NAT_ROWS_RES, NAT_ROWS_GAMMA, NAT_ROWS_BETA };
enum nat_redop { NAT_RMAX, NAT_RSUM, NAT_RMEAN };
enum nat_rowop { NAT_ROW_SOFTMAX, NAT_ROW_LAYERNORM, NAT_ROW_CAUSAL };
typedef struct nat_rows_desc {
    int64_t rows, cols;
    int op;      /* NAT_D_ROWS: nat_rowop; NAT_D_REDUCE: nat_redop */
    bool causal; /* softmax: -inf above the diagonal of each cols x cols block */
    float scale; /* softmax of scale * x */
    float eps;   /* layernorm */
} nat_rows_desc;

/* ---- attention ---- */
enum { NAT_ATTN_Q, NAT_ATTN_K, NAT_ATTN_V, NAT_ATTN_O };
typedef struct nat_attn_desc {
    int64_t bh, s, d; /* q, k, v, o are [bh, s, d] */
    bool causal;
    float scale;
} nat_attn_desc;

/* ---- data movement and pooling ---- */
enum { NAT_MOVE_IN, NAT_MOVE_OUT };
typedef struct nat_pool_desc {
    int64_t planes, h, w, kh, kw, sh, sw, ph, pw, ho, wo; /* adaptive: kh..pw unused */
    bool count_pad;                                       /* avg: padding counts */
} nat_pool_desc;

enum { NAT_EMBED_IDS, NAT_EMBED_TABLE, NAT_EMBED_OUT };
typedef struct nat_embed_desc {
    int64_t n_ids, d, vocab;
} nat_embed_desc;

#define NAT_PERMUTE_MAX_RANK 6
typedef struct nat_permute_desc {
    int rank;
    int64_t dims[NAT_PERMUTE_MAX_RANK]; /* of the input */
    int64_t perm[NAT_PERMUTE_MAX_RANK]; /* output axis d is input axis perm[d] */
} nat_permute_desc;

#define NAT_CONCAT_MAX_IN 6
enum { NAT_CONCAT_OUT = NAT_CONCAT_MAX_IN }; /* inputs at p[0 .. n_in) */
typedef struct nat_concat_desc {
    int n_in;
    int64_t outer, inner, out_axis;
    int64_t axis[NAT_CONCAT_MAX_IN]; /* each input's size along the axis */
    unsigned bcast;                  /* bit k: input k's outer size is 1 (broadcast) */
} nat_concat_desc;

typedef struct nat_slice_desc {
    int64_t outer, axis_len, start, len, inner;
} nat_slice_desc;

typedef union nat_desc {
    nat_gemm_desc gemm;
    nat_mlp_desc mlp;
    nat_conv_desc conv;
    nat_epi_desc epi;
    nat_elem_desc elem;
    nat_chain_desc chain;
    nat_bn_desc bn;
    nat_rows_desc rows; /* NAT_D_ROWS and NAT_D_REDUCE */
    nat_attn_desc attn;
    nat_pool_desc pool;
    nat_embed_desc embed;
    nat_permute_desc permute;
    nat_concat_desc concat;
    nat_slice_desc slice;
} nat_desc;

#endif
