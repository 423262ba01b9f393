/*
 * export_json.c: a layout and its prediction as one JSON object (each
 * layout of `placer plan --json`, and the "json" export's plan.json):
 *   {"layout": {tp, sp, cp, pp, vp, dp, zero, micro_batch, global_batch,
 *               micro_batches, recompute, precision, world},
 *    "chunk_layers": [...pp * vp, pipeline order],
 *    "stage_layers": [...pp, layers per stage over its chunks],
 *    "model": {layers, d_model, heads, kv_heads, d_ff, vocab, seq_len},
 *    "predicted": {step_ms, tokens_per_s, mfu, model_tflops_per_gpu,
 *                  hw_tflops_per_gpu, oom, memory_bytes {...}, mem_cap_bytes,
 *                  headroom_bytes, worst_stage, breakdown_ms {...}}}
 * "predicted" only when a result is given. The json export adds what the
 * frameworks' checks compare (tests/plan/test_framework_parsers.py): the
 * layout's ep, etp, dispatcher, fp8 (the recipe, precision fp8 only),
 * sched and text (its text form, layout_format); the model's head_dim,
 * experts, top_k, moe_d_ff, shared_d_ff, first_dense, moe_every,
 * router_sigmoid, router_groups, router_topk_groups, the MLA ranks and
 * head sizes, tied, norm, mlp, pos and the architecture fields (family,
 * rope_theta, norm_eps, qk_norm); and "framework" {name, version}, the
 * stack the plan was searched for. Names of the zero, recompute and
 * breakdown values are the ones core/layout.h and sim/layout/layout_sim.h
 * print.
 */
#include <math.h>
#include <stdio.h>

#include "export_internal.h"
#include "model_params.h"
#include "schedule.h"

static double finite_or_zero(double x) { return isfinite(x) ? x : 0.0; }

static int write_extra_layout(FILE *f, const layout *l) {
    static const char *const DISPATCH[] = {"alltoall", "allgather", "flex"};
    char text[LAYOUT_MAX_CHUNKS * 6 + 512];
    layout_format(l, text, sizeof text);
    int rc = fprintf(f, ", \"ep\": %d, \"etp\": %d, \"dispatcher\": \"%s\", \"sched\": \"%s\"", l->ep > 1 ? l->ep : 1,
                     l->etp > 1 ? l->etp : 1, (unsigned)l->dispatcher < 3 ? DISPATCH[l->dispatcher] : "unknown",
                     l->pp > 1 && l->vp > 1 && l->sched == SCHED_1F1B ? "interleaved" : schedule_order_name(l->sched)) < 0;
    if (l->prec == PRECISION_FP8) rc |= fprintf(f, ", \"fp8\": \"%s\"", fp8_recipe_name(l->fp8)) < 0;
    rc |= fprintf(f, ", \"text\": \"%s\"", text) < 0;
    return rc ? -1 : 0;
}

static int write_extra_model(FILE *f, const gpt_config *c, const model_arch *a) {
    int rc = fprintf(f, ", \"head_dim\": %d, \"tied\": %d, \"norm\": \"%s\", \"mlp\": \"%s\", \"pos\": \"%s\", "
                        "\"no_bias\": %d, \"qkv_bias\": %d",
                     gpt_head_dim(c), c->tied, c->norm == NORM_RMSNORM ? "rmsnorm" : "layernorm",
                     c->mlp == MLP_SWIGLU ? "swiglu" : c->mlp == MLP_RELU2 ? "relu2" : "gelu",
                     c->pos == POS_ROTARY ? "rotary" : "learned", c->no_bias, c->qkv_bias) < 0;
    rc |= fprintf(f, ", \"experts\": %d, \"top_k\": %d, \"moe_d_ff\": %d, \"shared_d_ff\": %d, \"first_dense\": %d, "
                     "\"moe_every\": %d, \"router_sigmoid\": %d, \"router_groups\": %d, \"router_topk_groups\": %d",
                  gpt_is_moe(c) ? c->n_experts : 0, gpt_is_moe(c) ? c->top_k : 0, c->moe_d_ff, c->shared_d_ff,
                  c->first_dense, c->moe_every, c->router_sigmoid, c->router_groups, c->router_topk_groups) < 0;
    rc |= fprintf(f, ", \"q_lora_rank\": %d, \"kv_lora_rank\": %d, \"qk_nope_dim\": %d, \"qk_rope_dim\": %d, "
                     "\"v_head_dim\": %d",
                  c->q_lora_rank, c->kv_lora_rank, c->qk_nope_dim, c->qk_rope_dim, c->v_head_dim) < 0;
    if (a) {
        char th[40], ep[40], rs[40];
        export_real(a->rope_theta, th, sizeof th);
        export_real(a->norm_eps, ep, sizeof ep);
        export_real(a->router_scale, rs, sizeof rs);
        rc |= fprintf(f, ", \"family\": \"%s\", \"rope_theta\": %s, \"norm_eps\": %s, \"qk_norm\": %d, "
                         "\"router_scale\": %s",
                      a->family, th, ep, a->qk_norm, rs) < 0;
    }
    return rc ? -1 : 0;
}

int export_json_object(FILE *f, const plan_export_in *in, int full) {
    const gpt_config *cfg = in->cfg;
    const layout *l = in->l;
    const int *ch = in->chunk_layers;
    const layout_result *res = in->res;
    int rc = 0;
    const int C = l->pp * l->vp;
    const int m = l->dp > 0 && l->micro_batch > 0 ? l->global_batch / (l->dp * l->micro_batch) : 0;
    rc |= fprintf(f, "{\"layout\": {\"tp\": %d, \"sp\": %d, \"cp\": %d, \"pp\": %d, \"vp\": %d, \"dp\": %d, "
                     "\"zero\": \"%s\", \"micro_batch\": %d, \"global_batch\": %d, \"micro_batches\": %d, "
                     "\"recompute\": \"%s\", \"precision\": \"%s\", \"world\": %lld",
                  l->tp, l->sp, l->cp, l->pp, l->vp, l->dp, zero_kind_name(l->zero), l->micro_batch, l->global_batch, m,
                  recompute_kind_name(l->recompute), precision_name(l->prec),
                  (long long)l->tp * l->cp * l->pp * l->dp) < 0;
    if (full) rc |= write_extra_layout(f, l) < 0;
    rc |= fprintf(f, "}, \"chunk_layers\": [") < 0;
    for (int c = 0; c < C; c++) rc |= fprintf(f, "%s%d", c ? ", " : "", ch[c]) < 0;
    rc |= fprintf(f, "], \"stage_layers\": [") < 0;
    for (int s = 0; s < l->pp; s++) rc |= fprintf(f, "%s%d", s ? ", " : "", export_stage_layers(l, ch, s)) < 0;
    rc |= fprintf(f, "], \"model\": {\"layers\": %d, \"d_model\": %d, \"heads\": %d, \"kv_heads\": %d, \"d_ff\": %d, "
                     "\"vocab\": %d, \"seq_len\": %d",
                  cfg->n_layers, cfg->d_model, cfg->n_heads, cfg->n_kv_heads > 0 ? cfg->n_kv_heads : cfg->n_heads,
                  cfg->d_ff > 0 ? cfg->d_ff : 4 * cfg->d_model, cfg->vocab, cfg->seq_len) < 0;
    if (full) rc |= write_extra_model(f, cfg, in->arch) < 0;
    rc |= fprintf(f, "}") < 0;
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
            if (!layout_time_part_optional((layout_time_part)p) || res->parts_us[p] > 0)
                rc |= fprintf(f, "%s\"%s\": %.6f", p ? ", " : "", layout_time_part_name((layout_time_part)p), finite_or_zero(res->parts_us[p]) / 1e3) < 0;
        rc |= fprintf(f, "}}") < 0;
    }
    if (full)
        rc |= fprintf(f, ", \"framework\": {\"name\": \"%s\", \"version\": \"%s\"}", plan_framework_name(in->planned_for),
                      plan_framework_version(in->planned_for)) < 0;
    rc |= fprintf(f, "}") < 0;
    return rc ? -1 : 0;
}

int plan_export_json(FILE *f, const gpt_config *cfg, const layout *l, const int *ch, const layout_result *res) {
    plan_export_in in = {cfg, NULL, NULL, l, ch, res, PLAN_FRAMEWORK_ANY};
    return export_json_object(f, &in, 0);
}

pl_status export_json_build(const plan_export_in *in, plan_export_files *out, char *msg, size_t len) {
    export_stream s;
    if (export_stream_open(&s) < 0) return pl_fail(msg, len, PL_ERR_NOMEM, "no memory for the export");
    int rc = export_json_object(s.f, in, 1);
    if (rc >= 0 && fputc('\n', s.f) == EOF) rc = -1;
    if (export_stream_keep(out, "plan.json", &s, rc) < 0)
        return pl_fail(msg, len, PL_ERR_NOMEM, "writing the json export failed");
    return PL_OK;
}
