/*
 * test_dist_device.c: the collectives on device buffers (hw/dist/dist_device.h)
 * on the CPU backend, where "device" memory is host memory and the
 * transport is host staging: the same code path the one-GPU machine runs
 * (download, the group's collective, upload), so CI checks it bit for bit
 * against the group's own collectives. The NCCL transport needs two GPUs
 * and is not here.
 *
 *   - all-reduce (sum, max, mean), reduce-scatter and all-gather (both with
 *     the aliased in/out forms the engine uses) over 3 ranks give exactly
 *     the bits of dist_group's host collectives on the same data;
 *   - a peer that leaves makes the next collective fail with
 *     PL_ERR_INTERRUPTED and one line, well within the group's timeout;
 *   - the engine through its device-collective path
 *     (PLACER_TEST_DEVICE_COLLECTIVES=1: dp buckets, ZeRO-1 on its update
 *     buffer in the plan's arena, the sp all-reduce of replicated gradients,
 *     tensor by tensor) gives the host path's parameters bit for bit after
 *     3 steps of tp 2 x dp 2 with sp and ZeRO-1 on a 2-device pipeline, and
 *     of dp 2 with buckets;
 *   - that ZeRO-1 buffer is in the plan's static bytes and peak, so a cap
 *     below them refuses the plan at creation.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "dist_device.h"
#include "dist_dp.h"
#include "dist_program.h"
#include "dist_tp.h"
#include "helpers.h"
#include "launcher.h"

#define N_EL 1000 /* floats per rank's shard: not a multiple of anything in particular */

typedef struct {
    int ok[DIST_MAX_RANKS];        /* 1 when the rank's checks passed */
    char why[DIST_MAX_RANKS][160]; /* else what failed */
} shared_res;

static void *shared(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(p != MAP_FAILED);
    memset(p, 0, bytes);
    return p;
}

/* rank r's value i: varied signs and magnitudes, so sums round */
static float val(int r, int i) { return (float)sin(0.37 * i + 1.3 * r) * (float)(1 + (i * 7 + r) % 13) * 0.1f; }

static int coll_rank(dist_group *g, int rank, void *vctx, char *err, size_t errlen) {
    shared_res *res = vctx;
    const int size = dist_size(g);
    const int64_t n = (int64_t)size * N_EL;
    hw_backend *be = NULL;
    dist_device *xd = NULL;
    void *dev = NULL;
    float *host = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)n);
    float *got = malloc(sizeof(float) * (size_t)n);
    char *why = res->why[rank];
    int rc = 2;
    if (!host || !want || !got) goto out;
    if (hw_backend_cpu_create(1, &be, err, errlen) != PL_OK) goto out;
    if (be->ops->mem_alloc(be, 0, n * 4, &dev) != PL_OK) goto out;
    if (dist_device_create(g, be, 0, &xd, err, errlen) != PL_OK) goto out;
    if (strcmp(dist_device_transport(xd), "host staging") != 0) {
        snprintf(why, 160, "transport %s", dist_device_transport(xd));
        goto fail;
    }
    float *d = dev;
    /* all-reduce sum, max, mean */
    for (int kind = 0; kind < 3; kind++) {
        for (int64_t i = 0; i < n; i++) host[i] = val(rank, (int)i);
        be->ops->upload(be, 0, d, host, n * 4);
        memcpy(want, host, sizeof(float) * (size_t)n);
        const dist_op op = kind == 1 ? DIST_MAX : DIST_SUM;
        if (dist_allreduce_f32(g, want, n, op, err, errlen) != PL_OK) goto out;
        if (kind == 2)
            for (int64_t i = 0; i < n; i++) want[i] /= (float)size;
        if (dist_device_allreduce_f32(xd, d, n, op, kind == 2, err, errlen) != PL_OK) goto out;
        be->ops->download(be, 0, got, d, n * 4);
        if (memcmp(got, want, sizeof(float) * (size_t)n) != 0) {
            snprintf(why, 160, "all-reduce kind %d differs from the host's", kind);
            goto fail;
        }
    }
    /* reduce-scatter into in + rank N_EL (the engine's form), plain and mean */
    for (int mean = 0; mean < 2; mean++) {
        for (int64_t i = 0; i < n; i++) host[i] = val(rank, (int)i);
        be->ops->upload(be, 0, d, host, n * 4);
        if (dist_reduce_scatter_f32(g, host, want, N_EL, err, errlen) != PL_OK) goto out;
        if (mean)
            for (int i = 0; i < N_EL; i++) want[i] /= (float)size;
        float *mine = d + (int64_t)rank * N_EL;
        if (dist_device_reduce_scatter_f32(xd, d, mine, N_EL, mean, err, errlen) != PL_OK) goto out;
        be->ops->download(be, 0, got, mine, N_EL * 4);
        if (memcmp(got, want, sizeof(float) * N_EL) != 0) {
            snprintf(why, 160, "reduce-scatter (mean %d) differs from the host's", mean);
            goto fail;
        }
    }
    /* all-gather from out + rank N_EL */
    for (int i = 0; i < N_EL; i++) host[i] = val(rank, i);
    if (dist_allgather_f32(g, host, want, N_EL, err, errlen) != PL_OK) goto out;
    be->ops->zero(be, 0, d, n * 4);
    be->ops->upload(be, 0, d + (int64_t)rank * N_EL, host, N_EL * 4);
    if (dist_device_allgather_f32(xd, d + (int64_t)rank * N_EL, d, N_EL, err, errlen) != PL_OK) goto out;
    be->ops->download(be, 0, got, d, n * 4);
    if (memcmp(got, want, sizeof(float) * (size_t)n) != 0) {
        snprintf(why, 160, "all-gather differs from the host's");
        goto fail;
    }
    /* the scratch: grows, keeps its pointer when big enough */
    void *s1 = NULL, *s2 = NULL;
    if (dist_device_scratch(xd, 4096, &s1, err, errlen) != PL_OK ||
        dist_device_scratch(xd, 1024, &s2, err, errlen) != PL_OK || s1 != s2 || !s1) {
        snprintf(why, 160, "scratch %p then %p", s1, s2);
        goto fail;
    }
    res->ok[rank] = 1;
fail:
    rc = 0; /* the parent reads ok[] and why[] */
out:
    dist_device_destroy(xd);
    if (dev) be->ops->mem_free(be, 0, dev);
    hw_backend_destroy(be);
    free(host);
    free(want);
    free(got);
    return rc;
}

Test(dist_device, staging_gives_the_host_collectives_bits, .timeout = 60) {
    shared_res *res = shared(sizeof *res);
    char msg[512] = "";
    cr_assert_eq(hw_launch(3, 20.0, coll_rank, res, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    for (int r = 0; r < 3; r++) cr_expect(res->ok[r], "rank %d: %s", r, res->why[r]);
    munmap(res, sizeof *res);
}

/* Rank 1 leaves at once; rank 0's all-reduce must fail, one line, fast. */
static int leave_rank(dist_group *g, int rank, void *vctx, char *err, size_t errlen) {
    shared_res *res = vctx;
    hw_backend *be = NULL;
    dist_device *xd = NULL;
    void *dev = NULL;
    int rc = 2;
    if (hw_backend_cpu_create(1, &be, err, errlen) != PL_OK) return 2;
    if (be->ops->mem_alloc(be, 0, 4096, &dev) != PL_OK) goto out;
    if (dist_device_create(g, be, 0, &xd, err, errlen) != PL_OK) goto out;
    rc = 0;
    if (rank == 0) {
        char m[256] = "";
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        pl_status st = PL_OK;
        for (int i = 0; i < 50 && st == PL_OK; i++)
            st = dist_device_allreduce_f32(xd, dev, 1024, DIST_SUM, 0, m, sizeof m);
        clock_gettime(CLOCK_MONOTONIC, &b);
        const double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
        res->ok[0] = st == PL_ERR_INTERRUPTED && m[0] && !strchr(m, '\n') && s < 15.0;
        snprintf(res->why[0], 160, "status %d after %.1f s: %s", (int)st, s, m);
    }
out:
    dist_device_destroy(xd);
    if (dev) be->ops->mem_free(be, 0, dev);
    hw_backend_destroy(be);
    return rc;
}

Test(dist_device, a_peer_that_leaves_fails_the_collective_with_one_line, .timeout = 60) {
    shared_res *res = shared(sizeof *res);
    char msg[512] = "";
    cr_assert_eq(hw_launch(2, 20.0, leave_rank, res, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_expect(res->ok[0], "%s", res->why[0]);
    cr_log_info("dist_device leave: %s", res->why[0]);
    munmap(res, sizeof *res);
}

/* ---- the engine through the device-collective path ---- */

#define STEPS 3

typedef struct {
    int tp, dp, sp, zero, n_dev, m;
    int64_t bucket_bytes;
    int64_t n;
    float *params; /* [world][n] */
} eng_ctx;

static int eng_rank(dist_group *grp, int rank, void *vctx, char *err, size_t errlen) {
    (void)rank;
    eng_ctx *c = vctx;
    dist_group *tg = NULL, *dg = NULL;
    int replica = 0, first = 0, count = 0, rc = 2;
    gpt_config cfg;
    graph *g = NULL;
    hw_engine *e = NULL;
    hw_program *p = NULL;
    static int pl[256];
    int *tok = NULL, *tgt = NULL;
    if (gpt_config_parse("tiny", &cfg, err, errlen) != PL_OK) return 2;
    if (hw_tp_dp_groups(grp, c->tp, c->dp, &tg, &dg, &replica, err, errlen) != PL_OK) return 2;
    const int me = replica * c->tp + (tg ? dist_rank(tg) : 0);
    if (hw_dp_slice(c->dp, replica, cfg.batch, &first, &count, err, errlen) != PL_OK) goto out;
    gpt_config local = cfg;
    local.batch = count;
    if (graph_build_gpt(&local, &g, err, errlen) != PL_OK) goto out;
    for (int i = 0; i < g->n_nodes; i++) pl[i] = i * c->n_dev / g->n_nodes;
    hw_engine_opts eo = {0};
    eo.backend = HW_BACKEND_CPU;
    eo.n_devices = c->n_dev;
    tok = malloc(sizeof(int) * (size_t)(cfg.batch * cfg.seq_len));
    tgt = malloc(sizeof(int) * (size_t)(cfg.batch * cfg.seq_len));
    if (!tok || !tgt || hw_engine_create(&eo, &e, err, errlen) != PL_OK) goto out;
    hw_program_opts o = {0};
    o.placement = pl;
    o.sched = schedule_make(c->m, SCHED_1F1B);
    o.seed = 1234;
    o.adamw = hw_adamw_default();
    o.adamw.lr = 1e-3f;
    dist_parallel par = {.dp = dg, .tp = tg, .seq_parallel = c->sp, .zero = c->zero, .bucket_bytes = c->bucket_bytes};
    o.parallel = dist_parallel_hooks(&par);
    if (hw_program_create(e, g, &o, &p, NULL, err, errlen) != PL_OK) goto out;
    const char *want = getenv("PLACER_TEST_DEVICE_COLLECTIVES") ? "host staging" : "host";
    if (strcmp(hw_program_collectives(p), want) != 0) {
        snprintf(err, errlen, "collectives %s, want %s", hw_program_collectives(p), want);
        goto out;
    }
    hw_make_batch(&cfg, 99, tok, tgt);
    if (hw_program_set_batch(p, tok + first * cfg.seq_len, tgt + first * cfg.seq_len, err, errlen) != PL_OK) goto out;
    for (int s = 0; s < STEPS; s++) {
        hw_step_result r;
        if (hw_program_step(p, &r, err, errlen) != PL_OK) goto out;
    }
    float *pv = c->params + (size_t)me * (size_t)c->n;
    for (int64_t i = 0; i < c->n; i++) pv[i] = NAN;
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

static void expect_same_bits(eng_ctx c) {
    graph *g = tiny_graph("tiny");
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(g->n_nodes + 1));
    c.n = hw_model_param_offsets(g, off);
    const int world = c.tp * c.dp;
    const size_t vb = sizeof(float) * (size_t)world * (size_t)c.n;
    float *views[2];
    for (int k = 0; k < 2; k++) {
        views[k] = c.params = shared(vb);
        if (k == 1) setenv("PLACER_TEST_DEVICE_COLLECTIVES", "1", 1);
        char msg[512] = "";
        pl_status st = hw_launch(world, 20.0, eng_rank, &c, NULL, msg, sizeof msg);
        unsetenv("PLACER_TEST_DEVICE_COLLECTIVES");
        cr_assert_eq(st, PL_OK, "tp=%d dp=%d (%s path): %s", c.tp, c.dp, k ? "device" : "host", msg);
    }
    cr_expect(memcmp(views[0], views[1], vb) == 0, "tp=%d dp=%d sp=%d zero=%d: the device path's parameters differ",
              c.tp, c.dp, c.sp, c.zero);
    munmap(views[0], vb);
    munmap(views[1], vb);
    free(off);
    graph_destroy(g);
}

Test(dist_device, the_engine_through_the_device_path_gives_the_host_bits, .timeout = 120) {
    expect_same_bits((eng_ctx){2, 2, 1, 1, 2, 2, 0, 0, NULL});     /* tp 2 x dp 2, sp, ZeRO-1, 2-device pipeline */
    expect_same_bits((eng_ctx){1, 2, 0, 0, 1, 1, 4096, 0, NULL});  /* dp 2, buckets of 4 KiB */
    expect_same_bits((eng_ctx){2, 1, 1, 0, 1, 1, 0, 0, NULL});     /* tp 2 with sp: the replicated sums */
}

/* ---- ZeRO-1's update buffer in the plan's arena ----
 * On device buffers ZeRO-1's update reduce-scatters from, and all-gathers
 * into, dp shards of S floats (S = ceil(n / dp), n the device's
 * parameters). The plan carves that buffer in the arena beside the
 * moments, so static_bytes and the peak count it and a cap below the peak
 * refuses the plan at creation; the host path stages through host memory
 * and needs none. Each rank of dp 2 on one device compiles zero 1 on the
 * host path, then on the device path (the same calls on both ranks: plan
 * creation is collective), then both under a cap 1 byte below the device
 * path's need: the device path is refused, the host path fits. */

#define Z1_DP 2

typedef struct {
    int64_t host_static, dev_static, dev_need; /* rank 0's, bytes */
    pl_status capped, host_capped;             /* rank 0's plans under the cap: device, host path */
    int64_t n;                                 /* the device's parameters (floats) */
} z1_mem;

static pl_status z1_plan(hw_engine *e, const graph *g, dist_group *dg, const int64_t *caps, hw_mem_report *mem,
                         char *err, size_t errlen) {
    static int pl[256];
    for (int i = 0; i < g->n_nodes; i++) pl[i] = 0;
    hw_program_opts o = {0};
    o.placement = pl;
    o.sched = schedule_make(1, SCHED_1F1B);
    o.seed = 1234;
    o.adamw = hw_adamw_default();
    o.caps = caps;
    dist_parallel par = {.dp = dg, .zero = 1};
    o.parallel = dist_parallel_hooks(&par);
    hw_program *p = NULL;
    pl_status st = hw_program_create(e, g, &o, &p, mem, err, errlen);
    hw_program_destroy(p);
    return st;
}

static int z1_rank(dist_group *grp, int rank, void *vctx, char *err, size_t errlen) {
    z1_mem *z = vctx;
    gpt_config cfg;
    graph *g = NULL;
    hw_engine *e = NULL;
    int first = 0, count = 0, rc = 2;
    if (gpt_config_parse("tiny", &cfg, err, errlen) != PL_OK) return 2;
    if (hw_dp_slice(Z1_DP, rank, cfg.batch, &first, &count, err, errlen) != PL_OK) return 2;
    cfg.batch = count;
    if (graph_build_gpt(&cfg, &g, err, errlen) != PL_OK) return 2;
    hw_engine_opts eo = {0};
    eo.backend = HW_BACKEND_CPU;
    eo.n_devices = 1;
    if (hw_engine_create(&eo, &e, err, errlen) != PL_OK) goto out;
    hw_mem_report host, dev, capped;
    unsetenv("PLACER_TEST_DEVICE_COLLECTIVES");
    if (z1_plan(e, g, grp, NULL, &host, err, errlen) != PL_OK) goto out;
    setenv("PLACER_TEST_DEVICE_COLLECTIVES", "1", 1);
    if (z1_plan(e, g, grp, NULL, &dev, err, errlen) != PL_OK) goto out;
    int64_t caps[HW_MAX_DEVICES] = {dev.need_bytes[0] - 1};
    char why[256] = "";
    const pl_status cst = z1_plan(e, g, grp, caps, &capped, why, sizeof why);
    unsetenv("PLACER_TEST_DEVICE_COLLECTIVES");
    const pl_status hst = z1_plan(e, g, grp, caps, &capped, why, sizeof why);
    if (rank == 0) {
        z->host_static = host.static_bytes[0];
        z->dev_static = dev.static_bytes[0];
        z->dev_need = dev.need_bytes[0];
        z->capped = cst;
        z->host_capped = hst;
    }
    rc = 0;
out:
    hw_engine_destroy(e);
    graph_destroy(g);
    return rc;
}

Test(dist_device, zero1_update_buffer_is_in_the_plans_static_bytes_and_peak, .timeout = 60) {
    z1_mem *z = shared(sizeof *z);
    graph *g = tiny_graph("tiny");
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(g->n_nodes + 1));
    z->n = hw_model_param_offsets(g, off);
    char msg[512] = "";
    cr_assert_eq(hw_launch(Z1_DP, 20.0, z1_rank, z, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    const int64_t S = hw_dp_shard_floats(z->n, Z1_DP);
    const int64_t want = (S * Z1_DP * 4 + HW_ARENA_ALIGN - 1) / HW_ARENA_ALIGN * HW_ARENA_ALIGN;
    cr_expect_eq(z->dev_static - z->host_static, want,
                 "static bytes %lld on the device path, %lld on the host path: %lld apart, the buffer is %lld",
                 (long long)z->dev_static, (long long)z->host_static, (long long)(z->dev_static - z->host_static),
                 (long long)want);
    cr_expect(z->dev_need >= z->dev_static, "need %lld below static %lld", (long long)z->dev_need,
              (long long)z->dev_static);
    cr_expect_eq(z->capped, PL_ERR_DEVICE_OOM, "a cap 1 byte below the need of %lld: status %d",
                 (long long)z->dev_need, (int)z->capped);
    cr_expect_eq(z->host_capped, PL_OK, "the host path (no buffer) under the same cap: status %d",
                 (int)z->host_capped);
    free(off);
    graph_destroy(g);
    munmap(z, sizeof *z);
}
