/* fb_clock: the one monotonic clock that the run loop, the native engine's
 * plan builds, explanations and cost planner read for elapsed time. */
#ifndef FB_CLOCK_H
#define FB_CLOCK_H

#include <time.h>

/* Milliseconds on CLOCK_MONOTONIC (not wall time: immune to clock steps), for
 * differences only. */
static inline double fb_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#endif
