/*
 * moe_hist.c: router histograms from the side file of measured MoE runs
 * (moe_hist.h).
 */
#include "moe_hist.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_file.h"
#include "published_runs.h"

#define MOE_HIST_FILE_MAX (64 << 20)

void moe_hist_free_all(moe_hist *hs, int n) {
    if (!hs) return;
    for (int i = 0; i < n; i++) free(hs[i].share);
    free(hs);
}

const moe_hist *moe_hist_find(const moe_hist *hs, int n, const char *run) {
    if (!hs || !run) return NULL;
    for (int i = 0; i < n; i++)
        if (!strcmp(hs[i].run, run)) return &hs[i];
    return NULL;
}

static int int_of(const char *s, long lo, long hi, long *v) {
    if (!s || !*s) return 0;
    errno = 0;
    char *end = NULL;
    const long x = strtol(s, &end, 10);
    if (errno || *end || x < lo || x > hi) return 0;
    *v = x;
    return 1;
}

/* counts (E non-negative integers separated by spaces) into share[0..E),
 * normalised; 0 on a bad cell. */
static int counts_of(const char *s, int E, double *share) {
    double sum = 0;
    int k = 0;
    const char *p = s;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        errno = 0;
        char *end = NULL;
        const double v = strtod(p, &end);
        if (end == p || errno || !isfinite(v) || v < 0 || v != floor(v) || k >= E) return 0;
        share[k++] = v;
        sum += v;
        p = end;
        if (*p && *p != ' ') return 0;
    }
    if (k != E || !(sum > 0)) return 0;
    for (int i = 0; i < E; i++) share[i] /= sum;
    return 1;
}

typedef struct {
    int run_idx, layer;
    double cv;
    double *share;
} hist_row;

static int by_run_layer(const void *a, const void *b) {
    const hist_row *x = a, *y = b;
    if (x->run_idx != y->run_idx) return x->run_idx < y->run_idx ? -1 : 1;
    return (x->layer > y->layer) - (x->layer < y->layer);
}

pl_status moe_hist_parse_csv(const char *text, size_t n, moe_hist **out, int *n_out, char *msg, size_t len) {
    if (!out || !n_out) return pl_fail(msg, len, PL_ERR_INVALID, "moe_hist_parse_csv: NULL argument");
    *out = NULL;
    *n_out = 0;
    pub_csv csv;
    char m[256];
    pl_status st = pub_csv_parse(text, n, &csv, m, sizeof m);
    if (st != PL_OK) return pl_fail(msg, len, st, "router histograms: %s", m);
    const int c_run = pub_csv_col(&csv, "run"), c_layer = pub_csv_col(&csv, "layer"),
              c_e = pub_csv_col(&csv, "experts"), c_cv = pub_csv_col(&csv, "cv"), c_counts = pub_csv_col(&csv, "counts");
    hist_row *rows = NULL;
    char (*runs)[MOE_HIST_RUN_LEN] = NULL;
    int *run_e = NULL, n_runs = 0;
    moe_hist *hs = NULL;
    if (c_run < 0 || c_layer < 0 || c_e < 0 || c_cv < 0 || c_counts < 0) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "router histograms: the columns run, layer, experts, cv and counts are needed");
        goto out;
    }
    if (csv.n_rows < 1) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "router histograms: no rows");
        goto out;
    }
    rows = calloc((size_t)csv.n_rows, sizeof *rows);
    runs = calloc((size_t)csv.n_rows, sizeof *runs);
    run_e = calloc((size_t)csv.n_rows, sizeof *run_e);
    if (!rows || !runs || !run_e) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int r = 0; r < csv.n_rows; r++) {
        const char *run = pub_csv_cell(&csv, r, c_run);
        long layer, E;
        if (!run || !*run || strlen(run) >= MOE_HIST_RUN_LEN) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "router histograms row %d: run must be 1 to %d characters", r + 2,
                         MOE_HIST_RUN_LEN - 1);
            goto out;
        }
        if (!int_of(pub_csv_cell(&csv, r, c_layer), 0, MOE_HIST_MAX_LAYERS * 64L, &layer) ||
            !int_of(pub_csv_cell(&csv, r, c_e), 1, MOE_HIST_MAX_EXPERTS, &E)) {
            st = pl_fail(msg, len, PL_ERR_INVALID,
                         "router histograms row %d: layer must be an integer >= 0 and experts one from 1 to %d", r + 2,
                         MOE_HIST_MAX_EXPERTS);
            goto out;
        }
        int ri = 0;
        while (ri < n_runs && strcmp(runs[ri], run)) ri++;
        if (ri == n_runs) {
            snprintf(runs[n_runs], MOE_HIST_RUN_LEN, "%s", run);
            run_e[n_runs++] = (int)E;
        } else if (run_e[ri] != E) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "router histograms row %d: run %s has %d experts in another row, %ld here",
                         r + 2, run, run_e[ri], E);
            goto out;
        }
        char *end = NULL;
        const char *cvs = pub_csv_cell(&csv, r, c_cv);
        const double cv = cvs ? strtod(cvs, &end) : NAN;
        if (!cvs || end == cvs || *end || !isfinite(cv) || cv < 0) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "router histograms row %d: cv must be a number >= 0", r + 2);
            goto out;
        }
        rows[r] = (hist_row){ri, (int)layer, cv, malloc(sizeof(double) * (size_t)E)};
        if (!rows[r].share) {
            st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
            goto out;
        }
        const char *cnt = pub_csv_cell(&csv, r, c_counts);
        if (!cnt || !counts_of(cnt, (int)E, rows[r].share)) {
            st = pl_fail(msg, len, PL_ERR_INVALID,
                         "router histograms row %d: counts must be %ld non-negative integers separated by spaces, not all 0",
                         r + 2, E);
            goto out;
        }
    }
    qsort(rows, (size_t)csv.n_rows, sizeof *rows, by_run_layer);
    hs = calloc((size_t)n_runs, sizeof *hs);
    if (!hs) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0, r = 0; i < n_runs; i++) {
        int nl = 0;
        while (r + nl < csv.n_rows && rows[r + nl].run_idx == i) nl++;
        moe_hist *h = &hs[i];
        snprintf(h->run, sizeof h->run, "%s", runs[i]);
        h->n_experts = run_e[i];
        h->n_layers = nl;
        if (nl > MOE_HIST_MAX_LAYERS) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "router histograms: run %s has more than %d layers", runs[i],
                         MOE_HIST_MAX_LAYERS);
            goto out;
        }
        h->share = malloc(sizeof(double) * (size_t)nl * (size_t)h->n_experts);
        if (!h->share) {
            st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
            goto out;
        }
        double cvs = 0;
        for (int j = 0; j < nl; j++) {
            if (j > 0 && rows[r + j].layer == rows[r + j - 1].layer) {
                st = pl_fail(msg, len, PL_ERR_INVALID, "router histograms: run %s has layer %d twice", runs[i],
                             rows[r + j].layer);
                goto out;
            }
            memcpy(h->share + (size_t)j * h->n_experts, rows[r + j].share, sizeof(double) * (size_t)h->n_experts);
            cvs += rows[r + j].cv;
        }
        h->mean_cv = nl ? cvs / nl : 0;
        r += nl;
    }
    *out = hs;
    *n_out = n_runs;
    hs = NULL;
out:
    if (rows)
        for (int r = 0; r < csv.n_rows; r++) free(rows[r].share);
    free(rows);
    free(runs);
    free(run_e);
    moe_hist_free_all(hs, n_runs);
    pub_csv_free(&csv);
    return pl_one_line(st, msg, len);
}

pl_status moe_hist_load(const char *path, moe_hist **out, int *n_out, char *msg, size_t len) {
    if (!path || !out || !n_out) return pl_fail(msg, len, PL_ERR_INVALID, "moe_hist_load: NULL argument");
    char *text = NULL;
    size_t n = 0;
    pl_status st = data_file_read(path, MOE_HIST_FILE_MAX, "router histograms", &text, &n, msg, len);
    if (st != PL_OK) return st;
    char m[512];
    st = moe_hist_parse_csv(text, n, out, n_out, m, sizeof m);
    free(text);
    if (st != PL_OK) pl_fail(msg, len, st, "%s: %s", path, m);
    return pl_one_line(st, msg, len);
}
