/*
 * timer.h: one interface for "run this placement and time it", so that the
 * confirmation protocol and the calibration run unchanged on
 *   - the real CUDA engine (hw_timer.c),
 *   - the engine's CPU reference backend on virtual devices (hw_timer.c),
 *   - a synthetic timer built on the simulator with known "true" parameters
 *     and seeded multiplicative noise (calib_sim_timer in timer.c), which lets CI check the
 *     protocol and the fit against a known answer,
 *   - a table of known times (calib_table_timer in timer.c), for logic tests that must not
 *     depend on the simulator.
 *
 * A timer is a value: a function pointer and the object it acts on. Timers
 * keep no hidden global state; a noisy timer owns its seeded generator.
 */
#ifndef PLACER_CALIB_TIMER_H
#define PLACER_CALIB_TIMER_H

#include <stdint.h>

#include "graph.h"
#include "profile_data.h"
#include "schedule.h"
#include "sim.h"
#include "status.h"

typedef struct {
    /* Run `warmup` untimed steps of node_placement (one device per graph
     * node) under schedule s with a per-device byte cap mem_cap (0 = none),
     * then `steps` timed steps, writing each step's time in microseconds to
     * step_us_out[0..steps). *peak_bytes_max gets the largest per-device
     * peak seen. When the placement does not fit the cap, *oom = 1, the step
     * times are NaN and the call still returns PL_OK: an OOM is an outcome.
     * Any other failure is a status with a message in msg. */
    pl_status (*time_placement)(void *self, const int *node_placement, const schedule *s,
                                int64_t mem_cap, int warmup, int steps, double *step_us_out,
                                int64_t *peak_bytes_max, int *oom, char *msg, size_t len);
    void *self;        /* the timer object, owned by whoever created it */
    const char *name;  /* "cuda", "cpu", "sim-synthetic", "table"; static */
} calib_timer;

/* Call t's function: a shorthand that also checks its arguments.
 * PL_ERR_INVALID for steps < 1, warmup < 0 or NULL pointers. */
pl_status calib_timer_run(const calib_timer *t, const int *node_placement, const schedule *s,
                          int64_t mem_cap, int warmup, int steps, double *step_us_out,
                          int64_t *peak_bytes_max, int *oom, char *msg, size_t len);

/* ---- synthetic timer: the simulator with "true" parameters plus noise ---- */

typedef struct calib_sim_timer calib_sim_timer;

/* A timer whose step time is sim_run(placement, s, caps = mem_cap on every
 * device, params = *truth) multiplied, per timed step, by
 * exp(noise_sd * N(0,1)) from a generator seeded with seed. Warm-up steps
 * draw nothing. The peak is the simulator's largest per-device peak and the
 * OOM verdict the simulator's. g and p are borrowed and must outlive the
 * timer; truth is copied (NULL = neutral). max_micro_batches bounds the
 * schedules it accepts. On success *out owns the object
 * (calib_sim_timer_destroy) and *timer is ready to use. */
pl_status calib_sim_timer_create(const graph *g, const profile_data *p, const sim_params *truth,
                                 double noise_sd, uint64_t seed, int max_micro_batches,
                                 calib_sim_timer **out, calib_timer *timer);

/* Number of timing calls made so far (warm-ups not counted separately). */
int calib_sim_timer_calls(const calib_sim_timer *t);

/* Free. Accepts NULL. */
void calib_sim_timer_destroy(calib_sim_timer *t);

/* ---- table timer: known times per placement, for protocol logic tests ---- */

typedef struct calib_table_timer calib_table_timer;

/* A timer that knows n placements (each n_nodes ints, copied from
 * placements[i * n_nodes ...]) with a true step time true_us[i] (NaN or
 * negative = OOM) and answers true_us[i] * exp(noise_sd * N(0,1)) per timed
 * step, seeded with seed. The peak is 1000 bytes times (i + 1), so tests can
 * tell which entry answered. A placement it does not know is PL_ERR_INVALID.
 * On success *out owns the object and *timer is ready to use. */
pl_status calib_table_timer_create(int n, int n_nodes, const int *placements, const double *true_us,
                                   double noise_sd, uint64_t seed, calib_table_timer **out,
                                   calib_timer *timer);

/* Number of timing calls made for entry i so far. */
int calib_table_timer_calls(const calib_table_timer *t, int i);

/* Free. Accepts NULL. */
void calib_table_timer_destroy(calib_table_timer *t);

#endif
