/*
 * framework.h: the software stack a layout prediction is for.
 *
 * The layout simulator describes a Megatron-like stack: fused kernels
 * (norms, SwiGLU, rotary, the cross entropy), flash attention, bf16
 * weights with an fp32 master copy inside the optimizer, logits kept once
 * in bf16 and once as fp32 softmax. Other stacks differ in what fuses and
 * what they keep; a framework profile holds what differs, each figure with
 * its source (data/frameworks/NAME.json, docs/frameworks.md):
 *
 *   kernels      the attention kernel (flash or unfused)
 *   efficiency   the at most three constants `placer calibrate
 *                --layout-runs` fits (calib/layout_runs.h), all neutral (1)
 *                for Megatron:
 *                  gemm_scale    multiplies the GEMM base efficiency
 *                  memory_scale  multiplies the time of memory-bound kernels
 *                                (unfused norms, casts, rotary, activation
 *                                functions run several passes where Megatron
 *                                runs one)
 *                  act_scale     multiplies the per-layer activation bytes
 *                                (fp32 residual stream and norm outputs under
 *                                autocast, unfused SwiGLU's extra tensor)
 *   memory       conventions read from the framework's source, not fitted:
 *                  logits_bytes       bytes per logit element held at the
 *                                     loss's peak (0: the model's 4 + e)
 *                  weight_copy_bytes  bytes per parameter of low-precision
 *                                     weight copies held from forward to
 *                                     backward (autocast's bf16 casts of fp32
 *                                     weights: 2; Megatron's bf16 weights: 0)
 *                  reserve_factor     the caching allocator's reserved /
 *                                     allocated at the peak (reported beside
 *                                     the allocated peak; 1: not modelled)
 *   fixed        step_fixed_us, added once per step (host gaps), not fitted
 *
 * Megatron (framework_default) is every figure neutral: a prediction with
 * it is bit for bit what the simulator gave before profiles existed.
 */
#ifndef PLACER_SIM_FRAMEWORK_H
#define PLACER_SIM_FRAMEWORK_H

#include <stdint.h>

#include "compute_model.h"
#include "graph.h"
#include "layout.h"
#include "layout_memory.h"

#define FRAMEWORK_NAME_LEN 64

/* The constants calibration may fit, in this order. */
typedef enum { FW_K_GEMM = 0, FW_K_MEMORY, FW_K_ACT, FW_K_COUNT } framework_const;

typedef struct framework_profile {
    char name[FRAMEWORK_NAME_LEN];  /* "megatron", "torchtitan", "hf", or a fitted file's */
    attention_impl attention;       /* the attention kernel */
    double k[FW_K_COUNT];           /* gemm_scale, memory_scale, act_scale (1: Megatron) */
    double logits_bytes;            /* bytes per logit element at the loss's peak; 0: 4 + e */
    double weight_copy_bytes;       /* bytes per parameter kept as a low-precision copy */
    double reserve_factor;          /* reserved / allocated at the peak, >= 1 */
    double step_fixed_us;           /* added once per step */
    int fp32_params;                /* 1: the model holds fp32 weights and fp32 gradients and the
                                       optimizer only the two moments (torch autocast, FSDP2's
                                       mixed precision); 0: Megatron's bf16 weights and gradients
                                       with the fp32 master copy in the optimizer. Same total
                                       unsharded, other parts */
    int grads_lazy;                 /* 1: gradients are allocated during backward as the
                                       activations are freed (torch's zero_grad(set_to_none=True)):
                                       the peak is params + optimizer + buffers + the larger of the
                                       gradients and (weight copies + activations + logits);
                                       0: every part held at once (Megatron's grad buffers) */
} framework_profile;

/* Megatron: flash attention, every constant neutral. */
void framework_default(framework_profile *f);

/* "gemm_scale", "memory_scale", "act_scale". Static. */
const char *framework_const_name(framework_const k);

/* Whether f changes nothing the simulator computes (Megatron's). */
int framework_is_neutral(const framework_profile *f);

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

/* The reserved figure the caching allocator would show for an allocated
 * peak (bytes x reserve_factor; f NULL: the same bytes). */
int64_t framework_reserved_bytes(const framework_profile *f, int64_t allocated);

#endif
