/*
 * schedule.c: schedule names, parsing and validation, and the one home of
 * every pipeline order: schedule_rank_ops writes rank r's list of
 * (kind, chunk, micro-batch) ops for any order, which both simulators
 * (sim/placement/sim_order.c, sim/layout/layout_expand.c) and the engine
 * (hw/exec/program.c) expand over their own nodes or layers. A new order
 * is written here (one order_* function and a case in schedule_rank_ops),
 * named in schedule_order_name, and tested in tests/core/test_schedule.c.
 */
#include "schedule.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *schedule_order_name(schedule_order o) {
    switch (o) {
    case SCHED_GPIPE: return "gpipe";
    case SCHED_1F1B: return "1f1b";
    case SCHED_INTERLEAVED: return "interleaved";
    case SCHED_ZB_H1: return "zb-h1";
    case SCHED_ZB_H2: return "zb-h2";
    case SCHED_ZB_V: return "zb-v";
    case SCHED_DUALPIPEV: return "dualpipev";
    case SCHED_DUALPIPE: return "dualpipe";
    default: return "unknown";
    }
}

int schedule_order_names(char *buf, size_t len, unsigned skip) {
    int n = 0, left = 0, total = 0;
    for (int o = 0; o < SCHED_ORDER_COUNT; o++) left += !(skip >> o & 1u);
    if (len > 0) buf[0] = 0;
    for (int o = 0; o < SCHED_ORDER_COUNT; o++) {
        if (skip >> o & 1u) continue;
        const char *sep = n == 0 ? "" : n == left - 1 ? " or " : ", ";
        const size_t at = (size_t)total < len ? (size_t)total : len;
        const int w = snprintf(len > at ? buf + at : NULL, len > at ? len - at : 0, "%s%s", sep,
                               schedule_order_name((schedule_order)o));
        if (w > 0) total += w;
        n++;
    }
    return total;
}

pl_status schedule_parse_order(const char *text, schedule_order *out, char *msg, size_t len) {
    for (int o = 0; o < SCHED_ORDER_COUNT; o++)
        if (text && strcmp(text, schedule_order_name((schedule_order)o)) == 0) {
            *out = (schedule_order)o;
            return PL_OK;
        }
    char names[160];
    schedule_order_names(names, sizeof names, 1u << SCHED_DUALPIPE); /* the placement path's list: dualpipe is the
                                                                       layout simulator's (placer layout sched=) */
    return pl_fail(msg, len, PL_ERR_SCHEDULE, "unknown schedule '%s' (use %s)", text ? text : "", names);
}

pl_status schedule_parse_micro_batches(const char *text, int *out, char *msg, size_t len) {
    if (!text || !*text)
        return pl_fail(msg, len, PL_ERR_SCHEDULE, "micro-batch count is empty (use a positive integer)");
    errno = 0;
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (errno || *end || v <= 0 || v > 1000000)
        return pl_fail(msg, len, PL_ERR_SCHEDULE,
                       "micro-batch count '%s' is not a positive integer", text);
    *out = (int)v;
    return PL_OK;
}

pl_status schedule_validate(const schedule *s, int batch, char *msg, size_t len) {
    if (s->micro_batches < 1)
        return pl_fail(msg, len, PL_ERR_SCHEDULE, "micro-batch count must be at least 1");
    if (batch % s->micro_batches != 0)
        return pl_fail(msg, len, PL_ERR_SCHEDULE,
                       "micro-batch count %d does not divide the batch of %d", s->micro_batches, batch);
    if (s->order < 0 || s->order >= SCHED_ORDER_COUNT)
        return pl_fail(msg, len, PL_ERR_SCHEDULE, "unknown schedule order");
    if (s->chunks < 1)
        return pl_fail(msg, len, PL_ERR_SCHEDULE, "chunks per device must be at least 1");
    if (s->chunks != 1 && s->order != SCHED_INTERLEAVED)
        return pl_fail(msg, len, PL_ERR_SCHEDULE, "chunks > 1 needs the interleaved schedule");
    if (s->paired && s->order != SCHED_1F1B && s->order != SCHED_INTERLEAVED)
        return pl_fail(msg, len, PL_ERR_SCHEDULE, "paired forwards and backwards (the EP all-to-all overlap) need 1f1b "
                                                  "or interleaved, not %s", schedule_order_name(s->order));
    return PL_OK;
}

/* ---- the per-rank orders ------------------------------------------------- */

int schedule_splits_backward(schedule_order o) {
    return o == SCHED_ZB_H1 || o == SCHED_ZB_H2 || o == SCHED_ZB_V || o == SCHED_DUALPIPEV || o == SCHED_DUALPIPE;
}

int schedule_rank_chunks(const schedule *s) {
    return s->order == SCHED_INTERLEAVED ? s->chunks : schedule_v_chunks(s->order);
}

int schedule_max_ops(const schedule *s) {
    if (!s) return 0;
    return (schedule_splits_backward(s->order) ? 3 : 2) * schedule_rank_chunks(s) * s->micro_batches;
}

pl_status schedule_check_pipeline(schedule_order o, int p, int m, int stages, char *msg, size_t len) {
    if (p < 1 || m < 1) return pl_fail(msg, len, PL_ERR_SCHEDULE, "a pipeline needs at least one rank and one micro-batch");
    if (o == SCHED_DUALPIPEV && m < 2 * p)
        return pl_fail(msg, len, PL_ERR_SCHEDULE,
                       "dualpipev needs at least 2 micro-batches per pipeline rank: %d micro-batches over %d ranks "
                       "(use %d or more)",
                       m, p, 2 * p);
    if (o == SCHED_DUALPIPE && (p % 2 || m % 2 || m < 2 * p))
        return pl_fail(msg, len, PL_ERR_SCHEDULE,
                       "dualpipe needs an even rank count and an even micro-batch count of at least 2 per rank "
                       "(half each way): %d micro-batches over %d ranks (use %s%d or more)",
                       m, p, p % 2 ? "an even pp and " : "", 2 * (p + p % 2));
    if (schedule_v_chunks(o) == 2 && stages > 0 && stages != 2 * p)
        return pl_fail(msg, len, PL_ERR_SCHEDULE,
                       "%s needs two stages per rank in a V (stage r and stage 2p-1-r on rank r): %d stages over %d "
                       "ranks, expected %d%s",
                       schedule_order_name(o), stages, p, 2 * p, stages % 2 ? " (an odd stage count cannot fold)" : "");
    return PL_OK;
}

static int put(schedule_op *out, int k, int kind, int chunk, int mb, int overlap) {
    out[k] = (schedule_op){
        .mb = mb, .chunk = (unsigned short)chunk, .kind = (unsigned char)kind, .overlap = (unsigned char)overlap};
    return k + 1;
}

/* 1f1b (fused backwards) and zb-h1: w = min(m, p-1-r) warm-up forwards,
 * then one forward and one backward; zb-h1 splits each backward and keeps
 * r W passes pending (the drain's B passes of rank r arrive r B-times after
 * the last rank's, which the pending W passes fill), running the rest. */
static int order_one_f_one_b(int p, int r, int m, int zb, int paired, schedule_op *out) {
    int w = p - 1 - r + (paired ? 1 : 0);
    if (w > m) w = m;
    int k = 0, nf = 0, nb = 0, nw = 0;
    while (nf < w) k = put(out, k, SOP_F, 0, nf++, 0);
    while (nb < m) {
        if (nf < m) k = put(out, k, SOP_F, 0, nf++, paired);
        if (!zb) {
            k = put(out, k, SOP_BW, 0, nb++, 0);
            continue;
        }
        k = put(out, k, SOP_B, 0, nb++, 0);
        if (nb - nw > r) k = put(out, k, SOP_W, 0, nw++, 0);
    }
    while (nw < m && zb) k = put(out, k, SOP_W, 0, nw++, 0);
    return k;
}

/* interleaved, v > 1 chunks per rank (m a multiple of p): Megatron-LM's
 * forward_backward_pipelining_with_interleaving. Virtual micro-batch t
 * (0 .. mv-1) is micro-batch (t / pv)*p + t mod p; its forward runs on
 * chunk (t mod pv)/p, its backward on chunk v-1-(t mod pv)/p (the
 * backwards walk the chunks from the last). */
static int interleaved_mb(int t, int p, int v) { return (t / (p * v)) * p + t % p; }

static int order_interleaved(int p, int r, int v, int m, int paired, schedule_op *out) {
    const int n = m * v, pv = p * v;
    int warm = m == p ? n : 2 * (p - r - 1) + (v - 1) * p + (paired ? 1 : 0);
    if (warm > n) warm = n;
    int k = 0, nf = 0, nb = 0;
    while (nf < warm) {
        k = put(out, k, SOP_F, (nf % pv) / p, interleaved_mb(nf, p, v), 0);
        nf++;
    }
    while (nb < n) {
        if (nf < n) {
            k = put(out, k, SOP_F, (nf % pv) / p, interleaved_mb(nf, p, v), paired);
            nf++;
        }
        k = put(out, k, SOP_BW, v - 1 - (nb % pv) / p, interleaved_mb(nb, p, v), 0);
        nb++;
    }
    return k;
}

/* DeepSeek's DualPipeV and DualPipe, phase by phase (the DualPipe repository's
 * two step functions, which are one program): a rank's local chunk c's
 * forwards and backwards each take micro-batches in order; a split
 * backward queues its W, which a later W op runs (first in, first out).
 * DualPipeV: P = p ranks, rank h = r, M = m micro-batches through every
 * chunk, the first pair of the main phase apart on the last rank.
 * DualPipe: the program runs over the half ranks, P = p/2, h = min(r,
 * p-1-r), M = m/2 micro-batches each way, the middle ranks (h = P-1) run
 * the first pair apart; a rank of the second half (r >= p/2) swaps its
 * chunks (its local chunk 0 is the up direction); local chunk c of
 * direction d writes chunk d and micro-batch d M + i. */
typedef struct {
    schedule_op *out;
    int k, nf[2], nb[2], wq[64 * 1024], wh, wt; /* wq: queued W (chunk << 24 | mb) */
    int dual, swap, M;                          /* dualpipe: two directions, this rank's chunk swap, m / 2 */
} dpv;

static int dpv_chunk(const dpv *s, int c) { return s->swap ? 1 - c : c; }
static int dpv_mb(const dpv *s, int c, int i) { return s->dual ? dpv_chunk(s, c) * s->M + i : i; }
static void dpv_f(dpv *s, int c, int overlap) {
    s->k = put(s->out, s->k, SOP_F, dpv_chunk(s, c), dpv_mb(s, c, s->nf[c]++), overlap);
}
static void dpv_b(dpv *s, int c, int zb) {
    const int mb = dpv_mb(s, c, s->nb[c]++);
    if (zb) s->wq[s->wt++] = dpv_chunk(s, c) << 24 | mb;
    s->k = put(s->out, s->k, zb ? SOP_B : SOP_BW, dpv_chunk(s, c), mb, 0);
}
static void dpv_w(dpv *s) {
    const int e = s->wq[s->wh++];
    s->k = put(s->out, s->k, SOP_W, e >> 24, e & 0xffffff, 0);
}

/* The eight phases over P half ranks, this one h, M micro-batches a chunk. */
static void dual_phases(dpv *s, int P, int h, int M) {
    for (int i = 0; i < 2 * (P - h - 1); i++) dpv_f(s, 0, 0);        /* 1: nF0 */
    for (int i = 0; i < h + 1; i++) { dpv_f(s, 0, 0); dpv_f(s, 1, 0); } /* 2: nF0F1 */
    for (int i = 0; i < P - h - 1; i++) { dpv_b(s, 1, 1); dpv_w(s); dpv_f(s, 1, 0); } /* 3: nB1W1F1 */
    for (int i = 0; i < M - 2 * P + h + 1; i++) { /* 4: nF0B1F1B0, overlapped pairs */
        /* the last (DualPipeV) or middle (DualPipe) rank's first pair runs apart (DeepSeek: a smaller bubble) */
        dpv_f(s, 0, !(i == 0 && h == P - 1));
        dpv_b(s, 1, 0);
        dpv_f(s, 1, 1);
        dpv_b(s, 0, 0);
    }
    for (int i = 0; i < P - h - 1; i++) { dpv_b(s, 1, 0); dpv_f(s, 1, 1); dpv_b(s, 0, 0); } /* 5: nB1F1B0 */
    int zb = 0;
    for (int i = 0; i < h + 1; i++) { /* 6: nB1B0, the second half split */
        if (i == (h + 1) / 2 && h % 2 == 1) zb = 1;
        dpv_b(s, 1, zb);
        if (i == (h + 1) / 2 && h % 2 == 0) zb = 1;
        dpv_b(s, 0, zb);
    }
    for (int i = 0; i < P - h - 1; i++) { dpv_w(s); dpv_b(s, 0, 1); } /* 7: nWB0 */
    while (s->wh < s->wt) dpv_w(s); /* 8: nW (h + 1 of them) */
}

static int order_dualpipev(int p, int r, int m, schedule_op *out) {
    if (m < 2 * p || 2 * m > (int)(sizeof ((dpv *)0)->wq / sizeof(int))) return -1;
    dpv *s = calloc(1, sizeof *s);
    if (!s) return -1;
    s->out = out;
    dual_phases(s, p, r, m);
    const int k = s->k;
    free(s);
    return k;
}

static int order_dualpipe(int p, int r, int m, schedule_op *out) {
    if (schedule_check_pipeline(SCHED_DUALPIPE, p, m, 0, NULL, 0) != PL_OK ||
        m > (int)(sizeof ((dpv *)0)->wq / sizeof(int)))
        return -1;
    dpv *s = calloc(1, sizeof *s);
    if (!s) return -1;
    const int P = p / 2, h = r < p - 1 - r ? r : p - 1 - r;
    s->out = out;
    s->dual = 1;
    s->swap = r >= P;
    s->M = m / 2;
    dual_phases(s, P, h, m / 2);
    const int k = s->k;
    free(s);
    return k;
}

/* zb-v: the V-shaped zero-bubble order (Qi et al., NeurIPS 2024, the
 * paper's ZB-V figure; PyTorch's ScheduleZBVZeroBubble builds the same
 * order), written down phase by phase for rank r of p, chunk 0 at stage r
 * and chunk 1 at stage 2p-1-r, over n = max(m, 2p) micro-batches:
 *   1. 2(p-r)-1 forwards of chunk 0;
 *   2. r pairs: a chunk-1 forward, a chunk-0 forward (2p-1 held now);
 *   3. p-r times: chunk-1 F, B, W (the V's turn: stage 2p-1-r's backward
 *      follows its forward by the 2r stages below it);
 *   4. steady: chunk-0 F (while any are left), B, W; chunk-1 F, B, W,
 *      until every chunk-1 forward has run (2p held at most: each F is
 *      followed by a B and W before the next F of that chunk);
 *   5. drain: r pairs of B0 B1 (W deferred), then p-r times B0 and one
 *      deferred chunk-0 W, then the remaining chunk-1 Ws, then chunk-0 Ws.
 * At F = B = W this leaves no idle time inside a rank's span for m >= 2p
 * (measured over p <= 16, m <= 64; tests/core/test_schedule.c). For
 * m < 2p the order of n = 2p micro-batches is taken and the ops of
 * micro-batches m .. n-1 dropped: dropping a micro-batch from every rank
 * keeps a deadlock-free order deadlock-free (its ops depend only on its
 * own micro-batch), and the memory only shrinks; the bubble then is not 0. */
static int order_zbv(int p, int r, int m, schedule_op *out) {
    const int n = m > 2 * p ? m : 2 * p;
    int k = 0, f0 = 0, f1 = 0, b0 = 0, b1 = 0;
#define ZBV(kind, c, j) do { const int j_ = (j); if (j_ < m) k = put(out, k, kind, c, j_, 0); } while (0)
    for (int i = 0; i < 2 * (p - r) - 1; i++) ZBV(SOP_F, 0, f0++);
    for (int i = 0; i < r; i++) {
        ZBV(SOP_F, 1, f1++);
        ZBV(SOP_F, 0, f0++);
    }
    for (int i = 0; i < p - r; i++) {
        ZBV(SOP_F, 1, f1++);
        ZBV(SOP_B, 1, b1);
        ZBV(SOP_W, 1, b1++);
    }
    while (f1 < f0 || f0 < n) {
        if (f0 < n) ZBV(SOP_F, 0, f0++);
        ZBV(SOP_B, 0, b0);
        ZBV(SOP_W, 0, b0++);
        ZBV(SOP_F, 1, f1++);
        ZBV(SOP_B, 1, b1);
        ZBV(SOP_W, 1, b1++);
    }
    int w0 = b0, w1 = b1;
    for (int i = 0; i < r; i++) {
        ZBV(SOP_B, 0, b0++);
        ZBV(SOP_B, 1, b1++);
    }
    for (int i = 0; i < p - r; i++) {
        ZBV(SOP_B, 0, b0++);
        ZBV(SOP_W, 0, w0++);
    }
    while (w1 < b1) ZBV(SOP_W, 1, w1++);
    while (w0 < b0) ZBV(SOP_W, 0, w0++);
#undef ZBV
    return k;
}

/* zb-h2: a list schedule at unit costs (F = B = W = 1, free transfers)
 * over all p ranks at once, each rank taking, whenever it is free, the op
 * ready earliest, ties broken B before F before W (B before F is 1F1B's
 * rule; W fills what is left), a later stage's op first; a forward only
 * while the rank holds fewer than lim_b = 2(p-r)-1 micro-batches between F
 * and B and fewer than lim_w = 2p-1 between F and W (the memory rule).
 * Written for one chunk or two (schedule_v_chunks); zb-v has its own
 * construction above (this list schedule left ZB-V 20 units idle at
 * p = 16, m = 32). It decides every rank's order together: rank >= 0
 * writes that rank's into out (returns its count); rank < 0 writes rank
 * r's into out + r * stride with its count in counts[r] (returns 0). */
static int order_list(schedule_order o, int p, int rank, int m, schedule_op *out, int stride, int *counts) {
    const int v = schedule_v_chunks(o), S = v * p;
    double *fd = malloc(sizeof *fd * (size_t)S * m), *bd = malloc(sizeof *bd * (size_t)S * m);
    int *cnt = calloc((size_t)p * 6, sizeof *cnt); /* per rank: nf[2], nb[2], inb, inw */
    double *fr = calloc((size_t)p, sizeof *fr);
    int *wq = malloc(sizeof *wq * (size_t)p * v * m), *wh = calloc((size_t)p * 2, sizeof *wh);
    int k = -1;
    if (!fd || !bd || !cnt || !fr || !wq || !wh) goto out;
    for (size_t i = 0; i < (size_t)S * m; i++) fd[i] = bd[i] = -1;
    k = 0;
    const int total = 3 * S * m;
    for (int done = 0; done < total; done++) {
        /* the rank and op that can start first (lowest rank on a tie) */
        double bt = 0;
        int br = -1, bkind = 0, bc = 0, bj = 0;
        for (int r = 0; r < p; r++) {
            int *c = cnt + 6 * r;
            const int lim_b = 2 * (p - r) - 1, lim_w = 2 * p - 1;
            double t = 0;
            int kind = -1, ch = 0, j = 0, pri = 9, sg = 0;
            for (int cc = 0; cc < v; cc++) {
                const int s = schedule_stage_of(o, p, r, cc);
                if (c[2 + cc] < m) { /* B */
                    const int jj = c[2 + cc];
                    double d1 = fd[(size_t)s * m + jj], d2 = s < S - 1 ? bd[(size_t)(s + 1) * m + jj] : 0;
                    if (d1 >= 0 && d2 >= 0) {
                        double tt = fr[r];
                        if (d1 > tt) tt = d1;
                        if (d2 > tt) tt = d2;
                        if (kind < 0 || tt < t || (tt == t && (0 < pri || (0 == pri && s > sg)))) {
                            t = tt; kind = SOP_B; ch = cc; j = jj; pri = 0; sg = s;
                        }
                    }
                }
                if (c[cc] < m && c[4] < lim_b && c[5] < lim_w) { /* F */
                    const int jj = c[cc];
                    double d1 = s > 0 ? fd[(size_t)(s - 1) * m + jj] : 0;
                    if (d1 >= 0) {
                        double tt = fr[r] > d1 ? fr[r] : d1;
                        if (kind < 0 || tt < t || (tt == t && (1 < pri || (1 == pri && s > sg)))) {
                            t = tt; kind = SOP_F; ch = cc; j = jj; pri = 1; sg = s;
                        }
                    }
                }
            }
            if (wh[2 * r] < wh[2 * r + 1] && (kind < 0 || fr[r] < t)) { /* W: ready now, last on ties */
                const int e = wq[(size_t)r * v * m + wh[2 * r]];
                t = fr[r]; kind = SOP_W; ch = e >> 24; j = e & 0xffffff;
            }
            if (kind >= 0 && (br < 0 || t < bt)) {
                bt = t; br = r; bkind = kind; bc = ch; bj = j;
            }
        }
        if (br < 0) { k = -1; goto out; } /* cannot happen: some op is always ready */
        int *c = cnt + 6 * br;
        const int s = schedule_stage_of(o, p, br, bc);
        fr[br] = bt + 1;
        if (bkind == SOP_F) {
            fd[(size_t)s * m + bj] = bt + 1;
            c[bc]++; c[4]++; c[5]++;
        } else if (bkind == SOP_B) {
            bd[(size_t)s * m + bj] = bt + 1;
            c[2 + bc]++; c[4]--;
            wq[(size_t)br * v * m + wh[2 * br + 1]++] = bc << 24 | bj;
        } else {
            wh[2 * br]++; c[5]--;
        }
        if (rank < 0) counts[br] = put(out + (size_t)br * stride, counts[br], bkind, bc, bj, 0);
        else if (br == rank) k = put(out, k, bkind, bc, bj, 0);
    }
out:
    free(fd); free(bd); free(cnt); free(fr); free(wq); free(wh);
    return k;
}

int schedule_rank_ops(const schedule *s, int p, int r, schedule_op *out) {
    if (!s || !out) return -1;
    const schedule_order o = s->order;
    const int m = s->micro_batches, v = s->chunks;
    if (p < 1 || r < 0 || r >= p || m < 1 || m > 0xffffff || v < 1 || v > 0xffff) return -1;
    if (v != 1 && o != SCHED_INTERLEAVED) return -1;
    if (s->paired && o != SCHED_1F1B && o != SCHED_INTERLEAVED) return -1;
    switch (o) {
    case SCHED_GPIPE: {
        int k = 0;
        for (int j = 0; j < m; j++) k = put(out, k, SOP_F, 0, j, 0);
        for (int j = 0; j < m; j++) k = put(out, k, SOP_BW, 0, j, 0);
        return k;
    }
    case SCHED_1F1B: return order_one_f_one_b(p, r, m, 0, s->paired, out);
    case SCHED_INTERLEAVED:
        if (v == 1) return order_one_f_one_b(p, r, m, 0, s->paired, out);
        if (m % p != 0 || (int64_t)m * v > 0xffffff) return -1;
        return order_interleaved(p, r, v, m, s->paired, out);
    case SCHED_ZB_H1: return order_one_f_one_b(p, r, m, 1, 0, out);
    case SCHED_ZB_H2: return order_list(o, p, r, m, out, 0, NULL);
    case SCHED_ZB_V: return order_zbv(p, r, m, out);
    case SCHED_DUALPIPEV: return order_dualpipev(p, r, m, out);
    case SCHED_DUALPIPE: return order_dualpipe(p, r, m, out);
    default: return -1;
    }
}

int schedule_all_rank_ops(const schedule *s, int p, schedule_op *out, int stride, int *counts) {
    if (!s || !out || !counts || p < 1 || stride < schedule_max_ops(s)) return -1;
    if (s->order == SCHED_ZB_H2 && s->chunks == 1 && s->micro_batches >= 1 && s->micro_batches <= 0xffffff) {
        for (int r = 0; r < p; r++) counts[r] = 0;
        return order_list(s->order, p, -1, s->micro_batches, out, stride, counts) < 0 ? -1 : 0;
    }
    for (int r = 0; r < p; r++)
        if ((counts[r] = schedule_rank_ops(s, p, r, out + (size_t)r * stride)) < 0) return -1;
    return 0;
}

int schedule_peak_stash_rule(schedule_order o, int p, int r, int m) {
    int v;
    switch (o) {
    case SCHED_GPIPE: return m;
    case SCHED_1F1B: v = p - r; return v < m ? v : m;
    case SCHED_ZB_H1: return p < m ? p : m;
    case SCHED_ZB_H2: v = 2 * p - 1; return v < m ? v : m;
    case SCHED_ZB_V: /* 2p from m >= 2p-1; below, rank r's warm-up stops at m + 1 + r */
        v = 2 * p < 2 * m ? 2 * p : 2 * m;
        return m + 1 + r < v ? m + 1 + r : v;
    case SCHED_DUALPIPEV: return 2 * p + 1 < 2 * m ? 2 * p + 1 : 2 * m;
    case SCHED_DUALPIPE: return p + 1 < m ? p + 1 : m;
    default: return -1;
    }
}

double schedule_eval_ideal(const schedule *sc, int p, double F, double B, double W, double *busy, double *first,
                           double *last, int *peak) {
    if (!sc || p < 1 || sc->micro_batches < 1 || sc->chunks < 1) return -1;
    const schedule_order o = sc->order;
    const int m = sc->micro_batches, S = schedule_rank_chunks(sc) * p, cap = schedule_max_ops(sc);
    const int Sp = S / schedule_pipelines(o); /* stages of one pipeline: a micro-batch enters at s % Sp == 0 */
    schedule_op *ops = malloc(sizeof *ops * (size_t)cap * p);
    int *n = calloc((size_t)p, sizeof *n), *pos = calloc((size_t)p, sizeof *pos), *held = calloc((size_t)p, sizeof *held);
    double *fd = malloc(sizeof *fd * (size_t)S * m), *bd = malloc(sizeof *bd * (size_t)S * m);
    double *fr = calloc((size_t)p, sizeof *fr), step = -1;
    if (!ops || !n || !pos || !held || !fd || !bd || !fr) goto out;
    int left = 0;
    for (int r = 0; r < p; r++) {
        n[r] = schedule_rank_ops(sc, p, r, ops + (size_t)r * cap);
        if (n[r] < 0) goto out;
        left += n[r];
        if (busy) busy[r] = 0;
        if (first) first[r] = -1;
        if (peak) peak[r] = 0;
    }
    for (size_t i = 0; i < (size_t)S * m; i++) fd[i] = bd[i] = -1;
    while (left > 0) {
        int progress = 0;
        for (int r = 0; r < p; r++)
            while (pos[r] < n[r]) {
                const schedule_op *q = ops + (size_t)r * cap + pos[r];
                const int s = schedule_stage_of(o, p, r, q->chunk), j = q->mb;
                double dep = 0, d2 = 0, dur;
                if (q->kind == SOP_F) {
                    dep = s % Sp > 0 ? fd[(size_t)(s - 1) * m + j] : 0;
                    dur = F;
                } else if (q->kind == SOP_W) {
                    dep = bd[(size_t)s * m + j];
                    dur = W;
                } else {
                    dep = fd[(size_t)s * m + j];
                    d2 = s % Sp < Sp - 1 ? bd[(size_t)(s + 1) * m + j] : 0;
                    dur = q->kind == SOP_BW ? B + W : B;
                }
                if (dep < 0 || d2 < 0) break;
                double t = fr[r];
                if (dep > t) t = dep;
                if (d2 > t) t = d2;
                if (first && first[r] < 0) first[r] = t;
                fr[r] = t + dur;
                if (busy) busy[r] += dur;
                if (q->kind == SOP_F) {
                    fd[(size_t)s * m + j] = t + dur;
                    if (++held[r] > 0 && peak && held[r] > peak[r]) peak[r] = held[r];
                } else {
                    if (q->kind != SOP_W) bd[(size_t)s * m + j] = t + dur;
                    if (q->kind != SOP_B) held[r]--;
                }
                pos[r]++;
                left--;
                progress = 1;
            }
        if (!progress) goto out; /* a deadlocked order */
    }
    step = 0;
    for (int r = 0; r < p; r++) {
        if (last) last[r] = fr[r];
        if (fr[r] > step) step = fr[r];
    }
out:
    free(ops); free(n); free(pos); free(held); free(fd); free(bd); free(fr);
    return step;
}
