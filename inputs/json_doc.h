/*
 * json_doc.h: what every JSON reader of inputs/ (model configs, cluster
 * files, framework profiles, collectives files) does alike: parse a text
 * into a document with one line for a syntax error, read a file and hand
 * its text to the reader with the path in front of any complaint, and
 * refuse keys a format does not know.
 */
#ifndef PLACER_INPUTS_JSON_DOC_H
#define PLACER_INPUTS_JSON_DOC_H

#include <jansson.h>
#include <stddef.h>

#include "status.h"

/* Parse n bytes of JSON text into *root (the caller json_decref's it); a
 * key twice in one object is refused. `what` names the document in
 * messages ("model config", "cluster file"). PL_ERR_INVALID "no WHAT text"
 * for NULL text, "WHAT is not valid JSON: TEXT (line L, column C)" (one
 * line) for bad syntax; PL_ERR_NOMEM "out of memory parsing a WHAT".
 * *root is NULL on failure. */
pl_status json_doc_parse(const char *text, size_t n, const char *what, json_t **root, char *msg, size_t len);

/* A reader of one format: n bytes of text into *out, one line in msg on
 * failure (framework_parse_json, cluster_parse_json, ...). */
typedef pl_status (*json_doc_reader)(const char *text, size_t n, void *out, char *msg, size_t len);

/* Read path (at most max_bytes; data_file_read's statuses and messages,
 * `what` naming the file there) and hand its text to read. A complaint of
 * read comes back as "PATH: MESSAGE", followed by " (HINT)" when hint is
 * not NULL (how to make a good file), with read's status. One line. */
pl_status json_doc_load(const char *path, size_t max_bytes, const char *what, json_doc_reader read, void *out,
                        const char *hint, char *msg, size_t len);

/* PL_OK when every key of the object obj is in allowed (NULL-terminated),
 * else PL_ERR_INVALID "PREFIXunknown key 'PATH.KEY'" (PATH "" at the top:
 * 'KEY'; the key cut to 60 bytes). prefix may be "" ("cluster file: "). */
pl_status json_only_keys(json_t *obj, const char *prefix, const char *path, const char *const *allowed, char *msg,
                         size_t len);

#endif
