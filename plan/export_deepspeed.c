/*
 * export_deepspeed.c: a layout for DeepSpeed's pipeline engine, as JSON
 * with two objects (export_plan.h): "ds_config", the DeepSpeed config file
 * (its documented keys only), and "pipeline_module", the arguments of
 * deepspeed.pipe.PipelineModule plus the explicit stage boundaries "parts"
 * over the layer specs [embedding, layer 0 .. layer L-1, final norm + head]
 * (L + 2 specs), in the form of PipelineModule's self.parts.
 *
 * DeepSpeed itself does no tensor or context parallelism (Megatron-DeepSpeed
 * does the tensor part through its mpu; Ulysses is another sequence split
 * than cp), its pipeline engine runs ZeRO stage 0 or 1 only, and it has no
 * interleaved schedule; each of these, where the layout needs it, becomes a
 * line of "notes" rather than a silently different config.
 */
#include <stdio.h>
#include <stdlib.h>

#include "export_internal.h"
#include "plan.h"

int plan_export_deepspeed(FILE *f, const gpt_config *cfg, const layout *l, const int *ch) {
    const int P = l->pp, L = cfg->n_layers;
    int *stage = malloc(sizeof *stage * (size_t)P), *parts = malloc(sizeof *parts * (size_t)(P + 1));
    int *ref = malloc(sizeof *ref * (size_t)(P + 1));
    int rc = 0;
    if (!stage || !parts || !ref) {
        rc = -1;
        goto out;
    }
    for (int s = 0; s < P; s++) stage[s] = export_stage_layers(l, ch, s);
    parts[0] = 0;
    for (int s = 0; s + 1 < P; s++) parts[s + 1] = parts[s] + stage[s] + (s == 0 ? 1 : 0);
    parts[P] = L + 2;
    /* which of DeepSpeed's own methods gives exactly these boundaries */
    const char *method = "explicit";
    int same = 1;
    {
        /* ds_utils.partition_uniform over the L + 2 specs: what "uniform" calls */
        const int n = L + 2, chunk = n / P, residual = n - chunk * P;
        for (int p = 0; p <= P; p++) ref[p] = p * chunk + (p < residual ? p : residual);
        for (int p = 0; p <= P; p++)
            if (ref[p] != parts[p]) same = 0;
        if (same) method = "uniform";
    }
    if (!same) {
        int *dsl = malloc(sizeof *dsl * (size_t)P);
        if (dsl && plan_deepspeed_parameters_split(cfg, P, dsl, NULL, 0) == PL_OK) {
            same = 1;
            for (int s = 0; s < P; s++)
                if (dsl[s] != stage[s]) same = 0;
            if (same) method = "parameters";
        }
        free(dsl);
    }
    const int m = l->global_batch / (l->dp * l->micro_batch);
    const int zero = l->dp > 1 ? (l->zero == ZERO_FSDP ? 3 : (int)l->zero) : 0;
    rc |= fprintf(f, "{\n  \"ds_config\": {\n") < 0;
    rc |= fprintf(f, "    \"train_batch_size\": %d,\n    \"train_micro_batch_size_per_gpu\": %d,\n"
                     "    \"gradient_accumulation_steps\": %d,\n",
                  l->global_batch, l->micro_batch, m) < 0;
    if (l->prec == PRECISION_BF16 || l->prec == PRECISION_FP8) rc |= fprintf(f, "    \"bf16\": {\"enabled\": true},\n") < 0;
    else if (l->prec == PRECISION_FP16) rc |= fprintf(f, "    \"fp16\": {\"enabled\": true},\n") < 0;
    rc |= fprintf(f, "    \"zero_optimization\": {\"stage\": %d}\n  },\n", zero) < 0;
    if (cfg->n_experts > 1)
        rc |= fprintf(f, "  \"moe\": {\"num_experts\": %d, \"ep_size\": %d, \"k\": %d},\n", cfg->n_experts,
                      l->ep > 1 ? l->ep : 1, cfg->top_k) < 0;
    rc |= fprintf(f, "  \"pipeline_module\": {\n    \"num_stages\": %d,\n    \"partition_method\": \"%s\",\n", P,
                  method) < 0;
    rc |= fprintf(f, "    \"activation_checkpoint_interval\": %d,\n", l->recompute == RECOMPUTE_NONE ? 0 : 1) < 0;
    rc |= fprintf(f, "    \"layer_specs\": \"embedding, %d transformer layers, final norm + head\",\n", L) < 0;
    rc |= fprintf(f, "    \"parts\": [") < 0;
    for (int p = 0; p <= P; p++) rc |= fprintf(f, "%s%d", p ? ", " : "", parts[p]) < 0;
    rc |= fprintf(f, "],\n    \"stage_layers\": [") < 0;
    for (int s = 0; s < P; s++) rc |= fprintf(f, "%s%d", s ? ", " : "", stage[s]) < 0;
    rc |= fprintf(f, "]\n  },\n  \"notes\": [") < 0;
    int nn = 0;
#define NOTE(...)                                                                                                      \
    do {                                                                                                               \
        rc |= fprintf(f, "%s\n    \"", nn++ ? "," : "") < 0;                                                          \
        rc |= fprintf(f, __VA_ARGS__) < 0;                                                                             \
        rc |= fprintf(f, "\"") < 0;                                                                                    \
    } while (0)
    if (!same)
        NOTE("PipelineModule accepts partition_method uniform, parameters or type:REGEX; for these boundaries set "
             "self.parts = parts in a subclass's _partition_layers");
    if (P > 1 && zero >= 2)
        NOTE("DeepSpeed's pipeline engine supports ZeRO stage 0 or 1 only; the layout asks for zero=%s",
             l->zero == ZERO_FSDP ? "fsdp" : l->zero == ZERO_3 ? "3" : "2");
    if (l->vp > 1)
        NOTE("DeepSpeed has no interleaved schedule: vp=%d written as one chunk per stage with the same layers", l->vp);
    if (l->sched != SCHED_1F1B)
        NOTE("DeepSpeed's pipeline engine has no zero-bubble or DualPipe schedule: sched=%s written as its 1F1B",
             schedule_order_name(l->sched));
    if (l->tp > 1)
        NOTE("tensor parallelism tp=%d%s comes from Megatron-DeepSpeed (--tensor-model-parallel-size), not the config",
             l->tp, l->sp ? " with sequence parallelism" : "");
    if (l->cp > 1) NOTE("context parallelism cp=%d has no DeepSpeed config key (Ulysses splits differently)", l->cp);
    if (l->recompute == RECOMPUTE_SELECTIVE)
        NOTE("selective recompute is Megatron-DeepSpeed's --recompute-granularity selective; interval 1 recomputes whole layers");
    if (l->prec == PRECISION_FP8) NOTE("fp8 GEMMs need Transformer Engine; bf16 elsewhere");
    if (cfg->n_experts > 1)
        NOTE("experts: deepspeed.moe.layer.MoE(hidden_size=%d, num_experts=%d, ep_size=%d, k=%d) in each MoE layer "
             "(the moe block below)%s", cfg->d_model, cfg->n_experts, l->ep > 1 ? l->ep : 1, cfg->top_k,
             l->etp > 1 ? "; DeepSpeed MoE has no expert tensor parallelism: etp written as 1" : "");
#undef NOTE
    rc |= fprintf(f, "%s]\n}\n", nn ? "\n  " : "") < 0;
out:
    free(stage);
    free(parts);
    free(ref);
    return rc ? -1 : 0;
}
