/*
 * profile_data.h: a machine profile in memory, the simulator's only input
 * about hardware.
 *
 * A profile says, for one graph on one machine:
 *   - each device's name, memory and (for spec profiles) roofline figures;
 *   - each node's cost in microseconds per (device, micro-batch size, phase),
 *     phase being forward, backward or optimizer (AdamW);
 *   - each node's memory: parameter bytes, activation bytes kept for
 *     backward and output bytes per sample, and transient workspace;
 *   - a transfer-time curve per ordered device pair, in bytes -> microseconds.
 *
 * The store (profile/) loads and saves it in SQLite; spec profiles and the
 * hardware profiler fill it. Nothing here knows SQLite or CUDA.
 */
#ifndef PLACER_CORE_PROFILE_DATA_H
#define PLACER_CORE_PROFILE_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "status.h"

typedef enum { PHASE_FWD = 0, PHASE_BWD, PHASE_OPT, PHASE_COUNT } cost_phase;

#define PROFILE_NAME_LEN 64

typedef struct {
    char name[PROFILE_NAME_LEN]; /* e.g. "NVIDIA H200" */
    int64_t mem_bytes;           /* device memory in bytes */
    double peak_flops;           /* FLOP/s (spec); 0 when unknown */
    double mem_bw;               /* bytes/s (spec); 0 when unknown */
    double launch_us;            /* per-kernel launch overhead (spec) */
    int sm_count;                /* streaming multiprocessors; 0 when unknown */
} profile_device;

typedef struct {
    int n_points;       /* points in the curve, ascending in bytes */
    double *bytes;      /* message sizes */
    double *us;         /* measured (or modelled) transfer times */
    double latency_us;  /* small-message time (fit or spec) */
    double bandwidth;   /* large-message bytes/s (fit or spec) */
} profile_link;

typedef struct {
    int64_t param_bytes;          /* fp32 parameters; grads and each AdamW moment match */
    int64_t act_bytes_per_sample; /* activations kept for backward, incl. the output */
    int64_t out_bytes_per_sample; /* output tensor, what a cut edge sends */
    int64_t workspace_bytes;      /* transient peak while the node runs: the larger of its two calls' */
    int64_t fwd_workspace_bytes;  /* transient while its forward runs, and while its backward runs: */
    int64_t bwd_workspace_bytes;  /* both 0 where the profile records one figure (workspace_bytes)
                                     for both calls (a file of schema 2, a spec profile) */
} profile_node_mem;

/* The workspace of node memory m during its forward (PHASE_FWD) or backward
 * call: that call's own figure where the profile records the two, else
 * workspace_bytes for both. */
static inline int64_t profile_node_call_workspace(const profile_node_mem *m, cost_phase ph) {
    if (m->fwd_workspace_bytes == 0 && m->bwd_workspace_bytes == 0) return m->workspace_bytes;
    return ph == PHASE_BWD ? m->bwd_workspace_bytes : m->fwd_workspace_bytes;
}

typedef struct {
    char machine[PROFILE_NAME_LEN];   /* machine name, e.g. "h200x2-nvlink" */
    char source[16];                  /* "spec" or "measured" */
    char graph_key[PROFILE_NAME_LEN]; /* gpt_config_key of the graph */
    int n_devices;                    /* devices 0..n_devices-1 */
    profile_device *devices;          /* n_devices entries */
    int n_nodes;                      /* nodes of the graph */
    profile_node_mem *node_mem;       /* n_nodes entries */
    int n_mb;                         /* number of micro-batch sizes */
    int *mb_sizes;                    /* n_mb sizes, ascending */
    double *cost_us;                  /* [dev][mb][node][phase], see profile_cost_index */
    profile_link *links;              /* [src * n_devices + dst]; diagonal unused */
    int bf16;                         /* measured in the engine's bf16 mode (the store's precision):
                                         the step keeps its gradients' zero on the compute stream */
    double *w_frac;                   /* [n_nodes] the share of each node's backward cost that is
                                         its weight gradient (W; the rest is the input gradient B),
                                         as measured (the store's B and W parts of the backward,
                                         schema 4); NULL, or NaN for a node: derived from the graph
                                         (profile_w_frac) */
} profile_data;

/* Allocate a zeroed profile. mb_sizes (n_mb entries, ascending, positive) is
 * copied. On success *out owns the profile; free with profile_data_destroy.
 * Returns PL_ERR_INVALID for non-positive counts or unsorted sizes,
 * PL_ERR_NOMEM on allocation failure (nothing leaks). */
pl_status profile_data_create(int n_devices, int n_nodes, int n_mb, const int *mb_sizes,
                              profile_data **out);

/* Free a profile and its curves. Accepts NULL. */
void profile_data_destroy(profile_data *p);

/* The share of node i's backward cost that is its weight gradient (W),
 * 0..1: the profile's measured split (w_frac) where it has one for the
 * node (not NaN), else from
 * the node's GEMM FLOPs: a node whose parameters are GEMM weights
 * (attention, MLP, head) spends 2 * params * T FLOPs per sample on their
 * gradients (dW = dY^T X), the rest of its backward FLOPs on the input
 * gradient and elementwise work; the embedding, norms, residuals and the
 * loss have no W of their own (0: their backward stays one call). */
double profile_w_frac(const profile_data *p, const graph *g, int i);

/* Index of (dev, mb index k, node, phase) in cost_us. */
static inline size_t profile_cost_index(const profile_data *p, int dev, int k, int node, int phase) {
    return (((size_t)dev * (size_t)p->n_mb + (size_t)k) * (size_t)p->n_nodes + (size_t)node) *
               PHASE_COUNT + (size_t)phase;
}

/* The backend workspace the profile was measured with: the smallest call
 * workspace over its nodes (every GPT has nodes without scratch), 0 for a
 * profile without nodes. What a node's call holds beyond it is scratch. */
int64_t profile_backend_workspace(const profile_data *p);

/* Index of mb_size in mb_sizes, or -1. */
int profile_mb_index(const profile_data *p, int mb_size);

/* Cost in us of node on dev at micro-batch size mb_size. Exact when the size
 * was profiled; otherwise linear interpolation between the two nearest
 * profiled sizes (extrapolation from the nearest two at the ends), never
 * below zero. The optimizer phase does not depend on mb_size. */
double profile_node_cost(const profile_data *p, int dev, int mb_size, int node, cost_phase ph);

/* Replace a link's curve with n points (copied; bytes ascending, n >= 1).
 * Returns PL_ERR_NOMEM or PL_ERR_INVALID; the old curve stays on failure. */
pl_status profile_link_set_curve(profile_link *l, int n, const double *bytes, const double *us);

/* Transfer time in us for `bytes` from src to dst: 0 when src == dst;
 * piecewise-linear interpolation in bytes; below the first point, the first
 * point's time; above the last, extrapolation along the last segment (or
 * latency + bytes/bandwidth for a one-point curve). */
double profile_transfer_us(const profile_data *p, int src, int dst, double bytes);

/* Deep copy. *out owns a new profile. */
pl_status profile_data_clone(const profile_data *p, profile_data **out);

#endif
