/*
 * framework.h: a software stack's figures (inputs/framework_profile.h, the
 * profile as data) applied by the layout simulator: its kernels and time
 * constants to the compute model, its memory conventions to a stage's
 * parts. Megatron (framework_default) changes nothing.
 */
#ifndef PLACER_SIM_FRAMEWORK_H
#define PLACER_SIM_FRAMEWORK_H

#include <stdint.h>

#include "compute_model.h"
#include "framework_profile.h"
#include "graph.h"
#include "layout.h"
#include "layout_memory.h"
#include "moe.h"

/* Apply f's kernels and time constants to c and *step_fixed_us
 * (attention, gemm_scale, memory_efficiency / memory_scale, step_fixed_us
 * added). f NULL: nothing. The memory conventions travel as a pointer in
 * layout_sim_params (layout_sim.h: framework) and are applied by
 * framework_stage_memory. */
void framework_apply_time(const framework_profile *f, compute_params *c, double *step_fixed_us);

/* Memory of a stage under f: layout_stage_memory_p's parts, then f's
 * conventions (activations x act_scale, the logits at logits_bytes, weight
 * copies added to params). f NULL or neutral: layout_stage_memory_p's
 * figure, untouched. */
void framework_stage_memory(const framework_profile *f, const gpt_config *cfg, const layout *l,
                            const compute_params *p, int stage, int layers, int in_flight, layout_memory *out);

/* framework_stage_memory for any model: an MoE model's parts are
 * layout_stage_memory_moe's at mp (NULL: moe_params_default), then the
 * stack's conventions on them too (fp32 weights and gradients of the
 * experts, autocast's bf16 copies of the local experts' weights, routed
 * activations x act_scale, lazy gradients over every part). A dense model:
 * framework_stage_memory exactly. */
void framework_stage_memory_moe(const framework_profile *f, const gpt_config *cfg, const layout *l,
                                const compute_params *p, const moe_params *mp, int stage, int layers, int in_flight,
                                layout_memory *out);

/* The stack's MoE choices into the fields of mp still -1 (moe.h): its
 * expert GEMMs, permutation, fp32 GEMMs, and from fp32_params its fp32
 * activations and per-forward weight casts. f NULL: Megatron's. */
void framework_apply_moe(const framework_profile *f, moe_params *mp);

/* The reserved figure the caching allocator would show for an allocated
 * peak (bytes x reserve_factor; f NULL: the same bytes). */
int64_t framework_reserved_bytes(const framework_profile *f, int64_t allocated);

#endif
