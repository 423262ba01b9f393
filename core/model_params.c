/*
 * model_params.c: closed-form figures of the extended gpt_config (MLA,
 * head_dim, mixture of experts, squared ReLU, sliding windows): which
 * layers are MoE, parameter counts total and active, and the checks of the
 * extended fields. model_params.h gives the formulas. Calls nothing in
 * graph.c (which calls this file), so the two stay free of a circle.
 */
#include "model_params.h"

#include <stdio.h>

#define EXT_MAX_DIM 100000000 /* as graph.c's GPT_MAX_DIM */

static int64_t kv_heads(const gpt_config *c) { return c->n_kv_heads > 0 ? c->n_kv_heads : c->n_heads; }
static int64_t dense_ff(const gpt_config *c) { return c->d_ff > 0 ? c->d_ff : 4 * (int64_t)c->d_model; }
static int64_t norm_params(const gpt_config *c) { return c->norm == NORM_RMSNORM ? c->d_model : 2LL * c->d_model; }
static int64_t vocab_padded(const gpt_config *c) {
    if (c->vocab_multiple <= 1) return c->vocab;
    return ((int64_t)c->vocab + c->vocab_multiple - 1) / c->vocab_multiple * c->vocab_multiple;
}

int gpt_config_is_extended(const gpt_config *c) {
    return c->head_dim > 0 || c->sliding_window > 0 || c->n_sliding_layers > 0 || c->q_lora_rank > 0 ||
           c->kv_lora_rank > 0 || c->qk_nope_dim > 0 || c->qk_rope_dim > 0 || c->v_head_dim > 0 ||
           c->n_experts > 0 || c->top_k > 0 || c->moe_d_ff > 0 || c->shared_d_ff > 0 || c->first_dense > 0 ||
           c->moe_every > 0 || c->router_groups > 0 || c->router_topk_groups > 0 || c->router_sigmoid ||
           c->moe_bias || c->mlp == MLP_RELU2;
}

int gpt_head_dim(const gpt_config *c) { return c->head_dim > 0 ? c->head_dim : c->d_model / c->n_heads; }

int gpt_is_moe(const gpt_config *c) { return c->n_experts > 1; }

int gpt_is_mla(const gpt_config *c) { return c->kv_lora_rank > 0; }

int gpt_layer_is_moe(const gpt_config *c, int i) {
    if (!gpt_is_moe(c) || i < c->first_dense) return 0;
    const int every = c->moe_every > 1 ? c->moe_every : 1;
    return (i - c->first_dense) % every == every - 1;
}

int gpt_moe_layers_in(const gpt_config *c, int first, int n) {
    if (!gpt_is_moe(c)) return 0;
    int k = 0;
    for (int i = first; i < first + n; i++) k += gpt_layer_is_moe(c, i);
    return k;
}

int64_t gpt_qkv_width(const gpt_config *c) {
    const int64_t a = c->n_heads;
    if (gpt_is_mla(c)) return a * (c->qk_nope_dim + c->qk_rope_dim) * 2 + a * c->v_head_dim;
    return (a + 2 * kv_heads(c)) * gpt_head_dim(c);
}

int64_t gpt_attn_params(const gpt_config *c) {
    const int64_t d = c->d_model, a = c->n_heads;
    if (gpt_is_mla(c)) {
        const int64_t qr = c->q_lora_rank, kr = c->kv_lora_rank, n = c->qk_nope_dim, r = c->qk_rope_dim,
                      v = c->v_head_dim;
        int64_t q = qr > 0 ? d * qr + qr + qr * a * (n + r) : d * a * (n + r);
        int64_t kv = d * (kr + r) + kr + kr * a * (n + v);
        return q + kv + a * v * d;
    }
    const int64_t hd = gpt_head_dim(c), qkv = (a + 2 * kv_heads(c)) * hd;
    int64_t p = d * qkv + a * hd * d;
    if (!c->no_bias) p += qkv + d;
    else if (c->qkv_bias) p += qkv;
    return p;
}

static int gated(const gpt_config *c) { return c->mlp == MLP_SWIGLU; }

int64_t gpt_dense_mlp_params(const gpt_config *c) {
    const int64_t d = c->d_model, f = dense_ff(c);
    if (gated(c)) return 3 * d * f + (c->no_bias ? 0 : 2 * f + d);
    return 2 * d * f + (c->no_bias ? 0 : f + d);
}

int64_t gpt_expert_params(const gpt_config *c) {
    const int64_t d = c->d_model, f = c->moe_d_ff;
    if (gated(c)) return 3 * d * f + (c->moe_bias ? 2 * f + d : 0);
    return 2 * d * f + (c->moe_bias ? f + d : 0);
}

int64_t gpt_shared_expert_params(const gpt_config *c) {
    const int64_t d = c->d_model, f = c->shared_d_ff;
    return (gated(c) ? 3 : 2) * d * f;
}

int64_t gpt_router_params(const gpt_config *c) {
    const int64_t E = c->n_experts;
    return (int64_t)c->d_model * E + (c->router_sigmoid || c->moe_bias ? E : 0);
}

void gpt_param_counts(const gpt_config *c, int with_embedding, int64_t *total, int64_t *active) {
    const int64_t d = c->d_model, V = vocab_padded(c), L = c->n_layers;
    const int64_t emb = V * d + (c->pos == POS_LEARNED ? (int64_t)c->seq_len * d : 0);
    const int64_t head = (c->tied ? 0 : V * d) + norm_params(c);
    const int64_t base = gpt_attn_params(c) + 2 * norm_params(c);
    const int64_t n_moe = gpt_moe_layers_in(c, 0, c->n_layers), n_dense = L - n_moe;
    int64_t tot = emb + head + L * base + n_dense * gpt_dense_mlp_params(c);
    int64_t act = (with_embedding ? emb : 0) + head + L * base + n_dense * gpt_dense_mlp_params(c);
    if (n_moe > 0) {
        const int64_t ex = gpt_expert_params(c), sh = gpt_shared_expert_params(c), rt = gpt_router_params(c);
        tot += n_moe * (rt + (int64_t)c->n_experts * ex + sh);
        act += n_moe * (rt + (int64_t)c->top_k * ex + sh);
    }
    if (total) *total = tot;
    if (active) *active = act;
}

pl_status gpt_config_validate_ext(const gpt_config *c, char *msg, size_t len) {
    const int v[] = {c->head_dim, c->sliding_window, c->n_sliding_layers, c->q_lora_rank, c->kv_lora_rank,
                     c->qk_nope_dim, c->qk_rope_dim, c->v_head_dim, c->n_experts, c->top_k, c->moe_d_ff,
                     c->shared_d_ff, c->first_dense, c->moe_every, c->router_groups, c->router_topk_groups};
    static const char *const names[] = {"head_dim", "sliding_window", "sliding layers", "q_lora_rank",
                                        "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                                        "experts", "top_k", "moe_intermediate_size",
                                        "shared_expert_intermediate_size", "first dense layers", "moe layer step",
                                        "n_group", "topk_group"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i] < 0 || v[i] > EXT_MAX_DIM)
            return pl_fail(msg, len, PL_ERR_INVALID, "%s (%d) must be from 0 to %d", names[i], v[i], EXT_MAX_DIM);
    if ((c->router_sigmoid | c->moe_bias) & ~1)
        return pl_fail(msg, len, PL_ERR_INVALID, "router_sigmoid and moe_bias must be 0 or 1");
    if ((unsigned)c->mlp > MLP_RELU2) return pl_fail(msg, len, PL_ERR_INVALID, "mlp is not a known kind");
    if (c->pos == POS_ROTARY && c->head_dim > 0 && c->head_dim % 2 != 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "rotary positions need an even head_dim, not %d", c->head_dim);
    if (c->pos == POS_ROTARY && c->head_dim <= 0 && c->kv_lora_rank <= 0 && (c->d_model / c->n_heads) % 2 != 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "rotary positions need an even head size (d_model/heads = %d)",
                       c->d_model / c->n_heads);
    if (c->n_sliding_layers > c->n_layers)
        return pl_fail(msg, len, PL_ERR_INVALID, "sliding-window layers (%d) are more than the layers (%d)",
                       c->n_sliding_layers, c->n_layers);
    if (c->n_sliding_layers > 0 && c->sliding_window < 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "sliding-window layers need a sliding_window");
    /* MLA: the ranks and head sizes come together and must fit */
    const int mla_any = c->q_lora_rank || c->kv_lora_rank || c->qk_nope_dim || c->qk_rope_dim || c->v_head_dim;
    if (mla_any) {
        if (c->kv_lora_rank < 1 || c->qk_rope_dim < 1 || c->qk_nope_dim < 1 || c->v_head_dim < 1)
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "multi-head latent attention needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and "
                           "v_head_dim all positive");
        if (c->kv_lora_rank >= c->d_model || c->q_lora_rank >= c->d_model)
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "MLA ranks must be below the hidden size %d (q_lora_rank %d, kv_lora_rank %d): a latent "
                           "as wide as the hidden state compresses nothing", c->d_model, c->q_lora_rank,
                           c->kv_lora_rank);
        if (c->qk_rope_dim % 2 != 0)
            return pl_fail(msg, len, PL_ERR_INVALID, "qk_rope_head_dim must be even, not %d", c->qk_rope_dim);
    }
    /* mixture of experts */
    const int moe_any = c->n_experts > 1 || c->top_k || c->moe_d_ff || c->shared_d_ff || c->first_dense ||
                        c->moe_every || c->router_groups || c->router_topk_groups || c->router_sigmoid;
    if (moe_any) {
        if (c->n_experts < 2)
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "mixture-of-experts settings need at least 2 routed experts (experts %d)", c->n_experts);
        if (c->top_k < 1 || c->top_k > c->n_experts)
            return pl_fail(msg, len, PL_ERR_INVALID, "top-k (%d experts per token) must be from 1 to the experts (%d)",
                           c->top_k, c->n_experts);
        if (c->moe_d_ff < 1)
            return pl_fail(msg, len, PL_ERR_INVALID, "mixture of experts needs the expert width "
                                                     "(moe_intermediate_size or intermediate_size)");
        if (c->first_dense > c->n_layers)
            return pl_fail(msg, len, PL_ERR_INVALID, "first dense layers (%d) are more than the layers (%d)",
                           c->first_dense, c->n_layers);
        if (c->router_groups > 0 &&
            (c->n_experts % c->router_groups != 0 || c->router_topk_groups < 1 ||
             c->router_topk_groups > c->router_groups))
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "group-limited routing needs n_group (%d) dividing the experts (%d) and topk_group (%d) "
                           "from 1 to n_group", c->router_groups, c->n_experts, c->router_topk_groups);
        if (c->router_groups > 0 && (int64_t)c->router_topk_groups * (c->n_experts / c->router_groups) < c->top_k)
            return pl_fail(msg, len, PL_ERR_INVALID, "topk_group (%d) groups of %d experts cannot hold top-k %d",
                           c->router_topk_groups, c->n_experts / c->router_groups, c->top_k);
    } else if (c->n_experts == 1) {
        return pl_fail(msg, len, PL_ERR_INVALID, "one expert is a dense model: give no experts instead");
    }
    { /* every int64 figure stays far below 2^63 (in doubles, before any product overflows) */
        const double d = c->d_model, a = c->n_heads, L = c->n_layers, hd = gpt_head_dim(c);
        const double mla = (double)(c->q_lora_rank + c->kv_lora_rank) * a *
                           (c->qk_nope_dim + c->qk_rope_dim + c->v_head_dim + 1.0);
        const double p = L * (4.0 * d * a * hd + 3.0 * d * (dense_ff(c) + (double)c->n_experts * c->moe_d_ff +
                                                             c->shared_d_ff) + mla + 4.0 * d * a * 256.0) +
                         2.0 * (double)vocab_padded(c) * d;
        if (p > 1e16)
            return pl_fail(msg, len, PL_ERR_INVALID, "model too large to describe (%.3g parameters; at most 1e16)", p);
    }
    return PL_OK;
}
