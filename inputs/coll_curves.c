/*
 * coll_curves.c: the collective kinds' names and the checks of measured
 * collective data (coll_curves.h).
 */
#include "coll_curves.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

static pl_status fail(char *msg, size_t len, const char *fmt, ...) {
    if (msg && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return PL_ERR_INVALID;
}

const char *coll_kind_name(coll_kind k) {
    switch (k) {
    case COLL_ALL_REDUCE: return "all-reduce";
    case COLL_ALL_GATHER: return "all-gather";
    case COLL_REDUCE_SCATTER: return "reduce-scatter";
    default: return "unknown";
    }
}

pl_status coll_measured_validate(const coll_measured *m, char *msg, size_t len) {
    if (!m) return fail(msg, len, "no collectives");
    int any = 0;
    for (int k = 0; k < COLL_KIND_COUNT; k++) {
        const coll_ab *a = &m->model[k];
        if (!a->fitted) continue;
        any = 1;
        if (!isfinite(a->base_us) || a->base_us < 0 || !isfinite(a->alpha_us) || a->alpha_us < 0)
            return fail(msg, len, "%s: base and alpha latencies must be finite and >= 0", coll_kind_name((coll_kind)k));
        if (!isfinite(a->busbw) || !(a->busbw > 0))
            return fail(msg, len, "%s: bus bandwidth must be positive and finite", coll_kind_name((coll_kind)k));
    }
    if (!any) return fail(msg, len, "no collective kind has fitted constants");
    if (m->n_curves < 0 || m->n_curves > COLL_MAX_CURVES)
        return fail(msg, len, "%d curves (at most %d)", m->n_curves, COLL_MAX_CURVES);
    for (int i = 0; i < m->n_curves; i++) {
        const coll_curve *c = &m->curves[i];
        if (c->kind < 0 || c->kind >= COLL_KIND_COUNT) return fail(msg, len, "curve %d: unknown kind", i);
        const char *kn = coll_kind_name(c->kind);
        if (c->ranks < 2 || c->ranks > 1024) return fail(msg, len, "curve %d (%s): ranks %d not in 2..1024", i, kn, c->ranks);
        if (c->n < 2 || c->n > COLL_CURVE_MAX_POINTS)
            return fail(msg, len, "curve %d (%s over %d ranks): %d points; a curve needs 2 to %d sizes", i, kn,
                        c->ranks, c->n, COLL_CURVE_MAX_POINTS);
        if (!m->model[c->kind].fitted)
            return fail(msg, len, "curve %d (%s): no fitted model for its kind to extrapolate with", i, kn);
        for (int j = 0; j < c->n; j++) {
            if (!isfinite(c->bytes[j]) || !(c->bytes[j] > 0) || !isfinite(c->us[j]) || !(c->us[j] > 0))
                return fail(msg, len, "curve %d (%s over %d ranks), point %d: sizes and times must be positive and finite",
                            i, kn, c->ranks, j);
            if (j > 0 && !(c->bytes[j] > c->bytes[j - 1]))
                return fail(msg, len, "curve %d (%s over %d ranks): sizes must be ascending (point %d)", i, kn,
                            c->ranks, j);
        }
        for (int j = 0; j < i; j++)
            if (m->curves[j].kind == c->kind && m->curves[j].ranks == c->ranks)
                return fail(msg, len, "two curves of %s over %d ranks", kn, c->ranks);
    }
    return PL_OK;
}

const coll_curve *coll_measured_curve(const coll_measured *m, coll_kind k, int ranks) {
    if (!m) return NULL;
    for (int i = 0; i < m->n_curves; i++)
        if (m->curves[i].kind == k && m->curves[i].ranks == ranks) return &m->curves[i];
    return NULL;
}
