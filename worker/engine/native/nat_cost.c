/* nat_cost: bytes, FLOPs and implementation of a launch from its descriptor
 * (nat_cost.h has the rules). */
#include "nat_cost.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nat_kern_cpu.h"

/* FLOPs of the row kernels, as their eager decompositions count them: softmax
 * is max, subtract, exp, sum, divide per element; layernorm is mean,
 * subtract, square, mean, multiply by rstd, multiply by gamma, add beta per
 * element and adding eps and rsqrt per row, plus one per element for a
 * residual add. */
#define SOFTMAX_FLOPS       5.0
#define LAYERNORM_FLOPS     7.0
#define LAYERNORM_ROW_FLOPS 2.0

static double gemm_flops(const nat_launch *l)
{
    const nat_gemm_desc *g = &l->d.gemm;
    double mn = (double)g->nb * (double)g->m * (double)g->n;
    double epi = (l->p[NAT_GEMM_BIAS] ? 1 : 0) + (l->p[NAT_GEMM_RES] ? 1 : 0) +
                 (g->act != NAT_ACT_NONE ? 1 : 0);
    return 2.0 * mn * (double)g->k + mn * epi;
}

static nat_cost cost_gemm(const nat_launch *l)
{
    const nat_gemm_desc *g = &l->d.gemm;
    double nb = (double)g->nb, m = (double)g->m, n = (double)g->n, k = (double)g->k;
    /* a batched GEMM's b is per batch; a linear's weight is one matrix */
    double b = (nb > 1 ? nb : 1) * k * n;
    nat_cost c = {.bytes_read = nb * m * k + b, .bytes_written = nb * m * n};
    if (l->p[NAT_GEMM_BIAS])
        c.bytes_read += n;
    if (l->p[NAT_GEMM_RES])
        c.bytes_read += nb * m * n;
    c.flops = gemm_flops(l);
    return c;
}

static nat_cost cost_mlp(const nat_launch *l)
{
    const nat_mlp_desc *d = &l->d.mlp;
    double m = (double)d->m, dd = (double)d->d, h = (double)d->h;
    nat_cost c = {.bytes_read = m * dd + 2.0 * dd * h + h + dd, .bytes_written = m * dd};
    if (l->p[NAT_MLP_RES])
        c.bytes_read += m * dd;
    c.flops = 4.0 * m * dd * h + 2.0 * m * h + m * dd * (l->p[NAT_MLP_RES] ? 2 : 1);
    return c;
}

static nat_cost cost_conv(const nat_launch *l)
{
    const nat_conv_shape *s = &l->d.conv.s;
    double out = (double)s->n * s->co * s->ho * s->wo;
    double w = (double)s->co * (s->ci / (s->groups > 0 ? s->groups : 1)) * s->kh * s->kw;
    nat_cost c = {.bytes_read = (double)s->n * s->ci * s->h * s->w + w, .bytes_written = out};
    double epi = (l->p[NAT_CONV_BIAS] ? 1 : 0) + (l->p[NAT_CONV_RES] ? 1 : 0) +
                 (l->d.conv.act != NAT_ACT_NONE ? 1 : 0);
    if (l->p[NAT_CONV_BIAS])
        c.bytes_read += s->co;
    if (l->p[NAT_CONV_RES])
        c.bytes_read += out;
    c.flops = 2.0 * out * (w / (s->co > 0 ? s->co : 1)) + out * epi;
    return c;
}

static nat_cost cost_epi(const nat_launch *l)
{
    const nat_epi_desc *e = &l->d.epi;
    double n = (double)e->n;
    nat_cost c = {.bytes_read = n, .bytes_written = n};
    if (l->p[NAT_EPI_BIAS])
        c.bytes_read += (double)e->c;
    if (l->p[NAT_EPI_RES])
        c.bytes_read += n;
    c.flops = n * ((l->p[NAT_EPI_BIAS] ? 1 : 0) + (l->p[NAT_EPI_RES] ? 1 : 0) +
                   (e->act != NAT_ACT_NONE ? 1 : 0));
    return c;
}

static double elem_b(const nat_elem_desc *e)
{
    switch (e->bcast) {
    case NAT_BC_COL:
        return (double)e->cols;
    case NAT_BC_ROW:
        return (double)e->rows;
    case NAT_BC_SCALAR:
        return 0.0;
    case NAT_BC_TILE:
        return (double)(e->period > 0 ? e->period : 1) * (double)e->cols;
    default:
        return (double)e->rows * (double)e->cols;
    }
}

static nat_cost cost_elem(const nat_launch *l)
{
    const nat_elem_desc *e = &l->d.elem;
    double n = (double)e->rows * (double)e->cols;
    nat_cost c = {.bytes_read = n + (l->p[NAT_ELEM_B] ? elem_b(e) : 0.0), .bytes_written = n};
    c.flops = n * (l->n_ops > 1 ? l->n_ops : 1);
    return c;
}

static nat_cost cost_chain(const nat_launch *l)
{
    const nat_chain_desc *ch = &l->d.chain;
    double n = (double)ch->n;
    nat_cost c = {.bytes_read = n, .bytes_written = n, .flops = n * ch->n_steps};
    for (int s = 0; s < ch->n_steps && s < NAT_CHAIN_MAX; s++) {
        const nat_chain_step *st = &ch->steps[s];
        if (st->op != NAT_CH_ADD && st->op != NAT_CH_MUL)
            continue;
        double size = st->size > 0 ? (double)st->size : 1.0;
        c.bytes_read += st->bc == NAT_CH_FULL ? n : (st->bc == NAT_CH_COL ? size : n / size);
    }
    return c;
}

static nat_cost cost_rows(const nat_launch *l)
{
    const nat_rows_desc *r = &l->d.rows;
    double n = (double)r->rows * (double)r->cols;
    nat_cost c = {.bytes_read = n, .bytes_written = n};
    if (l->dk == NAT_D_REDUCE) {
        c.bytes_written = (double)r->rows;
        c.flops = n;
        return c;
    }
    if (l->p[NAT_ROWS_GAMMA]) { /* layernorm */
        c.bytes_read += 2.0 * (double)r->cols + (l->p[NAT_ROWS_RES] ? n : 0.0);
        c.flops = n * (LAYERNORM_FLOPS + (l->p[NAT_ROWS_RES] ? 1 : 0)) +
                  (double)r->rows * LAYERNORM_ROW_FLOPS;
    } else if (r->op == NAT_ROW_CAUSAL) {
        c.flops = 0.0; /* a masked copy */
    } else {
        c.flops = n * (SOFTMAX_FLOPS + (r->scale != 1.0f ? 1 : 0));
    }
    return c;
}

static nat_cost cost_attn(const nat_launch *l)
{
    const nat_attn_desc *a = &l->d.attn;
    double bsd = (double)a->bh * (double)a->s * (double)a->d;
    /* scores: the whole s x s, or its lower triangle when causal */
    double pairs = (double)a->bh * (double)a->s * (double)a->s * (a->causal ? 0.5 : 1.0);
    nat_cost c = {.bytes_read = 3.0 * bsd, .bytes_written = bsd};
    c.flops = 4.0 * pairs * (double)a->d + pairs * (SOFTMAX_FLOPS + 1);
    return c;
}

static nat_cost cost_move(const nat_launch *l)
{
    nat_cost c = {0};
    switch (l->dk) {
    case NAT_D_BN: {
        double n = (double)l->d.bn.n * l->d.bn.c * l->d.bn.hw;
        c = (nat_cost){.bytes_read = n + 4.0 * l->d.bn.c, .bytes_written = n, .flops = 2.0 * n};
        break;
    }
    case NAT_D_POOL: {
        const nat_pool_desc *g = &l->d.pool;
        double in = (double)g->planes * g->h * g->w, out = (double)g->planes * g->ho * g->wo;
        double win = g->kh > 0 && g->kw > 0 ? (double)g->kh * g->kw : in / (out > 0 ? out : 1);
        c = (nat_cost){.bytes_read = in, .bytes_written = out, .flops = out * win};
        break;
    }
    case NAT_D_EMBED: {
        double rows = (double)l->d.embed.n_ids * l->d.embed.d;
        c = (nat_cost){.bytes_read = (double)l->d.embed.n_ids + rows, .bytes_written = rows};
        break;
    }
    case NAT_D_PERMUTE: {
        double n = 1.0;
        for (int d = 0; d < l->d.permute.rank && d < NAT_PERMUTE_MAX_RANK; d++)
            n *= (double)l->d.permute.dims[d];
        c = (nat_cost){.bytes_read = n, .bytes_written = n};
        break;
    }
    case NAT_D_CONCAT: {
        const nat_concat_desc *k = &l->d.concat;
        for (int i = 0; i < k->n_in && i < NAT_CONCAT_MAX_IN; i++)
            c.bytes_read += (double)((k->bcast >> i) & 1u ? 1 : k->outer) * k->axis[i] * k->inner;
        c.bytes_written = (double)k->outer * k->out_axis * k->inner;
        break;
    }
    case NAT_D_SLICE: {
        double n = (double)l->d.slice.outer * l->d.slice.len * l->d.slice.inner;
        c = (nat_cost){.bytes_read = n, .bytes_written = n};
        break;
    }
    default:
        break;
    }
    return c;
}

nat_cost nat_launch_cost(const nat_launch *l, int elem_bytes)
{
    assert(l && elem_bytes > 0);
    nat_cost c;
    switch (l->dk) {
    case NAT_D_GEMM:
        c = cost_gemm(l);
        break;
    case NAT_D_MLP:
        c = cost_mlp(l);
        break;
    case NAT_D_CONV:
        c = cost_conv(l);
        break;
    case NAT_D_EPI:
        c = cost_epi(l);
        break;
    case NAT_D_ELEM:
        c = cost_elem(l);
        break;
    case NAT_D_CHAIN:
        c = cost_chain(l);
        break;
    case NAT_D_ROWS:
    case NAT_D_REDUCE:
        c = cost_rows(l);
        break;
    case NAT_D_ATTN:
        c = cost_attn(l);
        break;
    default:
        c = cost_move(l);
        break;
    }
    c.bytes_read *= elem_bytes;
    c.bytes_written *= elem_bytes;
    return c;
}

static double ceil_div(double a, double b)
{
    return a <= 0 ? 0 : ceil(a / b);
}

double nat_launch_units(const nat_launch *l)
{
    switch (l->dk) {
    case NAT_D_GEMM:
        return (double)l->d.gemm.nb * ceil_div((double)l->d.gemm.m, 64) *
               ceil_div((double)l->d.gemm.n, 64);
    case NAT_D_MLP:
        return l->d.mlp.mode == NAT_MLP_ROWS && l->d.mlp.rb > 0
                   ? ceil_div((double)l->d.mlp.m, (double)l->d.mlp.rb)
                   : ceil_div((double)l->d.mlp.m, 64) * ceil_div((double)l->d.mlp.h, 64);
    case NAT_D_CONV: {
        const nat_conv_shape *s = &l->d.conv.s;
        if (nat_conv2d_impl(s) == NAT_IMPL_LOOP) /* depthwise: a plane each */
            return (double)s->n * s->co;
        return (double)s->n * ceil_div((double)s->ho * s->wo, 64) * ceil_div(s->co, 64);
    }
    case NAT_D_EPI:
        return ceil_div((double)l->d.epi.n, 16384);
    case NAT_D_ELEM:
        return l->d.elem.bcast == NAT_BC_FULL || l->d.elem.bcast == NAT_BC_SCALAR
                   ? ceil_div((double)l->d.elem.rows * l->d.elem.cols, 16384)
                   : (double)l->d.elem.rows;
    case NAT_D_CHAIN:
        return ceil_div((double)l->d.chain.n, 1024);
    case NAT_D_BN:
        return (double)l->d.bn.n * l->d.bn.c;
    case NAT_D_ROWS:
    case NAT_D_REDUCE:
        return (double)l->d.rows.rows;
    case NAT_D_ATTN:
        return (double)l->d.attn.bh * ceil_div((double)l->d.attn.s, 64);
    case NAT_D_POOL:
        return (double)l->d.pool.planes;
    case NAT_D_EMBED:
        return (double)l->d.embed.n_ids;
    case NAT_D_PERMUTE: {
        double rows = 1;
        for (int d = 0; d + 1 < l->d.permute.rank && d < NAT_PERMUTE_MAX_RANK; d++)
            rows *= (double)l->d.permute.dims[d];
        return rows;
    }
    case NAT_D_CONCAT:
        return (double)l->d.concat.outer;
    case NAT_D_SLICE:
        return (double)l->d.slice.outer;
    default:
        return 1;
    }
}

nat_impl nat_launch_impl(const nat_launch *l)
{
    if (l->impl != NAT_IMPL_AUTO)
        return l->impl;
    switch (l->dk) {
    case NAT_D_GEMM:
        return l->p[NAT_GEMM_PB] ? NAT_IMPL_PACKED_GEMM : NAT_IMPL_OPENBLAS;
    case NAT_D_MLP:
        return l->p[NAT_MLP_PW1] ? NAT_IMPL_PACKED_GEMM : NAT_IMPL_OPENBLAS;
    case NAT_D_CONV:
        return nat_conv2d_impl(&l->d.conv.s);
    default:
        return NAT_IMPL_LOOP;
    }
}

static const char *const impl_names[NAT_IMPL_COUNT] = {
    [NAT_IMPL_AUTO] = "",
    [NAT_IMPL_LOOP] = "loop",
    [NAT_IMPL_PACKED_GEMM] = "packed_gemm",
    [NAT_IMPL_WINOGRAD] = "winograd",
    [NAT_IMPL_OPENBLAS] = "openblas",
    [NAT_IMPL_CUBLASLT] = "cublaslt",
    [NAT_IMPL_CUDNN] = "cudnn",
    [NAT_IMPL_CUDA] = "cuda",
};

const char *nat_impl_name(nat_impl i)
{
    return i >= 0 && i < NAT_IMPL_COUNT ? impl_names[i] : "";
}

bool nat_impl_is_library(nat_impl i)
{
    return i == NAT_IMPL_PACKED_GEMM || i == NAT_IMPL_WINOGRAD || i == NAT_IMPL_OPENBLAS ||
           i == NAT_IMPL_CUBLASLT || i == NAT_IMPL_CUDNN;
}

/* The process's limits: set once before jobs run (the worker at start, in the
 * parent its job children fork from), read by the profiles. */
static double roof_gbps[2], roof_gflops[2]; /* [0]: CPU, [1]: GPU */

void nat_roofline_use(bool gpu, double gbps, double gflops)
{
    roof_gbps[gpu] = gbps;
    roof_gflops[gpu] = gflops;
}

bool nat_roofline_get(bool gpu, double *gbps, double *gflops)
{
    *gbps = roof_gbps[gpu];
    *gflops = roof_gflops[gpu];
    return *gbps > 0 && *gflops > 0;
}

double nat_roofline_bound_ms(const nat_cost *c, bool gpu)
{
    double bw = roof_gbps[gpu], peak = roof_gflops[gpu];
    if (!(bw > 0) || !(peak > 0))
        return NAN;
    double mem = (c->bytes_read + c->bytes_written) / (bw * 1e6);
    double comp = c->flops / (peak * 1e6);
    return mem > comp ? mem : comp;
}

static bool same_row(const fb_kernel_row *row, const nat_launch *l)
{
    if (strcmp(row->name, l->name) != 0 || row->n_ops != l->n_ops)
        return false;
    for (int i = 0; i < l->n_ops && i < FB_MAX_KERNEL_OPS; i++)
        if (strcmp(row->ops[i], l->ops[i]) != 0)
            return false;
    return true;
}

void nat_kernel_row_add(fb_kernel_row *rows, int *n, const nat_launch *l, double start_ms,
                        double ms, int elem_bytes, bool gpu)
{
    int i = 0;
    while (i < *n && !same_row(&rows[i], l))
        i++;
    fb_kernel_row *row = &rows[i];
    const char *impl = nat_impl_name(nat_launch_impl(l));
    if (i == *n) {
        (*n)++;
        memset(row, 0, sizeof *row);
        snprintf(row->name, sizeof row->name, "%s", l->name);
        row->category = l->category;
        row->n_ops = l->n_ops < FB_MAX_KERNEL_OPS ? l->n_ops : FB_MAX_KERNEL_OPS;
        for (int k = 0; k < row->n_ops; k++)
            snprintf(row->ops[k], sizeof row->ops[k], "%s", l->ops[k]);
        snprintf(row->impl, sizeof row->impl, "%s", impl);
    } else if (strcmp(row->impl, impl) != 0) {
        snprintf(row->impl, sizeof row->impl, "mixed");
    }
    if (row->n_launches < FB_KERNEL_LAUNCHES_MAX) { /* for the trace timeline */
        row->launches_ms[row->n_launches][0] = (float)start_ms;
        row->launches_ms[row->n_launches][1] = (float)ms;
        row->n_launches++;
    }
    nat_cost c = nat_launch_cost(l, elem_bytes);
    row->count++;
    row->total_ms += ms;
    row->mean_ms = row->total_ms / row->count;
    row->bytes += c.bytes_read + c.bytes_written;
    row->flops += c.flops;
    row->roof_ms += nat_roofline_bound_ms(&c, gpu); /* NaN stays NaN: no roofline */
}
