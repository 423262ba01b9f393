/*
 * calibrate_run.h: `placer calibrate` as one library call on a file: open
 * the database read-only (so that a refused start leaves it as it was; an
 * older schema needs a write open), load the model, map profile devices to
 * GPUs, make the timer (the engine's CUDA or CPU backend in the profile's
 * precision, or the simulator with known parameters plus noise), refuse a
 * refit that would fail before anything is written, then reopen for writing
 * and calibrate (calibrate.h).
 */
#ifndef PLACER_CALIB_CALIBRATE_RUN_H
#define PLACER_CALIB_CALIBRATE_RUN_H

#include <stddef.h>

#include "calibrate.h"

typedef struct {
    const char *db_path;      /* the database (required; written unless a dry refit) */
    const char *devices;      /* "0,1": the GPU of each profile device; NULL: 0, 1, ... */
    const char *timer_kind;   /* "cuda", "cpu" or "synthetic"; ignored with o.from_measurements */
    const char *config;       /* graph config text; NULL: the file's only or latest graph */
    double noise;             /* synthetic timer: per-step log-normal noise sd */
    int graphs;               /* CUDA: replay steps as captured graphs */
    calib_calibrate_options o; /* what to measure and fit */
} calib_run_options;

typedef struct {
    calib_calibrate_result r;        /* the calibration */
    char key[PROFILE_NAME_LEN];      /* the graph calibrated */
    char timer[32];                  /* the timer's name ("" for a refit) */
    char precision[16];              /* the engine's precision ("" unless an engine timer ran) */
} calib_run_result;

/* Run the calibration o describes. PL_OK, or a status and one line in msg:
 * PL_ERR_INVALID for a --devices list of the wrong length or too few
 * measurements, PL_ERR_NO_DEVICE when no GPU can be used, others as the
 * store and the timer give them. */
pl_status calib_run(const calib_run_options *o, calib_run_result *out, char *msg, size_t len);

#endif
