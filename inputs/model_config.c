/*
 * model_config.c: a model from a Hugging Face config.json (jansson), from a
 * shipped model name (data/models/NAME.json) or from preset-and-overrides
 * text, into a gpt_config. model_config.h lists the keys read.
 *
 * Beyond the header's keys the parser reads a few more, so that a file can
 * say what an HF config leaves implicit: "name" (the model's name, which
 * wins over model_type), "seq_length" (the training sequence, which wins
 * over max_position_embeddings), "vocab_multiple" / "make_vocab_size_
 * divisible_by" (Megatron's vocabulary padding), "attention_bias" (q, k, v
 * biases on a no-bias family), and the mixture-of-experts, latent-attention
 * and sliding-window keys of the header (parse_moe_mla), whose models the
 * layout path describes (the per-node graph refuses them).
 *
 * Families (model_type): llama, mistral, qwen2, qwen3, gemma, phi3, olmo2,
 * internlm2: RMSNorm, rotary, no bias, SwiGLU (qwen2 adds q, k, v biases);
 * gpt2: layernorm, learned positions, biases, GELU, tied by default;
 * gpt_neox: layernorm, rotary, biases, GELU, parallel residual by default.
 * Any other model_type: layernorm, learned, biases, unless the file has
 * rms_norm_eps (RMSNorm) or rope_theta (rotary).
 */
#include "model_config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_file.h"
#include "json_doc.h"

#define MODEL_FILE_MAX (16 << 20) /* bytes; a config.json is a few KB */


/* The first of up to three keys present in obj (NULL terminates). */
static json_t *first_key(json_t *obj, const char *const *keys, const char **found) {
    for (int i = 0; keys[i]; i++) {
        json_t *v = json_object_get(obj, keys[i]);
        if (v) {
            *found = keys[i];
            return v;
        }
    }
    return NULL;
}

/* Read a positive integer under one of keys into *out. Returns 1 when read,
 * 0 when absent (or JSON null and optional), -1 with msg on a type or range
 * error or when required and absent. */
static int get_int(json_t *obj, const char *const *keys, int required, int allow_null, int *out, char *msg,
                   size_t len) {
    const char *k = NULL;
    json_t *v = first_key(obj, keys, &k);
    if (!v || (allow_null && json_is_null(v))) {
        if (!required) return 0;
        if (keys[1] && keys[2])
            pl_fail(msg, len, PL_ERR_INVALID, "model config has no '%s' (or '%s', '%s')", keys[0], keys[1], keys[2]);
        else if (keys[1])
            pl_fail(msg, len, PL_ERR_INVALID, "model config has no '%s' (or '%s')", keys[0], keys[1]);
        else
            pl_fail(msg, len, PL_ERR_INVALID, "model config has no '%s'", keys[0]);
        return -1;
    }
    if (!json_is_integer(v)) {
        pl_fail(msg, len, PL_ERR_INVALID, "model config '%s' must be an integer", k);
        return -1;
    }
    json_int_t x = json_integer_value(v);
    if (x <= 0 || x > 1000000000) {
        pl_fail(msg, len, PL_ERR_INVALID, "model config '%s' must be a positive integer up to 1e9, not %lld", k,
                (long long)x);
        return -1;
    }
    *out = (int)x;
    return 1;
}

/* A non-negative integer under one of keys (0 and JSON null allowed, null
 * reading as 0): 1 read, 0 absent, -1 with msg on a type or range error. */
static int get_count(json_t *obj, const char *const *keys, int *out, char *msg, size_t len) {
    const char *k = NULL;
    json_t *v = first_key(obj, keys, &k);
    if (!v) return 0;
    if (json_is_null(v)) {
        *out = 0;
        return 1;
    }
    if (!json_is_integer(v)) {
        pl_fail(msg, len, PL_ERR_INVALID, "model config '%s' must be an integer", k);
        return -1;
    }
    json_int_t x = json_integer_value(v);
    if (x < 0 || x > 1000000000) {
        pl_fail(msg, len, PL_ERR_INVALID, "model config '%s' must be an integer from 0 to 1e9, not %lld", k,
                (long long)x);
        return -1;
    }
    *out = (int)x;
    return 1;
}

/* A JSON boolean under key: 1 read (into *out), 0 absent, -1 wrong type. */
static int get_bool(json_t *obj, const char *key, int *out, char *msg, size_t len) {
    json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) {
        pl_fail(msg, len, PL_ERR_INVALID, "model config '%s' must be true or false", key);
        return -1;
    }
    *out = json_is_true(v);
    return 1;
}

/* A string under key: 1 read, 0 absent, -1 wrong type. */
static int get_str(json_t *obj, const char *key, const char **out, char *msg, size_t len) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) {
        pl_fail(msg, len, PL_ERR_INVALID, "model config '%s' must be a string", key);
        return -1;
    }
    *out = json_string_value(v);
    return 1;
}

static int in_list(const char *s, const char *const *list) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(s, list[i])) return 1;
    return 0;
}

/* The mixture-of-experts, latent-attention and sliding-window keys into
 * *c (model_config.h lists them). PL_ERR_INVALID with one line on a wrong
 * type or an unsupported value; the ranges are gpt_config_validate's. */
static pl_status parse_moe_mla(json_t *root, gpt_config *c, char *msg, size_t len) {
    static const char *const k_exp[] = {"num_local_experts", "num_experts", "n_routed_experts", NULL};
    static const char *const k_topk[] = {"num_experts_per_tok", "experts_per_token", "moe_topk", NULL};
    static const char *const k_moeff[] = {"moe_intermediate_size", NULL};
    static const char *const k_nshared[] = {"n_shared_experts", NULL};
    static const char *const k_shff[] = {"shared_expert_intermediate_size", NULL};
    static const char *const k_first[] = {"first_k_dense_replace", NULL};
    static const char *const k_every[] = {"moe_layer_freq", "decoder_sparse_step", "interleave_moe_layer_step", NULL};
    static const char *const k_ngroup[] = {"n_group", NULL};
    static const char *const k_tgroup[] = {"topk_group", NULL};
    static const char *const k_qr[] = {"q_lora_rank", NULL};
    static const char *const k_kvr[] = {"kv_lora_rank", NULL};
    static const char *const k_nope[] = {"qk_nope_head_dim", NULL};
    static const char *const k_rope[] = {"qk_rope_head_dim", NULL};
    static const char *const k_v[] = {"v_head_dim", NULL};
    static const char *const k_win[] = {"sliding_window", NULL};
    static const char *const k_pat[] = {"sliding_window_pattern", NULL};
    int ne = 0, topk = 0, nshared = 0, shff = 0, moeff = 0;
    if (get_count(root, k_exp, &ne, msg, len) < 0 || get_count(root, k_topk, &topk, msg, len) < 0 ||
        get_count(root, k_moeff, &moeff, msg, len) < 0 || get_count(root, k_nshared, &nshared, msg, len) < 0 ||
        get_count(root, k_shff, &shff, msg, len) < 0 || get_count(root, k_first, &c->first_dense, msg, len) < 0 ||
        get_count(root, k_every, &c->moe_every, msg, len) < 0 ||
        get_count(root, k_ngroup, &c->router_groups, msg, len) < 0 ||
        get_count(root, k_tgroup, &c->router_topk_groups, msg, len) < 0 ||
        get_count(root, k_qr, &c->q_lora_rank, msg, len) < 0 || get_count(root, k_kvr, &c->kv_lora_rank, msg, len) < 0 ||
        get_count(root, k_nope, &c->qk_nope_dim, msg, len) < 0 ||
        get_count(root, k_rope, &c->qk_rope_dim, msg, len) < 0 || get_count(root, k_v, &c->v_head_dim, msg, len) < 0)
        return PL_ERR_INVALID;
    if (ne > 1) {
        c->n_experts = ne;
        c->top_k = topk;
        /* Mixtral and gpt-oss give the expert's width as intermediate_size */
        c->moe_d_ff = moeff > 0 ? moeff : c->d_ff;
        c->shared_d_ff = shff > 0 ? shff : nshared * c->moe_d_ff;
        if (c->moe_every == 1) c->moe_every = 0;
        json_t *dl = json_object_get(root, "mlp_only_layers");
        if (dl && !json_is_array(dl)) return pl_fail(msg, len, PL_ERR_INVALID, "model config 'mlp_only_layers' must be "
                                                                            "an array");
        if (dl && json_array_size(dl) > 0)
            return pl_fail(msg, len, PL_ERR_INVALID, "model config 'mlp_only_layers' (dense layers at chosen places) "
                                                     "is not supported; use first_k_dense_replace or a layer step");
        const char *score = NULL;
        if (get_str(root, "scoring_func", &score, msg, len) < 0) return PL_ERR_INVALID;
        if (score && !strcmp(score, "sigmoid")) c->router_sigmoid = 1;
        else if (score && strcmp(score, "softmax"))
            return pl_fail(msg, len, PL_ERR_INVALID, "model config scoring_func '%.32s' is not softmax or sigmoid",
                           score);
        if (c->router_groups == 1) c->router_groups = c->router_topk_groups = 0; /* one group: no limit */
        const char *mt = NULL;
        if (get_str(root, "model_type", &mt, msg, len) < 0) return PL_ERR_INVALID;
        if (mt && !strcmp(mt, "gpt_oss")) c->moe_bias = 1; /* gpt-oss experts and router carry biases */
        if (mt && !strcmp(mt, "llama4_text")) {
            /* Llama 4 (transformers' Llama4TextMoe): intermediate_size is the
             * expert's width, every MoE layer also runs one shared expert of
             * that width, and intermediate_size_mlp is the dense layers' */
            static const char *const k_mlp[] = {"intermediate_size_mlp", NULL};
            int dff = 0;
            if (get_count(root, k_mlp, &dff, msg, len) < 0) return PL_ERR_INVALID;
            if (shff == 0 && nshared == 0) c->shared_d_ff = c->moe_d_ff;
            if (dff > 0) c->d_ff = dff;
        }
        /* every MoE key but the count is meaningless without experts: a top-k
         * that is absent is an error below (gpt_config_validate) */
    } else {
        /* a dense model: MoE fields that say nothing (0 experts, 1 expert) */
        c->first_dense = c->moe_every = c->router_groups = c->router_topk_groups = 0;
        if (topk > 1)
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "model config routes %d experts per token but has %s experts", topk, ne ? "one of" : "no");
    }
    /* sliding windows: Qwen's use_sliding_window false turns them off */
    int use_sw = 1, win = 0, pattern = 0;
    if (get_bool(root, "use_sliding_window", &use_sw, msg, len) < 0) return PL_ERR_INVALID;
    if (get_count(root, k_win, &win, msg, len) < 0 || get_count(root, k_pat, &pattern, msg, len) < 0)
        return PL_ERR_INVALID;
    json_t *lt = json_object_get(root, "layer_types");
    if (lt && !json_is_array(lt) && !json_is_null(lt))
        return pl_fail(msg, len, PL_ERR_INVALID, "model config 'layer_types' must be an array of strings");
    if (use_sw && win > 0) {
        int nsl = c->n_layers;
        if (lt && json_is_array(lt)) {
            nsl = 0;
            for (size_t i = 0; i < json_array_size(lt); i++) {
                json_t *e = json_array_get(lt, i);
                if (!json_is_string(e))
                    return pl_fail(msg, len, PL_ERR_INVALID, "model config 'layer_types' must be an array of strings");
                nsl += !strcmp(json_string_value(e), "sliding_attention");
            }
        } else if (pattern > 1) {
            nsl = c->n_layers - c->n_layers / pattern; /* Gemma: every pattern-th layer global */
        }
        c->sliding_window = win;
        c->n_sliding_layers = nsl > c->n_layers ? c->n_layers : nsl;
        if (c->n_sliding_layers == 0) c->sliding_window = 0;
    }
    return PL_OK;
}

/* What the document says of its training length, from its top level (the
 * keys plan/plan_model.c's rules read). */
static void seq_keys(json_t *doc, model_seq_info *info) {
    json_t *pos = json_object_get(doc, "max_position_embeddings");
    if (!json_is_integer(pos)) pos = json_object_get(doc, "n_positions");
    info->positions = json_is_integer(pos) ? (int)json_integer_value(pos) : 0;
    info->seq_length = json_object_get(doc, "seq_length") != NULL;
}

/* model_config_parse_json, and the length keys into *info (may be NULL). */
static pl_status parse_doc(const char *text, size_t n, gpt_config *cfg, char *name, size_t name_len,
                           model_seq_info *info, char *msg, size_t len) {
    json_t *root = NULL;
    pl_status st = json_doc_parse(text, n, "model config", &root, msg, len);
    if (st != PL_OK) return st;
    st = PL_ERR_INVALID;
    json_t *const doc = root; /* the whole document; root the object whose keys are read */
    gpt_config c;
    memset(&c, 0, sizeof c);
    if (!json_is_object(root)) {
        pl_fail(msg, len, PL_ERR_INVALID, "model config must be a JSON object ({\"hidden_size\": ...})");
        goto out;
    }
    /* a multimodal config (Llama 4's Llama4Config) nests the language model's
     * keys in text_config: that object is the model (the vision encoder is
     * not modelled); the file's own "name" still names it */
    json_t *tc = json_object_get(root, "text_config");
    if (tc && !json_object_get(root, "hidden_size")) {
        if (!json_is_object(tc)) {
            pl_fail(msg, len, PL_ERR_INVALID, "model config 'text_config' must be an object");
            goto out;
        }
        root = tc;
    }
    static const char *const k_hidden[] = {"hidden_size", "n_embd", "d_model", NULL};
    static const char *const k_layers[] = {"num_hidden_layers", "n_layer", NULL};
    static const char *const k_heads[] = {"num_attention_heads", "n_head", NULL};
    static const char *const k_kv[] = {"num_key_value_heads", NULL};
    static const char *const k_ff[] = {"intermediate_size", "n_inner", NULL};
    static const char *const k_vocab[] = {"vocab_size", NULL};
    static const char *const k_seq[] = {"seq_length", "max_position_embeddings", "n_positions", NULL};
    static const char *const k_mult[] = {"vocab_multiple", "make_vocab_size_divisible_by", NULL};
    static const char *const k_hd[] = {"head_dim", NULL};
    if (get_int(root, k_hidden, 1, 0, &c.d_model, msg, len) < 0) goto out;
    if (get_int(root, k_layers, 1, 0, &c.n_layers, msg, len) < 0) goto out;
    if (get_int(root, k_heads, 1, 0, &c.n_heads, msg, len) < 0) goto out;
    if (get_int(root, k_vocab, 1, 0, &c.vocab, msg, len) < 0) goto out;
    if (get_int(root, k_kv, 0, 1, &c.n_kv_heads, msg, len) < 0) goto out;
    if (get_int(root, k_ff, 0, 1, &c.d_ff, msg, len) < 0) goto out;
    if (get_int(root, k_mult, 0, 1, &c.vocab_multiple, msg, len) < 0) goto out;
    c.seq_len = 2048;
    if (get_int(root, k_seq, 0, 1, &c.seq_len, msg, len) < 0) goto out;
    c.batch = 1;
    int hd = 0;
    if (get_int(root, k_hd, 0, 1, &hd, msg, len) < 0) goto out;
    /* a head_dim equal to hidden / heads is the default: left 0, so such a
     * file stays the dense model it always was */
    if (hd && (c.d_model % c.n_heads != 0 || hd != c.d_model / c.n_heads)) c.head_dim = hd;
    if (parse_moe_mla(root, &c, msg, len) != PL_OK) goto out;

    const char *mtype = NULL, *mname = NULL, *act = NULL;
    if (get_str(root, "model_type", &mtype, msg, len) < 0) goto out;
    if (get_str(doc, "name", &mname, msg, len) < 0) goto out;
    if (get_str(root, "hidden_act", &act, msg, len) < 0) goto out;
    if (!act && get_str(root, "activation_function", &act, msg, len) < 0) goto out;

    static const char *const llama_like[] = {"llama", "mistral", "qwen2", "qwen3", "gemma", "phi3", "olmo2",
                                             "internlm2", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2",
                                             "deepseek_v3", "kimi_k2", "gpt_oss", "olmoe", "llama4_text", NULL};
    int tied_default = 0;
    if (mtype && in_list(mtype, llama_like)) {
        c.norm = NORM_RMSNORM;
        c.pos = POS_ROTARY;
        c.no_bias = 1;
        c.mlp = MLP_SWIGLU;
        if (!strcmp(mtype, "qwen2") || !strcmp(mtype, "qwen2_moe")) c.qkv_bias = 1;
        if (!strcmp(mtype, "gemma")) tied_default = 1;
    } else if (mtype && !strcmp(mtype, "nemotron")) {
        /* Nemotron-4 (transformers' NemotronConfig): LayerNorm with bias,
         * rotary, no linear biases, squared-ReLU MLP (hidden_act relu2) */
        c.pos = POS_ROTARY;
        c.no_bias = 1;
    } else if (mtype && !strcmp(mtype, "gpt2")) {
        tied_default = 1;
    } else if (mtype && !strcmp(mtype, "gpt_neox")) {
        c.pos = POS_ROTARY;
        c.parallel_residual = 1;
    } else {
        if (json_object_get(root, "rms_norm_eps")) c.norm = NORM_RMSNORM;
        if (json_object_get(root, "rope_theta")) c.pos = POS_ROTARY;
    }
    if (json_object_get(root, "rms_norm_eps")) c.norm = NORM_RMSNORM;
    c.tied = tied_default;
    if (get_bool(root, "tie_word_embeddings", &c.tied, msg, len) < 0) goto out;
    if (get_bool(root, "use_parallel_residual", &c.parallel_residual, msg, len) < 0) goto out;
    int ab = 0;
    int r = get_bool(root, "attention_bias", &ab, msg, len);
    if (r < 0) goto out;
    if (r > 0 && c.no_bias) c.qkv_bias = ab;
    if (act) {
        static const char *const gated[] = {"silu", "swiglu", "swish", NULL};
        static const char *const squared[] = {"relu2", "squared_relu", "squared-relu", NULL};
        if (in_list(act, gated)) c.mlp = MLP_SWIGLU;
        else if (!strncmp(act, "gelu", 4) || !strcmp(act, "relu")) c.mlp = MLP_GELU; /* non-gated, same shapes */
        else if (in_list(act, squared)) c.mlp = MLP_RELU2;
        else {
            pl_fail(msg, len, PL_ERR_INVALID,
                    "model config activation '%.32s' is not supported (silu / swiglu for a gated MLP, gelu*, relu, "
                    "relu2 / squared_relu)", act);
            goto out;
        }
    }
    if (c.vocab_multiple == 1) c.vocab_multiple = 0;
    if (gpt_config_validate(&c, msg, len) != PL_OK) goto out;
    if (name && name_len) {
        snprintf(name, name_len, "%s", mname && *mname ? mname : mtype && *mtype ? mtype : "model");
        for (char *p = name; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    }
    if (info) seq_keys(doc, info);
    *cfg = c;
    st = PL_OK;
out:
    json_decref(doc);
    return pl_one_line(st, msg, len);
}

pl_status model_config_parse_json(const char *text, size_t n, gpt_config *cfg, char *name, size_t name_len,
                                  char *msg, size_t len) {
    return parse_doc(text, n, cfg, name, name_len, NULL, msg, len);
}

/* One file's reading: where it goes (json_doc_reader's out). */
typedef struct {
    gpt_config *cfg;
    char *name;
    size_t name_len;
    model_seq_info *info;
} model_read;

static pl_status read_model(const char *text, size_t n, void *out, char *msg, size_t len) {
    model_read *r = out;
    return parse_doc(text, n, r->cfg, r->name, r->name_len, r->info, msg, len);
}

static pl_status load_file(const char *path, gpt_config *cfg, char *name, size_t name_len, model_seq_info *info,
                           char *msg, size_t len) {
    model_read r = {cfg, name, name_len, info};
    if (info) info->file = 1;
    return json_doc_load(path, MODEL_FILE_MAX, "model", read_model, &r, NULL, msg, len);
}

int model_list_shipped(char *buf, size_t len) {
    data_dirs d;
    data_dirs_of("PLACER_MODELS", "models", &d);
    return data_list(&d, buf, len);
}

/* 1 when the overrides (comma-separated key=value, may be NULL) set seq. */
static int sets_seq(const char *ov) {
    for (const char *p = ov; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, "seq=", 4)) return 1;
    return 0;
}

static pl_status load_any(const char *path_or_preset, gpt_config *cfg, char *name, size_t name_len,
                          model_seq_info *info, char *msg, size_t len) {
    const char *s = path_or_preset && *path_or_preset ? path_or_preset : "default";
    size_t n = strlen(s);
    if (n > 4000) return pl_fail(msg, len, PL_ERR_INVALID, "model name too long");
    /* a file path, optionally followed by overrides after its ".json" */
    const char *ov = strstr(s, ".json,");
    if (ov) {
        char path[4096];
        size_t pl = (size_t)(ov - s) + 5;
        memcpy(path, s, pl);
        path[pl] = 0;
        gpt_config c;
        pl_status st = load_file(path, &c, name, name_len, info, msg, len);
        if (st == PL_OK) st = gpt_config_apply_overrides(ov + 6, &c, msg, len);
        if (st == PL_OK) *cfg = c;
        if (info) info->seq_override = sets_seq(ov + 6);
        return st;
    }
    if (data_is_path(s)) return load_file(s, cfg, name, name_len, info, msg, len);
    const char *comma = strchr(s, ',');
    const size_t bl = comma ? (size_t)(comma - s) : n;
    if (info) info->seq_override = sets_seq(comma ? comma + 1 : NULL);
    if ((bl == 7 && !strncmp(s, "default", 7)) || (bl == 5 && !strncmp(s, "gpt12", 5)) ||
        (bl == 4 && !strncmp(s, "tiny", 4))) {
        pl_status st = gpt_config_parse(s, cfg, msg, len);
        if (st == PL_OK && name && name_len) snprintf(name, name_len, "%.*s", (int)bl, s);
        return st;
    }
    /* a shipped model by name, with optional overrides */
    if (!data_name_ok(s, bl))
        return pl_fail(msg, len, PL_ERR_INVALID, "model name '%.*s' has a character other than letters, digits, "
                                                 "'-', '_' and '.'", (int)(bl < 64 ? bl : 64), s);
    data_dirs d;
    data_dirs_of("PLACER_MODELS", "models", &d);
    char path[8192];
    if (data_find(&d, s, bl, path, sizeof path)) {
        gpt_config c;
        pl_status st = load_file(path, &c, name, name_len, info, msg, len);
        if (st != PL_OK) return st;
        if (comma) {
            st = gpt_config_apply_overrides(comma + 1, &c, msg, len);
            if (st != PL_OK) return st;
        }
        *cfg = c;
        return PL_OK;
    }
    char list[1024];
    int cnt = data_list(&d, list, sizeof list);
    return pl_fail(msg, len, PL_ERR_NOT_FOUND,
                   "unknown model '%.*s' (a preset default, gpt12 or tiny, a config.json path, or a shipped model%s%s)",
                   (int)(bl < 64 ? bl : 64), s, cnt ? ": " : "", cnt ? list : "");
}

pl_status model_config_load(const char *path_or_preset, gpt_config *cfg, char *name, size_t name_len, char *msg,
                            size_t len) {
    return pl_one_line(load_any(path_or_preset, cfg, name, name_len, NULL, msg, len), msg, len);
}

pl_status model_config_load_seq(const char *path_or_preset, gpt_config *cfg, char *name, size_t name_len,
                                model_seq_info *info, char *msg, size_t len) {
    memset(info, 0, sizeof *info);
    return pl_one_line(load_any(path_or_preset, cfg, name, name_len, info, msg, len), msg, len);
}
