/* export_internal.h: helpers the export writers share (not installed). */
#ifndef PLACER_PLAN_EXPORT_INTERNAL_H
#define PLACER_PLAN_EXPORT_INTERNAL_H

#include "export_plan.h"

/* PL_OK when chunk_layers has pp * vp entries >= 1 summing to the layers. */
pl_status export_check_chunks(const gpt_config *cfg, const layout *l, const int *chunk_layers, char *msg,
                              size_t len);

/* 1 when every chunk holds the same number of layers. */
static inline int export_chunks_uniform(const layout *l, const int *chunk_layers) {
    for (int c = 1; c < l->pp * l->vp; c++)
        if (chunk_layers[c] != chunk_layers[0]) return 0;
    return 1;
}

/* Layers of pipeline stage s over its vp chunks. */
static inline int export_stage_layers(const layout *l, const int *chunk_layers, int s) {
    int n = 0;
    for (int v = 0; v < l->vp; v++) n += chunk_layers[v * l->pp + s];
    return n;
}

#endif
