/*
 * sim_arena.h: the simulator's model of an engine arena (hw/exec/arena.c):
 * first fit over a sorted list of free ranges below `top`, with [top, inf)
 * free too (no cap here: the OOM verdict compares the high-water mark with
 * the cap). Header-only: the three operations sit on sim_run's hot path
 * (several calls per simulated node phase) and must inline into it.
 */
#ifndef PLACER_SIM_ARENA_H
#define PLACER_SIM_ARENA_H

#include <stdint.h>

/* Small helpers of the issue loop that the compiler would otherwise call
 * out of line (about 8% of sim_run's instructions went to their calls). */
#if defined(__GNUC__)
#define SIM_HOT_INLINE inline __attribute__((always_inline))
#else
#define SIM_HOT_INLINE inline
#endif

typedef struct {
    int64_t off, len;
} sim_range;

/* A device arena: first-fit over sorted free ranges below `top`; [top, inf)
 * is free too (no cap: the verdict compares the high-water mark). */
typedef struct {
    sim_range *fr; /* free ranges below top, sorted, never adjacent */
    int n_fr;
    int64_t top;   /* end of the highest allocated block */
    int64_t high;  /* high-water mark */
} sim_arena;

static SIM_HOT_INLINE int64_t arena_alloc(sim_arena *a, int64_t len) {
    sim_range *fr = a->fr;
    for (int i = 0; i < a->n_fr; i++)
        if (fr[i].len >= len) {
            int64_t o = fr[i].off;
            fr[i].off += len;
            fr[i].len -= len;
            if (fr[i].len == 0) {
                for (int k = i + 1; k < a->n_fr; k++) fr[k - 1] = fr[k];
                a->n_fr--;
            }
            return o;
        }
    int64_t o = a->top;
    a->top += len;
    if (a->top > a->high) a->high = a->top;
    return o;
}

/* What allocating len and freeing it right away leaves behind: nothing,
 * except a new high-water mark when it had to go on top. */
static inline void arena_peek(sim_arena *a, int64_t len) {
    for (int i = 0; i < a->n_fr; i++)
        if (a->fr[i].len >= len) return;
    if (a->top + len > a->high) a->high = a->top + len;
}

static SIM_HOT_INLINE void arena_free(sim_arena *a, int64_t off, int64_t len) {
    sim_range *fr = a->fr;
    int n = a->n_fr;
    if (off + len == a->top) { /* the top block: give it back to the tail */
        a->top = off;
        if (n > 0 && fr[n - 1].off + fr[n - 1].len == off) {
            a->top = fr[n - 1].off;
            a->n_fr = n - 1;
        }
        return;
    }
    int i = n;
    while (i > 0 && fr[i - 1].off > off) i--;
    int mp = i > 0 && fr[i - 1].off + fr[i - 1].len == off;
    int mn = i < n && off + len == fr[i].off;
    if (mp && mn) {
        fr[i - 1].len += len + fr[i].len;
        for (int k = i + 1; k < n; k++) fr[k - 1] = fr[k];
        a->n_fr = n - 1;
    } else if (mp) {
        fr[i - 1].len += len;
    } else if (mn) {
        fr[i].off = off;
        fr[i].len += len;
    } else {
        for (int k = n; k > i; k--) fr[k] = fr[k - 1];
        fr[i].off = off;
        fr[i].len = len;
        a->n_fr = n + 1;
    }
}

#endif
