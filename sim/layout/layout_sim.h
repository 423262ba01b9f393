/*
 * layout_sim.h: one training step of a parallel layout (core/layout.h) of a
 * model on a cluster, simulated by the discrete-event simulator.
 *
 * One pipeline replica is simulated: its pp stages (vp chunks each) run the
 * schedule's order of micro-batch forwards and backwards; by symmetry it
 * stands for every tensor-, context- and data-parallel peer. On top of the
 * placement simulator's compute and comm streams it has:
 *   - per-layer compute split by tp and cp (compute_model.h);
 *   - Megatron's tensor-parallel collectives as events on the compute
 *     stream (all-reduce, or all-gather + reduce-scatter with sp), in
 *     forward and backward; context parallel's key/value exchange;
 *     vocabulary-parallel embedding, head and loss;
 *   - data-parallel gradient reduction in buckets on a comm stream,
 *     overlapped with backward (all-reduce, or reduce-scatter for zero >= 1
 *     and fsdp), parameter all-gathers for zero 3 / fsdp overlapped with
 *     compute, the optimizer on its shard;
 *   - pipeline sends over the link the two ranks share (the rank grid
 *     decides: layout_rank_of);
 *   - memory per GPU as layout_memory parts, with the stash from the
 *     simulated order, and an OOM verdict against the GPU's memory;
 *   - for mixture-of-experts models (moe.h): the MoE layers' router,
 *     permutations, grouped expert GEMMs and shared experts, the token
 *     dispatch and combine over the expert grid's ep group (the "ep" part,
 *     on the compute stream), the experts' gradients reduced over edp and
 *     their optimizer shard, and the MoE memory parts.
 * A placement is the special case tp = cp = dp = 1; there the placement
 * simulator's results are bit-identical to what they were (sim_checksum).
 */
#ifndef PLACER_SIM_LAYOUT_SIM_H
#define PLACER_SIM_LAYOUT_SIM_H

#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "coll_measured.h"
#include "collective.h"
#include "compute_model.h"
#include "graph.h"
#include "layout.h"
#include "layout_memory.h"
#include "framework.h"
#include "moe.h"
#include "status.h"

typedef struct {
    compute_params compute;      /* the per-kernel model's constants */
    double collective_scale;     /* multiplies every collective's time (1 = neutral) */
    double step_fixed_us;        /* added once per step */
    /* added by the simulator (defaults in layout_sim_params_default): */
    double p2p_scale;            /* multiplies every pipeline send's time (1; 0: free sends) */
    double dp_bucket_bytes;      /* gradient bucket size (25e6, torch DDP's 25 MB) */
    int dp_overlap_grad;         /* 1: buckets reduced during backward (torch DDP, Megatron
                                    --overlap-grad-reduce); 0: all after the last backward
                                    (Megatron's "local" DDP of SC21) */
    int dp_overlap_param;        /* zero 1/2: 1 the updated parameters are gathered before
                                    each chunk's first forward of the next step, overlapped
                                    (--overlap-param-gather); 0 after the optimizer, exposed */
    double grad_comm_bytes;      /* bytes per gradient element reduced (4: fp32 main grads,
                                    Megatron's default under bf16) */
    double emb_head_scale;       /* multiplies the embedding's and head's compute and
                                    collectives (1; 0 for closed-form checks) */
    int zero3_prefetch;          /* zero 3: 1 a unit's parameter gather may start once the
                                    previous unit's compute started (FSDP's one-module
                                    prefetch); 0 only once it ended (no overlap of gathers
                                    with compute: DeepSpeed's stage 3 as Megatron SC21's
                                    Table 2 measured it) */
    double zero3_gather_scale;   /* multiplies zero 3's per-micro-batch parameter gathers
                                    (1 = the collective model's time) */
    const struct framework_profile *framework; /* the stack's memory conventions (framework.h,
                                    borrowed); NULL: Megatron's. Its time constants are
                                    applied to compute / step_fixed_us by the caller
                                    (framework_apply_time) */
    moe_params moe;              /* mixture of experts: load factor, grouped GEMMs (moe.h) */
    /* an expert placement's balance (placer experts --out: busiest_over_mean; docs/experts.md): per
     * MoE layer of the model, the busiest expert-parallel GPU's tokens over the mean. When set and the
     * layout's ep is moe_layer_load_ep, each MoE layer's block and dispatch take its own load factor
     * instead of moe.imbalance (a capacity factor still wins); other layouts keep moe.imbalance. */
    const double *moe_layer_load;  /* [moe_layer_load_n], each >= 1; NULL: none (borrowed) */
    int moe_layer_load_n;          /* the model's MoE layers */
    int moe_layer_load_ep;         /* the expert-parallel size the placement is for */
} layout_sim_params;

/* Defaults: compute_params_default, scales 1, fixed 0, buckets of 25e6
 * bytes overlapped with backward, overlapped parameter gathers (zero 3:
 * one unit ahead), fp32 gradient reduction. */
void layout_sim_params_default(layout_sim_params *p);

typedef enum {
    LAYOUT_T_COMPUTE = 0,   /* forward + backward compute (incl. recompute) on the critical stage */
    LAYOUT_T_RECOMPUTE,     /* of which recomputation */
    LAYOUT_T_TP,            /* exposed tensor-parallel communication */
    LAYOUT_T_CP,            /* exposed context-parallel communication */
    LAYOUT_T_DP,            /* exposed data-parallel communication (not hidden by backward) */
    LAYOUT_T_PP,            /* exposed pipeline sends */
    LAYOUT_T_BUBBLE,        /* pipeline bubble */
    LAYOUT_T_OPTIMIZER,     /* optimizer step */
    LAYOUT_T_EP,            /* MoE token dispatch and combine (all-to-all / all-gather, etp), on the
                               compute stream; 0 for a dense model */
    LAYOUT_T_HIDDEN,        /* communication hidden under another micro-batch's compute in paired ops
                               (DualPipe, DualPipeV, overlap=ep), net of the compute the comm kernel's
                               SMs slow: counted in tp / cp / ep above and taken off here, so
                               compute + tp + cp + dp + pp + bubble + optimizer + ep - hidden =
                               step - step_fixed_us; 0 when nothing is paired */
    LAYOUT_T_COUNT
} layout_time_part;

typedef struct {
    double step_us;                    /* predicted step time */
    double tokens_per_s;               /* global_batch * seq_len / step */
    double model_flops;                /* per step, all GPUs, no recompute (PaLM MFU sense) */
    double hw_flops;                   /* per step, all GPUs, with recompute */
    double model_tflops_per_gpu;       /* model_flops / step / GPUs */
    double hw_tflops_per_gpu;          /* hw_flops / step / GPUs */
    double mfu;                        /* model_tflops_per_gpu / peak[precision] */
    double parts_us[LAYOUT_T_COUNT];   /* the time breakdown */
    int micro_batches;                 /* m per pipeline */
    int64_t world;                     /* GPUs used */
    int worst_stage;                   /* stage with the largest memory */
    layout_memory mem;                 /* memory of worst_stage */
    int64_t mem_cap;                   /* the GPU's memory */
    int oom;                           /* 1 when some stage's memory exceeds mem_cap */
    coll_estimate tp_allreduce;        /* one layer's forward TP collective, for --explain */
    coll_estimate dp_reduce;           /* the whole gradient reduction of one stage */
    /* added by the simulator: */
    int critical_stage;                /* the stage whose breakdown parts_us is: the last to end (a dense
                                          model), the one with the most work (an MoE model: the stage
                                          that bounds the step; its idle after its end counts as pp) */
    coll_estimate tp_allgather;        /* sp: one all-gather of a layer's activation */
    coll_estimate tp_reduce_scatter;   /* sp: one reduce-scatter of it */
    coll_estimate cp_allgather;        /* cp: one layer's key/value all-gather */
    coll_estimate dp_allgather;        /* zero >= 1: stage 0's parameter all-gather */
    double pp_send_us;                 /* one pipeline message stage 0 -> 1 */
    double pp_send_bytes;              /* its bytes */
    int pp_send_nodes;                 /* 1: stages 0 and 1 share an NVLink domain (a node unless
                                          the cluster's domain is wider), 2: they do not */
    int dp_buckets;                    /* gradient buckets per step on the critical stage */
    int stash_layers;                  /* most layer activations of micro-batches stashed on worst_stage */
    int64_t stage_mem[LAYOUT_MAX_CHUNKS]; /* total memory per stage (pp entries) */
    /* mixture of experts (0 / zeros for a dense model): */
    coll_estimate ep_dispatch;         /* one dispatch of a micro-batch on stage 0 (all-to-all or all-gather) */
    double ep_tokens_per_expert;       /* routed tokens per local expert on the busiest rank */
    /* per stage (pp entries; the bounding stage is critical_stage): */
    double stage_compute_us[LAYOUT_MAX_CHUNKS]; /* compute incl. recompute */
    double stage_ep_us[LAYOUT_MAX_CHUNKS];      /* MoE dispatch and combine */
    double stage_idle_us[LAYOUT_MAX_CHUNKS];    /* waiting for pipeline data (bubble + pp) */
    int stages_differ;                 /* 1: the stages' compute or dispatch differ by more than 1% */
} layout_result;

typedef struct layout_sim layout_sim;

/* Create a simulator for model cfg under layout l on cluster c (all
 * borrowed, must outlive it). Validates l against cfg and the cluster
 * (layout_validate); PL_ERR_INVALID with a message on failure. */
pl_status layout_sim_create(const gpt_config *cfg, const layout *l, const cluster *c, layout_sim **out,
                            char *msg, size_t len);

/* The same with collective times from measured curves or their fitted
 * model where meas has them (sim/collective/coll_measured.h: groups inside one node);
 * meas NULL is layout_sim_create. meas is borrowed, must outlive s, and
 * must pass coll_measured_validate (PL_ERR_INVALID otherwise). */
pl_status layout_sim_create_measured(const gpt_config *cfg, const layout *l, const cluster *c,
                                     const coll_measured *meas, layout_sim **out, char *msg, size_t len);
void layout_sim_destroy(layout_sim *s);

/* How many collective times s computed (at create and for the buckets of
 * its runs so far), by where each came from: the cluster model, the fitted
 * model of measured curves, or a measured curve. s may be NULL (zeros). */
void layout_sim_coll_sources(const layout_sim *s, int *model, int *fitted, int *measured);

/* Simulate one step. prm NULL: defaults. trace != 0 records events for
 * layout_sim_write_chrome_trace. An OOM is a result, not an error. */
pl_status layout_sim_run(layout_sim *s, const layout_sim_params *prm, int trace, layout_result *res,
                         char *msg, size_t len);

/* The last traced run as Chrome Trace Event JSON: one track per stage
 * (compute), its TP collectives, and its DP / PP comm streams. */
pl_status layout_sim_write_chrome_trace(const layout_sim *s, FILE *f);

/* One op of one pipeline replica's last traced run (layout_sim_ops). */
typedef enum {
    LAYOUT_OP_F = 0,     /* a forward of one chunk and micro-batch */
    LAYOUT_OP_B,         /* its backward: the input gradient for the orders that split the
                            backward (zb-h1, zb-h2, zb-v, dualpipev), else the whole backward */
    LAYOUT_OP_W,         /* its weight-gradient pass (split orders only) */
    LAYOUT_OP_SEND_FWD,  /* the activation sent to the next stage (the rank's comm stream) */
    LAYOUT_OP_SEND_BWD   /* the gradient sent to the previous stage */
} layout_op_kind;

typedef struct {
    int rank;            /* pipeline rank 0 .. pp-1 */
    int stage;           /* the chunk's stage in model order, 0 .. pp * chunks - 1 */
    int chunk;           /* the rank's own chunk 0 .. chunks per rank - 1 */
    int mb;              /* micro-batch */
    layout_op_kind kind;
    double t0_us, t1_us; /* start and end in the step */
} layout_op;

/* The ops of the last traced run of s (layout_sim_run with trace != 0):
 * every F, B and W of every rank with its chunk and micro-batch, and every
 * pipeline send, sorted by rank then start. A rank is idle where its F, B
 * and W leave the step uncovered. *out is a heap array the caller frees
 * (free()); *n its length. PL_ERR_INVALID when s ran without tracing (or
 * a NULL argument), PL_ERR_NOMEM; *out NULL then. */
pl_status layout_sim_ops(const layout_sim *s, layout_op **out, int *n);

/* "F", "B", "W", "send_fwd", "send_bwd". */
const char *layout_op_kind_name(layout_op_kind k);

/* "compute", "recompute", "tp", "cp", "dp", "pp", "bubble", "optimizer", "ep", "hidden". */
const char *layout_time_part_name(layout_time_part p);

/* 1 for the parts printed only when not 0 (ep: MoE models; hidden: paired
 * ops), so a dense layout's breakdown reads as it always did. */
int layout_time_part_optional(layout_time_part p);

/* Parameters of one transformer layer of cfg (attention with GQA, MLP or
 * SwiGLU, biases unless no_bias, two norms), before any split. */
int64_t layout_layer_params(const gpt_config *cfg);

/* FLOPs of one step of layout l (global_batch sequences): model = 3 x the
 * forward (2 per multiply-add of every layer's matrices and the head, and
 * 4 T^2 d per layer for attention, with no causal halving: Megatron's
 * count, so the GPT's is 72 B s L h^2 (1 + s/6h + V/12Lh)); hw adds the
 * recomputed forward (full: every layer; selective: the attention core). */
void layout_model_flops(const gpt_config *cfg, const layout *l, double *model, double *hw);

#endif
