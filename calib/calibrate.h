/*
 * calibrate.h: one calibration, start to finish: measure a designed set of
 * placements with a timer (or take the measurements already stored), split
 * them into fitted and held-out placements, fit the simulator's parameters
 * on the first, measure its accuracy on the second before and after, and
 * store the parameters (so every later simulation uses them) and the
 * figures (so the report can show them).
 */
#ifndef PLACER_CALIB_CALIBRATE_H
#define PLACER_CALIB_CALIBRATE_H

#include <stdint.h>

#include "calib_db.h"
#include "fit.h"
#include "status.h"
#include "store.h"
#include "timer.h"

typedef struct {
    int count;                /* placements to measure (default 60) */
    uint64_t seed;            /* design and split (default 1) */
    double holdout;           /* held-out fraction (default 0.3) */
    int steps, warmup;        /* per timing (defaults 10, 2) */
    int from_measurements;    /* 1: time nothing, fit the stored measurements */
    const char *purpose;      /* measurements' purpose (default "calibrate") */
    const char *timer_name;   /* stored with the fit (default: the timer's name) */
    int save;                 /* 1 (default): store the parameters and the fit */
    calib_fit_options fit;    /* what to fit */
    void (*progress)(void *ctx, int done, int total); /* may be NULL */
    void *progress_ctx;
} calib_calibrate_options;

void calib_calibrate_options_default(calib_calibrate_options *o);

typedef struct {
    int n_measured;           /* timings made now */
    int n_data;               /* measurements used (made now or loaded) */
    int n_skipped;            /* stored rows that did not fit this graph */
    int n_oom;                /* measurements that ran out of memory */
    int n_train, n_test;      /* the split */
    sim_params before;        /* the neutral starting point */
    calib_fit_result fit;     /* the fit */
    calib_eval train_before, train_after, test_before, test_after;
    int64_t fit_id;           /* calib_fit row id, 0 when not saved */
} calib_calibrate_result;

/* Run a calibration on model m (see the file comment). t may be NULL when
 * o->from_measurements. With a timer, every timing is stored as a
 * measurement (purpose o->purpose) as soon as it is made. PL_ERR_INVALID
 * when there are too few usable measurements to fit. */
pl_status calib_calibrate(profile_db *db, const calib_model *m, const calib_timer *t,
                          const calib_calibrate_options *o, calib_calibrate_result *r, char *msg, size_t len);

#endif
