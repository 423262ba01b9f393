/*
 * cmd_experts.c: `placer experts` places a mixture-of-experts model's experts
 * (and their replicas) on the GPUs of an expert-parallel group, every MoE
 * layer, from a load file or the generator, and scores the placement against
 * EPLB's on the next window: busiest/mean per layer and its mean, cross-node
 * copies per token, the worst NIC's bytes, the expert weights a re-plan
 * moves, the planner's time, and the MoE layers' simulated time with the
 * part of its change the busiest GPU explains. It writes the placement as
 * EPLB's phy2log / log2phy / logcnt (the JSON vLLM and SGLang load), an SVG
 * of the per-GPU loads before and after, and --json for scripts.
 *
 * Everything typed is checked before planning: a load of the wrong shape or
 * with negative counts, slots not divisible by the GPUs, an ep that does not
 * divide the experts, a load whose experts or layers are not the model's:
 * one line, exit 2. The work (policy/experts/) is the library's; this file
 * parses, calls, prints.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "cluster_file.h"
#include "expert_gen.h"
#include "expert_load.h"
#include "expert_model_file.h"
#include "experts.h"
#include "layout.h"
#include "model_config.h"
#include "model_params.h"
#include "moe_balance.h"
#include "score.h"
#include "util.h"

#define CMD "experts"

static void usage(FILE *f) {
    fprintf(f,
            "usage: placer experts (--load FILE | --generate SETTING) --model M --cluster C --ep N [options]\n\n"
            "Places a mixture-of-experts model's experts and their replicas on the GPUs of an expert-parallel\n"
            "group, every MoE layer: planned on one load window (and the windows before it), scored on the\n"
            "next against DeepSeek's EPLB on the same loads. docs/experts.md describes the placers and scores.\n\n"
            "  --load FILE      expert loads: JSON with SGLang's logical_count [windows][layers][experts] or\n"
            "                   vLLM's expert_load_window / expert_load_pass (+ physical_to_logical_map),\n"
            "                   optionally topk_ids_of_layer; or CSV window,layer,expert,count\n"
            "  --generate S     loads from the generator, settings S (data/experts: training-balanced,\n"
            "                   inference-skew, domain-shift; or a file)\n"
            "  --windows N      windows to generate (default 6)\n"
            "  --seed N         the generator's seed (default 1)\n"
            "  --write-load F   write the loads (generated or read) as JSON to F\n"
            "  --model M        the model (a shipped name such as deepseek-v3, or a config.json)\n"
            "  --cluster C      the cluster (a shipped name such as h800-deepseek, or a file)\n"
            "  --ep N           expert-parallel GPUs (must divide the experts)\n"
            "  --slots P        physical slots per layer, a multiple of ep (default: the experts)\n"
            "  --replicas R     the same as --slots experts + R\n"
            "  --layout TEXT    the layout of the MoE layer's time (default tp=1,pp=1,dp=ep,ep=ep,mbs=1,gbs=ep;\n"
            "                   the ep must be --ep)\n"
            "  --phase P        infer (default: forward only) or train (forward and backward) for the time\n"
            "  --placer NAME    search (default), learned, eplb, eplb-hierarchical, eplb-global, eplb-swap,\n"
            "                   contiguous, round-robin, exact (small layers)\n"
            "  --learned F      the learned placer's parameters (default data/experts/learned-deepseek-v3.json)\n"
            "  --window T       plan on window T (default: the second last), score on T + 1 (the last window\n"
            "                   is scored on itself)\n"
            "  --copies-margin X  hold copies per token within EPLB hierarchical's x (1 + X) on the planning\n"
            "                   window (default: none: the simulated time trades balance for copies)\n"
            "  --out FILE       write the placement: phy2log, log2phy, logcnt (EPLB's names), gpu_load,\n"
            "                   busiest_over_mean (what placer layout --experts reads) and the scores\n"
            "  --sglang FILE    write {\"physical_to_logical_map\": ...} alone (SGLang's --init-expert-location)\n"
            "  --svg FILE       draw the per-GPU loads of the layer EPLB balances worst, EPLB's and the\n"
            "                   placement's (SVG)\n"
            "  --json           print the scores as JSON\n"
            "  --help           this text\n\n"
            "Exit status: 0 ok, 1 runtime failure, 2 bad input.\n");
}

typedef struct {
    const char *load, *gen, *write_load, *model, *cluster, *layout, *placer, *learned, *out, *sglang, *svg;
    long windows, seed, ep, slots, replicas, window;
    int train, json, have_window, have_margin;
    double margin;
} args;

static int parse(int argc, char **argv, args *a) {
    memset(a, 0, sizeof *a);
    a->windows = 6, a->seed = 1, a->slots = -1, a->replicas = -1;
    a->placer = "search";
    static const struct option opts[] = {
        {"load", required_argument, 0, 'L'},       {"generate", required_argument, 0, 'G'},
        {"windows", required_argument, 0, 'W'},    {"seed", required_argument, 0, 'S'},
        {"write-load", required_argument, 0, 'w'}, {"model", required_argument, 0, 'm'},
        {"cluster", required_argument, 0, 'c'},    {"ep", required_argument, 0, 'e'},
        {"slots", required_argument, 0, 's'},      {"replicas", required_argument, 0, 'r'},
        {"layout", required_argument, 0, 'l'},     {"phase", required_argument, 0, 'p'},
        {"placer", required_argument, 0, 'P'},     {"learned", required_argument, 0, 'M'},
        {"window", required_argument, 0, 't'},     {"copies-margin", required_argument, 0, 'x'},
        {"out", required_argument, 0, 'o'},        {"sglang", required_argument, 0, 'g'},
        {"svg", required_argument, 0, 'v'},        {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},             {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int ch, rc;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'L': a->load = optarg; break;
        case 'G': a->gen = optarg; break;
        case 'W': if ((rc = cli_long_arg(CMD, "--windows", optarg, 1, EXPERT_LOAD_MAX_WINDOWS, &a->windows))) return rc; break;
        case 'S': if ((rc = cli_long_arg(CMD, "--seed", optarg, 0, 2147483647L, &a->seed))) return rc; break;
        case 'w': a->write_load = optarg; break;
        case 'm': a->model = optarg; break;
        case 'c': a->cluster = optarg; break;
        case 'e': if ((rc = cli_long_arg(CMD, "--ep", optarg, 1, EXPERT_MAP_MAX_GPUS, &a->ep))) return rc; break;
        case 's': if ((rc = cli_long_arg(CMD, "--slots", optarg, 1, EXPERT_MAP_MAX_SLOTS, &a->slots))) return rc; break;
        case 'r': if ((rc = cli_long_arg(CMD, "--replicas", optarg, 0, EXPERT_MAP_MAX_SLOTS, &a->replicas))) return rc; break;
        case 'l': a->layout = optarg; break;
        case 'p':
            if (!strcmp(optarg, "train")) a->train = 1;
            else if (!strcmp(optarg, "infer")) a->train = 0;
            else return cli_usage_error(CMD, "--phase must be infer or train, not '%s'", optarg);
            break;
        case 'P':
            if (experts_placer_parse(optarg) < 0)
                return cli_usage_error(CMD, "unknown --placer '%s' (search, learned, eplb, eplb-hierarchical, eplb-global, "
                                            "eplb-swap, contiguous, round-robin, exact)", optarg);
            a->placer = optarg;
            break;
        case 'M': a->learned = optarg; break;
        case 't': if ((rc = cli_long_arg(CMD, "--window", optarg, 0, EXPERT_LOAD_MAX_WINDOWS - 1, &a->window))) return rc; a->have_window = 1; break;
        case 'x':
            if (!cli_double_arg(optarg, &a->margin) || a->margin < 0 || a->margin > 10)
                return cli_usage_error(CMD, "--copies-margin must be a number 0..10, not '%s'", optarg);
            a->have_margin = 1;
            break;
        case 'o': a->out = optarg; break;
        case 'g': a->sglang = optarg; break;
        case 'v': a->svg = optarg; break;
        case 'j': a->json = 1; break;
        case 'h': usage(stdout); return -1;
        default:
            return cli_usage_error(CMD, "unknown or incomplete option '%s'; see placer experts --help", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'; see placer experts --help", argv[optind]);
    if (!a->load == !a->gen) return cli_usage_error(CMD, "give one of --load FILE and --generate SETTING");
    if (!a->model) return cli_usage_error(CMD, "no model: pass --model (deepseek-v3, ...)");
    if (!a->cluster) return cli_usage_error(CMD, "no cluster: pass --cluster (h800-deepseek, ...)");
    if (!a->ep) return cli_usage_error(CMD, "no expert-parallel size: pass --ep N");
    if (a->slots >= 0 && a->replicas >= 0) return cli_usage_error(CMD, "give one of --slots and --replicas");
    return 0;
}

/* ---- output helpers ------------------------------------------------------ */

typedef struct {
    experts_score sc;
    moe_balance_layer *layer; /* [L] */
    double *gpu_load;         /* [L][G] */
    double moved;             /* slots per layer a re-plan from the window before moved */
    double plan_ms;
} result;

static void result_free(result *r) {
    free(r->layer);
    free(r->gpu_load);
}

static void progress(int tty, int done, int total, const char *what) {
    if (!tty) return;
    const int width = 30, fill = total > 0 ? width * done / total : width;
    fprintf(stderr, "\r\033[Kplacer experts: [%.*s%*s] %d/%d %s", fill, "##############################", width - fill, "",
            done, total, what);
    if (done == total) fprintf(stderr, "\r\033[K");
}

static void write_json_matrix_i32(FILE *f, const int32_t *v, int rows, int cols) {
    fprintf(f, "[");
    for (int r = 0; r < rows; r++) {
        fprintf(f, "%s\n    [", r ? "," : "");
        for (int c = 0; c < cols; c++) fprintf(f, "%s%d", c ? ", " : "", (int)v[(size_t)r * cols + c]);
        fprintf(f, "]");
    }
    fprintf(f, "]");
}

static int write_placement(const char *path, const expert_map *m, const result *r, const char *placer,
                           const char *model, const char *cluster) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    const int L = m->n_layers, E = m->n_experts, P = m->n_slots, G = m->n_gpus;
    const int width = expert_map_max_replicas(m);
    fprintf(f, "{\n  \"placer\": ");
    pl_json_string(f, placer);
    fprintf(f, ",\n  \"model\": ");
    pl_json_string(f, model);
    fprintf(f, ",\n  \"cluster\": ");
    pl_json_string(f, cluster);
    fprintf(f, ",\n  \"gpus\": %d,\n  \"gpus_per_node\": %d,\n  \"slots_per_gpu\": %d,\n  \"phy2log\": ", G,
            m->gpus_per_node, P / G);
    write_json_matrix_i32(f, m->phy2log, L, P);
    int32_t *l2p = malloc((size_t)E * (width > 0 ? width : 1) * sizeof *l2p);
    int *cnt = malloc((size_t)E * sizeof *cnt);
    if (!l2p || !cnt) {
        free(l2p), free(cnt), fclose(f);
        return -1;
    }
    fprintf(f, ",\n  \"log2phy\": [");
    for (int l = 0; l < L; l++) {
        expert_map_log2phy(m, l, width, l2p);
        fprintf(f, "%s\n   ", l ? "," : "");
        write_json_matrix_i32(f, l2p, E, width);
    }
    fprintf(f, "],\n  \"logcnt\": [");
    for (int l = 0; l < L; l++) {
        expert_map_logcnt(m, l, cnt);
        fprintf(f, "%s\n    [", l ? "," : "");
        for (int e = 0; e < E; e++) fprintf(f, "%s%d", e ? ", " : "", cnt[e]);
        fprintf(f, "]");
    }
    free(l2p), free(cnt);
    fprintf(f, "],\n  \"gpu_load\": [");
    for (int l = 0; l < L; l++) {
        fprintf(f, "%s\n    [", l ? "," : "");
        for (int g = 0; g < G; g++) fprintf(f, "%s%.6g", g ? ", " : "", r->gpu_load[(size_t)l * G + g]);
        fprintf(f, "]");
    }
    fprintf(f, "],\n  \"busiest_over_mean\": [");
    for (int l = 0; l < L; l++) fprintf(f, "%s%.6f", l ? ", " : "", r->layer[l].busiest_over_mean);
    fprintf(f, "],\n  \"scores\": {\"busiest_over_mean\": %.6f, \"copies_per_token\": %.6f, \"worst_nic_bytes\": %.0f, "
               "\"moved_per_layer\": %.3f, \"moe_layers_us\": %.3f}\n}\n",
            r->sc.busiest_over_mean, r->sc.copies_per_token, r->sc.worst_nic_bytes, r->moved,
            r->sc.compute_us + r->sc.comm_us);
    const int bad = ferror(f);
    return fclose(f) || bad ? -1 : 0;
}

static int write_sglang(const char *path, const expert_map *m) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"physical_to_logical_map\": ");
    write_json_matrix_i32(f, m->phy2log, m->n_layers, m->n_slots);
    fprintf(f, "}\n");
    const int bad = ferror(f);
    return fclose(f) || bad ? -1 : 0;
}

/* Two rows of bars, EPLB's per-GPU loads and the placement's, of one layer, relative to the mean. */
static int write_svg(const char *path, int layer, int G, int gpn, const double *before, const double *after,
                     const char *name_before, const char *name_after) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    double mean = 0, mx = 1.0;
    for (int g = 0; g < G; g++) mean += before[g] / G;
    for (int g = 0; g < G; g++) {
        if (mean > 0 && before[g] / mean > mx) mx = before[g] / mean;
        if (mean > 0 && after[g] / mean > mx) mx = after[g] / mean;
    }
    const int W = 60 + G * 12 + 20, ph = 160, H = 2 * ph + 70;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, H);
    fprintf(f, "<text x=\"10\" y=\"18\">MoE layer %d: tokens per GPU over the mean, %d GPUs (nodes of %d shaded)</text>\n",
            layer, G, gpn);
    for (int row = 0; row < 2; row++) {
        const double *v = row ? after : before;
        const int y0 = 40 + row * (ph + 15), base = y0 + ph - 20;
        double vmax = 0;
        for (int g = 0; g < G; g++)
            if (mean > 0 && v[g] / mean > vmax) vmax = v[g] / mean;
        fprintf(f, "<text x=\"10\" y=\"%d\">%s: busiest/mean %.3f</text>\n", y0 + 10, row ? name_after : name_before, vmax);
        for (int n = 0; n * gpn < G; n++)
            if (n % 2)
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f0f0f0\"/>\n", 50 + n * gpn * 12,
                        y0 + 15, gpn * 12, ph - 35);
        for (int g = 0; g < G; g++) {
            const double h = mean > 0 ? v[g] / mean / mx * (ph - 40) : 0;
            fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"10\" height=\"%.1f\" fill=\"%s\"/>\n", 51 + g * 12, base - h,
                    h, row ? "#2b7bb9" : "#c44e52");
        }
        const double y1 = base - 1.0 / mx * (ph - 40);
        fprintf(f, "<line x1=\"48\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"black\" stroke-dasharray=\"4 3\"/>\n", W - 10,
                y1, y1);
        fprintf(f, "<text x=\"8\" y=\"%.1f\">mean</text>\n", y1 + 4);
        fprintf(f, "<line x1=\"48\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", W - 10, base, base);
    }
    fprintf(f, "</svg>\n");
    const int bad = ferror(f);
    return fclose(f) || bad ? -1 : 0;
}

/* ---- the command ----------------------------------------------------------- */

/* Plan with pl on windows t - 1 (when t > 0) and t, score on ts; r gets the scores and the re-plan's moves. */
static pl_status run_placer(experts_planner *pp, experts_placer pl, const expert_load *ld, int t, int ts,
                            moe_balance_ctx *bc, const moe_balance_cost *cost, expert_map *m, result *r, char *msg,
                            size_t len) {
    expert_map *prev = NULL;
    pl_status st = PL_OK;
    if (t > 0) {
        if ((st = expert_map_clone(m, &prev, msg, len)) != PL_OK) return st;
        if ((st = experts_plan(pp, pl, ld, t - 1, NULL, prev, NULL, msg, len)) != PL_OK) goto out;
    }
    experts_plan_info info;
    if ((st = experts_plan(pp, pl, ld, t, prev, m, &info, msg, len)) != PL_OK) goto out;
    r->plan_ms = info.plan_us / 1e3;
    r->moved = prev ? (double)expert_map_moved(prev, m) / m->n_layers : 0.0;
    st = experts_score_map(bc, m, ld, ts, cost, &r->sc, r->layer, r->gpu_load, msg, len);
out:
    expert_map_destroy(prev);
    return st;
}

int cmd_experts(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? CLI_EXIT_OK : rc;
    const int tty = cli_stderr_is_tty();
    char msg[1024] = "", name[128] = "";
    gpt_config cfg;
    cluster clu;
    pl_status st;
    if ((st = model_config_load(a.model, &cfg, name, sizeof name, msg, sizeof msg)) != PL_OK) return cli_report(CMD, st, msg);
    if (!gpt_is_moe(&cfg))
        return cli_usage_error(CMD, "model '%s' has no routed experts; give a mixture-of-experts model (deepseek-v3, ...)",
                               a.model);
    if ((st = cluster_load(a.cluster, NULL, &clu, msg, sizeof msg)) != PL_OK) return cli_report(CMD, st, msg);
    const int E = cfg.n_experts, ep = (int)a.ep, L_model = gpt_moe_layers_in(&cfg, 0, cfg.n_layers);
    if (E % ep) return cli_usage_error(CMD, "--ep %d does not divide the model's %d experts; give an ep that divides them", ep, E);
    const int P = a.slots >= 0 ? (int)a.slots : a.replicas >= 0 ? E + (int)a.replicas : E;
    if (P < E) return cli_usage_error(CMD, "%d slots cannot hold the model's %d experts; give --slots at least %d", P, E, E);
    if (P % ep) return cli_usage_error(CMD, "%d slots are not divisible by %d GPUs; give --slots (or --replicas) making a multiple of --ep", P, ep);
    if ((int64_t)ep > cluster_n_gpus(&clu))
        return cli_usage_error(CMD, "--ep %d is more GPUs than cluster '%s' has (%lld)", ep, clu.name,
                               (long long)cluster_n_gpus(&clu));
    layout lay;
    char lt[256];
    if (a.layout) snprintf(lt, sizeof lt, "%s", a.layout);
    else snprintf(lt, sizeof lt, "tp=1,pp=1,dp=%d,ep=%d,mbs=1,gbs=%d", ep, ep, ep);
    if ((st = layout_parse(lt, &lay, msg, sizeof msg)) != PL_OK) return cli_report(CMD, st, msg);
    if (lay.ep != ep) return cli_usage_error(CMD, "the layout's ep is %d but --ep %d", lay.ep, ep);
    if ((st = layout_validate(&lay, &cfg, cluster_n_gpus(&clu), msg, sizeof msg)) != PL_OK) return cli_report(CMD, st, msg);
    /* the loads */
    expert_load *ld = NULL;
    progress(tty, 0, 4, a.gen ? "generating loads" : "reading loads");
    if (a.gen) {
        expert_gen_params gp;
        if ((st = expert_gen_params_load(a.gen, &gp, msg, sizeof msg)) != PL_OK) return cli_report(CMD, st, msg);
        if (gp.experts != E) return cli_usage_error(CMD, "settings '%s' have %d experts but the model %d", a.gen, gp.experts, E);
        gp.layers = L_model;
        if ((st = expert_gen_run(&gp, (int)a.windows, (uint64_t)a.seed, &ld, msg, sizeof msg)) != PL_OK)
            return cli_report(CMD, st, msg);
    } else if ((st = expert_load_read(a.load, &ld, msg, sizeof msg)) != PL_OK) {
        return cli_report(CMD, st, msg);
    }
    result ours = {0}, ref = {0};
    expert_map *m = NULL, *me = NULL;
    experts_planner *pp = NULL;
    moe_balance_ctx *bc = NULL;
    rc = CLI_EXIT_OK;
    if (ld->n_experts != E) {
        rc = cli_usage_error(CMD, "the load has %d experts but %s has %d (wrong shape); give a load of this model's experts",
                             ld->n_experts, name, E);
        goto out;
    }
    if (ld->n_layers != L_model) {
        rc = cli_usage_error(CMD, "the load has %d layers but %s has %d MoE layers (wrong shape); give a load of every MoE layer",
                             ld->n_layers, name, L_model);
        goto out;
    }
    if (a.write_load) {
        FILE *f = fopen(a.write_load, "w");
        if (!f || expert_load_write_json(ld, f) != PL_OK || fclose(f)) {
            rc = cli_report(CMD, PL_ERR_IO, "cannot write the loads");
            goto out;
        }
    }
    const int W = ld->n_windows;
    int t = a.have_window ? (int)a.window : (W >= 2 ? W - 2 : 0);
    if (t >= W) {
        rc = cli_usage_error(CMD, "--window %d is outside the load's %d windows", t, W);
        goto out;
    }
    const int ts = t + 1 < W ? t + 1 : t;
    moe_balance_group g;
    moe_balance_group_of(&clu, &cfg, &lay, &g);
    moe_balance_cost cost = {.clu = &clu, .cfg = &cfg, .lay = &lay, .training = a.train};
    compute_params_default(&cost.compute);
    moe_params_default(&cost.moe);
    experts_model model;
    experts_model_default(&model);
    const experts_placer pl = (experts_placer)experts_placer_parse(a.placer);
    if (pl == EXPERTS_LEARNED || a.learned) {
        if ((st = expert_model_load(a.learned ? a.learned : "learned-deepseek-v3", &model, msg, sizeof msg)) != PL_OK) {
            rc = cli_report(CMD, st, msg);
            goto out;
        }
    }
    experts_options o = {.shape = {E, P, ep, g.gpus_per_node, cfg.router_groups},
                         .top_k = cfg.top_k,
                         .copies_margin = a.have_margin ? a.margin : -1.0,
                         .model = &model,
                         .cost = &cost};
    if ((st = experts_planner_create(&o, ld->n_samples, ld->sample_k, &pp, msg, sizeof msg)) != PL_OK ||
        (st = moe_balance_ctx_create(&g, E, P, &bc, msg, sizeof msg)) != PL_OK ||
        (st = expert_map_create(ld->n_layers, E, P, ep, g.gpus_per_node, &m, msg, sizeof msg)) != PL_OK ||
        (st = expert_map_create(ld->n_layers, E, P, ep, g.gpus_per_node, &me, msg, sizeof msg)) != PL_OK) {
        rc = cli_report(CMD, st, msg);
        goto out;
    }
    const int L = ld->n_layers;
    ours.layer = malloc(sizeof *ours.layer * (size_t)L), ref.layer = malloc(sizeof *ref.layer * (size_t)L);
    ours.gpu_load = malloc(sizeof(double) * (size_t)L * ep), ref.gpu_load = malloc(sizeof(double) * (size_t)L * ep);
    if (!ours.layer || !ref.layer || !ours.gpu_load || !ref.gpu_load) {
        rc = cli_report(CMD, PL_ERR_NOMEM, "out of memory");
        goto out;
    }
    progress(tty, 1, 4, "planning");
    if ((st = run_placer(pp, pl, ld, t, ts, bc, &cost, m, &ours, msg, sizeof msg)) != PL_OK) {
        rc = cli_report(CMD, st, msg);
        goto out;
    }
    progress(tty, 2, 4, "planning EPLB");
    if ((st = run_placer(pp, EXPERTS_EPLB, ld, t, ts, bc, &cost, me, &ref, msg, sizeof msg)) != PL_OK) {
        rc = cli_report(CMD, st, msg);
        goto out;
    }
    progress(tty, 3, 4, "writing");
    /* the change of the MoE layers' time, and the part the busiest GPU's load explains */
    double d_busiest = 0, d_rest = 0;
    for (int l = 0; l < L; l++) {
        double c1, m1, c2, m2, c3, m3;
        moe_balance_layer_time(&cost, ref.layer[l].busiest_over_mean, NULL, 0, ref.layer[l].worst_nic_bytes, &c1, &m1);
        moe_balance_layer_time(&cost, ours.layer[l].busiest_over_mean, NULL, 0, ref.layer[l].worst_nic_bytes, &c2, &m2);
        moe_balance_layer_time(&cost, ours.layer[l].busiest_over_mean, NULL, 0, ours.layer[l].worst_nic_bytes, &c3, &m3);
        d_busiest += (c2 + m2) - (c1 + m1);
        d_rest += (c3 + m3) - (c2 + m2);
    }
    int worst = 0;
    for (int l = 1; l < L; l++)
        if (ref.layer[l].busiest_over_mean > ref.layer[worst].busiest_over_mean) worst = l;
    const double ebytes = (double)gpt_expert_params(&cfg) * precision_act_bytes(lay.prec);
    const double rep_bytes = (double)(P - E) / ep * ebytes * L;
    if (a.out && write_placement(a.out, m, &ours, a.placer, name, clu.name)) {
        rc = cli_report(CMD, PL_ERR_IO, "cannot write the placement file");
        goto out;
    }
    if (a.sglang && write_sglang(a.sglang, m)) {
        rc = cli_report(CMD, PL_ERR_IO, "cannot write the SGLang file");
        goto out;
    }
    if (a.svg && write_svg(a.svg, worst, ep, g.gpus_per_node, ref.gpu_load + (size_t)worst * ep,
                           ours.gpu_load + (size_t)worst * ep, "eplb", a.placer)) {
        rc = cli_report(CMD, PL_ERR_IO, "cannot write the figure");
        goto out;
    }
    progress(tty, 4, 4, "");
    const double t_ours = ours.sc.compute_us + ours.sc.comm_us, t_ref = ref.sc.compute_us + ref.sc.comm_us;
    if (a.json) {
        printf("{\n  \"model\": ");
        pl_json_string(stdout, name);
        printf(",\n  \"cluster\": ");
        pl_json_string(stdout, clu.name);
        printf(",\n  \"ep\": %d, \"gpus_per_node\": %d, \"slots\": %d, \"layers\": %d, \"plan_window\": %d, "
               "\"score_window\": %d, \"load_source\": ",
               ep, g.gpus_per_node, P, L, t, ts);
        pl_json_string(stdout, ld->source);
        printf(",\n  \"copies_sampled\": %s, \"replica_bytes_per_gpu\": %.0f,\n", ours.sc.copies_sampled ? "true" : "false",
               rep_bytes);
        const result *rs[2] = {&ours, &ref};
        const char *nm[2] = {a.placer, "eplb"};
        for (int i = 0; i < 2; i++) {
            const result *r = rs[i];
            printf("  \"%s\": {\"placer\": ", i ? "eplb" : "placement");
            pl_json_string(stdout, nm[i]);
            printf(", \"busiest_over_mean\": %.6f, \"worst_busiest_over_mean\": %.6f, \"copies_per_token\": %.6f, "
                   "\"worst_nic_bytes\": %.0f, \"moved_per_layer\": %.3f, \"moved_bytes\": %.0f, \"plan_ms\": %.3f, "
                   "\"moe_layers_us\": %.3f, \"compute_us\": %.3f, \"comm_us\": %.3f, \"per_layer\": [",
                   r->sc.busiest_over_mean, r->sc.worst_busiest_over_mean, r->sc.copies_per_token, r->sc.worst_nic_bytes,
                   r->moved, r->moved * L * ebytes, r->plan_ms, r->sc.compute_us + r->sc.comm_us, r->sc.compute_us,
                   r->sc.comm_us);
            for (int l = 0; l < L; l++) printf("%s%.4f", l ? ", " : "", r->layer[l].busiest_over_mean);
            printf("]},\n");
        }
        printf("  \"time_change_us\": %.3f, \"time_change_busiest_us\": %.3f, \"time_change_rest_us\": %.3f\n}\n",
               t_ours - t_ref, d_busiest, d_rest);
        goto out;
    }
    printf("%s on %s: EP %d (%d node%s of %d), %d slots (%d a GPU, %d replicas), %d MoE layers\n", name, clu.name, ep,
           ep / g.gpus_per_node, ep / g.gpus_per_node == 1 ? "" : "s", g.gpus_per_node, P, P / ep, P - E, L);
    printf("loads: %s (%s), %d windows; planned on window %d, scored on window %d\n", a.gen ? a.gen : a.load, ld->source,
           W, t, ts);
    printf("\n%-30s %14s %14s %9s\n", "", a.placer, "eplb", "change");
    printf("%-30s %14.3f %14.3f %+8.1f%%\n", "busiest/mean, mean of layers", ours.sc.busiest_over_mean,
           ref.sc.busiest_over_mean, 100 * (ours.sc.busiest_over_mean / ref.sc.busiest_over_mean - 1));
    printf("%-30s %14.3f %14.3f %+8.1f%%\n", "busiest/mean, worst layer", ours.sc.worst_busiest_over_mean,
           ref.sc.worst_busiest_over_mean, 100 * (ours.sc.worst_busiest_over_mean / ref.sc.worst_busiest_over_mean - 1));
    printf("%-30s %14.2f %14.2f %+8.1f%%   (%s)\n", "cross-node copies per token", ours.sc.copies_per_token,
           ref.sc.copies_per_token,
           ref.sc.copies_per_token > 0 ? 100 * (ours.sc.copies_per_token / ref.sc.copies_per_token - 1) : 0.0,
           ours.sc.copies_sampled ? "sampled tokens" : "experts independent given the counts");
    printf("%-30s %11.1f MB %11.1f MB %+8.1f%%   (one dispatch, %.0f tokens a GPU)\n", "worst NIC", ours.sc.worst_nic_bytes / 1e6,
           ref.sc.worst_nic_bytes / 1e6,
           ref.sc.worst_nic_bytes > 0 ? 100 * (ours.sc.worst_nic_bytes / ref.sc.worst_nic_bytes - 1) : 0.0, g.tokens_per_gpu);
    if (t > 0)
        printf("%-30s %8.1f slots %8.1f slots            (a layer, re-planning window %d -> %d; %.2f GB vs %.2f GB)\n",
               "expert weights moved", ours.moved, ref.moved, t - 1, t, ours.moved * L * ebytes / 1e9,
               ref.moved * L * ebytes / 1e9);
    printf("%-30s %11.1f ms %11.1f ms\n", "planner time", ours.plan_ms, ref.plan_ms);
    printf("%-30s %11.3f ms %11.3f ms %+8.1f%%   (%s, busiest GPU, one micro-batch)\n", "MoE layers' simulated time",
           t_ours / 1e3, t_ref / 1e3, t_ref > 0 ? 100 * (t_ours / t_ref - 1) : 0.0, a.train ? "forward + backward" : "forward");
    printf("%-30s %+11.3f ms of which the busiest GPU's load %+.3f ms, the network (NIC bytes) %+.3f ms\n",
           "  its change", (t_ours - t_ref) / 1e3, d_busiest / 1e3, d_rest / 1e3);
    printf("%-30s %11.2f GB a GPU (%d replicas a layer over %d GPUs)\n", "replicas' memory", rep_bytes / 1e9, P - E, ep);
    if (a.out) printf("\nwrote %s (phy2log, log2phy, logcnt, gpu_load, busiest_over_mean)\n", a.out);
    if (a.sglang) printf("wrote %s (physical_to_logical_map)\n", a.sglang);
    if (a.svg) printf("wrote %s (layer %d: per-GPU loads, eplb and %s)\n", a.svg, worst, a.placer);
out:
    result_free(&ours);
    result_free(&ref);
    expert_map_destroy(m);
    expert_map_destroy(me);
    experts_planner_destroy(pp);
    moe_balance_ctx_destroy(bc);
    expert_load_destroy(ld);
    return rc;
}
