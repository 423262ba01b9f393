/*
 * export_megatron.c: a layout as Megatron-LM's command line (export_plan.h
 * lists the files; the flag names are framework_keys.c's Megatron table).
 * args.txt holds arguments only, one per line, each but the last ending
 * in a shell continuation, so that it pastes under `python pretrain_gpt.py \`
 * (a '#' line there would end the command: notes go to the README).
 *
 * The model. Megatron-LM's defaults build a GPT-2 block (LayerNorm, GELU,
 * learned positions, biases, tied embeddings); every way the model differs
 * is written: --normalization RMSNorm, --swiglu (or --squared-relu),
 * --position-embedding-type rope with --rotary-base, --disable-bias-linear
 * (with --add-qkv-bias for Qwen2's q/k/v biases),
 * --untie-embeddings-and-output-weights, --qk-layernorm (Qwen3),
 * --kv-channels for a head size of its own, MLA's ranks and head sizes,
 * the experts with the router (score function, expert bias, groups, top-k
 * scaling), the dense-then-MoE pattern (--moe-layer-freq), the expert grid
 * and the dispatcher. The vocabulary comes from the tokenizer the user
 * passes; --make-vocab-size-divisible-by keeps Megatron's padding to the
 * plan's (the model's vocab_multiple, or none: 1). Multi-token prediction
 * and rope scaling, which the simulator does not model, are not written
 * (a note says so when the model file has them).
 */
#include <stdarg.h>
#include <stdio.h>

#include "export_internal.h"
#include "model_params.h"

#define K(k) megatron_key_name(k)

/* One argument line: "--flag", or "--flag value"; each ends in " \" except
 * the last, which the caller writes without. */
typedef struct {
    FILE *f;
    int rc, n;
} args_out;

static void arg(args_out *a, megatron_key k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void arg(args_out *a, megatron_key k, const char *fmt, ...) {
    if (a->n++) a->rc |= fprintf(a->f, " \\\n") < 0;
    a->rc |= fprintf(a->f, "%s", K(k)) < 0;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        a->rc |= fputc(' ', a->f) == EOF;
        a->rc |= vfprintf(a->f, fmt, ap) < 0;
        va_end(ap);
    }
}

/* The stage split when the uniform arguments cannot say it:
 * --decoder-first/last-pipeline-num-layers when vp = 1 and only the ends
 * differ, else the layout string over every chunk in pipeline order (E the
 * embedding, t a decoder layer, L the loss after the last chunk's layers,
 * set off by a comma that Megatron reads as cosmetic; '|' between chunks; a run of
 * k >= 3 equal middle chunks as "(t*n|)*k"). */
static void write_split(args_out *a, const layout *l, const int *ch) {
    const int P = l->pp, C = l->pp * l->vp;
    int middle_equal = ch[0] > 0 && ch[P - 1] > 0;
    for (int s = 2; s < P - 1; s++)
        if (ch[s] != ch[1]) middle_equal = 0;
    if (l->vp == 1 && middle_equal && P >= 2) {
        arg(a, MK_FIRST_STAGE_LAYERS, "%d", ch[0]);
        arg(a, MK_LAST_STAGE_LAYERS, "%d", ch[P - 1]);
        return;
    }
    char s[LAYOUT_MAX_CHUNKS * 12 + 8];
    size_t o = 0;
    o += (size_t)snprintf(s + o, sizeof s - o, "E");
    for (int c = 0; c < C && o < sizeof s;) {
        int run = 1;
        if (c > 0 && c < C - 1)
            while (c + run < C - 1 && ch[c + run] == ch[c]) run++;
        if (run >= 3 && ch[c] > 0) {
            o += ch[c] == 1 ? (size_t)snprintf(s + o, sizeof s - o, "(t|)*%d", run)
                            : (size_t)snprintf(s + o, sizeof s - o, "(t*%d|)*%d", ch[c], run);
        } else {
            run = 1;
            if (ch[c] == 1) o += (size_t)snprintf(s + o, sizeof s - o, "t");
            else if (ch[c] > 1) o += (size_t)snprintf(s + o, sizeof s - o, "t*%d", ch[c]);
            if (o < sizeof s) o += (size_t)snprintf(s + o, sizeof s - o, "%s", c == C - 1 ? ",L" : "|");
        }
        c += run;
    }
    arg(a, MK_PIPELINE_LAYOUT, "\"%s\"", s);
}

static void write_model(args_out *a, const gpt_config *c, const model_arch *arch, plan_export_files *out) {
    const int kv = gpt_kv_heads(c), mla = gpt_is_mla(c);
    arg(a, MK_NUM_LAYERS, "%d", c->n_layers);
    arg(a, MK_HIDDEN_SIZE, "%d", c->d_model);
    arg(a, MK_FFN_HIDDEN_SIZE, "%d", gpt_d_ff(c));
    arg(a, MK_NUM_ATTENTION_HEADS, "%d", c->n_heads);
    if (!mla && kv != c->n_heads) {
        arg(a, MK_GROUP_QUERY_ATTENTION, NULL);
        arg(a, MK_NUM_QUERY_GROUPS, "%d", kv);
    }
    if (!mla && c->head_dim > 0 && c->head_dim != c->d_model / c->n_heads) arg(a, MK_KV_CHANNELS, "%d", c->head_dim);
    arg(a, MK_SEQ_LENGTH, "%d", c->seq_len);
    arg(a, MK_MAX_POSITION_EMBEDDINGS, "%d", c->seq_len);
    arg(a, MK_NORMALIZATION, "%s", K(c->norm == NORM_RMSNORM ? MK_V_RMSNORM : MK_V_LAYERNORM));
    char num[40];
    if (arch && arch->norm_eps > 0) {
        export_real(arch->norm_eps, num, sizeof num);
        arg(a, MK_NORM_EPSILON, "%s", num);
    }
    if (c->mlp == MLP_SWIGLU) arg(a, MK_SWIGLU, NULL);
    else if (c->mlp == MLP_RELU2) arg(a, MK_SQUARED_RELU, NULL);
    arg(a, MK_POSITION_EMBEDDING_TYPE, "%s", K(c->pos == POS_ROTARY ? MK_V_ROPE : MK_V_LEARNED));
    if (c->pos == POS_ROTARY) {
        if (arch && arch->rope_theta > 0) {
            export_real(arch->rope_theta, num, sizeof num);
            arg(a, MK_ROTARY_BASE, "%s", num);
        } else {
            export_note(out, "the model file gives no rope_theta: Megatron's --rotary-base default (10000) applies");
        }
    }
    if (c->no_bias) {
        arg(a, MK_DISABLE_BIAS_LINEAR, NULL);
        if (c->qkv_bias) arg(a, MK_ADD_QKV_BIAS, NULL);
    }
    if (!c->tied) arg(a, MK_UNTIE_EMBEDDINGS, NULL);
    if (arch && arch->qk_norm) arg(a, MK_QK_LAYERNORM, NULL);
    if (mla) {
        arg(a, MK_MULTI_LATENT_ATTENTION, NULL);
        if (c->q_lora_rank > 0) arg(a, MK_Q_LORA_RANK, "%d", c->q_lora_rank);
        arg(a, MK_KV_LORA_RANK, "%d", c->kv_lora_rank);
        arg(a, MK_QK_HEAD_DIM, "%d", c->qk_nope_dim);
        arg(a, MK_QK_POS_EMB_HEAD_DIM, "%d", c->qk_rope_dim);
        arg(a, MK_V_HEAD_DIM, "%d", c->v_head_dim);
    }
    if (arch && arch->mtp_layers > 0)
        export_note(out, "the model file declares %d multi-token-prediction module%s, which the plan did not simulate: "
                         "none is written (--mtp-num-layers would add it)",
                    arch->mtp_layers, arch->mtp_layers == 1 ? "" : "s");
    if (arch && arch->rope_scaling)
        export_note(out, "the model file's rope_scaling is not written (it changes no step time)");
}

static void write_moe(args_out *a, const gpt_config *c, const layout *l, const model_arch *arch) {
    if (!gpt_is_moe(c)) return;
    arg(a, MK_NUM_EXPERTS, "%d", c->n_experts);
    arg(a, MK_MOE_ROUTER_TOPK, "%d", c->top_k);
    arg(a, MK_MOE_FFN_HIDDEN_SIZE, "%d", c->moe_d_ff);
    if (c->shared_d_ff > 0) arg(a, MK_MOE_SHARED_EXPERT_SIZE, "%d", c->shared_d_ff);
    if (c->first_dense > 0 || c->moe_every > 1) { /* 1 an MoE layer, 0 a dense one */
        char s[8 * 4096];
        size_t o = 0;
        for (int i = 0; i < c->n_layers && o < sizeof s; i++)
            o += (size_t)snprintf(s + o, sizeof s - o, "%s%d", i ? "," : "", gpt_layer_is_moe(c, i));
        arg(a, MK_MOE_LAYER_FREQ, "\"[%s]\"", s);
    }
    arg(a, MK_MOE_ROUTER_SCORE_FUNCTION, "%s", K(c->router_sigmoid ? MK_V_SIGMOID : MK_V_SOFTMAX));
    if (c->router_sigmoid) arg(a, MK_MOE_ROUTER_EXPERT_BIAS, NULL);
    if (c->router_groups > 0) {
        arg(a, MK_MOE_ROUTER_NUM_GROUPS, "%d", c->router_groups);
        arg(a, MK_MOE_ROUTER_GROUP_TOPK, "%d", c->router_topk_groups);
    }
    if (arch && arch->router_scale > 0) {
        char num[40];
        export_real(arch->router_scale, num, sizeof num);
        arg(a, MK_MOE_ROUTER_TOPK_SCALING, "%s", num);
    }
    arg(a, MK_EXPERT_MODEL_PARALLEL_SIZE, "%d", l->ep > 1 ? l->ep : 1);
    arg(a, MK_EXPERT_TENSOR_PARALLEL_SIZE, "%d", l->etp > 1 ? l->etp : 1);
    const megatron_key d = l->dispatcher == MOE_DISPATCH_ALLGATHER ? MK_V_ALLGATHER
                           : l->dispatcher == MOE_DISPATCH_FLEX    ? MK_V_FLEX
                                                                   : MK_V_ALLTOALL;
    arg(a, MK_MOE_TOKEN_DISPATCHER_TYPE, "%s", K(d));
    if (l->dispatcher == MOE_DISPATCH_FLEX) arg(a, MK_MOE_FLEX_DISPATCHER_BACKEND, "%s", K(MK_V_DEEPEP));
    arg(a, MK_MOE_GROUPED_GEMM, NULL);
}

static int write_args(FILE *f, const plan_export_in *in, plan_export_files *out) {
    const gpt_config *c = in->cfg;
    const layout *l = in->l;
    const int *ch = in->chunk_layers;
    args_out a = {f, 0, 0};
    write_model(&a, c, in->arch, out);
    write_moe(&a, c, l, in->arch);
    arg(&a, MK_MAKE_VOCAB_DIVISIBLE_BY, "%d",
        c->vocab_multiple > 0 && c->vocab_multiple % l->tp == 0 ? c->vocab_multiple / l->tp : 1);
    arg(&a, MK_TENSOR_MODEL_PARALLEL_SIZE, "%d", l->tp);
    arg(&a, MK_PIPELINE_MODEL_PARALLEL_SIZE, "%d", l->pp);
    arg(&a, MK_CONTEXT_PARALLEL_SIZE, "%d", l->cp);
    if (l->sp && l->tp > 1) arg(&a, MK_SEQUENCE_PARALLEL, NULL);
    if (!export_chunks_uniform(l, ch)) write_split(&a, l, ch);
    else if (l->vp > 1) arg(&a, MK_LAYERS_PER_VIRTUAL_STAGE, "%d", ch[0]);
    if (l->recompute == RECOMPUTE_FULL) {
        arg(&a, MK_RECOMPUTE_GRANULARITY, "%s", K(MK_V_FULL));
        arg(&a, MK_RECOMPUTE_METHOD, "%s", K(MK_V_UNIFORM));
        arg(&a, MK_RECOMPUTE_NUM_LAYERS, "1");
    } else if (l->recompute == RECOMPUTE_SELECTIVE) {
        arg(&a, MK_RECOMPUTE_GRANULARITY, "%s", K(MK_V_SELECTIVE));
    }
    if (l->dp > 1 && l->zero == ZERO_1) arg(&a, MK_USE_DISTRIBUTED_OPTIMIZER, NULL);
    else if (l->dp > 1 && l->zero == ZERO_3) {
        arg(&a, MK_USE_TORCH_FSDP2, NULL);
        arg(&a, MK_NO_GRAD_ACC_FUSION, NULL);
    }
    switch (l->prec) {
    case PRECISION_BF16: arg(&a, MK_BF16, NULL); break;
    case PRECISION_FP16: arg(&a, MK_FP16, NULL); break;
    case PRECISION_FP8:
        /* --fp8-recipe takes this project's recipe names (delayed, tensorwise,
         * blockwise, mxfp8); blockwise runs E4M3 in both passes (Transformer
         * Engine's Float8BlockScaling), the others hybrid (E4M3 forward, E5M2
         * gradients) */
        arg(&a, MK_BF16, NULL);
        arg(&a, MK_FP8_FORMAT, "%s", K(l->fp8 == FP8_RECIPE_BLOCKWISE ? MK_V_E4M3 : MK_V_HYBRID));
        arg(&a, MK_FP8_RECIPE, "%s", fp8_recipe_name(l->fp8));
        break;
    default: break; /* fp32: Megatron's default */
    }
    arg(&a, MK_MICRO_BATCH_SIZE, "%d", l->micro_batch);
    arg(&a, MK_GLOBAL_BATCH_SIZE, "%d", l->global_batch);
    a.rc |= fputc('\n', f) == EOF;
    return a.rc ? -1 : 0;
}

/* env.sh: CUDA_DEVICE_MAX_CONNECTIONS, which Megatron-LM asserts is 1 with
 * tp or cp > 1 (before Blackwell: one queue keeps the tensor-parallel
 * collectives in issue order) and not 1 under --use-torch-fsdp2. */
static int write_env(FILE *f, const layout *l) {
    const int fsdp2 = l->dp > 1 && l->zero == ZERO_3, model_par = l->tp > 1 || l->cp > 1;
    int rc = fprintf(f, "# the environment of this layout: source it before launching (. ./env.sh)\n") < 0;
    if (fsdp2) rc |= fprintf(f, "unset %s  # --use-torch-fsdp2 asserts it is not 1\n", K(MK_ENV_MAX_CONNECTIONS)) < 0;
    else if (model_par)
        rc |= fprintf(f, "export %s=1  # tp or cp > 1: Megatron-LM asserts it on GPUs before Blackwell\n",
                      K(MK_ENV_MAX_CONNECTIONS)) < 0;
    else rc |= fprintf(f, "# (nothing this layout needs)\n") < 0;
    return rc ? -1 : 0;
}

pl_status export_megatron_build(const plan_export_in *in, plan_export_files *out, char *msg, size_t len) {
    export_stream s;
    if (export_stream_open(&s) < 0) return pl_fail(msg, len, PL_ERR_NOMEM, "no memory for the export");
    if (export_stream_keep(out, "args.txt", &s, write_args(s.f, in, out)) < 0)
        return pl_fail(msg, len, PL_ERR_NOMEM, "writing the megatron export failed");
    if (export_stream_open(&s) < 0 || export_stream_keep(out, "env.sh", &s, write_env(s.f, in->l)) < 0)
        return pl_fail(msg, len, PL_ERR_NOMEM, "writing the megatron export failed");
    export_note(out, "the vocabulary comes from your tokenizer: the plan has %d tokens (Megatron pads to a multiple "
                     "of %s x tp)", in->cfg->vocab, K(MK_MAKE_VOCAB_DIVISIBLE_BY));
    const char *how = "Run (add your data and tokenizer arguments):\n"
                      "  . ./env.sh\n"
                      "  torchrun --nproc-per-node GPUS_PER_NODE --nnodes NODES ... pretrain_gpt.py \\\n"
                      "    $(sed 's/ \\\\$//' args.txt) \\\n"
                      "    --data-path ... --tokenizer-type ... --tokenizer-model ...\n"
                      "or paste args.txt under `python pretrain_gpt.py \\`: it holds arguments only.\n";
    if (export_readme(out, in, PLAN_FRAMEWORK_MEGATRON, how) < 0)
        return pl_fail(msg, len, PL_ERR_NOMEM, "writing the megatron export failed");
    return PL_OK;
}
