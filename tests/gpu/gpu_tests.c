/*
 * gpu_tests.c: the engine's GPU test suite, run on the device machine
 * (tests/gpu/run.sh). CI has no GPU; the same executor logic is tested there
 * through the CPU backend (tests/hw).
 *
 *   gpu_tests kernels [strict|tf32|bf16]  every node kind's CUDA forward/backward
 *                                     against the CPU reference, per tensor
 *                                     (bf16: against its bf16 reference)
 *   gpu_tests step [strict|tf32|bf16] one whole training step, engine on a GPU
 *                                     against the engine on the CPU backend:
 *                                     loss, every gradient, params after AdamW
 *                                     (bf16: also against the fp32 engine)
 *   gpu_tests train [STEPS]           STEPS (200) steps on a Markov-chain token
 *                                     stream, bf16 against fp32
 *   gpu_tests invariance              random placements on 2 GPUs (and logical
 *                                     devices sharing a GPU) against 1 GPU
 *   gpu_tests oom [N]                 N consecutive OOM placements; free device
 *                                     memory must come back to where it started
 *   gpu_tests graphs                  steps replayed as CUDA graphs (1 GPU, and 2 GPUs
 *                                     with one host thread each) against the same
 *                                     steps issued op by op
 *   gpu_tests sanitize [bf16|hs64]    a short multi-device run for compute-sanitizer
 *                                     (TF32 at hs 32 and 64; bf16; TF32 at hs 64 only)
 *
 * Error measure: ||gpu - cpu|| / ||cpu|| over a tensor (normwise relative),
 * NaN counting as infinite. Tolerances, and why:
 *   strict fp32   2e-5. cuBLAS accumulates K <= 512 products in fp32: the
 *                 typical (random-walk) error is sqrt(K) * 2^-24 ~ 1.4e-6 per
 *                 GEMM, the reference accumulates in double; attention chains
 *                 four GEMMs. 2e-5 is ~7x the typical error of such a chain.
 *   TF32          1e-2 for tensors that pass through a GEMM. TF32 rounds both
 *                 operands to a 10-bit mantissa (2^-11 ~ 4.9e-4 relative), so
 *                 one GEMM's output errs by ~5e-4..1e-3 normwise; a chain of
 *                 four (attention) ~2e-3; 1e-2 leaves 5x. Tensors that no GEMM
 *                 touches (embedding, layernorm, residual, loss, AdamW) keep
 *                 the fp32 tolerance.
 *   whole step    gradients chain ~20 GEMMs deep through 2 layers and the head:
 *                 strict 1e-4 (5x of 20 chained 1e-6 errors), TF32 3e-2.
 *                 After AdamW's first step each parameter moved by
 *                 lr * g/(|g|+eps), about +-lr: a differently rounded gradient
 *                 can only flip the elements whose |g| is near its rounding
 *                 error, so we bound the fraction of parameters whose update
 *                 differs by more than lr/10: strict 1e-4, TF32 2e-2.
 *   invariance    same kernels and shapes on every device; only atomics
 *                 (embedding, layernorm and bias gradients, the loss sum) add
 *                 in a different order: gradients 1e-5 normwise, loss 1e-6
 *                 relative, flipped updates 1e-4.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw.h"
#include "param_memory.h"
#include "nodes.h"
#include "placement.h"
#include "util.h"

static int n_pass, n_fail;
static int n_gpus; /* GPUs visible: the parts that need two skip, one line each, on one */

static void skip(const char *what) {
    printf("SKIP %-58s needs 2 GPUs, this machine has %d\n", what, n_gpus);
    fflush(stdout);
}

static void report(const char *what, double err, double tol) {
    int ok = err <= tol; /* NaN fails */
    if (ok) n_pass++;
    else n_fail++;
    printf("%s %-58s err %.3e  tol %.1e\n", ok ? "PASS" : "FAIL", what, err, tol);
    fflush(stdout);
}

static void check(const char *what, int ok, const char *detail) {
    if (ok) n_pass++;
    else n_fail++;
    printf("%s %-58s %s\n", ok ? "PASS" : "FAIL", what, detail ? detail : "");
    fflush(stdout);
}

static double relerr(const float *a, const float *ref, int64_t n) {
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#define SMALL_CFG "default,vocab=512,d_model=128,heads=4,layers=2,seq=64,batch=8"
#define MID_CFG "default,vocab=2048,d_model=128,heads=4,layers=2,seq=64,batch=8"
/* head size 64, which the flash attention kernel takes (32 above does not:
 * the bf16 attention then runs unfused, and the bf16 tests cover both) */
#define FLASH_CFG "default,vocab=512,d_model=128,heads=2,layers=2,seq=64,batch=8"
#define FLASH_MID_CFG "default,vocab=2048,d_model=128,heads=2,layers=2,seq=64,batch=8"
/* the TF32 flash kernel over several 64-row tiles, T not a multiple of 64
 * (the causal skip, the running max across key blocks, the masked last
 * tile), hs 64 and hs 128 */
#define FLASH_T_CFG "default,vocab=512,d_model=128,heads=2,layers=2,seq=200,batch=4"
#define FLASH_128_CFG "default,vocab=512,d_model=256,heads=2,layers=2,seq=136,batch=2"
/* a vocabulary whose padded row (40,064 floats: 10,016 vectors) is more than
 * the one-pass TF32 loss keeps in registers (8 or 12 x 1,024 vectors), and
 * not a multiple of 4 (the masked last real vector, then padding) */
#define VOCAB_CFG "default,vocab=40001,d_model=128,heads=2,layers=2,seq=64,batch=4"

static graph *make_graph(const char *text) {
    gpt_config cfg;
    char msg[256];
    graph *g = NULL;
    if (gpt_config_parse(text, &cfg, msg, sizeof msg) != PL_OK || graph_build_gpt(&cfg, &g, msg, sizeof msg) != PL_OK) {
        fprintf(stderr, "config %s: %s\n", text, msg);
        exit(2);
    }
    return g;
}

/* ---------------- kernels ---------------- */

/* A bump allocator over one device allocation of the CUDA backend. */
typedef struct {
    hw_backend *be;
    char *base;
    int64_t used, cap;
} dmem;

static float *dalloc(dmem *m, int64_t floats) {
    int64_t bytes = (floats * 4 + 255) / 256 * 256;
    if (m->used + bytes > m->cap) {
        fprintf(stderr, "test arena too small\n");
        exit(2);
    }
    float *p = (float *)(m->base + m->used);
    m->used += bytes;
    return p;
}

static void up(dmem *m, void *d, const void *h, int64_t bytes) {
    if (m->be->ops->upload(m->be, 0, d, h, bytes) != PL_OK) {
        fprintf(stderr, "upload: %s\n", m->be->err);
        exit(1);
    }
}

static void down(dmem *m, void *h, const void *d, int64_t bytes) {
    if (m->be->ops->download(m->be, 0, h, d, bytes) != PL_OK) {
        fprintf(stderr, "download: %s\n", m->be->err);
        exit(1);
    }
}

static float *hrandn(pl_rng *r, int64_t n, double mean, double std) {
    float *x = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) x[i] = (float)(mean + std * pl_rng_normal(r));
    return x;
}

/* Host and device copies of one tensor. */
typedef struct {
    float *h, *d;
    int64_t n;
} pair;

static pair mkpair(dmem *m, pl_rng *r, int64_t n, double mean, double std) {
    pair p = {hrandn(r, n, mean, std), dalloc(m, n > 0 ? n : 1), n};
    if (n > 0) up(m, p.d, p.h, n * 4);
    return p;
}

static double cmp_pair(dmem *m, const pair *p, int64_t n) {
    float *tmp = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    down(m, tmp, p->d, n * 4);
    double e = relerr(tmp, p->h, n);
    free(tmp);
    return e;
}

/* cfgtext: SMALL_CFG (hs 32: the unfused attention in every mode) or, in
 * TF32, FLASH_CFG (hs 64: the TF32 flash kernel). With the flash kernel the
 * GPU's attention saves other tensors than the CPU's (qkv with its bias and
 * the rows' log-sum-exp instead of the permuted q, k, v and the T x T
 * probabilities), so, as in the bf16 test, each side then runs its backward
 * from its own saved tensors and only y (saved slot 2) is compared; the TF32
 * tolerance 1e-2 holds for the fused core as for the unfused one: the same
 * four products with TF32 inputs (P and dS rounded to TF32 like any GEMM
 * input), fp32 sums and an fp32 softmax. */
static void test_kernels(int strict, const char *cfgtext, const char *mode) {
    char msg[256];
    hw_backend *cpu = NULL, *gpu = NULL;
    int gpus[1] = {0};
    if (hw_backend_cpu_create(1, &cpu, msg, sizeof msg) != PL_OK ||
        hw_backend_cuda_create(gpus, 1, strict, &gpu, msg, sizeof msg) != PL_OK) {
        fprintf(stderr, "backend: %s\n", msg);
        exit(1);
    }
    dmem m = {gpu, NULL, 0, 256LL << 20};
    void *base = NULL;
    if (gpu->ops->mem_alloc(gpu, 0, m.cap, &base) != PL_OK) {
        fprintf(stderr, "alloc: %s\n", gpu->err);
        exit(1);
    }
    m.base = base;
    float *ws = dalloc(&m, gpu->ops->workspace_bytes / 4);
    if (gpu->ops->set_workspace(gpu, 0, ws, gpu->ops->workspace_bytes) != PL_OK) {
        fprintf(stderr, "workspace: %s\n", gpu->err);
        exit(1);
    }
    graph *g = make_graph(cfgtext);
    const gpt_config *cfg = &g->cfg;
    const int B = cfg->batch, T = cfg->seq_len, C = cfg->d_model, V = cfg->vocab, Vp = hw_padded_vocab(V);
    const int N = B * T, hs = C / cfg->n_heads;
    const double tol32 = 2e-5, tolmm = strict ? 2e-5 : 1e-2;
    pl_rng r;
    pl_rng_seed(&r, 42);
    int *tok_h = malloc(sizeof(int) * N), *tgt_h = malloc(sizeof(int) * N);
    for (int i = 0; i < N; i++) {
        tok_h[i] = pl_rng_int(&r, V);
        tgt_h[i] = pl_rng_int(&r, V);
    }
    int *tok_d = (int *)dalloc(&m, N), *tgt_d = (int *)dalloc(&m, N);
    up(&m, tok_d, tok_h, N * 4);
    up(&m, tgt_d, tgt_h, N * 4);
    const int nodes[] = {0, 1, 2, 3, 5, g->n_nodes - 2, g->n_nodes - 1};
    for (size_t q = 0; q < sizeof nodes / sizeof nodes[0]; q++) {
        int ni = nodes[q];
        const graph_node *nd = &g->nodes[ni];
        hw_param_map pl;
        hw_node_mem mem;
        hw_node_param_map(g, ni, &pl);
        hw_node_mem_floats(g, ni, B, &mem);
        size_t mark = (size_t)m.used;
        /* parameters: weights N(0, 0.1), layernorm weights N(1, 0.1) */
        pair prm = mkpair(&m, &r, pl.floats, nd->kind == OP_LAYERNORM ? 1.0 : 0.0, 0.1);
        if (nd->kind == OP_LAYERNORM) {
            for (int64_t i = 0; i < pl.size[1]; i++) prm.h[pl.off[1] + i] -= 1.0f;
            up(&m, prm.d, prm.h, pl.floats * 4);
        }
        if (nd->kind == OP_HEAD) { /* the padding rows of the head are zero in the engine */
            for (int64_t i = (int64_t)V * C; i < pl.floats; i++) prm.h[i] = 0.0f;
            up(&m, prm.d, prm.h, pl.floats * 4);
        }
        int64_t in_n = nd->kind == OP_LOSS ? (int64_t)N * Vp : (int64_t)N * C;
        pair in0 = mkpair(&m, &r, in_n, 0.0, nd->kind == OP_LOSS ? 2.0 : 1.0);
        pair in1 = mkpair(&m, &r, in_n, 0.0, 1.0);
        pair out = mkpair(&m, &r, mem.out, 0.0, 1.0);
        pair saved = mkpair(&m, &r, mem.saved, 0.0, 1.0);
        int64_t scr = mem.fwd_scratch > mem.bwd_scratch ? mem.fwd_scratch : mem.bwd_scratch;
        float *scr_h = malloc(sizeof(float) * (size_t)(scr > 0 ? scr : 1));
        float *scr_d = dalloc(&m, scr > 0 ? scr : 1);
        double *lsum_d = (double *)dalloc(&m, 2);
        double lsum_h = 0.0, zero = 0.0;
        up(&m, lsum_d, &zero, 8);
        hw_node_call ch, cd;
        memset(&ch, 0, sizeof ch);
        ch.kind = nd->kind;
        ch.d = (hw_dims){B, T, C, cfg->n_heads, V, Vp};
        ch.pl = pl;
        ch.mem = mem;
        ch.inv_norm = 1.0f / (4.0f * N);
        cd = ch;
        ch.in[0] = in0.h; ch.in[1] = in1.h; ch.tokens = tok_h; ch.targets = tgt_h; ch.params = prm.h;
        ch.out = out.h; ch.saved = saved.h; ch.scratch = scr_h; ch.loss_sum = &lsum_h;
        cd.in[0] = in0.d; cd.in[1] = in1.d; cd.tokens = tok_d; cd.targets = tgt_d; cd.params = prm.d;
        cd.out = out.d; cd.saved = saved.d; cd.scratch = scr_d; cd.loss_sum = lsum_d;
        pair dl = {0};
        if (nd->kind == OP_LOSS) {
            dl = mkpair(&m, &r, in_n, 0.0, 1.0);
            ch.din[0] = dl.h;
            cd.din[0] = dl.d;
        }
        pl_status s1 = cpu->ops->node_forward(cpu, 0, &ch), s2 = gpu->ops->node_forward(gpu, 0, &cd);
        if (s1 != PL_OK || s2 != PL_OK) {
            fprintf(stderr, "%s forward: %s\n", nd->name, gpu->err);
            exit(1);
        }
        char what[128];
        int mm = nd->kind == OP_ATTENTION || nd->kind == OP_MLP || nd->kind == OP_HEAD;
        double tol = mm ? tolmm : tol32;
        if (nd->kind == OP_HEAD) {
            /* compare the V valid columns of each row */
            float *t = malloc(sizeof(float) * (size_t)mem.out);
            down(&m, t, out.d, mem.out * 4);
            float *a = malloc(sizeof(float) * (size_t)N * V), *b = malloc(sizeof(float) * (size_t)N * V);
            for (int n = 0; n < N; n++) {
                memcpy(a + (int64_t)n * V, t + (int64_t)n * Vp, sizeof(float) * V);
                memcpy(b + (int64_t)n * V, out.h + (int64_t)n * Vp, sizeof(float) * V);
            }
            snprintf(what, sizeof what, "[%s] %s forward out", mode, nd->name);
            report(what, relerr(a, b, (int64_t)N * V), tol);
            free(t); free(a); free(b);
        } else {
            snprintf(what, sizeof what, "[%s] %s forward out", mode, nd->name);
            report(what, cmp_pair(&m, &out, mem.out), tol);
        }
        /* the TF32 flash attention keeps its own saved tensors (above) */
        const int own_saved = !strict && nd->kind == OP_ATTENTION && (hs == 64 || hs == 128);
        for (int k = 0; k < mem.n_saved; k++) {
            if (own_saved && k != 2) continue;
            float *t = malloc(sizeof(float) * (size_t)mem.saved_size[k]);
            down(&m, t, saved.d + mem.saved_off[k], mem.saved_size[k] * 4);
            snprintf(what, sizeof what, "[%s] %s forward saved[%d]", mode, nd->name, k);
            /* qkvr passes one GEMM; att and y two and three; layernorm's none */
            report(what, relerr(t, saved.h + mem.saved_off[k], mem.saved_size[k]), tol);
            free(t);
        }
        if (nd->kind == OP_LOSS) {
            snprintf(what, sizeof what, "[%s] loss dlogits (padding included)", mode);
            report(what, cmp_pair(&m, &dl, in_n), tol32);
            double lg = 0.0;
            down(&m, &lg, lsum_d, 8);
            snprintf(what, sizeof what, "[%s] loss sum", mode);
            report(what, fabs(lg - lsum_h) / fabs(lsum_h), tol32);
        } else {
            /* backward from the CPU's saved tensors (from its own with the
             * flash kernel), with random dout, into pre-filled gradients: din
             * with acc = 1 and parameter grads (+=) */
            if (!own_saved) up(&m, saved.d, saved.h, mem.saved * 4);
            pair dout = mkpair(&m, &r, mem.out, 0.0, 1.0);
            if (nd->kind == OP_HEAD) { /* the loss writes zeros into dlogits' padding columns */
                for (int n = 0; n < N; n++)
                    for (int v = V; v < Vp; v++) dout.h[(int64_t)n * Vp + v] = 0.0f;
                up(&m, dout.d, dout.h, mem.out * 4);
            }
            pair din0 = mkpair(&m, &r, in_n, 0.0, 1.0), din1 = mkpair(&m, &r, in_n, 0.0, 1.0);
            pair grads = mkpair(&m, &r, pl.floats, 0.0, 1.0);
            ch.dout = dout.h; ch.din[0] = din0.h; ch.din[1] = din1.h; ch.grads = grads.h;
            cd.dout = dout.d; cd.din[0] = din0.d; cd.din[1] = din1.d; cd.grads = grads.d;
            ch.acc[0] = cd.acc[0] = 1;
            ch.acc[1] = cd.acc[1] = 0;
            s1 = cpu->ops->node_backward(cpu, 0, &ch);
            s2 = gpu->ops->node_backward(gpu, 0, &cd);
            if (s1 != PL_OK || s2 != PL_OK) {
                fprintf(stderr, "%s backward: %s\n", nd->name, gpu->err);
                exit(1);
            }
            for (int k = 0; k < nd->n_inputs; k++) {
                snprintf(what, sizeof what, "[%s] %s backward din[%d] (acc=%d)", mode, nd->name, k, k == 0);
                report(what, cmp_pair(&m, k ? &din1 : &din0, in_n), tol);
            }
            for (int k = 0; k < pl.n; k++) {
                float *t = malloc(sizeof(float) * (size_t)pl.size[k]);
                down(&m, t, grads.d + pl.off[k], pl.size[k] * 4);
                snprintf(what, sizeof what, "[%s] %s backward dparam[%d] (+=)", mode, nd->name, k);
                report(what, relerr(t, grads.h + pl.off[k], pl.size[k]), tol);
                free(t);
            }
            free(dout.h); free(din0.h); free(din1.h); free(grads.h);
        }
        free(prm.h); free(in0.h); free(in1.h); free(out.h); free(saved.h); free(scr_h); free(dl.h);
        m.used = (int64_t)mark;
    }
    /* AdamW (step 3, so the bias corrections matter) and add */
    {
        const int64_t n = 1 << 20;
        pair p = mkpair(&m, &r, n, 0, 1), gg = mkpair(&m, &r, n, 0, 1), mo = mkpair(&m, &r, n, 0, 0.1);
        pair v = mkpair(&m, &r, n, 0, 0.1);
        for (int64_t i = 0; i < n; i++) v.h[i] = fabsf(v.h[i]);
        up(&m, v.d, v.h, n * 4);
        hw_adamw_args a = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, NULL, NULL};
        cpu->ops->adamw(cpu, 0, p.h, gg.h, mo.h, v.h, n, &a);
        if (gpu->ops->adamw(gpu, 0, p.d, gg.d, mo.d, v.d, n, &a) != PL_OK) {
            fprintf(stderr, "adamw: %s\n", gpu->err);
            exit(1);
        }
        char what[128];
        snprintf(what, sizeof what, "[%s] adamw params", mode);
        report(what, cmp_pair(&m, &p, n), tol32);
        snprintf(what, sizeof what, "[%s] adamw m and v", mode);
        double e = fmax(cmp_pair(&m, &mo, n), cmp_pair(&m, &v, n));
        report(what, e, tol32);
        cpu->ops->add(cpu, 0, p.h, gg.h, n);
        gpu->ops->add(gpu, 0, p.d, gg.d, n);
        snprintf(what, sizeof what, "[%s] add", mode);
        report(what, cmp_pair(&m, &p, n), tol32);
        free(p.h); free(gg.h); free(mo.h); free(v.h);
    }
    gpu->ops->mem_free(gpu, 0, base);
    free(tok_h); free(tgt_h);
    graph_destroy(g);
    hw_backend_destroy(cpu);
    hw_backend_destroy(gpu);
}

/* ---------------- kernels in bf16 ----------------
 * Every node's CUDA forward and backward in the bf16 mode against the CPU
 * backend's bf16 reference (nodes.h), which rounds the same tensors at the
 * same points. Each side runs its own forward and then its backward from
 * its own saved tensors (their saved layouts differ in bf16), from the same
 * inputs, weights (the bf16 copy: bits on the GPU, rounded floats on the
 * CPU), dout and pre-filled gradients. Tolerances (normwise):
 *   3e-3 for mlp, head, loss: both sides round the same values; what
 *        differs is fp32 accumulation against double (~1e-6) and, rarely,
 *        an element that lands on the other side of a bf16 rounding
 *        boundary (an error of one bf16 ulp, 2^-8, on ~1e-3 of the
 *        elements: ~1e-4 normwise), plus cuBLASLt's GELU against tanhf
 *        and GELU's derivative at the rounded pre-activation; 3e-3 is more
 *        than 10x what that gives.
 *   1e-2 for attention: the flash kernel rounds its softmax probabilities
 *        to bf16 for the P V product (2^-9 rms relative per element,
 *        ~2e-3 normwise through the product), and without the flash kernel
 *        the attention core runs in TF32 (~5e-4 a GEMM, four GEMMs);
 *        1e-2 leaves about 5x.
 *   The fp32 nodes (embedding, layernorm, residual) keep 2e-5. */
static void up16(dmem *m, void *d, const float *h, int64_t n) {
    uint16_t *t = malloc(sizeof(uint16_t) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) t[i] = hw_bf16_bits(h[i]);
    up(m, d, t, n * 2);
    free(t);
}

static float *down16(dmem *m, const void *d, int64_t n) {
    uint16_t *t = malloc(sizeof(uint16_t) * (size_t)(n > 0 ? n : 1));
    float *f = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    down(m, t, d, n * 2);
    for (int64_t i = 0; i < n; i++) f[i] = hw_bf16_to_float(t[i]);
    free(t);
    return f;
}

/* V valid columns of N rows of stride Vp, as a dense copy */
static float *cols(const float *x, int N, int V, int Vp) {
    float *a = malloc(sizeof(float) * (size_t)N * V);
    for (int n = 0; n < N; n++) memcpy(a + (int64_t)n * V, x + (int64_t)n * Vp, sizeof(float) * V);
    return a;
}

static void test_kernels_bf16(const char *cfgtext, const char *mode) {
    char msg[256];
    hw_backend *cpu = NULL, *gpu = NULL;
    int gpus[1] = {0};
    if (hw_backend_cpu_create(1, &cpu, msg, sizeof msg) != PL_OK ||
        hw_backend_cuda_create(gpus, 1, 0, &gpu, msg, sizeof msg) != PL_OK) {
        fprintf(stderr, "backend: %s\n", msg);
        exit(1);
    }
    dmem m = {gpu, NULL, 0, 512LL << 20};
    void *base = NULL;
    if (gpu->ops->mem_alloc(gpu, 0, m.cap, &base) != PL_OK) {
        fprintf(stderr, "alloc: %s\n", gpu->err);
        exit(1);
    }
    m.base = base;
    float *ws = dalloc(&m, gpu->ops->workspace_bytes / 4);
    if (gpu->ops->set_workspace(gpu, 0, ws, gpu->ops->workspace_bytes) != PL_OK) {
        fprintf(stderr, "workspace: %s\n", gpu->err);
        exit(1);
    }
    graph *g = make_graph(cfgtext);
    const gpt_config *cfg = &g->cfg;
    const int B = cfg->batch, T = cfg->seq_len, C = cfg->d_model, V = cfg->vocab, Vp = hw_padded_vocab(V);
    const int N = B * T;
    pl_rng r;
    pl_rng_seed(&r, 4242);
    int *tok_h = malloc(sizeof(int) * N), *tgt_h = malloc(sizeof(int) * N);
    for (int i = 0; i < N; i++) {
        tok_h[i] = pl_rng_int(&r, V);
        tgt_h[i] = pl_rng_int(&r, V);
    }
    int *tok_d = (int *)dalloc(&m, N), *tgt_d = (int *)dalloc(&m, N);
    up(&m, tok_d, tok_h, N * 4);
    up(&m, tgt_d, tgt_h, N * 4);
    const int nodes[] = {0, 1, 2, 3, 5, g->n_nodes - 2, g->n_nodes - 1};
    for (size_t q = 0; q < sizeof nodes / sizeof nodes[0]; q++) {
        int ni = nodes[q];
        const graph_node *nd = &g->nodes[ni];
        const op_kind kind = nd->kind;
        hw_param_map pl;
        hw_node_mem mem;
        hw_node_param_map(g, ni, &pl);
        hw_node_mem_floats_prec(g, ni, B, 1, &mem);
        size_t mark = (size_t)m.used;
        pair prm = mkpair(&m, &r, pl.floats, kind == OP_LAYERNORM ? 1.0 : 0.0, 0.1);
        if (kind == OP_LAYERNORM)
            for (int64_t i = 0; i < pl.size[1]; i++) prm.h[pl.off[1] + i] -= 1.0f;
        if (kind == OP_HEAD)
            for (int64_t i = (int64_t)V * C; i < pl.floats; i++) prm.h[i] = 0.0f;
        up(&m, prm.d, prm.h, pl.floats * 4);
        float *p16h = malloc(sizeof(float) * (size_t)pl.floats);
        cpu_round_bf16(p16h, prm.h, pl.floats);
        void *p16d = dalloc(&m, (pl.floats + 1) / 2);
        up16(&m, p16d, prm.h, pl.floats);
        const int logits_in = kind == OP_LOSS; /* bf16 logits in, bf16 dlogits out */
        int64_t in_n = logits_in ? (int64_t)N * Vp : (int64_t)N * C;
        pair in0 = mkpair(&m, &r, in_n, 0.0, logits_in ? 2.0 : 1.0);
        pair in1 = mkpair(&m, &r, in_n, 0.0, 1.0);
        if (logits_in) {
            cpu_round_bf16(in0.h, in0.h, in_n);
            up16(&m, in0.d, in0.h, in_n);
        }
        pair out = mkpair(&m, &r, mem.out, 0.0, 1.0);
        float *sav_h = calloc((size_t)(mem.saved > 0 ? mem.saved : 1), sizeof(float));
        float *sav_d = dalloc(&m, mem.saved > 0 ? mem.saved : 1);
        int64_t scr = mem.fwd_scratch > mem.bwd_scratch ? mem.fwd_scratch : mem.bwd_scratch;
        float *scr_h = malloc(sizeof(float) * (size_t)(scr > 0 ? scr : 1));
        float *scr_d = dalloc(&m, scr > 0 ? scr : 1);
        double *lsum_d = (double *)dalloc(&m, 2);
        double lsum_h = 0.0, zero = 0.0;
        up(&m, lsum_d, &zero, 8);
        hw_node_call ch, cd;
        memset(&ch, 0, sizeof ch);
        ch.kind = kind;
        ch.d = (hw_dims){B, T, C, cfg->n_heads, V, Vp};
        ch.pl = pl;
        ch.mem = mem;
        ch.inv_norm = 1.0f / (4.0f * N);
        ch.bf16 = 1;
        cd = ch;
        ch.in[0] = in0.h; ch.in[1] = in1.h; ch.tokens = tok_h; ch.targets = tgt_h; ch.params = prm.h;
        ch.params16 = p16h; ch.out = out.h; ch.saved = sav_h; ch.scratch = scr_h; ch.loss_sum = &lsum_h;
        cd.in[0] = in0.d; cd.in[1] = in1.d; cd.tokens = tok_d; cd.targets = tgt_d; cd.params = prm.d;
        cd.params16 = p16d; cd.out = out.d; cd.saved = sav_d; cd.scratch = scr_d; cd.loss_sum = lsum_d;
        if (logits_in) { /* in place, as in the engine */
            ch.din[0] = in0.h;
            cd.din[0] = in0.d;
        }
        pl_status s1 = cpu->ops->node_forward(cpu, 0, &ch), s2 = gpu->ops->node_forward(gpu, 0, &cd);
        if (s1 != PL_OK || s2 != PL_OK) {
            fprintf(stderr, "%s forward: %s\n", nd->name, gpu->err);
            exit(1);
        }
        char what[128];
        int mm = kind == OP_ATTENTION || kind == OP_MLP || kind == OP_HEAD || kind == OP_LOSS;
        double tol = kind == OP_ATTENTION ? 1e-2 : mm ? 3e-3 : 2e-5;
        snprintf(what, sizeof what, "[%s] %s forward out", mode, nd->name);
        if (kind == OP_HEAD) {
            float *t = down16(&m, out.d, mem.out);
            float *a = cols(t, N, V, Vp), *b = cols(out.h, N, V, Vp);
            report(what, relerr(a, b, (int64_t)N * V), tol);
            free(t); free(a); free(b);
        } else {
            report(what, cmp_pair(&m, &out, mem.out), tol);
        }
        if (logits_in) {
            float *t = down16(&m, in0.d, in_n);
            snprintf(what, sizeof what, "[%s] loss dlogits (bf16, padding included)", mode);
            report(what, relerr(t, in0.h, in_n), tol);
            free(t);
            double lg = 0.0;
            down(&m, &lg, lsum_d, 8);
            snprintf(what, sizeof what, "[%s] loss sum", mode);
            report(what, fabs(lg - lsum_h) / fabs(lsum_h), 2e-5);
        } else {
            pair dout = mkpair(&m, &r, mem.out, 0.0, 1.0);
            if (kind == OP_HEAD) { /* bf16 dlogits with zero padding columns */
                for (int n = 0; n < N; n++)
                    for (int v = V; v < Vp; v++) dout.h[(int64_t)n * Vp + v] = 0.0f;
                cpu_round_bf16(dout.h, dout.h, mem.out);
                up16(&m, dout.d, dout.h, mem.out);
            }
            pair din0 = mkpair(&m, &r, in_n, 0.0, 1.0), din1 = mkpair(&m, &r, in_n, 0.0, 1.0);
            pair grads = mkpair(&m, &r, pl.floats, 0.0, 1.0);
            ch.dout = dout.h; ch.din[0] = din0.h; ch.din[1] = din1.h; ch.grads = grads.h;
            cd.dout = dout.d; cd.din[0] = din0.d; cd.din[1] = din1.d; cd.grads = grads.d;
            ch.acc[0] = cd.acc[0] = 1;
            ch.acc[1] = cd.acc[1] = 0;
            s1 = cpu->ops->node_backward(cpu, 0, &ch);
            s2 = gpu->ops->node_backward(gpu, 0, &cd);
            if (s1 != PL_OK || s2 != PL_OK) {
                fprintf(stderr, "%s backward: %s\n", nd->name, gpu->err);
                exit(1);
            }
            for (int k = 0; k < nd->n_inputs; k++) {
                snprintf(what, sizeof what, "[%s] %s backward din[%d] (acc=%d)", mode, nd->name, k, k == 0);
                report(what, cmp_pair(&m, k ? &din1 : &din0, in_n), tol);
            }
            for (int k = 0; k < pl.n; k++) {
                float *t = malloc(sizeof(float) * (size_t)pl.size[k]);
                down(&m, t, grads.d + pl.off[k], pl.size[k] * 4);
                snprintf(what, sizeof what, "[%s] %s backward dparam[%d] (+=)", mode, nd->name, k);
                report(what, relerr(t, grads.h + pl.off[k], pl.size[k]), tol);
                free(t);
            }
            free(dout.h); free(din0.h); free(din1.h); free(grads.h);
        }
        free(prm.h); free(p16h); free(in0.h); free(in1.h); free(out.h); free(sav_h); free(scr_h);
        m.used = (int64_t)mark;
    }
    /* AdamW writing the bf16 copy in the same pass (step 3) */
    {
        const int64_t n = (1 << 20) + 3; /* odd length: the scalar path too */
        for (int pass = 0; pass < 2; pass++) {
            int64_t nn = pass ? n : n - 3;
            size_t mark = (size_t)m.used;
            pair p = mkpair(&m, &r, nn, 0, 1), gg = mkpair(&m, &r, nn, 0, 1), mo = mkpair(&m, &r, nn, 0, 0.1);
            pair v = mkpair(&m, &r, nn, 0, 0.1);
            for (int64_t i = 0; i < nn; i++) v.h[i] = fabsf(v.h[i]);
            up(&m, v.d, v.h, nn * 4);
            float *c16 = malloc(sizeof(float) * (size_t)nn);
            void *g16 = dalloc(&m, (nn + 1) / 2);
            hw_adamw_args a = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, NULL, c16};
            cpu->ops->adamw(cpu, 0, p.h, gg.h, mo.h, v.h, nn, &a);
            a.p16 = g16;
            if (gpu->ops->adamw(gpu, 0, p.d, gg.d, mo.d, v.d, nn, &a) != PL_OK) {
                fprintf(stderr, "adamw: %s\n", gpu->err);
                exit(1);
            }
            char what[128];
            snprintf(what, sizeof what, "[%s] adamw params (n %% 4 = %d)", mode, (int)(nn % 4));
            report(what, cmp_pair(&m, &p, nn), 2e-5);
            /* the copy is the rounded update: equal wherever the fp32 params
             * agree to well within a bf16 ulp, so the normwise error is tiny */
            float *t = down16(&m, g16, nn);
            snprintf(what, sizeof what, "[%s] adamw bf16 weight copy (n %% 4 = %d)", mode, (int)(nn % 4));
            report(what, relerr(t, c16, nn), 1e-4);
            free(t); free(c16);
            free(p.h); free(gg.h); free(mo.h); free(v.h);
            m.used = (int64_t)mark;
        }
    }
    gpu->ops->mem_free(gpu, 0, base);
    free(tok_h); free(tgt_h);
    graph_destroy(g);
    hw_backend_destroy(cpu);
    hw_backend_destroy(gpu);
}

/* ---------------- whole step ---------------- */

typedef struct {
    double loss;
    float *grads, *before, *after;
    int64_t n;
} step_res;

static void free_res(step_res *s) {
    free(s->grads);
    free(s->before);
    free(s->after);
}

static int run_step(hw_engine *e, const graph *g, const int *pl, int m, schedule_order ord, step_res *out,
                    int quiet_oom) {
    hw_program_opts o;
    memset(&o, 0, sizeof o);
    o.placement = pl;
    o.sched = schedule_make(m, ord);
    o.seed = 5;
    o.adamw = hw_adamw_default();
    hw_program *p = NULL;
    char msg[512];
    pl_status st = hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg);
    if (st != PL_OK) {
        if (!quiet_oom) fprintf(stderr, "plan: %s\n", msg);
        return st;
    }
    int n = g->cfg.batch * g->cfg.seq_len;
    int *tok = malloc(sizeof(int) * n), *tgt = malloc(sizeof(int) * n);
    hw_make_batch(&g->cfg, 11, tok, tgt);
    st = hw_program_set_batch(p, tok, tgt, msg, sizeof msg);
    free(tok);
    free(tgt);
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(g->n_nodes + 1));
    out->n = hw_model_param_offsets(g, off);
    free(off);
    out->grads = malloc(sizeof(float) * (size_t)out->n);
    out->before = malloc(sizeof(float) * (size_t)out->n);
    out->after = malloc(sizeof(float) * (size_t)out->n);
    if (st == PL_OK) st = hw_program_get_params(p, out->before, msg, sizeof msg);
    hw_step_result r;
    if (st == PL_OK) st = hw_program_step(p, &r, msg, sizeof msg);
    if (st == PL_OK) st = hw_program_get_grads(p, out->grads, msg, sizeof msg);
    if (st == PL_OK) st = hw_program_get_params(p, out->after, msg, sizeof msg);
    out->loss = r.loss;
    if (st != PL_OK) fprintf(stderr, "step: %s\n", msg);
    hw_program_destroy(p);
    return st;
}

/* Fraction of parameters whose update differs by more than lr/10. */
static double flipped(const step_res *a, const step_res *ref, float lr) {
    int64_t k = 0;
    for (int64_t i = 0; i < a->n; i++) {
        double ua = (double)a->after[i] - a->before[i], ur = (double)ref->after[i] - ref->before[i];
        if (!(fabs(ua - ur) <= 0.1 * lr)) k++;
    }
    return (double)k / (double)a->n;
}

static hw_engine *cuda_engine(int n, const int *gpus, int strict) {
    hw_engine_opts o;
    memset(&o, 0, sizeof o);
    o.backend = HW_BACKEND_CUDA;
    o.n_devices = n;
    memcpy(o.gpus, gpus, sizeof(int) * (size_t)n);
    o.strict_fp32 = strict;
    hw_engine *e = NULL;
    char msg[512];
    if (hw_engine_create(&o, &e, msg, sizeof msg) != PL_OK) {
        fprintf(stderr, "engine: %s\n", msg);
        exit(1);
    }
    return e;
}

/* cfgtext: SMALL_CFG (hs 32), or in TF32 also FLASH_CFG (hs 64: the TF32
 * flash attention inside the whole step, same tolerances) */
static void test_step(int strict, const char *cfgtext, const char *mode) {
    graph *g = make_graph(cfgtext);
    hw_engine_opts co;
    memset(&co, 0, sizeof co);
    co.backend = HW_BACKEND_CPU;
    co.n_devices = 1;
    hw_engine *ce = NULL;
    char msg[256];
    hw_engine_create(&co, &ce, msg, sizeof msg);
    int gpus[1] = {0};
    hw_engine *ge = cuda_engine(1, gpus, strict);
    int *pl = calloc((size_t)g->n_nodes, sizeof(int));
    step_res c = {0}, d = {0};
    if (run_step(ce, g, pl, 2, SCHED_1F1B, &c, 0) != PL_OK || run_step(ge, g, pl, 2, SCHED_1F1B, &d, 0) != PL_OK)
        exit(1);
    char what[128];
    snprintf(what, sizeof what, "[%s] step loss vs CPU (%.5f)", mode, c.loss);
    report(what, fabs(d.loss - c.loss) / c.loss, strict ? 1e-5 : 2e-3);
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(g->n_nodes + 1));
    hw_model_param_offsets(g, off);
    double worst = 0.0;
    for (int i = 0; i < g->n_nodes; i++) {
        int64_t n = off[i + 1] - off[i];
        if (n == 0) continue;
        double e = relerr(d.grads + off[i], c.grads + off[i], n);
        snprintf(what, sizeof what, "[%s] step gradients of %s", mode, g->nodes[i].name);
        report(what, e, strict ? 1e-4 : 3e-2);
        if (e > worst) worst = e;
    }
    snprintf(what, sizeof what, "[%s] step params before the update (same init)", mode);
    report(what, relerr(d.before, c.before, c.n), 0.0);
    snprintf(what, sizeof what, "[%s] step params after AdamW: fraction flipped", mode);
    report(what, flipped(&d, &c, hw_adamw_default().lr), strict ? 1e-4 : 2e-2);
    free(off);
    free(pl);
    free_res(&c);
    free_res(&d);
    hw_engine_destroy(ce);
    hw_engine_destroy(ge);
    graph_destroy(g);
}

/* ---------------- whole step and training in bf16 ----------------
 * One step of the bf16 engine on the GPU against the bf16 engine on the CPU
 * backend (same rounding points: the kernel tolerances, compounded through
 * ~20 GEMMs: loss 1e-3, gradients 3e-2 per node, 2e-2 flipped updates), and
 * against the fp32 engine on the GPU (what bf16 costs: every GEMM input
 * rounded to 8 bits, 2^-8 at worst and ~1.1e-3 rms relative, through ~20
 * rounded tensors: ~5e-3 normwise on a gradient, more on the nodes whose
 * gradients are small against what flows through them; we allow 5e-2 per
 * node and 5e-3 relative on the loss, whose logits are rounded once). */
static hw_engine *engine_prec(hw_backend_kind kind, int n, const int *gpus, hw_precision prec) {
    hw_engine_opts o;
    memset(&o, 0, sizeof o);
    o.backend = kind;
    o.n_devices = n;
    if (gpus) memcpy(o.gpus, gpus, sizeof(int) * (size_t)n);
    o.precision = prec;
    hw_engine *e = NULL;
    char msg[512];
    if (hw_engine_create(&o, &e, msg, sizeof msg) != PL_OK) {
        fprintf(stderr, "engine: %s\n", msg);
        exit(1);
    }
    return e;
}

static void compare_steps(const char *mode, const graph *g, const step_res *d, const step_res *c, double tl,
                          double tg, double tf) {
    char what[128];
    snprintf(what, sizeof what, "[%s] step loss (%.5f vs %.5f)", mode, d->loss, c->loss);
    report(what, fabs(d->loss - c->loss) / c->loss, tl);
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(g->n_nodes + 1));
    hw_model_param_offsets(g, off);
    for (int i = 0; i < g->n_nodes; i++) {
        int64_t n = off[i + 1] - off[i];
        if (n == 0) continue;
        snprintf(what, sizeof what, "[%s] step gradients of %s", mode, g->nodes[i].name);
        report(what, relerr(d->grads + off[i], c->grads + off[i], n), tg);
    }
    free(off);
    snprintf(what, sizeof what, "[%s] step params after AdamW: fraction flipped", mode);
    report(what, flipped(d, c, hw_adamw_default().lr), tf);
}

static void test_step_bf16(void) {
    graph *g = make_graph(FLASH_CFG);
    int gpus[1] = {0};
    hw_engine *ce = engine_prec(HW_BACKEND_CPU, 1, NULL, HW_PREC_BF16);
    hw_engine *ge = engine_prec(HW_BACKEND_CUDA, 1, gpus, HW_PREC_BF16);
    hw_engine *gf = engine_prec(HW_BACKEND_CUDA, 1, gpus, HW_PREC_FP32);
    int *pl = calloc((size_t)g->n_nodes, sizeof(int));
    step_res c = {0}, d = {0}, f = {0};
    if (run_step(ce, g, pl, 2, SCHED_1F1B, &c, 0) != PL_OK || run_step(ge, g, pl, 2, SCHED_1F1B, &d, 0) != PL_OK ||
        run_step(gf, g, pl, 2, SCHED_1F1B, &f, 0) != PL_OK)
        exit(1);
    compare_steps("bf16 GPU vs bf16 CPU", g, &d, &c, 1e-3, 3e-2, 2e-2);
    compare_steps("bf16 GPU vs fp32 GPU", g, &d, &f, 5e-3, 5e-2, 5e-2);
    free(pl);
    free_res(&c);
    free_res(&d);
    free_res(&f);
    hw_engine_destroy(ce);
    hw_engine_destroy(ge);
    hw_engine_destroy(gf);
    graph_destroy(g);
}

/* Training on a seeded Markov chain: each token is followed by one of 4
 * successors fixed per token (the best loss is ln 4 = 1.386). `steps`
 * steps on fresh windows of one stream, fp32 and bf16 engines on the GPU
 * from the same parameters. The band: every 10-step mean of the bf16 loss
 * within 2% + 0.02 of fp32's; every single step within 5% + 0.05 (two
 * rounding orders drift apart step by step; batch-to-batch noise is larger
 * than that); and both must learn (the last 10-step mean under 60% of the
 * first step's loss). */
static void test_train(int steps) {
    graph *g = make_graph(FLASH_MID_CFG);
    const int B = g->cfg.batch, T = g->cfg.seq_len, V = g->cfg.vocab;
    const int64_t n = (int64_t)steps * B * T + 1;
    int *stream = malloc(sizeof(int) * (size_t)n), *next = malloc(sizeof(int) * (size_t)V * 4);
    pl_rng r;
    pl_rng_seed(&r, 2026);
    for (int i = 0; i < V * 4; i++) next[i] = pl_rng_int(&r, V);
    stream[0] = 0;
    for (int64_t i = 1; i < n; i++) stream[i] = next[stream[i - 1] * 4 + pl_rng_int(&r, 4)];
    double *loss[2];
    int gpus[1] = {0};
    int *pl = calloc((size_t)g->n_nodes, sizeof(int));
    double secs[2];
    for (int k = 0; k < 2; k++) {
        loss[k] = malloc(sizeof(double) * (size_t)steps);
        hw_engine *e = engine_prec(HW_BACKEND_CUDA, 1, gpus, k ? HW_PREC_BF16 : HW_PREC_FP32);
        hw_program_opts o;
        memset(&o, 0, sizeof o);
        o.placement = pl;
        o.sched = schedule_make(1, SCHED_1F1B);
        o.seed = 9;
        o.adamw = hw_adamw_default();
        o.adamw.lr = 1e-3f;
        hw_program *p = NULL;
        char msg[512];
        pl_status st = hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg);
        double t0 = pl_now_us();
        for (int s = 0; s < steps && st == PL_OK; s++) {
            const int *w = stream + (int64_t)s * B * T;
            hw_step_result sr;
            st = hw_program_set_batch(p, w, w + 1, msg, sizeof msg);
            if (st == PL_OK) st = hw_program_step(p, &sr, msg, sizeof msg);
            loss[k][s] = sr.loss;
        }
        secs[k] = (pl_now_us() - t0) / 1e6;
        if (st != PL_OK) {
            fprintf(stderr, "train: %s\n", msg);
            exit(1);
        }
        hw_program_destroy(p);
        hw_engine_destroy(e);
    }
    double worst = 0.0, worst10 = 0.0;
    int bad = 0, bad10 = 0;
    for (int s = 0; s < steps; s++) {
        double dd = fabs(loss[1][s] - loss[0][s]);
        if (!(dd <= 0.05 * loss[0][s] + 0.05)) bad++;
        if (dd > worst) worst = dd;
    }
    printf("train: step   fp32     bf16\n");
    for (int s = 0; s + 10 <= steps; s += 10) {
        double m0 = 0.0, m1 = 0.0;
        for (int k = s; k < s + 10; k++) m0 += loss[0][k] / 10, m1 += loss[1][k] / 10;
        if (!(fabs(m1 - m0) <= 0.02 * m0 + 0.02)) bad10++;
        if (fabs(m1 - m0) > worst10) worst10 = fabs(m1 - m0);
        if (s % 20 == 0 || s + 20 > steps) printf("train: %4d-%-4d %.4f  %.4f\n", s, s + 9, m0, m1);
    }
    char detail[200];
    snprintf(detail, sizeof detail, "%d steps: largest gap %.4f, %d outside the band (%.1f s fp32, %.1f s bf16)", steps,
             worst, bad, secs[0], secs[1]);
    check("train: every bf16 step within 5% + 0.05 of fp32", bad == 0, detail);
    snprintf(detail, sizeof detail, "largest gap of 10-step means %.4f, %d outside", worst10, bad10);
    check("train: bf16 10-step means within 2% + 0.02 of fp32", bad10 == 0 && steps >= 10, detail);
    double last[2] = {0, 0};
    for (int k = 0; k < 2; k++)
        for (int s = steps - 10; s < steps; s++) last[k] += loss[k][s] / 10;
    snprintf(detail, sizeof detail, "fp32 %.3f -> %.3f, bf16 %.3f -> %.3f (ln 4 = 1.386)", loss[0][0], last[0],
             loss[1][0], last[1]);
    check("train: both learn the chain", last[0] < 0.6 * loss[0][0] && last[1] < 0.6 * loss[1][0], detail);
    free(loss[0]);
    free(loss[1]);
    free(pl);
    free(stream);
    free(next);
    graph_destroy(g);
}

/* ---------------- invariance ---------------- */

static void compare_invariant(const char *what, const step_res *s, const step_res *ref) {
    double el = fabs(s->loss - ref->loss) / ref->loss;
    double eg = relerr(s->grads, ref->grads, s->n);
    double ef = flipped(s, ref, hw_adamw_default().lr);
    int ok = el <= 1e-6 && eg <= 1e-5 && ef <= 1e-4;
    char detail[160];
    snprintf(detail, sizeof detail, "loss %.1e grads %.1e flipped %.1e", el, eg, ef);
    check(what, ok, detail);
}

static void test_invariance(int n_random) {
    graph *g = make_graph(MID_CFG);
    const int nn = g->n_nodes;
    int one[1] = {0}, two[2] = {0, 1}, same[2] = {0, 0}, mixed[4] = {0, 0, 1, 1};
    const int two_gpus = n_gpus >= 2;
    hw_engine *e1 = cuda_engine(1, one, 0), *e2 = two_gpus ? cuda_engine(2, two, 0) : NULL;
    if (!two_gpus) {
        skip("invariance: random placements on GPUs 0,1");
        skip("invariance: logical devices 0,0,1,1");
        n_random = 0;
    }
    int *pl = calloc((size_t)nn, sizeof(int));
    step_res ref[5];
    for (int m = 1; m <= 4; m *= 4) {
        memset(pl, 0, sizeof(int) * (size_t)nn);
        if (run_step(e1, g, pl, m, SCHED_1F1B, &ref[m], 0) != PL_OK) exit(1);
    }
    pl_rng r;
    pl_rng_seed(&r, 31337);
    char what[700], pls[512];
    int runs = 0;
    for (int t = 0; t < n_random; t++) {
        for (int i = 0; i < nn; i++) pl[i] = pl_rng_int(&r, 2);
        if (t == 0)
            for (int i = 0; i < nn; i++) pl[i] = i < nn / 2 ? 0 : 1; /* a contiguous split too */
        placement_format(pl, nn, pls, sizeof pls);
        for (int m = 1; m <= 4; m *= 4)
            for (int o = 0; o < 2; o++) {
                step_res s;
                if (run_step(e2, g, pl, m, (schedule_order)o, &s, 0) != PL_OK) {
                    check("invariance run", 0, pls);
                    continue;
                }
                snprintf(what, sizeof what, "2 GPUs m=%d %-5s %s", m, o ? "1f1b" : "gpipe", pls);
                compare_invariant(what, &s, &ref[m]);
                free_res(&s);
                runs++;
            }
    }
    /* logical devices sharing a GPU (device-to-device copies), and a mix */
    hw_engine *es = cuda_engine(2, same, 0), *em = two_gpus ? cuda_engine(4, mixed, 0) : NULL;
    for (int t = 0; t < (two_gpus ? 4 : 2); t++) {
        hw_engine *e = t < 2 ? es : em;
        int k = t < 2 ? 2 : 4;
        for (int i = 0; i < nn; i++) pl[i] = t % 2 ? pl_rng_int(&r, k) : (i * k) / nn;
        placement_format(pl, nn, pls, sizeof pls);
        for (int o = 0; o < 2; o++) {
            step_res s;
            if (run_step(e, g, pl, 4, (schedule_order)o, &s, 0) != PL_OK) {
                check("invariance run", 0, pls);
                continue;
            }
            snprintf(what, sizeof what, "%s m=4 %-5s %s", t < 2 ? "GPUs 0,0" : "GPUs 0,0,1,1", o ? "1f1b" : "gpipe",
                     pls);
            compare_invariant(what, &s, &ref[4]);
            free_res(&s);
            runs++;
        }
    }
    printf("invariance: %d runs on config %s\n", runs, MID_CFG);
    for (int m = 1; m <= 4; m *= 4) free_res(&ref[m]);
    free(pl);
    hw_engine_destroy(e1);
    hw_engine_destroy(e2);
    hw_engine_destroy(es);
    hw_engine_destroy(em);
    graph_destroy(g);
}

/* ---------------- OOM ---------------- */

static void test_oom(int n) {
    graph *g = make_graph("default");
    const int nn = g->n_nodes;
    /* two GPUs where there are two, else the same test on one */
    int two[2] = {0, 1};
    const int nd = n_gpus >= 2 ? 2 : 1;
    if (nd == 1) skip("oom: placements over GPUs 0,1 (run on GPU 0 alone)");
    hw_engine *e = cuda_engine(nd, two, 0);
    int *pl = calloc((size_t)nn, sizeof(int));
    /* one real plan first, so that lazily created library state exists */
    for (int i = 0; i < nn; i++) pl[i] = i < nn / 2 ? 0 : nd - 1;
    step_res s;
    if (run_step(e, g, pl, 2, SCHED_1F1B, &s, 0) != PL_OK) exit(1);
    free_res(&s);
    int64_t free0[2] = {hw_engine_free_bytes(e, 0), nd > 1 ? hw_engine_free_bytes(e, 1) : 0};
    pl_rng r;
    pl_rng_seed(&r, 99);
    int ooms = 0, injected = 0, ok_runs = 0, wrong = 0;
    double t0 = pl_now_us();
    for (int k = 0; k < n; k++) {
        for (int i = 0; i < nn; i++) pl[i] = pl_rng_int(&r, nd);
        hw_program_opts o;
        memset(&o, 0, sizeof o);
        o.placement = pl;
        o.sched = schedule_make(1 << pl_rng_int(&r, 3), (schedule_order)pl_rng_int(&r, 2));
        o.adamw = hw_adamw_default();
        int64_t caps[2];
        int kind = k % 10;
        if (kind < 7) {
            /* caps between 1 MB and 300 MB: below what any placement of this
             * model needs on at least one device (its parameters alone take
             * 4 x 197 MB) */
            caps[0] = (int64_t)(1e6 + pl_rng_uniform(&r) * 3e8);
            caps[1] = (int64_t)(1e6 + pl_rng_uniform(&r) * 3e8);
            o.caps = caps;
        } else {
            /* fits, but the 1st or 2nd device allocation fails (injected) */
            hw_engine_fail_alloc_at(e, 1 + pl_rng_int(&r, nd));
            injected++;
        }
        hw_program *p = NULL;
        char msg[512];
        pl_status st = hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg);
        hw_engine_fail_alloc_at(e, 0);
        if (st == PL_ERR_DEVICE_OOM) ooms++;
        else if (st == PL_OK) ok_runs++; /* a placement with one device unused can dodge the injection */
        else wrong++;
        hw_program_destroy(p);
        if (hw_engine_live_arenas(e) != 0) wrong++;
    }
    double secs = (pl_now_us() - t0) / 1e6;
    /* a real allocation failure: a batch whose logits alone (8192 x 256 x
     * 50304 floats = 422 GB) exceed the card, under a cap of 1 TB */
    graph *big = make_graph("default,batch=8192");
    int *plb = calloc((size_t)big->n_nodes, sizeof(int));
    hw_program_opts o;
    memset(&o, 0, sizeof o);
    o.placement = plb;
    o.sched = schedule_make(1, SCHED_GPIPE);
    o.adamw = hw_adamw_default();
    int64_t tb[2] = {1LL << 40, 1LL << 40};
    o.caps = tb;
    hw_program *p = NULL;
    char msg[512] = "";
    pl_status st = hw_program_create(e, big, &o, &p, NULL, msg, sizeof msg);
    hw_program_destroy(p);
    check("cudaMalloc failure is an OOM status", st == PL_ERR_DEVICE_OOM, msg);
    /* and the engine still runs a step afterwards */
    for (int i = 0; i < nn; i++) pl[i] = i < nn / 2 ? 0 : nd - 1;
    st = run_step(e, g, pl, 2, SCHED_1F1B, &s, 0);
    check("engine usable after the OOMs", st == PL_OK, NULL);
    if (st == PL_OK) free_res(&s);
    int64_t free1[2] = {hw_engine_free_bytes(e, 0), nd > 1 ? hw_engine_free_bytes(e, 1) : 0};
    char detail[256];
    snprintf(detail, sizeof detail, "%d OOM (%d injected), %d fit, %d wrong, %.1f s", ooms, injected, ok_runs, wrong,
             secs);
    check("consecutive OOM placements", wrong == 0 && ooms + ok_runs == n && ooms >= n * 7 / 10, detail);
    for (int d = 0; d < nd; d++) {
        snprintf(detail, sizeof detail, "free before %lld, after %lld (diff %lld bytes)", (long long)free0[d],
                 (long long)free1[d], (long long)(free1[d] - free0[d]));
        char what[64];
        snprintf(what, sizeof what, "GPU %d free memory back to its start", d);
        check(what, free1[d] == free0[d], detail);
    }
    free(plb);
    graph_destroy(big);
    free(pl);
    hw_engine_destroy(e);
    graph_destroy(g);
}

/* ---------------- graphs ---------------- */

/* Run `steps` steps; return the losses and the final parameters. */
static int run_steps(hw_engine *e, const graph *g, const int *pl, int m, int steps, double *loss, float *params,
                     int *graph_state) {
    hw_program_opts o;
    memset(&o, 0, sizeof o);
    o.placement = pl;
    o.sched = schedule_make(m, SCHED_1F1B);
    o.seed = 5;
    o.adamw = hw_adamw_default();
    o.adamw.lr = 1e-3f;
    hw_program *p = NULL;
    char msg[512];
    pl_status st = hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg);
    int n = g->cfg.batch * g->cfg.seq_len;
    int *tok = malloc(sizeof(int) * n), *tgt = malloc(sizeof(int) * n);
    hw_make_batch(&g->cfg, 11, tok, tgt);
    if (st == PL_OK) st = hw_program_set_batch(p, tok, tgt, msg, sizeof msg);
    free(tok);
    free(tgt);
    for (int i = 0; i < steps && st == PL_OK; i++) {
        hw_step_result r;
        st = hw_program_step(p, &r, msg, sizeof msg);
        loss[i] = r.loss;
    }
    if (st == PL_OK) st = hw_program_get_params(p, params, msg, sizeof msg);
    if (st != PL_OK) fprintf(stderr, "graphs: %s\n", msg);
    *graph_state = p ? hw_program_graph_state(p) : 0;
    hw_program_destroy(p);
    return st;
}

/* Two runs of `steps` steps against each other: the largest relative loss
 * difference against loss_tol (named loss_what), and the share of the np
 * parameters whose final values differ by more than lr (1e-3) against
 * param_tol (named param_what). */
static void report_runs(const char *loss_what, const char *param_what, const double *la, const double *lb, int steps,
                        const float *pa, const float *pb, int64_t np, double loss_tol, double param_tol) {
    double el = 0;
    for (int i = 0; i < steps; i++) el = fmax(el, fabs(la[i] - lb[i]) / la[i]);
    report(loss_what, el, loss_tol);
    int64_t far = 0;
    for (int64_t i = 0; i < np; i++) far += !(fabsf(pa[i] - pb[i]) <= 1e-3f);
    report(param_what, (double)far / (double)np, param_tol);
}

/* runs: 2 (1 GPU tf32, bf16) or 3 (and 2 GPUs tf32); tag ends the names */
static void test_graphs_on(const char *cfgtext, const char *tag, int runs) {
    graph *g = make_graph(cfgtext);
    const int nn = g->n_nodes, steps = 5;
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(nn + 1));
    int64_t np = hw_model_param_offsets(g, off);
    free(off);
    float *pa = malloc(sizeof(float) * (size_t)np), *pb = malloc(sizeof(float) * (size_t)np);
    int *pl = calloc((size_t)nn, sizeof(int));
    /* 1 GPU in tf32 and in bf16, then 2 GPUs in tf32 */
    for (int run = 0; run < runs; run++) {
        const int ng = run < 2 ? 1 : 2, bf = run == 1;
        if (ng > n_gpus) {
            skip("graphs: 2 GPUs, one host thread each");
            continue;
        }
        int gpus[2] = {0, 1};
        hw_engine_opts o;
        memset(&o, 0, sizeof o);
        o.backend = HW_BACKEND_CUDA;
        o.precision = bf ? HW_PREC_BF16 : HW_PREC_DEFAULT;
        o.n_devices = ng;
        memcpy(o.gpus, gpus, sizeof gpus);
        hw_engine *plain = NULL, *graphed = NULL;
        char msg[512];
        hw_engine_create(&o, &plain, msg, sizeof msg);
        o.graphs = 1;
        if (hw_engine_create(&o, &graphed, msg, sizeof msg) != PL_OK || !plain) {
            fprintf(stderr, "engine: %s\n", msg);
            exit(1);
        }
        for (int i = 0; i < nn; i++) pl[i] = ng == 1 ? 0 : (i < nn / 2 ? 0 : 1);
        for (int m = 1; m <= 4; m *= 4) {
            double la[8], lb[8];
            int sa = 0, sb = 0;
            int ok = run_steps(plain, g, pl, m, steps, la, pa, &sa) == PL_OK &&
                     run_steps(graphed, g, pl, m, steps, lb, pb, &sb) == PL_OK;
            char what[128], detail[160];
            snprintf(what, sizeof what, "graphs: %d GPU%s m=%d%s%s replays", ng, ng > 1 ? "s" : "", m, bf ? " bf16" : "",
                     tag);
            snprintf(detail, sizeof detail, "graph state %d", sb);
            check(what, ok && sb == 1, detail);
            if (!ok) continue;
            /* same kernels; only atomics (and AdamW's step counter path) can differ.
             * bf16 amplifies that: an fp32 master weight that differs in its last
             * bit can round to the other bf16 neighbour in the weight copy, a
             * change of 2^-8 in that weight for the GEMMs. The H200 gave 1.6e-5
             * relative on the 5-step losses (m=1): 1e-4 for bf16, 1e-5 otherwise. */
            char pwhat[128];
            snprintf(what, sizeof what, "graphs: %d GPU%s m=%d%s%s losses over %d steps", ng, ng > 1 ? "s" : "", m,
                     bf ? " bf16" : "", tag, steps);
            /* AdamW moves a parameter by about +-lr per step, whatever the size of
             * its gradient: a gradient that differs by rounding (atomics) can flip
             * the few near zero. Count the parameters whose trajectories differ by
             * more than lr over the 5 steps. */
            snprintf(pwhat, sizeof pwhat, "graphs: %d GPU%s m=%d%s%s params off by > lr", ng, ng > 1 ? "s" : "", m,
                     bf ? " bf16" : "", tag);
            /* bf16: 3e-4. A weight whose fp32 master differs in its last bit can
             * round to the other bf16 neighbour, and the change spreads to
             * the parameters near zero; the H200 gave 3.7e-5 to 1.08e-4 of
             * them on this config (third session, calls 1 and 3) */
            report_runs(what, pwhat, la, lb, steps, pa, pb, np, bf ? 1e-4 : 1e-5, bf ? 3e-4 : 1e-4);
        }
        hw_engine_destroy(plain);
        hw_engine_destroy(graphed);
    }
    free(pl);
    free(pa);
    free(pb);
    graph_destroy(g);
}

/* hs 32 (the unfused attention), then hs 64 (the flash kernels of both
 * modes, and TF32's cuBLASLt GEMMs, inside a captured graph) */
static void test_graphs(void) {
    test_graphs_on(MID_CFG, "", 3);
    test_graphs_on(FLASH_MID_CFG, " hs=64", 2);
}

/* ---------------- the side stream ---------------- */

/* The weight gradients on the side stream (hw/kernels/side_stream.cu) against the
 * engine on one stream (PLACER_SIDE=0), both with graphs, 5 steps at m = 1
 * and 4, on one logical device and on two sharing GPU 0 (transfers between
 * them): a missing fork or join (AdamW or a transfer reading a gradient the
 * side stream is still writing, the next node overwriting what it reads)
 * changes the losses. The same GEMMs run, but each stream has half the
 * workspace, so cuBLAS may pick another algorithm: the bounds are the
 * graph-replay test's (1e-5 on the losses, 1e-4 in bf16; parameters off by
 * more than lr after 5 steps, 1e-4 of them, 3e-4 in bf16). */
static void test_side_on(const char *cfgtext, const char *tag, hw_precision prec, const char *pname) {
    graph *g = make_graph(cfgtext);
    const int nn = g->n_nodes, steps = 5;
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(nn + 1));
    int64_t np = hw_model_param_offsets(g, off);
    free(off);
    float *pa = malloc(sizeof(float) * (size_t)np), *pb = malloc(sizeof(float) * (size_t)np);
    int *pl = calloc((size_t)nn, sizeof(int));
    for (int nd = 1; nd <= 2; nd++) {
        hw_engine_opts o;
        memset(&o, 0, sizeof o);
        o.backend = HW_BACKEND_CUDA;
        o.precision = prec;
        o.n_devices = nd;
        o.graphs = 1; /* o.gpus: all GPU 0 */
        hw_engine *side = NULL, *one = NULL;
        char msg[512];
        pl_status st = hw_engine_create(&o, &side, msg, sizeof msg);
        setenv("PLACER_SIDE", "0", 1);
        if (st == PL_OK) st = hw_engine_create(&o, &one, msg, sizeof msg);
        unsetenv("PLACER_SIDE");
        if (st != PL_OK) {
            fprintf(stderr, "engine: %s\n", msg);
            exit(1);
        }
        for (int i = 0; i < nn; i++) pl[i] = nd == 1 ? 0 : (i < nn / 2 ? 0 : 1);
        for (int m = 1; m <= 4; m *= 4) {
            double la[8], lb[8];
            int sa = 0, sb = 0;
            int ok = run_steps(side, g, pl, m, steps, la, pa, &sa) == PL_OK &&
                     run_steps(one, g, pl, m, steps, lb, pb, &sb) == PL_OK;
            char what[128];
            snprintf(what, sizeof what, "side: %s%s %d device%s m=%d runs", pname, tag, nd, nd > 1 ? "s" : "", m);
            check(what, ok, NULL);
            if (!ok) continue;
            char pwhat[128];
            snprintf(what, sizeof what, "side: %s%s %d device%s m=%d losses vs one stream", pname, tag, nd,
                     nd > 1 ? "s" : "", m);
            snprintf(pwhat, sizeof pwhat, "side: %s%s %d device%s m=%d params off by > lr", pname, tag, nd,
                     nd > 1 ? "s" : "", m);
            const int bf = prec == HW_PREC_BF16;
            report_runs(what, pwhat, la, lb, steps, pa, pb, np, bf ? 1e-4 : 1e-5, bf ? 3e-4 : 1e-4);
        }
        hw_engine_destroy(side);
        hw_engine_destroy(one);
    }
    free(pl);
    free(pa);
    free(pb);
    graph_destroy(g);
}

static void test_side(void) {
    test_side_on(FLASH_MID_CFG, " hs=64", HW_PREC_DEFAULT, "tf32");
    test_side_on(FLASH_MID_CFG, " hs=64", HW_PREC_BF16, "bf16");
    test_side_on(MID_CFG, " hs=32", HW_PREC_DEFAULT, "tf32");
    test_side_on(MID_CFG, " hs=32", HW_PREC_FP32, "fp32");
}

/* ---------------- sanitizer run ---------------- */

static void test_sanitize(int bf16, const char *cfgtext) {
    /* two logical devices on GPU 0 (copies between them), m = 2, 1f1b, plus
     * one traced step: every kernel, transfer and event path once */
    graph *g = make_graph(cfgtext);
    int same[2] = {0, 0};
    hw_engine *e = engine_prec(HW_BACKEND_CUDA, 2, same, bf16 ? HW_PREC_BF16 : HW_PREC_DEFAULT);
    int *pl = calloc((size_t)g->n_nodes, sizeof(int));
    for (int i = 0; i < g->n_nodes; i++) pl[i] = i < g->n_nodes / 2 ? 0 : 1;
    if (bf16) pl[g->n_nodes - 2] = 0; /* the head apart from the loss: bf16 logits and dlogits cross */
    step_res s;
    int st = run_step(e, g, pl, 2, SCHED_1F1B, &s, 0);
    char what[96];
    snprintf(what, sizeof what, "sanitizer workload ran (%s, %s)", bf16 ? "bf16" : "tf32",
             strcmp(cfgtext, FLASH_CFG) ? "hs 32" : "hs 64");
    check(what, st == PL_OK, NULL);
    if (st == PL_OK) free_res(&s);
    free(pl);
    hw_engine_destroy(e);
    graph_destroy(g);
}

/* ---------------- zero bubble ---------------- */

/* zb-h1 (B and W apart, W deferred: schedule.h) against 1f1b on the GPU in
 * strict fp32: the same loss, gradients and updated parameters bit for
 * bit, over contiguous and scattered placements on logical devices of one
 * GPU (and of two where there are two), m = 2, 4, 8. */
static void test_zero_bubble(void) {
    graph *g = make_graph(MID_CFG);
    const int nn = g->n_nodes;
    int same[4] = {0, 0, 0, 0}, two[4] = {0, 1, 0, 1};
    hw_engine *es = cuda_engine(4, same, 1), *e2 = n_gpus >= 2 ? cuda_engine(4, two, 1) : NULL;
    if (!e2) skip("zero bubble: logical devices over GPUs 0,1");
    int *pl = calloc((size_t)nn, sizeof(int));
    pl_rng r;
    pl_rng_seed(&r, 28);
    char what[700], pls[512];
    for (int t = 0; t < 6; t++) {
        const int k = 2 + t % 3;
        for (int i = 0; i < nn; i++) pl[i] = t < 3 ? (i * k) / nn : pl_rng_int(&r, k);
        placement_format(pl, nn, pls, sizeof pls);
        for (int ei = 0; ei < 2; ei++) {
            hw_engine *e = ei ? e2 : es;
            if (!e) continue;
            for (int m = 2; m <= 8; m *= 2) {
                step_res a, b;
                if (run_step(e, g, pl, m, SCHED_1F1B, &a, 0) != PL_OK) {
                    check("zero bubble: 1f1b run", 0, pls);
                    continue;
                }
                if (run_step(e, g, pl, m, SCHED_ZB_H1, &b, 0) != PL_OK) {
                    check("zero bubble: zb-h1 run", 0, pls);
                    free_res(&a);
                    continue;
                }
                int dg = 0, dp = 0;
                double rel = 0; /* the largest gradient difference, relative to the gradients' largest magnitude */
                float gmax = 0;
                for (int64_t i = 0; i < a.n; i++) gmax = fmaxf(gmax, fabsf(a.grads[i]));
                for (int64_t i = 0; i < a.n; i++) {
                    dg += memcmp(&a.grads[i], &b.grads[i], sizeof(float)) != 0;
                    dp += memcmp(&a.after[i], &b.after[i], sizeof(float)) != 0;
                    if (gmax > 0) rel = fmax(rel, fabs((double)a.grads[i] - b.grads[i]) / gmax);
                }
                /* The control: 1F1B against itself. On CUDA the engine's
                 * strict-fp32 step is not bit-reproducible run to run (about
                 * 0.1% of the gradients of this graph differ in their last
                 * bits from one 1F1B run to the next, measured on an H200,
                 * 2026-12-02), so ZB-H1 is held to the loss bit for bit and to
                 * the gradients within one ulp of the largest gradient
                 * (2^-23 of max |g|), the size of that run-to-run difference;
                 * the CPU backend checks the split bit for bit
                 * (tests/hw/test_zero_bubble.c). */
                step_res c;
                double crel = -1;
                if (run_step(e, g, pl, m, SCHED_1F1B, &c, 0) == PL_OK) {
                    crel = 0;
                    for (int64_t i = 0; i < a.n; i++)
                        if (gmax > 0) crel = fmax(crel, fabs((double)a.grads[i] - c.grads[i]) / gmax);
                    free_res(&c);
                }
                const int same_loss = memcmp(&a.loss, &b.loss, sizeof a.loss) == 0;
                char detail[200];
                snprintf(detail, sizeof detail,
                         "loss %.9g vs %.9g; %d gradients differ, largest %.3g of max |g| (1f1b vs 1f1b %.3g); "
                         "%d parameters differ", b.loss, a.loss, dg, rel, crel, dp);
                snprintf(what, sizeof what, "zero bubble: zb-h1 = 1f1b (loss bit for bit, gradients within 1 ulp of max |g|), %s m=%d %s",
                         ei ? "GPUs 0,1,0,1" : "GPU 0 x4", m, pls);
                printf("ZB %s m=%d: %s\n", ei ? "GPUs 0,1,0,1" : "GPU 0 x4", m, detail);
                check(what, same_loss && rel <= 0x1p-23, detail);
                free_res(&a);
                free_res(&b);
            }
        }
    }
    free(pl);
    hw_engine_destroy(es);
    if (e2) hw_engine_destroy(e2);
    graph_destroy(g);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: gpu_tests kernels|step [strict|tf32|bf16] | invariance [N] | oom [N] | graphs | "
                        "train [STEPS] | sanitize [bf16|hs64] | side | zero-bubble\n");
        return 2;
    }
    const char *what = argv[1];
    int strict = argc > 2 && !strcmp(argv[2], "strict");
    n_gpus = hw_cuda_device_count();
    if (n_gpus < 1) {
        fprintf(stderr, "gpu_tests: no GPU\n");
        return 2;
    }
    int bf16 = argc > 2 && !strcmp(argv[2], "bf16");
    if (!strcmp(what, "kernels") && bf16) {
        test_kernels_bf16(FLASH_CFG, "bf16 hs=64");
        test_kernels_bf16(SMALL_CFG, "bf16 hs=32");
    } else if (!strcmp(what, "kernels") && strict) test_kernels(1, SMALL_CFG, "strict");
    else if (!strcmp(what, "kernels")) {
        test_kernels(0, SMALL_CFG, "tf32");
        test_kernels(0, FLASH_CFG, "tf32 hs=64");
        test_kernels(0, FLASH_T_CFG, "tf32 hs=64 T=200");
        test_kernels(0, FLASH_128_CFG, "tf32 hs=128 T=136");
        test_kernels(0, VOCAB_CFG, "tf32 vocab=40001");
    } else if (!strcmp(what, "step") && bf16) test_step_bf16();
    else if (!strcmp(what, "step") && strict) test_step(1, SMALL_CFG, "strict");
    else if (!strcmp(what, "step")) {
        test_step(0, SMALL_CFG, "tf32");
        test_step(0, FLASH_CFG, "tf32 hs=64");
        test_step(0, FLASH_T_CFG, "tf32 hs=64 T=200");
    }
    else if (!strcmp(what, "train")) test_train(argc > 2 ? atoi(argv[2]) : 200);
    else if (!strcmp(what, "invariance")) test_invariance(argc > 2 ? atoi(argv[2]) : 20);
    else if (!strcmp(what, "oom")) test_oom(argc > 2 ? atoi(argv[2]) : 1000);
    else if (!strcmp(what, "sanitize") && bf16) test_sanitize(1, FLASH_CFG);
    else if (!strcmp(what, "sanitize") && argc > 2 && !strcmp(argv[2], "hs64")) /* TF32, the flash kernels only */
        test_sanitize(0, FLASH_CFG);
    else if (!strcmp(what, "sanitize")) {
        test_sanitize(0, SMALL_CFG);
        test_sanitize(0, FLASH_CFG);
    }
    else if (!strcmp(what, "graphs")) test_graphs();
    else if (!strcmp(what, "side")) test_side();
    else if (!strcmp(what, "zero-bubble")) test_zero_bubble();
    else {
        fprintf(stderr, "gpu_tests: unknown test '%s'\n", what);
        return 2;
    }
    printf("gpu_tests %s%s%s: %d passed, %d failed\n", what, argc > 2 ? " " : "", argc > 2 ? argv[2] : "", n_pass,
           n_fail);
    return n_fail ? 1 : 0;
}
