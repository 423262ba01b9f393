/*
 * export_plan.h: a planned layout written in the formats people launch
 * training with. Each writer takes the layout, the model and the resolved
 * layers of every pipeline chunk (pp * vp entries in pipeline order: chunk
 * c runs on stage c % pp as virtual chunk c / pp, the order Megatron's
 * layout string and torchtitan's looped schedules use), so that an explicit
 * non-uniform split and a uniform one are written the same way.
 *
 *   megatron    Megatron-LM command-line arguments, one per line with a
 *               shell continuation, names as megatron/training/arguments.py
 *               defines them: --tensor-model-parallel-size,
 *               --pipeline-model-parallel-size, --context-parallel-size,
 *               --sequence-parallel, --micro-batch-size, --global-batch-size,
 *               --num-layers-per-virtual-pipeline-stage (uniform
 *               interleaving), --decoder-first-pipeline-num-layers /
 *               --decoder-last-pipeline-num-layers (vp = 1, only the first
 *               and last stages differ), else --pipeline-model-parallel-layout
 *               ("Et*3|(t*4|)*6t*3,L": E embedding, t a decoder layer,
 *               L the loss, '|' between chunks in pipeline order, runs of
 *               three or more equal middle chunks as "(t*n|)*k"),
 *               --recompute-granularity (full with --recompute-method
 *               uniform --recompute-num-layers 1, or selective),
 *               --use-distributed-optimizer (zero 1 / 2), --use-torch-fsdp2
 *               (zero 3 / fsdp), --bf16 / --fp16 / --fp8-format hybrid|e4m3
 *               with --fp8-recipe delayed|tensorwise|blockwise|mxfp8, and
 *               the model's --num-layers, --hidden-size, --ffn-hidden-size,
 *               --num-attention-heads, --group-query-attention
 *               --num-query-groups, --seq-length,
 *               --max-position-embeddings. Lines starting with '#' are notes.
 *   torchtitan  a TOML fragment with torchtitan's JobConfig names
 *               (torchtitan/config/job_config.py): [parallelism] degrees
 *               (data_parallel_replicate_degree, data_parallel_shard_degree,
 *               fsdp_reshard_after_forward, tensor_parallel_degree,
 *               context_parallel_degree, pipeline_parallel_degree),
 *               pipeline_parallel_schedule ("1F1B" or "Interleaved1F1B"),
 *               pipeline_parallel_split_points as module names "layers.N"
 *               (the first module of every chunk after the first),
 *               pipeline_parallel_microbatch_size; [training]
 *               local_batch_size (per data-parallel rank), global_batch_size,
 *               seq_len, mixed_precision_param; [activation_checkpoint] mode;
 *               FP8: [model] converters ["float8"] with [float8] recipe_name,
 *               enable_fsdp_float8_all_gather,
 *               precompute_float8_dynamic_scale_for_fsdp, filter_fqns, or
 *               ["mx"] with [mx] recipe_name "mxfp8", filter_fqns.
 *   deepspeed   JSON: "ds_config" with DeepSpeed's config keys
 *               (train_batch_size, train_micro_batch_size_per_gpu,
 *               gradient_accumulation_steps, bf16 / fp16 enabled,
 *               zero_optimization.stage), and "pipeline_module" with the
 *               PipelineModule arguments (num_stages,
 *               activation_checkpoint_interval) and the explicit boundaries
 *               "parts" over the layer specs [embedding, L layers, final
 *               norm + head] in DeepSpeed's self.parts form (num_stages + 1
 *               offsets), with partition_method "parameters" when the split
 *               is exactly DeepSpeed's own parameters split and "uniform"
 *               when it is its uniform one; otherwise "explicit", which
 *               DeepSpeed does not accept by name (its methods are uniform,
 *               parameters and type:REGEX): the note says to set parts in a
 *               PipelineModule subclass.
 *   json        the layout, its chunks and, when given, the prediction.
 *
 * Frameworks' limits are written as notes (a '#' line in the argument list
 * and the TOML, a "notes" array in the JSON), never silently dropped: ZeRO 2
 * / 3 with DeepSpeed's pipeline engine, Megatron's FSDP2 with pp > 1,
 * torchtitan's missing ZeRO-1 and fp16.
 */
#ifndef PLACER_PLAN_EXPORT_PLAN_H
#define PLACER_PLAN_EXPORT_PLAN_H

#include <stddef.h>
#include <stdio.h>

#include "graph.h"
#include "layout.h"
#include "layout_sim.h"
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

/* Write layout l of model cfg in format fmt to f. chunk_layers has
 * l->pp * l->vp entries summing to cfg->n_layers (each >= 1). res may be
 * NULL (only the json format uses it: the predicted figures). PL_ERR_INVALID
 * for chunk counts that do not add up; PL_ERR_IO when writing fails. */
pl_status plan_export_write(FILE *f, plan_export_format fmt, const gpt_config *cfg, const layout *l,
                            const int *chunk_layers, const layout_result *res, char *msg, size_t len);

/* The same into a malloc'd NUL-terminated string (*out, caller frees). */
pl_status plan_export_string(plan_export_format fmt, const gpt_config *cfg, const layout *l,
                             const int *chunk_layers, const layout_result *res, char **out, char *msg,
                             size_t len);

/* The writers, for callers that compose them (cmd_plan's --json puts a
 * json object per layout into its own document). Each writes one
 * complete document (json: one object, no trailing newline). */
int plan_export_megatron(FILE *f, const gpt_config *cfg, const layout *l, const int *chunk_layers);
int plan_export_torchtitan(FILE *f, const gpt_config *cfg, const layout *l, const int *chunk_layers);
int plan_export_deepspeed(FILE *f, const gpt_config *cfg, const layout *l, const int *chunk_layers);
int plan_export_json(FILE *f, const gpt_config *cfg, const layout *l, const int *chunk_layers,
                     const layout_result *res);

#endif
