/*
 * test_layout_sim.c: the layout step (sim/layout/layout_sim.c) against closed
 * forms: the pipeline bubble (p-1)/(v m) with free sends, a tp-only
 * layout's collective time as the ring formula, a dp-only layout whose
 * reduction hides behind backward but for its last buckets, zero-3 memory
 * at 1/dp of zero-0's for the sharded parts, Megatron's FLOP formulas, the
 * breakdown summing to the step, the published sizes (pp 64 with 512
 * micro-batches; Llama 3 405B on 16,384 GPUs) and the trace.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost_fixtures.h"
#include "layout_sim.h"

/* A model whose embedding and head are negligible next to its layers. */
static gpt_config small_vocab_model(int layers) {
    gpt_config g = costfix_megatron_gpt(2048, 16, layers);
    g.vocab = 128;
    g.tied = 0;
    g.pos = POS_ROTARY;
    return g;
}

static layout parse_layout(const char *text) {
    layout l;
    char msg[256];
    cr_assert_eq(layout_parse(text, &l, msg, sizeof msg), PL_OK, "%s: %s", text, msg);
    return l;
}

static layout_result run(const gpt_config *g, const layout *l, const cluster *c, const layout_sim_params *p) {
    layout_sim *s = NULL;
    char msg[256] = "";
    cr_assert_eq(layout_sim_create(g, l, c, &s, msg, sizeof msg), PL_OK, "%s", msg);
    layout_result r;
    cr_assert_eq(layout_sim_run(s, p, 0, &r, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim_destroy(s);
    return r;
}

static double sum_parts(const layout_result *r) {
    double s = 0;
    for (int i = 0; i < LAYOUT_T_COUNT; i++)
        if (i != LAYOUT_T_RECOMPUTE) s += r->parts_us[i];
    return s;
}

/* Equal chunks, free sends, no embedding or head: the critical stage idles
 * (p-1)/(v m) of its compute, for 1F1B and interleaved. */
Test(layout_sim, bubble_is_the_closed_form_with_free_sends) {
    cluster c = costfix_a100(8);
    gpt_config g = small_vocab_model(16);
    layout_sim_params p;
    layout_sim_params_default(&p);
    p.p2p_scale = 0;
    p.emb_head_scale = 0;
    const struct {
        const char *text;
        int pp, v, m;
    } cases[] = {
        {"pp=4,mbs=1,gbs=8", 4, 1, 8},
        {"pp=4,mbs=1,gbs=16", 4, 1, 16},
        {"pp=4,vp=2,mbs=1,gbs=8", 4, 2, 8},
        {"pp=4,vp=4,mbs=1,gbs=4", 4, 4, 4},
        {"pp=8,vp=2,mbs=2,gbs=64", 8, 2, 32},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        layout l = parse_layout(cases[i].text);
        layout_result r = run(&g, &l, &c, &p);
        cr_assert_eq(r.micro_batches, cases[i].m);
        const double busy = r.parts_us[LAYOUT_T_COMPUTE];
        const double want = (double)(cases[i].pp - 1) / (cases[i].v * cases[i].m);
        const double got = r.parts_us[LAYOUT_T_BUBBLE] / busy;
        cr_assert(fabs(got - want) < 1e-9, "%s: bubble %.12f, closed form %.12f", cases[i].text, got, want);
        cr_assert(r.parts_us[LAYOUT_T_PP] == 0.0, "%s: free sends expose %g us", cases[i].text,
                  r.parts_us[LAYOUT_T_PP]);
    }
}

/* Sends that cost something show up as pp, never as bubble; parts sum to
 * the step. */
Test(layout_sim, sends_are_pp_and_parts_sum_to_the_step) {
    cluster c = costfix_a100(8);
    gpt_config g = small_vocab_model(16);
    layout l = parse_layout("pp=4,mbs=4,gbs=32");
    layout_sim_params p;
    layout_sim_params_default(&p);
    p.emb_head_scale = 0;
    p.p2p_scale = 0;
    layout_result free_ = run(&g, &l, &c, &p);
    p.p2p_scale = 50; /* slow sends: exposed */
    layout_result slow = run(&g, &l, &c, &p);
    cr_assert(slow.parts_us[LAYOUT_T_PP] > 0);
    cr_assert(fabs(slow.parts_us[LAYOUT_T_BUBBLE] - free_.parts_us[LAYOUT_T_BUBBLE]) < 1e-6 * free_.step_us);
    cr_assert(slow.step_us > free_.step_us);
    cr_assert(fabs(sum_parts(&slow) - slow.step_us) < 1e-9 * slow.step_us, "%g vs %g", sum_parts(&slow),
              slow.step_us);
    p.step_fixed_us = 123;
    layout_result fixed = run(&g, &l, &c, &p);
    cr_assert(fabs(fixed.step_us - slow.step_us - 123) < 1e-6);
}

/* tp = 8 on one node: per layer and micro-batch 2 all-reduces forward and
 * 2 backward (and 2 more under full recomputation), each the ring formula
 * 2(n-1)/n S / B + 2(n-1) lat over S = b s h bytes. */
Test(layout_sim, tp_only_collectives_are_the_ring_formula) {
    cluster c = costfix_a100(1);
    c.collective_efficiency = 0.8;
    gpt_config g = small_vocab_model(8);
    layout_sim_params p;
    layout_sim_params_default(&p);
    p.emb_head_scale = 0;
    const double S = 2.0 * g.seq_len * g.d_model * 2; /* mbs 2, fp16 */
    const double ring = 2.0 * 7 / 8 * S / (300e9 * 0.8) * 1e6 + 14 * 5.0;
    const int m = 3;
    layout l = parse_layout("tp=8,mbs=2,gbs=6,precision=fp16");
    layout_result r = run(&g, &l, &c, &p);
    double want = 4.0 * g.n_layers * m * ring;
    cr_assert(fabs(r.parts_us[LAYOUT_T_TP] - want) < 1e-9 * want, "tp %.6f us, ring formula %.6f us",
              r.parts_us[LAYOUT_T_TP], want);
    cr_assert(fabs(r.tp_allreduce.time_us - ring) < 1e-9 * ring);
    cr_assert_str_eq(r.tp_allreduce.algo, "ring");
    l = parse_layout("tp=8,mbs=2,gbs=6,precision=fp16,recompute=full");
    r = run(&g, &l, &c, &p);
    want = 6.0 * g.n_layers * m * ring;
    cr_assert(fabs(r.parts_us[LAYOUT_T_TP] - want) < 1e-9 * want, "full recompute: tp %.6f, want %.6f",
              r.parts_us[LAYOUT_T_TP], want);
    cr_assert(r.parts_us[LAYOUT_T_RECOMPUTE] > 0);
    /* sp: 2 all-gathers + 2 reduce-scatters of the same S, each (n-1)/n S / B + (n-1) lat */
    l = parse_layout("tp=8,sp=1,mbs=2,gbs=6,precision=fp16");
    r = run(&g, &l, &c, &p);
    const double half = 7.0 / 8 * S / (300e9 * 0.8) * 1e6 + 7 * 5.0;
    want = 2.0 * 4.0 * g.n_layers * m * half;
    cr_assert(fabs(r.parts_us[LAYOUT_T_TP] - want) < 1e-9 * want, "sp: tp %.6f, want %.6f",
              r.parts_us[LAYOUT_T_TP], want);
}

/* dp = 2, buckets of one layer's gradients, a fast link: every bucket
 * but those ready at the very end of backward (the first layer's, then the
 * embedding's) reduces while backward runs. The step grows by exactly
 * those two reductions; overlap off exposes them all. */
Test(layout_sim, dp_reduction_hides_behind_backward_but_its_last_buckets) {
    cluster c = costfix_a100(1);
    gpt_config g = small_vocab_model(24);
    layout_sim_params p;
    layout_sim_params_default(&p);
    p.emb_head_scale = 0;
    const double layer_bytes = (double)layout_layer_params(&g) * p.grad_comm_bytes;
    p.dp_bucket_bytes = layer_bytes;
    layout l1 = parse_layout("dp=1,mbs=4,gbs=8");
    layout l2 = parse_layout("dp=2,mbs=4,gbs=16");
    layout_result one = run(&g, &l1, &c, &p);
    layout_result two = run(&g, &l2, &c, &p);
    int64_t ranks[2] = {0, 1};
    coll_estimate e_layer, e_emb;
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, ranks, 2, layer_bytes, &e_layer), PL_OK);
    const double emb_bytes = (double)g.vocab * g.d_model * p.grad_comm_bytes;
    cr_assert_eq(coll_time(&c, COLL_ALL_REDUCE, ranks, 2, emb_bytes, &e_emb), PL_OK);
    /* the premise: one layer's backward outlasts one bucket's reduction */
    layout_sim_params p0 = p;
    cr_assert(one.parts_us[LAYOUT_T_COMPUTE] / (2.0 * g.n_layers) > e_layer.time_us);
    const double want = e_layer.time_us + e_emb.time_us;
    cr_assert(fabs(two.parts_us[LAYOUT_T_DP] - want) < 1e-9 * want, "dp exposed %.6f us, last buckets %.6f us",
              two.parts_us[LAYOUT_T_DP], want);
    cr_assert(fabs((two.step_us - one.step_us) - want) < 1e-6 * one.step_us, "step grew by %.6f us, want %.6f",
              two.step_us - one.step_us, want);
    cr_assert(one.parts_us[LAYOUT_T_DP] == 0.0);
    cr_assert_eq(two.dp_buckets, g.n_layers + 1); /* head + last layer, the other layers, the embedding */
    p0.dp_overlap_grad = 0;
    layout_result exposed = run(&g, &l2, &c, &p0);
    cr_assert(exposed.parts_us[LAYOUT_T_DP] > (g.n_layers - 1) * e_layer.time_us);
}

/* zero 3 shards parameters, gradients and optimizer state over dp: each
 * is 1/dp of zero 0's (to a byte per part); zero 1 only the optimizer. */
Test(layout_sim, zero3_memory_is_a_dp_th_of_zero0s_sharded_parts) {
    cluster c = costfix_a100(2);
    gpt_config g = costfix_megatron_gpt(4096, 32, 16);
    layout z0 = parse_layout("dp=8,mbs=1,gbs=8,zero=0,precision=bf16");
    layout z1 = parse_layout("dp=8,mbs=1,gbs=8,zero=1,precision=bf16");
    layout z3 = parse_layout("dp=8,mbs=1,gbs=8,zero=3,precision=bf16");
    layout_result r0 = run(&g, &z0, &c, NULL), r1 = run(&g, &z1, &c, NULL), r3 = run(&g, &z3, &c, NULL);
    cr_assert(llabs(r3.mem.params * 8 - r0.mem.params) <= 8, "%lld vs %lld", (long long)r3.mem.params,
              (long long)r0.mem.params);
    cr_assert(llabs(r3.mem.grads * 8 - r0.mem.grads) <= 8);
    cr_assert(llabs(r3.mem.optimizer * 8 - r0.mem.optimizer) <= 8);
    cr_assert_eq(r1.mem.params, r0.mem.params);
    cr_assert(llabs(r1.mem.optimizer * 8 - r0.mem.optimizer) <= 8);
    /* zero 3 gathers parameters: it costs dp time zero 0 does not */
    cr_assert(r3.parts_us[LAYOUT_T_OPTIMIZER] < r0.parts_us[LAYOUT_T_OPTIMIZER]);
    cr_assert(r3.dp_buckets >= r0.dp_buckets);
}

/* Megatron's counts: model 72 B s L h^2 (1 + s/6h + V/12Lh), with full
 * recomputation 96 B s L h^2 (1 + s/6h + V/16Lh). */
Test(layout_sim, flops_are_megatrons_formulas) {
    gpt_config g = costfix_megatron_gpt(12288, 96, 80);
    layout l = parse_layout("tp=8,pp=8,dp=24,mbs=2,gbs=2304,recompute=full,precision=fp16");
    double model, hw;
    layout_model_flops(&g, &l, &model, &hw);
    const double B = 2304, s = 2048, L = 80, h = 12288, V = 51200;
    const double m_want = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
    const double h_want = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
    cr_assert(fabs(model / m_want - 1) < 1e-12, "%.9g vs %.9g", model, m_want);
    cr_assert(fabs(hw / h_want - 1) < 1e-12, "%.9g vs %.9g", hw, h_want);
}

/* Megatron SC21 Table 1's largest row (1T: tp 8, pp 64, 512 micro-batches)
 * and Llama 3 405B on 16,384 GPUs run; the 1T layout fits 80 GB. */
Test(layout_sim, published_sizes_run) {
    cluster a = costfix_a100(384);
    gpt_config t = costfix_megatron_gpt(25600, 160, 128);
    layout l = parse_layout("tp=8,pp=64,dp=6,mbs=1,gbs=3072,recompute=full,precision=fp16");
    layout_result r = run(&t, &l, &a, NULL);
    cr_assert_eq(r.micro_batches, 512);
    cr_assert_eq(r.world, 3072);
    cr_assert(r.oom == 0, "1T: %lld bytes", (long long)r.mem.total);
    cr_assert(r.mem.total < 80LL * 1000 * 1000 * 1000);
    cr_assert(fabs(sum_parts(&r) - r.step_us) < 1e-9 * r.step_us);
    cr_assert_eq(r.pp_send_nodes, 2);

    cluster h = costfix_a100(2048);
    h.gpus[0].peak_flops[PRECISION_BF16] = 989e12;
    h.intra_bw = 450e9;
    h.nic_bw = 50e9;
    h.pod_gpus = 3072;
    h.pod_oversubscription = 7;
    gpt_config q = costfix_llama405b(8192);
    l = parse_layout("tp=8,sp=1,pp=16,vp=4,dp=128,mbs=1,gbs=2048,zero=fsdp,precision=bf16");
    r = run(&q, &l, &h, NULL);
    cr_assert_eq(r.world, 16384);
    cr_assert_eq(r.micro_batches, 16);
    cr_assert(r.step_us > 0 && r.mfu > 0 && r.mfu < 1);
    cr_assert(fabs(sum_parts(&r) - r.step_us) < 1e-9 * r.step_us);
    /* the dp group of stage 0 spans pods: its ranks are 8 apart, 128 of them */
    cr_assert_eq(r.dp_reduce.n_ranks, 128);
}

/* Impossible layouts and parameters: PL_ERR_INVALID with a message. */
Test(layout_sim, bad_input_is_refused_with_a_message) {
    cluster c = costfix_a100(1);
    gpt_config g = small_vocab_model(8);
    layout l = parse_layout("tp=3,mbs=1,gbs=1"); /* 3 does not divide 16 heads */
    layout_sim *s = NULL;
    char msg[256] = "";
    cr_assert_eq(layout_sim_create(&g, &l, &c, &s, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_null(s);
    cr_assert(strlen(msg) > 0);
    l = parse_layout("tp=8,dp=2,mbs=1,gbs=2"); /* 16 GPUs on an 8-GPU cluster */
    msg[0] = 0;
    cr_assert_eq(layout_sim_create(&g, &l, &c, &s, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strlen(msg) > 0);
    l = parse_layout("tp=2,mbs=1,gbs=2");
    cr_assert_eq(layout_sim_create(&g, &l, &c, &s, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim_params p;
    layout_sim_params_default(&p);
    p.collective_scale = -1;
    layout_result r;
    msg[0] = 0;
    cr_assert_eq(layout_sim_run(s, &p, 0, &r, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "collective_scale") != NULL, "%s", msg);
    p.collective_scale = NAN;
    cr_assert_eq(layout_sim_run(s, &p, 0, &r, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_eq(layout_sim_write_chrome_trace(s, stdout), PL_ERR_INVALID); /* nothing traced */
    layout_sim_destroy(s);
    layout_sim_destroy(NULL);
}

/* A traced run writes a Chrome trace with every stage's ops, and the
 * traced and untraced runs agree. */
Test(layout_sim, trace_has_every_op_and_changes_nothing) {
    cluster c = costfix_a100(2);
    gpt_config g = small_vocab_model(8);
    layout l = parse_layout("tp=2,pp=4,vp=2,dp=2,mbs=1,gbs=8,zero=1");
    layout_sim *s = NULL;
    char msg[256] = "";
    cr_assert_eq(layout_sim_create(&g, &l, &c, &s, msg, sizeof msg), PL_OK, "%s", msg);
    layout_result a, b;
    cr_assert_eq(layout_sim_run(s, NULL, 0, &a, msg, sizeof msg), PL_OK);
    cr_assert_eq(layout_sim_run(s, NULL, 1, &b, msg, sizeof msg), PL_OK);
    cr_assert(a.step_us == b.step_us);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert_not_null(f);
    cr_assert_eq(layout_sim_write_chrome_trace(s, f), PL_OK);
    fclose(f);
    int ops = 0;
    for (const char *q = buf; (q = strstr(q, "\"name\":\"F chunk")) != NULL; q++) ops++;
    cr_assert_eq(ops, 4 * 2 * a.micro_batches, "%d forwards in the trace", ops); /* pp * vp * m */
    cr_assert(strstr(buf, "\"name\":\"tp chunk") != NULL);
    cr_assert(strstr(buf, "\"name\":\"act chunk") != NULL);
    cr_assert(strstr(buf, "\"name\":\"reduce chunk") != NULL);
    cr_assert(strstr(buf, "\"name\":\"gather chunk") != NULL);
    free(buf);
    layout_sim_destroy(s);
}

/* cp = 2 on one node: per layer and micro-batch one key/value all-gather
 * forward and one reduce-scatter of their gradients backward, over the
 * full sequence's keys and values (2 x kv heads x head dim per token). */
Test(layout_sim, cp_exchange_is_an_allgather_and_a_reduce_scatter_per_layer) {
    cluster c = costfix_a100(1);
    gpt_config g = small_vocab_model(6);
    g.n_kv_heads = 4;
    layout_sim_params p;
    layout_sim_params_default(&p);
    p.emb_head_scale = 0;
    layout l = parse_layout("cp=2,mbs=1,gbs=4,precision=bf16");
    layout_result r = run(&g, &l, &c, &p);
    int64_t ranks[2] = {0, 1};
    const double kv = 1.0 * g.seq_len * 2 * 4 * (g.d_model / g.n_heads) * 2;
    coll_estimate ag, rs;
    cr_assert_eq(coll_time(&c, COLL_ALL_GATHER, ranks, 2, kv, &ag), PL_OK);
    cr_assert_eq(coll_time(&c, COLL_REDUCE_SCATTER, ranks, 2, kv, &rs), PL_OK);
    const double want = (double)g.n_layers * r.micro_batches * (ag.time_us + rs.time_us);
    cr_assert(fabs(r.parts_us[LAYOUT_T_CP] - want) < 1e-9 * want, "cp %.6f us, want %.6f", r.parts_us[LAYOUT_T_CP],
              want);
    cr_assert(r.parts_us[LAYOUT_T_TP] == 0.0);
}

/* zero 1 gathers the updated parameters layer by layer. Overlapped with
 * the next step's forward (prefetch depth 1), only the gathers ahead of
 * the first layer's compute show (the embedding's, then the first
 * layer's: the embedding costs nothing here); after the optimizer the
 * whole chunk's gather shows. The difference is exact. */
Test(layout_sim, zero1_parameter_gather_is_exposed_only_without_overlap) {
    cluster c = costfix_a100(1);
    gpt_config g = small_vocab_model(8);
    layout l = parse_layout("dp=4,mbs=1,gbs=8,zero=1,precision=bf16");
    layout_sim_params p;
    layout_sim_params_default(&p);
    p.emb_head_scale = 0;
    layout_result on = run(&g, &l, &c, &p);
    p.dp_overlap_param = 0;
    layout_result off = run(&g, &l, &c, &p);
    int64_t ranks[4] = {0, 1, 2, 3};
    const double layer = (double)layout_layer_params(&g), emb = (double)g.vocab * g.d_model;
    const double head = (double)g.vocab * g.d_model + 2.0 * g.d_model; /* untied matrix, final layernorm */
    coll_estimate e_layer, e_emb, e_chunk;
    cr_assert_eq(coll_time(&c, COLL_ALL_GATHER, ranks, 4, layer * 2, &e_layer), PL_OK);
    cr_assert_eq(coll_time(&c, COLL_ALL_GATHER, ranks, 4, emb * 2, &e_emb), PL_OK);
    cr_assert_eq(coll_time(&c, COLL_ALL_GATHER, ranks, 4, (g.n_layers * layer + emb + head) * 2, &e_chunk), PL_OK);
    /* the premise: a layer's forward outlasts its gather */
    cr_assert(on.parts_us[LAYOUT_T_COMPUTE] / (3.0 * g.n_layers * on.micro_batches) > e_layer.time_us);
    const double want = e_chunk.time_us - (e_emb.time_us + e_layer.time_us);
    const double got = off.step_us - on.step_us;
    cr_assert(fabs(got - want) < 1e-9 * off.step_us, "overlap saves %.6f us, want %.6f", got, want);
    cr_assert(fabs((off.parts_us[LAYOUT_T_DP] - on.parts_us[LAYOUT_T_DP]) - want) < 1e-9 * off.step_us);
}

/* The rank grid decides the pipeline's link: tp 4 x pp 2 keeps both stages
 * on one 8-GPU node (GPUs 0 and 4), tp 8 x pp 2 puts stage 1 on the next
 * node (GPU 8), tp 2 x dp 4 x pp 2 on GPUs 0 and 8; each send is
 * p2p_time_us over that pair with 1/tp of the activation. */
Test(layout_sim, pipeline_sends_take_the_link_of_the_rank_grid) {
    cluster c = costfix_a100(4);
    gpt_config g = small_vocab_model(8);
    const struct {
        const char *text;
        int64_t dst;
        int tp, nodes;
    } cases[] = {
        {"tp=4,pp=2,mbs=2,gbs=8,precision=bf16", 4, 4, 1},
        {"tp=8,pp=2,mbs=2,gbs=8,precision=bf16", 8, 8, 2},
        {"tp=2,dp=4,pp=2,mbs=2,gbs=16,precision=bf16", 8, 2, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        layout l = parse_layout(cases[i].text);
        layout_result r = run(&g, &l, &c, NULL);
        const double bytes = 2.0 * g.seq_len * g.d_model * 2 / cases[i].tp;
        cr_assert(fabs(r.pp_send_bytes - bytes) < 0.5, "%s: %g bytes", cases[i].text, r.pp_send_bytes);
        const double want = p2p_time_us(&c, 0, cases[i].dst, bytes);
        cr_assert(fabs(r.pp_send_us - want) < 1e-9 * want, "%s: send %.6f us, want %.6f", cases[i].text,
                  r.pp_send_us, want);
        cr_assert_eq(r.pp_send_nodes, cases[i].nodes, "%s", cases[i].text);
    }
}

static int rnd(unsigned *seed, int n) {
    *seed = *seed * 1103515245u + 12345u;
    return (int)((*seed >> 16) % (unsigned)n);
}

/* Random valid layouts (a fixed seed) of a GQA model on 64 GPUs: every
 * one runs, its parts are non-negative and sum to the step, a second run
 * and a traced run give the same step, and memory has every part. */
Test(layout_sim, random_layouts_run_and_their_parts_sum_to_the_step) {
    cluster c = costfix_a100(8);
    gpt_config g = small_vocab_model(24);
    g.n_kv_heads = 4;
    g.seq_len = 512;
    g.vocab = 1000;
    unsigned seed = 12345;
#define RND(n) rnd(&seed, n)
    static const int tps[] = {1, 2, 4, 8}, pps[] = {1, 2, 3, 4, 8}, dps[] = {1, 2, 4};
    static const char *const zeros[] = {"0", "1", "2", "3", "fsdp"};
    int ran = 0;
    for (int it = 0; it < 400 && ran < 150; it++) {
        const int tp = tps[RND(4)], cp = 1 + RND(2), pp = pps[RND(5)], vp = pp > 1 ? 1 + RND(3) : 1, dp = dps[RND(3)];
        const int mbs = 1 + RND(2), m = (1 + RND(4)) * pp, sp = RND(2), z = RND(5), rc = RND(3);
        char text[256];
        snprintf(text, sizeof text, "tp=%d,sp=%d,cp=%d,pp=%d,vp=%d,dp=%d,zero=%s,mbs=%d,gbs=%d,recompute=%s", tp, sp,
                 cp, pp, vp, dp, zeros[z], mbs, m * dp * mbs, recompute_kind_name((recompute_kind)rc));
        layout l;
        char msg[256];
        if (layout_parse(text, &l, msg, sizeof msg) != PL_OK) continue;
        if (layout_validate(&l, &g, cluster_n_gpus(&c), msg, sizeof msg) != PL_OK) continue;
        layout_sim *s = NULL;
        cr_assert_eq(layout_sim_create(&g, &l, &c, &s, msg, sizeof msg), PL_OK, "%s: %s", text, msg);
        layout_result a, b, t;
        cr_assert_eq(layout_sim_run(s, NULL, 0, &a, msg, sizeof msg), PL_OK, "%s: %s", text, msg);
        cr_assert_eq(layout_sim_run(s, NULL, 0, &b, msg, sizeof msg), PL_OK);
        cr_assert_eq(layout_sim_run(s, NULL, 1, &t, msg, sizeof msg), PL_OK);
        cr_assert(a.step_us > 0 && a.step_us == b.step_us && a.step_us == t.step_us, "%s", text);
        for (int i = 0; i < LAYOUT_T_COUNT; i++) cr_assert(a.parts_us[i] >= 0, "%s: part %d = %g", text, i, a.parts_us[i]);
        cr_assert(fabs(sum_parts(&a) - a.step_us) < 1e-9 * a.step_us, "%s: %g vs %g", text, sum_parts(&a), a.step_us);
        cr_assert(a.mem.params > 0 && a.mem.optimizer > 0 && a.mem.activations > 0, "%s", text);
        cr_assert_eq(a.micro_batches, m, "%s", text);
        layout_sim_destroy(s);
        ran++;
    }
#undef RND
    cr_assert(ran >= 100, "only %d random layouts were valid", ran);
}

/* The split pipeline orders (layout sched=, core/schedule.c): the same
 * compute as 1F1B (B and W are the backward in two parts), a smaller
 * bubble (ZB-H1 defers W into 1F1B's drain; the V orders halve the stage
 * times), ZB-H2 buying its bubble with more activations held, DualPipeV at
 * 2p+1 chunk activations; free sends, no embedding or head. */
Test(layout_sim, split_orders_keep_the_compute_and_shrink_the_bubble) {
    cluster c = costfix_a100(8);
    gpt_config g = small_vocab_model(16);
    layout_sim_params p;
    layout_sim_params_default(&p);
    p.p2p_scale = 0;
    p.emb_head_scale = 0;
    layout l1 = parse_layout("pp=4,mbs=1,gbs=16"), lh1 = parse_layout("pp=4,mbs=1,gbs=16,sched=zb-h1");
    layout lh2 = parse_layout("pp=4,mbs=1,gbs=16,sched=zb-h2"), lv = parse_layout("pp=4,vp=2,mbs=1,gbs=16,sched=zb-v");
    layout ld = parse_layout("pp=4,vp=2,mbs=1,gbs=16,sched=dualpipev");
    layout_result r1 = run(&g, &l1, &c, &p), rh1 = run(&g, &lh1, &c, &p), rh2 = run(&g, &lh2, &c, &p);
    layout_result rv = run(&g, &lv, &c, &p), rd = run(&g, &ld, &c, &p);
    const double comp = r1.parts_us[LAYOUT_T_COMPUTE];
    const layout_result *all[4] = {&rh1, &rh2, &rv, &rd};
    for (int i = 0; i < 4; i++) {
        cr_assert(fabs(all[i]->parts_us[LAYOUT_T_COMPUTE] - comp) <= 1e-9 * comp, "order %d: compute %.6f vs 1f1b %.6f",
                  i, all[i]->parts_us[LAYOUT_T_COMPUTE], comp);
        cr_assert_lt(all[i]->step_us, r1.step_us, "order %d: step %.3f not below 1f1b's %.3f", i, all[i]->step_us,
                     r1.step_us);
        cr_assert_lt(all[i]->parts_us[LAYOUT_T_BUBBLE], 0.5 * r1.parts_us[LAYOUT_T_BUBBLE], "order %d: bubble %.3f, 1f1b %.3f", i, all[i]->parts_us[LAYOUT_T_BUBBLE], r1.parts_us[LAYOUT_T_BUBBLE]);
    }
    /* in flight on the worst stage: 1F1B 4 micro-batches (16 layers a stage:
     * 4 x 4 layers), ZB-H1 the same 4 on every stage, ZB-H2 2p-1 = 7 */
    cr_assert_eq(r1.stash_layers, 16);
    cr_assert_eq(rh1.stash_layers, 16);
    cr_assert_eq(rh2.stash_layers, 28);
    cr_assert_gt(rh2.mem.total, rh1.mem.total);
    /* V orders: 2 chunks of 2 layers a rank, 2p = 8 chunk activations (16
     * layers) for ZB-V, 2p+1 = 9 (18 layers) for DualPipeV */
    cr_assert_eq(rv.stash_layers, 16);
    cr_assert_eq(rd.stash_layers, 18);
}
