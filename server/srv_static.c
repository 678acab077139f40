#include "srv_static.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fb_log.h"

#define STATIC_FILE_MAX (16L * 1024 * 1024) /* larger files are not ours to serve */

/* Opens web_dir/rel as a regular file (no symlink as the last component).
 * Returns the fd (caller closes) or -1, with *size set. */
static int open_web_file(const char *web_dir, const char *rel, off_t *size)
{
    char full[PATH_MAX];
    struct stat st;
    int fd, n = snprintf(full, sizeof full, "%s/%s", web_dir, rel);

    if (n < 0 || (size_t)n >= sizeof full)
        return -1;
    fd = open(full, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > STATIC_FILE_MAX) {
        close(fd);
        return -1;
    }
    *size = st.st_size;
    return fd;
}

/* Serves rel (already checked by srv_static_path_ok) from the web directory. */
static void serve(srv_req *r, const char *rel)
{
    const char *type = srv_content_type_for(rel);
    struct MHD_Response *resp;
    off_t size = 0;
    int fd;

    if (!type) {
        srv_reply_error(r, 404, "not_found", NULL, "no such file");
        return;
    }
    fd = open_web_file(r->srv->cfg.web_dir, rel, &size);
    if (fd < 0) {
        srv_reply_error(r, 404, "not_found", NULL, "no such file");
        return;
    }
    /* The response owns fd from here and closes it when sent. */
    resp = MHD_create_response_from_fd((uint64_t)size, fd);
    if (!resp) {
        close(fd);
        srv_reply_error(r, 500, "internal", NULL, "cannot create response");
        return;
    }
    srv_reply_response(r, 200, type, resp);
    srv_reply_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
}

void srv_static_index(srv_req *r)
{
    serve(r, "index.html");
}

void srv_static_openapi(srv_req *r)
{
    serve(r, "openapi.json");
}

void srv_static_file(srv_req *r)
{
    char rel[SRV_STATIC_MAX + 1];

    if (!srv_req_cap(r, 0, rel, sizeof rel) || !srv_static_path_ok(rel)) {
        srv_reply_error(r, 404, "not_found", NULL, "no such file");
        return;
    }
    serve(r, rel);
}
