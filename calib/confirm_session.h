/*
 * confirm_session.h: one head-to-head confirmation of placements from a
 * profile database, as `placer confirm --run` runs it: the sides
 * (sides.h) and, when a layout was given, its pipeline split as the side
 * "layout"; the simulator's prediction of every candidate (calibrated
 * parameters when the store has them); the timer (the engine on GPUs or on
 * the CPU backend, hw_timer.h, or the simulator plus noise, timer.h); the
 * protocol (confirm.h); the stored confirmation and one traced step of the
 * fastest side for the report.
 *
 * Two calls, so that the store stays read-only until everything is ready
 * (a failed start leaves the file as it was): calib_session_prepare reads,
 * calib_session_run times and writes.
 */
#ifndef PLACER_CALIB_CONFIRM_SESSION_H
#define PLACER_CALIB_CONFIRM_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "calib_db.h"
#include "confirm.h"
#include "hw_timer.h"
#include "sides.h"
#include "timer.h"

typedef struct {
    calib_confirm_config cfg;      /* sched, mem_cap, rounds, steps, warm-up, seed, label; graph_key and run_id
                                      are set from the model and so */
    calib_sides_options so;        /* which sides (run_id: the RL run, 0 none) */
    const int *gpus;               /* the GPU of each profile device (n_gpus of them) */
    int n_gpus;
    const char *timer_kind;        /* "cuda", "cpu" (the engine) or "synthetic" */
    int graphs;                    /* CUDA: replay steps as captured CUDA graphs */
    int trace;                     /* record a traced step of the fastest side (engine timers) */
    hw_precision prec;             /* the engine's: the profile's */
    const int *layout_placement;   /* the side "layout"'s candidate, or NULL */
    const char *layout_label;      /* its label */
} calib_session_opts;

typedef struct {
    calib_confirm_config cfg;      /* as run (label, graph key, run id filled in) */
    char label[64];                /* the default label: "run RUN" */
    calib_confirm *cf;             /* sides, candidates, timings (owned) */
    calib_sides_info info;         /* what calib_sides_add added */
    int n_calibrated;              /* the simulator's parameters came from the store (1) or are neutral (0) */
    calib_timer t;                 /* the timer */
    calib_hw_timer *hw;            /* the engine's timer, or NULL (owned) */
    calib_sim_timer *syn;          /* the synthetic one, or NULL (owned) */
    sim_ctx *ctx;                  /* the simulator of the graph (owned) */
    int64_t confirm_id;            /* the stored confirmation */
    int winner;                    /* calib_confirm_winner, -1 none */
    int traced;                    /* a traced step of the winner was stored */
} calib_session;

/* Sides, predictions and the timer of model mo (db open, read only) under
 * o. *s owns them (calib_session_free, also on error). The sides',
 * simulator's and timers' errors as they come, one line in msg
 * (PL_ERR_NO_DEVICE when the engine found no usable GPU). */
pl_status calib_session_prepare(profile_db *db, const calib_model *mo, const calib_session_opts *o, calib_session *s,
                                char *msg, size_t len);

/* Run the protocol, store the confirmation and (o->trace, an engine timer,
 * a winner) one traced step of the fastest side, into db (open for
 * writing). The protocol's and store's errors, one line in msg. */
pl_status calib_session_run(calib_session *s, profile_db *db, const calib_model *mo, const calib_session_opts *o,
                            char *msg, size_t len);

/* Free what s owns. Accepts NULL and a zeroed session. */
void calib_session_free(calib_session *s);

#endif
