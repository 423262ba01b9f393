/*
 * plan_fixtures.c: the planner tests' GPUs, clusters and models
 * (plan_fixtures.h).
 */
#include "plan_fixtures.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

cluster_gpu plan_test_gpu(const char *name, double bf16, double fp8, double hbm_bw, double hbm_gb) {
    cluster_gpu g;
    memset(&g, 0, sizeof g);
    snprintf(g.name, sizeof g.name, "%s", name);
    g.peak_flops[PRECISION_BF16] = g.peak_flops[PRECISION_FP16] = bf16;
    g.peak_flops[PRECISION_FP8] = fp8;
    g.peak_flops[PRECISION_TF32] = bf16 / 2;
    g.peak_flops[PRECISION_FP32] = bf16 / 15;
    g.hbm_bw = hbm_bw;
    g.hbm_bytes = (int64_t)(hbm_gb * 1e9);
    g.sm_count = 132;
    g.clock_ghz = 1.8;
    return g;
}

cluster plan_test_cluster(int n_nodes, cluster_gpu gpu) {
    cluster c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "test-h100x%d", 8 * n_nodes);
    c.n_gpu_types = 1;
    c.gpus[0] = gpu;
    c.n_groups = 1;
    c.groups[0] = (cluster_group){.gpu_type = 0, .n_nodes = n_nodes};
    c.gpus_per_node = 8;
    c.intra_bw = 450e9;
    c.intra_latency_us = 3;
    c.nics_per_node = 8;
    c.nic_bw = 50e9;
    c.inter_latency_us = 6;
    c.pod_gpus = 0;
    c.pod_oversubscription = 1;
    c.p2p_efficiency = 0.9;
    c.collective_efficiency = 0.8;
    return c;
}

gpt_config plan_test_model(const char *text) {
    gpt_config cfg;
    char msg[256];
    cr_assert_eq(gpt_config_parse(text, &cfg, msg, sizeof msg), PL_OK, "%s", msg);
    return cfg;
}
