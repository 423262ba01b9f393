/*
 * sim_fidelity.c: how well the simulator predicts the hardware timings
 * stored in a profile database, and how well a replay of the engine's own
 * compiled plan does (tests/sim/hw_replay.h), placement by placement.
 *
 * For every stored measurement (or those of one purpose) it prints the
 * measured step time and peak, the simulator's prediction, the replay's
 * prediction and the engine's own arena need (from compiling the plan, as
 * the CUDA backend would, with its 32 MiB cuBLAS workspace), then MAPE,
 * max error and Kendall's tau per group (one device, contiguous split,
 * scattered placement). Repeated timings of one (placement, m, schedule)
 * are averaged first. Nothing is written.
 *
 * --refit NAMES instead fits only the named parameters (comma-separated;
 * the others keep their --params/--set values) on the 'calibrate'
 * measurements with placer calibrate's split (--seed, --holdout) and
 * prints the held-out accuracy: a way to compare parameter sets offline.
 *
 * --dump PLACEMENT prints the replay's timeline of that placement (one
 * line per instruction that takes time: device, stream, kind, node, mb,
 * start, end), for comparison with a measured trace.
 *
 *   sim_fidelity --db FILE [--purpose P] [--params stored|neutral]
 *                [--set name=value]... [--eager BYTES] [--ws BYTES] [--quiet]
 *                [--refit NAMES [--seed N] [--holdout F]] [--dump PLACEMENT]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib_db.h"
#include "fit.h"
#include "hw.h"
#include "hw_replay.h"
#include "sim.h"
#include "stats.h"

typedef struct {
    int first;      /* dataset entry holding the placement */
    int n;          /* timings averaged */
    double meas_us; /* mean of their medians */
    int64_t peak;   /* measured peak (largest device) */
} group_row;

static int same_entry(const calib_dataset *d, int a, int b) {
    return d->sched[a].micro_batches == d->sched[b].micro_batches && d->sched[a].order == d->sched[b].order &&
           !memcmp(d->placements + (size_t)a * d->n_nodes, d->placements + (size_t)b * d->n_nodes,
                   sizeof(int) * (size_t)d->n_nodes);
}

/* 0 one device, 1 contiguous (each device one run of nodes), 2 scattered */
static int kind_of(const int *pl, int n) {
    int runs = 1, used[64] = {0}, nu = 0;
    for (int i = 0; i < n; i++) {
        if (!used[pl[i]]) {
            used[pl[i]] = 1;
            nu++;
        }
        if (i > 0 && pl[i] != pl[i - 1]) runs++;
    }
    if (nu == 1) return 0;
    return runs == nu ? 1 : 2;
}

static void report(const char *what, const double *pred, const double *meas, int n) {
    if (n == 0) return;
    printf("  %-28s n=%3d  MAPE %7.2f%%  max %7.2f%%  tau %6.3f\n", what, n, calib_mape(pred, meas, n),
           calib_max_ape(pred, meas, n), n > 1 ? calib_kendall_tau(pred, meas, n) : NAN);
}

/* Fit the named parameters on the 'calibrate' measurements (placer
 * calibrate's split) and print the held-out accuracy. 0 on success. */
static int refit_report(profile_db *db, const calib_model *m, const sim_params *start, const char *names,
                        uint64_t seed, double holdout) {
    char msg[512] = "";
    calib_fit_options opt;
    calib_fit_options_default(&opt);
    for (int i = 0; i < SIM_N_PARAMS; i++) opt.fit_mask[i] = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", names);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        int found = 0;
        for (int i = 0; i < SIM_N_PARAMS; i++)
            if (!strcmp(sim_param_name(i), t)) opt.fit_mask[i] = found = 1;
        if (!found) {
            fprintf(stderr, "sim_fidelity: unknown parameter '%s' in --refit\n", t);
            return 2;
        }
    }
    calib_dataset *d = NULL;
    int rc = 1, ntr = 0, nte = 0;
    int *tr = NULL, *te = NULL;
    if (calib_dataset_create(m->g->n_nodes, &d) != PL_OK ||
        calib_db_load_dataset(db, m->key, "calibrate", m->p->n_devices, d, NULL, msg, sizeof msg) != PL_OK)
        goto out;
    tr = malloc(sizeof(int) * (size_t)(d->n + 1));
    te = malloc(sizeof(int) * (size_t)(d->n + 1));
    if (!tr || !te || calib_split(d, holdout, seed, tr, &ntr, te, &nte) != PL_OK) goto out;
    calib_fit_result fr;
    calib_eval b, a;
    if (calib_fit(m->g, m->p, d, tr, ntr, start, &opt, &fr, msg, sizeof msg) != PL_OK ||
        calib_evaluate(m->g, m->p, d, te, nte, start, &b, NULL, NULL, msg, sizeof msg) != PL_OK ||
        calib_evaluate(m->g, m->p, d, te, nte, &fr.params, &a, NULL, NULL, msg, sizeof msg) != PL_OK)
        goto out;
    printf("refit of %s on %d placements, %d held out (seed %llu): %d iterations\n", names, ntr, nte,
           (unsigned long long)seed, fr.iterations);
    for (int i = 0; i < SIM_N_PARAMS; i++)
        printf("  %-24s %12.5g  +- %10.3g  %s\n", sim_param_name(i), *sim_param_ptr(&fr.params, i), fr.err[i],
               fr.state[i] == CALIB_PARAM_FITTED ? "fitted" : fr.state[i] == CALIB_PARAM_FROZEN ? "kept" : "undetermined");
    printf("  held out before: MAPE %.2f%% max %.2f%% tau %.3f | after: MAPE %.2f%% max %.2f%% tau %.3f\n", b.mape,
           b.max_ape, b.tau, a.mape, a.max_ape, a.tau);
    rc = 0;
out:
    if (rc && msg[0]) fprintf(stderr, "sim_fidelity: %s\n", msg);
    free(tr);
    free(te);
    calib_dataset_destroy(d);
    return rc;
}

int main(int argc, char **argv) {
    const char *db_path = NULL, *purpose = NULL, *params = "stored";
    int64_t eager = 4LL << 20, ws = 32LL << 20;
    int quiet = 0;
    const char *dump_pl = NULL; /* placement text whose replay timeline goes to stdout */
    const char *refit = NULL;   /* parameters to fit, comma-separated */
    uint64_t seed = 1;
    double holdout = 0.3;
    char sets[16][64];
    int n_sets = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--db") && a + 1 < argc) db_path = argv[++a];
        else if (!strcmp(argv[a], "--purpose") && a + 1 < argc) purpose = argv[++a];
        else if (!strcmp(argv[a], "--params") && a + 1 < argc) params = argv[++a];
        else if (!strcmp(argv[a], "--eager") && a + 1 < argc) eager = strtoll(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--ws") && a + 1 < argc) ws = strtoll(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--set") && a + 1 < argc && n_sets < 16) snprintf(sets[n_sets++], 64, "%s", argv[++a]);
        else if (!strcmp(argv[a], "--quiet")) quiet = 1;
        else if (!strcmp(argv[a], "--dump") && a + 1 < argc) dump_pl = argv[++a];
        else if (!strcmp(argv[a], "--refit") && a + 1 < argc) refit = argv[++a];
        else if (!strcmp(argv[a], "--seed") && a + 1 < argc) seed = strtoull(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--holdout") && a + 1 < argc) holdout = atof(argv[++a]);
        else {
            fprintf(stderr,
                    "usage: sim_fidelity --db FILE [--purpose P] [--params stored|neutral] [--set name=value]...\n"
                    "                    [--eager BYTES] [--ws BYTES] [--quiet]\n"
                    "                    [--refit NAMES [--seed N] [--holdout F]] [--dump PLACEMENT]\n");
            return 2;
        }
    }
    if (!db_path) {
        fprintf(stderr, "sim_fidelity: --db is required\n");
        return 2;
    }
    char msg[512] = "";
    profile_db *db = NULL;
    calib_model m;
    memset(&m, 0, sizeof m);
    calib_dataset *d = NULL;
    hw_engine *e = NULL;
    sim_ctx *ctx = NULL;
    int rc = 1;
    if (profile_db_open(db_path, PROFILE_DB_READ, &db, msg, sizeof msg) != PL_OK ||
        calib_model_load(db, NULL, &m, msg, sizeof msg) != PL_OK) {
        fprintf(stderr, "sim_fidelity: %s\n", msg);
        goto out;
    }
    sim_params prm;
    sim_params_default(&prm);
    if (!strcmp(params, "stored") && calib_db_load_params(db, m.key, &prm, NULL, msg, sizeof msg) != PL_OK) {
        fprintf(stderr, "sim_fidelity: %s\n", msg);
        goto out;
    }
    for (int k = 0; k < n_sets; k++) {
        char *eq = strchr(sets[k], '=');
        int found = 0;
        if (eq) {
            *eq = 0;
            for (int i = 0; i < SIM_N_PARAMS; i++)
                if (!strcmp(sim_param_name(i), sets[k])) {
                    *sim_param_ptr(&prm, i) = strtod(eq + 1, NULL);
                    found = 1;
                }
        }
        if (!found) {
            fprintf(stderr, "sim_fidelity: unknown parameter in --set %s\n", sets[k]);
            rc = 2;
            goto out;
        }
    }
    const int n = m.g->n_nodes, D = m.p->n_devices;
    if (refit) {
        rc = refit_report(db, &m, &prm, refit, seed, holdout);
        goto out;
    }
    if (calib_dataset_create(n, &d) != PL_OK ||
        calib_db_load_dataset(db, m.key, purpose, D, d, NULL, msg, sizeof msg) != PL_OK) {
        fprintf(stderr, "sim_fidelity: %s\n", msg[0] ? msg : "out of memory");
        goto out;
    }
    hw_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.backend = HW_BACKEND_CPU;
    eo.n_devices = D;
    if (hw_engine_create(&eo, &e, msg, sizeof msg) != PL_OK || sim_ctx_create(m.g, m.p, 64, &ctx) != PL_OK) {
        fprintf(stderr, "sim_fidelity: %s\n", msg);
        goto out;
    }
    group_row *rows = calloc((size_t)d->n + 1, sizeof *rows);
    int nr = 0, sim_failed = 0;
    for (int i = 0; i < d->n; i++) {
        if (d->oom[i] || !(d->step_us[i] > 0)) continue;
        int k = 0;
        while (k < nr && !same_entry(d, rows[k].first, i)) k++;
        if (k == nr) rows[nr++] = (group_row){i, 0, 0, d->peak_bytes[i]};
        rows[k].meas_us += d->step_us[i];
        rows[k].n++;
    }
    double *ms[3], *ps[3], *rs[3], *mm[3], *pm[3], *rm[3];
    int cnt[3] = {0};
    for (int k = 0; k < 3; k++) {
        ms[k] = calloc((size_t)nr + 1, sizeof(double));
        ps[k] = calloc((size_t)nr + 1, sizeof(double));
        rs[k] = calloc((size_t)nr + 1, sizeof(double));
        mm[k] = calloc((size_t)nr + 1, sizeof(double));
        pm[k] = calloc((size_t)nr + 1, sizeof(double));
        rm[k] = calloc((size_t)nr + 1, sizeof(double));
    }
    printf("parameters:");
    for (int i = 0; i < SIM_N_PARAMS; i++) printf(" %s=%.4g", sim_param_name(i), *sim_param_ptr(&prm, i));
    printf("\neager sends up to %lld bytes; arena workspace %lld bytes\n", (long long)eager, (long long)ws);
    if (!quiet)
        printf("%-4s %3s %-5s %4s %10s %10s %7s %10s %7s | %8s %8s %8s %4s  placement\n", "kind", "m", "order", "n",
               "measured", "sim", "err%", "replay", "err%", "peak MB", "sim MB", "need MB", "xfer");
    for (int k = 0; k < nr; k++) {
        int i = rows[k].first;
        const int *pl = d->placements + (size_t)i * n;
        double meas = rows[k].meas_us / rows[k].n;
        sim_result r;
        int64_t sp = 0;
        if (sim_run(ctx, pl, &d->sched[i], NULL, &prm, &r) != PL_OK) {
            if (!sim_failed) fprintf(stderr, "sim_fidelity: sim_run: %s\n", sim_last_error(ctx));
            sim_failed = 1;
            r.step_us = NAN;
        } else {
            for (int dv = 0; dv < D; dv++)
                if (r.peak_bytes[dv] > sp) sp = r.peak_bytes[dv];
        }
        hw_replay *hr = NULL;
        double rep = NAN, ends[HW_MAX_DEVICES];
        int64_t need = 0;
        int nx = 0;
        if (hw_replay_compile(e, m.g, pl, &d->sched[i], ws, NULL, &hr, msg, sizeof msg) == PL_OK) {
            char text[256];
            placement_format(pl, n, text, sizeof text);
            int dumping = dump_pl && !strcmp(dump_pl, text);
            hw_replay_time_dump(hr, m.p, &prm, eager, ends, &rep, dumping ? stdout : NULL);
            nx = hw_replay_transfers(hr);
            for (int dv = 0; dv < D; dv++)
                if (hw_replay_need_bytes(hr, dv) > need) need = hw_replay_need_bytes(hr, dv);
        }
        hw_replay_destroy(hr);
        int kd = kind_of(pl, n);
        ms[kd][cnt[kd]] = meas;
        ps[kd][cnt[kd]] = r.step_us;
        rs[kd][cnt[kd]] = rep;
        mm[kd][cnt[kd]] = (double)rows[k].peak;
        pm[kd][cnt[kd]] = (double)sp;
        rm[kd][cnt[kd]] = (double)need;
        cnt[kd]++;
        if (!quiet) {
            char text[256];
            placement_format(pl, n, text, sizeof text);
            printf("%-4s %3d %-5s %4d %10.1f %10.1f %+7.2f %10.1f %+7.2f | %8.1f %8.1f %8.1f %4d  %s\n",
                   kd == 0 ? "one" : kd == 1 ? "cont" : "scat", d->sched[i].micro_batches,
                   schedule_order_name(d->sched[i].order), rows[k].n, meas, r.step_us,
                   100 * (r.step_us - meas) / meas, rep, 100 * (rep - meas) / meas, rows[k].peak / 1e6, sp / 1e6,
                   need / 1e6, nx, text);
        }
    }
    static const char *kn[3] = {"one device", "contiguous", "scattered"};
    double *all_m = calloc((size_t)nr + 1, sizeof(double)), *all_p = calloc((size_t)nr + 1, sizeof(double)),
           *all_r = calloc((size_t)nr + 1, sizeof(double)), *all_mm = calloc((size_t)nr + 1, sizeof(double)),
           *all_pm = calloc((size_t)nr + 1, sizeof(double)), *all_rm = calloc((size_t)nr + 1, sizeof(double));
    int na = 0;
    printf("step time, simulator:\n");
    for (int k = 0; k < 3; k++) {
        report(kn[k], ps[k], ms[k], cnt[k]);
        for (int j = 0; j < cnt[k]; j++) {
            all_m[na] = ms[k][j];
            all_p[na] = ps[k][j];
            all_r[na] = rs[k][j];
            all_mm[na] = mm[k][j];
            all_pm[na] = pm[k][j];
            all_rm[na++] = rm[k][j];
        }
    }
    report("all", all_p, all_m, na);
    printf("step time, replay of the engine's plan:\n");
    for (int k = 0; k < 3; k++) report(kn[k], rs[k], ms[k], cnt[k]);
    report("all", all_r, all_m, na);
    printf("peak memory (largest device):\n");
    report("simulator", all_pm, all_mm, na);
    report("engine plan (compiled here)", all_rm, all_mm, na);
    rc = 0;
    for (int k = 0; k < 3; k++) {
        free(ms[k]);
        free(ps[k]);
        free(rs[k]);
        free(mm[k]);
        free(pm[k]);
        free(rm[k]);
    }
    free(all_m);
    free(all_p);
    free(all_r);
    free(all_mm);
    free(all_pm);
    free(all_rm);
    free(rows);
out:
    sim_ctx_destroy(ctx);
    hw_engine_destroy(e);
    calib_dataset_destroy(d);
    calib_model_free(&m);
    profile_db_close(db);
    return rc;
}
