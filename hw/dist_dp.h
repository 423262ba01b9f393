/*
 * dist_dp.h: which part of the global batch a data-parallel rank runs
 * (issue 17, the CPU path). The rank grid is core/layout.h's: a layout with
 * dp = N (tp = cp = pp = 1) and the replica index is the rank's DP
 * coordinate (layout_rank_coords), never rank arithmetic of our own.
 */
#ifndef PLACER_HW_DIST_DP_H
#define PLACER_HW_DIST_DP_H

#include <stddef.h>

#include "status.h"

/* Rank `rank` of dp replicas over a global batch of global_batch samples:
 * *first gets its first sample, *count its samples (global_batch / dp).
 * PL_ERR_INVALID when dp does not divide the batch or rank is out of
 * [0, dp), or when the layout's DP group of the rank is not the dp ranks
 * (it is for a pure-DP grid; the check guards the contract). */
pl_status hw_dp_slice(int dp, int rank, int global_batch, int *first, int *count, char *msg, size_t len);

#endif
