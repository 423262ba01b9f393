/*
 * moe_fit.h: the measured mixture-of-experts layer as data: the constants
 * `fit_sweeps.py moe` fits to the MoE layer sweep of one GPU
 * (benchmarks/hw/moe_fit.py has the models and the fit rows;
 * benchmarks/hw/results/moe_layer_fit_CARD.json the values), which the
 * layout simulator's MoE layer (sim/layout/moe_compute.c) prices a layer
 * with. Read from that JSON file by moe_fit_file.h; the H100 file's values
 * are compiled in (moe_fit_builtin, generated from the file by
 * scripts/gen-moe-fit.py; a test holds the two equal), so a refit is: rerun
 * the sweep and the fit, rerun the generator (or pass the new file with
 * --moe-fit FILE).
 *
 * Grouped expert GEMMs, per implementation, precision and pass (fwd, dgrad,
 * wgrad), for E local experts with t_e tokens each and the pass's GEMMs g:
 *   t = L c_launch + sum over g and experts e with t_e > 0 of
 *         c_expert + ((F_ge / (P eff))^q + (B_ge / BW)^q)^(1/q)
 * F = 2 M N K, B = the operands read and the output written once (input
 * width 2 bytes in bf16, 1 in FP8, output bf16), P the card's dense peak in
 * that precision, L the launches of the pass (one per GEMM for cuBLAS, the
 * torch pass's 3 for torch._grouped_mm: w1, w3 and w2 apart).
 * Other parts, per part and pass:  t = c_launch + bytes / BW + FLOPs / R
 * (a term absent when its constant is 0); the bytes and FLOPs of each part
 * are moe_parts_torch.py's (sim/layout/moe_compute.c writes them down).
 *
 * Carried to another GPU (moe_compute.c): eff stays a fraction of that
 * GPU's peak, BW scales with its HBM bandwidth over the card's (hbm_bw
 * here), the launch terms stay.
 */
#ifndef PLACER_INPUTS_MOE_FIT_H
#define PLACER_INPUTS_MOE_FIT_H

#include <stddef.h>

#include "status.h"

/* The grouped-GEMM implementations the sweep times, and which stack runs
 * each (the framework profile's moe_gemm names one of them). */
typedef enum {
    MOE_IMPL_TORCH_GROUPED_MM = 0, /* torch._grouped_mm (CUTLASS): torchtitan, transformers' grouped_mm */
    MOE_IMPL_CUBLAS_GROUPED,       /* cublasGemmGroupedBatchedEx */
    MOE_IMPL_CUBLAS_LOOP,          /* one cuBLAS GEMM per expert (TE GroupedLinear's multi-stream GEMMs) */
    MOE_IMPL_CUBLAS_STRIDED,       /* a strided batched GEMM (equal counts only) */
    MOE_IMPL_CUBLAS_FP8_LOOP,      /* one cuBLASLt FP8 GEMM per expert (tensorwise scales) */
    MOE_IMPL_COUNT
} moe_gemm_impl;

typedef enum { MOE_PASS_FWD = 0, MOE_PASS_DGRAD, MOE_PASS_WGRAD, MOE_PASS_COUNT } moe_pass;
typedef enum { MOE_FIT_BF16 = 0, MOE_FIT_FP8, MOE_FIT_PREC_COUNT } moe_fit_prec;

/* The layer's other parts (moe_parts_torch.py's names). */
typedef enum {
    MOE_PART_ROUTER_GATE = 0, /* the gate GEMM (T, d) x (d, E) */
    MOE_PART_ROUTER_TOPK,     /* scores, (group-limited) top-k, normalisation, the expert histogram */
    MOE_PART_PERMUTE,         /* sort of the T k choices, gather into expert order, padding */
    MOE_PART_UNPERMUTE,       /* padding undone, scatter back, the k outputs combined with their scores */
    MOE_PART_SWIGLU,          /* the experts' activation on the routed rows */
    MOE_PART_ACT_CAST,        /* fp32 <-> bf16 casts of the routed rows (fp32 activations only) */
    MOE_PART_WEIGHT_CAST,     /* fp32 -> bf16 casts of the local experts' weights (fp32 parameters only) */
    MOE_PART_SHARED_MLP,      /* the shared expert's three GEMMs, bf16 */
    MOE_PART_SHARED_MLP_FP8,  /* the same in FP8 (tensorwise) */
    MOE_PART_SWIGLU_SHARED,   /* the shared expert's activation */
    MOE_PART_FP8_CAST,        /* dynamic tensorwise casts of the routed rows and the experts' hidden rows */
    MOE_PART_COUNT
} moe_part;

typedef struct {
    int have;           /* 1: fitted (the file had this implementation, precision and pass) */
    double c_launch_us; /* per launch */
    double c_expert_us; /* per expert with tokens */
    double eff;         /* fraction of the peak (0, 1.5] */
    double bw;          /* bytes/s of the roofline's memory side */
    double q;           /* the knee's sharpness, > 1 */
    double peak;        /* the dense peak the fit used, FLOP/s */
} moe_gemm_fit;

typedef struct {
    int have;
    double c_launch_us; /* fixed per call, >= 0 */
    double bw;          /* bytes/s; 0: no bytes term */
    double flops;       /* FLOP/s; 0: no FLOP term */
} moe_part_fit;

#define MOE_FIT_CARD_LEN 32

typedef struct {
    char card[MOE_FIT_CARD_LEN]; /* "h100", ... */
    double hbm_bw;               /* the card's HBM bandwidth, bytes/s (carrying BW to other GPUs) */
    moe_gemm_fit gemm[MOE_IMPL_COUNT][MOE_FIT_PREC_COUNT][MOE_PASS_COUNT];
    moe_part_fit part[MOE_PART_COUNT][MOE_PASS_COUNT];
} moe_fit;

/* Names as the fit file writes them: "torch_grouped_mm", "cublas_grouped",
 * "cublas_loop", "cublas_strided", "cublas_fp8_loop"; "fwd", "dgrad",
 * "wgrad"; "bf16", "fp8"; the parts' names above in lower case
 * ("router_gate", ...). "unknown" out of range. Static strings. */
const char *moe_gemm_impl_name(moe_gemm_impl i);
const char *moe_pass_name(moe_pass p);
const char *moe_fit_prec_name(moe_fit_prec p);
const char *moe_part_name(moe_part p);

/* The implementation named s, or -1. */
int moe_gemm_impl_from_name(const char *s);

/* The compiled-in fit: benchmarks/hw/results/moe_layer_fit_h100.json
 * (one H100 80GB HBM3, 2026-12-06), written by scripts/gen-moe-fit.py
 * into moe_fit_builtin.c. */
void moe_fit_builtin(moe_fit *out);

/* Check every constant that is marked have: finite, launch and expert
 * terms >= 0, eff in (0, 1.5], bw > 0, q > 1, peak > 0; parts: c_launch
 * >= 0, bw and flops >= 0; hbm_bw > 0; and that the parts the layer
 * always needs (router gate and top-k forward, permute and unpermute
 * forward and dgrad, swiglu forward and dgrad) and at least one bf16
 * grouped GEMM implementation with all three passes are there. One line
 * naming the first bad entry; PL_OK or PL_ERR_INVALID. */
pl_status moe_fit_validate(const moe_fit *f, char *msg, size_t len);

#endif
