/* gr_models: the model zoo's graph builders, each following the published
 * architecture (torchvision / transformers module structure and state_dict
 * names, layer counts, widths, activations, norm placement).  Sizes come from
 * gr_cfg (params with standard defaults, see gr_zoo.c). */
#ifndef GR_MODELS_H
#define GR_MODELS_H

#include "gr_build.h"

typedef enum gr_input_kind {
    GR_IN_IMAGE,  /* [batch, 3, image, image], ImageNet-normalized */
    GR_IN_TOKENS, /* [batch, seq] token ids */
    GR_IN_MEL,    /* [batch, 80, frames] log-mel */
} gr_input_kind;

typedef struct gr_cfg {
    int64_t batch, image, seq, layers, hidden, heads, inter, vocab, classes, frames;
} gr_cfg;

/* Each adds the input tensor (named "input") and the model to b's graph and
 * returns the output tensor, or -1 (b->err set). */
int gr_resnet18(gb *b, const gr_cfg *c);
int gr_resnet50(gb *b, const gr_cfg *c);
int gr_mobilenet_v2(gb *b, const gr_cfg *c);
int gr_vgg16(gb *b, const gr_cfg *c);
int gr_mobilenet_v3_large(gb *b, const gr_cfg *c);
int gr_efficientnet_b0(gb *b, const gr_cfg *c);
int gr_convnext_tiny(gb *b, const gr_cfg *c);
int gr_whisper_tiny(gb *b, const gr_cfg *c);
int gr_vit_b_16(gb *b, const gr_cfg *c);
int gr_bert_base(gb *b, const gr_cfg *c);
int gr_gpt2(gb *b, const gr_cfg *c);

#endif
