/*
 * fp8_runs.h: the FP8 / Blackwell check set's rows
 * (data/published-runs/fp8-runs.csv: NVIDIA NeMo performance summaries of
 * the 24.07 to 25.07 containers, MLPerf Training v4.0 to v5.0 submissions;
 * data/published-runs/MOE-FP8.md gives every cell's source) read into
 * models and layouts. calib/published_fp8.h simulates them.
 *
 * Which rows: precision fp8, a model file this tree ships
 * (data/models/NAME.json) that the model loader reads, not a fine-tuning
 * row (SFT, LoRA: no full backward of the base weights). The others are
 * kept with the reason they are skipped. What each row becomes (ASSUMED
 * where the source is silent): the row's tp, pp, vp, cp, dp, micro-batch,
 * global batch and sequence; sequence parallelism with tp > 1 (NeMo's
 * default); the distributed optimizer (zero 1), or zero 3 where the row says
 * FSDP 1 (NeMo's Megatron FSDP shards weights, gradients and optimizer); no
 * recomputation (NeMo's performance configurations; the rows say "not
 * stated"); flash attention; the recipe the row states (per-tensor current
 * scaling -> tensorwise, else delayed: NeMo's and MLPerf's); the cluster
 * named by the row's `cluster` column (loaded by the check).
 */
#ifndef PLACER_INPUTS_FP8_RUNS_H
#define PLACER_INPUTS_FP8_RUNS_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "layout.h"
#include "status.h"

#define PUB_FP8_FILE "fp8-runs.csv"
#define PUB_FP8_MAX_ROWS 128

typedef struct {
    char run_id[64];
    char cluster[64];         /* the cluster file's name */
    char skipped[160];        /* non-empty: why the row is not simulated */
    int64_t gpus;
    gpt_config model;
    layout lay;
    double published_tokens;  /* tokens/s per GPU */
} pub_fp8_run;

/* Read dir/fp8-runs.csv (dir NULL: the working directory; models from the
 * shipped ones, model_config.h) into a heap array *runs of *n rows (at most
 * PUB_FP8_MAX_ROWS; free()), skipped rows included. PL_ERR_NOT_FOUND
 * "PATH: not found" when the file is absent (a caller may skip the check),
 * PL_ERR_INVALID with one line for a malformed file or a missing column;
 * *runs NULL on failure. */
pl_status pub_fp8_runs_load(const char *dir, pub_fp8_run **runs, int *n, char *msg, size_t len);

#endif
