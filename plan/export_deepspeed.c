/*
 * export_deepspeed.c: a layout for DeepSpeed (names from framework_keys.c's
 * DeepSpeed table; export_plan.h lists the files).
 *
 * ds_config.json is the config DeepSpeed reads as it is (deepspeed.
 * initialize(config=...)): batch sizes (train_batch_size = micro-batch x
 * gradient_accumulation_steps x dp, the pipeline engine's micro-batches
 * per step), bf16 / fp16, the ZeRO stage. With a pipeline, partition.json
 * holds the stage boundaries over the layer specs [embedding, layer 0 ..
 * layer L-1, final norm + head] (L + 2 specs) in PipelineModule's own form
 * (self.parts: num_stages + 1 offsets), whether DeepSpeed's "uniform" or
 * "parameters" method would give the same, the checkpoint interval and the
 * MoE layer's arguments; pipeline.py is the few lines that build the
 * PipelineModule with exactly those boundaries (a subclass setting
 * self.parts and the stage's bounds through PipelineModule._set_bounds,
 * which DeepSpeed documents as the way to define a stage's layers).
 */
#include <stdio.h>
#include <stdlib.h>

#include "export_internal.h"
#include "model_params.h"
#include "plan.h"

#define K(k) deepspeed_key_name(k)

static int write_config(FILE *f, const layout *l) {
    const int m = l->global_batch / (l->dp * l->micro_batch);
    const int zero = l->dp > 1 ? (int)l->zero : 0;
    int rc = 0;
    rc |= fprintf(f, "{\n  \"%s\": %d,\n  \"%s\": %d,\n  \"%s\": %d,\n", K(DK_TRAIN_BATCH_SIZE), l->global_batch,
                  K(DK_MICRO_BATCH), l->micro_batch, K(DK_GRAD_ACCUM), m) < 0;
    if (l->prec == PRECISION_BF16) rc |= fprintf(f, "  \"%s\": {\"%s\": true},\n", K(DK_BF16), K(DK_ENABLED)) < 0;
    else if (l->prec == PRECISION_FP16) rc |= fprintf(f, "  \"%s\": {\"%s\": true},\n", K(DK_FP16), K(DK_ENABLED)) < 0;
    rc |= fprintf(f, "  \"%s\": {\"%s\": %d}\n}\n", K(DK_ZERO), K(DK_ZERO_STAGE), zero) < 0;
    return rc ? -1 : 0;
}

/* parts[] (P + 1 offsets over the L + 2 specs) of the stage split, and which
 * of DeepSpeed's own methods gives the same ("uniform", "parameters", or
 * NULL). */
static const char *stage_parts(const gpt_config *c, const layout *l, const int *stage, int *parts, int *ref) {
    const int P = l->pp, L = c->n_layers;
    parts[0] = 0;
    for (int s = 0; s + 1 < P; s++) parts[s + 1] = parts[s] + stage[s] + (s == 0 ? 1 : 0);
    parts[P] = L + 2;
    /* ds_utils.partition_uniform over the L + 2 specs */
    const int n = L + 2, chunk = n / P, residual = n - chunk * P;
    int same = 1;
    for (int p = 0; p <= P; p++) {
        ref[p] = p * chunk + (p < residual ? p : residual);
        if (ref[p] != parts[p]) same = 0;
    }
    if (same) return "uniform";
    int *dsl = malloc(sizeof *dsl * (size_t)P);
    const char *method = NULL;
    if (dsl && plan_deepspeed_parameters_split(c, P, dsl, NULL, 0) == PL_OK) {
        same = 1;
        for (int s = 0; s < P; s++)
            if (dsl[s] != stage[s]) same = 0;
        if (same) method = "parameters";
    }
    free(dsl);
    return method;
}

static int write_partition(FILE *f, const gpt_config *c, const layout *l, const int *stage, const int *parts,
                           const char *method) {
    const int P = l->pp;
    int rc = 0;
    rc |= fprintf(f, "{\n  \"%s\": %d,\n  \"layer_specs\": %d,\n  \"layer_specs_are\": \"embedding, %d transformer "
                     "layers, final norm + head\",\n",
                  K(DK_PM_NUM_STAGES), P, c->n_layers + 2, c->n_layers) < 0;
    rc |= fprintf(f, "  \"parts\": [") < 0;
    for (int p = 0; p <= P; p++) rc |= fprintf(f, "%s%d", p ? ", " : "", parts[p]) < 0;
    rc |= fprintf(f, "],\n  \"stage_layers\": [") < 0;
    for (int s = 0; s < P; s++) rc |= fprintf(f, "%s%d", s ? ", " : "", stage[s]) < 0;
    rc |= fprintf(f, "],\n  \"same_as_%s\": ", K(DK_PM_PARTITION_METHOD)) < 0;
    rc |= (method ? fprintf(f, "\"%s\"", method) : fprintf(f, "null")) < 0;
    rc |= fprintf(f, ",\n  \"%s\": %d", K(DK_PM_AC_INTERVAL), l->recompute == RECOMPUTE_FULL ? 1 : 0) < 0;
    if (gpt_is_moe(c)) {
        rc |= fprintf(f, ",\n  \"moe\": {\"%s\": %d, \"%s\": %d, \"%s\": %d, \"hidden_size\": %d, \"expert_ffn\": %d, "
                         "\"moe_layers\": [",
                      K(DK_MOE_NUM_EXPERTS), c->n_experts, K(DK_MOE_EP_SIZE), l->ep > 1 ? l->ep : 1, K(DK_MOE_K),
                      c->top_k, c->d_model, c->moe_d_ff) < 0;
        for (int i = 0, n = 0; i < c->n_layers; i++)
            if (gpt_layer_is_moe(c, i)) rc |= fprintf(f, "%s%d", n++ ? ", " : "", i) < 0;
        rc |= fprintf(f, "]}") < 0;
    }
    rc |= fprintf(f, "\n}\n") < 0;
    return rc ? -1 : 0;
}

static int write_pipeline_py(FILE *f, const gpt_config *c) {
    int rc = 0;
    rc |= fprintf(f, "\"\"\"pipeline.py: the PipelineModule of this plan (%s), with the stage boundaries of\n"
                     "partition.json. Build the %d layer specs yourself (embedding, %d transformer layers, final\n"
                     "norm + head, as deepspeed.pipe.LayerSpec%s), then:\n\n"
                     "    module = pipeline.build(layers, loss_fn)\n"
                     "    engine, *_ = deepspeed.initialize(model=module, config=\"ds_config.json\", ...)\n\"\"\"\n",
                  plan_framework_version(PLAN_FRAMEWORK_DEEPSPEED), c->n_layers + 2, c->n_layers,
                  gpt_is_moe(c) ? "; the MoE layers listed in partition.json as deepspeed.moe.layer.MoE with its "
                                  "\"moe\" arguments"
                                : "") < 0;
    rc |= fprintf(f, "import json\nimport os\n\nfrom deepspeed.pipe import PipelineModule\n\n") < 0;
    rc |= fprintf(f, "with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), \"partition.json\")) as f:\n"
                     "    PLAN = json.load(f)\n\n\n") < 0;
    rc |= fprintf(f, "class PlannedPipelineModule(PipelineModule):\n"
                     "    \"\"\"PipelineModule whose stages hold the planned layers (partition.json's parts).\"\"\"\n\n"
                     "    def _partition_layers(self, method=\"%s\"):\n"
                     "        self.parts = list(PLAN[\"parts\"])\n"
                     "        stage = self._topo.get_coord(self.global_rank).pipe\n"
                     "        self._set_bounds(start=self.parts[stage], stop=self.parts[stage + 1])\n\n\n",
                  K(DK_V_UNIFORM)) < 0;
    rc |= fprintf(f, "def build(layers, loss_fn=None, **kwargs):\n"
                     "    \"\"\"The PipelineModule over layers (the layer specs above).\"\"\"\n"
                     "    assert len(layers) == PLAN[\"layer_specs\"], f\"the plan has {PLAN['layer_specs']} layer "
                     "specs, got {len(layers)}\"\n"
                     "    return PlannedPipelineModule(layers=layers, loss_fn=loss_fn, %s=PLAN[\"%s\"],\n"
                     "                                 %s=PLAN[\"%s\"], **kwargs)\n",
                  K(DK_PM_NUM_STAGES), K(DK_PM_NUM_STAGES), K(DK_PM_AC_INTERVAL), K(DK_PM_AC_INTERVAL)) < 0;
    return rc ? -1 : 0;
}

pl_status export_deepspeed_build(const plan_export_in *in, plan_export_files *out, char *msg, size_t len) {
    const gpt_config *c = in->cfg;
    const layout *l = in->l;
    const int P = l->pp;
    export_stream s;
    if (export_stream_open(&s) < 0 || export_stream_keep(out, "ds_config.json", &s, write_config(s.f, l)) < 0)
        return pl_fail(msg, len, PL_ERR_NOMEM, "writing the deepspeed export failed");
    const char *how;
    if (P > 1) {
        int *stage = malloc(sizeof *stage * (size_t)P), *parts = malloc(sizeof *parts * (size_t)(P + 1)),
            *ref = malloc(sizeof *ref * (size_t)(P + 1));
        int rc = !stage || !parts || !ref ? -1 : 0;
        const char *method = NULL;
        if (rc == 0) {
            for (int i = 0; i < P; i++) stage[i] = export_stage_layers(l, in->chunk_layers, i);
            method = stage_parts(c, l, stage, parts, ref);
            if (export_stream_open(&s) < 0 ||
                export_stream_keep(out, "partition.json", &s, write_partition(s.f, c, l, stage, parts, method)) < 0 ||
                export_stream_open(&s) < 0 || export_stream_keep(out, "pipeline.py", &s, write_pipeline_py(s.f, c)) < 0)
                rc = -1;
        }
        free(stage);
        free(parts);
        free(ref);
        if (rc < 0) return pl_fail(msg, len, PL_ERR_NOMEM, "writing the deepspeed export failed");
        how = "Build the layer specs, then (pipeline.py):\n"
              "  module = pipeline.build(layers, loss_fn)\n"
              "  engine, *_ = deepspeed.initialize(model=module, config=\"ds_config.json\", ...)\n"
              "and launch with `deepspeed --num_gpus GPUS_PER_NODE --num_nodes NODES train.py`.\n";
    } else {
        how = "No pipeline: deepspeed.initialize(model=your_model, config=\"ds_config.json\", ...).\n";
    }
    if (gpt_is_moe(c))
        export_note(out, "each MoE layer: deepspeed.moe.layer.MoE(hidden_size=%d, expert=<an MLP of width %d>, "
                         "num_experts=%d, ep_size=%d, k=%d)",
                    c->d_model, c->moe_d_ff, c->n_experts, l->ep > 1 ? l->ep : 1, c->top_k);
    if (export_readme(out, in, PLAN_FRAMEWORK_DEEPSPEED, how) < 0)
        return pl_fail(msg, len, PL_ERR_NOMEM, "writing the deepspeed export failed");
    return PL_OK;
}
