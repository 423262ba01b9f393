/*
 * sim_order.c: the per-device orders of a step's forwards and backwards
 * (what each device's compute stream is given, in what order), and the
 * stages of a placement they are built on:
 *   gpipe        F(0..m-1), then B(0..m-1)
 *   1f1b         the engine's order (hw/plan.c build_sequence): warm-up
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

/* gpipe and 1f1b: the engine's per-device order (hw/plan.c build_sequence). */
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
