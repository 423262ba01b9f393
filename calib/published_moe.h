/*
 * published_moe.h: the mixture-of-experts check set of `placer
 * check-published --moe`: data/published-runs/moe-runs.csv's rows that the
 * layout simulator can run (a shipped model file in data/models, a shipped
 * cluster file, a precision it knows, a layout that validates, a published
 * tokens/s), each simulated as stated, its step time held against the
 * published one (global batch x sequence / (tokens/s per GPU x GPUs)). The
 * other rows are listed with the reason they are skipped. No constant is
 * fitted: every figure is a prediction.
 *
 * Which rows run and what each becomes: inputs/moe_runs.h (its reader).
 */
#ifndef PLACER_CALIB_PUBLISHED_MOE_H
#define PLACER_CALIB_PUBLISHED_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "layout_sim.h"
#include "moe_runs.h"
#include "status.h"

typedef struct {
    char run_id[96];
    char model_name[128];    /* the shipped model it ran (data/models/NAME.json) */
    int simulated;           /* 1: predicted; 0: skipped (why) */
    char why[160];           /* the reason a row was skipped */
    char layout_text[256];   /* the layout simulated */
    char routing[96];        /* how its tokens were routed as simulated: dropless at the default
                                expert_cv, forced balance, or token drop at a capacity */
    double published_step_s; /* from tokens/s per GPU */
    double predicted_step_s;
    double err;              /* predicted / published - 1 */
    double mem_gb;           /* the worst stage's memory */
    int oom;
    /* what a viewer needs to show the row as a layout (placer serve): */
    char cluster[CLUSTER_NAME_LEN]; /* the row's cluster's name */
    int64_t gpus;            /* GPUs of the run */
    int seq;                 /* its sequence length */
    layout lay;              /* the layout simulated */
    layout_result res;       /* the whole simulation */
    char oom_why[320];       /* an OOM row: its largest memory parts, the reason beside it */
} pub_moe_row;

typedef struct {
    int n;                   /* rows read */
    int n_simulated;
    pub_moe_row rows[PUB_MOE_MAX_ROWS];
    double mean_abs_err, max_abs_err; /* over the simulated rows */
} pub_moe_result;

/* Run the check on csv_path (NULL: the shipped data/published-runs/moe-runs.csv)
 * with the clusters of clusters_dir (NULL: the shipped ones). PL_ERR_IO /
 * PL_ERR_INVALID with one line for an unreadable or malformed file; a row
 * that cannot be simulated is a skipped row, not an error. */
pl_status pub_moe_check(const char *csv_path, const char *clusters_dir, pub_moe_result *out, char *msg, size_t len);

#endif
