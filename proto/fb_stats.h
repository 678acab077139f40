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

/* Resamples of the speedup's bootstrap; the speedup's noise threshold (a
 * significant change smaller than this is reported as no difference, as
 * criterion does); the CV past which a variant's timing is unstable, per
 * device kind (METHOD.md in docs/). */
#define FB_BOOTSTRAP_RESAMPLES     2000
#define FB_BOOTSTRAP_RESAMPLES_MIN 200
#define FB_BOOTSTRAP_DRAWS_MAX     20000000LL /* resamples x samples, the cost's bound */
#define FB_NOISE_THRESHOLD         0.01
#define FB_UNSTABLE_CV_CPU         0.10
#define FB_UNSTABLE_CV_GPU         0.05

/* The speedup median(base) / median(var) and its percentile bootstrap CI at
 * level: FB_BOOTSTRAP_RESAMPLES resamples (fewer past FB_BOOTSTRAP_DRAWS_MAX
 * draws in all, at least FB_BOOTSTRAP_RESAMPLES_MIN) with replacement of each side, the
 * ratio of their medians each time.  Deterministic (a fixed seed): the same
 * samples give the same interval.  false when a side has fewer than 2
 * samples, a median is not positive, or on ENOMEM. */
FB_MUSTCHECK bool fb_stats_speedup_ci(const double *base, int nb, const double *var, int nv,
                                      double level, double *speedup, double *lo, double *hi);

/* The difference of medians median(a) - median(b) and its percentile
 * bootstrap CI at level, resampled as fb_stats_speedup_ci (deterministic).
 * false when a side has fewer than 2 samples or on ENOMEM. */
FB_MUSTCHECK bool fb_stats_diff_ci(const double *a, int na, const double *b, int nb, double level,
                                   double *diff, double *lo, double *hi);

/* The mean of x and its percentile bootstrap CI at level (paired data: x
 * holds the per-round differences).  Deterministic.  false when n < 2 or on
 * ENOMEM. */
FB_MUSTCHECK bool fb_stats_mean_ci(const double *x, int n, double level, double *mean, double *lo,
                                   double *hi);

/* What a speedup with CI [lo, hi] says: faster when the whole CI is above 1 +
 * FB_NOISE_THRESHOLD, slower when it is all below 1 / (1 + FB_NOISE_THRESHOLD),
 * else no (significant) difference; unknown when any is NaN.  As criterion's
 * noise threshold: a change the interval cannot put past 1% is not reported. */
fb_change fb_stats_change(double speedup, double lo, double hi);

/* The unstable threshold for a device kind ("cuda": GPU, else CPU). */
double fb_stats_unstable_cv(const char *device);

/* Spearman's rank correlation of the n pairs (x[i], y[i]), ties given their
 * midranks (the Pearson correlation of the ranks).  NaN when n < 3, when a
 * side is constant, or on ENOMEM. */
double fb_stats_spearman(const double *x, const double *y, int n);

/* Mann-Whitney U two-sided p-value (normal approximation with tie correction). */
double fb_mann_whitney_p(const double *a, int na, const double *b, int nb);

#endif
