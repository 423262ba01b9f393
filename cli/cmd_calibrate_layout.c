/*
 * cmd_calibrate_layout.c: `placer calibrate --layout-runs FILE` fits a
 * framework profile's three constants (gemm_scale, memory_scale,
 * act_scale) to measured training runs and reports the held-out error
 * (calib/layout_runs.h does the work; docs/frameworks.md documents the CSV
 * and the profile file). This file parses the options, calls
 * layout_runs_fit, prints, writes the fitted profile when asked.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_print.h"
#include "framework_file.h"
#include "layout_runs.h"
#include "moe_hist.h"

#define CMD "calibrate"

static void usage(FILE *f) {
    fprintf(f,
            "usage: placer calibrate --layout-runs FILE [--framework NAME] [--base NAME|FILE] [--write OUT.json]\n"
            "                        [--imbalance FILE|none]\n\n"
            "Fits a framework profile to measured training runs: for the runs of one framework\n"
            "(FILE's framework column), gemm_scale and memory_scale to the step times and act_scale\n"
            "to the peak memory of the fit rows (split column, else every other row), then predicts\n"
            "the held-out rows and prints their errors. The CSV's columns (model, cluster, gpus,\n"
            "layout, seq, framework, step_<us|ms|s>, optional peak_<bytes|mib|gib|mb|gb>,\n"
            "reserved_<unit>, run, split) are in docs/frameworks.md.\n\n"
            "  --framework NAME  the runs to fit (needed when FILE names several frameworks)\n"
            "  --base NAME|FILE  the profile whose memory conventions the fit starts from\n"
            "                    (default: the shipped profile of the framework's name; a name with\n"
            "                    no shipped profile needs --base)\n"
            "  --write OUT.json  write the fitted profile, which placer layout / plan --framework OUT.json\n"
            "                    take\n"
            "  --imbalance FILE  the runs' router histograms (run, layer, experts, cv, counts: the side\n"
            "                    file to_layout_runs.py --imbalance-out writes): each MoE layer's experts\n"
            "                    are priced with its measured shares (docs/moe.md). Default: FILE's\n"
            "                    name with -imbalance.csv for .csv when that file exists; none: no\n"
            "                    histograms (the stated spread, expert_cv 0.1)\n\n"
            "Exit status: 0 ok, 1 runtime failure, 2 bad input (a missing column, a unit it cannot\n"
            "read, a framework it does not know, a run that cannot be simulated).\n");
}

static void print_result(const layout_run *runs, const layout_fit_result *r, const char *base_name) {
    const framework_profile *f = &r->fitted;
    printf("calibrate --layout-runs: framework %s (base profile %s): %d fit rows, %d held out\n", f->name, base_name,
           r->n_fit, r->n_test);
    for (int k = 0; k < FW_K_COUNT; k++)
        printf("  %-13s %.4f%s", framework_const_name((framework_const)k), f->k[k],
               r->fitted_k[k] ? "" : "  (kept from the base: no measurement informs it)");
    printf("\n");
    for (int k = 0; k < FW_K_COUNT; k++)
        if (r->fitted_k[k]) printf("  %-13s +- %.4f (covariance-scaled)\n", framework_const_name((framework_const)k), r->k_sd[k]);
    printf("\n%-12s %-5s %10s %10s %8s %10s %10s %8s\n", "run", "half", "step ms", "predicted", "error", "peak GiB",
           "predicted", "error");
    const int n = r->n_fit + r->n_test;
    for (int j = 0; j < n; j++) {
        const layout_run *w = &runs[r->index[j]];
        const layout_run_result *x = &r->rows[j];
        printf("%-12.12s %-5s %10.2f %10.2f %+7.1f%%", w->id, x->fit ? "fit" : "test", w->step_us / 1e3, x->step_us / 1e3,
               100 * x->step_err);
        if (w->peak_bytes > 0)
            printf(" %10.2f %10.2f %+7.1f%%", w->peak_bytes / 1073741824.0, x->peak_bytes / 1073741824.0, 100 * x->peak_err);
        printf("\n");
    }
    static const char *const half[2] = {"fit rows", "held-out rows"};
    printf("\n");
    for (int h = 0; h < 2; h++) {
        printf("%-14s step time: mean |error| %.1f%%, max %.1f%%", half[h], 100 * r->step_mae[h], 100 * r->step_max[h]);
        if (r->n_mem[h]) printf("; peak memory: mean |error| %.1f%%, max %.1f%%", 100 * r->mem_mae[h], 100 * r->mem_max[h]);
        printf("\n");
    }
}

int calibrate_layout_runs(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
    const char *path = NULL, *fw_name = NULL, *base_name = NULL, *write_path = NULL, *hist_path = NULL;
    static const struct option opts[] = {{"layout-runs", required_argument, 0, 'L'}, {"framework", required_argument, 0, 'F'},
                                         {"base", required_argument, 0, 'B'},        {"write", required_argument, 0, 'W'},
                                         {"imbalance", required_argument, 0, 'I'},
                                         {"help", no_argument, 0, 'h'},              {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'L': path = optarg; break;
        case 'F': fw_name = optarg; break;
        case 'B': base_name = optarg; break;
        case 'W': write_path = optarg; break;
        case 'I': hist_path = optarg; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default:
            return cli_usage_error(CMD, "unknown option '%s' for --layout-runs; see placer calibrate --layout-runs --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (!path) return cli_usage_error(CMD, "--layout-runs needs a FILE");
    char msg[512] = "";
    layout_run *runs = NULL;
    int n = 0, rc = CLI_EXIT_OK;
    pl_status st = layout_runs_load(path, &runs, &n, msg, sizeof msg);
    if (st != PL_OK) return st == PL_ERR_INVALID ? cli_usage_error(CMD, "%s", msg) : cli_report(CMD, st, msg);
    /* router histograms: the side file beside FILE, or --imbalance */
    moe_hist *hists = NULL;
    int n_hists = 0;
    char side[4096];
    const size_t pl = strlen(path);
    if (!hist_path && pl > 4 && pl < sizeof side - 16 && !strcmp(path + pl - 4, ".csv")) {
        snprintf(side, sizeof side, "%.*s-imbalance.csv", (int)(pl - 4), path);
        FILE *fp = fopen(side, "r");
        if (fp) {
            fclose(fp);
            hist_path = side;
        }
    }
    if (hist_path && strcmp(hist_path, "none")) {
        st = moe_hist_load(hist_path, &hists, &n_hists, msg, sizeof msg);
        if (st != PL_OK) {
            rc = st == PL_ERR_INVALID ? cli_usage_error(CMD, "--imbalance: %s", msg) : cli_report(CMD, st, msg);
            goto out;
        }
        int used = 0;
        for (int i = 0; i < n; i++)
            if ((runs[i].hist = moe_hist_find(hists, n_hists, runs[i].id))) used++;
        printf("router histograms: %s (%d runs, %d of the file's rows matched)\n", hist_path, n_hists, used);
    }
    if (!fw_name) fw_name = runs[0].framework;
    framework_profile base;
    const char *bn = base_name ? base_name : fw_name;
    st = framework_load(bn, &base, msg, sizeof msg);
    if (st != PL_OK && !base_name) { /* a framework the tool does not know: its conventions must be named */
        rc = cli_usage_error(CMD,
                             "unknown framework '%.60s' in %s: give --base megatron|torchtitan|hf|FILE for its memory "
                             "conventions",
                             fw_name, path);
        goto out;
    }
    if (st != PL_OK) {
        rc = cli_usage_error(CMD, "--base: %s", msg);
        goto out;
    }
    layout_fit_result r;
    st = layout_runs_fit(runs, n, fw_name, &base, &r, msg, sizeof msg);
    if (st != PL_OK) {
        rc = st == PL_ERR_INVALID ? cli_usage_error(CMD, "%s", msg) : cli_report(CMD, st, msg);
        goto out;
    }
    print_result(runs, &r, bn);
    if (write_path) {
        char fit[1024], desc[512];
        snprintf(fit, sizeof fit,
                 "{\"runs\": \"%s\", \"fit_rows\": %d, \"held_out_rows\": %d, \"held_out_step_mae\": %.4f, "
                 "\"held_out_step_max\": %.4f, \"held_out_mem_mae\": %.4f, \"held_out_mem_max\": %.4f}",
                 strchr(path, '"') ? "(path)" : path, r.n_fit, r.n_test, r.step_mae[1], r.step_max[1], r.mem_mae[1],
                 r.mem_max[1]);
        snprintf(desc, sizeof desc, "fitted by placer calibrate --layout-runs on the %s runs (base profile %s)",
                 r.fitted.name, bn);
        st = framework_write_json(&r.fitted, desc, fit, write_path, msg, sizeof msg);
        if (st != PL_OK) rc = cli_report(CMD, st, msg);
        else printf("\nwritten: %s (placer layout --framework %s uses it)\n", write_path, write_path);
    }
    layout_fit_free(&r);
out:
    free(runs);
    moe_hist_free_all(hists, n_hists);
    return rc;
}
