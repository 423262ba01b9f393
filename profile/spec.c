/*
 * spec.c: roofline profiles from built-in machine descriptions.
 *
 * The figures below are *effective* ceilings for what this project's engine
 * does (fp32 storage, fp32 or TF32 matmuls, one kernel stream per device),
 * not the marketing peaks; each one says where it comes from. A spec profile
 * is a starting point for the offline path; a measured profile replaces it.
 *
 * The H200's memory bandwidth, memory size and SM count are not written
 * here: they are data/clusters/h200x2.json's (its GPU type's hbm_gb_s,
 * hbm_mib and sm_count, with their sources), which the build writes into
 * spec_gpus.h (profile/spec_gpu_figures.c, through inputs/'s cluster
 * loader). The figures that stay here have no cluster-file twin: the
 * effective TF32 ceiling (a cluster file holds datasheet peaks), the launch
 * overhead, the cuBLAS workspace, the T4 and the L40S (no cluster file),
 * and the links: the pair's 15 us and 390 GB/s are the peer-copy
 * measurements of DEVICE.md, where h200x2.json's intra_node holds the
 * profiler's fit over 67 sizes (6.0 us, 373.3 GB/s); both are kept, each
 * with its source.
 */
#include "spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_gpus.h" /* SPEC_H200_*: generated from data/clusters/h200x2.json */

#define MIB (1024LL * 1024LL)

/* ---- machines that are not uniform ---------------------------------------- */

/* NVIDIA L40S (Ada, 48 GB GDDR6, PCIe 4.0 x16, no NVLink). Datasheet: TF32
 * tensor-core 183 TFLOP/s dense, 864 GB/s, 142 SMs. The effective TF32
 * figure assumes the same 80% of paper that a cuBLAS GEMM reached on the
 * project's H200 (395 of 495 TFLOP/s): 146 TFLOP/s. Usable memory assumed
 * 45 GiB of the 48 GB card (ECC and the driver's reservation); 4 MiB
 * cuBLAS workspace before Hopper. Not measured here: nobody has one. */
static const spec_device MIXED_DEVICES[] = {
    {.device_name = "NVIDIA H200", .peak_flops = 400e12, .mem_bw = SPEC_H200_HBM_BW,
     .mem_bytes = SPEC_H200_HBM_BYTES, .launch_us = 4.0, .sm_count = SPEC_H200_SM_COUNT,
     .matmul_workspace_bytes = 32 * MIB},
    {.device_name = "NVIDIA L40S", .peak_flops = 146e12, .mem_bw = 864e9, .mem_bytes = 46080 * MIB,
     .launch_us = 5.0, .sm_count = 142, .matmul_workspace_bytes = 4 * MIB},
};
static const unsigned char MIXED_DEVICE_OF[4] = {0, 0, 1, 1};

/* The H200 pair over an NVLink bridge (the figures measured on NV18,
 * DEVICE.md); every pair with an L40S over PCIe 4.0 x16 peer-to-peer
 * through a switch: 32 GB/s per direction on paper, 25 GB/s assumed
 * achievable, 10 us for a small message (assumed). */
static const spec_link MIXED_LINKS[] = {
    {.latency_us = 15.0, .bandwidth = 390e9, .kind = "nvlink"},
    {.latency_us = 10.0, .bandwidth = 25e9, .kind = "pcie4-switch"},
};
static const unsigned char MIXED_LINK_OF[16] = {
    0, 0, 1, 1,
    0, 0, 1, 1,
    1, 1, 0, 1,
    1, 1, 1, 0,
};

/* 8 x H200 NVL-style: NVLink bridges join pairs (0,1) (2,3) (4,5) (6,7);
 * the pairs talk over PCIe 5.0 x16 through a switch on their CPU socket
 * (devices 0-3 on socket 0, 4-7 on socket 1), and across sockets through
 * the CPUs. The pair link is the NV18 measurement; the PCIe figures are
 * assumptions (64 GB/s per direction on paper, 50 GB/s achievable within a
 * switch, 20 GB/s and 20 us across the socket interconnect). */
static const spec_link PAIRS_LINKS[] = {
    {.latency_us = 15.0, .bandwidth = 390e9, .kind = "nvlink-bridge"},
    {.latency_us = 10.0, .bandwidth = 50e9, .kind = "pcie5-switch"},
    {.latency_us = 20.0, .bandwidth = 20e9, .kind = "pcie5-cross-socket"},
};
static const unsigned char PAIRS_LINK_OF[64] = {
    0, 0, 1, 1, 2, 2, 2, 2,
    0, 0, 1, 1, 2, 2, 2, 2,
    1, 1, 0, 0, 2, 2, 2, 2,
    1, 1, 0, 0, 2, 2, 2, 2,
    2, 2, 2, 2, 0, 0, 1, 1,
    2, 2, 2, 2, 0, 0, 1, 1,
    2, 2, 2, 2, 1, 1, 0, 0,
    2, 2, 2, 2, 1, 1, 0, 0,
};

static const machine_spec SPECS[] = {
    {
        .name = "t4x4-pcie",
        .description = "4 x Tesla T4 (16 GB), PCIe 3.0 x16, peer traffic through the host bridge",
        .device_name = "Tesla T4",
        .n_devices = 4,
        /* 2560 CUDA cores x 2 FLOP x 1.59 GHz boost = 8.1 TFLOP/s fp32. The
         * 65 TFLOP/s figure is fp16 tensor-core math, which fp32 training
         * does not use, and Turing has no TF32. */
        .peak_flops = 8.1e12,
        /* 256-bit GDDR6 at 10 Gbit/s per pin = 320 GB/s (datasheet). */
        .mem_bw = 320e9,
        /* 16 GB card; with ECC on, nvidia-smi reports 15,360 MiB = 15 GiB. */
        .mem_bytes = 15360 * MIB,
        /* Kernel launch overhead on a PCIe-attached card, typically 4-6 us. */
        .launch_us = 5.0,
        .sm_count = 40,
        /* cuBLAS recommends a 4 MiB workspace before Hopper (cublasSetWorkspace). */
        .matmul_workspace_bytes = 4 * MIB,
        /* Cloud 4 x T4 hosts put the cards behind host bridges without P2P,
         * so a device-to-device copy is staged through host memory: ~10 GB/s
         * effective per direction of PCIe 3.0 x16's 15.75 GB/s, and ~20 us to
         * get a small message across (two DMA hops plus synchronisation). */
        .link_latency_us = 20.0,
        .link_bandwidth = 10e9,
        .link_kind = "pcie3-host",
    },
    {
        .name = "h200x2-nvlink",
        .description = "2 x H200 (141 GB), NVLink 4 (NV18)",
        .device_name = "NVIDIA H200",
        .n_devices = 2,
        /* TF32 dense tensor-core math: 495 TFLOP/s on paper; a cuBLAS-class
         * 8192^3 GEMM measured 395 TFLOP/s on the project's H200 (DEVICE.md),
         * so 400 TFLOP/s is the achievable ceiling. */
        .peak_flops = 400e12,
        /* HBM3e at 4.8 TB/s (datasheet; h200x2.json); a 4 GiB device copy
         * measured 4.27 TB/s, so real kernels sit 10-20% under this ceiling. */
        .mem_bw = SPEC_H200_HBM_BW,
        /* 141 GB card; nvidia-smi reports 143,771 MiB on the project's H200
         * (h200x2.json). */
        .mem_bytes = SPEC_H200_HBM_BYTES,
        /* Launch overhead on Hopper with a recent driver, about 4 us. */
        .launch_us = 4.0,
        .sm_count = SPEC_H200_SM_COUNT,
        /* cuBLAS recommends a 32 MiB workspace on Hopper (cublasSetWorkspace). */
        .matmul_workspace_bytes = 32 * MIB,
        /* Peer copy GPU0 -> GPU1 measured 4 KB in 15 us and 823 MB in 2.19 ms
         * (394 GB/s) over NV18 (DEVICE.md); 450 GB/s per direction on paper. */
        .link_latency_us = 15.0,
        .link_bandwidth = 390e9,
        .link_kind = "nvlink",
    },
    {
        .name = "h200x4-nvlink",
        .description = "4 x H200 (141 GB), NVLink 4 through NVSwitch (offline studies)",
        .device_name = "NVIDIA H200",
        .n_devices = 4,
        /* Same device and per-pair link as h200x2-nvlink: on an NVSwitch
         * system every pair gets the full per-direction NVLink bandwidth. */
        .peak_flops = 400e12,
        .mem_bw = SPEC_H200_HBM_BW,
        .mem_bytes = SPEC_H200_HBM_BYTES,
        .launch_us = 4.0,
        .sm_count = SPEC_H200_SM_COUNT,
        .matmul_workspace_bytes = 32 * MIB,
        .link_latency_us = 15.0,
        .link_bandwidth = 390e9,
        .link_kind = "nvlink",
    },
    {
        .name = "h200x2-l40sx2",
        .description = "2 x H200 (141 GB, NVLink pair) + 2 x L40S (48 GB), PCIe 4.0 between types (offline studies)",
        .device_name = "NVIDIA H200",
        .n_devices = 4,
        /* device 0's figures (an H200) and the default link (NVLink) */
        .peak_flops = 400e12,
        .mem_bw = SPEC_H200_HBM_BW,
        .mem_bytes = SPEC_H200_HBM_BYTES,
        .launch_us = 4.0,
        .sm_count = SPEC_H200_SM_COUNT,
        .matmul_workspace_bytes = 32 * MIB,
        .link_latency_us = 15.0,
        .link_bandwidth = 390e9,
        .link_kind = "nvlink",
        .device_types = MIXED_DEVICES,
        .device_of = MIXED_DEVICE_OF,
        .link_types = MIXED_LINKS,
        .link_of = MIXED_LINK_OF,
    },
    {
        .name = "h200x8-nvpairs",
        .description = "8 x H200 (141 GB), NVLink bridge pairs, PCIe 5.0 between pairs and across 2 sockets "
                       "(offline studies)",
        .device_name = "NVIDIA H200",
        .n_devices = 8,
        .peak_flops = 400e12,
        .mem_bw = SPEC_H200_HBM_BW,
        .mem_bytes = SPEC_H200_HBM_BYTES,
        .launch_us = 4.0,
        .sm_count = SPEC_H200_SM_COUNT,
        .matmul_workspace_bytes = 32 * MIB,
        .link_latency_us = 15.0,
        .link_bandwidth = 390e9,
        .link_kind = "nvlink-bridge",
        .link_types = PAIRS_LINKS,
        .link_of = PAIRS_LINK_OF,
    },
};
#define N_SPECS ((int)(sizeof SPECS / sizeof SPECS[0]))

/* AdamW touches 16 bytes per parameter on read (param, grad, m, v) and 12 on
 * write (param, m, v), all fp32. */
#define ADAMW_BYTES_PER_PARAM 28.0

int spec_count(void) { return N_SPECS; }

const machine_spec *spec_get(int i) { return (i >= 0 && i < N_SPECS) ? &SPECS[i] : NULL; }

const machine_spec *spec_find(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < N_SPECS; i++)
        if (!strcmp(SPECS[i].name, name)) return &SPECS[i];
    return NULL;
}

void spec_names(char *buf, size_t len) {
    if (!buf || len == 0) return;
    buf[0] = 0;
    size_t off = 0;
    for (int i = 0; i < N_SPECS && off < len; i++) {
        int w = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", SPECS[i].name);
        if (w < 0) break;
        off += (size_t)w;
    }
}

static int node_uses_matmul(op_kind k) { return k == OP_ATTENTION || k == OP_MLP || k == OP_HEAD; }

spec_device spec_device_at(const machine_spec *s, int d) {
    if (s->device_types && s->device_of && d >= 0 && d < s->n_devices) return s->device_types[s->device_of[d]];
    spec_device x = {s->device_name, s->peak_flops, s->mem_bw, s->mem_bytes, s->launch_us, s->sm_count,
                     s->matmul_workspace_bytes};
    return x;
}

spec_link spec_link_at(const machine_spec *s, int a, int b) {
    if (s->link_types && s->link_of && a >= 0 && b >= 0 && a < s->n_devices && b < s->n_devices)
        return s->link_types[s->link_of[a * s->n_devices + b]];
    spec_link x = {s->link_latency_us, s->link_bandwidth, s->link_kind};
    return x;
}

int spec_is_uniform(const machine_spec *s) {
    for (int d = 1; d < s->n_devices; d++) {
        spec_device x = spec_device_at(s, 0), y = spec_device_at(s, d);
        if (x.peak_flops != y.peak_flops || x.mem_bw != y.mem_bw || x.mem_bytes != y.mem_bytes ||
            x.launch_us != y.launch_us || x.matmul_workspace_bytes != y.matmul_workspace_bytes)
            return 0;
    }
    spec_link l0 = spec_link_at(s, 0, 1 % (s->n_devices > 1 ? s->n_devices : 1));
    for (int a = 0; a < s->n_devices; a++)
        for (int b = 0; b < s->n_devices; b++) {
            if (a == b) continue;
            spec_link l = spec_link_at(s, a, b);
            if (l.latency_us != l0.latency_us || l.bandwidth != l0.bandwidth) return 0;
        }
    return 1;
}

double spec_device_node_cost_us(const spec_device *s, const graph_node *n, int b, cost_phase ph) {
    if (ph == PHASE_OPT) {
        if (n->params <= 0) return 0.0;
        return (double)n->params * ADAMW_BYTES_PER_PARAM / s->mem_bw * 1e6 + s->launch_us;
    }
    double flops = (ph == PHASE_FWD ? n->fwd_flops_per_sample : n->bwd_flops_per_sample) * b;
    double bytes = (ph == PHASE_FWD ? n->fwd_bytes_per_sample : n->bwd_bytes_per_sample) * b;
    int kernels = ph == PHASE_FWD ? n->fwd_kernels : n->bwd_kernels;
    double t_compute = flops / s->peak_flops, t_memory = bytes / s->mem_bw;
    return (t_compute > t_memory ? t_compute : t_memory) * 1e6 + kernels * s->launch_us;
}

double spec_node_cost_us(const machine_spec *s, const graph_node *n, int b, cost_phase ph) {
    spec_device d = spec_device_at(s, 0);
    return spec_device_node_cost_us(&d, n, b, ph);
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

pl_status spec_profile_build(const machine_spec *s, const graph *g, const int *mb_sizes, int n_mb,
                             profile_data **out) {
    if (out) *out = NULL;
    if (!s || !g || !mb_sizes || !out || n_mb < 1 || s->n_devices < 1)
        return PL_ERR_INVALID;
    int64_t workspace = 0;
    for (int d = 0; d < s->n_devices; d++) {
        spec_device x = spec_device_at(s, d);
        if (!(x.peak_flops > 0) || !(x.mem_bw > 0)) return PL_ERR_INVALID;
        if (x.matmul_workspace_bytes > workspace) workspace = x.matmul_workspace_bytes;
        for (int e = 0; e < s->n_devices; e++)
            if (e != d && !(spec_link_at(s, d, e).bandwidth > 0)) return PL_ERR_INVALID;
    }
    for (int k = 0; k < n_mb; k++)
        if (mb_sizes[k] <= 0) return PL_ERR_INVALID;

    pl_status st = PL_OK;
    profile_data *p = NULL;
    int *sizes = malloc(sizeof *sizes * (size_t)n_mb);
    if (!sizes) return PL_ERR_NOMEM;
    memcpy(sizes, mb_sizes, sizeof *sizes * (size_t)n_mb);
    qsort(sizes, (size_t)n_mb, sizeof *sizes, cmp_int);
    int n_unique = 0;
    for (int k = 0; k < n_mb; k++)
        if (n_unique == 0 || sizes[k] != sizes[n_unique - 1]) sizes[n_unique++] = sizes[k];

    st = profile_data_create(s->n_devices, g->n_nodes, n_unique, sizes, &p);
    if (st != PL_OK) goto out_free_sizes;
    snprintf(p->machine, sizeof p->machine, "%s", s->name);
    snprintf(p->source, sizeof p->source, "spec");
    gpt_config_key(&g->cfg, p->graph_key, sizeof p->graph_key);

    for (int d = 0; d < s->n_devices; d++) {
        spec_device x = spec_device_at(s, d);
        profile_device *dev = &p->devices[d];
        snprintf(dev->name, sizeof dev->name, "%s", x.device_name);
        dev->mem_bytes = x.mem_bytes;
        dev->peak_flops = x.peak_flops;
        dev->mem_bw = x.mem_bw;
        dev->launch_us = x.launch_us;
        dev->sm_count = x.sm_count;
        for (int k = 0; k < n_unique; k++)
            for (int i = 0; i < g->n_nodes; i++)
                for (int ph = 0; ph < PHASE_COUNT; ph++)
                    p->cost_us[profile_cost_index(p, d, k, i, ph)] =
                        spec_device_node_cost_us(&x, &g->nodes[i], sizes[k], (cost_phase)ph);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        profile_node_mem *m = &p->node_mem[i];
        m->param_bytes = graph_param_bytes(n);
        m->act_bytes_per_sample = n->act_bytes_per_sample;
        m->out_bytes_per_sample = n->out_bytes_per_sample;
        m->workspace_bytes = node_uses_matmul(n->kind) ? workspace : 0;
    }

    double bytes[SPEC_CURVE_POINTS], us[SPEC_CURVE_POINTS];
    for (int j = 0; j < SPEC_CURVE_POINTS; j++)
        /* 2^(12 + j/2), rounded to whole bytes: 4096, 5793, 8192, ... */
        bytes[j] = floor(ldexp(1.0, 12 + j / 2) * ((j % 2) ? sqrt(2.0) : 1.0) + 0.5);
    for (int a = 0; a < s->n_devices; a++)
        for (int b = 0; b < s->n_devices; b++) {
            if (a == b) continue;
            spec_link k = spec_link_at(s, a, b);
            for (int j = 0; j < SPEC_CURVE_POINTS; j++) us[j] = k.latency_us + bytes[j] / k.bandwidth * 1e6;
            profile_link *l = &p->links[a * s->n_devices + b];
            l->latency_us = k.latency_us;
            l->bandwidth = k.bandwidth;
            if ((st = profile_link_set_curve(l, SPEC_CURVE_POINTS, bytes, us)) != PL_OK) goto out_free_profile;
        }
    free(sizes);
    *out = p;
    return PL_OK;

out_free_profile:
    profile_data_destroy(p);
out_free_sizes:
    free(sizes);
    return st;
}
