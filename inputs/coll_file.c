/*
 * coll_file.c: collectives files (coll_file.h) read with jansson and
 * written by hand, every number with 17 significant digits so that a file
 * written and read back gives the same model.
 */
#include "coll_file.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "json_doc.h"
#include "util.h"

static const char *const KIND_TEXT[COLL_KIND_COUNT] = {"all_reduce", "all_gather", "reduce_scatter"};

const char *coll_file_kind_name(coll_kind k) { return k >= 0 && k < COLL_KIND_COUNT ? KIND_TEXT[k] : "?"; }

static int kind_by_name(const char *s) {
    for (int k = 0; k < COLL_KIND_COUNT; k++)
        if (!strcmp(s, KIND_TEXT[k])) return k;
    return -1;
}

/* Keys of obj must be among the NULL-terminated list; else one message naming the first stray key. */
static pl_status only_keys(json_t *obj, const char *path, const char *const *keys, char *msg, size_t len) {
    return json_only_keys(obj, "", path, keys, msg, len);
}

static pl_status get_number(json_t *obj, const char *path, const char *key, double *out, char *msg, size_t len) {
    json_t *v = json_object_get(obj, key);
    if (!v) return pl_fail(msg, len, PL_ERR_INVALID, "'%s.%s' is missing", path, key);
    if (!json_is_number(v)) return pl_fail(msg, len, PL_ERR_INVALID, "'%s.%s' must be a number", path, key);
    *out = json_number_value(v);
    if (!isfinite(*out)) return pl_fail(msg, len, PL_ERR_INVALID, "'%s.%s' must be finite", path, key);
    return PL_OK;
}

static pl_status parse_kinds(json_t *kinds, coll_measured *m, char *msg, size_t len) {
    if (!json_is_object(kinds)) return pl_fail(msg, len, PL_ERR_INVALID, "'kinds' must be an object");
    if (json_object_size(kinds) == 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "'kinds' is empty; give all_reduce, all_gather or reduce_scatter");
    const char *key;
    json_t *v;
    json_object_foreach(kinds, key, v) {
        int k = kind_by_name(key);
        if (k < 0)
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "unknown key 'kinds.%.64s' (all_reduce, all_gather, reduce_scatter)", key);
        char path[96];
        snprintf(path, sizeof path, "kinds.%s", key);
        if (!json_is_object(v)) return pl_fail(msg, len, PL_ERR_INVALID, "'%s' must be an object", path);
        static const char *const keys[] = {"base_us", "alpha_us", "busbw_gb_s", "fit", NULL};
        pl_status st = only_keys(v, path, keys, msg, len);
        if (st != PL_OK) return st;
        coll_ab *a = &m->model[k];
        double gbs;
        if ((st = get_number(v, path, "base_us", &a->base_us, msg, len)) != PL_OK ||
            (st = get_number(v, path, "alpha_us", &a->alpha_us, msg, len)) != PL_OK ||
            (st = get_number(v, path, "busbw_gb_s", &gbs, msg, len)) != PL_OK)
            return st;
        if (a->base_us < 0 || a->alpha_us < 0)
            return pl_fail(msg, len, PL_ERR_INVALID, "'%s': base_us and alpha_us must be >= 0", path);
        if (!(gbs > 0)) return pl_fail(msg, len, PL_ERR_INVALID, "'%s.busbw_gb_s' must be positive", path);
        a->busbw = gbs * 1e9;
        a->fitted = 1;
        json_t *fit = json_object_get(v, "fit");
        if (fit && !json_is_object(fit)) return pl_fail(msg, len, PL_ERR_INVALID, "'%s.fit' must be an object", path);
    }
    return PL_OK;
}

static pl_status parse_array(json_t *a, const char *path, double *out, int *n, char *msg, size_t len) {
    if (!json_is_array(a)) return pl_fail(msg, len, PL_ERR_INVALID, "'%s' must be an array of numbers", path);
    size_t sz = json_array_size(a);
    if (sz > COLL_CURVE_MAX_POINTS)
        return pl_fail(msg, len, PL_ERR_INVALID, "'%s' has %zu points (at most %d)", path, sz, COLL_CURVE_MAX_POINTS);
    for (size_t i = 0; i < sz; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_number(v) || !isfinite(json_number_value(v)) || !(json_number_value(v) > 0))
            return pl_fail(msg, len, PL_ERR_INVALID, "'%s[%zu]' must be a positive number", path, i);
        out[i] = json_number_value(v);
    }
    *n = (int)sz;
    return PL_OK;
}

static pl_status parse_curves(json_t *curves, coll_measured *m, char *msg, size_t len) {
    if (!json_is_array(curves)) return pl_fail(msg, len, PL_ERR_INVALID, "'curves' must be an array");
    if (json_array_size(curves) > COLL_MAX_CURVES)
        return pl_fail(msg, len, PL_ERR_INVALID, "'curves' has %zu entries (at most %d)", json_array_size(curves),
                       COLL_MAX_CURVES);
    for (size_t i = 0; i < json_array_size(curves); i++) {
        json_t *c = json_array_get(curves, i);
        char path[64];
        snprintf(path, sizeof path, "curves[%zu]", i);
        if (!json_is_object(c)) return pl_fail(msg, len, PL_ERR_INVALID, "'%s' must be an object", path);
        static const char *const keys[] = {"kind", "ranks", "bytes", "us", NULL};
        pl_status st = only_keys(c, path, keys, msg, len);
        if (st != PL_OK) return st;
        coll_curve *cv = &m->curves[m->n_curves];
        json_t *k = json_object_get(c, "kind");
        if (!json_is_string(k) || kind_by_name(json_string_value(k)) < 0)
            return pl_fail(msg, len, PL_ERR_INVALID, "'%s.kind' must be all_reduce, all_gather or reduce_scatter",
                           path);
        cv->kind = (coll_kind)kind_by_name(json_string_value(k));
        json_t *r = json_object_get(c, "ranks");
        if (!json_is_integer(r) || json_integer_value(r) < 2 || json_integer_value(r) > 1024)
            return pl_fail(msg, len, PL_ERR_INVALID, "'%s.ranks' must be an integer in 2..1024", path);
        cv->ranks = (int)json_integer_value(r);
        char sub[80];
        int nb = 0, nu = 0;
        snprintf(sub, sizeof sub, "%s.bytes", path);
        if ((st = parse_array(json_object_get(c, "bytes"), sub, cv->bytes, &nb, msg, len)) != PL_OK) return st;
        snprintf(sub, sizeof sub, "%s.us", path);
        if ((st = parse_array(json_object_get(c, "us"), sub, cv->us, &nu, msg, len)) != PL_OK) return st;
        if (nb != nu)
            return pl_fail(msg, len, PL_ERR_INVALID, "'%s': %d sizes but %d times", path, nb, nu);
        if (nb < 2)
            return pl_fail(msg, len, PL_ERR_INVALID, "'%s' has %d point%s; a curve needs at least 2 sizes", path, nb,
                           nb == 1 ? "" : "s");
        cv->n = nb;
        m->n_curves++;
    }
    return PL_OK;
}

pl_status coll_file_parse(const char *text, size_t n, coll_measured *out, char *msg, size_t len) {
    if (!out) return pl_fail(msg, len, PL_ERR_INVALID, "coll_file_parse: NULL argument");
    json_t *root = NULL;
    pl_status st = json_doc_parse(text, n, "collectives file", &root, msg, len);
    if (st != PL_OK) return st;
    coll_measured *m = calloc(1, sizeof *m);
    st = PL_ERR_NOMEM;
    if (!m) goto out;
    st = PL_ERR_INVALID;
    if (!json_is_object(root)) {
        pl_fail(msg, len, st, "a collectives file is a JSON object");
        goto out;
    }
    static const char *const keys[] = {"format", "version", "source", "link", "model", "kinds", "curves", NULL};
    if ((st = only_keys(root, "", keys, msg, len)) != PL_OK) goto out;
    st = PL_ERR_INVALID;
    json_t *f = json_object_get(root, "format");
    if (!json_is_string(f) || strcmp(json_string_value(f), "placer-collectives")) {
        pl_fail(msg, len, st, "'format' must be \"placer-collectives\"");
        goto out;
    }
    json_t *ver = json_object_get(root, "version");
    if (!json_is_integer(ver) || json_integer_value(ver) != 1) {
        pl_fail(msg, len, st, "'version' must be 1");
        goto out;
    }
    json_t *src = json_object_get(root, "source");
    if (!json_is_string(src) || !json_string_value(src)[0]) {
        pl_fail(msg, len, st, "'source' must be a non-empty string saying where the figures come from");
        goto out;
    }
    snprintf(m->source, sizeof m->source, "%s", json_string_value(src));
    for (char *p = m->source; *p; p++)
        if ((unsigned char)*p < 0x20) *p = ' '; /* one line */
    json_t *link = json_object_get(root, "link");
    if (!json_is_string(link) || strcmp(json_string_value(link), "intra-node")) {
        pl_fail(msg, len, st, "'link' must be \"intra-node\" (curves are measured between processes of one host)");
        goto out;
    }
    json_t *model = json_object_get(root, "model");
    if (model && !json_is_string(model)) {
        pl_fail(msg, len, st, "'model' must be a string");
        goto out;
    }
    json_t *kinds = json_object_get(root, "kinds");
    if (!kinds) {
        pl_fail(msg, len, st, "'kinds' is missing (the fitted constants of each collective)");
        goto out;
    }
    if ((st = parse_kinds(kinds, m, msg, len)) != PL_OK) goto out;
    json_t *curves = json_object_get(root, "curves");
    if (curves && (st = parse_curves(curves, m, msg, len)) != PL_OK) goto out;
    char vm[256];
    if ((st = coll_measured_validate(m, vm, sizeof vm)) != PL_OK) {
        pl_fail(msg, len, st, "%s", vm);
        goto out;
    }
    *out = *m;
    st = PL_OK;
out:
    if (st == PL_ERR_NOMEM) pl_fail(msg, len, st, "out of memory reading a collectives file");
    free(m);
    json_decref(root);
    return pl_one_line(st, msg, len);
}

static pl_status read_coll(const char *text, size_t n, void *out, char *msg, size_t len) {
    return coll_file_parse(text, n, out, msg, len);
}

pl_status coll_file_load(const char *path, coll_measured *out, char *msg, size_t len) {
    return json_doc_load(path, COLL_FILE_MAX, "collectives", read_coll, out,
                         "placer calibrate --collectives --write FILE writes one", msg, len);
}

pl_status coll_file_write(FILE *f, const coll_measured *m, const char *const *fit_json) {
    if (!f || !m || coll_measured_validate(m, NULL, 0) != PL_OK || !m->source[0]) return PL_ERR_INVALID;
    fprintf(f, "{\n  \"format\": \"placer-collectives\",\n  \"version\": 1,\n  \"source\": ");
    pl_json_string(f, m->source);
    fprintf(f, ",\n  \"link\": \"intra-node\",\n  \"model\": \"t(S, n) = base_us + steps(n) * alpha_us + frac(n) * S / "
               "busbw; steps = 2(n-1) all_reduce, n-1 all_gather / reduce_scatter; frac = steps / n\",\n"
               "  \"kinds\": {");
    int first = 1;
    for (int k = 0; k < COLL_KIND_COUNT; k++) {
        const coll_ab *a = &m->model[k];
        if (!a->fitted) continue;
        fprintf(f, "%s\n    \"%s\": {\"base_us\": %.17g, \"alpha_us\": %.17g, \"busbw_gb_s\": %.17g", first ? "" : ",",
                KIND_TEXT[k], a->base_us, a->alpha_us, a->busbw / 1e9);
        if (fit_json && fit_json[k]) fprintf(f, ",\n      \"fit\": %s", fit_json[k]);
        fputc('}', f);
        first = 0;
    }
    fprintf(f, "\n  },\n  \"curves\": [");
    for (int i = 0; i < m->n_curves; i++) {
        const coll_curve *c = &m->curves[i];
        fprintf(f, "%s\n    {\"kind\": \"%s\", \"ranks\": %d,\n     \"bytes\": [", i ? "," : "", KIND_TEXT[c->kind],
                c->ranks);
        for (int j = 0; j < c->n; j++) fprintf(f, "%s%.17g", j ? ", " : "", c->bytes[j]);
        fprintf(f, "],\n     \"us\": [");
        for (int j = 0; j < c->n; j++) fprintf(f, "%s%.17g", j ? ", " : "", c->us[j]);
        fprintf(f, "]}");
    }
    fprintf(f, "\n  ]\n}\n");
    return ferror(f) ? PL_ERR_IO : PL_OK;
}
