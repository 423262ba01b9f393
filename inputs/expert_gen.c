/*
 * expert_gen.c: the expert load generator (expert_gen.h has the model) and
 * its settings files, data/experts/NAME.json.
 */
#include "expert_gen.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data_file.h"
#include "expert_map.h"
#include "json_doc.h"
#include "util.h"

#define GEN_FILE_MAX (1 << 20)

void expert_gen_params_default(expert_gen_params *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "default");
    p->layers = 58;
    p->experts = 256;
    p->groups = 8;
    p->topk_groups = 4;
    p->top_k = 8;
    p->topics = 1;
    p->route_tokens = 1024;
    p->samples = 512;
    p->group_share = 0.0;
    p->topic_concentration = 1.0;
    p->tokens_per_window = 1e6;
}

pl_status expert_gen_params_check(const expert_gen_params *p, char *msg, size_t len) {
    if (p->layers < 1 || p->layers > EXPERT_MAP_MAX_LAYERS)
        return pl_fail(msg, len, PL_ERR_INVALID, "layers must be 1..%d", EXPERT_MAP_MAX_LAYERS);
    if (p->experts < 1 || p->experts > 32767)
        return pl_fail(msg, len, PL_ERR_INVALID, "experts must be 1..32767");
    const int G = p->groups > 1 ? p->groups : 1;
    if (G > 4096 || p->topk_groups > 256) return pl_fail(msg, len, PL_ERR_INVALID, "at most 4096 groups and 256 of them a token");
    if (p->experts % G) return pl_fail(msg, len, PL_ERR_INVALID, "groups (%d) must divide experts (%d)", G, p->experts);
    if (p->topk_groups < 1 || p->topk_groups > G)
        return pl_fail(msg, len, PL_ERR_INVALID, "topk_groups must be 1..groups (%d)", G);
    if (p->top_k < 1 || p->top_k > EXPERT_LOAD_MAX_K || p->top_k > p->topk_groups * (p->experts / G))
        return pl_fail(msg, len, PL_ERR_INVALID, "top_k must be 1..%d and fit the groups a token may use",
                       EXPERT_LOAD_MAX_K);
    if (G > 1 && p->experts / G < 2) return pl_fail(msg, len, PL_ERR_INVALID, "a group needs at least 2 experts");
    if (p->topics < 1 || p->topics > EXPERT_GEN_MAX_TOPICS)
        return pl_fail(msg, len, PL_ERR_INVALID, "topics must be 1..%d", EXPERT_GEN_MAX_TOPICS);
    if (p->route_tokens < 1 || p->route_tokens > 1 << 20) return pl_fail(msg, len, PL_ERR_INVALID, "route_tokens must be 1..1048576");
    if (p->samples < 0 || p->samples > EXPERT_LOAD_MAX_SAMPLES)
        return pl_fail(msg, len, PL_ERR_INVALID, "samples must be 0..%d", EXPERT_LOAD_MAX_SAMPLES);
    for (int i = 0; i < 2; i++)
        if (!(p->popularity_sd[i] >= 0 && p->popularity_sd[i] <= 10) || !(p->topic_affinity[i] >= 0 && p->topic_affinity[i] <= 10))
            return pl_fail(msg, len, PL_ERR_INVALID, "popularity_sd and topic_affinity must be in 0..10");
    if (!(p->group_share >= 0 && p->group_share <= 1)) return pl_fail(msg, len, PL_ERR_INVALID, "group_share must be in 0..1");
    if (!(p->topic_concentration > 0 && p->topic_concentration <= 1e6))
        return pl_fail(msg, len, PL_ERR_INVALID, "topic_concentration must be > 0");
    if (!(p->walk_topic >= 0 && p->walk_topic <= 10) || !(p->walk_expert >= 0 && p->walk_expert <= 10))
        return pl_fail(msg, len, PL_ERR_INVALID, "walk_topic and walk_expert must be in 0..10");
    if (!(p->shift_prob >= 0 && p->shift_prob <= 1)) return pl_fail(msg, len, PL_ERR_INVALID, "shift_prob must be in 0..1");
    if (!(p->tokens_per_window >= 1 && p->tokens_per_window <= 1e15))
        return pl_fail(msg, len, PL_ERR_INVALID, "tokens_per_window must be 1..1e15");
    return PL_OK;
}

/* ---- settings files ------------------------------------------------------ */

static pl_status get_int(json_t *root, const char *key, int *out, char *msg, size_t len) {
    json_t *v = json_object_get(root, key);
    if (!v) return PL_OK;
    const double x = json_is_number(v) ? json_number_value(v) : 0.5;
    if (x != floor(x) || fabs(x) > 1e9) return pl_fail(msg, len, PL_ERR_INVALID, "'%s' must be an integer", key);
    *out = (int)x;
    return PL_OK;
}

static pl_status get_num(json_t *root, const char *key, double *out, char *msg, size_t len) {
    json_t *v = json_object_get(root, key);
    if (!v) return PL_OK;
    if (!json_is_number(v)) return pl_fail(msg, len, PL_ERR_INVALID, "'%s' must be a number", key);
    *out = json_number_value(v);
    return PL_OK;
}

static pl_status get_pair(json_t *root, const char *key, double *out, char *msg, size_t len) {
    json_t *v = json_object_get(root, key);
    if (!v) return PL_OK;
    if (json_is_number(v)) {
        out[0] = out[1] = json_number_value(v);
        return PL_OK;
    }
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_number(json_array_get(v, 0)) ||
        !json_is_number(json_array_get(v, 1)))
        return pl_fail(msg, len, PL_ERR_INVALID, "'%s' must be a number or [least, most]", key);
    out[0] = json_number_value(json_array_get(v, 0));
    out[1] = json_number_value(json_array_get(v, 1));
    return PL_OK;
}

static const char *const GEN_KEYS[] = {"name", "description", "sources", "calibration", "layers", "experts", "groups",
                                       "topk_groups", "top_k", "topics", "route_tokens", "samples", "popularity_sd",
                                       "topic_affinity", "group_share", "topic_concentration", "walk_topic",
                                       "walk_expert", "shift_prob", "tokens_per_window", NULL};

pl_status expert_gen_params_parse(const char *text, size_t n, expert_gen_params *out, char *msg, size_t len) {
    expert_gen_params p;
    expert_gen_params_default(&p);
    json_t *root = NULL;
    pl_status st = json_doc_parse(text, n, "expert generator settings", &root, msg, len);
    if (st != PL_OK) return st;
    if (!json_is_object(root)) {
        json_decref(root);
        return pl_fail(msg, len, PL_ERR_INVALID, "the top level must be an object");
    }
    st = json_only_keys(root, "", "", GEN_KEYS, msg, len);
    json_t *nm = json_object_get(root, "name");
    if (st == PL_OK && nm) {
        if (!json_is_string(nm) || json_string_length(nm) < 1 || json_string_length(nm) >= EXPERT_GEN_NAME_LEN ||
            strlen(json_string_value(nm)) != json_string_length(nm))
            st = pl_fail(msg, len, PL_ERR_INVALID, "'name' must be a string of 1 to %d characters", EXPERT_GEN_NAME_LEN - 1);
        else
            snprintf(p.name, sizeof p.name, "%s", json_string_value(nm));
    }
    if (st == PL_OK) st = get_int(root, "layers", &p.layers, msg, len);
    if (st == PL_OK) st = get_int(root, "experts", &p.experts, msg, len);
    if (st == PL_OK) st = get_int(root, "groups", &p.groups, msg, len);
    if (st == PL_OK) st = get_int(root, "topk_groups", &p.topk_groups, msg, len);
    if (st == PL_OK) st = get_int(root, "top_k", &p.top_k, msg, len);
    if (st == PL_OK) st = get_int(root, "topics", &p.topics, msg, len);
    if (st == PL_OK) st = get_int(root, "route_tokens", &p.route_tokens, msg, len);
    if (st == PL_OK) st = get_int(root, "samples", &p.samples, msg, len);
    if (st == PL_OK) st = get_pair(root, "popularity_sd", p.popularity_sd, msg, len);
    if (st == PL_OK) st = get_pair(root, "topic_affinity", p.topic_affinity, msg, len);
    if (st == PL_OK) st = get_num(root, "group_share", &p.group_share, msg, len);
    if (st == PL_OK) st = get_num(root, "topic_concentration", &p.topic_concentration, msg, len);
    if (st == PL_OK) st = get_num(root, "walk_topic", &p.walk_topic, msg, len);
    if (st == PL_OK) st = get_num(root, "walk_expert", &p.walk_expert, msg, len);
    if (st == PL_OK) st = get_num(root, "shift_prob", &p.shift_prob, msg, len);
    if (st == PL_OK) st = get_num(root, "tokens_per_window", &p.tokens_per_window, msg, len);
    json_decref(root);
    if (st == PL_OK) st = expert_gen_params_check(&p, msg, len);
    if (st == PL_OK) *out = p;
    return pl_one_line(st, msg, len);
}

static pl_status read_gen(const char *text, size_t n, void *out, char *msg, size_t len) {
    return expert_gen_params_parse(text, n, out, msg, len);
}

pl_status expert_gen_params_load(const char *name_or_path, expert_gen_params *out, char *msg, size_t len) {
    if (!name_or_path || !*name_or_path) return pl_fail(msg, len, PL_ERR_INVALID, "no generator settings named");
    char found[4200];
    data_dirs d;
    data_dirs_of("PLACER_EXPERTS", "experts", &d);
    const char *path = data_shipped_path(&d, name_or_path, found, sizeof found);
    if (!path) {
        char names[1024] = "";
        data_list(&d, names, sizeof names);
        return pl_fail(msg, len, PL_ERR_INVALID, "no generator settings '%s' (shipped: %s)", name_or_path,
                       names[0] ? names : "none");
    }
    return json_doc_load(path, GEN_FILE_MAX, "expert generator settings", read_gen, out, NULL, msg, len);
}

/* ---- the generator ------------------------------------------------------- */

/* Standard normals two at a time (Marsaglia's polar method: no cos, cheaper
 * than Box-Muller in the routing loop). */
typedef struct {
    pl_rng *r;
    double spare;
    int has;
} normal_src;

static double nrm(normal_src *n) {
    if (n->has) {
        n->has = 0;
        return n->spare;
    }
    double u, v, s;
    do {
        u = 2.0 * pl_rng_uniform(n->r) - 1.0;
        v = 2.0 * pl_rng_uniform(n->r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double f = sqrt(-2.0 * log(s) / s);
    n->spare = v * f;
    n->has = 1;
    return u * f;
}

/* Gamma(a, 1) (Marsaglia and Tsang; a < 1 through the a + 1 boost). */
static double gamma_draw(normal_src *n, double a) {
    if (a < 1.0) {
        const double u = pl_rng_uniform(n->r);
        return gamma_draw(n, a + 1.0) * pow(u > 0 ? u : 1e-300, 1.0 / a);
    }
    const double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = nrm(n);
            v = 1.0 + c * x;
        } while (v <= 0);
        v = v * v * v;
        const double u = pl_rng_uniform(n->r);
        if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
        if (log(u > 0 ? u : 1e-300) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
    }
}

static void dirichlet(normal_src *n, double alpha, int k, double *pi) {
    double s = 0;
    for (int i = 0; i < k; i++) s += (pi[i] = gamma_draw(n, alpha) + 1e-12);
    for (int i = 0; i < k; i++) pi[i] /= s;
}

/* Route one token: logits x[E]; writes top_k expert ids into out. */
static void route_token(const expert_gen_params *p, const double *x, int16_t *out) {
    const int E = p->experts, G = p->groups > 1 ? p->groups : 1, per = E / G, K = p->top_k;
    int chosen[256];
    int nch = 0;
    if (G > 1) {
        /* group score: the sum of its two best sigmoid scores (monotone: find the two best logits) */
        double gs[4096];
        for (int g = 0; g < G && g < 4096; g++) {
            double a = -INFINITY, b = -INFINITY;
            for (int j = 0; j < per; j++) {
                const double v = x[g * per + j];
                if (v > a) b = a, a = v;
                else if (v > b) b = v;
            }
            gs[g] = 1.0 / (1.0 + exp(-a)) + 1.0 / (1.0 + exp(-b));
        }
        for (int t = 0; t < p->topk_groups; t++) {
            int best = -1;
            for (int g = 0; g < G; g++)
                if (gs[g] > -INFINITY && (best < 0 || gs[g] > gs[best])) best = g;
            chosen[nch++] = best;
            gs[best] = -INFINITY;
        }
    } else {
        chosen[nch++] = 0;
    }
    /* top K by logit over the chosen groups: insertion into a short sorted list */
    double bv[EXPERT_LOAD_MAX_K];
    int bi[EXPERT_LOAD_MAX_K], nb = 0;
    for (int c = 0; c < nch; c++) {
        const int g = chosen[c];
        for (int j = 0; j < per; j++) {
            const int e = g * per + j;
            const double v = x[e];
            if (nb == K && v <= bv[K - 1]) continue;
            int pos = nb < K ? nb++ : K - 1;
            while (pos > 0 && bv[pos - 1] < v) {
                bv[pos] = bv[pos - 1];
                bi[pos] = bi[pos - 1];
                pos--;
            }
            bv[pos] = v;
            bi[pos] = e;
        }
    }
    for (int i = 0; i < K; i++) out[i] = (int16_t)bi[i];
}

pl_status expert_gen_run(const expert_gen_params *p, int n_windows, uint64_t seed, expert_load **out, char *msg,
                         size_t len) {
    if (!p || !out) return pl_fail(msg, len, PL_ERR_INVALID, "expert_gen_run: no settings or output");
    *out = NULL;
    pl_status st = expert_gen_params_check(p, msg, len);
    if (st != PL_OK) return st;
    const int L = p->layers, E = p->experts, Z = p->topics, M = p->route_tokens, K = p->top_k, T = p->samples;
    const int G = p->groups > 1 ? p->groups : 1;
    expert_load *ld = NULL;
    if ((st = expert_load_create(n_windows, L, E, T, K, 1, &ld, msg, len)) != PL_OK) return st;
    ld->top_k = K;
    snprintf(ld->source, sizeof ld->source, "generated");
    double *prob = malloc((size_t)L * Z * E * sizeof *prob);      /* p_{l,z}(e) */
    int16_t *pool = malloc((size_t)L * Z * M * K * sizeof *pool); /* routed tokens' experts */
    double *x = malloc((size_t)E * sizeof *x), *b = malloc((size_t)E * sizeof *b);
    double *u = malloc((size_t)Z * E * sizeof *u), *gz = malloc((size_t)Z * G * sizeof *gz);
    double *pi = malloc((size_t)Z * sizeof *pi), *eta = calloc((size_t)L * E, sizeof *eta);
    double *cdf = malloc((size_t)Z * sizeof *cdf);
    if (!prob || !pool || !x || !b || !u || !gz || !pi || !eta || !cdf) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory generating expert loads");
        goto out;
    }
    pl_rng rng;
    pl_rng_seed(&rng, seed);
    normal_src ns = {&rng, 0, 0};
    const double rho = p->group_share, rest = sqrt(1.0 - rho * rho);
    for (int l = 0; l < L; l++) {
        const double s = pl_rng_uniform(&rng);
        const double pop = p->popularity_sd[0] + (p->popularity_sd[1] - p->popularity_sd[0]) * s;
        const double aff = p->topic_affinity[0] + (p->topic_affinity[1] - p->topic_affinity[0]) * s;
        for (int e = 0; e < E; e++) b[e] = pop * nrm(&ns);
        for (int i = 0; i < Z * G; i++) gz[i] = nrm(&ns);
        for (int z = 0; z < Z; z++)
            for (int e = 0; e < E; e++) u[(size_t)z * E + e] = aff * (rho * gz[z * G + e / (E / G)] + rest * nrm(&ns));
        for (int z = 0; z < Z; z++) {
            double *pr = prob + ((size_t)l * Z + z) * E;
            memset(pr, 0, (size_t)E * sizeof *pr);
            int16_t *pz = pool + (((size_t)l * Z + z) * M) * K;
            for (int t = 0; t < M; t++) {
                for (int e = 0; e < E; e++) x[e] = b[e] + u[(size_t)z * E + e] + nrm(&ns);
                route_token(p, x, pz + (size_t)t * K);
                for (int j = 0; j < K; j++) pr[pz[(size_t)t * K + j]] += 1.0 / ((double)M * K);
            }
        }
    }
    /* the windows */
    dirichlet(&ns, p->topic_concentration, Z, pi);
    const double NK = p->tokens_per_window * K;
    for (int w = 0; w < n_windows; w++) {
        if (w > 0) {
            if (p->shift_prob > 0 && pl_rng_uniform(&rng) < p->shift_prob) {
                dirichlet(&ns, p->topic_concentration, Z, pi);
            } else if (p->walk_topic > 0) {
                double s = 0;
                for (int z = 0; z < Z; z++) s += (pi[z] *= exp(p->walk_topic * nrm(&ns)));
                for (int z = 0; z < Z; z++) pi[z] /= s;
            }
            if (p->walk_expert > 0)
                for (size_t i = 0; i < (size_t)L * E; i++) eta[i] += p->walk_expert * nrm(&ns);
        }
        double acc = 0;
        for (int z = 0; z < Z; z++) cdf[z] = (acc += pi[z]);
        for (int l = 0; l < L; l++) {
            double *row = expert_load_row(ld, w, l), tot = 0;
            for (int e = 0; e < E; e++) {
                double m = 0;
                for (int z = 0; z < Z; z++) m += pi[z] * prob[((size_t)l * Z + z) * E + e];
                row[e] = m * exp(eta[(size_t)l * E + e]);
                tot += row[e];
            }
            for (int e = 0; e < E; e++) {
                const double mean = tot > 0 ? NK * row[e] / tot : 0.0;
                const double c = mean + sqrt(mean) * nrm(&ns);
                row[e] = c > 0 ? floor(c + 0.5) : 0.0;
            }
            if (T > 0) {
                int16_t *smp = (int16_t *)expert_load_samples_c(ld, w, l);
                for (int t = 0; t < T; t++) {
                    const double r = pl_rng_uniform(&rng) * acc;
                    int z = 0;
                    while (z < Z - 1 && cdf[z] < r) z++;
                    const int i = pl_rng_int(&rng, M);
                    memcpy(smp + (size_t)t * K, pool + (((size_t)l * Z + z) * M + i) * K, (size_t)K * sizeof *smp);
                }
            }
        }
    }
    *out = ld;
    ld = NULL;
out:
    expert_load_destroy(ld);
    free(prob);
    free(pool);
    free(x);
    free(b);
    free(u);
    free(gz);
    free(pi);
    free(eta);
    free(cdf);
    return st;
}
