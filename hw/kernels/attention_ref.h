/*
 * attention_ref.h: the plain-C reference for the fused causal attention of
 * flash_attention.h: the naive formula, in double, on the same (B, T, 3C)
 * qkv layout, with an optional emulation of the bf16 roundings the GPU
 * kernel makes. Always built (CI has no GPU and tests it); the GPU tests
 * (tests/gpu/flash_tests.c) compare the kernels against it.
 *
 * Formula, per sequence b and head h (hs = C / NH, scale = 1 / sqrt(hs)):
 *   s[t][j] = scale * q_t . k_j for j <= t (causal)
 *   lse[t]  = ln sum_{j<=t} exp(s[t][j]),  P[t][j] = exp(s[t][j] - lse[t])
 *   out_t   = sum_j P[t][j] v_j
 *   backward, from dout: dP[t][j] = dout_t . v_j, D[t] = sum_j P dP,
 *   dS = P (dP - D), dq_t = scale sum_j dS[t][j] k_j,
 *   dk_j = scale sum_t dS[t][j] q_t, dv_j = sum_t P[t][j] dout_t.
 *
 * Modes:
 *   ATTN_REF_EXACT  the formula above on the fp32 inputs as given; results
 *                   stored as the nearest float.
 *   ATTN_REF_BF16   what the kernel rounds, rounded here (to nearest even):
 *                   q, k, v and dout on entry; forward: the weights
 *                   exp(s - max) before the P.V product (the sum l and lse
 *                   stay unrounded), out; backward: D = dout . out with out
 *                   the bf16 forward output of this mode (the kernel reads
 *                   the stored bf16 out), P before dv, dS before dq and dk,
 *                   and dq, dk, dv on exit. The kernel rounds exp(s - m) with
 *                   m its RUNNING max (one per 64-key block), so its rounded
 *                   weights are not bit-identical to these; each is within
 *                   the same 2^-8 relative bound, which is what the GPU
 *                   tests' tolerances rest on.
 */
#ifndef PLACER_HW_ATTENTION_REF_H
#define PLACER_HW_ATTENTION_REF_H

#include <stdint.h>

#include "status.h"

enum { ATTN_REF_EXACT = 0, ATTN_REF_BF16 = 1 };

/* bf16 bits of x, rounded to nearest, ties to even. Infinities stay, NaN
 * stays NaN (quiet, sign kept), finite values beyond the bf16 range round to
 * infinity. |round(x) - x| <= 2^-8 |x| for every normal x. */
uint16_t attn_bf16_bits(float x);
/* The float a bf16 bit pattern stands for (exact). */
float attn_bf16_value(uint16_t bits);
/* attn_bf16_value(attn_bf16_bits(x)). */
float attn_bf16_round(float x);

/* Forward. out (B,T,C) and lse (B,NH,T) (either may be NULL) from qkv
 * (B,T,3C), per the formula and mode above. Returns PL_OK, PL_ERR_INVALID
 * (B, T, NH < 1, C not a multiple of NH, NULL qkv, mode unknown) or
 * PL_ERR_NOMEM (the per-head work space: 4 T hs + T doubles). */
pl_status attn_ref_forward(float *out, float *lse, const float *qkv, int B, int T, int C, int NH, int mode);

/* Backward. dqkv (B,T,3C) is ASSIGNED, from dout (B,T,C) and qkv; P is
 * recomputed from qkv (no forward output needed). Same returns as forward
 * (work space 6 T hs + 2 hs + 2 T doubles). */
pl_status attn_ref_backward(float *dqkv, const float *dout, const float *qkv, int B, int T, int C, int NH,
                            int mode);

#endif
