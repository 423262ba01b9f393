/*
 * export_json.c: a layout and its prediction as one JSON object (the
 * "json" export, and each layout of `placer plan --json`):
 *   {"layout": {tp, sp, cp, pp, vp, dp, zero, micro_batch, global_batch,
 *               micro_batches, recompute, precision, world},
 *    "chunk_layers": [...pp * vp, pipeline order],
 *    "stage_layers": [...pp, layers per stage over its chunks],
 *    "model": {layers, d_model, heads, kv_heads, d_ff, vocab, seq_len},
 *    "predicted": {step_ms, tokens_per_s, mfu, model_tflops_per_gpu,
 *                  hw_tflops_per_gpu, oom, memory_bytes {...}, mem_cap_bytes,
 *                  headroom_bytes, worst_stage, breakdown_ms {...}}}
 * "predicted" only when a result is given. Names of the zero, recompute and
 * breakdown values are the ones core/layout.h and sim/layout/layout_sim.h print.
 */
#include <math.h>
#include <stdio.h>

#include "export_internal.h"

static double finite_or_zero(double x) { return isfinite(x) ? x : 0.0; }

int plan_export_json(FILE *f, const gpt_config *cfg, const layout *l, const int *ch, const layout_result *res) {
    int rc = 0;
    const int C = l->pp * l->vp;
    const int m = l->dp > 0 && l->micro_batch > 0 ? l->global_batch / (l->dp * l->micro_batch) : 0;
    rc |= fprintf(f, "{\"layout\": {\"tp\": %d, \"sp\": %d, \"cp\": %d, \"pp\": %d, \"vp\": %d, \"dp\": %d, "
                     "\"zero\": \"%s\", \"micro_batch\": %d, \"global_batch\": %d, \"micro_batches\": %d, "
                     "\"recompute\": \"%s\", \"precision\": \"%s\", \"world\": %lld}",
                  l->tp, l->sp, l->cp, l->pp, l->vp, l->dp, zero_kind_name(l->zero), l->micro_batch, l->global_batch, m,
                  recompute_kind_name(l->recompute), precision_name(l->prec),
                  (long long)l->tp * l->cp * l->pp * l->dp) < 0;
    rc |= fprintf(f, ", \"chunk_layers\": [") < 0;
    for (int c = 0; c < C; c++) rc |= fprintf(f, "%s%d", c ? ", " : "", ch[c]) < 0;
    rc |= fprintf(f, "], \"stage_layers\": [") < 0;
    for (int s = 0; s < l->pp; s++) rc |= fprintf(f, "%s%d", s ? ", " : "", export_stage_layers(l, ch, s)) < 0;
    rc |= fprintf(f, "], \"model\": {\"layers\": %d, \"d_model\": %d, \"heads\": %d, \"kv_heads\": %d, \"d_ff\": %d, "
                     "\"vocab\": %d, \"seq_len\": %d}",
                  cfg->n_layers, cfg->d_model, cfg->n_heads, cfg->n_kv_heads > 0 ? cfg->n_kv_heads : cfg->n_heads,
                  cfg->d_ff > 0 ? cfg->d_ff : 4 * cfg->d_model, cfg->vocab, cfg->seq_len) < 0;
    if (res) {
        const layout_memory *mm = &res->mem;
        rc |= fprintf(f, ", \"predicted\": {\"step_ms\": %.6f, \"tokens_per_s\": %.3f, \"mfu\": %.6f, "
                         "\"model_tflops_per_gpu\": %.4f, \"hw_tflops_per_gpu\": %.4f, \"oom\": %s, ",
                      finite_or_zero(res->step_us) / 1e3, finite_or_zero(res->tokens_per_s),
                      finite_or_zero(res->mfu), finite_or_zero(res->model_tflops_per_gpu),
                      finite_or_zero(res->hw_tflops_per_gpu), res->oom ? "true" : "false") < 0;
        rc |= fprintf(f, "\"memory_bytes\": {\"params\": %lld, \"grads\": %lld, \"optimizer\": %lld, "
                         "\"activations\": %lld, \"buffers\": %lld, \"embedding_head\": %lld, \"total\": %lld}, "
                         "\"mem_cap_bytes\": %lld, \"headroom_bytes\": %lld, \"worst_stage\": %d, \"breakdown_ms\": {",
                      (long long)mm->params, (long long)mm->grads, (long long)mm->optimizer, (long long)mm->activations,
                      (long long)mm->buffers, (long long)mm->embedding_head, (long long)mm->total,
                      (long long)res->mem_cap, (long long)(res->mem_cap - mm->total), res->worst_stage) < 0;
        for (int p = 0; p < LAYOUT_T_COUNT; p++)
            if (p != LAYOUT_T_EP || res->parts_us[p] > 0)
                rc |= fprintf(f, "%s\"%s\": %.6f", p ? ", " : "", layout_time_part_name((layout_time_part)p), finite_or_zero(res->parts_us[p]) / 1e3) < 0;
        rc |= fprintf(f, "}}") < 0;
    }
    rc |= fprintf(f, "}") < 0;
    return rc ? -1 : 0;
}
