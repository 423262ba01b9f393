/*
 * test_sim_random.c: random placements of the 40-node GPT never deadlock,
 * and every traced run obeys the model's rules (checked independently of
 * the simulator by simfix_check_trace).
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "sim_fixtures.h"
#include "util.h"

typedef struct {
    graph *g;
    profile_data *p;
    sim_ctx *ctx;
} gpt_fix;

static gpt_fix gpt_make(const char *config, int n_devices, int max_m) {
    gpt_fix f;
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse(config, &cfg, NULL, 0), PL_OK);
    cr_assert_eq(graph_build_gpt(&cfg, &f.g, NULL, 0), PL_OK);
    f.p = simfix_roofline_profile(f.g, n_devices);
    cr_assert_not_null(f.p);
    f.ctx = NULL;
    cr_assert_eq(sim_ctx_create(f.g, f.p, max_m, &f.ctx), PL_OK);
    return f;
}

static void gpt_free(gpt_fix *f) {
    sim_ctx_destroy(f->ctx);
    profile_data_destroy(f->p);
    graph_destroy(f->g);
}

/* Placement styles: uniform random, few long runs, alternating devices. */
static void random_placement(pl_rng *r, int style, int n, int D, int *dev) {
    if (style == 0) {
        for (int i = 0; i < n; i++) dev[i] = pl_rng_int(r, D);
    } else if (style == 1) {
        int d = pl_rng_int(r, D);
        for (int i = 0; i < n; i++) {
            if (pl_rng_int(r, 8) == 0) d = pl_rng_int(r, D);
            dev[i] = d;
        }
    } else {
        for (int i = 0; i < n; i++) dev[i] = (i + (i / 3)) % D;
    }
}

static void check_run(gpt_fix *f, const int *dev, schedule s, const sim_params *prm) {
    sim_result r;
    pl_status st = sim_run(f->ctx, dev, &s, NULL, prm, &r);
    char pl[512];
    placement_format(dev, f->g->n_nodes, pl, sizeof pl);
    cr_assert_eq(st, PL_OK, "%s m=%d placement %s: %s", schedule_order_name(s.order), s.micro_batches, pl,
                 sim_last_error(f->ctx));
    int n = 0;
    const sim_event *ev = sim_events(f->ctx, &n);
    char msg[256];
    const int ideal = s.order == SCHED_INTERLEAVED && s.chunks > 1;
    cr_assert(simfix_check_trace(f->g, dev, s.micro_batches, ideal, ev, n, 1e-6, msg, sizeof msg), "%s m=%d %s: %s",
              schedule_order_name(s.order), s.micro_batches, pl, msg);
    int nx = 0;
    for (int e = 0; e < n; e++) nx += ev[e].dst_device >= 0;
    cr_assert_eq(r.n_transfers, nx);
    /* the critical path is gapless from 0 to the end of the step */
    int nc = 0;
    const sim_event *cp = sim_critical_path(f->ctx, &nc);
    cr_assert_eq(nc, r.critical_path_len);
    cr_assert(nc > 0);
    cr_assert(epsilon_eq(dbl, cp[0].start_us, 0.0, 1e-9));
    for (int k = 1; k < nc; k++)
        cr_assert(epsilon_eq(dbl, cp[k].start_us, cp[k - 1].end_us, 1e-6), "gap on the critical path at %d", k);
    double span = r.step_us - (prm ? prm->step_fixed_us : 0.0);
    cr_assert(epsilon_eq(dbl, cp[nc - 1].end_us, span, 1e-6 * span));
    cr_assert(epsilon_eq(dbl, r.critical_compute_us + r.critical_transfer_us, span, 1e-6 * span));
}

Test(sim_random, gpt_placements_never_deadlock_and_obey_the_model, .timeout = 600) {
    gpt_fix f = gpt_make("default", 8, 8);
    sim_ctx_set_trace(f.ctx, 1);
    pl_rng r;
    pl_rng_seed(&r, 20240501);
    int dev[64];
    sim_params lat;
    sim_params_default(&lat);
    lat.transfer_latency_us = 3.0;
    lat.launch_overhead_us = 1.0;
    for (int D = 2; D <= 8; D++)
        for (int m = 1; m <= 8; m *= 2)
            for (int o = 0; o < 2; o++)
                for (int t = 0; t < 30; t++) {
                    random_placement(&r, t % 3, f.g->n_nodes, D, dev);
                    schedule s = schedule_make(m, o ? SCHED_1F1B : SCHED_GPIPE);
                    check_run(&f, dev, s, t % 2 ? &lat : NULL);
                }
    gpt_free(&f);
}

/* A wider sweep without traces: 500 placements per (devices, m, order). */
Test(sim_random, many_gpt_placements_never_deadlock, .timeout = 600) {
    gpt_fix f = gpt_make("default", 8, 8);
    pl_rng r;
    pl_rng_seed(&r, 777);
    int dev[64];
    long runs = 0;
    for (int D = 2; D <= 8; D++)
        for (int m = 1; m <= 8; m *= 2)
            for (int o = 0; o < 2; o++)
                for (int t = 0; t < 500; t++) {
                    random_placement(&r, t % 2, f.g->n_nodes, D, dev);
                    schedule s = schedule_make(m, o ? SCHED_1F1B : SCHED_GPIPE);
                    sim_result res;
                    pl_status st = sim_run(f.ctx, dev, &s, NULL, NULL, &res);
                    cr_assert_eq(st, PL_OK, "%s", sim_last_error(f.ctx));
                    cr_assert(res.step_us > 0 && res.critical_path_len > 0);
                    runs++;
                }
    cr_assert_eq(runs, 7L * 4 * 2 * 500);
    gpt_free(&f);
}

Test(sim_random, untraced_runs_match_traced_runs) {
    gpt_fix f = gpt_make("default", 4, 4);
    pl_rng r;
    pl_rng_seed(&r, 7);
    int dev[64];
    sim_params prm = {2.0, 4.0, 0.2, 50.0, 1.1, 0.9, 30.0, 1.5};
    for (int t = 0; t < 50; t++) {
        random_placement(&r, t % 3, f.g->n_nodes, 4, dev);
        schedule s = schedule_make(1 << (t % 3), t % 2 ? SCHED_1F1B : SCHED_GPIPE);
        sim_result a, b;
        sim_ctx_set_trace(f.ctx, 0);
        cr_assert_eq(sim_run(f.ctx, dev, &s, NULL, &prm, &a), PL_OK);
        cr_assert_null(sim_events(f.ctx, NULL));
        sim_ctx_set_trace(f.ctx, 1);
        cr_assert_eq(sim_run(f.ctx, dev, &s, NULL, &prm, &b), PL_OK);
        cr_assert_eq(memcmp(&a, &b, sizeof a), 0, "results depend on tracing");
    }
    gpt_free(&f);
}

Test(sim_random, contention_never_speeds_a_step_up) {
    gpt_fix f = gpt_make("default", 4, 4);
    pl_rng r;
    pl_rng_seed(&r, 99);
    int dev[64];
    sim_params c0, c1;
    sim_params_default(&c0);
    sim_params_default(&c1);
    c1.contention = 0.5;
    for (int t = 0; t < 100; t++) {
        random_placement(&r, t % 3, f.g->n_nodes, 4, dev);
        schedule s = schedule_make(4, SCHED_1F1B);
        sim_result a, b;
        cr_assert_eq(sim_run(f.ctx, dev, &s, NULL, &c0, &a), PL_OK);
        cr_assert_eq(sim_run(f.ctx, dev, &s, NULL, &c1, &b), PL_OK);
        cr_assert(b.step_us >= a.step_us - 1e-9);
        if (a.n_transfers > 0) cr_assert(b.step_us > a.step_us);
    }
    gpt_free(&f);
}

/* Interleaved on chunk placements of the GPT: v*p runs cycling over p
 * devices, cut at random points. */
Test(sim_random, interleaved_chunk_placements_never_deadlock, .timeout = 600) {
    gpt_fix f = gpt_make("default", 8, 16);
    sim_ctx_set_trace(f.ctx, 1);
    pl_rng r;
    pl_rng_seed(&r, 4242);
    const int n = f.g->n_nodes;
    int dev[64], cuts[64];
    for (int p = 2; p <= 8; p *= 2)
        for (int v = 2; v <= 4; v++) {
            int S = p * v;
            if (S > n) continue;
            for (int t = 0; t < 20; t++) {
                /* S - 1 distinct cut points in 1..n-1 */
                int pool[64];
                for (int i = 0; i < n - 1; i++) pool[i] = i + 1;
                pl_rng_shuffle(&r, pool, n - 1);
                for (int i = 0; i < S - 1; i++) cuts[i] = pool[i];
                for (int a = 1; a < S - 1; a++) /* insertion sort */
                    for (int b = a; b > 0 && cuts[b - 1] > cuts[b]; b--) {
                        int tmp = cuts[b];
                        cuts[b] = cuts[b - 1];
                        cuts[b - 1] = tmp;
                    }
                int k = 0;
                for (int i = 0; i < n; i++) {
                    while (k < S - 1 && i >= cuts[k]) k++;
                    dev[i] = k % p;
                }
                for (int m = p; m <= 16; m += p) {
                    schedule s = {m, SCHED_INTERLEAVED, v};
                    if (f.g->cfg.batch % m) continue;
                    check_run(&f, dev, s, NULL);
                }
            }
        }
    gpt_free(&f);
}

Test(sim_random, larger_graphs_and_devices_run) {
    gpt_fix f = gpt_make("default,layers=24", 8, 16);
    pl_rng r;
    pl_rng_seed(&r, 5);
    int dev[256];
    for (int t = 0; t < 20; t++) {
        random_placement(&r, t % 3, f.g->n_nodes, 8, dev);
        schedule s = schedule_make(16, t % 2 ? SCHED_1F1B : SCHED_GPIPE);
        sim_result res;
        cr_assert_eq(sim_run(f.ctx, dev, &s, NULL, NULL, &res), PL_OK, "%s", sim_last_error(f.ctx));
        cr_assert(res.step_us > 0);
    }
    gpt_free(&f);
}

/* Without tracing the ops' records are not written during the run:
 * sim_critical_path runs the step again to get them. The path must be the
 * traced run's, event for event, and asking must leave the results alone. */
Test(sim_random, untraced_critical_path_is_the_traced_one) {
    gpt_fix f = gpt_make("default", 4, 8);
    pl_rng r;
    pl_rng_seed(&r, 77);
    int dev[64];
    sim_params prm;
    sim_params_default(&prm);
    prm.contention = 0.2;
    prm.transfer_latency_us = 4.0;
    for (int t = 0; t < 12; t++) {
        random_placement(&r, t % 3, f.g->n_nodes, 4, dev);
        schedule s = schedule_make(t % 2 ? 4 : 8, t % 4 < 2 ? SCHED_1F1B : SCHED_GPIPE);
        sim_result traced, plain;
        /* untraced first: what ops[] holds is the previous placement's */
        sim_ctx_set_trace(f.ctx, 0);
        cr_assert_eq(sim_run(f.ctx, dev, &s, NULL, &prm, &plain), PL_OK);
        int np = 0;
        const sim_event *cpp = sim_critical_path(f.ctx, &np);
        cr_assert(np > 0);
        cr_assert_eq(np, plain.critical_path_len);
        cr_assert_null(sim_events(f.ctx, NULL), "no events without tracing");
        cr_assert_str_empty(sim_last_error(f.ctx));
        int n2 = 0; /* asked twice: the same path */
        cr_assert_eq(sim_critical_path(f.ctx, &n2), cpp);
        cr_assert_eq(n2, np);
        sim_event *want = malloc(sizeof *want * (size_t)np);
        cr_assert_not_null(want);
        memcpy(want, cpp, sizeof *want * (size_t)np);
        sim_ctx_set_trace(f.ctx, 1);
        cr_assert_eq(sim_run(f.ctx, dev, &s, NULL, &prm, &traced), PL_OK);
        cr_assert_eq(memcmp(&traced, &plain, sizeof plain), 0, "run %d: tracing changed the result", t);
        int nt = 0;
        const sim_event *cpt = sim_critical_path(f.ctx, &nt);
        cr_assert_eq(nt, np, "run %d", t);
        cr_assert_eq(memcmp(cpt, want, sizeof *want * (size_t)np), 0, "run %d: the paths differ", t);
        free(want);
    }
    gpt_free(&f);
}
