/*
 * confirm.h: the head-to-head confirmation protocol.
 *
 * Single timings on real GPUs are noisy, and the best of many noisy
 * timings is biased low (the winner's curse). So the protocol separates
 * choosing from measuring:
 *
 *   sides       groups of candidate placements: the RL shortlist, each
 *               single GPU, each human split, the DP or search winner...
 *   selection   R_s rounds (default 4). Each round times every candidate
 *               of every side once (warm-up, then k timed steps, keep the
 *               median), in an order shuffled afresh each round. Each side
 *               picks the candidate with the lowest median over its rounds.
 *               A candidate that ran out of memory in any round is OOM and
 *               is never picked.
 *   confirmation R_c fresh rounds (default 8) time only the picks, again
 *               in a shuffled order each round. Only these numbers are
 *               reported: per side the mean, sd and standard error of the
 *               round medians, and between sides the difference in
 *               standard errors (calib_welch).
 *
 * Every timing (selection and confirmation) is kept in memory and, when a
 * store is given, written as a measurement row at once (purpose
 * "confirm-select" or "confirm"), so a killed run keeps what it measured.
 * Shuffles come from one generator seeded by the config's seed: the same
 * seed gives the same order of timings.
 */
#ifndef PLACER_CALIB_CONFIRM_H
#define PLACER_CALIB_CONFIRM_H

#include <stdint.h>

#include "schedule.h"
#include "sim.h"
#include "stats.h"
#include "status.h"
#include "store.h"
#include "timer.h"

#define CALIB_NAME_LEN 16   /* side names: "rl", "single", "human", "dp", "search" */
#define CALIB_LABEL_LEN 64  /* candidate labels: "top1", "gpu0", "layers 0-2|3-5 on 1,0" */
#define CALIB_MAX_SIDES 16

typedef struct {
    int side;                   /* index into sides */
    char label[CALIB_LABEL_LEN];/* what this candidate is */
    int *placement;             /* n_nodes device indices, owned */
    double pred_us;             /* simulator prediction; NaN until calib_confirm_predict */
    int64_t pred_peak;          /* predicted largest per-device peak (bytes) */
    int pred_oom;               /* simulator's OOM verdict */
    double *select_us;          /* selection_rounds round medians (NaN = not timed or OOM) */
    int oom;                    /* 1 when any selection round ran out of memory */
    double select_median;       /* median of select_us; NaN when OOM */
    int64_t peak_bytes;         /* largest peak the timer reported for it */
} calib_candidate;

typedef struct {
    char name[CALIB_NAME_LEN];  /* side name */
    int n_cand;                 /* candidates on this side */
    int pick;                   /* chosen candidate (index into cands), -1 when all OOM */
    double *confirm_us;         /* confirm_rounds round medians of the pick */
    calib_summary summary;      /* over confirm_us only */
} calib_side;

typedef struct {
    int phase;                  /* 0 selection, 1 confirmation */
    int round;                  /* round within the phase */
    int order;                  /* position within the round's shuffled order */
    int cand;                   /* candidate index */
    double median_us;           /* median of the timed steps (NaN when OOM) */
    double spread_us;           /* sample sd of the timed steps */
    int64_t peak_bytes;         /* largest per-device peak */
    int oom;                    /* ran out of memory */
    int64_t measurement_id;     /* store row id, 0 when not stored */
} calib_timing;

typedef struct {
    schedule sched;             /* schedule every candidate runs under */
    int64_t mem_cap;            /* per-device byte cap, 0 = none */
    int selection_rounds;       /* R_s, >= 1 (default 4) */
    int confirm_rounds;         /* R_c, >= 2 (default 8) */
    int steps;                  /* timed steps per timing, >= 1 (default 10) */
    int warmup;                 /* untimed steps before each timing (default 2) */
    uint64_t seed;              /* shuffles */
    const char *graph_key;      /* for stored measurements; may be NULL when db is NULL */
    const char *label;          /* experiment label stored with each timing ("A"); may be NULL */
    int64_t run_id;             /* placer run the shortlist came from, 0 = none */
} calib_confirm_config;

/* Defaults: m=1 gpipe, no cap, 4 selection rounds, 8 confirmation rounds,
 * 10 timed steps after 2 warm-up steps, seed 1. */
void calib_confirm_config_default(calib_confirm_config *c);

typedef struct {
    int n_nodes;                /* placement length */
    int n_devices;              /* device indices are < n_devices */
    int n_sides;                /* sides in order of first appearance */
    calib_side sides[CALIB_MAX_SIDES];
    int n_cand, cap_cand;       /* candidates, allocated slots */
    calib_candidate *cands;     /* n_cand entries */
    int n_timings, cap_timings; /* timing log */
    calib_timing *timings;      /* every timing in the order it was made */
    int selection_rounds;       /* as run (0 before calib_confirm_run) */
    int confirm_rounds;         /* as run */
} calib_confirm;

/* An empty protocol for placements of n_nodes entries over n_devices.
 * *out owns it (calib_confirm_destroy). PL_ERR_INVALID / PL_ERR_NOMEM. */
pl_status calib_confirm_create(int n_nodes, int n_devices, calib_confirm **out);

/* Free. Accepts NULL. */
void calib_confirm_destroy(calib_confirm *c);

/* Add a candidate placement (copied) to side `side` (created on first use,
 * at most CALIB_MAX_SIDES sides). A placement already on that side is not
 * added again: *added (may be NULL) says whether it was. label may be NULL.
 * PL_ERR_PLACEMENT_RANGE for a bad device index, PL_ERR_INVALID for too
 * many sides or a long name, PL_ERR_NOMEM. Must precede calib_confirm_run. */
pl_status calib_confirm_add(calib_confirm *c, const char *side, const char *label, const int *placement,
                            int *added, char *msg, size_t len);

/* Fill every candidate's pred_us / pred_peak / pred_oom with the simulator
 * (ctx built for the same graph, cap applied on every device when > 0,
 * prm NULL = neutral). */
pl_status calib_confirm_predict(calib_confirm *c, sim_ctx *ctx, const schedule *s, int64_t mem_cap,
                                const sim_params *prm, char *msg, size_t len);

/* Run selection then confirmation with timer t under cfg. When db is not
 * NULL every timing is stored at once (cfg->graph_key required). Results
 * land in c (picks, summaries, the timing log). A timer failure other than
 * OOM stops the run and is returned; timings made so far stay stored.
 * May be called once per object (PL_ERR_INVALID the second time). */
pl_status calib_confirm_run(calib_confirm *c, const calib_timer *t, const calib_confirm_config *cfg,
                            profile_db *db, char *msg, size_t len);

/* Index of the side whose confirmed mean is lowest, or -1 when no side has
 * a pick. */
int calib_confirm_winner(const calib_confirm *c);

#endif
