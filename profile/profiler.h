/*
 * profiler.h: the hardware profiler. It measures a machine on the real
 * engine (hw/, CUDA GPUs or the CPU reference backend) and writes what it
 * measures into a profile database (store.h), one unit at a time.
 *
 * What it measures, for the graph of a config on the engine's devices:
 *   machine      the devices (name, memory, SM count), host, driver and CUDA
 *                versions, and each device pair's link kind (NVLink or PCIe,
 *                as NVML / CUDA report it), in the machine, device and link
 *                rows; the graph's nodes with the engine's own memory figures
 *                (parameter bytes, saved-activation and output bytes per
 *                sample, transient workspace).
 *   link points  per ordered device pair, the transfer time over a sweep of
 *                sizes (profiler_link_sizes) through the engine's transfer
 *                path; afterwards each link's latency and bandwidth are
 *                fitted from its curve (profiler_fit_link).
 *   anchors      per device and micro-batch size b, whole single-device
 *                training steps of a batch of b samples (one micro-batch), on
 *                the engine's plan (hw_program_time): the sanity anchor.
 *   adamw        per device, every node's AdamW update (hw_probe_adamw).
 *   node costs   per device and micro-batch size, every node's forward and
 *                backward (hw_probe_nodes: device events around each node
 *                in a step-ordered pass, launch gaps excluded, median of
 *                many repetitions, interquartile range stored as spread).
 *
 * Units and resumption. Each item above (one link point, one anchor, one
 * device's AdamW, one device and micro-batch size's node costs) is a unit:
 * it is measured, then written in one transaction. A unit already in the
 * file is skipped unless force is set, so re-running after a kill measures
 * only what is missing, and a kill loses at most the unit in flight. Node
 * costs come last, so the file does not load as a profile (the store says
 * which cost is missing) until every unit is in. The link fit is redone at
 * the end of every run (it is arithmetic on stored points).
 *
 * Library code: nothing is printed. Progress goes to a callback, which can
 * also stop the run (the test hook for interrupted runs).
 */
#ifndef PLACER_PROFILE_PROFILER_H
#define PLACER_PROFILE_PROFILER_H

#include <stddef.h>
#include <stdint.h>

#include "dist_group.h"
#include "graph.h"
#include "hw.h"
#include "probe.h"
#include "profile_data.h"
#include "status.h"
#include "store.h"

typedef enum {
    PROFILER_UNIT_MACHINE = 0, /* machine, devices, links' kinds, graph and node memory */
    PROFILER_UNIT_LINK_POINT,  /* one transfer size of one ordered pair */
    PROFILER_UNIT_ANCHOR,      /* one whole single-device step time */
    PROFILER_UNIT_ADAMW,       /* one device's per-node AdamW times */
    PROFILER_UNIT_NODES,       /* one device and micro-batch size's forward and backward times */
    PROFILER_UNIT_COLLECTIVE   /* one collective size over a process group (profiler_collectives;
                                  dev is the group size, bytes the buffer) */
} profiler_unit_kind;

typedef enum {
    PROFILER_START = 0, /* a unit is about to be measured */
    PROFILER_WRITING,   /* its transaction is open and half its rows are written */
    PROFILER_DONE,      /* it was committed */
    PROFILER_SKIPPED    /* it was already in the file */
} profiler_stage;

typedef struct {
    profiler_stage stage;
    profiler_unit_kind kind;
    int index;         /* the unit's position, 0..total-1 */
    int total;         /* units in this run (measured or skipped) */
    int measured;      /* units measured and committed so far in this run */
    int dev, peer;     /* device (link: source), link destination, else -1 */
    int mb_size;       /* micro-batch size, 0 where none */
    int64_t bytes;     /* link point size, 0 otherwise */
    const char *label; /* e.g. "nodes dev 0 mb 16"; valid during the call */
    const hw_probe_stats *stats; /* DONE of a measured probe unit: its repetition figures; else NULL */
} profiler_progress;

/* Progress callback: return 0 to go on, non-zero to stop the run there (a
 * stop at WRITING rolls the open transaction back). */
typedef int (*profiler_progress_cb)(void *ctx, const profiler_progress *p);

typedef struct {
    const char *machine;   /* machine name; NULL: from the devices (profiler_machine_name) */
    const int *mb_sizes;   /* micro-batch sizes to profile, ascending, each >= 1 */
    int n_mb;
    int force;             /* re-measure units already in the file */
    hw_probe_opts nodes;   /* node forward/backward and AdamW repetitions */
    hw_probe_opts xfer;    /* transfer repetitions */
    int anchor_warmup;     /* untimed steps per anchor */
    int anchor_steps;      /* timed steps per anchor (median) */
    int64_t link_min_bytes;/* sweep from (default 4 KiB) */
    int64_t link_max_bytes;/* sweep to; 0: 1 GiB on GPUs, 16 MiB on the CPU backend */
    int points_per_octave; /* regular sweep density (>= 2) */
    profiler_progress_cb progress; /* may be NULL */
    void *progress_ctx;
} profiler_opts;

/* Defaults: nodes 3 warm-up + 60 kept repetitions, transfers 2 + 15,
 * anchors 3 + 20 steps, links 4 KiB .. backend default, 2 points per
 * octave, everything else zero/NULL (mb_sizes must be set). */
profiler_opts profiler_opts_default(void);

typedef struct {
    char machine[PROFILE_NAME_LEN];   /* the machine name written */
    char graph_key[PROFILE_NAME_LEN]; /* the graph profiled */
    int units_total;                  /* units of this run */
    int units_measured;               /* measured and committed now */
    int units_skipped;                /* already in the file */
    int starved_reps;                 /* probe repetitions discarded for launch gaps, all units */
    int unclean_units;                /* units that had to keep starved repetitions */
    double wall_us;                   /* wall time of the run */
} profiler_result;

/* Profile the engine's machine for the graph of cfg into db (opened for
 * writing). r may be NULL. Returns PL_OK when every unit is in the file;
 * PL_ERR_INTERRUPTED when the progress callback stopped it (what was
 * committed stays); PL_ERR_INVALID for bad options or a file that holds
 * another machine; the probe's and the store's errors otherwise (msg says
 * which unit failed; everything committed before it stays). */
pl_status profiler_run(hw_engine *e, profile_db *db, const gpt_config *cfg, const profiler_opts *o,
                       profiler_result *r, char *msg, size_t len);

/* ---- collective curves (issue 17) -------------------------------------------
 * All-reduce, all-gather and reduce-scatter (float32, hw/dist/dist_group.h)
 * over a group of N processes of this host, over a sweep of buffer sizes,
 * into the store's collective_point table (store.h) next to the transfer
 * curves. profiler_collectives forks its group (hw/dist/launcher.h: sockets,
 * the transport of the CPU backend's data and tensor parallelism);
 * profiler_collectives_group runs on a group that exists, e.g. the MPI
 * world under mpirun. NCCL is not measured here yet. Sizes are the nccl-tests buffer
 * (store.h); all-gather and reduce-scatter round them to N equal shards
 * of at least one float (4 B over 2 ranks is measured as 8 B, and a size
 * that rounds onto the previous one is counted as skipped).
 *
 * One unit is one (op, size): hw_launch starts N ranks, each rank runs
 * `warmup` untimed and `reps` timed collectives on its own buffer of that
 * size (float32 elements, every rank entering through a barrier, the
 * result checked against the known sum), the times are max-reduced over
 * the ranks (the slowest rank's time is the collective's), and the parent
 * stores their median and interquartile range in one transaction. A point
 * already stored is skipped unless force is set, as profiler_run does. */

typedef struct {
    int ranks;           /* group size, 2..DIST_MAX_RANKS */
    int64_t min_bytes;   /* first size, a multiple of 4 (default 4) */
    int64_t max_bytes;   /* last size (default 64 MiB); sizes go up by factors of 4 */
    int warmup;          /* untimed collectives per size (default 3) */
    int reps;            /* timed collectives per size (default 15) */
    double timeout_s;    /* the group's per-call timeout (default 30) */
    int force;           /* re-measure stored points */
    profiler_progress_cb progress; /* may be NULL */
    void *progress_ctx;
} profiler_coll_opts;

/* ranks 2, 4 B .. 64 MiB, 3 + 15 repetitions, timeout 30 s. */
profiler_coll_opts profiler_coll_opts_default(void);

/* The sizes of the sweep: min_bytes, 4 * min_bytes, ... up to max_bytes
 * (included when it is not on the ladder). *out malloc'd (caller frees).
 * PL_ERR_INVALID for min < 4, min not a multiple of 4, max < min. */
pl_status profiler_coll_sizes(int64_t min_bytes, int64_t max_bytes, int64_t **out, int *n);

/* Measure the collective curves into db (opened for writing; machine must
 * be stored, e.g. by profiler_run: PL_ERR_NOT_FOUND otherwise). r may be
 * NULL (units_* and wall_us are filled). PL_ERR_INVALID for bad options;
 * PL_ERR_INTERRUPTED when a rank failed (msg names it: hw_launch's line)
 * or the progress callback stopped the run; the store's errors otherwise.
 * Must not be called from a rank of another group (it forks). */
pl_status profiler_collectives(profile_db *db, const char *machine, const profiler_coll_opts *o,
                               profiler_result *r, char *msg, size_t len);

/* The same sweep on a group that already exists (the MPI world under
 * mpirun: `mpirun -np N placer profile --collectives N`): every rank of g
 * calls it; rank 0 passes db (opened for writing) and the machine name,
 * the others NULL. Rank 0 decides each unit (measure, skip a stored point,
 * or stop) and broadcasts it, so the ranks stay in step; its points carry
 * g's transport name (dist_transport_name: "mpi", "sockets"). Errors as
 * profiler_collectives; a rank other than 0 returns PL_ERR_INTERRUPTED
 * when rank 0 stopped the sweep. */
pl_status profiler_collectives_group(dist_group *g, profile_db *db, const char *machine, const profiler_coll_opts *o,
                                     profiler_result *r, char *msg, size_t len);

/* ---- pieces, exposed for tests and tools ---------------------------------- */

/* A machine name from the first device's name and the device count:
 * "NVIDIA H200" x 2 -> "h200x2", "cpu" x 4 -> "cpux4" (lower case, the
 * vendor word dropped, other characters but [a-z0-9] dropped). */
void profiler_machine_name(const char *device_name, int n_devices, char *buf, size_t len);

/* The transfer sizes to sweep, ascending and distinct: points_per_octave
 * (>= 2) sizes per octave from min_bytes to max_bytes (both included, each
 * rounded to a multiple of 4 bytes), plus the sizes the graph really sends
 * at each micro-batch size b (every node's output and output-gradient
 * buffer as the engine lays it out: b*T*C*4, the logits b*T*Vp*4, ...) and
 * one size a quarter octave either side of each, where they are <=
 * max_bytes. *out is malloc'd (caller frees), *n its length. PL_ERR_INVALID
 * for bad bounds, PL_ERR_NOMEM. */
pl_status profiler_link_sizes(const graph *g, const int *mb_sizes, int n_mb, int64_t min_bytes, int64_t max_bytes,
                              int points_per_octave, int64_t **out, int *n);

/* Fit t = latency + bytes / bandwidth to a transfer curve (n >= 1 points,
 * bytes ascending): the latency is the time of the smallest transfer, the
 * bandwidth the least-squares slope over the points at or above a quarter
 * of the largest size (the last two points at least). bandwidth is in
 * bytes/s; 0 when the curve does not rise. */
void profiler_fit_link(int n, const double *bytes, const double *us, double *latency_us, double *bandwidth);

/* The engine's memory figures for node i of g (what the arena holds for
 * it): param_bytes = 4 * parameters; out_bytes_per_sample = its output
 * buffer (the logits with the padded vocabulary); act_bytes_per_sample =
 * its saved tensors plus its output when a consumer reads it again in
 * backward; fwd_workspace_bytes and bwd_workspace_bytes = the scratch of
 * its forward and of its backward call at micro-batch size max_mb plus the
 * backend's matrix workspace (ws_bytes), workspace_bytes the larger. */
void profiler_node_mem(const graph *g, int i, int max_mb, int64_t ws_bytes, profile_node_mem *m);
/* The same in a precision: bf16 != 0 gives the bf16 mode's saved and scratch
 * sizes (layout.h). The bf16 weight copy (2 bytes a parameter) is in none of
 * the figures: param_bytes stays 4 * parameters, which is what the
 * simulator's static memory is built from. */
void profiler_node_mem_prec(const graph *g, int i, int max_mb, int64_t ws_bytes, int bf16, profile_node_mem *m);
/* This engine's memory figures for every node of g (out, g->n_nodes
 * entries) as the profiler would write them into profile p today: at p's
 * largest micro-batch size, in p's precision, with the backend workspace p
 * was measured with (profile_backend_workspace). So a profile measured before the engine's
 * layout changed can have its node rows brought up to date without a GPU.
 * PL_ERR_INVALID (msg) when p is not a profile of g or holds no node. */
pl_status profiler_engine_node_mem(const graph *g, const profile_data *p, profile_node_mem *out, char *msg,
                                   size_t len);

/* ---- reading profiles back: run-to-run variation and the sanity check ---- */

typedef struct {
    int n;                 /* cells compared (time in a >= min_us) */
    double median_rel;     /* median |b - a| / a over them */
    double p90_rel, max_rel;
    int worst_dev, worst_node, worst_mb; /* the cell of max_rel (mb 0 for AdamW) */
    cost_phase worst_phase;
    double worst_a, worst_b;             /* its two times */
} profile_compare_result;

/* Compare two profiles of the same graph and device count, cell by cell
 * (every device, micro-batch size present in both, node and phase) over the
 * cells whose time in a is at least min_us. phase < 0 compares all phases,
 * else only that one. PL_ERR_INVALID when the graphs or device counts
 * differ. A result with n == 0 means no cell qualified. */
pl_status profile_compare(const profile_data *a, const profile_data *b, double min_us, int phase,
                          profile_compare_result *r, char *msg, size_t len);

/* Sum of node costs on device dev at micro-batch size mb_size (exact size
 * only): forward, backward and AdamW sums. PL_ERR_NOT_FOUND when mb_size
 * was not profiled. */
pl_status profile_node_sums(const profile_data *p, int dev, int mb_size, double *fwd_us, double *bwd_us,
                            double *opt_us);

#endif
