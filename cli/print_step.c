/*
 * print_step.c: `placer step`'s text and JSON (print_step.h). The in-process
 * and the over-ranks outputs share their timing blocks (step_ms, loss,
 * tokens/s), printed by one helper each.
 */
#include "print_step.h"

#include <stdio.h>

#include "util.h"

/* "step_ms":{"median":..,"min":..,"max":..,"mean":..,"sd":..,"all":[..]} */
static void json_step_ms(const hw_timing *t, int steps) {
    printf("\"step_ms\":{\"median\":%.4f,\"min\":%.4f,\"max\":%.4f,\"mean\":%.4f,\"sd\":%.4f,\"all\":[",
           t->median_us / 1e3, t->min_us / 1e3, t->max_us / 1e3, t->mean_us / 1e3, t->sd_us / 1e3);
    for (int i = 0; i < steps && i < 64; i++) printf("%s%.4f", i ? "," : "", t->step_us[i] / 1e3);
    printf("]}");
}

/* ,"loss":{"first":..,"last":..},"tokens_per_s":.. */
static void json_loss_rate(const hw_timing *t, double tokens_per_s) {
    printf(",\"loss\":{\"first\":%.6f,\"last\":%.6f},\"tokens_per_s\":%.0f", t->first_loss, t->last_loss, tokens_per_s);
}

static double tokens_per_s(const dist_step_job *j, const hw_timing *t) {
    const int ntok = j->cfg.batch * j->cfg.seq_len;
    return t->median_us > 0 ? ntok / (t->median_us * 1e-6) : 0.0;
}

static void print_json_here(const dist_step_job *j, const dist_step_result *r, const char *key, const char *layout) {
    const hw_timing *t = &r->t;
    printf("{\"status\":\"ok\",");
    if (layout) printf("\"layout\":\"%s\",", layout);
    printf("\"config\":\"%s\",\"backend\":\"%s\",\"devices\":[", key, j->cuda ? "cuda" : "cpu");
    for (int d = 0; d < r->n_dev; d++)
        printf("%s{\"device\":%d,\"name\":\"%s\",\"physical\":%d,\"peak_bytes\":%lld,\"static_bytes\":%lld,"
               "\"cap_bytes\":%lld}",
               d ? "," : "", d, r->dev[d].name, r->dev[d].physical, (long long)r->peak_bytes[d],
               (long long)(r->peak_bytes[d] ? r->mem.static_bytes[d] : 0), (long long)r->caps[d]);
    printf("],\"placement\":\"%s\",\"schedule\":\"%s\",\"micro_batches\":%d,\"strict_fp32\":%s,\"precision\":\"%s\","
           "\"warmup\":%d,\"steps\":%d,",
           r->placement, schedule_order_name(j->sched.order), j->sched.micro_batches,
           j->strict_fp32 || j->prec == HW_PREC_FP32 ? "true" : "false", hw_precision_name(r->prec), j->warmup,
           j->steps);
    json_step_ms(t, j->steps);
    json_loss_rate(t, tokens_per_s(j, t));
    printf(",\"reorders\":%d,\"graphs\":%d}\n", r->reorders, r->graph_state);
}

static void print_text_here(const dist_step_job *j, const dist_step_result *r, const char *key, const char *layout) {
    const hw_timing *t = &r->t;
    const int nd = r->n_dev;
    printf("placer step: %s, %s m=%d, %d device%s (%s), %s\n", key, schedule_order_name(j->sched.order),
           j->sched.micro_batches, nd, nd > 1 ? "s" : "", j->cuda ? "CUDA" : "CPU reference backend",
           hw_precision_name(r->prec));
    if (layout) printf("layout      %s\n", layout);
    printf("placement   %s\n", r->placement);
    printf("step time   median %.3f ms  (min %.3f, max %.3f, sd %.3f; %d steps after %d warm-up)\n",
           t->median_us / 1e3, t->min_us / 1e3, t->max_us / 1e3, t->sd_us / 1e3, j->steps, j->warmup);
    printf("loss        %.4f (first step) -> %.4f (last step)\n", t->first_loss, t->last_loss);
    printf("throughput  %.0f tokens/s\n", tokens_per_s(j, t));
    for (int d = 0; d < nd; d++) {
        const int64_t peak = r->peak_bytes[d];
        char a[32], b[32], s2[32];
        pl_format_bytes((double)peak, a, sizeof a);
        pl_format_bytes((double)r->caps[d], b, sizeof b);
        pl_format_bytes((double)(peak ? r->mem.static_bytes[d] : 0), s2, sizeof s2);
        if (peak)
            printf("device %-3d  %s %d: peak %s (static %s) of cap %s\n", d, r->dev[d].name, r->dev[d].physical, a, s2,
                   b);
        else
            printf("device %-3d  %s %d: unused\n", d, r->dev[d].name, r->dev[d].physical);
    }
    if (r->reorders > 0)
        printf("note        %d operations ran ahead of strict schedule order (non-contiguous placement)\n",
               r->reorders);
    if (j->graphs)
        printf("graphs      %s\n", r->graph_state == 1  ? "steps replayed as CUDA graphs"
                                   : r->graph_state < 0 ? "capture failed; steps issued op by op"
                                                        : "not used (CPU backend, or one thread issues several devices)");
    if (j->trace_path) printf("trace       %s\n", j->trace_path);
}

static void print_json_ranks(const dist_step_job *j, const dist_step_result *r, const char *key, const char *layout) {
    const hw_timing *t = &r->t;
    printf("{\"status\":\"ok\",");
    if (layout) printf("\"layout\":\"%s\",", layout);
    printf("\"config\":\"%s\",\"backend\":\"%s\",\"procs\":%d,\"tp\":%d,\"sp\":%d,\"dp\":%d,"
           "\"devices_per_rank\":%d,\"global_batch\":%d,\"rank_batch\":%d,\"placement\":\"%s\","
           "\"schedule\":\"%s\",\"micro_batches\":%d,\"precision\":\"%s\",\"warmup\":%d,\"steps\":%d,",
           key, j->cuda ? "cuda" : "cpu", j->procs, j->tp, j->sp, j->procs / j->tp, j->n_dev, j->cfg.batch,
           r->rank_batch, r->placement, schedule_order_name(j->sched.order), j->sched.micro_batches,
           hw_precision_name(r->prec), j->warmup, j->steps);
    json_step_ms(t, j->steps);
    json_loss_rate(t, tokens_per_s(j, t));
    printf(",\"peak_bytes_rank0\":[");
    for (int d = 0; d < j->n_dev; d++) printf("%s%lld", d ? "," : "", (long long)r->peak_bytes[d]);
    printf("],\"zero\":%d,\"static_bytes_rank0\":[", j->zero);
    for (int d = 0; d < j->n_dev; d++) printf("%s%lld", d ? "," : "", (long long)r->mem.static_bytes[d]);
    printf("],\"transport\":\"%s\",\"collectives\":\"%s\"}\n", r->transport, r->collectives);
}

static void print_text_ranks(const dist_step_job *j, const dist_step_result *r, const char *key, const char *layout) {
    const hw_timing *t = &r->t;
    const int dp = j->procs / j->tp;
    printf("placer step: %s, %s m=%d, %d processes x %d device%s (%s, %s), %s\n", key,
           schedule_order_name(j->sched.order), j->sched.micro_batches, j->procs, j->n_dev, j->n_dev > 1 ? "s" : "",
           j->cuda ? "CUDA" : "CPU reference backend", hw_precision_name(r->prec),
           j->tp > 1 ? "tensor x data parallel" : "data parallel");
    if (j->cuda) {
        printf("devices     rank 0 on GPU");
        for (int d = 0; d < j->n_dev; d++) printf("%s%d", d ? "," : " ", r->gpus[d]);
        printf("%s; collectives %s\n",
               j->gpu_per_rank ? " (rank r on its own GPUs)" : " (every rank: logical devices sharing them)",
               r->collectives);
    }
    if (layout) printf("layout      %s\n", layout);
    if (j->tp > 1)
        printf("parallel    tp %d%s x dp %d: heads, MLP columns and vocabulary split over each %d ranks\n", j->tp,
               j->sp ? " (sequence parallel)" : "", dp, j->tp);
    printf("placement   %s (every rank)\n", r->placement);
    if (j->tp > 1)
        printf("batch       %d samples, %d per replica (each of its %d tp ranks sees them all); gradients "
               "averaged over the %d replicas before AdamW\n",
               j->cfg.batch, r->rank_batch, j->tp, dp);
    else
        printf("batch       %d samples, %d per rank; gradients averaged over %d ranks before AdamW\n", j->cfg.batch,
               r->rank_batch, dp);
    if (j->zero) printf("optimizer   ZeRO-1: AdamW m and v sharded over the %d data-parallel ranks\n", dp);
    printf("step time   median %.3f ms  (min %.3f, max %.3f, sd %.3f; slowest rank; %d steps after %d warm-up)\n",
           t->median_us / 1e3, t->min_us / 1e3, t->max_us / 1e3, t->sd_us / 1e3, j->steps, j->warmup);
    printf("loss        %.4f (first step) -> %.4f (last step), mean over the ranks\n", t->first_loss, t->last_loss);
    printf("throughput  %.0f tokens/s\n", tokens_per_s(j, t));
}

void print_step(const dist_step_job *j, const dist_step_result *r, const char *layout, int json) {
    char key[128];
    gpt_config_key(&j->cfg, key, sizeof key);
    if (j->procs && json) print_json_ranks(j, r, key, layout);
    else if (j->procs) print_text_ranks(j, r, key, layout);
    else if (json) print_json_here(j, r, key, layout);
    else print_text_here(j, r, key, layout);
    fflush(stdout);
}

void print_step_oom_json(const dist_step_result *r, const char *msg) {
    const hw_mem_report *m = &r->mem;
    printf("{\"status\":\"oom\",\"oom_device\":%d,\"message\":", m->oom_device);
    pl_json_string(stdout, msg);
    printf(",\"memory\":[");
    for (int d = 0; d < m->n_devices; d++)
        printf("%s{\"device\":%d,\"need_bytes\":%lld,\"static_bytes\":%lld,\"cap_bytes\":%lld}", d ? "," : "", d,
               (long long)m->need_bytes[d], (long long)m->static_bytes[d], (long long)m->cap_bytes[d]);
    printf("]}\n");
}
