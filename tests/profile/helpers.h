/*
 * helpers.h: temporary directories, whole-file reads and SQL on a file for
 * the profile tests. Every Criterion test runs in its own process, so each test makes
 * its own directory under $TMPDIR (or /tmp) and removes it at the end.
 */
#ifndef PLACER_TESTS_PROFILE_HELPERS_H
#define PLACER_TESTS_PROFILE_HELPERS_H

#include <ftw.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 1 when sub occurs in s (Criterion's cr_assert wants an int, not a pointer). */
static inline int th_has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

/* Make a fresh directory; dir must hold 256 bytes. Returns 0 on success. */
static inline int th_mkdtemp(char *dir) {
    const char *t = getenv("TMPDIR");
    snprintf(dir, 256, "%s/placer-profile-test-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(dir) ? 0 : -1;
}

static inline void th_path(char *out, size_t len, const char *dir, const char *name) {
    snprintf(out, len, "%s/%s", dir, name);
}

static inline int th_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

/* Remove dir and everything under it. */
static inline void th_rmtree(const char *dir) { nftw(dir, th_rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* Read a whole file into a malloc'd buffer (*size bytes; NULL when missing). */
static inline unsigned char *th_read(const char *path, size_t *size) {
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    unsigned char *b = malloc(cap);
    size_t got;
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            unsigned char *g = realloc(b, cap *= 2);
            if (!g) { free(b); b = NULL; }
            else b = g;
        }
    }
    fclose(f);
    *size = n;
    return b;
}

static inline int th_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t put = fwrite(data, 1, n, f);
    return (fclose(f) == 0 && put == n) ? 0 : -1;
}

static inline int th_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* 1 when path-suffix exists (e.g. "-wal"). */
static inline int th_side_exists(const char *path, const char *suffix) {
    char p[1024];
    snprintf(p, sizeof p, "%s%s", path, suffix);
    return th_exists(p);
}

/* Copy a file; 0 on success. */
static inline int th_copy(const char *from, const char *to) {
    size_t n;
    unsigned char *b = th_read(from, &n);
    if (!b) return -1;
    int rc = th_write(to, b, n);
    free(b);
    return rc;
}

/* Run SQL text on the database file at path (to make a damaged or older
 * file by hand): 0 on success, else -1 with SQLite's message on stderr. */
static inline int th_sql(const char *path, const char *text) {
    sqlite3 *h = NULL;
    char *e = NULL;
    int rc = sqlite3_open(path, &h);
    if (rc == SQLITE_OK) rc = sqlite3_exec(h, text, NULL, NULL, &e);
    if (rc != SQLITE_OK) fprintf(stderr, "th_sql %s: %s\n", path, e ? e : sqlite3_errmsg(h));
    sqlite3_free(e);
    sqlite3_close(h);
    return rc == SQLITE_OK ? 0 : -1;
}

#endif
