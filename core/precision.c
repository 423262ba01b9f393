/*
 * precision.c: names and element sizes of the precisions, and the FP8
 * recipes' names (precision.h).
 */
#include "precision.h"

#include <string.h>

static const char *const NAMES[PRECISION_COUNT] = {"fp32", "tf32", "bf16", "fp16", "fp8"};

const char *precision_name(precision p) {
    return (p >= 0 && p < PRECISION_COUNT) ? NAMES[p] : "unknown";
}

pl_status precision_parse(const char *text, precision *out, char *msg, size_t len) {
    if (text)
        for (int i = 0; i < PRECISION_COUNT; i++)
            if (strcmp(text, NAMES[i]) == 0) {
                *out = (precision)i;
                return PL_OK;
            }
    return pl_fail(msg, len, PL_ERR_INVALID, "unknown precision '%s' (use fp32, tf32, bf16, fp16 or fp8)",
                   text ? text : "");
}

int precision_act_bytes(precision p) {
    switch (p) {
    case PRECISION_BF16:
    case PRECISION_FP16: return 2;
    case PRECISION_FP8: return 1;
    default: return 4;
    }
}

static const char *const RECIPES[FP8_RECIPE_COUNT] = {"delayed", "tensorwise", "blockwise", "mxfp8"};

const char *fp8_recipe_name(fp8_recipe r) { return (r >= 0 && r < FP8_RECIPE_COUNT) ? RECIPES[r] : "unknown"; }

pl_status fp8_recipe_parse(const char *text, fp8_recipe *out, char *msg, size_t len) {
    if (text)
        for (int i = 0; i < FP8_RECIPE_COUNT; i++)
            if (strcmp(text, RECIPES[i]) == 0) {
                *out = (fp8_recipe)i;
                return PL_OK;
            }
    return pl_fail(msg, len, PL_ERR_INVALID,
                   "unknown FP8 recipe '%.32s' (use tensorwise, delayed, blockwise or mxfp8)", text ? text : "");
}
