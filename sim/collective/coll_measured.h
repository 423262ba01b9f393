/*
 * coll_measured.h: collective times that follow a machine's measured
 * curves (issue 17, item 7) instead of the cluster file's datasheet
 * figures, for the layout simulator.
 *
 * Two sources, both from `placer profile --collectives N` (the store's
 * collective_point rows) through `placer calibrate --collectives`
 * (calib/coll_fit.h) or a collectives file (inputs/coll_file.h); the data
 * (coll_measured, its curves and fitted constants) and its checks are
 * inputs/coll_curves.h:
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
#include "coll_curves.h"
#include "collective.h"
#include "status.h"

/* Ring steps and bus factor of kind k over n ranks (0 for n < 2). */
double coll_ring_steps(coll_kind k, int n);
double coll_ring_frac(coll_kind k, int n);

/* The fitted model's time (see above); m->fitted must be set. */
double coll_ab_time_us(const coll_ab *m, coll_kind k, int n, double bytes);

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
