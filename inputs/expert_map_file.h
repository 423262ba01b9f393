/*
 * expert_map_file.h: an expert placement file, as `placer experts --out`
 * writes it and vLLM and SGLang load it (JSON, one object):
 *   phy2log | physical_to_logical_map   [layers][slots] logical expert of each
 *                                        slot (EPLB's and SGLang's names; SGLang's
 *                                        --init-expert-location takes a file of
 *                                        physical_to_logical_map alone)
 *   log2phy | logical_to_physical_map,  the derived views (EPLB's, vLLM's
 *   logcnt | logical_replica_count       names); when given they must agree
 *                                        with the slots
 *   gpus, gpus_per_node                  the expert-parallel group (slots are
 *                                        laid out GPU by GPU); gpus defaults to
 *                                        the slots / slots_per_gpu when given,
 *                                        else it is required
 *   gpu_load                             [layers][gpus] tokens each GPU's slots
 *                                        received on the scored window
 *   busiest_over_mean                    [layers] the busiest GPU's load over
 *                                        the mean (computed from gpu_load when
 *                                        absent)
 * and, kept out of the data: placer, policy, model, cluster, scores, source,
 * description, slots_per_gpu. Any other key is refused.
 *
 * What `placer layout` and `placer plan` read (--experts FILE): the per-layer
 * busiest/mean, the load factor the MoE layers' cost then uses.
 */
#ifndef PLACER_INPUTS_EXPERT_MAP_FILE_H
#define PLACER_INPUTS_EXPERT_MAP_FILE_H

#include <stddef.h>

#include "expert_map.h"
#include "status.h"

typedef struct {
    expert_map *map;            /* the slots (NULL when the file gives only loads; owned) */
    int n_layers;               /* MoE layers */
    int n_gpus;                 /* GPUs of the expert-parallel group */
    double *gpu_load;           /* [n_layers][n_gpus], or NULL (owned) */
    double *busiest_over_mean;  /* [n_layers], or NULL when the file has neither loads nor factors (owned) */
} expert_map_file;

/* Parse n bytes of JSON into *out (caller frees with expert_map_file_free).
 * PL_ERR_INVALID with one line: a wrong shape, an id out of range, an
 * expert with no slot, slots not divisible by the GPUs, a factor below 1,
 * a negative load, derived views that disagree. */
pl_status expert_map_file_parse(const char *text, size_t n, expert_map_file *out, char *msg, size_t len);

/* Read path (messages start with it). */
pl_status expert_map_file_read(const char *path, expert_map_file *out, char *msg, size_t len);

/* Free what *f holds and zero it; f may be NULL. */
void expert_map_file_free(expert_map_file *f);

#endif
