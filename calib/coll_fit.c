/*
 * coll_fit.c: the collective model's constants fitted to measured curves
 * by constrained weighted linear least squares (coll_fit.h).
 */
#include "coll_fit.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pl_status fail(pl_status st, char *msg, size_t len, const char *fmt, ...) {
    if (msg && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return st;
}

static coll_kind kind_of(profile_coll_op op) {
    switch (op) {
    case PROFILE_COLL_ALL_GATHER: return COLL_ALL_GATHER;
    case PROFILE_COLL_REDUCE_SCATTER: return COLL_REDUCE_SCATTER;
    default: return COLL_ALL_REDUCE;
    }
}

static int cmp_point(const void *a, const void *b) {
    const calib_coll_point_fit *x = a, *y = b;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    if (x->ranks != y->ranks) return x->ranks < y->ranks ? -1 : 1;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

/* One fit's outcome: the constants, their errors, the chisq. */
typedef struct {
    coll_ab ab;
    int base_fitted;
    double base_err, alpha_err, busbw_err;
    double chisq;
} ab_fit;

/* Fit constants `use` (bit 0 base, 1 alpha, 2 g = 1e6 / busbw) on the
 * points idx[0..n) of p, rows scaled by 1/t (relative residuals). Returns 1
 * when the solution is feasible (every used constant >= 0, g > 0), with *f
 * filled; 0 otherwise; -1 when GSL failed or out of memory. */
static int fit_subset(const calib_coll_point_fit *p, const int *idx, int n, unsigned use, ab_fit *f) {
    int col[3], k = 0;
    for (int j = 0; j < 3; j++)
        if (use & (1u << j)) col[k++] = j;
    if (k == 0 || n < k) return 0;
    gsl_matrix *X = gsl_matrix_alloc((size_t)n, (size_t)k);
    gsl_vector *y = gsl_vector_alloc((size_t)n), *c = gsl_vector_alloc((size_t)k);
    gsl_matrix *cov = gsl_matrix_alloc((size_t)k, (size_t)k);
    gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc((size_t)n, (size_t)k);
    double scale[3] = {0, 0, 0};
    int rc = -1;
    if (!X || !y || !c || !cov || !w) goto out;
    for (int i = 0; i < n; i++) {
        const calib_coll_point_fit *q = &p[idx[i]];
        const double x[3] = {1.0, coll_ring_steps(q->kind, q->ranks), coll_ring_frac(q->kind, q->ranks) * q->bytes};
        for (int j = 0; j < k; j++) {
            const double v = x[col[j]] / q->us;
            gsl_matrix_set(X, (size_t)i, (size_t)j, v);
            if (fabs(v) > scale[j]) scale[j] = fabs(v);
        }
        gsl_vector_set(y, (size_t)i, 1.0);
    }
    for (int j = 0; j < k; j++) { /* balance the columns: bytes and latencies differ by many decades */
        if (!(scale[j] > 0)) {
            rc = 0;
            goto out;
        }
        gsl_vector_view v = gsl_matrix_column(X, (size_t)j);
        gsl_vector_scale(&v.vector, 1.0 / scale[j]);
    }
    double chisq = 0;
    if (gsl_multifit_linear(X, y, c, cov, &chisq, w) != GSL_SUCCESS) goto out;
    double v[3] = {0, 0, 0}, e[3] = {NAN, NAN, NAN};
    const double dof = n - k, s2 = dof > 0 ? chisq / dof : NAN;
    for (int j = 0; j < k; j++) {
        v[col[j]] = gsl_vector_get(c, (size_t)j) / scale[j];
        e[col[j]] = sqrt(gsl_matrix_get(cov, (size_t)j, (size_t)j) * s2) / scale[j];
    }
    rc = 0;
    if (!(v[2] > 0) || v[0] < 0 || v[1] < 0 || !isfinite(v[0]) || !isfinite(v[1]) || !isfinite(v[2])) goto out;
    f->ab = (coll_ab){1, v[0], v[1], 1e6 / v[2]};
    f->base_fitted = (use & 1u) != 0;
    f->base_err = e[0];
    f->alpha_err = e[1];
    f->busbw_err = e[2] * 1e6 / (v[2] * v[2]);
    f->chisq = chisq;
    rc = 1;
out:
    gsl_matrix_free(X);
    gsl_vector_free(y);
    gsl_vector_free(c);
    gsl_matrix_free(cov);
    if (w) gsl_multifit_linear_free(w);
    return rc;
}

/* The best feasible fit over the subsets of {base (when identifiable),
 * alpha} with g always fitted. 1 found, 0 none feasible, -1 failure. */
static int fit_kind(const calib_coll_point_fit *p, const int *idx, int n, int base_ok, ab_fit *best) {
    int found = 0;
    for (unsigned use = 4; use < 8; use++) {
        if ((use & 1u) && !base_ok) continue;
        ab_fit f;
        int r = fit_subset(p, idx, n, use, &f);
        if (r < 0) return -1;
        if (r == 1 && (!found || f.chisq < best->chisq * (1 - 1e-12))) {
            *best = f;
            found = 1;
        }
    }
    return found;
}

void calib_coll_fit_free(calib_coll_fit_result *res) {
    if (!res) return;
    free(res->points);
    res->points = NULL;
    res->n_points = 0;
}

pl_status calib_coll_fit(const profile_coll_point *pts, int n, const char *transport, coll_measured *out,
                         calib_coll_fit_result *res, char *msg, size_t len) {
    if (!out || !res || n < 0 || (n > 0 && !pts)) return fail(PL_ERR_INVALID, msg, len, "calib_coll_fit: bad arguments");
    gsl_set_error_handler_off();
    memset(res, 0, sizeof *res);
    memset(out, 0, sizeof *out);
    if (n == 0)
        return fail(PL_ERR_INVALID, msg, len,
                    "the profile holds no collective curves; measure them with placer profile --collectives N");
    if (!transport) {
        transport = pts[0].transport;
        for (int i = 1; i < n; i++)
            if (strcmp(pts[i].transport, transport))
                return fail(PL_ERR_INVALID, msg, len,
                            "the profile holds curves of several transports ('%s', '%s'); choose one: placer "
                            "calibrate --collectives --transport NAME [--write FILE]",
                            transport, pts[i].transport);
    }
    snprintf(res->transport, sizeof res->transport, "%s", transport);
    int m = 0;
    for (int i = 0; i < n; i++) m += !strcmp(pts[i].transport, transport);
    if (m == 0)
        return fail(PL_ERR_INVALID, msg, len, "the profile holds no collective curves over transport '%s'", transport);
    calib_coll_point_fit *p = calloc((size_t)m, sizeof *p);
    int *idx = malloc(sizeof *idx * (size_t)m), *tr = malloc(sizeof *tr * (size_t)m);
    pl_status st = PL_ERR_NOMEM;
    if (!p || !idx || !tr) goto fail;
    m = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(pts[i].transport, transport)) continue;
        p[m] = (calib_coll_point_fit){kind_of(pts[i].op), pts[i].ranks, pts[i].bytes, pts[i].us, pts[i].spread_us,
                                      NAN, NAN, 0, NAN, NAN};
        m++;
    }
    qsort(p, (size_t)m, sizeof *p, cmp_point);
    st = PL_ERR_INVALID;
    /* the curves: runs of one (kind, ranks) */
    for (int a = 0; a < m;) {
        int b = a;
        while (b < m && p[b].kind == p[a].kind && p[b].ranks == p[a].ranks) b++;
        const char *kn = coll_kind_name(p[a].kind);
        if (b - a < 2) {
            fail(st, msg, len, "the %s curve over %d ranks (%s) has one size (%g B); a curve needs at least 2: "
                               "re-measure with placer profile --collectives N",
                 kn, p[a].ranks, transport, p[a].bytes);
            goto fail;
        }
        if (b - a > COLL_CURVE_MAX_POINTS || out->n_curves == COLL_MAX_CURVES) {
            fail(st, msg, len, "too many collective points: %d curves of at most %d sizes are supported",
                 COLL_MAX_CURVES, COLL_CURVE_MAX_POINTS);
            goto fail;
        }
        coll_curve *c = &out->curves[out->n_curves++];
        c->kind = p[a].kind;
        c->ranks = p[a].ranks;
        c->n = b - a;
        for (int j = a; j < b; j++) {
            if (j > a && !(p[j].bytes > p[j - 1].bytes)) {
                fail(st, msg, len, "the %s curve over %d ranks has two points of %g B", kn, p[a].ranks, p[j].bytes);
                goto fail;
            }
            c->bytes[j - a] = p[j].bytes;
            c->us[j - a] = p[j].us;
            p[j].held_out = (j - a) % 2;
        }
        a = b;
    }
    /* per kind: every point, then the even sizes against the odd ones */
    for (int k = 0; k < COLL_KIND_COUNT; k++) {
        calib_coll_kind_fit *kf = &res->kind[k];
        int cnt = 0, ntr = 0, last_ranks = -1;
        for (int i = 0; i < m; i++) {
            if (p[i].kind != (coll_kind)k) continue;
            idx[cnt++] = i;
            if (!p[i].held_out) tr[ntr++] = i;
            if (p[i].ranks != last_ranks) {
                kf->n_curves++;
                kf->n_ranks++;
                last_ranks = p[i].ranks;
            }
        }
        kf->n_points = cnt;
        kf->held_rms_rel = kf->held_max_rel = NAN;
        kf->base_err = kf->alpha_err = kf->busbw_err = NAN;
        if (cnt == 0) continue;
        const int base_ok = kf->n_ranks >= 2;
        ab_fit f;
        int r = fit_kind(p, idx, cnt, base_ok, &f);
        if (r < 0) {
            st = PL_ERR_NOMEM;
            goto fail;
        }
        if (r == 0) {
            fail(st, msg, len, "the %s times (%s) fit no positive bandwidth and latency; re-measure them",
                 coll_kind_name((coll_kind)k), transport);
            goto fail;
        }
        kf->ab = f.ab;
        kf->base_fitted = f.base_fitted;
        kf->base_err = f.base_err;
        kf->alpha_err = f.alpha_err;
        kf->busbw_err = f.busbw_err;
        out->model[k] = f.ab;
        double ss = 0, mx = 0;
        for (int i = 0; i < cnt; i++) {
            calib_coll_point_fit *q = &p[idx[i]];
            q->fit_us = coll_ab_time_us(&f.ab, q->kind, q->ranks, q->bytes);
            q->rel_err = (q->fit_us - q->us) / q->us;
            ss += q->rel_err * q->rel_err;
            if (fabs(q->rel_err) > mx) mx = fabs(q->rel_err);
        }
        kf->rms_rel = sqrt(ss / cnt);
        kf->max_rel = mx;
        /* held out: needs every curve... at least 2 even points and one odd one */
        const int n_odd = cnt - ntr;
        ab_fit h;
        if (n_odd < 1 || ntr < 2 || fit_kind(p, tr, ntr, base_ok, &h) != 1) continue;
        kf->held_ab = h.ab;
        kf->n_held = n_odd;
        ss = 0, mx = 0;
        for (int i = 0; i < cnt; i++) {
            calib_coll_point_fit *q = &p[idx[i]];
            if (!q->held_out) continue;
            q->held_us = coll_ab_time_us(&h.ab, q->kind, q->ranks, q->bytes);
            q->held_rel_err = (q->held_us - q->us) / q->us;
            ss += q->held_rel_err * q->held_rel_err;
            if (fabs(q->held_rel_err) > mx) mx = fabs(q->held_rel_err);
        }
        kf->held_rms_rel = sqrt(ss / n_odd);
        kf->held_max_rel = mx;
    }
    snprintf(out->source, sizeof out->source, "%d measured points over transport %s, fitted in relative least "
                                              "squares (calib/coll_fit.c)",
             m, transport);
    free(idx);
    free(tr);
    res->points = p;
    res->n_points = m;
    return PL_OK;
fail:
    if (st == PL_ERR_NOMEM) fail(st, msg, len, "out of memory fitting the collective curves");
    free(p);
    free(idx);
    free(tr);
    memset(out, 0, sizeof *out);
    memset(res, 0, sizeof *res);
    return st;
}

pl_status calib_coll_fit_db(profile_db *db, const char *transport, coll_measured *out, calib_coll_fit_result *res,
                            char *msg, size_t len) {
    if (!db) return fail(PL_ERR_INVALID, msg, len, "calib_coll_fit_db: no database");
    profile_coll_point *pts = NULL;
    int n = 0;
    pl_status st = profile_db_collective_points(db, &pts, &n);
    if (st != PL_OK) return fail(st, msg, len, "%s", profile_db_last_error(db));
    st = calib_coll_fit(pts, n, transport, out, res, msg, len);
    if (st == PL_OK) {
        profile_db_machine_row mr;
        char mach[160] = "";
        if (profile_db_machine(db, &mr) == PL_OK) snprintf(mach, sizeof mach, "machine %s, ", mr.name);
        char src[sizeof out->source];
        snprintf(src, sizeof src, "%s%s", mach, out->source);
        memcpy(out->source, src, sizeof src);
    }
    free(pts);
    return st;
}
