/*
 * moe_balance.h: what an expert placement costs, layer by layer: the
 * per-GPU tokens of a mixture-of-experts layer, the nodes a token's
 * all-to-all reaches, the busiest NIC's bytes, and the layer's time on the
 * busiest GPU through the layout simulator's MoE cost (moe.h).
 *
 * It takes a placement as data (the slots' experts, phy2log, laid out GPU
 * by GPU and node by node as core/expert_map.h says) and the experts' loads;
 * no placer: policy/experts/ calls it, the simulator never calls a placer.
 *
 * Per layer, with w_e the tokens routed to expert e and c_e its replicas:
 *   GPU load       L_g = sum over g's slots of w_e / c_e (a token's load
 *                  splits evenly over the replicas: EPLB's assumption, which
 *                  vLLM's and SGLang's dispatch keep on average)
 *   busiest/mean   max_g L_g / mean_g L_g
 *   copies/token   the distinct remote nodes a token's k experts live on,
 *                  averaged over tokens and over the token's source node
 *                  (sources uniform over the nodes: data-parallel attention):
 *                  with a_{e,n} the share of e's replicas on node n, a token
 *                  reaches n with q_n = 1 - prod_{e of the token} (1 - a_{e,n}),
 *                  and copies = (N - 1) / N sum_n q_n. Over sampled tokens
 *                  (the load's topk_ids) when it has them; else with the k
 *                  experts independent given the counts, q_n = 1 - (1 - s_n)^k,
 *                  s_n the node's share of the routed copies
 *   NIC bytes      one dispatch with t tokens per GPU (DeepEP's node-level
 *                  dedup: a token crosses the network once per remote node,
 *                  rail to rail): node n receives (N - 1) t q_n rows per NIC,
 *                  GPU s sends t (sum_n q_n - q_s) rows; the worst of both,
 *                  times the row's bytes
 * The layer's time (moe_balance_layer_time) on the busiest GPU: the MoE
 * block's compute with the busiest rank taking f = busiest/mean times the
 * mean routed rows (moe_compute.h's measured layer, moe_layer_time_us:
 * router, permutation, grouped GEMMs per expert, tails, shared experts; not
 * linear in tokens) plus, per dispatch and per combine,
 *   lat + max(f t k row / (NVLink eff), worst NIC bytes / (NIC eff))
 * (every routed copy crosses NVLink once into the busiest GPU, as moe.h's
 * flex dispatch; the network part is the placement's own). Training runs
 * four (forward and backward), six under full recomputation; inference two.
 */
#ifndef PLACER_SIM_MOE_BALANCE_H
#define PLACER_SIM_MOE_BALANCE_H

#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "compute_model.h"
#include "graph.h"
#include "layout.h"
#include "moe.h"
#include "moe_params.h"
#include "status.h"

/* The expert-parallel group a placement is scored on. */
typedef struct {
    int n_gpus;             /* GPUs of the group, >= 1 */
    int gpus_per_node;      /* GPUs a node holds (divides n_gpus) */
    int top_k;              /* experts per token (the count-only copies estimate), >= 1 */
    double tokens_per_gpu;  /* tokens each GPU sends into one dispatch (NIC bytes), >= 0 */
    double row_bytes;       /* one token's hidden state on the wire, >= 0 */
} moe_balance_group;

/* One layer's scores. */
typedef struct {
    double busiest_over_mean;  /* max GPU load / mean (1 for an empty layer) */
    double busiest;            /* the busiest GPU's tokens */
    double mean;               /* the mean GPU's tokens */
    double copies_per_token;   /* distinct remote nodes per token */
    double worst_nic_bytes;    /* the busiest NIC's bytes in one dispatch */
    int copies_sampled;        /* 1: copies from sampled tokens; 0: the independence estimate */
} moe_balance_layer;

typedef struct moe_balance_ctx moe_balance_ctx;

/* A scorer for layers of n_experts experts on n_slots slots over group g
 * (copied). Scratch is allocated once here; scoring allocates nothing.
 * PL_ERR_INVALID for a bad shape (core/expert_map.h's rules, top_k < 1). */
pl_status moe_balance_ctx_create(const moe_balance_group *g, int n_experts, int n_slots, moe_balance_ctx **out,
                                 char *msg, size_t len);
void moe_balance_ctx_destroy(moe_balance_ctx *c);

/* Score one layer: phy2log[n_slots] (ids in range: an out-of-range id is
 * PL_ERR_INVALID, an expert without a slot too when it has load), load
 * [n_experts] tokens per expert, samples [n_samples][sample_k] (-1 padding;
 * NULL or n_samples 0: the independence estimate). gpu_load[n_gpus] gets
 * the per-GPU tokens (may be NULL). */
pl_status moe_balance_score_layer(moe_balance_ctx *c, const int32_t *phy2log, const double *load,
                                  const int16_t *samples, int n_samples, int sample_k, double *gpu_load,
                                  moe_balance_layer *out);

/* The MoE layer's cost on a cluster: the model, the layout (its ep group
 * is the first ep ranks: consecutive GPUs, node by node), training or
 * inference. All borrowed. */
typedef struct {
    const cluster *clu;
    const gpt_config *cfg;
    const layout *lay;
    compute_params compute;   /* compute_params_default unless calibrated */
    moe_params moe;           /* moe_params_default; imbalance is set per call */
    int training;             /* 1: forward and backward; 0: inference, forward only */
} moe_balance_cost;

/* One MoE layer's time on the busiest GPU for one micro-batch (the
 * layout's tokens per GPU), load factor f >= 1 (the busiest GPU's load over
 * the mean) and the worst NIC's bytes of one dispatch: *compute_us and
 * *comm_us (either may be NULL). gpu_load[n_gpus] (may be NULL) are the
 * per-GPU loads f came from: today's MoE cost takes f alone; the per-GPU
 * form (issue 33's moe_layer_time_us) takes them as they are.
 * PL_ERR_INVALID for a non-MoE model or a missing part. */
pl_status moe_balance_layer_time(const moe_balance_cost *m, double load_factor, const double *gpu_load, int n_gpus,
                                 double worst_nic_bytes, double *compute_us, double *comm_us);

/* The group of a layout on a cluster: n_gpus = ep, gpus_per_node the
 * cluster's NVLink domain (capped at ep), top_k the model's, the tokens and
 * row bytes of one dispatch of the layout's micro-batch. */
void moe_balance_group_of(const cluster *clu, const gpt_config *cfg, const layout *lay, moe_balance_group *g);

#endif
