/*
 * layout_memory.h: memory per GPU of a layout, as a sum of named parts,
 * each a closed form that a test holds against its source:
 *   parameters, gradients, optimizer state  by precision and sharding
 *       (mixed precision: 2-byte weights and gradients, fp32 master copy
 *       and two fp32 Adam moments = 12 bytes per parameter of optimizer
 *       state; zero 1 shards the optimizer state over dp, 2 also the
 *       gradients, 3 / fsdp also the weights)
 *   activations per layer and micro-batch   Korthikanti et al. 2022, Table 2:
 *       s b h (34 + 5 a s / h) bytes without parallelism; / t for the parts
 *       tp splits (all with sp, else 24/t + 10); selective recompute drops
 *       the 5 a s / h term; full recompute keeps only the layer input
 *       (2 s b h, / t with sp); / cp for the sequence split
 *   stashed micro-batches  how many the schedule keeps at once on a stage
 *       (from the simulator's arena, or the closed form of 1F1B / interleaving)
 *   communication buffers, embedding and head, the loss's logits
 */
#ifndef PLACER_SIM_LAYOUT_MEMORY_H
#define PLACER_SIM_LAYOUT_MEMORY_H

#include <stdint.h>

#include "compute_model.h"
#include "graph.h"
#include "layout.h"
#include "moe.h"

typedef struct {
    int64_t params;          /* weights held (after sharding), bytes */
    int64_t grads;           /* gradients held, bytes */
    int64_t optimizer;       /* master weights + moments held, bytes */
    int64_t activations;     /* stashed activations at the peak, bytes */
    int64_t act_per_layer;   /* one layer, one micro-batch, bytes (Korthikanti) */
    int64_t buffers;         /* communication buckets, gathered fsdp weights, workspace */
    int64_t embedding_head;  /* logits and the embedding's / head's extra activations */
    /* mixture of experts (0 for a dense model; layout_stage_memory_moe): */
    int64_t expert_params;   /* the stage's experts: E/ep of them at 1/etp, weights (zero 3: / edp) */
    int64_t expert_grads;    /* their gradients (zero >= 2: / edp) */
    int64_t expert_optimizer;/* their optimizer state (zero >= 1: / edp) */
    int64_t moe_activations; /* routed activations stashed (router, routed copies, expert and shared
                                intermediates: moe.h) */
    int64_t moe_buffers;     /* the dispatcher's send and receive buffers */
    int64_t total;           /* sum of the parts */
    /* FP8 (precision fp8; 0 otherwise: layout_memory.c, fp8.h) */
    int64_t fp8_weights;     /* FP8 copies of the linear layers' weights, bytes (in total) */
    int64_t fp8_act_per_layer; /* of act_per_layer: the linear layers' inputs saved in FP8 */
} layout_memory;

/* Activation bytes of one transformer layer for one micro-batch under l
 * (its tp, sp, cp, recompute, precision), Korthikanti et al.'s formula
 * extended to GQA and SwiGLU as the comment in layout_memory.c derives. */
int64_t layer_activation_bytes(const gpt_config *cfg, const layout *l);

/* Memory of pipeline stage `stage` (0..pp-1) holding `layers` transformer
 * layers in all its chunks, with `in_flight` chunk micro-batches (one
 * micro-batch's forward through one of the stage's vp chunks, each holding
 * layers / vp layers; with vp = 1 simply micro-batches) stashed at the peak
 * (the caller takes it from the simulator, or from layout_in_flight_1f1b). */
void layout_stage_memory(const gpt_config *cfg, const layout *l, int stage, int layers, int in_flight,
                         layout_memory *out);

/* The same under the compute model's choices p (p->attention: a fused
 * attention keeps no T x T scores; p->dropout: masks or none); p NULL:
 * compute_params_default (fused attention, dropout by model family). The
 * plain functions above are these with p = NULL. */
int64_t layer_activation_bytes_p(const gpt_config *cfg, const layout *l, const compute_params *p);
void layout_stage_memory_p(const gpt_config *cfg, const layout *l, const compute_params *p, int stage, int layers,
                           int in_flight, layout_memory *out);

/* FP8 parts (layout_memory.c's formulas; 0 unless l->prec is fp8): the
 * bytes of one layer's FP8 weight copies on one GPU, and of one layer's
 * activations (one micro-batch) held as FP8 saved inputs. p as above. */
int64_t layer_fp8_weight_bytes(const gpt_config *cfg, const layout *l);
int64_t layer_fp8_activation_bytes(const gpt_config *cfg, const layout *l, const compute_params *p);

/* layout_stage_memory_p for any model: a dense model's parts are exactly
 * layout_stage_memory_p's; an MoE model's replicated parameters become
 * each layer's dense part (moe_layer_dense_params_per_gpu, the dense or
 * the router + shared MLP), and its MoE parts are added as the named
 * fields above (layout_memory.c's MoE block has the closed forms). mp NULL:
 * moe_params_default. */
void layout_stage_memory_moe(const gpt_config *cfg, const layout *l, const compute_params *p, const moe_params *mp,
                             int stage, int layers, int in_flight, layout_memory *out);

/* Parameters one GPU holds of one transformer layer (its 1/tp share of the
 * GEMM weights and biases, the norms whole), and of the embedding (stage 0)
 * and head (last stage) parts of a stage, before any dp sharding. */
int64_t layer_params_per_gpu(const gpt_config *cfg, const layout *l);
int64_t stage_extra_params_per_gpu(const gpt_config *cfg, const layout *l, int stage);

/* Chunk micro-batches 1F1B (vp = 1) or interleaved 1F1B keeps in flight
 * on the first stage: min(m, pp), and Megatron's interleaved warm-up count
 * plus one, 2 (pp - 1) + (vp - 1) pp + 1, at most m * vp. */
/* The ranks a ZeRO level's shards spread over: dp x cp for zero 1-3
 * (context-parallel ranks hold the same weights; Megatron-core shards over
 * its data-parallel-with-context-parallel group), dp for fsdp (Llama 3's
 * variant). Pure. */
int64_t zero_shard_ranks(const layout *l);

int layout_in_flight_1f1b(const layout *l, int m);

#endif
