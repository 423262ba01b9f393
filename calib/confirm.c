/*
 * confirm.c: the head-to-head protocol (see confirm.h for the why).
 */
#include "confirm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"
#include "util.h"

void calib_confirm_config_default(calib_confirm_config *c) {
    memset(c, 0, sizeof *c);
    c->sched = schedule_make(1, SCHED_GPIPE);
    c->selection_rounds = 4;
    c->confirm_rounds = 8;
    c->steps = 10;
    c->warmup = 2;
    c->seed = 1;
}

pl_status calib_confirm_create(int n_nodes, int n_devices, calib_confirm **out) {
    if (!out || n_nodes < 1 || n_devices < 1 || n_devices > PLACEMENT_MAX_DEVICES) return PL_ERR_INVALID;
    calib_confirm *c = calloc(1, sizeof *c);
    if (!c) return PL_ERR_NOMEM;
    c->n_nodes = n_nodes;
    c->n_devices = n_devices;
    for (int s = 0; s < CALIB_MAX_SIDES; s++) c->sides[s].pick = -1;
    *out = c;
    return PL_OK;
}

void calib_confirm_destroy(calib_confirm *c) {
    if (!c) return;
    for (int i = 0; i < c->n_cand; i++) {
        free(c->cands[i].placement);
        free(c->cands[i].select_us);
    }
    for (int s = 0; s < c->n_sides; s++) free(c->sides[s].confirm_us);
    free(c->cands);
    free(c->timings);
    free(c);
}

pl_status calib_confirm_add(calib_confirm *c, const char *side, const char *label, const int *placement,
                            int *added, char *msg, size_t len) {
    if (added) *added = 0;
    if (!c || !side || !*side || !placement) return pl_fail(msg, len, PL_ERR_INVALID, "missing side or placement");
    if (c->selection_rounds) return pl_fail(msg, len, PL_ERR_INVALID, "candidates must be added before the run");
    if (strlen(side) >= CALIB_NAME_LEN) return pl_fail(msg, len, PL_ERR_INVALID, "side name '%s' is too long", side);
    pl_status st = placement_validate(placement, c->n_nodes, c->n_devices, msg, len);
    if (st != PL_OK) return st;
    int s = 0;
    while (s < c->n_sides && strcmp(c->sides[s].name, side)) s++;
    if (s == c->n_sides) {
        if (s == CALIB_MAX_SIDES) return pl_fail(msg, len, PL_ERR_INVALID, "more than %d sides", CALIB_MAX_SIDES);
        snprintf(c->sides[s].name, CALIB_NAME_LEN, "%s", side);
        c->sides[s].pick = -1;
        c->n_sides++;
    }
    for (int i = 0; i < c->n_cand; i++)
        if (c->cands[i].side == s &&
            !memcmp(c->cands[i].placement, placement, sizeof(int) * (size_t)c->n_nodes))
            return PL_OK;
    if (c->n_cand == c->cap_cand) {
        int cap = c->cap_cand ? 2 * c->cap_cand : 16;
        calib_candidate *nc = realloc(c->cands, sizeof *nc * (size_t)cap);
        if (!nc) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        c->cands = nc;
        c->cap_cand = cap;
    }
    calib_candidate *k = &c->cands[c->n_cand];
    memset(k, 0, sizeof *k);
    k->placement = malloc(sizeof(int) * (size_t)c->n_nodes);
    if (!k->placement) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    memcpy(k->placement, placement, sizeof(int) * (size_t)c->n_nodes);
    k->side = s;
    snprintf(k->label, CALIB_LABEL_LEN, "%s", label ? label : "");
    k->pred_us = NAN;
    k->select_median = NAN;
    c->n_cand++;
    c->sides[s].n_cand++;
    if (added) *added = 1;
    return PL_OK;
}

pl_status calib_confirm_predict(calib_confirm *c, sim_ctx *ctx, const schedule *s, int64_t mem_cap,
                                const sim_params *prm, char *msg, size_t len) {
    if (!c || !ctx || !s) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    int64_t caps[SIM_MAX_DEVICES];
    for (int d = 0; d < SIM_MAX_DEVICES; d++) caps[d] = mem_cap;
    for (int i = 0; i < c->n_cand; i++) {
        sim_result r;
        pl_status st = sim_run(ctx, c->cands[i].placement, s, mem_cap > 0 ? caps : NULL, prm, &r);
        if (st != PL_OK) return pl_fail(msg, len, st, "simulating candidate %s failed: %s", c->cands[i].label,
                                        pl_status_str(st));
        int64_t mx = 0;
        for (int d = 0; d < r.n_devices; d++)
            if (r.peak_bytes[d] > mx) mx = r.peak_bytes[d];
        c->cands[i].pred_us = r.step_us;
        c->cands[i].pred_peak = mx;
        c->cands[i].pred_oom = r.oom != 0;
    }
    return PL_OK;
}

/* Append a timing to the log. */
static pl_status log_timing(calib_confirm *c, const calib_timing *t) {
    if (c->n_timings == c->cap_timings) {
        int cap = c->cap_timings ? 2 * c->cap_timings : 64;
        calib_timing *nt = realloc(c->timings, sizeof *nt * (size_t)cap);
        if (!nt) return PL_ERR_NOMEM;
        c->timings = nt;
        c->cap_timings = cap;
    }
    c->timings[c->n_timings++] = *t;
    return PL_OK;
}

/* Copy text into buf as the inside of a JSON string: quotes, backslashes
 * and control characters are dropped (labels are for people). */
static const char *json_safe(const char *text, char *buf, size_t len) {
    size_t k = 0;
    for (const char *c = text ? text : ""; *c && k + 1 < len; c++)
        if (*c != '"' && *c != '\\' && (unsigned char)*c >= 0x20) buf[k++] = *c;
    buf[k] = 0;
    return buf;
}

/* Write one timing as a measurement row. steps holds the timed steps. */
static pl_status store_timing(calib_confirm *c, profile_db *db, const calib_confirm_config *cfg,
                              calib_timing *t, const double *steps, int n_steps, char *msg, size_t len) {
    const calib_candidate *k = &c->cands[t->cand];
    size_t plen = (size_t)c->n_nodes * 4 + 8;
    size_t xlen = 512 + (size_t)n_steps * 24;
    char *ptext = malloc(plen), *extra = malloc(xlen);
    pl_status st = PL_OK;
    if (!ptext || !extra) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    placement_format(k->placement, c->n_nodes, ptext, plen);
    char jl[CALIB_LABEL_LEN], jc[CALIB_LABEL_LEN];
    int w = snprintf(extra, xlen,
                     "{\"protocol\":\"confirm\",\"label\":\"%s\",\"run\":%lld,\"side\":\"%s\","
                     "\"candidate\":\"%s\",\"phase\":\"%s\",\"round\":%d,\"order\":%d,\"warmup\":%d,"
                     "\"pred_us\":%.3f,\"steps_us\":[",
                     json_safe(cfg->label, jl, sizeof jl), (long long)cfg->run_id, c->sides[k->side].name,
                     json_safe(k->label, jc, sizeof jc),
                     t->phase ? "confirm" : "select", t->round, t->order, cfg->warmup,
                     isfinite(k->pred_us) ? k->pred_us : -1.0);
    for (int i = 0; i < n_steps && !t->oom && w > 0 && (size_t)w < xlen; i++)
        w += snprintf(extra + w, xlen - (size_t)w, "%s%.3f", i ? "," : "", steps[i]);
    if (w > 0 && (size_t)w < xlen) snprintf(extra + w, xlen - (size_t)w, "]}");
    profile_measurement m = {
        .graph_key = cfg->graph_key,
        .placement = ptext,
        .micro_batches = cfg->sched.micro_batches,
        .schedule = schedule_order_name(cfg->sched.order),
        .mem_cap = cfg->mem_cap,
        .step_us = t->median_us,
        .spread_us = t->spread_us,
        .peak_bytes_max = t->peak_bytes,
        .oom = t->oom,
        .purpose = t->phase ? "confirm" : "confirm-select",
        .extra = extra,
    };
    st = profile_db_add_measurement(db, &m, &t->measurement_id);
    if (st != PL_OK) pl_fail(msg, len, st, "storing a confirmation timing failed (%s)", pl_status_str(st));
out:
    free(ptext);
    free(extra);
    return st;
}

/* Time candidate `cand` once; fill the timing record and log/store it. */
static pl_status time_one(calib_confirm *c, const calib_timer *t, const calib_confirm_config *cfg,
                          profile_db *db, int phase, int round, int order, int cand, double *steps,
                          double *tmp, calib_timing *out, char *msg, size_t len) {
    calib_timing tm = {phase, round, order, cand, NAN, NAN, 0, 0, 0};
    pl_status st = calib_timer_run(t, c->cands[cand].placement, &cfg->sched, cfg->mem_cap, cfg->warmup,
                                   cfg->steps, steps, &tm.peak_bytes, &tm.oom, msg, len);
    if (st != PL_OK) return st;
    if (!tm.oom) {
        tm.median_us = pl_median(steps, cfg->steps, tmp);
        calib_summary s = calib_summarize(steps, cfg->steps);
        tm.spread_us = s.sd;
        if (!isfinite(tm.median_us)) return pl_fail(msg, len, PL_ERR_INVALID, "timer returned a non-finite time");
    }
    if (tm.peak_bytes > c->cands[cand].peak_bytes) c->cands[cand].peak_bytes = tm.peak_bytes;
    if (db && (st = store_timing(c, db, cfg, &tm, steps, cfg->steps, msg, len)) != PL_OK) return st;
    if (log_timing(c, &tm) != PL_OK) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    *out = tm;
    return PL_OK;
}

pl_status calib_confirm_run(calib_confirm *c, const calib_timer *t, const calib_confirm_config *cfg,
                            profile_db *db, char *msg, size_t len) {
    if (!c || !t || !cfg) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    if (c->selection_rounds) return pl_fail(msg, len, PL_ERR_INVALID, "the protocol already ran");
    if (c->n_cand == 0) return pl_fail(msg, len, PL_ERR_INVALID, "no candidates to confirm");
    if (cfg->selection_rounds < 1 || cfg->confirm_rounds < 2 || cfg->steps < 1 || cfg->warmup < 0)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "need selection rounds >= 1, confirmation rounds >= 2, steps >= 1, warm-up >= 0");
    if (db && !cfg->graph_key) return pl_fail(msg, len, PL_ERR_INVALID, "storing timings needs the graph key");
    int R = cfg->selection_rounds, C = cfg->confirm_rounds;
    pl_status st = PL_OK;
    int *order = malloc(sizeof(int) * (size_t)(c->n_cand > c->n_sides ? c->n_cand : c->n_sides));
    double *steps = malloc(sizeof(double) * (size_t)cfg->steps);
    double *tmp = malloc(sizeof(double) * (size_t)(cfg->steps > R ? cfg->steps : R));
    if (!order || !steps || !tmp) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < c->n_cand; i++) {
        c->cands[i].select_us = malloc(sizeof(double) * (size_t)R);
        if (!c->cands[i].select_us) {
            st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int r = 0; r < R; r++) c->cands[i].select_us[r] = NAN;
    }
    for (int s = 0; s < c->n_sides; s++) {
        c->sides[s].confirm_us = malloc(sizeof(double) * (size_t)C);
        if (!c->sides[s].confirm_us) {
            st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int r = 0; r < C; r++) c->sides[s].confirm_us[r] = NAN;
    }
    c->selection_rounds = R;
    c->confirm_rounds = C;
    pl_rng rng;
    pl_rng_seed(&rng, cfg->seed);

    /* selection: every candidate of every side, shuffled each round */
    for (int r = 0; r < R; r++) {
        for (int i = 0; i < c->n_cand; i++) order[i] = i;
        pl_rng_shuffle(&rng, order, c->n_cand);
        for (int j = 0; j < c->n_cand; j++) {
            calib_timing tm;
            int k = order[j];
            if ((st = time_one(c, t, cfg, db, 0, r, j, k, steps, tmp, &tm, msg, len)) != PL_OK) goto out;
            if (tm.oom) c->cands[k].oom = 1;
            else c->cands[k].select_us[r] = tm.median_us;
        }
    }
    for (int i = 0; i < c->n_cand; i++) {
        calib_candidate *k = &c->cands[i];
        k->select_median = k->oom ? NAN : pl_median(k->select_us, R, tmp);
        calib_side *sd = &c->sides[k->side];
        if (k->oom) continue;
        if (sd->pick < 0 || k->select_median < c->cands[sd->pick].select_median) sd->pick = i;
    }

    /* confirmation: only the picks, fresh rounds, shuffled each round */
    int n_live = 0;
    for (int s = 0; s < c->n_sides; s++)
        if (c->sides[s].pick >= 0) order[n_live++] = s;
    int *live = malloc(sizeof(int) * (size_t)(n_live ? n_live : 1));
    if (!live) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    memcpy(live, order, sizeof(int) * (size_t)n_live);
    for (int r = 0; r < C && st == PL_OK; r++) {
        memcpy(order, live, sizeof(int) * (size_t)n_live);
        pl_rng_shuffle(&rng, order, n_live);
        for (int j = 0; j < n_live; j++) {
            calib_timing tm;
            calib_side *sd = &c->sides[order[j]];
            if ((st = time_one(c, t, cfg, db, 1, r, j, sd->pick, steps, tmp, &tm, msg, len)) != PL_OK) break;
            sd->confirm_us[r] = tm.median_us; /* NaN if it ran out of memory now */
        }
    }
    free(live);
    if (st != PL_OK) goto out;
    for (int s = 0; s < c->n_sides; s++) {
        calib_side *sd = &c->sides[s];
        int n = 0;
        for (int r = 0; r < C; r++)
            if (isfinite(sd->confirm_us[r])) n++;
        double *vals = malloc(sizeof(double) * (size_t)(n ? n : 1));
        if (!vals) {
            st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
            goto out;
        }
        n = 0;
        for (int r = 0; r < C; r++)
            if (isfinite(sd->confirm_us[r])) vals[n++] = sd->confirm_us[r];
        sd->summary = calib_summarize(vals, n);
        free(vals);
    }
out:
    free(order);
    free(steps);
    free(tmp);
    return st;
}

int calib_confirm_winner(const calib_confirm *c) {
    int best = -1;
    for (int s = 0; c && s < c->n_sides; s++) {
        const calib_side *sd = &c->sides[s];
        if (sd->pick < 0 || sd->summary.n == 0) continue;
        if (best < 0 || sd->summary.mean < c->sides[best].summary.mean) best = s;
    }
    return best;
}
