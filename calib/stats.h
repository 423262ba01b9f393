/*
 * stats.h: the small statistics the confirmation protocol and the
 * calibration report need: summaries of repeated timings, the Welch-style
 * difference between two sides, and the accuracy figures of a simulator
 * against hardware (mean and maximum absolute percentage error, Kendall's
 * tau of the ranking).
 *
 * All functions are pure: no allocation beyond what the comment says, no
 * state, NaN for undefined results instead of a status code.
 */
#ifndef PLACER_CALIB_STATS_H
#define PLACER_CALIB_STATS_H

#include <stddef.h>

/* Summary of n repeated measurements. */
typedef struct {
    int n;       /* number of values */
    double mean; /* arithmetic mean; NaN when n == 0 */
    double sd;   /* sample standard deviation (n - 1); 0 when n < 2 */
    double se;   /* standard error of the mean, sd / sqrt(n); 0 when n < 2 */
} calib_summary;

/* Mean, sample sd and standard error of a[0..n). n may be 0 (mean NaN). */
calib_summary calib_summarize(const double *a, int n);

/* Difference between two summaries, Welch style.
 *   diff   a.mean - b.mean
 *   se     sqrt(a.se^2 + b.se^2)
 *   z      diff / se, "how many standard errors apart"; +-inf when se == 0
 *          and diff != 0, 0 when both are 0
 *   dof    Welch-Satterthwaite degrees of freedom (NaN when undefined) */
typedef struct {
    double diff;
    double se;
    double z;
    double dof;
} calib_diff;

calib_diff calib_welch(calib_summary a, calib_summary b);

/* Mean absolute percentage error of pred against meas over n pairs, in
 * percent: 100/n * sum |pred - meas| / |meas|. Pairs whose measurement is 0
 * or non-finite, or whose prediction is non-finite, are skipped; NaN when no
 * pair is left. */
double calib_mape(const double *pred, const double *meas, int n);

/* Largest absolute percentage error (same skipping rule as calib_mape). */
double calib_max_ape(const double *pred, const double *meas, int n);

/* Kendall's tau-b between x and y (n pairs): concordant minus discordant
 * pairs over sqrt((n0 - ties_x)(n0 - ties_y)), n0 = n(n-1)/2. It is 1 when
 * both rank the items identically and -1 when reversed. NaN when n < 2 or
 * when either side is all ties. O(n^2), meant for at most a few thousand
 * points. */
double calib_kendall_tau(const double *x, const double *y, int n);

#endif
