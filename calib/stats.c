/* stats.c: summaries, Welch differences, MAPE and Kendall's tau. */
#include "stats.h"

#include <math.h>

calib_summary calib_summarize(const double *a, int n) {
    calib_summary s = {n, NAN, 0.0, 0.0};
    if (n <= 0) {
        s.n = 0;
        return s;
    }
    double sum = 0;
    for (int i = 0; i < n; i++) sum += a[i];
    s.mean = sum / n;
    if (n > 1) {
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (a[i] - s.mean) * (a[i] - s.mean);
        s.sd = sqrt(ss / (n - 1));
        s.se = s.sd / sqrt((double)n);
    }
    return s;
}

calib_diff calib_welch(calib_summary a, calib_summary b) {
    calib_diff d;
    d.diff = a.mean - b.mean;
    double va = a.se * a.se, vb = b.se * b.se;
    d.se = sqrt(va + vb);
    if (d.se > 0) d.z = d.diff / d.se;
    else if (d.diff == 0 || isnan(d.diff)) d.z = isnan(d.diff) ? NAN : 0.0;
    else d.z = d.diff > 0 ? INFINITY : -INFINITY;
    /* Welch-Satterthwaite: (va + vb)^2 / (va^2/(na-1) + vb^2/(nb-1)) */
    double den = 0;
    if (a.n > 1) den += va * va / (a.n - 1);
    if (b.n > 1) den += vb * vb / (b.n - 1);
    d.dof = (den > 0 && a.n > 1 && b.n > 1) ? (va + vb) * (va + vb) / den : NAN;
    return d;
}

/* |pred - meas| / |meas| for a usable pair, or a negative number to skip. */
static double ape(double pred, double meas) {
    if (!isfinite(pred) || !isfinite(meas) || meas == 0) return -1.0;
    return fabs(pred - meas) / fabs(meas);
}

double calib_mape(const double *pred, const double *meas, int n) {
    double sum = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        double e = ape(pred[i], meas[i]);
        if (e < 0) continue;
        sum += e;
        k++;
    }
    return k ? 100.0 * sum / k : NAN;
}

double calib_max_ape(const double *pred, const double *meas, int n) {
    double mx = -1;
    for (int i = 0; i < n; i++) {
        double e = ape(pred[i], meas[i]);
        if (e > mx) mx = e;
    }
    return mx >= 0 ? 100.0 * mx : NAN;
}

static int sign3(double v) { return (v > 0) - (v < 0); }

double calib_kendall_tau(const double *x, const double *y, int n) {
    if (n < 2) return NAN;
    double conc = 0, disc = 0, tie_x = 0, tie_y = 0, n0 = 0.5 * n * (n - 1.0);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            int sx = sign3(x[j] - x[i]), sy = sign3(y[j] - y[i]);
            if (sx == 0) tie_x++;
            if (sy == 0) tie_y++;
            if (sx && sy) {
                if (sx == sy) conc++;
                else disc++;
            }
        }
    double den = sqrt((n0 - tie_x) * (n0 - tie_y));
    return den > 0 ? (conc - disc) / den : NAN;
}
