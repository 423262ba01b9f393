/* fuzz_model_config.c: libFuzzer target for model_config_parse_json (a
 * Hugging Face config.json, jansson) and model_arch_parse_json (the same
 * text's architecture fields, for the exports). An accepted config must
 * validate and have a positive closed-form parameter count; a small one is
 * built as a graph whose total must equal that count. Accepted architecture
 * fields are never negative and the family is a terminated string. A
 * refusal must explain itself in one line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model_arch.h"
#include "model_config.h"
#include "model_params.h"

static void fuzz_arch(const uint8_t *data, size_t size) {
    model_arch a;
    char msg[256] = "";
    if (model_arch_parse_json((const char *)data, size, &a, msg, sizeof msg) == PL_OK) {
        if (a.rope_theta < 0 || a.norm_eps < 0 || a.router_scale < 0 || a.mtp_layers < 0) abort();
        if (a.topk_norm < -1 || a.topk_norm > 1 || (a.qk_norm != 0 && a.qk_norm != 1)) abort();
        if (memchr(a.family, 0, sizeof a.family) == NULL) abort();
    } else if (!msg[0] || strchr(msg, '\n')) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_arch(data, size);
    gpt_config c;
    char msg[256] = "", name[64] = "";
    pl_status st = model_config_parse_json((const char *)data, size, &c, name, sizeof name, msg, sizeof msg);
    if (st == PL_OK) {
        if (gpt_config_validate(&c, NULL, 0) != PL_OK) abort();
        if (gpt_param_count(&c) <= 0) abort();
        if (!name[0]) abort();
        /* MoE: fewer active than total parameters, top-k within the experts;
         * extended models are the layout path's: the graph refuses them */
        int64_t total = 0, active = 0;
        gpt_param_counts(&c, 1, &total, &active);
        if (total != gpt_param_count(&c) || active <= 0 || active > total) abort();
        if (gpt_is_moe(&c) && (c.top_k < 1 || c.top_k > c.n_experts)) abort();
        if (gpt_config_is_extended(&c)) {
            graph *g = NULL;
            if (graph_build_gpt(&c, &g, NULL, 0) != PL_ERR_UNSUPPORTED || g) abort();
            return 0;
        }
        /* small enough to build quickly: the graph agrees with the formula */
        if ((int64_t)c.n_layers * c.d_model <= 4096 && c.vocab <= 4096 && c.seq_len <= 256 &&
            gpt_d_ff(&c) <= 4096) {
            c.batch = 1;
            graph *g = NULL;
            if (graph_build_gpt(&c, &g, NULL, 0) != PL_OK) abort();
            if (g->total_params != gpt_param_count(&c)) abort();
            if (g->n_nodes != 4 + 6 * c.n_layers) abort();
            graph_destroy(g);
        }
    } else if (!msg[0] || strchr(msg, '\n')) {
        abort();
    }
    return 0;
}
