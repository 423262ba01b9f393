/*
 * moe_params.h: the figures a mixture-of-experts prediction takes besides
 * the model, layout and cluster: the spread of routed tokens (a stated
 * coefficient of variation, a measured router histogram, an imbalance or
 * capacity factor), the measured layer's constants, and the stack's
 * choices (which grouped GEMM, fused permutation, fp32 activations). The
 * layout simulator carries them in layout_sim_params.moe; moe.h and
 * moe_compute.h use them.
 */
#ifndef PLACER_SIM_MOE_PARAMS_H
#define PLACER_SIM_MOE_PARAMS_H

#include "graph.h"
#include "layout.h"
#include "moe_fit.h"
#include "moe_hist.h"

typedef struct {
    double imbalance;       /* routed rows on the busiest expert rank / the mean, >= 1; 0 (default):
                               moe_rank_load_factor of expert_cv over the layout's ep ranks */
    double capacity_factor; /* 0: dropless (imbalance applies); > 0: capacity = this x the mean, padded */
    double expert_cv;       /* coefficient of variation of the rows among experts (a router
                               histogram's), >= 0; default 0.1: the stated figure of a trained router
                               with load balancing (moe.c says why); 0: balanced (forced balance) */
    const moe_fit *fit;     /* the measured MoE layer (inputs/moe_fit.h); NULL: moe_fit_builtin */
    int gemm_impl;          /* moe_gemm_impl of the expert GEMMs; -1 (default): the stack's
                               (framework_apply_moe; Megatron: cublas_loop, FP8 cublas_fp8_loop) */
    int fp32_act;           /* 1: the MoE block's activations are fp32 (torch autocast over fp32
                               parameters: torchtitan, hf), 0 bf16; -1: the stack's */
    int weight_cast;        /* 1: the experts' fp32 weights are cast to bf16 every forward (autocast);
                               -1: the stack's */
    int fused_permute;      /* 1: one fused permutation kernel (Transformer Engine's); 0: torch's sort,
                               histogram and gathers (torchtitan); -1: the stack's */
    int fp32_gemm;          /* 1: the expert GEMMs multiply in fp32 (Hugging Face's grouped_mm under
                               autocast with fp32 parameters); -1: the stack's */
    const moe_hist *hist;   /* measured router histograms, one per MoE layer in model order (the
                               shares price each layer's experts); NULL: expert_cv */
} moe_params;

/* Defaults: dropless, the load factor from expert_cv 0.1, the compiled-in
 * fit, every stack choice -1 (the framework's, else Megatron's). */
void moe_params_default(moe_params *p);

/* The load factor f of moe.h for l: capacity_factor when > 0, else
 * imbalance when >= 1, else moe_rank_load_factor(expert_cv, E / ep, ep)
 * (p NULL: 1). */
double moe_load_factor(const moe_params *p, const gpt_config *cfg, const layout *l);

/* The expected largest of n ranks' loads, each the sum of e experts whose
 * rows have coefficient of variation cv, over the mean: 1 + cv / sqrt(e)
 * x sqrt(2 ln n) (the normal bound on the largest of n; 1 for n = 1 or
 * cv = 0). The load factor of a plan's default imbalance. */
double moe_rank_load_factor(double cv, int experts_per_rank, int ranks);

#endif
