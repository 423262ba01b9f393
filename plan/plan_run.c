/*
 * plan_run.c: a plan as a user asks for it, and the profile path
 * (plan_run.h).
 */
#include "plan_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_file.h"
#include "layout_sim.h"

void plan_run_free(plan_run_result *r) {
    if (!r) return;
    free(r->res);
    memset(r, 0, sizeof *r);
}

/* Near-uniform splits people write by hand (vp = 1): the first and the
 * last stage one layer lighter or heavier than uniform, the middle stages
 * taking the difference evenly. */
static int human_splits(const layout *best, int L, int out[][LAYOUT_MAX_CHUNKS], int max) {
    const int P = best->pp;
    int n = 0;
    if (best->vp != 1 || P < 2) return 0;
    const int u = L / P;
    for (int d0 = -1; d0 <= 1; d0++)
        for (int d1 = -1; d1 <= 1; d1++) {
            const int first = u + d0, last = u + d1;
            if (first < 1 || last < 1 || n >= max) continue;
            const int mid = L - first - last;
            if (P == 2 ? mid != 0 : (mid < P - 2 || mid % (P - 2 > 0 ? P - 2 : 1) != 0)) continue;
            out[n][0] = first;
            for (int s = 1; s < P - 1; s++) out[n][s] = mid / (P - 2);
            out[n][P - 1] = last;
            n++;
        }
    return n;
}

/* The best layout's split against the uniform one, DeepSpeed's parameters
 * split (vp = 1) and the best near-uniform hand split, each simulated the
 * way the search simulates. */
static void compare_splits(plan_run_result *o, const layout_sim_params *prm) {
    const gpt_config *cfg = &o->model.cfg;
    const plan_entry *best = o->best;
    const int L = cfg->n_layers, P = best->l.pp;
    char msg[256];
    plan_split_row *rows = o->splits;
    memset(rows, 0, sizeof o->splits);
    rows[0].e = *best;
    snprintf(rows[0].label, sizeof rows[0].label, "plan (%s%s)", best->split_dp ? "DP split" : "uniform",
             best->refined ? " + moves" : "");
    rows[0].ok = 1;
    rows[1].e.l = best->l;
    rows[1].e.l.n_stage_layers = 0;
    snprintf(rows[1].label, sizeof rows[1].label, "uniform");
    rows[1].ok = plan_simulate(cfg, &o->clu, &rows[1].e.l, prm, &rows[1].e.res, msg, sizeof msg) == PL_OK;
    snprintf(rows[2].label, sizeof rows[2].label, "DeepSpeed parameters");
    rows[2].e.l = best->l;
    if (best->l.vp == 1 && plan_deepspeed_parameters_split(cfg, P, rows[2].e.l.stage_layers, msg, sizeof msg) == PL_OK) {
        rows[2].e.l.n_stage_layers = P;
        rows[2].ok = plan_simulate(cfg, &o->clu, &rows[2].e.l, prm, &rows[2].e.res, msg, sizeof msg) == PL_OK;
    }
    int hs[9][LAYOUT_MAX_CHUNKS];
    const int nh = human_splits(&best->l, L, hs, 9);
    int hbest = -1;
    plan_entry he;
    for (int i = 0; i < nh; i++) {
        he.l = best->l;
        he.l.n_stage_layers = P;
        memcpy(he.l.stage_layers, hs[i], sizeof(int) * (size_t)P);
        if (plan_simulate(cfg, &o->clu, &he.l, prm, &he.res, msg, sizeof msg) != PL_OK) continue;
        if (hbest < 0 || (!he.res.oom && (rows[3].e.res.oom || he.res.step_us < rows[3].e.res.step_us))) {
            rows[3].e = he;
            hbest = i;
        }
    }
    snprintf(rows[3].label, sizeof rows[3].label, "best hand split (of %d)", nh);
    rows[3].ok = hbest >= 0;
    o->n_splits = PLAN_SPLIT_ROWS;
}

/* The best layout's Chrome trace into path. */
static pl_status write_trace(const plan_run_result *o, const layout_sim_params *prm, const char *path, char *msg,
                             size_t len) {
    FILE *f = fopen(path, "w");
    if (!f) return pl_fail(msg, len, PL_ERR_IO, "cannot write the --trace file");
    layout_sim *s = NULL;
    layout_result tr;
    pl_status st = layout_sim_create(&o->model.cfg, &o->best->l, &o->clu, &s, msg, len);
    if (st == PL_OK) st = layout_sim_run(s, prm, 1, &tr, msg, len);
    if (st == PL_OK) st = layout_sim_write_chrome_trace(s, f);
    layout_sim_destroy(s);
    if (fclose(f) != 0 && st == PL_OK) st = PL_ERR_IO;
    return st;
}

/* Model, cluster, GPU count, global batch and --compare's layout. */
static pl_status load_inputs(const plan_run_options *o, plan_run_result *out, layout *cmp, char *msg, size_t len) {
    pl_status st = plan_model_load(o->model, o->seq, &out->model, msg, len);
    if (st != PL_OK) return st;
    if ((st = cluster_load(o->cluster, NULL, &out->clu, msg, len)) != PL_OK) return st;
    if (o->domain_gpus > 0 && (st = cluster_use_domain_gpus(&out->clu, o->domain_gpus, o->gpus, msg, len)) != PL_OK)
        return st;
    const int64_t total = cluster_n_gpus(&out->clu);
    out->search = o->search;
    out->search.gpus = o->gpus > 0 ? o->gpus : total;
    if (out->search.gpus > total)
        return pl_fail(msg, len, PL_ERR_INVALID, "--gpus %lld is more than cluster %s has (%lld)", (long long)o->gpus,
                       out->clu.name, (long long)total);
    out->search.global_batch = o->global_batch > 0 ? o->global_batch : out->model.cfg.batch;
    if (out->search.global_batch < 2 && o->global_batch == 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "give --global-batch (sequences per step); the model file has no batch");
    if (o->compare) {
        char m2[400];
        if (layout_parse(o->compare, cmp, m2, sizeof m2) != PL_OK)
            return pl_fail(msg, len, PL_ERR_INVALID, "--compare: %s", m2);
    }
    return PL_OK;
}

pl_status plan_run(const plan_run_options *o, plan_run_result *out, char *msg, size_t len) {
    memset(out, 0, sizeof *out);
    layout cmp;
    pl_status st = load_inputs(o, out, &cmp, msg, len);
    if (st != PL_OK) return st;
    out->res = calloc(1, sizeof *out->res);
    if (!out->res) return pl_fail(msg, len, PL_ERR_NOMEM, "%s", "");
    const plan_options *so = &out->search;
    st = plan_search(&out->model.cfg, &out->clu, so, o->progress, o->progress_ctx, out->res, msg, len);
    if (st == PL_ERR_UNSUPPORTED && !*msg)
        return pl_fail(msg, len, st, "the layout simulator is not built in; placer plan needs it");
    if (st == PL_ERR_INTERRUPTED) /* stopped: the best found so far, nothing more */
        out->best = out->res->n_top > 0 ? &out->res->top[0] : NULL;
    if (st != PL_OK) return st;
    if (o->compare) {
        out->cmp.l = cmp;
        st = plan_simulate(&out->model.cfg, &out->clu, &cmp, so->sim, &out->cmp.res, msg, len);
        if (st != PL_OK) return st;
        out->have_cmp = 1;
    }
    out->best = out->res->n_top > 0 ? &out->res->top[0] : NULL;
    if (out->best && o->splits) compare_splits(out, so->sim);
    if (out->best && o->schedules) {
        st = plan_schedule_rows(&out->model.cfg, &out->clu, so->sim, &out->best->l, out->sched, msg, len);
        if (st != PL_OK) return st;
        out->n_sched = PLAN_SCHED_ROWS;
    }
    if (out->best && o->trace_path) st = write_trace(out, so->sim, o->trace_path, msg, len);
    return st;
}

pl_status plan_profile_run(const char *db, const char *config, const plan_options *o, plan_profile_result *out,
                           char *msg, size_t len) {
    memset(out, 0, sizeof *out);
    if (o->fix_tp > 1 || o->fix_cp > 1 || o->fix_dp > 1 || o->fix_vp > 1 || o->fix_recompute > 0 || o->fix_zero > 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "--db: a profile has only pipelines (tp = cp = dp = vp = 1, no "
                                                 "recompute or zero); --fix may hold pp and mbs");
    plan_profile_options po = {db, config, 0, -1, 0, NULL, 0};
    pl_status st;
    if (o->fix_mbs > 0) {
        /* m = batch / mbs: learn the batch first */
        st = plan_profile_search(&(plan_profile_options){db, config, 1, 0, 0, NULL, 1}, out, msg, len);
        if (st != PL_OK) return st;
        const int batch = out->batch;
        plan_profile_result_free(out);
        if (batch % o->fix_mbs)
            return pl_fail(msg, len, PL_ERR_INVALID, "--fix mbs=%d does not divide the profile's batch %d", o->fix_mbs,
                           batch);
        po.micro_batches = batch / o->fix_mbs;
    }
    return plan_profile_search(&po, out, msg, len);
}
