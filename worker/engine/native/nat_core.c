/* nat_core: buffers, deterministic fill, plans and contexts of the native
 * engine (nat.h).  Everything the patterns allocate lives in the ctx and is freed
 * with it, so a failed build never leaks. */
#include <assert.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

#include "fb_array.h"
#include "nat.h"
#include "nat_kern_cpu.h"

/* A ctx never holds more than this many bytes in all: a request cannot make a
 * worker allocate more than the machine could plausibly give one benchmark. */
#define NAT_CTX_MAX_BYTES ((int64_t)16 << 30)

void *nat_mem_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes < NAT_HUGE_BYTES) {
        /* aligned_alloc wants a size that is a multiple of the alignment. */
        return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    }
    if (posix_memalign(&p, NAT_HUGE_BYTES, bytes) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    /* advice only: where THP is off (or "never") the pages stay 4 KiB */
    (void)madvise(p, bytes & ~(NAT_HUGE_BYTES - 1), MADV_HUGEPAGE);
#endif
    return p;
}

float *nat_buf_new(nat_ctx *ctx, size_t n, unsigned mask, const char *name, fb_err *err)
{
    assert(ctx && name);
    if (!fb_array_grow((void **)&ctx->bufs, &ctx->cap_bufs, ctx->n_bufs + 1, NAT_MAX_BUFS,
                       sizeof *ctx->bufs)) {
        fb_err_set(err, FB_EINTERNAL, NULL, "too many buffers (max %d)", NAT_MAX_BUFS);
        return NULL;
    }
    if (n == 0 || n > (size_t)NAT_CTX_MAX_BYTES / sizeof(float) ||
        ctx->total_bytes + (int64_t)(n * sizeof(float)) > NAT_CTX_MAX_BYTES) {
        fb_err_set(err, FB_ETOOBIG, NULL, "buffer %s of %zu floats is over the limit", name, n);
        return NULL;
    }
    size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
    float *data = nat_mem_alloc(bytes);
    if (!data) {
        fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate %zu bytes for %s", bytes, name);
        return NULL;
    }
    memset(data, 0, bytes);
    nat_buf *b = &ctx->bufs[ctx->n_bufs++];
    b->data = data;
    b->n = n;
    b->variants = mask;
    ctx->total_bytes += (int64_t)(n * sizeof(float));
    snprintf(b->name, sizeof b->name, "%s", name);
    return data;
}

/* splitmix64's finalizer: a good 64-bit mix, so hashing (seed, stream, index)
 * gives independent-looking values with no state, whatever the thread count. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void nat_fill_uniform(nat_ctx *ctx, float *data, size_t n, uint32_t stream, float lo, float hi)
{
    assert(ctx && data);
    uint64_t base = mix64(ctx->seed * 0x9e3779b97f4a7c15ULL + stream);
    float span = hi - lo;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        uint64_t r = mix64(base + (uint64_t)i * 0x9e3779b97f4a7c15ULL);
        /* 24 high bits give every float in [0, 1) a uniform step of 2^-24. */
        float u = (float)(r >> 40) * (1.0f / 16777216.0f);
        data[i] = lo + span * u;
    }
}

nat_launch *nat_plan_add(nat_ctx *ctx, int v, const char *name, fb_kcat cat, const char *const *ops,
                         nat_kernel_fn fn, fb_err *err)
{
    assert(ctx && name && ops && fn && v >= 0 && v < NAT_MAX_VARIANTS);
    nat_plan *plan = &ctx->plans[v];
    if (!fb_array_grow((void **)&plan->launches, &plan->cap, plan->n + 1, NAT_MAX_LAUNCHES,
                       sizeof *plan->launches)) {
        fb_err_set(err, FB_EINTERNAL, NULL, "too many launches (max %d)", NAT_MAX_LAUNCHES);
        return NULL;
    }
    nat_launch *l = &plan->launches[plan->n++];
    memset(l, 0, sizeof *l);
    l->name = name;
    l->category = cat;
    l->fn = fn;
    l->group = -1;
    for (int k = 0; k < NAT_MAX_OPS && ops[k]; k++) {
        l->ops[k] = ops[k];
        l->n_ops = k + 1;
    }
    return l;
}

void nat_plan_run(const nat_plan *plan)
{
    assert(plan);
    for (int i = 0; i < plan->n; i++)
        plan->launches[i].fn(&plan->launches[i]);
}

/* Reads the ctx-wide settings (seed, batch) every pattern shares. */
static fb_code ctx_settings(nat_ctx *ctx, const fb_spec *spec, const nat_pattern *pat, fb_err *err)
{
    int64_t seed = 0;
    fb_code rc = fb_spec_param_int(spec, "seed", 42, 0, INT64_MAX, &seed, err);
    if (rc)
        return rc;
    ctx->seed = (uint64_t)seed;
    ctx->batch = spec->batch_size > 0 ? spec->batch_size : pat->info.default_batch_size;
    if (ctx->batch < 1)
        ctx->batch = 1;
    return FB_OK;
}

fb_code nat_ctx_build_for(const nat_pattern *pat, const fb_spec *spec,
                          const struct gr_cost_timer *timer, nat_ctx **out, fb_err *err)
{
    assert(pat && spec && out);
    *out = NULL;
    nat_ctx *ctx = NULL;
    fb_code rc = FB_OK;
    ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        rc = fb_err_set(err, FB_ENOMEM, NULL, "cannot allocate a context");
        goto out;
    }
    rc = ctx_settings(ctx, spec, pat, err);
    if (rc)
        goto out;
    ctx->cost_timer = timer;
    rc = pat->build(ctx, spec, err);
    if (rc)
        goto out;
    if (!ctx->plans[NAT_EAGER].out || !ctx->plans[NAT_FUSED].out) {
        rc = fb_err_set(err, FB_EINTERNAL, NULL, "pattern %s built no output", spec->workload);
        goto out;
    }
    if (!ctx->graph) { /* a pattern: one fusion group, its fused plan against its eager one */
        if (spec->params && cJSON_GetObjectItemCaseSensitive(spec->params, "unfuse")) {
            rc = fb_err_set(err, FB_EINVAL, "params.unfuse",
                            "a pattern is one fusion group: its eager variant is it unfused");
            goto out;
        }
        for (int v = NAT_EAGER; v <= NAT_FUSED; v++)
            for (int i = 0; i < ctx->plans[v].n; i++)
                ctx->plans[v].launches[i].group = 0;
    }
    *out = ctx;
    ctx = NULL;
out:
    nat_ctx_free(ctx);
    return rc;
}

void nat_ctx_free(nat_ctx *ctx)
{
    if (!ctx)
        return;
    for (int i = 0; i < ctx->n_bufs; i++)
        free(ctx->bufs[i].data);
    free(ctx->bufs);
    for (int v = 0; v < NAT_MAX_VARIANTS; v++) {
        free(ctx->plans[v].launches);
        free(ctx->node_launch[v]);
    }
    cJSON_Delete(ctx->graph);
    free(ctx->reference);
    free(ctx);
}

int64_t nat_ctx_variant_bytes(const nat_ctx *ctx, int v)
{
    assert(ctx && v >= 0 && v < NAT_MAX_VARIANTS);
    int64_t sum = 0;
    for (int i = 0; i < ctx->n_bufs; i++)
        if (ctx->bufs[i].variants & (1u << v))
            sum += (int64_t)ctx->bufs[i].n * (int64_t)sizeof(float);
    return sum;
}

fb_code nat_spec_gemm_pack(const fb_spec *spec, bool *pack, bool *per_shape, fb_err *err)
{
    bool cpu = strcmp(spec->device, "cuda") != 0;
    const cJSON *j = spec->params ? cJSON_GetObjectItemCaseSensitive(spec->params, "gemm") : NULL;
    const char *v = cJSON_IsString(j) ? j->valuestring : NULL;
    if (per_shape)
        *per_shape = false;
    if (!j || (v && strcmp(v, "auto") == 0)) {
        *pack = cpu && nat_pw_default();
        if (per_shape)
            *per_shape = cpu;
        return FB_OK;
    }
    if (v && (strcmp(v, "packed") == 0 || strcmp(v, "openblas") == 0)) {
        *pack = cpu && v[0] == 'p';
        return FB_OK;
    }
    return fb_err_set(err, FB_EINVAL, "params.gemm",
                      "must be \"auto\", \"packed\" or \"openblas\"");
}
