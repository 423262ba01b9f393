/*
 * model_arch.h: what a model file says of its architecture beyond the
 * shapes the simulators read (gpt_config): the family, the rotary base,
 * the norm's epsilon, per-head q/k norms, the router's scaling. None of it
 * changes a simulated step; the exports need it so that a framework builds
 * the same model the plan was simulated for (plan/export_plan.h).
 *
 * Keys read from a config.json (absent keys leave the defaults below):
 *   model_type                      -> family ("llama", "qwen3_moe", ...)
 *   rope_theta                      -> rope_theta
 *   rms_norm_eps | layer_norm_eps | layer_norm_epsilon -> norm_eps
 *   routed_scaling_factor           -> router_scale (DeepSeek)
 *   norm_topk_prob                  -> topk_norm
 *   num_nextn_predict_layers        -> mtp_layers (multi-token prediction:
 *                                      not simulated, so not exported)
 *   rope_scaling (an object)        -> rope_scaling = 1 (not exported)
 * qk_norm is 1 for the families with per-head q/k RMSNorms (qwen3,
 * qwen3_moe, olmo2). A preset (default, gpt12, tiny) has family "gpt" and
 * no rotary base.
 */
#ifndef PLACER_INPUTS_MODEL_ARCH_H
#define PLACER_INPUTS_MODEL_ARCH_H

#include <stddef.h>

#include "status.h"

typedef struct {
    char family[32];      /* the config's model_type, "gpt" for a preset, "" when the file has none */
    double rope_theta;    /* rotary base; 0: not given */
    double norm_eps;      /* the norm's epsilon; 0: not given */
    int qk_norm;          /* 1: per-head RMSNorm of q and k (Qwen3) */
    double router_scale;  /* routed experts' output scale (DeepSeek-V3 2.5); 0: none */
    int topk_norm;        /* 1: the top-k router probabilities are renormalised; -1: not given */
    int mtp_layers;       /* multi-token-prediction modules the file declares (not simulated) */
    int rope_scaling;     /* 1: the file has a rope_scaling object (not exported) */
} model_arch;

/* The architecture of the model named by path_or_preset, in the forms
 * model_config_load takes (a config.json path, optionally with overrides
 * after its ".json"; a preset; a shipped model's name with optional
 * overrides: the overrides change shapes only, not the fields here). The
 * loader's statuses and one-line messages for a missing or bad file. */
pl_status model_arch_load(const char *path_or_preset, model_arch *out, char *msg, size_t len);

/* The same from a config.json's text (n bytes). */
pl_status model_arch_parse_json(const char *text, size_t n, model_arch *out, char *msg, size_t len);

#endif
