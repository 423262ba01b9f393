/*
 * evaluator.c: placement problems and their parallel evaluation (see
 * evaluator.h). The pool is a generation counter under one mutex: the
 * caller bumps the generation with a job, workers run it and count down.
 */
#include "evaluator.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

pl_status policy_problem_init(policy_problem *pb, const graph *g, const grouping *gr, const profile_data *p,
                              const schedule *sched, int64_t cap_bytes, const sim_params *prm, char *msg,
                              size_t len) {
    memset(pb, 0, sizeof *pb);
    if (!g || !gr || !p || !sched) return pl_fail(msg, len, PL_ERR_INVALID, "missing graph, grouping or profile");
    if (p->n_nodes != g->n_nodes || gr->n_nodes != g->n_nodes)
        return pl_fail(msg, len, PL_ERR_INVALID, "the profile has %d nodes but the graph has %d", p->n_nodes,
                       g->n_nodes);
    if (p->n_devices < 1 || p->n_devices > SIM_MAX_DEVICES)
        return pl_fail(msg, len, PL_ERR_INVALID, "the profile has %d devices (1..%d supported)", p->n_devices,
                       SIM_MAX_DEVICES);
    pl_status st = schedule_validate(sched, g->cfg.batch, msg, len);
    if (st != PL_OK) return st;
    pb->g = g;
    pb->gr = gr;
    pb->p = p;
    pb->sched = *sched;
    for (int d = 0; d < p->n_devices; d++) pb->caps[d] = cap_bytes > 0 ? cap_bytes : p->devices[d].mem_bytes;
    if (prm) pb->prm = *prm;
    else sim_params_default(&pb->prm);
    pb->oom_penalty_us = POLICY_OOM_PENALTY_US;
    return PL_OK;
}

typedef struct {
    void (*fn)(void *arg, policy_worker *w); /* job */
    void *arg;                               /* its argument */
} pool_job;

struct policy_evaluator {
    policy_problem pb;          /* copy of the problem */
    int n_threads;              /* workers including the caller */
    policy_worker *workers;     /* n_threads */
    pthread_t *threads;         /* n_threads - 1 helpers (workers 1..) */
    int n_started;              /* helpers actually started */
    pthread_mutex_t mu;         /* guards what follows */
    pthread_cond_t cv_start;    /* a new generation or shutdown */
    pthread_cond_t cv_done;     /* a helper finished its job */
    uint64_t generation;        /* bumped per job */
    int pending;                /* helpers still running the job */
    int shutdown;               /* 1: helpers exit */
    pool_job job;               /* current job */
    int sync_ok;                /* mutex and conds initialised */
};

typedef struct {
    policy_evaluator *ev;
    int index;
} helper_arg;

static void *helper_main(void *p) {
    policy_evaluator *ev = ((helper_arg *)p)->ev;
    int index = ((helper_arg *)p)->index;
    free(p);
    uint64_t seen = 0;
    pthread_mutex_lock(&ev->mu);
    for (;;) {
        while (!ev->shutdown && ev->generation == seen) pthread_cond_wait(&ev->cv_start, &ev->mu);
        if (ev->shutdown) break;
        seen = ev->generation;
        pool_job job = ev->job;
        pthread_mutex_unlock(&ev->mu);
        job.fn(job.arg, &ev->workers[index]);
        pthread_mutex_lock(&ev->mu);
        if (--ev->pending == 0) pthread_cond_signal(&ev->cv_done);
    }
    pthread_mutex_unlock(&ev->mu);
    return NULL;
}

int policy_online_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (int)n : 1;
}

void policy_evaluator_destroy(policy_evaluator *ev) {
    if (!ev) return;
    if (ev->sync_ok) {
        pthread_mutex_lock(&ev->mu);
        ev->shutdown = 1;
        pthread_cond_broadcast(&ev->cv_start);
        pthread_mutex_unlock(&ev->mu);
        for (int i = 0; i < ev->n_started; i++) pthread_join(ev->threads[i], NULL);
        pthread_mutex_destroy(&ev->mu);
        pthread_cond_destroy(&ev->cv_start);
        pthread_cond_destroy(&ev->cv_done);
    }
    if (ev->workers)
        for (int i = 0; i < ev->n_threads; i++) {
            sim_ctx_destroy(ev->workers[i].ctx);
            free(ev->workers[i].node_dev);
            free(ev->workers[i].res);
        }
    free(ev->workers);
    free(ev->threads);
    free(ev);
}

pl_status policy_evaluator_create(const policy_problem *pb, int n_threads, policy_evaluator **out) {
    *out = NULL;
    if (n_threads <= 0) n_threads = policy_online_cores();
    policy_evaluator *ev = calloc(1, sizeof *ev);
    if (!ev) return PL_ERR_NOMEM;
    ev->pb = *pb;
    ev->n_threads = n_threads;
    ev->workers = calloc((size_t)n_threads, sizeof *ev->workers);
    ev->threads = calloc((size_t)n_threads, sizeof *ev->threads);
    pl_status st = PL_ERR_NOMEM;
    if (!ev->workers || !ev->threads) goto out_fail;
    for (int i = 0; i < n_threads; i++) {
        policy_worker *w = &ev->workers[i];
        w->index = i;
        st = sim_ctx_create(pb->g, pb->p, pb->sched.micro_batches, &w->ctx);
        if (st != PL_OK) goto out_fail;
        st = PL_ERR_NOMEM;
        w->node_dev = malloc(sizeof *w->node_dev * (size_t)pb->g->n_nodes);
        w->res = malloc(sizeof *w->res);
        if (!w->node_dev || !w->res) goto out_fail;
    }
    if (pthread_mutex_init(&ev->mu, NULL) != 0) goto out_fail;
    if (pthread_cond_init(&ev->cv_start, NULL) != 0) {
        pthread_mutex_destroy(&ev->mu);
        goto out_fail;
    }
    if (pthread_cond_init(&ev->cv_done, NULL) != 0) {
        pthread_cond_destroy(&ev->cv_start);
        pthread_mutex_destroy(&ev->mu);
        goto out_fail;
    }
    ev->sync_ok = 1;
    for (int i = 1; i < n_threads; i++) {
        helper_arg *a = malloc(sizeof *a);
        if (!a) goto out_fail;
        a->ev = ev;
        a->index = i;
        if (pthread_create(&ev->threads[ev->n_started], NULL, helper_main, a) != 0) {
            free(a);
            goto out_fail;
        }
        ev->n_started++;
    }
    *out = ev;
    return PL_OK;

out_fail:
    policy_evaluator_destroy(ev);
    return st == PL_OK ? PL_ERR_NOMEM : st;
}

int policy_evaluator_threads(const policy_evaluator *ev) { return ev->n_threads; }
const policy_problem *policy_evaluator_problem(const policy_evaluator *ev) { return &ev->pb; }

void policy_evaluator_run_all(policy_evaluator *ev, void (*fn)(void *arg, policy_worker *w), void *arg) {
    if (ev->n_started > 0) {
        pthread_mutex_lock(&ev->mu);
        ev->job.fn = fn;
        ev->job.arg = arg;
        ev->pending = ev->n_started;
        ev->generation++;
        pthread_cond_broadcast(&ev->cv_start);
        pthread_mutex_unlock(&ev->mu);
    }
    fn(arg, &ev->workers[0]);
    if (ev->n_started > 0) {
        pthread_mutex_lock(&ev->mu);
        while (ev->pending > 0) pthread_cond_wait(&ev->cv_done, &ev->mu);
        pthread_mutex_unlock(&ev->mu);
    }
}

pl_status policy_eval_nodes(const policy_problem *pb, policy_worker *w, const int *node_dev, policy_eval *out) {
    pl_status st = sim_run(w->ctx, node_dev, &pb->sched, pb->caps, &pb->prm, w->res);
    if (st != PL_OK) return st;
    const sim_result *r = w->res;
    int64_t peak = 0;
    for (int d = 0; d < pb->p->n_devices; d++)
        if (r->peak_bytes[d] > peak) peak = r->peak_bytes[d];
    out->step_us = r->step_us;
    out->oom = r->oom ? 1 : 0;
    out->cost_us = out->oom ? pb->oom_penalty_us : r->step_us;
    out->peak_bytes = peak;
    out->devices_used = placement_devices_used(node_dev, pb->g->n_nodes);
    return PL_OK;
}

pl_status policy_eval_unit(const policy_problem *pb, policy_worker *w, const int *unit_dev, policy_eval *out) {
    grouping_expand(pb->gr, unit_dev, w->node_dev);
    return policy_eval_nodes(pb, w, w->node_dev, out);
}

typedef struct {
    const policy_problem *pb;
    const int *rows;      /* placements */
    int row_len;          /* units or nodes per row */
    int nodes;            /* 1: rows are node placements */
    int n;                /* rows */
    policy_eval *out;     /* n results */
    pl_status *status;    /* n statuses */
    atomic_int next;      /* next row to take */
} batch_job;

static void batch_worker(void *arg, policy_worker *w) {
    batch_job *j = arg;
    for (;;) {
        int i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n) break;
        const int *row = j->rows + (size_t)i * j->row_len;
        j->status[i] = j->nodes ? policy_eval_nodes(j->pb, w, row, &j->out[i])
                                : policy_eval_unit(j->pb, w, row, &j->out[i]);
    }
}

static pl_status evaluate_rows(policy_evaluator *ev, const int *rows, int row_len, int nodes, int n,
                               policy_eval *out) {
    if (n <= 0) return PL_OK;
    pl_status stack_status[64];
    pl_status *status = n <= 64 ? stack_status : malloc(sizeof *status * (size_t)n);
    if (!status) return PL_ERR_NOMEM;
    batch_job j = {&ev->pb, rows, row_len, nodes, n, out, status, 0};
    atomic_init(&j.next, 0);
    if (n == 1 || ev->n_started == 0) batch_worker(&j, &ev->workers[0]);
    else policy_evaluator_run_all(ev, batch_worker, &j);
    pl_status st = PL_OK;
    for (int i = 0; i < n && st == PL_OK; i++) st = status[i];
    if (status != stack_status) free(status);
    return st;
}

pl_status policy_evaluate(policy_evaluator *ev, const int *unit_dev, int n, policy_eval *out) {
    return evaluate_rows(ev, unit_dev, ev->pb.gr->n_groups, 0, n, out);
}

pl_status policy_evaluate_nodes(policy_evaluator *ev, const int *node_dev, int n, policy_eval *out) {
    return evaluate_rows(ev, node_dev, ev->pb.g->n_nodes, 1, n, out);
}
