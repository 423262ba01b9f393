/*
 * hw_replay.c: the engine's compiled plan replayed on a clock (see
 * hw_replay.h). Uses the engine's internal plan interface (program_internal.h)
 * so that the instruction lists are exactly the ones the engine runs.
 */
#include "hw_replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program_internal.h"

struct hw_replay {
    hw_program *p; /* compiled program only: no device memory */
};

void hw_replay_destroy(hw_replay *r) {
    if (!r) return;
    if (r->p) {
        hw_program_free_code(r->p);
        free(r->p->placement);
        free(r->p->model_off);
        free(r->p->shard_off);
        free(r->p);
    }
    free(r);
}

pl_status hw_replay_compile(hw_engine *e, const graph *g, const int *placement, const schedule *s,
                            int64_t ws_bytes, const int64_t *caps, hw_replay **out, char *msg, size_t len) {
    *out = NULL;
    const int nd = e->be->n_devices, n = g->n_nodes;
    for (int i = 0; i < n; i++)
        if (placement[i] < 0 || placement[i] >= nd)
            return pl_fail(msg, len, PL_ERR_PLACEMENT_RANGE, "node %d on device %d", i, placement[i]);
    if (s->micro_batches < 1 || g->cfg.batch % s->micro_batches)
        return pl_fail(msg, len, PL_ERR_SCHEDULE, "bad micro-batch count");
    hw_replay *r = calloc(1, sizeof *r);
    hw_program *p = r ? calloc(1, sizeof *p) : NULL;
    if (!p) {
        free(r);
        return PL_ERR_NOMEM;
    }
    r->p = p;
    p->e = e;
    p->g = g;
    p->n_dev = nd;
    p->sched = *s;
    p->b = g->cfg.batch / s->micro_batches;
    p->placement = malloc(sizeof(int) * (size_t)n);
    p->model_off = malloc(sizeof(int64_t) * (size_t)(n + 1));
    p->shard_off = calloc((size_t)n, sizeof(int64_t));
    if (!p->placement || !p->model_off || !p->shard_off) {
        hw_replay_destroy(r);
        return PL_ERR_NOMEM;
    }
    memcpy(p->placement, placement, sizeof(int) * (size_t)n);
    hw_model_param_offsets(g, p->model_off);
    for (int i = 0; i < n; i++) {
        if (g->nodes[i].kind == OP_LOSS) p->loss_dev = placement[i];
        if (g->nodes[i].kind == OP_EMBEDDING) p->emb_dev = placement[i];
    }
    int64_t cap[HW_MAX_DEVICES];
    for (int d = 0; d < nd; d++) cap[d] = caps && caps[d] > 0 ? caps[d] : INT64_MAX / 4;
    /* the backend's workspace as the modelled backend would carve it */
    hw_backend_ops ops = *e->be->ops;
    ops.workspace_bytes = ws_bytes;
    const hw_backend_ops *saved = e->be->ops;
    e->be->ops = &ops;
    int oom = -1;
    pl_status st = hw_program_compile(p, cap, &oom, msg, len);
    e->be->ops = saved;
    if (st != PL_OK) {
        hw_replay_destroy(r);
        return st;
    }
    *out = r;
    return PL_OK;
}

int64_t hw_replay_need_bytes(const hw_replay *r, int d) {
    return r->p->dev[d].used ? r->p->dev[d].need_bytes : 0;
}

int hw_replay_transfers(const hw_replay *r) {
    int k = 0;
    for (int d = 0; d < r->p->n_dev; d++)
        for (int i = 0; i < r->p->dev[d].n_ins; i++) k += r->p->dev[d].ins[i].kind == HI_SEND;
    return k;
}

int hw_replay_reorders(const hw_replay *r) { return r->p->reorders; }

static size_t put(char *buf, size_t len, size_t off, const char *fmt, int a, int b, int c) {
    if (off >= len) return off;
    int w = snprintf(buf + off, len - off, fmt, a, b, c);
    return w < 0 ? off : off + (size_t)w;
}

size_t hw_replay_compute_order(const hw_replay *r, int d, char *buf, size_t len) {
    const hw_program_dev *pd = &r->p->dev[d];
    size_t off = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < pd->n_ins; i++) {
        const hw_instr *in = &pd->ins[i];
        if (in->stream != HW_STREAM_COMPUTE) continue; /* the gradients' zero on the comm stream */
        switch ((hi_kind)in->kind) {
        case HI_FWD: off = put(buf, len, off, "F%d.%d ", in->node, in->mb, 0); break;
        case HI_BWD:
            off = put(buf, len, off, r->p->calls[in->call].part == HW_BWD_WEIGHT ? "W%d.%d " : "B%d.%d ", in->node,
                      in->mb, 0);
            break;
        case HI_ADD: off = put(buf, len, off, "A%d.%d ", in->node, in->mb, 0); break;
        case HI_ZERO: off = put(buf, len, off, "Z ", 0, 0, 0); break;
        case HI_ADAMW: off = put(buf, len, off, "O ", 0, 0, 0); break;
        default: break;
        }
    }
    return off < len ? off : (len ? len - 1 : 0);
}

size_t hw_replay_comm_order(const hw_replay *r, int d, char *buf, size_t len) {
    const hw_program_dev *pd = &r->p->dev[d];
    size_t off = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < pd->n_ins; i++) {
        const hw_instr *in = &pd->ins[i];
        if (in->kind == HI_SEND)
            off = put(buf, len, off, in->grad ? "Sg%d.%d>%d " : "S%d.%d>%d ", in->node, in->mb, in->peer);
        else if (in->kind == HI_RECV)
            off = put(buf, len, off, in->grad ? "Rg%d.%d<%d " : "R%d.%d<%d ", in->node, in->mb, in->peer);
    }
    return off < len ? off : (len ? len - 1 : 0);
}

/* ---- the cost model, written from sim_core.c's description ---- */

typedef struct {
    const profile_data *p;
    const graph *g;
    int mb;
    double cs, lo, ts, tl;
    double opt_a[HW_MAX_DEVICES], opt_b[HW_MAX_DEVICES]; /* AdamW: a + b * param bytes */
    int res_node;                                         /* a residual node, or -1 */
} costs;

static double clamp0(double x) { return x > 0 ? x : 0; }

static void costs_init(costs *c, const graph *g, const profile_data *p, const sim_params *prm, int mb) {
    memset(c, 0, sizeof *c);
    c->p = p;
    c->g = g;
    c->mb = mb;
    c->cs = prm->compute_scale;
    c->lo = prm->launch_overhead_us;
    c->ts = prm->transfer_scale;
    c->tl = prm->transfer_latency_us;
    c->res_node = -1;
    for (int i = 0; i < g->n_nodes && c->res_node < 0; i++)
        if (g->nodes[i].kind == OP_RESIDUAL) c->res_node = i;
    for (int d = 0; d < p->n_devices && d < HW_MAX_DEVICES; d++) {
        /* least squares of opt cost on parameter bytes over nodes with parameters */
        double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            double x = (double)p->node_mem[i].param_bytes;
            if (x <= 0) continue;
            double y = profile_node_cost(p, d, 1, i, PHASE_OPT);
            n++; sx += x; sy += y; sxx += x * x; sxy += x * y;
        }
        double den = n * sxx - sx * sx, a = 0, b = 0;
        if (n >= 2 && den > 0) {
            b = (n * sxy - sx * sy) / den;
            a = (sy - b * sx) / n;
        }
        if (!(b > 0) || a < 0) { /* no usable line: proportional */
            a = 0;
            b = sx > 0 ? sy / sx : 0;
        }
        c->opt_a[d] = a;
        c->opt_b[d] = b;
    }
}

static double node_us(const costs *c, int d, int node, int ph) {
    double raw = profile_node_cost(c->p, d, c->mb, node, (cost_phase)ph);
    /* the loss's forward also writes its gradient: it has no backward call */
    if (c->g->nodes[node].kind == OP_LOSS) raw += profile_node_cost(c->p, d, c->mb, node, PHASE_BWD);
    return clamp0(raw * c->cs + c->lo);
}

static double add_us(const costs *c, int d, int64_t floats) {
    double bytes = 4.0 * (double)floats, raw;
    if (c->res_node >= 0) {
        double rb = (double)c->p->node_mem[c->res_node].out_bytes_per_sample * c->mb;
        raw = profile_node_cost(c->p, d, c->mb, c->res_node, PHASE_FWD);
        if (rb > 0 && bytes > rb) raw *= bytes / rb;
    } else {
        raw = c->opt_a[d] + c->opt_b[d] * 3.0 / 7.0 * bytes;
    }
    return clamp0(raw * c->cs + c->lo);
}

static double zero_us(const costs *c, int d, int64_t bytes) {
    return clamp0(c->opt_b[d] / 7.0 * (double)bytes * c->cs + c->lo);
}

static double adamw_dev_us(const costs *c, const int *placement, int d) {
    double bytes = 0;
    for (int i = 0; i < c->g->n_nodes; i++)
        if (placement[i] == d) bytes += (double)c->p->node_mem[i].param_bytes;
    if (bytes <= 0) return 0;
    return clamp0((c->opt_a[d] + c->opt_b[d] * bytes) * c->cs + c->lo);
}

static double xfer_us(const costs *c, int s, int t, int64_t bytes) {
    return profile_transfer_us(c->p, s, t, (double)bytes) * c->ts + c->tl;
}

pl_status hw_replay_time(const hw_replay *r, const profile_data *p, const sim_params *prm_in, int64_t eager_bytes,
                         double *dev_end_us, double *step_us) {
    return hw_replay_time_dump(r, p, prm_in, eager_bytes, dev_end_us, step_us, NULL);
}

pl_status hw_replay_time_dump(const hw_replay *r, const profile_data *p, const sim_params *prm_in,
                              int64_t eager_bytes, double *dev_end_us, double *step_us, FILE *dump) {
    const hw_program *pl = r->p;
    const int nd = pl->n_dev;
    sim_params prm;
    if (prm_in) prm = *prm_in;
    else sim_params_default(&prm);
    costs c;
    costs_init(&c, pl->g, p, &prm, pl->b);
    int used_n = 0;
    for (int d = 0; d < nd; d++) used_n += pl->dev[d].used;
    if (used_n > 1) c.lo += prm.multi_device_launch_us;
    double tail[HW_MAX_DEVICES][2];
    double *evt[HW_MAX_DEVICES];
    memset(tail, 0, sizeof tail);
    memset(evt, 0, sizeof evt);
    for (int d = 0; d < nd; d++) {
        evt[d] = calloc((size_t)(pl->dev[d].n_events + 1), sizeof(double));
        if (!evt[d]) {
            for (int k = 0; k < d; k++) free(evt[k]);
            return PL_ERR_NOMEM;
        }
    }
    for (int o = 0; o < pl->n_order; o++) {
        const int d = pl->order[o].dev;
        const hw_instr *in = &pl->dev[d].ins[pl->order[o].idx];
        double *t = &tail[d][in->stream];
        const double t_before = *t;
        switch ((hi_kind)in->kind) {
        case HI_ZERO: *t += zero_us(&c, d, in->n); break;
        case HI_FWD: *t += node_us(&c, d, in->node, PHASE_FWD); break;
        case HI_BWD: {
            /* a split backward: B and W share the backward's cost by the
             * profile's split (profile_w_frac), each with its own launch */
            const int part = pl->calls[in->call].part;
            if (part == HW_BWD_WHOLE) {
                *t += node_us(&c, d, in->node, PHASE_BWD);
                break;
            }
            const double w = profile_w_frac(p, pl->g, in->node);
            const double raw = profile_node_cost(c.p, d, c.mb, in->node, PHASE_BWD) * (part == HW_BWD_WEIGHT ? w : 1.0 - w);
            *t += clamp0(raw * c.cs + c.lo);
            break;
        }
        case HI_ADD: *t += add_us(&c, d, in->n); break;
        case HI_ADAMW: *t += adamw_dev_us(&c, pl->placement, d); break;
        case HI_RECORD: evt[d][in->ev] = *t; break;
        case HI_WAIT:
            if (evt[in->peer][in->ev] > *t) *t = evt[in->peer][in->ev];
            break;
        case HI_SEND: {
            const hw_order_entry rv = pl->order[++o]; /* its receive comes next */
            const int q = rv.dev;
            double x = xfer_us(&c, d, q, in->n);
            double sp = tail[d][HW_STREAM_COMM], rp = tail[q][HW_STREAM_COMM];
            double rend = (sp > rp ? sp : rp) + x;
            tail[q][HW_STREAM_COMM] = rend;
            tail[d][HW_STREAM_COMM] = in->n <= eager_bytes ? sp + x : rend;
            if (dump) {
                fprintf(dump, "%d 1 %s%s %d %d %.3f %.3f\n", d, "send", in->grad ? "g" : "", in->node, in->mb, sp,
                        tail[d][HW_STREAM_COMM]);
                fprintf(dump, "%d 1 %s%s %d %d %.3f %.3f\n", q, "recv", in->grad ? "g" : "", in->node, in->mb, rp,
                        rend);
            }
            break;
        }
        case HI_RECV: break; /* handled with its send */
        case HI_DP_REDUCE: break; /* data-parallel plans (hw/dist/dist_dp.h) are not replayed */
        }
        if (dump && in->kind != HI_SEND && in->kind != HI_RECV && in->kind != HI_RECORD && in->kind != HI_WAIT) {
            static const char *kn[] = {"zero", "fwd", "bwd", "add", "adamw"};
            fprintf(dump, "%d 0 %s %d %d %.3f %.3f\n", d, kn[in->kind], in->node, in->mb, t_before, *t);
        }
    }
    double mx = 0;
    for (int d = 0; d < nd; d++) {
        dev_end_us[d] = pl->dev[d].used ? tail[d][HW_STREAM_COMPUTE] : 0;
        if (dev_end_us[d] > mx) mx = dev_end_us[d];
        free(evt[d]);
    }
    *step_us = mx + prm.step_fixed_us + (used_n > 1 ? prm.multi_device_start_us : 0.0);
    return PL_OK;
}
