/*
 * cmd_report.c: `placer report` draws the figures (gnuplot, PNG and SVG),
 * writes the results tables as markdown and the winners' Chrome traces,
 * all from what the profile database holds.
 *
 * `placer report --transfer FILE --out DIR` draws instead the gain-retained
 * matrix of docs/transfer.md (benchmarks/policy/transfer_matrix's
 * transfer-matrix.tsv) as heatmaps and tables (calib/transfer_report.h).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report.h"
#include "transfer_report.h"

static void report_usage(FILE *f) {
    fprintf(f,
            "usage: placer report --db FILE --out DIR [--markdown FILE] [--image-prefix P] [--run ID]...\n"
            "       placer report --transfer MATRIX --out DIR [--markdown FILE] [--image-prefix P]\n\n"
            "Draws, with gnuplot, as PNG and SVG: learning curves of placer runs, the calibration's\n"
            "predicted-vs-measured scatter, head-to-head bars of each confirmation setting and maps of\n"
            "the placements confirmed; writes the results tables (markdown) and Chrome traces of each\n"
            "setting's winner: simulated, and measured when confirm recorded one on the engine.\n\n"
            "  --db FILE          profile database (read)\n"
            "  --out DIR          where the figures and traces go (created)\n"
            "  --markdown FILE    results file (default DIR/results.md)\n"
            "  --image-prefix P   prefix of image links in the markdown (default none)\n"
            "  --run ID           draw the learning curve of this run (repeatable; default: every run\n"
            "                     with more than one update)\n"
            "  --transfer MATRIX  instead, the gain-retained matrix of train-here-evaluate-there\n"
            "                     (transfer-matrix.tsv of benchmarks/policy/transfer_matrix;\n"
            "                     docs/transfer.md): a heatmap per graph, transfer-<graph>.{png,svg},\n"
            "                     one panel per placer and setting, and the tables (default\n"
            "                     DIR/transfer.md)\n");
}

/* --transfer: the gain-retained matrix as heatmaps and tables. */
static int report_transfer(const char *path, const calib_report_options *ro) {
    char msg[512] = "";
    transfer_matrix m;
    pl_status st = transfer_matrix_load(path, &m, msg, sizeof msg);
    if (st != PL_OK) return cli_report("report", st, msg);
    transfer_report_options o = {ro->out_dir, ro->markdown, ro->image_prefix, path, NULL};
    transfer_report_summary sum;
    st = transfer_report_write(&m, &o, &sum, msg, sizeof msg);
    transfer_matrix_free(&m);
    if (st != PL_OK) return cli_report("report", st, msg);
    printf("report: %d heatmap%s (PNG and SVG) of %d cells over %d graph%s in %s; tables in %s%s\n", sum.n_figures,
           sum.n_figures == 1 ? "" : "s", sum.n_cells, sum.n_graphs, sum.n_graphs == 1 ? "" : "s", ro->out_dir,
           ro->markdown ? ro->markdown : ro->out_dir, ro->markdown ? "" : "/transfer.md");
    return CLI_EXIT_OK;
}

int cmd_report(int argc, char **argv) {
    calib_report_options o;
    memset(&o, 0, sizeof o);
    const char *db_path = NULL;
    int64_t runs[64];
    int n_runs = 0;
    const char *transfer = NULL;
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"out", required_argument, 0, 'o'},
                                         {"markdown", required_argument, 0, 'm'},
                                         {"image-prefix", required_argument, 0, 'p'},
                                         {"run", required_argument, 0, 'r'},
                                         {"transfer", required_argument, 0, 't'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "d:o:m:p:r:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': transfer = optarg; break;
        case 'd': db_path = optarg; break;
        case 'o': o.out_dir = optarg; break;
        case 'm': o.markdown = optarg; break;
        case 'p': o.image_prefix = optarg; break;
        case 'r':
            if (n_runs == 64) return cli_usage_error("report", "at most 64 --run options");
            runs[n_runs] = strtoll(optarg, &end, 10);
            if (*end || runs[n_runs] < 1) return cli_usage_error("report", "--run takes a run id, got '%s'", optarg);
            n_runs++;
            break;
        case 'h': report_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("report", "unknown or incomplete option '%s'; see placer report --help",
                                   argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("report", "unexpected argument '%s'; see placer report --help", argv[optind]);
    if (transfer) {
        if (db_path || n_runs)
            return cli_usage_error("report", "--transfer draws the matrix file alone: leave out --db and --run");
        if (!o.out_dir) return cli_usage_error("report", "--out DIR is required");
        return report_transfer(transfer, &o);
    }
    if (!db_path) return cli_usage_error("report", "--db FILE is required");
    if (!o.out_dir) return cli_usage_error("report", "--out DIR is required");
    o.runs = n_runs ? runs : NULL;
    o.n_runs = n_runs;
    o.measured_trace_note = "No measured trace is stored for this setting (confirm records one on the engine only).";
    char msg[512] = "";
    profile_db *db = NULL;
    pl_status st = profile_db_open(db_path, PROFILE_DB_READ, &db, msg, sizeof msg);
    if (st != PL_OK) return cli_report("report", st, msg);
    calib_report_summary sum;
    st = calib_report_write(db, &o, &sum, msg, sizeof msg);
    profile_db_close(db);
    if (st != PL_OK) return cli_report("report", st, msg);
    printf("report: %d figures (PNG and SVG), %d traces, %d confirmation settings, %s, %d learning curves in %s; "
           "results in %s%s\n",
           sum.n_figures, sum.n_traces, sum.n_confirms, sum.has_fit ? "a calibration" : "no calibration",
           sum.n_learning, o.out_dir, o.markdown ? o.markdown : o.out_dir, o.markdown ? "" : "/results.md");
    return CLI_EXIT_OK;
}
