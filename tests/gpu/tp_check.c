/*
 * tp_check.c: tensor and data parallelism on the CUDA backend against the
 * single-process, single-device CUDA step (issue 17: "on one GPU, the same
 * checks with logical devices on the one H200"). Run by tests/gpu/tp.sh on
 * the device machine; no Criterion (the device image has none).
 *
 * Every rank is a process forked by hw_launch (hw/dist/launcher.h) running the
 * CUDA backend with its logical devices on GPU 0: several processes share
 * the one GPU, so the device collectives take the host-staging transport
 * (hw/dist/dist_device.h; NCCL refuses two ranks on one GPU). The reference runs
 * in a forked process too: CUDA does not survive fork, so this parent never
 * touches the GPU.
 *
 * Per case (tp, dp, zero, sp, devices per rank, micro-batches, precision):
 * the loss of 3 steps, step 1's gradients (not with ZeRO-1: each replica
 * then holds the reduced gradients of its own shard only), the parameters
 * after 3 AdamW steps (lr 1e-3), reassembled from the ranks' slices as
 * tests/hw/test_tp.c does (an element written by one rank, or by all with
 * the same bits; the replicas equal bit for bit). One line a case:
 *   PASS|FAIL <case>: loss rel R, grads max A abs (S of the node's scale),
 *   params max P mean Q (lr L) [; why]
 * then "SUMMARY: n passed, m failed".
 *
 * Tolerances (per precision), with the largest figures of two H200 runs
 * (GPU call 2 at 7965ab6 + the replicated-gradient averaging, tp in bf16
 * then refused; GPU call 3 at 6ae141a, every case; the run prints each
 * case's figures):
 *   fp32 (strict, no TF32): the arithmetic differs from the reference in
 *     summation order only (the rank's partial GEMMs summed over the group
 *     in fp32, cuBLAS choosing other kernels for other shapes, atomics in
 *     the embedding and layernorm gradients, float sums in the tp loss): a
 *     few fp32 roundings per node relative to the magnitudes summed, as in
 *     test_tp.c (CPU: 2.6e-7 of a node's scale). Measured: loss 1.4e-8
 *     relative, gradients 4.9e-7 of the node's scale, parameters max 4.1e-6
 *     mean 1.6e-9. Bounds: loss 1e-6, gradients 1e-5, parameters max 0.05 lr
 *     and mean 1e-4 lr (12x to 80x).
 *   tf32: both sides round GEMM inputs to TF32 (2^-11 = 4.9e-4 relative),
 *     on different operands (a rank's slice, the reference's whole matrix,
 *     other kernels). Measured: loss 5.3e-6, gradients 2.8e-4 of the
 *     scale, parameters max 2.5e-3 mean 2.3e-6. Bounds: loss 1e-4,
 *     gradients 5e-3, parameters mean 2e-2 lr (9x to 20x).
 *   bf16: the slices round what the whole nodes round (hw.h) but their
 *     GEMMs sum other operands in another order before each rounding to
 *     bf16 (2^-8 relative), and a replica's half batch rounds apart from
 *     the whole. Measured: dp 2 loss 1.1e-5, gradients 3.2e-7 of the scale;
 *     tp 2 (sp or not, dp 1 or 2, 1 or 2 devices) loss 1.1e-5, gradients
 *     1.75e-3 of the scale, parameters max 4.5e-3 mean 5.1e-6. Bounds: loss
 *     1e-3, gradients 2e-2, parameters mean 5e-2 lr (10x to 90x).
 *   A wrong split (a missing all-reduce, the wrong slice) moves gradients by
 *     O(1) of their scale (test_tp.c measured 1.0 by breaking the CPU
 *     engine on purpose), far past every bound.
 *   Parameters after 3 steps: AdamW's normalised step moves an element by
 *     about lr a step whatever its gradient's size, so an element whose
 *     gradient is near zero (noise-level, of either sign) can differ by up
 *     to ~2 lr a step: in tf32 and bf16 the max is only held below 6 lr (a
 *     NaN or a diverged update), the mean carries the check (a wrong split
 *     moves most elements by O(lr)).
 * Also: ZeRO-1 in bf16 (dp 2, and tp 2 x dp 2 sp over 2 devices); a killed rank (world 4,
 * rank 1 SIGKILLed after its first step): hw_launch fails with one line
 * within 30 s and every rank is reaped (kill(pid, 0) fails with ESRCH).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "dist_dp.h"
#include "dist_group.h"
#include "dist_program.h"
#include "dist_tp.h"
#include "graph.h"
#include "hw.h"
#include "launcher.h"
#include "param_memory.h"

#define STEPS 3
#define LR 1e-3f
#define CFG "tiny,d_model=64,heads=4,seq=32,vocab=101,batch=8"

typedef enum { P_FP32, P_TF32, P_BF16 } prec_kind;
static int g_gpus; /* GPUs to spread the ranks over (the nccl mode: TP_CHECK_GPUS); 0: every rank on GPU 0 */
static const char *g_want = "host staging"; /* the transport every case must report */
static const char *prec_name[] = {"fp32", "tf32", "bf16"};

typedef struct {
    int tp, dp, zero, sp, n_dev, m;
    prec_kind prec;
    int kill;           /* world rank SIGKILLed after its first step, or -1 */
    /* shared mappings, [world][...] */
    int64_t n;          /* model view floats */
    double *loss;       /* [world][STEPS] */
    float *grads;       /* [world][n] */
    float *params;      /* [world][n] */
    char *transport;    /* rank 0 writes its collectives' transport (64 bytes) */
} tp_case;

static void fill_nan(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = NAN;
}

static int rank_fn(dist_group *grp, int rank, void *vctx, char *err, size_t errlen) {
    tp_case *c = vctx;
    dist_group *tg = NULL, *dg = NULL;
    int replica = 0, first = 0, count = 0, rc = 2;
    gpt_config cfg;
    graph *g = NULL;
    hw_engine *e = NULL;
    hw_program *p = NULL;
    int *tok = NULL, *tgt = NULL;
    static int pl[4096];
    if (gpt_config_parse(CFG, &cfg, err, errlen) != PL_OK) return 2;
    const int world = c->tp * c->dp;
    if (world > 1 && hw_tp_dp_groups(grp, c->tp, c->dp, &tg, &dg, &replica, err, errlen) != PL_OK) return 2;
    const int me = replica * c->tp + (tg ? dist_rank(tg) : 0);
    if (hw_dp_slice(c->dp, replica, cfg.batch, &first, &count, err, errlen) != PL_OK) goto out;
    gpt_config local = cfg;
    local.batch = count;
    if (graph_build_gpt(&local, &g, err, errlen) != PL_OK) goto out;
    for (int i = 0; i < g->n_nodes; i++) pl[i] = i * c->n_dev / g->n_nodes;
    hw_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.backend = HW_BACKEND_CUDA;
    eo.n_devices = c->n_dev;
    /* every logical device of every rank on GPU 0; with g_gpus > 1 (the nccl mode) rank r's device d on
     * GPU (r n_dev + d) mod g_gpus, each its own when the world fits */
    for (int d = 0; d < c->n_dev; d++) eo.gpus[d] = g_gpus > 1 ? (rank * c->n_dev + d) % g_gpus : 0;
    eo.precision = c->prec == P_FP32 ? HW_PREC_FP32 : c->prec == P_TF32 ? HW_PREC_TF32 : HW_PREC_BF16;
    tok = malloc(sizeof(int) * (size_t)(cfg.batch * cfg.seq_len));
    tgt = malloc(sizeof(int) * (size_t)(cfg.batch * cfg.seq_len));
    if (!tok || !tgt || hw_engine_create(&eo, &e, err, errlen) != PL_OK) goto out;
    hw_program_opts o;
    memset(&o, 0, sizeof o);
    o.placement = pl;
    o.sched = schedule_make(c->m, SCHED_1F1B);
    o.seed = 1234;
    o.adamw = hw_adamw_default();
    o.adamw.lr = LR;
    dist_parallel par = {.dp = dg, .tp = tg, .seq_parallel = c->sp, .zero = c->zero};
    o.parallel = dist_parallel_hooks(&par);
    pl_status st = hw_program_create(e, g, &o, &p, NULL, err, errlen);
    if (st != PL_OK) {
        rc = st == PL_ERR_UNSUPPORTED ? 3 : 2;
        goto out;
    }
    if (rank == 0 && c->transport) snprintf(c->transport, 64, "%s", hw_program_collectives(p));
    hw_make_batch(&cfg, 99, tok, tgt);
    if (hw_program_set_batch(p, tok + first * cfg.seq_len, tgt + first * cfg.seq_len, err, errlen) != PL_OK) goto out;
    float *gv = c->grads + (size_t)me * (size_t)c->n, *pv = c->params + (size_t)me * (size_t)c->n;
    fill_nan(gv, c->n);
    fill_nan(pv, c->n);
    for (int s = 0; s < STEPS; s++) {
        hw_step_result r;
        if (s == 1 && rank == c->kill) raise(SIGKILL); /* its peers wait in step 2's first collective */
        if (hw_program_step(p, &r, err, errlen) != PL_OK) goto out;
        c->loss[me * STEPS + s] = r.loss;
        if (s == 0 && hw_program_get_grads(p, gv, err, errlen) != PL_OK) goto out;
    }
    if (hw_program_get_params(p, pv, err, errlen) != PL_OK) goto out;
    rc = 0;
out:
    hw_program_destroy(p);
    hw_engine_destroy(e);
    graph_destroy(g);
    dist_group_destroy(tg);
    dist_group_destroy(dg);
    free(tok);
    free(tgt);
    return rc;
}

/* shared memory for a case of `world` ranks; 0 on failure */
static int map_case(tp_case *c, int world) {
    size_t lb = sizeof(double) * (size_t)(world * STEPS), vb = sizeof(float) * (size_t)world * (size_t)c->n;
    c->loss = mmap(NULL, lb, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    c->grads = mmap(NULL, vb, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    c->params = mmap(NULL, vb, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    c->transport = mmap(NULL, 64, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (c->loss == MAP_FAILED || c->grads == MAP_FAILED || c->params == MAP_FAILED || c->transport == MAP_FAILED)
        return 0;
    c->transport[0] = 0;
    return 1;
}

static void unmap_case(tp_case *c, int world) {
    munmap(c->loss, sizeof(double) * (size_t)(world * STEPS));
    munmap(c->grads, sizeof(float) * (size_t)world * (size_t)c->n);
    munmap(c->params, sizeof(float) * (size_t)world * (size_t)c->n);
    munmap(c->transport, 64);
}

typedef struct {
    double loss[STEPS];
    float *grads, *params;
} reference;

/* Reassemble view[tp][n] into out[n]; 0 when the ownership rule breaks. */
static int reassemble(const float *views, int tp, int64_t n, const float *ref, float *out, char *why, size_t len) {
    for (int64_t i = 0; i < n; i++) {
        int k = 0, owner = -1;
        for (int r = 0; r < tp; r++)
            if (!isnan(views[(size_t)r * (size_t)n + (size_t)i])) {
                k++;
                owner = r;
            }
        if (k == 0) {
            if (ref[i] != 0.0f) {
                snprintf(why, len, "element %lld is written by no rank (reference %g)", (long long)i, ref[i]);
                return 0;
            }
            out[i] = 0.0f;
        } else if (k == 1) {
            out[i] = views[(size_t)owner * (size_t)n + (size_t)i];
        } else if (k == tp) {
            out[i] = views[i];
            for (int r = 1; r < tp; r++)
                if (memcmp(&views[(size_t)r * (size_t)n + (size_t)i], &views[i], sizeof(float)) != 0) {
                    snprintf(why, len, "replicated element %lld differs between rank 0 (%g) and rank %d (%g)",
                             (long long)i, views[i], r, views[(size_t)r * (size_t)n + (size_t)i]);
                    return 0;
                }
        } else {
            snprintf(why, len, "element %lld is written by %d of %d ranks", (long long)i, k, tp);
            return 0;
        }
    }
    return 1;
}

static int passed, failed;

static double secs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The reference of precision pr (a 1-rank, 1-device case), into ref. */
static int make_reference(const graph *g, int64_t n, prec_kind pr, reference *ref) {
    tp_case c = {1, 1, 0, 0, 1, 1, pr, -1, n, NULL, NULL, NULL, NULL};
    char msg[512] = "";
    if (!map_case(&c, 1)) return 0;
    pl_status st = hw_launch(1, 20.0, rank_fn, &c, NULL, msg, sizeof msg);
    if (st == PL_OK) {
        memcpy(ref->loss, c.loss, sizeof ref->loss);
        memcpy(ref->grads, c.grads, sizeof(float) * (size_t)n);
        memcpy(ref->params, c.params, sizeof(float) * (size_t)n);
        printf("reference %s: losses %.6f %.6f %.6f (%s)\n", prec_name[pr], ref->loss[0], ref->loss[1], ref->loss[2],
               CFG);
    } else {
        printf("FAIL reference %s: %s\n", prec_name[pr], msg);
        failed++;
    }
    unmap_case(&c, 1);
    (void)g;
    return st == PL_OK;
}

static void run_case(const graph *g, const int64_t *off, int64_t n, const reference *ref, tp_case c) {
    const int world = c.tp * c.dp;
    char name[160];
    snprintf(name, sizeof name, "%s tp=%d dp=%d zero=%d sp=%d devices=%d m=%d", prec_name[c.prec], c.tp, c.dp, c.zero,
             c.sp, c.n_dev, c.m);
    c.n = n;
    if (!map_case(&c, world)) {
        printf("FAIL %s: mmap\n", name);
        failed++;
        return;
    }
    char msg[512] = "";
    const double t0 = secs();
    pl_status st = hw_launch(world, 20.0, rank_fn, &c, NULL, msg, sizeof msg); /* a hung rank costs 20 s, not the run */
    const double wall = secs() - t0;
    if (st != PL_OK) {
        printf("FAIL %s: %s\n", name, msg);
        failed++;
        unmap_case(&c, world);
        return;
    }
    /* the bounds and their measurements: the header */
    const double tol_loss = c.prec == P_FP32 ? 1e-6 : c.prec == P_TF32 ? 1e-4 : 1e-3;
    const double tol_grad = c.prec == P_FP32 ? 1e-5 : c.prec == P_TF32 ? 5e-3 : 2e-2;
    const double tol_pmean = (c.prec == P_FP32 ? 1e-4 : c.prec == P_TF32 ? 2e-2 : 5e-2) * LR;
    const double tol_pmax = (c.prec == P_FP32 ? 0.05 : 6.0) * LR;
    float *got_g = malloc(sizeof(float) * (size_t)n), *got_p = malloc(sizeof(float) * (size_t)n);
    char why[200] = "";
    int ok = got_g && got_p;
    const int check_grads = !c.zero;
    const size_t group = (size_t)c.tp * (size_t)n;
    for (int k = 1; k < c.dp && ok; k++)
        if ((check_grads && memcmp(c.grads, c.grads + k * group, group * sizeof(float)) != 0) ||
            memcmp(c.params, c.params + k * group, group * sizeof(float)) != 0) {
            snprintf(why, sizeof why, "replica %d differs from replica 0", k);
            ok = 0;
        }
    if (ok && check_grads) ok = reassemble(c.grads, c.tp, n, ref->grads, got_g, why, sizeof why);
    if (ok) ok = reassemble(c.params, c.tp, n, ref->params, got_p, why, sizeof why);
    double loss_rel = 0, grad_abs = 0, grad_scaled = 0, pmax = 0, psum = 0;
    for (int s = 0; s < STEPS; s++)
        for (int k = 0; k < world; k++) {
            double rel = fabs(c.loss[k * STEPS + s] - ref->loss[s]) / fabs(ref->loss[s]);
            if (!(rel <= loss_rel)) loss_rel = isnan(rel) ? INFINITY : rel;
        }
    for (int node = 0; ok && check_grads && node < g->n_nodes; node++) {
        double scale = 0.0;
        for (int64_t i = off[node]; i < off[node + 1]; i++)
            if (fabs(ref->grads[i]) > scale) scale = fabs(ref->grads[i]);
        for (int64_t i = off[node]; i < off[node + 1]; i++) {
            double d = fabs((double)got_g[i] - ref->grads[i]);
            if (isnan(d)) d = INFINITY;
            if (d > grad_abs) grad_abs = d;
            if (scale > 0 && d / scale > grad_scaled) grad_scaled = d / scale;
        }
    }
    for (int64_t i = 0; ok && i < n; i++) {
        double d = fabs((double)got_p[i] - ref->params[i]);
        if (isnan(d)) d = INFINITY;
        psum += d;
        if (d > pmax) pmax = d;
    }
    const double pmean = psum / (double)n;
    if (ok && loss_rel > tol_loss)
        snprintf(why, sizeof why, "loss off by %.3g relative (bound %g)", loss_rel, tol_loss);
    else if (ok && grad_scaled > tol_grad)
        snprintf(why, sizeof why, "a gradient off by %.3g of its node's scale (bound %g)", grad_scaled, tol_grad);
    else if (ok && (pmean > tol_pmean || pmax > tol_pmax))
        snprintf(why, sizeof why, "parameters off (bounds mean %g, max %g)", tol_pmean, tol_pmax);
    if (ok && !why[0] && strcmp(c.transport, g_want) != 0)
        snprintf(why, sizeof why, "collectives %s, expected %s", c.transport, g_want);
    ok = ok && !why[0];
    char gtxt[96];
    if (check_grads)
        snprintf(gtxt, sizeof gtxt, "grads max %.3g abs (%.3g of the node's scale)", grad_abs, grad_scaled);
    else snprintf(gtxt, sizeof gtxt, "grads not compared (ZeRO-1 shards)");
    printf("%s %s: loss rel %.3g, %s, params after %d steps max %.3g mean %.3g (lr %g); collectives %s; %.1f s%s%s\n",
           ok ? "PASS" : "FAIL", name, loss_rel, gtxt, STEPS, pmax, pmean, (double)LR, c.transport, wall,
           why[0] ? "; " : "", why);
    fflush(stdout);
    if (ok) passed++;
    else failed++;
    free(got_g);
    free(got_p);
    unmap_case(&c, world);
}

/* A rank killed mid-step: the launch fails with one line within 30 s and no rank is left. */
static void kill_case(int64_t n) {
    tp_case c = {2, 2, 0, 0, 1, 1, P_TF32, 1, n, NULL, NULL, NULL, NULL};
    if (!map_case(&c, 4)) return;
    char msg[512] = "";
    hw_launch_report rep;
    memset(&rep, 0, sizeof rep);
    const double t0 = secs();
    pl_status st = hw_launch(4, 10.0, rank_fn, &c, &rep, msg, sizeof msg);
    const double wall = secs() - t0;
    int orphans = 0;
    for (int r = 0; r < rep.n; r++)
        if (rep.pid[r] > 0 && !(kill(rep.pid[r], 0) != 0 && errno == ESRCH)) orphans++;
    const int one_line = strchr(msg, '\n') == NULL && msg[0];
    const int ok = st != PL_OK && wall < 30.0 && orphans == 0 && one_line && rep.failed_rank == 1;
    printf("%s killed rank (tp=2 dp=2, rank 1 SIGKILLed after step 1): failed in %.1f s, blamed rank %d, %d orphans: "
           "%s\n",
           ok ? "PASS" : "FAIL", wall, rep.failed_rank, orphans, msg);
    if (ok) passed++;
    else failed++;
    unmap_case(&c, 4);
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : "all"; /* all, fp32, tf32, bf16, pipe, kill, nccl */
    const char *ng = getenv("TP_CHECK_GPUS");
    g_gpus = ng && *ng && !strcmp(only, "nccl") ? atoi(ng) : 0;
    gpt_config cfg;
    char msg[256];
    graph *g = NULL;
    if (gpt_config_parse(CFG, &cfg, msg, sizeof msg) != PL_OK || graph_build_gpt(&cfg, &g, msg, sizeof msg) != PL_OK) {
        fprintf(stderr, "tp_check: %s\n", msg);
        return 2;
    }
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(g->n_nodes + 1));
    const int64_t n = hw_model_param_offsets(g, off);
    reference ref[3];
    int have[3] = {0, 0, 0};
    for (int pr = 0; pr < 3; pr++) {
        ref[pr].grads = malloc(sizeof(float) * (size_t)n);
        ref[pr].params = malloc(sizeof(float) * (size_t)n);
    }
    const int all = !strcmp(only, "all");
    /* tp x dp x zero x sp; zero only with dp 2, sp only with tp 2 */
    static const int grid[][4] = {{1, 2, 0, 0}, {1, 2, 1, 0}, {2, 1, 0, 0}, {2, 1, 0, 1}, {2, 2, 0, 0},
                                  {2, 2, 0, 1}, {2, 2, 1, 0}, {2, 2, 1, 1}};
    const int ng_cases = (int)(sizeof grid / sizeof grid[0]);
    for (int pr = P_FP32; pr <= P_TF32; pr++) {
        if (!all && strcmp(only, prec_name[pr]) != 0) continue;
        if (!(have[pr] = make_reference(g, n, (prec_kind)pr, &ref[pr]))) continue;
        for (int k = 0; k < ng_cases; k++) {
            tp_case c = {grid[k][0], grid[k][1], grid[k][2], grid[k][3], 1, 1, (prec_kind)pr, -1, 0,
                         NULL, NULL, NULL, NULL};
            run_case(g, off, n, &ref[pr], c);
        }
    }
    if (all || !strcmp(only, "pipe")) {
        /* composition: a 2-logical-device 1f1b pipeline (2 micro-batches) inside each rank */
        for (int pr = P_FP32; pr <= P_TF32; pr++) {
            if (!have[pr] && !(have[pr] = make_reference(g, n, (prec_kind)pr, &ref[pr]))) continue;
            tp_case c = {2, 2, pr == P_TF32, 1, 2, 2, (prec_kind)pr, -1, 0, NULL, NULL, NULL, NULL};
            run_case(g, off, n, &ref[pr], c);
        }
    }
    if (all || !strcmp(only, "bf16")) {
        if ((have[P_BF16] = make_reference(g, n, P_BF16, &ref[P_BF16]))) {
            /* tp, dp, zero, sp, devices, micro-batches */
            static const int b16[][6] = {{1, 2, 0, 0, 1, 1}, {1, 2, 0, 0, 2, 2}, {2, 1, 0, 0, 1, 1},
                                         {2, 1, 0, 1, 1, 1}, {2, 2, 0, 1, 1, 1}, {2, 2, 0, 1, 2, 2},
                                         {1, 2, 1, 0, 1, 1}, {2, 2, 1, 1, 2, 2}};
            for (size_t k = 0; k < sizeof b16 / sizeof b16[0]; k++) {
                tp_case c = {b16[k][0], b16[k][1], b16[k][2], b16[k][3], b16[k][4], b16[k][5], P_BF16, -1, 0,
                             NULL, NULL, NULL, NULL};
                run_case(g, off, n, &ref[P_BF16], c);
            }
        }
    }
    if (all || !strcmp(only, "kill")) kill_case(n);
    if (!strcmp(only, "nccl")) {
        /* one GPU a rank (TP_CHECK_GPUS >= 2): the world-2 cases over NCCL; not run on the one-GPU machine */
        g_want = "nccl";
        for (int pr = P_FP32; pr <= P_TF32 && g_gpus >= 2; pr++) {
            if (!(have[pr] = make_reference(g, n, (prec_kind)pr, &ref[pr]))) continue;
            for (int k = 0; k < ng_cases; k++)
                if (grid[k][0] * grid[k][1] <= g_gpus) {
                    tp_case c = {grid[k][0], grid[k][1], grid[k][2], grid[k][3], 1, 1, (prec_kind)pr, -1, 0,
                                 NULL, NULL, NULL, NULL};
                    run_case(g, off, n, &ref[pr], c);
                }
        }
        if (g_gpus < 2) printf("FAIL nccl: TP_CHECK_GPUS=%d, needs 2 or more\n", g_gpus), failed++;
    }
    printf("SUMMARY: %d passed, %d failed\n", passed, failed);
    for (int pr = 0; pr < 3; pr++) {
        free(ref[pr].grads);
        free(ref[pr].params);
    }
    free(off);
    graph_destroy(g);
    return failed ? 1 : 0;
}
