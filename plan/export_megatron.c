/*
 * export_megatron.c: a layout as Megatron-LM command-line arguments (the
 * names and their meaning in export_plan.h; checked against
 * megatron/training/arguments.py). One argument per line, each line but
 * the last ending in a shell continuation, so the block pastes into a
 * launch script; notes are '#' lines before it.
 */
#include <stdio.h>

#include "export_internal.h"
#include "model_params.h"

/* The stage split when it cannot be said with the uniform arguments. */
static int write_split(FILE *f, const layout *l, const int *ch, const char *nl) {
    const int P = l->pp, C = l->pp * l->vp;
    int middle_equal = 1;
    for (int s = 2; s < P - 1; s++)
        if (ch[s] != ch[1]) middle_equal = 0;
    if (l->vp == 1 && middle_equal) {
        /* only the first and last stages differ: the older, simpler flags */
        if (P >= 2)
            return fprintf(f, "--decoder-first-pipeline-num-layers %d%s--decoder-last-pipeline-num-layers %d%s",
                           ch[0], nl, ch[P - 1], nl);
        return 0;
    }
    /* every chunk in pipeline order: E embedding, t decoder layers, L loss;
     * a run of k >= 3 equal middle chunks as Megatron's repetition
     * "(t*n|)*k" */
    if (fprintf(f, "--pipeline-model-parallel-layout \"E") < 0) return -1;
    for (int c = 0; c < C;) {
        int run = 1;
        if (c > 0 && c < C - 1)
            while (c + run < C - 1 && ch[c + run] == ch[c]) run++;
        if (run >= 3) {
            if ((ch[c] == 1 ? fprintf(f, "(t|)*%d", run) : fprintf(f, "(t*%d|)*%d", ch[c], run)) < 0) return -1;
        } else {
            run = 1;
            if (ch[c] == 1 ? fprintf(f, "t") < 0 : fprintf(f, "t*%d", ch[c]) < 0) return -1;
            if (fprintf(f, "%s", c == C - 1 ? ",L" : "|") < 0) return -1;
        }
        c += run;
    }
    return fprintf(f, "\"%s", nl);
}

/* Mixture of experts and the attention shapes beyond the dense block
 * (nothing for a dense model): experts, top-k, expert width, shared
 * experts, the dense-then-MoE layer pattern, the expert grid, the
 * dispatcher and grouped GEMMs; MLA's ranks and head sizes; a head_dim of
 * its own (--kv-channels). Names as megatron/training/arguments.py. */
static int write_moe(FILE *f, const gpt_config *cfg, const layout *l, const char *nl) {
    int rc = 0;
    if (gpt_is_mla(cfg)) {
        rc |= fprintf(f, "--multi-latent-attention%s--kv-lora-rank %d%s--qk-head-dim %d%s--qk-pos-emb-head-dim %d%s"
                         "--v-head-dim %d%s", nl, cfg->kv_lora_rank, nl, cfg->qk_nope_dim, nl, cfg->qk_rope_dim, nl,
                      cfg->v_head_dim, nl) < 0;
        if (cfg->q_lora_rank > 0) rc |= fprintf(f, "--q-lora-rank %d%s", cfg->q_lora_rank, nl) < 0;
    } else if (cfg->head_dim > 0) {
        rc |= fprintf(f, "--kv-channels %d%s", cfg->head_dim, nl) < 0;
    }
    if (!gpt_is_moe(cfg)) return rc ? -1 : 0;
    rc |= fprintf(f, "--num-experts %d%s--moe-router-topk %d%s--moe-ffn-hidden-size %d%s", cfg->n_experts, nl,
                  cfg->top_k, nl, cfg->moe_d_ff, nl) < 0;
    if (cfg->shared_d_ff > 0) rc |= fprintf(f, "--moe-shared-expert-intermediate-size %d%s", cfg->shared_d_ff, nl) < 0;
    if (cfg->first_dense > 0 || cfg->moe_every > 1) { /* the pattern: 1 an MoE layer, 0 a dense one */
        rc |= fprintf(f, "--moe-layer-freq \"[") < 0;
        for (int i = 0; i < cfg->n_layers; i++) rc |= fprintf(f, "%s%d", i ? "," : "", gpt_layer_is_moe(cfg, i)) < 0;
        rc |= fprintf(f, "]\"%s", nl) < 0;
    }
    if (cfg->router_sigmoid) rc |= fprintf(f, "--moe-router-score-function sigmoid%s", nl) < 0;
    rc |= fprintf(f, "--expert-model-parallel-size %d%s--expert-tensor-parallel-size %d%s", l->ep > 1 ? l->ep : 1,
                  nl, l->etp > 1 ? l->etp : 1, nl) < 0;
    rc |= fprintf(f, "--moe-token-dispatcher-type %s%s--moe-grouped-gemm%s", moe_dispatcher_name(l->dispatcher), nl,
                  nl) < 0;
    return rc ? -1 : 0;
}

int plan_export_megatron(FILE *f, const gpt_config *cfg, const layout *l, const int *ch) {
    const char *nl = " \\\n";
    const int kv = cfg->n_kv_heads > 0 ? cfg->n_kv_heads : cfg->n_heads;
    const int dff = cfg->d_ff > 0 ? cfg->d_ff : 4 * cfg->d_model;
    int rc = 0;
    if (l->pp > 1 && (l->zero == ZERO_3 || l->zero == ZERO_FSDP) && l->dp > 1)
        rc |= fprintf(f, "# Megatron-LM's --use-torch-fsdp2 does not support pipeline parallelism yet; "
                         "this layout needs pp=1 there, or zero=1 (--use-distributed-optimizer)\n") < 0;
    if (l->zero == ZERO_2 && l->dp > 1)
        rc |= fprintf(f, "# zero=2: Megatron-LM's distributed optimizer shards the optimizer state and "
                         "reduce-scatters the gradients (ZeRO-1 memory, ZeRO-2 traffic)\n") < 0;
    if (l->sched != SCHED_1F1B && l->pp > 1) /* the split orders: none in Megatron-LM itself */
        rc |= fprintf(f,
                      "# sched=%s: Megatron-LM has no zero-bubble or DualPipe schedule option; written as %s. "
                      "The zero-bubble authors' fork (sail-sg/zero-bubble-pipeline-parallelism) runs %s\n",
                      schedule_order_name(l->sched),
                      schedule_v_chunks(l->sched) == 2 ? "interleaved 1F1B with 2 chunks a stage (not a V)" : "1F1B",
                      l->sched == SCHED_ZB_V      ? "ZB-V with --zero-bubble-v-schedule"
                      : l->sched == SCHED_DUALPIPEV ? "no DualPipeV (DeepSeek's DualPipe repository does)"
                                                    : "ZB-H1/H2 with --enable-zero-bubble") < 0;
    rc |= fprintf(f, "--num-layers %d%s--hidden-size %d%s--ffn-hidden-size %d%s--num-attention-heads %d%s",
                  cfg->n_layers, nl, cfg->d_model, nl, dff, nl, cfg->n_heads, nl) < 0;
    if (kv != cfg->n_heads) rc |= fprintf(f, "--group-query-attention%s--num-query-groups %d%s", nl, kv, nl) < 0;
    rc |= fprintf(f, "--seq-length %d%s--max-position-embeddings %d%s", cfg->seq_len, nl, cfg->seq_len, nl) < 0;
    rc |= fprintf(f, "--tensor-model-parallel-size %d%s--pipeline-model-parallel-size %d%s--context-parallel-size %d%s",
                  l->tp, nl, l->pp, nl, l->cp, nl) < 0;
    if (l->sp && l->tp > 1) rc |= fprintf(f, "--sequence-parallel%s", nl) < 0;
    rc |= write_moe(f, cfg, l, nl) < 0;
    if (!export_chunks_uniform(l, ch)) rc |= write_split(f, l, ch, nl) < 0;
    else if (l->vp > 1) rc |= fprintf(f, "--num-layers-per-virtual-pipeline-stage %d%s", ch[0], nl) < 0;
    if (l->recompute == RECOMPUTE_FULL)
        rc |= fprintf(f, "--recompute-granularity full%s--recompute-method uniform%s--recompute-num-layers 1%s", nl,
                      nl, nl) < 0;
    else if (l->recompute == RECOMPUTE_SELECTIVE)
        rc |= fprintf(f, "--recompute-granularity selective%s", nl) < 0;
    if (l->dp > 1 && (l->zero == ZERO_1 || l->zero == ZERO_2))
        rc |= fprintf(f, "--use-distributed-optimizer%s", nl) < 0;
    else if (l->dp > 1 && (l->zero == ZERO_3 || l->zero == ZERO_FSDP))
        rc |= fprintf(f, "--use-torch-fsdp2%s", nl) < 0;
    switch (l->prec) {
    case PRECISION_BF16: rc |= fprintf(f, "--bf16%s", nl) < 0; break;
    case PRECISION_FP16: rc |= fprintf(f, "--fp16%s", nl) < 0; break;
    case PRECISION_FP8:
        /* --fp8-recipe takes exactly this project's recipe names (arguments.py:
         * tensorwise, delayed, mxfp8, blockwise); blockwise runs E4M3 in both
         * passes (Transformer Engine's Float8BlockScaling), the others hybrid
         * (E4M3 forward, E5M2 gradients) */
        rc |= fprintf(f, "--bf16%s--fp8-format %s%s--fp8-recipe %s%s", nl,
                      l->fp8 == FP8_RECIPE_BLOCKWISE ? "e4m3" : "hybrid", nl, fp8_recipe_name(l->fp8), nl) < 0;
        break;
    default: break; /* fp32 / tf32: Megatron's default */
    }
    rc |= fprintf(f, "--micro-batch-size %d%s--global-batch-size %d\n", l->micro_batch, nl, l->global_batch) < 0;
    return rc ? -1 : 0;
}
