/*
 * published_fp8.h: the FP8 / Blackwell check set of `placer check-published`
 * (its FP8 section): the FP8 pre-training rows of
 * data/published-runs/fp8-runs.csv (NVIDIA NeMo performance summaries of
 * the 24.07 to 25.07 containers, MLPerf Training v4.0 to v5.0 submissions;
 * data/published-runs/MOE-FP8.md gives every cell's source) simulated on
 * the cluster each ran on, predicted against published tokens/s per GPU.
 *
 * Which rows and what each becomes: inputs/fp8_runs.h (its reader); the
 * cluster file of the row's `cluster` column with enough nodes added for
 * the row.
 *
 * One fitted constant: the GEMM base of Blackwell GPUs
 * (compute_params.blackwell_gemm_efficiency; nothing measured on one
 * here), fitted on PUB_FP8_FIT_ROW by bisection; the row is marked and left
 * out of the error figures. H100 / H200 rows use the measured bases.
 */
#ifndef PLACER_CALIB_PUBLISHED_FP8_H
#define PLACER_CALIB_PUBLISHED_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "fp8_runs.h"
#include "graph.h"
#include "layout.h"
#include "layout_sim.h"
#include "status.h"

/* The row the Blackwell base is fitted on: the middle NeMo 25.02 DGX-B200
 * Llama 3 row, chosen before the errors were looked at. */
#define PUB_FP8_FIT_ROW "nemo2502-b200-llama3-70b"

typedef struct {
    pub_fp8_run run;          /* the row as read */
    double predicted_tokens;
    double err;               /* (predicted - published) / published */
    int fitted;               /* the fit row */
    int blackwell;            /* the row's GPU is a Blackwell */
    const char *mem_why;      /* predicted OOM for a run that ran: why (static text); NULL otherwise */
    layout_result res;
} pub_fp8_row;

typedef struct {
    int n;                    /* rows read (simulated or skipped) */
    pub_fp8_row *rows;        /* heap */
    double blackwell_gemm_efficiency; /* used */
    int fitted;               /* 1: fitted now */
    double mean_abs_error, max_abs_error; /* over the simulated rows not fitted on */
    int rows_scored;
    double mean_abs_error_h100, max_abs_error_h100; /* Hopper rows alone */
    int rows_h100;
} pub_fp8_result;

/* Why a row that ran is predicted OOM (the audited rows' static text,
 * else "not audited"). Pure. */
const char *pub_fp8_mem_why(const char *run_id);

/* Read dir/fp8-runs.csv (pub_fp8_runs_load; clusters from the shipped
 * ones, cluster_file.h), fit when fit != 0 (else blackwell_eff > 0
 * overrides the stored base), simulate every row. PL_ERR_NOT_FOUND when
 * the file is absent (the caller may skip the section), PL_ERR_INVALID with
 * one line for a malformed file or a missing fit row. Free with
 * pub_fp8_free (also after a failure). */
pl_status pub_fp8_check_run(const char *dir, int fit, double blackwell_eff, pub_fp8_result *out, char *msg,
                            size_t len);
void pub_fp8_free(pub_fp8_result *r);

#endif
