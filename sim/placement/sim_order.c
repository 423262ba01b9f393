/*
 * sim_order.c: the per-device orders of a step's forwards and backwards
 * (what each device's compute stream is given, in what order), and the
 * stages of a placement they are built on:
 *   gpipe        F(0..m-1), then B(0..m-1)
 *   1f1b         the engine's order (hw/exec/program.c build_sequence): warm-up
 *                forwards by rank, then one forward and one backward
 *   interleaved  Megatron-LM's interleaved 1F1B over v chunks per device
 * sim_core.c's issue loop runs them; see the model at the top of sim_core.c.
 */
#include "sim_internal.h"
#include "sim_pipeline.h"


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

/* gpipe and 1f1b: the engine's per-device order (hw/exec/program.c build_sequence). */
void sim_order_engine(sim_ctx *c, int gpipe) {
    const int m = c->m;
    for (int u = 0; u < c->n_used; u++) {
        const int d = c->used[u], r = c->rank[d];
        uint32_t *a = c->seq + c->dstart[d];
        int k = 0;
        int w = c->n_used - 1 - r;
        if (w > m) w = m;
        for (int t = 0; t < 2 * m; t++) {
            int bwd, j;
            if (gpipe) {
                bwd = t >= m;
                j = bwd ? t - m : t;
            } else if (t < w) {
                bwd = 0;
                j = t;
            } else if (t < w + 2 * (m - w)) {
                int h = (t - w) / 2;
                if ((t - w) % 2 == 0) {
                    bwd = 0;
                    j = w + h;
                } else {
                    bwd = 1;
                    j = h;
                }
            } else {
                bwd = 1;
                j = (m - w) + (t - w - 2 * (m - w));
            }
            const int *nl = c->dnodes + c->dn_start[d], nn = c->dn_start[d + 1] - c->dn_start[d];
            const int base = c->dstart[d];
            if (!bwd) {
                for (int q = 0; q < nn; q++, k++) {
                    a[k] = OPC(nl[q], j, 0);
                    c->pos_of[OPKEY(m, nl[q], j, 0)] = base + k;
                }
            } else {
                for (int q = nn - 1; q >= 0; q--, k++) {
                    a[k] = OPC(nl[q], j, 1);
                    c->pos_of[OPKEY(m, nl[q], j, 1)] = base + k;
                }
            }
        }
    }
}

static inline int expand_stage(sim_ctx *c, uint32_t *a, int w, int k, int j, int ph) {
    int lo = c->st_lo[k], hi = c->st_hi[k];
    if (ph == 0)
        for (int i = lo; i <= hi; i++) a[w++] = OPC(i, j, 0);
    else
        for (int i = hi; i >= lo; i--) a[w++] = OPC(i, j, 1);
    return w;
}

/* interleaved: Megatron-LM's per-rank order on a contiguous chunk placement.
 * S = v*p stages over p devices, stage k on the device of stage k mod p,
 * m a multiple of p. Rank r runs virtual micro-batch t forward on chunk
 * (t mod pv)/p, backward on chunk v-1-(t mod pv)/p, micro-batch
 * (t / pv)*p + t mod p, with min(2(p-r-1) + (v-1)p, mv) warm-up forwards
 * (all of them when m == p), then one forward and one backward. */
pl_status sim_order_interleaved(sim_ctx *c, int v) {
    const int S = c->S, m = c->m;
    int p = c->n_used;
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
    const int N = m * v;
    for (int r = 0; r < p; r++) {
        int d = c->st_dev[r];
        uint32_t *a = c->seq + c->dstart[d];
        pipe_op *ops = c->pipe_tmp; /* the rank's order of chunk operations */
        pipe_order_rank(p, r, v, m, ops);
        int w = 0;
        for (int t = 0; t < 2 * N; t++) w = expand_stage(c, a, w, ops[t].chunk * p + r, ops[t].mb, ops[t].bwd);
    }
    return PL_OK;
}

int pipe_order_rank(int p, int r, int v, int m, pipe_op *out) {
    int k = 0;
    if (v <= 1) {
        int w = p - 1 - r;
        if (w > m) w = m;
        if (w < 0) w = 0;
        int nf = 0, nb = 0;
        for (; nf < w; nf++) out[k++] = (pipe_op){0, nf, 0};
        while (nf < m) {
            out[k++] = (pipe_op){0, nf++, 0};
            out[k++] = (pipe_op){0, nb++, 1};
        }
        while (nb < m) out[k++] = (pipe_op){0, nb++, 1};
        return k;
    }
    const int N = m * v, pv = p * v;
    int warm = m == p ? N : 2 * (p - r - 1) + (v - 1) * p;
    if (warm > N) warm = N;
    int nf = 0, nb = 0;
#define FWD_ONE()                                                                       \
    do {                                                                                \
        out[k++] = (pipe_op){(nf % pv) / p, (nf / pv) * p + nf % p, 0};                 \
        nf++;                                                                           \
    } while (0)
#define BWD_ONE()                                                                       \
    do {                                                                                \
        out[k++] = (pipe_op){v - 1 - (nb % pv) / p, (nb / pv) * p + nb % p, 1};         \
        nb++;                                                                           \
    } while (0)
    for (int t = 0; t < warm; t++) FWD_ONE();
    for (int t = 0; t < N - warm; t++) {
        FWD_ONE();
        BWD_ONE();
    }
    while (nb < N) BWD_ONE();
#undef FWD_ONE
#undef BWD_ONE
    return k;
}

/* Expand one op of a rank's order over the nodes lo..hi of a stage (or,
 * lo < 0, over device d's nodes): F in node order, B and W in reverse, W
 * only for nodes with a W op. */
static int expand_split(sim_ctx *c, uint32_t *a, int w, const schedule_op *op, int lo, int hi, int d) {
    const int *nl = NULL;
    int nn = 0;
    if (lo < 0) {
        nl = c->dnodes + c->dn_start[d];
        nn = c->dn_start[d + 1] - c->dn_start[d];
    } else {
        nn = hi - lo + 1;
    }
#define NODE(q) (nl ? nl[q] : lo + (q))
    const int j = op->mb;
    if (op->kind == SOP_F)
        for (int q = 0; q < nn; q++) a[w++] = OPC(NODE(q), j, 0);
    else if (op->kind == SOP_W)
        for (int q = nn - 1; q >= 0; q--) {
            if (c->has_w[NODE(q)]) a[w++] = OPC(NODE(q), j, 1) | OPW;
        }
    else { /* B, or a fused BW: the B ops, then (BW) their W ops right after */
        for (int q = nn - 1; q >= 0; q--) a[w++] = OPC(NODE(q), j, 1);
        if (op->kind == SOP_BW)
            for (int q = nn - 1; q >= 0; q--)
                if (c->has_w[NODE(q)]) a[w++] = OPC(NODE(q), j, 1) | OPW;
    }
#undef NODE
    return w;
}

pl_status sim_order_split(sim_ctx *c, schedule_order o) {
    const int m = c->m, p = c->n_used, v = schedule_v_chunks(o);
    if (m > 0x3fff)
        return sim_fail(c, PL_ERR_SCHEDULE, "%s takes at most %d micro-batches in the simulator", schedule_order_name(o),
                        0x3fff);
    char msg[160];
    if (schedule_check_pipeline(o, p, m, 0, msg, sizeof msg) != PL_OK) return sim_fail(c, PL_ERR_SCHEDULE, "%s", msg);
    if (v == 2) {
        /* a V: runs 0..p-1 on p devices, then back; the turn's two chunks
         * are one run (2p-1 runs), split in halves (chunk 1 may be empty) */
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
        /* stages 0..2p-1 in the st_ arrays: the turn split, the rest moved up */
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
    }
    for (int u = 0; u < p; u++) {
        /* rank: 1f1b's (devices by first node) for one chunk; the V's
         * position of the device's first run for two (the same here:
         * the V's first p runs are the p devices in first-node order) */
        const int d = c->used[u], r = c->rank[d];
        const int n_ops = schedule_rank_ops(o, p, r, m, c->sched_ops);
        if (n_ops < 0) return sim_fail(c, PL_ERR_NOMEM, "%s: no order for rank %d", schedule_order_name(o), r);
        uint32_t *a = c->seq + c->dstart[d];
        int w = 0;
        for (int k = 0; k < n_ops; k++) {
            const schedule_op *op = &c->sched_ops[k];
            if (v == 2) {
                const int st = schedule_stage_of(o, p, r, op->chunk);
                w = expand_split(c, a, w, op, c->st_lo[st], c->st_hi[st], d);
            } else {
                w = expand_split(c, a, w, op, -1, -1, d);
            }
        }
        if (w != c->dstart[d + 1] - c->dstart[d])
            return sim_fail(c, PL_ERR_SCHEDULE, "%s: rank %d's order has %d ops, expected %d", schedule_order_name(o), r,
                            w, c->dstart[d + 1] - c->dstart[d]);
        for (int k = 0; k < w; k++) {
            const uint32_t q = a[k];
            const int i = (int)(q & 0xffff);
            const size_t key = q & OPW ? OPKEY_W(c->n, m, i, (q >> 16) & 0x3fff)
                                       : OPKEY(m, i, (q >> 16) & 0x7fff, q >> 31);
            c->pos_of[key] = c->dstart[d] + k;
        }
    }
    return PL_OK;
}
