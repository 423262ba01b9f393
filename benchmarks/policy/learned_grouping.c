/*
 * learned_grouping: the learned placers on problems where a chain split
 * may not be enough (issue 15).
 *
 * Problems (all spec profiles built in memory, every node a unit unless
 * the placer groups):
 *   par6-mixed   parallel-residual 6-layer GPT (40 nodes) on h200x2-l40sx2, m=4 1F1B
 *   L12-t4       12-layer GPT (76 nodes) on t4x4-pcie, m=4 1F1B
 *   L24-pairs    24-layer GPT (148 nodes) on h200x8-nvpairs, m=8 1F1B
 *   L48-mixed    48-layer GPT (292 nodes) on h200x2-l40sx2, m=4 1F1B
 * Placers, each over --seeds seeds:
 *   ColocRL       the 2017 placer over today's co-location groups
 *   hier          the hierarchical planner (--groups learned, G = 16)
 *   EAGLE         hier with EAGLE's link (--groups eagle)
 *   each with REINFORCE and with PPO (4 epochs, clip 0.2); 250 x 8 = 2,000
 *   simulations per run;
 *   random        uniform node placements, 10 x the RL budget (20,000)
 *   anneal, local 2,000 simulations over node placements
 *   and, once: the DP over the node chain, m-ETF, m-SCT, the best human
 *   split, the best single device.
 * For each: best found (mean and worst over seeds), gap to the best
 * placement any method found, the final policy's greedy placement (RL),
 * simulations used, wall time. Learning curves (best so far per update,
 * mean over seeds) go to DIR/curves_<problem>.csv.
 *
 * Two more experiments:
 *   - the parallel-residual 6-layer GPT on the h200x2-nvlink spec, m=4
 *     1F1B: best learned placement against the DP (best contiguous split)
 *     and the best human split, with its Chrome trace (DIR/trace_par6_h200x2.json);
 *   - train on one machine, evaluate on another: EAGLE trained on the
 *     h200x2-nvlink spec (default GPT, nodes, m=4 1F1B), its shortlist
 *     re-evaluated on the measured data/h200x2.db (calibrated), against
 *     the DP and EAGLE trained there directly.
 *
 * usage: learned_grouping [--out DIR] [--seeds N] [--threads N] [--only LIST]
 *                         [--no-extra] [--data DIR]
 *                         [--methods LIST] [--no-search] [--ref-ms X] [--variant-coloc]
 *                         [--pipe-prior X] [--n-groups G|auto] [--group-prior X]
 *                         [--ppo-epochs N] [--lr X] [--entropy X] [--prior-stay P]
 *                         [--pipe-devices all|estimate] [--pipe-anneal] [--baseline-loo]
 *                         [--lr-decay F] [--entropy-decay F] [--print-best] [--seed-base B]
 *                         [--updates N]
 * --only takes comma-separated problem names and "extra" (the two further
 * experiments), e.g. --only L12-t4,extra.
 * Variants (the issue-15 bar experiments): --pipe-prior, --n-groups (auto:
 * 2 x the problem's devices), --group-prior, --ppo-epochs, --lr, --entropy
 * and --prior-stay, and the options of the same names (reinforce.h:
 * pipe_devices, pipe_anneal, the leave-one-out baseline, lr_decay,
 * entropy_decay), change the options of the learned groupings (hier and
 * EAGLE), and of ColocRL too with --variant-coloc; every run keeps 250 x 8
 * simulations unless --updates N (a budget diagnostic: the RL rows only,
 * N x 8; the searches keep 2,000). --print-best prints each RL run's best
 * placement on stderr, --seed-base B runs the seeds B+1 .. B+N (held-out
 * seeds). --methods runs only the named RL rows (names with '-' for
 * spaces, e.g. hier-PPO,EAGLE-PPO), --no-search skips every other method
 * (searches and baselines do not depend on a variant), --ref-ms X takes
 * the gaps against X ms (the best any method found in a full run) when
 * it is below this run's best.
 * Prints Markdown on stdout.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "baechi.h"
#include "reinforce.h"
#include "search.h"
#include "session.h"
#include "sim.h"
#include "spec.h"
#include "util.h"

#define MAX_SEEDS 16
#define UPDATES 250
#define SAMPLES 8
#define BUDGET (UPDATES * SAMPLES)
#define MAX_UPDATES 2000
static int g_updates = UPDATES; /* --updates: the RL rows' updates (a budget diagnostic; the bar's runs keep 250) */

static void die(const char *what, pl_status st, const char *msg) {
    fprintf(stderr, "learned_grouping: %s: %s (%s)\n", what, msg && *msg ? msg : "", pl_status_str(st));
    exit(1);
}

typedef struct {
    const char *name, *config, *spec, *desc;
    int m;
} problem;

static const problem PROBLEMS[] = {
    {"par6-mixed", "default,parallel=1", "h200x2-l40sx2", "parallel-residual 6-layer GPT, 40 nodes, 2 x H200 + 2 x L40S", 4},
    {"L12-t4", "default,layers=12", "t4x4-pcie", "12-layer GPT, 76 nodes, 4 x T4 PCIe", 4},
    {"L24-pairs", "default,layers=24", "h200x8-nvpairs", "24-layer GPT, 148 nodes, 8 x H200 in NVLink pairs", 8},
    {"L48-mixed", "default,layers=48", "h200x2-l40sx2", "48-layer GPT, 292 nodes, 2 x H200 + 2 x L40S", 4},
};
#define N_PROBLEMS ((int)(sizeof PROBLEMS / sizeof PROBLEMS[0]))

static policy_session *spec_session(const char *config, const char *spec, int m, grouping_mode gm, int threads) {
    char msg[512];
    gpt_config cfg;
    pl_status st = gpt_config_parse(config, &cfg, msg, sizeof msg);
    if (st != PL_OK) die("config", st, msg);
    graph *g = NULL;
    if ((st = graph_build_gpt(&cfg, &g, msg, sizeof msg)) != PL_OK) die("graph", st, msg);
    static const int mbs[] = {1, 2, 4, 8, 16};
    profile_data *p = NULL;
    if ((st = spec_profile_build(spec_find(spec), g, mbs, 5, &p)) != PL_OK) die("spec profile", st, spec);
    policy_session_options so;
    policy_session_options_default(&so);
    so.micro_batches = m;
    so.order = SCHED_1F1B;
    so.groups = gm;
    so.threads = threads;
    policy_session *ss = NULL;
    if ((st = policy_session_from_profile(&so, &cfg, p, &ss, msg, sizeof msg)) != PL_OK) die("session", st, msg);
    profile_data_destroy(p);
    graph_destroy(g);
    return ss;
}

typedef struct {
    const char *name;
    grouper_kind grouper;
    reinforce_algo algo;
} rl_method;

static const rl_method RL[] = {
    {"ColocRL REINFORCE", GROUPER_NONE, ALGO_REINFORCE}, {"ColocRL PPO", GROUPER_NONE, ALGO_PPO},
    {"hier REINFORCE", GROUPER_HIER, ALGO_REINFORCE},    {"hier PPO", GROUPER_HIER, ALGO_PPO},
    {"EAGLE REINFORCE", GROUPER_EAGLE, ALGO_REINFORCE},  {"EAGLE PPO", GROUPER_EAGLE, ALGO_PPO},
};
#define N_RL ((int)(sizeof RL / sizeof RL[0]))

typedef struct {
    double best[MAX_UPDATES];
} curve;

static int on_update(void *ud, const reinforce_progress *p) {
    curve *c = ud;
    if (p->update < MAX_UPDATES) c->best[p->update] = p->best_us;
    return 0;
}

typedef struct {
    double best, fav, wall;
    int *node_dev; /* the best found placement (malloc'd) */
} rl_result;

static int in_list(const char *list, const char *name);

/* --methods and --no-search (see the opening comment) */
static const char *g_methods;
static int g_no_search;
static double g_ref_ms; /* --ref-ms: the gaps' reference (0: the best of this run) */
static int g_print_best; /* --print-best: each RL row's best placement (nodes) on stderr */
static int g_seed_base;  /* --seed-base B: seeds B+1 .. B+N (0: 1 .. N) */

static int method_on(const char *name) {
    if (!g_methods) return 1;
    char dashed[64];
    snprintf(dashed, sizeof dashed, "%s", name);
    for (char *c = dashed; *c; c++)
        if (*c == ' ') *c = '-';
    return in_list(g_methods, dashed);
}

/* A variant's overrides (negative: keep the default). */
typedef struct {
    double pipe_prior, group_prior, lr, entropy, stay;
    int n_groups; /* 0: 2 x devices */
    int n_groups_set, ppo_epochs;
    int coloc; /* apply to ColocRL too */
    int pipe_devices, pipe_anneal, loo; /* -1 / 0: keep the default */
    double lr_decay, entropy_decay;     /* negative: keep the default */
} variant;
static variant g_var = {-1, -1, -1, -1, -1, 0, 0, -1, 0, -1, 0, 0, -1, -1};

static void apply_variant(reinforce_options *o, const rl_method *m, policy_session *ss) {
    if (m->grouper == GROUPER_NONE && !g_var.coloc) return;
    if (g_var.pipe_prior >= 0) o->pipe_prior = g_var.pipe_prior;
    if (g_var.group_prior >= 0) o->group_prior = g_var.group_prior;
    if (g_var.lr > 0) o->lr = g_var.lr;
    if (g_var.entropy >= 0) o->entropy = g_var.entropy;
    if (g_var.stay >= 0) o->stay = g_var.stay;
    if (g_var.ppo_epochs > 0) o->ppo_epochs = g_var.ppo_epochs;
    if (g_var.pipe_devices >= 0) o->pipe_devices = (reinforce_pipe_devices)g_var.pipe_devices;
    if (g_var.pipe_anneal) o->pipe_anneal = 1;
    if (g_var.loo) o->baseline = BASELINE_LOO;
    if (g_var.lr_decay >= 0) o->lr_decay = g_var.lr_decay;
    if (g_var.entropy_decay >= 0) o->entropy_decay = g_var.entropy_decay;
    if (g_var.n_groups_set)
        o->n_groups = g_var.n_groups > 0 ? g_var.n_groups
                                         : 2 * policy_devices(policy_evaluator_problem(ss->ev));
}

static rl_result run_rl(policy_session *ss, const rl_method *m, int seed, curve *cv, reinforce **keep) {
    reinforce_options o;
    reinforce_options_default(&o);
    o.seed = (uint64_t)seed;
    o.updates = g_updates;
    o.grouper = m->grouper;
    o.algo = m->algo;
    apply_variant(&o, m, ss);
    reinforce *r = NULL;
    char msg[256];
    pl_status st = reinforce_create(ss->ev, &o, &r, msg, sizeof msg);
    if (st != PL_OK) die("reinforce_create", st, msg);
    if (o.pipe_prior > 0 && seed == g_seed_base + 1) { /* which devices the pipeline prior gives a stage */
        int mask[64], D = policy_devices(policy_evaluator_problem(ss->ev));
        if (D <= 64) {
            reinforce_pipe_stage_devices(r, mask);
            fprintf(stderr, "learned_grouping: %s: pipeline stages on devices", m->name);
            for (int d = 0; d < D; d++)
                if (mask[d]) fprintf(stderr, " %d", d);
            fprintf(stderr, "\n");
        }
    }
    rl_result res;
    double t0 = pl_now_us();
    if ((st = reinforce_train(r, NULL, 0, cv ? on_update : NULL, cv, msg, sizeof msg)) != PL_OK)
        die("reinforce_train", st, msg);
    res.wall = (pl_now_us() - t0) * 1e-6;
    policy_cands *c = NULL;
    if (policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &c) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
    if ((st = reinforce_shortlist(r, c)) != PL_OK) die("shortlist", st, "");
    res.best = reinforce_best_cost(r);
    int fi = policy_cands_best_with_prefix(c, "rl favourite");
    res.fav = c->items[fi].ev.cost_us;
    res.node_dev = malloc(sizeof(int) * (size_t)ss->g->n_nodes);
    memcpy(res.node_dev, c->items[0].node_dev, sizeof(int) * (size_t)ss->g->n_nodes);
    policy_cands_destroy(c);
    if (keep) *keep = r;
    else reinforce_destroy(r);
    return res;
}

typedef struct {
    char name[64];
    int sims;
    int n;                    /* seeds (1 for deterministic methods) */
    double best[MAX_SEEDS];   /* best found per seed */
    double fav[MAX_SEEDS];    /* favourite (RL), NAN otherwise */
    double wall[MAX_SEEDS];
} row;

static double mean_of(const double *x, int n) {
    double s = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(x[i])) { s += x[i]; k++; }
    return k ? s / k : NAN;
}
static double min_of(const double *x, int n) {
    double m = INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] < m) m = x[i];
    return m;
}
static double max_of(const double *x, int n) {
    double m = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > m) m = x[i];
    return m;
}

static double cand_best(const policy_cands *c, const char *prefix) {
    int i = policy_cands_best_with_prefix(c, prefix);
    return i < 0 ? NAN : c->items[i].ev.cost_us;
}

static void gap_cell(char *buf, size_t len, double v, double ref) {
    if (isnan(v)) snprintf(buf, len, "-");
    else if (v >= 0.999 * POLICY_OOM_PENALTY_US) snprintf(buf, len, "OOM");
    else snprintf(buf, len, "%.2f", 100.0 * (v / ref - 1.0));
}

/* Summary across problems: gap mean / worst per method (filled by bench_problem). */
static double g_sum_mean[N_PROBLEMS][N_RL + 8], g_sum_worst[N_PROBLEMS][N_RL + 8];
static char g_sum_name[N_RL + 8][64];
static int g_sum_rows;

static void bench_problem(int pi, int seeds, int threads, const char *out_dir) {
    const problem *P = &PROBLEMS[pi];
    policy_session *sn = spec_session(P->config, P->spec, P->m, GROUPING_LEARNED, threads);
    policy_session *sc = spec_session(P->config, P->spec, P->m, GROUPING_COLOCATE, threads);
    printf("\n### %s: %s, m=%d 1F1B (%d nodes, %d co-location groups)\n\n", P->name, P->desc, P->m, sn->g->n_nodes,
           sc->gr->n_groups);
    fflush(stdout);
    row rows[N_RL + 8];
    int nr = 0;
    curve *cv = calloc((size_t)N_RL * seeds, sizeof *cv);
    for (int k = 0; k < N_RL; k++) {
        row *r = &rows[nr++];
        snprintf(r->name, sizeof r->name, "%s", RL[k].name);
        r->sims = g_updates * SAMPLES;
        r->n = method_on(RL[k].name) ? seeds : 0;
        for (int s = 0; s < r->n; s++) {
            policy_session *ss = RL[k].grouper == GROUPER_NONE ? sc : sn;
            rl_result x = run_rl(ss, &RL[k], g_seed_base + s + 1, &cv[(size_t)k * seeds + s], NULL);
            r->best[s] = x.best;
            r->fav[s] = x.fav;
            r->wall[s] = x.wall;
            if (g_print_best) {
                char text[4096];
                placement_format(x.node_dev, ss->g->n_nodes, text, sizeof text);
                fprintf(stderr, "learned_grouping: %s %s seed %d: %.3f ms: %s\n", P->name, RL[k].name, g_seed_base + s + 1,
                        x.best * 1e-3, text);
            }
            free(x.node_dev);
        }
        if (r->n) fprintf(stderr, "learned_grouping: %s %s done\n", P->name, RL[k].name);
    }
    /* budgeted searches over node placements */
    const char *sname[3] = {"random (10x budget)", "anneal", "local"};
    for (int q = 0; q < 3 && !g_no_search; q++) {
        row *r = &rows[nr++];
        snprintf(r->name, sizeof r->name, "%s", sname[q]);
        r->sims = q == 0 ? 10 * BUDGET : BUDGET;
        r->n = seeds;
        for (int s = 0; s < seeds; s++) {
            policy_cands *c = NULL;
            if (policy_cands_create(sn->g->n_nodes, sn->gr->n_groups, &c) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
            search_budget b = {r->sims, SAMPLES, (uint64_t)(s + 1), NULL};
            double t0 = pl_now_us();
            pl_status st = q == 0 ? search_random(sn->ev, &b, c) : q == 1 ? search_anneal(sn->ev, &b, c)
                                                                          : search_local(sn->ev, &b, c);
            if (st != PL_OK) die(sname[q], st, "");
            r->wall[s] = (pl_now_us() - t0) * 1e-6;
            r->best[s] = c->items[policy_cands_best(c)].ev.cost_us;
            r->fav[s] = NAN;
            policy_cands_destroy(c);
        }
    }
    /* deterministic baselines */
    if (g_no_search) goto rows_done;
    policy_cands *c = NULL;
    if (policy_cands_create(sn->g->n_nodes, sn->gr->n_groups, &c) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
    char msg[256] = "";
    double t0 = pl_now_us();
    pl_status st;
    if ((st = search_single(sn->ev, c)) != PL_OK || (st = search_human(sn->ev, c)) != PL_OK) die("baselines", st, "");
    double t_dp = pl_now_us();
    if ((st = search_dp(sn->ev, c, NULL)) != PL_OK) die("dp", st, "");
    double t_etf = pl_now_us();
    if ((st = search_etf(sn->ev, c)) != PL_OK) die("m-etf", st, "");
    double t_sct = pl_now_us();
    int have_sct = search_sct_available();
    if (have_sct && (st = search_sct(sn->ev, c, msg, sizeof msg)) != PL_OK) die("m-sct", st, msg);
    double t_end = pl_now_us();
    struct { const char *name, *prefix; double wall; } det[] = {
        {"DP (node chain)", "dp (", (t_etf - t_dp) * 1e-6}, {"m-ETF", "m-etf", (t_sct - t_etf) * 1e-6},
        {"m-SCT", "m-sct", (t_end - t_sct) * 1e-6},        {"best human split", "human", (t_dp - t0) * 1e-6},
        {"best single device", "single", 0}};
    for (int q = 0; q < 5; q++) {
        if (q == 2 && !have_sct) continue;
        row *r = &rows[nr++];
        snprintf(r->name, sizeof r->name, "%s", det[q].name);
        r->sims = 0;
        r->n = 1;
        r->best[0] = cand_best(c, det[q].prefix);
        r->fav[0] = NAN;
        r->wall[0] = det[q].wall;
    }
    policy_cands_destroy(c);
rows_done:;
    double best_any = g_ref_ms > 0 ? g_ref_ms * 1e3 : INFINITY;
    for (int i = 0; i < nr; i++)
        if (rows[i].n == 0) rows[i].best[0] = rows[i].fav[0] = rows[i].wall[0] = NAN;
    for (int i = 0; i < nr; i++)
        for (int s = 0; s < rows[i].n; s++)
            if (rows[i].best[s] < best_any) best_any = rows[i].best[s];
    printf("best placement any method found: %.3f ms\n\n", best_any * 1e-3);
    printf("| placer | simulations | best found, mean (ms) | gap mean / worst (%%) | favourite gap mean / worst (%%) "
           "| wall (s, mean) | best seed (ms) |\n|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nr; i++) {
        row *r = &rows[i];
        char gm[32], gw[32], fm[32] = "-", fw[32] = "-";
        snprintf(g_sum_name[i], sizeof g_sum_name[i], "%s", r->name);
        g_sum_mean[pi][i] = g_sum_worst[pi][i] = NAN;
        if (r->n == 0) continue; /* not run (--methods) */
        gap_cell(gm, sizeof gm, mean_of(r->best, r->n), best_any);
        gap_cell(gw, sizeof gw, max_of(r->best, r->n), best_any);
        if (!isnan(r->fav[0])) {
            gap_cell(fm, sizeof fm, mean_of(r->fav, r->n), best_any);
            gap_cell(fw, sizeof fw, max_of(r->fav, r->n), best_any);
        }
        printf("| %s | %d | %.3f | %s / %s | %s / %s | %.2f | %.3f |\n", r->name, r->sims,
               mean_of(r->best, r->n) * 1e-3, gm, gw, fm, fw, mean_of(r->wall, r->n), min_of(r->best, r->n) * 1e-3);
        g_sum_mean[pi][i] = 100.0 * (mean_of(r->best, r->n) / best_any - 1.0);
        g_sum_worst[pi][i] = 100.0 * (max_of(r->best, r->n) / best_any - 1.0);
    }
    g_sum_rows = nr;
    fflush(stdout);
    /* learning curves: mean over seeds of the best so far */
    if (out_dir) {
        char path[1024];
        snprintf(path, sizeof path, "%s/curves_%s.csv", out_dir, P->name);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "update,evaluations");
            for (int k = 0; k < N_RL; k++) fprintf(f, ",%s", RL[k].name);
            fprintf(f, "\n");
            for (int u = 0; u < g_updates; u++) {
                fprintf(f, "%d,%d", u, (u + 1) * SAMPLES);
                for (int k = 0; k < N_RL; k++) {
                    if (!method_on(RL[k].name)) {
                        fprintf(f, ",");
                        continue;
                    }
                    double s = 0;
                    for (int q = 0; q < seeds; q++) s += cv[(size_t)k * seeds + q].best[u];
                    fprintf(f, ",%.3f", s / seeds * 1e-3);
                }
                fprintf(f, "\n");
            }
            fclose(f);
        } else {
            fprintf(stderr, "learned_grouping: cannot write %s: %s\n", path, strerror(errno));
        }
    }
    free(cv);
    policy_session_close(sn);
    policy_session_close(sc);
}

/* The parallel-residual 6-layer GPT on the h200x2-nvlink spec: learned vs
 * contiguous vs human, with the trace of the best learned placement. */
static void bench_parallel_h200x2(int seeds, int threads, const char *out_dir) {
    policy_session *sn = spec_session("default,parallel=1", "h200x2-nvlink", 4, GROUPING_LEARNED, threads);
    printf("\n### Parallel-residual 6-layer GPT on the h200x2-nvlink spec, m=4 1F1B\n\n");
    policy_cands *c = NULL;
    if (policy_cands_create(sn->g->n_nodes, sn->gr->n_groups, &c) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
    pl_status st;
    if ((st = search_human(sn->ev, c)) != PL_OK || (st = search_dp(sn->ev, c, NULL)) != PL_OK ||
        (st = search_single(sn->ev, c)) != PL_OK)
        die("baselines", st, "");
    double best = INFINITY;
    int *best_nd = NULL;
    char best_name[64] = "";
    for (int k = 2; k < N_RL; k++)
        for (int s = 0; s < seeds; s++) {
            rl_result x = run_rl(sn, &RL[k], s + 1, NULL, NULL);
            if (x.best < best) {
                best = x.best;
                free(best_nd);
                best_nd = x.node_dev;
                snprintf(best_name, sizeof best_name, "%s seed %d", RL[k].name, s + 1);
            } else {
                free(x.node_dev);
            }
        }
    double dp = cand_best(c, "dp ("), human = cand_best(c, "human"), single = cand_best(c, "single");
    char text[1024];
    placement_format(best_nd, sn->g->n_nodes, text, sizeof text);
    printf("| placement | step (ms) | vs best learned |\n|---|---|---|\n");
    printf("| best learned (%s) | %.3f | - |\n", best_name, best * 1e-3);
    printf("| DP, best contiguous split | %.3f | %+.2f%% |\n", dp * 1e-3, 100 * (dp / best - 1));
    printf("| best human split (%s) | %.3f | %+.2f%% |\n", c->items[policy_cands_best_with_prefix(c, "human")].label,
           human * 1e-3, 100 * (human / best - 1));
    printf("| best single device | %.3f | %+.2f%% |\n\n", single * 1e-3, 100 * (single / best - 1));
    printf("best learned placement (nodes): %s\n\n", text);
    if (out_dir) {
        sim_ctx *ctx = NULL;
        if ((st = sim_ctx_create(sn->g, sn->p, 4, &ctx)) != PL_OK || (st = sim_ctx_set_trace(ctx, 1)) != PL_OK)
            die("sim", st, "");
        sim_result res;
        if ((st = sim_run(ctx, best_nd, &sn->pb.sched, sn->pb.caps, &sn->pb.prm, &res)) != PL_OK) die("sim", st, "");
        char path[1024];
        snprintf(path, sizeof path, "%s/trace_par6_h200x2.json", out_dir);
        FILE *f = fopen(path, "w");
        if (f) {
            sim_write_chrome_trace(ctx, f);
            fclose(f);
            printf("trace of the best learned placement: %s (%.3f ms, %d transfers)\n\n", path, res.step_us * 1e-3,
                   res.n_transfers);
        }
        sim_ctx_destroy(ctx);
    }
    free(best_nd);
    policy_cands_destroy(c);
    policy_session_close(sn);
}

/* Train on the h200x2-nvlink spec, evaluate the shortlist on the measured
 * data/h200x2.db. */
static void bench_transfer(int seeds, int threads, const char *data_dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/h200x2.db", data_dir);
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        printf("\n(transfer experiment skipped: %s not found)\n", path);
        return;
    }
    fclose(probe);
    policy_session_options so;
    policy_session_options_default(&so);
    so.db_path = path;
    so.micro_batches = 4;
    so.order = SCHED_1F1B;
    so.groups = GROUPING_LEARNED;
    so.threads = threads;
    policy_session *meas = NULL;
    char msg[512];
    pl_status st = policy_session_open(&so, &meas, msg, sizeof msg);
    if (st != PL_OK) die(path, st, msg);
    policy_session *spec = spec_session("default", "h200x2-nvlink", 4, GROUPING_LEARNED, threads);
    printf("\n### Train on one machine, evaluate on another: EAGLE (REINFORCE) trained on the h200x2-nvlink spec, "
           "shortlist re-evaluated on the measured h200x2 profile (%s simulator parameters), default GPT, 40 nodes, "
           "m=4 1F1B\n\n", meas->n_sim_params ? "calibrated" : "neutral");
    policy_cands *c = NULL;
    if (policy_cands_create(meas->g->n_nodes, meas->gr->n_groups, &c) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
    if ((st = search_dp(meas->ev, c, NULL)) != PL_OK || (st = search_human(meas->ev, c)) != PL_OK ||
        (st = search_single(meas->ev, c)) != PL_OK)
        die("baselines", st, "");
    double dp = cand_best(c, "dp ("), human = cand_best(c, "human");
    printf("| seed | spec: best found (ms) | measured: spec-trained shortlist's best (ms) | measured: EAGLE trained "
           "there (ms) | measured: DP (ms) | measured: best human (ms) | gain over human carried over |\n"
           "|---|---|---|---|---|---|---|\n");
    for (int s = 0; s < seeds; s++) {
        reinforce *r = NULL;
        rl_result x = run_rl(spec, &RL[4], s + 1, NULL, &r);
        policy_cands *sl = NULL;
        if (policy_cands_create(spec->g->n_nodes, spec->gr->n_groups, &sl) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
        if ((st = reinforce_shortlist(r, sl)) != PL_OK) die("shortlist", st, "");
        double on_meas = INFINITY;
        for (int i = 0; i < sl->n; i++) {
            policy_eval e;
            if ((st = policy_evaluate_nodes(meas->ev, sl->items[i].node_dev, 1, &e)) != PL_OK) die("eval", st, "");
            if (e.cost_us < on_meas) on_meas = e.cost_us;
        }
        rl_result y = run_rl(meas, &RL[4], s + 1, NULL, NULL);
        double direct = y.best < dp ? y.best : dp; /* best known on the measured profile */
        double carried = human > direct ? (human - on_meas) / (human - direct) : NAN;
        printf("| %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.0f%% |\n", s + 1, x.best * 1e-3, on_meas * 1e-3,
               y.best * 1e-3, dp * 1e-3, human * 1e-3, 100 * carried);
        free(x.node_dev);
        free(y.node_dev);
        policy_cands_destroy(sl);
        reinforce_destroy(r);
    }
    printf("\n(gain carried over = (human - spec-trained on measured) / (human - best of DP and direct training on "
           "measured))\n");
    policy_cands_destroy(c);
    policy_session_close(meas);
    policy_session_close(spec);
}

/* 1 when name is one of the comma-separated words of list. */
static int in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && !strncmp(p, name, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *out_dir = "learned-grouping", *only = NULL, *data_dir = PLACER_SOURCE_DIR "/data";
    int seeds = 5, threads = 0, extra = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_dir = argv[++i];
        else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) data_dir = argv[++i];
        else if (!strcmp(argv[i], "--no-extra")) extra = 0;
        else if (!strcmp(argv[i], "--methods") && i + 1 < argc) g_methods = argv[++i];
        else if (!strcmp(argv[i], "--no-search")) g_no_search = 1;
        else if (!strcmp(argv[i], "--ref-ms") && i + 1 < argc) g_ref_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--variant-coloc")) g_var.coloc = 1;
        else if (!strcmp(argv[i], "--pipe-prior") && i + 1 < argc) g_var.pipe_prior = atof(argv[++i]);
        else if (!strcmp(argv[i], "--group-prior") && i + 1 < argc) g_var.group_prior = atof(argv[++i]);
        else if (!strcmp(argv[i], "--lr") && i + 1 < argc) g_var.lr = atof(argv[++i]);
        else if (!strcmp(argv[i], "--entropy") && i + 1 < argc) g_var.entropy = atof(argv[++i]);
        else if (!strcmp(argv[i], "--prior-stay") && i + 1 < argc) g_var.stay = atof(argv[++i]);
        else if (!strcmp(argv[i], "--ppo-epochs") && i + 1 < argc) g_var.ppo_epochs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pipe-devices") && i + 1 < argc) {
            reinforce_pipe_devices pd;
            if (reinforce_parse_pipe_devices(argv[++i], &pd, NULL, 0) != PL_OK) {
                fprintf(stderr, "learned_grouping: --pipe-devices takes all or estimate\n");
                return 2;
            }
            g_var.pipe_devices = (int)pd;
        }
        else if (!strcmp(argv[i], "--pipe-anneal")) g_var.pipe_anneal = 1;
        else if (!strcmp(argv[i], "--print-best")) g_print_best = 1;
        else if (!strcmp(argv[i], "--updates") && i + 1 < argc) {
            g_updates = atoi(argv[++i]);
            if (g_updates < 1 || g_updates > MAX_UPDATES) {
                fprintf(stderr, "learned_grouping: --updates must be 1..%d\n", MAX_UPDATES);
                return 2;
            }
        }
        else if (!strcmp(argv[i], "--seed-base") && i + 1 < argc) g_seed_base = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--baseline-loo")) g_var.loo = 1;
        else if (!strcmp(argv[i], "--lr-decay") && i + 1 < argc) g_var.lr_decay = atof(argv[++i]);
        else if (!strcmp(argv[i], "--entropy-decay") && i + 1 < argc) g_var.entropy_decay = atof(argv[++i]);
        else if (!strcmp(argv[i], "--n-groups") && i + 1 < argc) {
            const char *v = argv[++i];
            g_var.n_groups_set = 1;
            g_var.n_groups = strcmp(v, "auto") ? atoi(v) : 0;
        }
        else {
            fprintf(stderr, "usage: learned_grouping [--out DIR] [--seeds N] [--threads N] [--only NAME] [--no-extra] "
                            "[--data DIR] [--methods LIST] [--no-search] [--ref-ms X] [--variant-coloc] [--pipe-prior X] "
                            "[--n-groups G|auto] [--group-prior X] [--ppo-epochs N] [--lr X] [--entropy X] "
                            "[--prior-stay P] [--pipe-devices all|estimate] [--pipe-anneal] [--baseline-loo] "
                            "[--lr-decay F] [--entropy-decay F] [--print-best] [--seed-base B] [--updates N]\n");
            return 2;
        }
    }
    if (seeds < 1 || seeds > MAX_SEEDS) {
        fprintf(stderr, "learned_grouping: --seeds must be 1..%d\n", MAX_SEEDS);
        return 2;
    }
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "learned_grouping: cannot create %s: %s\n", out_dir, strerror(errno));
        return 1;
    }
    double t0 = pl_now_us();
    printf("## Learned grouping, PPO and baselines (%d seeds, %d x %d simulations per RL run)\n", seeds, g_updates,
           SAMPLES);
    int done[N_PROBLEMS] = {0};
    for (int p = 0; p < N_PROBLEMS; p++) {
        if (only && !in_list(only, PROBLEMS[p].name)) continue;
        bench_problem(p, seeds, threads, out_dir);
        done[p] = 1;
    }
    /* summary and the bar */
    int nd = 0;
    for (int p = 0; p < N_PROBLEMS; p++) nd += done[p];
    if (nd > 0) {
        printf("\n### Summary: gap to the best placement any method found, mean / worst over seeds (%%)\n\n| placer |");
        for (int p = 0; p < N_PROBLEMS; p++)
            if (done[p]) printf(" %s |", PROBLEMS[p].name);
        printf("\n|---|");
        for (int p = 0; p < N_PROBLEMS; p++)
            if (done[p]) printf("---|");
        printf("\n");
        for (int i = 0; i < g_sum_rows; i++) {
            if (i < N_RL && !method_on(RL[i].name)) continue;
            printf("| %s |", g_sum_name[i]);
            for (int p = 0; p < N_PROBLEMS; p++)
                if (done[p]) printf(" %.2f / %.2f |", g_sum_mean[p][i], g_sum_worst[p][i]);
            printf("\n");
        }
        /* the bar: hier or EAGLE (either algorithm; best mean) within 1% on >= 3 of 4, and better than ColocRL
         * (best of its two algorithms) on >= 3 of 4 */
        int within = 0, beats = 0;
        for (int p = 0; p < N_PROBLEMS; p++) {
            if (!done[p]) continue;
            double learned = INFINITY, coloc = INFINITY;
            for (int k = 2; k < N_RL; k++) learned = fmin(learned, g_sum_mean[p][k]);
            for (int k = 0; k < 2; k++) coloc = fmin(coloc, g_sum_mean[p][k]);
            within += learned <= 1.0;
            beats += learned < coloc;
        }
        printf("\nIssue bar: the best of hier/EAGLE (mean over seeds) is within 1%% of the best found on %d of %d "
               "problems, and better than ColocRL's best on %d of %d.\n",
               within, nd, beats, nd);
    }
    if (extra && (!only || in_list(only, "extra"))) {
        bench_parallel_h200x2(seeds, threads, out_dir);
        bench_transfer(seeds, threads, data_dir);
    }
    printf("\nwhole benchmark: %.1f s\n", (pl_now_us() - t0) * 1e-6);
    return 0;
}
