/*
 * json_layout.c: one simulated layout as JSON, the object `placer layout
 * --json` prints and `placer serve`'s POST /api/layout answers (cli_json.h).
 * One writer for both, so the page shows exactly what the command prints.
 */
#include "cli_json.h"

#include "cli_print.h"
#include "model_params.h"
#include "util.h"

static void print_coll_json(FILE *f, const char *key, const coll_estimate *e, int last) {
    fprintf(f, "    \"%s\": {\"algo\": ", key);
    pl_json_string(f, e->algo ? e->algo : "none");
    fprintf(f, ", \"source\": ");
    pl_json_string(f, e->source ? e->source : "model");
    fprintf(f,
            ", \"time_us\": %.3f, \"bytes\": %.0f, \"n_ranks\": %d, \"n_nodes\": %d, \"n_pods\": %d, "
            "\"algbw_gbs\": %.3f, \"busbw_gbs\": %.3f, \"link_bw_gbs\": %.3f, \"latency_us\": %.3f",
            e->time_us, e->algbw * e->time_us * 1e-6, e->n_ranks, e->n_nodes, e->n_pods, e->algbw / 1e9,
            e->busbw / 1e9, e->link_bw / 1e9, e->latency_us);
    if (e->n_domains > 0 && e->n_domains != e->n_nodes) /* a domain wider than a node (bf16 clusters unchanged) */
        fprintf(f, ", \"n_domains\": %d", e->n_domains);
    fprintf(f, "}%s\n", last ? "" : ",");
}

/* Peak of the layout's precision on the cluster's first GPU type. */
static double peak_flops(const layout_eval_result *x) { return cluster_gpu_of(&x->clu, 0)->peak_flops[x->lay.prec]; }

void cli_json_layout(FILE *f, const layout_eval_result *x, int hw_flops, const coll_measured *meas) {
    const layout_result *r = &x->res;
    char lt[LAYOUT_MAX_CHUNKS * 5 + 256];
    const double peak = peak_flops(x);
    const double tflops = hw_flops ? r->hw_tflops_per_gpu : r->model_tflops_per_gpu;
    fprintf(f, "{\n  \"model\": ");
    pl_json_string(f, x->model.name);
    fprintf(f, ",\n  \"cluster\": ");
    pl_json_string(f, x->clu.name);
    fprintf(f, ",\n  \"layout\": ");
    layout_format(&x->lay, lt, sizeof lt);
    pl_json_string(f, lt);
    fprintf(f, ",\n  \"gpus\": %lld,\n  \"micro_batches\": %d,\n  \"seq_len\": %d,\n", (long long)r->world,
           r->micro_batches, x->model.cfg.seq_len);
    fprintf(f, "  \"step_us\": %.3f,\n  \"tokens_per_s\": %.3f,\n", r->step_us, r->tokens_per_s);
    fprintf(f, "  \"model_flops\": %.6e,\n  \"hw_flops\": %.6e,\n", r->model_flops, r->hw_flops);
    fprintf(f, "  \"model_tflops_per_gpu\": %.4f,\n  \"hw_tflops_per_gpu\": %.4f,\n", r->model_tflops_per_gpu,
           r->hw_tflops_per_gpu);
    fprintf(f, "  \"flops\": \"%s\",\n  \"tflops_per_gpu\": %.4f,\n", hw_flops ? "hardware" : "model", tflops);
    fprintf(f, "  \"peak_tflops\": %.3f,\n  \"mfu\": %.6f,\n  \"hfu\": %.6f,\n", peak / 1e12, r->mfu,
           peak > 0 ? r->hw_tflops_per_gpu * 1e12 / peak : 0.0);
    fprintf(f, "  \"critical_stage\": %d,\n  \"breakdown_us\": ", r->critical_stage);
    cli_print_parts_json(f, r->parts_us, 1.0, 3);
    if (gpt_is_moe(&x->model.cfg)) { /* MoE models only: a dense layout's JSON is as it was */
        int64_t total = 0, active = 0;
        gpt_param_counts(&x->model.cfg, 1, &total, &active);
        fprintf(f, ",\n  \"params_total\": %lld,\n  \"params_active\": %lld,\n  \"per_stage_us\": [",
                (long long)total, (long long)active);
        for (int s = 0; s < x->lay.pp; s++)
            fprintf(f, "%s{\"compute\": %.3f, \"dispatch\": %.3f, \"idle\": %.3f}", s ? ", " : "",
                    r->stage_compute_us[s], r->stage_ep_us[s], r->stage_idle_us[s]);
        fprintf(f, "]");
    }
    fprintf(f, ",\n  \"memory\": {\"worst_stage\": %d, \"total\": %lld, \"params\": %lld, \"grads\": %lld, "
           "\"optimizer\": %lld, \"activations\": %lld, \"act_per_layer\": %lld, \"buffers\": %lld, "
           "\"embedding_head\": %lld, \"cap\": %lld, \"stash_layers\": %d, \"oom\": %s,",
           r->worst_stage, (long long)r->mem.total, (long long)r->mem.params, (long long)r->mem.grads,
           (long long)r->mem.optimizer, (long long)r->mem.activations, (long long)r->mem.act_per_layer,
           (long long)r->mem.buffers, (long long)r->mem.embedding_head, (long long)r->mem_cap, r->stash_layers,
           r->oom ? "true" : "false");
    if (x->lay.prec == PRECISION_FP8) /* FP8's own parts (bf16 output unchanged) */
        fprintf(f, " \"fp8_weights\": %lld, \"fp8_act_per_layer\": %lld,", (long long)r->mem.fp8_weights,
               (long long)r->mem.fp8_act_per_layer);
    fprintf(f, "\n    \"per_stage\": [");
    for (int s = 0; s < x->lay.pp; s++) fprintf(f, "%s%lld", s ? ", " : "", (long long)r->stage_mem[s]);
    fprintf(f, "]");
    if (r->mem.expert_params > 0) /* MoE models only: a dense layout's JSON is as it was */
        fprintf(f, ",\n    \"expert_params\": %lld, \"expert_grads\": %lld, \"expert_optimizer\": %lld, "
               "\"moe_activations\": %lld, \"moe_buffers\": %lld, \"ep_dispatch_us\": %.3f, "
               "\"ep_tokens_per_expert\": %.1f",
               (long long)r->mem.expert_params, (long long)r->mem.expert_grads, (long long)r->mem.expert_optimizer,
               (long long)r->mem.moe_activations, (long long)r->mem.moe_buffers, r->ep_dispatch.time_us,
               r->ep_tokens_per_expert);
    fprintf(f, "},\n  \"collectives\": {\n");
    print_coll_json(f, "tp_allreduce", &r->tp_allreduce, 0);
    print_coll_json(f, "tp_allgather", &r->tp_allgather, 0);
    print_coll_json(f, "tp_reduce_scatter", &r->tp_reduce_scatter, 0);
    print_coll_json(f, "cp_allgather", &r->cp_allgather, 0);
    print_coll_json(f, "dp_reduce", &r->dp_reduce, 0);
    print_coll_json(f, "dp_allgather", &r->dp_allgather, 1);
    fprintf(f, "  },\n  \"pp_send\": {\"time_us\": %.3f, \"bytes\": %.0f, \"link\": \"%s\"},\n", r->pp_send_us,
           r->pp_send_bytes, x->pp_link);
    fprintf(f, "  \"collective_sources\": {\"model\": %d, \"fitted\": %d, \"measured\": %d, \"from\": ", x->n_coll_model,
           x->n_coll_fitted, x->n_coll_measured);
    if (meas) pl_json_string(f, meas->source);
    else fputs("null", f);
    fprintf(f, "},\n  \"dp_buckets\": %d\n}\n", r->dp_buckets);
}
