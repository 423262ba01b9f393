/*
 * expert_gen.h: a generator of expert loads for what cannot be downloaded
 * here: DeepSeek-V3-style routing over time windows, with the settings frozen
 * in data/experts/NAME.json (their sources are in each file and in
 * docs/experts.md).
 *
 * The model, per MoE layer l (its specialisation s_l ~ U(0, 1) drawn once):
 *   - experts have a residual popularity b_e ~ N(0, pop_sd_l^2), pop_sd_l =
 *     popularity_sd[0] + (popularity_sd[1] - popularity_sd[0]) s_l (the skew
 *     the router's load-balancing bias leaves, per layer);
 *   - tokens carry a latent topic z (a domain) and each topic an affinity
 *     u_{z,e} = rho g_{z,group(e)} + sqrt(1 - rho^2) n_{z,e} (g, n standard
 *     normal; rho = group_share: the part an expert shares with its group,
 *     which makes experts of a group co-activate), scaled by aff_l =
 *     topic_affinity[0] + (topic_affinity[1] - topic_affinity[0]) s_l;
 *   - a token's scores are sigmoid(b_e + aff_l u_{z,e} + eps_e), eps ~ N(0, 1);
 *     DeepSeek-V3's group-limited top-k picks the topk_groups groups of the
 *     largest sum of their two best scores, then the top_k experts of those
 *     groups (noaux_tc; 8 groups, top 4, top 8 for DeepSeek-V3);
 *   - route_tokens tokens per topic and layer are routed so; their histogram
 *     is p_{l,z}(e), and they are the pool the token samples are drawn from.
 * Over windows w = 0, 1, ...: the topic mixture pi_w starts as a draw of
 * Dirichlet(topic_concentration) and walks, log pi += N(0, walk_topic^2);
 * with probability shift_prob per window it is replaced by a fresh draw (a
 * sudden shift: a new workload); each expert's load also walks,
 * eta_{l,e} += N(0, walk_expert^2). Window w's counts are
 *   N k sum_z pi_{w,z} p_{l,z}(e) exp(eta_{l,e}) (renormalised to N k)
 * plus the counting noise of N tokens (normal, variance = the mean), N =
 * tokens_per_window. Each window carries `samples` tokens per layer, drawn
 * from the pool by pi_w, for the scorer's cross-node copies.
 *
 * Deterministic in (settings, seed); costs about layers x topics x
 * route_tokens routings (a few seconds for DeepSeek-V3's 58 layers).
 */
#ifndef PLACER_INPUTS_EXPERT_GEN_H
#define PLACER_INPUTS_EXPERT_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "expert_load.h"
#include "status.h"

#define EXPERT_GEN_NAME_LEN 64
#define EXPERT_GEN_MAX_TOPICS 256

typedef struct {
    char name[EXPERT_GEN_NAME_LEN];
    int layers;                 /* MoE layers */
    int experts;                /* routed experts per layer */
    int groups;                 /* expert groups (0 or 1: no group limit) */
    int topk_groups;            /* groups a token may use */
    int top_k;                  /* experts per token */
    int topics;                 /* latent topics (domains) */
    int route_tokens;           /* tokens routed per topic and layer for p_{l,z} */
    int samples;                /* sampled tokens per window and layer (0: none) */
    double popularity_sd[2];    /* per-layer residual popularity sd, least and most specialised layer */
    double topic_affinity[2];   /* per-layer topic affinity scale, the same */
    double group_share;         /* rho: the part of an expert's topic affinity its group shares, 0..1 */
    double topic_concentration; /* Dirichlet alpha of the topic mixture (small: one domain dominates) */
    double walk_topic;          /* sd of the mixture's log walk per window */
    double walk_expert;         /* sd of each expert's log-load walk per window */
    double shift_prob;          /* probability per window of a sudden shift to a fresh mixture */
    double tokens_per_window;   /* N */
} expert_gen_params;

/* DeepSeek-V3's routing shape with neutral settings (one topic, no skew, no
 * drift); the shipped files set the rest. */
void expert_gen_params_default(expert_gen_params *p);

/* Check p: PL_OK or PL_ERR_INVALID with one line naming the field. */
pl_status expert_gen_params_check(const expert_gen_params *p, char *msg, size_t len);

/* Parse a settings file (n bytes of JSON: the fields above by name, plus
 * "description" and "sources"; unknown keys refused) over the defaults. */
pl_status expert_gen_params_parse(const char *text, size_t n, expert_gen_params *out, char *msg, size_t len);

/* A settings file by name (data/experts/NAME.json, or $PLACER_EXPERTS) or
 * path (holds '/' or ends in .json). */
pl_status expert_gen_params_load(const char *name_or_path, expert_gen_params *out, char *msg, size_t len);

/* Generate n_windows windows with seed into *out (caller destroys). */
pl_status expert_gen_run(const expert_gen_params *p, int n_windows, uint64_t seed, expert_load **out, char *msg,
                         size_t len);

#endif
