/* gr_models_tf: transformer models with the module names of transformers
 * (BertModel, GPT2Model) and torchvision (vit_b_16). */
#include <math.h>
#include <stdio.h>

#include "gr_models.h"

static int tokens_input(gb *b, const gr_cfg *c)
{
    int t = gr_tensor_add(b->g, "input_ids", GR_T_INPUT, 2, (int64_t[]){c->batch, c->seq}, b->err);
    b->g->input = t;
    return t;
}

/* Rows [0, n) of table (a weight [rows, d]) as a [n, d] tensor. */
static int table_rows(gb *b, const char *name, int table, int64_t n)
{
    return gb_slice(b, name, table, 0, 0, (int)n);
}

/* ---- BERT (post-LN encoder, GELU, LayerNorm eps 1e-12) ---- */

static int bert_attention(gb *b, const char *p, int x, const gr_cfg *c)
{
    char n[GR_NAME_MAX];
    int h = (int)c->hidden;
    snprintf(n, sizeof n, "%s.attention.self.query", p);
    int q = gb_linear(b, n, x, h, true);
    snprintf(n, sizeof n, "%s.attention.self.key", p);
    int k = gb_linear(b, n, x, h, true);
    snprintf(n, sizeof n, "%s.attention.self.value", p);
    int v = gb_linear(b, n, x, h, true);
    snprintf(n, sizeof n, "%s.attention.self", p);
    int a = gb_attention(b, n, q, k, v, (int)c->heads, 1.0f / sqrtf((float)(h / c->heads)), false);
    snprintf(n, sizeof n, "%s.attention.output.dense", p);
    a = gb_linear(b, n, a, h, true);
    snprintf(n, sizeof n, "%s.attention.output.add", p);
    a = gb_add(b, n, a, x);
    snprintf(n, sizeof n, "%s.attention.output.LayerNorm", p);
    return gb_ln(b, n, a, 1e-12f);
}

static int bert_layer(gb *b, int i, int x, const gr_cfg *c)
{
    char p[GR_NAME_MAX], n[GR_NAME_MAX];
    snprintf(p, sizeof p, "encoder.layer.%d", i);
    int a = bert_attention(b, p, x, c);
    snprintf(n, sizeof n, "%s.intermediate.dense", p);
    int y = gb_linear(b, n, a, (int)c->inter, true);
    snprintf(n, sizeof n, "%s.intermediate.gelu", p);
    y = gb_act(b, GR_GELU, n, y);
    snprintf(n, sizeof n, "%s.output.dense", p);
    y = gb_linear(b, n, y, (int)c->hidden, true);
    snprintf(n, sizeof n, "%s.output.add", p);
    y = gb_add(b, n, y, a);
    snprintf(n, sizeof n, "%s.output.LayerNorm", p);
    return gb_ln(b, n, y, 1e-12f);
}

/* Output: last_hidden_state [batch, seq, hidden].  All tokens attend (the
 * attention mask of a full sentence is all ones, an additive zero). */
int gr_bert_base(gb *b, const gr_cfg *c)
{
    int ids = tokens_input(b, c);
    int64_t h = c->hidden;
    int we = gb_w(b, "embeddings.word_embeddings", "weight", 2, (int64_t[]){c->vocab, h},
                  GR_INIT_EMBED, 1);
    int pe = gb_w(b, "embeddings.position_embeddings", "weight", 2, (int64_t[]){512, h},
                  GR_INIT_EMBED, 1);
    int te = gb_w(b, "embeddings.token_type_embeddings", "weight", 2, (int64_t[]){2, h},
                  GR_INIT_EMBED, 1);
    if (c->seq > 512) {
        fb_err_set(b->err, FB_EINVAL, "params.seq", "bert has 512 positions");
        return -1;
    }
    int x = gb_op2(b, GR_EMBEDDING, "embeddings.word", ids, we, NULL);
    x = gb_add(b, "embeddings.add_pos", x, table_rows(b, "embeddings.positions", pe, c->seq));
    x = gb_add(b, "embeddings.add_type", x, table_rows(b, "embeddings.type0", te, 1));
    x = gb_ln(b, "embeddings.LayerNorm", x, 1e-12f);
    for (int i = 0; i < c->layers; i++)
        x = bert_layer(b, i, x, c);
    return x;
}

/* ---- ViT-B/16 (torchvision: pre-LN, fused in_proj, LayerNorm eps 1e-6) ---- */

static int vit_layer(gb *b, int i, int x, const gr_cfg *c)
{
    char p[GR_NAME_MAX], n[GR_NAME_MAX], m[GR_NAME_MAX];
    int h = (int)c->hidden;
    snprintf(p, sizeof p, "encoder.layers.encoder_layer_%d", i);
    snprintf(n, sizeof n, "%s.ln_1", p);
    int y = gb_ln(b, n, x, 1e-6f);
    snprintf(n, sizeof n, "%s.self_attention", p);
    int w = gb_w(b, n, "in_proj_weight", 2, (int64_t[]){3 * h, h}, GR_INIT_FANIN, h);
    int bi = gb_w(b, n, "in_proj_bias", 1, (int64_t[]){3 * h}, GR_INIT_SMALL, 1);
    snprintf(m, sizeof m, "%s.in_proj", n);
    int qkv = (y < 0 || w < 0 || bi < 0)
                  ? -1
                  : gr_node_add(b->g, GR_LINEAR, m, 3, (int[]){y, w, bi}, NULL, b->err);
    int part[3];
    for (int k = 0; k < 3; k++) {
        snprintf(m, sizeof m, "%s.qkv%d", n, k);
        part[k] = gb_slice(b, m, qkv, 2, k * h, (k + 1) * h);
    }
    int a = gb_attention(b, n, part[0], part[1], part[2], (int)c->heads,
                         1.0f / sqrtf((float)(h / c->heads)), false);
    snprintf(m, sizeof m, "%s.out_proj", n);
    a = gb_linear(b, m, a, h, true);
    snprintf(m, sizeof m, "%s.add1", p);
    x = gb_add(b, m, a, x);
    snprintf(m, sizeof m, "%s.ln_2", p);
    y = gb_ln(b, m, x, 1e-6f);
    snprintf(m, sizeof m, "%s.mlp.0", p);
    y = gb_linear(b, m, y, (int)c->inter, true);
    snprintf(m, sizeof m, "%s.mlp.1", p);
    y = gb_act(b, GR_GELU, m, y);
    snprintf(m, sizeof m, "%s.mlp.3", p);
    y = gb_linear(b, m, y, h, true);
    snprintf(m, sizeof m, "%s.add2", p);
    return gb_add(b, m, y, x);
}

int gr_vit_b_16(gb *b, const gr_cfg *c)
{
    int64_t h = c->hidden, g = c->image / 16, s = g * g + 1;
    if (c->image % 16) {
        fb_err_set(b->err, FB_EINVAL, "params.image", "vit_b_16 needs a multiple of 16");
        return -1;
    }
    int x = gr_tensor_add(b->g, "input", GR_T_INPUT, 4,
                          (int64_t[]){c->batch, 3, c->image, c->image}, b->err);
    b->g->input = x;
    x = gb_conv(b, "conv_proj", x, (int)h, 16, 16, 0, 1, true);
    x = gb_reshape(b, "patches", x, 3, (int64_t[]){c->batch, h, g * g});
    x = gb_permute(b, "tokens", x, 3, (int[]){0, 2, 1});
    int cls = gr_weight(b->g, "class_token", 3, (int64_t[]){1, 1, h}, GR_INIT_EMBED, 1, b->err);
    int pos =
        gr_weight(b->g, "encoder.pos_embedding", 3, (int64_t[]){1, s, h}, GR_INIT_EMBED, 1, b->err);
    gr_attr cat = {.axis = 1};
    x = gb_op2(b, GR_CONCAT, "with_class_token", cls, x, &cat);
    x = gb_add(b, "encoder.add_pos", x, pos);
    for (int i = 0; i < c->layers; i++)
        x = vit_layer(b, i, x, c);
    x = gb_ln(b, "encoder.ln", x, 1e-6f);
    x = gb_slice(b, "class_out", x, 1, 0, 1);
    x = gb_reshape(b, "class_flat", x, 2, (int64_t[]){c->batch, h});
    return gb_linear(b, "heads.head", x, (int)c->classes, true);
}

/* ---- GPT-2 (pre-LN decoder, gelu_new, Conv1D weights [in, out]) ---- */

/* GPT-2's Conv1D: y = x w + b with w stored [in, out] (trans_b on linear). */
static int conv1d_lin(gb *b, const char *p, int x, int64_t out)
{
    if (x < 0)
        return -1;
    int64_t k = gb_t(b, x)->dims[gb_t(b, x)->rank - 1];
    int w = gb_w(b, p, "weight", 2, (int64_t[]){k, out}, GR_INIT_EMBED, 1);
    int bi = gb_w(b, p, "bias", 1, (int64_t[]){out}, GR_INIT_SMALL, 1);
    if (w < 0 || bi < 0)
        return -1;
    gr_attr a = {.trans_b = 1};
    return gr_node_add(b->g, GR_LINEAR, p, 3, (int[]){x, w, bi}, &a, b->err);
}

static int gpt2_block(gb *b, int i, int x, const gr_cfg *c)
{
    char p[GR_NAME_MAX], n[GR_NAME_MAX];
    int64_t h = c->hidden;
    snprintf(p, sizeof p, "h.%d", i);
    snprintf(n, sizeof n, "%s.ln_1", p);
    int y = gb_ln(b, n, x, 1e-5f);
    snprintf(n, sizeof n, "%s.attn.c_attn", p);
    int qkv = conv1d_lin(b, n, y, 3 * h);
    int part[3];
    for (int k = 0; k < 3; k++) {
        snprintf(n, sizeof n, "%s.attn.qkv%d", p, k);
        part[k] = gb_slice(b, n, qkv, 2, (int)(k * h), (int)((k + 1) * h));
    }
    snprintf(n, sizeof n, "%s.attn", p);
    int a = gb_attention(b, n, part[0], part[1], part[2], (int)c->heads,
                         1.0f / sqrtf((float)(h / c->heads)), true);
    snprintf(n, sizeof n, "%s.attn.c_proj", p);
    a = conv1d_lin(b, n, a, h);
    snprintf(n, sizeof n, "%s.add1", p);
    x = gb_add(b, n, a, x);
    snprintf(n, sizeof n, "%s.ln_2", p);
    y = gb_ln(b, n, x, 1e-5f);
    snprintf(n, sizeof n, "%s.mlp.c_fc", p);
    y = conv1d_lin(b, n, y, c->inter);
    snprintf(n, sizeof n, "%s.mlp.act", p);
    y = gb_act(b, GR_GELU_TANH, n, y);
    snprintf(n, sizeof n, "%s.mlp.c_proj", p);
    y = conv1d_lin(b, n, y, h);
    snprintf(n, sizeof n, "%s.add2", p);
    return gb_add(b, n, y, x);
}

/* GPT2Model's last_hidden_state for a prefill of seq tokens. */
int gr_gpt2(gb *b, const gr_cfg *c)
{
    int ids = tokens_input(b, c);
    int64_t h = c->hidden;
    if (c->seq > 1024) {
        fb_err_set(b->err, FB_EINVAL, "params.seq", "gpt2 has 1024 positions");
        return -1;
    }
    int we = gb_w(b, "wte", "weight", 2, (int64_t[]){c->vocab, h}, GR_INIT_EMBED, 1);
    int pe = gb_w(b, "wpe", "weight", 2, (int64_t[]){1024, h}, GR_INIT_EMBED, 1);
    int x = gb_op2(b, GR_EMBEDDING, "wte.lookup", ids, we, NULL);
    x = gb_add(b, "wpe.add", x, table_rows(b, "wpe.rows", pe, c->seq));
    for (int i = 0; i < c->layers; i++)
        x = gpt2_block(b, i, x, c);
    return gb_ln(b, "ln_f", x, 1e-5f);
}

/* ---- Whisper-tiny encoder (transformers WhisperEncoder: conv1d stem, pre-LN) ---- */

static int whisper_layer(gb *b, int i, int x, const gr_cfg *c)
{
    char p[GR_NAME_MAX], n[GR_NAME_MAX];
    int h = (int)c->hidden;
    snprintf(p, sizeof p, "layers.%d", i);
    snprintf(n, sizeof n, "%s.self_attn_layer_norm", p);
    int y = gb_ln(b, n, x, 1e-5f);
    snprintf(n, sizeof n, "%s.self_attn.q_proj", p);
    int q = gb_linear(b, n, y, h, true);
    snprintf(n, sizeof n, "%s.self_attn.k_proj", p);
    int k = gb_linear(b, n, y, h, false);
    snprintf(n, sizeof n, "%s.self_attn.v_proj", p);
    int v = gb_linear(b, n, y, h, true);
    snprintf(n, sizeof n, "%s.self_attn", p);
    int a = gb_attention(b, n, q, k, v, (int)c->heads, 1.0f / sqrtf((float)(h / c->heads)), false);
    snprintf(n, sizeof n, "%s.self_attn.out_proj", p);
    a = gb_linear(b, n, a, h, true);
    snprintf(n, sizeof n, "%s.add1", p);
    x = gb_add(b, n, a, x);
    snprintf(n, sizeof n, "%s.final_layer_norm", p);
    y = gb_ln(b, n, x, 1e-5f);
    snprintf(n, sizeof n, "%s.fc1", p);
    y = gb_linear(b, n, y, (int)c->inter, true);
    snprintf(n, sizeof n, "%s.gelu", p);
    y = gb_act(b, GR_GELU, n, y);
    snprintf(n, sizeof n, "%s.fc2", p);
    y = gb_linear(b, n, y, h, true);
    snprintf(n, sizeof n, "%s.add2", p);
    return gb_add(b, n, y, x);
}

/* last_hidden_state [batch, frames / 2, hidden] of log-mel [batch, 80, frames]. */
int gr_whisper_tiny(gb *b, const gr_cfg *c)
{
    if (c->frames % 2) {
        fb_err_set(b->err, FB_EINVAL, "params.frames", "must be even");
        return -1;
    }
    int x = gr_tensor_add(b->g, "input_features", GR_T_INPUT, 3,
                          (int64_t[]){c->batch, 80, c->frames}, b->err);
    b->g->input = x;
    x = gb_act(b, GR_GELU, "conv1.gelu", gb_conv1d(b, "conv1", x, (int)c->hidden, 3, 1, 1, true));
    x = gb_act(b, GR_GELU, "conv2.gelu", gb_conv1d(b, "conv2", x, (int)c->hidden, 3, 2, 1, true));
    x = gb_permute(b, "tokens", x, 3, (int[]){0, 2, 1});
    int pos = gb_w(b, "embed_positions", "weight", 2, (int64_t[]){c->frames / 2, c->hidden},
                   GR_INIT_EMBED, 1);
    x = gb_add(b, "add_positions", x, pos);
    for (int i = 0; i < c->layers; i++)
        x = whisper_layer(b, i, x, c);
    return gb_ln(b, "layer_norm", x, 1e-5f);
}
