/*
 * moe_params.c: the defaults of an MoE prediction's figures and the load
 * factor they give (moe_params.h).
 *
 * Where the defaults come from:
 *   expert_cv 0.1   the spread of routed rows over experts for plans: a
 *                   STATED figure, not measured on a trained model here.
 *                   Trained routers with load balancing (DeepSeek-V3's
 *                   auxiliary-loss-free bias, Megatron's aux loss) keep
 *                   experts near even; the router histograms of our own
 *                   short torchtitan runs from random initialisation
 *                   (data/frameworks/runs/h100-moe-imbalance.csv: cv
 *                   0.05-0.08 in the first MoE layer, 0.2-1.3 deeper after 6
 *                   steps) are not a trained router. A run with forced
 *                   balance takes 0; a measured histogram replaces it
 *                   (moe_params.hist); the expert-placement planner a
 *                   placement's loads (moe_layer_time_us)
 *   imbalance 0     the busiest expert rank's rows over the mean from
 *                   expert_cv (moe_rank_load_factor: the normal bound on the
 *                   largest of ep ranks' sums of E / ep experts)
 */
#include "moe_params.h"

#include <math.h>
#include <string.h>

#include "model_params.h"

void moe_params_default(moe_params *p) {
    memset(p, 0, sizeof *p);
    p->imbalance = 0.0;
    p->capacity_factor = 0.0;
    p->expert_cv = 0.1;
    p->fit = NULL;
    p->gemm_impl = p->fp32_act = p->weight_cast = p->fused_permute = p->fp32_gemm = -1;
    p->hist = NULL;
}

double moe_load_factor(const moe_params *p, const gpt_config *cfg, const layout *l) {
    if (!p) return 1.0;
    if (p->capacity_factor > 0) return p->capacity_factor;
    if (p->imbalance >= 1.0) return p->imbalance;
    if (!cfg || !l || l->ep < 1 || !gpt_is_moe(cfg)) return 1.0;
    return moe_rank_load_factor(p->expert_cv, cfg->n_experts / l->ep, l->ep);
}

double moe_rank_load_factor(double cv, int experts_per_rank, int ranks) {
    if (!(cv > 0) || ranks <= 1 || experts_per_rank < 1) return 1.0;
    return 1.0 + cv / sqrt((double)experts_per_rank) * sqrt(2.0 * log((double)ranks));
}

