/*
 * cluster_file.c: cluster descriptions as JSON files (jansson), the format
 * of docs/clusters.md. Units in the file are the ones datasheets print
 * (TFLOP/s, GB/s per direction, Gb/s per adapter, GiB or MiB, us); this
 * file converts them to cluster.h's bytes, bytes/s and FLOP/s.
 *
 * Every object that carries figures (each GPU type, intra_node, inter_node,
 * collectives) must carry a non-empty "source" string saying where they
 * come from: a file without one is refused, so that no figure of a shipped
 * or user-written cluster is anonymous. Unknown keys are refused too (a
 * misspelt "nic_gbit_s" would otherwise silently read as absent).
 */
#include "cluster_file.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_file.h"
#include "json_doc.h"

#define CLUSTER_FILE_MAX (4 << 20)


typedef struct {
    char *msg;
    size_t len;
} errbuf;

static pl_status bad(errbuf *e, const char *fmt, const char *path, const char *what) {
    return pl_fail(e->msg, e->len, PL_ERR_INVALID, fmt, path, what);
}

/* Refuse keys of obj not in allowed (NULL-terminated). */
static pl_status only_keys(json_t *obj, const char *path, const char *const *allowed, errbuf *e) {
    return json_only_keys(obj, "cluster file: ", path, allowed, e->msg, e->len);
}

/* A number at obj[key]: 1 read, 0 absent (only when !required), else a
 * status in *st. */
static int get_num(json_t *obj, const char *path, const char *key, int required, double *out, errbuf *e,
                   pl_status *st) {
    json_t *v = json_object_get(obj, key);
    char full[160];
    snprintf(full, sizeof full, "%s%s%s", path, *path ? "." : "", key);
    if (!v) {
        if (!required) return 0;
        *st = bad(e, "cluster file: missing '%s'%s", full, "");
        return -1;
    }
    if (!json_is_number(v)) {
        *st = bad(e, "cluster file: '%s' must be a number%s", full, "");
        return -1;
    }
    double x = json_number_value(v);
    if (!isfinite(x) || x < 0) {
        *st = bad(e, "cluster file: '%s' must be a number >= 0%s", full, "");
        return -1;
    }
    *out = x;
    return 1;
}

static int get_count(json_t *obj, const char *path, const char *key, int required, long long lo, long long hi,
                     long long *out, errbuf *e, pl_status *st) {
    json_t *v = json_object_get(obj, key);
    char full[160];
    snprintf(full, sizeof full, "%s%s%s", path, *path ? "." : "", key);
    if (!v) {
        if (!required) return 0;
        *st = bad(e, "cluster file: missing '%s'%s", full, "");
        return -1;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char range[64];
        snprintf(range, sizeof range, " from %lld to %lld", lo, hi);
        *st = bad(e, "cluster file: '%s' must be an integer%s", full, range);
        return -1;
    }
    *out = json_integer_value(v);
    return 1;
}

/* obj[key] must be an object (required) or absent. */
static json_t *get_obj(json_t *obj, const char *path, const char *key, int required, errbuf *e, pl_status *st) {
    json_t *v = json_object_get(obj, key);
    char full[160];
    snprintf(full, sizeof full, "%s%s%s", path, *path ? "." : "", key);
    if (!v) {
        if (required) *st = bad(e, "cluster file: missing '%s'%s", full, "");
        return NULL;
    }
    if (!json_is_object(v)) {
        *st = bad(e, "cluster file: '%s' must be an object%s", full, "");
        return NULL;
    }
    return v;
}

static int get_string(json_t *obj, const char *path, const char *key, int required, const char **out, errbuf *e,
                      pl_status *st) {
    json_t *v = json_object_get(obj, key);
    char full[160];
    snprintf(full, sizeof full, "%s%s%s", path, *path ? "." : "", key);
    if (!v) {
        if (!required) return 0;
        *st = bad(e, "cluster file: missing '%s'%s", full, "");
        return -1;
    }
    if (!json_is_string(v) || (required && !*json_string_value(v))) {
        *st = bad(e, "cluster file: '%s' must be a%s string", full, required ? " non-empty" : "");
        return -1;
    }
    *out = json_string_value(v);
    return 1;
}

static pl_status need_source(json_t *obj, const char *path, errbuf *e) {
    json_t *v = json_object_get(obj, "source");
    if (!v || !json_is_string(v) || !*json_string_value(v))
        return pl_fail(e->msg, e->len, PL_ERR_INVALID,
                       "cluster file: '%s' has no \"source\" string (every figure must say where it comes from)", path);
    return PL_OK;
}

static const char *const PREC_KEYS[PRECISION_COUNT] = {"fp32", "tf32", "bf16", "fp16", "fp8"};

static pl_status parse_gpu(json_t *g, const char *path, cluster_gpu *out, const char **id, errbuf *e) {
    static const char *const keys[] = {"id", "name", "source", "peak_tflops", "hbm_gb_s", "hbm_gib", "hbm_mib",
                                       "sm_count", "clock_ghz", NULL};
    pl_status st = PL_OK;
    if (!json_is_object(g)) return bad(e, "cluster file: '%s' must be an object%s", path, "");
    if ((st = only_keys(g, path, keys, e)) != PL_OK) return st;
    if ((st = need_source(g, path, e)) != PL_OK) return st;
    const char *name = NULL;
    if (get_string(g, path, "id", 1, id, e, &st) < 0) return st;
    if (get_string(g, path, "name", 1, &name, e, &st) < 0) return st;
    snprintf(out->name, sizeof out->name, "%s", name);
    char pp[160];
    snprintf(pp, sizeof pp, "%s.peak_tflops", path);
    json_t *peak = get_obj(g, path, "peak_tflops", 1, e, &st);
    if (!peak) return st;
    if ((st = only_keys(peak, pp,
                        (const char *const[]){"fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "fp4", NULL}, e)) !=
        PL_OK)
        return st;
    for (int p = 0; p < PRECISION_COUNT; p++) {
        double t = 0;
        if (get_num(peak, pp, PREC_KEYS[p], 0, &t, e, &st) < 0) return st;
        out->peak_flops[p] = t * 1e12;
    }
    /* block-scaled formats (Blackwell): absent = the GPU lacks them */
    double mx = 0, f4 = 0;
    if (get_num(peak, pp, "mxfp8", 0, &mx, e, &st) < 0) return st;
    if (get_num(peak, pp, "fp4", 0, &f4, e, &st) < 0) return st;
    out->peak_mxfp8 = mx * 1e12;
    out->peak_fp4 = f4 * 1e12;
    double bw = 0;
    if (get_num(g, path, "hbm_gb_s", 1, &bw, e, &st) < 0) return st;
    out->hbm_bw = bw * 1e9;
    double gib = 0, mib = 0;
    int has_gib = get_num(g, path, "hbm_gib", 0, &gib, e, &st);
    if (has_gib < 0) return st;
    int has_mib = get_num(g, path, "hbm_mib", 0, &mib, e, &st);
    if (has_mib < 0) return st;
    if (has_gib + has_mib != 1)
        return bad(e, "cluster file: '%s' needs exactly one of hbm_gib and hbm_mib%s", path, "");
    double bytes = has_gib ? gib * 1073741824.0 : mib * 1048576.0;
    if (bytes > 1e15) return bad(e, "cluster file: '%s' memory is larger than 1 PB%s", path, "");
    out->hbm_bytes = (int64_t)bytes;
    long long sms = 0;
    if (get_count(g, path, "sm_count", 1, 1, 100000, &sms, e, &st) < 0) return st;
    out->sm_count = (int)sms;
    if (get_num(g, path, "clock_ghz", 0, &out->clock_ghz, e, &st) < 0) return st;
    return PL_OK;
}

/* intra_node / inter_node objects (cluster-wide, or a group's override). */
static pl_status parse_intra(json_t *o, const char *path, double *bw, double *lat, int require, errbuf *e) {
    static const char *const keys[] = {"fabric", "source", "gb_s_per_direction", "latency_us",
                                       "reported_gb_s_per_direction", NULL};
    pl_status st = PL_OK;
    if ((st = only_keys(o, path, keys, e)) != PL_OK) return st;
    if ((st = need_source(o, path, e)) != PL_OK) return st;
    const char *fab = NULL;
    if (get_string(o, path, "fabric", 0, &fab, e, &st) < 0) return st;
    double x = 0;
    int r = get_num(o, path, "gb_s_per_direction", require, &x, e, &st);
    if (r < 0) return st;
    if (r) *bw = x * 1e9;
    if (get_num(o, path, "latency_us", require, lat, e, &st) < 0) return st;
    /* a bandwidth a publication reports as usable (DeepSeek's 160 GB/s on
     * H800), beside the datasheet's: informational, checked, not used */
    double rep = 0;
    if (get_num(o, path, "reported_gb_s_per_direction", 0, &rep, e, &st) < 0) return st;
    return PL_OK;
}

static pl_status parse_inter(json_t *o, const char *path, cluster *c, cluster_group *gr, errbuf *e) {
    static const char *const keys[] = {"fabric", "source", "nics_per_node", "nic_gbit_s", "latency_us",
                                       "pod_gpus", "pod_oversubscription", "reported_gb_s_per_gpu", NULL};
    static const char *const group_keys[] = {"fabric", "source", "nics_per_node", "nic_gbit_s", NULL};
    pl_status st = PL_OK;
    if ((st = only_keys(o, path, gr ? group_keys : keys, e)) != PL_OK) return st;
    if ((st = need_source(o, path, e)) != PL_OK) return st;
    const char *fab = NULL;
    if (get_string(o, path, "fabric", 0, &fab, e, &st) < 0) return st;
    long long nics = 0;
    double gbit = 0;
    int req = gr == NULL;
    if (get_count(o, path, "nics_per_node", req, 0, 1024, &nics, e, &st) < 0) return st;
    if (get_num(o, path, "nic_gbit_s", req, &gbit, e, &st) < 0) return st;
    if (gr) {
        gr->nics_per_node = (int)nics;
        gr->nic_bw = gbit * 1e9 / 8;
        return PL_OK;
    }
    c->nics_per_node = (int)nics;
    c->nic_bw = gbit * 1e9 / 8;
    double rep = 0; /* a publication's usable figure (DeepSeek's 50 GB/s a GPU): informational */
    if (get_num(o, path, "reported_gb_s_per_gpu", 0, &rep, e, &st) < 0) return st;
    if (get_num(o, path, "latency_us", 1, &c->inter_latency_us, e, &st) < 0) return st;
    long long pod = 0;
    if (get_count(o, path, "pod_gpus", 0, 0, (long long)1 << 40, &pod, e, &st) < 0) return st;
    c->pod_gpus = pod;
    c->pod_oversubscription = 1.0;
    if (get_num(o, path, "pod_oversubscription", 0, &c->pod_oversubscription, e, &st) < 0) return st;
    return PL_OK;
}

pl_status cluster_parse_json(const char *text, size_t n, cluster *out, char *msg, size_t len) {
    errbuf e = {msg, len};
    json_t *root = NULL;
    pl_status st = json_doc_parse(text, n, "cluster file", &root, msg, len);
    if (st != PL_OK) return st;
    st = PL_ERR_INVALID;
    cluster *c = calloc(1, sizeof *c);
    if (!c) {
        json_decref(root);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory reading a cluster");
    }
    if (!json_is_object(root)) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "cluster file must be a JSON object ({\"name\": ...})");
        goto out;
    }
    static const char *const keys[] = {"name", "description", "source", "gpu_types", "node_groups",
                                       "gpus_per_node", "nvlink_domain_gpus", "intra_node", "inter_node",
                                       "collectives", NULL};
    if ((st = only_keys(root, "", keys, &e)) != PL_OK) goto out;
    st = PL_ERR_INVALID;
    const char *name = NULL, *desc = NULL;
    if (get_string(root, "", "name", 1, &name, &e, &st) < 0) goto out;
    if (get_string(root, "", "description", 0, &desc, &e, &st) < 0) goto out;
    snprintf(c->name, sizeof c->name, "%s", name);

    /* GPU types */
    json_t *types = json_object_get(root, "gpu_types");
    if (!types || !json_is_array(types) || json_array_size(types) < 1 ||
        json_array_size(types) > CLUSTER_MAX_GPU_TYPES) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "cluster file: 'gpu_types' must be an array of 1 to %d GPU types",
                     CLUSTER_MAX_GPU_TYPES);
        goto out;
    }
    const char *ids[CLUSTER_MAX_GPU_TYPES] = {0};
    c->n_gpu_types = (int)json_array_size(types);
    for (int i = 0; i < c->n_gpu_types; i++) {
        char path[64];
        snprintf(path, sizeof path, "gpu_types[%d]", i);
        if ((st = parse_gpu(json_array_get(types, (size_t)i), path, &c->gpus[i], &ids[i], &e)) != PL_OK) goto out;
        for (int j = 0; j < i; j++)
            if (!strcmp(ids[i], ids[j])) {
                st = pl_fail(msg, len, PL_ERR_INVALID, "cluster file: GPU type id '%.40s' is used twice", ids[i]);
                goto out;
            }
    }
    st = PL_ERR_INVALID;
    long long gpn = 0;
    if (get_count(root, "", "gpus_per_node", 1, 1, 1024, &gpn, &e, &st) < 0) goto out;
    c->gpus_per_node = (int)gpn;
    long long dom = 0; /* absent: the NVLink domain is one node */
    if (get_count(root, "", "nvlink_domain_gpus", 0, 1, 1 << 20, &dom, &e, &st) < 0) goto out;
    c->nvlink_domain_gpus = (int)dom;

    /* fabrics */
    json_t *intra = get_obj(root, "", "intra_node", 1, &e, &st);
    if (!intra) goto out;
    if ((st = parse_intra(intra, "intra_node", &c->intra_bw, &c->intra_latency_us, 1, &e)) != PL_OK) goto out;
    st = PL_ERR_INVALID;
    json_t *inter = get_obj(root, "", "inter_node", 1, &e, &st);
    if (!inter) goto out;
    if ((st = parse_inter(inter, "inter_node", c, NULL, &e)) != PL_OK) goto out;
    st = PL_ERR_INVALID;
    json_t *coll = get_obj(root, "", "collectives", 1, &e, &st);
    if (!coll) goto out;
    {
        static const char *const ck[] = {"source", "base_latency_us", "collective_efficiency", "p2p_efficiency",
                                         NULL};
        if ((st = only_keys(coll, "collectives", ck, &e)) != PL_OK) goto out;
        if ((st = need_source(coll, "collectives", &e)) != PL_OK) goto out;
        st = PL_ERR_INVALID;
        if (get_num(coll, "collectives", "base_latency_us", 0, &c->coll_base_latency_us, &e, &st) < 0) goto out;
        if (get_num(coll, "collectives", "collective_efficiency", 1, &c->collective_efficiency, &e, &st) < 0)
            goto out;
        if (get_num(coll, "collectives", "p2p_efficiency", 1, &c->p2p_efficiency, &e, &st) < 0) goto out;
    }

    /* node groups */
    json_t *groups = json_object_get(root, "node_groups");
    if (!groups || !json_is_array(groups) || json_array_size(groups) < 1 ||
        json_array_size(groups) > CLUSTER_MAX_GROUPS) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "cluster file: 'node_groups' must be an array of 1 to %d groups",
                     CLUSTER_MAX_GROUPS);
        goto out;
    }
    c->n_groups = (int)json_array_size(groups);
    for (int i = 0; i < c->n_groups; i++) {
        char path[64];
        snprintf(path, sizeof path, "node_groups[%d]", i);
        json_t *g = json_array_get(groups, (size_t)i);
        cluster_group *gr = &c->groups[i];
        if (!json_is_object(g)) {
            st = bad(&e, "cluster file: '%s' must be an object%s", path, "");
            goto out;
        }
        static const char *const gk[] = {"gpu", "nodes", "source", "intra_node", "inter_node", NULL};
        if ((st = only_keys(g, path, gk, &e)) != PL_OK) goto out;
        st = PL_ERR_INVALID;
        const char *gid = NULL;
        if (get_string(g, path, "gpu", 1, &gid, &e, &st) < 0) goto out;
        gr->gpu_type = -1;
        for (int j = 0; j < c->n_gpu_types; j++)
            if (!strcmp(gid, ids[j])) gr->gpu_type = j;
        if (gr->gpu_type < 0) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "cluster file: '%s.gpu' names GPU type '%.40s', which gpu_types lacks",
                         path, gid);
            goto out;
        }
        long long nodes = 0;
        if (get_count(g, path, "nodes", 1, 1, (long long)1 << 30, &nodes, &e, &st) < 0) goto out;
        gr->n_nodes = (int)nodes;
        char sub[96];
        json_t *gi = get_obj(g, path, "intra_node", 0, &e, &st);
        if (json_object_get(g, "intra_node") && !gi) goto out;
        if (gi) {
            snprintf(sub, sizeof sub, "%s.intra_node", path);
            if ((st = parse_intra(gi, sub, &gr->intra_bw, &gr->intra_latency_us, 0, &e)) != PL_OK) goto out;
            st = PL_ERR_INVALID;
        }
        json_t *gn = get_obj(g, path, "inter_node", 0, &e, &st);
        if (json_object_get(g, "inter_node") && !gn) goto out;
        if (gn) {
            snprintf(sub, sizeof sub, "%s.inter_node", path);
            if ((st = parse_inter(gn, sub, c, gr, &e)) != PL_OK) goto out;
            st = PL_ERR_INVALID;
        }
    }
    char vm[256];
    if ((st = cluster_validate(c, vm, sizeof vm)) != PL_OK) {
        pl_fail(msg, len, st, "cluster file '%s': %s", c->name, vm);
        goto out;
    }
    *out = *c;
    st = PL_OK;
out:
    free(c);
    json_decref(root);
    return pl_one_line(st, msg, len);
}

static pl_status read_cluster(const char *text, size_t n, void *out, char *msg, size_t len) {
    return cluster_parse_json(text, n, out, msg, len);
}

static pl_status load_any(const char *name_or_path, const char *dir, cluster *out, char *msg, size_t len) {
    if (!name_or_path || !*name_or_path)
        return pl_fail(msg, len, PL_ERR_INVALID, "no cluster given (a name such as dgx-h100, or a .json path)");
    size_t n = strlen(name_or_path);
    if (n > 4000) return pl_fail(msg, len, PL_ERR_INVALID, "cluster name too long");
    if (data_is_path(name_or_path))
        return json_doc_load(name_or_path, CLUSTER_FILE_MAX, "cluster", read_cluster, out, NULL, msg, len);
    if (!data_name_ok(name_or_path, n))
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "cluster name '%.64s' has a character other than letters, digits, '-', '_' and '.'",
                       name_or_path);
    data_dirs d;
    data_dirs_of("PLACER_CLUSTERS", "clusters", &d);
    if (dir) { /* the caller's directory alone */
        d.dir[0] = dir;
        d.n = 1;
    }
    char path[8192];
    if (data_find(&d, name_or_path, n, path, sizeof path))
        return json_doc_load(path, CLUSTER_FILE_MAX, "cluster", read_cluster, out, NULL, msg, len);
    char list[1024] = "";
    int cnt = data_list(&d, list, sizeof list);
    return pl_fail(msg, len, PL_ERR_NOT_FOUND, "unknown cluster '%.64s' (%s%s; or give a .json path)", name_or_path,
                   cnt ? "shipped: " : "no cluster files found", cnt ? list : "");
}

pl_status cluster_load(const char *name_or_path, const char *dir, cluster *out, char *msg, size_t len) {
    return pl_one_line(load_any(name_or_path, dir, out, msg, len), msg, len);
}
