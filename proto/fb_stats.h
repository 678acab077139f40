/* fb_stats: latency statistics (METHOD.md) and the significance tests of its
 * regression rule.  Pure functions on arrays of samples; shared by the run
 * library (worker) and the server (history and regression flags). */
#ifndef FB_STATS_H
#define FB_STATS_H

#include <stdbool.h>

#include "fb_result.h"

/* Median, mean, stdev (sample, n-1), min, max, p90 (linear interpolation between
 * order statistics, as numpy's default), cv = stdev/mean, and the 95% CI of the
 * median from order statistics (binomial ranks; for n < 6 the CI is [min, max]).
 * samples is not modified.  n >= 1. */
void fb_stats_compute(const double *samples, int n, fb_stats *out);

/* The distribution-free CI of the median at level (0.95, 0.99, ...) from order
 * statistics; [min, max] when n is too small for any narrower pair.  samples is
 * not modified.  false when n < 1, level is outside (0, 1) or on ENOMEM. */
FB_MUSTCHECK bool fb_stats_median_ci(const double *samples, int n, double level, double *lo,
                                     double *hi);

/* Mann-Whitney U two-sided p-value (normal approximation with tie correction). */
double fb_mann_whitney_p(const double *a, int na, const double *b, int nb);

#endif
