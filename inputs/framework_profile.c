/*
 * framework_profile.c: the Megatron default of a framework profile, the
 * names of its fitted constants, and whether a profile is neutral
 * (framework_profile.h).
 */
#include "framework_profile.h"

#include <string.h>

void framework_default(framework_profile *f) {
    memset(f, 0, sizeof *f);
    strcpy(f->name, "megatron");
    f->attention = ATTENTION_FLASH;
    for (int i = 0; i < FW_K_COUNT; i++) f->k[i] = 1.0;
    f->logits_bytes = 0.0;
    f->weight_copy_bytes = 0.0;
    f->reserve_factor = 1.0;
    f->step_fixed_us = 0.0;
    f->fp32_params = 0;
    f->moe_gemm = -1;
    f->moe_permute_fused = -1;
    f->moe_fp32_gemm = 0;
    f->moe_warning[0] = 0;
    f->overlap = FW_OVERLAP_EP;
}

const char *framework_const_name(framework_const k) {
    static const char *const n[FW_K_COUNT] = {"gemm_scale", "memory_scale", "act_scale"};
    return k >= 0 && k < FW_K_COUNT ? n[k] : "unknown";
}

int framework_is_neutral(const framework_profile *f) {
    if (!f) return 1;
    for (int i = 0; i < FW_K_COUNT; i++)
        if (f->k[i] != 1.0) return 0;
    return f->attention == ATTENTION_FLASH && f->logits_bytes == 0.0 && f->weight_copy_bytes == 0.0 &&
           f->step_fixed_us == 0.0 && f->grad_accum_bytes == 0.0 && !f->fp32_params && !f->grads_lazy && f->moe_gemm < 0 &&
           f->moe_permute_fused < 0 && !f->moe_fp32_gemm && !f->moe_warning[0] && f->overlap == FW_OVERLAP_EP;
}
