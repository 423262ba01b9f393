/*
 * transfer_matrix: train on one machine, evaluate on another (issue 36).
 * How much of a learned placer's gain over the baselines survives a move
 * to another machine, and how many updates on the new machine a policy
 * trained on the old one saves.
 *
 * For every graph (default: the 49M GPT and gpt12, 163M), every setting
 *   A  m = 1, gpipe
 *   B  m = 4, 1F1B
 *   C  m = 1, gpipe, each machine's cap at 3/4 of its best single device's
 *      peak (bytes; so a single device runs out of memory)
 * and every machine M whose database holds the graph's profile:
 *   - the baselines (every single device, every human split; the best of
 *     them is M's best baseline) and M's own best: the lowest of the
 *     exhaustive optimum over the co-location groups (where it needs at
 *     most --max-exhaustive simulations), the DP over groups and over
 *     nodes, and the best placement any of M's own training runs found;
 *   - the two placers trained on M, --seeds seeds each, --updates x
 *     --samples: REINFORCE over the co-location groups (the 2017 placer),
 *     and EAGLE with PPO over the nodes with the setting of
 *     benchmarks/policy/README.md's third pass (VEL: pipeline prior 8,
 *     group prior 8, --pipe-devices estimate, leave-one-out baseline,
 *     G = 4 x devices).
 * Then for every ordered pair (S, T), S != T, per placer and seed:
 *   (a) zero-shot: S's shortlist (its top --top-k distinct placements by
 *       S's prediction, the list `placer train` prints) mapped to T
 *       (policy/transfer.h: by speed rank, the default, and by rank order)
 *       and simulated on T; S's placement on T is the best of them there
 *       (and, beside it, S's own top pick);
 *   (b) with equal device counts, S's policy fine-tuned on T for
 *       --finetune updates (reinforce_create_transferred, the speed map)
 *       against T's own run of the same seed after as many updates (the
 *       first --finetune updates of a run of the same options: no option
 *       of these runs depends on the target), and the updates saved
 *       (transfer_updates_saved against T's whole run);
 *   (c) T's best baseline and T's own best (above).
 * Gain retained = (T's best baseline - S's placement on T) / (T's best
 * baseline - T's best), n/a where T's best is within 0.5% of its best
 * baseline; mean and 95% t-interval over the seeds.
 *
 * usage: transfer_matrix --machine NAME=DB [--machine ...] [--graphs default,gpt12]
 *                        [--settings A,B,C] [--placers reinforce,eagle] [--seeds 3]
 *                        [--updates 250] [--samples 8] [--finetune 50] [--top-k 5]
 *                        [--threads N] [--max-exhaustive 3e6] [--out DIR]
 * Markdown on stdout; DIR/transfer-matrix.tsv (one row per graph, setting,
 * placer and ordered pair: what `placer report --transfer` draws) and
 * DIR/transfer-cells.tsv (one row per seed).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "placement.h"
#include "reinforce.h"
#include "search.h"
#include "session.h"
#include "transfer.h"
#include "util.h"

#define MAX_MACHINES 8
#define MAX_SEEDS 10
#define N_PLACERS 2

typedef struct {
    char name[64];
    char path[1024];
    int n_perm;                  /* 0, or the devices of perm */
    int perm[SIM_MAX_DEVICES];   /* DB's device d is this machine's perm[d] (NAME=DB@p0,p1,...) */
} machine_src;

typedef struct {
    machine_src m[MAX_MACHINES];
    int n_machines;
    char graphs[256];
    char settings[16];
    int placers[N_PLACERS]; /* which of reinforce, eagle run */
    int seeds, updates, samples, finetune, top_k, threads;
    double max_exhaustive;
    const char *out_dir;
} bench_opts;

static const char *const PLACER_NAME[N_PLACERS] = {"REINFORCE", "EAGLE PPO"};
static const char *const PLACER_SLUG[N_PLACERS] = {"reinforce", "eagle-ppo"};

static void die(const char *what, pl_status st, const char *msg) {
    fprintf(stderr, "transfer_matrix: %s: %s (%s)\n", what, msg && *msg ? msg : "", pl_status_str(st));
    exit(1);
}

static void *xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz);
    if (!p) die("alloc", PL_ERR_NOMEM, "out of memory");
    return p;
}

/* ---- one machine in one (graph, setting) --------------------------------- */

typedef struct {
    double *curve;   /* updates: best cost so far after each update */
    void *blob;      /* the final checkpoint */
    size_t blob_n;
    int n_short;     /* shortlist */
    int *short_dev;  /* n_short * n_nodes */
    double *short_us;
    double best_us;  /* best found */
    double wall_s;
} run_state;

typedef struct {
    int present;
    policy_session *ss[N_PLACERS]; /* [0] co-location groups, [1] nodes */
    int n_dev;
    int64_t cap;                   /* setting C's cap (0: none) */
    double base_us;                /* best baseline (single or human) */
    char base_label[POLICY_LABEL_LEN];
    double best_us;                /* own best */
    char best_label[POLICY_LABEL_LEN];
    double dp_us, exh_us;          /* NAN when not run */
    run_state run[N_PLACERS][MAX_SEEDS];
} machine_state;

static policy_session *open_session(const machine_src *src, const char *config, grouping_mode gm, int m,
                                    schedule_order o, int64_t cap, int threads) {
    policy_session_options so;
    policy_session_options_default(&so);
    char cap_text[32];
    so.db_path = src->path;
    so.config = config;
    so.groups = gm;
    so.micro_batches = m;
    so.order = o;
    so.threads = threads;
    if (cap > 0) {
        snprintf(cap_text, sizeof cap_text, "%lld", (long long)cap);
        so.mem_cap = cap_text;
    }
    policy_session *ss = NULL;
    char msg[512];
    pl_status st = policy_session_open(&so, &ss, msg, sizeof msg);
    if (st != PL_OK) die(src->name, st, msg);
    if (src->n_perm) { /* the same machine listed in another device order */
        if (src->n_perm != ss->p->n_devices) die(src->name, PL_ERR_INVALID, "the relabelling has another device count");
        profile_data *q = NULL;
        if ((st = transfer_profile_relabel(ss->p, src->perm, &q)) != PL_OK) die(src->name, st, "relabel");
        snprintf(q->machine, sizeof q->machine, "%s", src->name);
        gpt_config cfg = ss->cfg;
        policy_session_close(ss);
        so.db_path = NULL;
        ss = NULL;
        st = policy_session_from_profile(&so, &cfg, q, &ss, msg, sizeof msg);
        profile_data_destroy(q);
        if (st != PL_OK) die(src->name, st, msg);
    }
    return ss;
}

/* Does the database hold a profile of the graph? */
static int has_graph(const machine_src *src, const char *config) {
    policy_session_options so;
    policy_session_options_default(&so);
    so.db_path = src->path;
    so.config = config;
    so.threads = 1;
    policy_session *ss = NULL;
    char msg[512];
    pl_status st = policy_session_open(&so, &ss, msg, sizeof msg);
    policy_session_close(ss);
    return st == PL_OK;
}

typedef struct {
    double *best;
    int n;
} curve_ctx;

static int on_update(void *ud, const reinforce_progress *p) {
    curve_ctx *c = ud;
    if (p->update >= 0 && p->update < c->n) c->best[p->update] = p->best_us;
    return 0;
}

static void placer_options(int placer, int n_dev, uint64_t seed, int updates, int samples, reinforce_options *ro) {
    reinforce_options_default(ro);
    ro->seed = seed;
    ro->updates = updates;
    ro->samples = samples;
    if (placer == 1) { /* EAGLE PPO, VEL */
        ro->grouper = GROUPER_EAGLE;
        ro->algo = ALGO_PPO;
        ro->pipe_prior = 8;
        ro->group_prior = 8;
        ro->pipe_devices = PIPE_DEVICES_ESTIMATE;
        ro->baseline = BASELINE_LOO;
        ro->n_groups = 4 * n_dev;
    }
}

/* Train one placer on one machine; keep its curve, checkpoint and shortlist. */
static void train_one(const bench_opts *bo, machine_state *ms, int placer, int seed, run_state *rs) {
    policy_session *ss = ms->ss[placer];
    reinforce_options ro;
    placer_options(placer, ms->n_dev, (uint64_t)seed, bo->updates, bo->samples, &ro);
    reinforce *r = NULL;
    char msg[512];
    pl_status st = reinforce_create(ss->ev, &ro, &r, msg, sizeof msg);
    if (st != PL_OK) die("reinforce_create", st, msg);
    rs->curve = xcalloc((size_t)bo->updates, sizeof *rs->curve);
    curve_ctx cc = {rs->curve, bo->updates};
    double t0 = pl_now_us();
    st = reinforce_train(r, NULL, 0, on_update, &cc, msg, sizeof msg);
    rs->wall_s = (pl_now_us() - t0) * 1e-6;
    if (st != PL_OK) die("reinforce_train", st, msg);
    rs->best_us = reinforce_best_cost(r);
    if ((st = reinforce_serialize(r, &rs->blob, &rs->blob_n)) != PL_OK) die("serialize", st, "");
    policy_cands *l = NULL;
    if (policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &l) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
    if ((st = reinforce_shortlist(r, l)) != PL_OK) die("shortlist", st, "");
    const int N = ss->g->n_nodes;
    rs->short_dev = xcalloc((size_t)l->n * (size_t)N, sizeof *rs->short_dev);
    rs->short_us = xcalloc((size_t)l->n, sizeof *rs->short_us);
    for (int i = 0; i < l->n && rs->n_short < bo->top_k; i++) {
        if (!strcmp(l->items[i].label, "rl favourite")) continue; /* the stored list has no favourite */
        memcpy(rs->short_dev + (size_t)rs->n_short * N, l->items[i].node_dev, sizeof(int) * (size_t)N);
        rs->short_us[rs->n_short++] = l->items[i].ev.cost_us;
    }
    policy_cands_destroy(l);
    reinforce_destroy(r);
}

static void free_run(run_state *rs) {
    free(rs->curve);
    free(rs->blob);
    free(rs->short_dev);
    free(rs->short_us);
    memset(rs, 0, sizeof *rs);
}

/* The baselines and the searches of one machine (the runs are added later). */
static void machine_baselines(const bench_opts *bo, machine_state *ms) {
    policy_session *ss = ms->ss[0];
    policy_cands *c = NULL;
    if (policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &c) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
    pl_status st;
    if ((st = search_single(ss->ev, c)) != PL_OK || (st = search_human(ss->ev, c)) != PL_OK)
        die("baselines", st, "");
    ms->base_us = INFINITY;
    for (int i = 0; i < c->n; i++)
        if (!c->items[i].ev.oom && c->items[i].ev.cost_us < ms->base_us) {
            ms->base_us = c->items[i].ev.cost_us;
            snprintf(ms->base_label, sizeof ms->base_label, "%s", c->items[i].label);
        }
    policy_cands_destroy(c);
    ms->best_us = INFINITY;
    ms->dp_us = INFINITY;
    for (int k = 0; k < N_PLACERS; k++) {
        policy_session *s2 = ms->ss[k];
        if (policy_cands_create(s2->g->n_nodes, s2->gr->n_groups, &c) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
        if ((st = search_dp(s2->ev, c, NULL)) != PL_OK) die("dp", st, "");
        int b = policy_cands_best(c);
        if (b >= 0 && !c->items[b].ev.oom && c->items[b].ev.cost_us < ms->dp_us) ms->dp_us = c->items[b].ev.cost_us;
        if (b >= 0 && !c->items[b].ev.oom && c->items[b].ev.cost_us < ms->best_us) {
            ms->best_us = c->items[b].ev.cost_us;
            snprintf(ms->best_label, sizeof ms->best_label, "dp over %s", k ? "nodes" : "groups");
        }
        policy_cands_destroy(c);
    }
    ms->exh_us = NAN;
    if (policy_cands_create(ss->g->n_nodes, ss->gr->n_groups, &c) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
    char msg[512];
    search_exhaustive_info xi;
    st = search_exhaustive(ss->ev, bo->max_exhaustive, c, &xi, msg, sizeof msg);
    if (st == PL_OK) {
        for (int i = 0; i < c->n; i++)
            if (!c->items[i].ev.oom && (isnan(ms->exh_us) || c->items[i].ev.cost_us < ms->exh_us))
                ms->exh_us = c->items[i].ev.cost_us;
        if (ms->exh_us < ms->best_us) {
            ms->best_us = ms->exh_us;
            snprintf(ms->best_label, sizeof ms->best_label, "exhaustive");
        }
    } else if (st != PL_ERR_INVALID) {
        die("exhaustive", st, msg);
    }
    policy_cands_destroy(c);
}

/* ---- statistics ----------------------------------------------------------- */

/* Two-sided 95% Student t quantile for dof 1..9 (and the normal's above). */
static double t95(int dof) {
    static const double t[] = {NAN, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262};
    return dof >= 1 && dof <= 9 ? t[dof] : 1.96;
}

typedef struct {
    int n;       /* values */
    double mean, lo, hi;
} interval;

static interval mean_ci(const double *x, int n) {
    interval r = {0, NAN, NAN, NAN};
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i])) {
            s += x[i];
            r.n++;
        }
    if (r.n == 0) return r;
    r.mean = s / r.n;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i])) ss += (x[i] - r.mean) * (x[i] - r.mean);
    if (r.n > 1) {
        double h = t95(r.n - 1) * sqrt(ss / (r.n - 1)) / sqrt((double)r.n);
        r.lo = r.mean - h;
        r.hi = r.mean + h;
    } else {
        r.lo = r.hi = r.mean;
    }
    return r;
}

/* ---- one pair --------------------------------------------------------------- */

typedef struct {
    double top1_us[2], best_us[2]; /* [speed, rank]: S's top pick and best of its shortlist on T (cost) */
    int oom[2];                    /* the best of the shortlist ran out of memory on T */
    int same_map;                  /* the two maps placed every shortlisted placement alike */
    double ft_us, scratch_us;      /* after --finetune updates (NAN: unequal counts) */
    double zero_us;                /* the fine-tune's first update's best: the transferred policy's samples */
    int u_ft, u_scratch;
    double saved;
} cell;

static void zero_shot(const bench_opts *bo, machine_state *S, machine_state *T, const run_state *rs, cell *c) {
    const policy_problem *sp = policy_evaluator_problem(S->ss[0]->ev);
    const policy_problem *tp = policy_evaluator_problem(T->ss[0]->ev);
    const int N = sp->g->n_nodes;
    int *dst = xcalloc((size_t)N * 2, sizeof *dst);
    char msg[512];
    c->same_map = 1;
    for (int m = 0; m < 2; m++) {
        c->best_us[m] = INFINITY;
        c->top1_us[m] = NAN;
        c->oom[m] = 1;
    }
    for (int i = 0; i < rs->n_short; i++) {
        for (int m = 0; m < 2; m++) {
            pl_status st = PL_OK;
            if (S == T) /* T's own shortlist: no map */
                memcpy(dst + (size_t)m * N, rs->short_dev + (size_t)i * N, sizeof *dst * (size_t)N);
            else
                st = transfer_map_placement(m ? TRANSFER_MAP_RANK : TRANSFER_MAP_SPEED, sp, tp,
                                            rs->short_dev + (size_t)i * N, dst + (size_t)m * N, NULL, msg,
                                            sizeof msg);
            if (st != PL_OK) die("map", st, msg);
            policy_eval e;
            if ((st = policy_evaluate_nodes(T->ss[0]->ev, dst + (size_t)m * N, 1, &e)) != PL_OK)
                die("evaluate", st, "");
            if (i == 0) c->top1_us[m] = e.cost_us;
            if (e.cost_us < c->best_us[m]) {
                c->best_us[m] = e.cost_us;
                c->oom[m] = e.oom;
            }
        }
        if (memcmp(dst, dst + N, sizeof *dst * (size_t)N)) c->same_map = 0;
    }
    free(dst);
    (void)bo;
}

static void fine_tune(const bench_opts *bo, machine_state *S, machine_state *T, int placer, int seed, cell *c) {
    const run_state *src = &S->run[placer][seed];
    const run_state *own = &T->run[placer][seed];
    c->ft_us = c->scratch_us = c->zero_us = c->saved = NAN;
    c->u_ft = c->u_scratch = -1;
    if (S->n_dev != T->n_dev || bo->finetune < 1) return;
    const policy_problem *sp = policy_evaluator_problem(S->ss[placer]->ev);
    const policy_problem *tp = policy_evaluator_problem(T->ss[placer]->ev);
    int perm[SIM_MAX_DEVICES];
    char msg[512];
    double use[SIM_MAX_DEVICES] = {0}; /* nodes per device in S's best placement */
    for (int i = 0; src->n_short > 0 && i < sp->g->n_nodes; i++) use[src->short_dev[i]] += 1;
    pl_status st = transfer_policy_map(TRANSFER_MAP_SPEED, sp, tp, use, perm, msg, sizeof msg);
    if (st != PL_OK) die("policy map", st, msg);
    reinforce *r = NULL;
    st = reinforce_create_transferred(T->ss[placer]->ev, src->blob, src->blob_n, perm, bo->finetune, &r, msg,
                                      sizeof msg);
    if (st != PL_OK) die("transfer", st, msg);
    double *curve = xcalloc((size_t)bo->finetune, sizeof *curve);
    curve_ctx cc = {curve, bo->finetune};
    if ((st = reinforce_train(r, NULL, 0, on_update, &cc, msg, sizeof msg)) != PL_OK) die("fine-tune", st, msg);
    reinforce_destroy(r);
    c->zero_us = curve[0];
    c->ft_us = curve[bo->finetune - 1];
    const int n_s = bo->finetune <= bo->updates ? bo->finetune : bo->updates;
    c->scratch_us = own->curve[n_s - 1];
    c->saved = transfer_updates_saved(curve, bo->finetune, own->curve, n_s, &c->u_ft, &c->u_scratch);
    free(curve);
}

/* ---- printing ---------------------------------------------------------------- */

static const char *setting_text(char s) {
    return s == 'A' ? "m=1 gpipe" : s == 'B' ? "m=4 1f1b" : "m=1 gpipe, cap 3/4 of the best single device's peak";
}

static void fmt_ms(char *buf, size_t n, double us, int oom) {
    if (oom) snprintf(buf, n, "OOM");
    else if (!isfinite(us)) snprintf(buf, n, "-");
    else snprintf(buf, n, "%.3f", us * 1e-3);
}

static void fmt_pct(char *buf, size_t n, interval v, int n_seeds) {
    if (v.n == 0) snprintf(buf, n, "n/a");
    else if (v.n == 1 || n_seeds == 1) snprintf(buf, n, "%.0f%%", 100 * v.mean);
    else snprintf(buf, n, "%.0f%% [%.0f, %.0f]", 100 * v.mean, 100 * v.lo, 100 * v.hi);
}

/* ---- the driver ------------------------------------------------------------- */

static void run_setting(const bench_opts *bo, const char *graph, char setting, FILE *mat, FILE *cells) {
    const int M = bo->n_machines, SEEDS = bo->seeds;
    const int m = setting == 'B' ? 4 : 1;
    const schedule_order o = setting == 'B' ? SCHED_1F1B : SCHED_GPIPE;
    machine_state *ms = xcalloc((size_t)M, sizeof *ms);
    double t0 = pl_now_us();
    for (int i = 0; i < M; i++) {
        if (!has_graph(&bo->m[i], graph)) continue;
        ms[i].present = 1;
        int64_t cap = 0;
        if (setting == 'C') {
            policy_session *a = open_session(&bo->m[i], graph, GROUPING_COLOCATE, m, o, 0, bo->threads);
            policy_cands *c = NULL;
            if (policy_cands_create(a->g->n_nodes, a->gr->n_groups, &c) != PL_OK) die("alloc", PL_ERR_NOMEM, "");
            if (search_single(a->ev, c) != PL_OK) die("single", PL_ERR_INVALID, "");
            cap = (int64_t)(0.75 * (double)c->items[policy_cands_best(c)].ev.peak_bytes);
            policy_cands_destroy(c);
            policy_session_close(a);
        }
        ms[i].cap = cap;
        ms[i].ss[0] = open_session(&bo->m[i], graph, GROUPING_COLOCATE, m, o, cap, bo->threads);
        ms[i].ss[1] = open_session(&bo->m[i], graph, GROUPING_NONE, m, o, cap, bo->threads);
        ms[i].n_dev = ms[i].ss[0]->p->n_devices;
        machine_baselines(bo, &ms[i]);
        for (int p = 0; p < N_PLACERS; p++) {
            if (!bo->placers[p]) continue;
            for (int s = 0; s < SEEDS; s++) {
                train_one(bo, &ms[i], p, s + 1, &ms[i].run[p][s]);
                if (ms[i].run[p][s].best_us < ms[i].best_us) {
                    ms[i].best_us = ms[i].run[p][s].best_us;
                    snprintf(ms[i].best_label, sizeof ms[i].best_label, "%s seed %d", PLACER_NAME[p], s + 1);
                }
            }
        }
        fprintf(stderr, "transfer_matrix: %s %c %s trained (%.0f s so far)\n", graph, setting, bo->m[i].name,
                (pl_now_us() - t0) * 1e-6);
    }
    printf("\n### %s, setting %c (%s)\n\n", graph, setting, setting_text(setting));
    printf("| machine | devices | cap | best baseline (ms) | DP (ms) | exhaustive (ms) | own best (ms) | found by | "
           "gain possible |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < M; i++) {
        if (!ms[i].present) continue;
        char cap[32] = "none", dp[32], ex[32];
        if (ms[i].cap > 0) snprintf(cap, sizeof cap, "%.2f GB", (double)ms[i].cap * 1e-9);
        fmt_ms(dp, sizeof dp, ms[i].dp_us, 0);
        fmt_ms(ex, sizeof ex, ms[i].exh_us, 0);
        const double lead = (ms[i].base_us - ms[i].best_us) / ms[i].base_us;
        printf("| %s | %d | %s | %.3f (%s) | %s | %s | %.3f | %s | %.2f%%%s |\n", bo->m[i].name, ms[i].n_dev, cap,
               ms[i].base_us * 1e-3, ms[i].base_label, dp, isnan(ms[i].exh_us) ? "not run" : ex,
               ms[i].best_us * 1e-3, ms[i].best_label, 100 * lead,
               lead <= TRANSFER_NA_FRACTION ? " (n/a)" : "");
    }
    for (int p = 0; p < N_PLACERS; p++) {
        if (!bo->placers[p]) continue;
        /* the pairs */
        cell *cl = xcalloc((size_t)M * M * SEEDS, sizeof *cl);
        for (int a = 0; a < M; a++)
            for (int b = 0; b < M; b++) {
                if (!ms[a].present || !ms[b].present) continue;
                for (int s = 0; s < SEEDS; s++) {
                    cell *c = &cl[((size_t)a * M + b) * SEEDS + s];
                    zero_shot(bo, &ms[a], &ms[b], &ms[a].run[p][s], c);
                    if (a != b) fine_tune(bo, &ms[a], &ms[b], p, s, c);
                    else c->ft_us = c->scratch_us = c->zero_us = c->saved = NAN;
                }
            }
        printf("\n%s, gain retained (mean [95%% interval] over %d seeds; S's best of %d on T, ms, below; the "
               "diagonal is T's own training)\n\n| S \\ T |",
               PLACER_NAME[p], SEEDS, bo->top_k);
        for (int b = 0; b < M; b++)
            if (ms[b].present) printf(" %s |", bo->m[b].name);
        printf("\n|---|");
        for (int b = 0; b < M; b++)
            if (ms[b].present) printf("---|");
        printf("\n");
        for (int a = 0; a < M; a++) {
            if (!ms[a].present) continue;
            printf("| %s |", bo->m[a].name);
            for (int b = 0; b < M; b++) {
                if (!ms[b].present) continue;
                double g[MAX_SEEDS], gr[MAX_SEEDS], g1[MAX_SEEDS], on_t[MAX_SEEDS];
                int n_oom = 0;
                for (int s = 0; s < SEEDS; s++) {
                    const cell *c = &cl[((size_t)a * M + b) * SEEDS + s];
                    on_t[s] = c->oom[0] ? NAN : c->best_us[0];
                    n_oom += c->oom[0];
                    g[s] = c->oom[0] ? NAN : transfer_gain_retained(ms[b].base_us, c->best_us[0], ms[b].best_us);
                    gr[s] = c->oom[1] ? NAN : transfer_gain_retained(ms[b].base_us, c->best_us[1], ms[b].best_us);
                    g1[s] = transfer_gain_retained(ms[b].base_us, c->top1_us[0], ms[b].best_us);
                    fprintf(cells,
                            "%s\t%c\t%s\t%s\t%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t%.3f\t%.3f\t%d\t%d\t%.3f\t%.3f\t%.3f\t%d"
                            "\t%d\t%.4f\n",
                            graph, setting, PLACER_SLUG[p], bo->m[a].name, bo->m[b].name, s + 1, ms[b].base_us * 1e-3,
                            ms[b].best_us * 1e-3, c->top1_us[0] * 1e-3, c->best_us[0] * 1e-3, c->oom[0],
                            c->top1_us[1] * 1e-3, c->best_us[1] * 1e-3, c->oom[1], c->same_map, c->zero_us * 1e-3,
                            c->ft_us * 1e-3, c->scratch_us * 1e-3, c->u_ft, c->u_scratch, c->saved);
                }
                interval gi = mean_ci(g, SEEDS), gri = mean_ci(gr, SEEDS), g1i = mean_ci(g1, SEEDS),
                         ti = mean_ci(on_t, SEEDS);
                const int na = isnan(transfer_gain_retained(ms[b].base_us, ms[b].best_us, ms[b].best_us));
                char pct[64], ms_t[32];
                if (na) snprintf(pct, sizeof pct, "n/a");
                else fmt_pct(pct, sizeof pct, gi, SEEDS);
                fmt_ms(ms_t, sizeof ms_t, ti.mean, ti.n == 0);
                printf(" %s%s (%s) |", pct, n_oom ? " OOM" : "", ms_t);
                /* fine-tune aggregates */
                double ft[MAX_SEEDS], sc[MAX_SEEDS], sv[MAX_SEEDS], zr[MAX_SEEDS];
                for (int s = 0; s < SEEDS; s++) {
                    const cell *c = &cl[((size_t)a * M + b) * SEEDS + s];
                    ft[s] = c->ft_us;
                    sc[s] = c->scratch_us;
                    sv[s] = c->saved;
                    zr[s] = c->zero_us;
                }
                interval fti = mean_ci(ft, SEEDS), sci = mean_ci(sc, SEEDS), svi = mean_ci(sv, SEEDS),
                         zri = mean_ci(zr, SEEDS);
                fprintf(mat,
                        "%s\t%c\t%s\t%s\t%s\t%d\t%s\t%.4f\t%.4f\t%.4f\t%d\t%.4f\t%.4f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%."
                        "3f\t%d\t%.4f\n",
                        graph, setting, PLACER_SLUG[p], bo->m[a].name, bo->m[b].name, SEEDS,
                        na || gi.n == 0 ? "n/a" : "ok", gi.mean, gi.lo, gi.hi, n_oom, gri.mean, g1i.mean, ti.mean * 1e-3,
                        ms[b].base_us * 1e-3, ms[b].best_us * 1e-3, zri.mean * 1e-3, fti.mean * 1e-3, sci.mean * 1e-3,
                        ms[b].n_dev == ms[a].n_dev && a != b ? bo->finetune : 0, svi.mean);
            }
            printf("\n");
        }
        /* map rule and top pick, compact */
        printf("\n%s, the same by rank order where it differs from the speed map, and S's top pick alone "
               "(speed map):\n\n| S -> T | rank order | top pick |\n|---|---|---|\n",
               PLACER_NAME[p]);
        for (int a = 0; a < M; a++)
            for (int b = 0; b < M; b++) {
                if (!ms[a].present || !ms[b].present || a == b) continue;
                double gr[MAX_SEEDS], g1[MAX_SEEDS];
                int differs = 0;
                for (int s = 0; s < SEEDS; s++) {
                    const cell *c = &cl[((size_t)a * M + b) * SEEDS + s];
                    gr[s] = c->oom[1] ? NAN : transfer_gain_retained(ms[b].base_us, c->best_us[1], ms[b].best_us);
                    g1[s] = transfer_gain_retained(ms[b].base_us, c->top1_us[0], ms[b].best_us);
                    differs |= !c->same_map;
                }
                char r1[64], r2[64];
                fmt_pct(r2, sizeof r2, mean_ci(g1, SEEDS), SEEDS);
                if (differs) fmt_pct(r1, sizeof r1, mean_ci(gr, SEEDS), SEEDS);
                else snprintf(r1, sizeof r1, "same map");
                printf("| %s -> %s | %s | %s |\n", bo->m[a].name, bo->m[b].name, r1, r2);
            }
        /* fine-tune table */
        printf("\n%s, fine-tuning between equal device counts: %d updates on T from S's policy against %d from "
               "scratch (best found, ms, mean over seeds), and the updates saved (to reach what T's run from "
               "scratch reaches in %d updates, it needed u_s updates and the fine-tune u_f: saved = (u_s - u_f) / "
               "max(u_s, u_f); negative: updates lost; \"<=\" where some fine-tune never got there)\n\n"
               "| S -> T | first update from S | fine-tuned | from scratch | T's own, %d updates | saved |\n"
               "|---|---|---|---|---|---|\n",
               PLACER_NAME[p], bo->finetune, bo->finetune, bo->finetune, bo->updates);
        for (int a = 0; a < M; a++)
            for (int b = 0; b < M; b++) {
                if (!ms[a].present || !ms[b].present || a == b || ms[a].n_dev != ms[b].n_dev) continue;
                double ft[MAX_SEEDS], sc[MAX_SEEDS], sv[MAX_SEEDS], zr[MAX_SEEDS], own[MAX_SEEDS];
                int never = 0;
                for (int s = 0; s < SEEDS; s++) {
                    const cell *c = &cl[((size_t)a * M + b) * SEEDS + s];
                    ft[s] = c->ft_us;
                    sc[s] = c->scratch_us;
                    sv[s] = c->saved;
                    zr[s] = c->zero_us;
                    own[s] = ms[b].run[p][s].best_us;
                    never += c->u_ft < 0;
                }
                interval fti = mean_ci(ft, SEEDS), sci = mean_ci(sc, SEEDS), svi = mean_ci(sv, SEEDS),
                         zri = mean_ci(zr, SEEDS), owi = mean_ci(own, SEEDS);
                char saved[64];
                fmt_pct(saved, sizeof saved, svi, SEEDS);
                printf("| %s -> %s | %.3f | %.3f | %.3f | %.3f | %s%s |\n", bo->m[a].name, bo->m[b].name,
                       zri.mean * 1e-3, fti.mean * 1e-3, sci.mean * 1e-3, owi.mean * 1e-3, never ? "<= " : "", saved);
            }
        free(cl);
    }
    double wall[N_PLACERS] = {0};
    int nw[N_PLACERS] = {0};
    for (int i = 0; i < M; i++)
        for (int p = 0; p < N_PLACERS; p++)
            for (int s = 0; s < SEEDS; s++)
                if (ms[i].present && bo->placers[p]) {
                    wall[p] += ms[i].run[p][s].wall_s;
                    nw[p]++;
                }
    printf("\nwall time of one training run (mean): REINFORCE %.1f s, EAGLE PPO %.1f s; this setting %.0f s\n",
           nw[0] ? wall[0] / nw[0] : 0, nw[1] ? wall[1] / nw[1] : 0, (pl_now_us() - t0) * 1e-6);
    fflush(stdout);
    fflush(mat);
    fflush(cells);
    for (int i = 0; i < M; i++) {
        for (int p = 0; p < N_PLACERS; p++)
            for (int s = 0; s < SEEDS; s++) free_run(&ms[i].run[p][s]);
        policy_session_close(ms[i].ss[0]);
        policy_session_close(ms[i].ss[1]);
    }
    free(ms);
}

static int parse_int(const char *v, int lo, int hi) {
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) {
        fprintf(stderr, "transfer_matrix: '%s' is not an integer in %d..%d\n", v, lo, hi);
        exit(2);
    }
    return (int)x;
}

int main(int argc, char **argv) {
    bench_opts bo;
    memset(&bo, 0, sizeof bo);
    snprintf(bo.graphs, sizeof bo.graphs, "default,gpt12");
    snprintf(bo.settings, sizeof bo.settings, "ABC");
    bo.placers[0] = bo.placers[1] = 1;
    bo.seeds = 3;
    bo.updates = 250;
    bo.samples = 8;
    bo.finetune = 50;
    bo.top_k = 5;
    bo.threads = 1;
    bo.max_exhaustive = 3e6;
    bo.out_dir = "transfer-matrix";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) {
            printf("usage: transfer_matrix --machine NAME=DB [--machine ...] [--graphs default,gpt12] "
                   "[--settings ABC] [--placers reinforce,eagle] [--seeds 3] [--updates 250] [--samples 8] "
                   "[--finetune 50] [--top-k 5] [--threads 1] [--max-exhaustive 3e6] [--out DIR]\n");
            return 0;
        }
        if (!v) {
            fprintf(stderr, "transfer_matrix: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--machine")) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || bo.n_machines == MAX_MACHINES || (size_t)(eq - v) >= sizeof bo.m[0].name) {
                fprintf(stderr, "transfer_matrix: --machine NAME=DB[@PERM] (at most %d)\n", MAX_MACHINES);
                return 2;
            }
            machine_src *m = &bo.m[bo.n_machines++];
            snprintf(m->name, sizeof m->name, "%.*s", (int)(eq - v), v);
            snprintf(m->path, sizeof m->path, "%s", eq + 1);
            char *at = strchr(m->path, '@');
            if (at) {
                *at = 0;
                m->n_perm = placement_count_fields(at + 1);
                if (m->n_perm < 1 || m->n_perm > SIM_MAX_DEVICES ||
                    placement_parse(at + 1, m->n_perm, m->n_perm, m->perm, NULL, 0) != PL_OK) {
                    fprintf(stderr, "transfer_matrix: %s: @PERM is a relabelling of the devices, e.g. @2,3,0,1\n",
                            m->name);
                    return 2;
                }
            }
        } else if (!strcmp(a, "--graphs")) snprintf(bo.graphs, sizeof bo.graphs, "%s", v);
        else if (!strcmp(a, "--settings")) snprintf(bo.settings, sizeof bo.settings, "%s", v);
        else if (!strcmp(a, "--placers")) {
            bo.placers[0] = strstr(v, "reinforce") != NULL;
            bo.placers[1] = strstr(v, "eagle") != NULL;
        } else if (!strcmp(a, "--seeds")) bo.seeds = parse_int(v, 1, MAX_SEEDS);
        else if (!strcmp(a, "--updates")) bo.updates = parse_int(v, 1, 100000);
        else if (!strcmp(a, "--samples")) bo.samples = parse_int(v, 1, 4096);
        else if (!strcmp(a, "--finetune")) bo.finetune = parse_int(v, 0, 100000);
        else if (!strcmp(a, "--top-k")) bo.top_k = parse_int(v, 1, REINFORCE_MAX_TOP);
        else if (!strcmp(a, "--threads")) bo.threads = parse_int(v, 1, 1024);
        else if (!strcmp(a, "--max-exhaustive")) bo.max_exhaustive = atof(v);
        else if (!strcmp(a, "--out")) bo.out_dir = v;
        else {
            fprintf(stderr, "transfer_matrix: unknown option %s (see --help)\n", a);
            return 2;
        }
    }
    if (bo.n_machines < 2) {
        fprintf(stderr, "transfer_matrix: give at least two --machine NAME=DB\n");
        return 2;
    }
    if (mkdir(bo.out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "transfer_matrix: cannot create %s: %s\n", bo.out_dir, strerror(errno));
        return 1;
    }
    char path[2048];
    snprintf(path, sizeof path, "%s/transfer-matrix.tsv", bo.out_dir);
    FILE *mat = fopen(path, "w");
    snprintf(path, sizeof path, "%s/transfer-cells.tsv", bo.out_dir);
    FILE *cells = fopen(path, "w");
    if (!mat || !cells) {
        fprintf(stderr, "transfer_matrix: cannot write in %s\n", bo.out_dir);
        return 1;
    }
    fprintf(mat, "graph\tsetting\tplacer\tsource\ttarget\tseeds\tstatus\tgain\tgain_lo\tgain_hi\toom\tgain_rank\t"
                 "gain_top1\ton_target_ms\tbaseline_ms\tbest_ms\tfirst_update_ms\tfinetuned_ms\tscratch_ms\t"
                 "finetune\tsaved\n");
    fprintf(cells, "graph\tsetting\tplacer\tsource\ttarget\tseed\tbaseline_ms\tbest_ms\ttop1_ms\tbest_of_k_ms\toom\t"
                   "rank_top1_ms\trank_best_of_k_ms\trank_oom\tsame_map\tfirst_update_ms\tfinetuned_ms\tscratch_ms\t"
                   "u_ft\tu_scratch\tsaved\n");
    printf("# Transfer matrix\n\n%d seeds; training %d updates x %d samples; fine-tune %d updates; shortlist top %d; "
           "%d thread%s; exhaustive up to %.3g simulations\n",
           bo.seeds, bo.updates, bo.samples, bo.finetune, bo.top_k, bo.threads, bo.threads == 1 ? "" : "s",
           bo.max_exhaustive);
    char graphs[256];
    snprintf(graphs, sizeof graphs, "%s", bo.graphs);
    char *save = NULL;
    for (char *g = strtok_r(graphs, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
        printf("\n## %s\n", g);
        for (const char *s = bo.settings; *s; s++)
            if (*s == 'A' || *s == 'B' || *s == 'C') run_setting(&bo, g, *s, mat, cells);
    }
    fclose(mat);
    fclose(cells);
    return 0;
}
