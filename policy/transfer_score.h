/*
 * transfer_score.h: placements from another machine's database scored on
 * this one: `placer search --from FILE --run ID | --placement P`.
 *
 * The source database holds the machine S (its profile) and the runs
 * trained on it. For each run, its shortlist (transfer_run_shortlist: the
 * top k distinct placements by S's prediction) is read against S's
 * problem (the run's graph, grouping, schedule and cap, from its stored
 * arguments); for each placement given as text, against S's profile of
 * this session's graph and schedule. Each is carried to this machine T by
 * the device map (transfer.h) and simulated on T's problem: the session's
 * graph, schedule, cap and simulator parameters. The rows are labelled
 * "run R top i" and "placement j".
 *
 * A run must be for T's graph (same config key), schedule and micro-batch
 * count; its grouping may differ (placements are per node).
 */
#ifndef PLACER_POLICY_TRANSFER_SCORE_H
#define PLACER_POLICY_TRANSFER_SCORE_H

#include <stddef.h>
#include <stdint.h>

#include "search.h"
#include "session.h"
#include "transfer.h"

#define TRANSFER_MAX_SOURCES 16

typedef struct {
    const char *src_path;            /* source database (required) */
    const int64_t *runs;             /* runs to score (n_runs, may be 0) */
    int n_runs;
    const char *const *placements;   /* node placements in S's device indices (n_placements, may be 0) */
    int n_placements;
    transfer_map map;                /* speed (default) or rank */
    int top_k;                       /* shortlist per run (>= 1) */
    int threads;                     /* simulator threads of the source session (0: all cores) */
} transfer_score_options;

/* Where a scored row came from. */
typedef struct {
    int source;                      /* index: runs first (0..n_runs-1), then placements */
    int64_t run;                     /* its run id, 0 for a placement */
    int n_src;                       /* S's devices */
    int map[SIM_MAX_DEVICES];        /* S's device d -> T's map[d] (-1: unused) */
    double src_step_us;              /* S's predicted step (NAN when unknown) */
    int src_oom;                     /* 1 when it ran out of memory on S */
} transfer_origin;

typedef struct {
    char machine[64];                /* S's machine name */
    int n_src_devices;               /* S's devices */
    policy_cands *rows;              /* scored on T, in order: each run's shortlist, then the placements */
    transfer_origin *origin;         /* rows->n entries */
} transfer_scores;

/* Score o's runs and placements on dst (see the file comment). Errors, one
 * line each: PL_ERR_NOT_FOUND (missing file or run, or a run with no usable
 * sample), PL_ERR_INVALID (a run for another graph or schedule, a
 * placement that does not parse on S, a map that cannot be made),
 * PL_ERR_NOT_SQLITE and the store's. On success *out is filled
 * (transfer_scores_free). */
pl_status transfer_score(const transfer_score_options *o, policy_session *dst, transfer_scores *out, char *msg,
                         size_t len);
void transfer_scores_free(transfer_scores *s);

/* Keep the scored rows in the database at db_path (this machine's) as a
 * run of method "transfer" with args (its provenance, free text): one
 * sample per row (update 0), its placement here and its predicted step,
 * peak and verdict here, so that `placer confirm --run` times them on
 * this machine's GPUs (confirm takes a run's top placements from its
 * samples when it has no checkpoint). *run_id gets the new run. Errors
 * from the store, one line. */
pl_status transfer_scores_record(const char *db_path, const transfer_scores *s, const char *args, int64_t *run_id,
                                 char *msg, size_t len);

#endif
