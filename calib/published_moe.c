/*
 * published_moe.c: the mixture-of-experts check set (published_moe.h):
 * moe-runs.csv's rows as model, cluster and layout (read by
 * inputs/moe_runs.c), simulated by the layout simulator, held against the
 * published step time.
 */
#include "published_moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout_sim.h"

/* One row read, simulated into *row (row->why set when it cannot be). */
static void run_row(const pub_moe_run *run, pub_moe_row *row) {
    snprintf(row->run_id, sizeof row->run_id, "%s", run->run_id);
    snprintf(row->model_name, sizeof row->model_name, "%s", run->model_name);
    if (run->why[0]) {
        snprintf(row->why, sizeof row->why, "%s", run->why);
        return;
    }
    layout_format(&run->lay, row->layout_text, sizeof row->layout_text);
    char m[512];
    layout_sim *s = NULL;
    layout_result res;
    layout_sim_params p;
    layout_sim_params_default(&p);
    if (run->forced_balance) p.moe.expert_cv = 0.0; /* the run forced balanced routing */
    if (run->capacity_factor > 0) { /* dropped at the capacity, each expert padded to it: every local
                                       expert computes capacity rows, the busiest rank capacity x the mean */
        p.moe.capacity_factor = run->capacity_factor;
        p.moe.expert_cv = 0.0;
    }
    if (run->capacity_factor > 0)
        snprintf(row->routing, sizeof row->routing, "token drop at capacity %.2g, padded (expert_cv 0)",
                 run->capacity_factor);
    else if (run->forced_balance)
        snprintf(row->routing, sizeof row->routing, "forced balance (expert_cv 0)");
    else
        snprintf(row->routing, sizeof row->routing, "dropless (expert_cv %.2g)", p.moe.expert_cv);
    if (layout_sim_create(&run->model, &run->lay, &run->cl, &s, m, sizeof m) != PL_OK ||
        layout_sim_run(s, &p, 0, &res, m, sizeof m) != PL_OK) {
        layout_sim_destroy(s);
        snprintf(row->why, sizeof row->why, "simulator: %.140s", m);
        return;
    }
    layout_sim_destroy(s);
    row->published_step_s = (double)run->lay.global_batch * run->seq / (run->tokens_per_s * run->gpus);
    row->predicted_step_s = res.step_us * 1e-6;
    row->err = row->predicted_step_s / row->published_step_s - 1.0;
    row->mem_gb = res.mem.total / 1e9;
    row->oom = res.oom;
    snprintf(row->cluster, sizeof row->cluster, "%s", run->cl.name);
    row->gpus = run->gpus;
    row->seq = run->seq;
    row->lay = run->lay;
    row->res = res;
    if (res.oom) { /* the reason beside it: the largest parts of the worst stage */
        const layout_memory *mm = &res.mem;
        const struct {
            const char *name;
            int64_t b;
        } parts[] = {{"routed activations", mm->moe_activations}, {"activations", mm->activations},
                     {"expert optimizer", mm->expert_optimizer}, {"optimizer", mm->optimizer},
                     {"fp8 weight copies", mm->fp8_weights},    {"expert weights", mm->expert_params},
                     {"weights", mm->params},                   {"expert grads", mm->expert_grads},
                     {"grads", mm->grads}};
        int a = 0, b = 1;
        for (int i = 0; i < (int)(sizeof parts / sizeof parts[0]); i++) {
            if (parts[i].b > parts[a].b) b = a, a = i;
            else if (i != a && parts[i].b > parts[b].b) b = i;
        }
        /* the term no row's source states: what the routed activations keep for the gate's gradient */
        const int routed = a == 0 || b == 0;
        snprintf(row->oom_why, sizeof row->oom_why,
                 "%.1f GB over the %.1f GB of stage %d's GPU; largest parts: %s %.1f GB, %s %.1f GB%s",
                 (res.mem.total - res.mem_cap) / 1e9, res.mem_cap / 1e9, res.worst_stage, parts[a].name,
                 parts[a].b / 1e9, parts[b].name, parts[b].b / 1e9,
                 routed ? "; not sourced: the experts' bf16 outputs the routed activations keep for the gate's "
                          "gradient (docs/moe.md)"
                        : "");
    }
    row->simulated = 1;
}

pl_status pub_moe_check(const char *csv_path, const char *clusters_dir, pub_moe_result *out, char *msg, size_t len) {
    if (!out) return pl_fail(msg, len, PL_ERR_INVALID, "pub_moe_check: NULL result");
    memset(out, 0, sizeof *out);
    pub_moe_run *runs = NULL;
    int n = 0;
    pl_status st = pub_moe_runs_load(csv_path, clusters_dir, &runs, &n, msg, len);
    if (st != PL_OK) return st;
    double sum = 0;
    for (int r = 0; r < n; r++) {
        pub_moe_row *row = &out->rows[out->n++];
        run_row(&runs[r], row);
        if (!row->simulated) continue;
        out->n_simulated++;
        sum += fabs(row->err);
        if (fabs(row->err) > out->max_abs_err) out->max_abs_err = fabs(row->err);
    }
    out->mean_abs_err = out->n_simulated ? sum / out->n_simulated : 0.0;
    free(runs);
    return PL_OK;
}
