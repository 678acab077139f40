/* wk_opts: argument and environment parsing for fusionbench-worker. */
#include "wk_opts.h"
#include "fb_parse.h"
#include "wk_device.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: fusionbench-worker [--database-url URL] [--device cpu|cuda] [--gpu N]\n"
               "         [--id ID] [--heartbeat-ms 2000] [--stale-s 30] [--poll-ms 5000]\n"
               "         [--max-jobs N] [--exit-when-idle SECONDS] [--drain-grace SECONDS]\n"
               "         [--threads N] [--job-memory-mib N] [--model-cache DIR]\n"
               "         [--model-cache-mib 20480] [--prepare-timeout 600]\n"
               "Pulls benchmark jobs from the PostgreSQL queue and runs each in a child\n"
               "process.  DATABASE_URL, FUSIONBENCH_STALE_S and FUSIONBENCH_DRAIN_GRACE_S are\n"
               "read from the environment; arguments override them.\n"
               "\n"
               "Coming and going (docs/DEPLOY.md):\n"
               "  --max-jobs N             exit 0 after N jobs\n"
               "  --exit-when-idle S       exit 0 after S seconds with nothing to claim\n"
               "  --drain-grace S          SIGTERM/SIGINT: claim nothing more; a running job\n"
               "                           may finish within S seconds (default 0), else it is\n"
               "                           released to the queue (its attempt not counted);\n"
               "                           then exit 0.  A second signal releases at once.\n"
               "  POST /api/v1/workers/{id}/drain: claim nothing more, let the running job\n"
               "  finish (its own timeout bounds it), exit 0.\n"
               "--job-memory-mib N (--device cpu): a job's process may hold at most N MiB of\n"
               "data beyond what it holds at its start (RLIMIT_DATA; default 90%% of the\n"
               "machine's memory): a job past it fails alone, the worker goes on.\n"
               "--device cuda --gpu N: one worker per GPU; it holds GPU N exclusively (an\n"
               "advisory lock on its UUID) and its jobs see only that GPU.\n"
               "--stale-s S: a job whose heartbeat is S seconds old is rescued; a running\n"
               "job's lease is S/2 from each acknowledged heartbeat.  --heartbeat-ms is at\n"
               "most S/3 (default 2000 ms, or S/4 for a shorter S).\n"
               "Uploaded models (a worker with the inductor engine prepares them): their\n"
               "archives are copied from the database into --model-cache (default\n"
               "$FUSIONBENCH_MODEL_CACHE, else $XDG_CACHE_HOME or ~/.cache, /fusionbench/models),\n"
               "named by SHA-256, at most --model-cache-mib MiB (least recently used go\n"
               "first); reading one takes at most --prepare-timeout seconds and\n"
               "--job-memory-mib of data.\n"
               "Native CPU jobs plan fusion by measured cost (docs/EXPLAIN.md): decisions\n"
               "and the cost model's calibration are kept in $FUSIONBENCH_PLAN_CACHE (default\n"
               "$XDG_CACHE_HOME or ~/.cache, /fusionbench/plan-cache.json; \"off\": none),\n"
               "per machine and build; FUSIONBENCH_PLANNER=rules makes the fixed rules the\n"
               "default of jobs that name no params.planner.  FUSIONBENCH_NATIVE_ISA=avx2\n"
               "runs the native CPU kernels an AVX2-only CPU runs, on any CPU (the device\n"
               "name of its results says so; avx512 insists on the wide ones; auto).\n"
               "The inductor engine's probe (what the venv's torch offers) is kept in\n"
               "$FUSIONBENCH_PROBE_CACHE (default $XDG_CACHE_HOME or ~/.cache,\n"
               "/fusionbench/inductor-probe; \"off\": none) until that Python changes.\n");
}

static int copy_str(const char *arg, const char *v, char *dst, size_t cap)
{
    if (strlen(v) >= cap || v[0] == '\0')
        return fb_cli_bad_arg(arg, "empty or too long");
    snprintf(dst, cap, "%s", v);
    return 0;
}

static int set_device(const char *v, wk_config *cfg)
{
#ifndef FB_WORKER_CUDA
    if (strcmp(v, "cuda") == 0)
        return fb_cli_bad_arg("--device", "this worker was built without CUDA; use --device cpu");
#endif
    if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0)
        return fb_cli_bad_arg("--device", "expected cpu or cuda");
    return copy_str("--device", v, cfg->device, sizeof cfg->device);
}

static int apply(const char *name, const char *v, wk_config *cfg)
{
    if (strcmp(name, "--database-url") == 0)
        return copy_str(name, v, cfg->database_url, sizeof cfg->database_url);
    if (strcmp(name, "--device") == 0)
        return set_device(v, cfg);
    if (strcmp(name, "--id") == 0) {
        cfg->id_given = true;
        return copy_str(name, v, cfg->id, sizeof cfg->id);
    }
    if (strcmp(name, "--gpu") == 0)
        return fb_cli_parse_int(name, v, 0, 255, &cfg->gpu);
    if (strcmp(name, "--heartbeat-ms") == 0) {
        cfg->heartbeat_given = true;
        return fb_cli_parse_int(name, v, 50, 600000, &cfg->heartbeat_ms);
    }
    if (strcmp(name, "--stale-s") == 0)
        return fb_cli_parse_int(name, v, 1, 86400, &cfg->stale_s);
    if (strcmp(name, "--poll-ms") == 0)
        return fb_cli_parse_int(name, v, 10, 600000, &cfg->poll_ms);
    if (strcmp(name, "--max-jobs") == 0)
        return fb_cli_parse_int(name, v, 1, 1000000000, &cfg->max_jobs);
    if (strcmp(name, "--exit-when-idle") == 0)
        return fb_cli_parse_int(name, v, 1, 86400 * 365, &cfg->exit_when_idle_s);
    if (strcmp(name, "--drain-grace") == 0)
        return fb_cli_parse_int(name, v, 0, 86400, &cfg->drain_grace_s);
    if (strcmp(name, "--job-memory-mib") == 0)
        return fb_cli_parse_int(name, v, 0, 1 << 30, &cfg->job_memory_mib);
    if (strcmp(name, "--model-cache") == 0)
        return copy_str(name, v, cfg->model_cache, sizeof cfg->model_cache);
    if (strcmp(name, "--model-cache-mib") == 0)
        return fb_cli_parse_int(name, v, 1, 1 << 30, &cfg->model_cache_mib);
    if (strcmp(name, "--prepare-timeout") == 0)
        return fb_cli_parse_int(name, v, 10, 86400, &cfg->prepare_timeout_s);
    if (strcmp(name, "--threads") == 0)
        return fb_cli_parse_int(name, v, 1, 1024, &cfg->threads);
    return fb_cli_bad_arg(name, "unknown option (see --help)");
}

static int from_env(wk_config *cfg)
{
    const char *url = getenv("DATABASE_URL"), *stale = getenv("FUSIONBENCH_STALE_S");
    const char *grace = getenv("FUSIONBENCH_DRAIN_GRACE_S");

    if (url && url[0] && copy_str("DATABASE_URL", url, cfg->database_url, sizeof cfg->database_url))
        return WK_EXIT_USAGE;
    if (stale && stale[0] &&
        fb_cli_parse_int("FUSIONBENCH_STALE_S", stale, 1, 86400, &cfg->stale_s))
        return WK_EXIT_USAGE;
    const char *mem = getenv("FUSIONBENCH_JOB_MEMORY_MIB");
    const char *cache = getenv("FUSIONBENCH_MODEL_CACHE");
    if (cache && cache[0] &&
        copy_str("FUSIONBENCH_MODEL_CACHE", cache, cfg->model_cache, sizeof cfg->model_cache))
        return WK_EXIT_USAGE;
    if (grace && grace[0] &&
        fb_cli_parse_int("FUSIONBENCH_DRAIN_GRACE_S", grace, 0, 86400, &cfg->drain_grace_s))
        return WK_EXIT_USAGE;
    if (mem && mem[0])
        return fb_cli_parse_int("FUSIONBENCH_JOB_MEMORY_MIB", mem, 0, 1 << 30,
                                &cfg->job_memory_mib);
    return 0;
}

/* 90% of MemTotal in MiB, or 0 (no limit) when /proc/meminfo is unreadable. */
static int default_job_memory_mib(void)
{
    int64_t bytes = wk_device_mem_total();
    return bytes > 0 ? (int)(bytes / (1024 * 1024) * 9 / 10) : 0;
}

/* $XDG_CACHE_HOME/fusionbench/models, else ~/.cache/fusionbench/models, else
 * a folder of this user's under /tmp. */
static void default_model_cache(char *dst, size_t cap)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");

    if (xdg && xdg[0] == '/')
        snprintf(dst, cap, "%s/fusionbench/models", xdg);
    else if (home && home[0] == '/')
        snprintf(dst, cap, "%s/.cache/fusionbench/models", home);
    else
        snprintf(dst, cap, "/tmp/fusionbench-models-%ld", (long)getuid());
}

static void defaults(wk_config *cfg)
{
    char host[64] = "localhost";

    memset(cfg, 0, sizeof *cfg);
    cfg->job_memory_mib = default_job_memory_mib();
    snprintf(cfg->device, sizeof cfg->device, "cpu");
    cfg->heartbeat_ms = 2000;
    cfg->stale_s = 30;
    cfg->poll_ms = 5000;
    cfg->model_cache_mib = 20480;
    cfg->prepare_timeout_s = 600;
    default_model_cache(cfg->model_cache, sizeof cfg->model_cache);
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    snprintf(cfg->id, sizeof cfg->id, "%s/cpu0", host);
}

/* "<hostname>/gpu<N>": one worker per GPU, so the index names it. */
static void default_gpu_id(wk_config *cfg)
{
    char host[64] = "localhost";

    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    snprintf(cfg->id, sizeof cfg->id, "%s/gpu%d", host, cfg->gpu);
}

int wk_opts_parse(int argc, char **argv, wk_config *cfg)
{
    int rc;

    defaults(cfg);
    rc = from_env(cfg);
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        char name[64];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return -1;
        }
        if (strncmp(a, "--", 2) != 0 || (eq && (size_t)(eq - a) >= sizeof name))
            return fb_cli_bad_arg(a, "unexpected argument (see --help)");
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        if (!eq && i + 1 >= argc)
            return fb_cli_bad_arg(a, "needs a value");
        rc = apply(name, eq ? eq + 1 : argv[++i], cfg);
    }
    if (rc == 0 && !cfg->id_given && strcmp(cfg->device, "cuda") == 0)
        default_gpu_id(cfg);
    /* A running job's lease is stale-s/2 from each acknowledged heartbeat
     * (wk_job.c): heartbeats come at least three times a stale-s, so one that
     * is late by a third of it still renews the lease in time.  Not given, the
     * period follows a short --stale-s (a quarter of it). */
    if (rc == 0 && !cfg->heartbeat_given && cfg->heartbeat_ms * 4 > cfg->stale_s * 1000)
        cfg->heartbeat_ms = cfg->stale_s * 1000 / 4 < 50 ? 50 : cfg->stale_s * 1000 / 4;
    if (rc == 0 && cfg->heartbeat_ms * 3 > cfg->stale_s * 1000)
        rc = fb_cli_bad_arg("--heartbeat-ms",
                            "must be at most a third of --stale-s: a running job's lease is half "
                            "of --stale-s from each acknowledged heartbeat");
    return rc;
}

int wk_io_timeout_ms(const wk_config *cfg)
{
    int ms = cfg->stale_s * 250;
    return ms < 1000 ? 1000 : ms > 10000 ? 10000 : ms;
}
