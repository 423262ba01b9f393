/*
 * cmd_calibrate.c: `placer calibrate` measures a designed set of placements
 * on the engine, fits the simulator's parameters to them (GSL, log space)
 * on a training split, reports the accuracy on the held-out split before
 * and after, and stores the parameters so the simulator uses them.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"
#include "cli.h"
#include "hw_timer.h"
#include "placer_config.h"
#include "timer.h"

static void calibrate_usage(FILE *f) {
    fprintf(f,
            "usage: placer calibrate --db FILE [--devices 0,1] [--count 60] [--seed N] [--holdout 0.3]\n"
            "                        [--steps 10] [--warmup 2] [--from-measurements] [--timer cuda|cpu|synthetic]\n"
            "                        [--config NAME] [--no-save] [--graphs] [--fit NAMES]\n\n"
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

int cmd_calibrate(int argc, char **argv) {
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
