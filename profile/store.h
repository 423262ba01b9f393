/*
 * store.h: the profile store, one SQLite file per machine.
 *
 * Tables (schema version PROFILE_DB_SCHEMA_VERSION, in table meta):
 *   meta(key, value)                     schema_version, creator
 *   machine(id, name, source, created_at, host, driver, cuda, topology)
 *   device(machine_id, idx, name, mem_bytes, peak_flops, mem_bw, launch_us, sm_count)
 *   link(machine_id, src, dst, latency_us, bandwidth, kind)
 *   link_point(machine_id, src, dst, bytes, us, spread_us)
 *   graph(id, key, vocab, d_model, heads, layers, seq, batch, n_nodes, params)
 *   node(graph_id, idx, name, kind, params, param_bytes, out_bytes_per_sample,
 *        act_bytes_per_sample, workspace_bytes, fwd_workspace_bytes,
 *        bwd_workspace_bytes; the last two 0 when one figure serves both calls)
 *   node_cost(machine_id, graph_id, device, node, phase, mb_size, us, spread_us, measured_at,
 *             b_us, w_us)
 *        phase is 'fwd', 'bwd' or 'opt'; 'opt' rows have mb_size 0; (schema 4)
 *        b_us and w_us: a 'bwd' row's input-gradient (B) and weight-gradient
 *        (W) parts, timed apart, NULL where not measured apart
 *   step_anchor(machine_id, graph_id, device, mb_size, us, spread_us, measured_at)
 *        whole single-device steps, for calibration
 *   measurement(id, machine_id, graph_key, placement, micro_batches, schedule,
 *               mem_cap, step_us, spread_us, peak_bytes, oom, purpose, measured_at, extra)
 *   sim_params(machine_id, graph_key, name, value, label, fitted_at)
 *   run(id, method, args, created_at, finished)
 *   run_sample(run_id, update_idx, sample, placement, step_us, peak_bytes, oom)
 *   checkpoint(run_id, update_idx, blob, saved_at)
 *   calib_confirm, calib_confirm_side, calib_fit, calib_fit_point, calib_trace
 *        calibration and confirmation (store_calib.h), created on a file's
 *        first calibration write, outside the versioned schema
 *   collective_point(machine_id, op, ranks, transport, bytes, us, spread_us, reps, measured_at)
 *        (schema 2) collective curves: op 'all_reduce', 'all_gather' or
 *        'reduce_scatter' over a group of `ranks` processes
 * A NaN time is stored as NULL and read back as NaN.
 *
 * A file holds one machine: writing a profile of another machine into it is
 * refused, so a measured file is never silently overwritten by a spec.
 *
 * Every write runs in a transaction (its own, or the caller's explicit one
 * from profile_db_begin); the journal is WAL. A killed writer therefore
 * leaves the file as of its last commit. Opening a file that is missing
 * (without CREATE), not SQLite, damaged, or from a newer schema fails with a
 * clear message and changes nothing: the file is checked by its header and
 * through a read-only connection before anything opens it for writing.
 *
 * A READ open of a WAL-mode file leaves (empty) -wal and -shm files next to
 * it, as SQLite needs them; the main file is not touched. Files meant to be
 * shipped or read from read-only media should be switched to a rollback
 * journal with profile_db_make_portable.
 *
 * A handle is for one thread at a time. Statements are prepared once per
 * handle and reused.
 */
#ifndef PLACER_PROFILE_STORE_H
#define PLACER_PROFILE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "profile_data.h"
#include "status.h"

#define PROFILE_DB_SCHEMA_VERSION 4
/* The oldest schema a READ open accepts: version 1 lacks only the
 * collective_point table of version 2, and reads as holding no collective
 * points; versions 1 and 2 lack the nodes' per-call workspace of version 3,
 * and read as one workspace for both calls; versions 1 to 3 lack the
 * backward's B and W parts of version 4, and read as not split (the
 * simulator derives the split). Older files must be opened for writing once
 * (migrated). */
#define PROFILE_DB_MIN_READ_VERSION 1

typedef struct profile_db profile_db;

typedef enum {
    PROFILE_DB_READ = 0,   /* read-only; the file must exist */
    PROFILE_DB_WRITE = 1,  /* read-write; the file must exist */
    PROFILE_DB_CREATE = 2, /* read-write; created (with schema) when missing */
} profile_db_mode;

/* Open path. On success *out owns the handle (profile_db_close). Errors:
 * PL_ERR_NOT_FOUND (missing file, not CREATE), PL_ERR_NOT_SQLITE (not an
 * SQLite file, damaged, truncated, or SQLite but not a profile database),
 * PL_ERR_SCHEMA_NEWER, PL_ERR_INVALID (an older schema opened READ: open it
 * once for writing to migrate), PL_ERR_DB; msg names the file and the fix.
 * On any error *out is NULL and the file is unchanged (a file CREATE made is
 * removed again). An older schema is migrated (in one transaction) when mode
 * allows writing. An existing empty (0-byte) file counts as missing for
 * CREATE and as not SQLite otherwise. */
pl_status profile_db_open(const char *path, profile_db_mode mode, profile_db **out, char *msg, size_t len);

/* Close. Accepts NULL. An open explicit transaction is rolled back. */
void profile_db_close(profile_db *db);

/* The detail of the last failure on db (for the functions that take no
 * message buffer), "" when none. Never NULL; valid until the next call. */
const char *profile_db_last_error(const profile_db *db);

/* The file's schema version as found when opened (before any migration). */
int profile_db_opened_version(const profile_db *db);

/* Explicit transactions for callers that group several writes. Writes made
 * outside one run in their own transaction. begin fails with PL_ERR_INVALID
 * when one is already open, or on a READ handle; commit and rollback fail
 * with PL_ERR_INVALID when none is open. */
pl_status profile_db_begin(profile_db *db);
pl_status profile_db_commit(profile_db *db);
pl_status profile_db_rollback(profile_db *db);

/* Switch the file from WAL to a rollback journal (after checkpointing), so
 * that it opens READ anywhere, also on read-only media, without -wal/-shm
 * files. The next write open switches it back to WAL. Fails with
 * PL_ERR_INVALID on a READ handle or inside a transaction, PL_ERR_DB when
 * another connection holds the file. */
pl_status profile_db_make_portable(profile_db *db, char *msg, size_t len);

/* Write a whole profile (machine, devices, links and curves, graph, nodes and
 * costs) for cfg, replacing any rows for the same machine name and graph key,
 * in one transaction. p->machine must be set; p->graph_key is ignored (the
 * key comes from cfg) and p->n_nodes must match cfg's graph. Link kinds
 * already stored are kept (set them with profile_db_put_link). PL_ERR_INVALID
 * when the file already holds a different machine. PHASE_OPT costs are taken
 * from micro-batch slot 0. Step anchors, measurements, sim_params and runs
 * are not touched. */
pl_status profile_db_save_profile(profile_db *db, const gpt_config *cfg, const profile_data *p, char *msg,
                                  size_t len);

/* Load the profile for graph key of cfg (or, when cfg is NULL, the only or
 * most recent graph in the file) into a new profile_data (*out, caller frees)
 * and its config into *cfg_out (may be NULL). PL_ERR_NOT_FOUND with a message
 * listing the graphs the file holds when there is no profile for cfg.
 * PL_ERR_INVALID when the stored profile is incomplete (a node cost or a
 * link missing, e.g. after an interrupted profiler run) or inconsistent.
 * The micro-batch sizes are the distinct sizes of the stored fwd/bwd costs;
 * PHASE_OPT costs are copied into every micro-batch slot. */
pl_status profile_db_load_profile(profile_db *db, const gpt_config *cfg, profile_data **out,
                                  gpt_config *cfg_out, char *msg, size_t len);

/* ---- listing ---------------------------------------------------------- */

typedef struct {
    char key[PROFILE_NAME_LEN]; /* gpt_config_key */
    gpt_config cfg;             /* the stored config */
    int n_nodes;                /* nodes of the graph */
    int64_t params;             /* total parameters */
    int64_t n_costs;            /* node_cost rows for the file's machine (0: no profile) */
} profile_db_graph_info;

/* All graphs stored in the file, most recent first. *out is a malloc'd array
 * of *n entries the caller frees with free() (NULL when *n is 0). */
pl_status profile_db_list_graphs(profile_db *db, profile_db_graph_info **out, int *n);

typedef struct {
    char name[PROFILE_NAME_LEN]; /* unique machine name */
    char source[16];             /* "spec" or "measured" */
    char created_at[32];         /* ISO-8601 UTC */
    char host[PROFILE_NAME_LEN]; /* "" when unknown */
    char driver[32];             /* "" when unknown */
    char cuda[32];               /* "" when unknown */
    char topology[256];          /* free text, "" when unknown */
} profile_db_machine_row;

/* The file's machine. PL_ERR_NOT_FOUND when no machine is stored yet. */
pl_status profile_db_machine(profile_db *db, profile_db_machine_row *out);

/* The precision the file's costs were measured in ("fp32", "tf32", "bf16";
 * hw.h), kept as the meta key 'precision'. A file without the key reads as
 * "tf32": the engine's default, in which every earlier profile was taken. */
pl_status profile_db_set_precision(profile_db *db, const char *precision);
pl_status profile_db_precision(profile_db *db, char *buf, size_t len);

/* The kind of link src -> dst ("nvlink", ...) into buf; "" when unknown.
 * PL_ERR_NOT_FOUND when no such link is stored. */
pl_status profile_db_link_kind(profile_db *db, int src, int dst, char *buf, size_t len);

/* ---- unit writes, for the resumable hardware profiler ------------------
 * Each call is its own transaction unless an explicit one is open, so a
 * profiler can commit one unit at a time and skip what already exists after
 * a restart. `machine` is the machine name; it must have been put first
 * (PL_ERR_NOT_FOUND otherwise); graph_key must name a graph put with
 * profile_db_put_graph (PL_ERR_NOT_FOUND otherwise). Details of failures are
 * in profile_db_last_error. */

typedef struct {
    const char *name;     /* unique machine name, e.g. "h200x2"; required */
    const char *source;   /* "spec" or "measured"; required */
    const char *host;     /* host name, may be NULL */
    const char *driver;   /* driver version, may be NULL */
    const char *cuda;     /* CUDA runtime version, may be NULL */
    const char *topology; /* free text (e.g. nvidia-smi topo summary), may be NULL */
} profile_machine_info;

/* Insert the machine, or update the stored row of the same name (NULL
 * fields keep their stored value). PL_ERR_INVALID when the file holds a
 * different machine or name/source are missing. */
pl_status profile_db_put_machine(profile_db *db, const profile_machine_info *m);

/* Insert or replace device idx (>= 0) of machine. */
pl_status profile_db_put_device(profile_db *db, const char *machine, int idx, const profile_device *d);

/* Insert or replace the link src -> dst (src != dst) of machine with its
 * fitted latency (us) and bandwidth (bytes/s). kind may be NULL (kept when
 * the link exists, else unknown). Its curve points are not touched. */
pl_status profile_db_put_link(profile_db *db, const char *machine, int src, int dst, double latency_us,
                              double bandwidth, const char *kind);

/* Insert or replace one point (bytes -> us, spread_us may be NaN) of the
 * curve src -> dst. The link row must exist (profile_db_put_link). */
pl_status profile_db_put_link_point(profile_db *db, const char *machine, int src, int dst, double bytes,
                                    double us, double spread_us);

/* Set *has to 1 when the point (src, dst, bytes) is stored, else 0. */
pl_status profile_db_has_link_point(profile_db *db, const char *machine, int src, int dst, double bytes,
                                    int *has);

/* Insert the graph of g (by gpt_config_key) and its nodes, or replace the
 * node rows of the stored graph of that key. mem (g->n_nodes entries) gives
 * each node's memory figures; NULL takes the graph's own and no workspace.
 * Costs stored for the graph are kept. */
pl_status profile_db_put_graph(profile_db *db, const graph *g, const profile_node_mem *mem);

/* Insert or replace the cost of node on device at micro-batch mb_size for
 * phase: us and spread_us (NaN allowed) in microseconds. For PHASE_OPT
 * mb_size is ignored (stored as 0). PL_ERR_INVALID for a negative index or
 * phase out of range, mb_size < 1 for fwd/bwd, or node >= the graph's nodes. */
pl_status profile_db_put_node_cost(profile_db *db, const char *machine, const char *graph_key, int device,
                                   int node, cost_phase phase, int mb_size, double us, double spread_us);

/* profile_db_put_node_cost of a backward (PHASE_BWD) cost with its two
 * parts timed apart: b_us the input gradient (B), w_us the weight gradient
 * (W), in microseconds; NaN for a node whose backward is one call (stored as
 * NULL, as profile_db_put_node_cost stores them). Errors as there. */
pl_status profile_db_put_bwd_cost(profile_db *db, const char *machine, const char *graph_key, int device,
                                  int node, int mb_size, double us, double spread_us, double b_us, double w_us);

/* Set *has to 1 when that cost is stored, else 0 (also when the machine or
 * graph is not stored yet: nothing is measured then). */
pl_status profile_db_has_node_cost(profile_db *db, const char *machine, const char *graph_key, int device,
                                   int node, cost_phase phase, int mb_size, int *has);

/* Insert or replace a whole single-device step time (us, spread_us) at
 * micro-batch size mb_size (one micro-batch per step). */
pl_status profile_db_put_step_anchor(profile_db *db, const char *machine, const char *graph_key,
                                     int device, int mb_size, double us, double spread_us);

/* Read a step anchor of the file's machine. PL_ERR_NOT_FOUND when absent.
 * spread_us may be NULL. */
pl_status profile_db_get_step_anchor(profile_db *db, const char *graph_key, int device, int mb_size,
                                     double *us, double *spread_us);

/* ---- simulator parameters ---------------------------------------------- */

/* Simulator parameters (by name) fitted for the stored machine and graph.
 * save replaces the whole set stored for the graph (PL_ERR_NOT_FOUND when no
 * machine is stored); load fills vals[i] for names[i] found (others are left
 * alone) and sets *found to how many were stored (0 when never calibrated). */
pl_status profile_db_save_sim_params(profile_db *db, const char *graph_key, int n, const char *const *names,
                                     const double *vals, const char *label);
pl_status profile_db_load_sim_params(profile_db *db, const char *graph_key, int n, const char *const *names,
                                     double *vals, int *found);

/* ---- placer runs -------------------------------------------------------- */

/* Placer runs: one row per run, one per sampled placement. run_create sets
 * *run_id; add_sample replaces a sample with the same (update, sample);
 * step_us may be NaN. PL_ERR_DB when run_id does not exist. */
pl_status profile_db_run_create(profile_db *db, const char *method, const char *args, int64_t *run_id);
pl_status profile_db_run_add_sample(profile_db *db, int64_t run_id, int update, int sample,
                                    const char *placement, double step_us, int64_t peak_bytes, int oom);
pl_status profile_db_run_finish(profile_db *db, int64_t run_id);

typedef struct {
    int update;            /* policy update (0-based) */
    int sample;            /* sample within the update */
    const char *placement; /* placement text; borrowed for the callback only */
    double step_us;        /* NaN when stored as NULL */
    int64_t peak_bytes;    /* largest per-device peak */
    int oom;               /* 1 when the placement ran out of memory */
} profile_run_sample;

/* Callback for reading rows back: return 0 to continue, non-zero to stop
 * (the reader then returns PL_OK). */
typedef int (*profile_run_sample_cb)(void *ctx, const profile_run_sample *s);

/* Call cb for each sample of run_id in (update, sample) order. PL_OK also
 * for a run with no samples; PL_ERR_NOT_FOUND when the run does not exist. */
pl_status profile_db_run_samples(profile_db *db, int64_t run_id, profile_run_sample_cb cb, void *ctx);

typedef struct {
    int64_t id;             /* run id */
    const char *method;     /* borrowed for the callback only */
    const char *args;       /* borrowed; may be "" */
    const char *created_at; /* borrowed; ISO-8601 UTC */
    int finished;           /* 1 after profile_db_run_finish */
    int64_t n_samples;      /* stored samples */
} profile_run_info;

typedef int (*profile_run_cb)(void *ctx, const profile_run_info *r);

/* Call cb for each run, oldest first. */
pl_status profile_db_runs(profile_db *db, profile_run_cb cb, void *ctx);

/* Save a policy checkpoint (n bytes, n may be 0) for (run_id, update),
 * replacing one stored for the same pair. PL_ERR_DB when the run does not
 * exist. */
pl_status profile_db_checkpoint_save(profile_db *db, int64_t run_id, int update, const void *blob, size_t n);

/* Load the checkpoint of (run_id, update), or with update < 0 the one of the
 * highest update. On success *blob is a malloc'd copy (caller frees; never
 * NULL, even for 0 bytes), *n its size and *update_out (may be NULL) its
 * update. PL_ERR_NOT_FOUND when there is none. */
pl_status profile_db_checkpoint_load(profile_db *db, int64_t run_id, int update, int *update_out, void **blob,
                                     size_t *n);

/* Delete the checkpoints of run_id saved at updates before `update` (a run
 * keeps only its latest). PL_OK also when there were none; PL_ERR_INVALID on
 * a READ handle; PL_ERR_DB when SQLite fails. */
pl_status profile_db_checkpoint_prune(profile_db *db, int64_t run_id, int update);

/* ---- hardware measurements of whole placements --------------------------- */

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

/* Store m against the file's machine; *id (may be NULL) gets its row id.
 * PL_ERR_NOT_FOUND when no machine is stored; PL_ERR_INVALID when
 * graph_key, placement, schedule or purpose is NULL. */
pl_status profile_db_add_measurement(profile_db *db, const profile_measurement *m, int64_t *id);

/* Callback for measurements: m's strings are borrowed for the call only
 * (extra may be NULL); measured_at is ISO-8601 UTC. Return non-zero to stop. */
typedef int (*profile_measurement_cb)(void *ctx, int64_t id, const profile_measurement *m,
                                      const char *measured_at);

/* Call cb for each measurement whose purpose equals purpose (all when NULL),
 * in insertion order. */
pl_status profile_db_measurements(profile_db *db, const char *purpose, profile_measurement_cb cb, void *ctx);

/* ---- collective curves (schema 2) ----------------------------------------
 * Points of collective curves measured over a process group of this
 * machine (profile/profiler.h: profiler_collectives). bytes is the buffer
 * size in nccl-tests' convention: the all-reduce buffer, the all-gather's
 * gathered output, the reduce-scatter's input (each rank ends with
 * bytes / ranks). us is the median over the timed repetitions of the
 * slowest rank's time, spread_us their interquartile range. transport says
 * which group carried it: "sockets" (the fork launcher's AF_UNIX
 * sockets, hw/dist/dist_group.h), "mpi", "nccl". */

typedef enum {
    PROFILE_COLL_ALL_REDUCE = 0,
    PROFILE_COLL_ALL_GATHER,
    PROFILE_COLL_REDUCE_SCATTER,
    PROFILE_COLL_COUNT
} profile_coll_op;

typedef struct {
    profile_coll_op op;  /* which collective */
    int ranks;           /* group size, >= 2 */
    char transport[16];  /* "sockets", "mpi", "nccl" */
    double bytes;        /* buffer bytes (see above), > 0 */
    double us;           /* median time, > 0 */
    double spread_us;    /* interquartile range; NaN when not known */
    int reps;            /* timed repetitions, >= 1 */
} profile_coll_point;

/* "all_reduce", "all_gather", "reduce_scatter" ("?" out of range). Static. */
const char *profile_coll_op_name(profile_coll_op op);

/* nccl-tests' bus-bandwidth factor: busbw = algbw * factor, with algbw =
 * bytes / time; 2 (n - 1) / n for all-reduce, (n - 1) / n for all-gather
 * and reduce-scatter. 0 for n < 2. */
double profile_coll_busbw_factor(profile_coll_op op, int ranks);

/* Insert or replace one point for machine (which must be stored:
 * PL_ERR_NOT_FOUND otherwise). PL_ERR_INVALID for a point out of range
 * (see profile_coll_point) or a damaged file (schema 2 without the table). */
pl_status profile_db_put_collective_point(profile_db *db, const char *machine, const profile_coll_point *p);

/* *has = 1 when that point is stored, else 0 (also when the machine is not
 * stored yet, or the file is a schema-1 file opened READ). */
pl_status profile_db_has_collective_point(profile_db *db, const char *machine, profile_coll_op op, int ranks,
                                          const char *transport, double bytes, int *has);

/* Every collective point of the file's machine, ordered by op, ranks,
 * transport and bytes, into *out (malloc'd, caller frees; NULL when *n is
 * 0). PL_OK with *n = 0 when none are stored, no machine is stored, or the
 * file is a schema-1 file opened READ. PL_ERR_INVALID with one line in
 * profile_db_last_error for a damaged table: missing in a schema-2 file, or
 * a row out of range (unknown op, ranks < 2, a time that is not positive). */
pl_status profile_db_collective_points(profile_db *db, profile_coll_point **out, int *n);

/* The underlying SQLite handle, borrowed. Library code outside profile/
 * never calls it (every statement of the project's tables lives in profile/:
 * here, store_calib.h); it is for tests and fuzzers that inspect a file's
 * rows or damage a file on purpose. */
struct sqlite3 *profile_db_handle(profile_db *db);

#endif
