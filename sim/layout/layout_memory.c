/*
 * layout_memory.c: memory per GPU of a layout as a sum of named parts
 * (layout_memory.h), each a closed form.
 *
 * Activations of one transformer layer, one micro-batch (Korthikanti et
 * al. 2022, "Reducing Activation Recomputation in Large Transformer
 * Models", section 4), derived term by term so that GQA, SwiGLU, fused
 * attention, precision and the absence of dropout follow. With s' = seq /
 * cp tokens per sequence, b the micro-batch, h hidden, a heads, g KV heads,
 * f the MLP width, t = tp, e bytes per activation element (2 for bf16 /
 * fp16 / fp8 runs, 4 for fp32), R = 1 without sequence parallelism and 1/t
 * with it (the parts tp does not split):
 *   norm inputs (two norms)            2 e s'bh        x R
 *   QKV input (norm 1 output)            e s'bh        x R
 *   Q, K, V                              e s'bh (1 + 2g/a) / t
 *   attention core, unfused:   softmax output e a s's b / t, and with dropout
 *                              its mask a s's b / t and output e a s's b / t
 *                  fused (flash): the softmax statistics, 4 a s'b / t (fp32)
 *   attention output projection input    e s'bh / t
 *   attention dropout mask (dropout)       s'bh        x R
 *   MLP input (norm 2 output)            e s'bh        x R
 *   GELU MLP: its input and output     2 e s'bf / t; SwiGLU: gate, up and
 *                              their product 3 e s'bf / t
 *   MLP dropout mask (dropout)             s'bh        x R
 * With e = 2, g = a, f = 4h, dropout, unfused attention and cp = 1 this is
 * Korthikanti's s b h (10 + 24 / t + 5 a s / (h t)) without sp and
 * s b h / t (34 + 5 a s / h) with it (the tests hold it to both).
 *   selective recompute drops the attention core's part (it is recomputed)
 *   full recompute keeps only the layer input: e s'bh x R (Korthikanti's
 *   2 s b h, / t with sp)
 *
 * The parts of a stage:
 *   params / grads / optimizer  per GPU: the stage's layers at 1/tp
 *       (layer_params_per_gpu) plus its embedding or head share; bytes per
 *       parameter: mixed precision (bf16, fp16, fp8) 2 weight + 2 gradient
 *       + 12 optimizer (fp32 master weight and two fp32 Adam moments) = 16
 *       (mem=fp32_grads: 4 gradient bytes; mem=bf16_moments: 8 optimizer);
 *       fp32 / tf32 4 + 4 + 8. Sharded (ceil) over the ranks that hold the
 *       same weights, dp x cp (zero_shard_ranks): zero 1 the optimizer,
 *       zero 2 also the gradients, zero 3 also the weights. Context-parallel
 *       ranks hold identical weights, and Megatron-core's distributed
 *       optimizer and its FSDP shard over the data-parallel group *with*
 *       context parallelism (parallel_state's
 *       get_data_parallel_group(with_context_parallel=True), the
 *       intra-dp-cp group the DDP buffers are built on); fsdp (Llama 3's
 *       variant) shards gradients and optimizer, and the weights it gathers
 *       in forward stay until backward, so at the peak the weights count
 *       whole; it keeps the shard over dp alone (the Llama 3 paper does not
 *       say that its CP ranks join the FSDP group)
 *   activations  act_per_layer x layers / vp x in_flight chunk micro-batches,
 *       plus the working set of recomputation: under full recompute one
 *       layer rebuilt whole for its backward (its activations without
 *       recompute), under selective one layer's attention core; and the
 *       backward's largest transient: the op that differentiates the
 *       layer's biggest intermediate (the unfused attention scores,
 *       e a s's b / t, or the MLP hidden, e s'b f / t, x 2 for SwiGLU's two)
 *       holds the gradient it receives and the one it produces at once, two
 *       of that size
 *   embedding_head  stage 0: the embedding dropout mask s'bh (x R) per
 *       micro-batch in flight; last stage: one micro-batch's logits, e
 *       bytes plus the fp32 softmax the vocabulary-parallel cross entropy
 *       keeps, s'b V / t (4 + e)
 *   buffers  data parallelism (dp > 1, zero 0-2): two 25 MiB gradient
 *       buckets in flight (torch DDP's default bucket_cap_mb); zero 3
 *       (DeepSpeed-style, gathered per module): the largest weight matrix
 *       of a layer gathered twice (current + prefetch) and its unsharded
 *       gradient before the reduce-scatter; fsdp (gathered per layer): one
 *       layer's unsharded gradients before the reduce-scatter; tp > 1 with
 *       sp: the all-gathered layer input and the reduce-scatter's input,
 *       2 e s'bh. Allocator fragmentation, the CUDA context and library
 *       workspaces are not counted.
 *
 * FP8 (precision fp8; a block of its own, fp8.h for what and why):
 *   fp8_weights  the FP8 copies (row-wise + transposed, with the recipe's
 *       scales: fp8_weight_copy_bytes a parameter) of the four linear
 *       layers' weights, (h (a + 2g) d + a d h + (1|2) h f + f h) / t per
 *       layer, for every layer of the stage (zero 3: the one layer gathered);
 *       added to total
 *   fp8_act_per_layer  of act_per_layer, the linear layers' saved inputs
 *       held in FP8 (q = fp8_saved_input_bytes: 1 + scales) instead of e:
 *       q s'bh (QKV input) + q s'bh (MLP input), x R, plus q s'bh / t (the
 *       attention projection's input) + q s'b f / t (MLP out's input: the
 *       GELU output or SwiGLU's product); 0 under full recompute (only
 *       the bf16 layer input is kept)
 */
#include "layout_memory.h"
#include "model_params.h"

#include <math.h>

#include "fp8.h"

#define DDP_BUCKET_BYTES (25.0 * 1024 * 1024)

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static double act_elem_bytes(precision p) { return p == PRECISION_FP8 ? 2.0 : (double)precision_act_bytes(p); }

static int mixed(precision p) { return p == PRECISION_BF16 || p == PRECISION_FP16 || p == PRECISION_FP8; }

/* Optimizer bytes a parameter: mixed precision's fp32 master copy and two
 * fp32 moments (12), fp32 training's moments (8); mem=bf16_moments keeps
 * the moments in bf16 (DeepSeek-V3 report, section 3.3.3: 4 + 2 + 2). */
static double optimizer_bytes(const layout *l) {
    const int mx = mixed(l->prec), bf = (l->mem & LAYOUT_MEM_BF16_MOMENTS) != 0;
    return mx ? (bf ? 8 : 12) : (bf ? 4 : 8);
}

/* Gradient bytes a parameter: mixed precision's bf16 / fp16 gradient (2),
 * fp32 training's (4); mem=fp32_grads keeps mixed precision's gradients in
 * fp32 (DeepSeek-V3 report, section 3.3.3: "the master weights (stored by
 * the optimizer) and gradients (used for batch size accumulation) are still
 * retained in FP32"). */
static double gradient_bytes(const layout *l) {
    return mixed(l->prec) && !(l->mem & LAYOUT_MEM_FP32_GRADS) ? 2 : 4;
}

static int64_t kv_heads(const gpt_config *c) { return c->n_kv_heads > 0 ? c->n_kv_heads : c->n_heads; }
static int64_t mlp_width(const gpt_config *c) { return c->d_ff > 0 ? c->d_ff : 4 * (int64_t)c->d_model; }
static int64_t vocab_padded(const gpt_config *c) {
    return c->vocab_multiple > 0 ? ceil_div(c->vocab, c->vocab_multiple) * c->vocab_multiple : c->vocab;
}

typedef struct {
    double replicated; /* bytes of the parts tp does not split (before R) */
    double split;      /* bytes of the parts split by tp (already / t) */
    double core;       /* the attention core's part (already / t) */
    /* FP8 (0 otherwise): the linear layers' inputs saved in FP8, included above */
    double fp8_replicated; /* QKV and MLP inputs (the norms' outputs), before R */
    double fp8_split;      /* attention output projection and MLP-out inputs (already / t) */
} act_parts;

static act_parts layer_act_parts(const gpt_config *cfg, const layout *l, const compute_params *p) {
    const double t = l->tp > 0 ? l->tp : 1, cp = l->cp > 0 ? l->cp : 1, b = l->micro_batch > 0 ? l->micro_batch : 1;
    const double s = cfg->seq_len, sl = ceil(s / cp), h = cfg->d_model, a = cfg->n_heads, g = (double)kv_heads(cfg);
    const double f = (double)mlp_width(cfg), e = act_elem_bytes(l->prec);
    const int drop = compute_model_dropout(cfg, p);
    const int flash = p ? p->attention == ATTENTION_FLASH : 1;
    const double sbh = sl * b * h;
    act_parts r = {0};
    if (l->prec == PRECISION_FP8) {
        /* FP8 (fp8.h): the four linear layers keep their inputs for the
         * weight gradient as FP8 copies (q bytes an element); the norms'
         * inputs, Q K V (bf16 attention) and the MLP's pre-activations stay bf16 */
        const double q = fp8_saved_input_bytes(l->fp8);
        r.fp8_replicated = q * sbh + q * sbh;
        r.fp8_split = (q * sbh + q * sl * b * f) / t;
        r.replicated = 2 * e * sbh + r.fp8_replicated + (drop ? 2 * sbh : 0);
        r.split = (e * sbh * (1 + 2 * g / a) + (cfg->mlp == MLP_SWIGLU ? 2 : 1) * e * sl * b * f) / t + r.fp8_split;
    } else {
        r.replicated = 2 * e * sbh + e * sbh + e * sbh + (drop ? 2 * sbh : 0);
        r.split = (e * sbh * (1 + 2 * g / a) + e * sbh + (cfg->mlp == MLP_SWIGLU ? 3 : 2) * e * sl * b * f) / t;
    }
    if (gpt_is_mla(cfg)) {
        /* multi-head latent attention (DeepSeek-V2/V3): its queries, keys and values are a (2 dqk + dv)
         * wide per token, not h (1 + 2g/a), and it keeps its latents (q_lora, kv_lora + the shared
         * rotary key) and their norms' outputs (replicated: the down-projections are not split by tp);
         * mem=norm_mla (DeepSeek-V3 report, section 3.2.3) recomputes every RMSNorm's output and the
         * up-projections' q, k, v in backward: the norms' inputs and the latents stay */
        const double dqk = cfg->qk_nope_dim + cfg->qk_rope_dim, dv = cfg->v_head_dim;
        const double lat = (double)cfg->q_lora_rank + cfg->kv_lora_rank + cfg->qk_rope_dim;
        const double lat_norm = (double)cfg->q_lora_rank + cfg->kv_lora_rank;
        const double qkv = e * sl * b * a * (2 * dqk + dv) / t, qkv_gqa = e * sbh * (1 + 2 * g / a) / t;
        const double q8 = l->prec == PRECISION_FP8 ? fp8_saved_input_bytes(l->fp8) : e;
        const double o_in = q8 * sl * b * a * dv / t, o_gqa = q8 * sbh / t;
        r.split += qkv - qkv_gqa + o_in - o_gqa;
        r.replicated += e * sl * b * (lat + lat_norm);
        if (l->mem & LAYOUT_MEM_NORM_MLA) {
            const double norm_out = l->prec == PRECISION_FP8 ? r.fp8_replicated : 2 * e * sbh;
            r.split -= qkv;
            r.replicated -= norm_out + e * sl * b * lat_norm;
            if (l->prec == PRECISION_FP8) r.fp8_replicated = 0;
        }
    }
    if (flash)
        r.core = 4 * a * sl * b / t;
    else
        r.core = (e + (drop ? 1 + e : 0)) * a * sl * s * b / t;
    return r;
}

static double rep_factor(const layout *l) { return (l->sp && l->tp > 1) ? 1.0 / l->tp : 1.0; }

int64_t layer_activation_bytes_p(const gpt_config *cfg, const layout *l, const compute_params *p) {
    act_parts a = layer_act_parts(cfg, l, p);
    double R = rep_factor(l);
    double bytes;
    switch (l->recompute) {
    case RECOMPUTE_FULL: {
        const double cp = l->cp > 0 ? l->cp : 1, b = l->micro_batch > 0 ? l->micro_batch : 1;
        bytes = act_elem_bytes(l->prec) * ceil(cfg->seq_len / cp) * b * cfg->d_model * R;
        break;
    }
    case RECOMPUTE_SELECTIVE: bytes = a.replicated * R + a.split; break;
    default: bytes = a.replicated * R + a.split + a.core; break;
    }
    return (int64_t)llround(bytes);
}

int64_t layer_fp8_activation_bytes(const gpt_config *cfg, const layout *l, const compute_params *p) {
    if (l->prec != PRECISION_FP8 || l->recompute == RECOMPUTE_FULL) return 0;
    act_parts a = layer_act_parts(cfg, l, p);
    return (int64_t)llround(a.fp8_replicated * rep_factor(l) + a.fp8_split);
}

int64_t layer_fp8_weight_bytes(const gpt_config *cfg, const layout *l) {
    if (l->prec != PRECISION_FP8) return 0;
    const int64_t t = l->tp > 0 ? l->tp : 1, h = cfg->d_model, a = cfg->n_heads, g = kv_heads(cfg);
    const int64_t d = h / a, f = mlp_width(cfg), up = cfg->mlp == MLP_SWIGLU ? 2 : 1;
    const double w = (double)(h * (a + 2 * g) * d / t + a * d * h / t + up * h * f / t + f * h / t);
    return (int64_t)llround(w * fp8_weight_copy_bytes(l->fp8));
}

int64_t layer_activation_bytes(const gpt_config *cfg, const layout *l) {
    return layer_activation_bytes_p(cfg, l, NULL);
}

int64_t layer_params_per_gpu(const gpt_config *cfg, const layout *l) {
    const int64_t t = l->tp > 0 ? l->tp : 1, h = cfg->d_model, a = cfg->n_heads, g = kv_heads(cfg);
    const int64_t d = h / a, f = mlp_width(cfg), up = cfg->mlp == MLP_SWIGLU ? 2 : 1;
    int64_t w = h * (a + 2 * g) * d / t + a * d * h / t + up * h * f / t + f * h / t;
    if (!cfg->no_bias) w += (a + 2 * g) * d / t + h + up * f / t + h; /* row-parallel biases stay whole */
    w += (cfg->norm == NORM_LAYERNORM ? 2 : 1) * 2 * h;              /* two norms */
    return w;
}

int64_t stage_extra_params_per_gpu(const gpt_config *cfg, const layout *l, int stage) {
    const int64_t t = l->tp > 0 ? l->tp : 1, h = cfg->d_model, pp = l->pp > 0 ? l->pp : 1;
    const int64_t vocab_share = ceil_div(vocab_padded(cfg), t) * h;
    int64_t w = 0;
    if (stage == 0) {
        w += vocab_share;
        if (cfg->pos == POS_LEARNED) w += (int64_t)cfg->seq_len * h; /* not split over tp (Megatron) */
    }
    if (stage == pp - 1) {
        w += (cfg->norm == NORM_LAYERNORM ? 2 : 1) * h;
        /* an untied head has its own matrix; a tied one shares stage 0's,
         * except that Megatron keeps a copy on the last stage when pp > 1 */
        if (!cfg->tied || pp > 1) w += vocab_share;
    }
    return w;
}

int64_t zero_shard_ranks(const layout *l) {
    const int64_t dp = l->dp > 0 ? l->dp : 1, cp = l->cp > 0 ? l->cp : 1;
    return l->zero == ZERO_FSDP ? dp : dp * cp;
}

int layout_in_flight_1f1b(const layout *l, int m) {
    const int pp = l->pp > 0 ? l->pp : 1, vp = l->vp > 0 ? l->vp : 1;
    if (m < 1) return 0;
    if (vp == 1) return m < pp ? m : pp;
    int64_t n = 2 * (int64_t)(pp - 1) + (int64_t)(vp - 1) * pp + 1, cap = (int64_t)m * vp;
    return (int)(n < cap ? n : cap);
}

void layout_stage_memory_p(const gpt_config *cfg, const layout *l, const compute_params *p, int stage, int layers,
                           int in_flight, layout_memory *out) {
    *out = (layout_memory){0};
    const int64_t dp = l->dp > 0 ? l->dp : 1, t = l->tp > 0 ? l->tp : 1, vp = l->vp > 0 ? l->vp : 1;
    const int64_t pp = l->pp > 0 ? l->pp : 1;
    const int mx = mixed(l->prec);
    const double wb = mx ? 2 : 4, gb = gradient_bytes(l), ob = optimizer_bytes(l);
    const int64_t lp = layer_params_per_gpu(cfg, l);
    const int64_t n = lp * layers + stage_extra_params_per_gpu(cfg, l, stage);
    int64_t nw = n, ng = n, no = n;
    const int64_t zr = zero_shard_ranks(l);
    if (zr > 1) {
        if (l->zero >= ZERO_1) no = ceil_div(n, zr);
        if (l->zero >= ZERO_2) ng = ceil_div(n, zr);
        if (l->zero == ZERO_3) nw = ceil_div(n, zr);
    }
    out->params = (int64_t)(nw * wb);
    out->grads = (int64_t)(ng * gb);
    out->optimizer = (int64_t)(no * ob);

    const int64_t apl = layer_activation_bytes_p(cfg, l, p);
    out->act_per_layer = apl;
    double stash = (double)apl * ((double)layers / (double)vp) * (in_flight > 0 ? in_flight : 0);
    double work = 0;
    if (layers > 0 && l->recompute != RECOMPUTE_NONE) {
        layout none = *l;
        none.recompute = RECOMPUTE_NONE;
        int64_t whole = layer_activation_bytes_p(cfg, &none, p);
        if (l->recompute == RECOMPUTE_FULL) {
            work = (double)whole;
        } else {
            layout sel = *l;
            sel.recompute = RECOMPUTE_SELECTIVE;
            work = (double)(whole - layer_activation_bytes_p(cfg, &sel, p));
        }
    }
    if (layers > 0) { /* the backward's largest transient: a gradient as large as the biggest intermediate */
        const double t = l->tp > 0 ? l->tp : 1, cpd = l->cp > 0 ? l->cp : 1, bb = l->micro_batch > 0 ? l->micro_batch : 1;
        const double sl = ceil(cfg->seq_len / cpd), e = act_elem_bytes(l->prec);
        double mlp = e * sl * bb * (double)mlp_width(cfg) * (cfg->mlp == MLP_SWIGLU ? 2 : 1) / t;
        double core = (p && p->attention == ATTENTION_UNFUSED) ? e * cfg->n_heads * sl * cfg->seq_len * bb / t : 0;
        work += 2.0 * (mlp > core ? mlp : core); /* the op's output gradient and its input gradient */
    }
    out->activations = (int64_t)llround(stash + work);

    const double cp = l->cp > 0 ? l->cp : 1, b = l->micro_batch > 0 ? l->micro_batch : 1;
    const double e = act_elem_bytes(l->prec), sl = ceil(cfg->seq_len / cp), h = cfg->d_model;
    const double sbh = sl * b * h, R = rep_factor(l);
    double eh = 0;
    if (stage == 0 && compute_model_dropout(cfg, p)) eh += sbh * R * (in_flight > 0 ? in_flight : 0);
    if (stage == pp - 1) eh += sl * b * (double)ceil_div(vocab_padded(cfg), t) * (4.0 + e);
    out->embedding_head = (int64_t)llround(eh);

    double buf = 0;
    if (dp > 1 && l->zero <= ZERO_2) buf += 2 * DDP_BUCKET_BYTES;
    if (dp > 1 && l->zero == ZERO_3) {
        const int64_t f = mlp_width(cfg), up = cfg->mlp == MLP_SWIGLU ? 2 : 1, hh = cfg->d_model;
        const int64_t g = kv_heads(cfg), d = hh / cfg->n_heads;
        int64_t big = up * hh * f / t, qkv = hh * (cfg->n_heads + 2 * g) * d / t;
        if (qkv > big) big = qkv;
        buf += 2.0 * big * wb + big * gb;
    }
    if (dp > 1 && l->zero == ZERO_FSDP) buf += (double)lp * gb;
    if (t > 1 && l->sp) buf += 2 * e * sbh;
    out->buffers = (int64_t)llround(buf);
    out->total = out->params + out->grads + out->optimizer + out->activations + out->embedding_head + out->buffers;

    /* FP8 (fp8.h): the weight copies are added; the activations already
     * hold their FP8 part (reported apart). Zero 3 gathers and casts one
     * layer at a time, so only that layer's copies exist at once. */
    if (l->prec == PRECISION_FP8) {
        const int64_t one = layer_fp8_weight_bytes(cfg, l);
        out->fp8_weights = (dp > 1 && l->zero == ZERO_3) ? (layers > 0 ? one : 0) : one * layers;
        out->fp8_act_per_layer = layer_fp8_activation_bytes(cfg, l, p);
        out->total += out->fp8_weights;
    }
}

void layout_stage_memory(const gpt_config *cfg, const layout *l, int stage, int layers, int in_flight,
                         layout_memory *out) {
    layout_stage_memory_p(cfg, l, NULL, stage, layers, in_flight, out);
}

/* ---- mixture of experts ----------------------------------------------------
 * An MoE model's stage (layout_stage_memory_moe), with nm of its `layers`
 * MoE layers, e activation bytes, edp = tp cp dp / (etp ep), X the expert
 * parameters of one GPU per MoE layer (moe_layer_expert_params_per_gpu):
 *   params / grads / optimizer  the replicated part as the dense model's
 *       (each layer's dense part, dp sharding by zero), recomputed here
 *   expert_params     nm X wb   (zero 3: / edp)
 *   expert_grads      nm X gb   (zero >= 2: / edp)
 *   expert_optimizer  nm X ob   (zero >= 1: / edp)
 *       wb, gb, ob = 2, 2, 12 (mixed precision) or 4, 4, 8, as the dense part
 *       (mem=fp32_grads: gb 4; mem=bf16_moments: ob 8 or 4)
 *   moe_activations   nm / vp x in_flight x (router + routed + expert_mlp +
 *       shared) of moe_activation_parts, minus the dense MLP's own stash the
 *       dense formula counted for those layers ((gated 3, else 2) e s'b f / t
 *       over the MLP width f); none under full recomputation
 *   moe_buffers       the dispatcher's buffers, moe_dispatch_buffer_bytes
 */
static int64_t shard(int64_t n, int64_t by, int on) { return on && by > 1 ? ceil_div(n, by) : n; }

void layout_stage_memory_moe(const gpt_config *cfg, const layout *l, const compute_params *p, const moe_params *mp,
                             int stage, int layers, int in_flight, layout_memory *out) {
    layout_stage_memory_p(cfg, l, p, stage, layers, in_flight, out);
    if (!gpt_is_moe(cfg)) return;
    moe_params md;
    if (!mp) moe_params_default(&md), mp = &md;
    const int nm = moe_stage_moe_layers(cfg, l, stage, layers);
    const int64_t dp = l->dp > 0 ? l->dp : 1, edp = layout_expert_dim_size(l, LAYOUT_EDIM_EDP);
    const int mx = mixed(l->prec);
    const double wb = mx ? 2 : 4, gb = gradient_bytes(l), ob = optimizer_bytes(l);
    /* the replicated part: each layer's dense part instead of a dense layer */
    const int64_t n = (int64_t)(layers - nm) * moe_layer_dense_params_per_gpu(cfg, l, 0) +
                      (int64_t)nm * moe_layer_dense_params_per_gpu(cfg, l, 1) + stage_extra_params_per_gpu(cfg, l, stage);
    const int64_t zr = zero_shard_ranks(l); /* dp x cp, fsdp dp (above) */
    out->params = (int64_t)(shard(n, zr, l->zero == ZERO_3) * wb);
    out->grads = (int64_t)(shard(n, zr, l->zero >= ZERO_2 && l->zero != ZERO_FSDP) * gb);
    if (l->zero == ZERO_FSDP) out->grads = (int64_t)(shard(n, dp, 1) * gb);
    out->optimizer = (int64_t)(shard(n, zr, l->zero >= ZERO_1) * ob);
    const int64_t X = (int64_t)nm * moe_layer_expert_params_per_gpu(cfg, l);
    out->expert_params = (int64_t)(shard(X, edp, l->zero == ZERO_3) * wb);
    out->expert_grads = (int64_t)(shard(X, edp, l->zero >= ZERO_2) * gb);
    out->expert_optimizer = (int64_t)(shard(X, edp, l->zero >= ZERO_1) * ob);
    const moe_act_parts a = moe_activation_parts(cfg, l, mp);
    double per = a.router + a.routed + a.expert_mlp + a.shared;
    if (l->recompute != RECOMPUTE_FULL) {
        const double t = l->tp > 0 ? l->tp : 1, cp = l->cp > 0 ? l->cp : 1, b = l->micro_batch > 0 ? l->micro_batch : 1;
        per -= (cfg->mlp == MLP_SWIGLU ? 3 : 2) * act_elem_bytes(l->prec) * ceil(cfg->seq_len / cp) * b *
               (double)mlp_width(cfg) / t;
    }
    const double vp = l->vp > 0 ? l->vp : 1;
    out->moe_activations = (int64_t)llround((double)nm / vp * (in_flight > 0 ? in_flight : 0) * per);
    out->moe_buffers = nm > 0 ? (int64_t)llround(moe_dispatch_buffer_bytes(cfg, l, mp)) : 0;
    if (l->prec == PRECISION_FP8 && l->zero != ZERO_3) {
        /* FP8 weight copies of the layers' own linear weights (the dense formula's shapes were a dense
         * layer's): each layer's dense part (attention, MLP or router and shared experts) and the
         * local experts' */
        const double w = (double)(layers - nm) * moe_layer_dense_params_per_gpu(cfg, l, 0) +
                         (double)nm * (moe_layer_dense_params_per_gpu(cfg, l, 1) + moe_layer_expert_params_per_gpu(cfg, l));
        out->fp8_weights = (int64_t)llround(w * fp8_weight_copy_bytes(l->fp8));
    }
    out->total = out->params + out->grads + out->optimizer + out->activations + out->embedding_head + out->buffers +
                 out->expert_params + out->expert_grads + out->expert_optimizer + out->moe_activations +
                 out->moe_buffers + out->fp8_weights;
}
