/*
 * expert_map.h: where a mixture-of-experts model's experts live, layer by
 * layer: the logical expert each physical slot holds (EPLB's phy2log, vLLM's
 * and SGLang's physical_to_logical_map). The slots are laid out GPU by GPU
 * and the GPUs node by node, as DeepEP, vLLM and SGLang number them:
 *   slot p lives on GPU p / (n_slots / n_gpus), GPU g on node g / gpus_per_node.
 * An expert with c slots in a layer has c replicas; a token routed to it
 * goes to one of them (EPLB's assumption, kept by every scorer here: the
 * token's load splits evenly over the replicas).
 *
 * The derived views vLLM and SGLang also load are computed, not stored:
 * logcnt (replicas per expert, vLLM's logical_replica_count) and log2phy
 * (each expert's slots, -1 padded; vLLM's logical_to_physical_map, SGLang's
 * logical_to_all_physical_map). Their replica order here is ascending slot
 * order; EPLB's own log2phy orders by the replica's creation rank instead,
 * which the engines do not rely on.
 *
 * Pure data over core: no file format (inputs/expert_map_file.c reads and
 * the cli writes them), no placer (policy/experts/ makes them).
 */
#ifndef PLACER_CORE_EXPERT_MAP_H
#define PLACER_CORE_EXPERT_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Largest sizes any map may have (the readers refuse more). */
#define EXPERT_MAP_MAX_LAYERS 1024
#define EXPERT_MAP_MAX_EXPERTS 4096
#define EXPERT_MAP_MAX_GPUS 4096
#define EXPERT_MAP_MAX_SLOTS 65536

typedef struct {
    int n_layers;       /* MoE layers, >= 1 */
    int n_experts;      /* logical experts per layer, >= 1 */
    int n_slots;        /* physical slots per layer, a multiple of n_gpus, >= n_experts */
    int n_gpus;         /* GPUs of the expert-parallel group, >= 1 */
    int gpus_per_node;  /* GPUs a node holds, divides n_gpus (n_gpus when one node) */
    int32_t *phy2log;   /* [n_layers][n_slots] logical expert of each slot (owned) */
} expert_map;

/* The shape checks every map and every placer call share: PL_OK, or
 * PL_ERR_INVALID with one line naming the first broken rule (sizes within
 * the limits above; gpus_per_node divides n_gpus; n_slots a multiple of
 * n_gpus and at least n_experts). */
pl_status expert_map_check_shape(int n_layers, int n_experts, int n_slots, int n_gpus, int gpus_per_node, char *msg,
                                 size_t len);

/* A new map of the given shape (expert_map_check_shape's rules), every slot
 * -1 (unassigned). *out owned by the caller (expert_map_destroy). NULL out
 * is PL_ERR_INVALID; PL_ERR_NOMEM when allocation fails. */
pl_status expert_map_create(int n_layers, int n_experts, int n_slots, int n_gpus, int gpus_per_node, expert_map **out,
                            char *msg, size_t len);
void expert_map_destroy(expert_map *m);

/* A deep copy of m into *out (caller destroys). */
pl_status expert_map_clone(const expert_map *m, expert_map **out, char *msg, size_t len);

/* Slots per GPU, GPUs' nodes. m must be non-NULL. */
static inline int expert_map_slots_per_gpu(const expert_map *m) { return m->n_slots / m->n_gpus; }
static inline int expert_map_n_nodes(const expert_map *m) { return m->n_gpus / m->gpus_per_node; }

/* Layer l's slots (n_slots entries); l in [0, n_layers). */
static inline int32_t *expert_map_layer(expert_map *m, int l) { return m->phy2log + (size_t)l * m->n_slots; }
static inline const int32_t *expert_map_layer_c(const expert_map *m, int l) {
    return m->phy2log + (size_t)l * m->n_slots;
}

/* PL_OK when every slot holds an expert in [0, n_experts) and every expert
 * has at least one slot in every layer; else PL_ERR_INVALID "layer L: ..."
 * (one line). */
pl_status expert_map_validate(const expert_map *m, char *msg, size_t len);

/* Replicas of each expert in layer l into cnt[n_experts] (slots holding an
 * out-of-range id are skipped). */
void expert_map_logcnt(const expert_map *m, int l, int *cnt);

/* The most replicas any expert has in any layer (>= 1 for a valid map). */
int expert_map_max_replicas(const expert_map *m);

/* Layer l's log2phy into out[n_experts][width]: each expert's slots in
 * ascending order, -1 after them. width must be at least the layer's most
 * replicas; returns 0, or -1 when some expert has more than width. */
int expert_map_log2phy(const expert_map *m, int l, int width, int32_t *out);

/* Weights moved by changing from to `to` (same shape): over every layer and
 * GPU, the slots of `to` whose expert is not among from's slots on that GPU
 * (counted as a multiset: a second copy of an expert the GPU held once is a
 * move). The weights a re-plan must fetch; -1 when the shapes differ. */
int64_t expert_map_moved(const expert_map *from, const expert_map *to);

#endif
