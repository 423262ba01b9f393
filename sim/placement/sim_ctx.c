/*
 * sim_ctx.c: the simulator's context: the parameters' names and defaults,
 * the graph and profile facts fixed when a context is made (each node's
 * buffer sizes per sample, the backend workspace, the AdamW cost line, the
 * distinct producers and consumers, the transfer size classes), and the
 * cost and block-size caches at one micro-batch size (sim_ensure_costs).
 * The model these serve is described in sim_core.c, which runs it.
 */
#include "sim_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>


static const char *const PARAM_NAMES[SIM_N_PARAMS] = {
    "launch_overhead_us", "transfer_latency_us", "contention",       "step_fixed_us",
    "compute_scale",      "transfer_scale",      "multi_device_start_us", "multi_device_launch_us"};

void sim_params_default(sim_params *p) {
    p->launch_overhead_us = 0.0;
    p->transfer_latency_us = 0.0;
    p->contention = 0.0;
    p->step_fixed_us = 0.0;
    p->compute_scale = 1.0;
    p->transfer_scale = 1.0;
    p->multi_device_start_us = 0.0;
    p->multi_device_launch_us = 0.0;
}

const char *sim_param_name(int i) { return (i >= 0 && i < SIM_N_PARAMS) ? PARAM_NAMES[i] : NULL; }

double *sim_param_ptr(sim_params *p, int i) {
    switch (i) {
    case 0: return &p->launch_overhead_us;
    case 1: return &p->transfer_latency_us;
    case 2: return &p->contention;
    case 3: return &p->step_fixed_us;
    case 4: return &p->compute_scale;
    case 5: return &p->transfer_scale;
    case 6: return &p->multi_device_start_us;
    case 7: return &p->multi_device_launch_us;
    default: return NULL;
    }
}

int sim_param_signed(int i) { return i == 0; }

/* ---- the context -------------------------------------------------------- */
void sim_ctx_destroy(sim_ctx *c) {
    if (!c) return;
    free(c->bwd_reads); free(c->is_loss); free(c->out_ps); free(c->saved_ps); free(c->scr_ps);
    free(c->opt_a); free(c->opt_b); free(c->ucons_start); free(c->ucons);
    free(c->craw); free(c->bclass); free(c->cbytes); free(c->traw); free(c->res_fwd);
    free(c->out_b); free(c->out_len); free(c->saved_len); free(c->scr_len);
    free(c->dev); free(c->st_lo); free(c->st_hi); free(c->st_dev); free(c->n_on);
    free(c->used); free(c->rank); free(c->xslot); free(c->dep_init); free(c->param_b); free(c->ucnt); free(c->xmask);
    free(c->local_uses); free(c->seq); free(c->issued); free(c->dstart); free(c->next); free(c->left); free(c->dep);
    free(c->pos_of); free(c->rbits); free(c->dn_start); free(c->dnodes); free(c->pbytes); free(c->uin_start);
    free(c->uin);
    free(c->views); free(c->in_start); free(c->in_node); free(c->in_slot); free(c->temps); free(c->ar); free(c->frpool); free(c->deferred);
    free(c->n_deferred); free(c->deferred_min); free(c->comm_seq); free(c->comm_waited); free(c->ct); free(c->mt); free(c->lfree); free(c->llast);
    free(c->cp); free(c->mp); free(c->zend); free(c->zop); free(c->pend); free(c->busy); free(c->static_b); free(c->stash_cnt);
    free(c->inflight); free(c->inflight_max); free(c->ops); free(c->chain ? c->chain - 1 : NULL); free(c->events); free(c->crit); free(c->lazy);
    free(c->wfrac); free(c->has_w); free(c->nw_on); free(c->sched_ops); free(c->ord_start); free(c->wst_ps); free(c->wst_len);
    free(c);
}

#define ALLOC(ptr, count) (((ptr) = calloc((size_t)(count) > 0 ? (size_t)(count) : 1, sizeof *(ptr))) == NULL)

/* The engine's rule (hw/kernels/param_memory.c): which node kinds read their inputs again
 * in backward; their producers' outputs stay alive until then. */
static int kind_bwd_reads_input(op_kind k) {
    return k == OP_LAYERNORM || k == OP_ATTENTION || k == OP_MLP || k == OP_HEAD;
}

/* Facts about the graph and the profile that no run changes. */
static void ctx_facts(sim_ctx *c) {
    const graph *g = c->g;
    const profile_data *p = c->p;
    const int n = c->n, D = c->D;
    c->emb_node = c->loss_node = c->res_node = -1;
    for (int i = 0; i < n; i++) {
        op_kind k = g->nodes[i].kind;
        c->bwd_reads[i] = (uint8_t)kind_bwd_reads_input(k);
        c->is_loss[i] = k == OP_LOSS;
        if (k == OP_LOSS && c->loss_node < 0) c->loss_node = i;
        if (k == OP_EMBEDDING && c->emb_node < 0) c->emb_node = i;
        if (k == OP_RESIDUAL && c->res_node < 0) c->res_node = i;
    }
    c->ws_bytes = profile_backend_workspace(p);
    const double max_mb = p->n_mb > 0 ? p->mb_sizes[p->n_mb - 1] : 1;
    /* distinct consumers */
    int w = 0;
    for (int i = 0; i < n; i++) {
        c->ucons_start[i] = w;
        for (int e = g->cons_start[i]; e < g->cons_start[i + 1]; e++) {
            int cn = g->cons[e], dup = 0;
            for (int f = c->ucons_start[i]; f < w; f++) dup |= c->ucons[f] == cn;
            if (!dup) c->ucons[w++] = cn;
        }
    }
    c->ucons_start[n] = w;
    w = 0;
    for (int i = 0; i < n; i++) {
        c->uin_start[i] = w;
        const graph_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_inputs; k++) {
            int dup = 0;
            for (int f = c->uin_start[i]; f < w; f++) dup |= c->uin[f] == nd->inputs[k];
            if (!dup) c->uin[w++] = nd->inputs[k];
        }
    }
    c->uin_start[n] = w;
    w = 0;
    for (int i = 0; i < n; i++) {
        c->in_start[i] = w;
        const graph_node *nd = &g->nodes[i];
        for (int k = 0; k < nd->n_inputs; k++)
            if (!(k == 1 && nd->inputs[1] == nd->inputs[0])) c->in_node[w++] = nd->inputs[k];
    }
    c->in_start[n] = w;
    for (int i = 0; i < n; i++) {
        const profile_node_mem *nm = &p->node_mem[i];
        int keep = 0;
        for (int e = g->cons_start[i]; e < g->cons_start[i + 1]; e++) {
            op_kind k = g->nodes[g->cons[e]].kind;
            keep |= kind_bwd_reads_input(k) || k == OP_LOSS;
        }
        c->out_ps[i] = nm->out_bytes_per_sample;
        c->param_b[i] = nm->param_bytes;
        int64_t sv = nm->act_bytes_per_sample - (keep ? nm->out_bytes_per_sample : 0);
        c->saved_ps[i] = sv > 0 ? sv : 0;
        for (int ph = PHASE_FWD; ph <= PHASE_BWD; ph++) {
            double sc = (double)(profile_node_call_workspace(nm, (cost_phase)ph) - c->ws_bytes) / max_mb;
            c->scr_ps[2 * i + ph] = sc > 0 ? sc : 0;
        }
    }
    /* AdamW: least squares of per-node cost on parameter bytes */
    for (int d = 0; d < D; d++) {
        double k = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
        for (int i = 0; i < n; i++) {
            double x = (double)p->node_mem[i].param_bytes;
            if (x <= 0) continue;
            double y = profile_node_cost(p, d, p->mb_sizes[0], i, PHASE_OPT);
            k++;
            sx += x;
            sy += y;
            sxx += x * x;
            sxy += x * y;
        }
        double den = k * sxx - sx * sx, a = 0, b = 0;
        if (k >= 2 && den > 0) {
            b = (k * sxy - sx * sy) / den;
            a = (sy - b * sx) / k;
        }
        if (!(b > 0) || !(a >= 0)) { /* no usable line: proportional */
            a = 0;
            b = sx > 0 ? sy / sx : 0;
        }
        c->opt_a[d] = a;
        c->opt_b[d] = b;
    }
}

pl_status sim_ctx_create(const graph *g, const profile_data *p, int max_micro_batches, sim_ctx **out) {
    if (!out) return PL_ERR_INVALID;
    *out = NULL;
    if (!g || !p || max_micro_batches < 1 || g->n_nodes < 1 || p->n_nodes != g->n_nodes || p->n_devices < 1 ||
        p->n_devices > SIM_MAX_DEVICES || p->n_mb < 1)
        return PL_ERR_INVALID;
    const int n = g->n_nodes, D = p->n_devices, M = max_micro_batches;
    const int E = g->cons_start[n];
    if (n >= 65536 || M >= 32768) return PL_ERR_INVALID; /* op encoding: 16 bits node, 15 bits mb */
    sim_ctx *c = calloc(1, sizeof *c);
    if (!c) return PL_ERR_NOMEM;
    c->g = g;
    c->p = p;
    c->n = n;
    c->D = D;
    c->M = M;
    long xmax = (long)n * (D - 1);
    if ((long)E < xmax) xmax = E;
    c->xmax = (int)xmax;
    int mc = 1;
    for (int i = 0; i < n; i++)
        if (g->cons_start[i + 1] - g->cons_start[i] > mc) mc = g->cons_start[i + 1] - g->cons_start[i];
    c->max_cons = mc;
    long ops = 3L * n * M + 3L * D + 5L * xmax * M + 4;
    long live = 16 + (long)n * M * (4 + mc) + 2L * xmax * M;
    if (ops > 200000000L || live * D > 200000000L) {
        free(c);
        return PL_ERR_INVALID;
    }
    c->ops_cap = (int)ops;
    c->live_cap = (int)live;
    if (ALLOC(c->bclass, n) || ALLOC(c->cbytes, n)) goto out_nomem;
    for (int i = 0; i < n; i++) {
        int64_t b = p->node_mem[i].out_bytes_per_sample;
        int k = 0;
        while (k < c->n_class && c->cbytes[k] != b) k++;
        if (k == c->n_class) c->cbytes[c->n_class++] = b;
        c->bclass[i] = k;
    }
    const long nm = (long)n * M;
    if (ALLOC(c->bwd_reads, n) || ALLOC(c->is_loss, n) || ALLOC(c->out_ps, n) || ALLOC(c->saved_ps, n) ||
        ALLOC(c->scr_ps, 2 * n) || ALLOC(c->opt_a, D) || ALLOC(c->opt_b, D) || ALLOC(c->ucons_start, n + 1) ||
        ALLOC(c->ucons, E) || ALLOC(c->craw, (long)D * n * PHASE_COUNT) ||
        ALLOC(c->traw, (long)c->n_class * D * D) || ALLOC(c->res_fwd, D) || ALLOC(c->out_b, n) || ALLOC(c->out_len, n) ||
        ALLOC(c->saved_len, n) || ALLOC(c->scr_len, 2 * n) || ALLOC(c->dev, n) ||
        ALLOC(c->st_lo, n + 1) || ALLOC(c->st_hi, n + 1) || ALLOC(c->st_dev, n + 1) ||
        ALLOC(c->n_on, D) || ALLOC(c->used, D) || ALLOC(c->rank, D) || ALLOC(c->dep_init, 3 * nm) ||
        ALLOC(c->param_b, n) || ALLOC(c->xslot, (long)n * D) ||
        ALLOC(c->ucnt, (long)n * D) || ALLOC(c->xmask, n) || ALLOC(c->local_uses, n) || ALLOC(c->seq, 3 * nm) ||
        ALLOC(c->issued, 3 * nm) || ALLOC(c->dstart, D + 1) || ALLOC(c->next, D) || ALLOC(c->left, D) || ALLOC(c->dep, 3 * nm) ||
        ALLOC(c->pos_of, 3 * nm) || ALLOC(c->rbits, 3 * nm / 64 + 2) || ALLOC(c->dn_start, D + 1) ||
        ALLOC(c->dnodes, n) || ALLOC(c->pbytes, D) || ALLOC(c->uin_start, n + 1) ||
        ALLOC(c->uin, (long)n * GRAPH_MAX_INPUTS) ||
        ALLOC(c->views, (n + xmax) * M) || ALLOC(c->in_start, n + 1) ||
        ALLOC(c->in_node, (long)n * GRAPH_MAX_INPUTS) || ALLOC(c->in_slot, (long)n * GRAPH_MAX_INPUTS) || ALLOC(c->temps, nm * mc) || ALLOC(c->ar, D) ||
        ALLOC(c->frpool, (long)D * live) || ALLOC(c->deferred, (long)D * live) || ALLOC(c->n_deferred, D) ||
        ALLOC(c->deferred_min, D) ||
        ALLOC(c->comm_seq, D) || ALLOC(c->comm_waited, D) || ALLOC(c->ct, D) || ALLOC(c->mt, D) || ALLOC(c->lfree, (long)D * D) || ALLOC(c->llast, (long)D * D) ||
        ALLOC(c->cp, D) || ALLOC(c->mp, D) || ALLOC(c->zend, D) || ALLOC(c->zop, D) || ALLOC(c->pend, D) || ALLOC(c->busy, D) || ALLOC(c->static_b, D) ||
        ALLOC(c->stash_cnt, (long)D * M) || ALLOC(c->inflight, D) || ALLOC(c->inflight_max, D) ||
        ALLOC(c->ops, ops) || ALLOC(c->chain, ops + 1) || ALLOC(c->crit, ops) ||
        ALLOC(c->lazy, 1) || ALLOC(c->wfrac, n) || ALLOC(c->has_w, n) || ALLOC(c->nw_on, D) ||
        ALLOC(c->sched_ops, 3L * M * (n + 1)) || ALLOC(c->ord_start, n + 1) || ALLOC(c->wst_ps, n) || ALLOC(c->wst_len, n))
        goto out_nomem;
    for (int d = 0; d < D; d++) c->ar[d].fr = c->frpool + (size_t)d * live;
    c->chain++; /* chain[-1]: no ops, no compute time */
    c->chain[-1] = (sim_chain){0.0, 0, -1};
    ctx_facts(c);
    for (int i = 0; i < n; i++) {
        c->wfrac[i] = c->is_loss[i] ? 0.0 : profile_w_frac(p, g, i);
        c->has_w[i] = c->wfrac[i] > 0.0;
        const op_kind k = g->nodes[i].kind;
        const int64_t tc = (int64_t)g->cfg.seq_len * g->cfg.d_model * 4;
        c->wst_ps[i] = !c->has_w[i] ? 0 : k == OP_ATTENTION ? 3 * tc : k == OP_MLP ? 4 * tc : 0;
    }
    c->last_op = -1;
    *out = c;
    return PL_OK;

out_nomem:
    if (c->chain) c->chain++; /* sim_ctx_destroy frees chain - 1 */
    sim_ctx_destroy(c);
    return PL_ERR_NOMEM;
}

pl_status sim_ctx_set_trace(sim_ctx *ctx, int on) {
    if (!ctx) return PL_ERR_INVALID;
    ctx->trace_on = on ? 1 : 0;
    if (ctx->trace_on && !ctx->events) {
        ctx->events = calloc((size_t)ctx->ops_cap, sizeof *ctx->events);
        if (!ctx->events) {
            ctx->trace_on = 0;
            return PL_ERR_NOMEM;
        }
    }
    return PL_OK;
}

const char *sim_last_error(const sim_ctx *ctx) { return ctx ? ctx->err : ""; }

pl_status sim_fail(sim_ctx *c, pl_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return st;
}

/* Fill the cost and block-size caches for micro-batch size mb (once per size change). */
void sim_ensure_costs(sim_ctx *c, int mb) {
    if (c->cached_mb == mb) return;
    const profile_data *p = c->p;
    const int n = c->n, D = c->D;
    for (int d = 0; d < D; d++) {
        for (int i = 0; i < n; i++)
            for (int ph = 0; ph < PHASE_COUNT; ph++)
                c->craw[((size_t)d * n + i) * PHASE_COUNT + ph] = profile_node_cost(p, d, mb, i, (cost_phase)ph);
        c->res_fwd[d] = c->res_node >= 0 ? profile_node_cost(p, d, mb, c->res_node, PHASE_FWD) : 0.0;
    }
    for (int i = 0; i < n; i++) {
        c->out_b[i] = c->out_ps[i] * mb;
        c->out_len[i] = align_len(c->out_b[i]);
        c->saved_len[i] = c->saved_ps[i] > 0 ? align_len(c->saved_ps[i] * mb) : 0;
        c->wst_len[i] = c->wst_ps[i] > 0 ? align_len(c->wst_ps[i] * mb) : 0;
        for (int ph = PHASE_FWD; ph <= PHASE_BWD; ph++) {
            const int64_t scr = (int64_t)(c->scr_ps[2 * i + ph] * mb);
            c->scr_len[2 * i + ph] = scr > 0 ? align_len(scr) : 0;
        }
    }
    for (int k = 0; k < c->n_class; k++)
        for (int s = 0; s < D; s++)
            for (int t = 0; t < D; t++)
                c->traw[((size_t)k * D + s) * D + t] =
                    s == t ? 0.0 : profile_transfer_us(p, s, t, (double)c->cbytes[k] * mb);
    c->cached_mb = mb;
}
