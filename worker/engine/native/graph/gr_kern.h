/* gr_kern: the CPU launch functions the model zoo adds to the pattern suite's
 * (nat_kern_cpu.h): general convolution (stride, padding, dilation, groups, any
 * activation, residual), linear with a bias/residual/activation epilogue, the
 * interpreted element chain, pools, data movement.  All tensors contiguous
 * row-major (NCHW for images). */
#ifndef GR_KERN_H
#define GR_KERN_H

#include "nat.h"
#include "nat_kern_cpu.h"

/* Each reads the descriptor kind named above it (nat_desc.h).  The conv,
 * linear and MLP launches are the pattern suite's kernels under their own
 * names, which the CUDA lowering tells apart (the zoo's take any stride,
 * padding, dilation, groups, layout and residual). */

/* NAT_D_CONV: out = act(conv(in, w) + bias + res); a 1-D conv is h = kh = 1. */
void gr_k_conv(const nat_launch *l);

/* NAT_D_GEMM, nb 1: out = act(a op(w) + bias + res), op(w) = w^T when b_trans
 * (PyTorch's nn.Linear layout), else w (GPT-2's Conv1D); PB: w packed by
 * nat_pw_pack, or NULL: OpenBLAS on w.  Tiles split by columns and row
 * blocks, each with its epilogue while it is in cache. */
void gr_k_linear(const nat_launch *l);

/* NAT_D_MLP: out = act(x w1 + b1) w2 + b2 [+ res], one launch; the hidden
 * tensor goes through the workspace only. */
enum { GR_MLP_COLUMNS = NAT_MLP_COLUMNS, GR_MLP_ROWS = NAT_MLP_ROWS };
void gr_k_mlp(const nat_launch *l);
/* Workspace floats of gr_k_mlp for m rows and hidden width h, and its mode,
 * row block and slots. */
int64_t gr_mlp_ws(int64_t m, int64_t h, int64_t *mode, int64_t *rb, int64_t *slots);

/* NAT_D_CHAIN: out = the steps applied in order to x, one pass over memory. */
void gr_k_chain(const nat_launch *l);

/* NAT_D_ROWS: softmax along rows of scale * x, with -inf above the diagonal
 * of each cols x cols block when causal. */
void gr_k_softmax(const nat_launch *l);

/* NAT_D_ROWS: out = x with -inf above the diagonal of each cols x cols block. */
void gr_k_causal(const nat_launch *l);

/* NAT_D_POOL over planes (adaptive: kh..pw unused). */
void gr_k_maxpool(const nat_launch *l);
void gr_k_avgpool(const nat_launch *l);
void gr_k_adaptive_avgpool(const nat_launch *l);

/* NAT_D_EMBED: out[j, :] = table[ids[j], :]. */
void gr_k_embedding(const nat_launch *l);

/* NAT_D_PERMUTE. */
void gr_k_permute(const nat_launch *l);

/* NAT_D_CONCAT: inputs at p[0 .. n_in), out at p[NAT_CONCAT_OUT]. */
void gr_k_concat(const nat_launch *l);

/* NAT_D_SLICE. */
void gr_k_slice(const nat_launch *l);

#endif
