/*
 * layout_eval.h: one layout as a user states it (placer layout): a model
 * text, a cluster, a layout text and optionally how many GPUs, loaded,
 * checked and simulated in one call, with what a report needs beside the
 * simulator's result (the link the pipeline send takes, where the
 * collective times came from).
 *
 * --gpus N takes N GPUs of the cluster, whole nodes group by group; a
 * layout without "dp=" then gets dp = N / (tp cp pp), and one with dp= must
 * use N GPUs. The sequence length follows plan_model.h's rules.
 */
#ifndef PLACER_PLAN_LAYOUT_EVAL_H
#define PLACER_PLAN_LAYOUT_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "layout.h"
#include "layout_sim.h"
#include "plan_model.h"
#include "status.h"

typedef struct {
    const char *model;               /* model_config_load's text; required */
    const char *cluster;             /* cluster name or file; required */
    const char *layout;              /* layout_parse's text; required */
    int64_t gpus;                    /* > 0: use this many GPUs of the cluster */
    int seq;                         /* > 0: the sequence length */
    const layout_sim_params *params; /* the software stack; NULL: defaults */
    const coll_measured *measured;   /* measured collectives inside a node; NULL: the cluster model */
    const char *trace_path;          /* non-NULL: write a Chrome trace of one pipeline replica there */
    int want_ops;                    /* 1: fill the result's ops (one replica's ops per rank) */
    int gpipe;                       /* 1: run the pipeline in GPipe's order (all forwards, then all
                                        backwards), which no layout text names: for the pipeline view;
                                        needs vp = 1 and the layout's default order */
    int64_t domain_gpus;             /* > 0: GPUs used per NVLink domain (cluster_use_domain_gpus) */
} layout_eval_options;

typedef struct {
    plan_model model;                /* the model and where its sequence length came from */
    cluster clu;                     /* the cluster as taken (--gpus) */
    layout lay;                      /* the layout as run (dp filled in) */
    layout_result res;               /* the simulator's result */
    int n_coll_model, n_coll_fitted, n_coll_measured; /* collective times by source */
    int64_t pp_rank0, pp_rank1;      /* the first pipeline send: GPU of stage 0 and of stage 1 */
    const char *pp_link;             /* "intra-node", "inter-node", "inter-pod" or "none" (static) */
    layout_op *ops;                  /* with want_ops: layout_sim_ops's list (the caller frees it, free());
                                        else NULL */
    int n_ops;
} layout_eval_result;

/* Load, check and simulate o into *out. Bad input (model, cluster, layout,
 * GPU count, a layout that cannot run, a trace file that cannot be opened)
 * is PL_ERR_INVALID with one line in msg, worded for the user ("model 'x':
 * ...", "cluster 'c': ...", "layout: ..."); other failures keep their
 * status (PL_ERR_IO for a trace that could not be written). */
pl_status layout_eval_run(const layout_eval_options *o, layout_eval_result *out, char *msg, size_t len);

/* The link a send between GPUs a and b of c takes: "none" (a == b),
 * "intra-node", "nvlink-domain", "inter-node" or "inter-pod" (static). */
const char *layout_eval_link(const cluster *c, int64_t a, int64_t b);

#endif
