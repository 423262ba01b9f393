/*
 * expert_load.c: expert load files, JSON (SGLang's and vLLM's dump fields)
 * and CSV, into per-window, per-layer, per-expert token counts
 * (expert_load.h has the formats).
 */
#include "expert_load.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data_file.h"
#include "expert_map.h"
#include "json_doc.h"
#include "util.h"

pl_status expert_load_create(int n_windows, int n_layers, int n_experts, int n_samples, int sample_k,
                             int samples_per_window, expert_load **out, char *msg, size_t len) {
    if (!out) return pl_fail(msg, len, PL_ERR_INVALID, "expert_load_create: no output");
    *out = NULL;
    if (n_windows < 1 || n_windows > EXPERT_LOAD_MAX_WINDOWS)
        return pl_fail(msg, len, PL_ERR_INVALID, "windows must be 1..%d, not %d", EXPERT_LOAD_MAX_WINDOWS, n_windows);
    if (n_layers < 1 || n_layers > EXPERT_MAP_MAX_LAYERS)
        return pl_fail(msg, len, PL_ERR_INVALID, "layers must be 1..%d, not %d", EXPERT_MAP_MAX_LAYERS, n_layers);
    if (n_experts < 1 || n_experts > EXPERT_MAP_MAX_EXPERTS)
        return pl_fail(msg, len, PL_ERR_INVALID, "experts must be 1..%d, not %d", EXPERT_MAP_MAX_EXPERTS, n_experts);
    if ((double)n_windows * n_layers * n_experts > (double)EXPERT_LOAD_MAX_CELLS)
        return pl_fail(msg, len, PL_ERR_INVALID, "%d windows x %d layers x %d experts is over %ld cells", n_windows,
                       n_layers, n_experts, EXPERT_LOAD_MAX_CELLS);
    if (n_samples < 0 || n_samples > EXPERT_LOAD_MAX_SAMPLES || (n_samples > 0 && (sample_k < 1 || sample_k > EXPERT_LOAD_MAX_K)))
        return pl_fail(msg, len, PL_ERR_INVALID, "token samples must be 0..%d of 1..%d experts, not %d of %d",
                       EXPERT_LOAD_MAX_SAMPLES, EXPERT_LOAD_MAX_K, n_samples, sample_k);
    const double n_ids = (double)(samples_per_window ? n_windows : 1) * n_layers * n_samples * (n_samples ? sample_k : 0);
    if (n_ids > (double)EXPERT_LOAD_MAX_CELLS)
        return pl_fail(msg, len, PL_ERR_INVALID, "%.0f sampled expert ids are over %ld", n_ids, EXPERT_LOAD_MAX_CELLS);
    expert_load *ld = calloc(1, sizeof *ld);
    if (!ld) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory for an expert load");
    ld->count = calloc((size_t)n_windows * n_layers * n_experts, sizeof *ld->count);
    if (n_samples > 0) ld->samples = malloc((size_t)n_ids * sizeof *ld->samples);
    if (!ld->count || (n_samples > 0 && !ld->samples)) {
        expert_load_destroy(ld);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory for an expert load");
    }
    for (size_t i = 0; i < (size_t)n_ids; i++) ld->samples[i] = -1;
    ld->n_windows = n_windows;
    ld->n_layers = n_layers;
    ld->n_experts = n_experts;
    ld->n_samples = n_samples;
    ld->sample_k = n_samples > 0 ? sample_k : 0;
    ld->samples_per_window = n_samples > 0 && samples_per_window;
    snprintf(ld->source, sizeof ld->source, "generated");
    *out = ld;
    return PL_OK;
}

void expert_load_destroy(expert_load *ld) {
    if (!ld) return;
    free(ld->count);
    free(ld->samples);
    free(ld);
}

/* ---- JSON ---------------------------------------------------------------- */

#define MAX_DEPTH 4

/* The shape of a nested array of numbers `depth` deep (dims[0] outermost),
 * taken from the first elements, then every element checked against it:
 * "NAME[i][j] has N entries where NAME[0][0] has M" for a ragged array,
 * "NAME[i][j] is not a number" (depth reached: numbers; above: arrays). */
static pl_status walk_shape(json_t *v, int d, int depth, long *dims, long *idx, const char *name, char *msg,
                            size_t len) {
    char where[128];
    int off = snprintf(where, sizeof where, "%s", name);
    for (int i = 0; i < d && off < (int)sizeof where; i++) off += snprintf(where + off, sizeof where - (size_t)off, "[%ld]", idx[i]);
    if (d == depth) {
        if (!json_is_number(v)) return pl_fail(msg, len, PL_ERR_INVALID, "%s is not a number", where);
        return PL_OK;
    }
    if (!json_is_array(v))
        return pl_fail(msg, len, PL_ERR_INVALID, "%s must be an array (%d levels deep: wrong shape)", where, depth);
    const long n = (long)json_array_size(v);
    if (dims[d] < 0) dims[d] = n;
    if (n != dims[d] || n < 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "%s has %ld entries where the first has %ld (wrong shape)", where, n,
                       dims[d]);
    for (long i = 0; i < n; i++) {
        idx[d] = i;
        pl_status st = walk_shape(json_array_get(v, (size_t)i), d + 1, depth, dims, idx, name, msg, len);
        if (st != PL_OK) return st;
    }
    return PL_OK;
}

/* The depth of v's nesting along first elements (0 for a number). */
static int nest_depth(json_t *v) {
    int d = 0;
    while (json_is_array(v) && json_array_size(v) > 0 && d < 8) v = json_array_get(v, 0), d++;
    return d;
}

static pl_status array_shape(json_t *v, int depth, long *dims, const char *name, char *msg, size_t len) {
    long idx[MAX_DEPTH] = {0};
    for (int i = 0; i < MAX_DEPTH; i++) dims[i] = -1;
    return walk_shape(v, 0, depth, dims, idx, name, msg, len);
}

/* Flatten a checked nested array into out (row-major). */
static void flatten(json_t *v, int depth, double *out, size_t *at) {
    if (depth == 0) {
        out[(*at)++] = json_number_value(v);
        return;
    }
    for (size_t i = 0; i < json_array_size(v); i++) flatten(json_array_get(v, i), depth - 1, out, at);
}

/* Counts of one field: a checked [W][L][P] (depth 3) or [L][P] (depth 2)
 * array into a new buffer with its dims; negative or non-finite counts
 * refused with their indices. */
static pl_status read_counts(json_t *v, const char *name, int *W, int *L, int *P, double **out, char *msg, size_t len) {
    *out = NULL;
    const int depth = nest_depth(v);
    if (depth != 2 && depth != 3)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "%s must be [windows][layers][experts] or [layers][experts] numbers, not %d levels deep "
                       "(wrong shape)", name, depth);
    long dims[MAX_DEPTH];
    pl_status st = array_shape(v, depth, dims, name, msg, len);
    if (st != PL_OK) return st;
    const long w = depth == 3 ? dims[0] : 1, l = dims[depth - 2], p = dims[depth - 1];
    if (w > EXPERT_LOAD_MAX_WINDOWS || l > EXPERT_MAP_MAX_LAYERS || p > EXPERT_MAP_MAX_SLOTS ||
        (double)w * l * p > (double)EXPERT_LOAD_MAX_CELLS)
        return pl_fail(msg, len, PL_ERR_INVALID, "%s is %ld x %ld x %ld, over the limits (%d windows, %d layers, %d slots)",
                       name, w, l, p, EXPERT_LOAD_MAX_WINDOWS, EXPERT_MAP_MAX_LAYERS, EXPERT_MAP_MAX_SLOTS);
    double *buf = malloc((size_t)(w * l * p) * sizeof *buf);
    if (!buf) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory reading %s", name);
    size_t at = 0;
    flatten(v, depth, buf, &at);
    for (size_t i = 0; i < at; i++) {
        if (!isfinite(buf[i]) || buf[i] < 0) {
            const long e = (long)(i % (size_t)p), ll = (long)((i / (size_t)p) % (size_t)l), ww = (long)(i / (size_t)(p * l));
            if (depth == 3)
                pl_fail(msg, len, PL_ERR_INVALID, "%s[%ld][%ld][%ld] is %g; counts must be finite and >= 0", name, ww,
                        ll, e, buf[i]);
            else
                pl_fail(msg, len, PL_ERR_INVALID, "%s[%ld][%ld] is %g; counts must be finite and >= 0", name, ll, e,
                        buf[i]);
            free(buf);
            return PL_ERR_INVALID;
        }
    }
    *W = (int)w;
    *L = (int)l;
    *P = (int)p;
    *out = buf;
    return PL_OK;
}

/* physical_to_logical_map [L][P] into ints in [0, E) with E = the largest + 1. */
static pl_status read_p2l(json_t *v, int L, int P, int **out, int *E, char *msg, size_t len) {
    *out = NULL;
    long dims[MAX_DEPTH];
    if (nest_depth(v) != 2)
        return pl_fail(msg, len, PL_ERR_INVALID, "physical_to_logical_map must be [layers][slots] (wrong shape)");
    pl_status st = array_shape(v, 2, dims, "physical_to_logical_map", msg, len);
    if (st != PL_OK) return st;
    if (dims[0] != L || dims[1] != P)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "physical_to_logical_map is %ld x %ld but the counts have %d layers of %d slots (wrong shape)",
                       dims[0], dims[1], L, P);
    int *m = malloc((size_t)L * P * sizeof *m);
    if (!m) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory reading physical_to_logical_map");
    int e_max = -1;
    for (int l = 0; l < L; l++)
        for (int p = 0; p < P; p++) {
            const double x = json_number_value(json_array_get(json_array_get(v, (size_t)l), (size_t)p));
            if (x != floor(x) || x < 0 || x >= EXPERT_MAP_MAX_EXPERTS) {
                free(m);
                return pl_fail(msg, len, PL_ERR_INVALID, "physical_to_logical_map[%d][%d] is %g, not an expert id 0..%d", l,
                               p, x, EXPERT_MAP_MAX_EXPERTS - 1);
            }
            m[(size_t)l * P + p] = (int)x;
            if ((int)x > e_max) e_max = (int)x;
        }
    *out = m;
    *E = e_max + 1;
    return PL_OK;
}

/* topk_ids_of_layer into ld's samples (ld has its shape). */
static pl_status read_samples(json_t *v, expert_load *ld, char *msg, size_t len) {
    const char *name = "topk_ids_of_layer";
    const int depth = nest_depth(v);
    if (depth != 3 && depth != 4)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "%s must be [windows][layers][tokens][k] or [layers][tokens][k] ids, not %d levels deep (wrong shape)",
                       name, depth);
    long dims[MAX_DEPTH];
    pl_status st = array_shape(v, depth, dims, name, msg, len);
    if (st != PL_OK) return st;
    const long w = depth == 4 ? dims[0] : 1, l = dims[depth - 3], t = dims[depth - 2], k = dims[depth - 1];
    if (l != ld->n_layers || (depth == 4 && w != ld->n_windows))
        return pl_fail(msg, len, PL_ERR_INVALID, "%s covers %ld windows x %ld layers but the counts %d x %d (wrong shape)",
                       name, w, l, ld->n_windows, ld->n_layers);
    if (t > EXPERT_LOAD_MAX_SAMPLES || k > EXPERT_LOAD_MAX_K || (double)w * l * t * k > (double)EXPERT_LOAD_MAX_CELLS)
        return pl_fail(msg, len, PL_ERR_INVALID, "%s has %ld tokens of %ld experts, over the limits (%d, %d)", name, t, k,
                       EXPERT_LOAD_MAX_SAMPLES, EXPERT_LOAD_MAX_K);
    const size_t n = (size_t)(w * l * t * k);
    double *buf = malloc(n * sizeof *buf);
    int16_t *ids = malloc(n * sizeof *ids);
    if (!buf || !ids) {
        free(buf);
        free(ids);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory reading %s", name);
    }
    size_t at = 0;
    flatten(v, depth, buf, &at);
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != floor(buf[i]) || buf[i] < -1 || buf[i] >= ld->n_experts) {
            const double x = buf[i];
            free(buf);
            free(ids);
            return pl_fail(msg, len, PL_ERR_INVALID, "%s holds %g at entry %zu; ids must be -1 (padding) or 0..%d", name, x,
                           i, ld->n_experts - 1);
        }
        ids[i] = (int16_t)buf[i];
    }
    free(buf);
    ld->samples = ids;
    ld->n_samples = (int)t;
    ld->sample_k = (int)k;
    ld->samples_per_window = depth == 4;
    return PL_OK;
}

static const char *const LOAD_KEYS[] = {"logical_count", "expert_load_window", "expert_load_pass",
                                        "physical_to_logical_map", "topk_ids_of_layer", "top_k", "rank",
                                        "average_utilization_rate_over_window", "last_physical_to_logical_map",
                                        "source", "description", "generator", NULL};

static pl_status parse_root(json_t *root, expert_load **out, char *msg, size_t len) {
    if (!json_is_object(root)) return pl_fail(msg, len, PL_ERR_INVALID, "the top level must be an object");
    pl_status st = json_only_keys(root, "", "", LOAD_KEYS, msg, len);
    if (st != PL_OK) return st;
    static const char *const count_keys[] = {"logical_count", "expert_load_window", "expert_load_pass"};
    const char *field = NULL;
    json_t *cv = NULL;
    for (int i = 0; i < 3; i++) {
        json_t *v = json_object_get(root, count_keys[i]);
        if (!v) continue;
        if (field)
            return pl_fail(msg, len, PL_ERR_INVALID, "both '%s' and '%s' hold counts; give one", field, count_keys[i]);
        field = count_keys[i];
        cv = v;
    }
    if (!field)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "no counts: the file needs 'logical_count' (SGLang), 'expert_load_window' or 'expert_load_pass' (vLLM)");
    int W = 0, L = 0, P = 0, E = 0;
    double *raw = NULL;
    int *p2l = NULL;
    if ((st = read_counts(cv, field, &W, &L, &P, &raw, msg, len)) != PL_OK) return st;
    if (!strcmp(field, "expert_load_pass") && nest_depth(cv) != 2) {
        free(raw);
        return pl_fail(msg, len, PL_ERR_INVALID, "expert_load_pass must be [layers][slots] (wrong shape)");
    }
    json_t *mv = json_object_get(root, "physical_to_logical_map");
    if (mv && !strcmp(field, "logical_count")) {
        free(raw);
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "physical_to_logical_map folds vLLM's per-slot counts; logical_count is per expert already");
    }
    E = P;
    if (mv && (st = read_p2l(mv, L, P, &p2l, &E, msg, len)) != PL_OK) {
        free(raw);
        return st;
    }
    expert_load *ld = NULL;
    if ((st = expert_load_create(W, L, E, 0, 0, 0, &ld, msg, len)) != PL_OK) {
        free(raw);
        free(p2l);
        return st;
    }
    for (int w = 0; w < W; w++)
        for (int l = 0; l < L; l++) {
            double *row = expert_load_row(ld, w, l);
            const double *r = raw + ((size_t)w * L + l) * P;
            for (int p = 0; p < P; p++) row[p2l ? p2l[(size_t)l * P + p] : p] += r[p];
        }
    free(raw);
    free(p2l);
    snprintf(ld->source, sizeof ld->source, "%s", field);
    json_t *tk = json_object_get(root, "top_k");
    if (tk) {
        const double k = json_is_number(tk) ? json_number_value(tk) : -1;
        if (k != floor(k) || k < 1 || k > EXPERT_LOAD_MAX_K || k > E) {
            expert_load_destroy(ld);
            return pl_fail(msg, len, PL_ERR_INVALID, "top_k must be an integer 1..%d (at most the experts, %d)",
                           EXPERT_LOAD_MAX_K, E);
        }
        ld->top_k = (int)k;
    }
    json_t *sv = json_object_get(root, "topk_ids_of_layer");
    if (sv && (st = read_samples(sv, ld, msg, len)) != PL_OK) {
        expert_load_destroy(ld);
        return st;
    }
    *out = ld;
    return PL_OK;
}

pl_status expert_load_parse_json(const char *text, size_t n, expert_load **out, char *msg, size_t len) {
    if (!out) return pl_fail(msg, len, PL_ERR_INVALID, "expert_load_parse_json: no output");
    *out = NULL;
    json_t *root = NULL;
    pl_status st = json_doc_parse(text, n, "expert load", &root, msg, len);
    if (st != PL_OK) return st;
    st = parse_root(root, out, msg, len);
    json_decref(root);
    return pl_one_line(st, msg, len);
}

/* ---- CSV ----------------------------------------------------------------- */

typedef struct {
    long w, l, e;
    double c;
} csv_cell;

/* One decimal integer field [s, end) into *v (0..hi). */
static int int_field(const char *s, const char *end, long hi, long *v) {
    if (s == end) return 0;
    long x = 0;
    for (const char *p = s; p < end; p++) {
        if (!isdigit((unsigned char)*p)) return 0;
        x = x * 10 + (*p - '0');
        if (x > hi) return 0;
    }
    *v = x;
    return 1;
}

pl_status expert_load_parse_csv(const char *text, size_t n, expert_load **out, char *msg, size_t len) {
    if (!out) return pl_fail(msg, len, PL_ERR_INVALID, "expert_load_parse_csv: no output");
    *out = NULL;
    if (!text) return pl_fail(msg, len, PL_ERR_INVALID, "no expert load text");
    const char *p = text, *end = text + n;
    const char *nl = memchr(p, '\n', n);
    const char *hend = nl ? nl : end;
    size_t hl = (size_t)(hend - p);
    if (hl > 0 && p[hl - 1] == '\r') hl--;
    static const char header[] = "window,layer,expert,count";
    if (hl != sizeof header - 1 || memcmp(p, header, hl) != 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "the first line must be '%s'", header);
    p = nl ? nl + 1 : end;
    size_t cap = 1024, nc = 0;
    csv_cell *cells = malloc(cap * sizeof *cells);
    if (!cells) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory reading an expert load");
    long W = 0, L = 0, E = 0;
    int line = 1;
    pl_status st = PL_OK;
    while (p < end) {
        line++;
        const char *le = memchr(p, '\n', (size_t)(end - p));
        if (!le) le = end;
        const char *re = le;
        if (re > p && re[-1] == '\r') re--;
        if (re == p) { /* blank line */
            p = le < end ? le + 1 : end;
            continue;
        }
        const char *f[4];
        const char *fe[4];
        int nf = 0;
        const char *q = p;
        while (nf < 4) {
            f[nf] = q;
            const char *c = memchr(q, ',', (size_t)(re - q));
            fe[nf] = c ? c : re;
            nf++;
            if (!c) break;
            q = c + 1;
        }
        if (nf != 4 || fe[3] != re) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "line %d: want 4 fields window,layer,expert,count", line);
            break;
        }
        csv_cell c;
        if (!int_field(f[0], fe[0], EXPERT_LOAD_MAX_WINDOWS - 1, &c.w) ||
            !int_field(f[1], fe[1], EXPERT_MAP_MAX_LAYERS - 1, &c.l) ||
            !int_field(f[2], fe[2], EXPERT_MAP_MAX_EXPERTS - 1, &c.e)) {
            st = pl_fail(msg, len, PL_ERR_INVALID,
                         "line %d: window, layer and expert must be integers 0..%d, 0..%d, 0..%d", line,
                         EXPERT_LOAD_MAX_WINDOWS - 1, EXPERT_MAP_MAX_LAYERS - 1, EXPERT_MAP_MAX_EXPERTS - 1);
            break;
        }
        char num[64];
        const size_t nl2 = (size_t)(fe[3] - f[3]);
        if (nl2 == 0 || nl2 >= sizeof num) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "line %d: the count is empty or too long", line);
            break;
        }
        memcpy(num, f[3], nl2);
        num[nl2] = 0;
        char *ne = NULL;
        errno = 0;
        c.c = strtod(num, &ne);
        if (*ne || errno || !isfinite(c.c) || c.c < 0) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "line %d: count '%s' must be a finite number >= 0", line, num);
            break;
        }
        if (nc == cap) {
            if (cap > (size_t)EXPERT_LOAD_MAX_CELLS) {
                st = pl_fail(msg, len, PL_ERR_INVALID, "more than %ld rows", EXPERT_LOAD_MAX_CELLS);
                break;
            }
            csv_cell *nc2 = realloc(cells, 2 * cap * sizeof *cells);
            if (!nc2) {
                st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory reading an expert load");
                break;
            }
            cells = nc2;
            cap *= 2;
        }
        cells[nc++] = c;
        if (c.w + 1 > W) W = c.w + 1;
        if (c.l + 1 > L) L = c.l + 1;
        if (c.e + 1 > E) E = c.e + 1;
        p = le < end ? le + 1 : end;
    }
    if (st == PL_OK && nc == 0) st = pl_fail(msg, len, PL_ERR_INVALID, "no rows after the header");
    if (st == PL_OK && (double)W * L * E != (double)nc)
        st = pl_fail(msg, len, PL_ERR_INVALID,
                     "%zu rows for %ld windows x %ld layers x %ld experts: every cell must appear once (wrong shape)", nc,
                     W, L, E);
    expert_load *ld = NULL;
    if (st == PL_OK) st = expert_load_create((int)W, (int)L, (int)E, 0, 0, 0, &ld, msg, len);
    if (st == PL_OK) {
        /* each cell once: mark with -1 first, a second visit finds a value */
        for (size_t i = 0; i < (size_t)(W * L * E); i++) ld->count[i] = -1;
        for (size_t i = 0; i < nc && st == PL_OK; i++) {
            double *v = &expert_load_row(ld, (int)cells[i].w, (int)cells[i].l)[cells[i].e];
            if (*v >= 0)
                st = pl_fail(msg, len, PL_ERR_INVALID, "window %ld layer %ld expert %ld appears twice", cells[i].w,
                             cells[i].l, cells[i].e);
            *v = cells[i].c;
        }
        snprintf(ld->source, sizeof ld->source, "csv");
    }
    free(cells);
    if (st != PL_OK) {
        expert_load_destroy(ld);
        return pl_one_line(st, msg, len);
    }
    *out = ld;
    return PL_OK;
}

/* ---- files --------------------------------------------------------------- */

pl_status expert_load_read(const char *path, expert_load **out, char *msg, size_t len) {
    if (!out) return pl_fail(msg, len, PL_ERR_INVALID, "expert_load_read: no output");
    *out = NULL;
    if (!path) return pl_fail(msg, len, PL_ERR_INVALID, "no expert load file");
    char *text = NULL;
    size_t n = 0;
    pl_status st = data_file_read(path, EXPERT_LOAD_MAX_BYTES, "expert load", &text, &n, msg, len);
    if (st != PL_OK) return st;
    const size_t pl = strlen(path);
    const int csv = (pl > 4 && !strcmp(path + pl - 4, ".csv")) || (n >= 7 && !memcmp(text, "window,", 7));
    char inner[400] = "";
    st = csv ? expert_load_parse_csv(text, n, out, inner, sizeof inner)
             : expert_load_parse_json(text, n, out, inner, sizeof inner);
    free(text);
    if (st != PL_OK) pl_fail(msg, len, st, "%s: %s (the load file formats: docs/experts.md)", path, inner);
    return pl_one_line(st, msg, len);
}

pl_status expert_load_write_json(const expert_load *ld, FILE *f) {
    fprintf(f, "{\n  \"source\": ");
    pl_json_string(f, ld->source);
    if (ld->top_k > 0) fprintf(f, ",\n  \"top_k\": %d", ld->top_k);
    fprintf(f, ",\n  \"logical_count\": [");
    for (int w = 0; w < ld->n_windows; w++) {
        fprintf(f, "%s\n   [", w ? "," : "");
        for (int l = 0; l < ld->n_layers; l++) {
            fprintf(f, "%s\n    [", l ? "," : "");
            const double *r = expert_load_row_c(ld, w, l);
            for (int e = 0; e < ld->n_experts; e++) fprintf(f, "%s%.17g", e ? "," : "", r[e]);
            fprintf(f, "]");
        }
        fprintf(f, "]");
    }
    fprintf(f, "]");
    if (ld->samples && ld->n_samples > 0) {
        fprintf(f, ",\n  \"topk_ids_of_layer\": [");
        const int nw = ld->samples_per_window ? ld->n_windows : 1;
        for (int w = 0; w < nw; w++) {
            if (ld->samples_per_window) fprintf(f, "%s\n   [", w ? "," : "");
            for (int l = 0; l < ld->n_layers; l++) {
                fprintf(f, "%s[", l ? "," : "");
                const int16_t *s = expert_load_samples_c(ld, w, l);
                for (int t = 0; t < ld->n_samples; t++) {
                    fprintf(f, "%s[", t ? "," : "");
                    for (int j = 0; j < ld->sample_k; j++) fprintf(f, "%s%d", j ? "," : "", s[(size_t)t * ld->sample_k + j]);
                    fprintf(f, "]");
                }
                fprintf(f, "]");
            }
            if (ld->samples_per_window) fprintf(f, "]");
        }
        fprintf(f, "]");
    }
    fprintf(f, "\n}\n");
    return ferror(f) ? PL_ERR_IO : PL_OK;
}

void expert_load_row_stats(const expert_load *ld, int w, int l, double *cv, double *max_over_mean) {
    const double *r = expert_load_row_c(ld, w, l);
    double s = 0, s2 = 0, mx = 0;
    for (int e = 0; e < ld->n_experts; e++) {
        s += r[e];
        s2 += r[e] * r[e];
        if (r[e] > mx) mx = r[e];
    }
    const double n = ld->n_experts, mean = s / n;
    if (!(mean > 0)) {
        *cv = 0;
        *max_over_mean = 0;
        return;
    }
    const double var = s2 / n - mean * mean;
    *cv = var > 0 ? sqrt(var) / mean : 0.0;
    *max_over_mean = mx / mean;
}
