/*
 * layout_runs.h: calibration of a framework profile (inputs/
 * framework_profile.h) from measured training runs (`placer calibrate
 * --layout-runs FILE`): the runs read from a documented CSV, each predicted
 * by the layout simulator (plan/layout_eval.h, the same call as placer
 * layout) under a profile, the profile's three constants fitted on half of
 * the runs, the other half predicted: the held-out error report.
 *
 * The runs' CSV and its reader: inputs/layout_runs_file.h.
 *
 * The fit: per framework, starting from a base profile (its memory
 * conventions), gemm_scale and memory_scale by nonlinear least squares on
 * the relative step-time errors of the fit rows (GSL multifit_nlinear,
 * over their logarithms so they stay positive), and act_scale by linear
 * least squares on the relative peak-memory errors (memory is linear in
 * it). A constant the fit rows cannot inform (no memory column: act_scale)
 * keeps the base's value.
 */
#ifndef PLACER_CALIB_LAYOUT_RUNS_H
#define PLACER_CALIB_LAYOUT_RUNS_H

#include <stddef.h>
#include <stdint.h>

#include "framework.h"
#include "layout_runs_file.h"
#include "status.h"

/* Predict one run under profile f: step time and peak allocated bytes
 * (and reserved). PL_ERR_INVALID with one line naming the run when its
 * model, cluster or layout is bad. */
pl_status layout_run_predict(const layout_run *r, const framework_profile *f, double *step_us, double *peak_bytes,
                             double *reserved_bytes, char *msg, size_t len);

typedef struct {
    double step_us, peak_bytes;       /* predicted */
    double step_err, peak_err;        /* (predicted - measured) / measured; peak_err NAN: no measurement */
    int fit;                          /* 1: a fit row, 0: held out */
} layout_run_result;

typedef struct {
    framework_profile fitted;         /* the base with the fitted constants */
    double k_sd[FW_K_COUNT];          /* covariance-scaled standard errors (0: not fitted) */
    int fitted_k[FW_K_COUNT];         /* 1: fitted here, 0: kept from the base */
    int n_fit, n_test;
    double step_mae[2], step_max[2];  /* [0] fit rows, [1] held-out rows: mean / max |relative error| */
    double mem_mae[2], mem_max[2];    /* the same for peak memory (rows with a measurement) */
    int n_mem[2];
    int *index;                       /* [n_fit + n_test] the runs of this framework, in file order */
    layout_run_result *rows;          /* [n_fit + n_test] */
} layout_fit_result;

/* Fit the profile for the runs whose framework column is `framework`
 * (NULL: every run, which must all name one framework), starting from
 * *base (its name is replaced by `framework`). Needs at least 2 fit rows
 * with step times. out->rows / index are heap (layout_fit_free). */
pl_status layout_runs_fit(const layout_run *runs, int n_runs, const char *framework, const framework_profile *base,
                          layout_fit_result *out, char *msg, size_t len);
void layout_fit_free(layout_fit_result *r);

#endif
