/*
 * test_faults_collectives.c: the store's collective curves (schema 2,
 * collective_point) under allocation failure: writing points and reading
 * them all back fail with a status at every one of placer's allocations
 * (and SQLite's), leak nothing, leave the file intact, and a write is all
 * or nothing.
 */
#include <criterion/criterion.h>

#include "fault_db.h"
#include "fault_sweep.h"

#define N_POINTS 40 /* more than the reader's first allocation holds: it must grow */

static fault_db F;
static int with_sqlite;

static void setup(void) {
    fault_db_init(&F, "coll.db");
    fault_db_save(&F);
}
static void setup_sqlite(void) {
    cr_assert_eq(failalloc_hook_sqlite(), 0);
    with_sqlite = 1;
    setup();
}
static void teardown(void) { fault_db_fini(&F); }

static profile_coll_point point(int i) {
    profile_coll_point p = {(profile_coll_op)(i % PROFILE_COLL_COUNT), 2, "sockets", 4.0 * (1 + i), 10.0 + i, 1.0, 5};
    return p;
}

/* Write all points in one explicit transaction. */
static pl_status op_write(void *ctx) {
    (void)ctx;
    profile_db *db = NULL;
    pl_status st = profile_db_open(F.path, PROFILE_DB_WRITE, &db, NULL, 0);
    if (st != PL_OK) return st;
    profile_db_machine_row mr;
    if ((st = profile_db_machine(db, &mr)) != PL_OK) goto out;
    if ((st = profile_db_begin(db)) != PL_OK) goto out;
    for (int i = 0; i < N_POINTS && st == PL_OK; i++) {
        profile_coll_point p = point(i);
        st = profile_db_put_collective_point(db, mr.name, &p);
    }
    if (st == PL_OK) st = profile_db_commit(db);
    else profile_db_rollback(db);
out:
    profile_db_close(db);
    return st;
}

static void check_write(void *ctx, long n, pl_status st) {
    (void)ctx;
    fault_db_assert_intact(F.path, n);
    long long k = fault_db_query(F.path, "SELECT count(*) FROM collective_point");
    if (st == PL_OK) cr_assert_eq(k, N_POINTS);
    else cr_assert(k == 0 || k == N_POINTS, "allocation %ld left %lld of %d points", n, k, N_POINTS);
    if (st != PL_OK && k == N_POINTS) return;
    if (st == PL_OK) { /* the next run starts from an empty table again */
        sqlite3 *h = NULL;
        cr_assert_eq(sqlite3_open(F.path, &h), SQLITE_OK);
        cr_assert_eq(sqlite3_exec(h, "DELETE FROM collective_point", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(h);
    }
}

static pl_status op_read(void *ctx) {
    (void)ctx;
    profile_db *db = NULL;
    pl_status st = profile_db_open(F.path, PROFILE_DB_READ, &db, NULL, 0);
    if (st != PL_OK) return st;
    profile_coll_point *p = NULL;
    int n = 0;
    st = profile_db_collective_points(db, &p, &n);
    if (st == PL_OK && n != N_POINTS) st = PL_ERR_INVALID; /* a read that lost rows is a failure */
    if (st != PL_OK && p) st = PL_ERR_INVALID;            /* on error nothing is handed out */
    free(p);
    profile_db_close(db);
    return st;
}

static void check_read(void *ctx, long n, pl_status st) {
    (void)ctx;
    cr_assert_neq(st, PL_ERR_INVALID, "allocation %ld: lost rows or handed out a buffer on error", n);
}

Test(faults_collectives, writing_points_fails_cleanly_at_every_allocation, .init = setup, .fini = teardown) {
    cr_assert_gt(fault_sweep_ex("store: put_collective_point x40", op_write, check_write, NULL, 0), 1);
}

Test(faults_collectives, writing_points_with_sqlite_allocations, .init = setup_sqlite, .fini = teardown) {
    cr_assert_gt(fault_sweep_ex("store: put_collective_point x40 (+SQLite)", op_write, check_write, NULL, 1), 1);
}

Test(faults_collectives, reading_points_fails_cleanly_at_every_allocation, .init = setup, .fini = teardown) {
    cr_assert_eq(op_write(NULL), PL_OK);
    cr_assert_gt(fault_sweep_ex("store: collective_points", op_read, check_read, NULL, 0), 1);
}

Test(faults_collectives, reading_points_with_sqlite_allocations, .init = setup_sqlite, .fini = teardown) {
    cr_assert_eq(op_write(NULL), PL_OK);
    cr_assert_gt(fault_sweep_ex("store: collective_points (+SQLite)", op_read, check_read, NULL, 1), 1);
}
