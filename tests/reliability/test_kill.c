/*
 * test_kill.c: SIGKILL at random moments during profiling (the CPU
 * backend), training and calibration, then the checks a user relies on:
 *   - PRAGMA integrity_check is ok;
 *   - every row committed before the kill is still there, unchanged (rows
 *     are read through a separate connection just before the kill, so
 *     whatever they show was committed), and no unit is half written (a
 *     profiler unit's node times, an update's samples and checkpoint, a
 *     fit and its points);
 *   - the resumed run completes with the same result as an uninterrupted
 *     one: the profiler's re-run stores exactly the reference's set of
 *     units (and `profile check` passes); `train --resume` ends with the
 *     reference's samples and final checkpoint (network, Adam state) byte
 *     for byte; a calibration re-run prints the reference's fit.
 *
 * Each scenario first times an uninterrupted reference run, then kills
 * PLACER_KILL_COUNT runs (default 3 in CI; scripts/kill-tests.sh runs 50) at
 * uniform random times over that duration, from seed PLACER_KILL_SEED
 * (default 1). A run that finishes before its kill is checked the same way
 * and does not count as a kill; later kill times are then drawn over its
 * (shorter) duration. With PLACER_KILL_COUNT set, a summary line
 * per scenario goes to stderr.
 */
#include "rel_helpers.h"

static int kill_count(void) {
    const char *e = getenv("PLACER_KILL_COUNT");
    int n = e && *e ? atoi(e) : 3;
    return n > 0 ? n : 3;
}

static uint64_t kill_seed(void) {
    const char *e = getenv("PLACER_KILL_SEED");
    return e && *e ? strtoull(e, NULL, 10) : 1;
}

typedef struct {
    const char *name;
    const char *const *keep; /* queries whose rows committed before a kill must survive it */
    int n_keep;
    const char *broken;      /* a query for half-written units: must return no row after a kill */
} scenario;

typedef struct {
    int kills, finished_early, integrity_failures, lost_rows, resumed_same;
    double t_ref;
} tally;

/* Rows of every keep query, each prefixed by the query's index. */
typedef struct {
    char **rows[8];
    int n[8];
} snapshot;

static void snap_take(const scenario *s, const char *db, snapshot *out) {
    for (int q = 0; q < s->n_keep; q++) out->rows[q] = rel_rows(db, s->keep[q], &out->n[q]);
}

static void snap_free(const scenario *s, snapshot *x) {
    for (int q = 0; q < s->n_keep; q++) rel_rows_free(x->rows[q], x->n[q]);
}

/* The checks after a kill (or an early finish): integrity and no lost rows. */
static void check_after_kill(const scenario *s, const char *db, snapshot *before, tally *t, int i) {
    char detail[512];
    int ok = rel_integrity_ok(db, detail, sizeof detail);
    if (!ok) t->integrity_failures++;
    cr_assert(ok, "%s kill %d: integrity_check says %s", s->name, i, detail);
    if (s->broken) {
        int nb = 0;
        char **b = rel_rows(db, s->broken, &nb);
        if (nb) t->lost_rows++;
        cr_assert_eq(nb, 0, "%s kill %d: a half-written unit is visible: %s", s->name, i, nb ? b[0] : "");
        rel_rows_free(b, nb);
    }
    snapshot after;
    snap_take(s, db, &after);
    for (int q = 0; q < s->n_keep; q++) {
        const char *lost = rel_rows_missing(before->rows[q], before->n[q], after.rows[q], after.n[q]);
        if (lost) t->lost_rows++;
        cr_assert_null(lost, "%s kill %d: committed row lost or changed (%s): %s", s->name, i, s->keep[q], lost);
    }
    snap_free(s, &after);
}

/* Start args on db, SIGKILL it after `delay` seconds (snapshot just before),
 * check. Returns 1 when it was killed, 0 when it finished first. */
static int kill_once(const scenario *s, char *const *args, const char *db, double delay, tally *t, int i) {
    double t0 = rel_now();
    pid_t pid = rel_spawn(args, NULL, NULL);
    rel_sleep(delay);
    snapshot before;
    snap_take(s, db, &before);
    kill(pid, SIGKILL);
    int rc = rel_wait(pid);
    int killed = rc == -SIGKILL;
    cr_assert(killed || rc == 0, "%s run %d ended with %d before its kill", s->name, i, rc);
    /* a run that finished first was faster than the reference (which ran
     * on a busier machine): draw later kill times over its duration */
    if (!killed && rel_now() - t0 < t->t_ref) t->t_ref = rel_now() - t0;
    check_after_kill(s, db, &before, t, i);
    snap_free(s, &before);
    return killed;
}

static void report(const scenario *s, const tally *t) {
    if (getenv("PLACER_KILL_COUNT"))
        fprintf(stderr,
                "kill-tests: %-10s %d kills (%d runs finished before their kill, not counted), runs of %.2f s; "
                "integrity failures %d, lost rows %d, resumed runs identical to the reference %d/%d\n",
                s->name, t->kills, t->finished_early, t->t_ref, t->integrity_failures, t->lost_rows, t->resumed_same,
                t->kills);
}

/* ---- profiling (CPU backend) ------------------------------------------------ */

static const char *const PROFILE_KEEP[] = {
    "SELECT device, node, phase, mb_size, us, spread_us FROM node_cost",
    "SELECT src, dst, bytes, us, spread_us FROM link_point",
    "SELECT device, mb_size, us, spread_us FROM step_anchor",
};
static const char *const PROFILE_UNITS[] = {
    "SELECT device, node, phase, mb_size FROM node_cost",
    "SELECT src, dst, bytes FROM link_point",
    "SELECT device, mb_size FROM step_anchor",
    "SELECT src, dst FROM link",
    "SELECT idx FROM device",
};

static char *units_text(const char *db) {
    size_t cap = 1 << 16, k = 0;
    char *out = malloc(cap);
    out[0] = 0;
    for (int q = 0; q < 5; q++) {
        int n = 0;
        char **r = rel_rows(db, PROFILE_UNITS[q], &n);
        for (int i = 0; i < n; i++) {
            size_t need = strlen(r[i]) + 8;
            if (k + need >= cap) out = realloc(out, cap *= 2);
            k += (size_t)snprintf(out + k, cap - k, "%d:%s\n", q, r[i]);
        }
        rel_rows_free(r, n);
    }
    return out;
}

Test(kill, profiling_killed_at_random_resumes_to_the_same_units, .timeout = 1800) {
    /* a unit of node times (one device and micro-batch size, forward and
     * backward of every node) is all there or absent */
    scenario s = {"profile", PROFILE_KEEP, 3,
                  "SELECT device, mb_size, count(*) FROM node_cost WHERE phase IN ('fwd', 'bwd') "
                  "GROUP BY device, mb_size HAVING count(*) != 2 * (SELECT max(n_nodes) FROM graph)"};
    tally t = {0};
    char dir[256], ref[320], db[320];
    rel_mkdtemp(dir, "kill-profile");
    snprintf(ref, sizeof ref, "%s/ref.db", dir);
    snprintf(db, sizeof db, "%s/k.db", dir);
    char *ref_args[] = {"profile", "--cpu", "2", "--config", "tiny", "--db", ref, NULL};
    double t0 = rel_now();
    char *err = NULL;
    cr_assert_eq(rel_run(ref_args, NULL, &err), 0, "reference profile: %s", err);
    free(err);
    t.t_ref = rel_now() - t0;
    char *want = units_text(ref);
    cr_assert(strlen(want) > 100);
    char *args[] = {"profile", "--cpu", "2", "--config", "tiny", "--db", db, NULL};
    char *check[] = {"profile", "check", "--db", db, NULL};
    uint64_t rng = kill_seed() * 1000 + 1;
    for (int i = 0; t.kills < kill_count(); i++) {
        rel_remove_db(db);
        int killed = kill_once(&s, args, db, rel_uniform(&rng) * t.t_ref, &t, i);
        if (killed) t.kills++;
        else t.finished_early++;
        cr_assert_lt(t.finished_early, 5 * kill_count() + 5, "profile runs keep finishing before their kill");
        /* resume: the same command measures what is missing */
        char *e2 = NULL;
        cr_assert_eq(rel_run(args, NULL, &e2), 0, "profile resume after kill %d: %s", i, e2);
        free(e2);
        char *got = units_text(db);
        cr_assert_str_eq(got, want, "kill %d: the resumed profile's units differ from the reference", i);
        free(got);
        cr_assert_eq(rel_run(check, NULL, &e2), 0, "profile check after kill %d: %s", i, e2);
        free(e2);
        if (killed) t.resumed_same++;
    }
    report(&s, &t);
    free(want);
    rel_rmtree(dir);
}

/* ---- training -------------------------------------------------------------------- */

/* Only the latest checkpoint of a run is kept (older ones are deleted in
 * the transaction that stores a new one), so checkpoints are checked
 * through their run: a run that had one keeps one, and it belongs to the
 * last update whose samples are stored. */
static const char *const TRAIN_KEEP[] = {
    "SELECT run_id, update_idx, sample, placement, step_us, peak_bytes, oom FROM run_sample",
    "SELECT DISTINCT run_id FROM checkpoint",
    "SELECT id, method, args FROM run",
};
static const char TRAIN_BROKEN[] =
    "SELECT r.id FROM run r WHERE (SELECT count(*) FROM checkpoint c WHERE c.run_id = r.id) > 1 "
    "OR coalesce((SELECT (max(c.update_idx) + 1) * 4 FROM checkpoint c WHERE c.run_id = r.id), 0) != "
    "(SELECT count(*) FROM run_sample s WHERE s.run_id = r.id)";

static void make_base(const char *path) {
    char *args[] = {"profile", "--from-spec", "t4x4-pcie", "--config", "tiny", "--db", (char *)path, NULL};
    char *err = NULL;
    cr_assert_eq(rel_run(args, NULL, &err), 0, "%s", err);
    free(err);
}

static char *one_text(const char *db, const char *sql) {
    int n = 0;
    char **r = rel_rows(db, sql, &n);
    size_t cap = 1 << 16, k = 0;
    char *out = malloc(cap);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        size_t need = strlen(r[i]) + 2;
        while (k + need >= cap) out = realloc(out, cap *= 2);
        k += (size_t)snprintf(out + k, cap - k, "%s\n", r[i]);
    }
    rel_rows_free(r, n);
    return out;
}

static char *samples_of(const char *db, int run) {
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT printf('%%06d %%03d', update_idx, sample), placement, step_us, peak_bytes, oom FROM run_sample "
             "WHERE run_id = %d",
             run);
    return one_text(db, sql);
}

static char *final_checkpoint_of(const char *db, int run) {
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT update_idx, hex(blob) FROM checkpoint WHERE run_id = %d AND update_idx = "
             "(SELECT max(update_idx) FROM checkpoint WHERE run_id = %d)",
             run, run);
    return one_text(db, sql);
}

#define TRAIN_ARGS(db)                                                                                      \
    {"train", "--db", db, "--updates", "600", "--samples", "4", "--hidden", "16", "--seed", "5", "--threads", "1", \
     "--micro-batches", "2", "--schedule", "1f1b", NULL}

Test(kill, training_killed_at_random_resumes_to_identical_samples_and_parameters, .timeout = 1800) {
    scenario s = {"train", TRAIN_KEEP, 3, TRAIN_BROKEN}; /* samples and checkpoint of an update together */
    tally t = {0};
    char dir[256], base[320], ref[320], db[320];
    rel_mkdtemp(dir, "kill-train");
    snprintf(base, sizeof base, "%s/base.db", dir);
    snprintf(ref, sizeof ref, "%s/ref.db", dir);
    snprintf(db, sizeof db, "%s/k.db", dir);
    make_base(base);
    rel_copy(base, ref);
    char *ref_args[] = TRAIN_ARGS(ref);
    double t0 = rel_now();
    char *err = NULL;
    cr_assert_eq(rel_run(ref_args, NULL, &err), 0, "reference train: %s", err);
    free(err);
    t.t_ref = rel_now() - t0;
    char *want_samples = samples_of(ref, 1), *want_ckpt = final_checkpoint_of(ref, 1);
    cr_assert(strlen(want_samples) > 1000 && strlen(want_ckpt) > 100);
    char *args[] = TRAIN_ARGS(db);
    char *resume[] = {"train", "--db", db, "--resume", "1", NULL};
    uint64_t rng = kill_seed() * 1000 + 2;
    for (int i = 0; t.kills < kill_count(); i++) {
        rel_remove_db(db);
        rel_copy(base, db);
        int killed = kill_once(&s, args, db, rel_uniform(&rng) * t.t_ref, &t, i);
        if (killed) t.kills++;
        else t.finished_early++;
        cr_assert_lt(t.finished_early, 5 * kill_count() + 5, "training runs keep finishing before their kill");
        /* resume from the last checkpoint; a run killed before its first
         * checkpoint (or before it was created) cannot resume: start again */
        int run = 1;
        char *ck = final_checkpoint_of(db, 1);
        char *e2 = NULL;
        if (*ck) {
            cr_assert_eq(rel_run(resume, NULL, &e2), 0, "train --resume after kill %d: %s", i, e2);
        } else {
            int nr = 0;
            char **r = rel_rows(db, "SELECT max(id) FROM run", &nr);
            run = nr && strcmp(r[0], "NULL") ? atoi(r[0]) + 1 : 1;
            rel_rows_free(r, nr);
            cr_assert_eq(rel_run(args, NULL, &e2), 0, "train re-run after kill %d: %s", i, e2);
        }
        free(ck);
        free(e2);
        char *got_samples = samples_of(db, run), *got_ckpt = final_checkpoint_of(db, run);
        cr_assert_str_eq(got_samples, want_samples, "kill %d: samples of the resumed run differ", i);
        cr_assert_str_eq(got_ckpt, want_ckpt, "kill %d: final checkpoint of the resumed run differs", i);
        free(got_samples);
        free(got_ckpt);
        if (killed) t.resumed_same++;
    }
    report(&s, &t);
    free(want_samples);
    free(want_ckpt);
    rel_rmtree(dir);
}

/* ---- calibration -------------------------------------------------------------------- */

static const char *const CALIB_KEEP[] = {
    "SELECT id, graph_key, placement, micro_batches, schedule, step_us, spread_us, peak_bytes, oom, purpose, extra "
    "FROM measurement",
    "SELECT id, graph_key, timer, params, errors FROM calib_fit",
    "SELECT fit_id, measurement_id, split, placement, measured_us FROM calib_fit_point",
};

/* The printed fit, without the line naming the stored fit's row id. */
static void drop_stored_line(char *out) {
    char *p = strstr(out, "\nstored: ");
    if (p) p[1] = 0;
}

#define CALIB_ARGS(db)                                                                                      \
    {"calibrate", "--db", db, "--timer", "synthetic", "--count", "150", "--steps", "3", "--warmup", "0", NULL}

Test(kill, calibration_killed_at_random_reruns_to_the_same_fit, .timeout = 1800) {
    scenario s = {"calibrate", CALIB_KEEP, 3, /* a stored fit has all its points */
                  "SELECT f.id FROM calib_fit f WHERE (SELECT count(*) FROM calib_fit_point p WHERE p.fit_id = f.id) "
                  "!= f.n_train + f.n_test"};
    tally t = {0};
    char dir[256], base[320], ref[320], db[320];
    rel_mkdtemp(dir, "kill-calib");
    snprintf(base, sizeof base, "%s/base.db", dir);
    snprintf(ref, sizeof ref, "%s/ref.db", dir);
    snprintf(db, sizeof db, "%s/k.db", dir);
    make_base(base);
    rel_copy(base, ref);
    char *ref_args[] = CALIB_ARGS(ref);
    double t0 = rel_now();
    char *want = NULL, *err = NULL;
    cr_assert_eq(rel_run(ref_args, &want, &err), 0, "reference calibrate: %s", err);
    free(err);
    t.t_ref = rel_now() - t0;
    drop_stored_line(want);
    cr_assert(strstr(want, "compute_scale") != NULL, "%s", want);
    char *want_params = one_text(ref, "SELECT name, value FROM sim_params");
    char *args[] = CALIB_ARGS(db);
    uint64_t rng = kill_seed() * 1000 + 3;
    for (int i = 0; t.kills < kill_count(); i++) {
        rel_remove_db(db);
        rel_copy(base, db);
        int killed = kill_once(&s, args, db, rel_uniform(&rng) * t.t_ref, &t, i);
        if (killed) t.kills++;
        else t.finished_early++;
        cr_assert_lt(t.finished_early, 5 * kill_count() + 5, "calibration runs keep finishing before their kill");
        char *got = NULL, *e2 = NULL;
        cr_assert_eq(rel_run(args, &got, &e2), 0, "calibrate re-run after kill %d: %s", i, e2);
        free(e2);
        drop_stored_line(got);
        cr_assert_str_eq(got, want, "kill %d: the re-run's fit differs from the reference", i);
        free(got);
        char *params = one_text(db, "SELECT name, value FROM sim_params");
        cr_assert_str_eq(params, want_params, "kill %d: stored simulator parameters differ", i);
        free(params);
        if (killed) t.resumed_same++;
    }
    report(&s, &t);
    free(want);
    free(want_params);
    rel_rmtree(dir);
}

/* Found by the kill tests (ASan build, seed 2): a profile run killed after
 * SQLite created the file but before the schema was committed leaves an
 * SQLite file with no tables; the re-run (profile --cpu, and --from-spec)
 * must take it over, not refuse it as "not a profile database". */
Test(kill, a_file_left_before_the_schema_was_written_is_taken_over_by_the_rerun, .timeout = 300) {
    char dir[256], db[320], spec[320];
    rel_mkdtemp(dir, "kill-schema");
    snprintf(db, sizeof db, "%s/k.db", dir);
    snprintf(spec, sizeof spec, "%s/s.db", dir);
    const char *paths[2] = {db, spec};
    for (int i = 0; i < 2; i++) {
        sqlite3 *h = NULL;
        cr_assert_eq(sqlite3_open(paths[i], &h), SQLITE_OK);
        cr_assert_eq(sqlite3_exec(h, "PRAGMA journal_mode = WAL", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(h);
        struct stat sb;
        cr_assert_eq(stat(paths[i], &sb), 0);
        cr_assert_gt(sb.st_size, 0, "an SQLite file with a header and no tables");
    }
    char *measure[] = {"profile", "--cpu", "2", "--config", "tiny", "--db", db, NULL};
    char *from_spec[] = {"profile", "--from-spec", "t4x4-pcie", "--config", "tiny", "--db", spec, NULL};
    char *err = NULL;
    cr_assert_eq(rel_run(measure, NULL, &err), 0, "profile --cpu: %s", err);
    free(err);
    cr_assert_eq(rel_run(from_spec, NULL, &err), 0, "profile --from-spec: %s", err);
    free(err);
    int n = 0;
    char **r = rel_rows(db, "SELECT count(*) FROM node_cost", &n);
    cr_assert(n == 1 && atoi(r[0]) > 0);
    rel_rows_free(r, n);
    rel_rmtree(dir);
}
