/*
 * sim_event.c: a run's ops as events: the order events sort in, the decoding
 * of one op record into an event (its kind, device, stream and times), the
 * traced run's event list and the kinds' short names. Used by the run
 * (sim_core.c, which records events when tracing is on) and by what is read
 * back from a run (sim_trace.c).
 */
#include "sim_internal.h"

int sim_event_cmp(const void *a, const void *b) {
    const sim_event *x = a, *y = b;
    if (x->start_us != y->start_us) return x->start_us < y->start_us ? -1 : 1;
    if (x->dst_device != y->dst_device) return x->dst_device < y->dst_device ? -1 : 1; /* compute first */
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    return (x->end_us < y->end_us) ? -1 : (x->end_us > y->end_us);
}

const sim_event *sim_events(const sim_ctx *ctx, int *n) {
    if (!ctx || !ctx->have_events) {
        if (n) *n = 0;
        return NULL;
    }
    if (n) *n = ctx->n_events;
    return ctx->events;
}

void sim_op_event(const sim_ctx *c, int o, sim_event *ev) {
    static const sim_event_kind kinds[] = {SIM_EV_FWD,      SIM_EV_BWD, SIM_EV_OPT, SIM_EV_SEND_ACT,
                                           SIM_EV_SEND_GRAD, SIM_EV_ADD, SIM_EV_ZERO, SIM_EV_ZERO, SIM_EV_WGRAD};
    int info = c->ops[o].info;
    ev->kind = kinds[info & OPK_MASK];
    ev->node = c->ops[o].node;
    ev->micro_batch = c->ops[o].mb;
    ev->device = info >> OPK_BITS;
    ev->dst_device = c->ops[o].dst;
    ev->stream = (info & OPK_MASK) == OPK_ACT || (info & OPK_MASK) == OPK_GRAD || (info & OPK_MASK) == OPK_ZERO_COMM;
    ev->start_us = c->ops[o].t0;
    ev->end_us = c->ops[o].t1;
}

const char *sim_event_kind_name(sim_event_kind k) {
    switch (k) {
    case SIM_EV_FWD: return "F";
    case SIM_EV_BWD: return "B";
    case SIM_EV_OPT: return "adamw";
    case SIM_EV_SEND_ACT: return "act";
    case SIM_EV_SEND_GRAD: return "grad";
    case SIM_EV_ADD: return "add";
    case SIM_EV_ZERO: return "zero";
    case SIM_EV_WGRAD: return "W";
    default: return "?";
    }
}
