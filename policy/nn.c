/*
 * nn.c: forward/backward pairs of the placer network's layers (see nn.h).
 *
 * Matrix products go through cblas_dgemm, declared by GSL's CBLAS header
 * and resolved at link time by OpenBLAS when it is found (GSL's own
 * reference CBLAS otherwise). The sizes here are small (B <= 64 samples,
 * H <= 256), so the elementwise loops are plain C.
 */
#include "nn.h"

#include <gsl/gsl_cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* tanh(x) = E / (E + 2) with E = expm1(2|x|), the sign of x; expm1 by
 * y = 2|x| = k ln 2 + r (|r| <= ln 2 / 2, k by the 1.5 * 2^52 rounding
 * trick), expm1(y) = 2^k expm1(r) + (2^k - 1), expm1(r) by its Taylor
 * series to r^13 (remainder below 1e-17 relative). |x| > 20 is taken as
 * 20 (tanh is 1 in double there); NaN and +-inf give NaN. Only arithmetic, a
 * select and 64-bit integer ops, so a loop of it vectorises, and every
 * lane computes what this scalar code does. Within 3 ulp of libm's tanh
 * (tests/policy/test_nn.c); 5-10x faster than the libm call in the
 * attention's loop, where it replaced it. */
static inline double tanh_fast(double x) {
    const double lim = 20.0, ax0 = fabs(x);
    uint64_t axb, limb;
    memcpy(&axb, &ax0, sizeof axb);
    memcpy(&limb, &lim, sizeof limb);
    axb = axb < limb ? axb : limb; /* min(|x|, 20) on the bits, which the vectoriser takes (NaN: 20) */
    double ax;
    memcpy(&ax, &axb, sizeof ax);
    const double y = 2.0 * ax;
    const double shift = 0x1.8p52;
    const double t = y * 0x1.71547652b82fep0 + shift;
    const double k = t - shift;
    const double r = (y - k * 0x1.62e42fefa3800p-1) - k * 0x1.ef35793c7673p-45;
    double q = 1.0 / 6227020800.0;
    q = q * r + 1.0 / 479001600.0;
    q = q * r + 1.0 / 39916800.0;
    q = q * r + 1.0 / 3628800.0;
    q = q * r + 1.0 / 362880.0;
    q = q * r + 1.0 / 40320.0;
    q = q * r + 1.0 / 5040.0;
    q = q * r + 1.0 / 720.0;
    q = q * r + 1.0 / 120.0;
    q = q * r + 1.0 / 24.0;
    q = q * r + 1.0 / 6.0;
    q = q * r + 0.5;
    q = q * r * r + r;
    uint64_t tb, shb;
    memcpy(&tb, &t, sizeof tb);
    memcpy(&shb, &shift, sizeof shb);
    const uint64_t sb = (tb - shb + 1023u) << 52; /* 2^k: k in 0..58 */
    double sc;
    memcpy(&sc, &sb, sizeof sc);
    const double E = sc * q + (sc - 1.0);
    return copysign(E / (E + 2.0), x) + 0.0 * x; /* 0 x: NaN and +-inf give NaN */
}

double nn_tanh(double x) { return tanh_fast(x); }

static _Thread_local int g_loops = 0;

int nn_set_loops(int on) {
    int prev = g_loops;
    g_loops = on ? 1 : 0;
    return prev;
}

/* Four doubles as one value (GCC/Clang vector extension): element-wise
 * arithmetic, so each lane computes exactly what scalar code would. */
typedef double v4d __attribute__((vector_size(32)));

/* dst = p[0..3], unaligned (a macro: returning a vector by value from a
 * function changes the ABI between the AVX2 clone and the generic one) */
#define V4D_LOAD(dst, p) memcpy(&(dst), (p), sizeof(v4d))

/* C (M,N) = alpha-free  A op B  + beta C, row-major, by plain loops; the
 * shapes the layers need: op(A) = A or A^T, op(B) = B or B^T. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
__attribute__((optimize("O3"), target_clones("avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static void gemm_loops(int ta, int tb, int M, int N, int K, const double *A, int lda, const double *B, int ldb,
                       double beta, double *C, int ldc) {
    for (int i = 0; i < M; i++) {
        double *c = C + (size_t)i * ldc;
        if (beta == 0.0) memset(c, 0, sizeof *c * (size_t)N);
        else if (beta != 1.0)
            for (int j = 0; j < N; j++) c[j] *= beta;
    }
    if (!ta && tb) { /* C += A B^T: dot products of rows */
        /* Each dot product keeps four partial sums over k (s[0..3], added
         * as (s0 + s1) + (s2 + s3)); four columns j are computed together
         * so that their sixteen sums are independent chains the CPU (and
         * the vectoriser) overlaps. Per element the arithmetic is the same
         * as one column at a time. */
        for (int i = 0; i < M; i++) {
            const double *a = A + (size_t)i * lda;
            double *c = C + (size_t)i * ldc;
            int j = 0;
            for (; j + 4 <= N; j += 4) {
                const double *b0 = B + (size_t)j * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
                v4d s0 = {0, 0, 0, 0}, s1 = s0, s2 = s0, s3 = s0; /* lane q: the partial sum q */
                int k = 0;
                for (; k + 4 <= K; k += 4) {
                    v4d x, y0, y1, y2, y3;
                    V4D_LOAD(x, a + k);
                    V4D_LOAD(y0, b0 + k);
                    V4D_LOAD(y1, b1 + k);
                    V4D_LOAD(y2, b2 + k);
                    V4D_LOAD(y3, b3 + k);
                    s0 += x * y0;
                    s1 += x * y1;
                    s2 += x * y2;
                    s3 += x * y3;
                }
                for (; k < K; k++) {
                    s0[0] += a[k] * b0[k];
                    s1[0] += a[k] * b1[k];
                    s2[0] += a[k] * b2[k];
                    s3[0] += a[k] * b3[k];
                }
                c[j] += (s0[0] + s0[1]) + (s0[2] + s0[3]);
                c[j + 1] += (s1[0] + s1[1]) + (s1[2] + s1[3]);
                c[j + 2] += (s2[0] + s2[1]) + (s2[2] + s2[3]);
                c[j + 3] += (s3[0] + s3[1]) + (s3[2] + s3[3]);
            }
            for (; j < N; j++) {
                const double *b = B + (size_t)j * ldb;
                double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                int k = 0;
                for (; k + 4 <= K; k += 4) {
                    s0 += a[k] * b[k];
                    s1 += a[k + 1] * b[k + 1];
                    s2 += a[k + 2] * b[k + 2];
                    s3 += a[k + 3] * b[k + 3];
                }
                for (; k < K; k++) s0 += a[k] * b[k];
                c[j] += (s0 + s1) + (s2 + s3);
            }
        }
    } else if (!ta && !tb) { /* C += A B: rows of B scaled */
        /* c[j] takes the products of rows k = 0, 1, ... in order, a zero
         * x skipped; four rows at a time while c[j] stays in a register
         * (same additions in the same order as one row at a time). */
        for (int i = 0; i < M; i++) {
            const double *a = A + (size_t)i * lda;
            double *c = C + (size_t)i * ldc;
            int k = 0;
            for (; k + 4 <= K; k += 4) {
                const double x0 = a[k], x1 = a[k + 1], x2 = a[k + 2], x3 = a[k + 3];
                const double *b0 = B + (size_t)k * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
                if (x0 != 0.0 && x1 != 0.0 && x2 != 0.0 && x3 != 0.0) {
                    for (int j = 0; j < N; j++) {
                        double v = c[j];
                        v += x0 * b0[j];
                        v += x1 * b1[j];
                        v += x2 * b2[j];
                        v += x3 * b3[j];
                        c[j] = v;
                    }
                } else {
                    for (int q = 0; q < 4; q++) {
                        const double x = a[k + q], *b = B + (size_t)(k + q) * ldb;
                        if (x != 0.0)
                            for (int j = 0; j < N; j++) c[j] += x * b[j];
                    }
                }
            }
            for (; k < K; k++) {
                const double x = a[k], *b = B + (size_t)k * ldb;
                if (x != 0.0)
                    for (int j = 0; j < N; j++) c[j] += x * b[j];
            }
        }
    } else if (ta && !tb) { /* C += A^T B: A is (K,M) */
        for (int k = 0; k < K; k++) {
            const double *a = A + (size_t)k * lda, *b = B + (size_t)k * ldb;
            for (int i = 0; i < M; i++) {
                const double x = a[i];
                double *c = C + (size_t)i * ldc;
                if (x != 0.0)
                    for (int j = 0; j < N; j++) c[j] += x * b[j];
            }
        }
    } else { /* C += A^T B^T (unused by the layers) */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int k = 0; k < K; k++) s += A[(size_t)k * lda + i] * B[(size_t)j * ldb + k];
                C[(size_t)i * ldc + j] += s;
            }
    }
}

/* cblas_dgemm with alpha = 1, or the loops on a thread that asked for them. */
static void gemm(int ta, int tb, int M, int N, int K, const double *A, int lda, const double *B, int ldb, double beta,
                 double *C, int ldc) {
    if (g_loops) {
        gemm_loops(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0, A, lda,
                B, ldb, beta, C, ldc);
}

void linear_forward(double *out, const double *inp, const double *W, const double *b, int B, int I, int O) {
    double beta = 0.0;
    if (b) {
        for (int r = 0; r < B; r++) memcpy(out + (size_t)r * O, b, sizeof *b * (size_t)O);
        beta = 1.0;
    }
    gemm(0, 1, B, O, I, inp, I, W, I, beta, out, O);
}

void linear_backward(double *dinp, double *dW, double *db, const double *dout, const double *inp,
                     const double *W, int B, int I, int O) {
    if (dinp) gemm(0, 0, B, I, O, dout, O, W, I, 0.0, dinp, I);
    if (dW) gemm(1, 0, O, I, B, dout, O, inp, I, 1.0, dW, I);
    if (db)
        for (int r = 0; r < B; r++)
            for (int o = 0; o < O; o++) db[o] += dout[(size_t)r * O + o];
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
__attribute__((optimize("O3"), target_clones("avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static void dw_steps_loops(double *dW, const double *dout, const double *inp, int S, int B, int I, int O, int ldi) {
    /* one row of dW at a time, kept in cache over every step; per element
     * the products are added in the order of the per-step calls */
    for (int o = 0; o < O; o++) {
        double *c = dW + (size_t)o * I;
        for (int s = S - 1; s >= 0; s--)
            for (int r = 0; r < B; r++) {
                const size_t row = (size_t)s * B + r;
                const double x = dout[row * O + o], *b = inp + row * ldi;
                if (x != 0.0)
                    for (int j = 0; j < I; j++) c[j] += x * b[j];
            }
    }
}

void linear_backward_dw_steps(double *dW, const double *dout, const double *inp, int S, int B, int I, int O,
                              int ldi) {
    if (g_loops) {
        dw_steps_loops(dW, dout, inp, S, B, I, O, ldi);
        return;
    }
    for (int s = S - 1; s >= 0; s--)
        gemm(1, 0, O, I, B, dout + (size_t)s * B * O, O, inp + (size_t)s * B * ldi, ldi, 1.0, dW, I);
}

void lstm_forward(double *h, double *c, double *gates, double *tanh_c, const double *xh, const double *c_prev,
                  const double *W, const double *b, int B, int XH, int H) {
    linear_forward(gates, xh, W, b, B, XH, 4 * H);
    for (int r = 0; r < B; r++) {
        double *z = gates + (size_t)r * 4 * H;
        for (int j = 0; j < H; j++) {
            double i = sigmoid(z[j]), f = sigmoid(z[H + j]), g = tanh(z[2 * H + j]), o = sigmoid(z[3 * H + j]);
            z[j] = i; z[H + j] = f; z[2 * H + j] = g; z[3 * H + j] = o;
            double cc = f * c_prev[(size_t)r * H + j] + i * g;
            double tc = tanh(cc);
            c[(size_t)r * H + j] = cc;
            tanh_c[(size_t)r * H + j] = tc;
            h[(size_t)r * H + j] = o * tc;
        }
    }
}

void lstm_backward(double *dxh, double *dc_prev, double *dW, double *db, double *dz, const double *dh,
                   const double *dc, const double *gates, const double *tanh_c, const double *c_prev,
                   const double *xh, const double *W, int B, int XH, int H) {
    for (int r = 0; r < B; r++) {
        const double *z = gates + (size_t)r * 4 * H;
        double *d = dz + (size_t)r * 4 * H;
        for (int j = 0; j < H; j++) {
            size_t k = (size_t)r * H + j;
            double i = z[j], f = z[H + j], g = z[2 * H + j], o = z[3 * H + j];
            double tc = tanh_c[k];
            double dct = dh[k] * o * (1.0 - tc * tc) + (dc ? dc[k] : 0.0);
            d[j] = dct * g * i * (1.0 - i);
            d[H + j] = dct * c_prev[k] * f * (1.0 - f);
            d[2 * H + j] = dct * i * (1.0 - g * g);
            d[3 * H + j] = dh[k] * tc * o * (1.0 - o);
            dc_prev[k] = dct * f;
        }
    }
    linear_backward(dxh, dW, db, dz, xh, W, B, XH, 4 * H);
}

/* u = tanh(q + k) over n entries: the loop the vectoriser gets (tanh_fast) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
__attribute__((optimize("O3"), target_clones("avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
static void tanh_sum(double *restrict u, const double *restrict q, const double *restrict k, int n) {
    for (int a = 0; a < n; a++) u[a] = tanh_fast(q[a] + k[a]);
}

void attention_forward(double *ctx, double *alpha, double *u, double *q, const double *h, const double *E,
                       const double *K, const double *Wq, const double *v, int B, int T, int H, int A) {
    linear_forward(q, h, Wq, NULL, B, H, A);
    for (int r = 0; r < B; r++) {
        double *al = alpha + (size_t)r * T;
        double mx = -INFINITY;
        for (int j = 0; j < T; j++) {
            double *uu = u + ((size_t)r * T + j) * A;
            double s = 0.0;
            tanh_sum(uu, q + (size_t)r * A, K + (size_t)j * A, A);
            for (int a = 0; a < A; a++) s += v[a] * uu[a];
            al[j] = s;
            if (s > mx) mx = s;
        }
        double sum = 0.0;
        for (int j = 0; j < T; j++) sum += (al[j] = exp(al[j] - mx));
        for (int j = 0; j < T; j++) al[j] /= sum;
    }
    /* ctx (B,H) = alpha (B,T) @ E (T,H) */
    gemm(0, 0, B, H, T, alpha, T, E, H, 0.0, ctx, H);
}

void attention_backward(double *dh, double *dE, double *dK, double *dWq, double *dv, double *scratch,
                        const double *dctx, const double *alpha, const double *u, const double *h,
                        const double *E, const double *Wq, const double *v, int B, int T, int H, int A) {
    double *dalpha = scratch;           /* (B,T) */
    double *dq = scratch + (size_t)B * T; /* (B,A) */
    /* dalpha (B,T) = dctx (B,H) @ E^T;  dE (T,H) += alpha^T @ dctx */
    gemm(0, 1, B, T, H, dctx, H, E, H, 0.0, dalpha, T);
    gemm(1, 0, T, H, B, alpha, T, dctx, H, 1.0, dE, H);
    memset(dq, 0, sizeof *dq * (size_t)B * A);
    for (int r = 0; r < B; r++) {
        const double *al = alpha + (size_t)r * T;
        double *da = dalpha + (size_t)r * T;
        double dot = 0.0;
        for (int j = 0; j < T; j++) dot += al[j] * da[j];
        for (int j = 0; j < T; j++) {
            double ds = al[j] * (da[j] - dot);
            const double *uu = u + ((size_t)r * T + j) * A;
            for (int a = 0; a < A; a++) {
                dv[a] += ds * uu[a];
                double dpre = ds * v[a] * (1.0 - uu[a] * uu[a]);
                dq[(size_t)r * A + a] += dpre;
                dK[(size_t)j * A + a] += dpre;
            }
        }
    }
    linear_backward(dh, dWq, NULL, dq, h, Wq, B, H, A);
}

void softmax_forward(double *probs, const double *logits, int B, int D) {
    for (int r = 0; r < B; r++) {
        const double *z = logits + (size_t)r * D;
        double *p = probs + (size_t)r * D;
        double mx = z[0];
        for (int d = 1; d < D; d++) if (z[d] > mx) mx = z[d];
        double sum = 0.0;
        for (int d = 0; d < D; d++) sum += (p[d] = exp(z[d] - mx));
        for (int d = 0; d < D; d++) p[d] /= sum;
    }
}

double policy_loss_backward(double *dlogits, const double *probs, const int *a, const double *w, double beta,
                            double scale, int B, int D) {
    double loss = 0.0;
    for (int r = 0; r < B; r++) {
        const double *p = probs + (size_t)r * D;
        double *dz = dlogits + (size_t)r * D;
        double ent = 0.0;
        for (int d = 0; d < D; d++) ent -= p[d] > 0 ? p[d] * log(p[d]) : 0.0;
        double pa = p[a[r]] > 1e-300 ? p[a[r]] : 1e-300;
        loss += scale * (-w[r] * log(pa) - beta * ent);
        for (int d = 0; d < D; d++) {
            double lp = p[d] > 1e-300 ? log(p[d]) : log(1e-300);
            /* d(-w log p_a)/dz_d = w (p_d - [d==a]);  d(-beta H)/dz_d = beta p_d (log p_d + H) */
            dz[d] = scale * (w[r] * (p[d] - (d == a[r] ? 1.0 : 0.0)) + beta * p[d] * (lp + ent));
        }
    }
    return loss;
}
