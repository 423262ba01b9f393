/*
 * arena.c: first-fit allocation over a sorted list of free ranges. The lists
 * stay short (a step holds at most a few hundred live buffers), so linear
 * scans are fine and keep the code obvious.
 */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t off, len;
} range;

struct hw_arena {
    int64_t cap;        /* bytes */
    range *free;        /* free ranges, sorted by offset, never adjacent */
    int n_free, cap_free;
    range *live;        /* allocated blocks (unsorted) */
    int n_live, cap_live;
    int64_t used, high_water, peak_used;
};

static int grow(range **a, int *cap, int need) {
    if (need <= *cap) return 1;
    int n = *cap ? *cap * 2 : 32;
    while (n < need) n *= 2;
    range *p = realloc(*a, sizeof *p * (size_t)n);
    if (!p) return 0;
    *a = p;
    *cap = n;
    return 1;
}

hw_arena *hw_arena_create(int64_t cap) {
    if (cap <= 0) return NULL;
    hw_arena *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->cap = cap;
    if (!grow(&a->free, &a->cap_free, 1)) {
        free(a);
        return NULL;
    }
    a->free[0] = (range){0, cap};
    a->n_free = 1;
    return a;
}

void hw_arena_destroy(hw_arena *a) {
    if (!a) return;
    free(a->free);
    free(a->live);
    free(a);
}

pl_status hw_arena_alloc(hw_arena *a, int64_t bytes, int64_t *off) {
    if (bytes < 1) bytes = 1;
    int64_t len = (bytes + HW_ARENA_ALIGN - 1) / HW_ARENA_ALIGN * HW_ARENA_ALIGN;
    int i;
    for (i = 0; i < a->n_free; i++)
        if (a->free[i].len >= len) break;
    if (i == a->n_free) return PL_ERR_DEVICE_OOM;
    /* the free list never holds more than live + 1 ranges: reserve that
     * room now so that hw_arena_free never allocates */
    if (!grow(&a->live, &a->cap_live, a->n_live + 1) || !grow(&a->free, &a->cap_free, a->n_live + 2))
        return PL_ERR_NOMEM;
    int64_t o = a->free[i].off;
    a->free[i].off += len;
    a->free[i].len -= len;
    if (a->free[i].len == 0) {
        memmove(&a->free[i], &a->free[i + 1], sizeof(range) * (size_t)(a->n_free - i - 1));
        a->n_free--;
    }
    a->live[a->n_live++] = (range){o, len};
    a->used += len;
    if (a->used > a->peak_used) a->peak_used = a->used;
    if (o + len > a->high_water) a->high_water = o + len;
    *off = o;
    return PL_OK;
}

pl_status hw_arena_free(hw_arena *a, int64_t off) {
    int k;
    for (k = a->n_live - 1; k >= 0; k--)
        if (a->live[k].off == off) break;
    if (k < 0) return PL_ERR_INVALID;
    range r = a->live[k];
    a->live[k] = a->live[--a->n_live];
    a->used -= r.len;
    /* insert into the sorted free list, merging with neighbours */
    int i = 0;
    while (i < a->n_free && a->free[i].off < r.off) i++;
    int merge_prev = i > 0 && a->free[i - 1].off + a->free[i - 1].len == r.off;
    int merge_next = i < a->n_free && r.off + r.len == a->free[i].off;
    if (merge_prev && merge_next) {
        a->free[i - 1].len += r.len + a->free[i].len;
        memmove(&a->free[i], &a->free[i + 1], sizeof(range) * (size_t)(a->n_free - i - 1));
        a->n_free--;
    } else if (merge_prev) {
        a->free[i - 1].len += r.len;
    } else if (merge_next) {
        a->free[i].off = r.off;
        a->free[i].len += r.len;
    } else {
        /* room was reserved by hw_arena_alloc */
        memmove(&a->free[i + 1], &a->free[i], sizeof(range) * (size_t)(a->n_free - i));
        a->free[i] = r;
        a->n_free++;
    }
    return PL_OK;
}

int64_t hw_arena_used(const hw_arena *a) { return a->used; }
int64_t hw_arena_high_water(const hw_arena *a) { return a->high_water; }
int64_t hw_arena_peak_used(const hw_arena *a) { return a->peak_used; }
int64_t hw_arena_cap(const hw_arena *a) { return a->cap; }
int hw_arena_live_blocks(const hw_arena *a) { return a->n_live; }
