/*
 * test_dist.c: the process group (hw/dist/dist_group.h) and the fork launcher
 * (hw/dist/launcher.h) on the CPU: collectives agree on every rank, a killed or
 * hung rank makes the others fail within the timeout with a line naming
 * it, and no rank outlives hw_launch.
 *
 * Ranks cannot use Criterion's asserts (they are the launcher's children);
 * they write what they saw into an anonymous shared mapping made before
 * the launch, and return non-zero with a reason on a wrong value. The test
 * process checks the mapping and the launch report afterwards.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "dist_group.h"
#include "launcher.h"

typedef struct {
    float sum[DIST_MAX_RANKS][8];
    double mx[DIST_MAX_RANKS];
    int bcast[DIST_MAX_RANKS][3];
    int done[DIST_MAX_RANKS];
} shared_out;

static shared_out *map_shared(void) {
    void *p = mmap(NULL, sizeof(shared_out), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(p != MAP_FAILED);
    memset(p, 0, sizeof(shared_out));
    return p;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int collectives_rank(dist_group *g, int rank, void *ctx, char *err, size_t errlen) {
    shared_out *o = ctx;
    float v[8];
    for (int i = 0; i < 8; i++) v[i] = (float)(rank + 1) * (float)(i + 1);
    if (dist_barrier(g, err, errlen) != PL_OK) return 3;
    if (dist_allreduce_f32(g, v, 8, DIST_SUM, err, errlen) != PL_OK) return 3;
    memcpy(o->sum[rank], v, sizeof v);
    double m = 10.0 * rank;
    if (dist_allreduce_f64(g, &m, 1, DIST_MAX, err, errlen) != PL_OK) return 3;
    o->mx[rank] = m;
    int b[3] = {rank, rank * 7, -rank};
    int root = dist_size(g) - 1; /* a root other than 0 goes through rank 0 */
    if (dist_broadcast(g, b, sizeof b, root, err, errlen) != PL_OK) return 3;
    memcpy(o->bcast[rank], b, sizeof b);
    if (dist_barrier(g, err, errlen) != PL_OK) return 3;
    o->done[rank] = 1;
    return 0;
}

Test(dist, collectives_agree_on_2_3_and_4_ranks) {
    for (int n = 1; n <= 4; n++) {
        shared_out *o = map_shared();
        char msg[512] = "";
        hw_launch_report rep;
        pl_status st = hw_launch(n, 10.0, collectives_rank, o, &rep, msg, sizeof msg);
        cr_assert_eq(st, PL_OK, "n=%d: %s", n, msg);
        cr_assert_eq(rep.failed_rank, -1);
        const float tri = (float)(n * (n + 1) / 2);
        for (int r = 0; r < n; r++) {
            cr_expect_eq(o->done[r], 1, "n=%d rank %d", n, r);
            for (int i = 0; i < 8; i++) cr_expect_eq(o->sum[r][i], tri * (float)(i + 1), "n=%d r=%d i=%d", n, r, i);
            cr_expect_eq(o->mx[r], 10.0 * (n - 1));
            cr_expect_eq(o->bcast[r][0], n - 1);
            cr_expect_eq(o->bcast[r][1], 7 * (n - 1));
        }
        for (int r = 0; r < n; r++) cr_expect(kill(rep.pid[r], 0) != 0 && errno == ESRCH, "rank %d still there", r);
        munmap(o, sizeof *o);
    }
}

/* Rank `victim` dies (SIGKILL) or hangs in the middle of a loop of
 * all-reduces; the others must fail. */
typedef struct {
    int victim;
    int hang;
} fault_ctx;

static int faulty_rank(dist_group *g, int rank, void *ctx, char *err, size_t errlen) {
    const fault_ctx *f = ctx;
    float v[1024];
    for (int step = 0; step < 200; step++) {
        if (rank == f->victim && step == 3) {
            if (f->hang) pause(); /* until the launcher kills it */
            else raise(SIGKILL);
        }
        for (int i = 0; i < 1024; i++) v[i] = (float)rank;
        if (dist_allreduce_f32(g, v, 1024, DIST_SUM, err, errlen) != PL_OK) return 4;
    }
    return 0;
}

Test(dist, a_killed_rank_stops_the_others_with_one_line_and_no_orphan) {
    for (int rep_i = 0; rep_i < 5; rep_i++)
        for (int n = 2; n <= 4; n += 2) {
            fault_ctx f = {rep_i % n, 0};
            hw_launch_report rep;
            char msg[512] = "";
            double t0 = now_s();
            pl_status st = hw_launch(n, 5.0, faulty_rank, &f, &rep, msg, sizeof msg);
            double dt = now_s() - t0;
            cr_assert_eq(st, PL_ERR_INTERRUPTED, "n=%d victim %d: %s", n, f.victim, msg);
            cr_expect_eq(rep.failed_rank, f.victim, "%s", msg);
            cr_expect(strstr(msg, "killed by signal 9") != NULL, "%s", msg);
            cr_expect(strchr(msg, '\n') == NULL, "%s", msg);
            /* a death is seen as a closed socket at once, not after the timeout */
            cr_expect(dt < 4.0, "took %.2f s: %s", dt, msg);
            for (int r = 0; r < n; r++)
                cr_expect(kill(rep.pid[r], 0) != 0 && errno == ESRCH, "rank %d (pid %d) left behind", r,
                          (int)rep.pid[r]);
        }
}

Test(dist, a_hung_rank_times_out_the_others_and_is_killed) {
    fault_ctx f = {1, 1};
    hw_launch_report rep;
    char msg[512] = "";
    double t0 = now_s();
    pl_status st = hw_launch(3, 0.5, faulty_rank, &f, &rep, msg, sizeof msg);
    double dt = now_s() - t0;
    cr_assert_eq(st, PL_ERR_INTERRUPTED, "%s", msg);
    /* rank 0 gives up on rank 1 after 0.5 s and is blamed (it exited, the hung one was killed by us) */
    cr_expect_eq(rep.failed_rank, 0, "%s", msg);
    cr_expect(strstr(msg, "no word from rank 1") != NULL, "%s", msg);
    cr_expect(rep.killed_by_us[1] == 1 && rep.signal[1] == SIGKILL, "%s", msg);
    cr_expect(dt < 3.0, "took %.2f s", dt);
    for (int r = 0; r < 3; r++) cr_expect(kill(rep.pid[r], 0) != 0 && errno == ESRCH, "rank %d left behind", r);
}

static int mismatched_rank(dist_group *g, int rank, void *ctx, char *err, size_t errlen) {
    (void)ctx;
    float v[4] = {0};
    /* rank 1 reduces 3 elements where the others reduce 4 */
    if (dist_allreduce_f32(g, v, rank == 1 ? 3 : 4, DIST_SUM, err, errlen) != PL_OK) return 5;
    return 0;
}

Test(dist, mismatched_collectives_are_an_error_not_garbage) {
    hw_launch_report rep;
    char msg[512] = "";
    pl_status st = hw_launch(2, 2.0, mismatched_rank, NULL, &rep, msg, sizeof msg);
    cr_assert_eq(st, PL_ERR_INTERRUPTED, "%s", msg);
    cr_expect(strstr(msg, "out of step") != NULL, "%s", msg);
}

Test(dist, bad_arguments) {
    char msg[256];
    dist_group *g = (dist_group *)1;
    cr_expect_eq(dist_group_create(2, 2, NULL, 1.0, &g, msg, sizeof msg), PL_ERR_INVALID);
    cr_expect_null(g);
    cr_expect_eq(dist_group_create(0, 2, NULL, 1.0, &g, msg, sizeof msg), PL_ERR_INVALID);
    cr_expect(strstr(msg, "no sockets") != NULL, "%s", msg);
    cr_expect_eq(hw_launch(0, 1.0, collectives_rank, NULL, NULL, msg, sizeof msg), PL_ERR_INVALID);
    cr_expect_eq(hw_launch(2, 0.0, collectives_rank, NULL, NULL, msg, sizeof msg), PL_ERR_INVALID);
    /* a group of one needs no socket and its collectives are no-ops */
    cr_assert_eq(dist_group_create(0, 1, NULL, 1.0, &g, msg, sizeof msg), PL_OK, "%s", msg);
    float v = 2.5f;
    cr_expect_eq(dist_allreduce_f32(g, &v, 1, DIST_SUM, msg, sizeof msg), PL_OK);
    cr_expect_eq(v, 2.5f);
    cr_expect_eq(dist_barrier(g, msg, sizeof msg), PL_OK);
    dist_group_destroy(g);
    dist_group_destroy(NULL);
}
