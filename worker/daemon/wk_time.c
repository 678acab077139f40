#include "wk_time.h"

#include <time.h>

int64_t wk_time_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void wk_time_sleep_ms(int64_t ms)
{
    struct timespec ts;

    if (ms <= 0)
        return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    /* EINTR ends the sleep on purpose: the caller re-checks its stop flag. */
    (void)nanosleep(&ts, NULL);
}

int64_t wk_time_wall_ms(int64_t mono_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - (wk_time_now_ms() - mono_ms);
}

int64_t wk_time_backoff(int64_t cur_ms, int64_t cap_ms)
{
    int64_t next = cur_ms * 2;
    return next > cap_ms ? cap_ms : next;
}
