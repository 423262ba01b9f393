/*
 * store_schema.c: the profile store's SQL text: the schema as its
 * migrations (version 0 -> 1 -> 2 -> 3 -> 4; store.c's migrate runs them) and
 * every prepared statement by id (store_internal.h; store.c's stmt_get
 * prepares them), and calib's tables (store_calib.h), which are not
 * versioned. Changing the schema means a new migration here, a bump
 * of PROFILE_DB_SCHEMA_VERSION (store.h), and statements that read files of
 * the older versions a READ open still accepts.
 */
#include "store_internal.h"

/* ---- schema and migrations ------------------------------------------------ */

/* Version 0: only the meta table. Written by the store when it creates a file,
 * then migrated like any older file. */
const char store_schema_v0[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "INSERT INTO meta(key, value) VALUES('schema_version', '0'), ('creator', 'placer');";

/* store_migrations[v] takes a file from version v to v + 1. */
const char *const store_migrations[PROFILE_DB_SCHEMA_VERSION] = {
    /* 0 -> 1: the first full schema. */
    "CREATE TABLE machine(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  name TEXT NOT NULL UNIQUE,\n"
    "  source TEXT NOT NULL,\n"
    "  created_at TEXT NOT NULL,\n"
    "  host TEXT, driver TEXT, cuda TEXT, topology TEXT);\n"
    "CREATE TABLE device(\n"
    "  machine_id INTEGER NOT NULL REFERENCES machine(id) ON DELETE CASCADE,\n"
    "  idx INTEGER NOT NULL CHECK(idx >= 0),\n"
    "  name TEXT NOT NULL,\n"
    "  mem_bytes INTEGER NOT NULL,\n"
    "  peak_flops REAL NOT NULL DEFAULT 0,\n"
    "  mem_bw REAL NOT NULL DEFAULT 0,\n"
    "  launch_us REAL NOT NULL DEFAULT 0,\n"
    "  sm_count INTEGER NOT NULL DEFAULT 0,\n"
    "  PRIMARY KEY(machine_id, idx));\n"
    "CREATE TABLE link(\n"
    "  machine_id INTEGER NOT NULL REFERENCES machine(id) ON DELETE CASCADE,\n"
    "  src INTEGER NOT NULL, dst INTEGER NOT NULL,\n"
    "  latency_us REAL NOT NULL, bandwidth REAL NOT NULL, kind TEXT,\n"
    "  PRIMARY KEY(machine_id, src, dst), CHECK(src <> dst));\n"
    "CREATE TABLE link_point(\n"
    "  machine_id INTEGER NOT NULL, src INTEGER NOT NULL, dst INTEGER NOT NULL,\n"
    "  bytes REAL NOT NULL, us REAL NOT NULL, spread_us REAL,\n"
    "  PRIMARY KEY(machine_id, src, dst, bytes),\n"
    "  FOREIGN KEY(machine_id, src, dst) REFERENCES link(machine_id, src, dst) ON DELETE CASCADE);\n"
    "CREATE TABLE graph(\n"
    "  id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE,\n"
    "  vocab INTEGER NOT NULL, d_model INTEGER NOT NULL, heads INTEGER NOT NULL,\n"
    "  layers INTEGER NOT NULL, seq INTEGER NOT NULL, batch INTEGER NOT NULL,\n"
    "  n_nodes INTEGER NOT NULL, params INTEGER NOT NULL);\n"
    "CREATE TABLE node(\n"
    "  graph_id INTEGER NOT NULL REFERENCES graph(id) ON DELETE CASCADE,\n"
    "  idx INTEGER NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,\n"
    "  params INTEGER NOT NULL, param_bytes INTEGER NOT NULL,\n"
    "  out_bytes_per_sample INTEGER NOT NULL, act_bytes_per_sample INTEGER NOT NULL,\n"
    "  workspace_bytes INTEGER NOT NULL DEFAULT 0,\n"
    "  PRIMARY KEY(graph_id, idx));\n"
    "CREATE TABLE node_cost(\n"
    "  machine_id INTEGER NOT NULL REFERENCES machine(id) ON DELETE CASCADE,\n"
    "  graph_id INTEGER NOT NULL REFERENCES graph(id) ON DELETE CASCADE,\n"
    "  device INTEGER NOT NULL, node INTEGER NOT NULL,\n"
    "  phase TEXT NOT NULL CHECK(phase IN ('fwd', 'bwd', 'opt')),\n"
    "  mb_size INTEGER NOT NULL, us REAL, spread_us REAL, measured_at TEXT NOT NULL,\n"
    "  PRIMARY KEY(machine_id, graph_id, device, node, phase, mb_size)) WITHOUT ROWID;\n"
    "CREATE TABLE step_anchor(\n"
    "  machine_id INTEGER NOT NULL REFERENCES machine(id) ON DELETE CASCADE,\n"
    "  graph_id INTEGER NOT NULL REFERENCES graph(id) ON DELETE CASCADE,\n"
    "  device INTEGER NOT NULL, mb_size INTEGER NOT NULL,\n"
    "  us REAL, spread_us REAL, measured_at TEXT NOT NULL,\n"
    "  PRIMARY KEY(machine_id, graph_id, device, mb_size));\n"
    "CREATE TABLE measurement(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  machine_id INTEGER NOT NULL REFERENCES machine(id) ON DELETE CASCADE,\n"
    "  graph_key TEXT NOT NULL, placement TEXT NOT NULL, micro_batches INTEGER NOT NULL,\n"
    "  schedule TEXT NOT NULL, mem_cap INTEGER NOT NULL, step_us REAL, spread_us REAL,\n"
    "  peak_bytes INTEGER NOT NULL, oom INTEGER NOT NULL, purpose TEXT NOT NULL,\n"
    "  measured_at TEXT NOT NULL, extra TEXT);\n"
    "CREATE INDEX measurement_by_purpose ON measurement(purpose, id);\n"
    "CREATE TABLE sim_params(\n"
    "  machine_id INTEGER NOT NULL REFERENCES machine(id) ON DELETE CASCADE,\n"
    "  graph_key TEXT NOT NULL, name TEXT NOT NULL, value REAL, label TEXT,\n"
    "  fitted_at TEXT NOT NULL,\n"
    "  PRIMARY KEY(machine_id, graph_key, name));\n"
    "CREATE TABLE run(\n"
    "  id INTEGER PRIMARY KEY, method TEXT NOT NULL, args TEXT NOT NULL DEFAULT '',\n"
    "  created_at TEXT NOT NULL, finished INTEGER NOT NULL DEFAULT 0);\n"
    "CREATE TABLE run_sample(\n"
    "  run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,\n"
    "  update_idx INTEGER NOT NULL, sample INTEGER NOT NULL, placement TEXT NOT NULL,\n"
    "  step_us REAL, peak_bytes INTEGER NOT NULL, oom INTEGER NOT NULL,\n"
    "  PRIMARY KEY(run_id, update_idx, sample));\n"
    "CREATE TABLE checkpoint(\n"
    "  run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,\n"
    "  update_idx INTEGER NOT NULL, blob BLOB NOT NULL, saved_at TEXT NOT NULL,\n"
    "  PRIMARY KEY(run_id, update_idx));\n",
    /* 1 -> 2: collective curves (issue 17), next to the transfer curves. A
     * file of version 1 still opens READ (PROFILE_DB_MIN_READ_VERSION): it
     * reads as holding no collective points. */
    "CREATE TABLE collective_point(\n"
    "  machine_id INTEGER NOT NULL REFERENCES machine(id) ON DELETE CASCADE,\n"
    "  op TEXT NOT NULL CHECK(op IN ('all_reduce', 'all_gather', 'reduce_scatter')),\n"
    "  ranks INTEGER NOT NULL CHECK(ranks >= 2),\n"
    "  transport TEXT NOT NULL,\n"
    "  bytes REAL NOT NULL CHECK(bytes > 0),\n"
    "  us REAL NOT NULL, spread_us REAL, reps INTEGER NOT NULL,\n"
    "  measured_at TEXT NOT NULL,\n"
    "  PRIMARY KEY(machine_id, op, ranks, transport, bytes));\n",
    /* 2 -> 3: each node's forward and backward workspace apart (the engine
     * allocates each call's scratch on its own; workspace_bytes stays the
     * larger). Rows of an older file read 0, 0: one figure for both calls,
     * as before. A file of version 2 still opens READ the same way. */
    "ALTER TABLE node ADD COLUMN fwd_workspace_bytes INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE node ADD COLUMN bwd_workspace_bytes INTEGER NOT NULL DEFAULT 0;\n",
    /* 3 -> 4: each backward's two parts (issue 28): on a 'bwd' row of a node
     * whose backward splits (attention, MLP, head), b_us is its input
     * gradient (B) and w_us its weight gradient (W), each timed on its own;
     * us stays the whole backward, timed as one call. NULL: not measured
     * apart (rows of an older file, spec profiles, nodes that do not split),
     * and the simulator derives the split from FLOPs (profile_w_frac). A file
     * of version 3 still opens READ the same way. */
    "ALTER TABLE node_cost ADD COLUMN b_us REAL;\n"
    "ALTER TABLE node_cost ADD COLUMN w_us REAL;\n",
};

/* ---- prepared statements ---------------------------------------------------- */

/* The SQL of each statement id (store_internal.h), prepared by stmt_get. */
const char *const store_stmt_sql[N_STMT] = {
    [S_MACHINE_FIRST] = "SELECT id, name, source, created_at, host, driver, cuda, topology "
                        "FROM machine ORDER BY id LIMIT 1",
    [S_MACHINE_ID] = "SELECT id FROM machine WHERE name = ?1",
    [S_MACHINE_INSERT] = "INSERT INTO machine(name, source, created_at, host, driver, cuda, topology) "
                         "VALUES(?1, ?2, " NOW_SQL ", ?3, ?4, ?5, ?6)",
    [S_MACHINE_UPDATE] = "UPDATE machine SET source = ?2, created_at = " NOW_SQL ", "
                         "host = coalesce(?3, host), driver = coalesce(?4, driver), "
                         "cuda = coalesce(?5, cuda), topology = coalesce(?6, topology) WHERE id = ?1",
    [S_DEVICE_PUT] = "INSERT OR REPLACE INTO device(machine_id, idx, name, mem_bytes, peak_flops, mem_bw, "
                     "launch_us, sm_count) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [S_DEVICE_TRIM] = "DELETE FROM device WHERE machine_id = ?1 AND idx >= ?2",
    [S_DEVICE_LIST] = "SELECT idx, name, mem_bytes, peak_flops, mem_bw, launch_us, sm_count "
                      "FROM device WHERE machine_id = ?1 ORDER BY idx",
    [S_LINK_PUT] = "INSERT INTO link(machine_id, src, dst, latency_us, bandwidth, kind) "
                   "VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(machine_id, src, dst) DO UPDATE SET "
                   "latency_us = excluded.latency_us, bandwidth = excluded.bandwidth, "
                   "kind = coalesce(excluded.kind, kind)",
    [S_LINK_TRIM] = "DELETE FROM link WHERE machine_id = ?1 AND (src >= ?2 OR dst >= ?2)",
    [S_LINK_GET] = "SELECT latency_us, bandwidth, kind FROM link WHERE machine_id = ?1 AND src = ?2 AND dst = ?3",
    [S_POINTS_CLEAR] = "DELETE FROM link_point WHERE machine_id = ?1",
    [S_POINT_PUT] = "INSERT OR REPLACE INTO link_point(machine_id, src, dst, bytes, us, spread_us) "
                    "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [S_POINT_HAS] = "SELECT 1 FROM link_point WHERE machine_id = ?1 AND src = ?2 AND dst = ?3 AND bytes = ?4",
    [S_POINT_LIST] = "SELECT bytes, us FROM link_point WHERE machine_id = ?1 AND src = ?2 AND dst = ?3 "
                     "ORDER BY bytes",
    [S_GRAPH_ID] = "SELECT id, n_nodes FROM graph WHERE key = ?1",
    [S_GRAPH_UPSERT] = "INSERT INTO graph(key, vocab, d_model, heads, layers, seq, batch, n_nodes, params) "
                       "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT(key) DO UPDATE SET "
                       "vocab = excluded.vocab, d_model = excluded.d_model, heads = excluded.heads, "
                       "layers = excluded.layers, seq = excluded.seq, batch = excluded.batch, "
                       "n_nodes = excluded.n_nodes, params = excluded.params",
    [S_GRAPH_GET] = "SELECT key, vocab, d_model, heads, layers, seq, batch, n_nodes, params "
                    "FROM graph WHERE id = ?1",
    [S_GRAPH_LIST] = "SELECT g.key, g.vocab, g.d_model, g.heads, g.layers, g.seq, g.batch, g.n_nodes, g.params, "
                     "(SELECT count(*) FROM node_cost c WHERE c.graph_id = g.id AND c.machine_id = ?1) "
                     "FROM graph g ORDER BY g.id DESC",
    [S_NODE_CLEAR] = "DELETE FROM node WHERE graph_id = ?1",
    [S_NODE_PUT] = "INSERT INTO node(graph_id, idx, name, kind, params, param_bytes, out_bytes_per_sample, "
                   "act_bytes_per_sample, workspace_bytes, fwd_workspace_bytes, bwd_workspace_bytes) "
                   "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    [S_NODE_LIST] = "SELECT idx, param_bytes, out_bytes_per_sample, act_bytes_per_sample, workspace_bytes, "
                    "fwd_workspace_bytes, bwd_workspace_bytes FROM node WHERE graph_id = ?1 ORDER BY idx",
    /* a file of schema 1 or 2 opened READ has one workspace a node */
    [S_NODE_LIST_V2] = "SELECT idx, param_bytes, out_bytes_per_sample, act_bytes_per_sample, workspace_bytes, "
                       "0, 0 FROM node WHERE graph_id = ?1 ORDER BY idx",
    [S_COST_CLEAR] = "DELETE FROM node_cost WHERE machine_id = ?1 AND graph_id = ?2",
    [S_COST_PUT] = "INSERT OR REPLACE INTO node_cost(machine_id, graph_id, device, node, phase, mb_size, us, "
                   "spread_us, measured_at, b_us, w_us) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, " NOW_SQL ", ?9, ?10)",
    [S_COST_HAS] = "SELECT 1 FROM node_cost WHERE machine_id = ?1 AND graph_id = ?2 AND device = ?3 "
                   "AND node = ?4 AND phase = ?5 AND mb_size = ?6",
    [S_COST_MB] = "SELECT DISTINCT mb_size FROM node_cost WHERE machine_id = ?1 AND graph_id = ?2 "
                  "AND phase <> 'opt' ORDER BY mb_size",
    [S_COST_LIST] = "SELECT device, node, phase, mb_size, us, b_us, w_us FROM node_cost "
                    "WHERE machine_id = ?1 AND graph_id = ?2",
    /* a file of schema 1 to 3 opened READ has no backward split */
    [S_COST_LIST_V3] = "SELECT device, node, phase, mb_size, us, NULL, NULL FROM node_cost "
                       "WHERE machine_id = ?1 AND graph_id = ?2",
    [S_COST_LATEST_GRAPH] = "SELECT graph_id FROM node_cost WHERE machine_id = ?1 GROUP BY graph_id "
                            "ORDER BY max(measured_at) DESC, graph_id DESC LIMIT 1",
    [S_ANCHOR_PUT] = "INSERT OR REPLACE INTO step_anchor(machine_id, graph_id, device, mb_size, us, spread_us, "
                     "measured_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, " NOW_SQL ")",
    [S_ANCHOR_GET] = "SELECT us, spread_us FROM step_anchor WHERE machine_id = ?1 AND graph_id = ?2 "
                     "AND device = ?3 AND mb_size = ?4",
    [S_SIM_CLEAR] = "DELETE FROM sim_params WHERE machine_id = ?1 AND graph_key = ?2",
    [S_SIM_PUT] = "INSERT OR REPLACE INTO sim_params(machine_id, graph_key, name, value, label, fitted_at) "
                  "VALUES(?1, ?2, ?3, ?4, ?5, " NOW_SQL ")",
    [S_SIM_GET] = "SELECT value FROM sim_params WHERE machine_id = ?1 AND graph_key = ?2 AND name = ?3",
    [S_RUN_CREATE] = "INSERT INTO run(method, args, created_at) VALUES(?1, ?2, " NOW_SQL ")",
    [S_RUN_FINISH] = "UPDATE run SET finished = 1 WHERE id = ?1",
    [S_RUN_EXISTS] = "SELECT 1 FROM run WHERE id = ?1",
    [S_RUN_LIST] = "SELECT r.id, r.method, r.args, r.created_at, r.finished, "
                   "(SELECT count(*) FROM run_sample s WHERE s.run_id = r.id) FROM run r ORDER BY r.id",
    [S_SAMPLE_PUT] = "INSERT OR REPLACE INTO run_sample(run_id, update_idx, sample, placement, step_us, "
                     "peak_bytes, oom) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [S_SAMPLE_LIST] = "SELECT update_idx, sample, placement, step_us, peak_bytes, oom FROM run_sample "
                      "WHERE run_id = ?1 ORDER BY update_idx, sample",
    [S_CKPT_PUT] = "INSERT OR REPLACE INTO checkpoint(run_id, update_idx, blob, saved_at) "
                   "VALUES(?1, ?2, ?3, " NOW_SQL ")",
    [S_CKPT_GET] = "SELECT update_idx, blob FROM checkpoint WHERE run_id = ?1 AND update_idx = ?2",
    [S_CKPT_LATEST] = "SELECT update_idx, blob FROM checkpoint WHERE run_id = ?1 "
                      "ORDER BY update_idx DESC LIMIT 1",
    [S_MEAS_PUT] = "INSERT INTO measurement(machine_id, graph_key, placement, micro_batches, schedule, mem_cap, "
                   "step_us, spread_us, peak_bytes, oom, purpose, measured_at, extra) "
                   "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, " NOW_SQL ", ?12)",
    [S_MEAS_LIST] = "SELECT id, graph_key, placement, micro_batches, schedule, mem_cap, step_us, spread_us, "
                    "peak_bytes, oom, purpose, extra, measured_at FROM measurement "
                    "WHERE ?1 IS NULL OR purpose = ?1 ORDER BY id",
    /* the precision the engine measured in (issue 16): a meta key, so files of
     * schema 1 without it stay readable (they are tf32, the engine's default) */
    [S_PREC_PUT] = "INSERT OR REPLACE INTO meta(key, value) VALUES('precision', ?1)",
    [S_PREC_GET] = "SELECT value FROM meta WHERE key = 'precision'",
    [S_COLL_PUT] = "INSERT OR REPLACE INTO collective_point(machine_id, op, ranks, transport, bytes, us, spread_us, "
                   "reps, measured_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, " NOW_SQL ")",
    [S_COLL_HAS] = "SELECT 1 FROM collective_point WHERE machine_id = ?1 AND op = ?2 AND ranks = ?3 "
                   "AND transport = ?4 AND bytes = ?5",
    [S_COLL_LIST] = "SELECT op, ranks, transport, bytes, us, spread_us, reps FROM collective_point "
                    "WHERE machine_id = ?1 ORDER BY op, ranks, transport, bytes",
    [S_COLL_TABLE] = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'collective_point'",
    /* a training run keeps only its latest checkpoint (policy/reinforce.c) */
    [S_CKPT_PRUNE] = "DELETE FROM checkpoint WHERE run_id = ?1 AND update_idx < ?2",
    [S_TABLE_EXISTS] = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
    /* calib's tables (store_calib.h; store_calib_schema below creates them) */
    [S_CALIB_CONFIRM_PUT] = "INSERT INTO calib_confirm(label, run_id, graph_key, micro_batches, schedule, mem_cap,"
                            " selection_rounds, confirm_rounds, steps, warmup, seed, timer)"
                            " VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_CALIB_SIDE_PUT] = "INSERT INTO calib_confirm_side(confirm_id, side_idx, side, candidate, placement,"
                         " n_candidates, n_oom, n, mean_us, sd_us, se_us, pred_us, pred_peak, peak_bytes, rounds)"
                         " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_CALIB_TRACE_PUT] = "INSERT INTO calib_trace(confirm_id, side, placement, json) VALUES(?,?,?,?)",
    [S_CALIB_FIT_PUT] = "INSERT INTO calib_fit(graph_key, timer, seed, holdout, n_train, n_test, iterations,"
                        " chisq0, chisq, before_mape, before_max_ape, before_tau, before_mem_mape,"
                        " before_mem_max_ape, after_mape, after_max_ape, after_tau, after_mem_mape,"
                        " after_mem_max_ape, train_before_mape, train_after_mape, params, errors, before_params)"
                        " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_CALIB_POINT_PUT] = "INSERT INTO calib_fit_point(fit_id, measurement_id, split, placement, micro_batches,"
                          " schedule, measured_us, pred_before_us, pred_after_us, measured_peak, pred_peak)"
                          " VALUES(?,?,?,?,?,?,?,?,?,?,?)",
    [S_CALIB_CONFIRM_LIST] = "SELECT id, label, run_id, graph_key, micro_batches, schedule, mem_cap, selection_rounds,"
                             " confirm_rounds, steps, warmup, seed, timer, created_at FROM calib_confirm"
                             " WHERE id IN (SELECT MAX(id) FROM calib_confirm GROUP BY label) ORDER BY label",
    [S_CALIB_SIDE_LIST] = "SELECT side, candidate, placement, n_candidates, n_oom, n, mean_us, sd_us, se_us, pred_us,"
                          " pred_peak, peak_bytes, rounds FROM calib_confirm_side WHERE confirm_id = ?1"
                          " ORDER BY side_idx",
    [S_CALIB_FIT_LAST] = "SELECT id, graph_key, timer, created_at, seed, holdout, n_train, n_test, iterations,"
                         " chisq0, chisq,"
                         " before_mape, before_max_ape, before_tau, before_mem_mape, before_mem_max_ape,"
                         " after_mape, after_max_ape, after_tau, after_mem_mape, after_mem_max_ape,"
                         " train_before_mape, train_after_mape, params, errors, before_params"
                         " FROM calib_fit ORDER BY id DESC LIMIT 1",
    [S_CALIB_POINT_LIST] = "SELECT measurement_id, split, placement, micro_batches, schedule, measured_us,"
                           " pred_before_us, pred_after_us, measured_peak, pred_peak"
                           " FROM calib_fit_point WHERE fit_id = ?1 ORDER BY rowid",
    [S_CALIB_TRACE_GET] = "SELECT json FROM calib_trace WHERE confirm_id = ?1 ORDER BY rowid DESC LIMIT 1",
};

/* ---- calib's tables --------------------------------------------------------- */

/* Created on a file's first calibration write (store_calib.c), outside the
 * versioned schema: CREATE TABLE IF NOT EXISTS, so files of any version gain
 * them without a migration, and files never calibrated stay as they were. */
const char store_calib_schema[] =
    "CREATE TABLE IF NOT EXISTS calib_confirm("
    " id INTEGER PRIMARY KEY, label TEXT NOT NULL, run_id INTEGER, graph_key TEXT NOT NULL,"
    " micro_batches INTEGER NOT NULL, schedule TEXT NOT NULL, mem_cap INTEGER NOT NULL,"
    " selection_rounds INTEGER NOT NULL, confirm_rounds INTEGER NOT NULL, steps INTEGER NOT NULL,"
    " warmup INTEGER NOT NULL, seed INTEGER NOT NULL, timer TEXT NOT NULL,"
    " created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')));"
    "CREATE TABLE IF NOT EXISTS calib_confirm_side("
    " confirm_id INTEGER NOT NULL REFERENCES calib_confirm(id) ON DELETE CASCADE,"
    " side_idx INTEGER NOT NULL, side TEXT NOT NULL, candidate TEXT, placement TEXT,"
    " n_candidates INTEGER NOT NULL, n_oom INTEGER NOT NULL, n INTEGER NOT NULL,"
    " mean_us REAL, sd_us REAL, se_us REAL, pred_us REAL, pred_peak INTEGER, peak_bytes INTEGER,"
    " rounds TEXT, PRIMARY KEY(confirm_id, side_idx));"
    "CREATE TABLE IF NOT EXISTS calib_fit("
    " id INTEGER PRIMARY KEY, graph_key TEXT NOT NULL, timer TEXT NOT NULL,"
    " created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),"
    " seed INTEGER NOT NULL, holdout REAL NOT NULL, n_train INTEGER NOT NULL, n_test INTEGER NOT NULL,"
    " iterations INTEGER, chisq0 REAL, chisq REAL,"
    " before_mape REAL, before_max_ape REAL, before_tau REAL, before_mem_mape REAL, before_mem_max_ape REAL,"
    " after_mape REAL, after_max_ape REAL, after_tau REAL, after_mem_mape REAL, after_mem_max_ape REAL,"
    " train_before_mape REAL, train_after_mape REAL, params TEXT NOT NULL, errors TEXT NOT NULL,"
    " before_params TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS calib_fit_point("
    " fit_id INTEGER NOT NULL REFERENCES calib_fit(id) ON DELETE CASCADE, measurement_id INTEGER,"
    " split TEXT NOT NULL, placement TEXT NOT NULL, micro_batches INTEGER NOT NULL, schedule TEXT NOT NULL,"
    " measured_us REAL, pred_before_us REAL, pred_after_us REAL, measured_peak INTEGER, pred_peak INTEGER);"
    "CREATE TABLE IF NOT EXISTS calib_trace("
    " confirm_id INTEGER NOT NULL REFERENCES calib_confirm(id) ON DELETE CASCADE, side TEXT NOT NULL,"
    " placement TEXT NOT NULL, json TEXT NOT NULL,"
    " created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')));";
