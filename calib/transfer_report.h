/*
 * transfer_report.h: the gain-retained matrix of docs/transfer.md as
 * heatmaps and markdown tables (`placer report --transfer FILE`).
 *
 * FILE is the matrix benchmarks/policy/transfer_matrix writes
 * (transfer-matrix.tsv): a header line naming the columns, then one
 * tab-separated row per graph, setting, placer and ordered pair of a
 * source machine S and a target T. The columns read here (others are
 * allowed and ignored):
 *   graph, setting (one letter), placer, source, target   names (no tab,
 *                                     1..63 characters)
 *   seeds                             seeds behind the row (>= 1)
 *   status                            "ok", or "n/a" where T's best is
 *                                     within 0.5% of its best baseline
 *   gain, gain_lo, gain_hi            gain retained: mean and 95% interval
 *                                     (fractions; nan where n/a)
 *   oom                               seeds whose placements all ran out of
 *                                     memory on T (left out of the mean)
 *   on_target_ms, baseline_ms, best_ms   S's placement on T, T's best
 *                                     baseline, T's best (ms)
 * A row of status ok needs a finite gain. Every (graph, setting, placer,
 * source, target) appears once.
 *
 * Written into the output directory, for each graph:
 *   transfer-<graph>.{png,svg}   one panel per placer and setting: rows S,
 *                                columns T, colour the gain clipped to
 *                                [-100%, 100%], n/a grey, the percentage in
 *                                each cell
 * plus the .dat and .gp files gnuplot ran, and the markdown tables
 * (--markdown, default <out>/transfer.md). gnuplot (pngcairo or png, and
 * svg) must be on PATH.
 */
#ifndef PLACER_CALIB_TRANSFER_REPORT_H
#define PLACER_CALIB_TRANSFER_REPORT_H

#include <stddef.h>

#include "status.h"

#define TRANSFER_NAME_LEN 64
#define TRANSFER_MAX_ROWS 100000

typedef struct {
    char graph[TRANSFER_NAME_LEN], placer[TRANSFER_NAME_LEN], source[TRANSFER_NAME_LEN], target[TRANSFER_NAME_LEN];
    char setting;                 /* 'A', 'B', ... */
    int seeds;
    int na;                       /* status n/a */
    int oom;
    double gain, lo, hi;          /* fractions; NAN where n/a */
    double on_target_ms, baseline_ms, best_ms;
} transfer_cell;

typedef struct {
    int n;
    transfer_cell *cells;
} transfer_matrix;

/* Parse the text of a matrix file. PL_ERR_INVALID with one line naming the
 * line and the fault (a missing column, a short row, a value that does not
 * parse, a duplicate cell, no rows, more than TRANSFER_MAX_ROWS); PL_ERR_NOMEM.
 * On success *out is filled (transfer_matrix_free). */
pl_status transfer_matrix_parse(const char *text, transfer_matrix *out, char *msg, size_t len);

/* Read and parse path: PL_ERR_NOT_FOUND for a missing file, PL_ERR_IO for
 * one that cannot be read, else as transfer_matrix_parse (the message
 * names the file). */
pl_status transfer_matrix_load(const char *path, transfer_matrix *out, char *msg, size_t len);

void transfer_matrix_free(transfer_matrix *m);

typedef struct {
    const char *out_dir;       /* created when missing */
    const char *markdown;      /* NULL: <out_dir>/transfer.md */
    const char *image_prefix;  /* prefix of image links (NULL: none) */
    const char *source;        /* the matrix file's name, said in the markdown (may be NULL) */
    const char *gnuplot;       /* NULL: "gnuplot" */
} transfer_report_options;

typedef struct {
    int n_figures;  /* heatmaps drawn (each PNG and SVG) */
    int n_graphs;
    int n_cells;
} transfer_report_summary;

/* Draw the heatmaps and write the tables. PL_ERR_IO when a file cannot be
 * written, PL_ERR_UNSUPPORTED when gnuplot is missing or fails. sum may be
 * NULL. */
pl_status transfer_report_write(const transfer_matrix *m, const transfer_report_options *o,
                                transfer_report_summary *sum, char *msg, size_t len);

#endif
