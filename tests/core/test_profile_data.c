/* test_profile_data.c: profile allocation, cost and transfer interpolation. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "profile_data.h"

Test(profile_data, interpolates_costs_between_micro_batch_sizes) {
    int sizes[3] = {2, 4, 8};
    profile_data *p = NULL;
    cr_assert_eq(profile_data_create(2, 3, 3, sizes, &p), PL_OK);
    for (int k = 0; k < 3; k++)
        p->cost_us[profile_cost_index(p, 1, k, 2, PHASE_FWD)] = 10.0 * sizes[k] + 5.0;
    p->cost_us[profile_cost_index(p, 1, 0, 2, PHASE_OPT)] = 7.0;
    cr_assert(ieee_ulp_eq(dbl, profile_node_cost(p, 1, 4, 2, PHASE_FWD), 45.0, 0));
    cr_assert(epsilon_eq(dbl, profile_node_cost(p, 1, 6, 2, PHASE_FWD), 65.0, 1e-12));
    cr_assert(epsilon_eq(dbl, profile_node_cost(p, 1, 16, 2, PHASE_FWD), 165.0, 1e-12));
    cr_assert(epsilon_eq(dbl, profile_node_cost(p, 1, 1, 2, PHASE_FWD), 15.0, 1e-12));
    cr_assert(ieee_ulp_eq(dbl, profile_node_cost(p, 1, 16, 2, PHASE_OPT), 7.0, 0));
    profile_data_destroy(p);
}

Test(profile_data, transfer_curve_interpolates_and_extrapolates) {
    int sizes[1] = {16};
    profile_data *p = NULL;
    cr_assert_eq(profile_data_create(2, 1, 1, sizes, &p), PL_OK);
    double b[3] = {1e3, 1e6, 1e9}, us[3] = {15, 22, 2200};
    cr_assert_eq(profile_link_set_curve(&p->links[0 * 2 + 1], 3, b, us), PL_OK);
    cr_assert(ieee_ulp_eq(dbl, profile_transfer_us(p, 0, 1, 10), 15.0, 0));
    cr_assert(epsilon_eq(dbl, profile_transfer_us(p, 0, 1, 1e6), 22.0, 1e-9));
    cr_assert(epsilon_eq(dbl, profile_transfer_us(p, 0, 1, 2e9), 2200.0 + (2200.0 - 22) * 1e9 / (1e9 - 1e6), 1e-6));
    cr_assert(ieee_ulp_eq(dbl, profile_transfer_us(p, 1, 1, 1e9), 0.0, 0));
    /* a curve-less link falls back to latency + bytes / bandwidth */
    p->links[1 * 2 + 0].latency_us = 10;
    p->links[1 * 2 + 0].bandwidth = 1e9;
    cr_assert(epsilon_eq(dbl, profile_transfer_us(p, 1, 0, 1e6), 1010.0, 1e-9));
    double bad_b[2] = {5, 5};
    cr_assert_eq(profile_link_set_curve(&p->links[1], 2, bad_b, us), PL_ERR_INVALID);
    cr_assert_eq(p->links[1].n_points, 3, "old curve kept on failure");
    profile_data *q = NULL;
    cr_assert_eq(profile_data_clone(p, &q), PL_OK);
    cr_assert(epsilon_eq(dbl, profile_transfer_us(q, 0, 1, 1e6), 22.0, 1e-9));
    profile_data_destroy(q);
    profile_data_destroy(p);
}

Test(profile_data, refuses_bad_shapes) {
    profile_data *p = NULL;
    int unsorted[2] = {4, 2};
    cr_assert_eq(profile_data_create(2, 3, 2, unsorted, &p), PL_ERR_INVALID);
    cr_assert_null(p);
    int ok[1] = {4};
    cr_assert_eq(profile_data_create(0, 3, 1, ok, &p), PL_ERR_INVALID);
    profile_data_destroy(NULL);
}
