/*
 * layout_confirm.c: a tp x dp layout timed over forked ranks, and its
 * prediction by the layout simulator on a cluster made from the profile
 * (layout_confirm.h).
 */
#include "layout_confirm.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib_db.h"
#include "coll_fit.h"
#include "dist_group.h"
#include "dist_step.h"
#include "placement.h"

pl_status calib_cpu_cluster(const profile_data *p, int64_t world, double flops, double mem_bw,
                            const coll_measured *meas, cluster *out, char *msg, size_t len) {
    if (!p || p->n_devices < 1 || world < 1 || world > 1024 || !(flops > 0) || !isfinite(flops) || !(mem_bw > 0) ||
        !isfinite(mem_bw) || !meas || !out)
        return pl_fail(msg, len, PL_ERR_INVALID, "calib_cpu_cluster: bad arguments");
    cluster c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%.40s-from-profile", p->machine);
    c.n_gpu_types = 1;
    cluster_gpu *g = &c.gpus[0];
    snprintf(g->name, sizeof g->name, "%.40s (from the profile)", p->devices[0].name);
    for (int k = 0; k < PRECISION_COUNT; k++) g->peak_flops[k] = flops;
    g->hbm_bw = mem_bw;
    g->hbm_bytes = p->devices[0].mem_bytes > 0 ? p->devices[0].mem_bytes : (int64_t)8 << 30;
    g->sm_count = strcmp(p->devices[0].name, "cpu") && p->devices[0].sm_count > 0 ? p->devices[0].sm_count : 1;
    c.n_groups = 1;
    c.groups[0].gpu_type = 0;
    c.groups[0].n_nodes = 1;
    c.gpus_per_node = (int)world;
    /* pipeline sends only (pp = 1 here): the all-reduce fit's figures, or 1 GB/s, 10 us */
    const coll_ab *ar = &meas->model[COLL_ALL_REDUCE];
    c.intra_bw = ar->fitted ? ar->busbw : 1e9;
    c.intra_latency_us = ar->fitted ? ar->alpha_us : 10.0;
    c.pod_oversubscription = 1;
    c.p2p_efficiency = 1;
    c.collective_efficiency = 1;
    char m2[256];
    if (cluster_validate(&c, m2, sizeof m2) != PL_OK)
        return pl_fail(msg, len, PL_ERR_INVALID, "the CPU profile's cluster: %s", m2);
    *out = c;
    return PL_OK;
}

/* Whether the profile's device is the CPU backend (its loops take time by
 * FLOPs: no GPU tiles; no per-kernel launch gap to fit). */
static int is_cpu(const profile_data *p) { return strcmp(p->devices[0].name, "cpu") == 0; }

/* The simulated step of l on the profile's cluster with rates flops and
 * mem_bw and a per-kernel overhead of kernel_us. */
static pl_status sim_step(const gpt_config *cfg, const layout *l, const profile_data *p, double flops, double mem_bw,
                          double kernel_us, const coll_measured *meas, calib_layout_prediction *pr, char *msg,
                          size_t len) {
    cluster c;
    pl_status st = calib_cpu_cluster(p, layout_world_size(l), flops, mem_bw, meas, &c, msg, len);
    if (st != PL_OK) return st;
    layout_sim *s = NULL;
    char m2[512] = "";
    if ((st = layout_sim_create_measured(cfg, l, &c, meas, &s, m2, sizeof m2)) != PL_OK)
        return pl_fail(msg, len, st, "layout simulator: %s", m2);
    layout_sim_params prm;
    layout_sim_params_default(&prm);
    prm.compute.kernel_overhead_us = kernel_us;
    if (is_cpu(p)) {
        prm.compute.use_measured = 0;
        prm.compute.no_tiles = 1; /* the CPU backend's loops: time follows FLOPs, not a GPU's tiles */
    }
    st = layout_sim_run(s, &prm, 0, &pr->res, m2, sizeof m2);
    if (st == PL_OK) {
        pr->step_us = pr->res.step_us;
        layout_sim_coll_sources(s, &pr->n_model, &pr->n_fitted, &pr->n_measured);
    } else {
        pl_fail(msg, len, st, "layout simulator: %s", m2);
    }
    layout_sim_destroy(s);
    return st;
}

/* One device step of mb samples (tp = dp = pp = 1, m = 1). */
static pl_status single_step(const gpt_config *cfg, const layout *l, const profile_data *p, int mb, double flops,
                             double mem_bw, double kernel_us, const coll_measured *meas, double *us, char *msg,
                             size_t len) {
    layout one = *l;
    one.tp = one.cp = one.dp = one.pp = one.vp = 1;
    one.sp = 0;
    one.zero = ZERO_NONE;
    one.micro_batch = mb;
    one.global_batch = mb;
    one.n_stage_layers = 0;
    gpt_config c1 = *cfg;
    c1.batch = mb;
    calib_layout_prediction pr;
    memset(&pr, 0, sizeof pr);
    pl_status st = sim_step(&c1, &one, p, flops, mem_bw, kernel_us, meas, &pr, msg, len);
    *us = pr.step_us;
    return st;
}

/* Least squares in relative error, sum_i ((X_i . w - t_i) / t_i)^2, over
 * the columns 0 and 1 in `use` (bits 0, 1); column 2 is a known time with
 * w[2] = 1 (the fixed per-kernel overhead). gsl_multifit_linear (SVD) on
 * rows scaled by 1/t and balanced columns. 1 with w (unused rates 0) and
 * the sum when the used rates are > 0, else 0 (also when GSL fails). */
static int nnls_subset(const double (*X)[3], const double *t, int n, unsigned use, double *w, double *ss) {
    int col[2], k = 0;
    for (int j = 0; j < 2; j++)
        if (use & (1u << j)) col[k++] = j;
    if (k == 0 || n < k) return 0;
    gsl_matrix *A = gsl_matrix_alloc((size_t)n, (size_t)k), *cov = gsl_matrix_alloc((size_t)k, (size_t)k);
    gsl_vector *y = gsl_vector_alloc((size_t)n), *c = gsl_vector_alloc((size_t)k);
    gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc((size_t)n, (size_t)k);
    int ok = 0;
    double scale[2] = {0, 0}, chisq = 0;
    if (!A || !cov || !y || !c || !ws) goto out;
    for (int i = 0; i < n; i++) {
        for (int a = 0; a < k; a++) {
            const double v = X[i][col[a]] / t[i];
            gsl_matrix_set(A, (size_t)i, (size_t)a, v);
            if (fabs(v) > scale[a]) scale[a] = fabs(v);
        }
        gsl_vector_set(y, (size_t)i, 1.0 - X[i][2] / t[i]);
    }
    for (int a = 0; a < k; a++) {
        if (!(scale[a] > 0)) goto out;
        gsl_vector_view v = gsl_matrix_column(A, (size_t)a);
        gsl_vector_scale(&v.vector, 1.0 / scale[a]);
    }
    if (gsl_multifit_linear(A, y, c, cov, &chisq, ws) != GSL_SUCCESS) goto out;
    double v[3] = {0, 0, 1};
    for (int a = 0; a < k; a++) v[col[a]] = gsl_vector_get(c, (size_t)a) / scale[a];
    for (int j = 0; j < 2; j++)
        if (!isfinite(v[j]) || v[j] < 0 || ((use & (1u << j)) && !(v[j] > 0))) goto out;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        const double r = (X[i][0] * v[0] + X[i][1] * v[1] + X[i][2] * v[2] - t[i]) / t[i];
        sum += r * r;
    }
    memcpy(w, v, sizeof v);
    *ss = sum;
    ok = 1;
out:
    gsl_matrix_free(A);
    gsl_matrix_free(cov);
    gsl_vector_free(y);
    gsl_vector_free(c);
    if (ws) gsl_multifit_linear_free(ws);
    return ok;
}

pl_status calib_layout_predict(profile_db *db, const char *key, const profile_data *p, const gpt_config *cfg,
                               const layout *l, const coll_measured *meas, calib_layout_prediction *out, char *msg,
                               size_t len) {
    if (!db || !key || !p || p->n_devices < 1 || !cfg || !l || !meas || !out)
        return pl_fail(msg, len, PL_ERR_INVALID, "calib_layout_predict: NULL argument");
    memset(out, 0, sizeof *out);
    gsl_set_error_handler_off();
    /* the anchors: whole single-device steps of mb samples */
    int mbs[CALIB_MAX_ANCHORS], n = 0;
    double t[CALIB_MAX_ANCHORS], X[CALIB_MAX_ANCHORS][3];
    for (int mb = 1; mb <= 1024 && n < CALIB_MAX_ANCHORS; mb++) {
        double us;
        if (profile_db_get_step_anchor(db, key, 0, mb, &us, NULL) == PL_OK && us > 0 && isfinite(us)) {
            mbs[n] = mb;
            t[n++] = us;
        }
    }
    if (n == 0)
        return pl_fail(msg, len, PL_ERR_NOT_FOUND,
                       "the profile holds no whole-step anchor of graph %s (placer profile measures them)", key);
    /* each anchor's simulated time is X . (1/x, 1/y, 1): GEMM time at the reference
     * rate over x, memory-bound time at the reference bandwidth over y, and the
     * kernels' fixed overhead (not fitted: every column is affine in the
     * micro-batch size, so the anchors tell two constants apart, not three) */
    const double huge = 1e30, kernel_us = is_cpu(p) ? 0.0 : CALIB_GPU_KERNEL_US;
    pl_status st;
    for (int i = 0; i < n; i++) {
        if ((st = single_step(cfg, l, p, mbs[i], CPU_PEAK_FLOPS, huge, 0, meas, &X[i][0], msg, len)) != PL_OK ||
            (st = single_step(cfg, l, p, mbs[i], huge, CPU_MEM_BW, 0, meas, &X[i][1], msg, len)) != PL_OK)
            return st;
        X[i][2] = 0;
        if (kernel_us > 0 &&
            (st = single_step(cfg, l, p, mbs[i], huge, huge, kernel_us, meas, &X[i][2], msg, len)) != PL_OK)
            return st;
    }
    double w[3] = {0, 0, 1}, best = INFINITY, wv[3], fit_ss;
    if (nnls_subset((const double (*)[3])X, t, n, 3u, wv, &fit_ss)) best = fit_ss, memcpy(w, wv, sizeof w);
    if (!isfinite(best)) { /* one anchor, or a negative rate: one common scale for both */
        double Y[CALIB_MAX_ANCHORS][3];
        for (int i = 0; i < n; i++) Y[i][0] = X[i][0] + X[i][1], Y[i][1] = 0, Y[i][2] = X[i][2];
        if (nnls_subset((const double (*)[3])Y, t, n, 1u, wv, &fit_ss)) best = fit_ss, w[0] = w[1] = wv[0];
        out->one_scale = 1;
    }
    if (!isfinite(best) || !(w[0] > 0) || !(w[1] > 0))
        return pl_fail(msg, len, PL_ERR_INVALID, "the profile's step anchors fit no positive compute rate");
    out->flops = CPU_PEAK_FLOPS / w[0];
    out->mem_bw = CPU_MEM_BW / w[1];
    out->kernel_us = kernel_us;
    out->n_anchors = n;
    double ss = 0, mx = 0;
    for (int i = 0; i < n; i++) {
        const double r = (X[i][0] * w[0] + X[i][1] * w[1] + X[i][2] * w[2] - t[i]) / t[i];
        ss += r * r;
        if (fabs(r) > mx) mx = fabs(r);
    }
    out->anchor_rms = sqrt(ss / n);
    out->anchor_max = mx;
    return sim_step(cfg, l, p, out->flops, out->mem_bw, out->kernel_us, meas, out, msg, len);
}

/* ---- several layouts in shuffled rounds ---- */

pl_status calib_layouts_predict(profile_db *db, const calib_model *mo, const step_layout *sl, int n,
                                calib_layouts_confirm *c, char *msg, size_t len) {
    if (!c) return pl_fail(msg, len, PL_ERR_INVALID, "calib_layouts_predict: NULL result");
    memset(c, 0, sizeof *c);
    if (!db || !mo || !sl || n < 1 || n > CALIB_MAX_LAYOUTS)
        return pl_fail(msg, len, PL_ERR_INVALID, "calib_layouts_predict: bad arguments");
    c->n = n;
    c->meas = calloc(1, sizeof *c->meas);
    c->pred = calloc((size_t)n, sizeof *c->pred);
    if (!c->meas || !c->pred) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    calib_coll_fit_result fr;
    pl_status st = calib_coll_fit_db(db, NULL, c->meas, &fr, msg, len);
    if (st != PL_OK) {
        c->fit_failed = 1;
        return st;
    }
    calib_coll_fit_free(&fr);
    c->meas->use_curves = 1;
    for (int i = 0; i < n; i++)
        if ((st = calib_layout_predict(db, mo->key, mo->p, &mo->cfg, &sl[i].l, c->meas, &c->pred[i], msg, len)) !=
            PL_OK)
            return st;
    return PL_OK;
}

/* One timing of layout sl (pp 1) of model mo over its tp x dp ranks, each
 * with one logical device, by the engine's runner of a grid
 * (hw/dist/dist_step.h, as `placer step --layout` runs it): rank 0's
 * timing in *t. */
static pl_status time_one(const calib_model *mo, const step_layout *sl, const calib_layouts_opts *o, hw_timing *t,
                          char *msg, size_t len) {
    if (sl->world > DIST_MAX_RANKS || mo->cfg.batch % sl->dp != 0 || sl->micro_batches < 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "layout %.200s: not a job for the ranks", sl->text);
    dist_step_job job;
    dist_step_job_default(&job);
    job.cfg = mo->cfg;
    job.sched = schedule_make(sl->micro_batches, SCHED_1F1B);
    job.cuda = o->cuda;
    job.gpus[0] = 0; /* CUDA: every rank on GPU 0 (host-staged collectives, hw/dist/dist_device.h) */
    job.prec = sl->prec;
    job.seed = o->seed;
    job.warmup = o->warmup;
    job.steps = o->steps;
    job.procs = sl->world;
    job.tp = sl->tp;
    job.sp = sl->sp;
    job.zero = sl->zero;
    job.one_rank_group = 0; /* a layout of one rank runs as one process would: no groups */
    if (o->timeout_s > 0) job.timeout_s = o->timeout_s;
    dist_step_result *r = malloc(sizeof *r);
    if (!r) return pl_fail(msg, len, PL_ERR_NOMEM, "out of host memory");
    char m2[512] = "";
    pl_status st = dist_step_run(&job, r, m2, sizeof m2);
    if (st == PL_OK) *t = r->t;
    else pl_fail(msg, len, st, "layout %.200s: %s", sl->text, m2);
    free(r);
    return st;
}

pl_status calib_layouts_time(profile_db *db, const calib_model *mo, const step_layout *sl,
                             const calib_layouts_opts *o, calib_layouts_confirm *c, char *msg, size_t len) {
    if (!db || !mo || !sl || !o || !c || !c->pred || o->rounds < 1 || o->steps < 1 || o->steps > 64 || o->warmup < 0 ||
        c->n < 1 || c->n > CALIB_MAX_LAYOUTS)
        return pl_fail(msg, len, PL_ERR_INVALID, "calib_layouts_time: bad arguments");
    const int n = c->n;
    free(c->median_us);
    c->median_us = calloc((size_t)n * (size_t)o->rounds, sizeof *c->median_us);
    char *pl_text = malloc(16384);
    int *zeros = calloc((size_t)mo->g->n_nodes, sizeof *zeros);
    pl_status st = PL_OK;
    if (!c->median_us || !pl_text || !zeros) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    c->rounds = o->rounds;
    placement_format(zeros, mo->g->n_nodes, pl_text, 16384);
    int order[CALIB_MAX_LAYOUTS];
    for (int i = 0; i < n; i++) order[i] = i;
    uint64_t rng = o->seed * 0x9E3779B97F4A7C15ull + 1;
    for (int r = 0; r < o->rounds; r++) {
        for (int i = n - 1; i > 0; i--) { /* a seeded Fisher-Yates shuffle per round */
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int k = (int)((rng >> 33) % (uint64_t)(i + 1)), tmp = order[i];
            order[i] = order[k];
            order[k] = tmp;
        }
        for (int q = 0; q < n; q++) {
            const int i = order[q];
            hw_timing t = {0};
            if ((st = time_one(mo, &sl[i], o, &t, msg, len)) != PL_OK) goto out;
            c->median_us[(size_t)i * o->rounds + r] = t.median_us;
            char extra[1536];
            snprintf(extra, sizeof extra, "{\"layout\": \"%.1024s\", \"ranks\": %d, \"round\": %d, \"predicted_us\": %.3f}",
                     sl[i].text, sl[i].world, r, c->pred[i].step_us);
            profile_measurement pm = {.graph_key = mo->key, .placement = pl_text, .micro_batches = sl[i].micro_batches,
                                      .schedule = "1f1b", .step_us = t.median_us, .spread_us = t.sd_us,
                                      .purpose = "confirm-layout", .extra = extra};
            if ((st = profile_db_add_measurement(db, &pm, NULL)) != PL_OK) {
                pl_fail(msg, len, st, "%s", profile_db_last_error(db));
                goto out;
            }
        }
    }
out:
    free(pl_text);
    free(zeros);
    return st;
}

void calib_layouts_confirm_free(calib_layouts_confirm *c) {
    if (!c) return;
    free(c->meas);
    free(c->pred);
    free(c->median_us);
    memset(c, 0, sizeof *c);
}
