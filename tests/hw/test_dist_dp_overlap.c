/*
 * test_dist_dp_overlap.c: data parallelism's gradient buckets overlapped
 * with backward (issue 17 item 2; hw/dist/dist_dp.h "overlap"). CPU backend,
 * ranks forked by hw_launch.
 *
 * Bits: the overlapped buckets run the same rank-ordered sums and the same
 * division on the same floats as the synchronous ones
 * (PLACER_DP_OVERLAP=0), so after 3 steps every rank's parameters must be
 * equal bit for bit between the two modes: dp 2 on one device and on a
 * 2-device pipeline (2 micro-batches), tp 2 x dp 2 (and with sequence
 * parallelism over 2 devices, whose replicated gradients are summed over
 * tp after the dp mean), each with 1 KiB buckets
 * (dozens a device). Each overlapped run must also have gone through the
 * comm thread (hw_dp_overlap_get) with more than 2 buckets, and the
 * synchronous one must not.
 *
 * Order, not time: with PLACER_TEST_DP_HOLD=1 the comm thread holds bucket
 * 0 until the main thread has issued the step's last backward call. Only
 * an engine whose backward does not wait for its buckets gets there: the
 * tickets (one counter, a total order) must read issued0 < last_bwd <
 * start0 < end0, and the hold must not have timed out (30 s, far above a
 * step of the tiny model). No wall-time bound anywhere.
 *
 * Failure: rank 1 dies (SIGKILL) before step 2; rank 0's first collective
 * of step 2 is then bucket 0's all-reduce on its comm thread while its main
 * thread runs backward: the step must fail with one line naming the dead
 * peer (the group's error, returned at the join), the plan be destroyed
 * (the thread joined), and no process be left.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dist_dp.h"
#include "dist_group.h"
#include "dist_program.h"
#include "dist_tp.h"
#include "helpers.h"
#include "launcher.h"
#include "param_memory.h"

#define STEPS 3
#define LR 1e-3f
#define BUCKET 1024

typedef struct {
    int tp, dp, n_dev, m;
    int sp;                 /* sequence parallelism (with tp) */
    int kill;               /* world rank that dies before step 2, or -1 */
    int64_t n;              /* model view floats */
    float *params;          /* [world][n] (shared) */
    int overlapped[16];     /* hw_dp_overlap_get of each world rank */
    hw_dp_overlap_trace tr[16];
    pl_status step_st[16];  /* the first failed step's status (or PL_OK) */
    char step_msg[16][256];
} ov_ctx;

static int ov_rank(dist_group *grp, int rank, void *vctx, char *err, size_t errlen) {
    ov_ctx *c = vctx;
    dist_group *tg = NULL, *dg = grp;
    int replica = rank, first = 0, count = 0;
    gpt_config cfg;
    if (gpt_config_parse("tiny", &cfg, err, errlen) != PL_OK) return 2;
    if (c->tp > 1 && hw_tp_dp_groups(grp, c->tp, c->dp, &tg, &dg, &replica, err, errlen) != PL_OK) return 2;
    const int me = replica * c->tp + (tg ? dist_rank(tg) : 0);
    if (hw_dp_slice(c->dp, replica, cfg.batch, &first, &count, err, errlen) != PL_OK) return 2;
    gpt_config local = cfg;
    local.batch = count;
    graph *g = NULL;
    hw_engine *e = NULL;
    hw_program *p = NULL;
    int *tok = malloc(sizeof(int) * (size_t)(cfg.batch * cfg.seq_len));
    int *tgt = malloc(sizeof(int) * (size_t)(cfg.batch * cfg.seq_len));
    int rc = 2;
    if (!tok || !tgt || graph_build_gpt(&local, &g, err, errlen) != PL_OK) goto out;
    hw_engine_opts eo = {0};
    eo.backend = HW_BACKEND_CPU;
    eo.n_devices = c->n_dev;
    if (hw_engine_create(&eo, &e, err, errlen) != PL_OK) goto out;
    int pl[256];
    for (int i = 0; i < g->n_nodes; i++) pl[i] = i * c->n_dev / g->n_nodes;
    hw_program_opts o = {0};
    o.placement = pl;
    o.sched = schedule_make(c->m, SCHED_1F1B);
    o.seed = 1234;
    o.adamw = hw_adamw_default();
    o.adamw.lr = LR;
    dist_parallel par = {.dp = dg, .tp = tg, .seq_parallel = c->sp, .bucket_bytes = BUCKET};
    o.parallel = dist_parallel_hooks(&par);
    if (hw_program_create(e, g, &o, &p, NULL, err, errlen) != PL_OK) goto out;
    hw_make_batch(&cfg, 99, tok, tgt);
    if (hw_program_set_batch(p, tok + first * cfg.seq_len, tgt + first * cfg.seq_len, err, errlen) != PL_OK) goto out;
    c->step_st[me] = PL_OK;
    for (int s = 0; s < STEPS; s++) {
        hw_step_result r;
        if (s == 1 && rank == c->kill) raise(SIGKILL); /* its peers are in step 2's buckets */
        pl_status st = hw_program_step(p, &r, c->step_msg[me], sizeof c->step_msg[me]);
        if (st != PL_OK) {
            c->step_st[me] = st;
            snprintf(err, errlen, "%s", c->step_msg[me]);
            goto out;
        }
    }
    c->overlapped[me] = hw_dp_overlap_get(p, &c->tr[me]);
    if (hw_program_get_params(p, c->params + (size_t)me * (size_t)c->n, err, errlen) != PL_OK) goto out;
    rc = 0;
out:
    hw_program_destroy(p); /* joins the comm thread, also after a failed step */
    hw_engine_destroy(e);
    graph_destroy(g);
    if (tg) dist_group_destroy(tg);
    if (dg != grp) dist_group_destroy(dg);
    free(tok);
    free(tgt);
    return rc;
}

typedef struct {
    ov_ctx *c;     /* shared mapping */
    float *params; /* shared mapping, world x n */
    size_t pb;
} ov_run;

static ov_run ov_start(int tp, int dp, int n_dev, int m, int kill) {
    graph *g = tiny_graph("tiny");
    const int64_t n = hw_model_param_offsets(g, NULL);
    graph_destroy(g);
    ov_run r;
    r.c = mmap(NULL, sizeof(ov_ctx), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    r.pb = sizeof(float) * (size_t)(tp * dp) * (size_t)n;
    r.params = mmap(NULL, r.pb, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(r.c != MAP_FAILED && r.params != MAP_FAILED);
    memset(r.c, 0, sizeof *r.c);
    *r.c = (ov_ctx){.tp = tp, .dp = dp, .n_dev = n_dev, .m = m, .kill = kill, .n = n, .params = r.params};
    return r;
}

static void ov_end(ov_run r) {
    munmap(r.params, r.pb);
    munmap(r.c, sizeof *r.c);
}

/* Run with PLACER_DP_OVERLAP=overlap (and the hold when asked); the world's parameters. */
static ov_run ov_launch(int tp, int dp, int n_dev, int m, int overlap, int hold, int sp) {
    ov_run r = ov_start(tp, dp, n_dev, m, -1);
    r.c->sp = sp;
    setenv("PLACER_DP_OVERLAP", overlap ? "1" : "0", 1);
    if (hold) setenv("PLACER_TEST_DP_HOLD", "1", 1);
    char msg[512] = "";
    pl_status st = hw_launch(tp * dp, 30.0, ov_rank, r.c, NULL, msg, sizeof msg);
    unsetenv("PLACER_DP_OVERLAP");
    unsetenv("PLACER_TEST_DP_HOLD");
    cr_assert_eq(st, PL_OK, "tp %d dp %d devices %d overlap %d: %s", tp, dp, n_dev, overlap, msg);
    return r;
}

static void expect_same_bits(int tp, int dp, int n_dev, int m, int sp) {
    ov_run a = ov_launch(tp, dp, n_dev, m, 0, 0, sp), b = ov_launch(tp, dp, n_dev, m, 1, 0, sp);
    const int world = tp * dp;
    for (int r = 0; r < world; r++) {
        cr_expect(!a.c->overlapped[r], "tp %d dp %d: rank %d overlapped with PLACER_DP_OVERLAP=0", tp, dp, r);
        cr_expect(b.c->overlapped[r], "tp %d dp %d: rank %d did not go through the comm thread", tp, dp, r);
        cr_expect(b.c->tr[r].buckets > 2, "tp %d dp %d: rank %d: %d buckets", tp, dp, r, b.c->tr[r].buckets);
    }
    cr_expect(memcmp(a.params, b.params, a.pb) == 0, "tp %d dp %d devices %d: overlap changed the parameters", tp,
              dp, n_dev);
    /* and the bits are not trivially equal: the replicas trained (params moved from the seed) */
    int moved = 0;
    graph *g = tiny_graph("tiny");
    float *init = malloc(sizeof(float) * (size_t)a.c->n);
    hw_params_init(g, 1234, init);
    for (int64_t i = 0; i < a.c->n && !moved; i++) moved = a.params[i] != init[i];
    cr_expect(moved, "the parameters did not move: nothing was compared");
    free(init);
    graph_destroy(g);
    const hw_dp_overlap_trace *t = &b.c->tr[0];
    cr_log_info("tp %d dp %d devices %d: overlap = synchronous bit for bit, rank 0: %d buckets, tickets issued0 %lld "
                "start0 %lld end0 %lld last_bwd %lld join %lld",
                tp, dp, n_dev, t->buckets, (long long)t->issued0, (long long)t->start0, (long long)t->end0,
                (long long)t->last_bwd, (long long)t->join);
    ov_end(a);
    ov_end(b);
}

Test(dist_dp_overlap, dp2_gives_the_synchronous_bits, .timeout = 120) { expect_same_bits(1, 2, 1, 1, 0); }
Test(dist_dp_overlap, dp2_over_a_two_device_pipeline_gives_the_synchronous_bits, .timeout = 120) {
    expect_same_bits(1, 2, 2, 2, 0);
}
Test(dist_dp_overlap, tp2_dp2_gives_the_synchronous_bits, .timeout = 120) { expect_same_bits(2, 2, 1, 1, 0); }
/* sp: the replicated gradients' tp sum at AdamW must follow the dp mean, as in the synchronous order */
Test(dist_dp_overlap, tp2_dp2_sp_over_two_devices_gives_the_synchronous_bits, .timeout = 120) {
    expect_same_bits(2, 2, 2, 2, 1);
}

Test(dist_dp_overlap, backward_runs_while_a_bucket_is_held, .timeout = 120) {
    ov_run r = ov_launch(1, 2, 1, 2, 1, 1, 0); /* one device: its only join follows every backward call */
    for (int k = 0; k < 2; k++) {
        const hw_dp_overlap_trace *t = &r.c->tr[k];
        cr_expect(r.c->overlapped[k], "rank %d did not overlap", k);
        cr_expect_eq(t->held, 1, "rank %d: the hold %s", k,
                     t->held < 0 ? "timed out" : t->held == 2 ? "ended at a join" : "did not run");
        cr_expect(t->issued0 > 0 && t->issued0 < t->last_bwd && t->last_bwd < t->start0 && t->start0 < t->end0,
                  "rank %d: tickets issued0 %lld last_bwd %lld start0 %lld end0 %lld", k, (long long)t->issued0,
                  (long long)t->last_bwd, (long long)t->start0, (long long)t->end0);
        cr_log_info("hold, rank %d: %d buckets, issued0 %lld < last_bwd %lld < start0 %lld < end0 %lld, join %lld", k,
                    t->buckets, (long long)t->issued0, (long long)t->last_bwd, (long long)t->start0,
                    (long long)t->end0, (long long)t->join);
    }
    /* held or not, the same bits */
    ov_run s = ov_launch(1, 2, 1, 2, 0, 0, 0);
    cr_expect(memcmp(r.params, s.params, r.pb) == 0, "the held run's parameters differ from the synchronous run's");
    ov_end(r);
    ov_end(s);
}

Test(dist_dp_overlap, a_peer_killed_with_a_bucket_in_flight_fails_the_step_with_one_line, .timeout = 120) {
    ov_run r = ov_start(1, 2, 1, 1, 1);
    setenv("PLACER_DP_OVERLAP", "1", 1);
    char msg[512] = "";
    hw_launch_report rep;
    pl_status st = hw_launch(2, 30.0, ov_rank, r.c, &rep, msg, sizeof msg);
    unsetenv("PLACER_DP_OVERLAP");
    cr_expect_eq(st, PL_ERR_INTERRUPTED, "%s", msg);
    cr_expect_eq(rep.failed_rank, 1, "blamed rank %d: %s", rep.failed_rank, msg);
    cr_expect(strchr(msg, '\n') == NULL, "not one line: %s", msg);
    /* the survivor's own line: its step failed with the group's error */
    cr_expect_eq(r.c->step_st[0], PL_ERR_INTERRUPTED, "rank 0's step: %d (%s)", r.c->step_st[0], r.c->step_msg[0]);
    cr_expect(strstr(r.c->step_msg[0], "rank 1") != NULL && strchr(r.c->step_msg[0], '\n') == NULL,
              "rank 0's line: %s", r.c->step_msg[0]);
    for (int k = 0; k < 2; k++) cr_expect(kill(rep.pid[k], 0) != 0, "rank %d (pid %d) is still there", k, rep.pid[k]);
    cr_log_info("killed dp peer: %s; rank 0: %s", msg, r.c->step_msg[0]);
    ov_end(r);
}
