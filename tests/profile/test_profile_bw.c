/*
 * test_profile_bw.c: a profile records each backward's B and W parts apart
 * (issue 28, store schema 4): the probe times them on the engine's CPU
 * backend, the profiler stores them, the store loads their split into
 * profile_data.w_frac, files of schema 3 read (and migrate) as not split,
 * and the simulator's zero-bubble orders use the recorded split.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "helpers.h"
#include "hw.h"
#include "placer_config.h"
#include "probe.h"
#include "profiler.h"
#include "schedule.h"
#include "sim.h"
#include "store.h"

static hw_engine *cpu_engine(int n) {
    hw_engine_opts eo = {.backend = HW_BACKEND_CPU, .n_devices = n};
    hw_engine *e = NULL;
    char msg[256] = "";
    cr_assert_eq(hw_engine_create(&eo, &e, msg, sizeof msg), PL_OK, "%s", msg);
    return e;
}

static int splits(op_kind k) { return k == OP_ATTENTION || k == OP_MLP || k == OP_HEAD; }

static long long count_sql(const char *path, const char *sql) {
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(h));
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    long long v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(h);
    return v;
}

/* B + W against the whole backward, timed in the same repetitions: summed
 * over the splitting nodes, within 35% (the two calls redo little of the
 * whole's work: the head's B and W share no GEMM; attention's B recomputes
 * nothing W needs). Up to 3 measurements, the first inside the band counts,
 * so only a systematic error (a part not timed, or timed twice) fails. */
Test(probe_bw, b_plus_w_is_the_whole_backward_for_the_nodes_that_split) {
    hw_engine *e = cpu_engine(1);
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    const int n = g->n_nodes;
    double f[64], fs[64], b[64], bs[64], bb[64], ww[64];
    hw_probe_opts po = hw_probe_opts_default();
    po.reps = 9;
    char msg[256] = "";
    double whole = 0, parts = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        cr_assert_eq(hw_probe_nodes_split(e, g, 0, 3, NULL, &po, f, fs, b, bs, bb, ww, NULL, msg, sizeof msg), PL_OK,
                     "%s", msg);
        whole = parts = 0;
        int n_split = 0;
        for (int i = 0; i < n; i++) {
            if (splits(g->nodes[i].kind)) {
                cr_assert_gt(bb[i], 0.0, "node %d (%s) B", i, g->nodes[i].name);
                cr_assert_gt(ww[i], 0.0, "node %d (%s) W", i, g->nodes[i].name);
                whole += b[i];
                parts += bb[i] + ww[i];
                n_split++;
            } else {
                cr_assert(isnan(bb[i]) && isnan(ww[i]), "node %d (%s) does not split", i, g->nodes[i].name);
            }
        }
        cr_assert_eq(n_split, 2 * cfg.n_layers + 1, "attention and MLP of each layer, and the head");
        if (parts > 0.65 * whole && parts < 1.35 * whole) break;
    }
    cr_assert(parts > 0.65 * whole && parts < 1.35 * whole, "B + W %.1f us against the whole backward %.1f us", parts,
              whole);
    cr_log_info("B + W %.1f us, whole backward %.1f us (ratio %.3f)", parts, whole, parts / whole);
    /* the plain probe gives the same forward and backward table shape */
    cr_assert_eq(hw_probe_nodes(e, g, 0, 3, NULL, &po, f, fs, b, bs, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    graph_destroy(g);
    hw_engine_destroy(e);
}

/* In bf16 the engine does not run a split backward (ZB-H1 and ZB-H2 are
 * fp32 only): the probe times no parts, so such a profile records no split. */
Test(probe_bw, no_parts_where_the_engine_does_not_split) {
    hw_engine_opts eo = {.backend = HW_BACKEND_CPU, .n_devices = 1, .precision = HW_PREC_BF16};
    hw_engine *e = NULL;
    char msg[256] = "";
    cr_assert_eq(hw_engine_create(&eo, &e, msg, sizeof msg), PL_OK, "%s", msg);
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    double f[64], fs[64], b[64], bs[64], bb[64], ww[64];
    hw_probe_opts po = hw_probe_opts_default();
    po.reps = 3;
    po.warmup = 1;
    cr_assert_eq(hw_probe_nodes_split(e, g, 0, 2, NULL, &po, f, fs, b, bs, bb, ww, NULL, msg, sizeof msg), PL_OK, "%s",
                 msg);
    for (int i = 0; i < g->n_nodes; i++) {
        cr_assert(isnan(bb[i]) && isnan(ww[i]), "node %d: no parts in bf16", i);
        if (g->nodes[i].kind != OP_LOSS) cr_assert_gt(b[i], 0.0, "node %d: the whole backward is timed", i);
    }
    graph_destroy(g);
    hw_engine_destroy(e);
}

/* A CPU profiler run stores B and W on exactly the splitting nodes' backward
 * rows, and the loaded profile carries their measured split. */
Test(profiler_bw, cpu_run_records_b_and_w_and_loads_the_split) {
    char dir[256], path[512], msg[1024] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "p.db");
    static const int SIZES[2] = {1, 2};
    profiler_opts o = profiler_opts_default();
    o.mb_sizes = SIZES;
    o.n_mb = 2;
    o.nodes.warmup = 1;
    o.nodes.reps = 3;
    o.xfer.warmup = 1;
    o.xfer.reps = 3;
    o.anchor_warmup = 1;
    o.anchor_steps = 2;
    o.link_max_bytes = 16 << 10;
    hw_engine *e = cpu_engine(1);
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    profiler_result r;
    cr_assert_eq(profiler_run(e, db, &cfg, &o, &r, msg, sizeof msg), PL_OK, "%s", msg);
    profile_db_close(db);
    hw_engine_destroy(e);

    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    int n_split = 0;
    for (int i = 0; i < g->n_nodes; i++) n_split += splits(g->nodes[i].kind);
    cr_assert_eq(count_sql(path, "SELECT value FROM meta WHERE key = 'schema_version'"), 4);
    cr_assert_eq(count_sql(path, "SELECT count(*) FROM node_cost WHERE b_us IS NOT NULL AND w_us IS NOT NULL "
                                 "AND phase = 'bwd' AND b_us > 0 AND w_us > 0"),
                 2 * n_split, "one B and W pair per splitting node and size");
    cr_assert_eq(count_sql(path, "SELECT count(*) FROM node_cost WHERE b_us IS NOT NULL OR w_us IS NOT NULL"),
                 2 * n_split, "no parts on other rows");

    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    profile_data *p = NULL;
    cr_assert_eq(profile_db_load_profile(db, &cfg, &p, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_not_null(p->w_frac, "a measured split loads");
    for (int i = 0; i < g->n_nodes; i++) {
        if (splits(g->nodes[i].kind)) {
            cr_assert(p->w_frac[i] > 0.0 && p->w_frac[i] < 1.0, "node %d: W share %g", i, p->w_frac[i]);
            cr_assert(ieee_ulp_eq(dbl, profile_w_frac(p, g, i), p->w_frac[i], 0));
        } else {
            cr_assert(isnan(p->w_frac[i]), "node %d (%s) is not split", i, g->nodes[i].name);
            cr_assert(ieee_ulp_eq(dbl, profile_w_frac(p, g, i), profile_w_frac(NULL, g, i), 0),
                      "node %d falls back to the FLOP split", i);
        }
    }
    profile_data_destroy(p);
    profile_db_close(db);
    graph_destroy(g);
    th_rmtree(dir);
}

/* The shipped schema-3 profile: READ leaves it as it is and reads no split;
 * a copy opened for writing migrates to 4 with every cost as it was. */
Test(store_bw, schema_3_reads_unsplit_and_migrates_with_nothing_lost) {
    char src[1024], dir[256], path[512], msg[1024] = "";
    snprintf(src, sizeof src, "%s/data/h200x2.db", PLACER_SOURCE_DIR);
    if (!th_exists(src)) cr_skip_test("data/h200x2.db is not there");
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "old.db");
    cr_assert_eq(th_copy(src, path), 0);
    cr_assert_eq(count_sql(path, "SELECT value FROM meta WHERE key = 'schema_version'"), 3);
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("default", &cfg, NULL, 0), PL_OK);
    size_t n0, n1;
    unsigned char *before = th_read(path, &n0);
    profile_db *db = NULL;
    profile_data *p3 = NULL, *p4 = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_opened_version(db), 3);
    cr_assert_eq(profile_db_load_profile(db, &cfg, &p3, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_null(p3->w_frac, "a schema-3 file records no split");
    profile_db_close(db);
    unsigned char *after = th_read(path, &n1);
    cr_assert(n0 == n1 && memcmp(before, after, n0) == 0, "READ does not write");
    free(before);
    free(after);

    cr_assert_eq(profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_load_profile(db, &cfg, &p4, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    profile_db_close(db);
    cr_assert_eq(count_sql(path, "SELECT value FROM meta WHERE key = 'schema_version'"), 4);
    cr_assert_eq(count_sql(path, "SELECT count(*) FROM node_cost WHERE b_us IS NOT NULL OR w_us IS NOT NULL"), 0);
    cr_assert_null(p4->w_frac, "the migrated file reads the derived split");
    const size_t cells = (size_t)p3->n_devices * p3->n_mb * p3->n_nodes * PHASE_COUNT;
    cr_assert_eq(p4->n_devices, p3->n_devices);
    cr_assert_eq(p4->n_mb, p3->n_mb);
    cr_assert_eq(memcmp(p3->cost_us, p4->cost_us, cells * sizeof *p3->cost_us), 0, "every cost as it was");
    profile_data_destroy(p3);
    profile_data_destroy(p4);
    th_rmtree(dir);
}

/* ZB-H1's step on 2 devices, half the nodes each, m micro-batches. */
static double zb_h1_step(const graph *g, const profile_data *p, schedule_order o) {
    const int m = 4;
    sim_ctx *ctx = NULL;
    cr_assert_eq(sim_ctx_create(g, p, m, &ctx), PL_OK);
    int dev[256];
    /* the cut where device 0's forward and backward best balance device 1's */
    double tot = 0, acc = 0;
    for (int i = 0; i < g->n_nodes; i++)
        tot += profile_node_cost(p, 0, 1, i, PHASE_FWD) + profile_node_cost(p, 0, 1, i, PHASE_BWD);
    for (int i = 0; i < g->n_nodes; i++) {
        dev[i] = acc < tot / 2 ? 0 : 1;
        acc += profile_node_cost(p, 0, 1, i, PHASE_FWD) + profile_node_cost(p, 0, 1, i, PHASE_BWD);
    }
    schedule s = schedule_make(m, o);
    sim_result r;
    cr_assert_eq(sim_run(ctx, dev, &s, NULL, NULL, &r), PL_OK, "%s", sim_last_error(ctx));
    sim_ctx_destroy(ctx);
    return r.step_us;
}

/* A recorded split, saved and loaded back, is what the simulator uses: a
 * split unlike the FLOP one (W 90% of each splitting node's backward, where
 * FLOPs give about a half) moves ZB-H1's step, and the loaded profile
 * predicts the same step as the one in memory; 1F1B (no split) does not move. */
Test(store_bw, the_simulator_uses_the_recorded_split) {
    char src[1024], dir[256], path[512], msg[1024] = "";
    snprintf(src, sizeof src, "%s/data/h200x2.db", PLACER_SOURCE_DIR);
    if (!th_exists(src)) cr_skip_test("data/h200x2.db is not there");
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("default", &cfg, NULL, 0), PL_OK);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    profile_db *db = NULL;
    profile_data *p = NULL, *q = NULL;
    cr_assert_eq(profile_db_open(src, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_load_profile(db, &cfg, &p, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    profile_db_close(db);
    cr_assert_null(p->w_frac);
    const double derived = zb_h1_step(g, p, SCHED_ZB_H1), plain = zb_h1_step(g, p, SCHED_1F1B);

    p->w_frac = malloc(sizeof *p->w_frac * (size_t)p->n_nodes);
    for (int i = 0; i < p->n_nodes; i++) {
        p->w_frac[i] = splits(g->nodes[i].kind) ? 0.9 : NAN;
        if (splits(g->nodes[i].kind))
            cr_assert_lt(profile_w_frac(NULL, g, i), 0.8, "node %d: the FLOP split is not the recorded one", i);
    }
    const double recorded = zb_h1_step(g, p, SCHED_ZB_H1);
    cr_assert(fabs(recorded - derived) > 1e-6 * derived, "ZB-H1 %.3f us with the recorded split, %.3f us derived",
              recorded, derived);
    cr_log_info("ZB-H1 %.3f us with the recorded split (W 0.9), %.3f us from FLOPs; 1F1B %.3f us", recorded, derived,
                plain);

    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "split.db");
    cr_assert_eq(profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_save_profile(db, &cfg, p, msg, sizeof msg), PL_OK, "%s", msg);
    profile_db_close(db);
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_load_profile(db, &cfg, &q, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    profile_db_close(db);
    cr_assert_not_null(q->w_frac);
    for (int i = 0; i < q->n_nodes; i++) {
        if (splits(g->nodes[i].kind)) cr_assert(ieee_ulp_eq(dbl, q->w_frac[i], 0.9, 4), "node %d: %.17g", i, q->w_frac[i]);
        else cr_assert(isnan(q->w_frac[i]), "node %d", i);
    }
    const double loaded = zb_h1_step(g, q, SCHED_ZB_H1);
    cr_assert(fabs(loaded - recorded) <= 1e-9 * recorded, "loaded %.6f us, in memory %.6f us", loaded, recorded);
    cr_assert(ieee_ulp_eq(dbl, zb_h1_step(g, q, SCHED_1F1B), plain, 0), "1F1B does not split the backward");
    profile_data_destroy(p);
    profile_data_destroy(q);
    graph_destroy(g);
    th_rmtree(dir);
}
