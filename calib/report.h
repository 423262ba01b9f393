/*
 * report.h: figures, tables and traces from a profile database.
 *
 * Everything is drawn from what the store holds, so a report can be
 * regenerated anywhere (no GPU) from the database a GPU run brought back:
 *   learning-<run>.{png,svg}      sampled-placement step times per update
 *   calibration.{png,svg}         predicted vs measured step time, y = x
 *   h2h-<label>.{png,svg}         confirmed mean +- sd per side, prediction beside
 *   placement-<label>.{png,svg}   each side's pick, nodes coloured by device
 *   trace-<label>-sim.json        Chrome trace of the winner, simulated
 *   trace-<label>-measured.json   and measured, when confirm recorded one
 *   results.md                    the tables (calibration, A/B/C) and links
 * plus the .dat and .gp files gnuplot ran, so a figure can be restyled by
 * hand. gnuplot (pngcairo and svg terminals; png when pngcairo is missing)
 * must be on PATH.
 */
#ifndef PLACER_CALIB_REPORT_H
#define PLACER_CALIB_REPORT_H

#include <stdint.h>

#include "status.h"
#include "store.h"

typedef struct {
    const char *out_dir;       /* where figures go; created when missing */
    const char *markdown;      /* results file; NULL = <out_dir>/results.md */
    const char *image_prefix;  /* prefix of image links in the markdown; NULL = "" */
    const int64_t *runs;       /* runs to draw learning curves for; NULL = every run */
    int n_runs;                /*   with samples over more than one update */
    const char *gnuplot;       /* gnuplot command; NULL = "gnuplot" */
    const char *measured_trace_note; /* said where no measured trace is stored; NULL = a default */
} calib_report_options;

/* What was written. */
typedef struct {
    int n_figures;       /* figures drawn (each as PNG and SVG) */
    int n_traces;        /* trace files written */
    int n_confirms;      /* confirmation settings in the tables */
    int has_fit;         /* 1 when a calibration was found */
    int n_learning;      /* learning curves drawn */
} calib_report_summary;

/* Write the report for the database db (opened at least READ). Returns
 * PL_ERR_IO when a file cannot be written, PL_ERR_UNSUPPORTED when gnuplot
 * is missing or fails (message names the script), PL_ERR_NOT_FOUND when the
 * file holds no profile. sum may be NULL. */
pl_status calib_report_write(profile_db *db, const calib_report_options *opt, calib_report_summary *sum,
                             char *msg, size_t len);

#endif
