/*
 * sim_order.c: the per-device orders of a step's forwards and backwards
 * (what each device's compute stream is given, in what order), and the
 * stages of a placement they are built on. The orders themselves are
 * core/schedule.c's (schedule_rank_ops: one list of (kind, chunk,
 * micro-batch) ops per rank, the engine's too); this file only expands
 * each op over the nodes it covers:
 *   one chunk per rank (gpipe, 1f1b, interleaved of v = 1, zb-h1, zb-h2):
 *                the device's nodes, whatever the placement
 *   interleaved  (v > 1) chunk c of rank r is the placement's run of nodes
 *                c*p + r (a contiguous chunk placement: v*p runs cycling
 *                through the p devices)
 *   zb-v, dualpipev  a V: runs 0..p-1 on p devices and back, the turn's
 *                two chunks one run split in halves
 * sim_core.c's issue loop runs them; see the model at the top of sim_core.c.
 */
#include "sim_internal.h"


/* Stages (maximal runs of consecutive nodes on one device): their count,
 * and the nodes on each device. */
void sim_count_stages(sim_ctx *c) {
    const int n = c->n;
    int S = 1; /* n >= 1 */
    for (int d = 0; d < c->D; d++) c->n_on[d] = 0;
    c->n_on[c->dev[0]]++;
    for (int i = 1; i < n; i++) {
        c->n_on[c->dev[i]]++;
        S += c->dev[i] != c->dev[i - 1];
    }
    c->S = S;
}

/* The stages themselves (the interleaved order needs them). */
void sim_build_stages(sim_ctx *c) {
    int S = 0;
    for (int i = 0; i < c->n; i++) {
        const int d = c->dev[i];
        if (i == 0 || c->dev[i - 1] != d) {
            c->st_lo[S] = i;
            c->st_dev[S] = d;
            S++;
        }
        c->st_hi[S - 1] = i;
    }
}

/* Put op code q (node i, micro-batch j; a backward when b, a W when w)
 * at position pos of the orders, and pos into pos_of. */
static SIM_HOT_INLINE void put_op(sim_ctx *c, int pos, int i, int j, int b, int w) {
    c->seq[pos] = OPC(i, j, b) | (w ? OPW : 0u);
    c->pos_of[w ? OPKEY_W(c->n, c->m, i, j) : OPKEY(c->m, i, j, b)] = pos;
}

/* Expand one op of a rank's order over nodes, from position pos of the
 * orders (c->seq; pos_of too): nl[0 .. nn) when nl is given (a device's
 * nodes), else lo .. lo+nn-1 (a run of the placement). F in node order,
 * B and W in reverse, W only for nodes with a W op; a fused BW is the B
 * ops, then, when the run's order splits backwards (DualPipeV's
 * overlapped phases), their W ops right after. Returns the next position. */
static SIM_HOT_INLINE int expand_op(sim_ctx *c, int pos, const schedule_op *op, const int *nl, int lo, int nn) {
#define NODE(q) (nl ? nl[q] : lo + (q))
    const int j = op->mb;
    if (op->kind == SOP_F)
        for (int q = 0; q < nn; q++) put_op(c, pos++, NODE(q), j, 0, 0);
    else if (op->kind == SOP_W)
        for (int q = nn - 1; q >= 0; q--) {
            if (c->has_w[NODE(q)]) put_op(c, pos++, NODE(q), j, 1, 1);
        }
    else { /* B, or a fused BW */
        for (int q = nn - 1; q >= 0; q--) put_op(c, pos++, NODE(q), j, 1, 0);
        if (op->kind == SOP_BW && c->split)
            for (int q = nn - 1; q >= 0; q--)
                if (c->has_w[NODE(q)]) put_op(c, pos++, NODE(q), j, 1, 1);
    }
#undef NODE
    return pos;
}

/* interleaved (v > 1): the placement must be v*p runs of nodes with run k
 * on the device of run k mod p, and m a multiple of p. Builds the runs
 * (st_lo, st_hi, st_dev); PL_ERR_SCHEDULE with c->err set otherwise. */
static pl_status check_interleaved(sim_ctx *c, int v) {
    const int m = c->m, p = c->n_used;
    sim_build_stages(c);
    const int S = c->S;
    if (S != v * p)
        return sim_fail(c, PL_ERR_SCHEDULE,
                    "interleaved with %d chunks needs a contiguous chunk placement: %d runs of nodes "
                    "over %d devices, expected %d",
                    v, S, p, v * p);
    for (int k = p; k < S; k++)
        if (c->st_dev[k] != c->st_dev[k % p])
            return sim_fail(c, PL_ERR_SCHEDULE,
                        "interleaved needs chunks cycling through the devices in the same order: run %d "
                        "is on device %d, expected %d",
                        k, c->st_dev[k], c->st_dev[k % p]);
    if (m % p != 0)
        return sim_fail(c, PL_ERR_SCHEDULE,
                    "interleaved needs the micro-batch count (%d) to be a multiple of the pipeline "
                    "depth (%d devices)",
                    m, p);
    return PL_OK;
}

/* The V orders (zb-v, dualpipev): runs 0..p-1 on p devices, then back;
 * the turn's two chunks are one run (2p-1 runs), split in halves (chunk 1
 * may be empty). Leaves the 2p stages in st_lo, st_hi, st_dev (the turn
 * split, the rest moved up); PL_ERR_SCHEDULE with c->err set otherwise. */
static pl_status build_v_stages(sim_ctx *c, schedule_order o) {
    const int p = c->n_used;
    sim_build_stages(c);
    const int S = c->S;
    if (S != 2 * p - 1)
        return sim_fail(c, PL_ERR_SCHEDULE,
                        "%s needs a V placement: %d runs of nodes over %d devices, expected %d (devices 0..p-1 "
                        "and back, the turn's two chunks on one device)",
                        schedule_order_name(o), S, p, 2 * p - 1);
    for (int k = 0; k < p - 1; k++)
        if (c->st_dev[2 * p - 2 - k] != c->st_dev[k])
            return sim_fail(c, PL_ERR_SCHEDULE,
                            "%s needs a V placement: run %d is on device %d, run %d on device %d (expected the "
                            "same device)",
                            schedule_order_name(o), k, c->st_dev[k], 2 * p - 2 - k, c->st_dev[2 * p - 2 - k]);
    for (int k = S - 1; k >= p; k--) {
        c->st_lo[k + 1] = c->st_lo[k];
        c->st_hi[k + 1] = c->st_hi[k];
        c->st_dev[k + 1] = c->st_dev[k];
    }
    const int lo = c->st_lo[p - 1], hi = c->st_hi[p - 1], mid = lo + (hi - lo) / 2;
    c->st_hi[p - 1] = mid;
    c->st_lo[p] = mid + 1;
    c->st_hi[p] = hi;
    c->st_dev[p] = c->st_dev[p - 1];
    return PL_OK;
}

/* Every rank's order of sched over p ranks (core/schedule.c) in
 * c->sched_ops, rank r's from ord_start[r]; kept from the last run while
 * the schedule and p are the same (the lists depend on nothing else).
 * PL_ERR_NOMEM (c->err set) when core builds none. */
static pl_status rank_orders(sim_ctx *c, const schedule *sched, int p) {
    if (c->ord_p == p && c->ord_sched.order == sched->order && c->ord_sched.chunks == sched->chunks &&
        c->ord_sched.micro_batches == sched->micro_batches)
        return PL_OK;
    c->ord_p = 0;
    const long cap = 3L * c->M * (c->n + 1), most = schedule_max_ops(sched);
    long off = 0;
    for (int r = 0; r < p; r++) {
        const int n = off + most <= cap ? schedule_rank_ops(sched, p, r, c->sched_ops + off) : -1;
        if (n < 0)
            return sim_fail(c, PL_ERR_NOMEM, "%s: no order for rank %d", schedule_order_name(sched->order), r);
        c->ord_start[r] = (int)off;
        off += n;
    }
    c->ord_start[p] = (int)off;
    c->ord_sched = *sched;
    c->ord_p = p;
    return PL_OK;
}

pl_status sim_order(sim_ctx *c, const schedule *sched) {
    const schedule_order o = sched->order;
    if (o == SCHED_DUALPIPE) /* two directions: the layout simulator's order */
        return sim_fail(c, PL_ERR_SCHEDULE, "dualpipe runs in the layout simulator only (placer layout --layout "
                        "...,sched=dualpipe); the placement simulator runs dualpipev");
    const int m = c->m, p = c->n_used, v = schedule_rank_chunks(sched);
    pl_status st = PL_OK;
    if (v > 1 && o == SCHED_INTERLEAVED) {
        st = check_interleaved(c, v);
    } else if (c->split) {
        if (m > 0x3fff)
            return sim_fail(c, PL_ERR_SCHEDULE, "%s takes at most %d micro-batches in the simulator",
                            schedule_order_name(o), 0x3fff);
        char msg[160];
        if (schedule_check_pipeline(o, p, m, 0, msg, sizeof msg) != PL_OK)
            return sim_fail(c, PL_ERR_SCHEDULE, "%s", msg);
        if (v == 2) st = build_v_stages(c, o);
    }
    if (st != PL_OK || (st = rank_orders(c, sched, p)) != PL_OK) return st;
    for (int u = 0; u < p; u++) {
        /* rank: devices by first node (1f1b's; the V's and interleaved's
         * position of the device's first run are the same: their first p
         * runs are the p devices in first-node order) */
        const int d = c->used[u], r = c->rank[d];
        const schedule_op *ops = c->sched_ops + c->ord_start[r];
        const int n_ops = c->ord_start[r + 1] - c->ord_start[r];
        const int *nl = c->dnodes + c->dn_start[d], nn = c->dn_start[d + 1] - c->dn_start[d];
        int pos = c->dstart[d];
        for (int k = 0; k < n_ops; k++) {
            const schedule_op *op = &ops[k];
            if (v == 1) {
                pos = expand_op(c, pos, op, nl, 0, nn);
            } else {
                const int sg = schedule_stage_of(o, p, r, op->chunk);
                pos = expand_op(c, pos, op, NULL, c->st_lo[sg], c->st_hi[sg] - c->st_lo[sg] + 1);
            }
        }
        if (pos != c->dstart[d + 1])
            return sim_fail(c, PL_ERR_SCHEDULE, "%s: rank %d's order has %d ops, expected %d", schedule_order_name(o), r,
                            pos - c->dstart[d], c->dstart[d + 1] - c->dstart[d]);
    }
    return PL_OK;
}
