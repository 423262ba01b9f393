/*
 * layout_runs.c: measured training runs (read by
 * inputs/layout_runs_file.c) predicted under a framework profile, and the
 * profile's constants fitted on half of them (layout_runs.h).
 */
#include "layout_runs.h"

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout_eval.h"

/* ---- predictions ---------------------------------------------------------- */

/* One run under f; *act_bytes (may be NULL) gets the activation part of the peak. */
static pl_status predict(const layout_run *r, const framework_profile *f, double *step_us, double *peak,
                         double *act_bytes, char *msg, size_t len) {
    layout_sim_params p;
    layout_sim_params_default(&p);
    framework_apply_time(f, &p.compute, &p.step_fixed_us);
    p.framework = f;
    p.moe.hist = r->hist; /* measured router histograms price the run's experts (NULL: the stated spread) */
    layout_eval_options o = {.model = r->model, .cluster = r->cluster, .layout = r->layout, .gpus = r->gpus,
                             .seq = r->seq, .params = &p};
    layout_eval_result *x = calloc(1, sizeof *x);
    if (!x) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    char m2[512] = "";
    pl_status st = layout_eval_run(&o, x, m2, sizeof m2);
    if (st != PL_OK) {
        free(x);
        return pl_fail(msg, len, st, "run '%s': %s", r->id, m2);
    }
    *step_us = x->res.step_us;
    *peak = (double)x->res.mem.total;
    if (act_bytes) *act_bytes = (double)x->res.mem.activations;
    free(x);
    return PL_OK;
}

pl_status layout_run_predict(const layout_run *r, const framework_profile *f, double *step_us, double *peak_bytes,
                             double *reserved_bytes, char *msg, size_t len) {
    pl_status st = predict(r, f, step_us, peak_bytes, NULL, msg, len);
    if (st == PL_OK && reserved_bytes) *reserved_bytes = (double)framework_reserved_bytes(f, (int64_t)*peak_bytes);
    return st;
}

/* ---- the fit -------------------------------------------------------------- */

typedef struct {
    const layout_run *runs;
    const int *idx;      /* fit rows */
    int n;
    framework_profile f; /* scratch: the base with the trial constants */
    pl_status st;
    char *msg;
    size_t len;
} time_fit;

/* Residuals of the step times at x = (log gemm_scale, log memory_scale). */
static int time_residuals(const gsl_vector *x, void *data, gsl_vector *fv) {
    time_fit *t = data;
    t->f.k[FW_K_GEMM] = exp(gsl_vector_get(x, 0));
    t->f.k[FW_K_MEMORY] = exp(gsl_vector_get(x, 1));
    if (t->f.k[FW_K_GEMM] > 1.35) t->f.k[FW_K_GEMM] = 1.35; /* the file format's range */
    for (int i = 0; i < t->n; i++) {
        const layout_run *r = &t->runs[t->idx[i]];
        double step, peak;
        pl_status st = predict(r, &t->f, &step, &peak, NULL, t->msg, t->len);
        if (st != PL_OK) {
            t->st = st;
            return GSL_EFAILED;
        }
        gsl_vector_set(fv, (size_t)i, (step - r->step_us) / r->step_us);
    }
    return GSL_SUCCESS;
}

static pl_status fit_time(time_fit *t, double sd[2], char *msg, size_t len) {
    const size_t n = (size_t)t->n, p = 2;
    gsl_vector *x = gsl_vector_alloc(p);
    gsl_multifit_nlinear_workspace *w = NULL;
    gsl_matrix *cov = gsl_matrix_alloc(p, p);
    pl_status st = PL_OK;
    if (!x || !cov) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    gsl_vector_set(x, 0, log(t->f.k[FW_K_GEMM]));
    gsl_vector_set(x, 1, log(t->f.k[FW_K_MEMORY]));
    gsl_multifit_nlinear_fdf fdf = {time_residuals, NULL, NULL, n, p, t, 0, 0, 0};
    gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
    fp.trs = gsl_multifit_nlinear_trs_lm;
    fp.h_df = 1e-4; /* the simulator is piecewise smooth: a wider finite-difference step */
    w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &fp, n, p);
    if (!w) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    t->st = PL_OK;
    int info = 0;
    gsl_multifit_nlinear_init(x, &fdf, w);
    int rc = gsl_multifit_nlinear_driver(200, 1e-10, 1e-10, 1e-12, NULL, NULL, &info, w);
    if (t->st != PL_OK) {
        st = t->st;
        goto out;
    }
    if (rc != GSL_SUCCESS && rc != GSL_EMAXITER) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "the step-time fit failed: %s", gsl_strerror(rc));
        goto out;
    }
    const gsl_vector *xb = gsl_multifit_nlinear_position(w);
    t->f.k[FW_K_GEMM] = fmin(exp(gsl_vector_get(xb, 0)), 1.35);
    t->f.k[FW_K_MEMORY] = exp(gsl_vector_get(xb, 1));
    /* covariance-scaled standard errors, back from log space (delta method) */
    sd[0] = sd[1] = 0;
    if (n > p) {
        gsl_matrix *J = gsl_multifit_nlinear_jac(w);
        gsl_multifit_nlinear_covar(J, 0.0, cov);
        double chi2;
        gsl_blas_ddot(gsl_multifit_nlinear_residual(w), gsl_multifit_nlinear_residual(w), &chi2);
        const double s2 = chi2 / (double)(n - p);
        sd[0] = t->f.k[FW_K_GEMM] * sqrt(fmax(0, gsl_matrix_get(cov, 0, 0) * s2));
        sd[1] = t->f.k[FW_K_MEMORY] * sqrt(fmax(0, gsl_matrix_get(cov, 1, 1) * s2));
    }
out:
    gsl_multifit_nlinear_free(w);
    gsl_vector_free(x);
    gsl_matrix_free(cov);
    return st;
}

void layout_fit_free(layout_fit_result *r) {
    if (!r) return;
    free(r->rows);
    free(r->index);
    r->rows = NULL;
    r->index = NULL;
}

pl_status layout_runs_fit(const layout_run *runs, int n_runs, const char *framework, const framework_profile *base,
                          layout_fit_result *out, char *msg, size_t len) {
    memset(out, 0, sizeof *out);
    if (!framework) {
        if (n_runs < 1) return pl_fail(msg, len, PL_ERR_INVALID, "no runs");
        framework = runs[0].framework;
        for (int i = 1; i < n_runs; i++)
            if (strcmp(runs[i].framework, framework))
                return pl_fail(msg, len, PL_ERR_INVALID,
                               "the runs name several frameworks ('%s', '%s'): pick one with --framework", framework,
                               runs[i].framework);
    }
    int n = 0;
    for (int i = 0; i < n_runs; i++) n += !strcmp(runs[i].framework, framework);
    if (n == 0) return pl_fail(msg, len, PL_ERR_INVALID, "no runs of framework '%.60s'", framework);
    out->index = calloc((size_t)n, sizeof *out->index);
    out->rows = calloc((size_t)n, sizeof *out->rows);
    int *fit_idx = calloc((size_t)n, sizeof *fit_idx);
    pl_status st = PL_OK;
    if (!out->index || !out->rows || !fit_idx) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    int k = 0, nf = 0, alt = 0;
    for (int i = 0; i < n_runs; i++) {
        if (strcmp(runs[i].framework, framework)) continue;
        out->index[k] = i;
        const int fit = runs[i].split >= 0 ? runs[i].split == 0 : (alt++ % 2 == 0);
        out->rows[k].fit = fit;
        if (fit) fit_idx[nf++] = i;
        k++;
    }
    out->n_fit = nf;
    out->n_test = n - nf;
    if (nf < 2) {
        st = pl_fail(msg, len, PL_ERR_INVALID, "framework '%.60s': %d fit row(s); the fit needs at least 2", framework, nf);
        goto out;
    }
    time_fit t = {runs, fit_idx, nf, *base, PL_OK, msg, len};
    snprintf(t.f.name, sizeof t.f.name, "%s", framework);
    double sd[2] = {0, 0};
    if ((st = fit_time(&t, sd, msg, len)) != PL_OK) goto out;
    out->fitted_k[FW_K_GEMM] = out->fitted_k[FW_K_MEMORY] = 1;
    out->k_sd[FW_K_GEMM] = sd[0];
    out->k_sd[FW_K_MEMORY] = sd[1];
    /* act_scale: memory = rest + act_scale x activations, linear least
     * squares on the relative errors of the fit rows with a measurement */
    {
        framework_profile one = t.f;
        one.k[FW_K_ACT] = 1.0;
        double sxy = 0, sxx = 0, syy = 0;
        int nm = 0;
        for (int i = 0; i < nf; i++) {
            const layout_run *r = &runs[fit_idx[i]];
            if (r->peak_bytes <= 0) continue;
            double step, peak, act;
            if ((st = predict(r, &one, &step, &peak, &act, msg, len)) != PL_OK) goto out;
            const double xi = act / r->peak_bytes, yi = (r->peak_bytes - (peak - act)) / r->peak_bytes;
            sxy += xi * yi;
            sxx += xi * xi;
            syy += yi * yi;
            nm++;
        }
        if (nm >= 1 && sxx > 0) {
            const double a = sxy / sxx;
            t.f.k[FW_K_ACT] = a > 0.05 ? (a < 20 ? a : 20) : 0.05;
            out->fitted_k[FW_K_ACT] = 1;
            if (nm > 1) out->k_sd[FW_K_ACT] = sqrt(fmax(0, (syy - 2 * a * sxy + a * a * sxx) / (nm - 1) / sxx));
        }
    }
    out->fitted = t.f;
    /* every run of the framework predicted with the fitted profile */
    double sum_s[2] = {0, 0}, sum_m[2] = {0, 0};
    for (int j = 0; j < n; j++) {
        const layout_run *r = &runs[out->index[j]];
        layout_run_result *x = &out->rows[j];
        if ((st = predict(r, &out->fitted, &x->step_us, &x->peak_bytes, NULL, msg, len)) != PL_OK) goto out;
        const int h = !x->fit;
        x->step_err = (x->step_us - r->step_us) / r->step_us;
        sum_s[h] += fabs(x->step_err);
        if (fabs(x->step_err) > out->step_max[h]) out->step_max[h] = fabs(x->step_err);
        x->peak_err = NAN;
        if (r->peak_bytes > 0) {
            x->peak_err = (x->peak_bytes - r->peak_bytes) / r->peak_bytes;
            sum_m[h] += fabs(x->peak_err);
            if (fabs(x->peak_err) > out->mem_max[h]) out->mem_max[h] = fabs(x->peak_err);
            out->n_mem[h]++;
        }
    }
    for (int h = 0; h < 2; h++) {
        const int cnt = h ? out->n_test : out->n_fit;
        out->step_mae[h] = cnt ? sum_s[h] / cnt : 0;
        out->mem_mae[h] = out->n_mem[h] ? sum_m[h] / out->n_mem[h] : 0;
    }
out:
    free(fit_idx);
    if (st != PL_OK) layout_fit_free(out);
    return st;
}
