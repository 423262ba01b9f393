/*
 * sides.h: who competes in a head-to-head confirmation. The candidates of
 * each side come from the placers, evaluated on the same problem
 * (schedule, cap, simulator parameters) as the confirmation will run:
 *
 *   rl      the RL shortlist of a stored run: the top-k distinct sampled
 *           placements and the final favourite (greedy decode), restored
 *           from the run's latest checkpoint; without a checkpoint, the
 *           top-k distinct non-OOM samples of the run
 *   single  every device alone
 *   human   every human split and device assignment
 *   dp      the best candidate of the DP over contiguous partitions
 *   search  the exhaustive optimum over co-location groups when the space
 *           allows, else the best of simulated annealing
 * The dp and search winners come with every cyclic renaming of their
 * devices (d -> d + k mod n), as single and human try every GPU.
 */
#ifndef PLACER_CALIB_SIDES_H
#define PLACER_CALIB_SIDES_H

#include <stdint.h>

#include "calib_db.h"
#include "confirm.h"
#include "schedule.h"
#include "sim.h"
#include "status.h"
#include "store.h"

typedef struct {
    int64_t run_id;      /* RL run (0 = no RL side) */
    int top_k;           /* RL candidates taken from samples when there is no checkpoint (5) */
    int single, human;   /* include these sides (1, 1) */
    int dp, search;      /* include the DP and the search winners (1, 1) */
    int threads;         /* evaluator threads, 0 = all cores */
    uint64_t seed;       /* annealing, when exhaustive search is too big */
} calib_sides_options;

void calib_sides_options_default(calib_sides_options *o);

typedef struct {
    int rl_from_checkpoint;  /* 1: shortlist restored from the run's checkpoint */
    int rl_update;           /* checkpoint's update, -1 when none */
    int n_added[8];          /* candidates added per side, in the order rl, single, human, dp, search */
    char search_method[16];  /* "exhaustive" or "anneal" */
} calib_sides_info;

/* Add the sides' candidates of model m under (s, mem_cap, prm) to c.
 * PL_ERR_NOT_FOUND when the run does not exist or has no usable sample. */
pl_status calib_sides_add(calib_confirm *c, profile_db *db, const calib_model *m, const schedule *s, int64_t mem_cap,
                          const sim_params *prm, const calib_sides_options *o, calib_sides_info *info, char *msg,
                          size_t len);

#endif
