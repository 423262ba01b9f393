/* test_store.c: the profile store's reads and writes round-trip exactly. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <math.h>
#include <sqlite3.h>

#include "graph.h"
#include "helpers.h"
#include "spec.h"
#include "store.h"

/* A profile of the tiny graph whose every figure is distinct, so that any
 * mix-up of device, micro-batch, node or phase shows in a round trip. */
static profile_data *distinct_profile(const gpt_config *cfg, int n_dev) {
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(cfg, &g, NULL, 0), PL_OK);
    int sizes[3] = {1, 2, 4};
    profile_data *p = NULL;
    cr_assert_eq(profile_data_create(n_dev, g->n_nodes, 3, sizes, &p), PL_OK);
    snprintf(p->machine, sizeof p->machine, "testbox");
    snprintf(p->source, sizeof p->source, "measured");
    for (int d = 0; d < n_dev; d++) {
        snprintf(p->devices[d].name, sizeof p->devices[d].name, "GPU-%d", d);
        p->devices[d].mem_bytes = (int64_t)(16 + d) << 30;
        p->devices[d].peak_flops = 1e12 * (d + 1);
        p->devices[d].mem_bw = 1e11 * (d + 3);
        p->devices[d].launch_us = 4.5 + d;
        p->devices[d].sm_count = 40 + d;
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < g->n_nodes; i++) {
                p->cost_us[profile_cost_index(p, d, k, i, PHASE_FWD)] = 1000.0 * d + 100.0 * k + i + 0.25;
                p->cost_us[profile_cost_index(p, d, k, i, PHASE_BWD)] = 1000.0 * d + 100.0 * k + i + 0.5;
                p->cost_us[profile_cost_index(p, d, k, i, PHASE_OPT)] = 1000.0 * d + i + 0.75;
            }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        p->node_mem[i].param_bytes = graph_param_bytes(&g->nodes[i]);
        p->node_mem[i].act_bytes_per_sample = 1000 + i;
        p->node_mem[i].out_bytes_per_sample = 2000 + i;
        p->node_mem[i].fwd_workspace_bytes = 2500 + i;
        p->node_mem[i].bwd_workspace_bytes = 3000 + i;
        p->node_mem[i].workspace_bytes = 3000 + i;
    }
    for (int a = 0; a < n_dev; a++)
        for (int b = 0; b < n_dev; b++) {
            if (a == b) continue;
            profile_link *l = &p->links[a * n_dev + b];
            double x[3] = {4096, 1048576, 1073741824.0};
            double y[3] = {10.0 + a, 20.0 + b, 3000.0 + 10 * a + b};
            cr_assert_eq(profile_link_set_curve(l, 3, x, y), PL_OK);
            l->latency_us = 9.5 + a;
            l->bandwidth = 3.5e11 + b;
        }
    graph_destroy(g);
    return p;
}

static void assert_profiles_equal(const profile_data *a, const profile_data *b) {
    cr_assert_str_eq(a->machine, b->machine);
    cr_assert_str_eq(a->source, b->source);
    cr_assert_eq(a->n_devices, b->n_devices);
    cr_assert_eq(a->n_nodes, b->n_nodes);
    cr_assert_eq(a->n_mb, b->n_mb);
    for (int k = 0; k < a->n_mb; k++) cr_assert_eq(a->mb_sizes[k], b->mb_sizes[k]);
    for (int d = 0; d < a->n_devices; d++) {
        cr_assert_str_eq(a->devices[d].name, b->devices[d].name);
        cr_assert_eq(a->devices[d].mem_bytes, b->devices[d].mem_bytes);
        cr_assert(ieee_ulp_eq(dbl, a->devices[d].peak_flops, b->devices[d].peak_flops, 0));
        cr_assert(ieee_ulp_eq(dbl, a->devices[d].mem_bw, b->devices[d].mem_bw, 0));
        cr_assert(ieee_ulp_eq(dbl, a->devices[d].launch_us, b->devices[d].launch_us, 0));
        cr_assert_eq(a->devices[d].sm_count, b->devices[d].sm_count);
        for (int k = 0; k < a->n_mb; k++)
            for (int i = 0; i < a->n_nodes; i++)
                for (int ph = 0; ph < PHASE_COUNT; ph++) {
                    size_t at = profile_cost_index(a, d, k, i, ph);
                    cr_assert(ieee_ulp_eq(dbl, a->cost_us[at], b->cost_us[at], 0),
                              "cost dev %d mb %d node %d phase %d: %g vs %g", d, a->mb_sizes[k], i, ph,
                              a->cost_us[at], b->cost_us[at]);
                }
    }
    for (int i = 0; i < a->n_nodes; i++) {
        cr_assert_eq(a->node_mem[i].param_bytes, b->node_mem[i].param_bytes);
        cr_assert_eq(a->node_mem[i].act_bytes_per_sample, b->node_mem[i].act_bytes_per_sample);
        cr_assert_eq(a->node_mem[i].out_bytes_per_sample, b->node_mem[i].out_bytes_per_sample);
        cr_assert_eq(a->node_mem[i].workspace_bytes, b->node_mem[i].workspace_bytes);
        cr_assert_eq(a->node_mem[i].fwd_workspace_bytes, b->node_mem[i].fwd_workspace_bytes);
        cr_assert_eq(a->node_mem[i].bwd_workspace_bytes, b->node_mem[i].bwd_workspace_bytes);
    }
    for (int l = 0; l < a->n_devices * a->n_devices; l++) {
        const profile_link *x = &a->links[l], *y = &b->links[l];
        if (l / a->n_devices == l % a->n_devices) continue;
        cr_assert(ieee_ulp_eq(dbl, x->latency_us, y->latency_us, 0));
        cr_assert(ieee_ulp_eq(dbl, x->bandwidth, y->bandwidth, 0));
        cr_assert_eq(x->n_points, y->n_points);
        for (int j = 0; j < x->n_points; j++) {
            cr_assert(ieee_ulp_eq(dbl, x->bytes[j], y->bytes[j], 0));
            cr_assert(ieee_ulp_eq(dbl, x->us[j], y->us[j], 0));
        }
    }
}

static profile_db *open_db(const char *path, profile_db_mode mode) {
    profile_db *db = NULL;
    char msg[512] = "";
    pl_status st = profile_db_open(path, mode, &db, msg, sizeof msg);
    cr_assert_eq(st, PL_OK, "open %s: %s", path, msg);
    return db;
}

Test(store, round_trip_preserves_costs_curves_memory_and_devices) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "p.db");
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    profile_data *p = distinct_profile(&cfg, 3);

    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    cr_assert_eq(profile_db_opened_version(db), -1, "a new file has no version before migration");
    cr_assert_eq(profile_db_save_profile(db, &cfg, p, msg, sizeof msg), PL_OK, "%s", msg);
    profile_db_close(db);

    db = open_db(path, PROFILE_DB_READ);
    cr_assert_eq(profile_db_opened_version(db), PROFILE_DB_SCHEMA_VERSION);
    profile_data *q = NULL;
    gpt_config got;
    cr_assert_eq(profile_db_load_profile(db, &cfg, &q, &got, msg, sizeof msg), PL_OK, "%s", msg);
    assert_profiles_equal(p, q);
    char key[PROFILE_NAME_LEN];
    gpt_config_key(&cfg, key, sizeof key);
    cr_assert_str_eq(q->graph_key, key);
    cr_assert_eq(memcmp(&got, &cfg, sizeof cfg), 0, "config read back");
    profile_data_destroy(q);

    /* without a config: the only graph */
    q = NULL;
    cr_assert_eq(profile_db_load_profile(db, NULL, &q, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    assert_profiles_equal(p, q);
    profile_data_destroy(q);

    profile_db_machine_row m;
    cr_assert_eq(profile_db_machine(db, &m), PL_OK);
    cr_assert_str_eq(m.name, "testbox");
    cr_assert_str_eq(m.source, "measured");
    cr_assert_eq(strlen(m.created_at), 24, "ISO-8601 with milliseconds: %s", m.created_at);
    profile_db_close(db);

    /* the precision comes back as the profile's bf16 flag (the simulator's rule for the gradients' zero) */
    q = NULL;
    db = open_db(path, PROFILE_DB_READ);
    cr_assert_eq(profile_db_load_profile(db, NULL, &q, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(q->bf16, 0, "no precision recorded: tf32");
    profile_data_destroy(q);
    profile_db_close(db);
    db = open_db(path, PROFILE_DB_WRITE);
    cr_assert_eq(profile_db_set_precision(db, "bf16"), PL_OK);
    profile_db_close(db);
    db = open_db(path, PROFILE_DB_READ);
    q = NULL;
    cr_assert_eq(profile_db_load_profile(db, NULL, &q, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(q->bf16, 1);
    profile_data *c = NULL;
    cr_assert_eq(profile_data_clone(q, &c), PL_OK);
    cr_assert_eq(c->bf16, 1, "a clone keeps it");
    profile_data_destroy(c);
    profile_data_destroy(q);
    profile_db_close(db);
    profile_data_destroy(p);
    th_rmtree(dir);
}

/* A file of schema 2 (one workspace a node, for both calls) reads READ as
 * that one figure for both calls, untouched; a WRITE open migrates it to 3,
 * its rows keeping the one figure until a profile is saved again. */
Test(store, a_schema_2_file_reads_one_workspace_for_both_calls_and_migrates) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "v2.db");
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    profile_data *p = distinct_profile(&cfg, 2);
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    cr_assert_eq(profile_db_save_profile(db, &cfg, p, msg, sizeof msg), PL_OK, "%s", msg);
    profile_db_close(db);
    /* what a file written before schema 3 looks like */
    cr_assert_eq(th_sql(path, "ALTER TABLE node_cost DROP COLUMN b_us; ALTER TABLE node_cost DROP COLUMN w_us; "
                              "ALTER TABLE node DROP COLUMN fwd_workspace_bytes; ALTER TABLE node DROP COLUMN "
                              "bwd_workspace_bytes; UPDATE meta SET value = '2' WHERE key = 'schema_version'"),
                 0);
    for (int pass = 0; pass < 2; pass++) {
        db = open_db(path, PROFILE_DB_READ);
        cr_assert_eq(profile_db_opened_version(db), pass ? PROFILE_DB_SCHEMA_VERSION : 2);
        profile_data *q = NULL;
        cr_assert_eq(profile_db_load_profile(db, &cfg, &q, NULL, msg, sizeof msg), PL_OK, "%s", msg);
        for (int i = 0; i < q->n_nodes; i++) {
            cr_assert_eq(q->node_mem[i].workspace_bytes, 3000 + i);
            cr_assert_eq(q->node_mem[i].fwd_workspace_bytes, 0, "pass %d node %d", pass, i);
            cr_assert_eq(q->node_mem[i].bwd_workspace_bytes, 0);
            cr_assert_eq(profile_node_call_workspace(&q->node_mem[i], PHASE_FWD), 3000 + i, "one figure for both");
            cr_assert_eq(profile_node_call_workspace(&q->node_mem[i], PHASE_BWD), 3000 + i);
        }
        profile_data_destroy(q);
        profile_db_close(db);
        if (!pass) profile_db_close(open_db(path, PROFILE_DB_WRITE)); /* migrates */
    }
    db = open_db(path, PROFILE_DB_WRITE);
    cr_assert_eq(profile_db_save_profile(db, &cfg, p, msg, sizeof msg), PL_OK, "%s", msg);
    profile_db_close(db);
    db = open_db(path, PROFILE_DB_READ);
    profile_data *q = NULL;
    cr_assert_eq(profile_db_load_profile(db, &cfg, &q, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    assert_profiles_equal(p, q);
    cr_assert_eq(profile_node_call_workspace(&q->node_mem[1], PHASE_FWD), 2501, "saved again: the forward's own");
    profile_data_destroy(q);
    profile_db_close(db);
    profile_data_destroy(p);
    th_rmtree(dir);
}

/* a graph with extensions (parallel residual, RMSNorm, GQA, tied head, ...)
 * comes back whole: the six sizes are columns, the rest is the key's suffix */
Test(store, a_graph_with_extensions_round_trips_its_whole_config) {
    static const char *configs[] = {"tiny,parallel=1", "tiny,norm=rmsnorm,mlp=swiglu,pos=rotary,bias=0,kv_heads=1",
                                    "tiny,tied=1,vocab_multiple=128,d_ff=48"};
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        char dir[256], path[512], msg[512] = "";
        cr_assert_eq(th_mkdtemp(dir), 0);
        th_path(path, sizeof path, dir, "x.db");
        gpt_config cfg;
        cr_assert_eq(gpt_config_parse(configs[i], &cfg, msg, sizeof msg), PL_OK, "%s: %s", configs[i], msg);
        cr_assert_eq(gpt_config_is_plain(&cfg), 0, "%s", configs[i]);
        profile_data *p = distinct_profile(&cfg, 2);
        profile_db *db = open_db(path, PROFILE_DB_CREATE);
        cr_assert_eq(profile_db_save_profile(db, &cfg, p, msg, sizeof msg), PL_OK, "%s", msg);
        profile_db_close(db);
        db = open_db(path, PROFILE_DB_READ);
        profile_data *q = NULL;
        gpt_config got;
        memset(&got, 0, sizeof got);
        cr_assert_eq(profile_db_load_profile(db, NULL, &q, &got, msg, sizeof msg), PL_OK, "%s", msg);
        cr_assert_eq(memcmp(&got, &cfg, sizeof cfg), 0, "%s: the whole config read back", configs[i]);
        profile_data_destroy(q);
        profile_db_close(db);
        /* a key that does not round-trip is a damaged file: one message */
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "sqlite3 '%s' \"UPDATE graph SET key = key || 'zz'\"", path);
        cr_assert_eq(system(cmd), 0);
        db = open_db(path, PROFILE_DB_READ);
        q = NULL;
        cr_assert_eq(profile_db_load_profile(db, NULL, &q, NULL, msg, sizeof msg), PL_ERR_INVALID, "%s", configs[i]);
        cr_assert(strstr(msg, "unknown option letter 'z'") != NULL, "%s", msg);
        cr_assert_null(q);
        profile_db_close(db);
        profile_data_destroy(p);
        th_rmtree(dir);
    }
}

Test(store, spec_profile_round_trips_with_link_kinds) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "spec.db");
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("default", &cfg, NULL, 0), PL_OK);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    int sizes[5] = {16, 8, 4, 2, 1};
    profile_data *p = NULL;
    cr_assert_eq(spec_profile_build(spec_find("t4x4-pcie"), g, sizes, 5, &p), PL_OK);

    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    cr_assert_eq(profile_db_save_profile(db, &cfg, p, msg, sizeof msg), PL_OK, "%s", msg);
    char kind[32];
    cr_assert_eq(profile_db_link_kind(db, 0, 1, kind, sizeof kind), PL_OK);
    cr_assert_str_eq(kind, "", "save_profile stores no kind");
    cr_assert_eq(profile_db_put_link(db, "t4x4-pcie", 0, 1, 20.0, 10e9, "pcie3-host"), PL_OK);
    /* saving again keeps the kind */
    cr_assert_eq(profile_db_save_profile(db, &cfg, p, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_link_kind(db, 0, 1, kind, sizeof kind), PL_OK);
    cr_assert_str_eq(kind, "pcie3-host");
    cr_assert_eq(profile_db_link_kind(db, 0, 0, kind, sizeof kind), PL_ERR_NOT_FOUND);
    profile_db_close(db);

    db = open_db(path, PROFILE_DB_READ);
    profile_data *q = NULL;
    cr_assert_eq(profile_db_load_profile(db, &cfg, &q, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    assert_profiles_equal(p, q);
    cr_assert(ieee_ulp_eq(dbl, profile_transfer_us(p, 2, 3, 823410688.0), profile_transfer_us(q, 2, 3, 823410688.0), 0));
    profile_data_destroy(q);
    profile_db_close(db);
    profile_data_destroy(p);
    graph_destroy(g);
    th_rmtree(dir);
}

Test(store, saving_again_replaces_the_same_machine_and_graph_and_keeps_others) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "p.db");
    gpt_config tiny, tiny8;
    cr_assert_eq(gpt_config_parse("tiny", &tiny, NULL, 0), PL_OK);
    cr_assert_eq(gpt_config_parse("tiny,batch=8", &tiny8, NULL, 0), PL_OK);
    profile_data *p = distinct_profile(&tiny, 2), *p8 = distinct_profile(&tiny8, 2);
    for (size_t c = 0; c < (size_t)2 * 3 * p8->n_nodes * PHASE_COUNT; c++) p8->cost_us[c] += 0.125;

    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    cr_assert_eq(profile_db_save_profile(db, &tiny, p, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_save_profile(db, &tiny8, p8, msg, sizeof msg), PL_OK, "%s", msg);
    /* change the first and save it again: replaced, not duplicated */
    p->cost_us[profile_cost_index(p, 1, 2, 3, PHASE_BWD)] = 77.0;
    p->node_mem[4].workspace_bytes = 123456;
    cr_assert_eq(profile_db_save_profile(db, &tiny, p, msg, sizeof msg), PL_OK, "%s", msg);

    profile_db_graph_info *gi = NULL;
    int n = 0;
    cr_assert_eq(profile_db_list_graphs(db, &gi, &n), PL_OK);
    cr_assert_eq(n, 2);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(gi[i].n_costs, (int64_t)2 * gi[i].n_nodes * (3 * 2 + 1), "costs of %s", gi[i].key);
        cr_assert_eq(gi[i].cfg.vocab, 64);
    }
    free(gi);
    profile_data *q = NULL;
    cr_assert_eq(profile_db_load_profile(db, &tiny, &q, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    assert_profiles_equal(p, q);
    profile_data_destroy(q);
    cr_assert_eq(profile_db_load_profile(db, &tiny8, &q, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    assert_profiles_equal(p8, q);
    profile_data_destroy(q);
    profile_db_close(db);
    profile_data_destroy(p);
    profile_data_destroy(p8);
    th_rmtree(dir);
}

Test(store, refuses_a_profile_of_another_machine) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "p.db");
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    profile_data *p = distinct_profile(&cfg, 2);
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    cr_assert_eq(profile_db_save_profile(db, &cfg, p, msg, sizeof msg), PL_OK, "%s", msg);
    profile_data *other = NULL;
    cr_assert_eq(profile_data_clone(p, &other), PL_OK);
    snprintf(other->machine, sizeof other->machine, "otherbox");
    other->cost_us[0] = 999.0;
    cr_assert_eq(profile_db_save_profile(db, &cfg, other, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(th_has(msg, "testbox") && th_has(msg, "otherbox"), "message names both machines: %s", msg);
    profile_machine_info info = {.name = "otherbox", .source = "spec"};
    cr_assert_eq(profile_db_put_machine(db, &info), PL_ERR_INVALID);
    profile_data *q = NULL;
    cr_assert_eq(profile_db_load_profile(db, &cfg, &q, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    assert_profiles_equal(p, q);
    profile_data_destroy(q);
    profile_db_close(db);
    profile_data_destroy(p);
    profile_data_destroy(other);
    th_rmtree(dir);
}

Test(store, missing_graph_is_not_found_and_lists_the_graphs_held) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "p.db");
    gpt_config cfg, other;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    cr_assert_eq(gpt_config_parse("gpt12", &other, NULL, 0), PL_OK);
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    profile_data *q = NULL;
    cr_assert_eq(profile_db_load_profile(db, NULL, &q, NULL, msg, sizeof msg), PL_ERR_NOT_FOUND);
    cr_assert(th_has(msg, "no profile"), "%s", msg);
    profile_data *p = distinct_profile(&cfg, 2);
    cr_assert_eq(profile_db_save_profile(db, &cfg, p, msg, sizeof msg), PL_OK, "%s", msg);
    profile_db_close(db);

    db = open_db(path, PROFILE_DB_READ);
    cr_assert_eq(profile_db_load_profile(db, &other, &q, NULL, msg, sizeof msg), PL_ERR_NOT_FOUND);
    cr_assert_null(q);
    char want[PROFILE_NAME_LEN], asked[PROFILE_NAME_LEN];
    gpt_config_key(&cfg, want, sizeof want);
    gpt_config_key(&other, asked, sizeof asked);
    cr_assert(th_has(msg, want) && th_has(msg, asked), "message names the request and what is held: %s", msg);
    profile_db_close(db);
    profile_data_destroy(p);
    th_rmtree(dir);
}

static int collect_samples(void *ctx, const profile_run_sample *s) {
    int *count = ctx;
    int i = (*count)++;
    cr_assert_eq(s->update, i / 4);
    cr_assert_eq(s->sample, i % 4);
    char want[32];
    snprintf(want, sizeof want, "0,1,%d", i);
    cr_assert_str_eq(s->placement, want);
    if (i == 5) {
        cr_assert(isnan(s->step_us), "NaN stored as NULL reads back as NaN");
        cr_assert_eq(s->oom, 1);
    } else {
        cr_assert(ieee_ulp_eq(dbl, s->step_us, 1000.0 + i, 0));
        cr_assert_eq(s->oom, 0);
    }
    cr_assert_eq(s->peak_bytes, (int64_t)i << 33);
    return 0;
}

static int stop_after_three(void *ctx, const profile_run_sample *s) {
    (void)s;
    return ++*(int *)ctx == 3;
}

static int collect_runs(void *ctx, const profile_run_info *r) {
    int *count = ctx;
    if ((*count)++ == 0) {
        cr_assert_str_eq(r->method, "rl");
        cr_assert_str_eq(r->args, "--updates 2");
        cr_assert_eq(r->finished, 1);
        cr_assert_eq(r->n_samples, 8);
    } else {
        cr_assert_str_eq(r->method, "random");
        cr_assert_str_eq(r->args, "");
        cr_assert_eq(r->finished, 0);
        cr_assert_eq(r->n_samples, 0);
    }
    return 0;
}

Test(store, runs_and_samples_round_trip) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "p.db");
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    int64_t run = 0, run2 = 0;
    cr_assert_eq(profile_db_run_create(db, "rl", "--updates 2", &run), PL_OK);
    cr_assert_eq(profile_db_begin(db), PL_OK);
    for (int i = 0; i < 8; i++) {
        char pl[32];
        snprintf(pl, sizeof pl, "0,1,%d", i);
        cr_assert_eq(profile_db_run_add_sample(db, run, i / 4, i % 4, pl, i == 5 ? NAN : 1000.0 + i, (int64_t)i << 33,
                                               i == 5),
                     PL_OK);
    }
    cr_assert_eq(profile_db_commit(db), PL_OK);
    cr_assert_eq(profile_db_run_finish(db, run), PL_OK);
    cr_assert_eq(profile_db_run_create(db, "random", NULL, &run2), PL_OK);
    cr_assert_neq(run, run2);
    cr_assert_eq(profile_db_run_add_sample(db, run + 100, 0, 0, "0", 1.0, 0, 0), PL_ERR_DB, "unknown run refused");
    cr_assert_eq(profile_db_run_finish(db, run + 100), PL_ERR_NOT_FOUND);
    profile_db_close(db);

    db = open_db(path, PROFILE_DB_READ);
    int count = 0;
    cr_assert_eq(profile_db_run_samples(db, run, collect_samples, &count), PL_OK);
    cr_assert_eq(count, 8);
    count = 0;
    cr_assert_eq(profile_db_run_samples(db, run, stop_after_three, &count), PL_OK);
    cr_assert_eq(count, 3, "a non-zero callback return stops the walk");
    count = 0;
    cr_assert_eq(profile_db_run_samples(db, run2, collect_samples, &count), PL_OK);
    cr_assert_eq(count, 0);
    cr_assert_eq(profile_db_run_samples(db, run + 100, collect_samples, &count), PL_ERR_NOT_FOUND);
    count = 0;
    cr_assert_eq(profile_db_runs(db, collect_runs, &count), PL_OK);
    cr_assert_eq(count, 2);
    cr_assert_eq(profile_db_run_create(db, "rl", "", &run), PL_ERR_INVALID, "no writes on a READ handle");
    profile_db_close(db);
    th_rmtree(dir);
}

typedef struct {
    int n;
    int64_t ids[8];
} meas_seen;

static int collect_measurements(void *ctx, int64_t id, const profile_measurement *m, const char *at) {
    meas_seen *s = ctx;
    s->ids[s->n++] = id;
    cr_assert_eq(strlen(at), 24);
    if (!strcmp(m->purpose, "calibrate")) {
        cr_assert_str_eq(m->graph_key, "gpt-L2-C16-H2-V64-T8-B4");
        cr_assert_str_eq(m->placement, "0,0,1,1");
        cr_assert_eq(m->micro_batches, 4);
        cr_assert_str_eq(m->schedule, "1f1b");
        cr_assert_eq(m->mem_cap, (int64_t)8 << 30);
        cr_assert(ieee_ulp_eq(dbl, m->step_us, 12345.5, 0));
        cr_assert(ieee_ulp_eq(dbl, m->spread_us, 12.25, 0));
        cr_assert_eq(m->peak_bytes_max, (int64_t)5 << 30);
        cr_assert_eq(m->oom, 0);
        cr_assert_str_eq(m->extra, "{\"rounds\":5}");
    } else {
        cr_assert_str_eq(m->purpose, "confirm");
        cr_assert(isnan(m->step_us), "OOM step time reads back as NaN");
        cr_assert(isnan(m->spread_us));
        cr_assert_eq(m->oom, 1);
        cr_assert_null(m->extra);
    }
    return 0;
}

Test(store, measurements_round_trip_with_a_purpose_filter) {
    char dir[256], path[512], msg[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "p.db");
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    profile_measurement m = {.graph_key = "gpt-L2-C16-H2-V64-T8-B4", .placement = "0,0,1,1", .micro_batches = 4,
                             .schedule = "1f1b", .mem_cap = (int64_t)8 << 30, .step_us = 12345.5, .spread_us = 12.25,
                             .peak_bytes_max = (int64_t)5 << 30, .oom = 0, .purpose = "calibrate",
                             .extra = "{\"rounds\":5}"};
    int64_t id = 0;
    cr_assert_eq(profile_db_add_measurement(db, &m, &id), PL_ERR_NOT_FOUND, "needs the file's machine");
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    profile_data *p = distinct_profile(&cfg, 2);
    cr_assert_eq(profile_db_save_profile(db, &cfg, p, msg, sizeof msg), PL_OK, "%s", msg);
    int64_t id1 = 0, id2 = 0, id3 = 0;
    cr_assert_eq(profile_db_add_measurement(db, &m, &id1), PL_OK);
    profile_measurement oom = m;
    oom.step_us = NAN;
    oom.spread_us = NAN;
    oom.oom = 1;
    oom.purpose = "confirm";
    oom.extra = NULL;
    cr_assert_eq(profile_db_add_measurement(db, &oom, &id2), PL_OK);
    cr_assert_eq(profile_db_add_measurement(db, &m, &id3), PL_OK);
    profile_measurement bad = m;
    bad.placement = NULL;
    cr_assert_eq(profile_db_add_measurement(db, &bad, NULL), PL_ERR_INVALID);
    profile_db_close(db);

    db = open_db(path, PROFILE_DB_READ);
    meas_seen all = {0}, cal = {0}, none = {0};
    cr_assert_eq(profile_db_measurements(db, NULL, collect_measurements, &all), PL_OK);
    cr_assert_eq(all.n, 3);
    cr_assert(all.ids[0] == id1 && all.ids[1] == id2 && all.ids[2] == id3, "insertion order");
    cr_assert_eq(profile_db_measurements(db, "calibrate", collect_measurements, &cal), PL_OK);
    cr_assert_eq(cal.n, 2);
    cr_assert(cal.ids[0] == id1 && cal.ids[1] == id3);
    cr_assert_eq(profile_db_measurements(db, "nothing", collect_measurements, &none), PL_OK);
    cr_assert_eq(none.n, 0);
    profile_db_close(db);
    profile_data_destroy(p);
    th_rmtree(dir);
}

Test(store, sim_params_round_trip_and_a_save_replaces_the_set) {
    char dir[256], path[512], msg[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "p.db");
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    const char *names[3] = {"launch_overhead_us", "contention", "compute_scale"};
    double vals[3] = {3.5, 0.125, 1.0625}, got[3] = {-1, -1, -1};
    int found = -1;
    cr_assert_eq(profile_db_load_sim_params(db, "g", 3, names, got, &found), PL_OK);
    cr_assert_eq(found, 0, "never calibrated");
    cr_assert_eq(profile_db_save_sim_params(db, "g", 3, names, vals, "fit"), PL_ERR_NOT_FOUND, "needs a machine");
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    profile_data *p = distinct_profile(&cfg, 2);
    cr_assert_eq(profile_db_save_profile(db, &cfg, p, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_save_sim_params(db, "g", 3, names, vals, "fit 1"), PL_OK);
    cr_assert_eq(profile_db_save_sim_params(db, "other", 1, names, vals, "fit 1"), PL_OK);
    double vals2[2] = {7.0, 0.5};
    cr_assert_eq(profile_db_save_sim_params(db, "g", 2, names, vals2, "fit 2"), PL_OK);
    profile_db_close(db);

    db = open_db(path, PROFILE_DB_READ);
    cr_assert_eq(profile_db_load_sim_params(db, "g", 3, names, got, &found), PL_OK);
    cr_assert_eq(found, 2, "the second save replaced the whole set");
    cr_assert(ieee_ulp_eq(dbl, got[0], 7.0, 0));
    cr_assert(ieee_ulp_eq(dbl, got[1], 0.5, 0));
    cr_assert(ieee_ulp_eq(dbl, got[2], -1.0, 0), "absent names are left alone");
    cr_assert_eq(profile_db_load_sim_params(db, "other", 3, names, got, &found), PL_OK);
    cr_assert_eq(found, 1);
    cr_assert(ieee_ulp_eq(dbl, got[0], 3.5, 0));
    profile_db_close(db);
    profile_data_destroy(p);
    th_rmtree(dir);
}

Test(store, checkpoints_round_trip_by_update_and_latest) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "p.db");
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    int64_t run;
    cr_assert_eq(profile_db_run_create(db, "rl", "", &run), PL_OK);
    unsigned char a[1000], b[3000];
    for (size_t i = 0; i < sizeof a; i++) a[i] = (unsigned char)(i * 7);
    for (size_t i = 0; i < sizeof b; i++) b[i] = (unsigned char)(i * 13 + 1);
    cr_assert_eq(profile_db_checkpoint_save(db, run, 0, a, sizeof a), PL_OK);
    cr_assert_eq(profile_db_checkpoint_save(db, run, 5, b, sizeof b), PL_OK);
    cr_assert_eq(profile_db_checkpoint_save(db, run, 3, a, 10), PL_OK);
    cr_assert_eq(profile_db_checkpoint_save(db, run, 7, NULL, 0), PL_OK, "an empty blob is allowed");
    cr_assert_eq(profile_db_checkpoint_save(db, run + 1, 0, a, sizeof a), PL_ERR_DB, "unknown run refused");
    profile_db_close(db);

    db = open_db(path, PROFILE_DB_READ);
    void *blob = NULL;
    size_t n = 0;
    int upd = -1;
    cr_assert_eq(profile_db_checkpoint_load(db, run, 5, &upd, &blob, &n), PL_OK);
    cr_assert_eq(upd, 5);
    cr_assert_eq(n, sizeof b);
    cr_assert_eq(memcmp(blob, b, n), 0);
    free(blob);
    cr_assert_eq(profile_db_checkpoint_load(db, run, -1, &upd, &blob, &n), PL_OK);
    cr_assert_eq(upd, 7, "latest update");
    cr_assert_eq(n, 0);
    cr_assert_not_null(blob, "never NULL, even for 0 bytes");
    free(blob);
    cr_assert_eq(profile_db_checkpoint_load(db, run, 0, NULL, &blob, &n), PL_OK);
    cr_assert_eq(n, sizeof a);
    cr_assert_eq(memcmp(blob, a, n), 0);
    free(blob);
    cr_assert_eq(profile_db_checkpoint_load(db, run, 4, &upd, &blob, &n), PL_ERR_NOT_FOUND);
    cr_assert_null(blob);
    cr_assert_eq(profile_db_checkpoint_load(db, run + 9, -1, &upd, &blob, &n), PL_ERR_NOT_FOUND);
    profile_db_close(db);
    th_rmtree(dir);
}

Test(store, checkpoint_prune_keeps_the_latest_and_other_runs) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "p.db");
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    int64_t run, other;
    cr_assert_eq(profile_db_run_create(db, "rl", "", &run), PL_OK);
    cr_assert_eq(profile_db_run_create(db, "rl", "", &other), PL_OK);
    unsigned char a[16] = {1, 2, 3};
    for (int u = 0; u < 4; u++) cr_assert_eq(profile_db_checkpoint_save(db, run, u, a, sizeof a), PL_OK);
    cr_assert_eq(profile_db_checkpoint_save(db, other, 0, a, sizeof a), PL_OK);
    cr_assert_eq(profile_db_begin(db), PL_OK); /* as a training run prunes: inside its own transaction */
    cr_assert_eq(profile_db_checkpoint_prune(db, run, 3), PL_OK, "%s", profile_db_last_error(db));
    cr_assert_eq(profile_db_commit(db), PL_OK);
    void *blob = NULL;
    size_t n = 0;
    int upd = -1;
    for (int u = 0; u < 3; u++)
        cr_assert_eq(profile_db_checkpoint_load(db, run, u, &upd, &blob, &n), PL_ERR_NOT_FOUND, "update %d pruned", u);
    cr_assert_eq(profile_db_checkpoint_load(db, run, -1, &upd, &blob, &n), PL_OK);
    cr_assert_eq(upd, 3, "the latest is kept");
    free(blob);
    cr_assert_eq(profile_db_checkpoint_load(db, other, 0, &upd, &blob, &n), PL_OK, "another run is untouched");
    free(blob);
    cr_assert_eq(profile_db_checkpoint_prune(db, run + 99, 5), PL_OK, "nothing to prune is no error");
    profile_db_close(db);
    db = open_db(path, PROFILE_DB_READ);
    cr_assert_eq(profile_db_checkpoint_prune(db, run, 9), PL_ERR_INVALID, "a READ handle writes nothing");
    profile_db_close(db);
    th_rmtree(dir);
}

Test(store, unit_writes_resume_into_a_loadable_profile) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "hw.db");
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    char key[PROFILE_NAME_LEN];
    gpt_config_key(&cfg, key, sizeof key);
    const char *M = "h200x2";
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    int has = -1;
    cr_assert_eq(profile_db_has_node_cost(db, M, key, 0, 0, PHASE_FWD, 1, &has), PL_OK);
    cr_assert_eq(has, 0, "nothing measured before the machine exists");
    profile_device dev = {.name = "NVIDIA H200", .mem_bytes = 143771LL << 20, .sm_count = 132};
    cr_assert_eq(profile_db_put_device(db, M, 0, &dev), PL_ERR_NOT_FOUND, "machine first");
    profile_machine_info info = {.name = M, .source = "measured", .host = "gpu-host", .driver = "580.159.04",
                                 .cuda = "13.0", .topology = "NV18"};
    cr_assert_eq(profile_db_put_machine(db, &info), PL_OK);
    cr_assert_eq(profile_db_put_device(db, M, 0, &dev), PL_OK);
    cr_assert_eq(profile_db_put_device(db, M, 1, &dev), PL_OK);
    cr_assert_eq(profile_db_put_node_cost(db, M, key, 0, 0, PHASE_FWD, 1, 5.0, 0.1), PL_ERR_NOT_FOUND, "graph first");
    profile_node_mem mem[16];
    cr_assert_leq(g->n_nodes, 16);
    for (int i = 0; i < g->n_nodes; i++)
        mem[i] = (profile_node_mem){.param_bytes = graph_param_bytes(&g->nodes[i]),
                                    .out_bytes_per_sample = g->nodes[i].out_bytes_per_sample,
                                    .act_bytes_per_sample = g->nodes[i].act_bytes_per_sample};
    mem[2].workspace_bytes = 32 << 20;
    mem[2].fwd_workspace_bytes = 5 << 20;
    mem[2].bwd_workspace_bytes = 32 << 20;
    cr_assert_eq(profile_db_put_graph(db, g, mem), PL_OK);
    cr_assert_eq(profile_db_put_link(db, M, 0, 1, 15.0, 3.9e11, "nvlink"), PL_OK);
    cr_assert_eq(profile_db_put_link(db, M, 1, 0, 15.5, 3.8e11, NULL), PL_OK);
    cr_assert_eq(profile_db_put_link(db, M, 1, 1, 15.5, 3.8e11, NULL), PL_ERR_INVALID);
    double pts[3] = {4096, 1 << 20, 1 << 30};
    for (int j = 0; j < 3; j++) {
        cr_assert_eq(profile_db_put_link_point(db, M, 0, 1, pts[j], 15 + j, NAN), PL_OK);
        cr_assert_eq(profile_db_put_link_point(db, M, 1, 0, pts[j], 16 + j, 0.5), PL_OK);
    }
    cr_assert_eq(profile_db_has_link_point(db, M, 0, 1, 1 << 20, &has), PL_OK);
    cr_assert_eq(has, 1);
    cr_assert_eq(profile_db_has_link_point(db, M, 0, 1, 1 << 21, &has), PL_OK);
    cr_assert_eq(has, 0);

    /* measure all but the last node's backward at mb 2, one unit per call */
    const int mbs[2] = {1, 2};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < g->n_nodes; i++) {
            for (int k = 0; k < 2; k++)
                for (int ph = PHASE_FWD; ph <= PHASE_BWD; ph++) {
                    if (d == 1 && i == g->n_nodes - 1 && k == 1 && ph == PHASE_BWD) continue;
                    cr_assert_eq(profile_db_put_node_cost(db, M, key, d, i, ph, mbs[k], 10.0 * d + i + k + ph, 0.1),
                                 PL_OK);
                }
            cr_assert_eq(profile_db_put_node_cost(db, M, key, d, i, PHASE_OPT, 99, 2.0 + i, NAN), PL_OK);
        }
    cr_assert_eq(profile_db_put_node_cost(db, M, key, 0, g->n_nodes, PHASE_FWD, 1, 1.0, 0), PL_ERR_INVALID);
    cr_assert_eq(profile_db_put_node_cost(db, M, key, 0, 0, PHASE_FWD, 0, 1.0, 0), PL_ERR_INVALID);
    cr_assert_eq(profile_db_has_node_cost(db, M, key, 1, g->n_nodes - 1, PHASE_BWD, 2, &has), PL_OK);
    cr_assert_eq(has, 0);
    cr_assert_eq(profile_db_has_node_cost(db, M, key, 1, g->n_nodes - 1, PHASE_BWD, 1, &has), PL_OK);
    cr_assert_eq(has, 1);
    cr_assert_eq(profile_db_has_node_cost(db, M, key, 0, 3, PHASE_OPT, 7, &has), PL_OK);
    cr_assert_eq(has, 1, "the optimizer cost does not depend on the micro-batch size");

    profile_data *p = NULL;
    cr_assert_eq(profile_db_load_profile(db, &cfg, &p, NULL, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(th_has(msg, "incomplete") && th_has(msg, "1 of"), "%s", msg);
    cr_assert_null(p);

    cr_assert_eq(profile_db_put_node_cost(db, M, key, 1, g->n_nodes - 1, PHASE_BWD, 2, 42.0, 0.2), PL_OK);
    cr_assert_eq(profile_db_put_step_anchor(db, M, key, 0, 4, 1234.5, 6.5), PL_OK);
    profile_db_close(db);

    db = open_db(path, PROFILE_DB_READ);
    gpt_config got;
    cr_assert_eq(profile_db_load_profile(db, NULL, &p, &got, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(p->n_devices, 2);
    cr_assert_eq(p->n_mb, 2);
    cr_assert_str_eq(p->machine, M);
    cr_assert_str_eq(p->source, "measured");
    cr_assert(ieee_ulp_eq(dbl, profile_node_cost(p, 1, 2, g->n_nodes - 1, PHASE_BWD), 42.0, 0));
    cr_assert(ieee_ulp_eq(dbl, profile_node_cost(p, 1, 2, 5, PHASE_FWD), 10.0 + 5 + 1, 0));
    cr_assert(ieee_ulp_eq(dbl, profile_node_cost(p, 0, 1, 5, PHASE_OPT), 7.0, 0));
    cr_assert(ieee_ulp_eq(dbl, profile_transfer_us(p, 1, 0, 4096), 16.0, 0));
    cr_assert(ieee_ulp_eq(dbl, p->links[1 * 2 + 0].bandwidth, 3.8e11, 0));
    cr_assert_eq(p->node_mem[2].workspace_bytes, 32 << 20);
    cr_assert_eq(profile_node_call_workspace(&p->node_mem[2], PHASE_FWD), 5 << 20, "the forward's own workspace");
    cr_assert_eq(profile_node_call_workspace(&p->node_mem[2], PHASE_BWD), 32 << 20);
    cr_assert_eq(profile_node_call_workspace(&p->node_mem[3], PHASE_FWD), 0);
    cr_assert_eq(p->node_mem[2].param_bytes, graph_param_bytes(&g->nodes[2]));
    cr_assert_eq(p->node_mem[2].out_bytes_per_sample, g->nodes[2].out_bytes_per_sample);
    cr_assert_eq(p->devices[1].mem_bytes, 143771LL << 20);
    char kind[16];
    cr_assert_eq(profile_db_link_kind(db, 0, 1, kind, sizeof kind), PL_OK);
    cr_assert_str_eq(kind, "nvlink");
    double us = 0, spread = 0;
    cr_assert_eq(profile_db_get_step_anchor(db, key, 0, 4, &us, &spread), PL_OK);
    cr_assert(ieee_ulp_eq(dbl, us, 1234.5, 0));
    cr_assert(ieee_ulp_eq(dbl, spread, 6.5, 0));
    cr_assert_eq(profile_db_get_step_anchor(db, key, 1, 4, &us, NULL), PL_ERR_NOT_FOUND);
    profile_db_machine_row m;
    cr_assert_eq(profile_db_machine(db, &m), PL_OK);
    cr_assert_str_eq(m.host, "gpu-host");
    cr_assert_str_eq(m.driver, "580.159.04");
    cr_assert_str_eq(m.cuda, "13.0");
    cr_assert_str_eq(m.topology, "NV18");
    profile_db_close(db);
    profile_data_destroy(p);
    graph_destroy(g);
    th_rmtree(dir);
}

Test(store, explicit_transactions_commit_or_discard_together) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "p.db");
    profile_db *db = open_db(path, PROFILE_DB_CREATE);
    cr_assert_eq(profile_db_commit(db), PL_ERR_INVALID, "nothing to commit");
    cr_assert_eq(profile_db_rollback(db), PL_ERR_INVALID);
    int64_t run;
    cr_assert_eq(profile_db_begin(db), PL_OK);
    cr_assert_eq(profile_db_begin(db), PL_ERR_INVALID, "no nesting");
    cr_assert_eq(profile_db_run_create(db, "discarded", "", &run), PL_OK);
    cr_assert_eq(profile_db_run_add_sample(db, run, 0, 0, "0", 1.0, 0, 0), PL_OK);
    cr_assert_eq(profile_db_rollback(db), PL_OK);
    cr_assert_eq(profile_db_begin(db), PL_OK);
    cr_assert_eq(profile_db_run_create(db, "kept", "", &run), PL_OK);
    /* a failing call inside the transaction undoes only itself */
    cr_assert_eq(profile_db_run_add_sample(db, run + 50, 0, 0, "0", 1.0, 0, 0), PL_ERR_DB);
    cr_assert_eq(profile_db_run_add_sample(db, run, 0, 0, "0", 1.0, 0, 0), PL_OK);
    cr_assert_eq(profile_db_commit(db), PL_OK);
    /* an open transaction is rolled back on close */
    cr_assert_eq(profile_db_begin(db), PL_OK);
    cr_assert_eq(profile_db_run_create(db, "unclosed", "", &run), PL_OK);
    profile_db_close(db);

    db = open_db(path, PROFILE_DB_READ);
    sqlite3_stmt *s = NULL;
    cr_assert_eq(sqlite3_prepare_v2(profile_db_handle(db), "SELECT group_concat(method), count(*) FROM run", -1, &s,
                                    NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(s, 0), "kept");
    sqlite3_finalize(s);
    cr_assert_eq(sqlite3_prepare_v2(profile_db_handle(db), "SELECT count(*) FROM run_sample", -1, &s, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    cr_assert_eq(sqlite3_column_int(s, 0), 1);
    sqlite3_finalize(s);
    cr_assert_eq(profile_db_begin(db), PL_ERR_INVALID, "no transactions on a READ handle");
    profile_db_close(db);
    th_rmtree(dir);
}
