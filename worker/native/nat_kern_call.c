/* nat_kern_call: launch adapters for the conv and attention kernels of
 * nat_kern.h (written apart from the plan machinery, pure functions). */
#include <string.h>

#include "nat_kern_cpu.h"

bool nat_conv_shape_of(const nat_launch *l, nat_conv_shape *s)
{
    memset(s, 0, sizeof *s);
    s->n = (int)l->i[0];
    s->ci = (int)l->i[1];
    s->h = (int)l->i[2];
    s->w = (int)l->i[3];
    s->co = (int)l->i[4];
    s->kh = s->kw = (int)l->i[5];
    s->pad_h = s->pad_w = (int)l->i[6];
    s->stride_h = s->stride_w = s->dil_h = s->dil_w = s->groups = 1;
    s->blas = l->i[8] != 0;
    return nat_conv_shape_finish(s);
}

void nat_k_conv2d(const nat_launch *l)
{
    nat_conv_shape s;
    if (!nat_conv_shape_of(l, &s))
        return; /* the pattern validated the shape at build time */
    nat_conv2d(l->p[0], l->p[1], l->p[5], l->p[2], NULL, l->p[3], &s, (nat_act)l->i[7], l->p[4]);
}

void nat_k_attention(const nat_launch *l)
{
    nat_attention_fused(l->p[0], l->p[1], l->p[2], l->p[3], (int)l->i[0], (int)l->i[1],
                        (int)l->i[2], l->f[0], l->i[3] != 0);
}

void nat_k_bmm(const nat_launch *l)
{
    nat_bmm(l->p[0], l->p[1], l->p[2], (int)l->i[0], (int)l->i[1], (int)l->i[2], (int)l->i[3],
            l->i[4] != 0);
}
