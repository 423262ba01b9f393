/*
 * sim_fixtures.h: hand-made graphs and profiles for the simulator's tests
 * and benchmark, so that they need neither the store nor spec profiles.
 */
#ifndef PLACER_TESTS_SIM_FIXTURES_H
#define PLACER_TESTS_SIM_FIXTURES_H

#include <stddef.h>

#include "graph.h"
#include "profile_data.h"
#include "sim.h"

/* A chain of n nodes (node i consumes node i-1) with batch `batch`; every
 * node is a layernorm named "c<i>" with no parameters. Free with
 * graph_destroy. NULL on allocation failure. */
graph *simfix_chain_graph(int n, int batch);

/* A profile for g over n_devices identical devices at the single micro-batch
 * size mb: every node costs fwd_us, bwd_us and opt_us on every device, links
 * cost nothing (no curve, no latency, no bandwidth) and node memory is
 * zero. Device memory is mem_bytes. NULL on allocation failure. */
profile_data *simfix_unit_profile(const graph *g, int n_devices, int mb, double fwd_us, double bwd_us,
                                  double opt_us, int64_t mem_bytes);

/* A roofline-like profile of any graph over n_devices identical devices at
 * micro-batch sizes 1, 2, 4, 8 and 16: us = flops * b / 20e12 * 1e6 +
 * kernels * 4, opt = params * 28 / 3e12 * 1e6 + 4; memory from the graph;
 * every link: 8 us + bytes / 100 GB/s (curve of 3 points). NULL on
 * allocation failure. */
profile_data *simfix_roofline_profile(const graph *g, int n_devices);

/* Check a traced run against the engine model's rules, independently of
 * how the simulator computes it:
 *   - every forward appears once on its node's device, every backward too
 *     (except the loss's, which the loss forward does);
 *   - each (producer, remote device, mb) is sent exactly once each way,
 *     only where a consumer is, the activation after its producer's
 *     forward, the gradient after the last consumer's backward there;
 *   - every forward starts after its inputs are there, every backward
 *     after its forward and its consumers' backwards or gradients;
 *   - one ZERO on every used device (two on the loss's) before anything
 *     else there, at most one ADD per remote contribution of a gradient
 *     and before that node's backward, one AdamW per used device after its
 *     last backward;
 *   - a device's compute operations never overlap, and the transfers into
 *     a device never overlap (nor any two of a device's transfers when the
 *     placement uses two devices); with ideal_links (the interleaved
 *     what-if), the transfers of each directed link never overlap instead;
 *   - no compute operation idles without a reason: it starts when the
 *     previous one ends, at 0, or when a transfer to or from its device
 *     ends (AdamW may also wait for an eager send's completion).
 * Returns 1 when all hold, else 0 with the first broken rule in msg. */
int simfix_check_trace(const graph *g, const int *placement, int m, int ideal_links, const sim_event *ev,
                       int n_ev, double eps, char *msg, size_t len);

#endif
