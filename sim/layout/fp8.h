/*
 * fp8.h: what FP8 training (precision fp8 under a recipe, core/precision.h)
 * costs beside bf16, as the layout simulator's compute and memory models
 * use it (compute_model.c, layout_memory.c). The facts only: which GPUs
 * run which recipe, the peak and base efficiency of the FP8 GEMMs, the
 * bytes of the cast passes per element, the bytes of the FP8 copies. No
 * timing here (compute_model.c times the passes with its memory model), so
 * this file depends on core/ alone.
 *
 * What runs in FP8 (Transformer Engine under Megatron-LM; torchtitan's
 * float8 converter the same): the four linear layers of every transformer
 * layer (QKV, attention output, MLP in, MLP out), all three of their GEMMs
 * (forward, data gradient, weight gradient). What stays bf16: the
 * attention core (FlashAttention in bf16: TE's FP8 attention is off by
 * default), norms, softmax, activations, residual adds, rotary, the
 * embedding, the output layer and loss (Megatron's output layer is not a
 * TE module; torchtitan's float8 filter leaves "output" out), the
 * optimizer (fp32 master weights and moments) and the gradients'
 * reduction. Messages stay bf16 too, except that with sequence
 * parallelism the forward's two layer-input all-gathers (the QKV and MLP-in
 * inputs, the norms' outputs) move FP8: TE casts the norm output before
 * gathering it (layout_expand.c).
 *
 * The passes FP8 adds (per linear layer; bytes per element of the tensor):
 *   input cast     forward, the layer's input X (T x k) to FP8, row-wise
 *                  for the forward GEMM and a transposed / column-wise copy
 *                  kept for the weight gradient (Hopper's FP8 GEMMs take
 *                  K-major operands only; MXFP8 scales along one axis, so
 *                  it needs both orientations too): read 2, write 1 + 1
 *   gradient cast  backward, the output gradient dY (T x n), the same
 *   weight cast    the weight W (n x k) and its transpose, once a step
 *                  (TE caches it from the first micro-batch: Megatron's
 *                  is_first_microbatch)
 *   amax           tensorwise only: a read of the tensor (2) before each
 *                  cast, a kernel of its own (current scaling); delayed
 *                  scaling takes the amax inside the cast and uses the
 *                  history's scale; blockwise and mxfp8 compute each
 *                  block's scale inside the cast
 * Memory (layout_memory.c): the FP8 weight copies (row-wise + transposed,
 * plus the recipe's scales) of the layer GEMM weights a GPU holds, and
 * the linear layers' inputs saved for backward in FP8 (1 byte) instead of
 * bf16.
 *
 * Constants and where they come from: fp8.c's opening comment.
 */
#ifndef PLACER_SIM_FP8_H
#define PLACER_SIM_FP8_H

#include <stddef.h>

#include "cluster.h"
#include "precision.h"
#include "status.h"

/* PL_OK when gpu runs recipe r: FP8 tensor cores (peak fp8 > 0) and, for
 * mxfp8, MXFP8 ones (peak_mxfp8 > 0: Blackwell). PL_ERR_INVALID with one
 * line naming the GPU and the recipe otherwise. */
pl_status fp8_check_gpu(const cluster_gpu *gpu, fp8_recipe r, char *msg, size_t len);

/* The dense FLOP/s recipe r's GEMMs run at on gpu (the fp8 peak; mxfp8's
 * own where the file gives it). */
double fp8_gemm_peak(const cluster_gpu *gpu, fp8_recipe r);

/* Which GEMM of a linear layer: the forward (fast accumulation in TE), the
 * data gradient or the weight gradient (split accumulation; under
 * blockwise the weight gradient scales both operands 1 x 128). */
typedef enum { FP8_GEMM_FWD = 0, FP8_GEMM_DGRAD, FP8_GEMM_WGRAD } fp8_gemm_pass;

/* The base efficiency (fraction of fp8_gemm_peak before the shape
 * factors) of recipe r's GEMMs of pass `pass` on gpu: its bf16 base times
 * the measured FP8 / bf16 ratio of the recipe and pass (fp8.c). */
double fp8_gemm_base(const cluster_gpu *gpu, fp8_recipe r, double bf16_base, fp8_gemm_pass pass);

/* Bytes moved per element by the cast of one tensor (input, gradient or
 * weight) under recipe r, its amax pass included, and the kernels it
 * launches (tensorwise 2: amax, cast; else 1). */
double fp8_cast_bytes_per_elem(fp8_recipe r);
int fp8_cast_kernels(fp8_recipe r);

/* The fraction of the memory model's bandwidth the cast kernels reach
 * (measured against a plain copy: fp8.c). */
double fp8_cast_bandwidth_fraction(fp8_recipe r);

/* Bytes per parameter of the FP8 copies of a GEMM weight under r: the
 * row-wise and transposed (column-wise) FP8 copies and their scales. */
double fp8_weight_copy_bytes(fp8_recipe r);

/* Bytes per element of a linear layer's input saved for the weight
 * gradient: 1 (its FP8 copy) under any recipe, plus its scales. */
double fp8_saved_input_bytes(fp8_recipe r);

#endif
