/*
 * schedule.h: how a step is split into micro-batches and in what order each
 * device runs their forward and backward passes.
 *
 *   gpipe        all forwards of all micro-batches, then all backwards
 *   1f1b         PipeDream-Flush: warm-up forwards, then alternate one
 *                forward and one backward, then drain the backwards
 *   interleaved  1F1B with v chunks per device (contiguous chunk placements)
 *
 * The optimizer step (AdamW) runs on each device, for the parameters placed
 * there, after that device's last backward.
 */
#ifndef PLACER_CORE_SCHEDULE_H
#define PLACER_CORE_SCHEDULE_H

#include <stddef.h>

#include "status.h"

typedef enum { SCHED_GPIPE = 0, SCHED_1F1B, SCHED_INTERLEAVED, SCHED_ORDER_COUNT } schedule_order;

typedef struct {
    int micro_batches;    /* m; divides the batch */
    schedule_order order; /* gpipe, 1f1b, interleaved */
    int chunks;           /* v, chunks per device for interleaved; 1 otherwise */
} schedule;

/* "gpipe", "1f1b", "interleaved". */
const char *schedule_order_name(schedule_order o);

/* Parse an order name (case-sensitive). PL_ERR_SCHEDULE with a message
 * listing the valid names on failure. */
pl_status schedule_parse_order(const char *text, schedule_order *out, char *msg, size_t len);

/* Parse a micro-batch count: a positive decimal integer. */
pl_status schedule_parse_micro_batches(const char *text, int *out, char *msg, size_t len);

/* Check s against a batch size: m >= 1, m divides batch, chunks >= 1, and
 * chunks == 1 unless the order is interleaved. PL_ERR_SCHEDULE on failure. */
pl_status schedule_validate(const schedule *s, int batch, char *msg, size_t len);

/* A schedule of m micro-batches with the given order and one chunk. */
static inline schedule schedule_make(int m, schedule_order o) {
    schedule s = {m, o, 1};
    return s;
}

#endif
