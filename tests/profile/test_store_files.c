/*
 * test_store_files.c: the store never damages a file it is given. Missing,
 * non-SQLite, damaged and newer-schema files are refused byte-for-byte
 * unchanged; an old schema is migrated; a writer killed mid-transaction
 * leaves the last commit; the shipped profiles load read-only; allocation
 * failures inside SQLite never corrupt or leak.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include "graph.h"
#include "helpers.h"
#include "spec.h"
#include "store.h"
#include "util.h"

static const profile_db_mode ALL_MODES[3] = {PROFILE_DB_READ, PROFILE_DB_WRITE, PROFILE_DB_CREATE};

/* Write a small spec profile (tiny graph) to path; portable picks the journal. */
static void write_spec_db(const char *path, int portable) {
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    int sizes[3] = {1, 2, 4};
    profile_data *p = NULL;
    cr_assert_eq(spec_profile_build(spec_find("h200x2-nvlink"), g, sizes, 3, &p), PL_OK);
    profile_db *db = NULL;
    char msg[512] = "";
    cr_assert_eq(profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_save_profile(db, &cfg, p, msg, sizeof msg), PL_OK, "%s", msg);
    if (portable) cr_assert_eq(profile_db_make_portable(db, msg, sizeof msg), PL_OK, "%s", msg);
    profile_db_close(db);
    profile_data_destroy(p);
    graph_destroy(g);
}

/* Open path in every mode, expect `want` each time, and check that the file
 * is byte-for-byte unchanged and no journal appeared. */
static void assert_refused_in_modes(const char *path, const profile_db_mode *modes, int n_modes, pl_status want,
                                    const char *msg_part) {
    size_t n0 = 0, n1 = 0;
    unsigned char *before = th_read(path, &n0);
    cr_assert_not_null(before);
    for (int m = 0; m < n_modes; m++) {
        profile_db *db = (profile_db *)0x1;
        char msg[512] = "";
        pl_status st = profile_db_open(path, modes[m], &db, msg, sizeof msg);
        cr_assert_eq(st, want, "mode %d: got %s (%s)", m, pl_status_str(st), msg);
        cr_assert_null(db);
        cr_assert(th_has(msg, path), "message names the file: %s", msg);
        if (msg_part) cr_assert(th_has(msg, msg_part), "message says '%s': %s", msg_part, msg);
        unsigned char *after = th_read(path, &n1);
        cr_assert_not_null(after);
        cr_assert_eq(n0, n1, "size unchanged (mode %d)", m);
        cr_assert_eq(memcmp(before, after, n0), 0, "bytes unchanged (mode %d)", m);
        free(after);
        cr_assert_not(th_side_exists(path, "-journal"));
    }
    free(before);
}

static void assert_refused_unchanged(const char *path, pl_status want, const char *msg_part) {
    assert_refused_in_modes(path, ALL_MODES, 3, want, msg_part);
}

Test(store_files, missing_file_is_not_found_and_not_created) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "absent.db");
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_ERR_NOT_FOUND);
    cr_assert(th_has(msg, path) && th_has(msg, "does not exist"), "%s", msg);
    cr_assert_eq(profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg), PL_ERR_NOT_FOUND);
    cr_assert_null(db);
    cr_assert_not(th_exists(path));
    cr_assert_not(th_side_exists(path, "-wal"));
    th_rmtree(dir);
}

Test(store_files, create_writes_the_current_schema_in_wal_mode) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "new.db");
    profile_db *db = NULL;
    char msg[512] = "";
    cr_assert_eq(profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    sqlite3_stmt *s = NULL;
    cr_assert_eq(sqlite3_prepare_v2(profile_db_handle(db), "SELECT value FROM meta WHERE key = 'schema_version'", -1,
                                    &s, NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    cr_assert_eq(sqlite3_column_int(s, 0), PROFILE_DB_SCHEMA_VERSION);
    sqlite3_finalize(s);
    cr_assert_eq(sqlite3_prepare_v2(profile_db_handle(db), "PRAGMA journal_mode", -1, &s, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    profile_db_close(db);
    /* opening again with CREATE keeps the file */
    cr_assert_eq(profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_opened_version(db), PROFILE_DB_SCHEMA_VERSION);
    profile_db_close(db);
    th_rmtree(dir);
}

Test(store_files, empty_file_is_initialised_by_create_only) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "empty.db");
    cr_assert_eq(th_write(path, "", 0), 0);
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_ERR_NOT_SQLITE);
    cr_assert_eq(profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg), PL_ERR_NOT_SQLITE);
    size_t n = 1;
    free(th_read(path, &n));
    cr_assert_eq(n, 0, "still empty");
    cr_assert_eq(profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    profile_db_close(db);
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    profile_db_close(db);
    th_rmtree(dir);
}

Test(store_files, newer_schema_is_refused_and_the_file_left_unchanged) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "future.db");
    write_spec_db(path, 0);
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(h, "UPDATE meta SET value = '99' WHERE key = 'schema_version'", NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(h);
    assert_refused_unchanged(path, PL_ERR_SCHEMA_NEWER, "99");
    th_rmtree(dir);
}

Test(store_files, text_file_is_refused_unchanged) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "notes.db");
    const char *text = "these are my notes, not a database\nline two\n";
    cr_assert_eq(th_write(path, text, strlen(text)), 0);
    assert_refused_unchanged(path, PL_ERR_NOT_SQLITE, "not an SQLite database");
    th_rmtree(dir);
}

Test(store_files, random_bytes_are_refused_unchanged) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "noise.db");
    unsigned char buf[8192];
    pl_rng r;
    pl_rng_seed(&r, 20261129);
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)pl_rng_next(&r);
    cr_assert_eq(th_write(path, buf, sizeof buf), 0);
    assert_refused_unchanged(path, PL_ERR_NOT_SQLITE, NULL);
    th_rmtree(dir);
}

Test(store_files, truncated_database_is_refused_unchanged) {
    char dir[256], full[512], half[512], page[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(full, sizeof full, dir, "full.db");
    th_path(half, sizeof half, dir, "half.db");
    th_path(page, sizeof page, dir, "page.db");
    write_spec_db(full, 1);
    size_t n = 0;
    unsigned char *b = th_read(full, &n);
    cr_assert(n > 3 * 4096, "a real profile spans several pages (%zu bytes)", n);
    cr_assert_eq(th_write(half, b, n / 2), 0);
    cr_assert_eq(th_write(page, b, 4096), 0);
    free(b);
    assert_refused_unchanged(half, PL_ERR_NOT_SQLITE, "truncated");
    assert_refused_unchanged(page, PL_ERR_NOT_SQLITE, "truncated");
    th_rmtree(dir);
}

Test(store_files, database_with_garbage_pages_is_refused_unchanged) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "garbage.db");
    write_spec_db(path, 1);
    size_t n = 0;
    unsigned char *b = th_read(path, &n);
    /* keep the 100-byte header, so only SQLite itself can tell */
    pl_rng r;
    pl_rng_seed(&r, 7);
    for (size_t i = 100; i < n; i++) b[i] = (unsigned char)pl_rng_next(&r);
    cr_assert_eq(th_write(path, b, n), 0);
    free(b);
    assert_refused_unchanged(path, PL_ERR_NOT_SQLITE, "damaged");
    th_rmtree(dir);
}

Test(store_files, foreign_sqlite_database_is_refused_unchanged) {
    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "other-app.db");
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(h, "CREATE TABLE t(x); INSERT INTO t VALUES(1);", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    assert_refused_unchanged(path, PL_ERR_NOT_SQLITE, "not a placer profile");
    th_rmtree(dir);
}

Test(store_files, version_0_is_migrated_when_opened_for_writing) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "v0.db");
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(h,
                              "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                              "INSERT INTO meta VALUES('schema_version', '0'), ('creator', 'placer 0.0');",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(h);

    /* READ cannot migrate: refused, untouched */
    assert_refused_in_modes(path, ALL_MODES, 1, PL_ERR_INVALID, "older schema");
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_opened_version(db), 0);
    int64_t run = 0;
    cr_assert_eq(profile_db_run_create(db, "after-migration", "", &run), PL_OK, "the v1 tables exist");
    profile_db_close(db);
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_opened_version(db), PROFILE_DB_SCHEMA_VERSION);
    sqlite3_stmt *s = NULL;
    cr_assert_eq(sqlite3_prepare_v2(profile_db_handle(db),
                                    "SELECT (SELECT value FROM meta WHERE key = 'creator'), "
                                    "(SELECT count(*) FROM sqlite_master WHERE type = 'table')",
                                    -1, &s, NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(s, 0), "placer 0.0", "migration keeps existing rows");
    cr_assert_eq(sqlite3_column_int(s, 1), 15, "meta plus the 13 tables of version 1 and collective_point of 2");
    sqlite3_finalize(s);
    profile_db_close(db);
    th_rmtree(dir);
}

/* The child side of the killed-writer test: commit nothing, write until killed. */
static void killed_writer_child(const char *path, int signal_fd) {
    profile_db *db = NULL;
    if (profile_db_open(path, PROFILE_DB_WRITE, &db, NULL, 0) != PL_OK) _exit(3);
    /* a tiny page cache forces SQLite to spill uncommitted pages into the WAL */
    if (sqlite3_exec(profile_db_handle(db), "PRAGMA cache_size = 4", NULL, NULL, NULL) != SQLITE_OK) _exit(4);
    if (profile_db_begin(db) != PL_OK) _exit(5);
    int64_t run = 0;
    if (profile_db_run_create(db, "killed", "", &run) != PL_OK) _exit(6);
    char pl[256];
    for (int i = 0;; i++) {
        snprintf(pl, sizeof pl, "%d,0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3", i);
        if (profile_db_run_add_sample(db, run, i / 100, i % 100, pl, 1000.0 + i, i, 0) != PL_OK) _exit(7);
        if (i == 3000 && write(signal_fd, "x", 1) != 1) _exit(8);
        if (i > 500000) pause();
    }
}

Test(store_files, killed_writer_leaves_the_last_commit) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "runs.db");
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    int64_t kept = 0;
    cr_assert_eq(profile_db_run_create(db, "committed", "", &kept), PL_OK);
    cr_assert_eq(profile_db_begin(db), PL_OK);
    for (int i = 0; i < 500; i++) cr_assert_eq(profile_db_run_add_sample(db, kept, i / 50, i % 50, "0,1", i, 0, 0), PL_OK);
    cr_assert_eq(profile_db_commit(db), PL_OK);
    profile_db_close(db);

    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        killed_writer_child(path, fds[1]);
        _exit(9);
    }
    close(fds[1]);
    char c = 0;
    ssize_t got = read(fds[0], &c, 1);
    close(fds[0]);
    cr_assert_eq(got, 1, "the writer got into its transaction");
    struct stat ws;
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", path);
    cr_assert_eq(kill(pid, SIGKILL), 0);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    int killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    cr_assert(killed, "the writer died by SIGKILL (status %d)", status);
    cr_assert(stat(wal, &ws) == 0 && ws.st_size > 64 * 1024,
              "uncommitted pages reached the WAL before the kill (%lld bytes)", (long long)ws.st_size);

    cr_assert_eq(profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    sqlite3_stmt *s = NULL;
    cr_assert_eq(sqlite3_prepare_v2(profile_db_handle(db), "PRAGMA integrity_check", -1, &s, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(s, 0), "ok");
    sqlite3_finalize(s);
    cr_assert_eq(sqlite3_prepare_v2(profile_db_handle(db),
                                    "SELECT (SELECT count(*) FROM run), (SELECT count(*) FROM run_sample), "
                                    "(SELECT count(*) FROM run_sample WHERE run_id = ?1), "
                                    "(SELECT group_concat(method) FROM run)",
                                    -1, &s, NULL),
                 SQLITE_OK);
    sqlite3_bind_int64(s, 1, kept);
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    cr_assert_eq(sqlite3_column_int(s, 0), 1, "the killed transaction's run is gone");
    cr_assert_eq(sqlite3_column_int(s, 1), 500, "none of the killed transaction's samples remain");
    cr_assert_eq(sqlite3_column_int(s, 2), 500, "every committed sample is there");
    cr_assert_str_eq((const char *)sqlite3_column_text(s, 3), "committed");
    sqlite3_finalize(s);
    /* and the file takes new writes */
    int64_t next = 0;
    cr_assert_eq(profile_db_run_create(db, "after", "", &next), PL_OK);
    profile_db_close(db);
    th_rmtree(dir);
}

Test(store_files, read_only_open_leaves_a_portable_file_untouched) {
    char dir[256], path[512], msg[512] = "";
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "ship.db");
    write_spec_db(path, 1);
    size_t n0, n1;
    unsigned char *before = th_read(path, &n0);
    cr_assert_eq(before[18], 1, "rollback journal (header byte 18 = 1), not WAL (2)");
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    profile_data *p = NULL;
    cr_assert_eq(profile_db_load_profile(db, NULL, &p, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(p->n_devices, 2);
    profile_data_destroy(p);
    profile_db_close(db);
    unsigned char *after = th_read(path, &n1);
    cr_assert_eq(n0, n1);
    cr_assert_eq(memcmp(before, after, n0), 0);
    cr_assert_not(th_side_exists(path, "-wal"), "no WAL side file for a portable file");
    cr_assert_not(th_side_exists(path, "-shm"));
    cr_assert_not(th_side_exists(path, "-journal"));
    free(before);
    free(after);

    /* read-only media: a portable file opens READ from a directory nobody can write */
    cr_assert_eq(chmod(dir, 0555), 0);
    if (access(dir, W_OK) != 0) { /* (root can write anyway; then this part proves nothing) */
        cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
        cr_assert_eq(profile_db_load_profile(db, NULL, &p, NULL, msg, sizeof msg), PL_OK, "%s", msg);
        profile_data_destroy(p);
        profile_db_close(db);
    }
    cr_assert_eq(chmod(dir, 0755), 0);

    /* a WAL-mode file: the read-only open may add side files but never touches the main file */
    char wal_path[512];
    th_path(wal_path, sizeof wal_path, dir, "wal.db");
    write_spec_db(wal_path, 0);
    before = th_read(wal_path, &n0);
    cr_assert_eq(before[18], 2, "WAL mode");
    cr_assert_eq(profile_db_open(wal_path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_load_profile(db, NULL, &p, NULL, msg, sizeof msg), PL_OK, "%s", msg);
    profile_data_destroy(p);
    profile_db_close(db);
    after = th_read(wal_path, &n1);
    cr_assert_eq(n0, n1);
    cr_assert_eq(memcmp(before, after, n0), 0);
    free(before);
    free(after);
    th_rmtree(dir);
}

/* Shipped profiles live in data/ of the source tree. */
static void check_shipped(const char *name, const char *machine, int n_devices) {
    char path[1024], msg[512] = "";
    snprintf(path, sizeof path, "%s/data/%s", PLACER_SOURCE_DIR, name);
    size_t n0, n1;
    unsigned char *before = th_read(path, &n0);
    cr_assert_not_null(before, "%s is shipped", path);
    cr_assert_eq(before[18], 1, "%s is portable (rollback journal), so it opens read-only anywhere", name);
    profile_db *db = NULL;
    cr_assert_eq(profile_db_open(path, PROFILE_DB_READ, &db, msg, sizeof msg), PL_OK, "%s", msg);
    gpt_config cfg, got;
    cr_assert_eq(gpt_config_parse("default", &cfg, NULL, 0), PL_OK);
    profile_data *p = NULL;
    cr_assert_eq(profile_db_load_profile(db, &cfg, &p, &got, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_str_eq(p->machine, machine);
    cr_assert_str_eq(p->source, "spec");
    cr_assert_eq(p->n_devices, n_devices);
    cr_assert_eq(p->n_nodes, 40);
    cr_assert_eq(p->n_mb, 5);
    cr_assert_eq(got.batch, 16);
    char kind[32];
    cr_assert_eq(profile_db_link_kind(db, 0, 1, kind, sizeof kind), PL_OK);
    cr_assert(strlen(kind) > 0, "link kinds are stored");
    int64_t params = 0;
    for (int i = 0; i < p->n_nodes; i++) params += p->node_mem[i].param_bytes;
    cr_assert_eq(params, 4LL * 49343232, "parameter bytes of the default GPT");
    profile_data_destroy(p);
    profile_db_close(db);
    unsigned char *after = th_read(path, &n1);
    cr_assert(n0 == n1 && memcmp(before, after, n0) == 0, "reading does not modify %s", name);
    free(before);
    free(after);
}

Test(store_files, shipped_t4_profile_loads_read_only) { check_shipped("t4x4-pcie.db", "t4x4-pcie", 4); }

Test(store_files, shipped_h200_spec_profile_loads_read_only) { check_shipped("h200x2-spec.db", "h200x2-nvlink", 2); }

/* ---- allocation failures inside SQLite ----------------------------------- */

/* Counting allocator: fails the fail_at-th allocation and every one after it
 * (a sticky failure, as when memory really runs out). Installed before
 * SQLite initialises, in this test's own process. */
static struct {
    sqlite3_mem_methods real;
    long count;
    long fail_at; /* 0 = never fail */
} fi;

static void *fi_malloc(int n) {
    if (fi.fail_at && ++fi.count >= fi.fail_at) return NULL;
    return fi.real.xMalloc(n);
}
static void *fi_realloc(void *p, int n) {
    if (fi.fail_at && ++fi.count >= fi.fail_at) return NULL;
    return fi.real.xRealloc(p, n);
}
static void fi_free(void *p) { fi.real.xFree(p); }
static int fi_size(void *p) { return fi.real.xSize(p); }
static int fi_roundup(int n) { return fi.real.xRoundup(n); }
static int fi_init(void *a) { return fi.real.xInit(a); }
static void fi_shutdown(void *a) { fi.real.xShutdown(a); }

/* Create a db and save a profile; returns the status of the first failure. */
static pl_status fi_write(const char *path, const gpt_config *cfg, const profile_data *p) {
    profile_db *db = NULL;
    pl_status st = profile_db_open(path, PROFILE_DB_CREATE, &db, NULL, 0);
    if (st != PL_OK) return st;
    st = profile_db_save_profile(db, cfg, p, NULL, 0);
    profile_db_close(db);
    return st;
}

Test(store_files, allocation_failures_never_corrupt_or_leak) {
    sqlite3_shutdown();
    cr_assert_eq(sqlite3_config(SQLITE_CONFIG_GETMALLOC, &fi.real), SQLITE_OK);
    sqlite3_mem_methods m = {fi_malloc, fi_free, fi_realloc, fi_size, fi_roundup, fi_init, fi_shutdown, NULL};
    cr_assert_eq(sqlite3_config(SQLITE_CONFIG_MALLOC, &m), SQLITE_OK);
    cr_assert_eq(sqlite3_initialize(), SQLITE_OK);

    char dir[256], path[512];
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "fi.db");
    gpt_config cfg;
    cr_assert_eq(gpt_config_parse("tiny", &cfg, NULL, 0), PL_OK);
    graph *g = NULL;
    cr_assert_eq(graph_build_gpt(&cfg, &g, NULL, 0), PL_OK);
    int sizes[2] = {1, 4};
    profile_data *p = NULL;
    cr_assert_eq(spec_profile_build(spec_find("t4x4-pcie"), g, sizes, 2, &p), PL_OK);

    /* how many allocations a clean run makes */
    fi.fail_at = 1L << 40;
    fi.count = 0;
    cr_assert_eq(fi_write(path, &cfg, p), PL_OK);
    long total = fi.count;
    cr_assert(total > 10, "SQLite allocates (%ld)", total);
    th_rmtree(dir);
    cr_assert_eq(th_mkdtemp(dir), 0);
    th_path(path, sizeof path, dir, "fi.db");

    long step = total > 1500 ? total / 1500 : 1;
    int failures = 0;
    for (long n = 1; n <= total + 1; n += step) {
        remove(path);
        char side[600];
        snprintf(side, sizeof side, "%s-wal", path);
        remove(side);
        snprintf(side, sizeof side, "%s-shm", path);
        remove(side);
        fi.count = 0;
        fi.fail_at = n;
        pl_status st = fi_write(path, &cfg, p);
        fi.fail_at = 0;
        if (st != PL_OK) failures++;
        cr_assert(st == PL_OK || st == PL_ERR_DB || st == PL_ERR_NOMEM || st == PL_ERR_IO,
                  "allocation %ld: status %s", n, pl_status_str(st));
        if (!th_exists(path)) continue; /* a failed CREATE removes its file */
        /* whatever is left is consistent: either a whole profile or none */
        profile_db *db = NULL;
        char msg[512] = "";
        pl_status o = profile_db_open(path, PROFILE_DB_WRITE, &db, msg, sizeof msg);
        if (o != PL_OK) {
            cr_assert_eq(o, PL_ERR_NOT_SQLITE, "allocation %ld left %s (%s)", n, pl_status_str(o), msg);
            continue;
        }
        sqlite3_stmt *s = NULL;
        cr_assert_eq(sqlite3_prepare_v2(profile_db_handle(db), "PRAGMA integrity_check", -1, &s, NULL), SQLITE_OK);
        cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
        cr_assert_str_eq((const char *)sqlite3_column_text(s, 0), "ok", "allocation %ld", n);
        sqlite3_finalize(s);
        profile_data *q = NULL;
        pl_status l = profile_db_load_profile(db, &cfg, &q, NULL, msg, sizeof msg);
        if (st == PL_OK) cr_assert_eq(l, PL_OK, "allocation %ld: saved but not loadable: %s", n, msg);
        else cr_assert(l == PL_OK || l == PL_ERR_NOT_FOUND, "allocation %ld: half a profile: %s", n, msg);
        if (l == PL_OK) cr_assert_eq(q->n_nodes, p->n_nodes);
        profile_data_destroy(q);
        profile_db_close(db);
    }
    cr_assert(failures > 0, "some injected failures were seen");
    profile_data_destroy(p);
    graph_destroy(g);
    th_rmtree(dir);
}
