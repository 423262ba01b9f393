/*
 * cmd_calibrate.c: `placer calibrate` measures a designed set of placements
 * on the engine, fits the simulator's parameters to them (GSL, log space)
 * on a training split, reports the accuracy on the held-out split before
 * and after, and stores the parameters so the simulator uses them.
 * `placer calibrate --collectives` fits the layout simulator's collective
 * model to a profile's measured collective curves instead (calib/coll_fit.h)
 * and can write it as a collectives file (calib/coll_file.h).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"
#include "coll_file.h"
#include "coll_fit.h"
#include "cli.h"
#include "hw_timer.h"
#include "placer_config.h"
#include "timer.h"

static void calibrate_usage(FILE *f) {
    fprintf(f,
            "usage: placer calibrate --db FILE [--devices 0,1] [--count 60] [--seed N] [--holdout 0.3]\n"
            "                        [--steps 10] [--warmup 2] [--from-measurements] [--timer cuda|cpu|synthetic]\n"
            "                        [--config NAME] [--no-save] [--graphs] [--fit NAMES]\n"
            "       placer calibrate --collectives --db FILE [--transport NAME] [--write FILE] [--json]\n"
            "                        (the collective model; see placer calibrate --collectives --help)\n"
            "       placer calibrate --layout-runs FILE [--framework NAME] [--write OUT.json]\n"
            "                        (a framework profile from measured runs; see --layout-runs --help)\n\n"
            "Times --count placements (random, single devices, contiguous pipelines, even layer splits;\n"
            "m in {1,2,4}, gpipe and 1f1b) on the engine and stores every timing; fits the simulator's\n"
            "parameters (launch overhead, transfer latency, contention, per-step cost, compute and transfer\n"
            "scales) by nonlinear least squares on log step time over a training split; prints the error on\n"
            "the held-out placements (MAPE, max error, Kendall's tau, peak memory) before and after; and\n"
            "stores the fitted parameters in the database, where simulations pick them up.\n\n"
            "  --db FILE             profile database (written)\n"
            "  --devices LIST        GPU of each profile device (default 0,1,..); may repeat a GPU\n"
            "  --count N             placements to measure (default 60)\n"
            "  --seed N              design and split seed (default 1)\n"
            "  --holdout F           held-out fraction in [0,1) (default 0.3)\n"
            "  --steps N, --warmup N timed and warm-up steps per placement (default 10, 2)\n"
            "  --from-measurements   time nothing: refit the stored 'calibrate' measurements (no GPU needed)\n"
            "  --timer KIND          cuda (default when built), cpu (the engine's CPU reference) or\n"
            "                        synthetic (the simulator with known parameters plus noise, for checks)\n"
            "  --noise F             synthetic timer: per-step log-normal noise sd (default 0.01)\n"
            "  --config NAME         graph config when the database holds several (default: its only one)\n"
            "  --no-save             report only; store neither the fit nor the parameters\n"
            "  --graphs              CUDA: replay steps as captured CUDA graphs (as placer step --graphs)\n"
            "  --fit NAMES           fit only these parameters (comma-separated names as printed below);\n"
            "                        the others stay neutral (default: all)\n");
}

static void progress(void *ctx, int done, int total) {
    (void)ctx;
    fprintf(stderr, "\rplacer calibrate: measured %d/%d placements", done, total);
    if (done == total) fputc('\n', stderr);
}

static void print_eval(const char *what, const calib_eval *e) {
    printf("  %-26s %8.2f%% %9.2f%% %8.3f %12.2f%% %12.2f%%\n", what, e->mape, e->max_ape, e->tau, e->mem_mape,
           e->mem_max_ape);
}

/* ---- placer calibrate --collectives ------------------------------------- */

static void collectives_usage(FILE *f) {
    fprintf(f,
            "usage: placer calibrate --collectives --db FILE [--transport NAME] [--write FILE] [--points] [--json]\n\n"
            "Fits the layout simulator's collective model to the collective curves a profile holds\n"
            "(placer profile --collectives N): per kind (all-reduce, all-gather, reduce-scatter)\n"
            "    t(S, n) = base + steps(n) * alpha + frac(n) * S / busbw\n"
            "(steps = 2(n-1) for all-reduce, n-1 for all-gather and reduce-scatter; frac = steps / n,\n"
            "nccl-tests' bus factor), by least squares in relative error over every measured size and\n"
            "rank count; base is held at 0 when one rank count was measured (or would fit below 0).\n"
            "Prints the constants with their errors, the fit's relative error per kind and, as a\n"
            "held-out check, the error on the odd sizes of a fit made on the even ones. The database\n"
            "is only read.\n\n"
            "  --db FILE          profile database with collective curves\n"
            "  --transport NAME   the curves of this transport (sockets, mpi, nccl; default: the only one)\n"
            "  --write FILE       write the constants and the curves as a collectives file, which\n"
            "                     placer layout --collectives-from FILE reads (docs/layouts.md)\n"
            "  --points           also print every point: measured, fitted and held-out times\n"
            "  --json             print the result as JSON\n");
}

static void json_num(double v) {
    if (isfinite(v)) printf("%.6g", v);
    else printf("null");
}

/* One kind's fit summary as a JSON object text (for --json and the file's "fit"). */
static void kind_fit_json(const calib_coll_kind_fit *k, char *buf, size_t len) {
    char h1[32] = "null", h2[32] = "null", e[3][32];
    if (k->n_held > 0) {
        snprintf(h1, sizeof h1, "%.6g", k->held_rms_rel);
        snprintf(h2, sizeof h2, "%.6g", k->held_max_rel);
    }
    const double errs[3] = {k->base_err, k->alpha_err, k->busbw_err / 1e9};
    for (int i = 0; i < 3; i++) {
        if (isfinite(errs[i])) snprintf(e[i], sizeof e[i], "%.6g", errs[i]);
        else snprintf(e[i], sizeof e[i], "null");
    }
    snprintf(buf, len,
             "{\"points\": %d, \"rank_counts\": %d, \"base_fitted\": %s, \"base_err_us\": %s, \"alpha_err_us\": %s, "
             "\"busbw_err_gb_s\": %s, \"rms_rel_err\": %.6g, \"max_rel_err\": %.6g, \"held_out_points\": %d, "
             "\"held_out_rms_rel_err\": %s, \"held_out_max_rel_err\": %s}",
             k->n_points, k->n_ranks, k->base_fitted ? "true" : "false", e[0], e[1], e[2], k->rms_rel, k->max_rel,
             k->n_held, h1, h2);
}

static int calibrate_collectives(int argc, char **argv) {
    const char *db_path = NULL, *transport = NULL, *write_path = NULL;
    int json = 0, points = 0;
    static const struct option opts[] = {{"collectives", no_argument, 0, 'C'}, {"db", required_argument, 0, 'd'},
                                         {"transport", required_argument, 0, 'T'},
                                         {"write", required_argument, 0, 'W'}, {"points", no_argument, 0, 'p'},
                                         {"json", no_argument, 0, 'j'},        {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "Cd:T:W:pjh", opts, NULL)) != -1) {
        switch (c) {
        case 'C': break;
        case 'd': db_path = optarg; break;
        case 'T': transport = optarg; break;
        case 'W': write_path = optarg; break;
        case 'p': points = 1; break;
        case 'j': json = 1; break;
        case 'h': collectives_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("calibrate",
                                   "unknown or incomplete option '%s' for --collectives; see placer calibrate "
                                   "--collectives --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("calibrate", "unexpected argument '%s'; see placer calibrate --collectives --help",
                               argv[optind]);
    if (!db_path) return cli_usage_error("calibrate", "--db FILE is required");
    char msg[512] = "";
    profile_db *db = NULL;
    pl_status st = profile_db_open(db_path, PROFILE_DB_READ, &db, msg, sizeof msg);
    if (st != PL_OK) return cli_report("calibrate", st, msg);
    coll_measured *m = calloc(1, sizeof *m);
    calib_coll_fit_result r;
    memset(&r, 0, sizeof r);
    int rc = CLI_EXIT_OK;
    FILE *wf = NULL;
    if (!m) {
        rc = cli_report("calibrate", PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = calib_coll_fit_db(db, transport, m, &r, msg, sizeof msg)) != PL_OK) {
        char m2[sizeof msg + 64];
        snprintf(m2, sizeof m2, "%s: %s", db_path, msg);
        rc = cli_report("calibrate", st, m2);
        goto out;
    }
    char fits[COLL_KIND_COUNT][512];
    const char *fitp[COLL_KIND_COUNT];
    for (int k = 0; k < COLL_KIND_COUNT; k++) {
        fitp[k] = NULL;
        if (r.kind[k].n_points == 0) continue;
        kind_fit_json(&r.kind[k], fits[k], sizeof fits[k]);
        fitp[k] = fits[k];
    }
    if (write_path) {
        wf = fopen(write_path, "w");
        if (!wf) {
            rc = cli_usage_error("calibrate", "cannot write '%s': %s", write_path, strerror(errno));
            goto out;
        }
        st = coll_file_write(wf, m, fitp);
        if (fclose(wf) != 0 && st == PL_OK) st = PL_ERR_IO;
        wf = NULL;
        if (st != PL_OK) {
            rc = cli_report("calibrate", st, "writing the collectives file failed");
            goto out;
        }
    }
    if (json) {
        printf("{\"db\": \"");
        for (const char *s = db_path; *s; s++) {
            if (*s == '"' || *s == '\\') putchar('\\');
            if ((unsigned char)*s >= 0x20) putchar(*s);
        }
        printf("\", \"transport\": \"%s\", \"points\": %d,\n \"model\": \"t = base_us + steps(n) * alpha_us + "
               "frac(n) * bytes / busbw\",\n \"kinds\": {",
               r.transport, r.n_points);
        int first = 1;
        for (int k = 0; k < COLL_KIND_COUNT; k++) {
            if (!fitp[k]) continue;
            const coll_ab *a = &r.kind[k].ab;
            printf("%s\n  \"%s\": {\"base_us\": %.6g, \"alpha_us\": %.6g, \"busbw_gb_s\": %.6g, \"fit\": %s}",
                   first ? "" : ",", coll_file_kind_name((coll_kind)k), a->base_us, a->alpha_us, a->busbw / 1e9,
                   fitp[k]);
            first = 0;
        }
        printf("\n },\n \"per_point\": [");
        for (int i = 0; i < r.n_points; i++) {
            const calib_coll_point_fit *q = &r.points[i];
            printf("%s\n  {\"kind\": \"%s\", \"ranks\": %d, \"bytes\": %.17g, \"us\": %.6g, \"iqr_us\": ", i ? "," : "",
                   coll_file_kind_name(q->kind), q->ranks, q->bytes, q->us);
            json_num(q->spread_us);
            printf(", \"fit_us\": %.6g, \"rel_err\": %.6g, \"held_out\": %s, \"held_out_fit_us\": ", q->fit_us,
                   q->rel_err, q->held_out ? "true" : "false");
            json_num(q->held_us);
            printf(", \"held_out_rel_err\": ");
            json_num(q->held_rel_err);
            printf("}");
        }
        printf("\n ]%s%s%s}\n", write_path ? ", \"written\": \"" : "", write_path ? write_path : "",
               write_path ? "\"" : "");
        goto out;
    }
    printf("calibrate --collectives: %s\n", m->source);
    printf("model: t(S, n) = base + steps(n) * alpha + frac(n) * S / busbw  (steps 2(n-1) all-reduce, n-1 "
           "all-gather / reduce-scatter; frac = steps / n)\n\n");
    printf("  %-15s %6s %5s %15s %17s %19s %8s %8s   %s\n", "kind", "points", "ranks", "base us", "alpha us",
           "busbw GB/s", "rms err", "max err", "held out: odd sizes of a fit on the even ones (rms / max)");
    for (int k = 0; k < COLL_KIND_COUNT; k++) {
        const calib_coll_kind_fit *kf = &r.kind[k];
        if (kf->n_points == 0) continue;
        char base[32], alpha[32], bw[40], held[64] = "n/a (curves of fewer than 3 sizes)", ranks[48] = "";
        for (int i = 0, last = -1; i < r.n_points; i++) /* points are sorted by kind, ranks, bytes */
            if (r.points[i].kind == (coll_kind)k && r.points[i].ranks != last) {
                last = r.points[i].ranks;
                size_t l = strlen(ranks);
                snprintf(ranks + l, sizeof ranks - l, "%s%d", l ? "," : "", last);
            }
        if (kf->base_fitted && isfinite(kf->base_err)) snprintf(base, sizeof base, "%.2f +- %.2f", kf->ab.base_us, kf->base_err);
        else if (kf->base_fitted) snprintf(base, sizeof base, "%.2f", kf->ab.base_us);
        else snprintf(base, sizeof base, "0 (held)");
        if (isfinite(kf->alpha_err)) snprintf(alpha, sizeof alpha, "%.3f +- %.3f", kf->ab.alpha_us, kf->alpha_err);
        else snprintf(alpha, sizeof alpha, "%.3f", kf->ab.alpha_us);
        if (isfinite(kf->busbw_err)) snprintf(bw, sizeof bw, "%.4g +- %.2g", kf->ab.busbw / 1e9, kf->busbw_err / 1e9);
        else snprintf(bw, sizeof bw, "%.4g", kf->ab.busbw / 1e9);
        if (kf->n_held > 0)
            snprintf(held, sizeof held, "%.1f%% / %.1f%% (%d points)", 100 * kf->held_rms_rel, 100 * kf->held_max_rel,
                     kf->n_held);
        printf("  %-15s %6d %5s %15s %17s %19s %7.1f%% %7.1f%%   %s\n", coll_file_kind_name((coll_kind)k), kf->n_points,
               ranks, base, alpha, bw, 100 * kf->rms_rel, 100 * kf->max_rel, held);
    }
    if (points) {
        printf("\n  %-15s %5s %12s %12s %10s %12s %8s %12s %8s\n", "kind", "ranks", "bytes", "measured us", "iqr us",
               "fitted us", "err", "held-out us", "err");
        for (int i = 0; i < r.n_points; i++) {
            const calib_coll_point_fit *q = &r.points[i];
            char hu[24] = "(fitted on)", he[16] = "";
            if (q->held_out && isfinite(q->held_us)) {
                snprintf(hu, sizeof hu, "%.2f", q->held_us);
                snprintf(he, sizeof he, "%+.1f%%", 100 * q->held_rel_err);
            } else if (q->held_out) {
                snprintf(hu, sizeof hu, "-");
            }
            printf("  %-15s %5d %12.0f %12.2f %10.2f %12.2f %+7.1f%% %12s %8s\n", coll_file_kind_name(q->kind),
                   q->ranks, q->bytes, q->us, q->spread_us, q->fit_us, 100 * q->rel_err, hu, he);
        }
    }
    if (write_path)
        printf("\nwritten: %s (placer layout --collectives-from %s uses it)\n", write_path, write_path);
out:
    if (wf) fclose(wf);
    calib_coll_fit_free(&r);
    free(m);
    profile_db_close(db);
    return rc;
}

int cmd_calibrate(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--collectives")) return calibrate_collectives(argc, argv);
        else if (!strcmp(argv[i], "--layout-runs") || !strncmp(argv[i], "--layout-runs=", 14))
            return calibrate_layout_runs(argc, argv);
    const char *db_path = NULL, *devices = NULL, *timer_kind = PLACER_HAVE_CUDA ? "cuda" : NULL, *config = NULL;
    calib_calibrate_options o;
    calib_calibrate_options_default(&o);
    double noise = 0.01;
    int graphs = 0;
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"devices", required_argument, 0, 'D'},
                                         {"count", required_argument, 0, 'n'},
                                         {"seed", required_argument, 0, 's'},
                                         {"holdout", required_argument, 0, 'H'},
                                         {"steps", required_argument, 0, 'k'},
                                         {"warmup", required_argument, 0, 'w'},
                                         {"from-measurements", no_argument, 0, 'f'},
                                         {"timer", required_argument, 0, 't'},
                                         {"noise", required_argument, 0, 'N'},
                                         {"config", required_argument, 0, 'c'},
                                         {"no-save", no_argument, 0, 'S'},
                                         {"graphs", no_argument, 0, 'G'},
                                         {"fit", required_argument, 0, 'F'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "d:D:n:s:H:k:w:ft:N:c:SGF:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': db_path = optarg; break;
        case 'D': devices = optarg; break;
        case 'n':
            o.count = (int)strtol(optarg, &end, 10);
            if (*end || o.count < 1 || o.count > 100000)
                return cli_usage_error("calibrate", "--count must be a positive integer, got '%s'", optarg);
            break;
        case 's':
            o.seed = strtoull(optarg, &end, 10);
            if (*end || !*optarg) return cli_usage_error("calibrate", "--seed must be a non-negative integer");
            break;
        case 'H':
            o.holdout = strtod(optarg, &end);
            if (*end || !(o.holdout >= 0 && o.holdout < 1))
                return cli_usage_error("calibrate", "--holdout must be a fraction in [0, 1), got '%s'", optarg);
            break;
        case 'k':
            o.steps = (int)strtol(optarg, &end, 10);
            if (*end || o.steps < 1 || o.steps > 10000)
                return cli_usage_error("calibrate", "--steps must be a positive integer, got '%s'", optarg);
            break;
        case 'w':
            o.warmup = (int)strtol(optarg, &end, 10);
            if (*end || o.warmup < 0 || o.warmup > 10000)
                return cli_usage_error("calibrate", "--warmup must be a non-negative integer, got '%s'", optarg);
            break;
        case 'f': o.from_measurements = 1; break;
        case 't': timer_kind = optarg; break;
        case 'N':
            noise = strtod(optarg, &end);
            if (*end || !(noise >= 0 && noise < 1)) return cli_usage_error("calibrate", "--noise must be in [0, 1)");
            break;
        case 'c': config = optarg; break;
        case 'S': o.save = 0; break;
        case 'G': graphs = 1; break;
        case 'F': {
            char names[512];
            snprintf(names, sizeof names, "%s", optarg);
            for (int i = 0; i < SIM_N_PARAMS; i++) o.fit.fit_mask[i] = 0;
            int any = 0;
            for (char *tok = strtok(names, ","); tok; tok = strtok(NULL, ",")) {
                int found = 0;
                for (int i = 0; i < SIM_N_PARAMS; i++)
                    if (!strcmp(sim_param_name(i), tok)) found = o.fit.fit_mask[i] = 1;
                if (!found) return cli_usage_error("calibrate", "--fit: unknown parameter '%s'", tok);
                any = 1;
            }
            if (!any) return cli_usage_error("calibrate", "--fit needs at least one parameter name");
            break;
        }
        case 'h': calibrate_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("calibrate", "unknown or incomplete option '%s'; see placer calibrate --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("calibrate", "unexpected argument '%s'; see placer calibrate --help", argv[optind]);
    if (!db_path) return cli_usage_error("calibrate", "--db FILE is required");
    if (!o.from_measurements) {
        if (!timer_kind || (!PLACER_HAVE_CUDA && !strcmp(timer_kind, "cuda"))) /* not the engine's --cpu hint */
            return cli_usage_error("calibrate", "this build has no CUDA engine: use --timer cpu, or "
                                                "--from-measurements to refit stored timings");
        if (strcmp(timer_kind, "cuda") && strcmp(timer_kind, "cpu") && strcmp(timer_kind, "synthetic"))
            return cli_usage_error("calibrate", "--timer must be cuda, cpu or synthetic, got '%s'", timer_kind);
    }

    char msg[512] = "";
    int rc = CLI_EXIT_OK;
    profile_db *db = NULL;
    calib_model m = {0};
    calib_hw_timer *hw = NULL;
    calib_sim_timer *syn = NULL;
    calib_timer t = {0};
    /* read-only until the timer is ready, so that a failed start leaves the
     * file as it was; an older schema needs a write open */
    pl_status st = profile_db_open(db_path, PROFILE_DB_READ, &db, msg, sizeof msg);
    if (st == PL_ERR_INVALID) st = profile_db_open(db_path, PROFILE_DB_WRITE, &db, msg, sizeof msg);
    if (st != PL_OK) return cli_report("calibrate", st, msg);
    if ((st = calib_model_load(db, config, &m, msg, sizeof msg)) != PL_OK) {
        rc = cli_report("calibrate", st, msg);
        goto out;
    }
    int gpus[PLACEMENT_MAX_DEVICES], n_gpus = m.p->n_devices;
    for (int i = 0; i < n_gpus; i++) gpus[i] = i;
    if (devices) {
        if ((st = calib_parse_int_list(devices, gpus, PLACEMENT_MAX_DEVICES, &n_gpus, msg, sizeof msg)) != PL_OK) {
            rc = cli_report("calibrate", st, msg);
            goto out;
        }
        if (n_gpus != m.p->n_devices) {
            rc = cli_usage_error("calibrate", "--devices lists %d devices but the profile has %d", n_gpus,
                                 m.p->n_devices);
            goto out;
        }
    }
    if (!o.from_measurements) {
        if (!strcmp(timer_kind, "synthetic")) {
            sim_params truth;
            sim_params_default(&truth);
            truth.launch_overhead_us = 3.0;
            truth.transfer_latency_us = 8.0;
            truth.contention = 0.2;
            truth.step_fixed_us = 150.0;
            truth.compute_scale = 1.12;
            truth.transfer_scale = 1.35;
            st = calib_sim_timer_create(m.g, m.p, &truth, noise, o.seed + 1000, m.cfg.batch, &syn, &t);
            if (st != PL_OK) snprintf(msg, sizeof msg, "cannot create the synthetic timer");
        } else {
            /* the engine runs in the precision the profile was measured in */
            hw_precision prec;
            st = calib_db_precision(db, &prec, msg, sizeof msg);
            if (st == PL_OK)
                st = calib_hw_timer_create(timer_kind, m.g, gpus, n_gpus, o.seed, graphs, prec, &hw, &t, msg, sizeof msg);
            if (st == PL_ERR_NO_DEVICE) {
                char m2[sizeof msg], *semi = strchr(msg, ';'); /* drop the engine's own hint */
                if (semi) *semi = 0;
                snprintf(m2, sizeof m2, "no usable GPU (%.300s); --timer cpu uses the engine's CPU backend, "
                                        "--from-measurements refits stored timings", msg);
                memcpy(msg, m2, sizeof msg);
            }
        }
        if (st != PL_OK) {
            rc = cli_report("calibrate", st, msg);
            goto out;
        }
        if (cli_stderr_is_tty()) o.progress = progress;
    }
    if (o.from_measurements && o.save) {
        /* a dry run on the read-only handle first: too few measurements (or
         * any other refusal) must leave the file as it was */
        calib_calibrate_options dry = o;
        dry.save = 0;
        calib_calibrate_result r0;
        if ((st = calib_calibrate(db, &m, NULL, &dry, &r0, msg, sizeof msg)) != PL_OK) {
            rc = cli_report("calibrate", st, msg);
            goto out;
        }
    }
    if (!o.from_measurements || o.save) {
        profile_db_close(db);
        db = NULL;
        if ((st = profile_db_open(db_path, PROFILE_DB_WRITE, &db, msg, sizeof msg)) != PL_OK) {
            rc = cli_report("calibrate", st, msg);
            goto out;
        }
    }
    calib_calibrate_result r;
    st = calib_calibrate(db, &m, o.from_measurements ? NULL : &t, &o, &r, msg, sizeof msg);
    if (st != PL_OK) {
        rc = cli_report("calibrate", st, msg);
        goto out;
    }
    if (o.from_measurements)
        printf("calibrate: %d stored measurements of graph %s (%d OOM, %d rows of other graphs skipped)\n", r.n_data,
               m.key, r.n_oom, r.n_skipped);
    else
        printf("calibrate: %d placements measured with the %s timer%s%s (devices %s), %d OOM\n", r.n_measured, t.name,
               hw ? " in " : "", hw ? hw_precision_name(calib_hw_timer_precision(hw)) : "", devices ? devices : "default",
               r.n_oom);
    printf("fit: %d placements fitted, %d held out; %d trust-region iterations; sum of squared log residuals "
           "%.4g -> %.4g\n\n",
           r.n_train, r.n_test, r.fit.iterations, r.fit.chisq0, r.fit.chisq);
    printf("  %-22s %12s %12s %12s  %s\n", "parameter", "before", "after", "+- error", "");
    for (int i = 0; i < SIM_N_PARAMS; i++) {
        const char *state = r.fit.state[i] == CALIB_PARAM_FITTED        ? ""
                            : r.fit.state[i] == CALIB_PARAM_UNIDENTIFIABLE ? "not identifiable from these placements"
                                                                            : "kept";
        char err[32] = "-";
        if (isfinite(r.fit.err[i])) snprintf(err, sizeof err, "%.3g", r.fit.err[i]);
        else if (r.fit.state[i] == CALIB_PARAM_FITTED) snprintf(err, sizeof err, "undetermined");
        printf("  %-22s %12.4g %12.4g %12s  %s\n", sim_param_name(i), *sim_param_ptr(&r.before, i),
               *sim_param_ptr(&r.fit.params, i), err, state);
    }
    printf("\n  %-26s %9s %10s %8s %13s %13s\n", "accuracy", "MAPE", "max error", "tau", "peak MAPE", "peak max");
    if (r.n_test > 0) {
        char what[64];
        snprintf(what, sizeof what, "held out (%d), before", r.test_before.n);
        print_eval(what, &r.test_before);
        snprintf(what, sizeof what, "held out (%d), after", r.test_after.n);
        print_eval(what, &r.test_after);
    }
    print_eval("fitted on, before", &r.train_before);
    print_eval("fitted on, after", &r.train_after);
    printf("  %-26s %9s %10s %8s %13s\n", "targets (held out)", "<= 3%", "<= 10%", ">= 0.85", "<= 5%");
    if (o.save)
        printf("\nstored: simulator parameters for %s (calib_fit %lld); simulations now use them\n", m.key,
               (long long)r.fit_id);
    else
        printf("\nnot stored (--no-save)\n");
out:
    calib_hw_timer_destroy(hw);
    calib_sim_timer_destroy(syn);
    calib_model_free(&m);
    profile_db_close(db);
    return rc;
}
