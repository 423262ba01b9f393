/*
 * probe.c: per-node, per-update and per-transfer timing on an engine's
 * backend, and the machine description (probe.h says how and why).
 *
 * Each probe takes one device allocation per device it uses, carves its
 * buffers out of it (256-byte aligned, like the engine's arena), runs its
 * repetitions through the backend's operations, and frees the allocation
 * on every path.
 */
#include "probe.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "param_memory.h"
#include "placer_config.h"
#include "util.h"

#if PLACER_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define PROBE_ALIGN 256
#define PAD_ASYNC_BYTES (1LL << 30)
#define PAD_SYNC_BYTES (64LL << 10)
/* At most this many pad calls (about 20 ms of zeroing on an H200): a host
 * that needs longer to issue the timed part is blocked, not slow, and a
 * longer pad would not help. At the cap starved repetitions are kept. */
#define PAD_MAX_CALLS 64

hw_probe_opts hw_probe_opts_default(void) {
    hw_probe_opts o = {.warmup = 3, .reps = 60, .max_discard = 20, .pad_bytes = 0, .seed = 1};
    return o;
}

/* ---- small helpers ---------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Quantile q in [0, 1] of the sorted values v[0..n) with linear interpolation. */
static double quantile_sorted(const double *v, int n, double q) {
    if (n <= 0) return NAN;
    double at = q * (double)(n - 1);
    int lo = (int)floor(at);
    int hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (at - (double)lo);
}

/* Median and interquartile range of column c of samples[n][stride]; tmp holds n. */
static void column_stats(const double *samples, int n, int stride, int c, double *tmp, double *med,
                         double *iqr) {
    for (int r = 0; r < n; r++) tmp[r] = samples[(size_t)r * stride + c];
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    *med = quantile_sorted(tmp, n, 0.5);
    *iqr = quantile_sorted(tmp, n, 0.75) - quantile_sorted(tmp, n, 0.25);
}

static int backend_async(const hw_backend *be) { return strcmp(be->ops->name, "cpu") != 0; }

/* the host clock issue time is measured with (backend.h: host_now_us) */
static double host_now(const hw_backend *be) { return be->ops->host_now_us ? be->ops->host_now_us() : pl_now_us(); }

static int64_t pad_bytes_for(const hw_backend *be, const hw_probe_opts *o) {
    if (o->pad_bytes > 0) return (o->pad_bytes + PROBE_ALIGN - 1) / PROBE_ALIGN * PROBE_ALIGN;
    return backend_async(be) ? PAD_ASYNC_BYTES : PAD_SYNC_BYTES;
}

static pl_status check_opts(const hw_probe_opts *o, char *msg, size_t len) {
    if (!o || o->reps < 1 || o->warmup < 0 || o->max_discard < 0 || o->pad_bytes < 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "probe options need reps >= 1, warmup >= 0, max_discard >= 0");
    return PL_OK;
}

/* A bump allocator over one device allocation. With base == NULL it only
 * counts (the sizing pass). */
typedef struct {
    char *base;
    int64_t used;
} carve;

static int64_t carve_take(carve *c, int64_t bytes) {
    int64_t off = c->used;
    c->used += (bytes + PROBE_ALIGN - 1) / PROBE_ALIGN * PROBE_ALIGN;
    return off;
}

static void *at(const carve *c, int64_t off) { return off >= 0 ? c->base + off : NULL; }

static pl_status dev_alloc(hw_backend *be, int dev, int64_t bytes, void **ptr, char *msg, size_t len) {
    *ptr = NULL;
    pl_status st = be->ops->mem_alloc(be, dev, bytes > 0 ? bytes : PROBE_ALIGN, ptr);
    if (st == PL_ERR_DEVICE_OOM) {
        char b[32];
        pl_format_bytes((double)bytes, b, sizeof b);
        return pl_fail(msg, len, st, "device %d: the probe's %s do not fit (%s)", dev, b, be->err);
    }
    if (st != PL_OK) return pl_fail(msg, len, st, "device %d: %s", dev, be->err);
    return PL_OK;
}

/* ---- the repetition loop on one device --------------------------------------
 * Each attempt: pre() (untimed, before the device is idle-synchronised),
 * step_begin, the pad, marker 0, issue() (which records markers 1..n_marks-1),
 * step_end, wait, read the markers. Kept attempts store n_marks - 1 deltas. */

typedef struct {
    pl_status (*pre)(void *ctx);
    pl_status (*issue)(void *ctx, int attempt);
    void *ctx;
    int n_marks;
} rep_work;

static pl_status run_reps(hw_backend *be, int dev, void *pad, int64_t pad_bytes, const rep_work *w,
                          const hw_probe_opts *o, double *samples, hw_probe_stats *st, char *msg, size_t len) {
    const hw_backend_ops *ops = be->ops;
    const int async = backend_async(be);
    const int nd = w->n_marks - 1;
    double *marks = malloc(sizeof *marks * (size_t)w->n_marks);
    double *host = malloc(sizeof *host * (size_t)o->reps);
    double *padt = malloc(sizeof *padt * (size_t)o->reps);
    double *tot = malloc(sizeof *tot * (size_t)o->reps);
    pl_status s = PL_OK;
    if (!marks || !host || !padt || !tot) {
        s = pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
        goto out;
    }
    if ((s = ops->markers_reserve(be, dev, w->n_marks)) != PL_OK) {
        pl_fail(msg, len, s, "device %d: %s", dev, be->err);
        goto out;
    }
    memset(st, 0, sizeof *st);
    int n_pad = 1, kept = 0, attempt = 0, discarded = 0;
    while (kept < o->reps) {
        if (w->pre && (s = w->pre(w->ctx)) != PL_OK) break;
        if ((s = ops->step_begin(be, dev)) != PL_OK) break;
        double t0 = host_now(be);
        for (int k = 0; k < n_pad && s == PL_OK; k++) s = ops->zero(be, dev, pad, pad_bytes);
        if (s == PL_OK) s = ops->mark(be, dev, HW_STREAM_COMPUTE, 0);
        if (s == PL_OK) s = w->issue(w->ctx, attempt);
        double host_us = host_now(be) - t0;
        double elapsed = 0.0;
        if (s == PL_OK) s = ops->step_end(be, dev);
        if (s == PL_OK) s = ops->step_wait(be, dev, &elapsed);
        for (int k = 0; k < w->n_marks && s == PL_OK; k++) s = ops->marker_us(be, dev, k, &marks[k]);
        if (s != PL_OK) break;
        const double pad_us = marks[0];
        const int clean = !async || host_us <= pad_us;
        const int capped = n_pad >= PAD_MAX_CALLS; /* this repetition's pad was already the largest */
        /* size the next pad from what one zeroing took */
        if (async) {
            double per = pad_us / n_pad;
            int need = per > 0 ? (int)ceil(1.3 * host_us / per) : n_pad * 2;
            if (!clean && need < 2 * n_pad) need = 2 * n_pad;
            n_pad = need < 1 ? 1 : need > PAD_MAX_CALLS ? PAD_MAX_CALLS : need;
        }
        attempt++;
        if (attempt <= o->warmup) continue;
        if (!clean && discarded < o->max_discard && !capped) {
            discarded++;
            continue;
        }
        if (!clean) st->unclean = 1;
        for (int k = 0; k < nd; k++) samples[(size_t)kept * nd + k] = marks[k + 1] - marks[k];
        host[kept] = host_us;
        padt[kept] = pad_us;
        tot[kept] = marks[nd] - marks[0];
        kept++;
    }
    if (s != PL_OK) {
        pl_fail(msg, len, s, "device %d: %s", dev, be->err);
        goto out;
    }
    st->kept = kept;
    st->starved = discarded;
    qsort(host, (size_t)kept, sizeof *host, cmp_double);
    qsort(padt, (size_t)kept, sizeof *padt, cmp_double);
    qsort(tot, (size_t)kept, sizeof *tot, cmp_double);
    st->host_us = quantile_sorted(host, kept, 0.5);
    st->pad_us = quantile_sorted(padt, kept, 0.5);
    st->total_us = quantile_sorted(tot, kept, 0.5);
    st->fastest_us = kept > 0 ? tot[0] : 0.0;
out:
    free(marks);
    free(host);
    free(padt);
    free(tot);
    return s;
}

/* ---- node forward and backward --------------------------------------------- */

typedef struct {
    hw_backend *be;
    const graph *g;
    int dev, b;
    carve c;
    int64_t params, grads, ws, tokens, targets, loss, scratch, pad;
    int bf16;                    /* the engine runs the bf16 mode (hw.h) */
    int64_t params16;            /* bf16: the weight copy, else -1 */
    int64_t *out, *saved, *grad; /* per node offsets (-1 none) */
    int64_t *shard;              /* per node offset of its shard in the flat buffers (floats) */
    int64_t param_floats;
    int *bwd_order;              /* nodes with a backward call, in issue order */
    int n_bwd;
    int *split_order;            /* nodes whose backward splits (hw_bwd_splits), in issue
                                    order, when B and W are timed apart; else NULL */
    int n_split;
    int64_t wstash;              /* B to W: the largest split node's stash, -1 none */
    unsigned char *written;      /* per node: its gradient buffer got a first contribution */
} node_probe;

static void node_layout(node_probe *p, int64_t pad_bytes) {
    const graph *g = p->g;
    const int b = p->b, T = g->cfg.seq_len;
    carve *c = &p->c;
    c->used = 0;
    p->param_floats = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        hw_param_map pl;
        hw_node_param_map(g, i, &pl);
        p->shard[i] = p->param_floats;
        p->param_floats += pl.floats;
    }
    int64_t fb = (p->param_floats > 0 ? p->param_floats : 1) * 4;
    p->params = carve_take(c, fb);
    p->grads = carve_take(c, fb);
    p->params16 = p->bf16 ? carve_take(c, fb / 4 * p->be->copy_bytes) : -1;
    p->ws = p->be->ops->workspace_bytes > 0 ? carve_take(c, p->be->ops->workspace_bytes) : -1;
    p->tokens = carve_take(c, (int64_t)b * T * 4);
    p->targets = carve_take(c, (int64_t)b * T * 4);
    p->loss = carve_take(c, 8);
    int64_t scratch = 0;
    int head = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        hw_node_mem m;
        hw_node_mem_floats_prec(g, i, b, p->bf16, &m);
        if (m.fwd_scratch > scratch) scratch = m.fwd_scratch;
        if (m.bwd_scratch > scratch) scratch = m.bwd_scratch;
        p->out[i] = carve_take(c, m.out * 4);
        p->saved[i] = m.saved > 0 ? carve_take(c, m.saved * 4) : -1;
        if (g->nodes[i].kind == OP_LOSS && g->nodes[i].n_inputs == 1) head = g->nodes[i].inputs[0];
    }
    for (int i = 0; i < g->n_nodes; i++) {
        hw_node_mem m;
        hw_node_mem_floats_prec(g, i, b, p->bf16, &m);
        if (g->nodes[i].kind == OP_LOSS) p->grad[i] = -1;
        else if (i == head) p->grad[i] = p->out[i]; /* the loss writes the logits gradient in place */
        else p->grad[i] = carve_take(c, m.out * 4);
    }
    p->scratch = scratch > 0 ? carve_take(c, scratch * 4) : -1;
    int64_t wstash = 0;
    for (int j = 0; j < p->n_split; j++) {
        const int64_t wf = hw_bwd_wstash_floats(g->nodes[p->split_order[j]].kind, (int64_t)b * T, g->cfg.d_model);
        if (wf > wstash) wstash = wf;
    }
    p->wstash = wstash > 0 ? carve_take(c, wstash * 4) : -1;
    p->pad = carve_take(c, pad_bytes);
}

static hw_dims node_dims(const node_probe *p) {
    const gpt_config *cfg = &p->g->cfg;
    return (hw_dims){p->b, cfg->seq_len, cfg->d_model, cfg->n_heads, cfg->vocab, hw_padded_vocab(cfg->vocab)};
}

static void node_call(const node_probe *p, int i, int bwd, hw_node_call *call) {
    const graph *g = p->g;
    const graph_node *n = &g->nodes[i];
    const carve *c = &p->c;
    memset(call, 0, sizeof *call);
    call->kind = n->kind;
    call->d = node_dims(p);
    for (int k = 0; k < n->n_inputs; k++) call->in[k] = at(c, p->out[n->inputs[k]]);
    call->params = (const float *)at(c, p->params) + p->shard[i];
    call->grads = (float *)at(c, p->grads) + p->shard[i];
    call->saved = at(c, p->saved[i]);
    call->scratch = at(c, p->scratch);
    call->loss_sum = at(c, p->loss);
    call->inv_norm = 1.0f / ((float)g->cfg.batch * (float)g->cfg.seq_len);
    hw_node_param_map(g, i, &call->pl);
    hw_node_mem_floats_prec(g, i, p->b, p->bf16, &call->mem);
    if (p->bf16) {
        call->bf16 = 1;
        call->params16 = (const char *)at(c, p->params16) + p->shard[i] * p->be->copy_bytes;
    }
    if (n->kind == OP_EMBEDDING) call->tokens = at(c, p->tokens);
    if (!bwd) {
        call->out = at(c, p->out[i]);
        if (n->kind == OP_LOSS) {
            call->targets = at(c, p->targets);
            call->din[0] = (float *)call->in[0];
        }
        return;
    }
    call->dout = at(c, p->grad[i]);
    for (int k = 0; k < n->n_inputs; k++) {
        int pr = n->inputs[k];
        if (k == 1 && pr == n->inputs[0]) {
            call->din[1] = call->din[0];
            call->acc[1] = 1;
            continue;
        }
        call->din[k] = at(c, p->grad[pr]);
        call->acc[k] = p->written[pr] ? 1 : 0;
    }
}

static pl_status node_pre(void *ctx) {
    node_probe *p = ctx;
    const hw_backend_ops *ops = p->be->ops;
    pl_status st = ops->zero(p->be, p->dev, at(&p->c, p->grads), p->param_floats * 4);
    if (st == PL_OK) st = ops->zero(p->be, p->dev, at(&p->c, p->loss), 8);
    return st;
}

static pl_status node_issue(void *ctx, int attempt) {
    (void)attempt;
    node_probe *p = ctx;
    hw_backend *be = p->be;
    const hw_backend_ops *ops = be->ops;
    const graph *g = p->g;
    int mk = 1;
    pl_status st = PL_OK;
    memset(p->written, 0, (size_t)g->n_nodes);
    for (int i = 0; i < g->n_nodes && st == PL_OK; i++) {
        hw_node_call call;
        node_call(p, i, 0, &call);
        st = ops->node_forward(be, p->dev, &call);
        if (st == PL_OK) st = ops->mark(be, p->dev, HW_STREAM_COMPUTE, mk++);
        if (g->nodes[i].kind == OP_LOSS) p->written[g->nodes[i].inputs[0]] = 1;
    }
    for (int j = 0; j < p->n_bwd && st == PL_OK; j++) {
        int i = p->bwd_order[j];
        hw_node_call call;
        node_call(p, i, 1, &call);
        st = ops->node_backward(be, p->dev, &call);
        if (st == PL_OK) st = ops->mark(be, p->dev, HW_STREAM_COMPUTE, mk++);
        for (int k = 0; k < g->nodes[i].n_inputs; k++) p->written[g->nodes[i].inputs[k]] = 1;
    }
    /* B and W apart: each splitting node's backward again as the split
     * orders run it (program.c), B (the input gradient, keeping the stash)
     * then W (the weight gradient from it), each timed on its own. Every
     * gradient already holds a contribution, so both accumulate. */
    for (int j = 0; j < p->n_split && st == PL_OK; j++) {
        int i = p->split_order[j];
        for (int part = HW_BWD_INPUT; part <= HW_BWD_WEIGHT && st == PL_OK; part++) {
            hw_node_call call;
            node_call(p, i, 1, &call);
            call.part = part;
            call.wstash = at(&p->c, p->wstash);
            st = ops->node_backward(be, p->dev, &call);
            if (st == PL_OK) st = ops->mark(be, p->dev, HW_STREAM_COMPUTE, mk++);
        }
    }
    return st;
}

static pl_status check_graph_dev(hw_engine *e, const graph *g, int dev, char *msg, size_t len) {
    if (!e || !g) return pl_fail(msg, len, PL_ERR_INVALID, "probe: no engine or graph");
    if (dev < 0 || dev >= hw_engine_n_devices(e))
        return pl_fail(msg, len, PL_ERR_INVALID, "probe: device %d is not one of the engine's 0..%d", dev,
                       hw_engine_n_devices(e) - 1);
    int loss = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].kind == OP_LOSS) {
            loss++;
            if (g->nodes[i].n_inputs != 1 || graph_n_consumers(g, g->nodes[i].inputs[0]) != 1)
                return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "probe: the loss must be the only consumer of its input");
        }
    if (loss != 1) return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "probe: the graph needs exactly one loss");
    return PL_OK;
}

pl_status hw_probe_nodes(hw_engine *e, const graph *g, int dev, int b, const float *model,
                         const hw_probe_opts *o, double *fwd_us, double *fwd_spread, double *bwd_us,
                         double *bwd_spread, hw_probe_stats *stats, char *msg, size_t len) {
    return hw_probe_nodes_split(e, g, dev, b, model, o, fwd_us, fwd_spread, bwd_us, bwd_spread, NULL, NULL, stats,
                                msg, len);
}

/* Whether the engine runs a split backward (B, W) in its precision, the rule
 * engine.c applies to the orders that split it: the fp32 kernels (the CPU
 * backend in fp32 or tf32, which it computes as fp32; CUDA in strict fp32). */
static int engine_splits_backward(hw_engine *e) {
    const char *name = hw_engine_backend(e)->ops->name;
    const hw_precision prec = hw_engine_precision(e);
    if (strcmp(name, "cpu") == 0) return prec == HW_PREC_FP32 || prec == HW_PREC_TF32;
    return strcmp(name, "cuda") == 0 && prec == HW_PREC_FP32;
}

pl_status hw_probe_nodes_split(hw_engine *e, const graph *g, int dev, int b, const float *model,
                               const hw_probe_opts *o, double *fwd_us, double *fwd_spread, double *bwd_us,
                               double *bwd_spread, double *b_us, double *w_us, hw_probe_stats *stats, char *msg,
                               size_t len) {
    pl_status st = check_graph_dev(e, g, dev, msg, len);
    if (st != PL_OK) return st;
    if ((st = check_opts(o, msg, len)) != PL_OK) return st;
    if (b < 1) return pl_fail(msg, len, PL_ERR_INVALID, "probe: micro-batch size %d", b);
    hw_backend *be = hw_engine_backend(e);
    const int n = g->n_nodes, T = g->cfg.seq_len;
    const int64_t pad_bytes = pad_bytes_for(be, o);
    node_probe p;
    memset(&p, 0, sizeof p);
    p.be = be;
    p.g = g;
    p.dev = dev;
    p.b = b;
    p.bf16 = hw_engine_precision(e) == HW_PREC_BF16;
    hw_probe_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    void *mem = NULL;
    float *host = NULL;
    int *tok = NULL, *tgt = NULL;
    double *samples = NULL, *tmp = NULL;
    p.out = malloc(sizeof(int64_t) * (size_t)n * 4);
    p.bwd_order = malloc(sizeof(int) * (size_t)n);
    p.written = malloc((size_t)n);
    const int split = b_us && w_us && engine_splits_backward(e);
    if (b_us && w_us)
        for (int i = 0; i < n; i++) b_us[i] = w_us[i] = NAN;
    p.split_order = split ? malloc(sizeof(int) * (size_t)n) : NULL;
    if (!p.out || !p.bwd_order || !p.written || (split && !p.split_order)) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
        goto out;
    }
    p.saved = p.out + n;
    p.grad = p.out + 2 * n;
    p.shard = p.out + 3 * n;
    for (int i = n - 1; i >= 0; i--)
        if (g->nodes[i].kind != OP_LOSS) {
            p.bwd_order[p.n_bwd++] = i;
            if (p.split_order && hw_bwd_splits(g->nodes[i].kind)) p.split_order[p.n_split++] = i;
        }
    node_layout(&p, pad_bytes);
    if ((st = dev_alloc(be, dev, p.c.used, &mem, msg, len)) != PL_OK) goto out;
    p.c.base = mem;

    /* parameters (model view = flat buffer when every node is here), tokens, targets */
    int64_t total = p.param_floats;
    if (!model) {
        host = malloc(sizeof(float) * (size_t)(total > 0 ? total : 1));
        if (!host) {
            st = pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory for the parameters");
            goto out;
        }
        hw_params_init(g, o->seed, host);
        model = host;
    }
    gpt_config big = g->cfg;
    if (big.batch < b) big.batch = b;
    tok = malloc(sizeof(int) * (size_t)big.batch * T);
    tgt = malloc(sizeof(int) * (size_t)big.batch * T);
    if (!tok || !tgt) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
        goto out;
    }
    hw_make_batch(&big, o->seed, tok, tgt);
    if (total > 0) st = be->ops->upload(be, dev, at(&p.c, p.params), model, total * 4);
    if (st == PL_OK && total > 0 && p.bf16) st = hw_upload_copy16(be, dev, at(&p.c, p.params16), model, total);
    if (st == PL_OK) st = be->ops->upload(be, dev, at(&p.c, p.tokens), tok, (int64_t)b * T * 4);
    if (st == PL_OK) st = be->ops->upload(be, dev, at(&p.c, p.targets), tgt, (int64_t)b * T * 4);
    if (st == PL_OK) st = be->ops->set_workspace(be, dev, at(&p.c, p.ws), p.ws >= 0 ? be->ops->workspace_bytes : 0);
    if (st != PL_OK) {
        pl_fail(msg, len, st, "device %d: %s", dev, be->err);
        goto out;
    }

    const int n_ops = n + p.n_bwd + 2 * p.n_split;
    samples = malloc(sizeof *samples * (size_t)o->reps * (size_t)n_ops);
    tmp = malloc(sizeof *tmp * (size_t)o->reps);
    if (!samples || !tmp) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
        goto out;
    }
    rep_work w = {node_pre, node_issue, &p, n_ops + 1};
    if ((st = run_reps(be, dev, at(&p.c, p.pad), pad_bytes, &w, o, samples, stats, msg, len)) != PL_OK) goto out;
    for (int i = 0; i < n; i++) {
        column_stats(samples, stats->kept, n_ops, i, tmp, &fwd_us[i], &fwd_spread[i]);
        bwd_us[i] = bwd_spread[i] = 0.0;
    }
    for (int j = 0; j < p.n_bwd; j++)
        column_stats(samples, stats->kept, n_ops, n + j, tmp, &bwd_us[p.bwd_order[j]], &bwd_spread[p.bwd_order[j]]);
    if (p.split_order) {
        for (int j = 0; j < p.n_split; j++) {
            const int i = p.split_order[j], col = n + p.n_bwd + 2 * j;
            double spread;
            column_stats(samples, stats->kept, n_ops, col, tmp, &b_us[i], &spread);
            column_stats(samples, stats->kept, n_ops, col + 1, tmp, &w_us[i], &spread);
        }
    }
out:
    if (mem) {
        be->ops->set_workspace(be, dev, NULL, 0); /* the workspace is about to go */
        be->ops->mem_free(be, dev, mem);
    }
    free(host);
    free(tok);
    free(tgt);
    free(samples);
    free(tmp);
    free(p.out);
    free(p.bwd_order);
    free(p.written);
    free(p.split_order);
    return st;
}

/* ---- AdamW ------------------------------------------------------------------ */

typedef struct {
    hw_backend *be;
    int dev;
    carve c;
    int64_t p, g, m, v; /* flat buffers */
    int64_t p16;        /* bf16 mode: the weight copy AdamW writes too, else -1 */
    int n_ops;
    int64_t *off, *floats; /* per op: shard offset and size (floats) */
    hw_adamw_args args;
} adamw_probe;

static pl_status adamw_issue(void *ctx, int attempt) {
    adamw_probe *a = ctx;
    const hw_backend_ops *ops = a->be->ops;
    a->args.t = attempt + 1;
    pl_status st = PL_OK;
    for (int k = 0; k < a->n_ops && st == PL_OK; k++) {
        float *P = (float *)at(&a->c, a->p) + a->off[k], *G = (float *)at(&a->c, a->g) + a->off[k];
        float *M = (float *)at(&a->c, a->m) + a->off[k], *V = (float *)at(&a->c, a->v) + a->off[k];
        if (a->p16 >= 0) a->args.p16 = (char *)at(&a->c, a->p16) + a->off[k] * a->be->copy_bytes;
        st = ops->adamw(a->be, a->dev, P, G, M, V, a->floats[k], &a->args);
        if (st == PL_OK) st = ops->mark(a->be, a->dev, HW_STREAM_COMPUTE, k + 1);
    }
    return st;
}

pl_status hw_probe_adamw(hw_engine *e, const graph *g, int dev, const hw_probe_opts *o, double *us,
                         double *spread, hw_probe_stats *stats, char *msg, size_t len) {
    pl_status st = check_graph_dev(e, g, dev, msg, len);
    if (st != PL_OK) return st;
    if ((st = check_opts(o, msg, len)) != PL_OK) return st;
    hw_backend *be = hw_engine_backend(e);
    const int n = g->n_nodes;
    const int64_t pad_bytes = pad_bytes_for(be, o);
    hw_probe_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    adamw_probe a;
    memset(&a, 0, sizeof a);
    a.be = be;
    a.dev = dev;
    hw_adamw d = hw_adamw_default();
    a.args = (hw_adamw_args){.lr = d.lr, .beta1 = d.beta1, .beta2 = d.beta2, .eps = d.eps,
                             .weight_decay = d.weight_decay, .t = 1};
    int *node_of = malloc(sizeof(int) * (size_t)n);
    a.off = malloc(sizeof(int64_t) * (size_t)n * 2);
    float *host = NULL;
    double *samples = NULL, *tmp = NULL;
    void *mem = NULL;
    if (!node_of || !a.off) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
        goto out;
    }
    a.floats = a.off + n;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        hw_param_map pl;
        hw_node_param_map(g, i, &pl);
        if (pl.floats > 0) {
            node_of[a.n_ops] = i;
            a.off[a.n_ops] = total;
            a.floats[a.n_ops] = pl.floats;
            a.n_ops++;
        }
        total += pl.floats;
    }
    const int64_t fb = (total > 0 ? total : 1) * 4;
    a.p = carve_take(&a.c, fb);
    a.g = carve_take(&a.c, fb);
    a.m = carve_take(&a.c, fb);
    a.v = carve_take(&a.c, fb);
    a.p16 = hw_engine_precision(e) == HW_PREC_BF16 ? carve_take(&a.c, fb / 4 * be->copy_bytes) : -1;
    int64_t pad = carve_take(&a.c, pad_bytes);
    if ((st = dev_alloc(be, dev, a.c.used, &mem, msg, len)) != PL_OK) goto out;
    a.c.base = mem;
    /* parameters and gradients of a realistic scale; moments start at zero */
    host = malloc(sizeof(float) * (size_t)(total > 0 ? total : 1));
    if (!host) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
        goto out;
    }
    pl_rng r;
    pl_rng_seed(&r, o->seed ^ 0xADA3ull);
    for (int64_t i = 0; i < total; i++) host[i] = (float)(0.04 * (pl_rng_uniform(&r) - 0.5));
    st = total > 0 ? be->ops->upload(be, dev, at(&a.c, a.p), host, total * 4) : PL_OK;
    for (int64_t i = 0; i < total; i++) host[i] = (float)(2e-3 * (pl_rng_uniform(&r) - 0.5));
    if (st == PL_OK && total > 0) st = be->ops->upload(be, dev, at(&a.c, a.g), host, total * 4);
    if (st == PL_OK) st = be->ops->zero(be, dev, at(&a.c, a.m), fb);
    if (st == PL_OK) st = be->ops->zero(be, dev, at(&a.c, a.v), fb);
    if (st != PL_OK) {
        pl_fail(msg, len, st, "device %d: %s", dev, be->err);
        goto out;
    }
    for (int i = 0; i < n; i++) us[i] = spread[i] = 0.0;
    if (a.n_ops == 0) goto out;
    samples = malloc(sizeof *samples * (size_t)o->reps * (size_t)a.n_ops);
    tmp = malloc(sizeof *tmp * (size_t)o->reps);
    if (!samples || !tmp) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
        goto out;
    }
    rep_work w = {NULL, adamw_issue, &a, a.n_ops + 1};
    if ((st = run_reps(be, dev, at(&a.c, pad), pad_bytes, &w, o, samples, stats, msg, len)) != PL_OK) goto out;
    for (int k = 0; k < a.n_ops; k++)
        column_stats(samples, stats->kept, a.n_ops, k, tmp, &us[node_of[k]], &spread[node_of[k]]);
out:
    if (mem) be->ops->mem_free(be, dev, mem);
    free(host);
    free(samples);
    free(tmp);
    free(node_of);
    free(a.off);
    return st;
}

/* ---- transfers ---------------------------------------------------------------- */

/* Transfers per timed repetition: enough that small ones are not dominated
 * by the few microseconds by which the two pads may end apart. */
static int transfers_per_rep(int64_t bytes) {
    if (bytes <= (256LL << 10)) return 16;
    if (bytes <= (16LL << 20)) return 4;
    return 1;
}

pl_status hw_probe_transfer(hw_engine *e, int src, int dst, int n, const int64_t *bytes,
                            const hw_probe_opts *o, double *us, double *spread, hw_probe_stats *stats,
                            char *msg, size_t len) {
    if (!e) return pl_fail(msg, len, PL_ERR_INVALID, "probe: no engine");
    const int nd = hw_engine_n_devices(e);
    if (src < 0 || dst < 0 || src >= nd || dst >= nd || src == dst)
        return pl_fail(msg, len, PL_ERR_INVALID, "probe: transfer %d -> %d needs two distinct devices of 0..%d", src,
                       dst, nd - 1);
    pl_status st = check_opts(o, msg, len);
    if (st != PL_OK) return st;
    int64_t max = 0;
    for (int i = 0; i < n; i++) {
        if (bytes[i] < 1) return pl_fail(msg, len, PL_ERR_INVALID, "probe: transfer of %lld bytes", (long long)bytes[i]);
        if (bytes[i] > max) max = bytes[i];
    }
    hw_backend *be = hw_engine_backend(e);
    const hw_backend_ops *ops = be->ops;
    const int async = backend_async(be);
    const int64_t pad_bytes = pad_bytes_for(be, o);
    hw_probe_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    void *ms = NULL, *md = NULL;
    double *samp = NULL, *host = NULL, *padt = NULL, *tot = NULL;
    carve cs = {0}, cd = {0};
    int64_t s_buf = carve_take(&cs, max), s_pad = carve_take(&cs, pad_bytes);
    int64_t d_buf = carve_take(&cd, max), d_pad = carve_take(&cd, pad_bytes);
    if ((st = dev_alloc(be, src, cs.used, &ms, msg, len)) != PL_OK) goto out;
    if ((st = dev_alloc(be, dst, cd.used, &md, msg, len)) != PL_OK) goto out;
    cs.base = ms;
    cd.base = md;
    if ((st = ops->zero(be, src, at(&cs, s_buf), max)) != PL_OK ||
        (st = ops->events_reserve(be, src, 2)) != PL_OK || (st = ops->events_reserve(be, dst, 2)) != PL_OK ||
        (st = ops->markers_reserve(be, src, 2)) != PL_OK || (st = ops->markers_reserve(be, dst, 2)) != PL_OK) {
        pl_fail(msg, len, st, "%s", be->err);
        goto out;
    }
    samp = malloc(sizeof *samp * (size_t)o->reps);
    host = malloc(sizeof *host * (size_t)o->reps);
    padt = malloc(sizeof *padt * (size_t)o->reps);
    tot = malloc(sizeof *tot * (size_t)o->reps);
    if (!samp || !host || !padt || !tot) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
        goto out;
    }
    const int pair[2] = {src, dst};
    void *pads[2] = {at(&cs, s_pad), at(&cd, d_pad)};
    for (int i = 0; i < n; i++) {
        const int K = transfers_per_rep(bytes[i]);
        int n_pad = 1, kept = 0, attempt = 0, discarded = 0, unclean = 0;
        while (kept < o->reps) {
            double m[2][2];
            for (int s = 0; s < 2 && st == PL_OK; s++) st = ops->step_begin(be, pair[s]);
            double t0 = host_now(be);
            /* the two pads start together and run equally long */
            for (int k = 0; k < n_pad && st == PL_OK; k++)
                for (int s = 0; s < 2 && st == PL_OK; s++) st = ops->zero(be, pair[s], pads[s], pad_bytes);
            for (int s = 0; s < 2 && st == PL_OK; s++) {
                st = ops->event_record(be, pair[s], HW_STREAM_COMPUTE, 0);
                if (st == PL_OK) st = ops->event_wait(be, pair[s], HW_STREAM_COMM, pair[s], 0);
            }
            for (int s = 1; s >= 0 && st == PL_OK; s--) st = ops->mark(be, pair[s], HW_STREAM_COMM, 0);
            for (int k = 0; k < K && st == PL_OK; k++)
                st = ops->xfer_pair(be, src, dst, at(&cs, s_buf), at(&cd, d_buf), bytes[i]);
            for (int s = 1; s >= 0 && st == PL_OK; s--) st = ops->mark(be, pair[s], HW_STREAM_COMM, 1);
            double host_us = host_now(be) - t0;
            for (int s = 0; s < 2 && st == PL_OK; s++) {
                st = ops->event_record(be, pair[s], HW_STREAM_COMM, 1);
                if (st == PL_OK) st = ops->event_wait(be, pair[s], HW_STREAM_COMPUTE, pair[s], 1);
                if (st == PL_OK) st = ops->step_end(be, pair[s]);
            }
            double el;
            for (int s = 0; s < 2 && st == PL_OK; s++) {
                st = ops->step_wait(be, pair[s], &el);
                if (st == PL_OK) st = ops->marker_us(be, pair[s], 0, &m[s][0]);
                if (st == PL_OK) st = ops->marker_us(be, pair[s], 1, &m[s][1]);
            }
            if (st != PL_OK) {
                pl_fail(msg, len, st, "transfer %d -> %d: %s", src, dst, be->err);
                goto out;
            }
            const double pad_us = m[0][0] < m[1][0] ? m[0][0] : m[1][0];
            const int clean = !async || host_us <= pad_us;
            const int capped = n_pad >= PAD_MAX_CALLS;
            if (async) {
                double per = pad_us / n_pad;
                int need = per > 0 ? (int)ceil(1.3 * host_us / per) : n_pad * 2;
                if (!clean && need < 2 * n_pad) need = 2 * n_pad;
                n_pad = need < 1 ? 1 : need > PAD_MAX_CALLS ? PAD_MAX_CALLS : need;
            }
            attempt++;
            if (attempt <= o->warmup) continue;
            if (!clean && discarded < o->max_discard && !capped) {
                discarded++;
                continue;
            }
            unclean |= !clean;
            /* the receiver's comm stream: from its pad's end to the last arrival */
            samp[kept] = (m[1][1] - m[1][0]) / K;
            host[kept] = host_us;
            padt[kept] = pad_us;
            tot[kept] = m[1][1] - m[1][0];
            kept++;
        }
        qsort(samp, (size_t)kept, sizeof *samp, cmp_double);
        us[i] = quantile_sorted(samp, kept, 0.5);
        spread[i] = quantile_sorted(samp, kept, 0.75) - quantile_sorted(samp, kept, 0.25);
        if (bytes[i] == max) {
            qsort(host, (size_t)kept, sizeof *host, cmp_double);
            qsort(padt, (size_t)kept, sizeof *padt, cmp_double);
            qsort(tot, (size_t)kept, sizeof *tot, cmp_double);
            stats->kept = kept;
            stats->starved = discarded;
            stats->unclean = unclean;
            stats->host_us = quantile_sorted(host, kept, 0.5);
            stats->pad_us = quantile_sorted(padt, kept, 0.5);
            stats->total_us = quantile_sorted(tot, kept, 0.5);
            stats->fastest_us = kept > 0 ? tot[0] : 0.0;
        }
    }
out:
    if (ms) ops->mem_free(be, src, ms);
    if (md) ops->mem_free(be, dst, md);
    free(samp);
    free(host);
    free(padt);
    free(tot);
    return st;
}

/* ---- the machine ---------------------------------------------------------------- */

const char *hw_link_kind_name(hw_link_kind k) {
    switch (k) {
    case HW_LINK_HOST: return "host";
    case HW_LINK_SAME_GPU: return "same-gpu";
    case HW_LINK_NVLINK: return "nvlink";
    case HW_LINK_PCIE_P2P: return "pcie-p2p";
    case HW_LINK_PCIE: return "pcie";
    default: return "unknown";
    }
}

#if PLACER_HAVE_CUDA
/* NVML, loaded at run time from the driver's libnvidia-ml.so.1 so that no
 * build or link dependency is needed; the few types used are declared here
 * as nvml.h defines them. */
typedef int nvml_ret;
typedef void *nvml_device;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvml_pci_info;
#define NVML_OK 0
#define NVML_LINKS 18 /* NVML_NVLINK_MAX_LINKS on Hopper */

typedef struct {
    void *lib;
    nvml_ret (*init)(void);
    nvml_ret (*shutdown)(void);
    nvml_ret (*driver_version)(char *, unsigned);
    nvml_ret (*by_pci)(const char *, nvml_device *);
    nvml_ret (*link_state)(nvml_device, unsigned, int *);
    nvml_ret (*remote_pci)(nvml_device, unsigned, nvml_pci_info *);
    nvml_ret (*p2p_status)(nvml_device, nvml_device, int, int *); /* may be NULL */
} nvml_api;
#define NVML_P2P_CAPS_INDEX_NVLINK 2 /* nvmlGpuP2PCapsIndex_t */
#define NVML_P2P_STATUS_OK 0         /* nvmlGpuP2PStatus_t */

/* Open NVML; 0 when it is not there or does not start (then nothing is held). */
static int nvml_open(nvml_api *n) {
    memset(n, 0, sizeof *n);
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) return 0;
    *(void **)&n->init = dlsym(n->lib, "nvmlInit_v2");
    *(void **)&n->shutdown = dlsym(n->lib, "nvmlShutdown");
    *(void **)&n->driver_version = dlsym(n->lib, "nvmlSystemGetDriverVersion");
    *(void **)&n->by_pci = dlsym(n->lib, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&n->link_state = dlsym(n->lib, "nvmlDeviceGetNvLinkState");
    *(void **)&n->remote_pci = dlsym(n->lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    *(void **)&n->p2p_status = dlsym(n->lib, "nvmlDeviceGetP2PStatus");
    if (!n->init || !n->shutdown || !n->driver_version || !n->by_pci || !n->link_state || !n->remote_pci ||
        n->init() != NVML_OK) {
        dlclose(n->lib);
        n->lib = NULL;
        return 0;
    }
    return 1;
}

static void nvml_close(nvml_api *n) {
    if (!n->lib) return;
    n->shutdown();
    dlclose(n->lib);
    n->lib = NULL;
}

/* Active NVLinks from GPU a to GPU b (PCI bus ids as CUDA writes them), or -1.
 * On NVSwitch machines (HGX H100/H200: `nvidia-smi topo -m` says NV18) every
 * link ends at a switch, not at the peer GPU, so no link counts as direct;
 * then NVML's NVLink P2P status decides, and a positive answer is returned
 * as the number of active links of GPU a (all of them reach the fabric). */
static int nvml_links_between(nvml_api *n, const char *pci_a, const char *pci_b) {
    nvml_device d, peer;
    unsigned dom = 0, bus = 0, dv = 0, fn = 0;
    if (sscanf(pci_b, "%x:%x:%x.%x", &dom, &bus, &dv, &fn) != 4) return -1;
    if (n->by_pci(pci_a, &d) != NVML_OK) return -1;
    int count = 0, active_links = 0;
    for (unsigned l = 0; l < NVML_LINKS; l++) {
        int active = 0;
        nvml_pci_info r;
        if (n->link_state(d, l, &active) != NVML_OK || !active) continue;
        active_links++;
        memset(&r, 0, sizeof r);
        if (n->remote_pci(d, l, &r) != NVML_OK) continue;
        if (r.domain == dom && r.bus == bus && r.device == dv) count++;
    }
    if (count == 0 && active_links > 0 && n->p2p_status && n->by_pci(pci_b, &peer) == NVML_OK) {
        int status = -1;
        if (n->p2p_status(d, peer, NVML_P2P_CAPS_INDEX_NVLINK, &status) == NVML_OK && status == NVML_P2P_STATUS_OK)
            count = active_links;
    }
    return count;
}
#endif

pl_status hw_probe_machine(hw_engine *e, hw_machine_info *m, char *msg, size_t len) {
    memset(m, 0, sizeof *m);
    hw_backend *be = hw_engine_backend(e);
    snprintf(m->backend, sizeof m->backend, "%s", be->ops->name);
    if (gethostname(m->host, sizeof m->host - 1) != 0) m->host[0] = 0;
    m->n_devices = hw_engine_n_devices(e);
    for (int d = 0; d < m->n_devices; d++) {
        const hw_device_info *info = hw_engine_device(e, d);
        snprintf(m->dev[d].name, sizeof m->dev[d].name, "%s", info->name);
        m->dev[d].mem_bytes = info->mem_bytes;
        m->dev[d].gpu = info->physical;
    }
    if (!backend_async(be)) return PL_OK;
#if PLACER_HAVE_CUDA
    int v = 0;
    if (cudaRuntimeGetVersion(&v) == cudaSuccess)
        snprintf(m->cuda, sizeof m->cuda, "%d.%d", v / 1000, (v % 1000) / 10);
    for (int d = 0; d < m->n_devices; d++) {
        int gpu = m->dev[d].gpu;
        cudaError_t ce = cudaDeviceGetAttribute(&m->dev[d].sm_count, cudaDevAttrMultiProcessorCount, gpu);
        if (ce == cudaSuccess) ce = cudaDeviceGetAttribute(&m->dev[d].cc_major, cudaDevAttrComputeCapabilityMajor, gpu);
        if (ce == cudaSuccess) ce = cudaDeviceGetAttribute(&m->dev[d].cc_minor, cudaDevAttrComputeCapabilityMinor, gpu);
        if (ce == cudaSuccess) ce = cudaDeviceGetPCIBusId(m->dev[d].pci_bus, (int)sizeof m->dev[d].pci_bus, gpu);
        if (ce != cudaSuccess)
            return pl_fail(msg, len, PL_ERR_CUDA, "GPU %d: device attributes: %s", gpu, cudaGetErrorString(ce));
    }
    nvml_api n;
    if (nvml_open(&n)) {
        m->nvml = 1;
        if (n.driver_version(m->driver, sizeof m->driver) != NVML_OK) m->driver[0] = 0;
        nvml_close(&n);
    }
    if (!m->driver[0] && cudaDriverGetVersion(&v) == cudaSuccess)
        snprintf(m->driver, sizeof m->driver, "CUDA driver API %d.%d", v / 1000, (v % 1000) / 10);
    return PL_OK;
#else
    return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "this build has no CUDA");
#endif
}

pl_status hw_probe_link(hw_engine *e, int a, int b, hw_link_kind *kind, int *nvlinks, int *p2p_rank, char *msg,
                        size_t len) {
    const int nd = hw_engine_n_devices(e);
    *kind = HW_LINK_UNKNOWN;
    if (nvlinks) *nvlinks = 0;
    if (p2p_rank) *p2p_rank = -1;
    if (a < 0 || b < 0 || a >= nd || b >= nd || a == b)
        return pl_fail(msg, len, PL_ERR_INVALID, "probe: link %d -> %d needs two distinct devices of 0..%d", a, b,
                       nd - 1);
    hw_backend *be = hw_engine_backend(e);
    if (!backend_async(be)) {
        *kind = HW_LINK_HOST;
        return PL_OK;
    }
    int ga = hw_engine_device(e, a)->physical, gb = hw_engine_device(e, b)->physical;
    if (ga == gb) {
        *kind = HW_LINK_SAME_GPU;
        return PL_OK;
    }
#if PLACER_HAVE_CUDA
    int access = 0, rank = -1;
    cudaError_t ce = cudaDeviceCanAccessPeer(&access, ga, gb);
    if (ce == cudaSuccess && access) ce = cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, ga, gb);
    if (ce != cudaSuccess)
        return pl_fail(msg, len, PL_ERR_CUDA, "GPU %d -> %d: peer attributes: %s", ga, gb, cudaGetErrorString(ce));
    if (p2p_rank) *p2p_rank = access ? rank : -1;
    *kind = access ? HW_LINK_PCIE_P2P : HW_LINK_PCIE;
    char pa[32], pb[32];
    nvml_api n;
    if (cudaDeviceGetPCIBusId(pa, sizeof pa, ga) == cudaSuccess && cudaDeviceGetPCIBusId(pb, sizeof pb, gb) == cudaSuccess &&
        nvml_open(&n)) {
        int links = nvml_links_between(&n, pa, pb);
        nvml_close(&n);
        if (links > 0) {
            *kind = HW_LINK_NVLINK;
            if (nvlinks) *nvlinks = links;
        }
    }
    return PL_OK;
#else
    return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "this build has no CUDA");
#endif
}
