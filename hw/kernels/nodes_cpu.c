/*
 * nodes_cpu.c: the reference node math in plain C (see nodes.h for the
 * conventions). Loops are written for clarity, not speed: the CPU backend
 * runs small configs, and the GPU tests compare against it on a small config.
 * Every dot product and reduction accumulates in double.
 */
#include "nodes.h"

#include <math.h>
#include <string.h>

/* ---- matmul ---- */

void cpu_matmul_forward(float *out, const float *inp, const float *w, const float *bias, int N, int C,
                        int OC, int ldo) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (int64_t)n * C;
        float *o = out + (int64_t)n * ldo;
        for (int oc = 0; oc < OC; oc++) {
            const float *wr = w + (int64_t)oc * C;
            double s = bias ? bias[oc] : 0.0;
            for (int c = 0; c < C; c++) s += (double)x[c] * wr[c];
            o[oc] = (float)s;
        }
    }
}

void cpu_matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                         const float *w, int N, int C, int OC, int ldd, int acc) {
    if (dinp) {
        for (int n = 0; n < N; n++) {
            const float *d = dout + (int64_t)n * ldd;
            float *di = dinp + (int64_t)n * C;
            for (int c = 0; c < C; c++) {
                double s = 0.0;
                for (int oc = 0; oc < OC; oc++) s += (double)d[oc] * w[(int64_t)oc * C + c];
                di[c] = acc ? di[c] + (float)s : (float)s;
            }
        }
    }
    for (int oc = 0; oc < OC; oc++) {
        for (int c = 0; c < C && dw; c++) {
            double s = 0.0;
            for (int n = 0; n < N; n++) s += (double)dout[(int64_t)n * ldd + oc] * inp[(int64_t)n * C + c];
            dw[(int64_t)oc * C + c] += (float)s;
        }
        if (dbias) {
            double s = 0.0;
            for (int n = 0; n < N; n++) s += dout[(int64_t)n * ldd + oc];
            dbias[oc] += (float)s;
        }
    }
}

/* ---- embedding ---- */

void cpu_embedding_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B, int T,
                           int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((int64_t)b * T + t) * C;
            const float *te = wte + (int64_t)tokens[b * T + t] * C;
            const float *pe = wpe + (int64_t)t * C;
            for (int c = 0; c < C; c++) o[c] = te[c] + pe[c];
        }
}

void cpu_embedding_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T,
                            int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((int64_t)b * T + t) * C;
            float *te = dwte + (int64_t)tokens[b * T + t] * C;
            for (int c = 0; c < C; c++) te[c] += d[c];
        }
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            double s = 0.0;
            for (int b = 0; b < B; b++) s += dout[((int64_t)b * T + t) * C + c];
            dwpe[(int64_t)t * C + c] += (float)s;
        }
}

/* ---- layernorm ---- */

void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                           const float *bias, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (int64_t)n * C;
        double m = 0.0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        double v = 0.0;
        for (int c = 0; c < C; c++) v += ((double)x[c] - m) * ((double)x[c] - m);
        v /= C;
        double s = 1.0 / sqrt(v + HW_LN_EPS);
        float *o = out + (int64_t)n * C;
        for (int c = 0; c < C; c++) o[c] = (float)(((double)x[c] - m) * s * weight[c] + bias[c]);
        mean[n] = (float)m;
        rstd[n] = (float)s;
    }
}

void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, const float *mean, const float *rstd, int N, int C, int acc) {
    for (int n = 0; n < N; n++) {
        const float *d = dout + (int64_t)n * C;
        const float *x = inp + (int64_t)n * C;
        float *di = dinp + (int64_t)n * C;
        double m = mean[n], s = rstd[n];
        double dnorm_mean = 0.0, dnorm_norm_mean = 0.0;
        for (int c = 0; c < C; c++) {
            double norm = ((double)x[c] - m) * s;
            double dnorm = (double)weight[c] * d[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int c = 0; c < C; c++) {
            double norm = ((double)x[c] - m) * s;
            double dnorm = (double)weight[c] * d[c];
            dbias[c] += d[c];
            dweight[c] += (float)(norm * d[c]);
            float g = (float)(s * (dnorm - dnorm_mean - norm * dnorm_norm_mean));
            di[c] = acc ? di[c] + g : g;
        }
    }
}

/* ---- attention ---- */

/* qkv (B,T,3C) -> qkvr (3,B,NH,T,hs). Bias is already in qkv. */
static void permute_qkv(float *qkvr, const float *qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int part = 0; part < 3; part++)
                for (int h = 0; h < NH; h++)
                    for (int i = 0; i < hs; i++) {
                        int64_t src = ((int64_t)b * T + t) * 3 * C + (int64_t)part * C + h * hs + i;
                        int64_t dst = (((((int64_t)part * B + b) * NH + h) * T) + t) * hs + i;
                        qkvr[dst] = qkv[src];
                    }
}

static void unpermute_qkv(float *qkv, const float *qkvr, int B, int T, int C, int NH) {
    int hs = C / NH;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int part = 0; part < 3; part++)
                for (int h = 0; h < NH; h++)
                    for (int i = 0; i < hs; i++) {
                        int64_t dst = ((int64_t)b * T + t) * 3 * C + (int64_t)part * C + h * hs + i;
                        int64_t src = (((((int64_t)part * B + b) * NH + h) * T) + t) * hs + i;
                        qkv[dst] = qkvr[src];
                    }
}

/* (B,NH,T,hs) <-> (B,T,C) */
static void heads_to_tokens(float *y, const float *yp, int B, int T, int C, int NH) {
    int hs = C / NH;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++)
                for (int i = 0; i < hs; i++)
                    y[((int64_t)b * T + t) * C + h * hs + i] = yp[(((int64_t)b * NH + h) * T + t) * hs + i];
}

static void tokens_to_heads(float *yp, const float *y, int B, int T, int C, int NH) {
    int hs = C / NH;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++)
                for (int i = 0; i < hs; i++)
                    yp[(((int64_t)b * NH + h) * T + t) * hs + i] = y[((int64_t)b * T + t) * C + h * hs + i];
}

static void attn_core_fwd(float *att, float *yp, const float *qkvr, int B, int T, int C, int NH);
static void attn_core_bwd(float *dqkvr, float *datt, const float *dyp, const float *qkvr, const float *att, int B,
                          int T, int C, int NH);

void cpu_attention_forward(float *out, float *qkvr, float *att, float *y, float *scratch, const float *inp,
                           const float *wqkv, const float *bqkv, const float *wproj, const float *bproj,
                           int B, int T, int C, int NH) {
    cpu_attention_forward_heads(out, qkvr, att, y, scratch, inp, wqkv, bqkv, wproj, bproj, B, T, C, NH, NH);
}

void cpu_attention_forward_heads(float *out, float *qkvr, float *att, float *y, float *scratch, const float *inp,
                                 const float *wqkv, const float *bqkv, const float *wproj, const float *bproj,
                                 int B, int T, int C, int NH, int nh) {
    const int N = B * T;
    const int Cl = C / NH * nh;            /* the width of the nh heads */
    const int64_t NCl = (int64_t)N * Cl;
    float *qkv = scratch;                  /* (B,T,3Cl) */
    float *yp = scratch + 3 * NCl;         /* (B,nh,T,hs) */
    cpu_matmul_forward(qkv, inp, wqkv, bqkv, N, C, 3 * Cl, 3 * Cl);
    permute_qkv(qkvr, qkv, B, T, Cl, nh);
    attn_core_fwd(att, yp, qkvr, B, T, Cl, nh);
    heads_to_tokens(y, yp, B, T, Cl, nh);
    cpu_matmul_forward(out, y, wproj, bproj, N, Cl, C, C);
}

/* The causal softmax attention of the permuted q, k, v: att (B,NH,T,T) and
 * yp (B,NH,T,hs). */
static void attn_core_fwd(float *att, float *yp, const float *qkvr, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const int64_t NC = (int64_t)B * T * C;
    const float *q = qkvr, *k = qkvr + NC, *v = qkvr + 2 * NC;
    const double scale = 1.0 / sqrt((double)hs);
    for (int bh = 0; bh < B * NH; bh++) {
        const float *qb = q + (int64_t)bh * T * hs, *kb = k + (int64_t)bh * T * hs, *vb = v + (int64_t)bh * T * hs;
        float *ab = att + (int64_t)bh * T * T;
        float *yb = yp + (int64_t)bh * T * hs;
        for (int t = 0; t < T; t++) {
            float *row = ab + (int64_t)t * T;
            double mx = -INFINITY;
            for (int s = 0; s <= t; s++) {
                double dot = 0.0;
                for (int i = 0; i < hs; i++) dot += (double)qb[t * hs + i] * kb[s * hs + i];
                row[s] = (float)(dot * scale);
                if (row[s] > mx) mx = row[s];
            }
            double sum = 0.0;
            for (int s = 0; s <= t; s++) sum += exp((double)row[s] - mx);
            for (int s = 0; s <= t; s++) row[s] = (float)(exp((double)row[s] - mx) / sum);
            for (int s = t + 1; s < T; s++) row[s] = 0.0f;
            for (int i = 0; i < hs; i++) {
                double acc = 0.0;
                for (int s = 0; s <= t; s++) acc += (double)row[s] * vb[s * hs + i];
                yb[t * hs + i] = (float)acc;
            }
        }
    }
}

void cpu_attention_backward(float *dinp, float *dwqkv, float *dbqkv, float *dwproj, float *dbproj,
                            float *scratch, const float *dout, const float *inp, const float *qkvr,
                            const float *att, const float *y, const float *wqkv, const float *wproj, int B,
                            int T, int C, int NH, int acc) {
    cpu_attention_backward_heads(dinp, dwqkv, dbqkv, dwproj, dbproj, scratch, dout, inp, qkvr, att, y, wqkv, wproj,
                                 B, T, C, NH, NH, acc);
}

void cpu_attention_backward_heads(float *dinp, float *dwqkv, float *dbqkv, float *dwproj, float *dbproj,
                                  float *scratch, const float *dout, const float *inp, const float *qkvr,
                                  const float *att, const float *y, const float *wqkv, const float *wproj, int B,
                                  int T, int C, int NH, int nh, int acc) {
    const int N = B * T;
    const int Cl = C / NH * nh;
    const int64_t NCl = (int64_t)N * Cl;
    float *dy = scratch;                       /* (B,T,Cl) */
    float *dyp = dy + NCl;                     /* (B,nh,T,hs) */
    float *dqkvr = dyp + NCl;                  /* (3,B,nh,T,hs) */
    float *dqkv = dqkvr + 3 * NCl;             /* (B,T,3Cl) */
    float *datt = dqkv + 3 * NCl;              /* (B,nh,T,T) */
    cpu_matmul_backward(dy, dwproj, dbproj, dout, y, wproj, N, Cl, C, C, 0);
    tokens_to_heads(dyp, dy, B, T, Cl, nh);
    attn_core_bwd(dqkvr, datt, dyp, qkvr, att, B, T, Cl, nh);
    unpermute_qkv(dqkv, dqkvr, B, T, Cl, nh);
    cpu_matmul_backward(dinp, dwqkv, dbqkv, dqkv, inp, wqkv, N, C, 3 * Cl, 3 * Cl, acc);
}

/* The attention core's backward: dqkvr (3,B,NH,T,hs) from dyp (B,NH,T,hs);
 * datt (B,NH,T,T) is scratch. */
static void attn_core_bwd(float *dqkvr, float *datt, const float *dyp, const float *qkvr, const float *att, int B,
                          int T, int C, int NH) {
    const int hs = C / NH;
    const int64_t NC = (int64_t)B * T * C;
    const float *q = qkvr, *k = qkvr + NC, *v = qkvr + 2 * NC;
    float *dq = dqkvr, *dk = dqkvr + NC, *dv = dqkvr + 2 * NC;
    const double scale = 1.0 / sqrt((double)hs);
    memset(dqkvr, 0, sizeof(float) * 3 * (size_t)NC);
    for (int bh = 0; bh < B * NH; bh++) {
        int64_t o = (int64_t)bh * T * hs;
        const float *ab = att + (int64_t)bh * T * T;
        float *db = datt + (int64_t)bh * T * T;
        for (int t = 0; t < T; t++) {
            /* datt = dy v^T; dv += att^T dy */
            for (int s = 0; s <= t; s++) {
                double d = 0.0;
                for (int i = 0; i < hs; i++) d += (double)dyp[o + t * hs + i] * v[o + s * hs + i];
                db[(int64_t)t * T + s] = (float)d;
            }
            for (int s = t + 1; s < T; s++) db[(int64_t)t * T + s] = 0.0f;
        }
        for (int s = 0; s < T; s++)
            for (int i = 0; i < hs; i++) {
                double d = 0.0;
                for (int t = s; t < T; t++) d += (double)ab[(int64_t)t * T + s] * dyp[o + t * hs + i];
                dv[o + s * hs + i] = (float)d;
            }
        /* softmax backward, then the scale: dpre = scale * att * (datt - sum(att*datt)) */
        for (int t = 0; t < T; t++) {
            double dot = 0.0;
            for (int s = 0; s <= t; s++) dot += (double)ab[(int64_t)t * T + s] * db[(int64_t)t * T + s];
            for (int s = 0; s <= t; s++)
                db[(int64_t)t * T + s] =
                    (float)(scale * ab[(int64_t)t * T + s] * ((double)db[(int64_t)t * T + s] - dot));
        }
        /* dq = dpre k; dk = dpre^T q */
        for (int t = 0; t < T; t++)
            for (int i = 0; i < hs; i++) {
                double d = 0.0;
                for (int s = 0; s <= t; s++) d += (double)db[(int64_t)t * T + s] * k[o + s * hs + i];
                dq[o + t * hs + i] = (float)d;
            }
        for (int s = 0; s < T; s++)
            for (int i = 0; i < hs; i++) {
                double d = 0.0;
                for (int t = s; t < T; t++) d += (double)db[(int64_t)t * T + s] * q[o + t * hs + i];
                dk[o + s * hs + i] = (float)d;
            }
    }
}

/* ---- residual ---- */

void cpu_residual_forward(float *out, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void cpu_residual_backward(float *da, float *db, const float *dout, int64_t n, int acc_a, int acc_b) {
    for (int64_t i = 0; i < n; i++) {
        float d = dout[i];
        da[i] = acc_a ? da[i] + d : d;
        db[i] = acc_b ? db[i] + d : d;
    }
}

/* ---- MLP ---- */

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */

float gelu_tanh(float x) {
    double xd = x;
    return (float)(0.5 * xd * (1.0 + tanh(GELU_K * (xd + 0.044715 * xd * xd * xd))));
}

float gelu_tanh_grad(float x) {
    double xd = x;
    double u = GELU_K * (xd + 0.044715 * xd * xd * xd);
    double th = tanh(u);
    double sech2 = 1.0 - th * th;
    return (float)(0.5 * (1.0 + th) + 0.5 * xd * sech2 * GELU_K * (1.0 + 3.0 * 0.044715 * xd * xd));
}

void cpu_mlp_forward(float *out, float *h, float *g, const float *inp, const float *wfc, const float *bfc,
                     const float *wproj, const float *bproj, int N, int C) {
    cpu_mlp_forward_cols(out, h, g, inp, wfc, bfc, wproj, bproj, N, C, 4 * C);
}

void cpu_mlp_forward_cols(float *out, float *h, float *g, const float *inp, const float *wfc, const float *bfc,
                          const float *wproj, const float *bproj, int N, int C, int F) {
    cpu_matmul_forward(h, inp, wfc, bfc, N, C, F, F);
    for (int64_t i = 0; i < (int64_t)N * F; i++) g[i] = gelu_tanh(h[i]);
    cpu_matmul_forward(out, g, wproj, bproj, N, F, C, C);
}

void cpu_mlp_backward(float *dinp, float *dwfc, float *dbfc, float *dwproj, float *dbproj, float *scratch,
                      const float *dout, const float *inp, const float *h, const float *g, const float *wfc,
                      const float *wproj, int N, int C, int acc) {
    cpu_mlp_backward_cols(dinp, dwfc, dbfc, dwproj, dbproj, scratch, dout, inp, h, g, wfc, wproj, N, C, 4 * C, acc);
}

void cpu_mlp_backward_cols(float *dinp, float *dwfc, float *dbfc, float *dwproj, float *dbproj, float *scratch,
                           const float *dout, const float *inp, const float *h, const float *g, const float *wfc,
                           const float *wproj, int N, int C, int F, int acc) {
    float *dg = scratch; /* (N, F); becomes dh in place */
    cpu_matmul_backward(dg, dwproj, dbproj, dout, g, wproj, N, F, C, C, 0);
    for (int64_t i = 0; i < (int64_t)N * F; i++) dg[i] *= gelu_tanh_grad(h[i]);
    cpu_matmul_backward(dinp, dwfc, dbfc, dg, inp, wfc, N, C, F, F, acc);
}

/* ---- head ---- */

void cpu_head_forward(float *logits, const float *inp, const float *w, int N, int C, int V, int Vp) {
    cpu_matmul_forward(logits, inp, w, NULL, N, C, V, Vp);
}

void cpu_head_backward(float *dinp, float *dw, const float *dlogits, const float *inp, const float *w, int N,
                       int C, int V, int Vp, int acc) {
    cpu_matmul_backward(dinp, dw, NULL, dlogits, inp, w, N, C, V, Vp, acc);
}

/* ---- loss ---- */

void cpu_loss_forward(float *losses, float *dlogits, double *loss_sum, const float *logits, const int *targets,
                      float inv_norm, int N, int V, int Vp) {
    double total = 0.0;
    for (int n = 0; n < N; n++) {
        const float *x = logits + (int64_t)n * Vp;
        float *d = dlogits + (int64_t)n * Vp;
        double mx = -INFINITY;
        for (int v = 0; v < V; v++) if (x[v] > mx) mx = x[v];
        double sum = 0.0;
        for (int v = 0; v < V; v++) sum += exp((double)x[v] - mx);
        int tgt = targets[n];
        double loss = log(sum) + mx - (double)x[tgt];
        losses[n] = (float)loss;
        total += loss;
        /* x and d may alias: each element is read before it is written */
        for (int v = 0; v < V; v++) {
            double p = exp((double)x[v] - mx) / sum;
            d[v] = (float)((p - (v == tgt ? 1.0 : 0.0)) * inv_norm);
        }
        for (int v = V; v < Vp; v++) d[v] = 0.0f;
    }
    if (loss_sum) *loss_sum += total;
}

/* ---- AdamW and helpers ---- */

void cpu_adamw(float *p, const float *g, float *m, float *v, int64_t n, float lr, float beta1, float beta2,
               float eps, float weight_decay, int t) {
    double bc1 = 1.0 - pow(beta1, t), bc2 = 1.0 - pow(beta2, t);
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float mhat = (float)(mi / bc1), vhat = (float)(vi / bc2);
        p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * p[i]);
    }
}

void cpu_add_inplace(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

/* ---- the bf16 mixed mode (hw.h) ----
 * The same math as above, with the tensors the GPU keeps in bf16 rounded to
 * bf16 values at the points where the GPU rounds them. Weights come from
 * the bf16 copy (already rounded); products still accumulate in double, so
 * what remains between this and the GPU is fp32 accumulation order and
 * the occasional element that lands on the other side of a bf16 rounding
 * boundary (tests/gpu/gpu_tests.c states the tolerances). */

float hw_bf16_round(float x) { return hw_bf16_to_float(hw_bf16_bits(x)); }

uint16_t hw_bf16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float hw_bf16_to_float(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

void cpu_round_bf16(float *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = hw_bf16_round(src[i]);
}

/* dbias (OC) += column sums of d (N, OC; row stride ld), in double */
static void colsum_add(float *dbias, const float *d, int N, int OC, int ld) {
    for (int oc = 0; oc < OC; oc++) {
        double s = 0.0;
        for (int n = 0; n < N; n++) s += d[(int64_t)n * ld + oc];
        dbias[oc] += (float)s;
    }
}

void cpu_attention_forward_bf16(float *out, float *qkvr, float *att, float *y, float *scratch, const float *inp,
                                const float *wqkv16, const float *bqkv16, const float *wproj16, const float *bproj,
                                int B, int T, int C, int NH) {
    cpu_attention_forward_heads_bf16(out, qkvr, att, y, scratch, inp, wqkv16, bqkv16, wproj16, bproj, B, T, C, NH, NH);
}

void cpu_attention_forward_heads_bf16(float *out, float *qkvr, float *att, float *y, float *scratch,
                                      const float *inp, const float *wqkv16, const float *bqkv16,
                                      const float *wproj16, const float *bproj, int B, int T, int C, int NH, int nh) {
    const int N = B * T;
    const int Cl = C / NH * nh;
    const int64_t NC = (int64_t)N * C, NCl = (int64_t)N * Cl;
    float *qkv = scratch, *yp = scratch + 3 * NCl, *xr = scratch + 4 * NCl;
    cpu_round_bf16(xr, inp, NC);
    cpu_matmul_forward(qkv, xr, wqkv16, bqkv16, N, C, 3 * Cl, 3 * Cl);
    cpu_round_bf16(qkv, qkv, 3 * NCl);
    permute_qkv(qkvr, qkv, B, T, Cl, nh);
    attn_core_fwd(att, yp, qkvr, B, T, Cl, nh);
    heads_to_tokens(y, yp, B, T, Cl, nh);
    cpu_round_bf16(y, y, NCl);
    cpu_matmul_forward(out, y, wproj16, bproj, N, Cl, C, C);
}

void cpu_attention_backward_bf16(float *dinp, float *dwqkv, float *dbqkv, float *dwproj, float *dbproj,
                                 float *scratch, const float *dout, const float *inp, const float *qkvr,
                                 const float *att, const float *y, const float *wqkv16, const float *wproj16,
                                 int B, int T, int C, int NH, int acc) {
    cpu_attention_backward_heads_bf16(dinp, dwqkv, dbqkv, dwproj, dbproj, scratch, dout, inp, qkvr, att, y, wqkv16,
                                      wproj16, B, T, C, NH, NH, acc);
}

void cpu_attention_backward_heads_bf16(float *dinp, float *dwqkv, float *dbqkv, float *dwproj, float *dbproj,
                                       float *scratch, const float *dout, const float *inp, const float *qkvr,
                                       const float *att, const float *y, const float *wqkv16, const float *wproj16,
                                       int B, int T, int C, int NH, int nh, int acc) {
    const int N = B * T;
    const int Cl = C / NH * nh;
    const int64_t NC = (int64_t)N * C, NCl = (int64_t)N * Cl, BHTT = (int64_t)B * nh * T * T;
    float *dy = scratch, *dyp = dy + NCl, *dqkvr = dyp + NCl, *dqkv = dqkvr + 3 * NCl, *datt = dqkv + 3 * NCl;
    float *d16 = datt + BHTT, *xr = d16 + NC;
    cpu_round_bf16(d16, dout, NC);
    cpu_matmul_backward(dy, dwproj, NULL, d16, y, wproj16, N, Cl, C, C, 0);
    if (dbproj) colsum_add(dbproj, dout, N, C, C);
    cpu_round_bf16(dy, dy, NCl);
    tokens_to_heads(dyp, dy, B, T, Cl, nh);
    attn_core_bwd(dqkvr, datt, dyp, qkvr, att, B, T, Cl, nh);
    unpermute_qkv(dqkv, dqkvr, B, T, Cl, nh);
    cpu_round_bf16(dqkv, dqkv, 3 * NCl);
    cpu_round_bf16(xr, inp, NC);
    cpu_matmul_backward(dinp, dwqkv, dbqkv, dqkv, xr, wqkv16, N, C, 3 * Cl, 3 * Cl, acc);
}

void cpu_mlp_forward_bf16(float *out, float *h, float *g, float *scratch, const float *inp, const float *wfc16,
                          const float *bfc16, const float *wproj16, const float *bproj, int N, int C) {
    cpu_mlp_forward_cols_bf16(out, h, g, scratch, inp, wfc16, bfc16, wproj16, bproj, N, C, 4 * C);
}

void cpu_mlp_forward_cols_bf16(float *out, float *h, float *g, float *scratch, const float *inp, const float *wfc16,
                               const float *bfc16, const float *wproj16, const float *bproj, int N, int C, int F) {
    const int64_t NC = (int64_t)N * C, nf = (int64_t)N * F;
    float *xr = scratch;
    cpu_round_bf16(xr, inp, NC);
    cpu_matmul_forward(h, xr, wfc16, bfc16, N, C, F, F);
    /* the GELU epilogue takes the unrounded sum; both outputs are stored bf16 */
    for (int64_t i = 0; i < nf; i++) {
        g[i] = hw_bf16_round(gelu_tanh(h[i]));
        h[i] = hw_bf16_round(h[i]);
    }
    cpu_matmul_forward(out, g, wproj16, bproj, N, F, C, C);
}

void cpu_mlp_backward_bf16(float *dinp, float *dwfc, float *dbfc, float *dwproj, float *dbproj, float *scratch,
                           const float *dout, const float *inp, const float *h, const float *g, const float *wfc16,
                           const float *wproj16, int N, int C, int acc) {
    cpu_mlp_backward_cols_bf16(dinp, dwfc, dbfc, dwproj, dbproj, scratch, dout, inp, h, g, wfc16, wproj16, N, C,
                               4 * C, acc);
}

void cpu_mlp_backward_cols_bf16(float *dinp, float *dwfc, float *dbfc, float *dwproj, float *dbproj, float *scratch,
                                const float *dout, const float *inp, const float *h, const float *g,
                                const float *wfc16, const float *wproj16, int N, int C, int F, int acc) {
    const int64_t NC = (int64_t)N * C, nf = (int64_t)N * F;
    float *dg = scratch, *d16 = dg + nf, *xr = d16 + NC;
    cpu_round_bf16(d16, dout, NC);
    cpu_matmul_backward(dg, dwproj, NULL, d16, g, wproj16, N, F, C, C, 0);
    if (dbproj) colsum_add(dbproj, dout, N, C, C);
    for (int64_t i = 0; i < nf; i++) dg[i] = hw_bf16_round(dg[i] * gelu_tanh_grad(h[i]));
    cpu_round_bf16(xr, inp, NC);
    cpu_matmul_backward(dinp, dwfc, dbfc, dg, xr, wfc16, N, C, F, F, acc);
}

void cpu_head_forward_bf16(float *logits, float *scratch, const float *inp, const float *w16, int N, int C, int V,
                           int Vp) {
    cpu_round_bf16(scratch, inp, (int64_t)N * C);
    cpu_matmul_forward(logits, scratch, w16, NULL, N, C, V, Vp);
    for (int n = 0; n < N; n++) cpu_round_bf16(logits + (int64_t)n * Vp, logits + (int64_t)n * Vp, V);
}

void cpu_head_backward_bf16(float *dinp, float *dw, float *scratch, const float *dlogits, const float *inp,
                            const float *w16, int N, int C, int V, int Vp, int acc) {
    cpu_round_bf16(scratch, inp, (int64_t)N * C);
    cpu_matmul_backward(dinp, dw, NULL, dlogits, scratch, w16, N, C, V, Vp, acc);
}

void cpu_loss_forward_bf16(float *losses, float *dlogits, double *loss_sum, const float *logits, const int *targets,
                           float inv_norm, int N, int V, int Vp) {
    cpu_loss_forward(losses, dlogits, loss_sum, logits, targets, inv_norm, N, V, Vp);
    for (int n = 0; n < N; n++) cpu_round_bf16(dlogits + (int64_t)n * Vp, dlogits + (int64_t)n * Vp, V);
}

/* ---- the backward split into B (input gradient) and W (weight gradient) ----
 * The same arithmetic as the whole backward, in two calls: every weight
 * gradient comes from the same operands by the same loops, so B then W
 * (micro-batches' W in the same order) gives the whole backward's bits. */

void cpu_attention_backward_input(float *dinp, float *dqkv, float *scratch, const float *dout, const float *qkvr,
                                  const float *att, const float *wqkv, const float *wproj, int B, int T, int C,
                                  int NH, int acc) {
    const int N = B * T;
    const int64_t NC = (int64_t)N * C;
    float *dy = scratch, *dyp = dy + NC, *dqkvr = dyp + NC, *datt = dqkvr + 6 * NC; /* the whole call's layout */
    cpu_matmul_backward(dy, NULL, NULL, dout, NULL, wproj, N, C, C, C, 0);
    tokens_to_heads(dyp, dy, B, T, C, NH);
    attn_core_bwd(dqkvr, datt, dyp, qkvr, att, B, T, C, NH);
    unpermute_qkv(dqkv, dqkvr, B, T, C, NH);
    cpu_matmul_backward(dinp, NULL, NULL, dqkv, NULL, wqkv, N, C, 3 * C, 3 * C, acc);
}

void cpu_attention_backward_weight(float *dwqkv, float *dbqkv, float *dwproj, float *dbproj, const float *dout,
                                   const float *inp, const float *y, const float *dqkv, int N, int C) {
    cpu_matmul_backward(NULL, dwproj, dbproj, dout, y, NULL, N, C, C, C, 0);
    cpu_matmul_backward(NULL, dwqkv, dbqkv, dqkv, inp, NULL, N, C, 3 * C, 3 * C, 0);
}

void cpu_mlp_backward_input(float *dinp, float *dh, const float *dout, const float *h, const float *wfc,
                            const float *wproj, int N, int C, int acc) {
    const int F = 4 * C;
    cpu_matmul_backward(dh, NULL, NULL, dout, NULL, wproj, N, F, C, C, 0);
    for (int64_t i = 0; i < (int64_t)N * F; i++) dh[i] *= gelu_tanh_grad(h[i]);
    cpu_matmul_backward(dinp, NULL, NULL, dh, NULL, wfc, N, C, F, F, acc);
}

void cpu_mlp_backward_weight(float *dwfc, float *dbfc, float *dwproj, float *dbproj, const float *dout,
                             const float *inp, const float *g, const float *dh, int N, int C) {
    const int F = 4 * C;
    cpu_matmul_backward(NULL, dwproj, dbproj, dout, g, NULL, N, F, C, C, 0);
    cpu_matmul_backward(NULL, dwfc, dbfc, dh, inp, NULL, N, C, F, F, 0);
}
