/*
 * precision.h: the number formats a step can run in, shared by the layout
 * simulator, cluster descriptions, profiles and the engine.
 *
 *   fp32  fp32 storage and math
 *   tf32  fp32 storage, TF32 tensor-core GEMMs
 *   bf16  mixed: bf16 GEMM inputs and activations, fp32 master weights,
 *         optimizer state, softmax / norm statistics and loss
 *   fp16  mixed like bf16 (with a loss scale: Megatron SC21)
 *   fp8   mixed: fp8 GEMM inputs (Transformer Engine style), bf16 elsewhere,
 *         under one of the FP8 recipes below (how the scales are kept)
 *
 * FP8 recipes (Transformer Engine's names in brackets; the cost of each in
 * sim/layout/fp8.c):
 *   tensorwise  one scale per tensor from the tensor's own amax, computed
 *               before the cast (current scaling) [Float8CurrentScaling]
 *   delayed     one scale per tensor from the amax history of earlier steps;
 *               the amax of this step is taken inside the cast [DelayedScaling]
 *   blockwise   DeepSeek-V3's: a scale per 1 x 128 block of activations and
 *               gradients and per 128 x 128 block of weights [Float8BlockScaling]
 *   mxfp8       OCP microscaling: an E8M0 scale per 32 elements, in the
 *               tensor cores of Blackwell and later [MXFP8BlockScaling]
 */
#ifndef PLACER_CORE_PRECISION_H
#define PLACER_CORE_PRECISION_H

#include <stddef.h>

#include "status.h"

typedef enum {
    PRECISION_FP32 = 0,
    PRECISION_TF32,
    PRECISION_BF16,
    PRECISION_FP16,
    PRECISION_FP8,
    PRECISION_COUNT
} precision;

typedef enum {
    FP8_RECIPE_DELAYED = 0, /* the default: a zeroed layout gets it */
    FP8_RECIPE_TENSORWISE,
    FP8_RECIPE_BLOCKWISE,
    FP8_RECIPE_MXFP8,
    FP8_RECIPE_COUNT
} fp8_recipe;

/* "delayed", "tensorwise", "blockwise", "mxfp8"; "unknown" out of range. Static. */
const char *fp8_recipe_name(fp8_recipe r);

/* Parse a recipe name above (case-sensitive). PL_ERR_INVALID with a
 * message listing them; *out untouched then. */
pl_status fp8_recipe_parse(const char *text, fp8_recipe *out, char *msg, size_t len);

/* "fp32", "tf32", "bf16", "fp16", "fp8"; "unknown" out of range. Static. */
const char *precision_name(precision p);

/* Parse a name above (case-sensitive). PL_ERR_INVALID with a message that
 * lists the valid names on failure; *out untouched then. */
pl_status precision_parse(const char *text, precision *out, char *msg, size_t len);

/* Bytes of one GEMM input / activation element in this precision: 4 for
 * fp32 and tf32, 2 for bf16 and fp16, 1 for fp8 GEMM inputs. */
int precision_act_bytes(precision p);

#endif
