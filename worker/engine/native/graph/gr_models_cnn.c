/* gr_models_cnn: convolutional models, as torchvision builds them (module
 * names are torchvision's, so a state_dict loads by name). */
#include <stdio.h>

#include "gr_models.h"

#define BN_EPS 1e-5f

static int image_input(gb *b, const gr_cfg *c)
{
    int64_t d[4] = {c->batch, 3, c->image, c->image};
    int t = gr_tensor_add(b->g, "input", GR_T_INPUT, 4, d, b->err);
    b->g->input = t;
    return t;
}

/* conv (no bias) -> bn [-> act], modules named conv and bn; act GR_OPK_COUNT:
 * none. */
static int conv_bn_eps(gb *b, const char *conv, const char *bn, int x, int co, int k, int s, int p,
                       int groups, gr_opk act, float eps)
{
    int y = gb_bn(b, bn, gb_conv(b, conv, x, co, k, s, p, groups, false), eps);
    if (act == GR_OPK_COUNT)
        return y;
    char nm[GR_NAME_MAX];
    snprintf(nm, sizeof nm, "%s.act", bn);
    return gb_act(b, act, nm, y);
}

static int conv_bn(gb *b, const char *conv, const char *bn, int x, int co, int k, int s, int p,
                   int groups, gr_opk act)
{
    return conv_bn_eps(b, conv, bn, x, co, k, s, p, groups, act, BN_EPS);
}

/* avgpool (1x1) -> flatten -> fc */
static int head(gb *b, int x, const char *fc, int64_t classes)
{
    gr_attr one = {.kernel = {1, 1}};
    int y = gb_op1(b, GR_ADAPTIVE_AVGPOOL2D, "avgpool", x, &one);
    gr_attr fl = {.axis = 1};
    y = gb_op1(b, GR_FLATTEN, "flatten", y, &fl);
    return gb_linear(b, fc, y, (int)classes, true);
}

/* ---- ResNet ---- */

static int downsample(gb *b, const char *p, int x, int co, int stride)
{
    char c0[GR_NAME_MAX], c1[GR_NAME_MAX];
    snprintf(c0, sizeof c0, "%s.downsample.0", p);
    snprintf(c1, sizeof c1, "%s.downsample.1", p);
    return conv_bn(b, c0, c1, x, co, 1, stride, 0, 1, GR_OPK_COUNT);
}

/* BasicBlock: conv3x3-bn-relu-conv3x3-bn, + identity, relu. */
static int basic(gb *b, const char *p, int x, int planes, int stride)
{
    char n[4][GR_NAME_MAX];
    const char *sfx[4] = {"conv1", "bn1", "conv2", "bn2"};
    for (int i = 0; i < 4; i++)
        snprintf(n[i], sizeof n[i], "%s.%s", p, sfx[i]);
    int id = x;
    if (x >= 0 && (stride != 1 || gb_t(b, x)->dims[1] != planes))
        id = downsample(b, p, x, planes, stride);
    int y = conv_bn(b, n[0], n[1], x, planes, 3, stride, 1, 1, GR_RELU);
    y = conv_bn(b, n[2], n[3], y, planes, 3, 1, 1, 1, GR_OPK_COUNT);
    char an[GR_NAME_MAX];
    snprintf(an, sizeof an, "%s.add", p);
    y = gb_add(b, an, y, id);
    snprintf(an, sizeof an, "%s.relu", p);
    return gb_act(b, GR_RELU, an, y);
}

/* Bottleneck (torchvision v1.5: stride on the 3x3): 1x1-3x3-1x1 (x4). */
static int bottleneck(gb *b, const char *p, int x, int planes, int stride)
{
    char n[6][GR_NAME_MAX];
    const char *sfx[6] = {"conv1", "bn1", "conv2", "bn2", "conv3", "bn3"};
    for (int i = 0; i < 6; i++)
        snprintf(n[i], sizeof n[i], "%s.%s", p, sfx[i]);
    int id = x;
    if (x >= 0 && (stride != 1 || gb_t(b, x)->dims[1] != planes * 4))
        id = downsample(b, p, x, planes * 4, stride);
    int y = conv_bn(b, n[0], n[1], x, planes, 1, 1, 0, 1, GR_RELU);
    y = conv_bn(b, n[2], n[3], y, planes, 3, stride, 1, 1, GR_RELU);
    y = conv_bn(b, n[4], n[5], y, planes * 4, 1, 1, 0, 1, GR_OPK_COUNT);
    char an[GR_NAME_MAX];
    snprintf(an, sizeof an, "%s.add", p);
    y = gb_add(b, an, y, id);
    snprintf(an, sizeof an, "%s.relu", p);
    return gb_act(b, GR_RELU, an, y);
}

static int resnet(gb *b, const gr_cfg *c, const int *blocks, bool deep)
{
    int x = image_input(b, c);
    x = conv_bn(b, "conv1", "bn1", x, 64, 7, 2, 3, 1, GR_RELU);
    gr_attr mp = {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}};
    x = gb_op1(b, GR_MAXPOOL2D, "maxpool", x, &mp);
    for (int l = 0; l < 4; l++) {
        for (int i = 0; i < blocks[l]; i++) {
            char p[GR_NAME_MAX];
            snprintf(p, sizeof p, "layer%d.%d", l + 1, i);
            int stride = (l > 0 && i == 0) ? 2 : 1;
            x = deep ? bottleneck(b, p, x, 64 << l, stride) : basic(b, p, x, 64 << l, stride);
        }
    }
    return head(b, x, "fc", c->classes);
}

int gr_resnet18(gb *b, const gr_cfg *c)
{
    return resnet(b, c, (const int[]){2, 2, 2, 2}, false);
}

int gr_resnet50(gb *b, const gr_cfg *c)
{
    return resnet(b, c, (const int[]){3, 4, 6, 3}, true);
}

/* ---- MobileNetV2 ---- */

/* features.<i>: inverted residual with expansion t. */
static int inverted(gb *b, int idx, int x, int t, int co, int stride)
{
    if (x < 0)
        return -1;
    int64_t ci = gb_t(b, x)->dims[1], hid = ci * t;
    char c[GR_NAME_MAX], n[GR_NAME_MAX];
    int y = x, k = 0;
    if (t != 1) {
        snprintf(c, sizeof c, "features.%d.conv.%d.0", idx, k);
        snprintf(n, sizeof n, "features.%d.conv.%d.1", idx, k++);
        y = conv_bn(b, c, n, y, (int)hid, 1, 1, 0, 1, GR_RELU6);
    }
    snprintf(c, sizeof c, "features.%d.conv.%d.0", idx, k);
    snprintf(n, sizeof n, "features.%d.conv.%d.1", idx, k++);
    y = conv_bn(b, c, n, y, (int)hid, 3, stride, 1, (int)hid, GR_RELU6);
    snprintf(c, sizeof c, "features.%d.conv.%d", idx, k++);
    snprintf(n, sizeof n, "features.%d.conv.%d", idx, k);
    y = conv_bn(b, c, n, y, co, 1, 1, 0, 1, GR_OPK_COUNT);
    if (stride == 1 && ci == co) {
        snprintf(n, sizeof n, "features.%d.add", idx);
        y = gb_add(b, n, y, x);
    }
    return y;
}

int gr_mobilenet_v2(gb *b, const gr_cfg *c)
{
    static const int cfg[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                  {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    int x = image_input(b, c);
    x = conv_bn(b, "features.0.0", "features.0.1", x, 32, 3, 2, 1, 1, GR_RELU6);
    int idx = 1;
    for (int s = 0; s < 7; s++)
        for (int i = 0; i < cfg[s][2]; i++, idx++)
            x = inverted(b, idx, x, cfg[s][0], cfg[s][1], i == 0 ? cfg[s][3] : 1);
    x = conv_bn(b, "features.18.0", "features.18.1", x, 1280, 1, 1, 0, 1, GR_RELU6);
    return head(b, x, "classifier.1", c->classes);
}

/* ---- VGG16 (configuration D, no batch norm) ---- */

int gr_vgg16(gb *b, const gr_cfg *c)
{
    static const int cfg[] = {64, 64,  0,   128, 128, 0,   256, 256, 256,
                              0,  512, 512, 512, 0,   512, 512, 512, 0};
    int x = image_input(b, c), idx = 0; /* torchvision counts convs, ReLUs and pools */
    char p[GR_NAME_MAX];
    for (int i = 0; i < (int)(sizeof cfg / sizeof cfg[0]); i++) {
        snprintf(p, sizeof p, "features.%d", idx++);
        if (cfg[i] == 0) {
            gr_attr mp = {.kernel = {2, 2}, .stride = {2, 2}};
            x = gb_op1(b, GR_MAXPOOL2D, p, x, &mp);
            continue;
        }
        x = gb_conv(b, p, x, cfg[i], 3, 1, 1, 1, true);
        snprintf(p, sizeof p, "features.%d", idx++);
        x = gb_act(b, GR_RELU, p, x);
    }
    gr_attr seven = {.kernel = {7, 7}}; /* below 224 it repeats inputs, as torchvision */
    x = gb_op1(b, GR_ADAPTIVE_AVGPOOL2D, "avgpool", x, &seven);
    gr_attr fl = {.axis = 1};
    x = gb_op1(b, GR_FLATTEN, "flatten", x, &fl);
    x = gb_act(b, GR_RELU, "classifier.1", gb_linear(b, "classifier.0", x, 4096, true));
    x = gb_act(b, GR_RELU, "classifier.4", gb_linear(b, "classifier.3", x, 4096, true));
    return gb_linear(b, "classifier.6", x, (int)c->classes, true);
}

/* ---- squeeze-excitation (torchvision SqueezeExcitation) ---- */

/* x * gate(fc2(act(fc1(avgpool(x))))), fc1/fc2 1x1 convs with bias. */
static int squeeze_excite(gb *b, const char *p, int x, int squeeze, gr_opk act, gr_opk gate)
{
    char n[GR_NAME_MAX];
    gr_attr one = {.kernel = {1, 1}};
    snprintf(n, sizeof n, "%s.avgpool", p);
    int s = gb_op1(b, GR_ADAPTIVE_AVGPOOL2D, n, x, &one);
    snprintf(n, sizeof n, "%s.fc1", p);
    s = gb_conv(b, n, s, squeeze, 1, 1, 0, 1, true);
    snprintf(n, sizeof n, "%s.act", p);
    s = gb_act(b, act, n, s);
    snprintf(n, sizeof n, "%s.fc2", p);
    s = x < 0 ? -1 : gb_conv(b, n, s, (int)gb_t(b, x)->dims[1], 1, 1, 0, 1, true);
    snprintf(n, sizeof n, "%s.gate", p);
    s = gb_act(b, gate, n, s);
    snprintf(n, sizeof n, "%s.scale", p);
    return gb_op2(b, GR_MUL, n, x, s, NULL);
}

/* torchvision's _make_divisible(v, 8). */
static int divisible8(int v)
{
    int r = (v + 4) / 8 * 8;
    r = r < 8 ? 8 : r;
    return 10 * r < 9 * v ? r + 8 : r; /* never round down by more than 10% */
}

/* ---- MobileNetV3-Large (BN eps 1e-3) ---- */

typedef struct v3_cfg {
    int k, exp, out, se, hs, stride;
} v3_cfg;

static int v3_block(gb *b, int idx, int x, const v3_cfg *c)
{
    if (x < 0)
        return -1;
    int ci = (int)gb_t(b, x)->dims[1], j = 0, y = x;
    gr_opk act = c->hs ? GR_HARDSWISH : GR_RELU;
    char cv[GR_NAME_MAX], bn[GR_NAME_MAX];
    if (c->exp != ci) {
        snprintf(cv, sizeof cv, "features.%d.block.%d.0", idx, j);
        snprintf(bn, sizeof bn, "features.%d.block.%d.1", idx, j++);
        y = conv_bn_eps(b, cv, bn, y, c->exp, 1, 1, 0, 1, act, 1e-3f);
    }
    snprintf(cv, sizeof cv, "features.%d.block.%d.0", idx, j);
    snprintf(bn, sizeof bn, "features.%d.block.%d.1", idx, j++);
    y = conv_bn_eps(b, cv, bn, y, c->exp, c->k, c->stride, (c->k - 1) / 2, c->exp, act, 1e-3f);
    if (c->se) {
        snprintf(cv, sizeof cv, "features.%d.block.%d", idx, j++);
        y = squeeze_excite(b, cv, y, divisible8(c->exp / 4), GR_RELU, GR_HARDSIGMOID);
    }
    snprintf(cv, sizeof cv, "features.%d.block.%d.0", idx, j);
    snprintf(bn, sizeof bn, "features.%d.block.%d.1", idx, j);
    y = conv_bn_eps(b, cv, bn, y, c->out, 1, 1, 0, 1, GR_OPK_COUNT, 1e-3f);
    if (c->stride == 1 && ci == c->out) {
        snprintf(cv, sizeof cv, "features.%d.add", idx);
        y = gb_add(b, cv, y, x);
    }
    return y;
}

int gr_mobilenet_v3_large(gb *b, const gr_cfg *c)
{
    static const v3_cfg cfg[15] = {
        {3, 16, 16, 0, 0, 1},   {3, 64, 24, 0, 0, 2},   {3, 72, 24, 0, 0, 1},
        {5, 72, 40, 1, 0, 2},   {5, 120, 40, 1, 0, 1},  {5, 120, 40, 1, 0, 1},
        {3, 240, 80, 0, 1, 2},  {3, 200, 80, 0, 1, 1},  {3, 184, 80, 0, 1, 1},
        {3, 184, 80, 0, 1, 1},  {3, 480, 112, 1, 1, 1}, {3, 672, 112, 1, 1, 1},
        {5, 672, 160, 1, 1, 2}, {5, 960, 160, 1, 1, 1}, {5, 960, 160, 1, 1, 1},
    };
    int x = image_input(b, c);
    x = conv_bn_eps(b, "features.0.0", "features.0.1", x, 16, 3, 2, 1, 1, GR_HARDSWISH, 1e-3f);
    for (int i = 0; i < 15; i++)
        x = v3_block(b, i + 1, x, &cfg[i]);
    x = conv_bn_eps(b, "features.16.0", "features.16.1", x, 960, 1, 1, 0, 1, GR_HARDSWISH, 1e-3f);
    gr_attr one = {.kernel = {1, 1}};
    x = gb_op1(b, GR_ADAPTIVE_AVGPOOL2D, "avgpool", x, &one);
    gr_attr fl = {.axis = 1};
    x = gb_op1(b, GR_FLATTEN, "flatten", x, &fl);
    x = gb_act(b, GR_HARDSWISH, "classifier.1", gb_linear(b, "classifier.0", x, 1280, true));
    return gb_linear(b, "classifier.3", x, (int)c->classes, true);
}

/* ---- EfficientNet-B0 (SiLU, SE with SiLU and sigmoid) ---- */

static int mbconv(gb *b, const char *p, int x, int expand, int k, int stride, int co)
{
    if (x < 0)
        return -1;
    int ci = (int)gb_t(b, x)->dims[1], hid = ci * expand, j = 0, y = x;
    char cv[GR_NAME_MAX], bn[GR_NAME_MAX];
    if (expand != 1) {
        snprintf(cv, sizeof cv, "%s.block.%d.0", p, j);
        snprintf(bn, sizeof bn, "%s.block.%d.1", p, j++);
        y = conv_bn(b, cv, bn, y, hid, 1, 1, 0, 1, GR_SILU);
    }
    snprintf(cv, sizeof cv, "%s.block.%d.0", p, j);
    snprintf(bn, sizeof bn, "%s.block.%d.1", p, j++);
    y = conv_bn(b, cv, bn, y, hid, k, stride, (k - 1) / 2, hid, GR_SILU);
    snprintf(cv, sizeof cv, "%s.block.%d", p, j++);
    y = squeeze_excite(b, cv, y, ci / 4 > 1 ? ci / 4 : 1, GR_SILU, GR_SIGMOID);
    snprintf(cv, sizeof cv, "%s.block.%d.0", p, j);
    snprintf(bn, sizeof bn, "%s.block.%d.1", p, j);
    y = conv_bn(b, cv, bn, y, co, 1, 1, 0, 1, GR_OPK_COUNT);
    if (stride == 1 && ci == co) {
        snprintf(cv, sizeof cv, "%s.add", p);
        y = gb_add(b, cv, y, x);
    }
    return y;
}

int gr_efficientnet_b0(gb *b, const gr_cfg *c)
{
    static const int cfg[7][5] = {{1, 3, 1, 16, 1}, {6, 3, 2, 24, 2},  {6, 5, 2, 40, 2},
                                  {6, 3, 2, 80, 3}, {6, 5, 1, 112, 3}, {6, 5, 2, 192, 4},
                                  {6, 3, 1, 320, 1}};
    int x = image_input(b, c);
    x = conv_bn(b, "features.0.0", "features.0.1", x, 32, 3, 2, 1, 1, GR_SILU);
    for (int s = 0; s < 7; s++)
        for (int i = 0; i < cfg[s][4]; i++) {
            char p[GR_NAME_MAX];
            snprintf(p, sizeof p, "features.%d.%d", s + 1, i);
            x = mbconv(b, p, x, cfg[s][0], cfg[s][1], i == 0 ? cfg[s][2] : 1, cfg[s][3]);
        }
    x = conv_bn(b, "features.8.0", "features.8.1", x, 1280, 1, 1, 0, 1, GR_SILU);
    return head(b, x, "classifier.1", c->classes);
}

/* ---- ConvNeXt-Tiny (LayerNorm eps 1e-6, layer scale) ---- */

/* LayerNorm2d: over channels of NCHW, through NHWC. */
static int ln2d(gb *b, const char *p, int x)
{
    char n[GR_NAME_MAX];
    snprintf(n, sizeof n, "%s.nhwc", p);
    int y = gb_permute(b, n, x, 4, (int[]){0, 2, 3, 1});
    y = gb_ln(b, p, y, 1e-6f);
    snprintf(n, sizeof n, "%s.nchw", p);
    return gb_permute(b, n, y, 4, (int[]){0, 3, 1, 2});
}

/* CNBlock: dw7x7 -> NHWC -> LN -> linear 4d -> GELU -> linear d -> * layer
 * scale -> NCHW, + input. */
static int cnblock(gb *b, const char *p, int x)
{
    if (x < 0)
        return -1;
    int dim = (int)gb_t(b, x)->dims[1];
    char n[GR_NAME_MAX];
    snprintf(n, sizeof n, "%s.block.0", p);
    int y = gb_conv(b, n, x, dim, 7, 1, 3, dim, true);
    snprintf(n, sizeof n, "%s.block.1", p);
    y = gb_permute(b, n, y, 4, (int[]){0, 2, 3, 1});
    snprintf(n, sizeof n, "%s.block.2", p);
    y = gb_ln(b, n, y, 1e-6f);
    snprintf(n, sizeof n, "%s.block.3", p);
    y = gb_linear(b, n, y, 4 * dim, true);
    snprintf(n, sizeof n, "%s.block.4", p);
    y = gb_act(b, GR_GELU, n, y);
    snprintf(n, sizeof n, "%s.block.5", p);
    y = gb_linear(b, n, y, dim, true);
    int ls = gb_w(b, p, "layer_scale", 3, (int64_t[]){dim, 1, 1}, GR_INIT_SMALL, 1);
    snprintf(n, sizeof n, "%s.layer_scale.flat", p);
    ls = gb_reshape(b, n, ls, 1, (int64_t[]){dim}); /* [dim,1,1] on NCHW = [dim] on NHWC */
    snprintf(n, sizeof n, "%s.scale", p);
    y = gb_op2(b, GR_MUL, n, y, ls, NULL);
    snprintf(n, sizeof n, "%s.block.6", p);
    y = gb_permute(b, n, y, 4, (int[]){0, 3, 1, 2});
    snprintf(n, sizeof n, "%s.add", p);
    return gb_add(b, n, y, x);
}

int gr_convnext_tiny(gb *b, const gr_cfg *c)
{
    static const int depth[4] = {3, 3, 9, 3}, dims[4] = {96, 192, 384, 768};
    int x = image_input(b, c);
    x = gb_conv(b, "features.0.0", x, 96, 4, 4, 0, 1, true);
    x = ln2d(b, "features.0.1", x);
    char p[GR_NAME_MAX];
    for (int s = 0; s < 4; s++) {
        if (s > 0) {
            snprintf(p, sizeof p, "features.%d.0", 2 * s);
            x = ln2d(b, p, x);
            snprintf(p, sizeof p, "features.%d.1", 2 * s);
            x = gb_conv(b, p, x, dims[s], 2, 2, 0, 1, true);
        }
        for (int i = 0; i < depth[s]; i++) {
            snprintf(p, sizeof p, "features.%d.%d", 2 * s + 1, i);
            x = cnblock(b, p, x);
        }
    }
    gr_attr one = {.kernel = {1, 1}};
    x = gb_op1(b, GR_ADAPTIVE_AVGPOOL2D, "avgpool", x, &one);
    x = ln2d(b, "classifier.0", x);
    gr_attr fl = {.axis = 1};
    x = gb_op1(b, GR_FLATTEN, "classifier.1", x, &fl);
    return gb_linear(b, "classifier.2", x, (int)c->classes, true);
}
