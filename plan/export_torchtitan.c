/*
 * export_torchtitan.c: a layout as a torchtitan TOML fragment (JobConfig
 * names from torchtitan/config/job_config.py; see export_plan.h).
 *
 * Mapping. The data-parallel degree goes to data_parallel_replicate_degree
 * (DDP) for zero 0 and to data_parallel_shard_degree (FSDP2) otherwise:
 * zero 3 reshards after forward ("always"), zero 1 / 2 keep the gathered
 * weights from forward to backward ("never": torchtitan has no ZeRO-1 or
 * ZeRO-2 as such, and this is the FSDP2 setting closest to them), fsdp
 * takes FSDP2's default. torchtitan's tensor parallelism always shards the
 * sequence (sp). Split points name the first module of every chunk after
 * the first, "layers.N" in the model's own numbering, so the embedding sits
 * in the first chunk and the final norm, head and loss in the last; with
 * vp > 1 the looped schedule Interleaved1F1B takes pp * vp chunks. The
 * layout's sched: zb-v is ZBVZeroBubble and dualpipev DualPipeV (both V
 * schedules of two stages per rank: pp * 2 chunks, the split points in
 * model order; torchtitan places them in a V itself), zb-h1 and zb-h2
 * InterleavedZeroBubble with one stage per rank (a comment says so).
 */
#include <stdio.h>

#include "export_internal.h"

/* FP8 as torchtitan's model converters (JobConfig's [float8] and [mx]
 * sections, torchtitan/config/job_config.py): tensorwise is the "float8"
 * converter's dynamic tensorwise recipe, with float8 all-gathers and
 * precomputed scales under FSDP; mxfp8 the "mx" converter. torchtitan has
 * no delayed scaling and no DeepSeek blockwise recipe: the note says what
 * is written instead (tensorwise; rowwise, torchao's finer-grained one).
 * Both converters skip the output layer ("output"), as the simulator does. */
static int write_fp8(FILE *f, const layout *l, int sharded) {
    int rc = 0;
    if (l->fp8 == FP8_RECIPE_DELAYED)
        rc |= fprintf(f, "\n# fp8=delayed: torchtitan has no delayed scaling; tensorwise (current scaling) written\n") < 0;
    if (l->fp8 == FP8_RECIPE_BLOCKWISE)
        rc |= fprintf(f, "\n# fp8=blockwise: torchtitan has no 128 x 128 block scaling; rowwise written (the closest)\n") < 0;
    if (l->fp8 == FP8_RECIPE_MXFP8) {
        rc |= fprintf(f, "\n[model]\nconverters = [\"mx\"]\n\n[mx]\nrecipe_name = \"mxfp8\"\nfilter_fqns = [\"output\"]\n") < 0;
        return rc ? -1 : 0;
    }
    const int rowwise = l->fp8 == FP8_RECIPE_BLOCKWISE, tw = !rowwise;
    rc |= fprintf(f, "\n[model]\nconverters = [\"float8\"]\n\n[float8]\nrecipe_name = \"%s\"\n", rowwise ? "rowwise" : "tensorwise") < 0;
    if (tw && sharded)
        rc |= fprintf(f, "enable_fsdp_float8_all_gather = true\nprecompute_float8_dynamic_scale_for_fsdp = true\n") < 0;
    rc |= fprintf(f, "filter_fqns = [\"output\"]\n") < 0;
    return rc ? -1 : 0;
}

int plan_export_torchtitan(FILE *f, const gpt_config *cfg, const layout *l, const int *ch) {
    int rc = 0;
    const int sharded = l->dp > 1 && l->zero != ZERO_NONE;
    const char *reshard = l->zero == ZERO_3 ? "always" : l->zero == ZERO_FSDP ? "default" : "never";
    if (sharded && (l->zero == ZERO_1 || l->zero == ZERO_2))
        rc |= fprintf(f, "# zero=%d: torchtitan has no ZeRO-%d; FSDP2 without resharding after forward is the "
                         "closest (weights gathered from forward to backward)\n",
                      (int)l->zero, (int)l->zero) < 0;
    if (l->prec == PRECISION_FP16)
        rc |= fprintf(f, "# torchtitan has no fp16 mixed precision: bfloat16 written\n") < 0;
    if (cfg->n_experts > 1 && l->etp > 1 && l->etp != l->tp)
        rc |= fprintf(f, "# torchtitan supports expert_tensor_parallel_degree 1 or equal to tensor_parallel_degree "
                         "only (etp=%d, tp=%d)\n", l->etp, l->tp) < 0;
    if (l->tp > 1 && !l->sp) rc |= fprintf(f, "# torchtitan's tensor parallelism always shards the sequence\n") < 0;
    rc |= fprintf(f, "[parallelism]\n") < 0;
    rc |= fprintf(f, "data_parallel_replicate_degree = %d\n", sharded ? 1 : l->dp) < 0;
    rc |= fprintf(f, "data_parallel_shard_degree = %d\n", sharded ? l->dp : 1) < 0;
    if (sharded) rc |= fprintf(f, "fsdp_reshard_after_forward = \"%s\"\n", reshard) < 0;
    rc |= fprintf(f, "tensor_parallel_degree = %d\n", l->tp) < 0;
    rc |= fprintf(f, "context_parallel_degree = %d\n", l->cp) < 0;
    rc |= fprintf(f, "pipeline_parallel_degree = %d\n", l->pp) < 0;
    if (cfg->n_experts > 1) { /* torchtitan/config/job_config.py: etp is 1 or tp there */
        rc |= fprintf(f, "expert_parallel_degree = %d\n", l->ep > 1 ? l->ep : 1) < 0;
        rc |= fprintf(f, "expert_tensor_parallel_degree = %d\n", l->etp > 1 ? l->etp : 1) < 0;
    }
    if (l->pp > 1) {
        /* the split orders (layout sched=): torchtitan's names where it runs them */
        const char *ps = l->vp > 1 ? "Interleaved1F1B" : "1F1B";
        if (l->sched == SCHED_ZB_V) ps = "ZBVZeroBubble";
        else if (l->sched == SCHED_DUALPIPEV) ps = "DualPipeV";
        else if (l->sched == SCHED_ZB_H1 || l->sched == SCHED_ZB_H2) {
            ps = "InterleavedZeroBubble";
            rc |= fprintf(f, "# sched=%s: torchtitan has no single-stage zero-bubble schedule; InterleavedZeroBubble "
                             "(its looped zero-bubble schedule: B and W apart) with one stage per rank%s\n",
                          schedule_order_name(l->sched),
                          l->sched == SCHED_ZB_H2 ? ", at ZB-H1's memory (no ZB-H2 memory setting)" : "") < 0;
        }
        rc |= fprintf(f, "pipeline_parallel_schedule = \"%s\"\n", ps) < 0;
        rc |= fprintf(f, "pipeline_parallel_split_points = [") < 0;
        int first = 0;
        for (int c = 0; c + 1 < l->pp * l->vp; c++) {
            first += ch[c];
            rc |= fprintf(f, "%s\"layers.%d\"", c ? ", " : "", first) < 0;
        }
        rc |= fprintf(f, "]\n") < 0;
        rc |= fprintf(f, "pipeline_parallel_microbatch_size = %d\n", l->micro_batch) < 0;
    }
    rc |= fprintf(f, "\n[training]\n") < 0;
    rc |= fprintf(f, "local_batch_size = %d\n", l->global_batch / (l->dp > 0 ? l->dp : 1)) < 0;
    rc |= fprintf(f, "global_batch_size = %d\n", l->global_batch) < 0;
    rc |= fprintf(f, "seq_len = %d\n", cfg->seq_len) < 0;
    rc |= fprintf(f, "mixed_precision_param = \"%s\"\n",
                  l->prec == PRECISION_FP32 || l->prec == PRECISION_TF32 ? "float32" : "bfloat16") < 0;
    if (l->prec == PRECISION_FP8) rc |= write_fp8(f, l, sharded) < 0;
    rc |= fprintf(f, "\n[activation_checkpoint]\n") < 0;
    /* torchtitan's own mode names (they happen to be ours: recompute_kind_name's stay free to change) */
    rc |= fprintf(f, "mode = \"%s\"\n", l->recompute == RECOMPUTE_FULL        ? "full"
                                        : l->recompute == RECOMPUTE_SELECTIVE ? "selective"
                                                                              : "none") < 0;
    if (l->recompute == RECOMPUTE_SELECTIVE) rc |= fprintf(f, "selective_ac_option = \"op\"\n") < 0;
    return rc ? -1 : 0;
}
