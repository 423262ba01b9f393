/*
 * cmd_check_published.c: `placer check-published` runs every row of the
 * published-runs check set (published_runs.h) through the layout simulator
 * on the cluster it ran on and prints predicted against published
 * throughput, the error per row, and the mean and max absolute error over
 * the rows that were not fitted on (Megatron SC21 Table 1 and Llama 3
 * Table 4); Table 2 (ZeRO-3 against PTD-P) is a further check of the
 * orderings: each ZeRO-3 row beside the PTD-P row of the same model at the
 * same position, "same order as published" or not. Two memory verdicts
 * close it: Table 1's 1T layout against 80 GB, and Table 2's note (ZeRO-3
 * 530B on 560 GPUs at micro-batch 4 did not fit).
 *
 * Throughput is counted the way each table counts it (pub_step_flops):
 * predicted TFLOP/s per GPU = the table's FLOPs per step / (predicted step
 * time x GPUs).
 *
 * Fitting (--fit): two constants on two named rows (the limit):
 * the base GEMM efficiency of GPUs without a measured one
 * (compute_params.gemm_efficiency: the A100 here; H100's is measured) on
 * FIT_ROW_GEMM, then the ZeRO-3 gather scale (layout_sim_params.
 * zero3_gather_scale, DeepSpeed 2021's stage-3 gathers against the
 * collective model) on FIT_ROW_ZERO3, each by bisection until its row is
 * predicted exactly; the values are printed and, stored as the defaults (in
 * compute_model.c and ZERO3_GATHER_SCALE below), used without --fit. Both
 * rows are marked and left out of the error figures either way.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cluster.h"
#include "cluster_file.h"
#include "layout_sim.h"
#include "published_runs.h"
#include "util.h"

#define CMD "check-published"

/* The row the one fitted constant is fitted on (a label of published_runs.c):
 * the middle row of Table 1, chosen before looking at any errors. */
#define FIT_ROW_GEMM "T1 145.6B 1536 GPUs"

/* The second fitted constant: how many times the collective model's time
 * DeepSpeed's ZeRO-3 of 2021 spent in its parameter gathers, fitted on one
 * row of Table 2 (the middle 175B row) so that the other five ZeRO-3 rows and
 * their orderings against PTD-P are predictions. */
#define FIT_ROW_ZERO3 "T2 zero3 174.6B 768 GPUs"
#define ZERO3_GATHER_SCALE 6.478 /* placer check-published --fit */

#define DEFAULT_CLUSTER_A100 "dgx-a100-80gb"
#define DEFAULT_CLUSTER_H100 "llama3-h100"

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
            "  --cluster-a100 C    cluster of the Megatron rows (default " DEFAULT_CLUSTER_A100 ")\n"
            "  --cluster-h100 C    cluster of the Llama 3 rows (default " DEFAULT_CLUSTER_H100 ")\n"
            "  --fit               fit gemm_efficiency (GPUs without a measured one) on\n"
            "                      '" FIT_ROW_GEMM "', then zero3_gather_scale on\n"
            "                      '" FIT_ROW_ZERO3 "', then predict with them\n"
            "  --gemm-efficiency X override the base GEMM efficiency (0 < X <= 1)\n"
            "  --zero3-gather-scale X  override the ZeRO-3 gather scale (X > 0)\n"
            "  --collective-scale X override the collective time scale (X > 0)\n"
            "  --llama-vp V        interleaving depth assumed for the Llama 3 rows (default 2;\n"
            "                      not published: for the sensitivity in docs/published-runs.md)\n"
            "  --breakdown         under each row, the critical stage's time parts (compute,\n"
            "                      recompute, exposed tp / cp / dp / pp, bubble, optimizer)\n"
            "  --json              print the results as JSON\n\n"
            "Exit status: 0 ok, 1 runtime failure, 2 bad input (missing or malformed files).\n");
}

typedef struct {
    pub_row *rows;
    int n;
} table_rows;

typedef struct {
    double step_us;
    double tflops;    /* predicted, the table's count */
    double err;       /* (predicted - published) / published */
    int fitted;       /* the fit row */
    int oom;
    int64_t mem_peak; /* worst stage */
    int64_t mem_cap;
    layout_result res;
} row_result;

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, used = 0;
    for (;;) {
        if (used + 4096 > cap) {
            if (cap > (16u << 20)) { /* a check-set table is a few KB */
                free(buf);
                fclose(f);
                errno = EFBIG;
                return NULL;
            }
            size_t nc = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, nc);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
            cap = nc;
        }
        size_t got = fread(buf + used, 1, cap - used - 1, f);
        used += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    buf[used] = 0;
    *n = used;
    return buf;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Load one table; returns an exit code (0 ok). */
static int load_table(const char *dir, pub_table t, table_rows *out) {
    char path[4096], msg[512];
    if (snprintf(path, sizeof path, "%s/%s", dir, pub_table_file(t)) >= (int)sizeof path)
        return cli_usage_error(CMD, "--dir is too long");
    size_t n = 0;
    char *text = read_file(path, &n);
    if (!text)
        return cli_usage_error(CMD, "cannot read %s: %s; --dir names the folder of the three CSV files", path,
                               strerror(errno));
    pub_csv csv;
    pl_status st = pub_csv_parse(text, n, &csv, msg, sizeof msg);
    free(text);
    if (st != PL_OK) return cli_usage_error(CMD, "%s: %s", path, msg);
    st = pub_rows_from_csv(t, &csv, &out->rows, &out->n, msg, sizeof msg);
    pub_csv_free(&csv);
    if (st != PL_OK) return cli_report(CMD, st, msg);
    return 0;
}

/* Simulate one row; PL_OK or a status with msg. */
static pl_status run_row(const pub_row *r, const cluster *c, double gemm_eff, double coll_scale, double z3_scale,
                         row_result *out, char *msg, size_t len) {
    layout_sim *s = NULL;
    pl_status st = layout_sim_create(&r->model, &r->lay, c, &s, msg, len);
    if (st != PL_OK) return st;
    layout_sim_params prm;
    layout_sim_params_default(&prm);
    prm.compute.attention = r->attention;
    if (gemm_eff > 0) prm.compute.gemm_efficiency = gemm_eff;
    if (coll_scale > 0) prm.collective_scale = coll_scale;
    prm.dp_overlap_grad = r->dp_overlap;
    prm.grad_comm_bytes = r->grad_bytes;
    if (r->lay.zero == ZERO_3) {
        /* Table 2's ZeRO-3 is DeepSpeed's stage 3 of 2021: gathers that do
         * not overlap compute, at the fitted fraction of the collective
         * model's bandwidth (ZERO3_GATHER_SCALE) */
        prm.zero3_prefetch = 0;
        prm.zero3_gather_scale = z3_scale;
    }
    st = layout_sim_run(s, &prm, 0, &out->res, msg, len);
    layout_sim_destroy(s);
    if (st != PL_OK) return st;
    out->step_us = out->res.step_us;
    out->tflops = pub_step_flops(r) / (out->res.step_us * 1e-6) / (double)r->gpus / 1e12;
    out->err = (out->tflops - r->published_tflops) / r->published_tflops;
    out->oom = out->res.oom;
    out->mem_peak = out->res.mem.total;
    out->mem_cap = out->res.mem_cap;
    return PL_OK;
}

static const pub_row *find_row(table_rows *t, int nt, const char *label) {
    for (int i = 0; i < nt; i++)
        for (int j = 0; j < t[i].n; j++)
            if (!strcmp(t[i].rows[j].label, label)) return &t[i].rows[j];
    return NULL;
}

static const cluster *cluster_for(const pub_row *r, const cluster *a100, const cluster *h100) {
    return r->table == PUB_LLAMA ? h100 : a100;
}

/* The gemm efficiency in [lo, hi] at which row r is predicted exactly
 * (its error rises with the efficiency), by bisection. */
static pl_status fit_gemm(const pub_row *r, const cluster *c, double coll_scale, double z3_scale, double lo, double hi,
                          double *x, char *msg, size_t len) {
    row_result rr;
    for (int it = 0; it < 40; it++) {
        double mid = 0.5 * (lo + hi);
        pl_status st = run_row(r, c, mid, coll_scale, z3_scale, &rr, msg, len);
        if (st != PL_OK) return st;
        if (rr.err > 0) hi = mid;
        else lo = mid;
    }
    *x = 0.5 * (lo + hi);
    return PL_OK;
}

/* The ZeRO-3 gather scale in [lo, hi] at which row r is predicted exactly
 * (its error falls as the scale rises), by bisection on a log scale. */
static pl_status fit_zero3(const pub_row *r, const cluster *c, double gemm_eff, double coll_scale, double lo,
                           double hi, double *x, char *msg, size_t len) {
    row_result rr;
    for (int it = 0; it < 40; it++) {
        double mid = sqrt(lo * hi);
        pl_status st = run_row(r, c, gemm_eff, coll_scale, mid, &rr, msg, len);
        if (st != PL_OK) return st;
        if (rr.err > 0) lo = mid;
        else hi = mid;
    }
    *x = sqrt(lo * hi);
    return PL_OK;
}

/* The memory verdicts: 1T of Table 1, and ZeRO-3 530B at 560 GPUs, mbs 4. */
typedef struct {
    const char *what;
    int64_t peak, cap;
    int oom, want_oom;
} mem_check;

int cmd_check_published(int argc, char **argv) {
    const char *dir = NULL, *ca = DEFAULT_CLUSTER_A100, *ch = DEFAULT_CLUSTER_H100;
    int json = 0, fit = 0, breakdown = 0;
    double gemm_eff = 0, coll_scale = 0, z3_scale = ZERO3_GATHER_SCALE;
    int llama_vp = 0;
    static const struct option opts[] = {
        {"dir", required_argument, 0, 'd'},           {"cluster-a100", required_argument, 0, 'a'},
        {"cluster-h100", required_argument, 0, 'h'},  {"fit", no_argument, 0, 'f'},
        {"gemm-efficiency", required_argument, 0, 'g'}, {"collective-scale", required_argument, 0, 'c'},
        {"json", no_argument, 0, 'j'},                {"help", no_argument, 0, 'H'},
        {"llama-vp", required_argument, 0, 'v'},       {"breakdown", no_argument, 0, 'b'},
        {"zero3-gather-scale", required_argument, 0, 'z'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int o;
    while ((o = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        char *end;
        switch (o) {
        case 'd': dir = optarg; break;
        case 'a': ca = optarg; break;
        case 'h': ch = optarg; break;
        case 'f': fit = 1; break;
        case 'j': json = 1; break;
        case 'b': breakdown = 1; break;
        case 'g':
            errno = 0;
            gemm_eff = strtod(optarg, &end);
            if (errno || *end || !(gemm_eff > 0 && gemm_eff <= 1))
                return cli_usage_error(CMD, "--gemm-efficiency must be in (0, 1], not '%s'", optarg);
            break;
        case 'c':
            errno = 0;
            coll_scale = strtod(optarg, &end);
            if (errno || *end || !(coll_scale > 0 && coll_scale < 1e6))
                return cli_usage_error(CMD, "--collective-scale must be a positive number, not '%s'", optarg);
            break;
        case 'z':
            errno = 0;
            z3_scale = strtod(optarg, &end);
            if (errno || *end || !(z3_scale > 0 && z3_scale < 1e6))
                return cli_usage_error(CMD, "--zero3-gather-scale must be a positive number, not '%s'", optarg);
            break;
        case 'v': {
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (errno || *end || v < 1 || v > 8)
                return cli_usage_error(CMD, "--llama-vp must be an integer in 1..8, not '%s'", optarg);
            llama_vp = (int)v;
            break;
        }
        case 'H': usage(stdout); return CLI_EXIT_OK;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'; see placer check-published --help", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);

    char dirbuf[4096];
    if (!dir) {
        snprintf(dirbuf, sizeof dirbuf, "%s/../shared/published-runs", PLACER_SOURCE_DIR);
        if (!is_dir(dirbuf)) snprintf(dirbuf, sizeof dirbuf, "%s/data/published-runs", PLACER_SOURCE_DIR);
        if (!is_dir(dirbuf)) snprintf(dirbuf, sizeof dirbuf, "data/published-runs");
        dir = dirbuf;
    }
    char msg[512];
    cluster a100, h100;
    pl_status st = cluster_load(ca, NULL, &a100, msg, sizeof msg);
    if (st != PL_OK) return cli_report(CMD, st, msg);
    st = cluster_load(ch, NULL, &h100, msg, sizeof msg);
    if (st != PL_OK) return cli_report(CMD, st, msg);

    table_rows t[PUB_TABLE_COUNT] = {{0}};
    row_result *res[PUB_TABLE_COUNT] = {0};
    int rc = CLI_EXIT_OK;
    for (int i = 0; i < PUB_TABLE_COUNT && rc == 0; i++) rc = load_table(dir, (pub_table)i, &t[i]);
    if (rc) goto done;
    if (llama_vp > 0)
        for (int j = 0; j < t[PUB_LLAMA].n; j++) t[PUB_LLAMA].rows[j].lay.vp = llama_vp;

    const pub_row *fit_row = find_row(t, PUB_TABLE_COUNT, FIT_ROW_GEMM);
    if (fit && !fit_row) {
        rc = cli_usage_error(CMD, "the fit row '%s' is not in %s", FIT_ROW_GEMM, dir);
        goto done;
    }
    const pub_row *fit_row_z3 = find_row(t, PUB_TABLE_COUNT, FIT_ROW_ZERO3);
    if (fit && !fit_row_z3) {
        rc = cli_usage_error(CMD, "the fit row '%s' is not in %s", FIT_ROW_ZERO3, dir);
        goto done;
    }
    if (fit) {
        /* the GEMM efficiency first (Table 1 has no ZeRO-3), then the gather
         * scale on the ZeRO-3 row with that efficiency */
        st = fit_gemm(fit_row, cluster_for(fit_row, &a100, &h100), coll_scale, z3_scale, 0.05, 1.0, &gemm_eff, msg, sizeof msg);
        if (st == PL_OK)
            st = fit_zero3(fit_row_z3, cluster_for(fit_row_z3, &a100, &h100), gemm_eff, coll_scale, 1.0 / 64, 64.0,
                           &z3_scale, msg, sizeof msg);
        if (st != PL_OK) {
            rc = cli_report(CMD, st, msg);
            goto done;
        }
    }

    for (int i = 0; i < PUB_TABLE_COUNT; i++) {
        res[i] = calloc((size_t)t[i].n, sizeof *res[i]);
        if (!res[i]) {
            rc = cli_report(CMD, PL_ERR_NOMEM, NULL);
            goto done;
        }
        for (int j = 0; j < t[i].n; j++) {
            const pub_row *r = &t[i].rows[j];
            st = run_row(r, cluster_for(r, &a100, &h100), gemm_eff, coll_scale, z3_scale, &res[i][j], msg, sizeof msg);
            if (st != PL_OK) {
                rc = cli_report(CMD, st, msg);
                goto done;
            }
            res[i][j].fitted = (r == fit_row || r == fit_row_z3);
        }
    }

    /* the error over the rows not fitted on, Tables 1 and 4 */
    double sum = 0, worst = 0;
    int cnt = 0;
    for (int i = 0; i < PUB_TABLE_COUNT; i++) {
        if (i == PUB_T2) continue;
        for (int j = 0; j < t[i].n; j++) {
            if (res[i][j].fitted) continue;
            double e = fabs(res[i][j].err);
            sum += e;
            if (e > worst) worst = e;
            cnt++;
        }
    }
    double mean = cnt ? sum / cnt : 0;

    /* Table 2 pairs: the k-th zero3 row of a model against its k-th ptd-p row */
    int n2 = t[PUB_T2].n, pairs[PUB_CSV_MAX_ROWS][2], np = 0, same = 0;
    for (int j = 0; j < n2; j++) {
        const pub_row *z = &t[PUB_T2].rows[j];
        if (strcmp(z->scheme, "zero3")) continue;
        int kz = 0;
        for (int q = 0; q < j; q++)
            if (!strcmp(t[PUB_T2].rows[q].scheme, "zero3") && t[PUB_T2].rows[q].params_b == z->params_b) kz++;
        for (int q = 0, kp = 0; q < n2; q++) {
            const pub_row *p = &t[PUB_T2].rows[q];
            if (strcmp(p->scheme, "ptd-p") || p->params_b != z->params_b) continue;
            if (kp++ == kz) {
                pairs[np][0] = j;
                pairs[np][1] = q;
                np++;
                break;
            }
        }
    }
    int order_ok[PUB_CSV_MAX_ROWS];
    for (int k = 0; k < np; k++) {
        const pub_row *z = &t[PUB_T2].rows[pairs[k][0]], *p = &t[PUB_T2].rows[pairs[k][1]];
        int pub_ptdp = p->published_tflops > z->published_tflops;
        int pred_ptdp = res[PUB_T2][pairs[k][1]].tflops > res[PUB_T2][pairs[k][0]].tflops;
        order_ok[k] = pub_ptdp == pred_ptdp;
        same += order_ok[k];
    }

    /* memory verdicts */
    mem_check mc[2];
    int nmc = 0;
    for (int j = 0; j < t[PUB_T1].n; j++)
        if (fabs(t[PUB_T1].rows[j].params_b - 1008.0) < 1) {
            mc[nmc++] = (mem_check){"T1 1T layout (tp 8, pp 64, mbs 1) fits 80 GB", res[PUB_T1][j].mem_peak,
                                    res[PUB_T1][j].mem_cap, res[PUB_T1][j].oom, 0};
        }
    for (int j = 0; j < n2; j++) {
        const pub_row *z = &t[PUB_T2].rows[j];
        if (strcmp(z->scheme, "zero3") || fabs(z->params_b - 529.6) > 1 || z->lay.micro_batch != 4) continue;
        pub_row r560 = *z; /* the layout the paper could not run */
        r560.gpus = 560;
        r560.lay.dp = 560;
        r560.lay.global_batch = 2240;
        row_result rr;
        st = run_row(&r560, &a100, gemm_eff, coll_scale, z3_scale, &rr, msg, sizeof msg);
        if (st != PL_OK) {
            rc = cli_report(CMD, st, msg);
            goto done;
        }
        mc[nmc++] = (mem_check){"T2 ZeRO-3 530B on 560 GPUs, mbs 4, is OOM", rr.mem_peak, rr.mem_cap, rr.oom, 1};
        break;
    }

    layout_sim_params d;
    layout_sim_params_default(&d);
    double g_used = gemm_eff > 0 ? gemm_eff : d.compute.gemm_efficiency;
    double c_used = coll_scale > 0 ? coll_scale : d.collective_scale;
    if (json) {
        printf("{\"dir\": ");
        pl_json_string(stdout, dir);
        printf(", \"gemm_efficiency\": %.6f, \"zero3_gather_scale\": %.6f, \"collective_scale\": %.6f, "
               "\"fitted\": %s,\n", g_used, z3_scale, c_used, fit ? "true" : "false");
        printf(" \"fit_rows\": [");
        pl_json_string(stdout, FIT_ROW_GEMM);
        printf(", ");
        pl_json_string(stdout, FIT_ROW_ZERO3);
        printf("],\n \"rows\": [");
        int first = 1;
        for (int i = 0; i < PUB_TABLE_COUNT; i++)
            for (int j = 0; j < t[i].n; j++) {
                const pub_row *r = &t[i].rows[j];
                const row_result *x = &res[i][j];
                printf("%s\n  {\"label\": ", first ? "" : ",");
                first = 0;
                pl_json_string(stdout, r->label);
                printf(", \"table\": \"%s\", \"gpus\": %lld, \"published_tflops\": %.3f, \"predicted_tflops\": %.3f, "
                       "\"error\": %.6f, \"fitted\": %s, \"step_s\": %.6f, \"mem_peak_bytes\": %lld, \"oom\": %s",
                       pub_table_file(r->table), (long long)r->gpus, r->published_tflops, x->tflops, x->err,
                       x->fitted ? "true" : "false", x->step_us * 1e-6, (long long)x->mem_peak, x->oom ? "true" : "false");
                printf(", \"parts_s\": {");
                for (int k = 0; k < LAYOUT_T_COUNT; k++)
                    printf("%s\"%s\": %.6f", k ? ", " : "", layout_time_part_name((layout_time_part)k),
                           x->res.parts_us[k] * 1e-6);
                printf("}}");
            }
        printf("\n ],\n \"mean_abs_error\": %.6f, \"max_abs_error\": %.6f, \"rows_scored\": %d,\n", mean, worst, cnt);
        printf(" \"table2_pairs\": [");
        for (int k = 0; k < np; k++) {
            printf("%s\n  {\"zero3\": ", k ? "," : "");
            pl_json_string(stdout, t[PUB_T2].rows[pairs[k][0]].label);
            printf(", \"ptd_p\": ");
            pl_json_string(stdout, t[PUB_T2].rows[pairs[k][1]].label);
            printf(", \"same_order\": %s}", order_ok[k] ? "true" : "false");
        }
        printf("\n ], \"table2_same_order\": %d, \"table2_pairs_count\": %d,\n \"memory\": [", same, np);
        for (int k = 0; k < nmc; k++) {
            printf("%s\n  {\"check\": ", k ? "," : "");
            pl_json_string(stdout, mc[k].what);
            printf(", \"peak_bytes\": %lld, \"cap_bytes\": %lld, \"oom\": %s, \"as_published\": %s}", (long long)mc[k].peak,
                   (long long)mc[k].cap, mc[k].oom ? "true" : "false", mc[k].oom == mc[k].want_oom ? "true" : "false");
        }
        printf("\n ]}\n");
        goto done;
    }
    printf("constants: gemm_efficiency %.4f (%s, fitted on '%s'; H100 uses its measured base), "
           "zero3_gather_scale %.4f (%s, fitted on '%s'), collective_scale %.4f\n",
           g_used, fit ? "fitted now" : gemm_eff > 0 ? "given" : "stored default", FIT_ROW_GEMM, z3_scale,
           fit ? "fitted now" : z3_scale != ZERO3_GATHER_SCALE ? "given" : "stored default", FIT_ROW_ZERO3, c_used);
    printf("%-28s %7s %10s %10s %8s %9s %8s\n", "row", "GPUs", "published", "predicted", "error", "step s", "mem GB");
    for (int i = 0; i < PUB_TABLE_COUNT; i++)
        for (int j = 0; j < t[i].n; j++) {
            const pub_row *r = &t[i].rows[j];
            const row_result *x = &res[i][j];
            printf("%-28s %7lld %10.1f %10.1f %+7.1f%% %9.2f %7.1f%s%s\n", r->label, (long long)r->gpus,
                   r->published_tflops, x->tflops, 100 * x->err, x->step_us * 1e-6, x->mem_peak / 1e9,
                   x->oom ? " OOM" : "", x->fitted ? "  (fitted)" : "");
            if (breakdown) {
                printf("    ");
                for (int k = 0; k < LAYOUT_T_COUNT; k++)
                    printf(" %s %.1f%%", layout_time_part_name((layout_time_part)k),
                           100 * x->res.parts_us[k] / x->res.step_us);
                printf("\n");
            }
        }
    printf("\nTables 1 and 4, %d rows not fitted on: mean |error| %.1f%%, max %.1f%% (issue bar 10%% / 15%%)\n", cnt,
           100 * mean, 100 * worst);
    printf("\nTable 2, ZeRO-3 against PTD-P (TFLOP/s per GPU, predicted / published):\n");
    for (int k = 0; k < np; k++) {
        int zj = pairs[k][0], pj = pairs[k][1];
        const pub_row *z = &t[PUB_T2].rows[zj], *p = &t[PUB_T2].rows[pj];
        printf("  %-26s %6.1f / %5.1f  vs  %-26s %6.1f / %5.1f  %s\n", z->label, res[PUB_T2][zj].tflops,
               z->published_tflops, p->label, res[PUB_T2][pj].tflops, p->published_tflops,
               order_ok[k] ? "same order as published" : "NOT the published order");
    }
    printf("  %d of %d pairs in the published order\n", same, np);
    printf("\nMemory:\n");
    for (int k = 0; k < nmc; k++)
        printf("  %-46s peak %6.1f GB of %5.1f GB: %s (%s)\n", mc[k].what, mc[k].peak / 1e9, mc[k].cap / 1e9,
               mc[k].oom ? "OOM" : "fits", mc[k].oom == mc[k].want_oom ? "as published" : "NOT as published");
done:
    for (int i = 0; i < PUB_TABLE_COUNT; i++) {
        free(t[i].rows);
        free(res[i]);
    }
    return rc;
}
