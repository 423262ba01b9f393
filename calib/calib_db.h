/*
 * calib_db.h: what calibration and confirmation keep in the profile store.
 *
 * Raw timings go to the store's own measurement table (purposes
 * "calibrate", "confirm-select", "confirm"), fitted parameters to its
 * sim_params table. Confirmations (with their sides and a measured trace of
 * the winner) and calibrations (with the placements they used) go to five
 * tables of their own, which profile/store_calib.h describes and writes:
 * this file turns calib's objects into the store's rows, and back.
 *
 * The report reads them back; every number it prints comes from there.
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
 * calib_confirm row id. One transaction; the tables are created when
 * missing. PL_ERR_INVALID for a missing argument or a READ handle,
 * PL_ERR_NOMEM, PL_ERR_DB; msg says which. */
pl_status calib_db_save_confirm(profile_db *db, const calib_confirm *c, const calib_confirm_config *cfg,
                                const char *timer_name, int64_t *id, char *msg, size_t len);

/* Store a measured Chrome trace (JSON text) of the winner of confirmation
 * confirm_id. Errors as calib_db_save_confirm. */
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
 * (may be NULL) gets the calib_fit row id. One transaction; errors as
 * calib_db_save_confirm. */
pl_status calib_db_save_fit(profile_db *db, const calib_fit_record *r, const calib_dataset *d, const int *idx,
                            const int *is_test, const double *pred_before, const double *pred_after,
                            const int64_t *pred_peak, int n, int64_t *id, char *msg, size_t len);

#endif
