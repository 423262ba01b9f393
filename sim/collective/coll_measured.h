/*
 * coll_measured.h: collective times that follow a machine's measured
 * curves (issue 17, item 7) instead of the cluster file's datasheet
 * figures, for the layout simulator.
 *
 * Two sources, both from `placer profile --collectives N` (the store's
 * collective_point rows) through `placer calibrate --collectives`
 * (calib/coll_fit.h) or a collectives file (calib/coll_file.h):
 *
 *   fitted   per kind (all-reduce, all-gather, reduce-scatter), the ring
 *            model of collective.h with its free constants fitted:
 *                t(S, n) = base_us + steps(n) * alpha_us + frac(n) * S / busbw
 *            steps(n) = 2(n-1) for all-reduce, n-1 for all-gather and
 *            reduce-scatter; frac(n) = steps(n) / n (nccl-tests' bus
 *            factor). So alpha_us is the per-step latency, busbw the bus
 *            bandwidth the ring reaches for large S (bytes/s), base_us the
 *            per-call cost (NCCL's baseLat). These are the three constants
 *            the cluster model (collective.c) takes as coll_base_latency_us,
 *            intra_latency_us and intra_bw * collective_efficiency for a
 *            group inside one node.
 *   measured the curves themselves: for a group of exactly `ranks` members
 *            inside one node, the time at S is interpolated log-log between
 *            the two measured sizes around S; beyond the measured sizes it
 *            is extrapolated with the fitted model, anchored at the end
 *            point (t_end * model(S) / model(S_end)), so the curve stays
 *            continuous.
 *
 * Which groups they apply to: the profiler measures processes of one host,
 * so both sources stand for the intra-node link. A group that spans nodes
 * keeps the cluster model (its inter-node part was not measured). Every
 * estimate says where its time came from (coll_estimate.source).
 */
#ifndef PLACER_SIM_COLL_MEASURED_H
#define PLACER_SIM_COLL_MEASURED_H

#include <stddef.h>
#include <stdint.h>

#include "cluster.h"
#include "collective.h"
#include "status.h"

#define COLL_CURVE_MAX_POINTS 64
#define COLL_MAX_CURVES 24

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

/* Ring steps and bus factor of kind k over n ranks (0 for n < 2). */
double coll_ring_steps(coll_kind k, int n);
double coll_ring_frac(coll_kind k, int n);

/* The fitted model's time (see above); m->fitted must be set. */
double coll_ab_time_us(const coll_ab *m, coll_kind k, int n, double bytes);

/* Check m: every fitted kind has finite base, alpha >= 0 and busbw > 0;
 * every curve a known kind, ranks in 2..1024, 2.. points with ascending
 * positive finite sizes and positive finite times, no two curves of one
 * (kind, ranks), and a fitted model for the kind of each curve (it
 * extrapolates); at least one kind fitted. One line in msg naming the first
 * problem. PL_OK or PL_ERR_INVALID. */
pl_status coll_measured_validate(const coll_measured *m, char *msg, size_t len);

/* The curve of (k, ranks), or NULL. */
const coll_curve *coll_measured_curve(const coll_measured *m, coll_kind k, int ranks);

/* The time of k over a group of n members all inside one node from m:
 * the curve (use_curves) or the fitted model. Returns 1 with *us and
 * *source ("measured" or "fitted") set, 0 when m has nothing for kind k
 * (the caller keeps the cluster model). */
int coll_measured_time(const coll_measured *m, coll_kind k, int n, double bytes, double *us, const char **source);

/* coll_time (collective.h), then, when m is not NULL and the group lies
 * inside one node with n >= 2, the time from m where it has one: the
 * estimate's time, latency (the fitted base + steps * alpha), algbw and
 * busbw follow, algo becomes "ring", source "measured" or "fitted".
 * Errors as coll_time. */
pl_status coll_time_measured(const cluster *c, const coll_measured *m, coll_kind k, const int64_t *ranks, int n,
                             double bytes, coll_estimate *out);

#endif
