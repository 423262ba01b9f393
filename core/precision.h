/*
 * precision.h: the number formats a step can run in, shared by the layout
 * simulator, cluster descriptions, profiles and the engine.
 *
 *   fp32  fp32 storage and math
 *   tf32  fp32 storage, TF32 tensor-core GEMMs
 *   bf16  mixed: bf16 GEMM inputs and activations, fp32 master weights,
 *         optimizer state, softmax / norm statistics and loss
 *   fp16  mixed like bf16 (with a loss scale: Megatron SC21)
 *   fp8   mixed: fp8 GEMM inputs (Transformer Engine style), bf16 elsewhere
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

/* "fp32", "tf32", "bf16", "fp16", "fp8"; "unknown" out of range. Static. */
const char *precision_name(precision p);

/* Parse a name above (case-sensitive). PL_ERR_INVALID with a message that
 * lists the valid names on failure; *out untouched then. */
pl_status precision_parse(const char *text, precision *out, char *msg, size_t len);

/* Bytes of one GEMM input / activation element in this precision: 4 for
 * fp32 and tf32, 2 for bf16 and fp16, 1 for fp8 GEMM inputs. */
int precision_act_bytes(precision p);

#endif
