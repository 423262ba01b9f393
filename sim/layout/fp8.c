/*
 * fp8.c: the FP8 facts of the layout simulator (fp8.h): which GPU runs
 * which recipe, the FP8 GEMMs' peak and base efficiency, the cast passes'
 * bytes and bandwidth, the FP8 copies' bytes.
 *
 * GEMM efficiency. The compute model prices a GEMM at peak x base x shape
 * factor (compute_model.c: tile, wave, split-k, short-k). For FP8 the peak
 * is the GPU's fp8 (or mxfp8) peak and the base is the GPU's bf16 base
 * times a ratio R measured on one H200 with benchmarks/hw/fp8_gemm_sweep.cu
 * (cuBLASLt, TN, the same shapes in bf16 and FP8 back to back, docs/fp8.md):
 *   R = (FP8 TFLOP/s / fp8 peak) / (bf16 TFLOP/s / bf16 peak)
 * per recipe and accumulation: Transformer Engine runs the forward GEMM
 * with fast accumulation and the data and weight gradients with split
 * (periodically promoted) accumulation, so
 *   tensorwise, delayed   forward R_FAST, backward R_SPLIT (per-tensor
 *                         scales: the same GEMM, the recipes differ in the
 *                         casts only)
 *   blockwise             R_BLOCK forward and data gradient, R_BLOCK_WGRAD
 *                         the weight gradient (cuBLASLt's 1 x 128 / 128 x 128
 *                         block scales, applied in the main loop; the weight
 *                         gradient scales both operands 1 x 128)
 *   mxfp8                 R_FAST / R_SPLIT as tensorwise: Blackwell's
 *                         tensor cores apply the E8M0 block scales
 *                         themselves (ASSUMED: no Blackwell measured here)
 * How it carries: the H100 and H800 are the H200's GH100 die at the same
 * clocks and 700 W, with the same bf16 base (compute_model.c); their FP8
 * base is that times R, as measured. Blackwell (B200, GB200, GB300) has no
 * measured bf16 base here either: its bf16 base is the fitted
 * gemm_efficiency, and its FP8 base that times the same R (ASSUMED: FP8
 * keeps the same fraction of its own peak relative to bf16 on the next
 * generation, as it did from H100's datasheet ratio 2.0 to B200's 2.0).
 *
 * Casts. Bytes per element: read the bf16 tensor (2), write the row-wise
 * and the transposed / column-wise FP8 copies (1 + 1); tensorwise reads it
 * once more for the amax first (+2, one kernel more). The cast reaches
 * CAST_FRAC of the memory model's bandwidth (a plain copy's), the amax read
 * AMAX_FRAC, measured by the same sweep's cast set on the H200 (a
 * transposing kernel reaches less than a copy).
 *
 * Memory. FP8 weight copies: row-wise + transposed, 2 bytes per parameter,
 * plus the scales: blockwise one fp32 per 128 x 128 block (4 / 16384
 * bytes a parameter, each copy), mxfp8 one E8M0 byte per 32 elements (1/32
 * a copy); per-tensor scales are nothing per parameter. Saved inputs: one
 * FP8 copy (the one the weight gradient reads), 1 byte, plus blockwise's
 * fp32 per 128 (4/128) or mxfp8's byte per 32.
 */
#include "fp8.h"

#include <string.h>

/* FP8 / bf16 GEMM efficiency ratios (see above), fitted to
 * benchmarks/hw/fp8_gemm_sweep.cu on one H200 (results/fp8_gemm_sweep_h200.txt,
 * docs/fp8.md): each kind's base over its 144 forward or 288 backward
 * shapes of Llama 3 8B / 70B / 405B (tp 1-8, 4,096-16,384 tokens) with the
 * compute model's shape factor, over the bf16 base of the same run's 432
 * shapes (0.730) */
#define R_FAST 0.946        /* tensorwise, fast accumulation, forward: base 0.690, rms 7.6% */
#define R_SPLIT 0.921       /* tensorwise, split accumulation, data / weight gradients: 0.672, 7.3% */
#define R_BLOCK 0.805       /* 1 x 128 / 128 x 128 block scales, forward and data gradient: 0.587, 7.2% */
#define R_BLOCK_WGRAD 0.610 /* the same, weight gradient (1 x 128 on both operands): 0.445, 5.4% */

/* Cast kernels against a plain bf16 copy (the same sweep's cast set,
 * medians over 4 shapes): cast + transposed cast with the amax fused 0.842;
 * a separate amax pass (reads only) 1.027 */
#define CAST_FRAC 0.842
#define AMAX_FRAC 1.027

pl_status fp8_check_gpu(const cluster_gpu *gpu, fp8_recipe r, char *msg, size_t len) {
    if ((unsigned)r >= FP8_RECIPE_COUNT) return pl_fail(msg, len, PL_ERR_INVALID, "unknown FP8 recipe %d", (int)r);
    if (!(gpu->peak_flops[PRECISION_FP8] > 0))
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "GPU %s cannot run FP8 (its cluster file gives no fp8 peak: no FP8 tensor cores)", gpu->name);
    if (r == FP8_RECIPE_MXFP8 && !(gpu->peak_mxfp8 > 0))
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "GPU %s cannot run the FP8 recipe mxfp8 (no MXFP8 tensor cores: Blackwell and later; "
                       "use fp8=tensorwise, delayed or blockwise)",
                       gpu->name);
    return PL_OK;
}

double fp8_gemm_peak(const cluster_gpu *gpu, fp8_recipe r) {
    if (r == FP8_RECIPE_MXFP8 && gpu->peak_mxfp8 > 0) return gpu->peak_mxfp8;
    return gpu->peak_flops[PRECISION_FP8];
}

double fp8_gemm_base(const cluster_gpu *gpu, fp8_recipe r, double bf16_base, fp8_gemm_pass pass) {
    (void)gpu; /* the ratio carries to every GPU (above) */
    double R = r == FP8_RECIPE_BLOCKWISE ? (pass == FP8_GEMM_WGRAD ? R_BLOCK_WGRAD : R_BLOCK)
               : pass == FP8_GEMM_FWD    ? R_FAST
                                         : R_SPLIT;
    double b = bf16_base * R;
    return b > 1.0 ? 1.0 : b;
}

double fp8_cast_bytes_per_elem(fp8_recipe r) { return r == FP8_RECIPE_TENSORWISE ? 6.0 : 4.0; }

int fp8_cast_kernels(fp8_recipe r) { return r == FP8_RECIPE_TENSORWISE ? 2 : 1; }

double fp8_cast_bandwidth_fraction(fp8_recipe r) {
    /* tensorwise: its 2-byte amax read at AMAX_FRAC, then the 4-byte cast */
    if (r == FP8_RECIPE_TENSORWISE) return 6.0 / (2.0 / AMAX_FRAC + 4.0 / CAST_FRAC);
    return CAST_FRAC;
}

static double scale_bytes_per_elem(fp8_recipe r, int weight) {
    switch (r) {
    case FP8_RECIPE_BLOCKWISE: return weight ? 4.0 / (128.0 * 128.0) : 4.0 / 128.0;
    case FP8_RECIPE_MXFP8: return 1.0 / 32.0;
    default: return 0.0;
    }
}

double fp8_weight_copy_bytes(fp8_recipe r) { return 2.0 * (1.0 + scale_bytes_per_elem(r, 1)); }

double fp8_saved_input_bytes(fp8_recipe r) { return 1.0 + scale_bytes_per_elem(r, 0); }
