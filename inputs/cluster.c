/*
 * cluster.c: counting, GPU lookup and validation of a cluster description
 * (cluster.h). GPUs are numbered node by node and nodes group by group, so
 * finding a GPU's group is a walk over at most CLUSTER_MAX_GROUPS groups.
 */
#include "cluster.h"

#include <math.h>
#include <stdio.h>

int64_t cluster_n_nodes(const cluster *c) {
    int64_t n = 0;
    for (int i = 0; i < c->n_groups && i < CLUSTER_MAX_GROUPS; i++) n += c->groups[i].n_nodes;
    return n;
}

int64_t cluster_n_gpus(const cluster *c) { return cluster_n_nodes(c) * c->gpus_per_node; }

int64_t cluster_node_of(const cluster *c, int64_t g) { return c->gpus_per_node > 0 ? g / c->gpus_per_node : 0; }

int64_t cluster_domain_gpus(const cluster *c) {
    return c->nvlink_domain_gpus > 0 ? c->nvlink_domain_gpus : c->gpus_per_node;
}

int64_t cluster_domain_of(const cluster *c, int64_t g) {
    int64_t d = cluster_domain_gpus(c);
    return d > 0 ? g / d : 0;
}

int cluster_group_of(const cluster *c, int64_t g) {
    int64_t node = cluster_node_of(c, g), first = 0;
    int last = 0;
    for (int i = 0; i < c->n_groups && i < CLUSTER_MAX_GROUPS; i++) {
        last = i;
        if (node < first + c->groups[i].n_nodes) return i;
        first += c->groups[i].n_nodes;
    }
    return last; /* out of range: the last group (callers keep g in range) */
}

const cluster_gpu *cluster_gpu_of(const cluster *c, int64_t g) {
    int t = c->groups[cluster_group_of(c, g)].gpu_type;
    if (t < 0 || t >= c->n_gpu_types) t = 0;
    return &c->gpus[t];
}

double cluster_intra_bw_of(const cluster *c, int64_t g) {
    const cluster_group *gr = &c->groups[cluster_group_of(c, g)];
    return gr->intra_bw > 0 ? gr->intra_bw : c->intra_bw;
}

double cluster_intra_latency_of(const cluster *c, int64_t g) {
    const cluster_group *gr = &c->groups[cluster_group_of(c, g)];
    return gr->intra_latency_us > 0 ? gr->intra_latency_us : c->intra_latency_us;
}

double cluster_nic_bw_per_gpu_of(const cluster *c, int64_t g) {
    const cluster_group *gr = &c->groups[cluster_group_of(c, g)];
    int nics = gr->nics_per_node > 0 ? gr->nics_per_node : c->nics_per_node;
    double bw = gr->nic_bw > 0 ? gr->nic_bw : c->nic_bw;
    return c->gpus_per_node > 0 ? nics * bw / c->gpus_per_node : 0.0;
}

/* finite and >= 0 */
static int nonneg(double x) { return isfinite(x) && x >= 0; }

pl_status cluster_use_domain_gpus(cluster *c, int64_t n, int64_t job_gpus, char *msg, size_t len) {
    if (!c) return pl_fail(msg, len, PL_ERR_INVALID, "cluster_use_domain_gpus: NULL cluster");
    const int64_t dom = cluster_domain_gpus(c), gpn = c->gpus_per_node;
    if (n < 1 || gpn < 1 || n % gpn != 0 || n > dom)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "--domain-gpus %lld: GPUs used per NVLink domain must be a multiple of the %lld GPUs of a node "
                       "and at most the domain's %lld (cluster %s)", (long long)n, (long long)gpn, (long long)dom, c->name);
    if (job_gpus > 0 && job_gpus % n != 0)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "--domain-gpus %lld must divide the job's %lld GPUs (every NVLink domain used alike)", (long long)n,
                       (long long)job_gpus);
    /* each group keeps the nodes of its domains' used parts: domains x n / gpn */
    cluster t = *c;
    for (int g = 0; g < t.n_groups; g++) {
        const int64_t gpus = (int64_t)t.groups[g].n_nodes * gpn, domains = gpus / dom;
        if (domains < 1 && gpus < n)
            return pl_fail(msg, len, PL_ERR_INVALID, "--domain-gpus %lld: node group %d of cluster %s has only %lld GPUs",
                           (long long)n, g, c->name, (long long)gpus);
        t.groups[g].n_nodes = (int)((domains > 0 ? domains : 1) * (n / gpn));
    }
    t.nvlink_domain_gpus = (int)n;
    *c = t;
    return PL_OK;
}

pl_status cluster_validate(const cluster *c, char *msg, size_t len) {
    if (c->n_gpu_types < 1 || c->n_gpu_types > CLUSTER_MAX_GPU_TYPES)
        return pl_fail(msg, len, PL_ERR_INVALID, "cluster needs 1 to %d GPU types, not %d", CLUSTER_MAX_GPU_TYPES,
                       c->n_gpu_types);
    if (c->n_groups < 1 || c->n_groups > CLUSTER_MAX_GROUPS)
        return pl_fail(msg, len, PL_ERR_INVALID, "cluster needs 1 to %d node groups, not %d", CLUSTER_MAX_GROUPS,
                       c->n_groups);
    if (c->gpus_per_node < 1 || c->gpus_per_node > 1024)
        return pl_fail(msg, len, PL_ERR_INVALID, "gpus_per_node must be 1 to 1024, not %d", c->gpus_per_node);
    for (int i = 0; i < c->n_gpu_types; i++) {
        const cluster_gpu *g = &c->gpus[i];
        int any = 0;
        for (int p = 0; p < PRECISION_COUNT; p++) {
            if (!nonneg(g->peak_flops[p]))
                return pl_fail(msg, len, PL_ERR_INVALID, "GPU type %d (%s): peak %s must be a finite number >= 0", i,
                               g->name, precision_name((precision)p));
            any |= g->peak_flops[p] > 0;
        }
        if (!any)
            return pl_fail(msg, len, PL_ERR_INVALID, "GPU type %d (%s) has no positive peak FLOP/s", i, g->name);
        if (!(nonneg(g->hbm_bw) && g->hbm_bw > 0))
            return pl_fail(msg, len, PL_ERR_INVALID, "GPU type %d (%s): HBM bandwidth must be positive", i, g->name);
        if (g->hbm_bytes <= 0)
            return pl_fail(msg, len, PL_ERR_INVALID, "GPU type %d (%s): memory size must be positive", i, g->name);
        if (g->sm_count < 1)
            return pl_fail(msg, len, PL_ERR_INVALID, "GPU type %d (%s): sm_count must be at least 1", i, g->name);
        if (!nonneg(g->clock_ghz))
            return pl_fail(msg, len, PL_ERR_INVALID, "GPU type %d (%s): clock must be >= 0", i, g->name);
        if (!nonneg(g->peak_mxfp8) || !nonneg(g->peak_fp4))
            return pl_fail(msg, len, PL_ERR_INVALID, "GPU type %d (%s): peak mxfp8 / fp4 must be finite and >= 0", i,
                           g->name);
    }
    int64_t nodes = 0;
    for (int i = 0; i < c->n_groups; i++) {
        const cluster_group *gr = &c->groups[i];
        if (gr->gpu_type < 0 || gr->gpu_type >= c->n_gpu_types)
            return pl_fail(msg, len, PL_ERR_INVALID, "node group %d names GPU type %d but only 0..%d exist", i,
                           gr->gpu_type, c->n_gpu_types - 1);
        if (gr->n_nodes < 1)
            return pl_fail(msg, len, PL_ERR_INVALID, "node group %d must have at least 1 node", i);
        if (!nonneg(gr->intra_bw) || !nonneg(gr->intra_latency_us) || gr->nics_per_node < 0 || !nonneg(gr->nic_bw))
            return pl_fail(msg, len, PL_ERR_INVALID, "node group %d: fabric overrides must be finite and >= 0", i);
        nodes += gr->n_nodes;
    }
    if (nodes * c->gpus_per_node > ((int64_t)1 << 40))
        return pl_fail(msg, len, PL_ERR_INVALID, "cluster has too many GPUs (%lld nodes of %d)", (long long)nodes,
                       c->gpus_per_node);
    if (!nonneg(c->intra_bw) || (c->gpus_per_node > 1 && !(c->intra_bw > 0)))
        return pl_fail(msg, len, PL_ERR_INVALID, "intra-node bandwidth must be positive (with %d GPUs per node)",
                       c->gpus_per_node);
    if (!nonneg(c->intra_latency_us) || !nonneg(c->inter_latency_us) || !nonneg(c->coll_base_latency_us))
        return pl_fail(msg, len, PL_ERR_INVALID, "latencies must be finite and >= 0");
    if (c->nics_per_node < 0 || !nonneg(c->nic_bw))
        return pl_fail(msg, len, PL_ERR_INVALID, "nics_per_node and nic bandwidth must be >= 0");
    /* NVLink domains: whole nodes, never straddling two node groups */
    const int64_t dom = cluster_domain_gpus(c);
    if (c->nvlink_domain_gpus < 0 || c->nvlink_domain_gpus % c->gpus_per_node != 0)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "nvlink_domain_gpus (%d) must be 0 (one node) or a multiple of gpus_per_node (%d)",
                       c->nvlink_domain_gpus, c->gpus_per_node);
    for (int i = 0; i < c->n_groups; i++)
        if (((int64_t)c->groups[i].n_nodes * c->gpus_per_node) % dom != 0)
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "nvlink_domain_gpus (%lld) does not divide the GPUs of node group %d (%lld)",
                           (long long)dom, i, (long long)c->groups[i].n_nodes * c->gpus_per_node);
    if (nodes * c->gpus_per_node > dom) {
        for (int i = 0; i < c->n_groups; i++) {
            const cluster_group *gr = &c->groups[i];
            int nics = gr->nics_per_node > 0 ? gr->nics_per_node : c->nics_per_node;
            double bw = gr->nic_bw > 0 ? gr->nic_bw : c->nic_bw;
            if (nics < 1 || !(bw > 0))
                return pl_fail(msg, len, PL_ERR_INVALID,
                               "a cluster of %lld NVLink domains needs inter-node adapters (node group %d has %d at %g B/s)",
                               (long long)(nodes * c->gpus_per_node / dom), i, nics, bw);
        }
    }
    if (c->pod_gpus < 0 || (c->pod_gpus > 0 && c->pod_gpus % c->gpus_per_node != 0))
        return pl_fail(msg, len, PL_ERR_INVALID, "pod_gpus (%lld) must be 0 (one pod) or a multiple of gpus_per_node (%d)",
                       (long long)c->pod_gpus, c->gpus_per_node);
    if (!(isfinite(c->pod_oversubscription) && c->pod_oversubscription >= 1))
        return pl_fail(msg, len, PL_ERR_INVALID, "pod_oversubscription must be >= 1 (1 = none, 7 for 1:7)");
    if (!(c->p2p_efficiency > 0 && c->p2p_efficiency <= 1))
        return pl_fail(msg, len, PL_ERR_INVALID, "p2p_efficiency must be in (0, 1]");
    if (!(c->collective_efficiency > 0 && c->collective_efficiency <= 1))
        return pl_fail(msg, len, PL_ERR_INVALID, "collective_efficiency must be in (0, 1]");
    return PL_OK;
}
