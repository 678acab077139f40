/* gr_files: see gr_files.h. */
#include "gr_files.h"
#include "fb_spec.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef FB_DATA_DIR
#define FB_DATA_DIR "data"
#endif

const char *gr_files_dir(void)
{
    static char dflt[1024];
    const char *d = getenv("FUSIONBENCH_WEIGHTS_DIR"), *data = getenv("FB_DATA_DIR");

    if (d && *d)
        return d;
    snprintf(dflt, sizeof dflt, "%s/weights", data && *data ? data : FB_DATA_DIR);
    return dflt;
}

/* Walks name's components from dirfd, never following a link; the last one
 * must be a regular file.  Returns its descriptor or -1; closes dirfd. */
static int walk(int dirfd, const char *name)
{
    char comp[GR_FILES_NAME_MAX + 1];
    const char *p = name;

    while (dirfd >= 0) {
        size_t n = strcspn(p, "/");
        bool last = p[n] == '\0';
        memcpy(comp, p, n);
        comp[n] = '\0';
        int fd = openat(dirfd, comp,
                        O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (last ? O_NONBLOCK : O_DIRECTORY));
        close(dirfd);
        if (last) {
            struct stat sb;
            if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
                close(fd);
                fd = -1;
            }
            return fd;
        }
        dirfd = fd;
        p += n + 1;
    }
    return -1;
}

fb_code gr_files_open(const char *name, const char *field, int *fd, fb_err *err)
{
    *fd = -1;
    fb_code rc = fb_spec_check_file_name(name, field, err);
    if (rc)
        return rc;
    *fd = walk(open(gr_files_dir(), O_RDONLY | O_CLOEXEC | O_DIRECTORY), name);
    if (*fd < 0)
        return fb_err_set(err, FB_EINVAL, field,
                          "no readable file '%s' in the worker's weights folder", name);
    return FB_OK;
}
