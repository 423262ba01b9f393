/*
 * backend_cpu.c: the CPU reference backend. Each logical device is a
 * virtual device in host memory; every operation runs to completion when
 * called, so streams are in order by construction and events are no-ops.
 *
 * Arena memory is filled with 0xFF bytes (NaN floats) when allocated, so a
 * kernel that reads a buffer nobody wrote produces NaNs that the tests see.
 *
 * One thread per device: the two halves of a transfer rendezvous through a
 * slot per (source, destination) pair; the send returns once the receiver
 * has copied the data, which keeps the executor's rule that a sent buffer
 * may be reused once its comm stream has moved on.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "nodes.h"
#include "util.h"

typedef struct {
    const void *ptr; /* posted source */
    int64_t bytes;
    int posted; /* a send waits in this slot */
    int done;   /* the receiver copied it */
} cpu_slot;

typedef struct {
    int n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    cpu_slot *slots;   /* [src * n + dst] */
    double t0[HW_MAX_DEVICES], t1[HW_MAX_DEVICES];
    double *marks[HW_MAX_DEVICES];
    int n_marks[HW_MAX_DEVICES];
} cpu_impl;

static cpu_impl *impl(hw_backend *be) { return be->impl; }

static void cpu_destroy(hw_backend *be) {
    cpu_impl *c = impl(be);
    if (c) {
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
        free(c->slots);
        for (int d = 0; d < HW_MAX_DEVICES; d++) free(c->marks[d]);
        free(c);
    }
    free(be);
}

static pl_status cpu_mem_alloc(hw_backend *be, int dev, int64_t bytes, void **ptr) {
    (void)dev;
    size_t n = (size_t)((bytes + 255) / 256 * 256);
    void *p = aligned_alloc(256, n ? n : 256);
    if (!p) {
        pl_fail(be->err, sizeof be->err, PL_ERR_DEVICE_OOM, "host allocation of %lld bytes failed",
                (long long)bytes);
        return PL_ERR_DEVICE_OOM;
    }
    memset(p, 0xFF, n);
    *ptr = p;
    return PL_OK;
}

static void cpu_mem_free(hw_backend *be, int dev, void *ptr) {
    (void)be; (void)dev;
    free(ptr);
}

static pl_status cpu_copy(hw_backend *be, int dev, void *dst, const void *src, int64_t bytes) {
    (void)be; (void)dev;
    memcpy(dst, src, (size_t)bytes);
    return PL_OK;
}

static pl_status cpu_set_workspace(hw_backend *be, int dev, void *ptr, int64_t bytes) {
    (void)be; (void)dev; (void)ptr; (void)bytes;
    return PL_OK;
}

static pl_status cpu_zero(hw_backend *be, int dev, void *ptr, int64_t bytes) {
    (void)be; (void)dev;
    memset(ptr, 0, (size_t)bytes);
    return PL_OK;
}

#define P(c, k) ((c)->params + (c)->pl.off[k])
#define G(c, k) ((c)->grads + (c)->pl.off[k])
#define S(c, k) ((c)->saved + (c)->mem.saved_off[k])

#define P16(c, k) ((const float *)(c)->params16 + (c)->pl.off[k])

/* The bf16 mode's nodes that differ from fp32 (nodes.h); 1 when handled. */
static int cpu_forward_bf16(const hw_node_call *c) {
    const hw_dims *d = &c->d;
    const int N = d->B * d->T;
    switch (c->kind) {
    case OP_ATTENTION:
        cpu_attention_forward_bf16(c->out, S(c, 0), S(c, 1), S(c, 2), c->scratch, c->in[0], P16(c, 0), P16(c, 1),
                                   P16(c, 2), P(c, 3), d->B, d->T, d->C, d->NH);
        return 1;
    case OP_MLP:
        cpu_mlp_forward_bf16(c->out, S(c, 0), S(c, 1), c->scratch, c->in[0], P16(c, 0), P16(c, 1), P16(c, 2), P(c, 3),
                             N, d->C);
        return 1;
    case OP_HEAD: cpu_head_forward_bf16(c->out, c->scratch, c->in[0], P16(c, 0), N, d->C, d->V, d->Vp); return 1;
    case OP_LOSS:
        cpu_loss_forward_bf16(c->out, c->din[0], c->loss_sum, c->in[0], c->targets, c->inv_norm, N, d->V, d->Vp);
        return 1;
    default: return 0;
    }
}

static int cpu_backward_bf16(const hw_node_call *c) {
    const hw_dims *d = &c->d;
    const int N = d->B * d->T;
    switch (c->kind) {
    case OP_ATTENTION:
        cpu_attention_backward_bf16(c->din[0], G(c, 0), G(c, 1), G(c, 2), G(c, 3), c->scratch, c->dout, c->in[0],
                                    S(c, 0), S(c, 1), S(c, 2), P16(c, 0), P16(c, 2), d->B, d->T, d->C, d->NH,
                                    c->acc[0]);
        return 1;
    case OP_MLP:
        cpu_mlp_backward_bf16(c->din[0], G(c, 0), G(c, 1), G(c, 2), G(c, 3), c->scratch, c->dout, c->in[0], S(c, 0),
                              S(c, 1), P16(c, 0), P16(c, 2), N, d->C, c->acc[0]);
        return 1;
    case OP_HEAD:
        cpu_head_backward_bf16(c->din[0], G(c, 0), c->scratch, c->dout, c->in[0], P16(c, 0), N, d->C, d->V, d->Vp,
                               c->acc[0]);
        return 1;
    default: return 0;
    }
}

static pl_status cpu_forward(hw_backend *be, int dev, const hw_node_call *c) {
    (void)dev;
    const hw_dims *d = &c->d;
    const int N = d->B * d->T;
    if (c->bf16 && cpu_forward_bf16(c)) return PL_OK;
    switch (c->kind) {
    case OP_EMBEDDING: cpu_embedding_forward(c->out, c->tokens, P(c, 0), P(c, 1), d->B, d->T, d->C); break;
    case OP_LAYERNORM: cpu_layernorm_forward(c->out, S(c, 0), S(c, 1), c->in[0], P(c, 0), P(c, 1), N, d->C); break;
    case OP_ATTENTION:
        cpu_attention_forward(c->out, S(c, 0), S(c, 1), S(c, 2), c->scratch, c->in[0], P(c, 0), P(c, 1), P(c, 2),
                              P(c, 3), d->B, d->T, d->C, d->NH);
        break;
    case OP_RESIDUAL: cpu_residual_forward(c->out, c->in[0], c->in[1], (int64_t)N * d->C); break;
    case OP_MLP:
        cpu_mlp_forward(c->out, S(c, 0), S(c, 1), c->in[0], P(c, 0), P(c, 1), P(c, 2), P(c, 3), N, d->C);
        break;
    case OP_HEAD: cpu_head_forward(c->out, c->in[0], P(c, 0), N, d->C, d->V, d->Vp); break;
    case OP_LOSS:
        cpu_loss_forward(c->out, c->din[0], c->loss_sum, c->in[0], c->targets, c->inv_norm, N, d->V, d->Vp);
        break;
    default:
        return pl_fail(be->err, sizeof be->err, PL_ERR_INVALID, "unknown node kind %d", (int)c->kind);
    }
    return PL_OK;
}

static pl_status cpu_backward(hw_backend *be, int dev, const hw_node_call *c) {
    (void)dev;
    const hw_dims *d = &c->d;
    const int N = d->B * d->T;
    if (c->part != HW_BWD_WHOLE) {
        const int w = c->part == HW_BWD_WEIGHT;
        if (c->bf16 || !hw_bwd_splits(c->kind))
            return pl_fail(be->err, sizeof be->err, PL_ERR_UNSUPPORTED,
                           "a split backward (B and W) needs fp32 and a node with weight GEMMs");
        switch (c->kind) {
        case OP_ATTENTION:
            if (w) cpu_attention_backward_weight(G(c, 0), G(c, 1), G(c, 2), G(c, 3), c->dout, c->in[0], S(c, 2), c->wstash, N, d->C);
            else cpu_attention_backward_input(c->din[0], c->wstash, c->scratch, c->dout, S(c, 0), S(c, 1), P(c, 0), P(c, 2),
                                              d->B, d->T, d->C, d->NH, c->acc[0]);
            break;
        case OP_MLP:
            if (w) cpu_mlp_backward_weight(G(c, 0), G(c, 1), G(c, 2), G(c, 3), c->dout, c->in[0], S(c, 1), c->wstash, N, d->C);
            else cpu_mlp_backward_input(c->din[0], c->wstash, c->dout, S(c, 0), P(c, 0), P(c, 2), N, d->C, c->acc[0]);
            break;
        default: /* OP_HEAD */
            if (w) cpu_matmul_backward(NULL, G(c, 0), NULL, c->dout, c->in[0], NULL, N, d->C, d->V, d->Vp, 0);
            else cpu_matmul_backward(c->din[0], NULL, NULL, c->dout, NULL, P(c, 0), N, d->C, d->V, d->Vp, c->acc[0]);
            break;
        }
        return PL_OK;
    }
    if (c->bf16 && cpu_backward_bf16(c)) return PL_OK;
    switch (c->kind) {
    case OP_EMBEDDING: cpu_embedding_backward(G(c, 0), G(c, 1), c->dout, c->tokens, d->B, d->T, d->C); break;
    case OP_LAYERNORM:
        cpu_layernorm_backward(c->din[0], G(c, 0), G(c, 1), c->dout, c->in[0], P(c, 0), S(c, 0), S(c, 1), N, d->C,
                               c->acc[0]);
        break;
    case OP_ATTENTION:
        cpu_attention_backward(c->din[0], G(c, 0), G(c, 1), G(c, 2), G(c, 3), c->scratch, c->dout, c->in[0],
                               S(c, 0), S(c, 1), S(c, 2), P(c, 0), P(c, 2), d->B, d->T, d->C, d->NH, c->acc[0]);
        break;
    case OP_RESIDUAL:
        cpu_residual_backward(c->din[0], c->din[1], c->dout, (int64_t)N * d->C, c->acc[0], c->acc[1]);
        break;
    case OP_MLP:
        cpu_mlp_backward(c->din[0], G(c, 0), G(c, 1), G(c, 2), G(c, 3), c->scratch, c->dout, c->in[0], S(c, 0),
                         S(c, 1), P(c, 0), P(c, 2), N, d->C, c->acc[0]);
        break;
    case OP_HEAD: cpu_head_backward(c->din[0], G(c, 0), c->dout, c->in[0], P(c, 0), N, d->C, d->V, d->Vp, c->acc[0]); break;
    case OP_LOSS: break; /* fused into the forward */
    default:
        return pl_fail(be->err, sizeof be->err, PL_ERR_INVALID, "unknown node kind %d", (int)c->kind);
    }
    return PL_OK;
}

static pl_status cpu_add(hw_backend *be, int dev, float *y, const float *x, int64_t n) {
    (void)be; (void)dev;
    cpu_add_inplace(y, x, n);
    return PL_OK;
}

static pl_status cpu_adamw_op(hw_backend *be, int dev, float *p, const float *g, float *m, float *v, int64_t n,
                              const hw_adamw_args *a) {
    (void)be; (void)dev;
    int t = a->t_dev ? *a->t_dev + 1 : a->t;
    cpu_adamw(p, g, m, v, n, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, t);
    if (a->p16) cpu_round_bf16((float *)a->p16, p, n);
    if (a->t_dev) (*a->t_dev)++;
    return PL_OK;
}

static pl_status cpu_events_reserve(hw_backend *be, int dev, int n) {
    (void)be; (void)dev; (void)n;
    return PL_OK;
}

static pl_status cpu_event_record(hw_backend *be, int dev, int stream, int ev) {
    (void)be; (void)dev; (void)stream; (void)ev;
    return PL_OK;
}

static pl_status cpu_event_wait(hw_backend *be, int dev, int stream, int ev_dev, int ev) {
    (void)be; (void)dev; (void)stream; (void)ev_dev; (void)ev;
    return PL_OK;
}

static pl_status cpu_xfer_pair(hw_backend *be, int src, int dst, const void *sptr, void *dptr, int64_t bytes) {
    (void)be; (void)src; (void)dst;
    memcpy(dptr, sptr, (size_t)bytes);
    return PL_OK;
}

static pl_status cpu_xfer_send(hw_backend *be, int src, int dst, const void *ptr, int64_t bytes) {
    cpu_impl *c = impl(be);
    cpu_slot *s = &c->slots[src * c->n + dst];
    pthread_mutex_lock(&c->mu);
    while (s->posted) pthread_cond_wait(&c->cv, &c->mu);
    s->ptr = ptr;
    s->bytes = bytes;
    s->done = 0;
    s->posted = 1;
    pthread_cond_broadcast(&c->cv);
    while (!s->done) pthread_cond_wait(&c->cv, &c->mu);
    s->posted = 0;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return PL_OK;
}

static pl_status cpu_xfer_recv(hw_backend *be, int dst, int src, void *ptr, int64_t bytes) {
    cpu_impl *c = impl(be);
    cpu_slot *s = &c->slots[src * c->n + dst];
    pl_status st = PL_OK;
    pthread_mutex_lock(&c->mu);
    while (!s->posted || s->done) pthread_cond_wait(&c->cv, &c->mu);
    if (s->bytes != bytes)
        st = pl_fail(be->err, sizeof be->err, PL_ERR_INVALID, "transfer %d->%d: %lld bytes sent, %lld expected", src,
                     dst, (long long)s->bytes, (long long)bytes);
    else
        memcpy(ptr, s->ptr, (size_t)bytes);
    s->done = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return st;
}

static int cpu_threads_ok(hw_backend *be) {
    (void)be;
    return 1;
}

static pl_status cpu_step_begin(hw_backend *be, int dev) {
    impl(be)->t0[dev] = pl_now_us();
    return PL_OK;
}

static pl_status cpu_step_end(hw_backend *be, int dev) {
    impl(be)->t1[dev] = pl_now_us();
    return PL_OK;
}

static pl_status cpu_step_wait(hw_backend *be, int dev, double *us) {
    *us = impl(be)->t1[dev] - impl(be)->t0[dev];
    return PL_OK;
}

static pl_status cpu_markers_reserve(hw_backend *be, int dev, int n) {
    cpu_impl *c = impl(be);
    if (n <= c->n_marks[dev]) return PL_OK;
    double *m = realloc(c->marks[dev], sizeof(double) * (size_t)n);
    if (!m) return PL_ERR_NOMEM;
    c->marks[dev] = m;
    c->n_marks[dev] = n;
    return PL_OK;
}

static pl_status cpu_mark(hw_backend *be, int dev, int stream, int idx) {
    (void)stream;
    cpu_impl *c = impl(be);
    if (idx < 0 || idx >= c->n_marks[dev]) return PL_ERR_INVALID;
    c->marks[dev][idx] = pl_now_us();
    return PL_OK;
}

static pl_status cpu_marker_us(hw_backend *be, int dev, int idx, double *us) {
    cpu_impl *c = impl(be);
    if (idx < 0 || idx >= c->n_marks[dev]) return PL_ERR_INVALID;
    *us = c->marks[dev][idx] - c->t0[dev];
    return PL_OK;
}

static pl_status cpu_mem_free_bytes(hw_backend *be, int dev, int64_t *free_bytes) {
    (void)be; (void)dev;
    *free_bytes = -1;
    return PL_OK;
}

static const hw_backend_ops CPU_OPS = {
    .name = "cpu",
    .workspace_bytes = 0,
    .destroy = cpu_destroy,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .set_workspace = cpu_set_workspace,
    .zero = cpu_zero,
    .zero_comm = cpu_zero,
    .node_forward = cpu_forward,
    .node_backward = cpu_backward,
    .add = cpu_add,
    .adamw = cpu_adamw_op,
    .events_reserve = cpu_events_reserve,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .xfer_pair = cpu_xfer_pair,
    .xfer_send = cpu_xfer_send,
    .xfer_recv = cpu_xfer_recv,
    .threads_ok = cpu_threads_ok,
    .step_begin = cpu_step_begin,
    .step_end = cpu_step_end,
    .step_wait = cpu_step_wait,
    .markers_reserve = cpu_markers_reserve,
    .mark = cpu_mark,
    .marker_us = cpu_marker_us,
    .mem_free_bytes = cpu_mem_free_bytes,
    .capture_begin = NULL,
    .capture_end = NULL,
    .graph_launch = NULL,
    .graph_destroy = NULL,
};

pl_status hw_backend_cpu_create(int n, hw_backend **out, char *msg, size_t len) {
    *out = NULL;
    if (n < 1 || n > HW_MAX_DEVICES)
        return pl_fail(msg, len, PL_ERR_INVALID, "the CPU backend takes 1 to %d devices", HW_MAX_DEVICES);
    hw_backend *be = calloc(1, sizeof *be);
    cpu_impl *c = calloc(1, sizeof *c);
    cpu_slot *slots = calloc((size_t)n * (size_t)n, sizeof *slots);
    if (!be || !c || !slots) {
        free(be); free(c); free(slots);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    }
    c->n = n;
    c->slots = slots;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    be->ops = &CPU_OPS;
    be->n_devices = n;
    be->copy_bytes = 4; /* the bf16 copy as rounded floats */
    be->impl = c;
    for (int d = 0; d < n; d++) {
        snprintf(be->info[d].name, sizeof be->info[d].name, "cpu");
        be->info[d].mem_bytes = HW_CPU_DEVICE_BYTES;
        be->info[d].physical = d;
    }
    *out = be;
    return PL_OK;
}
