/*
 * test_fp8.c: the FP8 model (sim/layout/fp8.c, its hooks in compute_model.c,
 * layout_memory.c and layout_expand.c) against closed forms: the linear
 * layers' GEMMs at the FP8 peak and base with their casts, what stays bf16
 * (attention core, head, embedding), the FP8 memory parts, the recipe knob,
 * and the recipes a GPU cannot run.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <string.h>

#include "compute_model.h"
#include "cost_fixtures.h"
#include "fp8.h"
#include "layout_memory.h"
#include "collective.h"
#include "layout_sim.h"

static cluster_gpu hopper(void) {
    cluster_gpu g;
    memset(&g, 0, sizeof g);
    strcpy(g.name, "NVIDIA H100 SXM5 80GB");
    g.peak_flops[PRECISION_BF16] = 989e12;
    g.peak_flops[PRECISION_FP8] = 1979e12;
    g.hbm_bw = 3350e9;
    g.hbm_bytes = 80LL << 30;
    g.sm_count = 132;
    return g;
}

static cluster_gpu blackwell(void) {
    cluster_gpu g = hopper();
    strcpy(g.name, "NVIDIA B200");
    g.peak_flops[PRECISION_BF16] = 2250e12;
    g.peak_flops[PRECISION_FP8] = 4500e12;
    g.peak_mxfp8 = 4500e12;
    g.hbm_bw = 8000e9;
    g.sm_count = 148;
    return g;
}

/* Llama 3 8B at 8,192 tokens */
static gpt_config llama8b(void) {
    gpt_config g = costfix_llama405b(8192);
    g.d_model = 4096;
    g.n_heads = 32;
    g.n_kv_heads = 8;
    g.d_ff = 14336;
    g.n_layers = 32;
    g.vocab = 128256;
    return g;
}

static layout fp8_layout(int tp, fp8_recipe r) {
    layout l = costfix_layout(tp, 1, 8, 1);
    l.global_batch = 128;
    l.prec = PRECISION_FP8;
    l.fp8 = r;
    return l;
}

/* With no tiles and no launch overhead, a layer's FP8 forward is its bf16
 * forward with each linear GEMM 2mnk / (peak16 base) replaced by
 * 2mnk / (peak8 base R_fwd) and the input and weight casts added
 * (bytes x elements / (hbm x eff x frac)); backward likewise with the data
 * and weight gradients' ratios and the gradients' casts. Everything else (attention core, norms,
 * activations) is the same bf16 kernel, so the difference is exact. */
Test(fp8, a_layer_is_its_bf16_layer_with_fp8_linears_and_casts) {
    cluster_gpu g = hopper();
    gpt_config cfg = llama8b();
    compute_params p;
    compute_params_default(&p);
    p.no_tiles = 1;
    p.kernel_overhead_us = 0;
    const int r_list[3] = {FP8_RECIPE_DELAYED, FP8_RECIPE_TENSORWISE, FP8_RECIPE_BLOCKWISE};
    for (int ri = 0; ri < 3; ri++) {
        fp8_recipe r = (fp8_recipe)r_list[ri];
        layout l8 = fp8_layout(2, r), l16 = l8;
        l16.prec = PRECISION_BF16;
        layer_cost a, b;
        layer_compute_cost(&g, &cfg, &l8, &p, &a);
        layer_compute_cost(&g, &cfg, &l16, &p, &b);
        const double base = gemm_base_efficiency(&g, PRECISION_BF16, &p);
        const double Rf = fp8_gemm_base(&g, r, base, FP8_GEMM_FWD) / base;
        const double Rd = fp8_gemm_base(&g, r, base, FP8_GEMM_DGRAD) / base;
        const double Rw = fp8_gemm_base(&g, r, base, FP8_GEMM_WGRAD) / base;
        const double T = 8192, h = 4096, t = 2, qkv = (32 + 16) * 128 / t, f2 = 2 * 14336 / t, f = 14336 / t;
        const double mn[4][2] = {{qkv, h}, {h, 4096 / t}, {f2, h}, {h, f}}; /* n, k */
        const double mb = 16, bw = 3350e9 * 0.85 * fp8_cast_bandwidth_fraction(r), cb = fp8_cast_bytes_per_elem(r);
        double dfwd = 0, dbwd = 0;
        for (int i = 0; i < 4; i++) {
            const double n = mn[i][0], k = mn[i][1], fl = 2 * T * n * k;
            dfwd += fl / (1979e12 * base * Rf) * 1e6 - fl / (989e12 * base) * 1e6;
            dfwd += cb * T * k / bw * 1e6 + cb * n * k / bw * 1e6 / mb; /* input, weight (once in 16) */
            dbwd += fl / (1979e12 * base * Rd) * 1e6 + fl / (1979e12 * base * Rw) * 1e6 - 2 * fl / (989e12 * base) * 1e6;
            dbwd += cb * T * n / bw * 1e6; /* output gradient */
        }
        cr_assert(ieee_ulp_eq(dbl, a.fwd_us - b.fwd_us, dfwd, 4096), "%s fwd %.9g vs %.9g", fp8_recipe_name(r),
                  a.fwd_us - b.fwd_us, dfwd);
        cr_assert(ieee_ulp_eq(dbl, a.bwd_us - b.bwd_us, dbwd, 4096), "%s bwd %.9g vs %.9g", fp8_recipe_name(r),
                  a.bwd_us - b.bwd_us, dbwd);
        cr_assert(a.fwd_flops == b.fwd_flops, "model FLOPs do not depend on the precision");
        cr_assert(a.fwd_us < b.fwd_us && a.bwd_us < b.bwd_us, "FP8 is faster than bf16 at 8B, tp 2");
    }
}

/* The head (output layer, loss) and the embedding stay bf16 in FP8 runs. */
Test(fp8, head_and_embedding_stay_bf16) {
    cluster_gpu g = hopper();
    gpt_config cfg = llama8b();
    layout l8 = fp8_layout(1, FP8_RECIPE_DELAYED), l16 = l8;
    l16.prec = PRECISION_BF16;
    layer_cost a, b;
    head_compute_cost(&g, &cfg, &l8, NULL, &a);
    head_compute_cost(&g, &cfg, &l16, NULL, &b);
    cr_assert(a.fwd_us == b.fwd_us && a.bwd_us == b.bwd_us);
    embedding_compute_cost(&g, &cfg, &l8, NULL, &a);
    embedding_compute_cost(&g, &cfg, &l16, NULL, &b);
    cr_assert(a.fwd_us == b.fwd_us && a.bwd_us == b.bwd_us);
}

/* The recipes differ where they should: tensorwise pays the amax pass
 * (6 bytes an element against 4, a kernel more), blockwise a slower GEMM;
 * MXFP8 runs at Blackwell's MXFP8 peak. */
Test(fp8, the_recipes_differ_in_cost) {
    cluster_gpu g = hopper();
    gpt_config cfg = llama8b();
    layer_cost c[FP8_RECIPE_COUNT];
    for (int r = 0; r < 3; r++) {
        layout l = fp8_layout(1, (fp8_recipe)r);
        layer_compute_cost(&g, &cfg, &l, NULL, &c[r]);
    }
    cr_assert(c[FP8_RECIPE_TENSORWISE].fwd_us > c[FP8_RECIPE_DELAYED].fwd_us);
    cr_assert(c[FP8_RECIPE_BLOCKWISE].bwd_us > c[FP8_RECIPE_DELAYED].bwd_us);
    cr_assert(fp8_cast_bytes_per_elem(FP8_RECIPE_TENSORWISE) == 6.0 && fp8_cast_kernels(FP8_RECIPE_TENSORWISE) == 2);
    cr_assert(fp8_cast_bytes_per_elem(FP8_RECIPE_DELAYED) == 4.0 && fp8_cast_kernels(FP8_RECIPE_DELAYED) == 1);
    cluster_gpu b = blackwell();
    cr_assert(fp8_gemm_peak(&b, FP8_RECIPE_MXFP8) == 4500e12);
    b.peak_mxfp8 = 2 * 4500e12; /* a made-up GPU where MXFP8 is faster: its own peak is used */
    cr_assert(fp8_gemm_peak(&b, FP8_RECIPE_MXFP8) == 9000e12);
}

Test(fp8, a_gpu_refuses_recipes_it_cannot_run) {
    cluster_gpu h = hopper(), b = blackwell(), a = hopper();
    a.peak_flops[PRECISION_FP8] = 0; /* an A100 */
    char msg[256];
    cr_assert_eq(fp8_check_gpu(&h, FP8_RECIPE_DELAYED, msg, sizeof msg), PL_OK);
    cr_assert_eq(fp8_check_gpu(&h, FP8_RECIPE_BLOCKWISE, msg, sizeof msg), PL_OK);
    cr_assert_eq(fp8_check_gpu(&h, FP8_RECIPE_MXFP8, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "cannot run the FP8 recipe mxfp8") && !strchr(msg, '\n'), "%s", msg);
    cr_assert_eq(fp8_check_gpu(&b, FP8_RECIPE_MXFP8, msg, sizeof msg), PL_OK);
    cr_assert_eq(fp8_check_gpu(&a, FP8_RECIPE_DELAYED, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "cannot run FP8") != NULL, "%s", msg);
    /* and the simulator refuses the layout, one line */
    cluster c = costfix_a100(2);
    c.gpus[0] = h;
    gpt_config cfg = llama8b();
    layout l = fp8_layout(1, FP8_RECIPE_MXFP8);
    layout_sim *s = NULL;
    cr_assert_eq(layout_sim_create(&cfg, &l, &c, &s, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_null(s);
    cr_assert(strstr(msg, "mxfp8") && !strchr(msg, '\n'), "%s", msg);
    l.fp8 = FP8_RECIPE_TENSORWISE;
    cr_assert_eq(layout_sim_create(&cfg, &l, &c, &s, msg, sizeof msg), PL_OK, "%s", msg);
    layout_sim_destroy(s);
}

/* Memory: the FP8 weight copies and the FP8 saved inputs against their
 * closed forms (layout_memory.c), and the activations' difference from bf16. */
Test(fp8, memory_parts_against_their_closed_forms) {
    gpt_config cfg = llama8b();
    const double h = 4096, a = 32, g = 8, d = 128, f = 14336, s = 8192;
    for (int sp = 0; sp <= 1; sp++)
        for (int r = 0; r < FP8_RECIPE_COUNT; r++) {
            layout l8 = fp8_layout(4, (fp8_recipe)r), l16;
            l8.sp = sp;
            l16 = l8;
            l16.prec = PRECISION_BF16;
            const double t = 4, R = sp ? 1.0 / t : 1.0;
            const double wcopy = r == FP8_RECIPE_BLOCKWISE ? 2 * (1 + 4.0 / 16384) : r == FP8_RECIPE_MXFP8 ? 2 * (1 + 1.0 / 32) : 2;
            const double q = r == FP8_RECIPE_BLOCKWISE ? 1 + 4.0 / 128 : r == FP8_RECIPE_MXFP8 ? 1 + 1.0 / 32 : 1;
            const double w = (h * (a + 2 * g) * d + a * d * h + 2 * h * f + f * h) / t;
            cr_assert_eq(layer_fp8_weight_bytes(&cfg, &l8), (int64_t)llround(w * wcopy), "recipe %d", r);
            const double act = q * s * h * 2 * R + (q * s * h + q * s * f) / t;
            cr_assert_eq(layer_fp8_activation_bytes(&cfg, &l8, NULL), (int64_t)llround(act), "recipe %d sp %d", r, sp);
            /* bf16 - fp8: those four inputs at 2 bytes against q */
            double diff = (2 - q) * (s * h * 2 * R + (s * h + s * f) / t);
            double got = (double)(layer_activation_bytes(&cfg, &l16) - layer_activation_bytes(&cfg, &l8));
            cr_assert(fabs(got - diff) <= 2, "recipe %d sp %d: %.0f vs %.0f", r, sp, got, diff);
            layout_memory m8, m16;
            layout_stage_memory(&cfg, &l8, 0, 32, 1, &m8);
            layout_stage_memory(&cfg, &l16, 0, 32, 1, &m16);
            cr_assert_eq(m8.fp8_weights, 32 * layer_fp8_weight_bytes(&cfg, &l8));
            cr_assert_eq(m8.fp8_act_per_layer, layer_fp8_activation_bytes(&cfg, &l8, NULL));
            cr_assert_eq(m8.total, m8.params + m8.grads + m8.optimizer + m8.activations + m8.embedding_head +
                                       m8.buffers + m8.fp8_weights);
            cr_assert_eq(m16.fp8_weights, 0);
            cr_assert_eq(m16.fp8_act_per_layer, 0);
            cr_assert_eq(m8.params, m16.params, "bf16 weights stay (the FP8 copies are beside them)");
        }
    /* full recomputation keeps only the bf16 layer input */
    layout l = fp8_layout(1, FP8_RECIPE_DELAYED);
    l.recompute = RECOMPUTE_FULL;
    cr_assert_eq(layer_fp8_activation_bytes(&cfg, &l, NULL), 0);
}

/* Messages: FP8 runs send and reduce activations in bf16, except that with
 * sequence parallelism the forward's two layer-input all-gathers move FP8
 * (Transformer Engine quantizes the norm output before gathering it). So
 * without sp the TP time is bf16's to the bit, and with sp it is bf16's
 * less m L x 2 (AG(S) - AG(S/2)), S the activation's bytes. */
Test(fp8, tp_messages_bf16_but_the_sp_gathers) {
    cluster c = costfix_a100(2);
    c.gpus[0] = hopper();
    gpt_config cfg = llama8b();
    cfg.n_layers = 4;
    cfg.seq_len = 4096;
    char msg[256];
    for (int sp = 0; sp <= 1; sp++) {
        layout l8 = fp8_layout(4, FP8_RECIPE_DELAYED), l16;
        l8.dp = 4;
        l8.global_batch = 16;
        l8.sp = sp;
        l16 = l8;
        l16.prec = PRECISION_BF16;
        layout_result r8, r16;
        layout_sim *s = NULL;
        cr_assert_eq(layout_sim_create(&cfg, &l8, &c, &s, msg, sizeof msg), PL_OK, "%s", msg);
        cr_assert_eq(layout_sim_run(s, NULL, 0, &r8, msg, sizeof msg), PL_OK, "%s", msg);
        layout_sim_destroy(s);
        cr_assert_eq(layout_sim_create(&cfg, &l16, &c, &s, msg, sizeof msg), PL_OK, "%s", msg);
        cr_assert_eq(layout_sim_run(s, NULL, 0, &r16, msg, sizeof msg), PL_OK, "%s", msg);
        layout_sim_destroy(s);
        cr_assert(r8.pp_send_bytes == r16.pp_send_bytes);
        if (!sp) {
            cr_assert(r8.parts_us[LAYOUT_T_TP] == r16.parts_us[LAYOUT_T_TP], "%.6f vs %.6f", r8.parts_us[LAYOUT_T_TP],
                      r16.parts_us[LAYOUT_T_TP]);
            continue;
        }
        int64_t g[4] = {0, 1, 2, 3};
        const double S = 1.0 * 4096 * 4096 * 2; /* mbs 1 x seq x h x 2 bytes */
        coll_estimate a16, a8;
        cr_assert_eq(coll_time(&c, COLL_ALL_GATHER, g, 4, S, &a16), PL_OK);
        cr_assert_eq(coll_time(&c, COLL_ALL_GATHER, g, 4, S / 2, &a8), PL_OK);
        const double m = 4, L = 4, want = m * L * 2.0 * (a16.time_us - a8.time_us);
        const double got = r16.parts_us[LAYOUT_T_TP] - r8.parts_us[LAYOUT_T_TP];
        cr_assert(fabs(got - want) <= 1e-6 * want, "%.6f vs %.6f", got, want);
    }
}
