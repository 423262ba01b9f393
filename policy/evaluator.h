/*
 * evaluator.h: the placement problem every placer solves, and the parallel
 * evaluation of placements against the simulator.
 *
 * A policy_problem fixes everything but the placement: graph, grouping,
 * profile, schedule, per-device memory caps, simulator parameters and the
 * OOM penalty. Baselines, searches and the RL placer all evaluate through
 * it, so their figures are comparable.
 *
 * The objective every placer minimises is the *cost*: the simulated step
 * time in microseconds, or, when the placement runs out of memory on some
 * device, the fixed OOM penalty (POLICY_OOM_PENALTY_US, 10 s by default).
 *
 * A policy_evaluator holds one simulator context per thread. The calling
 * thread is worker 0; n_threads - 1 more threads wait on a condition
 * variable between batches. Results go to out[i] by index, so they never
 * depend on which thread ran what.
 */
#ifndef PLACER_POLICY_EVALUATOR_H
#define PLACER_POLICY_EVALUATOR_H

#include <stdint.h>

#include "graph.h"
#include "grouping.h"
#include "profile_data.h"
#include "schedule.h"
#include "sim.h"
#include "status.h"

#define POLICY_OOM_PENALTY_US 10e6

typedef struct {
    const graph *g;                  /* borrowed */
    const grouping *gr;              /* borrowed: units are its groups */
    const profile_data *p;           /* borrowed */
    schedule sched;                  /* micro-batches and order */
    int64_t caps[SIM_MAX_DEVICES];   /* per-device byte caps */
    sim_params prm;                  /* simulator parameters */
    double oom_penalty_us;           /* cost of an OOM placement */
} policy_problem;

typedef struct {
    double step_us;     /* simulated step time (also given for OOM placements) */
    double cost_us;     /* step_us, or the OOM penalty when oom */
    int64_t peak_bytes; /* largest per-device peak */
    int oom;            /* 1 when some device exceeds its cap */
    int devices_used;   /* distinct devices in the placement */
} policy_eval;

/* Fill a problem: caps default to each device's memory (cap_bytes <= 0) or
 * the same cap on every device; prm NULL for neutral parameters; penalty
 * POLICY_OOM_PENALTY_US. Validates the schedule against the batch and the
 * profile against the graph (PL_ERR_SCHEDULE, PL_ERR_INVALID). */
pl_status policy_problem_init(policy_problem *pb, const graph *g, const grouping *gr, const profile_data *p,
                              const schedule *sched, int64_t cap_bytes, const sim_params *prm, char *msg,
                              size_t len);

/* Number of units (groups) and devices of the problem. */
static inline int policy_units(const policy_problem *pb) { return pb->gr->n_groups; }
static inline int policy_devices(const policy_problem *pb) { return pb->p->n_devices; }

typedef struct policy_evaluator policy_evaluator;

/* Per-thread state handed to policy_evaluator_run_all's function. */
typedef struct {
    int index;          /* 0 .. n_threads-1; 0 is the calling thread */
    sim_ctx *ctx;       /* this thread's simulator context */
    int *node_dev;      /* n_nodes scratch for expanded placements */
    sim_result *res;    /* scratch result */
} policy_worker;

/* Create an evaluator with n_threads >= 1 workers (0 means all online
 * cores). pb is copied; what it borrows must outlive the evaluator.
 * PL_ERR_NOMEM, PL_ERR_INVALID (from sim_ctx_create). */
pl_status policy_evaluator_create(const policy_problem *pb, int n_threads, policy_evaluator **out);
void policy_evaluator_destroy(policy_evaluator *ev);
int policy_evaluator_threads(const policy_evaluator *ev);
const policy_problem *policy_evaluator_problem(const policy_evaluator *ev);

/* Evaluate one unit placement (units entries) on worker w. Returns the
 * simulator's status (PL_ERR_PLACEMENT_RANGE for a bad index). */
pl_status policy_eval_unit(const policy_problem *pb, policy_worker *w, const int *unit_dev, policy_eval *out);

/* Evaluate one node placement (n_nodes entries) on worker w. */
pl_status policy_eval_nodes(const policy_problem *pb, policy_worker *w, const int *node_dev, policy_eval *out);

/* Evaluate n unit placements (row i at unit_dev + i * units) in parallel.
 * Returns the first failing status (by index), PL_OK otherwise. */
pl_status policy_evaluate(policy_evaluator *ev, const int *unit_dev, int n, policy_eval *out);

/* Evaluate n node placements (row i at node_dev + i * n_nodes) in parallel. */
pl_status policy_evaluate_nodes(policy_evaluator *ev, const int *node_dev, int n, policy_eval *out);

/* Run fn(arg, worker) once on every worker (the caller runs worker 0) and
 * wait for all. For searches that split their own work. */
void policy_evaluator_run_all(policy_evaluator *ev, void (*fn)(void *arg, policy_worker *w), void *arg);

/* Online CPU cores (>= 1). */
int policy_online_cores(void);

#endif
