/*
 * test_cmd_profile.c: `placer profile` as a user runs it: the built binary
 * (PLACER_BIN), its exit codes, its one-line errors, and the files it leaves.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include "helpers.h"

typedef struct {
    int code;        /* exit status, or -1 when it did not exit normally */
    char *out;       /* stdout, NUL-terminated (caller frees) */
    char *err;       /* stderr, NUL-terminated (caller frees) */
} run_result;

/* Run PLACER_BIN with argv (NULL-terminated, without argv[0]) in dir,
 * capturing stdout and stderr through files in dir. */
static run_result run_placer(const char *dir, const char *const *args) {
    char out_path[512], err_path[512];
    th_path(out_path, sizeof out_path, dir, "stdout.txt");
    th_path(err_path, sizeof err_path, dir, "stderr.txt");
    const char *argv[32] = {PLACER_BIN};
    int n = 1;
    for (; args[n - 1] && n < 31; n++) argv[n] = args[n - 1];
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
    run_result r = {WIFEXITED(status) ? WEXITSTATUS(status) : -1, NULL, NULL};
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

static void run_free(run_result *r) {
    free(r->out);
    free(r->err);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

Test(cmd_profile, from_spec_writes_a_profile_that_show_prints) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "x.db");
    run_result r = run_placer(dir, (const char *[]){"profile", "--from-spec", "t4x4-pcie", "--db", path, NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert(th_has(r.out, "t4x4-pcie") && th_has(r.out, "40 nodes"), "%s", r.out);
    cr_assert_str_eq(r.err, "");
    run_free(&r);

    r = run_placer(dir, (const char *[]){"profile", "show", "--db", path, NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert(th_has(r.out, "machine   t4x4-pcie (spec)"), "%s", r.out);
    cr_assert(th_has(r.out, "pcie3-host"), "link kinds shown");
    cr_assert(th_has(r.out, "head") && th_has(r.out, "fwd@16") && th_has(r.out, "totals per device"));
    cr_assert(th_has(r.out, "Tesla T4"));
    cr_assert_str_eq(r.err, "");
    run_free(&r);

    r = run_placer(dir, (const char *[]){"profile", "show", "--db", path, "--json", NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert(!strncmp(r.out, "{\"machine\":{\"name\":\"t4x4-pcie\"", 30), "%.80s", r.out);
    cr_assert(th_has(r.out, "\"kind\":\"pcie3-host\""));
    cr_assert_eq(count_lines(r.out), 1, "one JSON document on one line");
    run_free(&r);

    /* the same machine again replaces its profile */
    r = run_placer(dir, (const char *[]){"profile", "--from-spec", "t4x4-pcie", "--db", path,
                                         "--micro-batch-sizes", "16,4", NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    run_free(&r);
    r = run_placer(dir, (const char *[]){"profile", "show", "--db", path, NULL});
    cr_assert(th_has(r.out, "micro-batch sizes: 4 16\n"), "%s", r.out);
    run_free(&r);
    th_rmtree(dir);
}

Test(cmd_profile, another_machine_into_the_same_file_is_refused) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "x.db");
    run_result r = run_placer(dir, (const char *[]){"profile", "--from-spec", "h200x2-nvlink", "--db", path, NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    run_free(&r);
    r = run_placer(dir, (const char *[]){"profile", "--from-spec", "t4x4-pcie", "--db", path, NULL});
    cr_assert_eq(r.code, 2);
    cr_assert_eq(count_lines(r.err), 1, "one line: %s", r.err);
    cr_assert(th_has(r.err, "h200x2-nvlink") && th_has(r.err, "another file"), "%s", r.err);
    run_free(&r);
    r = run_placer(dir, (const char *[]){"profile", "show", "--db", path, NULL});
    cr_assert_eq(r.code, 0);
    cr_assert(th_has(r.out, "machine   h200x2-nvlink"), "the file still holds the first machine");
    run_free(&r);
    th_rmtree(dir);
}

Test(cmd_profile, unknown_spec_exits_2_with_one_line_listing_the_known_ones) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "x.db");
    run_result r = run_placer(dir, (const char *[]){"profile", "--from-spec", "a100x8", "--db", path, NULL});
    cr_assert_eq(r.code, 2);
    cr_assert_eq(count_lines(r.err), 1, "one line: %s", r.err);
    cr_assert(th_has(r.err, "a100x8") && th_has(r.err, "t4x4-pcie") && th_has(r.err, "h200x2-nvlink"), "%s", r.err);
    cr_assert_str_eq(r.out, "");
    cr_assert_not(th_exists(path), "no file made");
    run_free(&r);
    th_rmtree(dir);
}

Test(cmd_profile, show_on_a_missing_file_exits_2) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "missing.db");
    run_result r = run_placer(dir, (const char *[]){"profile", "show", "--db", path, NULL});
    cr_assert_eq(r.code, 2);
    cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
    cr_assert(th_has(r.err, "does not exist"), "%s", r.err);
    cr_assert_not(th_exists(path));
    run_free(&r);
    th_rmtree(dir);
}

Test(cmd_profile, show_on_a_non_sqlite_file_exits_2_and_leaves_it) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "notes.db");
    const char *text = "not a database\n";
    cr_assert_eq(th_write(path, text, strlen(text)), 0);
    run_result r = run_placer(dir, (const char *[]){"profile", "show", "--db", path, NULL});
    cr_assert_eq(r.code, 2);
    cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
    cr_assert(th_has(r.err, "not an SQLite database"), "%s", r.err);
    run_free(&r);
    /* writing into it is refused too */
    r = run_placer(dir, (const char *[]){"profile", "--from-spec", "t4x4-pcie", "--db", path, NULL});
    cr_assert_eq(r.code, 2);
    run_free(&r);
    size_t n;
    unsigned char *b = th_read(path, &n);
    cr_assert(n == strlen(text) && !memcmp(b, text, n), "file unchanged");
    free(b);
    cr_assert_not(th_side_exists(path, "-wal"));
    th_rmtree(dir);
}

Test(cmd_profile, help_for_each_mode_exits_0) {
    char dir[256];
    cr_assert_eq(th_mkdtemp(dir), 0);
    run_result r = run_placer(dir, (const char *[]){"profile", "--help", NULL});
    cr_assert_eq(r.code, 0);
    cr_assert(th_has(r.out, "usage: placer profile") && th_has(r.out, "--from-spec"), "%s", r.out);
    cr_assert(th_has(r.out, "h200x4-nvlink"), "help lists the specs");
    run_free(&r);
    r = run_placer(dir, (const char *[]){"profile", "show", "--help", NULL});
    cr_assert_eq(r.code, 0);
    cr_assert(th_has(r.out, "usage: placer profile show"), "%s", r.out);
    run_free(&r);
    th_rmtree(dir);
}

Test(cmd_profile, bad_input_exits_2_with_one_line) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "x.db");
    const char *const cases[][8] = {
        {"profile", "--from-spec", "t4x4-pcie", NULL},                                           /* no --db */
        {"profile", "--from-spec", "t4x4-pcie", "--db", path, "--micro-batch-sizes", "16,,4"},  /* empty field */
        {"profile", "--from-spec", "t4x4-pcie", "--db", path, "--micro-batch-sizes", "32"},     /* > batch */
        {"profile", "--from-spec", "t4x4-pcie", "--db", path, "--config", "huge"},              /* config */
        {"profile", "--from-spec", "t4x4-pcie", "--db", path, "--frobnicate", NULL},            /* option */
        {"profile", "show", "--db", path, "--device", "x", NULL},                               /* device */
        {"profile", "--from-spec", "t4x4-pcie", "--db", path, "--devices", "0,1"},              /* mixed modes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[9] = {0};
        memcpy(args, cases[i], sizeof cases[i]);
        run_result r = run_placer(dir, args);
        cr_assert_eq(r.code, 2, "case %zu: exit %d, stderr %s", i, r.code, r.err);
        cr_assert_eq(count_lines(r.err), 1, "case %zu: %s", i, r.err);
        cr_assert(!strncmp(r.err, "placer profile", 14), "case %zu: %s", i, r.err);
        run_free(&r);
        cr_assert_not(th_exists(path), "case %zu made no file", i);
    }
    th_rmtree(dir);
}

Test(cmd_profile, hardware_profiling_without_the_engine_says_so) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "hw.db");
    run_result r = run_placer(dir, (const char *[]){"profile", "--db", path, "--devices", "0,1", NULL});
    cr_assert_eq(r.code, 1);
    cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
    cr_assert(th_has(r.err, "CUDA engine") && th_has(r.err, "--from-spec"), "%s", r.err);
    cr_assert_not(th_exists(path));
    run_free(&r);
    th_rmtree(dir);
}

/* The node_cost rows of the file at path: how many, and their times' sum. */
static void cost_rows(const char *path, int *n, double *sum) {
    sqlite3 *h = NULL;
    sqlite3_stmt *s = NULL;
    cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(h, "SELECT count(*), total(us) FROM node_cost", -1, &s, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    *n = sqlite3_column_int(s, 0);
    *sum = sqlite3_column_double(s, 1);
    sqlite3_finalize(s);
    sqlite3_close(h);
}

/* `profile node-memory`: a CPU profile whose node rows were made stale (as
 * a file measured before a layout change is) reports them, --write puts the
 * engine's back and keeps every cost, a second look finds nothing; a spec
 * profile, a missing file and --portable without --write are one line,
 * exit 2, the file as it was. */
Test(cmd_profile, node_memory_reports_stale_rows_and_write_replaces_them, .timeout = 120) {
    char dir[256], path[512], spec[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "cpu.db");
    th_path(spec, sizeof spec, dir, "spec.db");
    run_result r = run_placer(dir, (const char *[]){"profile", "--db", path, "--cpu", "1", "--config", "tiny",
                                                    "--micro-batch-sizes", "2,4", "--reps", "3", NULL});
    cr_assert_eq(r.code, 0, "%s", r.err);
    run_free(&r);
    r = run_placer(dir, (const char *[]){"profile", "node-memory", "--db", path, NULL});
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(th_has(r.out, "0 of ") && !th_has(r.out, "one workspace"), "a fresh profile is the engine's: %s", r.out);
    run_free(&r);

    /* stale: the MLP rows of an older layout (one workspace, 7 bytes more saved) */
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(h,
                              "UPDATE node SET act_bytes_per_sample = act_bytes_per_sample + 7, "
                              "fwd_workspace_bytes = 0, bwd_workspace_bytes = 0 WHERE kind = 'mlp'",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    int changed = sqlite3_changes(h);
    sqlite3_close(h);
    int n_costs = 0, n_after = 0;
    double sum_costs = 0, sum_after = 0;
    cost_rows(path, &n_costs, &sum_costs);
    cr_assert_gt(changed, 0);
    cr_assert_gt(n_costs, 0);

    r = run_placer(dir, (const char *[]){"profile", "node-memory", "--db", path, "--json", NULL});
    cr_assert_eq(r.code, 0, "%s", r.err);
    char want[64];
    snprintf(want, sizeof want, "\"differ\":%d,\"one_workspace_rows\":%d,\"written\":false", changed, changed);
    cr_assert(th_has(r.out, want), "want %s in %s", want, r.out);
    run_free(&r);
    r = run_placer(dir, (const char *[]){"profile", "node-memory", "--db", path, "--write", NULL});
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(th_has(r.out, "node rows replaced, costs kept"), "%s", r.out);
    run_free(&r);
    r = run_placer(dir, (const char *[]){"profile", "node-memory", "--db", path, "--json", NULL});
    cr_assert(r.code == 0 && th_has(r.out, "\"differ\":0,\"one_workspace_rows\":0"), "%s", r.out);
    run_free(&r);
    cost_rows(path, &n_after, &sum_after);
    cr_assert_eq(n_after, n_costs, "costs kept");
    cr_assert_eq(sum_after, sum_costs);

    /* the shipped spec file as it is (an older schema, rollback journal): a
     * refused --write must neither migrate it nor switch it to WAL */
    char src[1024];
    snprintf(src, sizeof src, "%s/data/t4x4-pcie.db", PLACER_SOURCE_DIR);
    size_t n0, n1;
    unsigned char *orig = th_read(src, &n0);
    cr_assert_not_null(orig);
    cr_assert_eq(th_write(spec, orig, n0), 0);
    free(orig);
    unsigned char *before = th_read(spec, &n0);
    const char *const bad[][8] = {
        {"profile", "node-memory", "--db", spec, "--write", NULL},           /* a spec profile */
        {"profile", "node-memory", NULL},                                    /* no --db */
        {"profile", "node-memory", "--db", spec, "--portable", NULL},        /* --portable alone */
        {"profile", "node-memory", "--db", "missing.db", NULL},              /* no such file */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = run_placer(dir, bad[i]);
        cr_assert_eq(r.code, 2, "case %zu: exit %d, %s", i, r.code, r.err);
        cr_assert_eq(count_lines(r.err), 1, "case %zu: %s", i, r.err);
        cr_assert(!strncmp(r.err, "placer profile node-memory: ", 28), "case %zu: %s", i, r.err);
        run_free(&r);
    }
    unsigned char *after = th_read(spec, &n1);
    cr_assert(n0 == n1 && !memcmp(before, after, n0), "the spec profile is as it was");
    free(before);
    free(after);
    cr_assert_not(th_exists("missing.db"));
    th_rmtree(dir);
}

/* Index of the first occurrence of needle in hay, or -1. */
static long at(const char *hay, const char *needle) {
    const char *p = strstr(hay, needle);
    return p ? (long)(p - hay) : -1;
}

/* The first n lines of s (what `| head -n` shows) into a new string. */
static char *head_lines(const char *s, int n) {
    const char *e = s;
    for (int i = 0; i < n && *e; i++) {
        const char *nl = strchr(e, '\n');
        e = nl ? nl + 1 : e + strlen(e);
    }
    char *h = strndup(s, (size_t)(e - s));
    cr_assert(h);
    return h;
}

Test(cmd_profile, show_puts_the_summary_first_so_its_head_reads_whole) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "x.db");
    run_result r = run_placer(dir, (const char *[]){"profile", "--from-spec", "h200x2-nvlink", "--db", path, NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    run_free(&r);
    r = run_placer(dir, (const char *[]){"profile", "show", "--db", path, NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    /* machine, devices, links, collectives, totals, then the node table */
    long dev = at(r.out, "\ndevices"), links = at(r.out, "\nlinks"), coll = at(r.out, "\ncollectives"),
         tot = at(r.out, "\ntotals per device"), nodes = at(r.out, "\nnode costs on device 0");
    cr_assert(dev > 0 && links > dev && coll > links && tot > coll && nodes > tot, "order: %s", r.out);
    /* what `placer profile show | head -20` shows holds the whole summary of
     * a two-device profile: both devices, both links, the collectives line */
    char *h = head_lines(r.out, 20);
    cr_assert(th_has(h, "machine   h200x2-nvlink (spec)"), "%s", h);
    cr_assert(th_has(h, "    1  NVIDIA H200"), "both devices in the head: %s", h);
    cr_assert(th_has(h, "    1   0  nvlink"), "both links in the head: %s", h);
    cr_assert(th_has(h, "collectives: none measured"), "%s", h);
    cr_assert_not(th_has(h, "node costs"), "the node table comes after the summary: %s", h);
    free(h);
    run_free(&r);

    /* --summary stops before the node table */
    r = run_placer(dir, (const char *[]){"profile", "show", "--db", path, "--summary", NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    cr_assert(th_has(r.out, "totals per device") && th_has(r.out, "\nlinks"), "%s", r.out);
    cr_assert_not(th_has(r.out, "node costs"), "%s", r.out);
    cr_assert_not(th_has(r.out, "embedding"), "no node rows: %s", r.out);
    run_free(&r);

    /* --summary with --json is refused in one line */
    r = run_placer(dir, (const char *[]){"profile", "show", "--db", path, "--summary", "--json", NULL});
    cr_assert_eq(r.code, 2);
    cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
    cr_assert(th_has(r.err, "placer profile show: --summary"), "%s", r.err);
    cr_assert_str_eq(r.out, "");
    run_free(&r);
    th_rmtree(dir);
}

Test(cmd_profile, show_says_not_measured_for_figures_a_measured_profile_lacks) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "x.db");
    run_result r = run_placer(dir, (const char *[]){"profile", "--from-spec", "h200x2-nvlink", "--db", path, NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    run_free(&r);
    /* the spec's figures are shown as stored */
    r = run_placer(dir, (const char *[]){"profile", "show", "--db", path, "--summary", NULL});
    cr_assert(th_has(r.out, "400 T") && th_has(r.out, "4.8 TB/s") && th_has(r.out, "4.0 us"), "%s", r.out);
    cr_assert_not(th_has(r.out, "not measured"), "%s", r.out);
    run_free(&r);
    /* a measured profile stores 0 for what it did not probe (as the shipped
     * h200x2.db does): words, never 0 B/s or a dash */
    cr_assert_eq(th_sql(path, "UPDATE device SET peak_flops = 0, mem_bw = 0, launch_us = 0"), 0);
    r = run_placer(dir, (const char *[]){"profile", "show", "--db", path, NULL});
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    long dev = at(r.out, "\ndevices"), links = at(r.out, "\nlinks");
    cr_assert(dev > 0 && links > dev);
    char *table = strndup(r.out + dev, (size_t)(links - dev));
    cr_assert(table);
    cr_assert_not(th_has(table, " 0 B/s"), "no zero bandwidth: %s", table);
    cr_assert_not(th_has(table, "0.0 us"), "no zero launch time: %s", table);
    const char *row = strstr(table, "    0  NVIDIA H200");
    cr_assert(row, "%s", table);
    int words = 0;
    for (const char *q = row; (q = strstr(q, "not measured")) && q < strchr(row, '\n'); q++) words++;
    cr_assert_eq(words, 3, "peak FLOP/s, memory bandwidth and launch say not measured: %s", table);
    /* the profiled times still give a rate: the best node's, below the
     * spec's 400 TFLOP/s peak and above a tenth of it */
    double tflops = 0;
    cr_assert_eq(sscanf(strstr(row, "132  ") + 5, "%lf T", &tflops), 1, "%s", row);
    cr_assert(tflops > 40 && tflops <= 400, "best node %g TFLOP/s", tflops);
    free(table);
    run_free(&r);
    th_rmtree(dir);
}
