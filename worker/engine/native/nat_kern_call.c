/* nat_kern_call: launch adapters for the conv and attention kernels of
 * nat_kern.h (written apart from the plan machinery, pure functions). */
#include "nat_kern_cpu.h"

void nat_k_conv2d(const nat_launch *l)
{
    const nat_conv_desc *c = &l->d.conv;
    nat_conv2d(l->p[NAT_CONV_IN], l->p[NAT_CONV_W], l->p[NAT_CONV_PREP], l->p[NAT_CONV_BIAS],
               l->p[NAT_CONV_RES], l->p[NAT_CONV_OUT], &c->s, (nat_act)c->act, l->p[NAT_CONV_WS]);
}

void nat_k_attention(const nat_launch *l)
{
    const nat_attn_desc *a = &l->d.attn;
    nat_attention_fused(l->p[NAT_ATTN_Q], l->p[NAT_ATTN_K], l->p[NAT_ATTN_V], l->p[NAT_ATTN_O],
                        (int)a->bh, (int)a->s, (int)a->d, a->scale, a->causal);
}

void nat_k_bmm(const nat_launch *l)
{
    const nat_gemm_desc *g = &l->d.gemm;
    nat_bmm(l->p[NAT_GEMM_A], l->p[NAT_GEMM_B], l->p[NAT_GEMM_C], (int)g->nb, (int)g->m, (int)g->n,
            (int)g->k, g->b_trans);
}
