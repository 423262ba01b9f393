/*
 * test_cost_compute.c: the per-kernel compute model (sim/layout/compute_model.c):
 * GEMM tile and wave quantisation, the model FLOPs of a layer against the
 * closed forms (Megatron's 24 b s h^2 + 4 b s^2 h per layer forward, GQA,
 * SwiGLU), the tp split, recomputation and sequence parallelism.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>

#include "compute_model.h"
#include "cost_fixtures.h"

static compute_params plain(void) {
    compute_params p;
    compute_params_default(&p);
    p.kernel_overhead_us = 0.0;
    return p;
}

/* A GEMM whose tiles fill whole waves: efficiency = base * k/(k+256). One
 * more row (tile quantisation) or a wave and a tile (wave quantisation)
 * costs what the formula says. */
Test(cost_compute, gemm_tile_and_wave_quantisation) {
    cluster c = costfix_a100(1);
    const cluster_gpu *g = &c.gpus[0];
    compute_params p = plain();
    /* 256 x 128 tiles: 27 x 8 = 216 = 2 waves of 108 */
    double e = gemm_efficiency(g, 1, 27 * 256, 8 * 128, 4096, &p);
    cr_assert(ieee_ulp_eq(dbl, e, p.gemm_efficiency * 4096.0 / (4096.0 + 256.0), 4), "%.9g", e);
    double t = gemm_time_us(g, PRECISION_FP16, 27 * 256, 8 * 128, 4096, &p);
    double want = 2.0 * 27 * 256 * 8 * 128 * 4096 / (312e12 * e) * 1e6;
    cr_assert(ieee_ulp_eq(dbl, t, want, 8));
    /* one tile more than a wave: 109 tiles of 256 x 128 in 2 waves; the
     * best other tile shape quantises no better than that here */
    double e109 = gemm_efficiency(g, 1, 109 * 256, 128, 8192, &p);
    cr_assert_lt(e109, 0.80 * e);
    /* the edge tile counts whole: 257 rows cost as much as 384 (or more
     * with a smaller tile's weight), never less than 256's */
    double t256 = gemm_time_us(g, PRECISION_FP16, 256 * 108, 256, 4096, &p);
    double t257 = gemm_time_us(g, PRECISION_FP16, 256 * 108 + 1, 256, 4096, &p);
    cr_assert_gt(t257, 1.05 * t256);
    /* efficiency is a fraction */
    const int64_t shapes[4][3] = {{1, 1, 1}, {2048, 6144, 2048}, {16, 16, 16}, {65536, 65536, 65536}};
    for (int i = 0; i < 4; i++) {
        double x = gemm_efficiency(g, 1, shapes[i][0], shapes[i][1], shapes[i][2], &p);
        cr_assert(x > 0 && x <= 1.0);
    }
    /* TF32 runs at its own peak: half the fp16 rate at the same efficiency */
    double t32 = gemm_time_us(g, PRECISION_TF32, 27 * 256, 8 * 128, 4096, &p);
    cr_assert(ieee_ulp_eq(dbl, t32, 2.0 * t, 8));
}

Test(cost_compute, memory_bound_at_bandwidth) {
    cluster c = costfix_a100(1);
    compute_params p = plain();
    cr_assert(ieee_ulp_eq(dbl, memory_time_us(&c.gpus[0], 1e9, &p), 1e9 / (2039e9 * 0.85) * 1e6, 4));
    cr_assert(ieee_ulp_eq(dbl, optimizer_time_us(&c.gpus[0], 1000000000, &p), 28e9 / (2039e9 * 0.85) * 1e6, 4));
}

/* Megatron's GPT layer: forward model FLOPs 24 b s h^2 + 4 b s^2 h, split
 * evenly by tp; the 1T model of SC21 Table 1 at tp = 8. */
Test(cost_compute, layer_flops_closed_form_and_tp_split) {
    cluster c = costfix_a100(1);
    compute_params p = plain();
    gpt_config m = costfix_megatron_gpt(25600, 160, 128);
    const double b = 1, s = 2048, h = 25600;
    double want = 24 * b * s * h * h + 4 * b * s * s * h;
    for (int tp = 1; tp <= 8; tp *= 2) {
        layout l = costfix_layout(tp, 64, 6, 1);
        layer_cost lc;
        layer_compute_cost(&c.gpus[0], &m, &l, &p, &lc);
        cr_assert(ieee_ulp_eq(dbl, lc.fwd_flops * tp, want, 8), "tp %d: %.9g vs %.9g", tp, lc.fwd_flops * tp, want);
        cr_assert_gt(lc.bwd_us, 1.8 * lc.fwd_us);
        cr_assert_lt(lc.bwd_us, 2.6 * lc.fwd_us);
        cr_assert(ieee_ulp_eq(dbl, lc.recompute_us, 0.0, 0));
    }
    /* bigger micro-batch: FLOPs scale exactly */
    layout l1 = costfix_layout(8, 64, 6, 1), l4 = costfix_layout(8, 64, 6, 4);
    layer_cost c1, c4;
    layer_compute_cost(&c.gpus[0], &m, &l1, &p, &c1);
    layer_compute_cost(&c.gpus[0], &m, &l4, &p, &c4);
    cr_assert(ieee_ulp_eq(dbl, c4.fwd_flops, 4 * c1.fwd_flops, 4));
}

/* GQA and SwiGLU: QKV is h (a + 2g) d, the MLP three matrices of h x f. */
Test(cost_compute, gqa_and_swiglu_flops) {
    cluster c = costfix_a100(1);
    compute_params p = plain();
    gpt_config m = costfix_llama405b(8192);
    layout l = costfix_layout(8, 16, 64, 1);
    l.prec = PRECISION_BF16;
    layer_cost lc;
    layer_compute_cost(&c.gpus[0], &m, &l, &p, &lc);
    const double T = 8192, h = 16384, f = 53248, a = 128, g = 8, d = 128;
    double gemm = 2 * T * (h * (a + 2 * g) * d + a * d * h + 3 * h * f);
    double attn = 4 * T * T * d * a;
    cr_assert(ieee_ulp_eq(dbl, lc.fwd_flops * 8, gemm + attn, 8), "%.9g vs %.9g", lc.fwd_flops * 8, gemm + attn);
}

/* Recomputation: full adds the whole forward, selective the attention
 * core only (and the unfused core is the memory-heavy part). */
Test(cost_compute, recompute_parts) {
    cluster c = costfix_a100(1);
    compute_params p = plain();
    p.attention = ATTENTION_UNFUSED;
    gpt_config m = costfix_megatron_gpt(2304, 24, 24);
    layout l = costfix_layout(1, 1, 32, 16);
    layer_cost none, full, sel;
    layer_compute_cost(&c.gpus[0], &m, &l, &p, &none);
    l.recompute = RECOMPUTE_FULL;
    layer_compute_cost(&c.gpus[0], &m, &l, &p, &full);
    l.recompute = RECOMPUTE_SELECTIVE;
    layer_compute_cost(&c.gpus[0], &m, &l, &p, &sel);
    cr_assert(ieee_ulp_eq(dbl, full.recompute_us, none.fwd_us, 0));
    cr_assert(ieee_ulp_eq(dbl, full.fwd_us, none.fwd_us, 0));
    cr_assert(ieee_ulp_eq(dbl, full.bwd_us, none.bwd_us, 0));
    cr_assert_gt(sel.recompute_us, 0.0);
    cr_assert_lt(sel.recompute_us, 0.6 * full.recompute_us);
    /* flash attention takes less time than unfused at s = 2048 */
    compute_params pf = plain();
    layer_cost fl;
    layer_compute_cost(&c.gpus[0], &m, &l, &pf, &fl);
    cr_assert_lt(fl.fwd_us, none.fwd_us);
    cr_assert(ieee_ulp_eq(dbl, fl.fwd_flops, none.fwd_flops, 0));
}

/* Sequence parallelism splits the norms and adds: less time, same FLOPs. */
Test(cost_compute, sequence_parallel_splits_elementwise) {
    cluster c = costfix_a100(1);
    compute_params p = plain();
    gpt_config m = costfix_megatron_gpt(12288, 96, 80);
    layout l = costfix_layout(8, 8, 24, 2);
    layer_cost a, b;
    layer_compute_cost(&c.gpus[0], &m, &l, &p, &a);
    l.sp = 1;
    layer_compute_cost(&c.gpus[0], &m, &l, &p, &b);
    cr_assert_lt(b.fwd_us, a.fwd_us);
    cr_assert_lt(b.bwd_us, a.bwd_us);
    cr_assert(ieee_ulp_eq(dbl, a.fwd_flops, b.fwd_flops, 0));
}

/* The head's logits GEMM is split by tp (vocabulary-parallel); the
 * embedding costs no FLOPs. */
Test(cost_compute, head_vocab_parallel) {
    cluster c = costfix_a100(1);
    compute_params p = plain();
    gpt_config m = costfix_megatron_gpt(4096, 32, 36);
    layout l1 = costfix_layout(1, 1, 32, 16), l4 = costfix_layout(4, 1, 32, 16);
    layer_cost h1, h4, e1;
    head_compute_cost(&c.gpus[0], &m, &l1, &p, &h1);
    head_compute_cost(&c.gpus[0], &m, &l4, &p, &h4);
    embedding_compute_cost(&c.gpus[0], &m, &l1, &p, &e1);
    cr_assert(ieee_ulp_eq(dbl, h1.fwd_flops, 2.0 * 16 * 2048 * 51200 * 4096, 4));
    cr_assert(ieee_ulp_eq(dbl, h4.fwd_flops * 4, h1.fwd_flops, 4));
    cr_assert_lt(h4.fwd_us, h1.fwd_us);
    cr_assert(ieee_ulp_eq(dbl, e1.fwd_flops, 0.0, 0));
    cr_assert_gt(e1.fwd_us, 0.0);
    cr_assert_gt(e1.bwd_us, 0.0);
}

/* H100 / H200 use the base measured on the H200 (gemm_sweep); other GPUs
 * the (fitted) gemm_efficiency; use_measured = 0 turns the table off. */
Test(cost_compute, measured_base_by_gpu_type) {
    cluster c = costfix_a100(1);
    compute_params p = plain();
    p.gemm_efficiency = 0.5;
    cr_assert(ieee_ulp_eq(dbl, gemm_base_efficiency(&c.gpus[0], PRECISION_FP16, &p), 0.5, 0));
    strcpy(c.gpus[0].name, "NVIDIA H100 SXM 80GB");
    cr_assert(ieee_ulp_eq(dbl, gemm_base_efficiency(&c.gpus[0], PRECISION_BF16, &p), 0.738, 0));
    cr_assert(ieee_ulp_eq(dbl, gemm_base_efficiency(&c.gpus[0], PRECISION_TF32, &p), 0.687, 0));
    p.use_measured = 0;
    cr_assert(ieee_ulp_eq(dbl, gemm_base_efficiency(&c.gpus[0], PRECISION_BF16, &p), 0.5, 0));
}

/* no_tiles (a CPU's loops, calib/layout_confirm.c): every shape at the base
 * efficiency, so a GEMM's time follows its FLOPs; a GPU's tiles make a
 * 16 x 16 x 16 GEMM far less efficient than a large one. */
Test(cost_compute, no_tiles_puts_every_shape_at_the_base_efficiency) {
    cluster c = costfix_a100(1);
    const cluster_gpu *g = &c.gpus[0];
    compute_params p = plain();
    const double small = gemm_efficiency(g, 1, 16, 16, 16, &p);
    cr_assert_lt(small, 0.01 * p.gemm_efficiency, "a GPU's tiles: %g", small);
    p.no_tiles = 1;
    const int64_t shapes[3][3] = {{16, 16, 16}, {27 * 256, 8 * 128, 4096}, {1, 7, 3}};
    for (int i = 0; i < 3; i++) {
        double e = gemm_efficiency(g, 1, shapes[i][0], shapes[i][1], shapes[i][2], &p);
        cr_assert(ieee_ulp_eq(dbl, e, p.gemm_efficiency, 0), "shape %d: %.9g", i, e);
    }
    /* half the columns, half the time */
    const double t1 = gemm_batched_time_us(g, PRECISION_BF16, 1, 16, 64, 16, &p);
    const double t2 = gemm_batched_time_us(g, PRECISION_BF16, 1, 16, 32, 16, &p);
    cr_assert_float_eq(t1 - p.kernel_overhead_us, 2 * (t2 - p.kernel_overhead_us), 1e-12 * t1);
}
