/*
 * loss32.h: the TF32 mode's loss kernels by number (loss.cu), for the engine
 * (cu_ctx's tf32_loss, PLACER_LOSS32=name) and for
 * benchmarks/hw/loss_variants.cu, which times each on the same logits.
 *
 *   LOSS32_OFF      none: the strict fp32 loss_k (PLACER_TF32_OFF=loss)
 *   LOSS32_F512     lossf_k, two 512-thread blocks an SM          "512"
 *   LOSS32_F1024    lossf_k, 1024-thread blocks                   "1024"
 *   LOSS32_F1SM     lossf_k, one 1024-thread block an SM          "1sm"
 *   LOSS32_PERSIST  lossf_k, one block an SM looping over rows    "persist"
 *   LOSS32_REG8     lossr_k, 8 float4 a thread in registers       "reg8"
 *   LOSS32_REG12    lossr_k, 12 float4 a thread in registers      "reg12"
 *
 * Contract: cu_loss32_setup(smem_max) once per device before the first
 * launch (the kernels' shared-memory limits; smem_max is what a block may
 * have, cudaDevAttrMaxSharedMemoryPerBlockOptin less 1 KB);
 * cu_loss32_fits(v, Vp, smem_max) says whether variant v runs at that vocabulary
 * stride; cu_loss32_launch enqueues it on s over N rows: losses (N), dlogits
 * (N x Vp, may alias logits), loss_sum (+= the sum of the N losses; may be
 * NULL), 16-byte aligned rows, Vp % 4 == 0, and returns the launch's error.
 */
#ifndef PLACER_HW_LOSS32_H
#define PLACER_HW_LOSS32_H

#include <cuda_runtime.h>

enum { LOSS32_OFF = 0, LOSS32_F512, LOSS32_F1024, LOSS32_F1SM, LOSS32_PERSIST, LOSS32_REG8, LOSS32_REG12, LOSS32_N };

const char *cu_loss32_name(int v);
/* the variant named s ("1024", "reg8", ...), or -1 */
int cu_loss32_parse(const char *s);
int cu_loss32_fits(int v, int Vp, int smem_max);
cudaError_t cu_loss32_setup(int smem_max);
cudaError_t cu_loss32_launch(int v, cudaStream_t s, int n_sm, float *losses, float *dlogits, double *loss_sum,
                             const float *logits, const int *targets, float inv_norm, int N, int V, int Vp);

#endif
