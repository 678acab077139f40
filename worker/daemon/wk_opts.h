/* wk_opts: fusionbench-worker's configuration, from arguments and environment. */
#ifndef WK_OPTS_H
#define WK_OPTS_H

#include <stdbool.h>

#include "fb_parse.h"

#define WK_URL_MAX    1024
#define WK_ID_MAX     128
#define WK_PATH_MAX   1024
#define WK_EXIT_USAGE FB_EXIT_USAGE

typedef struct wk_config {
    char database_url[WK_URL_MAX]; /* "" = libpq's own defaults (PGHOST, ...) */
    char device[16];               /* "cpu", or "cuda" in a build with CUDA */
    int gpu;                       /* GPU index for --device cuda */
    char id[WK_ID_MAX];            /* "<hostname>/cpu0" or "<hostname>/gpuN" unless --id */
    bool id_given;                 /* --id was passed */
    bool heartbeat_given;          /* --heartbeat-ms was passed */
    int heartbeat_ms;              /* job and worker heartbeat period */
    int stale_s;                   /* rescuer: a running job this quiet is requeued */
    int poll_ms;                   /* idle wait for NOTIFY before claiming again */
    int max_jobs;                  /* 0 = no limit */
    int exit_when_idle_s;          /* 0 = never; else exit after this long with no job */
    int drain_grace_s;             /* after SIGTERM, how long a running job may still run */
    int job_memory_mib;            /* --device cpu: a job's data limit (RLIMIT_DATA); 0 = none */
    int threads;                   /* 0 = OpenMP's default */
    char model_cache[WK_PATH_MAX]; /* where uploaded models' archives are kept, by SHA-256 */
    int model_cache_mib;           /* the most that folder holds (least recently used go) */
    int prepare_timeout_s;         /* reading one uploaded model, at most */
} wk_config;

/* Fills cfg from the defaults, then DATABASE_URL, FUSIONBENCH_STALE_S,
 * FUSIONBENCH_DRAIN_GRACE_S, FUSIONBENCH_JOB_MEMORY_MIB and
 * FUSIONBENCH_MODEL_CACHE, then
 * the arguments (arguments win).  Returns 0, or WK_EXIT_USAGE after printing a
 * message naming the bad argument; -1 when --help was printed (exit 0). */
int wk_opts_parse(int argc, char **argv, wk_config *cfg);

/* How long the worker's database sessions wait on a silent peer before they
 * count as broken (db_connect_io): a quarter of stale-s, within 1 to 10 s. */
int wk_io_timeout_ms(const wk_config *cfg);

#endif
