/*
 * sim_core.c: the discrete-event simulator's core: the engine's streams
 * and buffers, the issue loop (sim_run). The context (parameters, the
 * graph and profile facts, the cost caches) is in sim_ctx.c, the arena in
 * sim_arena.h, the orders in sim_order.c, events, the critical path and the
 * Chrome trace in sim_trace.c (see sim_internal.h). The model, for all of them:
 *
 * The simulator models what the engine (hw/)
 * does with a placement, step by step, so that its times and peaks are the
 * engine's and not those of an idealised pipeline.
 *
 * What the engine does (hw/exec/hw.h, hw/exec/program.c), and so what is simulated
 * --------------------------------------------------------------------
 * 1. Order. Each used device has its schedule order of operations
 *    (core/schedule.c's per-rank order, expanded by sim_order.c): F(j),
 *    the forward of micro-batch j over the device's nodes in node order,
 *    and B(j), the backward in reverse node order.
 *      gpipe       F(0..m-1), then B(0..m-1)
 *      1f1b        devices ranked r = 0..S-1 by their first node (S used
 *                  devices); w = min(m, S-1-r) forwards, then one forward
 *                  and one backward, then the remaining backwards
 *      interleaved (chunks v > 1) Megatron-LM's interleaved 1F1B on a chunk
 *                  placement (the engine has no such order; kept for the
 *                  placers' what-if questions, see sim_order.c; its
 *                  transfers use ideal per-link FIFO queues that leave when
 *                  their producer ends, see ideal_xfer: an interleaved
 *                  order on the engine's single comm stream per device
 *                  loses its ideal bubble to head-of-line blocking)
 *    The engine compiles a step by letting the devices take turns, in
 *    device index order, issuing their next operation once it is ready
 *    (its producers' forwards, or its consumers' backwards, issued). When
 *    no device can issue its next operation (a placement that is not
 *    contiguous can deadlock a strict 1f1b order), the lowest device with
 *    any ready operation issues its first ready one early. The simulator
 *    runs the same loop, so its per-device order is the engine's (tests
 *    compare them op by op against the engine's compiled plan).
 * 2. Streams. Every device has a compute stream and a comm stream, each in
 *    order. Compute: ZERO of the loss accumulator first, node forwards and
 *    backwards, ADD of gradient contributions that arrive from other
 *    devices for a tensor that already has one, and one fused AdamW over
 *    the device's parameters last. The ZERO of the parameter gradients runs
 *    on the comm stream from the step's start (transfers queue behind it)
 *    and the device's first backward (or, with none, AdamW) waits for it;
 *    for a bf16 profile (profile_data.bf16) it runs on the compute stream
 *    first, as the engine does (hw/exec/program.c's setup_device).
 * 3. Transfers, issued the moment the compiler can: an activation right
 *    after its producer's forward, once per remote device that consumes it;
 *    a gradient right after the last consumer on the sending device ran
 *    its backward. Before each transfer both devices' comm streams wait
 *    for their compute stream's position at that moment in the issue
 *    order (the sender's: the producer; the receiver's: whatever it had
 *    been given so far, which on scattered placements is often work that
 *    runs much later than the data could arrive). A transfer is an NCCL
 *    send/recv pair on the two comm streams: the receive ends at
 *    max(send posted, receive posted) + transfer time; a send of at most
 *    SIM_EAGER_BYTES (NCCL's buffer) completes transfer time after it is
 *    posted without waiting for its receiver, a larger one ends with its
 *    receive. The receiver's compute waits for the receive only at the
 *    first operation that uses the data. Before AdamW the compute stream
 *    waits for everything its comm stream was given.
 * 4. Memory: each device's arena, allocated first-fit in the issue order
 *    with the engine's buffer lifetimes (hw/exec/program.c): static buffers (params,
 *    grads, AdamW m and v, the backend workspace, token and target ids),
 *    per node and micro-batch the output (until its last local use), the
 *    saved block (forward to backward), the output gradient, scratch for
 *    the duration of one call, received copies of remote inputs and
 *    gradient contributions to send back; a sent buffer is released only
 *    once the compute stream has waited on a later event of the comm
 *    stream. peak = the arena's high-water mark, as the engine reports it.
 *    Sizes come from the profile: out_bytes and act_bytes per sample (the
 *    saved block is act - out when the output is kept for a backward),
 *    a call's workspace (profile_node_call_workspace: the forward's or
 *    the backward's, or one figure for both in a profile that records
 *    one) = backend workspace (the smallest over nodes and calls) + the
 *    call's scratch at the largest profiled micro-batch size, scaled to
 *    the run's micro-batch size.
 *
 * Costs (micro-batch size b = batch / m; lo = launch_overhead_us, plus
 * multi_device_launch_us when the step uses more than one device):
 *   node phase   max(0, cost(dev, b, node, phase) * compute_scale + lo); the
 *                loss has no backward call (its forward writes the logits'
 *                gradient), so its forward costs fwd + bwd
 *   AdamW        max(0, (a + s * param bytes on the device) * compute_scale + lo),
 *                a and s the least-squares line of the profile's per-node
 *                AdamW costs on parameter bytes (the engine runs one fused
 *                update, not one per node)
 *   ZERO         max(0, s / 7 * bytes * compute_scale + lo) (AdamW moves 7
 *                bytes per parameter byte; a memset writes one)
 *   ADD          max(0, the forward cost of a residual node (the same
 *                elementwise sum) * compute_scale + lo), scaled up by
 *                bytes for larger tensors
 *   transfer     curve(src, dst, out_bytes * b) * transfer_scale + transfer_latency_us
 *   contention   each transfer of duration t adds contention * t to the
 *                next compute operation of both its devices
 *   step_us = the last device's compute end + step_fixed_us
 *             (+ multi_device_start_us when more than one device is used)
 * launch_overhead_us may be negative: the profiler times nodes with a
 * device event between every two calls, which the engine's step has not.
 *
 * Bubble: busy = compute time of the device, idle = step_us - busy,
 * bubble = idle / busy, for used devices. With unit costs and free
 * transfers on a contiguous p-stage pipeline this is (p-1)/(v m).
 *
 * Critical path: every operation remembers what fixed its start (its
 * stream's previous operation, the receive it waited for, or the compute
 * position a transfer waited for); the path is that chain back from the
 * operation that ended last. Transfers appear on it as their receive (or,
 * when an eager send's completion fixed what came next, as the send).
 *
 * Hot path: sim_run allocates nothing. Readiness is kept as dependency
 * counters and a bitset of ready operations by position in each device's
 * order, so a device's head and the early-issue rule's "first ready
 * operation" are a bit test and a word scan. Memory is exact only where
 * every activation is linear in the micro-batch size (per-sample profile
 * figures; true of the GPT with T a multiple of 64): the engine aligns
 * each saved tensor to 64 floats. With a cap, the verdict compares the
 * uncapped high-water mark with it (the engine first waits for
 * outstanding sends before it gives up; not modelled).
 */
#include "sim_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- the run state and the engine's bookkeeping (hw/exec/program.c) ------------- */

/* One run: everything sim_run's helpers share, in locals of one struct. */
typedef struct {
    sim_ctx *c;
    const graph *g;
    int n, m, D, mb;
    int multi;             /* more than one device used */
    int ideal;             /* transfers on ideal per-link queues (interleaved) */
    double cs, lo, ts, tl, cont;
    int tracing;
    int record;            /* write the ops' records (sim_op) */
    int n_ops;
    int n_transfers;
    int64_t tbytes;        /* summed as integers: exact, as the double sum of
                              integer byte counts below 2^53 was */
} run;

static const sim_buf BUF_NONE = {-1, 0, 0.0, 0, -1, 0};

/* The view of slot s for micro-batch j. */
#define VIEW(r, s, j) (&(r)->c->views[(size_t)(s) * (r)->m + (j)])
#define TMP(r, i, j, k) (&(r)->c->temps[((size_t)(i) * (r)->m + (j)) * (r)->c->max_cons + (k)])

static inline void record_event(run *r, int op) {
    sim_ctx *c = r->c;
    sim_op_event(c, op, &c->events[c->n_events++]);
}

/* A transfer op's chain: its predecessor's (pr, -1 for none) plus itself,
 * with no compute time. */
static inline void chain_xfer(sim_ctx *c, int op, int pr) {
    c->chain[op] = (sim_chain){c->chain[pr].ccomp, c->chain[pr].clen + 1, pr};
}

/* A device op (no transfer) of `dur` us from t0: its record, when the run
 * keeps them, and its chain (pr's plus dur of compute). */
static SIM_HOT_INLINE void op_put(run *r, int op, int pr, double t0, double dur, int info, int node, int j) {
    sim_ctx *c = r->c;
    if (r->record) {
        sim_op *o = &c->ops[op];
        o->t0 = t0;
        o->t1 = t0 + dur;
        o->info = info;
        o->node = node;
        o->mb = j;
        o->dst = -1;
    }
    c->chain[op] = (sim_chain){c->chain[pr].ccomp + dur, c->chain[pr].clen + 1, pr};
}

/* Run a compute op of `dur` us on device d's compute stream. */
static SIM_HOT_INLINE void compute_dur(run *r, int d, int kind, int node, int j, double dur) {
    sim_ctx *c = r->c;
    if (r->cont != 0.0) {
        dur += c->pend[d];
        c->pend[d] = 0;
    }
    const int op = r->n_ops++;
    op_put(r, op, c->cp[d], c->ct[d], dur, kind | d << OPK_BITS, node, j);
    c->ct[d] += dur;
    c->cp[d] = op;
    c->busy[d] += dur;
    if (r->tracing) record_event(r, op);
}

/* Run a compute op of raw (profiled) cost `raw`: scaled, plus the launch
 * overhead, never negative. */
static inline void compute_op(run *r, int d, int kind, int node, int j, double raw) {
    double dur = raw * r->cs + r->lo;
    compute_dur(r, d, kind, node, j, dur > 0 ? dur : 0.0);
}

/* The gradients' ZERO of device d on its comm stream at the step's start
 * (raw cost as compute_op's), which d's first backward (or, with none,
 * AdamW) waits for: zero_wait. Transfers queue behind it (mt). */
static void zero_on_comm(run *r, int d, double raw) {
    sim_ctx *c = r->c;
    double dur = raw * r->cs + r->lo;
    if (dur < 0) dur = 0;
    const int op = r->n_ops++;
    op_put(r, op, c->mp[d], c->mt[d], dur, OPK_ZERO_COMM | d << OPK_BITS, -1, -1);
    c->mt[d] += dur;
    c->mp[d] = op;
    c->zend[d] = c->mt[d];
    c->zop[d] = op;
    if (r->tracing) record_event(r, op);
}

/* The compute stream of d waits for the gradients' ZERO (once). */
static inline void zero_wait(sim_ctx *c, int d) {
    if (c->zop[d] == -2) return;
    if (c->zend[d] >= c->ct[d]) {
        c->ct[d] = c->zend[d];
        c->cp[d] = c->zop[d];
    }
    c->zop[d] = -2;
}

/* Release deferred blocks of d whose send finished by comm seq upto.
 * The arena's state depends only on which blocks are allocated, not on
 * the order they were freed in, so the list's order does not matter, and
 * neither does the moment a due block is released as long as it is before
 * the next allocation: blocks are released as soon as they are due (when
 * d's compute stream waits further on its comm stream, see use_buf), so
 * an allocation for the compute stream never has a deferred block to
 * look at. */
static inline void release_deferred(sim_ctx *c, int d, int upto) {
    if (c->n_deferred[d] == 0 || upto < c->deferred_min[d]) return; /* none is due */
    sim_fence *l = c->deferred + (size_t)d * c->live_cap;
    int *n = &c->n_deferred[d];
    int lo = INT32_MAX;
    for (int i = 0; i < *n;) {
        if (l[i].seq <= upto) {
            arena_free(&c->ar[d], l[i].off, l[i].len);
            l[i] = l[--*n];
        } else {
            if (l[i].seq < lo) lo = l[i].seq;
            i++;
        }
    }
    c->deferred_min[d] = lo;
}

/* A block of len (an aligned length) on d's arena. The deferred blocks
 * whose send the compute stream has waited for are already released (see
 * release_deferred); a receive buffer (the engine's comm stream allocates
 * it) first releases all of them. Returns the block's offset. */
static SIM_HOT_INLINE int64_t c_alloc(sim_ctx *c, int d, int64_t len, int for_comm) {
    if (for_comm) release_deferred(c, d, INT32_MAX);
    return arena_alloc(&c->ar[d], len);
}

/* Scratch of one call (len aligned): allocated before it, freed right
 * after (nothing else happens to the arena in between). */
static inline void scratch(sim_ctx *c, int d, int64_t len) { arena_peek(&c->ar[d], len); }

/* The compute stream of d waits for a received buffer (first use only);
 * blocks whose sends that covers are released now. */
static inline void use_buf(run *r, int d, sim_buf *b) {
    sim_ctx *c = r->c;
    if (b->rop < 0) return;
    if (b->ready >= c->ct[d]) {
        c->ct[d] = b->ready;
        c->cp[d] = b->rop;
    }
    if (b->seq > c->comm_waited[d]) {
        c->comm_waited[d] = b->seq;
        release_deferred(c, d, b->seq);
    }
    b->rop = -1;
}

/* Free a block of d that was never sent from. */
static SIM_HOT_INLINE void c_free_block(sim_ctx *c, int d, int64_t off, int64_t len) { arena_free(&c->ar[d], off, len); }

/* Free buffer b of d: now, unless a send from it may still be reading it
 * (its fence is past what d's compute stream has waited for), in which
 * case the block waits in d's deferred list. */
static SIM_HOT_INLINE void c_free(sim_ctx *c, int d, sim_buf *b) {
    if (b->fence <= c->comm_waited[d]) { /* also: never sent (fence 0) */
        arena_free(&c->ar[d], b->off, b->len);
        return;
    }
    sim_fence *l = c->deferred + (size_t)d * c->live_cap;
    l[c->n_deferred[d]++] = (sim_fence){b->off, b->len, b->fence};
    if (b->fence < c->deferred_min[d]) c->deferred_min[d] = b->fence;
}

/* What every transfer (s -> t, taking x us, its receive being op and ending
 * at ready) does last, whichever queue it ran on: contention on both
 * devices, counters, the event, the comm sequence numbers, src's fence and
 * dst's fields (its block at doff, len). */
static SIM_HOT_INLINE void xfer_done(run *r, int s, int t, int64_t bytes, double x, int op, double ready,
                                     sim_buf *src, sim_buf *dst, int64_t doff, int64_t len) {
    sim_ctx *c = r->c;
    if (r->cont != 0.0) {
        c->pend[s] += r->cont * x;
        c->pend[t] += r->cont * x;
    }
    r->n_transfers++;
    r->tbytes += bytes;
    if (r->tracing) record_event(r, op);
    c->comm_seq[s]++;
    c->comm_seq[t]++;
    src->fence = c->comm_seq[s];
    dst->off = doff;
    dst->len = len;
    dst->seq = c->comm_seq[t];
    dst->ready = ready;
    dst->rop = op;
    dst->fence = 0;
}

/* The transfer of an order the engine does not run (interleaved): it
 * leaves when its producer's compute ends, on a FIFO queue per directed
 * link that overlaps everything else, as an ideal pipeline's would. */
static void ideal_xfer(run *r, int s, int t, int node, int j, int grad, int64_t bytes, int64_t doff, int64_t len,
                       sim_buf *src, sim_buf *dst) {
    sim_ctx *c = r->c;
    const int l = s * r->D + t;
    const double x = c->traw[((size_t)c->bclass[node] * r->D + s) * r->D + t] * r->ts + r->tl;
    double st = c->ct[s];
    int pr = c->cp[s];
    if (c->lfree[l] > st) {
        st = c->lfree[l];
        pr = c->llast[l];
    }
    const int op = r->n_ops;
    r->n_ops += 2;
    for (int k = 0; k < 2; k++) {
        if (r->record) {
            c->ops[op + k].t0 = st;
            c->ops[op + k].t1 = st + x;
            c->ops[op + k].info = (grad ? OPK_GRAD : OPK_ACT) | s << OPK_BITS;
            c->ops[op + k].dst = t;
            c->ops[op + k].node = node;
            c->ops[op + k].mb = j;
        }
        chain_xfer(c, op + k, pr);
    }
    c->lfree[l] = st + x;
    c->llast[l] = op;
    xfer_done(r, s, t, bytes, x, op, st + x, src, dst, doff, len);
}

/* A transfer of node's output (or its gradient) for micro-batch j from
 * buffer src on s to a new buffer dst on t (all of dst's fields are
 * written); src's fence becomes this send. */
static void xfer(run *r, int s, int t, sim_buf *src, int node, int j, int grad, sim_buf *dst) {
    sim_ctx *c = r->c;
    const int64_t bytes = c->out_b[node], len = c->out_len[node];
    const int64_t doff = c_alloc(c, t, len, 1);
    if (r->ideal) {
        ideal_xfer(r, s, t, node, j, grad, bytes, doff, len, src, dst);
        return;
    }
    /* both comm streams wait for their compute stream's position */
    if (c->ct[s] >= c->mt[s]) {
        c->mt[s] = c->ct[s];
        c->mp[s] = c->cp[s];
    }
    if (c->ct[t] >= c->mt[t]) {
        c->mt[t] = c->ct[t];
        c->mp[t] = c->cp[t];
    }
    const double x = c->traw[((size_t)c->bclass[node] * r->D + s) * r->D + t] * r->ts + r->tl;
    const double sp = c->mt[s];
    const int spred = c->mp[s];
    double st = c->mt[t];
    int pr = c->mp[t];
    if (sp >= st) {
        st = sp;
        pr = spred;
    }
    const int op = r->n_ops;
    r->n_ops += 2; /* op: the receive; op + 1: the send */
    /* an eager send completes on its own; a larger one ends with its receive */
    const int eager = bytes <= SIM_EAGER_BYTES;
    const double s0 = eager ? sp : st;
    const int spr = eager ? spred : pr;
    if (r->record) {
        c->ops[op].t0 = st;
        c->ops[op].t1 = st + x;
        c->ops[op + 1].t0 = s0;
        c->ops[op + 1].t1 = s0 + x;
        /* events name a transfer by the data's source and destination */
        c->ops[op].info = c->ops[op + 1].info = (grad ? OPK_GRAD : OPK_ACT) | s << OPK_BITS;
        c->ops[op].dst = c->ops[op + 1].dst = t;
        c->ops[op].node = c->ops[op + 1].node = node;
        c->ops[op].mb = c->ops[op + 1].mb = j;
    }
    chain_xfer(c, op, pr);
    chain_xfer(c, op + 1, spr);
    c->mt[t] = st + x;
    c->mp[t] = op;
    c->mt[s] = s0 + x;
    c->mp[s] = op + 1;
    xfer_done(r, s, t, bytes, x, op, st + x, src, dst, doff, len);
}

/* A consumer on d is done with the data of view v (on d). */
static inline void release_use(sim_ctx *c, int d, sim_view *v) {
    if (--v->uses == 0 && v->data.off >= 0) {
        c_free(c, d, &v->data);
        v->data.off = -1;
    }
}

static inline void stash(sim_ctx *c, int d, int j, int m, int delta) {
    int *s = &c->stash_cnt[d * m + j];
    if (delta > 0) {
        if ((*s)++ == 0 && ++c->inflight[d] > c->inflight_max[d]) c->inflight_max[d] = c->inflight[d];
    } else if (--*s == 0) {
        c->inflight[d]--;
    }
}

/* Op keys: (node, mb, bwd) -> index into dep and pos_of. */

/* One dependency of op key k is issued; when none is left it is ready. */
static inline void dep_done(sim_ctx *c, size_t k, int node) {
    if (--c->dep[k] == 0) {
        int pos = c->pos_of[k];
        c->rbits[pos >> 6] |= 1ull << (pos & 63);
        const int d = c->dev[node];
        if (pos == c->next[d]) c->active |= 1ull << d; /* its device's head is ready */
    }
}

static void issue_fwd(run *r, int i, int j) {
    sim_ctx *c = r->c;
    const int d = c->dev[i], e0 = c->in_start[i], e1 = c->in_start[i + 1];
    /* a repeated input's second wait would be a no-op: in_slot lists it once */
    for (int e = e0; e < e1; e++) use_buf(r, d, &VIEW(r, c->in_slot[e], j)->data);
    sim_view *ns = VIEW(r, i, j); /* nothing touches (i, j) before its forward */
    ns->grad = BUF_NONE;
    ns->n_temps = 0;
    const int64_t olen = c->out_len[i], slen = c->saved_len[i];
    const int64_t ooff = c_alloc(c, d, olen, 0);
    const int64_t soff = slen > 0 ? c_alloc(c, d, slen, 0) : -1;
    if (c->scr_len[2 * i + PHASE_FWD] > 0) scratch(c, d, c->scr_len[2 * i + PHASE_FWD]);
    const double *cr = c->craw + ((size_t)d * r->n + i) * PHASE_COUNT;
    /* the loss's forward also writes its gradient: it has no backward call */
    compute_op(r, d, OPK_FWD, i, j, c->is_loss[i] ? cr[PHASE_FWD] + cr[PHASE_BWD] : cr[PHASE_FWD]);
    ns->data = BUF_NONE;
    ns->data.off = ooff;
    ns->data.len = olen;
    ns->saved_off = soff;
    ns->saved_len = slen;
    ns->uses = c->local_uses[i];
    dep_done(c, OPKEY(r->m, i, j, 1), i);
    for (int e = c->ucons_start[i]; e < c->ucons_start[i + 1]; e++)
        dep_done(c, OPKEY(r->m, c->ucons[e], j, 0), c->ucons[e]);
    stash(c, d, j, r->m, 1);
    if (c->is_loss[i]) {
        /* each input buffer now holds its producer's output gradient */
        for (int e = e0; e < e1; e++) {
            sim_view *v = VIEW(r, c->in_slot[e], j);
            v->grad = v->data;
            v->grad.rop = -1;
            v->data.off = -1;
            v->uses--;
        }
    } else if (!c->bwd_reads[i]) {
        for (int e = e0; e < e1; e++) release_use(c, d, VIEW(r, c->in_slot[e], j));
    }
    /* send the output to every other device that consumes it, in device order */
    for (uint64_t rem = c->xmask[i]; rem; rem &= rem - 1) { /* ascending device order */
        const int t = __builtin_ctzll(rem);
        size_t slot = (size_t)i * r->D + t;
        sim_view *q = VIEW(r, r->n + c->xslot[slot], j);
        xfer(r, d, t, &ns->data, i, j, 0, &q->data);
        q->uses = c->ucnt[slot];
        q->grad = BUF_NONE;
        q->grad_left = c->ucnt[slot];
    }
    if (ns->uses == 0 && ns->data.off >= 0) {
        c_free(c, d, &ns->data);
        ns->data.off = -1;
    }
}

static void issue_bwd(run *r, int i, int j) {
    sim_ctx *c = r->c;
    const int d = c->dev[i], mb = r->mb, e0 = c->in_start[i], e1 = c->in_start[i + 1];
    const int split_here = c->split && c->has_w[i]; /* a W op follows (never the loss) */
    sim_view *ns = VIEW(r, i, j);
    if (!c->is_loss[i]) {
        /* the output gradient: wait for it and add what other devices sent
         * (a node nobody consumes has none: its backward starts from zero) */
        if (ns->grad.off >= 0) use_buf(r, d, &ns->grad);
        for (int k = 0; k < ns->n_temps; k++) {
            sim_buf *tb = TMP(r, i, j, k);
            use_buf(r, d, tb);
            double raw = c->res_fwd[d];
            if (c->res_node >= 0) {
                double rb = (double)c->out_ps[c->res_node], ob = (double)c->out_ps[i];
                if (rb > 0 && ob > rb) raw *= ob / rb;
            } else {
                raw = c->opt_a[d] + c->opt_b[d] * 3.0 / 7.0 * (double)(c->out_ps[i] * mb);
            }
            compute_op(r, d, OPK_ADD, i, j, raw);
            c_free(c, d, tb);
        }
        ns->n_temps = 0;
        for (int e = e0; e < e1; e++) {
            sim_buf *tg = &VIEW(r, c->in_slot[e], j)->grad;
            if (tg->off < 0) {
                const int64_t len = c->out_len[c->in_node[e]];
                const int64_t off = c_alloc(c, d, len, 0);
                *tg = BUF_NONE;
                tg->off = off;
                tg->len = len;
            } else {
                use_buf(r, d, tg);
            }
        }
        if (split_here) {
            /* the engine's order: the call's scratch, then the block B
             * keeps for W, then the scratch is freed */
            const int64_t sl = c->scr_len[2 * i + PHASE_BWD];
            const int64_t so = sl > 0 ? c_alloc(c, d, sl, 0) : -1;
            ns->wst_off = c->wst_len[i] > 0 ? c_alloc(c, d, c->wst_len[i], 0) : -1;
            if (so >= 0) c_free_block(c, d, so, sl);
        } else if (c->scr_len[2 * i + PHASE_BWD] > 0) {
            scratch(c, d, c->scr_len[2 * i + PHASE_BWD]);
        }
        zero_wait(c, d);
        const double bw = c->craw[((size_t)d * r->n + i) * PHASE_COUNT + PHASE_BWD];
        if (split_here) {
            /* B: the input gradient; the saved block, the output gradient
             * and the inputs stay for W */
            compute_op(r, d, OPK_BWD, i, j, bw * (1.0 - c->wfrac[i]));
        } else {
            compute_op(r, d, OPK_BWD, i, j, bw);
            if (ns->saved_off >= 0) c_free_block(c, d, ns->saved_off, ns->saved_len);
            ns->saved_off = -1;
            if (ns->grad.off >= 0) c_free(c, d, &ns->grad);
            ns->grad.off = -1;
        }
    }
    for (int e = c->uin_start[i]; e < c->uin_start[i + 1]; e++) dep_done(c, OPKEY(r->m, c->uin[e], j, 1), c->uin[e]);
    if (split_here) dep_done(c, OPKEY_W(r->n, r->m, i, j), i);
    else stash(c, d, j, r->m, -1);
    const int reads = !c->is_loss[i] && c->bwd_reads[i] && !split_here;
    for (int e = e0; e < e1; e++) {
        const int sl = c->in_slot[e];
        sim_view *q = VIEW(r, sl, j);
        if (reads) release_use(c, d, q);
        if (sl < r->n) continue; /* a local input: its gradient is in place */
        if (--q->grad_left > 0) continue;
        /* every consumer here is done: send the gradient home */
        const int pr = c->in_node[e];
        sim_view *ps = VIEW(r, pr, j);
        /* the first gradient to arrive is the output gradient, later ones are added to it
         * (written in place: a copy of a just-written struct stalls on store forwarding) */
        sim_buf *got = ps->grad.off < 0 ? &ps->grad : TMP(r, pr, j, ps->n_temps++);
        xfer(r, d, c->dev[pr], &q->grad, pr, j, 1, got);
        c_free(c, d, &q->grad);
        q->grad.off = -1;
    }
}

/* W of node i for micro-batch j (orders that split backwards): the weight
 * gradient, after its B; then what B kept for it is released: the saved
 * block, the output gradient and the inputs the backward reads. */
static void issue_w(run *r, int i, int j) {
    sim_ctx *c = r->c;
    const int d = c->dev[i];
    sim_view *ns = VIEW(r, i, j);
    compute_op(r, d, OPK_WGRAD, i, j, c->craw[((size_t)d * r->n + i) * PHASE_COUNT + PHASE_BWD] * c->wfrac[i]);
    if (ns->wst_off >= 0) c_free_block(c, d, ns->wst_off, c->wst_len[i]);
    ns->wst_off = -1;
    if (ns->saved_off >= 0) c_free_block(c, d, ns->saved_off, ns->saved_len);
    ns->saved_off = -1;
    if (ns->grad.off >= 0) c_free(c, d, &ns->grad);
    ns->grad.off = -1;
    if (c->bwd_reads[i])
        for (int e = c->in_start[i]; e < c->in_start[i + 1]; e++) release_use(c, d, VIEW(r, c->in_slot[e], j));
    stash(c, d, j, r->m, -1);
}

/* After a device's last operation: join its comm stream, then AdamW. */
static void issue_tail(run *r, int d) {
    sim_ctx *c = r->c;
    if (c->comm_seq[d] > 0) {
        if (c->mt[d] >= c->ct[d]) {
            c->ct[d] = c->mt[d];
            c->cp[d] = c->mp[d];
        }
        c->comm_waited[d] = c->comm_seq[d];
        release_deferred(c, d, c->comm_seq[d]);
    }
    zero_wait(c, d); /* a device without a backward (the loss alone) */
    const double bytes = (double)c->pbytes[d];
    if (bytes > 0) compute_op(r, d, OPK_OPT, -1, -1, c->opt_a[d] + c->opt_b[d] * bytes);
    else compute_dur(r, d, OPK_OPT, -1, -1, 0.0); /* no parameters: the engine launches nothing */
}

/* Static buffers of a used device and the step's opening ZERO ops. */
static void setup_device(run *r, int d) {
    sim_ctx *c = r->c;
    const graph *g = r->g;
    const int64_t fb = c->pbytes[d] > 0 ? c->pbytes[d] : 4;
    for (int k = 0; k < 4; k++) c_alloc(c, d, align_len(fb), 0); /* params, grads, m, v */
    if (c->ws_bytes > 0) c_alloc(c, d, align_len(c->ws_bytes), 0);
    c_alloc(c, d, align_len(4), 0); /* AdamW step counter */
    const int64_t BT = (int64_t)g->cfg.batch * g->cfg.seq_len;
    const int loss_here = c->loss_node >= 0 && c->dev[c->loss_node] == d;
    if (loss_here) {
        c_alloc(c, d, align_len(8), 0);
        c_alloc(c, d, align_len(BT * 4), 0);
    }
    if (c->emb_node >= 0 && c->dev[c->emb_node] == d) c_alloc(c, d, align_len(BT * 4), 0);
    c->static_b[d] = c->ar[d].top;
    if (c->p->bf16) /* the engine's rule (hw/exec/program.c): measured slower beside the bf16 forward */
        compute_op(r, d, OPK_ZERO, -1, -1, c->opt_b[d] / 7.0 * (double)fb);
    else
        zero_on_comm(r, d, c->opt_b[d] / 7.0 * (double)fb);
    if (loss_here) compute_op(r, d, OPK_ZERO, -1, -1, c->opt_b[d] / 7.0 * 8.0);
}


/* Cross-device pairs (producer k, remote device d) with their distinct
 * consumer counts, each node's distinct local consumers, and the view slot
 * of every input (see sim_view). Pairs are numbered by producer, then
 * device; the numbering only places views in memory. */
static void build_pairs(sim_ctx *c) {
    const int n = c->n, D = c->D;
    const int *dev = c->dev;
    int nx = 0;
    for (int k = 0; k < n; k++) {
        const int dk = dev[k];
        int *cnt = c->ucnt + (size_t)k * D;
        int local = 0;
        uint64_t mask = 0;
        for (int d = 0; d < D; d++) cnt[d] = 0;
        for (int e = c->ucons_start[k]; e < c->ucons_start[k + 1]; e++) {
            const int d = dev[c->ucons[e]];
            local += d == dk;
            cnt[d]++;
            mask |= 1ull << d;
        }
        mask &= ~(1ull << dk);
        c->local_uses[k] = local;
        c->xmask[k] = mask;
        for (; mask; mask &= mask - 1) c->xslot[(size_t)k * D + __builtin_ctzll(mask)] = nx++;
    }
    c->n_x = nx;
    for (int i = 0; i < n; i++) {
        const int d = dev[i];
        for (int e = c->in_start[i]; e < c->in_start[i + 1]; e++) {
            const int pr = c->in_node[e];
            /* both read, one kept (local or not follows the placement:
             * a branch here mispredicted); xslot of a local pair is stale */
            const int local = dev[pr] == d, remote = n + c->xslot[(size_t)pr * D + d];
            c->in_slot[e] = local ? pr : remote;
        }
    }
}

static inline void issue_op(run *r, uint32_t o) {
    const int i = (int)(o & 0xffff), j = (int)((o >> 16) & 0x7fff);
    if (o & OPW) issue_w(r, i, j & 0x3fff); /* only ever set on a backward */
    else if (o >> 31) issue_bwd(r, i, j);
    else issue_fwd(r, i, j);
}

/* sim_run's arguments against the context: every node on a device of the
 * profile (copied into c->dev), m >= 1 dividing the batch and within the
 * context's maximum, a known order, chunks only with interleaved, and
 * every parameter finite (and >= 0 but the launch overhead) in *prm (the
 * defaults for a NULL prm_in). PL_ERR_PLACEMENT_RANGE, PL_ERR_SCHEDULE or
 * PL_ERR_INVALID with c->err set. */
static pl_status check_run(sim_ctx *c, const int *placement, const schedule *sched, const sim_params *prm_in,
                           sim_params *prm) {
    const graph *g = c->g;
    const int n = c->n, D = c->D;
    for (int i = 0; i < n; i++) {
        if (placement[i] < 0 || placement[i] >= D)
            return sim_fail(c, PL_ERR_PLACEMENT_RANGE, "node %d (%s) is on device %d; the profile has devices 0..%d",
                        i, g->nodes[i].name, placement[i], D - 1);
        c->dev[i] = placement[i];
    }
    const int m = sched->micro_batches;
    if (m < 1 || g->cfg.batch % m != 0)
        return sim_fail(c, PL_ERR_SCHEDULE, "micro-batch count %d does not divide the batch of %d", m,
                    g->cfg.batch);
    if (m > c->M)
        return sim_fail(c, PL_ERR_SCHEDULE, "micro-batch count %d exceeds this context's maximum of %d", m, c->M);
    if ((int)sched->order < 0 || sched->order >= SCHED_ORDER_COUNT)
        return sim_fail(c, PL_ERR_SCHEDULE, "unknown schedule order %d", (int)sched->order);
    if (sched->chunks < 1 || (sched->chunks != 1 && sched->order != SCHED_INTERLEAVED))
        return sim_fail(c, PL_ERR_SCHEDULE, "chunks per device must be 1, or more with the interleaved schedule");
    if (prm_in) *prm = *prm_in;
    else sim_params_default(prm);
    /* Negative times or scales have no physical meaning; the launch
     * overhead alone may be negative (durations are clamped at 0). */
    for (int i = 0; i < SIM_N_PARAMS; i++) {
        double v = *sim_param_ptr(prm, i);
        if (!isfinite(v) || (v < 0 && !sim_param_signed(i)))
            return sim_fail(c, PL_ERR_INVALID, "simulator parameter %s is %g; it must be finite%s", sim_param_name(i),
                        v, sim_param_signed(i) ? "" : " and >= 0");
    }
    return PL_OK;
}

/* The placement (c->dev) laid out for m micro-batches of an order that
 * splits backwards or not: the cost caches at the micro-batch size, the
 * stages, the cross-device pairs, the used devices and their ranks (by
 * first node), each device's nodes, parameter bytes and share of the
 * orders (dstart: 2m ops a node, m more a node with a W op when split).
 * Returns the orders' total length. */
static int lay_out_devices(sim_ctx *c, int m, int split) {
    const int n = c->n, D = c->D;
    c->m = m;
    c->mb = c->g->cfg.batch / m;
    sim_ensure_costs(c, c->mb);
    sim_count_stages(c);
    build_pairs(c);
    int nu = 0;
    for (int d = 0; d < D; d++) c->rank[d] = -1;
    for (int i = 0; i < n; i++)
        if (c->rank[c->dev[i]] < 0) c->rank[c->dev[i]] = nu++;
    c->n_used = 0;
    for (int d = 0; d < D; d++)
        if (c->rank[d] >= 0) c->used[c->n_used++] = d;
    int off = 0;
    c->split = split;
    for (int d = 0; d < D; d++) c->nw_on[d] = 0;
    if (split)
        for (int i = 0; i < n; i++) c->nw_on[c->dev[i]] += c->has_w[i];
    for (int d = 0; d < D; d++) {
        c->dstart[d] = off;
        off += 2 * m * c->n_on[d] + m * c->nw_on[d];
        c->dn_start[d + 1] = c->dn_start[d] + c->n_on[d];
        c->next[d] = c->dn_start[d]; /* scratch: fill position */
        c->pbytes[d] = 0;
    }
    c->dstart[D] = off;
    for (int i = 0; i < n; i++) {
        const int d = c->dev[i];
        c->dnodes[c->next[d]++] = i;
        c->pbytes[d] += c->param_b[i];
    }
    return off;
}

/* The run's constants from the parameters and the schedule (transfers on
 * ideal per-link queues for the orders the engine does not run), its
 * counters at 0; the schedule and parameters kept to run the step again. */
static void run_init(run *r, sim_ctx *c, const schedule *sched, const sim_params *prm) {
    r->c = c;
    r->g = c->g;
    r->n = c->n;
    r->m = c->m;
    r->D = c->D;
    r->mb = c->mb;
    r->multi = c->n_used > 1;
    r->cs = prm->compute_scale;
    r->lo = prm->launch_overhead_us + (r->multi ? prm->multi_device_launch_us : 0.0);
    r->ts = prm->transfer_scale;
    r->tl = prm->transfer_latency_us;
    r->cont = prm->contention;
    r->tracing = c->trace_on && c->events;
    r->record = r->tracing || c->force_record;
    c->last_sched = *sched;
    c->last_prm = *prm;
    /* orders of several chunks a device (interleaved, the V orders; the
     * engine runs none of them): transfers on ideal per-link queues */
    r->ideal = schedule_rank_chunks(sched) > 1;
    if (r->ideal)
        for (int l = 0; l < r->D * r->D; l++) {
            c->lfree[l] = 0;
            c->llast[l] = -1;
        }
    r->n_ops = 0;
    r->n_transfers = 0;
    r->tbytes = 0;
}

/* Per-run state for orders of total length off: dependency counters (from
 * dep_init, rebuilt when m changed: they depend on the graph and m only),
 * the ready bits of forwards without inputs, every used device's arena,
 * streams, sequence numbers and counters; then the static buffers and
 * opening ZERO ops (setup_device). Node and pair states are written by
 * the forward that creates them. */
static void run_reset(run *r, int off) {
    sim_ctx *c = r->c;
    const int n = r->n, m = r->m, D = r->D;
    memset(c->issued, 0, (size_t)off);
    memset(c->rbits, 0, sizeof *c->rbits * ((size_t)off / 64 + 1));
    if (c->dep_init_m != m) { /* the counts depend on the graph and m only */
        for (int i = 0; i < n; i++) {
            const int df = c->uin_start[i + 1] - c->uin_start[i], db = 1 + c->ucons_start[i + 1] - c->ucons_start[i];
            int *dp = c->dep_init + OPKEY(m, i, 0, 0);
            for (int j = 0; j < m; j++) {
                dp[2 * j] = df;
                dp[2 * j + 1] = db;
            }
        }
        for (size_t k = 2 * (size_t)n * m; k < 3 * (size_t)n * m; k++) c->dep_init[k] = 1; /* W: its B */
        c->dep_init_m = m;
    }
    memcpy(c->dep, c->dep_init, sizeof *c->dep * (c->split ? 3 : 2) * (size_t)n * m);
    for (int i = 0; i < n; i++)
        if (c->uin_start[i + 1] == c->uin_start[i]) /* no inputs: its forwards are ready */
            for (int j = 0; j < m; j++) {
                int pos = c->pos_of[OPKEY(m, i, j, 0)];
                c->rbits[pos >> 6] |= 1ull << (pos & 63);
            }
    for (int u = 0; u < c->n_used; u++) {
        int d = c->used[u];
        c->ar[d].n_fr = 0;
        c->ar[d].top = c->ar[d].high = 0;
        c->n_deferred[d] = 0;
        c->deferred_min[d] = INT32_MAX;
        c->comm_seq[d] = c->comm_waited[d] = 0;
        c->ct[d] = c->mt[d] = 0;
        c->cp[d] = c->mp[d] = -1;
        c->zend[d] = 0;
        c->zop[d] = -2;
        c->pend[d] = 0;
        c->next[d] = c->dstart[d];
        c->inflight[d] = c->inflight_max[d] = 0;
    }
    memset(c->busy, 0, sizeof *c->busy * (size_t)D);
    memset(c->stash_cnt, 0, sizeof *c->stash_cnt * (size_t)D * m);
    c->reorders = 0;
    for (int u = 0; u < c->n_used; u++) setup_device(r, c->used[u]);
}

/* The engine's early-issue rule when no device's head op is ready: the
 * lowest used device with any ready op (a bit scan from its head). Returns
 * that op's position and sets *dev, or -1 when none is ready (a cycle). */
static int first_ready_early(const sim_ctx *c, int *dev) {
    const uint64_t *rb = c->rbits;
    for (int u = 0; u < c->n_used; u++) {
        const int d = c->used[u], end = c->dstart[d + 1];
        if (!c->left[d]) continue;
        const int k = c->next[d];
        int w = k >> 6;
        uint64_t bits = rb[w] & (~0ull << (k & 63));
        while (!bits && (w + 1) * 64 < end) bits = rb[++w];
        if (bits) {
            int pos = w * 64 + __builtin_ctzll(bits);
            if (pos < end) {
                *dev = d;
                return pos;
            }
        }
    }
    return -1;
}

/* The engine's issue loop over orders of total length off: devices take
 * turns issuing their head op when it is ready (active marks those); when
 * none can, the early-issue rule runs one ready op out of order; a device
 * whose last op is issued gets its tail (comm join, AdamW) after the
 * round, a device with nothing to do at the end. PL_ERR_SCHEDULE (c->err
 * naming the order) when no op is ready at all. */
static pl_status issue_loop(run *r, int off, const schedule *sched) {
    sim_ctx *c = r->c;
    uint8_t *const issued = c->issued;
    uint64_t *const rb = c->rbits;
    int *const next = c->next, *const left = c->left;
    const int nu_ = c->n_used;
    int remaining = off;
    c->active = 0;
    for (int u = 0; u < nu_; u++) {
        const int d = c->used[u];
        left[d] = c->dstart[d + 1] - c->dstart[d];
        if (left[d] && (rb[next[d] >> 6] >> (next[d] & 63) & 1)) c->active |= 1ull << d;
    }
    while (remaining > 0) {
        int progress = 0;
        uint64_t tails = 0;
        /* active devices in ascending order, re-read after every issue
         * (an issue can make a higher device's head ready this round) */
        for (int d = -1;;) {
            const uint64_t above = d < 63 ? c->active & (~0ull << (d + 1)) : 0;
            if (!above) break;
            d = __builtin_ctzll(above);
            const int k = next[d], end = c->dstart[d + 1];
            issued[k] = 1;
            rb[k >> 6] &= ~(1ull << (k & 63));
            int nk = k + 1;
            while (nk < end && issued[nk]) nk++;
            next[d] = nk;
            c->active &= ~(1ull << d);
            if (--left[d] == 0) tails |= 1ull << d;
            else if (rb[nk >> 6] >> (nk & 63) & 1) c->active |= 1ull << d;
            issue_op(r, c->seq[k]);
            remaining--;
            progress = 1;
        }
        if (!progress) {
            /* strict order would deadlock: the lowest device runs its first ready op early */
            int fd = -1;
            const int found = first_ready_early(c, &fd);
            if (found < 0)
                return sim_fail(c, PL_ERR_SCHEDULE, "the %s order cannot be scheduled on this placement (cycle)",
                            schedule_order_name(sched->order));
            issued[found] = 1;
            rb[found >> 6] &= ~(1ull << (found & 63));
            if (--left[fd] == 0) tails |= 1ull << fd;
            issue_op(r, c->seq[found]);
            remaining--;
            c->reorders++;
        }
        while (tails) { /* in device order */
            const int d = __builtin_ctzll(tails);
            tails &= tails - 1;
            issue_tail(r, d);
            next[d] = -1;
        }
    }
    for (int u = 0; u < nu_; u++) {
        const int d = c->used[u];
        if (next[d] >= 0) issue_tail(r, d); /* a device with nothing to do */
    }
    c->n_ops = r->n_ops;
    return PL_OK;
}

/* The finished run's result: the step (the last compute end plus the
 * fixed costs), per device memory, busy, idle and bubble against caps
 * (the profile's memory for a NULL caps), the first device over its cap,
 * transfers, reorders and the critical path; the trace's events sorted. */
static void fill_result(sim_ctx *c, const run *r, const sim_params *prm, const int64_t *caps, sim_result *res) {
    const int D = c->D;
    memset(res, 0, sizeof *res);
    res->n_devices = D;
    res->oom_device = -1;
    res->n_stages = c->S;
    double span = 0.0;
    int last = -1;
    for (int u = 0; u < c->n_used; u++) {
        const int d = c->used[u];
        if (c->ct[d] >= span) {
            span = c->ct[d];
            last = c->cp[d];
        }
    }
    c->last_op = last;
    c->recorded = r->record;
    res->step_us = span + prm->step_fixed_us + (r->multi ? prm->multi_device_start_us : 0.0);
    double bsum = 0.0;
    for (int d = 0; d < D; d++) {
        int64_t cap = caps ? caps[d] : c->p->devices[d].mem_bytes;
        res->cap_bytes[d] = cap;
        if (c->rank[d] < 0) continue;
        res->static_bytes[d] = c->static_b[d];
        res->peak_bytes[d] = c->ar[d].high;
        res->max_in_flight[d] = c->inflight_max[d];
        res->busy_us[d] = c->busy[d];
        res->idle_us[d] = res->step_us - c->busy[d];
        if (res->idle_us[d] < 0) res->idle_us[d] = 0;
        res->bubble[d] = c->busy[d] > 0 ? res->idle_us[d] / c->busy[d] : 0.0;
        bsum += res->bubble[d];
        if (cap > 0 && res->peak_bytes[d] > cap && !res->oom) {
            res->oom = 1;
            res->oom_device = d;
        }
    }
    res->n_used_devices = c->n_used;
    res->bubble_fraction = c->n_used ? bsum / c->n_used : 0.0;
    res->n_transfers = r->n_transfers;
    res->transfer_bytes = (double)r->tbytes;
    res->reorders = c->reorders;
    /* the path from 0 to span is gapless: transfer time is the rest */
    res->critical_path_len = c->chain[last].clen; /* last = -1: the empty chain */
    res->critical_compute_us = c->chain[last].ccomp;
    res->critical_transfer_us = span - res->critical_compute_us;
    if (r->tracing) {
        qsort(c->events, (size_t)c->n_events, sizeof *c->events, sim_event_cmp);
        c->have_events = 1;
    }
}

pl_status sim_run(sim_ctx *c, const int *placement, const schedule *sched, const int64_t *caps,
                  const sim_params *prm_in, sim_result *res) {
    if (!c) return PL_ERR_INVALID;
    c->err[0] = 0;
    c->last_op = -1;
    c->recorded = 0;
    c->lazy->crit_built = 0;
    c->have_events = 0;
    c->n_events = 0;
    if (!placement || !sched || !res) return sim_fail(c, PL_ERR_INVALID, "NULL argument");
    sim_params prm;
    pl_status st = check_run(c, placement, sched, prm_in, &prm);
    if (st != PL_OK) return st;
    const int off = lay_out_devices(c, sched->micro_batches, schedule_splits_backward(sched->order));
    if ((st = sim_order(c, sched)) != PL_OK) return st; /* fills pos_of too */
    run r;
    run_init(&r, c, sched, &prm);
    run_reset(&r, off);
    if ((st = issue_loop(&r, off, sched)) != PL_OK) return st;
    fill_result(c, &r, &prm, caps, res);
    return PL_OK;
}
