/* fb_log: one-line logs to stderr: "2026-11-22T10:00:00Z level component: message".
 * The level threshold comes from FUSIONBENCH_LOG (debug, info, warn, error). */
#ifndef FB_LOG_H
#define FB_LOG_H

#include "fb_err.h"

typedef enum { FB_LOG_DEBUG, FB_LOG_INFO, FB_LOG_WARN, FB_LOG_ERROR } fb_log_level;

void fb_log_init(const char *component);
void fb_log(fb_log_level level, const char *fmt, ...) FB_PRINTF(2, 3);

#define fb_debug(...) fb_log(FB_LOG_DEBUG, __VA_ARGS__)
#define fb_info(...)  fb_log(FB_LOG_INFO, __VA_ARGS__)
#define fb_warn(...)  fb_log(FB_LOG_WARN, __VA_ARGS__)
#define fb_error(...) fb_log(FB_LOG_ERROR, __VA_ARGS__)

#endif
