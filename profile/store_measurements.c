/*
 * store_measurements.c: measured steps and collective curves in the profile
 * store.
 *
 * A measurement is a whole placement's step as timed on the hardware, kept
 * with its purpose ("calibrate", "confirm", ...). Collective curves are the
 * times of all-reduce, all-gather and reduce-scatter over a process group by
 * buffer size (schema 2); a file of schema 1 opened READ has no table for
 * them and reads as holding none.
 */
#include "store_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- measurements ------------------------------------------------------------ */

pl_status profile_db_add_measurement(profile_db *db, const profile_measurement *m, int64_t *id) {
    if (!m || !m->graph_key || !m->placement || !m->schedule || !m->purpose)
        return db_fail(db, PL_ERR_INVALID, "%s: a measurement needs graph_key, placement, schedule and purpose",
                       db->path);
    int kind;
    int64_t mid;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    if ((st = file_machine_id(db, &mid)) != PL_OK) goto out;
    sqlite3_stmt *s = stmt_get(db, S_MEAS_PUT);
    if (!s) {
        st = PL_ERR_DB;
        goto out;
    }
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_text(s, 2, m->graph_key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 3, m->placement, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(s, 4, m->micro_batches);
    sqlite3_bind_text(s, 5, m->schedule, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 6, m->mem_cap);
    bind_double_or_null(s, 7, m->step_us);
    bind_double_or_null(s, 8, m->spread_us);
    sqlite3_bind_int64(s, 9, m->peak_bytes_max);
    sqlite3_bind_int(s, 10, m->oom ? 1 : 0);
    sqlite3_bind_text(s, 11, m->purpose, -1, SQLITE_TRANSIENT);
    bind_text_or_null(s, 12, m->extra);
    if ((st = step_done(db, s, "writing a measurement")) == PL_OK && id) *id = sqlite3_last_insert_rowid(db->h);
out:
    return wtx_end(db, kind, st);
}

pl_status profile_db_measurements(profile_db *db, const char *purpose, profile_measurement_cb cb, void *ctx) {
    sqlite3_stmt *s = stmt_get(db, S_MEAS_LIST);
    if (!s) return PL_ERR_DB;
    bind_text_or_null(s, 1, purpose);
    int rc;
    pl_status st = PL_OK;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        profile_measurement m = {
            .graph_key = col_text(s, 1),
            .placement = col_text(s, 2),
            .micro_batches = sqlite3_column_int(s, 3),
            .schedule = col_text(s, 4),
            .mem_cap = sqlite3_column_int64(s, 5),
            .step_us = col_double_or_nan(s, 6),
            .spread_us = col_double_or_nan(s, 7),
            .peak_bytes_max = sqlite3_column_int64(s, 8),
            .oom = sqlite3_column_int(s, 9),
            .purpose = col_text(s, 10),
            .extra = sqlite3_column_type(s, 11) == SQLITE_NULL ? NULL : col_text(s, 11),
        };
        if (cb && cb(ctx, sqlite3_column_int64(s, 0), &m, col_text(s, 12))) {
            rc = SQLITE_DONE;
            break;
        }
    }
    if (rc != SQLITE_DONE) st = sql_fail(db, "reading measurements");
    stmt_done(s);
    return st;
}

/* ---- collective curves ---------------------------------------------------- */

static const char *const COLL_OP_TEXT[PROFILE_COLL_COUNT] = {"all_reduce", "all_gather", "reduce_scatter"};

const char *profile_coll_op_name(profile_coll_op op) {
    return op >= 0 && op < PROFILE_COLL_COUNT ? COLL_OP_TEXT[op] : "?";
}

double profile_coll_busbw_factor(profile_coll_op op, int ranks) {
    if (ranks < 2) return 0.0;
    const double f = (double)(ranks - 1) / (double)ranks;
    return op == PROFILE_COLL_ALL_REDUCE ? 2.0 * f : f;
}

static int coll_point_valid(const profile_coll_point *p) {
    return p && p->op >= 0 && p->op < PROFILE_COLL_COUNT && p->ranks >= 2 && p->transport[0] && p->bytes > 0 &&
           isfinite(p->bytes) && p->us > 0 && isfinite(p->us) && p->reps >= 1;
}

/* Is the collective_point table there? A file opened at schema 1 (READ)
 * predates it: *present 0, PL_OK. A file of schema 2 or later without it is
 * damaged: PL_ERR_INVALID. */
static pl_status coll_table(profile_db *db, int *present) {
    *present = 0;
    sqlite3_stmt *s = stmt_get(db, S_COLL_TABLE);
    if (!s) return PL_ERR_DB;
    int rc = sqlite3_step(s);
    pl_status st = PL_OK;
    if (rc == SQLITE_ROW) *present = sqlite3_column_int(s, 0) > 0;
    else st = sql_fail(db, "looking for the collective table");
    stmt_done(s);
    if (st != PL_OK || *present) return st;
    if (db->opened_version >= 0 && db->opened_version < 2 && db->mode == PROFILE_DB_READ) return PL_OK;
    return db_fail(db, PL_ERR_INVALID,
                   "%s is damaged: schema version %d but no collective_point table; re-profile into a new file",
                   db->path, PROFILE_DB_SCHEMA_VERSION);
}

pl_status profile_db_put_collective_point(profile_db *db, const char *machine, const profile_coll_point *p) {
    if (!coll_point_valid(p))
        return db_fail(db, PL_ERR_INVALID, "%s: bad collective point (op, ranks >= 2, transport, bytes > 0, us > 0, "
                                           "reps >= 1)", db->path);
    int kind, present = 0;
    int64_t mid;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    if ((st = coll_table(db, &present)) != PL_OK) goto out;
    if ((st = machine_id_by_name(db, machine, &mid)) != PL_OK) goto out;
    sqlite3_stmt *s = stmt_get(db, S_COLL_PUT);
    if (!s) {
        st = PL_ERR_DB;
        goto out;
    }
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_text(s, 2, COLL_OP_TEXT[p->op], -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 3, p->ranks);
    sqlite3_bind_text(s, 4, p->transport, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(s, 5, p->bytes);
    sqlite3_bind_double(s, 6, p->us);
    bind_double_or_null(s, 7, p->spread_us);
    sqlite3_bind_int(s, 8, p->reps);
    st = step_done(db, s, "writing a collective point");
out:
    return wtx_end(db, kind, st);
}

pl_status profile_db_has_collective_point(profile_db *db, const char *machine, profile_coll_op op, int ranks,
                                          const char *transport, double bytes, int *has) {
    *has = 0;
    if (op < 0 || op >= PROFILE_COLL_COUNT || !transport)
        return db_fail(db, PL_ERR_INVALID, "%s: bad collective op", db->path);
    int present = 0;
    int64_t mid;
    pl_status st = coll_table(db, &present);
    if (st != PL_OK || !present) return st;
    st = machine_id_by_name(db, machine, &mid);
    if (st == PL_ERR_NOT_FOUND) return PL_OK;
    if (st != PL_OK) return st;
    sqlite3_stmt *s = stmt_get(db, S_COLL_HAS);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_text(s, 2, COLL_OP_TEXT[op], -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 3, ranks);
    sqlite3_bind_text(s, 4, transport, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(s, 5, bytes);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) *has = 1;
    else if (rc != SQLITE_DONE) st = sql_fail(db, "looking up a collective point");
    stmt_done(s);
    return st;
}

pl_status profile_db_collective_points(profile_db *db, profile_coll_point **out, int *n) {
    *out = NULL;
    *n = 0;
    int present = 0;
    int64_t mid;
    pl_status st = coll_table(db, &present);
    if (st != PL_OK || !present) return st;
    st = file_machine_id(db, &mid);
    if (st == PL_ERR_NOT_FOUND) return PL_OK;
    if (st != PL_OK) return st;
    sqlite3_stmt *s = stmt_get(db, S_COLL_LIST);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    profile_coll_point *v = NULL;
    int cap = 0, k = 0, rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (k == cap) {
            int nc = cap ? 2 * cap : 32;
            profile_coll_point *nv = realloc(v, sizeof *v * (size_t)nc);
            if (!nv) {
                st = db_fail(db, PL_ERR_NOMEM, "%s: out of memory reading collective points", db->path);
                goto out;
            }
            v = nv;
            cap = nc;
        }
        profile_coll_point *p = &v[k];
        memset(p, 0, sizeof *p);
        const char *op = col_text(s, 0);
        p->op = PROFILE_COLL_COUNT;
        for (int i = 0; i < PROFILE_COLL_COUNT; i++)
            if (!strcmp(op, COLL_OP_TEXT[i])) p->op = (profile_coll_op)i;
        p->ranks = sqlite3_column_int(s, 1);
        col_text_copy(s, 2, p->transport, sizeof p->transport);
        p->bytes = sqlite3_column_double(s, 3);
        p->us = col_double_or_nan(s, 4);
        p->spread_us = col_double_or_nan(s, 5);
        p->reps = sqlite3_column_int(s, 6);
        if (!coll_point_valid(p)) {
            st = db_fail(db, PL_ERR_INVALID,
                         "%s: collective_point row %d is invalid (op '%s', %d ranks, %g bytes, %g us, %d reps); "
                         "re-measure with placer profile --collectives N --force",
                         db->path, k + 1, op, p->ranks, p->bytes, p->us, p->reps);
            goto out;
        }
        k++;
    }
    if (rc != SQLITE_DONE) st = sql_fail(db, "reading collective points");
out:
    stmt_done(s);
    if (st != PL_OK) {
        free(v);
        return st;
    }
    *out = v;
    *n = k;
    return PL_OK;
}
