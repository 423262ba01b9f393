/*
 * plan_enumerate.c: the layouts the planner considers (plan.h's list of
 * dimensions), enumerated in a fixed order, and a search candidate's
 * layout.
 */
#include <stdlib.h>
#include <string.h>

#include "model_params.h"
#include "plan_search_internal.h"

/* The enumeration of plan.h's file comment, in a fixed order: tp, cp, pp,
 * vp, mbs, recompute, zero. */
pl_status plan_enumerate(const gpt_config *cfg, const cluster *c, const plan_options *o, plan_layout_fn fn,
                         void *ctx, char *msg, size_t len) {
    const int64_t N = o->gpus;
    const int L = cfg->n_layers, B = o->global_batch;
    int max_tp = o->max_tp > 0 ? o->max_tp : (int)cluster_domain_gpus(c); /* tp stays on NVLink */
    int max_cp = o->max_cp;
    if (max_cp <= 0)
        for (max_cp = 1; cfg->seq_len / (2 * max_cp) >= 4096; max_cp *= 2) {
        }
    if (o->fix_tp > max_tp) max_tp = o->fix_tp;
    if (o->fix_cp > max_cp) max_cp = o->fix_cp;
    const int max_vp = o->fix_vp > o->max_vp ? o->fix_vp : o->max_vp;
    const int max_mbs = o->fix_mbs > o->max_mbs ? o->fix_mbs : o->max_mbs;
    layout *l = malloc(sizeof *l);
    if (!l) return PL_ERR_NOMEM;
    pl_status st = PL_OK;
    int64_t index = 0;
    const int moe = gpt_is_moe(cfg); /* ep over the experts' divisors, etp 1 or tp (torchtitan's choices) */
    for (int tp = 1; tp <= max_tp && tp <= N; tp++) {
        if (N % tp || (o->fix_tp && tp != o->fix_tp)) continue;
        for (int cp = 1; cp <= max_cp && tp * cp <= N; cp++) {
            if ((N / tp) % cp || (o->fix_cp && cp != o->fix_cp)) continue;
            const int64_t rest = N / tp / cp;
            for (int pp = 1; pp <= L && pp <= rest; pp++) {
                if (rest % pp || (o->fix_pp && pp != o->fix_pp)) continue;
                const int64_t dp64 = rest / pp;
                if (dp64 > B || B % dp64) continue; /* dp * mbs must divide B: no mbs can help */
                const int dp = (int)dp64;
                if (o->fix_dp && dp != o->fix_dp) continue;
                for (int vp = 1; vp <= max_vp; vp++) {
                    if (vp > 1 && (pp < 2 || pp * vp > L)) break;
                    if (o->fix_vp && vp != o->fix_vp) continue;
                    for (int mbs = 1; mbs <= max_mbs && mbs <= B / dp; mbs++) {
                        if ((B / dp) % mbs || (o->fix_mbs && mbs != o->fix_mbs)) continue;
                        for (int rc = 0; rc <= RECOMPUTE_FULL; rc++)
                            for (int z = 0; z <= (dp > 1 ? ZERO_FSDP : 0); z++)
                            for (int ep = 1; ep <= (moe ? cfg->n_experts : 1); ep++)
                            for (int ei = 0; ei < (moe && tp > 1 ? 2 : 1); ei++) {
                                const int etp = ei ? tp : 1; /* expert tp: none, or the attention's */
                                if (moe && (cfg->n_experts % ep || ((int64_t)tp * cp * dp) % ((int64_t)ep * etp)))
                                    continue;
                                if ((o->fix_recompute >= 0 && rc != o->fix_recompute) ||
                                    (o->fix_zero >= 0 && z != (dp > 1 ? o->fix_zero : 0)))
                                    continue;
                                layout_default(l);
                                l->tp = tp;
                                l->sp = tp > 1;
                                l->cp = cp;
                                l->pp = pp;
                                l->vp = vp;
                                l->dp = dp;
                                l->micro_batch = mbs;
                                l->global_batch = B;
                                l->recompute = (recompute_kind)rc;
                                l->zero = (zero_kind)z;
                                l->prec = o->prec;
                                l->fp8 = o->fp8;
                                l->ep = ep;
                                l->etp = etp;
                                plan_stack_apply(o, l);
                                /* 1F1B (interleaved with vp > 1), then the orders of
                                 * sched_mask that take this vp (schedule.h) */
                                for (int so = SCHED_1F1B; so < SCHED_ORDER_COUNT; so++) {
                                    if (so == SCHED_GPIPE || so == SCHED_INTERLEAVED) continue;
                                    if (so != SCHED_1F1B && (!(o->sched_mask >> so & 1u) ||
                                                             schedule_v_chunks((schedule_order)so) != vp))
                                        continue;
                                    l->sched = (schedule_order)so;
                                    if (layout_validate(l, cfg, N, NULL, 0) != PL_OK) continue;
                                    if (!plan_framework_runs(o->framework, cfg, l)) continue;
                                    if (fn(ctx, l, index++) != 0) {
                                        st = pl_fail(msg, len, PL_ERR_NOMEM, "no memory for the layouts");
                                        goto out;
                                    }
                                }
                            }
                    }
                }
            }
        }
    }
out:
    free(l);
    return st;
}

void plan_stack_apply(const plan_options *o, layout *l) {
    if (o->fix_dispatcher >= 0) l->dispatcher = (moe_dispatcher)o->fix_dispatcher;
    l->mem = o->fix_mem;
}

void plan_cand_layout(const plan_cand *k, const plan_options *o, precision prec, fp8_recipe fp8, layout *l) {
    const int B = o->global_batch;
    layout_default(l);
    l->tp = k->tp;
    l->sp = k->tp > 1;
    l->cp = k->cp;
    l->pp = k->pp;
    l->vp = k->vp;
    l->dp = k->dp;
    l->micro_batch = k->mbs;
    l->global_batch = B;
    l->recompute = (recompute_kind)k->recompute;
    l->zero = (zero_kind)k->zero;
    l->prec = prec;
    l->fp8 = fp8;
    l->sched = (schedule_order)k->sched;
    l->ep = k->ep;
    l->etp = k->etp;
    plan_stack_apply(o, l);
}
