/* nat_desc: names of the descriptor kinds and the check that a plan's
 * launches are described. */
#include "nat_desc.h"

#include <assert.h>

#include "nat.h"

static const char *const dkind_names[NAT_D_COUNT] = {
    [NAT_D_NONE] = "none",       [NAT_D_GEMM] = "gemm",       [NAT_D_MLP] = "mlp",
    [NAT_D_CONV] = "conv",       [NAT_D_EPI] = "epilogue",    [NAT_D_ELEM] = "elementwise",
    [NAT_D_CHAIN] = "chain",     [NAT_D_BN] = "batch_norm",   [NAT_D_ROWS] = "rows",
    [NAT_D_REDUCE] = "reduce",   [NAT_D_ATTN] = "attention",  [NAT_D_POOL] = "pool",
    [NAT_D_EMBED] = "embedding", [NAT_D_PERMUTE] = "permute", [NAT_D_CONCAT] = "concat",
    [NAT_D_SLICE] = "slice",
};

const char *nat_dkind_name(nat_dkind k)
{
    return k >= 0 && k < NAT_D_COUNT ? dkind_names[k] : "none";
}

/* The slots a launch of kind k cannot do without, as a bit mask. */
static unsigned required_slots(const nat_launch *l)
{
    switch (l->dk) {
    case NAT_D_GEMM:
        return 1u << NAT_GEMM_A | 1u << NAT_GEMM_B | 1u << NAT_GEMM_C;
    case NAT_D_MLP:
        return 1u << NAT_MLP_X | 1u << NAT_MLP_W1 | 1u << NAT_MLP_W2 | 1u << NAT_MLP_OUT;
    case NAT_D_CONV:
        return 1u << NAT_CONV_IN | 1u << NAT_CONV_W | 1u << NAT_CONV_OUT;
    case NAT_D_EPI:
        return 1u << NAT_EPI_X | 1u << NAT_EPI_OUT;
    case NAT_D_ELEM:
        return 1u << NAT_ELEM_A | 1u << NAT_ELEM_OUT;
    case NAT_D_CHAIN:
        return 1u << NAT_CHAIN_X | 1u << NAT_CHAIN_OUT;
    case NAT_D_BN:
        return 0x3fu;
    case NAT_D_ROWS:
    case NAT_D_REDUCE:
        return 1u << NAT_ROWS_X | 1u << NAT_ROWS_OUT;
    case NAT_D_ATTN:
        return 0xfu;
    case NAT_D_EMBED:
        return 0x7u;
    case NAT_D_CONCAT: {
        unsigned m = 1u << NAT_CONCAT_OUT;
        for (int k = 0; k < l->d.concat.n_in && k < NAT_CONCAT_MAX_IN; k++)
            m |= 1u << k;
        return m;
    }
    default: /* pool, permute, slice */
        return 1u << NAT_MOVE_IN | 1u << NAT_MOVE_OUT;
    }
}

bool nat_plan_check(const nat_plan *plan, int *bad)
{
    assert(plan && bad);
    for (int i = 0; i < plan->n; i++) {
        const nat_launch *l = &plan->launches[i];
        bool ok = l->dk > NAT_D_NONE && l->dk < NAT_D_COUNT && l->fn;
        unsigned need = ok ? required_slots(l) : 0;
        for (int k = 0; ok && k < NAT_MAX_ARGS; k++)
            if ((need >> k & 1u) && !l->p[k])
                ok = false;
        if (!ok) {
            *bad = i;
            return false;
        }
    }
    *bad = -1;
    return true;
}
