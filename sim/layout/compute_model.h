/*
 * compute_model.h: the time of one transformer layer's kernels (and the
 * embedding, head and loss) on one GPU of a cluster, from datasheet
 * figures and a per-kernel model, for the layout simulator.
 *
 *   GEMM (m x n x k)   2mnk FLOP at peak[precision] * efficiency(m,n,k):
 *                      tile quantisation (tiles of TM x TN; the edge tiles
 *                      count whole), wave quantisation (ceil(tiles / SMs)
 *                      waves), split-k for few tiles and a long k, a
 *                      short-k factor, times a base efficiency: measured
 *                      for H100 / H200 (benchmarks/hw/gemm_sweep.cu), else
 *                      gemm_efficiency, the model's one fitted constant
 *   memory-bound ops   bytes / (hbm_bw * memory_efficiency) (norms,
 *                      activations, residual adds, rotary, softmax and
 *                      dropout of unfused attention, optimizer)
 *   attention core     flash: 4 T^2 hs FLOP per head forward (causal:
 *                      half), backward 2.5x, at the GEMM efficiency of its
 *                      shapes; unfused (Megatron 2021): batched GEMMs over
 *                      the full T x T scores plus softmax and dropout in HBM
 * Every figure traces to the cluster file (datasheet) or to a constant
 * named in compute_params; the model's comment says where each default
 * comes from (a measurement on the H200, or a datasheet).
 */
#ifndef PLACER_SIM_COMPUTE_MODEL_H
#define PLACER_SIM_COMPUTE_MODEL_H

#include <stdint.h>

#include "cluster.h"
#include "framework_profile.h" /* attention_impl: the stack decides the attention kernel */
#include "graph.h"
#include "layout.h"
#include "precision.h"

typedef struct {
    double gemm_efficiency;   /* base fraction of peak a large GEMM reaches (fitted or default) */
    double memory_efficiency; /* fraction of hbm_bw memory-bound kernels reach */
    double kernel_overhead_us;/* fixed cost per kernel launch */
    double gemm_k_half;       /* reduction length at which a GEMM reaches half its long-k efficiency */
    int use_measured;         /* 1: GPU types with a measured base efficiency use it (H100, H200);
                                 0: every GPU uses gemm_efficiency */
    attention_impl attention; /* fused or unfused attention core */
    int dropout;              /* -1: by model family (compute_model_dropout), 0 off, 1 on */
    double blackwell_gemm_efficiency; /* base of Blackwell GPUs (name holds "B200", "B300" or
                                 "Blackwell"), FITTED on one FP8 row (compute_model.c); 0: gemm_efficiency */
    int no_tiles;             /* 1: no tile, wave or short-k factors, every GEMM at the base
                                 efficiency (a CPU's loops, for calib/layout_confirm.c);
                                 0 (default): a GPU's */
    double gemm_scale;        /* multiplies the base efficiency, measured or not (1: Megatron's
                                 cuBLAS GEMMs; a framework profile's fitted figure, framework.h) */
} compute_params;

/* Defaults with their sources in compute_model.c's comment. */
void compute_params_default(compute_params *p);

/* Whether the model trains with dropout under p: p->dropout when it is 0
 * or 1, else by family: layernorm models with biases (Megatron GPT, GPT-2:
 * dropout 0.1) do, RMSNorm / no-bias models (Llama family) do not. p may
 * be NULL (by family). Dropout adds its masks to memory and its
 * elementwise passes to time. */
int compute_model_dropout(const gpt_config *cfg, const compute_params *p);

/* Fraction of peak a GEMM of m x n x k in precision prec reaches (batch
 * independent problems of that shape at once, batch >= 1): the base
 * efficiency (gemm_base_efficiency) times tile, wave and short-k factors,
 * the best over the tile shapes and split-k a cuBLAS heuristic picks from
 * (see compute_model.c). In (0, 1]. gemm_efficiency is it for bf16. */
double gemm_efficiency_prec(const cluster_gpu *gpu, precision prec, int64_t batch, int64_t m, int64_t n, int64_t k,
                            const compute_params *p);
double gemm_efficiency(const cluster_gpu *gpu, int64_t batch, int64_t m, int64_t n, int64_t k,
                       const compute_params *p);

/* The base efficiency of gpu in prec: its measured figure when p->use_measured
 * and its type (name) has one, else p->gemm_efficiency. */
double gemm_base_efficiency(const cluster_gpu *gpu, precision prec, const compute_params *p);

/* Time of `batch` independent GEMMs of m x n x k (a strided batched GEMM,
 * as the unfused attention's Q K^T and P V run). */
double gemm_batched_time_us(const cluster_gpu *gpu, precision prec, int64_t batch, int64_t m, int64_t n,
                            int64_t k, const compute_params *p);

/* Time of one GEMM of m x n x k in precision prec on gpu. */
double gemm_time_us(const cluster_gpu *gpu, precision prec, int64_t m, int64_t n, int64_t k,
                    const compute_params *p);

/* Time of a memory-bound kernel moving `bytes`. */
double memory_time_us(const cluster_gpu *gpu, double bytes, const compute_params *p);

/* Forward and backward compute time of one transformer layer of model cfg
 * on one GPU under layout l (its tp / cp split, sp, precision; the
 * micro-batch of l->micro_batch sequences of cfg->seq_len / cp tokens),
 * without communication. Recomputation is NOT included in bwd (the caller
 * adds the recomputed forward part: see layer_recompute_us). */
typedef struct {
    double fwd_us;          /* forward */
    double bwd_us;          /* backward (input and weight gradients) */
    double recompute_us;    /* extra forward work in backward under l->recompute */
    double fwd_flops;       /* model FLOPs of the forward, this GPU */
} layer_cost;

void layer_compute_cost(const cluster_gpu *gpu, const gpt_config *cfg, const layout *l,
                        const compute_params *p, layer_cost *out);

/* layer_compute_cost with (with_mlp = 1) or without (0) the MLP's GEMMs
 * and activation: an MoE layer's attention part (moe.h adds its experts).
 * Configs with a head_dim of their own, MLA or sliding windows take their
 * attention shapes (compute_model.c: ext_attention). */
void layer_compute_cost_mlp(const cluster_gpu *gpu, const gpt_config *cfg, const layout *l,
                            const compute_params *p, int with_mlp, layer_cost *out);

/* The same for the embedding (pre) and for the final norm + head + loss
 * (post), vocabulary-parallel over tp. */
void embedding_compute_cost(const cluster_gpu *gpu, const gpt_config *cfg, const layout *l,
                            const compute_params *p, layer_cost *out);
void head_compute_cost(const cluster_gpu *gpu, const gpt_config *cfg, const layout *l,
                       const compute_params *p, layer_cost *out);

/* Optimizer step time for `params` parameters held on one GPU (memory-bound). */
double optimizer_time_us(const cluster_gpu *gpu, int64_t params, const compute_params *p);

#endif
