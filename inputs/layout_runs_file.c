/*
 * layout_runs_file.c: the CSV of measured layout runs read into
 * layout_run rows (layout_runs_file.h), on published_runs.h's CSV reader.
 */
#include "layout_runs_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_file.h"
#include "published_runs.h"

/* Largest runs file read (bytes). */
#define LAYOUT_RUNS_FILE_MAX (1 << 20)

typedef struct {
    const char *prefix; /* column name before the unit ("" for unitless) */
    int required;
    int col;            /* index in the file, -1 absent */
    double unit;        /* multiplier into us / bytes */
} col_spec;

enum { C_MODEL = 0, C_CLUSTER, C_GPUS, C_LAYOUT, C_SEQ, C_FRAMEWORK, C_STEP, C_PEAK, C_RESERVED, C_RUN, C_SPLIT, C_COUNT };

static const char *const COL_NAMES[C_COUNT] = {"model", "cluster", "gpus", "layout", "seq", "framework",
                                                "step",  "peak",    "reserved", "run", "split"};
static const int COL_UNITED[C_COUNT] = {0, 0, 0, 0, 0, 0, 1, 2, 2, 0, 0}; /* 1 time units, 2 byte units */
static const int COL_REQUIRED[C_COUNT] = {1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};

static int time_unit(const char *u, double *mul) {
    if (!strcmp(u, "us")) *mul = 1.0;
    else if (!strcmp(u, "ms")) *mul = 1e3;
    else if (!strcmp(u, "s")) *mul = 1e6;
    else return 0;
    return 1;
}

static int byte_unit(const char *u, double *mul) {
    if (!strcmp(u, "bytes")) *mul = 1.0;
    else if (!strcmp(u, "mib")) *mul = 1024.0 * 1024.0;
    else if (!strcmp(u, "gib")) *mul = 1024.0 * 1024.0 * 1024.0;
    else if (!strcmp(u, "mb")) *mul = 1e6;
    else if (!strcmp(u, "gb")) *mul = 1e9;
    else return 0;
    return 1;
}

/* Match header h to a column; 1 matched (cols updated), 0 unknown, -1 error written. */
static int match_header(const char *h, int idx, col_spec *cols, char *msg, size_t len) {
    for (int c = 0; c < C_COUNT; c++) {
        const char *n = COL_NAMES[c];
        const size_t nl = strlen(n);
        double mul = 1.0;
        if (!COL_UNITED[c]) {
            if (strcmp(h, n)) continue;
        } else {
            if (strncmp(h, n, nl) || h[nl] != '_') continue;
            const char *u = h + nl + 1;
            int ok = COL_UNITED[c] == 1 ? time_unit(u, &mul) : byte_unit(u, &mul);
            if (!ok) {
                pl_fail(msg, len, PL_ERR_INVALID, "column '%.60s': unknown unit '%.20s' (%s)", h, u,
                        COL_UNITED[c] == 1 ? "us, ms or s" : "bytes, mib, gib, mb or gb");
                return -1;
            }
        }
        if (cols[c].col >= 0) {
            pl_fail(msg, len, PL_ERR_INVALID, "column '%s' appears twice", n);
            return -1;
        }
        cols[c].col = idx;
        cols[c].unit = mul;
        return 1;
    }
    return 0;
}

static int parse_num(const char *s, double lo, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || !(v > lo)) return 0;
    *out = v;
    return 1;
}

static pl_status copy_text(char *dst, size_t cap, const char *src, const char *what, int row, char *msg, size_t len) {
    if (!*src) return pl_fail(msg, len, PL_ERR_INVALID, "row %d: empty %s", row, what);
    if (strlen(src) >= cap) return pl_fail(msg, len, PL_ERR_INVALID, "row %d: %s is too long", row, what);
    snprintf(dst, cap, "%s", src);
    return PL_OK;
}

static pl_status read_row(const pub_csv *csv, const col_spec *cols, int r, layout_run *o, char *msg, size_t len) {
    const int row = r + 2; /* the file's line, header = 1 */
    double v;
    memset(o, 0, sizeof *o);
    pl_status st;
    if ((st = copy_text(o->model, sizeof o->model, pub_csv_cell(csv, r, cols[C_MODEL].col), "model", row, msg, len)) ||
        (st = copy_text(o->cluster, sizeof o->cluster, pub_csv_cell(csv, r, cols[C_CLUSTER].col), "cluster", row, msg,
                        len)) ||
        (st = copy_text(o->layout, sizeof o->layout, pub_csv_cell(csv, r, cols[C_LAYOUT].col), "layout", row, msg, len)) ||
        (st = copy_text(o->framework, sizeof o->framework, pub_csv_cell(csv, r, cols[C_FRAMEWORK].col), "framework", row,
                        msg, len)))
        return st;
    if (!parse_num(pub_csv_cell(csv, r, cols[C_GPUS].col), 0, &v) || v != floor(v) || v > 1e8)
        return pl_fail(msg, len, PL_ERR_INVALID, "row %d: gpus must be a positive integer, not '%.40s'", row,
                       pub_csv_cell(csv, r, cols[C_GPUS].col));
    o->gpus = (int64_t)v;
    if (!parse_num(pub_csv_cell(csv, r, cols[C_SEQ].col), 0, &v) || v != floor(v) || v > (1 << 24))
        return pl_fail(msg, len, PL_ERR_INVALID, "row %d: seq must be a positive integer, not '%.40s'", row,
                       pub_csv_cell(csv, r, cols[C_SEQ].col));
    o->seq = (int)v;
    if (!parse_num(pub_csv_cell(csv, r, cols[C_STEP].col), 0, &v))
        return pl_fail(msg, len, PL_ERR_INVALID, "row %d: the step time must be a positive number, not '%.40s'", row,
                       pub_csv_cell(csv, r, cols[C_STEP].col));
    o->step_us = v * cols[C_STEP].unit;
    o->peak_bytes = o->reserved_bytes = -1;
    if (cols[C_PEAK].col >= 0 && *pub_csv_cell(csv, r, cols[C_PEAK].col)) {
        if (!parse_num(pub_csv_cell(csv, r, cols[C_PEAK].col), 0, &v))
            return pl_fail(msg, len, PL_ERR_INVALID, "row %d: peak memory must be a positive number, not '%.40s'", row,
                           pub_csv_cell(csv, r, cols[C_PEAK].col));
        o->peak_bytes = v * cols[C_PEAK].unit;
    }
    if (cols[C_RESERVED].col >= 0 && *pub_csv_cell(csv, r, cols[C_RESERVED].col)) {
        if (!parse_num(pub_csv_cell(csv, r, cols[C_RESERVED].col), 0, &v))
            return pl_fail(msg, len, PL_ERR_INVALID, "row %d: reserved memory must be a positive number, not '%.40s'",
                           row, pub_csv_cell(csv, r, cols[C_RESERVED].col));
        o->reserved_bytes = v * cols[C_RESERVED].unit;
    }
    if (cols[C_RUN].col >= 0 && *pub_csv_cell(csv, r, cols[C_RUN].col))
        snprintf(o->id, sizeof o->id, "%.63s", pub_csv_cell(csv, r, cols[C_RUN].col));
    else
        snprintf(o->id, sizeof o->id, "row %d", row);
    o->split = -1;
    if (cols[C_SPLIT].col >= 0) {
        const char *s = pub_csv_cell(csv, r, cols[C_SPLIT].col);
        if (!strcmp(s, "fit")) o->split = 0;
        else if (!strcmp(s, "test")) o->split = 1;
        else if (*s) return pl_fail(msg, len, PL_ERR_INVALID, "row %d: split must be fit or test, not '%.40s'", row, s);
    }
    return PL_OK;
}

pl_status layout_runs_parse(const char *text, size_t n, layout_run **runs, int *n_runs, char *msg, size_t len) {
    *runs = NULL;
    *n_runs = 0;
    pub_csv csv;
    char m2[400] = "";
    if (pub_csv_parse(text, n, &csv, m2, sizeof m2) != PL_OK)
        return pl_fail(msg, len, PL_ERR_INVALID, "%s", m2);
    col_spec cols[C_COUNT];
    for (int c = 0; c < C_COUNT; c++) cols[c] = (col_spec){COL_NAMES[c], COL_REQUIRED[c], -1, 1.0};
    pl_status st = PL_OK;
    for (int j = 0; j < csv.n_cols && st == PL_OK; j++) {
        const char *h = csv.cells[j];
        int m = match_header(h, j, cols, msg, len);
        if (m < 0) st = PL_ERR_INVALID;
        else if (m == 0)
            st = pl_fail(msg, len, PL_ERR_INVALID,
                         "unknown column '%.60s' (model, cluster, gpus, layout, seq, framework, step_<us|ms|s>, "
                         "peak_<unit>, reserved_<unit>, run, split)",
                         h);
    }
    for (int c = 0; c < C_COUNT && st == PL_OK; c++)
        if (cols[c].required && cols[c].col < 0)
            st = pl_fail(msg, len, PL_ERR_INVALID, "missing column '%s%s'", COL_NAMES[c], COL_UNITED[c] ? "_<unit>" : "");
    if (st == PL_OK && csv.n_rows < 1) st = pl_fail(msg, len, PL_ERR_INVALID, "no runs: the file has a header only");
    layout_run *out = NULL;
    if (st == PL_OK && !(out = calloc((size_t)csv.n_rows, sizeof *out))) st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    for (int r = 0; r < csv.n_rows && st == PL_OK; r++) st = read_row(&csv, cols, r, &out[r], msg, len);
    const int rows = csv.n_rows;
    pub_csv_free(&csv);
    if (st != PL_OK) {
        free(out);
        return pl_one_line(st, msg, len); /* a control character echoed from a quoted field */
    }
    *runs = out;
    *n_runs = rows;
    return PL_OK;
}

pl_status layout_runs_load(const char *path, layout_run **runs, int *n_runs, char *msg, size_t len) {
    *runs = NULL;
    *n_runs = 0;
    char *text = NULL;
    size_t n = 0;
    pl_status st = data_file_read(path, LAYOUT_RUNS_FILE_MAX, "layout runs", &text, &n, msg, len);
    if (st != PL_OK) return st;
    char m2[400] = "";
    if ((st = layout_runs_parse(text, n, runs, n_runs, m2, sizeof m2)) != PL_OK) pl_fail(msg, len, st, "%s: %s", path, m2);
    free(text);
    return st;
}
