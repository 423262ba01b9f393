/*
 * expert_map.c: the per-layer slot -> expert maps of mixture-of-experts
 * placements (expert_map.h): shape checks, validation, the derived counts
 * and replica lists, and the weights a change of map moves.
 */
#include "expert_map.h"

#include <stdlib.h>
#include <string.h>

pl_status expert_map_check_shape(int n_layers, int n_experts, int n_slots, int n_gpus, int gpus_per_node, char *msg,
                                 size_t len) {
    if (n_layers < 1 || n_layers > EXPERT_MAP_MAX_LAYERS)
        return pl_fail(msg, len, PL_ERR_INVALID, "MoE layers must be 1..%d, not %d", EXPERT_MAP_MAX_LAYERS, n_layers);
    if (n_experts < 1 || n_experts > EXPERT_MAP_MAX_EXPERTS)
        return pl_fail(msg, len, PL_ERR_INVALID, "experts must be 1..%d, not %d", EXPERT_MAP_MAX_EXPERTS, n_experts);
    if (n_gpus < 1 || n_gpus > EXPERT_MAP_MAX_GPUS)
        return pl_fail(msg, len, PL_ERR_INVALID, "GPUs must be 1..%d, not %d", EXPERT_MAP_MAX_GPUS, n_gpus);
    if (gpus_per_node < 1 || n_gpus % gpus_per_node)
        return pl_fail(msg, len, PL_ERR_INVALID, "%d GPUs a node does not divide %d GPUs", gpus_per_node, n_gpus);
    if (n_slots < n_experts || n_slots > EXPERT_MAP_MAX_SLOTS)
        return pl_fail(msg, len, PL_ERR_INVALID, "slots must be %d (the experts) .. %d, not %d", n_experts,
                       EXPERT_MAP_MAX_SLOTS, n_slots);
    if (n_slots % n_gpus)
        return pl_fail(msg, len, PL_ERR_INVALID, "%d slots are not divisible by %d GPUs", n_slots, n_gpus);
    return PL_OK;
}

pl_status expert_map_create(int n_layers, int n_experts, int n_slots, int n_gpus, int gpus_per_node, expert_map **out,
                            char *msg, size_t len) {
    if (!out) return pl_fail(msg, len, PL_ERR_INVALID, "expert_map_create: no output");
    *out = NULL;
    pl_status st = expert_map_check_shape(n_layers, n_experts, n_slots, n_gpus, gpus_per_node, msg, len);
    if (st != PL_OK) return st;
    expert_map *m = calloc(1, sizeof *m);
    if (!m) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory for an expert map");
    m->phy2log = malloc((size_t)n_layers * n_slots * sizeof *m->phy2log);
    if (!m->phy2log) {
        free(m);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory for an expert map");
    }
    memset(m->phy2log, 0xff, (size_t)n_layers * n_slots * sizeof *m->phy2log); /* -1 */
    m->n_layers = n_layers;
    m->n_experts = n_experts;
    m->n_slots = n_slots;
    m->n_gpus = n_gpus;
    m->gpus_per_node = gpus_per_node;
    *out = m;
    return PL_OK;
}

void expert_map_destroy(expert_map *m) {
    if (!m) return;
    free(m->phy2log);
    free(m);
}

pl_status expert_map_clone(const expert_map *m, expert_map **out, char *msg, size_t len) {
    if (!m) return pl_fail(msg, len, PL_ERR_INVALID, "expert_map_clone: no map");
    pl_status st = expert_map_create(m->n_layers, m->n_experts, m->n_slots, m->n_gpus, m->gpus_per_node, out, msg, len);
    if (st != PL_OK) return st;
    memcpy((*out)->phy2log, m->phy2log, (size_t)m->n_layers * m->n_slots * sizeof *m->phy2log);
    return PL_OK;
}

pl_status expert_map_validate(const expert_map *m, char *msg, size_t len) {
    if (!m || !m->phy2log) return pl_fail(msg, len, PL_ERR_INVALID, "no expert map");
    int *cnt = calloc((size_t)m->n_experts, sizeof *cnt);
    if (!cnt) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory checking an expert map");
    pl_status st = PL_OK;
    for (int l = 0; l < m->n_layers && st == PL_OK; l++) {
        const int32_t *p = expert_map_layer_c(m, l);
        memset(cnt, 0, (size_t)m->n_experts * sizeof *cnt);
        for (int s = 0; s < m->n_slots; s++) {
            if (p[s] < 0 || p[s] >= m->n_experts) {
                st = pl_fail(msg, len, PL_ERR_INVALID, "layer %d: slot %d holds expert %d, outside 0..%d", l, s,
                             (int)p[s], m->n_experts - 1);
                break;
            }
            cnt[p[s]]++;
        }
        for (int e = 0; e < m->n_experts && st == PL_OK; e++)
            if (!cnt[e]) st = pl_fail(msg, len, PL_ERR_INVALID, "layer %d: expert %d has no slot", l, e);
    }
    free(cnt);
    return st;
}

void expert_map_logcnt(const expert_map *m, int l, int *cnt) {
    memset(cnt, 0, (size_t)m->n_experts * sizeof *cnt);
    const int32_t *p = expert_map_layer_c(m, l);
    for (int s = 0; s < m->n_slots; s++)
        if (p[s] >= 0 && p[s] < m->n_experts) cnt[p[s]]++;
}

int expert_map_max_replicas(const expert_map *m) {
    int best = 0;
    int *cnt = malloc((size_t)m->n_experts * sizeof *cnt);
    if (!cnt) return -1;
    for (int l = 0; l < m->n_layers; l++) {
        expert_map_logcnt(m, l, cnt);
        for (int e = 0; e < m->n_experts; e++)
            if (cnt[e] > best) best = cnt[e];
    }
    free(cnt);
    return best;
}

int expert_map_log2phy(const expert_map *m, int l, int width, int32_t *out) {
    for (size_t i = 0; i < (size_t)m->n_experts * width; i++) out[i] = -1;
    const int32_t *p = expert_map_layer_c(m, l);
    for (int s = 0; s < m->n_slots; s++) {
        const int e = p[s];
        if (e < 0 || e >= m->n_experts) continue;
        int32_t *row = out + (size_t)e * width;
        int j = 0;
        while (j < width && row[j] >= 0) j++;
        if (j == width) return -1;
        row[j] = s;
    }
    return 0;
}

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int64_t expert_map_moved(const expert_map *from, const expert_map *to) {
    if (!from || !to || from->n_layers != to->n_layers || from->n_slots != to->n_slots ||
        from->n_gpus != to->n_gpus || from->n_experts != to->n_experts)
        return -1;
    const int S = expert_map_slots_per_gpu(to);
    int32_t *x = malloc(2 * (size_t)S * sizeof *x);
    if (!x) return -1;
    int32_t *y = x + S;
    int64_t moved = 0;
    for (int l = 0; l < to->n_layers; l++) {
        const int32_t *a = expert_map_layer_c(from, l), *b = expert_map_layer_c(to, l);
        for (int g = 0; g < to->n_gpus; g++) {
            /* the multiset difference to minus from on GPU g, by merging the sorted lists */
            memcpy(x, a + (size_t)g * S, (size_t)S * sizeof *x);
            memcpy(y, b + (size_t)g * S, (size_t)S * sizeof *y);
            qsort(x, (size_t)S, sizeof *x, cmp_i32);
            qsort(y, (size_t)S, sizeof *y, cmp_i32);
            int i = 0, j = 0;
            while (j < S) {
                if (i < S && x[i] == y[j]) i++, j++;
                else if (i < S && x[i] < y[j]) i++;
                else moved++, j++;
            }
        }
    }
    free(x);
    return moved;
}
