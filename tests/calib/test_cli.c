/* test_cli.c: `placer calibrate`, `placer confirm` and `placer report` from
 * the built binary on a spec profile with the synthetic timer, and their
 * answers to bad input. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run a shell command; return its exit code and the first line of its
 * stderr in err (stdout to out_file when not NULL, else discarded). */
static int sh(const char *cmd, char *err, size_t len) {
    char full[2048], ef[64];
    snprintf(ef, sizeof ef, "/tmp/placer-calib-cli-err-%d", (int)getpid());
    snprintf(full, sizeof full, "%s </dev/null >/dev/null 2>%s", cmd, ef);
    int rc = system(full);
    if (err && len) {
        err[0] = 0;
        FILE *f = fopen(ef, "r");
        if (f) {
            if (!fgets(err, (int)len, f)) err[0] = 0;
            fclose(f);
        }
        err[strcspn(err, "\n")] = 0;
    }
    unlink(ef);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void make_db(char *path, size_t len) {
    snprintf(path, len, "/tmp/placer-calib-cli-%d.db", (int)getpid());
    char cmd[1024], err[256];
    snprintf(cmd, sizeof cmd, "rm -f %s*; %s profile --from-spec h200x2-nvlink --db %s", path, PLACER_BIN, path);
    cr_assert_eq(sh(cmd, err, sizeof err), 0, "%s", err);
}

static void remove_db(const char *path) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s-wal %s-shm %s-report", path, path, path, path);
    cr_assert_eq(system(cmd), 0);
}

Test(calib_cli, confirm_takes_the_rl_shortlist_and_favourite_from_a_trained_runs_checkpoint) {
    char db[256], cmd[1024], err[256];
    make_db(db, sizeof db);
    snprintf(cmd, sizeof cmd, "%s train --db %s --updates 4 --samples 4 --threads 1 --seed 3", PLACER_BIN, db);
    cr_assert_eq(sh(cmd, err, sizeof err), 0, "%s", err);
    snprintf(cmd, sizeof cmd, "%s confirm --db %s --run 1 --timer synthetic --label R --confirm-rounds 2 --steps 2",
             PLACER_BIN, db);
    cr_assert_eq(sh(cmd, err, sizeof err), 0, "%s", err);
    /* the first stderr line says where the RL candidates came from */
    cr_assert(strstr(err, "from checkpoint") != NULL, "%s", err);
    snprintf(cmd, sizeof cmd,
             "test \"$(sqlite3 %s \"SELECT count(*) FROM calib_confirm_side WHERE side='rl' AND n_candidates > 1\")\" = 1",
             db);
    cr_assert_eq(sh(cmd, err, sizeof err), 0, "no rl side with several candidates stored");
    remove_db(db);
}

Test(calib_cli, calibrate_confirm_report_run_end_to_end_on_a_spec_profile) {
    char db[256], cmd[1024], err[256];
    make_db(db, sizeof db);
    snprintf(cmd, sizeof cmd, "%s calibrate --db %s --timer synthetic --count 30 --seed 2", PLACER_BIN, db);
    cr_assert_eq(sh(cmd, err, sizeof err), 0, "%s", err);
    snprintf(cmd, sizeof cmd, "%s calibrate --db %s --from-measurements --seed 3", PLACER_BIN, db);
    cr_assert_eq(sh(cmd, err, sizeof err), 0, "%s", err);
    snprintf(cmd, sizeof cmd, "%s confirm --db %s --run 0 --timer synthetic --label A --confirm-rounds 3 --steps 3",
             PLACER_BIN, db);
    cr_assert_eq(sh(cmd, err, sizeof err), 0, "%s", err);
    snprintf(cmd, sizeof cmd, "%s report --db %s --out %s-report", PLACER_BIN, db, db);
    cr_assert_eq(sh(cmd, err, sizeof err), 0, "%s", err);
    char f[512];
    snprintf(f, sizeof f, "%s-report/h2h-A.svg", db);
    cr_assert_eq(access(f, R_OK), 0, "%s missing", f);
    snprintf(f, sizeof f, "%s-report/calibration.png", db);
    cr_assert_eq(access(f, R_OK), 0, "%s missing", f);
    /* the stored timings: 30 calibrate, and confirm rows */
    snprintf(cmd, sizeof cmd,
             "test \"$(sqlite3 %s \"SELECT count(*) FROM measurement WHERE purpose='calibrate'\")\" = 30", db);
    cr_assert_eq(sh(cmd, err, sizeof err), 0, "calibrate measurements not stored");
    snprintf(cmd, sizeof cmd, "test \"$(sqlite3 %s \"SELECT count(*) FROM measurement WHERE purpose='confirm'\")\" -gt 0",
             db);
    cr_assert_eq(sh(cmd, err, sizeof err), 0, "confirm measurements not stored");
    remove_db(db);
}

typedef struct {
    char args[200];      /* after "placer", with DB for the database path */
    int rc;              /* expected exit code */
    char first_err[80];  /* expected start of stderr's first line */
} bad_case;

static const bad_case BAD[] = {
    {"calibrate", 2, "placer calibrate: --db FILE is required"},
    {"calibrate --db DB --holdout 1.5", 2, "placer calibrate: --holdout must be a fraction"},
    {"calibrate --db DB --timer nope", 2, "placer calibrate: --timer must be cuda, cpu or synthetic"},
    {"calibrate --db DB --count 0", 2, "placer calibrate: --count must be a positive integer"},
    {"calibrate --db DB --timer synthetic --devices 0", 2, "placer calibrate: --devices lists 1 devices but the profile has 2"},
    {"calibrate --db DB --timer synthetic --devices 0,x", 2, "placer calibrate: '0,x' is not a list of device numbers"},
    {"calibrate --db DB --from-measurements", 2, "placer calibrate: only 0 usable measurements"},
    {"calibrate --db /nonexistent/x.db --from-measurements", 2, "placer calibrate: "},
    {"confirm --db DB", 2, "placer confirm: --run RUN is required"},
    {"confirm --db DB --run 7 --timer synthetic", 2, "placer confirm: run 7 is not in this database"},
    {"confirm --db DB --run 0 --timer synthetic --micro-batches 3", 2, "placer confirm: "},
    {"confirm --db DB --run 0 --timer synthetic --schedule zigzag", 2, "placer confirm: "},
    {"confirm --db DB --run 0 --confirm-rounds 1", 2, "placer confirm: --confirm-rounds must be an integer"},
    {"report --db DB", 2, "placer report: --out DIR is required"},
    {"report --out /tmp/x", 2, "placer report: --db FILE is required"},
    {"report --db DB --out /tmp/x --run abc", 2, "placer report: --run takes a run id"},
};

ParameterizedTestParameters(calib_cli, bad_input_gets_one_clear_line_and_exit_code) {
    return cr_make_param_array(bad_case, (void *)BAD, sizeof BAD / sizeof BAD[0]);
}

ParameterizedTest(const bad_case *bc, calib_cli, bad_input_gets_one_clear_line_and_exit_code) {
    char db[256], cmd[1500], err[256], args[600] = "";
    make_db(db, sizeof db);
    /* substitute DB */
    const char *p = bc->args;
    size_t k = 0;
    while (*p && k + 260 < sizeof args) {
        if (!strncmp(p, "DB", 2)) {
            k += (size_t)snprintf(args + k, sizeof args - k, "%s", db);
            p += 2;
        } else {
            args[k++] = *p++;
        }
    }
    args[k] = 0;
    snprintf(cmd, sizeof cmd, "%s %s", PLACER_BIN, args);
    int rc = sh(cmd, err, sizeof err);
    cr_assert_eq(rc, bc->rc, "'%s' exited %d (%s)", args, rc, err);
    cr_assert(!strncmp(err, bc->first_err, strlen(bc->first_err)), "'%s' said '%s', want '%s...'", args, err,
              bc->first_err);
    remove_db(db);
}

/* confirm runs the engine in the profile's precision, and refuses a
 * precision the engine does not run with one line and exit 2 */
Test(calib_cli, confirm_runs_the_engine_in_the_profiles_precision) {
    char db[256], cmd[1024], err[256];
    snprintf(db, sizeof db, "/tmp/placer-calib-cli-prec-%d.db", (int)getpid());
    snprintf(cmd, sizeof cmd, "rm -f %s*; %s profile --from-spec h200x2-nvlink --config tiny --db %s", db, PLACER_BIN, db);
    cr_assert_eq(sh(cmd, err, sizeof err), 0, "%s", err);
    snprintf(cmd, sizeof cmd, "sqlite3 %s \"INSERT OR REPLACE INTO meta(key, value) VALUES('precision', 'bf16')\"", db);
    cr_assert_eq(sh(cmd, err, sizeof err), 0, "%s", err);
    snprintf(cmd, sizeof cmd, "%s confirm --db %s --run 0 --timer cpu --confirm-rounds 2 --steps 1", PLACER_BIN, db);
    cr_assert_eq(sh(cmd, err, sizeof err), 0, "%s", err);
    cr_assert(strstr(err, "cpu timer in bf16") != NULL, "%s", err);
    snprintf(cmd, sizeof cmd, "sqlite3 %s \"INSERT OR REPLACE INTO meta(key, value) VALUES('precision', 'fp8')\"", db);
    cr_assert_eq(sh(cmd, err, sizeof err), 0, "%s", err);
    snprintf(cmd, sizeof cmd, "%s confirm --db %s --run 0 --timer cpu --confirm-rounds 2 --steps 1", PLACER_BIN, db);
    cr_assert_eq(sh(cmd, err, sizeof err), 2, "%s", err);
    cr_assert(strstr(err, "records precision 'fp8'") != NULL, "%s", err);
    remove_db(db);
}
