/*
 * dist_program_state.h: what the hooks of a program's process groups
 * (dist_program.c) keep for one program: the groups, the collectives on
 * each used device, the host staging buffer and the data-parallel buckets'
 * overlap. Internal to hw/dist: the attach hook creates it, the other hooks
 * and dist_dp.c read and change it, detach frees it. hw/exec sees only the
 * opaque hw_parallel_state (parallel.h).
 */
#ifndef PLACER_HW_DIST_PROGRAM_STATE_H
#define PLACER_HW_DIST_PROGRAM_STATE_H

#include "dist_group.h"
#include "dist_tp.h"
#include "hw.h"

struct hw_dp_comm;
struct dist_device;

/* Created by the attach hook (dist_program.c), read and changed by the
 * other hooks and dist_dp.c, freed by detach. */
struct hw_parallel_state {
    dist_group *dp;            /* the dp group (dist_parallel.dp; borrowed) or NULL */
    hw_tp tp;                  /* tp.g NULL and size 1 without tensor parallelism (or a tp
                                  group of one rank); else the node calls go through dist_tp.c */
    float *dp_buf;             /* host staging of one device's gradients for the all-reduce
                                  (data parallelism, and the sp all-reduce of replicated ones);
                                  the largest device's param_floats + DIST_MAX_RANKS floats
                                  (ZeRO-1 pads to dp shards) */
    int dp_overlap;            /* 0 not decided yet (the first bucket), 1 the comm thread, 2 NCCL's
                                  comm stream, -1 synchronous (dist_dp.c) */
    struct hw_dp_comm *dp_comm; /* overlap: the comm thread and its host buffer (dist_dp.c), or NULL */
    struct dist_device *xd_tp[HW_MAX_DEVICES]; /* collectives on device buffers (dist_device.h: the
                                  CUDA backend, or a test's PLACER_TEST_DEVICE_COLLECTIVES=1): the tp
                                  group's on each used device, else NULL (host buffers) */
    struct dist_device *xd_dp[HW_MAX_DEVICES]; /* the dp group's, likewise */
};

#endif
