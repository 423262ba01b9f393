/*
 * sim_internal.h: what the simulator's own files share and nobody else
 * sees: the context (struct sim_ctx), the per-run records, the op
 * encodings, and the functions one file of sim/ calls in another.
 *
 *   sim_core.c   parameters, the context, the engine's bookkeeping (streams,
 *                transfers, buffers, dependencies) and the issue loop, sim_run
 *   sim_arena.h  the first-fit arena (header-only: hot path)
 *   sim_order.c  the per-device orders: core/schedule.c's per-rank orders
 *                (every order) expanded over each device's nodes or runs
 *   sim_trace.c  events, the critical path, the Chrome trace
 */
#ifndef PLACER_SIM_INTERNAL_H
#define PLACER_SIM_INTERNAL_H

#include <stdint.h>

#include "sim.h"
#include "sim_arena.h"

/* Largest message an NCCL send completes without its receiver (NCCL's
 * default 4 MiB buffer). Only matters with three or more devices: with
 * two, every transfer involves both comm streams anyway. */
#define SIM_EAGER_BYTES (4LL << 20)
/* The engine's arena alignment (hw/exec/arena.h). */
#define SIM_ALIGN 256

/* A buffer: arena block, and for a received one its pending receive. */
typedef struct {
    int64_t off, len; /* off < 0: none */
    double ready;     /* when the receive ends */
    int seq;          /* comm sequence number of its receive */
    int rop;          /* the receive's op id while the compute stream has not
                         waited for it yet, else -1 */
    int fence;        /* comm sequence number of the last send from it (its
                         block is released only once the compute stream has
                         waited that far), 0 if never sent */
} sim_buf;

/* A producer's output for one micro-batch as one device sees it, and its
 * gradient there. Slot i < n: node i on its own device; slot n + x: the
 * copy of pair x's producer on the pair's remote device. Consumers find
 * their inputs' slots in in_slot, so local and remote inputs take the
 * same path. */
typedef struct {
    sim_buf data;     /* the output (node slot) or the received copy (pair slot) */
    sim_buf grad;     /* the output gradient (node slot) or the contribution
                         to send back (pair slot) */
    int uses;         /* consumers on this device still needing data */
    int grad_left;    /* pair slot: consumers here whose backward is to come */
    int n_temps;      /* node slot: received gradient contributions to add */
    int64_t saved_off, saved_len; /* node slot: the saved block */
    int64_t wst_off;  /* node slot, split orders: what B keeps for W (-1 none) */
} sim_view;

/* A freed block whose last send was still outstanding. */
typedef struct {
    int64_t off, len;
    int seq; /* free once the compute stream has waited for this comm seq */
} sim_fence;

/* An operation of the last run: a compute op, or one half of a transfer.
 * What the run itself reads back (its critical-chain figures) is apart, in
 * sim_chain, so that the run's reads stay in a small array. */
typedef struct {
    double t0, t1;       /* start, end */
    int info;            /* kind | device << 3 (a transfer: the data's source) */
    int node, mb, dst;   /* node and micro-batch (-1 none); a transfer's destination, else -1 */
} sim_op;

/* The chain of predecessors that ends at an op (index -1: the empty chain). */
typedef struct {
    double ccomp;        /* compute time on the chain */
    int clen;            /* ops on the chain */
    int pred;            /* the op that fixed this one's start, -1 none */
} sim_chain;

/* Op kinds recorded for traces and the critical path. */
/* op kinds (sim_op.info & OPK_MASK, the device above OPK_BITS); OPK_ZERO_COMM: the
 * gradients' ZERO on the comm stream; OPK_WGRAD: a weight-gradient pass (W) of
 * an order that splits the backward */
enum { OPK_FWD = 0, OPK_BWD, OPK_OPT, OPK_ACT, OPK_GRAD, OPK_ADD, OPK_ZERO, OPK_ZERO_COMM, OPK_WGRAD };
#define OPK_BITS 4
#define OPK_MASK 15

/* What sim_critical_path builds on demand (it takes a const context). */
typedef struct {
    int crit_built;
    int crit_len;
} sim_lazy;

struct sim_ctx {
    const graph *g;        /* borrowed */
    const profile_data *p; /* borrowed */
    int n, D, M;           /* nodes, devices, max micro-batches */
    int xmax;              /* bound on (producer, remote device) pairs */
    int max_cons;          /* most consumer edges of a node */
    int ops_cap;           /* bound on ops of one run */
    int live_cap;          /* bound on live blocks per device */
    int trace_on;
    char err[192];

    /* graph and profile facts, fixed */
    uint8_t *bwd_reads;    /* [n] the node's backward reads its inputs again */
    uint8_t *is_loss;      /* [n] */
    int emb_node, loss_node; /* -1 when absent */
    int res_node;          /* a residual node (ADD costs), -1 when absent */
    int64_t *out_ps;       /* [n] output bytes per sample */
    int64_t *saved_ps;     /* [n] saved block bytes per sample */
    double *scr_ps;        /* [n][2] scratch bytes per sample, forward and backward call */
    int64_t ws_bytes;      /* backend workspace carved from each arena */
    double *opt_a, *opt_b; /* [D] AdamW line: us = a + b * param bytes */
    int *ucons_start, *ucons; /* distinct consumers of each node */
    int *uin_start, *uin;     /* distinct producers of each node's inputs */
    int *in_start, *in_node;  /* each node's inputs as the engine walks them
                                 (a second input equal to the first skipped) */

    /* costs at micro-batch size cached_mb */
    int cached_mb;
    double *craw;     /* [D][n][PHASE_COUNT] */
    int n_class;
    int *bclass;      /* [n] */
    int64_t *cbytes;  /* [n_class] */
    double *traw;     /* [n_class][D][D] */
    double *res_fwd;  /* [D] residual forward cost at cached_mb */
    int64_t *out_b;   /* [n] output bytes at cached_mb */
    int64_t *out_len, *saved_len; /* [n] arena blocks at cached_mb (aligned; 0: no saved block) */
    int64_t *scr_len;             /* [n][2] the forward's and the backward's scratch (0: none) */

    /* the last run */
    int m, mb, S, n_used, n_x, n_ops;
    int *dev;                  /* [n] */
    int *st_lo, *st_hi, *st_dev; /* [n] runs of nodes (interleaved only) */
    int *n_on;                 /* [D] */
    int *used;                 /* [D] used devices, ascending */
    int *rank;                 /* [D] 1f1b rank, -1 unused */
    int *xslot;                /* [n*D] pair of (k, d) */
    int *in_slot;              /* [in_start[n]] view slot of each input (see sim_view) */
    uint64_t *xmask;           /* [n] remote devices that consume the node (bit = device) */
    int *ucnt;                 /* [n*D] distinct consumers of k on d */
    int *local_uses;           /* [n] distinct consumers on the node's own device */
    uint32_t *seq;             /* [2nM] per-device op orders */
    uint8_t *issued;           /* [2nM] */
    int *dstart;               /* [D+1] */
    int *next;                 /* [D] head position; -1 once the tail is issued */
    int *left;                 /* [D] ops not issued yet */
    uint64_t active;           /* devices whose head op is ready (bit = device) */
    int *dep;                  /* [2nM] unissued dependencies of op (node, mb, bwd) */
    int *dep_init;             /* [2nM] their initial counts for dep_init_m micro-batches */
    int dep_init_m;            /* 0: not filled yet */
    int *pos_of;               /* [2nM] position of op (node, mb, bwd) in seq */
    uint64_t *rbits;           /* ready and unissued, by position in seq */
    int *dn_start, *dnodes;    /* [D+1], [n] nodes of each device, ascending */
    int64_t *pbytes;           /* [D] parameter bytes of each device */
    int64_t *param_b;          /* [n] parameter bytes of each node (the profile's) */
    sim_view *views;           /* [(n + xmax) * M], slot-major */
    sim_buf *temps;            /* [n*M*max_cons] */
    sim_arena *ar;             /* [D] */
    sim_range *frpool;         /* [D*live_cap] */
    sim_fence *deferred;       /* [D*live_cap] freed blocks waiting for their sends */
    int *n_deferred;           /* [D] */
    int *deferred_min;         /* [D] smallest seq in deferred, INT32_MAX when empty */
    int *comm_seq, *comm_waited; /* [D] */
    double *ct, *mt;           /* [D] compute and comm stream ends */
    double *lfree;             /* [D*D] ideal links: free time (interleaved) */
    int *llast;                /* [D*D] ideal links: last transfer */
    int *cp, *mp;              /* [D] op that fixed ct / mt */
    double *zend;              /* [D] end of the gradients' ZERO on the comm stream */
    int *zop;                  /* [D] that op, until the first backward waited (then -2) */
    double *pend;              /* [D] contention owed by the next compute op */
    double *busy;              /* [D] */
    int64_t *static_b;         /* [D] */
    int *stash_cnt, *inflight, *inflight_max; /* [D*M], [D], [D] */
    sim_op *ops;               /* [ops_cap] in issue order */
    sim_chain *chain;          /* [ops_cap] the ops' chains; chain[-1] is the empty one */
    int last_op;
    int reorders;
    /* The ops' own records (times, kind, node: sim_op) are written only
     * when tracing, or when sim_critical_path runs the last step again to
     * get them (their chains are always written): most callers never ask,
     * and the stores cost about 4% of a run. */
    int recorded;              /* ops[] holds the last run's records */
    int force_record;          /* record the next run (sim_critical_path) */
    schedule last_sched;       /* the last run's schedule and parameters, */
    sim_params last_prm;       /* to run it again (its placement is in dev) */

    /* orders that split backwards (zb-h1, zb-h2, zb-v, dualpipev): */
    int split;                 /* the last run's order has W ops */
    double *wfrac;             /* [n] the W share of each node's backward (profile_w_frac) */
    uint8_t *has_w;            /* [n] the node has a W op of its own (wfrac > 0, not the loss) */
    int *nw_on;                /* [D] such nodes on each device */
    /* every rank's order of the last schedule (schedule_rank_ops), kept
     * while the schedule and the rank count stay (sim_order.c) */
    schedule_op *sched_ops;    /* [3M(n+1)] rank r's at ord_start[r]: at most 2vm ops a rank
                                  over vp <= n runs, 3m over p <= n ranks, 6m over a V's 2p-1 <= n */
    int *ord_start;            /* [n+1] */
    schedule ord_sched;        /* what sched_ops holds: its schedule, */
    int ord_p;                 /* its rank count (0: nothing yet) */
    int64_t *wst_ps;           /* [n] bytes per sample B keeps for W: the engine's
                                  (attention dqkv 3TC floats, MLP dh 4TC, else 0) */
    int64_t *wst_len;          /* [n] that block at cached_mb (aligned; 0: none) */
    sim_event *events;
    int n_events;
    int have_events;
    sim_event *crit;
    sim_lazy *lazy;
};

/* Op codes in a device's order: node (16 bits), micro-batch (15), backward (1);
 * a W op (orders that split backwards, m < 2^14) is a backward with OPW set. */
#define OPC(i, j, b) ((uint32_t)(i) | (uint32_t)(j) << 16 | (uint32_t)(b) << 31)
#define OPW (1u << 30)
/* Op keys: (node, mb, bwd) -> index into dep and pos_of; W ops after all of
 * those: 2nm + node * m + mb. */
#define OPKEY(m, i, j, b) ((((size_t)(i) * (m) + (j)) << 1) | (size_t)(b))
#define OPKEY_W(n, m, i, j) (2 * (size_t)(n) * (m) + (size_t)(i) * (m) + (size_t)(j))

/* An arena block's length for a request of `bytes` (hw/exec/arena.c). */
static inline int64_t align_len(int64_t bytes) {
    if (bytes < 1) bytes = 1;
    return (bytes + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;
}

/* sim_ctx.c: fill the cost and block-size caches for micro-batch size mb
 * (a no-op when they hold it already). */
void sim_ensure_costs(sim_ctx *c, int mb);

/* Record a one-line failure detail in c->err and return st (sim_ctx.c). */
pl_status sim_fail(sim_ctx *c, pl_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* sim_order.c: stages of the placement and the per-device orders. */
void sim_count_stages(sim_ctx *c);
void sim_build_stages(sim_ctx *c);
/* Every used device's order of sched (c->m, c->split, the placement's
 * ranks, dnodes and dstart set) from core/schedule.c's per-rank orders,
 * each op expanded over its nodes, W ops for the nodes that have one,
 * into c->seq, and each op's position into c->pos_of. PL_ERR_SCHEDULE
 * (c->err set) when the placement does not fit the order (interleaved: a
 * contiguous chunk placement, m a multiple of p; the V orders: a V of
 * 2p-1 runs) or m is out of the order's range. */
pl_status sim_order(sim_ctx *c, const schedule *sched);

/* sim_trace.c: the order of sorted events (start time, compute first,
 * device, end time). */
int sim_event_cmp(const void *a, const void *b);
/* The event of op o (its record in c->ops): kind, node, devices, stream,
 * times (sim_trace.c; the traced run's events and the critical path). */
void sim_op_event(const sim_ctx *c, int o, sim_event *ev);

#endif
