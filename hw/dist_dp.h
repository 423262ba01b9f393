/*
 * dist_dp.h: data parallelism across processes (issue 17):
 * which part of the global batch a rank runs, and the gradient sync and
 * AdamW update of a replica, plain or ZeRO-1.
 *
 * The rank grid is core/layout.h's: a layout with dp = N (tp = cp = pp =
 * 1) and the replica index is the rank's DP coordinate
 * (layout_rank_coords), never rank arithmetic of our own.
 *
 * The update of one device's flat buffers (P floats: params, grads; m and
 * v), at the device's AdamW instruction, i.e. once backward has finished
 * every node placed on it:
 *   zero 0  the gradients all-reduced over dp in buckets of at least
 *           hw_plan_opts.bucket_bytes (25 MiB by default, PyTorch DDP's;
 *           closed at node boundaries), last parameters first, each
 *           divided by dp; AdamW over all P. The plan issues a bucket as
 *           soon as backward has finished every node in it (its last
 *           micro-batch), between the device's remaining backward calls,
 *           and the rest at the device's tail. On the CPU backend that is
 *           only an order: the issuing thread waits for each all-reduce,
 *           there is no second stream to overlap it with. On CUDA the
 *           buckets go through hw/dist_device.h on the device's compute
 *           stream in the same order, each waited for (bounded waits
 *           first; no overlap yet on either transport). Bucket size does not change
 *           the bits (the sum is elementwise).
 *   zero 1  the buffer is cut into dp equal shards of S = ceil(P / dp)
 *           floats (the last padded with zeros); the gradients are
 *           reduce-scattered, rank r keeps shard r, divides it by dp and
 *           runs AdamW on it with m and v of S floats (hence static_bytes
 *           smaller by 2 (P - S) floats a device); the updated shards are
 *           all-gathered into every rank's params. On the sockets
 *           transport the reduce-scatter is bit for bit the all-reduce's
 *           slice and AdamW is elementwise, so zero 1 gives zero 0's bits.
 * On CUDA (the plan's device collectives, dist_device.h) ZeRO-1 runs on
 * device buffers: a device scratch of dp S floats (outside the plan's
 * arena) takes the padded gradients for the reduce-scatter and the shards
 * for the all-gather; with host staging the bits are the CPU path's.
 * Failure: a collective's status and one line, the plan's step fails.
 */
#ifndef PLACER_HW_DIST_DP_H
#define PLACER_HW_DIST_DP_H

#include <stddef.h>
#include <stdint.h>

#include "dist_group.h"
#include "hw.h"
#include "status.h"

#define HW_DP_BUCKET_DEFAULT (25LL << 20) /* bytes, PyTorch DDP's bucket_cap_mb = 25 */

/* Rank `rank` of dp replicas over a global batch of global_batch samples:
 * *first gets its first sample, *count its samples (global_batch / dp).
 * PL_ERR_INVALID when dp does not divide the batch or rank is out of
 * [0, dp), or when the layout's DP group of the rank is not the dp ranks
 * (it is for a pure-DP grid; the check guards the contract). */
pl_status hw_dp_slice(int dp, int rank, int global_batch, int *first, int *count, char *msg, size_t len);

/* ZeRO-1's shard of a flat buffer of n floats over dp ranks: ceil(n / dp). */
int64_t hw_dp_shard_floats(int64_t n, int dp);

/* Check o's zero and bucket_bytes (bf16: the engine runs bf16): *zero gets
 * 1 for ZeRO-1 over a dp group of 2 or more, else 0; *bucket_floats the
 * bucket in floats. PL_ERR_INVALID for zero outside 0..1 or a negative
 * bucket, PL_ERR_UNSUPPORTED for zero 1 in bf16 (the bf16 weight copy of
 * the other ranks' shards is not gathered yet). */
pl_status hw_dp_check_opts(const hw_plan_opts *o, int bf16, int *zero, int64_t *bucket_floats, char *msg,
                           size_t len);

struct hw_plan;
/* The AdamW of device d of plan p, with ZeRO-1's reduce-scatter and
 * all-gather around it (above). For exec.c's HI_ADAMW. */
pl_status hw_dp_update(struct hw_plan *p, int d, char *msg, size_t len);
/* zero 0: the all-reduce (mean over dp) of device d's gradients [off, off +
 * n) (floats), one bucket. For exec.c's HI_DP_REDUCE. */
pl_status hw_dp_reduce(struct hw_plan *p, int d, int64_t off, int64_t n, char *msg, size_t len);

#endif
