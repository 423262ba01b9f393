/*
 * expert_map_file.c: expert placement files (expert_map_file.h): the slots
 * of EPLB / vLLM / SGLang, with the per-GPU loads placer experts adds.
 */
#include "expert_map_file.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data_file.h"
#include "json_doc.h"

#define MAP_FILE_MAX_BYTES ((size_t)256 << 20)

static const char *const MAP_KEYS[] = {"phy2log", "physical_to_logical_map", "log2phy", "logical_to_physical_map",
                                       "logcnt", "logical_replica_count", "gpus", "gpus_per_node", "gpu_load",
                                       "busiest_over_mean", "placer", "policy", "model", "cluster", "scores", "source",
                                       "description", "slots_per_gpu", NULL};

/* A [rows][cols] array of numbers into a new buffer; cols -1: any (taken from row 0). */
static pl_status read_matrix(json_t *v, const char *name, int rows, int *cols, double **out, char *msg, size_t len) {
    *out = NULL;
    if (!json_is_array(v) || (rows >= 0 && (int)json_array_size(v) != rows) || json_array_size(v) < 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "%s must be an array of %d rows (wrong shape)", name, rows);
    const int R = (int)json_array_size(v);
    json_t *r0 = json_array_get(v, 0);
    if (!json_is_array(r0) || json_array_size(r0) < 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "%s[0] must be a non-empty array (wrong shape)", name);
    const int C = *cols >= 0 ? *cols : (int)json_array_size(r0);
    if (C > EXPERT_MAP_MAX_SLOTS)
        return pl_fail(msg, len, PL_ERR_INVALID, "%s rows have more than %d entries", name, EXPERT_MAP_MAX_SLOTS);
    double *buf = malloc((size_t)R * C * sizeof *buf);
    if (!buf) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory reading %s", name);
    for (int i = 0; i < R; i++) {
        json_t *row = json_array_get(v, (size_t)i);
        if (!json_is_array(row) || (int)json_array_size(row) != C) {
            free(buf);
            return pl_fail(msg, len, PL_ERR_INVALID, "%s[%d] must have %d entries (wrong shape)", name, i, C);
        }
        for (int j = 0; j < C; j++) {
            json_t *x = json_array_get(row, (size_t)j);
            if (!json_is_number(x)) {
                free(buf);
                return pl_fail(msg, len, PL_ERR_INVALID, "%s[%d][%d] is not a number", name, i, j);
            }
            buf[(size_t)i * C + j] = json_number_value(x);
        }
    }
    *cols = C;
    *out = buf;
    return PL_OK;
}

static pl_status int_key(json_t *root, const char *key, int lo, int hi, int *out, char *msg, size_t len) {
    json_t *v = json_object_get(root, key);
    if (!v) return PL_OK;
    const double x = json_is_number(v) ? json_number_value(v) : -1e300;
    if (x != floor(x) || x < lo || x > hi)
        return pl_fail(msg, len, PL_ERR_INVALID, "'%s' must be an integer %d..%d", key, lo, hi);
    *out = (int)x;
    return PL_OK;
}

/* The derived views, when given, against the map's counts and slots. */
static pl_status check_views(json_t *root, const expert_map *m, char *msg, size_t len) {
    int *cnt = malloc((size_t)m->n_experts * sizeof *cnt);
    if (!cnt) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory checking a placement");
    pl_status st = PL_OK;
    for (int which = 0; which < 2 && st == PL_OK; which++) {
        const char *name = which ? "logical_replica_count" : "logcnt";
        json_t *v = json_object_get(root, name);
        if (!v) continue;
        int cols = m->n_experts;
        double *c = NULL;
        if ((st = read_matrix(v, name, m->n_layers, &cols, &c, msg, len)) != PL_OK) break;
        for (int l = 0; l < m->n_layers && st == PL_OK; l++) {
            expert_map_logcnt(m, l, cnt);
            for (int e = 0; e < m->n_experts; e++)
                if (c[(size_t)l * cols + e] != cnt[e]) {
                    st = pl_fail(msg, len, PL_ERR_INVALID, "%s[%d][%d] is %g but the slots hold %d replicas", name, l,
                                 e, c[(size_t)l * cols + e], cnt[e]);
                    break;
                }
        }
        free(c);
    }
    for (int which = 0; which < 2 && st == PL_OK; which++) {
        const char *name = which ? "logical_to_physical_map" : "log2phy";
        json_t *v = json_object_get(root, name);
        if (!v) continue;
        if (!json_is_array(v) || (int)json_array_size(v) != m->n_layers) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "%s must have %d layers (wrong shape)", name, m->n_layers);
            break;
        }
        for (int l = 0; l < m->n_layers && st == PL_OK; l++) {
            json_t *lv = json_array_get(v, (size_t)l);
            int cols = -1;
            double *x = NULL;
            if ((st = read_matrix(lv, name, m->n_experts, &cols, &x, msg, len)) != PL_OK) break;
            const int32_t *p = expert_map_layer_c(m, l);
            for (int e = 0; e < m->n_experts && st == PL_OK; e++)
                for (int j = 0; j < cols; j++) {
                    const double s = x[(size_t)e * cols + j];
                    if (s == -1) continue;
                    if (s != floor(s) || s < 0 || s >= m->n_slots || p[(int)s] != e) {
                        st = pl_fail(msg, len, PL_ERR_INVALID, "%s[%d][%d] names slot %g, which does not hold expert %d",
                                     name, l, e, s, e);
                        break;
                    }
                }
            free(x);
        }
    }
    free(cnt);
    return st;
}

static pl_status parse_root(json_t *root, expert_map_file *out, char *msg, size_t len) {
    if (!json_is_object(root)) return pl_fail(msg, len, PL_ERR_INVALID, "the top level must be an object");
    pl_status st = json_only_keys(root, "", "", MAP_KEYS, msg, len);
    if (st != PL_OK) return st;
    json_t *pv = json_object_get(root, "phy2log"), *sv = json_object_get(root, "physical_to_logical_map");
    if (pv && sv) return pl_fail(msg, len, PL_ERR_INVALID, "give one of 'phy2log' and 'physical_to_logical_map'");
    if (!pv) pv = sv;
    int gpus = 0, gpn = 0, spg = 0;
    if ((st = int_key(root, "gpus", 1, EXPERT_MAP_MAX_GPUS, &gpus, msg, len)) != PL_OK ||
        (st = int_key(root, "gpus_per_node", 1, EXPERT_MAP_MAX_GPUS, &gpn, msg, len)) != PL_OK ||
        (st = int_key(root, "slots_per_gpu", 1, EXPERT_MAP_MAX_SLOTS, &spg, msg, len)) != PL_OK)
        return st;
    int L = -1;
    if (pv) {
        int P = -1;
        double *x = NULL;
        if (!json_is_array(pv) || json_array_size(pv) < 1 || json_array_size(pv) > EXPERT_MAP_MAX_LAYERS)
            return pl_fail(msg, len, PL_ERR_INVALID, "the slots must be [layers][slots] with 1..%d layers (wrong shape)",
                           EXPERT_MAP_MAX_LAYERS);
        if ((st = read_matrix(pv, "phy2log", -1, &P, &x, msg, len)) != PL_OK) return st;
        L = (int)json_array_size(pv);
        int E = 0;
        for (size_t i = 0; i < (size_t)L * P; i++) {
            if (x[i] != floor(x[i]) || x[i] < 0 || x[i] >= EXPERT_MAP_MAX_EXPERTS) {
                const double bad = x[i];
                free(x);
                return pl_fail(msg, len, PL_ERR_INVALID, "phy2log[%zu][%zu] is %g, not an expert id 0..%d", i / (size_t)P,
                               i % (size_t)P, bad, EXPERT_MAP_MAX_EXPERTS - 1);
            }
            if ((int)x[i] + 1 > E) E = (int)x[i] + 1;
        }
        if (!gpus && spg) {
            if (P % spg) {
                free(x);
                return pl_fail(msg, len, PL_ERR_INVALID, "%d slots are not divisible by slots_per_gpu %d", P, spg);
            }
            gpus = P / spg;
        }
        if (!gpus) {
            free(x);
            return pl_fail(msg, len, PL_ERR_INVALID, "'gpus' is required with the slots (the expert-parallel size)");
        }
        if (!gpn) gpn = gpus;
        if ((st = expert_map_create(L, E, P, gpus, gpn, &out->map, msg, len)) != PL_OK) {
            free(x);
            return st;
        }
        for (size_t i = 0; i < (size_t)L * P; i++) out->map->phy2log[i] = (int32_t)x[i];
        free(x);
        if ((st = expert_map_validate(out->map, msg, len)) != PL_OK) return st;
        if ((st = check_views(root, out->map, msg, len)) != PL_OK) return st;
    } else {
        static const char *const views[] = {"log2phy", "logical_to_physical_map", "logcnt", "logical_replica_count"};
        for (int i = 0; i < 4; i++)
            if (json_object_get(root, views[i]))
                return pl_fail(msg, len, PL_ERR_INVALID, "'%s' without the slots (phy2log) cannot be checked", views[i]);
    }
    json_t *gv = json_object_get(root, "gpu_load"), *bv = json_object_get(root, "busiest_over_mean");
    if (!pv && !gv && !bv)
        return pl_fail(msg, len, PL_ERR_INVALID, "no placement: the file needs phy2log (or physical_to_logical_map), "
                                                 "gpu_load or busiest_over_mean");
    if (gv) {
        int G = gpus > 0 ? gpus : -1;
        const int rows = L > 0 ? L : (json_is_array(gv) ? (int)json_array_size(gv) : -1);
        if (rows < 1 || rows > EXPERT_MAP_MAX_LAYERS)
            return pl_fail(msg, len, PL_ERR_INVALID, "gpu_load must be [layers][gpus] (wrong shape)");
        if ((st = read_matrix(gv, "gpu_load", rows, &G, &out->gpu_load, msg, len)) != PL_OK) return st;
        if (G > EXPERT_MAP_MAX_GPUS) return pl_fail(msg, len, PL_ERR_INVALID, "gpu_load has more than %d GPUs", EXPERT_MAP_MAX_GPUS);
        for (size_t i = 0; i < (size_t)rows * G; i++)
            if (!(out->gpu_load[i] >= 0))
                return pl_fail(msg, len, PL_ERR_INVALID, "gpu_load[%zu][%zu] is %g; loads must be >= 0", i / (size_t)G,
                               i % (size_t)G, out->gpu_load[i]);
        L = rows;
        gpus = G;
    }
    if (bv) {
        const int rows = L > 0 ? L : (json_is_array(bv) ? (int)json_array_size(bv) : -1);
        if (!json_is_array(bv) || (int)json_array_size(bv) != rows || rows < 1 || rows > EXPERT_MAP_MAX_LAYERS)
            return pl_fail(msg, len, PL_ERR_INVALID, "busiest_over_mean must have one entry per MoE layer (%d) (wrong shape)",
                           rows);
        out->busiest_over_mean = malloc((size_t)rows * sizeof(double));
        if (!out->busiest_over_mean) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        for (int i = 0; i < rows; i++) {
            json_t *x = json_array_get(bv, (size_t)i);
            const double f = json_is_number(x) ? json_number_value(x) : 0;
            if (!(f >= 1.0) || f > 1e6)
                return pl_fail(msg, len, PL_ERR_INVALID, "busiest_over_mean[%d] must be a number >= 1, not %g", i, f);
            out->busiest_over_mean[i] = f;
        }
        L = rows;
    } else if (out->gpu_load) {
        out->busiest_over_mean = malloc((size_t)L * sizeof(double));
        if (!out->busiest_over_mean) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        for (int l = 0; l < L; l++) {
            double s = 0, mx = 0;
            for (int g = 0; g < gpus; g++) {
                const double v = out->gpu_load[(size_t)l * gpus + g];
                s += v;
                if (v > mx) mx = v;
            }
            out->busiest_over_mean[l] = s > 0 ? mx / (s / gpus) : 1.0;
        }
    }
    out->n_layers = L;
    out->n_gpus = gpus;
    return PL_OK;
}

pl_status expert_map_file_parse(const char *text, size_t n, expert_map_file *out, char *msg, size_t len) {
    if (!out) return pl_fail(msg, len, PL_ERR_INVALID, "expert_map_file_parse: no output");
    memset(out, 0, sizeof *out);
    json_t *root = NULL;
    pl_status st = json_doc_parse(text, n, "expert placement", &root, msg, len);
    if (st != PL_OK) return st;
    st = parse_root(root, out, msg, len);
    json_decref(root);
    if (st != PL_OK) expert_map_file_free(out);
    return pl_one_line(st, msg, len);
}

pl_status expert_map_file_read(const char *path, expert_map_file *out, char *msg, size_t len) {
    if (!out) return pl_fail(msg, len, PL_ERR_INVALID, "expert_map_file_read: no output");
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t n = 0;
    pl_status st = data_file_read(path, MAP_FILE_MAX_BYTES, "expert placement", &text, &n, msg, len);
    if (st != PL_OK) return st;
    char inner[400] = "";
    st = expert_map_file_parse(text, n, out, inner, sizeof inner);
    free(text);
    if (st != PL_OK) pl_fail(msg, len, st, "%s: %s (placer experts --out FILE writes one)", path, inner);
    return pl_one_line(st, msg, len);
}

void expert_map_file_free(expert_map_file *f) {
    if (!f) return;
    expert_map_destroy(f->map);
    free(f->gpu_load);
    free(f->busiest_over_mean);
    memset(f, 0, sizeof *f);
}
