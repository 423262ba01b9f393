/*
 * export_plan.h: a planned layout written in the formats people launch
 * training with, as files that the framework named loads as written, at the
 * version plan_framework.h pins, and that describe the model and layout the
 * plan simulated: the architecture, the layout and stage split, the
 * micro-batch, the precision and FP8 recipe, the pipeline order. A layout
 * or model the framework cannot run is refused with one line saying what
 * is missing (plan_framework_layout_runs / _model_runs): an export never
 * writes another plan under the same numbers. Every key comes from the
 * framework's table in framework_keys.c.
 *
 * Each export is a set of files; the first is what `placer plan --export F`
 * prints on stdout, `--export F --out DIR` writes them all:
 *   megatron    args.txt   Megatron-LM's arguments only, one per line with a
 *                          shell continuation (pastes under
 *                          `python pretrain_gpt.py \`): the model's shapes
 *                          and architecture (normalization, activation,
 *                          rotary base, biases, untied embeddings, q/k norms,
 *                          MLA ranks, the experts, router and expert grid),
 *                          tp / pp / cp / sp, the stage split
 *                          (--num-layers-per-virtual-pipeline-stage when
 *                          uniform, --decoder-first/last-pipeline-num-layers
 *                          when only the ends differ, else
 *                          --pipeline-model-parallel-layout "Et*3|(t*4|)*6t*3,L"),
 *                          recomputation, the optimizer's sharding
 *                          (--use-distributed-optimizer; --use-torch-fsdp2
 *                          with --no-gradient-accumulation-fusion), the
 *                          precision (--fp8-format, --fp8-recipe), the batch
 *               env.sh     the environment the layout needs
 *                          (CUDA_DEVICE_MAX_CONNECTIONS)
 *               README     the plan, the versions, what to add (data,
 *                          tokenizer), the notes
 *   torchtitan  job.toml   a complete JobConfig TOML for --job.config_file:
 *                          [model] name and flavor, [training] local batch
 *                          (the micro-batch without a pipeline: torchtitan
 *                          accumulates global / (local x dp) steps; the
 *                          per-replica batch with one, split in
 *                          pipeline_parallel_microbatch_size micro-batches),
 *                          [parallelism] degrees, FSDP resharding, the
 *                          schedule and module_fqns_per_model_part (every
 *                          chunk's modules, in model order), [quantize]
 *                          converters, [activation_checkpoint]
 *               placer_model.py  only for a flavor cut to another layer
 *                          count: registers it (the TOML imports it by
 *                          [experimental] custom_import)
 *               README
 *   deepspeed   ds_config.json  the config DeepSpeed reads (batch sizes,
 *                          precision, ZeRO stage)
 *               partition.json  the stage split over the layer specs
 *                          [embedding, L layers, final norm + head] as
 *                          PipelineModule's parts, and the MoE layer's
 *                          arguments
 *               pipeline.py the few lines that build the PipelineModule
 *                          with those boundaries
 *               README
 *   json        plan.json  the layout (with its text form), its chunks, the
 *                          model and, when given, the prediction
 * and every framework's set ends with that plan.json too: what placer
 * simulated, for the parsers' check to compare the files with.
 */
#ifndef PLACER_PLAN_EXPORT_PLAN_H
#define PLACER_PLAN_EXPORT_PLAN_H

#include <stddef.h>
#include <stdio.h>

#include "graph.h"
#include "layout.h"
#include "layout_sim.h"
#include "model_arch.h"
#include "plan_framework.h"
#include "status.h"

typedef enum {
    PLAN_EXPORT_MEGATRON = 0,
    PLAN_EXPORT_TORCHTITAN,
    PLAN_EXPORT_DEEPSPEED,
    PLAN_EXPORT_JSON,
    PLAN_EXPORT_COUNT
} plan_export_format;

/* "megatron", "torchtitan", "deepspeed", "json". Static. */
const char *plan_export_format_name(plan_export_format f);

/* Parse one of the names above. PL_ERR_INVALID listing them otherwise. */
pl_status plan_export_parse_format(const char *text, plan_export_format *out, char *msg, size_t len);

/* The framework an export format is for (json: PLAN_FRAMEWORK_ANY). */
plan_framework plan_export_framework(plan_export_format f);

/* What an export writes. */
typedef struct {
    const gpt_config *cfg;       /* the model's shapes */
    const model_arch *arch;      /* its architecture fields; NULL: what cfg implies (no rotary base, family
                                    from the shapes) */
    const char *model_name;      /* "llama-3-8b"; NULL: "model" */
    const layout *l;             /* the layout */
    const int *chunk_layers;     /* l->pp * l->vp entries in pipeline order (chunk c on stage c % pp as
                                    virtual chunk c / pp; V orders: model order), summing to the layers */
    const layout_result *res;    /* its prediction, or NULL */
    plan_framework planned_for;  /* the --framework the plan was searched for (json writes it) */
} plan_export_in;

#define PLAN_EXPORT_MAX_FILES 5
#define PLAN_EXPORT_MAX_NOTES 12

/* One export's files (the first is the stdout one) and its notes (also in
 * the README). */
typedef struct {
    int n;
    char name[PLAN_EXPORT_MAX_FILES][32];
    char *text[PLAN_EXPORT_MAX_FILES];      /* malloc'd, NUL-terminated */
    int n_notes;
    char notes[PLAN_EXPORT_MAX_NOTES][320];
} plan_export_files;

/* Build the export of in in format fmt into *out (caller frees with
 * plan_export_files_free, also after a failure). PL_ERR_INVALID for chunk
 * counts that do not add up, and, with the refusal line in msg, for a
 * model or layout the format's framework does not run; PL_ERR_NOMEM. */
pl_status plan_export_build(plan_export_format fmt, const plan_export_in *in, plan_export_files *out, char *msg,
                            size_t len);
void plan_export_files_free(plan_export_files *f);

/* Write out's files into the directory dir (created with its missing
 * parents, as mkdir -p; files of the same names replaced). PL_ERR_IO
 * naming the directory or file that failed. */
pl_status plan_export_save(const plan_export_files *out, const char *dir, char *msg, size_t len);

/* The first file of the export of layout l of model cfg (no architecture
 * beyond cfg) written to f / into a malloc'd string (*out, caller frees).
 * plan_export_build's statuses; PL_ERR_IO when writing fails. */
pl_status plan_export_write(FILE *f, plan_export_format fmt, const gpt_config *cfg, const layout *l,
                            const int *chunk_layers, const layout_result *res, char *msg, size_t len);
pl_status plan_export_string(plan_export_format fmt, const gpt_config *cfg, const layout *l,
                             const int *chunk_layers, const layout_result *res, char **out, char *msg,
                             size_t len);

/* One layout as the JSON object `placer plan --json` lists (no trailing
 * newline): {"layout": {tp, sp, cp, pp, vp, dp, zero, micro_batch,
 * global_batch, micro_batches, recompute, precision, world}, "chunk_layers",
 * "stage_layers", "model": {layers, d_model, heads, kv_heads, d_ff, vocab,
 * seq_len}, "predicted": {...} when res is given}. The json export
 * (plan.json) adds to it what the framework checks compare: the layout's
 * ep, etp, dispatcher, fp8 recipe, order and text form, the model's
 * experts, MLA and architecture fields, the framework planned for.
 * Returns < 0 when writing fails. */
int plan_export_json(FILE *f, const gpt_config *cfg, const layout *l, const int *chunk_layers,
                     const layout_result *res);

#endif
