/*
 * sides.c: the confirmation's sides from the placers (see sides.h).
 */
#include "sides.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evaluator.h"
#include "grouping.h"
#include "placement.h"
#include "reinforce.h"
#include "search.h"

void calib_sides_options_default(calib_sides_options *o) {
    memset(o, 0, sizeof *o);
    o->top_k = 5;
    o->single = o->human = o->dp = o->search = 1;
    o->seed = 1;
}

/* Add the winner of a search (l's first candidate) to side, once on the
 * devices it chose and once for each cyclic renaming of the devices (d ->
 * (d + k) mod n_devices). The simulator may see those as equal while the
 * GPUs are not quite (one runs the host's main thread, or sits nearer the
 * switch); the single and human sides already try every GPU, so a
 * search's partition gets the same chance, and the selection rounds pick
 * its best renaming on the hardware. */
static pl_status add_winner_renamed(calib_confirm *c, const char *side, const policy_cands *l, int n_nodes,
                                    int n_devices, int *added, char *msg, size_t len) {
    if (l->n < 1) return PL_OK;
    int *pl = malloc(sizeof(int) * (size_t)n_nodes);
    if (!pl) return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    pl_status st = PL_OK;
    for (int k = 0; k < n_devices && st == PL_OK; k++) {
        char label[CALIB_LABEL_LEN];
        if (k == 0) snprintf(label, sizeof label, "%.40s", l->items[0].label);
        else snprintf(label, sizeof label, "%.40s, devices +%d", l->items[0].label, k);
        for (int i = 0; i < n_nodes; i++) pl[i] = (l->items[0].node_dev[i] + k) % n_devices;
        int a = 0;
        st = calib_confirm_add(c, side, label, pl, &a, msg, len);
        *added += a;
    }
    free(pl);
    return st;
}

/* Add every candidate of list (or only the first `limit` when > 0) to side. */
static pl_status add_list(calib_confirm *c, const char *side, const policy_cands *l, int limit, int *added,
                          char *msg, size_t len) {
    for (int i = 0; i < l->n && (limit <= 0 || i < limit); i++) {
        int a = 0;
        pl_status st = calib_confirm_add(c, side, l->items[i].label, l->items[i].node_dev, &a, msg, len);
        if (st != PL_OK) return st;
        *added += a;
    }
    return PL_OK;
}

/* RL shortlist from the samples: the top_k distinct non-OOM placements. */
typedef struct {
    int n_nodes, n_devices, top_k;
    int n;             /* kept */
    double *us;        /* top_k */
    int *pl;           /* top_k * n_nodes */
    int *tmp;          /* n_nodes */
    int n_samples;
} top_ctx;

static int top_sample(void *vctx, const profile_run_sample *s) {
    top_ctx *t = vctx;
    t->n_samples++;
    if (s->oom || !isfinite(s->step_us)) return 0;
    if (placement_parse(s->placement, t->n_nodes, t->n_devices, t->tmp, NULL, 0) != PL_OK) return 0;
    for (int i = 0; i < t->n; i++)
        if (!memcmp(t->pl + (size_t)i * t->n_nodes, t->tmp, sizeof(int) * (size_t)t->n_nodes)) return 0;
    int pos = t->n;
    while (pos > 0 && t->us[pos - 1] > s->step_us) pos--;
    if (pos >= t->top_k) return 0;
    int last = t->n < t->top_k ? t->n : t->top_k - 1;
    for (int i = last; i > pos; i--) {
        t->us[i] = t->us[i - 1];
        memcpy(t->pl + (size_t)i * t->n_nodes, t->pl + (size_t)(i - 1) * t->n_nodes, sizeof(int) * (size_t)t->n_nodes);
    }
    t->us[pos] = s->step_us;
    memcpy(t->pl + (size_t)pos * t->n_nodes, t->tmp, sizeof(int) * (size_t)t->n_nodes);
    if (t->n < t->top_k) t->n++;
    return 0;
}

static pl_status rl_from_samples(calib_confirm *c, profile_db *db, const calib_model *m, const calib_sides_options *o,
                                 int *added, char *msg, size_t len) {
    top_ctx t = {m->g->n_nodes, m->p->n_devices, o->top_k, 0, NULL, NULL, NULL, 0};
    t.us = malloc(sizeof(double) * (size_t)o->top_k);
    t.pl = malloc(sizeof(int) * (size_t)o->top_k * (size_t)m->g->n_nodes);
    t.tmp = malloc(sizeof(int) * (size_t)m->g->n_nodes);
    pl_status st = PL_OK;
    if (!t.us || !t.pl || !t.tmp) {
        st = pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    st = profile_db_run_samples(db, o->run_id, top_sample, &t);
    if (st == PL_ERR_NOT_FOUND) {
        pl_fail(msg, len, st, "run %lld is not in this database (the runs are those of placer train)",
                (long long)o->run_id);
        goto out;
    }
    if (st != PL_OK) {
        pl_fail(msg, len, st, "cannot read run %lld: %s", (long long)o->run_id, profile_db_last_error(db));
        goto out;
    }
    if (t.n == 0) {
        st = pl_fail(msg, len, PL_ERR_NOT_FOUND, "run %lld has no usable sample (%d samples, none fits this graph "
                     "and profile or all ran out of memory)", (long long)o->run_id, t.n_samples);
        goto out;
    }
    for (int i = 0; i < t.n; i++) {
        char label[CALIB_LABEL_LEN];
        snprintf(label, sizeof label, "rl top %d", i + 1);
        int a = 0;
        if ((st = calib_confirm_add(c, "rl", label, t.pl + (size_t)i * m->g->n_nodes, &a, msg, len)) != PL_OK) goto out;
        *added += a;
    }
out:
    free(t.us);
    free(t.pl);
    free(t.tmp);
    return st;
}

/* RL shortlist restored from the run's checkpoint, trying both groupings
 * (the checkpoint only fits the one the run used). Returns PL_ERR_NOT_FOUND
 * when there is no usable checkpoint. */
static pl_status rl_from_checkpoint(calib_confirm *c, profile_db *db, const calib_model *m, const schedule *s,
                                    int64_t mem_cap, const sim_params *prm, const calib_sides_options *o,
                                    calib_sides_info *info, int *added, char *msg, size_t len) {
    void *blob = NULL;
    size_t n = 0;
    int update = -1;
    pl_status st = reinforce_load_checkpoint(db, o->run_id, &blob, &n, &update, NULL, 0);
    if (st != PL_OK) return PL_ERR_NOT_FOUND;
    st = PL_ERR_NOT_FOUND;
    for (int gm = 0; gm < 2 && st == PL_ERR_NOT_FOUND; gm++) {
        grouping *gr = NULL;
        policy_evaluator *ev = NULL;
        reinforce *r = NULL;
        policy_cands *l = NULL;
        policy_problem pb;
        pl_status s2 = grouping_build(m->g, gm ? GROUPING_NONE : GROUPING_COLOCATE, &gr, msg, len);
        if (s2 == PL_OK) s2 = policy_problem_init(&pb, m->g, gr, m->p, s, mem_cap, prm, msg, len);
        if (s2 == PL_OK) s2 = policy_evaluator_create(&pb, o->threads, &ev);
        if (s2 == PL_OK && reinforce_create_from_checkpoint(ev, blob, n, 0, &r, NULL, 0) == PL_OK) {
            s2 = policy_cands_create(m->g->n_nodes, gr->n_groups, &l);
            if (s2 == PL_OK) s2 = reinforce_shortlist(r, l);
            if (s2 == PL_OK) s2 = add_list(c, "rl", l, 0, added, msg, len);
            st = s2;
            if (st == PL_OK) {
                info->rl_from_checkpoint = 1;
                info->rl_update = update;
            }
        } else if (s2 != PL_OK) {
            st = s2;
        }
        policy_cands_destroy(l);
        reinforce_destroy(r);
        policy_evaluator_destroy(ev);
        grouping_destroy(gr);
    }
    free(blob);
    return st;
}

pl_status calib_sides_add(calib_confirm *c, profile_db *db, const calib_model *m, const schedule *s, int64_t mem_cap,
                          const sim_params *prm, const calib_sides_options *o, calib_sides_info *info, char *msg,
                          size_t len) {
    if (!c || !db || !m || !s || !o) return pl_fail(msg, len, PL_ERR_INVALID, "missing argument");
    calib_sides_info dummy;
    if (!info) info = &dummy;
    memset(info, 0, sizeof *info);
    info->rl_update = -1;
    pl_status st = PL_OK;
    grouping *gr = NULL;
    policy_evaluator *ev = NULL;
    policy_cands *l = NULL;
    if (o->run_id > 0) {
        st = rl_from_checkpoint(c, db, m, s, mem_cap, prm, o, info, &info->n_added[0], msg, len);
        if (st == PL_ERR_NOT_FOUND) st = rl_from_samples(c, db, m, o, &info->n_added[0], msg, len);
        if (st != PL_OK) return st;
    }
    policy_problem pb;
    if ((st = grouping_build(m->g, GROUPING_COLOCATE, &gr, msg, len)) != PL_OK) goto out;
    if ((st = policy_problem_init(&pb, m->g, gr, m->p, s, mem_cap, prm, msg, len)) != PL_OK) goto out;
    if ((st = policy_evaluator_create(&pb, o->threads, &ev)) != PL_OK) {
        pl_fail(msg, len, st, "cannot create the evaluator");
        goto out;
    }
#define FRESH_LIST()                                                                     \
    do {                                                                                 \
        policy_cands_destroy(l);                                                         \
        l = NULL;                                                                        \
        if ((st = policy_cands_create(m->g->n_nodes, gr->n_groups, &l)) != PL_OK) goto out; \
    } while (0)
    if (o->single) {
        FRESH_LIST();
        if ((st = search_single(ev, l)) != PL_OK || (st = add_list(c, "single", l, 0, &info->n_added[1], msg, len)))
            goto out;
    }
    if (o->human) {
        FRESH_LIST();
        if ((st = search_human(ev, l)) != PL_OK || (st = add_list(c, "human", l, 0, &info->n_added[2], msg, len)))
            goto out;
    }
    if (o->dp) {
        FRESH_LIST();
        if ((st = search_dp(ev, l, NULL)) != PL_OK) goto out;
        policy_cands_sort(l);
        if ((st = add_winner_renamed(c, "dp", l, m->g->n_nodes, m->p->n_devices, &info->n_added[3], msg, len)) !=
            PL_OK)
            goto out;
    }
    if (o->search) {
        FRESH_LIST();
        search_exhaustive_info xi;
        char m2[256] = "";
        st = search_exhaustive(ev, 2e6, l, &xi, m2, sizeof m2);
        snprintf(info->search_method, sizeof info->search_method, "exhaustive");
        if (st == PL_ERR_INVALID) { /* too many orbits: anneal instead */
            FRESH_LIST();
            search_budget b = {4000, 8, o->seed, NULL};
            st = search_anneal(ev, &b, l);
            snprintf(info->search_method, sizeof info->search_method, "anneal");
        }
        if (st != PL_OK) {
            pl_fail(msg, len, st, "the search placer failed");
            goto out;
        }
        policy_cands_sort(l);
        if ((st = add_winner_renamed(c, "search", l, m->g->n_nodes, m->p->n_devices, &info->n_added[4], msg,
                                     len)) != PL_OK)
            goto out;
    }
#undef FRESH_LIST
out:
    policy_cands_destroy(l);
    policy_evaluator_destroy(ev);
    grouping_destroy(gr);
    return st;
}
