/*
 * store_profile.c: a whole profile in and out of the store: saving one
 * (machine, devices, links and their curves, the graph and its nodes,
 * every cost, in one transaction) and loading one for a graph, with the
 * checks that make a partial or damaged file one clear error. The opening,
 * transactions and lookups it uses are store.c's (store_internal.h).
 */
#include "store_internal.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Run a statement bound with (mid, int) and no result. */
static pl_status exec_id_int(profile_db *db, int id, int64_t a, int64_t b, const char *what) {
    sqlite3_stmt *s = stmt_get(db, id);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, a);
    sqlite3_bind_int64(s, 2, b);
    return step_done(db, s, what);
}

/* ---- whole profiles ------------------------------------------------------- */

pl_status profile_db_save_profile(profile_db *db, const gpt_config *cfg, const profile_data *p, char *msg,
                                  size_t len) {
    if (!db || !cfg || !p) return pl_fail(msg, len, PL_ERR_INVALID, "profile_db_save_profile: NULL argument");
    if (!p->machine[0])
        return to_msg(db, db_fail(db, PL_ERR_INVALID, "%s: the profile has no machine name", db->path), msg, len);
    graph *g = NULL;
    char gmsg[256] = "";
    pl_status st = graph_build_gpt(cfg, &g, gmsg, sizeof gmsg);
    if (st != PL_OK) return to_msg(db, db_fail(db, st, "%s", gmsg), msg, len);
    if (g->n_nodes != p->n_nodes) {
        st = db_fail(db, PL_ERR_INVALID, "%s: the profile has %d nodes but graph has %d", db->path, p->n_nodes,
                     g->n_nodes);
        graph_destroy(g);
        return to_msg(db, st, msg, len);
    }
    int kind = 0;
    if ((st = wtx_begin(db, &kind)) != PL_OK) {
        graph_destroy(g);
        return to_msg(db, st, msg, len);
    }
    int64_t mid = 0, gid = 0;
    const int nd = p->n_devices;
    profile_machine_info info = {.name = p->machine, .source = p->source[0] ? p->source : "measured"};
    if ((st = put_machine_in_tx(db, &info, &mid)) != PL_OK) goto out;
    if ((st = exec_id_int(db, S_DEVICE_TRIM, mid, nd, "removing old devices")) != PL_OK) goto out;
    for (int d = 0; d < nd; d++)
        if ((st = put_device_in_tx(db, mid, d, &p->devices[d])) != PL_OK) goto out;
    if ((st = exec_id_int(db, S_LINK_TRIM, mid, nd, "removing old links")) != PL_OK) goto out;
    {
        sqlite3_stmt *s = stmt_get(db, S_POINTS_CLEAR);
        if (!s) {
            st = PL_ERR_DB;
            goto out;
        }
        sqlite3_bind_int64(s, 1, mid);
        if ((st = step_done(db, s, "clearing link points")) != PL_OK) goto out;
    }
    for (int a = 0; a < nd; a++)
        for (int b = 0; b < nd; b++) {
            if (a == b) continue;
            const profile_link *l = &p->links[a * nd + b];
            if ((st = put_link_in_tx(db, mid, a, b, l->latency_us, l->bandwidth, NULL)) != PL_OK) goto out;
            for (int j = 0; j < l->n_points; j++)
                if ((st = put_point_in_tx(db, mid, a, b, l->bytes[j], l->us[j], NAN)) != PL_OK) goto out;
        }
    if ((st = put_graph_in_tx(db, g, p->node_mem, &gid)) != PL_OK) goto out;
    if ((st = exec_id_int(db, S_COST_CLEAR, mid, gid, "clearing node costs")) != PL_OK) goto out;
    for (int d = 0; d < nd; d++)
        for (int i = 0; i < p->n_nodes; i++) {
            for (int k = 0; k < p->n_mb; k++)
                for (int ph = PHASE_FWD; ph <= PHASE_BWD; ph++) {
                    /* a recorded split goes back as its parts of the backward */
                    const double us = p->cost_us[profile_cost_index(p, d, k, i, ph)];
                    const double wf = p->w_frac ? p->w_frac[i] : NAN;
                    if ((st = put_cost_in_tx(db, mid, gid, d, i, ph, p->mb_sizes[k], us, NAN, us * (1.0 - wf),
                                             us * wf)) != PL_OK)
                        goto out;
                }
            if ((st = put_cost_in_tx(db, mid, gid, d, i, PHASE_OPT, 0,
                                     p->cost_us[profile_cost_index(p, d, 0, i, PHASE_OPT)], NAN, NAN, NAN)) != PL_OK)
                goto out;
        }
out:
    st = wtx_end(db, kind, st);
    graph_destroy(g);
    return to_msg(db, st, msg, len);
}

/* "A, B (no costs), C" or "no graphs" into buf: what the file holds. */
static void describe_graphs(profile_db *db, char *buf, size_t len) {
    profile_db_graph_info *gi = NULL;
    int n = 0;
    buf[0] = 0;
    if (profile_db_list_graphs(db, &gi, &n) != PL_OK || n == 0) {
        snprintf(buf, len, "it holds no profiles");
        free(gi);
        return;
    }
    size_t off = (size_t)snprintf(buf, len, "it holds: ");
    int listed = 0;
    for (int i = 0; i < n && off < len; i++) {
        if (gi[i].n_costs == 0) continue;
        int w = snprintf(buf + off, len - off, "%s%s", listed ? ", " : "", gi[i].key);
        if (w < 0) break;
        off += (size_t)w;
        listed++;
    }
    if (!listed) snprintf(buf, len, "it holds no profiles");
    free(gi);
}

/* ---- loading, one part at a time ------------------------------------------
 * Each loader reads one part of a profile and returns PL_OK or a status with
 * the file's last error set (db_fail / sql_fail); profile_db_load_profile
 * turns that into its message once. */

/* The graph to load: cfg's (which must have costs), else the one whose costs
 * were written last. key holds cfg's key on entry when cfg is given. */
static pl_status load_pick_graph(profile_db *db, int64_t mid, const gpt_config *cfg, const char *key, int64_t *gid) {
    sqlite3_stmt *s = NULL;
    *gid = -1;
    if (cfg) {
        pl_status st = graph_id_by_key(db, key, gid, NULL);
        if (st == PL_OK) {
            /* a graph row without costs is no profile */
            if (!(s = stmt_get(db, S_COST_MB))) return PL_ERR_DB;
            sqlite3_bind_int64(s, 1, mid);
            sqlite3_bind_int64(s, 2, *gid);
            int has = sqlite3_step(s) == SQLITE_ROW;
            stmt_done(s);
            if (!has) st = PL_ERR_NOT_FOUND;
        }
        if (st == PL_ERR_NOT_FOUND) {
            char held[1024];
            describe_graphs(db, held, sizeof held);
            return db_fail(db, st, "%s has no profile for graph %s; %s", db->path, key, held);
        }
        return st;
    }
    if (!(s = stmt_get(db, S_COST_LATEST_GRAPH))) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) *gid = sqlite3_column_int64(s, 0);
    stmt_done(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sql_fail(db, "finding a graph");
    if (*gid < 0) return db_fail(db, PL_ERR_NOT_FOUND, "%s holds no profile; make one with placer profile", db->path);
    return PL_OK;
}

/* Graph gid's config and node count into *gc, *n_nodes and its key into key:
 * the six basic sizes are columns; the extensions (parallel residual,
 * RMSNorm, ...) are in the key's suffix, which must agree with them. */
static pl_status load_graph_config(profile_db *db, int64_t gid, char *key, size_t klen, gpt_config *gc,
                                   int *n_nodes) {
    sqlite3_stmt *s = stmt_get(db, S_GRAPH_GET);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, gid);
    if (sqlite3_step(s) != SQLITE_ROW) {
        pl_status st = sql_fail(db, "reading the graph");
        stmt_done(s);
        return st;
    }
    gpt_config cols;
    memset(&cols, 0, sizeof cols);
    col_text_copy(s, 0, key, klen);
    cols.vocab = sqlite3_column_int(s, 1);
    cols.d_model = sqlite3_column_int(s, 2);
    cols.n_heads = sqlite3_column_int(s, 3);
    cols.n_layers = sqlite3_column_int(s, 4);
    cols.seq_len = sqlite3_column_int(s, 5);
    cols.batch = sqlite3_column_int(s, 6);
    *n_nodes = sqlite3_column_int(s, 7);
    stmt_done(s);
    if (*n_nodes < 1) return db_fail(db, PL_ERR_INVALID, "%s: graph %s has no nodes", db->path, key);
    char km[160];
    if (gpt_config_from_key(key, gc, km, sizeof km) != PL_OK) return db_fail(db, PL_ERR_INVALID, "%s: %s", db->path, km);
    if (gc->vocab != cols.vocab || gc->d_model != cols.d_model || gc->n_heads != cols.n_heads ||
        gc->n_layers != cols.n_layers || gc->seq_len != cols.seq_len || gc->batch != cols.batch)
        return db_fail(db, PL_ERR_INVALID, "%s: graph %s does not match its sizes", db->path, key);
    return PL_OK;
}

/* The machine's device count; their indices must be 0..n-1. */
static pl_status load_count_devices(profile_db *db, int64_t mid, int *n_dev) {
    sqlite3_stmt *s = stmt_get(db, S_DEVICE_LIST);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    int rc, n = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (sqlite3_column_int(s, 0) != n) {
            stmt_done(s);
            return db_fail(db, PL_ERR_INVALID, "%s: device indices are not 0..n-1", db->path);
        }
        n++;
    }
    stmt_done(s);
    if (rc != SQLITE_DONE) return sql_fail(db, "reading devices");
    if (n < 1) return db_fail(db, PL_ERR_INVALID, "%s: the machine has no devices", db->path);
    *n_dev = n;
    return PL_OK;
}

/* The micro-batch sizes graph gid was costed at, into a new array *sizes
 * (caller frees, also on failure) of *n_mb entries. */
static pl_status load_mb_sizes(profile_db *db, int64_t mid, int64_t gid, const char *key, int **sizes, int *n_mb) {
    int n = 0, cap = 8;
    *n_mb = 0;
    if (!(*sizes = malloc(sizeof **sizes * (size_t)cap))) return db_fail(db, PL_ERR_NOMEM, "out of memory");
    sqlite3_stmt *s = stmt_get(db, S_COST_MB);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_int64(s, 2, gid);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int mb = sqlite3_column_int(s, 0);
        if (mb < 1) {
            stmt_done(s);
            return db_fail(db, PL_ERR_INVALID, "%s: a node cost has micro-batch size %d", db->path, mb);
        }
        if (n == cap) {
            int *grown = realloc(*sizes, sizeof **sizes * (size_t)(cap *= 2));
            if (!grown) {
                stmt_done(s);
                return db_fail(db, PL_ERR_NOMEM, "out of memory");
            }
            *sizes = grown;
        }
        (*sizes)[n++] = mb;
    }
    stmt_done(s);
    if (rc != SQLITE_DONE) return sql_fail(db, "reading micro-batch sizes");
    if (n == 0) return db_fail(db, PL_ERR_INVALID, "%s: the profile of %s has no forward or backward costs", db->path, key);
    *n_mb = n;
    return PL_OK;
}

/* The machine's name, source and precision, and each device's row. */
static pl_status load_machine_devices(profile_db *db, int64_t mid, profile_data *p) {
    sqlite3_stmt *s = stmt_get(db, S_MACHINE_FIRST);
    if (!s) return PL_ERR_DB;
    if (sqlite3_step(s) == SQLITE_ROW) {
        col_text_copy(s, 1, p->machine, sizeof p->machine);
        col_text_copy(s, 2, p->source, sizeof p->source);
    }
    stmt_done(s);
    char prec[16];
    pl_status st = profile_db_precision(db, prec, sizeof prec);
    if (st != PL_OK) return st;
    p->bf16 = !strcmp(prec, "bf16");
    if (!(s = stmt_get(db, S_DEVICE_LIST))) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    for (int d = 0; d < p->n_devices && sqlite3_step(s) == SQLITE_ROW; d++) {
        profile_device *dv = &p->devices[d];
        col_text_copy(s, 1, dv->name, sizeof dv->name);
        dv->mem_bytes = sqlite3_column_int64(s, 2);
        dv->peak_flops = sqlite3_column_double(s, 3);
        dv->mem_bw = sqlite3_column_double(s, 4);
        dv->launch_us = sqlite3_column_double(s, 5);
        dv->sm_count = sqlite3_column_int(s, 6);
    }
    stmt_done(s);
    return PL_OK;
}

/* Every node cost of graph gid into p->cost_us; all cells must be present
 * (an optimizer cost fills every micro-batch size). Where backward rows
 * carry their B and W parts (schema 4), p->w_frac gets each node's W share,
 * W / (B + W) summed over its rows that have both, NaN for nodes with none
 * (profile_w_frac derives theirs); no such row: p->w_frac stays NULL. */
static pl_status load_costs(profile_db *db, int64_t mid, int64_t gid, const char *key, profile_data *p) {
    const int n_dev = p->n_devices, n_mb = p->n_mb, n_nodes = p->n_nodes;
    const size_t n_cells = (size_t)n_dev * n_mb * n_nodes * PHASE_COUNT;
    unsigned char *seen = calloc(n_cells, 1);
    double *bw = calloc((size_t)n_nodes * 2, sizeof *bw); /* per node: sum of B, sum of W */
    if (!seen || !bw) {
        free(seen);
        free(bw);
        return db_fail(db, PL_ERR_NOMEM, "out of memory");
    }
    const int no_split = db->mode == PROFILE_DB_READ && db->opened_version >= 0 && db->opened_version < 4;
    sqlite3_stmt *s = stmt_get(db, no_split ? S_COST_LIST_V3 : S_COST_LIST);
    if (!s) {
        free(seen);
        free(bw);
        return PL_ERR_DB;
    }
    int any_split = 0;
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_int64(s, 2, gid);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int d = sqlite3_column_int(s, 0), i = sqlite3_column_int(s, 1), mb = sqlite3_column_int(s, 3);
        const char *ph_text = col_text(s, 2);
        int ph = !strcmp(ph_text, "fwd") ? PHASE_FWD : !strcmp(ph_text, "bwd") ? PHASE_BWD : PHASE_OPT;
        double us = col_double_or_nan(s, 4);
        if (d < 0 || d >= n_dev || i < 0 || i >= n_nodes) continue; /* rows of removed devices are ignored */
        if (ph == PHASE_BWD && profile_mb_index(p, mb) >= 0) {
            const double b = col_double_or_nan(s, 5), w = col_double_or_nan(s, 6);
            if (isfinite(b) && isfinite(w) && b >= 0 && w >= 0 && b + w > 0) {
                bw[2 * i] += b;
                bw[2 * i + 1] += w;
                any_split = 1;
            }
        }
        int k0 = 0, k1 = n_mb; /* the optimizer's cost is the same at every size */
        if (ph != PHASE_OPT) {
            k0 = profile_mb_index(p, mb);
            if (k0 < 0) continue;
            k1 = k0 + 1;
        }
        for (int k = k0; k < k1; k++) {
            size_t at = profile_cost_index(p, d, k, i, ph);
            p->cost_us[at] = us;
            seen[at] = 1;
        }
    }
    stmt_done(s);
    size_t missing = 0, first_missing = 0;
    for (size_t c = 0; c < n_cells; c++)
        if (!seen[c] && missing++ == 0) first_missing = c;
    free(seen);
    if (rc != SQLITE_DONE) {
        free(bw);
        return sql_fail(db, "reading node costs");
    }
    if (any_split && !missing) {
        free(p->w_frac);
        if (!(p->w_frac = malloc(sizeof *p->w_frac * (size_t)n_nodes))) {
            free(bw);
            return db_fail(db, PL_ERR_NOMEM, "out of memory");
        }
        for (int i = 0; i < n_nodes; i++)
            p->w_frac[i] = bw[2 * i] + bw[2 * i + 1] > 0 ? bw[2 * i + 1] / (bw[2 * i] + bw[2 * i + 1]) : NAN;
    }
    free(bw);
    if (!missing) return PL_OK;
    size_t c = first_missing;
    int ph = (int)(c % PHASE_COUNT), i = (int)(c / PHASE_COUNT % (size_t)n_nodes);
    int k = (int)(c / PHASE_COUNT / (size_t)n_nodes % (size_t)n_mb);
    int d = (int)(c / PHASE_COUNT / (size_t)n_nodes / (size_t)n_mb);
    return db_fail(db, PL_ERR_INVALID,
                   "%s: the profile of %s is incomplete: %zu of %zu node costs missing (first: device %d, "
                   "node %d, %s, micro-batch %d); resume the profiler",
                   db->path, key, missing, n_cells, d, i, PHASE_TEXT[ph], p->mb_sizes[k]);
}

/* Link a -> b's measured curve (bytes, us), when it has points, into l. */
static pl_status load_link_curve(profile_db *db, int64_t mid, int a, int b, profile_link *l) {
    int n_pts = 0, pcap = 64, rc;
    double *xb = malloc(sizeof *xb * (size_t)pcap), *xu = malloc(sizeof *xu * (size_t)pcap);
    sqlite3_stmt *s = xb && xu ? stmt_get(db, S_POINT_LIST) : NULL;
    pl_status st = PL_OK;
    if (!xb || !xu) st = db_fail(db, PL_ERR_NOMEM, "out of memory");
    else if (!s) st = PL_ERR_DB;
    if (st != PL_OK) {
        free(xb);
        free(xu);
        return st;
    }
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_int(s, 2, a);
    sqlite3_bind_int(s, 3, b);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (n_pts == pcap) {
            pcap *= 2;
            double *nb = realloc(xb, sizeof *xb * (size_t)pcap);
            if (nb) xb = nb;
            double *nu = realloc(xu, sizeof *xu * (size_t)pcap);
            if (nu) xu = nu;
            if (!nb || !nu) {
                rc = SQLITE_NOMEM;
                break;
            }
        }
        xb[n_pts] = sqlite3_column_double(s, 0);
        xu[n_pts] = sqlite3_column_double(s, 1);
        n_pts++;
    }
    stmt_done(s);
    if (rc == SQLITE_DONE && n_pts > 0) st = profile_link_set_curve(l, n_pts, xb, xu);
    else if (rc != SQLITE_DONE) st = rc == SQLITE_NOMEM ? PL_ERR_NOMEM : PL_ERR_DB;
    free(xb);
    free(xu);
    if (st == PL_ERR_DB) return sql_fail(db, "reading link points");
    if (st != PL_OK) return db_fail(db, st, "%s: could not load the curve %d -> %d", db->path, a, b);
    return PL_OK;
}

/* Every link between two devices (each must have a row) and its curve. */
static pl_status load_links(profile_db *db, int64_t mid, profile_data *p) {
    const int n_dev = p->n_devices;
    for (int a = 0; a < n_dev; a++)
        for (int b = 0; b < n_dev; b++) {
            if (a == b) continue;
            profile_link *l = &p->links[a * n_dev + b];
            sqlite3_stmt *s = stmt_get(db, S_LINK_GET);
            if (!s) return PL_ERR_DB;
            sqlite3_bind_int64(s, 1, mid);
            sqlite3_bind_int(s, 2, a);
            sqlite3_bind_int(s, 3, b);
            int rc = sqlite3_step(s);
            if (rc == SQLITE_ROW) {
                l->latency_us = sqlite3_column_double(s, 0);
                l->bandwidth = sqlite3_column_double(s, 1);
            }
            stmt_done(s);
            if (rc == SQLITE_DONE)
                return db_fail(db, PL_ERR_INVALID, "%s: the profile is incomplete: no link %d -> %d", db->path, a, b);
            if (rc != SQLITE_ROW) return sql_fail(db, "reading a link");
            pl_status st = load_link_curve(db, mid, a, b, l);
            if (st != PL_OK) return st;
        }
    return PL_OK;
}

/* Graph gid's node memory rows (files of schema 2 have one workspace
 * column); every node must have one. */
static pl_status load_node_mem(profile_db *db, int64_t gid, const char *key, profile_data *p) {
    const int n_nodes = p->n_nodes;
    const int one_ws = db->mode == PROFILE_DB_READ && db->opened_version >= 0 && db->opened_version < 3;
    sqlite3_stmt *s = stmt_get(db, one_ws ? S_NODE_LIST_V2 : S_NODE_LIST);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, gid);
    int n_seen = 0, rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int i = sqlite3_column_int(s, 0);
        if (i < 0 || i >= n_nodes) continue;
        profile_node_mem *m = &p->node_mem[i];
        m->param_bytes = sqlite3_column_int64(s, 1);
        m->out_bytes_per_sample = sqlite3_column_int64(s, 2);
        m->act_bytes_per_sample = sqlite3_column_int64(s, 3);
        m->workspace_bytes = sqlite3_column_int64(s, 4);
        m->fwd_workspace_bytes = sqlite3_column_int64(s, 5);
        m->bwd_workspace_bytes = sqlite3_column_int64(s, 6);
        n_seen++;
    }
    stmt_done(s);
    if (rc != SQLITE_DONE) return sql_fail(db, "reading nodes");
    if (n_seen != n_nodes)
        return db_fail(db, PL_ERR_INVALID, "%s: graph %s lists %d of its %d nodes", db->path, key, n_seen, n_nodes);
    return PL_OK;
}

pl_status profile_db_load_profile(profile_db *db, const gpt_config *cfg, profile_data **out, gpt_config *cfg_out,
                                  char *msg, size_t len) {
    if (out) *out = NULL;
    if (!db || !out) return pl_fail(msg, len, PL_ERR_INVALID, "profile_db_load_profile: NULL argument");
    int64_t mid = 0, gid = -1;
    char key[PROFILE_NAME_LEN] = "";
    profile_data *p = NULL;
    int *sizes = NULL;
    int n_nodes = 0, n_dev = 0, n_mb = 0;
    gpt_config gc;
    memset(&gc, 0, sizeof gc);

    if (cfg) gpt_config_key(cfg, key, sizeof key);
    pl_status st = file_machine_id(db, &mid);
    if (st == PL_ERR_NOT_FOUND)
        db_fail(db, st, "%s holds no profile%s%s; make one with placer profile", db->path, cfg ? " for graph " : "",
                key);
    if (st != PL_OK) return to_msg(db, st, msg, len);
    if ((st = load_pick_graph(db, mid, cfg, key, &gid)) != PL_OK ||
        (st = load_graph_config(db, gid, key, sizeof key, &gc, &n_nodes)) != PL_OK ||
        (st = load_count_devices(db, mid, &n_dev)) != PL_OK ||
        (st = load_mb_sizes(db, mid, gid, key, &sizes, &n_mb)) != PL_OK)
        goto out;
    if ((st = profile_data_create(n_dev, n_nodes, n_mb, sizes, &p)) != PL_OK) {
        db_fail(db, st, "out of memory loading the profile");
        goto out;
    }
    snprintf(p->graph_key, sizeof p->graph_key, "%s", key);
    if ((st = load_machine_devices(db, mid, p)) != PL_OK || (st = load_costs(db, mid, gid, key, p)) != PL_OK ||
        (st = load_links(db, mid, p)) != PL_OK || (st = load_node_mem(db, gid, key, p)) != PL_OK)
        goto out;
    if (cfg_out) *cfg_out = gc;
    *out = p;
    p = NULL;
out:
    profile_data_destroy(p);
    free(sizes);
    return to_msg(db, st, msg, len);
}
