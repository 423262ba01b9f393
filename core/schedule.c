/* schedule.c: schedule names, parsing and validation. */
#include "schedule.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *schedule_order_name(schedule_order o) {
    switch (o) {
    case SCHED_GPIPE: return "gpipe";
    case SCHED_1F1B: return "1f1b";
    case SCHED_INTERLEAVED: return "interleaved";
    default: return "unknown";
    }
}

pl_status schedule_parse_order(const char *text, schedule_order *out, char *msg, size_t len) {
    for (int o = 0; o < SCHED_ORDER_COUNT; o++)
        if (text && strcmp(text, schedule_order_name((schedule_order)o)) == 0) {
            *out = (schedule_order)o;
            return PL_OK;
        }
    return pl_fail(msg, len, PL_ERR_SCHEDULE,
                   "unknown schedule '%s' (use gpipe, 1f1b or interleaved)", text ? text : "");
}

pl_status schedule_parse_micro_batches(const char *text, int *out, char *msg, size_t len) {
    if (!text || !*text)
        return pl_fail(msg, len, PL_ERR_SCHEDULE, "micro-batch count is empty (use a positive integer)");
    errno = 0;
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (errno || *end || v <= 0 || v > 1000000)
        return pl_fail(msg, len, PL_ERR_SCHEDULE,
                       "micro-batch count '%s' is not a positive integer", text);
    *out = (int)v;
    return PL_OK;
}

pl_status schedule_validate(const schedule *s, int batch, char *msg, size_t len) {
    if (s->micro_batches < 1)
        return pl_fail(msg, len, PL_ERR_SCHEDULE, "micro-batch count must be at least 1");
    if (batch % s->micro_batches != 0)
        return pl_fail(msg, len, PL_ERR_SCHEDULE,
                       "micro-batch count %d does not divide the batch of %d", s->micro_batches, batch);
    if (s->order < 0 || s->order >= SCHED_ORDER_COUNT)
        return pl_fail(msg, len, PL_ERR_SCHEDULE, "unknown schedule order");
    if (s->chunks < 1)
        return pl_fail(msg, len, PL_ERR_SCHEDULE, "chunks per device must be at least 1");
    if (s->chunks != 1 && s->order != SCHED_INTERLEAVED)
        return pl_fail(msg, len, PL_ERR_SCHEDULE, "chunks > 1 needs the interleaved schedule");
    return PL_OK;
}
