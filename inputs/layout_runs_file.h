/*
 * layout_runs_file.h: measured training runs as a CSV file (`placer
 * calibrate --layout-runs FILE`, docs/frameworks.md), read into rows that
 * calib/layout_runs.h predicts and fits a framework profile on.
 *
 * The CSV (docs/frameworks.md): one header row, comma-separated, fields
 * double-quoted where they hold commas (the model and layout texts).
 * Required columns:
 *   model      placer's model text (e.g. "llama-3-8b,layers=8")
 *   cluster    a cluster name or file (h200x2, ...)
 *   gpus       GPUs used (placer layout --gpus)
 *   layout     placer's layout text ("mbs=1,gbs=1,recompute=none,precision=bf16")
 *   seq        sequence length
 *   framework  the stack's name (rows are fitted per framework)
 *   step_<u>   step time, u one of us, ms, s
 * Optional:
 *   peak_<u>     peak allocated memory, u one of bytes, mib, gib, mb, gb
 *   reserved_<u> peak reserved memory, the same units
 *   run          an identifier for the report
 *   split        fit | test: which half the row belongs to (default: the
 *                rows of a framework alternate, the first fitted)
 * A column the list does not name, a unit it does not know, a required
 * column missing, a column twice, an empty or malformed value: one line
 * naming it, PL_ERR_INVALID.
 */
#ifndef PLACER_INPUTS_LAYOUT_RUNS_FILE_H
#define PLACER_INPUTS_LAYOUT_RUNS_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "framework_profile.h" /* FRAMEWORK_NAME_LEN */
#include "moe_hist.h"
#include "status.h"

#define LAYOUT_RUNS_TEXT 256

typedef struct {
    char id[64];                      /* run column, or "row N" */
    char model[LAYOUT_RUNS_TEXT];
    char cluster[LAYOUT_RUNS_TEXT];
    char layout[LAYOUT_RUNS_TEXT];
    char framework[FRAMEWORK_NAME_LEN];
    int64_t gpus;
    int seq;
    double step_us;                   /* measured */
    double peak_bytes;                /* measured peak allocated; < 0: not given */
    double reserved_bytes;            /* measured peak reserved; < 0: not given */
    int split;                        /* -1 not given, 0 fit, 1 test */
    const moe_hist *hist;             /* the run's router histograms (borrowed; set by the caller,
                                         NULL from the parser): an MoE run's experts priced with them */
} layout_run;

/* Parse n bytes of the CSV into a heap array *runs of *n_runs (free()).
 * PL_ERR_INVALID with one line on bad input; *runs NULL then. */
pl_status layout_runs_parse(const char *text, size_t n, layout_run **runs, int *n_runs, char *msg, size_t len);

/* The same from a file: data_file.h's statuses when it cannot be read
 * (PL_ERR_NOT_FOUND, PL_ERR_IO, PL_ERR_INVALID over 1 MiB), else as
 * layout_runs_parse with the path in front of the message. */
pl_status layout_runs_load(const char *path, layout_run **runs, int *n_runs, char *msg, size_t len);

#endif
