/*
 * framework.c: a software stack's differences from the Megatron-like stack
 * the layout simulator describes (framework.h): its time constants applied
 * to the compute model, its memory conventions applied to a stage's parts.
 */
#include "framework.h"
#include "model_params.h"

#include <math.h>
#include <string.h>

void framework_apply_time(const framework_profile *f, compute_params *c, double *step_fixed_us) {
    if (!f) return;
    c->attention = f->attention;
    c->gemm_scale *= f->k[FW_K_GEMM];
    if (f->k[FW_K_MEMORY] != 1.0) c->memory_efficiency /= f->k[FW_K_MEMORY];
    if (step_fixed_us) *step_fixed_us += f->step_fixed_us;
}

static int mixed(precision p) { return p == PRECISION_BF16 || p == PRECISION_FP16 || p == PRECISION_FP8; }

void framework_apply_moe(const framework_profile *f, moe_params *mp) {
    if (!mp) return;
    framework_profile d;
    if (!f) framework_default(&d), f = &d;
    if (mp->gemm_impl < 0) mp->gemm_impl = f->moe_gemm;
    if (mp->fused_permute < 0) mp->fused_permute = f->moe_permute_fused;
    if (mp->fp32_gemm < 0) mp->fp32_gemm = f->moe_fp32_gemm;
    if (mp->fp32_act < 0) mp->fp32_act = f->fp32_params;
    if (mp->weight_cast < 0) mp->weight_cast = f->fp32_params && f->weight_copy_bytes > 0;
}

void framework_stage_memory(const framework_profile *f, const gpt_config *cfg, const layout *l,
                            const compute_params *p, int stage, int layers, int in_flight, layout_memory *out) {
    framework_stage_memory_moe(f, cfg, l, p, NULL, stage, layers, in_flight, out);
}

void framework_stage_memory_moe(const framework_profile *f, const gpt_config *cfg, const layout *l,
                                const compute_params *p, const moe_params *mp, int stage, int layers, int in_flight,
                                layout_memory *out) {
    layout_stage_memory_moe(cfg, l, p, mp, stage, layers, in_flight, out);
    if (!f || framework_is_neutral(f)) return;
    const int moe = gpt_is_moe(cfg);
    const int64_t pp = l->pp > 0 ? l->pp : 1, t = l->tp > 0 ? l->tp : 1;
    /* activations: the fused-kernel figure times the stack's factor */
    out->activations = (int64_t)llround((double)out->activations * f->k[FW_K_ACT]);
    out->act_per_layer = (int64_t)llround((double)out->act_per_layer * f->k[FW_K_ACT]);
    out->moe_activations = (int64_t)llround((double)out->moe_activations * f->k[FW_K_ACT]);
    /* the logits at the loss's peak */
    if (stage == pp - 1 && f->logits_bytes > 0) {
        const double cp = l->cp > 0 ? l->cp : 1, b = l->micro_batch > 0 ? l->micro_batch : 1;
        const double sl = ceil(cfg->seq_len / cp);
        int64_t V = cfg->vocab;
        if (cfg->vocab_multiple > 0) V = (V + cfg->vocab_multiple - 1) / cfg->vocab_multiple * cfg->vocab_multiple;
        const double e = l->prec == PRECISION_FP8 ? 2.0 : (double)precision_act_bytes(l->prec);
        const double vl = (double)((V + t - 1) / t);
        out->embedding_head += (int64_t)llround(sl * b * vl * (f->logits_bytes - (4.0 + e)));
    }
    /* fp32 weights and gradients in the model, moments in the optimizer:
     * per parameter 4 + 4 + 8 where Megatron holds 2 + 2 + 12 */
    if (f->fp32_params && mixed(l->prec)) {
        out->optimizer = out->optimizer / 12 * 8; /* the master copy moves out of the optimizer ... */
        out->params *= 2;                         /* ... and is the model's weight */
        out->grads *= 2;
        out->expert_optimizer = out->expert_optimizer / 12 * 8;
        out->expert_params *= 2;
        out->expert_grads *= 2;
    }
    /* low-precision weight copies held from forward to backward (autocast's casts) */
    int64_t copies = 0;
    if (f->weight_copy_bytes > 0) {
        /* the matmul weights autocast casts: each layer's (not under full
         * recomputation: a checkpointed layer's casts are dropped with its
         * other saved tensors and redone in backward) and the head's; the
         * embedding is a lookup, not cast */
        int64_t V = cfg->vocab;
        if (cfg->vocab_multiple > 0) V = (V + cfg->vocab_multiple - 1) / cfg->vocab_multiple * cfg->vocab_multiple;
        const int64_t head = stage == pp - 1 ? (V + t - 1) / t * (int64_t)cfg->d_model : 0;
        int64_t n = (l->recompute == RECOMPUTE_FULL ? 0 : layer_params_per_gpu(cfg, l) * layers) + head;
        if (moe && l->recompute != RECOMPUTE_FULL) { /* the layers' dense parts and the local experts' weights */
            const int nm = moe_stage_moe_layers(cfg, l, stage, layers);
            n = (int64_t)(layers - nm) * moe_layer_dense_params_per_gpu(cfg, l, 0) +
                (int64_t)nm * (moe_layer_dense_params_per_gpu(cfg, l, 1) + moe_layer_expert_params_per_gpu(cfg, l)) + head;
        }
        copies = (int64_t)llround((double)n * f->weight_copy_bytes);
        out->params += copies;
    }
    if (f->grads_lazy && layout_micro_batches(l) <= 1) {
        /* the peak: the start of backward (copies, activations, logits, no
         * gradients yet) or its end (every gradient, the rest freed). With
         * more micro-batches a step, the first one's gradients are held
         * while the next one's activations pile up: every part at once */
        const int64_t fwd = copies + out->activations + out->embedding_head + out->moe_activations;
        const int64_t grads = out->grads + out->expert_grads;
        out->total = out->params - copies + out->optimizer + out->buffers + out->expert_params + out->expert_optimizer +
                     out->moe_buffers + (fwd > grads ? fwd : grads);
    } else {
        out->total = out->params + out->grads + out->optimizer + out->activations + out->embedding_head + out->buffers +
                     out->expert_params + out->expert_grads + out->expert_optimizer + out->moe_activations +
                     out->moe_buffers;
    }
}

int64_t framework_reserved_bytes(const framework_profile *f, int64_t allocated) {
    if (!f || !(f->reserve_factor > 1.0)) return allocated;
    return (int64_t)llround((double)allocated * f->reserve_factor);
}
