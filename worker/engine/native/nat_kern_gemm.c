/* nat_kern_gemm: the pattern suite's GEMM launches (sgemm, GEMM with a fused
 * epilogue, the one-launch MLP) over nat_linear and nat_mlp
 * (nat_kern_linear.c): the same tiles and the same GEMM for eager and fused,
 * so the variants differ only by the epilogue.  A launch whose packed-weight
 * argument is set runs our packed GEMM on it (nat_kern_pgemm.c), else
 * OpenBLAS on the [k, n] weight. */
#include <omp.h>

#include "nat_kern_cpu.h"

void nat_k_sgemm(const nat_launch *l)
{
    const nat_gemm_desc *g = &l->d.gemm;
    nat_weight w = {.w = l->p[NAT_GEMM_B], .pw = l->p[NAT_GEMM_PB], .wt = g->b_trans};
    nat_linear(l->p[NAT_GEMM_A], w, NULL, NULL, l->p[NAT_GEMM_C], g->m, g->n, g->k, NAT_ACT_NONE);
}

void nat_k_gemm_epi(const nat_launch *l)
{
    const nat_gemm_desc *g = &l->d.gemm;
    nat_weight w = {.w = l->p[NAT_GEMM_B], .pw = l->p[NAT_GEMM_PB], .wt = g->b_trans};
    nat_linear(l->p[NAT_GEMM_A], w, l->p[NAT_GEMM_BIAS], l->p[NAT_GEMM_RES], l->p[NAT_GEMM_C], g->m,
               g->n, g->k, g->act);
}

/* Rows per block of the one-launch MLP: tall enough that a block's GEMMs run
 * near the kernel's peak, small enough that its [rb, h] hidden block stays in
 * L2; one block per thread at least when m is small. */
#define MLP_RB_MIN 32
#define MLP_RB_MAX 256

int64_t nat_mlp_fused_ws(int64_t m, int64_t h, int64_t *rb, int64_t *slots)
{
    int64_t nt = omp_get_max_threads();
    int64_t r = (m + nt - 1) / nt;
    r = (r + 7) / 8 * 8;
    *rb = r < MLP_RB_MIN ? MLP_RB_MIN : (r > MLP_RB_MAX ? MLP_RB_MAX : r);
    *slots = nt;
    return *rb * *slots * h;
}

void nat_k_mlp_fused(const nat_launch *l)
{
    const nat_mlp_desc *m = &l->d.mlp;
    nat_weight w1 = {.w = l->p[NAT_MLP_W1], .pw = l->p[NAT_MLP_PW1], .wt = m->w1_trans};
    nat_weight w2 = {.w = l->p[NAT_MLP_W2], .pw = l->p[NAT_MLP_PW2], .wt = m->w2_trans};
    nat_mlp_dims d = {.m = m->m,
                      .d = m->d,
                      .h = m->h,
                      .act = m->act,
                      .mode = m->mode,
                      .rb = m->rb,
                      .slots = m->slots};
    nat_mlp(l->p[NAT_MLP_X], w1, l->p[NAT_MLP_B1], w2, l->p[NAT_MLP_B2], l->p[NAT_MLP_RES],
            l->p[NAT_MLP_OUT], l->p[NAT_MLP_WS], &d);
}
