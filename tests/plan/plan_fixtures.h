/*
 * plan_fixtures.h: the planner tests' GPUs, clusters and models, built in
 * memory (synthetic figures: the tests hold properties, not the
 * simulator's numbers).
 */
#ifndef PLACER_TESTS_PLAN_FIXTURES_H
#define PLACER_TESTS_PLAN_FIXTURES_H

#include "cluster.h"
#include "graph.h"

/* A GPU roughly like a datasheet's: bf16 peak (fp16 the same, tf32 half,
 * fp32 a fifteenth), fp8 peak (0: none), HBM bandwidth and size; 132 SMs at
 * 1.8 GHz. */
cluster_gpu plan_test_gpu(const char *name, double bf16, double fp8, double hbm_bw, double hbm_gb);

/* n_nodes nodes of 8 of gpu, NVSwitch inside (450 GB/s), 8 x 400 Gb/s
 * between, named "test-h100xN". */
cluster plan_test_cluster(int n_nodes, cluster_gpu gpu);

/* gpt_config_parse(text), asserting it parses. */
gpt_config plan_test_model(const char *text);

#endif
