/*
 * cmd_layout.c: `placer layout` simulates one training step of one parallel
 * layout of one model on one cluster (plan/layout_eval.h does the work):
 * step time, tokens/s, TFLOP/s per GPU (model FLOPs or with recomputation),
 * MFU, the time breakdown of the critical pipeline stage, memory per GPU
 * with its parts and the OOM verdict; --explain adds the collectives'
 * algorithms and figures, --trace a Chrome trace of one pipeline replica,
 * --json all of it for scripts. This file parses the options, loads the
 * measured collectives when asked, calls layout_eval_run, prints.
 *
 * Everything the user typed is checked before the simulator runs: an
 * unknown or malformed model or cluster, a layout that does not parse or
 * cannot run on the model and cluster (layout_validate's reasons), a bad
 * --gpus, --seq or --flops: one line on stderr, exit 2.
 *
 * --collectives-from F takes the collective times of groups inside one
 * node from a machine's measurements (calib/coll_load.h: a collectives
 * file or a profile database fitted on the spot); --measured-curves
 * interpolates the measured curves themselves where a group's size
 * matches one. --attention, --dp-overlap and --grad-bytes describe the
 * software stack, as for placer plan (cli_opts.h).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"
#include "cli_print.h"
#include "coll_load.h"
#include "layout_eval.h"
#include "model_params.h"
#include "util.h"

#define CMD "layout"

static void layout_usage(FILE *f) {
    fprintf(f,
            "usage: placer layout --model FILE|PRESET --cluster NAME|FILE --layout TEXT [options]\n\n"
            "Simulates one training step of a parallel layout (tensor x context x data x\n"
            "pipeline parallelism, interleaving, recomputation, optimizer sharding) of a model\n"
            "on a cluster: step time, tokens/s, TFLOP/s per GPU, MFU, the time breakdown,\n"
            "memory per GPU and the OOM verdict. docs/layouts.md describes the model.\n\n"
            "  --model M       a Hugging Face config.json (or any .json path), or a preset:\n"
            "                  default, gpt12, gpt12,layers=24, ...\n"
            "  --cluster C     a cluster name (data/clusters/C.json, or $PLACER_CLUSTERS) or a file\n"
            "  --layout TEXT   e.g. tp=8,sp=1,pp=16,vp=4,dp=128,zero=1,mbs=1,gbs=2048,\n"
            "                  recompute=none,precision=bf16 (keys: tp sp cp pp vp dp zero mbs gbs\n"
            "                  recompute precision stages; for mixture-of-experts models also ep etp\n"
            "                  dispatcher=alltoall|allgather|flex: docs/layouts.md)\n"
            "  --gpus N        use N GPUs of the cluster (whole nodes); without dp= in the\n"
            "                  layout, dp = N / (tp cp pp)\n"
            "  --seq S         sequence length (default: a preset's own; a config's seq_length, else\n"
            "                  its max_position_embeddings up to 4096; the first line says which)\n"
            "  --flops F       model (default: no recomputation, PaLM's MFU sense) or hardware\n"
            "                  (with recomputation) for the TFLOP/s headline\n"
            "  --collectives-from F  collective times of groups inside one node from measurements:\n"
            "                  F a collectives file (placer calibrate --collectives --write F) or a\n"
            "                  profile database with collective curves (fitted here); groups that\n"
            "                  span nodes keep the cluster's model\n"
            "  --measured-curves  with --collectives-from: a group whose size matches a measured\n"
            "                  curve takes its time from the curve (log-log between measured sizes,\n"
            "                  the fitted model beyond them); else the fitted model\n"
            "  --explain       print each collective's algorithm, bytes, algbw, busbw and link, and\n"
            "                  whether its time came from the cluster model, the fitted model or a\n"
            "                  measured curve\n"
            "  --trace FILE    write a Chrome trace of one pipeline replica (Perfetto)\n"
            CLI_STACK_HELP
            "  --json          print the result as JSON\n\n"
            CLI_UNITS_HELP
            "Exit status: 0 ok (an OOM verdict is a result), 1 runtime failure, 2 bad input.\n");
}

static int parse_pos_int(const char *text, long max, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*text || *end || errno || v < 1 || v > max) return 0;
    *out = v;
    return 1;
}

typedef struct {
    layout_eval_options eval; /* what the library runs */
    cli_stack stack;          /* --attention, --dp-overlap, --grad-bytes */
    const char *coll_path;    /* --collectives-from */
    int curves;               /* --measured-curves */
    int json, explain;
    int hw_flops;             /* --flops hardware */
    int help;                 /* --help: print usage, run nothing */
} layout_args;

/* The options into *a: 0, or the exit code after one line. */
static int parse_args(int argc, char **argv, layout_args *a) {
    memset(a, 0, sizeof *a);
    cli_stack_default(&a->stack);
    const char *gpus_text = NULL, *seq_text = NULL, *flops_text = "model";
    static const struct option opts[] = {
        {"collectives-from", required_argument, 0, 'C'}, {"measured-curves", no_argument, 0, 'M'},
        {"model", required_argument, 0, 'm'},   {"cluster", required_argument, 0, 'c'},
        {"layout", required_argument, 0, 'l'},  {"gpus", required_argument, 0, 'g'},
        {"seq", required_argument, 0, 's'},     {"flops", required_argument, 0, 'f'},
        {"trace", required_argument, 0, 't'},   {"explain", no_argument, 0, 'e'},
        {"json", no_argument, 0, 'j'},          {"help", no_argument, 0, 'h'},
        CLI_STACK_OPTIONS,
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int ch, rc;
    layout_eval_options *e = &a->eval;
    while ((ch = getopt_long(argc, argv, "m:c:l:g:s:f:t:ejhC:M", opts, NULL)) != -1) {
        switch (ch) {
        case 'm': e->model = optarg; break;
        case 'c': e->cluster = optarg; break;
        case 'l': e->layout = optarg; break;
        case 'g': gpus_text = optarg; break;
        case 's': seq_text = optarg; break;
        case 'f': flops_text = optarg; break;
        case 't': e->trace_path = optarg; break;
        case 'e': a->explain = 1; break;
        case 'C': a->coll_path = optarg; break;
        case 'M': a->curves = 1; break;
        case 'j': a->json = 1; break;
        case 'h': a->help = 1; return 0;
        default:
            if ((rc = cli_stack_option(CMD, ch, optarg, &a->stack)) >= 0) {
                if (rc) return rc;
                break;
            }
            return cli_usage_error(CMD, "unknown or incomplete option '%s'; see placer layout --help", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'; see placer layout --help", argv[optind]);
    if (!e->model) return cli_usage_error(CMD, "no model: pass --model FILE or a preset (default, gpt12, ...)");
    if (!e->cluster) return cli_usage_error(CMD, "no cluster: pass --cluster NAME or FILE");
    if (!e->layout) return cli_usage_error(CMD, "no layout: pass --layout tp=..,pp=..,dp=..,mbs=..,gbs=..");
    if (a->curves && !a->coll_path)
        return cli_usage_error(CMD, "--measured-curves needs --collectives-from FILE (the curves to read)");
    if (!strcmp(flops_text, "hardware")) a->hw_flops = 1;
    else if (strcmp(flops_text, "model") != 0)
        return cli_usage_error(CMD, "unknown --flops '%s' (use model or hardware)", flops_text);
    long gpus = 0, seq = 0;
    if (gpus_text && !parse_pos_int(gpus_text, 100000000L, &gpus))
        return cli_usage_error(CMD, "--gpus '%s' is not a positive integer", gpus_text);
    if (seq_text && !parse_pos_int(seq_text, 1L << 24, &seq))
        return cli_usage_error(CMD, "--seq '%s' is not a positive integer", seq_text);
    e->gpus = gpus;
    e->seq = (int)seq;
    if (a->stack.set) e->params = &a->stack.params;
    return 0;
}

static void print_coll_json(FILE *f, const char *key, const coll_estimate *e, int last) {
    fprintf(f, "    \"%s\": {\"algo\": ", key);
    pl_json_string(f, e->algo ? e->algo : "none");
    fprintf(f, ", \"source\": ");
    pl_json_string(f, e->source ? e->source : "model");
    fprintf(f,
            ", \"time_us\": %.3f, \"bytes\": %.0f, \"n_ranks\": %d, \"n_nodes\": %d, \"n_pods\": %d, "
            "\"algbw_gbs\": %.3f, \"busbw_gbs\": %.3f, \"link_bw_gbs\": %.3f, \"latency_us\": %.3f",
            e->time_us, e->algbw * e->time_us * 1e-6, e->n_ranks, e->n_nodes, e->n_pods, e->algbw / 1e9,
            e->busbw / 1e9, e->link_bw / 1e9, e->latency_us);
    if (e->n_domains > 0 && e->n_domains != e->n_nodes) /* a domain wider than a node (bf16 clusters unchanged) */
        fprintf(f, ", \"n_domains\": %d", e->n_domains);
    fprintf(f, "}%s\n", last ? "" : ",");
}

/* The layout as text (layout_format) into buf. */
static const char *layout_text(const layout *l, char *buf, size_t n) {
    layout_format(l, buf, n);
    return buf;
}

/* Peak of the layout's precision on the cluster's first GPU type. */
static double peak_flops(const layout_eval_result *x) { return cluster_gpu_of(&x->clu, 0)->peak_flops[x->lay.prec]; }

static void print_json(const layout_args *a, const layout_eval_result *x, const coll_measured *meas) {
    const layout_result *r = &x->res;
    char lt[LAYOUT_MAX_CHUNKS * 5 + 256];
    const double peak = peak_flops(x);
    const double tflops = a->hw_flops ? r->hw_tflops_per_gpu : r->model_tflops_per_gpu;
    printf("{\n  \"model\": ");
    pl_json_string(stdout, x->model.name);
    printf(",\n  \"cluster\": ");
    pl_json_string(stdout, x->clu.name);
    printf(",\n  \"layout\": ");
    pl_json_string(stdout, layout_text(&x->lay, lt, sizeof lt));
    printf(",\n  \"gpus\": %lld,\n  \"micro_batches\": %d,\n  \"seq_len\": %d,\n", (long long)r->world,
           r->micro_batches, x->model.cfg.seq_len);
    printf("  \"step_us\": %.3f,\n  \"tokens_per_s\": %.3f,\n", r->step_us, r->tokens_per_s);
    printf("  \"model_flops\": %.6e,\n  \"hw_flops\": %.6e,\n", r->model_flops, r->hw_flops);
    printf("  \"model_tflops_per_gpu\": %.4f,\n  \"hw_tflops_per_gpu\": %.4f,\n", r->model_tflops_per_gpu,
           r->hw_tflops_per_gpu);
    printf("  \"flops\": \"%s\",\n  \"tflops_per_gpu\": %.4f,\n", a->hw_flops ? "hardware" : "model", tflops);
    printf("  \"peak_tflops\": %.3f,\n  \"mfu\": %.6f,\n  \"hfu\": %.6f,\n", peak / 1e12, r->mfu,
           peak > 0 ? r->hw_tflops_per_gpu * 1e12 / peak : 0.0);
    printf("  \"critical_stage\": %d,\n  \"breakdown_us\": ", r->critical_stage);
    cli_print_parts_json(stdout, r->parts_us, 1.0, 3);
    printf(",\n  \"memory\": {\"worst_stage\": %d, \"total\": %lld, \"params\": %lld, \"grads\": %lld, "
           "\"optimizer\": %lld, \"activations\": %lld, \"act_per_layer\": %lld, \"buffers\": %lld, "
           "\"embedding_head\": %lld, \"cap\": %lld, \"stash_layers\": %d, \"oom\": %s,",
           r->worst_stage, (long long)r->mem.total, (long long)r->mem.params, (long long)r->mem.grads,
           (long long)r->mem.optimizer, (long long)r->mem.activations, (long long)r->mem.act_per_layer,
           (long long)r->mem.buffers, (long long)r->mem.embedding_head, (long long)r->mem_cap, r->stash_layers,
           r->oom ? "true" : "false");
    if (x->lay.prec == PRECISION_FP8) /* FP8's own parts (bf16 output unchanged) */
        printf(" \"fp8_weights\": %lld, \"fp8_act_per_layer\": %lld,", (long long)r->mem.fp8_weights,
               (long long)r->mem.fp8_act_per_layer);
    printf("\n    \"per_stage\": [");
    for (int s = 0; s < x->lay.pp; s++) printf("%s%lld", s ? ", " : "", (long long)r->stage_mem[s]);
    printf("]");
    if (r->mem.expert_params > 0) /* MoE models only: a dense layout's JSON is as it was */
        printf(",\n    \"expert_params\": %lld, \"expert_grads\": %lld, \"expert_optimizer\": %lld, "
               "\"moe_activations\": %lld, \"moe_buffers\": %lld, \"ep_dispatch_us\": %.3f, "
               "\"ep_tokens_per_expert\": %.1f",
               (long long)r->mem.expert_params, (long long)r->mem.expert_grads, (long long)r->mem.expert_optimizer,
               (long long)r->mem.moe_activations, (long long)r->mem.moe_buffers, r->ep_dispatch.time_us,
               r->ep_tokens_per_expert);
    printf("},\n  \"collectives\": {\n");
    print_coll_json(stdout, "tp_allreduce", &r->tp_allreduce, 0);
    print_coll_json(stdout, "tp_allgather", &r->tp_allgather, 0);
    print_coll_json(stdout, "tp_reduce_scatter", &r->tp_reduce_scatter, 0);
    print_coll_json(stdout, "cp_allgather", &r->cp_allgather, 0);
    print_coll_json(stdout, "dp_reduce", &r->dp_reduce, 0);
    print_coll_json(stdout, "dp_allgather", &r->dp_allgather, 1);
    printf("  },\n  \"pp_send\": {\"time_us\": %.3f, \"bytes\": %.0f, \"link\": \"%s\"},\n", r->pp_send_us,
           r->pp_send_bytes, x->pp_link);
    printf("  \"collective_sources\": {\"model\": %d, \"fitted\": %d, \"measured\": %d, \"from\": ", x->n_coll_model,
           x->n_coll_fitted, x->n_coll_measured);
    if (meas) pl_json_string(stdout, meas->source);
    else printf("null");
    printf("},\n  \"dp_buckets\": %d\n}\n", r->dp_buckets);
}

/* The headline, the critical stage's time parts and memory per GPU. */
static void print_text(const layout_args *a, const layout_eval_result *x) {
    const layout_result *r = &x->res;
    char lt[LAYOUT_MAX_CHUNKS * 5 + 256], note[160];
    const double peak = peak_flops(x);
    const double tflops = a->hw_flops ? r->hw_tflops_per_gpu : r->model_tflops_per_gpu;
    const double mfu_hw = peak > 0 ? r->hw_tflops_per_gpu * 1e12 / peak : 0.0;
    plan_model_seq_note(&x->model, note, sizeof note);
    printf("%s on %s, %lld GPUs: %s; seq %d%s%s%s\n", x->model.name, x->clu.name, (long long)r->world,
           layout_text(&x->lay, lt, sizeof lt), x->model.cfg.seq_len, note[0] ? " (" : "", note, note[0] ? ")" : "");
    printf("  step          %12.3f ms   (%d micro-batches per pipeline, seq %d)\n", r->step_us / 1e3, r->micro_batches,
           x->model.cfg.seq_len);
    if (a->stack.experts_layers) { /* --experts: the placement's load factors */
        double mean = 0, mx = 0;
        for (int i = 0; i < a->stack.experts_layers; i++) {
            mean += a->stack.moe_layer_load[i] / a->stack.experts_layers;
            if (a->stack.moe_layer_load[i] > mx) mx = a->stack.moe_layer_load[i];
        }
        printf("  experts       busiest GPU over the mean %.3f (worst layer %.3f) over %d MoE layers: the placement\n",
               mean, mx, a->stack.experts_layers);
    }
    printf("  tokens/s      %12.0f\n", r->tokens_per_s);
    printf("  TFLOP/s/GPU   %12.1f      (%s FLOPs; model %.1f, with recomputation %.1f)\n", tflops,
           a->hw_flops ? "hardware" : "model", r->model_tflops_per_gpu, r->hw_tflops_per_gpu);
    printf("  MFU           %11.1f%%      of %.0f TFLOP/s %s dense (with recomputation %.1f%%)\n", 100 * r->mfu,
           peak / 1e12, precision_name(x->lay.prec), 100 * mfu_hw);
    printf("\ntime of the critical stage (%d of %d):\n", r->critical_stage, x->lay.pp);
    static const layout_time_part order[] = {LAYOUT_T_COMPUTE, LAYOUT_T_TP, LAYOUT_T_CP, LAYOUT_T_DP,
                                             LAYOUT_T_PP,      LAYOUT_T_BUBBLE, LAYOUT_T_OPTIMIZER};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const double v = r->parts_us[order[i]];
        const int exposed = order[i] >= LAYOUT_T_TP && order[i] <= LAYOUT_T_PP; /* tp, cp, dp, pp: what was not hidden */
        char label[32];
        snprintf(label, sizeof label, "%s%s", layout_time_part_name(order[i]), exposed ? " exposed" : "");
        printf("  %-12s %12.3f ms  %5.1f%%", label, v / 1e3, r->step_us > 0 ? 100 * v / r->step_us : 0.0);
        if (order[i] == LAYOUT_T_COMPUTE && r->parts_us[LAYOUT_T_RECOMPUTE] > 0)
            printf("   (of which recomputation %.3f ms)", r->parts_us[LAYOUT_T_RECOMPUTE] / 1e3);
        printf("\n");
    }
    if (r->parts_us[LAYOUT_T_EP] > 0)
        printf("  %-12s %12.3f ms  %5.1f%%   (MoE dispatch and combine; %.0f tokens per local expert)\n",
               "ep dispatch", r->parts_us[LAYOUT_T_EP] / 1e3, r->step_us > 0 ? 100 * r->parts_us[LAYOUT_T_EP] / r->step_us : 0.0,
               r->ep_tokens_per_expert);
    printf("\nmemory per GPU (stage %d, the largest): %.2f GB of %.2f GB: %s\n", r->worst_stage, cli_gb(r->mem.total),
           cli_gb(r->mem_cap), r->oom ? "OOM" : "fits");
    printf("  parameters   %9.2f GB\n  gradients    %9.2f GB\n  optimizer    %9.2f GB\n", cli_gb(r->mem.params),
           cli_gb(r->mem.grads), cli_gb(r->mem.optimizer));
    printf("  activations  %9.2f GB   (peak stash: %d layers' activations of in-flight micro-batches; %.3f GB a layer)\n",
           cli_gb(r->mem.activations), r->stash_layers, cli_gb(r->mem.act_per_layer));
    printf("  emb./head    %9.2f GB\n  buffers      %9.2f GB\n", cli_gb(r->mem.embedding_head), cli_gb(r->mem.buffers));
    if (r->mem.fp8_weights > 0 || r->mem.fp8_act_per_layer > 0)
        printf("  fp8 weights  %9.2f GB   (FP8 copies of the linear layers' weights, row-wise + transposed)\n"
               "  of which fp8 %9.3f GB a layer of the activations (the linear layers' inputs saved in FP8)\n",
               cli_gb(r->mem.fp8_weights), cli_gb(r->mem.fp8_act_per_layer));
    if (r->mem.expert_params > 0)
        printf("  experts: parameters %.2f GB, gradients %.2f, optimizer %.2f; routed activations %.2f; dispatcher "
               "buffers %.2f GB\n", cli_gb(r->mem.expert_params), cli_gb(r->mem.expert_grads),
               cli_gb(r->mem.expert_optimizer), cli_gb(r->mem.moe_activations), cli_gb(r->mem.moe_buffers));
}

typedef struct {
    const char *what;      /* e.g. "tp all-reduce (per layer, x2 forward, x2 backward)" */
    const coll_estimate *e;
} explained;

/* --explain: each collective the layout runs, the first pipeline send, the
 * buckets and where the times came from. */
static void print_explain(const layout_eval_result *x, const coll_measured *meas) {
    const layout_result *r = &x->res;
    const layout *l = &x->lay;
    const int sp = l->sp && l->tp > 1;
    printf("\ncollectives (nccl-tests figures: algbw = bytes / time; busbw by the collective's factor):\n");
    const explained ex[] = {
        {sp ? "tp all-gather (sp: x2 per layer fwd, x2 bwd)" : "tp all-gather (pipeline message, no sp)",
         &r->tp_allgather},
        {"tp reduce-scatter (sp: x2 per layer fwd, x2 bwd)", &r->tp_reduce_scatter},
        {"tp all-reduce (no sp: x2 per layer fwd, x2 bwd)", &r->tp_allreduce},
        {"cp key/value all-gather (per layer fwd)", &r->cp_allgather},
        {l->zero == ZERO_NONE ? "dp all-reduce (one stage's gradients, as one)"
                              : "dp reduce-scatter (one stage's gradients, as one)",
         &r->dp_reduce},
        {"dp parameter all-gather (one stage)", &r->dp_allgather},
    };
    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
        const coll_estimate *e = ex[i].e;
        if (e->n_ranks <= 1 || !e->algo || !strcmp(e->algo, "none")) continue;
        if ((i == 0 && !sp && l->pp == 1) || (i == 1 && !sp) || (i == 2 && sp) || (i == 5 && l->zero == ZERO_NONE))
            continue;
        const char *src = e->source ? e->source : "model";
        char dom[48] = ""; /* an NVLink domain wider than a node: say how many the group spans */
        if (e->n_domains > 0 && e->n_domains != e->n_nodes)
            snprintf(dom, sizeof dom, ", %d NVLink domain%s", e->n_domains, e->n_domains == 1 ? "" : "s");
        printf("  %s\n    %s over %d ranks (%d nodes%s, %d pods): %.1f MB in %.3f ms; algbw %.1f GB/s, busbw %.1f "
               "GB/s, %s %.1f GB/s, latency %.1f us; from %s\n",
               ex[i].what, e->algo, e->n_ranks, e->n_nodes, dom, e->n_pods, e->algbw * e->time_us * 1e-6 / 1e6,
               e->time_us / 1e3, e->algbw / 1e9, e->busbw / 1e9,
               strcmp(src, "model") ? "fitted busbw" : "slowest link", e->link_bw / 1e9, e->latency_us,
               !strcmp(src, "measured") ? "a measured curve"
               : !strcmp(src, "fitted") ? "the model fitted to measured curves"
                                        : "the cluster model");
    }
    if (l->pp > 1)
        printf("  pipeline send stage 0 -> 1 (GPU %lld -> %lld, %s): %.1f MB in %.3f ms\n", (long long)x->pp_rank0,
               (long long)x->pp_rank1, x->pp_link, r->pp_send_bytes / 1e6, r->pp_send_us / 1e3);
    if (l->dp > 1) printf("  gradient buckets on the critical stage: %d per step\n", r->dp_buckets);
    printf("  collective times computed: %d from measured curves, %d from the fitted model, %d from the cluster "
           "model%s\n",
           x->n_coll_measured, x->n_coll_fitted, x->n_coll_model, meas ? "" : " (no --collectives-from)");
    if (meas) printf("  measurements: %s\n", meas->source);
}

int cmd_layout(int argc, char **argv) {
    layout_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    if (a.help) {
        layout_usage(stdout);
        return CLI_EXIT_OK;
    }
    char msg[512] = "";
    coll_measured *meas = NULL;
    layout_eval_result *x = calloc(1, sizeof *x);
    if (!x) return cli_report(CMD, PL_ERR_NOMEM, "out of memory");
    if (a.coll_path) {
        meas = calloc(1, sizeof *meas);
        if (!meas) {
            rc = cli_report(CMD, PL_ERR_NOMEM, "out of memory");
            goto out;
        }
        pl_status st = calib_coll_load(a.coll_path, meas, msg, sizeof msg);
        if (st != PL_OK) {
            rc = cli_report(CMD, st == PL_ERR_IO ? st : PL_ERR_INVALID, msg);
            goto out;
        }
        meas->use_curves = a.curves;
        a.eval.measured = meas;
    }
    pl_status st = layout_eval_run(&a.eval, x, msg, sizeof msg);
    if (st != PL_OK) {
        rc = cli_report(CMD, st, msg);
        goto out;
    }
    if (a.stack.experts_layers) { /* an expert placement must be for this model's MoE layers and this ep */
        const int nm = gpt_moe_layers_in(&x->model.cfg, 0, x->model.cfg.n_layers);
        if (nm != a.stack.experts_layers || x->lay.ep != a.stack.experts_ep) {
            rc = cli_usage_error(CMD, "--experts: the placement is for %d MoE layers on ep %d, the layout has %d on ep %d",
                                 a.stack.experts_layers, a.stack.experts_ep, nm, x->lay.ep);
            goto out;
        }
    }
    if (a.json) {
        print_json(&a, x, meas);
    } else {
        print_text(&a, x);
        if (a.explain) print_explain(x, meas);
    }
out:
    free(x);
    free(meas);
    return rc;
}
