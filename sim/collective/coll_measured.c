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
#include <string.h>

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
