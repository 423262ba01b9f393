/* test_model_config.c: config.json files into gpt_configs: the shipped
 * models' parameter counts against their published figures, the family
 * defaults, name resolution with overrides, and every refusal. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "model_config.h"
#include "model_params.h"

#include <jansson.h>

static gpt_config load(const char *what) {
    gpt_config c;
    char msg[512] = "", name[64] = "";
    cr_assert_eq(model_config_load(what, &c, name, sizeof name, msg, sizeof msg), PL_OK, "%s: %s", what, msg);
    return c;
}

static pl_status parse(const char *json, gpt_config *c, char *msg, size_t len) {
    return model_config_parse_json(json, strlen(json), c, NULL, 0, msg, len);
}

Test(model_config, shipped_hf_models_have_their_published_parameter_counts) {
    static const struct { const char *name; long long params; } rows[] = {
        {"gpt2", 124439808LL},          {"gpt2-medium", 354823168LL},   {"llama-3-8b", 8030261248LL},
        {"llama-3-70b", 70553706496LL}, {"llama-3-405b", 405853388800LL}, {"mistral-7b", 7241732096LL},
        {"qwen2-7b", 7615616512LL},     {"gpt-neox-20b", 20554567680LL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        gpt_config c = load(rows[i].name);
        cr_assert_eq(gpt_param_count(&c), rows[i].params, "%s: %lld", rows[i].name, (long long)gpt_param_count(&c));
    }
    /* by path too, and the graph agrees with the closed form */
    gpt_config c = load(PLACER_SOURCE_DIR "/data/models/llama-3-8b.json");
    graph *g = NULL;
    c.seq_len = 1024;
    cr_assert_eq(graph_build_gpt(&c, &g, NULL, 0), PL_OK);
    cr_assert_eq(g->total_params, 8030261248LL);
    cr_assert_eq(g->n_nodes, 4 + 6 * 32);
    graph_destroy(g);
}

Test(model_config, megatron_table1_and_table2_models_match_the_published_params) {
    /* params_b of Narayanan et al. SC21 Table 1 (10 rows) and Table 2 (175B).
     * Megatron counts P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)); the graph
     * adds the final layernorm (2h), so it must equal that plus 2h exactly,
     * and the published column (rounded to 0.1B or 3 digits) within 3%
     * (1.65 B printed as 1.7 is the largest gap: 2.8%). */
    static const struct { const char *name; double pb; int h, l; } rows[] = {
        {"megatron-1.7b", 1.7, 2304, 24},     {"megatron-3.6b", 3.6, 3072, 30},   {"megatron-7.5b", 7.5, 4096, 36},
        {"megatron-18b", 18.4, 6144, 40},     {"megatron-39b", 39.1, 8192, 48},   {"megatron-76b", 76.1, 10240, 60},
        {"megatron-145b", 145.6, 12288, 80},  {"megatron-310b", 310.1, 16384, 96}, {"megatron-530b", 529.6, 20480, 105},
        {"megatron-1t", 1008.0, 25600, 128},  {"megatron-175b", 174.6, 12288, 96},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        gpt_config c = load(rows[i].name);
        cr_assert_eq(c.d_model, rows[i].h);
        cr_assert_eq(c.n_layers, rows[i].l);
        cr_assert_eq(c.vocab, 51200);
        cr_assert_eq(c.seq_len, 2048);
        cr_assert_eq(c.tied, 1);
        cr_assert_eq(c.pos, POS_LEARNED);
        cr_assert_eq(gpt_d_ff(&c), 4 * rows[i].h);
        long long h = rows[i].h, l = rows[i].l;
        long long megatron = 12 * l * h * h + 13 * l * h + (51200LL + 2048) * h;
        cr_assert_eq(gpt_param_count(&c), megatron + 2 * h, "%s", rows[i].name);
        double b = (double)gpt_param_count(&c) / 1e9;
        cr_assert(fabs(b - rows[i].pb) / rows[i].pb < 0.03, "%s: %.3f B vs %.1f", rows[i].name, b, rows[i].pb);
    }
}

Test(model_config, family_defaults_from_model_type_and_keys) {
    gpt_config c = load("gpt2");
    cr_assert(c.tied && c.norm == NORM_LAYERNORM && c.pos == POS_LEARNED && c.mlp == MLP_GELU && !c.no_bias);
    cr_assert_eq(c.seq_len, 1024);
    cr_assert_eq(c.batch, 1);
    c = load("llama-3-8b");
    cr_assert(!c.tied && c.norm == NORM_RMSNORM && c.pos == POS_ROTARY && c.mlp == MLP_SWIGLU && c.no_bias);
    cr_assert_eq(c.n_kv_heads, 8);
    cr_assert_eq(c.seq_len, 8192);
    c = load("llama-3-405b");
    cr_assert_eq(c.seq_len, 8192, "seq_length wins over max_position_embeddings");
    c = load("qwen2-7b");
    cr_assert(c.qkv_bias && c.no_bias);
    c = load("gpt-neox-20b");
    cr_assert(c.parallel_residual && c.pos == POS_ROTARY && c.norm == NORM_LAYERNORM && !c.no_bias && !c.tied);
    /* unknown family: keys decide */
    char msg[256];
    cr_assert_eq(parse("{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,"
                       "\"rms_norm_eps\":1e-5,\"rope_theta\":1e4,\"hidden_act\":\"silu\",\"intermediate_size\":128}",
                       &c, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(c.norm == NORM_RMSNORM && c.pos == POS_ROTARY && c.mlp == MLP_SWIGLU && !c.tied);
    cr_assert_eq(c.seq_len, 2048, "no length in the file: 2048");
    cr_assert_eq(c.n_kv_heads, 0);
    cr_assert_eq(c.d_ff, 128);
    /* the name: "name", else model_type, else "model" */
    char name[32];
    const char *j = "{\"model_type\":\"gpt2\",\"n_embd\":64,\"n_layer\":2,\"n_head\":4,\"vocab_size\":100,"
                    "\"vocab_multiple\":128}";
    cr_assert_eq(model_config_parse_json(j, strlen(j), &c, name, sizeof name, msg, sizeof msg), PL_OK);
    cr_assert_str_eq(name, "gpt2");
    cr_assert_eq(gpt_vocab_padded(&c), 128);
    j = "{\"n_embd\":64,\"n_layer\":2,\"n_head\":4,\"vocab_size\":100}";
    cr_assert_eq(model_config_parse_json(j, strlen(j), &c, name, sizeof name, msg, sizeof msg), PL_OK);
    cr_assert_str_eq(name, "model");
    /* found by fuzz_model_config: an empty "name" gave an empty name */
    j = "{\"name\":\"\",\"model_type\":\"\",\"n_embd\":64,\"n_layer\":2,\"n_head\":4,\"vocab_size\":100}";
    cr_assert_eq(model_config_parse_json(j, strlen(j), &c, name, sizeof name, msg, sizeof msg), PL_OK);
    cr_assert_str_eq(name, "model");
    j = "{\"name\":\"a\\nb\",\"n_embd\":64,\"n_layer\":2,\"n_head\":4,\"vocab_size\":100}";
    cr_assert_eq(model_config_parse_json(j, strlen(j), &c, name, sizeof name, msg, sizeof msg), PL_OK);
    cr_assert_str_eq(name, "a?b");
    cr_assert_eq(model_config_load("megatron-145b", &c, name, sizeof name, msg, sizeof msg), PL_OK);
    cr_assert_str_eq(name, "megatron-145b");
}

Test(model_config, names_presets_and_overrides) {
    gpt_config c = load("llama-3-8b,seq=4096,batch=8,layers=4");
    cr_assert_eq(c.seq_len, 4096);
    cr_assert_eq(c.batch, 8);
    cr_assert_eq(c.n_layers, 4);
    cr_assert_eq(c.n_kv_heads, 8);
    c = load(PLACER_SOURCE_DIR "/data/models/gpt2.json,seq=512,batch=4");
    cr_assert_eq(c.seq_len, 512);
    cr_assert_eq(c.batch, 4);
    cr_assert_eq(c.tied, 1);
    c = load("default");
    cr_assert_eq(gpt_param_count(&c), 49343232LL);
    c = load("gpt12,layers=2");
    cr_assert_eq(c.n_layers, 2);
    c = load(NULL);
    cr_assert_eq(c.d_model, 384);
    char msg[512];
    cr_assert_eq(model_config_load("llama-9", &c, NULL, 0, msg, sizeof msg), PL_ERR_NOT_FOUND);
    cr_assert(strstr(msg, "unknown model 'llama-9'"), "%s", msg);
    cr_assert(strstr(msg, "llama-3-8b"), "lists the shipped models: %s", msg);
    cr_assert_eq(model_config_load("llama-3-8b,kv_heads=3", &c, NULL, 0, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "kv_heads (3) must divide heads (32)"), "%s", msg);
    cr_assert_eq(model_config_load("/nonexistent/x.json", &c, NULL, 0, msg, sizeof msg), PL_ERR_NOT_FOUND);
    cr_assert(strstr(msg, "cannot read model file '/nonexistent/x.json'"), "%s", msg);
    cr_assert_eq(model_config_load("a b", &c, NULL, 0, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert_eq(model_config_load(PLACER_SOURCE_DIR "/README.md", &c, NULL, 0, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "README.md: model config is not valid JSON"), "%s", msg);
}

Test(model_config, malformed_configs_are_refused_with_one_line_naming_the_problem) {
    static const struct { const char *json, *want; } bad[] = {
        {"", "not valid JSON"},
        {"{\"hidden_size\": 64,,}", "line 1, column"},
        {"{\"hidden_size\": 64,\n\"n_layer\": }", "line 2"},
        {"[1,2]", "must be a JSON object"},
        /* found by fuzz_model_config: jansson quotes the bad text, newline included */
        {"{\"num_a\\\\\\\n}", "invalid escape"},
        {"{\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100}", "no 'hidden_size' (or 'n_embd', 'd_model')"},
        {"{\"hidden_size\":64,\"num_attention_heads\":4,\"vocab_size\":100}", "no 'num_hidden_layers' (or 'n_layer')"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"vocab_size\":100}", "no 'num_attention_heads'"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4}", "no 'vocab_size'"},
        {"{\"hidden_size\":\"64\",\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100}", "'hidden_size' must be an integer"},
        {"{\"hidden_size\":64.5,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100}", "'hidden_size' must be an integer"},
        {"{\"hidden_size\":-64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100}", "'hidden_size' must be a positive integer"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":5,\"vocab_size\":100}", "heads (5) must divide d_model (64)"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":3,\"vocab_size\":100}", "kv_heads (3) must divide heads (4)"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"tie_word_embeddings\":1}", "'tie_word_embeddings' must be true or false"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"hidden_act\":\"tanh\"}", "activation 'tanh' is not supported"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"hidden_act\":7}", "'hidden_act' must be a string"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"num_local_experts\":8}", "top-k (0 experts per token) must be from 1 to the experts (8)"},
        /* mixture of experts and latent attention: wrong types, impossible values */
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"num_local_experts\":8,\"num_experts_per_tok\":9}", "top-k (9 experts per token) must be from 1 to the experts (8)"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"num_local_experts\":\"8\",\"num_experts_per_tok\":2}", "'num_local_experts' must be an integer"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"n_routed_experts\":8,\"num_experts_per_tok\":2.5}", "'num_experts_per_tok' must be an integer"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"num_experts\":8,\"num_experts_per_tok\":2,\"moe_intermediate_size\":true}", "'moe_intermediate_size' must be an integer"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"n_routed_experts\":8,\"num_experts_per_tok\":2,\"moe_intermediate_size\":16,\"n_shared_experts\":-1}", "'n_shared_experts' must be an integer from 0"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"n_routed_experts\":8,\"num_experts_per_tok\":2,\"moe_intermediate_size\":16,\"first_k_dense_replace\":3}", "first dense layers (3) are more than the layers (2)"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"n_routed_experts\":8,\"num_experts_per_tok\":2,\"moe_intermediate_size\":16,\"scoring_func\":\"relu\"}", "scoring_func 'relu' is not softmax or sigmoid"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"n_routed_experts\":8,\"num_experts_per_tok\":2,\"moe_intermediate_size\":16,\"n_group\":3,\"topk_group\":1}", "n_group (3) dividing the experts (8)"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"num_experts_per_tok\":2}", "routes 2 experts per token but has no experts"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"kv_lora_rank\":64,\"qk_nope_head_dim\":16,\"qk_rope_head_dim\":8,\"v_head_dim\":16}", "MLA ranks must be below the hidden size 64"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"kv_lora_rank\":32,\"qk_nope_head_dim\":16,\"v_head_dim\":16}", "needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim all positive"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"kv_lora_rank\":32,\"qk_nope_head_dim\":16,\"qk_rope_head_dim\":7,\"v_head_dim\":16}", "qk_rope_head_dim must be even"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"kv_lora_rank\":\"32\"}", "'kv_lora_rank' must be an integer"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"sliding_window\":16,\"layer_types\":[1,2]}", "'layer_types' must be an array of strings"},
        {"{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"head_dim\":31,\"rope_theta\":1e4}", "rotary positions need an even head_dim"},
        {"{\"hidden_size\":64,\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100}", "duplicate"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gpt_config c;
        memset(&c, 0x5a, sizeof c);
        char msg[256] = "";
        cr_assert_eq(parse(bad[i].json, &c, msg, sizeof msg), PL_ERR_INVALID, "row %zu accepted", i);
        cr_assert(strstr(msg, bad[i].want), "row %zu: '%s'", i, msg);
        cr_assert(!strchr(msg, '\n'), "row %zu: one line: '%s'", i, msg);
        cr_assert_eq(c.d_model, 0x5a5a5a5a, "row %zu touched the output", i);
    }
}

Test(model_config, every_shipped_model_builds_a_graph_equal_to_its_closed_form) {
    char list[2048];
    int n = model_list_shipped(list, sizeof list);
    cr_assert_geq(n, 19, "%d shipped models: %s", n, list);
    char *save = NULL;
    int seen = 0;
    for (char *tok = strtok_r(list, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        gpt_config c = load(tok);
        c.seq_len = c.pos == POS_LEARNED ? c.seq_len : 256; /* rotary: any length; keep the build small */
        graph *g = NULL;
        char msg[256];
        if (gpt_config_is_extended(&c)) { /* MoE, MLA, head_dim: the layout path only */
            cr_assert_eq(graph_build_gpt(&c, &g, msg, sizeof msg), PL_ERR_UNSUPPORTED, "%s", tok);
            cr_assert(strstr(msg, "use placer layout"), "%s: %s", tok, msg);
            cr_assert_null(g);
            seen++;
            continue;
        }
        cr_assert_eq(graph_build_gpt(&c, &g, msg, sizeof msg), PL_OK, "%s: %s", tok, msg);
        cr_assert_eq(g->total_params, gpt_param_count(&c), "%s", tok);
        cr_assert_eq(g->n_nodes, 4 + 6 * c.n_layers, "%s", tok);
        graph_destroy(g);
        seen++;
    }
    cr_assert_eq(seen, n);
}

/* Every shipped mixture-of-experts (and extended dense) model against the
 * figures its publisher gives, which the file itself records with the
 * convention (active with or without the input embedding table) and the
 * rounding of the published figure (the tolerance: half its last digit,
 * or as the file's source explains). The counts are the closed forms of
 * model_params.h, not read from the file. */
Test(model_config, shipped_moe_models_have_their_published_total_and_active_counts) {
    static const char *const names[] = {"deepseek-v3",   "kimi-k2",         "mixtral-8x7b",   "qwen3-235b-a22b",
                                        "qwen3-30b-a3b", "gpt-oss-120b",    "qwen3-32b",      "mixtral-8x22b",
                                        "llama-4-scout", "gpt-oss-20b",     "mistral-nemo-12b"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/data/models/%s.json", PLACER_SOURCE_DIR, names[i]);
        json_error_t err;
        json_t *root = json_load_file(path, 0, &err);
        cr_assert_not_null(root, "%s: %s", path, err.text);
        const double pt = json_number_value(json_object_get(root, "published_total"));
        const double tol = json_number_value(json_object_get(root, "published_tolerance"));
        json_t *pa = json_object_get(root, "published_active");
        json_t *ta = json_object_get(root, "published_tolerance_active");
        const int with_emb = json_is_true(json_object_get(root, "published_active_counts_embedding"));
        cr_assert(pt > 0 && tol > 0, "%s records its published total", names[i]);
        gpt_config c = load(names[i]);
        int64_t total = 0, active = 0;
        gpt_param_counts(&c, with_emb, &total, &active);
        cr_assert_eq(total, gpt_param_count(&c), "%s: the two closed forms agree", names[i]);
        cr_assert(fabs((double)total - pt) <= tol, "%s: total %.4g vs published %.4g (+- %.2g)", names[i],
                  (double)total, pt, tol);
        if (pa) {
            const double want = json_number_value(pa), at = ta ? json_number_value(ta) : tol;
            cr_assert(fabs((double)active - want) <= at, "%s: active %.4g vs published %.4g (+- %.2g)", names[i],
                      (double)active, want, at);
            cr_assert(gpt_is_moe(&c), "%s", names[i]);
            cr_assert_lt(active, total);
        }
        json_decref(root);
    }
}

/* The keys land where they should: DeepSeek-V3's three dense layers, MLA
 * ranks, group-limited sigmoid routing; Mixtral's expert width from
 * intermediate_size; gpt-oss's alternating sliding layers; Qwen3-32B's
 * head_dim. And a plain dense file stays exactly the config it was. */
Test(model_config, moe_mla_and_window_keys_are_read) {
    gpt_config c = load("deepseek-v3");
    cr_assert_eq(c.n_experts, 256);
    cr_assert_eq(c.top_k, 8);
    cr_assert_eq(c.moe_d_ff, 2048);
    cr_assert_eq(c.shared_d_ff, 2048);
    cr_assert_eq(c.first_dense, 3);
    cr_assert_eq(c.router_groups, 8);
    cr_assert_eq(c.router_topk_groups, 4);
    cr_assert_eq(c.router_sigmoid, 1);
    cr_assert_eq(c.kv_lora_rank, 512);
    cr_assert_eq(c.q_lora_rank, 1536);
    cr_assert(!gpt_layer_is_moe(&c, 2) && gpt_layer_is_moe(&c, 3) && gpt_layer_is_moe(&c, 60));
    cr_assert_eq(gpt_moe_layers_in(&c, 0, 61), 58);
    cr_assert_eq(gpt_qkv_width(&c), 128 * 192 * 2 + 128 * 128);
    c = load("mixtral-8x7b");
    cr_assert_eq(c.moe_d_ff, 14336);
    cr_assert_eq(c.shared_d_ff, 0);
    cr_assert_eq(c.sliding_window, 0); /* null */
    c = load("gpt-oss-120b");
    cr_assert_eq(c.sliding_window, 128);
    cr_assert_eq(c.n_sliding_layers, 18);
    cr_assert_eq(c.moe_bias, 1);
    cr_assert_eq(gpt_head_dim(&c), 64);
    c = load("qwen3-32b");
    cr_assert_eq(gpt_head_dim(&c), 128);
    cr_assert(!gpt_is_moe(&c));
    c = load("qwen3-235b-a22b");
    cr_assert_eq(c.sliding_window, 0); /* use_sliding_window false */
    cr_assert_eq(gpt_moe_layers_in(&c, 0, 94), 94);
    /* every other layer MoE (Llama 4's interleave step 2, Qwen's decoder_sparse_step 2) */
    gpt_config q;
    char msg[256] = "";
    const char *alt = "{\"hidden_size\":64,\"num_hidden_layers\":4,\"num_attention_heads\":4,\"vocab_size\":100,"
                      "\"num_experts\":4,\"num_experts_per_tok\":1,\"moe_intermediate_size\":32,\"decoder_sparse_step\":2,"
                      "\"hidden_act\":\"relu2\",\"head_dim\":16}";
    cr_assert_eq(parse(alt, &q, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert(!gpt_layer_is_moe(&q, 0) && gpt_layer_is_moe(&q, 1) && !gpt_layer_is_moe(&q, 2) && gpt_layer_is_moe(&q, 3));
    cr_assert_eq(q.mlp, MLP_RELU2);
    cr_assert_eq(q.head_dim, 0, "head_dim equal to hidden / heads stays the default");
    /* a dense file is not extended: the same config as before the MoE keys */
    c = load("llama-3-8b");
    cr_assert(!gpt_config_is_extended(&c));
    /* a head_dim of its own, hidden not divisible by heads */
    const char *hd = "{\"hidden_size\":2880,\"num_hidden_layers\":2,\"num_attention_heads\":64,\"vocab_size\":100,"
                     "\"head_dim\":64,\"num_key_value_heads\":8,\"model_type\":\"llama\"}";
    cr_assert_eq(parse(hd, &q, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(gpt_head_dim(&q), 64);
    cr_assert_eq(gpt_attn_params(&q), 2880LL * 80 * 64 + 64LL * 64 * 2880);
}

/* Llama 4's nested text_config is the model (the file's own name still
 * names it): intermediate_size the experts' width, one shared expert of that
 * width, intermediate_size_mlp the dense layers'; a text_config that is not
 * an object is refused. Nemotron: squared ReLU, no linear biases. */
Test(model_config, llama4_text_config_and_nemotron_are_read) {
    gpt_config c = load("llama-4-scout");
    cr_assert_eq(c.d_model, 5120);
    cr_assert_eq(c.n_layers, 48);
    cr_assert_eq(c.n_experts, 16);
    cr_assert_eq(c.top_k, 1);
    cr_assert_eq(c.moe_d_ff, 8192);
    cr_assert_eq(c.shared_d_ff, 8192);
    cr_assert_eq(c.d_ff, 16384);
    cr_assert_eq(c.mlp, MLP_SWIGLU);
    gpt_config d;
    char msg[256] = "", name[64] = "";
    const char *nested = "{\"name\": \"outer\", \"model_type\": \"llama4\", \"text_config\": {\"model_type\": "
                         "\"llama4_text\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                         "\"vocab_size\": 100, \"intermediate_size\": 32, \"intermediate_size_mlp\": 128, "
                         "\"num_local_experts\": 4, \"num_experts_per_tok\": 1, \"hidden_act\": \"silu\"}}";
    cr_assert_eq(model_config_parse_json(nested, strlen(nested), &d, name, sizeof name, msg, sizeof msg), PL_OK, "%s",
                 msg);
    cr_assert_str_eq(name, "outer");
    cr_assert_eq(d.moe_d_ff, 32);
    cr_assert_eq(d.shared_d_ff, 32);
    cr_assert_eq(d.d_ff, 128);
    const char *bad = "{\"text_config\": 3}";
    cr_assert_eq(parse(bad, &d, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "text_config"), "%s", msg);
    gpt_config n = load(PLACER_SOURCE_DIR "/data/models/pending/nemotron-4-340b.json"); /* held back: SOURCES.md */
    cr_assert_eq(n.mlp, MLP_RELU2);
    cr_assert_eq(n.no_bias, 1);
    cr_assert_eq(n.norm, NORM_LAYERNORM);
    cr_assert_eq(gpt_param_count(&n), 341029195776LL); /* count_params.py's figure (data/models/SOURCES.md) */
    gpt_config f = load(PLACER_SOURCE_DIR "/data/models/pending/nemotron-4-15b.json");
    cr_assert_eq(gpt_param_count(&f), 15628775424LL);
}
