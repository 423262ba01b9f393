/*
 * published_check.h: the check of the layout simulator at scale against
 * published training runs (`placer check-published`): every row of the
 * check set (published_runs.h) simulated on the cluster it ran on, its
 * predicted against published TFLOP/s per GPU, the mean and max absolute
 * error over the rows not fitted on (Megatron SC21 Table 1 and Llama 3
 * Table 4); Table 2 (ZeRO-3 against PTD-P) as orderings: each ZeRO-3 row
 * beside the PTD-P row of the same model at the same position, in the
 * published order or not; two memory verdicts (Table 1's 1T layout against
 * 80 GB, and Table 2's note that ZeRO-3 530B on 560 GPUs at micro-batch 4
 * did not fit), and for each Llama 3 row its memory under the paper's
 * chunking (one layer a chunk: vp 8, the first chunk only the embedding and
 * the last only the head, Llama 3 section 3.3.2), which must fit. A row that
 * ran but is predicted OOM carries the reason (pub_row_result.mem_why):
 * docs/published-runs.md has the audit.
 *
 * Throughput is counted the way each table counts it (pub_step_flops):
 * predicted TFLOP/s per GPU = the table's FLOPs per step / (predicted step
 * time x GPUs).
 *
 * Fitting (fit = 1): two constants on two named rows: the base GEMM
 * efficiency of GPUs without a measured one (compute_params.
 * gemm_efficiency: the A100 here; H100's is measured) on PUB_FIT_ROW_GEMM,
 * then the ZeRO-3 gather scale (layout_sim_params.zero3_gather_scale,
 * DeepSpeed 2021's stage-3 gathers against the collective model) on
 * PUB_FIT_ROW_ZERO3, each by bisection until its row is predicted exactly.
 * The stored defaults (compute_model.c and PUB_ZERO3_GATHER_SCALE) came from
 * that fit. Both rows are marked and left out of the error figures either
 * way.
 */
#ifndef PLACER_CALIB_PUBLISHED_CHECK_H
#define PLACER_CALIB_PUBLISHED_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "layout_sim.h"
#include "published_runs.h"
#include "status.h"

/* The row the GEMM efficiency is fitted on: the middle row of Table 1,
 * chosen before looking at any errors. */
#define PUB_FIT_ROW_GEMM "T1 145.6B 1536 GPUs"
/* The row the ZeRO-3 gather scale is fitted on (the middle 175B row of
 * Table 2), so that the other five ZeRO-3 rows and their orderings against
 * PTD-P are predictions. */
#define PUB_FIT_ROW_ZERO3 "T2 zero3 174.6B 768 GPUs"
/* How many times the collective model's time DeepSpeed's ZeRO-3 of 2021
 * spent in its parameter gathers (placer check-published --fit). */
#define PUB_ZERO3_GATHER_SCALE 6.478

/* The error targets of the check (the issue's): over the rows not fitted
 * on, the mean absolute error within PUB_TARGET_MEAN and the worst within
 * PUB_TARGET_WORST. */
#define PUB_TARGET_MEAN 0.10
#define PUB_TARGET_WORST 0.15

typedef struct {
    const char *dir;           /* folder of the three CSV files; required */
    const char *cluster_a100;  /* cluster of the Megatron rows (name or file) */
    const char *cluster_h100;  /* cluster of the Llama 3 rows */
    int fit;                   /* 1: fit both constants first */
    double gemm_efficiency;    /* > 0: override the base GEMM efficiency */
    double collective_scale;   /* > 0: override the collective time scale */
    double zero3_gather_scale; /* the ZeRO-3 gather scale (PUB_ZERO3_GATHER_SCALE unless given) */
    int llama_vp;              /* > 0: interleaving depth of the Llama 3 rows */
} pub_check_options;

/* FLOPs of one step of row r as its table counts them (pub_flops). */
double pub_step_flops(const pub_row *r);

/* Defaults: the shipped clusters, no fit, stored constants; dir NULL. */
void pub_check_options_default(pub_check_options *o);

typedef struct {
    double step_us;
    double tflops;       /* predicted, the table's count */
    double err;          /* (predicted - published) / published */
    int fitted;          /* a row a constant was fitted on */
    int oom;
    int64_t mem_peak;    /* bytes, worst stage */
    int64_t mem_cap;     /* bytes */
    layout_result res;   /* the whole simulation */
    const char *mem_why; /* a run that ran, predicted OOM: why (static text); NULL otherwise */
} pub_row_result;

/* A memory verdict against what the paper reports. */
typedef struct {
    const char *what;    /* static text, e.g. "T1 1T layout (tp 8, pp 64, mbs 1) fits 80 GB" */
    int64_t peak, cap;   /* bytes */
    int oom, want_oom;   /* predicted, published */
} pub_mem_check;

typedef enum { PUB_CONST_STORED = 0, PUB_CONST_GIVEN, PUB_CONST_FITTED } pub_const_source;

typedef struct {
    pub_row *rows[PUB_TABLE_COUNT];        /* each table's rows (owned) */
    int n_rows[PUB_TABLE_COUNT];
    pub_row_result *res[PUB_TABLE_COUNT];  /* one per row (owned) */
    double gemm_efficiency;                /* the constants used */
    double zero3_gather_scale;
    double collective_scale;
    pub_const_source gemm_source, zero3_source;
    double mean_abs_error, max_abs_error;  /* Tables 1 and 4, rows not fitted on */
    int rows_scored;
    int n_pairs;                           /* Table 2: ZeRO-3 row, PTD-P row */
    int pairs[PUB_CSV_MAX_ROWS][2];        /* indices into rows[PUB_T2] */
    int same_order[PUB_CSV_MAX_ROWS];      /* 1: predicted in the published order */
    int n_same;
    pub_mem_check mem[2 + PUB_CSV_MAX_ROWS];
    int n_mem;
} pub_check_result;

/* Load the tables of o->dir and the two clusters, fit when asked, simulate
 * every row and gather the figures above into *out (heap arrays; free with
 * pub_check_free, also after a failure). Bad input (a file that cannot be
 * read or parsed, a missing fit row, an unknown cluster) is PL_ERR_INVALID
 * or the loader's status with one line in msg; a simulation that fails
 * passes its status and message on. */
pl_status pub_check_run(const pub_check_options *o, pub_check_result *out, char *msg, size_t len);

/* Free the arrays of r (NULL accepted); r is zeroed. */
void pub_check_free(pub_check_result *r);

#endif
