/*
 * plan_simulate.c: one layout simulated the way the planner's search does
 * (plan_simulate: stages that straddle node groups on their slowest GPU,
 * plan.h), and the best layout's step under every pipeline order
 * (plan_schedule_rows).
 */
#include <stdlib.h>
#include <string.h>

#include "plan_search_internal.h"

/* The cluster as plan.h says stages see it: the simulator runs a stage on
 * its replica-0 rank's GPU, which on a mixed cluster may be the fast half
 * of a stage whose data-parallel peers sit on slower GPUs. Node groups
 * that share a stage are merged into one class; every group of a class
 * takes the class's slowest GPU type, with the smallest memory of the
 * class (a new type slot when one is free). *out is c when nothing
 * straddles. */
static void stage_weakest_cluster(const cluster *c, const layout *l, cluster *out) {
    *out = *c;
    if (c->n_groups < 2) return;
    int cls[CLUSTER_MAX_GROUPS];
    for (int g = 0; g < c->n_groups; g++) cls[g] = g;
    const int64_t R = (int64_t)l->tp * l->cp * l->dp;
    for (int s = 0; s < l->pp; s++) {
        const int64_t lo = (int64_t)s * R, hi = lo + R;
        int first = -1;
        for (int g = 0; g < c->n_groups; g++) {
            int64_t glo, ghi;
            plan_group_range(c, g, &glo, &ghi);
            if (ghi <= lo || glo >= hi) continue;
            if (first < 0) {
                first = g;
                continue;
            }
            /* merge g's class into first's */
            const int from = cls[g], to = cls[first];
            for (int k = 0; k < c->n_groups; k++)
                if (cls[k] == from) cls[k] = to;
        }
    }
    for (int k = 0; k < c->n_groups; k++) {
        if (cls[k] != k) continue; /* k is a class's representative */
        int members = 0, slow = -1;
        int64_t mem = INT64_MAX;
        for (int g = 0; g < c->n_groups; g++) {
            if (cls[g] != k) continue;
            members++;
            const int t = c->groups[g].gpu_type;
            if (slow < 0 || c->gpus[t].peak_flops[l->prec] < c->gpus[slow].peak_flops[l->prec]) slow = t;
            if (c->gpus[t].hbm_bytes < mem) mem = c->gpus[t].hbm_bytes;
        }
        if (members < 2) continue;
        int t = slow;
        if (c->gpus[slow].hbm_bytes > mem && out->n_gpu_types < CLUSTER_MAX_GPU_TYPES) {
            t = out->n_gpu_types++;
            out->gpus[t] = c->gpus[slow];
            out->gpus[t].hbm_bytes = mem;
        }
        for (int g = 0; g < c->n_groups; g++)
            if (cls[g] == k) out->groups[g].gpu_type = t;
    }
}

pl_status plan_simulate(const gpt_config *cfg, const cluster *c0, const layout *l, const layout_sim_params *prm,
                        layout_result *res, char *msg, size_t len) {
    cluster *c = malloc(sizeof *c);
    if (!c) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    stage_weakest_cluster(c0, l, c);
    layout_sim *s = NULL;
    pl_status st = layout_sim_create(cfg, l, c, &s, msg, len);
    if (st != PL_OK) {
        free(c);
        return st;
    }
    if (st != PL_OK) return st;
    st = layout_sim_run(s, prm, 0, res, msg, len);
    layout_sim_destroy(s);
    free(c);
    return st;
}

/* ---- the best layout under each pipeline order --------------------------- */

pl_status plan_schedule_rows(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm, const layout *best,
                             plan_sched_row rows[PLAN_SCHED_ROWS], char *msg, size_t len) {
    static const schedule_order ord[PLAN_SCHED_ROWS] = {SCHED_1F1B, SCHED_INTERLEAVED, SCHED_ZB_H1,
                                                        SCHED_ZB_H2, SCHED_ZB_V, SCHED_DUALPIPEV,
                                                        SCHED_DUALPIPE};
    const int64_t N = layout_world_size(best);
    for (int i = 0; i < PLAN_SCHED_ROWS; i++) {
        plan_sched_row *w = &rows[i];
        memset(w, 0, sizeof *w);
        w->sched = ord[i];
        w->l = *best;
        w->l.sched = ord[i] == SCHED_INTERLEAVED ? SCHED_1F1B : ord[i];
        w->l.vp = ord[i] == SCHED_INTERLEAVED ? 2 : schedule_v_chunks(ord[i]);
        if (w->l.vp != best->vp || w->l.sched != best->sched) w->l.n_stage_layers = 0; /* uniform chunks */
        if (layout_validate(&w->l, cfg, N, w->why, sizeof w->why) != PL_OK) continue;
        layout_result r;
        pl_status st = plan_simulate(cfg, c, &w->l, prm, &r, w->why, sizeof w->why);
        if (st == PL_ERR_NOMEM) return pl_fail(msg, len, st, "%s", w->why);
        if (st != PL_OK) continue;
        w->ok = 1;
        w->step_us = r.step_us;
        w->bubble_us = r.parts_us[LAYOUT_T_BUBBLE];
        w->peak_bytes = r.mem.total;
        w->fits = !r.oom;
    }
    return PL_OK;
}
