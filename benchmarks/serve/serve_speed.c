/*
 * serve_speed.c: how fast placer serve answers a slider change, at the
 * server (cli/serve_api.h's serve_handle: the request parsed, the layout
 * loaded and simulated, the JSON written), for the two sizes issue 35
 * names: a 16,384-GPU dense layout (Llama 3 405B's Table 4 layout, tp 8,
 * pp 16, dp 128, on llama3-h100) and a 2,048-GPU MoE layout (DeepSeek-V3 on
 * h800-deepseek, pp 16, dp 128, ep 64). A slider change sends two requests:
 * POST /api/layout (the figures) and POST /api/validate (the greyed
 * values); both are timed. Then a 2,048-GPU plan's stream: the time to its
 * first progress line, the lines, the whole plan.
 *
 * Usage: serve_speed [--reps N]   (default 30; 3 warm-up requests first)
 * Prints per request: median, p95 and max in ms, and whether the median is
 * within the 50 ms target. Run from the source tree (shipped names).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_api.h"
#include "util.h"

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bench(serve_ctx *c, const char *what, const char *path, const char *body, int reps) {
    double *t = malloc(sizeof(double) * (size_t)reps);
    serve_reply r;
    for (int i = 0; i < 3; i++) {
        serve_handle(c, "POST", path, body, strlen(body), &r);
        if (r.status != 200) {
            fprintf(stderr, "serve_speed: %s: HTTP %d %s\n", what, r.status, r.body ? r.body : "");
            exit(1);
        }
        serve_reply_free(&r);
    }
    for (int i = 0; i < reps; i++) {
        const double t0 = pl_now_us();
        serve_handle(c, "POST", path, body, strlen(body), &r);
        t[i] = (pl_now_us() - t0) / 1e3;
        serve_reply_free(&r);
    }
    qsort(t, (size_t)reps, sizeof *t, cmp);
    const double med = t[reps / 2], p95 = t[(int)(0.95 * (reps - 1))], mx = t[reps - 1];
    printf("%-44s %-14s median %7.2f ms  p95 %7.2f ms  max %7.2f ms  %s\n", what, path, med, p95, mx,
           med <= 50 ? "<= 50 ms" : "OVER 50 ms");
    free(t);
}

typedef struct {
    double t0, first;
    int lines;
} stream;

static int on_line(void *ctx, const char *text, size_t n) {
    stream *s = ctx;
    (void)text;
    (void)n;
    if (!s->lines++) s->first = (pl_now_us() - s->t0) / 1e3;
    return 0;
}

int main(int argc, char **argv) {
    int reps = 30;
    if (argc == 3 && !strcmp(argv[1], "--reps")) reps = atoi(argv[2]);
    if (reps < 1) reps = 1;
    serve_options o = {NULL, NULL};
    serve_ctx *c = NULL;
    char msg[256];
    if (serve_ctx_create(&o, &c, msg, sizeof msg) != PL_OK) {
        fprintf(stderr, "serve_speed: %s\n", msg);
        return 1;
    }
    static const char dense[] = "{\"model\": \"llama-3-405b\", \"cluster\": \"llama3-h100\", \"layout\": "
                                "\"tp=8,sp=1,cp=1,pp=16,vp=1,dp=128,zero=1,mbs=1,gbs=2048,recompute=none,precision=bf16\"";
    static const char moe[] = "{\"model\": \"deepseek-v3\", \"cluster\": \"h800-deepseek\", \"layout\": "
                              "\"tp=1,sp=0,cp=1,pp=16,vp=1,dp=128,zero=1,mbs=1,gbs=15360,recompute=selective,"
                              "precision=bf16,ep=64,etp=1\"";
    static const char tries[] = ", \"try\": {\"tp\": [1, 2, 4, 8, 16, 32, 64], \"cp\": [1, 2, 4, 8, 16, 32], "
                                "\"pp\": [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128], \"vp\": [1, 2, 3, 4, 5, "
                                "6, 7, 8], \"dp\": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096], \"mbs\": "
                                "[1, 2, 4, 8, 16], \"recompute\": [\"none\", \"selective\", \"full\"], \"zero\": "
                                "[\"0\", \"1\", \"2\", \"3\", \"fsdp\"]}}";
    char body[4096];
    printf("placer serve: one slider change at the server (%d requests after 3 warm-ups; target 50 ms)\n", reps);
    snprintf(body, sizeof body, "%s}", dense);
    bench(c, "16,384-GPU dense: Llama 3 405B, tp8 pp16 dp128", "/api/layout", body, reps);
    snprintf(body, sizeof body, "%s%s", dense, tries);
    bench(c, "16,384-GPU dense: Llama 3 405B, tp8 pp16 dp128", "/api/validate", body, reps);
    snprintf(body, sizeof body, "%s}", moe);
    bench(c, "2,048-GPU MoE: DeepSeek-V3, pp16 dp128 ep64", "/api/layout", body, reps);
    snprintf(body, sizeof body, "%s%s", moe, tries);
    bench(c, "2,048-GPU MoE: DeepSeek-V3, pp16 dp128 ep64", "/api/validate", body, reps);
    /* a 2k-GPU plan's stream */
    static const char plan[] = "{\"model\": \"llama-3-405b\", \"cluster\": \"llama3-h100\", \"gpus\": 2048, "
                               "\"global_batch\": 2048}";
    serve_plan_job *job = NULL;
    serve_reply err;
    if (serve_plan_parse(c, plan, strlen(plan), &job, &err) != 0) {
        fprintf(stderr, "serve_speed: plan: %s\n", err.body);
        return 1;
    }
    stream s = {pl_now_us(), 0, 0};
    serve_plan_run(c, job, on_line, &s);
    printf("2,048-GPU plan (Llama 3 405B, llama3-h100, batch 2048): first progress line after %.0f ms, %d lines, "
           "%.2f s in all\n", s.first, s.lines, (pl_now_us() - s.t0) / 1e6);
    serve_plan_job_free(job);
    serve_ctx_destroy(c);
    return 0;
}
