/*
 * nn.h: the layers of the placer network, in forward/backward pairs
 * (llm.c style), in double precision, with matrix products through BLAS
 * (GSL's CBLAS interface, linked against OpenBLAS).
 *
 * Conventions, stated once:
 *   - row-major; a batch of B vectors of width X is (B,X);
 *   - arguments go outputs first, then inputs, then dimensions;
 *   - the forward pass saves what the backward pass needs (the caller owns
 *     every buffer; nothing here allocates);
 *   - parameter gradients accumulate (+=); activation gradients are
 *     assigned (=), except where a comment says "accumulates" (inputs
 *     shared by many steps, like the encoder states the attention reads).
 */
#ifndef PLACER_POLICY_NN_H
#define PLACER_POLICY_NN_H

/* Matrix products by plain C loops instead of BLAS on the calling thread
 * (on = 1), or through BLAS (0, the default). For the small products of
 * one sequence at a time the loops are several times faster (BLAS packs
 * its operands on every call); their sums run in another order, so
 * results differ from BLAS's in the last bits. The learned-grouping
 * trainer uses them; the 2017 placer keeps BLAS (its figures unchanged).
 * Returns the previous setting. */
int nn_set_loops(int on);

/* The tanh of the attention's scores (nn.c: tanh_fast): within 3 ulp of
 * libm's, branch-free so that its loop vectorises. Exposed for tests. */
double nn_tanh(double x);

/* out (B,O) = inp (B,I) @ W^T + b.  W is (O,I), b is (O) or NULL. */
void linear_forward(double *out, const double *inp, const double *W, const double *b, int B, int I, int O);

/* dinp (B,I) = dout @ W (skipped when dinp is NULL); dW (O,I) += dout^T @ inp
 * (skipped when dW is NULL);
 * db (O) += column sums of dout (skipped when NULL). */
void linear_backward(double *dinp, double *dW, double *db, const double *dout, const double *inp,
                     const double *W, int B, int I, int O);

/* dW (O,I) += sum over steps s = S-1 down to 0 of dout_s^T @ inp_s, where
 * step s is the B rows dout[s B .. s B + B - 1] (O wide) and the B rows of
 * inp from row s B (I wide, row stride ldi): the dW terms of S per-step
 * linear_backward calls made last step first, as a backward pass through
 * time makes them, with the same result bit for bit. With nn_set_loops(1)
 * it runs in one pass over dW (each row kept in cache) instead of S passes. */
void linear_backward_dw_steps(double *dW, const double *dout, const double *inp, int S, int B, int I, int O,
                              int ldi);

/* One LSTM step. xh (B,X+H) is the concatenation [x ; h_prev]; W is (4H,X+H),
 * b is (4H), gate order i, f, g, o. Writes h and c (B,H), and saves gates
 * (B,4H, after their nonlinearity) and tanh_c (B,H) for the backward pass.
 *   c = f*c_prev + i*g,  h = o*tanh(c) */
void lstm_forward(double *h, double *c, double *gates, double *tanh_c, const double *xh, const double *c_prev,
                  const double *W, const double *b, int B, int XH, int H);

/* Backward of lstm_forward. dh, dc (B,H) are the gradients arriving at h and
 * c (dc may be NULL for zero). Writes dxh (B,X+H) and dc_prev (B,H); dW and
 * db accumulate (dW NULL: skipped). dz (B,4H) receives the gate gradients,
 * from which the caller may take dW later (linear_backward_dw_steps). */
void lstm_backward(double *dxh, double *dc_prev, double *dW, double *db, double *dz, const double *dh,
                   const double *dc, const double *gates, const double *tanh_c, const double *c_prev,
                   const double *xh, const double *W, int B, int XH, int H);

/* Content (additive, Bahdanau) attention of B queries over T shared states.
 *   q = h @ Wq^T (B,A);  u[b,j] = tanh(q[b] + K[j]) (B,T,A);
 *   s[b,j] = v . u[b,j];  alpha = softmax_j(s) (B,T);  ctx[b] = sum_j alpha[b,j] E[j] (B,H)
 * E is (T,H), K = E @ Wk^T (T,A) precomputed by the caller, Wq (A,H), v (A).
 * Saves q, u and alpha. */
void attention_forward(double *ctx, double *alpha, double *u, double *q, const double *h, const double *E,
                       const double *K, const double *Wq, const double *v, int B, int T, int H, int A);

/* Backward of attention_forward given dctx (B,H). Writes dh (B,H); dE (T,H)
 * and dK (T,A) accumulate (the states are shared by all decoder steps);
 * dWq and dv accumulate. scratch holds B*T + B*A + A doubles. */
void attention_backward(double *dh, double *dE, double *dK, double *dWq, double *dv, double *scratch,
                        const double *dctx, const double *alpha, const double *u, const double *h,
                        const double *E, const double *Wq, const double *v, int B, int T, int H, int A);

/* probs (B,D) = softmax(logits) row by row (max-shifted). */
void softmax_forward(double *probs, const double *logits, int B, int D);

/* The policy-gradient loss of one decoder step and its gradient:
 *   loss = sum_b [ -w[b] * log probs[b, a[b]] - beta * H(probs[b]) ] * scale
 * where H is the entropy in nats. Writes dlogits (B,D) (assigned) and
 * returns the loss. w is the per-sample weight (the advantage). */
double policy_loss_backward(double *dlogits, const double *probs, const int *a, const double *w, double beta,
                            double scale, int B, int D);

#endif
