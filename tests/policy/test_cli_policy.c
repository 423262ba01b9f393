/*
 * test_cli_policy.c: `placer train` and `placer search` end to end, run as
 * child processes of the built binary on a spec profile database: their
 * tables, exit codes for bad input, and a resume after SIGKILL that gives
 * the same samples as an uninterrupted run.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sqlite3.h>
#include <unistd.h>

#include "../placer_run.h"

#include "graph.h"
#include "spec.h"
#include "store.h"

static void make_db(char *path, size_t len) {
    snprintf(path, len, "/tmp/placer-test-cli-policy-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(path);
    gpt_config cfg;
    char msg[256];
    cr_assert_eq(gpt_config_parse("default", &cfg, msg, sizeof msg), PL_OK);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, msg, sizeof msg), PL_OK);
    static const int mbs[] = {1, 2, 4, 8, 16};
    profile_data *p = NULL;
    cr_assert_eq(spec_profile_build(spec_find("t4x4-pcie"), g, mbs, 5, &p), PL_OK);
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_save_profile(db, &cfg, p, msg, sizeof msg), PL_OK, "%s", msg);
    profile_db_close(db);
    profile_data_destroy(p);
    graph_destroy(g);
}

static void drop_db(const char *path) {
    char b[512];
    unlink(path);
    snprintf(b, sizeof b, "%s-wal", path);
    unlink(b);
    snprintf(b, sizeof b, "%s-shm", path);
    unlink(b);
}

static int run_placer(const char *args, char **out, char **err) { return placer_run(NULL, args, out, err); }

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

Test(cli_policy, search_prints_the_baselines_and_the_optimum) {
    char db[256];
    make_db(db, sizeof db);
    char args[512], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "search --db %s --micro-batches 4 --schedule 1f1b --devices 2", db);
    int rc = run_placer(args, &out, &err);
    cr_assert_eq(rc, 0, "stderr: %s", err);
    const char *want[] = {"single gpu 0", "human ", "dp (", "random", "anneal", "local", "exhaustive", "speed-up"};
    for (int i = 0; i < 8; i++) cr_assert(strstr(out, want[i]) != NULL, "missing '%s' in:\n%s", want[i], out);
    cr_assert(strstr(out, "4096 placements up to 2 device relabellings") != NULL, "%s", out);
    free(out);
    free(err);
    drop_db(db);
}

Test(cli_policy, bad_input_gives_one_line_and_exit_2) {
    char db[256];
    make_db(db, sizeof db);
    const char *cases[] = {
        "train --db %s --updates many",       "train --db %s --baseline median",
        "train --db %s --groups clusters",    "train --db %s --micro-batches 5",
        "train --db %s --resume 42",          "train --db %s --mem-cap lots",
        "search --db %s --method magic",      "search --db %s --devices 9",
        "search --db %s --method exhaustive --groups none",
        "train --db %s.missing",              "search --db %s --config gpt12",
        "train --db %s --pipe-prior 101",     "train --db %s --pipe-prior -1",
        "train --db %s --pipe-devices some",  "train --db %s --lr-decay 2",
        "train --db %s --entropy-decay -0.5",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512], *err = NULL;
        snprintf(args, sizeof args, cases[i], db);
        int rc = run_placer(args, NULL, &err);
        cr_assert_eq(rc, 2, "'%s' exited %d: %s", args, rc, err);
        cr_assert_eq(count_lines(err), 1, "'%s' printed:\n%s", args, err);
        cr_assert(strncmp(err, "placer ", 7) == 0, "%s", err);
        free(err);
    }
    drop_db(db);
}

/* The schedule and pipeline-rule flags reach the trainer: the header names
 * them and the devices with a stage (4 identical T4s: every one), and the
 * stored arguments keep them for a resume. */
Test(cli_policy, train_prints_the_pipeline_rule_and_the_schedules, .timeout = 120) {
    char db[256];
    make_db(db, sizeof db);
    char args[512], *out = NULL, *err = NULL;
    snprintf(args, sizeof args,
             "train --db %s --groups learned --updates 2 --samples 2 --threads 1 --micro-batches 4 --schedule 1f1b "
             "--pipe-prior 8 --pipe-devices estimate --pipe-anneal --lr-decay 0.5 --entropy-decay 1",
             db);
    int rc = run_placer(args, &out, &err);
    cr_assert_eq(rc, 0, "stderr: %s", err);
    cr_assert(strstr(out, "pipeline prior 8 falling to 0, devices estimate: stages on 0 1 2 3\n"), "%s", out);
    cr_assert(strstr(out, "lr falls to 0.0015 and entropy to 0 by the last update"), "%s", out);
    free(out);
    free(err);
    drop_db(db);
}

/* Samples of a run as text, straight from the store. */
static char *samples_of(const char *path, int64_t run, int *count);

typedef struct {
    char *buf;
    size_t n, cap;
    int count;
} acc;

static int add_sample(void *ctx, const profile_run_sample *s) {
    acc *a = ctx;
    char line[1024];
    int k = snprintf(line, sizeof line, "%d/%d %s %.17g\n", s->update, s->sample, s->placement, s->step_us);
    if (a->n + (size_t)k + 1 > a->cap) a->buf = realloc(a->buf, a->cap = (a->cap + (size_t)k + 1) * 2);
    memcpy(a->buf + a->n, line, (size_t)k + 1);
    a->n += (size_t)k;
    a->count++;
    return 0;
}

static char *samples_of(const char *path, int64_t run, int *count) {
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, NULL, 0), PL_OK);
    acc a = {calloc(1, 1), 0, 1, 0};
    cr_assert_eq(profile_db_run_samples(db, run, add_sample, &a), PL_OK);
    profile_db_close(db);
    *count = a.count;
    return a.buf;
}

static int latest_checkpoint(const char *path, int64_t run) {
    profile_db *db = NULL;
    if (profile_db_open(path, PROFILE_DB_READ, &db, NULL, 0) != PL_OK) return -1;
    void *blob = NULL;
    size_t n = 0;
    int u = -1;
    if (profile_db_checkpoint_load(db, run, -1, &u, &blob, &n) != PL_OK) u = -1;
    free(blob);
    profile_db_close(db);
    return u;
}

Test(cli_policy, train_resumed_after_sigkill_matches_an_uninterrupted_run, .timeout = 300) {
    char db[256];
    make_db(db, sizeof db);
    const char *common = "--updates 300 --samples 4 --hidden 16 --micro-batches 4 --schedule 1f1b --seed 5";
    char args[1024], *out = NULL, *err = NULL;
    /* run 1: uninterrupted */
    snprintf(args, sizeof args, "train --db %s %s", db, common);
    cr_assert_eq(run_placer(args, &out, &err), 0, "%s", err);
    cr_assert(strstr(out, "run 1") != NULL, "%s", out);
    cr_assert(strstr(out, "rl best found") != NULL && strstr(out, "rl favourite") != NULL, "%s", out);
    free(out);
    free(err);
    /* run 2: the same, killed with SIGKILL mid-run */
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        char a2[1024];
        snprintf(a2, sizeof a2, "exec %s train --db %s %s >/dev/null 2>&1", PLACER_BIN, db, common);
        execl("/bin/sh", "sh", "-c", a2, (char *)NULL);
        _exit(127);
    }
    int seen = -1;
    for (int i = 0; i < 30000 && seen < 15; i++) {
        usleep(1000);
        seen = latest_checkpoint(db, 2);
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    int killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    cr_assert(killed, "the training process finished before it could be killed");
    int at = latest_checkpoint(db, 2);
    cr_assert(at >= 15 && at < 299, "killed after update %d", at);
    snprintf(args, sizeof args, "train --db %s --resume 2", db);
    cr_assert_eq(run_placer(args, &out, &err), 0, "%s", err);
    cr_assert(strstr(out, "run 2 (resumed)") != NULL, "%s", out);
    free(out);
    free(err);
    int n1 = 0, n2 = 0;
    char *s1 = samples_of(db, 1, &n1), *s2 = samples_of(db, 2, &n2);
    cr_assert_eq(n1, 300 * 4);
    cr_assert_eq(n2, 300 * 4);
    cr_assert_str_eq(s1, s2);
    free(s1);
    free(s2);
    drop_db(db);
}

/* Read a whole file into a malloc'd, NUL-terminated buffer; *n gets its size. */
static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    b[*n] = 0;
    fclose(f);
    return b;
}

Test(cli_policy, train_without_db_writes_a_copy_and_leaves_the_shipped_profile_alone, .timeout = 120) {
    char shipped[1024];
    snprintf(shipped, sizeof shipped, "%s/data/h200x2.db", PLACER_SOURCE_DIR);
    size_t n0 = 0, n1 = 0;
    char *before = slurp(shipped, &n0);
    cr_assert_not_null(before, "the shipped profile %s is missing", shipped);
    char dir[] = "/tmp/placer-test-workdb-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char cmd[4096];
    for (int pass = 0; pass < 2; pass++) {
        snprintf(cmd, sizeof cmd,
                 "cd %s && env -u PLACER_DB %s train --updates 1 --samples 2 >out.txt 2>err%d.txt", dir,
                 PLACER_BIN, pass);
        int rc = system(cmd);
        cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "pass %d: exit %d", pass, rc);
    }
    char path[1100];
    size_t n = 0;
    snprintf(path, sizeof path, "%s/err0.txt", dir);
    char *err0 = slurp(path, &n);
    cr_assert_not_null(err0);
    cr_assert_not_null(strstr(err0, "writing into ./placer-runs.db, a copy of"), "%s", err0);
    snprintf(path, sizeof path, "%s/err1.txt", dir);
    char *err1 = slurp(path, &n);
    cr_assert_not_null(strstr(err1, "no --db given: writing into ./placer-runs.db"), "%s", err1);
    cr_assert_null(strstr(err1, "a copy of"), "the second run must reuse the copy: %s", err1);
    /* both runs are in the copy */
    snprintf(path, sizeof path, "%s/placer-runs.db", dir);
    profile_db *db = NULL;
    char msg[256];
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    sqlite3 *h = profile_db_handle(db);
    sqlite3_stmt *q = NULL;
    cr_assert_eq(sqlite3_prepare_v2(h, "SELECT count(*) FROM run", -1, &q, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
    cr_assert_eq(sqlite3_column_int(q, 0), 2);
    sqlite3_finalize(q);
    profile_db_close(db);
    /* the shipped file is byte for byte what it was */
    char *after = slurp(shipped, &n1);
    cr_assert_eq(n1, n0);
    cr_assert(!memcmp(before, after, n0), "the shipped profile changed");
    free(before);
    free(after);
    free(err0);
    free(err1);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}
