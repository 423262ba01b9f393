/*
 * published_runs.h: the public check set of `placer check-published`
 * (../shared/published-runs/, copied to data/published-runs/): a small CSV
 * reader, and each table's rows turned into a model, a layout and the
 * published throughput, with the way each table counts FLOPs (the count
 * itself, which needs the layout simulator's parameter split, is
 * calib/published_check.h's pub_step_flops).
 *
 * Tables (file names as shipped):
 *   megatron-sc21-table1.csv  Narayanan et al. SC21 Table 1 (PTD-P, 32 to
 *                             3,072 A100s)
 *   megatron-sc21-table2.csv  the same paper's Table 2 (ZeRO-3 against PTD-P)
 *   llama3-table4.csv         Grattafiori et al. 2024 Table 4 (405B on 8,192
 *                             to 16,384 H100s)
 * What each row becomes, and what is assumed where the paper is silent,
 * is in published_runs.c's comment and docs/published-runs.md.
 *
 * CSV: comma-separated, one header row naming the columns, fields may be
 * double-quoted ("" inside quotes is a quote), CR LF or LF line ends, blank
 * lines skipped. At most PUB_CSV_MAX_COLS columns, PUB_CSV_MAX_ROWS rows
 * and PUB_CSV_MAX_FIELD bytes per field; anything else is PL_ERR_INVALID
 * naming the line.
 */
#ifndef PLACER_INPUTS_PUBLISHED_RUNS_H
#define PLACER_INPUTS_PUBLISHED_RUNS_H

#include <stddef.h>
#include <stdint.h>

#include "framework_profile.h" /* attention_impl */
#include "graph.h"
#include "layout.h"
#include "status.h"

#define PUB_CSV_MAX_COLS 32
#define PUB_CSV_MAX_ROWS 256
#define PUB_CSV_MAX_FIELD 2048 /* moe-runs.csv's source and assumption cells run to ~1,000 bytes */

typedef struct {
    int n_cols;                 /* columns of the header */
    int n_rows;                 /* data rows */
    char **cells;               /* (n_rows + 1) * n_cols strings; row 0 the header */
} pub_csv;

/* Parse n bytes of CSV text into *out (free with pub_csv_free). Every data
 * row must have the header's column count. */
pl_status pub_csv_parse(const char *text, size_t n, pub_csv *out, char *msg, size_t len);
void pub_csv_free(pub_csv *c);

/* Column index of a header name, or -1. */
int pub_csv_col(const pub_csv *c, const char *name);
/* The cell of data row r (0-based) in column col. */
const char *pub_csv_cell(const pub_csv *c, int r, int col);

typedef enum { PUB_T1 = 0, PUB_T2, PUB_LLAMA, PUB_TABLE_COUNT } pub_table;

/* How a table counts FLOPs per step:
 *   PUB_FLOPS_MEGATRON  F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h))  (with
 *                       the recomputed forward; SC21's own formula)
 *   PUB_FLOPS_MODEL     model FLOPs in PaLM's sense: 6 N + 12 l h s per
 *                       token, N the parameters of every GEMM (the layers
 *                       and the head, not the embedding lookup) */
typedef enum { PUB_FLOPS_MEGATRON = 0, PUB_FLOPS_MODEL } pub_flops;

typedef struct {
    pub_table table;
    char label[48];             /* e.g. "T1 145.6B 1536 GPUs" */
    char scheme[8];             /* Table 2: "zero3" or "ptd-p"; else "" */
    double params_b;            /* the table's parameter count, billions */
    int64_t gpus;
    gpt_config model;
    layout lay;
    attention_impl attention;   /* ATTENTION_UNFUSED for SC21 (2021), flash for Llama 3 */
    int dp_overlap;             /* 1: gradient reduction overlapped with backward */
    double grad_bytes;          /* bytes per gradient element reduced over dp */
    pub_flops flops;            /* how the table counts */
    double published_tflops;    /* per GPU, as the table counts */
} pub_row;

/* Turn a table's CSV into rows (*rows allocated, n entries; free()).
 * PL_ERR_INVALID naming the missing column or bad cell. */
pl_status pub_rows_from_csv(pub_table t, const pub_csv *csv, pub_row **rows, int *n, char *msg, size_t len);

/* File name of a table ("megatron-sc21-table1.csv", ...). Static. */
const char *pub_table_file(pub_table t);

/* Read dir/pub_table_file(t) and turn it into rows (*rows allocated, *n
 * entries; free()). PL_ERR_INVALID with one line naming the file: one that
 * cannot be read (the line says --dir names the folder of the three CSV
 * files), malformed CSV, or pub_rows_from_csv's complaint. */
pl_status pub_table_load(const char *dir, pub_table t, pub_row **rows, int *n, char *msg, size_t len);

#endif
