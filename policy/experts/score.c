/*
 * score.c: a whole placement's scores on one window (score.h).
 */
#include "score.h"

#include <string.h>

pl_status experts_score_map(moe_balance_ctx *c, const expert_map *m, const expert_load *ld, int w,
                            const moe_balance_cost *cost, experts_score *out, moe_balance_layer *layer,
                            double *gpu_load, char *msg, size_t len) {
    if (!c || !m || !ld || !out) return pl_fail(msg, len, PL_ERR_INVALID, "experts_score_map: missing argument");
    if (m->n_layers != ld->n_layers || m->n_experts != ld->n_experts)
        return pl_fail(msg, len, PL_ERR_INVALID, "the placement has %d layers of %d experts but the load %d of %d",
                       m->n_layers, m->n_experts, ld->n_layers, ld->n_experts);
    if (w < 0 || w >= ld->n_windows)
        return pl_fail(msg, len, PL_ERR_INVALID, "window %d is outside the load's 0..%d", w, ld->n_windows - 1);
    memset(out, 0, sizeof *out);
    for (int l = 0; l < m->n_layers; l++) {
        moe_balance_layer r;
        const int16_t *smp = expert_load_samples_c(ld, w, l);
        pl_status st = moe_balance_score_layer(c, expert_map_layer_c(m, l), expert_load_row_c(ld, w, l), smp,
                                               smp ? ld->n_samples : 0, smp ? ld->sample_k : 0,
                                               gpu_load ? gpu_load + (size_t)l * m->n_gpus : NULL, &r);
        if (st != PL_OK)
            return pl_fail(msg, len, st, "layer %d: the placement leaves a loaded expert without a slot", l);
        if (layer) layer[l] = r;
        out->busiest_over_mean += r.busiest_over_mean / m->n_layers;
        if (r.busiest_over_mean > out->worst_busiest_over_mean) out->worst_busiest_over_mean = r.busiest_over_mean;
        out->copies_per_token += r.copies_per_token / m->n_layers;
        if (r.worst_nic_bytes > out->worst_nic_bytes) out->worst_nic_bytes = r.worst_nic_bytes;
        out->copies_sampled = r.copies_sampled;
        if (cost) {
            double cu = 0, mu = 0, bu = 0, bm = 0;
            if ((st = moe_balance_layer_time(cost, r.busiest_over_mean, gpu_load ? gpu_load + (size_t)l * m->n_gpus : NULL,
                                             m->n_gpus, r.worst_nic_bytes, &cu, &mu)) != PL_OK ||
                (st = moe_balance_layer_time(cost, 1.0, NULL, 0, r.worst_nic_bytes, &bu, &bm)) != PL_OK)
                return pl_fail(msg, len, st, "the MoE layer's time needs a mixture-of-experts model and layout");
            out->compute_us += cu;
            out->comm_us += mu;
            out->balanced_us += bu + bm;
        }
    }
    return PL_OK;
}
