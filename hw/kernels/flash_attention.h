/*
 * flash_attention.h: fused causal self-attention on the GPU in bf16, and in
 * fp32 storage with TF32 math (FlashAttention-2 style), forward and backward, reading the qkv GEMM's
 * output as it is and writing what the projection GEMM reads. No T x T
 * matrix and no permuted copy of q, k or v is ever stored; the tiling and
 * the softmax recurrence are described at the top of flash_attention.cu.
 *
 * Layouts (all pointers device memory, row-major, 16-byte aligned):
 *   qkv   (B, T, 3C) bf16: per token [q(C) | k(C) | v(C)], bias already added;
 *         head h uses channels h*hs .. h*hs+hs-1 of each part, hs = C / NH.
 *   out   (B, T, C) bf16: the heads side by side.
 *   lse   (B, NH, T) fp32: logsumexp over the visible keys of the SCALED
 *         scores s = q.k / sqrt(hs) (natural log), saved for backward.
 *   dqkv  (B, T, 3C) bf16: ASSIGNED (every element overwritten), same layout
 *         as qkv, so the qkv GEMM's backward reads it directly.
 *
 * Precision: bf16 storage, fp32 accumulation on the tensor cores (mma.sync
 * m16n8k16), softmax statistics in fp32. P is rounded to bf16 before the
 * P.V product (and dS before dS.K / dS^T.Q in backward), as every flash
 * kernel does; attention_ref.h emulates these roundings.
 *
 * Requirements: hs = 64 or 128; C % 8 == 0; B >= 1, 1 <= T; B * NH <= 65535;
 * compute capability >= 8.0 (bf16 mma). Anything else returns
 * cudaErrorInvalidValue (shape, alignment) or cudaErrorNoKernelImageForDevice
 * (older GPU) without launching. Launch errors come back as the cudaError_t
 * value of cudaGetLastError(). The functions never synchronize, so they can
 * be captured into a CUDA graph.
 */
#ifndef PLACER_HW_FLASH_ATTENTION_H
#define PLACER_HW_FLASH_ATTENTION_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#if defined(__cplusplus)
#include <cuda_bf16.h>
extern "C" {
#else
/* C callers see bf16 as its 2-byte storage; only pointers cross the API. */
typedef struct { unsigned short x; } __nv_bfloat16;
#endif

/* Forward: out and lse from qkv. Returns 0 or a cudaError_t as int. */
int flash_attn_fwd_bf16(__nv_bfloat16 *out, float *lse, const __nv_bfloat16 *qkv, int B, int T, int C,
                        int NH, cudaStream_t s);

/* Bytes of device scratch flash_attn_bwd_bf16 needs: the fp32 vector
 * D = rowsum(dout * out), B * NH * T floats (rounded up to 256 bytes). */
size_t flash_attn_bwd_scratch_bytes(int B, int T, int C, int NH);

/* Backward: dqkv (assigned) from dout (B,T,C), qkv, out and lse of the
 * forward. scratch holds flash_attn_bwd_scratch_bytes(B,T,C,NH) bytes.
 * Two launches (D, then one grid of dK/dV blocks per 64 keys and dQ blocks
 * per 64 queries), no atomics: the result is deterministic. Returns 0 or a
 * cudaError_t as int. */
int flash_attn_bwd_bf16(__nv_bfloat16 *dqkv, void *scratch, const __nv_bfloat16 *dout,
                        const __nv_bfloat16 *qkv, const __nv_bfloat16 *out, const float *lse, int B, int T,
                        int C, int NH, cudaStream_t s);

/* The TF32 kernels, for the engine's TF32 mode: the same layouts, shapes,
 * requirements, scratch (flash_attn_bwd_scratch_bytes) and return values as
 * the bf16 ones, with fp32 storage: qkv (B,T,3C), out (B,T,C), dout (B,T,C)
 * and dqkv (B,T,3C, assigned) are fp32, lse as above. Precision: every
 * product takes TF32 inputs (q, k, v, dout and the probabilities P and their
 * gradient dS rounded to a 10-bit mantissa, round to nearest) and sums in
 * fp32 (mma.sync m16n8k8 tf32); the softmax and its statistics are fp32.
 * Never bf16 math. Deterministic, no atomics; capturable into a graph. */
int flash_attn_fwd_tf32(float *out, float *lse, const float *qkv, int B, int T, int C, int NH, cudaStream_t s);
int flash_attn_bwd_tf32(float *dqkv, void *scratch, const float *dout, const float *qkv, const float *out,
                        const float *lse, int B, int T, int C, int NH, cudaStream_t s);

#if defined(__cplusplus)
}
#endif

#endif
