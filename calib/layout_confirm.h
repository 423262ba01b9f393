/*
 * layout_confirm.h: a parallel layout with tp x dp > 1 timed one process
 * per rank (as `placer step --layout` runs it), on the CPU backend or on
 * CUDA, and the layout simulator's prediction of it on the profile, for
 * `placer confirm --layout` (issue 17).
 *
 * The prediction is the layout simulator (sim/layout/layout_sim.h) run on a
 * cluster made from the profile:
 *   - one node of world GPUs of one type, the profile's device 0: its name
 *     and memory, SMs 1 (GPU profiles: the device's own count), every GEMM
 *     at the base efficiency without tile or wave quantisation on the CPU
 *     (compute_params.no_tiles: the CPU's loops take time by FLOPs), one
 *     compute rate for every precision;
 *   - its rates, peak FLOP/s and memory bandwidth, fitted to the profile's
 *     whole single-device steps (its step anchors, one per micro-batch size
 *     measured): at tp = dp = pp = 1 the simulated step is
 *     a(b) / x + c(b) / y + k o (GEMM and memory-bound time at reference
 *     rates over the rates' ratios x, y to them; k kernels of overhead o),
 *     linear in 1/x and 1/y, so they come from a least-squares fit in
 *     relative error over the anchors with 1/x, 1/y > 0 (when that is not
 *     feasible, or with one anchor, one common scale for both). o is not
 *     fitted: a, c and k are all affine in b, so anchors tell two constants
 *     apart, not three; it is CALIB_GPU_KERNEL_US on a GPU profile (the
 *     compute model's default launch gap) and 0 on the CPU;
 *   - every collective from the profile's measured curves and their fitted
 *     model (calib/coll_fit.h; all groups lie in the one node), the
 *     curves interpolated where a group's size was measured.
 * The ranks share the host's cores (CPU) or one GPU (CUDA, host-staged
 * collectives), which the simulator (one GPU each) does not see; the
 * figures are printed with that limit.
 *
 * The measurement (calib_layouts_time) runs tp * dp ranks through the engine's one runner of a
 * grid (hw/dist/dist_step.h, the same as `placer step --layout`): each
 * with one logical device (CUDA: GPU `gpu`, the same for every rank), the
 * tp and dp groups of the rank grid, its batch slice, the plan (ZeRO-1
 * when zero is 1), warmup + steps steps; rank 0's timing (the slowest
 * rank's step times, hw_program_time) comes back. pp must be 1: a rank
 * runs its pipeline stages one after another when it is part of a group,
 * which the simulator (stages in parallel) does not model.
 */
#ifndef PLACER_CALIB_LAYOUT_CONFIRM_H
#define PLACER_CALIB_LAYOUT_CONFIRM_H

#include <stddef.h>

#include "calib_db.h"
#include "cluster.h"
#include "coll_measured.h"
#include "hw.h"
#include "layout.h"
#include "layout_sim.h"
#include "step_layout.h"
#include "store.h"


#define CPU_PEAK_FLOPS 50e9 /* reference rates the fit scales (their values cancel) */
#define CPU_MEM_BW 10e9
#define CALIB_MAX_ANCHORS 16
#define CALIB_GPU_KERNEL_US 2.0 /* compute_params_default's kernel_overhead_us */

typedef struct {
    double step_us;        /* the simulated step */
    double flops, mem_bw;  /* the fitted rates: FLOP/s, bytes/s */
    double kernel_us;      /* the per-kernel overhead used (CALIB_GPU_KERNEL_US on a GPU profile, 0 CPU) */
    int one_scale;         /* 1: one common scale (one anchor, or a negative rate) */
    int n_anchors;         /* anchors fitted */
    double anchor_rms, anchor_max; /* the fit's relative error over them */
    layout_result res;     /* the simulator's whole result */
    int n_measured, n_fitted, n_model; /* collective times by source */
} calib_layout_prediction;

/* The cluster of the CPU profile p for world ranks with compute rate flops
 * (FLOP/s, every precision) and memory bandwidth mem_bw (see above);
 * intra-node figures from meas's all-reduce fit (pipeline sends only;
 * every collective comes from meas). */
pl_status calib_cpu_cluster(const profile_data *p, int64_t world, double flops, double mem_bw,
                            const coll_measured *meas, cluster *out, char *msg, size_t len);

/* Predict layout l of model cfg (batch = the profile's graph batch) on the
 * CPU profile in db (graph key `key`, profile p) with collectives meas.
 * PL_ERR_NOT_FOUND when the profile has no step anchor; the simulator's
 * errors otherwise (one line in msg). */
pl_status calib_layout_predict(profile_db *db, const char *key, const profile_data *p, const gpt_config *cfg,
                               const layout *l, const coll_measured *meas, calib_layout_prediction *out, char *msg,
                               size_t len);

/* ---- `placer confirm --layout`: several layouts, each over its ranks ---- */

#define CALIB_MAX_LAYOUTS 16

typedef struct {
    int rounds, steps, warmup; /* confirmation rounds; steps (1..64) and warm-up per timing */
    uint64_t seed;             /* the rounds' shuffles and every timing's seed */
    double timeout_s;          /* the ranks' collective timeout */
    int cuda;                  /* 1: the CUDA backend, every rank on GPU 0; 0: the CPU backend */
} calib_layouts_opts;

typedef struct {
    int n;                           /* layouts */
    int rounds;                      /* as timed (0 before calib_layouts_time) */
    int fit_failed;                  /* calib_layouts_predict: the profile's collective curves would not fit */
    coll_measured *meas;             /* the collectives the prediction used (owned) */
    calib_layout_prediction *pred;   /* n predictions (owned) */
    double *median_us;               /* n x rounds: layout i's round r at [i * rounds + r] (owned) */
} calib_layouts_confirm;

/* Predict each of the n (1..CALIB_MAX_LAYOUTS) layouts sl of model mo
 * (the profile in db, read only) with the collectives fitted to its
 * curves; *c owns the result (calib_layouts_confirm_free, also on error).
 * When the curves do not fit, c->fit_failed is set and that status is
 * returned (one line in msg); else calib_layout_predict's errors. */
pl_status calib_layouts_predict(profile_db *db, const calib_model *mo, const step_layout *sl, int n,
                                calib_layouts_confirm *c, char *msg, size_t len);

/* Time every layout of c in o->rounds rounds, shuffled each round (a
 * seeded Fisher-Yates), one process per rank (hw/dist/dist_step.h), and store
 * each timing in db (open for writing) as a measurement of purpose
 * "confirm-layout" (extra: the layout, ranks, round and prediction).
 * PL_ERR_INVALID for bad options, "layout <text>: <why>" when a layout
 * could not be timed, the store's error when a row could not be written. */
pl_status calib_layouts_time(profile_db *db, const calib_model *mo, const step_layout *sl,
                             const calib_layouts_opts *o, calib_layouts_confirm *c, char *msg, size_t len);

/* Free what c owns. Accepts NULL and a zeroed value. */
void calib_layouts_confirm_free(calib_layouts_confirm *c);

#endif
