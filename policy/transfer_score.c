/*
 * transfer_score.c: placements from another machine's database scored on
 * this one (transfer_score.h).
 */
#include "transfer_score.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"

void transfer_scores_free(transfer_scores *s) {
    if (!s) return;
    policy_cands_destroy(s->rows);
    free(s->origin);
    memset(s, 0, sizeof *s);
}

pl_status transfer_scores_record(const char *db_path, const transfer_scores *s, const char *args, int64_t *run_id,
                                 char *msg, size_t len) {
    profile_db *db = NULL;
    pl_status st = profile_db_open(db_path, PROFILE_DB_WRITE, &db, msg, len);
    if (st != PL_OK) return st;
    const int N = s->rows->n_nodes;
    char *text = malloc((size_t)N * 4 + 16);
    if (!text) {
        profile_db_close(db);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    }
    if ((st = profile_db_begin(db)) == PL_OK) {
        st = profile_db_run_create(db, "transfer", args, run_id);
        for (int i = 0; i < s->rows->n && st == PL_OK; i++) {
            const policy_cand *c = &s->rows->items[i];
            placement_format(c->node_dev, N, text, (size_t)N * 4 + 16);
            st = profile_db_run_add_sample(db, *run_id, 0, i, text, c->ev.step_us, c->ev.peak_bytes, c->ev.oom);
        }
        if (st == PL_OK) st = profile_db_run_finish(db, *run_id);
        if (st == PL_OK) st = profile_db_commit(db);
        else profile_db_rollback(db);
    }
    if (st != PL_OK) pl_fail(msg, len, st, "cannot record the run in %s: %s", db_path, profile_db_last_error(db));
    free(text);
    profile_db_close(db);
    return st;
}

/* The config text of cfg, as placer train stores it. */
static void config_text(const gpt_config *cfg, char *buf, size_t len) {
    snprintf(buf, len, "default,vocab=%d,d_model=%d,heads=%d,layers=%d,seq=%d,batch=%d%s", cfg->vocab, cfg->d_model,
             cfg->n_heads, cfg->n_layers, cfg->seq_len, cfg->batch, cfg->parallel_residual ? ",parallel=1" : "");
}

/* S's session: the source database's profile of the graph, over nodes. */
static pl_status open_source(const transfer_score_options *o, const char *config, int m, schedule_order order,
                             const char *cap, int devices, int calibrated, policy_session **out, char *msg,
                             size_t len) {
    policy_session_options so;
    policy_session_options_default(&so);
    so.db_path = o->src_path;
    so.config = config;
    so.groups = GROUPING_NONE;
    so.micro_batches = m;
    so.order = order;
    so.mem_cap = cap && *cap ? cap : NULL;
    so.devices = devices;
    so.calibrated = calibrated;
    so.threads = o->threads > 0 ? o->threads : 1;
    char m2[512] = "";
    pl_status st = policy_session_open(&so, out, m2, sizeof m2);
    if (st != PL_OK) return pl_fail(msg, len, st, "--from %s: %s", o->src_path, m2);
    return PL_OK;
}

/* Append one transferred placement: map it, simulate it on dst. */
static pl_status add_row(transfer_scores *s, const transfer_score_options *o, const policy_session *src,
                         policy_session *dst, const char *label, const int *src_dev, int source, int64_t run,
                         double src_step, int src_oom, int *scratch, char *msg, size_t len) {
    transfer_origin org;
    memset(&org, 0, sizeof org);
    pl_status st = transfer_map_placement(o->map, &src->pb, &dst->pb, src_dev, scratch, org.map, msg, len);
    if (st != PL_OK) return st;
    policy_eval e;
    if ((st = policy_evaluate_nodes(dst->ev, scratch, 1, &e)) != PL_OK)
        return pl_fail(msg, len, st, "cannot simulate %s here", label);
    if ((st = policy_cands_add(s->rows, dst->gr, label, scratch, NULL, &e, 0)) != PL_OK)
        return pl_fail(msg, len, st, "out of memory");
    transfer_origin *no = realloc(s->origin, sizeof *no * (size_t)s->rows->n);
    if (!no) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    s->origin = no;
    org.source = source;
    org.run = run;
    org.n_src = src->p->n_devices;
    org.src_step_us = src_step;
    org.src_oom = src_oom;
    s->origin[s->rows->n - 1] = org;
    return PL_OK;
}

static pl_status score_run(const transfer_score_options *o, policy_session *dst, int i, transfer_scores *s,
                           int *scratch, char *msg, size_t len) {
    const int64_t run = o->runs[i];
    transfer_run_args ra;
    pl_status st = transfer_source_run(o->src_path, run, &ra, msg, len);
    if (st != PL_OK) return st;
    gpt_config cfg;
    char m2[512] = "", have[128], want[128];
    if (gpt_config_parse(ra.config, &cfg, m2, sizeof m2) != PL_OK)
        return pl_fail(msg, len, PL_ERR_INVALID, "run %lld of %s has an unreadable --config: %s", (long long)run,
                       o->src_path, m2);
    gpt_config_key(&cfg, have, sizeof have);
    gpt_config_key(&dst->cfg, want, sizeof want);
    if (strcmp(have, want) != 0)
        return pl_fail(msg, len, PL_ERR_INVALID, "run %lld of %s is for graph %s, not this search's %s: a placement "
                       "transfers only between profiles of the same graph", (long long)run, o->src_path, have, want);
    const schedule *sch = &dst->pb.sched;
    if (ra.micro_batches != sch->micro_batches || ra.order != sch->order)
        return pl_fail(msg, len, PL_ERR_INVALID, "run %lld of %s was trained at m=%d %s, this search is at m=%d %s",
                       (long long)run, o->src_path, ra.micro_batches, schedule_order_name(ra.order),
                       sch->micro_batches, schedule_order_name(sch->order));
    policy_session *src = NULL;
    st = open_source(o, ra.config, ra.micro_batches, ra.order, ra.mem_cap, ra.devices, ra.calibrated, &src, msg, len);
    if (st != PL_OK) return st;
    if (!s->machine[0]) {
        snprintf(s->machine, sizeof s->machine, "%s", src->p->machine);
        s->n_src_devices = src->p->n_devices;
    }
    transfer_shortlist sl;
    st = transfer_run_shortlist(src->db, run, &src->pb, o->top_k, &sl, m2, sizeof m2);
    if (st != PL_OK) {
        policy_session_close(src);
        return pl_fail(msg, len, st, "%s (%s)", m2, o->src_path);
    }
    for (int k = 0; k < sl.n && st == PL_OK; k++) {
        char label[POLICY_LABEL_LEN];
        snprintf(label, sizeof label, "run %lld top %d", (long long)run, k + 1);
        st = add_row(s, o, src, dst, label, sl.node_dev + (size_t)k * sl.n_nodes, i, run, sl.step_us[k], sl.oom[k],
                     scratch, msg, len);
    }
    transfer_shortlist_free(&sl);
    policy_session_close(src);
    return st;
}

static pl_status score_placements(const transfer_score_options *o, policy_session *dst, transfer_scores *s,
                                  int *scratch, char *msg, size_t len) {
    char config[256];
    config_text(&dst->cfg, config, sizeof config);
    policy_session *src = NULL;
    pl_status st = open_source(o, config, dst->pb.sched.micro_batches, dst->pb.sched.order, NULL, 0, 1, &src, msg,
                               len);
    if (st != PL_OK) return st;
    if (!s->machine[0]) {
        snprintf(s->machine, sizeof s->machine, "%s", src->p->machine);
        s->n_src_devices = src->p->n_devices;
    }
    const int N = src->g->n_nodes;
    int *dev = malloc(sizeof *dev * (size_t)N);
    if (!dev) st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    for (int j = 0; j < o->n_placements && st == PL_OK; j++) {
        char m2[256] = "";
        if (placement_parse(o->placements[j], N, src->p->n_devices, dev, m2, sizeof m2) != PL_OK) {
            st = pl_fail(msg, len, PL_ERR_INVALID, "--placement %d on %s: %s", j + 1, src->p->machine, m2);
            break;
        }
        policy_eval e;
        if ((st = policy_evaluate_nodes(src->ev, dev, 1, &e)) != PL_OK) {
            pl_fail(msg, len, st, "cannot simulate --placement %d on the source", j + 1);
            break;
        }
        char label[POLICY_LABEL_LEN];
        snprintf(label, sizeof label, "placement %d", j + 1);
        st = add_row(s, o, src, dst, label, dev, o->n_runs + j, 0, e.step_us, e.oom, scratch, msg, len);
    }
    free(dev);
    policy_session_close(src);
    return st;
}

pl_status transfer_score(const transfer_score_options *o, policy_session *dst, transfer_scores *out, char *msg,
                         size_t len) {
    memset(out, 0, sizeof *out);
    if (!o->src_path) return pl_fail(msg, len, PL_ERR_INVALID, "no source database (--from FILE)");
    if (o->top_k < 1) return pl_fail(msg, len, PL_ERR_INVALID, "the shortlist needs at least one placement");
    if (o->n_runs + o->n_placements < 1)
        return pl_fail(msg, len, PL_ERR_INVALID, "nothing to score: give --run ID or --placement P with --from");
    if (o->n_runs > TRANSFER_MAX_SOURCES || o->n_placements > TRANSFER_MAX_SOURCES)
        return pl_fail(msg, len, PL_ERR_INVALID, "at most %d runs and %d placements", TRANSFER_MAX_SOURCES,
                       TRANSFER_MAX_SOURCES);
    pl_status st = policy_cands_create(dst->g->n_nodes, dst->gr->n_groups, &out->rows);
    if (st != PL_OK) return pl_fail(msg, len, st, "out of memory");
    int *scratch = malloc(sizeof *scratch * (size_t)dst->g->n_nodes);
    if (!scratch) st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    for (int i = 0; i < o->n_runs && st == PL_OK; i++) st = score_run(o, dst, i, out, scratch, msg, len);
    if (st == PL_OK && o->n_placements > 0) st = score_placements(o, dst, out, scratch, msg, len);
    free(scratch);
    if (st != PL_OK) transfer_scores_free(out);
    return st;
}
