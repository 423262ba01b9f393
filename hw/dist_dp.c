/* dist_dp.c: the batch slice of a data-parallel rank (dist_dp.h). */
#include "dist_dp.h"

#include <stdint.h>

#include "../core/layout.h"

pl_status hw_dp_slice(int dp, int rank, int global_batch, int *first, int *count, char *msg, size_t len) {
    if (dp < 1 || dp > 1 << 20 || global_batch < 1 || global_batch % dp != 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "dp = %d must divide the batch of %d samples", dp, global_batch);
    if (rank < 0 || rank >= dp) return pl_fail(msg, len, PL_ERR_INVALID, "rank %d is not in [0, %d)", rank, dp);
    layout l;
    layout_default(&l);
    l.dp = dp;
    l.global_batch = global_batch;
    l.micro_batch = global_batch / dp;
    layout_coords c = layout_rank_coords(&l, rank);
    int64_t group[1 << 10];
    if (dp > (int)(sizeof group / sizeof group[0]))
        return pl_fail(msg, len, PL_ERR_INVALID, "dp = %d is more replicas than supported", dp);
    int n = layout_group_ranks(&l, rank, LAYOUT_DIM_DP, group);
    if (n != dp) return pl_fail(msg, len, PL_ERR_INVALID, "the DP group of rank %d has %d ranks, not %d", rank, n, dp);
    for (int i = 0; i < n; i++)
        if (group[i] != i)
            return pl_fail(msg, len, PL_ERR_INVALID, "the DP group of rank %d is not ranks 0..%d", rank, dp - 1);
    const int idx = c.c[LAYOUT_DIM_DP];
    *count = global_batch / dp;
    *first = idx * *count;
    return PL_OK;
}
