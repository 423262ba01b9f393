/*
 * sim.h: the discrete-event simulator. Predicts the step time, per-device
 * busy/idle time and peak memory of any placement under any pipeline
 * schedule, from a profile, in microseconds.
 *
 * Model: what the engine (hw/) does with the placement. Each device runs
 * the schedule's order of forwards and backwards, issued in the engine's
 * order (devices take turns; a non-contiguous 1f1b placement that would
 * deadlock runs one ready operation early), on an in-order compute stream;
 * cut edges are NCCL send/recv pairs on per-device in-order comm streams
 * that first wait for both devices' compute positions; gradients of a
 * tensor with consumers on several devices are summed (ADD), gradients
 * are zeroed at the start (ZERO) and one fused AdamW per device ends the
 * step. Peak memory is the engine's arena high-water mark, allocated
 * first-fit in the same order with the same buffer lifetimes. The details
 * are at the top of sim_core.c.
 *
 * Hot path: sim_run allocates nothing. Create one sim_ctx per thread with
 * sim_ctx_create, then call sim_run as often as needed; results go into
 * caller-owned memory.
 */
#ifndef PLACER_SIM_H
#define PLACER_SIM_H

#include <stdint.h>
#include <stdio.h>

#include "graph.h"
#include "placement.h"
#include "profile_data.h"
#include "schedule.h"
#include "status.h"

#define SIM_MAX_DEVICES PLACEMENT_MAX_DEVICES

/* The simulator's own parameters, fitted by calibration. Defaults are
 * neutral: the prediction is the profile's costs and nothing else. */
typedef struct {
    double launch_overhead_us;  /* added to every kernel call (node phase, add,
                                   zero, AdamW); may be negative (the profiler's
                                   timing markers cost time the step has not);
                                   durations are clamped at 0 */
    double transfer_latency_us; /* added to every cross-device transfer */
    double contention;          /* a transfer of duration t adds contention * t to
                                   the next compute operation of both its devices */
    double step_fixed_us;       /* added once per step (host sync, launch gaps) */
    double compute_scale;       /* multiplies every compute cost (1 = neutral) */
    double transfer_scale;      /* multiplies every transfer cost (1 = neutral) */
    double multi_device_start_us;  /* added once to a step that uses more than one
                                      device (the engine then starts one host
                                      thread per device every step) */
    double multi_device_launch_us; /* added to every kernel call of a step that
                                      uses more than one device */
} sim_params;

#define SIM_N_PARAMS 8

/* Neutral parameters. */
void sim_params_default(sim_params *p);
/* Parameter i's name ("launch_overhead_us", ...), for the store and reports. */
const char *sim_param_name(int i);
/* Pointer to parameter i inside p (0 <= i < SIM_N_PARAMS). */
double *sim_param_ptr(sim_params *p, int i);
/* 1 when parameter i may be negative (launch_overhead_us), else 0: sim_run
 * refuses negative values of the others. */
int sim_param_signed(int i);

typedef struct {
    double step_us;                          /* predicted step time */
    int n_devices;                           /* devices in the profile */
    double busy_us[SIM_MAX_DEVICES];         /* compute time per device */
    double idle_us[SIM_MAX_DEVICES];         /* step_us - busy_us, devices used only */
    double bubble[SIM_MAX_DEVICES];          /* idle / ideal busy per device */
    double bubble_fraction;                  /* mean bubble over used devices */
    int64_t static_bytes[SIM_MAX_DEVICES];   /* params, grads, AdamW m and v, backend workspace, ids */
    int64_t peak_bytes[SIM_MAX_DEVICES];     /* the arena's high-water mark (static included) */
    int oom;                                 /* 1 when some device's peak exceeds its cap */
    int oom_device;                          /* first such device, -1 if none */
    int n_transfers;                         /* cross-device transfers in the step */
    double transfer_bytes;                   /* bytes sent across devices */
    int critical_path_len;                   /* events on the critical path (see sim_critical_path) */
    /* added by the simulator (additive): */
    int n_used_devices;                      /* devices holding at least one node */
    int n_stages;                            /* runs of consecutive nodes on one device */
    int64_t cap_bytes[SIM_MAX_DEVICES];      /* cap each device was judged against (<= 0: none) */
    int max_in_flight[SIM_MAX_DEVICES];      /* most micro-batches stashed at once per device */
    double critical_compute_us;              /* compute time on the critical path */
    double critical_transfer_us;             /* transfer time on the critical path */
    int reorders;                            /* operations issued early to avoid a deadlock */
} sim_result;

typedef enum {
    SIM_EV_FWD = 0,   /* node forward */
    SIM_EV_BWD,       /* node backward */
    SIM_EV_OPT,       /* the device's AdamW */
    SIM_EV_SEND_ACT,  /* an activation transfer */
    SIM_EV_SEND_GRAD, /* a gradient transfer */
    SIM_EV_ADD,       /* a received gradient added to the node's output gradient */
    SIM_EV_ZERO,      /* gradients (or the loss accumulator) zeroed at the start */
    SIM_EV_WGRAD      /* a node's weight-gradient pass (W), apart from its input-gradient
                         backward (SIM_EV_BWD) in orders that split them (zb-h1, ...) */
} sim_event_kind;

typedef struct {
    sim_event_kind kind; /* what ran */
    int node;            /* graph node (producer node for transfers); -1 for AdamW and zero */
    int micro_batch;     /* 0..m-1; -1 for AdamW and zero */
    int device;          /* compute device, or source device of a transfer */
    int dst_device;      /* destination of a transfer; -1 for compute */
    int stream;          /* 0 the device's compute stream; 1 its comm stream (transfers, the
                            gradients' zero) */
    double start_us;     /* start time */
    double end_us;       /* end time */
} sim_event;

typedef struct sim_ctx sim_ctx;

/* Short name of an event kind: "F", "B", "adamw", "act", "grad", "add", "zero", "W". */
const char *sim_event_kind_name(sim_event_kind k);

/* Create a simulator context for graph g and profile p (both borrowed: they
 * must outlive the context and must not change while it is used). It is
 * sized for up to max_micro_batches micro-batches. Returns PL_ERR_INVALID when
 * g and p disagree on the node count, PL_ERR_NOMEM on allocation failure. */
pl_status sim_ctx_create(const graph *g, const profile_data *p, int max_micro_batches, sim_ctx **out);

/* Free a context. Accepts NULL. */
void sim_ctx_destroy(sim_ctx *ctx);

/* Record every event of the next runs (off by default). Events are kept in
 * the context until the next sim_run. The first call with on != 0 allocates
 * the event buffer (sized at creation); if that allocation fails it returns
 * PL_ERR_NOMEM and tracing stays off. Turning tracing off cannot fail.
 * PL_ERR_INVALID for a NULL ctx. */
pl_status sim_ctx_set_trace(sim_ctx *ctx, int on);

/* Simulate one training step.
 *   placement  one device per graph node (validated: PL_ERR_PLACEMENT_RANGE)
 *   sched      validated against the graph's batch (PL_ERR_SCHEDULE); also
 *              PL_ERR_SCHEDULE when m exceeds the context's
 *              max_micro_batches, and for interleaved (chunks > 1) unless
 *              the placement is v*p runs cycling over p devices and p
 *              divides m. interleaved with chunks == 1 runs as 1f1b.
 *   caps       per-device byte caps (n_devices entries), or NULL for the
 *              devices' own memory; a cap <= 0 means no cap
 *   prm        simulator parameters, or NULL for neutral ones
 *   res        caller-owned result, fully written on PL_OK
 * An OOM is a result (res->oom), not an error. Allocates nothing. On failure
 * sim_last_error(ctx) gives a one-line detail. The model (stages, orders,
 * memory, contention) is described at the top of sim_core.c. */
pl_status sim_run(sim_ctx *ctx, const int *placement, const schedule *sched, const int64_t *caps,
                  const sim_params *prm, sim_result *res);

/* One-line detail of the last sim_run failure ("" after a success). Never
 * NULL; valid until the next sim_run on ctx. */
const char *sim_last_error(const sim_ctx *ctx);

/* Events of the last run when tracing was on (sorted by start time), and
 * their count: every compute operation and one event per transfer (from
 * the start of the data's movement to the end of its receive). NULL when
 * tracing is off. */
const sim_event *sim_events(const sim_ctx *ctx, int *n);

/* The critical path of the last run, in time order, as events (whether or
 * not tracing was on); *n gets its length (res->critical_path_len). Each
 * event starts when its predecessor on the path ends, the first at 0 and
 * the last at step_us - step_fixed_us - multi_device_start_us (the latter
 * when more than one device is used). A transfer appears as its receive,
 * or as its send where an eager send's completion fixed what came next.
 * The array lives in ctx until the
 * next sim_run. NULL (and *n = 0) before a successful run. Cost: when
 * tracing was off, the first call after a run simulates that step again
 * (same inputs, same results) to record its operations, which sim_run
 * itself then skips; so it costs about one sim_run, once. Not for use
 * from two threads on one ctx (no sim_ctx function is). */
const sim_event *sim_critical_path(const sim_ctx *ctx, int *n);

/* Write the last traced run as Chrome Trace Event JSON (Perfetto,
 * chrome://tracing): one track per device and one per link, events named by
 * node and micro-batch. PL_ERR_INVALID if tracing was off. */
pl_status sim_write_chrome_trace(const sim_ctx *ctx, FILE *f);

#endif
