/*
 * design.c: which placements calibration measures. A fit is only as good
 * as the variety of what it saw, so the set mixes the placements placers
 * actually produce (single devices, contiguous pipelines, even layer
 * splits) with deliberately odd ones (random per block, random per node:
 * many cut edges, heavy transfers), under m in {1, 2, 4} and both orders.
 */
#include "fit.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Contiguous placement of n nodes in `stages` stages cut at sorted cuts,
 * stage k on dev[k]. */
static void contiguous(int *pl, int n, int stages, const int *cuts, const int *dev) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        while (k < stages - 1 && i >= cuts[k]) k++;
        pl[i] = dev[k];
    }
}

/* Devices for `stages` stages: a random permutation cycled, so neighbouring
 * stages differ whenever there are two devices or more. */
static void stage_devices(pl_rng *r, int n_devices, int stages, int *dev) {
    int perm[PLACEMENT_MAX_DEVICES];
    for (int d = 0; d < n_devices; d++) perm[d] = d;
    pl_rng_shuffle(r, perm, n_devices);
    for (int k = 0; k < stages; k++) dev[k] = perm[k % n_devices];
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Sorted distinct cut points in [1, n). */
static void random_cuts(pl_rng *r, int n, int k, int *cuts) {
    for (int i = 0; i < k; i++) {
        int c, dup;
        do {
            c = 1 + pl_rng_int(r, n - 1);
            dup = 0;
            for (int j = 0; j < i; j++) dup |= cuts[j] == c;
        } while (dup);
        cuts[i] = c;
    }
    qsort(cuts, (size_t)k, sizeof *cuts, cmp_int);
}

pl_status calib_design(const graph *g, int n_devices, int count, uint64_t seed, int *placements,
                       schedule *sched, char *msg, size_t len) {
    if (!g || !placements || !sched || count < 1 || n_devices < 1 || n_devices > PLACEMENT_MAX_DEVICES)
        return pl_fail(msg, len, PL_ERR_INVALID, "bad design request");
    int n = g->n_nodes, L = g->cfg.n_layers;
    int ms[3], n_ms = 0;
    for (int m = 1; m <= 4; m *= 2)
        if (g->cfg.batch % m == 0) ms[n_ms++] = m;
    pl_rng r;
    pl_rng_seed(&r, seed);
    int *pl = placements;
    int made = 0, tries = 0;
    int cuts[8], dev[8];
    while (made < count) {
        if (++tries > 200 * count + 1000)
            return pl_fail(msg, len, PL_ERR_INVALID, "could not find %d distinct placements for %d devices", count,
                           n_devices);
        int *cur = pl + (size_t)made * n;
        /* the first entries are the single devices, so each is measured */
        int kind = made < n_devices ? 0 : pl_rng_int(&r, 100);
        if (kind < 10 || n_devices == 1) {
            int d = made < n_devices ? made : pl_rng_int(&r, n_devices);
            for (int i = 0; i < n; i++) cur[i] = d;
        } else if (kind < 45) { /* contiguous, random cuts, 2..4 stages */
            int stages = 2 + pl_rng_int(&r, 3);
            if (stages > n) stages = n;
            random_cuts(&r, n, stages - 1, cuts);
            stage_devices(&r, n_devices, stages, dev);
            contiguous(cur, n, stages, cuts, dev);
        } else if (kind < 60) { /* even layer split: blocks spread evenly over the stages */
            int stages = n_devices < 4 ? n_devices : 2 + pl_rng_int(&r, n_devices - 1);
            stage_devices(&r, n_devices, stages, dev);
            for (int i = 0; i < n; i++) {
                int layer = g->nodes[i].layer; /* -1 embedding, L after the blocks */
                int b = layer < 0 ? 0 : layer >= L ? L - 1 : layer;
                cur[i] = dev[(b * stages) / L];
            }
        } else if (kind < 85) { /* random device per block */
            int bd[258]; /* embedding, up to 256 blocks, the tail; deeper graphs share the last */
            int nb = L + 2 < 258 ? L + 2 : 258;
            for (int b = 0; b < nb; b++) bd[b] = pl_rng_int(&r, n_devices);
            for (int i = 0; i < n; i++) {
                int b = g->nodes[i].layer + 1;
                cur[i] = bd[b < 0 ? 0 : b >= nb ? nb - 1 : b];
            }
        } else { /* random device per node */
            for (int i = 0; i < n; i++) cur[i] = pl_rng_int(&r, n_devices);
        }
        schedule s = schedule_make(ms[pl_rng_int(&r, n_ms)], pl_rng_int(&r, 2) ? SCHED_1F1B : SCHED_GPIPE);
        int dup = 0;
        for (int j = 0; j < made && !dup; j++)
            dup = sched[j].micro_batches == s.micro_batches && sched[j].order == s.order &&
                  !memcmp(pl + (size_t)j * n, cur, sizeof(int) * (size_t)n);
        if (dup) continue;
        sched[made++] = s;
    }
    return PL_OK;
}
