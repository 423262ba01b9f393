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
 *           hw_program_opts.bucket_bytes (25 MiB by default, PyTorch DDP's;
 *           closed at node boundaries), last parameters first, each
 *           divided by dp; AdamW over all P. The program issues a bucket as
 *           soon as backward has finished every node in it (its last
 *           micro-batch), between the device's remaining backward calls,
 *           and the rest at the device's tail. The host path (CPU
 *           backend, CUDA host staging) overlaps them with the rest of
 *           backward on a comm thread (below, "overlap"); over NCCL each
 *           goes through hw/dist/dist_device.h on the compute stream, waited
 *           for (bounded) before backward goes on. Bucket size and overlap
 *           do not change the bits (the sum is elementwise).
 *   zero 1  the buffer is cut into dp equal shards of S = ceil(P / dp)
 *           floats (the last padded with zeros); the gradients are
 *           reduce-scattered, rank r keeps shard r, divides it by dp and
 *           runs AdamW on it with m and v of S floats (hence static_bytes
 *           smaller by 2 (P - S) floats a device); the updated shards are
 *           all-gathered into every rank's params. On the sockets
 *           transport the reduce-scatter is bit for bit the all-reduce's
 *           slice and AdamW is elementwise, so zero 1 gives zero 0's bits.
 * On CUDA (the program's device collectives, dist_device.h) ZeRO-1 runs on
 * device buffers: a device scratch of dp S floats (outside the program's
 * arena) takes the padded gradients for the reduce-scatter and the shards
 * for the all-gather; with host staging the bits are the CPU path's.
 * Failure: a collective's status and one line, the program's step fails.
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

/* ZeRO-1's shard of a flat buffer: hw_dp_shard_floats (hw/exec/parallel.h). */

/* Check the options zero and bucket_bytes of a program with dp group dp (or
 * NULL) (bf16: the engine runs bf16): *zero_out gets
 * 1 for ZeRO-1 over a dp group of 2 or more, else 0; *bucket_floats the
 * bucket in floats. PL_ERR_INVALID for zero outside 0..1 or a negative
 * bucket. Every precision: in bf16 ZeRO-1 updates the shard's fp32
 * weights and then remakes the whole bf16 copy from the gathered weights
 * (through host memory, one round trip a step), so it gives zero 0's bits. */
pl_status hw_dp_check_opts(int zero, int64_t bucket_bytes, dist_group *dp, int bf16, int *zero_out,
                           int64_t *bucket_floats, char *msg, size_t len);

struct hw_program;
/* The AdamW of device d of program p (s: its groups' state), with ZeRO-1's
 * reduce-scatter and all-gather around it (above). For the update hook
 * (dist_program.c) at an HI_ADAMW. Memory: on the host
 * path ZeRO-1 stages through the groups' host buffer (s->dp_buf); with the
 * collectives on device buffers (dist_device_wanted: CUDA, or
 * PLACER_TEST_DEVICE_COLLECTIVES=1) it needs a device buffer of dp x S
 * floats (S the shard, hw_dp_shard_floats of the device's parameters),
 * which the program carves in the device's arena beside the moments, so
 * static_bytes and the peak count it and a cap refuses it at program
 * creation; nothing is allocated at step time. */
pl_status hw_dp_update(struct hw_program *p, hw_parallel_state *s, int d, char *msg, size_t len);
/* zero 0: the all-reduce (mean over dp) of device d's gradients [off, off +
 * n) (floats), one bucket. For the bucket hook at an HI_DP_REDUCE. */
pl_status hw_dp_reduce(struct hw_program *p, hw_parallel_state *s, int d, int64_t off, int64_t n, char *msg,
                       size_t len);

/* ---- overlap (zero 0, host path) ----
 * With overlap (the default; PLACER_DP_OVERLAP=0 gives the synchronous
 * buckets above) hw_dp_reduce only STARTS a bucket: it downloads the
 * bucket's final gradients into a host buffer of the program (every used
 * device's gradients, one region each) and queues it for the program's
 * communication thread, which runs the dp group's all-reduce and the
 * division by dp on it, buckets in issue order, while the main thread
 * goes on issuing backward. The device's AdamW (hw_dp_join, then
 * hw_dp_update) waits for the device's buckets and uploads them; hw_program_step drains the queue
 * after the step whatever happened (hw_dp_drain), so no collective is in
 * flight between steps. Same bits: the same rank-ordered sums and the
 * same division, on the same floats.
 * Why the comm thread may use the dp group while the main thread runs the
 * tp group's collectives: they are different groups (no shared state in
 * dist_group.c), and on sockets a tp and a dp sub-group share no pair of
 * ranks (a tp group and a dp group meet in one rank only), so they use
 * different sockets; each group is used by one thread at a time (the dp
 * group by the comm thread from a step's first bucket to the drain, by the
 * main thread only after it: the loss's all-reduce). Under MPI the library
 * was initialised with MPI_THREAD_SERIALIZED only, so with a tp group over
 * MPI the buckets stay synchronous. Host staging (ranks sharing a GPU)
 * overlaps as the CPU backend does. Over NCCL (distinct GPUs; compile-only
 * so far) a bucket is an ncclAllReduce (ncclAvg) on the communicator's own
 * comm stream after an event of the compute stream
 * (dist_device_allreduce_start_f32); the join makes the compute stream
 * wait for the comm stream's last event and does the bounded wait
 * (ncclCommGetAsyncError polling, abort past the timeout) there.
 * ZeRO-1 is unchanged: its reduce-scatter runs at AdamW.
 * Failure: a bucket's failed all-reduce (a dead or silent peer: bounded by
 * the group's timeout) is kept with its line; later buckets are skipped;
 * the join at AdamW returns it, so the step fails with one line. */
typedef struct hw_dp_comm hw_dp_comm;
void hw_dp_comm_destroy(hw_dp_comm *c); /* joins the thread; accepts NULL */
/* The update hook at an HI_ADAMW, before anything else touches device d's gradients
 * (the sp sum of the replicated ones comes after the dp mean, as in the
 * synchronous order): wait for d's buckets, upload their means. Once per
 * step (a second call does nothing); PL_OK without a comm thread. A
 * bucket's failure: its status and line. */
pl_status hw_dp_join(struct hw_program *p, hw_parallel_state *s, int d, char *msg, size_t len);
/* The backward_issued hook: after each HI_BWD issued (for the test hook below). */
void hw_dp_note_bwd(hw_parallel_state *s);
/* The step_end hook: wait for every queued bucket; its first failure. */
pl_status hw_dp_drain(struct hw_program *p, hw_parallel_state *s, char *msg, size_t len);

/* The test hook: tickets of one counter (a total order of these events in
 * the last step on this rank, not times). With PLACER_TEST_DP_HOLD=1 the
 * comm thread holds bucket 0 until the main thread has issued the step's
 * last backward call or reached a join (a 2-device pipeline's last stage
 * updates before the first stage's backward ends), at most 30 s; on one
 * device a synchronous bucket could not get past that: issued0 < last_bwd
 * < start0 proves the main thread ran backward while a bucket was in the
 * comm thread's hands. */
typedef struct {
    int buckets;       /* buckets of the step through the comm thread */
    int64_t issued0;   /* bucket 0 queued */
    int64_t start0;    /* its all-reduce begun, */
    int64_t end0;      /* ended */
    int64_t last_bwd;  /* the last backward call issued */
    int64_t join;      /* the first AdamW's join */
    int held;          /* the hold: 1 it saw the last backward, 2 a join, -1 it timed out, 0 off */
} hw_dp_overlap_trace;
/* 1 and *t filled when p's buckets go through the comm thread, else 0. */
int hw_dp_overlap_get(const struct hw_program *p, hw_dp_overlap_trace *t);

#endif
