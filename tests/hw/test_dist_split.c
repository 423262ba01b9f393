/*
 * test_dist_split.c: sub-groups (dist_group_split), reduce-scatter and
 * all-gather of hw/dist/dist_group.h on the sockets transport, under the fork
 * launcher: the tp and dp groups of a rank grid (core/layout.h) carry
 * their own collectives interleaved with the world's; reduce-scatter and
 * all-gather give, bit for bit, the all-reduce's result (the contract:
 * rank-order sums on every rank); a killed rank in a sub-group stops
 * everyone within the timeout; a split the star cannot carry fails on
 * every rank; a collective of the wrong group is an error.
 *
 * As in test_dist.c, ranks write what they saw into a shared mapping and
 * the test process checks it afterwards.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "dist_group.h"
#include "launcher.h"
#include "layout.h"

typedef struct {
    int tp, dp;                     /* the grid (world = tp * dp) */
    int sub_rank[DIST_MAX_RANKS][2];/* rank in its tp / dp group */
    int sub_size[DIST_MAX_RANKS][2];
    float tp_sum[DIST_MAX_RANKS];   /* sum over its tp group of (rank + 1) */
    float dp_sum[DIST_MAX_RANKS];
    float world_sum[DIST_MAX_RANKS];
    int undefined_null[DIST_MAX_RANKS];
    int bits_equal[DIST_MAX_RANKS]; /* reduce-scatter / all-gather == all-reduce, memcmp */
    double max_err[DIST_MAX_RANKS]; /* against a double-precision sum */
    int status[DIST_MAX_RANKS];     /* pl_status of the split under test */
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

static void grid(int tp, int dp, layout *l) {
    layout_default(l);
    l->tp = tp;
    l->dp = dp;
    l->global_batch = dp;
}

/* The tp group: same coordinates but tp; the dp group: same but dp. */
static int split_grid(dist_group *g, const layout *l, dist_group **tpg, dist_group **dpg, char *err, size_t len) {
    layout_coords c = layout_rank_coords(l, dist_rank(g));
    if (dist_group_split(g, c.c[LAYOUT_DIM_DP], c.c[LAYOUT_DIM_TP], tpg, err, len) != PL_OK) return 3;
    if (dist_group_split(g, c.c[LAYOUT_DIM_TP], c.c[LAYOUT_DIM_DP], dpg, err, len) != PL_OK) return 3;
    return 0;
}

static int grid_rank(dist_group *g, int rank, void *ctx, char *err, size_t errlen) {
    shared_out *o = ctx;
    layout l;
    grid(o->tp, o->dp, &l);
    dist_group *tpg = NULL, *dpg = NULL, *none = (dist_group *)1;
    int rc = split_grid(g, &l, &tpg, &dpg, err, errlen);
    if (rc) goto out;
    rc = 3;
    o->sub_rank[rank][0] = dist_rank(tpg);
    o->sub_size[rank][0] = dist_size(tpg);
    o->sub_rank[rank][1] = dist_rank(dpg);
    o->sub_size[rank][1] = dist_size(dpg);
    float v = (float)(rank + 1), w = v, x = v;
    /* interleaved: tp, world, dp, as a step mixes them */
    if (dist_allreduce_f32(tpg, &v, 1, DIST_SUM, err, errlen) != PL_OK) goto out;
    if (dist_allreduce_f32(g, &w, 1, DIST_SUM, err, errlen) != PL_OK) goto out;
    if (dist_allreduce_f32(dpg, &x, 1, DIST_SUM, err, errlen) != PL_OK) goto out;
    if (dist_barrier(tpg, err, errlen) != PL_OK) goto out;
    o->tp_sum[rank] = v;
    o->world_sum[rank] = w;
    o->dp_sum[rank] = x;
    /* the last rank joins nothing; the others form one group */
    if (dist_group_split(g, rank == dist_size(g) - 1 ? DIST_UNDEFINED : 5, 0, &none, err, errlen) != PL_OK) goto out;
    o->undefined_null[rank] = rank == dist_size(g) - 1 ? none == NULL : none != NULL;
    if (none && dist_barrier(none, err, errlen) != PL_OK) goto out;
    o->done[rank] = 1;
    rc = 0;
out:
    dist_group_destroy(tpg);
    dist_group_destroy(dpg);
    if (none != (dist_group *)1) dist_group_destroy(none);
    return rc;
}

Test(dist_split, tp_and_dp_groups_of_a_rank_grid_carry_their_own_collectives) {
    static const int grids[][2] = {{2, 2}, {2, 3}, {3, 2}, {4, 1}};
    for (size_t gi = 0; gi < sizeof grids / sizeof grids[0]; gi++) {
        shared_out *o = map_shared();
        o->tp = grids[gi][0];
        o->dp = grids[gi][1];
        const int n = o->tp * o->dp;
        char msg[512] = "";
        hw_launch_report rep;
        cr_assert_eq(hw_launch(n, 10.0, grid_rank, o, &rep, msg, sizeof msg), PL_OK, "tp %d dp %d: %s", o->tp, o->dp,
                     msg);
        layout l;
        grid(o->tp, o->dp, &l);
        for (int r = 0; r < n; r++) {
            layout_coords c = layout_rank_coords(&l, r);
            int64_t tp_peers[DIST_MAX_RANKS], dp_peers[DIST_MAX_RANKS];
            layout_group_ranks(&l, r, LAYOUT_DIM_TP, tp_peers);
            layout_group_ranks(&l, r, LAYOUT_DIM_DP, dp_peers);
            float tps = 0, dps = 0;
            for (int k = 0; k < o->tp; k++) tps += (float)(tp_peers[k] + 1);
            for (int k = 0; k < o->dp; k++) dps += (float)(dp_peers[k] + 1);
            cr_expect_eq(o->done[r], 1, "rank %d", r);
            cr_expect_eq(o->sub_rank[r][0], c.c[LAYOUT_DIM_TP], "rank %d", r);
            cr_expect_eq(o->sub_size[r][0], o->tp);
            cr_expect_eq(o->sub_rank[r][1], c.c[LAYOUT_DIM_DP], "rank %d", r);
            cr_expect_eq(o->sub_size[r][1], o->dp);
            cr_expect_eq(o->tp_sum[r], tps, "rank %d: tp sum %g, want %g", r, o->tp_sum[r], tps);
            cr_expect_eq(o->dp_sum[r], dps, "rank %d: dp sum %g, want %g", r, o->dp_sum[r], dps);
            cr_expect_eq(o->world_sum[r], (float)(n * (n + 1) / 2));
            cr_expect_eq(o->undefined_null[r], 1, "rank %d", r);
        }
        for (int r = 0; r < n; r++) cr_expect(kill(rep.pid[r], 0) != 0 && errno == ESRCH, "rank %d left", r);
        munmap(o, sizeof *o);
    }
}

#define SHARD 1031 /* floats per rank: odd, so no size lines up with anything */

/* x_r[i]: values whose float sum depends on the order of addition. */
static float value(int rank, int i) { return (float)sin(0.37 * i + 1.3 * rank) * (float)(1 + (i % 7) * 1000); }

static int scatter_rank(dist_group *g, int rank, void *ctx, char *err, size_t errlen) {
    shared_out *o = ctx;
    const int n = dist_size(g);
    const int64_t all = (int64_t)n * SHARD;
    static float x[DIST_MAX_RANKS * SHARD], sum[DIST_MAX_RANKS * SHARD], shard[SHARD], gath[DIST_MAX_RANKS * SHARD];
    for (int64_t i = 0; i < all; i++) x[i] = sum[i] = value(rank, (int)i);
    if (dist_allreduce_f32(g, sum, all, DIST_SUM, err, errlen) != PL_OK) return 3;
    if (dist_reduce_scatter_f32(g, x, shard, SHARD, err, errlen) != PL_OK) return 3;
    int eq = memcmp(shard, sum + (size_t)rank * SHARD, sizeof shard) == 0;
    if (dist_allgather_f32(g, shard, gath, SHARD, err, errlen) != PL_OK) return 3;
    eq = eq && memcmp(gath, sum, sizeof(float) * (size_t)all) == 0;
    /* in place: the shard lands in x's own slot, the gather reads it there */
    if (dist_reduce_scatter_f32(g, x, x + (size_t)rank * SHARD, SHARD, err, errlen) != PL_OK) return 3;
    if (dist_allgather_f32(g, x + (size_t)rank * SHARD, x, SHARD, err, errlen) != PL_OK) return 3;
    eq = eq && memcmp(x, sum, sizeof(float) * (size_t)all) == 0;
    double e = 0;
    for (int64_t i = 0; i < all; i++) {
        double ref = 0, mag = 0;
        for (int r = 0; r < n; r++) {
            ref += (double)value(r, (int)i);
            mag += fabs((double)value(r, (int)i));
        }
        double d = fabs((double)sum[i] - ref) / (mag > 0 ? mag : 1);
        if (d > e) e = d;
    }
    o->bits_equal[rank] = eq;
    o->max_err[rank] = e;
    o->done[rank] = 1;
    return 0;
}

Test(dist_split, reduce_scatter_and_all_gather_equal_the_all_reduce_bit_for_bit) {
    for (int n = 1; n <= 4; n++) {
        shared_out *o = map_shared();
        char msg[512] = "";
        cr_assert_eq(hw_launch(n, 10.0, scatter_rank, o, NULL, msg, sizeof msg), PL_OK, "n=%d: %s", n, msg);
        for (int r = 0; r < n; r++) {
            cr_expect_eq(o->done[r], 1, "n=%d rank %d", n, r);
            cr_expect_eq(o->bits_equal[r], 1, "n=%d rank %d: reduce-scatter / all-gather differ from the all-reduce", n,
                         r);
            /* float sums of n <= 4 terms: a few float epsilons of the magnitude */
            cr_expect(o->max_err[r] < 4 * 1.2e-7, "n=%d rank %d: error %g", n, r, o->max_err[r]);
        }
        munmap(o, sizeof *o);
    }
}

typedef struct {
    int victim;
} kill_ctx;

/* A step's pattern: reduce-scatter in the dp group, all-gather in the tp
 * group, a world all-reduce; the victim dies at step 3. */
static int killed_rank(dist_group *g, int rank, void *ctx, char *err, size_t errlen) {
    const kill_ctx *k = ctx;
    layout l;
    grid(2, 2, &l);
    dist_group *tpg = NULL, *dpg = NULL;
    int rc = split_grid(g, &l, &tpg, &dpg, err, errlen);
    float in[2 * 256], out[2 * 256];
    for (int step = 0; rc == 0 && step < 200; step++) {
        if (rank == k->victim && step == 3) raise(SIGKILL);
        for (int i = 0; i < 512; i++) in[i] = (float)(rank + i);
        if (dist_reduce_scatter_f32(dpg, in, out, 256, err, errlen) != PL_OK ||
            dist_allgather_f32(tpg, out, in, 256, err, errlen) != PL_OK ||
            dist_allreduce_f32(g, in, 512, DIST_SUM, err, errlen) != PL_OK)
            rc = 4;
    }
    dist_group_destroy(tpg);
    dist_group_destroy(dpg);
    return rc;
}

Test(dist_split, a_rank_killed_in_a_sub_group_collective_stops_everyone) {
    for (int victim = 0; victim < 4; victim++) {
        kill_ctx k = {victim};
        hw_launch_report rep;
        char msg[512] = "";
        double t0 = now_s();
        pl_status st = hw_launch(4, 20.0, killed_rank, &k, &rep, msg, sizeof msg);
        double dt = now_s() - t0;
        cr_assert_eq(st, PL_ERR_INTERRUPTED, "victim %d: %s", victim, msg);
        cr_expect_eq(rep.failed_rank, victim, "%s", msg);
        cr_expect(strstr(msg, "killed by signal 9") != NULL, "%s", msg);
        cr_expect(strchr(msg, '\n') == NULL, "%s", msg);
        /* seen as closed sockets, well before the 20 s timeout (a loaded CI machine under ASan: generous) */
        cr_expect(dt < 15.0, "took %.2f s: %s", dt, msg);
        for (int r = 0; r < 4; r++)
            cr_expect(kill(rep.pid[r], 0) != 0 && errno == ESRCH, "rank %d (pid %d) left behind", r, (int)rep.pid[r]);
    }
}

/* color rank % 2: the odd ranks' group has rank 1 as its root, which the
 * star does not join to rank 3. */
static int star_rank(dist_group *g, int rank, void *ctx, char *err, size_t errlen) {
    shared_out *o = ctx;
    dist_group *sub = NULL;
    o->status[rank] = dist_group_split(g, rank % 2, 0, &sub, err, errlen);
    int bad = sub != NULL;
    /* all in one group rooted at rank 0: the star carries that */
    if (dist_group_split(g, 0, 0, &sub, err, errlen) != PL_OK) return 3;
    if (dist_barrier(sub, err, errlen) != PL_OK) bad = 1;
    dist_group_destroy(sub);
    o->done[rank] = !bad;
    return 0;
}

Test(dist_split, a_split_the_star_cannot_carry_fails_on_every_rank, .timeout = 60) {
    const int n = DIST_MESH_MAX + 1;
    shared_out *o = map_shared();
    char msg[512] = "";
    cr_assert_eq(hw_launch(n, 20.0, star_rank, o, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    for (int r = 0; r < n; r++) {
        cr_expect_eq(o->status[r], PL_ERR_UNSUPPORTED, "rank %d: %d", r, o->status[r]);
        cr_expect_eq(o->done[r], 1, "rank %d", r);
    }
    munmap(o, sizeof *o);
}

/* Rank 1 reduces in a sub-group (same members as the world) where rank 0
 * reduces in the world: the headers' group ids differ. */
static int wrong_group_rank(dist_group *g, int rank, void *ctx, char *err, size_t errlen) {
    (void)ctx;
    dist_group *sub = NULL;
    if (dist_group_split(g, 0, 0, &sub, err, errlen) != PL_OK) return 3;
    float v[4] = {0};
    pl_status st = dist_allreduce_f32(rank == 1 ? sub : g, v, 4, DIST_SUM, err, errlen);
    dist_group_destroy(sub);
    return st == PL_OK ? 0 : 5;
}

Test(dist_split, a_collective_in_the_wrong_group_is_an_error) {
    char msg[512] = "";
    pl_status st = hw_launch(2, 2.0, wrong_group_rank, NULL, NULL, msg, sizeof msg);
    cr_assert_eq(st, PL_ERR_INTERRUPTED, "%s", msg);
    cr_expect(strstr(msg, "out of step") != NULL, "%s", msg);
}

Test(dist_split, a_group_of_one_splits_and_copies) {
    char msg[256];
    dist_group *g = NULL, *s = NULL;
    cr_assert_eq(dist_group_create(0, 1, NULL, 1.0, &g, msg, sizeof msg), PL_OK, "%s", msg);
    cr_expect_str_eq(dist_transport_name(g), "sockets");
    cr_assert_eq(dist_group_split(g, 3, 9, &s, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_not_null(s);
    cr_expect_eq(dist_size(s), 1);
    float a[3] = {1, 2, 3}, b[3] = {0};
    cr_expect_eq(dist_reduce_scatter_f32(s, a, b, 3, msg, sizeof msg), PL_OK);
    cr_expect(b[0] == 1 && b[1] == 2 && b[2] == 3);
    cr_expect_eq(dist_allgather_f32(s, a, b, 3, msg, sizeof msg), PL_OK);
    cr_expect(b[2] == 3);
    dist_group_destroy(s);
    cr_expect_eq(dist_group_split(g, -5, 0, &s, msg, sizeof msg), PL_ERR_INVALID);
    cr_expect_null(s);
    dist_group *u = (dist_group *)1;
    cr_expect_eq(dist_group_split(g, DIST_UNDEFINED, 0, &u, msg, sizeof msg), PL_OK);
    cr_expect_null(u);
    dist_group_destroy(g);
}
