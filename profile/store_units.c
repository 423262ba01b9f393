/*
 * store_units.c: the profile store's unit writes and their matching reads.
 *
 * One machine, device, link, link point, graph, node cost or step anchor at
 * a time, for a profiler that measures in pieces: each call is its own write
 * unit (or a savepoint inside the caller's transaction), and the has_* reads
 * say whether a piece is already stored. Whole profiles go through store.c.
 */
#include "store_internal.h"

#include <math.h>

/* ---- unit writes ------------------------------------------------------------ */

pl_status profile_db_put_machine(profile_db *db, const profile_machine_info *m) {
    int kind;
    int64_t id;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    st = put_machine_in_tx(db, m, &id);
    return wtx_end(db, kind, st);
}

pl_status profile_db_put_device(profile_db *db, const char *machine, int idx, const profile_device *d) {
    if (idx < 0 || !d) return db_fail(db, PL_ERR_INVALID, "%s: bad device %d", db->path, idx);
    int kind;
    int64_t mid;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    if ((st = machine_id_by_name(db, machine, &mid)) == PL_OK) st = put_device_in_tx(db, mid, idx, d);
    return wtx_end(db, kind, st);
}

pl_status profile_db_put_link(profile_db *db, const char *machine, int src, int dst, double latency_us,
                              double bandwidth, const char *kind_text) {
    if (src < 0 || dst < 0 || src == dst)
        return db_fail(db, PL_ERR_INVALID, "%s: bad link %d -> %d", db->path, src, dst);
    int kind;
    int64_t mid;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    if ((st = machine_id_by_name(db, machine, &mid)) == PL_OK)
        st = put_link_in_tx(db, mid, src, dst, latency_us, bandwidth, kind_text);
    return wtx_end(db, kind, st);
}

pl_status profile_db_put_link_point(profile_db *db, const char *machine, int src, int dst, double bytes,
                                    double us, double spread_us) {
    if (src < 0 || dst < 0 || src == dst || !(bytes > 0) || isnan(us))
        return db_fail(db, PL_ERR_INVALID, "%s: bad link point %d -> %d", db->path, src, dst);
    int kind;
    int64_t mid;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    if ((st = machine_id_by_name(db, machine, &mid)) == PL_OK)
        st = put_point_in_tx(db, mid, src, dst, bytes, us, spread_us);
    return wtx_end(db, kind, st);
}

pl_status profile_db_has_link_point(profile_db *db, const char *machine, int src, int dst, double bytes,
                                    int *has) {
    *has = 0;
    int64_t mid;
    pl_status st = machine_id_by_name(db, machine, &mid);
    if (st == PL_ERR_NOT_FOUND) return PL_OK;
    if (st != PL_OK) return st;
    sqlite3_stmt *s = stmt_get(db, S_POINT_HAS);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_int(s, 2, src);
    sqlite3_bind_int(s, 3, dst);
    sqlite3_bind_double(s, 4, bytes);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) *has = 1;
    else if (rc != SQLITE_DONE) st = sql_fail(db, "looking up a link point");
    stmt_done(s);
    return st;
}

pl_status profile_db_put_graph(profile_db *db, const graph *g, const profile_node_mem *mem) {
    if (!g) return db_fail(db, PL_ERR_INVALID, "%s: no graph given", db->path);
    int kind;
    int64_t gid;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    st = put_graph_in_tx(db, g, mem, &gid);
    return wtx_end(db, kind, st);
}

static pl_status put_node_cost(profile_db *db, const char *machine, const char *graph_key, int device, int node,
                               cost_phase phase, int mb_size, double us, double spread_us, double b_us,
                               double w_us) {
    if (device < 0 || node < 0 || (int)phase < 0 || phase >= PHASE_COUNT || (phase != PHASE_OPT && mb_size < 1))
        return db_fail(db, PL_ERR_INVALID, "%s: bad node cost (device %d, node %d, phase %d, micro-batch %d)",
                       db->path, device, node, (int)phase, mb_size);
    int kind, n_nodes = 0;
    int64_t mid, gid;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    if ((st = machine_id_by_name(db, machine, &mid)) != PL_OK) goto out;
    if ((st = graph_id_by_key(db, graph_key, &gid, &n_nodes)) != PL_OK) goto out;
    if (node >= n_nodes) {
        st = db_fail(db, PL_ERR_INVALID, "%s: node %d out of range (graph has %d)", db->path, node, n_nodes);
        goto out;
    }
    st = put_cost_in_tx(db, mid, gid, device, node, phase, mb_size, us, spread_us, b_us, w_us);
out:
    return wtx_end(db, kind, st);
}

pl_status profile_db_put_node_cost(profile_db *db, const char *machine, const char *graph_key, int device,
                                   int node, cost_phase phase, int mb_size, double us, double spread_us) {
    return put_node_cost(db, machine, graph_key, device, node, phase, mb_size, us, spread_us, NAN, NAN);
}

pl_status profile_db_put_bwd_cost(profile_db *db, const char *machine, const char *graph_key, int device,
                                  int node, int mb_size, double us, double spread_us, double b_us, double w_us) {
    return put_node_cost(db, machine, graph_key, device, node, PHASE_BWD, mb_size, us, spread_us, b_us, w_us);
}

pl_status profile_db_has_node_cost(profile_db *db, const char *machine, const char *graph_key, int device,
                                   int node, cost_phase phase, int mb_size, int *has) {
    *has = 0;
    if ((int)phase < 0 || phase >= PHASE_COUNT) return db_fail(db, PL_ERR_INVALID, "%s: bad phase", db->path);
    int64_t mid, gid;
    pl_status st = machine_id_by_name(db, machine, &mid);
    if (st == PL_OK) st = graph_id_by_key(db, graph_key, &gid, NULL);
    if (st == PL_ERR_NOT_FOUND) return PL_OK;
    if (st != PL_OK) return st;
    sqlite3_stmt *s = stmt_get(db, S_COST_HAS);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_int64(s, 2, gid);
    sqlite3_bind_int(s, 3, device);
    sqlite3_bind_int(s, 4, node);
    sqlite3_bind_text(s, 5, PHASE_TEXT[phase], -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 6, phase == PHASE_OPT ? 0 : mb_size);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) *has = 1;
    else if (rc != SQLITE_DONE) st = sql_fail(db, "looking up a node cost");
    stmt_done(s);
    return st;
}

pl_status profile_db_put_step_anchor(profile_db *db, const char *machine, const char *graph_key, int device,
                                     int mb_size, double us, double spread_us) {
    if (device < 0 || mb_size < 1)
        return db_fail(db, PL_ERR_INVALID, "%s: bad step anchor (device %d, micro-batch %d)", db->path, device,
                       mb_size);
    int kind;
    int64_t mid, gid;
    pl_status st = wtx_begin(db, &kind);
    if (st != PL_OK) return st;
    if ((st = machine_id_by_name(db, machine, &mid)) != PL_OK) goto out;
    if ((st = graph_id_by_key(db, graph_key, &gid, NULL)) != PL_OK) goto out;
    sqlite3_stmt *s = stmt_get(db, S_ANCHOR_PUT);
    if (!s) {
        st = PL_ERR_DB;
        goto out;
    }
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_int64(s, 2, gid);
    sqlite3_bind_int(s, 3, device);
    sqlite3_bind_int(s, 4, mb_size);
    bind_double_or_null(s, 5, us);
    bind_double_or_null(s, 6, spread_us);
    st = step_done(db, s, "writing a step anchor");
out:
    return wtx_end(db, kind, st);
}

pl_status profile_db_get_step_anchor(profile_db *db, const char *graph_key, int device, int mb_size, double *us,
                                     double *spread_us) {
    int64_t mid, gid;
    pl_status st = file_machine_id(db, &mid);
    if (st == PL_OK) st = graph_id_by_key(db, graph_key, &gid, NULL);
    if (st != PL_OK) return st;
    sqlite3_stmt *s = stmt_get(db, S_ANCHOR_GET);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_int64(s, 2, gid);
    sqlite3_bind_int(s, 3, device);
    sqlite3_bind_int(s, 4, mb_size);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *us = col_double_or_nan(s, 0);
        if (spread_us) *spread_us = col_double_or_nan(s, 1);
    } else if (rc == SQLITE_DONE) {
        st = db_fail(db, PL_ERR_NOT_FOUND, "%s: no step anchor for device %d at micro-batch %d", db->path, device,
                     mb_size);
    } else {
        st = sql_fail(db, "reading a step anchor");
    }
    stmt_done(s);
    return st;
}
