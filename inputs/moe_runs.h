/*
 * moe_runs.h: the mixture-of-experts check set's rows
 * (data/published-runs/moe-runs.csv) read into a model, a cluster and a
 * layout each, or the reason a row cannot be run: no published tokens/s,
 * a precision the layout simulator does not know (mxfp8), no shipped model
 * file (data/models), no shipped cluster file, a cluster of more than one
 * node group or not whole nodes, a layout that does not validate.
 * calib/published_moe.h simulates them.
 *
 * Row fields to layout: tp pp vp cp ep etp dp micro_batch global_batch seq
 * as given; precision bf16 | fp8 (mxfp8: skipped); dispatcher: "DeepEP",
 * "flex..." or "DeepSeek..." -> flex (a token once per remote node),
 * "allgather" -> allgather, else alltoall; recompute: "none" / "full" /
 * "selective..." (anything else: selective); zero_fsdp: "FSDP" -> zero 3
 * (Megatron-Core's FSDP reshards each layer's weights after its forward),
 * "FSDP 0" and the rest ZeRO-1 (Megatron's distributed optimizer, the
 * rows' default);
 * sp on when tp > 1 (Megatron requires it with MoE); the cluster file's
 * one node group cut to the row's GPUs; a "dualpipe" schedule as
 * sched=dualpipe (vp 2: the two directions); "A2A overlap" in the
 * schedule as overlap=ep; one or two more chunks than layers as empty
 * first / last chunks (the embedding and the loss alone); the FP8 recipe
 * from fp8_recipe's text ("blockwise" -> blockwise, "current scaling" ->
 * tensorwise, else delayed). Memory options only where the row's own text
 * says the run used them (docs/moe.md): "RMSNorm and MLA up-projections
 * recomputed" -> mem norm_mla (recompute none unless it also says full or
 * selective), "BF16 AdamW moments" / "BF16 optimizer states" ->
 * bf16_moments, DeepSeek's FP8 (its report's activation caching) ->
 * fp8_act, "MTP" trained on the last stage -> mtp_last, "FP32 master
 * weights and grads" -> fp32_grads (a cost the run paid). Routing: "forced
 * load balance" / "force-load-balancing" in the row -> expert_cv 0, else
 * the stated default.
 */
#ifndef PLACER_INPUTS_MOE_RUNS_H
#define PLACER_INPUTS_MOE_RUNS_H

#include <stddef.h>

#include "cluster.h"
#include "graph.h"
#include "layout.h"
#include "status.h"

#define PUB_MOE_MAX_ROWS 64

typedef struct {
    char run_id[96];
    char model_name[128];    /* the shipped model's name (data/models/NAME.json) */
    char why[160];           /* non-empty: why the row cannot be simulated (the rest unset) */
    gpt_config model;        /* at the row's sequence length */
    cluster cl;              /* the row's cluster, cut to its GPUs */
    layout lay;              /* validated against model and cl */
    int gpus;
    int seq;
    double tokens_per_s;     /* published, per GPU */
    int forced_balance;      /* 1: the run forced balanced routing (expert_cv 0) */
    double capacity_factor;  /* > 0: the run dropped tokens at this capacity, each expert padded to it
                                (its assumptions say "capacity factor X, padded"); 0: dropless */
} pub_moe_run;

/* Read csv_path (NULL: the shipped data/published-runs/moe-runs.csv), its
 * clusters from clusters_dir (NULL: the shipped ones), into a heap array
 * *runs of *n rows (at most PUB_MOE_MAX_ROWS; free()). PL_ERR_IO /
 * PL_ERR_NOT_FOUND / PL_ERR_INVALID with one line for an unreadable or
 * malformed file; a row that cannot be run is a row with its why, not an
 * error. *runs NULL on failure. */
pl_status pub_moe_runs_load(const char *csv_path, const char *clusters_dir, pub_moe_run **runs, int *n, char *msg,
                            size_t len);

#endif
