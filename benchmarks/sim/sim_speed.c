/*
 * sim_speed.c: how many training steps the simulator predicts per second on
 * one core.
 *
 * Random placements (uniform device per node, fixed seed) of the GPT over a
 * spec profile built in memory: the h200x4-nvlink machine description, with
 * its device count changed for the 2- and 8-device rows. Every case runs
 * after a warm-up for --seconds of wall time on one thread (pinned to one
 * core when the OS allows) and reports simulations per second and the time
 * per simulation. Targets (issue 5): >= 200,000/s for the default GPT over 4
 * devices at m = 1, >= 50,000/s at m = 4 with 1F1B.
 *
 *   sim_speed [--seconds S] [--seed N] [--cpu] [--case K]   (K: run only row K, from 0)
 *
 * --cpu times the thread's CPU time instead of wall time (on a machine
 * shared with other work, wall time also counts the time the thread
 * waited for the core). See README.md for figures and how to compare two
 * versions of the simulator side by side.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph.h"
#include "placement.h"
#include "sim.h"
#include "spec.h"
#include "util.h"
#include "sim_bench.h"

#define N_PLACEMENTS 4096

typedef struct {
    const char *label; /* what the row varies */
    const char *config; /* gpt config text */
    int devices;       /* devices in the machine and the placements */
    int m;             /* micro-batches */
    schedule_order order;
    double target;     /* simulations/s to meet, 0 = none */
} bench_case;

static const bench_case CASES[] = {
    {"default GPT, 4 dev, m=1", "default", 4, 1, SCHED_GPIPE, 200000},
    {"default GPT, 4 dev, m=1", "default", 4, 1, SCHED_1F1B, 200000},
    {"default GPT, 4 dev, m=4", "default", 4, 4, SCHED_1F1B, 50000},
    {"default GPT, 4 dev, m=4", "default", 4, 4, SCHED_GPIPE, 0},
    {"default GPT, 4 dev, m=16", "default", 4, 16, SCHED_1F1B, 0},
    {"layers  6 (40 nodes)", "default", 4, 4, SCHED_1F1B, 0},
    {"layers 24 (148 nodes)", "default,layers=24", 4, 4, SCHED_1F1B, 0},
    {"layers 96 (580 nodes)", "default,layers=96", 4, 4, SCHED_1F1B, 0},
    {"devices 2", "default", 2, 4, SCHED_1F1B, 0},
    {"devices 4", "default", 4, 4, SCHED_1F1B, 0},
    {"devices 8", "default", 8, 4, SCHED_1F1B, 0},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

/* Microseconds of wall time, or of this thread's CPU time when cpu != 0. */
static double now_us(int cpu) {
#ifdef CLOCK_THREAD_CPUTIME_ID
    if (cpu) {
        struct timespec ts;
        if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
    }
#else
    (void)cpu;
#endif
    return pl_now_us();
}

static int run_case(const bench_case *bc, double seconds, uint64_t seed, int cpu, int *met) {
    sim_bench b;
    if (sim_bench_open(&b, "sim_speed", bc->config, "h200x4-nvlink", bc->devices, bc->m) != 0) return 1;
    sim_ctx *ctx = b.ctx;
    int *pl = NULL, rc = 1;
    const int n = b.g->n_nodes;
    pl = malloc(sizeof *pl * (size_t)n * N_PLACEMENTS);
    if (!pl) goto out;
    pl_rng r;
    pl_rng_seed(&r, seed);
    for (int k = 0; k < N_PLACEMENTS * n; k++) pl[k] = pl_rng_int(&r, bc->devices);
    schedule s = schedule_make(bc->m, bc->order);
    sim_result res;
    double sum = 0.0;
    int stages = 0;
    /* warm-up: every placement once */
    for (int k = 0; k < N_PLACEMENTS; k++) {
        if (sim_run(ctx, pl + (size_t)k * n, &s, NULL, NULL, &res) != PL_OK) {
            fprintf(stderr, "sim_speed: %s\n", sim_last_error(ctx));
            goto out;
        }
        stages += res.n_stages;
    }
    long iters = 0;
    double t0 = now_us(cpu), t1 = t0;
    while (t1 - t0 < seconds * 1e6) {
        for (int k = 0; k < 1024; k++) {
            sim_run(ctx, pl + (size_t)((iters + k) % N_PLACEMENTS) * n, &s, NULL, NULL, &res);
            sum += res.step_us;
        }
        iters += 1024;
        t1 = now_us(cpu);
    }
    double rate = iters / ((t1 - t0) * 1e-6);
    int ok = bc->target <= 0 || rate >= bc->target;
    if (!ok) *met = 0;
    char tgt[32] = "";
    if (bc->target > 0) snprintf(tgt, sizeof tgt, ">= %.0f %s", bc->target, ok ? "met" : "MISSED");
    printf("%-26s %-6s %5d %6.1f %12.0f %10.2f %12.3f  %s\n", bc->label, schedule_order_name(bc->order), n,
           (double)stages / N_PLACEMENTS, rate, (t1 - t0) / iters, sum / iters / 1000.0, tgt);
    rc = 0;
out:
    free(pl);
    sim_bench_close(&b);
    return rc;
}

int main(int argc, char **argv) {
    double seconds = 1.0;
    uint64_t seed = 1;
    int cpu = 0, only = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--cpu")) cpu = 1;
        else if (!strcmp(argv[i], "--case") && i + 1 < argc) only = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: sim_speed [--seconds S] [--seed N] [--cpu] [--case K]\n");
            return 2;
        }
    }
    if (!(seconds > 0)) {
        fprintf(stderr, "sim_speed: --seconds must be positive\n");
        return 2;
    }
#ifdef __linux__
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
    int pinned = sched_setaffinity(0, sizeof one, &one) == 0;
#else
    int pinned = 0;
#endif
    printf("sim_speed: random placements (seed %llu, %d of them) on spec h200x4-nvlink, one thread%s, %.1f s of %s "
           "per row\n\n",
           (unsigned long long)seed, N_PLACEMENTS, pinned ? " pinned to one core" : "", seconds,
           cpu ? "thread CPU time" : "wall time");
    printf("%-26s %-6s %5s %6s %12s %10s %12s  %s\n", "case", "order", "nodes", "stages", "sims/s", "us/sim",
           "mean step ms", "target");
    int met = 1;
    for (size_t c = 0; c < N_CASES; c++)
        if ((only < 0 || (size_t)only == c) && run_case(&CASES[c], seconds, seed, cpu, &met) != 0) return 1;
    printf("\n%s\n", met ? "all targets met" : "some targets MISSED");
    return 0;
}
