/*
 * hw_timer.c: the engine-backed timer (see hw_timer.h).
 *
 * Placeholder until the engine's executor interface lands in hw/: every
 * call reports PL_ERR_UNSUPPORTED, so the offline paths (synthetic timer,
 * --from-measurements) work and the hardware paths say why they cannot.
 */
#include "hw_timer.h"

#include <stdlib.h>

struct calib_hw_timer {
    int unused;
};

pl_status calib_hw_timer_create(const char *backend, const graph *g, const int *gpus, int n_devices, uint64_t seed,
                                calib_hw_timer **out, calib_timer *timer, char *msg, size_t len) {
    (void)g; (void)gpus; (void)n_devices; (void)seed; (void)timer;
    if (out) *out = NULL;
    return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "the %s engine is not in this build yet",
                   backend ? backend : "(null)");
}

void calib_hw_timer_destroy(calib_hw_timer *t) { free(t); }

pl_status calib_hw_timer_trace(calib_hw_timer *t, const int *node_placement, const schedule *s, int64_t mem_cap,
                               const char *path, char *msg, size_t len) {
    (void)t; (void)node_placement; (void)s; (void)mem_cap; (void)path;
    return pl_fail(msg, len, PL_ERR_UNSUPPORTED, "the engine cannot write traces in this build");
}
