/* wk_child_main: the body of a job's child process (see wk_child.h).  Nothing
 * here returns: the child ends with _exit, never running the parent's atexit
 * handlers or closing the parent's database connection politely. */
#include "wk_child_main.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "fb_engines.h"
#include "fb_log.h"
#include "fb_parse.h"
#include "fb_run.h"
#include "wk_child.h"

extern char **environ;

typedef struct child_io {
    int progress_fd, result_fd;
} child_io;

/* One JSON line per call; a full pipe drops the line rather than stall timing.
 * Phase and variant names are [a-z0-9_+.-] (fb_name_valid), so need no escaping. */
static void child_progress(void *ud, const char *phase, const char *variant, int done, int total)
{
    const child_io *io = ud;
    char line[WK_PROGRESS_MAX];
    int len;

    if (variant)
        len = snprintf(line, sizeof line,
                       "{\"phase\":\"%s\",\"variant\":\"%s\",\"done\":%d,\"total\":%d}\n", phase,
                       variant, done, total);
    else
        len = snprintf(line, sizeof line,
                       "{\"phase\":\"%s\",\"variant\":null,\"done\":%d,\"total\":%d}\n", phase,
                       done, total);
    if (len > 0 && (size_t)len < sizeof line)
        (void)!write(io->progress_fd, line, (size_t)len);
}

static int write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes {"error": {...}} and exits; 3 when even that fails. */
__attribute__((noreturn)) static void child_fail(const child_io *io, const char *code,
                                                 const char *msg)
{
    cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
    char *text;

    cJSON_AddStringToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", msg);
    text = cJSON_PrintUnformatted(root);
    if (!text || write_all(io->result_fd, text, strlen(text)) != 0)
        _exit(3);
    _exit(0);
}

__attribute__((noreturn)) static void child_fail_err(const child_io *io, const fb_err *err)
{
    char msg[FB_ERR_MSG_MAX + FB_ERR_FIELD_MAX + 8];

    /* Name the field unless the message already starts with it. */
    if (err->field[0] && strncmp(err->msg, err->field, strlen(err->field)) != 0)
        snprintf(msg, sizeof msg, "%s: %s", err->field, err->msg);
    else
        snprintf(msg, sizeof msg, "%s", err->msg);
    child_fail(io, fb_code_name(err->code), msg);
}

static cJSON *final_json(const fb_result *res)
{
    cJSON *root = cJSON_CreateObject(), *kernels = cJSON_AddObjectToObject(root, "kernels");

    if (!kernels || !cJSON_AddItemToObject(root, "result", fb_result_to_json(res))) {
        cJSON_Delete(root);
        return NULL;
    }
    for (int v = 0; v < res->n_variants; v++) {
        if (!cJSON_AddItemToObject(kernels, res->variants[v].name,
                                   fb_kernel_rows_to_json(&res->variants[v]))) {
            cJSON_Delete(root);
            return NULL;
        }
    }
    return root;
}

__attribute__((noreturn)) static void child_finish(const child_io *io, const fb_result *res)
{
    cJSON *root = final_json(res);
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    size_t len = text ? strlen(text) : 0;

    if (!text)
        child_fail(io, fb_code_name(FB_ENOMEM), "no memory to encode the result");
    if (len > (size_t)WK_RESULT_MAX)
        child_fail(io, fb_code_name(FB_ETOOBIG), "result JSON is over the size limit");
    if (write_all(io->result_fd, text, len) != 0)
        _exit(3);
    _exit(0);
}

/* Parses the stored spec, which got its defaults at submit (a spec without
 * them fails, naming the unset field), and checks this worker has its engine
 * and workload. */
static fb_code child_spec(const char *spec_json, const wk_config *cfg, fb_spec *spec, fb_err *err)
{
    const fb_engine *eng;
    fb_code rc = fb_spec_parse(spec_json, strlen(spec_json), spec, err);

    if (rc == FB_OK)
        rc = fb_spec_check_resolved(spec, err); /* its defaults came with it, from the submit */
    if (rc != FB_OK)
        return rc;
    eng = fb_engine_find(spec->engine);
    if (!eng)
        return fb_err_set(err, FB_EUNSUPPORTED, "engine", "engine '%s' is not in this worker",
                          spec->engine);
    const fb_workload_info *w = fb_engine_workload(eng, spec->device, spec->workload);
    if (!w)
        return fb_err_set(err, FB_EUNSUPPORTED, "workload", "unknown workload '%s' on %s",
                          spec->workload, spec->device);
    /* the server refused these at submit where the catalog it read declared
     * them; a job queued before (or from an older catalog) fails here */
    rc = fb_workload_params_check(w, spec->params, err);
    if (rc != FB_OK)
        return rc;
    /* --threads is the worker's default; a job that names params.threads wins. */
    if (cfg->threads > 0 && !cJSON_GetObjectItemCaseSensitive(spec->params, "threads") &&
        !cJSON_AddNumberToObject(spec->params, "threads", cfg->threads))
        return fb_err_set(err, FB_ENOMEM, NULL, "no memory for params.threads");
    return FB_OK;
}

/* A job's process needs no database, and an uploaded model's job reads what a
 * lab's user made (docs/API-EXTENSIONS.md, "Your own models"): it drops what
 * would reach the database, the variables (DATABASE_URL, libpq's PG*), the
 * URL in the worker's options, and every socket it inherited (the worker's
 * database connections); its pipes and files stay. */
static void child_forget_database(const wk_config *cfg)
{
    int socks[256], n = 0;
    DIR *d;
    struct dirent *e;

    /* out of environ, and their bytes wiped: the variables the process
     * started with live in the block /proc/PID/environ shows */
    int kept = 0;
    for (int i = 0; environ[i]; i++) {
        char *kv = environ[i];
        if (fb_env_is_database(kv))
            explicit_bzero(kv, strlen(kv));
        else
            environ[kept++] = kv;
    }
    environ[kept] = NULL;
    explicit_bzero((char *)cfg->database_url, sizeof cfg->database_url);
    d = opendir("/proc/self/fd");
    while (d && (e = readdir(d)) != NULL && n < (int)(sizeof socks / sizeof socks[0])) {
        struct stat st;
        int fd = atoi(e->d_name);
        if (fd >= 3 && fd != dirfd(d) && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
            socks[n++] = fd;
    }
    if (d)
        closedir(d);
    for (int i = 0; i < n; i++)
        close(socks[i]);
}

/* The child must die with its parent: PDEATHSIG, then a getppid check for a
 * parent that died before prctl ran. */
static void child_setup(const wk_config *cfg, pid_t parent, const child_io *io)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(4);
    /* Its own process group: a terminal's ^C reaches the worker, which decides.
     * A stop signal sent to every process of a Slurm step or a container reaches
     * this child too: ignored, since the worker decides whether the job drains
     * to its end or is released (and kills it with SIGKILL then). */
    (void)setpgid(0, 0);
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    (void)fcntl(io->progress_fd, F_SETFL, O_NONBLOCK);
    fb_log_init("fusionbench-worker-job");
    child_forget_database(cfg);
}

/* What RLIMIT_DATA counts (/proc/self/status's VmData), in bytes; -1 unknown. */
static long long data_bytes(void)
{
    char line[128];
    long long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");

    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmData: %lld kB", &kib) == 1)
            break;
    }
    if (f)
        fclose(f);
    return kib < 0 ? -1 : kib * 1024;
}

/* The job's memory budget: an allocation past it fails in this process (the
 * engine reports out_of_memory) instead of the machine's OOM killer picking a
 * victim.  The engine first maps what its libraries keep for the process
 * (fb_engine.warm); the limit is then what the process holds (those libraries
 * and the worker's state inherited at fork) plus the budget, so the budget
 * bounds the job's own data.  CPU only: the CUDA driver's own mappings are not
 * the job's data, and a GPU's memory is bounded by the GPU. */
static void child_budget(const wk_config *cfg, const fb_spec *spec)
{
    const fb_engine *eng = fb_engine_find(spec->engine);
    long long held;
    struct rlimit rl;

    if (cfg->job_memory_mib <= 0 || strcmp(cfg->device, "cpu") != 0)
        return;
    if (eng && eng->warm)
        eng->warm(spec);
    held = data_bytes();
    rl.rlim_cur = rl.rlim_max = (rlim_t)(held > 0 ? held : 0) + ((rlim_t)cfg->job_memory_mib << 20);
    if (setrlimit(RLIMIT_DATA, &rl) != 0)
        fb_warn("job memory budget: setrlimit: %s", strerror(errno));
}

void wk_child_main(const wk_config *cfg, const char *spec_json, pid_t parent, int progress_fd,
                   int result_fd)
{
    child_io io = {progress_fd, result_fd};
    fb_spec spec;
    fb_result res;
    fb_err err;

    child_setup(cfg, parent, &io);
    fb_err_clear(&err);
    fb_spec_init(&spec);
    if (child_spec(spec_json, cfg, &spec, &err) != FB_OK)
        child_fail_err(&io, &err);
    child_budget(cfg, &spec);
    if (fb_run_benchmark(&spec, child_progress, &io, &res, &err) != FB_OK)
        child_fail_err(&io, &err);
    child_finish(&io, &res);
}
