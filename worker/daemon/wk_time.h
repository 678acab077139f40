/* wk_time: monotonic milliseconds and sleeps for the worker's timers. */
#ifndef WK_TIME_H
#define WK_TIME_H

#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds. */
int64_t wk_time_now_ms(void);

/* Sleeps ms milliseconds; returns early when a signal arrives (so a stop request
 * is seen at once). */
void wk_time_sleep_ms(int64_t ms);

/* The wall-clock (CLOCK_REALTIME) milliseconds since the epoch of a moment
 * given on the monotonic clock (wk_time_now_ms). */
int64_t wk_time_wall_ms(int64_t mono_ms);

/* Backoff for retries against an unreachable database: cur_ms doubled, at
 * most cap_ms. */
int64_t wk_time_backoff(int64_t cur_ms, int64_t cap_ms);

#endif
