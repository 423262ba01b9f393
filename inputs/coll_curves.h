/*
 * coll_curves.h: measured collective times as data: the collective kinds,
 * per kind the fitted constants of the ring model, and the measured
 * curves themselves, as a collectives file (coll_file.h) or a fit over a
 * profile database (calib/coll_fit.h) gives them. What the layout
 * simulator does with them (the times, the choice between curve and model)
 * is sim/collective/coll_measured.h; this header holds only what is read
 * and checked, so that the file reader needs no simulator.
 *
 * The fitted model, per kind (all-reduce, all-gather, reduce-scatter):
 *     t(S, n) = base_us + steps(n) * alpha_us + frac(n) * S / busbw
 * steps(n) = 2(n-1) for all-reduce, n-1 for all-gather and reduce-scatter;
 * frac(n) = steps(n) / n (nccl-tests' bus factor). A curve is the median
 * time at each measured buffer size S for a group of exactly `ranks`
 * members inside one node.
 */
#ifndef PLACER_INPUTS_COLL_CURVES_H
#define PLACER_INPUTS_COLL_CURVES_H

#include <stddef.h>

#include "status.h"

#define COLL_CURVE_MAX_POINTS 64
#define COLL_MAX_CURVES 24

typedef enum {
    COLL_ALL_REDUCE = 0,
    COLL_ALL_GATHER,
    COLL_REDUCE_SCATTER,
    COLL_KIND_COUNT
} coll_kind;

typedef struct {
    int fitted;        /* 1: the constants below hold a fit */
    double base_us;    /* per-call latency, >= 0 */
    double alpha_us;   /* per ring step latency, >= 0 */
    double busbw;      /* bus bandwidth for large buffers, bytes/s, > 0 */
} coll_ab;

typedef struct {
    coll_kind kind;                        /* which collective */
    int ranks;                             /* group size, >= 2 */
    int n;                                 /* points, 2..COLL_CURVE_MAX_POINTS */
    double bytes[COLL_CURVE_MAX_POINTS];   /* buffer sizes (collective.h's S), ascending, > 0 */
    double us[COLL_CURVE_MAX_POINTS];      /* median times, > 0 */
} coll_curve;

typedef struct {
    char source[256];                      /* where the figures come from (one line) */
    coll_ab model[COLL_KIND_COUNT];        /* the fitted model per kind */
    int n_curves;                          /* entries of curves */
    coll_curve curves[COLL_MAX_CURVES];    /* at most one per (kind, ranks) */
    int use_curves;                        /* 1: interpolate the curves where a group matches;
                                              0: the fitted model only */
} coll_measured;

/* "all-reduce", "all-gather", "reduce-scatter" ("unknown" out of range). Static. */
const char *coll_kind_name(coll_kind k);

/* Check m: every fitted kind has finite base, alpha >= 0 and busbw > 0;
 * every curve a known kind, ranks in 2..1024, 2.. points with ascending
 * positive finite sizes and positive finite times, no two curves of one
 * (kind, ranks), and a fitted model for the kind of each curve (it
 * extrapolates); at least one kind fitted. One line in msg (may be NULL)
 * naming the first problem. PL_OK or PL_ERR_INVALID. */
pl_status coll_measured_validate(const coll_measured *m, char *msg, size_t len);

/* The curve of (k, ranks), or NULL (m NULL: NULL). */
const coll_curve *coll_measured_curve(const coll_measured *m, coll_kind k, int ranks);

#endif
