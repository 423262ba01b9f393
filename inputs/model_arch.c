/*
 * model_arch.c: the architecture fields of a model file that the
 * simulators do not read (model_arch.h), for the exports.
 */
#include "model_arch.h"

#include <stdio.h>
#include <string.h>

#include "data_file.h"
#include "json_doc.h"

#define MODEL_ARCH_FILE_MAX (4u << 20)

static void arch_default(model_arch *a) {
    memset(a, 0, sizeof *a);
    a->topk_norm = -1;
}

/* A number under key (integer or real) into *out; 0 when absent, -1 with a
 * message when it is another JSON type. */
static int get_real(json_t *root, const char *key, double *out, char *msg, size_t len) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) {
        pl_fail(msg, len, PL_ERR_INVALID, "model config: '%s' is not a number", key);
        return -1;
    }
    *out = json_number_value(v);
    return 1;
}

pl_status model_arch_parse_json(const char *text, size_t n, model_arch *out, char *msg, size_t len) {
    json_t *root = NULL;
    pl_status st = json_doc_parse(text, n, "model config", &root, msg, len);
    if (st != PL_OK) return st;
    model_arch a;
    arch_default(&a);
    st = PL_ERR_INVALID;
    if (!json_is_object(root)) {
        pl_fail(msg, len, PL_ERR_INVALID, "model config: the top level is not a JSON object");
        goto out;
    }
    json_t *mt = json_object_get(root, "model_type");
    if (mt && !json_is_string(mt)) {
        pl_fail(msg, len, PL_ERR_INVALID, "model config: 'model_type' is not a string");
        goto out;
    }
    if (mt) snprintf(a.family, sizeof a.family, "%s", json_string_value(mt));
    static const char *const eps_keys[] = {"rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", NULL};
    int got = 0;
    for (int i = 0; eps_keys[i] && !got; i++)
        if ((got = get_real(root, eps_keys[i], &a.norm_eps, msg, len)) < 0) goto out;
    double v = 0;
    if (get_real(root, "rope_theta", &a.rope_theta, msg, len) < 0) goto out;
    if (get_real(root, "routed_scaling_factor", &a.router_scale, msg, len) < 0) goto out;
    if (get_real(root, "num_nextn_predict_layers", &v, msg, len) < 0) goto out;
    a.mtp_layers = v > 0 && v < 1e6 ? (int)v : 0;
    json_t *tn = json_object_get(root, "norm_topk_prob");
    if (tn && json_is_boolean(tn)) a.topk_norm = json_is_true(tn);
    a.rope_scaling = json_is_object(json_object_get(root, "rope_scaling"));
    a.qk_norm = !strcmp(a.family, "qwen3") || !strcmp(a.family, "qwen3_moe") || !strcmp(a.family, "olmo2");
    if (a.rope_theta < 0 || a.norm_eps < 0 || a.router_scale < 0) {
        pl_fail(msg, len, PL_ERR_INVALID, "model config: rope_theta, the norm's epsilon and routed_scaling_factor "
                                          "must not be negative");
        goto out;
    }
    *out = a;
    st = PL_OK;
out:
    json_decref(root);
    return st;
}

static pl_status read_arch(const char *text, size_t n, void *out, char *msg, size_t len) {
    return model_arch_parse_json(text, n, out, msg, len);
}

pl_status model_arch_load(const char *path_or_preset, model_arch *out, char *msg, size_t len) {
    const char *s = path_or_preset && *path_or_preset ? path_or_preset : "default";
    const size_t n = strlen(s);
    if (n > 4000) return pl_fail(msg, len, PL_ERR_INVALID, "model name too long");
    char path[8192];
    const char *ov = strstr(s, ".json,");
    if (ov || data_is_path(s)) { /* a file, its overrides (shapes only) after ".json," dropped */
        const size_t pl = ov ? (size_t)(ov - s) + 5 : n;
        snprintf(path, sizeof path, "%.*s", (int)pl, s);
        return json_doc_load(path, MODEL_ARCH_FILE_MAX, "model", read_arch, out, NULL, msg, len);
    }
    const char *comma = strchr(s, ',');
    const size_t bl = comma ? (size_t)(comma - s) : n;
    if ((bl == 7 && !strncmp(s, "default", 7)) || (bl == 5 && !strncmp(s, "gpt12", 5)) ||
        (bl == 4 && !strncmp(s, "tiny", 4))) {
        arch_default(out);
        snprintf(out->family, sizeof out->family, "gpt");
        return PL_OK;
    }
    data_dirs d;
    data_dirs_of("PLACER_MODELS", "models", &d);
    if (!data_name_ok(s, bl) || !data_find(&d, s, bl, path, sizeof path))
        return pl_fail(msg, len, PL_ERR_NOT_FOUND, "unknown model '%.*s'", (int)(bl < 64 ? bl : 64), s);
    return json_doc_load(path, MODEL_ARCH_FILE_MAX, "model", read_arch, out, NULL, msg, len);
}
