/*
 * moe_hist.h: router histograms of measured MoE runs as data: per run and
 * MoE layer, the share of the routed tokens each expert received, from the
 * side file `to_layout_runs.py --imbalance-out` writes beside a
 * layout-runs CSV (data/frameworks/runs/CARD-moe-imbalance.csv: run,
 * layer, layer_name, experts, topk, choices_per_step, steps, max_over_mean,
 * min_over_mean, cv, counts). The layout simulator prices a layer's
 * grouped GEMMs expert by expert with these shares (sim/layout/moe_compute.h)
 * instead of a stated spread: the imbalance is modelled, not fitted.
 */
#ifndef PLACER_INPUTS_MOE_HIST_H
#define PLACER_INPUTS_MOE_HIST_H

#include <stddef.h>

#include "status.h"

#define MOE_HIST_RUN_LEN 64
#define MOE_HIST_MAX_EXPERTS 4096
#define MOE_HIST_MAX_LAYERS 1024

/* One run's histograms: its MoE layers in model order (the side file's
 * rows of the run sorted by layer), n_experts shares each summing to 1. */
typedef struct {
    char run[MOE_HIST_RUN_LEN];
    int n_layers;      /* MoE layers with a histogram */
    int n_experts;     /* experts per layer */
    double *share;     /* [n_layers * n_experts], owned */
    double mean_cv;    /* the layers' mean coefficient of variation (the file's cv column) */
} moe_hist;

/* Every run of a side file's text (n bytes) into *out (n_out entries; free
 * with moe_hist_free_all). A row: run, layer (an integer, the model's
 * layer index), layer_name, experts (1..4096), topk, choices_per_step,
 * steps, max_over_mean, min_over_mean, cv, counts (experts non-negative
 * integers separated by spaces, not all zero). A run's layers are kept in
 * increasing layer order (a layer twice is an error). One line naming the
 * row on failure: PL_ERR_INVALID (PL_ERR_NOMEM). */
pl_status moe_hist_parse_csv(const char *text, size_t n, moe_hist **out, int *n_out, char *msg, size_t len);

/* moe_hist_parse_csv on the file at path ("PATH: MESSAGE" on failure). */
pl_status moe_hist_load(const char *path, moe_hist **out, int *n_out, char *msg, size_t len);

/* The histograms of run `run` in hs[0..n), or NULL. */
const moe_hist *moe_hist_find(const moe_hist *hs, int n, const char *run);

void moe_hist_free_all(moe_hist *hs, int n);

#endif
