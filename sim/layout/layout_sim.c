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
 *     pp * vp in model order, micro-batch j); the order is core/schedule.c's
 *     (schedule_rank_ops, as the placement simulator's and the engine's):
 *     Megatron-LM's 1F1B for vp = 1, interleaved 1F1B for vp > 1, or the
 *     layout's sched (zb-h1, zb-h2, zb-v, dualpipev). Megatron's tensor-parallel
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
 * times, buckets, orders) is computed once by layout_sim_create
 * (layout_expand.c, see layout_internal.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout_internal.h"
#include "model_params.h"

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
    p->zero3_prefetch = 1;
    p->zero3_gather_scale = 1.0;
    p->framework = NULL;
    moe_params_default(&p->moe);
    p->moe_layer_load = NULL;
    p->moe_layer_load_n = 0;
    p->moe_layer_load_ep = 0;
}

const char *layout_time_part_name(layout_time_part p) {
    static const char *const names[LAYOUT_T_COUNT] = {"compute", "recompute", "tp", "cp", "dp",
                                                      "pp",      "bubble",    "optimizer", "ep", "hidden"};
    return (p >= 0 && p < LAYOUT_T_COUNT) ? names[p] : "unknown";
}

int layout_time_part_optional(layout_time_part p) { return p == LAYOUT_T_EP || p == LAYOUT_T_HIDDEN; }

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
 * one module. With whole_chunk (weights gathered once per step and kept
 * until backward: fsdp without resharding after forward, as Llama 3 ran
 * it, and zero 1/2's overlapped gather) every unit's gather may start once
 * the op before this one started: the gathers stream back to back on
 * their own stream ahead of the compute that needs them, since nothing is
 * freed in between. With no_prefetch (zero 3 without prefetch) a unit's
 * gather may start only once the unit before it has finished: gathers and
 * compute take turns. Returns the time the op's compute waited for
 * gathers; *last_start gets the start of its last unit's compute
 * (whole_chunk: the time this op's gathers were allowed from; no_prefetch:
 * the end of its last unit). */
static double gathered_op(layout_sim *s, const ls_chunk_cost *c, int r, int k, int j, int bwd, double t, double cs,
                          int whole_chunk, int no_prefetch, double *last_start) {
    const int L = s->chunk_layers[k], first = ls_first(s, k), last = ls_last(s, k);
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
        if (!whole_chunk) allow = cur;
        cur += dur;
        if (no_prefetch) allow = cur;
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

/* What one pass of simulate shares besides s: the parameters, the
 * layout's data-parallel rules and the pass's scales, fixed for the pass;
 * and DualPipe's pairs in flight. */
typedef struct {
    const layout_sim_params *p;
    int dp;           /* dp > 1 */
    int gather_every; /* zero 3: parameters gathered before every op */
    int gather_first; /* fsdp, zero 1/2's overlapped gather: before a chunk's first forward */
    int reduce_every; /* zero 3: gradients reduced after every micro-batch */
    double cs, xs;    /* collective scale; p2p scale (0: the bubble pass's free sends) */
    unsigned ov;      /* what a pair hides: FW_OVERLAP_EP (dispatch, combine), FW_OVERLAP_TP (tp, cp) */
    double sm_keep;   /* of hidden communication, the share not lost to the compute its kernel's SMs
                         slow: 1 - sms / (SMs - sms) (DeepEP's 20 of 132: 0.82); 1 for NCCL */
    /* [pp] DualPipe: the TP/CP time and compute of a pair's first op
     * (written by that op, read by the pair's second right after it) */
    double pair_comm[LAYOUT_MAX_CHUNKS], pair_comp[LAYOUT_MAX_CHUNKS];
} ls_pass;

/* Every stage's run state back to the step's start. */
static void pass_reset(layout_sim *s) {
    for (size_t i = 0; i < (size_t)s->K * s->m; i++) s->farr[i] = s->barr[i] = -1.0;
    for (int r = 0; r < s->pp; r++) {
        s->pos[r] = 0;
        s->ct[r] = s->lf[r] = s->lb[r] = s->dpr[r] = s->dpg[r] = s->prev_start[r] = 0;
        s->p_comp[r] = s->p_recomp[r] = s->p_tp[r] = s->p_cp[r] = s->p_dp[r] = s->p_wait[r] = s->p_opt[r] = 0;
        s->stash[r] = s->stash_max[r] = s->nstash[r] = s->nstash_max[r] = 0;
        if (s->moe) s->p_ep[r] = 0;
        s->p_hid[r] = 0;
    }
}

/* A W op of chunk k, micro-batch j on rank r (the split orders): it runs
 * when the rank is free (its B ran earlier on this rank) and sends
 * nothing; it frees the stash, and the gradients it makes final (the last
 * micro-batch's, or every one's under zero 3) start their reductions. */
static void run_w(layout_sim *s, const ls_pass *ps, int r, int k, int j) {
    double t = s->ct[r];
    const double w = s->w_us[k], end = t + w;
    s->p_comp[r] += w;
    s->stash[r] -= s->chunk_layers[k];
    s->nstash[r]--;
    trace_push(s, r, 0, k, j, -1, 'W', t, end);
    if (ps->dp && ps->p->dp_overlap_grad && (ps->reduce_every || j == s->chunk_last_mb[k]))
        for (int b = s->bk_start[k]; b < s->bk_start[k + 1]; b++) { /* the gradients final at W's end */
            const double bs = end > s->dpr[r] ? end : s->dpr[r];
            s->dpr[r] = bs + ps->cs * s->buckets[b].us;
            trace_push(s, r, 3, k, j, -1, 'r', bs, s->dpr[r]);
        }
    s->ct[r] = end;
}

/* A forward of chunk k, micro-batch j on rank r from t (its input there,
 * its gathers waited gwait): its parts, the stash, and its output's send
 * to the next chunk's stage (on this rank: arrived at once; the V's second
 * half sends to the previous rank). Returns its end. */
static double run_f(layout_sim *s, const ls_pass *ps, const ls_chunk_cost *c, int r, int k, int j, double t,
                    double gwait) {
    const double end = t + c->f_us + gwait;
    s->p_comp[r] += c->f_comp;
    s->p_tp[r] += c->f_tp;
    s->p_cp[r] += c->f_cp;
    if (s->moe) s->p_ep[r] += c->f_ep;
    s->stash[r] += s->chunk_layers[k];
    if (s->stash[r] > s->stash_max[r]) s->stash_max[r] = s->stash[r];
    if (++s->nstash[r] > s->nstash_max[r]) s->nstash_max[r] = s->nstash[r];
    trace_push(s, r, 0, k, j, -1, 'F', t, end);
    if (s->tracing) trace_layers(s, c, r, k, j, 0, t);
    if (!ls_last(s, k)) {
        const size_t idx = (size_t)k * s->m + j;
        const int nx = ls_rank_of(s, k + 1);
        if (nx == r) {
            s->farr[idx + s->m] = end;
        } else {
            const double st = end > s->lf[r] ? end : s->lf[r],
                         x = ps->xs * (nx == (r + 1) % s->pp ? s->send_fwd[r] : s->send_bwd[r]);
            s->lf[r] = st + x;
            s->farr[idx + s->m] = st + x;
            trace_push(s, r, 1, k, j, -1, 'a', st, st + x);
        }
    }
    return end;
}

/* A backward (kind SOP_BW, or SOP_B of a split order: its W part later) of
 * chunk k, micro-batch j on rank r from t (gathers waited gwait): its
 * parts, the stash (BW), its input gradient's send to the previous chunk's
 * stage, and (BW) the buckets it makes final starting their reductions at
 * their offsets inside it. Returns its end. */
static double run_b(layout_sim *s, const ls_pass *ps, const ls_chunk_cost *c, int r, int k, int j, int kind,
                    double t, double gwait) {
    const double wpart = kind == SOP_B ? s->w_us[k] : 0.0;
    const double end = t + c->b_us - wpart + gwait;
    s->p_comp[r] += c->b_comp - wpart;
    s->p_recomp[r] += c->b_recomp;
    s->p_tp[r] += c->b_tp;
    s->p_cp[r] += c->b_cp;
    if (s->moe) s->p_ep[r] += c->b_ep;
    if (kind != SOP_B) {
        s->stash[r] -= s->chunk_layers[k];
        s->nstash[r]--;
    }
    trace_push(s, r, 0, k, j, -1, 'B', t, end);
    if (s->tracing) trace_layers(s, c, r, k, j, 1, t);
    if (!ls_first(s, k)) {
        const size_t idx = (size_t)k * s->m + j;
        const int pv = ls_rank_of(s, k - 1);
        if (pv == r) {
            s->barr[idx - s->m] = end;
        } else {
            const double st = end > s->lb[r] ? end : s->lb[r],
                         x = ps->xs * (pv == (r + s->pp - 1) % s->pp ? s->send_bwd[r] : s->send_fwd[r]);
            s->lb[r] = st + x;
            s->barr[idx - s->m] = st + x;
            trace_push(s, r, 2, k, j, -1, 'g', st, st + x);
        }
    }
    if (ps->dp && ps->p->dp_overlap_grad && (ps->reduce_every || j == s->chunk_last_mb[k]) && kind != SOP_B)
        for (int b = s->bk_start[k]; b < s->bk_start[k + 1]; b++) {
            const double rdy = t + bucket_offset(s, c, &s->buckets[b], k);
            const double bs = rdy > s->dpr[r] ? rdy : s->dpr[r];
            s->dpr[r] = bs + ps->cs * s->buckets[b].us;
            trace_push(s, r, 3, k, j, -1, 'r', bs, s->dpr[r]);
        }
    return end;
}

/* Rank r's op at position pos of its order ord, an F, B or BW: waits for
 * its input (returns 0, nothing changed, when it has not arrived), then
 * for its parameters' gathers where the layout gathers them, runs, and
 * ends a DualPipe pair's second op earlier by what the two ops' TP and CP
 * collectives hid under each other's compute. Returns 1 once it ran. */
static int run_op(layout_sim *s, ls_pass *ps, int r, const schedule_op *ord, int pos) {
    const schedule_op op = ord[pos];
    const int k = op.chunk, j = op.mb, bwd = op.kind != SOP_F; /* chunk: the op's stage (layout_internal.h) */
    const size_t idx = (size_t)k * s->m + j;
    const double arr = bwd ? (ls_last(s, k) ? 0.0 : s->barr[idx]) : (ls_first(s, k) ? 0.0 : s->farr[idx]);
    if (arr < 0) return 0;
    double t = s->ct[r];
    if (arr > t) {
        s->p_wait[r] += arr - t;
        t = arr;
    }
    const ls_chunk_cost *c = &s->cost[k];
    double gwait = 0.0;
    if (ps->gather_every || (ps->gather_first && !bwd && j == 0)) {
        /* the op runs unit by unit behind its parameters' gathers */
        double last_start;
        gwait = gathered_op(s, c, r, k, j, bwd, t, ps->gather_every ? ps->cs * ps->p->zero3_gather_scale : ps->cs,
                            !ps->gather_every, ps->gather_every && !ps->p->zero3_prefetch, &last_start);
        s->p_dp[r] += gwait;
        s->prev_start[r] = last_start;
    } else {
        s->prev_start[r] = t;
    }
    double end = bwd ? run_b(s, ps, c, r, k, j, op.kind, t, gwait) : run_f(s, ps, c, r, k, j, t, gwait);
    /* an overlapped pair (one micro-batch's forward beside another's
     * backward: DualPipe, DualPipeV, overlap=ep): each op's communication
     * that the stack overlaps (ps->ov) runs under the other's compute, so
     * the pair's second op ends earlier by what the two hid, less what the
     * communication kernel's SMs cost the compute beside it */
    if (op.overlap || (pos > 0 && ord[pos - 1].overlap)) {
        double comm = 0.0;
        if (ps->ov & FW_OVERLAP_TP) comm += bwd ? c->b_tp + c->b_cp : c->f_tp + c->f_cp;
        if (ps->ov & FW_OVERLAP_EP) comm += bwd ? c->b_ep : c->f_ep;
        const double comp = bwd ? c->b_comp - (op.kind == SOP_B ? s->w_us[k] : 0.0) : c->f_comp;
        if (op.overlap) {
            ps->pair_comm[r] = comm;
            ps->pair_comp[r] = comp;
        } else {
            const double h1 = ps->pair_comm[r] < comp ? ps->pair_comm[r] : comp;
            const double h2 = comm < ps->pair_comp[r] ? comm : ps->pair_comp[r];
            double hide = (h1 + h2) * ps->sm_keep;
            if (hide > end - t) hide = end - t;
            if (hide > 0) {
                end -= hide;
                s->p_hid[r] += hide;
            }
        }
    }
    s->ct[r] = end;
    return 1;
}

/* What gradient accumulation costs rank r beyond its compute: a stack that
 * adds each micro-batch's gradient to the held one in a kernel of its own
 * (framework_profile.grad_accum_bytes: autograd's AccumulateGrad, torch
 * without FSDP) moves that many bytes per held gradient element for every
 * micro-batch after the step's first, priced as the stack's memory-bound
 * kernels are (compute_model.h's memory_time_us, the profile's
 * memory_scale in it). The held gradients are the stage's (its shard under
 * ZeRO 2, 3 and FSDP). 0 for Megatron, which accumulates inside the
 * weight-gradient GEMM, and for one micro-batch a step. */
static double grad_accum_us(const layout_sim *s, const layout_sim_params *p, int r) {
    const framework_profile *f = p->framework;
    if (!f || !(f->grad_accum_bytes > 0) || s->m <= 1) return 0.0;
    const int sharded = s->l->dp > 1 && (s->l->zero == ZERO_2 || s->l->zero == ZERO_3 || s->l->zero == ZERO_FSDP);
    const double held = sharded ? s->opt_params[r] : (double)s->stage_params[r];
    return (s->m - 1) * memory_time_us(s->gpu[r], held * f->grad_accum_bytes, &p->compute);
}

/* After every stage's last op: its reductions not overlapped (all of them,
 * after the last backward), the tied embedding's all-reduce between the
 * first and last stage, the optimizer, and zero 1/2's exposed gather. */
static void pass_tails(layout_sim *s, const ls_pass *ps) {
    const layout *l = s->l;
    const int pp = s->pp, K = s->K;
    const double cs = ps->cs;
    for (int r = 0; r < pp; r++) {
        if (ps->dp && !ps->p->dp_overlap_grad)
            for (int k = K - 1; k >= 0; k--) {
                if (ls_rank_of(s, k) != r) continue;
                const int nb = ps->reduce_every ? s->m : 1;
                for (int q = 0; q < nb; q++)
                    for (int b = s->bk_start[k]; b < s->bk_start[k + 1]; b++) {
                        const double bs = s->ct[r] > s->dpr[r] ? s->ct[r] : s->dpr[r];
                        s->dpr[r] = bs + cs * s->buckets[b].us;
                        trace_push(s, r, 3, k, -1, -1, 'r', bs, s->dpr[r]);
                    }
            }
        s->ready[r] = s->ct[r] > s->dpr[r] ? s->ct[r] : s->dpr[r];
    }
    if (s->pair_sync_us > 0) /* dualpipe: rank r's and rank pp-1-r's copies of the same stages */
        for (int r = 0; r < pp / 2; r++) {
            const int q = pp - 1 - r;
            const double t0 = s->ready[r] > s->ready[q] ? s->ready[r] : s->ready[q], t1 = t0 + cs * s->pair_sync_us;
            trace_push(s, r, 3, -1, -1, -1, 'e', t0, t1);
            trace_push(s, q, 3, -1, -1, -1, 'e', t0, t1);
            s->ready[r] = s->ready[q] = t1;
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
        const double acc = grad_accum_us(s, ps->p, r);
        s->ready[r] += acc;
        s->p_comp[r] += acc;
        const double opt = optimizer_time_us(s->gpu[r], (int64_t)s->opt_params[r], &ps->p->compute);
        s->p_opt[r] = opt;
        s->end[r] = s->ready[r] + opt;
        trace_push(s, r, 5, -1, -1, -1, 'o', s->ready[r], s->end[r]);
        if (ps->dp && (l->zero == ZERO_1 || l->zero == ZERO_2) && !ps->p->dp_overlap_param) {
            double ag = 0;
            for (int k = r; k < K; k += pp) ag += cs * s->ag_chunk[k];
            trace_push(s, r, 4, -1, -1, -1, 'G', s->end[r], s->end[r] + ag);
            s->p_dp[r] += ag;
            s->end[r] += ag;
        }
    }
}

/* One pass over the step: the stages take turns running the ops of their
 * orders that can run (their input arrived), until all have run, then
 * their tails. free_p2p: pipeline sends cost nothing (the bubble pass).
 * PL_ERR_SCHEDULE with a message if no stage can run its next op (a bug:
 * core's orders never deadlock). */
static pl_status simulate(layout_sim *s, const layout_sim_params *p, int free_p2p, char *msg, size_t len) {
    const layout *l = s->l;
    const int dp = l->dp > 1;
    ls_pass ps;
    ps.p = p;
    ps.dp = dp;
    ps.gather_every = dp && l->zero == ZERO_3;
    ps.gather_first =
        dp && (l->zero == ZERO_FSDP || ((l->zero == ZERO_1 || l->zero == ZERO_2) && p->dp_overlap_param));
    ps.reduce_every = dp && l->zero == ZERO_3;
    ps.cs = p->collective_scale;
    ps.xs = free_p2p ? 0.0 : p->p2p_scale;
    ps.ov = p->framework ? p->framework->overlap : FW_OVERLAP_EP;
    if (l->ep_overlap) ps.ov |= FW_OVERLAP_EP;
    if (!s->moe) ps.ov &= ~(unsigned)FW_OVERLAP_EP;
    {
        const int sms = l->dispatcher == MOE_DISPATCH_FLEX && (ps.ov & FW_OVERLAP_EP) ? MOE_DEEPEP_SMS : 0;
        const int all = s->gpu[0]->sm_count > 0 ? s->gpu[0]->sm_count : 132;
        ps.sm_keep = sms > 0 && sms < all ? 1.0 - (double)sms / (all - sms) : 1.0;
    }
    pass_reset(s);
    long remaining = 0;
    for (int r = 0; r < s->pp; r++) remaining += s->n_ops_r[r];
    while (remaining > 0) {
        int progress = 0;
        for (int r = 0; r < s->pp; r++) {
            const schedule_op *ord = s->order + (size_t)r * s->n_ops_stage;
            while (s->pos[r] < s->n_ops_r[r]) {
                const schedule_op *op = &ord[s->pos[r]];
                if (op->kind == SOP_W) run_w(s, &ps, r, op->chunk, op->mb);
                else if (!run_op(s, &ps, r, ord, s->pos[r])) break;
                s->pos[r]++;
                remaining--;
                progress = 1;
            }
        }
        if (!progress) {
            ls_msg(msg, len, "the pipeline order deadlocked (a bug: the schedule's order is never cyclic)");
            return PL_ERR_SCHEDULE;
        }
    }
    pass_tails(s, &ps);
    return PL_OK;
}

static pl_status check_params(const layout_sim_params *p, char *msg, size_t len) {
    const double v[] = {p->collective_scale, p->step_fixed_us, p->p2p_scale, p->dp_bucket_bytes,
                        p->grad_comm_bytes, p->emb_head_scale, p->compute.gemm_efficiency,
                        p->compute.memory_efficiency, p->compute.kernel_overhead_us, p->zero3_gather_scale,
                        p->moe.imbalance, p->moe.capacity_factor, p->moe.expert_cv};
    static const char *const names[] = {"collective_scale", "step_fixed_us", "p2p_scale", "dp_bucket_bytes",
                                        "grad_comm_bytes", "emb_head_scale", "gemm_efficiency",
                                        "memory_efficiency", "kernel_overhead_us", "zero3_gather_scale",
                                        "moe imbalance", "moe capacity_factor", "moe expert_cv"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!isfinite(v[i]) || v[i] < 0) {
            ls_msg(msg, len, "layout simulator parameter %s is %g; it must be finite and >= 0", names[i], v[i]);
            return PL_ERR_INVALID;
        }
    if (p->moe.imbalance != 0 && p->moe.imbalance < 1.0) {
        ls_msg(msg, len, "layout simulator parameter moe imbalance is %g; it must be >= 1 (1: balanced; 0: from expert_cv)",
               p->moe.imbalance);
        return PL_ERR_INVALID;
    }
    if (p->moe_layer_load) {
        if (p->moe_layer_load_n < 1 || p->moe_layer_load_ep < 1) {
            ls_msg(msg, len, "layout simulator parameter moe_layer_load needs its layer count and ep");
            return PL_ERR_INVALID;
        }
        for (int i = 0; i < p->moe_layer_load_n; i++)
            if (!(p->moe_layer_load[i] >= 1.0) || !isfinite(p->moe_layer_load[i])) {
                ls_msg(msg, len, "layout simulator parameter moe_layer_load[%d] is %g; it must be >= 1", i,
                       p->moe_layer_load[i]);
                return PL_ERR_INVALID;
            }
    }
    if (p->moe.fit) {
        char m2[200];
        if (moe_fit_validate(p->moe.fit, m2, sizeof m2) != PL_OK) {
            ls_msg(msg, len, "%s", m2);
            return PL_ERR_INVALID;
        }
    }
    if (!(p->dp_bucket_bytes > 0) || !(p->grad_comm_bytes > 0) || !(p->compute.gemm_efficiency > 0) ||
        !(p->compute.memory_efficiency > 0)) {
        ls_msg(msg, len, "layout simulator parameters: bucket size, gradient bytes and efficiencies must be > 0");
        return PL_ERR_INVALID;
    }
    return PL_OK;
}

pl_status layout_sim_run(layout_sim *s, const layout_sim_params *prm, int trace, layout_result *res, char *msg,
                         size_t len) {
    if (!s || !res) {
        ls_msg(msg, len, "layout_sim_run: NULL argument");
        return PL_ERR_INVALID;
    }
    layout_sim_params p;
    if (prm) p = *prm;
    else layout_sim_params_default(&p);
    pl_status st = check_params(&p, msg, len);
    if (st != PL_OK) return st;
    framework_apply_moe(p.framework, &p.moe); /* the stack's MoE choices where p leaves them open */
    if ((st = ls_ensure_buckets(s, &p)) != PL_OK) {
        ls_msg(msg, len, st == PL_ERR_NOMEM ? "out of memory" : "collective model failed for the gradient buckets");
        return st;
    }
    ls_chunk_costs(s, &p);
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
        ls_msg(msg, len, "out of memory recording the trace");
        return PL_ERR_NOMEM;
    }
    s->have_trace = s->tracing;

    memset(res, 0, sizeof *res);
    const layout *l = s->l;
    int crit = 0;
    for (int r = 1; r < pp; r++)
        if (s->end[r] > s->end[crit]) crit = r;
    res->step_us = s->end[crit] + p.step_fixed_us;
    /* an MoE model's stages differ (dense first layers, the experts' stages): its breakdown is the
     * stage with the most work, the one that bounds the step, not the last to end (a dense stage 0
     * whose idle time is waiting on the MoE stages); the time after its end until the step's is
     * waiting too (pp), so its parts still sum to the step */
    double tail = 0.0;
    if (s->moe) {
        int b = crit;
        double most = -1;
        for (int r = 0; r < pp; r++) {
            const double busy = s->p_comp[r] + s->p_recomp[r] + s->p_tp[r] + s->p_cp[r] + s->p_ep[r] - s->p_hid[r] +
                                s->p_dp[r] + s->p_opt[r];
            if (busy > most * (1 + 1e-9) || (busy >= most * (1 - 1e-9) && r == crit)) most = busy, b = r;
        }
        tail = s->end[crit] - s->end[b];
        crit = b;
    }
    res->critical_stage = crit;
    res->micro_batches = s->m;
    res->world = layout_world_size(l);
    double *pt = res->parts_us;
    pt[LAYOUT_T_COMPUTE] = s->p_comp[crit] + s->p_recomp[crit];
    pt[LAYOUT_T_RECOMPUTE] = s->p_recomp[crit];
    pt[LAYOUT_T_TP] = s->p_tp[crit];
    pt[LAYOUT_T_CP] = s->p_cp[crit];
    pt[LAYOUT_T_DP] = s->p_dp[crit];
    pt[LAYOUT_T_OPTIMIZER] = s->p_opt[crit];
    if (s->moe) {
        pt[LAYOUT_T_EP] = s->p_ep[crit];
        res->ep_dispatch = s->est_ep;
        res->ep_tokens_per_expert = moe_tokens_per_expert(s->cfg, l, &p.moe);
    }
    pt[LAYOUT_T_HIDDEN] = s->p_hid[crit];
    for (int r = 0; r < pp; r++) {
        res->stage_compute_us[r] = s->p_comp[r] + s->p_recomp[r];
        res->stage_ep_us[r] = s->moe ? s->p_ep[r] : 0.0;
        res->stage_idle_us[r] = s->p_wait[r] + (res->step_us - p.step_fixed_us - s->end[r]); /* and after its end */
        const double c0 = res->stage_compute_us[0], e0 = res->stage_ep_us[0];
        if (s->moe && (fabs(res->stage_compute_us[r] - c0) > 0.01 * c0 || fabs(res->stage_ep_us[r] - e0) > 0.01 * (c0 + e0)))
            res->stages_differ = 1; /* MoE models only: a dense layout's report reads as it did */
    }
    const double idle = s->p_wait[crit];
    pt[LAYOUT_T_BUBBLE] = s->free_wait[crit] < idle ? s->free_wait[crit] : idle;
    pt[LAYOUT_T_PP] = idle - pt[LAYOUT_T_BUBBLE] + tail;
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
    res->pp_send_nodes =
        pp > 1 && cluster_domain_of(s->c, s->stage_rank[0]) != cluster_domain_of(s->c, s->stage_rank[1]) ? 2 : 1;
    {
        int nb = 0;
        for (int k = crit; k < s->K; k += pp) nb += s->bk_start[k + 1] - s->bk_start[k];
        res->dp_buckets = l->zero == ZERO_3 ? nb * s->m : nb;
    }
    /* memory */
    int worst = 0;
    for (int r = 0; r < pp; r++) {
        layout_memory mem;
        int L = s->stage_layers[r];
        if (l->mem & LAYOUT_MEM_MTP_LAST) /* the MTP module's MoE layer on the stage(s) ending a pipeline */
            for (int k = 0; k < s->K; k++) L += ls_rank_of(s, k) == r && ls_last(s, k);
        framework_stage_memory_moe(p.framework, s->cfg, l, &p.compute, &p.moe, r, L, s->nstash_max[r], &mem);
        if (l->sched == SCHED_DUALPIPE && (r == 0 || r == pp - 1)) {
            /* both ends hold the embedding (the first stage of one direction) and the head and loss (the
             * last of the other): the other end's part, as a stage of no layers at that end over one in
             * the middle of a longer pipeline */
            layout l2 = *l;
            l2.pp = pp + 2;
            l2.sched = SCHED_1F1B;
            l2.n_stage_layers = 0;
            layout_memory a, b;
            framework_stage_memory_moe(p.framework, s->cfg, &l2, &p.compute, &p.moe, r == 0 ? l2.pp - 1 : 0, 0,
                                       s->nstash_max[r], &a);
            framework_stage_memory_moe(p.framework, s->cfg, &l2, &p.compute, &p.moe, 1, 0, s->nstash_max[r], &b);
            if (a.total > b.total) {
                mem.embedding_head += a.total - b.total;
                mem.total += a.total - b.total;
            }
        }
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
