/*
 * expert_model_file.c: the learned expert placer's parameter files
 * (expert_model_file.h).
 */
#include "expert_model_file.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "data_file.h"
#include "json_doc.h"
#include "util.h"

static const char *const KEYS[] = {"name", "description", "training", "w", "scen_weight", "copies_scale", "mu", NULL};

static pl_status read_vec(json_t *root, const char *key, int n, double lo, double *out, char *msg, size_t len) {
    json_t *v = json_object_get(root, key);
    if (!v) return pl_fail(msg, len, PL_ERR_INVALID, "missing '%s'", key);
    if (!json_is_array(v) || (int)json_array_size(v) != n)
        return pl_fail(msg, len, PL_ERR_INVALID, "'%s' must be an array of %d numbers", key, n);
    for (int i = 0; i < n; i++) {
        json_t *x = json_array_get(v, (size_t)i);
        if (!json_is_number(x) || !isfinite(json_number_value(x)) || json_number_value(x) < lo ||
            fabs(json_number_value(x)) > 1e6)
            return pl_fail(msg, len, PL_ERR_INVALID, "'%s'[%d] must be a number%s", key, i, lo > -1e300 ? " >= 0" : "");
        out[i] = json_number_value(x);
    }
    return PL_OK;
}

pl_status expert_model_parse(const char *text, size_t n, expert_model_params *out, char *msg, size_t len) {
    json_t *root = NULL;
    pl_status st = json_doc_parse(text, n, "expert placer model", &root, msg, len);
    if (st != PL_OK) return st;
    expert_model_params m;
    memset(&m, 0, sizeof m);
    if (!json_is_object(root)) st = pl_fail(msg, len, PL_ERR_INVALID, "the top level must be an object");
    if (st == PL_OK) st = json_only_keys(root, "", "", KEYS, msg, len);
    if (st == PL_OK) st = read_vec(root, "w", EXPERT_MODEL_FEATURES, -1e300, m.w, msg, len);
    if (st == PL_OK) st = read_vec(root, "scen_weight", EXPERT_MODEL_HISTORY, 0.0, m.scen_weight, msg, len);
    double cs = 1.0, mu = -1.0;
    json_t *cv = json_is_object(root) ? json_object_get(root, "copies_scale") : NULL;
    json_t *mv = json_is_object(root) ? json_object_get(root, "mu") : NULL;
    if (st == PL_OK && cv) {
        if (!json_is_number(cv) || !(json_number_value(cv) >= 0) || json_number_value(cv) > 1e6)
            st = pl_fail(msg, len, PL_ERR_INVALID, "'copies_scale' must be a number 0..1e6");
        else
            cs = json_number_value(cv);
    }
    if (st == PL_OK && mv) {
        if (!json_is_number(mv) || fabs(json_number_value(mv)) > 1e9)
            st = pl_fail(msg, len, PL_ERR_INVALID, "'mu' must be a number");
        else
            mu = json_number_value(mv);
    }
    if (st == PL_OK) {
        double sw = 0;
        for (int i = 0; i < EXPERT_MODEL_HISTORY; i++) sw += m.scen_weight[i];
        if (!(sw > 0)) st = pl_fail(msg, len, PL_ERR_INVALID, "'scen_weight' needs a positive entry");
    }
    json_decref(root);
    if (st != PL_OK) return pl_one_line(st, msg, len);
    m.copies_scale = cs;
    m.mu = mu;
    *out = m;
    return PL_OK;
}

static pl_status read_model(const char *text, size_t n, void *out, char *msg, size_t len) {
    return expert_model_parse(text, n, out, msg, len);
}

pl_status expert_model_load(const char *name_or_path, expert_model_params *out, char *msg, size_t len) {
    if (!name_or_path || !*name_or_path) return pl_fail(msg, len, PL_ERR_INVALID, "no expert placer model named");
    char found[4200];
    data_dirs d;
    data_dirs_of("PLACER_EXPERTS", "experts", &d);
    const char *path = data_shipped_path(&d, name_or_path, found, sizeof found);
    if (!path) return pl_fail(msg, len, PL_ERR_NOT_FOUND, "no expert placer model '%s' in data/experts", name_or_path);
    return json_doc_load(path, 1 << 20, "expert placer model", read_model, out, NULL, msg, len);
}

pl_status expert_model_write(const expert_model_params *m, const char *name, const char *description,
                             const char *training, FILE *f) {
    fprintf(f, "{\n  \"name\": ");
    pl_json_string(f, name ? name : "learned");
    if (description) fprintf(f, ",\n  \"description\": "), pl_json_string(f, description);
    if (training) fprintf(f, ",\n  \"training\": "), pl_json_string(f, training);
    fprintf(f, ",\n  \"w\": [");
    for (int i = 0; i < EXPERT_MODEL_FEATURES; i++) fprintf(f, "%s%.6g", i ? ", " : "", m->w[i]);
    fprintf(f, "],\n  \"scen_weight\": [");
    for (int i = 0; i < EXPERT_MODEL_HISTORY; i++) fprintf(f, "%s%.6g", i ? ", " : "", m->scen_weight[i]);
    fprintf(f, "],\n  \"copies_scale\": %.6g,\n  \"mu\": %.6g\n}\n", m->copies_scale, m->mu);
    return ferror(f) ? PL_ERR_IO : PL_OK;
}
