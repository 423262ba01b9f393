/*
 * export_torchtitan.c: a layout as a complete torchtitan TOML (JobConfig
 * names from framework_keys.c's torchtitan table; export_plan.h lists the
 * files).
 *
 * Mapping.
 *   model      [model] name and flavor: the torchtitan flavor with the
 *              model's shapes (plan_torchtitan_flavor); a flavor cut to
 *              another layer count gets a flavor of its own, "8B_4_layers",
 *              which placer_model.py registers ([experimental]
 *              custom_import imports it before the trainer looks the
 *              flavor up)
 *   batch      without a pipeline torchtitan runs local_batch_size
 *              sequences a forward and accumulates global / (local x dp)
 *              of them: local_batch_size is the micro-batch; with one,
 *              local_batch_size is the replica's whole batch (B / dp) and
 *              pipeline_parallel_microbatch_size the micro-batch, so one
 *              schedule runs all m micro-batches
 *   dp, zero   zero 0: data_parallel_replicate_degree (DDP); zero 3 and
 *              fsdp: data_parallel_shard_degree (FSDP2) with
 *              fsdp_reshard_after_forward "always" (zero 3) or "never"
 *              (fsdp keeps the gathered weights to the backward)
 *   pipeline   pipeline_parallel_schedule 1F1B, Interleaved1F1B (vp > 1),
 *              ZBVZeroBubble (zb-v), DualPipeV (dualpipev; its overlap of
 *              expert-parallel communication off, as simulated), and
 *              module_fqns_per_model_part: every chunk's modules in model
 *              order (tok_embeddings in the first, norm and output in the
 *              last; torchtitan puts chunk c on rank c % pp, or in a V)
 *   experts    expert_parallel_degree, expert_tensor_parallel_degree,
 *              expert_parallel_comm_backend (standard, or deepep for flex)
 *   precision  mixed_precision_param bfloat16 (float32 for fp32 with
 *              dtype float32); FP8 tensorwise: the float8 converter with
 *              recipe "tensorwise" (weights all-gathered in bf16, as
 *              simulated), MXFP8: the MX converter's mxfp8_cublas; both
 *              skip the output layer, as the simulator does
 *   recompute  [activation_checkpoint] mode none or full
 */
#include <stdio.h>
#include <string.h>

#include "export_internal.h"
#include "model_params.h"
#include "schedule.h"

#define K(k) torchtitan_key_name(k)

/* The flavor name: the torchtitan flavor itself, or "<flavor>_<L>_layers"
 * for a cut one. */
static void flavor_name(const plan_tt_flavor *t, const gpt_config *c, char *buf, size_t n) {
    if (c->n_layers == t->layers) snprintf(buf, n, "%s", t->flavor);
    else snprintf(buf, n, "%s_%d_layers", t->flavor, c->n_layers);
}

/* The registry dict of a torchtitan model (torchtitan/models/NAME/__init__.py). */
static const char *args_dict(const plan_tt_flavor *t) {
    return !strcmp(t->model, "deepseek_v3") ? "deepseekv3_args" : !strcmp(t->model, "qwen3") ? "qwen3_args" : "llama3_args";
}

static int write_modules(FILE *f, const gpt_config *c, const layout *l, const int *ch) {
    int rc = fprintf(f, "%s = [\n", K(TK_PP_MODULES)) < 0;
    const int C = l->pp * l->vp;
    for (int k = 0, first = 0; k < C; k++) {
        rc |= fprintf(f, "  [") < 0;
        int n = 0;
        if (k == 0) rc |= fprintf(f, "\"%s\"", K(TK_V_EMBEDDINGS)) < 0, n++;
        for (int i = first; i < first + ch[k]; i++) rc |= fprintf(f, "%s\"%s.%d\"", n++ ? ", " : "", K(TK_V_LAYERS), i) < 0;
        if (k == C - 1)
            rc |= fprintf(f, "%s\"%s\", \"%s\"", n ? ", " : "", K(TK_V_NORM), K(TK_V_OUTPUT)) < 0;
        rc |= fprintf(f, "]%s\n", k + 1 < C ? "," : "") < 0;
        first += ch[k];
    }
    (void)c;
    return fprintf(f, "]\n") < 0 || rc ? -1 : 0;
}

static int write_toml(FILE *f, const plan_export_in *in, const plan_tt_flavor *t, const char *flavor) {
    const gpt_config *c = in->cfg;
    const layout *l = in->l;
    const int sharded = l->dp > 1 && (l->zero == ZERO_3 || l->zero == ZERO_FSDP);
    const int moe = gpt_is_moe(c), cut = c->n_layers != t->layers;
    char text[LAYOUT_MAX_CHUNKS * 6 + 512];
    layout_format(l, text, sizeof text);
    int rc = 0;
    rc |= fprintf(f, "# placer plan for %s: torchtitan's trainer with --job.config_file this file\n",
                  plan_framework_version(PLAN_FRAMEWORK_TORCHTITAN)) < 0;
    rc |= fprintf(f, "[%s]\n%s = \"placer plan: %s, %s\"\n", K(TK_JOB), K(TK_JOB_DESCRIPTION),
                  in->model_name ? in->model_name : "model", text) < 0;
    rc |= fprintf(f, "\n[%s]\n%s = \"%s\"\n%s = \"%s\"\n", K(TK_MODEL), K(TK_MODEL_NAME), t->model, K(TK_MODEL_FLAVOR),
                  flavor) < 0;
    if (l->prec == PRECISION_FP8)
        rc |= fprintf(f, "%s = [\"%s\"]\n", K(TK_MODEL_CONVERTERS),
                      K(l->fp8 == FP8_RECIPE_MXFP8 ? TK_V_CONV_MX : TK_V_CONV_FLOAT8)) < 0;
    if (cut)
        rc |= fprintf(f, "\n[%s]\n%s = \"placer_model\"  # registers flavor %s (placer_model.py)\n",
                      K(TK_JOB_CUSTOM_IMPORT_SECTION), K(TK_JOB_CUSTOM_IMPORT), flavor) < 0;
    const int fp32 = l->prec == PRECISION_FP32;
    rc |= fprintf(f, "\n[%s]\n", K(TK_TRAINING)) < 0;
    rc |= fprintf(f, "%s = %d\n", K(TK_LOCAL_BATCH_SIZE), l->pp > 1 ? l->global_batch / l->dp : l->micro_batch) < 0;
    rc |= fprintf(f, "%s = %d\n%s = %d\n", K(TK_GLOBAL_BATCH_SIZE), l->global_batch, K(TK_SEQ_LEN), c->seq_len) < 0;
    rc |= fprintf(f, "%s = \"%s\"\n", K(TK_MIXED_PRECISION_PARAM), K(fp32 ? TK_V_FP32 : TK_V_BF16)) < 0;
    if (fp32) rc |= fprintf(f, "%s = \"%s\"\n", K(TK_DTYPE), K(TK_V_FP32)) < 0;
    rc |= fprintf(f, "\n[%s]\n", K(TK_PARALLELISM)) < 0;
    rc |= fprintf(f, "%s = %d\n", K(TK_DP_REPLICATE), sharded ? 1 : l->dp) < 0;
    rc |= fprintf(f, "%s = %d\n", K(TK_DP_SHARD), sharded ? l->dp : 1) < 0;
    if (sharded || l->cp > 1)
        rc |= fprintf(f, "%s = \"%s\"\n", K(TK_FSDP_RESHARD),
                      K(l->zero == ZERO_FSDP ? TK_V_RESHARD_NEVER : TK_V_RESHARD_ALWAYS)) < 0;
    rc |= fprintf(f, "%s = %d\n%s = %d\n%s = %d\n", K(TK_TP), l->tp, K(TK_CP), l->cp, K(TK_PP), l->pp) < 0;
    if (moe) {
        rc |= fprintf(f, "%s = %d\n%s = %d\n", K(TK_EP), l->ep > 1 ? l->ep : 1, K(TK_ETP), l->etp > 1 ? l->etp : 1) < 0;
        rc |= fprintf(f, "%s = \"%s\"\n", K(TK_EP_COMM_BACKEND),
                      K(l->dispatcher == MOE_DISPATCH_FLEX ? TK_V_DEEPEP : TK_V_STANDARD)) < 0;
    }
    if (l->pp > 1) {
        const torchtitan_key s = l->sched == SCHED_ZB_V        ? TK_V_SCHED_ZBV
                                 : l->sched == SCHED_DUALPIPEV ? TK_V_SCHED_DUALPIPEV
                                 : l->vp > 1                   ? TK_V_SCHED_INTERLEAVED
                                                               : TK_V_SCHED_1F1B;
        rc |= fprintf(f, "%s = \"%s\"\n", K(TK_PP_SCHEDULE), K(s)) < 0;
        rc |= fprintf(f, "%s = %d\n", K(TK_PP_MICROBATCH), l->micro_batch) < 0;
        if (l->sched == SCHED_DUALPIPEV) /* the simulated DualPipeV hides no expert-parallel traffic */
            rc |= fprintf(f, "%s = false\n", K(TK_PP_EP_OVERLAP)) < 0;
        rc |= write_modules(f, c, l, in->chunk_layers) < 0;
    }
    rc |= fprintf(f, "\n[%s]\n%s = \"%s\"\n", K(TK_AC), K(TK_AC_MODE),
                  K(l->recompute == RECOMPUTE_FULL ? TK_V_AC_FULL : TK_V_AC_NONE)) < 0;
    if (l->prec == PRECISION_FP8) {
        const int mx = l->fp8 == FP8_RECIPE_MXFP8;
        rc |= fprintf(f, "\n[%s]\n%s = \"%s\"\n%s = [\"%s\"]\n", K(mx ? TK_MX_SECTION : TK_FLOAT8_SECTION),
                      K(mx ? TK_MX_RECIPE : TK_FLOAT8_RECIPE), K(mx ? TK_V_MXFP8 : TK_V_TENSORWISE),
                      K(mx ? TK_MX_FILTER : TK_FLOAT8_FILTER), K(TK_V_OUTPUT)) < 0;
    }
    return rc ? -1 : 0;
}

static int write_flavor_module(FILE *f, const plan_export_in *in, const plan_tt_flavor *t, const char *flavor) {
    int rc = 0;
    rc |= fprintf(f, "\"\"\"placer_model: registers torchtitan flavor \"%s\": %s's \"%s\" with %d layers (the model "
                     "placer planned: %s).\n\njob.toml imports this module ([%s] %s); keep it on PYTHONPATH.\n\"\"\"\n",
                  flavor, t->model, t->flavor, in->cfg->n_layers, in->model_name ? in->model_name : "model",
                  K(TK_JOB_CUSTOM_IMPORT_SECTION), K(TK_JOB_CUSTOM_IMPORT)) < 0;
    rc |= fprintf(f, "import dataclasses\n\nfrom torchtitan.models import %s\n\n", t->model) < 0;
    rc |= fprintf(f, "%s.%s[\"%s\"] = dataclasses.replace(%s.%s[\"%s\"], n_layers=%d)\n", t->model, args_dict(t),
                  flavor, t->model, args_dict(t), t->flavor, in->cfg->n_layers) < 0;
    return rc ? -1 : 0;
}

pl_status export_torchtitan_build(const plan_export_in *in, plan_export_files *out, char *msg, size_t len) {
    const plan_tt_flavor *t = plan_torchtitan_flavor(in->cfg);
    if (!t) return pl_fail(msg, len, PL_ERR_INVALID, "%s has no model of this shape",
                           plan_framework_version(PLAN_FRAMEWORK_TORCHTITAN));
    char flavor[64];
    flavor_name(t, in->cfg, flavor, sizeof flavor);
    export_stream s;
    if (export_stream_open(&s) < 0 || export_stream_keep(out, "job.toml", &s, write_toml(s.f, in, t, flavor)) < 0)
        return pl_fail(msg, len, PL_ERR_NOMEM, "writing the torchtitan export failed");
    const int cut = in->cfg->n_layers != t->layers;
    if (cut) {
        if (export_stream_open(&s) < 0 ||
            export_stream_keep(out, "placer_model.py", &s, write_flavor_module(s.f, in, t, flavor)) < 0)
            return pl_fail(msg, len, PL_ERR_NOMEM, "writing the torchtitan export failed");
        export_note(out, "flavor %s is torchtitan's %s \"%s\" cut to %d layers: placer_model.py registers it (keep it "
                         "beside job.toml, on PYTHONPATH)", flavor, t->model, t->flavor, in->cfg->n_layers);
    }
    export_note(out, "add your dataset ([training] dataset, dataset_path) and tokenizer ([model] hf_assets_path)");
    const char *how = "Run:\n"
                      "  torchrun --nproc-per-node GPUS_PER_NODE --nnodes NODES ... -m torchtitan.train \\\n"
                      "    --job.config_file job.toml\n"
                      "(with PYTHONPATH holding this directory when placer_model.py is here).\n";
    if (export_readme(out, in, PLAN_FRAMEWORK_TORCHTITAN, how) < 0)
        return pl_fail(msg, len, PL_ERR_NOMEM, "writing the torchtitan export failed");
    return PL_OK;
}
