/*
 * plan_framework.c: the framework names, their pinned versions, torchtitan
 * 0.2.2's model flavors, and what each framework runs (plan_framework.h
 * lists the rules; each rule here is one `return no(...)` with the line an
 * export prints when it refuses).
 */
#include "plan_framework.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "model_params.h"
#include "schedule.h"

const char *plan_framework_name(plan_framework f) {
    static const char *names[PLAN_FRAMEWORK_COUNT] = {"any", "megatron", "torchtitan", "deepspeed"};
    return f >= 0 && f < PLAN_FRAMEWORK_COUNT ? names[f] : "unknown";
}

int plan_framework_parse(const char *name, plan_framework *out) {
    for (int i = 0; name && i < PLAN_FRAMEWORK_COUNT; i++)
        if (!strcmp(name, plan_framework_name((plan_framework)i))) {
            *out = (plan_framework)i;
            return 1;
        }
    return 0;
}

const char *plan_framework_version(plan_framework f) {
    switch (f) {
    case PLAN_FRAMEWORK_MEGATRON: return "Megatron-LM d98e8a6 (megatron-core 0.16.1)";
    case PLAN_FRAMEWORK_TORCHTITAN: return "torchtitan 0.2.2";
    case PLAN_FRAMEWORK_DEEPSPEED: return "DeepSpeed 0.19.8";
    default: return "";
    }
}

/* torchtitan 0.2.2's flavors (torchtitan/models/{llama3,qwen3,deepseek_v3}/
 * __init__.py), the debug models left out. llama3's FFN width is its
 * multiple_of rounding of ffn_dim_multiplier * 8 d / 3; deepseek_v3's
 * shared width is n_shared_experts * moe_inter_dim. The parsers' check
 * (tests/plan/test_framework_parsers.py) builds each flavor on the meta
 * device and compares these numbers with the module's shapes. */
static const plan_tt_flavor TT_FLAVORS[] = {
    /* model, flavor, pipelines, layers, d, heads, kv, head_dim, d_ff, vocab,
       experts, top_k, moe_d_ff, shared, first_dense, sigmoid, q_lora, kv_lora, nope, rope, v */
    {"llama3", "8B", 1, 32, 4096, 32, 8, 0, 14336, 128256, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"llama3", "70B", 1, 80, 8192, 64, 8, 0, 28672, 128256, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"llama3", "405B", 1, 126, 16384, 128, 8, 0, 53248, 128256, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3", "8B", 0, 36, 4096, 32, 8, 128, 12288, 151936, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3", "14B", 0, 40, 5120, 40, 8, 128, 17408, 151936, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3", "32B", 0, 64, 5120, 64, 8, 128, 25600, 151936, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3", "30B-A3B", 0, 48, 2048, 32, 4, 128, 6144, 151936, 128, 8, 768, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3", "235B-A22B", 0, 94, 4096, 64, 4, 128, 12288, 151936, 128, 8, 1536, 0, 0, 0, 0, 0, 0, 0, 0},
    {"deepseek_v3", "16B", 1, 27, 2048, 16, 16, 0, 10944, 102400, 64, 6, 1408, 2816, 1, 0, 0, 512, 128, 64, 128},
    {"deepseek_v3", "236B", 1, 60, 5120, 128, 128, 0, 12288, 102400, 160, 6, 1536, 3072, 1, 0, 1536, 512, 128, 64,
     128},
    {"deepseek_v3", "671B", 1, 61, 7168, 128, 128, 0, 18432, 129280, 256, 8, 2048, 2048, 3, 1, 1536, 512, 128, 64,
     128},
};
#define N_TT_FLAVORS ((int)(sizeof TT_FLAVORS / sizeof TT_FLAVORS[0]))

const plan_tt_flavor *plan_tt_flavor_at(int i) { return i >= 0 && i < N_TT_FLAVORS ? &TT_FLAVORS[i] : NULL; }

const plan_tt_flavor *plan_torchtitan_flavor(const gpt_config *c) {
    const int hd = c->head_dim > 0 && c->head_dim != c->d_model / c->n_heads ? c->head_dim : 0;
    for (int i = 0; i < N_TT_FLAVORS; i++) {
        const plan_tt_flavor *t = &TT_FLAVORS[i];
        const int moe = t->experts > 0, mla = t->kv_lora > 0;
        if (c->d_model != t->d_model || c->n_heads != t->heads || gpt_kv_heads(c) != t->kv_heads ||
            gpt_d_ff(c) != t->d_ff || c->vocab != t->vocab || hd != t->head_dim || gpt_is_moe(c) != moe ||
            gpt_is_mla(c) != mla || c->tied || c->norm != NORM_RMSNORM || c->mlp != MLP_SWIGLU ||
            c->pos != POS_ROTARY || !c->no_bias || c->qkv_bias || c->parallel_residual || c->sliding_window > 0)
            continue;
        if (moe && (c->n_experts != t->experts || c->top_k != t->top_k || c->moe_d_ff != t->moe_d_ff ||
                    c->shared_d_ff != t->shared_d_ff || c->first_dense != t->first_dense ||
                    (c->moe_every > 1) || c->router_sigmoid != t->router_sigmoid || c->moe_bias))
            continue;
        if (moe && c->n_layers <= t->first_dense) continue;
        if (mla && (c->q_lora_rank != t->q_lora || c->kv_lora_rank != t->kv_lora || c->qk_nope_dim != t->qk_nope ||
                    c->qk_rope_dim != t->qk_rope || c->v_head_dim != t->v_head))
            continue;
        return t;
    }
    return NULL;
}

/* why <- the formatted reason; returns 0 (the rule's verdict). */
static int no(char *why, size_t len, const char *fmt, ...) {
    if (why && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return 0;
}

/* The family as people call it, for a refusal: the config's model_type
 * when known, else what the shapes say. */
static const char *family_text(const gpt_config *c, const model_arch *a) {
    if (a && a->family[0]) return a->family;
    return gpt_is_mla(c) ? "MLA" : gpt_is_moe(c) ? "mixture-of-experts" : "dense";
}

int plan_framework_model_runs(plan_framework f, const gpt_config *c, const model_arch *a, char *why, size_t len) {
    const char *v = plan_framework_version(f);
    switch (f) {
    case PLAN_FRAMEWORK_MEGATRON:
        if (c->parallel_residual) return no(why, len, "%s: no flag builds a parallel residual (GPT-NeoX's)", v);
        if (c->sliding_window > 0) return no(why, len, "%s: the export writes no sliding-window attention", v);
        if (c->moe_bias) return no(why, len, "%s: no flag builds biased experts (gpt-oss)", v);
        return 1;
    case PLAN_FRAMEWORK_TORCHTITAN: {
        if (plan_torchtitan_flavor(c)) {
            if (a && a->family[0] && strncmp(a->family, "llama", 5) && strncmp(a->family, "qwen3", 5) &&
                strncmp(a->family, "deepseek_v3", 11))
                return no(why, len, "%s has no %s model (the shapes are those of a torchtitan flavor, the family "
                                    "is not)", v, a->family);
            return 1;
        }
        return no(why, len, "%s has no model of this shape (%s, %d layers, d_model %d): its models are llama3 (8B, "
                            "70B, 405B), qwen3 (8B .. 235B-A22B) and deepseek_v3 (16B, 236B, 671B), any of them cut "
                            "to fewer layers",
                  v, family_text(c, a), c->n_layers, c->d_model);
    }
    case PLAN_FRAMEWORK_DEEPSPEED:
        if (gpt_is_moe(c) && (c->router_sigmoid || c->router_groups > 0 || c->shared_d_ff > 0))
            return no(why, len, "%s: deepspeed.moe's gate has no %s", v,
                      c->router_sigmoid ? "sigmoid router with expert bias"
                      : c->router_groups > 0 ? "group-limited routing"
                                             : "shared experts");
        return 1;
    default: return 1;
    }
}

static int megatron_runs(const gpt_config *c, const layout *l, char *why, size_t len) {
    const char *v = plan_framework_version(PLAN_FRAMEWORK_MEGATRON);
    const int dp = l->dp > 1;
    if (l->pp > 1 && l->sched != SCHED_1F1B)
        return no(why, len, "%s runs 1F1B and interleaved 1F1B only, not sched=%s", v, schedule_order_name(l->sched));
    if (dp && l->zero == ZERO_2)
        return no(why, len, "%s has no ZeRO-2: its distributed optimizer keeps whole gradient buffers (zero=1)", v);
    if (dp && l->zero == ZERO_FSDP)
        return no(why, len, "%s: --use-torch-fsdp2 reshards after forward (zero=3), it does not keep the gathered "
                            "weights (zero=fsdp)", v);
    if (dp && l->zero == ZERO_3) {
        if (l->pp > 1) return no(why, len, "%s: --use-torch-fsdp2 (zero=3) does not run with pipeline parallelism", v);
        if (l->ep > 1) return no(why, len, "%s: --use-torch-fsdp2 (zero=3) does not run with expert parallelism", v);
        if (l->prec == PRECISION_FP16) return no(why, len, "%s: --use-torch-fsdp2 (zero=3) does not run fp16", v);
        if (c && c->tied)
            return no(why, len, "%s: --use-torch-fsdp2 (zero=3) needs untied embeddings; this model ties them", v);
    }
    if (l->prec == PRECISION_TF32) return no(why, len, "%s has no TF32 flag (fp32, bf16, fp16 or fp8)", v);
    return 1;
}

static int torchtitan_runs(const gpt_config *c, const layout *l, char *why, size_t len) {
    const char *v = plan_framework_version(PLAN_FRAMEWORK_TORCHTITAN);
    const plan_tt_flavor *t = c ? plan_torchtitan_flavor(c) : NULL;
    if (c && !t) return plan_framework_model_runs(PLAN_FRAMEWORK_TORCHTITAN, c, NULL, why, len);
    if (l->pp > 1 && (l->sched == SCHED_ZB_H1 || l->sched == SCHED_ZB_H2))
        return no(why, len, "%s has no %s schedule (its zero-bubble orders are ZBVZeroBubble and DualPipeV, "
                            "sched=zb-v and dualpipev)", v, schedule_order_name(l->sched));
    if (l->pp > 1 && l->sched == SCHED_DUALPIPE)
        return no(why, len, "%s has no DualPipe (two directions); its DualPipeV is sched=dualpipev", v);
    if (l->pp > 1 && l->sched == SCHED_DUALPIPEV && (l->tp > 1 || l->cp > 1))
        return no(why, len, "%s's DualPipeV overlaps a pair's expert-parallel traffic only; the plan hides its tp "
                            "and cp collectives under the paired compute (tp=1, cp=1)", v);
    if (l->pp > 1 && t && !t->pipelines)
        return no(why, len, "%s: its %s model has no pipelining function (pp=1 only)", v, t->model);
    if (l->dp > 1 && (l->zero == ZERO_1 || l->zero == ZERO_2))
        return no(why, len, "%s has no ZeRO-%d: FSDP2 (zero=3 or fsdp) or DDP (zero=0)", v, (int)l->zero);
    if (l->dp > 1 && l->zero == ZERO_NONE && (l->tp > 1 || l->cp > 1 || l->pp > 1 || l->ep > 1))
        return no(why, len, "%s: DDP (zero=0) runs with data parallelism alone (\"DDP has not supported > 1D "
                            "parallelism\"); use zero=3 or fsdp", v);
    if (l->cp > 1 && l->zero != ZERO_3)
        return no(why, len, "%s shards the weights over dp x cp whenever cp > 1 (FSDP over its cp mesh): zero=3, "
                            "not zero=%s", v, zero_kind_name(l->zero));
    if (l->ep > 1 && l->zero != ZERO_3 && l->zero != ZERO_FSDP)
        return no(why, len, "%s cuts the expert-parallel mesh from the FSDP dimension: ep > 1 needs zero=3 or fsdp", v);
    if (l->tp > 1 && !l->sp)
        return no(why, len, "%s: its tensor parallelism always splits the sequence (sp=1)", v);
    if (l->etp > 1 && l->etp != l->tp)
        return no(why, len, "%s: expert_tensor_parallel_degree is 1 or the tensor-parallel degree", v);
    if (c && gpt_is_moe(c) && l->ep > 1 && l->dispatcher == MOE_DISPATCH_ALLGATHER)
        return no(why, len, "%s has no all-gather token dispatcher (standard all-to-all, or DeepEP: flex)", v);
    if (l->recompute == RECOMPUTE_SELECTIVE)
        return no(why, len, "%s's selective activation checkpointing keeps other tensors than the attention core "
                            "that recompute=selective drops (none or full)", v);
    if (l->prec == PRECISION_FP16 || l->prec == PRECISION_TF32)
        return no(why, len, "%s has no %s training (bfloat16 or float32, fp8)", v, precision_name(l->prec));
    if (l->prec == PRECISION_FP8) {
        if (l->fp8 == FP8_RECIPE_DELAYED || l->fp8 == FP8_RECIPE_BLOCKWISE)
            return no(why, len, "%s has no %s FP8 scaling (tensorwise or mxfp8)", v, fp8_recipe_name(l->fp8));
        if (c && gpt_is_moe(c))
            return no(why, len, "%s: its FP8 converters leave the experts' grouped GEMMs in bf16", v);
    }
    if (c && c->seq_len % (l->tp * 2 * l->cp) != 0 && (l->tp > 1 || l->cp > 1))
        return no(why, len, "%s needs the sequence (%d) divisible by tp x 2 cp = %d", v, c->seq_len, l->tp * 2 * l->cp);
    return 1;
}

static int deepspeed_runs(const gpt_config *c, const layout *l, char *why, size_t len) {
    const char *v = plan_framework_version(PLAN_FRAMEWORK_DEEPSPEED);
    if (c && !plan_framework_model_runs(PLAN_FRAMEWORK_DEEPSPEED, c, NULL, why, len)) return 0;
    if (l->tp > 1)
        return no(why, len, "%s has no tensor parallelism of its own for this model (tp=1; Megatron-DeepSpeed adds "
                            "it)", v);
    if (l->cp > 1) return no(why, len, "%s has no context parallelism (cp=1; Ulysses splits the heads)", v);
    if (l->vp > 1 || (l->pp > 1 && l->sched != SCHED_1F1B))
        return no(why, len, "%s's pipeline engine runs one 1F1B schedule (vp=1, no %s)", v,
                  l->vp > 1 && l->sched == SCHED_1F1B ? "interleaving" : schedule_order_name(l->sched));
    if (l->dp > 1 && l->pp > 1 && (l->zero == ZERO_2 || l->zero == ZERO_3 || l->zero == ZERO_FSDP))
        return no(why, len, "%s's pipeline engine asserts ZeRO stage 0 or 1 (zero=%s)", v, zero_kind_name(l->zero));
    if (l->dp > 1 && l->zero == ZERO_FSDP)
        return no(why, len, "%s's ZeRO-3 releases the gathered weights after use (zero=3), not after the backward "
                            "(zero=fsdp)", v);
    if (l->etp > 1) return no(why, len, "%s's MoE has no expert tensor parallelism (etp=1)", v);
    if (c && gpt_is_moe(c) && l->ep > 1 && l->dispatcher != MOE_DISPATCH_ALLTOALL)
        return no(why, len, "%s's MoE dispatches by all-to-all only", v);
    if (l->recompute == RECOMPUTE_SELECTIVE)
        return no(why, len, "%s checkpoints whole layers (activation_checkpoint_interval): recompute none or full", v);
    if (l->recompute == RECOMPUTE_FULL && l->pp == 1)
        return no(why, len, "%s's config checkpoints layers only through its pipeline module (pp > 1); without one, "
                            "recompute=none", v);
    if (l->prec == PRECISION_FP8 || l->prec == PRECISION_TF32)
        return no(why, len, "%s's config has no %s training (bf16, fp16 or fp32)", v, precision_name(l->prec));
    return 1;
}

int plan_framework_layout_runs(plan_framework f, const gpt_config *c, const layout *l, char *why, size_t len) {
    switch (f) {
    case PLAN_FRAMEWORK_MEGATRON:
        if (c && !plan_framework_model_runs(f, c, NULL, why, len)) return 0;
        return megatron_runs(c, l, why, len);
    case PLAN_FRAMEWORK_TORCHTITAN: return torchtitan_runs(c, l, why, len);
    case PLAN_FRAMEWORK_DEEPSPEED: return deepspeed_runs(c, l, why, len);
    default: return 1;
    }
}

int plan_framework_runs(plan_framework f, const gpt_config *c, const layout *l) {
    return f == PLAN_FRAMEWORK_ANY || plan_framework_layout_runs(f, c, l, NULL, 0);
}

int plan_framework_accepts(plan_framework f, const layout *l) { return plan_framework_runs(f, NULL, l); }

int plan_framework_ask_runs(plan_framework f, const gpt_config *c, const plan_framework_ask *a, char *why,
                            size_t len) {
    if (f == PLAN_FRAMEWORK_ANY) return 1;
    char first[320] = "";
    const int n_prec = a->n_prec > 0 ? a->n_prec : 1;
    /* the orders the search tries: 1F1B (interleaved with vp > 1) and the mask's */
    schedule_order orders[SCHED_ORDER_COUNT];
    int n_ord = 0;
    orders[n_ord++] = SCHED_1F1B;
    for (int o = SCHED_ZB_H1; o < SCHED_ORDER_COUNT; o++)
        if (a->sched_mask & (1u << o)) orders[n_ord++] = (schedule_order)o;
    /* unfixed sizes take 1 and 2 (the first that a rule refuses is the reason);
     * a fixed sharding asks for data parallelism, so dp 2 then */
    const int shards = a->zero > 0;
    const int pps[2] = {a->pp > 0 ? a->pp : 1, 2}, dps[2] = {a->dp > 0 ? a->dp : shards ? 2 : 1, 2};
    const int n_pp = a->pp > 0 ? 1 : 2, n_dp = a->dp > 0 || shards ? 1 : 2;
    for (int p = 0; p < n_prec; p++)
        for (int z = a->zero >= 0 ? a->zero : 0; z <= (a->zero >= 0 ? a->zero : ZERO_FSDP); z++)
            for (int r = a->recompute >= 0 ? a->recompute : 0; r <= (a->recompute >= 0 ? a->recompute : RECOMPUTE_FULL);
                 r++)
                for (int o = 0; o < n_ord; o++)
                    for (int ip = 0; ip < n_pp; ip++)
                        for (int id = 0; id < n_dp; id++) {
                            layout l;
                            layout_default(&l);
                            l.tp = a->tp > 0 ? a->tp : 1;
                            l.sp = l.tp > 1;
                            l.cp = a->cp > 0 ? a->cp : 1;
                            l.vp = a->vp > 0 ? a->vp : schedule_v_chunks(orders[o]);
                            l.pp = pps[ip];
                            if (l.pp == 1 && (l.vp > 1 || orders[o] != SCHED_1F1B)) continue;
                            l.dp = dps[id];
                            l.zero = (zero_kind)z;
                            l.recompute = (recompute_kind)r;
                            l.prec = a->n_prec > 0 ? a->prec[p] : PRECISION_BF16;
                            l.fp8 = a->n_prec > 0 ? a->fp8[p] : FP8_RECIPE_DELAYED;
                            l.sched = orders[o];
                            char w[320];
                            if (plan_framework_layout_runs(f, c, &l, w, sizeof w)) return 1;
                            if (!first[0]) snprintf(first, sizeof first, "%s", w);
                        }
    return no(why, len, "%s", first);
}
