/*
 * spec.h: profiles from a machine description instead of a measurement.
 *
 * A spec profile lets the offline path (simulate, search, train) run before
 * any hardware profile exists, or for machines nobody here has. Each node's
 * cost per phase is a roofline estimate from the graph's FLOP and byte
 * counts:
 *
 *   fwd/bwd us = max(flops * b / peak_flops, bytes * b / mem_bw) * 1e6
 *                + kernels * launch_us                     (b = micro-batch)
 *   opt us     = params * 28 B / mem_bw * 1e6 + launch_us  (AdamW: reads
 *                param, grad, m, v = 16 B; writes param, m, v = 12 B)
 *
 * and each ordered device pair gets a transfer curve sampled at 4 KiB ..
 * 2 GiB, two points per octave, of latency_us + bytes / link_bandwidth.
 * A spec is uniform (every device alike, every ordered pair the same link)
 * unless it lists device types and each device's type (two device types
 * in one machine) or link types and each ordered pair's link (NVLink pairs
 * with PCIe between them); what it does not list comes from the top-level
 * figures, which then describe device 0 and the default link. Node memory has one
 * workspace figure per node, so a mixed machine takes the largest
 * matmul workspace of its devices for every device (conservative).
 *
 * Spec figures are ceilings, so a spec profile predicts faster steps than
 * real hardware gives; the simulator's calibration (calib/) fits the gap.
 */
#ifndef PLACER_PROFILE_SPEC_H
#define PLACER_PROFILE_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "profile_data.h"
#include "status.h"

/* Points of a spec transfer curve: 4 KiB = 2^12 .. 2 GiB = 2^31, two per octave. */
#define SPEC_CURVE_POINTS 39

/* One device of a machine that is not uniform. */
typedef struct {
    const char *device_name;        /* e.g. "NVIDIA L40S" */
    double peak_flops;              /* effective FLOP/s for fp32 training math */
    double mem_bw;                  /* bytes/s of device memory */
    int64_t mem_bytes;              /* usable device memory in bytes */
    double launch_us;               /* per-kernel launch overhead in us */
    int sm_count;                   /* informational */
    int64_t matmul_workspace_bytes; /* cuBLAS workspace while a matmul node runs */
} spec_device;

/* One ordered device pair's link. */
typedef struct {
    double latency_us;  /* small-message time */
    double bandwidth;   /* bytes/s per direction */
    const char *kind;   /* "nvlink", "pcie5-switch", ... */
} spec_link;

typedef struct {
    const char *name;        /* e.g. "t4x4-pcie"; the profile's machine name */
    const char *description; /* one line for people, e.g. "4 x T4, PCIe 3.0 x16 host-bridged" */
    const char *device_name; /* e.g. "Tesla T4" */
    int n_devices;           /* identical devices 0..n_devices-1 */
    double peak_flops;       /* effective FLOP/s of one device for fp32 training math */
    double mem_bw;           /* bytes/s of device memory */
    int64_t mem_bytes;       /* usable device memory in bytes */
    double launch_us;        /* per-kernel launch overhead in us */
    int sm_count;            /* streaming multiprocessors (informational) */
    int64_t matmul_workspace_bytes; /* cuBLAS workspace held while a matmul node runs */
    double link_latency_us;  /* small-message time between any two devices */
    double link_bandwidth;   /* bytes/s per direction between any two devices */
    const char *link_kind;   /* "pcie3-host", "nvlink", ... (stored with each link) */
    /* A machine that is not uniform (both NULL pairs: uniform, as above). */
    const spec_device *device_types;  /* distinct device types */
    const unsigned char *device_of;   /* n_devices entries: each device's type */
    const spec_link *link_types;      /* distinct links */
    const unsigned char *link_of;     /* n_devices^2 entries, [src * n + dst]: each pair's link
                                         (diagonal unused) */
} machine_spec;

/* Device d of s (0 <= d < n_devices), from its list or the top-level figures. */
spec_device spec_device_at(const machine_spec *s, int d);

/* The link from a to b (a != b), from the list or the top-level figures. */
spec_link spec_link_at(const machine_spec *s, int a, int b);

/* 1 when every device and every link of s are alike. */
int spec_is_uniform(const machine_spec *s);

/* Number of built-in machine descriptions. */
int spec_count(void);

/* Built-in description i (0 <= i < spec_count()), or NULL out of range.
 * The returned struct is static and read-only. */
const machine_spec *spec_get(int i);

/* The built-in description named name ("t4x4-pcie", "h200x2-nvlink",
 * "h200x4-nvlink", "h200x2-l40sx2", "h200x8-nvpairs"), or NULL when there
 * is none. NULL name gives NULL. */
const machine_spec *spec_find(const char *name);

/* Write the built-in names, comma-separated, into buf (for error messages).
 * Always NUL-terminates when len > 0; truncates silently. */
void spec_names(char *buf, size_t len);

/* Roofline cost in us of node n at micro-batch size b for phase ph on a
 * device of spec s (see the formulas above; device 0 for a mixed machine).
 * Nodes without parameters cost 0 in PHASE_OPT; b is ignored for PHASE_OPT. */
double spec_node_cost_us(const machine_spec *s, const graph_node *n, int b, cost_phase ph);

/* The same on device d's own figures. */
double spec_device_node_cost_us(const spec_device *dev, const graph_node *n, int b, cost_phase ph);

/* Build a profile of graph g on machine s at the given micro-batch sizes
 * (any order; duplicates are dropped; all must be positive). On success
 * *out owns a new profile (profile_data_destroy) whose machine is s->name,
 * source "spec", graph key gpt_config_key(&g->cfg); PHASE_OPT costs are
 * stored in every micro-batch slot. Node memory comes from the graph:
 * parameter bytes, activation and output bytes per sample, and s's matmul
 * workspace for attention, mlp and head nodes.
 * Returns PL_ERR_INVALID for a NULL argument, n_mb < 1, a non-positive size
 * or a spec with fewer than 1 device; PL_ERR_NOMEM on allocation failure.
 * *out is NULL on failure and nothing leaks. */
pl_status spec_profile_build(const machine_spec *s, const graph *g, const int *mb_sizes, int n_mb,
                             profile_data **out);

#endif
