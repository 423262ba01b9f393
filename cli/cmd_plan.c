/*
 * cmd_plan.c: `placer plan` searches the parallel layouts of a model on a
 * cluster (policy/plan.h), prints the fastest that fit with their predicted
 * step time, throughput, MFU, memory and time breakdown, and writes the
 * winner in a training framework's own format (policy/export_plan.h).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cluster_file.h"
#include "export_plan.h"
#include "model_config.h"
#include "plan.h"
#include "plan_profile.h"
#include "util.h"

static void plan_usage(FILE *f) {
    fprintf(f,
            "usage: placer plan --model FILE|PRESET --cluster NAME|FILE [--gpus N]\n"
            "       placer plan --db PROFILE.db [--model PRESET] [--fix mbs=B/m] [--json]\n"
            "                   [--global-batch B] [--seq S] [--precision P] [--top K]\n"
            "                   [--max-tp N] [--max-cp N] [--max-vp N] [--max-mbs N] [--fix LIST]\n"
            "                   [--compare LAYOUT] [--splits] [--json] [--trace FILE]\n"
            "                   [--export megatron|torchtitan|deepspeed|json]\n\n"
            "Searches tensor, context, pipeline (with interleaving) and data parallelism,\n"
            "micro-batch size, recomputation, optimizer sharding and the stage boundaries\n"
            "for the fastest layout that fits, predicted by the layout simulator; prints the\n"
            "top layouts with step time, tokens/s, MFU, memory per GPU and headroom, and the\n"
            "winner's time breakdown. Exits 1 when no layout fits (with the memory needed).\n\n"
            "  --model         a Hugging Face config.json, or a preset (default, gpt12, ...)\n"
            "  --cluster       a cluster file, or a name in data/clusters (placer layout lists them)\n"
            "  --gpus          GPUs to use (default: all of the cluster's)\n"
            "  --global-batch  sequences per step (default: the preset's batch)\n"
            "  --seq           sequence length (default: the model's)\n"
            "  --precision     bf16 (default), fp16, fp8, tf32 or fp32\n"
            "  --top           layouts to print (default 5, at most %d)\n"
            "  --max-tp        largest tensor-parallel size tried (default: GPUs per node)\n"
            "  --max-cp        largest context-parallel size (default: keeps seq / cp >= 4096)\n"
            "  --max-vp        most virtual chunks per stage tried (default 4)\n"
            "  --max-mbs       largest micro-batch tried (default 16)\n"
            "  --attention     flash (default) or unfused attention kernels (2021's Megatron)\n"
            "  --dp-overlap    1 (default): gradient buckets reduced during backward; 0: after it\n"
            "                  (Megatron's 'local' DDP of SC21)\n"
            "  --grad-bytes    bytes per gradient element on the wire (default 4: fp32)\n"
            "  --reserve       GB per GPU to leave free (allocator, fragmentation); default 0\n"
            "  --fix           hold dimensions fixed, e.g. tp=8,pp=16 or dp=1,mbs=4 (keys: tp cp\n"
            "                  pp vp dp mbs recompute zero)\n"
            "  --compare       also simulate this layout (placer layout's text form, e.g. a\n"
            "                  published one: tp=8,pp=4,vp=3,dp=32,mbs=2,gbs=1792,recompute=full)\n"
            "  --splits        for the best layout: its stage split against the uniform split,\n"
            "                  DeepSpeed's parameters split and the hand-made near-uniform ones\n"
            "  --json          the whole plan as JSON on stdout\n"
            "  --trace         write the best layout's Chrome trace to FILE\n"
            "  --export        print only the best layout in that framework's format; the search\n"
            "                  then keeps only what that framework runs (see --for)\n"
            "  --for           megatron, torchtitan, deepspeed or any: search only the layouts\n"
            "                  that framework runs as planned (default: any, or --export's)\n"
            "  --db            plan on a measured profile instead of a cluster file: pipelines\n"
            "                  over its devices (tp = cp = dp = 1), every micro-batch count and\n"
            "                  GPipe / 1F1B, stage boundaries by the exact DP of placer search\n",
            PLAN_MAX_TOP);
}

static int parse_long(const char *name, const char *text, long lo, long hi, long *out) {
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < lo || v > hi) {
        cli_usage_error("plan", "%s must be an integer in %ld..%ld, not '%s'", name, lo, hi, text);
        return -1;
    }
    *out = v;
    return 0;
}

typedef struct {
    int tty;
    double t_last;
} plan_progress;

static void on_progress(void *ctx, int64_t done, int64_t total) {
    plan_progress *p = ctx;
    const double now = pl_now_us();
    if (!p->tty || (now - p->t_last < 1e5 && done < total)) return;
    p->t_last = now;
    const int width = 30, fill = total > 0 ? (int)(width * done / total) : width;
    fprintf(stderr, "\r\033[Kplacer plan: [%.*s%*s] %lld/%lld bounded layouts", fill,
            "##############################", width - fill, "", (long long)done, (long long)total);
}

/* "tp8 cp1 pp16x2 dp64 mbs1 full z1" */
static void layout_short(const layout *l, char *buf, size_t n) {
    static const char *rc[] = {"none", "sel", "full"};
    static const char *zn[] = {"z0", "z1", "z2", "z3", "fsdp"};
    int off = snprintf(buf, n, "tp%d cp%d pp%d", l->tp, l->cp, l->pp);
    if (l->vp > 1) off += snprintf(buf + off, n - (size_t)off, "x%d", l->vp);
    snprintf(buf + off, n - (size_t)off, " dp%d mbs%d %s %s", l->dp, l->micro_batch, rc[l->recompute], zn[l->zero]);
}

/* "3/4/5" or "uniform" */
static void split_text(const layout *l, int n_layers, char *buf, size_t n) {
    int ch[LAYOUT_MAX_CHUNKS];
    if (layout_chunk_layers(l, n_layers, ch, NULL, 0) != PL_OK) {
        snprintf(buf, n, "?");
        return;
    }
    if (l->n_stage_layers == 0) {
        snprintf(buf, n, "uniform");
        return;
    }
    /* runs of three or more equal counts as v*n: 1/2*62/1 */
    size_t off = 0;
    const int C = l->pp * l->vp;
    for (int c = 0; c < C && off < n;) {
        int r = 1;
        while (c + r < C && ch[c + r] == ch[c]) r++;
        if (r >= 3) off += (size_t)snprintf(buf + off, n - off, "%s%d*%d", c ? "/" : "", ch[c], r);
        else
            for (int k = 0; k < r && off < n; k++) off += (size_t)snprintf(buf + off, n - off, "%s%d", c + k ? "/" : "", ch[c]);
        c += r;
    }
}

static void print_row(const char *mark, const plan_entry *e, int n_layers) {
    char lay[96], sp[256];
    layout_short(&e->l, lay, sizeof lay);
    split_text(&e->l, n_layers, sp, sizeof sp);
    if (e->refined) {
        size_t k = strlen(sp);
        snprintf(sp + k, sizeof sp - k, " (DP + %d move%s)", e->refined, e->refined == 1 ? "" : "s");
    }
    const layout_result *r = &e->res;
    printf("%-3s %-34s %10.2f %12.0f %6.1f%% %9.2f %9.2f  %s\n", mark, lay, r->step_us / 1e3, r->tokens_per_s,
           100 * r->mfu, r->mem.total / 1e9, (r->mem_cap - r->mem.total) / 1e9, sp);
}

static void print_breakdown(const layout_result *r) {
    printf("  time:");
    for (int p = 0; p < LAYOUT_T_COUNT; p++)
        if (p != LAYOUT_T_RECOMPUTE || r->parts_us[p] > 0)
            printf(" %s %.2f ms%s", layout_time_part_name((layout_time_part)p), r->parts_us[p] / 1e3,
                   p + 1 < LAYOUT_T_COUNT ? "," : "");
    printf("\n  memory (stage %d of the worst): params %.2f GB, grads %.2f, optimizer %.2f, activations %.2f, "
           "buffers %.2f, embedding/head %.2f = %.2f GB of %.2f GB\n",
           r->worst_stage, r->mem.params / 1e9, r->mem.grads / 1e9, r->mem.optimizer / 1e9, r->mem.activations / 1e9,
           r->mem.buffers / 1e9, r->mem.embedding_head / 1e9, r->mem.total / 1e9, r->mem_cap / 1e9);
    printf("  %.1f TFLOP/s per GPU of model FLOPs (%.1f with recompute), %d micro-batches per pipeline\n",
           r->model_tflops_per_gpu, r->hw_tflops_per_gpu, r->micro_batches);
}

/* One simulated split for --splits. */
typedef struct {
    char label[48];
    plan_entry e;
    int ok; /* 0: not expressible */
} split_row;

/* Near-uniform splits people write by hand (vp = 1): the first and the
 * last stage one layer lighter or heavier than uniform, the middle stages
 * taking the difference evenly. */
static int human_splits(const layout *best, int L, int out[][LAYOUT_MAX_CHUNKS], int max) {
    const int P = best->pp;
    int n = 0;
    if (best->vp != 1 || P < 2) return 0;
    const int u = L / P;
    for (int d0 = -1; d0 <= 1; d0++)
        for (int d1 = -1; d1 <= 1; d1++) {
            const int first = u + d0, last = u + d1;
            if (first < 1 || last < 1 || n >= max) continue;
            const int mid = L - first - last;
            if (P == 2 ? mid != 0 : (mid < P - 2 || mid % (P - 2 > 0 ? P - 2 : 1) != 0)) continue;
            out[n][0] = first;
            for (int s = 1; s < P - 1; s++) out[n][s] = mid / (P - 2);
            out[n][P - 1] = last;
            n++;
        }
    return n;
}

static int compare_splits(const gpt_config *cfg, const cluster *c, const layout_sim_params *prm, const plan_entry *best,
                          int json) {
    const int L = cfg->n_layers, P = best->l.pp;
    char msg[256];
    split_row *rows = calloc(16, sizeof *rows);
    if (!rows) return cli_report("plan", PL_ERR_NOMEM, NULL);
    int n = 0;
    /* the plan's own */
    rows[n].e = *best;
    snprintf(rows[n].label, sizeof rows[n].label, "plan (%s%s)", best->split_dp ? "DP split" : "uniform",
             best->refined ? " + moves" : "");
    rows[n++].ok = 1;
    /* uniform */
    rows[n].e.l = best->l;
    rows[n].e.l.n_stage_layers = 0;
    snprintf(rows[n].label, sizeof rows[n].label, "uniform");
    rows[n].ok = plan_simulate(cfg, c, &rows[n].e.l, prm, &rows[n].e.res, msg, sizeof msg) == PL_OK;
    n++;
    /* DeepSpeed's parameters split (vp = 1) */
    snprintf(rows[n].label, sizeof rows[n].label, "DeepSpeed parameters");
    rows[n].e.l = best->l;
    if (best->l.vp == 1 && plan_deepspeed_parameters_split(cfg, P, rows[n].e.l.stage_layers, msg, sizeof msg) == PL_OK) {
        rows[n].e.l.n_stage_layers = P;
        rows[n].ok = plan_simulate(cfg, c, &rows[n].e.l, prm, &rows[n].e.res, msg, sizeof msg) == PL_OK;
    }
    n++;
    /* the best near-uniform hand split */
    int hs[9][LAYOUT_MAX_CHUNKS];
    const int nh = human_splits(&best->l, L, hs, 9);
    int hbest = -1;
    plan_entry he;
    for (int i = 0; i < nh; i++) {
        he.l = best->l;
        he.l.n_stage_layers = P;
        memcpy(he.l.stage_layers, hs[i], sizeof(int) * (size_t)P);
        if (plan_simulate(cfg, c, &he.l, prm, &he.res, msg, sizeof msg) != PL_OK) continue;
        if (hbest < 0 || (!he.res.oom && (rows[n].e.res.oom || he.res.step_us < rows[n].e.res.step_us))) {
            rows[n].e = he;
            hbest = i;
        }
    }
    snprintf(rows[n].label, sizeof rows[n].label, "best hand split (of %d)", nh);
    rows[n].ok = hbest >= 0;
    n++;
    if (json) {
        printf(", \"splits\": [");
        for (int i = 0; i < n; i++) {
            int ch[LAYOUT_MAX_CHUNKS];
            printf("%s{\"label\": \"%s\", \"ok\": %s", i ? ", " : "", rows[i].label, rows[i].ok ? "true" : "false");
            if (rows[i].ok && layout_chunk_layers(&rows[i].e.l, L, ch, NULL, 0) == PL_OK) {
                printf(", \"plan\": ");
                plan_export_json(stdout, cfg, &rows[i].e.l, ch, &rows[i].e.res);
            }
            printf("}");
        }
        printf("]");
    } else {
        printf("\nstage splits of the best layout (same simulator):\n");
        for (int i = 0; i < n; i++) {
            char sp[256];
            if (!rows[i].ok) {
                const char *why = best->l.vp > 1 ? "vp > 1: DeepSpeed has no interleaving"
                                                 : "leaves a stage without a transformer layer";
                if (i == 3) why = best->l.vp > 1 ? "hand splits are for vp = 1" : "none expressible";
                printf("  %-26s  n/a (%s)\n", rows[i].label, why);
                continue;
            }
            split_text(&rows[i].e.l, L, sp, sizeof sp);
            printf("  %-26s %10.3f ms %s %-8s %s\n", rows[i].label, rows[i].e.res.step_us / 1e3,
                   rows[i].e.res.oom ? "OOM" : "   ", i ? "" : "", sp);
        }
    }
    free(rows);
    return CLI_EXIT_OK;
}

/* placer plan --db: the pipelines of a measured profile (plan_profile.h). */
static int plan_on_profile(const char *db, const char *config, const plan_options *o, int json) {
    if (o->fix_tp > 1 || o->fix_cp > 1 || o->fix_dp > 1 || o->fix_vp > 1 || o->fix_recompute > 0 || o->fix_zero > 0)
        return cli_usage_error("plan", "--db: a profile has only pipelines (tp = cp = dp = vp = 1, no recompute or "
                                       "zero); --fix may hold pp and mbs");
    plan_profile_options po = {db, config, 0, -1, 0, NULL, 0};
    plan_profile_result r;
    char msg[512] = "";
    pl_status st;
    if (o->fix_mbs > 0) {
        /* m = batch / mbs: learn the batch first */
        st = plan_profile_search(&(plan_profile_options){db, config, 1, 0, 0, NULL, 1}, &r, msg, sizeof msg);
        if (st != PL_OK) return cli_report("plan", st, msg);
        const int batch = r.batch;
        plan_profile_result_free(&r);
        if (batch % o->fix_mbs)
            return cli_usage_error("plan", "--fix mbs=%d does not divide the profile's batch %d", o->fix_mbs, batch);
        po.micro_batches = batch / o->fix_mbs;
    }
    st = plan_profile_search(&po, &r, msg, sizeof msg);
    if (st != PL_OK) return cli_report("plan", st, msg);
    int shown = 0;
    if (json) printf("{\"db\": \"%s\", \"batch\": %d, \"simulated\": %d, \"wall_s\": %.3f, \"plans\": [", db, r.batch,
                     r.simulated, r.wall_s);
    else
        printf("placer plan: profile %s, batch %d: pipelines (tp = cp = dp = 1) by the exact stage DP, %d partitions "
               "simulated in %.2f s\n\n%-3s %4s %-6s %3s %-12s %-16s %10s %9s\n",
               db, r.batch, r.simulated, r.wall_s, "#", "m", "order", "pp", "devices", "layers per stage", "step ms",
               "peak GB");
    int best_fit = -1;
    for (int i = 0; i < r.n; i++) {
        const plan_profile_entry *e = &r.items[i];
        if (o->fix_pp && e->pp != o->fix_pp) continue;
        if (best_fit < 0 && !e->ev.oom) best_fit = i;
        if (shown >= o->top_k) continue;
        char devs[64] = "", lay[64] = "";
        size_t a = 0, b = 0;
        for (int s = 0; s < e->pp; s++) {
            a += (size_t)snprintf(devs + a, sizeof devs - a, "%s%d", s ? "," : "", e->stage_dev[s]);
            b += (size_t)snprintf(lay + b, sizeof lay - b, "%s%d", s ? (json ? "," : "/") : "", e->stage_layers[s]);
        }
        if (json)
            printf("%s{\"micro_batches\": %d, \"mbs\": %d, \"schedule\": \"%s\", \"pp\": %d, \"devices\": [%s], "
                   "\"stage_layers\": [%s], \"step_ms\": %.6f, \"peak_bytes\": %lld, \"oom\": %s}",
                   shown ? ", " : "", e->micro_batches, r.batch / e->micro_batches, e->schedule ? "1f1b" : "gpipe", e->pp,
                   devs, lay, e->ev.step_us / 1e3, (long long)e->ev.peak_bytes, e->ev.oom ? "true" : "false");
        else {
            printf("%-3d %4d %-6s %3d %-12s %-16s %10.3f %9.2f%s\n", shown + 1, e->micro_batches,
                   e->schedule ? "1f1b" : "gpipe", e->pp, devs, lay, e->ev.step_us / 1e3, e->ev.peak_bytes / 1e9,
                   e->ev.oom ? "  OOM" : (i == best_fit ? "  *" : ""));
        }
        shown++;
    }
    if (json) printf("]}\n");
    plan_profile_result_free(&r);
    if (shown == 0) return cli_usage_error("plan", "no pipeline of the profile matches --fix");
    if (best_fit < 0) {
        fprintf(stderr, "placer plan: no pipeline of %s fits its devices' memory\n", db);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

int cmd_plan(int argc, char **argv) {
    const char *model = NULL, *cluster_name = NULL, *compare = NULL, *trace = NULL, *export_name = NULL, *db = NULL;
    long gpus = 0, gbs = 0, seq = 0, v;
    int json = 0, splits = 0;
    plan_options o;
    plan_options_default(&o);
    layout_sim_params sim;
    layout_sim_params_default(&sim);
    int sim_set = 0, framework_set = 0;
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},    {"cluster", required_argument, 0, 'c'},
        {"gpus", required_argument, 0, 'n'},     {"global-batch", required_argument, 0, 'b'},
        {"seq", required_argument, 0, 's'},      {"precision", required_argument, 0, 'p'},
        {"top", required_argument, 0, 'k'},      {"max-tp", required_argument, 0, 'T'},
        {"max-cp", required_argument, 0, 'C'},   {"max-vp", required_argument, 0, 'V'},
        {"max-mbs", required_argument, 0, 'M'},  {"compare", required_argument, 0, 'x'},
        {"splits", no_argument, 0, 'S'},         {"json", no_argument, 0, 'j'},
        {"trace", required_argument, 0, 't'},    {"export", required_argument, 0, 'e'},
        {"fix", required_argument, 0, 'F'},      {"db", required_argument, 0, 'd'},
        {"attention", required_argument, 0, 'A'}, {"dp-overlap", required_argument, 0, 'O'},
        {"grad-bytes", required_argument, 0, 'G'}, {"for", required_argument, 0, 'W'},
        {"reserve", required_argument, 0, 'R'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int ch;
    char msg[512] = "";
    plan_export_format fmt = PLAN_EXPORT_JSON;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'm': model = optarg; break;
        case 'c': cluster_name = optarg; break;
        case 'n': if (parse_long("--gpus", optarg, 1, 1L << 30, &gpus)) return CLI_EXIT_USAGE; break;
        case 'b': if (parse_long("--global-batch", optarg, 1, 1L << 30, &gbs)) return CLI_EXIT_USAGE; break;
        case 's': if (parse_long("--seq", optarg, 1, 1L << 24, &seq)) return CLI_EXIT_USAGE; break;
        case 'p':
            if (precision_parse(optarg, &o.prec, msg, sizeof msg) != PL_OK) return cli_usage_error("plan", "%s", msg);
            break;
        case 'k': if (parse_long("--top", optarg, 1, PLAN_MAX_TOP, &v)) return CLI_EXIT_USAGE; o.top_k = (int)v; break;
        case 'T': if (parse_long("--max-tp", optarg, 1, 1024, &v)) return CLI_EXIT_USAGE; o.max_tp = (int)v; break;
        case 'C': if (parse_long("--max-cp", optarg, 1, 1024, &v)) return CLI_EXIT_USAGE; o.max_cp = (int)v; break;
        case 'V': if (parse_long("--max-vp", optarg, 1, 64, &v)) return CLI_EXIT_USAGE; o.max_vp = (int)v; break;
        case 'M': if (parse_long("--max-mbs", optarg, 1, 4096, &v)) return CLI_EXIT_USAGE; o.max_mbs = (int)v; break;
        case 'x': compare = optarg; break;
        case 'd': db = optarg; break;
        case 'R': {
            char *end = NULL;
            double gb = strtod(optarg, &end);
            if (!*optarg || *end || !(gb >= 0 && gb < 1e6))
                return cli_usage_error("plan", "--reserve takes GB per GPU (e.g. 4), not '%s'", optarg);
            o.reserve_bytes = (int64_t)(gb * 1e9);
            break;
        }
        case 'W': {
            int k = -1;
            for (int i = 0; i < PLAN_FRAMEWORK_COUNT; i++)
                if (!strcmp(optarg, plan_framework_name((plan_framework)i))) k = i;
            if (k < 0) return cli_usage_error("plan", "--for must be megatron, torchtitan, deepspeed or any, not '%s'", optarg);
            o.framework = k;
            framework_set = 1;
            break;
        }
        case 'A':
            if (!strcmp(optarg, "flash")) sim.compute.attention = ATTENTION_FLASH;
            else if (!strcmp(optarg, "unfused")) sim.compute.attention = ATTENTION_UNFUSED;
            else return cli_usage_error("plan", "--attention must be flash or unfused, not '%s'", optarg);
            sim_set = 1;
            break;
        case 'O': if (parse_long("--dp-overlap", optarg, 0, 1, &v)) return CLI_EXIT_USAGE; sim.dp_overlap_grad = (int)v; sim_set = 1; break;
        case 'G': if (parse_long("--grad-bytes", optarg, 1, 8, &v)) return CLI_EXIT_USAGE; sim.grad_comm_bytes = (double)v; sim_set = 1; break;
        case 'F':
            if (plan_parse_fixed(optarg, &o, msg, sizeof msg) != PL_OK) return cli_usage_error("plan", "--fix: %s", msg);
            break;
        case 'S': splits = 1; break;
        case 'j': json = 1; break;
        case 't': trace = optarg; break;
        case 'e':
            if (plan_export_parse_format(optarg, &fmt, msg, sizeof msg) != PL_OK) return cli_usage_error("plan", "%s", msg);
            export_name = optarg;
            break;
        case 'h': plan_usage(stdout); return CLI_EXIT_OK;
        default:
            return cli_usage_error("plan", "unknown or incomplete option '%s'; see placer plan --help", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("plan", "unexpected argument '%s'; see placer plan --help", argv[optind]);
    if (sim_set) o.sim = &sim;
    if (export_name && !framework_set)
        o.framework = fmt == PLAN_EXPORT_MEGATRON     ? PLAN_FRAMEWORK_MEGATRON
                      : fmt == PLAN_EXPORT_TORCHTITAN ? PLAN_FRAMEWORK_TORCHTITAN
                      : fmt == PLAN_EXPORT_DEEPSPEED  ? PLAN_FRAMEWORK_DEEPSPEED
                                                      : PLAN_FRAMEWORK_ANY;
    if (db) {
        if (sim_set) return cli_usage_error("plan", "--db uses the profile's calibrated simulator; --attention, --dp-overlap and --grad-bytes need a cluster");
        if (cluster_name || compare || trace || export_name || splits || gpus || gbs || seq)
            return cli_usage_error("plan", "--db plans on the profile's own devices and batch; --cluster, --gpus, "
                                           "--global-batch, --seq, --compare, --splits, --trace and --export need a "
                                           "cluster (drop --db)");
        return plan_on_profile(db, model, &o, json);
    }
    if (!model) return cli_usage_error("plan", "--model is required (a config.json or a preset such as gpt12)");
    if (!cluster_name) return cli_usage_error("plan", "--cluster is required (a name in data/clusters or a file)");
    if (json && export_name) return cli_usage_error("plan", "--json and --export both write stdout; give one");

    gpt_config cfg;
    char mname[64] = "";
    pl_status st = model_config_load(model, &cfg, mname, sizeof mname, msg, sizeof msg);
    if (st != PL_OK) return cli_report("plan", st, msg);
    if (seq > 0) cfg.seq_len = (int)seq;
    cluster c;
    st = cluster_load(cluster_name, NULL, &c, msg, sizeof msg);
    if (st != PL_OK) return cli_report("plan", st, msg);
    o.gpus = gpus > 0 ? gpus : cluster_n_gpus(&c);
    if (o.gpus > cluster_n_gpus(&c))
        return cli_usage_error("plan", "--gpus %ld is more than cluster %s has (%lld)", gpus, c.name,
                               (long long)cluster_n_gpus(&c));
    o.global_batch = gbs > 0 ? (int)gbs : cfg.batch;
    if (o.global_batch < 2 && gbs == 0)
        return cli_usage_error("plan", "give --global-batch (sequences per step); the model file has no batch");
    layout cmp;
    if (compare) {
        st = layout_parse(compare, &cmp, msg, sizeof msg);
        if (st != PL_OK) return cli_usage_error("plan", "--compare: %s", msg);
    }

    plan_result *res = calloc(1, sizeof *res);
    if (!res) return cli_report("plan", PL_ERR_NOMEM, NULL);
    plan_progress pg = {cli_stderr_is_tty(), 0};
    st = plan_search(&cfg, &c, &o, on_progress, &pg, res, msg, sizeof msg);
    if (pg.tty) fprintf(stderr, "\r\033[K");
    int rc = CLI_EXIT_OK;
    if (st != PL_OK) {
        if (st == PL_ERR_UNSUPPORTED)
            rc = cli_report("plan", st, *msg ? msg : "the layout simulator is not built in; placer plan needs it");
        else rc = cli_report("plan", st, msg);
        goto out;
    }
    layout_result cres;
    int have_cmp = 0;
    if (compare) {
        st = plan_simulate(&cfg, &c, &cmp, o.sim, &cres, msg, sizeof msg);
        if (st != PL_OK) {
            rc = cli_report("plan", st, msg);
            goto out;
        }
        have_cmp = 1;
    }
    const plan_entry *best = res->n_top > 0 ? &res->top[0] : NULL;
    if (export_name) {
        if (!best) goto nofit;
        int chunks[LAYOUT_MAX_CHUNKS];
        st = layout_chunk_layers(&best->l, cfg.n_layers, chunks, msg, sizeof msg);
        if (st == PL_OK) st = plan_export_write(stdout, fmt, &cfg, &best->l, chunks, &best->res, msg, sizeof msg);
        if (st != PL_OK) rc = cli_report("plan", st, msg);
        fprintf(stderr, "placer plan: best of %lld layouts (%lld simulated in %.1f s): %.2f ms per step, %.2f GB of "
                        "%.2f GB per GPU\n",
                (long long)res->considered, (long long)res->simulated, res->wall_s, best->res.step_us / 1e3,
                best->res.mem.total / 1e9, best->res.mem_cap / 1e9);
        goto out;
    }
    if (json) {
        printf("{\"model\": \"%s\", \"cluster\": \"%s\", \"gpus\": %lld, \"global_batch\": %d, \"seq_len\": %d, "
               "\"precision\": \"%s\", \"search\": {\"considered\": %lld, \"pruned_memory\": %lld, "
               "\"pruned_bound\": %lld, \"simulated\": %lld, \"sim_runs\": %lld, \"sim_oom\": %lld, \"refine_runs\": %lld, "
               "\"wall_s\": %.3f}, "
               "\"fits\": %s, \"min_mem_bytes\": %lld, \"top\": [",
               mname, c.name, (long long)o.gpus, o.global_batch, cfg.seq_len, precision_name(o.prec),
               (long long)res->considered, (long long)res->pruned_memory, (long long)res->pruned_bound,
               (long long)res->simulated, (long long)res->sim_runs, (long long)res->sim_oom,
               (long long)res->refine_runs, res->wall_s, best ? "true" : "false", (long long)res->min_mem_bytes);
        for (int i = 0; i < res->n_top; i++) {
            int chunks[LAYOUT_MAX_CHUNKS];
            layout_chunk_layers(&res->top[i].l, cfg.n_layers, chunks, NULL, 0);
            printf("%s", i ? ", " : "");
            plan_export_json(stdout, &cfg, &res->top[i].l, chunks, &res->top[i].res);
        }
        printf("]");
        if (res->have_oom_best) { /* the fastest layout that does not fit, for scripts */
            int chunks[LAYOUT_MAX_CHUNKS];
            if (layout_chunk_layers(&res->oom_best.l, cfg.n_layers, chunks, NULL, 0) == PL_OK) {
                printf(", \"fastest_oom\": ");
                plan_export_json(stdout, &cfg, &res->oom_best.l, chunks, &res->oom_best.res);
            }
        }
        if (have_cmp) {
            int chunks[LAYOUT_MAX_CHUNKS];
            if (layout_chunk_layers(&cmp, cfg.n_layers, chunks, NULL, 0) == PL_OK) {
                printf(", \"compare\": ");
                plan_export_json(stdout, &cfg, &cmp, chunks, &cres);
            }
        }
        if (splits && best) compare_splits(&cfg, &c, o.sim, best, 1);
        printf("}\n");
    } else {
        printf("placer plan: %s (%d layers, d_model %d) on %s, %lld GPUs, %d x %d tokens per step, %s%s%s\n", mname,
               cfg.n_layers, cfg.d_model, c.name, (long long)o.gpus, o.global_batch, cfg.seq_len,
               precision_name(o.prec), o.framework ? ", layouts " : "",
               o.framework ? plan_framework_name((plan_framework)o.framework) : "");
        printf("layouts: %lld considered, %lld pruned by memory, %lld pruned by the step-time bound, %lld simulated "
               "(%lld runs, %lld OOM; %lld runs refining the top splits) in %.2f s\n\n",
               (long long)res->considered, (long long)res->pruned_memory, (long long)res->pruned_bound,
               (long long)res->simulated, (long long)res->sim_runs, (long long)res->sim_oom,
               (long long)res->refine_runs, res->wall_s);
        if (res->n_top > 0 || res->have_oom_best || have_cmp)
            printf("%-3s %-34s %10s %12s %7s %9s %9s  %s\n", "#", "layout", "step ms", "tokens/s", "MFU", "mem GB",
                   "free GB", "layers per chunk");
        for (int i = 0; i < res->n_top; i++) {
            char mark[16];
            snprintf(mark, sizeof mark, "%d%s", i + 1, i == 0 ? "*" : "");
            print_row(mark, &res->top[i], cfg.n_layers);
        }
        if (res->have_oom_best && (!best || res->oom_best.res.step_us < best->res.step_us))
            print_row("OOM", &res->oom_best, cfg.n_layers);
        if (have_cmp) {
            plan_entry ce = {.l = cmp, .res = cres};
            print_row("cmp", &ce, cfg.n_layers);
        }
        if (best) {
            char text[LAYOUT_MAX_CHUNKS * 4 + 256];
            layout_format(&best->l, text, sizeof text);
            printf("\n* best that fits: %s\n", text);
            print_breakdown(&best->res);
            if (have_cmp)
                printf("  against --compare: %.2f ms vs %.2f ms (%+.1f%%)%s\n", best->res.step_us / 1e3,
                       cres.step_us / 1e3, 100 * (cres.step_us / best->res.step_us - 1), cres.oom ? ", which is OOM" : "");
            if (splits) compare_splits(&cfg, &c, o.sim, best, 0);
        }
    }
    if (trace && best) {
        FILE *f = fopen(trace, "w");
        layout_sim *s = NULL;
        layout_result tr;
        if (!f) {
            rc = cli_report("plan", PL_ERR_IO, "cannot write the --trace file");
            goto out;
        }
        st = layout_sim_create(&cfg, &best->l, &c, &s, msg, sizeof msg);
        if (st == PL_OK) st = layout_sim_run(s, o.sim, 1, &tr, msg, sizeof msg);
        if (st == PL_OK) st = layout_sim_write_chrome_trace(s, f);
        layout_sim_destroy(s);
        if (fclose(f) != 0 && st == PL_OK) st = PL_ERR_IO;
        if (st != PL_OK) {
            rc = cli_report("plan", st, msg);
            goto out;
        }
        if (!json) printf("  trace: %s\n", trace);
    }
    if (best) goto out;
nofit:
    fprintf(stderr, "placer plan: no layout of %lld GPUs fits %s; the smallest needs %.2f GB per GPU%s\n",
            (long long)o.gpus, c.name, res->min_mem_bytes / 1e9,
            res->simulated ? "" : " at least (none got past the memory bound)");
    rc = CLI_EXIT_FAIL;
out:
    free(res);
    return rc;
}
