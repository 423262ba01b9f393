/*
 * store.h: the profile store, one SQLite file per machine.
 *
 * Tables (schema version PROFILE_DB_SCHEMA_VERSION, in table meta):
 *   meta(key, value)                     schema version, creator
 *   machine(id, name, source, created_at, host, driver, cuda, topology)
 *   device(machine_id, idx, name, mem_bytes, peak_flops, mem_bw, launch_us, sm_count)
 *   link(machine_id, src, dst, latency_us, bandwidth, kind)
 *   link_point(machine_id, src, dst, bytes, us, spread_us)
 *   graph(id, key, vocab, d_model, heads, layers, seq, batch, n_nodes, params)
 *   node(graph_id, idx, name, kind, params, out_bytes_per_sample, act_bytes_per_sample, workspace_bytes)
 *   node_cost(machine_id, graph_id, device, node, phase, mb_size, us, spread_us, measured_at)
 *   step_anchor(machine_id, graph_id, device, mb_size, us)           whole single-device steps
 *   measurement(id, machine_id, graph_id, placement, micro_batches, schedule,
 *               mem_cap, step_us, spread_us, peak_bytes, oom, purpose, measured_at, ...)
 *   sim_params(machine_id, graph_id, name, value, label, fitted_at)
 *   run(id, method, args, created_at, finished)  and  run_sample(run_id, update, sample, ...)
 *   checkpoint(run_id, update, blob)
 *
 * Every write runs in a transaction; WAL mode. Opening a file that is
 * missing (without CREATE), not SQLite, or from a newer schema fails with a
 * clear message and changes nothing.
 */
#ifndef PLACER_PROFILE_STORE_H
#define PLACER_PROFILE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "profile_data.h"
#include "status.h"

#define PROFILE_DB_SCHEMA_VERSION 1

typedef struct profile_db profile_db;

typedef enum {
    PROFILE_DB_READ = 0,   /* read-only; the file must exist */
    PROFILE_DB_WRITE = 1,  /* read-write; the file must exist */
    PROFILE_DB_CREATE = 2, /* read-write; created (with schema) when missing */
} profile_db_mode;

/* Open path. On success *out owns the handle (profile_db_close). Errors:
 * PL_ERR_NOT_FOUND (missing file, not CREATE), PL_ERR_NOT_SQLITE,
 * PL_ERR_SCHEMA_NEWER, PL_ERR_DB; msg names the file and the fix. An older
 * schema is migrated (in a transaction) when mode allows writing. */
pl_status profile_db_open(const char *path, profile_db_mode mode, profile_db **out, char *msg, size_t len);

/* Close. Accepts NULL. */
void profile_db_close(profile_db *db);

/* Explicit transactions for callers that group several writes. Writes made
 * outside one run in their own transaction. */
pl_status profile_db_begin(profile_db *db);
pl_status profile_db_commit(profile_db *db);
pl_status profile_db_rollback(profile_db *db);

/* Write a whole profile (machine, devices, links and curves, graph, nodes and
 * costs) for cfg, replacing any rows for the same machine name and graph key,
 * in one transaction. */
pl_status profile_db_save_profile(profile_db *db, const gpt_config *cfg, const profile_data *p, char *msg,
                                  size_t len);

/* Load the profile for graph key of cfg (or, when cfg is NULL, the only or
 * most recent graph in the file) into a new profile_data (*out, caller frees)
 * and its config into *cfg_out (may be NULL). PL_ERR_NOT_FOUND with a message
 * listing the graphs the file holds when there is no profile for cfg. */
pl_status profile_db_load_profile(profile_db *db, const gpt_config *cfg, profile_data **out,
                                  gpt_config *cfg_out, char *msg, size_t len);

/* Simulator parameters (by name) fitted for the stored machine and graph.
 * save replaces; load fills vals[i] for names[i] found and sets *found to how
 * many were stored (0 when never calibrated). */
pl_status profile_db_save_sim_params(profile_db *db, const char *graph_key, int n, const char *const *names,
                                     const double *vals, const char *label);
pl_status profile_db_load_sim_params(profile_db *db, const char *graph_key, int n, const char *const *names,
                                     double *vals, int *found);

/* Placer runs: one row per run, one per sampled placement. */
pl_status profile_db_run_create(profile_db *db, const char *method, const char *args, int64_t *run_id);
pl_status profile_db_run_add_sample(profile_db *db, int64_t run_id, int update, int sample,
                                    const char *placement, double step_us, int64_t peak_bytes, int oom);
pl_status profile_db_run_finish(profile_db *db, int64_t run_id);

/* Hardware measurement of a whole placement. */
typedef struct {
    const char *graph_key;  /* gpt_config_key */
    const char *placement;  /* node placement text */
    int micro_batches;      /* m */
    const char *schedule;   /* "gpipe", "1f1b", ... */
    int64_t mem_cap;        /* bytes, 0 = none */
    double step_us;         /* median step time (NAN when OOM) */
    double spread_us;       /* spread of the timed steps (IQR or sd) */
    int64_t peak_bytes_max; /* largest per-device peak */
    int oom;                /* 1 when the engine ran out of its cap */
    const char *purpose;    /* "calibrate", "confirm-select", "confirm", ... */
    const char *extra;      /* free-form JSON, may be NULL */
} profile_measurement;

pl_status profile_db_add_measurement(profile_db *db, const profile_measurement *m, int64_t *id);

/* The underlying SQLite handle, for modules that own their own tables
 * (checkpoints, calibration). Borrowed. */
struct sqlite3 *profile_db_handle(profile_db *db);

#endif
