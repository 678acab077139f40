/* fb_stats: latency statistics and the Mann-Whitney U test (fb_stats.h).  In
 * proto/ so the worker and the server (regression flags) share one implementation.
 *
 * Confidence interval of the median, from order statistics (distribution-free):
 * for sorted samples x(1) <= ... <= x(n), the number B of samples below the true
 * median is binomial(n, 1/2), so the interval [x(j), x(k)] with k = n - j + 1
 * covers the median with probability
 *     P(j <= B <= n - j) = 1 - 2 * P(B <= j - 1).
 * We take the largest j (the narrowest symmetric pair) whose coverage is still
 * >= 0.95, i.e. the largest c = j - 1 with P(B <= c) <= 0.025.  For n up to
 * FB_CI_EXACT_MAX the binomial CDF is summed exactly (terms from lgamma, in
 * double); above it the normal approximation j = floor((n - 1.96 sqrt(n)) / 2)
 * is used, which differs from the exact rank by at most one there.  For n < 6 no
 * pair reaches 95% (n = 5 gives 93.75% for [min, max]), so the CI is [min, max]
 * as fb_stats.h states.  fb_stats_median_ci does the same for any level (99% for
 * regression checks). */
#include "fb_stats.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FB_CI_EXACT_MAX 5000
#define FB_CI_TAIL      0.025 /* each side of a 95% interval */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation between order statistics at quantile q in [0, 1], as
 * numpy.percentile's default ("linear"): h = (n - 1) q. */
static double quantile_sorted(const double *s, int n, double q)
{
    double h = (n - 1) * q;
    int lo = (int)floor(h);

    if (lo >= n - 1)
        return s[n - 1];
    return s[lo] + (h - lo) * (s[lo + 1] - s[lo]);
}

/* Standard normal quantile of 1 - tail for the tails we use (two-sided 95% and
 * 99%); a rational approximation (Abramowitz-Stegun 26.2.23, |error| < 4.5e-4)
 * for any other. */
static double z_upper(double tail)
{
    if (tail == 0.025)
        return 1.959963984540054;
    if (tail == 0.005)
        return 2.5758293035489004;
    double t = sqrt(-2.0 * log(tail));
    return t - (2.515517 + 0.802853 * t + 0.010328 * t * t) /
                   (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t);
}

/* 1-based lower rank j of the CI of the median whose tails are each <= tail
 * (see top); 0 when no pair of order statistics reaches the coverage. */
static int ci_lower_rank(int n, double tail)
{
    double log_half_n = n * log(0.5), cdf = 0.0;
    int c = -1;

    if (n > FB_CI_EXACT_MAX) {
        int j = (int)floor((n - z_upper(tail) * sqrt((double)n)) / 2.0);
        return j < 1 ? 1 : j;
    }
    for (int i = 0; i <= n / 2; i++) {
        double lchoose = lgamma(n + 1.0) - lgamma(i + 1.0) - lgamma(n - i + 1.0);
        cdf += exp(lchoose + log_half_n);
        if (cdf > tail)
            break;
        c = i;
    }
    return c + 1;
}

static void moments(const double *s, int n, fb_stats *out)
{
    double sum = 0.0, ss = 0.0;

    for (int i = 0; i < n; i++)
        sum += s[i];
    out->mean = sum / n;
    for (int i = 0; i < n; i++)
        ss += (s[i] - out->mean) * (s[i] - out->mean);
    out->stdev = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
    out->cv = out->mean != 0.0 ? out->stdev / out->mean : 0.0;
}

static void ci_sorted(const double *s, int n, double tail, double *lo, double *hi);

void fb_stats_compute(const double *samples, int n, fb_stats *out)
{
    double *s;

    assert(samples && n >= 1 && out);
    memset(out, 0, sizeof *out);
    out->n = n;
    s = malloc((size_t)n * sizeof *s);
    if (!s) {
        out->median = out->mean = out->stdev = out->min = out->max = NAN;
        out->p90 = out->cv = out->ci95_lo = out->ci95_hi = NAN;
        return;
    }
    memcpy(s, samples, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    out->min = s[0];
    out->max = s[n - 1];
    out->median = quantile_sorted(s, n, 0.5);
    out->p90 = quantile_sorted(s, n, 0.9);
    moments(s, n, out);
    ci_sorted(s, n, FB_CI_TAIL, &out->ci95_lo, &out->ci95_hi);
    free(s);
}

/* CI of the median of sorted s; [min, max] when no narrower pair covers. */
static void ci_sorted(const double *s, int n, double tail, double *lo, double *hi)
{
    int j = ci_lower_rank(n, tail);
    if (j < 1) {
        *lo = s[0];
        *hi = s[n - 1];
        return;
    }
    *lo = s[j - 1];
    *hi = s[n - j]; /* rank k = n - j + 1, 0-based n - j */
}

bool fb_stats_median_ci(const double *samples, int n, double level, double *lo, double *hi)
{
    double *s;

    if (n < 1 || !(level > 0.0 && level < 1.0))
        return false;
    s = malloc((size_t)n * sizeof *s);
    if (!s)
        return false;
    memcpy(s, samples, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    ci_sorted(s, n, (1.0 - level) / 2.0, lo, hi);
    free(s);
    return true;
}

typedef struct mw_item {
    double v;
    int from_a;
} mw_item;

static int cmp_item(const void *a, const void *b)
{
    return cmp_double(&((const mw_item *)a)->v, &((const mw_item *)b)->v);
}

/* Sum of a's midranks in the pooled sorted sample; *tie_sum gets sum(t^3 - t)
 * over tie groups, for the variance correction. */
static double rank_sum_a(mw_item *it, int n, double *tie_sum)
{
    double r1 = 0.0;
    int i = 0;

    *tie_sum = 0.0;
    while (i < n) {
        int j = i;
        while (j + 1 < n && it[j + 1].v == it[i].v)
            j++;
        double t = j - i + 1, midrank = (i + j) / 2.0 + 1.0;
        for (int m = i; m <= j; m++)
            r1 += it[m].from_a ? midrank : 0.0;
        *tie_sum += t * t * t - t;
        i = j + 1;
    }
    return r1;
}

typedef struct rank_item {
    double v;
    int at; /* the value's index in the input */
} rank_item;

static int cmp_rank_item(const void *a, const void *b)
{
    return cmp_double(&((const rank_item *)a)->v, &((const rank_item *)b)->v);
}

/* Midranks (1-based) of x[0..n) into r. */
static bool midranks(const double *x, int n, double *r)
{
    rank_item *it = malloc((size_t)n * sizeof *it);
    if (!it)
        return false;
    for (int i = 0; i < n; i++)
        it[i] = (rank_item){x[i], i};
    qsort(it, (size_t)n, sizeof *it, cmp_rank_item);
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && it[j + 1].v == it[i].v)
            j++;
        for (int m = i; m <= j; m++)
            r[it[m].at] = (i + j) / 2.0 + 1.0;
        i = j + 1;
    }
    free(it);
    return true;
}

double fb_stats_spearman(const double *x, const double *y, int n)
{
    double rho = NAN, *rx, *ry;

    if (n < 3)
        return NAN;
    rx = malloc(2 * (size_t)n * sizeof *rx);
    if (!rx)
        return NAN;
    ry = rx + n;
    if (midranks(x, n, rx) && midranks(y, n, ry)) {
        double mean = (n + 1) / 2.0, sxy = 0, sxx = 0, syy = 0;
        for (int i = 0; i < n; i++) {
            sxy += (rx[i] - mean) * (ry[i] - mean);
            sxx += (rx[i] - mean) * (rx[i] - mean);
            syy += (ry[i] - mean) * (ry[i] - mean);
        }
        if (sxx > 0 && syy > 0)
            rho = sxy / sqrt(sxx * syy);
    }
    free(rx);
    return rho;
}

/* Two-sided, normal approximation with tie correction and continuity correction
 * (as scipy.stats.mannwhitneyu's "asymptotic" method): z = (|U - mu| - 0.5) / sigma,
 * p = 2 (1 - Phi(z)), clipped to [0, 1].  1.0 when a side is empty, when every
 * value is tied, or on ENOMEM (no evidence of a difference). */
double fb_mann_whitney_p(const double *a, int na, const double *b, int nb)
{
    int n = na + nb;
    double tie_sum, u, mu, var, z, p;
    mw_item *it;

    if (na < 1 || nb < 1)
        return 1.0;
    it = malloc((size_t)n * sizeof *it);
    if (!it)
        return 1.0;
    for (int i = 0; i < na; i++)
        it[i] = (mw_item){a[i], 1};
    for (int i = 0; i < nb; i++)
        it[na + i] = (mw_item){b[i], 0};
    qsort(it, (size_t)n, sizeof *it, cmp_item);
    u = rank_sum_a(it, n, &tie_sum) - na * (na + 1.0) / 2.0;
    free(it);
    mu = na * (double)nb / 2.0;
    var = na * (double)nb / 12.0 * ((n + 1.0) - tie_sum / ((double)n * (n - 1.0)));
    if (!(var > 0.0))
        return 1.0;
    z = (fabs(u - mu) - 0.5) / sqrt(var);
    p = erfc(z / sqrt(2.0));
    return p > 1.0 ? 1.0 : (p < 0.0 ? 0.0 : p);
}

/* ---- the speedup's interval (bootstrap) ---- */

/* splitmix64: a small, well-mixed generator; the bootstrap needs speed and a
 * fixed sequence, not cryptographic quality. */
static uint64_t mix_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The k-th smallest of a[0..n) (0-based), a reordered: Hoare's selection. */
static double select_kth(double *a, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = a[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot)
                i++;
            while (a[j] > pivot)
                j--;
            if (i <= j) {
                double t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return a[k];
    }
    return a[k];
}

/* The median of a[0..n) (numpy's: the mean of the middle two for even n). */
static double median_select(double *a, int n)
{
    double hi = select_kth(a, n, n / 2);
    if (n % 2)
        return hi;
    double lo = a[0];
    for (int i = 1; i < n / 2; i++) /* after selection a[0..n/2) holds the smaller half */
        lo = a[i] > lo ? a[i] : lo;
    return (lo + hi) / 2.0;
}

/* The median of n draws with replacement from s, into buf (n long). */
static double resample_median(const double *s, int n, double *buf, uint64_t *rng)
{
    for (int i = 0; i < n; i++)
        buf[i] = s[mix_next(rng) % (uint64_t)n];
    return median_select(buf, n);
}

bool fb_stats_speedup_ci(const double *base, int nb, const double *var, int nv, double level,
                         double *speedup, double *lo, double *hi)
{
    double *buf, *ratios, mb, mv;
    uint64_t rng = 0x5eedf00dull;
    int n = nb > nv ? nb : nv, k_lo, k_hi;
    /* The cost is B x (nb + nv) draws: at most FB_BOOTSTRAP_DRAWS_MAX, so a
     * job of 100,000 rounds costs a fraction of a second, not seconds; never
     * fewer than FB_BOOTSTRAP_RESAMPLES_MIN resamples. */
    long long b_cap = FB_BOOTSTRAP_DRAWS_MAX / ((long long)nb + nv);
    int B = b_cap >= FB_BOOTSTRAP_RESAMPLES      ? FB_BOOTSTRAP_RESAMPLES
            : b_cap < FB_BOOTSTRAP_RESAMPLES_MIN ? FB_BOOTSTRAP_RESAMPLES_MIN
                                                 : (int)b_cap;

    *speedup = *lo = *hi = NAN;
    if (!base || !var || nb < 2 || nv < 2 || !(level > 0.0 && level < 1.0))
        return false;
    buf = malloc((size_t)n * sizeof *buf);
    ratios = malloc((size_t)B * sizeof *ratios);
    if (!buf || !ratios) {
        free(buf);
        free(ratios);
        return false;
    }
    memcpy(buf, base, (size_t)nb * sizeof *buf);
    mb = median_select(buf, nb);
    memcpy(buf, var, (size_t)nv * sizeof *buf);
    mv = median_select(buf, nv);
    if (!(mb > 0.0) || !(mv > 0.0)) {
        free(buf);
        free(ratios);
        return false;
    }
    for (int b = 0; b < B; b++) {
        double rb = resample_median(base, nb, buf, &rng);
        double rv = resample_median(var, nv, buf, &rng);
        ratios[b] = rv > 0.0 ? rb / rv : INFINITY;
    }
    qsort(ratios, (size_t)B, sizeof *ratios, cmp_double);
    k_lo = (int)floor((1.0 - level) / 2.0 * B);
    k_hi = (int)ceil((1.0 + level) / 2.0 * B) - 1;
    *speedup = mb / mv;
    *lo = ratios[k_lo < 0 ? 0 : k_lo];
    *hi = ratios[k_hi >= B ? B - 1 : k_hi];
    free(buf);
    free(ratios);
    return true;
}

/* Resamples for n draws each: FB_BOOTSTRAP_RESAMPLES, fewer past the draw
 * cap, never fewer than the minimum. */
static int resamples_for(long long n)
{
    long long b_cap = FB_BOOTSTRAP_DRAWS_MAX / (n > 0 ? n : 1);
    return b_cap >= FB_BOOTSTRAP_RESAMPLES      ? FB_BOOTSTRAP_RESAMPLES
           : b_cap < FB_BOOTSTRAP_RESAMPLES_MIN ? FB_BOOTSTRAP_RESAMPLES_MIN
                                                : (int)b_cap;
}

/* The level CI from B sorted bootstrap values. */
static void percentile_ci(double *vals, int B, double level, double *lo, double *hi)
{
    qsort(vals, (size_t)B, sizeof *vals, cmp_double);
    int k_lo = (int)floor((1.0 - level) / 2.0 * B);
    int k_hi = (int)ceil((1.0 + level) / 2.0 * B) - 1;
    *lo = vals[k_lo < 0 ? 0 : k_lo];
    *hi = vals[k_hi >= B ? B - 1 : k_hi];
}

bool fb_stats_diff_ci(const double *a, int na, const double *b, int nb, double level, double *diff,
                      double *lo, double *hi)
{
    uint64_t rng = 0x5eedf00dull;
    int n = na > nb ? na : nb, B = resamples_for((long long)na + nb);
    *diff = *lo = *hi = NAN;
    if (!a || !b || na < 2 || nb < 2 || !(level > 0.0 && level < 1.0))
        return false;
    double *buf = malloc((size_t)n * sizeof *buf), *vals = malloc((size_t)B * sizeof *vals);
    if (!buf || !vals) {
        free(buf);
        free(vals);
        return false;
    }
    memcpy(buf, a, (size_t)na * sizeof *buf);
    double ma = median_select(buf, na);
    memcpy(buf, b, (size_t)nb * sizeof *buf);
    *diff = ma - median_select(buf, nb);
    for (int k = 0; k < B; k++) {
        double ra = resample_median(a, na, buf, &rng);
        vals[k] = ra - resample_median(b, nb, buf, &rng);
    }
    percentile_ci(vals, B, level, lo, hi);
    free(buf);
    free(vals);
    return true;
}

bool fb_stats_mean_ci(const double *x, int n, double level, double *mean, double *lo, double *hi)
{
    uint64_t rng = 0x5eedf00dull;
    int B = resamples_for(n);
    *mean = *lo = *hi = NAN;
    if (!x || n < 2 || !(level > 0.0 && level < 1.0))
        return false;
    double *vals = malloc((size_t)B * sizeof *vals), sum = 0.0;
    if (!vals)
        return false;
    for (int i = 0; i < n; i++)
        sum += x[i];
    *mean = sum / n;
    for (int k = 0; k < B; k++) {
        double s = 0.0;
        for (int i = 0; i < n; i++)
            s += x[mix_next(&rng) % (uint64_t)n];
        vals[k] = s / n;
    }
    percentile_ci(vals, B, level, lo, hi);
    free(vals);
    return true;
}

fb_change fb_stats_change(double speedup, double lo, double hi)
{
    if (isnan(speedup) || isnan(lo) || isnan(hi))
        return FB_CHANGE_UNKNOWN;
    if (lo > 1.0 + FB_NOISE_THRESHOLD)
        return FB_CHANGE_FASTER;
    if (hi < 1.0 / (1.0 + FB_NOISE_THRESHOLD))
        return FB_CHANGE_SLOWER;
    return FB_CHANGE_NONE;
}

double fb_stats_unstable_cv(const char *device)
{
    return device && strcmp(device, "cuda") == 0 ? FB_UNSTABLE_CV_GPU : FB_UNSTABLE_CV_CPU;
}
