/*
 * sim_checksum.c: one FNV-1a hash over everything sim_run reports, for many
 * runs, so that a change meant to make the simulator faster can be shown to
 * leave its results bit-identical (build it before and after, compare the
 * two lines it prints).
 *
 * What it covers: the GPT at 6 and 24 layers; the spec profiles t4x4-pcie,
 * h200x2-nvlink and h200x4-nvlink, the last also with 2 and 8 devices; per
 * profile uniform random, blocky random (runs of one device) and contiguous
 * placements; m = 1, 2, 4, 8, 16 under gpipe and 1f1b, interleaved with 2
 * and 3 chunks on chunk placements; neutral and non-neutral parameters
 * (contention, negative launch overhead, latency, fixed costs); caps that
 * make some runs OOM; tracing on for every seventh placement. Hashed per
 * run: the status, the whole sim_result (zeroed before the call, so padding
 * is stable), the critical path and the trace events. The context is
 * reused across m and orders, as the placers do.
 *
 *   sim_checksum [--quick]
 *
 * --quick runs about a tenth of the placements (a smoke check).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "placement.h"
#include "sim.h"
#include "spec.h"
#include "util.h"
#include "sim_bench.h"

typedef struct {
    uint64_t h; /* FNV-1a state */
    long runs;  /* successful runs hashed */
} hasher;

static void mix(hasher *hs, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        hs->h ^= b[i];
        hs->h *= 1099511628211ull;
    }
}

/* One run: hash its status and, on success, its result, critical path and events. */
static void run_one(hasher *hs, sim_ctx *ctx, const int *pl, const schedule *s, const int64_t *caps,
                    const sim_params *prm) {
    sim_result res;
    memset(&res, 0, sizeof res);
    pl_status st = sim_run(ctx, pl, s, caps, prm, &res);
    mix(hs, &st, sizeof st);
    if (st != PL_OK) return;
    mix(hs, &res, sizeof res);
    hs->runs++;
    int nc = 0, ne = 0;
    const sim_event *cp = sim_critical_path(ctx, &nc);
    mix(hs, &nc, sizeof nc);
    if (cp) mix(hs, cp, sizeof *cp * (size_t)nc);
    const sim_event *ev = sim_events(ctx, &ne);
    mix(hs, &ne, sizeof ne);
    if (ev) mix(hs, ev, sizeof *ev * (size_t)ne);
}

/* Every placement kind, m and order for one graph and machine. Returns 0, or 1 on a setup failure. */
static int run_machine(hasher *hs, const char *config, const char *spec_name, int devices, int n_pl, uint64_t seed) {
    static const int MS[] = {1, 2, 4, 8, 16};
    static const schedule_order ORDERS[] = {SCHED_GPIPE, SCHED_1F1B};
    sim_bench b;
    if (sim_bench_open(&b, "sim_checksum", config, spec_name, devices, 16) != 0) return 1;
    const graph *g = b.g;
    sim_ctx *ctx = b.ctx;
    const int D = b.p->n_devices;
    int *pl = NULL, rc = 1;
    const int n = g->n_nodes;
    pl = malloc(sizeof *pl * (size_t)n);
    if (!pl) goto out;
    pl_rng r;
    pl_rng_seed(&r, seed);
    for (int k = 0; k < n_pl; k++) {
        const int mode = k % 4;
        if (mode == 3) { /* contiguous */
            for (int i = 0; i < n; i++) pl[i] = (int)((long)i * D / n);
        } else if (mode == 2) { /* blocky: runs of one device */
            int cur = 0;
            for (int i = 0; i < n; i++) {
                if (pl_rng_int(&r, 8) == 0) cur = pl_rng_int(&r, D);
                pl[i] = cur;
            }
        } else {
            for (int i = 0; i < n; i++) pl[i] = pl_rng_int(&r, D);
        }
        sim_params prm;
        sim_params_default(&prm);
        if (k & 1) {
            prm.contention = 0.3;
            prm.launch_overhead_us = -2;
            prm.transfer_latency_us = 5;
            prm.multi_device_launch_us = 1;
            prm.multi_device_start_us = 3;
            prm.step_fixed_us = 10;
            prm.compute_scale = 1.1;
            prm.transfer_scale = 0.9;
        }
        int64_t caps[SIM_MAX_DEVICES];
        for (int d = 0; d < SIM_MAX_DEVICES; d++) caps[d] = (int64_t)(k % 5) << 30;
        sim_ctx_set_trace(ctx, k % 7 == 0);
        for (size_t mi = 0; mi < sizeof MS / sizeof MS[0]; mi++)
            for (size_t oi = 0; oi < sizeof ORDERS / sizeof ORDERS[0]; oi++) {
                schedule s = schedule_make(MS[mi], ORDERS[oi]);
                run_one(hs, ctx, pl, &s, (k & 2) ? caps : NULL, &prm);
            }
        if (mode == 3)
            for (int v = 2; v <= 3; v++) {
                for (int i = 0; i < n; i++) pl[i] = (int)((long)i * D * v / n) % D;
                schedule s = schedule_make(D * 2 <= 16 ? D * 2 : D, SCHED_INTERLEAVED);
                s.chunks = v;
                run_one(hs, ctx, pl, &s, NULL, &prm);
            }
    }
    rc = 0;
out:
    free(pl);
    sim_bench_close(&b);
    return rc;
}

int main(int argc, char **argv) {
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (argc > 2 || (argc == 2 && !quick)) {
        fprintf(stderr, "usage: sim_checksum [--quick]\n");
        return 2;
    }
    static const struct {
        const char *config, *spec;
        int devices, n_pl;
    } MACHINES[] = {
        {"default", "h200x4-nvlink", 4, 4000},        {"default", "h200x4-nvlink", 2, 2000},
        {"default", "h200x4-nvlink", 8, 2000},        {"default", "t4x4-pcie", 0, 2000},
        {"default", "h200x2-nvlink", 0, 1000},        {"default,layers=24", "h200x4-nvlink", 4, 600},
        {"default,layers=24", "h200x4-nvlink", 8, 300},
    };
    hasher hs = {1469598103934665603ull, 0};
    for (size_t k = 0; k < sizeof MACHINES / sizeof MACHINES[0]; k++) {
        int n_pl = quick ? MACHINES[k].n_pl / 10 : MACHINES[k].n_pl;
        if (run_machine(&hs, MACHINES[k].config, MACHINES[k].spec, MACHINES[k].devices, n_pl, 7 + 10 * k) != 0)
            return 1;
    }
    printf("runs %ld checksum %016llx\n", hs.runs, (unsigned long long)hs.h);
    return 0;
}
