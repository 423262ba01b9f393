/*
 * framework_file.c: framework profiles as JSON files (framework_file.h).
 */
#include "framework_file.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_file.h"
#include "json_doc.h"
#include "moe_fit.h"

#define FRAMEWORK_FILE_MAX (1 << 20)


typedef struct {
    const char *key;
    double lo, hi;  /* allowed range, inclusive (lo_open: exclusive lower end) */
    int lo_open;
    size_t off;     /* offset of the double in framework_profile; (size_t)-1: handled apart */
} num_key;

static const num_key NUM_KEYS[] = {
    {"gemm_scale", 0, 1.35, 1, offsetof(framework_profile, k) + FW_K_GEMM * sizeof(double)},
    {"memory_scale", 0, 20, 1, offsetof(framework_profile, k) + FW_K_MEMORY * sizeof(double)},
    {"act_scale", 0, 20, 1, offsetof(framework_profile, k) + FW_K_ACT * sizeof(double)},
    {"logits_bytes", 0, 64, 0, offsetof(framework_profile, logits_bytes)},
    {"weight_copy_bytes", 0, 8, 0, offsetof(framework_profile, weight_copy_bytes)},
    {"reserve_factor", 1, 4, 0, offsetof(framework_profile, reserve_factor)},
    {"grad_accum_bytes", 0, 64, 0, offsetof(framework_profile, grad_accum_bytes)},
    {"step_fixed_ms", 0, 1e6, 0, (size_t)-1},
};
#define N_NUM_KEYS (sizeof NUM_KEYS / sizeof NUM_KEYS[0])

static const char *const TEXT_KEYS[] = {"name",     "attention",   "fp32_params", "grads_lazy",    "description",
                                        "sources",  "fit",         "moe_gemm",    "moe_permute",   "moe_fp32_gemm",
                                        "moe_warning", "overlap"};

/* The MoE keys and overlap (framework_file.h) into f. */
static pl_status parse_moe(json_t *root, framework_profile *f, char *msg, size_t len) {
    json_t *g = json_object_get(root, "moe_gemm");
    if (g) {
        const int i = json_is_string(g) ? moe_gemm_impl_from_name(json_string_value(g)) : -1;
        if (i < 0)
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "framework file: 'moe_gemm' must be \"torch_grouped_mm\", \"cublas_grouped\", \"cublas_loop\", "
                           "\"cublas_strided\" or \"cublas_fp8_loop\"");
        f->moe_gemm = i;
    }
    json_t *pm = json_object_get(root, "moe_permute");
    if (pm) {
        const char *v = json_is_string(pm) ? json_string_value(pm) : "";
        if (!strcmp(v, "fused")) f->moe_permute_fused = 1;
        else if (!strcmp(v, "torch")) f->moe_permute_fused = 0;
        else return pl_fail(msg, len, PL_ERR_INVALID, "framework file: 'moe_permute' must be \"fused\" or \"torch\"");
    }
    json_t *fg = json_object_get(root, "moe_fp32_gemm");
    if (fg) {
        if (!json_is_boolean(fg)) return pl_fail(msg, len, PL_ERR_INVALID, "framework file: 'moe_fp32_gemm' must be true or false");
        f->moe_fp32_gemm = json_is_true(fg);
    }
    json_t *w = json_object_get(root, "moe_warning");
    if (w) {
        if (!json_is_string(w) || json_string_length(w) >= FRAMEWORK_WARNING_LEN ||
            strlen(json_string_value(w)) != json_string_length(w) || strchr(json_string_value(w), '\n'))
            return pl_fail(msg, len, PL_ERR_INVALID,
                           "framework file: 'moe_warning' must be one line of at most %d characters", FRAMEWORK_WARNING_LEN - 1);
        snprintf(f->moe_warning, sizeof f->moe_warning, "%s", json_string_value(w));
    }
    json_t *o = json_object_get(root, "overlap");
    if (o) {
        if (!json_is_array(o)) return pl_fail(msg, len, PL_ERR_INVALID, "framework file: 'overlap' must be a list of \"ep\" and \"tp\"");
        unsigned bits = 0;
        size_t i;
        json_t *v;
        json_array_foreach(o, i, v) {
            const char *t = json_is_string(v) ? json_string_value(v) : "";
            if (!strcmp(t, "ep")) bits |= FW_OVERLAP_EP;
            else if (!strcmp(t, "tp")) bits |= FW_OVERLAP_TP;
            else return pl_fail(msg, len, PL_ERR_INVALID, "framework file: 'overlap' must be a list of \"ep\" and \"tp\"");
        }
        f->overlap = bits;
    }
    return PL_OK;
}

static pl_status parse_obj(json_t *root, framework_profile *f, char *msg, size_t len) {
    if (!json_is_object(root)) return pl_fail(msg, len, PL_ERR_INVALID, "framework file: the top level must be an object");
    const char *keys[N_NUM_KEYS + sizeof TEXT_KEYS / sizeof TEXT_KEYS[0] + 1];
    size_t nk = 0;
    for (size_t i = 0; i < N_NUM_KEYS; i++) keys[nk++] = NUM_KEYS[i].key;
    for (size_t i = 0; i < sizeof TEXT_KEYS / sizeof TEXT_KEYS[0]; i++) keys[nk++] = TEXT_KEYS[i];
    keys[nk] = NULL;
    pl_status st = json_only_keys(root, "framework file: ", "", keys, msg, len);
    if (st != PL_OK) return st;
    json_t *name = json_object_get(root, "name");
    if (!name) return pl_fail(msg, len, PL_ERR_INVALID, "framework file: missing 'name'");
    if (!json_is_string(name) || json_string_length(name) < 1 || json_string_length(name) >= FRAMEWORK_NAME_LEN)
        return pl_fail(msg, len, PL_ERR_INVALID, "framework file: 'name' must be a string of 1 to %d characters",
                       FRAMEWORK_NAME_LEN - 1);
    if (strlen(json_string_value(name)) != json_string_length(name))
        return pl_fail(msg, len, PL_ERR_INVALID, "framework file: 'name' holds a NUL character");
    snprintf(f->name, sizeof f->name, "%s", json_string_value(name));
    json_t *att = json_object_get(root, "attention");
    if (att) {
        const char *a = json_is_string(att) ? json_string_value(att) : "";
        if (!strcmp(a, "flash")) f->attention = ATTENTION_FLASH;
        else if (!strcmp(a, "unfused")) f->attention = ATTENTION_UNFUSED;
        else return pl_fail(msg, len, PL_ERR_INVALID, "framework file: 'attention' must be \"flash\" or \"unfused\"");
    }
    json_t *fp = json_object_get(root, "fp32_params");
    if (fp) {
        if (!json_is_boolean(fp)) return pl_fail(msg, len, PL_ERR_INVALID, "framework file: 'fp32_params' must be true or false");
        f->fp32_params = json_is_true(fp);
    }
    json_t *gl = json_object_get(root, "grads_lazy");
    if (gl) {
        if (!json_is_boolean(gl)) return pl_fail(msg, len, PL_ERR_INVALID, "framework file: 'grads_lazy' must be true or false");
        f->grads_lazy = json_is_true(gl);
    }
    json_t *d = json_object_get(root, "description");
    if (d && !json_is_string(d)) return pl_fail(msg, len, PL_ERR_INVALID, "framework file: 'description' must be a string");
    json_t *s = json_object_get(root, "sources");
    if (s && !json_is_object(s)) return pl_fail(msg, len, PL_ERR_INVALID, "framework file: 'sources' must be an object");
    json_t *fit = json_object_get(root, "fit");
    if (fit && !json_is_object(fit)) return pl_fail(msg, len, PL_ERR_INVALID, "framework file: 'fit' must be an object");
    if ((st = parse_moe(root, f, msg, len)) != PL_OK) return st;
    for (size_t i = 0; i < N_NUM_KEYS; i++) {
        const num_key *nk = &NUM_KEYS[i];
        json_t *x = json_object_get(root, nk->key);
        if (!x) continue;
        double val = json_is_number(x) ? json_number_value(x) : NAN;
        int ok = isfinite(val) && (nk->lo_open ? val > nk->lo : val >= nk->lo) && val <= nk->hi;
        if (ok && !strcmp(nk->key, "logits_bytes") && val > 0 && val < 1) ok = 0;
        if (!ok)
            return pl_fail(msg, len, PL_ERR_INVALID, "framework file: '%s' must be a number in %s%g, %g]", nk->key,
                           nk->lo_open ? "(" : "[", nk->lo, nk->hi);
        if (nk->off == (size_t)-1) f->step_fixed_us = val * 1e3;
        else *(double *)((char *)f + nk->off) = val;
    }
    return PL_OK;
}

pl_status framework_parse_json(const char *text, size_t n, framework_profile *out, char *msg, size_t len) {
    if (!out) return pl_fail(msg, len, PL_ERR_INVALID, "framework_parse_json: NULL argument");
    json_t *root = NULL;
    pl_status st = json_doc_parse(text, n, "framework file", &root, msg, len);
    if (st != PL_OK) return st;
    framework_profile f;
    framework_default(&f);
    st = parse_obj(root, &f, msg, len);
    json_decref(root);
    if (st == PL_OK) *out = f;
    return pl_one_line(st, msg, len);
}

static pl_status read_framework(const char *text, size_t n, void *out, char *msg, size_t len) {
    return framework_parse_json(text, n, out, msg, len);
}

pl_status framework_load(const char *name_or_path, framework_profile *out, char *msg, size_t len) {
    if (!name_or_path || !out) return pl_fail(msg, len, PL_ERR_INVALID, "framework_load: NULL argument");
    if (data_is_path(name_or_path))
        return json_doc_load(name_or_path, FRAMEWORK_FILE_MAX, "framework", read_framework, out, NULL, msg, len);
    if (!strcmp(name_or_path, "megatron")) {
        framework_default(out);
        return PL_OK;
    }
    data_dirs d;
    data_dirs_of("PLACER_FRAMEWORKS", "frameworks", &d);
    char path[8192];
    const size_t n = strlen(name_or_path);
    if (n <= 4000 && data_name_ok(name_or_path, n) && data_find(&d, name_or_path, n, path, sizeof path))
        return json_doc_load(path, FRAMEWORK_FILE_MAX, "framework", read_framework, out, NULL, msg, len);
    return pl_one_line(pl_fail(msg, len, PL_ERR_NOT_FOUND,
                               "unknown framework '%.60s' (megatron, torchtitan, hf, or a profile file path)",
                               name_or_path),
                       msg, len);
}

pl_status framework_write_json(const framework_profile *f, const char *description, const char *fit_json,
                               const char *path, char *msg, size_t len) {
    FILE *fp = fopen(path, "w");
    if (!fp) return pl_fail(msg, len, PL_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    json_t *root = json_object();
    json_object_set_new(root, "name", json_string(f->name));
    if (description) json_object_set_new(root, "description", json_string(description));
    json_object_set_new(root, "attention", json_string(f->attention == ATTENTION_UNFUSED ? "unfused" : "flash"));
    for (int i = 0; i < FW_K_COUNT; i++) json_object_set_new(root, framework_const_name((framework_const)i), json_real(f->k[i]));
    json_object_set_new(root, "logits_bytes", json_real(f->logits_bytes));
    json_object_set_new(root, "weight_copy_bytes", json_real(f->weight_copy_bytes));
    json_object_set_new(root, "fp32_params", json_boolean(f->fp32_params));
    json_object_set_new(root, "grads_lazy", json_boolean(f->grads_lazy));
    json_object_set_new(root, "reserve_factor", json_real(f->reserve_factor));
    json_object_set_new(root, "step_fixed_ms", json_real(f->step_fixed_us / 1e3));
    if (f->grad_accum_bytes > 0) json_object_set_new(root, "grad_accum_bytes", json_real(f->grad_accum_bytes));
    if (f->moe_gemm >= 0) json_object_set_new(root, "moe_gemm", json_string(moe_gemm_impl_name((moe_gemm_impl)f->moe_gemm)));
    if (f->moe_permute_fused >= 0) json_object_set_new(root, "moe_permute", json_string(f->moe_permute_fused ? "fused" : "torch"));
    if (f->moe_fp32_gemm) json_object_set_new(root, "moe_fp32_gemm", json_true());
    if (f->moe_warning[0]) json_object_set_new(root, "moe_warning", json_string(f->moe_warning));
    if (f->overlap != FW_OVERLAP_EP) {
        json_t *o = json_array();
        if (f->overlap & FW_OVERLAP_EP) json_array_append_new(o, json_string("ep"));
        if (f->overlap & FW_OVERLAP_TP) json_array_append_new(o, json_string("tp"));
        json_object_set_new(root, "overlap", o);
    }
    if (fit_json) {
        json_error_t e;
        json_t *fit = json_loads(fit_json, 0, &e);
        if (fit) json_object_set_new(root, "fit", fit);
    }
    int rc = json_dumpf(root, fp, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(root);
    fputc('\n', fp);
    if (fclose(fp) != 0 || rc != 0) return pl_fail(msg, len, PL_ERR_IO, "writing '%s' failed", path);
    return PL_OK;
}
