/* test_stats.c: the statistics helpers against hand-computed cases. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>

#include "stats.h"

Test(calib_stats, kendall_tau_is_one_for_same_order_and_minus_one_reversed) {
    double x[5] = {1, 2, 3, 4, 5}, y[5] = {10, 20, 30, 40, 50}, z[5] = {5, 4, 3, 2, 1};
    cr_assert(epsilon_eq(dbl, calib_kendall_tau(x, y, 5), 1.0, 1e-12));
    cr_assert(epsilon_eq(dbl, calib_kendall_tau(x, z, 5), -1.0, 1e-12));
}

Test(calib_stats, kendall_tau_counts_one_swapped_pair) {
    /* 10 pairs, only (2,3) discordant: (9 - 1) / 10 */
    double x[5] = {1, 2, 3, 4, 5}, y[5] = {1, 3, 2, 4, 5};
    cr_assert(epsilon_eq(dbl, calib_kendall_tau(x, y, 5), 0.8, 1e-12));
}

Test(calib_stats, kendall_tau_b_handles_ties) {
    /* x has one tied pair: 5 concordant, 0 discordant, tau_b = 5 / sqrt(5 * 6)
     * (scipy.stats.kendalltau gives 0.9128709291752769) */
    double x[4] = {1, 2, 2, 3}, y[4] = {1, 2, 3, 4};
    cr_assert(epsilon_eq(dbl, calib_kendall_tau(x, y, 4), 5.0 / sqrt(30.0), 1e-12));
    double c[3] = {7, 7, 7};
    cr_assert(isnan(calib_kendall_tau(c, y, 3)));
    cr_assert(isnan(calib_kendall_tau(x, y, 1)));
}

Test(calib_stats, mape_and_max_error_of_hand_case) {
    double pred[3] = {110, 90, 100}, meas[3] = {100, 100, 100};
    cr_assert(epsilon_eq(dbl, calib_mape(pred, meas, 3), 20.0 / 3.0, 1e-12));
    cr_assert(epsilon_eq(dbl, calib_max_ape(pred, meas, 3), 10.0, 1e-12));
}

Test(calib_stats, mape_skips_zero_and_missing_measurements) {
    double pred[4] = {120, 5, NAN, 50}, meas[4] = {100, 0, 100, NAN};
    cr_assert(epsilon_eq(dbl, calib_mape(pred, meas, 4), 20.0, 1e-12));
    cr_assert(epsilon_eq(dbl, calib_max_ape(pred, meas, 4), 20.0, 1e-12));
    cr_assert(isnan(calib_mape(pred + 1, meas + 1, 3)));
}

Test(calib_stats, summary_mean_sd_and_standard_error) {
    double a[4] = {1, 2, 3, 4};
    calib_summary s = calib_summarize(a, 4);
    cr_assert_eq(s.n, 4);
    cr_assert(epsilon_eq(dbl, s.mean, 2.5, 1e-12));
    cr_assert(epsilon_eq(dbl, s.sd, sqrt(5.0 / 3.0), 1e-12));
    cr_assert(epsilon_eq(dbl, s.se, sqrt(5.0 / 3.0) / 2.0, 1e-12));
    calib_summary one = calib_summarize(a, 1);
    cr_assert(epsilon_eq(dbl, one.sd, 0.0, 0));
    cr_assert(isnan(calib_summarize(a, 0).mean));
}

Test(calib_stats, welch_difference_in_standard_errors) {
    calib_summary a = {4, 10.0, 2.0, 1.0}, b = {4, 7.0, 2.0, 1.0};
    calib_diff d = calib_welch(a, b);
    cr_assert(epsilon_eq(dbl, d.diff, 3.0, 1e-12));
    cr_assert(epsilon_eq(dbl, d.se, sqrt(2.0), 1e-12));
    cr_assert(epsilon_eq(dbl, d.z, 3.0 / sqrt(2.0), 1e-12));
    /* (1 + 1)^2 / (1/3 + 1/3) = 6 */
    cr_assert(epsilon_eq(dbl, d.dof, 6.0, 1e-12));
    calib_summary c = {4, 7.0, 0.0, 0.0}, e = {4, 8.0, 0.0, 0.0};
    cr_assert(epsilon_eq(dbl, calib_welch(a, c).z, 3.0, 1e-12));
    cr_assert(epsilon_eq(dbl, calib_welch(c, c).z, 0.0, 0));
    cr_assert(isinf(calib_welch(e, c).z) && calib_welch(e, c).z > 0);
}
