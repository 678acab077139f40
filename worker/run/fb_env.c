/* fb_env: what a result records about where it ran (METHOD.md: device and
 * software versions are part of a result's identity). */
#include "fb_run.h"

#include <ctype.h>
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cblas.h>

#include "fb_cpu.h"
#include "fb_engines.h"
#include "fb_git_sha.h"
#include "fb_gpu.h"
#include "fb_log.h"

/* Copies s into dst with leading and trailing blanks removed. */
static void copy_trimmed(char *dst, size_t cap, const char *s)
{
    size_t len;

    while (*s && isspace((unsigned char)*s))
        s++;
    len = strlen(s);
    while (len > 0 && isspace((unsigned char)s[len - 1]))
        len--;
    snprintf(dst, cap, "%.*s", (int)len, s);
}

/* The first "model name" line of /proc/cpuinfo (x86), else "unknown". */
static void cpu_model(char *dst, size_t cap)
{
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");

    snprintf(dst, cap, "unknown");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            copy_trimmed(dst, cap, colon + 1);
            break;
        }
    }
    fclose(f);
}

/* "OpenBLAS 0.3.21 SkylakeX": the library's own version (the first two words of
 * openblas_get_config(), which is the loaded library's, not the headers') and
 * the core it picked at run time (DYNAMIC_ARCH builds differ per machine).  The
 * whole config string adds build flags and overflows the field. */
static void blas_info(char *dst, size_t cap)
{
    const char *cfg = openblas_get_config(), *core = openblas_get_corename();
    char version[32];
    int words = 0;
    size_t len = 0;

    if (!cfg)
        cfg = OPENBLAS_VERSION;
    while (*cfg == ' ')
        cfg++;
    for (; cfg[len] && len < sizeof version - 1; len++) {
        if (cfg[len] == ' ' && ++words == 2)
            break;
    }
    snprintf(version, sizeof version, "%.*s", (int)len, cfg);
    snprintf(dst, cap, "%s%s%s", version, core ? " " : "", core ? core : "");
}

const char *fb_blas_core_for_cpu(const char *core, bool narrow)
{
    if (!core)
        return NULL;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (narrow) /* an AVX2-only CPU's kernels: OpenBLAS's too */
        return avx2 && strcasecmp(core, "haswell") != 0 ? "Haswell" : NULL;
    if (strcasecmp(core, "prescott") != 0)
        return NULL;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (avx2)
        return "Haswell";
#else
    (void)narrow;
#endif
    return NULL;
}

void fb_blas_fix_core(char **argv)
{
    if (getenv("OPENBLAS_CORETYPE")) /* set by the user, or by the exec below */
        return;
    const char *core = openblas_get_corename();
    const char *want = fb_blas_core_for_cpu(core, fb_cpu_narrowed());
    char self[4096];
    /* the binary's own path, not /proc/self/exe: the process keeps its name
     * (comm is the executed file's name; ps, top and the tests read it) */
    ssize_t n = want ? readlink("/proc/self/exe", self, sizeof self - 1) : -1;
    if (n <= 0 || (size_t)n >= sizeof self - 1 || setenv("OPENBLAS_CORETYPE", want, 1) != 0)
        return;
    self[n] = '\0';
    execv(self, argv);
    fb_warn("OpenBLAS runs its %s kernels on a CPU that has %s's: cannot run again with "
            "OPENBLAS_CORETYPE=%s (%s: %s)",
            core, want, want, self, strerror(errno));
    unsetenv("OPENBLAS_CORETYPE");
}

/* The current GPU's name, UUID and stack versions; on failure the fields stay
 * empty (encoded as null) and the reason is logged: a result is still worth
 * keeping, and the device name "" keeps it out of other devices' histories. */
static void gpu_fields(fb_env *env)
{
    fb_gpu g;
    fb_err err;

    fb_err_clear(&err);
    if (fb_gpu_query(-1, &g, &err) != FB_OK) {
        fb_warn("environment: %s", err.msg);
        return;
    }
    snprintf(env->device_name, sizeof env->device_name, "%s", g.name);
    snprintf(env->device_uuid, sizeof env->device_uuid, "%s", g.uuid);
    snprintf(env->driver, sizeof env->driver, "%s", g.driver);
    snprintf(env->cuda, sizeof env->cuda, "%s", g.cuda);
    snprintf(env->cudnn, sizeof env->cudnn, "%s", g.cudnn);
    snprintf(env->cublas, sizeof env->cublas, "%s", g.cublas);
}

static double roof_gbps[2], roof_gflops[2]; /* [0] the CPU's, [1] the GPU's */

void fb_env_set_roofline(const char *device, double gbps, double gflops)
{
    bool gpu = device && strcmp(device, "cuda") == 0;
    roof_gbps[gpu] = gbps;
    roof_gflops[gpu] = gflops;
    fb_roofline_use(device, gbps, gflops); /* each launch's bound, at profile */
}

void fb_env_capture(fb_env *env, const char *device)
{
    memset(env, 0, sizeof *env);
    cpu_model(env->cpu, sizeof env->cpu);
    if (fb_cpu_narrowed()) { /* another machine's kernels: its own history series */
        size_t len = strlen(env->cpu);
        snprintf(env->cpu + len, sizeof env->cpu - len, " (kernels: avx2, %s)", FB_CPU_ISA_ENV);
    }
    blas_info(env->blas, sizeof env->blas);
    env->threads = omp_get_max_threads();
    snprintf(env->fusionbench, sizeof env->fusionbench, "%s", FB_GIT_SHA);
    if (gethostname(env->hostname, sizeof env->hostname) != 0)
        snprintf(env->hostname, sizeof env->hostname, "unknown");
    env->hostname[sizeof env->hostname - 1] = '\0';
    if (!device || strcmp(device, "cpu") == 0)
        snprintf(env->device_name, sizeof env->device_name, "%s", env->cpu);
    else if (strcmp(device, "cuda") == 0)
        gpu_fields(env);
    bool gpu = device && strcmp(device, "cuda") == 0; /* the job's device's roofline */
    if (gpu || !device || strcmp(device, "cpu") == 0) {
        env->roofline_gbps = roof_gbps[gpu];
        env->roofline_gflops = roof_gflops[gpu];
    }
}
