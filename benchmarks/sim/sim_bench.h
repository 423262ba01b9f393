/*
 * sim_bench.h: what sim_speed and sim_checksum share: a GPT from a config
 * string ("default,layers=24"), its spec profile built in memory for a
 * machine of the spec table (micro-batch sizes 1 to 16), and a simulator
 * context for both. Header-only: each benchmark is one file.
 */
#ifndef PLACER_SIM_BENCH_H
#define PLACER_SIM_BENCH_H

#include <stdio.h>

#include "graph.h"
#include "sim.h"
#include "spec.h"

typedef struct {
    graph *g;
    profile_data *p;
    sim_ctx *ctx;
} sim_bench;

static void sim_bench_close(sim_bench *b) {
    sim_ctx_destroy(b->ctx);
    profile_data_destroy(b->p);
    graph_destroy(b->g);
    *b = (sim_bench){0};
}

/* Build b for config on spec machine spec_name with `devices` devices (0:
 * the spec's own count), sized for up to max_m micro-batches. Returns 0, or
 * 1 after one line on stderr prefixed by `who` (b is then empty). */
static int sim_bench_open(sim_bench *b, const char *who, const char *config, const char *spec_name, int devices,
                          int max_m) {
    char msg[256] = "";
    gpt_config cfg;
    *b = (sim_bench){0};
    if (gpt_config_parse(config, &cfg, msg, sizeof msg) != PL_OK ||
        graph_build_gpt(&cfg, &b->g, msg, sizeof msg) != PL_OK) {
        fprintf(stderr, "%s: %s\n", who, msg);
        return 1;
    }
    machine_spec spec = *spec_find(spec_name);
    if (devices > 0) spec.n_devices = devices;
    int sizes[5] = {1, 2, 4, 8, 16};
    if (spec_profile_build(&spec, b->g, sizes, 5, &b->p) != PL_OK ||
        sim_ctx_create(b->g, b->p, max_m, &b->ctx) != PL_OK) {
        fprintf(stderr, "%s: cannot build the profile or context\n", who);
        sim_bench_close(b);
        return 1;
    }
    return 0;
}

#endif
