/*
 * test_sim_engine.c: the simulator against the engine it models.
 *
 * The engine's own plan compiler (hw/exec/program.c) runs here on the CPU backend,
 * through tests/sim/hw_replay: for random placements of a small GPT, the
 * simulator must issue the same compute operations in the same order on
 * every device, the same transfers on every comm stream (two devices), the
 * same number of early issues, predict the same peak as the engine's arena
 * high-water mark, and the same step time as the replay of the engine's
 * instruction lists on a clock (written independently of sim_core.c). Plus a
 * scattered placement timed by hand.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw.h"
#include "hw_replay.h"
#include "profiler.h"
#include "sim.h"
#include "sim_fixtures.h"
#include "util.h"

#define WS_BYTES (1 << 20) /* the modelled backend's workspace */
#define EAGER (4LL << 20)  /* the simulator's eager-send limit (sim_core.c) */

typedef struct {
    graph *g;
    profile_data *p;
    sim_ctx *ctx;
    hw_engine *e;
} efix;

/* A GPT whose tensors are all multiples of 64 floats at every micro-batch
 * size (so the engine's padded parameter shards are the profile's
 * parameter bytes, and its activations are linear in the micro-batch size,
 * as per-sample figures assume; true of the shipped GPT too, T = 256), a
 * roofline profile over D devices, and the engine's memory figures as the
 * profiler writes them (each call's workspace on its own). */
static efix efix_make_cfg(const char *spec, int D) {
    efix f;
    gpt_config cfg;
    char msg[256] = "";
    cr_assert_eq(gpt_config_parse(spec, &cfg, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(graph_build_gpt(&cfg, &f.g, msg, sizeof msg), PL_OK, "%s", msg);
    f.p = simfix_roofline_profile(f.g, D);
    cr_assert_not_null(f.p);
    for (int i = 0; i < f.g->n_nodes; i++) profiler_node_mem(f.g, i, 16, WS_BYTES, &f.p->node_mem[i]);
    f.ctx = NULL;
    cr_assert_eq(sim_ctx_create(f.g, f.p, 4, &f.ctx), PL_OK);
    cr_assert_eq(sim_ctx_set_trace(f.ctx, 1), PL_OK);
    hw_engine_opts o;
    memset(&o, 0, sizeof o);
    o.backend = HW_BACKEND_CPU;
    o.n_devices = D;
    cr_assert_eq(hw_engine_create(&o, &f.e, msg, sizeof msg), PL_OK, "%s", msg);
    return f;
}

static efix efix_make(int D) { return efix_make_cfg("tiny,d_model=64,seq=64", D); }

static void efix_free(efix *f) {
    sim_ctx_destroy(f->ctx);
    hw_engine_destroy(f->e);
    profile_data_destroy(f->p);
    graph_destroy(f->g);
}

/* start, then end (a zero-length op before the one it precedes), then the
 * order sim_events gave */
static int by_start(const void *a, const void *b) {
    const sim_event *x = *(const sim_event *const *)a, *y = *(const sim_event *const *)b;
    if (x->start_us != y->start_us) return x->start_us < y->start_us ? -1 : 1;
    if (x->end_us != y->end_us) return x->end_us < y->end_us ? -1 : 1;
    return (x > y) - (x < y);
}

/* The simulator's compute (comm = 0) or transfer (comm = 1) work on device
 * d, in start order, in hw_replay's token format. */
static void sim_order(const sim_event *ev, int n, int d, int comm, char *buf, size_t len) {
    const sim_event **v = calloc((size_t)n + 1, sizeof *v);
    cr_assert_not_null(v);
    int k = 0;
    for (int e = 0; e < n; e++) {
        int xfer = ev[e].kind == SIM_EV_SEND_ACT || ev[e].kind == SIM_EV_SEND_GRAD;
        if (xfer != comm) continue;
        /* the compute stream's order: not the gradients' zero on the comm
         * stream, which starts with the first forward (their order by start
         * time is a tie) */
        if (!comm && ev[e].stream != 0) continue;
        if (comm ? (ev[e].device == d || ev[e].dst_device == d) : ev[e].device == d) v[k++] = &ev[e];
    }
    qsort(v, (size_t)k, sizeof *v, by_start);
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < k && off < len; i++) {
        const sim_event *x = v[i];
        int w = 0;
        const char *g = x->kind == SIM_EV_SEND_GRAD ? "g" : "";
        switch (x->kind) {
        case SIM_EV_FWD: w = snprintf(buf + off, len - off, "F%d.%d ", x->node, x->micro_batch); break;
        case SIM_EV_BWD: w = snprintf(buf + off, len - off, "B%d.%d ", x->node, x->micro_batch); break;
        case SIM_EV_WGRAD: w = snprintf(buf + off, len - off, "W%d.%d ", x->node, x->micro_batch); break;
        case SIM_EV_ADD: w = snprintf(buf + off, len - off, "A%d.%d ", x->node, x->micro_batch); break;
        case SIM_EV_ZERO: w = snprintf(buf + off, len - off, "Z "); break;
        case SIM_EV_OPT: w = snprintf(buf + off, len - off, "O "); break;
        default:
            if (x->device == d)
                w = snprintf(buf + off, len - off, "S%s%d.%d>%d ", g, x->node, x->micro_batch, x->dst_device);
            else
                w = snprintf(buf + off, len - off, "R%s%d.%d<%d ", g, x->node, x->micro_batch, x->device);
        }
        off += (size_t)(w > 0 ? w : 0);
    }
    free(v);
}

/* One placement and schedule: every figure the engine defines must agree. */
static void compare(efix *f, const int *dev, schedule s, const sim_params *prm) {
    const int n = f->g->n_nodes, D = f->p->n_devices;
    char pl[256], msg[256] = "";
    placement_format(dev, n, pl, sizeof pl);
    hw_replay *rp = NULL;
    cr_assert_eq(hw_replay_compile(f->e, f->g, dev, &s, WS_BYTES, NULL, &rp, msg, sizeof msg), PL_OK, "%s: %s", pl,
                 msg);
    sim_result r;
    cr_assert_eq(sim_run(f->ctx, dev, &s, NULL, prm, &r), PL_OK, "%s: %s", pl, sim_last_error(f->ctx));
    int ne = 0;
    const sim_event *ev = sim_events(f->ctx, &ne);
    static char a[16384], b[16384];
    for (int d = 0; d < D; d++) {
        sim_order(ev, ne, d, 0, a, sizeof a);
        hw_replay_compute_order(rp, d, b, sizeof b);
        cr_assert_str_eq(a, b, "%s m=%d %s device %d compute order", schedule_order_name(s.order), s.micro_batches,
                         pl, d);
        if (r.n_used_devices == 2) {
            sim_order(ev, ne, d, 1, a, sizeof a);
            hw_replay_comm_order(rp, d, b, sizeof b);
            cr_assert_str_eq(a, b, "%s m=%d %s device %d comm order", schedule_order_name(s.order), s.micro_batches,
                             pl, d);
        }
        cr_assert_eq(r.peak_bytes[d], hw_replay_need_bytes(rp, d), "%s m=%d %s device %d peak: sim %lld, engine %lld",
                     schedule_order_name(s.order), s.micro_batches, pl, d, (long long)r.peak_bytes[d],
                     (long long)hw_replay_need_bytes(rp, d));
    }
    cr_assert_eq(r.reorders, hw_replay_reorders(rp), "%s", pl);
    cr_assert_eq(r.n_transfers, hw_replay_transfers(rp), "%s", pl);
    double ends[HW_MAX_DEVICES], step = 0;
    cr_assert_eq(hw_replay_time(rp, f->p, prm, EAGER, ends, &step), PL_OK);
    cr_assert(epsilon_eq(dbl, r.step_us, step, 1e-9 * step), "%s m=%d %s: sim %.6f, replay %.6f",
              schedule_order_name(s.order), s.micro_batches, pl, r.step_us, step);
    hw_replay_destroy(rp);
}

static void random_placement(pl_rng *r, int style, int n, int D, int *dev) {
    if (style == 0) {
        for (int i = 0; i < n; i++) dev[i] = pl_rng_int(r, D);
    } else {
        int d = pl_rng_int(r, D);
        for (int i = 0; i < n; i++) {
            if (pl_rng_int(r, 5) == 0) d = pl_rng_int(r, D);
            dev[i] = d;
        }
    }
}

static void sweep(int D, uint64_t seed, int count) {
    efix f = efix_make(D);
    sim_params prm;
    sim_params_default(&prm);
    prm.launch_overhead_us = 0.5;
    prm.transfer_latency_us = 3.0;
    prm.compute_scale = 1.1;
    prm.transfer_scale = 1.2;
    prm.multi_device_start_us = 20.0;
    prm.multi_device_launch_us = 0.7;
    pl_rng r;
    pl_rng_seed(&r, seed);
    int dev[64];
    for (int t = 0; t < count; t++) {
        random_placement(&r, t % 2, f.g->n_nodes, D, dev);
        for (int m = 1; m <= 4; m *= 2)
            for (int o = 0; o < 2; o++) compare(&f, dev, schedule_make(m, o ? SCHED_1F1B : SCHED_GPIPE), &prm);
    }
    efix_free(&f);
}

Test(sim_engine, two_devices_match_the_engine_plan_op_for_op, .timeout = 300) { sweep(2, 11, 40); }

/* zb-h1 (and zb-h2): the engine's compiled order with B and W apart
 * against the simulator's, op for op, the peaks, early issues, transfers
 * and the replayed step time, over random and contiguous placements on
 * 2, 3 and 4 devices, m = 2 and 4 */
Test(sim_engine, zero_bubble_orders_match_the_engine_plan_op_for_op, .timeout = 300) {
    sim_params prm;
    sim_params_default(&prm);
    prm.launch_overhead_us = 0.5;
    prm.transfer_latency_us = 3.0;
    prm.multi_device_start_us = 20.0;
    for (int D = 2; D <= 4; D++) {
        efix f = efix_make(D);
        const int n = f.g->n_nodes;
        pl_rng r;
        pl_rng_seed(&r, 28 + (uint64_t)D);
        int dev[64];
        for (int t = 0; t < 12; t++) {
            if (t < 4)
                for (int i = 0; i < n; i++) dev[i] = i * D / n; /* contiguous */
            else
                random_placement(&r, t % 2, n, D, dev);
            for (int m = 2; m <= 4; m *= 2) {
                compare(&f, dev, schedule_make(m, SCHED_ZB_H1), &prm);
                compare(&f, dev, schedule_make(m, SCHED_ZB_H2), &prm);
            }
        }
        efix_free(&f);
    }
}

Test(sim_engine, three_devices_match_the_engine_plan_op_for_op, .timeout = 300) { sweep(3, 12, 30); }

Test(sim_engine, four_devices_match_the_engine_plan_op_for_op, .timeout = 300) { sweep(4, 13, 30); }

Test(sim_engine, contiguous_and_single_device_placements_match_the_engine_plan) {
    efix f = efix_make(2);
    const int n = f.g->n_nodes;
    int dev[64];
    for (int cut = 0; cut <= n; cut++) {
        for (int i = 0; i < n; i++) dev[i] = i < cut ? 0 : 1;
        for (int m = 1; m <= 4; m *= 2)
            for (int o = 0; o < 2; o++) compare(&f, dev, schedule_make(m, o ? SCHED_1F1B : SCHED_GPIPE), NULL);
    }
    efix_free(&f);
}

/* A head whose forward sets a device's peak: with a vocabulary of 16,384 the
 * logits (4 MB a micro-batch of one sample) dwarf the layers, and the head's
 * backward has a scratch (x^T) that its forward lacks while the MLP's
 * forward has none of its backward's. A simulator that reserved one
 * scratch size for both calls over-stated such peaks (GPipe m=2 with the
 * loss alone on device 1: device 0 by 131,072 B). Every contiguous split
 * and some random placements, both schedules. */
Test(sim_engine, a_forward_peak_matches_the_engine_plan, .timeout = 300) {
    efix f = efix_make_cfg("tiny,d_model=256,seq=64,vocab=16384", 2);
    const int n = f.g->n_nodes;
    int dev[64];
    for (int cut = 0; cut <= n; cut++) {
        for (int i = 0; i < n; i++) dev[i] = i < cut ? 0 : 1;
        for (int m = 1; m <= 2; m *= 2)
            for (int o = 0; o < 2; o++) compare(&f, dev, schedule_make(m, o ? SCHED_1F1B : SCHED_GPIPE), NULL);
    }
    pl_rng r;
    pl_rng_seed(&r, 17);
    for (int t = 0; t < 10; t++) {
        random_placement(&r, t % 2, n, 2, dev);
        for (int o = 0; o < 2; o++) compare(&f, dev, schedule_make(2, o ? SCHED_1F1B : SCHED_GPIPE), NULL);
    }
    efix_free(&f);
}

/* A scattered placement by hand: the chain c0 -> c1 -> c2 on devices
 * 0, 1, 0, 1F1B with m = 2 (device 0 ranks first: one warm-up forward),
 * forward 1 us, backward 2 us, every transfer 5 us. Device 0's order is
 * F0.0 F2.0 F0.1 F2.1 B2.0 B0.0 B2.1 B0.1; device 1's F1.0 B1.0 F1.1 B1.1.
 * Issued in turns, device 0 stalls at F2.1 (it needs F1.1, which device 1
 * runs after B1.0, which needs B2.0): both are stuck, so device 0 issues
 * B2.0 early (one reorder). On the clock (every transfer waits for both
 * comm streams, in issue order, and the receiver waits for it at first use):
 *   F0.0 [0,1]  act c0.0 [1,6]   F1.0 [6,7]   act c1.0 [7,12]  F2.0 [12,13]
 *   F0.1 [13,14] act c0.1 [14,19] B2.0 [14,16] grad c1.0 [19,24]
 *   B1.0 [24,26] grad c0.0 [26,31] F1.1 [26,27] act c1.1 [31,36]
 *   F2.1 [36,37] B0.0 [37,39] B2.1 [39,41] grad c1.1 [41,46] B1.1 [46,48]
 *   grad c0.1 [48,53] B0.1 [53,55]: 55 us, 40 of them transfers on the
 *   critical path. */
Test(sim_engine, scattered_placement_by_hand) {
    graph *g = simfix_chain_graph(3, 2);
    profile_data *p = simfix_unit_profile(g, 2, 1, 1.0, 2.0, 0.0, 0);
    p->node_mem[0].out_bytes_per_sample = p->node_mem[1].out_bytes_per_sample = 1000;
    p->links[1].latency_us = p->links[2].latency_us = 5.0;
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, 2, &ctx), PL_OK);
    cr_assert_eq(sim_ctx_set_trace(ctx, 1), PL_OK);
    int dev[3] = {0, 1, 0};
    schedule s = schedule_make(2, SCHED_1F1B);
    sim_result r;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, NULL, &r), PL_OK, "%s", sim_last_error(ctx));
    cr_assert(ieee_ulp_eq(dbl, r.step_us, 55.0, 0), "%.17g", r.step_us);
    cr_assert_eq(r.reorders, 1);
    cr_assert_eq(r.n_transfers, 8);
    int ne = 0;
    const sim_event *ev = sim_events(ctx, &ne);
    char buf[512];
    sim_order(ev, ne, 0, 0, buf, sizeof buf);
    /* by start time: B2.0 ran before F2.1 */
    cr_assert_str_eq(buf, "F0.0 F2.0 F0.1 B2.0 F2.1 B0.0 B2.1 B0.1 O ");
    sim_order(ev, ne, 1, 0, buf, sizeof buf);
    cr_assert_str_eq(buf, "F1.0 B1.0 F1.1 B1.1 O ");
    sim_order(ev, ne, 0, 1, buf, sizeof buf);
    cr_assert_str_eq(buf, "S0.0>1 R1.0<1 S0.1>1 Sg1.0>1 Rg0.0<1 R1.1<1 Sg1.1>1 Rg0.1<1 ");
    /* the critical path: gapless from 0 to 55 */
    int nc = 0;
    const sim_event *cp = sim_critical_path(ctx, &nc);
    cr_assert(nc > 0);
    cr_assert(ieee_ulp_eq(dbl, cp[nc - 1].end_us, 55.0, 0));
    for (int k = 1; k < nc; k++) cr_assert(ieee_ulp_eq(dbl, cp[k].start_us, cp[k - 1].end_us, 0));
    cr_assert(ieee_ulp_eq(dbl, r.critical_transfer_us, 40.0, 0), "%.17g", r.critical_transfer_us);
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}
