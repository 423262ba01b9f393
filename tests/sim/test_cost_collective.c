/*
 * test_cost_collective.c: the collective model (sim/collective/collective.c) against
 * its closed forms: the ring formula on one node, nccl-tests' bus
 * bandwidth definitions, the pod oversubscription where bandwidth-bound,
 * and the group checks.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>

#include "collective.h"
#include "cost_fixtures.h"

static void ranks_stride(int64_t *r, int n, int64_t first, int64_t stride) {
    for (int i = 0; i < n; i++) r[i] = first + i * stride;
}

/* 8 GPUs of one node: 2(n-1)/n S / B + 2(n-1) lat, to rounding. */
Test(cost_collective, ring_formula_exact_on_one_node) {
    cluster c = costfix_a100(4);
    c.collective_efficiency = 0.8;
    int64_t r[8];
    ranks_stride(r, 8, 8, 1); /* node 1 */
    const double S = 1e9;
    coll_estimate e;
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, r, 8, S, &e), PL_OK);
    double want = 2.0 * 7 / 8 * S / (300e9 * 0.8) * 1e6 + 14 * 5.0;
    cr_assert(ieee_ulp_eq(dbl, e.time_us, want, 4), "%.9g vs %.9g", e.time_us, want);
    cr_assert_str_eq(e.algo, "ring");
    cr_assert_eq(e.n_nodes, 1);
    cr_assert(ieee_ulp_eq(dbl, e.latency_us, 70.0, 4));
    cr_assert_eq(coll_time(&c, COLL_ALL_GATHER, r, 8, S, &e), PL_OK);
    want = 7.0 / 8 * S / (300e9 * 0.8) * 1e6 + 7 * 5.0;
    cr_assert(ieee_ulp_eq(dbl, e.time_us, want, 4), "%.9g vs %.9g", e.time_us, want);
    cr_assert_eq(coll_time(&c, COLL_REDUCE_SCATTER, r, 4, S, &e), PL_OK);
    want = 3.0 / 4 * S / (300e9 * 0.8) * 1e6 + 3 * 5.0;
    cr_assert(ieee_ulp_eq(dbl, e.time_us, want, 4), "%.9g vs %.9g", e.time_us, want);
}

/* busbw = algbw 2(n-1)/n for all-reduce, (n-1)/n for the others; with no
 * latency a one-node ring's bus bandwidth is the link's. */
Test(cost_collective, busbw_as_nccl_tests) {
    cluster c = costfix_a100(2);
    c.intra_latency_us = 0;
    int64_t r[8];
    ranks_stride(r, 8, 0, 1);
    const coll_kind kinds[3] = {COLL_ALL_REDUCE, COLL_ALL_GATHER, COLL_REDUCE_SCATTER};
    for (int i = 0; i < 3; i++) {
        coll_estimate e;
        cr_assert_eq(coll_time(&c, kinds[i], r, 8, 4e8, &e), PL_OK);
        cr_assert(ieee_ulp_eq(dbl, e.algbw, 4e8 / (e.time_us * 1e-6), 4));
        double f = (kinds[i] == COLL_ALL_REDUCE ? 2.0 : 1.0) * 7 / 8;
        cr_assert(ieee_ulp_eq(dbl, e.busbw, e.algbw * f, 4));
        cr_assert(ieee_ulp_eq(dbl, e.busbw, 300e9, 16), "%s busbw %.6g", coll_kind_name(kinds[i]), e.busbw);
    }
}

/* A data-parallel group under tp = 8 (one GPU per node, stride 8) on its
 * NIC share (25 GB/s): bandwidth-bound, spanning two pods with 1:7 between
 * them makes it exactly 7x slower. */
Test(cost_collective, group_spanning_pods_slower_by_oversubscription) {
    cluster c = costfix_a100(32);
    c.intra_latency_us = c.inter_latency_us = 0;
    c.pod_gpus = 128;
    c.pod_oversubscription = 7.0;
    int64_t in_pod[16], across[16];
    ranks_stride(in_pod, 16, 0, 8);  /* GPUs 0..120: pod 0 */
    ranks_stride(across, 16, 64, 8); /* GPUs 64..184: pods 0 and 1 */
    coll_estimate a, b;
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, in_pod, 16, 1e9, &a), PL_OK);
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, across, 16, 1e9, &b), PL_OK);
    cr_assert_eq(a.n_pods, 1);
    cr_assert_eq(b.n_pods, 2);
    cr_assert_eq(a.n_nodes, 16);
    cr_assert(ieee_ulp_eq(dbl, b.time_us / a.time_us, 7.0, 8), "ratio %.9g", b.time_us / a.time_us);
    /* the ring: 2(n-1)/n S at one NIC share */
    cr_assert(ieee_ulp_eq(dbl, a.time_us, 2.0 * 15 / 16 * 1e9 / 25e9 * 1e6, 8), "%.9g", a.time_us);
    cr_assert(ieee_ulp_eq(dbl, a.link_bw, 25e9, 4));
}

/* Small messages over many nodes: latency-bound, so the tree (log2 N
 * steps) or the hierarchical algorithm beats the ring's 2(n-1) steps;
 * large ones stay on the ring. */
Test(cost_collective, algorithm_follows_message_size) {
    cluster c = costfix_a100(64);
    int64_t r[512];
    ranks_stride(r, 512, 0, 1);
    coll_estimate small, large;
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, r, 512, 1024, &small), PL_OK);
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, r, 512, 4e9, &large), PL_OK);
    cr_assert_str_neq(small.algo, "ring");
    cr_assert_lt(small.time_us, 2.0 * 511 * c.inter_latency_us);
    cr_assert_eq(large.n_nodes, 64);
    /* large: no faster than the bandwidth floor (every node's egress of
     * 8 NICs carries 2(n-1)/n S), no slower than the flat ring */
    double floor_us = 2.0 * 511 / 512 * 4e9 / 200e9 * 1e6;
    cr_assert_geq(large.time_us, floor_us * (1 - 1e-12));
    cr_assert_leq(large.time_us, floor_us + 2.0 * 511 * c.inter_latency_us);
    cr_assert_lt(large.latency_us, 0.01 * large.time_us);
}

Test(cost_collective, single_rank_costs_nothing) {
    cluster c = costfix_a100(1);
    int64_t r = 3;
    coll_estimate e;
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, &r, 1, 1e9, &e), PL_OK);
    cr_assert(ieee_ulp_eq(dbl, e.time_us, 0.0, 0));
    cr_assert_str_eq(e.algo, "none");
}

Test(cost_collective, order_of_ranks_does_not_matter_bad_groups_rejected) {
    cluster c = costfix_a100(2);
    int64_t sorted[4] = {0, 1, 8, 9}, shuffled[4] = {9, 0, 8, 1};
    coll_estimate a, b;
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, sorted, 4, 1e8, &a), PL_OK);
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, shuffled, 4, 1e8, &b), PL_OK);
    cr_assert(ieee_ulp_eq(dbl, a.time_us, b.time_us, 0));
    cr_assert_eq(a.n_nodes, 2);
    int64_t dup[3] = {1, 2, 1}, out_of_range[2] = {0, 16}, negative[2] = {-1, 0};
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, dup, 3, 1e8, &a), PL_ERR_INVALID);
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, out_of_range, 2, 1e8, &a), PL_ERR_INVALID);
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, negative, 2, 1e8, &a), PL_ERR_INVALID);
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, sorted, 0, 1e8, &a), PL_ERR_INVALID);
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, sorted, 4, -1.0, &a), PL_ERR_INVALID);
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, sorted, 4, NAN, &a), PL_ERR_INVALID);
}

/* A send: the link the two GPUs share, latency plus bytes at its bandwidth. */
Test(cost_collective, p2p_uses_the_shared_link) {
    cluster c = costfix_a100(32);
    c.pod_gpus = 128;
    c.pod_oversubscription = 7.0;
    c.p2p_efficiency = 0.5;
    cr_assert(ieee_ulp_eq(dbl, p2p_time_us(&c, 3, 3, 1e6), 0.0, 0));
    cr_assert(ieee_ulp_eq(dbl, p2p_time_us(&c, 0, 7, 1e9), 5.0 + 1e9 / 150e9 * 1e6, 4));
    cr_assert(ieee_ulp_eq(dbl, p2p_time_us(&c, 0, 8, 1e9), 10.0 + 1e9 / 12.5e9 * 1e6, 4));
    cr_assert(ieee_ulp_eq(dbl, p2p_time_us(&c, 0, 128, 1e9), 10.0 + 7e9 / 12.5e9 * 1e6, 4));
}

/* NCCL's baseLat once per call; a one-node cluster needs no network, a
 * group over two nodes of a cluster without one is refused; on a mixed
 * cluster the slower node group's NVSwitch bounds the ring. */
Test(cost_collective, base_latency_networkless_and_mixed_fabric) {
    cluster c = costfix_a100(1);
    c.coll_base_latency_us = 8.4;
    int64_t r[8];
    ranks_stride(r, 8, 0, 1);
    coll_estimate e;
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, r, 8, 1e9, &e), PL_OK);
    cr_assert(ieee_ulp_eq(dbl, e.time_us, 8.4 + 2.0 * 7 / 8 * 1e9 / 300e9 * 1e6 + 14 * 5.0, 4), "%.9g", e.time_us);
    c.nics_per_node = 0;
    c.nic_bw = 0;
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, r, 8, 1e9, &e), PL_OK);
    cluster two = costfix_a100(2);
    two.nics_per_node = 0;
    two.nic_bw = 0;
    int64_t across[2] = {0, 8};
    cr_assert_eq(coll_time(&two, COLL_ALL_REDUCE, across, 2, 1e9, &e), PL_ERR_INVALID);
    cluster mixed = costfix_a100(2);
    mixed.n_groups = 2;
    mixed.groups[0].n_nodes = 1;
    mixed.groups[1] = mixed.groups[0];
    mixed.groups[1].intra_bw = 150e9;
    mixed.intra_latency_us = 0;
    int64_t g0[8], g1[8];
    ranks_stride(g0, 8, 0, 1);
    ranks_stride(g1, 8, 8, 1);
    coll_estimate a, b;
    cr_assert_eq(coll_time(&mixed, COLL_ALL_GATHER, g0, 8, 1e9, &a), PL_OK);
    cr_assert_eq(coll_time(&mixed, COLL_ALL_GATHER, g1, 8, 1e9, &b), PL_OK);
    cr_assert(ieee_ulp_eq(dbl, b.time_us, 2.0 * a.time_us, 4));
}
