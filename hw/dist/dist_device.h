/*
 * dist_device.h: collectives over a process group (hw/dist/dist_group.h) on
 * buffers in one logical device's memory (issue 17: the CUDA path of tensor
 * and data parallelism). One API, two transports, chosen when the
 * collectives are made:
 *
 *   nccl          every rank of the group drives its own GPU (checked: the
 *                 ranks exchange their GPUs' UUIDs over the group; any two
 *                 equal means shared). Rank 0 makes the ncclUniqueId, the
 *                 group broadcasts it (sockets or MPI, whichever the group
 *                 runs on), every rank calls ncclCommInitRankConfig on a
 *                 non-blocking communicator. Each dist_device is its own
 *                 communicator: the tp and dp sub-groups each get theirs
 *                 (their own ids, broadcast over the sub-group). The data
 *                 moves on the device's compute stream. Bounded: after each
 *                 call the host polls ncclCommGetAsyncError and the stream
 *                 until the collective is done; past the group's timeout it
 *                 aborts the communicator (ncclCommAbort) and fails with one
 *                 line, so a dead rank never hangs the others. That wait
 *                 makes every collective synchronous with the host, except
 *                 the started all-reduces below (the dp buckets' overlap),
 *                 whose wait moves to dist_device_finish.
 *                 NCCL refuses two ranks on one GPU, so on the one-GPU
 *                 machine this branch does not run.
 *   host staging  ranks share a GPU (several processes on GPU 0, the
 *                 one-H200 machine), the backend is the CPU one, NCCL was
 *                 not built, or PLACER_DIST_DEVICE=staging is set: the
 *                 buffer is downloaded into host memory (the backend's
 *                 synchronous download, which waits for the device's
 *                 streams), the group's CPU collective runs on it
 *                 (dist_group.h: sockets or MPI, rank-ordered sums), and the
 *                 result is uploaded. Slow (two copies and the host
 *                 collective per call) and exact: the same bits as the CPU
 *                 backend's collectives, which is what lets one GPU check
 *                 the math of a layout.
 *
 * Every rank of the group must make the same calls in the same order with
 * the same counts (the group's rule). Buffers are device pointers of
 * logical device `dev` of backend `be`. Status codes: PL_OK, the group's
 * failure (PL_ERR_INTERRUPTED with "rank R vanished ..." or "no word from
 * ..."), PL_ERR_CUDA, PL_ERR_NOMEM, each with one line in msg.
 */
#ifndef PLACER_HW_DIST_DEVICE_H
#define PLACER_HW_DIST_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "dist_group.h"
#include "placer_config.h"
#include "status.h"

typedef struct dist_device dist_device;

/* The collectives of group g (borrowed: it must outlive the result) for
 * logical device dev of backend be (borrowed). Collective over g (the
 * transport choice is made on identical data on every rank, so every rank
 * picks the same one). *out NULL on failure. */
pl_status dist_device_create(dist_group *g, hw_backend *be, int dev, dist_device **out, char *msg, size_t len);
/* Free (the NCCL communicator, the staging buffer, the scratch). Accepts NULL. */
void dist_device_destroy(dist_device *x);

/* Whether a program on backend be runs its dp and tp collectives on device
 * buffers (through a dist_device per used device and group): 1 for the
 * CUDA backend, or any backend with PLACER_TEST_DEVICE_COLLECTIVES=1 (tests:
 * the CPU backend through host staging), else 0 (the host path, staged
 * through the groups' host buffer, dist_program_state.h). The check hook
 * (dist_program.c) asks it so that the program's compiler knows whether
 * ZeRO-1's device buffer needs a place in the arena; the attach hook makes
 * the same choice when it creates the collectives. */
int dist_device_wanted(const hw_backend *be);

/* "nccl" or "host staging". Static. */
const char *dist_device_transport(const dist_device *x);
int dist_device_rank(const dist_device *x);
int dist_device_size(const dist_device *x);

/* In place over n floats of buf; with mean (DIST_SUM only) the sum is
 * divided by the group's size (staging: on the host, as dist_dp.c did;
 * NCCL: ncclAvg). */
pl_status dist_device_allreduce_f32(dist_device *x, float *buf, int64_t n, dist_op op, int mean, char *msg,
                                    size_t len);
/* in holds size * n floats; out (n floats) gets the sum of the ranks'
 * shard `rank` (divided by size with mean). out may be in + rank n. */
pl_status dist_device_reduce_scatter_f32(dist_device *x, const float *in, float *out, int64_t n, int mean,
                                         char *msg, size_t len);
/* in holds this rank's n floats; out gets size * n floats in rank order.
 * in may be out + rank n. */
pl_status dist_device_allgather_f32(dist_device *x, const float *in, float *out, int64_t n, char *msg, size_t len);

/* Overlap (dist_dp.h): with the NCCL transport, START an all-reduce (mean
 * when asked) of n floats of buf in place, ordered after the work queued on
 * the device's compute stream so far; *started 1. The buffer must not be
 * touched until dist_device_finish. With host staging nothing is done and
 * *started is 0 (the caller stages the bucket itself). */
pl_status dist_device_allreduce_start_f32(dist_device *x, float *buf, int64_t n, int mean, int *started, char *msg,
                                          size_t len);
/* Wait for every started all-reduce: the compute stream waits for them (what
 * it runs next sees the results) and the host waits, bounded by the group's
 * timeout (then the communicator is aborted and this fails with one line).
 * PL_OK when none was started. */
pl_status dist_device_finish(dist_device *x, char *msg, size_t len);

/* A device scratch of at least bytes bytes owned by x (grown, never
 * shrunk; its contents are not kept across a growth). Outside the program's
 * arena (hw_program_peak_bytes does not count it), so the engine no longer
 * uses it: ZeRO-1's update runs on a buffer the program carves in its arena
 * (hw_program_dev.off_zero1, dist_dp.h). Kept for other callers. */
pl_status dist_device_scratch(dist_device *x, int64_t bytes, void **ptr, char *msg, size_t len);

/* ---- the NCCL transport (hw/dist/dist_nccl.cu; CUDA builds only) ---- */
#if PLACER_HAVE_CUDA
/* Whether this process should use NCCL for group g on logical device dev:
 * *use 1 when be is the CUDA backend, every rank's GPU UUID differs and
 * PLACER_DIST_DEVICE is not "staging". Collective over g. */
pl_status hw_nccl_wanted(dist_group *g, hw_backend *be, int dev, int *use, char *msg, size_t len);
/* A communicator over g (rank 0's id broadcast over g), bounded by timeout_s. */
pl_status hw_nccl_create(dist_group *g, hw_backend *be, int dev, double timeout_s, void **comm, char *msg, size_t len);
void hw_nccl_destroy(void *comm);
/* kind 0 all-reduce (in == out), 1 reduce-scatter (out n floats), 2 all-gather (in n floats) */
pl_status hw_nccl_collective(void *comm, int kind, const float *in, float *out, int64_t n, dist_op op, int mean,
                             char *msg, size_t len);
/* an all-reduce on the communicator's comm stream after the compute stream's work so far */
pl_status hw_nccl_start(void *comm, float *buf, int64_t n, int mean, char *msg, size_t len);
/* the compute stream waits for the started ones; the host waits, bounded */
pl_status hw_nccl_finish(void *comm, char *msg, size_t len);
#endif

#endif
