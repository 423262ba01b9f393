/*
 * calib_db.c: what calib keeps in the profile store (see calib_db.h): its
 * confirmations and calibrations turned into the store's rows
 * (profile/store_calib.h, where every statement lives), and stored
 * measurements read back as a calibration dataset.
 */
#include "calib_db.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"
#include "store_calib.h"

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
    schedule s = schedule_make(1, SCHED_1F1B); /* every field set (chunks 1, not paired); order and m below */
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

/* The "rounds" text of side sd into buf: "[a,b,...]", the medians of its
 * confirmation rounds (-1 for one not timed). */
static void rounds_json(const calib_side *sd, int confirm_rounds, char *buf, size_t len) {
    int w = snprintf(buf, len, "[");
    for (int r = 0; r < confirm_rounds && sd->confirm_us; r++)
        w += snprintf(buf + w, len - (size_t)w, "%s%.3f", r ? "," : "",
                      isfinite(sd->confirm_us[r]) ? sd->confirm_us[r] : -1.0);
    snprintf(buf + w, len - (size_t)w, "]");
}

pl_status calib_db_save_confirm(profile_db *db, const calib_confirm *c, const calib_confirm_config *cfg,
                                const char *timer_name, int64_t *id, char *msg, size_t len) {
    if (!db || !c || !cfg || !cfg->graph_key) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    const size_t plen = (size_t)c->n_nodes * 4 + 8, rlen = 32 + (size_t)c->confirm_rounds * 24;
    const int n = c->n_sides;
    char *ptext = malloc(plen * (size_t)(n > 0 ? n : 1));
    char *rounds = malloc(rlen * (size_t)(n > 0 ? n : 1));
    profile_calib_side *rows = calloc((size_t)(n > 0 ? n : 1), sizeof *rows);
    pl_status st = PL_OK;
    if (!ptext || !rounds || !rows) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int s = 0; s < n; s++) {
        const calib_side *sd = &c->sides[s];
        profile_calib_side *w = &rows[s];
        int n_oom = 0;
        for (int i = 0; i < c->n_cand; i++) n_oom += c->cands[i].side == s && c->cands[i].oom;
        const calib_candidate *k = sd->pick >= 0 ? &c->cands[sd->pick] : NULL;
        rounds_json(sd, c->confirm_rounds, rounds + (size_t)s * rlen, rlen);
        w->side = sd->name;
        w->n_candidates = sd->n_cand;
        w->n_oom = n_oom;
        w->n = sd->summary.n;
        w->mean_us = sd->summary.n ? sd->summary.mean : NAN;
        w->sd_us = sd->summary.n ? sd->summary.sd : NAN;
        w->se_us = sd->summary.n ? sd->summary.se : NAN;
        w->rounds = rounds + (size_t)s * rlen;
        if (k) { /* the pick; without one these stay NULL in the row */
            placement_format(k->placement, c->n_nodes, ptext + (size_t)s * plen, plen);
            w->candidate = k->label;
            w->placement = ptext + (size_t)s * plen;
            w->pred_us = k->pred_us;
            w->pred_peak = k->pred_peak;
            w->peak_bytes = k->peak_bytes;
        }
    }
    const profile_calib_confirm row = {
        .label = cfg->label,
        .run_id = cfg->run_id,
        .graph_key = cfg->graph_key,
        .micro_batches = cfg->sched.micro_batches,
        .schedule = schedule_order_name(cfg->sched.order),
        .mem_cap = cfg->mem_cap,
        .selection_rounds = cfg->selection_rounds,
        .confirm_rounds = cfg->confirm_rounds,
        .steps = cfg->steps,
        .warmup = cfg->warmup,
        .seed = cfg->seed,
        .timer = timer_name,
    };
    if ((st = profile_db_calib_save_confirm(db, &row, rows, n, id)) != PL_OK)
        pl_fail(msg, len, st, "cannot store the confirmation: %s", profile_db_last_error(db));
out:
    free(ptext);
    free(rounds);
    free(rows);
    return st;
}

pl_status calib_db_save_trace(profile_db *db, int64_t confirm_id, const char *side, const char *placement,
                              const char *json, char *msg, size_t len) {
    if (!db || !side || !placement || !json) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    pl_status st = profile_db_calib_save_trace(db, confirm_id, side, placement, json);
    if (st != PL_OK) return pl_fail(msg, len, st, "cannot store the trace: %s", profile_db_last_error(db));
    return PL_OK;
}

/* "{"name":v,...}" of the six parameters (or their errors; null where not
 * finite) into buf. */
static void params_json(char *buf, size_t len, const double *v) {
    int w = snprintf(buf, len, "{");
    for (int i = 0; i < SIM_N_PARAMS && w > 0 && (size_t)w < len; i++) {
        if (isfinite(v[i])) w += snprintf(buf + w, len - (size_t)w, "%s\"%s\":%.9g", i ? "," : "", sim_param_name(i), v[i]);
        else w += snprintf(buf + w, len - (size_t)w, "%s\"%s\":null", i ? "," : "", sim_param_name(i));
    }
    if (w > 0 && (size_t)w < len) snprintf(buf + w, len - (size_t)w, "}");
}

/* params_json of a parameter set. */
static void sim_params_json(char *buf, size_t len, const sim_params *prm) {
    double v[SIM_N_PARAMS];
    sim_params tmp = *prm;
    for (int i = 0; i < SIM_N_PARAMS; i++) v[i] = *sim_param_ptr(&tmp, i);
    params_json(buf, len, v);
}

/* A held-out or training accuracy as the store keeps it. */
static profile_calib_accuracy accuracy_row(const calib_eval *e) {
    profile_calib_accuracy a = {e->mape, e->max_ape, e->tau, e->mem_mape, e->mem_max_ape};
    return a;
}

pl_status calib_db_save_fit(profile_db *db, const calib_fit_record *r, const calib_dataset *d, const int *idx,
                            const int *is_test, const double *pred_before, const double *pred_after,
                            const int64_t *pred_peak, int n, int64_t *id, char *msg, size_t len) {
    if (!db || !r || !r->fit || !r->graph_key || !d || (n > 0 && (!idx || !is_test)))
        return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    char pj[1024], ej[1024], bj[1024];
    sim_params start;
    if (r->before) start = *r->before;
    else sim_params_default(&start);
    sim_params_json(pj, sizeof pj, &r->fit->params);
    params_json(ej, sizeof ej, r->fit->err);
    sim_params_json(bj, sizeof bj, &start);
    const size_t plen = (size_t)d->n_nodes * 4 + 8;
    char *ptext = malloc(plen * (size_t)(n > 0 ? n : 1));
    profile_calib_fit_point *pts = calloc((size_t)(n > 0 ? n : 1), sizeof *pts);
    pl_status st = PL_OK;
    if (!ptext || !pts) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int j = 0; j < n; j++) {
        const int i = idx[j];
        char *pt = ptext + (size_t)j * plen;
        placement_format(d->placements + (size_t)i * d->n_nodes, d->n_nodes, pt, plen);
        pts[j] = (profile_calib_fit_point){
            .measurement_id = d->measurement_id[i],
            .split = is_test[j] ? "test" : "train",
            .placement = pt,
            .micro_batches = d->sched[i].micro_batches,
            .schedule = schedule_order_name(d->sched[i].order),
            .measured_us = d->step_us[i],
            .pred_before_us = pred_before ? pred_before[j] : NAN,
            .pred_after_us = pred_after ? pred_after[j] : NAN,
            .measured_peak = d->peak_bytes[i],
            .pred_peak = pred_peak ? pred_peak[j] : 0,
        };
    }
    const profile_calib_fit row = {
        .graph_key = r->graph_key,
        .timer = r->timer,
        .seed = r->seed,
        .holdout = r->holdout,
        .n_train = r->train_after.n,
        .n_test = r->test_after.n,
        .iterations = r->fit->iterations,
        .chisq0 = r->fit->chisq0,
        .chisq = r->fit->chisq,
        .before = accuracy_row(&r->test_before),
        .after = accuracy_row(&r->test_after),
        .train_before_mape = r->train_before.mape,
        .train_after_mape = r->train_after.mape,
        .params = pj,
        .errors = ej,
        .before_params = bj,
    };
    if ((st = profile_db_calib_save_fit(db, &row, pts, n, id)) != PL_OK)
        pl_fail(msg, len, st, "cannot store the fit: %s", profile_db_last_error(db));
out:
    free(ptext);
    free(pts);
    return st;
}
