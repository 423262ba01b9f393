/*
 * rel_helpers.h: running the built `placer` binary as a child process
 * (without a shell, so arguments may hold anything), temporary
 * directories, and reading databases through a separate read-only SQLite
 * connection, for the reliability tests (bad inputs, kill tests).
 *
 * PLACER_TEST_BIN overrides the binary under test (e.g. to run the
 * catalogue against a CUDA build on a machine without a GPU).
 */
#ifndef PLACER_TESTS_RELIABILITY_HELPERS_H
#define PLACER_TESTS_RELIABILITY_HELPERS_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline const char *rel_bin(void) {
    const char *b = getenv("PLACER_TEST_BIN");
    return b && *b ? b : PLACER_BIN;
}

static inline double rel_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A fresh directory under $TMPDIR or /tmp; dir holds 256 bytes. */
static inline void rel_mkdtemp(char *dir, const char *tag) {
    const char *t = getenv("TMPDIR");
    snprintf(dir, 256, "%s/placer-%s-XXXXXX", t && *t ? t : "/tmp", tag);
    cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}

static inline int rel_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static inline void rel_rmtree(const char *dir) { nftw(dir, rel_rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* Remove path and its -wal, -shm and -journal files. */
static inline void rel_remove_db(const char *path) {
    char side[600];
    remove(path);
    const char *sfx[] = {"-wal", "-shm", "-journal"};
    for (int i = 0; i < 3; i++) {
        snprintf(side, sizeof side, "%s%s", path, sfx[i]);
        remove(side);
    }
}

/* Read a whole file (NUL-terminated, malloc'd; *n its size). NULL when it
 * cannot be read. */
static inline char *rel_read(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, k = 0, got;
    char *b = malloc(cap);
    while (b && (got = fread(b + k, 1, cap - k - 1, f)) > 0) {
        k += got;
        if (k + 1 >= cap) b = realloc(b, cap *= 2);
    }
    fclose(f);
    if (!b) return NULL;
    b[k] = 0;
    if (n) *n = k;
    return b;
}

static inline void rel_copy(const char *from, const char *to) {
    size_t n = 0;
    char *b = rel_read(from, &n);
    cr_assert_not_null(b, "cannot read %s", from);
    FILE *f = fopen(to, "wb");
    cr_assert_not_null(f, "cannot write %s", to);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    fclose(f);
    free(b);
}

/* Start the binary with argv (argv[0] is the subcommand; NULL-terminated),
 * stdout and stderr into the given files (NULL: /dev/null). */
static inline pid_t rel_spawn(char *const *args, const char *out_path, const char *err_path) {
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)rel_bin();
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        int o = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err_path ? err_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0) _exit(126);
        dup2(o, 1);
        dup2(e, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* Wait for pid: its exit code, or -(signal) when a signal ended it. */
static inline int rel_wait(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return -WTERMSIG(status);
    return -1000;
}

/* Run to the end; stdout and stderr into malloc'd strings (either may be
 * NULL to drop it). Returns the exit code (or -signal). */
static inline int rel_run(char *const *args, char **out, char **err) {
    char of[] = "/tmp/placer-rel-out-XXXXXX", ef[] = "/tmp/placer-rel-err-XXXXXX";
    int a = mkstemp(of), b = mkstemp(ef);
    cr_assert(a >= 0 && b >= 0);
    close(a);
    close(b);
    int rc = rel_wait(rel_spawn(args, of, ef));
    if (out) *out = rel_read(of, NULL);
    if (err) *err = rel_read(ef, NULL);
    unlink(of);
    unlink(ef);
    return rc;
}

/* Every row of a query as lines of text, sorted (malloc'd array of *n
 * malloc'd strings; free with rel_rows_free). A missing file or table
 * gives no rows. Read through a read-only connection that waits for a
 * writer's lock. */
static inline int rel_cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static inline char **rel_rows(const char *path, const char *sql, int *n) {
    *n = 0;
    char **rows = NULL;
    int cap = 0;
    if (access(path, F_OK) != 0) return NULL;
    sqlite3 *h = NULL;
    if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(h);
        return NULL;
    }
    sqlite3_busy_timeout(h, 5000);
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK) {
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            char line[4096];
            size_t k = 0;
            line[0] = 0;
            for (int c = 0; c < sqlite3_column_count(s) && k < sizeof line; c++) {
                const unsigned char *v = sqlite3_column_text(s, c);
                k += (size_t)snprintf(line + k, sizeof line - k, "%s%s", c ? "|" : "", v ? (const char *)v : "NULL");
            }
            if (*n == cap) rows = realloc(rows, sizeof *rows * (size_t)(cap = cap ? 2 * cap : 256));
            rows[(*n)++] = strdup(line);
        }
        cr_assert_eq(rc, SQLITE_DONE, "reading %s: %s", path, sqlite3_errmsg(h));
    }
    sqlite3_finalize(s);
    sqlite3_close(h);
    if (*n > 1) qsort(rows, (size_t)*n, sizeof *rows, rel_cmp_str);
    return rows;
}

static inline void rel_rows_free(char **rows, int n) {
    for (int i = 0; i < n; i++) free(rows[i]);
    free(rows);
}

/* The first row of `before` missing from `after` (both sorted), or NULL. */
static inline const char *rel_rows_missing(char **before, int nb, char **after, int na) {
    int j = 0;
    for (int i = 0; i < nb; i++) {
        while (j < na && strcmp(after[j], before[i]) < 0) j++;
        if (j >= na || strcmp(after[j], before[i]) != 0) return before[i];
        j++;
    }
    return NULL;
}

/* PRAGMA integrity_check of path: 1 when "ok" (or the file is absent). */
static inline int rel_integrity_ok(const char *path, char *detail, size_t len) {
    if (access(path, F_OK) != 0) return 1;
    int n = 0;
    char **r = rel_rows(path, "PRAGMA integrity_check", &n);
    int ok = n == 1 && !strcmp(r[0], "ok");
    snprintf(detail, len, "%s", n ? r[0] : "(no answer)");
    rel_rows_free(r, n);
    return ok;
}

/* Seeded generator for the kill times (splitmix64). */
static inline uint64_t rel_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline double rel_uniform(uint64_t *s) { return (double)(rel_rand(s) >> 11) * (1.0 / 9007199254740992.0); }

/* Sleep for seconds (fractional). */
static inline void rel_sleep(double s) {
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

#endif
