/*
 * json_doc.c: parsing, loading and key checks shared by the JSON readers
 * (json_doc.h).
 */
#include "json_doc.h"

#include <stdlib.h>
#include <string.h>

#include "data_file.h"

pl_status json_doc_parse(const char *text, size_t n, const char *what, json_t **root, char *msg, size_t len) {
    *root = NULL;
    if (!text) return pl_fail(msg, len, PL_ERR_INVALID, "no %s text", what);
    json_error_t err;
    json_t *doc = json_loadb(text, n, JSON_REJECT_DUPLICATES, &err);
    /* jansson reports its own allocation failures as out_of_memory, except
     * the first (lex_init), which leaves the error text empty */
    if (!doc && (json_error_code(&err) == json_error_out_of_memory || !err.text[0]))
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory parsing a %s", what);
    if (!doc)
        return pl_one_line(pl_fail(msg, len, PL_ERR_INVALID, "%s is not valid JSON: %s (line %d, column %d)", what,
                                   err.text, err.line, err.column),
                           msg, len);
    *root = doc;
    return PL_OK;
}

pl_status json_doc_load(const char *path, size_t max_bytes, const char *what, json_doc_reader read, void *out,
                        const char *hint, char *msg, size_t len) {
    char *text = NULL;
    size_t n = 0;
    pl_status st = data_file_read(path, max_bytes, what, &text, &n, msg, len);
    if (st != PL_OK) return st;
    char m[512] = "";
    st = read(text, n, out, m, sizeof m);
    free(text);
    if (st != PL_OK) pl_fail(msg, len, st, "%s: %s%s%s%s", path, m, hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
    return pl_one_line(st, msg, len);
}

pl_status json_only_keys(json_t *obj, const char *prefix, const char *path, const char *const *allowed, char *msg,
                         size_t len) {
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        int ok = 0;
        for (int i = 0; allowed[i] && !ok; i++) ok = !strcmp(k, allowed[i]);
        if (!ok)
            return pl_one_line(pl_fail(msg, len, PL_ERR_INVALID, "%sunknown key '%s%s%.60s'", prefix, path,
                                       *path ? "." : "", k),
                               msg, len);
    }
    return PL_OK;
}
