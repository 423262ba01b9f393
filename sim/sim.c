/*
 * sim.c: the discrete-event simulator.
 *
 * What is simulated
 * -----------------
 * Work items are node phases: F(i,j) and B(i,j), the forward and backward of
 * node i for micro-batch j, and one AdamW step OPT(d) per used device. Each
 * device runs its items in a fixed order (an in-order compute queue). Each
 * directed link (src, dst) is a FIFO queue of transfers that overlaps with
 * compute:
 *   - an activation transfer (k -> d', j) leaves when F(k,j) ends, once per
 *     producer k, micro-batch j and remote device d' that hosts consumers of
 *     k (two consumers on d' share one transfer);
 *   - the matching gradient transfer (d' -> dev(k), j) leaves when the last
 *     consumer of k on d' has finished its backward for j.
 * An item starts when its device is free and its inputs are there; it lasts
 * its profiled cost for micro-batch size b = batch / m:
 *   compute   cost(dev, b, node, phase) * compute_scale + launch_overhead_us
 *   transfer  curve(src, dst, out_bytes * b) * transfer_scale + transfer_latency_us
 *   AdamW     sum over the device's nodes of (opt cost * compute_scale + launch)
 * step_us = last end + step_fixed_us.
 *
 * Stages and per-device order
 * ---------------------------
 * A *stage* is a maximal run of consecutive nodes (in topological order) on
 * one device. A contiguous placement over p devices has p stages; a
 * placement that returns to a device (0,1,0) gives that device several
 * stages, like the chunks of an interleaved pipeline. Within a stage item
 * (stage k, micro-batch j, phase) the device runs the stage's nodes in
 * topological order (forward) or in reverse (backward).
 *
 * gpipe and 1f1b order every stage item of the whole pipeline by its start
 * time in the ideal schedule of S stages each on its own device with unit
 * costs (forward = backward = 1); each device runs its own items in that
 * order (ties: backwards first, then lower stage):
 *   gpipe  F(k,j) = k + j            all forwards, then backwards in reverse
 *          B(k,j) = (S-1+m) + (S-1-k) + (m-1-j)      micro-batch order (GPipe)
 *   1f1b   F(k,j) = k + j            for j <= S-1-k  (warm-up: S-1-k forwards)
 *                 = k + 2j           after           (one forward, one backward)
 *          B(k,j) = 2S - 1 - k + 2j
 * On a contiguous placement this is exactly GPipe and PipeDream-Flush (1F1B
 * with min(m, S-1-k) warm-up forwards on stage k). On any other placement
 * it is the same pipeline over the S stages, each device merging its stages'
 * items by ideal start time.
 *
 * Why this cannot deadlock: every dependency of an item has a strictly
 * smaller key (forward keys grow with the stage, backward keys shrink with
 * it, and every backward key exceeds its forward key), so each device's
 * order is the restriction of one global topological order of all items.
 * Then the unfinished item of smallest key is at the head of its device's
 * queue with all its inputs done, and the links only ever wait on each
 * other's earlier transfers. (An order built per device, e.g. "warm-up count
 * by the device's first node", can deadlock on 0,1,0.)
 *
 * interleaved (chunks v > 1) is Megatron-LM's interleaved 1F1B. It needs a
 * contiguous chunk placement: S = v*p stages over p devices, stage k on the
 * same device as stage k mod p, and m a multiple of p. Device rank r runs
 * virtual micro-batch t forward on chunk (t mod pv)/p, backward on chunk
 * v-1-(t mod pv)/p, micro-batch (t / pv)*p + t mod p, with
 * min(2(p-r-1) + (v-1)p, mv) warm-up forwards (all of them when m == p),
 * then one forward and one backward. interleaved with v = 1 is 1f1b.
 *
 * How times are computed
 * ----------------------
 * A device's items run in order and every link's transfers are triggered by
 * its source device's items in that device's order, so each link's FIFO
 * order is known in advance. The simulation is therefore one pass in a
 * topological order (Kahn's algorithm over the device queues, whose heads
 * are taken whenever their inputs are done): start = max(device free,
 * inputs ready), transfers start at max(link free, trigger end). This gives
 * exactly the times of an event-by-event simulation, costs O(items + edges),
 * and needs no event queue. If some queue head can never become ready the
 * order deadlocks: sim_run then fails with PL_ERR_SCHEDULE (cannot happen
 * for gpipe and 1f1b, see above; tests check interleaved too).
 *
 * Contention (kept simple): a transfer of duration t slows each of its two
 * devices by contention * t of compute: the receiver pays it on the first
 * item that consumes the transfer, the sender on its next item after the
 * one that triggered it.
 *
 * Memory, per device, tracked in the device's program order:
 *   static    4 * param bytes of its nodes (params, grads, AdamW m and v)
 *   + stash   act_bytes * b of node i from F(i,j) start to B(i,j) end
 *   + recv    out_bytes * b of a remote input from the start of its first
 *             consumer's forward until the gradient is sent back
 *   + grads   out_bytes * b per remote consumer device of node i, from
 *             B(i,j) start to end (the received output gradients)
 *   + the largest workspace of its nodes.
 * peak = static + workspace + the largest sum of the others at any time.
 * A peak above the cap is an OOM verdict (a result, not an error).
 *
 * Bubble: busy = time the device computes (including AdamW), idle =
 * step_us - busy (so step_fixed_us counts as idle), bubble = idle / busy,
 * for used devices.
 * With unit costs on a contiguous p-stage pipeline this is (p-1)/(v m).
 *
 * Critical path: every item remembers which predecessor fixed its start (its
 * device's previous item, the input that arrived last, or the link's
 * previous transfer); the path is that chain back from the last item. It
 * covers [0, step_us - step_fixed_us] without gaps.
 */
#include "sim.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char *const PARAM_NAMES[SIM_N_PARAMS] = {
    "launch_overhead_us", "transfer_latency_us", "contention",
    "step_fixed_us",      "compute_scale",       "transfer_scale"};

void sim_params_default(sim_params *p) {
    p->launch_overhead_us = 0.0;
    p->transfer_latency_us = 0.0;
    p->contention = 0.0;
    p->step_fixed_us = 0.0;
    p->compute_scale = 1.0;
    p->transfer_scale = 1.0;
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
    default: return NULL;
    }
}

/* Lazily built view of the last run (sim_critical_path takes a const ctx). */
typedef struct {
    int crit_built; /* 1 once crit holds the last run's path */
    int crit_len;   /* entries in crit */
} sim_lazy;

struct sim_ctx {
    const graph *g;        /* borrowed */
    const profile_data *p; /* borrowed */
    int n, D, M;           /* nodes, devices, max micro-batches */
    int xmax;              /* bound on (producer, remote device) pairs */
    int ops_cap;           /* bound on items + transfers of one run */
    int trace_on;          /* record events */
    char err[192];         /* detail of the last failure */

    /* costs at micro-batch size cached_mb */
    int cached_mb;    /* 0: nothing cached */
    double *craw;     /* [D][n][PHASE_COUNT] profile costs in us */
    int n_class;      /* distinct out_bytes_per_sample values */
    int *bclass;      /* [n] node -> class */
    int64_t *cbytes;  /* [n_class] out bytes per sample of a class */
    double *traw;     /* [n_class][D][D] transfer us of one output at cached_mb */
    double *optsum;   /* [D] AdamW time of the device in the last run */
    int64_t *dstatic; /* [D] static bytes of the device in the last run */
    int64_t *dws;     /* [D] largest workspace of the device in the last run */

    /* the last run */
    int m, mb, S, n_x, n_ops, n_cops; /* micro-batches, mb size, stages, pairs, ops, compute ops */
    int *dev;                          /* [n] placement copy */
    int *stage_of;                     /* [n] */
    int *st_lo, *st_hi, *st_dev;       /* [n] stage first/last node, device */
    int *n_on;                         /* [D] nodes per device */
    int *xk, *xd, *xcnt, *xfirst;      /* [xmax] producer, remote device, consumer edges, first consumer */
    int *xhead, *xnext;                /* [n], [xmax] pairs of producer k: linked list */
    int *n_xout;                       /* [n] pairs of producer k */
    int *in_x;                         /* [n*GRAPH_MAX_INPUTS] pair feeding input slot, -1 local */
    int *xslot;                        /* [n*D] pair index of (k, d) */
    unsigned *xstamp;                  /* [n*D] run stamp of xslot */
    unsigned stamp;                    /* current run stamp */
    int *ndep_f, *ndep_b;              /* [n] dependency counts of F and B items */
    int *si;                           /* [2*n*M] sorted stage items */
    int *bucket;                       /* [2n + 2M + 4] counting sort */
    int *devops;                       /* [2*n*M + D] per-device item order */
    int *devnj;                        /* [2*n*M + D] node | mb << 16 of devops (no division) */
    int *dstart;                       /* [D+1] offsets into devops */
    int *cur;                          /* [D] position of the head item */
    int *wl;                           /* [D] worklist */
    char *inwl;                        /* [D] */
    int *dep;                          /* [n_cops] unmet inputs of a compute item */
    double *ready;                     /* [n_cops] time the inputs are all there */
    int *rpred;                        /* [n_cops] the input that arrived last */
    double *extra;                     /* [n_cops] contention charges */
    double *t0, *t1;                   /* [ops_cap] start, end */
    int *pred;                         /* [ops_cap] critical predecessor, -1 none */
    int *gcnt;                         /* [xmax*M] consumer backwards still to come */
    double *dfree, *busy;              /* [D] */
    int *dlast;                        /* [D] last item run on the device */
    int64_t *mem, *mem_peak;           /* [D] dynamic bytes, their peak */
    int *inflight, *inflight_max;      /* [D] micro-batches stashed on the device */
    int *stash_cnt;                    /* [D*M] stashed nodes of (device, mb) */
    double *lfree;                     /* [D*D] link free time */
    int *llast;                        /* [D*D] last transfer on the link */
    int last_op;                       /* the item that ended last */

    sim_event *events; /* [ops_cap] when tracing */
    int n_events;      /* events recorded in the last run */
    int have_events;   /* the last run was traced */
    sim_event *crit;   /* [ops_cap] critical path, built lazily */
    sim_lazy *lazy;    /* mutable from const accessors */
};

void sim_ctx_destroy(sim_ctx *c) {
    if (!c) return;
    free(c->craw); free(c->bclass); free(c->cbytes); free(c->traw); free(c->optsum); free(c->dstatic); free(c->dws);
    free(c->dev); free(c->stage_of); free(c->st_lo); free(c->st_hi); free(c->st_dev); free(c->n_on);
    free(c->xk); free(c->xd); free(c->xcnt); free(c->xfirst); free(c->xhead); free(c->xnext);
    free(c->n_xout); free(c->in_x); free(c->xslot); free(c->xstamp); free(c->ndep_f); free(c->ndep_b);
    free(c->si); free(c->bucket); free(c->devops); free(c->devnj); free(c->dstart); free(c->cur); free(c->wl);
    free(c->inwl); free(c->dep); free(c->ready); free(c->rpred); free(c->extra); free(c->t0);
    free(c->t1); free(c->pred); free(c->gcnt); free(c->dfree); free(c->busy); free(c->dlast);
    free(c->mem); free(c->mem_peak); free(c->inflight); free(c->inflight_max); free(c->stash_cnt);
    free(c->lfree); free(c->llast); free(c->events); free(c->crit); free(c->lazy);
    free(c);
}

#define ALLOC(ptr, count) (((ptr) = calloc((size_t)(count) > 0 ? (size_t)(count) : 1, sizeof *(ptr))) == NULL)

pl_status sim_ctx_create(const graph *g, const profile_data *p, int max_micro_batches, sim_ctx **out) {
    if (!out) return PL_ERR_INVALID;
    *out = NULL;
    if (!g || !p || max_micro_batches < 1 || g->n_nodes < 1 || p->n_nodes != g->n_nodes ||
        p->n_devices < 1 || p->n_devices > SIM_MAX_DEVICES)
        return PL_ERR_INVALID;
    sim_ctx *c = calloc(1, sizeof *c);
    if (!c) return PL_ERR_NOMEM;
    const int n = g->n_nodes, D = p->n_devices, M = max_micro_batches;
    const int E = g->cons_start[n];
    c->g = g;
    c->p = p;
    c->n = n;
    c->D = D;
    c->M = M;
    long xmax = (long)n * (D - 1);
    if ((long)E < xmax) xmax = E;
    c->xmax = (int)xmax;
    long ops = 2L * n * M + D + 2L * xmax * M;
    if (ops > 400000000L || n >= 65536 || M >= 32768) { /* keep int indices and devnj packing safe */
        free(c);
        return PL_ERR_INVALID;
    }
    c->ops_cap = (int)ops;

    /* transfer size classes: GPT nodes share a handful of output sizes */
    if (ALLOC(c->bclass, n) || ALLOC(c->cbytes, n)) goto out_nomem;
    for (int i = 0; i < n; i++) {
        int64_t b = p->node_mem[i].out_bytes_per_sample;
        int k = 0;
        while (k < c->n_class && c->cbytes[k] != b) k++;
        if (k == c->n_class) c->cbytes[c->n_class++] = b;
        c->bclass[i] = k;
    }
    const long ncop = 2L * n * M + D;
    if (ALLOC(c->craw, (long)D * n * PHASE_COUNT) || ALLOC(c->traw, (long)c->n_class * D * D) ||
        ALLOC(c->dev, n) || ALLOC(c->stage_of, n) || ALLOC(c->st_lo, n) || ALLOC(c->st_hi, n) ||
        ALLOC(c->st_dev, n) || ALLOC(c->n_on, D) || ALLOC(c->optsum, D) || ALLOC(c->dstatic, D) ||
        ALLOC(c->dws, D) || ALLOC(c->xk, xmax) || ALLOC(c->xd, xmax) ||
        ALLOC(c->xcnt, xmax) || ALLOC(c->xfirst, xmax) || ALLOC(c->xhead, n) || ALLOC(c->xnext, xmax) ||
        ALLOC(c->n_xout, n) || ALLOC(c->in_x, (long)n * GRAPH_MAX_INPUTS) || ALLOC(c->xslot, (long)n * D) ||
        ALLOC(c->xstamp, (long)n * D) || ALLOC(c->ndep_f, n) || ALLOC(c->ndep_b, n) ||
        ALLOC(c->si, 2L * n * M) || ALLOC(c->bucket, 2L * n + 2L * M + 4) || ALLOC(c->devops, ncop) || ALLOC(c->devnj, ncop) ||
        ALLOC(c->dstart, D + 1) || ALLOC(c->cur, D) || ALLOC(c->wl, D) || ALLOC(c->inwl, D) ||
        ALLOC(c->dep, ncop) || ALLOC(c->ready, ncop) || ALLOC(c->rpred, ncop) || ALLOC(c->extra, ncop) ||
        ALLOC(c->t0, ops) || ALLOC(c->t1, ops) || ALLOC(c->pred, ops) || ALLOC(c->gcnt, xmax * M) ||
        ALLOC(c->dfree, D) || ALLOC(c->busy, D) || ALLOC(c->dlast, D) || ALLOC(c->mem, D) ||
        ALLOC(c->mem_peak, D) || ALLOC(c->inflight, D) || ALLOC(c->inflight_max, D) ||
        ALLOC(c->stash_cnt, (long)D * M) || ALLOC(c->lfree, (long)D * D) || ALLOC(c->llast, (long)D * D) ||
        ALLOC(c->crit, ops) || ALLOC(c->lazy, 1))
        goto out_nomem;
    *out = c;
    return PL_OK;

out_nomem:
    sim_ctx_destroy(c);
    return PL_ERR_NOMEM;
}

pl_status sim_ctx_set_trace(sim_ctx *ctx, int on) {
    if (!ctx) return PL_ERR_INVALID;
    ctx->trace_on = on ? 1 : 0;
    if (ctx->trace_on && !ctx->events) {
        /* Allocated on first use so that untraced contexts stay small. */
        ctx->events = calloc((size_t)ctx->ops_cap, sizeof *ctx->events);
        if (!ctx->events) {
            ctx->trace_on = 0;
            return PL_ERR_NOMEM;
        }
    }
    return PL_OK;
}

const char *sim_last_error(const sim_ctx *ctx) { return ctx ? ctx->err : ""; }

static pl_status fail(sim_ctx *c, pl_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static pl_status fail(sim_ctx *c, pl_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return st;
}

/* Fill the cost caches for micro-batch size mb (once per size change). */
static void ensure_costs(sim_ctx *c, int mb) {
    if (c->cached_mb == mb) return;
    const profile_data *p = c->p;
    const int n = c->n, D = c->D;
    for (int d = 0; d < D; d++)
        for (int i = 0; i < n; i++)
            for (int ph = 0; ph < PHASE_COUNT; ph++)
                c->craw[((size_t)d * n + i) * PHASE_COUNT + ph] = profile_node_cost(p, d, mb, i, (cost_phase)ph);
    for (int k = 0; k < c->n_class; k++)
        for (int s = 0; s < D; s++)
            for (int t = 0; t < D; t++)
                c->traw[((size_t)k * D + s) * D + t] =
                    s == t ? 0.0 : profile_transfer_us(p, s, t, (double)c->cbytes[k] * mb);
    c->cached_mb = mb;
}

/* Stages: maximal runs of consecutive nodes on one device. */
static void build_stages(sim_ctx *c) {
    const int n = c->n;
    int S = 0;
    for (int d = 0; d < c->D; d++) c->n_on[d] = 0;
    for (int i = 0; i < n; i++) {
        int d = c->dev[i];
        c->n_on[d]++;
        if (i == 0 || c->dev[i - 1] != d) {
            c->st_lo[S] = i;
            c->st_dev[S] = d;
            S++;
        }
        c->st_hi[S - 1] = i;
        c->stage_of[i] = S - 1;
    }
    c->S = S;
}

/* Cross-device pairs (producer k, remote device d) and dependency counts. */
static void build_pairs(sim_ctx *c) {
    const graph *g = c->g;
    const int n = c->n, D = c->D;
    const int *dev = c->dev;
    c->stamp++;
    if (c->stamp == 0) { /* wrapped: forget every slot */
        memset(c->xstamp, 0, sizeof *c->xstamp * (size_t)n * D);
        c->stamp = 1;
    }
    int nx = 0;
    for (int i = 0; i < n; i++) {
        c->xhead[i] = -1;
        c->n_xout[i] = 0;
        c->ndep_b[i] = 1; /* its own forward */
    }
    for (int i = 0; i < n; i++) {
        const graph_node *nd = &g->nodes[i];
        c->ndep_f[i] = nd->n_inputs;
        for (int s = 0; s < nd->n_inputs; s++) {
            int k = nd->inputs[s];
            int di = dev[i];
            if (dev[k] == di) {
                c->in_x[i * GRAPH_MAX_INPUTS + s] = -1;
                c->ndep_b[k]++; /* B(k) waits for B(i) locally */
                continue;
            }
            size_t slot = (size_t)k * D + di;
            int x;
            if (c->xstamp[slot] == c->stamp) {
                x = c->xslot[slot];
            } else {
                x = nx++;
                c->xstamp[slot] = c->stamp;
                c->xslot[slot] = x;
                c->xk[x] = k;
                c->xd[x] = di;
                c->xcnt[x] = 0;
                c->xfirst[x] = i;
                c->xnext[x] = c->xhead[k];
                c->xhead[k] = x;
                c->n_xout[k]++;
                c->ndep_b[k]++; /* B(k) waits for the gradient from di */
            }
            c->xcnt[x]++;
            c->in_x[i * GRAPH_MAX_INPUTS + s] = x;
        }
    }
    c->n_x = nx;
}

/* Op ids: F(i,j) = j*n + i; B(i,j) = (m + j)*n + i; OPT(d) = 2mn + d;
 * transfers 2mn + D + (x*m + j)*2 + dir (dir 0 activation, 1 gradient). */
#define OP_F(c, i, j) ((j) * (c)->n + (i))
#define OP_B(c, i, j) (((c)->m + (j)) * (c)->n + (i))

/* Append the node items of stage item (k, j, phase) to device d's queue. */
static inline int expand_stage(sim_ctx *c, int w, int k, int j, int ph) {
    int lo = c->st_lo[k], hi = c->st_hi[k];
    const int jj = j << 16;
    if (ph == 0)
        for (int i = lo; i <= hi; i++) {
            c->devnj[w] = i | jj;
            c->devops[w++] = OP_F(c, i, j);
        }
    else
        for (int i = hi; i >= lo; i--) {
            c->devnj[w] = i | jj;
            c->devops[w++] = OP_B(c, i, j);
        }
    return w;
}

/* Per-device queue offsets: 2*m items per node, plus AdamW on used devices. */
static void queue_offsets(sim_ctx *c) {
    int off = 0;
    for (int d = 0; d < c->D; d++) {
        c->dstart[d] = off;
        off += 2 * c->m * c->n_on[d] + (c->n_on[d] > 0);
    }
    c->dstart[c->D] = off;
}

static inline int stage_key(int order, int S, int m, int k, int j, int ph) {
    if (order == SCHED_GPIPE)
        return ph == 0 ? k + j : (S - 1 + m) + (S - 1 - k) + (m - 1 - j);
    if (ph == 0) return j <= S - 1 - k ? k + j : k + 2 * j;
    return 2 * S - 1 - k + 2 * j;
}

/* gpipe and 1f1b: counting sort of all stage items by ideal start time. */
static void order_by_key(sim_ctx *c, int order) {
    const int S = c->S, m = c->m;
    const int R = 2 * S + 2 * m; /* keys lie in [0, 2S + 2m - 3] */
    int *b = c->bucket;
    memset(b, 0, sizeof *b * (size_t)(R + 1));
    /* generation order (the tie-break): backwards first, then by stage, mb */
    int *key = c->devnj; /* scratch: devnj is written only after the sort */
    int t = 0;
    for (int ph = 1; ph >= 0; ph--)
        for (int k = 0; k < S; k++)
            for (int j = 0; j < m; j++) {
                key[t] = stage_key(order, S, m, k, j, ph);
                b[key[t++] + 1]++;
            }
    for (int r = 0; r < R; r++) b[r + 1] += b[r];
    t = 0;
    for (int ph = 1; ph >= 0; ph--)
        for (int k = 0; k < S; k++)
            for (int j = 0; j < m; j++) c->si[b[key[t++]]++] = ((k * m + j) << 1) | ph;
    int *w = c->cur; /* write positions, reset before the pass */
    for (int d = 0; d < c->D; d++) w[d] = c->dstart[d];
    const int total = 2 * S * m;
    for (t = 0; t < total; t++) {
        int e = c->si[t], ph = e & 1, kj = e >> 1, k = kj / m, j = kj - k * m;
        int d = c->st_dev[k];
        w[d] = expand_stage(c, w[d], k, j, ph);
    }
    for (int d = 0; d < c->D; d++)
        if (c->n_on[d] > 0) {
            c->devnj[w[d]] = 0;
            c->devops[w[d]++] = 2 * m * c->n + d;
        }
}

/* interleaved: Megatron-LM's per-rank order on a contiguous chunk placement. */
static pl_status order_interleaved(sim_ctx *c, int v) {
    const int S = c->S, m = c->m;
    int p = 0;
    for (int d = 0; d < c->D; d++) p += c->n_on[d] > 0;
    if (S != v * p)
        return fail(c, PL_ERR_SCHEDULE,
                    "interleaved with %d chunks needs a contiguous chunk placement: %d runs of nodes "
                    "over %d devices, expected %d",
                    v, S, p, v * p);
    for (int k = p; k < S; k++)
        if (c->st_dev[k] != c->st_dev[k % p])
            return fail(c, PL_ERR_SCHEDULE,
                        "interleaved needs chunks cycling through the devices in the same order: run %d "
                        "is on device %d, expected %d",
                        k, c->st_dev[k], c->st_dev[k % p]);
    if (m % p != 0)
        return fail(c, PL_ERR_SCHEDULE,
                    "interleaved needs the micro-batch count (%d) to be a multiple of the pipeline "
                    "depth (%d devices)",
                    m, p);
    const int N = m * v, pv = p * v;
    for (int r = 0; r < p; r++) {
        int d = c->st_dev[r];
        int w = c->dstart[d];
        int warm = m == p ? N : 2 * (p - r - 1) + (v - 1) * p;
        if (warm > N) warm = N;
        int nf = 0, nb = 0;
        /* one forward (virtual micro-batch nf) or one backward (nb) */
#define FWD_ONE()                                                                   \
    do {                                                                            \
        int ch = (nf % pv) / p, j = (nf / pv) * p + nf % p;                         \
        w = expand_stage(c, w, ch * p + r, j, 0);                                   \
        nf++;                                                                       \
    } while (0)
#define BWD_ONE()                                                                   \
    do {                                                                            \
        int ch = v - 1 - (nb % pv) / p, j = (nb / pv) * p + nb % p;                 \
        w = expand_stage(c, w, ch * p + r, j, 1);                                   \
        nb++;                                                                       \
    } while (0)
        for (int t = 0; t < warm; t++) FWD_ONE();
        for (int t = 0; t < N - warm; t++) {
            FWD_ONE();
            BWD_ONE();
        }
        while (nb < N) BWD_ONE();
#undef FWD_ONE
#undef BWD_ONE
        c->devnj[w] = 0;
        c->devops[w++] = 2 * m * c->n + d;
    }
    return PL_OK;
}

/* Record a traced event. */
static inline void trace_ev(sim_ctx *c, sim_event_kind kind, int node, int j, int d, int dst, double s,
                            double e) {
    sim_event *ev = &c->events[c->n_events++];
    ev->kind = kind;
    ev->node = node;
    ev->micro_batch = j;
    ev->device = d;
    ev->dst_device = dst;
    ev->start_us = s;
    ev->end_us = e;
}

static int event_cmp(const void *a, const void *b) {
    const sim_event *x = a, *y = b;
    if (x->start_us != y->start_us) return x->start_us < y->start_us ? -1 : 1;
    if (x->dst_device != y->dst_device) return x->dst_device < y->dst_device ? -1 : 1; /* compute first */
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    return (x->end_us < y->end_us) ? -1 : (x->end_us > y->end_us);
}

pl_status sim_run(sim_ctx *c, const int *placement, const schedule *sched, const int64_t *caps,
                  const sim_params *prm_in, sim_result *res) {
    if (!c) return PL_ERR_INVALID;
    c->err[0] = 0;
    c->last_op = -1; /* no path or events until this run succeeds */
    c->lazy->crit_built = 0;
    c->have_events = 0;
    c->n_events = 0;
    if (!placement || !sched || !res) return fail(c, PL_ERR_INVALID, "NULL argument");
    const graph *g = c->g;
    const profile_data *p = c->p;
    const int n = c->n, D = c->D;
    for (int i = 0; i < n; i++) {
        if (placement[i] < 0 || placement[i] >= D)
            return fail(c, PL_ERR_PLACEMENT_RANGE, "node %d (%s) is on device %d; the profile has devices 0..%d",
                        i, g->nodes[i].name, placement[i], D - 1);
        c->dev[i] = placement[i];
    }
    const int m = sched->micro_batches;
    if (m < 1 || g->cfg.batch % m != 0)
        return fail(c, PL_ERR_SCHEDULE, "micro-batch count %d does not divide the batch of %d", m,
                    g->cfg.batch);
    if (m > c->M)
        return fail(c, PL_ERR_SCHEDULE, "micro-batch count %d exceeds this context's maximum of %d", m, c->M);
    if ((int)sched->order < 0 || sched->order >= SCHED_ORDER_COUNT)
        return fail(c, PL_ERR_SCHEDULE, "unknown schedule order %d", (int)sched->order);
    if (sched->chunks < 1 || (sched->chunks != 1 && sched->order != SCHED_INTERLEAVED))
        return fail(c, PL_ERR_SCHEDULE, "chunks per device must be 1, or more with the interleaved schedule");
    sim_params prm;
    if (prm_in) prm = *prm_in;
    else sim_params_default(&prm);
    /* Negative times or scales have no physical meaning and would break the
     * critical-path walk, which relies on every op taking time >= 0. */
    for (int i = 0; i < SIM_N_PARAMS; i++) {
        double v = *sim_param_ptr(&prm, i);
        if (!isfinite(v) || v < 0)
            return fail(c, PL_ERR_INVALID, "simulator parameter %s is %g; it must be finite and >= 0",
                        sim_param_name(i), v);
    }

    c->m = m;
    c->mb = g->cfg.batch / m;
    const int mb = c->mb;
    ensure_costs(c, mb);
    build_stages(c);
    build_pairs(c);
    const int mn = m * n;
    c->n_cops = 2 * mn + D;
    c->n_ops = c->n_cops + 2 * c->n_x * m;
    queue_offsets(c);
    if (sched->order == SCHED_INTERLEAVED && sched->chunks > 1) {
        pl_status st = order_interleaved(c, sched->chunks);
        if (st != PL_OK) return st;
    } else {
        order_by_key(c, sched->order == SCHED_GPIPE ? SCHED_GPIPE : SCHED_1F1B);
    }

    /* per-run state */
    for (int j = 0; j < m; j++) {
        memcpy(c->dep + (size_t)j * n, c->ndep_f, sizeof *c->dep * (size_t)n);
        memcpy(c->dep + (size_t)(m + j) * n, c->ndep_b, sizeof *c->dep * (size_t)n);
    }
    for (int d = 0; d < D; d++) c->dep[2 * mn + d] = 0;
    /* ready < 0: no remote input has arrived (rpred is then unset) */
    for (int o = 0; o < c->n_cops; o++) c->ready[o] = -1.0;
    const double contention = prm.contention;
    if (contention != 0.0) memset(c->extra, 0, sizeof *c->extra * (size_t)c->n_cops);
    for (int x = 0; x < c->n_x; x++)
        for (int j = 0; j < m; j++) c->gcnt[x * m + j] = c->xcnt[x];
    memset(c->dfree, 0, sizeof *c->dfree * (size_t)D);
    memset(c->busy, 0, sizeof *c->busy * (size_t)D);
    memset(c->mem, 0, sizeof *c->mem * (size_t)D);
    memset(c->mem_peak, 0, sizeof *c->mem_peak * (size_t)D);
    memset(c->inflight, 0, sizeof *c->inflight * (size_t)D);
    memset(c->inflight_max, 0, sizeof *c->inflight_max * (size_t)D);
    memset(c->stash_cnt, 0, sizeof *c->stash_cnt * (size_t)D * m);
    memset(c->lfree, 0, sizeof *c->lfree * (size_t)D * D);
    for (int d = 0; d < D; d++) c->dlast[d] = -1;
    for (int l = 0; l < D * D; l++) c->llast[l] = -1;

    const int tracing = c->trace_on && c->events;
    const double cs = prm.compute_scale, lo = prm.launch_overhead_us;
    /* per-device AdamW time, static bytes and workspace: one pass over nodes */
    for (int d = 0; d < D; d++) {
        c->optsum[d] = 0.0;
        c->dstatic[d] = 0;
        c->dws[d] = 0;
    }
    for (int i = 0; i < n; i++) {
        const int d = c->dev[i];
        c->optsum[d] += c->craw[((size_t)d * n + i) * PHASE_COUNT + PHASE_OPT] * cs + lo;
        c->dstatic[d] += 4 * p->node_mem[i].param_bytes;
        if (p->node_mem[i].workspace_bytes > c->dws[d]) c->dws[d] = p->node_mem[i].workspace_bytes;
    }
    const double ts = prm.transfer_scale, tl = prm.transfer_latency_us;
    const double *craw = c->craw;
    const profile_node_mem *nm = p->node_mem;
    const int xbase = c->n_cops;
    int n_transfers = 0;
    double tbytes = 0.0;
    double maxend = 0.0;
    int last_op = -1;

    /* The pass. Hot fields live in locals: stores into the int arrays
     * could otherwise alias the context's int fields and force reloads. */
    int *const dep = c->dep, *const rpred = c->rpred, *const pred = c->pred, *const dlast = c->dlast;
    double *const ready = c->ready, *const t0 = c->t0, *const t1 = c->t1, *const extra = c->extra;
    double *const dfree = c->dfree, *const busy = c->busy, *const lfree = c->lfree;
    const double *const optsum = c->optsum, *const traw = c->traw;
    int64_t *const mem = c->mem, *const mem_peak = c->mem_peak;
    int *const stash_cnt = c->stash_cnt, *const inflight = c->inflight, *const inflight_max = c->inflight_max;
    int *const llast = c->llast, *const cur = c->cur, *const gcnt = c->gcnt, *const wl = c->wl;
    char *const inwl = c->inwl;
    const int *const devops = c->devops, *const devnj = c->devnj, *const dstart = c->dstart;
    const int *const in_x = c->in_x, *const xfirst = c->xfirst, *const xk = c->xk, *const xd = c->xd;
    const int *const xhead = c->xhead, *const xnext = c->xnext, *const n_xout = c->n_xout;
    const int *const bclass = c->bclass, *const pdev = c->dev;
    const int *const cons_start = g->cons_start, *const cons = g->cons;
    const graph_node *const nodes = g->nodes;
#define OPF(i, j) ((j) * n + (i))
#define OPB(i, j) ((m + (j)) * n + (i))
#define WL_PUSH(dd)              \
    do {                         \
        if (!inwl[dd]) {         \
            inwl[dd] = 1;        \
            wl[nwl++] = (dd);    \
        }                        \
    } while (0)
    int nwl = 0;
    for (int d = D - 1; d >= 0; d--) {
        cur[d] = dstart[d];
        inwl[d] = 0;
        if (dstart[d + 1] > dstart[d]) WL_PUSH(d);
    }
    while (nwl > 0) {
        const int d = wl[--nwl];
        inwl[d] = 0;
        const int qend = dstart[d + 1];
        while (cur[d] < qend) {
            const int pos = cur[d];
            const int op = devops[pos];
            if (dep[op] > 0) break;
            /* start: device free, or the input that arrived last */
            double st = dfree[d];
            int pr = dlast[d];
            if (ready[op] >= st) { /* ties go to the input: it is the cross-device cause */
                st = ready[op];
                pr = rpred[op];
            }
            double dur;
            int node = -1, j = -1, ph;
            if (op < 2 * mn) {
                ph = op >= mn;
                node = devnj[pos] & 0xffff;
                j = devnj[pos] >> 16;
                dur = craw[((size_t)d * n + node) * PHASE_COUNT + ph] * cs + lo;
            } else {
                ph = PHASE_OPT;
                dur = optsum[d];
            }
            if (contention != 0.0) dur += extra[op];
            const double en = st + dur;
            t0[op] = st;
            t1[op] = en;
            pred[op] = pr;
            dfree[d] = en;
            dlast[d] = op;
            busy[d] += dur;
            if (en >= maxend) {
                maxend = en;
                last_op = op;
            }
            if (tracing)
                trace_ev(c, ph == PHASE_FWD ? SIM_EV_FWD : ph == PHASE_BWD ? SIM_EV_BWD : SIM_EV_OPT, node, j, d,
                         -1, st, en);

            if (ph == PHASE_FWD) {
                const int i = node;
                const graph_node *nd = &nodes[i];
                /* memory: stash and first-use receive buffers */
                int64_t add = nm[i].act_bytes_per_sample * mb;
                for (int s = 0; s < nd->n_inputs; s++) {
                    int x = in_x[i * GRAPH_MAX_INPUTS + s];
                        if (x >= 0 && xfirst[x] == i && !(s > 0 && nd->inputs[0] == nd->inputs[s]))
                        add += nm[xk[x]].out_bytes_per_sample * mb;
                }
                mem[d] += add;
                if (mem[d] > mem_peak[d]) mem_peak[d] = mem[d];
                if (stash_cnt[d * m + j]++ == 0 && ++inflight[d] > inflight_max[d])
                    inflight_max[d] = inflight[d];
                /* dependents: own backward, local consumers, remote pairs */
                dep[OPB(i, j)]--;
                for (int e = cons_start[i]; e < cons_start[i + 1]; e++) {
                    int cn = cons[e];
                    if (pdev[cn] == d) dep[OPF(cn, j)]--;
                }
                for (int x = xhead[i]; x >= 0; x = xnext[x]) {
                    const int dd = xd[x], l = d * D + dd;
                    const int top = xbase + (x * m + j) * 2;
                    double ts0 = lfree[l];
                    int tpr = llast[l];
                    if (en >= ts0) {
                        ts0 = en;
                        tpr = op;
                    }
                    double tdur = traw[((size_t)bclass[i] * D + d) * D + dd] * ts + tl;
                    double te = ts0 + tdur;
                    lfree[l] = te;
                    llast[l] = top;
                    t0[top] = ts0;
                    t1[top] = te;
                    pred[top] = tpr;
                    n_transfers++;
                    tbytes += (double)nm[i].out_bytes_per_sample * mb;
                    if (tracing) trace_ev(c, SIM_EV_SEND_ACT, i, j, d, dd, ts0, te);
                    if (contention != 0.0) {
                        extra[OPF(xfirst[x], j)] += contention * tdur;
                        extra[devops[pos + 1]] += contention * tdur;
                    }
                    /* consumers of i on dd */
                    for (int e = cons_start[i]; e < cons_start[i + 1]; e++) {
                        int cn = cons[e];
                        if (pdev[cn] != dd) continue;
                        int fo = OPF(cn, j);
                        if (te >= ready[fo]) {
                            ready[fo] = te;
                            rpred[fo] = top;
                        }
                        if (--dep[fo] == 0) WL_PUSH(dd);
                    }
                }
            } else if (ph == PHASE_BWD) {
                const int i = node;
                const graph_node *nd = &nodes[i];
                /* memory: received output gradients live for this backward */
                int64_t gbytes = (int64_t)n_xout[i] * nm[i].out_bytes_per_sample * mb;
                if (gbytes > 0) {
                    mem[d] += gbytes;
                    if (mem[d] > mem_peak[d]) mem_peak[d] = mem[d];
                }
                mem[d] -= gbytes + nm[i].act_bytes_per_sample * mb;
                if (--stash_cnt[d * m + j] == 0) inflight[d]--;
                for (int s = 0; s < nd->n_inputs; s++) {
                    const int k = nd->inputs[s];
                    const int x = in_x[i * GRAPH_MAX_INPUTS + s];
                    const int bo = OPB(k, j);
                    if (x < 0) {
                        dep[bo]--;
                        continue;
                    }
                    if (--gcnt[x * m + j] > 0) continue;
                    /* last consumer on d done: free the received input, send its gradient */
                    mem[d] -= nm[k].out_bytes_per_sample * mb;
                    const int dk = pdev[k], l = d * D + dk;
                    const int top = xbase + (x * m + j) * 2 + 1;
                    double ts0 = lfree[l];
                    int tpr = llast[l];
                    if (en >= ts0) {
                        ts0 = en;
                        tpr = op;
                    }
                    double tdur = traw[((size_t)bclass[k] * D + d) * D + dk] * ts + tl;
                    double te = ts0 + tdur;
                    lfree[l] = te;
                    llast[l] = top;
                    t0[top] = ts0;
                    t1[top] = te;
                    pred[top] = tpr;
                    n_transfers++;
                    tbytes += (double)nm[k].out_bytes_per_sample * mb;
                    if (tracing) trace_ev(c, SIM_EV_SEND_GRAD, k, j, d, dk, ts0, te);
                    if (contention != 0.0) {
                        extra[bo] += contention * tdur;
                        extra[devops[pos + 1]] += contention * tdur;
                    }
                    if (te >= ready[bo]) {
                        ready[bo] = te;
                        rpred[bo] = top;
                    }
                    if (--dep[bo] == 0) WL_PUSH(dk);
                }
            }
            cur[d] = pos + 1;
        }
    }
    for (int d = 0; d < D; d++)
        if (cur[d] != dstart[d + 1])
            return fail(c, PL_ERR_SCHEDULE,
                        "the %s order deadlocks on this placement (device %d waits at item %d of %d)",
                        schedule_order_name(sched->order), d, cur[d] - dstart[d],
                        dstart[d + 1] - dstart[d]);
#undef OPF
#undef OPB
#undef WL_PUSH
    c->last_op = last_op;

    /* results */
    memset(res, 0, sizeof *res);
    res->n_devices = D;
    res->oom_device = -1;
    res->n_stages = c->S;
    const double span = maxend;
    res->step_us = span + prm.step_fixed_us;
    int used = 0;
    double bsum = 0.0;
    for (int d = 0; d < D; d++) {
        int64_t cap = caps ? caps[d] : p->devices[d].mem_bytes;
        res->cap_bytes[d] = cap;
        if (c->n_on[d] == 0) continue;
        used++;
        res->static_bytes[d] = c->dstatic[d];
        res->peak_bytes[d] = c->dstatic[d] + c->dws[d] + c->mem_peak[d];
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
    res->n_used_devices = used;
    res->bubble_fraction = used ? bsum / used : 0.0;
    res->n_transfers = n_transfers;
    res->transfer_bytes = tbytes;
    int len = 0;
    double cc = 0.0, ct = 0.0;
    for (int o = last_op; o >= 0; o = c->pred[o]) {
        len++;
        if (o < xbase) cc += c->t1[o] - c->t0[o];
        else ct += c->t1[o] - c->t0[o];
    }
    res->critical_path_len = len;
    res->critical_compute_us = cc;
    res->critical_transfer_us = ct;
    if (tracing) {
        qsort(c->events, (size_t)c->n_events, sizeof *c->events, event_cmp);
        c->have_events = 1;
    }
    return PL_OK;
}

const sim_event *sim_events(const sim_ctx *ctx, int *n) {
    if (!ctx || !ctx->have_events) {
        if (n) *n = 0;
        return NULL;
    }
    if (n) *n = ctx->n_events;
    return ctx->events;
}

/* Describe op o of the last run as an event. */
static void op_event(const sim_ctx *c, int o, sim_event *ev) {
    const int mn = c->m * c->n;
    ev->start_us = c->t0[o];
    ev->end_us = c->t1[o];
    ev->dst_device = -1;
    if (o < 2 * mn) {
        int ph = o >= mn, r = o - ph * mn;
        ev->kind = ph ? SIM_EV_BWD : SIM_EV_FWD;
        ev->micro_batch = r / c->n;
        ev->node = r % c->n;
        ev->device = c->dev[ev->node];
    } else if (o < c->n_cops) {
        ev->kind = SIM_EV_OPT;
        ev->node = -1;
        ev->micro_batch = -1;
        ev->device = o - 2 * mn;
    } else {
        int t = o - c->n_cops, dir = t & 1, xj = t >> 1, x = xj / c->m;
        ev->micro_batch = xj % c->m;
        ev->node = c->xk[x];
        int a = c->dev[c->xk[x]], b = c->xd[x];
        ev->kind = dir ? SIM_EV_SEND_GRAD : SIM_EV_SEND_ACT;
        ev->device = dir ? b : a;
        ev->dst_device = dir ? a : b;
    }
}

const sim_event *sim_critical_path(const sim_ctx *ctx, int *n) {
    if (!ctx || ctx->last_op < 0 || ctx->n_ops == 0) {
        if (n) *n = 0;
        return NULL;
    }
    sim_lazy *lz = ctx->lazy;
    if (!lz->crit_built) {
        int len = 0;
        for (int o = ctx->last_op; o >= 0; o = ctx->pred[o]) len++;
        int w = len;
        for (int o = ctx->last_op; o >= 0; o = ctx->pred[o]) op_event(ctx, o, &ctx->crit[--w]);
        lz->crit_len = len;
        lz->crit_built = 1;
    }
    if (n) *n = lz->crit_len;
    return ctx->crit;
}

/* Write s as a JSON string body (without quotes). */
static void json_str(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
}

const char *sim_event_kind_name(sim_event_kind k) {
    switch (k) {
    case SIM_EV_FWD: return "F";
    case SIM_EV_BWD: return "B";
    case SIM_EV_OPT: return "adamw";
    case SIM_EV_SEND_ACT: return "act";
    case SIM_EV_SEND_GRAD: return "grad";
    default: return "?";
    }
}

pl_status sim_write_chrome_trace(const sim_ctx *ctx, FILE *f) {
    if (!ctx || !f) return PL_ERR_INVALID;
    if (!ctx->have_events) return PL_ERR_INVALID;
    const int D = ctx->D;
    const graph *g = ctx->g;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"devices\"}},\n");
    fprintf(f, "{\"ph\":\"M\",\"pid\":2,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"links\"}},\n");
    fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":1}},\n");
    fprintf(f, "{\"ph\":\"M\",\"pid\":2,\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":2}}");
    for (int d = 0; d < D; d++) {
        if (ctx->n_on[d] == 0) continue;
        fprintf(f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"gpu%d ", d, d);
        json_str(f, ctx->p->devices[d].name);
        fprintf(f, "\"}},\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_sort_index\",\"args\":"
                   "{\"sort_index\":%d}}",
                d, d);
    }
    /* name the links that carried something */
    for (int s = 0; s < D; s++)
        for (int t = 0; t < D; t++) {
            if (s == t || ctx->llast[s * D + t] < 0) continue;
            fprintf(f,
                    ",\n{\"ph\":\"M\",\"pid\":2,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"link "
                    "gpu%d -> gpu%d\"}},\n{\"ph\":\"M\",\"pid\":2,\"tid\":%d,\"name\":\"thread_sort_index\","
                    "\"args\":{\"sort_index\":%d}}",
                    s * D + t, s, t, s * D + t, s * D + t);
        }
    for (int e = 0; e < ctx->n_events; e++) {
        const sim_event *ev = &ctx->events[e];
        int link = ev->dst_device >= 0;
        int pid = link ? 2 : 1;
        int tid = link ? ev->device * D + ev->dst_device : ev->device;
        fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"name\":\"", pid, tid,
                ev->start_us, ev->end_us - ev->start_us);
        if (ev->kind == SIM_EV_OPT) {
            fprintf(f, "adamw\",\"cat\":\"opt\",\"args\":{}}");
            continue;
        }
        json_str(f, g->nodes[ev->node].name);
        fprintf(f, " %s mb%d\",\"cat\":\"%s\",\"args\":{\"node\":%d,\"mb\":%d", sim_event_kind_name(ev->kind),
                ev->micro_batch, link ? "transfer" : "compute", ev->node, ev->micro_batch);
        if (link)
            fprintf(f, ",\"bytes\":%lld,\"src\":%d,\"dst\":%d",
                    (long long)(ctx->p->node_mem[ev->node].out_bytes_per_sample * ctx->mb), ev->device,
                    ev->dst_device);
        fprintf(f, "}}");
    }
    fprintf(f, "\n]}\n");
    return ferror(f) ? PL_ERR_IO : PL_OK;
}
