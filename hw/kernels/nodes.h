/*
 * nodes.h: the GPT's node math as plain C forward/backward pairs, the
 * reference that the CUDA kernels are tested against and the compute of the
 * CPU backend.
 *
 * Conventions (llm.c style):
 *   - Arguments go outputs first, then inputs, then dimensions. N is the
 *     number of tokens in the call (micro-batch size b times T); B is the
 *     micro-batch size where the sequence structure matters.
 *   - Forward saves what backward needs (layernorm mean/rstd, attention's
 *     permuted qkv, softmax and pre-projection output, MLP pre-activation and
 *     GELU output). The saved layouts are identical in the CUDA kernels, so
 *     tests can compare them tensor by tensor.
 *   - Storage is fp32; dot products and reductions accumulate in double, so
 *     the reference is as accurate as fp32 storage allows.
 *
 * Gradient convention, stated once for every node:
 *   - Parameter gradients ACCUMULATE (+=). The executor zeroes each device's
 *     flat gradient buffer at the start of a step, and every micro-batch adds
 *     into it.
 *   - Activation gradients (dinp) are ASSIGNED (=) when acc == 0 and ADDED
 *     (+=) when acc == 1. A tensor with two consumers (the residual stream
 *     feeds both a layernorm and a residual add) receives two contributions:
 *     the executor passes acc = 0 to the first backward that writes the
 *     buffer and acc = 1 to the later one, in its issue order. A contribution
 *     computed on another device arrives through a transfer: it is received
 *     straight into the buffer when it is the first, otherwise into a
 *     temporary that add_inplace sums in before the producer's backward.
 *   - The loss has no separate backward: loss_forward writes the logits
 *     gradient (softmax - onehot) / (B_full * T) directly, in place over the
 *     logits when dlogits == logits. The scale uses the FULL batch's token
 *     count, so summing micro-batch gradients gives the full-batch gradient.
 */
#ifndef PLACER_HW_NODES_H
#define PLACER_HW_NODES_H

#include <stdint.h>

#define HW_LN_EPS 1e-5f

/* ---- matmul (the linear layers) ---- */

/* out (N, OC) with row stride ldo = inp (N, C) @ w^T + bias.
 * w is (OC, C); bias is (OC) or NULL. */
void cpu_matmul_forward(float *out, const float *inp, const float *w, const float *bias, int N, int C,
                        int OC, int ldo);

/* dinp (N, C) (= or += by acc) = dout @ w; dw (OC, C) += dout^T @ inp;
 * dbias (OC) += column sums of dout (skipped when NULL). dout has row
 * stride ldd. dinp may be NULL (no input gradient wanted), dw may be NULL
 * (no weight gradient: inp unused; the split backward's B). */
void cpu_matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                         const float *w, int N, int C, int OC, int ldd, int acc);

/* ---- embedding ---- */

/* out (B,T,C) = wte[tokens] + wpe[t]; tokens (B,T) in [0,V), wte (V,C), wpe (T,C). */
void cpu_embedding_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B, int T,
                           int C);
/* dwte += scatter of dout by token; dwpe += dout summed over the batch. */
void cpu_embedding_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T,
                            int C);

/* ---- layernorm ---- */

/* out (N,C), mean (N), rstd (N) from inp (N,C), weight (C), bias (C). */
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                           const float *bias, int N, int C);
void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, const float *mean, const float *rstd, int N, int C, int acc);

/* ---- attention: qkv projection, causal softmax attention, output projection ----
 * hs = C / NH. Saved: qkvr (3, B, NH, T, hs), the projected q, k, v with bias,
 * permuted per head; att (B, NH, T, T), the causal softmax (zeros above the
 * diagonal); y (B, T, C), the heads' output before the projection.
 * Scratch (floats): forward 4*B*T*C, backward 8*B*T*C + B*NH*T*T. */
void cpu_attention_forward(float *out, float *qkvr, float *att, float *y, float *scratch, const float *inp,
                           const float *wqkv, const float *bqkv, const float *wproj, const float *bproj,
                           int B, int T, int C, int NH);
void cpu_attention_backward(float *dinp, float *dwqkv, float *dbqkv, float *dwproj, float *dbproj,
                            float *scratch, const float *dout, const float *inp, const float *qkvr,
                            const float *att, const float *y, const float *wqkv, const float *wproj, int B,
                            int T, int C, int NH, int acc);

/* Tensor parallelism (hw/dist/dist_tp.h): the attention of nh of the NH heads,
 * hs = C / NH, Cl = nh * hs. wqkv (3 Cl, C) and bqkv (3 Cl) hold the q, k
 * and v rows of those heads, wproj (C, Cl) the projection's columns that
 * read them; bproj (C) may be NULL. out (N, C) is then the heads' share of
 * the projection (a partial sum when nh < NH). Saved and scratch as above
 * with Cl for C and nh for NH. nh = NH is cpu_attention_forward, bit for
 * bit. The backward's dbproj (C) may be NULL. */
void cpu_attention_forward_heads(float *out, float *qkvr, float *att, float *y, float *scratch, const float *inp,
                                 const float *wqkv, const float *bqkv, const float *wproj, const float *bproj,
                                 int B, int T, int C, int NH, int nh);
void cpu_attention_backward_heads(float *dinp, float *dwqkv, float *dbqkv, float *dwproj, float *dbproj,
                                  float *scratch, const float *dout, const float *inp, const float *qkvr,
                                  const float *att, const float *y, const float *wqkv, const float *wproj, int B,
                                  int T, int C, int NH, int nh, int acc);

/* ---- residual add ---- */

/* out = a + b over n floats. */
void cpu_residual_forward(float *out, const float *a, const float *b, int64_t n);
/* da (= or += by acc_a) dout; db (= or += by acc_b) dout. da and db may alias
 * (a node fed twice by one tensor): the two updates then apply in turn. */
void cpu_residual_backward(float *da, float *db, const float *dout, int64_t n, int acc_a, int acc_b);

/* ---- MLP: fc, GELU-tanh, proj ----
 * Saved: h (N, 4C) pre-activation with bias, g (N, 4C) = gelu(h).
 * Scratch (floats): backward 4*N*C. */
void cpu_mlp_forward(float *out, float *h, float *g, const float *inp, const float *wfc, const float *bfc,
                     const float *wproj, const float *bproj, int N, int C);
void cpu_mlp_backward(float *dinp, float *dwfc, float *dbfc, float *dwproj, float *dbproj, float *scratch,
                      const float *dout, const float *inp, const float *h, const float *g, const float *wfc,
                      const float *wproj, int N, int C, int acc);

/* The MLP over F hidden columns (tensor parallelism: F = 4C / tp): wfc
 * (F, C), bfc (F), wproj (C, F), bproj (C) or NULL (then out is a partial
 * sum). h, g (N, F); backward scratch N * F. F = 4C is cpu_mlp_*, bit for
 * bit. The backward's dbproj may be NULL. */
void cpu_mlp_forward_cols(float *out, float *h, float *g, const float *inp, const float *wfc, const float *bfc,
                          const float *wproj, const float *bproj, int N, int C, int F);
void cpu_mlp_backward_cols(float *dinp, float *dwfc, float *dbfc, float *dwproj, float *dbproj, float *scratch,
                           const float *dout, const float *inp, const float *h, const float *g, const float *wfc,
                           const float *wproj, int N, int C, int F, int acc);

/* GELU, tanh approximation, and its derivative. */
float gelu_tanh(float x);
float gelu_tanh_grad(float x);

/* ---- output head (no bias) ---- */

/* logits (N, Vp) = inp (N,C) @ w^T, w (V,C); columns V..Vp-1 are padding and
 * left as they are. */
void cpu_head_forward(float *logits, const float *inp, const float *w, int N, int C, int V, int Vp);
void cpu_head_backward(float *dinp, float *dw, const float *dlogits, const float *inp, const float *w, int N,
                       int C, int V, int Vp, int acc);

/* ---- loss: fused softmax + cross-entropy + its gradient ----
 * losses (N) = -log softmax(logits)[target]; *loss_sum += sum(losses) (in
 * double); dlogits (N, Vp) = (softmax - onehot) * inv_norm, with padding
 * columns set to 0. dlogits may equal logits (in place). loss_sum may be NULL. */
void cpu_loss_forward(float *losses, float *dlogits, double *loss_sum, const float *logits, const int *targets,
                      float inv_norm, int N, int V, int Vp);

/* ---- optimizer and helpers ---- */

/* AdamW step t (1-based) over n parameters with bias correction; weight
 * decay is decoupled and applies to every parameter. */
void cpu_adamw(float *p, const float *g, float *m, float *v, int64_t n, float lr, float beta1, float beta2,
               float eps, float weight_decay, int t);

/* y += x over n floats. */
void cpu_add_inplace(float *y, const float *x, int64_t n);

/* ---- the bf16 mixed mode (hw.h's rules) ----
 * bf16 values are kept as floats rounded to bf16 (round to nearest even;
 * NaN stays NaN). The *_bf16 node functions take their weights from the
 * bf16 copy (w16, b16: already rounded) and fp32 biases where the output is
 * fp32. What they round, in order:
 *   attention  x, qkv (after its bias), y; backward dout, dy, dqkv, x
 *   mlp        x, h and g = gelu(unrounded h); backward dout, dh, x
 *   head       x, logits (columns < V); backward x (dlogits come rounded)
 *   loss       dlogits (the logits come rounded)
 * Bias gradients of fp32 outputs are sums of the fp32 dout; of bf16 ones
 * (qkv, h), of the rounded gradient. Saved tensors have the fp32 layouts.
 * Scratch (floats): attention forward 5*B*T*C, backward 10*B*T*C + B*NH*T*T;
 * mlp forward N*C, backward 6*N*C; head N*C both ways. */
float hw_bf16_round(float x);
uint16_t hw_bf16_bits(float x);
float hw_bf16_to_float(uint16_t b);
/* dst = round(src) over n floats; dst may equal src. */
void cpu_round_bf16(float *dst, const float *src, int64_t n);

void cpu_attention_forward_bf16(float *out, float *qkvr, float *att, float *y, float *scratch, const float *inp,
                                const float *wqkv16, const float *bqkv16, const float *wproj16, const float *bproj,
                                int B, int T, int C, int NH);
void cpu_attention_backward_bf16(float *dinp, float *dwqkv, float *dbqkv, float *dwproj, float *dbproj,
                                 float *scratch, const float *dout, const float *inp, const float *qkvr,
                                 const float *att, const float *y, const float *wqkv16, const float *wproj16,
                                 int B, int T, int C, int NH, int acc);
/* The tensor-parallel slices of the two above (nodes' _heads / _cols forms):
 * nh of NH heads, F hidden columns; bproj and dbproj may be NULL. Scratch
 * (floats): attention forward 4 N Cl + N C, backward 8 N Cl + B nh T T +
 * 2 N C; mlp forward N C, backward N F + 2 N C. nh = NH and F = 4C are the
 * whole nodes, bit for bit. */
void cpu_attention_forward_heads_bf16(float *out, float *qkvr, float *att, float *y, float *scratch,
                                      const float *inp, const float *wqkv16, const float *bqkv16,
                                      const float *wproj16, const float *bproj, int B, int T, int C, int NH, int nh);
void cpu_attention_backward_heads_bf16(float *dinp, float *dwqkv, float *dbqkv, float *dwproj, float *dbproj,
                                       float *scratch, const float *dout, const float *inp, const float *qkvr,
                                       const float *att, const float *y, const float *wqkv16, const float *wproj16,
                                       int B, int T, int C, int NH, int nh, int acc);
void cpu_mlp_forward_cols_bf16(float *out, float *h, float *g, float *scratch, const float *inp, const float *wfc16,
                               const float *bfc16, const float *wproj16, const float *bproj, int N, int C, int F);
void cpu_mlp_backward_cols_bf16(float *dinp, float *dwfc, float *dbfc, float *dwproj, float *dbproj, float *scratch,
                                const float *dout, const float *inp, const float *h, const float *g,
                                const float *wfc16, const float *wproj16, int N, int C, int F, int acc);
void cpu_mlp_forward_bf16(float *out, float *h, float *g, float *scratch, const float *inp, const float *wfc16,
                          const float *bfc16, const float *wproj16, const float *bproj, int N, int C);
void cpu_mlp_backward_bf16(float *dinp, float *dwfc, float *dbfc, float *dwproj, float *dbproj, float *scratch,
                           const float *dout, const float *inp, const float *h, const float *g, const float *wfc16,
                           const float *wproj16, int N, int C, int acc);
void cpu_head_forward_bf16(float *logits, float *scratch, const float *inp, const float *w16, int N, int C, int V,
                           int Vp);
void cpu_head_backward_bf16(float *dinp, float *dw, float *scratch, const float *dlogits, const float *inp,
                            const float *w16, int N, int C, int V, int Vp, int acc);
void cpu_loss_forward_bf16(float *losses, float *dlogits, double *loss_sum, const float *logits, const int *targets,
                           float inv_norm, int N, int V, int Vp);

/* ---- the backward split into B and W (zero-bubble orders, schedule.h) ----
 * B computes the input gradient and keeps what the weight gradients need
 * beyond the saved block, the input and dout: attention dqkv (N, 3C), the
 * MLP dh (N, 4C); W computes the weight and bias gradients (+=) from them.
 * B then W gives the whole backward's bits (the same loops on the same
 * operands). The head needs nothing kept: B is cpu_matmul_backward with
 * dw NULL, W with dinp NULL. fp32 only. Attention's scratch is the whole
 * backward's. */
void cpu_attention_backward_input(float *dinp, float *dqkv, float *scratch, const float *dout, const float *qkvr,
                                  const float *att, const float *wqkv, const float *wproj, int B, int T, int C,
                                  int NH, int acc);
void cpu_attention_backward_weight(float *dwqkv, float *dbqkv, float *dwproj, float *dbproj, const float *dout,
                                   const float *inp, const float *y, const float *dqkv, int N, int C);
void cpu_mlp_backward_input(float *dinp, float *dh, const float *dout, const float *h, const float *wfc,
                            const float *wproj, int N, int C, int acc);
void cpu_mlp_backward_weight(float *dwfc, float *dbfc, float *dwproj, float *dbproj, const float *dout,
                             const float *inp, const float *g, const float *dh, int N, int C);

#endif
