/* nat_kern_gemm: the pattern suite's GEMM launches (sgemm, GEMM with a fused
 * epilogue, the one-launch MLP) over nat_linear and nat_mlp
 * (nat_kern_linear.c): the same tiles and the same GEMM for eager and fused,
 * so the variants differ only by the epilogue.  A launch whose packed-weight
 * argument is set runs our AVX-512 GEMM on it (nat_kern_pgemm.c), else
 * OpenBLAS on the [k, n] weight. */
#include <omp.h>

#include "nat_kern_cpu.h"

void nat_k_sgemm(const nat_launch *l)
{
    nat_weight w = {.w = l->p[1], .pw = l->p[3]};
    nat_linear(l->p[0], w, NULL, NULL, l->p[2], l->i[0], l->i[1], l->i[2], NAT_ACT_NONE);
}

void nat_k_gemm_epi(const nat_launch *l)
{
    nat_weight w = {.w = l->p[1], .pw = l->p[4]};
    nat_linear(l->p[0], w, l->p[2], NULL, l->p[3], l->i[0], l->i[1], l->i[2], (int)l->i[3]);
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
    nat_weight w1 = {.w = l->p[1], .pw = l->p[7]}, w2 = {.w = l->p[3], .pw = l->p[8]};
    nat_mlp_dims d = {.m = l->i[0],
                      .d = l->i[1],
                      .h = l->i[2],
                      .act = NAT_ACT_GELU,
                      .mode = NAT_MLP_ROWS,
                      .rb = l->i[3],
                      .slots = l->i[4]};
    nat_mlp(l->p[0], w1, l->p[2], w2, l->p[4], NULL, l->p[5], l->p[6], &d);
}
