/* fb_gpu: CUDA device and library versions (see fb_gpu.h). */
#include "fb_gpu.h"

#include <stdio.h>
#include <string.h>

void fb_gpu_driver_from_line(const char *line, char *dst, size_t cap)
{
    const char *p = strstr(line, "Kernel Module");

    if (cap)
        dst[0] = '\0';
    if (!p || !cap)
        return;
    for (p += strlen("Kernel Module"); *p;) {
        size_t n;
        p += strspn(p, " \t\n");
        n = strcspn(p, " \t\n");
        if (n && *p >= '0' && *p <= '9' && memchr(p, '.', n)) {
            snprintf(dst, cap, "%.*s", (int)n, p);
            return;
        }
        p += n;
    }
}

#ifdef FB_HAVE_CUDA
#include <dlfcn.h>

#include <cuda_runtime_api.h>

/* "13000" → "13.0" (CUDA's version encoding: 1000 * major + 10 * minor). */
static void cuda_version(int v, char *dst, size_t cap)
{
    snprintf(dst, cap, "%d.%d", v / 1000, (v % 1000) / 10);
}

/* size_t fn(void) from the first library of names that loads, as
 * "major.minor.patch" with the library's own encoding (mul = major's factor). */
static void lib_version(const char *const *names, const char *sym, size_t major_mul,
                        size_t minor_mul, char *dst, size_t cap)
{
    dst[0] = '\0';
    for (; *names; names++) {
        void *h = dlopen(*names, RTLD_LAZY | RTLD_LOCAL);
        size_t (*fn)(void) = NULL;
        if (!h)
            continue;
        *(void **)&fn = dlsym(h, sym);
        if (fn) {
            size_t v = fn();
            snprintf(dst, cap, "%zu.%zu.%zu", v / major_mul, (v % major_mul) / minor_mul,
                     v % minor_mul);
        }
        dlclose(h);
        if (dst[0])
            return;
    }
}

static void uuid_text(const unsigned char b[16], char *dst, size_t cap)
{
    snprintf(dst, cap, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

/* The kernel module's version ("580.65.06") from /proc, "" when unreadable. */
static void driver_release(char *dst, size_t cap)
{
    char line[256];
    FILE *f = fopen("/proc/driver/nvidia/version", "r");

    dst[0] = '\0';
    if (!f)
        return;
    if (fgets(line, sizeof line, f))
        fb_gpu_driver_from_line(line, dst, cap);
    fclose(f);
}

fb_code fb_gpu_query(int dev, fb_gpu *out, fb_err *err)
{
    static const char *const cudnn[] = {"libcudnn.so.9", "libcudnn.so", NULL};
    static const char *const cublas[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so",
                                         NULL};
    struct cudaDeviceProp p;
    int drv = 0, rt = 0;
    cudaError_t e;

    memset(out, 0, sizeof *out);
    if (dev < 0 && (e = cudaGetDevice(&dev)) != cudaSuccess)
        return fb_err_set(err, FB_EDEVICE, NULL, "no current GPU: %s", cudaGetErrorString(e));
    e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess)
        return fb_err_set(err, FB_EDEVICE, NULL, "GPU %d: %s", dev, cudaGetErrorString(e));
    snprintf(out->name, sizeof out->name, "%s", p.name);
    uuid_text((const unsigned char *)p.uuid.bytes, out->uuid, sizeof out->uuid);
    out->memory_bytes = (int64_t)p.totalGlobalMem;
    snprintf(out->compute_capability, sizeof out->compute_capability, "%d.%d", p.major, p.minor);
    driver_release(out->driver, sizeof out->driver);
    if (!out->driver[0] && cudaDriverGetVersion(&drv) == cudaSuccess) {
        snprintf(out->driver, sizeof out->driver, "cuda ");
        cuda_version(drv, out->driver + 5, sizeof out->driver - 5);
    }
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess)
        cuda_version(rt, out->cuda, sizeof out->cuda);
    /* cuDNN 9: 10000 * major + 100 * minor + patch; cuBLASLt: same scheme. */
    lib_version(cudnn, "cudnnGetVersion", 10000, 100, out->cudnn, sizeof out->cudnn);
    lib_version(cublas, "cublasLtGetVersion", 10000, 100, out->cublas, sizeof out->cublas);
    return FB_OK;
}

#else

fb_code fb_gpu_query(int dev, fb_gpu *out, fb_err *err)
{
    memset(out, 0, sizeof *out);
    return fb_err_set(err, FB_EUNSUPPORTED, "device", "GPU %d: this build has no CUDA", dev);
}

#endif
