/*
 * compute_model.c: the per-kernel compute model of the layout simulator
 * (compute_model.h): GEMMs with tile and wave quantisation, memory-bound
 * kernels at HBM bandwidth, the attention core, and from them one
 * transformer layer's forward / backward / recompute time on one GPU under
 * a layout's tp, cp, sp, micro-batch and precision.
 *
 * GEMM (m x n x k, `batch` of them): 2 m n k batch FLOP at
 *   peak[prec] * base(gpu) * max over tiles T and split-k s of
 *                (w_T * tile_T * wave_T,s * kfac_s * (s > 1 ? 0.95 : 1))
 *   tile_T    = m n / (ceil(m/TM) TM * ceil(n/TN) TN) (edge tiles count whole)
 *   wave_T,s  = tiles / (ceil(tiles / SMs) * SMs), tiles = the output tiles
 *               x batch x s                        (the last wave's idle SMs)
 *   kfac_s    = k' / (k' + gemm_k_half), k' = k / s (a short main loop pays
 *               its prologue and epilogue)
 * over the tile shapes below, as a cuBLAS heuristic picks a smaller tile
 * when the big one quantises badly; w_T is how much of the big tile's
 * per-SM throughput a smaller tile keeps (less data reuse per SM). Split-k
 * (s = 2, 4, 8 slices of at least 1024 of the reduction, then summed, at
 * 0.95 for the extra pass) is how cuBLAS fills the SMs for a weight
 * gradient with few output tiles and a long k.
 *   base(gpu) = the measured base of gpu's type where there is one
 *   (GEMM_MEASURED below), else compute_params.gemm_efficiency.

 * Memory-bound kernels: bytes / (hbm_bw * memory_efficiency).
 * Every kernel (GEMM or not) also pays kernel_overhead_us.
 *
 * One layer (T = micro_batch * seq_len / cp tokens on this GPU, h hidden,
 * a heads, g KV heads, d = h / a, f the MLP width, t = tp; with sp the
 * norms, dropouts and residual adds run on T / t tokens, else on all T):
 *   forward GEMMs  QKV (T, (a + 2g) d / t, h), attention output
 *                  (T, h, a d / t), MLP in (T, f / t [x2 for SwiGLU's gate and
 *                  up], h), MLP out (T, h, f / t)
 *   backward       per forward GEMM (m, n, k): data gradient (m, k, n) and
 *                  weight gradient (k, n, m)
 *   attention core, per head on this GPU (a / t of them), Tq = T / micro_batch
 *                  query rows against Tk = seq_len keys (cp: each rank's
 *                  queries see the whole sequence, load-balanced):
 *     flash        Q K^T (Tq, Tk, d) and P V (Tq, d, Tk) as batched GEMMs,
 *                  half the work under the causal mask; backward 2.5x the
 *                  forward (FlashAttention-2: five GEMMs against two, the
 *                  scores recomputed in the kernel)
 *     unfused      the same GEMMs over the full Tq x Tk (baddbmm does not skip
 *                  masked blocks), plus the fused scale-mask-softmax (read
 *                  and write the scores) and dropout on them (read, write,
 *                  a one-byte mask); backward: four batched GEMMs, softmax
 *                  and dropout gradients
 *   elementwise    two norms (read x, write y; backward read x and dy, write
 *                  dx), two (bias-)dropout-residual adds (read two, write
 *                  one, a mask byte with dropout), the activation (GELU:
 *                  read / write f / t; SwiGLU: read 2, write 1), rotary on q
 *                  and k (read / write)
 *   recompute      full: the whole forward again; selective: the attention
 *                  core's forward (Korthikanti et al. 2022); none: 0
 * Model FLOPs (fwd_flops) count every GEMM and the full Tq x Tk attention
 * (the Megatron and PaLM conventions do not halve it for the causal mask).
 *
 * Embedding (vocabulary-parallel): a gather of T rows of h into a full
 * T x h output on every tp rank (the all-reduce that sums the slices is
 * the caller's), plus the learned position add and dropout; backward a
 * scatter-add of T x h into the (fp32) gradient. Head: the final norm, the
 * logits GEMM (T, V / t, h), the vocabulary-parallel cross entropy (cast
 * to fp32, max, exp-sum, normalise: about four fp32 passes over T x V / t);
 * backward the softmax gradient and the two GEMMs.
 * Optimizer: Adam over the GPU's parameters, 28 bytes per parameter moved
 * (read a 2-byte gradient, read and write the 4-byte master weight and the
 * two 4-byte moments, write the 2-byte weight copy), in a few multi-tensor
 * kernels.
 *
 * Where the constants come from (defaults; the fitted ones are marked):
 *   gemm_efficiency 0.750  FITTED (the base of GPUs with no measurement:
 *                          A100) by `placer check-published --fit` on one
 *                          row, Megatron SC21 Table 1's 145.6B model on 1,536
 *                          GPUs (docs/published-runs.md); the only fitted
 *                          constant of the model
 *   GEMM_MEASURED          H100 / H200 (GH100, 700 W): base 0.738 for
 *                          bf16 / fp16 / fp8 and 0.687 for TF32 / fp32,
 *                          measured here with benchmarks/hw/gemm_sweep.cu on
 *                          an H200 (132 shapes of the check set's layers, 5 s
 *                          warm-up at full load, medians of 10; the model
 *                          then fits the shapes to 3.8% rms, 13.8% worst:
 *                          benchmarks/hw/results/gemm_sweep_h200.txt). The
 *                          H100 SXM has the same die, clocks and power limit;
 *                          its smaller, slower HBM does not bound these
 *                          GEMMs, so the figure is carried over unchanged
 *   gemm_k_half 256        fitted to the same H200 sweep's k series (m = n =
 *                          8192, k = 64 .. 8192: 23% .. 100% of the long-k
 *                          rate); carried to A100 unchanged
 *   memory_efficiency 0.85 fraction of the datasheet HBM bandwidth a
 *                          streaming copy reaches on A100 / H100 (1.7 of
 *                          2.0 TB/s, 2.9 of 3.35 TB/s in published STREAM-
 *                          style runs); not measured here
 *   kernel_overhead_us 2.0 the GPU-side gap between back-to-back kernels of
 *                          an eager (no CUDA graph) framework; assumed
 *   tiles 256x128, 128x256 (w 1), 128x128 (0.9), 128x64 and 64x128 (0.8),
 *   64x64 (0.65), one CTA per SM, split-k up to 8 slices of >= 1024 at
 *   0.95: assumed from CUTLASS's tile menu for sm_80 / sm_90; with them the
 *                          H200 sweep's shapes fit as above (without split-k:
 *                          6.3% rms, 37% worst)
 *   the SM count, peaks and HBM bandwidth: the cluster file (datasheets)
 *
 * FP8 (precision fp8 under l->fp8, the recipe): the four linear layers'
 * GEMMs at the recipe's peak and base (fp8.h / fp8.c: the bf16 base times
 * a measured FP8 / bf16 ratio), each with its input cast in forward, its
 * output gradient's cast in backward and its weight's cast once a step;
 * the attention core and the head's GEMM in bf16; every other kernel as
 * in bf16 (2-byte activations).
 */
#include "compute_model.h"
#include "model_params.h"

#include <math.h>

#include <string.h>

#include "fp8.h"

#define SPLIT_K_MAX 8
#define SPLIT_K_MIN 1024.0
#define SPLIT_K_W 0.95

/* Measured base GEMM efficiencies by GPU type (name substring), see the
 * opening comment: GEMM inputs of 2 bytes or fewer, and TF32 / fp32. */
static const struct {
    const char *name;
    double low, tf32;
} GEMM_MEASURED[] = {
    {"H200", 0.738, 0.687},
    {"H100", 0.738, 0.687},
    {"H800", 0.738, 0.687}, /* the H100 SXM's die, clocks and 700 W; NVLink cut to 400 GB/s only */
};

/* The base of Blackwell GPUs (B200, GB200, GB300): nothing measured here,
 * so it is the one constant fitted for FP8 (placer check-published --fit,
 * its FP8 section: docs/published-runs.md names the row). */
#define BLACKWELL_GEMM_EFFICIENCY 0.5595 /* placer check-published --fit */

static int is_blackwell(const cluster_gpu *gpu) {
    return strstr(gpu->name, "B200") || strstr(gpu->name, "B300") || strstr(gpu->name, "Blackwell");
}

typedef struct {
    int tm, tn;
    double w;
} tile_shape;

static const tile_shape TILES[] = {
    {256, 128, 1.00}, {128, 256, 1.00}, {128, 128, 0.90}, {128, 64, 0.80}, {64, 128, 0.80}, {64, 64, 0.65},
};
#define N_TILES (sizeof TILES / sizeof TILES[0])

void compute_params_default(compute_params *p) {
    p->gemm_efficiency = 0.750; /* fitted: `placer check-published --fit` on "T1 145.6B 1536 GPUs" (0.7504) */
    p->memory_efficiency = 0.85;
    p->kernel_overhead_us = 2.0;
    p->gemm_k_half = 256.0;
    p->use_measured = 1;
    p->attention = ATTENTION_FLASH;
    p->dropout = -1;
    p->no_tiles = 0;
    p->blackwell_gemm_efficiency = BLACKWELL_GEMM_EFFICIENCY;
    p->gemm_scale = 1.0;
}

int compute_model_dropout(const gpt_config *cfg, const compute_params *p) {
    if (p && (p->dropout == 0 || p->dropout == 1)) return p->dropout;
    return cfg->norm == NORM_LAYERNORM && !cfg->no_bias;
}

static const compute_params *params_or_default(const compute_params *p, compute_params *tmp) {
    if (p) return p;
    compute_params_default(tmp);
    return tmp;
}

static double peak_of(const cluster_gpu *gpu, precision prec) {
    double pk = (prec >= 0 && prec < PRECISION_COUNT) ? gpu->peak_flops[prec] : 0.0;
    if (!(pk > 0)) pk = gpu->peak_flops[PRECISION_FP32];
    if (!(pk > 0)) pk = 1e12; /* a GPU with no figures: 1 TFLOP/s rather than a division by 0 */
    return pk;
}

double gemm_base_efficiency(const cluster_gpu *gpu, precision prec, const compute_params *p) {
    compute_params tmp;
    p = params_or_default(p, &tmp);
    if (p->use_measured)
        for (size_t i = 0; i < sizeof GEMM_MEASURED / sizeof GEMM_MEASURED[0]; i++)
            if (strstr(gpu->name, GEMM_MEASURED[i].name))
                return p->gemm_scale *
                       ((prec == PRECISION_FP32 || prec == PRECISION_TF32) ? GEMM_MEASURED[i].tf32 : GEMM_MEASURED[i].low);
    if (p->use_measured && p->blackwell_gemm_efficiency > 0 && is_blackwell(gpu))
        return p->gemm_scale * p->blackwell_gemm_efficiency;
    return p->gemm_scale * p->gemm_efficiency;
}

/* The shape factor of gemm_efficiency: everything but the base. */
static double gemm_shape_factor(const cluster_gpu *gpu, int64_t batch, int64_t m, int64_t n, int64_t k,
                                const compute_params *p) {
    if (batch < 1) batch = 1;
    if (m < 1 || n < 1 || k < 1 || p->no_tiles) return 1.0;
    double sms = gpu->sm_count > 0 ? gpu->sm_count : 0;
    double best = 0.0;
    for (size_t i = 0; i < N_TILES; i++) {
        double tm = ceil((double)m / TILES[i].tm), tn = ceil((double)n / TILES[i].tn);
        double tile_eff = (double)m * (double)n / (tm * TILES[i].tm * tn * TILES[i].tn);
        /* split-k: s slices of the reduction run as separate tiles (then
         * summed), for GEMMs with too few tiles to fill the SMs */
        for (int sk = 1; sk <= SPLIT_K_MAX; sk *= 2) {
            double ks = ceil((double)k / sk);
            if (sk > 1 && ks < SPLIT_K_MIN) break;
            double tiles = tm * tn * (double)batch * sk;
            double wave_eff = sms > 0 ? tiles / (ceil(tiles / sms) * sms) : 1.0;
            double e = TILES[i].w * tile_eff * wave_eff * (ks / (ks + p->gemm_k_half)) * (sk > 1 ? SPLIT_K_W : 1.0);
            if (e > best) best = e;
        }
    }
    return best;
}

double gemm_efficiency_prec(const cluster_gpu *gpu, precision prec, int64_t batch, int64_t m, int64_t n, int64_t k,
                            const compute_params *p) {
    compute_params tmp;
    p = params_or_default(p, &tmp);
    return gemm_base_efficiency(gpu, prec, p) * gemm_shape_factor(gpu, batch, m, n, k, p);
}

double gemm_efficiency(const cluster_gpu *gpu, int64_t batch, int64_t m, int64_t n, int64_t k,
                       const compute_params *p) {
    return gemm_efficiency_prec(gpu, PRECISION_BF16, batch, m, n, k, p);
}

double gemm_batched_time_us(const cluster_gpu *gpu, precision prec, int64_t batch, int64_t m, int64_t n,
                            int64_t k, const compute_params *p) {
    compute_params tmp;
    p = params_or_default(p, &tmp);
    if (batch < 1 || m < 1 || n < 1 || k < 1) return 0.0;
    double flops = 2.0 * (double)m * (double)n * (double)k * (double)batch;
    double eff = gemm_efficiency_prec(gpu, prec, batch, m, n, k, p);
    return flops / (peak_of(gpu, prec) * eff) * 1e6 + p->kernel_overhead_us;
}

double gemm_time_us(const cluster_gpu *gpu, precision prec, int64_t m, int64_t n, int64_t k,
                    const compute_params *p) {
    return gemm_batched_time_us(gpu, prec, 1, m, n, k, p);
}

double memory_time_us(const cluster_gpu *gpu, double bytes, const compute_params *p) {
    compute_params tmp;
    p = params_or_default(p, &tmp);
    if (!(bytes > 0)) return 0.0;
    double bw = gpu->hbm_bw > 0 ? gpu->hbm_bw : 1e12;
    return bytes / (bw * p->memory_efficiency) * 1e6 + p->kernel_overhead_us;
}

/* Bytes of one activation element: the GEMM inputs of fp8 are cast in the
 * GEMM, the activations themselves stay bf16. */
static double act_bytes(precision prec) { return prec == PRECISION_FP8 ? 2.0 : (double)precision_act_bytes(prec); }

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A forward GEMM and its backward pair, accumulated into c. */
static void gemm_fwd_bwd(const cluster_gpu *gpu, precision prec, int64_t m, int64_t n, int64_t k,
                         const compute_params *p, layer_cost *c) {
    c->fwd_us += gemm_time_us(gpu, prec, m, n, k, p);
    c->bwd_us += gemm_time_us(gpu, prec, m, k, n, p) + gemm_time_us(gpu, prec, k, n, m, p);
    c->fwd_flops += 2.0 * (double)m * (double)n * (double)k;
}

typedef struct {
    double fwd_us, bwd_us, flops;
} attn_cost;

/* The attention core of one micro-batch on this GPU: b sequences, hl heads
 * of dimension d, tq query rows against tk keys each. */
static attn_cost attention_core(const cluster_gpu *gpu, precision prec, int64_t b, int64_t hl, int64_t d,
                                int64_t tq, int64_t tk, int dropout, const compute_params *p) {
    attn_cost a = {0, 0, 4.0 * (double)(b * hl) * (double)tq * (double)tk * (double)d};
    int64_t bh = b * hl;
    if (p->attention == ATTENTION_FLASH) {
        /* causal: about half the key blocks of each query block are skipped */
        double f = 0.5;
        double t = gemm_batched_time_us(gpu, prec, bh, tq, tk, d, p) + gemm_batched_time_us(gpu, prec, bh, tq, d, tk, p);
        /* one kernel: take the GEMM work at its efficiency, pay one launch */
        t = (t - 2.0 * p->kernel_overhead_us) * f + p->kernel_overhead_us;
        a.fwd_us = t;
        a.bwd_us = 2.5 * (t - p->kernel_overhead_us) + p->kernel_overhead_us;
        return a;
    }
    double e = act_bytes(prec), sc = (double)bh * (double)tq * (double)tk; /* score elements */
    a.fwd_us = gemm_batched_time_us(gpu, prec, bh, tq, tk, d, p) +  /* Q K^T */
               memory_time_us(gpu, 2.0 * e * sc, p) +               /* scale-mask-softmax */
               (dropout ? memory_time_us(gpu, (2.0 * e + 1.0) * sc, p) : 0.0) +
               gemm_batched_time_us(gpu, prec, bh, tq, d, tk, p);   /* P V */
    a.bwd_us = gemm_batched_time_us(gpu, prec, bh, tq, tk, d, p) +  /* dP = dO V^T */
               gemm_batched_time_us(gpu, prec, bh, tk, d, tq, p) +  /* dV = P^T dO */
               (dropout ? memory_time_us(gpu, (2.0 * e + 1.0) * sc, p) : 0.0) +
               memory_time_us(gpu, 3.0 * e * sc, p) +               /* softmax backward */
               gemm_batched_time_us(gpu, prec, bh, tq, d, tk, p) +  /* dQ = dS K */
               gemm_batched_time_us(gpu, prec, bh, tk, d, tq, p);   /* dK = dS^T Q */
    return a;
}

/* ---- FP8 (fp8.h: what runs in FP8, what it adds) ------------------------ */

/* One FP8 GEMM m x n x k: the recipe's peak, the GPU's bf16 base times the
 * recipe's FP8 / bf16 ratio, the shape factor of any GEMM. */
static double fp8_gemm_us(const cluster_gpu *gpu, fp8_recipe r, fp8_gemm_pass pass, int64_t m, int64_t n, int64_t k,
                          const compute_params *p) {
    if (m < 1 || n < 1 || k < 1) return 0.0;
    double base = fp8_gemm_base(gpu, r, gemm_base_efficiency(gpu, PRECISION_BF16, p), pass);
    double eff = base * gemm_shape_factor(gpu, 1, m, n, k, p), peak = fp8_gemm_peak(gpu, r);
    if (!(peak > 0)) peak = peak_of(gpu, PRECISION_BF16);
    return 2.0 * (double)m * (double)n * (double)k / (peak * eff) * 1e6 + p->kernel_overhead_us;
}

/* One cast of `elems` bf16 elements to FP8 (amax, row-wise and transposed
 * copies) under recipe r. */
static double fp8_cast_us(const cluster_gpu *gpu, fp8_recipe r, double elems, const compute_params *p) {
    if (!(elems > 0)) return 0.0;
    return memory_time_us(gpu, fp8_cast_bytes_per_elem(r) * elems / fp8_cast_bandwidth_fraction(r), p) +
           (fp8_cast_kernels(r) - 1) * p->kernel_overhead_us;
}

/* A linear layer in FP8, accumulated into c: forward GEMM (m x n x k, m the
 * tokens) after its input's cast (in_tokens x k: the local shard before a
 * sequence-parallel gather), backward's data and weight gradients after the
 * output gradient's cast (m x n), and the weight's cast (n x k) once a step,
 * spread over its `mb` micro-batches. */
static void fp8_linear(const cluster_gpu *gpu, fp8_recipe r, int64_t m, int64_t n, int64_t k, int64_t in_tokens,
                       int mb, const compute_params *p, layer_cost *c) {
    c->fwd_us += fp8_gemm_us(gpu, r, FP8_GEMM_FWD, m, n, k, p) + fp8_cast_us(gpu, r, (double)in_tokens * (double)k, p) +
                 fp8_cast_us(gpu, r, (double)n * (double)k, p) / (mb > 0 ? mb : 1);
    c->bwd_us += fp8_gemm_us(gpu, r, FP8_GEMM_DGRAD, m, k, n, p) + fp8_gemm_us(gpu, r, FP8_GEMM_WGRAD, k, n, m, p) +
                 fp8_cast_us(gpu, r, (double)m * (double)n, p);
    c->fwd_flops += 2.0 * (double)m * (double)n * (double)k;
}

/* Extended attention (model_params.h: a head_dim of its own, MLA, sliding
 * windows): its projection GEMMs and core, in place of the dense block's.
 * MLA: q down (T, r_q, h) and up (T, a (n + r) / t, r_q) (or one (T, a (n +
 * r) / t, h)), kv down (T, r_kv + r, h) (replicated over tp, as Megatron's),
 * kv up (T, a (n + v) / t, r_kv), output (T, h, a v / t); the core at the
 * mean of the q/k and v head sizes (its FLOPs exact). Sliding-window layers
 * attend to min(window, seq) keys; the layer is the mean over the layers. */
static void ext_attention(const cluster_gpu *gpu, const gpt_config *cfg, precision prec, int64_t T, int64_t t,
                          int64_t b, int64_t tq, int drop, const compute_params *p, layer_cost *out, attn_cost *core) {
    const int64_t h = cfg->d_model, a = cfg->n_heads, g = gpt_kv_heads(cfg);
    int64_t dcore;
    if (gpt_is_mla(cfg)) {
        const int64_t qr = cfg->q_lora_rank, kr = cfg->kv_lora_rank, n = cfg->qk_nope_dim, r = cfg->qk_rope_dim,
                      v = cfg->v_head_dim;
        if (qr > 0) {
            gemm_fwd_bwd(gpu, prec, T, qr, h, p, out);
            gemm_fwd_bwd(gpu, prec, T, a * (n + r) / t, qr, p, out);
        } else {
            gemm_fwd_bwd(gpu, prec, T, a * (n + r) / t, h, p, out);
        }
        gemm_fwd_bwd(gpu, prec, T, kr + r, h, p, out);
        gemm_fwd_bwd(gpu, prec, T, a * (n + v) / t, kr, p, out);
        gemm_fwd_bwd(gpu, prec, T, h, a * v / t, p, out);
        dcore = (n + r + v + 1) / 2;
    } else {
        const int64_t d = gpt_head_dim(cfg);
        gemm_fwd_bwd(gpu, prec, T, (a + 2 * g) * d / t, h, p, out);
        gemm_fwd_bwd(gpu, prec, T, h, a * d / t, p, out);
        dcore = d;
    }
    const int64_t nsl = cfg->sliding_window > 0 && cfg->sliding_window < cfg->seq_len ? cfg->n_sliding_layers : 0;
    attn_cost full = attention_core(gpu, prec, b, a / t, dcore, tq, cfg->seq_len, drop, p);
    if (nsl > 0) {
        attn_cost w = attention_core(gpu, prec, b, a / t, dcore, tq, cfg->sliding_window, drop, p);
        const double fs = (double)nsl / cfg->n_layers;
        full.fwd_us = (1 - fs) * full.fwd_us + fs * w.fwd_us;
        full.bwd_us = (1 - fs) * full.bwd_us + fs * w.bwd_us;
        full.flops = (1 - fs) * full.flops + fs * w.flops;
    }
    *core = full;
}

void layer_compute_cost(const cluster_gpu *gpu, const gpt_config *cfg, const layout *l,
                        const compute_params *p, layer_cost *out) {
    layer_compute_cost_mlp(gpu, cfg, l, p, 1, out);
}

void layer_compute_cost_mlp(const cluster_gpu *gpu, const gpt_config *cfg, const layout *l,
                            const compute_params *p, int with_mlp, layer_cost *out) {
    compute_params tmp;
    p = params_or_default(p, &tmp);
    *out = (layer_cost){0};
    const precision prec = l->prec;
    const int64_t t = l->tp > 0 ? l->tp : 1, cp = l->cp > 0 ? l->cp : 1;
    const int64_t b = l->micro_batch > 0 ? l->micro_batch : 1;
    const int64_t h = cfg->d_model, a = cfg->n_heads;
    const int64_t g = cfg->n_kv_heads > 0 ? cfg->n_kv_heads : a;
    const int64_t f = cfg->d_ff > 0 ? cfg->d_ff : 4 * h;
    const int64_t d = h / a;
    const int64_t tq = ceil_div(cfg->seq_len, cp), T = b * tq;
    const int64_t Tn = (l->sp && t > 1) ? ceil_div(T, t) : T; /* tokens of the norms and adds */
    const int swiglu = cfg->mlp == MLP_SWIGLU, drop = compute_model_dropout(cfg, p);
    const double e = act_bytes(prec);

    /* GEMMs */
    const int ext = gpt_config_is_extended(cfg);
    const int mb = layout_micro_batches(l);
    attn_cost ac = {0, 0, 0}; /* set by ext_attention or attention_core below */
    if (ext) { /* MLA / own head_dim / sliding windows; under FP8 their projections are costed in bf16 */
        ext_attention(gpu, cfg, prec == PRECISION_FP8 ? PRECISION_BF16 : prec, T, t, b, tq, drop, p, out, &ac);
    } else if (prec == PRECISION_FP8) { /* the linear layers in FP8 with their casts (fp8.h) */
        fp8_linear(gpu, l->fp8, T, (a + 2 * g) * d / t, h, Tn, mb, p, out);
        fp8_linear(gpu, l->fp8, T, h, a * d / t, T, mb, p, out);
    } else {
        gemm_fwd_bwd(gpu, prec, T, (a + 2 * g) * d / t, h, p, out);
        gemm_fwd_bwd(gpu, prec, T, h, a * d / t, p, out);
    }
    if (with_mlp && prec == PRECISION_FP8) {
        fp8_linear(gpu, l->fp8, T, (swiglu ? 2 : 1) * f / t, h, Tn, mb, p, out);
        fp8_linear(gpu, l->fp8, T, h, f / t, T, mb, p, out);
    } else if (with_mlp) {
        gemm_fwd_bwd(gpu, prec, T, (swiglu ? 2 : 1) * f / t, h, p, out);
        gemm_fwd_bwd(gpu, prec, T, h, f / t, p, out);
    }

    /* attention core (FP8 runs keep it in bf16: fp8.h) */
    if (!ext)
        ac = attention_core(gpu, prec == PRECISION_FP8 ? PRECISION_BF16 : prec, b, a / t, d, tq, cfg->seq_len, drop, p);
    out->fwd_us += ac.fwd_us;
    out->bwd_us += ac.bwd_us;
    out->fwd_flops += ac.flops;

    /* elementwise */
    double th = (double)Tn * (double)h, tf = (double)T * (double)(f / t);
    for (int i = 0; i < 2; i++) {
        out->fwd_us += memory_time_us(gpu, 2.0 * e * th, p);                    /* norm */
        out->bwd_us += memory_time_us(gpu, 3.0 * e * th, p);
        out->fwd_us += memory_time_us(gpu, (3.0 * e + (drop ? 1.0 : 0.0)) * th, p); /* dropout + add */
        out->bwd_us += memory_time_us(gpu, (2.0 * e + (drop ? 1.0 : 0.0)) * th, p);
    }
    if (with_mlp) {
        out->fwd_us += memory_time_us(gpu, (swiglu ? 3.0 : 2.0) * e * tf, p);   /* activation */
        out->bwd_us += memory_time_us(gpu, (swiglu ? 5.0 : 3.0) * e * tf, p);
    }
    if (cfg->pos == POS_ROTARY) {
        double qk = (double)T * (double)((a + g) * (ext ? gpt_head_dim(cfg) : d) / t);
        out->fwd_us += memory_time_us(gpu, 2.0 * e * qk, p);
        out->bwd_us += memory_time_us(gpu, 2.0 * e * qk, p);
    }

    switch (l->recompute) {
    case RECOMPUTE_FULL: out->recompute_us = out->fwd_us; break;
    case RECOMPUTE_SELECTIVE: out->recompute_us = ac.fwd_us; break;
    default: out->recompute_us = 0.0; break;
    }
}

void embedding_compute_cost(const cluster_gpu *gpu, const gpt_config *cfg, const layout *l,
                            const compute_params *p, layer_cost *out) {
    compute_params tmp;
    p = params_or_default(p, &tmp);
    *out = (layer_cost){0};
    const int64_t cp = l->cp > 0 ? l->cp : 1, b = l->micro_batch > 0 ? l->micro_batch : 1;
    const double T = (double)(b * ceil_div(cfg->seq_len, cp)), h = cfg->d_model, e = act_bytes(l->prec);
    const int drop = compute_model_dropout(cfg, p);
    out->fwd_us = memory_time_us(gpu, 2.0 * e * T * h, p); /* gather rows, write the output */
    out->bwd_us = memory_time_us(gpu, (e + 8.0) * T * h, p); /* scatter-add into fp32 */
    if (cfg->pos == POS_LEARNED) {
        out->fwd_us += memory_time_us(gpu, 3.0 * e * T * h, p);
        out->bwd_us += memory_time_us(gpu, (e + 8.0) * T * h, p);
    }
    if (drop) {
        out->fwd_us += memory_time_us(gpu, (2.0 * e + 1.0) * T * h, p);
        out->bwd_us += memory_time_us(gpu, (2.0 * e + 1.0) * T * h, p);
    }
    out->recompute_us = 0.0; /* Megatron checkpoints transformer layers only */
}

void head_compute_cost(const cluster_gpu *gpu, const gpt_config *cfg, const layout *l, const compute_params *p,
                       layer_cost *out) {
    compute_params tmp;
    p = params_or_default(p, &tmp);
    *out = (layer_cost){0};
    const int64_t t = l->tp > 0 ? l->tp : 1, cp = l->cp > 0 ? l->cp : 1;
    const int64_t b = l->micro_batch > 0 ? l->micro_batch : 1;
    const int64_t T = b * ceil_div(cfg->seq_len, cp), h = cfg->d_model;
    int64_t V = cfg->vocab;
    if (cfg->vocab_multiple > 0) V = ceil_div(V, cfg->vocab_multiple) * cfg->vocab_multiple;
    const int64_t Vl = ceil_div(V, t);
    const double e = act_bytes(l->prec);
    const double Tn = (l->sp && t > 1) ? (double)ceil_div(T, t) : (double)T;
    out->fwd_us = memory_time_us(gpu, 2.0 * e * Tn * (double)h, p); /* final norm */
    out->bwd_us = memory_time_us(gpu, 3.0 * e * Tn * (double)h, p);
    gemm_fwd_bwd(gpu, l->prec == PRECISION_FP8 ? PRECISION_BF16 : l->prec, T, Vl, h, p, out); /* FP8: bf16 head */
    double logits = (double)T * (double)Vl;
    out->fwd_us += memory_time_us(gpu, (e + 4.0 * 4.0) * logits, p); /* cast, max, exp-sum, normalise */
    out->bwd_us += memory_time_us(gpu, (4.0 + e) * logits, p);        /* softmax - one-hot */
    out->recompute_us = 0.0;
}

double optimizer_time_us(const cluster_gpu *gpu, int64_t params, const compute_params *p) {
    compute_params tmp;
    p = params_or_default(p, &tmp);
    if (params <= 0) return 0.0;
    return memory_time_us(gpu, 28.0 * (double)params, p) + 3.0 * p->kernel_overhead_us;
}
