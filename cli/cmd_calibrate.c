/*
 * cmd_calibrate.c: `placer calibrate` measures a designed set of placements
 * on the engine, fits the simulator's parameters to them (GSL, log space)
 * on a training split, reports the accuracy on the held-out split before
 * and after, and stores the parameters so the simulator uses them.
 * `placer calibrate --collectives` fits the layout simulator's collective
 * model to a profile's measured collective curves instead (calib/coll_fit.h)
 * and can write it as a collectives file (inputs/coll_file.h). Both parse,
 * call the library (calib_run, calib/calibrate_run.h; calib_coll_fit_db)
 * and print.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate_run.h"
#include "cli.h"
#include "cli_output.h"
#include "coll_file.h"
#include "coll_fit.h"
#include "placer_config.h"

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

/* What placer calibrate --collectives was given. */
typedef struct {
    const char *db_path, *transport, *write_path;
    int json, points;
} coll_args;

/* Parse argv into a. Returns -1 after printing the usage error, 1 for
 * --help, 0 to go on. */
static int collectives_parse(int argc, char **argv, coll_args *a) {
    static const struct option opts[] = {{"collectives", no_argument, 0, 'C'}, {"db", required_argument, 0, 'd'},
                                         {"transport", required_argument, 0, 'T'},
                                         {"write", required_argument, 0, 'W'}, {"points", no_argument, 0, 'p'},
                                         {"json", no_argument, 0, 'j'},        {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "Cd:T:W:pjh", opts, NULL)) != -1) {
        switch (c) {
        case 'C': break;
        case 'd': a->db_path = optarg; break;
        case 'T': a->transport = optarg; break;
        case 'W': a->write_path = optarg; break;
        case 'p': a->points = 1; break;
        case 'j': a->json = 1; break;
        case 'h': return 1;
        default:
            return cli_usage_error("calibrate",
                                   "unknown or incomplete option '%s' for --collectives; see placer calibrate "
                                   "--collectives --help",
                                   argv[optind - 1]), -1;
        }
    }
    if (optind < argc)
        return cli_usage_error("calibrate", "unexpected argument '%s'; see placer calibrate --collectives --help",
                               argv[optind]), -1;
    if (!a->db_path) return cli_usage_error("calibrate", "--db FILE is required"), -1;
    return 0;
}

/* Write the constants and curves as a collectives file; the exit code. */
static int collectives_write(const char *path, const coll_measured *m, const char *const *fitp) {
    FILE *wf = fopen(path, "w");
    if (!wf) return cli_usage_error("calibrate", "cannot write '%s': %s", path, strerror(errno));
    pl_status st = coll_file_write(wf, m, fitp);
    if (fclose(wf) != 0 && st == PL_OK) st = PL_ERR_IO;
    if (st != PL_OK) return cli_report("calibrate", st, "writing the collectives file failed");
    return CLI_EXIT_OK;
}

/* The fit as JSON (fitp: each kind's fit summary, NULL for kinds not measured). */
static void collectives_print_json(const coll_args *a, const calib_coll_fit_result *r, const char *const *fitp) {
    printf("{\"db\": \"");
    for (const char *s = a->db_path; *s; s++) {
        if (*s == '"' || *s == '\\') putchar('\\');
        if ((unsigned char)*s >= 0x20) putchar(*s);
    }
    printf("\", \"transport\": \"%s\", \"points\": %d,\n \"model\": \"t = base_us + steps(n) * alpha_us + "
           "frac(n) * bytes / busbw\",\n \"kinds\": {",
           r->transport, r->n_points);
    int first = 1;
    for (int k = 0; k < COLL_KIND_COUNT; k++) {
        if (!fitp[k]) continue;
        const coll_ab *ab = &r->kind[k].ab;
        printf("%s\n  \"%s\": {\"base_us\": %.6g, \"alpha_us\": %.6g, \"busbw_gb_s\": %.6g, \"fit\": %s}",
               first ? "" : ",", coll_file_kind_name((coll_kind)k), ab->base_us, ab->alpha_us, ab->busbw / 1e9,
               fitp[k]);
        first = 0;
    }
    printf("\n },\n \"per_point\": [");
    for (int i = 0; i < r->n_points; i++) {
        const calib_coll_point_fit *q = &r->points[i];
        printf("%s\n  {\"kind\": \"%s\", \"ranks\": %d, \"bytes\": %.17g, \"us\": %.6g, \"iqr_us\": ", i ? "," : "",
               coll_file_kind_name(q->kind), q->ranks, q->bytes, q->us);
        json_num(q->spread_us);
        printf(", \"fit_us\": %.6g, \"rel_err\": %.6g, \"held_out\": %s, \"held_out_fit_us\": ", q->fit_us,
               q->rel_err, cli_json_bool(q->held_out));
        json_num(q->held_us);
        printf(", \"held_out_rel_err\": ");
        json_num(q->held_rel_err);
        printf("}");
    }
    printf("\n ]%s%s%s}\n", a->write_path ? ", \"written\": \"" : "", a->write_path ? a->write_path : "",
           a->write_path ? "\"" : "");
}

/* One kind's row of the text table. */
static void collectives_print_kind(const calib_coll_fit_result *r, int k) {
    const calib_coll_kind_fit *kf = &r->kind[k];
    char base[32], alpha[32], bw[40], held[64] = "n/a (curves of fewer than 3 sizes)", ranks[48] = "";
    for (int i = 0, last = -1; i < r->n_points; i++) /* points are sorted by kind, ranks, bytes */
        if (r->points[i].kind == (coll_kind)k && r->points[i].ranks != last) {
            last = r->points[i].ranks;
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

/* The fit for a person: constants per kind, optionally every point. */
static void collectives_print_text(const coll_args *a, const coll_measured *m, const calib_coll_fit_result *r) {
    printf("calibrate --collectives: %s\n", m->source);
    printf("model: t(S, n) = base + steps(n) * alpha + frac(n) * S / busbw  (steps 2(n-1) all-reduce, n-1 "
           "all-gather / reduce-scatter; frac = steps / n)\n\n");
    printf("  %-15s %6s %5s %15s %17s %19s %8s %8s   %s\n", "kind", "points", "ranks", "base us", "alpha us",
           "busbw GB/s", "rms err", "max err", "held out: odd sizes of a fit on the even ones (rms / max)");
    for (int k = 0; k < COLL_KIND_COUNT; k++)
        if (r->kind[k].n_points > 0) collectives_print_kind(r, k);
    if (a->points) {
        printf("\n  %-15s %5s %12s %12s %10s %12s %8s %12s %8s\n", "kind", "ranks", "bytes", "measured us", "iqr us",
               "fitted us", "err", "held-out us", "err");
        for (int i = 0; i < r->n_points; i++) {
            const calib_coll_point_fit *q = &r->points[i];
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
    if (a->write_path)
        printf("\nwritten: %s (placer layout --collectives-from %s uses it)\n", a->write_path, a->write_path);
}

static int calibrate_collectives(int argc, char **argv) {
    coll_args a;
    int pr = collectives_parse(argc, argv, &a);
    if (pr < 0) return CLI_EXIT_USAGE;
    if (pr > 0) {
        collectives_usage(stdout);
        return CLI_EXIT_OK;
    }
    char msg[512] = "";
    profile_db *db = NULL;
    pl_status st = profile_db_open(a.db_path, PROFILE_DB_READ, &db, msg, sizeof msg);
    if (st != PL_OK) return cli_report("calibrate", st, msg);
    coll_measured *m = calloc(1, sizeof *m);
    calib_coll_fit_result r;
    memset(&r, 0, sizeof r);
    int rc = CLI_EXIT_OK;
    if (!m) {
        rc = cli_report("calibrate", PL_ERR_NOMEM, "out of memory");
    } else if ((st = calib_coll_fit_db(db, a.transport, m, &r, msg, sizeof msg)) != PL_OK) {
        char m2[sizeof msg + 64];
        snprintf(m2, sizeof m2, "%s: %s", a.db_path, msg);
        rc = cli_report("calibrate", st, m2);
    } else {
        char fits[COLL_KIND_COUNT][512];
        const char *fitp[COLL_KIND_COUNT];
        for (int k = 0; k < COLL_KIND_COUNT; k++) {
            fitp[k] = NULL;
            if (r.kind[k].n_points == 0) continue;
            kind_fit_json(&r.kind[k], fits[k], sizeof fits[k]);
            fitp[k] = fits[k];
        }
        if (a.write_path) rc = collectives_write(a.write_path, m, fitp);
        if (rc == CLI_EXIT_OK && a.json) collectives_print_json(&a, &r, fitp);
        else if (rc == CLI_EXIT_OK) collectives_print_text(&a, m, &r);
    }
    calib_coll_fit_free(&r);
    free(m);
    profile_db_close(db);
    return rc;
}

/* --fit NAMES into o's fit mask; the exit code after an error, or -1. */
static int parse_fit_names(const char *text, calib_calibrate_options *o) {
    char names[512];
    snprintf(names, sizeof names, "%s", text);
    for (int i = 0; i < SIM_N_PARAMS; i++) o->fit.fit_mask[i] = 0;
    int any = 0;
    for (char *tok = strtok(names, ","); tok; tok = strtok(NULL, ",")) {
        int found = 0;
        for (int i = 0; i < SIM_N_PARAMS; i++)
            if (!strcmp(sim_param_name(i), tok)) found = o->fit.fit_mask[i] = 1;
        if (!found) return cli_usage_error("calibrate", "--fit: unknown parameter '%s'", tok);
        any = 1;
    }
    if (!any) return cli_usage_error("calibrate", "--fit needs at least one parameter name");
    return -1;
}

/* One numeric option of placer calibrate into a; the exit code after an
 * error, or -1. */
static int parse_number(int c, const char *text, calib_run_options *a) {
    char *end;
    calib_calibrate_options *o = &a->o;
    switch (c) {
    case 'n':
        o->count = (int)strtol(text, &end, 10);
        if (*end || o->count < 1 || o->count > 100000)
            return cli_usage_error("calibrate", "--count must be a positive integer, got '%s'", text);
        break;
    case 's':
        o->seed = strtoull(text, &end, 10);
        if (*end || !*text) return cli_usage_error("calibrate", "--seed must be a non-negative integer");
        break;
    case 'H':
        o->holdout = strtod(text, &end);
        if (*end || !(o->holdout >= 0 && o->holdout < 1))
            return cli_usage_error("calibrate", "--holdout must be a fraction in [0, 1), got '%s'", text);
        break;
    case 'k':
        o->steps = (int)strtol(text, &end, 10);
        if (*end || o->steps < 1 || o->steps > 10000)
            return cli_usage_error("calibrate", "--steps must be a positive integer, got '%s'", text);
        break;
    case 'w':
        o->warmup = (int)strtol(text, &end, 10);
        if (*end || o->warmup < 0 || o->warmup > 10000)
            return cli_usage_error("calibrate", "--warmup must be a non-negative integer, got '%s'", text);
        break;
    case 'N':
        a->noise = strtod(text, &end);
        if (*end || !(a->noise >= 0 && a->noise < 1)) return cli_usage_error("calibrate", "--noise must be in [0, 1)");
        break;
    }
    return -1;
}

/* Parse argv into a. Returns the exit code after a usage error or --help
 * (*help set), or -1 to go on. */
static int calibrate_parse(int argc, char **argv, calib_run_options *a, int *help) {
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
    memset(a, 0, sizeof *a);
    a->timer_kind = PLACER_HAVE_CUDA ? "cuda" : NULL;
    a->noise = 0.01;
    calib_calibrate_options_default(&a->o);
    *help = 0;
    optind = 1;
    opterr = 0;
    int c, rc;
    while ((c = getopt_long(argc, argv, "d:D:n:s:H:k:w:ft:N:c:SGF:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': a->db_path = optarg; break;
        case 'D': a->devices = optarg; break;
        case 'n': case 's': case 'H': case 'k': case 'w': case 'N':
            if ((rc = parse_number(c, optarg, a)) >= 0) return rc;
            break;
        case 'f': a->o.from_measurements = 1; break;
        case 't': a->timer_kind = optarg; break;
        case 'c': a->config = optarg; break;
        case 'S': a->o.save = 0; break;
        case 'G': a->graphs = 1; break;
        case 'F':
            if ((rc = parse_fit_names(optarg, &a->o)) >= 0) return rc;
            break;
        case 'h': *help = 1; return CLI_EXIT_OK;
        default:
            return cli_usage_error("calibrate", "unknown or incomplete option '%s'; see placer calibrate --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("calibrate", "unexpected argument '%s'; see placer calibrate --help", argv[optind]);
    if (!a->db_path) return cli_usage_error("calibrate", "--db FILE is required");
    if (!a->o.from_measurements) {
        if (!a->timer_kind || (!PLACER_HAVE_CUDA && !strcmp(a->timer_kind, "cuda"))) /* not the engine's --cpu hint */
            return cli_usage_error("calibrate", "this build has no CUDA engine: use --timer cpu, or "
                                                "--from-measurements to refit stored timings");
        if (strcmp(a->timer_kind, "cuda") && strcmp(a->timer_kind, "cpu") && strcmp(a->timer_kind, "synthetic"))
            return cli_usage_error("calibrate", "--timer must be cuda, cpu or synthetic, got '%s'", a->timer_kind);
    }
    return -1;
}

/* The calibration for a person: what was measured, the parameters before and
 * after, the accuracy table, and where the parameters went. */
static void calibrate_print(const calib_run_options *a, const calib_run_result *out) {
    const calib_calibrate_result *r = &out->r;
    if (a->o.from_measurements)
        printf("calibrate: %d stored measurements of graph %s (%d OOM, %d rows of other graphs skipped)\n", r->n_data,
               out->key, r->n_oom, r->n_skipped);
    else
        printf("calibrate: %d placements measured with the %s timer%s%s (devices %s), %d OOM\n", r->n_measured,
               out->timer, out->precision[0] ? " in " : "", out->precision, a->devices ? a->devices : "default",
               r->n_oom);
    printf("fit: %d placements fitted, %d held out; %d trust-region iterations; sum of squared log residuals "
           "%.4g -> %.4g\n\n",
           r->n_train, r->n_test, r->fit.iterations, r->fit.chisq0, r->fit.chisq);
    printf("  %-22s %12s %12s %12s  %s\n", "parameter", "before", "after", "+- error", "");
    sim_params before = r->before, after = r->fit.params; /* sim_param_ptr takes mutable ones */
    for (int i = 0; i < SIM_N_PARAMS; i++) {
        const char *state = r->fit.state[i] == CALIB_PARAM_FITTED           ? ""
                            : r->fit.state[i] == CALIB_PARAM_UNIDENTIFIABLE ? "not identifiable from these placements"
                                                                             : "kept";
        char err[32] = "-";
        if (isfinite(r->fit.err[i])) snprintf(err, sizeof err, "%.3g", r->fit.err[i]);
        else if (r->fit.state[i] == CALIB_PARAM_FITTED) snprintf(err, sizeof err, "undetermined");
        printf("  %-22s %12.4g %12.4g %12s  %s\n", sim_param_name(i), *sim_param_ptr(&before, i),
               *sim_param_ptr(&after, i), err, state);
    }
    printf("\n  %-26s %9s %10s %8s %13s %13s\n", "accuracy", "MAPE", "max error", "tau", "peak MAPE", "peak max");
    if (r->n_test > 0) {
        char what[64];
        snprintf(what, sizeof what, "held out (%d), before", r->test_before.n);
        print_eval(what, &r->test_before);
        snprintf(what, sizeof what, "held out (%d), after", r->test_after.n);
        print_eval(what, &r->test_after);
    }
    print_eval("fitted on, before", &r->train_before);
    print_eval("fitted on, after", &r->train_after);
    printf("  %-26s %9s %10s %8s %13s\n", "targets (held out)", "<= 3%", "<= 10%", ">= 0.85", "<= 5%");
    if (a->o.save)
        printf("\nstored: simulator parameters for %s (calib_fit %lld); simulations now use them\n", out->key,
               (long long)r->fit_id);
    else
        printf("\nnot stored (--no-save)\n");
}

int cmd_calibrate(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--collectives")) return calibrate_collectives(argc, argv);
        else if (!strcmp(argv[i], "--layout-runs") || !strncmp(argv[i], "--layout-runs=", 14))
            return calibrate_layout_runs(argc, argv);
    calib_run_options a;
    int help = 0, rc = calibrate_parse(argc, argv, &a, &help);
    if (help) calibrate_usage(stdout);
    if (rc >= 0) return rc;
    if (!a.o.from_measurements && cli_stderr_is_tty()) a.o.progress = progress;
    char msg[512] = "";
    calib_run_result out;
    pl_status st = calib_run(&a, &out, msg, sizeof msg);
    if (st != PL_OK) return cli_report("calibrate", st, msg);
    calibrate_print(&a, &out);
    return CLI_EXIT_OK;
}
