/* nat_pat: helpers the pattern files share: shape params with limits, weight
 * init, buffer lookup for the float64 references, and the catalog entry. */
#ifndef NAT_PAT_H
#define NAT_PAT_H

#include <stdint.h>

#include "nat.h"
#include "nat_kern_cpu.h"

/* No single buffer may exceed 4 GiB (2^30 floats): a request cannot make a
 * worker allocate more than that per tensor. */
#define NAT_PAT_MAX_FLOATS ((int64_t)1 << 30)

/* A shape param in [1, hi] with default def; FB_EINVAL names "params.<key>". */
FB_MUSTCHECK fb_code nat_pat_dim(const fb_spec *spec, const char *key, int64_t def, int64_t hi,
                                 int64_t *out, fb_err *err);

/* FB_EINVAL naming "params.<key>" when a buffer of a x b x c x d floats would be
 * over NAT_PAT_MAX_FLOATS (pass 1 for unused factors). */
FB_MUSTCHECK fb_code nat_pat_size(const char *key, int64_t a, int64_t b, int64_t c, int64_t d,
                                  fb_err *err);

/* Uniform weights in +-1/sqrt(fan_in), PyTorch's default init for linear and conv. */
void nat_pat_fill_weight(nat_ctx *ctx, float *w, int64_t n, uint32_t stream, int64_t fan_in);

/* The data of the buffer named name, or NULL (for reference()). */
const float *nat_pat_buf(const nat_ctx *ctx, const char *name);

/* The first launch of variant v's plan (where patterns keep their shape). */
const nat_launch *nat_pat_first(const nat_ctx *ctx, int v);

/* The [k, n] weight w packed for nat_pw_gemm into a new buffer "<name>.packed"
 * (all variants) when params.gemm asks for our GEMM (nat_spec_gemm_pack);
 * *out NULL when not, and the GEMM launches then run OpenBLAS on w. */
FB_MUSTCHECK fb_code nat_pat_pack(nat_ctx *ctx, const fb_spec *spec, const float *w, int64_t k,
                                  int64_t n, const char *name, float **out, fb_err *err);

/* nat_buf_new returning a code: *out is the zeroed buffer. */
FB_MUSTCHECK fb_code nat_pat_alloc(nat_ctx *ctx, int64_t n, unsigned mask, const char *name,
                                   float **out, fb_err *err);

/* Appends a launch to variant v's plan (nat_plan_add) and returns it in *out;
 * ops is NULL-terminated and may be a compound literal (its strings must be
 * static).  FB_EINTERNAL when the plan is full. */
FB_MUSTCHECK fb_code nat_pat_add(nat_ctx *ctx, int v, const char *name, fb_kcat cat,
                                 const char *const *ops, nat_kernel_fn fn, nat_launch **out,
                                 fb_err *err);

/* Eager one-op launches: kernel name and graph op are both op. */
FB_MUSTCHECK fb_code nat_pat_unary(nat_ctx *ctx, int v, const char *op, int unop, float *x,
                                   float *out, int64_t n, fb_err *err);
/* out = a (binop) b with broadcast bc (nat_kern_cpu.h), s the SCALAR operand. */
FB_MUSTCHECK fb_code nat_pat_binary(nat_ctx *ctx, int v, const char *op, int binop, int bc,
                                    float *a, float *b, float s, float *out, int64_t rows,
                                    int64_t cols, fb_err *err);
FB_MUSTCHECK fb_code nat_pat_reduce(nat_ctx *ctx, int v, const char *op, int redop, float *x,
                                    float *out, int64_t rows, int64_t cols, fb_err *err);

/* Fills a pattern's catalog entry: engine native, domain pattern, cpu, float32,
 * variants eager and fused, default batch 1; PARAMS the pattern's own params
 * (space-separated), the engine's added (NAT_PARAMS_ENGINE). */
#define NAT_PAT_INFO(NAME, DESC, PARAMS)                                                           \
    {                                                                                              \
        .name = NAME, .engine = "native", .domain = "pattern", .description = DESC,                \
        .default_batch_size = 1, .devices = {"cpu", NULL}, .dtypes = {"float32", NULL},            \
        .variants = {"eager", "fused", NULL}, .params = PARAMS " " NAT_PARAMS_ENGINE,              \
    }

#endif
