/*
 * test_profiler_cli.c: `placer profile` measuring the CPU reference backend
 * as a user runs it (the built binary, PLACER_BIN): the files it leaves, a
 * run SIGKILLed in the middle of a unit's transaction and resumed, the
 * compare and check subcommands, and one-line errors for bad options.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include "helpers.h"

typedef struct {
    int code;   /* exit status, or -1 when it did not exit normally */
    int signal; /* the signal that ended it, or 0 */
    char *out;  /* stdout (caller frees) */
    char *err;  /* stderr (caller frees) */
} cli_run;

/* Run PLACER_BIN with args (NULL-terminated) in dir; kill_at > 0 sets the
 * test hook PLACER_PROFILE_TEST_KILL_AT. */
static cli_run run_cli(const char *dir, int kill_at, const char *const *args) {
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
        if (kill_at > 0) {
            char v[16];
            snprintf(v, sizeof v, "%d", kill_at);
            setenv("PLACER_PROFILE_TEST_KILL_AT", v, 1);
        } else {
            unsetenv("PLACER_PROFILE_TEST_KILL_AT");
        }
        execv(PLACER_BIN, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cli_run r = {WIFEXITED(status) ? WEXITSTATUS(status) : -1, WIFSIGNALED(status) ? WTERMSIG(status) : 0, NULL,
                 NULL};
    size_t n_out, n_err;
    unsigned char *o = th_read(out_path, &n_out), *e = th_read(err_path, &n_err);
    cr_assert(o && e, "captured output");
    r.out = realloc(o, n_out + 1);
    r.err = realloc(e, n_err + 1);
    r.out[n_out] = 0;
    r.err[n_err] = 0;
    cr_assert_neq(r.code, 127, "%s could be run", PLACER_BIN);
    return r;
}

static void cli_free(cli_run *r) {
    free(r->out);
    free(r->err);
}

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static long long count(const char *path, const char *sql) {
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK, "%s", sqlite3_errmsg(h));
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    long long v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(h);
    return v;
}

static int integrity_ok(const char *path) {
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    cr_assert_eq(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &s, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    int ok = strcmp((const char *)sqlite3_column_text(s, 0), "ok") == 0;
    sqlite3_finalize(s);
    sqlite3_close(h);
    return ok;
}

#define QUICK "--cpu", "2", "--config", "tiny", "--micro-batch-sizes", "4,2,1", "--reps", "3", "--link-max-bytes", "64KiB"

/* The tiny graph has 16 nodes: 2 devices x 16 nodes x (3 sizes x fwd, bwd + AdamW). */
#define NODE_COST_ROWS (2 * 16 * 7)

Test(profiler_cli, cpu_profile_then_show_check_and_a_second_run) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "m.db");
    cli_run r = run_cli(dir, 0, (const char *[]){"profile", "--db", path, QUICK, "--portable", NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert(th_has(r.out, "profiled cpux2 for gpt-L2-C16-H2-V64-T8-B4 on 2 devices"), "%s", r.out);
    cr_assert(th_has(r.out, "0 already there"), "%s", r.out);
    cr_assert(th_has(r.out, "sanity check") && th_has(r.out, "sum/step"), "%s", r.out);
    cr_assert_str_eq(r.err, "", "no progress bar when stderr is not a terminal");
    cli_free(&r);
    cr_assert_eq(count(path, "SELECT count(*) FROM node_cost"), NODE_COST_ROWS);
    cr_assert_not(th_side_exists(path, "-wal"), "--portable leaves a rollback-journal file");

    r = run_cli(dir, 0, (const char *[]){"profile", "show", "--db", path, NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert(th_has(r.out, "machine   cpux2 (measured)") && th_has(r.out, "host"), "%s", r.out);
    cli_free(&r);

    r = run_cli(dir, 0, (const char *[]){"profile", "check", "--db", path, NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert(th_has(r.out, "sanity check") && th_has(r.out, "link 1 -> 0 (host)"), "%s", r.out);
    /* six anchor rows: two devices, three sizes */
    int rows = 0;
    for (const char *s = strstr(r.out, "sum/step"); s && (s = strchr(s, '\n')) && s[1] == ' '; s++) rows++;
    cr_assert_eq(rows, 6, "%s", r.out);
    cli_free(&r);

    r = run_cli(dir, 0, (const char *[]){"profile", "--db", path, QUICK, NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert(th_has(r.out, ": 0 units measured"), "a second run measures nothing: %s", r.out);
    cli_free(&r);
    cr_assert_eq(count(path, "SELECT count(*) FROM node_cost"), NODE_COST_ROWS);
    th_rmtree(dir);
}

Test(profiler_cli, killed_inside_a_unit_then_resumed_leaves_every_unit_once) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "k.db");
    /* a reference run for the unit count */
    char ref[512];
    th_path(ref, sizeof ref, dir, "ref.db");
    cli_run r = run_cli(dir, 0, (const char *[]){"profile", "--db", ref, QUICK, NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    int total = 0;
    const char *at = strstr(r.out, "already there, ");
    cr_assert(at && sscanf(at, "already there, %d in all", &total) == 1, "%s", r.out);
    cli_free(&r);

    /* killed while the last unit's transaction is open (a node-cost unit: 224 rows, half written) */
    r = run_cli(dir, total, (const char *[]){"profile", "--db", path, QUICK, NULL});
    cr_assert_eq(r.signal, SIGKILL, "exit %d, stderr %s", r.code, r.err);
    cli_free(&r);
    cr_assert(integrity_ok(path));
    const long long partial = count(path, "SELECT count(*) FROM node_cost");
    cr_assert_eq(partial, NODE_COST_ROWS - 2 * 16, "the unit in flight (one device and size) left no row");
    r = run_cli(dir, 0, (const char *[]){"profile", "show", "--db", path, NULL});
    cr_assert_eq(r.code, 2, "an interrupted profile does not load");
    cr_assert(th_has(r.err, "incomplete") && th_has(r.err, "resume"), "%s", r.err);
    cli_free(&r);

    /* killed earlier, in a link point's transaction, on a fresh file */
    char path2[512];
    th_path(path2, sizeof path2, dir, "k2.db");
    r = run_cli(dir, 3, (const char *[]){"profile", "--db", path2, QUICK, NULL});
    cr_assert_eq(r.signal, SIGKILL);
    cli_free(&r);
    cr_assert(integrity_ok(path2));
    cr_assert_eq(count(path2, "SELECT count(*) FROM link_point"), 2, "two committed points, the third lost");

    /* resume both: each finishes with every unit exactly once */
    const char *paths[2] = {path, path2};
    const int already[2] = {total - 1, 2};
    for (int i = 0; i < 2; i++) {
        r = run_cli(dir, 0, (const char *[]){"profile", "--db", paths[i], QUICK, NULL});
        cr_assert_eq(r.code, 0, "stderr: %s", r.err);
        char want[64];
        snprintf(want, sizeof want, "%d units measured, %d already there", total - already[i], already[i]);
        cr_assert(th_has(r.out, want), "want '%s' in %s", want, r.out);
        cli_free(&r);
        cr_assert(integrity_ok(paths[i]));
        cr_assert_eq(count(paths[i], "SELECT count(*) FROM node_cost"), NODE_COST_ROWS);
        cr_assert_eq(count(paths[i], "SELECT count(*) FROM step_anchor"), 6);
        cr_assert_eq(count(paths[i], "SELECT count(*) FROM link_point"), count(ref, "SELECT count(*) FROM link_point"));
    }
    th_rmtree(dir);
}

Test(profiler_cli, compare_two_runs_of_the_same_machine) {
    char dir[256], a[512], b[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(a, sizeof a, dir, "a.db");
    th_path(b, sizeof b, dir, "b.db");
    for (int i = 0; i < 2; i++) {
        cli_run r = run_cli(dir, 0, (const char *[]){"profile", "--db", i ? b : a, QUICK, NULL});
        cr_assert_eq(r.code, 0, "stderr: %s", r.err);
        cli_free(&r);
    }
    cli_run r = run_cli(dir, 0, (const char *[]){"profile", "compare", "--db", a, "--db", b, "--min-us", "0", NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert(th_has(r.out, "run-to-run variation") && th_has(r.out, "  all  ") && th_has(r.out, "worst:"), "%s",
              r.out);
    cli_free(&r);
    r = run_cli(dir, 0, (const char *[]){"profile", "compare", "--db", a, "--db", a, NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cli_free(&r);
    th_rmtree(dir);
}

Test(profiler_cli, bad_options_exit_2_with_one_line_and_no_file) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "x.db");
    const char *const *cases[] = {
        (const char *[]){"profile", "--db", path, "--cpu", "0", NULL},
        (const char *[]){"profile", "--db", path, "--cpu", "2", "--devices", "0,1", NULL},
        (const char *[]){"profile", "--db", path, "--from-spec", "t4x4-pcie", "--cpu", "2", NULL},
        (const char *[]){"profile", "--db", path, "--from-spec", "t4x4-pcie", "--force", NULL},
        (const char *[]){"profile", "--db", path, "--cpu", "2", "--link-max-bytes", "100", NULL},
        (const char *[]){"profile", "--db", path, "--cpu", "2", "--reps", "zero", NULL},
        (const char *[]){"profile", "--db", path, "--devices", "0,x", NULL},
        (const char *[]){"profile", "compare", "--db", path, NULL},
        (const char *[]){"profile", "compare", "--db", path, "--db", path, "--min-us", "-1", NULL},
        (const char *[]){"profile", "check", "--db", path, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_run r = run_cli(dir, 0, cases[i]);
        cr_assert_eq(r.code, 2, "case %zu: exit %d, stderr %s", i, r.code, r.err);
        cr_assert_eq(lines(r.err), 1, "case %zu: %s", i, r.err);
        cr_assert(!strncmp(r.err, "placer profile", 14), "case %zu: %s", i, r.err);
        cli_free(&r);
        cr_assert_not(th_exists(path), "case %zu made no file", i);
    }
    th_rmtree(dir);
}

Test(profiler_cli, measuring_into_a_spec_file_is_refused_in_one_line) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "s.db");
    cli_run r = run_cli(dir, 0, (const char *[]){"profile", "--from-spec", "t4x4-pcie", "--db", path, NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cli_free(&r);
    r = run_cli(dir, 0, (const char *[]){"profile", "--db", path, QUICK, NULL});
    cr_assert_eq(r.code, 2, "stderr: %s", r.err);
    cr_assert_eq(lines(r.err), 1, "%s", r.err);
    cr_assert(th_has(r.err, "t4x4-pcie"), "%s", r.err);
    cli_free(&r);
    th_rmtree(dir);
}
