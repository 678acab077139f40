/* gr_kern: the CPU launch functions the model zoo adds to the pattern suite's
 * (nat_kern_cpu.h): general convolution (stride, padding, dilation, groups, any
 * activation, residual), linear with a bias/residual/activation epilogue, the
 * interpreted element chain, pools, data movement.  Argument layouts are in the
 * comment above each; all tensors contiguous row-major (NCHW for images). */
#ifndef GR_KERN_H
#define GR_KERN_H

#include "nat.h"
#include "nat_kern_cpu.h"

/* out = act(conv(in, w) + bias + res).  p: in, w, bias, res, out, ws, w made
 * ready (nat_conv2d_prepare) (any of bias, res, ws, the last NULL); i: n, ci,
 * h, w, co, kh, kw, sh, sw, ph, pw, dh, dw, groups, act, blas
 * (nat_conv_shape.blas).  A 1-D conv is h = kh = 1. */
void gr_k_conv(const nat_launch *l);

/* out = act(a w + bias + res).  p: a[m,k], w, bias[n], res[m,n], out[m,n],
 * pw (bias, res NULL: none); i: m, n, k, act, w_trans: w is [n,k] (PyTorch's
 * nn.Linear layout, out = a w^T) when w_trans, else [k,n] (GPT-2's Conv1D).
 * pw: w packed by nat_pw_pack, or NULL: OpenBLAS on w.  Tiles split by
 * columns and row blocks, each with its epilogue while it is in cache. */
void gr_k_linear(const nat_launch *l);

/* out = act(x w1 + b1) w2 + b2 [+ res], one launch; the hidden tensor goes
 * through ws only.  p: x[m,d], w1, b1[h], w2, b2[d], out[m,d], ws, pw1, pw2
 * (packed by nat_pw_pack, or NULL: OpenBLAS), res[m,d] (NULL: none); i: m,
 * d, h, act,
 * trans bits (bit 0: w1 is [h,d], bit 1: w2 is [d,h]; else [d,h] and [h,d]),
 * mode, rb, slots (from gr_mlp_ws). */
enum { GR_MLP_COLUMNS = NAT_MLP_COLUMNS, GR_MLP_ROWS = NAT_MLP_ROWS };
void gr_k_mlp(const nat_launch *l);
/* Workspace floats of gr_k_mlp for m rows and hidden width h, and its mode,
 * row block and slots. */
int64_t gr_mlp_ws(int64_t m, int64_t h, int64_t *mode, int64_t *rb, int64_t *slots);

/* Element chain steps, i[2 + s] = code | (int64)size << 32 (gr_chain_step). */
enum gr_chain_op { GR_CH_ACT, GR_CH_ADD, GR_CH_MUL, GR_CH_SCALE };
enum gr_chain_bc { GR_BC_FULL, GR_BC_COL, GR_BC_ROW };
#define GR_CHAIN_MAX 12

int64_t gr_chain_step(int op, int act, int bc, int operand, int64_t size);

/* out = steps applied in order to x, one pass over memory.  p: x, out, then
 * the operands; i: n, n_steps, steps...; f[s]: step s's scalar (SCALE). */
void gr_k_chain(const nat_launch *l);

/* Softmax along rows of scale * x, with -inf above the diagonal of each s x s
 * block when causal.  p: x, out; i: rows, cols, causal; f: scale. */
void gr_k_softmax(const nat_launch *l);

/* out = x with -inf above the diagonal of each cols x cols block.  p: x, out;
 * i: rows, cols. */
void gr_k_causal(const nat_launch *l);

/* Pools over planes.  p: in, out; i: planes, h, w, kh, kw, sh, sw, ph, pw, ho,
 * wo, count_pad (avg). */
void gr_k_maxpool(const nat_launch *l);
void gr_k_avgpool(const nat_launch *l);
/* p: in, out; i: planes, h, w, ho, wo. */
void gr_k_adaptive_avgpool(const nat_launch *l);

/* out[j, :] = table[ids[j], :].  p: ids, table, out; i: n_ids, d, vocab. */
void gr_k_embedding(const nat_launch *l);

/* p: in, out; i: rank, dims[0..5] (of in), perm[0..5] at i[7..12]. */
void gr_k_permute(const nat_launch *l);

/* p: inputs (up to 6), out at p[6]; i: n_in, outer, inner, out_axis, then the
 * axis sizes at i[4..9] and, packed as bit k of i[10], input k broadcast over
 * the outer dim (its outer size is 1). */
void gr_k_concat(const nat_launch *l);

/* p: in, out; i: outer, axis_len, start, len, inner. */
void gr_k_slice(const nat_launch *l);

#endif
