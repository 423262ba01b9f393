/*
 * layout_eval.c: one layout as a user states it, loaded, checked and
 * simulated (layout_eval.h).
 */
#include "layout_eval.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cluster_file.h"

/* Resize a cluster to n GPUs (whole nodes, taken group by group). */
static pl_status cluster_take(cluster *c, int64_t n, char *msg, size_t len) {
    const int64_t total = cluster_n_gpus(c);
    if (n > total)
        return pl_fail(msg, len, PL_ERR_INVALID, "--gpus %lld is more than cluster %s has (%lld)", (long long)n, c->name,
                       (long long)total);
    if (n % c->gpus_per_node != 0 && n > c->gpus_per_node)
        return pl_fail(msg, len, PL_ERR_INVALID, "--gpus %lld is not a whole number of %d-GPU nodes", (long long)n,
                       c->gpus_per_node);
    int64_t nodes = (n + c->gpus_per_node - 1) / c->gpus_per_node;
    /* whole NVLink domains (8 GPUs of an NVL72 rack are 2 trays of a 72-GPU
     * domain: the rack stays, the layout uses 8 of it) */
    const int64_t dom_nodes = cluster_domain_gpus(c) / c->gpus_per_node;
    if (dom_nodes > 1) nodes = (nodes + dom_nodes - 1) / dom_nodes * dom_nodes;
    int g = 0;
    for (; g < c->n_groups && nodes > 0; g++) {
        if (c->groups[g].n_nodes > nodes) c->groups[g].n_nodes = (int)nodes;
        nodes -= c->groups[g].n_nodes;
    }
    c->n_groups = g > 0 ? g : 1;
    return PL_OK;
}

/* Where a send between GPUs a and b goes: NVLink / the node's fabric, NVLink
 * between the nodes of one NVLink domain (an NVL72 rack's trays), the NIC
 * inside a pod, or across pods. */
const char *layout_eval_link(const cluster *c, int64_t a, int64_t b) {
    if (a == b) return "none";
    if (a / c->gpus_per_node == b / c->gpus_per_node) return "intra-node";
    if (cluster_domain_of(c, a) == cluster_domain_of(c, b)) return "nvlink-domain";
    if (c->pod_gpus > 0 && a / c->pod_gpus != b / c->pod_gpus) return "inter-pod";
    return "inter-node";
}

/* Model, cluster (taken to o->gpus) and layout (dp from o->gpus). */
static pl_status load_inputs(const layout_eval_options *o, layout_eval_result *out, char *msg, size_t len) {
    char m2[512] = "";
    pl_status st = plan_model_load(o->model, o->seq, &out->model, m2, sizeof m2);
    if (st != PL_OK)
        return pl_fail(msg, len, PL_ERR_INVALID, "model '%s': %s", o->model, m2[0] ? m2 : pl_status_str(st));
    st = cluster_load(o->cluster, NULL, &out->clu, m2, sizeof m2);
    if (st != PL_OK)
        return pl_fail(msg, len, PL_ERR_INVALID, "cluster '%s': %s", o->cluster, m2[0] ? m2 : pl_status_str(st));
    if (o->domain_gpus > 0 && (st = cluster_use_domain_gpus(&out->clu, o->domain_gpus, o->gpus, msg, len)) != PL_OK)
        return st;
    if (o->gpus > 0 && (st = cluster_take(&out->clu, o->gpus, msg, len)) != PL_OK) return st;
    layout *l = &out->lay;
    if (layout_parse(o->layout, l, m2, sizeof m2) != PL_OK) return pl_fail(msg, len, PL_ERR_INVALID, "layout: %s", m2);
    if (o->gpus <= 0) return PL_OK;
    const int64_t model_par = (int64_t)l->tp * l->cp * l->pp;
    if (!strstr(o->layout, "dp=")) {
        if (o->gpus % model_par != 0)
            return pl_fail(msg, len, PL_ERR_INVALID, "--gpus %lld is not a multiple of tp*cp*pp = %lld",
                           (long long)o->gpus, (long long)model_par);
        l->dp = (int)(o->gpus / model_par);
    } else if (layout_world_size(l) != o->gpus) {
        return pl_fail(msg, len, PL_ERR_INVALID, "the layout uses %lld GPUs, --gpus says %lld",
                       (long long)layout_world_size(l), (long long)o->gpus);
    }
    return PL_OK;
}

/* The last traced run of s into o->trace_path. */
static pl_status write_trace(const layout_sim *s, const char *path, char *msg, size_t len) {
    FILE *tf = fopen(path, "w");
    if (!tf) return pl_fail(msg, len, PL_ERR_INVALID, "cannot write trace '%s': %s", path, strerror(errno));
    pl_status st = layout_sim_write_chrome_trace(s, tf);
    if (fclose(tf) != 0 && st == PL_OK) st = PL_ERR_IO;
    if (st != PL_OK) return pl_fail(msg, len, st, "writing the trace failed");
    return PL_OK;
}

pl_status layout_eval_run(const layout_eval_options *o, layout_eval_result *out, char *msg, size_t len) {
    memset(out, 0, sizeof *out);
    pl_status st = load_inputs(o, out, msg, len);
    if (st != PL_OK) return st;
    if (o->gpipe) {
        if (out->lay.vp != 1 || out->lay.sched != SCHED_1F1B)
            return pl_fail(msg, len, PL_ERR_INVALID, "GPipe's order takes vp = 1 and no sched= in the layout");
        out->lay.sched = SCHED_GPIPE;
    }
    layout_sim *sim = NULL;
    char m2[512] = "";
    st = layout_sim_create_measured(&out->model.cfg, &out->lay, &out->clu, o->measured, &sim, m2, sizeof m2);
    if (st != PL_OK) return st == PL_ERR_INVALID ? pl_fail(msg, len, st, "layout: %s", m2) : pl_fail(msg, len, st, "%s", m2);
    st = layout_sim_run(sim, o->params, o->trace_path != NULL || o->want_ops, &out->res, msg, len);
    if (st == PL_OK && o->trace_path) st = write_trace(sim, o->trace_path, msg, len);
    if (st == PL_OK && o->want_ops && (st = layout_sim_ops(sim, &out->ops, &out->n_ops)) != PL_OK)
        pl_fail(msg, len, st, "out of memory listing the ops");
    if (st == PL_OK) {
        layout_sim_coll_sources(sim, &out->n_coll_model, &out->n_coll_fitted, &out->n_coll_measured);
        layout_coords c0, c1;
        memset(&c0, 0, sizeof c0);
        memset(&c1, 0, sizeof c1);
        c1.c[LAYOUT_DIM_PP] = out->lay.pp > 1 ? 1 : 0;
        out->pp_rank0 = layout_rank_of(&out->lay, &c0);
        out->pp_rank1 = layout_rank_of(&out->lay, &c1);
        out->pp_link = layout_eval_link(&out->clu, out->pp_rank0, out->pp_rank1);
    }
    layout_sim_destroy(sim);
    return st;
}
