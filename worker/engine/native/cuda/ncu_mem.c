/* ncu_mem: the CUDA backend's allocator.  Every device buffer is one
 * cudaMalloc made at prepare time and kept until the instance is destroyed, so
 * the timed loop never allocates (a caching allocator in the sense that
 * matters: nothing is allocated or freed per iteration) and never uses managed
 * memory.  Each allocation carries a variant mask, as host buffers do, so a
 * variant's peak bytes are exactly the buffers it touches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ncu_int.h"

/* Grows the table to hold one more entry (doubling, up to NCU_MEM_MAX). */
static fb_code mem_grow(ncu_mem *m, fb_err *err)
{
    if (m->n < m->cap)
        return FB_OK;
    if (m->cap >= NCU_MEM_MAX)
        return fb_err_set(err, FB_ETOOBIG, NULL, "too many device buffers (max %d)", NCU_MEM_MAX);
    int nc = m->cap ? m->cap * 2 : 64;
    nc = nc > NCU_MEM_MAX ? NCU_MEM_MAX : nc;
    ncu_alloc *a = realloc(m->a, (size_t)nc * sizeof *a);
    if (!a)
        return fb_err_set(err, FB_ENOMEM, NULL, "cannot grow the device buffer table");
    m->a = a;
    m->cap = nc;
    return FB_OK;
}

fb_code ncu_mem_alloc(ncu_mem *m, size_t bytes, unsigned mask, const char *name, void **out,
                      fb_err *err)
{
    *out = NULL;
    size_t rounded = (bytes + 255) & ~(size_t)255;
    void *p = NULL;
    fb_code rc = mem_grow(m, err);
    if (rc)
        return rc;
    char what[96];
    snprintf(what, sizeof what, "cudaMalloc %zu bytes for %s", rounded, name);
    rc = ncu_cuda_check(cudaMalloc(&p, rounded), what, err);
    /* cudaMemset runs on the legacy stream, which our non-blocking stream does
     * not wait for: finish it before anything else touches the buffer. */
    if (!rc)
        rc = ncu_cuda_check(cudaMemset(p, 0, rounded), what, err);
    if (!rc)
        rc = ncu_cuda_check(cudaDeviceSynchronize(), what, err);
    if (rc) {
        if (p)
            (void)cudaFree(p);
        return rc;
    }
    ncu_alloc *a = &m->a[m->n++];
    a->ptr = p;
    a->bytes = rounded;
    a->mask = mask;
    snprintf(a->name, sizeof a->name, "%s", name);
    m->cur_bytes += (int64_t)rounded;
    if (m->cur_bytes > m->peak_bytes)
        m->peak_bytes = m->cur_bytes;
    *out = p;
    return FB_OK;
}

void ncu_mem_use(ncu_mem *m, const void *ptr, unsigned mask)
{
    for (int i = 0; i < m->n; i++) {
        if (m->a[i].ptr == ptr) {
            m->a[i].mask |= mask;
            return;
        }
    }
}

int64_t ncu_mem_variant_bytes(const ncu_mem *m, int v)
{
    int64_t sum = 0;
    for (int i = 0; i < m->n; i++)
        if (m->a[i].mask & (1u << v))
            sum += (int64_t)m->a[i].bytes;
    return sum;
}

void ncu_mem_release(ncu_mem *m)
{
    for (int i = 0; i < m->n; i++)
        (void)cudaFree(m->a[i].ptr); /* teardown: nothing useful to do on failure */
    free(m->a);
    memset(m, 0, sizeof *m);
}

void ncu_mem_free(ncu_mem *m, void *ptr)
{
    for (int i = 0; i < m->n; i++) {
        if (m->a[i].ptr == ptr) {
            (void)cudaFree(ptr);
            m->cur_bytes -= (int64_t)m->a[i].bytes;
            m->a[i] = m->a[--m->n];
            return;
        }
    }
}
