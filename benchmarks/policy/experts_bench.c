/*
 * experts_bench.c: the expert placement results of docs/experts.md.
 *
 *   experts_bench --stats [--seeds N]     the generator settings' statistics
 *                                         (per-layer CV and max/mean of the
 *                                         experts' counts; what they were
 *                                         calibrated to)
 *   experts_bench --table [--seeds N] [--out FILE]
 *                                         the must-show table: DeepSeek-V3
 *                                         routing from the generator, 58
 *                                         layers, each placer planning on
 *                                         window t (and the windows before)
 *                                         and scored on t + 1, seeds 1..N
 *                                         (default 5), mean and 95% interval
 *                                         over the seeds
 *
 * Scenarios (each: a generator setting, the expert-parallel group, slots):
 *   A  EP 64 on 8 nodes, 320 slots, inference-skew, inference (forward)
 *   B  prefill EP 32 on 4 nodes, 288 slots, domain-shift, inference
 *   C  EP 64 on 8 nodes, no replicas (256 slots), inference-skew, training
 *   D  small cases against the exact optimum (known load)
 * Plans run on windows 2..7 of 8 in order, each re-plan relabelled against
 * the placer's previous plan; the scored pairs are (t, t + 1) for t = 3..6.
 * The cluster is h800-deepseek (DeepSeek's own: 8 H800 a node, one 400 Gb/s
 * NIC a GPU); the MoE layer times are one micro-batch of 4096 tokens a GPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_file.h"
#include "expert_gen.h"
#include "experts.h"
#include "exact.h"
#include "layout.h"
#include "learned.h"
#include "model_config.h"
#include "moe_balance.h"
#include "score.h"
#include "util.h"

#define MAX_SEEDS 32
static int g_moves = 0;
static int g_iters = 24; /* ES iterations of --train */
#define N_WINDOWS 8
#define FIRST_PAIR 3
#define LAST_PAIR 6

static double student_t95(int n) {
    static const double t[] = {0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228};
    return n - 1 >= 1 && n - 1 <= 10 ? t[n - 1] : 1.96;
}

/* mean and half-width of the 95% interval of x[0..n) */
static void ci(const double *x, int n, double *mean, double *half) {
    double m = 0, sd = 0;
    pl_mean_sd(x, n, &m, &sd);
    *mean = m;
    *half = n > 1 ? student_t95(n) * sd / sqrt((double)n) : 0.0;
}

static int stats(int seeds) {
    static const char *const settings[] = {"training-balanced", "inference-skew", "domain-shift"};
    printf("| setting | per-layer CV: median (10%%..90%% of layers) | max/mean: median (10%%..90%%) | window-to-window change of an expert's share (median) |\n");
    printf("|---|---|---|---|\n");
    for (int si = 0; si < 3; si++) {
        expert_gen_params gp;
        char msg[512];
        if (expert_gen_params_load(settings[si], &gp, msg, sizeof msg) != PL_OK) {
            fprintf(stderr, "experts_bench: %s\n", msg);
            return 1;
        }
        const int W = N_WINDOWS;
        double *cv = malloc(sizeof(double) * (size_t)seeds * W * gp.layers);
        double *mm = malloc(sizeof(double) * (size_t)seeds * W * gp.layers);
        double *ch = malloc(sizeof(double) * (size_t)seeds * W * gp.layers);
        double *tmp = malloc(sizeof(double) * (size_t)seeds * W * gp.layers);
        int n = 0, nc = 0;
        for (int s = 1; s <= seeds; s++) {
            expert_load *ld = NULL;
            if (expert_gen_run(&gp, W, (uint64_t)s, &ld, msg, sizeof msg) != PL_OK) {
                fprintf(stderr, "experts_bench: %s\n", msg);
                return 1;
            }
            for (int w = 0; w < W; w++)
                for (int l = 0; l < ld->n_layers; l++) {
                    expert_load_row_stats(ld, w, l, &cv[n], &mm[n]);
                    n++;
                    if (w > 0) { /* mean absolute change of the experts' shares, relative to the mean share */
                        const double *a = expert_load_row_c(ld, w - 1, l), *b = expert_load_row_c(ld, w, l);
                        double sa = 0, sb = 0, d = 0;
                        for (int e = 0; e < ld->n_experts; e++) sa += a[e], sb += b[e];
                        for (int e = 0; e < ld->n_experts; e++) d += fabs(b[e] / sb - a[e] / sa);
                        ch[nc++] = d; /* = mean |change| / mean share */
                    }
                }
            expert_load_destroy(ld);
        }
        /* quantiles */
        for (int k = 0; k < 2; k++) {
            double *x = k ? mm : cv;
            memcpy(tmp, x, sizeof(double) * (size_t)n);
            for (int i = 1; i < n; i++) {
                const double v = tmp[i];
                int j = i;
                while (j > 0 && tmp[j - 1] > v) tmp[j] = tmp[j - 1], j--;
                tmp[j] = v;
            }
            const double q10 = tmp[n / 10], q50 = tmp[n / 2], q90 = tmp[(9 * n) / 10];
            if (!k) printf("| %s | %.2f (%.2f..%.2f) ", settings[si], q50, q10, q90);
            else printf("| %.2f (%.2f..%.2f) ", q50, q10, q90);
        }
        printf("| %.2f |\n", pl_median(ch, nc, tmp));
        free(cv), free(mm), free(ch), free(tmp);
    }
    return 0;
}

/* ---- the table ----------------------------------------------------------- */

typedef struct {
    const char *id, *title, *setting;
    int ep, slots, training;
    int capped; /* 1: copies held within EPLB hierarchical's + 3% on the planning window */
} scenario;

static const scenario SCEN[] = {
    {"A", "EP 64 on 8 nodes, 320 slots (64 replicas), inference-skew, copies capped", "inference-skew", 64, 320, 0, 1},
    {"A'", "the same, copies traded by the simulated time", "inference-skew", 64, 320, 0, 0},
    {"B", "prefill EP 32 on 4 nodes, 288 slots, domain-shift", "domain-shift", 32, 288, 0, 0},
    {"C", "EP 64 on 8 nodes, training, no replicas, inference-skew", "inference-skew", 64, 256, 1, 0},
    {"T", "EP 64 on 8 nodes, training, no replicas, training-balanced", "training-balanced", 64, 256, 1, 0},
};
/* the learned placer's training problems (scenarios A', B, C, T on seeds of their own) */
static const int TRAIN_SCEN[] = {1, 2, 3, 4};
#define N_TRAIN_SCEN (int)(sizeof TRAIN_SCEN / sizeof TRAIN_SCEN[0])
#define N_SCEN (int)(sizeof SCEN / sizeof SCEN[0])

static const experts_placer PLACERS[] = {EXPERTS_EPLB,      EXPERTS_EPLB_HIER, EXPERTS_EPLB_GLOBAL,
                                         EXPERTS_EPLB_SWAP, EXPERTS_SEARCH,    EXPERTS_LEARNED};
#define N_PL (int)(sizeof PLACERS / sizeof PLACERS[0])

typedef struct {
    double bom, copies, nic, moved, plan_ms, time_us, dt_balance, dt_rest;
} cell;

/* D: small layers on their known load (plan and score on the same window) against the exact optimum: the
 * FlashLB toy and the small settings' layers on 8 GPUs of 2 slots and 4 GPUs of 3. */
static int small_cases(int seeds, FILE *out) {
    static const double TOY[8] = {600, 560, 120, 120, 20, 10, 10, 10};
    static const eplb_shape SHAPES[] = {{8, 16, 8, 8, 4}, {8, 12, 4, 4, 4}};
    static const experts_placer PL[] = {EXPERTS_EPLB, EXPERTS_EPLB_SWAP, EXPERTS_SEARCH, EXPERTS_SEARCH};
    static const char *const PL_NAME[] = {"eplb", "eplb-swap", "search (local search alone)", "search"};
    char msg[512];
    expert_gen_params gp;
    if (expert_gen_params_load("small", &gp, msg, sizeof msg) != PL_OK) return fprintf(stderr, "%s\n", msg), 1;
    fprintf(out, "\n| D small layers, known load | placer | busiest / exact optimum, mean (worst) | layers within 1%% | proven optimal |\n");
    fprintf(out, "|---|---|---|---|---|\n");
    /* the toy */
    {
        expert_load *ld = NULL;
        expert_load_create(1, 1, 8, 0, 0, 0, &ld, msg, sizeof msg);
        memcpy(expert_load_row(ld, 0, 0), TOY, sizeof TOY);
        ld->top_k = 2;
        int32_t x[16];
        double opt = 0;
        int proven = 0;
        if (experts_exact(&SHAPES[0], TOY, 60, x, &opt, NULL, &proven, msg, sizeof msg) != PL_OK)
            return fprintf(stderr, "%s\n", msg), 1;
        for (int pi = 0; pi < 4; pi++) {
            experts_options o = {.shape = {8, 16, 8, 8, 0}, .top_k = 2, .copies_margin = -1, .threads = 1,
                                 .no_small_exact = pi == 2};
            experts_planner *pp = NULL;
            expert_map *m = NULL;
            experts_planner_create(&o, 0, 0, &pp, msg, sizeof msg);
            expert_map_create(1, 8, 16, 8, 8, &m, msg, sizeof msg);
            if (experts_plan(pp, PL[pi], ld, 0, NULL, m, NULL, msg, sizeof msg) != PL_OK) return fprintf(stderr, "%s\n", msg), 1;
            int cnt[8] = {0};
            for (int i = 0; i < 16; i++) cnt[m->phy2log[i]]++;
            double b = 0;
            for (int g = 0; g < 8; g++) {
                const double v = TOY[m->phy2log[2 * g]] / cnt[m->phy2log[2 * g]] + TOY[m->phy2log[2 * g + 1]] / cnt[m->phy2log[2 * g + 1]];
                if (v > b) b = v;
            }
            fprintf(out, "| %s | %s | %.3f (%.1f against %.1f) | %s | %s |\n", pi == 0 ? "FlashLB toy, 8 GPUs x 2 slots" : "",
                    PL_NAME[pi], b / opt, b, opt, b <= opt * 1.01 ? "1 of 1" : "0 of 1", proven ? "yes" : "no");
            experts_planner_destroy(pp);
            expert_map_destroy(m);
        }
        expert_load_destroy(ld);
    }
    for (int si = 0; si < 2; si++) {
        const eplb_shape *sh = &SHAPES[si];
        double ratio[4][MAX_SEEDS], worst[4] = {0};
        int within[4] = {0}, n_layers = 0, n_proven = 0;
        for (int s = 1; s <= seeds; s++) {
            expert_load *ld = NULL;
            if (expert_gen_run(&gp, 1, (uint64_t)s, &ld, msg, sizeof msg) != PL_OK) return fprintf(stderr, "%s\n", msg), 1;
            double opt[64];
            for (int l = 0; l < gp.layers; l++) {
                int32_t x[64];
                int proven = 0;
                if (experts_exact(sh, expert_load_row_c(ld, 0, l), 60, x, &opt[l], NULL, &proven, msg, sizeof msg) != PL_OK)
                    return fprintf(stderr, "%s\n", msg), 1;
                n_proven += proven;
            }
            n_layers += gp.layers;
            for (int pi = 0; pi < 4; pi++) {
                experts_options o = {.shape = *sh, .top_k = gp.top_k, .copies_margin = -1, .threads = 1,
                                     .no_small_exact = pi == 2};
                o.shape.gpus_per_node = sh->n_gpus; /* one node: the busiest GPU is all the program sees */
                experts_planner *pp = NULL;
                expert_map *m = NULL;
                experts_planner_create(&o, ld->n_samples, ld->sample_k, &pp, msg, sizeof msg);
                expert_map_create(gp.layers, 8, sh->n_slots, sh->n_gpus, sh->n_gpus, &m, msg, sizeof msg);
                if (experts_plan(pp, PL[pi], ld, 0, NULL, m, NULL, msg, sizeof msg) != PL_OK) return fprintf(stderr, "%s\n", msg), 1;
                double sum = 0;
                for (int l = 0; l < gp.layers; l++) {
                    const double *w = expert_load_row_c(ld, 0, l);
                    const int32_t *pl = expert_map_layer_c(m, l);
                    int cnt[8] = {0};
                    for (int i = 0; i < sh->n_slots; i++) cnt[pl[i]]++;
                    const int S = sh->n_slots / sh->n_gpus;
                    double b = 0;
                    for (int g = 0; g < sh->n_gpus; g++) {
                        double v = 0;
                        for (int j = 0; j < S; j++) v += w[pl[g * S + j]] / cnt[pl[g * S + j]];
                        if (v > b) b = v;
                    }
                    const double r = b / opt[l];
                    sum += r;
                    if (r > worst[pi]) worst[pi] = r;
                    within[pi] += r <= 1.01;
                }
                ratio[pi][s - 1] = sum / gp.layers;
                experts_planner_destroy(pp);
                expert_map_destroy(m);
            }
            expert_load_destroy(ld);
        }
        for (int pi = 0; pi < 4; pi++) {
            double mm, hh;
            ci(ratio[pi], seeds, &mm, &hh);
            char title[96] = "";
            if (pi == 0) snprintf(title, sizeof title, "small, %d GPUs x %d slots (%d layers x %d seeds)", sh->n_gpus,
                                  sh->n_slots / sh->n_gpus, gp.layers, seeds);
            fprintf(out, "| %s | %s | %.4f ± %.4f (%.3f) | %d of %d | %d of %d |\n", title, PL_NAME[pi], mm, hh, worst[pi],
                    within[pi], n_layers, n_proven, n_layers);
        }
    }
    return 0;
}

static int table(int seeds, const char *out_path, const experts_model *model) {
    char msg[512];
    gpt_config cfg;
    char name[128];
    cluster clu;
    if (model_config_load("deepseek-v3", &cfg, name, sizeof name, msg, sizeof msg) != PL_OK ||
        cluster_load("h800-deepseek", NULL, &clu, msg, sizeof msg) != PL_OK) {
        fprintf(stderr, "experts_bench: %s\n", msg);
        return 1;
    }
    cfg.seq_len = 4096;
    FILE *out = out_path ? fopen(out_path, "w") : stdout;
    if (!out) {
        fprintf(stderr, "experts_bench: cannot write %s\n", out_path);
        return 1;
    }
    fprintf(out, "| scenario | placer | busiest/mean (t+1) | cross-node copies / token | worst NIC MB | weights moved / re-plan | plan ms (58 layers) | MoE layers ms | of its change vs EPLB: busiest GPU / rest |\n");
    fprintf(out, "|---|---|---|---|---|---|---|---|---|\n");
    for (int si = 0; si < N_SCEN && !getenv("EXPERTS_ONLY_SMALL"); si++) {
        const scenario *sc = &SCEN[si];
        expert_gen_params gp;
        if (expert_gen_params_load(sc->setting, &gp, msg, sizeof msg) != PL_OK) {
            fprintf(stderr, "experts_bench: %s\n", msg);
            return 1;
        }
        layout lay;
        char lt[128];
        snprintf(lt, sizeof lt, "tp=1,pp=1,dp=%d,ep=%d,mbs=1,gbs=%d", sc->ep, sc->ep, sc->ep);
        if (layout_parse(lt, &lay, msg, sizeof msg) != PL_OK) {
            fprintf(stderr, "experts_bench: %s\n", msg);
            return 1;
        }
        moe_balance_group g;
        moe_balance_group_of(&clu, &cfg, &lay, &g);
        moe_balance_cost cost = {.clu = &clu, .cfg = &cfg, .lay = &lay, .training = sc->training};
        compute_params_default(&cost.compute);
        moe_params_default(&cost.moe);
        experts_options o;
        memset(&o, 0, sizeof o);
        o.shape = (eplb_shape){gp.experts, sc->slots, sc->ep, g.gpus_per_node, gp.groups};
        o.top_k = gp.top_k;
        o.copies_margin = sc->capped ? 0.03 : -1.0;
        o.model = model;
        o.cost = &cost;
        o.max_moves = g_moves;
        experts_planner *pp = NULL;
        moe_balance_ctx *bc = NULL;
        if (experts_planner_create(&o, gp.samples, gp.top_k, &pp, msg, sizeof msg) != PL_OK ||
            moe_balance_ctx_create(&g, gp.experts, sc->slots, &bc, msg, sizeof msg) != PL_OK) {
            fprintf(stderr, "experts_bench: %s\n", msg);
            return 1;
        }
        cell per[N_PL][MAX_SEEDS];
        double lb_seed[MAX_SEEDS];
        memset(per, 0, sizeof per);
        const int L = gp.layers;
        moe_balance_layer *lay_s = malloc(sizeof *lay_s * (size_t)L), *lay_e = malloc(sizeof *lay_e * (size_t)L);
        for (int s = 1; s <= seeds; s++) {
            expert_load *ld = NULL;
            if (expert_gen_run(&gp, N_WINDOWS, (uint64_t)s, &ld, msg, sizeof msg) != PL_OK) {
                fprintf(stderr, "experts_bench: %s\n", msg);
                return 1;
            }
            /* the lower bound on t + 1 (oracle) */
            double lbs = 0;
            for (int t = FIRST_PAIR; t <= LAST_PAIR; t++)
                for (int l = 0; l < L; l++) {
                    const double *r = expert_load_row_c(ld, t + 1, l);
                    double tot = 0;
                    for (int e = 0; e < gp.experts; e++) tot += r[e];
                    lbs += experts_lower_bound(&o.shape, r) / (tot / sc->ep);
                }
            lb_seed[s - 1] = lbs / ((LAST_PAIR - FIRST_PAIR + 1) * L);
            /* EPLB's per-layer results per pair, for the time decomposition */
            moe_balance_layer *eplb_layers = malloc(sizeof *eplb_layers * (size_t)L * N_WINDOWS);
            for (int pi = 0; pi < N_PL; pi++) {
                expert_map *prev = NULL, *cur = NULL;
                cell *cl = &per[pi][s - 1];
                int n = 0;
                for (int t = FIRST_PAIR - 1; t <= LAST_PAIR; t++) {
                    if (expert_map_create(L, gp.experts, sc->slots, sc->ep, g.gpus_per_node, &cur, msg, sizeof msg) != PL_OK) return 1;
                    experts_plan_info info;
                    if (experts_plan(pp, PLACERS[pi], ld, t, prev, cur, &info, msg, sizeof msg) != PL_OK) {
                        fprintf(stderr, "experts_bench: %s: %s\n", experts_placer_name(PLACERS[pi]), msg);
                        return 1;
                    }
                    if (t >= FIRST_PAIR) {
                        experts_score sco;
                        if (experts_score_map(bc, cur, ld, t + 1, &cost, &sco, lay_s, NULL, msg, sizeof msg) != PL_OK) {
                            fprintf(stderr, "experts_bench: %s\n", msg);
                            return 1;
                        }
                        if (pi == 0) memcpy(eplb_layers + (size_t)t * L, lay_s, sizeof *lay_s * (size_t)L);
                        memcpy(lay_e, eplb_layers + (size_t)t * L, sizeof *lay_e * (size_t)L);
                        double dtb = 0, dtr = 0;
                        for (int l = 0; l < L; l++) {
                            double c1, m1, c2, m2, c3, m3;
                            moe_balance_layer_time(&cost, lay_e[l].busiest_over_mean, NULL, 0, lay_e[l].worst_nic_bytes, &c1, &m1);
                            moe_balance_layer_time(&cost, lay_s[l].busiest_over_mean, NULL, 0, lay_e[l].worst_nic_bytes, &c2, &m2);
                            moe_balance_layer_time(&cost, lay_s[l].busiest_over_mean, NULL, 0, lay_s[l].worst_nic_bytes, &c3, &m3);
                            dtb += (c2 + m2) - (c1 + m1);
                            dtr += (c3 + m3) - (c2 + m2);
                        }
                        cl->bom += sco.busiest_over_mean;
                        cl->copies += sco.copies_per_token;
                        cl->nic += sco.worst_nic_bytes / 1e6;
                        cl->moved += prev ? (double)expert_map_moved(prev, cur) / L : 0.0;
                        cl->plan_ms += info.plan_us / 1e3;
                        cl->time_us += sco.compute_us + sco.comm_us;
                        cl->dt_balance += dtb;
                        cl->dt_rest += dtr;
                        n++;
                    }
                    expert_map_destroy(prev);
                    prev = cur;
                    cur = NULL;
                }
                expert_map_destroy(prev);
                cl->bom /= n, cl->copies /= n, cl->nic /= n, cl->moved /= n, cl->plan_ms /= n;
                cl->time_us /= n, cl->dt_balance /= n, cl->dt_rest /= n;
            }
            free(eplb_layers);
            expert_load_destroy(ld);
            fprintf(stderr, "experts_bench: %s seed %d done\n", sc->id, s);
        }
        for (int pi = 0; pi < N_PL; pi++) {
            double x[MAX_SEEDS], m[9], h[9];
            for (int k = 0; k < 8; k++) {
                for (int s = 0; s < seeds; s++) {
                    const cell *c = &per[pi][s];
                    const double v[8] = {c->bom, c->copies, c->nic, c->moved, c->plan_ms, c->time_us / 1e3,
                                         c->dt_balance / 1e3, c->dt_rest / 1e3};
                    x[s] = v[k];
                }
                ci(x, seeds, &m[k], &h[k]);
            }
            fprintf(out, "| %s %s | %s | %.3f ± %.3f | %.2f ± %.2f | %.1f | %.0f | %.1f | %.3f ± %.3f | %+.3f / %+.3f |\n",
                    pi == 0 ? sc->id : "", pi == 0 ? sc->title : "", experts_placer_name(PLACERS[pi]), m[0], h[0],
                    m[1], h[1], m[2], m[3], m[4], m[5], h[5], m[6], m[7]);
        }
        double lm, lh;
        ci(lb_seed, seeds, &lm, &lh);
        fprintf(out, "| | lower bound (t+1 known) | %.3f ± %.3f | | | | | | |\n", lm, lh);
        fflush(out);
        free(lay_s);
        free(lay_e);
        experts_planner_destroy(pp);
        moe_balance_ctx_destroy(bc);
    }
    if (small_cases(seeds, out)) return 1;
    if (out != stdout) fclose(out);
    return 0;
}

static int on_progress(void *ctx, int iter, int iters, double now, double best) {
    (void)ctx;
    fprintf(stderr, "experts_bench: ES iteration %d/%d: cost %.4f, best %.4f\n", iter, iters, now, best);
    return 0;
}

/* Train the learned placer on seeds 101.. (16 layers each, pairs t = 3, 4) and write it to path. */
static int train(int seeds, const char *path) {
    char msg[512], name[128];
    gpt_config cfg;
    cluster clu;
    if (model_config_load("deepseek-v3", &cfg, name, sizeof name, msg, sizeof msg) != PL_OK ||
        cluster_load("h800-deepseek", NULL, &clu, msg, sizeof msg) != PL_OK) {
        fprintf(stderr, "experts_bench: %s\n", msg);
        return 1;
    }
    cfg.seq_len = 4096;
    const int np = N_TRAIN_SCEN * seeds;
    experts_train_problem *pb = calloc((size_t)np, sizeof *pb);
    layout *lays = calloc((size_t)np, sizeof *lays);
    moe_balance_cost *costs = calloc((size_t)np, sizeof *costs);
    expert_load **loads = calloc((size_t)np, sizeof *loads);
    if (!pb || !lays || !costs || !loads) return 1;
    for (int i = 0; i < N_TRAIN_SCEN; i++)
        for (int s = 0; s < seeds; s++) {
            const scenario *sc = &SCEN[TRAIN_SCEN[i]];
            const int k = i * seeds + s;
            expert_gen_params gp;
            char lt[128];
            if (expert_gen_params_load(sc->setting, &gp, msg, sizeof msg) != PL_OK) return fprintf(stderr, "%s\n", msg), 1;
            gp.layers = 16;
            if (expert_gen_run(&gp, 6, (uint64_t)(101 + s), &loads[k], msg, sizeof msg) != PL_OK) return fprintf(stderr, "%s\n", msg), 1;
            snprintf(lt, sizeof lt, "tp=1,pp=1,dp=%d,ep=%d,mbs=1,gbs=%d", sc->ep, sc->ep, sc->ep);
            if (layout_parse(lt, &lays[k], msg, sizeof msg) != PL_OK) return fprintf(stderr, "%s\n", msg), 1;
            costs[k] = (moe_balance_cost){.clu = &clu, .cfg = &cfg, .lay = &lays[k], .training = sc->training};
            compute_params_default(&costs[k].compute);
            moe_params_default(&costs[k].moe);
            moe_balance_group g;
            moe_balance_group_of(&clu, &cfg, &lays[k], &g);
            pb[k].ld = loads[k];
            pb[k].opts.shape = (eplb_shape){gp.experts, sc->slots, sc->ep, g.gpus_per_node, gp.groups};
            pb[k].opts.top_k = gp.top_k;
            pb[k].opts.copies_margin = -1.0;
            pb[k].opts.cost = &costs[k];
            pb[k].opts.max_moves = g_moves;
        }
    experts_train_options to = {pb, np, 3, 4, g_iters, 6, 0.15, 0.1, 7, on_progress, NULL};
    experts_model m;
    experts_model_default(&m);
    m.mu = 8.0;
    double c0 = 0, c1 = 0;
    const double t0 = pl_now_us();
    if (experts_train(&to, &m, &c0, &c1, msg, sizeof msg) != PL_OK) return fprintf(stderr, "experts_bench: %s\n", msg), 1;
    char training[512];
    snprintf(training, sizeof training,
             "experts_bench --train %s --seeds %d: evolution strategies (%d iterations, 6 antithetic pairs, sigma 0.15, "
             "step 0.1, seed 7) against the simulated MoE layer time relative to EPLB's, scenarios A', B, C and T of "
             "docs/experts.md on generator seeds 101..%d (16 layers, plans on windows 3 and 4): cost %.4f -> %.4f in %.0f s",
             path, seeds, g_iters, 100 + seeds, c0, c1, (pl_now_us() - t0) / 1e6);
    FILE *f = fopen(path, "w");
    if (!f || expert_model_write(&m, "learned-deepseek-v3",
                                 "the learned expert placer's parameters for DeepSeek-V3 routing (policy/experts/learned.h)",
                                 training, f) != PL_OK) {
        fprintf(stderr, "experts_bench: cannot write %s\n", path);
        return 1;
    }
    fclose(f);
    fprintf(stderr, "experts_bench: %s\n", training);
    for (int k = 0; k < np; k++) expert_load_destroy(loads[k]);
    free(pb), free(lays), free(costs), free(loads);
    return 0;
}

int main(int argc, char **argv) {
    int seeds = 5, do_stats = 0, do_table = 0;
    const char *train_out = NULL, *model_path = NULL;
    if (getenv("EXPERTS_MOVES")) g_moves = atoi(getenv("EXPERTS_MOVES"));
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--stats")) do_stats = 1;
        else if (!strcmp(argv[i], "--table")) do_table = 1;
        else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) seeds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--train") && i + 1 < argc) train_out = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model_path = argv[++i];
        else {
            fprintf(stderr, "usage: experts_bench [--stats] [--table] [--train FILE] [--model FILE] [--seeds N] [--out FILE]\n");
            return 2;
        }
    }
    if (seeds < 1 || seeds > MAX_SEEDS) {
        fprintf(stderr, "experts_bench: --seeds must be 1..%d\n", MAX_SEEDS);
        return 2;
    }
    if (train_out) return train(seeds, train_out);
    if (!do_stats && !do_table) do_stats = do_table = 1;
    experts_model model;
    char msg[512];
    if (expert_model_load(model_path ? model_path : "learned-deepseek-v3", &model, msg, sizeof msg) != PL_OK) {
        if (model_path) return fprintf(stderr, "experts_bench: %s\n", msg), 1;
        experts_model_default(&model); /* not trained yet: the learned placer is the search */
    }
    if (do_stats && stats(seeds)) return 1;
    if (do_table && table(seeds, out, &model)) return 1;
    return 0;
}
