/*
 * moe_compute.h: the compute of one mixture-of-experts layer on one GPU,
 * part by part, from the measured MoE layer (inputs/moe_fit.h: the sweep's
 * fitted constants): router, permutation, grouped expert GEMMs, tails,
 * shared experts; forward, data gradient and weight gradient apart. The
 * layout simulator (layout_expand.c) prices its MoE layers with it, and the
 * expert-placement planner calls moe_layer_time_us with the token loads of
 * a placement.
 *
 * One MoE layer, one micro-batch, the GPU being priced: T = mbs x seq / cp
 * tokens on its attention, n = T / tp of them routed from it (sequence
 * parallel), k = top-k, h = d_model, E experts, E_l = E / ep local ones of
 * width F_l = moe_ffn / etp, R the routed rows its experts take (the
 * tokens' copies it receives after the etp all-gather; balanced: n k etp),
 * x the bytes of an activation element in the MoE block (4 under torch
 * autocast with fp32 parameters, else 2). The parts (c_launch + bytes/BW
 * + FLOPs/R with the fit's constants for the part and pass; the bytes and
 * FLOPs are moe_parts_torch.py's):
 *   router     gate GEMM: bytes 2 (n h + E h + n E), FLOPs 2 n h E; fwd,
 *              dgrad, wgrad. Top-k: fwd bytes 12 n E + 12 n k (dgrad: the
 *              fit's launch term only)
 *   permute    fwd bytes 2 R h x + 2 P h x + 32 R (P = R + 8 E_l padded
 *              rows); dgrad + n h x. A fused permute (Transformer Engine's,
 *              the stacks that run it: megatron) is its bytes at the fitted
 *              bandwidth and one kernel launch: no sort and histogram
 *              launches
 *   experts    the grouped GEMMs: per local expert e with t_e > 0 rows,
 *              c_expert + ((F / (P_gpu eff))^q + (B / BW')^q)^(1/q), plus
 *              c_launch per launch (moe_fit.h); fc1 (t, 2F_l gated, h), fc2
 *              (t, h, F_l) and their data (dgrad) and weight (wgrad)
 *              gradients; torch._grouped_mm runs w1, w3, w2 apart (3
 *              launches a pass), cuBLAS one launch per GEMM kind
 *   tails      SwiGLU on the routed rows (fwd 6 R F_l, dgrad 10 R F_l
 *              bytes; non-gated 4 and 6), unpermute + combine (fwd 2 P h x
 *              + 2 R h x + 4 R h + n h x bytes and 2 R h FLOPs; dgrad +4 R h
 *              bytes, 4 R h FLOPs), fp32 activations' casts of the routed
 *              rows (12 R h bytes fwd and dgrad), fp32 weights' casts (6
 *              bytes a local expert parameter, fwd and dgrad), FP8's
 *              dynamic casts (5 R (h + F_l) bytes, fwd and again in backward)
 *   shared     the shared experts as a dense MLP of width S / tp on T
 *              tokens: FLOPs 2 T h S' per GEMM (3 gated), bytes 2 (3 h S' + 3
 *              T h + 3 T S') (FP8: half); its SwiGLU 6 / 10 T S' bytes
 * Carried to another GPU: eff is a fraction of that GPU's peak in the
 * precision, the bandwidth terms scale with its HBM bandwidth over the fit
 * card's, launches stay. Unequal tokens per expert are priced expert by
 * expert (idle experts free): from a histogram's shares when given, else E_l
 * experts spread as a log-normal of the stated coefficient of variation
 * (moe_params.expert_cv), in at most 16 quantile bins.
 */
#ifndef PLACER_SIM_MOE_COMPUTE_H
#define PLACER_SIM_MOE_COMPUTE_H

#include "cluster.h"
#include "compute_model.h"
#include "graph.h"
#include "layout.h"
#include "moe_fit.h"
#include "moe_params.h"
#include "status.h"

/* The parts of moe_compute.h's opening, in the breakdown's order. */
typedef enum {
    MOE_T_ROUTER = 0, /* gate GEMM and top-k */
    MOE_T_PERMUTE,    /* permutation into expert order */
    MOE_T_EXPERTS,    /* the grouped expert GEMMs */
    MOE_T_TAILS,      /* activation, unpermute + combine, casts */
    MOE_T_SHARED,     /* the shared experts */
    MOE_T_COUNT
} moe_time_part;

/* "router", "permute", "experts", "tails", "shared". */
const char *moe_time_part_name(moe_time_part p);

/* One MoE layer's compute on the busiest GPU of its expert-parallel group,
 * one micro-batch, in microseconds, per part and pass (fwd, dgrad, wgrad:
 * moe_fit.h's moe_pass). */
typedef struct {
    double us[MOE_T_COUNT][MOE_PASS_COUNT];
    double fwd_us, bwd_us;   /* sums: forward; dgrad + wgrad */
    double fwd_flops;        /* model FLOPs of the forward on this GPU (its tokens' share) */
    int busiest;             /* the index into moe_loads.tokens_per_gpu priced (0 without loads) */
    double rows;             /* R: routed rows its grouped GEMMs took */
} moe_layer_time;

/* The token loads of one MoE layer and one micro-batch over an
 * expert-parallel group (all optional: see moe_layer_time_us). */
typedef struct {
    const double *tokens_per_gpu; /* [n_gpus] routed rows each ep rank's experts take (after the etp
                                     all-gather); NULL: every rank the mean n k etp x the load factor */
    int n_gpus;                   /* entries of tokens_per_gpu */
    const double *expert_share;   /* [n_local]: the priced rank's local experts' shares of its rows
                                     (summing to 1; a router histogram's); NULL: spread by expert_cv */
    int n_local;                  /* entries of expert_share */
    double expert_cv;             /* coefficient of variation of rows among a rank's experts; < 0: mp's */
} moe_loads;

/* The compute of one MoE layer of cfg under layout l on gpu (moe_compute.h's
 * opening), for the busiest rank of loads (NULL: balanced ranks at mp's load
 * factor, experts spread by mp's expert_cv). mp NULL: moe_params_default;
 * mp->fit NULL: the compiled-in fit (moe_fit_builtin); cp NULL:
 * compute_params_default (its kernel_overhead_us is a fused permute's
 * launch). *out is zeroed first. PL_ERR_INVALID for NULL gpu, cfg, l or
 * out, a dense model, loads with n_gpus < 1, a negative or non-finite
 * token count, expert_share with n_local other than E / ep or shares that
 * do not sum to 1 (within 1e-6), or a fit that fails moe_fit_validate.
 * Stable signature (the expert-placement planner calls it). */
pl_status moe_layer_time_us(const cluster_gpu *gpu, const gpt_config *cfg, const layout *l, const moe_params *mp,
                            const compute_params *cp, const moe_loads *loads, moe_layer_time *out);

/* The grouped expert GEMMs of one pass alone: `n_experts` experts with
 * rows[e] rows each (idle ones free), fc1 and fc2 of width f_local
 * (gated: fc1 2 f_local wide), hidden h, implementation impl in precision
 * prec on gpu, with fit f. The sweep's model (moe_fit.h). 0 for no rows. */
double moe_grouped_gemm_us(const cluster_gpu *gpu, const moe_fit *f, moe_gemm_impl impl, precision prec,
                           moe_pass pass, const double *rows, int n_experts, int64_t h, int64_t f_local, int gated);

#endif
