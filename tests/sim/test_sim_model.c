/*
 * test_sim_model.c: memory, transfers, parameters and input checking of the
 * simulator, against hand-computed cases.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>

#include "sim.h"
#include "sim_fixtures.h"

/* A 4-stage chain, batch 16, m = 8 (micro-batch of 2 samples), one node per
 * device: node i has 1000*(i+1) parameter bytes, keeps 100 B per sample for
 * backward, outputs 10 B per sample; node 0 needs 7 B of workspace. */
typedef struct {
    graph *g;
    profile_data *p;
    sim_ctx *ctx;
} chain4;

static chain4 chain4_make(void) {
    chain4 c;
    c.g = simfix_chain_graph(4, 16);
    cr_assert_not_null(c.g);
    c.p = simfix_unit_profile(c.g, 4, 2, 1.0, 2.0, 0.0, 1LL << 30);
    cr_assert_not_null(c.p);
    for (int i = 0; i < 4; i++) {
        c.p->node_mem[i].param_bytes = 1000 * (i + 1);
        c.p->node_mem[i].act_bytes_per_sample = 100;
        c.p->node_mem[i].out_bytes_per_sample = 10;
    }
    c.p->node_mem[0].workspace_bytes = 7;
    c.ctx = NULL;
    cr_assert_eq(sim_ctx_create(c.g, c.p, 8, &c.ctx), PL_OK);
    return c;
}

static void chain4_free(chain4 *c) {
    sim_ctx_destroy(c->ctx);
    profile_data_destroy(c->p);
    graph_destroy(c->g);
}

Test(sim_memory, one_f_one_b_stashes_fewer_micro_batches_than_gpipe) {
    chain4 c = chain4_make();
    int dev[4] = {0, 1, 2, 3};
    schedule s = schedule_make(8, SCHED_1F1B), gp = schedule_make(8, SCHED_GPIPE);
    sim_result r, q;
    cr_assert_eq(sim_run(c.ctx, dev, &s, NULL, NULL, &r), PL_OK);
    cr_assert_eq(sim_run(c.ctx, dev, &gp, NULL, NULL, &q), PL_OK);
    /* in flight under 1F1B: p - stage micro-batches; under GPipe all m */
    for (int d = 0; d < 4; d++) {
        cr_assert_eq(r.max_in_flight[d], 4 - d);
        cr_assert_eq(q.max_in_flight[d], 8);
        cr_assert_lt(r.peak_bytes[d], q.peak_bytes[d], "device %d: 1F1B %lld, GPipe %lld", d,
                     (long long)r.peak_bytes[d], (long long)q.peak_bytes[d]);
        cr_assert_gt(r.peak_bytes[d], r.static_bytes[d]);
        /* four parameter-sized buffers and the step counter, 256-byte blocks */
        int64_t pb = (1000 * (d + 1) + 255) / 256 * 256;
        cr_assert_eq(r.static_bytes[d], 4 * pb + 256, "device %d", d);
    }
    cr_assert_eq(r.oom, 0);
    cr_assert_eq(r.oom_device, -1);
    chain4_free(&c);
}

/* One device, m = 1, a chain of two layernorms: the arena, first fit in
 * the engine's order, by hand (all sizes are multiples of the 256-byte
 * alignment). Static: 4 x (1024 + 2048) parameter-sized buffers + 256
 * for the step counter = 12544 (no workspace: the smallest over nodes is
 * 0). F0: out0 [12544,12800), saved0 (768 - 256 = 512: its consumer
 * reads it again) [12800,13312), scratch 512 [13312,13824), freed. F1:
 * out1 [13312,13568), saved1 (512: nobody consumes node 1, the output is
 * not kept) [13568,14080); out1 has no use: freed. B1: node 0's gradient
 * takes out1's hole; saved1 freed; out0 released. B0: scratch 512 fits no
 * hole, goes on top [13568,14080). High-water mark 14080. */
Test(sim_memory, single_device_arena_follows_the_engine_lifetimes) {
    graph *g = simfix_chain_graph(2, 1);
    profile_data *p = simfix_unit_profile(g, 1, 1, 1.0, 2.0, 0.5, 1LL << 30);
    p->node_mem[0] = (profile_node_mem){1024, 768, 256, 512, 0, 0};
    p->node_mem[1] = (profile_node_mem){2048, 512, 256, 0, 0, 0};
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, 1, &ctx), PL_OK);
    int dev[2] = {0, 0};
    schedule s = schedule_make(1, SCHED_GPIPE);
    sim_result r;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, NULL, &r), PL_OK, "%s", sim_last_error(ctx));
    cr_assert_eq(r.static_bytes[0], 12544);
    cr_assert_eq(r.peak_bytes[0], 14080);
    int64_t caps[1] = {14080};
    cr_assert_eq(sim_run(ctx, dev, &s, caps, NULL, &r), PL_OK);
    cr_assert_eq(r.oom, 0);
    caps[0] = 14079;
    cr_assert_eq(sim_run(ctx, dev, &s, caps, NULL, &r), PL_OK);
    cr_assert_eq(r.oom, 1);
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}

Test(sim_memory, oom_verdict_against_caps) {
    chain4 c = chain4_make();
    int dev[4] = {0, 1, 2, 3};
    schedule s = schedule_make(8, SCHED_1F1B);
    sim_result r;
    cr_assert_eq(sim_run(c.ctx, dev, &s, NULL, NULL, &r), PL_OK);
    int64_t caps[4];
    for (int d = 0; d < 4; d++) caps[d] = r.peak_bytes[d]; /* exactly the peaks: fits */
    cr_assert_eq(sim_run(c.ctx, dev, &s, caps, NULL, &r), PL_OK);
    cr_assert_eq(r.oom, 0);
    for (int d = 0; d < 4; d++) cr_assert_eq(r.cap_bytes[d], caps[d]);
    caps[2] -= 1;
    caps[3] -= 1;
    cr_assert_eq(sim_run(c.ctx, dev, &s, caps, NULL, &r), PL_OK);
    cr_assert_eq(r.oom, 1);
    cr_assert_eq(r.oom_device, 2, "the first device over its cap");
    cr_assert(r.step_us > 0, "an OOM still predicts a time");
    /* GPipe does not fit the 1F1B caps on device 0 */
    caps[2] = caps[3] = 0; /* no cap */
    schedule gp = schedule_make(8, SCHED_GPIPE);
    cr_assert_eq(sim_run(c.ctx, dev, &gp, caps, NULL, &r), PL_OK);
    cr_assert_eq(r.oom, 1);
    cr_assert_eq(r.oom_device, 0);
    /* NULL caps: the devices' own memory */
    cr_assert_eq(sim_run(c.ctx, dev, &s, NULL, NULL, &r), PL_OK);
    c.p->devices[1].mem_bytes = r.peak_bytes[1] - 1;
    cr_assert_eq(sim_run(c.ctx, dev, &s, NULL, NULL, &r), PL_OK);
    cr_assert_eq(r.oom, 1);
    cr_assert_eq(r.oom_device, 1);
    cr_assert_eq(r.cap_bytes[1], c.p->devices[1].mem_bytes);
    chain4_free(&c);
}

Test(sim_memory, two_consumers_on_one_device_share_one_received_buffer) {
    /* GPT block: node 0 feeds ln1.0 (1) and res1.0 (3). Put 0 on device 0
     * and the rest on device 1: node 0's output crosses once per micro-batch. */
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    profile_data *p = simfix_roofline_profile(g, 2);
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, 4, &ctx), PL_OK);
    int dev[64];
    for (int i = 0; i < g->n_nodes; i++) dev[i] = i == 0 ? 0 : 1;
    schedule s = schedule_make(1, SCHED_1F1B);
    sim_result r;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, NULL, &r), PL_OK);
    cr_assert_eq(r.n_transfers, 2, "one activation and one gradient");
    double ob = (double)p->node_mem[0].out_bytes_per_sample * cfg.batch;
    cr_assert(ieee_ulp_eq(dbl, r.transfer_bytes, 2 * ob, 0));
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}

/* One device: the step is every node phase, one fused AdamW, the ZERO of
 * the gradients (and of the loss accumulator), each scaled and with its
 * launch overhead, plus the fixed cost. The roofline profile's AdamW costs
 * lie exactly on 4 us + 7/3e6 us per parameter byte: that is the fused
 * update's line, and a memset costs a seventh of its slope per byte. */
Test(sim_time, single_device_step_is_the_sum_of_node_costs_and_overheads) {
    graph *g = NULL;
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("default", &cfg, NULL, 0), PL_OK);
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    profile_data *p = simfix_roofline_profile(g, 4);
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, 16, &ctx), PL_OK);
    int dev[64];
    for (int i = 0; i < g->n_nodes; i++) dev[i] = 2;
    sim_params prm;
    sim_params_default(&prm);
    prm.launch_overhead_us = 3.0;
    prm.transfer_latency_us = 5.0;
    prm.contention = 0.3;
    prm.step_fixed_us = 100.0;
    prm.compute_scale = 1.5;
    prm.transfer_scale = 2.0;
    prm.multi_device_start_us = 1000.0; /* one device: neither applies */
    prm.multi_device_launch_us = 50.0;
    const double slope = 28.0 / 3e12 * 1e6 / 4.0; /* us per parameter byte */
    double pbytes = 0;
    for (int i = 0; i < g->n_nodes; i++) pbytes += (double)p->node_mem[i].param_bytes;
    for (int bf = 0; bf < 2; bf++)
    for (int m = 1; m <= 16; m *= 2)
        for (int o = 0; o < 2; o++) {
            p->bf16 = bf; /* a profile measured in bf16 */
            schedule s = schedule_make(m, o ? SCHED_1F1B : SCHED_GPIPE);
            sim_result r;
            cr_assert_eq(sim_run(ctx, dev, &s, NULL, &prm, &r), PL_OK);
            int mb = cfg.batch / m;
            double sum = 0.0;
            for (int i = 0; i < g->n_nodes; i++) {
                double f = profile_node_cost(p, 2, mb, i, PHASE_FWD), b = profile_node_cost(p, 2, mb, i, PHASE_BWD);
                if (g->nodes[i].kind == OP_LOSS) sum += m * ((f + b) * 1.5 + 3.0); /* one call */
                else sum += m * (f * 1.5 + 3.0) + m * (b * 1.5 + 3.0);
            }
            sum += (4.0 + slope * pbytes) * 1.5 + 3.0;       /* AdamW */
            sum += slope / 7.0 * 8.0 * 1.5 + 3.0;            /* ZERO of the loss sum */
            /* the gradients' ZERO runs on the comm stream beside the forward,
             * which is longer: it adds nothing; in bf16 on the compute stream */
            const double zero = slope / 7.0 * pbytes * 1.5 + 3.0;
            double fwd = 0.0;
            for (int i = 0; i < g->n_nodes; i++)
                if (g->nodes[i].kind != OP_LOSS) fwd += profile_node_cost(p, 2, mb, i, PHASE_FWD) * 1.5 + 3.0;
            cr_assert(zero < fwd, "m=%d: the zero (%.3f us) outlasts a forward (%.3f us)", m, zero, fwd);
            if (bf) sum += zero;
            cr_assert(epsilon_eq(dbl, r.step_us, sum + 100.0, 1e-9 * sum), "bf16 %d m=%d: %.6f vs %.6f", bf, m,
                      r.step_us, sum + 100.0);
            cr_assert(epsilon_eq(dbl, r.busy_us[2], sum, 1e-9 * sum));
            /* idle is step_us - busy: only the fixed per-step cost */
            cr_assert(epsilon_eq(dbl, r.idle_us[2], 100.0, 1e-9 * sum));
            cr_assert(epsilon_eq(dbl, r.bubble[2], 100.0 / sum, 1e-9));
            cr_assert_eq(r.n_transfers, 0);
            cr_assert_eq(r.n_used_devices, 1);
            cr_assert(ieee_ulp_eq(dbl, r.busy_us[0], 0.0, 0));
        }
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}

/* Two devices, one node each, m = 1. Node 0's output (1000 B) goes
 * 0 -> 1 in 5 us and its gradient 1 -> 0 in 7 + 1 us. The nodes have no
 * parameters, so AdamW launches nothing; each device still zeroes a 4-byte
 * gradient buffer (a launch, free at neutral parameters). */
Test(sim_time, a_cut_edge_costs_its_transfer_both_ways) {
    graph *g = simfix_chain_graph(2, 1);
    profile_data *p = simfix_unit_profile(g, 2, 1, 1.0, 2.0, 0.5, 0);
    p->node_mem[0].out_bytes_per_sample = 1000;
    p->links[0 * 2 + 1].latency_us = 5.0; /* no curve: latency + bytes / bandwidth */
    p->links[1 * 2 + 0].latency_us = 7.0;
    p->links[1 * 2 + 0].bandwidth = 1e9;  /* 1000 B -> 1 us */
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, 1, &ctx), PL_OK);
    int dev[2] = {0, 1};
    schedule s = schedule_make(1, SCHED_1F1B);
    sim_result r;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, NULL, &r), PL_OK);
    /* F0 1, act 5, F1 1, B1 2, grad 8, B0 2 */
    cr_assert(epsilon_eq(dbl, r.step_us, 19.0, 1e-9), "%.17g", r.step_us);
    cr_assert_eq(r.n_transfers, 2);
    sim_params prm;
    sim_params_default(&prm);
    prm.transfer_scale = 2.0;
    prm.transfer_latency_us = 1.0;
    prm.launch_overhead_us = 0.25;
    prm.step_fixed_us = 10.0;
    prm.multi_device_start_us = 100.0;
    prm.multi_device_launch_us = 0.5;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, &prm, &r), PL_OK);
    /* every launch costs 0.75: F0 1.75, act 11, F1 1.75, B1 2.75, grad 17,
     * B0 2.75; plus 10 and 100 once. Each device's gradient ZERO (0.75)
     * runs on its comm stream beside F0, before the act transfer */
    cr_assert(epsilon_eq(dbl, r.step_us, 1.75 + 11 + 1.75 + 2.75 + 17 + 2.75 + 10.0 + 100.0, 1e-9), "%.17g",
              r.step_us);
    /* critical path: F0 act F1 B1 grad B0 adamw(dev 0) */
    int n = 0;
    const sim_event *cp = sim_critical_path(ctx, &n);
    cr_assert_eq(n, 7);
    cr_assert_eq(r.critical_path_len, 7);
    cr_assert_eq(cp[0].kind, SIM_EV_FWD);
    cr_assert_eq(cp[1].kind, SIM_EV_SEND_ACT);
    cr_assert_eq(cp[4].kind, SIM_EV_SEND_GRAD);
    cr_assert_eq(cp[6].kind, SIM_EV_OPT);
    cr_assert_eq(cp[6].device, 0);
    cr_assert(epsilon_eq(dbl, r.critical_transfer_us, 28.0, 1e-9));
    cr_assert(epsilon_eq(dbl, cp[6].end_us, r.step_us - 110.0, 1e-9));
    /* the zeros are on the comm streams, before the transfers */
    cr_assert_eq(sim_ctx_set_trace(ctx, 1), PL_OK);
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, &prm, &r), PL_OK);
    int nz = 0, ne = 0;
    const sim_event *ev = sim_events(ctx, &ne);
    for (int e = 0; e < ne; e++)
        if (ev[e].kind == SIM_EV_ZERO) {
            nz++;
            cr_assert_eq(ev[e].stream, 1);
            cr_assert(epsilon_eq(dbl, ev[e].start_us, 0.0, 1e-9));
            cr_assert(epsilon_eq(dbl, ev[e].end_us, 0.75, 1e-9));
        }
    cr_assert_eq(nz, 2);
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}

Test(sim_time, contention_slows_both_ends_of_a_transfer) {
    graph *g = simfix_chain_graph(2, 1);
    profile_data *p = simfix_unit_profile(g, 2, 1, 1.0, 2.0, 0.0, 0);
    p->node_mem[0].out_bytes_per_sample = 1000; /* a transfer of 0 bytes is free */
    p->links[1].latency_us = 10.0;
    p->links[2].latency_us = 10.0;
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, 1, &ctx), PL_OK);
    int dev[2] = {0, 1};
    schedule s = schedule_make(1, SCHED_GPIPE);
    sim_params prm;
    sim_params_default(&prm);
    prm.contention = 0.1;
    sim_result r;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, &prm, &r), PL_OK);
    /* F0 1, act 10, F1 1 + 1 (the receiver pays 0.1 * 10), B1 2, grad 10,
     * B0 2 + 1 + 1 (the activation's sender charge and the gradient's
     * receiver charge); device 1's AdamW takes the gradient's sender charge
     * off the path */
    cr_assert(epsilon_eq(dbl, r.step_us, 1 + 10 + 2 + 2 + 10 + 2 + 1 + 1, 1e-12), "%.17g", r.step_us);
    int dev1[2] = {1, 1};
    cr_assert_eq(sim_run(ctx, dev1, &s, NULL, &prm, &r), PL_OK);
    cr_assert(ieee_ulp_eq(dbl, r.step_us, 6.0, 0), "no transfer, no contention");
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}

Test(sim_input, rejects_bad_placements_and_schedules) {
    chain4 c = chain4_make();
    sim_result r;
    schedule s = schedule_make(4, SCHED_1F1B);
    int bad[4] = {0, 1, 4, 0};
    cr_assert_eq(sim_run(c.ctx, bad, &s, NULL, NULL, &r), PL_ERR_PLACEMENT_RANGE);
    cr_assert(strstr(sim_last_error(c.ctx), "node 2") != NULL, "%s", sim_last_error(c.ctx));
    int neg[4] = {0, -1, 0, 0};
    cr_assert_eq(sim_run(c.ctx, neg, &s, NULL, NULL, &r), PL_ERR_PLACEMENT_RANGE);
    int ok[4] = {0, 1, 2, 3};
    schedule s3 = schedule_make(3, SCHED_1F1B);
    cr_assert_eq(sim_run(c.ctx, ok, &s3, NULL, NULL, &r), PL_ERR_SCHEDULE, "3 does not divide 16");
    schedule s16 = schedule_make(16, SCHED_1F1B);
    cr_assert_eq(sim_run(c.ctx, ok, &s16, NULL, NULL, &r), PL_ERR_SCHEDULE, "more than max_micro_batches");
    schedule s0 = schedule_make(0, SCHED_1F1B);
    cr_assert_eq(sim_run(c.ctx, ok, &s0, NULL, NULL, &r), PL_ERR_SCHEDULE);
    schedule sc = {4, SCHED_1F1B, 2};
    cr_assert_eq(sim_run(c.ctx, ok, &sc, NULL, NULL, &r), PL_ERR_SCHEDULE, "chunks need interleaved");
    schedule so = {4, (schedule_order)7, 1};
    cr_assert_eq(sim_run(c.ctx, ok, &so, NULL, NULL, &r), PL_ERR_SCHEDULE);
    /* interleaved: 4 runs over 4 devices is not 2 chunks each */
    schedule si = {4, SCHED_INTERLEAVED, 2};
    cr_assert_eq(sim_run(c.ctx, ok, &si, NULL, NULL, &r), PL_ERR_SCHEDULE);
    int chunked[4] = {0, 1, 0, 1};
    cr_assert_eq(sim_run(c.ctx, chunked, &si, NULL, NULL, &r), PL_OK, "%s", sim_last_error(c.ctx));
    cr_assert_str_eq(sim_last_error(c.ctx), "");
    int backwards[4] = {0, 1, 1, 0}; /* 3 runs */
    cr_assert_eq(sim_run(c.ctx, backwards, &si, NULL, NULL, &r), PL_ERR_SCHEDULE);
    schedule si1 = {1, SCHED_INTERLEAVED, 2}; /* m = 1 not a multiple of p = 2 */
    cr_assert_eq(sim_run(c.ctx, chunked, &si1, NULL, NULL, &r), PL_ERR_SCHEDULE);
    cr_assert_eq(sim_run(c.ctx, NULL, &s, NULL, NULL, &r), PL_ERR_INVALID);
    int ncp = -1;
    cr_assert_null(sim_critical_path(c.ctx, &ncp), "no path after a failed run");
    cr_assert_eq(ncp, 0);
    cr_assert_eq(sim_run(NULL, ok, &s, NULL, NULL, &r), PL_ERR_INVALID);
    /* a context for a graph the profile does not describe */
    graph *g5 = simfix_chain_graph(5, 16);
    sim_ctx *x = (sim_ctx *)&r;
    cr_assert_eq(sim_ctx_create(g5, c.p, 4, &x), PL_ERR_INVALID);
    cr_assert_null(x);
    cr_assert_eq(sim_ctx_create(c.g, c.p, 0, &x), PL_ERR_INVALID);
    graph_destroy(g5);
    sim_ctx_destroy(NULL);
    chain4_free(&c);
}

Test(sim_input, params_have_stable_names) {
    sim_params prm;
    sim_params_default(&prm);
    const char *names[SIM_N_PARAMS] = {"launch_overhead_us", "transfer_latency_us", "contention",
                                       "step_fixed_us",      "compute_scale",       "transfer_scale",
                                       "multi_device_start_us", "multi_device_launch_us"};
    const double neutral[SIM_N_PARAMS] = {0, 0, 0, 0, 1, 1, 0, 0};
    for (int i = 0; i < SIM_N_PARAMS; i++) {
        cr_assert_str_eq(sim_param_name(i), names[i]);
        cr_assert(ieee_ulp_eq(dbl, *sim_param_ptr(&prm, i), neutral[i], 0));
        cr_assert_eq(sim_param_signed(i), i == 0, "%s", names[i]);
    }
    cr_assert_null(sim_param_name(SIM_N_PARAMS));
    cr_assert_null(sim_param_ptr(&prm, -1));
}

Test(sim_model, negative_or_nonfinite_params_are_refused) {
    /* calibration once fed a negative value, which used to hang sim_run */
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    int mb[1] = {4};
    profile_data *p = NULL;
    cr_assert_eq(profile_data_create(2, g->n_nodes, 1, mb, &p), PL_OK);
    for (size_t i = 0; i < (size_t)2 * g->n_nodes * PHASE_COUNT; i++) p->cost_us[i] = 1.0;
    p->devices[0].mem_bytes = p->devices[1].mem_bytes = 1LL << 40;
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, 4, &ctx), PL_OK);
    int place[64] = {0};
    schedule s = schedule_make(1, SCHED_GPIPE);
    sim_result r;
    for (int i = 0; i < SIM_N_PARAMS; i++) {
        sim_params prm;
        sim_params_default(&prm);
        *sim_param_ptr(&prm, i) = -1.0;
        cr_assert_eq(sim_run(ctx, place, &s, NULL, &prm, &r), sim_param_signed(i) ? PL_OK : PL_ERR_INVALID, "%s",
                     sim_param_name(i));
        *sim_param_ptr(&prm, i) = NAN;
        cr_assert_eq(sim_run(ctx, place, &s, NULL, &prm, &r), PL_ERR_INVALID, "%s", sim_param_name(i));
        *sim_param_ptr(&prm, i) = INFINITY;
        cr_assert_eq(sim_run(ctx, place, &s, NULL, &prm, &r), PL_ERR_INVALID, "%s", sim_param_name(i));
    }
    cr_assert_eq(sim_run(ctx, place, &s, NULL, NULL, &r), PL_OK);
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}

/* A negative launch overhead takes time off every call but never makes a
 * duration negative: every node costs 1 us here, so -0.4 leaves 0.6 and
 * -5 leaves 0 (the step then costs nothing but the fixed cost). */
Test(sim_model, negative_launch_overhead_clamps_each_duration_at_zero) {
    graph *g = simfix_chain_graph(3, 1);
    profile_data *p = simfix_unit_profile(g, 1, 1, 1.0, 1.0, 0.0, 0);
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, 1, &ctx), PL_OK);
    int dev[3] = {0, 0, 0};
    schedule s = schedule_make(1, SCHED_GPIPE);
    sim_params prm;
    sim_params_default(&prm);
    prm.launch_overhead_us = -0.4;
    sim_result r;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, &prm, &r), PL_OK, "%s", sim_last_error(ctx));
    /* 3 forwards and 3 backwards at 0.6; ZERO (no parameters: 0 - 0.4) is 0 */
    cr_assert(epsilon_eq(dbl, r.step_us, 6 * 0.6, 1e-12), "%.17g", r.step_us);
    prm.launch_overhead_us = -5.0;
    prm.step_fixed_us = 7.0;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, &prm, &r), PL_OK);
    cr_assert(ieee_ulp_eq(dbl, r.step_us, 7.0, 0), "%.17g", r.step_us);
    int n = 0;
    const sim_event *cp = sim_critical_path(ctx, &n);
    cr_assert(n > 0);
    for (int k = 0; k < n; k++) cr_assert(ieee_ulp_eq(dbl, cp[k].end_us, 0.0, 0));
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}
