/*
 * step_layout.c: a parallel layout mapped onto the engine (step_layout.h).
 * The text is parsed and checked by core/layout.c (layout_parse,
 * layout_validate, layout_chunk_layers); this file only decides which of
 * its parts the engine runs and how.
 */
#include "step_layout.h"

#include <stdio.h>
#include <string.h>

#include "dist_group.h"

pl_status step_layout_resolve(const char *text, const gpt_config *cfg, int cuda, step_layout *out, char *msg,
                              size_t len) {
    memset(out, 0, sizeof *out);
    layout *l = &out->l;
    unsigned given = 0; /* the keys the text named (the rest are defaults) */
    pl_status st = layout_parse_given(text, l, &given, msg, len);
    if (st != PL_OK) return st;
    if (l->cp > 1) return pl_fail(msg, len, PL_ERR_INVALID, "cp=%d: the engine does not run context parallelism yet; use cp=1", l->cp);
    if (l->vp > 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "vp=%d: the engine does not run interleaved (virtual) pipeline stages yet; use vp=1",
                       l->vp);
    if (l->recompute != RECOMPUTE_NONE)
        return pl_fail(msg, len, PL_ERR_INVALID, "recompute=%s: the engine does not recompute activations yet; use recompute=none",
                       recompute_kind_name(l->recompute));
    if (l->zero != ZERO_NONE && l->zero != ZERO_1)
        return pl_fail(msg, len, PL_ERR_INVALID,
                       "zero=%s: the engine shards only the optimizer state, not gradients or parameters yet; use zero=0 "
                       "or zero=1",
                       zero_kind_name(l->zero));
    out->has_precision = (given & (1u << LAYOUT_KEY_PRECISION)) != 0;
    out->prec = HW_PREC_DEFAULT;
    if (out->has_precision) {
        switch (l->prec) {
        case PRECISION_FP32: out->prec = HW_PREC_FP32; break;
        case PRECISION_TF32: out->prec = HW_PREC_TF32; break;
        case PRECISION_BF16: out->prec = HW_PREC_BF16; break;
        default:
            return pl_fail(msg, len, PL_ERR_INVALID, "precision=%s: the engine does not run it; use precision=fp32, tf32 or bf16",
                           precision_name(l->prec));
        }
    }
    else l->prec = cuda ? PRECISION_TF32 : PRECISION_FP32; /* what the engine runs, so the text says it */
    if (!(given & (1u << LAYOUT_KEY_GBS))) l->global_batch = cfg->batch;
    if (!(given & (1u << LAYOUT_KEY_MBS))) {
        if (l->global_batch % l->dp)
            return pl_fail(msg, len, PL_ERR_INVALID, "dp=%d does not divide the global batch of %d sequences", l->dp,
                           l->global_batch);
        l->micro_batch = l->global_batch / l->dp;
    }
    gpt_config model = *cfg;
    model.batch = l->global_batch;
    if ((st = layout_validate(l, &model, 0, msg, len)) != PL_OK) return st;
    const int64_t world = (int64_t)l->tp * l->dp;
    if (world > DIST_MAX_RANKS)
        return pl_fail(msg, len, PL_ERR_INVALID, "tp x dp = %lld processes; the engine launches at most %d",
                       (long long)world, DIST_MAX_RANKS);
    if (l->pp > HW_MAX_DEVICES)
        return pl_fail(msg, len, PL_ERR_INVALID, "pp=%d stages; the engine has at most %d logical devices a process",
                       l->pp, HW_MAX_DEVICES);
    out->world = (int)world;
    out->tp = l->tp;
    out->sp = l->tp > 1 && l->sp;
    out->dp = l->dp;
    out->zero = l->dp > 1 && l->zero == ZERO_1;
    out->pp = l->pp;
    out->batch = l->global_batch;
    out->micro_batches = layout_micro_batches(l);
    if (out->micro_batches < 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "dp x mbs = %d x %d does not divide the global batch of %d", l->dp,
                       l->micro_batch, l->global_batch);
    if (layout_format(l, out->text, sizeof out->text) >= (int)sizeof out->text)
        return pl_fail(msg, len, PL_ERR_INVALID, "the layout's text form is too long");
    return PL_OK;
}

void step_layout_set_precision(step_layout *sl, hw_precision p) {
    sl->l.prec = p == HW_PREC_BF16 ? PRECISION_BF16 : p == HW_PREC_TF32 ? PRECISION_TF32 : PRECISION_FP32;
    layout_format(&sl->l, sl->text, sizeof sl->text);
}

pl_status step_layout_placement(const step_layout *sl, const graph *g, int *placement, char *msg, size_t len) {
    const int L = g->cfg.n_layers, pp = sl->pp;
    int chunk[HW_MAX_DEVICES], first[HW_MAX_DEVICES + 1];
    pl_status st = layout_chunk_layers(&sl->l, L, chunk, msg, len);
    if (st != PL_OK) return st;
    first[0] = 0;
    for (int s = 0; s < pp; s++) first[s + 1] = first[s] + chunk[s];
    if (first[pp] != L)
        return pl_fail(msg, len, PL_ERR_INVALID, "the stages hold %d layers, the model has %d", first[pp], L);
    for (int i = 0; i < g->n_nodes; i++) {
        const int layer = g->nodes[i].layer;
        int s = 0;
        if (layer < 0) s = 0;              /* the embedding */
        else if (layer >= L) s = pp - 1;   /* final norm, head, loss */
        else
            while (s + 1 < pp && layer >= first[s + 1]) s++;
        placement[i] = s;
    }
    return PL_OK;
}
