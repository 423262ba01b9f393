/*
 * test_calibrate_run.c: calib_run, the library half of placer calibrate, on
 * a spec profile with the synthetic timer: it finds the timer's known
 * parameters, stores them, and refuses bad input before writing anything.
 */
#include <math.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include "calib_fixture.h"
#include "calibrate_run.h"

static calib_run_options opts(const char *path) {
    calib_run_options o;
    memset(&o, 0, sizeof o);
    o.db_path = path;
    o.timer_kind = "synthetic";
    o.noise = 0.0;
    calib_calibrate_options_default(&o.o);
    o.o.count = 30;
    o.o.seed = 2;
    return o;
}

/* Turn path into a portable file (rollback journal, as shipped profiles
 * are), where a write open would switch it to WAL and leave a -wal file. */
static void make_portable(const char *path) {
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(h, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
}

static long long file_size(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 ? (long long)s.st_size : -1;
}

Test(calibrate_run, synthetic_timer_fit_finds_its_parameters_and_stores_them) {
    fx_model m;
    fx_model_make(&m, "tiny,batch=8", "h200x2-nvlink");
    char path[256], msg[512] = "";
    profile_db_close(fx_db_make(&m, path, sizeof path));
    calib_run_options o = opts(path);
    calib_run_result out;
    cr_assert_eq(calib_run(&o, &out, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_str_eq(out.key, m.key);
    cr_assert_str_eq(out.precision, "", "no engine ran");
    cr_assert(out.timer[0], "the timer is named");
    cr_assert_eq(out.r.n_measured, 30);
    cr_assert_gt(out.r.fit_id, 0, "stored");
    /* without noise the fitted compute scale comes back near the timer's 1.12 */
    cr_assert(fabs(out.r.fit.params.compute_scale - 1.12) < 0.05, "compute_scale %g", out.r.fit.params.compute_scale);
    /* the store now holds the fitted parameters for this graph */
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    const char *names[1] = {"compute_scale"};
    double v[1] = {0};
    int found = 0;
    cr_assert_eq(profile_db_load_sim_params(db, m.key, 1, names, v, &found), PL_OK);
    cr_assert_eq(found, 1);
    cr_assert_eq(memcmp(&v[0], &out.r.fit.params.compute_scale, sizeof v[0]), 0);
    profile_db_close(db);
    fx_db_remove(path);
    fx_model_free(&m);
}

Test(calibrate_run, bad_input_is_refused_before_the_file_is_written) {
    fx_model m;
    fx_model_make(&m, "tiny,batch=8", "h200x2-nvlink");
    char path[256], msg[512] = "";
    profile_db_close(fx_db_make(&m, path, sizeof path));
    make_portable(path);
    char wal[300];
    snprintf(wal, sizeof wal, "%s-wal", path);
    cr_assert_eq(file_size(wal), -1, "a portable file has no write-ahead log");
    const long long size = file_size(path);
    calib_run_result out;

    calib_run_options o = opts(path);
    o.devices = "0";
    cr_assert_eq(calib_run(&o, &out, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "--devices lists 1 devices but the profile has 2"), "%s", msg);

    /* a refit with nothing stored: refused by the dry run on the read-only handle */
    o = opts(path);
    o.o.from_measurements = 1;
    cr_assert_eq(calib_run(&o, &out, msg, sizeof msg), PL_ERR_INVALID);
    cr_assert(strstr(msg, "usable measurements"), "%s", msg);
    cr_assert_eq(file_size(path), size, "the file is as it was");
    cr_assert_eq(file_size(wal), -1, "no write-ahead log made");

    o = opts("/nonexistent/dir/x.db");
    cr_assert_neq(calib_run(&o, &out, msg, sizeof msg), PL_OK);
    cr_assert(msg[0]);
    fx_db_remove(path);
    fx_model_free(&m);
}
