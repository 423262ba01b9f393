/*
 * layout_internal.h: what the layout simulator's two files share:
 *   layout_expand.c  the layout expanded for one model on one cluster (once,
 *                    in layout_sim_create): the ranks' orders (core/schedule.c's
 *                    schedule_rank_ops), stages, ranks and GPU types,
 *                    chunk layers, the per-stage collective and send times,
 *                    parameters per chunk, gradient buckets; and per run the
 *                    chunks' op durations from the compute model
 *   layout_sim.c     the event loop over the stages' orders, the breakdown,
 *                    memory, the Chrome trace
 * The model of the step is described at the top of layout_sim.c.
 */
#ifndef PLACER_SIM_LAYOUT_INTERNAL_H
#define PLACER_SIM_LAYOUT_INTERNAL_H

#include <stddef.h>

#include "layout_sim.h"
#include "schedule.h"

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
    double f_ep, b_ep;                 /* MoE dispatch and combine in forward / backward (0: dense) */
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
    const coll_measured *meas;  /* measured collectives (borrowed) or NULL: the cluster model only */
    int n_coll_src[3];          /* collective times computed, by source: model, fitted, measured */
    int pp, vp, K, m;
    int *chunk_layers;          /* [K] */
    int *stage_layers;          /* [pp] */
    int64_t *stage_rank;        /* [pp] GPU of stage s */
    const cluster_gpu **gpu;    /* [pp] */
    schedule_op *order;         /* [pp * n_ops_stage] each rank's order: core/schedule.c's
                                   schedule_rank_ops, with each op's chunk turned into its
                                   stage (ls_stage_of, once in layout_sim_create) */
    int n_ops_stage;            /* schedule_max_ops(&sched) */
    schedule sched;             /* the layout's schedule (1f1b with vp > 1: interleaved) */
    int *rank_of;               /* [K] the rank of stage k (from schedule_stage_of) */
    int *chunk_last_mb;         /* [K] the last micro-batch stage k runs (m-1; dualpipe: its direction's) */
    unsigned char *chunk_end;   /* [K] LS_FIRST: stage k starts its pipeline (embedding, no input to wait
                                   for), LS_LAST: ends it (head and loss); dualpipe's two pipelines
                                   (schedule_pipelines) each have a first and a last stage */
    /* collectives (unscaled us), per stage */
    double *tp_ar, *tp_ag, *tp_rs, *tp_ce, *cp_ag, *cp_rs; /* [pp] */
    double *tp_ag8;             /* [pp] FP8 with sp: a layer input's all-gather in FP8 (fp8.h); else NULL */
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
    /* mixture of experts (moe.h; all 0 / NULL for a dense model) */
    int moe;                     /* 1: the model has MoE layers */
    int *chunk_moe;              /* [K] MoE layers of chunk k */
    double *ep_disp;             /* [pp] one dispatch (= one combine) of a micro-batch, incl. etp */
    double *p_ep;                /* [pp] run state: dispatch time */
    int64_t *egrp;               /* scratch: one expert group's ranks (tp cp dp entries) */
    int64_t chunk_expert_params_max; /* unused placeholder kept 0 */
    double *chunk_expert_params; /* [K] expert parameters of chunk k on one GPU */
    coll_estimate est_ep;        /* stage 0's dispatch */
    /* trace */
    int tracing;
    ls_event *ev;
    int n_ev, cap_ev;
    int have_trace;
    int trace_failed;
    /* ---- split orders (l->sched: zb-h1, zb-h2, zb-v, dualpipev; schedule.h):
     * their orders hold B (input gradients) and W (weight gradients) ops
     * besides F and the whole backward BW, and DualPipeV's overlapped
     * pairs (schedule_op.overlap) */
    int split;                   /* l->sched splits backwards */
    int *n_ops_r;                /* [pp] ops in each rank's order (<= n_ops_stage) */
    double *w_us;                /* [K] a chunk's W: its layers' weight-gradient GEMMs (and the head's) */
    double w_layer_share;        /* the share of a dense layer's backward compute its W takes */
    /* ---- overlap of paired ops (DualPipe, DualPipeV, Megatron's EP overlap) */
    double *p_hid;               /* [pp] run state: communication hidden under the other op's compute */
    double pair_sync_us;         /* dualpipe: the two copies of a stage's gradients all-reduced (0: none) */
};

/* The stage of rank r's chunk (core's rule), and the rank of stage k (its
 * inverse, tabled by layout_sim_create: a load is cheaper than the rule's
 * division in the event loop). */
static inline int ls_stage_of(const layout_sim *s, int r, int chunk) {
    return schedule_stage_of(s->sched.order, s->pp, r, chunk);
}
static inline int ls_rank_of(const layout_sim *s, int k) { return s->rank_of[k]; }

enum { LS_FIRST = 1, LS_LAST = 2 };
static inline int ls_first(const layout_sim *s, int k) { return s->chunk_end[k] & LS_FIRST; }
static inline int ls_last(const layout_sim *s, int k) { return (s->chunk_end[k] & LS_LAST) != 0; }

/* Write a one-line message into msg (NULL or len 0: nothing). */
void ls_msg(char *msg, size_t len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Gradient buckets for p's bucket size and gradient bytes (rebuilt only
 * when those change: the one allocation a run may make). */
pl_status ls_ensure_buckets(layout_sim *s, const layout_sim_params *p);

/* The chunks' op durations and their parts at parameters p. */
void ls_chunk_costs(layout_sim *s, const layout_sim_params *p);

#endif
