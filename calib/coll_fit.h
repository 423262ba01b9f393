/*
 * coll_fit.h: calibrating the layout simulator's collective model on a
 * machine's measured curves (issue 17, item 7).
 *
 * Input: the store's collective_point rows (profile/store.h: kind, ranks,
 * transport, bytes, median and IQR), as `placer profile --collectives N`
 * writes them. Output: a coll_measured (inputs/coll_curves.h; timed by
 * sim/collective/coll_measured.h): the per-kind ring model
 *     t(S, n) = base_us + steps(n) * alpha_us + frac(n) * S / busbw
 * (steps(n) = 2(n-1) all-reduce, n-1 all-gather / reduce-scatter;
 * frac(n) = steps(n) / n), fitted per kind over every rank count measured,
 * and the curves themselves for interpolation.
 *
 * The fit: least squares in relative error, r_i = (t(S_i, n_i) - t_i) / t_i,
 * so that a 10% miss weighs the same on a 4 B and a 64 MiB point. The model
 * is linear in (base, alpha, 1/busbw), so this is a weighted linear least
 * squares (gsl_multifit_linear on rows scaled by 1/t_i, columns balanced)
 * with the constraints base, alpha >= 0 and 1/busbw > 0 met by trying each
 * subset of the constants held at 0 and keeping the best feasible one. base
 * and alpha are the same column when one rank count was measured (steps(n)
 * is then a constant): base is then held at 0 and alpha carries the whole
 * latency (stated in the result: base_fitted 0); the constraint holds it at
 * 0 too when the best unconstrained fit puts it below 0. Errors of the constants are the
 * covariance-scaled ones, sqrt(diag((X^T X)^-1) chisq / (n - p)) (NaN when
 * n = p); busbw's by the derivative of 1/g.
 *
 * Held-out check: the same fit on the even sizes of every curve (its 1st,
 * 3rd, ... point by size), its error reported on the odd ones. The
 * constants stored and used are the fit on every point.
 */
#ifndef PLACER_CALIB_COLL_FIT_H
#define PLACER_CALIB_COLL_FIT_H

#include <stddef.h>

#include "coll_measured.h"
#include "status.h"
#include "store.h"

typedef struct {
    coll_kind kind;          /* which collective */
    int ranks;               /* group size */
    double bytes, us;        /* the measured point (median) */
    double spread_us;        /* its IQR (NaN when not known) */
    double fit_us;           /* the fit on every point at this size */
    double rel_err;          /* (fit_us - us) / us */
    int held_out;            /* 1: an odd size of its curve (the held-out fit's test set) */
    double held_us;          /* the even-sizes fit at this size */
    double held_rel_err;     /* (held_us - us) / us */
} calib_coll_point_fit;

typedef struct {
    int n_points;            /* points of this kind (0: not measured) */
    int n_ranks;             /* distinct rank counts */
    int n_curves;            /* curves (one per rank count) */
    coll_ab ab;              /* the fit on every point */
    int base_fitted;         /* 0: base held at 0 (one rank count, or the constraint) */
    double base_err, alpha_err, busbw_err; /* 1-sigma; NaN when held or undetermined */
    double rms_rel, max_rel; /* relative error of the fit over its points (fractions) */
    int n_held;              /* held-out points (odd sizes); 0: no held-out check (curves of < 3 sizes) */
    coll_ab held_ab;         /* the fit on the even sizes */
    double held_rms_rel, held_max_rel; /* its relative error on the odd sizes (NaN when n_held 0) */
} calib_coll_kind_fit;

typedef struct {
    char transport[16];      /* the transport fitted */
    int n_points;            /* entries of points */
    calib_coll_kind_fit kind[COLL_KIND_COUNT];
    calib_coll_point_fit *points; /* every point fitted, by kind, ranks, bytes (malloc'd) */
} calib_coll_fit_result;

/* Fit the collective model on the n points pts (any order) of one
 * transport: `transport`, or, when NULL, the only one the points hold.
 * Fills *out (a coll_measured with every measured kind fitted and its
 * curves; use_curves 0, source naming the transport and the point count)
 * and *res (caller frees with calib_coll_fit_free). PL_ERR_INVALID with one
 * line in msg for no points ("no collective curves ... placer profile
 * --collectives N"), several transports and none chosen, a curve of one
 * size, more curves or sizes than coll_measured holds, or no feasible fit
 * (no positive bandwidth fits); PL_ERR_NOMEM. Calls
 * gsl_set_error_handler_off(). */
pl_status calib_coll_fit(const profile_coll_point *pts, int n, const char *transport, coll_measured *out,
                         calib_coll_fit_result *res, char *msg, size_t len);

/* Free res's points (res may be NULL). */
void calib_coll_fit_free(calib_coll_fit_result *res);

/* Read the collective points of db (profile_db_collective_points) and fit
 * them as calib_coll_fit does; out's source also names the file. */
pl_status calib_coll_fit_db(profile_db *db, const char *transport, coll_measured *out, calib_coll_fit_result *res,
                            char *msg, size_t len);

#endif
