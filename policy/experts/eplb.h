/*
 * eplb.h: DeepSeek's expert-parallelism load balancer (deepseek-ai/EPLB,
 * module eplb), reimplemented from its published algorithm, one MoE layer at a
 * time, and the load-unaware baselines.
 *
 * EPLB's three greedy steps for w[E] (tokens per expert), P slots on `gpus`
 * GPUs in `nodes` nodes, E experts in `groups` groups:
 *   1. pack the groups onto the nodes, groups / nodes each, heaviest group
 *      first into the lightest node with room (balanced_packing);
 *   2. per node, give its P / nodes slots to its experts: one each, then
 *      each spare slot to the expert of the highest load per replica
 *      (replicate_experts);
 *   3. per node, pack the replicas (load w_e / c_e each) onto its GPUs, P /
 *      gpus each, heaviest first into the lightest GPU with room.
 * The hierarchical policy runs them as written; the global policy is the
 * same with one group on one node (steps 2 and 3 over all GPUs). EPLB's
 * entry point picks hierarchical when the nodes divide the groups, else
 * global (eplb_auto). Ties break as the Python does: the first index wins
 * (min / max over packs and experts) and the sort of step 1 and 3 is stable,
 * heaviest first.
 */
#ifndef PLACER_POLICY_EXPERTS_EPLB_H
#define PLACER_POLICY_EXPERTS_EPLB_H

#include <stdint.h>

#include "status.h"

/* The shape of one layer's problem. */
typedef struct {
    int n_experts;      /* E */
    int n_slots;        /* P, a multiple of n_gpus, >= E */
    int n_gpus;         /* GPUs of the expert-parallel group */
    int gpus_per_node;  /* divides n_gpus */
    int n_groups;       /* expert groups (DeepSeek-V3: 8); 0 or 1: none */
} eplb_shape;

/* Scratch big enough for any layer of shape s (eplb_* allocate nothing). */
typedef struct eplb_work eplb_work;
pl_status eplb_work_create(const eplb_shape *s, eplb_work **out);
void eplb_work_destroy(eplb_work *w);

/* EPLB's hierarchical policy into phy2log[P] (and phyrank[P], the replica's
 * rank, when not NULL). PL_ERR_INVALID when the shape does not suit it: E
 * not divisible by the groups, the groups by the nodes, or the slots a node
 * gets (P / nodes) below its experts. */
pl_status eplb_hierarchical(eplb_work *wk, const eplb_shape *s, const double *w, int32_t *phy2log, int32_t *phyrank);

/* EPLB's global policy (one group, one node). */
pl_status eplb_global(eplb_work *wk, const eplb_shape *s, const double *w, int32_t *phy2log, int32_t *phyrank);

/* EPLB's own choice: hierarchical when the nodes divide the groups, else
 * global. *hier (may be NULL) gets 1 when hierarchical ran. */
pl_status eplb_auto(eplb_work *wk, const eplb_shape *s, const double *w, int32_t *phy2log, int32_t *phyrank,
                    int *hier);

/* Load-unaware baselines. contiguous: experts 0..E-1 in slot order, then
 * the spare slots with experts 0, 1, ... again (vLLM's initial map);
 * round_robin: expert e's first slot on GPU e mod gpus, the spare slots'
 * experts as contiguous's, slot by slot over the GPUs. */
void eplb_contiguous(const eplb_shape *s, int32_t *phy2log);
void eplb_round_robin(const eplb_shape *s, int32_t *phy2log);

#endif
