/*
 * layout_speed.c: how long the layout simulator (sim/layout/layout_sim.h) takes
 * for one step of the published layouts, on one core. Issue 13's target: a
 * 16,384-GPU Llama 3 405B layout in <= 10 ms; issue 26's: DeepSeek-V3
 * (the shipped data/models/deepseek-v3.json) on 2,048 H800s, PP16 EP64, in
 * <= 5 ms.
 *
 * Clusters are filled in directly (tests/sim/cost_fixtures.h: DGX A100
 * Selene-class; an H100 cluster with Llama 3's 400 Gb/s per GPU and
 * 3,072-GPU pods at 1:7), so the figure does not depend on cluster files;
 * the models are the shipped configs (data/models). For each case: layout_sim_create once (groups, collectives,
 * orders), then layout_sim_run (both of its passes: the bubble pass with
 * free sends and the real one) repeated for --seconds after a warm-up;
 * reported as the median and the minimum of --rounds rounds of the mean
 * time per run, with the thread's CPU time (--cpu, default) or wall time.
 *
 *   layout_speed [--seconds S] [--rounds R] [--wall]
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cost_fixtures.h"
#include "layout_sim.h"
#include "cluster_file.h"
#include "model_config.h"

static double now_us(int cpu) {
    struct timespec t;
    clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static cluster h100_llama3(int nodes) {
    cluster c = costfix_a100(nodes);
    strcpy(c.name, "bench-h100-llama3");
    strcpy(c.gpus[0].name, "H100 SXM 80GB");
    c.gpus[0].peak_flops[PRECISION_BF16] = 989e12;
    c.gpus[0].peak_flops[PRECISION_FP16] = 989e12;
    c.gpus[0].peak_flops[PRECISION_TF32] = 494e12;
    c.gpus[0].hbm_bw = 3.35e12;
    c.gpus[0].sm_count = 132;
    c.intra_bw = 450e9;
    c.nic_bw = 50e9;
    c.pod_gpus = 3072;
    c.pod_oversubscription = 7;
    return c;
}

/* DeepSeek-V3's cluster: H800 (the H100's compute and HBM, NVLink 200 GB/s
 * per direction), 8 x 400 Gb/s InfiniBand per node (data/clusters/h800-deepseek.json's figures). */
static cluster h800_deepseek(int nodes) {
    cluster c = h100_llama3(nodes);
    c.intra_bw = 200e9;
    c.nic_bw = 50e9;
    c.pod_gpus = 0;
    c.pod_oversubscription = 1.0;
    return c;
}

typedef struct {
    const char *label;
    int model; /* 0 llama 405B 8K, 1 Megatron 1T, 2 Megatron 530B, 3 llama 405B 131K, 4 DeepSeek-V3 */
    const char *layout;
} bench_case;

static const bench_case CASES[] = {
    {"Llama 3 405B, 16384 GPUs, vp 1", 0, "tp=8,sp=1,pp=16,dp=128,mbs=1,gbs=2048,zero=fsdp,precision=bf16"},
    {"Llama 3 405B, 16384 GPUs, vp 2", 0, "tp=8,sp=1,pp=16,vp=2,dp=128,mbs=1,gbs=2048,zero=fsdp,precision=bf16"},
    {"Llama 3 405B, 16384 GPUs, vp 4", 0, "tp=8,sp=1,pp=16,vp=4,dp=128,mbs=1,gbs=2048,zero=fsdp,precision=bf16"},
    {"Llama 3 405B, 16384 GPUs, vp 7", 0, "tp=8,sp=1,pp=16,vp=7,dp=128,mbs=1,gbs=2048,zero=fsdp,precision=bf16"},
    {"Llama 3 405B 131K, cp 16, vp 4", 3, "tp=8,sp=1,cp=16,pp=16,vp=4,dp=8,mbs=1,gbs=128,zero=fsdp,precision=bf16"},
    {"Megatron 1T, 3072 GPUs, m 512", 1, "tp=8,pp=64,dp=6,mbs=1,gbs=3072,recompute=full,precision=fp16"},
    {"Megatron 530B, 2520 GPUs, vp 3", 2, "tp=8,pp=35,vp=3,dp=9,mbs=1,gbs=2520,recompute=full,precision=fp16"},
    {"DeepSeek-V3, 2048 H800, PP16 EP64", 4, "tp=1,pp=16,dp=128,ep=64,zero=1,mbs=1,gbs=15360,recompute=full"},
    /* issue 33: as trained (DualPipe, FP8 blockwise, DeepEP, its memory savings) */
    {"DeepSeek-V3 as trained, DualPipe", 4,
     "tp=1,pp=16,vp=2,dp=128,ep=64,zero=1,mbs=1,gbs=15360,recompute=none,precision=fp8,fp8=blockwise,"
     "sched=dualpipe,dispatcher=flex,mem=norm_mla+fp8_act+bf16_moments+mtp_last"},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

int main(int argc, char **argv) {
    double seconds = 0.3;
    int rounds = 7, cpu = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--wall")) cpu = 0;
        else {
            fprintf(stderr, "usage: layout_speed [--seconds S] [--rounds R] [--wall]\n");
            return 2;
        }
    }
    if (seconds <= 0 || rounds < 1 || rounds > 101) {
        fprintf(stderr, "layout_speed: --seconds must be > 0 and --rounds 1..101\n");
        return 2;
    }
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &set);
    sched_setaffinity(0, sizeof set, &set);
#endif
    printf("layout_speed: one thread, %s time, %d rounds of %.2f s per case; ms per layout_sim_run (both passes)\n\n",
           cpu ? "thread CPU" : "wall", rounds, seconds);
    printf("%-34s %8s %6s %10s %10s %10s %12s\n", "case", "GPUs", "m", "create ms", "median ms", "min ms",
           "step ms");
    int missed = 0, missed_moe = 0, missed_dsv3 = 0;
    for (size_t ci = 0; ci < N_CASES; ci++) {
        const bench_case *bc = &CASES[ci];
        gpt_config g;
        cluster c;
        if (bc->model == 0 || bc->model == 3) {
            g = costfix_llama405b(bc->model == 0 ? 8192 : 131072);
            c = h100_llama3(2048);
        } else if (bc->model == 1) {
            g = costfix_megatron_gpt(25600, 160, 128);
            c = costfix_a100(384);
        } else if (bc->model == 4) {
            char m[512];
            if (model_config_load("deepseek-v3", &g, NULL, 0, m, sizeof m) != PL_OK) {
                fprintf(stderr, "layout_speed: %s\n", m);
                return 1;
            }
            c = h800_deepseek(256);
            if (strstr(bc->label, "as trained")) { /* the shipped cluster file: FP8 peaks */
                if (cluster_load("h800-deepseek", NULL, &c, m, sizeof m) != PL_OK) {
                    fprintf(stderr, "layout_speed: %s\n", m);
                    return 1;
                }
                c.groups[0].n_nodes = 256;
            }
        } else {
            g = costfix_megatron_gpt(20480, 128, 105);
            c = costfix_a100(315);
        }
        layout l;
        char msg[256];
        if (layout_parse(bc->layout, &l, msg, sizeof msg) != PL_OK) {
            fprintf(stderr, "layout_speed: %s: %s\n", bc->layout, msg);
            return 1;
        }
        layout_sim *s = NULL;
        double t0 = now_us(cpu);
        if (layout_sim_create(&g, &l, &c, &s, msg, sizeof msg) != PL_OK) {
            fprintf(stderr, "layout_speed: %s: %s\n", bc->label, msg);
            return 1;
        }
        const double create_ms = (now_us(cpu) - t0) / 1e3;
        layout_result r;
        for (int w = 0; w < 3; w++)
            if (layout_sim_run(s, NULL, 0, &r, msg, sizeof msg) != PL_OK) {
                fprintf(stderr, "layout_speed: %s: %s\n", bc->label, msg);
                return 1;
            }
        double per[101];
        for (int k = 0; k < rounds; k++) {
            long n = 0;
            const double start = now_us(cpu);
            double t;
            do {
                layout_sim_run(s, NULL, 0, &r, msg, sizeof msg);
                n++;
                t = now_us(cpu);
            } while (t - start < seconds * 1e6);
            per[k] = (t - start) / n / 1e3;
        }
        qsort(per, (size_t)rounds, sizeof per[0], cmp_d);
        const double med = per[rounds / 2];
        printf("%-34s %8lld %6d %10.3f %10.3f %10.3f %12.1f\n", bc->label, (long long)r.world, r.micro_batches,
               create_ms, med, per[0], r.step_us / 1e3);
        if (bc->model == 0 && med + create_ms > 10.0) missed = 1;
        if (bc->model == 4 && med + create_ms > 5.0) missed_moe = 1;
        if (bc->model == 4 && strstr(bc->label, "as trained") && med + create_ms > 1.0) missed_dsv3 = 1;
        layout_sim_destroy(s);
    }
    printf("\ntarget (issue 13): a 16,384-GPU Llama 3 405B layout in <= 10 ms (create + run): %s\n",
           missed ? "MISSED" : "met");
    printf("target (issue 26): DeepSeek-V3 on 2,048 H800s in <= 5 ms (create + run): %s\n",
           missed_moe ? "MISSED" : "met");
    printf("target (issue 33): DeepSeek-V3 as trained (DualPipe) on 2,048 H800s in <= 1 ms (create + run): %s\n",
           missed_dsv3 ? "MISSED" : "met");
    return 0;
}
