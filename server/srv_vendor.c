#include "srv_vendor.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef FB_CHARTJS_PATH
#define FB_CHARTJS_PATH "/usr/share/javascript/chart.js/chart.min.js"
#endif

#define VENDOR_FILE_MAX (8L * 1024 * 1024)

/* The file behind a vendor name, or NULL: only names listed here are served. */
static const char *vendor_path(const char *name)
{
    if (strcmp(name, "chart.min.js") == 0) {
        const char *env = getenv("FB_CHARTJS");
        return env && env[0] ? env : FB_CHARTJS_PATH;
    }
    return NULL;
}

void srv_vendor_file(srv_req *r)
{
    char name[64];
    const char *path;
    struct stat st;
    int fd;

    if (!srv_req_cap(r, 0, name, sizeof name) || !(path = vendor_path(name))) {
        srv_reply_error(r, 404, "not_found", NULL, "no such file");
        return;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > VENDOR_FILE_MAX) {
        if (fd >= 0)
            close(fd);
        srv_reply_error(r, 404, "not_found", NULL,
                        "%s is not installed (apt-get install libjs-chart.js)", name);
        return;
    }
    /* The response owns fd from here. */
    struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    if (!resp) {
        close(fd);
        srv_reply_error(r, 500, "internal", NULL, "cannot create response");
        return;
    }
    srv_reply_response(r, 200, "text/javascript; charset=utf-8", resp);
    srv_reply_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "max-age=86400");
}
