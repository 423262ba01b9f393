/*
 * fit.c: the calibration dataset, the train/test split, the GSL fit of
 * sim_params in log space, and the accuracy figures (see fit.h).
 */
#include "fit.h"

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"
#include "util.h"

/* ---- dataset ---- */

pl_status calib_dataset_create(int n_nodes, calib_dataset **out) {
    if (!out || n_nodes < 1) return PL_ERR_INVALID;
    calib_dataset *d = calloc(1, sizeof *d);
    if (!d) return PL_ERR_NOMEM;
    d->n_nodes = n_nodes;
    *out = d;
    return PL_OK;
}

void calib_dataset_destroy(calib_dataset *d) {
    if (!d) return;
    free(d->placements);
    free(d->sched);
    free(d->mem_cap);
    free(d->step_us);
    free(d->spread_us);
    free(d->peak_bytes);
    free(d->oom);
    free(d->measurement_id);
    free(d);
}

/* Grow one array to cap elements of size sz; 0 on success. */
static int grow(void **p, size_t cap, size_t sz) {
    void *q = realloc(*p, cap * sz);
    if (!q) return -1;
    *p = q;
    return 0;
}

pl_status calib_dataset_add(calib_dataset *d, const int *placement, const schedule *s, int64_t mem_cap,
                            double step_us, double spread_us, int64_t peak_bytes, int oom,
                            int64_t measurement_id) {
    if (!d || !placement || !s) return PL_ERR_INVALID;
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * (size_t)d->cap : 64;
        if (grow((void **)&d->placements, cap * (size_t)d->n_nodes, sizeof(int)) ||
            grow((void **)&d->sched, cap, sizeof(schedule)) || grow((void **)&d->mem_cap, cap, sizeof(int64_t)) ||
            grow((void **)&d->step_us, cap, sizeof(double)) || grow((void **)&d->spread_us, cap, sizeof(double)) ||
            grow((void **)&d->peak_bytes, cap, sizeof(int64_t)) || grow((void **)&d->oom, cap, sizeof(int)) ||
            grow((void **)&d->measurement_id, cap, sizeof(int64_t)))
            return PL_ERR_NOMEM; /* arrays already grown stay valid and are freed by destroy */
        d->cap = (int)cap;
    }
    int i = d->n++;
    memcpy(d->placements + (size_t)i * d->n_nodes, placement, sizeof(int) * (size_t)d->n_nodes);
    d->sched[i] = *s;
    d->mem_cap[i] = mem_cap;
    d->step_us[i] = step_us;
    d->spread_us[i] = spread_us;
    d->peak_bytes[i] = peak_bytes;
    d->oom[i] = oom;
    d->measurement_id[i] = measurement_id;
    return PL_OK;
}

static int usable(const calib_dataset *d, int i) {
    return !d->oom[i] && isfinite(d->step_us[i]) && d->step_us[i] > 0;
}

pl_status calib_split(const calib_dataset *d, double holdout, uint64_t seed, int *train, int *n_train,
                      int *test, int *n_test) {
    if (!d || !train || !n_train || !test || !n_test || !(holdout >= 0 && holdout < 1)) return PL_ERR_INVALID;
    int n = 0;
    for (int i = 0; i < d->n; i++)
        if (usable(d, i)) train[n++] = i;
    if (holdout > 0 && n < 2) return PL_ERR_INVALID;
    pl_rng rng;
    pl_rng_seed(&rng, seed);
    pl_rng_shuffle(&rng, train, n);
    int k = (int)lround(holdout * n);
    if (holdout > 0 && k < 1) k = 1;
    if (k > n - 1 && holdout > 0) k = n - 1;
    memcpy(test, train, sizeof(int) * (size_t)k);
    memmove(train, train + k, sizeof(int) * (size_t)(n - k));
    *n_test = k;
    *n_train = n - k;
    return PL_OK;
}

/* ---- the fit ---- */

void calib_fit_options_default(calib_fit_options *o) {
    for (int i = 0; i < SIM_N_PARAMS; i++) o->fit_mask[i] = 1;
    o->max_iter = 200;
    o->xtol = 1e-10;
    o->gtol = 1e-10;
    o->ftol = 0.0;
}

/* How parameter i maps to the fitted variable theta: scales as logs,
 * additive ones divided by a unit of their typical size. */
static int param_is_scale(const char *name) { return strstr(name, "scale") != NULL; }

static double param_unit(const char *name) {
    if (!strcmp(name, "step_fixed_us") || !strcmp(name, "multi_device_start_us")) return 100.0;
    return 1.0;
}

typedef struct {
    sim_ctx *ctx;                 /* simulator for the residuals */
    const calib_dataset *d;       /* the data */
    const int *idx;               /* entries fitted */
    int n_idx;
    sim_params base;              /* values of the parameters not fitted */
    int map[SIM_N_PARAMS];        /* theta index -> parameter index */
    int n_theta;
    pl_status sim_status;         /* first simulator failure, if any */
} fit_data;

/* softplus and its inverse and derivative: the additive parameters are
 * unit * softplus(theta), so they stay positive (negative overheads or
 * latencies mean nothing physically, and would give negative durations). */
static double softplus(double t) { return t > 30 ? t : log1p(exp(t)); }
static double softplus_inv(double v) { return v > 30 ? v : log(expm1(v)); }
static double sigmoid(double t) { return 1.0 / (1.0 + exp(-t)); }

/* Smallest start value of an additive parameter, in its unit: a start of 0
 * begins here, where softplus still has a usable slope. */
#define ADDITIVE_FLOOR 1e-3

/* A parameter the simulator lets be negative (sim_param_signed: the launch
 * overhead, which removes the profiler's per-call marker cost when
 * negative) is fitted as itself, in its unit. */
static int param_signed(const char *nm) {
    for (int i = 0; i < SIM_N_PARAMS; i++)
        if (!strcmp(sim_param_name(i), nm)) return sim_param_signed(i);
    return 0;
}

static double param_from_theta(const char *nm, double t) {
    if (param_signed(nm)) return param_unit(nm) * t;
    return param_is_scale(nm) ? exp(t) : param_unit(nm) * softplus(t);
}

static double theta_from_param(const char *nm, double v) {
    if (param_signed(nm)) return v / param_unit(nm);
    if (param_is_scale(nm)) return log(v);
    double u = v / param_unit(nm);
    return softplus_inv(u > ADDITIVE_FLOOR ? u : ADDITIVE_FLOOR);
}

/* d value / d theta, to carry the covariance back to the parameter. */
static double param_dtheta(const char *nm, double t) {
    if (param_signed(nm)) return param_unit(nm);
    return param_is_scale(nm) ? exp(t) : param_unit(nm) * sigmoid(t);
}

static void theta_to_params(const fit_data *fd, const gsl_vector *x, sim_params *prm) {
    *prm = fd->base;
    for (int j = 0; j < fd->n_theta; j++) {
        int i = fd->map[j];
        *sim_param_ptr(prm, i) = param_from_theta(sim_param_name(i), gsl_vector_get(x, (size_t)j));
    }
}

/* log(pred) - log(meas) for entry k, or a large residual when the
 * prediction is unusable (non-positive, non-finite, failed). */
static double residual(fit_data *fd, int k, const sim_params *prm) {
    int i = fd->idx[k];
    sim_result r;
    pl_status st = sim_run(fd->ctx, fd->d->placements + (size_t)i * fd->d->n_nodes, &fd->d->sched[i], NULL, prm, &r);
    if (st != PL_OK) {
        if (fd->sim_status == PL_OK) fd->sim_status = st;
        return 5.0;
    }
    if (!(r.step_us > 0) || !isfinite(r.step_us)) return 5.0;
    return log(r.step_us) - log(fd->d->step_us[i]);
}

static int fit_f(const gsl_vector *x, void *data, gsl_vector *f) {
    fit_data *fd = data;
    sim_params prm;
    theta_to_params(fd, x, &prm);
    for (int k = 0; k < fd->n_idx; k++) gsl_vector_set(f, (size_t)k, residual(fd, k, &prm));
    return GSL_SUCCESS;
}

static double chisq_at(fit_data *fd, const sim_params *prm) {
    double s = 0;
    for (int k = 0; k < fd->n_idx; k++) {
        double r = residual(fd, k, prm);
        s += r * r;
    }
    return s;
}

static int max_m(const calib_dataset *d, const int *idx, int n_idx) {
    int m = 1;
    for (int k = 0; k < n_idx; k++)
        if (d->sched[idx[k]].micro_batches > m) m = d->sched[idx[k]].micro_batches;
    return m;
}

/* Which parameters the data can move: chisq at the start values into
 * res->chisq0, then each parameter of opt->fit_mask nudged by a visible step
 * (1% of a scale, a tenth of a unit of an additive one); one that moves no
 * residual by 1e-9 is CALIB_PARAM_UNIDENTIFIABLE, the others go to fd->map
 * (fd->n_theta of them). PL_ERR_NOMEM, or the simulator's failure on a
 * measured placement. */
static pl_status choose_fitted(fit_data *fd, const calib_fit_options *opt, calib_fit_result *res, char *msg,
                               size_t len) {
    const int n_idx = fd->n_idx;
    double *base_r = malloc(sizeof(double) * (size_t)n_idx);
    if (!base_r) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    pl_status st = PL_OK;
    for (int k = 0; k < n_idx; k++) base_r[k] = residual(fd, k, &fd->base);
    if (fd->sim_status != PL_OK) {
        st = pl_fail(msg, len, fd->sim_status, "the simulator rejected a measured placement (%s)",
                     pl_status_str(fd->sim_status));
        goto out;
    }
    res->chisq0 = 0;
    for (int k = 0; k < n_idx; k++) res->chisq0 += base_r[k] * base_r[k];
    for (int i = 0; i < SIM_N_PARAMS; i++) {
        if (!opt->fit_mask[i]) continue;
        const char *nm = sim_param_name(i);
        sim_params probe = fd->base;
        double *v = sim_param_ptr(&probe, i);
        *v = param_is_scale(nm) ? *v * 1.01 : *v + 0.01 * param_unit(nm) * 10.0;
        double mx = 0;
        for (int k = 0; k < n_idx; k++) {
            double dr = fabs(residual(fd, k, &probe) - base_r[k]);
            if (dr > mx) mx = dr;
        }
        if (mx < 1e-9) {
            res->state[i] = CALIB_PARAM_UNIDENTIFIABLE;
            continue;
        }
        fd->map[fd->n_theta++] = i;
    }
out:
    free(base_r);
    return st;
}

/* The start point x (fd->n_theta entries) from fd->base, in theta space.
 * PL_ERR_INVALID naming a start value out of its parameter's range. */
static pl_status start_theta(const fit_data *fd, gsl_vector *x, char *msg, size_t len) {
    sim_params base = fd->base;
    for (int j = 0; j < fd->n_theta; j++) {
        int i = fd->map[j];
        const char *nm = sim_param_name(i);
        double v = *sim_param_ptr(&base, i);
        if ((param_is_scale(nm) && !(v > 0)) || (!(v >= 0) && !param_signed(nm)) || !isfinite(v))
            return pl_fail(msg, len, PL_ERR_INVALID, "start value %g of %s is out of range", v, nm);
        gsl_vector_set(x, (size_t)j, theta_from_param(nm, v));
    }
    return PL_OK;
}

/* The fitted parameters' covariance-scaled 1-sigma errors into res->err,
 * from the covariance covar (theta space) at the solution sol, over dof
 * degrees of freedom; each fitted parameter becomes CALIB_PARAM_FITTED. */
static void fitted_errors(const fit_data *fd, const gsl_vector *sol, const gsl_matrix *covar, double dof,
                          calib_fit_result *res) {
    double c = sqrt(res->chisq / dof);
    for (int j = 0; j < fd->n_theta; j++) {
        int i = fd->map[j];
        const char *nm = sim_param_name(i);
        double cjj = gsl_matrix_get(covar, (size_t)j, (size_t)j);
        /* GSL zeroes the covariance of columns it finds linearly dependent:
         * that parameter's error is undetermined, not zero */
        double sd_theta = cjj > 0 ? c * sqrt(cjj) : NAN;
        res->err[i] = param_dtheta(nm, gsl_vector_get(sol, (size_t)j)) * sd_theta;
        res->state[i] = CALIB_PARAM_FITTED;
    }
}

/* The trust-region fit (Levenberg-Marquardt, forward differences) of the
 * fd->n_theta parameters chosen by choose_fitted, from fd->base: the
 * solution, iterations, chisq and errors into res. Needs more residuals
 * than parameters. PL_ERR_NOMEM, PL_ERR_INVALID when GSL cannot start,
 * fails, or cannot give the covariance; the simulator's failure. */
static pl_status run_trust_region(fit_data *fd, const calib_fit_options *opt, calib_fit_result *res, char *msg,
                                  size_t len) {
    pl_status st = PL_OK;
    size_t n = (size_t)fd->n_idx, np = (size_t)fd->n_theta;
    gsl_vector *x = gsl_vector_alloc(np);
    gsl_matrix *covar = gsl_matrix_alloc(np, np);
    gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
    fp.trs = gsl_multifit_nlinear_trs_lm;
    fp.scale = gsl_multifit_nlinear_scale_more;
    fp.h_df = 1e-6;
    gsl_multifit_nlinear_workspace *w =
        x && covar ? gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &fp, n, np) : NULL;
    if (!w) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory for the fit");
        goto out;
    }
    if ((st = start_theta(fd, x, msg, len)) != PL_OK) goto out;
    gsl_multifit_nlinear_fdf fdf;
    memset(&fdf, 0, sizeof fdf);
    fdf.f = fit_f;
    fdf.df = NULL; /* forward differences */
    fdf.fvv = NULL;
    fdf.n = n;
    fdf.p = np;
    fdf.params = fd;
    int gs = gsl_multifit_nlinear_init(x, &fdf, w);
    if (gs != GSL_SUCCESS) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "GSL could not start the fit: %s", gsl_strerror(gs));
        goto out;
    }
    int info = 0;
    gs = gsl_multifit_nlinear_driver((size_t)opt->max_iter, opt->xtol, opt->gtol, opt->ftol, NULL, NULL, &info, w);
    /* GSL_EMAXITER and GSL_ENOPROG leave a usable (if not converged) point */
    if (gs != GSL_SUCCESS && gs != GSL_EMAXITER && gs != GSL_ENOPROG) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "the fit failed: %s", gsl_strerror(gs));
        goto out;
    }
    if (fd->sim_status != PL_OK) {
        st = pl_fail(msg, len, fd->sim_status, "the simulator failed during the fit (%s)",
                     pl_status_str(fd->sim_status));
        goto out;
    }
    res->iterations = (int)gsl_multifit_nlinear_niter(w);
    res->info = gs == GSL_SUCCESS ? info : 0;
    const gsl_vector *sol = gsl_multifit_nlinear_position(w);
    theta_to_params(fd, sol, &res->params);
    res->chisq = chisq_at(fd, &res->params);
    gs = gsl_multifit_nlinear_covar(gsl_multifit_nlinear_jac(w), 0.0, covar);
    if (gs != GSL_SUCCESS) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "the covariance could not be computed: %s", gsl_strerror(gs));
        goto out;
    }
    fitted_errors(fd, sol, covar, (double)(n - np), res);
out:
    gsl_multifit_nlinear_free(w);
    gsl_matrix_free(covar);
    gsl_vector_free(x);
    return st;
}

pl_status calib_fit(const graph *g, const profile_data *p, const calib_dataset *d, const int *idx,
                    int n_idx, const sim_params *start, const calib_fit_options *opt, calib_fit_result *res,
                    char *msg, size_t len) {
    if (!g || !p || !d || !idx || !res || n_idx < 1) return pl_fail(msg, len, PL_ERR_INVALID, "nothing to fit");
    if (d->n_nodes != g->n_nodes)
        return pl_fail(msg, len, PL_ERR_INVALID, "measurements have %d nodes, the graph %d", d->n_nodes, g->n_nodes);
    gsl_set_error_handler_off();
    calib_fit_options dflt;
    if (!opt) {
        calib_fit_options_default(&dflt);
        opt = &dflt;
    }
    memset(res, 0, sizeof *res);
    fit_data fd = {0};
    fd.d = d;
    fd.idx = idx;
    fd.n_idx = n_idx;
    if (start) fd.base = *start;
    else sim_params_default(&fd.base);
    res->params = fd.base;
    for (int i = 0; i < SIM_N_PARAMS; i++) {
        res->err[i] = NAN;
        res->state[i] = CALIB_PARAM_FROZEN;
    }
    res->n_points = n_idx;
    for (int k = 0; k < n_idx; k++)
        if (idx[k] < 0 || idx[k] >= d->n || !usable(d, idx[k]))
            return pl_fail(msg, len, PL_ERR_INVALID, "entry %d has no usable time (OOM or missing)", idx[k]);

    pl_status st = sim_ctx_create(g, p, max_m(d, idx, n_idx), &fd.ctx);
    if (st != PL_OK) return pl_fail(msg, len, st, "cannot create a simulator (%s)", pl_status_str(st));
    if ((st = choose_fitted(&fd, opt, res, msg, len)) != PL_OK) goto out;
    res->n_fitted = fd.n_theta;
    if (fd.n_theta == 0) {
        res->chisq = res->chisq0; /* nothing the data can move: the start values stand */
        goto out;
    }
    if (n_idx <= fd.n_theta) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "%d measurements cannot fit %d parameters; measure more placements",
                     n_idx, fd.n_theta);
        goto out;
    }
    st = run_trust_region(&fd, opt, res, msg, len);
out:
    sim_ctx_destroy(fd.ctx);
    return st;
}

/* ---- accuracy ---- */

pl_status calib_evaluate(const graph *g, const profile_data *p, const calib_dataset *d, const int *idx,
                         int n_idx, const sim_params *prm, calib_eval *ev, double *pred_us,
                         int64_t *pred_peak, char *msg, size_t len) {
    if (!g || !p || !d || !ev || (n_idx > 0 && !idx) || n_idx < 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    memset(ev, 0, sizeof *ev);
    ev->mape = ev->max_ape = ev->tau = ev->mem_mape = ev->mem_max_ape = NAN;
    if (n_idx == 0) return PL_OK;
    sim_ctx *ctx = NULL;
    pl_status st = sim_ctx_create(g, p, max_m(d, idx, n_idx), &ctx);
    if (st != PL_OK) return pl_fail(msg, len, st, "cannot create a simulator (%s)", pl_status_str(st));
    size_t nn = (size_t)n_idx;
    double *pt = malloc(sizeof(double) * nn), *mt = malloc(sizeof(double) * nn);
    double *pm = malloc(sizeof(double) * nn), *mm = malloc(sizeof(double) * nn);
    if (!pt || !mt || !pm || !mm) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    int nt = 0, nm = 0;
    for (int k = 0; k < n_idx; k++) {
        int i = idx[k];
        if (pred_us) pred_us[k] = NAN;
        if (pred_peak) pred_peak[k] = 0;
        if (i < 0 || i >= d->n) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "entry %d out of range", i);
            goto out;
        }
        sim_result r;
        st = sim_run(ctx, d->placements + (size_t)i * d->n_nodes, &d->sched[i], NULL, prm, &r);
        if (st != PL_OK) {
            pl_fail(msg, len, st, "simulating entry %d failed (%s)", i, pl_status_str(st));
            goto out;
        }
        int64_t mx = 0;
        for (int dv = 0; dv < r.n_devices; dv++)
            if (r.peak_bytes[dv] > mx) mx = r.peak_bytes[dv];
        if (pred_us) pred_us[k] = r.step_us;
        if (pred_peak) pred_peak[k] = mx;
        if (usable(d, i)) {
            pt[nt] = r.step_us;
            mt[nt++] = d->step_us[i];
        }
        if (d->peak_bytes[i] > 0 && !d->oom[i]) {
            pm[nm] = (double)mx;
            mm[nm++] = (double)d->peak_bytes[i];
        }
    }
    ev->n = nt;
    ev->n_mem = nm;
    if (nt > 0) {
        ev->mape = calib_mape(pt, mt, nt);
        ev->max_ape = calib_max_ape(pt, mt, nt);
        ev->tau = calib_kendall_tau(pt, mt, nt);
    }
    if (nm > 0) {
        ev->mem_mape = calib_mape(pm, mm, nm);
        ev->mem_max_ape = calib_max_ape(pm, mm, nm);
    }
out:
    free(pt);
    free(mt);
    free(pm);
    free(mm);
    sim_ctx_destroy(ctx);
    return st;
}
