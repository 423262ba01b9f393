/*
 * serve_request.c: reading a request body of `placer serve`
 * (serve_internal.h). A body is a JSON object with known keys only; names
 * go to the same loaders the commands use, but only as shipped names: the
 * loaders take a text holding '/' or ending in ".json" for a file path,
 * and the server refuses both, so no client names a file. A model may
 * instead come as a pasted config.json, written to a file of the server's
 * own private folder and read by the same loader.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "json_doc.h"
#include "util.h"
#include "serve_internal.h"

void serve_error(serve_reply *r, int status, const char *line) {
    memset(r, 0, sizeof *r);
    r->status = status;
    r->type = "application/json";
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) {
        r->static_body = "{\"error\": \"out of memory\"}\n";
        r->len = strlen(r->static_body);
        return;
    }
    char one[640];
    snprintf(one, sizeof one, "%s", line && *line ? line : "error");
    for (char *p = one; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    fputs("{\"error\": ", f);
    pl_json_string(f, one);
    fputs("}\n", f);
    fclose(f);
    r->body = buf;
    r->len = n;
}

void serve_json(serve_reply *r, char *buf, size_t len) {
    memset(r, 0, sizeof *r);
    r->status = 200;
    r->type = "application/json";
    r->body = buf;
    r->len = len;
}

int serve_status_of(pl_status st) { return cli_exit_code(st) == CLI_EXIT_USAGE ? 400 : 500; }

json_t *serve_body(const char *body, size_t n, const char *const *allowed, char *msg, size_t len) {
    json_t *root = NULL;
    if (n == 0 || !body) {
        snprintf(msg, len, "the request has no body: send a JSON object");
        return NULL;
    }
    if (json_doc_parse(body, n, "request", &root, msg, len) != PL_OK) return NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        snprintf(msg, len, "the request is not a JSON object");
        return NULL;
    }
    if (json_only_keys(root, "request: ", "", allowed, msg, len) != PL_OK) {
        json_decref(root);
        return NULL;
    }
    return root;
}

int serve_string(json_t *root, const char *key, size_t max, const char **out, char *msg, size_t len) {
    *out = NULL;
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) return snprintf(msg, len, "\"%s\" must be a string", key), -1;
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v)) return snprintf(msg, len, "\"%s\" holds a NUL byte", key), -1;
    if (json_string_length(v) > max)
        return snprintf(msg, len, "\"%s\" is longer than %zu bytes", key, max), -1;
    *out = s;
    return 1;
}

int serve_int(json_t *root, const char *key, long lo, long hi, long *out, char *msg, size_t len) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return snprintf(msg, len, "\"%s\" must be an integer in %ld..%ld", key, lo, hi), -1;
    *out = (long)json_integer_value(v);
    return 1;
}

int serve_shipped_name(const char *what, const char *text, char *msg, size_t len) {
    if (!*text) return snprintf(msg, len, "%s: empty name", what), 0;
    if (strchr(text, '/') || strchr(text, '\\') || strstr(text, ".json") || text[0] == '.' || text[0] == '~')
        return snprintf(msg, len, "%s '%.80s': give a shipped name, not a file path (paste a model's config.json "
                                  "text as \"config\")", what, text),
               0;
    for (const char *p = text; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
            return snprintf(msg, len, "%s: a name holds a control character", what), 0;
    return 1;
}

int serve_model(serve_ctx *c, json_t *root, char *path_buf, size_t path_len, const char **model, char *msg,
                size_t len) {
    const char *name = NULL, *config = NULL;
    path_buf[0] = 0;
    *model = NULL;
    if (serve_string(root, "model", 4000, &name, msg, len) < 0) return -1;
    if (serve_string(root, "config", SERVE_MAX_CONFIG, &config, msg, len) < 0) return -1;
    if (name && config) return snprintf(msg, len, "give \"model\" (a shipped name) or \"config\" (its text), not both"), -1;
    if (name) {
        if (!serve_shipped_name("model", name, msg, len)) return -1;
        *model = name;
        return 0;
    }
    if (!config) return snprintf(msg, len, "no model: give \"model\" (a shipped name or preset) or \"config\""), -1;
    if (snprintf(path_buf, path_len, "%s/config-XXXXXX.json", c->tmpdir) >= (int)path_len) {
        path_buf[0] = 0;
        return snprintf(msg, len, "temporary path too long"), -1;
    }
    int fd = mkstemps(path_buf, 5);
    if (fd < 0) {
        path_buf[0] = 0;
        return snprintf(msg, len, "cannot keep the pasted config: %s", strerror(errno)), -1;
    }
    const size_t n = strlen(config);
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, config + done, n - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    close(fd);
    if (done < n) {
        serve_model_done(path_buf);
        return snprintf(msg, len, "cannot keep the pasted config"), -1;
    }
    *model = path_buf;
    return 0;
}

void serve_model_done(char *path_buf) {
    if (path_buf && path_buf[0]) unlink(path_buf);
    if (path_buf) path_buf[0] = 0;
}

void serve_hide_path(char *msg, size_t len, const char *path) {
    if (!path || !*path) return;
    const size_t pl = strlen(path);
    static const char with[] = "pasted config";
    for (char *p = strstr(msg, path); p; p = strstr(p, path)) {
        const size_t tail = strlen(p + pl);
        if ((size_t)(p - msg) + sizeof with - 1 + tail >= len) break;
        memmove(p + sizeof with - 1, p + pl, tail + 1);
        memcpy(p, with, sizeof with - 1);
        p += sizeof with - 1;
    }
}

int serve_stack(json_t *root, cli_stack *s, int plans, char *msg, size_t len) {
    cli_stack_default(s);
    s->plans = plans;
    static const struct {
        const char *key;
        int code;
    } keys[] = {{"attention", CLI_OPT_ATTENTION}, {"framework", CLI_OPT_FRAMEWORK}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = NULL;
        int got = serve_string(root, keys[i].key, 200, &v, msg, len);
        if (got < 0) return -1;
        if (!got) continue;
        if (keys[i].code == CLI_OPT_FRAMEWORK && !serve_shipped_name("framework", v, msg, len)) return -1;
        if (cli_stack_set(s, keys[i].code, v, msg, len) != 0) return -1;
    }
    static const struct {
        const char *key;
        int code;
    } nums[] = {{"dp_overlap", CLI_OPT_DP_OVERLAP}, {"grad_bytes", CLI_OPT_GRAD_BYTES}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        long v = 0;
        int got = serve_int(root, nums[i].key, -1000, 1000, &v, msg, len);
        if (got < 0) return -1;
        if (!got) continue;
        char text[32];
        snprintf(text, sizeof text, "%ld", v);
        if (cli_stack_set(s, nums[i].code, text, msg, len) != 0) return -1;
    }
    return 0;
}
