/*
 * published_fp8.c: the FP8 / Blackwell check set (published_fp8.h): the
 * rows of fp8-runs.csv (read by inputs/fp8_runs.c) each simulated on its
 * cluster, the Blackwell GEMM base fitted on one named row.
 */
#include "published_fp8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_file.h"

/* The row's cluster with whole NVLink domains enough for its GPUs. */
static pl_status row_cluster(const pub_fp8_run *w, cluster *c, char *msg, size_t len) {
    pl_status st = cluster_load(w->cluster, NULL, c, msg, len);
    if (st != PL_OK) return st;
    const int64_t dom = cluster_domain_gpus(c), need = (w->gpus + dom - 1) / dom * dom;
    if (cluster_n_gpus(c) < need && c->n_groups == 1) c->groups[0].n_nodes = (int)(need / c->gpus_per_node);
    return PL_OK;
}

const char *pub_fp8_mem_why(const char *run_id) {
    if (run_id && !strcmp(run_id, "nemo2507-gb200-llama31-405b-fsdp"))
        return "the row keeps no recomputation (not stated on the page); NeMo r2.4.0's performance config for this "
               "layout (model_configs_gb200.csv: tp 2, Megatron FSDP) recomputes 95 of the 126 layers in full "
               "(recompute_method block), which the layout model cannot express (all layers or none): with those "
               "95 keeping only their inputs (0.134 of 1.713 GB a layer) the activations drop from 217.6 GB to ~69 GB, "
               "~132 GB in all: it fits";
    return "not audited";
}

static pl_status simulate(pub_fp8_row *w, double bw_eff, char *msg, size_t len) {
    cluster c;
    pl_status st = row_cluster(&w->run, &c, msg, len);
    if (st != PL_OK) return st;
    w->blackwell = strstr(c.gpus[0].name, "B200") || strstr(c.gpus[0].name, "Blackwell") != NULL;
    layout_sim *s = NULL;
    if ((st = layout_sim_create(&w->run.model, &w->run.lay, &c, &s, msg, len)) != PL_OK) return st;
    layout_sim_params prm;
    layout_sim_params_default(&prm);
    if (bw_eff > 0) prm.compute.blackwell_gemm_efficiency = bw_eff;
    st = layout_sim_run(s, &prm, 0, &w->res, msg, len);
    layout_sim_destroy(s);
    if (st != PL_OK) return st;
    w->mem_why = w->res.oom ? pub_fp8_mem_why(w->run.run_id) : NULL;
    w->predicted_tokens = w->res.tokens_per_s / (double)w->run.gpus;
    w->err = (w->predicted_tokens - w->run.published_tokens) / w->run.published_tokens;
    return PL_OK;
}

void pub_fp8_free(pub_fp8_result *r) {
    if (!r) return;
    free(r->rows);
    memset(r, 0, sizeof *r);
}

pl_status pub_fp8_check_run(const char *dir, int fit, double blackwell_eff, pub_fp8_result *out, char *msg,
                            size_t len) {
    memset(out, 0, sizeof *out);
    char m[320] = "";
    pub_fp8_run *runs = NULL;
    int n = 0;
    pl_status st = pub_fp8_runs_load(dir, &runs, &n, msg, len);
    if (st != PL_OK) return st;
    out->n = n;
    out->rows = calloc((size_t)(n > 0 ? n : 1), sizeof *out->rows);
    if (!out->rows) {
        free(runs);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    }
    int fit_row = -1;
    for (int i = 0; i < n; i++) {
        out->rows[i].run = runs[i];
        if (!strcmp(runs[i].run_id, PUB_FP8_FIT_ROW) && !runs[i].skipped[0]) fit_row = i;
    }
    free(runs);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", PUB_FP8_FILE);
    compute_params d;
    compute_params_default(&d);
    double eff = blackwell_eff > 0 ? blackwell_eff : d.blackwell_gemm_efficiency;
    if (fit) {
        if (fit_row < 0) return pl_fail(msg, len, PL_ERR_INVALID, "%s: no row '%s' to fit on", path, PUB_FP8_FIT_ROW);
        /* predicted throughput rises with the base: bisect to the published figure */
        double lo = 0.2, hi = 1.0;
        for (int it = 0; it < 40; it++) {
            double mid = 0.5 * (lo + hi);
            if ((st = simulate(&out->rows[fit_row], mid, m, sizeof m)) != PL_OK)
                return pl_fail(msg, len, st, "%s: %s", PUB_FP8_FIT_ROW, m);
            if (out->rows[fit_row].err > 0) hi = mid;
            else lo = mid;
        }
        eff = 0.5 * (lo + hi);
        out->fitted = 1;
    }
    out->blackwell_gemm_efficiency = eff;
    double sum = 0, sum_h = 0;
    for (int i = 0; i < out->n; i++) {
        pub_fp8_row *w = &out->rows[i];
        if (w->run.skipped[0]) continue;
        if ((st = simulate(w, eff, m, sizeof m)) != PL_OK) return pl_fail(msg, len, st, "%s: %s", w->run.run_id, m);
        w->fitted = i == fit_row;
        if (w->fitted) continue;
        const double a = fabs(w->err);
        sum += a;
        out->rows_scored++;
        if (a > out->max_abs_error) out->max_abs_error = a;
        if (!w->blackwell) {
            sum_h += a;
            out->rows_h100++;
            if (a > out->max_abs_error_h100) out->max_abs_error_h100 = a;
        }
    }
    out->mean_abs_error = out->rows_scored ? sum / out->rows_scored : 0;
    out->mean_abs_error_h100 = out->rows_h100 ? sum_h / out->rows_h100 : 0;
    return PL_OK;
}
