/*
 * search_suite.c: the methods of `placer search` in their fixed order and
 * the closing table's rows (search_suite.h).
 */
#include "search_suite.h"

#include <math.h>
#include <string.h>

#include "baechi.h"
#include "util.h"

int search_suite_parse_methods(const char *text, int *out) {
    static const struct {
        const char *name;
        int bit;
    } names[] = {{"single", SEARCH_SUITE_SINGLE}, {"human", SEARCH_SUITE_HUMAN},
                 {"dp", SEARCH_SUITE_DP},         {"random", SEARCH_SUITE_RANDOM},
                 {"anneal", SEARCH_SUITE_ANNEAL}, {"local", SEARCH_SUITE_LOCAL},
                 {"exhaustive", SEARCH_SUITE_EXHAUSTIVE}, {"etf", SEARCH_SUITE_ETF},
                 {"sct", SEARCH_SUITE_SCT},       {"all", SEARCH_SUITE_ALL}};
    char buf[256];
    if (strlen(text) >= sizeof buf) return -1;
    strcpy(buf, text);
    *out = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < sizeof names / sizeof names[0] && strcmp(t, names[i].name)) i++;
        if (i == sizeof names / sizeof names[0]) return -1;
        *out |= names[i].bit;
    }
    return *out ? 0 : -1;
}

static void say(const search_suite_options *o, const char *what) {
    if (o->progress) o->progress(o->ud, what);
}

/* Run every asked method into all. */
static pl_status run_methods(policy_session *ss, const search_suite_options *o, policy_cands *all,
                             search_suite_result *r, char *msg, size_t len) {
    policy_evaluator *ev = ss->ev;
    const int m = o->methods;
    const search_budget b = {o->budget, 8, o->seed, NULL};
    pl_status st;
    /* the single devices always run: they are the speed-up reference */
    say(o, "single devices");
    if ((st = search_single(ev, all)) != PL_OK) return st;
    if (m & SEARCH_SUITE_HUMAN) {
        say(o, "human splits");
        if ((st = search_human(ev, all)) != PL_OK) return st;
    }
    if (m & SEARCH_SUITE_DP) {
        say(o, "dp");
        if ((st = search_dp(ev, all, NULL)) != PL_OK) return st;
    }
    if (m & SEARCH_SUITE_RANDOM) {
        say(o, "random search");
        if ((st = search_random(ev, &b, all)) != PL_OK) return st;
    }
    if (m & SEARCH_SUITE_ANNEAL) {
        say(o, "simulated annealing");
        if ((st = search_anneal(ev, &b, all)) != PL_OK) return st;
    }
    if (m & SEARCH_SUITE_LOCAL) {
        say(o, "local search");
        if ((st = search_local(ev, &b, all)) != PL_OK) return st;
    }
    if (m & SEARCH_SUITE_ETF) {
        say(o, "m-etf");
        if ((st = search_etf(ev, all)) != PL_OK) return st;
    }
    if ((m & SEARCH_SUITE_SCT) && (o->explicit_methods || search_sct_available())) {
        say(o, "m-sct");
        if ((st = search_sct(ev, all, msg, len)) != PL_OK) return st;
    }
    if (m & SEARCH_SUITE_EXHAUSTIVE) {
        say(o, "exhaustive search");
        st = search_exhaustive(ev, o->max_evals, all, &r->xi, r->note, sizeof r->note);
        if (st == PL_ERR_INVALID && !o->explicit_methods) {
            r->exhaustive_skipped = 1;
        } else if (st != PL_OK) {
            snprintf(msg, len, "%s", r->note);
            return st;
        }
    }
    return PL_OK;
}

/* The rows: best single, best human, then each method's best; for the
 * exhaustive search both the optimum and, when it does not fit, the best
 * that fits. */
static pl_status gather_rows(const policy_cands *all, const grouping *gr, policy_cands *rows) {
    static const char *const prefixes[] = {"single", "human", "dp (", "random", "anneal", "local",
                                           "m-etf",  "m-sct", "exhaustive"};
    pl_status st = PL_OK;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0] && st == PL_OK; i++) {
        if (!strcmp(prefixes[i], "exhaustive")) {
            for (int j = 0; j < all->n && st == PL_OK; j++)
                if (!strncmp(all->items[j].label, "exhaustive", 10))
                    st = policy_cands_add(rows, gr, all->items[j].label, all->items[j].node_dev,
                                          all->items[j].unit_dev, &all->items[j].ev, 0);
            continue;
        }
        int k = policy_cands_best_with_prefix(all, prefixes[i]);
        if (k < 0) continue;
        const policy_cand *x = &all->items[k];
        st = policy_cands_add(rows, gr, x->label, x->node_dev, x->unit_dev, &x->ev, x->aux);
    }
    return st;
}

pl_status search_suite_run(policy_session *ss, const search_suite_options *o, search_suite_result *r, char *msg,
                           size_t len) {
    memset(r, 0, sizeof *r);
    r->ref_us = NAN;
    if (len) msg[0] = 0;
    policy_cands *all = NULL;
    const grouping *gr = ss->gr;
    if (policy_cands_create(ss->g->n_nodes, gr->n_groups, &all) != PL_OK ||
        policy_cands_create(ss->g->n_nodes, gr->n_groups, &r->rows) != PL_OK) {
        policy_cands_destroy(all);
        return pl_fail(msg, len, PL_ERR_NOMEM, "out of memory");
    }
    double t0 = pl_now_us();
    pl_status st = run_methods(ss, o, all, r, msg, len);
    r->wall_s = (pl_now_us() - t0) * 1e-6;
    if (st == PL_OK) {
        int bs = policy_cands_best_with_prefix(all, "single");
        r->ref_us = bs >= 0 && !all->items[bs].ev.oom ? all->items[bs].ev.step_us : NAN;
        st = gather_rows(all, gr, r->rows);
    }
    policy_cands_destroy(all);
    return st;
}

void search_suite_result_free(search_suite_result *r) {
    if (!r) return;
    policy_cands_destroy(r->rows);
    r->rows = NULL;
}
