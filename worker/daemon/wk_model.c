/* wk_model: preparing uploaded models (see wk_model.h). */
#include "wk_model.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <cjson/cJSON.h>

#include "db_models.h"
#include "fb_engines.h"
#include "fb_log.h"
#include "wk_device.h"
#include "wk_state.h"
#include "wk_time.h"

#define PREP_MAX_ATTEMPTS 3
#define CACHE_MAX_FILES   4096

/* ---- the cache ---- */

static bool hex64(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++) {
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return false;
    }
    return n == 2 * DB_SHA256_LEN;
}

fb_code wk_model_cache_path(const char *dir, const char *sha_hex, const char *ext, char *path,
                            size_t cap, fb_err *err)
{
    if (!hex64(sha_hex))
        return fb_err_set(err, FB_EINTERNAL, NULL, "a stored archive's SHA-256 is not 64 hex");
    if ((size_t)snprintf(path, cap, "%s/%s%s", dir, sha_hex, ext) >= cap)
        return fb_err_set(err, FB_EINVAL, "model-cache", "the model cache's path is too long");
    return FB_OK;
}

/* mkdir -p dir, 0700 for what it makes. */
static fb_code make_dir(const char *dir, fb_err *err)
{
    char buf[WK_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1;; p++) {
        bool end = *p == '\0';
        if (*p == '/' || end) {
            *p = '\0';
            if (mkdir(buf, 0700) != 0 && errno != EEXIST)
                return fb_err_set(err, FB_EIO, "model-cache", "%s: %s", buf, strerror(errno));
            if (end)
                break;
            *p = '/';
        }
    }
    return FB_OK;
}

typedef struct cached {
    char name[80];
    int64_t size;
    struct timespec mtime;
} cached;

static int older_first(const void *a, const void *b)
{
    const struct timespec *x = &((const cached *)a)->mtime, *y = &((const cached *)b)->mtime;
    if (x->tv_sec != y->tv_sec)
        return x->tv_sec < y->tv_sec ? -1 : 1;
    return x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec;
}

fb_code wk_model_cache_trim(const char *dir, int64_t cap_bytes, int64_t need, const char *keep,
                            fb_err *err)
{
    static cached files[CACHE_MAX_FILES];
    int n = 0;
    int64_t total = 0;
    DIR *d;
    struct dirent *e;

    if (need > cap_bytes)
        return fb_err_set(err, FB_ETOOBIG, "model-cache",
                          "the archive (%" PRId64 " MiB) is larger than this worker's model cache "
                          "(--model-cache-mib %" PRId64 ")",
                          need >> 20, cap_bytes >> 20);
    d = opendir(dir);
    if (!d)
        return fb_err_set(err, FB_EIO, "model-cache", "%s: %s", dir, strerror(errno));
    while ((e = readdir(d)) != NULL && n < CACHE_MAX_FILES) {
        size_t len = strlen(e->d_name);
        struct stat st;
        if (len < 5 || len >= sizeof files[0].name || e->d_name[0] == '.' ||
            (strcmp(e->d_name + len - 4, WK_MODEL_ARCHIVE) != 0 &&
             strcmp(e->d_name + len - 4, WK_MODEL_FORM) != 0) ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        snprintf(files[n].name, sizeof files[n].name, "%s", e->d_name);
        files[n].size = (int64_t)st.st_size;
        files[n].mtime = st.st_mtim;
        total += files[n].size;
        n++;
    }
    qsort(files, (size_t)n, sizeof files[0], older_first);
    for (int i = 0; i < n && total + need > cap_bytes; i++) {
        if (keep && strcmp(files[i].name, keep) == 0)
            continue;
        if (unlinkat(dirfd(d), files[i].name, 0) == 0) {
            total -= files[i].size;
            fb_info("model cache: removed %s (%" PRId64 " MiB, least recently used)", files[i].name,
                    files[i].size >> 20);
        }
    }
    closedir(d);
    return FB_OK;
}

/* ---- the lease ---- */

typedef struct prep_run {
    wk_ctx *ctx;
    db_model_prep mp;
    int64_t next_beat_ms;
    bool lost; /* the lease went to someone else */
} prep_run;

/* Renews the model's lease and the worker's heartbeat when due. */
static void beat(void *ud)
{
    prep_run *r = ud;
    int64_t now = wk_time_now_ms();
    bool drain = false;
    fb_err err;

    if (now < r->next_beat_ms)
        return;
    r->next_beat_ms = now + r->ctx->cfg->heartbeat_ms;
    fb_err_clear(&err);
    if (db_model_prepare_heartbeat(r->ctx->db, r->mp.id, r->mp.attempt, &err) == FB_ESTALE)
        r->lost = true;
    fb_err_clear(&err);
    if (db_worker_heartbeat(r->ctx->db, r->ctx->cfg->id, "busy", 0, &drain, &err) == FB_OK)
        wk_state_drain_asked(drain);
}

/* ---- copying the archive ---- */

/* Writes the blob's chunks to fd, hashing them; checks size and digest;
 * tick(ud) before each chunk. */
static fb_code copy_chunks(wk_ctx *ctx, const db_model_prep *mp, int fd, void (*tick)(void *),
                           void *ud, fb_err *err)
{
    static unsigned char buf[DB_MODEL_CHUNK];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    char hex[2 * DB_SHA256_LEN + 1];
    int64_t got = 0;
    int chunks = (int)((mp->size + DB_MODEL_CHUNK - 1) / DB_MODEL_CHUNK);
    EVP_MD_CTX *h = EVP_MD_CTX_new();
    fb_code rc = FB_OK;

    if (!h || EVP_DigestInit_ex(h, EVP_sha256(), NULL) != 1)
        rc = fb_err_set(err, FB_ENOMEM, NULL, "SHA-256 context");
    for (int seq = 0; rc == FB_OK && seq < chunks; seq++) {
        size_t n = 0;
        tick(ud);
        rc = db_model_chunk_read(ctx->db, mp->blob_id, seq, buf, sizeof buf, &n, err);
        if (rc == FB_OK && EVP_DigestUpdate(h, buf, n) != 1)
            rc = fb_err_set(err, FB_EINTERNAL, NULL, "SHA-256 update");
        for (size_t off = 0; rc == FB_OK && off < n;) {
            ssize_t w = write(fd, buf + off, n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                rc = fb_err_set(err, FB_EIO, "model-cache", "writing the archive: %s",
                                strerror(errno));
            else
                off += (size_t)w;
        }
        got += (int64_t)n;
    }
    if (rc == FB_OK && EVP_DigestFinal_ex(h, md, &md_len) != 1)
        rc = fb_err_set(err, FB_EINTERNAL, NULL, "SHA-256 final");
    EVP_MD_CTX_free(h);
    if (rc != FB_OK)
        return rc;
    for (unsigned i = 0; i < md_len && i < DB_SHA256_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    if (got != mp->size || strcmp(hex, mp->sha256) != 0)
        return fb_err_set(err, FB_EINVAL, NULL,
                          "the stored archive is damaged: %" PRId64 " bytes with SHA-256 %.12s..., "
                          "where %" PRId64 " bytes with %.12s... were uploaded",
                          got, hex, mp->size, mp->sha256);
    if (fsync(fd) != 0)
        return fb_err_set(err, FB_EIO, "model-cache", "fsync: %s", strerror(errno));
    return FB_OK;
}

/* The archive's file in the cache: there already (touched: used now), or
 * copied from the database under a temporary name and renamed once whole
 * and checked. */
static fb_code fetch(wk_ctx *ctx, const db_model_prep *mp, const char *ext, void (*tick)(void *),
                     void *ud, char *path, size_t cap, fb_err *err)
{
    const wk_config *cfg = ctx->cfg;
    char tmp[WK_PATH_MAX + 32], name[80];
    struct stat st;
    fb_code rc = wk_model_cache_path(cfg->model_cache, mp->sha256, ext, path, cap, err);

    if (rc == FB_OK)
        rc = make_dir(cfg->model_cache, err);
    if (rc != FB_OK)
        return rc;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == mp->size) {
        (void)utimensat(AT_FDCWD, path, NULL, 0);
        return FB_OK;
    }
    snprintf(name, sizeof name, "%s%s", mp->sha256, ext);
    rc = wk_model_cache_trim(cfg->model_cache, (int64_t)cfg->model_cache_mib << 20, mp->size, name,
                             err);
    if (rc != FB_OK)
        return rc;
    snprintf(tmp, sizeof tmp, "%s/.%s.%ld.part", cfg->model_cache, mp->sha256, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return fb_err_set(err, FB_EIO, "model-cache", "%s: %s", tmp, strerror(errno));
    rc = copy_chunks(ctx, mp, fd, tick, ud, err);
    if (close(fd) != 0 && rc == FB_OK)
        rc = fb_err_set(err, FB_EIO, "model-cache", "close: %s", strerror(errno));
    if (rc == FB_OK && rename(tmp, path) != 0)
        rc = fb_err_set(err, FB_EIO, "model-cache", "rename: %s", strerror(errno));
    if (rc != FB_OK)
        (void)unlink(tmp);
    return rc;
}

/* ---- one model ---- */

/* Whether this worker serves the engine that reads uploads. */
static const fb_engine *reader_served(void)
{
    const fb_engine *e = fb_model_reader();
    int n = 0;
    const char *const *served = wk_device_engines(&n);

    for (int i = 0; e && i < n; i++) {
        if (strcmp(served[i], e->name) == 0)
            return e;
    }
    return NULL;
}

static void finish(prep_run *r, bool ready, const char *detail)
{
    fb_err err;

    fb_err_clear(&err);
    if (db_model_prepare_finish(r->ctx->db, r->mp.id, r->mp.attempt, ready, ready ? NULL : detail,
                                ready ? detail : NULL, &err) != FB_OK)
        fb_warn("model %" PRId64 ": its result not stored: %s", r->mp.id, err.msg);
    else if (ready)
        fb_info("model %" PRId64 ": ready", r->mp.id);
    else
        fb_info("model %" PRId64 ": invalid: %s", r->mp.id, detail);
}

/* The native form the engine wrote at tmp, stored in the database in the
 * transaction that ends the attempt ready (db_model_form_*: the model's row
 * locked meanwhile, so the lease needs no heartbeat), its size and digest
 * added to the info (info.native.form); then the file is the cache's, named
 * by its digest, for this worker's native jobs.  A failure leaves the lease
 * to lapse (the database) or ends the model ready without a form (the file
 * could not be read, or is over the cache). */
static void store_form(prep_run *r, const char *tmp, const char *detail)
{
    static unsigned char buf[DB_MODEL_CHUNK];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    char hex[2 * DB_SHA256_LEN + 1] = "", path[WK_PATH_MAX + 80], *info_text = NULL;
    db_model_upload u = {0};
    struct stat st;
    EVP_MD_CTX *h = EVP_MD_CTX_new();
    int fd = open(tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    bool open_tx = false;
    fb_err err;
    fb_code rc = FB_OK;

    fb_err_clear(&err);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc =
            fb_err_set(&err, FB_EIO, "model-cache", "the native form %s: %s", tmp, strerror(errno));
    else if (st.st_size > ((int64_t)r->ctx->cfg->model_cache_mib << 20))
        rc = fb_err_set(&err, FB_ETOOBIG, "model-cache",
                        "the native form (%lld MiB) is over this worker's model cache",
                        (long long)(st.st_size >> 20));
    if (rc == FB_OK && (!h || EVP_DigestInit_ex(h, EVP_sha256(), NULL) != 1))
        rc = fb_err_set(&err, FB_ENOMEM, NULL, "SHA-256 context");
    if (rc == FB_OK) {
        rc = db_model_form_begin(r->ctx->db, &u, r->mp.id, r->mp.attempt, &err);
        open_tx = rc == FB_OK;
    }
    while (rc == FB_OK) {
        size_t n = 0;
        while (n < sizeof buf) {
            ssize_t got = read(fd, buf + n, sizeof buf - n);
            if (got < 0 && errno == EINTR)
                continue;
            if (got < 0)
                rc = fb_err_set(&err, FB_EIO, "model-cache", "reading the native form: %s",
                                strerror(errno));
            if (got <= 0)
                break;
            n += (size_t)got;
        }
        if (rc != FB_OK || n == 0)
            break;
        if (EVP_DigestUpdate(h, buf, n) != 1)
            rc = fb_err_set(&err, FB_EINTERNAL, NULL, "SHA-256 update");
        else
            rc = db_model_upload_chunk(r->ctx->db, &u, buf, n, &err);
    }
    if (rc == FB_OK && EVP_DigestFinal_ex(h, md, &md_len) != 1)
        rc = fb_err_set(&err, FB_EINTERNAL, NULL, "SHA-256 final");
    for (unsigned i = 0; rc == FB_OK && i < md_len && i < DB_SHA256_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    if (rc == FB_OK) {
        cJSON *info = cJSON_Parse(detail);
        cJSON *native = cJSON_GetObjectItemCaseSensitive(info, "native");
        cJSON *f = cJSON_IsObject(native) ? cJSON_AddObjectToObject(native, "form") : NULL;
        if (!f || !cJSON_AddNumberToObject(f, "bytes", (double)u.stored) ||
            !cJSON_AddStringToObject(f, "sha256", hex) ||
            !(info_text = cJSON_PrintUnformatted(info)))
            rc = fb_err_set(&err, FB_ENOMEM, NULL, "no memory for the model's info");
        cJSON_Delete(info);
    }
    if (rc == FB_OK)
        rc = db_model_form_finish(r->ctx->db, &u, md, r->mp.id, r->mp.attempt, info_text, &err);
    else if (open_tx)
        db_model_upload_abort(r->ctx->db);
    EVP_MD_CTX_free(h);
    if (fd >= 0)
        close(fd);
    free(info_text);
    if (rc == FB_OK) {
        fb_info("model %" PRId64 ": ready, its native form stored (%" PRId64 " bytes, %.12s...)",
                r->mp.id, u.stored, hex);
        if (wk_model_cache_path(r->ctx->cfg->model_cache, hex, WK_MODEL_FORM, path, sizeof path,
                                &err) == FB_OK &&
            rename(tmp, path) == 0)
            (void)utimensat(AT_FDCWD, path, NULL, 0);
    } else if (rc == FB_ESTALE) {
        fb_warn("model %" PRId64 ": the lease went to another worker; its answer dropped",
                r->mp.id);
    } else if (rc == FB_EIO || rc == FB_ETOOBIG) { /* this host's: ready without the form */
        fb_warn("model %" PRId64 ": its native form not stored: %s", r->mp.id, err.msg);
        finish(r, true, detail);
    } else { /* the database: the lease lapses and another attempt tries again */
        fb_warn("model %" PRId64 ": its native form not stored: %s", r->mp.id, err.msg);
    }
}

bool wk_model_prepare_one(wk_ctx *ctx)
{
    const fb_engine *reader = reader_served();
    prep_run r = {.ctx = ctx};
    char path[WK_PATH_MAX + 80], form[WK_PATH_MAX + 96], why[FB_ERR_MSG_MAX + 64];
    char *detail = NULL;
    bool ready = false;
    fb_err err;
    fb_code rc;

    if (!reader || wk_state_draining())
        return false;
    fb_err_clear(&err);
    rc = db_model_prepare_claim(ctx->db, ctx->cfg->id, ctx->cfg->stale_s, PREP_MAX_ATTEMPTS, &r.mp,
                                &err);
    if (rc != FB_OK) {
        if (rc != FB_ENOTFOUND)
            fb_warn("claiming a model to prepare: %s", err.msg);
        return false;
    }
    fb_info("model %" PRId64 ": preparing (attempt %d, %" PRId64 " bytes, sha256 %.12s...)",
            r.mp.id, r.mp.attempt, r.mp.size, r.mp.sha256);
    r.next_beat_ms = wk_time_now_ms() + ctx->cfg->heartbeat_ms;
    rc = fetch(ctx, &r.mp, WK_MODEL_ARCHIVE, beat, &r, path, sizeof path, &err);
    if (rc == FB_EINVAL || rc == FB_ETOOBIG) { /* damaged, or never fits here */
        finish(&r, false, err.msg);
        return true;
    }
    if (rc != FB_OK) { /* the database or this host's disk: the lease lapses, and the
                          next attempt (this worker's or another's) tries again */
        fb_warn("model %" PRId64 ": its archive not copied: %s", r.mp.id, err.msg);
        return true;
    }
    snprintf(form, sizeof form, "%s/.%s.%ld.form.part", ctx->cfg->model_cache, r.mp.sha256,
             (long)getpid());
    (void)unlink(form);
    rc = reader->inspect_model(path, form, ctx->cfg->prepare_timeout_s, ctx->cfg->job_memory_mib,
                               beat, &r, &ready, &detail, &err);
    if (r.lost) {
        fb_warn("model %" PRId64 ": the lease went to another worker; its answer dropped", r.mp.id);
    } else if (rc == FB_OK && ready && access(form, F_OK) == 0) {
        store_form(&r, form, detail);
    } else if (rc == FB_OK) {
        finish(&r, ready, detail);
    } else {
        snprintf(why, sizeof why, "reading the archive failed: %s", err.msg);
        finish(&r, false, why);
    }
    (void)unlink(form);
    free(detail);
    return true;
}

fb_code wk_model_file_path(wk_ctx *ctx, int64_t model_id, bool form, void (*tick)(void *ud),
                           void *ud, char *path, size_t cap, fb_err *err)
{
    db_model_prep mp;
    fb_code rc = form ? db_model_form(ctx->db, model_id, &mp, err)
                      : db_model_archive(ctx->db, model_id, &mp, err);

    if (rc == FB_OK)
        rc = fetch(ctx, &mp, form ? WK_MODEL_FORM : WK_MODEL_ARCHIVE, tick, ud, path, cap, err);
    return rc;
}
