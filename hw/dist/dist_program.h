/*
 * dist_program.h: a program as one rank of tensor- and data-parallel
 * process groups. The caller describes the groups (dist_parallel) and puts
 * dist_parallel_hooks' answer into hw_program_opts.parallel; the executor
 * then calls the hooks of hw/exec/parallel.h, which this file's
 * dist_program.c fills: the groups' checks, their collectives on each used
 * device, the tensor-parallel node calls (dist_tp.h), the data-parallel
 * buckets and updates (dist_dp.h), and the group's loss and times.
 *
 * Why hooks: the executor (hw/exec) must not know the groups' code, since
 * that code drives the executor (dist_step.c runs programs); the lanes of
 * hw/ run one way, kernels <- exec <- dist.
 */
#ifndef PLACER_HW_DIST_PROGRAM_H
#define PLACER_HW_DIST_PROGRAM_H

#include <stdint.h>

#include "dist_group.h"
#include "hw.h"

typedef struct {
    hw_parallel hooks;   /* first: what dist_parallel_hooks returns (the hooks recover the
                            rest from it) */
    dist_group *dp;      /* or NULL. Data parallelism over processes (dist_group.h; CUDA:
                            dist_device.h): this process is one replica of the program
                            and the graph's batch is its slice of the global batch (each
                            rank the same size). Before AdamW, each device's gradients are
                            summed over the group in rank order and divided by its size;
                            the loss scales by 1 / (slice * T) (nodes.h), so the mean of
                            the slices' gradients is the full batch's. Steps report the
                            group's mean loss and its largest step and wall times. Every
                            rank must create the same program and step it in lockstep;
                            the program issues from one thread and captures no graph.
                            Borrowed: must outlive the program. */
    dist_group *tp;      /* or NULL. Tensor parallelism over processes (dist_tp.h; any
                            precision): this process is one tp rank; the attention heads,
                            MLP columns and vocabulary rows of the head are split over the
                            group (hw.h's rules). Every rank gets the whole batch and
                            creates the same program. With dp as well, tp groups the ranks
                            of one replica and dp the same tp rank of every replica. The
                            program issues from one thread and captures no graph (every
                            rank must call the collectives in the same order). Borrowed:
                            must outlive the program. */
    int seq_parallel;    /* with tp: sequence parallelism (dist_tp.h) */
    int zero;            /* with dp: 0, or 1 for ZeRO-1 (dist_dp.h): each rank keeps AdamW's
                            m and v for its 1/dp shard of every device's flat parameter
                            buffer, the gradients are reduce-scattered, the update runs on
                            the shard and the parameters are all-gathered after it
                            (static_bytes shrinks by the moments' share, and grows by the
                            update's dp x shard buffer where the collectives run on device
                            buffers: CUDA). Same bits as zero 0 on the sockets transport;
                            in bf16 the weight copy is remade from the gathered weights.
                            Without dp (or dp of 1) a no-op. hw_program_get_grads then
                            holds the replicas' mean gradient only in this rank's shard
                            (the rest is the rank's own, as reduce-scatter leaves it).
                            Outside 0..1 the program's creation fails. */
    int64_t bucket_bytes; /* with dp and zero 0: all-reduce the gradients in buckets of at
                            least this many bytes (closed at node boundaries), last
                            parameters first, each issued once backward has finished its
                            nodes (PyTorch DDP's order); 0: 25 MiB, DDP's default. The
                            all-reduces overlap the rest of backward (a comm thread on host
                            copies, or NCCL's comm stream) and are waited for at the
                            device's AdamW, same bits; PLACER_DP_OVERLAP=0 makes each
                            synchronous (dist_dp.h). Negative: creation fails. */
} dist_parallel;

/* The hooks for hw_program_opts.parallel: x's own (x->hooks, filled here),
 * never NULL. With neither group the program runs as one process (x's
 * options are still checked: zero, bucket_bytes); with either, a schedule
 * that splits the backward is refused. x is borrowed by every program made
 * with it. */
const hw_parallel *dist_parallel_hooks(dist_parallel *x);

#endif
