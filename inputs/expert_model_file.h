/*
 * expert_model_file.h: the learned expert placer's parameters as a file
 * (data/experts/learned-*.json; policy/experts/learned.h trains them and
 * experts.h says what each does):
 *   {"name": ..., "w": [8 numbers], "scen_weight": [4 numbers >= 0],
 *    "copies_scale": number >= 0, "mu": number (< 0: the search's grid),
 *    "description", "training": text kept out of the data}
 * Unknown keys are refused.
 */
#ifndef PLACER_INPUTS_EXPERT_MODEL_FILE_H
#define PLACER_INPUTS_EXPERT_MODEL_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "status.h"

#define EXPERT_MODEL_FEATURES 8
#define EXPERT_MODEL_HISTORY 4

typedef struct {
    double w[EXPERT_MODEL_FEATURES];         /* the per-expert head over the history features */
    double scen_weight[EXPERT_MODEL_HISTORY];/* the planning load's and windows t, t-1, t-2's weights as scenarios */
    double copies_scale;                     /* multiplies the simulator's exchange rate of copies for balance */
    double mu;                               /* the node-aware packing's copies weight; < 0: a grid */
} expert_model_params;

/* Parse n bytes of JSON into *out. PL_ERR_INVALID with one line. */
pl_status expert_model_parse(const char *text, size_t n, expert_model_params *out, char *msg, size_t len);

/* A file by name (data/experts/NAME.json, $PLACER_EXPERTS first) or path. */
pl_status expert_model_load(const char *name_or_path, expert_model_params *out, char *msg, size_t len);

/* Write m as a model file named name, with the description and training
 * texts (either may be NULL). PL_ERR_IO when f reports an error. */
pl_status expert_model_write(const expert_model_params *m, const char *name, const char *description,
                             const char *training, FILE *f);

#endif
