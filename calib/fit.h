/*
 * fit.h: fitting the simulator's own parameters (sim_params) to hardware
 * timings of whole placements, and measuring how good the fit is on
 * placements it was not fitted on.
 *
 * The fit is nonlinear least squares (GSL gsl_multifit_nlinear, trust
 * region with Levenberg-Marquardt steps) on residuals in log space,
 *     r_i = log(sim_step_us(placement_i, params)) - log(measured_i),
 * so that a 5% error weighs the same on a 10 ms step and a 40 ms one. The
 * scale parameters are fitted as logarithms, the additive ones (overheads,
 * latency, contention) through a softplus so that they stay positive, and
 * the one the simulator lets be negative (sim_param_signed: the launch
 * overhead, which then removes the per-call cost of the profiler's timing
 * markers; the simulator clamps each duration at 0) as itself. The
 * Jacobian is by forward
 * differences (the simulator is piecewise linear in its parameters).
 * Parameters the data cannot move (a zero Jacobian column: for example the
 * transfer parameters when every placement sits on one device) are frozen
 * at their starting value and reported as such.
 *
 * Errors of the fitted parameters are the covariance-scaled ones:
 * sqrt(diag((J^T J)^-1) * chisq / (n - p)), mapped back to each parameter
 * through the derivative of its transform.
 */
#ifndef PLACER_CALIB_FIT_H
#define PLACER_CALIB_FIT_H

#include <stdint.h>

#include "graph.h"
#include "profile_data.h"
#include "schedule.h"
#include "sim.h"
#include "status.h"

/* Hardware timings of whole placements: the data calibration works on. */
typedef struct {
    int n_nodes;             /* placement length */
    int n, cap;              /* entries, allocated slots */
    int *placements;         /* n * n_nodes device indices */
    schedule *sched;         /* n schedules */
    int64_t *mem_cap;        /* n per-device caps (0 = none) */
    double *step_us;         /* n measured step times (NaN when OOM) */
    double *spread_us;       /* n spreads of the timed steps */
    int64_t *peak_bytes;     /* n measured largest per-device peaks (0 = unknown) */
    int *oom;                /* n OOM flags */
    int64_t *measurement_id; /* n store row ids (0 = not stored) */
} calib_dataset;

/* Empty dataset for placements of n_nodes. *out owns it. */
pl_status calib_dataset_create(int n_nodes, calib_dataset **out);
/* Free. Accepts NULL. */
void calib_dataset_destroy(calib_dataset *d);
/* Append one timing (placement copied). PL_ERR_NOMEM / PL_ERR_INVALID. */
pl_status calib_dataset_add(calib_dataset *d, const int *placement, const schedule *s, int64_t mem_cap,
                            double step_us, double spread_us, int64_t peak_bytes, int oom,
                            int64_t measurement_id);

/* Split the usable entries (not OOM, finite positive time) into a training
 * and a held-out set: a seeded shuffle, then the first round(holdout * n)
 * go to test (at least 1 each side when there are >= 2 entries). train and
 * test must each hold d->n ints. holdout in [0, 1). PL_ERR_INVALID when
 * fewer than 2 entries are usable and holdout > 0. */
pl_status calib_split(const calib_dataset *d, double holdout, uint64_t seed, int *train, int *n_train,
                      int *test, int *n_test);

typedef struct {
    int fit_mask[SIM_N_PARAMS]; /* 1 = fit this parameter, 0 = keep its starting value */
    int max_iter;               /* trust-region iterations (default 200) */
    double xtol, gtol, ftol;    /* GSL convergence tolerances (defaults 1e-10, 1e-10, 0) */
} calib_fit_options;

/* Fit every parameter (SIM_N_PARAMS), 200 iterations, tight tolerances. */
void calib_fit_options_default(calib_fit_options *o);

typedef enum { CALIB_PARAM_FROZEN = 0, CALIB_PARAM_FITTED = 1, CALIB_PARAM_UNIDENTIFIABLE = 2 } calib_param_state;

typedef struct {
    sim_params params;                 /* fitted values (start values where not fitted) */
    double err[SIM_N_PARAMS];          /* covariance-scaled 1-sigma errors; NaN where not fitted
                                          or where the data leave it undetermined */
    calib_param_state state[SIM_N_PARAMS]; /* what happened to each parameter */
    int n_points;                      /* residuals (training entries) */
    int n_fitted;                      /* parameters actually fitted */
    int iterations;                    /* trust-region iterations */
    int info;                          /* GSL stop reason: 1 small step, 2 small gradient */
    double chisq0, chisq;              /* sum of squared log residuals, before and after */
} calib_fit_result;

/* Fit sim_params on the entries idx[0..n_idx) of d against the simulator
 * for graph g and profile p, starting from *start (NULL = neutral).
 * Timings are predicted with no memory cap (an OOM verdict is not a time).
 * Calls gsl_set_error_handler_off(). Returns PL_ERR_INVALID when fewer
 * usable points than fitted parameters remain, or when GSL fails (message
 * with gsl_strerror); the result is fully written on PL_OK. */
pl_status calib_fit(const graph *g, const profile_data *p, const calib_dataset *d, const int *idx,
                    int n_idx, const sim_params *start, const calib_fit_options *opt, calib_fit_result *res,
                    char *msg, size_t len);

/* Accuracy of the simulator with params prm on entries idx[0..n_idx). */
typedef struct {
    int n;             /* entries with a usable time */
    double mape;       /* mean absolute percentage error of step time, % */
    double max_ape;    /* largest absolute percentage error, % */
    double tau;        /* Kendall's tau-b between predicted and measured times */
    int n_mem;         /* entries with a measured peak */
    double mem_mape;   /* mean absolute percentage error of the largest per-device peak, % */
    double mem_max_ape;/* largest such error, % */
} calib_eval;

/* Evaluate. pred_us and pred_peak (n_idx entries each, may be NULL) get the
 * predictions in idx order (NaN / 0 for unusable entries). */
pl_status calib_evaluate(const graph *g, const profile_data *p, const calib_dataset *d, const int *idx,
                         int n_idx, const sim_params *prm, calib_eval *ev, double *pred_us,
                         int64_t *pred_peak, char *msg, size_t len);

/* ---- the calibration design: which placements to measure ---- */

/* Generate `count` distinct (placement, schedule) pairs for graph g over
 * n_devices, seeded: single devices, contiguous splits at random cuts
 * (2 to 4 stages), even layer splits, random per-block and random per-node
 * placements, each with m drawn from {1, 2, 4} (those dividing the batch)
 * and the order from {gpipe, 1f1b}. Every device is used by some entry.
 * placements must hold count * g->n_nodes ints and sched count entries.
 * PL_ERR_INVALID when count < 1 or the space is too small to give count
 * distinct entries. */
pl_status calib_design(const graph *g, int n_devices, int count, uint64_t seed, int *placements,
                       schedule *sched, char *msg, size_t len);

#endif
