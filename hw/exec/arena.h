/*
 * arena.h: the engine's capped allocator, host-side bookkeeping only.
 *
 * Each logical device owns one arena: a range of offsets [0, cap) that the
 * executor sub-allocates first-fit, with coalescing on free. The arena never
 * touches device memory itself. The executor runs a whole step's allocation
 * sequence through it when a program is built (a dry run), learns each buffer's
 * offset and the high-water mark, and only then makes one real allocation
 * per device of exactly that size. So a placement that does not fit is an
 * OOM before any device memory is taken, and the real step allocates
 * nothing.
 *
 * Offsets are aligned to HW_ARENA_ALIGN bytes.
 */
#ifndef PLACER_HW_ARENA_H
#define PLACER_HW_ARENA_H

#include <stdint.h>

#include "status.h"

#define HW_ARENA_ALIGN 256

typedef struct hw_arena hw_arena;

/* Create an arena of cap bytes (cap > 0). NULL on host OOM. */
hw_arena *hw_arena_create(int64_t cap);

/* Free the bookkeeping. Accepts NULL. */
void hw_arena_destroy(hw_arena *a);

/* Allocate bytes (rounded up to the alignment; 0 is treated as 1). Returns
 * PL_OK and the offset, or PL_ERR_DEVICE_OOM when no free range fits under
 * the cap (the arena is unchanged), or PL_ERR_NOMEM on host OOM. */
pl_status hw_arena_alloc(hw_arena *a, int64_t bytes, int64_t *off);

/* Free the block that starts at off. PL_ERR_INVALID if no block starts there. */
pl_status hw_arena_free(hw_arena *a, int64_t off);

/* Bytes in use now, the largest end offset ever reached (the memory the
 * arena really needs) and the largest bytes-in-use ever. */
int64_t hw_arena_used(const hw_arena *a);
int64_t hw_arena_high_water(const hw_arena *a);
int64_t hw_arena_peak_used(const hw_arena *a);
int64_t hw_arena_cap(const hw_arena *a);
/* Blocks currently allocated. */
int hw_arena_live_blocks(const hw_arena *a);

#endif
