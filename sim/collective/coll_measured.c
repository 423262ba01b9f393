/*
 * coll_measured.c: collective times from measured curves and the fitted
 * ring model (coll_measured.h), layered over the cluster model of
 * collective.c.
 *
 * Interpolation is linear in log(bytes) -> log(us) between neighbouring
 * measured sizes: collective time is close to a power law between two
 * sizes a factor of 4 apart (the profiler's ladder), where a straight line
 * in linear space would overstate the middle. Outside the measured range
 * the fitted model carries the curve's shape, scaled to pass through the
 * end point.
 */
#include "coll_measured.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static pl_status fail(char *msg, size_t len, const char *fmt, ...) {
    if (msg && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return PL_ERR_INVALID;
}

double coll_ring_steps(coll_kind k, int n) {
    if (n < 2) return 0.0;
    return (k == COLL_ALL_REDUCE ? 2.0 : 1.0) * (n - 1);
}

double coll_ring_frac(coll_kind k, int n) {
    if (n < 2) return 0.0;
    return coll_ring_steps(k, n) / n;
}

double coll_ab_time_us(const coll_ab *m, coll_kind k, int n, double bytes) {
    if (n < 2) return 0.0;
    return m->base_us + coll_ring_steps(k, n) * m->alpha_us + coll_ring_frac(k, n) * bytes / m->busbw * 1e6;
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

/* The curve's time at bytes (see the file comment). */
static double curve_time(const coll_curve *c, const coll_ab *a, double bytes) {
    const int n = c->n;
    if (bytes <= c->bytes[0] || bytes >= c->bytes[n - 1]) {
        const int e = bytes <= c->bytes[0] ? 0 : n - 1;
        if (bytes == c->bytes[e]) return c->us[e];
        const double at_end = coll_ab_time_us(a, c->kind, c->ranks, c->bytes[e]);
        const double t = c->us[e] * (coll_ab_time_us(a, c->kind, c->ranks, bytes) / at_end);
        return isfinite(t) && t >= 0 ? t : c->us[e]; /* a model of ~0 us (underflow): flat */
    }
    int j = 1;
    while (c->bytes[j] < bytes) j++;
    const double x0 = log(c->bytes[j - 1]), x1 = log(c->bytes[j]), y0 = log(c->us[j - 1]), y1 = log(c->us[j]);
    const double f = (log(bytes) - x0) / (x1 - x0);
    return exp(y0 + f * (y1 - y0));
}

int coll_measured_time(const coll_measured *m, coll_kind k, int n, double bytes, double *us, const char **source) {
    if (!m || k < 0 || k >= COLL_KIND_COUNT || n < 2 || !m->model[k].fitted) return 0;
    const coll_curve *c = m->use_curves ? coll_measured_curve(m, k, n) : NULL;
    if (c) {
        *us = curve_time(c, &m->model[k], bytes);
        *source = "measured";
    } else {
        *us = coll_ab_time_us(&m->model[k], k, n, bytes);
        *source = "fitted";
    }
    return 1;
}

pl_status coll_time_measured(const cluster *c, const coll_measured *m, coll_kind k, const int64_t *ranks, int n,
                             double bytes, coll_estimate *out) {
    pl_status st = coll_time(c, k, ranks, n, bytes, out);
    if (st != PL_OK || !m || n < 2 || out->n_nodes != 1) return st;
    double us;
    const char *src;
    if (!coll_measured_time(m, k, n, bytes, &us, &src)) return PL_OK;
    out->time_us = us;
    out->algo = "ring";
    out->source = src;
    out->latency_us = m->model[k].base_us + coll_ring_steps(k, n) * m->model[k].alpha_us;
    out->link_bw = m->model[k].busbw;
    out->algbw = us > 0 ? bytes / (us * 1e-6) : 0.0;
    out->busbw = out->algbw * coll_ring_frac(k, n);
    return PL_OK;
}
