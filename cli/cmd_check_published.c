/*
 * cmd_check_published.c: `placer check-published` predicts the published
 * large training runs of the check set with the layout simulator
 * (calib/published_check.h does the work) and prints predicted against
 * published TFLOP/s per GPU, the error per row and over the rows not fitted
 * on, Table 2's ZeRO-3 / PTD-P orderings and two memory verdicts, as text
 * or JSON. This file parses the options, calls pub_check_run, prints.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_json.h"
#include "cli_opts.h"
#include "cli_print.h"
#include "published_check.h"
#include "published_fp8.h"
#include "published_moe.h"
#include "util.h"

#define CMD "check-published"

static void usage(FILE *f) {
    fprintf(f,
            "usage: placer check-published [options]\n\n"
            "Predicts every published training run of the check set (Megatron SC21 Tables 1\n"
            "and 2, Llama 3 Table 4) with the layout simulator and prints predicted against\n"
            "published TFLOP/s per GPU, the error per row, and the mean and max absolute error\n"
            "over the rows not fitted on; Table 2's ZeRO-3 / PTD-P orderings; two memory\n"
            "verdicts (Table 1's 1T layout fits 80 GB; ZeRO-3 530B on 560 GPUs at\n"
            "micro-batch 4 does not).\n\n"
            "  --dir DIR           the CSV files (default: the source tree's ../shared/published-runs,\n"
            "                      else data/published-runs)\n"
            "  --cluster-a100 C    cluster of the Megatron rows (default " "dgx-a100-80gb" ")\n"
            "  --cluster-h100 C    cluster of the Llama 3 rows (default " "llama3-h100" ")\n"
            "  --fit               fit gemm_efficiency (GPUs without a measured one) on\n"
            "                      '" PUB_FIT_ROW_GEMM "', then zero3_gather_scale on\n"
            "                      '" PUB_FIT_ROW_ZERO3 "', then predict with them\n"
            "  --gemm-efficiency X override the base GEMM efficiency (0 < X <= 1)\n"
            "  --zero3-gather-scale X  override the ZeRO-3 gather scale (X > 0)\n"
            "  --collective-scale X override the collective time scale (X > 0)\n"
            "  --llama-vp V        interleaving depth assumed for the Llama 3 rows (default 2;\n"
            "                      not published: for the sensitivity in docs/published-runs.md)\n"
            "  --breakdown         under each row, the critical stage's time parts (compute,\n"
            "                      recompute, exposed tp / cp / dp / pp, bubble, optimizer)\n"
            "  --json              print the results as JSON (with --moe too)\n"
            "  --moe               instead, the mixture-of-experts check set (moe-runs.csv): each\n"
            "                      row's predicted step time against the published one, no\n"
            "                      fitted constant (docs/published-runs.md)\n\n"
            "FP8 section: the FP8 pre-training rows of " PUB_FP8_FILE " (--dir, else the source\n"
            "tree's data/published-runs) on their clusters, tokens/s per GPU; --fit also fits\n"
            "the Blackwell GEMM base on '" PUB_FP8_FIT_ROW "'.\n\n"
            "\n" CLI_UNITS_HELP
            "Exit status: 0 ok, 1 runtime failure, 2 bad input (missing or malformed files).\n");
}


typedef struct {
    pub_check_options check; /* what the library runs */
    int json;                /* --json */
    int breakdown;           /* --breakdown */
    int moe;                 /* --moe: the MoE check set instead */
    int help;                /* --help: print usage, run nothing */
    char dir[4096];          /* the default --dir, when none was given */
} cp_args;

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A number option: *out within (lo, hi] (lo_open) or (lo, hi) as worded. */
static int number_arg(const char *name, const char *text, double lo, double hi, int hi_closed, const char *range,
                      double *out) {
    double v = 0;
    if (!cli_double_arg(text, &v) || !(v > lo && (hi_closed ? v <= hi : v < hi)))
        return cli_usage_error(CMD, "%s must be %s, not '%s'", name, range, text);
    *out = v;
    return 0;
}

/* The options into *a: 0, or the exit code after one line. */
static int parse_args(int argc, char **argv, cp_args *a) {
    memset(a, 0, sizeof *a);
    pub_check_options_default(&a->check);
    static const struct option opts[] = {
        {"dir", required_argument, 0, 'd'},           {"cluster-a100", required_argument, 0, 'a'},
        {"cluster-h100", required_argument, 0, 'h'},  {"fit", no_argument, 0, 'f'},
        {"gemm-efficiency", required_argument, 0, 'g'}, {"collective-scale", required_argument, 0, 'c'},
        {"json", no_argument, 0, 'j'},                {"help", no_argument, 0, 'H'},
        {"llama-vp", required_argument, 0, 'v'},       {"breakdown", no_argument, 0, 'b'},
        {"zero3-gather-scale", required_argument, 0, 'z'}, {"moe", no_argument, 0, 'm'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int o, rc = 0;
    long v;
    pub_check_options *c = &a->check;
    while (rc == 0 && (o = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (o) {
        case 'd': c->dir = optarg; break;
        case 'a': c->cluster_a100 = optarg; break;
        case 'h': c->cluster_h100 = optarg; break;
        case 'f': c->fit = 1; break;
        case 'j': a->json = 1; break;
        case 'b': a->breakdown = 1; break;
        case 'm': a->moe = 1; break;
        case 'g': rc = number_arg("--gemm-efficiency", optarg, 0, 1, 1, "in (0, 1]", &c->gemm_efficiency); break;
        case 'c': rc = number_arg("--collective-scale", optarg, 0, 1e6, 0, "a positive number", &c->collective_scale); break;
        case 'z': rc = number_arg("--zero3-gather-scale", optarg, 0, 1e6, 0, "a positive number", &c->zero3_gather_scale); break;
        case 'v':
            rc = cli_long_arg(CMD, "--llama-vp", optarg, 1, 8, &v);
            c->llama_vp = (int)v;
            break;
        case 'H': a->help = 1; return 0;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'; see placer check-published --help", argv[optind - 1]);
        }
    }
    if (rc) return rc;
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (!c->dir) {
        snprintf(a->dir, sizeof a->dir, "%s/../shared/published-runs", PLACER_SOURCE_DIR);
        if (!is_dir(a->dir)) snprintf(a->dir, sizeof a->dir, "%s/data/published-runs", PLACER_SOURCE_DIR);
        if (!is_dir(a->dir)) snprintf(a->dir, sizeof a->dir, "data/published-runs");
        c->dir = a->dir;
    }
    return 0;
}

static const char *const_source(pub_const_source s) {
    return s == PUB_CONST_FITTED ? "fitted now" : s == PUB_CONST_GIVEN ? "given" : "stored default";
}

/* The row table, with each row's time parts under it for --breakdown. */
static void print_rows(const pub_check_result *r, int breakdown) {
    printf("%-28s %7s %10s %10s %8s %9s %8s\n", "row", "GPUs", "published", "predicted", "error", "step s", "mem GB");
    for (int i = 0; i < PUB_TABLE_COUNT; i++)
        for (int j = 0; j < r->n_rows[i]; j++) {
            const pub_row *w = &r->rows[i][j];
            const pub_row_result *x = &r->res[i][j];
            printf("%-28s %7lld %10.1f %10.1f %+7.1f%% %9.2f %7.1f%s%s\n", w->label, (long long)w->gpus,
                   w->published_tflops, x->tflops, 100 * x->err, x->step_us * 1e-6, cli_gb(x->mem_peak),
                   x->oom ? " OOM" : "", x->fitted ? "  (fitted)" : "");
            if (x->oom)
                printf("    memory: predicted OOM (%.1f of %.1f GB) for a run that ran, NOT as published: %s\n",
                       cli_gb(x->mem_peak), cli_gb(x->mem_cap), x->mem_why ? x->mem_why : "not audited");
            if (!breakdown) continue;
            printf("    ");
            for (int k = 0; k < LAYOUT_T_COUNT; k++)
                if (!layout_time_part_optional((layout_time_part)k) || x->res.parts_us[k] > 0)
                    printf(" %s %.1f%%", layout_time_part_name((layout_time_part)k), 100 * x->res.parts_us[k] / x->res.step_us);
            printf("\n");
        }
}

static void print_text(const pub_check_result *r, int breakdown) {
    printf("constants: gemm_efficiency %.4f (%s, fitted on '%s'; H100 uses its measured base), "
           "zero3_gather_scale %.4f (%s, fitted on '%s'), collective_scale %.4f\n",
           r->gemm_efficiency, const_source(r->gemm_source), PUB_FIT_ROW_GEMM, r->zero3_gather_scale,
           const_source(r->zero3_source), PUB_FIT_ROW_ZERO3, r->collective_scale);
    print_rows(r, breakdown);
    printf("\nTables 1 and 4, %d rows not fitted on: mean |error| %.1f%%, max %.1f%% (target: mean within %.0f%%, "
           "worst within %.0f%%)\n",
           r->rows_scored, 100 * r->mean_abs_error, 100 * r->max_abs_error, 100 * PUB_TARGET_MEAN,
           100 * PUB_TARGET_WORST);
    printf("\nTable 2, ZeRO-3 against PTD-P (TFLOP/s per GPU, predicted / published):\n");
    for (int k = 0; k < r->n_pairs; k++) {
        const int zj = r->pairs[k][0], pj = r->pairs[k][1];
        const pub_row *z = &r->rows[PUB_T2][zj], *p = &r->rows[PUB_T2][pj];
        printf("  %-26s %6.1f / %5.1f  vs  %-26s %6.1f / %5.1f  %s\n", z->label, r->res[PUB_T2][zj].tflops,
               z->published_tflops, p->label, r->res[PUB_T2][pj].tflops, p->published_tflops,
               r->same_order[k] ? "same order as published" : "NOT the published order");
    }
    printf("  %d of %d pairs in the published order\n", r->n_same, r->n_pairs);
    printf("\nMemory:\n");
    for (int k = 0; k < r->n_mem; k++) {
        const pub_mem_check *m = &r->mem[k];
        printf("  %-48s peak %6.1f GB of %5.1f GB: %s (%s)\n", m->what, cli_gb(m->peak), cli_gb(m->cap),
               m->oom ? "OOM" : "fits", m->oom == m->want_oom ? "as published" : "NOT as published");
    }
}

/* The FP8 section's file: --dir's, else the source tree's data/published-runs. */
static const char *fp8_dir(const char *dir, char *buf, size_t n) {
    snprintf(buf, n, "%s/" PUB_FP8_FILE, dir);
    struct stat st;
    if (stat(buf, &st) == 0) return dir;
    snprintf(buf, n, "%s/data/published-runs", PLACER_SOURCE_DIR);
    return buf;
}

static void print_fp8_text(const pub_fp8_result *f) {
    printf("\nFP8 (%s): tokens/s per GPU, predicted against published; Blackwell GEMM base %.4f (%s on '%s')\n",
           PUB_FP8_FILE, f->blackwell_gemm_efficiency, f->fitted ? "fitted now" : "stored default", PUB_FP8_FIT_ROW);
    printf("%-34s %6s %-8s %10s %10s %8s %7s\n", "row", "GPUs", "recipe", "published", "predicted", "error", "mem GB");
    for (int i = 0; i < f->n; i++) {
        const pub_fp8_row *w = &f->rows[i];
        if (w->run.skipped[0]) continue;
        printf("%-34s %6lld %-8s %10.1f %10.1f %+7.1f%% %7.1f%s%s\n", w->run.run_id, (long long)w->run.gpus,
               fp8_recipe_name(w->run.lay.fp8), w->run.published_tokens, w->predicted_tokens, 100 * w->err,
               cli_gb(w->res.mem.total), w->res.oom ? " OOM" : "", w->fitted ? "  (fitted)" : "");
        if (w->res.oom)
            printf("    memory: predicted OOM (%.1f of %.1f GB) for a run that ran, NOT as published: %s\n",
                   cli_gb(w->res.mem.total), cli_gb(w->res.mem_cap), w->mem_why ? w->mem_why : "not audited");
    }
    printf("FP8, %d rows not fitted on: mean |error| %.1f%%, max %.1f%%; Hopper's %d: mean %.1f%%, max %.1f%%\n",
           f->rows_scored, 100 * f->mean_abs_error, 100 * f->max_abs_error, f->rows_h100,
           100 * f->mean_abs_error_h100, 100 * f->max_abs_error_h100);
    int skipped = 0;
    for (int i = 0; i < f->n; i++) skipped += f->rows[i].run.skipped[0] != 0;
    printf("skipped %d rows (no shipped model the loader reads, or fine-tuning; --json says why):", skipped);
    for (int i = 0, k = 0; i < f->n; i++)
        if (f->rows[i].run.skipped[0]) printf("%s %s", k++ ? "," : "", f->rows[i].run.run_id);
    printf("\n");
}

/* --moe: the MoE check set's rows, simulated or skipped with the reason. */
static int run_moe(const cp_args *a) {
    pub_moe_result *r = malloc(sizeof *r);
    if (!r) return cli_report(CMD, PL_ERR_NOMEM, "out of memory");
    char msg[512] = "", path[4200];
    /* the check set's directory when it has the MoE file, else the shipped data/published-runs */
    struct stat sb;
    if (a->check.dir) snprintf(path, sizeof path, "%s/moe-runs.csv", a->check.dir);
    const int have = a->check.dir && stat(path, &sb) == 0;
    pl_status st = pub_moe_check(have ? path : NULL, NULL, r, msg, sizeof msg);
    if (st != PL_OK) {
        free(r);
        return cli_report(CMD, st, msg);
    }
    if (a->json) {
        cli_json_published_moe(stdout, r);
        free(r);
        return CLI_EXIT_OK;
    }
    printf("mixture-of-experts check set (moe-runs.csv): %d rows, %d simulated; step time predicted against "
           "published (no fitted constant)\n\n", r->n, r->n_simulated);
    printf("%-48s %10s %10s %8s %8s\n", "row", "published", "predicted", "error", "mem GB");
    for (int i = 0; i < r->n; i++) {
        const pub_moe_row *w = &r->rows[i];
        if (!w->simulated) continue;
        printf("%-48.48s %9.2fs %9.2fs %+7.1f%% %8.1f%s\n      %s\n      routing: %s\n", w->run_id,
               w->published_step_s, w->predicted_step_s, 100 * w->err, w->mem_gb, w->oom ? " OOM" : "",
               w->layout_text, w->routing);
        if (w->oom) printf("      predicted OOM for a run that ran: %s\n", w->oom_why);
    }
    printf("\nsimulated rows: mean |error| %.1f%%, max %.1f%% (target: mean within 10%%, worst within 20%%)\n",
           100 * r->mean_abs_err, 100 * r->max_abs_err);
    printf("\nskipped:\n");
    for (int i = 0; i < r->n; i++)
        if (!r->rows[i].simulated) printf("  %-48.48s %s\n", r->rows[i].run_id, r->rows[i].why);
    free(r);
    return CLI_EXIT_OK;
}

int cmd_check_published(int argc, char **argv) {
    cp_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    if (a.help) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (a.moe) return run_moe(&a);
    pub_check_result r;
    char msg[512] = "";
    pl_status st = pub_check_run(&a.check, &r, msg, sizeof msg);
    /* the FP8 section (absent file: no section) */
    pub_fp8_result f;
    memset(&f, 0, sizeof f);
    char fbuf[4200];
    int have_fp8 = 0;
    if (st == PL_OK) {
        pl_status fs = pub_fp8_check_run(fp8_dir(a.check.dir, fbuf, sizeof fbuf), a.check.fit, 0, &f, msg, sizeof msg);
        if (fs == PL_OK) have_fp8 = 1;
        else if (fs != PL_ERR_NOT_FOUND) st = fs;
    }
    if (st != PL_OK) rc = cli_report(CMD, st, msg);
    else if (a.json) {
        cli_json_published(stdout, &a.check, &r, have_fp8 ? &f : NULL);
    } else {
        print_text(&r, a.breakdown);
        if (have_fp8) print_fp8_text(&f);
    }
    pub_check_free(&r);
    pub_fp8_free(&f);
    return rc;
}
