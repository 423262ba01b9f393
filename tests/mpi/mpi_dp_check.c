/*
 * mpi_dp_check.c: data parallelism and ZeRO-1 over Open MPI on the CPU
 * backend, checked against one process (issue 17). Run under mpirun (the
 * Criterion test tests/hw/test_dist_mpi.c does):
 *   mpirun -np N mpi_dp_check [--zero 0|1] [--devices D] [--micro-batches M]
 *                             [--bucket-bytes B] [--config TEXT]
 * Every rank runs its 1/N of the batch for 3 AdamW steps (lr 1e-3) with
 * the plan's dp group from MPI_COMM_WORLD (hw/dist/dist_mpi.h); then rank 0
 * broadcasts its parameters and every rank compares its own bit for bit
 * (replicas must stay identical), and rank 0 runs the same 3 steps in one
 * process on the full batch and compares. Rank 0 prints one line:
 *   mpi_dp_check: np 2 zero 1 devices 2 m 1: loss rel 1.2e-10, params max
 *   1.5e-07 mean 2.3e-10 (lr 0.001), replicas identical, static bytes
 *   rank 0 58880/56064; ok
 * and the job exits 0 when the figures are inside the tolerances of
 * tests/hw/test_dist_dp.c (loss 1e-8 relative, parameters max 0.05 lr,
 * mean 1e-3 lr: MPI's reduction order differs from one process's only in
 * the float roundings those bounds allow for), else 1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_dp.h"
#include "dist_group.h"
#include "dist_mpi.h"
#include "dist_program.h"
#include "graph.h"
#include "hw.h"
#include "param_memory.h"

#define STEPS 3
#define LR 1e-3f

typedef struct {
    const char *config;
    int zero, n_dev, m;
    long long bucket;
} check_args;

/* 3 steps of the plan on rows [first, first + count) of the batch; losses
 * and final params (model view) out. dp may be NULL (one process). */
static int run_steps(const check_args *a, dist_group *dp, int first, int count, double *loss, float *params,
                     int64_t *static_bytes, char *err, size_t len) {
    gpt_config cfg;
    if (gpt_config_parse(a->config, &cfg, err, len) != PL_OK) return 1;
    const int T = cfg.seq_len, nt = cfg.batch * T;
    int *tok = malloc(sizeof(int) * (size_t)nt), *tgt = malloc(sizeof(int) * (size_t)nt);
    graph *g = NULL;
    hw_engine *e = NULL;
    hw_program *p = NULL;
    int rc = 1;
    if (!tok || !tgt) {
        snprintf(err, len, "out of host memory");
        goto out;
    }
    hw_make_batch(&cfg, 99, tok, tgt);
    gpt_config local = cfg;
    local.batch = count;
    if (graph_build_gpt(&local, &g, err, len) != PL_OK) goto out;
    hw_engine_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.backend = HW_BACKEND_CPU;
    eo.n_devices = a->n_dev;
    if (hw_engine_create(&eo, &e, err, len) != PL_OK) goto out;
    int pl[1024];
    for (int i = 0; i < g->n_nodes && i < 1024; i++) pl[i] = i * a->n_dev / g->n_nodes;
    hw_program_opts o;
    memset(&o, 0, sizeof o);
    o.placement = pl;
    o.sched = schedule_make(a->m, SCHED_1F1B);
    o.seed = 1234;
    o.adamw = hw_adamw_default();
    o.adamw.lr = LR;
    dist_parallel par = {.dp = dp, .zero = dp ? a->zero : 0, .bucket_bytes = dp ? a->bucket : 0};
    o.parallel = dist_parallel_hooks(&par);
    hw_mem_report mem;
    if (hw_program_create(e, g, &o, &p, &mem, err, len) != PL_OK) goto out;
    if (static_bytes)
        for (int d = 0; d < a->n_dev; d++) static_bytes[d] = mem.static_bytes[d];
    if (hw_program_set_batch(p, tok + (size_t)first * T, tgt + (size_t)first * T, err, len) != PL_OK) goto out;
    for (int s = 0; s < STEPS; s++) {
        hw_step_result r;
        if (hw_program_step(p, &r, err, len) != PL_OK) goto out;
        loss[s] = r.loss;
    }
    if (hw_program_get_params(p, params, err, len) != PL_OK) goto out;
    rc = 0;
out:
    hw_program_destroy(p);
    hw_engine_destroy(e);
    graph_destroy(g);
    free(tok);
    free(tgt);
    return rc;
}

static int parse_args(int argc, char **argv, check_args *a) {
    a->config = "tiny";
    a->zero = 0;
    a->n_dev = 1;
    a->m = 1;
    a->bucket = 0;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return 1;
        if (!strcmp(k, "--zero")) a->zero = atoi(v);
        else if (!strcmp(k, "--devices")) a->n_dev = atoi(v);
        else if (!strcmp(k, "--micro-batches")) a->m = atoi(v);
        else if (!strcmp(k, "--bucket-bytes")) a->bucket = atoll(v);
        else if (!strcmp(k, "--config")) a->config = v;
        else return 1;
        i++;
    }
    return a->n_dev < 1 || a->n_dev > HW_MAX_DEVICES || a->m < 1;
}

int main(int argc, char **argv) {
    check_args a;
    if (parse_args(argc, argv, &a)) {
        fprintf(stderr, "usage: mpirun -np N mpi_dp_check [--zero 0|1] [--devices D] [--micro-batches M] "
                        "[--bucket-bytes B] [--config TEXT]\n");
        return 2;
    }
    char err[512] = "";
    dist_group *w = NULL;
    if (dist_mpi_world(30.0, &w, err, sizeof err) != PL_OK) {
        fprintf(stderr, "mpi_dp_check: %s\n", err);
        return 1;
    }
    const int rank = dist_rank(w), np = dist_size(w);
    gpt_config cfg;
    graph *g0 = NULL;
    if (gpt_config_parse(a.config, &cfg, err, sizeof err) != PL_OK ||
        graph_build_gpt(&cfg, &g0, err, sizeof err) != PL_OK) {
        fprintf(stderr, "mpi_dp_check: rank %d: %s\n", rank, err);
        return 1;
    }
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(g0->n_nodes + 1));
    const int64_t n = off ? hw_model_param_offsets(g0, off) : 0;
    free(off);
    graph_destroy(g0);
    float *mine = malloc(sizeof(float) * (size_t)n), *root = malloc(sizeof(float) * (size_t)n);
    float *ref = malloc(sizeof(float) * (size_t)n);
    double loss[STEPS], ref_loss[STEPS];
    int64_t stat[HW_MAX_DEVICES] = {0};
    int first = 0, count = 0;
    if (!mine || !root || !ref) {
        fprintf(stderr, "mpi_dp_check: rank %d: out of host memory\n", rank);
        return 1;
    }
    if (hw_dp_slice(np, rank, cfg.batch, &first, &count, err, sizeof err) != PL_OK ||
        run_steps(&a, w, first, count, loss, mine, stat, err, sizeof err) != 0) {
        fprintf(stderr, "mpi_dp_check: rank %d: %s\n", rank, err);
        return 1;
    }
    /* replicas: everyone against rank 0's bits */
    memcpy(root, mine, sizeof(float) * (size_t)n);
    double differ = 0;
    if (dist_broadcast(w, root, (int64_t)sizeof(float) * n, 0, err, sizeof err) != PL_OK) {
        fprintf(stderr, "mpi_dp_check: rank %d: %s\n", rank, err);
        return 1;
    }
    differ = memcmp(root, mine, sizeof(float) * (size_t)n) != 0;
    if (dist_allreduce_f64(w, &differ, 1, DIST_SUM, err, sizeof err) != PL_OK) {
        fprintf(stderr, "mpi_dp_check: rank %d: %s\n", rank, err);
        return 1;
    }
    int rc = 0;
    if (rank == 0) {
        if (run_steps(&a, NULL, 0, cfg.batch, ref_loss, ref, NULL, err, sizeof err) != 0) {
            fprintf(stderr, "mpi_dp_check: reference: %s\n", err);
            return 1;
        }
        double lrel = 0, mx = 0, sum = 0;
        for (int s = 0; s < STEPS; s++) {
            double r = fabs(loss[s] - ref_loss[s]) / fabs(ref_loss[s]);
            if (r > lrel) lrel = r;
        }
        for (int64_t i = 0; i < n; i++) {
            double d = fabs((double)mine[i] - (double)ref[i]);
            sum += d;
            if (d > mx) mx = d;
        }
        const double mean = sum / (double)n;
        const int ok = differ == 0 && lrel < 1e-8 && mx < 0.05 * LR && mean < 1e-3 * LR;
        printf("mpi_dp_check: np %d zero %d devices %d m %d bucket %lld: loss rel %.3g, params max %.3g mean %.3g "
               "(lr %g), replicas %s, static bytes rank 0",
               np, a.zero, a.n_dev, a.m, a.bucket, lrel, mx, mean, (double)LR, differ == 0 ? "identical" : "differ");
        for (int d = 0; d < a.n_dev; d++) printf("%s%lld", d ? "/" : " ", (long long)stat[d]);
        printf("; %s\n", ok ? "ok" : "FAILED");
        fflush(stdout);
        rc = !ok;
    }
    free(mine);
    free(root);
    free(ref);
    /* every rank leaves with rank 0's verdict */
    double verdict = rc;
    if (dist_broadcast(w, &verdict, sizeof verdict, 0, err, sizeof err) != PL_OK) {
        fprintf(stderr, "mpi_dp_check: rank %d: %s\n", rank, err);
        return 1;
    }
    dist_group_destroy(w);
    dist_mpi_finalize();
    return verdict != 0;
}
