/*
 * dist_step.h: the one runner of timed training steps on the engine, in
 * this process or over the ranks of a tp x dp grid, one process per rank.
 * `placer step` (a placement, --procs, --tp, --layout) and `placer confirm
 * --layout` (calib/layout_confirm.h) both run their steps through it, so a
 * layout is timed the same way whichever command asks.
 *
 * Why here, in hw/dist/: the runner only composes the engine (hw/exec:
 * engine, program, batch, timing protocol) with the distribution layer
 * (launcher.h forks the ranks or joins mpirun's, dist_tp.h's rank grid
 * gives each rank its tp and dp groups, dist_dp.h its batch slice). It
 * needs nothing above hw (no profile, simulator or store), and both the
 * command line and calib/ sit above hw, so it belongs to the layer they
 * share rather than to either of them.
 *
 * One rank's work, in order (the in-process run is rank 0 of one, without
 * groups):
 *   1. the tp and dp groups of the grid, tp innermost (hw_tp_dp_groups;
 *      with tp 1 the launcher's group is the dp group) and the rank's
 *      replica's slice of the global batch (hw_dp_slice);
 *   2. the graph of the slice, the placement over n_dev logical devices;
 *   3. the engine (CPU reference backend, or CUDA on the job's GPUs; with
 *      gpu_per_rank, rank r, or under mpirun its rank on its host, adds
 *      r x n_dev to every ordinal), each device's cap (in process: the
 *      card's memory, or mem_cap);
 *   4. the program (placement, schedule, seed, AdamW, the groups, ZeRO-1,
 *      gradient buckets), the global batch made as one process makes it
 *      (hw_make_batch) of which the rank sets its rows;
 *   5. hw_program_time's protocol: warmup steps, then `steps` timed ones
 *      (over ranks: each step's time is the slowest rank's, the loss the
 *      ranks' mean); in process, then one traced step when asked.
 * Rank 0's figures come back to the caller: through shared memory from
 * forked ranks, directly under mpirun (rank 0's process holds them).
 */
#ifndef PLACER_HW_DIST_STEP_H
#define PLACER_HW_DIST_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "hw.h"
#include "schedule.h"
#include "status.h"

#define DIST_STEP_PLACEMENT_LEN 4096

typedef struct {
    gpt_config cfg;            /* the model and the global batch */
    const char *placement;     /* one logical device per graph node ("0,0,1,..."); NULL: all on device 0 */
    schedule sched;            /* a replica's: its micro-batches divide the replica's slice */
    int n_dev;                 /* logical devices per process, 1..HW_MAX_DEVICES */
    int cuda;                  /* 1: the CUDA backend on gpus; 0: the CPU reference backend */
    int gpus[HW_MAX_DEVICES];  /* with cuda: the GPU ordinal of each logical device (repeats share one) */
    int gpu_per_rank;          /* over ranks, with cuda: rank r adds r x n_dev to every ordinal */
    hw_precision prec;         /* HW_PREC_DEFAULT: the backend's (fp32 CPU, tf32 CUDA) */
    int strict_fp32;           /* hw_engine_opts.strict_fp32 */
    hw_issue_mode issue;       /* host issue of a process's devices */
    int graphs;                /* in process only: replay steps as captured CUDA graphs */
    const char *mem_cap;       /* in process only: one cap or one per device (pl_parse_mem_cap); NULL: the cards' */
    const char *trace_path;    /* in process only: after timing, one traced step as Chrome trace JSON; or NULL */
    uint64_t seed;             /* parameters and batch */
    double lr;                 /* AdamW's learning rate; <= 0: hw_adamw_default's */
    int warmup, steps;         /* hw_program_time's protocol (steps >= 1; the first 64 are kept) */
    int procs;                 /* 0: in this process, no groups; else the ranks (fork launcher, or mpirun's) */
    int tp, sp;                /* over ranks: tensor-parallel ranks of a replica (dividing procs), sequence parallel */
    int zero;                  /* over ranks: 1 shards AdamW's state over the dp ranks (ZeRO-1) */
    int64_t bucket_bytes;      /* over ranks, zero 0: the all-reduce's bucket size; 0: the default */
    int one_rank_group;        /* procs 1, tp 1: 1 gives the rank its dp group of one (the all-reduce path, as
                                  `placer step --procs 1`); 0 none (as one process runs, for a layout of one rank) */
    double timeout_s;          /* over ranks: a rank silent this long in a collective stops the run */
    int kill_rank, hang_rank;  /* tests: this rank dies (SIGKILL) / hangs after its first step; -1 off */
} dist_step_job;

/* What refused a job, for the caller's wording of the one line. */
typedef enum {
    DIST_STEP_FAILED_OTHER = 0, /* the message says it all */
    DIST_STEP_FAILED_PLACEMENT, /* placement_parse's message; n_nodes and the job's n_dev say the range */
    DIST_STEP_FAILED_CAP_COUNT, /* mem_cap has neither one cap nor one per device */
    DIST_STEP_FAILED_CAP        /* pl_parse_mem_cap's message */
} dist_step_failure;

typedef struct {
    int here;                  /* 1 in the process that holds rank 0's figures (the caller's, forked or in
                                  process; rank 0 under mpirun), 0 on mpirun's other ranks */
    dist_step_failure failed;  /* on an error: which part refused the job */
    int n_nodes;               /* the graph's nodes */
    char placement[DIST_STEP_PLACEMENT_LEN]; /* the placement run, formatted */
    int rank_batch;            /* rank 0's slice of the global batch */
    hw_timing t;               /* rank 0's timing */
    hw_precision prec;         /* the engine's resolved precision */
    int n_dev;                 /* logical devices of rank 0's engine */
    hw_device_info dev[HW_MAX_DEVICES]; /* rank 0's devices (name, physical ordinal) */
    int gpus[HW_MAX_DEVICES];  /* with cuda: rank 0's GPU ordinals */
    int64_t peak_bytes[HW_MAX_DEVICES]; /* each device's arena high-water mark, 0 unused */
    int64_t caps[HW_MAX_DEVICES];       /* the caps applied (in process; over ranks the cards') */
    hw_mem_report mem;         /* the program's memory; in process also on PL_ERR_DEVICE_OOM */
    int reorders;              /* hw_program_reorders */
    int graph_state;           /* hw_program_graph_state */
    char transport[16];        /* over ranks: the group's transport (dist_transport_name), else "" */
    char collectives[32];      /* hw_program_collectives */
} dist_step_result;

/* Defaults: one CPU device, all on device 0, m = 1 1f1b, seed 1, AdamW's
 * learning rate, 2 warm-up and 5 timed steps, in process, tp 1, a 30 s
 * timeout, no failure injection. cfg is left zeroed: the caller sets it. */
void dist_step_job_default(dist_step_job *j);

/* Run job j and fill *r (r->here says whether this process holds the
 * figures). A bad placement is refused before any rank starts
 * (r->failed = DIST_STEP_FAILED_PLACEMENT, a PL_ERR_PLACEMENT_* status).
 * In process: the engine's and program's errors as they come (on
 * PL_ERR_DEVICE_OOM r->mem says each device's need), a cap that will not
 * parse PL_ERR_INVALID (r->failed says which), PL_ERR_IO when the trace
 * cannot be written. Over ranks: PL_ERR_INTERRUPTED with the launcher's
 * one line when a rank failed (hw/dist/launcher.h; under mpirun the caller
 * must then exit non-zero at once), PL_ERR_INVALID for a job the grid
 * cannot take (tp not dividing procs, in-process-only options, mpirun
 * started another number of ranks). One line in msg on every error. */
pl_status dist_step_run(const dist_step_job *j, dist_step_result *r, char *msg, size_t len);

/* The number of CUDA GPUs, counted in a child process: a CUDA driver
 * initialised in this process before ranks fork would be unusable in them.
 * -1 when the count could not be taken. */
int dist_step_gpu_count(void);

#endif
