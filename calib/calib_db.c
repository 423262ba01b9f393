/*
 * calib_db.c: calib's tables in the profile store, and reading stored
 * measurements back as a calibration dataset (see calib_db.h).
 */
#include "calib_db.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"

static const char *SCHEMA =
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

pl_status calib_model_load(profile_db *db, const char *config, calib_model *m, char *msg, size_t len) {
    if (!db || !m) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    memset(m, 0, sizeof *m);
    gpt_config want;
    pl_status st;
    if (config && (st = gpt_config_parse(config, &want, msg, len)) != PL_OK) return st;
    st = profile_db_load_profile(db, config ? &want : NULL, &m->p, &m->cfg, msg, len);
    if (st != PL_OK) return st;
    st = graph_build_gpt(&m->cfg, &m->g, msg, len);
    if (st != PL_OK) {
        calib_model_free(m);
        return st;
    }
    gpt_config_key(&m->cfg, m->key, sizeof m->key);
    return PL_OK;
}

void calib_model_free(calib_model *m) {
    if (!m) return;
    graph_destroy(m->g);
    profile_data_destroy(m->p);
    m->g = NULL;
    m->p = NULL;
}

pl_status calib_parse_int_list(const char *text, int *out, int max, int *n, char *msg, size_t len) {
    if (!text || !out || !n) return pl_fail(msg, len, PL_ERR_INVALID, "missing list");
    int k = 0;
    const char *p = text;
    for (;;) {
        char *end = NULL;
        if (*p < '0' || *p > '9') return pl_fail(msg, len, PL_ERR_INVALID, "'%s' is not a list of device numbers like 0,1", text);
        long v = strtol(p, &end, 10);
        if (v > 1000000) return pl_fail(msg, len, PL_ERR_INVALID, "device number %ld is too large", v);
        if (k == max) return pl_fail(msg, len, PL_ERR_INVALID, "more than %d entries in '%s'", max, text);
        out[k++] = (int)v;
        if (*end == 0) break;
        if (*end != ',') return pl_fail(msg, len, PL_ERR_INVALID, "'%s' is not a list of device numbers like 0,1", text);
        p = end + 1;
    }
    *n = k;
    return PL_OK;
}

pl_status calib_db_ensure(profile_db *db, char *msg, size_t len) {
    sqlite3 *h = db ? profile_db_handle(db) : NULL;
    if (!h) return pl_fail(msg, len, PL_ERR_INVALID, "no database");
    char *err = NULL;
    if (sqlite3_exec(h, SCHEMA, NULL, NULL, &err) != SQLITE_OK) {
        pl_fail(msg, len, PL_ERR_DB, "cannot create calibration tables: %s", err ? err : sqlite3_errmsg(h));
        sqlite3_free(err);
        return PL_ERR_DB;
    }
    return PL_OK;
}

pl_status calib_db_load_params(profile_db *db, const char *graph_key, sim_params *prm, int *found, char *msg,
                               size_t len) {
    if (!db || !graph_key || !prm) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    sim_params_default(prm);
    const char *names[SIM_N_PARAMS];
    double vals[SIM_N_PARAMS];
    for (int i = 0; i < SIM_N_PARAMS; i++) {
        names[i] = sim_param_name(i);
        vals[i] = *sim_param_ptr(prm, i);
    }
    int nf = 0;
    pl_status st = profile_db_load_sim_params(db, graph_key, SIM_N_PARAMS, names, vals, &nf);
    if (st != PL_OK)
        return pl_fail(msg, len, st, "cannot read simulator parameters: %s", profile_db_last_error(db));
    for (int i = 0; i < SIM_N_PARAMS; i++) *sim_param_ptr(prm, i) = vals[i];
    if (found) *found = nf;
    return PL_OK;
}

pl_status calib_db_save_params(profile_db *db, const char *graph_key, const sim_params *prm, const char *label,
                               char *msg, size_t len) {
    if (!db || !graph_key || !prm) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    const char *names[SIM_N_PARAMS];
    double vals[SIM_N_PARAMS];
    sim_params tmp = *prm;
    for (int i = 0; i < SIM_N_PARAMS; i++) {
        names[i] = sim_param_name(i);
        vals[i] = *sim_param_ptr(&tmp, i);
    }
    pl_status st = profile_db_save_sim_params(db, graph_key, SIM_N_PARAMS, names, vals, label);
    if (st != PL_OK)
        return pl_fail(msg, len, st, "cannot store simulator parameters: %s", profile_db_last_error(db));
    return PL_OK;
}

typedef struct {
    const char *graph_key;
    int n_devices;
    calib_dataset *d;
    int *tmp;          /* d->n_nodes scratch */
    int skipped;
    pl_status st;      /* first hard failure (allocation) */
} load_ctx;

static int load_row(void *vctx, int64_t id, const profile_measurement *m, const char *measured_at) {
    load_ctx *c = vctx;
    (void)measured_at;
    schedule s;
    if (!m->graph_key || strcmp(m->graph_key, c->graph_key) || !m->placement || !m->schedule ||
        schedule_parse_order(m->schedule, &s.order, NULL, 0) != PL_OK ||
        placement_parse(m->placement, c->d->n_nodes, c->n_devices, c->tmp, NULL, 0) != PL_OK ||
        m->micro_batches < 1) {
        c->skipped++;
        return 0;
    }
    s.micro_batches = m->micro_batches;
    s.chunks = 1;
    pl_status st = calib_dataset_add(c->d, c->tmp, &s, m->mem_cap, m->step_us, m->spread_us, m->peak_bytes_max,
                                     m->oom, id);
    if (st != PL_OK) {
        c->st = st;
        return 1;
    }
    return 0;
}

pl_status calib_db_load_dataset(profile_db *db, const char *graph_key, const char *purpose, int n_devices,
                                calib_dataset *d, int *skipped, char *msg, size_t len) {
    if (!db || !graph_key || !d) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    load_ctx c = {graph_key, n_devices, d, malloc(sizeof(int) * (size_t)d->n_nodes), 0, PL_OK};
    if (!c.tmp) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    pl_status st = profile_db_measurements(db, purpose, load_row, &c);
    free(c.tmp);
    if (st != PL_OK) return pl_fail(msg, len, st, "cannot read measurements: %s", profile_db_last_error(db));
    if (c.st != PL_OK) return pl_fail(msg, len, c.st, "out of memory reading measurements");
    if (skipped) *skipped = c.skipped;
    return PL_OK;
}

/* Bind a double, NULL when not finite. */
static int bind_real(sqlite3_stmt *s, int i, double v) {
    return isfinite(v) ? sqlite3_bind_double(s, i, v) : sqlite3_bind_null(s, i);
}

/* Begin a transaction on db: our own (returned 1) unless the caller has
 * one open (returned 0). Negative on failure. */
static int tx_begin(profile_db *db) {
    sqlite3 *h = profile_db_handle(db);
    if (!sqlite3_get_autocommit(h)) return 0;
    return profile_db_begin(db) == PL_OK ? 1 : -1;
}

static pl_status tx_end(profile_db *db, int own, pl_status st) {
    if (own != 1) return st;
    if (st == PL_OK) return profile_db_commit(db);
    profile_db_rollback(db);
    return st;
}

pl_status calib_db_save_confirm(profile_db *db, const calib_confirm *c, const calib_confirm_config *cfg,
                                const char *timer_name, int64_t *id, char *msg, size_t len) {
    if (!db || !c || !cfg || !cfg->graph_key) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    pl_status st = calib_db_ensure(db, msg, len);
    if (st != PL_OK) return st;
    sqlite3 *h = profile_db_handle(db);
    int own = tx_begin(db);
    if (own < 0) return pl_fail(msg, len, PL_ERR_DB, "cannot begin a transaction: %s", sqlite3_errmsg(h));
    sqlite3_stmt *s1 = NULL, *s2 = NULL;
    char *ptext = NULL, *rounds = NULL;
    size_t plen = (size_t)c->n_nodes * 4 + 8, rlen = 32 + (size_t)c->confirm_rounds * 24;
    ptext = malloc(plen);
    rounds = malloc(rlen);
    if (!ptext || !rounds) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (sqlite3_prepare_v2(h,
                           "INSERT INTO calib_confirm(label, run_id, graph_key, micro_batches, schedule, mem_cap,"
                           " selection_rounds, confirm_rounds, steps, warmup, seed, timer)"
                           " VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &s1, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(h,
                           "INSERT INTO calib_confirm_side(confirm_id, side_idx, side, candidate, placement,"
                           " n_candidates, n_oom, n, mean_us, sd_us, se_us, pred_us, pred_peak, peak_bytes, rounds)"
                           " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &s2, NULL) != SQLITE_OK) {
        st = pl_fail(msg, len, PL_ERR_DB, "cannot prepare: %s", sqlite3_errmsg(h));
        goto out;
    }
    sqlite3_bind_text(s1, 1, cfg->label ? cfg->label : "", -1, SQLITE_TRANSIENT);
    if (cfg->run_id) sqlite3_bind_int64(s1, 2, cfg->run_id);
    else sqlite3_bind_null(s1, 2);
    sqlite3_bind_text(s1, 3, cfg->graph_key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(s1, 4, cfg->sched.micro_batches);
    sqlite3_bind_text(s1, 5, schedule_order_name(cfg->sched.order), -1, SQLITE_STATIC);
    sqlite3_bind_int64(s1, 6, cfg->mem_cap);
    sqlite3_bind_int(s1, 7, cfg->selection_rounds);
    sqlite3_bind_int(s1, 8, cfg->confirm_rounds);
    sqlite3_bind_int(s1, 9, cfg->steps);
    sqlite3_bind_int(s1, 10, cfg->warmup);
    sqlite3_bind_int64(s1, 11, (sqlite3_int64)cfg->seed);
    sqlite3_bind_text(s1, 12, timer_name ? timer_name : "", -1, SQLITE_TRANSIENT);
    if (sqlite3_step(s1) != SQLITE_DONE) {
        st = pl_fail(msg, len, PL_ERR_DB, "cannot store the confirmation: %s", sqlite3_errmsg(h));
        goto out;
    }
    int64_t cid = sqlite3_last_insert_rowid(h);
    for (int s = 0; s < c->n_sides; s++) {
        const calib_side *sd = &c->sides[s];
        int n_oom = 0;
        for (int i = 0; i < c->n_cand; i++) n_oom += c->cands[i].side == s && c->cands[i].oom;
        const calib_candidate *k = sd->pick >= 0 ? &c->cands[sd->pick] : NULL;
        int w = snprintf(rounds, rlen, "[");
        for (int r = 0; r < c->confirm_rounds && sd->confirm_us; r++)
            w += snprintf(rounds + w, rlen - (size_t)w, "%s%.3f", r ? "," : "",
                          isfinite(sd->confirm_us[r]) ? sd->confirm_us[r] : -1.0);
        snprintf(rounds + w, rlen - (size_t)w, "]");
        sqlite3_reset(s2);
        sqlite3_clear_bindings(s2);
        sqlite3_bind_int64(s2, 1, cid);
        sqlite3_bind_int(s2, 2, s);
        sqlite3_bind_text(s2, 3, sd->name, -1, SQLITE_TRANSIENT);
        if (k) {
            placement_format(k->placement, c->n_nodes, ptext, plen);
            sqlite3_bind_text(s2, 4, k->label, -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(s2, 5, ptext, -1, SQLITE_TRANSIENT);
        }
        sqlite3_bind_int(s2, 6, sd->n_cand);
        sqlite3_bind_int(s2, 7, n_oom);
        sqlite3_bind_int(s2, 8, sd->summary.n);
        bind_real(s2, 9, sd->summary.n ? sd->summary.mean : NAN);
        bind_real(s2, 10, sd->summary.n ? sd->summary.sd : NAN);
        bind_real(s2, 11, sd->summary.n ? sd->summary.se : NAN);
        if (k) {
            bind_real(s2, 12, k->pred_us);
            sqlite3_bind_int64(s2, 13, k->pred_peak);
            sqlite3_bind_int64(s2, 14, k->peak_bytes);
        }
        sqlite3_bind_text(s2, 15, rounds, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(s2) != SQLITE_DONE) {
            st = pl_fail(msg, len, PL_ERR_DB, "cannot store a side: %s", sqlite3_errmsg(h));
            goto out;
        }
    }
    if (id) *id = cid;
out:
    sqlite3_finalize(s1);
    sqlite3_finalize(s2);
    free(ptext);
    free(rounds);
    st = tx_end(db, own, st);
    if (st != PL_OK && msg && len && !*msg) pl_fail(msg, len, st, "cannot commit: %s", sqlite3_errmsg(h));
    return st;
}

pl_status calib_db_save_trace(profile_db *db, int64_t confirm_id, const char *side, const char *placement,
                              const char *json, char *msg, size_t len) {
    if (!db || !side || !placement || !json) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    pl_status st = calib_db_ensure(db, msg, len);
    if (st != PL_OK) return st;
    sqlite3 *h = profile_db_handle(db);
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(h, "INSERT INTO calib_trace(confirm_id, side, placement, json) VALUES(?,?,?,?)", -1, &s,
                           NULL) != SQLITE_OK)
        return pl_fail(msg, len, PL_ERR_DB, "cannot prepare: %s", sqlite3_errmsg(h));
    sqlite3_bind_int64(s, 1, confirm_id);
    sqlite3_bind_text(s, 2, side, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 3, placement, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 4, json, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(s) != SQLITE_DONE) st = pl_fail(msg, len, PL_ERR_DB, "cannot store the trace: %s", sqlite3_errmsg(h));
    sqlite3_finalize(s);
    return st;
}

/* "[a,b,...]" of the six parameters (or their errors) into buf. */
static void params_json(char *buf, size_t len, const double *v) {
    int w = snprintf(buf, len, "{");
    for (int i = 0; i < SIM_N_PARAMS && w > 0 && (size_t)w < len; i++) {
        if (isfinite(v[i])) w += snprintf(buf + w, len - (size_t)w, "%s\"%s\":%.9g", i ? "," : "", sim_param_name(i), v[i]);
        else w += snprintf(buf + w, len - (size_t)w, "%s\"%s\":null", i ? "," : "", sim_param_name(i));
    }
    if (w > 0 && (size_t)w < len) snprintf(buf + w, len - (size_t)w, "}");
}

pl_status calib_db_save_fit(profile_db *db, const calib_fit_record *r, const calib_dataset *d, const int *idx,
                            const int *is_test, const double *pred_before, const double *pred_after,
                            const int64_t *pred_peak, int n, int64_t *id, char *msg, size_t len) {
    if (!db || !r || !r->fit || !r->graph_key || !d || (n > 0 && (!idx || !is_test)))
        return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    pl_status st = calib_db_ensure(db, msg, len);
    if (st != PL_OK) return st;
    sqlite3 *h = profile_db_handle(db);
    int own = tx_begin(db);
    if (own < 0) return pl_fail(msg, len, PL_ERR_DB, "cannot begin a transaction: %s", sqlite3_errmsg(h));
    sqlite3_stmt *s1 = NULL, *s2 = NULL;
    size_t plen = (size_t)d->n_nodes * 4 + 8;
    char *ptext = malloc(plen);
    char pj[1024], ej[1024], bj[1024];
    double v[SIM_N_PARAMS];
    sim_params tmp = r->fit->params;
    for (int i = 0; i < SIM_N_PARAMS; i++) v[i] = *sim_param_ptr(&tmp, i);
    params_json(pj, sizeof pj, v);
    params_json(ej, sizeof ej, r->fit->err);
    if (r->before) tmp = *r->before;
    else sim_params_default(&tmp);
    for (int i = 0; i < SIM_N_PARAMS; i++) v[i] = *sim_param_ptr(&tmp, i);
    params_json(bj, sizeof bj, v);
    if (!ptext) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (sqlite3_prepare_v2(h,
                           "INSERT INTO calib_fit(graph_key, timer, seed, holdout, n_train, n_test, iterations,"
                           " chisq0, chisq, before_mape, before_max_ape, before_tau, before_mem_mape,"
                           " before_mem_max_ape, after_mape, after_max_ape, after_tau, after_mem_mape,"
                           " after_mem_max_ape, train_before_mape, train_after_mape, params, errors, before_params)"
                           " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &s1, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(h,
                           "INSERT INTO calib_fit_point(fit_id, measurement_id, split, placement, micro_batches,"
                           " schedule, measured_us, pred_before_us, pred_after_us, measured_peak, pred_peak)"
                           " VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &s2, NULL) != SQLITE_OK) {
        st = pl_fail(msg, len, PL_ERR_DB, "cannot prepare: %s", sqlite3_errmsg(h));
        goto out;
    }
    int k = 1;
    sqlite3_bind_text(s1, k++, r->graph_key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s1, k++, r->timer ? r->timer : "", -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s1, k++, (sqlite3_int64)r->seed);
    sqlite3_bind_double(s1, k++, r->holdout);
    sqlite3_bind_int(s1, k++, r->train_after.n);
    sqlite3_bind_int(s1, k++, r->test_after.n);
    sqlite3_bind_int(s1, k++, r->fit->iterations);
    bind_real(s1, k++, r->fit->chisq0);
    bind_real(s1, k++, r->fit->chisq);
    const calib_eval *e[2] = {&r->test_before, &r->test_after};
    for (int j = 0; j < 2; j++) {
        bind_real(s1, k++, e[j]->mape);
        bind_real(s1, k++, e[j]->max_ape);
        bind_real(s1, k++, e[j]->tau);
        bind_real(s1, k++, e[j]->mem_mape);
        bind_real(s1, k++, e[j]->mem_max_ape);
    }
    bind_real(s1, k++, r->train_before.mape);
    bind_real(s1, k++, r->train_after.mape);
    sqlite3_bind_text(s1, k++, pj, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s1, k++, ej, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s1, k++, bj, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(s1) != SQLITE_DONE) {
        st = pl_fail(msg, len, PL_ERR_DB, "cannot store the fit: %s", sqlite3_errmsg(h));
        goto out;
    }
    int64_t fid = sqlite3_last_insert_rowid(h);
    for (int j = 0; j < n; j++) {
        int i = idx[j];
        placement_format(d->placements + (size_t)i * d->n_nodes, d->n_nodes, ptext, plen);
        sqlite3_reset(s2);
        sqlite3_clear_bindings(s2);
        sqlite3_bind_int64(s2, 1, fid);
        if (d->measurement_id[i]) sqlite3_bind_int64(s2, 2, d->measurement_id[i]);
        sqlite3_bind_text(s2, 3, is_test[j] ? "test" : "train", -1, SQLITE_STATIC);
        sqlite3_bind_text(s2, 4, ptext, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(s2, 5, d->sched[i].micro_batches);
        sqlite3_bind_text(s2, 6, schedule_order_name(d->sched[i].order), -1, SQLITE_STATIC);
        bind_real(s2, 7, d->step_us[i]);
        bind_real(s2, 8, pred_before ? pred_before[j] : NAN);
        bind_real(s2, 9, pred_after ? pred_after[j] : NAN);
        sqlite3_bind_int64(s2, 10, d->peak_bytes[i]);
        sqlite3_bind_int64(s2, 11, pred_peak ? pred_peak[j] : 0);
        if (sqlite3_step(s2) != SQLITE_DONE) {
            st = pl_fail(msg, len, PL_ERR_DB, "cannot store a fit point: %s", sqlite3_errmsg(h));
            goto out;
        }
    }
    if (id) *id = fid;
out:
    sqlite3_finalize(s1);
    sqlite3_finalize(s2);
    free(ptext);
    return tx_end(db, own, st);
}
