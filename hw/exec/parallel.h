/*
 * parallel.h: the hooks through which process groups (tensor and data
 * parallelism across processes) take part in a program, so that the
 * executor runs a rank of a parallel job without knowing how the groups
 * talk. hw/exec calls these hooks at fixed points of a program's life;
 * hw/dist fills them (dist_program.h: dist_parallel_hooks), and only hw/dist
 * opens what they carry. The lanes run one way: dist drives exec, exec
 * never names dist.
 *
 * The points, in order:
 *   describe    program creation, after the placement and the schedule are
 *               checked: what groups there are (hw_split.groups), for the
 *               schedule checks that come next. Never fails.
 *   check       after the graph is checked: whether the backend and the
 *               model can be split so (tp divides the heads ...), and the
 *               rest of hw_split: ZeRO-1, buckets, where collectives run.
 *               The program is compiled from the split.
 *   attach      once the device memory is allocated, and only for a split
 *               with collectives (hw_split_active): the provider's state for
 *               this program (its collectives on each used device, host
 *               staging). detach frees it when the program is destroyed (or
 *               its creation fails after attach).
 *   node_call   every forward and backward node call of a tp rank
 *               (hw_split.tp_size > 1) instead of the backend's node_forward
 *               / node_backward.
 *   backward_issued  after each backward node call is issued.
 *   bucket      each HI_DP_REDUCE instruction: a data-parallel bucket of
 *               device d's final gradients [off, off + n) (floats).
 *   update      each HI_ADAMW instruction: device d's gradients made the
 *               replicas' and ranks' (whatever the split needs) and the
 *               update run, plain or ZeRO-1; the plain update is
 *               hw_program_adamw (program_internal.h).
 *   step_end    after a step's instructions are issued, whatever happened:
 *               nothing of the step may stay in flight after it.
 *   step_result after a successful step: the group's loss and slowest times
 *               in r.
 *   transport   hw_program_collectives' answer.
 * Every hook that returns a status writes one line into msg on failure; the
 * step or the creation then fails with it. hooks == NULL everywhere means a
 * program of one process.
 */
#ifndef PLACER_HW_PARALLEL_H
#define PLACER_HW_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "graph.h"
#include "status.h"

struct hw_program;

/* What a program's groups split, as the compiler and the executor need it. */
typedef struct {
    int groups;            /* a tp or a dp group was given (even of one rank) */
    int tp_size, tp_rank;  /* tensor parallelism: this rank of tp_size; 1, 0 without
                              (a tp group of one rank is none) */
    int seq_parallel;      /* with tp_size > 1: sequence parallelism */
    int dp_group;          /* a dp group was given (of one rank too: its buckets and
                              update then run over it) */
    int dp_size;           /* its ranks, 1 without */
    int zero;              /* 1: ZeRO-1 over the dp group (2 or more ranks), else 0 */
    int64_t bucket_floats; /* with a dp group and zero 0: the all-reduce buckets' size */
    int device_buffers;    /* the collectives run on device buffers: ZeRO-1's update
                              needs a buffer in the device's arena */
} hw_split;

/* The split of one process: no groups. */
static inline hw_split hw_split_none(void) {
    hw_split s = {0, 1, 0, 0, 0, 1, 0, 0, 0};
    return s;
}

/* Whether a split has collectives to run (a dp group, or a tp group of two
 * or more ranks): the program then attaches the hooks' state, issues from
 * one host thread and captures no graph. */
static inline int hw_split_active(const hw_split *s) { return s->dp_group || s->tp_size > 1; }

/* ZeRO-1's shard of a flat buffer of n floats over dp ranks: ceil(n / dp)
 * (the moments' size on each rank; the last shard padded). */
static inline int64_t hw_dp_shard_floats(int64_t n, int dp) { return dp > 1 ? (n + dp - 1) / dp : n; }

typedef struct hw_parallel hw_parallel;
/* The provider's state for one program (attach). Opaque here. */
typedef struct hw_parallel_state hw_parallel_state;

typedef struct {
    void (*describe)(const hw_parallel *par, hw_split *out);
    pl_status (*check)(const hw_parallel *par, const hw_backend *be, const graph *g, int micro_batch, int bf16,
                       hw_split *split, char *msg, size_t len);
    pl_status (*attach)(const hw_parallel *par, struct hw_program *p, hw_parallel_state **out, char *msg,
                        size_t len);
    void (*detach)(hw_parallel_state *s); /* accepts NULL */
    pl_status (*node_call)(hw_parallel_state *s, struct hw_program *p, int d, int backward, const hw_node_call *c,
                           char *msg, size_t len);
    void (*backward_issued)(hw_parallel_state *s, struct hw_program *p);
    pl_status (*bucket)(hw_parallel_state *s, struct hw_program *p, int d, int64_t off, int64_t n, char *msg,
                        size_t len);
    pl_status (*update)(hw_parallel_state *s, struct hw_program *p, int d, char *msg, size_t len);
    pl_status (*step_end)(hw_parallel_state *s, struct hw_program *p, char *msg, size_t len);
    pl_status (*step_result)(hw_parallel_state *s, struct hw_program *p, double *loss, double *step_us,
                             double *wall_us, char *msg, size_t len);
    const char *(*transport)(const hw_parallel_state *s, const struct hw_program *p);
} hw_parallel_ops;

/* What hw_program_opts.parallel points at: the first member of the
 * provider's own description of the groups (dist_program.h), which the
 * hooks recover from it. Borrowed by the program: it must outlive it. */
struct hw_parallel {
    const hw_parallel_ops *ops;
};

#endif
