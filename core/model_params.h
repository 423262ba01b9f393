/*
 * model_params.h: the closed-form figures of a gpt_config beyond the
 * original GPT block: head sizes independent of hidden / heads, multi-head
 * latent attention (MLA, DeepSeek-V2/V3), mixture-of-experts layers (routed
 * experts with top-k routing, shared experts, dense layers before or
 * between the MoE layers), squared-ReLU MLPs, sliding-window layers; their
 * validation, and total and active parameter counts.
 *
 * Parameter counts, per transformer layer (d hidden, a heads, g KV heads,
 * hd head size, f the dense MLP width, F one expert's width, E experts,
 * k top-k, S the shared experts' width; gated MLPs have 3 matrices, others
 * 2):
 *   attention, GQA   d a hd + 2 d g hd (q, k, v) + a hd d (o), biases as
 *                    the dense path (qkv_bias: (a + 2g) hd)
 *   attention, MLA   q: d r_q + r_q (its norm) + r_q a (n + r) (r_q = 0: d a
 *                    (n + r)); kv: d (r_kv + r) + r_kv (its norm) + r_kv a
 *                    (n + v); o: a v d  (n, r, v: qk_nope, qk_rope, v head
 *                    sizes; the rotary key is shared by the heads)
 *   dense MLP        3 d f (gated) or 2 d f, biases unless no_bias
 *   MoE MLP          router d E (+ E with a router bias: sigmoid scores'
 *                    correction bias, gpt-oss's linear bias), E experts of
 *                    3 d F (2 d F non-gated; + 2F + d / F + d with moe_bias),
 *                    the shared experts 3 d S
 *   norms            2 d (RMSNorm) or 4 d (layernorm)
 * Active parameters: every layer's attention and norms, the dense layers'
 * MLPs, and per MoE layer the router, k experts and the shared experts;
 * plus the head and final norm, and the input embedding only when asked
 * (publishers differ: DeepSeek and OpenAI count without the embedding
 * table, Mistral and Qwen with it).
 */
#ifndef PLACER_CORE_MODEL_PARAMS_H
#define PLACER_CORE_MODEL_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "status.h"

/* Per-head size: head_dim, or d_model / n_heads. */
int gpt_head_dim(const gpt_config *c);

/* 1 for a mixture-of-experts model (n_experts > 1). */
int gpt_is_moe(const gpt_config *c);

/* 1 for multi-head latent attention (kv_lora_rank > 0). */
int gpt_is_mla(const gpt_config *c);

/* 1 when layer i (0-based) has an MoE MLP: i >= first_dense and
 * (i - first_dense) % moe_every == moe_every - 1 (Qwen's decoder_sparse_step
 * and Llama 4's interleave step count from 1: step 2 makes layers 1, 3, ...
 * MoE). 0 for a dense model. */
int gpt_layer_is_moe(const gpt_config *c, int i);

/* MoE layers among layers [first, first + n). */
int gpt_moe_layers_in(const gpt_config *c, int first, int n);

/* Attention parameters of one layer (projections and their biases, MLA's
 * latent norms), before any split. */
int64_t gpt_attn_params(const gpt_config *c);

/* Parameters of one dense MLP (width d_ff), of one routed expert, of the
 * shared experts together, of the router. */
int64_t gpt_dense_mlp_params(const gpt_config *c);
int64_t gpt_expert_params(const gpt_config *c);
int64_t gpt_shared_expert_params(const gpt_config *c);
int64_t gpt_router_params(const gpt_config *c);

/* Width of q, k and v together per token (the QKV projection's output:
 * (a + 2g) hd; MLA: a (n + r) + a (n + r) + a v after the up-projections). */
int64_t gpt_qkv_width(const gpt_config *c);

/* Total and active parameters (NULL outputs allowed); active counts the
 * input embedding table only when with_embedding. For a dense model both
 * equal gpt_param_count (with_embedding). */
void gpt_param_counts(const gpt_config *c, int with_embedding, int64_t *total, int64_t *active);

/* The checks of the extended fields (called by gpt_config_validate): sizes
 * >= 0 and in range, top_k from 1 to the experts, an expert width, MLA's
 * ranks and head sizes together and fitting (ranks below hidden, an even
 * rotary size), group-limited routing's groups dividing the experts,
 * head_dim even under rotary, the sliding layers at most the layers.
 * PL_ERR_INVALID with one line. */
pl_status gpt_config_validate_ext(const gpt_config *c, char *msg, size_t len);

#endif
