/*
 * data_file.c: reading the small data files the readers of inputs/ take
 * (data_file.h): a whole file into memory, the directories searched for a
 * name, a name's file found, the shipped names listed.
 */
#include "data_file.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PLACER_SOURCE_DIR
#define PLACER_SOURCE_DIR "."
#endif

pl_status data_file_read(const char *path, size_t max_bytes, const char *what, char **out, size_t *n, char *msg,
                         size_t len) {
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return pl_fail(msg, len, errno == ENOENT ? PL_ERR_NOT_FOUND : PL_ERR_IO, "cannot read %s file '%s': %s", what,
                       path, strerror(errno));
    /* size the buffer by the file; a file that cannot seek (a pipe) gets the maximum */
    long want = -1;
    if (fseek(f, 0, SEEK_END) == 0) want = ftell(f);
    if (want < 0 || fseek(f, 0, SEEK_SET) != 0 || (size_t)want > max_bytes) want = (long)max_bytes;
    char *buf = malloc((size_t)want + 2);
    if (!buf) {
        fclose(f);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory reading '%s'", path);
    }
    size_t got = fread(buf, 1, (size_t)want + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return pl_fail(msg, len, PL_ERR_IO, "cannot read %s file '%s'", what, path);
    }
    if (got > (size_t)want || got > max_bytes) { /* grew while read, or over the limit */
        free(buf);
        return pl_fail(msg, len, PL_ERR_INVALID, "%s file '%s' is larger than %zu MB", what, path, max_bytes >> 20);
    }
    buf[got] = 0;
    *out = buf;
    *n = got;
    return PL_OK;
}

/* The names of dir's *.json files without the extension, sorted,
 * comma-separated into buf (may be NULL; truncated to len). Returns how many
 * there are (at most 128 are read); 0 when dir cannot be opened. */
static int list_json_names(const char *dir, char *buf, size_t len) {
    if (buf && len) buf[0] = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    char names[128][64];
    int nn = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) && nn < 128) {
        size_t l = strlen(ent->d_name);
        if (l < 6 || l - 5 >= sizeof names[0] || strcmp(ent->d_name + l - 5, ".json")) continue;
        memcpy(names[nn], ent->d_name, l - 5);
        names[nn][l - 5] = 0;
        nn++;
    }
    closedir(d);
    /* insertion sort: a few dozen names */
    for (int i = 1; i < nn; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char t[64];
            memcpy(t, names[j], sizeof t);
            memcpy(names[j], names[j - 1], sizeof t);
            memcpy(names[j - 1], t, sizeof t);
        }
    size_t off = 0;
    for (int i = 0; i < nn && buf; i++) {
        if (off >= len) break;
        int w = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", names[i]);
        if (w > 0) off += (size_t)w;
    }
    return nn;
}

void data_dirs_of(const char *env, const char *sub, data_dirs *d) {
    d->n = 0;
    const char *e = env ? getenv(env) : NULL;
    if (e && *e) d->dir[d->n++] = e;
    snprintf(d->source, sizeof d->source, "%s/data/%s", PLACER_SOURCE_DIR, sub);
    snprintf(d->local, sizeof d->local, "data/%s", sub);
    d->dir[d->n++] = d->source;
    d->dir[d->n++] = d->local;
}

int data_is_path(const char *s) {
    const size_t n = strlen(s);
    return strchr(s, '/') || (n >= 5 && !strcmp(s + n - 5, ".json"));
}

int data_name_ok(const char *s, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        if (!(c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
              (c >= 'A' && c <= 'Z')))
            return 0;
    }
    return 1;
}

int data_find(const data_dirs *d, const char *name, size_t n, char *path, size_t plen) {
    for (int i = 0; i < d->n; i++) {
        if (snprintf(path, plen, "%s/%.*s.json", d->dir[i], (int)n, name) >= (int)plen) continue;
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fclose(f);
        return 1;
    }
    return 0;
}

const char *data_shipped_path(const data_dirs *d, const char *name_or_path, char *found, size_t flen) {
    if (data_is_path(name_or_path)) return name_or_path;
    const size_t n = strlen(name_or_path);
    return data_name_ok(name_or_path, n) && data_find(d, name_or_path, n, found, flen) ? found : NULL;
}

int data_list(const data_dirs *d, char *buf, size_t len) {
    int count = 0;
    if (buf && len) buf[0] = 0;
    for (int i = 0; i < d->n && count == 0; i++) count = list_json_names(d->dir[i], buf, len);
    return count;
}
