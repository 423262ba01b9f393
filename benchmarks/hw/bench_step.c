/*
 * bench_step.c: step time of the default 49M GPT (batch 16 x 256) on the
 * real engine, under the project's timing protocol (warm-up steps, then the
 * median of timed steps, device events, host sync per step):
 *
 *   1 GPU, m = 1, TF32 and strict fp32      (against PyTorch eager: pytorch_gpt.py)
 *   1 GPU, m = 4, TF32
 *   2 GPUs, 2-stage 1F1B at m = 4, for several cut points, and the best one
 *   with GPipe; a traced step of the best split shows both GPUs' streams
 *
 * It also prints the step's floor: FLOPs over the measured GEMM rate and the
 * fewest bytes over the measured copy bandwidth (ceilings passed in, or the
 * values measured on the H200 in DEVICE.md), and the per-operation
 * breakdown of a traced single-GPU step.
 *
 * usage: bench_step [--warmup W] [--steps K] [--out DIR] [--gpus N] [--graphs]
 *                   [--quick] [--precision fp32|tf32|bf16]
 * (--graphs: replay each step as captured CUDA graphs; names get "_graph";
 *  --quick: the 1-GPU m=1 configuration only, e.g. with PLACER_KPROF=1, in
 *  the --precision given (tf32 by default); without --quick the 1-GPU m=1
 *  bf16 configuration runs too, and the floor is printed for tf32 and bf16)
 * Prints one JSON line per configuration ("BENCH {...}") and a table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw.h"
#include "param_memory.h"
#include "placement.h"
#include "util.h"

typedef struct {
    char name[64];
    double median_ms, min_ms, max_ms;
    int64_t peak[2];
    double loss;
    int ok;
} row;

static row rows[32];
static int n_rows;

static int use_graphs;
static const char *suffix = "";

static hw_engine *engine_prec(int n, const int *gpus, hw_precision prec) {
    hw_engine_opts o;
    memset(&o, 0, sizeof o);
    o.backend = HW_BACKEND_CUDA;
    o.n_devices = n;
    memcpy(o.gpus, gpus, sizeof(int) * (size_t)n);
    o.precision = prec;
    o.graphs = use_graphs;
    hw_engine *e = NULL;
    char msg[512];
    if (hw_engine_create(&o, &e, msg, sizeof msg) != PL_OK) {
        fprintf(stderr, "bench_step: %s\n", msg);
        exit(1);
    }
    return e;
}

static hw_engine *engine(int n, const int *gpus, int strict) {
    return engine_prec(n, gpus, strict ? HW_PREC_FP32 : HW_PREC_TF32);
}

/* The step's floor in a precision: GEMM FLOPs at the rate given, plus the
 * fewest bytes at the copy bandwidth. AdamW reads p, g, m, v and writes p,
 * m, v (fp32), and in bf16 also the 2-byte weight copy; the gradients are
 * zeroed once; the logits (4 bytes, or 2 in bf16) are written by the head,
 * read and overwritten by the loss, and read by the head's two backward
 * GEMMs; the rest (activations) is small. */
static void print_floor(const graph *g, const char *prec, double gemm_tflops, double copy_gbs) {
    const gpt_config *cfg = &g->cfg;
    double flops = 0;
    for (int i = 0; i < g->n_nodes; i++)
        flops += (g->nodes[i].fwd_flops_per_sample + g->nodes[i].bwd_flops_per_sample) * cfg->batch;
    const int bf16 = !strcmp(prec, "bf16");
    const double P = (double)g->total_params, BT = (double)cfg->batch * cfg->seq_len;
    const double logits = BT * hw_padded_vocab(cfg->vocab) * (bf16 ? 2.0 : 4.0);
    double bytes = P * 4.0 * 7 + (bf16 ? P * 2.0 : 0.0) + P * 4.0 + logits * 5.0;
    printf("FLOOR {\"precision\":\"%s\",\"flop\":%.4g,\"bytes\":%.4g,\"gemm_tflops\":%.1f,\"copy_gbs\":%.0f,"
           "\"flop_ms\":%.3f,\"bytes_ms\":%.3f,\"floor_ms\":%.3f}\n",
           prec, flops, bytes, gemm_tflops, copy_gbs, flops / (gemm_tflops * 1e12) * 1e3, bytes / (copy_gbs * 1e9) * 1e3,
           flops / (gemm_tflops * 1e12) * 1e3 + bytes / (copy_gbs * 1e9) * 1e3);
}

/* Union of a device's compute intervals, sorted; returns count. */
static int busy_intervals(const hw_trace_event *ev, int n, int dev, double *s, double *e) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (ev[i].device == dev && ev[i].stream == HW_STREAM_COMPUTE) {
            s[k] = ev[i].start_us;
            e[k] = ev[i].end_us;
            k++;
        }
    /* sort by start (insertion sort: a few hundred events) */
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && s[j] < s[j - 1]; j--) {
            double t = s[j]; s[j] = s[j - 1]; s[j - 1] = t;
            t = e[j]; e[j] = e[j - 1]; e[j - 1] = t;
        }
    int m = 0;
    for (int i = 0; i < k; i++) {
        if (m > 0 && s[i] <= e[m - 1]) {
            if (e[i] > e[m - 1]) e[m - 1] = e[i];
        } else {
            s[m] = s[i];
            e[m] = e[i];
            m++;
        }
    }
    return m;
}

static double total(const double *s, const double *e, int n) {
    double t = 0;
    for (int i = 0; i < n; i++) t += e[i] - s[i];
    return t;
}

/* Time of the intersection of two interval unions. */
static double overlap(const double *s1, const double *e1, int n1, const double *s2, const double *e2, int n2) {
    double t = 0;
    int i = 0, j = 0;
    while (i < n1 && j < n2) {
        double a = fmax(s1[i], s2[j]), b = fmin(e1[i], e2[j]);
        if (b > a) t += b - a;
        if (e1[i] < e2[j]) i++;
        else j++;
    }
    return t;
}

static void breakdown(const hw_program *p, const graph *g) {
    int n = 0;
    const hw_trace_event *ev = hw_program_trace(p, &n);
    if (!ev) return;
    double by[8][OP_KIND_COUNT + 1];
    memset(by, 0, sizeof by);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (ev[i].stream != HW_STREAM_COMPUTE) continue;
        int k = ev[i].node >= 0 ? (int)g->nodes[ev[i].node].kind : OP_KIND_COUNT;
        by[ev[i].kind][k] += ev[i].end_us - ev[i].start_us;
        sum += ev[i].end_us - ev[i].start_us;
    }
    static const char *ph[] = {"fwd", "bwd", "adamw", "send", "recv", "add", "zero"};
    printf("per-operation time of one traced 1-GPU step (sum %.3f ms; markers add a little):\n", sum / 1e3);
    for (int a = 0; a < 7; a++)
        for (int k = 0; k <= OP_KIND_COUNT; k++)
            if (by[a][k] > 0)
                printf("  %-6s %-10s %8.3f ms  %5.1f%%\n", ph[a], k < OP_KIND_COUNT ? op_kind_name((op_kind)k) : "-",
                       by[a][k] / 1e3, 100.0 * by[a][k] / sum);
}

/* Run one configuration; returns the median ms (or NAN). */
static double run(hw_engine *e, const graph *g, const int *pl, int m, schedule_order ord, int warmup, int steps,
                  const char *name, const char *trace_path, int show_breakdown) {
    hw_program_opts o;
    memset(&o, 0, sizeof o);
    o.placement = pl;
    o.sched = schedule_make(m, ord);
    o.seed = 1;
    o.adamw = hw_adamw_default();
    hw_program *p = NULL;
    char msg[512];
    row *r = &rows[n_rows++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s%s", name, suffix);
    if (use_graphs) trace_path = NULL, show_breakdown = 0; /* traced steps are not captured */
    name = r->name;
    pl_status st = hw_program_create(e, g, &o, &p, NULL, msg, sizeof msg);
    const int ntok = g->cfg.batch * g->cfg.seq_len;
    int *tok = malloc(sizeof(int) * ntok), *tgt = malloc(sizeof(int) * ntok);
    hw_make_batch(&g->cfg, 1, tok, tgt);
    if (st == PL_OK) st = hw_program_set_batch(p, tok, tgt, msg, sizeof msg);
    free(tok);
    free(tgt);
    hw_timing t;
    if (st == PL_OK) st = hw_program_time(p, warmup, steps, &t, msg, sizeof msg);
    if (st != PL_OK) {
        printf("BENCH {\"name\":\"%s\",\"error\":\"%s\"}\n", name, msg);
        hw_program_destroy(p);
        return NAN;
    }
    r->ok = 1;
    r->median_ms = t.median_us / 1e3;
    r->min_ms = t.min_us / 1e3;
    r->max_ms = t.max_us / 1e3;
    r->loss = t.last_loss;
    for (int d = 0; d < 2 && d < hw_engine_n_devices(e); d++) r->peak[d] = hw_program_peak_bytes(p, d);
    if (use_graphs) printf("GRAPH {\"name\":\"%s\",\"state\":%d}\n", name, hw_program_graph_state(p));
    printf("BENCH {\"name\":\"%s\",\"median_ms\":%.4f,\"min_ms\":%.4f,\"max_ms\":%.4f,\"sd_ms\":%.4f,\"steps\":%d,"
           "\"warmup\":%d,\"loss\":%.5f,\"peak_bytes\":[%lld,%lld],\"all_ms\":[",
           name, t.median_us / 1e3, t.min_us / 1e3, t.max_us / 1e3, t.sd_us / 1e3, steps, warmup, t.last_loss,
           (long long)r->peak[0], (long long)r->peak[1]);
    for (int i = 0; i < steps && i < 64; i++) printf("%s%.4f", i ? "," : "", t.step_us[i] / 1e3);
    printf("]}\n");
    fflush(stdout);
    if (trace_path || show_breakdown) {
        hw_step_result sr;
        if (hw_program_set_trace(p, 1) == PL_OK && hw_program_step(p, &sr, msg, sizeof msg) == PL_OK) {
            if (trace_path) {
                FILE *f = fopen(trace_path, "w");
                if (f) {
                    hw_program_write_chrome_trace(p, f);
                    fclose(f);
                }
            }
            if (show_breakdown) breakdown(p, g);
            int n = 0;
            const hw_trace_event *ev = hw_program_trace(p, &n);
            if (ev && hw_engine_n_devices(e) >= 2 && pl[0] != pl[g->n_nodes - 1]) {
                double *s1 = malloc(sizeof(double) * n), *e1 = malloc(sizeof(double) * n);
                double *s2 = malloc(sizeof(double) * n), *e2 = malloc(sizeof(double) * n);
                int n1 = busy_intervals(ev, n, 0, s1, e1), n2 = busy_intervals(ev, n, 1, s2, e2);
                double b1 = total(s1, e1, n1), b2 = total(s2, e2, n2), both = overlap(s1, e1, n1, s2, e2, n2);
                printf("TRACE {\"name\":\"%s\",\"traced_step_ms\":%.4f,\"busy_ms\":[%.4f,%.4f],\"both_busy_ms\":%.4f}\n",
                       name, sr.step_us / 1e3, b1 / 1e3, b2 / 1e3, both / 1e3);
                free(s1); free(e1); free(s2); free(e2);
            }
        }
    }
    hw_program_destroy(p);
    return r->median_ms;
}

int main(int argc, char **argv) {
    int warmup = 3, steps = 20, ngpu = -1, quick = 0;
    char msg0[256];
    const char *out = ".";
    double gemm_tflops = 395.0, copy_gbs = 4265.0; /* ceilings measured on an H200 (DEVICE.md) */
    double gemm16_tflops = 790.0;                  /* bf16 dense GEMMs: twice TF32 (issue 16) */
    hw_precision prec = HW_PREC_TF32;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--gpus") && i + 1 < argc) ngpu = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--gemm-tflops") && i + 1 < argc) gemm_tflops = atof(argv[++i]);
        else if (!strcmp(argv[i], "--copy-gbs") && i + 1 < argc) copy_gbs = atof(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--gemm16-tflops") && i + 1 < argc) gemm16_tflops = atof(argv[++i]);
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc) {
            if (hw_precision_parse(argv[++i], &prec, msg0, sizeof msg0) != PL_OK) {
                fprintf(stderr, "bench_step: %s\n", msg0);
                return 2;
            }
        }
        else if (!strcmp(argv[i], "--suffix") && i + 1 < argc) suffix = argv[++i];
        else if (!strcmp(argv[i], "--graphs")) {
            use_graphs = 1;
            suffix = "_graph";
        }
        else {
            fprintf(stderr, "usage: bench_step [--warmup W] [--steps K] [--out DIR] [--gpus N] [--graphs] [--quick] "
                            "[--precision fp32|tf32|bf16]\n");
            return 2;
        }
    }
    int avail = hw_cuda_device_count();
    if (avail < 1) {
        fprintf(stderr, "bench_step: no GPU\n");
        return 2;
    }
    if (ngpu < 0 || ngpu > avail) ngpu = avail;
    gpt_config cfg;
    char msg[256];
    graph *g = NULL;
    if (gpt_config_parse("default", &cfg, msg, sizeof msg) != PL_OK || graph_build_gpt(&cfg, &g, msg, sizeof msg) != PL_OK)
        return 1;
    const int nn = g->n_nodes;

    /* the floors */
    print_floor(g, "tf32", gemm_tflops, copy_gbs);
    print_floor(g, "bf16", gemm16_tflops, copy_gbs);

    int *pl = calloc((size_t)nn, sizeof(int));
    int g0[1] = {0}, g01[2] = {0, 1};
    char path[1024];
    if (quick) { /* one configuration only (per-kernel profiles) */
        hw_engine *eq = engine_prec(1, g0, prec);
        char name[64];
        snprintf(name, sizeof name, "1gpu_m1_%s", hw_precision_name(prec));
        run(eq, g, pl, 1, SCHED_1F1B, warmup, steps, name, NULL, 0);
        hw_engine_destroy(eq);
        free(pl);
        graph_destroy(g);
        return 0;
    }
    hw_engine *e1 = engine(1, g0, 0);
    snprintf(path, sizeof path, "%s/trace_1gpu_m1.json", out);
    run(e1, g, pl, 1, SCHED_1F1B, warmup, steps, "1gpu_m1_tf32", path, 1);
    double single4 = run(e1, g, pl, 4, SCHED_1F1B, warmup, steps, "1gpu_m4_tf32", NULL, 0);
    hw_engine_destroy(e1);
    hw_engine *e1s = engine(1, g0, 1);
    run(e1s, g, pl, 1, SCHED_1F1B, warmup, steps, "1gpu_m1_fp32", NULL, 0);
    hw_engine_destroy(e1s);
    hw_engine *e1b = engine_prec(1, g0, HW_PREC_BF16);
    snprintf(path, sizeof path, "%s/trace_1gpu_m1_bf16.json", out);
    run(e1b, g, pl, 1, SCHED_1F1B, warmup, steps, "1gpu_m1_bf16", path, 1);
    hw_engine_destroy(e1b);

    if (ngpu >= 2) {
        hw_engine *e2 = engine(2, g01, 0);
        /* cut after node c: stage 0 = nodes 0..c, stage 1 = the rest */
        int cuts[] = {12, 18, 24, 30, 36, 37};
        double best = INFINITY;
        int best_cut = -1;
        for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
            for (int i = 0; i < nn; i++) pl[i] = i <= cuts[k] ? 0 : 1;
            char name[64];
            snprintf(name, sizeof name, "2gpu_1f1b_m4_cut%d", cuts[k]);
            double t = run(e2, g, pl, 4, SCHED_1F1B, warmup, steps, name, NULL, 0);
            if (t < best) {
                best = t;
                best_cut = cuts[k];
            }
        }
        for (int i = 0; i < nn; i++) pl[i] = i <= best_cut ? 0 : 1;
        char name[64];
        snprintf(name, sizeof name, "2gpu_1f1b_m4_best_cut%d", best_cut);
        snprintf(path, sizeof path, "%s/trace_2gpu_1f1b_m4.json", out);
        double t = run(e2, g, pl, 4, SCHED_1F1B, warmup, steps, name, path, 0);
        snprintf(name, sizeof name, "2gpu_gpipe_m4_cut%d", best_cut);
        run(e2, g, pl, 4, SCHED_GPIPE, warmup, steps, name, NULL, 0);
        printf("PIPELINE {\"graphs\":%d,\"single_m4_ms\":%.4f,\"two_gpu_1f1b_m4_ms\":%.4f,\"ratio\":%.3f,\"cut\":%d}\n",
               use_graphs, single4, t, t / single4, best_cut);
        hw_engine_destroy(e2);
    }

    printf("\n%-28s %10s %10s %10s %12s %12s\n", "configuration", "median ms", "min ms", "max ms", "peak GPU0", "peak GPU1");
    for (int i = 0; i < n_rows; i++) {
        char a[32], b[32];
        pl_format_bytes((double)rows[i].peak[0], a, sizeof a);
        pl_format_bytes((double)rows[i].peak[1], b, sizeof b);
        if (rows[i].ok)
            printf("%-28s %10.3f %10.3f %10.3f %12s %12s\n", rows[i].name, rows[i].median_ms, rows[i].min_ms,
                   rows[i].max_ms, a, b);
        else
            printf("%-28s failed\n", rows[i].name);
    }
    free(pl);
    graph_destroy(g);
    return 0;
}
