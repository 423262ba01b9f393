/*
 * loss_variants.cu: the TF32 mode's loss kernels (hw/kernels/loss32.h) on the 49M
 * GPT's logits (4,096 rows of 50,304: 823 MB), each timed alone, in place as
 * the engine runs them, and checked.
 *
 * Timing: per variant, REPS (20) cudaEvent-timed launches after 3 untimed;
 * before each, the logits are restored from a pristine copy (a device copy
 * of 823 MB, so the logits' last tens of MB are in L2, as after the head's
 * GEMM), median in us and the bandwidth of one read and one write of the
 * logits. A copy of the same bytes (cudaMemcpyAsync) is timed the same way:
 * the floor. Rounds (--rounds, 2) repeat the whole list.
 * Check: every variant's losses and dlogits against a double-precision
 * reference of the same math on the host, on 16 rows (relative error of the
 * loss, absolute of dlogits scaled by 1 / inv_norm), and its loss sum;
 * "FAIL" lines and exit 1 when an error passes 1e-4 (__expf's error and fp32
 * sums over 50,257 terms are ~1e-6).
 *
 *   loss_variants [--reps N] [--rounds R]
 * Output: "loss variant us GB/s", "copy us GB/s", "check variant ..." lines.
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_check.h"
#include "loss32.h"

__global__ void fill_logits_k(float *x, int64_t rows, int V, int Vp, unsigned seed) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= rows * Vp) return;
    int col = (int)(i % Vp);
    unsigned v = (unsigned)(i * 2654435761u) ^ seed;
    v ^= v >> 16;
    v *= 0x7feb352du;
    v ^= v >> 15;
    /* logits of a half-trained model: spread over ~[-6, 6]; padding 0 (the engine's padding rows of w are 0) */
    x[i] = col < V ? ((float)(v & 0xffffff) / 8388608.0f - 1.0f) * 6.0f : 0.0f;
}

static double median(std::vector<float> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
}

int main(int argc, char **argv) {
    int reps = 20, rounds = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: loss_variants [--reps N] [--rounds R]\n");
            return 2;
        }
    }
    if (reps < 1 || rounds < 1) {
        fprintf(stderr, "loss_variants: --reps and --rounds must be >= 1\n");
        return 2;
    }
    const int N = 4096, V = 50257, Vp = 50304;
    const float inv_norm = 1.0f / N;
    const size_t bytes = (size_t)N * Vp * sizeof(float);
    int dev = 0, optin = 0, n_sm = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    cudaCheck(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev));
    const int smem_max = optin - 1024;
    cudaCheck(cu_loss32_setup(smem_max));
    float *pristine, *work, *losses;
    int *targets;
    double *loss_sum;
    cudaCheck(cudaMalloc(&pristine, bytes));
    cudaCheck(cudaMalloc(&work, bytes));
    cudaCheck(cudaMalloc(&losses, N * sizeof(float)));
    cudaCheck(cudaMalloc(&targets, N * sizeof(int)));
    cudaCheck(cudaMalloc(&loss_sum, sizeof(double)));
    fill_logits_k<<<(unsigned)(((int64_t)N * Vp + 255) / 256), 256>>>(pristine, N, V, Vp, 12345u);
    cudaCheck(cudaGetLastError());
    std::vector<int> tgt(N);
    for (int r = 0; r < N; r++) tgt[r] = (int)(((unsigned)r * 2246822519u + 7u) % (unsigned)V);
    tgt[0] = 0;         /* the first and last real columns */
    tgt[1] = V - 1;
    cudaCheck(cudaMemcpy(targets, tgt.data(), N * sizeof(int), cudaMemcpyHostToDevice));

    /* the reference of 16 rows, in double */
    const int check_rows[16] = {0, 1, 2, 3, 131, 132, 133, 1000, 2047, 2048, 3000, 4000, 4093, 4094, 4095, 777};
    std::vector<float> host((size_t)Vp);
    std::vector<double> ref_loss(16), ref_d((size_t)16 * Vp);
    for (int k = 0; k < 16; k++) {
        const int r = check_rows[k];
        cudaCheck(cudaMemcpy(host.data(), pristine + (size_t)r * Vp, Vp * sizeof(float), cudaMemcpyDeviceToHost));
        double M = -INFINITY, S = 0.0;
        for (int j = 0; j < V; j++) M = std::max(M, (double)host[j]);
        for (int j = 0; j < V; j++) S += exp((double)host[j] - M);
        ref_loss[k] = log(S) + M - host[tgt[r]];
        for (int j = 0; j < Vp; j++)
            ref_d[(size_t)k * Vp + j] = j < V ? (exp((double)host[j] - M) / S - (j == tgt[r] ? 1.0 : 0.0)) : 0.0;
    }

    cudaStream_t s;
    cudaCheck(cudaStreamCreate(&s));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    int fails = 0;
    const double gb = 2.0 * (double)bytes / 1e9;
    for (int round = 0; round < rounds; round++) {
        for (int v = LOSS32_OFF; v < LOSS32_N; v++) { /* LOSS32_OFF: the copy */
            if (v != LOSS32_OFF && !cu_loss32_fits(v, Vp, smem_max)) {
                printf("loss %s does not fit (smem)\n", cu_loss32_name(v));
                continue;
            }
            std::vector<float> t;
            for (int rep = 0; rep < reps + 3; rep++) {
                cudaCheck(cudaMemcpyAsync(work, pristine, bytes, cudaMemcpyDeviceToDevice, s));
                cudaCheck(cudaMemsetAsync(loss_sum, 0, sizeof(double), s));
                cudaCheck(cudaEventRecord(e0, s));
                if (v == LOSS32_OFF)
                    cudaCheck(cudaMemcpyAsync(work, pristine, bytes, cudaMemcpyDeviceToDevice, s));
                else
                    cudaCheck(cu_loss32_launch(v, s, n_sm, losses, work, loss_sum, work, targets, inv_norm, N, V, Vp));
                cudaCheck(cudaEventRecord(e1, s));
                cudaCheck(cudaEventSynchronize(e1));
                float ms = 0;
                cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
                if (rep >= 3) t.push_back(ms * 1000.0f);
            }
            const double us = median(t);
            printf("%s %s %.1f us %.0f GB/s\n", v == LOSS32_OFF ? "copy" : "loss",
                   v == LOSS32_OFF ? "d2d" : cu_loss32_name(v), us, gb / (us * 1e-6));
            if (v == LOSS32_OFF || round > 0) continue;
            /* check the last run's output */
            std::vector<float> l(N);
            double sum = 0.0, want_sum = 0.0;
            cudaCheck(cudaMemcpy(l.data(), losses, N * sizeof(float), cudaMemcpyDeviceToHost));
            cudaCheck(cudaMemcpy(&sum, loss_sum, sizeof(double), cudaMemcpyDeviceToHost));
            for (int r = 0; r < N; r++) want_sum += l[r];
            double el = 0.0, ed = 0.0;
            for (int k = 0; k < 16; k++) {
                const int r = check_rows[k];
                el = std::max(el, fabs(l[r] - ref_loss[k]) / fabs(ref_loss[k]));
                cudaCheck(cudaMemcpy(host.data(), work + (size_t)r * Vp, Vp * sizeof(float), cudaMemcpyDeviceToHost));
                for (int j = 0; j < Vp; j++) ed = std::max(ed, fabs(host[j] / inv_norm - ref_d[(size_t)k * Vp + j]));
            }
            const double es = fabs(sum - want_sum) / fabs(want_sum);
            const int bad = !(el <= 1e-4 && ed <= 1e-4 && es <= 1e-6);
            fails += bad;
            printf("check %s loss rel %.2e dlogits abs %.2e loss_sum rel %.2e %s\n", cu_loss32_name(v), el, ed, es,
                   bad ? "FAIL" : "ok");
        }
    }
    return fails ? 1 : 0;
}
