#include "fb_parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int fb_cli_bad_arg(const char *arg, const char *why)
{
    size_t n = arg ? strlen(arg) : 0;
    if (n == 0 || strncmp(why, arg, n) == 0) /* the message names it already */
        fprintf(stderr, "%s: %s\n", program_invocation_short_name, why);
    else
        fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, arg, why);
    return FB_EXIT_USAGE;
}

int fb_cli_parse_int(const char *arg, const char *s, int lo, int hi, int *out)
{
    char why[128];

    if (fb_parse_int(s, lo, hi, out))
        return 0;
    snprintf(why, sizeof why, "expected an integer in %d..%d, got '%.60s'", lo, hi, s);
    return fb_cli_bad_arg(arg, why);
}

bool fb_env_is_database(const char *kv)
{
    return strncmp(kv, "DATABASE_URL=", 13) == 0 ||
           (strncmp(kv, "PG", 2) == 0 && kv[2] >= 'A' && kv[2] <= 'Z');
}
