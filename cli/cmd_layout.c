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
#include "model_params.h"
#include "cli_json.h"
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
            "                  recompute=none,precision=bf16. Keys (docs/layouts.md):\n"
            "                    tp sp cp pp vp dp zero=0|1|2|3|fsdp mbs gbs recompute=none|selective|full\n"
            "                    precision=fp32|tf32|bf16|fp16|fp8 stages=7/8/8/7 fp8=tensorwise|delayed|blockwise|mxfp8\n"
            "                    sched=zb-h1|zb-h2|zb-v|dualpipev|dualpipe (zb-v, dualpipev, dualpipe: vp=2)\n"
            "                    mem=none|norm_mla+fp8_act+bf16_moments+mtp_last+fp32_grads\n"
            "                      (what a run kept: docs/moe.md gives each one's source)\n"
            "                  and for mixture-of-experts models (docs/moe.md):\n"
            "                    ep etp dispatcher=alltoall|allgather|flex overlap=none|ep\n"
            "  --gpus N        use N GPUs of the cluster (whole nodes); without dp= in the\n"
            "                  layout, dp = N / (tp cp pp)\n"
            "  --domain-gpus N use N GPUs of each NVLink domain (a rack the job does not fill:\n"
            "                  NVIDIA's GB200 runs use 64 of an NVL72's 72); ranks fill the racks N at\n"
            "                  a time, so an all-to-all of N consecutive ranks stays on NVLink\n"
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
    const char *gpus_text = NULL, *seq_text = NULL, *flops_text = "model", *dom_text = NULL;
    enum { OPT_DOMAIN_GPUS = 0x2000 };
    static const struct option opts[] = {
        {"domain-gpus", required_argument, 0, OPT_DOMAIN_GPUS},
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
        case OPT_DOMAIN_GPUS: dom_text = optarg; break;
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
    long dom = 0;
    if (dom_text && !parse_pos_int(dom_text, 1L << 20, &dom))
        return cli_usage_error(CMD, "--domain-gpus '%s' is not a positive integer", dom_text);
    e->gpus = gpus;
    e->domain_gpus = dom;
    e->seq = (int)seq;
    if (a->stack.set) e->params = &a->stack.params;
    return 0;
}

/* The layout as text (layout_format) into buf. */
static const char *layout_text(const layout *l, char *buf, size_t n) {
    layout_format(l, buf, n);
    return buf;
}

/* Peak of the layout's precision on the cluster's first GPU type. */
static double peak_flops(const layout_eval_result *x) { return cluster_gpu_of(&x->clu, 0)->peak_flops[x->lay.prec]; }

/* The headline, the critical stage's time parts and memory per GPU. */
static void print_text(const layout_args *a, const layout_eval_result *x) {
    const layout_result *r = &x->res;
    char lt[LAYOUT_MAX_CHUNKS * 5 + 256], note[160];
    const double peak = peak_flops(x);
    const double tflops = a->hw_flops ? r->hw_tflops_per_gpu : r->model_tflops_per_gpu;
    const double mfu_hw = peak > 0 ? r->hw_tflops_per_gpu * 1e12 / peak : 0.0;
    plan_model_seq_note(&x->model, note, sizeof note);
    char moe[96] = "";
    cli_moe_params_note(&x->model.cfg, moe, sizeof moe);
    printf("%s%s on %s, %lld GPUs: %s; seq %d%s%s%s\n", x->model.name, moe, x->clu.name, (long long)r->world,
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
    if (gpt_is_moe(&x->model.cfg) && x->lay.pp > 1)
        printf("\ntime of stage %d of %d, the one with the most work (it bounds the step):\n", r->critical_stage,
               x->lay.pp);
    else
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
    if (r->parts_us[LAYOUT_T_HIDDEN] > 0)
        printf("  %-12s %12.3f ms  %5.1f%%   (communication counted above that paired ops hid under the other "
               "micro-batch's compute: %s)\n",
               "hidden", -r->parts_us[LAYOUT_T_HIDDEN] / 1e3,
               r->step_us > 0 ? -100 * r->parts_us[LAYOUT_T_HIDDEN] / r->step_us : 0.0, cli_overlap_note(&x->lay));
    if (r->stages_differ) {
        printf("per stage (compute incl. recompute, MoE dispatch, idle waiting for pipeline data):\n");
        for (int s = 0; s < x->lay.pp; s++)
            printf("  stage %-3d compute %10.3f ms  dispatch %9.3f ms  idle %9.3f ms%s\n", s,
                   r->stage_compute_us[s] / 1e3, r->stage_ep_us[s] / 1e3, r->stage_idle_us[s] / 1e3,
                   s == r->critical_stage ? "  (bounds the step)" : "");
    }
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
    cli_warn_moe_stack(CMD, a.stack.fw_set ? &a.stack.fw : NULL, &x->model.cfg);
    if (a.stack.experts_layers) { /* an expert placement must be for this model's MoE layers and this ep */
        const int nm = gpt_moe_layers_in(&x->model.cfg, 0, x->model.cfg.n_layers);
        if (nm != a.stack.experts_layers || x->lay.ep != a.stack.experts_ep) {
            rc = cli_usage_error(CMD, "--experts: the placement is for %d MoE layers on ep %d, the layout has %d on ep %d",
                                 a.stack.experts_layers, a.stack.experts_ep, nm, x->lay.ep);
            goto out;
        }
    }
    if (a.json) {
        cli_json_layout(stdout, x, a.hw_flops, meas);
    } else {
        print_text(&a, x);
        if (a.explain) print_explain(x, meas);
    }
out:
    free(x);
    free(meas);
    return rc;
}
