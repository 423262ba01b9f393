/*
 * timer.c: the timer shorthand and the two timers that need no hardware:
 * the simulator-backed synthetic timer and the table timer.
 */
#include "timer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

pl_status calib_timer_run(const calib_timer *t, const int *node_placement, const schedule *s,
                          int64_t mem_cap, int warmup, int steps, double *step_us_out,
                          int64_t *peak_bytes_max, int *oom, char *msg, size_t len) {
    if (!t || !t->time_placement || !node_placement || !s || !step_us_out || !peak_bytes_max || !oom)
        return pl_fail(msg, len, PL_ERR_INVALID, "timer called with a NULL argument");
    if (steps < 1 || warmup < 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "timer needs steps >= 1 and warmup >= 0 (got %d, %d)",
                       steps, warmup);
    if (mem_cap < 0) return pl_fail(msg, len, PL_ERR_INVALID, "negative memory cap");
    *oom = 0;
    *peak_bytes_max = 0;
    return t->time_placement(t->self, node_placement, s, mem_cap, warmup, steps, step_us_out,
                             peak_bytes_max, oom, msg, len);
}

/* ---- synthetic timer ---- */

struct calib_sim_timer {
    sim_ctx *ctx;          /* owned */
    sim_params truth;      /* the parameters playing "hardware" */
    double noise_sd;       /* sd of the log-normal step noise */
    pl_rng rng;            /* noise generator */
    int n_devices;         /* devices in the profile */
    int64_t caps[SIM_MAX_DEVICES]; /* scratch: mem_cap on every device */
    int calls;             /* timing calls so far */
};

static pl_status sim_timer_time(void *self, const int *placement, const schedule *s, int64_t mem_cap,
                                int warmup, int steps, double *out, int64_t *peak, int *oom, char *msg,
                                size_t len) {
    calib_sim_timer *t = self;
    (void)warmup;
    for (int d = 0; d < t->n_devices; d++) t->caps[d] = mem_cap;
    sim_result r;
    pl_status st = sim_run(t->ctx, placement, s, mem_cap > 0 ? t->caps : NULL, &t->truth, &r);
    if (st != PL_OK) return pl_fail(msg, len, st, "synthetic timer: simulation failed (%s)", pl_status_str(st));
    t->calls++;
    int64_t mx = 0;
    for (int d = 0; d < r.n_devices; d++)
        if (r.peak_bytes[d] > mx) mx = r.peak_bytes[d];
    *peak = mx;
    *oom = r.oom != 0;
    for (int i = 0; i < steps; i++)
        out[i] = r.oom ? NAN : r.step_us * exp(t->noise_sd * pl_rng_normal(&t->rng));
    return PL_OK;
}

pl_status calib_sim_timer_create(const graph *g, const profile_data *p, const sim_params *truth,
                                 double noise_sd, uint64_t seed, int max_micro_batches,
                                 calib_sim_timer **out, calib_timer *timer) {
    if (!g || !p || !out || !timer || noise_sd < 0 || max_micro_batches < 1) return PL_ERR_INVALID;
    if (p->n_devices > SIM_MAX_DEVICES) return PL_ERR_INVALID;
    *out = NULL;
    calib_sim_timer *t = calloc(1, sizeof *t);
    if (!t) return PL_ERR_NOMEM;
    pl_status st = sim_ctx_create(g, p, max_micro_batches, &t->ctx);
    if (st != PL_OK) {
        free(t);
        return st;
    }
    if (truth) t->truth = *truth;
    else sim_params_default(&t->truth);
    t->noise_sd = noise_sd;
    t->n_devices = p->n_devices;
    pl_rng_seed(&t->rng, seed);
    *out = t;
    timer->time_placement = sim_timer_time;
    timer->self = t;
    timer->name = "sim-synthetic";
    return PL_OK;
}

int calib_sim_timer_calls(const calib_sim_timer *t) { return t ? t->calls : 0; }

void calib_sim_timer_destroy(calib_sim_timer *t) {
    if (!t) return;
    sim_ctx_destroy(t->ctx);
    free(t);
}

/* ---- table timer ---- */

struct calib_table_timer {
    int n, n_nodes;     /* entries, ints per placement */
    int *placements;    /* n * n_nodes, owned */
    double *true_us;    /* n, owned; NaN or < 0 = OOM */
    int *calls;         /* n, owned */
    double noise_sd;    /* log-normal noise sd */
    pl_rng rng;         /* noise generator */
};

static pl_status table_timer_time(void *self, const int *placement, const schedule *s, int64_t mem_cap,
                                  int warmup, int steps, double *out, int64_t *peak, int *oom, char *msg,
                                  size_t len) {
    calib_table_timer *t = self;
    (void)s; (void)mem_cap; (void)warmup;
    for (int i = 0; i < t->n; i++) {
        if (memcmp(t->placements + (size_t)i * t->n_nodes, placement, sizeof(int) * (size_t)t->n_nodes))
            continue;
        t->calls[i]++;
        *peak = 1000 * (int64_t)(i + 1);
        double v = t->true_us[i];
        *oom = !(v >= 0);
        for (int k = 0; k < steps; k++) out[k] = *oom ? NAN : v * exp(t->noise_sd * pl_rng_normal(&t->rng));
        return PL_OK;
    }
    return pl_fail(msg, len, PL_ERR_INVALID, "table timer: unknown placement");
}

pl_status calib_table_timer_create(int n, int n_nodes, const int *placements, const double *true_us,
                                   double noise_sd, uint64_t seed, calib_table_timer **out,
                                   calib_timer *timer) {
    if (n < 1 || n_nodes < 1 || !placements || !true_us || !out || !timer || noise_sd < 0)
        return PL_ERR_INVALID;
    *out = NULL;
    calib_table_timer *t = calloc(1, sizeof *t);
    if (!t) return PL_ERR_NOMEM;
    t->placements = malloc(sizeof(int) * (size_t)n * (size_t)n_nodes);
    t->true_us = malloc(sizeof(double) * (size_t)n);
    t->calls = calloc((size_t)n, sizeof(int));
    if (!t->placements || !t->true_us || !t->calls) {
        calib_table_timer_destroy(t);
        return PL_ERR_NOMEM;
    }
    memcpy(t->placements, placements, sizeof(int) * (size_t)n * (size_t)n_nodes);
    memcpy(t->true_us, true_us, sizeof(double) * (size_t)n);
    t->n = n;
    t->n_nodes = n_nodes;
    t->noise_sd = noise_sd;
    pl_rng_seed(&t->rng, seed);
    *out = t;
    timer->time_placement = table_timer_time;
    timer->self = t;
    timer->name = "table";
    return PL_OK;
}

int calib_table_timer_calls(const calib_table_timer *t, int i) {
    return (t && i >= 0 && i < t->n) ? t->calls[i] : 0;
}

void calib_table_timer_destroy(calib_table_timer *t) {
    if (!t) return;
    free(t->placements);
    free(t->true_us);
    free(t->calls);
    free(t);
}
