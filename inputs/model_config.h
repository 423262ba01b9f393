/*
 * model_config.h: model descriptions from files: a Hugging Face config.json
 * (GPT-2, Llama / Mistral / Qwen, GPT-NeoX families) or the project's own
 * preset-and-overrides text (gpt_config_parse), read into a gpt_config that
 * graph_build_gpt turns into a graph.
 *
 * Keys read from config.json (first found wins where two names exist):
 *   hidden_size | n_embd | d_model            -> d_model
 *   num_hidden_layers | n_layer               -> n_layers
 *   num_attention_heads | n_head              -> n_heads
 *   num_key_value_heads                       -> n_kv_heads (absent: n_heads)
 *   intermediate_size | n_inner               -> d_ff (absent / null: 4 * d_model)
 *   vocab_size                                -> vocab
 *   max_position_embeddings | n_positions     -> seq_len (unless overridden)
 *   tie_word_embeddings                       -> tied (HF default true for GPT-2)
 *   hidden_act | activation_function          -> mlp: silu / swiglu = SwiGLU
 *                                                (Llama-style gated), gelu* = GELU
 *   model_type                                -> norm and positions by family:
 *                                                llama, mistral, qwen2, ...: RMSNorm +
 *                                                rotary + no bias; gpt2: layernorm +
 *                                                learned; gpt_neox: layernorm + rotary
 *   rms_norm_eps (present)                    -> RMSNorm
 *   use_parallel_residual                     -> parallel_residual
 *   head_dim                                  -> head_dim (0 when it equals hidden / heads)
 *   hidden_act relu / gelu*: non-gated; relu2 | squared_relu: squared ReLU (MLP_RELU2)
 * Mixture of experts (model_params.h has the counts; 0 / 1 experts: dense):
 *   num_local_experts | num_experts | n_routed_experts -> n_experts
 *   num_experts_per_tok | experts_per_token | moe_topk -> top_k
 *   moe_intermediate_size                     -> moe_d_ff (absent: intermediate_size,
 *                                                as Mixtral and gpt-oss give it)
 *   shared_expert_intermediate_size, else n_shared_experts x moe_d_ff -> shared_d_ff
 *   first_k_dense_replace                     -> first_dense
 *   moe_layer_freq | decoder_sparse_step | interleave_moe_layer_step -> moe_every
 *   scoring_func sigmoid | softmax; n_group, topk_group -> group-limited routing
 *   mlp_only_layers: only [] (dense layers at chosen places are refused)
 * Multi-head latent attention: q_lora_rank (null: 0), kv_lora_rank,
 *   qk_nope_head_dim, qk_rope_head_dim, v_head_dim.
 * Sliding windows: sliding_window (null: none) unless use_sliding_window is
 *   false, on the layers layer_types calls "sliding_attention", else all but
 *   every sliding_window_pattern-th, else all.
 * Unknown keys are ignored; a missing required key, a wrong JSON type, a
 * non-positive size or a JSON syntax error is PL_ERR_INVALID with one line
 * naming it (and the line/column for syntax errors).
 */
#ifndef PLACER_INPUTS_MODEL_CONFIG_H
#define PLACER_INPUTS_MODEL_CONFIG_H

#include <stddef.h>

#include "graph.h"
#include "status.h"

/* Parse a config.json text (n bytes) into *cfg. seq_len comes from the file
 * (or 2048 when it has none), batch is set to 1; callers override both.
 * name (may be NULL) gets the file's "name", else its model_type, else
 * "model". *cfg untouched on failure. model_config.c's opening comment
 * lists the few keys read beyond those above. */
pl_status model_config_parse_json(const char *text, size_t n, gpt_config *cfg, char *name, size_t name_len,
                                  char *msg, size_t len);

/* Read a model: a path to a JSON file (anything ending in ".json" or
 * containing '/'; overrides may follow the ".json": "./m.json,seq=4096"),
 * else a preset text for gpt_config_parse ("default",
 * "gpt12,layers=24", ...), else a shipped model's name, NAME.json in the
 * directories searched for models ($PLACER_MODELS, the source tree's
 * data/models, ./data/models: data_file.h), optionally followed by overrides
 * ("llama-3-8b,seq=4096,batch=8"; gpt_config_apply_overrides). Name
 * characters: letters, digits, '-', '_', '.'. PL_ERR_IO / PL_ERR_NOT_FOUND
 * for an unreadable file or an unknown name (the message lists the shipped
 * models), as above otherwise; the message of a bad file starts with its
 * path. */
pl_status model_config_load(const char *path_or_preset, gpt_config *cfg, char *name, size_t name_len,
                            char *msg, size_t len);

/* What a model text says of its training length, beyond the config
 * (plan/plan_model.h's rules read it). */
typedef struct {
    int file;          /* 1: read from a config file (a path or a shipped name); 0: a preset */
    int seq_override;  /* 1: the overrides after the name or path set seq= */
    int seq_length;    /* 1: the file's top level has "seq_length" (any value) */
    int positions;     /* the file's top-level max_position_embeddings, else n_positions, when an
                          integer; else 0 */
} model_seq_info;

/* model_config_load, and *info (zeroed first) filled as above. */
pl_status model_config_load_seq(const char *path_or_preset, gpt_config *cfg, char *name, size_t name_len,
                                model_seq_info *info, char *msg, size_t len);

/* Write the shipped model names (the first directory searched that has any),
 * sorted and comma-separated, into buf (may be NULL); returns how many. */
int model_list_shipped(char *buf, size_t len);

#endif
