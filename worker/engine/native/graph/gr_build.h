/* gr_build: terse helpers for the model builders.  Every helper takes and
 * returns tensor indexes; once one fails (-1, err set) every later call with a
 * -1 input returns -1 too, so a builder checks once at the end.  Weight names
 * are "<prefix>.weight" etc., the PyTorch state_dict names. */
#ifndef GR_BUILD_H
#define GR_BUILD_H

#include <stdbool.h>

#include "gr.h"

typedef struct gb {
    gr_graph *g;
    fb_err *err;
} gb;

/* A weight named prefix.suffix ("%s.%s"); -1 on failure. */
int gb_w(gb *b, const char *prefix, const char *suffix, int rank, const int64_t *dims,
         uint32_t init, int64_t fan_in);

int gb_op1(gb *b, gr_opk op, const char *name, int x, const gr_attr *a);
int gb_op2(gb *b, gr_opk op, const char *name, int x, int y, const gr_attr *a);

/* conv2d named prefix (weight [co, ci/groups, k, k], bias when bias). */
int gb_conv(gb *b, const char *prefix, int x, int co, int k, int stride, int pad, int groups,
            bool bias);
/* conv1d likewise (weight [co, ci, k]). */
int gb_conv1d(gb *b, const char *prefix, int x, int co, int k, int stride, int pad, bool bias);
/* BatchNorm2d named prefix (weight, bias, running_mean, running_var). */
int gb_bn(gb *b, const char *prefix, int x, float eps);
/* Linear named prefix: weight [n, k], bias [n] when bias. */
int gb_linear(gb *b, const char *prefix, int x, int n, bool bias);
/* LayerNorm named prefix over the last dim. */
int gb_ln(gb *b, const char *prefix, int x, float eps);

int gb_act(gb *b, gr_opk op, const char *name, int x);
int gb_add(gb *b, const char *name, int x, int y);
int gb_reshape(gb *b, const char *name, int x, int rank, const int64_t *dims);
int gb_permute(gb *b, const char *name, int x, int rank, const int *perm);
int gb_slice(gb *b, const char *name, int x, int axis, int start, int end);
int gb_scale(gb *b, const char *name, int x, float alpha);

/* Self-attention of x [n, s, d] from q, k, v [n, s, d] with h heads:
 * reshape/permute to [n, h, s, d/h], matmul, scale, optional causal mask,
 * softmax, matmul, back to [n, s, d]. */
int gb_attention(gb *b, const char *prefix, int q, int k, int v, int heads, float scale,
                 bool causal);

/* Shape of tensor t (for builders). */
const gr_tensor *gb_t(gb *b, int t);

#endif
