/*
 * plan_run.h: a plan as a user asks for it (placer plan): the model (with
 * its training sequence length, plan_model.h) and the cluster loaded, the
 * GPU count and global batch checked, the layout search run (plan.h), and
 * what the report shows beside it: a given layout simulated the same way
 * (--compare), the best layout's stage split against the uniform split,
 * DeepSpeed's parameters split and the near-uniform ones people write by
 * hand (--splits), the best layout's Chrome trace (--trace).
 *
 * plan_profile_run is the same for a measured profile (placer plan --db):
 * pipelines over its devices, the --fix dimensions a profile can hold
 * (pp, mbs) checked and turned into the search's options.
 */
#ifndef PLACER_PLAN_RUN_H
#define PLACER_PLAN_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "plan.h"
#include "plan_model.h"
#include "plan_profile.h"
#include "status.h"

typedef struct {
    const char *model;        /* model_config_load's text; required */
    const char *cluster;      /* cluster name or file; required */
    int64_t gpus;             /* 0: all of the cluster's */
    int global_batch;         /* 0: the model's batch (a preset's) */
    int seq;                  /* 0: plan_model.h's rules */
    plan_options search;      /* the search's options; gpus and global_batch are set here */
    const char *compare;      /* a layout text to simulate too, or NULL */
    int splits;               /* 1: compare the best layout's stage splits */
    int schedules;            /* 1: the best layout's step under each pipeline order (search.sched_mask
                                 says which orders the search itself tries) */
    const char *trace_path;   /* the best layout's Chrome trace, or NULL */
    plan_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    int64_t domain_gpus;      /* > 0: GPUs used per NVLink domain (cluster_use_domain_gpus) */
} plan_run_options;

/* One simulated stage split of the best layout (--splits). */
typedef struct {
    char label[48];           /* "plan (DP split)", "uniform", "DeepSpeed parameters", "best hand split (of 9)" */
    plan_entry e;
    int ok;                   /* 0: not expressible for this layout */
} plan_split_row;

#define PLAN_SPLIT_ROWS 4

typedef struct {
    plan_model model;
    cluster clu;
    plan_options search;      /* as searched (gpus, global_batch, framework filled in) */
    plan_result *res;         /* the search (owned; about 0.5 MB) */
    const plan_entry *best;   /* res->top[0], or NULL when nothing fits */
    int have_cmp;             /* --compare simulated */
    plan_entry cmp;           /* its layout and result */
    int n_splits;             /* PLAN_SPLIT_ROWS with --splits and a best layout, else 0 */
    plan_split_row splits[PLAN_SPLIT_ROWS];
    int n_sched;              /* PLAN_SCHED_ROWS with schedules and a best layout, else 0 */
    plan_sched_row sched[PLAN_SCHED_ROWS];
} plan_run_result;

/* Run the plan o into *out (free with plan_run_free, also after a failure).
 * Bad input (the GPU count, no global batch, a --compare that does not
 * parse, a trace file that cannot be opened) is PL_ERR_INVALID or
 * PL_ERR_IO with one line in msg; the loaders' and the search's statuses
 * and messages otherwise (PL_ERR_UNSUPPORTED when the layout simulator is
 * not built in). Nothing fitting is PL_OK with best NULL. */
pl_status plan_run(const plan_run_options *o, plan_run_result *out, char *msg, size_t len);

void plan_run_free(plan_run_result *r);

/* placer plan --db: the profile's pipelines. o's fixed dimensions other
 * than pp and mbs are PL_ERR_INVALID (a profile has only pipelines); a
 * fixed mbs must divide the profile's batch. *out as plan_profile_search
 * fills it (free with plan_profile_result_free). */
pl_status plan_profile_run(const char *db, const char *config, const plan_options *o, plan_profile_result *out,
                           char *msg, size_t len);

#endif
