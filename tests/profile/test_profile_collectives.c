/*
 * test_profile_collectives.c: collective curves (issue 17, item 7). The
 * profiler measures all-reduce, all-gather and reduce-scatter over a
 * fork-launched group of 2 ranks on
 * this host into a real .db file, the store reads the points back, a
 * damaged or missing collective_point table gives one clear error, a
 * schema-1 file still opens read-only (no points) and migrates on a write
 * open, and `placer profile --collectives N` / `profile show --json` do it
 * from the command line; under mpirun the same curves come from the MPI
 * world group (skipped without MPI or mpirun).
 *
 * No timing bands: CI is a loaded 2-core machine under ASan, and load only
 * ever makes a time longer. So the checks on times are lower bounds that
 * physics sets and no descheduling can break: each time is finite, at least
 * 1 us (two processes exchanging over a socket cannot do it faster) and at
 * least the time to carry half the buffer (what each of 2 ranks must
 * receive in any of the three collectives) at 25 GB/s, above what a
 * loopback socket copies on one core. A time stored in the wrong unit (s,
 * ms) or divided by the repetitions twice fails them. (A relative check,
 * "no larger size 8x faster than the smallest ones", failed three clean-clone
 * CI runs when the smallest sizes were the ones starved.) That each call
 * moved the data is checked inside every rank: the result of each
 * collective is compared with the known sum or gather, else the unit
 * fails.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include "dist_mpi.h"
#include "helpers.h"
#include "profiler.h"
#include "store.h"

/* A fresh file holding machine "cpux1". */
static profile_db *new_db(const char *path) {
    profile_db *db = NULL;
    char msg[512] = "";
    cr_assert_eq(profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    profile_machine_info mi = {.name = "cpux1", .source = "measured"};
    cr_assert_eq(profile_db_put_machine(db, &mi), PL_OK, "%s", profile_db_last_error(db));
    return db;
}

static profiler_coll_opts small_opts(void) {
    profiler_coll_opts o = profiler_coll_opts_default();
    o.ranks = 2;
    o.max_bytes = 1 << 20;
    o.warmup = 1;
    o.reps = 5;
    return o;
}

Test(coll_profile, sizes_go_up_by_four_and_keep_the_top) {
    int64_t *v = NULL;
    int n = 0;
    cr_assert_eq(profiler_coll_sizes(4, 64 << 20, &v, &n), PL_OK);
    cr_assert_eq(n, 13, "4 B .. 64 MiB by powers of 4");
    cr_assert_eq(v[0], 4);
    cr_assert_eq(v[12], 64 << 20);
    for (int i = 1; i < n; i++) cr_assert_eq(v[i], 4 * v[i - 1]);
    free(v);
    cr_assert_eq(profiler_coll_sizes(4, 100, &v, &n), PL_OK);
    cr_assert_eq(n, 4, "4 16 64 and the top 100");
    cr_assert_eq(v[3], 100);
    free(v);
    cr_assert_eq(profiler_coll_sizes(3, 100, &v, &n), PL_ERR_INVALID);
    cr_assert_eq(profiler_coll_sizes(8, 4, &v, &n), PL_ERR_INVALID);
}

Test(coll_profile, two_ranks_land_in_a_db_and_read_back) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "coll.db");
    profile_db *db = new_db(path);
    profiler_coll_opts o = small_opts();
    profiler_result r;
    cr_assert_eq(profiler_collectives(db, "cpux1", &o, &r, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(r.units_total, 30, "4 B .. 1 MiB is 10 sizes, for 3 collectives");
    cr_assert_eq(r.units_measured, 30);
    profile_db_close(db);

    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    profile_coll_point *p = NULL;
    int n = 0;
    cr_assert_eq(profile_db_collective_points(db, &p, &n), PL_OK, "%s", profile_db_last_error(db));
    cr_assert_eq(n, 30);
    /* ordered by op name: all_gather, all_reduce, reduce_scatter, 10 sizes each */
    static const profile_coll_op order[3] = {PROFILE_COLL_ALL_GATHER, PROFILE_COLL_ALL_REDUCE,
                                             PROFILE_COLL_REDUCE_SCATTER};
    for (int i = 0; i < n; i++) {
        /* the physical floor of the header: 1 us, and half the buffer at 25 GB/s (25,000 B/us) */
        const double floor_us = fmax(1.0, p[i].bytes / 2 / 25000.0);
        cr_assert_eq(p[i].op, order[i / 10], "point %d", i);
        cr_assert_eq(p[i].ranks, 2);
        cr_assert_str_eq(p[i].transport, "sockets");
        cr_assert_eq(p[i].reps, 5);
        cr_assert(p[i].us > 0 && isfinite(p[i].us), "size %g: time %g", p[i].bytes, p[i].us);
        cr_assert(p[i].spread_us >= 0, "size %g: iqr %g", p[i].bytes, p[i].spread_us);
        if (i % 10) cr_assert_gt(p[i].bytes, p[i - 1].bytes, "ascending sizes");
        cr_assert_geq(p[i].us, floor_us, "%s %g B took %g us, under the physical floor of %g us",
                      profile_coll_op_name(p[i].op), p[i].bytes, p[i].us, floor_us);
    }
    cr_assert_eq(p[0].bytes, 8, "all-gather of 4 B over 2 ranks is 2 shards of one float");
    cr_assert_eq(p[10].bytes, 4, "all-reduce starts at 4 B");
    cr_assert_eq(p[29].bytes, 1 << 20);
    free(p);
    profile_db_close(db);

    /* a second run skips every stored point; force measures them again */
    cr_assert_eq(profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profiler_collectives(db, "cpux1", &o, &r, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(r.units_skipped, 30);
    cr_assert_eq(r.units_measured, 0);
    o.force = 1;
    o.max_bytes = 64;
    cr_assert_eq(profiler_collectives(db, "cpux1", &o, &r, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(r.units_measured, 9);
    cr_assert_eq(profile_db_collective_points(db, &p, &n), PL_OK);
    cr_assert_eq(n, 30, "re-measured points replace, not duplicate");
    free(p);
    profile_db_close(db);
    th_rmtree(dir);
}

Test(coll_profile, bad_options_and_no_machine_are_refused) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "coll.db");
    profile_db *db = new_db(path);
    profiler_coll_opts o = small_opts();
    o.ranks = 1;
    cr_assert_eq(profiler_collectives(db, "cpux1", &o, NULL, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(th_has(msg, "2 to"), "%s", msg);
    o = small_opts();
    o.min_bytes = 6;
    cr_assert_eq(profiler_collectives(db, "cpux1", &o, NULL, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(th_has(msg, "multiple of 4"), "%s", msg);
    o = small_opts();
    o.max_bytes = 4;
    cr_assert_eq(profiler_collectives(db, "nosuch", &o, NULL, msg, sizeof msg), PL_ERR_NOT_FOUND, "%s", msg);
    cr_assert(th_has(msg, "nosuch"), "%s", msg);
    profile_db_close(db);
    th_rmtree(dir);
}

/* One point written through the store, then the file damaged behind its back. */
static void file_with_one_point(const char *path) {
    profile_db *db = new_db(path);
    profile_coll_point p = {PROFILE_COLL_ALL_REDUCE, 2, "sockets", 1024, 30.0, 2.0, 5};
    cr_assert_eq(profile_db_put_collective_point(db, "cpux1", &p), PL_OK, "%s", profile_db_last_error(db));
    profile_coll_point bad = p;
    bad.us = -1;
    cr_assert_eq(profile_db_put_collective_point(db, "cpux1", &bad), PL_ERR_INVALID, "a bad point is not written");
    profile_db_close(db);
}

Test(coll_store, a_corrupt_row_is_one_clear_error) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "bad-row.db");
    file_with_one_point(path);
    cr_assert_eq(th_sql(path, "UPDATE collective_point SET us = -5"), 0);
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    profile_coll_point *p = (profile_coll_point *)1;
    int n = 7;
    cr_assert_eq(profile_db_collective_points(db, &p, &n), PL_ERR_INVALID);
    cr_assert_null(p);
    cr_assert_eq(n, 0);
    const char *e = profile_db_last_error(db);
    cr_assert(th_has(e, "collective_point row 1 is invalid") && !strchr(e, '\n'), "%s", e);
    profile_db_close(db);
    th_rmtree(dir);
}

Test(coll_store, a_missing_table_in_a_schema_2_file_is_one_clear_error) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "no-table.db");
    file_with_one_point(path);
    cr_assert_eq(th_sql(path, "DROP TABLE collective_point"), 0);
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    profile_coll_point *p = NULL;
    int n = 0;
    cr_assert_eq(profile_db_collective_points(db, &p, &n), PL_ERR_INVALID);
    cr_assert(th_has(profile_db_last_error(db), "no collective_point table"), "%s", profile_db_last_error(db));
    profile_db_close(db);
    /* a write open does not re-create it silently either: the version says it is there */
    cr_assert_eq(profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    profile_coll_point q = {PROFILE_COLL_ALL_REDUCE, 2, "sockets", 4, 10.0, NAN, 3};
    cr_assert_eq(profile_db_put_collective_point(db, "cpux1", &q), PL_ERR_INVALID);
    cr_assert(th_has(profile_db_last_error(db), "damaged"), "%s", profile_db_last_error(db));
    profile_db_close(db);
    th_rmtree(dir);
}

Test(coll_store, a_schema_1_file_reads_without_points_and_migrates_on_write) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "v1.db");
    file_with_one_point(path);
    /* what a file written before schema 2 looks like */
    cr_assert_eq(th_sql(path, "DROP TABLE collective_point; ALTER TABLE node DROP COLUMN fwd_workspace_bytes; "
              "ALTER TABLE node DROP COLUMN bwd_workspace_bytes; ALTER TABLE node_cost DROP COLUMN b_us; "
              "ALTER TABLE node_cost DROP COLUMN w_us; UPDATE meta SET value = '1' WHERE key = 'schema_version'"), 0);
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_opened_version(db), 1);
    profile_coll_point *p = NULL;
    int n = -1;
    cr_assert_eq(profile_db_collective_points(db, &p, &n), PL_OK, "%s", profile_db_last_error(db));
    cr_assert_eq(n, 0);
    profile_db_close(db);
    cr_assert_eq(profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    profile_coll_point q = {PROFILE_COLL_ALL_REDUCE, 4, "sockets", 4096, 50.0, 1.0, 3};
    cr_assert_eq(profile_db_put_collective_point(db, "cpux1", &q), PL_OK, "%s", profile_db_last_error(db));
    profile_db_close(db);
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_opened_version(db), PROFILE_DB_SCHEMA_VERSION);
    cr_assert_eq(profile_db_collective_points(db, &p, &n), PL_OK);
    cr_assert_eq(n, 1);
    cr_assert_eq(p[0].ranks, 4);
    free(p);
    profile_db_close(db);
    th_rmtree(dir);
}

Test(coll_store, bus_bandwidth_factors_are_nccl_tests) {
    cr_assert(fabs(profile_coll_busbw_factor(PROFILE_COLL_ALL_REDUCE, 2) - 1.0) < 1e-12);
    cr_assert(fabs(profile_coll_busbw_factor(PROFILE_COLL_ALL_REDUCE, 8) - 1.75) < 1e-12);
    cr_assert(fabs(profile_coll_busbw_factor(PROFILE_COLL_ALL_GATHER, 4) - 0.75) < 1e-12);
    cr_assert(fabs(profile_coll_busbw_factor(PROFILE_COLL_REDUCE_SCATTER, 4) - 0.75) < 1e-12);
    cr_assert_eq(profile_coll_busbw_factor(PROFILE_COLL_ALL_REDUCE, 1), 0.0);
    cr_assert_str_eq(profile_coll_op_name(PROFILE_COLL_REDUCE_SCATTER), "reduce_scatter");
}

/* ---- the command line ---------------------------------------------------- */

typedef struct {
    int code;  /* exit status, -1 when killed */
    char *out; /* stdout (caller frees) */
    char *err; /* stderr (caller frees) */
} cli_run;

static cli_run run_cli(const char *dir, const char *const *args) {
    char out_path[512], err_path[512];
    th_path(out_path, sizeof out_path, dir, "stdout.txt");
    th_path(err_path, sizeof err_path, dir, "stderr.txt");
    const char *argv[40] = {PLACER_BIN};
    int n = 1;
    for (; args[n - 1] && n < 39; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0 || chdir(dir) != 0) _exit(126);
        unsetenv("PLACER_DB");
        execv(PLACER_BIN, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cli_run r = {WIFEXITED(status) ? WEXITSTATUS(status) : -1, NULL, NULL};
    size_t n_out, n_err;
    unsigned char *o = th_read(out_path, &n_out), *e = th_read(err_path, &n_err);
    cr_assert(o && e, "captured output");
    r.out = realloc(o, n_out + 1); /* th_read does not terminate */
    r.err = realloc(e, n_err + 1);
    cr_assert(r.out && r.err);
    r.out[n_out] = 0;
    r.err[n_err] = 0;
    cr_assert_neq(r.code, 127, "%s could be run", PLACER_BIN);
    return r;
}

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

Test(coll_cli, profile_with_collectives_then_show_json) {
    char dir[256];
    cr_assert_eq(th_mkdtemp(dir), 0);
    const char *prof[] = {"profile", "--db", "p.db", "--cpu", "1", "--config", "tiny", "--micro-batch-sizes", "1",
                          "--reps", "3", "--collectives", "2", "--collective-max-bytes", "64KiB",
                          "--collective-reps", "3", NULL};
    cli_run r = run_cli(dir, prof);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert(th_has(r.out, "collectives over 2 ranks (sockets): 24 points measured"), "%s", r.out);
    free(r.out);
    free(r.err);
    const char *show[] = {"profile", "show", "--db", "p.db", NULL};
    r = run_cli(dir, show);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert(th_has(r.out, "collective all_reduce over 2 ranks (sockets; median of 3"), "%s", r.out);
    cr_assert(th_has(r.out, "collective all_gather over 2 ranks"), "%s", r.out);
    cr_assert(th_has(r.out, "collective reduce_scatter over 2 ranks"), "%s", r.out);
    cr_assert(th_has(r.out, "64 KiB"), "%s", r.out);
    free(r.out);
    free(r.err);
    const char *js[] = {"profile", "show", "--db", "p.db", "--json", NULL};
    r = run_cli(dir, js);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert(th_has(r.out, "\"collectives\":[{\"op\":\"all_gather\",\"ranks\":2,\"transport\":\"sockets\",\"bytes\":8,"),
              "%s", r.out);
    cr_assert(th_has(r.out, "\"bytes\":65536,"), "%s", r.out);
    free(r.out);
    free(r.err);
    th_rmtree(dir);
}

Test(coll_cli, bad_collective_options_exit_2_with_one_line) {
    char dir[256];
    cr_assert_eq(th_mkdtemp(dir), 0);
    const char *const cases[][16] = {
        {"profile", "--db", "x.db", "--cpu", "1", "--collectives", "1", NULL},
        {"profile", "--db", "x.db", "--cpu", "1", "--collectives", "two", NULL},
        {"profile", "--db", "x.db", "--cpu", "1", "--collective-reps", "3", NULL},
        {"profile", "--db", "x.db", "--cpu", "1", "--collectives", "2", "--collective-max-bytes", "2", NULL},
        {"profile", "--db", "x.db", "--from-spec", "h200x2", "--collectives", "2", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_run r = run_cli(dir, cases[i]);
        cr_assert_eq(r.code, 2, "case %zu: exit %d, stderr %s", i, r.code, r.err);
        cr_assert_eq(lines(r.err), 1, "case %zu: %s", i, r.err);
        cr_assert(th_has(r.err, "collective"), "case %zu: %s", i, r.err);
        char p[512];
        th_path(p, sizeof p, dir, "x.db");
        cr_assert(!th_exists(p), "case %zu left a file", i);
        free(r.out);
        free(r.err);
    }
    th_rmtree(dir);
}

/* ---- under mpirun: the MPI world group ------------------------------------ */

/* As tests/hw/test_dist_mpi.c: root allowed, shared memory only, no leak
 * report from MPI's own allocations in a sanitizer build. */
#define MPI_ENV                                                                                                      \
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none "      \
    "OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader ASAN_OPTIONS=detect_leaks=0"

static int sh_out(const char *cmd, char *out, size_t len) {
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f, "cannot run %s", cmd);
    size_t n = fread(out, 1, len - 1, f);
    out[n] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(coll_cli, mpirun_2_ranks_add_mpi_curves_to_a_profile, .timeout = 120) {
    if (!dist_mpi_built() || system("command -v mpirun >/dev/null 2>&1") != 0) {
        cr_log_warn("skipped: no MPI in this build or no mpirun on PATH");
        return;
    }
    char dir[256], db[512], cmd[2048], out[8192];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(db, sizeof db, dir, "p.db");
    const char *prof[] = {"profile", "--db", "p.db", "--cpu", "1", "--config", "tiny", "--micro-batch-sizes", "1",
                          "--reps", "3", NULL};
    cli_run r = run_cli(dir, prof);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    free(r.out);
    free(r.err);
    snprintf(cmd, sizeof cmd,
             "env %s mpirun -q --oversubscribe -np 2 %s profile --db %s --collectives 2 --collective-max-bytes 4KiB "
             "--collective-reps 3 2>&1",
             MPI_ENV, PLACER_BIN, db);
    cr_assert_eq(sh_out(cmd, out, sizeof out), 0, "%s", out);
    cr_expect(th_has(out, "collectives over 2 ranks (mpi): 18 points measured"), "%s", out);
    profile_db *h = NULL;
    char msg[512] = "";
    cr_assert_eq(profile_db_open(db, PROFILE_DB_READ, &h, msg, sizeof msg), PL_OK, "%s", msg);
    profile_coll_point *p = NULL;
    int n = 0;
    cr_assert_eq(profile_db_collective_points(h, &p, &n), PL_OK, "%s", profile_db_last_error(h));
    cr_assert_eq(n, 18, "3 collectives x 6 sizes (4 B .. 4 KiB)");
    for (int i = 0; i < n; i++) {
        cr_expect_str_eq(p[i].transport, "mpi");
        cr_expect(p[i].us > 0 && p[i].ranks == 2, "point %d: %g us over %d", i, p[i].us, p[i].ranks);
    }
    free(p);
    profile_db_close(h);
    /* the ranks must agree with mpirun, and the file must hold its machine */
    snprintf(cmd, sizeof cmd, "env %s mpirun -q --oversubscribe -np 2 %s profile --db %s --collectives 3 2>&1",
             MPI_ENV, PLACER_BIN, db);
    cr_expect_eq(sh_out(cmd, out, sizeof out), 2, "%s", out);
    cr_expect(th_has(out, "--collectives 3 contradicts mpirun's 2 ranks"), "%s", out);
    th_rmtree(dir);
}
