/*
 * graph.c: the GPT graph builder, for the original GPT and for the GPT-2 /
 * Llama / Mistral / Qwen / GPT-NeoX families (graph.h lists the features).
 *
 * FLOP counts follow the usual convention of 2 FLOPs per multiply-add; the
 * backward pass of a matmul costs twice its forward. Attention's T x T
 * products are counted in full (no causal halving), as the original GPT's
 * figures always were. Element-wise costs are small fixed counts per
 * element: layernorm 8 forward / 16 backward, RMSNorm 4 / 10 (no mean, no
 * bias), GELU-tanh 8 / 10, SwiGLU's silu-and-multiply 6 / 12, rotary 3 per
 * rotated q and k element each way, softmax 5 per score. Byte counts are
 * rough DRAM traffic estimates for a spec (roofline) profile; measured
 * profiles replace them with real timings, so they only need the right
 * magnitude. For a config whose extensions are all 0 every figure is the
 * original builder's, bit for bit (the profile store and sim_checksum rely
 * on it).
 *
 * Tied embedding and head (cfg->tied): the token matrix (Vp x C) is counted
 * once, in the embedding node; the head node reads it and holds 0 params.
 * How the engine and the simulator should treat the shared weight: when the
 * embedding and the head sit on the same device it is one tensor whose
 * gradient is the sum of both uses, counted once in memory and in the
 * optimizer. When they sit on different devices (pipeline parallelism),
 * do what Megatron does: the head's device keeps a replica (Vp x C weights,
 * gradient and, for the optimizer, the same update), and every step the two
 * copies' gradients are all-reduced between the first and the last stage
 * (the "embedding group") before the optimizer, so the replica costs the
 * head's device the weight's memory plus one Vp x C all-reduce. The graph
 * does not encode that replica; the simulator adds it from cfg->tied.
 */
#include "graph.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *op_kind_name(op_kind k) {
    static const char *names[OP_KIND_COUNT] = {
        "embedding", "layernorm", "attention", "residual", "mlp", "head", "loss"};
    return (k >= 0 && k < OP_KIND_COUNT) ? names[k] : "unknown";
}

static const gpt_config PRESET_DEFAULT = {.vocab = 50257, .d_model = 384, .n_heads = 6, .n_layers = 6,
                                          .seq_len = 256, .batch = 16};
static const gpt_config PRESET_GPT12 = {.vocab = 50257, .d_model = 768, .n_heads = 12, .n_layers = 12,
                                        .seq_len = 256, .batch = 16};
static const gpt_config PRESET_TINY = {.vocab = 64, .d_model = 16, .n_heads = 2, .n_layers = 2,
                                       .seq_len = 8, .batch = 4};

/* Graph nodes are an int count (4 + 6 L) and the builder's figures are
 * int64: keep every size far from overflow. */
#define GPT_MAX_LAYERS 100000
#define GPT_MAX_DIM 100000000 /* d_model, d_ff, vocab, seq: 1e8 */


int gpt_kv_heads(const gpt_config *c) { return c->n_kv_heads > 0 ? c->n_kv_heads : c->n_heads; }

int gpt_d_ff(const gpt_config *c) { return c->d_ff > 0 ? c->d_ff : 4 * c->d_model; }

int gpt_vocab_padded(const gpt_config *c) {
    if (c->vocab_multiple <= 1) return c->vocab;
    int64_t m = c->vocab_multiple;
    return (int)(((int64_t)c->vocab + m - 1) / m * m);
}

int gpt_config_is_plain(const gpt_config *c) {
    return gpt_kv_heads(c) == c->n_heads && gpt_d_ff(c) == 4 * c->d_model && c->norm == NORM_LAYERNORM &&
           c->mlp == MLP_GELU && c->pos == POS_LEARNED && !c->tied && gpt_vocab_padded(c) == c->vocab &&
           !c->no_bias && !c->qkv_bias && !c->parallel_residual && !gpt_config_is_extended(c);
}

/* Per-block parameter figures, shared by the builder and the closed form. */
static int64_t norm_params(const gpt_config *c) { return c->norm == NORM_RMSNORM ? c->d_model : 2LL * c->d_model; }

static int64_t qkv_width(const gpt_config *c) {
    int64_t hs = c->d_model / c->n_heads;
    return c->d_model + 2LL * gpt_kv_heads(c) * hs;
}

static int64_t attn_params(const gpt_config *c) {
    int64_t C = c->d_model, Q = qkv_width(c);
    int64_t p = C * Q + C * C;
    if (!c->no_bias) p += Q + C;
    else if (c->qkv_bias) p += Q; /* Qwen2: bias on q, k, v only */
    return p;
}

static int64_t mlp_params(const gpt_config *c) {
    int64_t C = c->d_model, F = gpt_d_ff(c);
    if (c->mlp == MLP_SWIGLU) return 3 * C * F + (c->no_bias ? 0 : 2 * F + C);
    return 2 * C * F + (c->no_bias ? 0 : F + C);
}

int64_t gpt_param_count(const gpt_config *c) {
    if (gpt_config_is_extended(c)) { /* MoE, MLA, head_dim: model_params.c */
        int64_t total = 0;
        gpt_param_counts(c, 1, &total, NULL);
        return total;
    }
    int64_t C = c->d_model, Vp = gpt_vocab_padded(c), L = c->n_layers;
    int64_t emb = Vp * C + (c->pos == POS_LEARNED ? (int64_t)c->seq_len * C : 0);
    int64_t block = 2 * norm_params(c) + attn_params(c) + mlp_params(c);
    int64_t head = c->tied ? 0 : C * Vp;
    return emb + L * block + norm_params(c) + head;
}

pl_status gpt_config_validate(const gpt_config *c, char *msg, size_t len) {
    if (c->vocab <= 0 || c->d_model <= 0 || c->n_heads <= 0 || c->n_layers <= 0 ||
        c->seq_len <= 0 || c->batch <= 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "config values must all be positive");
    if (c->n_layers > GPT_MAX_LAYERS)
        return pl_fail(msg, len, PL_ERR_INVALID, "layers (%d) must be at most %d", c->n_layers, GPT_MAX_LAYERS);
    if (c->vocab > GPT_MAX_DIM || c->d_model > GPT_MAX_DIM || c->seq_len > GPT_MAX_DIM || c->d_ff > GPT_MAX_DIM ||
        c->vocab_multiple > GPT_MAX_DIM)
        return pl_fail(msg, len, PL_ERR_INVALID, "vocab, d_model, d_ff, seq and vocab_multiple must be at most %d",
                       GPT_MAX_DIM);
    if (c->d_model % c->n_heads != 0 && c->head_dim <= 0 && c->kv_lora_rank <= 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "heads (%d) must divide d_model (%d)",
                       c->n_heads, c->d_model);
    if (c->n_kv_heads < 0 || c->d_ff < 0 || c->vocab_multiple < 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "kv_heads, d_ff and vocab_multiple must be >= 0 (0: default)");
    if (c->n_kv_heads > 0 && (c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads != 0))
        return pl_fail(msg, len, PL_ERR_INVALID, "kv_heads (%d) must divide heads (%d)", c->n_kv_heads,
                       c->n_heads);
    if ((unsigned)c->norm > NORM_RMSNORM || (unsigned)c->mlp > MLP_RELU2 || (unsigned)c->pos > POS_ROTARY)
        return pl_fail(msg, len, PL_ERR_INVALID, "norm, mlp or pos is not a known kind");
    if ((c->tied | c->no_bias | c->parallel_residual | c->qkv_bias) & ~1)
        return pl_fail(msg, len, PL_ERR_INVALID, "tied, no_bias, qkv_bias and parallel_residual must be 0 or 1");
    {
        /* every int64 figure of the closed form and the builder stays far
         * below 2^63: parameters, and per-sample bytes (scores NH x T x T,
         * logits T x V, MLP T x F) */
        double C = c->d_model, L = c->n_layers, T = c->seq_len, NH = c->n_heads, F = gpt_d_ff(c);
        double V = gpt_vocab_padded(c);
        double params = L * (4.0 * C * C + 3.0 * C * F + 4.0 * F + 8.0 * C) + 2.0 * V * C + T * C + 2.0 * C;
        double bytes = 40.0 * (NH * T * T + T * V + T * F + T * C);
        if (params > 1e16 || bytes > 1e17)
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "model too large to describe (%.3g parameters, %.3g bytes per sample; at most 1e16 and "
                           "1e17)", params, bytes);
    }
    if (gpt_config_is_extended(c)) return gpt_config_validate_ext(c, msg, len);
    if (c->pos == POS_ROTARY && (c->d_model / c->n_heads) % 2 != 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "rotary positions need an even head size (d_model/heads = %d)",
                       c->d_model / c->n_heads);
    return PL_OK;
}

/* A 0|1 value, or a name from a two-name list (names[0] -> 0). */
static int parse_choice(const char *v, const char *n0, const char *n1) {
    if (!strcmp(v, n0) || !strcmp(v, "0")) return 0;
    if (!strcmp(v, n1) || !strcmp(v, "1")) return 1;
    return -1;
}

static pl_status parse_config(const char *text, gpt_config *cfg, char *msg, size_t len);

pl_status gpt_config_parse(const char *text, gpt_config *cfg, char *msg, size_t len) {
    return pl_one_line(parse_config(text, cfg, msg, len), msg, len);
}

static pl_status parse_config(const char *text, gpt_config *cfg, char *msg, size_t len) {
    if (!text || !*text) text = "default";
    char buf[256];
    if (strlen(text) >= sizeof buf)
        return pl_fail(msg, len, PL_ERR_INVALID, "config string too long");
    strcpy(buf, text);
    char *comma = strchr(buf, ',');
    if (comma) *comma = 0;
    const char *tok = buf;
    if (!*tok) return pl_fail(msg, len, PL_ERR_INVALID, "empty config");
    gpt_config c;
    if (strcmp(tok, "default") == 0) c = PRESET_DEFAULT;
    else if (strcmp(tok, "gpt12") == 0) c = PRESET_GPT12;
    else if (strcmp(tok, "tiny") == 0) c = PRESET_TINY;
    else
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "unknown config '%s' (use default, gpt12 or tiny, then key=value overrides)",
                       tok);
    pl_status st = comma ? gpt_config_apply_overrides(comma + 1, &c, msg, len) : gpt_config_validate(&c, msg, len);
    if (st == PL_OK) *cfg = c;
    return st;
}

static pl_status apply_overrides(const char *text, gpt_config *cfg, char *msg, size_t len);

pl_status gpt_config_apply_overrides(const char *text, gpt_config *cfg, char *msg, size_t len) {
    return pl_one_line(apply_overrides(text, cfg, msg, len), msg, len);
}

static pl_status apply_overrides(const char *text, gpt_config *cfg, char *msg, size_t len) {
    char buf[256];
    if (!text) text = "";
    if (strlen(text) >= sizeof buf)
        return pl_fail(msg, len, PL_ERR_INVALID, "config overrides too long");
    strcpy(buf, text);
    gpt_config c = *cfg;
    char *save = NULL, *tok;
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return pl_fail(msg, len, PL_ERR_INVALID, "config override '%s' is not key=value", tok);
        *eq = 0;
        const char *val = eq + 1;
        /* two-way choices: by name or 0/1 */
        struct { const char *key, *n0, *n1; int *field; int invert; } choices[] = {
            {"norm", "layernorm", "rmsnorm", (int *)&c.norm, 0},
            {"mlp", "gelu", "swiglu", (int *)&c.mlp, 0},
            {"pos", "learned", "rotary", (int *)&c.pos, 0},
            {"tied", "0", "1", &c.tied, 0},
            {"bias", "0", "1", &c.no_bias, 1},
            {"qkv_bias", "0", "1", &c.qkv_bias, 0},
            {"parallel", "0", "1", &c.parallel_residual, 0},
        };
        int done = 0;
        for (size_t i = 0; i < sizeof choices / sizeof choices[0]; i++) {
            if (strcmp(tok, choices[i].key)) continue;
            int v = parse_choice(val, choices[i].n0, choices[i].n1);
            if (v < 0) {
                if (strcmp(choices[i].n0, "0"))
                    return pl_fail(msg, len, PL_ERR_INVALID, "config value for '%s' must be %s or %s", tok,
                                   choices[i].n0, choices[i].n1);
                return pl_fail(msg, len, PL_ERR_INVALID, "config value for '%s' must be 0 or 1", tok);
            }
            *choices[i].field = choices[i].invert ? !v : v;
            done = 1;
        }
        if (done) continue;
        char *end = NULL;
        long v = strtol(val, &end, 10);
        if (!*val || *end || v <= 0 || v > 1000000000L)
            return pl_fail(msg, len, PL_ERR_INVALID, "config value for '%s' must be a positive integer", tok);
        int *field = NULL;
        if (!strcmp(tok, "vocab")) field = &c.vocab;
        else if (!strcmp(tok, "d_model")) field = &c.d_model;
        else if (!strcmp(tok, "heads")) field = &c.n_heads;
        else if (!strcmp(tok, "layers")) field = &c.n_layers;
        else if (!strcmp(tok, "seq")) field = &c.seq_len;
        else if (!strcmp(tok, "batch")) field = &c.batch;
        else if (!strcmp(tok, "kv_heads")) field = &c.n_kv_heads;
        else if (!strcmp(tok, "d_ff")) field = &c.d_ff;
        else if (!strcmp(tok, "vocab_multiple")) field = &c.vocab_multiple;
        else
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "unknown config key '%s' (vocab, d_model, heads, layers, seq, batch, kv_heads, d_ff, "
                           "norm, mlp, pos, tied, vocab_multiple, bias, qkv_bias, parallel)",
                           tok);
        *field = (int)v;
    }
    pl_status st = gpt_config_validate(&c, msg, len);
    if (st == PL_OK) *cfg = c;
    return st;
}

void gpt_config_key(const gpt_config *c, char *buf, size_t len) {
    int n = snprintf(buf, len, "gpt-L%d-C%d-H%d-V%d-T%d-B%d", c->n_layers, c->d_model, c->n_heads,
                     c->vocab, c->seq_len, c->batch);
    if (n < 0 || (size_t)n >= len) return;
    /* Extensions as one compact suffix, only when some are set (the store's
     * keys for the original GPT are unchanged): g kv heads, f d_ff, m vocab
     * multiple, then flags r RMSNorm, s SwiGLU, o rotary, t tied, n no bias,
     * q qkv bias, p parallel residual. E.g. Llama 3 8B: "-g8f14336rson". */
    char sfx[64];
    int k = 0;
    if (c->n_kv_heads) k += snprintf(sfx + k, sizeof sfx - (size_t)k, "g%d", c->n_kv_heads);
    if (c->d_ff) k += snprintf(sfx + k, sizeof sfx - (size_t)k, "f%d", c->d_ff);
    if (c->vocab_multiple) k += snprintf(sfx + k, sizeof sfx - (size_t)k, "m%d", c->vocab_multiple);
    const struct { int on; char ch; } flags[] = {{c->norm == NORM_RMSNORM, 'r'}, {c->mlp == MLP_SWIGLU, 's'},
                                                 {c->pos == POS_ROTARY, 'o'}, {c->tied, 't'},
                                                 {c->no_bias, 'n'}, {c->qkv_bias, 'q'},
                                                 {c->parallel_residual, 'p'}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (flags[i].on && k < (int)sizeof sfx - 1) sfx[k++] = flags[i].ch;
    sfx[k] = 0;
    if (k) snprintf(buf + n, len - (size_t)n, "-%s", sfx);
}

pl_status gpt_config_from_key(const char *key, gpt_config *cfg, char *msg, size_t len) {
    if (!key || !cfg) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    gpt_config c;
    memset(&c, 0, sizeof c);
    int n = 0;
    if (sscanf(key, "gpt-L%d-C%d-H%d-V%d-T%d-B%d%n", &c.n_layers, &c.d_model, &c.n_heads, &c.vocab, &c.seq_len,
               &c.batch, &n) != 6)
        return pl_fail(msg, len, PL_ERR_INVALID, "graph key '%.80s' is not gpt-L<l>-C<c>-H<h>-V<v>-T<t>-B<b>", key);
    const char *p = key + n;
    if (*p == '-') {
        p++;
        while (*p) {
            char ch = *p++;
            int *num = ch == 'g' ? &c.n_kv_heads : ch == 'f' ? &c.d_ff : ch == 'm' ? &c.vocab_multiple : NULL;
            if (num) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p || v < 1 || v > 1 << 30)
                    return pl_fail(msg, len, PL_ERR_INVALID, "graph key '%.80s': '%c' wants a positive number", key, ch);
                *num = (int)v;
                p = end;
            } else if (ch == 'r') c.norm = NORM_RMSNORM;
            else if (ch == 's') c.mlp = MLP_SWIGLU;
            else if (ch == 'o') c.pos = POS_ROTARY;
            else if (ch == 't') c.tied = 1;
            else if (ch == 'n') c.no_bias = 1;
            else if (ch == 'q') c.qkv_bias = 1;
            else if (ch == 'p') c.parallel_residual = 1;
            else return pl_fail(msg, len, PL_ERR_INVALID, "graph key '%.80s': unknown option letter '%c'", key, ch);
        }
    } else if (*p) {
        return pl_fail(msg, len, PL_ERR_INVALID, "graph key '%.80s' has trailing text", key);
    }
    char back[128];
    gpt_config_key(&c, back, sizeof back);
    if (strcmp(back, key) != 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "graph key '%.80s' is not in canonical form ('%s')", key, back);
    pl_status st = gpt_config_validate(&c, msg, len);
    if (st != PL_OK) return st;
    *cfg = c;
    return PL_OK;
}

/* Fill one node. Shapes are (B,T,C)-like for the full batch. */
static void set_node(graph_node *n, op_kind k, const char *name, int layer, int in0, int in1) {
    memset(n, 0, sizeof *n);
    n->kind = k;
    snprintf(n->name, sizeof n->name, "%s", name);
    n->layer = layer;
    if (in0 >= 0) n->inputs[n->n_inputs++] = in0;
    if (in1 >= 0) n->inputs[n->n_inputs++] = in1;
}

static void set_shape3(graph_node *n, int64_t a, int64_t b, int64_t c) {
    n->out_rank = 3;
    n->out_shape[0] = a; n->out_shape[1] = b; n->out_shape[2] = c;
}

/* A layernorm (saves mean and rstd, 2 floats per token) or an RMSNorm
 * (saves rstd only; scale, no bias). */
static void set_norm(graph_node *nd, const gpt_config *cfg, const char *name, int layer, int in) {
    const int64_t T = cfg->seq_len, C = cfg->d_model, B = cfg->batch;
    const double f = 4.0;
    set_node(nd, OP_LAYERNORM, name, layer, in, -1);
    set_shape3(nd, B, T, C);
    nd->params = norm_params(cfg);
    if (cfg->norm == NORM_RMSNORM) {
        nd->fwd_flops_per_sample = 4.0 * T * C;
        nd->bwd_flops_per_sample = 10.0 * T * C;
        nd->fwd_bytes_per_sample = f * (2.0 * T * C + 1.0 * T);
        nd->bwd_bytes_per_sample = f * (4.0 * T * C + 1.0 * T);
        nd->act_bytes_per_sample = 4 * (T * C + T);
    } else {
        nd->fwd_flops_per_sample = 8.0 * T * C;
        nd->bwd_flops_per_sample = 16.0 * T * C;
        nd->fwd_bytes_per_sample = f * (2.0 * T * C + 2.0 * T);
        nd->bwd_bytes_per_sample = f * (4.0 * T * C + 2.0 * T);
        nd->act_bytes_per_sample = 4 * (T * C + 2 * T);
    }
    nd->fwd_kernels = 1; nd->bwd_kernels = 1;
}

static void set_residual(graph_node *nd, const gpt_config *cfg, const char *name, int layer, int a, int b) {
    const int64_t T = cfg->seq_len, C = cfg->d_model, B = cfg->batch;
    const double f = 4.0;
    set_node(nd, OP_RESIDUAL, name, layer, a, b);
    set_shape3(nd, B, T, C);
    nd->fwd_flops_per_sample = (double)T * C;
    nd->bwd_flops_per_sample = 0.0;
    nd->fwd_bytes_per_sample = f * 3.0 * T * C;
    nd->bwd_bytes_per_sample = f * 3.0 * T * C;
    nd->act_bytes_per_sample = 4 * T * C;
    nd->fwd_kernels = 1; nd->bwd_kernels = 1;
}

/* The embedding: out = wte[tok] (+ wpe[pos] with learned positions);
 * saves nothing but its output. With a tied head wte is also the head's. */
static void set_embedding(graph_node *nd, const gpt_config *cfg) {
    const int64_t C = cfg->d_model, T = cfg->seq_len, B = cfg->batch;
    const int64_t V = gpt_vocab_padded(cfg);
    const double f = 4.0;
    set_node(nd, OP_EMBEDDING, "embedding", -1, -1, -1);
    set_shape3(nd, B, T, C);
    if (cfg->pos == POS_ROTARY) {
        nd->params = V * C;
        nd->fwd_flops_per_sample = 0.0;
        nd->bwd_flops_per_sample = (double)T * C;
        nd->fwd_bytes_per_sample = f * 2.0 * T * C + 4.0 * T;
        nd->bwd_bytes_per_sample = f * 3.0 * T * C;
    } else {
        nd->params = V * C + T * C;
        nd->fwd_flops_per_sample = (double)T * C;
        nd->bwd_flops_per_sample = 2.0 * T * C;
        nd->fwd_bytes_per_sample = f * 3.0 * T * C + 4.0 * T;
        nd->bwd_bytes_per_sample = f * 5.0 * T * C;
    }
    nd->fwd_kernels = 1; nd->bwd_kernels = 1;
}

/* Attention of layer l reading node `in`: qkv (T,Q), pre-softmax and
 * softmax (NH,T,T), y (T,C). Grouped-query attention narrows k and v to KV
 * heads (Q = C + 2 KV HS) but every query head still scores T x T, so the
 * T x T work is the full C's. Rotary rotates q and k in place (no
 * parameters). */
static void set_attention(graph_node *nd, const gpt_config *cfg, const char *name, int l, int in) {
    const int64_t C = cfg->d_model, NH = cfg->n_heads, T = cfg->seq_len, B = cfg->batch;
    const int64_t KV = gpt_kv_heads(cfg), HS = C / NH;
    const int64_t Q = qkv_width(cfg); /* C + 2 * KV * HS; 3C without GQA */
    const int rotary = cfg->pos == POS_ROTARY;
    const double f = 4.0;
    set_node(nd, OP_ATTENTION, name, l, in, -1);
    set_shape3(nd, B, T, C);
    nd->params = attn_params(cfg);
    double mm = 2.0 * T * C * Q + 2.0 * T * C * C;      /* qkv and proj */
    double att = 2.0 * 2.0 * T * T * C;                  /* q@k^T and att@v */
    double rope = rotary ? 3.0 * T * (C + KV * HS) : 0.0;
    nd->fwd_flops_per_sample = mm + att + 5.0 * NH * T * T + rope;
    nd->bwd_flops_per_sample = 2.0 * (mm + att) + 5.0 * NH * T * T + rope;
    double wts = (double)C * Q + (double)C * C;
    double rope_bytes = rotary ? f * 2.0 * T * (C + KV * HS) : 0.0;
    nd->fwd_bytes_per_sample = f * (3.0 * T * C + 1.0 * T * Q + 3.0 * NH * T * T + wts) + rope_bytes;
    nd->bwd_bytes_per_sample = f * (6.0 * T * C + 2.0 * T * Q + 5.0 * NH * T * T + 2.0 * wts) + rope_bytes;
    nd->act_bytes_per_sample = 4 * (T * Q + 2 * NH * T * T + 2 * T * C);
    nd->fwd_kernels = 6 + rotary; nd->bwd_kernels = 8 + rotary;
}

/* The MLP of layer l reading node `in`: SwiGLU or fc-GELU-proj. */
static void set_mlp(graph_node *nd, const gpt_config *cfg, const char *name, int l, int in) {
    const int64_t C = cfg->d_model, T = cfg->seq_len, B = cfg->batch;
    const int64_t F = gpt_d_ff(cfg);
    const double f = 4.0;
    set_node(nd, OP_MLP, name, l, in, -1);
    set_shape3(nd, B, T, C);
    nd->params = mlp_params(cfg);
    if (cfg->mlp == MLP_SWIGLU) {
        /* gate and up (T,F) each, h = silu(gate) * up (T,F), down to C;
         * saves the input, gate, up and h */
        double mlp = 2.0 * 3.0 * T * C * F;
        nd->fwd_flops_per_sample = mlp + 6.0 * T * F;
        nd->bwd_flops_per_sample = 2.0 * mlp + 12.0 * T * F;
        nd->fwd_bytes_per_sample = f * (2.0 * T * C + 5.0 * T * F + 3.0 * C * F);
        nd->bwd_bytes_per_sample = f * (4.0 * T * C + 9.0 * T * F + 6.0 * C * F);
        nd->act_bytes_per_sample = 4 * (3 * T * F + T * C);
        nd->fwd_kernels = 4; nd->bwd_kernels = 7;
    } else {
        /* fc, GELU, proj: saves fc pre-activation and GELU output (T,F) */
        double mlp = 2.0 * 2.0 * T * C * F;
        nd->fwd_flops_per_sample = mlp + 8.0 * T * F;
        nd->bwd_flops_per_sample = 2.0 * mlp + 10.0 * T * F;
        nd->fwd_bytes_per_sample = f * (2.0 * T * C + 3.0 * T * F + 2.0 * C * F);
        nd->bwd_bytes_per_sample = f * (4.0 * T * C + 6.0 * T * F + 4.0 * C * F);
        nd->act_bytes_per_sample = 4 * (2 * T * F + T * C);
        nd->fwd_kernels = 3; nd->bwd_kernels = 5;
    }
}

/* The six nodes of transformer block l from index base on (ln1, attn, res1,
 * ln2, mlp, res2), reading the residual stream node `prev`. */
static void set_block(graph *g, const gpt_config *cfg, int l, int base, int prev) {
    char name[GRAPH_NAME_LEN];
    snprintf(name, sizeof name, "ln1.%d", l);
    set_norm(&g->nodes[base + 0], cfg, name, l, prev);
    snprintf(name, sizeof name, "attn.%d", l);
    set_attention(&g->nodes[base + 1], cfg, name, l, base + 0);
    /* residual add: out = stream + attn */
    snprintf(name, sizeof name, "res1.%d", l);
    set_residual(&g->nodes[base + 2], cfg, name, l, prev, base + 1);
    /* norm 2 reads the attention's sum, or with a parallel residual the
     * block input itself: y = x + attn(ln1(x)) + mlp(ln2(x)), formed by
     * the two adds res1 = x + attn and res2 = res1 + mlp. */
    snprintf(name, sizeof name, "ln2.%d", l);
    set_norm(&g->nodes[base + 3], cfg, name, l, cfg->parallel_residual ? prev : base + 2);
    snprintf(name, sizeof name, "mlp.%d", l);
    set_mlp(&g->nodes[base + 4], cfg, name, l, base + 3);
    snprintf(name, sizeof name, "res2.%d", l);
    set_residual(&g->nodes[base + 5], cfg, name, l, base + 2, base + 4);
}

/* The head (node lnf + 1) and the loss (lnf + 2) after the final norm lnf.
 * Head: logits over the padded vocabulary, no bias; tied: no params of its
 * own (see the opening comment), the FLOPs and traffic are the same. Loss:
 * per-token loss (B,T); keeps softmax probabilities (T,V) for backward. */
static void set_head_and_loss(graph *g, const gpt_config *cfg, int lnf) {
    const int64_t C = cfg->d_model, L = cfg->n_layers, T = cfg->seq_len, B = cfg->batch;
    const int64_t V = gpt_vocab_padded(cfg);
    const double f = 4.0;
    graph_node *nd = &g->nodes[lnf + 1];
    set_node(nd, OP_HEAD, "head", (int)L, lnf, -1);
    set_shape3(nd, B, T, V);
    nd->params = cfg->tied ? 0 : C * V;
    nd->fwd_flops_per_sample = 2.0 * T * C * V;
    nd->bwd_flops_per_sample = 4.0 * T * C * V;
    nd->fwd_bytes_per_sample = f * (T * C + C * V + T * V);
    nd->bwd_bytes_per_sample = f * (2.0 * T * C + 2.0 * C * V + 2.0 * T * V);
    nd->fwd_kernels = 1; nd->bwd_kernels = 2;

    nd = &g->nodes[lnf + 2];
    set_node(nd, OP_LOSS, "loss", (int)L, lnf + 1, -1);
    nd->out_rank = 2; nd->out_shape[0] = B; nd->out_shape[1] = T;
    nd->fwd_flops_per_sample = 5.0 * T * V;
    nd->bwd_flops_per_sample = 2.0 * T * V;
    nd->fwd_bytes_per_sample = f * 2.0 * T * V;
    nd->bwd_bytes_per_sample = f * 2.0 * T * V;
    nd->act_bytes_per_sample = 4 * (T * V + T);
    nd->fwd_kernels = 1; nd->bwd_kernels = 1;
}

/* Once every node is set: output bytes (and saved bytes where a node keeps
 * only its output), total params, and the consumer lists (g->cons, indexed
 * by g->cons_start, which must be zeroed with n_nodes + 1 entries).
 * PL_ERR_NOMEM leaves g->cons NULL or allocated, for graph_destroy. */
static pl_status finish_nodes(graph *g) {
    const int n = g->n_nodes;
    for (int i = 0; i < n; i++) {
        graph_node *x = &g->nodes[i];
        int64_t per = 1;
        for (int d = 1; d < x->out_rank; d++) per *= x->out_shape[d];
        x->out_bytes_per_sample = 4 * per;
        if (x->kind == OP_EMBEDDING || x->kind == OP_HEAD) x->act_bytes_per_sample = x->out_bytes_per_sample;
        g->total_params += x->params;
        for (int j = 0; j < x->n_inputs; j++) g->cons_start[x->inputs[j] + 1]++;
    }
    for (int i = 0; i < n; i++) g->cons_start[i + 1] += g->cons_start[i];
    g->cons = malloc(sizeof *g->cons * (size_t)(g->cons_start[n] > 0 ? g->cons_start[n] : 1));
    int *fill = calloc((size_t)n, sizeof *fill);
    if (!g->cons || !fill) {
        free(fill);
        return PL_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < g->nodes[i].n_inputs; j++) {
            int p = g->nodes[i].inputs[j];
            g->cons[g->cons_start[p] + fill[p]++] = i;
        }
    free(fill);
    return PL_OK;
}

pl_status graph_build_gpt(const gpt_config *cfg, graph **out, char *msg, size_t len) {
    *out = NULL;
    pl_status st = gpt_config_validate(cfg, msg, len);
    if (st != PL_OK) return st;
    if (gpt_config_is_extended(cfg))
        return pl_fail(msg, len, PL_ERR_UNSUPPORTED,
                       "the per-node graph describes dense models with head size d_model / heads only (this one has "
                       "experts, latent attention, a head_dim, sliding windows or squared ReLU): use placer layout");
    const int64_t L = cfg->n_layers;
    const int n = (int)(4 + 6 * L);

    graph *g = calloc(1, sizeof *g);
    if (!g) return PL_ERR_NOMEM;
    g->cfg = *cfg;
    g->n_nodes = n;
    g->nodes = calloc((size_t)n, sizeof *g->nodes);
    g->cons_start = calloc((size_t)n + 1, sizeof *g->cons_start);
    if (!g->nodes || !g->cons_start) goto out_nomem;

    set_embedding(&g->nodes[0], cfg);
    int prev = 0; /* the residual stream entering the next block */
    for (int l = 0; l < L; l++) {
        set_block(g, cfg, l, 1 + 6 * l, prev);
        prev = 1 + 6 * l + 5;
    }
    int lnf = (int)(1 + 6 * L);
    set_norm(&g->nodes[lnf], cfg, "ln_f", (int)L, prev);
    set_head_and_loss(g, cfg, lnf);
    if (finish_nodes(g) != PL_OK) goto out_nomem;
    *out = g;
    return PL_OK;

out_nomem:
    graph_destroy(g);
    return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory building the graph");
}

void graph_destroy(graph *g) {
    if (!g) return;
    free(g->nodes);
    free(g->cons_start);
    free(g->cons);
    free(g);
}
