/*
 * exec.c: runs a compiled program's step, on one host thread in the global
 * issue order, or on one host thread per device, each running its own list
 * (transfers then meet as send/recv halves). Also the timing protocol and
 * the trace.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "program_internal.h"
#include "util.h"

#define PTR(base, off) ((off) >= 0 ? (void *)((char *)(base) + (off)) : NULL)

static void make_call(const hw_program *p, int d, const hw_call_spec *s, hw_node_call *c) {
    const graph *g = p->g;
    const hw_program_dev *pd = &p->dev[d];
    char *base = pd->base;
    memset(c, 0, sizeof *c);
    c->kind = g->nodes[s->node].kind;
    c->d = (hw_dims){p->b, g->cfg.seq_len, g->cfg.d_model, g->cfg.n_heads, g->cfg.vocab,
                     hw_padded_vocab(g->cfg.vocab)};
    c->in[0] = PTR(base, s->in[0]);
    c->in[1] = PTR(base, s->in[1]);
    c->tokens = PTR(base, s->tokens);
    c->targets = PTR(base, s->targets);
    c->params = (const float *)(base + pd->off_params) + p->shard_off[s->node];
    c->grads = (float *)(base + pd->off_grads) + p->shard_off[s->node];
    c->out = PTR(base, s->out);
    c->saved = PTR(base, s->saved);
    c->scratch = PTR(base, s->scratch);
    c->dout = PTR(base, s->dout);
    c->din[0] = PTR(base, s->din[0]);
    c->din[1] = PTR(base, s->din[1]);
    c->acc[0] = s->acc[0];
    c->acc[1] = s->acc[1];
    c->part = s->part;
    c->wstash = PTR(base, s->wstash);
    c->loss_sum = PTR(base, pd->off_loss);
    c->inv_norm = 1.0f / ((float)g->cfg.batch * (float)g->cfg.seq_len);
    c->pl = s->pl;
    c->mem = s->mem;
    if (p->bf16) {
        c->bf16 = 1;
        c->params16 = base + pd->off_params16 + p->shard_off[s->node] * p->e->be->copy_bytes;
    }
}

static int traced_kind(const hw_instr *in) {
    return in->kind != HI_RECORD && in->kind != HI_WAIT && in->kind != HI_DP_REDUCE;
}

/* Run instruction i of device d. In single-thread mode a SEND runs both
 * halves through xfer_pair (its RECV is the next global entry). */
static pl_status run_instr(hw_program *p, int d, int i, int threaded) {
    hw_backend *be = p->e->be;
    const hw_backend_ops *ops = be->ops;
    hw_program_dev *pd = &p->dev[d];
    const hw_instr *in = &pd->ins[i];
    char *base = pd->base;
    pl_status st = PL_OK;
    int mark = p->trace_on && traced_kind(in);
    if (mark && (st = ops->mark(be, d, in->stream, 2 * i)) != PL_OK) return st;
    switch ((hi_kind)in->kind) {
    case HI_ZERO:
        st = in->stream == HW_STREAM_COMM ? ops->zero_comm(be, d, base + in->a, in->n)
                                          : ops->zero(be, d, base + in->a, in->n);
        break;
    case HI_FWD:
    case HI_BWD: {
        hw_node_call c;
        make_call(p, d, &p->calls[in->call], &c);
        if (p->split.tp_size > 1) /* tensor parallelism: the rank's slice and its collectives */
            st = p->par->ops->node_call(p->par_state, p, d, in->kind == HI_BWD, &c, be->err, sizeof be->err);
        else
            st = in->kind == HI_FWD ? ops->node_forward(be, d, &c) : ops->node_backward(be, d, &c);
        if (in->kind == HI_BWD && p->par) p->par->ops->backward_issued(p->par_state, p);
        break;
    }
    case HI_ADD: st = ops->add(be, d, (float *)(base + in->a), (const float *)(base + in->b), in->n); break;
    case HI_ADAMW: /* with process groups their gradients' sums and the update, ZeRO-1 or not */
        st = p->par ? p->par->ops->update(p->par_state, p, d, be->err, sizeof be->err) : hw_program_adamw(p, d);
        break;
    case HI_RECORD: st = ops->event_record(be, d, in->stream, in->ev); break;
    case HI_WAIT: st = ops->event_wait(be, d, in->stream, in->peer, in->ev); break;
    case HI_SEND:
        if (threaded) {
            st = ops->xfer_send(be, d, in->peer, base + in->a, in->n);
        } else {
            st = PL_ERR_INVALID; /* single-thread mode runs transfers through run_pair */
        }
        break;
    case HI_RECV: st = threaded ? ops->xfer_recv(be, d, in->peer, base + in->a, in->n) : PL_OK; break;
    case HI_DP_REDUCE: /* emitted only with a dp group (program.c) */
        st = p->par ? p->par->ops->bucket(p->par_state, p, d, in->a, in->n, be->err, sizeof be->err)
                    : pl_fail(be->err, sizeof be->err, PL_ERR_INVALID, "a dp bucket without a dp group");
        break;
    }
    if (st == PL_OK && mark) st = ops->mark(be, d, in->stream, 2 * i + 1);
    return st;
}

pl_status hw_program_adamw(hw_program *p, int d) {
    hw_backend *be = p->e->be;
    hw_program_dev *pd = &p->dev[d];
    char *base = pd->base;
    if (pd->param_floats <= 0) return PL_OK;
    hw_adamw_args a = {p->adamw.lr, p->adamw.beta1, p->adamw.beta2, p->adamw.eps, p->adamw.weight_decay, p->t,
                       (int *)(base + pd->off_step), PTR(base, pd->off_params16)};
    return be->ops->adamw(be, d, (float *)(base + pd->off_params), (const float *)(base + pd->off_grads),
                          (float *)(base + pd->off_m), (float *)(base + pd->off_v), pd->param_floats, &a);
}

/* Single-thread transfer: SEND (d, i) with its RECV (t, k). */
static pl_status run_pair(hw_program *p, int d, int i, int t, int k) {
    hw_backend *be = p->e->be;
    const hw_backend_ops *ops = be->ops;
    const hw_instr *s = &p->dev[d].ins[i], *r = &p->dev[t].ins[k];
    pl_status st;
    if (p->trace_on) {
        if ((st = ops->mark(be, d, HW_STREAM_COMM, 2 * i)) != PL_OK) return st;
        if ((st = ops->mark(be, t, HW_STREAM_COMM, 2 * k)) != PL_OK) return st;
    }
    st = ops->xfer_pair(be, d, t, (char *)p->dev[d].base + s->a, (char *)p->dev[t].base + r->a, s->n);
    if (st != PL_OK) return st;
    if (p->trace_on) {
        if ((st = ops->mark(be, d, HW_STREAM_COMM, 2 * i + 1)) != PL_OK) return st;
        if ((st = ops->mark(be, t, HW_STREAM_COMM, 2 * k + 1)) != PL_OK) return st;
    }
    return PL_OK;
}

static pl_status run_single(hw_program *p) {
    const hw_backend_ops *ops = p->e->be->ops;
    for (int o = 0; o < p->n_order; o++) {
        hw_order_entry e = p->order[o];
        const hw_instr *in = &p->dev[e.dev].ins[e.idx];
        pl_status st;
        if (in->kind == HI_SEND) {
            hw_order_entry r = p->order[o + 1];
            st = run_pair(p, e.dev, e.idx, r.dev, r.idx);
            o++;
        } else {
            st = run_instr(p, e.dev, e.idx, 0);
        }
        if (st != PL_OK) return st;
    }
    for (int d = 0; d < p->n_dev; d++)
        if (p->dev[d].used) {
            pl_status st = ops->step_end(p->e->be, d);
            if (st != PL_OK) return st;
        }
    return PL_OK;
}

typedef struct {
    hw_program *p;
    int d;
    int capture; /* record the device's work into a graph instead of running it */
    pl_status st;
} worker;

/* Issue device d's list: run it (and mark the step's end), or capture it. */
static pl_status device_list(hw_program *p, int d, int capture, int threaded) {
    hw_backend *be = p->e->be;
    hw_program_dev *pd = &p->dev[d];
    pl_status st = PL_OK;
    if (capture && (st = be->ops->capture_begin(be, d)) != PL_OK) return st;
    for (int i = 0; i < pd->n_ins && st == PL_OK; i++) st = run_instr(p, d, i, threaded);
    if (capture) {
        /* end the capture whatever happened, so the stream leaves capture mode */
        pl_status st2 = be->ops->capture_end(be, d, &pd->graph);
        if (st == PL_OK) st = st2;
        return st;
    }
    if (st == PL_OK) st = be->ops->step_end(be, d);
    return st;
}

/* The engine's host threads: one per logical device, started by the first
 * threaded step of any program on the engine and kept until the engine is
 * destroyed, so a step costs a condition-variable handoff per device
 * instead of a thread creation and join. A step posts a job (each used
 * device's program and capture flag) under a new generation number; every
 * worker wakes, runs its device's list if it has one, and the last one to
 * finish signals the step. One step at a time per engine (hw.h: programs of
 * one engine are not stepped concurrently). */
struct hw_pool {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    int n;                         /* workers started */
    pthread_t th[HW_MAX_DEVICES];
    worker job[HW_MAX_DEVICES];    /* this generation's work (p == NULL: none) */
    uint64_t gen;                  /* job generation */
    int pending;                   /* workers yet to finish it */
    int quit;
};

typedef struct {
    struct hw_pool *pool;
    int d;
} pool_slot;

static void *pool_main(void *arg) {
    pool_slot *ps = arg;
    hw_pool *pool = ps->pool;
    const int d = ps->d;
    free(ps);
    uint64_t seen = 0;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!pool->quit && pool->gen == seen) pthread_cond_wait(&pool->go, &pool->mu);
        if (pool->quit) break;
        seen = pool->gen;
        worker w = pool->job[d];
        if (w.p) {
            pthread_mutex_unlock(&pool->mu);
            pl_status st = device_list(w.p, d, w.capture, 1);
            pthread_mutex_lock(&pool->mu);
            pool->job[d].st = st;
        }
        if (--pool->pending == 0) pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

void hw_pool_destroy(hw_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    pool->quit = 1;
    pthread_cond_broadcast(&pool->go);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->n; i++) pthread_join(pool->th[i], NULL);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->go);
    pthread_cond_destroy(&pool->done);
    free(pool);
}

/* The engine's pool with a worker for each of its n devices, or NULL. */
static hw_pool *pool_get(hw_engine *e, int n) {
    if (e->pool) return e->pool;
    hw_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->go, NULL);
    pthread_cond_init(&pool->done, NULL);
    for (int d = 0; d < n; d++) {
        pool_slot *ps = malloc(sizeof *ps);
        if (!ps || (ps->pool = pool, ps->d = d, pthread_create(&pool->th[d], NULL, pool_main, ps) != 0)) {
            free(ps);
            hw_pool_destroy(pool);
            return NULL;
        }
        pool->n = d + 1;
    }
    e->pool = pool;
    return pool;
}

static pl_status run_threads(hw_program *p, int capture) {
    hw_pool *pool = pool_get(p->e, p->n_dev);
    if (!pool) return PL_ERR_NOMEM;
    pthread_mutex_lock(&pool->mu);
    for (int d = 0; d < pool->n; d++)
        pool->job[d] = (worker){d < p->n_dev && p->dev[d].used ? p : NULL, d, capture, PL_OK};
    pool->pending = pool->n;
    pool->gen++;
    pthread_cond_broadcast(&pool->go);
    while (pool->pending > 0) pthread_cond_wait(&pool->done, &pool->mu);
    pl_status st = PL_OK;
    for (int d = 0; d < pool->n; d++)
        if (st == PL_OK && pool->job[d].st != PL_OK) st = pool->job[d].st;
    pthread_mutex_unlock(&pool->mu);
    return st;
}

static pl_status collect_trace(hw_program *p) {
    hw_backend *be = p->e->be;
    int n = 0;
    for (int d = 0; d < p->n_dev; d++)
        for (int i = 0; i < p->dev[d].n_ins; i++) n += traced_kind(&p->dev[d].ins[i]);
    free(p->trace);
    p->trace = calloc((size_t)(n > 0 ? n : 1), sizeof *p->trace);
    p->n_trace = 0;
    if (!p->trace) return PL_ERR_NOMEM;
    for (int d = 0; d < p->n_dev; d++) {
        if (!p->dev[d].used) continue;
        for (int i = 0; i < p->dev[d].n_ins; i++) {
            const hw_instr *in = &p->dev[d].ins[i];
            if (!traced_kind(in)) continue;
            hw_trace_event *ev = &p->trace[p->n_trace++];
            static const hw_event_kind kinds[] = {HW_EV_ZERO, HW_EV_FWD, HW_EV_BWD, HW_EV_ADD, HW_EV_OPT,
                                                  HW_EV_ZERO, HW_EV_ZERO, HW_EV_SEND, HW_EV_RECV, HW_EV_OPT};
            ev->kind = kinds[in->kind];
            if (in->kind == HI_BWD && p->calls[in->call].part == HW_BWD_WEIGHT) ev->kind = HW_EV_WGRAD;
            ev->node = in->node;
            ev->micro_batch = in->mb;
            ev->device = d;
            ev->stream = in->stream;
            ev->peer = (in->kind == HI_SEND || in->kind == HI_RECV) ? in->peer : -1;
            ev->grad = in->grad;
            ev->bytes = (in->kind == HI_SEND || in->kind == HI_RECV) ? in->n : 0;
            pl_status st = be->ops->marker_us(be, d, 2 * i, &ev->start_us);
            if (st == PL_OK) st = be->ops->marker_us(be, d, 2 * i + 1, &ev->end_us);
            if (st != PL_OK) return st;
        }
    }
    return PL_OK;
}

pl_status hw_program_set_trace(hw_program *p, int on) {
    hw_backend *be = p->e->be;
    if (on)
        for (int d = 0; d < p->n_dev; d++)
            if (p->dev[d].used) {
                pl_status st = be->ops->markers_reserve(be, d, 2 * p->dev[d].n_ins);
                if (st != PL_OK) return st;
            }
    p->trace_on = on;
    return PL_OK;
}

pl_status hw_program_step(hw_program *p, hw_step_result *r, char *msg, size_t len) {
    hw_backend *be = p->e->be;
    const hw_backend_ops *ops = be->ops;
    if (!p->batch_set) return pl_fail(msg, len, PL_ERR_INVALID, "no batch set (hw_program_set_batch)");
    memset(r, 0, sizeof *r);
    p->t++;
    pl_status st = PL_OK;
    for (int d = 0; d < p->n_dev && st == PL_OK; d++) {
        hw_program_dev *pd = &p->dev[d];
        if (!pd->used) continue;
        st = ops->set_workspace(be, d, pd->off_ws >= 0 ? (char *)pd->base + pd->off_ws : NULL, pd->ws_bytes);
        if (st == PL_OK) st = ops->step_begin(be, d);
    }
    double w0 = pl_now_us();
    int used = 0;
    for (int d = 0; d < p->n_dev; d++) used += p->dev[d].used;
    int graphs = p->e->graphs && ops->capture_begin && !p->trace_on && !p->par && p->graph_state >= 0 &&
                 (p->threaded || used == 1);
    if (st == PL_OK && graphs && p->graph_state == 0 && p->steps_run >= 1) {
        /* capture this step (the first ran op by op, so libraries are warm) */
        int ud = -1;
        for (int d = 0; d < p->n_dev; d++)
            if (p->dev[d].used) ud = d;
        pl_status cs = p->threaded ? run_threads(p, 1) : device_list(p, ud, 1, 0);
        int all = cs == PL_OK;
        for (int d = 0; d < p->n_dev; d++)
            if (p->dev[d].used && !p->dev[d].graph) all = 0;
        if (all) {
            p->graph_state = 1;
        } else {
            for (int d = 0; d < p->n_dev; d++)
                if (p->dev[d].graph) {
                    ops->graph_destroy(be, d, p->dev[d].graph);
                    p->dev[d].graph = NULL;
                }
            p->graph_state = -1;
            graphs = 0;
        }
    }
    if (st == PL_OK && graphs && p->graph_state == 1) {
        for (int d = 0; d < p->n_dev && st == PL_OK; d++)
            if (p->dev[d].used) st = ops->graph_launch(be, d, p->dev[d].graph);
        for (int d = 0; d < p->n_dev && st == PL_OK; d++)
            if (p->dev[d].used) st = ops->step_end(be, d);
    } else if (st == PL_OK) {
        st = p->threaded ? run_threads(p, 0) : run_single(p);
    }
    if (p->par) {
        /* the groups' work of the step (overlapped dp buckets): none left in flight, whatever happened */
        char dmsg[256];
        pl_status ds = p->par->ops->step_end(p->par_state, p, dmsg, sizeof dmsg);
        if (st == PL_OK && ds != PL_OK) {
            st = ds;
            snprintf(be->err, sizeof be->err, "%s", dmsg);
        }
    }
    p->steps_run++;
    double step = 0.0;
    for (int d = 0; d < p->n_dev && st == PL_OK; d++) {
        if (!p->dev[d].used) continue;
        st = ops->step_wait(be, d, &r->device_us[d]);
        if (r->device_us[d] > step) step = r->device_us[d];
    }
    r->wall_us = pl_now_us() - w0;
    r->step_us = step;
    if (st != PL_OK) return pl_fail(msg, len, st, "step failed: %s", be->err);
    double sum = 0.0;
    hw_program_dev *ld = &p->dev[p->loss_dev];
    if ((st = ops->download(be, p->loss_dev, &sum, (char *)ld->base + ld->off_loss, 8)) != PL_OK)
        return pl_fail(msg, len, st, "reading the loss: %s", be->err);
    r->loss = sum / ((double)p->g->cfg.batch * p->g->cfg.seq_len);
    /* the groups' mean loss and their slowest rank's times */
    if (p->par &&
        (st = p->par->ops->step_result(p->par_state, p, &r->loss, &r->step_us, &r->wall_us, msg, len)) != PL_OK)
        return st;
    if (p->trace_on && (st = collect_trace(p)) != PL_OK)
        return pl_fail(msg, len, st, "reading the trace: %s", be->err);
    if (!p->trace_on) p->n_trace = 0;
    return PL_OK;
}

pl_status hw_program_time(hw_program *p, int warmup, int steps, hw_timing *t, char *msg, size_t len) {
    memset(t, 0, sizeof *t);
    if (warmup < 0 || steps < 1) return pl_fail(msg, len, PL_ERR_INVALID, "need warmup >= 0 and steps >= 1");
    double *v = malloc(sizeof(double) * (size_t)steps * 2);
    if (!v) return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    pl_status st = PL_OK;
    hw_step_result r;
    for (int i = 0; i < warmup + steps && st == PL_OK; i++) {
        st = hw_program_step(p, &r, msg, len);
        if (st != PL_OK) break;
        if (i == 0) t->first_loss = r.loss;
        t->last_loss = r.loss;
        if (i >= warmup) {
            v[i - warmup] = r.step_us;
            if (i - warmup < 64) t->step_us[i - warmup] = r.step_us;
        }
    }
    if (st == PL_OK) {
        t->steps = steps;
        t->median_us = pl_median(v, steps, v + steps);
        pl_mean_sd(v, steps, &t->mean_us, &t->sd_us);
        t->min_us = t->max_us = v[0];
        for (int i = 1; i < steps; i++) {
            if (v[i] < t->min_us) t->min_us = v[i];
            if (v[i] > t->max_us) t->max_us = v[i];
        }
    }
    free(v);
    return st;
}

const hw_trace_event *hw_program_trace(const hw_program *p, int *n) {
    *n = p->n_trace;
    return p->n_trace > 0 ? p->trace : NULL;
}

pl_status hw_program_write_chrome_trace(const hw_program *p, FILE *f) {
    if (p->n_trace == 0) return PL_ERR_INVALID;
    static const char *kind[] = {"fwd", "bwd", "adamw", "send", "recv", "add", "zero", "wgrad"};
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    int first = 1;
    for (int d = 0; d < p->n_dev; d++) {
        if (!p->dev[d].used) continue;
        const hw_device_info *info = &p->e->be->info[d];
        fprintf(f, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"device %d (%s %d)\"}}",
                first ? "" : ",\n", d, d, info->name, info->physical);
        first = 0;
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"compute\"}}", d);
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":\"comm\"}}", d);
    }
    for (int i = 0; i < p->n_trace; i++) {
        const hw_trace_event *e = &p->trace[i];
        char name[96];
        if (e->node >= 0 && (e->kind == HW_EV_SEND || e->kind == HW_EV_RECV))
            snprintf(name, sizeof name, "%s %s%s mb%d %s %d", kind[e->kind], e->grad ? "grad " : "",
                     p->g->nodes[e->node].name, e->micro_batch, e->kind == HW_EV_SEND ? "to" : "from", e->peer);
        else if (e->node >= 0)
            snprintf(name, sizeof name, "%s %s mb%d", kind[e->kind], p->g->nodes[e->node].name, e->micro_batch);
        else
            snprintf(name, sizeof name, "%s", kind[e->kind]);
        double dur = e->end_us - e->start_us;
        fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f",
                name, kind[e->kind], e->device, e->stream, e->start_us, dur > 0 ? dur : 0.0);
        if (e->bytes > 0) fprintf(f, ",\"args\":{\"bytes\":%lld}", (long long)e->bytes);
        fprintf(f, "}");
    }
    fprintf(f, "\n]}\n");
    return ferror(f) ? PL_ERR_IO : PL_OK;
}
