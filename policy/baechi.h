/*
 * baechi.h: Baechi's memory-constrained list-scheduling placers (Jeon et
 * al., SoCC 2020), m-ETF and m-SCT, as baselines for the learned placers.
 *
 * Both place the graph's nodes (not the problem's groups) by list
 * scheduling one training step's critical work, then the placement is
 * simulated like every other candidate (same schedule, caps, parameters
 * and OOM penalty). The schedule they build is only a means to the
 * placement: the simulator, not the list scheduler, gives the figure.
 *
 * The model both schedule on:
 *   - a node's work on device d is w(i,d) = forward + backward at the
 *     micro-batch size b = batch / m (the simulator parameters' compute
 *     scale and launch overhead applied), as Baechi co-places a forward op
 *     with its backward op and schedules them as one;
 *   - an edge i -> j crossing devices a -> b costs the activation transfer
 *     a -> b plus the gradient transfer b -> a of i's output (profile
 *     curves, transfer scale and latency);
 *   - memory: node i holds 4 x its parameter bytes (weights, gradients,
 *     AdamW's two moments), m micro-batches of its kept activations and of
 *     the inputs it receives from other devices for the whole step, and
 *     while it runs its workspace plus two output-sized
 *     gradient buffers; a device's estimate is the sum of the first over
 *     its nodes plus the largest of the second. A device whose cap the
 *     node would push the estimate over is not a candidate; when no
 *     device has room, the node goes to the device with the most room left
 *     (the simulator then reports the OOM).
 *
 * m-ETF (earliest task first): repeatedly, among all (ready node, device
 * with room) pairs, schedule the pair whose start time is earliest
 *   est(i,d) = max(device d free, max over producers p of finish(p) + comm(p -> i))
 * (ties: earlier finish, then lower node, then lower device).
 *
 * m-SCT (small communication times, Hanen and Munier's LP relaxation):
 * first solve, with GLPK's simplex,
 *   min W  s.t.  t_j >= t_i + p_i + c_ij x_ij       every edge i -> j
 *                sum_{j in succ(i)} x_ij >= |succ(i)| - 1   every i
 *                sum_{i in pred(j)} x_ij >= |pred(j)| - 1   every j
 *                W >= t_i + p_i,  0 <= x_ij <= 1,  t_i >= 0
 * where p_i is the node's mean work over the devices and c_ij the mean
 * cost of the edge over the device pairs (the LP is for identical
 * processors; the mean is this port's choice for a machine that is not
 * uniform). x_ij < 1/2 makes j the favourite child of i (the constraints
 * allow at most one per parent and one favourite parent per child). Then
 * list scheduling as m-ETF, except that a ready node whose favourite
 * parent ran on device d goes to d when d has room (Baechi: "the favourite
 * child is placed on its parent's device").
 * Without GLPK at build time search_sct returns PL_ERR_UNSUPPORTED.
 */
#ifndef PLACER_POLICY_BAECHI_H
#define PLACER_POLICY_BAECHI_H

#include <stddef.h>

#include "search.h"
#include "status.h"

/* m-ETF; adds one candidate labelled "m-etf". */
pl_status search_etf(policy_evaluator *ev, policy_cands *out);

/* m-SCT; adds one candidate labelled "m-sct". PL_ERR_UNSUPPORTED without
 * GLPK, PL_ERR_INVALID (message) when the LP solver fails. */
pl_status search_sct(policy_evaluator *ev, policy_cands *out, char *msg, size_t len);

/* 1 when m-SCT is built in (GLPK found). */
int search_sct_available(void);

#endif
