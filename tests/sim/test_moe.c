/*
 * test_moe.c: the mixture-of-experts parts of the layout path against
 * their closed forms: the expert grid (Megatron-Core's parallel folding),
 * the all-to-all's time against its bandwidth formula on one node and
 * across nodes, the tokens per expert, every MoE memory term, the
 * dispatch as the step's "ep" part, the tensor-parallel collectives an
 * MoE layer keeps (the attention's; shared experts the MLP's), DeepSeek-V3's layout on 2,048 H800s
 * (fits) and an impossible one (OOM), and the bad layouts refused.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "cluster_file.h"
#include "cost_fixtures.h"
#include "layout_sim.h"
#include "model_config.h"
#include "model_params.h"
#include "moe.h"

static layout lay(const char *text) {
    layout l;
    char msg[256] = "";
    cr_assert_eq(layout_parse(text, &l, msg, sizeof msg), PL_OK, "%s: %s", text, msg);
    return l;
}

static gpt_config model(const char *name) {
    gpt_config c;
    char msg[512] = "";
    cr_assert_eq(model_config_load(name, &c, NULL, 0, msg, sizeof msg), PL_OK, "%s", msg);
    return c;
}

static cluster h800(void) {
    cluster c;
    char msg[512] = "";
    cr_assert_eq(cluster_load(PLACER_SOURCE_DIR "/data/clusters/h800-deepseek.json", NULL, &c, msg, sizeof msg), PL_OK,
                 "%s", msg);
    return c;
}

Test(moe, expert_grid_folds_over_the_attention_ranks) {
    /* tp 2, dp 8 (16 ranks a stage), ep 4, etp 2: edp 2 */
    layout l = lay("tp=2,dp=8,pp=2,ep=4,etp=2,gbs=16");
    cr_assert_eq(layout_expert_dim_size(&l, LAYOUT_EDIM_EDP), 2);
    int64_t g[16];
    /* rank 5 of stage 0: etp_i 1, ep_i 2, edp_i 0 */
    cr_assert_eq(layout_expert_group_ranks(&l, 5, LAYOUT_EDIM_ETP, g), 2);
    cr_assert(g[0] == 4 && g[1] == 5);
    cr_assert_eq(layout_expert_group_ranks(&l, 5, LAYOUT_EDIM_EP, g), 4);
    cr_assert(g[0] == 1 && g[1] == 3 && g[2] == 5 && g[3] == 7);
    cr_assert_eq(layout_expert_group_ranks(&l, 5, LAYOUT_EDIM_EDP, g), 2);
    cr_assert(g[0] == 5 && g[1] == 13);
    /* the pipeline dimension is the dense grid's: rank 21 is stage 1 */
    cr_assert_eq(layout_expert_group_ranks(&l, 21, LAYOUT_EDIM_EP, g), 4);
    cr_assert(g[0] == 17 && g[3] == 23);
    /* text round trip; a dense layout's text has no MoE keys */
    char buf[512];
    layout_format(&l, buf, sizeof buf);
    cr_assert(strstr(buf, ",ep=4,etp=2,dispatcher=alltoall"), "%s", buf);
    layout d = lay("tp=2,dp=8");
    layout_format(&d, buf, sizeof buf);
    cr_assert(!strstr(buf, "ep="), "%s", buf);
    layout back = lay("tp=2,dp=8,pp=2,ep=4,etp=2,gbs=16,dispatcher=allgather");
    cr_assert_eq(back.dispatcher, MOE_DISPATCH_ALLGATHER);
}

Test(moe, bad_expert_layouts_are_refused_with_their_reason) {
    gpt_config mx = model("mixtral-8x7b"), dense = model("llama-3-8b");
    static const struct { const char *text; int dense; const char *want; } bad[] = {
        {"tp=1,dp=8,ep=3,gbs=8", 0, "etp * ep (1 * 3 = 3) must divide tp * cp * dp (8)"},
        {"tp=1,dp=32,ep=16,gbs=32", 0, "ep (16) must divide the routed experts (8)"},
        {"tp=1,dp=8,ep=8,etp=1,gbs=8", 1, "need a mixture-of-experts model"},
        {"tp=2,dp=8,etp=32,gbs=8", 0, "etp * ep (32 * 1 = 32) must divide"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        layout l = lay(bad[i].text);
        char msg[256] = "";
        cr_assert_eq(layout_validate(&l, bad[i].dense ? &dense : &mx, 0, msg, sizeof msg), PL_ERR_INVALID, "%s",
                     bad[i].text);
        cr_assert(strstr(msg, bad[i].want), "%s: %s", bad[i].text, msg);
    }
    static const char *const unparsable[] = {"ep=0", "etp=x", "dispatcher=ring", "ep=2,ep=2"};
    for (size_t i = 0; i < sizeof unparsable / sizeof unparsable[0]; i++) {
        layout l;
        char msg[256] = "";
        cr_assert_eq(layout_parse(unparsable[i], &l, msg, sizeof msg), PL_ERR_INVALID, "%s", unparsable[i]);
        cr_assert(msg[0] && !strchr(msg, '\n'));
    }
}

/* Each of n ranks sends S bytes, S/n to each: on one node (n - 1)/n S over
 * NVLink; across nodes the off-node share (n - q)/n S over the NIC share,
 * at once with the on-node share over NVLink; plus base + one latency. */
Test(moe, all_to_all_is_its_bandwidth_formula_on_one_node_and_across_nodes) {
    cluster c = costfix_a100(4);
    c.coll_base_latency_us = 8.0;
    c.collective_efficiency = 0.8;
    const double S = 256e6;
    int64_t one[8], two[16], spread[4] = {0, 8, 16, 24};
    for (int i = 0; i < 8; i++) one[i] = i;
    for (int i = 0; i < 16; i++) two[i] = i;
    double t;
    coll_estimate e;
    cr_assert_eq(moe_all_to_all_us(&c, one, 8, S, &t, &e), PL_OK);
    double want = 8.0 + c.intra_latency_us + S * 7 / 8 / (c.intra_bw * 0.8) * 1e6;
    cr_assert(fabs(t - want) <= 1e-9 * want, "one node %.3f vs %.3f", t, want);
    cr_assert_eq(e.n_nodes, 1);
    /* two nodes of 8: half of S leaves the node over one 25 GB/s NIC per GPU */
    cr_assert_eq(moe_all_to_all_us(&c, two, 16, S, &t, &e), PL_OK);
    const double nic = c.nic_bw * c.nics_per_node / c.gpus_per_node;
    want = 8.0 + c.inter_latency_us + S * 8 / 16 / (nic * 0.8) * 1e6;
    cr_assert(fabs(t - want) <= 1e-9 * want, "two nodes %.3f vs %.3f", t, want);
    cr_assert_eq(e.n_nodes, 2);
    /* one rank per node: everything but its own share over the network */
    cr_assert_eq(moe_all_to_all_us(&c, spread, 4, S, &t, NULL), PL_OK);
    want = 8.0 + c.inter_latency_us + S * 3 / 4 / (nic * 0.8) * 1e6;
    cr_assert(fabs(t - want) <= 1e-9 * want, "spread %.3f vs %.3f", t, want);
    /* a bad group */
    int64_t dup[2] = {3, 3};
    cr_assert_eq(moe_all_to_all_us(&c, dup, 2, S, &t, NULL), PL_ERR_INVALID);
    /* an NVLink domain of two 8-GPU nodes (an NVL72 rack's trays): the 16
     * reach each other over NVLink, so the two-node group is one domain's
     * all-to-all ((n - 1)/n S over NVLink, the intra latency), no NIC */
    c.nvlink_domain_gpus = 16;
    cr_assert_eq(moe_all_to_all_us(&c, two, 16, S, &t, &e), PL_OK);
    want = 8.0 + c.intra_latency_us + S * 15 / 16 / (c.intra_bw * 0.8) * 1e6;
    cr_assert(fabs(t - want) <= 1e-9 * want, "one domain %.3f vs %.3f", t, want);
    cr_assert_eq(e.n_nodes, 1);
    /* one rank in each of two domains: across the network again */
    int64_t two_dom[2] = {0, 16};
    cr_assert_eq(moe_all_to_all_us(&c, two_dom, 2, S, &t, &e), PL_OK);
    want = 8.0 + c.inter_latency_us + S / 2 / (nic * 0.8) * 1e6;
    cr_assert(fabs(t - want) <= 1e-9 * want, "two domains %.3f vs %.3f", t, want);
    cr_assert_eq(e.n_nodes, 2);
}

Test(moe, tokens_per_expert_and_every_memory_term_are_their_closed_forms) {
    gpt_config c = model("deepseek-v3");
    layout l = lay("tp=2,sp=1,pp=16,dp=64,ep=16,etp=1,zero=1,mbs=1,gbs=1024");
    moe_params mp;
    moe_params_default(&mp);
    mp.imbalance = 1.0; /* balanced: the closed forms below */
    const double n = 4096.0 / 2, k = 8, h = 7168, e = 2, El = 256 / 16, F = 2048;
    cr_assert_float_eq(moe_tokens_in(&c, &l), n, 1e-9);
    const double m = n * k * 16 / 256;
    cr_assert_float_eq(moe_tokens_per_expert(&c, &l, &mp), m, 1e-9);
    mp.imbalance = 1.5;
    cr_assert_float_eq(moe_tokens_per_expert(&c, &l, &mp), 1.5 * m, 1e-9);
    mp.capacity_factor = 1.25; /* a capacity factor wins over the imbalance */
    cr_assert_float_eq(moe_tokens_per_expert(&c, &l, &mp), 1.25 * m, 1e-9);
    moe_params_default(&mp);
    mp.imbalance = 1.0;
    moe_act_parts a = moe_activation_parts(&c, &l, &mp);
    cr_assert_float_eq(a.router, 2 * 4 * n * 256, 1e-6);
    cr_assert_float_eq(a.routed, 2 * El * m * h * e, 1e-3);
    cr_assert_float_eq(a.expert_mlp, 3 * e * El * m * F, 1e-3);
    cr_assert_float_eq(a.shared, 3 * e * 4096 * (2048.0 / 2), 1e-3);
    cr_assert_float_eq(moe_dispatch_buffer_bytes(&c, &l, &mp), 2 * n * k * h * e, 1e-3);
    /* parameters: an expert is 3 h F, 16 of them a GPU */
    cr_assert_eq(moe_layer_expert_params_per_gpu(&c, &l), 16LL * 3 * 7168 * 2048);
    /* the stage's named parts: stage 1 holds layers 3..6 (4 MoE layers) */
    layout_memory mem;
    const int in_flight = 15;
    layout_stage_memory_moe(&c, &l, NULL, &mp, 1, 4, in_flight, &mem);
    const int64_t X = 4LL * 16 * 3 * 7168 * 2048, edp = 2 * 64 / 16;
    cr_assert_eq(mem.expert_params, X * 2);
    cr_assert_eq(mem.expert_grads, X * 2);
    cr_assert_eq(mem.expert_optimizer, (X + edp - 1) / edp * 12, "zero 1: the optimizer over edp = %lld", (long long)edp);
    const double dense_mlp = 3 * e * 4096 * 18432 / 2; /* the dense formula's MLP stash, taken back */
    const double per = a.router + a.routed + a.expert_mlp + a.shared - dense_mlp;
    cr_assert_eq(mem.moe_activations, llround(4.0 * in_flight * per));
    cr_assert_eq(mem.moe_buffers, llround(2 * n * k * h * e));
    cr_assert_eq(mem.total, mem.params + mem.grads + mem.optimizer + mem.activations + mem.embedding_head +
                                mem.buffers + mem.expert_params + mem.expert_grads + mem.expert_optimizer +
                                mem.moe_activations + mem.moe_buffers);
    /* full recompute keeps no routed activations; zero 3 shards the weights too */
    layout f = l;
    f.recompute = RECOMPUTE_FULL;
    f.zero = ZERO_3;
    layout_stage_memory_moe(&c, &f, NULL, &mp, 1, 4, in_flight, &mem);
    cr_assert_eq(mem.moe_activations, 0);
    cr_assert_eq(mem.expert_params, (X + edp - 1) / edp * 2);
    /* a dense model: the MoE function is layout_stage_memory_p exactly */
    gpt_config d = model("llama-3-8b");
    layout dl = lay("tp=2,pp=2,dp=4,gbs=64");
    layout_memory m1, m2;
    layout_stage_memory_p(&d, &dl, NULL, 0, 16, 2, &m1);
    layout_stage_memory_moe(&d, &dl, NULL, NULL, 0, 16, 2, &m2);
    cr_assert_eq(memcmp(&m1, &m2, sizeof m1), 0);
}

/* mem=fp32_grads (DeepSeek-V3 report, section 3.3.3: gradients retained in
 * FP32): every gradient is 4 bytes a parameter, not 2, the replicated
 * part's and the experts' (zero 1: unsharded), and nothing else moves; a
 * dense layout's gradients double the same way. */
Test(moe, fp32_grads_keeps_every_gradient_at_four_bytes_and_nothing_else) {
    gpt_config c = model("deepseek-v3");
    layout l = lay("tp=1,pp=16,dp=128,ep=64,zero=1,mbs=1,gbs=15360,precision=fp8,fp8=blockwise");
    layout g = l;
    g.mem |= LAYOUT_MEM_FP32_GRADS;
    layout_memory a, b;
    layout_stage_memory_moe(&c, &l, NULL, NULL, 1, 4, 16, &a);
    layout_stage_memory_moe(&c, &g, NULL, NULL, 1, 4, 16, &b);
    const int64_t X = 4LL * (256 / 64) * 3 * 7168 * 2048; /* 4 MoE layers' local experts */
    cr_assert_eq(a.expert_grads, X * 2);
    cr_assert_eq(b.expert_grads, X * 4);
    cr_assert_eq(b.grads, 2 * a.grads);
    cr_assert_eq(b.total - a.total, (b.grads - a.grads) + (b.expert_grads - a.expert_grads));
    cr_assert_eq(b.params, a.params);
    cr_assert_eq(b.optimizer, a.optimizer);
    cr_assert_eq(b.moe_activations, a.moe_activations);
    gpt_config d = model("llama-3-8b");
    layout dl = lay("tp=2,pp=2,dp=4,gbs=64,zero=2"), dg = dl;
    dg.mem |= LAYOUT_MEM_FP32_GRADS;
    layout_stage_memory_p(&d, &dl, NULL, 0, 16, 2, &a);
    layout_stage_memory_p(&d, &dg, NULL, 0, 16, 2, &b);
    const int64_t n = (a.grads + 1) / 2; /* zero 2: the gradient shard's parameters */
    cr_assert_eq(a.grads, 2 * n);
    cr_assert_eq(b.grads, 4 * n);
    cr_assert_eq(b.total - a.total, b.grads - a.grads);
}

/* The DeepSeek-V3 report's memory options, each against its closed form
 * (docs/moe.md gives the sections): bf16_moments 8 optimizer bytes a
 * parameter, not 12; fp8_act the experts' input rows and SwiGLU's inputs in
 * FP8 (a byte and a scale per 128) with SwiGLU's output recomputed; norm_mla
 * drops MLA's q, k, v (a (2 dqk + dv) per token), the norms' outputs (two
 * h-wide) and the latents' norm outputs; mtp_last one more layer on the
 * last stage alone (counted as the stage's layers are: docs/moe.md). */
Test(moe, each_memory_option_is_its_closed_form) {
    gpt_config c = model("deepseek-v3");
    layout l = lay("tp=1,pp=16,dp=128,ep=64,zero=1,mbs=1,gbs=15360,precision=fp8,fp8=blockwise");
    layout_memory a, b;
    /* bf16_moments */
    layout m = l;
    m.mem = LAYOUT_MEM_BF16_MOMENTS;
    layout_stage_memory_moe(&c, &l, NULL, NULL, 1, 4, 16, &a);
    layout_stage_memory_moe(&c, &m, NULL, NULL, 1, 4, 16, &b);
    cr_assert_eq(b.optimizer * 12, a.optimizer * 8);
    cr_assert_eq(b.expert_optimizer * 12, a.expert_optimizer * 8);
    cr_assert_eq(b.total - a.total, (b.optimizer - a.optimizer) + (b.expert_optimizer - a.expert_optimizer));
    /* fp8_act */
    moe_params mp;
    moe_params_default(&mp);
    mp.imbalance = 1.0;
    layout f = l;
    f.mem = LAYOUT_MEM_FP8_ACT;
    const moe_act_parts p0 = moe_activation_parts(&c, &l, &mp), p1 = moe_activation_parts(&c, &f, &mp);
    const double q = 1.0 + 4.0 / 128, h = 7168, e = 2, F = 2048, El = 256 / 64;
    const double m_rows = moe_tokens_per_expert(&c, &l, &mp);
    cr_assert_float_eq(p0.routed, 2 * El * m_rows * h * e, 1e-3);
    cr_assert_float_eq(p1.routed, El * m_rows * h * (q + e), 1e-3, "FP8 input rows, the bf16 output kept");
    cr_assert_float_eq(p0.expert_mlp, 3 * e * El * m_rows * F, 1e-3);
    cr_assert_float_eq(p1.expert_mlp, 2 * q * El * m_rows * F, 1e-3, "SwiGLU's two FP8 inputs, its output recomputed");
    cr_assert_float_eq(p1.router, p0.router, 1e-9);
    cr_assert_float_eq(p1.shared, p0.shared, 1e-9);
    /* norm_mla: one layer's stash, bf16, no tp, the flash core kept either way */
    layout d = lay("tp=1,pp=16,dp=128,ep=64,zero=1,mbs=1,gbs=15360"), n = d;
    n.mem = LAYOUT_MEM_NORM_MLA;
    const double s = 4096, a_heads = 128, dqk = 128 + 64, dv = 128, lat_norm = 1536 + 512;
    const double dropped = e * s * a_heads * (2 * dqk + dv) + 2 * e * s * h + e * s * lat_norm;
    cr_assert_eq(layer_activation_bytes(&c, &d) - layer_activation_bytes(&c, &n), (int64_t)llround(dropped));
    /* mtp_last: pp 4, 1F1B: the last stage alone gains one MoE layer's memory (one micro-batch in flight) */
    cluster cl = h800();
    layout t = lay("tp=1,pp=4,dp=8,ep=8,zero=1,mbs=1,gbs=64,precision=fp8,fp8=blockwise"), tm = t;
    tm.mem = LAYOUT_MEM_MTP_LAST;
    cl.groups[0].n_nodes = 4;
    layout_sim_params prm;
    layout_sim_params_default(&prm);
    layout_result r0, r1;
    char msg[256] = "";
    layout_sim *s0 = NULL, *s1 = NULL;
    cr_assert_eq(layout_sim_create(&c, &t, &cl, &s0, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_sim_create(&c, &tm, &cl, &s1, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_sim_run(s0, &prm, 0, &r0, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_sim_run(s1, &prm, 0, &r1, msg, sizeof msg), PL_OK, "%s", msg);
    for (int r = 0; r < 3; r++) cr_assert_eq(r1.stage_mem[r], r0.stage_mem[r], "stage %d", r);
    int cl_layers[4];
    cr_assert_eq(layout_chunk_layers(&t, c.n_layers, cl_layers, NULL, 0), PL_OK);
    layout_memory with, without;
    layout_stage_memory_moe(&c, &tm, &prm.compute, &prm.moe, 3, cl_layers[3] + 1, 1, &with);
    layout_stage_memory_moe(&c, &tm, &prm.compute, &prm.moe, 3, cl_layers[3], 1, &without);
    cr_assert_eq(r1.stage_mem[3] - r0.stage_mem[3], with.total - without.total);
    cr_assert_gt(with.total, without.total);
    layout_sim_destroy(s0);
    layout_sim_destroy(s1);
}

/* The dispatch is its own part: two all-to-alls per MoE layer forward,
 * two backward, per micro-batch, with the estimate the step reports; the
 * parts still sum to the step; an imbalance of 2 doubles it. */
Test(moe, dispatch_is_the_ep_part_and_the_parts_sum_to_the_step) {
    gpt_config c = model("mixtral-8x7b");
    cluster cl = costfix_a100(4);
    layout l = lay("tp=1,pp=1,dp=16,ep=8,zero=1,mbs=1,gbs=16,recompute=full");
    layout_sim *s = NULL;
    char msg[256] = "";
    cr_assert_eq(layout_sim_create(&c, &l, &cl, &s, msg, sizeof msg), PL_OK, "%s", msg);
    layout_result r;
    layout_sim_params p;
    layout_sim_params_default(&p);
    p.moe.imbalance = 1.0; /* balanced */
    cr_assert_eq(layout_sim_run(s, &p, 0, &r, msg, sizeof msg), PL_OK, "%s", msg);
    /* ep 8 with etp 1: one node; bytes f n k h e */
    const double bytes = 4096.0 * 2 * 4096 * 2;
    double t;
    int64_t g[8];
    for (int i = 0; i < 8; i++) g[i] = i;
    cr_assert_eq(moe_all_to_all_us(&cl, g, 8, bytes, &t, NULL), PL_OK);
    const double want = 32 * 1 * (2 + 2 * 2) * t; /* layers x micro-batches x (fwd 2 + bwd 2, recomputed fwd 2) */
    cr_assert(fabs(r.parts_us[LAYOUT_T_EP] - want) <= 1e-6 * want, "ep %.3f vs %.3f", r.parts_us[LAYOUT_T_EP], want);
    cr_assert_float_eq(r.ep_dispatch.time_us, t, 1e-9);
    double sum = 0;
    for (int i = 0; i < LAYOUT_T_COUNT; i++)
        if (i != LAYOUT_T_RECOMPUTE) sum += r.parts_us[i];
    cr_assert(fabs(sum - r.step_us) <= 1e-6 * r.step_us, "%.3f vs %.3f", sum, r.step_us);
    p.moe.imbalance = 2.0;
    layout_result r2;
    cr_assert_eq(layout_sim_run(s, &p, 0, &r2, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(fabs(r2.parts_us[LAYOUT_T_EP] - 2 * want) <= 1e-6 * want);
    cr_assert_gt(r2.parts_us[LAYOUT_T_COMPUTE], r.parts_us[LAYOUT_T_COMPUTE]);
    p.moe.imbalance = 0.5;
    cr_assert_eq(layout_sim_run(s, &p, 0, &r2, msg, sizeof msg), PL_ERR_INVALID);
    layout_sim_destroy(s);
}

/* Under sequence parallelism an MoE layer's routed experts move no
 * tensor-parallel activations (Megatron-Core routes each rank's 1/tp of the
 * tokens over the expert groups): per layer and micro-batch its tp part is
 * the attention's gather and reduce-scatter, forward and backward (and the
 * forward's again under full recomputation), half the dense layer's four;
 * shared experts (a tensor-parallel MLP) bring the MLP's two back. */
Test(moe, routed_experts_drop_the_mlp_tensor_parallel_collectives) {
    gpt_config c = model("mixtral-8x7b");
    gpt_config sh = c;
    sh.shared_d_ff = c.moe_d_ff; /* the same model with one shared expert */
    cluster cl = costfix_a100(2);
    const char *texts[2] = {"tp=2,sp=1,pp=1,dp=8,ep=8,zero=1,mbs=1,gbs=8,recompute=none",
                            "tp=2,sp=1,pp=1,dp=8,ep=8,zero=1,mbs=1,gbs=8,recompute=full"};
    for (int f = 0; f < 2; f++) {
        layout l = lay(texts[f]);
        layout_result r[2];
        for (int k = 0; k < 2; k++) {
            layout_sim *s = NULL;
            char msg[256] = "";
            cr_assert_eq(layout_sim_create(k ? &sh : &c, &l, &cl, &s, msg, sizeof msg), PL_OK, "%s", msg);
            layout_sim_params p;
            layout_sim_params_default(&p);
            p.moe.imbalance = 1.0;
            cr_assert_eq(layout_sim_run(s, &p, 0, &r[k], msg, sizeof msg), PL_OK, "%s", msg);
            layout_sim_destroy(s);
            double sum = 0;
            for (int i = 0; i < LAYOUT_T_COUNT; i++)
                if (i != LAYOUT_T_RECOMPUTE) sum += r[k].parts_us[i];
            cr_assert(fabs(sum - r[k].step_us) <= 1e-6 * r[k].step_us, "%.3f vs %.3f", sum, r[k].step_us);
        }
        const double ag = r[0].tp_allgather.time_us, rs = r[0].tp_reduce_scatter.time_us;
        cr_assert_gt(ag, 0);
        cr_assert_gt(rs, 0);
        cr_assert_float_eq(r[1].tp_allgather.time_us, ag, 1e-9);
        /* one micro-batch, 32 MoE layers: the MLP's gather and reduce-scatter, forward, backward and
         * (full) the recomputed forward */
        const double want = 32.0 * (f ? 3.0 : 2.0) * (ag + rs);
        const double got = r[1].parts_us[LAYOUT_T_TP] - r[0].parts_us[LAYOUT_T_TP];
        cr_assert(fabs(got - want) <= 1e-6 * want, "%s: tp with shared experts - without %.3f us, want %.3f",
                  texts[f], got, want);
    }
}

/* DeepSeek-V3 as its report ran it (PP16, EP64 over 8 nodes, ZeRO-1, data
 * parallel over the rest of 2,048 H800s, 15,360 sequences of 4,096; its
 * recomputation, of norms, MLA up-projections and SwiGLU, nearest here as
 * full) fits in 80 GB; the same without recomputation and one micro-batch
 * of 16 sequences is OOM by far. */
Test(moe, deepseek_v3_layout_fits_and_an_impossible_one_is_oom) {
    gpt_config c = model("deepseek-v3");
    cluster cl = h800();
    layout l = lay("tp=1,pp=16,dp=128,ep=64,zero=1,mbs=1,gbs=15360,recompute=full");
    layout_sim *s = NULL;
    char msg[256] = "";
    cr_assert_eq(layout_sim_create(&c, &l, &cl, &s, msg, sizeof msg), PL_OK, "%s", msg);
    layout_result r;
    cr_assert_eq(layout_sim_run(s, NULL, 0, &r, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim_destroy(s);
    cr_assert_eq(r.world, 2048);
    cr_assert(!r.oom, "%.1f GB of %.1f", r.mem.total / 1e9, r.mem_cap / 1e9);
    cr_assert_gt(r.ep_dispatch.time_us, 0); /* the critical stage 0 holds the 3 dense layers: its ep part is 0 */
    cr_assert_eq(r.ep_dispatch.n_nodes, 8, "EP64 with etp 1: 64 consecutive ranks, 8 nodes");
    layout bad = lay("tp=1,pp=1,dp=2048,ep=1,zero=0,mbs=16,gbs=32768,recompute=none");
    cr_assert_eq(layout_sim_create(&c, &bad, &cl, &s, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(layout_sim_run(s, NULL, 0, &r, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim_destroy(s);
    cr_assert(r.oom);
    cr_assert_gt(r.mem.expert_params, 10 * r.mem_cap, "all 256 experts of 58 layers on every GPU");
}

/* flex (DeepEP): a token crosses the network once per distinct remote node
 * of its top-k experts, each copy NVLink once; node-limited routing caps
 * the nodes (DeepSeek-V3: topk_group 4). */
Test(moe, flex_dispatch_sends_a_token_once_per_remote_node) {
    cluster c = costfix_a100(8);
    gpt_config cfg = model("deepseek-v3");
    int64_t g[64];
    for (int i = 0; i < 64; i++) g[i] = i; /* 8 nodes */
    const double tokens = 4096, row = 7168 * 2.0;
    double t;
    coll_estimate e;
    cr_assert_eq(moe_flex_dispatch_us(&c, &cfg, g, 64, tokens, row, 1.0, &t, &e), PL_OK);
    const double hit = 4 * (1 - pow(0.75, 8)), remote = hit * 7 / 8; /* 4 of 8 nodes reachable */
    const double nic = c.nic_bw * c.nics_per_node / c.gpus_per_node * c.collective_efficiency;
    const double t_off = tokens * remote * row / nic * 1e6, t_on = tokens * 8 * row / (c.intra_bw * c.collective_efficiency) * 1e6;
    const double want = c.coll_base_latency_us + c.inter_latency_us + (t_off > t_on ? t_off : t_on);
    cr_assert(fabs(t - want) <= 1e-9 * want, "flex %.3f vs %.3f", t, want);
    /* the plain all-to-all sends all 8 copies, 7/8 of them off the node: slower */
    double ta;
    cr_assert_eq(moe_all_to_all_us(&c, g, 64, tokens * 8 * row, &ta, NULL), PL_OK);
    cr_assert_gt(ta, 2.0 * t);
    layout l = lay("tp=1,dp=64,ep=64,gbs=64,dispatcher=flex");
    char buf[256];
    layout_format(&l, buf, sizeof buf);
    cr_assert(strstr(buf, "dispatcher=flex"), "%s", buf);
}
