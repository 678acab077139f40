#include "fb_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *log_component = "fusionbench";
static fb_log_level log_threshold = FB_LOG_INFO;

void fb_log_init(const char *component)
{
    const char *lvl = getenv("FUSIONBENCH_LOG");
    log_component = component;
    if (!lvl)
        return;
    if (strcmp(lvl, "debug") == 0)
        log_threshold = FB_LOG_DEBUG;
    else if (strcmp(lvl, "warn") == 0)
        log_threshold = FB_LOG_WARN;
    else if (strcmp(lvl, "error") == 0)
        log_threshold = FB_LOG_ERROR;
}

void fb_log(fb_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    char line[2048], stamp[32];
    struct timespec now;
    struct tm tm;
    va_list ap;

    if (level < log_threshold)
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(stamp + strlen(stamp), sizeof stamp - strlen(stamp), ".%03dZ",
             (int)(now.tv_nsec / 1000000));
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf per line so concurrent processes do not interleave mid-line. */
    fprintf(stderr, "%s %s %s: %s\n", stamp, names[level], log_component, line);
}
