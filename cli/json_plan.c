/*
 * json_plan.c: a plan as JSON, the object `placer plan --json` prints and
 * the last line `placer serve`'s POST /api/plan streams (cli_json.h): the
 * search's counts, the top layouts in the exports' JSON form
 * (plan/export_json.c), the fastest OOM layout, --compare and --splits.
 */
#include "cli_json.h"

#include "export_plan.h"

/* One plan entry as export JSON (layout_chunk_layers must succeed). */
static void print_entry_json(FILE *f, const char *key, const gpt_config *cfg, const plan_entry *e) {
    int chunks[LAYOUT_MAX_CHUNKS];
    if (layout_chunk_layers(&e->l, cfg->n_layers, chunks, NULL, 0) != PL_OK) return;
    fprintf(f, "%s", key);
    plan_export_json(f, cfg, &e->l, chunks, &e->res);
}

static void print_splits_json(FILE *f, const plan_run_result *x) {
    fprintf(f, ", \"splits\": [");
    for (int i = 0; i < x->n_splits; i++) {
        const plan_split_row *w = &x->splits[i];
        fprintf(f, "%s{\"label\": \"%s\", \"ok\": %s", i ? ", " : "", w->label, w->ok ? "true" : "false");
        if (w->ok) print_entry_json(f, ", \"plan\": ", &x->model.cfg, &w->e);
        fprintf(f, "}");
    }
    fprintf(f, "]");
}

void cli_json_plan(FILE *f, const plan_run_result *x) {
    const plan_result *res = x->res;
    const gpt_config *cfg = &x->model.cfg;
    fprintf(f, "{\"model\": \"%s\", \"cluster\": \"%s\", \"gpus\": %lld, \"global_batch\": %d, \"seq_len\": %d, "
           "\"precision\": \"%s\", \"search\": {\"considered\": %lld, \"pruned_memory\": %lld, "
           "\"pruned_bound\": %lld, \"simulated\": %lld, \"sim_runs\": %lld, \"sim_oom\": %lld, \"refine_runs\": %lld, "
           "\"wall_s\": %.3f}, "
           "\"fits\": %s, \"min_mem_bytes\": %lld, \"top\": [",
           x->model.name, x->clu.name, (long long)x->search.gpus, x->search.global_batch, cfg->seq_len,
           precision_name(x->search.prec), (long long)res->considered, (long long)res->pruned_memory,
           (long long)res->pruned_bound, (long long)res->simulated, (long long)res->sim_runs, (long long)res->sim_oom,
           (long long)res->refine_runs, res->wall_s, x->best ? "true" : "false", (long long)res->min_mem_bytes);
    for (int i = 0; i < res->n_top; i++) {
        int chunks[LAYOUT_MAX_CHUNKS];
        layout_chunk_layers(&res->top[i].l, cfg->n_layers, chunks, NULL, 0);
        fprintf(f, "%s", i ? ", " : "");
        plan_export_json(f, cfg, &res->top[i].l, chunks, &res->top[i].res);
    }
    fprintf(f, "]");
    /* the fastest layout that does not fit, for scripts */
    if (res->have_oom_best) print_entry_json(f, ", \"fastest_oom\": ", cfg, &res->oom_best);
    if (x->have_cmp) print_entry_json(f, ", \"compare\": ", cfg, &x->cmp);
    if (x->n_splits) print_splits_json(f, x);
    fprintf(f, "}\n");
}
