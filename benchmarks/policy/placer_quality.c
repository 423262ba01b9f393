/*
 * placer_quality: how good are the placers, measured against the true
 * optimum.
 *
 * For every shipped profile (the .db files in data/) and the t4x4-pcie spec (built in
 * memory, skipped when a shipped file holds the same spec machine), and for
 * three settings
 *   A  m = 1 (gpipe)
 *   B  m = 4, 1F1B
 *   C  m = 1 with a per-device cap at 70% of the best single device's peak
 * it finds the exhaustive optimum over the default GPT's 13 co-location
 * groups and reports the gap to it of
 *   - RL (default options: 250 updates x 8 samples, stay prior 0.75), best
 *     found and final favourite, over several seeds;
 *   - RL from a uniform start (prior 0, as in the paper);
 *   - the prior alone (the same sampler with a learning rate of 1e-12);
 *   - random search, simulated annealing and local search with the same
 *     budget (2000 simulations), over the same seeds;
 *   - the DP, the best single device and the best human split (human splits
 *     are node placements and may beat the 13-group optimum).
 * It times 250 x 8 training (with and without logging every sample and a
 * checkpoint to a database), writes learning curves as CSV, and runs the
 * harder problem of the 40 ungrouped nodes (gaps to the best placement any
 * placer found), and the generalisation experiment: train on the 6-layer GPT, place the 12-layer
 * GPT (d_model 768) zero-shot and after a 50-update fine-tune, against the
 * DP's answer and against training from scratch for 50 updates.
 *
 * usage: placer_quality [--out DIR] [--seeds N] [--data DIR] [--threads N]
 *                       [--no-generalisation] [--profiles LIST]
 * Prints Markdown on stdout; CSV files go to DIR (default ./placer-quality).
 */
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reinforce.h"
#include "search.h"
#include "session.h"
#include "spec.h"
#include "store.h"
#include "util.h"

#define MAX_SEEDS 16
#define UPDATES 250
#define SAMPLES 8
#define BUDGET (UPDATES * SAMPLES)

typedef struct {
    const char *out_dir;
    int seeds;
    int threads;
    int generalisation;
    const char *data_dir;
    const char *only;
} bench_opts;

typedef struct {
    double *best;  /* UPDATES: best cost so far after each update */
    double *mean;  /* UPDATES: mean sample cost of the update */
} curve;

static int on_update(void *ud, const reinforce_progress *p) {
    curve *c = ud;
    if (p->update < UPDATES) {
        c->best[p->update] = p->best_us;
        c->mean[p->update] = p->mean_cost_us;
    }
    return 0;
}

static void die(const char *what, pl_status st, const char *msg) {
    fprintf(stderr, "placer_quality: %s: %s (%s)\n", what, msg && *msg ? msg : "", pl_status_str(st));
    exit(1);
}

/* One RL run; returns best-found cost, sets *fav to the favourite's cost,
 * fills the curve when given, and *wall the training time. */
static double run_rl(policy_session *ss, const reinforce_options *o, double *fav, curve *cv, double *wall,
                     profile_db *db, int64_t run) {
    reinforce *r = NULL;
    char msg[256];
    pl_status st = reinforce_create(ss->ev, o, &r, msg, sizeof msg);
    if (st != PL_OK) die("reinforce_create", st, msg);
    double t0 = pl_now_us();
    st = reinforce_train(r, db, run, cv ? on_update : NULL, cv, msg, sizeof msg);
    if (wall) *wall = (pl_now_us() - t0) * 1e-6;
    if (st != PL_OK) die("reinforce_train", st, msg);
    int *u = malloc(sizeof *u * (size_t)ss->gr->n_groups);
    policy_eval e;
    st = reinforce_favourite(r, u, &e);
    if (st != PL_OK) die("favourite", st, "");
    *fav = e.cost_us;
    free(u);
    double best = reinforce_best_cost(r);
    reinforce_destroy(r);
    return best;
}

typedef struct {
    double mean, max;
    int hits;  /* runs within 1e-9 of the optimum */
    int oom;   /* runs whose placement ran out of memory (cost = the penalty) */
    int n;     /* runs */
} gap_stats;

/* Gaps of the runs that fit; the OOM ones are counted apart (their cost is
 * the 10 s penalty, which would swamp a mean). */
static gap_stats gaps(const double *cost, int n, double opt) {
    gap_stats g = {0, -INFINITY, 0, 0, n};
    int fit = 0;
    for (int i = 0; i < n; i++) {
        if (cost[i] >= 0.999 * POLICY_OOM_PENALTY_US) {
            g.oom++;
            continue;
        }
        double x = 100.0 * (cost[i] / opt - 1.0);
        g.mean += x;
        fit++;
        if (x > g.max) g.max = x;
        g.hits += fabs(cost[i] - opt) <= 1e-9 * opt;
    }
    if (fit) g.mean /= fit;
    return g;
}

static void print_gap(const char *name, gap_stats g, int n) {
    (void)n;
    if (g.oom == g.n) {
        printf("| %s | - | - | 0/%d | %d |\n", name, g.n, g.oom);
        return;
    }
    printf("| %s | %.2f%% | %.2f%% | %d/%d | %d |\n", name, g.mean, g.max, g.hits, g.n, g.oom);
}

static double best_with_prefix(const policy_cands *c, const char *prefix, char *label, size_t len) {
    int i = policy_cands_best_with_prefix(c, prefix);
    if (i < 0) return NAN;
    if (label) snprintf(label, len, "%s", c->items[i].label);
    return c->items[i].ev.cost_us;
}

/* A profile source: a database path, or a spec name built in memory. */
typedef struct {
    char name[128];     /* for people */
    char db_path[1024]; /* database, or "" */
    const char *spec;   /* spec built in memory, or NULL */
    char slug[64];      /* for file names */
} source;

static policy_session *open_session(const source *src, const char *config, int m, schedule_order o, const char *cap,
                                    int threads) {
    policy_session_options so;
    policy_session_options_default(&so);
    so.micro_batches = m;
    so.order = o;
    so.mem_cap = cap;
    so.threads = threads;
    so.config = config;
    policy_session *ss = NULL;
    char msg[512];
    pl_status st;
    if (src->spec) {
        gpt_config cfg;
        st = gpt_config_parse(config ? config : "default", &cfg, msg, sizeof msg);
        if (st != PL_OK) die("config", st, msg);
        graph *g = NULL;
        st = graph_build_gpt(&cfg, &g, msg, sizeof msg);
        if (st != PL_OK) die("graph", st, msg);
        static const int mbs[] = {1, 2, 4, 8, 16};
        profile_data *p = NULL;
        st = spec_profile_build(spec_find(src->spec), g, mbs, 5, &p);
        if (st != PL_OK) die("spec profile", st, src->spec);
        so.config = NULL;
        st = policy_session_from_profile(&so, &cfg, p, &ss, msg, sizeof msg);
        profile_data_destroy(p);
        graph_destroy(g);
    } else {
        so.db_path = src->db_path;
        st = policy_session_open(&so, &ss, msg, sizeof msg);
    }
    if (st != PL_OK) die(src->name, st, msg);
    return ss;
}

static void write_curves(const bench_opts *bo, const char *prof, const char *setting, double opt, curve *rl,
                         curve *uni, curve *prior, const double *rnd, const double *ann, const double *loc) {
    char path[2048];
    snprintf(path, sizeof path, "%s/curve_%s_%s.csv", bo->out_dir, prof, setting);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "placer_quality: cannot write %s: %s\n", path, strerror(errno));
        return;
    }
    fprintf(f, "update,evaluations,optimum_us,rl_best_us,rl_mean_us,rl_uniform_best_us,rl_uniform_mean_us,"
               "prior_only_best_us,random_best_us,anneal_best_us,local_best_us\n");
    for (int u = 0; u < UPDATES; u++) {
        int e = (u + 1) * SAMPLES - 1;
        fprintf(f, "%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", u, e + 1, opt, rl->best[u], rl->mean[u],
                uni->best[u], uni->mean[u], prior->best[u], rnd[e], ann[e], loc[e]);
    }
    fclose(f);
}

/* Evaluate one (profile, setting). */
static void bench_setting(const bench_opts *bo, const source *src, const char *setting_name, int m, schedule_order o,
                          int capped) {
    char cap_text[64] = "";
    policy_session *ss = open_session(src, NULL, m, o, NULL, bo->threads);
    policy_cands *c = NULL;
    char msg[512];
    if (policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &c) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
    if (capped) {
        if (search_single(ss->ev, c) != PL_OK) die("single", PL_ERR_INVALID, "");
        int64_t peak = c->items[policy_cands_best(c)].ev.peak_bytes;
        snprintf(cap_text, sizeof cap_text, "%lld", (long long)(0.7 * (double)peak));
        policy_cands_destroy(c);
        policy_session_close(ss);
        ss = open_session(src, NULL, m, o, cap_text, bo->threads);
        if (policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &c) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
    }
    const int S = bo->seeds;
    printf("\n### %s, setting %s (m=%d %s%s%s)\n\n", src->name, setting_name, m, schedule_order_name(o),
           capped ? ", cap " : "", capped ? cap_text : "");
    if (capped) printf("cap = 70%% of the best single device's peak, in bytes\n\n");
    fflush(stdout);
    pl_status st;
    if ((st = search_single(ss->ev, c)) != PL_OK || (st = search_human(ss->ev, c)) != PL_OK ||
        (st = search_dp(ss->ev, c, NULL)) != PL_OK)
        die("baselines", st, "");
    search_exhaustive_info xi;
    st = search_exhaustive(ss->ev, 1e8, c, &xi, msg, sizeof msg);
    if (st != PL_OK) die("exhaustive", st, msg);
    char lab_ex[POLICY_LABEL_LEN], lab_h[POLICY_LABEL_LEN], lab_s[POLICY_LABEL_LEN], lab_dp[POLICY_LABEL_LEN];
    double opt = best_with_prefix(c, "exhaustive", lab_ex, sizeof lab_ex);
    int ix = policy_cands_best_with_prefix(c, "exhaustive");
    double single = best_with_prefix(c, "single", lab_s, sizeof lab_s);
    double human = best_with_prefix(c, "human", lab_h, sizeof lab_h);
    double dp = best_with_prefix(c, "dp (", lab_dp, sizeof lab_dp);
    char opt_text[256];
    placement_format(c->items[ix].unit_dev, ss->gr->n_groups, opt_text, sizeof opt_text);
    printf("exhaustive optimum over 13 groups: %.3f ms (%s), placement %s%s; %.0f placements up to %d "
           "relabellings, %.1f s on %d threads\n\n",
           opt * 1e-3, c->items[ix].ev.oom ? "OOM" : "fits", opt_text, "", xi.orbits, xi.n_automorphisms, xi.wall_s,
           policy_evaluator_threads(ss->ev));
    printf("| baseline | step (ms) | gap to optimum |\n|---|---|---|\n");
    const policy_eval *se = &c->items[policy_cands_best_with_prefix(c, "single")].ev;
    if (se->oom)
        printf("| best single device (%s) | OOM (%.3f ms if it fitted, peak %.2f GB) | - |\n", lab_s,
               se->step_us * 1e-3, (double)se->peak_bytes * 1e-9);
    else
        printf("| best single device (%s) | %.3f | %+.2f%% |\n", lab_s, single * 1e-3, 100 * (single / opt - 1));
    if (!isnan(human))
        printf("| best human split (%s) | %.3f | %+.2f%% |\n", lab_h, human * 1e-3, 100 * (human / opt - 1));
    printf("| %s | %.3f | %+.2f%% |\n\n", lab_dp, dp * 1e-3, 100 * (dp / opt - 1));
    fflush(stdout);

    /* RL variants, random, anneal, local over the seeds */
    double rl[MAX_SEEDS], rl_fav[MAX_SEEDS], uni[MAX_SEEDS], uni_fav[MAX_SEEDS], pri[MAX_SEEDS], rnd[MAX_SEEDS],
        ann[MAX_SEEDS], loc[MAX_SEEDS], wall_rl = 0;
    curve cv_rl, cv_uni, cv_pri;
    double *mem = calloc((size_t)6 * UPDATES + 3 * BUDGET, sizeof *mem);
    cv_rl.best = mem; cv_rl.mean = mem + UPDATES;
    cv_uni.best = mem + 2 * UPDATES; cv_uni.mean = mem + 3 * UPDATES;
    cv_pri.best = mem + 4 * UPDATES; cv_pri.mean = mem + 5 * UPDATES;
    double *crv_rnd = mem + 6 * UPDATES, *crv_ann = crv_rnd + BUDGET, *crv_loc = crv_ann + BUDGET;
    for (int s = 0; s < S; s++) {
        reinforce_options ro;
        reinforce_options_default(&ro);
        ro.seed = (uint64_t)(s + 1);
        double w = 0;
        rl[s] = run_rl(ss, &ro, &rl_fav[s], s == 0 ? &cv_rl : NULL, &w, NULL, 0);
        wall_rl += w / S;
        ro.stay = 0.0;
        uni[s] = run_rl(ss, &ro, &uni_fav[s], s == 0 ? &cv_uni : NULL, NULL, NULL, 0);
        reinforce_options_default(&ro);
        ro.seed = (uint64_t)(s + 1);
        ro.lr = 1e-12;
        double dummy;
        pri[s] = run_rl(ss, &ro, &dummy, s == 0 ? &cv_pri : NULL, NULL, NULL, 0);
        policy_cands *l = NULL;
        if (policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &l) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
        search_budget b = {BUDGET, SAMPLES, (uint64_t)(s + 1), s == 0 ? crv_rnd : NULL};
        if ((st = search_random(ss->ev, &b, l)) != PL_OK) die("random", st, "");
        b.curve = s == 0 ? crv_ann : NULL;
        if ((st = search_anneal(ss->ev, &b, l)) != PL_OK) die("anneal", st, "");
        b.curve = s == 0 ? crv_loc : NULL;
        if ((st = search_local(ss->ev, &b, l)) != PL_OK) die("local", st, "");
        rnd[s] = l->items[0].ev.cost_us;
        ann[s] = l->items[1].ev.cost_us;
        loc[s] = l->items[2].ev.cost_us;
        policy_cands_destroy(l);
    }
    /* timing with the store: every sample and a checkpoint per update */
    char dbp[] = "/tmp/placer-quality-XXXXXX";
    int fd = mkstemp(dbp);
    double wall_db = NAN;
    if (fd >= 0) {
        close(fd);
        unlink(dbp);
        profile_db *db = NULL;
        int64_t run = 0;
        if (profile_db_open(dbp, PROFILE_DB_CREATE, &db, msg, sizeof msg) == PL_OK &&
            profile_db_run_create(db, "reinforce", "benchmark", &run) == PL_OK) {
            reinforce_options ro;
            reinforce_options_default(&ro);
            double f;
            run_rl(ss, &ro, &f, NULL, &wall_db, db, run);
        }
        profile_db_close(db);
        char side[1100];
        unlink(dbp);
        snprintf(side, sizeof side, "%s-wal", dbp);
        unlink(side);
        snprintf(side, sizeof side, "%s-shm", dbp);
        unlink(side);
    }
    printf("| placer (%d seeds, %d simulations each) | mean gap | worst gap | runs at the optimum | runs ending OOM |\n"
           "|---|---|---|---|---|\n", S, BUDGET);
    print_gap("RL best found (prior 0.75)", gaps(rl, S, opt), S);
    print_gap("RL final favourite (prior 0.75)", gaps(rl_fav, S, opt), S);
    print_gap("RL best found, uniform start (paper)", gaps(uni, S, opt), S);
    print_gap("RL final favourite, uniform start", gaps(uni_fav, S, opt), S);
    print_gap("prior alone, no learning", gaps(pri, S, opt), S);
    print_gap("random search", gaps(rnd, S, opt), S);
    print_gap("simulated annealing", gaps(ann, S, opt), S);
    print_gap("local search", gaps(loc, S, opt), S);
    printf("\nRL wall time for %d updates x %d samples on %d threads: %.2f s without the store, %.2f s logging "
           "every sample and a checkpoint per update\n",
           UPDATES, SAMPLES, policy_evaluator_threads(ss->ev), wall_rl, wall_db);
    write_curves(bo, src->slug, setting_name, opt, &cv_rl, &cv_uni, &cv_pri, crv_rnd, crv_ann, crv_loc);
    printf("learning curves: %s/curve_%s_%s.csv\n", bo->out_dir, src->slug, setting_name);
    fflush(stdout);
    free(mem);
    policy_cands_destroy(c);
    policy_session_close(ss);
}

/* A harder problem: the 40 nodes of the default GPT without grouping
 * (4^40 placements: no exhaustive optimum). Gaps are to the best placement
 * any placer found. */
static void bench_nodes(const bench_opts *bo, const source *src, int m, schedule_order o) {
    policy_session_options so;
    policy_session_options_default(&so);
    so.groups = GROUPING_NONE;
    so.micro_batches = m;
    so.order = o;
    so.threads = bo->threads;
    policy_session *ss = NULL;
    char msg[512];
    gpt_config cfg;
    gpt_config_parse("default", &cfg, msg, sizeof msg);
    graph *g = NULL;
    graph_build_gpt(&cfg, &g, msg, sizeof msg);
    static const int mbs[] = {1, 2, 4, 8, 16};
    profile_data *p = NULL;
    pl_status st = spec_profile_build(spec_find(src->spec), g, mbs, 5, &p);
    if (st != PL_OK) die("spec", st, src->spec);
    st = policy_session_from_profile(&so, &cfg, p, &ss, msg, sizeof msg);
    profile_data_destroy(p);
    graph_destroy(g);
    if (st != PL_OK) die("session", st, msg);
    const int S = bo->seeds < 3 ? bo->seeds : 3;
    double rl[MAX_SEEDS], rl_fav[MAX_SEEDS], uni[MAX_SEEDS], uni_fav[MAX_SEEDS], pri[MAX_SEEDS], rnd[MAX_SEEDS],
        ann[MAX_SEEDS], loc[MAX_SEEDS];
    policy_cands *c = NULL;
    if (policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &c) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
    if ((st = search_dp(ss->ev, c, NULL)) != PL_OK || (st = search_human(ss->ev, c)) != PL_OK ||
        (st = search_single(ss->ev, c)) != PL_OK)
        die("baselines", st, "");
    double dp = best_with_prefix(c, "dp (", NULL, 0), human = best_with_prefix(c, "human", NULL, 0),
           single = best_with_prefix(c, "single", NULL, 0);
    double best = fmin(dp, human);
    for (int s = 0; s < S; s++) {
        reinforce_options ro;
        reinforce_options_default(&ro);
        ro.seed = (uint64_t)(s + 1);
        rl[s] = run_rl(ss, &ro, &rl_fav[s], NULL, NULL, NULL, 0);
        ro.stay = 0;
        uni[s] = run_rl(ss, &ro, &uni_fav[s], NULL, NULL, NULL, 0);
        reinforce_options_default(&ro);
        ro.seed = (uint64_t)(s + 1);
        ro.lr = 1e-12;
        double dummy;
        pri[s] = run_rl(ss, &ro, &dummy, NULL, NULL, NULL, 0);
        policy_cands *l = NULL;
        if (policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &l) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
        search_budget b = {BUDGET, SAMPLES, (uint64_t)(s + 1), NULL};
        if ((st = search_random(ss->ev, &b, l)) != PL_OK || (st = search_anneal(ss->ev, &b, l)) != PL_OK ||
            (st = search_local(ss->ev, &b, l)) != PL_OK)
            die("search", st, "");
        rnd[s] = l->items[0].ev.cost_us;
        ann[s] = l->items[1].ev.cost_us;
        loc[s] = l->items[2].ev.cost_us;
        policy_cands_destroy(l);
        const double *all[] = {rl, rl_fav, uni, uni_fav, pri, rnd, ann, loc};
        for (int q = 0; q < 8; q++) best = fmin(best, all[q][s]);
    }
    printf("\n### harder: the 40 nodes without grouping, %s (m=%d %s)\n\n", src->name, m, schedule_order_name(o));
    printf("No exhaustive optimum (4^40 placements); gaps are to the best placement any placer below found, "
           "%.3f ms. The DP over 40 nodes: %+.2f%%; best human split %+.2f%%; best single device %+.2f%%.\n\n",
           best * 1e-3, 100 * (dp / best - 1), 100 * (human / best - 1), 100 * (single / best - 1));
    printf("| placer (%d seeds, %d simulations each) | mean gap | worst gap | runs at the best | runs ending OOM |\n"
           "|---|---|---|---|---|\n", S, BUDGET);
    print_gap("RL best found (prior 0.75)", gaps(rl, S, best), S);
    print_gap("RL final favourite (prior 0.75)", gaps(rl_fav, S, best), S);
    print_gap("RL best found, uniform start (paper)", gaps(uni, S, best), S);
    print_gap("RL final favourite, uniform start", gaps(uni_fav, S, best), S);
    print_gap("prior alone, no learning", gaps(pri, S, best), S);
    print_gap("random search", gaps(rnd, S, best), S);
    print_gap("simulated annealing", gaps(ann, S, best), S);
    print_gap("local search", gaps(loc, S, best), S);
    fflush(stdout);
    policy_cands_destroy(c);
    policy_session_close(ss);
}

/* Generalisation: 6-layer training, 12-layer placement. */
static void bench_generalisation(const bench_opts *bo, const source *src, int m, schedule_order o) {
    policy_session *s6 = open_session(src, "default", m, o, NULL, bo->threads);
    policy_session *s12 = open_session(src, "gpt12", m, o, NULL, bo->threads);
    policy_cands *c = NULL;
    char msg[256];
    if (policy_cands_create(s12->g->n_nodes, s12->gr->n_groups, &c) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
    pl_status st = search_dp(s12->ev, c, NULL);
    if (st != PL_OK) die("dp", st, "");
    double dp = c->items[policy_cands_best(c)].ev.cost_us;
    search_budget b = {BUDGET, SAMPLES, 1, NULL};
    if ((st = search_local(s12->ev, &b, c)) != PL_OK) die("local", st, "");
    if ((st = search_single(s12->ev, c)) != PL_OK) die("single", st, "");
    double local = c->items[policy_cands_best_with_prefix(c, "local")].ev.cost_us;
    double single = c->items[policy_cands_best_with_prefix(c, "single")].ev.cost_us;
    printf("\n### generalisation on %s (m=%d %s): train on the 6-layer GPT (13 groups), place the 12-layer GPT "
           "(d_model 768, 25 groups)\n\n",
           src->name, m, schedule_order_name(o));
    printf("DP optimum for the 12-layer GPT: %.3f ms; best single device %.3f ms (%+.2f%%); local search, %d "
           "simulations: %+.2f%%\n\n",
           dp * 1e-3, single * 1e-3, 100 * (single / dp - 1), BUDGET, 100 * (local / dp - 1));
    printf("| seed | zero-shot favourite | zero-shot best of 8 | fine-tuned 50 updates: best / favourite | "
           "from scratch 50 updates: best / favourite |\n|---|---|---|---|---|\n");
    const int S = bo->seeds < 3 ? bo->seeds : 3;
    for (int s = 0; s < S; s++) {
        reinforce_options ro;
        reinforce_options_default(&ro);
        ro.seed = (uint64_t)(s + 1);
        reinforce *r = NULL;
        if ((st = reinforce_create(s6->ev, &ro, &r, msg, sizeof msg)) != PL_OK) die("rl", st, msg);
        if ((st = reinforce_train(r, NULL, 0, NULL, NULL, msg, sizeof msg)) != PL_OK) die("train", st, msg);
        if ((st = reinforce_retarget(r, s12->ev, UPDATES + 1)) != PL_OK) die("retarget", st, "");
        int fav[64];
        policy_eval e;
        if ((st = reinforce_favourite(r, fav, &e)) != PL_OK) die("favourite", st, "");
        double zs = e.cost_us;
        /* one update's worth of samples from the transferred policy */
        if ((st = reinforce_train(r, NULL, 0, NULL, NULL, msg, sizeof msg)) != PL_OK) die("train", st, msg);
        double zs8 = reinforce_best_cost(r);
        reinforce_destroy(r);
        r = NULL;
        /* fine-tune: 50 updates after the 6-layer training (fresh trainer, same seed) */
        if ((st = reinforce_create(s6->ev, &ro, &r, msg, sizeof msg)) != PL_OK) die("rl", st, msg);
        if ((st = reinforce_train(r, NULL, 0, NULL, NULL, msg, sizeof msg)) != PL_OK) die("train", st, msg);
        if ((st = reinforce_retarget(r, s12->ev, UPDATES + 50)) != PL_OK) die("retarget", st, "");
        if ((st = reinforce_train(r, NULL, 0, NULL, NULL, msg, sizeof msg)) != PL_OK) die("train", st, msg);
        double ft = reinforce_best_cost(r);
        if ((st = reinforce_favourite(r, fav, &e)) != PL_OK) die("favourite", st, "");
        double ft_fav = e.cost_us;
        reinforce_destroy(r);
        /* control: 50 updates from scratch on the 12-layer graph */
        ro.updates = 50;
        if ((st = reinforce_create(s12->ev, &ro, &r, msg, sizeof msg)) != PL_OK) die("rl", st, msg);
        if ((st = reinforce_train(r, NULL, 0, NULL, NULL, msg, sizeof msg)) != PL_OK) die("train", st, msg);
        double sc = reinforce_best_cost(r);
        if ((st = reinforce_favourite(r, fav, &e)) != PL_OK) die("favourite", st, "");
        double sc_fav = e.cost_us;
        reinforce_destroy(r);
        printf("| %d | %+.2f%% | %+.2f%% | %+.2f%% / %+.2f%% | %+.2f%% / %+.2f%% |\n", s + 1, 100 * (zs / dp - 1),
               100 * (zs8 / dp - 1), 100 * (ft / dp - 1), 100 * (ft_fav / dp - 1), 100 * (sc / dp - 1),
               100 * (sc_fav / dp - 1));
        fflush(stdout);
    }
    printf("\n(gaps relative to the DP's answer; negative means better than the DP)\n");
    policy_cands_destroy(c);
    policy_session_close(s6);
    policy_session_close(s12);
}

int main(int argc, char **argv) {
    bench_opts bo = {"placer-quality", 5, 0, 1, NULL, NULL};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) bo.out_dir = argv[++i];
        else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) bo.seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) bo.threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) bo.data_dir = argv[++i];
        else if (!strcmp(argv[i], "--profiles") && i + 1 < argc) bo.only = argv[++i];
        else if (!strcmp(argv[i], "--no-generalisation")) bo.generalisation = 0;
        else {
            fprintf(stderr, "usage: placer_quality [--out DIR] [--seeds N] [--threads N] [--data DIR] "
                            "[--profiles SUBSTRINGS] [--no-generalisation]\n");
            return 2;
        }
    }
    if (bo.seeds < 1 || bo.seeds > MAX_SEEDS) {
        fprintf(stderr, "placer_quality: --seeds must be 1..%d\n", MAX_SEEDS);
        return 2;
    }
    mkdir(bo.out_dir, 0755);
    char data[1024];
    snprintf(data, sizeof data, "%s", bo.data_dir ? bo.data_dir : PLACER_SOURCE_DIR "/data");
    source srcs[16];
    int n_src = 0;
    char pattern[1100];
    snprintf(pattern, sizeof pattern, "%s/*.db", data);
    glob_t gl;
    int have_t4_spec_file = 0;
    if (glob(pattern, 0, NULL, &gl) == 0) {
        for (size_t i = 0; i < gl.gl_pathc && n_src < 15; i++) {
            source *s = &srcs[n_src];
            memset(s, 0, sizeof *s);
            snprintf(s->db_path, sizeof s->db_path, "%s", gl.gl_pathv[i]);
            const char *base = strrchr(gl.gl_pathv[i], '/');
            base = base ? base + 1 : gl.gl_pathv[i];
            snprintf(s->name, sizeof s->name, "data/%s", base);
            snprintf(s->slug, sizeof s->slug, "%.*s", (int)(strlen(base) > 3 ? strlen(base) - 3 : strlen(base)), base);
            profile_db *db = NULL;
            profile_db_machine_row mr;
            if (profile_db_open(s->db_path, PROFILE_DB_READ, &db, NULL, 0) == PL_OK &&
                profile_db_machine(db, &mr) == PL_OK) {
                if (!strcmp(mr.name, "t4x4-pcie") && !strcmp(mr.source, "spec")) have_t4_spec_file = 1;
                snprintf(s->name + strlen(s->name), sizeof s->name - strlen(s->name), " (%s, %s)", mr.name, mr.source);
            }
            profile_db_close(db);
            n_src++;
        }
        globfree(&gl);
    }
    if (!have_t4_spec_file) {
        memset(&srcs[n_src], 0, sizeof srcs[n_src]);
        snprintf(srcs[n_src].name, sizeof srcs[n_src].name, "t4x4-pcie spec (in memory)");
        snprintf(srcs[n_src].slug, sizeof srcs[n_src].slug, "t4x4-pcie-spec");
        srcs[n_src].spec = "t4x4-pcie";
        n_src++;
    }
    printf("# placer quality\n\nBudget: %d updates x %d samples = %d simulations per run; %d seeds per placer; "
           "exhaustive search over the default GPT's 13 co-location groups gives the optimum.%s\n",
           UPDATES, SAMPLES, BUDGET, bo.seeds,
           have_t4_spec_file ? " The t4x4-pcie spec is data/t4x4-pcie.db (the shipped file holds that spec)." : "");
    for (int i = 0; i < n_src; i++) {
        if (bo.only && !strstr(srcs[i].name, bo.only)) continue;
        printf("\n## %s\n", srcs[i].name);
        policy_session *probe = open_session(&srcs[i], NULL, 1, SCHED_GPIPE, NULL, 1);
        int n_dev = probe->p->n_devices;
        policy_session_close(probe);
        if (n_dev < 2) {
            printf("\nskipped: one device, nothing to place\n");
            continue;
        }
        bench_setting(&bo, &srcs[i], "A", 1, SCHED_GPIPE, 0);
        bench_setting(&bo, &srcs[i], "B", 4, SCHED_1F1B, 0);
        bench_setting(&bo, &srcs[i], "C", 1, SCHED_GPIPE, 1);
    }
    if (!bo.only || strstr("harder nodes", bo.only)) {
        printf("\n## harder problems\n");
        source t4 = {"t4x4-pcie spec (in memory)", "", "t4x4-pcie", "t4x4-pcie-spec"};
        source h2 = {"h200x2-nvlink spec (in memory)", "", "h200x2-nvlink", "h200x2-nvlink-spec"};
        bench_nodes(&bo, &t4, 4, SCHED_1F1B);
        bench_nodes(&bo, &h2, 4, SCHED_1F1B);
    }
    if (bo.generalisation) {
        printf("\n## generalisation\n");
        source t4 = {"t4x4-pcie spec (in memory)", "", "t4x4-pcie", "t4x4-pcie-spec"};
        source h2 = {"h200x2-nvlink spec (in memory)", "", "h200x2-nvlink", "h200x2-nvlink-spec"};
        bench_generalisation(&bo, &t4, 4, SCHED_1F1B);
        bench_generalisation(&bo, &h2, 4, SCHED_1F1B);
        bench_generalisation(&bo, &t4, 1, SCHED_GPIPE);
    }
    return 0;
}
