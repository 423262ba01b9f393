/*
 * store_calib.h: the calibration and confirmation tables of the profile
 * store, as typed rows.
 *
 * calib/ keeps its raw timings in the store's measurement table (store.h:
 * purposes "calibrate", "confirm-select", "confirm") and its fitted
 * parameters in sim_params; on top of those it keeps five tables, created
 * on a file's first calibration write (CREATE TABLE IF NOT EXISTS, so older
 * files gain them without a schema bump, and files that never saw a
 * calibration stay as they were):
 *
 *   calib_confirm(id, label, run_id, graph_key, micro_batches, schedule,
 *                 mem_cap, selection_rounds, confirm_rounds, steps, warmup,
 *                 seed, timer, created_at)       one head-to-head confirmation
 *   calib_confirm_side(confirm_id, side_idx, side, candidate, placement,
 *                 n_candidates, n_oom, n, mean_us, sd_us, se_us, pred_us,
 *                 pred_peak, peak_bytes, rounds)          one row per side
 *   calib_fit(id, graph_key, timer, created_at, seed, holdout, n_train,
 *                 n_test, iterations, chisq0, chisq, before_*, after_*,
 *                 train_before_mape, train_after_mape, params, errors,
 *                 before_params)                  one simulator calibration
 *   calib_fit_point(fit_id, measurement_id, split, placement, micro_batches,
 *                 schedule, measured_us, pred_before_us, pred_after_us,
 *                 measured_peak, pred_peak)       one row per placement used
 *   calib_trace(confirm_id, side, placement, json, created_at)
 *                 a measured Chrome trace of one step of a confirmation's
 *                 winner, recorded on the hardware so that the report (run
 *                 anywhere) can write it out
 *
 * The rows here are plain data (text, numbers): calib/calib_db.c turns its
 * own objects into them, and calib/report.c reads them back. Every write is
 * one transaction (its own, or a savepoint inside the caller's explicit
 * profile_db_begin); statements are prepared once per handle. A real number
 * that is not finite is stored as NULL and read back as NaN. On failure
 * the detail is in profile_db_last_error.
 *
 * Reading a file that has none of these tables is not an error: it holds
 * no calibration, and the readers report nothing (no callback, no trace).
 */
#ifndef PLACER_PROFILE_STORE_CALIB_H
#define PLACER_PROFILE_STORE_CALIB_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "store.h"

/* One confirmation (calib_confirm). */
typedef struct {
    int64_t id;                /* row id; read back only (ignored by save) */
    const char *label;         /* the setting's label; NULL is stored as "" */
    int64_t run_id;            /* the run whose shortlist it confirmed; 0: none (NULL) */
    const char *graph_key;     /* gpt_config_key; required */
    int micro_batches;         /* m */
    const char *schedule;      /* order name ("gpipe", "1f1b", ...); required */
    int64_t mem_cap;           /* per-device cap in bytes, 0 = none */
    int selection_rounds;      /* rounds over every candidate */
    int confirm_rounds;        /* rounds over the picks */
    int steps;                 /* timed steps a round */
    int warmup;                /* warm-up steps a round */
    uint64_t seed;             /* shuffle seed, stored as its 64-bit pattern */
    const char *timer;         /* where the timings came from; NULL is stored as "" */
    const char *created_at;    /* ISO-8601 UTC; read back only */
} profile_calib_confirm;

/* One side of a confirmation (calib_confirm_side). */
typedef struct {
    const char *side;          /* "single", "human", "rl", ...; required */
    const char *candidate;     /* the side's pick; NULL when it has none, and then
                                  placement, pred_us, pred_peak and peak_bytes are
                                  stored as NULL (read back: NULL, NaN, 0, 0) */
    const char *placement;     /* the pick's placement text */
    int n_candidates;          /* candidates the side brought */
    int n_oom;                 /* of them, out of memory */
    int n;                     /* confirmation rounds timed */
    double mean_us, sd_us, se_us; /* over those rounds */
    double pred_us;            /* the simulator's step for the pick */
    int64_t pred_peak;         /* the simulator's peak for the pick */
    int64_t peak_bytes;        /* the measured peak */
    const char *rounds;        /* JSON array of the rounds' times; NULL stored as NULL */
} profile_calib_side;

/* Held-out or training accuracy of one parameter set. */
typedef struct {
    double mape, max_ape, tau, mem_mape, mem_max_ape;
} profile_calib_accuracy;

/* One calibration (calib_fit). */
typedef struct {
    int64_t id;                /* row id; read back only */
    const char *graph_key;     /* required */
    const char *timer;         /* NULL is stored as "" */
    const char *created_at;    /* ISO-8601 UTC; read back only */
    uint64_t seed;             /* split seed, stored as its 64-bit pattern */
    double holdout;            /* held-out fraction */
    int n_train, n_test;       /* placements fitted on / held out */
    int iterations;            /* trust-region iterations */
    double chisq0, chisq;      /* before / after */
    profile_calib_accuracy before, after; /* held out, neutral / fitted parameters */
    double train_before_mape, train_after_mape;
    const char *params;        /* JSON object of the fitted parameters; required */
    const char *errors;        /* JSON object of their 1-sigma errors; required */
    const char *before_params; /* JSON object of the starting point; required */
} profile_calib_fit;

/* One placement a calibration used (calib_fit_point). */
typedef struct {
    int64_t measurement_id;    /* the measurement row it came from; 0: none (NULL) */
    const char *split;         /* "train" or "test"; required */
    const char *placement;     /* placement text; required */
    int micro_batches;
    const char *schedule;      /* order name; required */
    double measured_us, pred_before_us, pred_after_us;
    int64_t measured_peak, pred_peak;
} profile_calib_fit_point;

/* Store confirmation c with its n_sides sides (side_idx 0..n_sides-1) in one
 * transaction, creating the tables when missing; *id (may be NULL) gets the
 * calib_confirm row id. PL_ERR_INVALID for a missing argument or required
 * field, or a READ handle; PL_ERR_DB when SQLite fails. */
pl_status profile_db_calib_save_confirm(profile_db *db, const profile_calib_confirm *c,
                                        const profile_calib_side *sides, int n_sides, int64_t *id);

/* Store a measured Chrome trace (JSON text) of the winner of confirmation
 * confirm_id, creating the tables when missing. Errors as above. */
pl_status profile_db_calib_save_trace(profile_db *db, int64_t confirm_id, const char *side,
                                      const char *placement, const char *json);

/* Store calibration f with its n points in one transaction, creating the
 * tables when missing; *id (may be NULL) gets the calib_fit row id. Errors
 * as above. */
pl_status profile_db_calib_save_fit(profile_db *db, const profile_calib_fit *f,
                                    const profile_calib_fit_point *points, int n, int64_t *id);

/* Callbacks for the readers: the row's strings are borrowed for the call
 * only. Return 0 to go on, non-zero to stop (the reader then returns PL_OK).
 * A callback may call the other readers on the same handle. */
typedef int (*profile_calib_confirm_cb)(void *ctx, const profile_calib_confirm *c);
typedef int (*profile_calib_side_cb)(void *ctx, const profile_calib_side *s);
typedef int (*profile_calib_fit_cb)(void *ctx, const profile_calib_fit *f);
typedef int (*profile_calib_fit_point_cb)(void *ctx, const profile_calib_fit_point *p);

/* Call cb for the latest confirmation of each label (the highest id), in
 * label order. PL_ERR_DB when SQLite fails. */
pl_status profile_db_calib_confirms(profile_db *db, profile_calib_confirm_cb cb, void *ctx);

/* Call cb for each side of confirmation confirm_id, in side_idx order. */
pl_status profile_db_calib_sides(profile_db *db, int64_t confirm_id, profile_calib_side_cb cb, void *ctx);

/* Call cb once with the most recent calibration (the highest id); not at
 * all when none is stored. */
pl_status profile_db_calib_last_fit(profile_db *db, profile_calib_fit_cb cb, void *ctx);

/* Call cb for each point of calibration fit_id, in the order stored. Of a
 * point read back, measurement_id and the peaks read 0 where NULL. */
pl_status profile_db_calib_fit_points(profile_db *db, int64_t fit_id, profile_calib_fit_point_cb cb, void *ctx);

/* The most recently stored trace of confirmation confirm_id into *json
 * (malloc'd, caller frees), or *json = NULL when none is stored. PL_ERR_NOMEM
 * or PL_ERR_DB (with *json NULL) on failure. */
pl_status profile_db_calib_trace(profile_db *db, int64_t confirm_id, char **json);

#endif
