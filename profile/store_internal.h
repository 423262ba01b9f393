/*
 * store_internal.h: what the pieces of the profile store share.
 *
 * Internal to profile/: only store.c, store_profile.c, store_units.c,
 * store_runs.c, store_measurements.c, store_calib.c and store_schema.c
 * include it; everything else goes through store.h (and store_calib.h).
 * It holds the handle's layout, the ids of the prepared statements (their
 * SQL is in store_schema.c) and the small helpers that more than one piece calls.
 * Each helper's contract is the comment at its definition in store.c.
 *
 * Those that can fail record the detail in db->err (db_fail) and return a
 * pl_status (stmt_get: NULL). Writes go through wtx_begin ... wtx_end; the
 * *_in_tx helpers expect to be called between the two.
 */
#ifndef PLACER_PROFILE_STORE_INTERNAL_H
#define PLACER_PROFILE_STORE_INTERNAL_H

#include "store.h"

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

/* The current time as the store writes it (ISO 8601, milliseconds, UTC). */
#define NOW_SQL "strftime('%Y-%m-%dT%H:%M:%fZ','now')"

/* Ids of the prepared statements: index into store_stmt_sql and profile_db.stmt. */
enum {
    S_MACHINE_FIRST,
    S_MACHINE_ID,
    S_MACHINE_INSERT,
    S_MACHINE_UPDATE,
    S_DEVICE_PUT,
    S_DEVICE_TRIM,
    S_DEVICE_LIST,
    S_LINK_PUT,
    S_LINK_TRIM,
    S_LINK_GET,
    S_POINTS_CLEAR,
    S_POINT_PUT,
    S_POINT_HAS,
    S_POINT_LIST,
    S_GRAPH_ID,
    S_GRAPH_UPSERT,
    S_GRAPH_GET,
    S_GRAPH_LIST,
    S_NODE_CLEAR,
    S_NODE_PUT,
    S_NODE_LIST,
    S_NODE_LIST_V2,
    S_COST_CLEAR,
    S_COST_PUT,
    S_COST_HAS,
    S_COST_MB,
    S_COST_LIST,
    S_COST_LIST_V3,
    S_COST_LATEST_GRAPH,
    S_ANCHOR_PUT,
    S_ANCHOR_GET,
    S_SIM_CLEAR,
    S_SIM_PUT,
    S_SIM_GET,
    S_RUN_CREATE,
    S_RUN_FINISH,
    S_RUN_EXISTS,
    S_RUN_LIST,
    S_SAMPLE_PUT,
    S_SAMPLE_LIST,
    S_CKPT_PUT,
    S_CKPT_GET,
    S_CKPT_LATEST,
    S_MEAS_PUT,
    S_MEAS_LIST,
    S_PREC_PUT,
    S_PREC_GET,
    S_COLL_PUT,
    S_COLL_HAS,
    S_COLL_LIST,
    S_COLL_TABLE,
    S_CKPT_PRUNE,
    S_TABLE_EXISTS,
    S_CALIB_CONFIRM_PUT,
    S_CALIB_SIDE_PUT,
    S_CALIB_TRACE_PUT,
    S_CALIB_FIT_PUT,
    S_CALIB_POINT_PUT,
    S_CALIB_CONFIRM_LIST,
    S_CALIB_SIDE_LIST,
    S_CALIB_FIT_LAST,
    S_CALIB_POINT_LIST,
    S_CALIB_TRACE_GET,
    N_STMT
};

struct profile_db {
    sqlite3 *h;                   /* the connection */
    char *path;                   /* file name, for messages */
    profile_db_mode mode;         /* how it was opened */
    int in_tx;                    /* an explicit transaction (profile_db_begin) is open */
    int opened_version;           /* schema version found at open */
    sqlite3_stmt *stmt[N_STMT];   /* prepared on first use */
    char err[512];                /* detail of the last failure */
};

/* node_cost.phase as stored, by profile phase (defined in store.c). */
extern const char *const PHASE_TEXT[PHASE_COUNT];
/* store_schema.c: version 0 (the meta table), the migrations
 * (store_migrations[v] takes version v to v + 1) and each statement's SQL */
extern const char store_schema_v0[];
extern const char *const store_migrations[PROFILE_DB_SCHEMA_VERSION];
extern const char *const store_stmt_sql[N_STMT];
/* store_schema.c: calib's five tables (store_calib.h), created on a file's
 * first calibration write rather than by a migration */
extern const char store_calib_schema[];

/* ---- small helpers (store.c) ----------------------------------------------- */

pl_status db_fail(profile_db *db, pl_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
pl_status sql_fail(profile_db *db, const char *what);
pl_status to_msg(profile_db *db, pl_status st, char *msg, size_t len);
sqlite3_stmt *stmt_get(profile_db *db, int id);
void stmt_done(sqlite3_stmt *s);
void bind_text_or_null(sqlite3_stmt *s, int i, const char *t);
void bind_double_or_null(sqlite3_stmt *s, int i, double v);
double col_double_or_nan(sqlite3_stmt *s, int i);
void col_text_copy(sqlite3_stmt *s, int i, char *buf, size_t len);
const char *col_text(sqlite3_stmt *s, int i);
pl_status step_done(profile_db *db, sqlite3_stmt *s, const char *what);
pl_status wtx_begin(profile_db *db, int *kind);
pl_status wtx_end(profile_db *db, int kind, pl_status st);

/* ---- machine, graph and id lookups (store.c) ------------------------------ */

pl_status file_machine_id(profile_db *db, int64_t *id);
pl_status machine_id_by_name(profile_db *db, const char *name, int64_t *id);
pl_status graph_id_by_key(profile_db *db, const char *key, int64_t *id, int *n_nodes);
pl_status put_machine_in_tx(profile_db *db, const profile_machine_info *m, int64_t *id);
pl_status put_device_in_tx(profile_db *db, int64_t mid, int idx, const profile_device *d);
pl_status put_link_in_tx(profile_db *db, int64_t mid, int src, int dst, double lat, double bw,
                         const char *kind);
pl_status put_point_in_tx(profile_db *db, int64_t mid, int src, int dst, double bytes, double us,
                          double spread);
pl_status put_graph_in_tx(profile_db *db, const graph *g, const profile_node_mem *mem, int64_t *gid);
pl_status put_cost_in_tx(profile_db *db, int64_t mid, int64_t gid, int dev, int node, int ph, int mb,
                         double us, double spread, double b_us, double w_us);

#endif
