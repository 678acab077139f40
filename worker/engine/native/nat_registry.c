/* nat_registry: the pattern suite, in catalog order. */
#include <string.h>

#include "nat.h"

extern const nat_pattern nat_pat_gemm_bias_relu, nat_pat_gemm_bias_gelu, nat_pat_mlp,
    nat_pat_conv_bn_relu, nat_pat_conv_relu_conv, nat_pat_elementwise_chain, nat_pat_softmax,
    nat_pat_layernorm, nat_pat_add_layernorm, nat_pat_attention;

const nat_pattern *const nat_patterns[] = {
    &nat_pat_gemm_bias_relu,
    &nat_pat_gemm_bias_gelu,
    &nat_pat_mlp,
    &nat_pat_conv_bn_relu,
    &nat_pat_conv_relu_conv,
    &nat_pat_elementwise_chain,
    &nat_pat_softmax,
    &nat_pat_layernorm,
    &nat_pat_add_layernorm,
    &nat_pat_attention,
    NULL,
};

const nat_pattern *nat_pattern_find(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; nat_patterns[i]; i++)
        if (strcmp(nat_patterns[i]->info.name, name) == 0)
            return nat_patterns[i];
    return NULL;
}
