/*
 * test_cost_memory.c: memory parts of a layout (sim/layout/layout_memory.c)
 * against their closed forms: Korthikanti et al. 2022's activations per
 * layer (no parallelism, tp with and without sequence parallelism,
 * selective and full recomputation), 16 bytes per parameter of mixed
 * precision unsharded, ZeRO sharding (zero-3's parts 1/dp of zero-0's),
 * the 1F1B and interleaved stashes; and the two memory verdicts the issue
 * asks for (Megatron's 1T layout fits 80 GB; ZeRO-3 530B on 560 GPUs at
 * micro-batch 4 does not).
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "cost_fixtures.h"
#include "layout_memory.h"

static int64_t cdiv(int64_t n, int64_t d) { return (n + d - 1) / d; }

static compute_params megatron2021(void) {
    compute_params p;
    compute_params_default(&p);
    p.attention = ATTENTION_UNFUSED; /* Korthikanti's 5 a s^2 b term */
    return p;
}

/* The 1T GPT (h 25600, a 160, s 2048, b 1): sbh = 52,428,800, 5as/h = 64,
 * so every closed form below is a whole number of bytes. */
Test(cost_memory, korthikanti_activations_per_layer) {
    gpt_config m = costfix_megatron_gpt(25600, 160, 128);
    compute_params p = megatron2021();
    const int64_t sbh = 2048LL * 25600, as_h = 5 * 160 * 2048 / 25600; /* 64 */
    layout l = costfix_layout(1, 1, 1, 1);
    cr_assert_eq(layer_activation_bytes_p(&m, &l, &p), sbh * (34 + as_h));
    for (int t = 2; t <= 8; t *= 2) {
        l = costfix_layout(t, 1, 1, 1);
        /* without sp: s b h (10 + 24/t + 5as/(ht)) */
        cr_assert_eq(layer_activation_bytes_p(&m, &l, &p), sbh * 10 + sbh * 24 / t + sbh * as_h / t, "tp %d", t);
        l.recompute = RECOMPUTE_SELECTIVE;
        cr_assert_eq(layer_activation_bytes_p(&m, &l, &p), sbh * 10 + sbh * 24 / t);
        l.recompute = RECOMPUTE_FULL;
        cr_assert_eq(layer_activation_bytes_p(&m, &l, &p), 2 * sbh);
        /* with sp: s b h / t (34 + 5as/h) */
        l.sp = 1;
        l.recompute = RECOMPUTE_NONE;
        cr_assert_eq(layer_activation_bytes_p(&m, &l, &p), sbh / t * (34 + as_h));
        l.recompute = RECOMPUTE_SELECTIVE;
        cr_assert_eq(layer_activation_bytes_p(&m, &l, &p), sbh / t * 34);
        l.recompute = RECOMPUTE_FULL;
        cr_assert_eq(layer_activation_bytes_p(&m, &l, &p), 2 * sbh / t);
    }
    /* micro-batch 4 and cp 2: four times, half */
    l = costfix_layout(8, 1, 1, 4);
    l.cp = 2;
    l.sp = 1;
    cr_assert_eq(layer_activation_bytes_p(&m, &l, &p), 4 * sbh / 2 / 8 * 34 + 4 * 1024LL * 2048 * 160 * 5 / 8);
    /* flash attention keeps no scores: only the fp32 softmax statistics */
    compute_params pf;
    compute_params_default(&pf);
    l = costfix_layout(8, 1, 1, 1);
    l.sp = 1;
    cr_assert_eq(layer_activation_bytes_p(&m, &l, &pf), sbh / 8 * 34 + 4LL * 160 * 2048 / 8);
    cr_assert_eq(layer_activation_bytes(&m, &l), layer_activation_bytes_p(&m, &l, NULL));
}

/* bf16 mixed precision, no sharding: 2 + 2 + 12 = 16 bytes per parameter;
 * zero 1 / 2 / 3 take the optimizer, then gradients, then weights to
 * 1/dp; fp32 is 4 + 4 + 8. */
Test(cost_memory, sharding_and_bytes_per_parameter) {
    gpt_config m = costfix_megatron_gpt(12288, 96, 96); /* 175B-class */
    layout l = costfix_layout(1, 1, 8, 1);
    l.prec = PRECISION_BF16;
    const int layers = 96;
    int64_t n = layer_params_per_gpu(&m, &l) * layers + stage_extra_params_per_gpu(&m, &l, 0);
    cr_assert_eq(n % 8, 0);
    layout_memory z0, z1, z2, z3;
    layout_stage_memory(&m, &l, 0, layers, 1, &z0);
    cr_assert_eq(z0.params, 2 * n);
    cr_assert_eq(z0.grads, 2 * n);
    cr_assert_eq(z0.optimizer, 12 * n);
    cr_assert_eq(z0.params + z0.grads + z0.optimizer, 16 * n);
    l.zero = ZERO_1;
    layout_stage_memory(&m, &l, 0, layers, 1, &z1);
    l.zero = ZERO_2;
    layout_stage_memory(&m, &l, 0, layers, 1, &z2);
    l.zero = ZERO_3;
    layout_stage_memory(&m, &l, 0, layers, 1, &z3);
    cr_assert_eq(z1.optimizer * 8, z0.optimizer);
    cr_assert_eq(z1.grads, z0.grads);
    cr_assert_eq(z2.grads * 8, z0.grads);
    cr_assert_eq(z2.params, z0.params);
    cr_assert_eq(z3.params * 8, z0.params);
    cr_assert_eq(z3.grads * 8, z0.grads);
    cr_assert_eq(z3.optimizer * 8, z0.optimizer);
    cr_assert_eq(z3.activations, z0.activations);
    cr_assert_eq(z0.total, z0.params + z0.grads + z0.optimizer + z0.activations + z0.embedding_head + z0.buffers);
    /* dp = 1: zero is a no-op */
    layout one = costfix_layout(1, 1, 1, 1);
    one.prec = PRECISION_BF16;
    one.zero = ZERO_3;
    layout_memory u;
    layout_stage_memory(&m, &one, 0, layers, 1, &u);
    cr_assert_eq(u.params + u.grads + u.optimizer, 16 * n);
    one.prec = PRECISION_FP32;
    layout_stage_memory(&m, &one, 0, layers, 1, &u);
    cr_assert_eq(u.params + u.grads + u.optimizer, 16 * n);
    cr_assert_eq(u.optimizer, 8 * n);
    /* a GPT layer holds 12 h^2 + 13 h parameters (Megatron's count) */
    cr_assert_eq(layer_params_per_gpu(&m, &one), 12LL * 12288 * 12288 + 13LL * 12288);
}

/* Context-parallel ranks hold the same weights, and Megatron-core shards
 * the distributed optimizer (zero 1), gradients (2) and weights (3) over
 * the data-parallel group with context parallelism: dp x cp ranks. Llama
 * 3's fsdp keeps its shard over dp alone. Nothing else moves with cp's
 * shard (the activations are cp's own). */
Test(cost_memory, zero_shards_over_dp_times_cp) {
    gpt_config m = costfix_megatron_gpt(4096, 32, 32);
    m.seq_len = 8192;
    const int layers = 32;
    layout l = costfix_layout(1, 1, 4, 1);
    l.prec = PRECISION_BF16;
    int64_t n = layer_params_per_gpu(&m, &l) * layers + stage_extra_params_per_gpu(&m, &l, 0);
    for (int z = ZERO_1; z <= ZERO_3; z++) {
        layout a = l, b = l;
        a.zero = b.zero = (zero_kind)z;
        b.cp = 2;
        cr_assert_eq(zero_shard_ranks(&a), 4);
        cr_assert_eq(zero_shard_ranks(&b), 8);
        layout_memory ma, mb;
        layout_stage_memory(&m, &a, 0, layers, 1, &ma);
        layout_stage_memory(&m, &b, 0, layers, 1, &mb);
        cr_assert_eq(mb.optimizer, 12 * cdiv(n, 8), "zero %d", z);
        cr_assert_eq(ma.optimizer, 12 * cdiv(n, 4), "zero %d", z);
        cr_assert_eq(mb.grads, 2 * (z >= ZERO_2 ? cdiv(n, 8) : n), "zero %d", z);
        cr_assert_eq(mb.params, 2 * (z == ZERO_3 ? cdiv(n, 8) : n), "zero %d", z);
    }
    layout f = l;
    f.zero = ZERO_FSDP;
    f.cp = 2;
    cr_assert_eq(zero_shard_ranks(&f), 4);
    layout_memory mf;
    layout_stage_memory(&m, &f, 0, layers, 1, &mf);
    cr_assert_eq(mf.optimizer, 12 * cdiv(n, 4));
    cr_assert_eq(mf.params, 2 * n);
}

/* 1F1B keeps min(m, p) micro-batches on the first stage; interleaving
 * (Korthikanti: L/p layers x p micro-batches x (1 + (p-1)/(p v))). */
Test(cost_memory, pipeline_stash) {
    layout l = costfix_layout(8, 8, 1, 1);
    cr_assert_eq(layout_in_flight_1f1b(&l, 4), 4);
    cr_assert_eq(layout_in_flight_1f1b(&l, 48), 8);
    l.vp = 2;
    cr_assert_eq(layout_in_flight_1f1b(&l, 48), 2 * 7 + 8 + 1);
    cr_assert_eq(layout_in_flight_1f1b(&l, 2), 4);
    /* stash of a stage of 10 layers in 2 chunks = act x 5 x in-flight */
    gpt_config m = costfix_megatron_gpt(12288, 96, 80);
    layout_memory mem;
    layout_stage_memory(&m, &l, 3, 10, 23, &mem);
    /* plus the backward's transient: two gradients of the MLP hidden, 2 s b 4h / t each */
    cr_assert_eq(mem.activations, mem.act_per_layer * 5 * 23 + 2 * (2LL * 2048 * 4 * 12288 / 8));
    /* equals Korthikanti's factor: 10 x 8 x (1 + 7/16) = 115 layer-micro-batches */
    cr_assert_eq(5 * 23, 115);
}

/* Megatron SC21 Table 1's 1T layout (tp 8, pp 64, 2 layers a stage, full
 * recompute, fp16, dp 6, micro-batch 1, m 512): the first stage fits an
 * 80 GB A100. */
Test(cost_memory, megatron_1t_fits_80gb) {
    gpt_config m = costfix_megatron_gpt(25600, 160, 128);
    layout l = costfix_layout(8, 64, 6, 1);
    l.global_batch = 3072;
    l.recompute = RECOMPUTE_FULL;
    compute_params p = megatron2021();
    const int64_t cap = 80LL * 1000 * 1000 * 1000;
    for (int stage = 0; stage < 64; stage += 63) {
        layout_memory mem;
        layout_stage_memory_p(&m, &l, &p, stage, 2, layout_in_flight_1f1b(&l, 512), &mem);
        cr_assert_lt(mem.total, cap, "stage %d: %lld", stage, (long long)mem.total);
        cr_assert_gt(mem.total, cap / 2); /* and it is not trivially small */
    }
}

/* Table 2's note: ZeRO-3 of the 530B model did not fit 560 GPUs at
 * micro-batch 4 (no model parallelism, full recompute, fp16). */
Test(cost_memory, zero3_530b_560_gpus_mbs4_is_oom) {
    gpt_config m = costfix_megatron_gpt(20480, 128, 105);
    layout l = costfix_layout(1, 1, 560, 4);
    l.zero = ZERO_3;
    l.recompute = RECOMPUTE_FULL;
    compute_params p = megatron2021();
    layout_memory mem;
    layout_stage_memory_p(&m, &l, &p, 0, 105, 1, &mem);
    cr_assert_gt(mem.total, 80LL << 30, "%lld", (long long)mem.total); /* 80 GiB, as data/clusters/dgx-a100-80gb.json */
}
