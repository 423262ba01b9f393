/* fuzz_layout.c: libFuzzer target for layout_parse / layout_format /
 * layout_validate / layout_chunk_layers and the rank grid. The first byte
 * picks a model (heads, KV heads, layers, sequence) and a GPU count. An
 * accepted text must format and parse back to the same layout; a layout
 * valid for the model must split its layers into pp * vp chunks that sum
 * to the model's (twice under dualpipe: one pipeline each way), and its rank grid must round-trip at a few ranks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const int heads[4] = {96, 128, 32, 12}, kv[4] = {0, 8, 8, 0}, layers[4] = {96, 126, 32, 12},
                     seq[4] = {2048, 8192, 131072, 1000};
    int k = data[0] & 3;
    gpt_config m = {.vocab = 51200, .d_model = heads[k] * 64, .n_heads = heads[k], .n_layers = layers[k],
                    .seq_len = seq[k], .batch = 1, .n_kv_heads = kv[k]};
    if (k == 1) { /* a mixture of experts: ep / etp are checked against it */
        m.n_experts = 64;
        m.top_k = 8;
        m.moe_d_ff = 1536;
    }
    int sh = (data[0] >> 2) % 24; /* 0: no limit, else 2^sh GPUs */
    int64_t gpus = sh == 0 ? 0 : (int64_t)1 << sh;
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    layout *l = malloc(sizeof *l), *back = malloc(sizeof *back);
    char *buf = malloc(16384);
    int *chunks = malloc(sizeof(int) * LAYOUT_MAX_CHUNKS);
    if (!l || !back || !buf || !chunks) goto done;
    char msg[256] = "";
    pl_status st = layout_parse(text, l, msg, sizeof msg);
    if (st != PL_OK) {
        if (!msg[0] || strchr(msg, '\n')) abort();
        goto done;
    }
    int n = layout_format(l, buf, 16384);
    if (n < 0 || n >= 16384) abort();
    if (layout_parse(buf, back, msg, sizeof msg) != PL_OK) abort();
    if (memcmp(l, back, sizeof *l)) abort();
    if (layout_validate(l, NULL, 0, NULL, 0) == PL_OK && layout_micro_batches(l) < 1) abort();
    msg[0] = 0;
    if (layout_validate(l, &m, gpus, msg, sizeof msg) != PL_OK) {
        if (!msg[0]) abort();
        goto done;
    }
    if (layout_chunk_layers(l, m.n_layers, chunks, NULL, 0) != PL_OK) abort();
    int64_t sum = 0;
    for (int i = 0; i < l->pp * l->vp; i++) {
        if (chunks[i] < 0) abort();
        sum += chunks[i];
    }
    if (sum != (int64_t)m.n_layers * schedule_pipelines(l->sched)) abort(); /* dualpipe: the model once each way */
    int64_t w = layout_world_size(l);
    if (gpus > 0 && w > gpus) abort();
    int64_t ranks[3] = {0, w / 2, w - 1};
    for (int i = 0; i < 3; i++) {
        layout_coords c = layout_rank_coords(l, ranks[i]);
        if (layout_rank_of(l, &c) != ranks[i]) abort();
    }
    /* the expert grid: etp * ep * edp = tp * cp * dp, and every group holds its rank */
    if (layout_expert_dim_size(l, LAYOUT_EDIM_ETP) * (int64_t)layout_expert_dim_size(l, LAYOUT_EDIM_EP) *
            layout_expert_dim_size(l, LAYOUT_EDIM_EDP) != (int64_t)l->tp * l->cp * l->dp)
        abort();
    if (w <= 1 << 20) {
        int64_t *g = malloc(sizeof *g * (size_t)(l->tp * (int64_t)l->cp * l->dp));
        for (int d = 0; g && d < LAYOUT_EDIM_PP; d++) {
            int n = layout_expert_group_ranks(l, w - 1, (layout_edim)d, g), has = 0;
            for (int i = 0; i < n; i++) {
                if (g[i] < 0 || g[i] >= w) abort();
                has |= g[i] == w - 1;
            }
            if (!has) abort();
        }
        free(g);
    }
done:
    free(chunks);
    free(buf);
    free(back);
    free(l);
    free(text);
    return 0;
}
