/*
 * schedule.h: how a step is split into micro-batches and in what order each
 * device runs their forward and backward passes.
 *
 *   gpipe        all forwards of all micro-batches, then all backwards
 *   1f1b         PipeDream-Flush: warm-up forwards, then alternate one
 *                forward and one backward, then drain the backwards
 *   interleaved  1F1B with v chunks per device (contiguous chunk placements)
 *   zb-h1        zero bubble H1 (Qi et al., ICLR 2024): 1F1B's forwards and
 *                input-gradient backwards (B), each weight-gradient pass (W)
 *                deferred: rank r keeps r of them pending and runs them in
 *                the drain. Memory: min(m, p) micro-batches held on every
 *                rank (1F1B's rank 0); bubble (p-1)(F+B-W) (m >= p)
 *   zb-h2        zero bubble H2: 2(p-1-r)+1 in-flight forwards, W filling
 *                the rest; min(m, 2p-1) micro-batches held on every rank;
 *                no bubble inside a rank's span for m >= 2p (F = B = W)
 *   zb-v         the V-shaped zero-bubble order (NeurIPS 2024): two chunks
 *                per rank, chunk 0 = stage r, chunk 1 = stage 2p-1-r, at
 *                most 2p chunk activations held (1F1B's p micro-batches);
 *                no idle time inside a rank's span for m >= 2p (F = B = W);
 *                any m >= 1 runs (below 2p with idle time)
 *   dualpipev    DeepSeek's DualPipeV (the V half of DualPipe): the same V
 *                stages, eight phases, overlapped pairs of one chunk's
 *                forward with the other chunk's backward; m >= 2p
 *   dualpipe     DeepSeek's DualPipe, two directions: the model in p
 *                stages, rank r holding stage r of the down pipeline and
 *                stage p-1-r of the up one (two copies of the parameters);
 *                micro-batches 0..m/2-1 go down from rank 0, m/2..m-1 up
 *                from rank p-1; the same eight phases as DualPipeV over the
 *                half ranks (p even, m even, m >= 2p). Orders only for the
 *                layout simulator (the placement simulator and the engine
 *                run dualpipev)
 *
 * B and W: the orders after interleaved split a backward into B (the
 * input gradient) and W (the weight gradient) where they say so (see
 * schedule_rank_ops); a fused backward (SOP_BW) is B then W in one call.
 *
 * The optimizer step (AdamW) runs on each device, for the parameters placed
 * there, after that device's last backward.
 */
#ifndef PLACER_CORE_SCHEDULE_H
#define PLACER_CORE_SCHEDULE_H

#include <stddef.h>

#include "status.h"

typedef enum {
    SCHED_GPIPE = 0,
    SCHED_1F1B,
    SCHED_INTERLEAVED,
    SCHED_ZB_H1,
    SCHED_ZB_H2,
    SCHED_ZB_V,
    SCHED_DUALPIPEV,
    SCHED_DUALPIPE,
    SCHED_ORDER_COUNT
} schedule_order;

typedef struct {
    int micro_batches;    /* m; divides the batch */
    schedule_order order; /* any of the orders above */
    int chunks;           /* v, chunks per device for interleaved; 1 otherwise */
    int paired;           /* 1f1b and interleaved only: Megatron's expert-parallel all-to-all overlap
                             (--overlap-moe-expert-parallel-comm): one more warm-up forward, then each
                             steady-state forward paired with the next backward, of another
                             micro-batch (schedule_op.overlap); 0: the plain order */
} schedule;

/* "gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipev", "dualpipe". */
const char *schedule_order_name(schedule_order o);

/* The names of every order whose bit (1u << o) is not in skip, in enum
 * order, as "a, b or c" into buf (NUL-terminated, cut at len; len 0
 * writes nothing). Returns the length of the whole list. */
int schedule_order_names(char *buf, size_t len, unsigned skip);

/* Parse an order name (case-sensitive; every order, dualpipe included).
 * PL_ERR_SCHEDULE with a message listing the names the placement path
 * takes (all but dualpipe, which only the layout simulator runs) on
 * failure. */
pl_status schedule_parse_order(const char *text, schedule_order *out, char *msg, size_t len);

/* Parse a micro-batch count: a positive decimal integer. */
pl_status schedule_parse_micro_batches(const char *text, int *out, char *msg, size_t len);

/* Check s against a batch size: m >= 1, m divides batch, chunks >= 1, and
 * chunks == 1 unless the order is interleaved. PL_ERR_SCHEDULE on failure. */
pl_status schedule_validate(const schedule *s, int batch, char *msg, size_t len);

/* A schedule of m micro-batches with the given order and one chunk. */
static inline schedule schedule_make(int m, schedule_order o) {
    schedule s = {m, o, 1, 0};
    return s;
}

/* ---- the per-rank orders (one description for both simulators and the engine) ---- */

typedef enum {
    SOP_F = 0, /* forward */
    SOP_B,     /* input-gradient backward (its W comes later) */
    SOP_W,     /* weight-gradient backward of an earlier B */
    SOP_BW     /* the whole backward in one call (B then W) */
} schedule_op_kind;

/* One op of a rank's order, 8 bytes (the layout simulator's event loop
 * reads the orders of a whole pipeline). */
typedef struct {
    int mb;                /* micro-batch 0..m-1 */
    unsigned short chunk;  /* the rank's chunk 0..chunks-1 (see schedule_stage_of) */
    unsigned char kind;    /* schedule_op_kind */
    unsigned char overlap; /* dualpipev, dualpipe, a paired 1f1b: this op and
                              the next run as one overlapped pair (a forward
                              of one micro-batch beside a backward of
                              another); 0 otherwise */
} schedule_op;

/* The order splits backwards into B and W (zb-h1, zb-h2, zb-v, dualpipev, dualpipe). */
int schedule_splits_backward(schedule_order o);

/* Chunks per rank: 2 for the V orders (zb-v, dualpipev) and DualPipe's two
 * directions, 1 otherwise (interleaved's v is the schedule's own chunks
 * field: see schedule_rank_chunks). Inline: the simulators' hot loops call
 * it. */
static inline int schedule_v_chunks(schedule_order o) {
    return o == SCHED_ZB_V || o == SCHED_DUALPIPEV || o == SCHED_DUALPIPE ? 2 : 1;
}

/* Pipelines the stages form: 2 for dualpipe (stages 0..p-1 the down
 * pipeline, p..2p-1 the up one, each the whole model: a micro-batch runs
 * the p stages of its direction only), 1 otherwise (every micro-batch runs
 * every stage). */
static inline int schedule_pipelines(schedule_order o) { return o == SCHED_DUALPIPE ? 2 : 1; }

/* The pipeline micro-batch j of m runs in: dualpipe j < m/2 ? 0 : 1, else 0. */
static inline int schedule_mb_pipeline(schedule_order o, int m, int j) {
    return o == SCHED_DUALPIPE && j >= m / 2 ? 1 : 0;
}

/* Chunks per rank that s runs: s->chunks for interleaved,
 * schedule_v_chunks(s->order) for the others. */
int schedule_rank_chunks(const schedule *s);

/* The pipeline stage (0 .. chunks*p-1, model order) of a rank's chunk:
 * the V orders put chunk 0 at stage r and chunk 1 at stage 2p-1-r; the
 * others chunk c at stage c*p + r (interleaved's round robin; chunk 0 at
 * stage r for the one-chunk orders). dualpipe's the V's too: chunk 0 is
 * model stage r of the down pipeline (stage r), chunk 1 model stage p-1-r
 * of the up one (stage p + p-1-r = 2p-1-r). Inline: the layout simulator's
 * event loop calls it for every op. */
static inline int schedule_stage_of(schedule_order o, int p, int r, int chunk) {
    if (schedule_v_chunks(o) == 2) return chunk == 1 ? 2 * p - 1 - r : r;
    return chunk * p + r;
}

/* What an order needs of p ranks and m micro-batches, as one line:
 * dualpipev m >= 2p (DeepSeek's assertion: its eight phases need 2p
 * micro-batches; the others take any m >= 1); dualpipe an even p, an even
 * m and m >= 2p (DeepSeek's DualPipe asserts the same); and where
 * stages (the pipeline's stage count, 0 to skip the check) is given, the V
 * orders need stages == 2p (an even count, two per rank). PL_ERR_SCHEDULE
 * on failure. */
pl_status schedule_check_pipeline(schedule_order o, int p, int m, int stages, char *msg, size_t len);

/* The most ops a rank's order of s has: (3 if the order splits backwards,
 * else 2) * schedule_rank_chunks(s) * s->micro_batches; 0 for a NULL s. */
int schedule_max_ops(const schedule *s);

/* Rank r's order (0 <= r < p) of schedule s (its order, m =
 * s->micro_batches, and for interleaved v = s->chunks) into out[0 ..
 * schedule_max_ops(s)): every (chunk, mb) has one F and either one BW or
 * one B and one W after it. The orders:
 *   gpipe        F(0..m-1), then BW(0..m-1)
 *   1f1b         w = min(m, p-1-r) warm-up forwards, then one F and one BW
 *                while forwards remain, then the remaining BWs
 *                (Megatron-LM's forward_backward_pipelining_without_interleaving;
 *                the engine's order)
 *   interleaved  Megatron-LM's ..._with_interleaving, v chunks per rank,
 *                chunk c = stage c*p + r: rank r's t-th forward is virtual
 *                micro-batch t, chunk (t mod pv)/p, micro-batch
 *                (t / pv)*p + t mod p; its t-th backward the same on chunk
 *                v-1-(t mod pv)/p; min(2(p-r-1) + (v-1)p, mv) warm-up
 *                forwards (all mv when m == p), then one F and one BW, then
 *                the remaining BWs. v = 1 is 1f1b's order; v > 1 needs m a
 *                multiple of p
 *   zb-h1, zb-h2, zb-v, dualpipev, dualpipe: see schedule.c (zb-h2 is
 *                built by a list schedule at unit costs, zb-v by the paper's
 *                phases; dualpipe's ops carry global micro-batch numbers,
 *                chunk = direction)
 * s->paired (1f1b, interleaved): the warm-up holds one more forward (at
 * most all of them) and every forward followed by a backward is marked
 * overlap (its pair)
 * Returns the count, or -1 for a bad argument (NULL s or out, r outside
 * 0..p-1, m < 1 or m > 2^24-1, chunks < 1 or > 65535, chunks != 1 on an order other than
 * interleaved, interleaved with v > 1 and m not a multiple of p, dualpipev
 * with m < 2p, dualpipe failing schedule_check_pipeline, paired on another
 * order) or no memory. */
int schedule_rank_ops(const schedule *s, int p, int r, schedule_op *out);

/* Every rank's order of s over p ranks at once: rank r's into out + r *
 * stride (stride >= schedule_max_ops(s)), its count into counts[r] (p
 * entries). The lists schedule_rank_ops writes rank by rank; zb-h2's list
 * schedule, which decides all ranks together, runs once instead of p
 * times. 0, or -1 where schedule_rank_ops fails for some rank (or NULL
 * arguments, p < 1, a short stride). */
int schedule_all_rank_ops(const schedule *s, int p, schedule_op *out, int stride, int *counts);

/* Peak stashed activations on rank r by the order's memory rule, in
 * chunk activations (a micro-batch's activations of one chunk, held from
 * its F to its W or BW): gpipe m; 1f1b min(m, p-r); zb-h1 min(m, p);
 * zb-h2 min(m, 2p-1); zb-v min(2m, 2p, m+1+r) (2p from m >= 2p-1);
 * dualpipev min(2m, 2p+1) (DeepSeek's PP+1 activations of the V's double
 * stages); dualpipe min(m, p+1) (PP+1 of its stages, each chunk a whole
 * model stage). */
int schedule_peak_stash_rule(schedule_order o, int p, int r, int m);

/* Schedule s run on an ideal pipeline of p ranks: ops take F, B, W (a BW
 * takes B + W; an overlapped pair takes its two ops' sum), transfers are
 * free; dualpipe's micro-batches run their own direction's stages. Per rank (arrays of p, any may be NULL): busy time, first start,
 * last end, peak stashed chunk activations. Returns the step (the last
 * end), or -1 on failure (an order schedule_rank_ops refuses, no memory,
 * a deadlocked order). */
double schedule_eval_ideal(const schedule *s, int p, double F, double B, double W, double *busy, double *first,
                           double *last, int *peak);

#endif
