/*
 * report.c: gnuplot figures, markdown tables and Chrome traces from the
 * store (see report.h). Each figure is a .dat file and a .gp script that
 * gnuplot runs in the output directory, once per terminal (PNG, SVG).
 */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "calib_db.h"
#include "gnuplot.h"
#include "graph.h"
#include "placement.h"
#include "sim.h"
#include "stats.h"
#include "store_calib.h"
#include "util.h"

#define PATH_LEN 4096

typedef struct {
    const calib_report_options *opt;
    char png_term[128];        /* "pngcairo ..." or "png ..." */
    profile_db *db;
    graph *g;                  /* the profile's graph, owned */
    profile_data *p;           /* owned */
    gpt_config cfg;
    char graph_key[PROFILE_NAME_LEN];
    sim_ctx *ctx;              /* m up to the batch, owned */
    sim_params neutral, calibrated;
    int n_calibrated;          /* parameters stored (0 = never calibrated) */
    FILE *md;                  /* the markdown being written */
    calib_report_summary sum;
    char *msg;
    size_t len;
} report;

/* ---- small helpers ---- */

static int mkdir_p(const char *dir) {
    char buf[PATH_LEN];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return -1;
    for (char *q = buf + 1; *q; q++) {
        if (*q != '/') continue;
        *q = 0;
        if (mkdir(buf, 0777) && errno != EEXIST) return -1;
        *q = '/';
    }
    if (mkdir(buf, 0777) && errno != EEXIST) return -1;
    return 0;
}

/* Keep [A-Za-z0-9_-] of a label for file names; "x" when nothing is left. */
static void file_safe(const char *in, char *out, size_t len) {
    size_t k = 0;
    for (const char *c = in; *c && k + 1 < len; c++)
        out[k++] = ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
                    *c == '_')
                       ? *c
                       : '_';
    if (k == 0 && len > 1) out[k++] = 'x';
    out[k] = 0;
}

static FILE *open_out(report *r, const char *name, const char *mode) {
    char path[PATH_LEN];
    if (snprintf(path, sizeof path, "%s/%s", r->opt->out_dir, name) >= (int)sizeof path) {
        pl_fail(r->msg, r->len, PL_ERR_IO, "output path too long: %s/%s", r->opt->out_dir, name);
        return NULL;
    }
    FILE *f = fopen(path, mode);
    if (!f) pl_fail(r->msg, r->len, PL_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return f;
}

/* Which PNG terminal this gnuplot has (gnuplot.h). */
static pl_status probe_gnuplot(report *r) {
    int cairo = 0;
    pl_status st = gnuplot_probe(r->opt->gnuplot, &cairo, r->msg, r->len);
    if (st != PL_OK) return st;
    snprintf(r->png_term, sizeof r->png_term, "%s", cairo ? "pngcairo size 1000,620 font ',11'" : "png size 1000,620");
    return PL_OK;
}

/* Write <base>.gp with the plot body for PNG then SVG and run gnuplot in
 * the output directory. body must end with a plot command. */
static pl_status draw(report *r, const char *base, const char *body) {
    char name[PATH_LEN];
    snprintf(name, sizeof name, "%s.gp", base);
    FILE *f = open_out(r, name, "w");
    if (!f) return PL_ERR_IO;
    fprintf(f, "# %s.gp: written by placer report; run with gnuplot in this directory.\n", base);
    fprintf(f, "set datafile missing 'NaN'\nset grid lc rgb '#dddddd'\nset key top left\n");
    fprintf(f, "set terminal %s\nset output '%s.png'\n%s\n", r->png_term, base, body);
    fprintf(f, "set terminal svg size 1000,620 dynamic font ',11'\nset output '%s.svg'\nreplot\nunset output\n", base);
    if (fclose(f)) return pl_fail(r->msg, r->len, PL_ERR_IO, "cannot write %s", name);
    pl_status st = gnuplot_run(r->opt->gnuplot, r->opt->out_dir, name, r->msg, r->len);
    if (st != PL_OK) return st;
    r->sum.n_figures++;
    return PL_OK;
}

static const char *img(report *r) { return r->opt->image_prefix ? r->opt->image_prefix : ""; }

/* Fail with the store's detail of what went wrong. */
static pl_status store_fail(report *r, pl_status st, const char *what) {
    return pl_fail(r->msg, r->len, st, "cannot read %s: %s", what, profile_db_last_error(r->db));
}

/* Copy text for a markdown table cell: '|' escaped. */
static const char *cell(char *buf, size_t len, const char *text) {
    size_t k = 0;
    for (const char *c = text; *c && k + 2 < len; c++) {
        if (*c == '|') buf[k++] = '\\';
        buf[k++] = *c;
    }
    buf[k] = 0;
    return buf;
}

/* "12.345" ms from us, or "-" for NaN, into buf. */
static const char *ms(char *buf, size_t len, double us) {
    if (!isfinite(us)) snprintf(buf, len, "-");
    else snprintf(buf, len, "%.3f", us / 1000.0);
    return buf;
}

/* ---- learning curves ---- */

typedef struct {
    int n, cap;
    int *update;
    double *us;
    int *oom;
} samples;

static int collect_sample(void *ctx, const profile_run_sample *s) {
    samples *a = ctx;
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 1024;
        int *u = realloc(a->update, sizeof(int) * (size_t)cap);
        if (u) a->update = u;
        double *v = realloc(a->us, sizeof(double) * (size_t)cap);
        if (v) a->us = v;
        int *o = realloc(a->oom, sizeof(int) * (size_t)cap);
        if (o) a->oom = o;
        if (!u || !v || !o) return 1;
        a->cap = cap;
    }
    a->update[a->n] = s->update;
    a->us[a->n] = s->step_us;
    a->oom[a->n] = s->oom;
    a->n++;
    return 0;
}

typedef struct {
    int n, cap;
    int64_t *id;
    char (*method)[32];
    char (*args)[512];
} run_list;

static int collect_run(void *ctx, const profile_run_info *ri) {
    run_list *l = ctx;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        int64_t *id = realloc(l->id, sizeof *id * (size_t)cap);
        if (id) l->id = id;
        char(*m)[32] = realloc(l->method, sizeof *m * (size_t)cap);
        if (m) l->method = m;
        char(*a)[512] = realloc(l->args, sizeof *a * (size_t)cap);
        if (a) l->args = a;
        if (!id || !m || !a) return 1;
        l->cap = cap;
    }
    l->id[l->n] = ri->id;
    snprintf(l->method[l->n], 32, "%s", ri->method ? ri->method : "");
    snprintf(l->args[l->n], 512, "%s", ri->args ? ri->args : "");
    l->n++;
    return 0;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static pl_status learning_curve(report *r, int64_t run, const char *method, const char *args, int explicit_run) {
    samples a = {0};
    pl_status st = profile_db_run_samples(r->db, run, collect_sample, &a);
    if (st != PL_OK) {
        st = pl_fail(r->msg, r->len, st, "cannot read run %lld: %s", (long long)run, profile_db_last_error(r->db));
        goto out;
    }
    int max_u = -1;
    for (int i = 0; i < a.n; i++)
        if (a.update[i] > max_u) max_u = a.update[i];
    if (max_u < 1 && !explicit_run) goto out; /* a search, not a learning run */
    char base[64], name[80];
    snprintf(base, sizeof base, "learning-%lld", (long long)run);
    snprintf(name, sizeof name, "%s.dat", base);
    FILE *f = open_out(r, name, "w");
    if (!f) {
        st = PL_ERR_IO;
        goto out;
    }
    fprintf(f, "# update sampled_step_ms (OOM samples left out)\n");
    int n_oom = 0;
    for (int i = 0; i < a.n; i++) {
        if (a.oom[i] || !isfinite(a.us[i])) n_oom++;
        else fprintf(f, "%d %.4f\n", a.update[i], a.us[i] / 1000.0);
    }
    fclose(f);
    snprintf(name, sizeof name, "%s-curve.dat", base);
    f = open_out(r, name, "w");
    if (!f) {
        st = PL_ERR_IO;
        goto out;
    }
    fprintf(f, "# update mean_ms best_ms best_so_far_ms\n");
    double best_all = INFINITY;
    double final_mean = NAN, first_mean = NAN;
    for (int u = 0; u <= max_u; u++) {
        double sum = 0, best = INFINITY;
        int k = 0;
        for (int i = 0; i < a.n; i++)
            if (a.update[i] == u && !a.oom[i] && isfinite(a.us[i])) {
                sum += a.us[i];
                k++;
                if (a.us[i] < best) best = a.us[i];
            }
        if (!k) continue;
        if (best < best_all) best_all = best;
        if (!isfinite(first_mean)) first_mean = sum / k;
        final_mean = sum / k;
        fprintf(f, "%d %.4f %.4f %.4f\n", u, sum / k / 1000.0, best / 1000.0, best_all / 1000.0);
    }
    fclose(f);
    /* a few placements with many cut edges can be 10x slower: clip the axis
     * at the 98th percentile so the curve stays readable */
    double lo = NAN, top = NAN;
    double *sorted = malloc(sizeof(double) * (size_t)(a.n ? a.n : 1));
    int ns = 0;
    if (sorted) {
        for (int i = 0; i < a.n; i++)
            if (!a.oom[i] && isfinite(a.us[i])) sorted[ns++] = a.us[i] / 1000.0;
        qsort(sorted, (size_t)ns, sizeof *sorted, cmp_dbl);
        if (ns) {
            lo = sorted[0];
            top = sorted[(int)(0.98 * (ns - 1))];
        }
        free(sorted);
    }
    char yr[96] = "";
    if (ns && top > lo) snprintf(yr, sizeof yr, "set yrange [%g:%g]\n", lo - 0.05 * (top - lo), top + 0.1 * (top - lo));
    char body[2048];
    snprintf(body, sizeof body,
             "set title \"run %lld (%s): predicted step time of sampled placements\" noenhanced\n"
             "set xlabel 'policy update'\nset ylabel 'predicted step time (ms)'\nset key top right\n%s"
             "plot '%s.dat' using 1:2 with points pt 7 ps 0.35 lc rgb '#99aaaaaa' title 'sampled placements', \\\n"
             "  '%s-curve.dat' using 1:2 with lines lw 2 lc rgb '#1f77b4' title 'mean of update', \\\n"
             "  '' using 1:3 with lines lw 1 lc rgb '#2ca02c' title 'best of update', \\\n"
             "  '' using 1:4 with lines lw 2 dt 2 lc rgb '#d62728' title 'best so far'",
             (long long)run, method, yr, base, base);
    if ((st = draw(r, base, body)) != PL_OK) goto out;
    r->sum.n_learning++;
    char b1[32], b2[32], b3[32];
    fprintf(r->md, "- run %lld (`%s %s`): %d samples over %d updates (%d OOM); mean sampled step %s ms at the "
                   "first update, %s ms at the last; best found %s ms (predicted). ![learning curve](%s%s.png)\n",
            (long long)run, method, args, a.n, max_u + 1, n_oom, ms(b1, sizeof b1, first_mean),
            ms(b2, sizeof b2, final_mean), ms(b3, sizeof b3, best_all), img(r), base);
out:
    free(a.update);
    free(a.us);
    free(a.oom);
    return st;
}

static pl_status learning_section(report *r) {
    fprintf(r->md, "\n## Learning curves\n\n");
    int before = r->sum.n_learning;
    pl_status st = PL_OK;
    if (r->opt->runs && r->opt->n_runs > 0) {
        for (int i = 0; i < r->opt->n_runs && st == PL_OK; i++)
            st = learning_curve(r, r->opt->runs[i], "run", "", 1);
        if (st != PL_OK) return st;
    } else {
        run_list l = {0};
        st = profile_db_runs(r->db, collect_run, &l);
        if (st != PL_OK) st = pl_fail(r->msg, r->len, st, "cannot list runs: %s", profile_db_last_error(r->db));
        for (int i = 0; i < l.n && st == PL_OK; i++) st = learning_curve(r, l.id[i], l.method[i], l.args[i], 0);
        free(l.id);
        free(l.method);
        free(l.args);
        if (st != PL_OK) return st;
    }
    if (r->sum.n_learning == before) fprintf(r->md, "No placer run with more than one update is stored.\n");
    return PL_OK;
}

/* ---- calibration ---- */

/* The header and accuracy table of the latest calibration (store_calib.h). */
typedef struct {
    report *r;
    int found;        /* 1 once the latest calibration was read */
    int64_t fit_id;   /* its row id */
} fit_head;

static int print_fit_head(void *ctx, const profile_calib_fit *f) {
    fit_head *h = ctx;
    report *r = h->r;
    h->found = 1;
    h->fit_id = f->id;
    r->sum.has_fit = 1;
    fprintf(r->md,
            "Fit %lld (%s), timings from `%s`, graph `%s`: %d placements to fit on, %d held out (fraction %.2f, "
            "split seed %lld), %d trust-region iterations. Residuals are log(predicted) - log(measured).\n\n",
            (long long)f->id, f->created_at, f->timer, f->graph_key, f->n_train, f->n_test, f->holdout,
            (long long)f->seed, f->iterations);
    fprintf(r->md, "| held-out placements | MAPE | max error | Kendall's tau | peak-memory MAPE | peak-memory max error |\n");
    fprintf(r->md, "|---|---|---|---|---|---|\n");
    for (int j = 0; j < 2; j++) {
        const profile_calib_accuracy *e = j ? &f->after : &f->before;
        fprintf(r->md, "| %s | %.2f%% | %.2f%% | %.3f | %.2f%% | %.2f%% |\n",
                j ? "after calibration" : "before (neutral parameters)", e->mape, e->max_ape, e->tau, e->mem_mape,
                e->mem_max_ape);
    }
    fprintf(r->md, "| target | <= 3%% | <= 10%% | >= 0.85 | <= 5%% | |\n\n");
    fprintf(r->md, "On the placements it was fitted on: MAPE %.2f%% before, %.2f%% after.\n\n", f->train_before_mape,
            f->train_after_mape);
    fprintf(r->md, "Fitted parameters (value ± covariance-scaled 1-sigma error; null = not fitted): `%s` ± `%s`; "
                   "starting point `%s`.\n\n",
            f->params, f->errors, f->before_params);
    return 1;
}

/* The scatter's rows: each point to the training or the held-out file,
 * and the range of the finite times. */
typedef struct {
    FILE *train, *test;
    double lo, hi;
} fit_scatter;

static int scatter_point(void *ctx, const profile_calib_fit_point *p) {
    fit_scatter *sc = ctx;
    FILE *f = strcmp(p->split, "test") ? sc->train : sc->test;
    double v[3] = {p->measured_us, p->pred_before_us, p->pred_after_us};
    for (int j = 0; j < 3; j++)
        if (isfinite(v[j])) {
            if (v[j] < sc->lo) sc->lo = v[j];
            if (v[j] > sc->hi) sc->hi = v[j];
        }
    fprintf(f, "%.4f %.4f %.4f %d %s\n", v[0] / 1000.0, v[1] / 1000.0, v[2] / 1000.0, p->micro_batches, p->schedule);
    return 0;
}

static pl_status calibration_section(report *r) {
    fprintf(r->md, "\n## Simulator calibration\n\n");
    fit_head head = {r, 0, 0};
    pl_status st = profile_db_calib_last_fit(r->db, print_fit_head, &head);
    if (st != PL_OK) return store_fail(r, st, "calibrations");
    if (!head.found) {
        fprintf(r->md, "No calibration is stored (run `placer calibrate`).\n");
        return PL_OK;
    }

    /* the scatter */
    FILE *ftr = open_out(r, "calibration-train.dat", "w");
    FILE *fte = ftr ? open_out(r, "calibration-test.dat", "w") : NULL;
    if (!ftr || !fte) {
        if (ftr) fclose(ftr);
        return PL_ERR_IO;
    }
    fprintf(ftr, "# measured_ms pred_before_ms pred_after_ms micro_batches schedule\n");
    fprintf(fte, "# measured_ms pred_before_ms pred_after_ms micro_batches schedule\n");
    fit_scatter sc = {ftr, fte, INFINITY, 0};
    st = profile_db_calib_fit_points(r->db, head.fit_id, scatter_point, &sc);
    fclose(ftr);
    fclose(fte);
    if (st != PL_OK) return store_fail(r, st, "fit points");
    double lo = sc.lo, hi = sc.hi;
    if (!(hi > 0)) return PL_OK;
    lo = lo / 1000.0 * 0.9;
    hi = hi / 1000.0 * 1.1;
    /* log axes with 1-2-5 tics inside the range */
    char tics[512] = "";
    int tw = 0;
    for (double dec = 0.001; dec < 1e7 && tw >= 0 && (size_t)tw < sizeof tics - 32; dec *= 10)
        for (int k = 0; k < 3; k++) {
            double v = dec * (k == 0 ? 1 : k == 1 ? 2 : 5);
            if (v >= lo && v <= hi) tw += snprintf(tics + tw, sizeof tics - (size_t)tw, "%s%g", tw ? ", " : "", v);
        }
    char body[4096];
    snprintf(body, sizeof body,
             "set title 'Simulator against hardware: step time of each measured placement'\n"
             "set xlabel 'measured step time (ms)'\nset ylabel 'predicted step time (ms)'\n"
             "set size ratio -1\nset logscale xy\nset xtics (%s)\nset ytics (%s)\n"
             "set xrange [%g:%g]\nset yrange [%g:%g]\n"
             "plot x with lines dt 2 lc rgb 'black' title 'y = x', \\\n"
             "  'calibration-test.dat' using 1:2 with points pt 6 ps 1.2 lc rgb '#ff7f0e' title 'held out, before', \\\n"
             "  'calibration-test.dat' using 1:3 with points pt 7 ps 1.2 lc rgb '#1f77b4' title 'held out, after', \\\n"
             "  'calibration-train.dat' using 1:3 with points pt 1 ps 0.8 lc rgb '#7f7f7f' title 'fitted on, after'",
             tics, tics, lo, hi, lo, hi);
    if ((st = draw(r, "calibration", body)) != PL_OK) return st;
    fprintf(r->md, "![predicted vs measured](%scalibration.png)\n", img(r));
    return PL_OK;
}

/* ---- confirmation (the A/B/C table) ---- */

#define MAX_SIDES 16

typedef struct {
    char side[32], cand[64];
    char *placement;  /* owned */
    int n_cand, n_oom, n;
    double mean, sd, se, pred_at_confirm;
    double pred_neutral, pred_cal;
    int pred_oom;
    int64_t peak;
} side_row;

/* Predict placement text under the setting; NaN when it does not parse. */
static void predict(report *r, const char *ptext, const schedule *sc, int64_t cap, const sim_params *prm,
                    double *us, int *oom) {
    *us = NAN;
    *oom = 0;
    if (!r->ctx || !ptext || !*ptext) return;
    int *pl = malloc(sizeof(int) * (size_t)r->g->n_nodes);
    if (!pl) return;
    int64_t caps[SIM_MAX_DEVICES];
    for (int d = 0; d < SIM_MAX_DEVICES; d++) caps[d] = cap;
    sim_result res;
    if (placement_parse(ptext, r->g->n_nodes, r->p->n_devices, pl, NULL, 0) == PL_OK &&
        sim_run(r->ctx, pl, sc, cap > 0 ? caps : NULL, prm, &res) == PL_OK) {
        *us = res.step_us;
        *oom = res.oom;
    }
    free(pl);
}

static pl_status trace_winner(report *r, const char *fname, const char *ptext, const schedule *sc, int64_t cap) {
    int *pl = malloc(sizeof(int) * (size_t)r->g->n_nodes);
    if (!pl) return pl_fail(r->msg, r->len, PL_ERR_NOMEM, "out of memory");
    pl_status st = placement_parse(ptext, r->g->n_nodes, r->p->n_devices, pl, NULL, 0);
    if (st != PL_OK) {
        free(pl);
        return PL_OK; /* another graph: no trace */
    }
    int64_t caps[SIM_MAX_DEVICES];
    for (int d = 0; d < SIM_MAX_DEVICES; d++) caps[d] = cap;
    sim_result res;
    if ((st = sim_ctx_set_trace(r->ctx, 1)) != PL_OK) {
        free(pl);
        return pl_fail(r->msg, r->len, st, "cannot trace the simulation (out of memory)");
    }
    st = sim_run(r->ctx, pl, sc, cap > 0 ? caps : NULL, &r->calibrated, &res);
    free(pl);
    if (st == PL_OK) {
        FILE *f = open_out(r, fname, "w");
        if (!f) st = PL_ERR_IO;
        else {
            st = sim_write_chrome_trace(r->ctx, f);
            if (fclose(f) && st == PL_OK) st = PL_ERR_IO;
            if (st != PL_OK) pl_fail(r->msg, r->len, st, "cannot write %s", fname);
            else r->sum.n_traces++;
        }
    } else {
        pl_fail(r->msg, r->len, st, "cannot simulate the winner for its trace");
    }
    sim_ctx_set_trace(r->ctx, 0);
    return st;
}

/* Write the measured trace stored for confirmation cid, if any. */
static pl_status measured_trace(report *r, int64_t cid, const char *fname, int *found) {
    *found = 0;
    char *json = NULL;
    pl_status st = profile_db_calib_trace(r->db, cid, &json);
    if (st != PL_OK) return store_fail(r, st, "traces");
    if (!json) return PL_OK;
    FILE *f = open_out(r, fname, "w");
    if (!f) st = PL_ERR_IO;
    else {
        size_t n = strlen(json);
        if (fwrite(json, 1, n, f) != n) st = PL_ERR_IO;
        if (fclose(f)) st = PL_ERR_IO;
        if (st != PL_OK) pl_fail(r->msg, r->len, st, "cannot write %s", fname);
        else {
            *found = 1;
            r->sum.n_traces++;
        }
    }
    free(json);
    return st;
}

static pl_status placement_map(report *r, const char *base, const char *title, side_row *rows, int n) {
    char name[PATH_LEN];
    snprintf(name, sizeof name, "%s.dat", base);
    FILE *f = open_out(r, name, "w");
    if (!f) return PL_ERR_IO;
    fprintf(f, "# node row device name\n");
    int used[PLACEMENT_MAX_DEVICES] = {0};
    int *pl = malloc(sizeof(int) * (size_t)r->g->n_nodes);
    if (!pl) {
        fclose(f);
        return pl_fail(r->msg, r->len, PL_ERR_NOMEM, "out of memory");
    }
    char ytics[1024] = "";
    int w = 0, nrow = 0;
    for (int i = 0; i < n; i++) {
        if (!rows[i].placement ||
            placement_parse(rows[i].placement, r->g->n_nodes, r->p->n_devices, pl, NULL, 0) != PL_OK)
            continue;
        for (int k = 0; k < r->g->n_nodes; k++) {
            fprintf(f, "%d %d %d %s\n", k, nrow, pl[k], r->g->nodes[k].name);
            used[pl[k]] = 1;
        }
        w += snprintf(ytics + w, sizeof ytics - (size_t)w, "%s\"%s\" %d", nrow ? ", " : "", rows[i].side, nrow);
        nrow++;
    }
    free(pl);
    fclose(f);
    if (!nrow) return PL_OK;
    char body[8192];
    int b = snprintf(body, sizeof body,
                     "set title \"%s\" noenhanced\nset xlabel 'graph node'\nset ytics (%s)\n"
                     "set yrange [-0.6:%d.6]\nset xrange [-0.6:%d.6]\nset xtics rotate by 90 right font ',8' noenhanced\n"
                     "set key outside right top\nset style fill solid 1.0 noborder\nset grid noxtics noytics\n"
                     "plot '%s.dat' using 1:2:(0.45):(0.4):($3+1):xtic(4) with boxxyerror lc variable notitle",
                     title, ytics, nrow - 1, r->g->n_nodes - 1, base);
    for (int d = 0; d < r->p->n_devices && d < PLACEMENT_MAX_DEVICES; d++)
        if (used[d] && b > 0 && (size_t)b < sizeof body)
            b += snprintf(body + b, sizeof body - (size_t)b, ", \\\n  NaN with boxes lc %d title 'device %d'", d + 1, d);
    return draw(r, base, body);
}

static pl_status h2h_chart(report *r, const char *base, const char *title, side_row *rows, int n, int use_cal) {
    char name[PATH_LEN];
    snprintf(name, sizeof name, "%s.dat", base);
    FILE *f = open_out(r, name, "w");
    if (!f) return PL_ERR_IO;
    fprintf(f, "# idx side mean_ms sd_ms predicted_ms\n");
    char labels[2048] = "";
    int w = 0;
    double top = 0;
    for (int i = 0; i < n; i++) {
        double pr = use_cal ? rows[i].pred_cal : rows[i].pred_neutral;
        double m = rows[i].n ? rows[i].mean / 1000.0 : NAN, sd = rows[i].n ? rows[i].sd / 1000.0 : NAN;
        fprintf(f, "%d %s %.4f %.4f %.4f\n", i, rows[i].side, m, sd, pr / 1000.0);
        if (isfinite(m) && m + sd > top) top = m + sd;
        if (isfinite(pr) && pr / 1000.0 > top) top = pr / 1000.0;
        if (!rows[i].n && w >= 0 && (size_t)w < sizeof labels)
            w += snprintf(labels + w, sizeof labels - (size_t)w, "set label 'OOM' at %d,graph 0.05 center\n", i);
    }
    fclose(f);
    char body[4096];
    snprintf(body, sizeof body,
             "set title \"%s\" noenhanced\nset ylabel 'step time (ms)'\nset yrange [0:%g]\nset xrange [-0.6:%d.6]\n"
             "set style fill solid 0.55 border -1\nset boxwidth 0.6\nset key top right\n%s"
             "plot '%s.dat' using 1:3:4:xtic(2) with boxerrorbars lc rgb '#4878a8' title 'confirmed mean ± sd', \\\n"
             "  '' using 1:5 with points pt 9 ps 1.8 lc rgb '#d62728' title 'simulator (%s)'",
             title, top > 0 ? top * 1.25 : 1.0, n - 1, labels, base, use_cal ? "calibrated" : "neutral");
    return draw(r, base, body);
}

/* Compare two placements written as comma-separated device lists: 1 when
 * they are the same, 2 when one is the other with the devices renamed (the
 * same partition on other GPUs), 0 otherwise or when either is missing. */
static int same_partition(const char *a, const char *b) {
    if (!a || !b) return 0;
    if (!strcmp(a, b)) return 1;
    int map_ab[64], map_ba[64];
    for (int i = 0; i < 64; i++) map_ab[i] = map_ba[i] = -1;
    while (*a && *b) {
        char *ea, *eb;
        long da = strtol(a, &ea, 10), db = strtol(b, &eb, 10);
        if (ea == a || eb == b || da < 0 || db < 0 || da >= 64 || db >= 64) return 0;
        if (map_ab[da] < 0 && map_ba[db] < 0) {
            map_ab[da] = (int)db;
            map_ba[db] = (int)da;
        } else if (map_ab[da] != db || map_ba[db] != da) {
            return 0;
        }
        a = *ea == ',' ? ea + 1 : ea;
        b = *eb == ',' ? eb + 1 : eb;
        if ((*ea == ',') != (*eb == ',')) return 0;
    }
    return !*a && !*b ? 2 : 0;
}

static const char *verdict(const side_row *rl, const side_row *rows, int n, char *buf, size_t len) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (&rows[i] != rl && rows[i].n > 0 && (best < 0 || rows[i].mean < rows[best].mean)) best = i;
    if (!rl) {
        snprintf(buf, len, "no RL side in this confirmation (baselines only).");
        return buf;
    }
    if (rl->n == 0) {
        snprintf(buf, len, "the RL placer has no confirmed placement (all its candidates ran out of memory).");
        return buf;
    }
    if (best < 0) {
        snprintf(buf, len, "no other side has a confirmed placement.");
        return buf;
    }
    calib_summary a = {rl->n, rl->mean, rl->sd, rl->se}, b = {rows[best].n, rows[best].mean, rows[best].sd, rows[best].se};
    calib_diff d = calib_welch(a, b);
    const char *what = d.z <= -2 ? "**RL beats** the best other side"
                       : d.z >= 2 ? "**RL does not beat** the best other side: it is slower than"
                                  : "**RL does not beat** the best other side: within noise of";
    int w = snprintf(buf, len, "%s `%s` by %+.3f ms (%+.1f%%), %.1f standard errors (Welch dof %.1f).", what,
                     rows[best].side, d.diff / 1000.0, 100.0 * d.diff / b.mean, d.z, d.dof);
    int same = same_partition(rl->placement, rows[best].placement);
    if (w > 0 && (size_t)w < len && same)
        snprintf(buf + w, len - (size_t)w, "%s",
                 same == 1 ? " Both sides picked the same placement: the difference is run-to-run noise."
                           : " Both picks are the same partition with the devices swapped: the difference is "
                             "between the GPUs, not between placements.");
    return buf;
}

/* The sides of one confirmation as read back, with the simulator's
 * predictions of their picks under the confirmation's setting. */
typedef struct {
    report *r;
    side_row *rows;      /* MAX_SIDES */
    int n;
    int same_graph;      /* the confirmation is of the report's graph: predict */
    const schedule *sc;
    int64_t cap;
} side_reader;

static int read_side(void *ctx, const profile_calib_side *s) {
    side_reader *sr = ctx;
    if (sr->n >= MAX_SIDES) return 1;
    report *r = sr->r;
    side_row *w = &sr->rows[sr->n++];
    snprintf(w->side, sizeof w->side, "%s", s->side);
    snprintf(w->cand, sizeof w->cand, "%s", s->candidate ? s->candidate : "");
    w->placement = s->placement ? strdup(s->placement) : NULL;
    w->n_cand = s->n_candidates;
    w->n_oom = s->n_oom;
    w->n = s->n;
    w->mean = s->mean_us;
    w->sd = s->sd_us;
    w->se = s->se_us;
    w->pred_at_confirm = s->pred_us;
    w->peak = s->peak_bytes;
    int o1 = 0;
    w->pred_neutral = w->pred_cal = NAN;
    if (sr->same_graph && w->placement) {
        predict(r, w->placement, sr->sc, sr->cap, &r->neutral, &w->pred_neutral, &w->pred_oom);
        predict(r, w->placement, sr->sc, sr->cap, &r->calibrated, &w->pred_cal, &o1);
    }
    return 0;
}

static pl_status one_confirm(report *r, const profile_calib_confirm *cs, FILE *summary_rows) {
    int64_t cid = cs->id;
    char label[64], safe[64];
    snprintf(label, sizeof label, "%s", cs->label);
    file_safe(label, safe, sizeof safe);
    int64_t run = cs->run_id;
    const char *gkey = cs->graph_key;
    schedule sc = schedule_make(cs->micro_batches, SCHED_GPIPE);
    schedule_parse_order(cs->schedule, &sc.order, NULL, 0);
    int64_t cap = cs->mem_cap;
    int same_graph = !strcmp(gkey, r->graph_key);
    char capbuf[32] = "none";
    if (cap > 0) pl_format_bytes((double)cap, capbuf, sizeof capbuf);
    fprintf(r->md, "\n### Setting %s: m=%d, %s, per-device memory cap %s\n\n", label, sc.micro_batches,
            schedule_order_name(sc.order), capbuf);
    fprintf(r->md,
            "Confirmation %lld (%s) on `%s`, shortlist from run %lld: %d selection rounds over every candidate, then "
            "%d confirmation rounds of the picks, each timing %d steps after %d warm-up steps, shuffled (seed %lld). "
            "Only confirmation rounds are reported.\n\n",
            (long long)cid, cs->created_at, cs->timer, (long long)run, cs->selection_rounds, cs->confirm_rounds,
            cs->steps, cs->warmup, (long long)cs->seed);
    side_row rows[MAX_SIDES];
    memset(rows, 0, sizeof rows);
    side_reader sr = {r, rows, 0, same_graph, &sc, cap};
    pl_status st = profile_db_calib_sides(r->db, cid, read_side, &sr);
    const int n = sr.n;
    if (st != PL_OK) {
        store_fail(r, st, "sides");
        goto out;
    }
    int use_cal = r->n_calibrated > 0;
    fprintf(r->md, "| side | pick | candidates (OOM) | confirmed mean ± sd (ms) | se (ms) | predicted%s (ms) |%s "
                   "measured peak |\n|---|---|---|---|---|---|%s---|\n",
            use_cal ? ", neutral" : "", use_cal ? " predicted, calibrated (ms) |" : "", use_cal ? "---|" : "");
    int rl = -1, win = -1;
    for (int i = 0; i < n; i++) {
        side_row *w = &rows[i];
        if (!strcmp(w->side, "rl")) rl = i;
        if (w->n > 0 && (win < 0 || w->mean < rows[win].mean)) win = i;
        char b1[32], b2[32], b3[32], b4[32], b5[32], pk[32] = "-";
        if (w->peak > 0) pl_format_bytes((double)w->peak, pk, sizeof pk);
        char conf[80];
        if (w->n > 0) snprintf(conf, sizeof conf, "%s ± %s", ms(b1, sizeof b1, w->mean), ms(b2, sizeof b2, w->sd));
        else snprintf(conf, sizeof conf, "OOM");
        char cb[160];
        fprintf(r->md, "| %s | %s | %d (%d) | %s | %s | %s%s |", w->side, w->n ? cell(cb, sizeof cb, w->cand) : "-",
                w->n_cand, w->n_oom,
                conf, w->n ? ms(b3, sizeof b3, w->se) : "-", ms(b4, sizeof b4, w->pred_neutral),
                w->pred_oom ? " (OOM)" : "");
        if (use_cal) fprintf(r->md, " %s |", ms(b5, sizeof b5, w->pred_cal));
        fprintf(r->md, " %s |\n", pk);
    }
    char vb[512];
    fprintf(r->md, "\nVerdict: %s\n\n", verdict(rl >= 0 ? &rows[rl] : NULL, rows, n, vb, sizeof vb));
    /* every pair, in standard errors */
    fprintf(r->md, "Pairwise differences (row minus column, ms, and in standard errors):\n\n|  |");
    for (int j = 0; j < n; j++) fprintf(r->md, " %s |", rows[j].side);
    fprintf(r->md, "\n|---|");
    for (int j = 0; j < n; j++) fprintf(r->md, "---|");
    fprintf(r->md, "\n");
    for (int i = 0; i < n; i++) {
        fprintf(r->md, "| %s |", rows[i].side);
        for (int j = 0; j < n; j++) {
            if (i == j || !rows[i].n || !rows[j].n) {
                fprintf(r->md, " - |");
                continue;
            }
            calib_summary a = {rows[i].n, rows[i].mean, rows[i].sd, rows[i].se};
            calib_summary b = {rows[j].n, rows[j].mean, rows[j].sd, rows[j].se};
            calib_diff d = calib_welch(a, b);
            fprintf(r->md, " %+.3f (%+.1f se) |", d.diff / 1000.0, d.z);
        }
        fprintf(r->md, "\n");
    }
    /* summary row for the combined table: single, human, rl, dp, search */
    static const char *order[] = {"single", "human", "rl", "dp", "search"};
    fprintf(summary_rows, "| %s (m=%d %s, memory cap %s) |", label, sc.micro_batches, schedule_order_name(sc.order), capbuf);
    for (int k = 0; k < 5; k++) {
        int i = -1;
        for (int j = 0; j < n; j++)
            if (!strcmp(rows[j].side, order[k])) i = j;
        char b1[32], b2[32], b3[32];
        if (i < 0) fprintf(summary_rows, " - |");
        else if (!rows[i].n) fprintf(summary_rows, " OOM |");
        else
            fprintf(summary_rows, " %s ± %s (%s) |", ms(b1, sizeof b1, rows[i].mean), ms(b2, sizeof b2, rows[i].sd),
                    ms(b3, sizeof b3, use_cal ? rows[i].pred_cal : rows[i].pred_neutral));
    }
    fprintf(summary_rows, " %s |\n", win >= 0 ? rows[win].side : "-");

    char base[128], title[256];
    if (r->ctx && same_graph) {
        snprintf(base, sizeof base, "h2h-%s", safe);
        snprintf(title, sizeof title, "Setting %s: m=%d %s, memory cap %s (confirmation rounds only)", label, sc.micro_batches,
                 schedule_order_name(sc.order), capbuf);
        if ((st = h2h_chart(r, base, title, rows, n, use_cal)) != PL_OK) goto out;
        fprintf(r->md, "\n![head to head %s](%s%s.png)\n", label, img(r), base);
        snprintf(base, sizeof base, "placement-%s", safe);
        snprintf(title, sizeof title, "Setting %s: each side's pick, nodes coloured by device", label);
        if ((st = placement_map(r, base, title, rows, n)) != PL_OK) goto out;
        fprintf(r->md, "![placements %s](%s%s.png)\n", label, img(r), base);
        if (win >= 0 && rows[win].placement) {
            char tname[128];
            snprintf(tname, sizeof tname, "trace-%s-sim.json", safe);
            if ((st = trace_winner(r, tname, rows[win].placement, &sc, cap)) != PL_OK) goto out;
            char cb[160];
            fprintf(r->md, "\nWinner `%s` (%s): simulated trace [%s](%s%s)", rows[win].side,
                    cell(cb, sizeof cb, rows[win].cand), tname, img(r), tname);
            snprintf(tname, sizeof tname, "trace-%s-measured.json", safe);
            int measured = 0;
            if ((st = measured_trace(r, cid, tname, &measured)) != PL_OK) goto out;
            if (measured) fprintf(r->md, ", measured trace [%s](%s%s)", tname, img(r), tname);
            fprintf(r->md, " (open in Perfetto or chrome://tracing).");
            if (!measured)
                fprintf(r->md, " %s", r->opt->measured_trace_note ? r->opt->measured_trace_note
                                                                  : "No measured trace is stored for this setting.");
            fprintf(r->md, "\n");
        }
    }
    r->sum.n_confirms++;
out:
    for (int i = 0; i < n; i++) free(rows[i].placement);
    return st;
}

/* Each confirmation read back, written by one_confirm until one fails. */
typedef struct {
    report *r;
    FILE *summary_rows;
    pl_status st;        /* one_confirm's first failure */
} confirm_reader;

static int read_confirm(void *ctx, const profile_calib_confirm *c) {
    confirm_reader *cr = ctx;
    cr->st = one_confirm(cr->r, c, cr->summary_rows);
    return cr->st != PL_OK;
}

static pl_status confirm_section(report *r) {
    fprintf(r->md, "\n## Head to head on hardware\n\n");
    char *rows_text = NULL;
    size_t rows_len = 0;
    FILE *rows = open_memstream(&rows_text, &rows_len);
    if (!rows) return pl_fail(r->msg, r->len, PL_ERR_NOMEM, "out of memory");
    /* the detailed sections go to a second buffer so the summary table leads */
    char *detail_text = NULL;
    size_t detail_len = 0;
    FILE *detail = open_memstream(&detail_text, &detail_len);
    FILE *md = r->md;
    pl_status st = PL_OK;
    if (!detail) st = pl_fail(r->msg, r->len, PL_ERR_NOMEM, "out of memory");
    r->md = detail;
    confirm_reader cr = {r, rows, PL_OK};
    if (st == PL_OK) {
        st = profile_db_calib_confirms(r->db, read_confirm, &cr);
        if (st != PL_OK) store_fail(r, st, "confirmations");
        else st = cr.st;
    }
    r->md = md;
    fclose(rows);
    if (detail) fclose(detail);
    if (st == PL_OK) {
        if (r->sum.n_confirms == 0) fprintf(md, "No confirmation is stored (run `placer confirm`).\n");
        else {
            fprintf(md, "Confirmed mean ± sd over the confirmation rounds (ms), simulator prediction in brackets%s.\n\n",
                    r->n_calibrated ? " (calibrated parameters)" : " (neutral parameters: not calibrated)");
            fprintf(md, "| setting | best single GPU | best human split | RL placer | DP | search | fastest |\n");
            fprintf(md, "|---|---|---|---|---|---|---|\n%s\n%s", rows_text ? rows_text : "",
                    detail_text ? detail_text : "");
        }
    }
    free(rows_text);
    free(detail_text);
    return st;
}

/* ---- entry ---- */

pl_status calib_report_write(profile_db *db, const calib_report_options *opt, calib_report_summary *sum, char *msg,
                             size_t len) {
    if (!db || !opt || !opt->out_dir) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    report r;
    memset(&r, 0, sizeof r);
    r.opt = opt;
    r.db = db;
    r.msg = msg;
    r.len = len;
    pl_status st = PL_OK;
    char mdpath[PATH_LEN];
    if (mkdir_p(opt->out_dir)) return pl_fail(msg, len, PL_ERR_IO, "cannot create %s: %s", opt->out_dir, strerror(errno));
    if ((st = probe_gnuplot(&r)) != PL_OK) return st;
    st = profile_db_load_profile(db, NULL, &r.p, &r.cfg, msg, len);
    if (st != PL_OK) return st;
    if ((st = graph_build_gpt(&r.cfg, &r.g, msg, len)) != PL_OK) goto out;
    gpt_config_key(&r.cfg, r.graph_key, sizeof r.graph_key);
    if ((st = sim_ctx_create(r.g, r.p, r.cfg.batch, &r.ctx)) != PL_OK) {
        pl_fail(msg, len, st, "cannot create a simulator for the stored profile");
        goto out;
    }
    sim_params_default(&r.neutral);
    if ((st = calib_db_load_params(db, r.graph_key, &r.calibrated, &r.n_calibrated, msg, len)) != PL_OK) goto out;
    snprintf(mdpath, sizeof mdpath, "%s", opt->markdown ? opt->markdown : "");
    if (!opt->markdown) snprintf(mdpath, sizeof mdpath, "%s/results.md", opt->out_dir);
    r.md = fopen(mdpath, "w");
    if (!r.md) {
        st = pl_fail(msg, len, PL_ERR_IO, "cannot write %s: %s", mdpath, strerror(errno));
        goto out;
    }
    profile_db_machine_row mach;
    int have_mach = profile_db_machine(db, &mach) == PL_OK;
    fprintf(r.md, "# Results\n\nGenerated by `placer report` from the profile database; every number below is read "
                  "from it (regenerate with `scripts/experiments.sh`).\n\n");
    fprintf(r.md, "- machine: `%s` (%s profile%s%s), %d devices", have_mach ? mach.name : r.p->machine,
            have_mach ? mach.source : r.p->source, have_mach && *mach.topology ? "; " : "",
            have_mach ? mach.topology : "", r.p->n_devices);
    for (int d = 0; d < r.p->n_devices; d++) {
        char b[32];
        pl_format_bytes((double)r.p->devices[d].mem_bytes, b, sizeof b);
        fprintf(r.md, "%s%s (%s)", d ? ", " : ": ", r.p->devices[d].name, b);
    }
    fprintf(r.md, "\n- graph: `%s`, %d nodes, %lld parameters\n", r.graph_key, r.g->n_nodes, (long long)r.g->total_params);
    fprintf(r.md, "- simulator parameters: %s\n", r.n_calibrated ? "calibrated (stored in the database)" : "neutral (never calibrated)");
    if ((st = confirm_section(&r)) != PL_OK) goto out;
    if ((st = calibration_section(&r)) != PL_OK) goto out;
    if ((st = learning_section(&r)) != PL_OK) goto out;
out:
    if (r.md && fclose(r.md) && st == PL_OK) st = pl_fail(msg, len, PL_ERR_IO, "cannot write %s", mdpath);
    sim_ctx_destroy(r.ctx);
    graph_destroy(r.g);
    profile_data_destroy(r.p);
    if (sum) *sum = r.sum;
    return st;
}
