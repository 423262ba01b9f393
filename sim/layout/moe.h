/*
 * moe.h: the mixture-of-experts parts of a layout step, for the layout
 * simulator (layout_expand.c calls them per stage) and the memory model
 * (layout_memory.c's MoE block): Megatron-Core's transformer/moe/ in cost
 * form.
 *
 * Tokens. A micro-batch puts T = mbs x seq / cp tokens on a GPU's attention;
 * with tp > 1 the MoE layer takes the sequence-parallel shard, n = T / tp
 * tokens per rank (Megatron requires sequence parallelism for MoE with tp).
 * The router sends each to top_k experts: n k routed copies per rank. Over
 * the expert grid (layout.h: etp x ep x edp on the same ranks) a rank holds
 * E / ep experts at 1/etp of their width, and each of its experts receives
 * on average m = n k ep etp / E tokens (the etp all-gather multiplies by
 * etp); the busiest rank receives f m, f the load factor: the imbalance
 * (1 = balanced, dropless) or, with a capacity factor c > 0, c (buffers
 * padded to capacity, the overflow dropped).
 *
 * Token dispatcher, per MoE layer and micro-batch:
 *   alltoall   forward: dispatch all-to-all of f n k h e bytes per rank over
 *              the ep group, then (etp > 1) an all-gather over etp; after
 *              the experts the reverse: reduce-scatter over etp, combine
 *              all-to-all. Backward: the same four, gradients the other way.
 *   allgather  forward: all-gather of the n h e token states over the ep
 *              group (ep n h e bytes out), each rank keeps its experts'
 *              tokens; combine: reduce-scatter of the same size.
 *   Both run on the compute stream and block it (Megatron's default: no
 *   overlap of dispatch with compute outside DualPipe-style schedules), so
 *   they add to the layer's time as the "ep" part.
 * All-to-all time (moe_all_to_all_us): each of n ranks sends S bytes, S/n to
 * every member; of that, the share for members on its own node crosses
 * NVLink and the rest its NIC share, both at once:
 *   t = base + lat + max(S (q - 1) / n / (intra x eff), S (n - q) / n /
 *       (nic_per_gpu x eff / pod oversubscription))
 * q members per node (the fewest), lat the intra-node latency inside a node
 * and the network's across nodes; eff the cluster's collective_efficiency.
 *
 * Expert compute: the measured MoE layer of moe_compute.h (router,
 * permutation, grouped expert GEMMs with per-expert and per-launch terms,
 * tails, shared experts; the sweep's constants, inputs/moe_fit.h), for the
 * busiest rank (f m rows per local expert on average, spread over the
 * experts by expert_cv or a measured histogram).
 */
#ifndef PLACER_SIM_MOE_H
#define PLACER_SIM_MOE_H

/* SMs DeepEP's dispatch and combine kernels hold while they run: 20 of an
 * H800's 132 (DeepSeek-V3 report, arXiv 2412.19437, section 3.2.2); the
 * compute beside a hidden dispatch runs on the rest. */
#define MOE_DEEPEP_SMS 20

#include <stdint.h>

#include "cluster.h"
#include "collective.h"
#include "compute_model.h"
#include "graph.h"
#include "layout.h"
#include "moe_params.h"
#include "status.h"

/* Tokens per rank entering an MoE layer (n of moe.h), routed copies per
 * rank (n k), and tokens per local expert on the busiest rank (f m). */
double moe_tokens_in(const gpt_config *cfg, const layout *l);
double moe_tokens_per_expert(const gpt_config *cfg, const layout *l, const moe_params *p);

/* Time of an all-to-all over ranks[0..n) where each rank sends
 * bytes_per_rank in all (the formula above). *out (may be NULL) gets the
 * estimate's figures (algo "alltoall"; algbw = S / t). PL_ERR_INVALID for a
 * bad group (as coll_time). */
pl_status moe_all_to_all_us(const cluster *c, const int64_t *ranks, int n, double bytes_per_rank, double *us,
                            coll_estimate *out);

/* The flex (DeepEP) dispatch over ranks[0..n): each of a rank's `tokens`
 * token states (row_bytes each, times the load factor f) crosses the
 * network once per distinct remote node its top-k experts sit on, D =
 * (G - 1)/G x G (1 - (1 - 1/G)^k) per token with the k experts uniform
 * over G = the group's nodes (G capped at topk_groups with group-limited
 * routing, one group a node: DeepSeek-V3's node-limited routing), and
 * every routed copy crosses NVLink once: t = base + lat + max(f tokens k
 * row / (intra eff), f tokens D row / (nic eff)). */
pl_status moe_flex_dispatch_us(const cluster *c, const gpt_config *cfg, const int64_t *ranks, int n, double tokens,
                               double row_bytes, double load_factor, double *us, coll_estimate *out);

/* Compute of one MoE layer's MLP block on one GPU (router, permutations,
 * grouped expert GEMMs and their activation, shared experts), without
 * communication: moe_layer_time_us (moe_compute.h) at mp's loads, as fwd_us
 * and bwd_us (dgrad + wgrad); recompute_us under l->recompute (full: the
 * forward). mp NULL: a lower bound over the stacks and spreads (balanced
 * loads, fused permutation, bf16 activations, the cheapest grouped-GEMM
 * implementation), the planner's pruning bound. A dense model or a bad
 * fit: zeros. */
void moe_block_compute_cost(const cluster_gpu *gpu, const gpt_config *cfg, const layout *l,
                            const compute_params *cp, const moe_params *mp, layer_cost *out);

/* Bytes one rank moves in each dispatch (and combine) of a micro-batch:
 * alltoall: f n k h e; allgather: the all-gather's output, ep n h e. */
double moe_dispatch_bytes(const gpt_config *cfg, const layout *l, const moe_params *mp);

/* Parameters one GPU holds of one layer (is_moe: an MoE layer), apart:
 * the replicated-over-dp part (attention, norms, the dense MLP or the
 * router and shared experts, 1/tp of the matrices) and the expert part
 * (E / ep experts at 1/etp), reduced over the edp group. */
int64_t moe_layer_dense_params_per_gpu(const gpt_config *cfg, const layout *l, int is_moe);
int64_t moe_layer_expert_params_per_gpu(const gpt_config *cfg, const layout *l);

/* Activation bytes an MoE layer keeps for backward beyond a dense layer of
 * the same model without its MLP (one micro-batch), by named part:
 *   router       the router's fp32 logits and probabilities, 2 x 4 n E
 *   routed       the expert GEMMs' input, f m x E/ep rows of h (e bytes),
 *                and the experts' output before combine, the same again
 *   expert_mlp   the experts' intermediates: (gated 3, else 2) e f m E/ep F/etp
 *   shared       the shared experts' intermediates, (gated 3, else 2) e T S/tp
 * Full recompute keeps none of them (the layer input only, counted by the
 * dense formula); selective keeps them (only the attention core is
 * recomputed). */
typedef struct {
    double router, routed, expert_mlp, shared;
} moe_act_parts;
moe_act_parts moe_activation_parts(const gpt_config *cfg, const layout *l, const moe_params *mp);

/* The dispatcher's buffers at once (the send and the receive side of one
 * dispatch), 2 f n k h e (alltoall) or 2 ep n h e (allgather) bytes. */
double moe_dispatch_buffer_bytes(const gpt_config *cfg, const layout *l, const moe_params *mp);

/* MoE layers among the transformer layers a pipeline stage holds (its
 * chunks of layout_chunk_layers: stage, stage + pp, ... interleaved; stage and
 * 2 pp - 1 - stage under the V orders, zb-v and dualpipev); when layers is not
 * the stage's count from l (a caller's own split), in proportion. */
int moe_stage_moe_layers(const gpt_config *cfg, const layout *l, int stage, int layers);

#endif
