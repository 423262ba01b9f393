/*
 * test_faults_store.c: the profile store with its n-th allocation failing,
 * for n = 0, 1, ... up to every allocation of the call: creating a file and
 * saving a profile, reading everything back, the resumable profiler's unit
 * writes, placer runs (samples and checkpoints in one transaction), and
 * measurements with simulator parameters.
 *
 * Every failure must come back as PL_ERR_NOMEM with nothing leaked, and
 * leave the file intact: integrity_check ok, every row committed before the
 * sweep unchanged, and a transaction that failed half-way leaving none of
 * its rows.
 *
 * Each sweep runs twice: over placer's own allocations only (a failure must
 * then be PL_ERR_NOMEM), and with SQLite's allocator routed through the same
 * counter (failalloc_hook_sqlite), so that the n-th allocation may be one
 * of SQLite's inside a prepare, a step or a commit; the store may then
 * report PL_ERR_DB as well, and SQLite's memory must be back where it was
 * after every call (no statement or connection left behind).
 */
#include <criterion/criterion.h>

#include "fault_db.h"
#include "fault_sweep.h"
#include "sim.h"

static fault_db F;
static int with_sqlite;     /* SQLite's allocations are swept too */
static sqlite3_int64 sq_base; /* SQLite's memory between calls */

static void setup(void) { fault_db_init(&F, "store.db"); }
static void setup_sqlite(void) {
    cr_assert_eq(failalloc_hook_sqlite(), 0);
    with_sqlite = 1;
    setup();
}
static void teardown(void) { fault_db_fini(&F); }

/* Before a sweep: SQLite's memory in use between calls. */
static void sqlite_baseline(void) { sq_base = sqlite3_memory_used(); }

/* After a call: SQLite holds no more memory than before it. */
static void sqlite_released(long n) {
    if (with_sqlite)
        cr_assert_eq(sqlite3_memory_used(), sq_base, "SQLite holds %lld more bytes after failing allocation %ld",
                     (long long)(sqlite3_memory_used() - sq_base), n);
}

/* The sweep of this test: other statuses are allowed when SQLite fails. */
static long sweep(const char *what, fault_op op, fault_check check, void *ctx) {
    char name[128];
    snprintf(name, sizeof name, "%s%s", what, with_sqlite ? " (+SQLite)" : "");
    sqlite_baseline();
    return fault_sweep_ex(name, op, check, ctx, with_sqlite);
}

/* Test NAME over placer's allocations, and NAME_with_sqlite_allocations too. */
#define STORE_TEST(NAME, ...)                                                                       \
    static void body_##NAME(void) __VA_ARGS__                                                         \
    Test(faults_store, NAME, .init = setup, .fini = teardown) { body_##NAME(); }                      \
    Test(faults_store, NAME##_with_sqlite_allocations, .init = setup_sqlite, .fini = teardown) {      \
        body_##NAME();                                                                                \
    }

/* ---- create a file and save a profile ------------------------------------ */

static pl_status op_create_and_save(void *ctx) {
    (void)ctx;
    fault_db_remove(F.path);
    profile_db *db = NULL;
    pl_status st = profile_db_open(F.path, PROFILE_DB_CREATE, &db, NULL, 0);
    if (st == PL_OK) st = profile_db_save_profile(db, &F.cfg, F.p, NULL, 0);
    profile_db_close(db);
    return st;
}

static void check_create_and_save(void *ctx, long n, pl_status st) {
    (void)ctx;
    sqlite_released(n);
    if (access(F.path, F_OK) != 0) {
        cr_assert_neq(st, PL_OK, "a successful save left no file");
        return; /* a failed CREATE removes its file */
    }
    fault_db_assert_intact(F.path, n);
    /* all or nothing: the profile's node costs are all there or none is */
    long long costs = fault_db_query(F.path, "SELECT count(*) FROM node_cost");
    long long want = (long long)F.p->n_devices * F.g->n_nodes * (2 * F.p->n_mb + 1);
    if (st == PL_OK) cr_assert_eq(costs, want);
    else cr_assert(costs == 0 || costs == want, "allocation %ld left %lld of %lld costs", n, costs, want);
}

STORE_TEST(create_and_save_profile_fail_cleanly_at_every_allocation, {
    long n = sweep("store: open CREATE + save_profile", op_create_and_save, check_create_and_save, NULL);
    cr_assert_gt(n, 1);})

/* ---- read everything back -------------------------------------------------- */

static int count_sample(void *ctx, const profile_run_sample *s) {
    (void)s;
    ++*(int *)ctx;
    return 0;
}
static int count_run(void *ctx, const profile_run_info *r) {
    (void)r;
    ++*(int *)ctx;
    return 0;
}
static int count_measurement(void *ctx, int64_t id, const profile_measurement *m, const char *at) {
    (void)id, (void)m, (void)at;
    ++*(int *)ctx;
    return 0;
}

static pl_status op_read_all(void *ctx) {
    (void)ctx;
    profile_db *db = NULL;
    pl_status st = profile_db_open(F.path, PROFILE_DB_READ, &db, NULL, 0);
    if (st != PL_OK) return st;
    profile_data *p = NULL, *q = NULL;
    gpt_config cfg;
    if ((st = profile_db_load_profile(db, NULL, &p, &cfg, NULL, 0)) != PL_OK) goto out;
    if ((st = profile_db_load_profile(db, &F.cfg, &q, NULL, NULL, 0)) != PL_OK) goto out;
    profile_db_graph_info *gi = NULL;
    int ng = 0;
    if ((st = profile_db_list_graphs(db, &gi, &ng)) != PL_OK) goto out;
    free(gi);
    profile_db_machine_row mr;
    if ((st = profile_db_machine(db, &mr)) != PL_OK) goto out;
    int k = 0;
    if ((st = profile_db_runs(db, count_run, &k)) != PL_OK) goto out;
    if ((st = profile_db_run_samples(db, 1, count_sample, &k)) != PL_OK) goto out;
    if ((st = profile_db_measurements(db, NULL, count_measurement, &k)) != PL_OK) goto out;
    void *blob = NULL;
    size_t nb = 0;
    if ((st = profile_db_checkpoint_load(db, 1, -1, NULL, &blob, &nb)) != PL_OK) goto out;
    free(blob);
    double vals[SIM_N_PARAMS];
    const char *names[SIM_N_PARAMS];
    for (int i = 0; i < SIM_N_PARAMS; i++) names[i] = sim_param_name(i), vals[i] = 0;
    int found = 0;
    char key[128];
    gpt_config_key(&F.cfg, key, sizeof key);
    st = profile_db_load_sim_params(db, key, SIM_N_PARAMS, names, vals, &found);
out:
    profile_data_destroy(q);
    profile_data_destroy(p);
    profile_db_close(db);
    return st;
}

/* A file with a profile, run 1 (samples, a checkpoint), a measurement and
 * simulator parameters, switched to a rollback journal so that read-only
 * opens leave it byte for byte as it was. */
static void fill_db(void) {
    fault_db_save(&F);
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(F.path, PROFILE_DB_WRITE, &db, NULL, 0), PL_OK);
    int64_t run = 0;
    cr_assert_eq(profile_db_run_create(db, "reinforce", "--seed 1", &run), PL_OK);
    cr_assert_eq(run, 1);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(profile_db_run_add_sample(db, run, i / 3, i % 3, "0,0,1", 100.0 + i, 1000, 0), PL_OK);
    cr_assert_eq(profile_db_checkpoint_save(db, run, 1, "blob", 4), PL_OK);
    char key[128];
    gpt_config_key(&F.cfg, key, sizeof key);
    profile_measurement m = {key, "0,0,0", 1, "gpipe", 0, 123.0, 1.0, 4096, 0, "calibrate", NULL};
    cr_assert_eq(profile_db_add_measurement(db, &m, NULL), PL_OK);
    const char *names[1] = {"launch_overhead_us"};
    double v = 2.0;
    cr_assert_eq(profile_db_save_sim_params(db, key, 1, names, &v, "test"), PL_OK);
    cr_assert_eq(profile_db_make_portable(db, NULL, 0), PL_OK);
    profile_db_close(db);
}

typedef struct {
    unsigned char *bytes;
    size_t n;
} file_image;

static file_image read_image(const char *path) {
    file_image im = {NULL, 0};
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    im.n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    im.bytes = malloc(im.n ? im.n : 1);
    cr_assert_eq(fread(im.bytes, 1, im.n, f), im.n);
    fclose(f);
    return im;
}

static void check_unchanged(void *ctx, long n, pl_status st) {
    (void)st;
    file_image *before = ctx;
    sqlite_released(n);
    file_image now = read_image(F.path);
    cr_assert(now.n == before->n && memcmp(now.bytes, before->bytes, now.n) == 0,
              "a read-only open changed the file (failing allocation %ld)", n);
    free(now.bytes);
}

STORE_TEST(reading_everything_fails_cleanly_and_changes_nothing, {
    fill_db();
    file_image im = read_image(F.path);
    long n = sweep("store: open READ + every reader", op_read_all, check_unchanged, &im);
    cr_assert_gt(n, 5);
    free(im.bytes);})

/* ---- placer runs: samples and a checkpoint in one transaction --------------- */

static char *run1_before;

static pl_status op_run_write(void *ctx) {
    (void)ctx;
    profile_db *db = NULL;
    pl_status st = profile_db_open(F.path, PROFILE_DB_WRITE, &db, NULL, 0);
    if (st != PL_OK) return st;
    int64_t run = 0;
    if ((st = profile_db_run_create(db, "reinforce", "--updates 1", &run)) != PL_OK) goto out;
    if ((st = profile_db_begin(db)) != PL_OK) goto out;
    for (int i = 0; i < 8 && st == PL_OK; i++) st = profile_db_run_add_sample(db, run, 0, i, "0,1,1", 50.0 + i, 77, i == 7);
    unsigned char blob[300];
    for (size_t i = 0; i < sizeof blob; i++) blob[i] = (unsigned char)i;
    if (st == PL_OK) st = profile_db_checkpoint_save(db, run, 0, blob, sizeof blob);
    if (st == PL_OK) st = profile_db_commit(db);
    else profile_db_rollback(db);
    if (st != PL_OK) goto out;
    if ((st = profile_db_run_finish(db, run)) != PL_OK) goto out;
    int k = 0;
    if ((st = profile_db_run_samples(db, run, count_sample, &k)) != PL_OK) goto out;
    void *back = NULL;
    size_t nb = 0;
    if ((st = profile_db_checkpoint_load(db, run, -1, NULL, &back, &nb)) != PL_OK) goto out;
    if (nb != sizeof blob || memcmp(back, blob, nb)) st = PL_ERR_INVALID;
    free(back);
out:
    profile_db_close(db);
    return st;
}

static void check_runs(void *ctx, long n, pl_status st) {
    (void)ctx, (void)st;
    sqlite_released(n);
    fault_db_assert_intact(F.path, n);
    char *now = fault_db_dump(F.path, "SELECT r.id, r.method, r.args, s.update_idx, s.sample, s.placement, s.step_us "
                                      "FROM run r JOIN run_sample s ON s.run_id = r.id WHERE r.id = 1 "
                                      "ORDER BY s.update_idx, s.sample");
    cr_assert_str_eq(now, run1_before, "run 1 changed after failing allocation %ld", n);
    free(now);
    /* every later run holds its whole update (8 samples and the checkpoint) or nothing */
    long long bad = fault_db_query(
        F.path, "SELECT count(*) FROM run r WHERE r.id > 1 AND NOT ("
                "((SELECT count(*) FROM run_sample s WHERE s.run_id = r.id) = 8 AND "
                " (SELECT count(*) FROM checkpoint c WHERE c.run_id = r.id) = 1) OR "
                "((SELECT count(*) FROM run_sample s WHERE s.run_id = r.id) = 0 AND "
                " (SELECT count(*) FROM checkpoint c WHERE c.run_id = r.id) = 0))");
    cr_assert_eq(bad, 0, "a run holds half an update after failing allocation %ld", n);
}

STORE_TEST(run_samples_and_checkpoints_fail_cleanly_at_every_allocation, {
    fill_db();
    run1_before = fault_db_dump(F.path, "SELECT r.id, r.method, r.args, s.update_idx, s.sample, s.placement, s.step_us "
                                        "FROM run r JOIN run_sample s ON s.run_id = r.id WHERE r.id = 1 "
                                        "ORDER BY s.update_idx, s.sample");
    cr_assert(strlen(run1_before) > 10);
    long n = sweep("store: run + samples + checkpoint", op_run_write, check_runs, NULL);
    cr_assert_gt(n, 1);
    free(run1_before);})

/* ---- measurements and simulator parameters ---------------------------------- */

static char *meas_before;

static pl_status op_measurements(void *ctx) {
    (void)ctx;
    profile_db *db = NULL;
    pl_status st = profile_db_open(F.path, PROFILE_DB_WRITE, &db, NULL, 0);
    if (st != PL_OK) return st;
    char key[128];
    gpt_config_key(&F.cfg, key, sizeof key);
    for (int i = 0; i < 3 && st == PL_OK; i++) {
        profile_measurement m = {key, "0,1,1", 2, "1f1b", 1 << 20, 200.0 + i, 2.0, 8192, 0, "confirm", "{\"x\":1}"};
        st = profile_db_add_measurement(db, &m, NULL);
    }
    int k = 0;
    if (st == PL_OK) st = profile_db_measurements(db, "confirm", count_measurement, &k);
    double vals[SIM_N_PARAMS];
    const char *names[SIM_N_PARAMS];
    for (int i = 0; i < SIM_N_PARAMS; i++) names[i] = sim_param_name(i), vals[i] = 1.0 + i;
    if (st == PL_OK) st = profile_db_save_sim_params(db, key, SIM_N_PARAMS, names, vals, "sweep");
    int found = 0;
    if (st == PL_OK) st = profile_db_load_sim_params(db, key, SIM_N_PARAMS, names, vals, &found);
    profile_db_close(db);
    return st;
}

static void check_measurements(void *ctx, long n, pl_status st) {
    (void)ctx, (void)st;
    sqlite_released(n);
    fault_db_assert_intact(F.path, n);
    char *now = fault_db_dump(F.path, "SELECT id, placement, step_us, purpose FROM measurement WHERE id = 1");
    cr_assert_str_eq(now, meas_before, "measurement 1 changed after failing allocation %ld", n);
    free(now);
    /* parameters are replaced as a set: all six or the one stored before */
    long long np = fault_db_query(F.path, "SELECT count(*) FROM sim_params");
    cr_assert(np == 1 || np == SIM_N_PARAMS, "%lld simulator parameters after failing allocation %ld", np, n);
}

STORE_TEST(measurements_and_sim_params_fail_cleanly_at_every_allocation, {
    fill_db();
    meas_before = fault_db_dump(F.path, "SELECT id, placement, step_us, purpose FROM measurement WHERE id = 1");
    long n = sweep("store: measurements + sim_params", op_measurements, check_measurements, NULL);
    cr_assert_gt(n, 0);
    free(meas_before);})

/* ---- the resumable profiler's unit writes ------------------------------------ */

static pl_status op_unit_writes(void *ctx) {
    (void)ctx;
    profile_db *db = NULL;
    pl_status st = profile_db_open(F.path, PROFILE_DB_CREATE, &db, NULL, 0);
    if (st != PL_OK) return st;
    char key[128];
    gpt_config_key(&F.cfg, key, sizeof key);
    profile_machine_info mi = {"cpu2", "measured", "host", NULL, NULL, "two CPU devices"};
    if ((st = profile_db_put_machine(db, &mi)) != PL_OK) goto out;
    for (int d = 0; d < 2 && st == PL_OK; d++) st = profile_db_put_device(db, "cpu2", d, &F.p->devices[d]);
    if (st == PL_OK) st = profile_db_put_link(db, "cpu2", 0, 1, 5.0, 1e10, "host");
    if (st == PL_OK) st = profile_db_put_link_point(db, "cpu2", 0, 1, 4096, 6.0, NAN);
    int has = 0;
    if (st == PL_OK) st = profile_db_has_link_point(db, "cpu2", 0, 1, 4096, &has);
    if (st == PL_OK) st = profile_db_put_graph(db, F.g, NULL);
    if (st == PL_OK) st = profile_db_begin(db);
    for (int i = 0; i < F.g->n_nodes && st == PL_OK; i++)
        st = profile_db_put_node_cost(db, "cpu2", key, 0, i, PHASE_FWD, 1, 10.0 + i, 0.5);
    if (st == PL_OK) st = profile_db_commit(db);
    else profile_db_rollback(db);
    if (st == PL_OK) st = profile_db_has_node_cost(db, "cpu2", key, 0, 3, PHASE_FWD, 1, &has);
    if (st == PL_OK) st = profile_db_put_step_anchor(db, "cpu2", key, 0, 1, 500.0, 5.0);
    double us = 0;
    if (st == PL_OK) st = profile_db_get_step_anchor(db, key, 0, 1, &us, NULL);
out:
    profile_db_close(db);
    return st;
}

static void check_unit_writes(void *ctx, long n, pl_status st) {
    (void)ctx, (void)st;
    sqlite_released(n);
    if (access(F.path, F_OK) != 0) return;
    fault_db_assert_intact(F.path, n);
    long long costs = fault_db_query(F.path, "SELECT count(*) FROM node_cost");
    cr_assert(costs == 0 || costs == F.g->n_nodes, "allocation %ld: %lld node costs (a unit is all or nothing)", n,
              costs);
}

STORE_TEST(profiler_unit_writes_fail_cleanly_at_every_allocation, {
    long n = sweep("store: profiler unit writes", op_unit_writes, check_unit_writes, NULL);
    cr_assert_gt(n, 0);})
