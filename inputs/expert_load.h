/*
 * expert_load.h: how many tokens each expert of each MoE layer received, over
 * a run of time windows: the input of expert placement (placer experts,
 * policy/experts/). Read from the files the serving engines dump, or made
 * by the generator (expert_gen.h).
 *
 * JSON, one object; the counts come from exactly one of:
 *   logical_count        SGLang's expert distribution recorder ("stat" mode
 *                        dump, SGLang module sglang.srt.eplb.expert_distribution,
 *                        also what --init-expert-location takes): per logical
 *                        expert, [windows][layers][experts] (the recorder's
 *                        buffered steps) or [layers][experts] (one window)
 *   expert_load_window   vLLM's EplbState sliding window
 *                        (module vllm.distributed.eplb.eplb_state), per physical
 *                        slot: [windows][layers][slots]; folded onto logical
 *                        experts through physical_to_logical_map
 *                        [layers][slots] when given (else slots are experts)
 *   expert_load_pass     vLLM's one-pass counts, [layers][slots] (one window),
 *                        folded the same way
 * and optionally
 *   topk_ids_of_layer    sampled tokens' chosen experts (SGLang's per_token
 *                        recorder names them so): [windows][layers][tokens][k]
 *                        or [layers][tokens][k] (the same for every window);
 *                        -1 entries are padding. What the cross-node copies are
 *                        scored on; without them the scorer assumes a token's
 *                        k experts independent given the counts
 *   top_k                experts per token (the counts' sum / tokens)
 * and the keys the dumps carry beside (rank, average_utilization_rate_over_window,
 * last_physical_to_logical_map, source, description, generator), which are
 * kept out of the data. Any other key is refused.
 *
 * CSV: a header line "window,layer,expert,count" then one row per cell, every
 * (window, layer, expert) of the ranges 0..max exactly once.
 *
 * Bad input is PL_ERR_INVALID with one line naming the field and indices:
 * a ragged array ("wrong shape"), a negative or non-finite count, an id out
 * of range, a missing or duplicated CSV cell, sizes over the limits of
 * core/expert_map.h.
 */
#ifndef PLACER_INPUTS_EXPERT_LOAD_H
#define PLACER_INPUTS_EXPERT_LOAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "status.h"

#define EXPERT_LOAD_MAX_WINDOWS 100000
#define EXPERT_LOAD_MAX_CELLS 100000000L   /* windows x layers x experts */
#define EXPERT_LOAD_MAX_SAMPLES 65536      /* sampled tokens per window and layer */
#define EXPERT_LOAD_MAX_K 64
#define EXPERT_LOAD_MAX_BYTES ((size_t)1 << 30)

typedef struct {
    int n_windows;         /* >= 1 */
    int n_layers;          /* MoE layers, >= 1 */
    int n_experts;         /* logical experts, >= 1 */
    int top_k;             /* experts per token; 0 unknown */
    double *count;         /* [n_windows][n_layers][n_experts] tokens, >= 0 (owned) */
    int n_samples;         /* sampled tokens per window and layer; 0: none */
    int sample_k;          /* entries per sampled token (k) */
    int samples_per_window;/* 1: [n_windows][n_layers][..]; 0: one [n_layers][..] set for every window */
    int16_t *samples;      /* expert ids, -1 padding (owned; NULL when n_samples is 0) */
    char source[48];       /* the field the counts came from: "logical_count", "expert_load_window",
                              "expert_load_pass", "csv", or the generator's "generated" */
} expert_load;

/* A zeroed load of the given shape (n_samples 0: no samples). Caller owns
 * *out (expert_load_destroy). PL_ERR_INVALID for sizes outside the limits. */
pl_status expert_load_create(int n_windows, int n_layers, int n_experts, int n_samples, int sample_k,
                             int samples_per_window, expert_load **out, char *msg, size_t len);
void expert_load_destroy(expert_load *ld);

/* Window w, layer l: the n_experts counts; the n_samples x sample_k ids
 * (NULL without samples). */
static inline double *expert_load_row(expert_load *ld, int w, int l) {
    return ld->count + ((size_t)w * ld->n_layers + l) * ld->n_experts;
}
static inline const double *expert_load_row_c(const expert_load *ld, int w, int l) {
    return ld->count + ((size_t)w * ld->n_layers + l) * ld->n_experts;
}
static inline const int16_t *expert_load_samples_c(const expert_load *ld, int w, int l) {
    if (!ld->samples || ld->n_samples < 1) return NULL;
    const size_t per = (size_t)ld->n_samples * ld->sample_k;
    return ld->samples + ((size_t)(ld->samples_per_window ? w : 0) * ld->n_layers + l) * per;
}

/* Parse a JSON or CSV load (n bytes of text). *out is NULL on failure. */
pl_status expert_load_parse_json(const char *text, size_t n, expert_load **out, char *msg, size_t len);
pl_status expert_load_parse_csv(const char *text, size_t n, expert_load **out, char *msg, size_t len);

/* Read a load file: CSV when the name ends in ".csv" or the text opens with
 * "window,", else JSON. Messages start with the path. PL_ERR_NOT_FOUND /
 * PL_ERR_IO for a file that cannot be read. */
pl_status expert_load_read(const char *path, expert_load **out, char *msg, size_t len);

/* Write ld as JSON in the reader's own layout: logical_count
 * [windows][layers][experts], top_k, topk_ids_of_layer when it has samples,
 * and `source`. Returns PL_ERR_IO when f reports an error. */
pl_status expert_load_write_json(const expert_load *ld, FILE *f);

/* Statistics of window w, layer l: the coefficient of variation of the
 * experts' counts (population sd / mean) and their max / mean (both 0 for
 * an empty row). */
void expert_load_row_stats(const expert_load *ld, int w, int l, double *cv, double *max_over_mean);

#endif
