/*
 * data_file.h: the small data files the readers of inputs/ take: a whole
 * file read into memory, and the shipped files found by name. A kind of
 * data (models, clusters, frameworks) lives in NAME.json files searched in
 * three directories, in order: the one an environment variable names
 * ($PLACER_MODELS, ...), the source tree's data/KIND (compiled in), and
 * ./data/KIND (a binary carried to another machine with its data).
 */
#ifndef PLACER_INPUTS_DATA_FILE_H
#define PLACER_INPUTS_DATA_FILE_H

#include <stddef.h>

#include "status.h"

/* Read a whole small file into a new NUL-terminated buffer that the caller
 * frees; *n gets its length. Files larger than max_bytes are refused.
 * `what` names the file in messages ("model", "cluster": "cannot read
 * model file 'PATH': ..."). PL_ERR_NOT_FOUND (no such file), PL_ERR_IO,
 * PL_ERR_NOMEM, PL_ERR_INVALID (too large); *out is NULL on failure. */
pl_status data_file_read(const char *path, size_t max_bytes, const char *what, char **out, size_t *n, char *msg,
                         size_t len);

/* The directories searched for one kind of data, in the order above. The
 * strings live in the struct (or the environment): keep it while dir[] is
 * used. */
typedef struct {
    int n;                  /* entries of dir, 2 or 3 */
    const char *dir[3];
    char source[4096];      /* the source tree's data/KIND */
    char local[64];         /* ./data/KIND, relative */
} data_dirs;

/* Fill *d for the kind whose folder is data/sub, env naming the variable
 * of a directory searched first (NULL: none). */
void data_dirs_of(const char *env, const char *sub, data_dirs *d);

/* 1 when s names a file rather than a shipped name: it holds a '/' or ends
 * in ".json". */
int data_is_path(const char *s);

/* 1 when the n bytes of s are a name a shipped file may have: letters,
 * digits, '-', '_' and '.', at least one. */
int data_name_ok(const char *s, size_t n);

/* Find NAME.json (name: n bytes) in d's directories, first match wins: 1
 * with its path in path, 0 when none holds one (or the path would not
 * fit plen). */
int data_find(const data_dirs *d, const char *name, size_t n, char *path, size_t plen);

/* The file name_or_path means: itself when it is a path (data_is_path),
 * else the path of its NAME.json found in d, written to found (flen
 * bytes); NULL when it is neither (a malformed name or none shipped). */
const char *data_shipped_path(const data_dirs *d, const char *name_or_path, char *found, size_t flen);

/* The shipped names of the first directory of d that has any *.json file,
 * sorted, comma-separated into buf (may be NULL; truncated to len).
 * Returns how many there are (at most 128 are read); 0 when none. */
int data_list(const data_dirs *d, char *buf, size_t len);

#endif
