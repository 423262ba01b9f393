/*
 * test_nvlink_domain.c: NVLink domains wider than a node (inputs/cluster.h,
 * sim/collective/collective.c). A tensor-parallel all-reduce of 16 GPUs
 * inside one GB200 NVL72 rack (4 GPUs a tray, 72 a domain) runs on NVLink
 * across four trays; the same 16 GPUs over two DGX B200 nodes (8 a node and
 * a domain) cross the network. Each is held against its bandwidth formula,
 * latencies set to 0 so the bandwidth terms stand alone, then with them.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "collective.h"
#include "layout.h"

/* B200 figures (datasheet: NVLink 5 at 1.8 TB/s bidirectional per GPU =
 * 900 GB/s per direction; one 400 Gb/s adapter per GPU). */
static cluster b200(int gpus_per_node, int domain, int nodes) {
    cluster c;
    memset(&c, 0, sizeof c);
    strcpy(c.name, "b200-test");
    c.n_gpu_types = 1;
    strcpy(c.gpus[0].name, "NVIDIA B200");
    c.gpus[0].peak_flops[PRECISION_BF16] = 2250e12;
    c.gpus[0].peak_flops[PRECISION_FP8] = 4500e12;
    c.gpus[0].peak_mxfp8 = 4500e12;
    c.gpus[0].hbm_bw = 8000e9;
    c.gpus[0].hbm_bytes = 180LL << 30;
    c.gpus[0].sm_count = 148;
    c.n_groups = 1;
    c.groups[0].n_nodes = nodes;
    c.gpus_per_node = gpus_per_node;
    c.nvlink_domain_gpus = domain;
    c.intra_bw = 900e9;
    c.nics_per_node = gpus_per_node;
    c.nic_bw = 50e9;
    c.pod_oversubscription = 1.0;
    c.p2p_efficiency = 0.8;
    c.collective_efficiency = 0.8;
    return c;
}

Test(nvlink_domain, tp16_inside_an_nvl72_rack_is_on_nvlink) {
    cluster c = b200(4, 72, 18);
    char msg[256];
    cr_assert_eq(cluster_validate(&c, msg, sizeof msg), PL_OK, "%s", msg);
    /* the tp group of rank 0 under tp = 16: GPUs 0..15, four trays */
    layout l;
    layout_default(&l);
    l.tp = 16;
    l.dp = 4;
    int64_t r[16];
    cr_assert_eq(layout_group_ranks(&l, 0, LAYOUT_DIM_TP, r), 16);
    const double S = 256e6;
    coll_estimate e;
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, r, 16, S, &e), PL_OK);
    double want = 2.0 * 15 / 16 * S / (900e9 * 0.8) * 1e6; /* ring at NVLink: 2(n-1)/n S / B */
    cr_assert(ieee_ulp_eq(dbl, e.time_us, want, 4), "%.9g vs %.9g", e.time_us, want);
    cr_assert_str_eq(e.algo, "ring");
    cr_assert_eq(e.n_nodes, 4, "four trays (hosts)");
    cr_assert_eq(e.n_domains, 1, "one NVLink domain");
    cr_assert(ieee_ulp_eq(dbl, e.link_bw, 900e9 * 0.8, 4));
    cr_assert(ieee_ulp_eq(dbl, e.busbw, 900e9 * 0.8, 16), "busbw %.6g", e.busbw);
    /* with latencies: 2(n-1) NVLink steps and the call's base */
    c.intra_latency_us = 3.0;
    c.inter_latency_us = 9.0;
    c.coll_base_latency_us = 8.0;
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, r, 16, S, &e), PL_OK);
    cr_assert(ieee_ulp_eq(dbl, e.time_us, want + 8.0 + 30 * 3.0, 8), "%.9g", e.time_us);
    /* a send between trays of one rack is NVLink too, between racks the network */
    c.gpus_per_node = 4;
    c.groups[0].n_nodes = 36;
    double in_rack = p2p_time_us(&c, 0, 71, 1e8), across = p2p_time_us(&c, 71, 72, 1e8);
    cr_assert(ieee_ulp_eq(dbl, in_rack, 3.0 + 1e8 / (900e9 * 0.8) * 1e6, 8), "%.9g", in_rack);
    cr_assert(ieee_ulp_eq(dbl, across, 9.0 + 1e8 / (50e9 * 0.8) * 1e6, 8), "%.9g", across);
}

Test(nvlink_domain, tp16_over_two_dgx_b200_nodes_is_on_the_network) {
    cluster c = b200(8, 0, 2); /* the domain is the node */
    char msg[256];
    cr_assert_eq(cluster_validate(&c, msg, sizeof msg), PL_OK, "%s", msg);
    layout l;
    layout_default(&l);
    l.tp = 16;
    int64_t r[16];
    cr_assert_eq(layout_group_ranks(&l, 0, LAYOUT_DIM_TP, r), 16);
    const double S = 256e6, eff = 0.8, nvl = 900e9 * eff, nic = 50e9 * eff;
    coll_estimate e;
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, r, 16, S, &e), PL_OK);
    cr_assert_eq(e.n_nodes, 2);
    cr_assert_eq(e.n_domains, 2);
    /* the three algorithms' bandwidth terms (ppn 8 members a node, N 2):
     *   ring          2(n-1)/n S / min(ppn nic, nvl)
     *   tree          2 S / min(ppn nic, nvl)
     *   hierarchical  2 (ppn-1)/ppn S / nvl + 2(N-1)/N (S/ppn) / nic
     * the cheapest is NCCL's pick */
    double ring = 2.0 * 15 / 16 * S / (8 * nic) * 1e6, tree = 2.0 * S / (8 * nic) * 1e6;
    double hier = (2.0 * 7 / 8 * S / nvl + 2.0 * 1 / 2 * (S / 8) / nic) * 1e6;
    cr_assert(hier < ring && hier < tree, "the hierarchical one is cheapest here");
    cr_assert(ieee_ulp_eq(dbl, e.time_us, hier, 8), "%.9g vs %.9g", e.time_us, hier);
    cr_assert_str_eq(e.algo, "hierarchical");
    cr_assert(ieee_ulp_eq(dbl, e.link_bw, nic, 4), "the bottleneck is a GPU's NIC share");
    /* the same group on one NVL72 rack is faster by what the network costs */
    cluster rack = b200(4, 72, 18);
    coll_estimate f;
    cr_assert_eq(coll_time(&rack, COLL_ALL_REDUCE, r, 16, S, &f), PL_OK);
    cr_assert(e.time_us > 2.0 * f.time_us, "network %.1f us vs NVLink %.1f us", e.time_us, f.time_us);
}

/* A domain of one node reproduces the old node-based model exactly, and a
 * domain given explicitly as the node size is the same cluster. */
Test(nvlink_domain, a_domain_of_one_node_changes_nothing) {
    cluster a = b200(8, 0, 4), b = b200(8, 8, 4);
    int64_t r[32];
    for (int i = 0; i < 32; i++) r[i] = i;
    for (int n = 2; n <= 32; n *= 2) {
        coll_estimate x, y;
        cr_assert_eq(coll_time(&a, COLL_REDUCE_SCATTER, r, n, 1e8, &x), PL_OK);
        cr_assert_eq(coll_time(&b, COLL_REDUCE_SCATTER, r, n, 1e8, &y), PL_OK);
        cr_assert(x.time_us == y.time_us && !strcmp(x.algo, y.algo));
        cr_assert_eq(x.n_domains, x.n_nodes);
    }
}

/* The same two groups on the shipped files (data/clusters/gb200-nvl72.json,
 * dgx-b200.json): NVLink at 900 GB/s x the file's efficiency inside the
 * rack, the hierarchical algorithm at a 400 Gb/s NIC share across the two
 * DGX B200 nodes. */
#include "cluster_file.h"

Test(nvlink_domain, the_shipped_rack_and_dgx_b200_files) {
    cluster rack, dgx;
    char msg[512] = "";
    cr_assert_eq(cluster_load("gb200-nvl72", NULL, &rack, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(cluster_load("dgx-b200", NULL, &dgx, msg, sizeof msg), PL_OK, "%s", msg);
    int64_t r[16];
    for (int i = 0; i < 16; i++) r[i] = i;
    const double S = 256e6;
    coll_estimate a, b;
    cr_assert_eq(coll_time(&rack, COLL_ALL_REDUCE, r, 16, S, &a), PL_OK);
    cr_assert_eq(coll_time(&dgx, COLL_ALL_REDUCE, r, 16, S, &b), PL_OK);
    const double eff = rack.collective_efficiency;
    double want = 2.0 * 15 / 16 * S / (900e9 * eff) * 1e6 + rack.coll_base_latency_us + 30 * rack.intra_latency_us;
    cr_assert(ieee_ulp_eq(dbl, a.time_us, want, 16), "%.9g vs %.9g", a.time_us, want);
    cr_assert(a.n_domains == 1 && a.n_nodes == 4);
    cr_assert_eq(b.n_domains, 2);
    cr_assert(ieee_ulp_eq(dbl, b.link_bw, 50e9 * dgx.collective_efficiency, 4), "%.6g", b.link_bw);
    cr_assert(b.time_us > 1.5 * a.time_us, "network %.1f us, NVLink %.1f us", b.time_us, a.time_us);
}
