/*
 * cmd_plan.c: `placer plan` searches the parallel layouts of a model on a
 * cluster and prints the fastest that fit with their predicted step time,
 * throughput, MFU, memory and time breakdown, or writes the winner in a
 * training framework's own format (plan/export_plan.h). plan/plan_run.h
 * does the work (and plan_profile_run for --db, a measured profile's
 * pipelines); this file parses the options, calls it, prints text or JSON.
 * A search longer than a second shows its progress on a terminal; Ctrl-C
 * (SIGINT) stops it, prints the best layout found so far and exits 130.
 */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_json.h"
#include "cli_opts.h"
#include "cli_print.h"
#include "export_plan.h"
#include "model_arch.h"
#include "plan_run.h"
#include "util.h"

#define CMD "plan"

static void plan_usage(FILE *f) {
    fprintf(f,
            "usage: placer plan --model FILE|PRESET --cluster NAME|FILE [--gpus N]\n"
            "       placer plan --db PROFILE.db [--model PRESET] [--fix mbs=B/m] [--json]\n"
            "                   [--global-batch B] [--seq S] [--precision P] [--top K]\n"
            "                   [--max-tp N] [--max-cp N] [--max-vp N] [--max-mbs N] [--fix LIST]\n"
            "                   [--compare LAYOUT] [--splits] [--json] [--trace FILE]\n"
            "                   [--framework F] [--export megatron|torchtitan|deepspeed|json [--out DIR]]\n"
            "                   [--threads N] [--exhaustive]\n\n"
            "Searches tensor, context, pipeline (with interleaving) and data parallelism,\n"
            "micro-batch size, recomputation, optimizer sharding and the stage boundaries\n"
            "for the fastest layout that fits, predicted by the layout simulator; prints the\n"
            "top layouts with step time, tokens/s, MFU, memory per GPU and headroom, and the\n"
            "winner's time breakdown. Exits 1 when no layout fits (with the memory needed).\n\n"
            "  --model         a Hugging Face config.json, or a preset (default, gpt12, ...)\n"
            "  --cluster       a cluster file, or a name in data/clusters (placer layout lists them)\n"
            "  --gpus          GPUs to use (default: all of the cluster's)\n"
            "  --domain-gpus   GPUs used per NVLink domain (a rack the job does not fill: 64 of an\n"
            "                  NVL72's 72); ranks fill the racks that many at a time\n"
            "  --global-batch  sequences per step (default: the preset's batch)\n"
            "  --seq           sequence length (default: a preset's own; a config's seq_length, else\n"
            "                  its max_position_embeddings up to 4096; the first line says which)\n"
            "  --precision     bf16 (default), fp16, fp8, tf32 or fp32, or a list searched over:\n"
            "                  fp8 alone tries every FP8 recipe the GPUs run (delayed, tensorwise,\n"
            "                  blockwise, mxfp8), fp8=R1|R2 names recipes, bf16,fp8 both precisions\n"
            "  --top           layouts to print (default 5, at most %d)\n"
            "  --max-tp        largest tensor-parallel size tried (default: GPUs per node)\n"
            "  --max-cp        largest context-parallel size (default: keeps seq / cp >= 4096)\n"
            "  --max-vp        most virtual chunks per stage tried (default 4)\n"
            "  --max-mbs       largest micro-batch tried (default 16)\n"
            CLI_STACK_SIM_HELP
            CLI_PLAN_FRAMEWORK_HELP
            "  --reserve       GB per GPU to leave free (allocator, fragmentation); default 0\n"
            "  --fix           hold dimensions fixed, e.g. tp=8,pp=16 or dp=1,mbs=4 (keys: tp cp\n"
            "                  pp vp dp mbs recompute zero), and the stack's settings every layout\n"
            "                  takes: dispatcher=alltoall|allgather|flex, mem=A+B (placer layout's\n"
            "                  mem names: a run's memory options, docs/moe.md)\n"
            "  --compare       also simulate this layout (placer layout's text form, e.g. a\n"
            "                  published one: tp=8,pp=4,vp=3,dp=32,mbs=2,gbs=1792,recompute=full)\n"
            "  --schedules     search the pipeline orders too: all, or a list of zb-h1, zb-h2,\n"
            "                  zb-v, dualpipev, dualpipe (beside 1F1B and interleaved), and print\n"
            "                  the best layout's step under each order side by side\n"
            "  --splits        for the best layout: its stage split against the uniform split,\n"
            "                  DeepSpeed's parameters split and the hand-made near-uniform ones\n"
            "  --json          the whole plan as JSON on stdout\n"
            "  --trace         write the best layout's Chrome trace to FILE\n"
            "  --threads       threads simulating layouts (default: every core); the plan is the\n"
            "                  same for any number\n"
            "  --exhaustive    simulate every layout, no pruning (slow: for checking the search)\n"
            "  --export        the best layout in that framework's own files, at the version\n"
            "                  placer targets (Megatron-LM d98e8a6 with megatron-core 0.16.1,\n"
            "                  torchtitan 0.2.2, DeepSpeed 0.19.8; docs/exports.md); prints the\n"
            "                  first (megatron: the arguments alone; torchtitan: the TOML;\n"
            "                  deepspeed: ds_config.json; json: the plan), notes on stderr.\n"
            "                  Without --framework the search keeps only what that framework\n"
            "                  runs (predicted with Megatron's figures; --framework F sets both);\n"
            "                  a model or layout it cannot run is refused with one line (exit 2)\n"
            "  --out DIR       with --export: write all its files into DIR (megatron: args.txt,\n"
            "                  env.sh, README; torchtitan: job.toml, README and, for a flavor cut\n"
            "                  to other layers, placer_model.py; deepspeed: ds_config.json,\n"
            "                  partition.json, pipeline.py, README; each also plan.json, the\n"
            "                  plan as --export json writes it)\n"
            "  --db            plan on a measured profile instead of a cluster file: pipelines\n"
            "                  over its devices (tp = cp = dp = 1), every micro-batch count and\n"
            "                  GPipe / 1F1B, stage boundaries by the exact DP of placer search\n\n"
            CLI_UNITS_HELP,
            PLAN_MAX_TOP);
}

/* Set by SIGINT while a plan searches; the progress callback then stops
 * the search. Signal handlers need a global. */
static volatile sig_atomic_t g_interrupted = 0;

static void on_sigint(int sig) {
    (void)sig;
    g_interrupted = 1;
}

typedef struct {
    int tty;
    int shown;      /* a line is on the terminal */
    double t_last;
} progress_bar;

static void layout_short(const layout *l, char *buf, size_t n);

/* The search's progress on a terminal, once it has run a second: the
 * candidates done, what was pruned, the best so far. Non-zero (stop) after
 * Ctrl-C. */
static int on_progress(void *ctx, const plan_progress *pp) {
    progress_bar *p = ctx;
    if (g_interrupted) return 1;
    const int64_t done = pp->done, total = pp->total;
    const double now = pl_now_us();
    if (!p->tty || pp->elapsed_s < 1.0 || (now - p->t_last < 1e5 && done < total)) return 0;
    p->t_last = now;
    p->shown = 1;
    if (total == 0) { /* still enumerating */
        fprintf(stderr, "\r\033[Kplacer plan: %lld layouts considered, %lld pruned by memory so far",
                (long long)pp->considered, (long long)pp->pruned_memory);
        return 0;
    }
    const int width = 20, fill = (int)(width * done / total);
    char best[120] = "none fits yet";
    if (pp->best) {
        char lay[96];
        layout_short(&pp->best->l, lay, sizeof lay);
        snprintf(best, sizeof best, "%.2f ms %s", pp->best->res.step_us / 1e3, lay);
    }
    fprintf(stderr, "\r\033[Kplacer plan: [%.*s%*s] %lld/%lld, %lld pruned, best %s", fill, "####################",
            width - fill, "", (long long)done, (long long)total, (long long)(pp->pruned_memory + pp->pruned_bound),
            best);
    return 0;
}

/* "tp8 cp1 pp16x2 dp64 mbs1 full z1"; an MoE layout adds " ep8" (or " ep8/2" with etp 2) after dp */
static void layout_short(const layout *l, char *buf, size_t n) {
    static const char *rc[] = {"none", "sel", "full"};
    static const char *zn[] = {"z0", "z1", "z2", "z3", "fsdp"};
    int off = snprintf(buf, n, "tp%d cp%d pp%d", l->tp, l->cp, l->pp);
    if (l->vp > 1) off += snprintf(buf + off, n - (size_t)off, "x%d", l->vp);
    off += snprintf(buf + off, n - (size_t)off, " dp%d", l->dp);
    if (l->ep > 1 || l->etp > 1) off += snprintf(buf + off, n - (size_t)off, " ep%d", l->ep); /* MoE only */
    if (l->etp > 1) off += snprintf(buf + off, n - (size_t)off, "/%d", l->etp);
    off += snprintf(buf + off, n - (size_t)off, " mbs%d %s %s", l->micro_batch, rc[l->recompute], zn[l->zero]);
    if (l->prec != PRECISION_BF16 && off > 0 && (size_t)off < n) /* a precision search's rows differ in it */
        snprintf(buf + off, n - (size_t)off, " %s%s%s", precision_name(l->prec), l->prec == PRECISION_FP8 ? ":" : "",
                 l->prec == PRECISION_FP8 ? fp8_recipe_name(l->fp8) : "");
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

/* The layout column's width: 34, or the longest short form among the rows
 * (a precision search's rows carry their FP8 recipe). */
static int layout_column_width(const plan_entry *rows, int n, const plan_entry *more, int n_more) {
    int w = 34;
    char lay[96];
    for (int i = 0; i < n + n_more; i++) {
        layout_short(i < n ? &rows[i].l : &more[i - n].l, lay, sizeof lay);
        if ((int)strlen(lay) > w) w = (int)strlen(lay);
    }
    return w;
}

static void print_row(const char *mark, const plan_entry *e, int n_layers, int w) {
    char lay[96], sp[256];
    layout_short(&e->l, lay, sizeof lay);
    split_text(&e->l, n_layers, sp, sizeof sp);
    if (e->refined) {
        size_t k = strlen(sp);
        snprintf(sp + k, sizeof sp - k, " (DP + %d move%s)", e->refined, e->refined == 1 ? "" : "s");
    }
    const layout_result *r = &e->res;
    printf("%-3s %-*s %10.2f %12.0f %6.1f%% %9.2f %9.2f  %s\n", mark, w, lay, r->step_us / 1e3, r->tokens_per_s,
           100 * r->mfu, cli_gb(r->mem.total), cli_gb(r->mem_cap - r->mem.total), sp);
}

static void print_breakdown(const layout_result *r) {
    printf("  time:");
    for (int p = 0, first = 1; p < LAYOUT_T_COUNT; p++)
        if ((p != LAYOUT_T_RECOMPUTE && !layout_time_part_optional((layout_time_part)p)) || r->parts_us[p] > 0) {
            printf("%s %s %.2f ms", first ? "" : ",", layout_time_part_name((layout_time_part)p), r->parts_us[p] / 1e3);
            first = 0;
        }
    printf("\n  memory (stage %d of the worst): params %.2f GB, grads %.2f, optimizer %.2f, activations %.2f, "
           "buffers %.2f, embedding/head %.2f = %.2f GB of %.2f GB\n",
           r->worst_stage, cli_gb(r->mem.params), cli_gb(r->mem.grads), cli_gb(r->mem.optimizer),
           cli_gb(r->mem.activations), cli_gb(r->mem.buffers), cli_gb(r->mem.embedding_head), cli_gb(r->mem.total),
           cli_gb(r->mem_cap));
    if (r->mem.expert_params > 0) /* MoE: the parts above are the dense (replicated) ones */
        printf("  experts (in the total): parameters %.2f GB, gradients %.2f, optimizer %.2f, routed activations "
               "%.2f, dispatcher buffers %.2f\n", cli_gb(r->mem.expert_params), cli_gb(r->mem.expert_grads),
               cli_gb(r->mem.expert_optimizer), cli_gb(r->mem.moe_activations), cli_gb(r->mem.moe_buffers));
    if (r->mem.fp8_weights > 0)
        printf("  fp8 weight copies (in the total): %.2f GB\n", cli_gb(r->mem.fp8_weights));
    printf("  %.1f TFLOP/s per GPU of model FLOPs (%.1f with recompute), %d micro-batches per pipeline\n",
           r->model_tflops_per_gpu, r->hw_tflops_per_gpu, r->micro_batches);
}

typedef struct {
    plan_run_options run;      /* what the library runs (run.search: plan_search's options) */
    cli_stack stack;           /* --attention, --dp-overlap, --grad-bytes */
    const char *db;            /* --db */
    const char *export_name;   /* --export */
    plan_export_format fmt;    /* its format */
    const char *out_dir;       /* --out: the export's files go there */
    int json;
    int help;                  /* --help: print usage, run nothing */
} plan_args;

/* One option of the cluster path's table into *a: 0, or the exit code. */
static int parse_one(int ch, const char *arg, plan_args *a) {
    plan_options *o = &a->run.search;
    char msg[512] = "";
    long v = 0;
    int rc = 0;
    switch (ch) {
    case 'm': a->run.model = arg; break;
    case 'c': a->run.cluster = arg; break;
    case 'n': rc = cli_long_arg(CMD, "--gpus", arg, 1, 1L << 30, &v); a->run.gpus = v; break;
    case 0x2000: rc = cli_long_arg(CMD, "--domain-gpus", arg, 1, 1L << 20, &v); a->run.domain_gpus = v; break;
    case 'b': rc = cli_long_arg(CMD, "--global-batch", arg, 1, 1L << 30, &v); a->run.global_batch = (int)v; break;
    case 's': rc = cli_long_arg(CMD, "--seq", arg, 1, 1L << 24, &v); a->run.seq = (int)v; break;
    case 'p':
        if (plan_parse_precisions(arg, o, msg, sizeof msg) != PL_OK) return cli_usage_error(CMD, "%s", msg);
        break;
    case 'k': rc = cli_long_arg(CMD, "--top", arg, 1, PLAN_MAX_TOP, &v); o->top_k = (int)v; break;
    case 'T': rc = cli_long_arg(CMD, "--max-tp", arg, 1, 1024, &v); o->max_tp = (int)v; break;
    case 'C': rc = cli_long_arg(CMD, "--max-cp", arg, 1, 1024, &v); o->max_cp = (int)v; break;
    case 'V': rc = cli_long_arg(CMD, "--max-vp", arg, 1, 64, &v); o->max_vp = (int)v; break;
    case 'M': rc = cli_long_arg(CMD, "--max-mbs", arg, 1, 4096, &v); o->max_mbs = (int)v; break;
    case 'x': a->run.compare = arg; break;
    case 'd': a->db = arg; break;
    case 'R': {
        double gb = 0;
        if (!cli_double_arg(arg, &gb) || !(gb >= 0 && gb < 1e6))
            return cli_usage_error(CMD, "--reserve takes GB per GPU (e.g. 4), not '%s'", arg);
        o->reserve_bytes = (int64_t)(gb * CLI_GB);
        break;
    }
    case 'F':
        if (plan_parse_fixed(arg, o, msg, sizeof msg) != PL_OK) return cli_usage_error(CMD, "--fix: %s", msg);
        break;
    case 'S': a->run.splits = 1; break;
    case 'Q': /* --schedules all|LIST */
        a->run.schedules = 1;
        for (const char *q = arg; q && *q;) {
            const char *e = strchr(q, ',');
            char name[32];
            const size_t w = e ? (size_t)(e - q) : strlen(q);
            snprintf(name, sizeof name, "%.*s", (int)(w < sizeof name ? w : sizeof name - 1), q);
            schedule_order so;
            char sm[160];
            if (!strcmp(name, "all")) o->sched_mask |= 1u << SCHED_ZB_H1 | 1u << SCHED_ZB_H2 | 1u << SCHED_ZB_V |
                                                       1u << SCHED_DUALPIPEV | 1u << SCHED_DUALPIPE;
            else if (schedule_parse_order(name, &so, sm, sizeof sm) == PL_OK && schedule_splits_backward(so))
                o->sched_mask |= 1u << so;
            else
                return cli_usage_error(CMD, "--schedules '%s': use all, or zb-h1, zb-h2, zb-v, dualpipev, dualpipe (all: "
                                            "the five)", name);
            q = e ? e + 1 : NULL;
        }
        break;
    case 'j': a->json = 1; break;
    case 'N': rc = cli_long_arg(CMD, "--threads", arg, 1, 1024, &v); o->threads = (int)v; break;
    case 'X': o->exhaustive = 1; break;
    case 't': a->run.trace_path = arg; break;
    case 'e':
        if (plan_export_parse_format(arg, &a->fmt, msg, sizeof msg) != PL_OK) return cli_usage_error(CMD, "%s", msg);
        a->export_name = arg;
        break;
    case 'o':
        if (!*arg) return cli_usage_error(CMD, "--out takes a directory");
        a->out_dir = arg;
        break;
    default: rc = cli_stack_option(CMD, ch, arg, &a->stack); break;
    }
    return rc;
}

/* The options into *a: 0, or the exit code after one line. */
static int parse_args(int argc, char **argv, plan_args *a) {
    memset(a, 0, sizeof *a);
    plan_options_default(&a->run.search);
    cli_stack_default(&a->stack);
    a->stack.plans = 1; /* --framework also names what the plan runs on */
    a->fmt = PLAN_EXPORT_JSON;
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},    {"cluster", required_argument, 0, 'c'},
        {"gpus", required_argument, 0, 'n'},     {"global-batch", required_argument, 0, 'b'},
        {"domain-gpus", required_argument, 0, 0x2000},
        {"seq", required_argument, 0, 's'},      {"precision", required_argument, 0, 'p'},
        {"top", required_argument, 0, 'k'},      {"max-tp", required_argument, 0, 'T'},
        {"max-cp", required_argument, 0, 'C'},   {"max-vp", required_argument, 0, 'V'},
        {"max-mbs", required_argument, 0, 'M'},  {"compare", required_argument, 0, 'x'},
        {"splits", no_argument, 0, 'S'},         {"json", no_argument, 0, 'j'},
        {"schedules", required_argument, 0, 'Q'},
        {"trace", required_argument, 0, 't'},    {"export", required_argument, 0, 'e'},
        {"fix", required_argument, 0, 'F'},      {"db", required_argument, 0, 'd'},
        {"out", required_argument, 0, 'o'},
        CLI_STACK_OPTIONS,                       {"for", required_argument, 0, CLI_OPT_FRAMEWORK}, /* alias */
        {"reserve", required_argument, 0, 'R'},
        {"threads", required_argument, 0, 'N'},  {"exhaustive", no_argument, 0, 'X'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int ch, rc;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (ch == 'h') {
            a->help = 1;
            return 0;
        }
        if (ch == '?' || ch == ':')
            return cli_usage_error(CMD, "unknown or incomplete option '%s'; see placer plan --help", argv[optind - 1]);
        if ((rc = parse_one(ch, optarg, a)) != 0) return rc;
    }
    plan_run_options *r = &a->run;
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'; see placer plan --help", argv[optind]);
    if (a->stack.set) r->search.sim = &a->stack.params;
    if (a->stack.fw_set) r->search.framework = a->stack.runs;
    else if (a->export_name)
        r->search.framework = a->fmt == PLAN_EXPORT_MEGATRON     ? PLAN_FRAMEWORK_MEGATRON
                              : a->fmt == PLAN_EXPORT_TORCHTITAN ? PLAN_FRAMEWORK_TORCHTITAN
                              : a->fmt == PLAN_EXPORT_DEEPSPEED  ? PLAN_FRAMEWORK_DEEPSPEED
                                                                 : PLAN_FRAMEWORK_ANY;
    if (a->db) {
        if (a->stack.set)
            return cli_usage_error(CMD, "--db uses the profile's calibrated simulator; --attention, --dp-overlap and "
                                        "--grad-bytes need a cluster");
        if (r->cluster || r->compare || r->trace_path || a->export_name || a->out_dir || r->splits || r->gpus ||
            r->global_batch || r->seq)
            return cli_usage_error(CMD, "--db plans on the profile's own devices and batch; --cluster, --gpus, "
                                        "--global-batch, --seq, --compare, --splits, --trace and --export need a "
                                        "cluster (drop --db)");
        return 0;
    }
    if (!r->model) return cli_usage_error(CMD, "--model is required (a config.json or a preset such as gpt12)");
    if (!r->cluster) return cli_usage_error(CMD, "--cluster is required (a name in data/clusters or a file)");
    if (a->json && a->export_name) return cli_usage_error(CMD, "--json and --export both write stdout; give one");
    if (a->out_dir && !a->export_name) return cli_usage_error(CMD, "--out writes an export's files: give --export too");
    /* the export path writes no trace */
    if (a->export_name) r->trace_path = NULL;
    return 0;
}

/* placer plan --db: the pipelines of a measured profile (plan_profile.h). */
static int plan_on_profile(const plan_args *a) {
    const plan_options *o = &a->run.search;
    const char *db = a->db;
    const int json = a->json;
    plan_profile_result r;
    char msg[512] = "";
    pl_status st = plan_profile_run(db, a->run.model, o, &r, msg, sizeof msg);
    if (st != PL_OK) return cli_report(CMD, st, msg);
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
        size_t p = 0, q = 0;
        for (int s = 0; s < e->pp; s++) {
            p += (size_t)snprintf(devs + p, sizeof devs - p, "%s%d", s ? "," : "", e->stage_dev[s]);
            q += (size_t)snprintf(lay + q, sizeof lay - q, "%s%d", s ? (json ? "," : "/") : "", e->stage_layers[s]);
        }
        if (json)
            printf("%s{\"micro_batches\": %d, \"mbs\": %d, \"schedule\": \"%s\", \"pp\": %d, \"devices\": [%s], "
                   "\"stage_layers\": [%s], \"step_ms\": %.6f, \"peak_bytes\": %lld, \"oom\": %s}",
                   shown ? ", " : "", e->micro_batches, r.batch / e->micro_batches, e->schedule ? "1f1b" : "gpipe", e->pp,
                   devs, lay, e->ev.step_us / 1e3, (long long)e->ev.peak_bytes, e->ev.oom ? "true" : "false");
        else
            printf("%-3d %4d %-6s %3d %-12s %-16s %10.3f %9.2f%s\n", shown + 1, e->micro_batches,
                   e->schedule ? "1f1b" : "gpipe", e->pp, devs, lay, e->ev.step_us / 1e3, cli_gb(e->ev.peak_bytes),
                   e->ev.oom ? "  OOM" : (i == best_fit ? "  *" : ""));
        shown++;
    }
    if (json) printf("]}\n");
    plan_profile_result_free(&r);
    if (shown == 0) return cli_usage_error(CMD, "no pipeline of the profile matches --fix");
    if (best_fit < 0) {
        fprintf(stderr, "placer plan: no pipeline of %s fits its devices' memory\n", db);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

static void print_splits_text(const plan_run_result *x) {
    const layout *best = &x->best->l;
    printf("\nstage splits of the best layout (same simulator):\n");
    for (int i = 0; i < x->n_splits; i++) {
        const plan_split_row *w = &x->splits[i];
        char sp[256];
        if (!w->ok) {
            const char *why = best->vp > 1 ? "vp > 1: DeepSpeed has no interleaving"
                                           : "leaves a stage without a transformer layer";
            if (i == 3) why = best->vp > 1 ? "hand splits are for vp = 1" : "none expressible";
            printf("  %-26s  n/a (%s)\n", w->label, why);
            continue;
        }
        split_text(&w->e.l, x->model.cfg.n_layers, sp, sizeof sp);
        printf("  %-26s %10.3f ms %s %-8s %s\n", w->label, w->e.res.step_us / 1e3, w->e.res.oom ? "OOM" : "   ", "",
               sp);
    }
}

static void print_text(const plan_run_result *x, const plan_run_options *o) {
    const plan_result *res = x->res;
    const gpt_config *cfg = &x->model.cfg;
    const plan_options *so = &x->search;
    char note[160], precs[256] = "";
    plan_model_seq_note(&x->model, note, sizeof note);
    if (so->n_prec > 0) /* a precision search: the list, fp8 with its recipe */
        for (int i = 0, off = 0; i < so->n_prec && off < (int)sizeof precs; i++)
            off += snprintf(precs + off, sizeof precs - (size_t)off, "%s%s%s%s", i ? "," : "",
                            precision_name(so->precs[i]), so->precs[i] == PRECISION_FP8 ? "=" : "",
                            so->precs[i] == PRECISION_FP8 ? fp8_recipe_name(so->fp8s[i]) : "");
    else if (so->prec == PRECISION_FP8)
        snprintf(precs, sizeof precs, "fp8=%s", fp8_recipe_name(so->fp8));
    else
        snprintf(precs, sizeof precs, "%s", precision_name(so->prec));
    char moe[96] = ""; /* MoE: total and active parameters (dense models: as before) */
    cli_moe_params_note(cfg, moe, sizeof moe);
    if (moe[0]) moe[strlen(moe) - 1] = 0, memmove(moe, moe + 2, strlen(moe + 2) + 1); /* " (X, Y)" -> "X, Y" */
    printf("placer plan: %s (%d layers, d_model %d%s%s) on %s, %lld GPUs, %d x %d tokens per step%s%s%s, %s%s%s\n",
           x->model.name, cfg->n_layers, cfg->d_model, moe[0] ? "; " : "", moe, x->clu.name, (long long)so->gpus,
           so->global_batch, cfg->seq_len,
           note[0] ? " (seq: " : "", note, note[0] ? ")" : "", precs, so->framework ? ", layouts " : "",
           so->framework ? plan_framework_name(so->framework) : "");
    printf("layouts: %lld considered, %lld pruned by memory, %lld pruned by the step-time bound, %lld simulated "
           "(%lld runs, %lld OOM; %lld runs refining the top splits) in %.2f s\n\n",
           (long long)res->considered, (long long)res->pruned_memory, (long long)res->pruned_bound,
           (long long)res->simulated, (long long)res->sim_runs, (long long)res->sim_oom, (long long)res->refine_runs,
           res->wall_s);
    const int w = layout_column_width(res->top, res->n_top, x->have_cmp ? &x->cmp : NULL, x->have_cmp ? 1 : 0);
    if (res->n_top > 0 || res->have_oom_best || x->have_cmp)
        printf("%-3s %-*s %10s %12s %7s %9s %9s  %s\n", "#", w, "layout", "step ms", "tokens/s", "MFU", "mem GB",
               "free GB", "layers per chunk");
    for (int i = 0; i < res->n_top; i++) {
        char mark[16];
        snprintf(mark, sizeof mark, "%d%s", i + 1, i == 0 ? "*" : "");
        print_row(mark, &res->top[i], cfg->n_layers, w);
    }
    if (res->have_oom_best && (!x->best || res->oom_best.res.step_us < x->best->res.step_us))
        print_row("OOM", &res->oom_best, cfg->n_layers, w);
    if (x->have_cmp) print_row("cmp", &x->cmp, cfg->n_layers, w);
    if (!x->best) return;
    char text[LAYOUT_MAX_CHUNKS * 4 + 256];
    layout_format(&x->best->l, text, sizeof text);
    printf("\n* best that fits: %s\n", text);
    print_breakdown(&x->best->res);
    if (x->have_cmp)
        printf("  against --compare: %.2f ms vs %.2f ms (%+.1f%%)%s\n", x->best->res.step_us / 1e3,
               x->cmp.res.step_us / 1e3, 100 * (x->cmp.res.step_us / x->best->res.step_us - 1),
               x->cmp.res.oom ? ", which is OOM" : "");
    if (x->n_splits) print_splits_text(x);
    if (x->n_sched) {
        printf("\nthe best layout under each pipeline order (same simulator, uniform chunks):\n");
        for (int i = 0; i < x->n_sched; i++) {
            const plan_sched_row *w = &x->sched[i];
            const char *name = w->sched == SCHED_INTERLEAVED ? "interleaved (vp 2)" : schedule_order_name(w->sched);
            if (!w->ok) {
                printf("  %-18s  n/a (%s)\n", name, w->why);
                continue;
            }
            printf("  %-18s %10.2f ms  bubble %8.2f ms  %7.2f GB %s\n", name, w->step_us / 1e3, w->bubble_us / 1e3,
                   cli_gb(w->peak_bytes), w->fits ? "fits" : "OOM");
        }
    }
    if (o->trace_path) printf("  trace: %s\n", o->trace_path);
}

/* --export: only the best layout, in the framework's files: the first on
 * stdout and the notes on stderr, or all of them into --out DIR. A model or
 * layout the framework cannot run is refused with one line. */
static int print_export(const plan_args *a, const plan_run_result *x) {
    const plan_entry *best = x->best;
    char msg[512] = "";
    int chunks[LAYOUT_MAX_CHUNKS];
    model_arch arch;
    pl_status st = model_arch_load(a->run.model, &arch, msg, sizeof msg);
    if (st == PL_OK) st = layout_chunk_layers(&best->l, x->model.cfg.n_layers, chunks, msg, sizeof msg);
    if (st != PL_OK) return cli_report(CMD, st, msg);
    const plan_export_in in = {&x->model.cfg, &arch, x->model.name, &best->l, chunks, &best->res,
                               x->search.framework};
    plan_export_files out;
    st = plan_export_build(a->fmt, &in, &out, msg, sizeof msg);
    if (st == PL_OK && a->out_dir) st = plan_export_save(&out, a->out_dir, msg, sizeof msg);
    if (st != PL_OK) {
        plan_export_files_free(&out);
        return cli_report(CMD, st, msg);
    }
    if (!a->out_dir) fputs(out.text[0], stdout);
    fprintf(stderr, "placer plan: best of %lld layouts (%lld simulated in %.1f s): %.2f ms per step, %.2f GB of "
                    "%.2f GB per GPU\n",
            (long long)x->res->considered, (long long)x->res->simulated, x->res->wall_s, best->res.step_us / 1e3,
            cli_gb(best->res.mem.total), cli_gb(best->res.mem_cap));
    if (a->out_dir) {
        fprintf(stderr, "placer plan: wrote");
        for (int i = 0; i < out.n; i++) fprintf(stderr, "%s %s/%s", i ? "," : "", a->out_dir, out.name[i]);
        fprintf(stderr, "\n");
    } else {
        for (int i = 0; i < out.n_notes; i++) fprintf(stderr, "placer plan: note: %s\n", out.notes[i]);
    }
    plan_export_files_free(&out);
    return CLI_EXIT_OK;
}

/* With a framework to plan for (--framework, or --export's), the model and
 * the fixed dimensions, precisions and orders asked for must leave it
 * something to run: else one line says what it lacks (exit 2), rather than
 * a search that finds nothing. 0, or the exit code. */
static int check_framework(const plan_args *a) {
    const plan_options *o = &a->run.search;
    plan_framework f = o->framework;
    if (a->export_name && plan_export_framework(a->fmt) != PLAN_FRAMEWORK_ANY) f = plan_export_framework(a->fmt);
    if (f == PLAN_FRAMEWORK_ANY) return 0;
    plan_model m;
    model_arch arch;
    char msg[512] = "", why[320] = "";
    if (plan_model_load(a->run.model, a->run.seq, &m, msg, sizeof msg) != PL_OK ||
        model_arch_load(a->run.model, &arch, msg, sizeof msg) != PL_OK)
        return 0; /* plan_run reports a bad model with its own message */
    if (!plan_framework_model_runs(f, &m.cfg, &arch, why, sizeof why)) return cli_usage_error(CMD, "%s", why);
    plan_framework_ask ask = {o->fix_tp, o->fix_cp, o->fix_pp, o->fix_vp, o->fix_dp, o->fix_zero, o->fix_recompute,
                              o->n_prec, {0}, {0}, o->sched_mask};
    if (o->n_prec == 0) {
        ask.n_prec = 1;
        ask.prec[0] = o->prec;
        ask.fp8[0] = o->fp8;
    }
    for (int i = 0; i < o->n_prec && i < 8; i++) {
        ask.prec[i] = o->precs[i];
        ask.fp8[i] = o->fp8s[i];
    }
    if (!plan_framework_ask_runs(f, &m.cfg, &ask, why, sizeof why)) return cli_usage_error(CMD, "%s", why);
    return 0;
}

int cmd_plan(int argc, char **argv) {
    plan_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    if (a.help) {
        plan_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (a.db) return plan_on_profile(&a);
    if ((rc = check_framework(&a)) != 0) return rc;
    progress_bar pg = {cli_stderr_is_tty(), 0, 0};
    a.run.progress = on_progress;
    a.run.progress_ctx = &pg;
    /* Ctrl-C stops the search; the best found so far is printed */
    struct sigaction sa, old_int;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    g_interrupted = 0;
    sigaction(SIGINT, &sa, &old_int);
    plan_run_result x;
    char msg[512] = "";
    pl_status st = plan_run(&a.run, &x, msg, sizeof msg);
    sigaction(SIGINT, &old_int, NULL);
    if (pg.shown) fprintf(stderr, "\r\033[K");
    if (st == PL_OK) cli_warn_moe_stack(CMD, a.stack.fw_set ? &a.stack.fw : NULL, &x.model.cfg);
    if (st == PL_ERR_INTERRUPTED && g_interrupted) {
        fprintf(stderr, "placer plan: interrupted: %s; the best layout found so far:\n", msg);
        if (x.best && !a.json && !a.export_name) print_text(&x, &a.run);
        else if (x.best && a.json) cli_json_plan(stdout, &x);
        else if (x.best) print_export(&a, &x);
        else fprintf(stderr, "placer plan: no layout that fits was found before the interrupt\n");
        plan_run_free(&x);
        return 130;
    }
    if (st != PL_OK) rc = cli_report(CMD, st, msg);
    else if (x.best && a.export_name) rc = print_export(&a, &x);
    else if (a.json) cli_json_plan(stdout, &x);
    else if (!a.export_name) print_text(&x, &a.run);
    if (st == PL_OK && !x.best) {
        fprintf(stderr, "placer plan: no layout of %lld GPUs fits %s; the smallest needs %.2f GB per GPU%s\n",
                (long long)x.search.gpus, x.clu.name, cli_gb(x.res->min_mem_bytes),
                x.res->simulated ? "" : " at least (none got past the memory bound)");
        rc = CLI_EXIT_FAIL;
    }
    plan_run_free(&x);
    return rc;
}
