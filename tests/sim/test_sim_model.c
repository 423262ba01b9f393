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

Test(sim_memory, one_f_one_b_stashes_p_micro_batches_on_the_first_stage) {
    chain4 c = chain4_make();
    int dev[4] = {0, 1, 2, 3};
    schedule s = schedule_make(8, SCHED_1F1B);
    sim_result r;
    cr_assert_eq(sim_run(c.ctx, dev, &s, NULL, NULL, &r), PL_OK);
    /* in flight: p - stage micro-batches */
    cr_assert_eq(r.max_in_flight[0], 4);
    cr_assert_eq(r.max_in_flight[1], 3);
    cr_assert_eq(r.max_in_flight[2], 2);
    cr_assert_eq(r.max_in_flight[3], 1);
    /* device 0: 4 params-sized buffers + workspace + 4 stashes of 100*2 +
     * the received output gradient 10*2 during a backward */
    cr_assert_eq(r.static_bytes[0], 4000);
    cr_assert_eq(r.peak_bytes[0], 4000 + 7 + 4 * 200 + 20);
    /* device 1: 3 in flight, each its stash and the received input (10*2),
     * plus one output gradient */
    cr_assert_eq(r.peak_bytes[1], 8000 + 3 * 220 + 20);
    cr_assert_eq(r.peak_bytes[2], 12000 + 2 * 220 + 20);
    /* the last stage: one stash and one received input, no gradient in */
    cr_assert_eq(r.peak_bytes[3], 16000 + 220);
    cr_assert_eq(r.oom, 0);
    cr_assert_eq(r.oom_device, -1);
    chain4_free(&c);
}

Test(sim_memory, gpipe_stashes_all_m_micro_batches) {
    chain4 c = chain4_make();
    int dev[4] = {0, 1, 2, 3};
    schedule s = schedule_make(8, SCHED_GPIPE);
    sim_result r;
    cr_assert_eq(sim_run(c.ctx, dev, &s, NULL, NULL, &r), PL_OK);
    for (int d = 0; d < 4; d++) cr_assert_eq(r.max_in_flight[d], 8);
    cr_assert_eq(r.peak_bytes[0], 4000 + 7 + 8 * 200 + 20);
    cr_assert_eq(r.peak_bytes[1], 8000 + 8 * 220 + 20);
    cr_assert_eq(r.peak_bytes[3], 16000 + 8 * 220);
    chain4_free(&c);
}

Test(sim_memory, oom_verdict_against_caps) {
    chain4 c = chain4_make();
    int dev[4] = {0, 1, 2, 3};
    schedule s = schedule_make(8, SCHED_1F1B);
    sim_result r;
    int64_t caps[4] = {4827, 8680, 12460, 16220}; /* exactly the peaks: fits */
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
    c.p->devices[1].mem_bytes = 8679;
    cr_assert_eq(sim_run(c.ctx, dev, &s, NULL, NULL, &r), PL_OK);
    cr_assert_eq(r.oom, 1);
    cr_assert_eq(r.oom_device, 1);
    cr_assert_eq(r.cap_bytes[1], 8679);
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
    /* device 1 holds every stash of its nodes and node 0's output once */
    int64_t act = 0, st = 0, ws = 0;
    for (int i = 1; i < g->n_nodes; i++) {
        act += p->node_mem[i].act_bytes_per_sample * cfg.batch;
        st += 4 * p->node_mem[i].param_bytes;
        if (p->node_mem[i].workspace_bytes > ws) ws = p->node_mem[i].workspace_bytes;
    }
    cr_assert_eq(r.peak_bytes[1], st + ws + act + p->node_mem[0].out_bytes_per_sample * cfg.batch);
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}

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
    sim_params prm = {3.0, 5.0, 0.3, 100.0, 1.5, 2.0};
    for (int m = 1; m <= 16; m *= 2)
        for (int o = 0; o < 2; o++) {
            schedule s = schedule_make(m, o ? SCHED_1F1B : SCHED_GPIPE);
            sim_result r;
            cr_assert_eq(sim_run(ctx, dev, &s, NULL, &prm, &r), PL_OK);
            int mb = cfg.batch / m;
            double sum = 0.0;
            for (int i = 0; i < g->n_nodes; i++) {
                sum += m * (profile_node_cost(p, 2, mb, i, PHASE_FWD) * 1.5 + 3.0);
                sum += m * (profile_node_cost(p, 2, mb, i, PHASE_BWD) * 1.5 + 3.0);
                sum += profile_node_cost(p, 2, mb, i, PHASE_OPT) * 1.5 + 3.0;
            }
            cr_assert(epsilon_eq(dbl, r.step_us, sum + 100.0, 1e-9 * sum), "m=%d: %.6f vs %.6f", m, r.step_us,
                      sum + 100.0);
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
    /* F0 1, act 5, F1 1, B1 2, grad 8, B0 2, AdamW 0.5 */
    cr_assert(epsilon_eq(dbl, r.step_us, 19.5, 1e-9), "%.17g", r.step_us);
    cr_assert_eq(r.n_transfers, 2);
    sim_params prm;
    sim_params_default(&prm);
    prm.transfer_scale = 2.0;
    prm.transfer_latency_us = 1.0;
    prm.launch_overhead_us = 0.25;
    prm.step_fixed_us = 10.0;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, &prm, &r), PL_OK);
    /* compute 4 items * 0.25 + 2 AdamW * 0.25; transfers 11 and 17 */
    cr_assert(epsilon_eq(dbl, r.step_us, 1.25 + 11 + 1.25 + 2.25 + 17 + 2.25 + 0.75 + 10.0, 1e-9), "%.17g",
              r.step_us);
    /* critical path: F0 act F1 B1 grad B0 adamw(dev 0) */
    int n = 0;
    const sim_event *cp = sim_critical_path(ctx, &n);
    cr_assert_eq(n, 7);
    cr_assert_eq(r.critical_path_len, 7);
    cr_assert_eq(cp[1].kind, SIM_EV_SEND_ACT);
    cr_assert_eq(cp[4].kind, SIM_EV_SEND_GRAD);
    cr_assert_eq(cp[6].kind, SIM_EV_OPT);
    cr_assert(epsilon_eq(dbl, r.critical_transfer_us, 28.0, 1e-9));
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
                                       "step_fixed_us", "compute_scale", "transfer_scale"};
    const double neutral[SIM_N_PARAMS] = {0, 0, 0, 0, 1, 1};
    for (int i = 0; i < SIM_N_PARAMS; i++) {
        cr_assert_str_eq(sim_param_name(i), names[i]);
        cr_assert(ieee_ulp_eq(dbl, *sim_param_ptr(&prm, i), neutral[i], 0));
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
        cr_assert_eq(sim_run(ctx, place, &s, NULL, &prm, &r), PL_ERR_INVALID, "%s", sim_param_name(i));
        *sim_param_ptr(&prm, i) = NAN;
        cr_assert_eq(sim_run(ctx, place, &s, NULL, &prm, &r), PL_ERR_INVALID, "%s", sim_param_name(i));
    }
    cr_assert_eq(sim_run(ctx, place, &s, NULL, NULL, &r), PL_OK);
    sim_ctx_destroy(ctx);
    profile_data_destroy(p);
    graph_destroy(g);
}
