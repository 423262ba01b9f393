/*
 * dist_program.c: the hooks of hw/exec/parallel.h for tensor- and
 * data-parallel process groups (dist_program.h): the groups' checks, their
 * state for one program (collectives on each used device, host staging),
 * the tensor-parallel node calls, the replicated gradients' sums, the
 * data-parallel buckets and updates, and the group's loss and times. The
 * collectives' order on every rank is the program's, which every rank
 * compiles the same.
 */
#include "dist_program.h"

#include <stdlib.h>
#include <string.h>

#include "dist_device.h"
#include "dist_dp.h"
#include "dist_program_state.h"
#include "placer_config.h"
#include "program_internal.h"

static const dist_parallel *cfg_of(const hw_parallel *par) { return (const dist_parallel *)par; }

static void describe(const hw_parallel *par, hw_split *out) {
    const dist_parallel *x = cfg_of(par);
    *out = hw_split_none();
    out->groups = x->dp || x->tp;
    const int tp = x->tp ? dist_size(x->tp) : 1;
    if (x->tp && tp > 1) {
        out->tp_size = tp;
        out->tp_rank = dist_rank(x->tp);
        out->seq_parallel = x->seq_parallel != 0;
    }
    out->dp_group = x->dp != NULL;
    out->dp_size = x->dp ? dist_size(x->dp) : 1;
}

/* The CPU backend runs tp and dp on host buffers; the CUDA one through the
 * device collectives (dist_device.h); no other backend runs either. */
static pl_status check(const hw_parallel *par, const hw_backend *be, const graph *g, int micro_batch, int bf16,
                       hw_split *split, char *msg, size_t len) {
    const dist_parallel *x = cfg_of(par);
    const int on_cpu = strcmp(be->ops->name, "cpu") == 0, on_cuda = strcmp(be->ops->name, "cuda") == 0;
    if (x->dp && !on_cpu && !on_cuda)
        return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "data parallelism over processes does not run on the %s backend",
                       be->ops->name);
    const int tp = x->tp ? dist_size(x->tp) : 1;
    pl_status st;
    if (x->tp && tp > 1) {
        if (!on_cpu && !on_cuda)
            return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "tensor parallelism does not run on the %s backend",
                           be->ops->name);
        if ((st = hw_tp_check(&g->cfg, tp, x->seq_parallel, (int64_t)micro_batch * g->cfg.seq_len, msg, len)) != PL_OK)
            return st;
    }
    if ((st = hw_dp_check_opts(x->zero, x->bucket_bytes, x->dp, bf16, &split->zero, &split->bucket_floats, msg, len)) !=
        PL_OK)
        return st;
    split->device_buffers = dist_device_wanted(be);
    return PL_OK;
}

static void detach(hw_parallel_state *s) {
    if (!s) return;
    hw_dp_comm_destroy(s->dp_comm); /* before the groups it borrows */
    for (int d = 0; d < HW_MAX_DEVICES; d++) {
        dist_device_destroy(s->xd_tp[d]);
        dist_device_destroy(s->xd_dp[d]);
    }
    free(s->dp_buf);
    free(s);
}

/* The CUDA backend's collectives on device buffers, one set per used
 * device and group (collective: every rank has the same used devices).
 * PLACER_TEST_DEVICE_COLLECTIVES=1 (tests) takes the CPU backend's dp
 * updates and replicated-gradient sums through them too (host staging
 * over memcpy), so CI runs that code; its tp node calls stay dist_tp.c's.
 * Then the host staging buffer of the largest device's gradients. */
static pl_status attach(const hw_parallel *par, struct hw_program *p, hw_parallel_state **out, char *msg,
                        size_t len) {
    const dist_parallel *x = cfg_of(par);
    hw_backend *be = p->e->be;
    *out = NULL;
    hw_parallel_state *s = calloc(1, sizeof *s);
    if (!s) return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    s->dp = x->dp;
    s->tp.size = 1;
    if (p->split.tp_size > 1) s->tp = (hw_tp){x->tp, p->split.tp_rank, p->split.tp_size, p->split.seq_parallel};
    pl_status st = PL_OK;
    if (dist_device_wanted(be))
        for (int d = 0; d < p->n_dev && st == PL_OK; d++) {
            if (!p->dev[d].used) continue;
            if (s->tp.g) st = dist_device_create(s->tp.g, be, d, &s->xd_tp[d], msg, len);
            if (st == PL_OK && s->dp) st = dist_device_create(s->dp, be, d, &s->xd_dp[d], msg, len);
        }
    if (st != PL_OK) {
        detach(s);
        return st;
    }
    int64_t max_dev = 1;
    for (int d = 0; d < p->n_dev; d++)
        if (p->dev[d].param_floats > max_dev) max_dev = p->dev[d].param_floats;
    s->dp_buf = malloc(sizeof(float) * ((size_t)max_dev + DIST_MAX_RANKS));
    if (!s->dp_buf) {
        detach(s);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory for the parameters");
    }
    *out = s;
    return PL_OK;
}

/* A tp rank's node call: on CUDA with device collectives the device-buffer
 * path (dist_tp_cuda.cu), else the host-buffer one (dist_tp.c). */
static pl_status node_call(hw_parallel_state *s, struct hw_program *p, int d, int backward, const hw_node_call *c,
                           char *msg, size_t len) {
    hw_backend *be = p->e->be;
    if (s->xd_tp[d] && strcmp(be->ops->name, "cuda") == 0) {
#if PLACER_HAVE_CUDA
        return backward ? hw_tp_backward_cuda(&s->tp, s->xd_tp[d], be, d, c, msg, len)
                        : hw_tp_forward_cuda(&s->tp, s->xd_tp[d], be, d, c, msg, len);
#else
        return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "built without CUDA");
#endif
    }
    return backward ? hw_tp_backward(&s->tp, c, msg, len) : hw_tp_forward(&s->tp, c, msg, len);
}

static void backward_issued(hw_parallel_state *s, struct hw_program *p) {
    (void)p;
    if (s->dp_comm) hw_dp_note_bwd(s);
}

static pl_status bucket(hw_parallel_state *s, struct hw_program *p, int d, int64_t off, int64_t n, char *msg,
                        size_t len) {
    return hw_dp_reduce(p, s, d, off, n, msg, len);
}

/* Sequence parallelism: the gradients of the tensors every tp rank holds
 * whole (dist_tp.h) are partial sums over the ranks' tokens; sum them over
 * the tp group: host buffers staged through dp_buf in node order, device
 * buffers tensor by tensor through the device collectives. Without sp they
 * are the same values on every rank: on the CPU the same bits, and this is
 * not called; on CUDA the kernels that sum them (layernorm's and the
 * embedding's atomics, colsum's chunks) add in no fixed order, so the ranks'
 * bits can differ and the replicas would drift apart: they are averaged
 * over the group (device buffers only; (x + x) / 2 = x when they agree). */
static pl_status tp_reduce_replicated(struct hw_program *p, hw_parallel_state *s, int d, char *msg, size_t len) {
    hw_backend *be = p->e->be;
    hw_program_dev *pd = &p->dev[d];
    float *grads = (float *)((char *)pd->base + pd->off_grads);
    int64_t off[HW_MAX_PARAM_TENSORS], cnt[HW_MAX_PARAM_TENSORS], n = 0;
    if (s->xd_tp[d]) {
        /* device buffers (CUDA): each tensor all-reduced in place, in node order */
        for (int node = 0; node < p->g->n_nodes; node++) {
            if (p->placement[node] != d) continue;
            int nt = hw_tp_replicated(p->g, node, s->tp.size, off, cnt);
            for (int j = 0; j < nt; j++) {
                pl_status st = dist_device_allreduce_f32(s->xd_tp[d], grads + p->shard_off[node] + off[j], cnt[j],
                                                         DIST_SUM, !s->tp.sp, msg, len);
                if (st != PL_OK) return st;
            }
        }
        return PL_OK;
    }
    for (int pass = 0; pass < 2; pass++) {
        int64_t k = 0;
        for (int node = 0; node < p->g->n_nodes; node++) {
            if (p->placement[node] != d) continue;
            int nt = hw_tp_replicated(p->g, node, s->tp.size, off, cnt);
            for (int j = 0; j < nt; j++) {
                float *g = grads + p->shard_off[node] + off[j];
                pl_status st = pass == 0 ? be->ops->download(be, d, s->dp_buf + k, g, cnt[j] * 4)
                                         : be->ops->upload(be, d, g, s->dp_buf + k, cnt[j] * 4);
                if (st != PL_OK) return st;
                k += cnt[j];
            }
        }
        if (pass == 0) {
            n = k;
            pl_status st = dist_allreduce_f32(s->tp.g, s->dp_buf, n, DIST_SUM, msg, len);
            if (st != PL_OK) return st;
        }
    }
    return PL_OK;
}

/* HI_ADAMW: overlapped dp buckets first (the means in place before anything
 * reads the gradients), then the replicated gradients' tp sum, then the
 * replicas' update (dist_dp.h) or, without dp, the plain one. */
static pl_status update(hw_parallel_state *s, struct hw_program *p, int d, char *msg, size_t len) {
    const hw_program_dev *pd = &p->dev[d];
    pl_status st;
    if (s->dp_overlap > 0 && (st = hw_dp_join(p, s, d, msg, len)) != PL_OK) return st;
    if (s->tp.g && (s->tp.sp || s->xd_tp[d]) && pd->param_floats > 0 &&
        (st = tp_reduce_replicated(p, s, d, msg, len)) != PL_OK)
        return st;
    if (s->dp && pd->param_floats > 0) return hw_dp_update(p, s, d, msg, len);
    return hw_program_adamw(p, d);
}

static pl_status step_end(hw_parallel_state *s, struct hw_program *p, char *msg, size_t len) {
    return s->dp_overlap > 0 ? hw_dp_drain(p, s, msg, len) : PL_OK;
}

/* The dp group's mean loss (equal slices) and its slowest rank's times;
 * every tp rank has the same loss (the loss's statistics are all-reduced)
 * and the step takes as long as its slowest rank. */
static pl_status step_result(hw_parallel_state *s, struct hw_program *p, double *loss, double *step_us,
                             double *wall_us, char *msg, size_t len) {
    (void)p;
    pl_status st;
    if (s->dp) {
        double mean = *loss, times[2] = {*step_us, *wall_us};
        st = dist_allreduce_f64(s->dp, &mean, 1, DIST_SUM, msg, len);
        if (st == PL_OK) st = dist_allreduce_f64(s->dp, times, 2, DIST_MAX, msg, len);
        if (st != PL_OK) return st;
        *loss = mean / dist_size(s->dp);
        *step_us = times[0];
        *wall_us = times[1];
    }
    if (s->tp.g) {
        double times[2] = {*step_us, *wall_us};
        if ((st = dist_allreduce_f64(s->tp.g, times, 2, DIST_MAX, msg, len)) != PL_OK) return st;
        *step_us = times[0];
        *wall_us = times[1];
    }
    return PL_OK;
}

/* The first used device's collectives, the tp group's if any; "host"
 * where they run on host buffers. */
static const char *transport(const hw_parallel_state *s, const struct hw_program *p) {
    for (int d = 0; d < p->n_dev; d++) {
        if (s->xd_tp[d]) return dist_device_transport(s->xd_tp[d]);
        if (s->xd_dp[d]) return dist_device_transport(s->xd_dp[d]);
    }
    return "host";
}

static const hw_parallel_ops DIST_PARALLEL_OPS = {
    describe, check, attach, detach, node_call, backward_issued, bucket, update, step_end, step_result, transport,
};

const hw_parallel *dist_parallel_hooks(dist_parallel *x) {
    x->hooks.ops = &DIST_PARALLEL_OPS;
    return &x->hooks;
}
