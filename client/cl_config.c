#include "cl_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

fb_code cl_config_dir(const char *xdg, const char *home, char *out, size_t cap, fb_err *err)
{
    int n;

    if (xdg && xdg[0] == '/')
        n = snprintf(out, cap, "%s/fusionbench", xdg);
    else if (home && home[0] == '/')
        n = snprintf(out, cap, "%s/.config/fusionbench", home);
    else
        return fb_err_set(err, FB_EINVAL, "config",
                          "neither XDG_CONFIG_HOME nor HOME is an absolute path");
    if (n < 0 || (size_t)n >= cap)
        return fb_err_set(err, FB_ETOOBIG, "config", "the config folder's path is too long");
    return FB_OK;
}

static fb_code file_path(const char *dir, char *out, size_t cap, fb_err *err)
{
    int n = snprintf(out, cap, "%s/config.json", dir);
    if (n < 0 || (size_t)n >= cap)
        return fb_err_set(err, FB_ETOOBIG, "config", "the config file's path is too long");
    return FB_OK;
}

/* Reads the whole file (at most CL_CONFIG_FILE_MAX) into a new string. */
static fb_code read_small(const char *path, char **out, fb_err *err)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n;
    fb_code rc = FB_OK;

    *out = NULL;
    if (!f)
        return fb_err_set(err, errno == ENOENT ? FB_ENOTFOUND : FB_EIO, "config", "%s: %s", path,
                          strerror(errno));
    buf = malloc(CL_CONFIG_FILE_MAX + 1);
    if (!buf) {
        rc = fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
        goto out;
    }
    n = fread(buf, 1, CL_CONFIG_FILE_MAX + 1, f);
    if (ferror(f))
        rc = fb_err_set(err, FB_EIO, "config", "%s: read error", path);
    else if (n > CL_CONFIG_FILE_MAX)
        rc = fb_err_set(err, FB_ETOOBIG, "config", "%s: over %d bytes", path, CL_CONFIG_FILE_MAX);
    if (rc == FB_OK) {
        buf[n] = '\0';
        *out = buf;
        buf = NULL;
    }
out:
    free(buf);
    fclose(f);
    return rc;
}

static fb_code copy_member(const cJSON *root, const char *key, char *out, size_t cap,
                           const char *path, fb_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);

    if (!cJSON_IsString(v) || !v->valuestring || strlen(v->valuestring) >= cap)
        return fb_err_set(err, FB_EINVAL, key, "%s: no valid \"%s\" (log in again)", path, key);
    snprintf(out, cap, "%s", v->valuestring);
    return FB_OK;
}

fb_code cl_config_load(const char *dir, cl_config *c, fb_err *err)
{
    char path[CL_CONFIG_PATH_MAX + 16], *text = NULL;
    cJSON *root = NULL;
    fb_code rc;

    memset(c, 0, sizeof *c);
    rc = file_path(dir, path, sizeof path, err);
    if (rc == FB_OK)
        rc = read_small(path, &text, err);
    if (rc)
        goto out;
    root = cJSON_Parse(text);
    if (!cJSON_IsObject(root)) {
        rc = fb_err_set(err, FB_EINVAL, "config", "%s: not a JSON object (log in again)", path);
        goto out;
    }
    rc = copy_member(root, "url", c->url, sizeof c->url, path, err);
    if (rc == FB_OK)
        rc = copy_member(root, "token", c->token, sizeof c->token, path, err);
out:
    cJSON_Delete(root);
    free(text);
    return rc;
}

/* mkdir with mode, then make sure of the mode (it may have existed). */
static fb_code make_dir(const char *path, mode_t mode, bool force_mode, fb_err *err)
{
    if (mkdir(path, mode) != 0 && errno != EEXIST)
        return fb_err_set(err, FB_EIO, "config", "mkdir %s: %s", path, strerror(errno));
    if (force_mode && chmod(path, mode) != 0)
        return fb_err_set(err, FB_EIO, "config", "chmod %s: %s", path, strerror(errno));
    return FB_OK;
}

static fb_code make_dirs(const char *dir, fb_err *err)
{
    char parent[CL_CONFIG_PATH_MAX];
    char *slash;
    fb_code rc = FB_OK;

    snprintf(parent, sizeof parent, "%s", dir);
    slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        rc = make_dir(parent, 0700, false, err);
    }
    return rc ? rc : make_dir(dir, 0700, true, err);
}

static fb_code write_all(int fd, const char *s, size_t n, const char *path, fb_err *err)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return fb_err_set(err, FB_EIO, "config", "write %s: %s", path, strerror(errno));
        s += w;
        n -= (size_t)w;
    }
    return FB_OK;
}

fb_code cl_config_save(const char *dir, const cl_config *c, fb_err *err)
{
    char path[CL_CONFIG_PATH_MAX + 16], tmp[CL_CONFIG_PATH_MAX + 32], *text = NULL;
    cJSON *root = cJSON_CreateObject();
    int fd = -1;
    fb_code rc = file_path(dir, path, sizeof path, err);

    if (rc == FB_OK)
        rc = make_dirs(dir, err);
    if (rc)
        goto out;
    if (!root || !cJSON_AddStringToObject(root, "url", c->url) ||
        !cJSON_AddStringToObject(root, "token", c->token) || !(text = cJSON_Print(root))) {
        rc = fb_err_set(err, FB_ENOMEM, NULL, "out of memory");
        goto out;
    }
    snprintf(tmp, sizeof tmp, "%s/.config.json.XXXXXX", dir);
    fd = mkstemp(tmp); /* 0600 */
    if (fd < 0) {
        rc = fb_err_set(err, FB_EIO, "config", "mkstemp in %s: %s", dir, strerror(errno));
        goto out;
    }
    rc = write_all(fd, text, strlen(text), tmp, err);
    if (rc == FB_OK)
        rc = write_all(fd, "\n", 1, tmp, err);
    if (rc == FB_OK && (fchmod(fd, 0600) != 0 || fsync(fd) != 0))
        rc = fb_err_set(err, FB_EIO, "config", "%s: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == FB_OK)
        rc = fb_err_set(err, FB_EIO, "config", "close %s: %s", tmp, strerror(errno));
    fd = -1;
    if (rc == FB_OK && rename(tmp, path) != 0)
        rc = fb_err_set(err, FB_EIO, "config", "rename to %s: %s", path, strerror(errno));
    if (rc)
        (void)unlink(tmp);
out:
    if (fd >= 0)
        close(fd);
    free(text);
    cJSON_Delete(root);
    return rc;
}

fb_code cl_config_remove(const char *dir, fb_err *err)
{
    char path[CL_CONFIG_PATH_MAX + 16];
    fb_code rc = file_path(dir, path, sizeof path, err);

    if (rc == FB_OK && unlink(path) != 0)
        rc = fb_err_set(err, errno == ENOENT ? FB_ENOTFOUND : FB_EIO, "config", "%s: %s", path,
                        strerror(errno));
    return rc;
}

bool cl_token_clean(char *t)
{
    size_t n = strlen(t);

    while (n > 0 && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' ' || t[n - 1] == '\t'))
        t[--n] = '\0';
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (t[i] < 0x21 || t[i] > 0x7e)
            return false;
    }
    return true;
}
