/*
 * collective.c: NCCL-style collective and point-to-point times on a cluster
 * description (inputs/cluster.h), as a bandwidth / latency model of the
 * algorithms NCCL picks from (ring, tree, hierarchical); collective.h gives
 * the figures' definitions (nccl-tests' algbw and busbw).
 *
 * Where a group lives. GPU g sits on node (host) g / gpus_per_node, in
 * NVLink domain g / cluster_domain_gpus (a node, or a rack of several such
 * as an NVL72) and in pod g / pod_gpus (pod_gpus = 0: one pod). The links
 * follow the domains, not the hosts: members of one domain talk over
 * NVLink whichever tray they sit in, members of two domains over the
 * network. So below, "node" in the algorithms means the NVLink domain: a
 * group's shape is its member count n, the domains N it touches, the pods
 * P it touches and the most members it has in one domain (ppn); the hosts
 * it touches are counted for the report (coll_estimate.n_nodes) only. The
 * NIC share per GPU is its host's: nics_per_node * nic_bw / gpus_per_node,
 * so a domain's egress is ppn NIC shares whatever its host count.
 *
 * The links a ring uses, per direction, as bandwidth per member:
 *   intra  intra_bw (NVSwitch: every GPU reaches every other at it)
 *   inter  a node's egress: ppn * nic_share, with nic_share = nics_per_node
 *          * nic_bw / gpus_per_node per GPU (rail-optimised fat tree, full
 *          bisection inside a pod). NCCL runs one channel per NIC; each
 *          channel's ring leaves every node once, so a node's egress carries
 *          as many bytes as one member sends, through the ppn NIC shares its
 *          members own (ppn = 1: a data-parallel group under tp = 8 has one
 *          GPU per node and one NIC's worth of bandwidth).
 *   pod    inter / pod_oversubscription for a group spanning pods (the
 *          uplinks between pods are shared that much when every group of
 *          the layout runs its collective at once, as data parallelism does)
 * The ring runs at the slowest of the links it crosses; every link figure
 * is multiplied by the cluster's collective_efficiency (the fraction of the
 * wire NCCL's kernels reach).
 *
 * Times, for S bytes over n ranks, B the ring's bottleneck bandwidth and
 * lat the per-step latency of its slowest link (inter_latency_us once the
 * ring leaves a node, else intra_latency_us):
 *   ring all-reduce        2(n-1)/n * S / B + 2(n-1) * lat
 *   ring all-gather / RS    (n-1)/n * S / B +  (n-1) * lat
 *   tree all-reduce (N > 1 nodes, NCCL's double binary tree: a chain inside
 *   each node, two binary trees over the nodes, each carrying half):
 *                          2 * S / Bt + 2 * (ceil(log2 N) * lat_inter
 *                          + (ppn - 1) * lat_intra), Bt = min(intra,
 *                          ppn * nic_share [/ oversubscription]): every node
 *                          sends S up and S down in total.
 *   hierarchical (N > 1 and ppn > 1): reduce-scatter inside each node over
 *   ppn members at intra, the collective over N nodes on the nodes' 1/ppn
 *   shards in parallel (each member on its own NIC share), all-gather
 *   inside each node; for all-gather / reduce-scatter only the matching
 *   half. Its inter-node part moves the same bytes through a node's egress
 *   as the flat ring does, but pays N - 1 inter-node latencies instead of
 *   n - 1.
 * Every collective call also pays the cluster's coll_base_latency_us once
 * (NCCL's baseLat). The cheapest applicable algorithm wins, as NCCL's
 * tuner does with its own version of these figures. With ppn not the same
 * on every node (a ragged
 * group) the largest ppn is used for the intra-node parts and the smallest
 * for the egress: the slowest node bounds the ring. On a mixed cluster
 * (node groups with their own fabric) the slowest member's intra-node
 * bandwidth and NIC share and the largest intra-node latency are used.
 * A group that needs a link the cluster lacks (two nodes and no network)
 * is PL_ERR_INVALID; a one-node cluster needs no network.
 */
#include "collective.h"

#include <math.h>
#include <stdlib.h>

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    int n, n_nodes, n_pods;
    int n_domains;        /* NVLink domains touched: what decides the links (below) */
    int ppn_max, ppn_min; /* members on the fullest / emptiest domain touched */
    double intra_bw;      /* slowest member's intra-node bandwidth */
    double intra_lat;     /* largest member's intra-node latency */
    double nic;           /* smallest member's NIC share (bytes/s per GPU) */
} group_shape;

/* Shape of a sorted, distinct rank list; the fabric figures of a mixed
 * cluster's node groups come from cluster_*_of. */
static void shape_of(const cluster *c, const int64_t *r, int n, group_shape *s) {
    s->n = n;
    s->n_nodes = 0;
    s->n_domains = 0;
    s->n_pods = 0;
    s->ppn_max = 0;
    s->ppn_min = n;
    s->intra_bw = INFINITY;
    s->intra_lat = 0;
    s->nic = INFINITY;
    int64_t gpn = c->gpus_per_node, dom = cluster_domain_gpus(c), pod = c->pod_gpus > 0 ? c->pod_gpus : INT64_MAX;
    int64_t last_node = -1, last_dom = -1, last_pod = -1;
    int run = 0;
    for (int i = 0; i < n; i++) {
        int64_t node = r[i] / gpn, d = r[i] / dom, p = r[i] / pod;
        if (node != last_node) {
            s->n_nodes++;
            last_node = node;
        }
        if (d != last_dom) {
            if (run > 0) {
                if (run > s->ppn_max) s->ppn_max = run;
                if (run < s->ppn_min) s->ppn_min = run;
            }
            s->n_domains++;
            run = 0;
            last_dom = d;
            double bw = cluster_intra_bw_of(c, r[i]), lat = cluster_intra_latency_of(c, r[i]);
            double nic = cluster_nic_bw_per_gpu_of(c, r[i]);
            if (bw < s->intra_bw) s->intra_bw = bw;
            if (lat > s->intra_lat) s->intra_lat = lat;
            if (nic < s->nic) s->nic = nic;
        }
        if (p != last_pod) {
            s->n_pods++;
            last_pod = p;
        }
        run++;
    }
    if (run > s->ppn_max) s->ppn_max = run;
    if (run < s->ppn_min) s->ppn_min = run;
}

/* Bandwidth through a node's egress for a group with ppn members there,
 * spanning `pods` pods; per direction, before collective_efficiency. */
static double egress_bw(const cluster *c, const group_shape *s, int ppn) {
    double bw = ppn * s->nic;
    if (s->n_pods > 1) bw /= c->pod_oversubscription;
    return bw;
}

static void finish(coll_estimate *e, coll_kind k, double bytes, double time_us, double lat_us, double link_bw,
                   const char *algo, const group_shape *s) {
    e->time_us = time_us;
    e->latency_us = lat_us;
    e->link_bw = link_bw;
    e->algo = algo;
    e->source = "model";
    e->n_ranks = s->n;
    e->n_nodes = s->n_nodes;
    e->n_domains = s->n_domains;
    e->n_pods = s->n_pods;
    e->algbw = time_us > 0 ? bytes / (time_us * 1e-6) : 0.0;
    double f = (k == COLL_ALL_REDUCE ? 2.0 : 1.0) * (s->n - 1) / s->n;
    e->busbw = e->algbw * f;
}

pl_status coll_time(const cluster *c, coll_kind k, const int64_t *ranks, int n, double bytes,
                    coll_estimate *out) {
    if (!c || !ranks || !out || n < 1 || !(bytes >= 0) || k < 0 || k >= COLL_KIND_COUNT) return PL_ERR_INVALID;
    if (c->gpus_per_node < 1 || !(c->pod_oversubscription >= 1) || !(c->collective_efficiency > 0))
        return PL_ERR_INVALID;
    int64_t world = cluster_n_gpus(c);
    /* Sorted and distinct: the common case (layout_group_ranks returns
     * coordinate order, which is ascending) needs no copy. */
    const int64_t *r = ranks;
    int64_t *copy = NULL;
    for (int i = 1; i < n; i++)
        if (ranks[i] <= ranks[i - 1]) {
            copy = malloc((size_t)n * sizeof *copy);
            if (!copy) return PL_ERR_NOMEM;
            for (int j = 0; j < n; j++) copy[j] = ranks[j];
            qsort(copy, (size_t)n, sizeof *copy, cmp_i64);
            r = copy;
            break;
        }
    pl_status st = PL_OK;
    for (int i = 0; i < n; i++)
        if (r[i] < 0 || r[i] >= world || (i > 0 && r[i] == r[i - 1])) st = PL_ERR_INVALID;
    group_shape s;
    if (st == PL_OK) shape_of(c, r, n, &s);
    free(copy);
    if (st != PL_OK) return st;
    /* a link the group needs must exist: NVSwitch for two members on a
     * node, a network for two nodes */
    if ((s.ppn_max > 1 && !(s.intra_bw > 0)) || (s.n_domains > 1 && !(s.nic > 0))) return PL_ERR_INVALID;

    if (n == 1) {
        *out = (coll_estimate){0};
        finish(out, k, bytes, 0.0, 0.0, 0.0, "none", &s);
        return PL_OK;
    }
    const double eff = c->collective_efficiency, base = c->coll_base_latency_us > 0 ? c->coll_base_latency_us : 0;
    const double lat_intra = s.intra_lat, lat_inter = c->inter_latency_us;
    const double intra = s.intra_bw * eff;
    const int ar = (k == COLL_ALL_REDUCE);
    const double steps = (ar ? 2.0 : 1.0) * (n - 1); /* ring steps */
    const double frac = steps / n;                    /* of S through each member / each egress */

    if (s.n_domains == 1) { /* one NVLink domain (a node, or a rack): a ring over NVSwitch */
        double lat = base + steps * lat_intra;
        finish(out, k, bytes, frac * bytes / intra * 1e6 + lat, lat, intra, "ring", &s);
        return PL_OK;
    }
    /* Flat ring over every member: each member sends frac*S to the next;
     * a node's egress carries frac*S (one ring edge leaves each node per
     * channel, the channels share the node's NICs). */
    double egress = egress_bw(c, &s, s.ppn_min) * eff;
    double ring_bw = egress < intra ? egress : intra;
    double ring_lat = base + steps * lat_inter;
    double ring_us = frac * bytes / ring_bw * 1e6 + ring_lat;
    const char *algo = "ring";
    double best = ring_us, best_lat = ring_lat, best_bw = ring_bw;

    if (ar) { /* double binary tree */
        double tbw = ring_bw;
        double tlat = base + 2.0 * (ceil(log2((double)s.n_domains)) * lat_inter + (s.ppn_max - 1) * lat_intra);
        double t = 2.0 * bytes / tbw * 1e6 + tlat;
        if (t < best) best = t, best_lat = tlat, best_bw = tbw, algo = "tree";
    }
    if (s.ppn_max > 1) { /* hierarchical: intra RS, inter over shards, intra AG */
        int ppn = s.ppn_max, N = s.n_domains;
        double intra_steps = (ppn - 1.0), inter_steps = (ar ? 2.0 : 1.0) * (N - 1);
        double intra_half = (ppn - 1.0) / ppn * bytes / intra * 1e6 + intra_steps * lat_intra;
        /* each member's shard S/ppn goes over its own NIC share */
        double member_bw = egress_bw(c, &s, 1) * eff;
        if (member_bw > intra) member_bw = intra;
        double inter = inter_steps / N * (bytes / ppn) / member_bw * 1e6 + inter_steps * lat_inter;
        double t = base + (ar ? 2.0 : 1.0) * intra_half + inter;
        double hlat = base + (ar ? 2.0 : 1.0) * intra_steps * lat_intra + inter_steps * lat_inter;
        if (t < best) best = t, best_lat = hlat, best_bw = member_bw, algo = "hierarchical";
    }
    finish(out, k, bytes, best, best_lat, best_bw, algo, &s);
    return PL_OK;
}

double p2p_time_us(const cluster *c, int64_t src, int64_t dst, double bytes) {
    if (!c || src == dst || c->gpus_per_node < 1) return 0.0;
    double eff = c->p2p_efficiency > 0 ? c->p2p_efficiency : 1.0;
    if (cluster_domain_of(c, src) == cluster_domain_of(c, dst)) { /* NVLink */
        double bw = cluster_intra_bw_of(c, src), lat = cluster_intra_latency_of(c, src);
        return lat + bytes / (bw * eff) * 1e6;
    }
    double a = cluster_nic_bw_per_gpu_of(c, src), b = cluster_nic_bw_per_gpu_of(c, dst), bw = a < b ? a : b;
    if (c->pod_gpus > 0 && src / c->pod_gpus != dst / c->pod_gpus) bw /= c->pod_oversubscription;
    return c->inter_latency_us + bytes / (bw * eff) * 1e6;
}
