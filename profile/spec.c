/*
 * spec.c: roofline profiles from built-in machine descriptions.
 *
 * The figures below are *effective* ceilings for what this project's engine
 * does (fp32 storage, fp32 or TF32 matmuls, one kernel stream per device),
 * not the marketing peaks; each one says where it comes from. A spec profile
 * is a starting point for the offline path; a measured profile replaces it.
 */
#include "spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024LL * 1024LL)

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
        /* HBM3e at 4.8 TB/s (datasheet); a 4 GiB device copy measured
         * 4.27 TB/s, so real kernels sit 10-20% under this ceiling. */
        .mem_bw = 4.8e12,
        /* 141 GB card; nvidia-smi reports 143,771 MiB on the project's H200. */
        .mem_bytes = 143771 * MIB,
        /* Launch overhead on Hopper with a recent driver, about 4 us. */
        .launch_us = 4.0,
        .sm_count = 132,
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
        .mem_bw = 4.8e12,
        .mem_bytes = 143771 * MIB,
        .launch_us = 4.0,
        .sm_count = 132,
        .matmul_workspace_bytes = 32 * MIB,
        .link_latency_us = 15.0,
        .link_bandwidth = 390e9,
        .link_kind = "nvlink",
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

double spec_node_cost_us(const machine_spec *s, const graph_node *n, int b, cost_phase ph) {
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

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

pl_status spec_profile_build(const machine_spec *s, const graph *g, const int *mb_sizes, int n_mb,
                             profile_data **out) {
    if (out) *out = NULL;
    if (!s || !g || !mb_sizes || !out || n_mb < 1 || s->n_devices < 1 || s->peak_flops <= 0 ||
        s->mem_bw <= 0 || s->link_bandwidth <= 0)
        return PL_ERR_INVALID;
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
        profile_device *dev = &p->devices[d];
        snprintf(dev->name, sizeof dev->name, "%s", s->device_name);
        dev->mem_bytes = s->mem_bytes;
        dev->peak_flops = s->peak_flops;
        dev->mem_bw = s->mem_bw;
        dev->launch_us = s->launch_us;
        dev->sm_count = s->sm_count;
        for (int k = 0; k < n_unique; k++)
            for (int i = 0; i < g->n_nodes; i++)
                for (int ph = 0; ph < PHASE_COUNT; ph++)
                    p->cost_us[profile_cost_index(p, d, k, i, ph)] =
                        spec_node_cost_us(s, &g->nodes[i], sizes[k], (cost_phase)ph);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        profile_node_mem *m = &p->node_mem[i];
        m->param_bytes = graph_param_bytes(n);
        m->act_bytes_per_sample = n->act_bytes_per_sample;
        m->out_bytes_per_sample = n->out_bytes_per_sample;
        m->workspace_bytes = node_uses_matmul(n->kind) ? s->matmul_workspace_bytes : 0;
    }

    double bytes[SPEC_CURVE_POINTS], us[SPEC_CURVE_POINTS];
    for (int j = 0; j < SPEC_CURVE_POINTS; j++) {
        /* 2^(12 + j/2), rounded to whole bytes: 4096, 5793, 8192, ... */
        bytes[j] = floor(ldexp(1.0, 12 + j / 2) * ((j % 2) ? sqrt(2.0) : 1.0) + 0.5);
        us[j] = s->link_latency_us + bytes[j] / s->link_bandwidth * 1e6;
    }
    for (int a = 0; a < s->n_devices; a++)
        for (int b = 0; b < s->n_devices; b++) {
            if (a == b) continue;
            profile_link *l = &p->links[a * s->n_devices + b];
            l->latency_us = s->link_latency_us;
            l->bandwidth = s->link_bandwidth;
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
