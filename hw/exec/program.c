/*
 * program.c: compiles a placement and a schedule into per-device instruction
 * lists with every buffer's arena offset decided, by simulating one step's
 * issue order on the host.
 *
 * 1. Each used device gets its schedule order of operations (hw.h): F(j) is
 *    the forward of micro-batch j over the device's nodes in node order,
 *    B(j) the backward in reverse node order.
 * 2. Devices take turns issuing their next operation once it is ready (its
 *    producers' forwards, or its consumers' backwards, already issued).
 *    Transfers are issued as soon as they can be: an activation right after
 *    its producer's forward, a gradient right after the last consumer on the
 *    sending device has run its backward.
 * 3. While issuing, the arena of each device is used exactly as the real
 *    step will use it, which gives every offset and the peak.
 *
 * Buffers and their lifetimes (per node n, micro-batch j):
 *   out[n][j]   on dev(n): from n's forward until its last local use: the
 *               forward of a local consumer that does not read its input
 *               again in backward (residual), else that consumer's backward.
 *               The loss turns its input buffer into the logits gradient in
 *               place, so that buffer becomes the head's gradient buffer.
 *   saved[n][j] from n's forward to n's backward.
 *   grad[n][j]  gradient of out[n][j] on dev(n): from its first contribution
 *               to n's backward.
 *   rin[p][j][d]  the copy of a remote producer's output on d, until the
 *               last consumer on d has used it.
 *   rg[p][j][d]   d's gradient contribution for a remote producer, sent
 *               back once every consumer on d has run its backward.
 *
 * Streams and safety. Transfers run on comm streams. Before each transfer
 * both comm streams wait for their compute stream's current position, so a
 * transfer never reads data before it is written nor overwrites memory a
 * kernel still uses. A received buffer carries the event of its receive;
 * the first compute use waits for it. A buffer that was sent may be freed
 * only once the send has finished: its release is deferred until the
 * compute stream has waited on a later event of the same comm stream (the
 * comm stream runs in order). An allocation for a receive may reuse
 * deferred memory at once, since it runs on that same comm stream.
 */
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "program_internal.h"
#include "util.h"

typedef struct {
    int64_t off; /* arena offset, -1 when not allocated */
    int ev;      /* pending receive event on the device's comm stream, -1 none */
    int64_t seq; /* comm sequence number of that receive */
} pbuf;

typedef struct {
    pbuf out;      /* out[n][j] */
    int uses;      /* local uses left before out can be freed */
    int64_t saved; /* saved[n][j] */
    pbuf grad;     /* grad[n][j] */
    int n_temps;   /* received gradient contributions waiting to be added */
    int64_t wstash; /* split backward: what B kept for W, -1 none */
} nstate;

typedef struct {
    pbuf rin;     /* copy of the producer's output on this device */
    int rin_uses; /* consumers here that still need it */
    pbuf rg;      /* gradient contribution computed here */
    int rg_left;  /* consumers here whose backward is still to come */
} rstate;

typedef struct {
    int64_t off, seq;
} fence;

typedef struct {
    fence *a;
    int n, cap;
} fence_list;

typedef struct {
    uint8_t bwd; /* 0 forward, 1 backward (B alone where the order splits it), 2 its W */
    int node, mb;
} sched_op;

typedef struct {
    hw_program *p;
    const graph *g;
    int nn, m, nd;
    int split; /* the order splits backwards into B and W (zb-h1, zb-h2) */
    hw_arena *arena[HW_MAX_DEVICES];
    int64_t comm_seq[HW_MAX_DEVICES];
    int64_t comm_waited[HW_MAX_DEVICES];
    int zero_ev[HW_MAX_DEVICES];         /* the comm event of the gradients' ZERO, until a backward waited */
    fence_list fences[HW_MAX_DEVICES];   /* sent blocks not yet freed */
    fence_list deferred[HW_MAX_DEVICES]; /* freed blocks whose send may still run */
    nstate *ns;      /* [n * m + j] */
    pbuf *temps;     /* [(n * m + j) * max_cons + k] */
    int max_cons;
    rstate *rs;      /* [(n * m + j) * nd + d] */
    uint8_t *fwd_done, *bwd_done; /* [n * m + j] */
    /* dp all-reduce buckets (zero 0 with a dp group: dp_bucket_progress) */
    int bucketing;
    int64_t frontier[HW_MAX_DEVICES];  /* gradients [frontier, P) of the device are final */
    int64_t bucket_hi[HW_MAX_DEVICES]; /* [frontier, bucket_hi) final, not reduced yet */
    int cursor[HW_MAX_DEVICES];        /* the next node (downward) whose last backward moves the frontier */
    int oom_dev;
    char *msg;
    size_t len;
} cctx;

#define NS(c, n, j) (&(c)->ns[(size_t)(n) * (c)->m + (j)])
#define RS(c, n, j, d) (&(c)->rs[((size_t)(n) * (c)->m + (j)) * (c)->nd + (d)])
#define TMP(c, n, j, k) (&(c)->temps[((size_t)(n) * (c)->m + (j)) * (c)->max_cons + (k)])

static const pbuf PBUF_NONE = {-1, -1, 0};

/* ---- instruction emission ---- */

static pl_status emit(cctx *c, int d, hw_instr in) {
    hw_program *p = c->p;
    hw_program_dev *pd = &p->dev[d];
    if (pd->n_ins == pd->cap_ins) {
        int n = pd->cap_ins ? pd->cap_ins * 2 : 256;
        hw_instr *a = realloc(pd->ins, sizeof *a * (size_t)n);
        if (!a) return PL_ERR_NOMEM;
        pd->ins = a;
        pd->cap_ins = n;
    }
    if (p->n_order == p->cap_order) {
        int n = p->cap_order ? p->cap_order * 2 : 1024;
        hw_order_entry *a = realloc(p->order, sizeof *a * (size_t)n);
        if (!a) return PL_ERR_NOMEM;
        p->order = a;
        p->cap_order = n;
    }
    pd->ins[pd->n_ins] = in;
    p->order[p->n_order++] = (hw_order_entry){d, pd->n_ins};
    pd->n_ins++;
    return PL_OK;
}

static hw_instr instr(hi_kind k, int stream) {
    hw_instr in;
    memset(&in, 0, sizeof in);
    in.kind = (uint8_t)k;
    in.stream = (uint8_t)stream;
    in.node = -1;
    in.mb = -1;
    in.peer = -1;
    in.ev = -1;
    in.call = -1;
    return in;
}

static int new_event(cctx *c, int d) { return c->p->dev[d].n_events++; }

static pl_status emit_record(cctx *c, int d, int stream, int *ev) {
    *ev = new_event(c, d);
    hw_instr in = instr(HI_RECORD, stream);
    in.ev = *ev;
    return emit(c, d, in);
}

static pl_status emit_wait(cctx *c, int d, int stream, int ev_dev, int ev) {
    hw_instr in = instr(HI_WAIT, stream);
    in.peer = ev_dev;
    in.ev = ev;
    return emit(c, d, in);
}

/* ---- fences and allocation ---- */

static pl_status fence_push(fence_list *l, int64_t off, int64_t seq) {
    for (int i = 0; i < l->n; i++)
        if (l->a[i].off == off) {
            if (seq > l->a[i].seq) l->a[i].seq = seq;
            return PL_OK;
        }
    if (l->n == l->cap) {
        int n = l->cap ? l->cap * 2 : 16;
        fence *a = realloc(l->a, sizeof *a * (size_t)n);
        if (!a) return PL_ERR_NOMEM;
        l->a = a;
        l->cap = n;
    }
    l->a[l->n++] = (fence){off, seq};
    return PL_OK;
}

/* Release deferred blocks of device d whose send finished by comm seq upto. */
static pl_status release_deferred(cctx *c, int d, int64_t upto) {
    fence_list *l = &c->deferred[d];
    for (int i = 0; i < l->n;) {
        if (l->a[i].seq <= upto) {
            pl_status st = hw_arena_free(c->arena[d], l->a[i].off);
            if (st != PL_OK) return st;
            l->a[i] = l->a[--l->n];
        } else {
            i++;
        }
    }
    return PL_OK;
}

/* Make the compute stream of d wait for everything its comm stream has
 * been given so far. */
static pl_status join_comm(cctx *c, int d) {
    int ev;
    pl_status st = emit_record(c, d, HW_STREAM_COMM, &ev);
    if (st == PL_OK) st = emit_wait(c, d, HW_STREAM_COMPUTE, d, ev);
    if (st == PL_OK) c->comm_waited[d] = c->comm_seq[d];
    return st;
}

/* The compute stream of d waits for its gradients' ZERO on the comm stream
 * (setup_device), once: before d's first backward, or its AdamW. */
static pl_status wait_grad_zero(cctx *c, int d) {
    if (c->zero_ev[d] < 0) return PL_OK;
    pl_status st = emit_wait(c, d, HW_STREAM_COMPUTE, d, c->zero_ev[d]);
    c->zero_ev[d] = -1;
    return st;
}

static pl_status c_alloc(cctx *c, int d, int64_t bytes, int for_comm, int64_t *off) {
    pl_status st = release_deferred(c, d, for_comm ? INT64_MAX : c->comm_waited[d]);
    if (st != PL_OK) return st;
    st = hw_arena_alloc(c->arena[d], bytes, off);
    if (st == PL_ERR_DEVICE_OOM && c->deferred[d].n > 0 && !for_comm) {
        /* rather than fail, wait for the outstanding sends and reuse their memory */
        if ((st = join_comm(c, d)) != PL_OK) return st;
        if ((st = release_deferred(c, d, INT64_MAX)) != PL_OK) return st;
        st = hw_arena_alloc(c->arena[d], bytes, off);
    }
    if (st == PL_ERR_DEVICE_OOM && c->oom_dev < 0) c->oom_dev = d;
    return st;
}

static pl_status c_free(cctx *c, int d, int64_t off) {
    fence_list *f = &c->fences[d];
    for (int i = 0; i < f->n; i++)
        if (f->a[i].off == off) {
            int64_t seq = f->a[i].seq;
            f->a[i] = f->a[--f->n];
            if (seq <= c->comm_waited[d]) return hw_arena_free(c->arena[d], off);
            return fence_push(&c->deferred[d], off, seq);
        }
    return hw_arena_free(c->arena[d], off);
}

/* Before a compute instruction touches b: wait for its receive if pending. */
static pl_status c_use(cctx *c, int d, pbuf *b) {
    if (b->ev < 0) return PL_OK;
    pl_status st = emit_wait(c, d, HW_STREAM_COMPUTE, d, b->ev);
    if (st != PL_OK) return st;
    if (b->seq > c->comm_waited[d]) c->comm_waited[d] = b->seq;
    b->ev = -1;
    return PL_OK;
}

/* ---- transfers ---- */

/* Send bytes at src_off on s to a new buffer on t; *dst gets it, with its
 * receive event pending. The two halves are adjacent in the global order. */
static pl_status c_xfer(cctx *c, int s, int t, int64_t src_off, int64_t bytes, int grad, int node, int mb,
                        pbuf *dst) {
    int64_t doff;
    pl_status st = c_alloc(c, t, bytes, 1, &doff);
    if (st != PL_OK) return st;
    int e1, e2, e3;
    if ((st = emit_record(c, s, HW_STREAM_COMPUTE, &e1)) != PL_OK) return st;
    if ((st = emit_wait(c, s, HW_STREAM_COMM, s, e1)) != PL_OK) return st;
    if ((st = emit_record(c, t, HW_STREAM_COMPUTE, &e2)) != PL_OK) return st;
    if ((st = emit_wait(c, t, HW_STREAM_COMM, t, e2)) != PL_OK) return st;
    hw_instr sd = instr(HI_SEND, HW_STREAM_COMM);
    sd.peer = t; sd.a = src_off; sd.n = bytes; sd.grad = (uint8_t)grad; sd.node = node; sd.mb = mb;
    hw_instr rv = instr(HI_RECV, HW_STREAM_COMM);
    rv.peer = s; rv.a = doff; rv.n = bytes; rv.grad = (uint8_t)grad; rv.node = node; rv.mb = mb;
    if ((st = emit(c, s, sd)) != PL_OK) return st;
    if ((st = emit(c, t, rv)) != PL_OK) return st;
    c->comm_seq[s]++;
    c->comm_seq[t]++;
    if ((st = fence_push(&c->fences[s], src_off, c->comm_seq[s])) != PL_OK) return st;
    if ((st = emit_record(c, t, HW_STREAM_COMM, &e3)) != PL_OK) return st;
    dst->off = doff;
    dst->ev = e3;
    dst->seq = c->comm_seq[t];
    return PL_OK;
}

/* ---- node calls ---- */

static pl_status new_call(cctx *c, int node, int mb, int *idx) {
    hw_program *p = c->p;
    if (p->n_calls == p->cap_calls) {
        int n = p->cap_calls ? p->cap_calls * 2 : 256;
        hw_call_spec *a = realloc(p->calls, sizeof *a * (size_t)n);
        if (!a) return PL_ERR_NOMEM;
        p->calls = a;
        p->cap_calls = n;
    }
    hw_call_spec *s = &p->calls[p->n_calls];
    memset(s, 0, sizeof *s);
    s->node = node;
    s->mb = mb;
    s->in[0] = s->in[1] = s->out = s->saved = s->scratch = s->dout = -1;
    s->din[0] = s->din[1] = s->tokens = s->targets = s->wstash = -1;
    *idx = p->n_calls++;
    return PL_OK;
}

static int dev_of(const cctx *c, int n) { return c->p->placement[n]; }

/* A node's parameter shard and activation sizes on this program's rank: the
 * whole node, or its tensor-parallel slice (param_memory.h, dist_tp.h). */
static void rank_param_map(const hw_program *p, int n, hw_param_map *pl) {
    hw_node_param_map_tp(p->g, n, p->split.tp_size, pl);
}

static void rank_node_mem(const hw_program *p, int n, hw_node_mem *m) {
    if (p->split.tp_size > 1) hw_node_mem_floats_tp(p->g, n, p->b, p->bf16, p->split.tp_size, p->split.seq_parallel, m);
    else hw_node_mem_floats_prec(p->g, n, p->b, p->bf16, m);
}

/* Distinct consumers of p on device d. */
static int consumers_on(const cctx *c, int p, int d) {
    const graph *g = c->g;
    int k = 0;
    for (int i = g->cons_start[p]; i < g->cons_start[p + 1]; i++) {
        int cn = g->cons[i], dup = 0;
        for (int j = g->cons_start[p]; j < i; j++) dup |= g->cons[j] == cn;
        if (!dup && dev_of(c, cn) == d) k++;
    }
    return k;
}

static int64_t out_bytes(const cctx *c, int n) {
    hw_node_mem m;
    rank_node_mem(c->p, n, &m);
    return m.out * 4;
}

/* A consumer on d is done with producer p's output for micro-batch j. */
static pl_status release_use(cctx *c, int p, int j, int d) {
    if (dev_of(c, p) == d) {
        nstate *s = NS(c, p, j);
        if (--s->uses == 0 && s->out.off >= 0) {
            pl_status st = c_free(c, d, s->out.off);
            s->out.off = -1;
            return st;
        }
        return PL_OK;
    }
    rstate *r = RS(c, p, j, d);
    if (--r->rin_uses == 0 && r->rin.off >= 0) {
        pl_status st = c_free(c, d, r->rin.off);
        r->rin.off = -1;
        return st;
    }
    return PL_OK;
}

static pbuf *input_buf(cctx *c, int p, int j, int d) {
    return dev_of(c, p) == d ? &NS(c, p, j)->out : &RS(c, p, j, d)->rin;
}

static pl_status issue_fwd(cctx *c, int n, int j) {
    const graph_node *nd = &c->g->nodes[n];
    hw_program *p = c->p;
    const int d = dev_of(c, n);
    const int64_t BT = (int64_t)p->b * c->g->cfg.seq_len;
    pl_status st;
    int ci;
    if ((st = new_call(c, n, j, &ci)) != PL_OK) return st;
    hw_call_spec *s = &p->calls[ci];
    rank_param_map(p, n, &s->pl);
    rank_node_mem(p, n, &s->mem);
    for (int k = 0; k < nd->n_inputs; k++) {
        pbuf *b = input_buf(c, nd->inputs[k], j, d);
        if ((st = c_use(c, d, b)) != PL_OK) return st;
        s->in[k] = b->off;
    }
    if (nd->kind == OP_EMBEDDING) s->tokens = p->dev[d].off_tokens + (int64_t)j * BT * 4;
    if (nd->kind == OP_LOSS) {
        s->targets = p->dev[d].off_targets + (int64_t)j * BT * 4;
        s->din[0] = s->in[0]; /* the logits gradient is written in place */
    }
    int64_t out_off, saved_off = -1, scratch_off = -1;
    if ((st = c_alloc(c, d, s->mem.out * 4, 0, &out_off)) != PL_OK) return st;
    s = &p->calls[ci];
    s->out = out_off;
    if (s->mem.saved > 0) {
        if ((st = c_alloc(c, d, s->mem.saved * 4, 0, &saved_off)) != PL_OK) return st;
        s->saved = saved_off;
    }
    if (s->mem.fwd_scratch > 0) {
        if ((st = c_alloc(c, d, s->mem.fwd_scratch * 4, 0, &scratch_off)) != PL_OK) return st;
        s->scratch = scratch_off;
    }
    hw_instr in = instr(HI_FWD, HW_STREAM_COMPUTE);
    in.call = ci; in.node = n; in.mb = j;
    if ((st = emit(c, d, in)) != PL_OK) return st;
    if (scratch_off >= 0 && (st = c_free(c, d, scratch_off)) != PL_OK) return st;

    nstate *ns = NS(c, n, j);
    ns->out = (pbuf){out_off, -1, 0};
    ns->saved = saved_off;
    ns->uses = consumers_on(c, n, d);
    c->fwd_done[(size_t)n * c->m + j] = 1;

    /* what this forward does to its inputs' lifetimes */
    for (int k = 0; k < nd->n_inputs; k++) {
        int pr = nd->inputs[k];
        if (k == 1 && pr == nd->inputs[0]) continue;
        if (nd->kind == OP_LOSS) {
            /* the input buffer now holds the producer's output gradient */
            if (dev_of(c, pr) == d) {
                nstate *ps = NS(c, pr, j);
                ps->grad = ps->out;
                ps->grad.ev = -1;
                ps->out.off = -1;
                ps->uses--;
            } else {
                rstate *r = RS(c, pr, j, d);
                r->rg = r->rin;
                r->rg.ev = -1;
                r->rin.off = -1;
                r->rin_uses--;
            }
        } else if (!hw_kind_bwd_reads_input(nd->kind)) {
            if ((st = release_use(c, pr, j, d)) != PL_OK) return st;
        }
    }

    /* send the output to every other device that consumes it */
    const graph *g = c->g;
    for (int t = 0; t < c->nd; t++) {
        if (t == d) continue;
        int k = consumers_on(c, n, t);
        if (k == 0) continue;
        rstate *r = RS(c, n, j, t);
        if ((st = c_xfer(c, d, t, out_off, s->mem.out * 4, 0, n, j, &r->rin)) != PL_OK) return st;
        r->rin_uses = k;
        r->rg = PBUF_NONE;
        r->rg_left = k;
    }
    (void)g;
    if (ns->uses == 0 && ns->out.off >= 0) {
        if ((st = c_free(c, d, ns->out.off)) != PL_OK) return st;
        ns->out.off = -1;
    }
    return PL_OK;
}

/* Where the gradient for input producer pr of a node on d goes. */
static pbuf *grad_target(cctx *c, int pr, int j, int d) {
    return dev_of(c, pr) == d ? &NS(c, pr, j)->grad : &RS(c, pr, j, d)->rg;
}

/* Data parallelism, zero 0 (hw/dist/dist_dp.h): a node's gradient is final once
 * its last micro-batch's backward is issued. The final part of a device's
 * flat buffer grows down from its end (shards are in node order, backward
 * runs the other way); once it holds bucket_floats not yet reduced (or at
 * the device's tail, flush) they go out as one HI_DP_REDUCE, so the
 * all-reduces are issued as backward finishes, last parameters first, as
 * PyTorch DDP's buckets are. Every rank compiles the same program, so every
 * rank issues the same collectives in the same order. */
static pl_status dp_bucket_progress(cctx *c, int d, int flush) {
    hw_program *p = c->p;
    while (c->cursor[d] >= 0) {
        const int n = c->cursor[d];
        if (dev_of(c, n) == d) {
            for (int j = 0; j < c->m; j++)
                if (!c->bwd_done[(size_t)n * c->m + j]) goto frontier_done;
            c->frontier[d] = p->shard_off[n];
        }
        c->cursor[d]--;
    }
frontier_done:;
    const int64_t ready = c->bucket_hi[d] - c->frontier[d];
    if (ready <= 0 || (!flush && ready < p->split.bucket_floats)) return PL_OK;
    hw_instr in = instr(HI_DP_REDUCE, HW_STREAM_COMPUTE);
    in.a = c->frontier[d];
    in.n = ready;
    c->bucket_hi[d] = c->frontier[d];
    return emit(c, d, in);
}

static pl_status issue_bwd(cctx *c, int n, int j) {
    const graph_node *nd = &c->g->nodes[n];
    hw_program *p = c->p;
    const int d = dev_of(c, n);
    pl_status st;
    nstate *ns = NS(c, n, j);
    const int split = c->split && hw_bwd_splits(nd->kind); /* its W comes later (issue_w) */
    if (nd->kind != OP_LOSS) {
        int ci;
        if ((st = new_call(c, n, j, &ci)) != PL_OK) return st;
        hw_call_spec *s = &p->calls[ci];
        rank_param_map(p, n, &s->pl);
        rank_node_mem(p, n, &s->mem);
        if (ns->grad.off < 0) return pl_fail(c->msg, c->len, PL_ERR_UNSUPPORTED, "node %s gets no gradient", nd->name);
        /* the output gradient: first wait for it and add what other devices sent */
        if ((st = c_use(c, d, &ns->grad)) != PL_OK) return st;
        for (int k = 0; k < ns->n_temps; k++) {
            pbuf *tb = TMP(c, n, j, k);
            if ((st = c_use(c, d, tb)) != PL_OK) return st;
            hw_instr in = instr(HI_ADD, HW_STREAM_COMPUTE);
            in.a = ns->grad.off; in.b = tb->off; in.n = s->mem.out; in.node = n; in.mb = j;
            if ((st = emit(c, d, in)) != PL_OK) return st;
            if ((st = c_free(c, d, tb->off)) != PL_OK) return st;
        }
        ns->n_temps = 0;
        s = &p->calls[ci];
        s->dout = ns->grad.off;
        s->saved = ns->saved;
        if (nd->kind == OP_EMBEDDING) s->tokens = p->dev[d].off_tokens + (int64_t)j * p->b * c->g->cfg.seq_len * 4;
        for (int k = 0; k < nd->n_inputs; k++) {
            int pr = nd->inputs[k];
            s->in[k] = input_buf(c, pr, j, d)->off;
            if (k == 1 && pr == nd->inputs[0]) {
                s->din[1] = s->din[0];
                s->acc[1] = 1;
                continue;
            }
            pbuf *tg = grad_target(c, pr, j, d);
            if (tg->off < 0) {
                int64_t off;
                if ((st = c_alloc(c, d, out_bytes(c, pr), 0, &off)) != PL_OK) return st;
                s = &p->calls[ci];
                *tg = (pbuf){off, -1, 0};
                s->acc[k] = 0;
            } else {
                if ((st = c_use(c, d, tg)) != PL_OK) return st;
                s->acc[k] = 1;
            }
            s->din[k] = tg->off;
        }
        int64_t scratch_off = -1;
        if (s->mem.bwd_scratch > 0) {
            if ((st = c_alloc(c, d, s->mem.bwd_scratch * 4, 0, &scratch_off)) != PL_OK) return st;
            p->calls[ci].scratch = scratch_off;
        }
        if (split) {
            /* B: what W needs beyond the saved block, the inputs and dout,
             * which all stay to W */
            const int64_t wf = hw_bwd_wstash_floats(nd->kind, (int64_t)p->b * c->g->cfg.seq_len, c->g->cfg.d_model);
            int64_t woff = -1;
            if (wf > 0 && (st = c_alloc(c, d, wf * 4, 0, &woff)) != PL_OK) return st;
            p->calls[ci].part = HW_BWD_INPUT;
            p->calls[ci].wstash = woff;
            ns->wstash = woff;
        }
        if ((st = wait_grad_zero(c, d)) != PL_OK) return st; /* the device's first backward */
        hw_instr in = instr(HI_BWD, HW_STREAM_COMPUTE);
        in.call = ci; in.node = n; in.mb = j;
        if ((st = emit(c, d, in)) != PL_OK) return st;
        if (scratch_off >= 0 && (st = c_free(c, d, scratch_off)) != PL_OK) return st;
        if (!split) {
            if (ns->saved >= 0 && (st = c_free(c, d, ns->saved)) != PL_OK) return st;
            ns->saved = -1;
            if ((st = c_free(c, d, ns->grad.off)) != PL_OK) return st;
            ns->grad.off = -1;
        }
    }
    c->bwd_done[(size_t)n * c->m + j] = 1;
    if (c->bucketing && (st = dp_bucket_progress(c, d, 0)) != PL_OK) return st;

    for (int k = 0; k < nd->n_inputs; k++) {
        int pr = nd->inputs[k];
        if (k == 1 && pr == nd->inputs[0]) continue;
        if (nd->kind != OP_LOSS && hw_kind_bwd_reads_input(nd->kind) && !split)
            if ((st = release_use(c, pr, j, d)) != PL_OK) return st;
        int src = dev_of(c, pr);
        if (src == d) continue;
        rstate *r = RS(c, pr, j, d);
        if (--r->rg_left > 0) continue;
        /* every consumer here is done: send the gradient home */
        nstate *ps = NS(c, pr, j);
        pbuf got;
        if ((st = c_xfer(c, d, src, r->rg.off, out_bytes(c, pr), 1, pr, j, &got)) != PL_OK) return st;
        if (ps->grad.off < 0) {
            ps->grad = got;
        } else {
            *TMP(c, pr, j, ps->n_temps++) = got;
        }
        if ((st = c_free(c, d, r->rg.off)) != PL_OK) return st;
        r->rg.off = -1;
    }
    return PL_OK;
}

/* W of node n for micro-batch j (orders that split backwards): the weight
 * gradients from what B kept, then B's holdings are released: the saved
 * block, the output gradient, the stash and the inputs the backward reads.
 * Micro-batches' W of one node run in micro-batch order, as their whole
 * backwards did: the gradients accumulate in the same order. */
static pl_status issue_w(cctx *c, int n, int j) {
    const graph_node *nd = &c->g->nodes[n];
    hw_program *p = c->p;
    const int d = dev_of(c, n);
    nstate *ns = NS(c, n, j);
    int ci;
    pl_status st = new_call(c, n, j, &ci);
    if (st != PL_OK) return st;
    hw_call_spec *s = &p->calls[ci];
    rank_param_map(p, n, &s->pl);
    rank_node_mem(p, n, &s->mem);
    s->part = HW_BWD_WEIGHT;
    s->dout = ns->grad.off;
    s->saved = ns->saved;
    s->wstash = ns->wstash;
    for (int k = 0; k < nd->n_inputs; k++) s->in[k] = input_buf(c, nd->inputs[k], j, d)->off;
    hw_instr in = instr(HI_BWD, HW_STREAM_COMPUTE);
    in.call = ci; in.node = n; in.mb = j;
    if ((st = emit(c, d, in)) != PL_OK) return st;
    if (ns->wstash >= 0 && (st = c_free(c, d, ns->wstash)) != PL_OK) return st;
    ns->wstash = -1;
    if (ns->saved >= 0 && (st = c_free(c, d, ns->saved)) != PL_OK) return st;
    ns->saved = -1;
    if ((st = c_free(c, d, ns->grad.off)) != PL_OK) return st;
    ns->grad.off = -1;
    if (hw_kind_bwd_reads_input(nd->kind))
        for (int k = 0; k < nd->n_inputs; k++) {
            if (k == 1 && nd->inputs[1] == nd->inputs[0]) continue;
            if ((st = release_use(c, nd->inputs[k], j, d)) != PL_OK) return st;
        }
    return PL_OK;
}

/* After a device's last operation: join its comm stream (if it carried
 * anything: an untouched comm stream must stay out of a graph capture),
 * then AdamW. */
static pl_status issue_tail(cctx *c, int d) {
    pl_status st = c->comm_seq[d] > 0 ? join_comm(c, d) : PL_OK;
    if (st != PL_OK) return st;
    if ((st = wait_grad_zero(c, d)) != PL_OK) return st; /* no backward here (the loss alone) */
    if (c->bucketing && (st = dp_bucket_progress(c, d, 1)) != PL_OK) return st;
    hw_instr in = instr(HI_ADAMW, HW_STREAM_COMPUTE);
    return emit(c, d, in);
}

/* Static buffers of a used device and the step's opening instructions. */
static pl_status setup_device(cctx *c, int d) {
    hw_program *p = c->p;
    hw_program_dev *pd = &p->dev[d];
    const graph *g = c->g;
    const int64_t BT = (int64_t)g->cfg.batch * g->cfg.seq_len;
    int64_t floats = 0;
    for (int n = 0; n < c->nn; n++)
        if (dev_of(c, n) == d) {
            hw_param_map pl;
            rank_param_map(p, n, &pl);
            p->shard_off[n] = floats;
            floats += pl.floats;
        }
    pd->param_floats = floats;
    int64_t fb = (floats > 0 ? floats : 1) * 4;
    pd->moment_floats = p->split.zero ? hw_dp_shard_floats(floats, p->split.dp_size) : floats; /* ZeRO-1 */
    const int64_t mb = (pd->moment_floats > 0 ? pd->moment_floats : 1) * 4;
    pl_status st;
    if ((st = c_alloc(c, d, fb, 0, &pd->off_params)) != PL_OK) return st;
    if ((st = c_alloc(c, d, fb, 0, &pd->off_grads)) != PL_OK) return st;
    if ((st = c_alloc(c, d, mb, 0, &pd->off_m)) != PL_OK) return st;
    if ((st = c_alloc(c, d, mb, 0, &pd->off_v)) != PL_OK) return st;
    /* ZeRO-1 with the collectives on device buffers: the update's reduce-
     * scatter input and all-gather output, dp shards (the update hook,
     * parallel.h). Static so the peak and static_bytes count it; the host
     * path stages through host memory instead and needs none. */
    pd->off_zero1 = -1;
    if (p->split.zero && p->split.device_buffers &&
        (st = c_alloc(c, d, mb * p->split.dp_size, 0, &pd->off_zero1)) != PL_OK)
        return st;
    pd->off_params16 = -1;
    if (p->bf16 && (st = c_alloc(c, d, (fb / 4) * p->e->be->copy_bytes, 0, &pd->off_params16)) != PL_OK) return st;
    pd->ws_bytes = p->e->be->ops->workspace_bytes;
    pd->off_ws = -1;
    if (pd->ws_bytes > 0 && (st = c_alloc(c, d, pd->ws_bytes, 0, &pd->off_ws)) != PL_OK) return st;
    pd->off_loss = pd->off_tokens = pd->off_targets = -1;
    if ((st = c_alloc(c, d, 4, 0, &pd->off_step)) != PL_OK) return st;
    if (p->loss_dev == d) {
        if ((st = c_alloc(c, d, 8, 0, &pd->off_loss)) != PL_OK) return st;
        if ((st = c_alloc(c, d, BT * 4, 0, &pd->off_targets)) != PL_OK) return st;
    }
    if (p->emb_dev == d && (st = c_alloc(c, d, BT * 4, 0, &pd->off_tokens)) != PL_OK) return st;
    pd->static_bytes = hw_arena_used(c->arena[d]);
    /* The parameter gradients' ZERO on the comm stream, beside the forward,
     * which touches none of them: forked from the compute stream's position
     * (after the previous step's AdamW read them) and waited for before the
     * device's first backward (issue_bwd). Its transfers queue behind it.
     * Not in bf16: on the H200 the memset slows the bf16 forward's first
     * kernels more than it saves (fourth session, call 3, graph step: TF32
     * 4.950 / 4.963 ms against 4.990 / 4.997 on the compute stream, bf16
     * 3.035 / 3.036 against 2.981 / 2.981). The simulator follows the same
     * rule (sim_core.c, by the profile's precision). */
    hw_instr z = instr(HI_ZERO, HW_STREAM_COMPUTE);
    z.a = pd->off_grads;
    z.n = fb;
    if (!p->bf16) {
        int fork;
        if ((st = emit_record(c, d, HW_STREAM_COMPUTE, &fork)) != PL_OK) return st;
        if ((st = emit_wait(c, d, HW_STREAM_COMM, d, fork)) != PL_OK) return st;
        z.stream = HW_STREAM_COMM;
        if ((st = emit(c, d, z)) != PL_OK) return st;
        if ((st = emit_record(c, d, HW_STREAM_COMM, &c->zero_ev[d])) != PL_OK) return st;
    } else if ((st = emit(c, d, z)) != PL_OK) {
        return st;
    }
    z = instr(HI_ZERO, HW_STREAM_COMPUTE);
    if (pd->off_loss >= 0) {
        z.a = pd->off_loss;
        z.n = 8;
        if ((st = emit(c, d, z)) != PL_OK) return st;
    }
    return PL_OK;
}

/* The schedule's order of operations for device d (see hw.h): core/schedule.c's
 * order for this rank, F over the device's nodes in node order, B in reverse,
 * W in reverse over the nodes that split (a fused BW: B, then W when the
 * order splits backwards). */
static pl_status build_sequence(cctx *c, int d, int rank, int S, sched_op **out, int *len) {
    int nodes = 0;
    for (int n = 0; n < c->nn; n++) nodes += dev_of(c, n) == d;
    const int m = c->m;
    sched_op *a = malloc(sizeof *a * (size_t)(3 * m * nodes + 1));
    schedule_op *ops = malloc(sizeof *ops * (size_t)schedule_max_ops(&c->p->sched));
    const int n_ops = a && ops ? schedule_rank_ops(&c->p->sched, S, rank, ops) : -1;
    if (n_ops < 0) {
        free(ops);
        free(a);
        return PL_ERR_NOMEM;
    }
    int k = 0;
    for (int t = 0; t < n_ops; t++) {
        const int j = ops[t].mb, kind = ops[t].kind;
        if (kind == SOP_F)
            for (int n = 0; n < c->nn; n++) {
                if (dev_of(c, n) == d) a[k++] = (sched_op){0, n, j};
            }
        if (kind == SOP_B || kind == SOP_BW)
            for (int n = c->nn - 1; n >= 0; n--)
                if (dev_of(c, n) == d) a[k++] = (sched_op){1, n, j};
        if (kind == SOP_W || (kind == SOP_BW && c->split))
            for (int n = c->nn - 1; n >= 0; n--)
                if (dev_of(c, n) == d && hw_bwd_splits(c->g->nodes[n].kind)) a[k++] = (sched_op){2, n, j};
    }
    free(ops);
    *out = a;
    *len = k;
    return PL_OK;
}

static int op_ready(const cctx *c, sched_op o) {
    const graph *g = c->g;
    const graph_node *nd = &g->nodes[o.node];
    if (!o.bwd) {
        for (int k = 0; k < nd->n_inputs; k++)
            if (!c->fwd_done[(size_t)nd->inputs[k] * c->m + o.mb]) return 0;
        return 1;
    }
    if (o.bwd == 2) return c->bwd_done[(size_t)o.node * c->m + o.mb];
    if (!c->fwd_done[(size_t)o.node * c->m + o.mb]) return 0;
    for (int i = g->cons_start[o.node]; i < g->cons_start[o.node + 1]; i++)
        if (!c->bwd_done[(size_t)g->cons[i] * c->m + o.mb]) return 0;
    return 1;
}

static pl_status issue_op(cctx *c, sched_op o) {
    return o.bwd == 2 ? issue_w(c, o.node, o.mb) : o.bwd ? issue_bwd(c, o.node, o.mb) : issue_fwd(c, o.node, o.mb);
}

void hw_program_free_code(hw_program *p) {
    for (int d = 0; d < HW_MAX_DEVICES; d++) {
        free(p->dev[d].ins);
        p->dev[d].ins = NULL;
        p->dev[d].n_ins = p->dev[d].cap_ins = 0;
        p->dev[d].n_events = 0;
    }
    free(p->calls);
    p->calls = NULL;
    p->n_calls = p->cap_calls = 0;
    free(p->order);
    p->order = NULL;
    p->n_order = p->cap_order = 0;
}

pl_status hw_program_compile(hw_program *p, const int64_t *caps, int *oom_dev, char *msg, size_t len) {
    const graph *g = p->g;
    cctx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.g = g;
    c.nn = g->n_nodes;
    c.m = p->sched.micro_batches;
    c.nd = p->n_dev;
    c.oom_dev = -1;
    for (int d = 0; d < HW_MAX_DEVICES; d++) c.zero_ev[d] = -1;
    c.msg = msg;
    c.len = len;
    *oom_dev = -1;
    hw_program_free_code(p);
    p->reorders = 0;
    for (int n = 0; n < c.nn; n++) {
        int k = g->cons_start[n + 1] - g->cons_start[n];
        if (k > c.max_cons) c.max_cons = k;
    }
    if (c.max_cons < 1) c.max_cons = 1;
    pl_status st = PL_ERR_NOMEM;
    sched_op *seq[HW_MAX_DEVICES] = {0};
    int seq_len[HW_MAX_DEVICES] = {0}, next[HW_MAX_DEVICES] = {0}, tail_done[HW_MAX_DEVICES] = {0};
    uint8_t *issued[HW_MAX_DEVICES] = {0};
    size_t nm = (size_t)c.nn * c.m;
    c.ns = calloc(nm, sizeof *c.ns);
    c.temps = calloc(nm * (size_t)c.max_cons, sizeof *c.temps);
    c.rs = calloc(nm * (size_t)c.nd, sizeof *c.rs);
    c.fwd_done = calloc(nm, 1);
    c.bwd_done = calloc(nm, 1);
    if (!c.ns || !c.temps || !c.rs || !c.fwd_done || !c.bwd_done) goto out;
    for (size_t i = 0; i < nm; i++) {
        c.ns[i].out = c.ns[i].grad = PBUF_NONE;
        c.ns[i].saved = c.ns[i].wstash = -1;
    }
    c.split = schedule_splits_backward(p->sched.order);
    for (size_t i = 0; i < nm * (size_t)c.nd; i++) c.rs[i].rin = c.rs[i].rg = PBUF_NONE;

    /* ranks for 1f1b: used devices ordered by their first node */
    int rank[HW_MAX_DEVICES], S = 0;
    for (int d = 0; d < c.nd; d++) rank[d] = -1;
    for (int n = 0; n < c.nn; n++) {
        int d = dev_of(&c, n);
        if (rank[d] < 0) rank[d] = S++;
    }
    for (int d = 0; d < c.nd; d++) {
        p->dev[d].used = rank[d] >= 0;
        p->dev[d].cap = caps[d];
        p->dev[d].need_bytes = p->dev[d].static_bytes = 0;
        if (!p->dev[d].used) continue;
        c.arena[d] = hw_arena_create(caps[d]);
        if (!c.arena[d]) goto out;
        if ((st = build_sequence(&c, d, rank[d], S, &seq[d], &seq_len[d])) != PL_OK) goto out;
        issued[d] = calloc((size_t)seq_len[d] + 1, 1);
        if (!issued[d]) { st = PL_ERR_NOMEM; goto out; }
    }
    for (int d = 0; d < c.nd; d++)
        if (p->dev[d].used && (st = setup_device(&c, d)) != PL_OK) goto out;
    c.bucketing = p->split.dp_group && !p->split.zero; /* the dp all-reduce in buckets (dp_bucket_progress) */
    for (int d = 0; d < c.nd; d++) {
        c.frontier[d] = c.bucket_hi[d] = p->dev[d].param_floats;
        c.cursor[d] = c.nn - 1;
    }

    int remaining = 0;
    for (int d = 0; d < c.nd; d++) remaining += seq_len[d];
    while (remaining > 0) {
        int progress = 0;
        for (int d = 0; d < c.nd; d++) {
            if (!p->dev[d].used) continue;
            while (next[d] < seq_len[d] && issued[d][next[d]]) next[d]++;
            if (next[d] < seq_len[d] && op_ready(&c, seq[d][next[d]])) {
                if ((st = issue_op(&c, seq[d][next[d]])) != PL_OK) goto out;
                issued[d][next[d]++] = 1;
                remaining--;
                progress = 1;
            }
        }
        if (!progress) {
            /* strict order would deadlock: the lowest device runs its first ready op early */
            int found = 0;
            for (int d = 0; d < c.nd && !found; d++) {
                if (!p->dev[d].used) continue;
                for (int i = next[d]; i < seq_len[d]; i++)
                    if (!issued[d][i] && op_ready(&c, seq[d][i])) {
                        if ((st = issue_op(&c, seq[d][i])) != PL_OK) goto out;
                        issued[d][i] = 1;
                        remaining--;
                        p->reorders++;
                        found = 1;
                        break;
                    }
            }
            if (!found) {
                st = pl_fail(msg, len, PL_ERR_UNSUPPORTED, "the graph cannot be scheduled (cycle)");
                goto out;
            }
        }
        for (int d = 0; d < c.nd; d++) {
            if (!p->dev[d].used || tail_done[d]) continue;
            while (next[d] < seq_len[d] && issued[d][next[d]]) next[d]++;
            if (next[d] == seq_len[d]) {
                if ((st = issue_tail(&c, d)) != PL_OK) goto out;
                tail_done[d] = 1;
            }
        }
    }
    for (int d = 0; d < c.nd; d++)
        if (p->dev[d].used && !tail_done[d] && (st = issue_tail(&c, d)) != PL_OK) goto out;
    st = PL_OK;
out:
    for (int d = 0; d < c.nd; d++) {
        if (c.arena[d]) {
            p->dev[d].need_bytes = hw_arena_high_water(c.arena[d]);
            if (p->dev[d].static_bytes == 0) p->dev[d].static_bytes = hw_arena_used(c.arena[d]);
        }
        hw_arena_destroy(c.arena[d]);
        free(c.fences[d].a);
        free(c.deferred[d].a);
        free(seq[d]);
        free(issued[d]);
    }
    free(c.ns);
    free(c.temps);
    free(c.rs);
    free(c.fwd_done);
    free(c.bwd_done);
    if (st == PL_ERR_DEVICE_OOM) *oom_dev = c.oom_dev;
    if (st == PL_ERR_NOMEM) pl_fail(msg, len, st, "out of host memory while compiling the program");
    return st;
}
