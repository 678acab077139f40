/* gr_kern: the CPU launch functions the model zoo adds to the pattern suite's
 * (nat_kern_cpu.h): general convolution (stride, padding, dilation, groups, any
 * activation, residual), linear with a bias/residual/activation epilogue, the
 * interpreted element chain, pools, data movement.  Argument layouts are in the
 * comment above each; all tensors contiguous row-major (NCHW for images). */
#ifndef GR_KERN_H
#define GR_KERN_H

#include "nat.h"

/* out = act(conv(in, w) + bias + res).  p: in, w, bias, res, out, ws (any of
 * bias, res, ws NULL); i: n, ci, h, w, co, kh, kw, sh, sw, ph, pw, dh, dw,
 * groups, act.  A 1-D conv is h = kh = 1. */
void gr_k_conv(const nat_launch *l);

/* out = act(a w + bias + res).  p: a[m,k], w[k,n], bias[n], res[m,n], out[m,n]
 * (bias, res NULL: none); i: m, n, k, act.  Row blocks with the epilogue run
 * while the block is in cache. */
void gr_k_linear(const nat_launch *l);

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
