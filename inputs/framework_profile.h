/*
 * framework_profile.h: the software stack a layout prediction is for, as
 * data: the figures a framework profile holds (data/frameworks/NAME.json,
 * docs/frameworks.md; read by framework_file.h), its Megatron default and
 * its names. What the layout simulator does with them is
 * sim/layout/framework.h.
 *
 * The layout simulator describes a Megatron-like stack: fused kernels
 * (norms, SwiGLU, rotary, the cross entropy), flash attention, bf16
 * weights with an fp32 master copy inside the optimizer, logits kept once
 * in bf16 and once as fp32 softmax. Other stacks differ in what fuses and
 * what they keep; a framework profile holds what differs, each figure with
 * its source:
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
 *   accumulation grad_accum_bytes: what gradient accumulation over a step's
 *                micro-batches costs a stack that adds each micro-batch's
 *                gradient to the held one in a kernel of its own (read from
 *                its source, not fitted); with grads_lazy the held gradients
 *                then also share the peak with the next micro-batch's
 *                activations
 *   MoE          how the stack runs a mixture-of-experts layer (read from its
 *                source; sim/layout/moe_compute.h prices them):
 *                  moe_gemm           the grouped-GEMM implementation of the
 *                                     expert GEMMs (inputs/moe_fit.h's names)
 *                  moe_permute        fused (Transformer Engine's one kernel)
 *                                     or torch (sort, histogram, gathers)
 *                  moe_fp32_gemm      the expert GEMMs multiply in fp32
 *                  moe_warning        a known pathological MoE path, printed
 *                                     when an MoE model is predicted with it
 *   overlap      what the stack hides when its schedule pairs one
 *                micro-batch's forward with another's backward (DualPipe,
 *                DualPipeV, Megatron's EP all-to-all overlap): "ep" the MoE
 *                dispatch and combine, "tp" the tensor-parallel collectives
 *                (each pair's communication under the other op's compute)
 *
 * Megatron (framework_default) is every figure neutral: a prediction with
 * it is bit for bit what the simulator gave before profiles existed.
 */
#ifndef PLACER_INPUTS_FRAMEWORK_PROFILE_H
#define PLACER_INPUTS_FRAMEWORK_PROFILE_H

#define FRAMEWORK_NAME_LEN 64
#define FRAMEWORK_WARNING_LEN 240

/* What a stack's paired ops overlap (framework_profile.overlap bits). */
enum { FW_OVERLAP_EP = 1u << 0, FW_OVERLAP_TP = 1u << 1 };

/* How the attention core runs: fused (FlashAttention: no T x T score
 * matrix in memory, causal blocks skipped, the backward recomputes the
 * scores) or unfused (Megatron-LM 2021: batched GEMMs for Q K^T and P V,
 * a fused scale-mask-softmax and a dropout over the full T x T scores in
 * HBM, kept for backward). The stack decides it; the layout simulator's
 * compute model (sim/layout/compute_model.h) and activation memory
 * (layout_memory.c) follow it. */
typedef enum { ATTENTION_FLASH = 0, ATTENTION_UNFUSED } attention_impl;

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
    double grad_accum_bytes;        /* bytes per held gradient element each micro-batch after a
                                       step's first moves to add its gradient to the held one
                                       (autograd's AccumulateGrad: read both, write the sum; 0:
                                       Megatron accumulates inside the weight-gradient GEMM) */
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
    /* mixture of experts (the header's MoE block): */
    int moe_gemm;                   /* moe_gemm_impl (inputs/moe_fit.h); -1: Megatron's (TE GroupedLinear:
                                       cublas_loop, FP8 cublas_fp8_loop) */
    int moe_permute_fused;          /* 1 fused, 0 torch's ops; -1: Megatron's (fused) */
    int moe_fp32_gemm;              /* 1: expert GEMMs in fp32 */
    char moe_warning[FRAMEWORK_WARNING_LEN]; /* "": none */
    unsigned overlap;               /* FW_OVERLAP_* bits; Megatron's: FW_OVERLAP_EP */
} framework_profile;

/* Megatron: flash attention, every constant neutral, the MoE figures
 * Megatron's (-1: by precision), paired ops hiding the MoE dispatch. */
void framework_default(framework_profile *f);

/* "gemm_scale", "memory_scale", "act_scale" ("unknown" out of range). Static. */
const char *framework_const_name(framework_const k);

/* Whether f changes nothing the simulator computes (Megatron's); f NULL: 1. */
int framework_is_neutral(const framework_profile *f);

#endif
