/*
 * hw_timer.h: the timer backed by the real engine (hw/): CUDA devices, or
 * the engine's CPU reference backend on virtual devices (no GPU needed).
 *
 * The engine keeps its devices, streams and communicators across calls;
 * each call compiles the placement into a plan under the cap, runs the
 * warm-up steps, then times each step (device events and a host sync per
 * step, hw_program_time) and releases the placement's memory again. An engine OOM
 * (PL_ERR_DEVICE_OOM) is reported as an outcome, not a failure.
 */
#ifndef PLACER_CALIB_HW_TIMER_H
#define PLACER_CALIB_HW_TIMER_H

#include <stdint.h>

#include "graph.h"
#include "hw.h"
#include "store.h"
#include "status.h"
#include "timer.h"

typedef struct calib_hw_timer calib_hw_timer;

/* Create an engine timer for graph g (borrowed, must outlive the timer).
 *   backend  "cuda" or "cpu"
 *   gpus     physical device of each logical device 0..n_devices-1 (CUDA
 *            ordinals; ignored by the CPU backend, which makes n_devices
 *            virtual devices); may repeat a GPU
 *   seed     data and parameter initialisation
 *   graphs   CUDA: replay each step as captured CUDA graphs from a plan's
 *            second step on (hw_engine_opts.graphs); ignored on the CPU
 *   precision the engine's precision (hw.h): the one the profile was
 *            measured in (profile_db_precision), so that measured and
 *            predicted steps do the same math; HW_PREC_DEFAULT: tf32 on CUDA,
 *            fp32 on the CPU
 * PL_ERR_UNSUPPORTED when the backend is not built in, PL_ERR_NO_DEVICE
 * when a GPU is missing, PL_ERR_CUDA. On success *out owns the timer
 * (calib_hw_timer_destroy) and *timer is ready to use. */
pl_status calib_hw_timer_create(const char *backend, const graph *g, const int *gpus, int n_devices, uint64_t seed,
                                int graphs, hw_precision precision, calib_hw_timer **out, calib_timer *timer,
                                char *msg, size_t len);

/* The precision the timer's engine runs in (never HW_PREC_DEFAULT). */
hw_precision calib_hw_timer_precision(const calib_hw_timer *t);

/* The engine precision of a profile database: its recorded precision
 * (profile_db_precision: "tf32" for files older than the key). Errors:
 * PL_ERR_DB, PL_ERR_INVALID (a value the engine does not know; msg says). */
pl_status calib_db_precision(profile_db *db, hw_precision *out, char *msg, size_t len);

/* Free. Accepts NULL. */
void calib_hw_timer_destroy(calib_hw_timer *t);

/* Run one traced step of node_placement under s and mem_cap (after
 * `warmup` untimed steps) and return its Chrome Trace Event JSON in *json
 * (malloc'd, caller frees). PL_ERR_DEVICE_OOM when it does not fit. */
pl_status calib_hw_timer_trace(calib_hw_timer *t, const int *node_placement, const schedule *s, int64_t mem_cap,
                               int warmup, char **json, char *msg, size_t len);

#endif
