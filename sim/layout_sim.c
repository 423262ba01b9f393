/*
 * layout_sim.c: one training step of a parallel layout, as a discrete-event
 * simulation of one pipeline replica (layout_sim.h says what is modelled;
 * this comment says how).
 *
 * Devices and streams. The devices are the pp pipeline stages of the
 * replica whose tp, cp and dp coordinates are 0; stage s is GPU
 * layout_rank_of(0, 0, 0, s), so what its sends and collectives cross
 * follows the rank grid (tp innermost, then cp, dp, pp). Each stage has
 *   - a compute stream, in order, running the stage's schedule order of
 *     chunk forwards F(k, j) and backwards B(k, j) (chunk k of the pipeline's
 *     pp * vp in model order, micro-batch j); the order is Megatron-LM's
 *     (sim_pipeline.h, shared with the placement simulator): 1F1B for
 *     vp = 1, interleaved 1F1B for vp > 1. Megatron's tensor-parallel
 *     collectives and context parallel's key/value all-gathers are blocking
 *     on this stream (Megatron runs them on the compute stream), so they add
 *     to the op's duration and are counted apart (tp, cp);
 *   - one FIFO send queue per direction (to the next chunk's stage, to the
 *     previous one): a chunk's output activation (forward) or input gradient
 *     (backward) leaves when the op ends, once the queue is free, and takes
 *     p2p_time_us between the two stages' GPUs. Bytes: micro-batch x
 *     seq/cp x hidden / tp (Megatron's scatter-gather of pipeline
 *     messages; with sp the message is the sequence shard itself); without
 *     sp the receiver all-gathers it over its tp group (counted as tp);
 *   - a data-parallel reduction stream: gradients in buckets of
 *     dp_bucket_bytes (parameters in backward order, never split), each
 *     reduced (all-reduce; reduce-scatter for zero >= 1 and fsdp) over the
 *     stage's dp group as soon as the last micro-batch's backward of its
 *     chunk has produced it (dp_overlap_grad = 1), or all after the stage's
 *     last backward (0: Megatron's "local" DDP of SC21). Zero 3 reduces
 *     after every micro-batch (DeepSpeed stage 3). A tied embedding's
 *     gradient is then all-reduced between the first and last stage;
 *   - a data-parallel gather stream: zero 3 all-gathers a chunk's
 *     parameters before each of its forwards and backwards, fsdp (weights
 *     kept from forward to backward) before its first forward only, zero 1
 *     and 2 gather the previous step's updated parameters before the
 *     chunk's first forward (dp_overlap_param = 1; 0: after the optimizer,
 *     exposed). Gathers go layer by layer (the embedding, each layer, the
 *     head): a layer's compute waits for its gather, which may start once
 *     the previous layer's compute has started (prefetch depth 1, as
 *     FSDP's); the op's gradient buckets keep their unstalled offsets.
 *     Gathers and reductions do not slow each other (separate streams;
 *     shared links not modelled).
 * After its last op a stage waits for its reductions, then runs the
 * optimizer on the parameters it owns (its shard for zero >= 1).
 *
 * Costs. Per-layer forward and backward compute come from compute_model.h
 * (one call per stage GPU type and run), the embedding with the first
 * chunk, final norm + head + loss with the last. Per layer, forward:
 * 2 all-reduces of the activation (micro-batch x seq/cp x hidden x
 * precision bytes) over the tp group, or with sp 2 all-gathers + 2
 * reduce-scatters; backward the same, plus the forward's again under full
 * recomputation (the recomputed forward repeats its collectives). Embedding:
 * one all-reduce (sp: reduce-scatter) forward, (sp: an all-gather)
 * backward. Head: sp all-gathers its input forward; its input gradient is
 * all-reduced (sp: reduce-scattered) backward; the vocabulary-parallel
 * cross entropy all-reduces 3 fp32 values per token forward. Context
 * parallelism (all-gather based, as Llama 3): per layer forward an
 * all-gather of the keys and values over the cp group, backward a
 * reduce-scatter of their gradients (and the all-gather again under full
 * recomputation). Every collective from collective.h, times
 * collective_scale; every send times p2p_scale.
 *
 * Breakdown (parts_us), for the critical stage (the one that ends last):
 * compute (incl. recompute), tp, cp (on its compute stream), dp (its waits
 * for parameter gathers and for the reductions before the optimizer, and an
 * exposed post-optimizer gather), optimizer, and its idle time waiting for
 * pipeline data, split into bubble (the idle time the same stage has when
 * the step is simulated again with free pipeline sends) and pp (the rest).
 * compute + tp + cp + dp + pp + bubble + optimizer = step_us -
 * step_fixed_us, exactly.
 *
 * Memory: layout_stage_memory_p per stage with the stash the simulated
 * order reached (the most chunk forwards whose backward had not yet run),
 * the worst stage reported, OOM against its GPU's memory.
 *
 * Hot path: layout_sim_run allocates nothing unless it traces; everything
 * that depends only on the model, layout and cluster (groups, collective
 * times, buckets, orders) is computed once by layout_sim_create.
 */
#include "layout_sim.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"
#include "sim_pipeline.h"

#define LS_MAX_BUCKETS_PER_CHUNK 4096

/* One bucket of a chunk's gradients: ready after `units` backward units of
 * the chunk (unit 0 the head, 1..L the layers from the last, L+1 the
 * embedding), reduced in `us`. */
typedef struct {
    int units;
    double bytes;
    double us;
} ls_bucket;

/* What one chunk's ops cost at the current parameters. */
typedef struct {
    double f_us, b_us;                 /* op durations */
    double f_comp, f_tp, f_cp;         /* parts of the forward */
    double b_comp, b_recomp, b_tp, b_cp; /* parts of the backward */
    double b_head, b_layer;            /* backward: head unit, one layer (for bucket times) */
    double f_pre;                      /* forward: before the first layer (embedding, a received message) */
    double f_lcomp, f_ltp, f_lcp;      /* forward: one layer's compute, TP, CP */
    double b_ltp, b_lcp;               /* backward: one layer's TP, CP (compute: b_layer minus these) */
} ls_chunk_cost;

/* A trace event. track: 0 compute, 1 send to the next chunk, 2 send to the
 * previous chunk, 3 dp reduction, 4 dp gather, 5 optimizer, 6 a layer's TP
 * collectives, 7 its CP all-gather (both inside the compute op). */
typedef struct {
    int stage, track, chunk, mb, layer; /* layer -1: the whole op */
    char what;                          /* 'F', 'B', 't' (tp), 'c' (cp), 'a' (act), 'g' (grad), 'r', 'G', 'o' */
    double t0, t1;
} ls_event;

struct layout_sim {
    const gpt_config *cfg;
    const layout *l;
    const cluster *c;           /* &cl */
    cluster cl;                 /* the caller's cluster, copied (see layout_sim_create) */
    int pp, vp, K, m;
    int *chunk_layers;          /* [K] */
    int *stage_layers;          /* [pp] */
    int64_t *stage_rank;        /* [pp] GPU of stage s */
    const cluster_gpu **gpu;    /* [pp] */
    pipe_op *order;             /* [pp * 2 vp m] */
    int n_ops_stage;            /* 2 vp m */
    /* collectives (unscaled us), per stage */
    double *tp_ar, *tp_ag, *tp_rs, *tp_ce, *cp_ag, *cp_rs; /* [pp] */
    double *send_fwd, *send_bwd; /* [pp] a send from s to the next / previous chunk's stage */
    double *opt_params;          /* [pp] parameters the optimizer updates on s */
    int64_t *stage_params;       /* [pp] parameters of s's chunks (after tp) */
    double *ag_chunk;            /* [K] gather of chunk k's parameters over dp */
    double *ag_layer, *ag_emb, *ag_head; /* [pp] gather of one layer's / the embedding's / the head's parameters */
    ls_bucket *buckets;          /* buckets of every chunk */
    int *bk_start;               /* [K+1] */
    double emb_ar_us;            /* tied-embedding gradient all-reduce first <-> last stage (0: none) */
    coll_estimate est_tp_ar, est_tp_ag, est_tp_rs, est_cp, est_dp, est_dp_ag;
    double pp_bytes;             /* one pipeline message */
    int64_t layer_params;        /* one layer's parameters (whole, before tp) */
    int64_t emb_params, head_params, head_held; /* head_held: the last chunk's head part (a tied copy included) */
    double *free_wait;           /* [pp] idle waiting for data with free sends */
    double *ready;               /* [pp] when the optimizer may start */
    int64_t *chunk_params;       /* [K] parameters of chunk k (after tp) */
    int64_t *grp;                /* scratch: one group's ranks */
    double param_bytes_used;     /* bytes per parameter a gather moves */
    double bk_bucket_bytes, bk_grad_bytes; /* what the buckets were built for (0: not yet) */
    int n_buckets, cap_buckets;
    /* run state */
    ls_chunk_cost *cost;         /* [K] */
    double *farr, *barr;         /* [K m] arrival of F's input / B's output gradient at the op's stage; < 0 unknown */
    int *pos;                    /* [pp] */
    double *ct, *lf, *lb, *dpr, *dpg, *prev_start; /* [pp] */
    double *p_comp, *p_recomp, *p_tp, *p_cp, *p_dp, *p_wait, *p_opt, *end; /* [pp] */
    double *last_bwd_start;      /* [pp] */
    int *stash, *stash_max;      /* [pp] layers stashed */
    int *nstash, *nstash_max;    /* [pp] chunk micro-batches stashed */
    /* trace */
    int tracing;
    ls_event *ev;
    int n_ev, cap_ev;
    int have_trace;
    int trace_failed;
};

void layout_sim_params_default(layout_sim_params *p) {
    compute_params_default(&p->compute);
    p->collective_scale = 1.0;
    p->step_fixed_us = 0.0;
    p->p2p_scale = 1.0;
    p->dp_bucket_bytes = 25e6;
    p->dp_overlap_grad = 1;
    p->dp_overlap_param = 1;
    p->grad_comm_bytes = 4;
    p->emb_head_scale = 1.0;
}

const char *layout_time_part_name(layout_time_part p) {
    static const char *const names[LAYOUT_T_COUNT] = {"compute", "recompute", "tp", "cp",
                                                      "dp",      "pp",        "bubble", "optimizer"};
    return (p >= 0 && p < LAYOUT_T_COUNT) ? names[p] : "unknown";
}

static void set_msg(char *msg, size_t len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void set_msg(char *msg, size_t len, const char *fmt, ...) {
    if (!msg || len == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
}

/* ---- model facts -------------------------------------------------------- */

int64_t layout_layer_params(const gpt_config *cfg) {
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

void layout_model_flops(const gpt_config *cfg, const layout *l, double *model, double *hw) {
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
    free(s->tp_ar); free(s->tp_ag); free(s->tp_rs); free(s->tp_ce); free(s->cp_ag); free(s->cp_rs);
    free(s->send_fwd); free(s->send_bwd); free(s->opt_params); free(s->stage_params); free(s->ag_chunk);
    free(s->ag_layer); free(s->ag_emb); free(s->ag_head);
    free(s->buckets); free(s->bk_start); free(s->cost); free(s->farr); free(s->barr); free(s->pos);
    free(s->ct); free(s->lf); free(s->lb); free(s->dpr); free(s->dpg); free(s->prev_start);
    free(s->p_comp); free(s->p_recomp); free(s->p_tp); free(s->p_cp); free(s->p_dp); free(s->p_wait);
    free(s->p_opt); free(s->end); free(s->last_bwd_start); free(s->stash); free(s->stash_max); free(s->ev);
    free(s->chunk_params); free(s->grp); free(s->nstash); free(s->nstash_max); free(s->free_wait); free(s->ready);
    free(s);
}

#define LS_ALLOC(ptr, count) (((ptr) = calloc((size_t)(count) > 0 ? (size_t)(count) : 1, sizeof *(ptr))) == NULL)

/* Collective k over dimension d's group of rank r (0 when the group has one member). */
static pl_status group_coll(const layout_sim *s, int64_t rank, layout_dim d, coll_kind k, double bytes, int64_t *buf,
                            coll_estimate *e) {
    const int n = layout_group_ranks(s->l, rank, d, buf);
    return coll_time(s->c, k, buf, n, bytes, e);
}

pl_status layout_sim_create(const gpt_config *cfg, const layout *l, const cluster *c, layout_sim **out, char *msg,
                            size_t len) {
    if (!out) return PL_ERR_INVALID;
    *out = NULL;
    if (!cfg || !l || !c) {
        set_msg(msg, len, "layout_sim_create: NULL argument");
        return PL_ERR_INVALID;
    }
    char m2[256];
    if (cluster_validate(c, m2, sizeof m2) != PL_OK) {
        set_msg(msg, len, "cluster %s: %s", c->name, m2);
        return PL_ERR_INVALID;
    }
    if (layout_validate(l, cfg, cluster_n_gpus(c), m2, sizeof m2) != PL_OK) {
        set_msg(msg, len, "%s", m2);
        return PL_ERR_INVALID;
    }
    const int pp = l->pp, vp = l->vp, K = pp * vp, m = layout_micro_batches(l);
    if (m < 1 || (long)K * m > 50000000L || (long)pp * 2 * vp * m > 50000000L) {
        set_msg(msg, len, "layout too large to simulate: %d chunks x %d micro-batches", K, m);
        return PL_ERR_INVALID;
    }
    layout_sim *s = calloc(1, sizeof *s);
    if (!s) return PL_ERR_NOMEM;
    s->cfg = cfg;
    s->l = l;
    /* A one-node cluster may have no network at all (h200x2: nics 0); the
     * cost model asks for one even for groups inside the node, so give it
     * the node's own fabric, which no transfer can then use. */
    s->cl = *c;
    if (cluster_n_gpus(c) <= c->gpus_per_node && (s->cl.nics_per_node < 1 || !(s->cl.nic_bw > 0))) {
        s->cl.nics_per_node = 1;
        s->cl.nic_bw = c->intra_bw;
    }
    c = &s->cl;
    s->c = c;
    s->pp = pp;
    s->vp = vp;
    s->K = K;
    s->m = m;
    s->n_ops_stage = 2 * vp * m;
    const int64_t world = layout_world_size(l);
    const int gmax = l->tp > l->dp ? (l->tp > l->cp ? l->tp : l->cp) : (l->dp > l->cp ? l->dp : l->cp);
    pl_status st = PL_ERR_NOMEM;
    if (LS_ALLOC(s->chunk_layers, K) || LS_ALLOC(s->stage_layers, pp) || LS_ALLOC(s->stage_rank, pp) ||
        LS_ALLOC(s->gpu, pp) || LS_ALLOC(s->order, (size_t)pp * s->n_ops_stage) || LS_ALLOC(s->tp_ar, pp) ||
        LS_ALLOC(s->tp_ag, pp) || LS_ALLOC(s->tp_rs, pp) || LS_ALLOC(s->tp_ce, pp) || LS_ALLOC(s->cp_ag, pp) ||
        LS_ALLOC(s->cp_rs, pp) || LS_ALLOC(s->send_fwd, pp) || LS_ALLOC(s->send_bwd, pp) ||
        LS_ALLOC(s->opt_params, pp) || LS_ALLOC(s->stage_params, pp) || LS_ALLOC(s->ag_chunk, K) || LS_ALLOC(s->ag_layer, pp) || LS_ALLOC(s->ag_emb, pp) ||
        LS_ALLOC(s->ag_head, pp) ||
        LS_ALLOC(s->bk_start, K + 1) || LS_ALLOC(s->cost, K) || LS_ALLOC(s->farr, (size_t)K * m) ||
        LS_ALLOC(s->barr, (size_t)K * m) || LS_ALLOC(s->pos, pp) || LS_ALLOC(s->ct, pp) || LS_ALLOC(s->lf, pp) ||
        LS_ALLOC(s->lb, pp) || LS_ALLOC(s->dpr, pp) || LS_ALLOC(s->dpg, pp) || LS_ALLOC(s->prev_start, pp) ||
        LS_ALLOC(s->p_comp, pp) || LS_ALLOC(s->p_recomp, pp) || LS_ALLOC(s->p_tp, pp) || LS_ALLOC(s->p_cp, pp) ||
        LS_ALLOC(s->p_dp, pp) || LS_ALLOC(s->p_wait, pp) || LS_ALLOC(s->p_opt, pp) || LS_ALLOC(s->end, pp) ||
        LS_ALLOC(s->last_bwd_start, pp) || LS_ALLOC(s->stash, pp) || LS_ALLOC(s->stash_max, pp) ||
        LS_ALLOC(s->chunk_params, K) || LS_ALLOC(s->grp, gmax > 2 ? gmax : 2) || LS_ALLOC(s->free_wait, pp) ||
        LS_ALLOC(s->ready, pp) || LS_ALLOC(s->nstash, pp) || LS_ALLOC(s->nstash_max, pp))
        goto fail;
    st = layout_chunk_layers(l, cfg->n_layers, s->chunk_layers, m2, sizeof m2);
    if (st != PL_OK) {
        set_msg(msg, len, "%s", m2);
        goto fail;
    }
    for (int k = 0; k < K; k++) s->stage_layers[k % pp] += s->chunk_layers[k];
    for (int r = 0; r < pp; r++) {
        layout_coords co;
        memset(&co, 0, sizeof co);
        co.c[LAYOUT_DIM_PP] = r;
        s->stage_rank[r] = layout_rank_of(l, &co);
        s->gpu[r] = cluster_gpu_of(c, s->stage_rank[r]);
        pipe_order_rank(pp, r, vp, m, s->order + (size_t)r * s->n_ops_stage);
    }
    (void)world;

    /* message sizes */
    const double ab = precision_act_bytes(l->prec);
    const double tok = (double)l->micro_batch * cfg->seq_len / l->cp; /* tokens per micro-batch on one GPU */
    const double act = tok * cfg->d_model * ab;
    const double hd = (double)cfg->d_model / cfg->n_heads;
    const double kv_full = (double)l->micro_batch * cfg->seq_len * 2.0 * ((double)gpt_kv_heads(cfg) / l->tp) * hd * ab;
    s->pp_bytes = act / l->tp;
    s->layer_params = layout_layer_params(cfg);
    emb_head_params(cfg, &s->emb_params, &s->head_params);
    /* Megatron keeps a copy of a tied embedding on the last stage for the head */
    int64_t head_held = s->head_params + (cfg->tied && pp > 1 ? (int64_t)gpt_vocab_padded(cfg) * cfg->d_model : 0);
    if (cfg->tied && pp == 1) head_held = s->head_params;
    s->head_held = head_held;
    s->param_bytes_used = ab < 2 ? 2 : ab; /* fp8 keeps bf16 weights */

    for (int r = 0; r < pp; r++) {
        const int64_t rank = s->stage_rank[r];
        coll_estimate e;
        if ((st = group_coll(s, rank, LAYOUT_DIM_TP, COLL_ALL_REDUCE, act, s->grp, &e)) != PL_OK) goto coll_fail;
        s->tp_ar[r] = e.time_us;
        if (r == 0) s->est_tp_ar = e;
        if ((st = group_coll(s, rank, LAYOUT_DIM_TP, COLL_ALL_GATHER, act, s->grp, &e)) != PL_OK) goto coll_fail;
        s->tp_ag[r] = e.time_us;
        if (r == 0) s->est_tp_ag = e;
        if ((st = group_coll(s, rank, LAYOUT_DIM_TP, COLL_REDUCE_SCATTER, act, s->grp, &e)) != PL_OK) goto coll_fail;
        s->tp_rs[r] = e.time_us;
        if (r == 0) s->est_tp_rs = e;
        if ((st = group_coll(s, rank, LAYOUT_DIM_TP, COLL_ALL_REDUCE, tok * 4.0, s->grp, &e)) != PL_OK) goto coll_fail;
        s->tp_ce[r] = 3.0 * e.time_us;
        if ((st = group_coll(s, rank, LAYOUT_DIM_CP, COLL_ALL_GATHER, kv_full, s->grp, &e)) != PL_OK) goto coll_fail;
        s->cp_ag[r] = e.time_us;
        if (r == 0) s->est_cp = e;
        if ((st = group_coll(s, rank, LAYOUT_DIM_CP, COLL_REDUCE_SCATTER, kv_full, s->grp, &e)) != PL_OK) goto coll_fail;
        s->cp_rs[r] = e.time_us;
        /* sends: chunk k on r goes to chunk k+1 on (r+1) mod pp, and back */
        const int nx = (r + 1) % pp, pv = (r + pp - 1) % pp;
        s->send_fwd[r] = nx == r ? 0.0 : p2p_time_us(c, rank, s->stage_rank[nx], s->pp_bytes);
        s->send_bwd[r] = pv == r ? 0.0 : p2p_time_us(c, rank, s->stage_rank[pv], s->pp_bytes);
    }
    /* parameters per chunk and stage (after the tp split) */
    int64_t *chunk_params = s->chunk_params;
    for (int k = 0; k < K; k++) {
        int64_t p = (int64_t)s->chunk_layers[k] * s->layer_params;
        if (k == 0) p += s->emb_params;
        if (k == K - 1) p += head_held;
        chunk_params[k] = p / l->tp;
        s->stage_params[k % pp] += chunk_params[k];
    }
    const int sharded = l->dp > 1 && l->zero != ZERO_NONE;
    for (int r = 0; r < pp; r++)
        s->opt_params[r] = sharded ? (double)s->stage_params[r] / l->dp : (double)s->stage_params[r];
    /* parameter gathers over the dp group (zero >= 1, fsdp) */
    for (int k = 0; k < K; k++) {
        coll_estimate e;
        if ((st = group_coll(s, s->stage_rank[k % pp], LAYOUT_DIM_DP, COLL_ALL_GATHER,
                             (double)chunk_params[k] * s->param_bytes_used, s->grp, &e)) != PL_OK)
            goto coll_fail;
        s->ag_chunk[k] = e.time_us;
    }
    for (int r = 0; r < pp; r++) {
        const double unit[3] = {(double)s->layer_params / l->tp, (double)s->emb_params / l->tp,
                                (double)head_held / l->tp};
        double *dst[3] = {&s->ag_layer[r], &s->ag_emb[r], &s->ag_head[r]};
        for (int u = 0; u < 3; u++) {
            coll_estimate e;
            if ((st = group_coll(s, s->stage_rank[r], LAYOUT_DIM_DP, COLL_ALL_GATHER, unit[u] * s->param_bytes_used,
                                 s->grp, &e)) != PL_OK)
                goto coll_fail;
            *dst[u] = e.time_us;
        }
    }
    {
        coll_estimate e;
        if ((st = group_coll(s, s->stage_rank[0], LAYOUT_DIM_DP, COLL_ALL_GATHER,
                             (double)s->stage_params[0] * s->param_bytes_used, s->grp, &e)) != PL_OK)
            goto coll_fail;
        s->est_dp_ag = e;
    }
    /* a tied embedding's gradient: first <-> last stage */
    if (cfg->tied && pp > 1) {
        int64_t two[2] = {s->stage_rank[0], s->stage_rank[pp - 1]};
        coll_estimate e;
        if ((st = coll_time(c, COLL_ALL_REDUCE, two, 2,
                            (double)gpt_vocab_padded(cfg) * cfg->d_model / l->tp * 4.0, &e)) != PL_OK)
            goto coll_fail;
        s->emb_ar_us = e.time_us;
    }
    *out = s;
    return PL_OK;

coll_fail:
    set_msg(msg, len, "collective model failed for this layout (status %d)", (int)st);
fail:
    layout_sim_destroy(s);
    if (st == PL_ERR_NOMEM) set_msg(msg, len, "out of memory");
    return st == PL_OK ? PL_ERR_INVALID : st;
}

/* ---- per-run costs -------------------------------------------------------- */

/* Gradient buckets of every chunk for p's bucket size and gradient bytes
 * (rebuilt only when those change: the one allocation a run may make). */
static pl_status ensure_buckets(layout_sim *s, const layout_sim_params *p) {
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
            const int L = s->chunk_layers[k], r = k % s->pp;
            double acc = 0;
            int last_unit = 0;
            for (int u = 0; u <= L + 1; u++) {
                double prm = 0;
                if (u == 0) prm = k == K - 1 ? (double)s->head_held / l->tp : 0;
                else if (u <= L) prm = (double)s->layer_params / l->tp;
                else prm = k == 0 ? (double)s->emb_params / l->tp : 0;
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
    coll_estimate e;
    pl_status st = group_coll(s, s->stage_rank[0], LAYOUT_DIM_DP, kind, (double)s->stage_params[0] * gb, s->grp, &e);
    if (st != PL_OK) return st;
    s->est_dp = e;
    s->bk_bucket_bytes = p->dp_bucket_bytes;
    s->bk_grad_bytes = p->grad_comm_bytes;
    return PL_OK;
}

/* The chunks' op durations and parts at parameters p. */
static void chunk_costs(layout_sim *s, const layout_sim_params *p) {
    const layout *l = s->l;
    const int K = s->K, pp = s->pp, sp = l->sp && l->tp > 1, full = l->recompute == RECOMPUTE_FULL;
    const double cs = p->collective_scale, e = p->emb_head_scale;
    layer_cost lc = {0}, ec = {0}, hc = {0};
    const cluster_gpu *last_gpu = NULL;
    for (int k = 0; k < K; k++) {
        const int r = k % pp, L = s->chunk_layers[k];
        if (s->gpu[r] != last_gpu) {
            layer_compute_cost(s->gpu[r], s->cfg, l, &p->compute, &lc);
            embedding_compute_cost(s->gpu[r], s->cfg, l, &p->compute, &ec);
            head_compute_cost(s->gpu[r], s->cfg, l, &p->compute, &hc);
            last_gpu = s->gpu[r];
        }
        const double tp_f = cs * (sp ? 2.0 * (s->tp_ag[r] + s->tp_rs[r]) : 2.0 * s->tp_ar[r]);
        const double tp_b = tp_f + (full ? tp_f : 0.0);
        const double cp_f = cs * s->cp_ag[r], cp_b = cs * s->cp_rs[r] + (full ? cp_f : 0.0);
        /* a pipeline message arrives as 1/tp of the activation; without sp it is all-gathered */
        const double recv_ag = (!sp && l->tp > 1 && pp > 1) ? cs * s->tp_ag[r] : 0.0;
        ls_chunk_cost *c = &s->cost[k];
        c->f_comp = L * lc.fwd_us + (k == 0 ? e * ec.fwd_us : 0.0) + (k == K - 1 ? e * hc.fwd_us : 0.0);
        c->f_tp = L * tp_f + (k == 0 ? e * cs * (sp ? s->tp_rs[r] : s->tp_ar[r]) : 0.0) +
                  (k == K - 1 ? e * cs * ((sp ? s->tp_ag[r] : 0.0) + s->tp_ce[r]) : 0.0) + (k > 0 ? recv_ag : 0.0);
        c->f_cp = L * cp_f;
        c->b_comp = L * lc.bwd_us + (k == 0 ? e * ec.bwd_us : 0.0) + (k == K - 1 ? e * hc.bwd_us : 0.0);
        c->b_recomp = L * lc.recompute_us + (k == 0 ? e * ec.recompute_us : 0.0) +
                      (k == K - 1 ? e * hc.recompute_us : 0.0);
        const double head_tp = k == K - 1 ? e * cs * (sp ? s->tp_rs[r] : s->tp_ar[r]) : 0.0;
        c->b_tp = L * tp_b + head_tp + (k == 0 && sp ? e * cs * s->tp_ag[r] : 0.0) + (k < K - 1 ? recv_ag : 0.0);
        c->b_cp = L * cp_b;
        c->b_head = (k < K - 1 ? recv_ag : 0.0) +
                    (k == K - 1 ? e * (hc.bwd_us + hc.recompute_us) + head_tp : 0.0);
        c->b_layer = lc.bwd_us + lc.recompute_us + tp_b + cp_b;
        c->f_pre = (k == 0 ? e * (ec.fwd_us + cs * (sp ? s->tp_rs[r] : s->tp_ar[r])) : 0.0) + (k > 0 ? recv_ag : 0.0);
        c->f_lcomp = lc.fwd_us;
        c->f_ltp = tp_f;
        c->f_lcp = cp_f;
        c->b_ltp = tp_b;
        c->b_lcp = cp_b;
        c->f_us = c->f_comp + c->f_tp + c->f_cp;
        c->b_us = c->b_comp + c->b_recomp + c->b_tp + c->b_cp;
    }
}

/* ---- the event loop ------------------------------------------------------- */

static void trace_push(layout_sim *s, int stage, int track, int chunk, int mb, int layer, char what, double t0,
                       double t1) {
    if (!s->tracing || s->trace_failed) return;
    if (s->n_ev == s->cap_ev) {
        int cap = s->cap_ev ? 2 * s->cap_ev : 4096;
        ls_event *ne = realloc(s->ev, (size_t)cap * sizeof *ne);
        if (!ne) {
            s->trace_failed = 1;
            return;
        }
        s->ev = ne;
        s->cap_ev = cap;
    }
    s->ev[s->n_ev++] = (ls_event){stage, track, chunk, mb, layer, what, t0, t1};
}

/* The TP and CP collectives of an op's layers, where they run inside it
 * (after each layer's compute; the two collectives of a layer drawn as one). */
static void trace_layers(layout_sim *s, const ls_chunk_cost *c, int r, int k, int j, int bwd, double t) {
    const int L = s->chunk_layers[k];
    double x = t + (bwd ? c->b_head : c->f_pre);
    for (int i = 0; i < L; i++) {
        const int layer = bwd ? L - 1 - i : i;
        const double comp = bwd ? c->b_layer - c->b_ltp - c->b_lcp : c->f_lcomp;
        const double tp = bwd ? c->b_ltp : c->f_ltp, cp = bwd ? c->b_lcp : c->f_lcp;
        x += comp;
        if (tp > 0) trace_push(s, r, 6, k, j, layer, 'T', x, x + tp);
        x += tp;
        if (cp > 0) trace_push(s, r, 7, k, j, layer, 'C', x, x + cp);
        x += cp;
    }
}

/* An op of chunk k on stage r that needs its parameters gathered first
 * (zero 3, fsdp, zero 1/2's overlapped gather), run unit by unit: the
 * embedding, each layer, the head (backward: the reverse). Unit u's
 * compute starts once its gather has ended; its gather may start once the
 * gather stream is free and unit u-1's compute has started (the first
 * unit's: once the op before this one started): FSDP's forward prefetch of
 * one module. Returns the time the op's compute waited for gathers;
 * *last_start gets the start of its last unit's compute. */
static double gathered_op(layout_sim *s, const ls_chunk_cost *c, int r, int k, int j, int bwd, double t, double cs,
                          double *last_start) {
    const int L = s->chunk_layers[k], first = k == 0, last = k == s->K - 1;
    const double layer = bwd ? c->b_layer : c->f_lcomp + c->f_ltp + c->f_lcp;
    const double pre = bwd ? c->b_head : c->f_pre;
    const double post = (bwd ? c->b_us : c->f_us) - pre - L * layer;
    double gfree = s->dpg[r], allow = s->prev_start[r], cur = t, wait = 0.0, g0 = -1.0;
    for (int u = 0; u < L + 2; u++) {
        double dur, ag;
        if (u == 0) {
            dur = pre;
            ag = bwd ? (last ? s->ag_head[r] : 0.0) : (first ? s->ag_emb[r] : 0.0);
        } else if (u <= L) {
            dur = layer;
            ag = s->ag_layer[r];
        } else {
            dur = post;
            ag = bwd ? (first ? s->ag_emb[r] : 0.0) : (last ? s->ag_head[r] : 0.0);
        }
        if (ag > 0) {
            const double gs = gfree > allow ? gfree : allow;
            if (g0 < 0) g0 = gs;
            gfree = gs + cs * ag;
            if (gfree > cur) {
                wait += gfree - cur;
                cur = gfree;
            }
        }
        allow = cur;
        cur += dur;
    }
    if (g0 >= 0) trace_push(s, r, 4, k, j, -1, 'G', g0, gfree);
    s->dpg[r] = gfree;
    *last_start = allow;
    return wait;
}

/* Time of bucket b's gradients inside its chunk's backward. */
static inline double bucket_offset(const layout_sim *s, const ls_chunk_cost *c, const ls_bucket *b, int k) {
    const int L = s->chunk_layers[k];
    if (b->units == 0) return c->b_head;
    if (b->units <= L) return c->b_head + b->units * c->b_layer;
    return c->b_us;
}

/* One pass over the step: every stage's ops in its order, as their
 * inputs arrive. free_p2p: pipeline sends cost nothing (the bubble pass). */
static pl_status simulate(layout_sim *s, const layout_sim_params *p, int free_p2p, char *msg, size_t len) {
    const layout *l = s->l;
    const int pp = s->pp, K = s->K, m = s->m, nops = s->n_ops_stage;
    const int dp = l->dp > 1;
    const int gather_every = dp && l->zero == ZERO_3;
    const int gather_first = dp && (l->zero == ZERO_FSDP || ((l->zero == ZERO_1 || l->zero == ZERO_2) && p->dp_overlap_param));
    const int reduce_every = dp && l->zero == ZERO_3;
    const double cs = p->collective_scale, xs = free_p2p ? 0.0 : p->p2p_scale;
    for (size_t i = 0; i < (size_t)K * m; i++) s->farr[i] = s->barr[i] = -1.0;
    for (int r = 0; r < pp; r++) {
        s->pos[r] = 0;
        s->ct[r] = s->lf[r] = s->lb[r] = s->dpr[r] = s->dpg[r] = s->prev_start[r] = 0;
        s->p_comp[r] = s->p_recomp[r] = s->p_tp[r] = s->p_cp[r] = s->p_dp[r] = s->p_wait[r] = s->p_opt[r] = 0;
        s->stash[r] = s->stash_max[r] = s->nstash[r] = s->nstash_max[r] = 0;
    }
    long remaining = (long)pp * nops;
    while (remaining > 0) {
        int progress = 0;
        for (int r = 0; r < pp; r++) {
            const pipe_op *ord = s->order + (size_t)r * nops;
            while (s->pos[r] < nops) {
                const pipe_op op = ord[s->pos[r]];
                const int k = op.chunk * pp + r, j = op.mb;
                const size_t idx = (size_t)k * m + j;
                const double arr = op.bwd ? (k == K - 1 ? 0.0 : s->barr[idx]) : (k == 0 ? 0.0 : s->farr[idx]);
                if (arr < 0) break;
                double t = s->ct[r];
                if (arr > t) {
                    s->p_wait[r] += arr - t;
                    t = arr;
                }
                const ls_chunk_cost *c = &s->cost[k];
                double gwait = 0.0;
                if (gather_every || (gather_first && !op.bwd && j == 0)) {
                    /* the op runs unit by unit behind its parameters' gathers */
                    double last_start;
                    gwait = gathered_op(s, c, r, k, j, op.bwd, t, cs, &last_start);
                    s->p_dp[r] += gwait;
                    s->prev_start[r] = last_start;
                } else {
                    s->prev_start[r] = t;
                }
                double end;
                if (!op.bwd) {
                    end = t + c->f_us + gwait;
                    s->p_comp[r] += c->f_comp;
                    s->p_tp[r] += c->f_tp;
                    s->p_cp[r] += c->f_cp;
                    s->stash[r] += s->chunk_layers[k];
                    if (s->stash[r] > s->stash_max[r]) s->stash_max[r] = s->stash[r];
                    if (++s->nstash[r] > s->nstash_max[r]) s->nstash_max[r] = s->nstash[r];
                    trace_push(s, r, 0, k, j, -1, 'F', t, end);
                    if (s->tracing) trace_layers(s, c, r, k, j, 0, t);
                    if (k < K - 1) {
                        const int nx = (k + 1) % pp;
                        if (nx == r) {
                            s->farr[idx + m] = end;
                        } else {
                            const double st = end > s->lf[r] ? end : s->lf[r], x = xs * s->send_fwd[r];
                            s->lf[r] = st + x;
                            s->farr[idx + m] = st + x;
                            trace_push(s, r, 1, k, j, -1, 'a', st, st + x);
                        }
                    }
                } else {
                    end = t + c->b_us + gwait;
                    s->p_comp[r] += c->b_comp;
                    s->p_recomp[r] += c->b_recomp;
                    s->p_tp[r] += c->b_tp;
                    s->p_cp[r] += c->b_cp;
                    s->stash[r] -= s->chunk_layers[k];
                    s->nstash[r]--;
                    trace_push(s, r, 0, k, j, -1, 'B', t, end);
                    if (s->tracing) trace_layers(s, c, r, k, j, 1, t);
                    if (k > 0) {
                        const int pv = (k - 1) % pp;
                        if (pv == r) {
                            s->barr[idx - m] = end;
                        } else {
                            const double st = end > s->lb[r] ? end : s->lb[r], x = xs * s->send_bwd[r];
                            s->lb[r] = st + x;
                            s->barr[idx - m] = st + x;
                            trace_push(s, r, 2, k, j, -1, 'g', st, st + x);
                        }
                    }
                    if (dp && p->dp_overlap_grad && (reduce_every || j == m - 1))
                        for (int b = s->bk_start[k]; b < s->bk_start[k + 1]; b++) {
                            const double rdy = t + bucket_offset(s, c, &s->buckets[b], k);
                            const double bs = rdy > s->dpr[r] ? rdy : s->dpr[r];
                            s->dpr[r] = bs + cs * s->buckets[b].us;
                            trace_push(s, r, 3, k, j, -1, 'r', bs, s->dpr[r]);
                        }
                }
                s->ct[r] = end;
                s->pos[r]++;
                remaining--;
                progress = 1;
            }
        }
        if (!progress) {
            set_msg(msg, len, "the pipeline order deadlocked (a bug: the schedule's order is never cyclic)");
            return PL_ERR_SCHEDULE;
        }
    }
    /* tails: reductions not overlapped, the tied embedding, the optimizer */
    for (int r = 0; r < pp; r++) {
        if (dp && !p->dp_overlap_grad)
            for (int k = K - 1; k >= 0; k--) {
                if (k % pp != r) continue;
                const int nb = reduce_every ? m : 1;
                for (int q = 0; q < nb; q++)
                    for (int b = s->bk_start[k]; b < s->bk_start[k + 1]; b++) {
                        const double bs = s->ct[r] > s->dpr[r] ? s->ct[r] : s->dpr[r];
                        s->dpr[r] = bs + cs * s->buckets[b].us;
                        trace_push(s, r, 3, k, -1, -1, 'r', bs, s->dpr[r]);
                    }
            }
        s->ready[r] = s->ct[r] > s->dpr[r] ? s->ct[r] : s->dpr[r];
    }
    if (s->emb_ar_us > 0) {
        const double t0 = s->ready[0] > s->ready[pp - 1] ? s->ready[0] : s->ready[pp - 1];
        const double t1 = t0 + cs * s->emb_ar_us;
        trace_push(s, 0, 3, 0, -1, -1, 'e', t0, t1);
        trace_push(s, pp - 1, 3, K - 1, -1, -1, 'e', t0, t1);
        s->ready[0] = s->ready[pp - 1] = t1;
    }
    for (int r = 0; r < pp; r++) {
        s->p_dp[r] += s->ready[r] - s->ct[r];
        const double opt = optimizer_time_us(s->gpu[r], (int64_t)s->opt_params[r], &p->compute);
        s->p_opt[r] = opt;
        s->end[r] = s->ready[r] + opt;
        trace_push(s, r, 5, -1, -1, -1, 'o', s->ready[r], s->end[r]);
        if (dp && (l->zero == ZERO_1 || l->zero == ZERO_2) && !p->dp_overlap_param) {
            double ag = 0;
            for (int k = r; k < K; k += pp) ag += cs * s->ag_chunk[k];
            trace_push(s, r, 4, -1, -1, -1, 'G', s->end[r], s->end[r] + ag);
            s->p_dp[r] += ag;
            s->end[r] += ag;
        }
    }
    return PL_OK;
}

static pl_status check_params(const layout_sim_params *p, char *msg, size_t len) {
    const double v[] = {p->collective_scale, p->step_fixed_us, p->p2p_scale, p->dp_bucket_bytes,
                        p->grad_comm_bytes, p->emb_head_scale, p->compute.gemm_efficiency,
                        p->compute.memory_efficiency, p->compute.kernel_overhead_us};
    static const char *const names[] = {"collective_scale", "step_fixed_us", "p2p_scale", "dp_bucket_bytes",
                                        "grad_comm_bytes", "emb_head_scale", "gemm_efficiency",
                                        "memory_efficiency", "kernel_overhead_us"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!isfinite(v[i]) || v[i] < 0) {
            set_msg(msg, len, "layout simulator parameter %s is %g; it must be finite and >= 0", names[i], v[i]);
            return PL_ERR_INVALID;
        }
    if (!(p->dp_bucket_bytes > 0) || !(p->grad_comm_bytes > 0) || !(p->compute.gemm_efficiency > 0) ||
        !(p->compute.memory_efficiency > 0)) {
        set_msg(msg, len, "layout simulator parameters: bucket size, gradient bytes and efficiencies must be > 0");
        return PL_ERR_INVALID;
    }
    return PL_OK;
}

pl_status layout_sim_run(layout_sim *s, const layout_sim_params *prm, int trace, layout_result *res, char *msg,
                         size_t len) {
    if (!s || !res) {
        set_msg(msg, len, "layout_sim_run: NULL argument");
        return PL_ERR_INVALID;
    }
    layout_sim_params p;
    if (prm) p = *prm;
    else layout_sim_params_default(&p);
    pl_status st = check_params(&p, msg, len);
    if (st != PL_OK) return st;
    if ((st = ensure_buckets(s, &p)) != PL_OK) {
        set_msg(msg, len, st == PL_ERR_NOMEM ? "out of memory" : "collective model failed for the gradient buckets");
        return st;
    }
    chunk_costs(s, &p);
    const int pp = s->pp;
    /* the bubble pass: free pipeline sends */
    s->tracing = 0;
    if ((st = simulate(s, &p, 1, msg, len)) != PL_OK) return st;
    memcpy(s->free_wait, s->p_wait, sizeof *s->free_wait * (size_t)pp);
    s->tracing = trace != 0;
    s->n_ev = 0;
    s->trace_failed = 0;
    s->have_trace = 0;
    if ((st = simulate(s, &p, 0, msg, len)) != PL_OK) return st;
    if (s->tracing && s->trace_failed) {
        set_msg(msg, len, "out of memory recording the trace");
        return PL_ERR_NOMEM;
    }
    s->have_trace = s->tracing;

    memset(res, 0, sizeof *res);
    const layout *l = s->l;
    int crit = 0;
    for (int r = 1; r < pp; r++)
        if (s->end[r] > s->end[crit]) crit = r;
    res->critical_stage = crit;
    res->step_us = s->end[crit] + p.step_fixed_us;
    res->micro_batches = s->m;
    res->world = layout_world_size(l);
    double *pt = res->parts_us;
    pt[LAYOUT_T_COMPUTE] = s->p_comp[crit] + s->p_recomp[crit];
    pt[LAYOUT_T_RECOMPUTE] = s->p_recomp[crit];
    pt[LAYOUT_T_TP] = s->p_tp[crit];
    pt[LAYOUT_T_CP] = s->p_cp[crit];
    pt[LAYOUT_T_DP] = s->p_dp[crit];
    pt[LAYOUT_T_OPTIMIZER] = s->p_opt[crit];
    const double idle = s->p_wait[crit];
    pt[LAYOUT_T_BUBBLE] = s->free_wait[crit] < idle ? s->free_wait[crit] : idle;
    pt[LAYOUT_T_PP] = idle - pt[LAYOUT_T_BUBBLE];
    const double secs = res->step_us * 1e-6;
    res->tokens_per_s = secs > 0 ? (double)l->global_batch * s->cfg->seq_len / secs : 0.0;
    layout_model_flops(s->cfg, l, &res->model_flops, &res->hw_flops);
    if (secs > 0 && res->world > 0) {
        res->model_tflops_per_gpu = res->model_flops / secs / (double)res->world / 1e12;
        res->hw_tflops_per_gpu = res->hw_flops / secs / (double)res->world / 1e12;
    }
    const double peak = s->gpu[0]->peak_flops[l->prec];
    res->mfu = peak > 0 ? res->model_tflops_per_gpu * 1e12 / peak : 0.0;
    res->tp_allreduce = s->est_tp_ar;
    res->tp_allgather = s->est_tp_ag;
    res->tp_reduce_scatter = s->est_tp_rs;
    res->cp_allgather = s->est_cp;
    res->dp_allgather = s->est_dp_ag;
    if (l->dp > 1) res->dp_reduce = s->est_dp;
    else res->dp_reduce.algo = "none", res->dp_reduce.n_ranks = 1;
    res->pp_send_bytes = s->pp_bytes;
    res->pp_send_us = pp > 1 ? s->send_fwd[0] : 0.0;
    res->pp_send_nodes = pp > 1 && s->stage_rank[0] / s->c->gpus_per_node != s->stage_rank[1] / s->c->gpus_per_node ? 2 : 1;
    {
        int nb = 0;
        for (int k = crit; k < s->K; k += pp) nb += s->bk_start[k + 1] - s->bk_start[k];
        res->dp_buckets = l->zero == ZERO_3 ? nb * s->m : nb;
    }
    /* memory */
    int worst = 0;
    for (int r = 0; r < pp; r++) {
        layout_memory mem;
        const int L = s->stage_layers[r];
        layout_stage_memory_p(s->cfg, l, &p.compute, r, L, s->nstash_max[r], &mem);
        res->stage_mem[r] = mem.total;
        if (r == 0 || mem.total > res->stage_mem[worst]) {
            worst = r;
            res->mem = mem;
            res->stash_layers = s->stash_max[r];
        }
        if (s->gpu[r]->hbm_bytes > 0 && mem.total > s->gpu[r]->hbm_bytes) res->oom = 1;
    }
    res->worst_stage = worst;
    res->mem_cap = s->gpu[worst]->hbm_bytes;
    return PL_OK;
}

/* ---- the trace ------------------------------------------------------------ */

static const char *track_name(int t) {
    static const char *const n[] = {"compute (incl. TP/CP collectives)", "send to next chunk", "send to previous chunk",
                                    "DP reduce", "DP gather", "optimizer", "TP collectives (compute stream)",
                                    "CP all-gather (compute stream)"};
    return t >= 0 && t < 8 ? n[t] : "?";
}

pl_status layout_sim_write_chrome_trace(const layout_sim *s, FILE *f) {
    if (!s || !f || !s->have_trace) return PL_ERR_INVALID;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    int first = 1;
    for (int r = 0; r < s->pp; r++) {
        fprintf(f, "%s{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"stage %d (gpu %lld)\"}}",
                first ? "" : ",\n", r, r, (long long)s->stage_rank[r]);
        first = 0;
        fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":%d}}", r, r);
        for (int t = 0; t < 8; t++)
            fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"%s\"}}", r, t,
                    track_name(t));
    }
    for (int i = 0; i < s->n_ev; i++) {
        const ls_event *e = &s->ev[i];
        const char *what;
        switch (e->what) {
        case 'F': what = "F"; break;
        case 'B': what = "B"; break;
        case 'a': what = "act"; break;
        case 'g': what = "grad"; break;
        case 'r': what = "reduce"; break;
        case 'G': what = "gather"; break;
        case 'e': what = "embedding grad all-reduce"; break;
        case 'T': what = "tp"; break;
        case 'C': what = "cp kv"; break;
        default: what = "optimizer"; break;
        }
        fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"name\":\"%s", e->stage, e->track,
                e->t0, e->t1 - e->t0, what);
        if (e->chunk >= 0) fprintf(f, " chunk%d", e->chunk);
        if (e->mb >= 0) fprintf(f, " mb%d", e->mb);
        if (e->layer >= 0) fprintf(f, " layer%d", e->layer);
        fprintf(f, "\",\"args\":{\"chunk\":%d,\"mb\":%d,\"layer\":%d}}", e->chunk, e->mb, e->layer);
    }
    fprintf(f, "\n]}\n");
    return ferror(f) ? PL_ERR_IO : PL_OK;
}
