/*
 * store.c: the profile store on SQLite.
 *
 * Opening is careful because a profile file may be the only record of hours
 * of GPU time: before anything opens the file for writing, its 100-byte
 * header is checked by hand (magic string, page size, and a page count the
 * file can hold) and its schema version is read through a read-only
 * connection. Only a file that passes is reopened read-write, switched to
 * WAL and migrated. So a text file, random bytes, a truncated copy or a file
 * from a newer placer is refused and left byte-for-byte as it was.
 *
 * Schema changes go through store_migrations (store_schema.c): entry v
 * upgrades version v to v + 1, all inside one transaction with the version
 * bump. Version 0 is a bare meta
 * table; a new file is created at version 0 and migrated like any old one,
 * so the migration path runs every time a file is created.
 *
 * Every statement is prepared once per handle (lazily, SQLITE_PREPARE_PERSISTENT)
 * and then bound, stepped and reset. Writes run inside BEGIN IMMEDIATE ...
 * COMMIT, or inside a SAVEPOINT when the caller holds an explicit
 * transaction, so a public call either happens whole or not at all.
 *
 * This file holds the helpers, opening and transactions, the id lookups,
 * the row writes the other pieces share, the graph list and the small
 * reads. Whole profiles are saved and loaded in store_profile.c, the unit
 * writes live in store_units.c, simulator parameters, runs and
 * checkpoints in store_runs.c, measurements and collective curves in
 * store_measurements.c, the schema and the statements' SQL in
 * store_schema.c; what they share is declared in store_internal.h.
 */
#include "store_internal.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUSY_TIMEOUT_MS 5000

/* node_cost.phase as stored, by profile phase */
const char *const PHASE_TEXT[PHASE_COUNT] = {"fwd", "bwd", "opt"};

/* ---- small helpers ------------------------------------------------------ */

pl_status db_fail(profile_db *db, pl_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->err, sizeof db->err, fmt, ap);
    va_end(ap);
    return st;
}

/* Record an SQLite failure of `what` with sqlite3_errmsg. */
pl_status sql_fail(profile_db *db, const char *what) {
    return db_fail(db, PL_ERR_DB, "%s: %s (%s)", db->path, what, sqlite3_errmsg(db->h));
}

/* Copy db's last error into msg. Returns st. */
pl_status to_msg(profile_db *db, pl_status st, char *msg, size_t len) {
    if (st != PL_OK && msg && len > 0) snprintf(msg, len, "%s", db->err);
    return st;
}

/* The cached statement id, prepared on first use; NULL (error recorded) on failure. */
sqlite3_stmt *stmt_get(profile_db *db, int id) {
    if (!db->stmt[id]) {
        int rc = sqlite3_prepare_v3(db->h, store_stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &db->stmt[id], NULL);
        if (rc != SQLITE_OK) {
            sql_fail(db, "preparing a statement");
            db->stmt[id] = NULL;
            return NULL;
        }
    }
    return db->stmt[id];
}

/* Reset a statement for its next use. Accepts NULL. */
void stmt_done(sqlite3_stmt *s) {
    if (!s) return;
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

void bind_text_or_null(sqlite3_stmt *s, int i, const char *t) {
    if (t) sqlite3_bind_text(s, i, t, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(s, i);
}

void bind_double_or_null(sqlite3_stmt *s, int i, double v) {
    if (isnan(v)) sqlite3_bind_null(s, i);
    else sqlite3_bind_double(s, i, v);
}

double col_double_or_nan(sqlite3_stmt *s, int i) {
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}

void col_text_copy(sqlite3_stmt *s, int i, char *buf, size_t len) {
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(buf, len, "%s", t ? (const char *)t : "");
}

const char *col_text(sqlite3_stmt *s, int i) {
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? (const char *)t : "";
}

/* Step a write statement that returns no rows; reset it. */
pl_status step_done(profile_db *db, sqlite3_stmt *s, const char *what) {
    int rc = sqlite3_step(s);
    pl_status st = (rc == SQLITE_DONE) ? PL_OK : sql_fail(db, what);
    stmt_done(s);
    return st;
}

static pl_status exec_sql(profile_db *db, const char *sql, const char *what) {
    char *e = NULL;
    if (sqlite3_exec(db->h, sql, NULL, NULL, &e) != SQLITE_OK) {
        db_fail(db, PL_ERR_DB, "%s: %s (%s)", db->path, what, e ? e : sqlite3_errmsg(db->h));
        sqlite3_free(e);
        return PL_ERR_DB;
    }
    return PL_OK;
}

/* Begin a write unit: BEGIN IMMEDIATE outside a transaction, a SAVEPOINT
 * inside the caller's. *kind records which for wtx_end. */
pl_status wtx_begin(profile_db *db, int *kind) {
    *kind = 0;
    if (db->mode == PROFILE_DB_READ)
        return db_fail(db, PL_ERR_INVALID, "%s: opened read-only; cannot write", db->path);
    if (sqlite3_get_autocommit(db->h)) {
        if (exec_sql(db, "BEGIN IMMEDIATE", "beginning a transaction") != PL_OK) return PL_ERR_DB;
        *kind = 1;
    } else {
        if (exec_sql(db, "SAVEPOINT store_write", "opening a savepoint") != PL_OK) return PL_ERR_DB;
        *kind = 2;
    }
    return PL_OK;
}

/* End a write unit begun by wtx_begin: commit when st is PL_OK, else undo.
 * Returns st, or PL_ERR_DB when the commit itself failed (then undone). The
 * error text of the first failure is kept. */
pl_status wtx_end(profile_db *db, int kind, pl_status st) {
    if (kind == 0) return st;
    if (st == PL_OK) {
        if (exec_sql(db, kind == 1 ? "COMMIT" : "RELEASE store_write", "committing") == PL_OK) return PL_OK;
        st = PL_ERR_DB;
    }
    char keep[sizeof db->err];
    memcpy(keep, db->err, sizeof keep);
    if (kind == 1) {
        if (!sqlite3_get_autocommit(db->h)) exec_sql(db, "ROLLBACK", "rolling back");
    } else {
        exec_sql(db, "ROLLBACK TO store_write", "rolling back to a savepoint");
        exec_sql(db, "RELEASE store_write", "releasing a savepoint");
    }
    memcpy(db->err, keep, sizeof keep);
    return st;
}

/* ---- opening ------------------------------------------------------------ */

static uint32_t be32(const unsigned char *b) {
    return ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | (uint32_t)b[3];
}

/* Check the 100-byte SQLite header of an existing non-empty file by hand, so
 * that SQLite never sees (and never writes to) something that is not a
 * database. Also refuses a file shorter than the page count its header
 * declares, unless a non-empty -wal file may still hold the missing pages. */
static pl_status check_header(const char *path, int64_t size, char *msg, size_t len) {
    static const char magic[16] = "SQLite format 3";
    unsigned char h[100];
    FILE *f = fopen(path, "rb");
    if (!f) return pl_fail(msg, len, PL_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    size_t got = fread(h, 1, sizeof h, f);
    fclose(f);
    if (got < 16 || memcmp(h, magic, 16) != 0)
        return pl_fail(msg, len, PL_ERR_NOT_SQLITE,
                       "%s is not an SQLite database (no SQLite header); give a profile database "
                       "made by placer profile",
                       path);
    if (got < sizeof h)
        return pl_fail(msg, len, PL_ERR_NOT_SQLITE, "%s is damaged: %zu bytes, shorter than an SQLite header",
                       path, got);
    uint32_t page = ((uint32_t)h[16] << 8) | h[17];
    if (page == 1) page = 65536;
    if (page < 512 || page > 65536 || (page & (page - 1)))
        return pl_fail(msg, len, PL_ERR_NOT_SQLITE, "%s is damaged: invalid page size %u in its header", path,
                       page);
    uint32_t n_pages = be32(h + 28), change = be32(h + 24), valid_for = be32(h + 92);
    if (n_pages > 0 && change == valid_for && (int64_t)n_pages * page > size) {
        char wal[4096];
        struct stat ws;
        snprintf(wal, sizeof wal, "%s-wal", path);
        int wal_has_frames = stat(wal, &ws) == 0 && ws.st_size > 0;
        if (!wal_has_frames)
            return pl_fail(msg, len, PL_ERR_NOT_SQLITE,
                           "%s is damaged: truncated (header says %u pages of %u bytes, file holds %lld bytes)",
                           path, n_pages, page, (long long)size);
    }
    return PL_OK;
}

/* Read the schema version through conn. Sets *version, or -1 for an SQLite
 * file with no tables at all (treated as new by CREATE). */
static pl_status read_version(sqlite3 *conn, const char *path, int *version, char *msg, size_t len) {
    sqlite3_stmt *s = NULL;
    pl_status st = PL_OK;
    int rc = sqlite3_prepare_v2(conn,
                                "SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'),"
                                " (SELECT count(*) FROM sqlite_master)",
                                -1, &s, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) goto out_sqlite;
    int has_meta = sqlite3_column_int(s, 0), n_objects = sqlite3_column_int(s, 1);
    sqlite3_finalize(s);
    s = NULL;
    if (!has_meta) {
        if (n_objects == 0) {
            *version = -1;
            return PL_OK;
        }
        return pl_fail(msg, len, PL_ERR_NOT_SQLITE,
                       "%s is an SQLite database but not a placer profile database (no meta table); "
                       "give a profile database made by placer profile", path);
    }
    rc = sqlite3_prepare_v2(conn, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &s, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        st = pl_fail(msg, len, PL_ERR_NOT_SQLITE, "%s is damaged: its meta table has no schema_version", path);
        goto out;
    }
    if (rc != SQLITE_ROW) goto out_sqlite;
    const char *t = (const char *)sqlite3_column_text(s, 0);
    char *end = NULL;
    long v = t ? strtol(t, &end, 10) : -1;
    if (!t || end == t || *end || v < 0 || v > 1000000) {
        st = pl_fail(msg, len, PL_ERR_NOT_SQLITE, "%s is damaged: schema_version '%s' is not a version", path,
                     t ? t : "NULL");
        goto out;
    }
    *version = (int)v;
    goto out;

out_sqlite:
    rc = sqlite3_errcode(conn);
    if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT)
        st = pl_fail(msg, len, PL_ERR_NOT_SQLITE, "%s is damaged: %s", path, sqlite3_errmsg(conn));
    else
        st = pl_fail(msg, len, PL_ERR_DB, "%s: reading the schema version: %s", path, sqlite3_errmsg(conn));
out:
    sqlite3_finalize(s);
    return st;
}

/* Bring the file to PROFILE_DB_SCHEMA_VERSION in one transaction. */
static pl_status migrate(profile_db *db) {
    pl_status st = exec_sql(db, "BEGIN IMMEDIATE", "beginning the migration");
    if (st != PL_OK) return st;
    char msg[sizeof db->err];
    int v = 0;
    st = read_version(db->h, db->path, &v, msg, sizeof msg);
    if (st != PL_OK) {
        db_fail(db, st, "%s", msg);
        goto out_rollback;
    }
    if (v < 0) {
        if ((st = exec_sql(db, store_schema_v0, "creating the meta table")) != PL_OK) goto out_rollback;
        v = 0;
    }
    if (v > PROFILE_DB_SCHEMA_VERSION) {
        st = db_fail(db, PL_ERR_SCHEMA_NEWER, "%s has schema version %d, newer than this placer's %d", db->path,
                     v, PROFILE_DB_SCHEMA_VERSION);
        goto out_rollback;
    }
    for (; v < PROFILE_DB_SCHEMA_VERSION; v++) {
        char what[64], bump[128];
        snprintf(what, sizeof what, "migrating schema %d to %d", v, v + 1);
        if ((st = exec_sql(db, store_migrations[v], what)) != PL_OK) goto out_rollback;
        snprintf(bump, sizeof bump, "UPDATE meta SET value = '%d' WHERE key = 'schema_version'", v + 1);
        if ((st = exec_sql(db, bump, what)) != PL_OK) goto out_rollback;
    }
    if ((st = exec_sql(db, "COMMIT", "committing the migration")) != PL_OK) goto out_rollback;
    return PL_OK;

out_rollback:
    if (!sqlite3_get_autocommit(db->h)) sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

static void remove_created(const char *path) {
    char side[4096];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-journal", path);
    unlink(side);
}

pl_status profile_db_open(const char *path, profile_db_mode mode, profile_db **out, char *msg, size_t len) {
    if (out) *out = NULL;
    if (!path || !*path || !out || (mode != PROFILE_DB_READ && mode != PROFILE_DB_WRITE && mode != PROFILE_DB_CREATE))
        return pl_fail(msg, len, PL_ERR_INVALID, "profile_db_open: missing path or bad mode");
    if (strlen(path) > 4000) return pl_fail(msg, len, PL_ERR_INVALID, "profile database path is too long");

    struct stat sb;
    int exists = stat(path, &sb) == 0;
    if (!exists && errno != ENOENT)
        return pl_fail(msg, len, PL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int fresh = 0;
    if (!exists) {
        if (mode != PROFILE_DB_CREATE)
            return pl_fail(msg, len, PL_ERR_NOT_FOUND,
                           "%s does not exist; make a profile with placer profile --from-spec NAME --db %s "
                           "(or placer profile on a GPU machine)",
                           path, path);
        fresh = 1;
    } else if (!S_ISREG(sb.st_mode)) {
        return pl_fail(msg, len, PL_ERR_NOT_SQLITE, "%s is not a regular file", path);
    } else if (sb.st_size == 0) {
        if (mode != PROFILE_DB_CREATE)
            return pl_fail(msg, len, PL_ERR_NOT_SQLITE, "%s is empty, not a profile database; make one with "
                                                             "placer profile --from-spec NAME --db %s", path, path);
        fresh = 1;
    } else {
        pl_status st = check_header(path, (int64_t)sb.st_size, msg, len);
        if (st != PL_OK) return st;
    }

    profile_db *db = calloc(1, sizeof *db);
    if (!db) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory opening %s", path);
    db->path = strdup(path);
    db->mode = mode;
    if (!db->path) {
        free(db);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory opening %s", path);
    }
    pl_status st = PL_OK;
    int version = -1;

    if (!fresh) {
        /* Look before touching: a read-only connection cannot change the file. */
        int rc = sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READONLY, NULL);
        if (rc != SQLITE_OK) {
            st = pl_fail(msg, len, PL_ERR_DB, "%s: cannot open: %s", path,
                         db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
            goto out_close;
        }
        sqlite3_busy_timeout(db->h, BUSY_TIMEOUT_MS);
        if ((st = read_version(db->h, path, &version, msg, len)) != PL_OK) goto out_close;
        if (version > PROFILE_DB_SCHEMA_VERSION) {
            st = pl_fail(msg, len, PL_ERR_SCHEMA_NEWER,
                         "%s has schema version %d, newer than this placer's %d; use a newer placer", path,
                         version, PROFILE_DB_SCHEMA_VERSION);
            goto out_close;
        }
        if (version < 0 && mode != PROFILE_DB_CREATE) {
            st = pl_fail(msg, len, PL_ERR_NOT_SQLITE,
                         "%s is an empty SQLite database, not a profile database", path);
            goto out_close;
        }
        if (version < PROFILE_DB_MIN_READ_VERSION && mode == PROFILE_DB_READ) {
            st = pl_fail(msg, len, PL_ERR_INVALID,
                         "%s has the older schema version %d (this placer reads %d to %d); open it once for "
                         "writing to migrate it",
                         path, version, PROFILE_DB_MIN_READ_VERSION, PROFILE_DB_SCHEMA_VERSION);
            goto out_close;
        }
        db->opened_version = version;
        if (mode == PROFILE_DB_READ) {
            *out = db;
            return PL_OK;
        }
        sqlite3_close(db->h);
        db->h = NULL;
    } else {
        db->opened_version = -1;
    }

    int rc = sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READWRITE | (fresh && !exists ? SQLITE_OPEN_CREATE : 0),
                             NULL);
    if (rc != SQLITE_OK) {
        st = pl_fail(msg, len, PL_ERR_IO, "%s: cannot open for writing: %s", path,
                     db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
        goto out_close;
    }
    if (sqlite3_db_readonly(db->h, "main") == 1) {
        st = pl_fail(msg, len, PL_ERR_IO, "%s is not writable; check its permissions or open it read-only", path);
        goto out_close;
    }
    sqlite3_busy_timeout(db->h, BUSY_TIMEOUT_MS);
    if ((st = exec_sql(db, "PRAGMA foreign_keys = ON", "enabling foreign keys")) != PL_OK) goto out_close_msg;
    {
        sqlite3_stmt *s = NULL;
        rc = sqlite3_prepare_v2(db->h, "PRAGMA journal_mode = WAL", -1, &s, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_step(s);
        int ok = rc == SQLITE_ROW && !strcmp(col_text(s, 0), "wal");
        if (!ok) sql_fail(db, "switching to WAL");
        sqlite3_finalize(s);
        if (!ok) {
            st = PL_ERR_DB;
            goto out_close_msg;
        }
    }
    if ((st = exec_sql(db, "PRAGMA synchronous = NORMAL", "setting synchronous")) != PL_OK) goto out_close_msg;
    if ((st = migrate(db)) != PL_OK) goto out_close_msg;
    *out = db;
    return PL_OK;

out_close_msg:
    to_msg(db, st, msg, len);
out_close:
    if (db->h) sqlite3_close(db->h);
    db->h = NULL;
    if (fresh && !exists) remove_created(path);
    free(db->path);
    free(db);
    return st;
}

void profile_db_close(profile_db *db) {
    if (!db) return;
    for (int i = 0; i < N_STMT; i++) sqlite3_finalize(db->stmt[i]);
    if (db->h && !sqlite3_get_autocommit(db->h)) sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db->h);
    free(db->path);
    free(db);
}

const char *profile_db_last_error(const profile_db *db) { return db ? db->err : ""; }

int profile_db_opened_version(const profile_db *db) { return db ? db->opened_version : -1; }

struct sqlite3 *profile_db_handle(profile_db *db) { return db ? db->h : NULL; }

pl_status profile_db_begin(profile_db *db) {
    if (db->mode == PROFILE_DB_READ) return db_fail(db, PL_ERR_INVALID, "%s: opened read-only", db->path);
    if (db->in_tx || !sqlite3_get_autocommit(db->h))
        return db_fail(db, PL_ERR_INVALID, "%s: a transaction is already open", db->path);
    pl_status st = exec_sql(db, "BEGIN IMMEDIATE", "beginning a transaction");
    if (st == PL_OK) db->in_tx = 1;
    return st;
}

pl_status profile_db_commit(profile_db *db) {
    if (!db->in_tx) return db_fail(db, PL_ERR_INVALID, "%s: no transaction is open", db->path);
    pl_status st = exec_sql(db, "COMMIT", "committing");
    if (st != PL_OK) {
        char keep[sizeof db->err];
        memcpy(keep, db->err, sizeof keep);
        if (!sqlite3_get_autocommit(db->h)) exec_sql(db, "ROLLBACK", "rolling back");
        memcpy(db->err, keep, sizeof keep);
    }
    db->in_tx = 0;
    return st;
}

pl_status profile_db_rollback(profile_db *db) {
    if (!db->in_tx) return db_fail(db, PL_ERR_INVALID, "%s: no transaction is open", db->path);
    db->in_tx = 0;
    if (sqlite3_get_autocommit(db->h)) return PL_OK; /* SQLite already rolled back after an error */
    return exec_sql(db, "ROLLBACK", "rolling back");
}

pl_status profile_db_make_portable(profile_db *db, char *msg, size_t len) {
    if (db->mode == PROFILE_DB_READ)
        return to_msg(db, db_fail(db, PL_ERR_INVALID, "%s: opened read-only", db->path), msg, len);
    if (db->in_tx || !sqlite3_get_autocommit(db->h))
        return to_msg(db, db_fail(db, PL_ERR_INVALID, "%s: a transaction is open", db->path), msg, len);
    pl_status st = exec_sql(db, "PRAGMA wal_checkpoint(TRUNCATE)", "checkpointing");
    if (st != PL_OK) return to_msg(db, st, msg, len);
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->h, "PRAGMA journal_mode = DELETE", -1, &s, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) st = sql_fail(db, "switching to a rollback journal");
    else if (strcmp(col_text(s, 0), "delete") != 0)
        st = db_fail(db, PL_ERR_DB, "%s: still in %s mode; another connection holds the file", db->path,
                     col_text(s, 0));
    sqlite3_finalize(s);
    return to_msg(db, st, msg, len);
}

/* ---- machine, graph and id lookups ------------------------------------- */

/* Id of the file's (only) machine. PL_ERR_NOT_FOUND when none. */
pl_status file_machine_id(profile_db *db, int64_t *id) {
    sqlite3_stmt *s = stmt_get(db, S_MACHINE_FIRST);
    if (!s) return PL_ERR_DB;
    int rc = sqlite3_step(s);
    pl_status st = PL_OK;
    if (rc == SQLITE_ROW) *id = sqlite3_column_int64(s, 0);
    else if (rc == SQLITE_DONE) st = db_fail(db, PL_ERR_NOT_FOUND, "%s holds no machine profile yet", db->path);
    else st = sql_fail(db, "reading the machine");
    stmt_done(s);
    return st;
}

pl_status machine_id_by_name(profile_db *db, const char *name, int64_t *id) {
    if (!name || !*name) return db_fail(db, PL_ERR_INVALID, "%s: no machine name given", db->path);
    sqlite3_stmt *s = stmt_get(db, S_MACHINE_ID);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(s);
    pl_status st = PL_OK;
    if (rc == SQLITE_ROW) *id = sqlite3_column_int64(s, 0);
    else if (rc == SQLITE_DONE)
        st = db_fail(db, PL_ERR_NOT_FOUND, "%s holds no machine '%s'; put the machine first", db->path, name);
    else st = sql_fail(db, "looking up the machine");
    stmt_done(s);
    return st;
}

/* Id and node count of the graph of key. PL_ERR_NOT_FOUND when absent. */
pl_status graph_id_by_key(profile_db *db, const char *key, int64_t *id, int *n_nodes) {
    if (!key || !*key) return db_fail(db, PL_ERR_INVALID, "%s: no graph key given", db->path);
    sqlite3_stmt *s = stmt_get(db, S_GRAPH_ID);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(s);
    pl_status st = PL_OK;
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(s, 0);
        if (n_nodes) *n_nodes = sqlite3_column_int(s, 1);
    } else if (rc == SQLITE_DONE) {
        st = db_fail(db, PL_ERR_NOT_FOUND, "%s holds no graph %s", db->path, key);
    } else {
        st = sql_fail(db, "looking up the graph");
    }
    stmt_done(s);
    return st;
}

/* Insert or update the machine (inside a write unit); *id gets its id. */
pl_status put_machine_in_tx(profile_db *db, const profile_machine_info *m, int64_t *id) {
    if (!m || !m->name || !*m->name || !m->source || !*m->source)
        return db_fail(db, PL_ERR_INVALID, "%s: a machine needs a name and a source", db->path);
    if (strlen(m->name) >= PROFILE_NAME_LEN)
        return db_fail(db, PL_ERR_INVALID, "%s: machine name '%s' is too long", db->path, m->name);
    sqlite3_stmt *s = stmt_get(db, S_MACHINE_FIRST);
    if (!s) return PL_ERR_DB;
    int rc = sqlite3_step(s);
    int64_t existing = -1;
    char name[PROFILE_NAME_LEN] = "";
    if (rc == SQLITE_ROW) {
        existing = sqlite3_column_int64(s, 0);
        col_text_copy(s, 1, name, sizeof name);
    }
    stmt_done(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sql_fail(db, "reading the machine");
    if (existing >= 0 && strcmp(name, m->name) != 0)
        return db_fail(db, PL_ERR_INVALID,
                       "%s holds machine '%s', not '%s'; a profile database holds one machine: use another file",
                       db->path, name, m->name);
    s = stmt_get(db, existing >= 0 ? S_MACHINE_UPDATE : S_MACHINE_INSERT);
    if (!s) return PL_ERR_DB;
    int i = 1;
    if (existing >= 0) sqlite3_bind_int64(s, i++, existing);
    else sqlite3_bind_text(s, i++, m->name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, i++, m->source, -1, SQLITE_TRANSIENT);
    bind_text_or_null(s, i++, m->host);
    bind_text_or_null(s, i++, m->driver);
    bind_text_or_null(s, i++, m->cuda);
    bind_text_or_null(s, i++, m->topology);
    pl_status st = step_done(db, s, "writing the machine");
    if (st != PL_OK) return st;
    *id = existing >= 0 ? existing : sqlite3_last_insert_rowid(db->h);
    return PL_OK;
}

pl_status put_device_in_tx(profile_db *db, int64_t mid, int idx, const profile_device *d) {
    sqlite3_stmt *s = stmt_get(db, S_DEVICE_PUT);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_int(s, 2, idx);
    sqlite3_bind_text(s, 3, d->name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 4, d->mem_bytes);
    sqlite3_bind_double(s, 5, d->peak_flops);
    sqlite3_bind_double(s, 6, d->mem_bw);
    sqlite3_bind_double(s, 7, d->launch_us);
    sqlite3_bind_int(s, 8, d->sm_count);
    return step_done(db, s, "writing a device");
}

pl_status put_link_in_tx(profile_db *db, int64_t mid, int src, int dst, double lat, double bw,
                         const char *kind) {
    sqlite3_stmt *s = stmt_get(db, S_LINK_PUT);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_int(s, 2, src);
    sqlite3_bind_int(s, 3, dst);
    sqlite3_bind_double(s, 4, isnan(lat) ? 0.0 : lat);
    sqlite3_bind_double(s, 5, isnan(bw) ? 0.0 : bw);
    bind_text_or_null(s, 6, kind);
    return step_done(db, s, "writing a link");
}

pl_status put_point_in_tx(profile_db *db, int64_t mid, int src, int dst, double bytes, double us,
                          double spread) {
    sqlite3_stmt *s = stmt_get(db, S_POINT_PUT);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_int(s, 2, src);
    sqlite3_bind_int(s, 3, dst);
    sqlite3_bind_double(s, 4, bytes);
    sqlite3_bind_double(s, 5, us);
    bind_double_or_null(s, 6, spread);
    return step_done(db, s, "writing a link point");
}

/* Insert or update graph g and replace its nodes. Node memory comes from mem
 * when given, else from the graph with no workspace. */
pl_status put_graph_in_tx(profile_db *db, const graph *g, const profile_node_mem *mem, int64_t *gid) {
    char key[PROFILE_NAME_LEN];
    gpt_config_key(&g->cfg, key, sizeof key);
    sqlite3_stmt *s = stmt_get(db, S_GRAPH_UPSERT);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(s, 2, g->cfg.vocab);
    sqlite3_bind_int(s, 3, g->cfg.d_model);
    sqlite3_bind_int(s, 4, g->cfg.n_heads);
    sqlite3_bind_int(s, 5, g->cfg.n_layers);
    sqlite3_bind_int(s, 6, g->cfg.seq_len);
    sqlite3_bind_int(s, 7, g->cfg.batch);
    sqlite3_bind_int(s, 8, g->n_nodes);
    sqlite3_bind_int64(s, 9, g->total_params);
    pl_status st = step_done(db, s, "writing the graph");
    if (st != PL_OK) return st;
    if ((st = graph_id_by_key(db, key, gid, NULL)) != PL_OK) return st;
    if (!(s = stmt_get(db, S_NODE_CLEAR))) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, *gid);
    if ((st = step_done(db, s, "clearing nodes")) != PL_OK) return st;
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        if (!(s = stmt_get(db, S_NODE_PUT))) return PL_ERR_DB;
        sqlite3_bind_int64(s, 1, *gid);
        sqlite3_bind_int(s, 2, i);
        sqlite3_bind_text(s, 3, n->name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 4, op_kind_name(n->kind), -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 5, n->params);
        sqlite3_bind_int64(s, 6, mem ? mem[i].param_bytes : graph_param_bytes(n));
        sqlite3_bind_int64(s, 7, mem ? mem[i].out_bytes_per_sample : n->out_bytes_per_sample);
        sqlite3_bind_int64(s, 8, mem ? mem[i].act_bytes_per_sample : n->act_bytes_per_sample);
        sqlite3_bind_int64(s, 9, mem ? mem[i].workspace_bytes : 0);
        sqlite3_bind_int64(s, 10, mem ? mem[i].fwd_workspace_bytes : 0);
        sqlite3_bind_int64(s, 11, mem ? mem[i].bwd_workspace_bytes : 0);
        if ((st = step_done(db, s, "writing a node")) != PL_OK) return st;
    }
    return PL_OK;
}

pl_status put_cost_in_tx(profile_db *db, int64_t mid, int64_t gid, int dev, int node, int ph, int mb,
                         double us, double spread, double b_us, double w_us) {
    sqlite3_stmt *s = stmt_get(db, S_COST_PUT);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_int64(s, 2, gid);
    sqlite3_bind_int(s, 3, dev);
    sqlite3_bind_int(s, 4, node);
    sqlite3_bind_text(s, 5, PHASE_TEXT[ph], -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 6, ph == PHASE_OPT ? 0 : mb);
    bind_double_or_null(s, 7, us);
    bind_double_or_null(s, 8, spread);
    bind_double_or_null(s, 9, ph == PHASE_BWD ? b_us : NAN);
    bind_double_or_null(s, 10, ph == PHASE_BWD ? w_us : NAN);
    return step_done(db, s, "writing a node cost");
}

pl_status profile_db_list_graphs(profile_db *db, profile_db_graph_info **out, int *n) {
    *out = NULL;
    *n = 0;
    int64_t mid = -1;
    pl_status st = file_machine_id(db, &mid);
    if (st != PL_OK && st != PL_ERR_NOT_FOUND) return st;
    sqlite3_stmt *s = stmt_get(db, S_GRAPH_LIST);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    int cap = 0, rc;
    profile_db_graph_info *a = NULL;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 4;
            profile_db_graph_info *g = realloc(a, sizeof *a * (size_t)cap);
            if (!g) {
                stmt_done(s);
                free(a);
                *n = 0;
                return db_fail(db, PL_ERR_NOMEM, "out of memory listing graphs");
            }
            a = g;
        }
        profile_db_graph_info *g = &a[(*n)++];
        memset(g, 0, sizeof *g);
        col_text_copy(s, 0, g->key, sizeof g->key);
        g->cfg.vocab = sqlite3_column_int(s, 1);
        g->cfg.d_model = sqlite3_column_int(s, 2);
        g->cfg.n_heads = sqlite3_column_int(s, 3);
        g->cfg.n_layers = sqlite3_column_int(s, 4);
        g->cfg.seq_len = sqlite3_column_int(s, 5);
        g->cfg.batch = sqlite3_column_int(s, 6);
        g->n_nodes = sqlite3_column_int(s, 7);
        g->params = sqlite3_column_int64(s, 8);
        g->n_costs = sqlite3_column_int64(s, 9);
    }
    stmt_done(s);
    if (rc != SQLITE_DONE) {
        free(a);
        *n = 0;
        return sql_fail(db, "listing graphs");
    }
    *out = a;
    return PL_OK;
}

pl_status profile_db_machine(profile_db *db, profile_db_machine_row *out) {
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s = stmt_get(db, S_MACHINE_FIRST);
    if (!s) return PL_ERR_DB;
    int rc = sqlite3_step(s);
    pl_status st = PL_OK;
    if (rc == SQLITE_ROW) {
        col_text_copy(s, 1, out->name, sizeof out->name);
        col_text_copy(s, 2, out->source, sizeof out->source);
        col_text_copy(s, 3, out->created_at, sizeof out->created_at);
        col_text_copy(s, 4, out->host, sizeof out->host);
        col_text_copy(s, 5, out->driver, sizeof out->driver);
        col_text_copy(s, 6, out->cuda, sizeof out->cuda);
        col_text_copy(s, 7, out->topology, sizeof out->topology);
    } else if (rc == SQLITE_DONE) {
        st = db_fail(db, PL_ERR_NOT_FOUND, "%s holds no machine profile yet", db->path);
    } else {
        st = sql_fail(db, "reading the machine");
    }
    stmt_done(s);
    return st;
}

pl_status profile_db_set_precision(profile_db *db, const char *precision) {
    sqlite3_stmt *s = stmt_get(db, S_PREC_PUT);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_text(s, 1, precision, -1, SQLITE_TRANSIENT);
    pl_status st = sqlite3_step(s) == SQLITE_DONE ? PL_OK : sql_fail(db, "recording the precision");
    stmt_done(s);
    return st;
}

pl_status profile_db_precision(profile_db *db, char *buf, size_t len) {
    sqlite3_stmt *s = stmt_get(db, S_PREC_GET);
    if (!s) return PL_ERR_DB;
    int rc = sqlite3_step(s);
    pl_status st = PL_OK;
    if (rc == SQLITE_ROW) col_text_copy(s, 0, buf, len);
    else if (rc == SQLITE_DONE) snprintf(buf, len, "tf32");
    else st = sql_fail(db, "reading the precision");
    stmt_done(s);
    return st;
}

pl_status profile_db_link_kind(profile_db *db, int src, int dst, char *buf, size_t len) {
    if (buf && len) buf[0] = 0;
    int64_t mid;
    pl_status st = file_machine_id(db, &mid);
    if (st != PL_OK) return st;
    sqlite3_stmt *s = stmt_get(db, S_LINK_GET);
    if (!s) return PL_ERR_DB;
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_int(s, 2, src);
    sqlite3_bind_int(s, 3, dst);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        if (buf && len) col_text_copy(s, 2, buf, len);
    } else if (rc == SQLITE_DONE) {
        st = db_fail(db, PL_ERR_NOT_FOUND, "%s: no link %d -> %d", db->path, src, dst);
    } else {
        st = sql_fail(db, "reading a link");
    }
    stmt_done(s);
    return st;
}
