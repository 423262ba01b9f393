/*
 * layout_ops.c: the ops of one pipeline replica, per rank, as intervals
 * (layout_sim.h: layout_sim_ops). The layout simulator records what each
 * rank ran when asked to trace (layout_sim_run with trace != 0): forwards,
 * backwards (B, or the whole backward for the orders that do not split it),
 * weight-gradient passes W, and the pipeline sends on the comm streams.
 * This file turns that record into the public interval list a viewer draws
 * (placer serve's pipeline view); the idle time of a rank is what its
 * compute intervals leave uncovered. The Chrome trace (layout_sim.c) is
 * the same record written for Perfetto.
 */
#include <stdlib.h>
#include <string.h>

#include "layout_internal.h"

/* The rank-local chunk (0 .. chunks per rank - 1) whose stage is k. */
static int local_chunk(const layout_sim *s, int r, int k) {
    const int v = schedule_rank_chunks(&s->sched);
    for (int c = 0; c < v; c++)
        if (ls_stage_of(s, r, c) == k) return c;
    return 0;
}

static int by_rank_then_start(const void *a, const void *b) {
    const layout_op *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    if (x->t0_us != y->t0_us) return x->t0_us < y->t0_us ? -1 : 1;
    return (int)x->kind - (int)y->kind;
}

pl_status layout_sim_ops(const layout_sim *s, layout_op **out, int *n) {
    if (!out || !n) return PL_ERR_INVALID;
    *out = NULL;
    *n = 0;
    if (!s || !s->have_trace) return PL_ERR_INVALID;
    int count = 0;
    for (int i = 0; i < s->n_ev; i++) {
        const ls_event *e = &s->ev[i];
        count += e->layer < 0 && ((e->track == 0 && (e->what == 'F' || e->what == 'B' || e->what == 'W')) ||
                                  (e->track == 1 && e->what == 'a') || (e->track == 2 && e->what == 'g'));
    }
    layout_op *ops = malloc((size_t)(count > 0 ? count : 1) * sizeof *ops);
    if (!ops) return PL_ERR_NOMEM;
    int k = 0;
    for (int i = 0; i < s->n_ev && k < count; i++) {
        const ls_event *e = &s->ev[i];
        layout_op_kind kind;
        if (e->layer >= 0) continue;
        if (e->track == 0 && e->what == 'F') kind = LAYOUT_OP_F;
        else if (e->track == 0 && e->what == 'B') kind = LAYOUT_OP_B;
        else if (e->track == 0 && e->what == 'W') kind = LAYOUT_OP_W;
        else if (e->track == 1 && e->what == 'a') kind = LAYOUT_OP_SEND_FWD;
        else if (e->track == 2 && e->what == 'g') kind = LAYOUT_OP_SEND_BWD;
        else continue;
        ops[k++] = (layout_op){.rank = e->stage, .stage = e->chunk, .chunk = local_chunk(s, e->stage, e->chunk),
                               .mb = e->mb, .kind = kind, .t0_us = e->t0, .t1_us = e->t1};
    }
    qsort(ops, (size_t)k, sizeof *ops, by_rank_then_start);
    *out = ops;
    *n = k;
    return PL_OK;
}

const char *layout_op_kind_name(layout_op_kind k) {
    static const char *const names[] = {"F", "B", "W", "send_fwd", "send_bwd"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}
