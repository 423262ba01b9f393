/*
 * layout_expand.c: a layout expanded for one model on one cluster, the
 * layout simulator's fixed inputs (layout_internal.h): the pipeline
 * stages' GPUs (layout_rank_of: tp innermost, then cp, dp, pp) and GPU
 * types, the layers of each chunk, the time of every collective and send a
 * stage runs (collective.h, over the groups layout_group_ranks gives), the
 * parameters each chunk holds after the tp split, the gradient buckets;
 * and, per run, each chunk's forward and backward durations from the
 * compute model (compute_model.h) with the collectives Megatron runs on
 * the compute stream. Message sizes and which collectives run where are
 * described at the top of layout_sim.c.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "graph.h"
#include "layout_internal.h"
#include "model_params.h"
#include "moe_compute.h"

void ls_msg(char *msg, size_t len, const char *fmt, ...) {
    if (!msg || len == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
}

/* ---- model facts -------------------------------------------------------- */

int64_t layout_layer_params(const gpt_config *cfg) {
    if (gpt_config_is_extended(cfg)) /* head_dim, MLA: model_params.h; an MoE layer's experts not included */
        return gpt_attn_params(cfg) + 2 * (cfg->norm == NORM_RMSNORM ? 1 : 2) * (int64_t)cfg->d_model +
               gpt_dense_mlp_params(cfg);
    const int64_t d = cfg->d_model, hd = cfg->d_model / cfg->n_heads, kv = (int64_t)gpt_kv_heads(cfg) * hd;
    const int64_t ff = gpt_d_ff(cfg);
    const int bias = !cfg->no_bias;
    int64_t p = d * d + 2 * d * kv + d * d;            /* q, k, v, o */
    if (bias) p += d + 2 * kv + d;
    p += cfg->mlp == MLP_SWIGLU ? 3 * d * ff : 2 * d * ff;
    if (bias) p += cfg->mlp == MLP_SWIGLU ? 2 * ff + d : ff + d;
    p += cfg->norm == NORM_RMSNORM ? 2 * d : 4 * d;    /* two norms */
    return p;
}

/* Embedding (token table, learned positions) and head (untied matrix,
 * final norm) parameters. */
static void emb_head_params(const gpt_config *cfg, int64_t *emb, int64_t *head) {
    const int64_t d = cfg->d_model, V = gpt_vocab_padded(cfg);
    *emb = V * d + (cfg->pos == POS_LEARNED ? (int64_t)cfg->seq_len * d : 0);
    *head = (cfg->tied ? 0 : V * d) + (cfg->norm == NORM_RMSNORM ? d : 2 * d);
}

/* layout_model_flops for MoE / MLA / head_dim models: the active
 * parameters' matrices (the router, top-k experts, shared experts, MLA's
 * projections) and the attention core at its head sizes, sliding layers
 * over min(window, seq) keys. */
static void ext_model_flops(const gpt_config *cfg, const layout *l, double *model, double *hw) {
    const double T = cfg->seq_len, d = cfg->d_model, V = gpt_vocab_padded(cfg), a = cfg->n_heads;
    const double dqk = gpt_is_mla(cfg) ? cfg->qk_nope_dim + cfg->qk_rope_dim : gpt_head_dim(cfg);
    const double dv = gpt_is_mla(cfg) ? cfg->v_head_dim : gpt_head_dim(cfg);
    const double fs = cfg->sliding_window > 0 && cfg->sliding_window < cfg->seq_len
                          ? (double)cfg->n_sliding_layers / cfg->n_layers : 0.0;
    const double keys = (1 - fs) * T + fs * (fs > 0 ? cfg->sliding_window : 0);
    const double attn = 2.0 * T * keys * a * (dqk + dv); /* QK^T and AV, no causal halving */
    const double attn_mm = (double)gpt_attn_params(cfg);
    const int n_moe = gpt_moe_layers_in(cfg, 0, cfg->n_layers), n_dense = cfg->n_layers - n_moe;
    const double moe_mm = n_moe > 0 ? (double)gpt_router_params(cfg) + (double)cfg->top_k * gpt_expert_params(cfg) +
                                          (double)gpt_shared_expert_params(cfg)
                                    : 0.0;
    const double fwd = cfg->n_layers * (2.0 * T * attn_mm + attn) + n_dense * 2.0 * T * gpt_dense_mlp_params(cfg) +
                       n_moe * 2.0 * T * moe_mm + 2.0 * T * d * V;
    const double seqs = l->global_batch;
    *model = 3.0 * fwd * seqs;
    double extra = 0.0;
    if (l->recompute == RECOMPUTE_FULL) extra = fwd - 2.0 * T * d * V;
    else if (l->recompute == RECOMPUTE_SELECTIVE) extra = cfg->n_layers * attn;
    *hw = *model + extra * seqs;
}

void layout_model_flops(const gpt_config *cfg, const layout *l, double *model, double *hw) {
    if (gpt_config_is_extended(cfg)) {
        ext_model_flops(cfg, l, model, hw);
        return;
    }
    const double T = cfg->seq_len, d = cfg->d_model, V = gpt_vocab_padded(cfg);
    const double hd = d / cfg->n_heads, kv = (double)gpt_kv_heads(cfg) * hd, ff = gpt_d_ff(cfg);
    const double mm = d * d + 2 * d * kv + d * d + (cfg->mlp == MLP_SWIGLU ? 3 : 2) * d * ff;
    const double attn = 4.0 * T * T * d;              /* QK^T and AV, no causal halving (Megatron's count) */
    const double layer_fwd = 2.0 * T * mm + attn;    /* per sequence */
    const double head_fwd = 2.0 * T * d * V;
    const double seqs = l->global_batch;
    const double fwd = cfg->n_layers * layer_fwd + head_fwd;
    *model = 3.0 * fwd * seqs;
    double extra = 0.0;
    if (l->recompute == RECOMPUTE_FULL) extra = cfg->n_layers * layer_fwd;
    else if (l->recompute == RECOMPUTE_SELECTIVE) extra = cfg->n_layers * attn;
    *hw = *model + extra * seqs;
}

/* ---- create ------------------------------------------------------------- */

void layout_sim_destroy(layout_sim *s) {
    if (!s) return;
    free(s->chunk_layers); free(s->stage_layers); free(s->stage_rank); free(s->gpu); free(s->order);
    free(s->n_ops_r); free(s->rank_of); free(s->w_us);
    free(s->tp_ar); free(s->tp_ag); free(s->tp_rs); free(s->tp_ce); free(s->cp_ag); free(s->cp_rs); free(s->tp_ag8);
    free(s->send_fwd); free(s->send_bwd); free(s->opt_params); free(s->stage_params); free(s->ag_chunk);
    free(s->ag_layer); free(s->ag_emb); free(s->ag_head);
    free(s->buckets); free(s->bk_start); free(s->cost); free(s->farr); free(s->barr); free(s->pos);
    free(s->ct); free(s->lf); free(s->lb); free(s->dpr); free(s->dpg); free(s->prev_start);
    free(s->p_comp); free(s->p_recomp); free(s->p_tp); free(s->p_cp); free(s->p_dp); free(s->p_wait);
    free(s->p_opt); free(s->end); free(s->last_bwd_start); free(s->stash); free(s->stash_max); free(s->ev);
    free(s->chunk_moe); free(s->ep_disp); free(s->p_ep); free(s->egrp); free(s->chunk_expert_params);
    free(s->chunk_end); free(s->chunk_last_mb); free(s->p_hid);
    free(s->chunk_params); free(s->grp); free(s->nstash); free(s->nstash_max); free(s->free_wait); free(s->ready);
    free(s);
}

#define LS_ALLOC(ptr, count) (((ptr) = calloc((size_t)(count) > 0 ? (size_t)(count) : 1, sizeof *(ptr))) == NULL)

/* Collective k over a group: the cluster model, or the measured
 * collectives where s has them (coll_measured.h); counted by source. */
static pl_status sim_coll(layout_sim *s, coll_kind k, const int64_t *ranks, int n, double bytes, coll_estimate *e) {
    pl_status st = coll_time_measured(s->c, s->meas, k, ranks, n, bytes, e);
    if (st == PL_OK && n > 1)
        s->n_coll_src[!strcmp(e->source, "measured") ? 2 : !strcmp(e->source, "fitted") ? 1 : 0]++;
    return st;
}

/* Collective k over dimension d's group of rank r (0 when the group has one member). */
static pl_status group_coll(layout_sim *s, int64_t rank, layout_dim d, coll_kind k, double bytes, int64_t *buf,
                            coll_estimate *e) {
    const int n = layout_group_ranks(s->l, rank, d, buf);
    return sim_coll(s, k, buf, n, bytes, e);
}

void layout_sim_coll_sources(const layout_sim *s, int *model, int *fitted, int *measured) {
    *model = s ? s->n_coll_src[0] : 0;
    *fitted = s ? s->n_coll_src[1] : 0;
    *measured = s ? s->n_coll_src[2] : 0;
}

/* The MoE parts of the expansion (nothing for a dense model): MoE layers
 * per chunk, the experts' parameters per chunk on one GPU, the dense part
 * of a layer as the model's mean (s->layer_params: what the buckets and
 * gathers over dp carry), and per stage the dispatch time over its expert
 * groups: all-to-all over ep (moe_all_to_all_us) plus the etp all-gather,
 * or the all-gather dispatcher's all-gather over ep. */
static pl_status moe_expand(layout_sim *s, const gpt_config *cfg, const layout *l) {
    if (!gpt_is_moe(cfg)) return PL_OK;
    const int K = s->K, pp = s->pp;
    const int64_t inner = (int64_t)l->tp * l->cp * l->dp;
    if (LS_ALLOC(s->chunk_moe, K) || LS_ALLOC(s->ep_disp, pp) || LS_ALLOC(s->p_ep, pp) || LS_ALLOC(s->egrp, inner) ||
        LS_ALLOC(s->chunk_expert_params, K))
        return PL_ERR_NOMEM;
    s->moe = 1;
    const int64_t ex = moe_layer_expert_params_per_gpu(cfg, l);
    for (int k = 0, first = 0; k < K; k++) {
        if (ls_first(s, k)) first = 0; /* dualpipe: each pipeline runs the whole model */
        s->chunk_moe[k] = gpt_moe_layers_in(cfg, first, s->chunk_layers[k]);
        s->chunk_expert_params[k] = (double)s->chunk_moe[k] * (double)ex;
        first += s->chunk_layers[k];
    }
    moe_params mp; /* balanced: the run's load factor multiplies the time (moe_chunk_costs) */
    moe_params_default(&mp);
    mp.imbalance = 1.0;
    const double bytes = moe_dispatch_bytes(cfg, l, &mp);
    for (int r = 0; r < pp; r++) {
        const int64_t rank = s->stage_rank[r];
        coll_estimate e;
        pl_status st;
        int n = layout_expert_group_ranks(l, rank, LAYOUT_EDIM_EP, s->egrp);
        double t = 0;
        if (l->dispatcher == MOE_DISPATCH_ALLGATHER) {
            if ((st = sim_coll(s, COLL_ALL_GATHER, s->egrp, n, bytes, &e)) != PL_OK) return st;
            t = e.time_us;
        } else if (l->dispatcher == MOE_DISPATCH_FLEX) {
            const double row = (double)cfg->d_model * (l->prec == PRECISION_FP8 ? 2.0 : precision_act_bytes(l->prec));
            if ((st = moe_flex_dispatch_us(s->c, cfg, s->egrp, n, moe_tokens_in(cfg, l), row, 1.0, &t, &e)) != PL_OK)
                return st;
        } else {
            if ((st = moe_all_to_all_us(s->c, s->egrp, n, bytes, &t, &e)) != PL_OK) return st;
            if (l->etp > 1) { /* the routed tokens all-gathered over etp (then reduce-scattered back) */
                coll_estimate g;
                const int ne = layout_expert_group_ranks(l, rank, LAYOUT_EDIM_ETP, s->egrp);
                if ((st = sim_coll(s, COLL_ALL_GATHER, s->egrp, ne, bytes * l->etp, &g)) != PL_OK) return st;
                t += g.time_us;
            }
        }
        s->ep_disp[r] = t;
        if (r == 0) s->est_ep = e;
    }
    return PL_OK;
}

/* The schedule a layout runs: Megatron-LM's 1f1b is interleaved over vp
 * chunks when vp > 1; the other orders as named (layout_validate checked
 * vp against their chunk count). */
static schedule layout_order(const layout *l, int m) {
    schedule sc = schedule_make(m, l->sched);
    if (l->sched == SCHED_1F1B && l->vp > 1) {
        sc.order = SCHED_INTERLEAVED;
        sc.chunks = l->vp;
    }
    sc.paired = l->ep_overlap && l->sched == SCHED_1F1B; /* Megatron's EP overlap pairs 1F1B's steady state */
    return sc;
}

/* Every rank's order of s->sched (core/schedule.c) into s->order, each
 * op's chunk turned into its stage (the event loop's index), and the rank
 * of every stage (ls_rank_of). PL_ERR_SCHEDULE with a message when
 * core builds no order (out of memory). */
static pl_status expand_orders(layout_sim *s, char *msg, size_t len) {
    const int pp = s->pp, vp = s->vp;
    for (int r = 0; r < pp; r++)
        for (int c = 0; c < vp; c++) s->rank_of[ls_stage_of(s, r, c)] = r;
    /* each pipeline's first and last stage, and the last micro-batch a stage runs (dualpipe: two
     * pipelines of K/2 stages, each running half the micro-batches) */
    const int pipes = schedule_pipelines(s->sched.order), Sp = s->K / pipes;
    for (int k = 0; k < s->K; k++) {
        s->chunk_end[k] = (unsigned char)((k % Sp == 0 ? LS_FIRST : 0) | (k % Sp == Sp - 1 ? LS_LAST : 0));
        s->chunk_last_mb[k] = (k / Sp + 1) * (s->m / pipes) - 1;
    }
    if (schedule_all_rank_ops(&s->sched, pp, s->order, s->n_ops_stage, s->n_ops_r) != 0) {
        ls_msg(msg, len, "the %s order of %d ranks and %d micro-batches could not be built",
               schedule_order_name(s->l->sched), pp, s->m);
        return PL_ERR_SCHEDULE;
    }
    for (int r = 0; r < pp; r++) {
        schedule_op *ops = s->order + (size_t)r * s->n_ops_stage;
        for (int q = 0; q < s->n_ops_r[r]; q++) ops[q].chunk = (unsigned short)ls_stage_of(s, r, ops[q].chunk);
    }
    return PL_OK;
}

pl_status layout_sim_create(const gpt_config *cfg, const layout *l, const cluster *c, layout_sim **out, char *msg,
                            size_t len) {
    return layout_sim_create_measured(cfg, l, c, NULL, out, msg, len);
}

/* The inputs layout_sim_create_measured refuses: NULL arguments, a cluster,
 * measured collectives or layout that does not validate, or a layout too
 * large to simulate. PL_ERR_INVALID with a one-line message. */
static pl_status check_create_inputs(const gpt_config *cfg, const layout *l, const cluster *c,
                                     const coll_measured *meas, char *msg, size_t len) {
    if (!cfg || !l || !c) {
        ls_msg(msg, len, "layout_sim_create: NULL argument");
        return PL_ERR_INVALID;
    }
    char m2[256];
    if (cluster_validate(c, m2, sizeof m2) != PL_OK) {
        ls_msg(msg, len, "cluster %s: %s", c->name, m2);
        return PL_ERR_INVALID;
    }
    if (meas && coll_measured_validate(meas, m2, sizeof m2) != PL_OK) {
        ls_msg(msg, len, "measured collectives: %s", m2);
        return PL_ERR_INVALID;
    }
    if (layout_validate(l, cfg, cluster_n_gpus(c), m2, sizeof m2) != PL_OK) {
        ls_msg(msg, len, "%s", m2);
        return PL_ERR_INVALID;
    }
    const int K = l->pp * l->vp, m = layout_micro_batches(l);
    if (m < 1 || (long)K * m > 10000000L || (long)l->pp * 2 * l->vp * m > 20000000L) {
        ls_msg(msg, len, "layout too large to simulate: %d chunks x %d micro-batches", K, m);
        return PL_ERR_INVALID;
    }
    return PL_OK;
}

/* Every array of s sized by its pp, K, m and n_ops_stage (zeroed).
 * Returns 0, or 1 when out of memory (what was allocated is freed by
 * layout_sim_destroy). */
static int alloc_arrays(layout_sim *s) {
    const layout *l = s->l;
    const int pp = s->pp, K = s->K, m = s->m;
    const int gmax = l->tp > l->dp ? (l->tp > l->cp ? l->tp : l->cp) : (l->dp > l->cp ? l->dp : l->cp);
    return LS_ALLOC(s->chunk_layers, K) || LS_ALLOC(s->stage_layers, pp) || LS_ALLOC(s->stage_rank, pp) ||
           LS_ALLOC(s->gpu, pp) || LS_ALLOC(s->order, (size_t)pp * s->n_ops_stage) || LS_ALLOC(s->tp_ar, pp) ||
           LS_ALLOC(s->tp_ag, pp) || LS_ALLOC(s->tp_rs, pp) || LS_ALLOC(s->tp_ce, pp) || LS_ALLOC(s->cp_ag, pp) ||
           LS_ALLOC(s->cp_rs, pp) || LS_ALLOC(s->send_fwd, pp) || LS_ALLOC(s->send_bwd, pp) ||
           LS_ALLOC(s->opt_params, pp) || LS_ALLOC(s->stage_params, pp) || LS_ALLOC(s->ag_chunk, K) ||
           LS_ALLOC(s->ag_layer, pp) || LS_ALLOC(s->ag_emb, pp) || LS_ALLOC(s->ag_head, pp) ||
           LS_ALLOC(s->bk_start, K + 1) || LS_ALLOC(s->cost, K) || LS_ALLOC(s->farr, (size_t)K * m) ||
           LS_ALLOC(s->barr, (size_t)K * m) || LS_ALLOC(s->pos, pp) || LS_ALLOC(s->ct, pp) || LS_ALLOC(s->lf, pp) ||
           LS_ALLOC(s->lb, pp) || LS_ALLOC(s->dpr, pp) || LS_ALLOC(s->dpg, pp) || LS_ALLOC(s->prev_start, pp) ||
           LS_ALLOC(s->p_comp, pp) || LS_ALLOC(s->p_recomp, pp) || LS_ALLOC(s->p_tp, pp) || LS_ALLOC(s->p_cp, pp) ||
           LS_ALLOC(s->p_dp, pp) || LS_ALLOC(s->p_wait, pp) || LS_ALLOC(s->p_opt, pp) || LS_ALLOC(s->end, pp) ||
           LS_ALLOC(s->last_bwd_start, pp) || LS_ALLOC(s->stash, pp) || LS_ALLOC(s->stash_max, pp) ||
           LS_ALLOC(s->chunk_params, K) || LS_ALLOC(s->grp, gmax > 2 ? gmax : 2) || LS_ALLOC(s->free_wait, pp) ||
           LS_ALLOC(s->ready, pp) || LS_ALLOC(s->nstash, pp) || LS_ALLOC(s->nstash_max, pp) ||
           LS_ALLOC(s->n_ops_r, pp) || LS_ALLOC(s->rank_of, K) || LS_ALLOC(s->w_us, K) || LS_ALLOC(s->chunk_end, K) ||
           LS_ALLOC(s->chunk_last_mb, K) || LS_ALLOC(s->p_hid, pp);
}

/* The pipeline's stages: every rank's order, the layers of each chunk and
 * stage, each stage's GPU (the replica whose tp, cp and dp coordinates
 * are 0) and, for FP8, that its GPU runs the recipe. A one-line message
 * and the failure's status otherwise. */
static pl_status expand_stages(layout_sim *s, char *msg, size_t len) {
    const layout *l = s->l;
    pl_status st = expand_orders(s, msg, len);
    if (st != PL_OK) return st;
    char m2[256];
    if ((st = layout_chunk_layers(l, s->cfg->n_layers, s->chunk_layers, m2, sizeof m2)) != PL_OK) {
        ls_msg(msg, len, "%s", m2);
        return st;
    }
    for (int k = 0; k < s->K; k++) s->stage_layers[ls_rank_of(s, k)] += s->chunk_layers[k];
    for (int r = 0; r < s->pp; r++) {
        layout_coords co;
        memset(&co, 0, sizeof co);
        co.c[LAYOUT_DIM_PP] = r;
        s->stage_rank[r] = layout_rank_of(l, &co);
        s->gpu[r] = cluster_gpu_of(s->c, s->stage_rank[r]);
    }
    /* FP8: every stage's GPU must run the recipe (MXFP8 needs Blackwell) */
    if (l->prec == PRECISION_FP8)
        for (int r = 0; r < s->pp; r++)
            if (fp8_check_gpu(s->gpu[r], l->fp8, m2, sizeof m2) != PL_OK) {
                ls_msg(msg, len, "%s", m2);
                return PL_ERR_INVALID;
            }
    return PL_OK;
}

/* A micro-batch's message sizes on one GPU, in bytes (FP8 runs send and
 * reduce their activations in bf16: fp8.h). */
typedef struct {
    double ab;      /* bytes an activation element */
    double tok;     /* tokens per micro-batch on one GPU (seq / cp) */
    double act;     /* a layer's activation (what tp's collectives move) */
    double kv_full; /* the keys and values cp's all-gather moves */
} ls_sizes;

/* The message sizes (*z, and the pipeline send's s->pp_bytes) and the
 * parameter counts a stage's collectives move: one layer's (an MoE
 * model's mean replicated part), the embedding's and head's, the head
 * part the last stage holds, bytes a gathered parameter takes; FP8 with
 * sp gets its FP8 all-gather times' array. PL_ERR_NOMEM or PL_OK. */
static pl_status expand_sizes(layout_sim *s, ls_sizes *z) {
    const gpt_config *cfg = s->cfg;
    const layout *l = s->l;
    z->ab = l->prec == PRECISION_FP8 ? 2.0 : precision_act_bytes(l->prec);
    z->tok = (double)l->micro_batch * cfg->seq_len / l->cp;
    z->act = z->tok * cfg->d_model * z->ab;
    const double hd = (double)cfg->d_model / cfg->n_heads;
    z->kv_full = (double)l->micro_batch * cfg->seq_len * 2.0 * ((double)gpt_kv_heads(cfg) / l->tp) * hd * z->ab;
    s->pp_bytes = z->act / l->tp;
    s->layer_params = layout_layer_params(cfg);
    if (s->moe) { /* the mean replicated part of a layer (experts apart: chunk_expert_params) */
        double sum = 0;
        for (int i = 0; i < cfg->n_layers; i++)
            sum += (double)moe_layer_dense_params_per_gpu(cfg, l, gpt_layer_is_moe(cfg, i)) * l->tp;
        s->layer_params = (int64_t)llround(sum / cfg->n_layers);
    }
    emb_head_params(cfg, &s->emb_params, &s->head_params);
    /* Megatron keeps a copy of a tied embedding on the last stage for the head */
    int64_t head_held =
        s->head_params + (cfg->tied && s->pp > 1 ? (int64_t)gpt_vocab_padded(cfg) * cfg->d_model : 0);
    if (cfg->tied && s->pp == 1) head_held = s->head_params;
    s->head_held = head_held;
    s->param_bytes_used = z->ab < 2 ? 2 : z->ab; /* fp8 keeps bf16 weights */
    /* FP8 with sequence parallelism: Transformer Engine casts the two norm
     * outputs (the QKV and MLP-in inputs) to FP8 before their all-gather
     * (its LayerNormLinear / LayerNormMLP), so those gathers move 1 byte an
     * element; the reduce-scatters and the backward's collectives stay bf16 */
    if (l->prec == PRECISION_FP8 && l->sp && l->tp > 1 && LS_ALLOC(s->tp_ag8, s->pp)) return PL_ERR_NOMEM;
    return PL_OK;
}

/* Each stage's collectives over its tp and cp groups at sizes z (stage 0's
 * estimates kept for the result) and its sends to the next and previous
 * stages. The collective model's status on failure. */
static pl_status stage_collectives(layout_sim *s, const ls_sizes *z) {
    const int pp = s->pp;
    pl_status st;
    for (int r = 0; r < pp; r++) {
        const int64_t rank = s->stage_rank[r];
        coll_estimate e;
        if ((st = group_coll(s, rank, LAYOUT_DIM_TP, COLL_ALL_REDUCE, z->act, s->grp, &e)) != PL_OK) return st;
        s->tp_ar[r] = e.time_us;
        if (r == 0) s->est_tp_ar = e;
        if ((st = group_coll(s, rank, LAYOUT_DIM_TP, COLL_ALL_GATHER, z->act, s->grp, &e)) != PL_OK) return st;
        s->tp_ag[r] = e.time_us;
        if (r == 0) s->est_tp_ag = e;
        if (s->tp_ag8) { /* FP8: the norm outputs gathered as FP8, 1 byte an element */
            if ((st = group_coll(s, rank, LAYOUT_DIM_TP, COLL_ALL_GATHER, z->act / z->ab, s->grp, &e)) != PL_OK)
                return st;
            s->tp_ag8[r] = e.time_us;
        }
        if ((st = group_coll(s, rank, LAYOUT_DIM_TP, COLL_REDUCE_SCATTER, z->act, s->grp, &e)) != PL_OK) return st;
        s->tp_rs[r] = e.time_us;
        if (r == 0) s->est_tp_rs = e;
        if ((st = group_coll(s, rank, LAYOUT_DIM_TP, COLL_ALL_REDUCE, z->tok * 4.0, s->grp, &e)) != PL_OK) return st;
        s->tp_ce[r] = 3.0 * e.time_us;
        if ((st = group_coll(s, rank, LAYOUT_DIM_CP, COLL_ALL_GATHER, z->kv_full, s->grp, &e)) != PL_OK) return st;
        s->cp_ag[r] = e.time_us;
        if (r == 0) s->est_cp = e;
        if ((st = group_coll(s, rank, LAYOUT_DIM_CP, COLL_REDUCE_SCATTER, z->kv_full, s->grp, &e)) != PL_OK)
            return st;
        s->cp_rs[r] = e.time_us;
        /* sends: chunk k on r goes to chunk k+1 on (r+1) mod pp, and back */
        const int nx = (r + 1) % pp, pv = (r + pp - 1) % pp;
        s->send_fwd[r] = nx == r ? 0.0 : p2p_time_us(s->c, rank, s->stage_rank[nx], s->pp_bytes);
        s->send_bwd[r] = pv == r ? 0.0 : p2p_time_us(s->c, rank, s->stage_rank[pv], s->pp_bytes);
    }
    return PL_OK;
}

/* Parameters per chunk and stage after the tp split (the embedding with
 * the first chunk, the held head with the last), and the parameters each
 * stage's optimizer updates (its dp shard under zero >= 1; an MoE model's
 * experts at their edp shard). */
static void chunk_stage_params(layout_sim *s) {
    const layout *l = s->l;
    const int K = s->K, pp = s->pp;
    for (int k = 0; k < K; k++) {
        int64_t p = (int64_t)s->chunk_layers[k] * s->layer_params;
        if (ls_first(s, k)) p += s->emb_params;
        if (ls_last(s, k)) p += s->head_held;
        s->chunk_params[k] = p / l->tp;
        s->stage_params[ls_rank_of(s, k)] += s->chunk_params[k];
    }
    const int sharded = l->dp > 1 && l->zero != ZERO_NONE;
    for (int r = 0; r < pp; r++)
        s->opt_params[r] = sharded ? (double)s->stage_params[r] / l->dp : (double)s->stage_params[r];
    if (s->moe) { /* the experts: held at E / ep, 1 / etp; their optimizer shard over edp */
        const int edp = layout_expert_dim_size(l, LAYOUT_EDIM_EDP);
        for (int k = 0; k < K; k++) {
            s->opt_params[ls_rank_of(s, k)] += sharded && edp > 1 ? s->chunk_expert_params[k] / edp : s->chunk_expert_params[k];
            s->stage_params[ls_rank_of(s, k)] += (int64_t)s->chunk_expert_params[k];
        }
    }
}

/* The parameter gathers over each stage's dp group (zero >= 1, fsdp): a
 * chunk's, one layer's, the embedding's and the head's, stage 0's whole
 * (the result's estimate); and a tied embedding's gradient all-reduce
 * between the first and last stage. The collective model's status on
 * failure. */
static pl_status param_gathers(layout_sim *s) {
    const gpt_config *cfg = s->cfg;
    const layout *l = s->l;
    const int K = s->K, pp = s->pp;
    pl_status st;
    for (int k = 0; k < K; k++) {
        coll_estimate e;
        if ((st = group_coll(s, s->stage_rank[ls_rank_of(s, k)], LAYOUT_DIM_DP, COLL_ALL_GATHER,
                             (double)s->chunk_params[k] * s->param_bytes_used, s->grp, &e)) != PL_OK)
            return st;
        s->ag_chunk[k] = e.time_us;
    }
    for (int r = 0; r < pp; r++) {
        const double unit[3] = {(double)s->layer_params / l->tp, (double)s->emb_params / l->tp,
                                (double)s->head_held / l->tp};
        double *dst[3] = {&s->ag_layer[r], &s->ag_emb[r], &s->ag_head[r]};
        for (int u = 0; u < 3; u++) {
            coll_estimate e;
            if ((st = group_coll(s, s->stage_rank[r], LAYOUT_DIM_DP, COLL_ALL_GATHER, unit[u] * s->param_bytes_used,
                                 s->grp, &e)) != PL_OK)
                return st;
            *dst[u] = e.time_us;
        }
    }
    coll_estimate e;
    if ((st = group_coll(s, s->stage_rank[0], LAYOUT_DIM_DP, COLL_ALL_GATHER,
                         (double)s->stage_params[0] * s->param_bytes_used, s->grp, &e)) != PL_OK)
        return st;
    s->est_dp_ag = e;
    if (l->sched == SCHED_DUALPIPE && pp > 1) {
        /* the two copies of each stage (rank r's down stage r is rank pp-1-r's up stage) sum their
         * gradients after the data-parallel reduction: an all-reduce of one rank's optimizer shard of
         * its stages' gradients (fp32; opt_params: / dp under zero >= 1) between the two */
        int64_t two[2] = {s->stage_rank[0], s->stage_rank[pp - 1]};
        if ((st = sim_coll(s, COLL_ALL_REDUCE, two, 2, s->opt_params[0] * 4.0, &e)) != PL_OK)
            return st;
        s->pair_sync_us = e.time_us;
    }
    if (cfg->tied && pp > 1) { /* a tied embedding's gradient: first <-> last stage */
        int64_t two[2] = {s->stage_rank[0], s->stage_rank[pp - 1]};
        if ((st = sim_coll(s, COLL_ALL_REDUCE, two, 2, (double)gpt_vocab_padded(cfg) * cfg->d_model / l->tp * 4.0,
                           &e)) != PL_OK)
            return st;
        s->emb_ar_us = e.time_us;
    }
    return PL_OK;
}

pl_status layout_sim_create_measured(const gpt_config *cfg, const layout *l, const cluster *c,
                                     const coll_measured *meas, layout_sim **out, char *msg, size_t len) {
    if (!out) return PL_ERR_INVALID;
    *out = NULL;
    pl_status st = check_create_inputs(cfg, l, c, meas, msg, len);
    if (st != PL_OK) return st;
    layout_sim *s = calloc(1, sizeof *s);
    if (!s) return PL_ERR_NOMEM;
    s->cfg = cfg;
    s->l = l;
    s->meas = meas;
    /* A cluster of one NVLink domain may have no network at all (h200x2:
     * nics 0); the cost model asks for one even for groups inside the
     * domain, so give it the domain's own fabric, which no transfer can
     * then use. */
    s->cl = *c;
    if (cluster_n_gpus(c) <= cluster_domain_gpus(c) && (s->cl.nics_per_node < 1 || !(s->cl.nic_bw > 0))) {
        s->cl.nics_per_node = 1;
        s->cl.nic_bw = c->intra_bw;
    }
    s->c = &s->cl;
    s->pp = l->pp;
    s->vp = l->vp;
    s->K = l->pp * l->vp;
    s->m = layout_micro_batches(l);
    s->split = schedule_splits_backward(l->sched);
    s->sched = layout_order(l, s->m);
    s->n_ops_stage = schedule_max_ops(&s->sched);
    ls_sizes z;
    st = PL_ERR_NOMEM;
    if (alloc_arrays(s)) goto fail;
    if ((st = expand_stages(s, msg, len)) != PL_OK) goto fail;
    if ((st = moe_expand(s, cfg, l)) != PL_OK) goto coll_fail;
    if ((st = expand_sizes(s, &z)) != PL_OK) goto fail;
    if ((st = stage_collectives(s, &z)) != PL_OK) goto coll_fail;
    chunk_stage_params(s);
    if ((st = param_gathers(s)) != PL_OK) goto coll_fail;
    *out = s;
    return PL_OK;

coll_fail:
    ls_msg(msg, len, "collective model failed for this layout (status %d)", (int)st);
fail:
    layout_sim_destroy(s);
    if (st == PL_ERR_NOMEM) ls_msg(msg, len, "out of memory");
    return st == PL_OK ? PL_ERR_INVALID : st;
}

/* ---- per-run costs -------------------------------------------------------- */

/* Gradient buckets of every chunk for p's bucket size and gradient bytes
 * (rebuilt only when those change: the one allocation a run may make). */
pl_status ls_ensure_buckets(layout_sim *s, const layout_sim_params *p) {
    const layout *l = s->l;
    if (l->dp <= 1) {
        for (int k = 0; k <= s->K; k++) s->bk_start[k] = 0;
        s->n_buckets = 0;
        return PL_OK;
    }
    if (s->bk_bucket_bytes == p->dp_bucket_bytes && s->bk_grad_bytes == p->grad_comm_bytes) return PL_OK;
    const int K = s->K;
    const coll_kind kind = l->zero == ZERO_NONE ? COLL_ALL_REDUCE : COLL_REDUCE_SCATTER;
    const double gb = p->grad_comm_bytes, bucket = p->dp_bucket_bytes;
    for (int pass = 0; pass < 2; pass++) {
        int n = 0;
        double last_bytes = -1, last_us = 0;
        int last_stage = -1;
        for (int k = 0; k < K; k++) {
            if (pass) s->bk_start[k] = n;
            const int L = s->chunk_layers[k], r = ls_rank_of(s, k);
            double acc = 0;
            int last_unit = 0;
            for (int u = 0; u <= L + 1; u++) {
                double prm = 0;
                if (u == 0) prm = ls_last(s, k) ? (double)s->head_held / l->tp : 0;
                else if (u <= L) prm = (double)s->layer_params / l->tp;
                else prm = ls_first(s, k) ? (double)s->emb_params / l->tp : 0;
                if (prm <= 0) continue;
                acc += prm * gb;
                last_unit = u;
                if (acc >= bucket) {
                    if (pass) s->buckets[n] = (ls_bucket){u, acc, 0};
                    n++;
                    acc = 0;
                }
            }
            if (acc > 0) {
                if (pass) s->buckets[n] = (ls_bucket){last_unit, acc, 0};
                n++;
            }
            if (pass)
                for (int b = s->bk_start[k]; b < n; b++) {
                    if (s->buckets[b].bytes != last_bytes || r != last_stage) {
                        coll_estimate e;
                        pl_status st = group_coll(s, s->stage_rank[r], LAYOUT_DIM_DP, kind, s->buckets[b].bytes,
                                                  s->grp, &e);
                        if (st != PL_OK) return st;
                        last_bytes = s->buckets[b].bytes;
                        last_us = e.time_us;
                        last_stage = r;
                    }
                    s->buckets[b].us = last_us;
                }
        }
        if (pass) {
            s->bk_start[K] = n;
            s->n_buckets = n;
        } else if (n > s->cap_buckets) {
            ls_bucket *nb = realloc(s->buckets, (size_t)n * sizeof *nb);
            if (!nb) return PL_ERR_NOMEM;
            s->buckets = nb;
            s->cap_buckets = n;
        }
    }
    if (s->moe && layout_expert_dim_size(l, LAYOUT_EDIM_EDP) > 1) {
        /* the experts' gradients: reduced over the edp group in buckets of
         * the same size as the layers that hold them finish their backward
         * (Megatron's buckets follow the parameters' backward order): the
         * chunk's expert reduction spread over its dense buckets in
         * proportion to their bytes (the layers' share) */
        for (int k = 0; k < K; k++) {
            const double bytes = s->chunk_expert_params[k] * gb;
            if (!(bytes > 0) || s->bk_start[k + 1] == s->bk_start[k]) continue;
            const int nb = (int)ceil(bytes / bucket);
            const int n = layout_expert_group_ranks(l, s->stage_rank[ls_rank_of(s, k)], LAYOUT_EDIM_EDP, s->egrp);
            coll_estimate ee;
            pl_status st = sim_coll(s, kind, s->egrp, n, bytes / nb, &ee);
            if (st != PL_OK) return st;
            double dense = 0;
            for (int b = s->bk_start[k]; b < s->bk_start[k + 1]; b++) dense += s->buckets[b].bytes;
            for (int b = s->bk_start[k]; b < s->bk_start[k + 1]; b++)
                s->buckets[b].us += dense > 0 ? nb * ee.time_us * s->buckets[b].bytes / dense : 0.0;
        }
    }
    coll_estimate e;
    pl_status st = group_coll(s, s->stage_rank[0], LAYOUT_DIM_DP, kind, (double)s->stage_params[0] * gb, s->grp, &e);
    if (st != PL_OK) return st;
    s->est_dp = e;
    s->bk_bucket_bytes = p->dp_bucket_bytes;
    s->bk_grad_bytes = p->grad_comm_bytes;
    return PL_OK;
}

/* One MoE layer's block cost under p: balanced loads at p's load factor
 * (hist NULL), or the measured histogram of MoE layer j: the ep ranks hold
 * consecutive experts, the busiest rank's rows n k ep etp x its experts'
 * share, its experts priced by their own shares. *lf gets the layer's load
 * factor (the busiest rank's rows over the mean), which scales its
 * dispatch. */
static void moe_layer_block(const layout_sim *s, const layout_sim_params *p, const cluster_gpu *gpu, int j,
                            layer_cost *blk, double *lf) {
    const gpt_config *cfg = s->cfg;
    const layout *l = s->l;
    const moe_hist *h = p->moe.hist;
    *lf = moe_load_factor(&p->moe, cfg, l);
    if (!h || j < 0 || j >= h->n_layers || h->n_experts != cfg->n_experts) {
        moe_block_compute_cost(gpu, cfg, l, &p->compute, &p->moe, blk);
        return;
    }
    const int ep = l->ep, El = cfg->n_experts / ep;
    const double *sh = h->share + (size_t)j * h->n_experts;
    int best = 0;
    double best_sum = -1;
    for (int r = 0; r < ep; r++) {
        double sum = 0;
        for (int e = 0; e < El; e++) sum += sh[r * El + e];
        if (sum > best_sum) best_sum = sum, best = r;
    }
    double local[MOE_HIST_MAX_EXPERTS];
    for (int e = 0; e < El; e++) local[e] = best_sum > 0 ? sh[best * El + e] / best_sum : 1.0 / El;
    const double n = moe_tokens_in(cfg, l), rows = n * cfg->top_k * ep * l->etp * best_sum;
    moe_loads ld = {&rows, 1, local, El, -1.0};
    moe_layer_time t;
    *blk = (layer_cost){0};
    if (moe_layer_time_us(gpu, cfg, l, &p->moe, &p->compute, &ld, &t) != PL_OK) {
        moe_block_compute_cost(gpu, cfg, l, &p->compute, &p->moe, blk);
        return;
    }
    blk->fwd_us = t.fwd_us;
    blk->bwd_us = t.bwd_us;
    blk->fwd_flops = t.fwd_flops;
    blk->recompute_us = l->recompute == RECOMPUTE_FULL ? t.fwd_us : 0.0;
    *lf = ep * best_sum > 1.0 ? ep * best_sum : 1.0;
}

/* One MoE layer's block cost when an expert placement sets its load factor
 * f (layout_sim_params.moe_layer_load): the busiest rank takes f times the
 * mean routed rows, its experts spread by p's expert_cv; *lf = f. */
static void moe_layer_block_placed(const layout_sim *s, const layout_sim_params *p, const cluster_gpu *gpu, double f,
                                   layer_cost *blk, double *lf) {
    const gpt_config *cfg = s->cfg;
    const layout *l = s->l;
    const double rows = moe_tokens_in(cfg, l) * cfg->top_k * l->etp * f;
    moe_loads ld = {&rows, 1, NULL, 0, -1.0};
    moe_layer_time t;
    *lf = f;
    *blk = (layer_cost){0};
    if (moe_layer_time_us(gpu, cfg, l, &p->moe, &p->compute, &ld, &t) != PL_OK) {
        moe_params mp = p->moe;
        mp.imbalance = f;
        moe_block_compute_cost(gpu, cfg, l, &p->compute, &mp, blk);
        return;
    }
    blk->fwd_us = t.fwd_us;
    blk->bwd_us = t.bwd_us;
    blk->fwd_flops = t.fwd_flops;
    blk->recompute_us = l->recompute == RECOMPUTE_FULL ? t.fwd_us : 0.0;
}

/* An MoE model's chunks (after the dense pass above): each MoE layer's
 * MLP becomes the MoE block (moe_compute.h: balanced loads at the load
 * factor, or the layer's measured histogram), the dense layers keep
 * theirs; per MoE layer a dispatch and a combine in forward, the same in
 * backward (and the forward's again under full recomputation), times the
 * layer's load factor (the busiest rank's share), as the "ep" part. The
 * per-layer figures the trace and the buckets use become the chunk's
 * means. Split orders: W of an MoE layer is its attention's weight
 * gradients (the dense rule's share of the layer without its MLP) and the
 * MoE block's wgrad (router, experts, shared experts). Under sequence
 * parallelism an MoE layer without shared experts keeps only its
 * attention's tensor-parallel gather and reduce-scatter (Megatron-Core's
 * token dispatchers move the tokens over the expert groups). */
static void moe_chunk_costs(layout_sim *s, const layout_sim_params *p) {
    const layout *l = s->l;
    const gpt_config *cfg = s->cfg;
    const int K = s->K, full = l->recompute == RECOMPUTE_FULL, sp = l->sp && l->tp > 1;
    const double cs = p->collective_scale;
    /* an expert placement's per-layer load factors (layout_sim.h): for this layout's ep and model only */
    const int n_moe = gpt_moe_layers_in(cfg, 0, cfg->n_layers);
    const int placed = p->moe_layer_load && p->moe_layer_load_ep == l->ep && p->moe_layer_load_n == n_moe &&
                       !(p->moe.capacity_factor > 0);
    layer_cost with = {0}, without = {0}, blk = {0};
    moe_layer_time bal = {0};
    double lf_bal = 1.0;
    const cluster_gpu *last_gpu = NULL;
    for (int k = 0, first = 0; k < K; first += s->chunk_layers[k], k++) {
        if (ls_first(s, k)) first = 0;
        const int r = ls_rank_of(s, k), L = s->chunk_layers[k], nm = s->chunk_moe[k];
        if (s->gpu[r] != last_gpu) {
            layer_compute_cost_mlp(s->gpu[r], cfg, l, &p->compute, 1, &with);
            layer_compute_cost_mlp(s->gpu[r], cfg, l, &p->compute, 0, &without);
            moe_layer_block(s, p, s->gpu[r], -1, &blk, &lf_bal);
            if (moe_layer_time_us(s->gpu[r], cfg, l, &p->moe, &p->compute, NULL, &bal) != PL_OK) bal = (moe_layer_time){0};
            last_gpu = s->gpu[r];
        }
        ls_chunk_cost *c = &s->cost[k];
        double df = 0, db = 0, dr = 0, disp = 0, wg = 0;
        const int first_moe = gpt_moe_layers_in(cfg, 0, first);
        for (int i = 0; i < nm; i++) {
            layer_cost b = blk;
            double lf = lf_bal, w = bal.us[MOE_T_ROUTER][MOE_PASS_WGRAD] + bal.us[MOE_T_EXPERTS][MOE_PASS_WGRAD] +
                                    bal.us[MOE_T_SHARED][MOE_PASS_WGRAD];
            if (placed) { /* the placement's factor: the busiest rank takes f x the mean rows */
                moe_layer_block_placed(s, p, s->gpu[r], p->moe_layer_load[first_moe + i], &b, &lf);
                w *= bal.bwd_us > 0 ? b.bwd_us / bal.bwd_us : 1.0;
            } else if (p->moe.hist) {
                moe_layer_block(s, p, s->gpu[r], first_moe + i, &b, &lf);
                w *= bal.bwd_us > 0 ? b.bwd_us / bal.bwd_us : 1.0;
            }
            df += without.fwd_us + b.fwd_us - with.fwd_us;
            db += without.bwd_us + b.bwd_us - with.bwd_us;
            dr += without.recompute_us + b.recompute_us - with.recompute_us;
            disp += cs * lf * s->ep_disp[r];
            wg += w;
        }
        if ((l->mem & LAYOUT_MEM_MTP_LAST) && ls_last(s, k)) {
            /* DeepSeek's multi-token-prediction module on the last stage (mem=mtp_last): one more MoE
             * layer (its attention and MoE block) and the shared head and loss once more */
            layer_cost hc;
            head_compute_cost(s->gpu[r], cfg, l, &p->compute, &hc);
            df += without.fwd_us + blk.fwd_us + p->emb_head_scale * hc.fwd_us;
            db += without.bwd_us + blk.bwd_us + p->emb_head_scale * hc.bwd_us;
            dr += without.recompute_us + blk.recompute_us;
            disp += cs * lf_bal * s->ep_disp[r];
        }
        /* the routed experts' MLP moves no tensor-parallel activations: under sequence parallelism
         * Megatron-Core's MoE layer routes each rank's own 1/tp of the tokens (its dispatchers work
         * over the expert groups, ep x etp), so of the dense layer's two gathers and two
         * reduce-scatters only the attention's remain; shared experts are a tensor-parallel MLP
         * (SharedExpertMLP: the same gather and reduce-scatter over tp), so they keep the MLP's */
        if (sp && cfg->shared_d_ff == 0 && nm > 0) {
            const double mlp_f = cs * ((s->tp_ag8 ? s->tp_ag8[r] : s->tp_ag[r]) + s->tp_rs[r]);
            const double mlp_b = cs * (s->tp_ag[r] + s->tp_rs[r]) + (full ? mlp_f : 0.0);
            c->f_tp -= nm * mlp_f;
            c->b_tp -= nm * mlp_b;
            if (L > 0) {
                c->f_ltp -= nm * mlp_f / L;
                c->b_ltp -= nm * mlp_b / L;
                c->b_layer -= nm * mlp_b / L;
            }
        }
        c->f_comp += df;
        c->b_comp += db;
        c->b_recomp += dr;
        c->f_ep = 2.0 * disp;
        c->b_ep = 2.0 * disp * (full ? 2.0 : 1.0);
        c->f_us = c->f_comp + c->f_tp + c->f_cp + c->f_ep;
        c->b_us = c->b_comp + c->b_recomp + c->b_tp + c->b_cp + c->b_ep;
        if (L > 0) {
            c->f_lcomp += (df + c->f_ep) / L;
            c->b_layer += (db + dr + c->b_ep) / L;
        }
        if (s->split && nm > 0 && with.bwd_us > 0) {
            /* the dense rule gave each layer W = with.bwd x share; an MoE layer keeps its attention's part
             * (without.bwd at the same share) and adds the block's wgrad */
            const double share = s->w_layer_share;
            s->w_us[k] += nm * (without.bwd_us * share - with.bwd_us * share) + wg;
            if (s->w_us[k] < 0) s->w_us[k] = 0;
        }
    }
}

/* mem=norm_mla (DeepSeek-V3 report, section 3.2.3): a layer's backward
 * first recomputes its RMSNorms (a read and a write of each norm's input,
 * the two of the layer and MLA's q and kv latent norms) and MLA's
 * up-projections (q: the q latent to a (dqk) per token, kv: the kv latent
 * to a (nope + dv), split by tp); 0 without it. */
static double norm_mla_recompute_us(const cluster_gpu *gpu, const gpt_config *cfg, const layout *l,
                                    const compute_params *cp) {
    if (!(l->mem & LAYOUT_MEM_NORM_MLA) || !gpt_is_mla(cfg)) return 0.0;
    const int64_t t = l->tp > 0 ? l->tp : 1, c = l->cp > 0 ? l->cp : 1, b = l->micro_batch > 0 ? l->micro_batch : 1;
    const int64_t T = b * ((cfg->seq_len + c - 1) / c), a = cfg->n_heads;
    const double e = l->prec == PRECISION_FP8 ? 2.0 : precision_act_bytes(l->prec);
    double us = memory_time_us(gpu, 2.0 * e * (double)T * (2.0 * cfg->d_model + cfg->q_lora_rank + cfg->kv_lora_rank), cp);
    if (cfg->q_lora_rank > 0)
        us += gemm_time_us(gpu, l->prec, T, a * (cfg->qk_nope_dim + cfg->qk_rope_dim) / t, cfg->q_lora_rank, cp);
    us += gemm_time_us(gpu, l->prec, T, a * (cfg->qk_nope_dim + cfg->v_head_dim) / t, cfg->kv_lora_rank, cp);
    return us;
}

/* The chunks' op durations and parts at parameters p. */
void ls_chunk_costs(layout_sim *s, const layout_sim_params *p) {
    const layout *l = s->l;
    const int K = s->K, pp = s->pp, sp = l->sp && l->tp > 1, full = l->recompute == RECOMPUTE_FULL;
    const double cs = p->collective_scale, e = p->emb_head_scale;
    layer_cost lc = {0}, ec = {0}, hc = {0};
    const cluster_gpu *last_gpu = NULL;
    for (int k = 0; k < K; k++) {
        const int r = ls_rank_of(s, k), L = s->chunk_layers[k];
        if (s->gpu[r] != last_gpu) {
            layer_compute_cost(s->gpu[r], s->cfg, l, &p->compute, &lc);
            embedding_compute_cost(s->gpu[r], s->cfg, l, &p->compute, &ec);
            head_compute_cost(s->gpu[r], s->cfg, l, &p->compute, &hc);
            lc.recompute_us += norm_mla_recompute_us(s->gpu[r], s->cfg, l, &p->compute);
            last_gpu = s->gpu[r];
        }
        const double tp_f16 = cs * (sp ? 2.0 * (s->tp_ag[r] + s->tp_rs[r]) : 2.0 * s->tp_ar[r]);
        /* FP8 (fp8.h): the forward's two gathers in FP8; the backward as bf16 */
        const double tp_f = (sp && s->tp_ag8) ? cs * 2.0 * (s->tp_ag8[r] + s->tp_rs[r]) : tp_f16;
        const double tp_b = tp_f16 + (full ? tp_f : 0.0);
        const double cp_f = cs * s->cp_ag[r], cp_b = cs * s->cp_rs[r] + (full ? cp_f : 0.0);
        /* a pipeline message arrives as 1/tp of the activation; without sp it is all-gathered */
        const double recv_ag = (!sp && l->tp > 1 && pp > 1) ? cs * s->tp_ag[r] : 0.0;
        ls_chunk_cost *c = &s->cost[k];
        const int fst = ls_first(s, k), lst = ls_last(s, k);
        c->f_comp = L * lc.fwd_us + (fst ? e * ec.fwd_us : 0.0) + (lst ? e * hc.fwd_us : 0.0);
        c->f_tp = L * tp_f + (fst ? e * cs * (sp ? s->tp_rs[r] : s->tp_ar[r]) : 0.0) +
                  (lst ? e * cs * ((sp ? s->tp_ag[r] : 0.0) + s->tp_ce[r]) : 0.0) + (!fst ? recv_ag : 0.0);
        c->f_cp = L * cp_f;
        c->b_comp = L * lc.bwd_us + (fst ? e * ec.bwd_us : 0.0) + (lst ? e * hc.bwd_us : 0.0);
        c->b_recomp = L * lc.recompute_us + (fst ? e * ec.recompute_us : 0.0) +
                      (lst ? e * hc.recompute_us : 0.0);
        const double head_tp = lst ? e * cs * (sp ? s->tp_rs[r] : s->tp_ar[r]) : 0.0;
        c->b_tp = L * tp_b + head_tp + (fst && sp ? e * cs * s->tp_ag[r] : 0.0) + (!lst ? recv_ag : 0.0);
        c->b_cp = L * cp_b;
        c->b_head = (!lst ? recv_ag : 0.0) +
                    (lst ? e * (hc.bwd_us + hc.recompute_us) + head_tp : 0.0);
        c->b_layer = lc.bwd_us + lc.recompute_us + tp_b + cp_b;
        c->f_pre = (fst ? e * (ec.fwd_us + cs * (sp ? s->tp_rs[r] : s->tp_ar[r])) : 0.0) + (!fst ? recv_ag : 0.0);
        c->f_lcomp = lc.fwd_us;
        c->f_ltp = tp_f;
        c->f_lcp = cp_f;
        c->b_ltp = tp_b;
        c->b_lcp = cp_b;
        c->f_us = c->f_comp + c->f_tp + c->f_cp;
        c->b_us = c->b_comp + c->b_recomp + c->b_tp + c->b_cp;
        /* ---- split orders: the layer's backward GEMMs split into input- and
         * weight-gradient GEMMs. A layer's weight-gradient GEMMs (dW = dY^T X
         * for qkv, the projection, the MLP's) repeat its forward GEMMs' FLOPs;
         * its backward also has the input-gradient GEMMs (as many) and the
         * attention core's backward (2.5x its forward: dS, dQ, dK, dV and the
         * softmax): W = G / (2G + 2.5A) of the layer's backward compute, G and
         * A the forward FLOPs of the GEMMs and of the causal core; the head
         * splits in halves; TP and CP collectives, recomputation and the
         * embedding stay in B. */
        s->w_us[k] = 0.0;
        if (s->split) {
            const gpt_config *cf = s->cfg;
            const double C = cf->d_model, T = cf->seq_len, hd = C / cf->n_heads;
            const double kv = gpt_kv_heads(cf) * hd, F = cf->d_ff > 0 ? cf->d_ff : 4.0 * C;
            const double G = 2.0 * (C * (C + 2.0 * kv) + C * C + (cf->mlp == MLP_SWIGLU ? 3.0 : 2.0) * C * F);
            const double A = 2.0 * T * C; /* QK^T and AV, causal half, per token */
            s->w_layer_share = G / (2.0 * G + 2.5 * A);
            s->w_us[k] = L * lc.bwd_us * s->w_layer_share + (ls_last(s, k) ? 0.5 * e * hc.bwd_us : 0.0);
        }
    }
    if (s->moe) moe_chunk_costs(s, p);
}
