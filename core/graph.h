/*
 * graph.h: the model as a DAG of placeable nodes, and the GPT builder.
 *
 * A graph is a list of nodes in topological order: every input index of a
 * node is smaller than the node's own index. Each node carries what the
 * simulator, the spec profiler and the engine need to know about it without
 * running it: its op kind, shapes, parameter count, bytes and FLOPs.
 *
 * Sizes that grow with the batch are stored per *sample* (one sequence of
 * seq_len tokens); multiply by the micro-batch size b = batch / m to get the
 * figure for one micro-batch. Parameter counts do not depend on the batch.
 *
 * The default GPT (vocab 50257, d_model 384, 6 heads, 6 layers, seq 256,
 * batch 16) has 40 nodes and 49,343,232 parameters:
 *   0            embedding (token + learned position)
 *   1 + 6*l + 0  layernorm 1 of block l
 *   1 + 6*l + 1  attention (qkv projection, causal softmax, output projection)
 *   1 + 6*l + 2  residual add (block input + attention)
 *   1 + 6*l + 3  layernorm 2
 *   1 + 6*l + 4  mlp (fc, GELU-tanh, proj)
 *   1 + 6*l + 5  residual add
 *   1 + 6*L      final layernorm
 *   2 + 6*L      output head (logits, no bias, untied from the embedding)
 *   3 + 6*L      loss (fused softmax + cross-entropy)
 *
 * Other models keep the same 4 + 6 L nodes, with the block features of
 * gpt_config: RMSNorm in the norm nodes, a SwiGLU MLP, rotary positions (no
 * position table in the embedding), grouped-query attention (qkv width
 * C + 2 * kv_heads * C / heads), a tied head (0 params of its own: see
 * graph.c on how the shared weight is treated), the vocabulary padded to a
 * multiple (embedding, head and loss all use the padded size), no-bias
 * linears, and parallel residual blocks, where ln2 reads the block input
 * instead of res1 (res1 = x + attn, res2 = res1 + mlp).
 */
#ifndef PLACER_CORE_GRAPH_H
#define PLACER_CORE_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define GRAPH_MAX_INPUTS 2
#define GRAPH_NAME_LEN 24

typedef enum {
    OP_EMBEDDING = 0,
    OP_LAYERNORM,
    OP_ATTENTION,
    OP_RESIDUAL,
    OP_MLP,
    OP_HEAD,
    OP_LOSS,
    OP_KIND_COUNT
} op_kind;

typedef enum { NORM_LAYERNORM = 0, NORM_RMSNORM } norm_kind;
/* MLP_RELU2: squared ReLU, non-gated (fc, proj: Nemotron-4); the layout
 * path only (the per-node graph builds GELU and SwiGLU). */
typedef enum { MLP_GELU = 0, MLP_SWIGLU, MLP_RELU2 } mlp_kind;
typedef enum { POS_LEARNED = 0, POS_ROTARY } pos_kind;

/* A model's shape. The first six fields are the original GPT config; the
 * rest extend it to GPT-2 / Llama / Mistral / Qwen / GPT-NeoX families, and
 * every one of them is 0 for the original GPT (so positional initialisers
 * of the first six keep meaning what they meant, and the graph key of such
 * a config is unchanged). */
typedef struct {
    int vocab;    /* vocabulary size V */
    int d_model;  /* channels C */
    int n_heads;  /* attention heads NH; must divide d_model */
    int n_layers; /* transformer blocks L */
    int seq_len;  /* tokens per sample T */
    int batch;    /* samples per step B */
    /* extensions, 0 = the original GPT's choice: */
    int n_kv_heads;        /* key/value heads (grouped-query attention); 0: n_heads */
    int d_ff;              /* MLP hidden width; 0: 4 * d_model */
    norm_kind norm;        /* layernorm (with bias) or RMSNorm (scale only) */
    mlp_kind mlp;          /* GELU MLP (fc, proj) or SwiGLU (gate, up, down) */
    pos_kind pos;          /* learned position table or rotary (no parameters) */
    int tied;              /* 1: the head reuses the token embedding matrix */
    int vocab_multiple;    /* pad V up to a multiple of this (Megatron: 128 * tp); 0: none */
    int no_bias;           /* 1: linear layers have no bias (Llama); 0: they do (GPT-2) */
    int parallel_residual; /* 1: y = x + attn(ln1(x)) + mlp(ln2(x)) (GPT-J, NeoX, PaLM) */
    int qkv_bias;          /* 1: with no_bias, the q, k, v projections keep their bias (Qwen2) */
    /* attention shapes, mixture of experts (0 = none / the default; the
     * layout path reads them, the per-node graph refuses configs that set
     * them: gpt_config_is_extended; model_config.h lists the keys): */
    int head_dim;          /* per-head size; 0: d_model / n_heads */
    int sliding_window;    /* keys a sliding-window layer attends to; 0: none */
    int n_sliding_layers;  /* layers with the sliding window (the rest attend fully) */
    int q_lora_rank;       /* MLA: query down-projection rank; 0: a full q projection */
    int kv_lora_rank;      /* MLA: key/value latent rank; > 0 makes attention MLA */
    int qk_nope_dim;       /* MLA: per-head q/k size without rotary */
    int qk_rope_dim;       /* MLA: per-head rotary q/k size (the rotary key shared by heads) */
    int v_head_dim;        /* MLA: per-head value size */
    int n_experts;         /* routed experts; 0: a dense model */
    int top_k;             /* experts per token */
    int moe_d_ff;          /* one routed expert's FFN width */
    int shared_d_ff;       /* the shared experts' FFN width, all together; 0: none */
    int first_dense;       /* the first layers are dense MLPs (DeepSeek first_k_dense_replace) */
    int moe_every;         /* after them every moe_every-th layer is MoE (1 or 0: all) */
    int router_groups;     /* group-limited routing: expert groups (DeepSeek-V3 n_group); 0: none */
    int router_topk_groups;/* groups a token may use (topk_group; node-limited routing) */
    int router_sigmoid;    /* 1: sigmoid scores with a bias (DeepSeek-V3); 0: softmax */
    int moe_bias;          /* 1: the experts' linears have biases (gpt-oss) */
} gpt_config;

typedef struct {
    op_kind kind;
    char name[GRAPH_NAME_LEN];           /* e.g. "attn.3", "head" */
    int layer;                           /* block index; -1 embedding, L after */
    int n_inputs;                        /* 0..GRAPH_MAX_INPUTS */
    int inputs[GRAPH_MAX_INPUTS];        /* producer node indices */
    int out_rank;                        /* number of dims in out_shape */
    int64_t out_shape[3];                /* output shape for the full batch */
    int64_t params;                      /* trainable parameters (floats) */
    int64_t out_bytes_per_sample;        /* output tensor bytes (fp32) */
    int64_t act_bytes_per_sample;        /* bytes kept for backward, incl. output */
    double fwd_flops_per_sample;         /* forward FLOPs */
    double bwd_flops_per_sample;         /* backward FLOPs */
    double fwd_bytes_per_sample;         /* forward DRAM traffic estimate */
    double bwd_bytes_per_sample;         /* backward DRAM traffic estimate */
    int fwd_kernels;                     /* kernel launches in forward */
    int bwd_kernels;                     /* kernel launches in backward */
} graph_node;

typedef struct {
    gpt_config cfg;     /* the config this graph was built from */
    int n_nodes;        /* number of nodes */
    graph_node *nodes;  /* n_nodes entries, topological order */
    int *cons_start;    /* n_nodes + 1 offsets into cons */
    int *cons;          /* consumers of node i: cons[cons_start[i] .. cons_start[i+1]) */
    int64_t total_params; /* sum of params */
} graph;

/* Fill *cfg with a named preset: "default" (the 49M GPT), "gpt12" (12 layers,
 * d_model 768, 12 heads) or "tiny" (for tests). A preset may be followed by
 * comma-separated overrides, e.g. "default,layers=24,batch=8"; keys are
 * vocab, d_model, heads, layers, seq, batch, kv_heads, d_ff, vocab_multiple
 * (positive integers), norm=layernorm|rmsnorm, mlp=gelu|swiglu,
 * pos=learned|rotary, tied=0|1, bias=0|1 (0 sets no_bias), qkv_bias=0|1,
 * parallel=0|1. Returns PL_ERR_INVALID with a message for an unknown
 * preset, key or a bad value (*cfg untouched then). */
pl_status gpt_config_parse(const char *text, gpt_config *cfg, char *msg, size_t len);

/* Apply comma-separated key=value overrides (the keys above, no preset
 * name) to *cfg, then validate. *cfg untouched on failure. Used for models
 * read from files ("llama-3-8b,seq=4096,batch=8"). */
pl_status gpt_config_apply_overrides(const char *text, gpt_config *cfg, char *msg, size_t len);

/* Check a config: the six original fields positive, heads divide d_model,
 * kv_heads (when set) divide heads, d_ff / vocab_multiple >= 0, enums and
 * flags in range, an even head size for rotary, layers <= 100,000 and
 * sizes <= 1e8 (so the builder's int64 figures cannot overflow). */
pl_status gpt_config_validate(const gpt_config *cfg, char *msg, size_t len);

/* Effective figures of a config (0-valued extensions resolved). Also listed
 * in model_config.h, where they were first declared. */
int gpt_kv_heads(const gpt_config *c);     /* n_kv_heads or n_heads */
int gpt_d_ff(const gpt_config *c);         /* d_ff or 4 * d_model */
int gpt_vocab_padded(const gpt_config *c); /* vocab rounded up to vocab_multiple */

/* Parameter count from the closed form (no graph build): equals
 * graph->total_params for every config graph_build_gpt accepts (tested on
 * GPT-2, Llama 3 8B / 405B-like, NeoX-like configs). */
int64_t gpt_param_count(const gpt_config *c);

/* 1 when cfg describes the original GPT block (its effective figures are
 * the original's: kv heads = heads, d_ff = 4C, layernorm, GELU, learned
 * positions, untied, no vocabulary padding, biases, serial residual), the
 * only model the CUDA/CPU engine (hw/) runs. The engine refuses others with
 * PL_ERR_UNSUPPORTED; the simulator and planner take any valid config. */
int gpt_config_is_plain(const gpt_config *cfg);

/* 1 when cfg sets any field of the attention-shape / mixture-of-experts
 * block above (or a squared-ReLU MLP): a model for the layout path, which
 * graph_build_gpt refuses (PL_ERR_UNSUPPORTED). */
int gpt_config_is_extended(const gpt_config *cfg);

/* Defined in core/model_params.c (declared there too), called by the
 * closed form and the validation here: total and active parameters, and
 * the checks of the extended fields. */
void gpt_param_counts(const gpt_config *c, int with_embedding, int64_t *total, int64_t *active);
pl_status gpt_config_validate_ext(const gpt_config *c, char *msg, size_t len);

/* Build the GPT graph for cfg. On success *out owns a new graph that the
 * caller frees with graph_destroy. On failure *out is NULL. */
pl_status graph_build_gpt(const gpt_config *cfg, graph **out, char *msg, size_t len);

/* Free a graph. Accepts NULL. */
void graph_destroy(graph *g);

/* Human name of an op kind ("embedding", "layernorm", ...). */
const char *op_kind_name(op_kind k);

/* Number of consumers of node i. */
static inline int graph_n_consumers(const graph *g, int i) {
    return g->cons_start[i + 1] - g->cons_start[i];
}

/* Bytes of one node's trainable parameters in fp32. */
static inline int64_t graph_param_bytes(const graph_node *n) { return n->params * 4; }

/* Short string naming a config, e.g. "gpt-L6-C384-H6-V50257-T256-B16".
 * Used as the graph key in the profile store: unchanged for configs whose
 * extensions are all 0; otherwise one suffix "-g<kv>f<d_ff>m<mult><flags>"
 * with only the set parts (flags r rmsnorm, s swiglu, o rotary, t tied,
 * n no bias, q qkv bias, p parallel residual), e.g. Llama 3 8B at seq 8192,
 * batch 1: "gpt-L32-C4096-H32-V128256-T8192-B1-g8f14336rson". */
void gpt_config_key(const gpt_config *cfg, char *buf, size_t len);

/* The inverse of gpt_config_key: the whole config from a key. PL_OK only
 * when the key is exactly what gpt_config_key writes for the result (so a
 * key round-trips, and a malformed or reordered one is refused);
 * PL_ERR_INVALID with a message otherwise. The result is validated. */
pl_status gpt_config_from_key(const char *key, gpt_config *cfg, char *msg, size_t len);

#endif
