/*
 * calib_db.h: what calibration and confirmation keep in the profile store.
 *
 * Raw timings go to the store's own measurement table (purposes
 * "calibrate", "confirm-select", "confirm"). On top of them calib owns
 * three tables, created on first write (CREATE TABLE IF NOT EXISTS, so
 * older files gain them without a schema bump):
 *
 *   calib_confirm(id, label, run_id, graph_key, micro_batches, schedule,
 *                 mem_cap, selection_rounds, confirm_rounds, steps, warmup,
 *                 seed, timer, created_at)
 *   calib_confirm_side(confirm_id, side_idx, side, candidate, placement,
 *                 n_candidates, n_oom, n, mean_us, sd_us, se_us, pred_us,
 *                 pred_peak, peak_bytes, rounds)          one row per side
 *   calib_fit(id, graph_key, timer, created_at, seed, holdout, n_train,
 *                 n_test, iterations, chisq0, chisq, before_*, after_*,
 *                 train_before_mape, train_after_mape, params, errors)
 *   calib_fit_point(fit_id, measurement_id, split, placement, micro_batches,
 *                 schedule, measured_us, pred_before_us, pred_after_us,
 *                 measured_peak, pred_peak)
 *   calib_trace(confirm_id, side, placement, json, created_at)
 *                 a measured Chrome trace of one step of a confirmation's
 *                 winner, recorded on the hardware so that the report (run
 *                 anywhere) can write it out
 *
 * The report reads them back; every number it prints comes from here.
 */
#ifndef PLACER_CALIB_DB_H
#define PLACER_CALIB_DB_H

#include <stdint.h>

#include "confirm.h"
#include "fit.h"
#include "graph.h"
#include "sim.h"
#include "status.h"
#include "store.h"

/* The graph and profile a command works on. */
typedef struct {
    gpt_config cfg;                  /* the stored config */
    graph *g;                        /* owned */
    profile_data *p;                 /* owned */
    char key[PROFILE_NAME_LEN];      /* gpt_config_key(cfg) */
} calib_model;

/* Load the profile of config text `config` ("default", "tiny,batch=8"...;
 * NULL = the file's only or most recent graph) and build its graph. On
 * failure nothing is left allocated in m. */
pl_status calib_model_load(profile_db *db, const char *config, calib_model *m, char *msg, size_t len);

/* Free what calib_model_load allocated. Accepts NULL and a zeroed model. */
void calib_model_free(calib_model *m);

/* Parse a comma-separated list of non-negative integers ("0,1", "0,0,0,0")
 * into out (at most max entries); *n gets the count. PL_ERR_INVALID with a
 * message on junk, an empty field or too many entries. */
pl_status calib_parse_int_list(const char *text, int *out, int max, int *n, char *msg, size_t len);

/* Create calib's tables when missing. Needs a writable handle. */
pl_status calib_db_ensure(profile_db *db, char *msg, size_t len);

/* Neutral parameters overwritten by those stored for graph_key (when any);
 * *found (may be NULL) gets how many were stored (0 = never calibrated). */
pl_status calib_db_load_params(profile_db *db, const char *graph_key, sim_params *prm, int *found, char *msg,
                               size_t len);

/* Store prm for graph_key under the names of sim_param_name, replacing the
 * stored set; label says where they came from. */
pl_status calib_db_save_params(profile_db *db, const char *graph_key, const sim_params *prm, const char *label,
                               char *msg, size_t len);

/* Append to d every stored measurement with the given purpose (NULL = all)
 * for graph_key whose placement parses for d->n_nodes nodes over n_devices,
 * and whose schedule is known. *skipped (may be NULL) counts rows that did
 * not fit (other graph, bad text). */
pl_status calib_db_load_dataset(profile_db *db, const char *graph_key, const char *purpose, int n_devices,
                                calib_dataset *d, int *skipped, char *msg, size_t len);

/* Store the summary of a finished confirmation; *id (may be NULL) gets the
 * calib_confirm row id. One transaction. */
pl_status calib_db_save_confirm(profile_db *db, const calib_confirm *c, const calib_confirm_config *cfg,
                                const char *timer_name, int64_t *id, char *msg, size_t len);

/* Store a measured Chrome trace (JSON text) of the winner of confirmation
 * confirm_id. */
pl_status calib_db_save_trace(profile_db *db, int64_t confirm_id, const char *side, const char *placement,
                              const char *json, char *msg, size_t len);

/* A calibration as stored. */
typedef struct {
    const char *graph_key;
    const char *timer;       /* where the timings came from */
    uint64_t seed;           /* split seed */
    double holdout;          /* held-out fraction */
    const calib_fit_result *fit;
    calib_eval test_before, test_after;   /* held-out accuracy */
    calib_eval train_before, train_after; /* training accuracy */
    const sim_params *before;             /* parameters the "before" figures used */
} calib_fit_record;

/* Store a calibration and its points: for each of the n entries idx[k]
 * of d, its split ("train"/"test" from is_test[k]) and predictions. *id
 * (may be NULL) gets the calib_fit row id. One transaction. */
pl_status calib_db_save_fit(profile_db *db, const calib_fit_record *r, const calib_dataset *d, const int *idx,
                            const int *is_test, const double *pred_before, const double *pred_after,
                            const int64_t *pred_peak, int n, int64_t *id, char *msg, size_t len);

#endif
