/*
 * mpi_group_check.c: the collectives and sub-groups of hw/dist/dist_group.h
 * over the MPI transport (hw/dist/dist_mpi.h), under mpirun (the Criterion test
 * tests/hw/test_dist_mpi.c runs it with 1 to 6 ranks):
 *   - world barrier, all-reduce (sum, max; float, double), broadcast from
 *     the last rank;
 *   - dist_group_split into the tp and dp groups of a tp x dp grid
 *     (core/layout.h; tp = 2 when it divides the ranks), each with its own
 *     sums, interleaved with the world's; a split with DIST_UNDEFINED;
 *   - reduce-scatter and all-gather, out of place and in place (out = in +
 *     rank n, the ZeRO-1 pattern), against a double-precision sum (a few
 *     float epsilons of the magnitude) and, all-gathered, the same bits on
 *     every rank (checked by broadcasting rank 0's).
 * Every rank checks its own values; rank 0 prints one line
 * ("mpi_group_check: np 4 tp 2 dp 2: ok", or the first failure) and the
 * job exits 0 only when every rank passed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_group.h"
#include "dist_mpi.h"
#include "layout.h"

#define SHARD 1031

static float value(int rank, int i) { return (float)sin(0.37 * i + 1.3 * rank) * (float)(1 + (i % 7) * 1000); }

#define CHECK(cond, ...)                                                                                             \
    do {                                                                                                             \
        if (!(cond) && !*why) snprintf(why, sizeof why, __VA_ARGS__);                                               \
    } while (0)

int main(void) {
    char err[512] = "", why[512] = "";
    dist_group *w = NULL, *tpg = NULL, *dpg = NULL, *sub = (dist_group *)1;
    if (dist_mpi_world(20.0, &w, err, sizeof err) != PL_OK) {
        fprintf(stderr, "mpi_group_check: %s\n", err);
        return 1;
    }
    const int rank = dist_rank(w), np = dist_size(w);
    const int tp = np % 2 == 0 ? 2 : 1, dp = np / tp;
    layout l;
    layout_default(&l);
    l.tp = tp;
    l.dp = dp;
    l.global_batch = dp;
    layout_coords c = layout_rank_coords(&l, rank);
    float *x = malloc(sizeof(float) * (size_t)np * SHARD), *sum = malloc(sizeof(float) * (size_t)np * SHARD);
    float *shard = malloc(sizeof(float) * SHARD), *gath = malloc(sizeof(float) * (size_t)np * SHARD);
    float *root = malloc(sizeof(float) * (size_t)np * SHARD);
    if (!x || !sum || !shard || !gath || !root) {
        fprintf(stderr, "mpi_group_check: rank %d: out of host memory\n", rank);
        return 1;
    }
    pl_status st = dist_barrier(w, err, sizeof err);
    /* world: sums, max, broadcast from the last rank */
    float v = (float)(rank + 1);
    double mx = 10.0 * rank;
    int b[2] = {rank, 7 * rank};
    if (st == PL_OK) st = dist_allreduce_f32(w, &v, 1, DIST_SUM, err, sizeof err);
    if (st == PL_OK) st = dist_allreduce_f64(w, &mx, 1, DIST_MAX, err, sizeof err);
    if (st == PL_OK) st = dist_broadcast(w, b, sizeof b, np - 1, err, sizeof err);
    CHECK(v == (float)(np * (np + 1) / 2), "rank %d: world sum %g", rank, v);
    CHECK(mx == 10.0 * (np - 1), "rank %d: world max %g", rank, mx);
    CHECK(b[0] == np - 1 && b[1] == 7 * (np - 1), "rank %d: broadcast got %d %d", rank, b[0], b[1]);
    /* the grid's groups, interleaved with the world */
    if (st == PL_OK) st = dist_group_split(w, c.c[LAYOUT_DIM_DP], c.c[LAYOUT_DIM_TP], &tpg, err, sizeof err);
    if (st == PL_OK) st = dist_group_split(w, c.c[LAYOUT_DIM_TP], c.c[LAYOUT_DIM_DP], &dpg, err, sizeof err);
    if (st == PL_OK) {
        CHECK(dist_rank(tpg) == c.c[LAYOUT_DIM_TP] && dist_size(tpg) == tp, "rank %d: tp group rank %d of %d", rank,
              dist_rank(tpg), dist_size(tpg));
        CHECK(dist_rank(dpg) == c.c[LAYOUT_DIM_DP] && dist_size(dpg) == dp, "rank %d: dp group rank %d of %d", rank,
              dist_rank(dpg), dist_size(dpg));
        CHECK(!strcmp(dist_transport_name(tpg), "mpi"), "rank %d: transport %s", rank, dist_transport_name(tpg));
        int64_t peers[64];
        float tps = 0, dps = 0, a = (float)(rank + 1), d = a, wv = a;
        layout_group_ranks(&l, rank, LAYOUT_DIM_TP, peers);
        for (int k = 0; k < tp; k++) tps += (float)(peers[k] + 1);
        layout_group_ranks(&l, rank, LAYOUT_DIM_DP, peers);
        for (int k = 0; k < dp; k++) dps += (float)(peers[k] + 1);
        st = dist_allreduce_f32(tpg, &a, 1, DIST_SUM, err, sizeof err);
        if (st == PL_OK) st = dist_allreduce_f32(w, &wv, 1, DIST_SUM, err, sizeof err);
        if (st == PL_OK) st = dist_allreduce_f32(dpg, &d, 1, DIST_SUM, err, sizeof err);
        CHECK(a == tps && d == dps, "rank %d: tp sum %g (want %g), dp sum %g (want %g)", rank, a, tps, d, dps);
    }
    if (st == PL_OK) st = dist_group_split(w, rank == np - 1 ? DIST_UNDEFINED : 3, -rank, &sub, err, sizeof err);
    if (st == PL_OK) {
        CHECK(rank == np - 1 ? sub == NULL : sub != NULL, "rank %d: DIST_UNDEFINED split gave %p", rank, (void *)sub);
        /* key -rank reverses the order */
        if (sub) CHECK(dist_rank(sub) == np - 2 - rank, "rank %d: reversed rank %d", rank, dist_rank(sub));
        if (sub) st = dist_barrier(sub, err, sizeof err);
    }
    /* reduce-scatter and all-gather */
    const int64_t all = (int64_t)np * SHARD;
    for (int64_t i = 0; i < all; i++) x[i] = sum[i] = value(rank, (int)i);
    if (st == PL_OK) st = dist_allreduce_f32(w, sum, all, DIST_SUM, err, sizeof err);
    if (st == PL_OK) st = dist_reduce_scatter_f32(w, x, shard, SHARD, err, sizeof err);
    if (st == PL_OK) st = dist_allgather_f32(w, shard, gath, SHARD, err, sizeof err);
    double e = 0;
    for (int64_t i = 0; st == PL_OK && i < all; i++) {
        double ref = 0, mag = 0;
        for (int r = 0; r < np; r++) {
            ref += (double)value(r, (int)i);
            mag += fabs((double)value(r, (int)i));
        }
        const double scale = mag > 0 ? mag : 1;
        const double d1 = fabs((double)gath[i] - ref) / scale, d2 = fabs((double)sum[i] - ref) / scale;
        if (d1 > e) e = d1;
        if (d2 > e) e = d2;
    }
    CHECK(e < 8 * 1.2e-7, "rank %d: reduce-scatter / all-gather error %g", rank, e);
    /* in place, the ZeRO-1 pattern */
    if (st == PL_OK) st = dist_reduce_scatter_f32(w, x, x + (size_t)rank * SHARD, SHARD, err, sizeof err);
    if (st == PL_OK) st = dist_allgather_f32(w, x + (size_t)rank * SHARD, x, SHARD, err, sizeof err);
    CHECK(st != PL_OK || memcmp(x, gath, sizeof(float) * (size_t)all) == 0, "rank %d: in-place result differs", rank);
    /* the same bits everywhere */
    memcpy(root, gath, sizeof(float) * (size_t)all);
    if (st == PL_OK) st = dist_broadcast(w, root, (int64_t)sizeof(float) * all, 0, err, sizeof err);
    CHECK(st != PL_OK || memcmp(root, gath, sizeof(float) * (size_t)all) == 0, "rank %d: bits differ from rank 0's",
          rank);
    if (st != PL_OK) {
        fprintf(stderr, "mpi_group_check: rank %d: %s\n", rank, err);
        return 1;
    }
    /* every rank's verdict to rank 0 */
    double bad = *why ? 1 : 0;
    if (*why) fprintf(stderr, "mpi_group_check: %s\n", why);
    if (dist_allreduce_f64(w, &bad, 1, DIST_SUM, err, sizeof err) != PL_OK) {
        fprintf(stderr, "mpi_group_check: rank %d: %s\n", rank, err);
        return 1;
    }
    if (rank == 0) {
        printf("mpi_group_check: np %d tp %d dp %d: %s (max rel error %.3g)\n", np, tp, dp,
               bad == 0 ? "ok" : "FAILED", e);
        fflush(stdout);
    }
    free(x);
    free(sum);
    free(shard);
    free(gath);
    free(root);
    dist_group_destroy(tpg);
    dist_group_destroy(dpg);
    if (sub != (dist_group *)1) dist_group_destroy(sub);
    dist_group_destroy(w);
    dist_mpi_finalize();
    return bad != 0;
}
