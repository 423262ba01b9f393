/*
 * fault_db.h: small profile databases for the fault-injection tests, and
 * the checks run on them after every injected failure: SQLite's
 * integrity_check, and that rows committed before the sweep are all still
 * there. The checks read through a separate, read-only SQLite connection.
 */
#ifndef PLACER_TESTS_FAULT_DB_H
#define PLACER_TESTS_FAULT_DB_H

#include <criterion/criterion.h>
#include <ftw.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph.h"
#include "spec.h"
#include "store.h"

typedef struct {
    char dir[256];   /* temporary directory */
    char path[320];  /* the database */
    gpt_config cfg;  /* tiny */
    graph *g;        /* the tiny graph */
    profile_data *p; /* its t4x4-pcie spec profile */
} fault_db;

static inline int fault_db_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* Remove path and its -wal, -shm and -journal files. */
static inline void fault_db_remove(const char *path) {
    char side[400];
    remove(path);
    const char *sfx[] = {"-wal", "-shm", "-journal"};
    for (int i = 0; i < 3; i++) {
        snprintf(side, sizeof side, "%s%s", path, sfx[i]);
        remove(side);
    }
}

/* The tiny graph and its spec profile, and a path in a new directory (no
 * file yet). Made with allocation failures disarmed. */
static inline void fault_db_init(fault_db *f, const char *name) {
    memset(f, 0, sizeof *f);
    const char *t = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/placer-faults-XXXXXX", t && *t ? t : "/tmp");
    cr_assert_not_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/%s", f->dir, name);
    cr_assert_eq(gpt_config_parse("tiny", &f->cfg, NULL, 0), PL_OK);
    cr_assert_eq(graph_build_gpt(&f->cfg, &f->g, NULL, 0), PL_OK);
    int mbs[3] = {1, 2, 4};
    cr_assert_eq(spec_profile_build(spec_find("t4x4-pcie"), f->g, mbs, 3, &f->p), PL_OK);
}

static inline void fault_db_fini(fault_db *f) {
    profile_data_destroy(f->p);
    graph_destroy(f->g);
    nftw(f->dir, fault_db_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Write the profile into f->path (created). */
static inline void fault_db_save(fault_db *f) {
    profile_db *db = NULL;
    char msg[256] = "";
    cr_assert_eq(profile_db_open(f->path, PROFILE_DB_CREATE, &db, msg, sizeof msg), PL_OK, "%s", msg);
    cr_assert_eq(profile_db_save_profile(db, &f->cfg, f->p, msg, sizeof msg), PL_OK, "%s", msg);
    profile_db_close(db);
}

/* One integer from a query on a read-only connection (-1 when no row). */
static inline long long fault_db_query(const char *path, const char *sql) {
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(h));
    long long v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    sqlite3_close(h);
    return v;
}

/* PRAGMA integrity_check is "ok" (asserts). */
static inline void fault_db_assert_intact(const char *path, long n) {
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    cr_assert_eq(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &s, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(s, 0), "ok", "integrity_check after failing allocation %ld",
                     n);
    sqlite3_finalize(s);
    sqlite3_close(h);
}

/* Every row of a query as text, one line per row (malloc'd; caller frees):
 * a snapshot of committed rows to compare after each injected failure. */
static inline char *fault_db_dump(const char *path, const char *sql) {
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(h));
    size_t cap = 1024, n = 0;
    char *out = malloc(cap);
    cr_assert_not_null(out);
    out[0] = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        for (int c = 0; c < sqlite3_column_count(s); c++) {
            const char *v = sqlite3_column_type(s, c) == SQLITE_NULL ? "NULL" : (const char *)sqlite3_column_text(s, c);
            size_t k = strlen(v ? v : "") + 2;
            while (n + k + 1 > cap) {
                out = realloc(out, cap *= 2);
                cr_assert_not_null(out);
            }
            n += (size_t)snprintf(out + n, cap - n, "%s%c", v ? v : "", c + 1 < sqlite3_column_count(s) ? '|' : '\n');
        }
    }
    sqlite3_finalize(s);
    sqlite3_close(h);
    return out;
}

#endif
