/*
 * cluster.h: a cluster description in memory: what the layout simulator
 * knows about GPUs and the wires between them. Loaded from the JSON files
 * users write (data/clusters/NAME.json, documented in docs/clusters.md) by
 * inputs/cluster_file.c; nothing here parses JSON.
 *
 * Units: bytes, bytes per second, FLOP per second, microseconds. Bandwidths
 * are per direction (unidirectional), the way NCCL's bus bandwidth counts
 * them: NVLink 3 at "600 GB/s bidirectional per GPU" is 300e9 here, an HDR
 * adapter of 200 Gb/s is 25e9.
 *
 * Topology: GPUs are numbered node by node (gpus_per_node consecutive ranks
 * per node); nodes are numbered pod by pod (pod_gpus consecutive GPUs per
 * pod). Two groupings of GPUs, kept apart:
 *   node           a host (server, or a compute tray of a rack): it owns
 *                  the network adapters, nics_per_node of them
 *   NVLink domain  the GPUs that reach each other over NVLink switches:
 *                  one node (a DGX H100 or B200: 8 GPUs) or several (a
 *                  GB200 NVL72 rack: 18 trays of 4 GPUs = 72), whole nodes,
 *                  nvlink_domain_gpus consecutive GPUs (0: one node)
 * Within a domain every GPU reaches every other at intra_bw (a switch:
 * NVSwitch; "intra" means inside the domain). Between domains each GPU has
 * nics_per_node / gpus_per_node adapters' worth of nic_bw (rail-optimised
 * fat tree: full bisection inside a pod); traffic that leaves a pod shares
 * uplinks oversubscribed by pod_oversubscription (7 for Llama 3's 1:7).
 *
 * Node groups: a cluster is a list of node groups, each of one GPU type
 * (n_gpu_types >= 1), so a mixed cluster (8 x H100 nodes and 8 x A100 nodes)
 * is one file. Nodes are numbered group by group.
 */
#ifndef PLACER_INPUTS_CLUSTER_H
#define PLACER_INPUTS_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "precision.h"
#include "status.h"

#define CLUSTER_NAME_LEN 64
#define CLUSTER_MAX_GPU_TYPES 4
#define CLUSTER_MAX_GROUPS 8

typedef struct {
    char name[CLUSTER_NAME_LEN];        /* e.g. "NVIDIA H100 SXM 80GB" */
    double peak_flops[PRECISION_COUNT]; /* dense tensor-core FLOP/s by precision; 0: unsupported */
    double hbm_bw;                      /* memory bandwidth, bytes/s */
    int64_t hbm_bytes;                  /* memory per GPU, bytes */
    int sm_count;                       /* streaming multiprocessors (wave quantisation) */
    double clock_ghz;                   /* boost clock (informational) */
    /* block-scaled formats beyond precision.h's list (FP8 recipes: sim/layout/fp8.h);
     * dense FLOP/s, 0: the GPU's tensor cores lack the format */
    double peak_mxfp8;                  /* MXFP8 (an E8M0 scale per 32 elements): Blackwell */
    double peak_fp4;                    /* NVFP4 / MXFP4: Blackwell; recorded, no recipe uses it */
} cluster_gpu;

typedef struct {
    int gpu_type;                       /* index into cluster.gpus */
    int n_nodes;                        /* nodes of this group */
    /* this group's own node fabric (a mixed cluster's A100 and H100 nodes
     * differ); 0 everywhere: the cluster-wide figures below */
    double intra_bw;                    /* per GPU per direction inside a node, bytes/s; 0: cluster's */
    double intra_latency_us;            /* 0: cluster's */
    int nics_per_node;                  /* 0: cluster's */
    double nic_bw;                      /* per adapter per direction, bytes/s; 0: cluster's */
} cluster_group;

typedef struct {
    char name[CLUSTER_NAME_LEN];        /* e.g. "dgx-a100-selene" */
    int n_gpu_types;                    /* entries of gpus, >= 1 */
    cluster_gpu gpus[CLUSTER_MAX_GPU_TYPES];
    int n_groups;                       /* entries of groups, >= 1 */
    cluster_group groups[CLUSTER_MAX_GROUPS];
    int gpus_per_node;                  /* GPUs in one node (host: a server or a rack's tray) */
    int nvlink_domain_gpus;             /* GPUs of one NVLink domain, a multiple of gpus_per_node
                                           (72 for an NVL72 rack); 0: one node */
    double intra_bw;                    /* per GPU per direction inside an NVLink domain, bytes/s */
    double intra_latency_us;            /* per message / per collective step inside a domain */
    int nics_per_node;                  /* inter-node adapters per node */
    double nic_bw;                      /* per adapter per direction, bytes/s */
    double inter_latency_us;            /* per message / per collective step across nodes */
    int64_t pod_gpus;                   /* GPUs with full bisection; 0: the whole cluster */
    double pod_oversubscription;        /* >= 1; bandwidth divisor for traffic between pods */
    double p2p_efficiency;              /* fraction of link bandwidth a send reaches (0,1] */
    double collective_efficiency;       /* fraction NCCL's ring/tree reach (0,1] */
    double coll_base_latency_us;        /* fixed cost of one collective call (NCCL's baseLat), >= 0 */
} cluster;

/* Total nodes / GPUs over all groups. */
int64_t cluster_n_nodes(const cluster *c);
int64_t cluster_n_gpus(const cluster *c);

/* The GPU type of global GPU index g (0 <= g < cluster_n_gpus). */
const cluster_gpu *cluster_gpu_of(const cluster *c, int64_t g);

/* The node group of global GPU index g (0 <= g < cluster_n_gpus), and the
 * node index of g (g / gpus_per_node). */
int cluster_group_of(const cluster *c, int64_t g);
int64_t cluster_node_of(const cluster *c, int64_t g);

/* GPUs of one NVLink domain (nvlink_domain_gpus, or gpus_per_node when 0),
 * and the domain index of GPU g (g / that). Two GPUs talk over NVLink iff
 * they share a domain; otherwise over the network. */
int64_t cluster_domain_gpus(const cluster *c);
int64_t cluster_domain_of(const cluster *c, int64_t g);

/* The fabric figures that apply to GPU g: its group's where set, else the
 * cluster's. intra: per GPU per direction inside the NVLink domain (bytes/s) and its
 * latency (us); nic: inter-node bandwidth per GPU per direction, i.e.
 * nics_per_node * nic_bw / gpus_per_node (bytes/s; 0 on a cluster of one
 * node without adapters). */
double cluster_intra_bw_of(const cluster *c, int64_t g);
double cluster_intra_latency_of(const cluster *c, int64_t g);
double cluster_nic_bw_per_gpu_of(const cluster *c, int64_t g);

/* A job that fills n GPUs of each NVLink domain and no more (NVIDIA's GB200
 * runs use 64 of an NVL72 rack's 72, 16 trays): the domain becomes those n
 * GPUs, the rest of each rack left out, so ranks fill rack after rack n at
 * a time and a group of n consecutive ranks stays on NVLink. n a multiple
 * of gpus_per_node, at most the cluster's domain; job_gpus (> 0: the GPUs
 * the job uses) a multiple of n. The node groups are cut to whole domains
 * of n (a group keeps floor(its domains' GPUs used) nodes). PL_ERR_INVALID
 * with one line naming the rule; c untouched then. */
pl_status cluster_use_domain_gpus(cluster *c, int64_t n, int64_t job_gpus, char *msg, size_t len);

/* Check every field: positive counts and bandwidths, gpu_type indices in
 * range, efficiencies in (0,1], oversubscription >= 1, every figure finite.
 * Allowed: intra_bw 0 with one GPU per node; nics_per_node 0 and nic_bw 0
 * on a cluster of one node; a peak of 0 for a precision the GPU lacks (at
 * least one must be positive); pod_gpus a multiple of gpus_per_node;
 * nvlink_domain_gpus 0 or a multiple of gpus_per_node that divides every
 * node group's GPUs (a domain is whole nodes of one type); adapters needed
 * only with more than one domain. One message naming the first bad field.
 * PL_OK or PL_ERR_INVALID. */
pl_status cluster_validate(const cluster *c, char *msg, size_t len);

#endif
