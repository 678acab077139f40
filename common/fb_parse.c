#include "fb_parse.h"

#include <errno.h>
#include <stdlib.h>

bool fb_parse_int(const char *s, int lo, int hi, int *out)
{
    char *end = NULL;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}
