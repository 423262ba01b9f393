/*
 * calibrate.c: measure, split, fit, evaluate, store (see calibrate.h).
 */
#include "calibrate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"
#include "stats.h"
#include "util.h"

void calib_calibrate_options_default(calib_calibrate_options *o) {
    memset(o, 0, sizeof *o);
    o->count = 60;
    o->seed = 1;
    o->holdout = 0.3;
    o->steps = 10;
    o->warmup = 2;
    o->purpose = "calibrate";
    o->save = 1;
    calib_fit_options_default(&o->fit);
}

/* Time the designed placements and store each timing. */
static pl_status measure(profile_db *db, const calib_model *m, const calib_timer *t, const calib_calibrate_options *o,
                         calib_dataset *d, calib_calibrate_result *r, char *msg, size_t len) {
    int n = m->g->n_nodes;
    pl_status st = PL_OK;
    int *pl = malloc(sizeof(int) * (size_t)o->count * (size_t)n);
    schedule *sc = malloc(sizeof(schedule) * (size_t)o->count);
    double *steps = malloc(sizeof(double) * (size_t)o->steps), *tmp = malloc(sizeof(double) * (size_t)o->steps);
    size_t plen = (size_t)n * 4 + 8, xlen = 256 + (size_t)o->steps * 24;
    char *ptext = malloc(plen), *extra = malloc(xlen);
    if (!pl || !sc || !steps || !tmp || !ptext || !extra) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = calib_design(m->g, m->p->n_devices, o->count, o->seed, pl, sc, msg, len)) != PL_OK) goto out;
    for (int i = 0; i < o->count; i++) {
        const int *cur = pl + (size_t)i * n;
        int64_t peak = 0;
        int oom = 0;
        if ((st = calib_timer_run(t, cur, &sc[i], 0, o->warmup, o->steps, steps, &peak, &oom, msg, len)) != PL_OK)
            goto out;
        double med = oom ? NAN : pl_median(steps, o->steps, tmp);
        double spread = oom ? NAN : calib_summarize(steps, o->steps).sd;
        placement_format(cur, n, ptext, plen);
        int w = snprintf(extra, xlen, "{\"protocol\":\"calibrate\",\"design_index\":%d,\"design_seed\":%llu,"
                                      "\"timer\":\"%s\",\"warmup\":%d,\"steps_us\":[",
                         i, (unsigned long long)o->seed, t->name ? t->name : "", o->warmup);
        for (int k = 0; k < o->steps && !oom && w > 0 && (size_t)w < xlen; k++)
            w += snprintf(extra + w, xlen - (size_t)w, "%s%.3f", k ? "," : "", steps[k]);
        if (w > 0 && (size_t)w < xlen) snprintf(extra + w, xlen - (size_t)w, "]}");
        profile_measurement pm = {m->key, ptext, sc[i].micro_batches, schedule_order_name(sc[i].order), 0, med,
                                  spread, peak, oom, o->purpose, extra};
        int64_t id = 0;
        if ((st = profile_db_add_measurement(db, &pm, &id)) != PL_OK) {
            pl_fail(msg, len, st, "cannot store a measurement: %s", profile_db_last_error(db));
            goto out;
        }
        if ((st = calib_dataset_add(d, cur, &sc[i], 0, med, spread, peak, oom, id)) != PL_OK) {
            pl_fail(msg, len, st, "out of memory");
            goto out;
        }
        r->n_measured++;
        if (o->progress) o->progress(o->progress_ctx, i + 1, o->count);
    }
out:
    free(pl);
    free(sc);
    free(steps);
    free(tmp);
    free(ptext);
    free(extra);
    return st;
}

pl_status calib_calibrate(profile_db *db, const calib_model *m, const calib_timer *t,
                          const calib_calibrate_options *o, calib_calibrate_result *r, char *msg, size_t len) {
    if (!db || !m || !m->g || !m->p || !o || !r) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    if (!o->from_measurements && !t) return pl_fail(msg, len, PL_ERR_INVALID, "measuring needs a timer");
    if (!o->from_measurements && (o->count < 1 || o->steps < 1 || o->warmup < 0))
        return pl_fail(msg, len, PL_ERR_INVALID, "need count >= 1, steps >= 1, warm-up >= 0");
    if (!(o->holdout >= 0 && o->holdout < 1)) return pl_fail(msg, len, PL_ERR_INVALID, "holdout must be in [0, 1)");
    memset(r, 0, sizeof *r);
    sim_params_default(&r->before);
    calib_dataset *d = NULL;
    int *train = NULL, *test = NULL, *idx = NULL, *is_test = NULL;
    double *pb = NULL, *pa = NULL;
    int64_t *pk = NULL;
    pl_status st = calib_dataset_create(m->g->n_nodes, &d);
    if (st != PL_OK) return pl_fail(msg, len, st, "out of memory");
    if (o->from_measurements)
        st = calib_db_load_dataset(db, m->key, o->purpose, m->p->n_devices, d, &r->n_skipped, msg, len);
    else
        st = measure(db, m, t, o, d, r, msg, len);
    if (st != PL_OK) goto out;
    r->n_data = d->n;
    for (int i = 0; i < d->n; i++) r->n_oom += d->oom[i];
    size_t nd = (size_t)(d->n ? d->n : 1);
    train = malloc(sizeof(int) * nd);
    test = malloc(sizeof(int) * nd);
    idx = malloc(sizeof(int) * nd);
    is_test = malloc(sizeof(int) * nd);
    pb = malloc(sizeof(double) * nd);
    pa = malloc(sizeof(double) * nd);
    pk = malloc(sizeof(int64_t) * nd);
    if (!train || !test || !idx || !is_test || !pb || !pa || !pk) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    st = calib_split(d, o->holdout, o->seed, train, &r->n_train, test, &r->n_test);
    if (st != PL_OK) {
        pl_fail(msg, len, st, "only %d usable measurements (%d stored, %d OOM); measure more placements",
                d->n - r->n_oom, d->n, r->n_oom);
        goto out;
    }
    if ((st = calib_fit(m->g, m->p, d, train, r->n_train, &r->before, &o->fit, &r->fit, msg, len)) != PL_OK) goto out;
    if ((st = calib_evaluate(m->g, m->p, d, train, r->n_train, &r->before, &r->train_before, NULL, NULL, msg, len)) ||
        (st = calib_evaluate(m->g, m->p, d, train, r->n_train, &r->fit.params, &r->train_after, NULL, NULL, msg, len)) ||
        (st = calib_evaluate(m->g, m->p, d, test, r->n_test, &r->before, &r->test_before, NULL, NULL, msg, len)) ||
        (st = calib_evaluate(m->g, m->p, d, test, r->n_test, &r->fit.params, &r->test_after, NULL, NULL, msg, len)))
        goto out;
    if (!o->save) goto out;
    /* every point with its split and both predictions, for the report */
    int n = 0;
    for (int k = 0; k < r->n_train; k++) idx[n] = train[k], is_test[n++] = 0;
    for (int k = 0; k < r->n_test; k++) idx[n] = test[k], is_test[n++] = 1;
    calib_eval scratch;
    if ((st = calib_evaluate(m->g, m->p, d, idx, n, &r->before, &scratch, pb, NULL, msg, len)) ||
        (st = calib_evaluate(m->g, m->p, d, idx, n, &r->fit.params, &scratch, pa, pk, msg, len)))
        goto out;
    calib_fit_record rec = {m->key, o->timer_name ? o->timer_name : (t && t->name ? t->name : "stored"),
                            o->seed, o->holdout, &r->fit, r->test_before, r->test_after, r->train_before,
                            r->train_after, &r->before};
    if ((st = calib_db_save_fit(db, &rec, d, idx, is_test, pb, pa, pk, n, &r->fit_id, msg, len)) != PL_OK) goto out;
    char label[128];
    snprintf(label, sizeof label, "calib_fit %lld (%s, %d placements)", (long long)r->fit_id, rec.timer, r->n_train);
    st = calib_db_save_params(db, m->key, &r->fit.params, label, msg, len);
out:
    calib_dataset_destroy(d);
    free(train);
    free(test);
    free(idx);
    free(is_test);
    free(pb);
    free(pa);
    free(pk);
    return st;
}
